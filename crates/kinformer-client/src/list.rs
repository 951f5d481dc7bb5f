//! Decoding a list response: the page's envelope first, then its items on all cores.

use std::sync::Arc;

use kinformer_core::{Object, ObjectList, Scope, missing_identity};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

/// A page with fewer items than this is decoded in place: threads would cost more than they
/// save.
const PARALLEL_FROM: usize = 32;

#[derive(Deserialize)]
struct RawList<'a> {
    #[serde(default)]
    metadata: RawListMeta,
    #[serde(default, borrow)]
    items: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawListMeta {
    #[serde(default)]
    resource_version: String,
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
    #[serde(default)]
    remaining_item_count: Option<i64>,
}

/// Decodes a list body as [`ObjectList::from_json_scoped`] does, with the same errors, but with
/// the items split among up to `workers` threads (scoped to this call: the items are decoded
/// straight from `body`, never copied). The items keep their order; an error names the first
/// bad item.
///
/// Call it off the async workers (in `spawn_blocking`) for a large page: it blocks until every
/// item is decoded.
pub(crate) fn decode_list<K: Object + DeserializeOwned>(
    body: &[u8],
    scope: Scope,
    workers: usize,
) -> Result<ObjectList<K>, kinformer_core::Error> {
    let decode_error = |source| kinformer_core::Error::Decode {
        what: "list",
        source,
    };
    let raw: RawList<'_> = serde_json::from_slice(body).map_err(decode_error)?;
    let raw_items = raw.items.unwrap_or_default();
    let namespaced = scope == Scope::Namespaced;
    let decode_run = |first: usize, run: &[&RawValue]| {
        let mut out = Vec::with_capacity(run.len());
        for (i, item) in (first..).zip(run) {
            let object: K = serde_json::from_str(item.get()).map_err(|e| {
                decode_error(serde::de::Error::custom(format_args!("items[{i}]: {e}")))
            })?;
            if let Some(field) = missing_identity(&object, namespaced) {
                return Err(decode_error(serde::de::Error::custom(format_args!(
                    "items[{i}] has no {field}"
                ))));
            }
            out.push(Arc::new(object));
        }
        Ok(out)
    };
    let workers = workers.clamp(1, raw_items.len().div_ceil(PARALLEL_FROM).max(1));
    let items = if workers == 1 {
        decode_run(0, &raw_items)?
    } else {
        let per = raw_items.len().div_ceil(workers);
        let runs: Vec<Result<Vec<Arc<K>>, _>> = std::thread::scope(|s| {
            let decode_run = &decode_run;
            let mut parts = raw_items.chunks(per).enumerate();
            let (_, mine) = parts.next().expect("at least one run");
            let others: Vec<_> = parts
                .map(|(n, run)| s.spawn(move || decode_run(n * per, run)))
                .collect();
            let mut runs = vec![decode_run(0, mine)];
            for other in others {
                match other.join() {
                    Ok(run) => runs.push(run),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            runs
        });
        let mut items = Vec::with_capacity(raw_items.len());
        for run in runs {
            items.extend(run?);
        }
        items
    };
    Ok(ObjectList {
        items,
        resource_version: raw.metadata.resource_version.into(),
        continue_token: raw.metadata.continue_token.filter(|c| !c.is_empty()),
        remaining_item_count: raw.metadata.remaining_item_count,
    })
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
