//! The shared informer against the simulated server over HTTP, with the default layers: the
//! client, the in-order delta FIFO and the indexer.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_client::{Api, Client, Config as ClientConfig};
use kinformer_core::{ApiResource, CacheRead, Object, Scope};
use kinformer_delta_fifo::DeltaFifo;
use kinformer_indexer::Indexer;
use kinformer_shared_informer::{
    InformerConfig, Registration, ResourceEventHandler, SharedIndexInformer, wait_for_cache_sync,
};
use kinformer_sim::{SimConfig, SimServer};
use kinformer_test_support::Recorder;
use serde_json::json;

type Informer = SharedIndexInformer<Pod, DeltaFifo<Pod>, Indexer<Pod>>;

fn pods() -> ApiResource {
    ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced)
}

fn config() -> InformerConfig<Pod> {
    InformerConfig {
        name: "pods".into(),
        ..InformerConfig::default()
    }
}

async fn start(sim: &SimServer, config: InformerConfig<Pod>) -> Arc<Informer> {
    let cache = Arc::new(Indexer::<Pod>::new());
    let queue = Arc::new(DeltaFifo::new(cache.clone()));
    let api = Api::all(Client::new(ClientConfig::new(sim.url())).unwrap());
    let reflector = kinformer_reflector::Config {
        name: "pods".into(),
        seed: Some(3),
        backoff: kinformer_reflector::BackoffConfig {
            initial: Duration::from_millis(5),
            max: Duration::from_millis(50),
            ..kinformer_reflector::BackoffConfig::default()
        },
        ..kinformer_reflector::Config::default()
    };
    let events = kinformer_reflector::watcher(api, reflector);
    Arc::new(SharedIndexInformer::new(events, queue, cache, config))
}

fn run(informer: &Arc<Informer>) -> tokio::task::JoinHandle<()> {
    let informer = Arc::clone(informer);
    tokio::spawn(async move { informer.run().await })
}

/// A handler that writes down what it hears, one line per call: `add key rv initial`,
/// `update key rv>rv`, `delete key rv`, `tombstone key rv`.
type Record = Recorder<Pod>;

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..4000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for {what}");
}

fn create(sim: &SimServer, name: &str) {
    sim.store()
        .create(
            &pods(),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}}),
        )
        .unwrap();
}

fn touch(sim: &SimServer, name: &str, step: usize) {
    sim.store()
        .patch(
            &pods(),
            Some("default"),
            name,
            json!({"metadata": {"labels": {"step": step.to_string()}}}),
        )
        .unwrap();
}

fn server_keys(sim: &SimServer) -> BTreeSet<String> {
    sim.store()
        .list(&pods(), None)
        .iter()
        .map(|p| {
            format!(
                "{}/{}",
                p["metadata"]["namespace"].as_str().unwrap(),
                p["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

fn cache_keys(informer: &Informer) -> BTreeSet<String> {
    informer
        .cache()
        .list_keys()
        .into_iter()
        .map(|k| k.to_string())
        .collect()
}

/// Creates, updates and deletes pods named `w0..`: every kind of event.
fn churn(sim: &SimServer, n: usize) {
    for i in 0..n {
        create(sim, &format!("w{i}"));
        touch(sim, &format!("w{i}"), i);
        if i % 3 == 0 {
            sim.store()
                .delete(&pods(), Some("default"), &format!("w{i}"))
                .unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_handler_hears_the_same_history_per_key_after_the_cache_holds_it() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(10, 1);
    let informer = start(&sim, config()).await;
    let records: Vec<Record> = (0..3).map(|_| Record::default()).collect();
    let regs: Vec<Registration<Pod>> = records
        .iter()
        .map(|r| informer.add_handler(r.clone()).unwrap())
        .collect();
    let task = run(&informer);
    assert!(wait_for_cache_sync(&[&*informer], Some(Duration::from_secs(20))).await);
    churn(&sim, 12);
    let last = sim.store().resource_version().to_string();
    eventually("the last event", || {
        informer
            .last_sync_resource_version()
            .is_some_and(|v| v.as_str() == last)
            && regs.iter().all(|r| r.backlog() == 0)
    })
    .await;
    // The version above is the producer's, set when the last event is queued; the backlogs are
    // empty too before the consumer has handed the handlers the last batch. Wait until every
    // handler's history leads to the server's keys with the last change heard.
    let server = server_keys(&sim);
    eventually("all handled", || {
        cache_keys(&informer) == server
            && records.iter().all(|r| {
                r.replay().is_ok_and(|state| {
                    state.keys().cloned().collect::<BTreeSet<_>>() == server
                        && state.values().any(|v| *v == last)
                })
            })
            && regs.iter().all(|r| r.backlog() == 0)
    })
    .await;
    assert_eq!(cache_keys(&informer), server_keys(&sim));
    let first = records[0].per_key();
    assert!(first["default/w3"].iter().any(|l| l.starts_with("delete")));
    assert!(first["default/w1"].iter().any(|l| l.starts_with("update")));
    for r in &records[1..] {
        assert_eq!(r.per_key(), first);
    }
    assert!(regs.iter().all(Registration::has_synced));
    informer.shutdown().await;
    task.await.unwrap();
}

/// A handler that blocks on its first call until released.
#[derive(Clone, Default)]
struct Stuck(Arc<(Mutex<bool>, Condvar)>);

impl Stuck {
    fn release(&self) {
        *self.0.0.lock().unwrap() = true;
        self.0.1.notify_all();
    }
}

impl ResourceEventHandler<Pod> for Stuck {
    fn on_add(&self, _: &Arc<Pod>, _: bool) {
        let mut released = self.0.0.lock().unwrap();
        while !*released {
            released = self.0.1.wait(released).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_handler_delays_neither_the_cache_nor_the_other_handlers() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(5, 1);
    let informer = start(&sim, config()).await;
    let stuck = Stuck::default();
    let slow = informer.add_handler(stuck.clone()).unwrap();
    let fast = Record::default();
    let fast_reg = informer.add_handler(fast.clone()).unwrap();
    let task = run(&informer);
    assert!(wait_for_cache_sync(&[&*informer], Some(Duration::from_secs(20))).await);
    // Nine creates, nine updates, three deletes.
    churn(&sim, 9);
    let keys = server_keys(&sim);
    eventually("the fast handler and the cache", || {
        cache_keys(&informer) == keys && fast_reg.backlog() == 0 && fast.lines().len() == 5 + 21
    })
    .await;
    // The stuck handler has not got past its first call, and everything else went on.
    assert_eq!(slow.handled(), 0);
    assert_eq!(
        slow.backlog(),
        5 + 21,
        "everything, the call it is stuck in included"
    );
    assert!(!slow.has_synced());
    assert!(fast_reg.has_synced());
    stuck.release();
    eventually("the slow handler catches up", || slow.backlog() == 0).await;
    informer.shutdown().await;
    task.await.unwrap();
}

struct Panicky;

impl ResourceEventHandler<Pod> for Panicky {
    fn on_add(&self, o: &Arc<Pod>, _: bool) {
        assert!(!o.name().starts_with('w'), "boom on {}", o.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_is_contained_and_counted() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let informer = start(&sim, config()).await;
    let bad = informer.add_handler(Panicky).unwrap();
    let good = Record::default();
    let good_reg = informer.add_handler(good.clone()).unwrap();
    let task = run(&informer);
    assert!(wait_for_cache_sync(&[&*informer], Some(Duration::from_secs(20))).await);
    for i in 0..4 {
        create(&sim, &format!("w{i}"));
    }
    create(&sim, "calm");
    eventually("both handlers", || {
        good.lines().len() == 5 && bad.handled() == 5 && good_reg.backlog() == 0
    })
    .await;
    assert_eq!(bad.panics(), 4);
    informer.shutdown().await;
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_handler_gets_the_cache_then_live_events_with_no_gap_and_no_duplicate() {
    let sim = Arc::new(SimServer::start(SimConfig::default()).await.unwrap());
    sim.store().seed_pods(20, 1);
    let informer = start(&sim, config()).await;
    let task = run(&informer);
    assert!(wait_for_cache_sync(&[&*informer], Some(Duration::from_secs(20))).await);
    let (halfway, reached) = tokio::sync::oneshot::channel();
    let writer = {
        let sim = Arc::clone(&sim);
        tokio::spawn(async move {
            let mut halfway = Some(halfway);
            for i in 0..60 {
                create(&sim, &format!("w{i}"));
                if i == 30 {
                    let _ = halfway.take().unwrap().send(());
                }
                tokio::task::yield_now().await;
            }
        })
    };
    // Added while the writer is halfway: events are on the wire and in the queue.
    reached.await.unwrap();
    let late = Record::default();
    let reg = informer.add_handler(late.clone()).unwrap();
    writer.await.unwrap();
    let last = sim.store().resource_version().to_string();
    eventually("everything", || {
        informer
            .last_sync_resource_version()
            .is_some_and(|v| v.as_str() == last)
            && reg.backlog() == 0
            && late.lines().len() == 80
    })
    .await;
    let adds: Vec<String> = late
        .lines()
        .iter()
        .map(|l| l.split(' ').nth(1).unwrap().to_owned())
        .collect();
    let unique: BTreeSet<String> = adds.iter().cloned().collect();
    assert_eq!(adds.len(), unique.len(), "no duplicate");
    assert_eq!(unique, server_keys(&sim), "no gap");
    assert!(late.lines().iter().all(|l| l.starts_with("add")));
    assert!(reg.has_synced());
    // Removed: it hears nothing more, and removing again is fine.
    reg.remove();
    reg.remove();
    create(&sim, "after-removal");
    eventually("the cache", || {
        cache_keys(&informer).contains("default/after-removal")
    })
    .await;
    assert_eq!(late.lines().len(), 80);
    informer.shutdown().await;
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_missed_by_the_watch_reaches_on_delete_as_a_tombstone_with_the_last_state() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(3, 1);
    create(&sim, "doomed");
    touch(&sim, "doomed", 1);
    let doomed_rv =
        sim.store().get(&pods(), Some("default"), "doomed").unwrap()["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_owned();
    let informer = start(&sim, config()).await;
    let record = Record::default();
    let reg = informer.add_handler(record.clone()).unwrap();
    let task = run(&informer);
    assert!(wait_for_cache_sync(&[&*informer], Some(Duration::from_secs(20))).await);
    // The open watch ends before it can deliver the delete, the next one answers 410, and the
    // relist finds the pod gone.
    sim.faults().close_watches_after_events(0);
    sim.faults().gone_next_watch();
    sim.store()
        .delete(&pods(), Some("default"), "doomed")
        .unwrap();
    eventually("the tombstone", || {
        record.lines().iter().any(|l| l.starts_with("tombstone"))
    })
    .await;
    sim.faults().clear();
    assert!(
        record
            .lines()
            .contains(&format!("tombstone default/doomed {doomed_rv}")),
        "{:?}",
        record.lines()
    );
    // The relist of unchanged pods sent no no-op updates: no handler is due for a resync.
    assert!(!record.lines().iter().any(|l| l.starts_with("update")));
    assert_eq!(cache_keys(&informer), server_keys(&sim));
    drop(reg);
    informer.shutdown().await;
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transform_runs_once_per_stored_object() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(7, 1);
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let config = InformerConfig {
        transform: Some(Arc::new(move |pod: Arc<Pod>| {
            seen.fetch_add(1, Ordering::SeqCst);
            let mut pod = Pod::clone(&pod);
            pod.metadata.managed_fields = None;
            pod.metadata
                .annotations
                .get_or_insert_default()
                .insert("transformed".into(), "yes".into());
            Arc::new(pod)
        })),
        ..config()
    };
    let informer = start(&sim, config).await;
    let task = run(&informer);
    assert!(wait_for_cache_sync(&[&*informer], Some(Duration::from_secs(20))).await);
    assert_eq!(calls.load(Ordering::SeqCst), 7);
    create(&sim, "one-more");
    eventually("the new pod", || {
        cache_keys(&informer).contains("default/one-more")
    })
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 8);
    for pod in informer.cache().list() {
        assert_eq!(
            pod.metadata.annotations.as_ref().unwrap()["transformed"],
            "yes"
        );
    }
    informer.shutdown().await;
    task.await.unwrap();
}

fn handler_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(Result::ok)
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.starts_with("shutdown#"))
                })
                .count()
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_the_handlers_and_leaves_no_thread_running() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(30, 1);
    let mut config = config();
    // Handler threads are named after the informer: this name is this test's alone.
    config.name = "shutdown".into();
    let informer = start(&sim, config).await;
    let records: Vec<Record> = (0..4).map(|_| Record::default()).collect();
    for r in &records {
        informer.add_handler(r.clone()).unwrap();
    }
    let task = run(&informer);
    assert!(wait_for_cache_sync(&[&*informer], Some(Duration::from_secs(20))).await);
    assert_eq!(handler_threads(), 4);
    informer.shutdown().await;
    task.await.unwrap();
    // Drained: every handler heard the whole first list before its thread stopped.
    for r in &records {
        assert_eq!(r.lines().len(), 30);
    }
    assert_eq!(handler_threads(), 0, "handler threads left running");
    informer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_and_a_filtering_handler_hear_what_they_should() {
    use futures_util::StreamExt as _;
    use kinformer_core::Notification;
    use kinformer_shared_informer::FilteringHandler;
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(3, 1);
    create(&sim, "x");
    let informer = start(&sim, config()).await;
    let mut events = informer.event_stream().unwrap();
    let web = Record::default();
    let web_reg = informer
        .add_handler(FilteringHandler::new(
            |pod: &Pod| pod.labels().get("app").is_some_and(|a| a == "web"),
            web.clone(),
        ))
        .unwrap();
    let task = run(&informer);
    let mut initial = 0;
    while initial < 4 {
        match events.next().await.unwrap() {
            Notification::Added {
                is_in_initial_list: true,
                ..
            } => initial += 1,
            other => panic!("expected the initial adds, got {other:?}"),
        }
    }
    let label = |app: &str| json!({"metadata": {"labels": {"app": app}}});
    sim.store()
        .patch(&pods(), Some("default"), "x", label("web"))
        .unwrap();
    sim.store()
        .patch(&pods(), Some("default"), "x", label("db"))
        .unwrap();
    for _ in 0..2 {
        assert!(matches!(
            events.next().await.unwrap(),
            Notification::Updated { .. }
        ));
    }
    eventually("the filtered events", || web.lines().len() == 2).await;
    let lines = web.lines();
    assert!(lines[0].starts_with("add default/x"), "{lines:?}");
    assert!(lines[1].starts_with("delete default/x"), "{lines:?}");
    assert!(events.registration().has_synced() && web_reg.has_synced());
    drop(events);
    informer.shutdown().await;
    task.await.unwrap();
}

/// Run by `aborting_on_a_handler_panic_is_a_setting` in a child process: configured to abort, a
/// panicking handler ends the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_that_aborts_on_a_handler_panic() {
    if std::env::var_os("KINFORMER_ABORT_CHILD").is_none() {
        return;
    }
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    create(&sim, "w-boom");
    let informer = start(
        &sim,
        InformerConfig {
            abort_on_handler_panic: true,
            ..config()
        },
    )
    .await;
    informer.add_handler(Panicky).unwrap();
    let _task = run(&informer);
    tokio::time::sleep(Duration::from_secs(20)).await;
    unreachable!("the handler's panic should have aborted the process");
}

#[test]
fn aborting_on_a_handler_panic_is_a_setting() {
    use std::os::unix::process::ExitStatusExt as _;
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_that_aborts_on_a_handler_panic",
            "--nocapture",
        ])
        .env("KINFORMER_ABORT_CHILD", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.signal(), Some(6), "SIGABRT: {status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_added_after_start_indexes_the_cache_and_what_comes_next() {
    use kinformer_core::IndexRead;
    use kinformer_indexer::index;
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(20, 1);
    let informer = start(&sim, config()).await;
    let task = run(&informer);
    assert!(wait_for_cache_sync(&[&*informer], Some(Duration::from_secs(20))).await);
    informer
        .cache()
        .add_indexers([("by-node".to_string(), index::pod_node_name())])
        .unwrap();
    let on_node = |node: &str| informer.cache().by_index("by-node", node).unwrap().len();
    let nodes: BTreeSet<String> = informer
        .cache()
        .list()
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    let node = nodes.iter().next().expect("scheduled pods").clone();
    let before = on_node(&node);
    assert!(before > 0);
    sim.store()
        .create(
            &pods(),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "late", "namespace": "default"}, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}}),
        )
        .unwrap();
    eventually("the new pod in the index", || on_node(&node) == before + 1).await;
    informer.shutdown().await;
    task.await.unwrap();
}
