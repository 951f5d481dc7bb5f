//! Handler buffers: backpressure, coalescing per key, and the age of the oldest pending event.

mod support;

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{CacheRead, DeltaObject, Object};
use kinformer_delta_fifo::DeltaFifo;
use kinformer_indexer::Indexer;
use kinformer_shared_informer::{
    BufferPolicy, InformerConfig, Registration, ResourceEventHandler, SharedIndexInformer,
    wait_for_cache_sync,
};
use support::{Fake, History};

/// A handler that records its calls and blocks in its first one until released.
#[derive(Clone, Default)]
struct Stuck {
    gate: Arc<(Mutex<(bool, bool)>, Condvar)>,
    calls: Arc<Mutex<Vec<String>>>,
}

impl Stuck {
    fn wait_entered(&self) {
        let (lock, cv) = &*self.gate;
        let guard = lock.lock().unwrap();
        let (guard, timeout) = cv
            .wait_timeout_while(guard, Duration::from_secs(20), |(entered, _)| !*entered)
            .unwrap();
        assert!(
            guard.0 && !timeout.timed_out(),
            "the handler was never called"
        );
    }
    fn release(&self) {
        let (lock, cv) = &*self.gate;
        lock.lock().unwrap().1 = true;
        cv.notify_all();
    }
    fn call(&self, line: String) {
        self.calls.lock().unwrap().push(line);
        let (lock, cv) = &*self.gate;
        let mut g = lock.lock().unwrap();
        g.0 = true;
        cv.notify_all();
        while !g.1 {
            g = cv.wait(g).unwrap();
        }
    }
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

fn v(p: &Pod) -> &str {
    p.resource_version().unwrap()
}

impl ResourceEventHandler<Pod> for Stuck {
    fn on_add(&self, o: &Arc<Pod>, _: bool) {
        self.call(format!("add {} {}", o.name(), v(o)));
    }
    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        self.call(format!("update {} {}>{}", new.name(), v(old), v(new)));
    }
    fn on_delete(&self, o: &DeltaObject<Pod>) {
        self.call(format!("delete {}", o.key()));
    }
}

type Informer = SharedIndexInformer<Pod, DeltaFifo<Pod>, Indexer<Pod>>;

fn informer(fake: &Fake, policy: BufferPolicy, batch: usize) -> Arc<Informer> {
    let cache = Arc::new(Indexer::<Pod>::new());
    let queue = Arc::new(
        DeltaFifo::builder()
            .known_objects(cache.clone())
            .batch_size(batch)
            .build()
            .unwrap(),
    );
    Arc::new(SharedIndexInformer::new(
        support::events(fake.clone()),
        queue,
        cache,
        InformerConfig {
            handler_buffer: policy,
            ..InformerConfig::default()
        },
    ))
}

fn start(informer: &Arc<Informer>) -> tokio::task::JoinHandle<()> {
    let informer = Arc::clone(informer);
    tokio::spawn(async move { informer.run().await })
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..4000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_bounded_buffer_holds_the_informer_back_until_its_handler_catches_up() {
    let fake = Fake::default();
    let informer = informer(&fake, BufferPolicy::Backpressure { capacity: 10 }, 5);
    let stuck = Stuck::default();
    let slow = informer.add_handler(stuck.clone()).unwrap();
    let fast = History::default();
    let fast_reg = informer.add_handler(fast.clone()).unwrap();
    let run = start(&informer);
    assert!(wait_for_cache_sync(&[&*informer], Some(Duration::from_secs(20))).await);
    for i in 0..200 {
        fake.write(&format!("p{i}"), false, false);
    }
    stuck.wait_entered();
    eventually("a full buffer", || slow.backlog() >= 10).await;
    // Give a dispatcher that ignored the bound every chance to run ahead.
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Ten in the buffer, at most one batch of five more: nothing else was popped or cached.
    assert!(slow.backlog() <= 14, "backlog {}", slow.backlog());
    assert!(informer.cache().list_keys().len() <= 14);
    assert!(fast.len() <= 14, "the others wait too");
    stuck.release();
    // The cache holds a batch before the handlers are handed it, when their backlogs still read
    // 0: wait for what they heard too.
    eventually("everything", || {
        informer.cache().list_keys().len() == 200
            && slow.backlog() == 0
            && fast_reg.backlog() == 0
            && stuck.calls().len() >= 200
            && fast.len() >= 200
    })
    .await;
    assert_eq!(stuck.calls().len(), 200);
    assert_eq!(fast.len(), 200);
    informer.shutdown().await;
    run.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_handler_gets_the_latest_state_of_a_key_when_coalescing() {
    let fake = Fake::default();
    let informer = informer(&fake, BufferPolicy::CoalescePerKey, 1000);
    let stuck = Stuck::default();
    let slow = informer.add_handler(stuck.clone()).unwrap();
    let run = start(&informer);
    assert!(wait_for_cache_sync(&[&*informer], Some(Duration::from_secs(20))).await);
    fake.write("p0", false, false);
    stuck.wait_entered();
    // The handler holds the add; fifty updates arrive meanwhile.
    for _ in 0..50 {
        fake.write("p0", false, false);
    }
    fake.write("p1", false, false);
    let last = fake.state()["ns/p0"].clone();
    let p1 = fake.state()["ns/p1"].clone();
    // The cache holds p1 before the handler's buffer is handed its add.
    eventually("the cache and the handler's buffer", || {
        informer.cache().get_by_key("ns/p1").is_some() && slow.backlog() >= 3
    })
    .await;
    assert_eq!(
        slow.backlog(),
        3,
        "the add in hand, one merged update, the other key's add"
    );
    assert!(slow.oldest_pending_age().is_some());
    stuck.release();
    eventually("the handler", || slow.backlog() == 0).await;
    assert_eq!(
        stuck.calls(),
        [
            "add p0 1".to_owned(),
            format!("update p0 1>{last}"),
            format!("add p1 {p1}")
        ]
    );
    assert_eq!(slow.oldest_pending_age(), None);
    informer.shutdown().await;
    run.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oldest_pending_event_ages_while_a_handler_is_stuck() {
    let fake = Fake::default();
    let informer = informer(&fake, BufferPolicy::Unbounded, 1000);
    let stuck = Stuck::default();
    let slow: Registration<Pod> = informer.add_handler(stuck.clone()).unwrap();
    let run = start(&informer);
    assert!(wait_for_cache_sync(&[&*informer], Some(Duration::from_secs(20))).await);
    assert_eq!(slow.oldest_pending_age(), None);
    fake.write("p0", false, false);
    stuck.wait_entered();
    let first = slow
        .oldest_pending_age()
        .expect("the event in hand is pending");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let later = slow.oldest_pending_age().unwrap();
    assert!(
        later >= first + Duration::from_millis(20),
        "{first:?} then {later:?}"
    );
    stuck.release();
    eventually("the handler", || slow.backlog() == 0).await;
    assert_eq!(slow.oldest_pending_age(), None);
    informer.shutdown().await;
    run.await.unwrap();
}
