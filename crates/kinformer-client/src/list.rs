//! Decoding a list response on all cores while it arrives: its items are cut out of the body as
//! their last bytes come in, decoded in runs on the async runtime's own worker threads, and
//! assembled in order; each run's bytes are dropped once it is decoded.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};
use kinformer_core::trim::ManagedFieldsDecode;
use kinformer_core::{
    JsonListSplitter, Object, ObjectList, ResourceVersion, Scope, missing_identity,
};
use kinformer_protobuf::convert::Codec;
use kinformer_protobuf::wire::ListSplitter;
use serde::de::DeserializeOwned;

use crate::Error;

/// Items per decode task: ~64 pods of ~5 KB take ~1.5 ms, short enough not to hold a worker
/// thread from other tasks for long, long enough that a task costs little beside it.
const ITEMS_PER_TASK: usize = 64;

/// Runs of list items decoding at once, at most. Past it, the body is not read on until the
/// oldest run is done: a body that arrives faster than its items decode waits in the socket,
/// not in memory.
const RUNS_IN_FLIGHT: usize = 16;

/// Decodes a JSON list body as [`ObjectList::from_json_scoped`] does, with the same items and
/// metadata, while it arrives ([`JsonListSplitter`]): each run of items is decoded on the
/// runtime's worker threads (`tokio::spawn`) as soon as its last byte is in, and its bytes are
/// dropped once it is decoded, so the whole body is never held (a first list served whole from
/// the watch cache is 1.5 GB of JSON for 100,000 dense pods). An item past `max_items` ends the
/// list with `too_many()` before it is decoded.
///
/// The runtime's workers, not threads of their own: the objects of a list and of the watch that
/// follows are then allocated by the same threads, so the memory of listed objects the watch
/// replaces is reused for their successors. Decoded on other threads, it stayed with those
/// threads' allocator arenas, and the resident size of a typed cache doubled under updates
/// (docs/benchmarks.md).
///
/// An error of `body` ends the list at once, and so does a malformed body or a bad item, as
/// soon as it is found: the first found is the error. Of two bad items, the first in the list
/// is named.
pub(crate) async fn decode_json_list<K: Object + DeserializeOwned>(
    mut body: impl Stream<Item = Result<Bytes, Error>> + Unpin,
    scope: Scope,
    managed_fields: ManagedFieldsDecode,
    max_items: usize,
    too_many: impl Fn() -> Error,
) -> Result<Decoded<K>, Error> {
    let mut splitter = JsonListSplitter::new();
    let mut runs = Runs::new();
    let mut bytes = 0u64;
    let mut ended = false;
    while !ended {
        match body.next().await.transpose()? {
            Some(chunk) => {
                bytes += chunk.len() as u64;
                splitter.push(&chunk).map_err(json_list_error)?;
            }
            None => ended = true,
        }
        if runs.taken + splitter.ready() > max_items {
            return Err(too_many());
        }
        if splitter.ready() < ITEMS_PER_TASK && !ended {
            continue;
        }
        let Some(ready) = splitter.take_items() else {
            continue;
        };
        for run in ready.into_runs(ITEMS_PER_TASK) {
            let n = run.len();
            runs.push(n, move || {
                run.decode_with::<K>(Some(scope), managed_fields)
                    .map_err(json_list_error)
            })
            .await?;
        }
    }
    let mut list = splitter.finish(Vec::new()).map_err(json_list_error)?;
    let (items, decoding) = runs.finish().await?;
    list.items = items;
    Ok(Decoded {
        list,
        bytes,
        decoding,
    })
}

/// A list decoded while it arrived.
pub(crate) struct Decoded<K> {
    pub(crate) list: ObjectList<K>,
    /// The bytes its body took (decompressed).
    pub(crate) bytes: u64,
    /// The time its items took to decode, summed over the threads that decoded them.
    pub(crate) decoding: Duration,
}

/// A bad JSON list.
fn json_list_error(source: kinformer_core::Error) -> Error {
    Error::Decode {
        what: "list",
        line: None,
        offset: None,
        source,
    }
}

/// Decodes a protobuf list body (the `k8s\0` envelope around a `<Kind>List` message) with the
/// kind's codec while it arrives ([`ListSplitter`]), as [`decode_json_list`] decodes a JSON one:
/// runs of items on the runtime's worker threads as soon as their bytes are in, their bytes
/// dropped once decoded, in order; an item without a name (or, for a namespaced resource, a
/// namespace) is an error naming the item, as in a JSON list; an item past `max_items` ends the
/// list with `too_many()` before it is decoded.
///
/// An error of `body` ends the list at once, and so does a bad item, a malformed envelope or
/// list, or a list of another kind, as soon as it is found: the first found is the error. Of
/// two bad items, the first in the list is named.
pub(crate) async fn decode_protobuf_list<K: Object>(
    mut body: impl Stream<Item = Result<Bytes, Error>> + Unpin,
    codec: &'static Codec,
    scope: Scope,
    managed_fields: ManagedFieldsDecode,
    max_items: usize,
    too_many: impl Fn() -> Error,
) -> Result<Decoded<K>, Error> {
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
    let mut splitter = ListSplitter::new();
    let mut runs = Runs::new();
    let mut bytes = 0u64;
    let mut kind_checked = false;
    let mut run = Vec::with_capacity(ITEMS_PER_TASK);
    while let Some(chunk) = body.next().await.transpose()? {
        bytes += chunk.len() as u64;
        splitter.push(chunk);
        while let Some(item) = splitter.next_item().map_err(structure)? {
            if !kind_checked && let Some((api_version, kind)) = splitter.type_meta() {
                check_kind(api_version, kind)?;
                kind_checked = true;
            }
            if runs.taken + run.len() >= max_items {
                return Err(too_many());
            }
            run.push(item);
            if run.len() == ITEMS_PER_TASK {
                let full = std::mem::replace(&mut run, Vec::with_capacity(ITEMS_PER_TASK));
                let start = runs.taken;
                runs.push(full.len(), move || {
                    decode_run(&full, start, codec, scope, managed_fields)
                })
                .await?;
            }
        }
    }
    if !run.is_empty() {
        let start = runs.taken;
        runs.push(run.len(), move || {
            decode_run(&run, start, codec, scope, managed_fields)
        })
        .await?;
    }
    let list = splitter.finish().map_err(structure)?;
    check_kind(&list.api_version, &list.kind)?;
    let meta = list.meta;
    let (items, decoding) = runs.finish().await?;
    let mut list = ObjectList::new(
        items,
        ResourceVersion::from(meta.resource_version.unwrap_or_default()),
    );
    list.continue_token = meta.continue_token.filter(|t| !t.is_empty());
    list.remaining_item_count = meta.remaining_item_count;
    Ok(Decoded {
        list,
        bytes,
        decoding,
    })
}

/// A bad protobuf list, at `at` (`items[3]`) if an item is to blame.
fn protobuf_error(at: Option<String>, source: kinformer_protobuf::Error) -> Error {
    Error::Protobuf {
        what: "list",
        at,
        source,
    }
}

/// The decoded items of one run, or the first bad item's error.
type RunResult<K> = Result<Vec<Arc<K>>, Error>;

/// A list's runs of items being decoded, oldest first, and the items of the runs done.
struct Runs<K> {
    in_flight: VecDeque<Run<K>>,
    done: Vec<Arc<K>>,
    /// Nanoseconds the runs took to decode, summed over the threads that decoded them.
    decoding: Arc<std::sync::atomic::AtomicU64>,
    /// Items handed to runs so far.
    taken: usize,
    /// Whether runs go to the runtime's workers (there is a runtime) or are decoded at once.
    parallel: bool,
}

/// A run of items being decoded: on a worker thread, or done already.
enum Run<K> {
    Spawned(tokio::task::JoinHandle<RunResult<K>>),
    Done(RunResult<K>),
}

impl<K: Send + Sync + 'static> Runs<K> {
    fn new() -> Self {
        Runs {
            in_flight: VecDeque::new(),
            done: Vec::new(),
            decoding: Arc::default(),
            taken: 0,
            parallel: tokio::runtime::Handle::try_current().is_ok(),
        }
    }

    /// Starts decoding a run of `items` items. Past [`RUNS_IN_FLIGHT`], waits for the oldest
    /// run first: runs are gathered in order, so a bad item there is the first of the list,
    /// and ends it.
    async fn push(
        &mut self,
        items: usize,
        decode: impl FnOnce() -> RunResult<K> + Send + 'static,
    ) -> Result<(), Error> {
        self.taken += items;
        let decoding = Arc::clone(&self.decoding);
        let decode = move || {
            let started = std::time::Instant::now();
            let run = decode();
            let took = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            decoding.fetch_add(took, std::sync::atomic::Ordering::Relaxed);
            run
        };
        self.in_flight.push_back(if self.parallel {
            Run::Spawned(tokio::spawn(async move { decode() }))
        } else {
            Run::Done(decode())
        });
        if self.in_flight.len() > RUNS_IN_FLIGHT
            && let Some(oldest) = self.in_flight.pop_front()
        {
            self.done.extend(Self::wait(oldest).await?);
        }
        Ok(())
    }

    /// Every item, in order, once every run is done, and the time the runs took to decode
    /// them (summed over threads); the first bad item's error if any.
    async fn finish(mut self) -> Result<(Vec<Arc<K>>, Duration), Error> {
        while let Some(run) = self.in_flight.pop_front() {
            self.done.extend(Self::wait(run).await?);
        }
        let nanos = self.decoding.load(std::sync::atomic::Ordering::Relaxed);
        Ok((self.done, Duration::from_nanos(nanos)))
    }

    async fn wait(run: Run<K>) -> RunResult<K> {
        match run {
            Run::Done(run) => run,
            Run::Spawned(task) => match task.await {
                Ok(run) => run,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // The runtime is shutting down: no list, rather than a short one.
                Err(_) => Err(Error::Interrupted {
                    events: 0,
                    reason: "the runtime shut down while decoding".to_owned(),
                }),
            },
        }
    }
}

/// Decodes each item's message of a protobuf run whose first is item number `start`.
fn decode_run<K: Object>(
    raw: &[Bytes],
    start: usize,
    codec: &'static Codec,
    scope: Scope,
    managed_fields: ManagedFieldsDecode,
) -> RunResult<K> {
    let mut out = Vec::with_capacity(raw.len());
    for (i, message) in raw.iter().enumerate() {
        let at = || Some(format!("items[{}]", start + i));
        let message = kinformer_protobuf::trim::message(managed_fields, message);
        let object = match codec.decode::<K>(&message) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use kinformer_core::DynamicObject;

    /// `body` through [`decode_json_list`] in chunks of `chunk` bytes, with no bound on items;
    /// its error is the list's own.
    async fn decode_in_chunks<K: Object + DeserializeOwned>(
        body: Vec<u8>,
        scope: Scope,
        chunk: usize,
    ) -> Result<ObjectList<K>, kinformer_core::Error> {
        let chunks: Vec<Result<Bytes, Error>> = body
            .chunks(chunk)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let too_many = || unreachable!("no bound on items");
        match decode_json_list(
            futures_util::stream::iter(chunks),
            scope,
            ManagedFieldsDecode::Keep,
            usize::MAX,
            too_many,
        )
        .await
        {
            Ok(decoded) => Ok(decoded.list),
            Err(Error::Decode { source, .. }) => Err(source),
            Err(other) => panic!("{other:?}"),
        }
    }

    /// `body` in chunks of 1 KiB.
    async fn decode_list<K: Object + DeserializeOwned>(
        body: Vec<u8>,
        scope: Scope,
    ) -> Result<ObjectList<K>, kinformer_core::Error> {
        decode_in_chunks(body, scope, 1024).await
    }

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
