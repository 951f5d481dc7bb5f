//! KEP-5866's server-side sharding: the `shardSelector` of a list or watch (Kubernetes 1.36,
//! alpha gate `ShardedListAndWatch`), parsed and validated, and the 64-bit FNV-1a hash its
//! ranges are drawn over.
//!
//! A selector is one or more `shardRange(<field>, '<hexStart>', '<hexEnd>')` terms joined by
//! `||`. The field is `object.metadata.uid` or `object.metadata.namespace` (CEL's object-rooted
//! paths, not the field selector's `metadata.uid`), the same in every term; the bounds are
//! single-quoted hex strings with a `0x` prefix, an inclusive start and an exclusive end in
//! `[0x0, 0x10000000000000000)`. An object is selected when the hash of its field's value falls
//! in any of the ranges (the `ListOptions.shardSelector` field's documentation in
//! `k8s.io/apimachinery/pkg/apis/meta/v1/types.go`).
//!
//! Nothing here knows about objects or HTTP: the request layer asks [`ShardSelector::selects`]
//! with the hash of the object's field.

use std::fmt;

/// The FNV-1a 64-bit offset basis: the hash of no bytes at all.
const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
/// The FNV 64-bit prime.
const PRIME: u64 = 0x0000_0100_0000_01b3;
/// The exclusive upper bound of the hash space, 2^64: the largest `hexEnd`.
const SPACE_END: u128 = 1 << 64;
/// The most hex digits a bound may have (`0x10000000000000000` has 17).
const MAX_HEX_DIGITS: usize = 17;

/// The hash a shard selector's ranges are compared with: 64-bit FNV-1a of the value's UTF-8
/// bytes (offset basis `0xcbf29ce484222325`, prime `0x100000001b3`; each byte is xored in, then
/// the state multiplied), as the API server hashes `metadata.uid` or `metadata.namespace`.
///
/// A test uses it to know which shard an object falls into. A cluster-scoped object's
/// namespace is the empty string, whose hash is the offset basis.
///
/// ```
/// use kinformer_sim::shard_hash;
///
/// assert_eq!(shard_hash(""), 0xcbf29ce484222325);
/// assert_eq!(shard_hash("a"), 0xaf63dc4c8601ec8c);
/// assert_eq!(shard_hash("foobar"), 0x85944171f73967e8);
/// ```
pub fn shard_hash(value: &str) -> u64 {
    value
        .bytes()
        .fold(OFFSET_BASIS, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

/// The object field a shard selector hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShardField {
    /// `object.metadata.uid`.
    Uid,
    /// `object.metadata.namespace` (empty for cluster-scoped objects).
    Namespace,
}

impl ShardField {
    fn from_path(path: &str) -> Option<Self> {
        match path {
            "object.metadata.uid" => Some(Self::Uid),
            "object.metadata.namespace" => Some(Self::Namespace),
            _ => None,
        }
    }

    fn path(self) -> &'static str {
        match self {
            Self::Uid => "object.metadata.uid",
            Self::Namespace => "object.metadata.namespace",
        }
    }
}

/// A parsed, valid `shardSelector`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShardSelector {
    /// The selector as the request sent it, which list responses echo in `shardInfo`.
    text: String,
    field: ShardField,
    /// `[start, end)` of each term, in the order written.
    ranges: Vec<(u128, u128)>,
}

/// Why a selector is invalid: the text after `Invalid value: "<selector>": `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShardSelectorError(String);

impl fmt::Display for ShardSelectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn error(why: impl Into<String>) -> ShardSelectorError {
    ShardSelectorError(why.into())
}

impl ShardSelector {
    /// Parses and validates a selector (whitespace is allowed around every token).
    pub(crate) fn parse(text: &str) -> Result<Self, ShardSelectorError> {
        let tokens = tokenize(text)?;
        let mut p = Parser {
            tokens: &tokens,
            at: 0,
        };
        let mut field = None;
        let mut ranges = Vec::new();
        // Bounded by the tokens: each pass consumes at least one.
        loop {
            let (f, range) = p.term(ranges.is_empty())?;
            match field {
                None => field = Some(f),
                Some(first) if first != f => {
                    return Err(error(format!(
                        "every shardRange() must hash the same field, found {} and {}",
                        first.path(),
                        f.path()
                    )));
                }
                Some(_) => {}
            }
            ranges.push(range);
            match p.next() {
                None => break,
                Some(Token::Or) => {}
                Some(t) => {
                    return Err(error(format!(
                        "expected || or the end of the selector, found {t}"
                    )));
                }
            }
        }
        Ok(Self {
            text: text.to_owned(),
            field: field.unwrap_or(ShardField::Uid),
            ranges,
        })
    }

    /// The selector as the request sent it.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// The field whose hash the ranges are compared with.
    pub(crate) fn field(&self) -> ShardField {
        self.field
    }

    /// Whether an object whose field hashes to `hash` is selected.
    pub(crate) fn selects(&self, hash: u64) -> bool {
        let h = u128::from(hash);
        self.ranges
            .iter()
            .any(|&(start, end)| start <= h && h < end)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token<'a> {
    Ident(&'a str),
    Dot,
    Open,
    Close,
    Comma,
    Or,
    /// A single-quoted string's content.
    Str(&'a str),
    /// Something that starts with a digit (an unquoted bound, say).
    Number(&'a str),
}

impl fmt::Display for Token<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ident(s) => write!(f, "{s:?}"),
            Self::Dot => f.write_str("\".\""),
            Self::Open => f.write_str("\"(\""),
            Self::Close => f.write_str("\")\""),
            Self::Comma => f.write_str("\",\""),
            Self::Or => f.write_str("\"||\""),
            Self::Str(s) => write!(f, "'{s}'"),
            Self::Number(s) => write!(f, "{s}"),
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<Token<'_>>, ShardSelectorError> {
    let mut tokens = Vec::new();
    let mut rest = text;
    // Bounded by the text: each pass consumes at least one character or fails.
    loop {
        rest = rest.trim_start();
        let Some(c) = rest.chars().next() else {
            return Ok(tokens);
        };
        let (token, len) = match c {
            '.' => (Token::Dot, 1),
            '(' => (Token::Open, 1),
            ')' => (Token::Close, 1),
            ',' => (Token::Comma, 1),
            '|' if rest.starts_with("||") => (Token::Or, 2),
            '\'' => {
                let close = rest[1..]
                    .find('\'')
                    .ok_or_else(|| error("unterminated string literal"))?;
                (Token::Str(&rest[1..=close]), close + 2)
            }
            '"' => {
                return Err(error(
                    "string literals must be single-quoted ('0x...'), not double-quoted",
                ));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let len = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                (Token::Ident(&rest[..len]), len)
            }
            c if c.is_ascii_digit() => {
                let len = rest
                    .find(|c: char| !c.is_ascii_alphanumeric())
                    .unwrap_or(rest.len());
                (Token::Number(&rest[..len]), len)
            }
            c => {
                return Err(error(format!(
                    "unexpected {c:?}: terms are shardRange() calls joined by ||"
                )));
            }
        };
        tokens.push(token);
        rest = &rest[len..];
    }
}

struct Parser<'t, 'a> {
    tokens: &'t [Token<'a>],
    at: usize,
}

impl<'a> Parser<'_, 'a> {
    fn next(&mut self) -> Option<Token<'a>> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn peek(&self) -> Option<&Token<'a>> {
        self.tokens.get(self.at)
    }

    fn expect(&mut self, want: &Token<'_>, what: &str) -> Result<(), ShardSelectorError> {
        match self.next() {
            Some(t) if t == *want => Ok(()),
            Some(t) => Err(error(format!("expected {what}, found {t}"))),
            None => Err(error(format!(
                "expected {what}, found the end of the selector"
            ))),
        }
    }

    /// One `shardRange(<field>, '<start>', '<end>')`.
    fn term(&mut self, first: bool) -> Result<(ShardField, (u128, u128)), ShardSelectorError> {
        match self.next() {
            Some(Token::Ident("shardRange")) => {}
            Some(Token::Ident(f)) if self.peek() == Some(&Token::Open) => {
                return Err(error(format!(
                    "unknown function {f:?}: only shardRange() is supported"
                )));
            }
            None if first => return Err(error("the selector has no shardRange() term")),
            None => return Err(error("a shardRange() term must follow ||")),
            Some(Token::Or) if first => {
                return Err(error("a shardRange() term must come before ||"));
            }
            Some(Token::Or) => return Err(error("a shardRange() term must follow ||")),
            Some(t) => return Err(error(format!("expected shardRange(, found {t}"))),
        }
        self.expect(&Token::Open, "\"(\" after shardRange")?;
        let field = self.field()?;
        self.expect(&Token::Comma, "\",\" after the field path")?;
        let start = self.bound("hexStart")?;
        self.expect(&Token::Comma, "\",\" after hexStart")?;
        let end = self.bound("hexEnd")?;
        self.expect(
            &Token::Close,
            "\")\" after hexEnd: shardRange() takes 3 arguments",
        )?;
        if start >= end {
            return Err(error(format!(
                "hexStart {start:#x} must be less than hexEnd {end:#x}"
            )));
        }
        Ok((field, (start, end)))
    }

    /// A dotted path, `object.metadata.uid` or `object.metadata.namespace`.
    fn field(&mut self) -> Result<ShardField, ShardSelectorError> {
        let mut path = String::new();
        // Bounded by the tokens: each pass consumes an identifier and a dot.
        loop {
            match self.next() {
                Some(Token::Ident(part)) => path.push_str(part),
                Some(t) => return Err(error(format!("expected a field path, found {t}"))),
                None => {
                    return Err(error(
                        "expected a field path, found the end of the selector",
                    ));
                }
            }
            if self.peek() != Some(&Token::Dot) {
                break;
            }
            self.at += 1;
            path.push('.');
        }
        ShardField::from_path(&path).ok_or_else(|| {
            error(format!(
                "unsupported field path {path:?}: must be object.metadata.uid or object.metadata.namespace"
            ))
        })
    }

    /// A `'0x...'` bound: 1 to 17 hex digits, at most 2^64.
    fn bound(&mut self, name: &str) -> Result<u128, ShardSelectorError> {
        let s = match self.next() {
            Some(Token::Str(s)) => s,
            Some(t) => {
                return Err(error(format!(
                    "{name} must be a single-quoted string such as '0x8000000000000000', found {t}"
                )));
            }
            None => {
                return Err(error(format!(
                    "expected {name}, found the end of the selector"
                )));
            }
        };
        let digits = s
            .strip_prefix("0x")
            .ok_or_else(|| error(format!("{name} '{s}' must start with 0x")))?;
        if digits.is_empty()
            || digits.len() > MAX_HEX_DIGITS
            || !digits.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err(error(format!(
                "{name} '{s}' must be 0x followed by 1 to {MAX_HEX_DIGITS} hex digits"
            )));
        }
        let value = u128::from_str_radix(digits, 16)
            .map_err(|e| error(format!("{name} '{s}' is not a hex number: {e}")))?;
        if value > SPACE_END {
            return Err(error(format!(
                "{name} '{s}' is beyond the end of the hash space, 0x10000000000000000"
            )));
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HALF: &str = "0x8000000000000000";
    const END: &str = "0x10000000000000000";

    #[test]
    fn fnv1a_64_test_vectors() {
        // The FNV reference vectors (draft-eastlake-fnv, and the Go standard library's tests).
        for (input, want) in [
            ("", 0xcbf2_9ce4_8422_2325_u64),
            ("a", 0xaf63_dc4c_8601_ec8c),
            ("foobar", 0x8594_4171_f739_67e8),
        ] {
            assert_eq!(shard_hash(input), want, "{input:?}");
        }
    }

    #[test]
    fn selectors_parse_to_their_ranges() {
        let s = ShardSelector::parse(&format!(
            "shardRange(object.metadata.uid, '0x0', '{HALF}') || shardRange(object.metadata.uid, '{HALF}', '{END}')"
        ))
        .unwrap();
        assert_eq!(s.field(), ShardField::Uid);
        assert_eq!(s.ranges, [(0, 1 << 63), (1 << 63, 1 << 64)]);
        let spaced = ShardSelector::parse(
            "  shardRange ( object . metadata . namespace ,'0xA','0xb' )\t||shardRange(object.metadata.namespace,'0x0','0x1')  ",
        )
        .unwrap();
        assert_eq!(spaced.field(), ShardField::Namespace);
        assert_eq!(spaced.ranges, [(10, 11), (0, 1)]);
        assert!(spaced.as_str().starts_with("  shardRange ( object"));
    }

    #[test]
    fn ranges_include_their_start_and_exclude_their_end() {
        let s = ShardSelector::parse(&format!(
            "shardRange(object.metadata.uid, '0x10', '0x20') || shardRange(object.metadata.uid, '0xffffffffffffffff', '{END}')"
        ))
        .unwrap();
        for (hash, selected) in [
            (0x0f, false),
            (0x10, true),
            (0x1f, true),
            (0x20, false),
            (u64::MAX - 1, false),
            (u64::MAX, true),
        ] {
            assert_eq!(s.selects(hash), selected, "{hash:#x}");
        }
        let whole =
            ShardSelector::parse(&format!("shardRange(object.metadata.uid, '0x0', '{END}')"))
                .unwrap();
        assert!(whole.selects(0) && whole.selects(u64::MAX));
    }

    #[test]
    fn invalid_selectors_say_why() {
        let uid = "object.metadata.uid";
        for (selector, why) in [
            ("", "no shardRange() term"),
            ("   ", "no shardRange() term"),
            (
                &format!("shardRange({uid}, '0x0', '{HALF}') ||"),
                "must follow ||",
            ),
            (
                &format!("|| shardRange({uid}, '0x0', '{HALF}')"),
                "must come before ||",
            ),
            (
                &format!(
                    "shardRange({uid}, '0x0', '{HALF}') || || shardRange({uid}, '0x0', '0x1')"
                ),
                "must follow ||",
            ),
            (
                &format!("shardRange({uid}, '0x0', '{HALF}') | shardRange({uid}, '0x0', '0x1')"),
                "unexpected '|'",
            ),
            (
                &format!("shardRange({uid}, '0x0', '{HALF}') && shardRange({uid}, '0x0', '0x1')"),
                "unexpected '&'",
            ),
            (
                &format!("shardRange({uid}, '0x0', '{HALF}') shardRange({uid}, '0x0', '0x1')"),
                "expected || or the end",
            ),
            (
                &format!("hashRange({uid}, '0x0', '{HALF}')"),
                "unknown function \"hashRange\"",
            ),
            (
                "shardRange(metadata.uid, '0x0', '0x1')",
                "unsupported field path \"metadata.uid\"",
            ),
            (
                "shardRange(object.metadata.name, '0x0', '0x1')",
                "unsupported field path",
            ),
            (
                "shardRange(object.metadata.uid, '0x0', '0x1') || shardRange(object.metadata.namespace, '0x1', '0x2')",
                "same field",
            ),
            (
                &format!("shardRange({uid}, \"0x0\", \"{HALF}\")"),
                "single-quoted",
            ),
            (
                &format!("shardRange({uid}, 0x0, '{HALF}')"),
                "single-quoted string",
            ),
            (
                &format!("shardRange({uid}, '0', '{HALF}')"),
                "must start with 0x",
            ),
            (
                &format!("shardRange({uid}, '0X0', '{HALF}')"),
                "must start with 0x",
            ),
            (
                &format!("shardRange({uid}, '0x', '{HALF}')"),
                "1 to 17 hex digits",
            ),
            (
                &format!("shardRange({uid}, '0xg', '{HALF}')"),
                "1 to 17 hex digits",
            ),
            (
                &format!("shardRange({uid}, '0x0', '0x000000000000000001')"),
                "1 to 17 hex digits",
            ),
            (
                &format!("shardRange({uid}, '0x0', '0x10000000000000001')"),
                "beyond the end",
            ),
            (
                &format!("shardRange({uid}, '{HALF}', '{HALF}')"),
                "less than hexEnd",
            ),
            (
                &format!("shardRange({uid}, '{HALF}', '0x0')"),
                "less than hexEnd",
            ),
            (
                &format!("shardRange({uid}, '0x0')"),
                "expected \",\" after hexStart",
            ),
            (
                &format!("shardRange({uid}, '0x0', '0x1', '0x2')"),
                "takes 3 arguments",
            ),
            (&format!("shardRange({uid}, '0x0', '0x1'"), "found the end"),
            (&format!("shardRange({uid}, '0x0, '0x1')"), "unterminated"),
            (&format!("shardRange({uid}, '0x0', '0x1)"), "unterminated"),
            ("shardRange", "expected \"(\""),
        ] {
            let err = ShardSelector::parse(selector).unwrap_err();
            assert!(err.to_string().contains(why), "{selector:?}: {err}");
        }
    }
}
