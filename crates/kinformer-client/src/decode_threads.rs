//! Tests that objects are decoded on the async runtime's worker threads, never on threads of
//! their own: decoded elsewhere, their memory stayed in those threads' allocator arenas when the
//! watch replaced them, and a typed cache's resident size doubled (docs/benchmarks.md).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use futures_util::StreamExt as _;
use kinformer_core::{DynamicObject, Object, Scope, WatchEvent};
use parking_lot::Mutex;
use serde::{Deserialize, Deserializer};

/// The objects decoded so far: each name, and whether its decode ran inside a tokio runtime.
static SEEN: Mutex<Vec<(String, bool)>> = Mutex::new(Vec::new());

/// A dynamic object whose decoding notes where it ran.
#[derive(Debug)]
struct Probe(DynamicObject);

impl<'de> Deserialize<'de> for Probe {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let in_runtime = tokio::runtime::Handle::try_current().is_ok();
        let object = DynamicObject::deserialize(d)?;
        SEEN.lock().push((object.name().to_owned(), in_runtime));
        Ok(Probe(object))
    }
}

impl Object for Probe {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn namespace(&self) -> Option<&str> {
        self.0.namespace()
    }
    fn uid(&self) -> Option<&str> {
        self.0.uid()
    }
    fn resource_version(&self) -> Option<&str> {
        self.0.resource_version()
    }
    fn labels(&self) -> &BTreeMap<String, String> {
        self.0.labels()
    }
}

/// A ~5 KB object named `{prefix}{i}`, as large as a pod, so that a watch hands it off.
fn object(prefix: &str, i: usize) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{prefix}{i}","namespace":"ns","resourceVersion":"{i}"}},"data":{{"k":"{}"}}}}"#,
        "x".repeat(5000)
    )
}

/// A runtime of two workers that counts every thread it starts, workers and blocking threads.
fn counted_runtime() -> (tokio::runtime::Runtime, Arc<AtomicUsize>) {
    let started = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&started);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .expect("a runtime");
    (rt, started)
}

/// Each object named with `prefix` was decoded once, inside the runtime.
fn assert_decoded_in_runtime(prefix: &str, count: usize) {
    let seen: Vec<bool> = SEEN
        .lock()
        .iter()
        .filter(|(name, _)| name.starts_with(prefix))
        .map(|(_, in_runtime)| *in_runtime)
        .collect();
    assert_eq!(seen.len(), count, "objects decoded");
    assert!(
        seen.iter().all(|in_runtime| *in_runtime),
        "{} of {count} objects were decoded outside the runtime",
        seen.iter().filter(|r| !**r).count()
    );
}

#[test]
fn list_items_are_decoded_on_the_runtime_workers() {
    let items: Vec<String> = (0..600).map(|i| object("list-", i)).collect();
    let body = format!(
        r#"{{"metadata":{{"resourceVersion":"9"}},"items":[{}]}}"#,
        items.join(",")
    );
    let (rt, started) = counted_runtime();
    // In chunks of 64 KiB, as from a busy server.
    let chunks: Vec<Result<Bytes, crate::Error>> = body
        .as_bytes()
        .chunks(64 * 1024)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let too_many = || unreachable!("no bound on items");
    let list = rt
        .block_on(crate::list::decode_json_list::<Probe>(
            futures_util::stream::iter(chunks),
            Scope::Namespaced,
            kinformer_core::trim::ManagedFieldsDecode::Keep,
            usize::MAX,
            too_many,
        ))
        .expect("the list decodes")
        .list;
    assert_eq!(list.items.len(), 600);
    assert_eq!(list.items[599].name(), "list-599");
    assert_decoded_in_runtime("list-", 600);
    drop(rt);
    assert_eq!(
        started.load(Ordering::SeqCst),
        2,
        "threads the runtime started: its two workers, no blocking thread"
    );
}

#[test]
fn watch_events_are_decoded_on_the_runtime_workers() {
    let lines: String = (0..300)
        .map(|i| {
            format!(
                "{{\"type\":\"ADDED\",\"object\":{}}}\n",
                object("watch-", i)
            )
        })
        .collect();
    // In chunks of 64 KiB: batches of a dozen events, handed off, as from a busy server.
    let chunks: Vec<Result<Bytes, std::io::Error>> = lines
        .as_bytes()
        .chunks(64 * 1024)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let (rt, started) = counted_runtime();
    let names = rt.block_on(async {
        let events =
            crate::decode_watch::<Probe, _, _>(futures_util::stream::iter(chunks), 1 << 20, None);
        events
            .map(|e| match e {
                Ok(WatchEvent::Added(o)) => o.name().to_owned(),
                other => panic!("{other:?}"),
            })
            .collect::<Vec<_>>()
            .await
    });
    let want: Vec<String> = (0..300).map(|i| format!("watch-{i}")).collect();
    assert_eq!(names, want, "events in the order of their lines");
    assert_decoded_in_runtime("watch-", 300);
    drop(rt);
    assert_eq!(
        started.load(Ordering::SeqCst),
        2,
        "threads the runtime started: its two workers, no blocking thread"
    );
}
