//! Workers on real threads: at quiescence every added item was processed after its last add,
//! and no item was ever held by two workers at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use kinformer_workqueue::{
    BucketRateLimiter, ExponentialFailureRateLimiter, MaxOfRateLimiter, RateLimitingQueue,
};

const KEYS: usize = 64;
const PRODUCERS: usize = 4;
const WORKERS: usize = 6;
const ADDS_PER_PRODUCER: usize = 20_000;

/// What the test knows of one key.
#[derive(Default)]
struct Key {
    /// Incremented before each add of the key (a producer's, or a worker's retry).
    adds: AtomicU64,
    /// The highest `adds` a successful processing of the key started after.
    processed_after: AtomicU64,
    /// Set while a worker holds the key.
    held: AtomicBool,
    /// Attempts so far, for the failures.
    attempts: AtomicU64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_workers_process_every_item_and_never_one_twice_at_once() {
    // Short delays keep the run quick; the bucket is generous enough not to throttle it for
    // long, yet small enough that retries really are spread.
    let queue = RateLimitingQueue::<usize>::with_rate_limiter(MaxOfRateLimiter::new(vec![
        Box::new(ExponentialFailureRateLimiter::new(
            Duration::from_micros(50),
            Duration::from_millis(2),
        )),
        Box::new(BucketRateLimiter::new(20_000.0, 200).unwrap()),
    ]));
    let keys: Arc<Vec<Key>> = Arc::new((0..KEYS).map(|_| Key::default()).collect());
    let twice = Arc::new(AtomicU64::new(0));

    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (queue, keys, twice) = (queue.clone(), keys.clone(), twice.clone());
            tokio::spawn(async move {
                let mut handled = 0u64;
                while let Some(k) = queue.get().await {
                    let key = &keys[k];
                    let seen = key.adds.load(Ordering::SeqCst);
                    if key.held.swap(true, Ordering::SeqCst) {
                        twice.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::task::yield_now().await;
                    // Every fifth attempt of a key fails and is retried, at most twice in a row.
                    let attempt = key.attempts.fetch_add(1, Ordering::SeqCst);
                    key.held.store(false, Ordering::SeqCst);
                    if attempt % 5 == 4 && queue.num_requeues(&k) < 2 {
                        key.adds.fetch_add(1, Ordering::SeqCst);
                        queue.add_rate_limited(k);
                    } else {
                        key.processed_after.fetch_max(seen, Ordering::SeqCst);
                        queue.forget(&k);
                    }
                    queue.done(&k);
                    handled += 1;
                }
                handled
            })
        })
        .collect();

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (queue, keys) = (queue.clone(), keys.clone());
            tokio::spawn(async move {
                for i in 0..ADDS_PER_PRODUCER {
                    let k = (i * 7 + p * 13) % KEYS;
                    keys[k].adds.fetch_add(1, Ordering::SeqCst);
                    if i % 10 == 0 {
                        queue.add_after(k, Duration::from_micros(100));
                    } else if i % 10 == 5 {
                        queue.add_low_priority(k);
                    } else {
                        queue.add(k);
                    }
                    if i % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for producer in producers {
        producer.await.unwrap();
    }

    // Quiescence: every key processed after its last add, within a bound.
    let caught_up = || {
        keys.iter().all(|key| {
            key.processed_after.load(Ordering::SeqCst) == key.adds.load(Ordering::SeqCst)
        })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !caught_up() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not every added item was processed: {:?}",
            keys.iter()
                .enumerate()
                .filter(|(_, key)| key.processed_after.load(Ordering::SeqCst)
                    != key.adds.load(Ordering::SeqCst))
                .map(|(k, _)| k)
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }

    tokio::time::timeout(Duration::from_secs(30), queue.shut_down_with_drain())
        .await
        .expect("the drain ends once every held item is done");
    let mut handled = 0;
    for worker in workers {
        handled += worker.await.unwrap();
    }
    assert_eq!(
        twice.load(Ordering::SeqCst),
        0,
        "an item held twice at once"
    );
    assert!(queue.is_empty());
    let adds: u64 = keys.iter().map(|k| k.adds.load(Ordering::SeqCst)).sum();
    // Duplicates collapse: far fewer processings than adds, but at least one per key.
    assert!(
        handled >= KEYS as u64 && handled <= adds,
        "{handled} of {adds}"
    );
}
