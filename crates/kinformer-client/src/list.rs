//! Decoding a list response on all cores: the client's call into core's parallel list decode.

use kinformer_core::{Object, ObjectList, Scope};
use serde::de::DeserializeOwned;

/// Decodes a list body as [`ObjectList::from_json_scoped`] does, with the same errors, but with
/// the items split among up to `workers` threads ([`ObjectList::from_json_scoped_parallel`]).
///
/// Call it off the async workers (in `spawn_blocking`) for a large page: it blocks until every
/// item is decoded.
pub(crate) fn decode_list<K: Object + DeserializeOwned>(
    body: &[u8],
    scope: Scope,
    workers: usize,
) -> Result<ObjectList<K>, kinformer_core::Error> {
    ObjectList::from_json_scoped_parallel(body, scope, workers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinformer_core::DynamicObject;

    fn body(n: usize, bad: Option<(usize, &str)>) -> String {
        let items: Vec<String> = (0..n)
            .map(|i| match bad {
                Some((at, text)) if at == i => text.to_owned(),
                _ => format!(
                    r#"{{"metadata":{{"name":"cm{i}","namespace":"ns","resourceVersion":"{i}"}},"data":{{"k":"{}"}}}}"#,
                    "v".repeat(i % 40)
                ),
            })
            .collect();
        format!(
            r#"{{"kind":"ConfigMapList","metadata":{{"resourceVersion":"77","continue":"next"}},"items":[{}]}}"#,
            items.join(",")
        )
    }

    fn names(list: &ObjectList<DynamicObject>) -> Vec<String> {
        list.items.iter().map(|o| o.name().to_owned()).collect()
    }

    #[test]
    fn items_keep_their_order_on_any_number_of_threads() {
        for n in [0, 1, 31, 32, 33, 100, 1001] {
            let text = body(n, None);
            let want =
                ObjectList::<DynamicObject>::from_json_scoped(text.as_bytes(), Scope::Namespaced)
                    .unwrap();
            for workers in [1, 2, 3, 8, 64] {
                let got: ObjectList<DynamicObject> =
                    decode_list(text.as_bytes(), Scope::Namespaced, workers).unwrap();
                assert_eq!(names(&got), names(&want), "{n} items, {workers} threads");
                assert_eq!(got.resource_version.as_str(), "77");
                assert_eq!(got.continue_token.as_deref(), Some("next"));
            }
        }
    }

    #[test]
    fn errors_name_the_first_bad_item_as_the_sequential_decode_does() {
        let cases = [
            (r#"{"metadata":7}"#, Scope::Cluster),
            (r#"{"metadata":{"namespace":"ns"}}"#, Scope::Cluster),
            (r#"{"metadata":{"name":"x"}}"#, Scope::Namespaced),
        ];
        for (bad, scope) in cases {
            for at in [0, 150, 299] {
                let text = body(300, Some((at, bad)));
                let want = ObjectList::<DynamicObject>::from_json_scoped(text.as_bytes(), scope)
                    .unwrap_err()
                    .to_string();
                assert!(want.contains(&format!("items[{at}]")), "{want}");
                for workers in [1, 2, 5] {
                    let got = decode_list::<DynamicObject>(text.as_bytes(), scope, workers)
                        .unwrap_err()
                        .to_string();
                    assert_eq!(got, want, "{bad} at {at}, {workers} threads");
                }
            }
        }
        // A second bad item later does not hide the first.
        let mut text = body(300, Some((40, r#"{"metadata":7}"#)));
        text = text.replace(r#""name":"cm250""#, r#""name":"""#);
        let got = decode_list::<DynamicObject>(text.as_bytes(), Scope::Namespaced, 4).unwrap_err();
        assert!(got.to_string().contains("items[40]"), "{got}");
        assert!(decode_list::<DynamicObject>(b"{\"items\":[", Scope::Cluster, 4).is_err());
    }
}
