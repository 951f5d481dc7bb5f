//! The queue itself: client-go's `Typed` queue and its delaying layer, as one async type.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::future::{Future, poll_fn};
use std::hash::Hash;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Poll;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Whether the queue still takes items, and how it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// No new items; the items already accepted are still handed out until none is left.
    Draining,
    /// No new items, none handed out.
    Stopped,
}

/// Decides whether a queued item may be handed out yet: a queue made
/// [`with_gate`](WorkQueue::with_gate) holds back the items whose gate is closed, in their order,
/// and looks at them again each time the gate says it [`changed`](Gate::changed).
///
/// The usual gate is read-your-writes: a controller that wrote an object holds its key until
/// the informer's cache has caught up with the write (the `kinformer` facade's `FreshKeys`).
pub trait Gate<T>: Send + Sync {
    /// Whether `item` may be handed out now. Called under the queue's lock: it must not call
    /// back into the queue.
    fn is_open(&self, item: &T) -> bool;

    /// A future that resolves when a closed gate may have opened. It must start watching when
    /// this is called, before it is first polled, so that no change in between is lost.
    fn changed(&self) -> Pin<Box<dyn Future<Output = ()> + Send + Sync>>;
}

struct State<T> {
    /// Items ready to be handed out, in the order they became ready.
    queue: VecDeque<T>,
    /// Items taken from `queue` whose gate was closed, in their order (still in `dirty`).
    held: VecDeque<T>,
    /// Items added with low priority, handed out only when `queue` is empty (still in
    /// `dirty`), and the same items as a set.
    low: VecDeque<T>,
    low_set: HashSet<T>,
    /// Items in `queue`, or held by a worker and to be queued again when it is done.
    dirty: HashSet<T>,
    /// Items held by a worker, between `get` and `done`.
    processing: HashSet<T>,
    /// Items added with a delay, by the instant they are due (a sequence number keeps equal
    /// instants in the order they were added).
    waiting: BTreeMap<(Instant, u64), T>,
    /// Where each waiting item sits in `waiting`: an item waits once, for its earliest time.
    waiting_at: HashMap<T, (Instant, u64)>,
    next_seq: u64,
    phase: Phase,
}

impl<T: Hash + Eq + Clone> State<T> {
    /// Queues `item` unless it is queued already or a worker holds it; `true` if it was queued.
    fn insert(&mut self, item: T) -> bool {
        if !self.dirty.insert(item.clone()) {
            // Waiting with low priority: added again normally, it moves up.
            if self.low_set.remove(&item) {
                self.low.retain(|i| *i != item);
                self.queue.push_back(item);
                return true;
            }
            return false;
        }
        if self.processing.contains(&item) {
            return false;
        }
        self.queue.push_back(item);
        true
    }

    /// Moves every waiting item that is due at `now` into the queue; `true` if one was queued.
    fn promote_due(&mut self, now: Instant) -> bool {
        let mut queued = false;
        while let Some(entry) = self.waiting.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let item = entry.remove();
            self.waiting_at.remove(&item);
            queued |= self.insert(item);
        }
        queued
    }

    fn next_due(&self) -> Option<Instant> {
        self.waiting.first_key_value().map(|((at, _), _)| *at)
    }

    /// Nothing is queued and nothing is held: a drain is over.
    fn idle(&self) -> bool {
        self.queue.is_empty()
            && self.held.is_empty()
            && self.low.is_empty()
            && self.processing.is_empty()
    }

    /// Puts the held items whose gate is open (all of them when `all`) back at the front of
    /// the queue, in their order.
    fn release(&mut self, gate: &dyn Gate<T>, all: bool) {
        if self.held.is_empty() {
            return;
        }
        let mut still = VecDeque::new();
        let mut open = Vec::new();
        for item in self.held.drain(..) {
            if all || gate.is_open(&item) {
                open.push(item);
            } else {
                still.push_back(item);
            }
        }
        self.held = still;
        for item in open.into_iter().rev() {
            self.queue.push_front(item);
        }
    }

    fn clear(&mut self) {
        self.queue.clear();
        self.held.clear();
        self.low.clear();
        self.low_set.clear();
        self.dirty.clear();
        self.waiting.clear();
        self.waiting_at.clear();
    }
}

struct Inner<T> {
    state: Mutex<State<T>>,
    /// An item was queued, or the queue is stopping: a waiting `get` looks again.
    ready: Notify,
    /// The last held item of a drain is done.
    drained: Notify,
    /// Holds back items until they may be handed out ([`WorkQueue::with_gate`]).
    gate: Option<Box<dyn Gate<T>>>,
}

/// A de-duplicating, delaying queue of items (usually object keys): client-go's
/// `workqueue.TypedInterface` with `TypedDelayingInterface`.
///
/// Cheap to clone: clones share the queue. The rules:
/// - an item is queued at most once, however often it is [`add`](Self::add)ed while it waits;
/// - an item is never handed to two workers at once: [`get`](Self::get) hands it out, and until
///   the worker calls [`done`](Self::done) it is not handed out again; added meanwhile, it is
///   queued again when `done` is called;
/// - [`add_after`](Self::add_after) queues an item once its delay has passed (tokio time); an
///   item waiting twice waits for the earlier of the two times;
/// - [`shut_down`](Self::shut_down) stops at once, [`shut_down_with_drain`](Self::shut_down_with_drain)
///   finishes the items already accepted first.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use kinformer_workqueue::WorkQueue;
///
/// let queue = WorkQueue::new();
/// queue.add("default/web");
/// queue.add("default/web"); // already queued: still once
/// queue.add("default/db");
/// assert_eq!(queue.len(), 2);
///
/// let key = queue.get().await.unwrap();
/// assert_eq!(key, "default/web");
/// queue.add("default/web"); // a worker holds it: queued again when it is done
/// assert_eq!(queue.get().await, Some("default/db"));
/// queue.done(&key);
/// assert_eq!(queue.get().await, Some("default/web"));
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
            .field("waiting", &state.waiting.len())
            .field("phase", &state.phase)
            .finish()
    }
}

impl<T: Hash + Eq + Clone + Send> Default for WorkQueue<T> {
    /// An empty queue, as [`WorkQueue::new`].
    ///
    /// ```
    /// let queue: kinformer_workqueue::WorkQueue<String> = Default::default();
    /// assert!(queue.is_empty());
    /// ```
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Hash + Eq + Clone + Send> WorkQueue<T> {
    /// An empty queue.
    ///
    /// ```
    /// let queue = kinformer_workqueue::WorkQueue::<String>::new();
    /// assert_eq!(queue.len(), 0);
    /// ```
    pub fn new() -> Self {
        Self::build(None)
    }

    /// An empty queue that hands out an item only once `gate` is open for it: items whose gate
    /// is closed are held back, in their order, and looked at again whenever the gate changes.
    /// Held items count in [`len`](Self::len) and are still de-duplicated; a
    /// [`shut_down_with_drain`](Self::shut_down_with_drain) hands them out whatever the gate
    /// says, so that a drain always ends.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::future::Future;
    /// use std::pin::Pin;
    /// use tokio::sync::watch;
    /// use kinformer_workqueue::{Gate, WorkQueue};
    ///
    /// /// Holds back "held" until the switch is on.
    /// struct Switch(watch::Sender<bool>);
    /// impl Gate<&'static str> for Switch {
    ///     fn is_open(&self, item: &&'static str) -> bool {
    ///         *item != "held" || *self.0.borrow()
    ///     }
    ///     fn changed(&self) -> Pin<Box<dyn Future<Output = ()> + Send + Sync>> {
    ///         let mut changes = self.0.subscribe(); // watching from now
    ///         Box::pin(async move {
    ///             let _ = changes.changed().await;
    ///         })
    ///     }
    /// }
    ///
    /// let switch = watch::Sender::new(false);
    /// let queue = WorkQueue::with_gate(Switch(switch.clone()));
    /// queue.add("held");
    /// queue.add("free");
    /// assert_eq!(queue.get().await, Some("free"));
    /// assert_eq!(queue.len(), 1);
    /// switch.send_replace(true);
    /// assert_eq!(queue.get().await, Some("held"));
    /// # }
    /// ```
    pub fn with_gate(gate: impl Gate<T> + 'static) -> Self {
        Self::build(Some(Box::new(gate)))
    }

    fn build(gate: Option<Box<dyn Gate<T>>>) -> Self {
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    held: VecDeque::new(),
                    low: VecDeque::new(),
                    low_set: HashSet::new(),
                    dirty: HashSet::new(),
                    processing: HashSet::new(),
                    waiting: BTreeMap::new(),
                    waiting_at: HashMap::new(),
                    next_seq: 0,
                    phase: Phase::Running,
                }),
                ready: Notify::new(),
                drained: Notify::new(),
                gate,
            }),
        }
    }

    /// The state, however a panic elsewhere left it: every change to it is one step that
    /// leaves it consistent, so a poisoned lock holds nothing half-done.
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `item` unless it is queued already; if a worker holds it, it is queued again when
    /// that worker calls [`done`](Self::done). Ignored once shutting down.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let queue = kinformer_workqueue::WorkQueue::new();
    /// queue.add(1);
    /// queue.add(1);
    /// assert_eq!(queue.len(), 1);
    /// # }
    /// ```
    pub fn add(&self, item: T) {
        let mut state = self.lock();
        if state.phase != Phase::Running {
            tracing::trace!("work queue shutting down: add ignored");
            return;
        }
        if state.insert(item) {
            drop(state);
            self.inner.ready.notify_one();
        }
    }

    /// Queues `item` behind everything added with [`add`](Self::add): it is handed out only
    /// when nothing else is ready, so a controller's reactions to new changes do not wait
    /// behind a large initial list (controller-runtime's priority queue does this for the keys
    /// of the first list). Queued already, it keeps its place; added again with `add` while it
    /// waits, it moves up. Ignored once shutting down.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let queue = kinformer_workqueue::WorkQueue::new();
    /// queue.add_low_priority("listed");
    /// queue.add("changed");
    /// assert_eq!(queue.get().await, Some("changed"));
    /// assert_eq!(queue.get().await, Some("listed"));
    /// # }
    /// ```
    pub fn add_low_priority(&self, item: T) {
        let mut state = self.lock();
        if state.phase != Phase::Running {
            tracing::trace!("work queue shutting down: add ignored");
            return;
        }
        if !state.dirty.insert(item.clone()) || state.processing.contains(&item) {
            return;
        }
        state.low_set.insert(item.clone());
        state.low.push_back(item);
        drop(state);
        self.inner.ready.notify_one();
    }

    /// Queues `item` once `delay` has passed on tokio's clock (a zero delay queues it at once).
    /// If `item` is waiting already, it waits for the earlier of the two times. Ignored once
    /// shutting down; items still waiting then are dropped.
    ///
    /// Nothing is spawned: the waiting items are moved into the queue by [`get`](Self::get),
    /// [`len`](Self::len) and [`is_empty`](Self::is_empty) when they are due, so a waiting `get`
    /// wakes for the first of them.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// let queue = kinformer_workqueue::WorkQueue::new();
    /// let start = Instant::now();
    /// queue.add_after("default/web", Duration::from_secs(2));
    /// assert!(queue.is_empty());
    /// assert_eq!(queue.get().await, Some("default/web"));
    /// assert_eq!(start.elapsed(), Duration::from_secs(2));
    /// # }
    /// ```
    pub fn add_after(&self, item: T, delay: Duration) {
        if delay.is_zero() {
            self.add(item);
            return;
        }
        let due = Instant::now() + delay;
        let mut state = self.lock();
        if state.phase != Phase::Running {
            tracing::trace!("work queue shutting down: add_after ignored");
            return;
        }
        if let Some(&(at, seq)) = state.waiting_at.get(&item) {
            if at <= due {
                return;
            }
            state.waiting.remove(&(at, seq));
        }
        let seq = state.next_seq;
        state.next_seq += 1;
        let earliest = state.next_due().is_none_or(|first| due < first);
        state.waiting.insert((due, seq), item.clone());
        state.waiting_at.insert(item, (due, seq));
        drop(state);
        if earliest {
            // Every waiting `get` sleeps until the first due item: each looks again.
            self.inner.ready.notify_waiters();
        }
    }

    /// The next item, which the caller holds until it calls [`done`](Self::done); waits while
    /// nothing is queued. `None` once the queue is shut down, or drained when shut down with
    /// [`shut_down_with_drain`](Self::shut_down_with_drain).
    ///
    /// Cancel-safe: an item is taken only when the future completes.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let queue = kinformer_workqueue::WorkQueue::new();
    /// let worker = tokio::spawn({
    ///     let queue = queue.clone();
    ///     async move {
    ///         let mut seen = Vec::new();
    ///         while let Some(key) = queue.get().await {
    ///             seen.push(key);
    ///             queue.done(&key);
    ///         }
    ///         seen
    ///     }
    /// });
    /// queue.add("a");
    /// queue.add("b");
    /// queue.shut_down_with_drain().await;
    /// assert_eq!(worker.await.unwrap(), ["a", "b"]);
    /// # }
    /// ```
    pub async fn get(&self) -> Option<T> {
        let gate = self.inner.gate.as_deref();
        loop {
            let mut ready = pin!(self.inner.ready.notified());
            // Registered before the state is read, so no wake-up between the two is lost.
            ready.as_mut().enable();
            // Likewise the gate's changes.
            let mut opened = gate.map(|g| g.changed());
            let next_due = {
                let mut state = self.lock();
                match state.phase {
                    Phase::Stopped => return None,
                    Phase::Running => {
                        state.promote_due(Instant::now());
                    }
                    Phase::Draining => {}
                }
                if let Some(gate) = gate {
                    let draining = state.phase == Phase::Draining;
                    state.release(gate, draining);
                    while let Some(item) = state.queue.front() {
                        if draining || gate.is_open(item) {
                            break;
                        }
                        let held = state.queue.pop_front().expect("the front was just seen");
                        state.held.push_back(held);
                    }
                }
                // Nothing of normal priority ready: the next low-priority item whose gate is
                // open (a closed one waits with the held items).
                while state.queue.is_empty() {
                    let Some(item) = state.low.pop_front() else {
                        break;
                    };
                    state.low_set.remove(&item);
                    let draining = state.phase == Phase::Draining;
                    match gate {
                        Some(gate) if !draining && !gate.is_open(&item) => {
                            state.held.push_back(item);
                        }
                        _ => state.queue.push_back(item),
                    }
                }
                if state.held.is_empty() {
                    opened = None;
                }
                if let Some(item) = state.queue.pop_front() {
                    state.dirty.remove(&item);
                    state.processing.insert(item.clone());
                    let more = !state.queue.is_empty();
                    drop(state);
                    if more {
                        // Pass the wake-up on: several items may have become ready at once.
                        self.inner.ready.notify_one();
                    }
                    return Some(item);
                }
                if state.phase == Phase::Draining && state.processing.is_empty() {
                    return None;
                }
                state.next_due()
            };
            let mut sleep = pin!(next_due.map(tokio::time::sleep_until));
            poll_fn(|cx| {
                if ready.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(());
                }
                if let Some(opened) = opened.as_mut()
                    && opened.as_mut().poll(cx).is_ready()
                {
                    return Poll::Ready(());
                }
                let due = sleep
                    .as_mut()
                    .as_pin_mut()
                    .is_some_and(|sleep| sleep.poll(cx).is_ready());
                if due { Poll::Ready(()) } else { Poll::Pending }
            })
            .await;
        }
    }

    /// The caller is done with `item`, which it had from [`get`](Self::get); if `item` was
    /// added meanwhile, it is queued again. Call it whatever became of the item, or a drain
    /// never ends.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let queue = kinformer_workqueue::WorkQueue::new();
    /// queue.add("a");
    /// let a = queue.get().await.unwrap();
    /// queue.add("a");
    /// assert!(queue.is_empty()); // held by a worker: not handed out twice
    /// queue.done(&a);
    /// assert_eq!(queue.len(), 1);
    /// # }
    /// ```
    pub fn done(&self, item: &T) {
        let mut state = self.lock();
        if !state.processing.remove(item) {
            tracing::debug!("work queue: done called for an item no worker holds");
        }
        if state.phase != Phase::Stopped && state.dirty.contains(item) {
            state.queue.push_back(item.clone());
            drop(state);
            self.inner.ready.notify_one();
        } else if state.phase == Phase::Draining && state.idle() {
            drop(state);
            // The drain is over: every waiting worker gets `None`, and the drain returns.
            self.inner.ready.notify_waiters();
            self.inner.drained.notify_waiters();
        }
    }

    /// How many items are queued and not yet handed out, those a gate holds back included (not
    /// counting those held by workers, nor those whose delay has not passed).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let queue = kinformer_workqueue::WorkQueue::new();
    /// queue.add("a");
    /// queue.add("b");
    /// let _a = queue.get().await;
    /// assert_eq!(queue.len(), 1);
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        let mut state = self.lock();
        if state.phase == Phase::Running {
            state.promote_due(Instant::now());
        }
        state.queue.len() + state.held.len() + state.low.len()
    }

    /// `true` when [`len`](Self::len) is 0.
    ///
    /// ```
    /// let queue = kinformer_workqueue::WorkQueue::<u32>::new();
    /// assert!(queue.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops at once: new items are ignored, [`get`](Self::get) returns `None` from now on (the
    /// workers waiting in it too), and the items queued or waiting are dropped. Workers still
    /// holding an item finish it and call [`done`](Self::done) as usual.
    ///
    /// client-go's `ShutDown` still hands out what is queued; here that is
    /// [`shut_down_with_drain`](Self::shut_down_with_drain), and `shut_down` means stop now.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let queue = kinformer_workqueue::WorkQueue::new();
    /// queue.add("a");
    /// queue.shut_down();
    /// assert_eq!(queue.get().await, None);
    /// queue.add("b");
    /// assert!(queue.is_empty());
    /// # }
    /// ```
    pub fn shut_down(&self) {
        let mut state = self.lock();
        state.phase = Phase::Stopped;
        state.clear();
        drop(state);
        self.inner.ready.notify_waiters();
        self.inner.drained.notify_waiters();
    }

    /// Stops taking new items and waits until every item already accepted has been handed out
    /// and is [`done`](Self::done): the queued items, and those added while a worker held them.
    /// Items whose delay has not passed are dropped. Meanwhile [`get`](Self::get) hands out the
    /// remaining items, then returns `None` once nothing is queued or held (a worker whose
    /// `get` finds the queue empty while others still hold items waits, since `done` may queue
    /// one of them again).
    ///
    /// Like client-go's `ShutDownWithDrain`, this waits for ever if a worker never calls
    /// `done`: bound it with `tokio::time::timeout` where that can happen. A
    /// [`shut_down`](Self::shut_down) meanwhile ends the wait at once.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let queue = kinformer_workqueue::WorkQueue::new();
    /// queue.add("a");
    /// let held = queue.get().await.unwrap();
    /// queue.add("b");
    /// let drain = tokio::spawn({
    ///     let queue = queue.clone();
    ///     async move { queue.shut_down_with_drain().await }
    /// });
    /// queue.done(&held);
    /// assert_eq!(queue.get().await, Some("b"));
    /// queue.done(&"b");
    /// drain.await.unwrap();
    /// assert_eq!(queue.get().await, None);
    /// # }
    /// ```
    pub async fn shut_down_with_drain(&self) {
        loop {
            let mut drained = pin!(self.inner.drained.notified());
            drained.as_mut().enable();
            {
                let mut state = self.lock();
                match state.phase {
                    Phase::Stopped => return,
                    Phase::Running => {
                        state.phase = Phase::Draining;
                        state.waiting.clear();
                        state.waiting_at.clear();
                        drop(state);
                        // Workers asleep until a delayed item is due look again.
                        self.inner.ready.notify_waiters();
                        state = self.lock();
                    }
                    Phase::Draining => {}
                }
                if state.idle() {
                    drop(state);
                    self.inner.ready.notify_waiters();
                    return;
                }
            }
            drained.await;
        }
    }

    /// `true` once [`shut_down`](Self::shut_down) or
    /// [`shut_down_with_drain`](Self::shut_down_with_drain) was called.
    ///
    /// ```
    /// let queue = kinformer_workqueue::WorkQueue::<u32>::new();
    /// assert!(!queue.is_shutting_down());
    /// queue.shut_down();
    /// assert!(queue.is_shutting_down());
    /// ```
    pub fn is_shutting_down(&self) -> bool {
        self.lock().phase != Phase::Running
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn an_item_is_queued_once_and_never_held_by_two_workers() {
        let q = WorkQueue::new();
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.len(), 2);
        let a = q.get().await.unwrap();
        // Added while held: not handed out again until done, and added twice still once.
        q.add("a");
        q.add("a");
        assert_eq!(q.get().await, Some("b"));
        assert!(q.is_empty());
        q.done(&a);
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await, Some("a"));
        q.done(&"a");
        q.done(&"b");
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn items_come_out_in_the_order_they_became_ready() {
        let q = WorkQueue::new();
        for i in [3, 1, 2, 1, 3] {
            q.add(i);
        }
        let mut out = Vec::new();
        while !q.is_empty() {
            let i = q.get().await.unwrap();
            out.push(i);
            q.done(&i);
        }
        assert_eq!(out, [3, 1, 2]);
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

    #[tokio::test(start_paused = true)]
    async fn delayed_items_wait_their_time_and_the_earlier_time_wins() {
        let q = WorkQueue::new();
        let start = Instant::now();
        q.add_after("late", ms(300));
        q.add_after("early", ms(100));
        q.add_after("late", ms(200)); // earlier than its first time: moves up
        q.add_after("early", ms(500)); // later: ignored
        assert!(q.is_empty());
        let mut seen = Vec::new();
        for _ in 0..2 {
            let item = q.get().await.unwrap();
            seen.push((item, start.elapsed()));
            q.done(&item);
        }
        assert_eq!(seen, [("early", ms(100)), ("late", ms(200))]);
        tokio::time::advance(ms(1000)).await;
        assert!(q.is_empty(), "a moved item waits once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_earlier_delay_wakes_a_worker_asleep_on_a_later_one() {
        let q = WorkQueue::new();
        q.add_after(1, ms(1000));
        let start = Instant::now();
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { (q.get().await, Instant::now()) }
        });
        tokio::task::yield_now().await;
        q.add_after(2, ms(10));
        let (item, at) = waiter.await.unwrap();
        assert_eq!(item, Some(2));
        assert_eq!(at - start, ms(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_item_already_queued_collapses_with_it() {
        let q = WorkQueue::new();
        q.add("a");
        q.add_after("a", ms(10));
        tokio::time::advance(ms(20)).await;
        assert_eq!(q.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn several_due_items_wake_several_workers() {
        let q = WorkQueue::new();
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move { q.get().await })
            })
            .collect();
        tokio::task::yield_now().await;
        for i in 0..3 {
            q.add_after(i, ms(50));
        }
        let mut got = Vec::new();
        for w in workers {
            got.push(w.await.unwrap().unwrap());
        }
        got.sort_unstable();
        assert_eq!(got, [0, 1, 2]);
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_stops_at_once_and_wakes_waiters() {
        let q = WorkQueue::new();
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(waiter.await.unwrap(), None::<&str>);
        q.add("late");
        q.add_after("later", ms(1));
        assert_eq!(q.get().await, None);
        assert!(q.is_shutting_down());

        let q = WorkQueue::new();
        q.add("queued");
        q.add_after("waiting", ms(1));
        q.shut_down();
        tokio::time::advance(ms(10)).await;
        assert_eq!(q.len(), 0);
        assert_eq!(q.get().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn drain_hands_out_accepted_items_and_waits_for_every_done() {
        let q = WorkQueue::new();
        q.add("a");
        q.add("b");
        let a = q.get().await.unwrap();
        q.add("a"); // dirty while held: accepted, so it is processed again during the drain
        q.add_after("delayed", ms(5)); // not due: dropped by the drain
        let drain = tokio::spawn({
            let q = q.clone();
            async move { q.shut_down_with_drain().await }
        });
        tokio::task::yield_now().await;
        assert!(!drain.is_finished());
        q.add("new"); // refused
        assert_eq!(q.get().await, Some("b"));
        // A worker finding nothing queued while "a" and "b" are held waits for them.
        let idle_worker = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        assert!(!idle_worker.is_finished());
        q.done(&"b");
        q.done(&a);
        // "a" came back, and the waiting worker has it.
        assert_eq!(idle_worker.await.unwrap(), Some("a"));
        tokio::time::advance(ms(10)).await;
        assert!(!drain.is_finished());
        q.done(&"a");
        drain.await.unwrap();
        assert_eq!(q.get().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn drain_of_an_idle_queue_returns_at_once_and_shut_down_ends_a_drain() {
        let q = WorkQueue::<u8>::new();
        q.shut_down_with_drain().await;
        assert_eq!(q.get().await, None);

        let q = WorkQueue::new();
        q.add(1);
        let _held = q.get().await.unwrap();
        let drain = tokio::spawn({
            let q = q.clone();
            async move { q.shut_down_with_drain().await }
        });
        tokio::task::yield_now().await;
        assert!(!drain.is_finished());
        q.shut_down();
        drain.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_get_takes_nothing() {
        let q = WorkQueue::new();
        let cancelled = tokio::time::timeout(ms(5), q.get()).await;
        assert!(cancelled.is_err());
        q.add("a");
        assert_eq!(q.get().await, Some("a"));
    }

    /// Open for the items in the set it holds.
    struct OpenFor(tokio::sync::watch::Sender<HashSet<&'static str>>);

    impl Gate<&'static str> for OpenFor {
        fn is_open(&self, item: &&'static str) -> bool {
            self.0.borrow().contains(item)
        }
        fn changed(&self) -> Pin<Box<dyn Future<Output = ()> + Send + Sync>> {
            let mut changes = self.0.subscribe();
            Box::pin(async move {
                let _ = changes.changed().await;
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_gate_holds_items_back_in_order_until_it_opens_for_them() {
        let open = tokio::sync::watch::Sender::new(HashSet::from(["c"]));
        let q = WorkQueue::with_gate(OpenFor(open.clone()));
        for item in ["a", "b", "c"] {
            q.add(item);
        }
        assert_eq!(q.get().await, Some("c"));
        // Held, still counted, still de-duplicated.
        assert_eq!(q.len(), 2);
        q.add("a");
        assert_eq!(q.len(), 2);
        // A worker waiting in `get` wakes when the gate changes.
        let worker = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        assert!(!worker.is_finished());
        open.send_modify(|o| {
            o.insert("b");
            o.insert("a");
        });
        assert_eq!(worker.await.unwrap(), Some("a"));
        assert_eq!(q.get().await, Some("b"));
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_hands_out_what_the_gate_holds() {
        let open = tokio::sync::watch::Sender::new(HashSet::new());
        let q = WorkQueue::with_gate(OpenFor(open));
        q.add("a");
        let waiting = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        let drain = tokio::spawn({
            let q = q.clone();
            async move { q.shut_down_with_drain().await }
        });
        let a = waiting.await.unwrap().unwrap();
        assert_eq!(a, "a");
        q.done(&a);
        drain.await.unwrap();
        assert_eq!(q.get().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn low_priority_items_wait_behind_the_rest_and_move_up_when_added_again() {
        let q = WorkQueue::new();
        for item in ["l1", "l2", "l3"] {
            q.add_low_priority(item);
        }
        q.add("n1");
        q.add_low_priority("n1"); // queued already: keeps its place
        assert_eq!(q.len(), 4);
        assert_eq!(q.get().await, Some("n1"));
        q.add("l3"); // moves up
        assert_eq!(q.get().await, Some("l3"));
        q.add("n2");
        assert_eq!(q.get().await, Some("n2"));
        assert_eq!(q.get().await, Some("l1"));
        assert_eq!(q.get().await, Some("l2"));
        assert!(q.is_empty());
        // A low-priority item a worker holds is queued again (normally) when it is done.
        q.add_low_priority("l1");
        assert!(q.is_empty(), "l1 is held by a worker");
        q.done(&"l1");
        assert_eq!(q.get().await, Some("l1"));
    }
}
