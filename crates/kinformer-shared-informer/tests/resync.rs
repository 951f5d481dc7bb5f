//! Resync routing per handler, on paused time, with an in-memory source whose watch stays open.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use kinformer_core::list_watch::{self, ListWatch, WatchStream};
use kinformer_core::{ListParams, Object, ObjectList, WatchParams};
use kinformer_delta_fifo::DeltaFifo;
use kinformer_indexer::Indexer;
use kinformer_shared_informer::{
    InformerConfig, Registration, ResourceEventHandler, SharedIndexInformer, wait_for_cache_sync,
};
use kinformer_test_support::typed_pods;

/// Lists `pods` at version 5 (counting the lists); every watch stays open and quiet.
struct Quiet {
    pods: Vec<Arc<Pod>>,
    lists: Arc<AtomicUsize>,
}

#[async_trait]
impl ListWatch<Pod> for Quiet {
    async fn list(&self, _: &ListParams) -> Result<ObjectList<Pod>, list_watch::Error> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        Ok(ObjectList::new(self.pods.clone(), "5".into()))
    }
    async fn watch(&self, _: &WatchParams) -> Result<WatchStream<Pod>, list_watch::Error> {
        Ok(Box::pin(futures_util::stream::pending()))
    }
}

/// Counts resyncs (updates from an object to the same version) and other calls.
#[derive(Clone, Default)]
struct Count {
    resyncs: Arc<AtomicUsize>,
    others: Arc<Mutex<Vec<String>>>,
}

impl ResourceEventHandler<Pod> for Count {
    fn on_add(&self, o: &Arc<Pod>, _: bool) {
        self.others
            .lock()
            .unwrap()
            .push(format!("add {}", o.name()));
    }
    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        if old.resource_version() == new.resource_version() {
            self.resyncs.fetch_add(1, Ordering::SeqCst);
        } else {
            self.others
                .lock()
                .unwrap()
                .push(format!("update {}", new.name()));
        }
    }
}

type Informer = SharedIndexInformer<Pod, Quiet, DeltaFifo<Pod>, Indexer<Pod>>;

fn new_informer(resync: Option<Duration>) -> Arc<Informer> {
    let cache = Arc::new(Indexer::<Pod>::new());
    let queue = Arc::new(DeltaFifo::new(cache.clone()));
    let source = Quiet {
        pods: typed_pods(3),
        lists: Arc::default(),
    };
    Arc::new(SharedIndexInformer::new(
        source,
        queue,
        cache,
        InformerConfig {
            resync_period: resync,
            ..InformerConfig::default()
        },
    ))
}

/// Waits (on the handler threads, in real time, bounded) until `regs` have handled everything.
fn settle(regs: &[&Registration<Pod>]) {
    for _ in 0..10_000 {
        if regs.iter().all(|r| r.backlog() == 0) {
            // The last one popped may still be in its call.
            std::thread::sleep(Duration::from_millis(2));
            if regs.iter().all(|r| r.backlog() == 0) {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("the handlers did not settle");
}

#[tokio::test(start_paused = true)]
async fn each_handler_is_resynced_on_its_own_period_and_no_handler_gets_anothers_resync() {
    let informer = new_informer(None);
    let (fast, slow, never) = (Count::default(), Count::default(), Count::default());
    let fast_reg = informer.add_handler_with_resync(fast.clone(), Some(Duration::from_secs(10)));
    let slow_reg = informer.add_handler_with_resync(slow.clone(), Some(Duration::from_secs(30)));
    let never_reg = informer.add_handler_with_resync(never.clone(), None);
    let run = tokio::spawn({
        let informer = Arc::clone(&informer);
        async move { informer.run().await }
    });
    assert!(wait_for_cache_sync(&[&*informer], None).await);
    // A handler added after start asks for 3 s: floored at the informer's 10 s check period.
    let late = Count::default();
    let late_reg = informer.add_handler_with_resync(late.clone(), Some(Duration::from_secs(3)));
    tokio::time::sleep(Duration::from_secs(65)).await;
    settle(&[&fast_reg, &slow_reg, &never_reg, &late_reg]);
    // Three pods: six resyncs each for the 10 s handlers, two for the 30 s one, none otherwise.
    assert_eq!(fast.resyncs.load(Ordering::SeqCst), 18);
    assert_eq!(slow.resyncs.load(Ordering::SeqCst), 6);
    assert_eq!(never.resyncs.load(Ordering::SeqCst), 0);
    assert_eq!(late.resyncs.load(Ordering::SeqCst), 18);
    for c in [&fast, &slow, &never, &late] {
        assert_eq!(
            c.others.lock().unwrap().len(),
            3,
            "three adds, nothing else"
        );
    }
    informer.shutdown().await;
    run.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_informer_without_resync_ignores_a_late_period_and_short_periods_are_raised_to_a_second()
{
    let informer = new_informer(None);
    let run = tokio::spawn({
        let informer = Arc::clone(&informer);
        async move { informer.run().await }
    });
    assert!(wait_for_cache_sync(&[&*informer], None).await);
    let late = Count::default();
    let reg = informer.add_handler_with_resync(late.clone(), Some(Duration::from_secs(5)));
    tokio::time::sleep(Duration::from_secs(60)).await;
    settle(&[&reg]);
    assert_eq!(late.resyncs.load(Ordering::SeqCst), 0);
    informer.shutdown().await;
    run.await.unwrap();

    // Before start, 100 ms is raised to the 1 s minimum: 10 s of time, ten resyncs per pod.
    let informer = new_informer(None);
    let tiny = Count::default();
    let reg = informer.add_handler_with_resync(tiny.clone(), Some(Duration::from_millis(100)));
    let run = tokio::spawn({
        let informer = Arc::clone(&informer);
        async move { informer.run().await }
    });
    assert!(wait_for_cache_sync(&[&*informer], None).await);
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    settle(&[&reg]);
    assert_eq!(tiny.resyncs.load(Ordering::SeqCst), 30);
    informer.shutdown().await;
    run.await.unwrap();
}
