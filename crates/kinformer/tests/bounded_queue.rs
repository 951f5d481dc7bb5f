//! The default pipeline's queue is bounded with backpressure: a cache that falls behind holds
//! the watch back, and nothing is lost.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use kinformer::core::WatchEvent;
use kinformer::indexer::Indexer;
use kinformer::prelude::*;
use kinformer::shared_informer::{BufferPolicy, InformerConfig};
use kinformer_test_support::{GatedCache, Replay};

const KEYS: usize = 50;

/// [`endless`] lists, then watches; it serves no streaming list.
fn list_then_watch() -> kinformer::reflector::Config {
    kinformer::reflector::Config {
        streaming_list: kinformer::reflector::StreamingList::Off,
        ..kinformer::reflector::Config::default()
    }
}

fn object(i: usize) -> Arc<DynamicObject> {
    let mut o = DynamicObject::new(
        &ApiResource::of::<k8s_openapi::api::core::v1::ConfigMap>(),
        &format!("cm{}", i % KEYS),
    );
    o.metadata.namespace = Some("ns".to_owned());
    o.metadata.resource_version = Some((i + 2).to_string());
    Arc::new(o)
}

/// Lists nothing at "1", then one watch of `events` MODIFIED events (made as they are read,
/// counted), which then stays open.
fn endless(events: usize) -> Replay<DynamicObject> {
    Replay::new(Vec::new(), "1").with_events((0..events).map(|i| WatchEvent::Modified(object(i))))
}

/// Handler calls wait while the gate is closed.
#[derive(Default)]
struct Gate {
    closed: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn close(&self) {
        *self.closed.lock().unwrap() = true;
    }
    fn open(&self) {
        *self.closed.lock().unwrap() = false;
        self.opened.notify_all();
    }
    fn wait(&self) {
        let mut closed = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
        while *closed {
            closed = self
                .opened
                .wait(closed)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Counts updates and checks that each key's versions only grow.
#[derive(Default)]
struct Seen {
    updates: AtomicUsize,
    newest: AtomicU64,
    out_of_order: AtomicUsize,
}

struct Handler(Arc<Seen>);

impl ResourceEventHandler<DynamicObject> for Handler {
    fn on_update(&self, old: &Arc<DynamicObject>, new: &Arc<DynamicObject>) {
        let rv = |o: &DynamicObject| {
            o.resource_version()
                .unwrap_or_default()
                .parse::<u64>()
                .unwrap()
        };
        if rv(new) <= rv(old) {
            self.0.out_of_order.fetch_add(1, Ordering::SeqCst);
        }
        self.0.newest.fetch_max(rv(new), Ordering::SeqCst);
        self.0.updates.fetch_add(1, Ordering::SeqCst);
    }
    fn on_add(&self, _: &Arc<DynamicObject>, _: bool) {
        self.0.updates.fetch_add(1, Ordering::SeqCst);
    }
}

async fn until(what: &str, limit: Duration, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn slow_cache_holds_the_watch_back(capacity: Option<usize>, events: usize) {
    let bound = capacity.unwrap_or(kinformer::DEFAULT_QUEUE_CAPACITY);
    let source = endless(events);
    // An indexer whose writes wait while the gate is closed: a cache that falls behind.
    let cache = Arc::new(GatedCache::new(Indexer::new()));
    let seen = Arc::new(Seen::default());
    let mut builder = Informer::<DynamicObject>::builder()
        .list_watch(source.clone())
        .reflector(list_then_watch())
        .cache(Arc::clone(&cache))
        .handler(Handler(Arc::clone(&seen)));
    if let Some(capacity) = capacity {
        builder = builder.queue_capacity(capacity);
    }
    let informer = builder.build().unwrap();

    cache.close();
    informer.start();
    // The queue fills up ...
    until("the queue fills", Duration::from_secs(30), || {
        source.pulled() >= bound
    })
    .await;
    // ... and then the watch is read no further while the cache is stuck: the queue, plus one
    // pop (at most a full queue) in the consumer's hands, plus the event the reflector holds.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let read = source.pulled();
    assert!(
        read <= 2 * bound + 1,
        "{read} events read with a queue of {bound}"
    );
    assert!(read < events, "the whole watch was read");
    cache.open();

    // Once the cache catches up, every event arrives, in order.
    until("every event", Duration::from_secs(60), || {
        seen.updates.load(Ordering::SeqCst) == events
    })
    .await;
    assert_eq!(source.pulled(), events);
    assert_eq!(seen.out_of_order.load(Ordering::SeqCst), 0);
    assert_eq!(seen.newest.load(Ordering::SeqCst), (events + 1) as u64);
    let cached = informer.cache().inner().list();
    assert_eq!(cached.len(), KEYS);
    for o in cached {
        let i: usize = o.name()[2..].parse().unwrap();
        let last = (0..events).rev().find(|e| e % KEYS == i).unwrap();
        assert_eq!(o.resource_version(), Some((last + 2).to_string().as_str()));
    }
    informer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_cache_holds_the_watch_back_at_the_default_bound_and_loses_nothing() {
    slow_cache_holds_the_watch_back(None, 20_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_cache_holds_the_watch_back_at_a_chosen_bound_and_loses_nothing() {
    slow_cache_holds_the_watch_back(Some(16), 2_000).await;
}

/// Blocks every event while the gate is closed: a handler that falls behind.
struct Stuck {
    gate: Arc<Gate>,
    seen: Arc<AtomicUsize>,
}

impl ResourceEventHandler<DynamicObject> for Stuck {
    fn on_update(&self, _: &Arc<DynamicObject>, _: &Arc<DynamicObject>) {
        self.gate.wait();
        self.seen.fetch_add(1, Ordering::SeqCst);
    }
    fn on_add(&self, _: &Arc<DynamicObject>, _: bool) {
        self.gate.wait();
        self.seen.fetch_add(1, Ordering::SeqCst);
    }
}

/// A handler that counts what it is given and never waits.
struct Counting {
    seen: Arc<AtomicUsize>,
}

impl ResourceEventHandler<DynamicObject> for Counting {
    fn on_update(&self, _: &Arc<DynamicObject>, _: &Arc<DynamicObject>) {
        self.seen.fetch_add(1, Ordering::SeqCst);
    }
    fn on_add(&self, _: &Arc<DynamicObject>, _: bool) {
        self.seen.fetch_add(1, Ordering::SeqCst);
    }
}

/// client-go's rule, kept by the default pipeline: a handler that falls behind holds its own
/// backlog and delays no one, neither the other handlers nor the cache nor the watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_stuck_handler_never_delays_another() {
    // Well past any buffer bound, so a bounded default would stall the fast handler.
    const EVENTS: usize = 10_000;
    let source = endless(EVENTS);
    let gate = Arc::new(Gate::default());
    let stuck_seen = Arc::new(AtomicUsize::new(0));
    let fast_seen = Arc::new(AtomicUsize::new(0));
    let informer = Informer::<DynamicObject>::builder()
        .list_watch(source.clone())
        .reflector(list_then_watch())
        .handler(Stuck {
            gate: Arc::clone(&gate),
            seen: Arc::clone(&stuck_seen),
        })
        .handler(Counting {
            seen: Arc::clone(&fast_seen),
        })
        .build()
        .unwrap();
    gate.close();
    informer.start();
    until(
        "the fast handler sees every event",
        Duration::from_secs(60),
        || fast_seen.load(Ordering::SeqCst) == EVENTS,
    )
    .await;
    assert_eq!(source.pulled(), EVENTS);
    assert_eq!(stuck_seen.load(Ordering::SeqCst), 0);
    gate.open();
    until(
        "the stuck handler catches up",
        Duration::from_secs(60),
        || stuck_seen.load(Ordering::SeqCst) == EVENTS,
    )
    .await;
    informer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_handler_with_backpressure_holds_the_watch_back_and_loses_nothing() {
    const EVENTS: usize = 20_000;
    const BUFFER: usize = 2048;
    let source = endless(EVENTS);
    let gate = Arc::new(Gate::default());
    let seen = Arc::new(AtomicUsize::new(0));
    let informer = Informer::<DynamicObject>::builder()
        .list_watch(source.clone())
        .reflector(list_then_watch())
        .config(InformerConfig {
            handler_buffer: BufferPolicy::Backpressure { capacity: BUFFER },
            ..InformerConfig::default()
        })
        .handler(Stuck {
            gate: Arc::clone(&gate),
            seen: Arc::clone(&seen),
        })
        .build()
        .unwrap();
    gate.close();
    informer.start();
    // The handler's buffer and the queue fill up, and then the watch is read no further: the
    // queue, the buffer, a pop over the buffer's bound, a pop in the consumer's hands, and the
    // event the reflector holds.
    let bound = kinformer::DEFAULT_QUEUE_CAPACITY
        + BUFFER
        + 2 * kinformer::delta_fifo::DEFAULT_BATCH_SIZE
        + 1;
    until("the buffers fill", Duration::from_secs(30), || {
        source.pulled() >= BUFFER
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let read = source.pulled();
    assert!(read <= bound, "{read} events read, bound {bound}");
    gate.open();
    until("every event", Duration::from_secs(60), || {
        seen.load(Ordering::SeqCst) == EVENTS
    })
    .await;
    assert_eq!(source.pulled(), EVENTS);
    assert_eq!(informer.cache().list_keys().len(), KEYS);
    informer.shutdown().await;
}
