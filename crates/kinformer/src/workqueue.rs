//! A work queue of keys for controllers: client-go's `workqueue`, the step after the informer.
//!
//! Handlers put keys in; workers take them out and reconcile each from the lister. A key is
//! queued at most once however often it is added, is never handed to two workers at once (added
//! again while a worker holds it, it is queued again when the worker is done), and a key whose
//! reconcile failed comes back after a per-key exponential delay.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

/// The per-key retry delays of [`WorkQueue::add_rate_limited`]: `base * 2^(failures - 1)`, at
/// most `max`. The defaults are client-go's: 5 ms to 1000 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryDelays {
    /// The delay after the first failure.
    pub base: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Default for RetryDelays {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(5),
            max: Duration::from_secs(1000),
        }
    }
}

struct State<T> {
    queue: VecDeque<T>,
    /// Queued, or to be queued again when its worker is done.
    dirty: HashSet<T>,
    processing: HashSet<T>,
    failures: HashMap<T, u32>,
    shutting_down: bool,
}

struct Inner<T> {
    state: Mutex<State<T>>,
    ready: Notify,
    delays: RetryDelays,
}

/// A de-duplicating, rate-limited queue of keys. Cheap to clone: clones share the queue.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use kinformer::workqueue::WorkQueue;
///
/// let queue = WorkQueue::new();
/// queue.add("default/web");
/// queue.add("default/web"); // already queued: still once
/// queue.add("default/db");
/// assert_eq!(queue.len(), 2);
/// let key = queue.get().await.unwrap();
/// assert_eq!(key, "default/web");
/// // ... reconcile it; on success:
/// queue.forget(&key);
/// queue.done(&key);
/// # }
/// ```
pub struct WorkQueue<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for WorkQueue<T> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T> fmt::Debug for WorkQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self
            .inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("WorkQueue")
            .field("queued", &state.queue.len())
            .field("processing", &state.processing.len())
            .field("shutting_down", &state.shutting_down)
            .finish()
    }
}

impl<T: Hash + Eq + Clone + Send + 'static> Default for WorkQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Hash + Eq + Clone + Send + 'static> WorkQueue<T> {
    /// A queue with client-go's retry delays.
    pub fn new() -> Self {
        Self::with_retry_delays(RetryDelays::default())
    }

    /// A queue with these retry delays.
    pub fn with_retry_delays(delays: RetryDelays) -> Self {
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    dirty: HashSet::new(),
                    processing: HashSet::new(),
                    failures: HashMap::new(),
                    shutting_down: false,
                }),
                ready: Notify::new(),
                delays,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `item` unless it is queued already; if a worker holds it, it is queued again when
    /// that worker calls [`done`](Self::done). Ignored once shutting down.
    pub fn add(&self, item: T) {
        let mut state = self.lock();
        if state.shutting_down || !state.dirty.insert(item.clone()) {
            return;
        }
        if state.processing.contains(&item) {
            return;
        }
        state.queue.push_back(item);
        drop(state);
        self.inner.ready.notify_one();
    }

    /// Queues `item` after `delay` (on a task of the current tokio runtime).
    pub fn add_after(&self, item: T, delay: Duration) {
        if delay.is_zero() {
            self.add(item);
            return;
        }
        let queue = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            queue.add(item);
        });
    }

    /// Queues `item` again after its next retry delay: call it when reconciling `item` failed.
    pub fn add_rate_limited(&self, item: T) {
        let delay = {
            let mut state = self.lock();
            let failures = state.failures.entry(item.clone()).or_insert(0);
            *failures += 1;
            let exponent = (*failures - 1).min(40);
            let delay = self
                .inner
                .delays
                .base
                .saturating_mul(2u32.saturating_pow(exponent));
            delay.min(self.inner.delays.max)
        };
        self.add_after(item, delay);
    }

    /// Forgets `item`'s failures: its next retry delay starts again from the base. Call it when
    /// reconciling `item` succeeded.
    pub fn forget(&self, item: &T) {
        self.lock().failures.remove(item);
    }

    /// How many times `item` has been retried since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.lock().failures.get(item).copied().unwrap_or(0)
    }

    /// The next item, which the caller now holds until [`done`](Self::done); waits while the
    /// queue is empty. `None` once shut down and drained.
    pub async fn get(&self) -> Option<T> {
        loop {
            let ready = self.inner.ready.notified();
            tokio::pin!(ready);
            ready.as_mut().enable();
            {
                let mut state = self.lock();
                if let Some(item) = state.queue.pop_front() {
                    state.dirty.remove(&item);
                    state.processing.insert(item.clone());
                    return Some(item);
                }
                if state.shutting_down {
                    return None;
                }
            }
            ready.await;
        }
    }

    /// The caller is done with `item`; if it was added meanwhile, it is queued again.
    pub fn done(&self, item: &T) {
        let mut state = self.lock();
        state.processing.remove(item);
        if state.dirty.contains(item) {
            state.queue.push_back(item.clone());
            drop(state);
            self.inner.ready.notify_one();
        }
    }

    /// Items queued and not yet taken.
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// `true` when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops taking new items; [`get`](Self::get) hands out what is queued, then `None`.
    pub fn shut_down(&self) {
        self.lock().shutting_down = true;
        self.inner.ready.notify_waiters();
    }

    /// `true` once [`shut_down`](Self::shut_down) was called.
    pub fn is_shutting_down(&self) -> bool {
        self.lock().shutting_down
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_key_is_queued_once_and_never_held_by_two_workers() {
        let q = WorkQueue::new();
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.len(), 2);
        let a = q.get().await.unwrap();
        // Added while held: not handed out again until done.
        q.add("a");
        assert_eq!(q.get().await, Some("b"));
        assert!(q.is_empty());
        q.done(&a);
        assert_eq!(q.get().await, Some("a"));
        q.done(&"a");
        q.done(&"b");
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn failures_come_back_after_growing_delays_until_forgotten() {
        let q = WorkQueue::new();
        let start = tokio::time::Instant::now();
        let mut waits = Vec::new();
        for _ in 0..4 {
            q.add_rate_limited("k");
            let k = q.get().await.unwrap();
            waits.push(start.elapsed());
            q.done(&k);
        }
        let gaps: Vec<u128> = std::iter::once(waits[0])
            .chain(waits.windows(2).map(|w| w[1] - w[0]))
            .map(|d| d.as_millis())
            .collect();
        assert_eq!(gaps, [5, 10, 20, 40]);
        assert_eq!(q.num_requeues(&"k"), 4);
        q.forget(&"k");
        assert_eq!(q.num_requeues(&"k"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn shutting_down_hands_out_what_is_queued_then_none_and_wakes_waiters() {
        let q = WorkQueue::new();
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(waiter.await.unwrap(), None::<&str>);
        q.add("late");
        assert_eq!(q.get().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_add_wakes_a_waiting_worker() {
        let q = WorkQueue::new();
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        q.add(7);
        assert_eq!(waiter.await.unwrap(), Some(7));
    }
}
