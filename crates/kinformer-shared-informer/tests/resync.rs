//! Resync routing per handler, on paused time, with an in-memory source whose watch stays open.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_core::Object;
use kinformer_delta_fifo::DeltaFifo;
use kinformer_indexer::Indexer;
use kinformer_shared_informer::{
    InformerConfig, Registration, ResourceEventHandler, SharedIndexInformer, wait_for_cache_sync,
};
use kinformer_test_support::{Replay, typed_pods};

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

type Informer = SharedIndexInformer<Pod, DeltaFifo<Pod>, Indexer<Pod>>;

fn new_informer(resync: Option<Duration>) -> Arc<Informer> {
    let cache = Arc::new(Indexer::<Pod>::new());
    let queue = Arc::new(DeltaFifo::new(cache.clone()));
    // Lists three pods at version 5; every watch stays open and quiet.
    let source = Replay::new(typed_pods(3), "5");
    Arc::new(SharedIndexInformer::new(
        kinformer_reflector::watcher(
            source,
            kinformer_reflector::Config {
                streaming_list: kinformer_reflector::StreamingList::Off,
                ..kinformer_reflector::Config::default()
            },
        ),
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
    let fast_reg = informer
        .add_handler_with_resync(fast.clone(), Some(Duration::from_secs(10)))
        .unwrap();
    let slow_reg = informer
        .add_handler_with_resync(slow.clone(), Some(Duration::from_secs(30)))
        .unwrap();
    let never_reg = informer
        .add_handler_with_resync(never.clone(), None)
        .unwrap();
    let run = tokio::spawn({
        let informer = Arc::clone(&informer);
        async move { informer.run().await }
    });
    assert!(wait_for_cache_sync(&[&*informer], None).await);
    // A handler added after start asks for 3 s: floored at the informer's 10 s check period.
    let late = Count::default();
    let late_reg = informer
        .add_handler_with_resync(late.clone(), Some(Duration::from_secs(3)))
        .unwrap();
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
    let reg = informer
        .add_handler_with_resync(late.clone(), Some(Duration::from_secs(5)))
        .unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    settle(&[&reg]);
    assert_eq!(late.resyncs.load(Ordering::SeqCst), 0);
    informer.shutdown().await;
    run.await.unwrap();

    // Before start, 100 ms is raised to the 1 s minimum: 10 s of time, ten resyncs per pod.
    let informer = new_informer(None);
    let tiny = Count::default();
    let reg = informer
        .add_handler_with_resync(tiny.clone(), Some(Duration::from_millis(100)))
        .unwrap();
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

#[tokio::test(start_paused = true)]
async fn a_handler_added_without_a_period_gets_the_informers_not_the_shortest_before_it() {
    // As client-go's AddEventHandler: the informer's own period, whatever a handler added
    // before it asked for (that handler lowers only how often the informer checks).
    let informer = new_informer(Some(Duration::from_secs(3)));
    let (fast, plain) = (Count::default(), Count::default());
    let fast_reg = informer
        .add_handler_with_resync(fast.clone(), Some(Duration::from_secs(1)))
        .unwrap();
    let plain_reg = informer.add_handler(plain.clone()).unwrap();
    let run = tokio::spawn({
        let informer = Arc::clone(&informer);
        async move { informer.run().await }
    });
    assert!(wait_for_cache_sync(&[&*informer], None).await);
    tokio::time::sleep(Duration::from_millis(9_500)).await;
    settle(&[&fast_reg, &plain_reg]);
    // Three pods: nine rounds for the 1 s handler, three for the plain one (3 s).
    assert_eq!(fast.resyncs.load(Ordering::SeqCst), 27);
    assert_eq!(plain.resyncs.load(Ordering::SeqCst), 9);
    informer.shutdown().await;
    run.await.unwrap();
}
