//! The shared informer, with the default layers (client, in-order delta FIFO, indexer), against a
//! scripted API server on 127.0.0.1 that says things a real one should not: a DELETED for a key
//! nobody has, resource versions that go backwards, a list that repeats a key, objects without a
//! resourceVersion, a bookmark without one, an ERROR event with a code nobody knows. Each test
//! asserts what the cache ends up holding, what the handlers heard, and which requests followed:
//! nothing panics, nothing loops, and the cache is the server's last word.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_client::{Api, Client, Config as ClientConfig};
use kinformer_core::{CacheRead, Object};
use kinformer_delta_fifo::DeltaFifo;
use kinformer_indexer::Indexer;
use kinformer_shared_informer::{InformerConfig, SharedIndexInformer, wait_for_cache_sync};
use kinformer_test_support::{Heard, Recorder};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

type Informer = SharedIndexInformer<Pod, DeltaFifo<Pod>, Indexer<Pod>>;

/// The bound on waiting for any one condition.
const BOUND: Duration = Duration::from_secs(20);

/// One watch the server answers: these lines, then either a clean end or silence.
struct Watch {
    lines: Vec<String>,
    close: bool,
}

/// What the scripted server answers: lists in order (the last one again and again), watches in
/// order; once the watches run out, every further watch is held open and silent.
struct Script {
    lists: VecDeque<String>,
    watches: VecDeque<Watch>,
    /// `list <resourceVersion>` or `watch <resourceVersion>` per request, in order.
    requests: Vec<String>,
}

#[derive(Clone)]
struct Server {
    url: String,
    script: Arc<Mutex<Script>>,
}

impl Server {
    async fn start(lists: Vec<String>, watches: Vec<Watch>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let script = Arc::new(Mutex::new(Script {
            lists: lists.into(),
            watches: watches.into(),
            requests: Vec::new(),
        }));
        let shared = Arc::clone(&script);
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(serve(conn, Arc::clone(&shared)));
            }
        });
        Self { url, script }
    }

    fn requests(&self) -> Vec<String> {
        self.script.lock().unwrap().requests.clone()
    }
}

/// Answers the requests of one connection (HTTP/1.1 keep-alive) until it closes.
async fn serve(mut conn: tokio::net::TcpStream, script: Arc<Mutex<Script>>) {
    loop {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match conn.read(&mut byte).await {
                Ok(1) => head.push(byte[0]),
                _ => return,
            }
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        let target = head
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let rv = target
            .split(['?', '&'])
            .find_map(|p| p.strip_prefix("resourceVersion="))
            .unwrap_or("-")
            .to_owned();
        let watch = target.contains("watch=true");
        let reply = {
            let mut s = script.lock().unwrap();
            s.requests
                .push(format!("{} {rv}", if watch { "watch" } else { "list" }));
            if watch {
                s.watches.pop_front().map(|w| (w.lines, w.close))
            } else {
                let body = if s.lists.len() > 1 {
                    s.lists.pop_front()
                } else {
                    s.lists.front().cloned()
                };
                Some((vec![body.unwrap_or_default()], true))
            }
        };
        let Some((lines, close)) = reply else {
            // No more watches: hold this one open, silent, until the client goes.
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n").await;
            let mut sink = [0u8; 64];
            while matches!(conn.read(&mut sink).await, Ok(n) if n > 0) {}
            return;
        };
        let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        for line in lines {
            let line = if watch { format!("{line}\n") } else { line };
            out.extend_from_slice(format!("{:x}\r\n{line}\r\n", line.len()).as_bytes());
        }
        if close {
            out.extend_from_slice(b"0\r\n\r\n");
        }
        if conn.write_all(&out).await.is_err() {
            return;
        }
        if !close {
            let mut sink = [0u8; 64];
            while matches!(conn.read(&mut sink).await, Ok(n) if n > 0) {}
            return;
        }
    }
}

/// A pod as JSON; `rv` `None` leaves the resourceVersion out.
fn pod(name: &str, rv: Option<&str>, step: u32) -> String {
    let rv = rv.map_or_else(String::new, |v| format!(r#","resourceVersion":"{v}""#));
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"ns"{rv},"labels":{{"step":"{step}"}}}}}}"#
    )
}

fn list(rv: &str, items: &[String]) -> String {
    format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}},"items":[{}]}}"#,
        items.join(",")
    )
}

fn event(kind: &str, object: &str) -> String {
    format!(r#"{{"type":"{kind}","object":{object}}}"#)
}

fn watch(lines: Vec<String>, close: bool) -> Watch {
    Watch { lines, close }
}

/// A handler that writes down what it hears, one line per call: `add key rv`,
/// `update key rv>rv`, `delete key rv`, `tombstone key rv`, with `-` for a missing rv.
type Record = Recorder<Pod>;

fn rv(p: &Pod) -> &str {
    p.resource_version().unwrap_or("-")
}

fn record() -> Record {
    Recorder::with_format(|heard: &Heard<'_, Pod>| match heard {
        Heard::Add { object, .. } => format!("add {} {}", object.key(), rv(object)),
        Heard::Update { old, new } => format!("update {} {}>{}", new.key(), rv(old), rv(new)),
        Heard::Delete(o) => format!("{} {} {}", heard.verb(), o.key(), rv(o.object())),
    })
}

/// An informer over `server`, with one recording handler, running.
async fn start(server: &Server) -> (Arc<Informer>, Record, tokio::task::JoinHandle<()>) {
    let cache = Arc::new(Indexer::<Pod>::new());
    let queue = Arc::new(DeltaFifo::new(cache.clone()));
    let api = Api::all(Client::new(ClientConfig::new(server.url.clone())).unwrap());
    let reflector = kinformer_reflector::Config {
        name: "pods".into(),
        seed: Some(7),
        backoff: kinformer_reflector::BackoffConfig {
            initial: Duration::from_millis(5),
            max: Duration::from_millis(50),
            ..kinformer_reflector::BackoffConfig::default()
        },
        // These servers answer lists and watches; they know no streaming list.
        streaming_list: kinformer_reflector::StreamingList::Off,
        ..kinformer_reflector::Config::default()
    };
    let config = InformerConfig {
        name: "pods".into(),
        ..InformerConfig::default()
    };
    let events = kinformer_reflector::watcher(api, reflector);
    let informer = Arc::new(SharedIndexInformer::new(events, queue, cache, config));
    let record = record();
    let _registration = informer.add_handler(record.clone()).unwrap();
    let task = {
        let informer = Arc::clone(&informer);
        tokio::spawn(async move { informer.run().await })
    };
    assert!(wait_for_cache_sync(&[&*informer], Some(BOUND)).await);
    (informer, record, task)
}

/// Waits, within the bound, until `cond` holds.
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + BOUND;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The cache as `key -> resourceVersion step=<label>`.
fn cached(informer: &Informer) -> BTreeMap<String, String> {
    informer
        .cache()
        .list()
        .iter()
        .map(|p| {
            let step = p
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("step"))
                .cloned()
                .unwrap_or_default();
            (p.key().to_string(), format!("{} step={step}", rv(p)))
        })
        .collect()
}

fn map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

async fn stop(informer: Arc<Informer>, task: tokio::task::JoinHandle<()>) {
    tokio::time::timeout(BOUND, informer.shutdown())
        .await
        .expect("the informer stops");
    tokio::time::timeout(BOUND, task)
        .await
        .expect("its task ends")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_event_for_an_unknown_key_changes_nothing_and_reaches_no_handler() {
    let server = Server::start(
        vec![list("10", &[pod("a", Some("5"), 0)])],
        vec![watch(
            vec![
                event("DELETED", &pod("ghost", Some("11"), 0)),
                event("ADDED", &pod("c", Some("12"), 0)),
            ],
            false,
        )],
    )
    .await;
    let (informer, record, task) = start(&server).await;
    eventually("c in the cache", || cached(&informer).contains_key("ns/c")).await;
    eventually("the add of c handled", || record.lines().len() == 2).await;
    assert_eq!(
        cached(&informer),
        map(&[("ns/a", "5 step=0"), ("ns/c", "12 step=0")])
    );
    assert_eq!(record.lines(), ["add ns/a 5", "add ns/c 12"]);
    assert_eq!(
        informer.last_sync_resource_version().unwrap().as_str(),
        "12"
    );
    assert_eq!(server.requests(), ["list 0", "watch 10"]);
    stop(informer, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_versions_that_go_backwards_are_applied_in_the_order_sent() {
    // Versions are opaque strings: as client-go, the informer never compares them. Events apply
    // in the order the server sent them, and the next watch starts from the last one's version.
    let server = Server::start(
        vec![list("10", &[pod("a", Some("10"), 0)])],
        vec![watch(
            vec![
                event("MODIFIED", &pod("a", Some("12"), 1)),
                event("MODIFIED", &pod("a", Some("11"), 2)),
                event("ADDED", &pod("b", Some("4"), 0)),
            ],
            true,
        )],
    )
    .await;
    let (informer, record, task) = start(&server).await;
    eventually("the watch opened again", || server.requests().len() == 3).await;
    eventually("every event handled", || record.lines().len() == 4).await;
    assert_eq!(server.requests(), ["list 0", "watch 10", "watch 4"]);
    assert_eq!(
        cached(&informer),
        map(&[("ns/a", "11 step=2"), ("ns/b", "4 step=0")])
    );
    assert_eq!(
        record.lines(),
        [
            "add ns/a 10",
            "update ns/a 10>12",
            "update ns/a 12>11",
            "add ns/b 4"
        ]
    );
    stop(informer, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_that_repeats_a_key_caches_its_last_copy_once() {
    let server = Server::start(
        vec![list(
            "10",
            &[
                pod("a", Some("1"), 1),
                pod("b", Some("2"), 0),
                pod("a", Some("3"), 3),
            ],
        )],
        vec![],
    )
    .await;
    let (informer, record, task) = start(&server).await;
    assert_eq!(
        cached(&informer),
        map(&[("ns/a", "3 step=3"), ("ns/b", "2 step=0")])
    );
    assert_eq!(informer.cache().list().len(), 2);
    eventually("the list handled", || record.lines().len() == 3).await;
    // Handlers hear the list in order, the second copy as an update: they end believing the
    // last copy, as the cache does.
    assert_eq!(
        record.lines(),
        ["add ns/a 1", "add ns/b 2", "update ns/a 1>3"]
    );
    stop(informer, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_without_a_resource_version_are_cached_but_move_no_version() {
    let server = Server::start(
        vec![list("10", &[pod("a", None, 0)])],
        vec![watch(
            vec![
                event("MODIFIED", &pod("a", None, 1)),
                event("ADDED", &pod("b", None, 0)),
            ],
            true,
        )],
    )
    .await;
    let (informer, record, task) = start(&server).await;
    eventually("the watch opened again", || server.requests().len() == 3).await;
    eventually("b in the cache", || cached(&informer).contains_key("ns/b")).await;
    eventually("the add of b handled", || record.lines().len() == 2).await;
    // No version to resume from but the list's.
    assert_eq!(server.requests(), ["list 0", "watch 10", "watch 10"]);
    assert_eq!(
        cached(&informer),
        map(&[("ns/a", "- step=1"), ("ns/b", "- step=0")])
    );
    // As client-go: an update whose old and new versions are equal (here both missing) is a
    // resync, heard only by handlers due for one; this handler asked for none.
    assert_eq!(record.lines(), ["add ns/a -", "add ns/b -"]);
    stop(informer, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bookmark_without_a_version_moves_nothing() {
    let server = Server::start(
        vec![list("10", &[pod("a", Some("5"), 0)])],
        vec![watch(
            vec![
                event("ADDED", &pod("b", Some("11"), 0)),
                r#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{}}}"#
                    .to_owned(),
                r#"{"type":"BOOKMARK","object":{}}"#.to_owned(),
            ],
            true,
        )],
    )
    .await;
    let (informer, record, task) = start(&server).await;
    eventually("the watch opened again", || server.requests().len() == 3).await;
    assert_eq!(server.requests(), ["list 0", "watch 10", "watch 11"]);
    // The reflector has read the add of b; the informer's consumer applies it on its own task.
    eventually("b in the cache", || cached(&informer).contains_key("ns/b")).await;
    assert_eq!(
        cached(&informer),
        map(&[("ns/a", "5 step=0"), ("ns/b", "11 step=0")])
    );
    assert_eq!(
        informer.last_sync_resource_version().unwrap().as_str(),
        "11"
    );
    eventually("the add of b handled", || record.lines().len() == 2).await;
    assert_eq!(record.lines(), ["add ns/a 5", "add ns/b 11"]);
    stop(informer, task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_event_with_an_unknown_code_relists_from_the_last_version() {
    // Neither 410 (relist at once), 429 nor 5xx (watch again): a failure of unknown meaning,
    // reported, then a relist from the last synced version after a backoff step.
    let status = |code: u32| {
        format!(
            r#"{{"type":"ERROR","object":{{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Teapot","code":{code}}}}}"#
        )
    };
    let server = Server::start(
        vec![
            list("10", &[pod("a", Some("5"), 0)]),
            list("13", &[pod("a", Some("5"), 0), pod("b", Some("13"), 0)]),
        ],
        vec![
            watch(
                vec![event("ADDED", &pod("c", Some("11"), 0)), status(418)],
                true,
            ),
            watch(vec![status(0)], true),
            watch(vec![r#"{"type":"ERROR","object":{}}"#.to_owned()], true),
        ],
    )
    .await;
    let (informer, record, task) = start(&server).await;
    eventually("three relists and the last watch", || {
        server.requests().len() == 8
    })
    .await;
    assert_eq!(
        server.requests(),
        [
            "list 0", "watch 10", "list 11", "watch 13", "list 13", "watch 13", "list 13",
            "watch 13"
        ]
    );
    // The last watch shows the reflector has queued the relists, not that the informer's
    // consumer, on its own task, has applied them.
    let expected = map(&[("ns/a", "5 step=0"), ("ns/b", "13 step=0")]);
    eventually("the relists applied", || cached(&informer) == expected).await;
    assert_eq!(cached(&informer), expected);
    eventually("every change handled", || record.lines().len() == 4).await;
    assert_eq!(
        record.lines(),
        [
            "add ns/a 5",
            "add ns/c 11",
            "tombstone ns/c 11",
            "add ns/b 13"
        ]
    );
    stop(informer, task).await;
}
