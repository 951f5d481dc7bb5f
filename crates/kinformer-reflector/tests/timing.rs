//! The reflector's timing rules (Retry-After, backoff, the short watch, resync), its stops and
//! its counters, with paused tokio time and an in-memory source whose every request is stamped.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kinformer_core::list_watch::{self, ErrorKind, ListWatch, WatchStream};
use kinformer_core::{
    Bookmark, ListParams, ObjectList, ReflectorStore, StoreError, StoreEvent, WatchEvent,
    WatchParams,
};
use kinformer_reflector::{Config, Reflector, StreamingList, metric_names, watcher};
use kinformer_test_support::{ScriptedListWatch, typed_pods};
use tokio::time::Instant;

/// What one watch request gets.
enum WatchPlan {
    /// The request fails.
    Refuse(list_watch::Error),
    /// These events, then the stream ends after `then` (or never, with `None`).
    Serve {
        events: Vec<WatchEvent<Pod>>,
        then: Option<Duration>,
    },
}

/// A source that lists `objects` (paged by the scripted source) and answers watches from a plan;
/// with no plan left, a watch stays open and quiet. Every request is stamped with the time.
struct Planned {
    lists: ScriptedListWatch<Pod>,
    watches: Mutex<VecDeque<WatchPlan>>,
    log: Mutex<Vec<(Duration, String)>>,
    start: Instant,
}

impl Planned {
    fn new(objects: usize, rv: &str) -> Self {
        Self {
            lists: ScriptedListWatch::new(typed_pods(objects), rv),
            watches: Mutex::new(VecDeque::new()),
            log: Mutex::new(Vec::new()),
            start: Instant::now(),
        }
    }

    fn plan(&self, plan: WatchPlan) {
        self.watches.lock().unwrap().push_back(plan);
    }

    fn log(&self) -> Vec<(Duration, String)> {
        self.log.lock().unwrap().clone()
    }

    fn note(&self, what: String) {
        self.log.lock().unwrap().push((self.start.elapsed(), what));
    }
}

#[async_trait]
impl ListWatch<Pod> for Planned {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<Pod>, list_watch::Error> {
        self.note(format!(
            "list {}",
            params.resource_version.as_deref().unwrap_or("")
        ));
        self.lists.list(params).await
    }

    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<Pod>, list_watch::Error> {
        self.note(format!(
            "watch {}",
            params.resource_version.as_deref().unwrap_or("")
        ));
        let plan = self.watches.lock().unwrap().pop_front();
        match plan {
            Some(WatchPlan::Refuse(e)) => Err(e),
            Some(WatchPlan::Serve { events, then }) => {
                let events = futures_util::stream::iter(events.into_iter().map(Ok));
                let end: WatchStream<Pod> = match then {
                    Some(d) => Box::pin(
                        futures_util::stream::once(tokio::time::sleep(d))
                            .filter_map(|()| async { None }),
                    ),
                    None => Box::pin(futures_util::stream::pending()),
                };
                Ok(Box::pin(events.chain(end)))
            }
            None => Ok(Box::pin(futures_util::stream::pending())),
        }
    }
}

/// A store that notes each call, and can be closed.
#[derive(Default)]
struct Notes {
    log: Mutex<Vec<String>>,
    closed: std::sync::atomic::AtomicBool,
}

impl Notes {
    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
    fn note(&self, s: &str) -> Result<(), StoreError> {
        self.log.lock().unwrap().push(s.to_owned());
        if self.closed.load(Ordering::SeqCst) {
            Err(StoreError::Closed)
        } else {
            Ok(())
        }
    }
}

impl ReflectorStore<Pod> for Notes {
    fn apply(&self, event: StoreEvent<Pod>) -> Result<(), StoreError> {
        self.note(match event {
            StoreEvent::Added(_) => "add",
            StoreEvent::Modified(_) => "update",
            StoreEvent::Deleted(_) => "delete",
            StoreEvent::RelistBegin => "begin",
            StoreEvent::RelistPage(_) => "page",
            StoreEvent::RelistEnd(_) => "end",
            StoreEvent::RelistAbandoned => "abandon",
            StoreEvent::Resync => "resync",
            // Bookmarks were never noted here.
            StoreEvent::Bookmark(_) => return Ok(()),
        })
    }
    fn poll_ready(&self, _: &mut Context<'_>) -> Poll<Result<(), StoreError>> {
        Poll::Ready(Ok(()))
    }
}

fn config() -> Config {
    Config {
        name: "pods".into(),
        seed: Some(11),
        // The timings are those of list-then-watch; the source serves no streaming list.
        streaming_list: StreamingList::Off,
        ..Config::default()
    }
}

fn retry(retry_after: Option<Duration>) -> list_watch::Error {
    list_watch::Error::new(ErrorKind::Retry, "throttled").with_retry_after(retry_after)
}

fn modified(rv: &str) -> WatchEvent<Pod> {
    let mut pod = (*typed_pods(1)[0]).clone();
    pod.metadata.resource_version = Some(rv.to_owned());
    WatchEvent::Modified(Arc::new(pod))
}

/// Runs the reflector until `done` holds for the source's log (checked on every time step).
async fn run_until(
    source: Arc<Planned>,
    store: Arc<Notes>,
    config: Config,
    done: impl Fn(&[(Duration, String)]) -> bool,
) -> kinformer_reflector::Result<()> {
    let reflector = Reflector::new(source.clone(), store, config);
    let handle = reflector.handle();
    let run = tokio::spawn(async move { reflector.run().await });
    // Bounded: paused time moves in steps of 10 ms, for at most an hour of virtual time.
    for _ in 0..360_000 {
        if done(&source.log()) || run.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    handle.stop();
    run.await.unwrap()
}

fn watch_times(log: &[(Duration, String)]) -> Vec<Duration> {
    log.iter()
        .filter(|(_, w)| w.starts_with("watch"))
        .map(|(t, _)| *t)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_is_waited_exactly_before_the_same_watch_again() {
    let source = Arc::new(Planned::new(3, "5"));
    source.plan(WatchPlan::Refuse(retry(Some(Duration::from_secs(7)))));
    let store = Arc::new(Notes::default());
    run_until(source.clone(), store, config(), |log| {
        watch_times(log).len() == 2
    })
    .await
    .unwrap();
    let log = source.log();
    let names: Vec<&str> = log.iter().map(|(_, w)| w.as_str()).collect();
    assert_eq!(names, ["list 0", "watch 5", "watch 5"]);
    let times = watch_times(&log);
    assert_eq!(times[1] - times[0], Duration::from_secs(7));
}

#[tokio::test(start_paused = true)]
async fn retries_back_off_exponentially_with_jitter_and_replay_with_a_seed() {
    let gaps = |seed| async move {
        let source = Arc::new(Planned::new(1, "5"));
        for _ in 0..8 {
            source.plan(WatchPlan::Refuse(retry(None)));
        }
        let store = Arc::new(Notes::default());
        let config = Config {
            seed: Some(seed),
            ..config()
        };
        run_until(source.clone(), store, config, |log| {
            watch_times(log).len() == 9
        })
        .await
        .unwrap();
        let times = watch_times(&source.log());
        times.windows(2).map(|w| w[1] - w[0]).collect::<Vec<_>>()
    };
    let a = gaps(1).await;
    assert_eq!(a, gaps(1).await, "the same seed waits the same");
    assert_ne!(a, gaps(2).await);
    let steps = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0];
    for (gap, step) in a.iter().zip(steps) {
        assert!(
            gap.as_secs_f64() <= step + 0.011,
            "{gap:?} over the {step} s step"
        );
    }
    let total: f64 = a.iter().map(Duration::as_secs_f64).sum();
    assert!(
        total > 10.0,
        "full jitter still grows: {total} s over 8 waits"
    );
}

#[tokio::test(start_paused = true)]
async fn only_a_quiet_watch_shorter_than_a_second_leads_to_a_relist() {
    let source = Arc::new(Planned::new(1, "5"));
    // Ends after 1.5 s with nothing: watched again.
    source.plan(WatchPlan::Serve {
        events: vec![],
        then: Some(Duration::from_millis(1500)),
    });
    // Ends at once after one event: watched again from the event's version.
    source.plan(WatchPlan::Serve {
        events: vec![modified("6")],
        then: Some(Duration::ZERO),
    });
    // Ends after half a second with nothing: listed again.
    source.plan(WatchPlan::Serve {
        events: vec![],
        then: Some(Duration::from_millis(500)),
    });
    let store = Arc::new(Notes::default());
    run_until(source.clone(), store, config(), |log| log.len() == 6)
        .await
        .unwrap();
    let names: Vec<String> = source.log().into_iter().map(|(_, w)| w).collect();
    assert_eq!(
        names,
        [
            "list 0", "watch 5", "watch 5", "watch 6", "list 6", "watch 5"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn the_store_is_resynced_on_its_period_while_watching() {
    let source = Arc::new(Planned::new(1, "5"));
    let store = Arc::new(Notes::default());
    let config = Config {
        resync_period: Some(Duration::from_secs(30)),
        ..config()
    };
    let reflector = Reflector::new(source.clone(), store.clone(), config);
    let handle = reflector.handle();
    let run = tokio::spawn(async move { reflector.run().await });
    tokio::time::sleep(Duration::from_secs(95)).await;
    handle.stop();
    run.await.unwrap().unwrap();
    let resyncs = store.log().iter().filter(|s| *s == "resync").count();
    assert_eq!(resyncs, 3);
}

#[tokio::test(start_paused = true)]
async fn a_closed_store_stops_the_reflector_with_an_error() {
    let source = Arc::new(Planned::new(2, "5"));
    let store = Arc::new(Notes::default());
    store.closed.store(true, Ordering::SeqCst);
    let err = run_until(source, store, config(), |_| false)
        .await
        .unwrap_err();
    assert!(matches!(err, kinformer_reflector::Error::StoreClosed));
}

/// Lists one page, then hangs on the next.
struct HangsMidList(ScriptedListWatch<Pod>);

#[async_trait]
impl ListWatch<Pod> for HangsMidList {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<Pod>, list_watch::Error> {
        if params.continue_token.is_some() {
            std::future::pending::<()>().await;
        }
        self.0.list(params).await
    }
    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<Pod>, list_watch::Error> {
        self.0.watch(params).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_stop_or_a_dropped_run_mid_list_abandons_the_relist() {
    for drop_it in [false, true] {
        let store = Arc::new(Notes::default());
        let config = Config {
            page_size: 2,
            ..config()
        };
        let reflector = Reflector::new(
            HangsMidList(ScriptedListWatch::new(typed_pods(5), "5")),
            store.clone(),
            config,
        );
        let handle = reflector.handle();
        let mut run = Box::pin(reflector.run());
        let hung = tokio::time::timeout(Duration::from_secs(60), run.as_mut()).await;
        assert!(hung.is_err(), "the list hangs");
        if drop_it {
            drop(run);
        } else {
            handle.stop();
            run.await.unwrap();
        }
        assert_eq!(
            store.log(),
            ["begin", "page", "abandon"],
            "dropped: {drop_it}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_watcher_stream_surfaces_the_relist_protocol_and_the_watch() {
    let source = Planned::new(3, "5");
    let bookmark = Bookmark {
        resource_version: "9".into(),
        annotations: BTreeMap::new(),
    };
    source.plan(WatchPlan::Serve {
        events: vec![modified("6"), WatchEvent::Bookmark(bookmark)],
        then: None,
    });
    let config = Config {
        page_size: 2,
        ..config()
    };
    let mut events = watcher(source, config);
    let mut seen = Vec::new();
    for _ in 0..6 {
        seen.push(match events.next().await.unwrap() {
            StoreEvent::RelistBegin => "begin".to_owned(),
            StoreEvent::RelistPage(p) => format!("page {}", p.len()),
            StoreEvent::RelistEnd(rv) => format!("end {rv}"),
            StoreEvent::Modified(_) => "modified".to_owned(),
            StoreEvent::Bookmark(rv) => format!("bookmark {rv}"),
            other => format!("{other:?}"),
        });
    }
    assert_eq!(
        seen,
        [
            "begin",
            "page 2",
            "page 1",
            "end 5",
            "modified",
            "bookmark 9"
        ]
    );
    assert_eq!(
        events
            .handle()
            .last_sync_resource_version()
            .unwrap()
            .as_str(),
        "9"
    );
    events.handle().stop();
    assert!(
        events.next().await.is_none(),
        "the stream ends once stopped"
    );
}

/// A recorder that keeps every counter in memory.
#[derive(Default, Clone)]
struct Counters(Arc<Mutex<BTreeMap<String, Arc<AtomicU64>>>>);

impl Counters {
    fn get(&self, name: &str, labels: &str) -> u64 {
        self.0
            .lock()
            .unwrap()
            .get(&format!("{name}{{{labels}}}"))
            .map_or(0, |c| c.load(Ordering::SeqCst))
    }
}

impl metrics::Recorder for Counters {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let name = format!("{}{{{}}}", key.name(), labels.join(","));
        let counter = Arc::clone(self.0.lock().unwrap().entry(name).or_default());
        metrics::Counter::from_arc(counter)
    }
    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }
    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

#[test]
fn counters_go_through_the_metrics_facade() {
    let counters = Counters::default();
    let _guard = metrics::set_default_local_recorder(&counters);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let source = Arc::new(Planned::new(3, "5"));
        source.plan(WatchPlan::Refuse(retry(Some(Duration::from_secs(2)))));
        source.plan(WatchPlan::Serve {
            events: vec![modified("6"), modified("7")],
            then: None,
        });
        let store = Arc::new(Notes::default());
        // Run on this thread, where the local recorder is installed.
        let reflector = Reflector::new(source.clone(), store, config());
        let handle = reflector.handle();
        let stopper = async {
            while handle
                .last_sync_resource_version()
                .is_none_or(|v| v.as_str() != "7")
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            handle.stop();
        };
        let (result, ()) = tokio::join!(reflector.run(), stopper);
        result.unwrap();
    });
    let r = "informer=pods,resource=pods";
    assert_eq!(
        counters.get(metric_names::LISTS, &format!("{r},outcome=success")),
        1
    );
    assert_eq!(
        counters.get(metric_names::RELISTS, &format!("{r},cause=error")),
        0
    );
    // The refused watch ended in error; the second was stopped, and is not counted.
    assert_eq!(
        counters.get(metric_names::WATCHES, &format!("{r},outcome=error")),
        1
    );
    assert_eq!(counters.get(metric_names::WATCH_RESTARTS, r), 1);
    assert_eq!(
        counters.get(metric_names::EVENTS, &format!("{r},type=modified")),
        2
    );
    assert_eq!(
        counters.get(metric_names::ERRORS, &format!("{r},kind=retry")),
        1
    );
    assert_eq!(counters.get(metric_names::BACKOFF_MILLISECONDS, r), 2000);
}

#[test]
fn handles_and_futures_are_send_and_sync() {
    fn send<T: Send>(_: &T) {}
    fn send_sync<T: Send + Sync>() {}
    send_sync::<kinformer_reflector::ReflectorHandle>();
    send_sync::<Reflector<Pod, ScriptedListWatch<Pod>, Arc<Notes>>>();
    send_sync::<Config>();
    send_sync::<kinformer_reflector::Error>();
    let reflector = Reflector::new(
        ScriptedListWatch::new(typed_pods(1), "1"),
        Arc::new(Notes::default()),
        config(),
    );
    send(&reflector.run());
    let w = watcher(ScriptedListWatch::<Pod>::new(vec![], "1"), config());
    send(&w);
}

#[tokio::test(start_paused = true)]
async fn watches_that_keep_ending_at_once_after_an_event_are_reopened_after_a_backoff() {
    let source = Arc::new(Planned::new(1, "5"));
    for i in 0..9 {
        source.plan(WatchPlan::Serve {
            events: vec![modified(&(6 + i).to_string())],
            then: Some(Duration::ZERO),
        });
    }
    let store = Arc::new(Notes::default());
    run_until(source.clone(), store, config(), |log| {
        watch_times(log).len() == 10
    })
    .await
    .unwrap();
    let log = source.log();
    assert_eq!(
        log.iter().filter(|(_, w)| w.starts_with("list")).count(),
        1,
        "each watch delivered an event: no relist"
    );
    let times = watch_times(&log);
    let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    let steps = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0];
    for (gap, step) in gaps.iter().zip(steps) {
        assert!(gap.as_secs_f64() <= step, "{gap:?} over the {step} s step");
    }
    let total: f64 = gaps.iter().map(Duration::as_secs_f64).sum();
    assert!(
        total > 10.0,
        "backed off, not asked again at once: {total} s"
    );
}
