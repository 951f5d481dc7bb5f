//! Decoding a list response on all cores: the items of a large page are decoded on the async
//! runtime's own worker threads, in runs, and assembled in order.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};
use kinformer_core::{ListPage, Object, ObjectList, ResourceVersion, Scope, missing_identity};
use kinformer_protobuf::convert::Codec;
use kinformer_protobuf::wire::ListSplitter;
use serde::de::DeserializeOwned;

use crate::Error;

/// Items per decode task: ~64 pods of ~5 KB take ~1.5 ms, short enough not to hold a worker
/// thread from other tasks for long, long enough that a task costs little beside it.
const ITEMS_PER_TASK: usize = 64;

/// Decodes a list body as [`ObjectList::from_json_scoped`] does, with the same errors, but with
/// the items split into runs decoded on the runtime's worker threads (`tokio::spawn`), the
/// first run on the calling task.
///
/// The runtime's workers, not threads of their own: the objects of a list and of the watch that
/// follows are then allocated by the same threads, so the memory of listed objects the watch
/// replaces is reused for their successors. Decoded on other threads, it stayed with those
/// threads' allocator arenas, and the resident size of a typed cache doubled under updates
/// (docs/benchmarks.md).
pub(crate) async fn decode_list<K: Object + DeserializeOwned>(
    body: Vec<u8>,
    scope: Scope,
) -> Result<ObjectList<K>, kinformer_core::Error> {
    let page = Arc::new(ListPage::locate(&body)?);
    let n = page.len();
    if n <= ITEMS_PER_TASK || tokio::runtime::Handle::try_current().is_err() {
        let items = page.decode_items(&body, 0..n, Some(scope))?;
        return Ok(unwrap_page(page).into_list(items));
    }
    let body = Arc::new(body);
    let runs: Vec<_> = (ITEMS_PER_TASK..n)
        .step_by(ITEMS_PER_TASK)
        .map(|start| {
            let (page, body) = (Arc::clone(&page), Arc::clone(&body));
            let run = start..(start + ITEMS_PER_TASK).min(n);
            tokio::spawn(async move { page.decode_items::<K>(&body, run, Some(scope)) })
        })
        .collect();
    let mut items = page.decode_items(&body, 0..ITEMS_PER_TASK, Some(scope));
    for run in runs {
        let run = match run.await {
            Ok(run) => run,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down: no page, rather than a short one.
            Err(_) => Err(kinformer_core::Error::Decode {
                what: "list",
                source: serde::de::Error::custom("the runtime shut down while decoding"),
            }),
        };
        // The first bad item wins: the later runs are still awaited, their errors dropped. (If
        // this future is dropped mid-page, the runs already spawned finish on their own and
        // their objects are freed: each is at most ITEMS_PER_TASK items.)
        match (&mut items, run) {
            (Ok(items), Ok(run)) => items.extend(run),
            (Ok(_), Err(e)) => items = Err(e),
            (Err(_), _) => {}
        }
    }
    Ok(unwrap_page(page).into_list(items?))
}

/// Runs of protobuf list items decoding at once, at most. Past it, the body is not read on
/// until the oldest run is done: a body that arrives faster than its items decode waits in the
/// socket, not in memory.
const RUNS_IN_FLIGHT: usize = 16;

/// Decodes a protobuf list body (the `k8s\0` envelope around a `<Kind>List` message) with the
/// kind's codec while it arrives: each run of items is decoded on the runtime's worker threads
/// as soon as its last byte is in, and its bytes are dropped once it is decoded, so the whole
/// body is never held (a first list served whole from the watch cache is a gigabyte for 100,000
/// pods). Items are kept in order; an item without a name (or, for a namespaced resource, a
/// namespace) is an error naming the item, as in a JSON list. An item past `max_items` ends
/// the list with `too_many()`, before it is decoded: a body too large is refused before its
/// objects fill the memory. Returns the list and the bytes its body took.
///
/// An error of `body` ends the list at once, and so does a bad item, a malformed envelope or
/// list, or a list of another kind, as soon as it is found: the first found is the error. Of
/// two bad items, the first in the list is named.
pub(crate) async fn decode_protobuf_list<K: Object>(
    mut body: impl Stream<Item = Result<Bytes, Error>> + Unpin,
    codec: &'static Codec,
    scope: Scope,
    max_items: usize,
    too_many: impl Fn() -> Error,
) -> Result<(ObjectList<K>, u64), Error> {
    let structure = |e| protobuf_error(None, e);
    let check_kind = |api_version: &str, kind: &str| {
        let expected = format!("{}List", codec.kind());
        if kind == expected && api_version == codec.api_version() {
            return Ok(());
        }
        Err(structure(kinformer_protobuf::Error::UnexpectedKind {
            expected: format!("{}/{expected}", codec.api_version()),
            found: format!("{api_version}/{kind}"),
        }))
    };
    let parallel = tokio::runtime::Handle::try_current().is_ok();
    let mut splitter = ListSplitter::new();
    let mut bytes = 0u64;
    let mut kind_checked = false;
    let mut run = Vec::with_capacity(ITEMS_PER_TASK);
    let mut next_item = 0;
    let mut runs = VecDeque::new();
    let mut items = Ok(Vec::new());
    loop {
        let chunk = body.next().await.transpose()?;
        let ended = chunk.is_none();
        if let Some(chunk) = chunk {
            bytes += chunk.len() as u64;
            splitter.push(chunk);
        }
        while let Some(item) = splitter.next_item().map_err(structure)? {
            if !kind_checked && let Some((api_version, kind)) = splitter.type_meta() {
                check_kind(api_version, kind)?;
                kind_checked = true;
            }
            if next_item + run.len() >= max_items {
                return Err(too_many());
            }
            run.push(item);
            if run.len() < ITEMS_PER_TASK && !ended {
                continue;
            }
            let start = next_item;
            next_item += run.len();
            let full = std::mem::replace(&mut run, Vec::with_capacity(ITEMS_PER_TASK));
            runs.push_back(dispatch::<K>(full, start, codec, scope, parallel));
            if runs.len() > RUNS_IN_FLIGHT
                && let Some(oldest) = runs.pop_front()
            {
                // Runs are gathered in order: a bad item here is the first of the list, and
                // the rest of the body need not be read.
                gather(&mut items, oldest.finish().await);
                if let Err(e) = items {
                    return Err(e);
                }
            }
        }
        if ended {
            break;
        }
    }
    if !run.is_empty() {
        runs.push_back(dispatch::<K>(run, next_item, codec, scope, parallel));
    }
    let list = splitter.finish().map_err(structure)?;
    check_kind(&list.api_version, &list.kind)?;
    for run in runs {
        gather(&mut items, run.finish().await);
    }
    let meta = list.meta;
    let mut page = ObjectList::new(
        items?,
        ResourceVersion::from(meta.resource_version.unwrap_or_default()),
    );
    page.continue_token = meta.continue_token.filter(|t| !t.is_empty());
    page.remaining_item_count = meta.remaining_item_count;
    Ok((page, bytes))
}

/// A bad protobuf list, at `at` (`items[3]`) if an item is to blame.
fn protobuf_error(at: Option<String>, source: kinformer_protobuf::Error) -> Error {
    Error::Protobuf {
        what: "list",
        at,
        source,
    }
}

/// A run of protobuf list items being decoded: on a worker thread, or done already.
enum Run<K> {
    Spawned(tokio::task::JoinHandle<Result<Vec<Arc<K>>, Error>>),
    Done(Result<Vec<Arc<K>>, Error>),
}

impl<K: Send + 'static> Run<K> {
    async fn finish(self) -> Result<Vec<Arc<K>>, Error> {
        match self {
            Run::Done(run) => run,
            Run::Spawned(task) => match task.await {
                Ok(run) => run,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => Err(Error::Interrupted {
                    events: 0,
                    reason: "the runtime shut down while decoding".to_owned(),
                }),
            },
        }
    }
}

/// Starts decoding a run of items whose first is item number `start`: on a worker thread when
/// there is a runtime, at once otherwise.
fn dispatch<K: Object>(
    run: Vec<Bytes>,
    start: usize,
    codec: &'static Codec,
    scope: Scope,
    parallel: bool,
) -> Run<K> {
    if parallel {
        Run::Spawned(tokio::spawn(async move {
            decode_run(&run, start, codec, scope)
        }))
    } else {
        Run::Done(decode_run(&run, start, codec, scope))
    }
}

/// Adds a run's items to `items`; the first bad item wins, later errors are dropped.
fn gather<K>(items: &mut Result<Vec<Arc<K>>, Error>, run: Result<Vec<Arc<K>>, Error>) {
    match (&mut *items, run) {
        (Ok(items), Ok(run)) => items.extend(run),
        (Ok(_), Err(e)) => *items = Err(e),
        (Err(_), _) => {}
    }
}

/// Decodes each item's message of a run whose first is item number `start`.
fn decode_run<K: Object>(
    raw: &[Bytes],
    start: usize,
    codec: &'static Codec,
    scope: Scope,
) -> Result<Vec<Arc<K>>, Error> {
    let mut out = Vec::with_capacity(raw.len());
    for (i, message) in raw.iter().enumerate() {
        let at = || Some(format!("items[{}]", start + i));
        let object = match codec.decode::<K>(message) {
            Some(Ok(object)) => object,
            Some(Err(e)) => return Err(protobuf_error(at(), e)),
            None => {
                return Err(protobuf_error(
                    at(),
                    kinformer_protobuf::Error::UnexpectedKind {
                        expected: std::any::type_name::<K>().to_owned(),
                        found: format!("{}/{}", codec.api_version(), codec.kind()),
                    },
                ));
            }
        };
        if let Some(field) = missing_identity(&*object, scope == Scope::Namespaced) {
            return Err(protobuf_error(
                at(),
                kinformer_protobuf::Error::MissingField {
                    what: "list item",
                    field,
                },
            ));
        }
        out.push(object);
    }
    Ok(out)
}

/// The page back from its `Arc`, once every run is done with it.
fn unwrap_page(page: Arc<ListPage>) -> ListPage {
    Arc::try_unwrap(page).unwrap_or_else(|shared| (*shared).clone())
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

    fn runtimes() -> Vec<tokio::runtime::Runtime> {
        vec![
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap(),
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(3)
                .build()
                .unwrap(),
        ]
    }

    #[test]
    fn items_keep_their_order_on_any_runtime() {
        for rt in runtimes() {
            for n in [0, 1, 63, 64, 65, 128, 129, 1001] {
                let text = body(n, None);
                let want = ObjectList::<DynamicObject>::from_json_scoped(
                    text.as_bytes(),
                    Scope::Namespaced,
                )
                .unwrap();
                let got: ObjectList<DynamicObject> = rt
                    .block_on(decode_list(text.into_bytes(), Scope::Namespaced))
                    .unwrap();
                assert_eq!(names(&got), names(&want), "{n} items");
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
        for rt in runtimes() {
            for (bad, scope) in cases {
                for at in [0, 63, 64, 150, 299] {
                    let text = body(300, Some((at, bad)));
                    let want =
                        ObjectList::<DynamicObject>::from_json_scoped(text.as_bytes(), scope)
                            .unwrap_err()
                            .to_string();
                    assert!(want.contains(&format!("items[{at}]")), "{want}");
                    let got = rt
                        .block_on(decode_list::<DynamicObject>(text.into_bytes(), scope))
                        .unwrap_err()
                        .to_string();
                    assert_eq!(got, want, "{bad} at {at}");
                }
            }
            // A second bad item later does not hide the first, even in a run decoded first.
            let mut text = body(300, Some((240, r#"{"metadata":7}"#)));
            text = text.replace(r#""name":"cm10""#, r#""name":"""#);
            let got = rt
                .block_on(decode_list::<DynamicObject>(
                    text.into_bytes(),
                    Scope::Namespaced,
                ))
                .unwrap_err();
            assert!(got.to_string().contains("items[10]"), "{got}");
            let cut = b"{\"items\":[".to_vec();
            assert!(
                rt.block_on(decode_list::<DynamicObject>(cut, Scope::Cluster))
                    .is_err()
            );
        }
    }
}
