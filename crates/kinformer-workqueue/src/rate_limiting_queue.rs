//! The queue controllers use: a [`WorkQueue`] with a [`RateLimiter`] for retries.

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use crate::{RateLimiter, WorkQueue, default_controller_rate_limiter};

/// A [`WorkQueue`] whose failed items come back after a [`RateLimiter`]'s delay: client-go's
/// `workqueue.TypedRateLimitingInterface`.
///
/// A worker that failed to handle an item calls [`add_rate_limited`](Self::add_rate_limited)
/// (the limiter counts the retry and says how long the item waits); one that succeeded calls
/// [`forget`](Self::forget), so the item's next failure starts from the shortest delay again;
/// either way it then calls [`done`](Self::done). Cheap to clone: clones share the queue and the
/// limiter.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use std::time::Duration;
/// use kinformer_workqueue::RateLimitingQueue;
///
/// let queue = RateLimitingQueue::new(); // client-go's default controller rate limiter
/// queue.add("default/web".to_string());
/// let key = queue.get().await.unwrap();
/// // Reconciling failed: back in 5 ms, then 10, 20, ...
/// queue.add_rate_limited(key.clone());
/// queue.done(&key);
/// let start = tokio::time::Instant::now();
/// let key = queue.get().await.unwrap();
/// assert_eq!(start.elapsed(), Duration::from_millis(5));
/// assert_eq!(queue.num_requeues(&key), 1);
/// // Reconciling succeeded: forget its failures.
/// queue.forget(&key);
/// queue.done(&key);
/// assert_eq!(queue.num_requeues(&key), 0);
/// # }
/// ```
pub struct RateLimitingQueue<T> {
    queue: WorkQueue<T>,
    limiter: Arc<dyn RateLimiter<T>>,
}

impl<T> Clone for RateLimitingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            limiter: Arc::clone(&self.limiter),
        }
    }
}

impl<T> fmt::Debug for RateLimitingQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitingQueue")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl<T: Hash + Eq + Clone + Send + 'static> Default for RateLimitingQueue<T> {
    /// As [`RateLimitingQueue::new`].
    ///
    /// ```
    /// let queue: kinformer_workqueue::RateLimitingQueue<String> = Default::default();
    /// assert!(queue.is_empty());
    /// ```
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Hash + Eq + Clone + Send + 'static> RateLimitingQueue<T> {
    /// An empty queue with [`default_controller_rate_limiter`], as client-go's
    /// `NewTypedRateLimitingQueue(DefaultTypedControllerRateLimiter())`.
    ///
    /// ```
    /// let queue = kinformer_workqueue::RateLimitingQueue::<String>::new();
    /// assert_eq!(queue.len(), 0);
    /// ```
    pub fn new() -> Self {
        Self::with_rate_limiter(default_controller_rate_limiter())
    }

    /// An empty queue whose retries wait as `limiter` says.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kinformer_workqueue::{ExponentialFailureRateLimiter, RateLimitingQueue};
    ///
    /// let queue = RateLimitingQueue::<String>::with_rate_limiter(ExponentialFailureRateLimiter::new(
    ///     Duration::from_millis(100),
    ///     Duration::from_secs(60),
    /// ));
    /// ```
    pub fn with_rate_limiter(limiter: impl RateLimiter<T> + 'static) -> Self {
        Self {
            queue: WorkQueue::new(),
            limiter: Arc::new(limiter),
        }
    }

    /// An empty queue whose retries wait as `limiter` says, and that hands out an item only
    /// once `gate` is open for it (see [`WorkQueue::with_gate`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::future::Future;
    /// use std::pin::Pin;
    /// use kinformer_workqueue::{Gate, RateLimitingQueue, default_controller_rate_limiter};
    ///
    /// struct Open;
    /// impl Gate<String> for Open {
    ///     fn is_open(&self, _: &String) -> bool {
    ///         true
    ///     }
    ///     fn changed(&self) -> Pin<Box<dyn Future<Output = ()> + Send + Sync>> {
    ///         Box::pin(std::future::pending())
    ///     }
    /// }
    /// let queue = RateLimitingQueue::with_rate_limiter_and_gate(default_controller_rate_limiter(), Open);
    /// queue.add("default/web".to_string());
    /// assert_eq!(queue.get().await.as_deref(), Some("default/web"));
    /// # }
    /// ```
    pub fn with_rate_limiter_and_gate(
        limiter: impl RateLimiter<T> + 'static,
        gate: impl crate::Gate<T> + 'static,
    ) -> Self {
        Self {
            queue: WorkQueue::with_gate(gate),
            limiter: Arc::new(limiter),
        }
    }

    /// Queues `item` again once the limiter's delay for it has passed, and counts the retry:
    /// call it when handling `item` failed.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let queue = kinformer_workqueue::RateLimitingQueue::new();
    /// queue.add_rate_limited("default/web".to_string());
    /// assert!(queue.is_empty()); // waiting 5 ms
    /// assert_eq!(queue.get().await.as_deref(), Some("default/web"));
    /// # }
    /// ```
    pub fn add_rate_limited(&self, item: T) {
        let delay = self.limiter.when(&item);
        self.queue.add_after(item, delay);
    }

    /// Forgets `item`'s retries in the limiter (the item stays queued if it is): call it when
    /// handling `item` succeeded.
    ///
    /// ```
    /// let queue = kinformer_workqueue::RateLimitingQueue::new();
    /// queue.add_rate_limited("default/web");
    /// assert_eq!(queue.num_requeues(&"default/web"), 1);
    /// queue.forget(&"default/web");
    /// assert_eq!(queue.num_requeues(&"default/web"), 0);
    /// ```
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    /// How many times `item` was [`add_rate_limited`](Self::add_rate_limited) since it was last
    /// [`forget`](Self::forget)-ten (as the limiter counts them).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let queue = kinformer_workqueue::RateLimitingQueue::new();
    /// queue.add_rate_limited(7);
    /// queue.add_rate_limited(7);
    /// assert_eq!(queue.num_requeues(&7), 2);
    /// # }
    /// ```
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.limiter.num_requeues(item)
    }

    /// As [`WorkQueue::add`]: queues `item` now, once.
    ///
    /// ```
    /// let queue = kinformer_workqueue::RateLimitingQueue::new();
    /// queue.add("a");
    /// assert_eq!(queue.len(), 1);
    /// ```
    pub fn add(&self, item: T) {
        self.queue.add(item);
    }

    /// [`WorkQueue::add_low_priority`]: queued behind every item added with `add`.
    pub fn add_low_priority(&self, item: T) {
        self.queue.add_low_priority(item);
    }

    /// As [`WorkQueue::add_after`]: queues `item` once `delay` has passed, not counted as a
    /// retry.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use std::time::Duration;
    /// let queue = kinformer_workqueue::RateLimitingQueue::new();
    /// queue.add_after("resync", Duration::from_secs(30));
    /// assert_eq!(queue.get().await, Some("resync"));
    /// assert_eq!(queue.num_requeues(&"resync"), 0);
    /// # }
    /// ```
    pub fn add_after(&self, item: T, delay: Duration) {
        self.queue.add_after(item, delay);
    }

    /// As [`WorkQueue::get`]: the next item, held until [`done`](Self::done); `None` once shut
    /// down.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let queue = kinformer_workqueue::RateLimitingQueue::new();
    /// queue.add(1);
    /// assert_eq!(queue.get().await, Some(1));
    /// # }
    /// ```
    pub async fn get(&self) -> Option<T> {
        self.queue.get().await
    }

    /// As [`WorkQueue::done`]: the caller is done with `item`; queued again if it was added
    /// meanwhile.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let queue = kinformer_workqueue::RateLimitingQueue::new();
    /// queue.add(1);
    /// let one = queue.get().await.unwrap();
    /// queue.done(&one);
    /// # }
    /// ```
    pub fn done(&self, item: &T) {
        self.queue.done(item);
    }

    /// As [`WorkQueue::len`]: items queued and not handed out.
    ///
    /// ```
    /// let queue = kinformer_workqueue::RateLimitingQueue::new();
    /// queue.add(1);
    /// queue.add(1);
    /// assert_eq!(queue.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// `true` when [`len`](Self::len) is 0.
    ///
    /// ```
    /// assert!(kinformer_workqueue::RateLimitingQueue::<u8>::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// As [`WorkQueue::shut_down`]: stop at once; [`get`](Self::get) returns `None`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let queue = kinformer_workqueue::RateLimitingQueue::new();
    /// queue.add(1);
    /// queue.shut_down();
    /// assert_eq!(queue.get().await, None);
    /// # }
    /// ```
    pub fn shut_down(&self) {
        self.queue.shut_down();
    }

    /// As [`WorkQueue::shut_down_with_drain`]: no new items, and wait until every accepted item
    /// is handed out and done. Retries still waiting for their delay are dropped.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let queue = kinformer_workqueue::RateLimitingQueue::<u8>::new();
    /// queue.shut_down_with_drain().await;
    /// assert!(queue.is_shutting_down());
    /// # }
    /// ```
    pub async fn shut_down_with_drain(&self) {
        self.queue.shut_down_with_drain().await;
    }

    /// `true` once shut down, with or without drain.
    ///
    /// ```
    /// let queue = kinformer_workqueue::RateLimitingQueue::<u8>::new();
    /// assert!(!queue.is_shutting_down());
    /// ```
    pub fn is_shutting_down(&self) -> bool {
        self.queue.is_shutting_down()
    }

    /// The queue underneath, shared with this one (for code that takes a [`WorkQueue`]).
    ///
    /// ```
    /// let queue = kinformer_workqueue::RateLimitingQueue::new();
    /// let plain = queue.queue().clone();
    /// plain.add(1);
    /// assert_eq!(queue.len(), 1);
    /// ```
    pub fn queue(&self) -> &WorkQueue<T> {
        &self.queue
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExponentialFailureRateLimiter;
    use tokio::time::Instant;

    #[tokio::test(start_paused = true)]
    async fn failures_come_back_after_growing_delays_until_forgotten() {
        let q = RateLimitingQueue::new();
        let mut at = Vec::new();
        let mut last = Instant::now();
        for _ in 0..4 {
            q.add_rate_limited("k");
            let k = q.get().await.unwrap();
            at.push(last.elapsed().as_millis());
            last = Instant::now();
            q.done(&k);
        }
        assert_eq!(at, [5, 10, 20, 40]);
        assert_eq!(q.num_requeues(&"k"), 4);
        q.forget(&"k");
        assert_eq!(q.num_requeues(&"k"), 0);
        q.add_rate_limited("k");
        let start = Instant::now();
        assert_eq!(q.get().await, Some("k"));
        assert_eq!(start.elapsed().as_millis(), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_of_an_item_added_meanwhile_is_processed_once() {
        let q = RateLimitingQueue::with_rate_limiter(ExponentialFailureRateLimiter::new(
            Duration::from_millis(50),
            Duration::from_secs(1),
        ));
        q.add("k");
        let k = q.get().await.unwrap();
        q.add_rate_limited(k);
        q.add(k); // a new event while it fails
        q.done(&k);
        assert_eq!(q.get().await, Some("k"));
        q.done(&k);
        tokio::time::advance(Duration::from_millis(60)).await;
        // The retry is due: handed out again (client-go's queue does the same).
        assert_eq!(q.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_bucket_spreads_many_failing_items() {
        let q = RateLimitingQueue::new();
        for i in 0..101u32 {
            q.add_rate_limited(i);
        }
        let start = Instant::now();
        let mut last = Duration::ZERO;
        for _ in 0..101 {
            let i = q.get().await.unwrap();
            last = start.elapsed();
            q.done(&i);
        }
        // 100 in the burst after their 5 ms, the 101st a tenth of a second later.
        assert_eq!(last.as_millis(), 100);
    }
}
