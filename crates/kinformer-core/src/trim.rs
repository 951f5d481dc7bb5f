//! JSON documents without a member, cut out of the bytes before they are decoded.
//!
//! `metadata.managedFields` is most of a dense object's JSON, and decoding it is most of the
//! work: every entry's `fieldsV1` becomes a tree of `serde_json` maps. A caller that drops
//! managed fields anyway (client-go's `TransformStripManagedFields`) can cut them out first
//! ([`without_managed_fields`]), which costs one scan of the bytes and one copy of what is
//! kept.

use std::borrow::Cow;
use std::ops::Range;

/// Whether a decoder builds each object's `metadata.managedFields`, or cuts them out of the
/// bytes first ([`without_managed_fields`]) so that the objects come without them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ManagedFieldsDecode {
    /// Decoded with the rest of the object: the default.
    #[default]
    Keep,
    /// Left out: for callers that drop them anyway, as an informer with a transform that strips
    /// them does.
    Skip,
}

impl ManagedFieldsDecode {
    /// The bytes of one JSON object to decode: `object` as it is, or without its managed
    /// fields ([`without_managed_fields`]).
    ///
    /// ```
    /// use kinformer_core::trim::ManagedFieldsDecode;
    ///
    /// let cm = br#"{"metadata":{"name":"a","managedFields":[{"manager":"m"}]}}"#;
    /// assert_eq!(&*ManagedFieldsDecode::Keep.object(cm), &cm[..]);
    /// assert_eq!(&*ManagedFieldsDecode::Skip.object(cm), br#"{"metadata":{"name":"a"}}"#);
    /// ```
    pub fn object(self, object: &[u8]) -> Cow<'_, [u8]> {
        self.json(object, MANAGED_FIELDS)
    }

    /// The bytes of one JSON watch event to decode: `event` as it is, or without its object's
    /// managed fields ([`EVENT_MANAGED_FIELDS`]).
    pub fn event(self, event: &[u8]) -> Cow<'_, [u8]> {
        self.json(event, EVENT_MANAGED_FIELDS)
    }

    fn json<'a>(self, doc: &'a [u8], path: &[&str]) -> Cow<'a, [u8]> {
        match self {
            ManagedFieldsDecode::Keep => Cow::Borrowed(doc),
            ManagedFieldsDecode::Skip => without_member(doc, path),
        }
    }
}

/// The path of an object's managed fields.
pub const MANAGED_FIELDS: &[&str] = &["metadata", "managedFields"];

/// The path of a watch event's object's managed fields.
pub const EVENT_MANAGED_FIELDS: &[&str] = &["object", "metadata", "managedFields"];

/// `object`, one JSON object, without `metadata.managedFields`: see [`without_member`].
///
/// ```
/// use kinformer_core::trim::without_managed_fields;
///
/// let pod = br#"{"metadata":{"name":"web","managedFields":[{"manager":"kubectl"}]},"spec":{}}"#;
/// let trimmed = without_managed_fields(pod);
/// assert_eq!(&*trimmed, br#"{"metadata":{"name":"web"},"spec":{}}"#);
/// let value: serde_json::Value = serde_json::from_slice(&trimmed)?;
/// assert_eq!(value["metadata"]["name"], "web");
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn without_managed_fields(object: &[u8]) -> Cow<'_, [u8]> {
    without_member(object, MANAGED_FIELDS)
}

/// `doc`, a JSON object, without the member at `path` (keys from the top, the last the member
/// to leave out): every member of that name in the object the path leads to, so that a key
/// written twice goes too. On the way, the path enters the first member of each name, and what
/// follows it is not scanned: an object's `spec` and `status`, which an API server writes after
/// its `metadata`, are copied without being read. Borrowed as it is when there is no such
/// member, or when the bytes scanned are not JSON this scan can follow, so that the decoder
/// that follows reports them as it would have. Keys are compared as written: a key spelled
/// with escapes (`"managed\u0046ields"`, which no API server writes) is not recognized, and
/// stays.
///
/// ```
/// use kinformer_core::trim::{EVENT_MANAGED_FIELDS, without_member};
///
/// let event = br#"{"type":"ADDED","object":{"metadata":{"managedFields":[],"name":"a"}}}"#;
/// assert_eq!(
///     &*without_member(event, EVENT_MANAGED_FIELDS),
///     br#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}"#,
/// );
/// ```
pub fn without_member<'a>(doc: &'a [u8], path: &[&str]) -> Cow<'a, [u8]> {
    let mut cuts = Vec::new();
    let start = skip_ws(doc, 0);
    if path.is_empty()
        || doc.get(start) != Some(&b'{')
        || collect(doc, start, path, &mut cuts).is_none()
        || cuts.is_empty()
    {
        return Cow::Borrowed(doc);
    }
    // `collect` leaves the cuts sorted and apart.
    let mut out = Vec::with_capacity(doc.len());
    let mut from = 0;
    for cut in cuts {
        out.extend_from_slice(&doc[from..cut.start]);
        from = cut.end;
    }
    out.extend_from_slice(&doc[from..]);
    Cow::Owned(out)
}

/// Adds to `cuts` the byte ranges to leave out of the object at `at` for `path`; `None` if the
/// part of the object scanned is not well-formed. An object on the way is scanned only up to the
/// first member the path enters (an API server writes `metadata` before `spec` and `status`, so
/// those are never scanned); the last object is scanned whole, so that a member written twice
/// goes both times.
fn collect(doc: &[u8], at: usize, path: &[&str], cuts: &mut Vec<Range<usize>>) -> Option<()> {
    let (first, rest) = path.split_first()?;
    let mut members = Members::of(doc, at);
    if !rest.is_empty() {
        // The key first: the value of the member the path enters is not scanned twice.
        while let Some((key, value)) = members.next_key()? {
            if &doc[key.start + 1..key.end - 1] == first.as_bytes() {
                return match doc.get(value) {
                    Some(b'{') => collect(doc, value, rest, cuts),
                    Some(_) => Some(()),
                    None => None,
                };
            }
            members.skip_value(value)?;
        }
        return Some(());
    }
    let mut all = Vec::new();
    while let Some(m) = members.next()? {
        all.push(m);
    }
    // Leave out each matching member with one comma beside it, so the commas that stay still
    // separate what stays.
    let gone: Vec<bool> = all
        .iter()
        .map(|m| &doc[m.key.start + 1..m.key.end - 1] == first.as_bytes())
        .collect();
    for (i, m) in all.iter().enumerate() {
        if !gone[i] {
            continue;
        }
        // From the end of the last kept member before it to the end of its value; when nothing
        // is kept before it, from its key to the next member's key instead (its comma after).
        let range = match (0..i).rev().find(|&j| !gone[j]) {
            Some(j) => all[j].value.end..m.value.end,
            None => match all.get(i + 1) {
                Some(next) => m.key.start..next.key.start,
                None => m.key.start..m.value.end,
            },
        };
        cuts.push(range);
    }
    // Two cuts of members side by side overlap where both reach for the same comma: one cut.
    merge(cuts);
    Some(())
}

/// Merges overlapping ranges in place.
fn merge(cuts: &mut Vec<Range<usize>>) {
    cuts.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(cuts.len());
    for cut in cuts.drain(..) {
        match merged.last_mut() {
            Some(last) if cut.start <= last.end => last.end = last.end.max(cut.end),
            _ => merged.push(cut),
        }
    }
    *cuts = merged;
}

/// One member of an object: its key (with the quotes) and its value's extent.
struct Member {
    key: Range<usize>,
    value: Range<usize>,
}

/// The members of an object, read one at a time.
struct Members<'a> {
    doc: &'a [u8],
    /// Where the next read starts: past the `{`, or past the last member's value.
    at: usize,
    /// Whether no member has been read yet (so no comma comes first).
    first: bool,
}

impl<'a> Members<'a> {
    /// The members of the object whose `{` is at `brace`.
    fn of(doc: &'a [u8], brace: usize) -> Self {
        Members {
            doc,
            at: brace + 1,
            first: true,
        }
    }

    /// The next member; `Some(None)` at the object's end, `None` if the bytes are not an
    /// object's.
    fn next(&mut self) -> Option<Option<Member>> {
        let Some((key, value)) = self.next_key()? else {
            return Some(None);
        };
        let end = self.skip_value(value)?;
        Some(Some(Member {
            key,
            value: value..end,
        }))
    }

    /// Moves past the value that starts at `value`, the one [`next_key`](Self::next_key) gave,
    /// and says where it ends.
    fn skip_value(&mut self, value: usize) -> Option<usize> {
        self.at = value_end(self.doc, value)?;
        Some(self.at)
    }

    /// The next member's key (with its quotes) and where its value starts; `Some(None)` at the
    /// object's end, `None` if the bytes are not an object's. [`skip_value`](Self::skip_value)
    /// must follow before the next call.
    fn next_key(&mut self) -> Option<Option<(Range<usize>, usize)>> {
        let doc = self.doc;
        let mut i = skip_ws(doc, self.at);
        if *doc.get(i)? == b'}' {
            return Some(None);
        }
        if !self.first {
            if doc[i] != b',' {
                return None;
            }
            i = skip_ws(doc, i + 1);
        }
        self.first = false;
        if *doc.get(i)? != b'"' {
            return None;
        }
        let key_end = string_end(doc, i)?;
        let key = i..key_end;
        i = skip_ws(doc, key_end);
        if *doc.get(i)? != b':' {
            return None;
        }
        let value = skip_ws(doc, i + 1);
        self.at = value;
        Some(Some((key, value)))
    }
}

fn skip_ws(doc: &[u8], mut i: usize) -> usize {
    while matches!(doc.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The index past the closing quote of the string whose opening quote is at `at`. Byte by
/// byte for the first bytes, since most strings here are short keys (`"f:name"`), where a
/// vectorised search's setup costs more than it saves; then by `memchr`.
fn string_end(doc: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    let short = (at + 24).min(doc.len());
    while i < short {
        match doc[i] {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    loop {
        i += memchr::memchr2(b'"', b'\\', doc.get(i..)?)?;
        if doc[i] == b'"' {
            return Some(i + 1);
        }
        i += 2;
    }
}

/// Whether a byte opens or closes a container or a string: what a scan for a container's end
/// stops at.
const NESTS: [bool; 256] = {
    let mut table = [false; 256];
    table[b'"' as usize] = true;
    table[b'{' as usize] = true;
    table[b'}' as usize] = true;
    table[b'[' as usize] = true;
    table[b']' as usize] = true;
    table
};

/// The index past the value that starts at `at`: a string, an object or array (to its
/// matching bracket, strings inside skipped), or a scalar (to the next delimiter).
fn value_end(doc: &[u8], at: usize) -> Option<usize> {
    match *doc.get(at)? {
        b'"' => string_end(doc, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                while !NESTS[usize::from(*doc.get(i)?)] {
                    i += 1;
                }
                match doc[i] {
                    b'"' => {
                        i = string_end(doc, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    _ => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                }
                i += 1;
            }
        }
        _ => {
            let mut i = at;
            while let Some(&b) = doc.get(i) {
                if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                    break;
                }
                i += 1;
            }
            (i > at).then_some(i)
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    fn trimmed(doc: &str) -> String {
        String::from_utf8(without_managed_fields(doc.as_bytes()).into_owned()).unwrap()
    }

    #[test]
    fn the_member_goes_with_one_comma_wherever_it_stands() {
        for (doc, want) in [
            (
                r#"{"metadata":{"managedFields":[1],"name":"a"}}"#,
                r#"{"metadata":{"name":"a"}}"#,
            ),
            (
                r#"{"metadata":{"name":"a","managedFields":[1]}}"#,
                r#"{"metadata":{"name":"a"}}"#,
            ),
            (
                r#"{"metadata":{"name":"a","managedFields":[1],"uid":"u"}}"#,
                r#"{"metadata":{"name":"a","uid":"u"}}"#,
            ),
            (
                r#"{"metadata":{"managedFields":[1]}}"#,
                r#"{"metadata":{}}"#,
            ),
            // Written twice, both go; around and between kept members.
            (
                r#"{"metadata":{"managedFields":[1],"managedFields":[2],"name":"a"}}"#,
                r#"{"metadata":{"name":"a"}}"#,
            ),
            (
                r#"{"metadata":{"managedFields":[1],"name":"a","managedFields":[2]}}"#,
                r#"{"metadata":{"name":"a"}}"#,
            ),
            (
                r#"{"metadata":{"name":"a","managedFields":[1],"managedFields":[2]}}"#,
                r#"{"metadata":{"name":"a"}}"#,
            ),
            // Whitespace, and strings holding brackets, quotes and the key itself.
            (
                "{ \"kind\" : \"Pod\" , \"metadata\" : { \"managedFields\" : [ {\"f\":\"}]\\\"\"} ] , \"name\" : \"managedFields\" } }",
                "{ \"kind\" : \"Pod\" , \"metadata\" : { \"name\" : \"managedFields\" } }",
            ),
        ] {
            assert_eq!(trimmed(doc), want, "{doc}");
            serde_json::from_str::<Value>(want).unwrap();
        }
    }

    #[test]
    fn anything_else_is_lent_as_it_is() {
        for doc in [
            // No such member, or not where the path leads.
            r#"{"metadata":{"name":"a"}}"#,
            r#"{"managedFields":[1],"spec":{"metadata":{"managedFields":[]}}}"#,
            r#"{"metadata":"managedFields"}"#,
            // Escaped, as no API server writes it.
            r#"{"metadata":{"managed\u0046ields":[1]}}"#,
            // Not JSON this scan follows: cut short, a missing colon, a bad delimiter.
            r#"{"metadata":{"managedFields":[1]"#,
            r#"{"metadata":{"managedFields" [1]}}"#,
            r#"{"metadata":{"managedFields":[1];"name":"a"}}"#,
            r#"["metadata"]"#,
            "",
        ] {
            assert!(
                matches!(without_managed_fields(doc.as_bytes()), Cow::Borrowed(b) if b == doc.as_bytes()),
                "{doc}"
            );
        }
    }

    #[test]
    fn every_prefix_of_an_event_is_lent_or_cut_without_a_panic() {
        let event = concat!(
            r#"{"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"a","#,
            r#""managedFields":[{"manager":"m","fieldsV1":{"f:metadata":{"f:labels":{".":{},"#,
            r#""f:app\"x":{}}}}}],"uid":"u"},"spec":{"containers":[{"name":"c"}]}}}"#
        );
        for end in 0..=event.len() {
            let prefix = &event.as_bytes()[..end];
            let out = without_member(prefix, EVENT_MANAGED_FIELDS);
            // Only a prefix that holds the whole of metadata can lose the member.
            if matches!(out, Cow::Owned(_)) {
                assert!(end > event.find(r#","uid""#).unwrap(), "{end}");
            }
        }
        let whole = without_member(event.as_bytes(), EVENT_MANAGED_FIELDS);
        let value: Value = serde_json::from_slice(&whole).unwrap();
        assert_eq!(
            value["object"]["metadata"],
            json!({"name": "a", "uid": "u"})
        );
    }

    /// Any JSON value, objects among them with `metadata` and `managedFields` keys.
    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-z\"\\\\{}\\[\\], ]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::vec(
                    (
                        prop_oneof![
                            Just("metadata".to_owned()),
                            Just("managedFields".to_owned()),
                            "[a-z]{1,4}"
                        ],
                        inner
                    ),
                    0..4
                )
                .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    /// `value` without the member at `path`, as the scan should leave it.
    fn remove(value: &mut Value, path: &[&str]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        let Some(map) = value.as_object_mut() else {
            return;
        };
        if rest.is_empty() {
            map.remove(*first);
        } else if let Some(inner) = map.get_mut(*first) {
            remove(inner, rest);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 256,
            failure_persistence: None,
            rng_algorithm: prop::test_runner::RngAlgorithm::ChaCha,
            ..ProptestConfig::default()
        })]

        /// Bytes of any kind are lent or cut, never a panic.
        #[test]
        fn any_bytes_never_panic(bytes in prop::collection::vec(
            prop_oneof![
                Just(b'{'), Just(b'}'), Just(b'['), Just(b']'), Just(b'"'), Just(b'\\'),
                Just(b':'), Just(b','), Just(b' '), any::<u8>(),
            ],
            0..64,
        )) {
            let mut doc = br#"{"metadata":{"managedFields":"#.to_vec();
            doc.extend_from_slice(&bytes);
            let _ = without_managed_fields(&doc);
            let _ = without_managed_fields(&bytes);
        }

        /// Whatever the document, compact or pretty, the scan's result parses to the document
        /// without the member.
        #[test]
        fn the_result_is_the_document_without_the_member(
            metadata in prop::collection::btree_map("[a-z]{1,3}|managedFields", value(), 0..5),
            rest in prop::collection::btree_map("[a-z]{1,3}", value(), 0..3),
            pretty in any::<bool>(),
        ) {
            let mut doc = Value::Object(rest.into_iter().collect());
            doc["metadata"] = Value::Object(metadata.into_iter().collect());
            let text = if pretty {
                serde_json::to_string_pretty(&doc).unwrap()
            } else {
                serde_json::to_string(&doc).unwrap()
            };
            let out = without_managed_fields(text.as_bytes());
            let mut want = doc.clone();
            remove(&mut want, MANAGED_FIELDS);
            prop_assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), want);
            prop_assert_eq!(
                matches!(out, Cow::Borrowed(_)),
                doc["metadata"].get("managedFields").is_none()
            );
            let event = json!({"type": "MODIFIED", "object": doc}).to_string();
            let out = without_member(event.as_bytes(), EVENT_MANAGED_FIELDS);
            let mut want = json!({"type": "MODIFIED", "object": doc});
            remove(&mut want, EVENT_MANAGED_FIELDS);
            prop_assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), want);
        }
    }
}
