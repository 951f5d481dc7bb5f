//! The shared index informer: one event source, one queue, one cache, many handlers.

use std::collections::HashSet;
use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use kinformer_core::{
    CacheWrite, DeltaQueue, Notification, Object, Popped, ReflectorStore, ResourceVersion,
    StoreError, StoreEvent, apply_popped,
};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::Error;
use crate::freshness::{self, Freshness, FreshnessError};
use crate::handler::{Listener, ResourceEventHandler};

/// The source of an informer: any stream of store events, normally the reflector's
/// `watcher(api, config)`.
pub type StoreEvents<K> = Pin<Box<dyn Stream<Item = StoreEvent<K>> + Send>>;

/// The smallest resync period a handler can ask for, as client-go.
pub const MIN_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// A function applied once to every object before it is stored (for example to drop
/// `managedFields`); never to tombstones, never on a resync.
pub type Transform<K> = Arc<dyn Fn(Arc<K>) -> Arc<K> + Send + Sync>;

/// How a [`SharedIndexInformer`] behaves. Build it with struct update syntax from `Default`.
#[derive(Clone)]
pub struct InformerConfig<K> {
    /// The informer's name, in logs and in its handlers' names (`pods#0`); normally the
    /// resource's.
    pub name: String,
    /// The resource, for the `resource` label of the informer's metrics (`pods`,
    /// `deployments.apps`); empty (the default): the name.
    pub resource: String,
    /// The resync period of handlers added without one, and the informer's first resync check
    /// period (handlers added before the start with a shorter period shorten it); `None` (the
    /// default): no resync.
    pub resync_period: Option<Duration>,
    /// Applied once to each object before it is stored.
    pub transform: Option<Transform<K>>,
    /// On shutdown, let each handler finish what its buffer holds (`true`, the default) or drop it.
    pub drain_on_shutdown: bool,
    /// Abort the process when a handler panics, as client-go does; `false` (the default) logs,
    /// counts, and goes on.
    pub abort_on_handler_panic: bool,
    /// How each handler's buffer behaves when the handler falls behind (unbounded by default).
    pub handler_buffer: crate::BufferPolicy,
    /// The source merges several watches (a partitioned source: shard ranges, namespaces), whose
    /// events' versions are in no one order: the cache's version (what [`Freshness`] compares
    /// writes with) then moves only with list ends and bookmarks, which the merge sends at the
    /// lowest version every watch has reached. `false` (the default): every event moves it.
    pub merged_source: bool,
}

impl<K> Default for InformerConfig<K> {
    fn default() -> Self {
        Self {
            name: "informer".to_owned(),
            resource: String::new(),
            resync_period: None,
            transform: None,
            drain_on_shutdown: true,
            abort_on_handler_panic: false,
            handler_buffer: crate::BufferPolicy::Unbounded,
            merged_source: false,
        }
    }
}

impl<K> fmt::Debug for InformerConfig<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerConfig")
            .field("name", &self.name)
            .field("resource", &self.resource)
            .field("resync_period", &self.resync_period)
            .field("transform", &self.transform.is_some())
            .field("drain_on_shutdown", &self.drain_on_shutdown)
            .field("abort_on_handler_panic", &self.abort_on_handler_panic)
            .field("handler_buffer", &self.handler_buffer)
            .field("merged_source", &self.merged_source)
            .finish()
    }
}

struct Handlers<K> {
    listeners: Vec<Arc<Listener<K>>>,
    /// Listeners due for the resync being delivered (client-go's `syncingListeners`).
    syncing: HashSet<u64>,
    next_resync: Vec<(u64, Instant)>,
    next_id: u64,
    /// The first list has been handed to the listeners.
    initial_done: bool,
    /// The informer has started: handlers added now get the cache replayed.
    started: bool,
}

struct Inner<K> {
    handlers: Mutex<Handlers<K>>,
    synced: watch::Sender<bool>,
    stop: watch::Sender<bool>,
    done: watch::Sender<bool>,
    /// The period of handlers added without their own.
    resync_period: Option<Duration>,
    /// How often the informer checks whether a handler is due for a resync.
    check_period: Mutex<Option<Duration>>,
    /// The resourceVersion the queue has caught up to (the buffer is reused).
    last_sync: Mutex<Option<String>>,
    /// The resourceVersion the cache has reached, and the writes waiting to be read back.
    freshness: Arc<freshness::State>,
    transform: Option<Transform<K>>,
    drain_on_shutdown: bool,
    abort_on_panic: bool,
    buffer_policy: crate::BufferPolicy,
    /// Only list ends and bookmarks move the cache's version ([`InformerConfig::merged_source`]).
    merged_source: bool,
    gauges: Gauges,
}

/// The informer's gauges ([`metric_names`](crate::metric_names)), made once: the hot path only
/// stores a number into each.
struct Gauges {
    cache_objects: metrics::Gauge,
    cache_resource_version: metrics::Gauge,
    bookmark_resource_version: metrics::Gauge,
    queue_depth: metrics::Gauge,
    queue_oldest_age: metrics::Gauge,
    time_to_first_sync: metrics::Gauge,
    /// Objects in the cache, as the notifications count them (each `Added` is a key the cache
    /// did not hold, each `Deleted` one it held): no walk of the cache.
    objects: AtomicI64,
    /// When [`SharedIndexInformer::run`] started.
    started: OnceLock<std::time::Instant>,
    /// `[informer, resource]`, which each handler's metrics carry too (and `resource()` reads).
    labels: [metrics::Label; 2],
}

impl Gauges {
    fn new(name: &str, resource: &str) -> Self {
        use crate::metric_names as n;
        let resource = if resource.is_empty() { name } else { resource };
        let labels = [
            metrics::Label::new("informer", name.to_owned()),
            metrics::Label::new("resource", resource.to_owned()),
        ];
        let gauge = |name: &'static str| metrics::gauge!(name, labels.to_vec());
        Self {
            cache_objects: gauge(n::CACHE_OBJECTS),
            cache_resource_version: gauge(n::CACHE_RESOURCE_VERSION),
            bookmark_resource_version: gauge(n::BOOKMARK_RESOURCE_VERSION),
            queue_depth: gauge(n::QUEUE_DEPTH),
            queue_oldest_age: gauge(n::QUEUE_OLDEST_AGE_SECONDS),
            time_to_first_sync: gauge(n::TIME_TO_FIRST_SYNC_SECONDS),
            objects: AtomicI64::new(0),
            started: OnceLock::new(),
            labels,
        }
    }

    /// Sets a version gauge: versions are decimal integers (KEP-5504); an opaque one is skipped.
    fn version(gauge: &metrics::Gauge, rv: &str) {
        if let Ok(v) = rv.parse::<u64>() {
            gauge.set(v as f64);
        }
    }

    /// The queue's depth and oldest item, after a pop.
    fn queue<K: Object, Q: DeltaQueue<K> + ?Sized>(&self, queue: &Q) {
        self.queue_depth.set(queue.depth() as f64);
        self.queue_oldest_age
            .set(queue.oldest_age().map_or(0.0, |age| age.as_secs_f64()));
    }
}

/// One list/watch of a resource shared by many handlers: client-go's `SharedIndexInformer`.
///
/// It pulls a stream of [`StoreEvent`]s (normally the reflector's `watcher`) into a queue
/// (normally the delta FIFO), only while the queue is ready for another write, so backpressure
/// reaches the source; pops the queue into a cache (normally the indexer) by the consumer
/// contract; and hands each change to every handler after the cache holds it. Each layer is a
/// core trait or a stream, so any of them can be replaced: this crate names no other layer.
///
/// Handlers run on threads of their own with unbounded buffers, as client-go's listeners do: a
/// slow or stuck handler never delays the cache, the other handlers or the watch.
pub struct SharedIndexInformer<K, Q, C> {
    events: Mutex<Option<StoreEvents<K>>>,
    queue: Arc<Q>,
    cache: Arc<C>,
    name: String,
    inner: Arc<Inner<K>>,
    running: AtomicBool,
}

impl<K, Q, C> fmt::Debug for SharedIndexInformer<K, Q, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedIndexInformer")
            .field("name", &self.name)
            .field("synced", &*self.inner.synced.borrow())
            .finish_non_exhaustive()
    }
}

/// A handler's registration with an informer: its own `has_synced`, and its removal.
pub struct Registration<K> {
    listener: Arc<Listener<K>>,
    inner: std::sync::Weak<Inner<K>>,
}

impl<K> fmt::Debug for Registration<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("handler", &self.listener.name)
            .finish_non_exhaustive()
    }
}

impl<K: Object + Send + Sync + 'static> Registration<K> {
    /// `true` once this handler has handled every object of the informer's first list (or,
    /// when added later, every object the cache held when it was added).
    pub fn has_synced(&self) -> bool {
        self.listener.has_synced()
    }

    /// Notifications waiting in this handler's buffer: its lag, in events.
    pub fn backlog(&self) -> usize {
        self.listener.backlog()
    }

    /// Notifications this handler has been called with.
    pub fn handled(&self) -> u64 {
        self.listener.handled()
    }

    /// How long the oldest notification this handler has not yet handled has waited; `None`
    /// when it has handled everything.
    pub fn oldest_pending_age(&self) -> Option<Duration> {
        self.listener.oldest_pending_age()
    }

    /// Times this handler panicked.
    pub fn panics(&self) -> u64 {
        self.listener.panics()
    }

    /// Removes the handler: it gets nothing more, and what its buffer holds is dropped. Waits
    /// for its thread to stop. Idempotent.
    pub fn remove(&self) {
        if let Some(inner) = self.inner.upgrade() {
            let mut handlers = inner.handlers.lock();
            handlers.listeners.retain(|l| l.id != self.listener.id);
            handlers
                .next_resync
                .retain(|(id, _)| *id != self.listener.id);
            handlers.syncing.remove(&self.listener.id);
        }
        self.listener.stop(false);
    }
}

impl<K, Q, C> SharedIndexInformer<K, Q, C>
where
    K: Object + Send + Sync + 'static,
    Q: DeltaQueue<K> + ReflectorStore<K> + 'static,
    C: CacheWrite<K> + 'static,
{
    /// An informer fed by `events` (normally `kinformer_reflector::watcher(api, config)`; any
    /// stream of [`StoreEvent`]s will do), that queues into `queue` and keeps `cache`. The queue
    /// must consult the cache as its known objects where it needs them (the delta FIFO's
    /// `known_objects`). The stream is polled only by [`run`](Self::run), and only while the
    /// queue is ready; when it ends, the cache stays as it is until shutdown.
    pub fn new(
        events: impl Stream<Item = StoreEvent<K>> + Send + 'static,
        queue: Arc<Q>,
        cache: Arc<C>,
        config: InformerConfig<K>,
    ) -> Self {
        let gauges = Gauges::new(&config.name, &config.resource);
        Self {
            events: Mutex::new(Some(Box::pin(events))),
            queue,
            cache,
            name: config.name,
            inner: Arc::new(Inner {
                handlers: Mutex::new(Handlers {
                    listeners: Vec::new(),
                    syncing: HashSet::new(),
                    next_resync: Vec::new(),
                    next_id: 0,
                    initial_done: false,
                    started: false,
                }),
                synced: watch::channel(false).0,
                stop: watch::channel(false).0,
                done: watch::channel(false).0,
                resync_period: config.resync_period,
                check_period: Mutex::new(config.resync_period),
                last_sync: Mutex::new(None),
                freshness: Arc::new(freshness::State::new()),
                transform: config.transform,
                drain_on_shutdown: config.drain_on_shutdown,
                abort_on_panic: config.abort_on_handler_panic,
                buffer_policy: config.handler_buffer,
                merged_source: config.merged_source,
                gauges,
            }),
            running: AtomicBool::new(false),
        }
    }

    /// The cache: read it (or hand it to a lister) from anywhere.
    pub fn cache(&self) -> &Arc<C> {
        &self.cache
    }

    /// `true` once the first list has been stored and handed to the handlers.
    pub fn has_synced(&self) -> bool {
        *self.inner.synced.borrow()
    }

    /// Waits until the informer has synced (`true`), or has been shut down first (`false`).
    pub async fn wait_synced(&self) -> bool {
        wait_synced(&self.inner).await
    }

    /// `true` once [`shutdown`](Self::shutdown) has been called.
    pub fn is_stopped(&self) -> bool {
        *self.inner.stop.borrow()
    }

    /// The resourceVersion the queue has caught up to: the last list's, event's or bookmark's
    /// it has taken (client-go's `LastSyncResourceVersion`). `None` until the first list is
    /// complete.
    pub fn last_sync_resource_version(&self) -> Option<ResourceVersion> {
        self.inner
            .last_sync
            .lock()
            .as_deref()
            .map(ResourceVersion::from)
    }

    /// The resourceVersion the cache has reached: it holds every change up to this version
    /// (the last list's, event's or bookmark's the consumer has applied). `None` before the
    /// first list is stored. With the classic queue it moves only when the queue is empty.
    pub fn cache_resource_version(&self) -> Option<ResourceVersion> {
        self.inner.freshness.reached()
    }

    /// Waits until the cache has reached `resource_version` (every change up to it is in the
    /// cache and has been handed to the handlers), at most `timeout`. Versions are compared as
    /// integers, as Kubernetes 1.35 allows (KEP-5504).
    ///
    /// # Errors
    /// [`FreshnessError::NotComparable`] for an opaque version (this one, or the cache's),
    /// [`FreshnessError::Timeout`] naming where the cache got to, [`FreshnessError::Stopped`]
    /// when the informer is shut down first.
    pub async fn wait_until_fresh(
        &self,
        resource_version: &ResourceVersion,
        timeout: Duration,
    ) -> Result<(), FreshnessError> {
        freshness::wait_until(
            &self.inner.freshness,
            &self.name,
            self.inner.stop.subscribe(),
            resource_version,
            timeout,
        )
        .await
    }

    /// The transform applied to each object before it is stored, if any.
    pub fn transform(&self) -> Option<Transform<K>> {
        self.inner.transform.clone()
    }

    /// The cache's objects with the exact version they stand at, read in one step with the
    /// consumer's writes: the list a server would answer at that version (for a consistency
    /// check). `None` before the first list, and with a queue that drops bookmarks (the classic
    /// one), whose cache version is only a lower bound.
    pub fn snapshot(&self) -> Option<(ResourceVersion, Vec<Arc<K>>)> {
        if !self.queue.passes_bookmarks() {
            return None;
        }
        // The consumer applies a pop and moves the version under this lock.
        let _handlers = self.inner.handlers.lock();
        let reached = self.inner.freshness.reached()?;
        Some((reached, self.cache.list()))
    }

    /// The resource its metrics are labelled with (`InformerConfig::resource`, else the name).
    pub fn resource(&self) -> &str {
        self.inner.gauges.labels[1].value()
    }

    /// Read-your-writes for this informer's cache: record the version each write returned, and
    /// ask whether the cache has caught up with it for that key (see [`Freshness`]).
    pub fn freshness(&self) -> Freshness {
        let cache = Arc::clone(&self.cache);
        Freshness::new(
            Arc::clone(&self.inner.freshness),
            &self.name,
            self.resource(),
            Arc::new(move |key: &str| {
                cache
                    .get_by_key(key)
                    .and_then(|o| o.resource_version().map(ResourceVersion::from))
            }),
        )
    }

    /// Adds a handler with the informer's resync period ([`InformerConfig::resync_period`]),
    /// whatever periods handlers added before it asked for, as client-go's `AddEventHandler`.
    ///
    /// # Errors
    /// [`Error::Stopped`] once the informer has been shut down: the handler would never hear
    /// anything, and its thread would never stop.
    pub fn add_handler(
        &self,
        handler: impl ResourceEventHandler<K>,
    ) -> Result<Registration<K>, Error> {
        self.add_handler_with_resync(handler, self.inner.resync_period)
    }

    /// Adds a handler with its own resync period, by client-go's rules: at least
    /// [`MIN_RESYNC_PERIOD`]; once the informer runs, at least its check period, and none when
    /// it has none. A handler added after the informer started first gets `on_add(obj, true)`
    /// for every cached object, then live events, with no gap and no duplicate.
    ///
    /// # Errors
    /// [`Error::Stopped`] once the informer has been shut down.
    pub fn add_handler_with_resync(
        &self,
        handler: impl ResourceEventHandler<K>,
        resync: Option<Duration>,
    ) -> Result<Registration<K>, Error> {
        let mut handlers = self.inner.handlers.lock();
        if self.is_stopped() {
            return Err(Error::Stopped {
                informer: self.name.clone(),
            });
        }
        let mut check = self.inner.check_period.lock();
        let period = match resync.map(|p| p.max(MIN_RESYNC_PERIOD)) {
            None => None,
            Some(p) if handlers.started => match *check {
                None => {
                    tracing::warn!(
                        "the informer has no resync; the handler's resync period is ignored"
                    );
                    None
                }
                Some(c) => Some(p.max(c)),
            },
            Some(p) => {
                *check = Some(check.map_or(p, |c| c.min(p)));
                Some(p)
            }
        };
        drop(check);
        let id = handlers.next_id;
        handlers.next_id += 1;
        let name = format!("{}#{id}", self.name);
        let mut labels = self.inner.gauges.labels.to_vec();
        labels.push(metrics::Label::new("handler", name.clone()));
        let listener = Listener::spawn(
            id,
            name,
            labels,
            Arc::new(handler),
            period,
            self.inner.abort_on_panic,
            self.inner.buffer_policy,
            crate::handler::RECLAIM_WAIT,
        );
        if handlers.started {
            // The cache and the distribution both change under the handlers' lock, so the
            // replay and the live events meet with no gap and no duplicate.
            // The new handler gives back only replayed objects, which the cache holds too.
            let mut reclaimed = Vec::new();
            self.cache.for_each(&mut |object| {
                listener.push(
                    Notification::Added {
                        object: Arc::clone(object),
                        is_in_initial_list: true,
                    },
                    true,
                    &mut reclaimed,
                );
            });
        }
        if handlers.initial_done {
            listener.mark_initial_pushed();
        }
        if let Some(p) = period {
            handlers.next_resync.push((id, Instant::now() + p));
        }
        handlers.listeners.push(Arc::clone(&listener));
        Ok(Registration {
            listener,
            inner: Arc::downgrade(&self.inner),
        })
    }

    /// Every notification as a `Stream`, for code that prefers `.next().await` to callbacks: a
    /// handler (with the informer's resync period) whose buffer is the stream. Dropping the
    /// stream removes the handler.
    ///
    /// # Errors
    /// [`Error::Stopped`] once the informer has been shut down.
    pub fn event_stream(&self) -> Result<EventStream<K>, Error> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let registration = self.add_handler(crate::handler::ChannelHandler(tx))?;
        Ok(EventStream { rx, registration })
    }

    /// Runs the informer until [`shutdown`](Self::shutdown): the event stream fills the queue,
    /// and each popped item is stored in the cache and handed to the handlers. Runs once; a
    /// second call returns at once.
    pub async fn run(&self) {
        if self.running.swap(true, Ordering::SeqCst) {
            return;
        }
        let Some(events) = self.events.lock().take() else {
            return;
        };
        self.inner.handlers.lock().started = true;
        let _ = self.inner.gauges.started.set(std::time::Instant::now());

        let mut stop = self.inner.stop.subscribe();
        let stopper = async {
            let _ = stop.wait_for(|s| *s).await;
            self.queue.close();
            // A dispatcher waiting for room in a full buffer goes on to drain the queue.
            for l in &self.inner.handlers.lock().listeners {
                l.wake_room();
            }
        };
        tokio::join!(self.produce(events), self.consume(), stopper);
        let listeners: Vec<_> = self.inner.handlers.lock().listeners.drain(..).collect();
        let drain = self.inner.drain_on_shutdown;
        // Joining handler threads blocks: do it off the async threads.
        let _ = tokio::task::spawn_blocking(move || {
            for l in listeners {
                l.stop(drain);
            }
        })
        .await;
        self.inner.done.send_replace(true);
    }

    /// Stops the watch, closes the queue, lets the handlers drain their buffers (or drops them,
    /// as configured) and waits until [`run`](Self::run) has returned and every handler thread
    /// has stopped. Idempotent; returns at once if the informer never ran.
    pub async fn shutdown(&self) {
        self.inner.stop.send_replace(true);
        if !self.running.load(Ordering::SeqCst) {
            return;
        }
        let mut done = self.inner.done.subscribe();
        let _ = done.wait_for(|d| *d).await;
    }

    /// Pulls the event stream into the queue, one event each time the queue is ready, and
    /// injects resyncs on the check period. Returns on shutdown (dropping the stream, which
    /// stops a reflector behind it and abandons its relist) or when the queue is closed.
    async fn produce(&self, mut events: StoreEvents<K>) {
        let mut stop = self.inner.stop.subscribe();
        let mut next_resync: Option<Instant> = None;
        let mut source_open = true;
        loop {
            let queue: &Q = &self.queue;
            let ready = tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => return,
                ready = poll_fn(|cx| queue.poll_ready(cx)) => ready,
            };
            if ready.is_err() {
                return;
            }
            let resync_at = next_resync;
            let event = tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => return,
                event = poll_fn(|cx| events.as_mut().poll_next(cx)), if source_open => match event {
                    Some(event) => event,
                    None => {
                        tracing::debug!(informer = %self.name, "the event stream ended; the cache stays as it is");
                        source_open = false;
                        continue;
                    }
                },
                () = sleep_until_some(resync_at) => StoreEvent::Resync,
            };
            let ends_list = matches!(event, StoreEvent::RelistEnd(_));
            if matches!(event, StoreEvent::Resync) {
                next_resync = self.next_check();
            }
            match self.write(event) {
                Ok(()) => {}
                Err(StoreError::Closed) => return,
                Err(e) => {
                    tracing::error!(informer = %self.name, error = %e, "the queue refused an event")
                }
            }
            if ends_list {
                // As client-go's reflector: the resync clock starts with each watch.
                next_resync = self.next_check();
            }
        }
    }

    fn next_check(&self) -> Option<Instant> {
        self.inner.check_period.lock().map(|p| Instant::now() + p)
    }

    /// One event into the queue: transformed, resyncs only when a handler is due, then the
    /// version caught up to and the first sync noted.
    fn write(&self, event: StoreEvent<K>) -> Result<(), StoreError> {
        let event = match &self.inner.transform {
            Some(t) => event.map_objects(|o| t(o)),
            None => event,
        };
        let marker = match &event {
            StoreEvent::Resync => {
                if !due_for_resync(&self.inner) {
                    return Ok(());
                }
                None
            }
            // A page carries no version, and its objects stay where they go.
            StoreEvent::RelistBegin | StoreEvent::RelistPage(_) | StoreEvent::RelistAbandoned => {
                None
            }
            other => Some(other.clone()),
        };
        let bookmark = match &event {
            StoreEvent::Bookmark(rv) if !self.queue.passes_bookmarks() => Some(rv.clone()),
            _ => None,
        };
        self.queue.apply(event)?;
        // A queue that drops bookmarks: an empty one means the cache holds everything up to
        // the bookmark (a pop is applied before the queue's lock is released).
        if let Some(rv) = &bookmark {
            Gauges::version(&self.inner.gauges.bookmark_resource_version, rv.as_str());
        }
        if let Some(rv) = bookmark
            && self.queue.depth() == 0
        {
            self.inner.freshness.advance(&rv);
            if let Some(reached) = self.inner.freshness.reached() {
                Gauges::version(&self.inner.gauges.cache_resource_version, reached.as_str());
            }
        }
        let Some(marker) = marker else {
            return Ok(());
        };
        // A bookmark (or an object) without a version moves nothing.
        if let Some(rv) = marker.synced_resource_version().filter(|rv| !rv.is_empty()) {
            let mut last = self.inner.last_sync.lock();
            match &mut *last {
                Some(held) => {
                    held.clear();
                    held.push_str(rv);
                }
                None => *last = Some(rv.to_owned()),
            }
        }
        if matches!(marker, StoreEvent::RelistEnd(_)) {
            // A first list that queued nothing (an empty list into the classic FIFO) leaves the
            // consumer nothing to pop: the informer is synced now.
            mark_synced(&self.inner, &*self.queue);
        }
        Ok(())
    }

    async fn consume(&self) {
        let queue: &Q = &self.queue;
        let cache: &C = &self.cache;
        let inner = &self.inner;
        // What the handlers are done with, dropped here after each pop, outside every lock.
        let mut reclaimed = Vec::new();
        loop {
            // Backpressure: wait while a bounded handler buffer is full.
            poll_fn(|cx: &mut Context<'_>| {
                if *inner.stop.borrow() {
                    return Poll::Ready(());
                }
                let handlers = inner.handlers.lock();
                for l in &handlers.listeners {
                    if l.poll_room(cx).is_pending() {
                        return Poll::Pending;
                    }
                }
                Poll::Ready(())
            })
            .await;
            let mut done = None;
            let open = poll_fn(|cx: &mut Context<'_>| -> Poll<bool> {
                queue.poll_pop(cx, &mut |popped| {
                    distribute(inner, cache, &popped, &mut reclaimed);
                    done = Some(popped);
                })
            })
            .await;
            // The classic queue pops by key: its cache has reached what was queued only once
            // nothing is left in it.
            if matches!(done, Some(Popped::Key(_)))
                && queue.depth() == 0
                && let Some(rv) = self.last_sync_resource_version()
            {
                inner.freshness.advance(&rv);
                if let Some(reached) = inner.freshness.reached() {
                    Gauges::version(&inner.gauges.cache_resource_version, reached.as_str());
                }
            }
            if done.is_some() {
                inner.gauges.queue(queue);
            }
            // The queue's lock is released: drop what was popped and what the handlers gave back
            // here, where the writer cannot be waiting on it.
            drop(done);
            reclaimed.clear();
            if !open {
                return;
            }
            // Outside the queue's lock: its `has_synced` takes it.
            mark_synced(inner, queue);
        }
    }
}

/// Declares the informer synced once the queue is: its first list has been popped and handed
/// out. Idempotent.
fn mark_synced<K: Object, Q: DeltaQueue<K>>(inner: &Inner<K>, queue: &Q) {
    if *inner.synced.borrow() || !queue.has_synced() {
        return;
    }
    let mut handlers = inner.handlers.lock();
    handlers.initial_done = true;
    for l in &handlers.listeners {
        l.mark_initial_pushed();
    }
    drop(handlers);
    inner.synced.send_replace(true);
    if let Some(started) = inner.gauges.started.get() {
        inner
            .gauges
            .time_to_first_sync
            .set(started.elapsed().as_secs_f64());
    }
}

/// Stores a popped item and hands what changed to the listeners, under the handlers' lock.
fn distribute<K: Object + Send + Sync + 'static>(
    inner: &Inner<K>,
    cache: &dyn CacheWrite<K>,
    popped: &Popped<K>,
    reclaimed: &mut Vec<Notification<K>>,
) {
    let handlers = inner.handlers.lock();
    let applied = apply_popped(popped, cache);
    for e in applied.errors {
        tracing::warn!(error = %e, "the cache refused a write");
    }
    // The cache now holds everything up to this version: in order, what was popped last.
    let reached = match popped {
        // A merged source's events come from several watches: one's version says nothing of
        // the others'.
        Popped::Batch(_) if inner.merged_source => None,
        Popped::Batch(deltas) => deltas
            .last()
            .and_then(|d| d.object.object().resource_version()),
        Popped::Replace(step) => Some(step.resource_version.as_str()),
        Popped::Bookmark(rv) => {
            for listener in &handlers.listeners {
                listener.push_bookmark(rv.clone());
            }
            Gauges::version(&inner.gauges.bookmark_resource_version, rv.as_str());
            Some(rv.as_str())
        }
        Popped::Key(_) | Popped::Resync => None,
    };
    if let Some(rv) = reached.filter(|rv| !rv.is_empty()) {
        inner.freshness.set(&ResourceVersion::from(rv));
        Gauges::version(&inner.gauges.cache_resource_version, rv);
    }
    let forget = inner.freshness.has_writes();
    let mut objects = 0i64;
    for notification in applied.notifications {
        match &notification {
            Notification::Added { .. } => objects += 1,
            Notification::Deleted { .. } => objects -= 1,
            Notification::Updated { .. } => {}
        }
        if forget && let Notification::Deleted { object } = &notification {
            inner.freshness.forget(object.key().as_str());
        }
        let is_sync = matches!(
            &notification,
            Notification::Updated { old, new }
                if old.resource_version() == new.resource_version()
        );
        let initial = matches!(
            notification,
            Notification::Added {
                is_in_initial_list: true,
                ..
            }
        );
        for listener in &handlers.listeners {
            if is_sync && !handlers.syncing.contains(&listener.id) {
                continue;
            }
            listener.push(
                notification.clone(),
                initial && !handlers.initial_done,
                reclaimed,
            );
        }
    }
    if objects != 0 {
        let now = inner.gauges.objects.fetch_add(objects, Ordering::Relaxed) + objects;
        inner.gauges.cache_objects.set(now as f64);
    }
}

/// client-go's `shouldResync`: picks the handlers whose period has come; `true` if there is one.
fn due_for_resync<K>(inner: &Inner<K>) -> bool {
    let now = Instant::now();
    let mut handlers = inner.handlers.lock();
    let periods: Vec<(u64, Option<Duration>)> = handlers
        .listeners
        .iter()
        .map(|l| (l.id, l.resync_period))
        .collect();
    let mut due = HashSet::new();
    for (id, next) in &mut handlers.next_resync {
        if *next <= now {
            due.insert(*id);
            if let Some((_, Some(p))) = periods.iter().find(|(i, _)| i == id) {
                *next = now + *p;
            }
        }
    }
    let any = !due.is_empty();
    handlers.syncing = due;
    any
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// `true` once synced, `false` once stopped first.
async fn wait_synced<K>(inner: &Inner<K>) -> bool {
    let mut synced = inner.synced.subscribe();
    let mut stop = inner.stop.subscribe();
    tokio::select! {
        biased;
        s = synced.wait_for(|s| *s) => s.is_ok(),
        _ = stop.wait_for(|s| *s) => *inner.synced.borrow(),
    }
}

/// The stream [`SharedIndexInformer::event_stream`] returns.
pub struct EventStream<K: Object + Send + Sync + 'static> {
    rx: tokio::sync::mpsc::UnboundedReceiver<Notification<K>>,
    registration: Registration<K>,
}

impl<K: Object + Send + Sync + 'static> fmt::Debug for EventStream<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventStream")
            .field("registration", &self.registration)
            .finish_non_exhaustive()
    }
}

impl<K: Object + Send + Sync + 'static> EventStream<K> {
    /// The registration of the handler behind the stream (its `has_synced`).
    pub fn registration(&self) -> &Registration<K> {
        &self.registration
    }
}

impl<K: Object + Send + Sync + 'static> futures_core::Stream for EventStream<K> {
    type Item = Notification<K>;
    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Notification<K>>> {
        self.get_mut().rx.poll_recv(cx)
    }
}

impl<K: Object + Send + Sync + 'static> Drop for EventStream<K> {
    fn drop(&mut self) {
        self.registration.remove();
    }
}

/// Something that can say it has synced: an informer, for [`wait_for_cache_sync`]. client-go's
/// `InformerSynced`, as a bool now and a future to wait on.
pub trait HasSynced: Send + Sync {
    /// `true` once synced.
    fn has_synced(&self) -> bool;

    /// Resolves to `true` once synced, or to `false` as soon as the informer is shut down
    /// without having synced.
    fn wait_synced(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>>;
}

impl<K, Q, C> HasSynced for SharedIndexInformer<K, Q, C>
where
    K: Send + Sync + 'static,
    Q: Send + Sync,
    C: Send + Sync,
{
    fn has_synced(&self) -> bool {
        *self.inner.synced.borrow()
    }

    fn wait_synced(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(wait_synced(&self.inner))
    }
}

/// Waits until every informer has synced, or `timeout` passes, or one of them is shut down
/// without having synced; `true` when all have. Wakes on each informer's sync, never polls.
/// Cancel it (drop the future) to wait on a signal of your own instead, e.g. with
/// `tokio::select!`.
pub async fn wait_for_cache_sync(informers: &[&dyn HasSynced], timeout: Option<Duration>) -> bool {
    let all = async {
        for informer in informers {
            if !informer.wait_synced().await {
                return false;
            }
        }
        true
    };
    match timeout {
        Some(t) => tokio::time::timeout(t, all).await.unwrap_or(false),
        None => all.await,
    }
}
