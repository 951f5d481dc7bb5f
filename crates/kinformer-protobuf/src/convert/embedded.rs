//! The JSON that protobuf carries inside a `bytes` field (`FieldsV1`, `RawExtension`, `JSON`),
//! parsed in one pass straight into a `serde_json::Value`.
//!
//! These documents are small (a pod's managed fields are a few hundred bytes each) and made of
//! objects, plain strings and `{}`. The tape parser that kinformer-core uses for whole objects
//! copies its input and builds a tape before it builds the value, which only pays off on large
//! documents; here it was most of the cost of the managed fields. So the common shape is
//! parsed here, in one pass with the input checked as UTF-8 once, and anything else (numbers
//! other than small integers, `\u` escapes, nesting past the limit, malformed bytes) is left to
//! the general parser, whose value or error stands. What this parser accepts it parses to the
//! value `serde_json` gives, which a property test checks.

use serde_json::{Map, Value};

/// How deep arrays and objects may nest here: as deep as `serde_json` takes them (it refuses the
/// 128th level), so a document deeper than this goes to the general parser, which refuses it.
const MAX_DEPTH: u32 = 127;

/// Parses `text` into a value, or `None` where the general parser must decide.
pub(crate) fn parse(bytes: &[u8]) -> Option<Value> {
    let text = crate::utf8::text(bytes)?;
    let mut p = Parser { text, pos: 0 };
    let value = p.value(0)?;
    p.whitespace();
    (p.pos == text.len()).then_some(value)
}

/// A cursor over the whole document. Every position it stops at follows an ASCII byte it has
/// matched, so every slice it takes is on a character boundary (and `get` checks it).
struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    /// The literal `word` at the cursor, consumed.
    fn literal(&mut self, word: &str) -> Option<()> {
        let end = self.pos + word.len();
        (self.text.get(self.pos..end)? == word).then(|| self.pos = end)
    }

    fn value(&mut self, depth: u32) -> Option<Value> {
        self.whitespace();
        match self.peek()? {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => self.string().map(Value::String),
            b't' => self.literal("true").map(|()| Value::Bool(true)),
            b'f' => self.literal("false").map(|()| Value::Bool(false)),
            b'n' => self.literal("null").map(|()| Value::Null),
            b'0'..=b'9' => self.integer(),
            _ => None,
        }
    }

    /// Steps into the object or array whose opening byte is at `pos`, `depth` levels deep: `None`
    /// past the depth limit or at the end of the input, `Some(true)` when `close` follows at
    /// once (an empty object or array, consumed whole).
    fn open(&mut self, depth: u32, close: u8) -> Option<bool> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.pos += 1;
        self.whitespace();
        let empty = self.peek()? == close;
        if empty {
            self.pos += 1;
        }
        Some(empty)
    }

    fn object(&mut self, depth: u32) -> Option<Value> {
        let mut map = Map::new();
        if self.open(depth, b'}')? {
            return Some(Value::Object(map));
        }
        loop {
            self.whitespace();
            if self.peek()? != b'"' {
                return None;
            }
            let key = self.string()?;
            self.whitespace();
            if self.peek()? != b':' {
                return None;
            }
            self.pos += 1;
            self.whitespace();
            // `{}`, the leaf of managed fields, without a call.
            let value = if self.text.as_bytes().get(self.pos..self.pos + 2) == Some(b"{}") {
                if depth + 1 > MAX_DEPTH {
                    return None;
                }
                self.pos += 2;
                Value::Object(Map::new())
            } else {
                self.value(depth)?
            };
            // A key seen twice keeps its last value, as serde_json's map does.
            map.insert(key, value);
            self.whitespace();
            match self.peek()? {
                b',' => self.pos += 1,
                b'}' => {
                    self.pos += 1;
                    return Some(Value::Object(map));
                }
                _ => return None,
            }
        }
    }

    fn array(&mut self, depth: u32) -> Option<Value> {
        let mut items = Vec::new();
        if self.open(depth, b']')? {
            return Some(Value::Array(items));
        }
        loop {
            items.push(self.value(depth)?);
            self.whitespace();
            match self.peek()? {
                b',' => self.pos += 1,
                b']' => {
                    self.pos += 1;
                    return Some(Value::Array(items));
                }
                _ => return None,
            }
        }
    }

    /// A string at the cursor's quote. Plain runs are copied whole; of the escapes, all but
    /// `\u` are decoded here.
    fn string(&mut self) -> Option<String> {
        self.pos += 1;
        let bytes = self.text.as_bytes();
        let start = self.pos;
        let run_end = |from: usize| special(bytes, from);
        let end = run_end(start)?;
        if bytes[end] == b'"' {
            self.pos = end + 1;
            return self.text.get(start..end).map(str::to_owned);
        }
        let mut out = String::with_capacity(end - start + 8);
        let mut from = start;
        let mut at = end;
        loop {
            out.push_str(self.text.get(from..at)?);
            match bytes[at] {
                b'"' => {
                    self.pos = at + 1;
                    return Some(out);
                }
                b'\\' => {
                    out.push(match *bytes.get(at + 1)? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        _ => return None,
                    });
                    from = at + 2;
                }
                // A control character, which JSON does not allow unescaped.
                _ => return None,
            }
            at = run_end(from)?;
        }
    }

    /// A non-negative integer without a fraction or exponent that fits in a `u64`, as
    /// serde_json keeps it; any other number goes to the general parser.
    fn integer(&mut self) -> Option<Value> {
        let bytes = self.text.as_bytes();
        let start = self.pos;
        let digits = bytes[start..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let end = start + digits;
        if (digits > 1 && bytes[start] == b'0')
            || matches!(bytes.get(end), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        let n: u64 = self.text.get(start..end)?.parse().ok()?;
        self.pos = end;
        Some(Value::from(n))
    }
}

/// Where the first byte at or after `from` that ends a plain run of a string lies (a quote, a
/// backslash or a control character), or `None` if there is none. Eight bytes are looked at
/// at once: managed fields are mostly keys of a dozen or more plain bytes.
fn special(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    const QUOTES: u64 = u64::from_ne_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_ne_bytes([b'\\'; 8]);
    const SPACES: u64 = u64::from_ne_bytes([0x20; 8]);
    let rest = bytes.get(from..)?;
    let mut words = rest.chunks_exact(8);
    let mut at = from;
    for word in &mut words {
        let w = u64::from_le_bytes(word.try_into().ok()?);
        // The high bit of each byte of `w` that is zero, or below 0x20 in the last term (the
        // usual test for a zero byte: a flag can also appear above a true one, never below
        // it, so the lowest flag is the first such byte). Bytes of 0x80 and more have their
        // high bit set in `w`, so `!w` clears their flag: they are not control characters.
        let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
        let found = zero(w ^ QUOTES) | zero(w ^ BACKSLASHES) | (w.wrapping_sub(SPACES) & !w & HIGH);
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|n| at + n)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn serde(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn managed_fields_parse_as_serde_json_parses_them() {
        let doc = r#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{}}}}}}"#;
        assert_eq!(parse(doc.as_bytes()), Some(serde(doc)));
        let spaced = " { \"a\" : [ 1 , true , false , null , \"x\\ty\" , { } , [ ] ] } \n";
        assert_eq!(parse(spaced.as_bytes()), Some(serde(spaced)));
        // Escapes of every kind but \u, and text that is not ASCII.
        let escaped = r#"["\"\\\/\b\f\n\r\t", "naïve ✓"]"#;
        assert_eq!(parse(escaped.as_bytes()), Some(serde(escaped)));
        // A key seen twice keeps its last value, in small objects and in larger ones, and keys
        // out of order land in order.
        assert_eq!(parse(br#"{"a":1,"a":2}"#), Some(json!({"a": 2})));
        let large = r#"{"h":1,"b":2,"a":3,"g":4,"b":5,"c":6,"d":7,"e":{"y":1,"x":2,"y":3,"z":4,"w":5,"v":6,"u":7},"a":8}"#;
        assert_eq!(parse(large.as_bytes()), Some(serde(large)));
        assert_eq!(
            parse(large.as_bytes()).unwrap()["a"],
            json!(8),
            "the last of three"
        );
        assert_eq!(parse(b"18446744073709551615"), Some(json!(u64::MAX)));
    }

    #[test]
    fn the_scan_sees_a_run_ending_byte_at_every_position() {
        for len in 1..26 {
            for at in 0..len {
                for special_byte in [b'"', b'\\', 0x00, 0x1f] {
                    // Plain bytes around it, past ASCII too, and a second one later that must
                    // not be taken for the first.
                    let mut bytes: Vec<u8> =
                        (0..len).map(|i| [b'a', 0xc3, b'~', 0x80][i % 4]).collect();
                    bytes[at] = special_byte;
                    if at + 3 < len {
                        bytes[at + 3] = b'"';
                    }
                    for from in 0..=at {
                        assert_eq!(special(&bytes, from), Some(at), "{bytes:?} from {from}");
                    }
                    assert_eq!(special(&bytes, len), None);
                }
            }
            let plain = vec![b' '; len];
            assert_eq!(special(&plain, 0), None);
        }
    }

    #[test]
    fn what_it_leaves_to_the_general_parser() {
        for doc in [
            // Numbers serde_json keeps otherwise, or that are not numbers.
            "-1",
            "1.5",
            "1e3",
            "01",
            "18446744073709551616",
            // \u escapes.
            r#""\u00e9""#,
            // Malformed: cut short, trailing bytes, bad escapes, raw control characters,
            // bad literals, missing separators.
            "{",
            r#"{"a":}"#,
            r#"{"a" 1}"#,
            "[1,]",
            "[1 2]",
            "{} {}",
            r#""\x""#,
            "\"a\u{1}\"",
            "tru",
            "nul",
            "",
            "   ",
            r#"{"a":1,}"#,
            r#"{1:2}"#,
            "\"abc",
        ] {
            assert_eq!(parse(doc.as_bytes()), None, "{doc:?}");
        }
        assert_eq!(parse(b"\"\xff\""), None);
        // Nesting: up to serde_json's limit here, past it left to serde_json, which refuses it.
        let fine = format!("{}{}", "[".repeat(127), "]".repeat(127));
        assert_eq!(parse(fine.as_bytes()), Some(serde(&fine)));
        let deep = format!("{}{}", "[".repeat(128), "]".repeat(128));
        assert_eq!(parse(deep.as_bytes()), None);
        assert!(serde_json::from_str::<Value>(&deep).is_err());
    }

    /// JSON values of the shapes managed fields and raw extensions hold.
    fn values() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<u64>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[ -~\\t\\n\"\\\\é✓\\u{1}]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("[a-z:.{}\"]{0,8}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Whatever it accepts, it parses to serde_json's value; what it declines serde_json
        /// either refuses or writes with something this parser leaves alone.
        #[test]
        fn agrees_with_serde_json(value in values(), pretty in any::<bool>()) {
            let text = if pretty {
                serde_json::to_string_pretty(&value).unwrap()
            } else {
                serde_json::to_string(&value).unwrap()
            };
            match parse(text.as_bytes()) {
                Some(parsed) => prop_assert_eq!(parsed, serde(&text)),
                None => prop_assert!(
                    text.contains("\\u") || text.contains('-'),
                    "declined {text}"
                ),
            }
        }

        /// The word-at-a-time scan finds the byte a byte-at-a-time scan finds, from any start,
        /// with quotes, backslashes, control characters and bytes past ASCII anywhere.
        #[test]
        fn special_finds_the_first_byte_that_ends_a_run(
            bytes in prop::collection::vec(
                prop_oneof![4 => 0x20u8..0x7f, 1 => any::<u8>(), 1 => Just(b'"'), 1 => Just(b'\\')],
                0..40,
            ),
            from in 0usize..48,
        ) {
            let expected = bytes
                .get(from..)
                .and_then(|rest| rest.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20))
                .map(|n| from + n);
            prop_assert_eq!(special(&bytes, from), expected);
        }

        /// Objects of any size, their keys in any order and some of them repeated, nested: the
        /// map serde_json builds.
        #[test]
        fn objects_of_any_size_and_order(
            outer in prop::collection::vec(("[a-h]{1,2}", prop::collection::vec(("[a-d]", 0u8..4), 0..16)), 0..24),
        ) {
            let object = |pairs: Vec<String>| format!("{{{}}}", pairs.join(","));
            let text = object(
                outer
                    .iter()
                    .map(|(key, inner)| {
                        let inner = object(inner.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect());
                        format!("\"{key}\":{inner}")
                    })
                    .collect(),
            );
            prop_assert_eq!(parse(text.as_bytes()), Some(serde(&text)));
        }

        /// Arbitrary bytes: never a panic, and never a value serde_json would not give.
        #[test]
        fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            if let Some(parsed) = parse(&bytes) {
                prop_assert_eq!(Some(parsed), serde_json::from_slice::<Value>(&bytes).ok());
            }
        }
    }
}
