//! Work queues for controllers: client-go's `k8s.io/client-go/util/workqueue`, async.
//!
//! A controller's informer handlers put object keys in a queue; workers take the keys out and
//! reconcile each from the cache. This crate is that queue, with client-go's rules:
//!
//! - [`WorkQueue`]: an item is queued at most once however often it is added while it waits;
//!   it is never handed to two workers at once ([`get`](WorkQueue::get) until
//!   [`done`](WorkQueue::done)), and an item added while a worker holds it is queued again when
//!   that worker is done; [`add_after`](WorkQueue::add_after) queues an item once a delay has
//!   passed; [`shut_down`](WorkQueue::shut_down) stops at once and
//!   [`shut_down_with_drain`](WorkQueue::shut_down_with_drain) finishes the accepted items first.
//! - [`RateLimiter`]: how long a failed item waits before its retry.
//!   [`ExponentialFailureRateLimiter`] (per item, doubling from a base to a maximum),
//!   [`BucketRateLimiter`] (one token bucket: qps and burst), [`MaxOfRateLimiter`] (the
//!   largest of several), and [`default_controller_rate_limiter`], client-go's
//!   `DefaultControllerRateLimiter`.
//! - [`RateLimitingQueue`]: a work queue with a rate limiter:
//!   [`add_rate_limited`](RateLimitingQueue::add_rate_limited) on failure,
//!   [`forget`](RateLimitingQueue::forget) on success,
//!   [`num_requeues`](RateLimitingQueue::num_requeues) to give up after a few.
//!
//! Everything is `Send + Sync` and cheap to clone (clones share the queue), and
//! [`get`](WorkQueue::get) is a future that waits for an item, so workers are tokio tasks.
//! Delays run on tokio's clock (`tokio::time`), so tests can pause it. Nothing is spawned: a
//! delayed item is moved into the queue by the first `get` (or `len`) that finds it due.
//!
//! # What it does not do
//! It knows nothing of Kubernetes or of the other kinformer crates: items are any
//! `Hash + Eq + Clone + Send` value, usually an `ObjectKey` or its string. It does not run
//! workers or call a reconcile function (that is the controller's loop, as in client-go), does
//! not export metrics, and keeps nothing across restarts. Unlike client-go's `ShutDown`,
//! [`shut_down`](WorkQueue::shut_down) hands out nothing more; the drain is the one that
//! finishes the queued items.
//!
//! # Example
//! Two workers; a key fails once and is retried after the default limiter's 5 ms:
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! use std::collections::HashSet;
//! use std::sync::{Arc, Mutex};
//! use kinformer_workqueue::RateLimitingQueue;
//!
//! let queue = RateLimitingQueue::new();
//! let reconciled = Arc::new(Mutex::new(Vec::new()));
//! let failed_once = Arc::new(Mutex::new(HashSet::new()));
//! let workers: Vec<_> = (0..2)
//!     .map(|_| {
//!         let (queue, reconciled, failed_once) =
//!             (queue.clone(), reconciled.clone(), failed_once.clone());
//!         tokio::spawn(async move {
//!             while let Some(key) = queue.get().await {
//!                 if key == "default/db" && failed_once.lock().unwrap().insert(key) {
//!                     queue.add_rate_limited(key); // failed: retry later
//!                 } else {
//!                     reconciled.lock().unwrap().push(key);
//!                     queue.forget(&key); // succeeded: forget its failures
//!                 }
//!                 queue.done(&key);
//!             }
//!         })
//!     })
//!     .collect();
//!
//! for key in ["default/web", "default/db", "default/web"] {
//!     queue.add(key); // the second "default/web" collapses with the first
//! }
//! tokio::time::sleep(std::time::Duration::from_millis(10)).await;
//! queue.shut_down_with_drain().await;
//! for worker in workers {
//!     worker.await.unwrap();
//! }
//! let mut reconciled = reconciled.lock().unwrap().clone();
//! reconciled.sort();
//! assert_eq!(reconciled, ["default/db", "default/web"]);
//! # }
//! ```

#![forbid(unsafe_code)]

mod queue;
mod rate_limiter;
mod rate_limiting_queue;

pub use queue::{Gate, WorkQueue};
pub use rate_limiter::{
    BoxRateLimiter, BucketRateLimiter, ExponentialFailureRateLimiter, MaxOfRateLimiter,
    RateLimiter, default_controller_rate_limiter,
};
pub use rate_limiting_queue::RateLimitingQueue;

/// What building a rate limiter can fail with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A token bucket needs a finite rate above 0 and a burst of at least 1, or no retry would
    /// ever be allowed: fix the settings.
    #[error("invalid token bucket: qps {qps} must be finite and above 0, burst {burst} at least 1")]
    InvalidBucket {
        /// The refill rate given, in tokens a second.
        qps: f64,
        /// The bucket size given.
        burst: u32,
    },
}

#[cfg(test)]
mod send_sync {
    use super::*;

    fn send_sync<T: Send + Sync>(_: &T) {}

    #[test]
    fn queues_limiters_and_their_futures_are_send_and_sync() {
        let queue = WorkQueue::<String>::new();
        send_sync(&queue);
        send_sync(&queue.get());
        send_sync(&queue.shut_down_with_drain());
        let limited = RateLimitingQueue::<String>::new();
        send_sync(&limited);
        send_sync(&limited.get());
        send_sync(&limited.shut_down_with_drain());
        send_sync(&default_controller_rate_limiter::<String>());
        send_sync(&BucketRateLimiter::new(1.0, 1).unwrap());
        send_sync(&ExponentialFailureRateLimiter::<String>::new(
            std::time::Duration::ZERO,
            std::time::Duration::ZERO,
        ));
        let boxed: BoxRateLimiter<String> = Box::new(default_controller_rate_limiter());
        send_sync(&boxed);
        send_sync(&Error::InvalidBucket { qps: 0.0, burst: 0 });
    }
}
