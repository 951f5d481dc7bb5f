//! Event handlers, and the listener that gives each one its own buffer and thread.

use std::collections::VecDeque;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use kinformer_core::{DeltaObject, Notification, Object, ResourceVersion};
use parking_lot::{Condvar, Mutex};

/// What a controller does when the cache changes: client-go's `ResourceEventHandler`. Every
/// method has an empty default, so a handler implements what it needs.
///
/// The informer calls a handler on a thread of its own, one call at a time, in the order the
/// cache changed, after the cache holds the change. A slow handler delays only itself; a handler
/// that panics is logged, counted and called again for the next event.
pub trait ResourceEventHandler<K>: Send + Sync + 'static {
    /// An object appeared: created, or listed. `is_in_initial_list` is `true` for objects of the
    /// informer's first list, and for the cache's objects replayed to a handler added later.
    fn on_add(&self, object: &Arc<K>, is_in_initial_list: bool) {
        let _ = (object, is_in_initial_list);
    }

    /// An object changed. With equal resourceVersions it is a resync: the same object again.
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let _ = (old, new);
    }

    /// An object left: its last state, or a tombstone carrying the last state the informer knew
    /// when the delete was only seen through a relist.
    fn on_delete(&self, object: &DeltaObject<K>) {
        let _ = object;
    }

    /// A watch bookmark: the cache holds every change up to `resource_version`, and this
    /// handler has been called for each of them (client-go's `BookmarkFunc`). Bookmarks come in
    /// order with the changes, with the informer's queue in its default in-order mode; the
    /// classic queue has no place for them, and this is never called.
    fn on_bookmark(&self, resource_version: &ResourceVersion) {
        let _ = resource_version;
    }
}

/// A boxed handler is a handler, so handlers of several types can be kept in one list.
impl<K: Send + Sync + 'static> ResourceEventHandler<K> for Box<dyn ResourceEventHandler<K>> {
    fn on_add(&self, object: &Arc<K>, is_in_initial_list: bool) {
        (**self).on_add(object, is_in_initial_list);
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        (**self).on_update(old, new);
    }
    fn on_delete(&self, object: &DeltaObject<K>) {
        (**self).on_delete(object);
    }
    fn on_bookmark(&self, resource_version: &ResourceVersion) {
        (**self).on_bookmark(resource_version);
    }
}

type AddFn<K> = Box<dyn Fn(&Arc<K>, bool) + Send + Sync>;
type UpdateFn<K> = Box<dyn Fn(&Arc<K>, &Arc<K>) + Send + Sync>;
type DeleteFn<K> = Box<dyn Fn(&DeltaObject<K>) + Send + Sync>;
type BookmarkFn = Box<dyn Fn(&ResourceVersion) + Send + Sync>;

/// A handler built from closures: client-go's `ResourceEventHandlerFuncs`.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_core::Object;
/// use kinformer_shared_informer::{HandlerFns, ResourceEventHandler};
///
/// let handler = HandlerFns::<Pod>::new()
///     .on_add(|pod, _| println!("Pod Added: {}", pod.key()))
///     .on_delete(|pod| println!("Pod Deleted: {}", pod.key()));
/// ResourceEventHandler::on_add(&handler, &Arc::new(Pod::default()), false);
/// ```
pub struct HandlerFns<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
    bookmark: Option<BookmarkFn>,
}

impl<K> fmt::Debug for HandlerFns<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerFns")
            .field("add", &self.add.is_some())
            .field("update", &self.update.is_some())
            .field("delete", &self.delete.is_some())
            .field("bookmark", &self.bookmark.is_some())
            .finish()
    }
}

impl<K> Default for HandlerFns<K> {
    fn default() -> Self {
        Self {
            add: None,
            update: None,
            delete: None,
            bookmark: None,
        }
    }
}

impl<K> HandlerFns<K> {
    /// A handler that does nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Called for each added object.
    #[must_use]
    pub fn on_add(mut self, f: impl Fn(&Arc<K>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }

    /// Called for each changed object (and each resync).
    #[must_use]
    pub fn on_update(mut self, f: impl Fn(&Arc<K>, &Arc<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }

    /// Called for each deleted object or tombstone.
    #[must_use]
    pub fn on_delete(mut self, f: impl Fn(&DeltaObject<K>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }

    /// Called for each watch bookmark, in order with the changes (see
    /// [`ResourceEventHandler::on_bookmark`]).
    #[must_use]
    pub fn on_bookmark(mut self, f: impl Fn(&ResourceVersion) + Send + Sync + 'static) -> Self {
        self.bookmark = Some(Box::new(f));
        self
    }
}

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for HandlerFns<K> {
    fn on_add(&self, object: &Arc<K>, is_in_initial_list: bool) {
        if let Some(f) = &self.add {
            f(object, is_in_initial_list);
        }
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        if let Some(f) = &self.update {
            f(old, new);
        }
    }
    fn on_delete(&self, object: &DeltaObject<K>) {
        if let Some(f) = &self.delete {
            f(object);
        }
    }
    fn on_bookmark(&self, resource_version: &ResourceVersion) {
        if let Some(f) = &self.bookmark {
            f(resource_version);
        }
    }
}

/// How a handler's buffer behaves when the handler falls behind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum BufferPolicy {
    /// Grow without bound: no event is ever dropped or merged, and no handler slows the others
    /// (client-go's listeners). The default.
    #[default]
    Unbounded,
    /// Hold at most about `capacity` events: when a handler's buffer is full, the informer stops
    /// popping its queue (and so, through the queue's bound, the watch) until the handler catches
    /// up. A pop hands out one batch at a time, so a buffer can exceed `capacity` by a batch.
    Backpressure {
        /// The buffer size at which the informer waits.
        capacity: usize,
    },
    /// Keep one pending event per key where the events merge: updates of a key not yet handled
    /// become one update from the oldest old object to the newest new one, and an update after a
    /// pending add becomes the add of the newest object. A slow handler sees the latest state of
    /// each key rather than every step; adds and deletes are never merged away.
    CoalescePerKey,
}

/// How long a handler thread leaves the notifications it is done with for the informer's next
/// push to drop, before it drops them itself.
pub(crate) const RECLAIM_WAIT: Duration = Duration::from_millis(50);

/// How many notifications a handler thread hands back at a time in the middle of a batch. A
/// batch is everything buffered when the thread took it: a slow handler catching up takes
/// thousands at once, and the objects of those it has handled (an update's replaced object,
/// a deleted object) would otherwise live until the whole batch is done.
pub(crate) const SPENT_CHUNK: usize = 64;

/// How many handed-back notifications may wait for a push to take them, before the handler
/// thread drops the waiting ones itself: while pushes come, they take everything back and the
/// frees stay on the informer's side; when none come, at most this many (and a chunk in
/// hand) are alive besides the batch's unhandled notifications.
pub(crate) const SPENT_KEPT: usize = 4 * SPENT_CHUNK;

/// What a listener's buffer holds: a notification (or a bookmark), whether it counts towards the
/// registration's initial sync, and when it was queued.
struct Item<K> {
    note: Note<K>,
    initial: bool,
    queued: std::time::Instant,
}

/// A change for the handler, or a bookmark between changes.
enum Note<K> {
    Change(Notification<K>),
    Bookmark(ResourceVersion),
}

struct Buffer<K> {
    items: VecDeque<Item<K>>,
    /// The sequence number of `items.front()`.
    head: u64,
    /// For [`BufferPolicy::CoalescePerKey`]: the sequence number of each key's last item.
    last_of_key: std::collections::HashMap<kinformer_core::ObjectKey, u64>,
    /// Stop after the buffer is empty (drain) or at once (drop).
    stopping: Option<bool>,
    /// Notifications the handler is done with, left for the informer to drop on its next push
    /// (see [`Listener::push`]).
    spent: Vec<Notification<K>>,
}

fn key_of<K: Object>(n: &Notification<K>) -> kinformer_core::ObjectKey {
    match n {
        Notification::Added { object, .. } => object.key(),
        Notification::Updated { new, .. } => new.key(),
        Notification::Deleted { object } => object.key(),
    }
}

/// `pending` followed by `next`, as one notification, when they merge.
fn merge<K>(pending: &Notification<K>, next: &Notification<K>) -> Option<Notification<K>> {
    match (pending, next) {
        (
            Notification::Added {
                is_in_initial_list, ..
            },
            Notification::Updated { new, .. },
        ) => Some(Notification::Added {
            object: Arc::clone(new),
            is_in_initial_list: *is_in_initial_list,
        }),
        (Notification::Updated { old, .. }, Notification::Updated { new, .. }) => {
            Some(Notification::Updated {
                old: Arc::clone(old),
                new: Arc::clone(new),
            })
        }
        _ => None,
    }
}

/// One handler's buffer, thread and bookkeeping.
pub(crate) struct Listener<K> {
    pub(crate) id: u64,
    pub(crate) name: String,
    buffer: Mutex<Buffer<K>>,
    wake: Condvar,
    /// Initial notifications pushed and not yet handled.
    initial_pending: AtomicUsize,
    /// Every initial notification has been pushed (the informer's first list is distributed, or
    /// the cache was replayed to a late handler).
    initial_pushed: AtomicBool,
    panics: AtomicU64,
    handled: AtomicU64,
    /// Pushed and not yet handled (or dropped).
    pending: AtomicUsize,
    /// Set when the rest of the buffer is to be dropped (removal, or shutdown without drain).
    dropping: AtomicBool,
    pub(crate) resync_period: Option<Duration>,
    abort_on_panic: bool,
    policy: BufferPolicy,
    /// When the item in the handler's hands was queued (the oldest not yet handled).
    in_hand: Mutex<Option<std::time::Instant>>,
    /// The dispatcher waiting for room ([`BufferPolicy::Backpressure`]).
    room: Mutex<Option<std::task::Waker>>,
    backlog_gauge: metrics::Gauge,
    lag_gauge: metrics::Gauge,
    panics_counter: metrics::Counter,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// How long the thread leaves spent notifications for a push to take ([`RECLAIM_WAIT`]).
    reclaim_wait: Duration,
}

impl<K: Object + Send + Sync + 'static> Listener<K> {
    /// Starts the handler's thread. `reclaim_wait` is how long it leaves the notifications it is
    /// done with for the next push to take back ([`RECLAIM_WAIT`] in an informer).
    #[allow(
        clippy::too_many_arguments,
        reason = "one internal constructor, called from the informer and its tests"
    )]
    pub(crate) fn spawn(
        id: u64,
        name: String,
        labels: Vec<metrics::Label>,
        handler: Arc<dyn ResourceEventHandler<K>>,
        resync_period: Option<Duration>,
        abort_on_panic: bool,
        policy: BufferPolicy,
        reclaim_wait: Duration,
    ) -> Arc<Self> {
        let backlog_gauge = metrics::gauge!(crate::metric_names::HANDLER_BACKLOG, labels.clone());
        let lag_gauge = metrics::gauge!(crate::metric_names::HANDLER_LAG_SECONDS, labels.clone());
        let panics_counter = metrics::counter!(crate::metric_names::HANDLER_PANICS, labels);
        let listener = Arc::new(Self {
            id,
            name,
            buffer: Mutex::new(Buffer {
                items: VecDeque::new(),
                head: 0,
                last_of_key: std::collections::HashMap::new(),
                stopping: None,
                spent: Vec::new(),
            }),
            wake: Condvar::new(),
            initial_pending: AtomicUsize::new(0),
            initial_pushed: AtomicBool::new(false),
            panics: AtomicU64::new(0),
            handled: AtomicU64::new(0),
            pending: AtomicUsize::new(0),
            dropping: AtomicBool::new(false),
            resync_period,
            abort_on_panic,
            policy,
            in_hand: Mutex::new(None),
            room: Mutex::new(None),
            backlog_gauge,
            lag_gauge,
            panics_counter,
            thread: Mutex::new(None),
            reclaim_wait,
        });
        let worker = Arc::clone(&listener);
        let thread = std::thread::Builder::new()
            .name(listener.name.clone())
            .spawn(move || worker.work(&*handler))
            .expect("spawning a handler thread");
        *listener.thread.lock() = Some(thread);
        listener
    }

    /// Queues a notification; never blocks on the handler.
    ///
    /// It also takes back the notifications the handler is done with, into `reclaimed`, for the
    /// caller to drop once it holds no lock. The object an update replaces usually dies with its
    /// notification, and the informer's side is where objects are decoded: freeing a pod there
    /// reuses the decoding threads' allocator caches, while freeing it on the handler's thread
    /// made the threads contend for the same allocator arenas (on dense pods, a decode took
    /// twice as long with another thread freeing the pods before it; docs/benchmarks.md).
    pub(crate) fn push(
        &self,
        notification: Notification<K>,
        initial: bool,
        reclaimed: &mut Vec<Notification<K>>,
    ) {
        let mut buffer = self.buffer.lock();
        if reclaimed.is_empty() {
            std::mem::swap(reclaimed, &mut buffer.spent);
        } else {
            reclaimed.append(&mut buffer.spent);
        }
        if self.policy == BufferPolicy::CoalescePerKey {
            let key = key_of(&notification);
            if let Some(&seq) = buffer.last_of_key.get(&key) {
                let at = usize::try_from(seq - buffer.head).unwrap_or(usize::MAX);
                if let Some(Item {
                    note: Note::Change(pending),
                    ..
                }) = buffer.items.get_mut(at)
                    && let Some(merged) = merge(pending, &notification)
                {
                    *pending = merged;
                    return;
                }
            }
            let seq = buffer.head + buffer.items.len() as u64;
            buffer.last_of_key.insert(key, seq);
        }
        if initial {
            self.initial_pending.fetch_add(1, Ordering::AcqRel);
        }
        let backlog = self.pending.fetch_add(1, Ordering::AcqRel) + 1;
        // The thread waits only on an empty buffer, so only the first push needs to wake it.
        let was_empty = buffer.items.is_empty();
        buffer.items.push_back(Item {
            note: Note::Change(notification),
            initial,
            queued: std::time::Instant::now(),
        });
        drop(buffer);
        self.backlog_gauge.set(backlog as f64);
        if was_empty {
            self.wake.notify_one();
        }
    }

    /// Queues a bookmark behind the notifications already queued; never blocks.
    pub(crate) fn push_bookmark(&self, resource_version: ResourceVersion) {
        let mut buffer = self.buffer.lock();
        let backlog = self.pending.fetch_add(1, Ordering::AcqRel) + 1;
        let was_empty = buffer.items.is_empty();
        buffer.items.push_back(Item {
            note: Note::Bookmark(resource_version),
            initial: false,
            queued: std::time::Instant::now(),
        });
        drop(buffer);
        self.backlog_gauge.set(backlog as f64);
        if was_empty {
            self.wake.notify_one();
        }
    }

    /// Ready for more notifications? Always, but under [`BufferPolicy::Backpressure`] with a
    /// full buffer, when the handler will wake `cx` once it has made room.
    pub(crate) fn poll_room(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        let BufferPolicy::Backpressure { capacity } = self.policy else {
            return std::task::Poll::Ready(());
        };
        if self.pending.load(Ordering::Acquire) < capacity {
            return std::task::Poll::Ready(());
        }
        *self.room.lock() = Some(cx.waker().clone());
        // The handler may have made room before the waker was in place.
        if self.pending.load(Ordering::Acquire) < capacity || self.dropping.load(Ordering::Acquire)
        {
            return std::task::Poll::Ready(());
        }
        std::task::Poll::Pending
    }

    /// Wakes a dispatcher waiting for room, whatever the buffer holds.
    pub(crate) fn wake_room(&self) {
        if let Some(waker) = self.room.lock().take() {
            waker.wake();
        }
    }

    /// How long the oldest notification not yet handled has waited.
    pub(crate) fn oldest_pending_age(&self) -> Option<Duration> {
        let in_hand = *self.in_hand.lock();
        let queued = self.buffer.lock().items.front().map(|i| i.queued);
        in_hand.or(queued).map(|t| t.elapsed())
    }

    pub(crate) fn mark_initial_pushed(&self) {
        self.initial_pushed.store(true, Ordering::Release);
    }

    /// Every initial notification was pushed and handled.
    pub(crate) fn has_synced(&self) -> bool {
        self.initial_pushed.load(Ordering::Acquire)
            && self.initial_pending.load(Ordering::Acquire) == 0
    }

    pub(crate) fn backlog(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    pub(crate) fn panics(&self) -> u64 {
        self.panics.load(Ordering::Relaxed)
    }

    pub(crate) fn handled(&self) -> u64 {
        self.handled.load(Ordering::Relaxed)
    }

    /// Stops the thread: after handling what is buffered (`drain`) or at once. Waits for it.
    pub(crate) fn stop(&self, drain: bool) {
        {
            let mut buffer = self.buffer.lock();
            buffer.stopping = Some(drain);
            if !drain {
                self.dropping.store(true, Ordering::Release);
                let dropped = buffer.items.len();
                buffer.head += dropped as u64;
                buffer.items.clear();
                buffer.last_of_key.clear();
                self.pending.fetch_sub(dropped, Ordering::AcqRel);
            }
        }
        if let Some(waker) = self.room.lock().take() {
            waker.wake();
        }
        self.wake.notify_one();
        let thread = self.thread.lock().take();
        if let Some(thread) = thread
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
    }

    /// Everything buffered, taken in one go (so the writer and this thread meet on the lock once
    /// per batch, not once per event); `None` once stopped and drained.
    ///
    /// The notifications of the last batch (`spent`) are left in the buffer for the next push
    /// to drop (see [`push`](Self::push)). If no push comes within [`RECLAIM_WAIT`], the
    /// informer is idle and this thread drops them itself, so that an idle informer does not
    /// hold the replaced objects of its last batch.
    fn next_batch(&self, batch: &mut VecDeque<Item<K>>, spent: &mut Vec<Notification<K>>) -> bool {
        self.hand_back(spent);
        let mut buffer = self.buffer.lock();
        loop {
            if !buffer.items.is_empty() {
                // What the handler takes can no longer be merged into.
                buffer.head += buffer.items.len() as u64;
                buffer.last_of_key.clear();
                std::mem::swap(&mut buffer.items, batch);
                return true;
            }
            if buffer.stopping.is_some() {
                let left = std::mem::take(&mut buffer.spent);
                drop(buffer);
                drop(left);
                return false;
            }
            if buffer.spent.is_empty() {
                self.wake.wait(&mut buffer);
            } else if self
                .wake
                .wait_for(&mut buffer, self.reclaim_wait)
                .timed_out()
                && buffer.items.is_empty()
            {
                let left = std::mem::take(&mut buffer.spent);
                drop(buffer);
                drop(left);
                buffer = self.buffer.lock();
            }
        }
    }

    fn work(&self, handler: &dyn ResourceEventHandler<K>) {
        let mut batch = VecDeque::new();
        let mut spent = Vec::new();
        while self.next_batch(&mut batch, &mut spent) {
            while let Some(item) = batch.pop_front() {
                if self.dropping.load(Ordering::Acquire) {
                    // Removed, or shut down without draining: drop the rest.
                    self.pending.fetch_sub(batch.len() + 1, Ordering::AcqRel);
                    batch.clear();
                    break;
                }
                if let Some(done) = self.handle(handler, item) {
                    spent.push(done);
                    if spent.len() >= SPENT_CHUNK {
                        self.hand_back(&mut spent);
                    }
                }
            }
        }
    }

    /// Leaves the notifications handled so far (at the end of a batch, and every
    /// [`SPENT_CHUNK`] within one) for the next push to take back and drop. What earlier hand-backs
    /// left is still there only if no push has taken it since; past [`SPENT_KEPT`] of them,
    /// nothing is pushing, and they are dropped here, outside the lock, as an idle handler
    /// thread drops its own.
    fn hand_back(&self, spent: &mut Vec<Notification<K>>) {
        let mut buffer = self.buffer.lock();
        if buffer.spent.len() + spent.len() <= SPENT_KEPT {
            buffer.spent.append(spent);
            return;
        }
        std::mem::swap(&mut buffer.spent, spent);
        drop(buffer);
        spent.clear();
    }

    /// Hands `item` to the handler; returns its notification, done with.
    fn handle(
        &self,
        handler: &dyn ResourceEventHandler<K>,
        item: Item<K>,
    ) -> Option<Notification<K>> {
        {
            *self.in_hand.lock() = Some(item.queued);
            self.lag_gauge.set(item.queued.elapsed().as_secs_f64());
            let outcome = catch_unwind(AssertUnwindSafe(|| match &item.note {
                Note::Change(Notification::Added {
                    object,
                    is_in_initial_list,
                }) => handler.on_add(object, *is_in_initial_list),
                Note::Change(Notification::Updated { old, new }) => handler.on_update(old, new),
                Note::Change(Notification::Deleted { object }) => handler.on_delete(object),
                Note::Bookmark(rv) => handler.on_bookmark(rv),
            }));
            if let Err(panic) = outcome {
                self.panics.fetch_add(1, Ordering::Relaxed);
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                let key = match &item.note {
                    Note::Change(n) => key_of(n).to_string(),
                    Note::Bookmark(rv) => format!("bookmark {rv}"),
                };
                tracing::error!(handler = %self.name, %key, %message, "event handler panicked");
                self.panics_counter.increment(1);
                if self.abort_on_panic {
                    tracing::error!(handler = %self.name, "aborting, as configured");
                    std::process::abort();
                }
            }
            self.handled.fetch_add(1, Ordering::Relaxed);
            if item.initial {
                self.initial_pending.fetch_sub(1, Ordering::AcqRel);
            }
            let backlog = self.pending.fetch_sub(1, Ordering::AcqRel) - 1;
            *self.in_hand.lock() = None;
            self.backlog_gauge.set(backlog as f64);
            if let BufferPolicy::Backpressure { capacity } = self.policy
                && backlog < capacity
                && let Some(waker) = self.room.lock().take()
            {
                waker.wake();
            }
        }
        match item.note {
            Note::Change(n) => Some(n),
            Note::Bookmark(_) => None,
        }
    }
}

/// A handler that sees only the objects `filter` accepts, as client-go's
/// `FilteringResourceEventHandler`: an update that brings an object into the filter is an add,
/// one that takes it out is a delete, and the rest pass or not as the filter says.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_core::Object;
/// use kinformer_shared_informer::{FilteringHandler, HandlerFns, ResourceEventHandler};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let web = FilteringHandler::new(
///     |pod: &Pod| pod.labels().get("app").is_some_and(|a| a == "web"),
///     HandlerFns::new()
///         .on_add(move |pod: &Arc<Pod>, _| log.lock().unwrap().push(format!("add {}", pod.name())))
///         .on_delete({
///             let log = seen.clone();
///             move |pod| log.lock().unwrap().push(format!("delete {}", pod.key()))
///         }),
/// );
/// let mut pod = Pod::default();
/// pod.metadata.name = Some("a".into());
/// pod.metadata.namespace = Some("shop".into());
/// let plain = Arc::new(pod.clone());
/// pod.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
/// let labelled = Arc::new(pod);
/// web.on_update(&plain, &labelled); // enters the filter: an add
/// web.on_update(&labelled, &plain); // leaves it: a delete
/// assert_eq!(*seen.lock().unwrap(), ["add a", "delete shop/a"]);
/// ```
pub struct FilteringHandler<K, F, H> {
    filter: F,
    inner: H,
    _objects: std::marker::PhantomData<fn(&K)>,
}

impl<K, F, H: fmt::Debug> fmt::Debug for FilteringHandler<K, F, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FilteringHandler")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<K, F, H> FilteringHandler<K, F, H>
where
    F: Fn(&K) -> bool,
{
    /// `inner`, shown only what `filter` accepts.
    pub fn new(filter: F, inner: H) -> Self {
        Self {
            filter,
            inner,
            _objects: std::marker::PhantomData,
        }
    }
}

impl<K, F, H> ResourceEventHandler<K> for FilteringHandler<K, F, H>
where
    K: Send + Sync + 'static,
    F: Fn(&K) -> bool + Send + Sync + 'static,
    H: ResourceEventHandler<K>,
{
    fn on_add(&self, object: &Arc<K>, is_in_initial_list: bool) {
        if (self.filter)(object) {
            self.inner.on_add(object, is_in_initial_list);
        }
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        match ((self.filter)(old), (self.filter)(new)) {
            (true, true) => self.inner.on_update(old, new),
            (false, true) => self.inner.on_add(new, false),
            (true, false) => self.inner.on_delete(&DeltaObject::Object(Arc::clone(old))),
            (false, false) => {}
        }
    }
    fn on_delete(&self, object: &DeltaObject<K>) {
        if (self.filter)(object.object()) {
            self.inner.on_delete(object);
        }
    }
}

/// A handler that forwards every notification into a channel: what
/// [`SharedIndexInformer::event_stream`](crate::SharedIndexInformer::event_stream) reads.
pub(crate) struct ChannelHandler<K>(pub(crate) tokio::sync::mpsc::UnboundedSender<Notification<K>>);

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for ChannelHandler<K> {
    fn on_add(&self, object: &Arc<K>, is_in_initial_list: bool) {
        let _ = self.0.send(Notification::Added {
            object: Arc::clone(object),
            is_in_initial_list,
        });
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let _ = self.0.send(Notification::Updated {
            old: Arc::clone(old),
            new: Arc::clone(new),
        });
    }
    fn on_delete(&self, object: &DeltaObject<K>) {
        let _ = self.0.send(Notification::Deleted {
            object: object.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Weak;

    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn pod(rv: &str) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                resource_version: Some(rv.into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        })
    }

    struct Ignore;
    impl ResourceEventHandler<Pod> for Ignore {}

    fn listener(reclaim_wait: Duration) -> Arc<Listener<Pod>> {
        Listener::spawn(
            1,
            "test".into(),
            Vec::new(),
            Arc::new(Ignore),
            None,
            false,
            BufferPolicy::Unbounded,
            reclaim_wait,
        )
    }

    /// A listener that waits `reclaim_wait` before it drops spent notifications itself, after it
    /// handled an update whose notification held the last reference to its old object; returns
    /// the listener, what its push took back (nothing yet) and the old object, weakly.
    fn handled_update(
        reclaim_wait: Duration,
    ) -> (Arc<Listener<Pod>>, Vec<Notification<Pod>>, Weak<Pod>) {
        let l = listener(reclaim_wait);
        let mut reclaimed = Vec::new();
        let old = pod("1");
        let weak = Arc::downgrade(&old);
        l.push(
            Notification::Updated { old, new: pod("2") },
            false,
            &mut reclaimed,
        );
        eventually("the handler handles the update", || l.handled() == 1);
        (l, reclaimed, weak)
    }

    /// Waits, up to ten seconds, until `done`; panics naming `what` if it never is.
    fn eventually(what: &str, done: impl Fn() -> bool) {
        for _ in 0..10_000 {
            if done() {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("never: {what}");
    }

    #[test]
    fn the_next_push_takes_back_what_the_handler_is_done_with() {
        let (l, mut reclaimed, old) = handled_update(Duration::from_secs(3600));
        assert!(reclaimed.is_empty());
        // Handled, and neither freed on the handler's thread nor lost.
        assert!(old.upgrade().is_some());
        l.push(
            Notification::Added {
                object: pod("3"),
                is_in_initial_list: false,
            },
            false,
            &mut reclaimed,
        );
        assert_eq!(reclaimed.len(), 1, "the spent update came back");
        assert!(old.upgrade().is_some());
        reclaimed.clear();
        assert!(
            old.upgrade().is_none(),
            "it died where the pusher dropped it"
        );
        l.stop(true);
    }

    #[test]
    fn an_idle_handler_drops_what_it_is_done_with_itself() {
        let (l, reclaimed, old) = handled_update(Duration::from_millis(10));
        eventually(
            "an idle handler thread drops its spent notification",
            || old.upgrade().is_none(),
        );
        assert!(reclaimed.is_empty());
        l.stop(true);
    }

    /// A handler that blocks in each update (by its new object's resourceVersion) and each
    /// bookmark whose version is in `holds`: it says which on `entered`, then waits for a
    /// message on `release`.
    struct HoldAt {
        holds: Vec<String>,
        entered: std::sync::Mutex<std::sync::mpsc::Sender<String>>,
        release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    }
    impl HoldAt {
        fn maybe_hold(&self, rv: &str) {
            if self.holds.iter().any(|h| h == rv) {
                let _ = self.entered.lock().unwrap().send(rv.to_owned());
                let _ = self.release.lock().unwrap().recv();
            }
        }
    }
    impl ResourceEventHandler<Pod> for HoldAt {
        fn on_update(&self, _old: &Arc<Pod>, new: &Arc<Pod>) {
            self.maybe_hold(new.metadata.resource_version.as_deref().unwrap_or_default());
        }
        fn on_bookmark(&self, resource_version: &ResourceVersion) {
            self.maybe_hold(resource_version.as_str());
        }
    }

    /// A listener whose handler is held in the middle of one batch of updates, each of which
    /// replaced an object held by nothing else.
    struct HeldBatch {
        l: Arc<Listener<Pod>>,
        /// What the pushes took back.
        reclaimed: Vec<Notification<Pod>>,
        /// The replaced objects, weakly, in the order pushed.
        replaced: Vec<Weak<Pod>>,
        /// Lets the handler go on.
        release: std::sync::mpsc::Sender<()>,
    }

    /// A [`HeldBatch`] of `n` updates, the handler held on the one numbered `hold` (from 0).
    fn batch_held_at(n: usize, hold: usize) -> HeldBatch {
        let (entered, entering) = std::sync::mpsc::channel();
        let (release, waiting) = std::sync::mpsc::channel();
        let l = Listener::spawn(
            1,
            "test".into(),
            Vec::new(),
            Arc::new(HoldAt {
                holds: vec!["gate".to_owned(), format!("new-{hold}")],
                entered: std::sync::Mutex::new(entered),
                release: std::sync::Mutex::new(waiting),
            }),
            None,
            false,
            BufferPolicy::Unbounded,
            // Never by the idle path: whatever is dropped here is the hand-backs' doing.
            Duration::from_secs(3600),
        );
        let mut reclaimed = Vec::new();
        // A bookmark first holds the handler while the updates are buffered, so that it takes
        // them as one batch once it is let go; a bookmark leaves no notification to hand back.
        l.push_bookmark(ResourceVersion::from("gate"));
        assert_eq!(entering.recv().unwrap(), "gate");
        let mut replaced = Vec::new();
        for i in 0..n {
            let old = pod(&format!("old-{i}"));
            replaced.push(Arc::downgrade(&old));
            l.push(
                Notification::Updated {
                    old,
                    new: pod(&format!("new-{i}")),
                },
                false,
                &mut reclaimed,
            );
        }
        assert!(
            reclaimed.is_empty(),
            "nothing was handled before the pushes"
        );
        release.send(()).unwrap();
        assert_eq!(entering.recv().unwrap(), format!("new-{hold}"));
        HeldBatch {
            l,
            reclaimed,
            replaced,
            release,
        }
    }

    #[test]
    fn a_long_batch_lets_go_of_what_it_has_handled_as_it_goes() {
        let n = SPENT_KEPT + 4 * SPENT_CHUNK;
        let hold = SPENT_KEPT + 2 * SPENT_CHUNK + 5;
        let HeldBatch {
            l,
            reclaimed,
            replaced,
            release,
        } = batch_held_at(n, hold);
        // The bookmark and the updates before the one held.
        assert_eq!(l.handled(), hold as u64 + 1);
        // Handed back a chunk at a time with no push between: the first SPENT_KEPT waited for
        // a push, the next chunk found no room and dropped them, and the one after joined it.
        // So only the last two chunks handed back and the updates handled since are alive.
        let alive: Vec<usize> = (0..hold)
            .filter(|&i| replaced[i].upgrade().is_some())
            .collect();
        assert_eq!(
            alive,
            (SPENT_KEPT..hold).collect::<Vec<_>>(),
            "the replaced objects of the handled updates are let go of a chunk at a time"
        );
        assert!(
            replaced[hold..].iter().all(|w| w.upgrade().is_some()),
            "what is not handled yet is kept"
        );
        release.send(()).unwrap();
        eventually("the batch is done", || l.handled() == n as u64 + 1);
        l.stop(true);
        drop(reclaimed);
        assert!(replaced.iter().all(|w| w.upgrade().is_none()));
    }

    #[test]
    fn a_push_during_a_long_batch_takes_back_the_chunk_handed_back() {
        let hold = SPENT_CHUNK + 3;
        let HeldBatch {
            l,
            mut reclaimed,
            replaced,
            release,
        } = batch_held_at(2 * SPENT_CHUNK, hold);
        l.push(
            Notification::Added {
                object: pod("late"),
                is_in_initial_list: false,
            },
            false,
            &mut reclaimed,
        );
        assert_eq!(
            reclaimed.len(),
            SPENT_CHUNK,
            "the chunk handed back came back"
        );
        assert!(
            replaced[..SPENT_CHUNK]
                .iter()
                .all(|w| w.upgrade().is_some())
        );
        reclaimed.clear();
        assert!(
            replaced[..SPENT_CHUNK]
                .iter()
                .all(|w| w.upgrade().is_none()),
            "they died where the pusher dropped them"
        );
        release.send(()).unwrap();
        l.stop(true);
    }

    #[test]
    fn stopping_drops_what_the_handler_is_done_with() {
        let (l, _, old) = handled_update(Duration::from_secs(3600));
        l.stop(true);
        assert!(old.upgrade().is_none());
    }
}
