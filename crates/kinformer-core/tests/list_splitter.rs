//! A JSON list split as it arrives is the list decoded whole: the same items, in order, and the
//! same metadata, for bodies laid out every way JSON allows (whitespace anywhere, fields in any
//! order, unknown fields holding any value, strings full of escapes and brackets), in chunks of
//! any size; and a body cut short is refused.

use kinformer_core::{DynamicObject, JsonListSplitter, ObjectList, Scope};
use proptest::prelude::*;
use serde_json::{Value, json};

/// A JSON value of any kind, strings included with quotes, backslashes and brackets in them.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z\"\\\\{}\\[\\],:\u{e9}\u{1F600} ]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z\"{]{0,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn item() -> impl Strategy<Value = Value> {
    ("[a-z\"\\\\]{1,6}", value()).prop_map(|(name, extra)| {
        json!({"metadata": {"name": name, "annotations": {"x": extra.to_string()}}, "extra": extra})
    })
}

/// Re-renders `text` (compact JSON) with `space` (whitespace) after every structural byte
/// outside strings.
fn spaced(text: &str, space: &str) -> String {
    let mut out = String::new();
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        out.push(c);
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '}' | '[' | ']' | ',' | ':' => out.push_str(space),
            _ => {}
        }
    }
    out
}

fn split(body: &[u8], chunk: usize) -> Result<ObjectList<DynamicObject>, kinformer_core::Error> {
    let mut splitter = JsonListSplitter::new();
    let mut items = Vec::new();
    for piece in body.chunks(chunk) {
        splitter.push(piece)?;
        if let Some(run) = splitter.take_items() {
            assert_eq!(run.first(), items.len());
            items.extend(run.decode(Some(Scope::Cluster))?);
        }
    }
    splitter.finish(items)
}

fn names(list: &ObjectList<DynamicObject>) -> Vec<String> {
    list.items
        .iter()
        .map(|o| o.metadata.name.clone().unwrap_or_default())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_list_split_as_it_arrives_is_the_list_decoded_whole(
        items in proptest::collection::vec(item(), 0..6),
        extra in proptest::collection::vec(("[a-z]{1,5}", value()), 0..3),
        items_first in any::<bool>(),
        space in prop_oneof![Just(""), Just(" "), Just("\n\t "), Just("\r\n")],
        chunk in 1usize..50,
        cut in any::<prop::sample::Index>(),
    ) {
        let mut fields = vec![
            ("metadata".to_owned(), json!({"resourceVersion": "77", "continue": "c\"{", "remainingItemCount": 3})),
        ];
        let items_field = ("items".to_owned(), Value::Array(items));
        if items_first {
            fields.insert(0, items_field);
        } else {
            fields.push(items_field);
        }
        fields.extend(extra.into_iter().filter(|(k, _)| k != "items" && k != "metadata"));
        let text = format!(
            "{{{}}}",
            fields
                .iter()
                .map(|(k, v)| format!("{}:{v}", Value::from(k.as_str())))
                .collect::<Vec<_>>()
                .join(",")
        );
        let body = spaced(&text, space);
        let whole = ObjectList::<DynamicObject>::from_json_scoped(body.as_bytes(), Scope::Cluster).unwrap();
        let got = split(body.as_bytes(), chunk).unwrap();
        prop_assert_eq!(names(&got), names(&whole));
        prop_assert_eq!(&got.resource_version, &whole.resource_version);
        prop_assert_eq!(&got.continue_token, &whole.continue_token);
        prop_assert_eq!(got.remaining_item_count, whole.remaining_item_count);

        // Cut short anywhere but in trailing whitespace, it is refused.
        let end = body.trim_end().len();
        let short = &body.as_bytes()[..cut.index(end)];
        prop_assert!(split(short, chunk).is_err(), "{:?}", String::from_utf8_lossy(short));
    }
}

#[test]
fn what_the_whole_decode_refuses_is_refused() {
    for body in [
        &br#"[]"#[..],
        br#"{"items":[],"items":[]}"#,
        br#"{"metadata":{},"metadata":{}}"#,
        br#"{"metadata":7,"items":[]}"#,
        br#"{"items":7}"#,
        br#"{"items":[{"metadata":{"name":"a"}}]} x"#,
        br#"{"items":[{"metadata":{"name":"a"}} {"metadata":{"name":"b"}}]}"#,
        br#"{"items":[{"metadata":{"name":"a"}},]}"#,
        br#"{"items" [] }"#,
        br#"{"kind":"PodList" "items":[]}"#,
        br#"{"kind":tru,"items":[]}"#,
        br#"{"items":[{"metadata":{"name":"a"]}]}"#,
    ] {
        let text = String::from_utf8_lossy(body);
        assert!(
            ObjectList::<DynamicObject>::from_json(body).is_err(),
            "{text}"
        );
        for chunk in [1, 3, body.len()] {
            assert!(split(body, chunk).is_err(), "{text} in chunks of {chunk}");
        }
    }
    // `null` items are no items; escaped keys are the keys they spell.
    let list = split(
        br#"{"items":null,"metad\u0061ta":{"resourceVersion":"4"}}"#,
        5,
    )
    .unwrap();
    assert!(list.items.is_empty());
    assert_eq!(list.resource_version.as_str(), "4");
}

#[test]
fn a_run_holds_only_its_items_bytes() {
    let mut splitter = JsonListSplitter::new();
    splitter
        .push(br#"{"metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"a"}},{"meta"#)
        .unwrap();
    let run = splitter.take_items().unwrap();
    assert_eq!((run.first(), run.len()), (0, 1));
    assert!(splitter.take_items().is_none());
    splitter.push(br#"data":{"name":"b"}}]}"#).unwrap();
    let run2 = splitter.take_items().unwrap();
    assert_eq!((run2.first(), run2.len()), (1, 1));
    let mut items = run.decode::<DynamicObject>(None).unwrap();
    items.extend(run2.decode::<DynamicObject>(None).unwrap());
    let list = splitter.finish(items).unwrap();
    assert_eq!(names(&list), ["a", "b"]);
}
