//! Where the informer's writer, consumer and handler registration meet: a registration made
//! while the consumer is inside its apply, driven step by step, and a stress run of writes,
//! relists and registrations on real threads, checked at quiescence.

mod support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_core::CacheWrite;
use kinformer_delta_fifo::DeltaFifo;
use kinformer_indexer::Indexer;
use kinformer_shared_informer::{
    InformerConfig, Registration, SharedIndexInformer, wait_for_cache_sync,
};
use kinformer_test_support::{GatedCache, Pause};
use support::{Fake, History, cached_state, catch_up, settle};

/// An indexer whose next write, once armed, stops inside (after the indexer made it) until
/// released.
type Blocking = GatedCache<Indexer<Pod>>;

type Informer<C> = SharedIndexInformer<Pod, DeltaFifo<Pod>, C>;

/// An informer from `fake` into `cache` (the in-order FIFO between), running and synced.
async fn synced<C: CacheWrite<Pod> + 'static>(
    fake: &Fake,
    cache: Arc<C>,
) -> (Arc<Informer<C>>, tokio::task::JoinHandle<()>) {
    let queue = Arc::new(DeltaFifo::new(cache.clone()));
    let informer = Arc::new(SharedIndexInformer::new(
        support::events(fake.clone()),
        queue,
        cache,
        InformerConfig::default(),
    ));
    let run = tokio::spawn({
        let informer = Arc::clone(&informer);
        async move { informer.run().await }
    });
    assert!(wait_for_cache_sync(&[&*informer], Some(Duration::from_secs(20))).await);
    (informer, run)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_added_while_the_consumer_applies_hears_that_change_exactly_once() {
    let fake = Fake::default();
    fake.write("p0", false, false);
    let cache = Arc::new(Blocking::default());
    let (informer, run) = synced(&fake, Arc::clone(&cache)).await;

    // The consumer stops inside its apply of p1: the cache already holds p1, the handlers have
    // not heard of it.
    cache.pause_next_write(Pause::After);
    fake.write("p1", false, false);
    let blocking = Arc::clone(&cache);
    tokio::task::spawn_blocking(move || {
        assert!(
            blocking.wait_paused(Duration::from_secs(20)),
            "the consumer never applied"
        );
    })
    .await
    .unwrap();
    // A handler is added now, from another thread; then the consumer goes on.
    let late = History::with_format(|h| format!("{} {}", h.verb(), h.key()));
    let adding = std::thread::spawn({
        let informer = Arc::clone(&informer);
        let late = late.clone();
        move || informer.add_handler(late).unwrap()
    });
    std::thread::sleep(Duration::from_millis(50));
    cache.release();
    let reg = tokio::task::spawn_blocking(move || adding.join().unwrap())
        .await
        .unwrap();
    tokio::task::spawn_blocking(move || {
        settle(std::slice::from_ref(&reg));
        reg
    })
    .await
    .unwrap();
    let heard: Vec<String> = late.lines();
    let mut sorted = heard.clone();
    sorted.sort();
    assert_eq!(sorted, ["add ns/p0", "add ns/p1"], "once each: {heard:?}");
    informer.shutdown().await;
    run.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_writes_relists_and_registrations_agree_at_quiescence() {
    let fake = Fake::default();
    let cache = Arc::new(Indexer::<Pod>::new());
    let (informer, run) = synced(&fake, Arc::clone(&cache)).await;

    // One thread writes (with a relist now and then), another adds and removes handlers.
    let writer = std::thread::spawn({
        let fake = fake.clone();
        move || {
            let mut rng = fastrand::Rng::with_seed(17);
            for _ in 0..4000 {
                let name = format!("p{}", rng.u8(0..25));
                match rng.u8(0..40) {
                    0 => fake.expire(),
                    1..=10 => fake.write(&name, true, false),
                    11 => fake.write(&name, false, true),
                    _ => fake.write(&name, false, false),
                }
                if rng.u8(0..16) == 0 {
                    std::thread::yield_now();
                }
            }
        }
    });
    let registrar = std::thread::spawn({
        let informer = Arc::clone(&informer);
        move || {
            let mut rng = fastrand::Rng::with_seed(18);
            let mut kept: Vec<(History, Registration<Pod>)> = Vec::new();
            for i in 0..12 {
                let history = History::default();
                let reg = informer.add_handler(history.clone()).unwrap();
                if i % 4 == 3 {
                    reg.remove();
                } else {
                    kept.push((history, reg));
                }
                std::thread::sleep(Duration::from_micros(rng.u64(100..2000)));
            }
            kept
        }
    });
    writer.join().unwrap();
    let kept = tokio::task::spawn_blocking(move || registrar.join().unwrap())
        .await
        .unwrap();

    // Quiescence: a last relist catches up the silent writes; then everything must agree.
    let target = catch_up(&fake, &*cache, Duration::from_millis(5), 4000).await;
    assert_eq!(cached_state(&*cache), target);
    let kept = tokio::task::spawn_blocking(move || {
        let regs: Vec<&Registration<Pod>> = kept.iter().map(|(_, r)| r).collect();
        for r in &regs {
            settle(std::slice::from_ref(*r));
        }
        kept
    })
    .await
    .unwrap();
    assert_eq!(kept.len(), 9);
    for (history, reg) in &kept {
        assert!(reg.has_synced());
        assert_eq!(history.replay().unwrap(), target);
    }
    informer.shutdown().await;
    run.await.unwrap();
}
