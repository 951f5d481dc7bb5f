//! The informer users hold, and the builder of the default pipeline, each layer replaceable.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::Stream;
use kinformer_core::{
    BoxListWatch, CacheRead, CacheWrite, DeltaQueue, ListProgress, ListWatch, ManagedFields,
    Object, ProgressTracker, ReflectorStore, ResourceVersion, StoreEvent, strip_managed_fields,
};
use kinformer_delta_fifo::DeltaFifo;
use kinformer_indexer::{Indexer, IndexerReader, index};
use kinformer_shared_informer::{
    EventStream, Freshness, FreshnessError, HasSynced, InformerConfig, ManagedInformer,
    Registration, ResourceEventHandler, SharedIndexInformer, StoreEvents, Transform,
};

use crate::consistency::{ConsistencyCheck, ConsistencyChecker, ConsistencyStats};
use crate::{Error, NotSynced, Result, SyncState};

/// The lister of the default pipeline's cache: `Lister<Pod>` answers queries on an informer's
/// indexer ([`Informer::lister`]).
pub type Lister<K> = kinformer_lister::Lister<K, IndexerReader<K>>;

/// A consistency checker and its settings.
type Checked<K, Q, C> = (Arc<ConsistencyChecker<K, Q, C>>, ConsistencyCheck);

/// An informer: one list/watch of a resource, a cache, and handlers, as client-go's
/// `SharedIndexInformer`. `Informer::<Pod>::builder()` builds the default pipeline (the
/// reflector, the in-order delta FIFO, the indexer with a namespace index); `Q` and `C` name the
/// queue and the cache when they are replaced.
///
/// Start it with [`start`](Self::start), wait with [`wait_synced`](Self::wait_synced), read the
/// cache through [`lister`](Self::lister) or [`cache`](Self::cache), stop it with
/// [`shutdown`](Self::shutdown). [`shared`](Self::shared) is the shared informer inside, for code
/// that speaks to the layer itself.
pub struct Informer<K, Q = DeltaFifo<K>, C = Indexer<K>> {
    inner: Arc<SharedIndexInformer<K, Q, C>>,
    name: Arc<str>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The consistency check, when switched on, and its task once started.
    check: Option<Checked<K, Q, C>>,
    check_task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The reflector's list progress and last retried failure (list/watch sources only).
    progress: Option<ProgressTracker>,
    last_error: Arc<Mutex<Option<String>>>,
}

impl<K, Q, C> fmt::Debug for Informer<K, Q, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Informer")
            .field("informer", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<K: Object + Send + Sync + 'static> Informer<K> {
    /// A builder with the default layers: a delta FIFO (in-order, bounded at
    /// [`DEFAULT_QUEUE_CAPACITY`]) and an indexer with a namespace index. Give it a source with
    /// [`list_watch`](InformerBuilder::list_watch) (or [`events`](InformerBuilder::events)).
    pub fn builder() -> InformerBuilder<K> {
        InformerBuilder::new()
    }
}

impl<K, Q, C> Informer<K, Q, C>
where
    K: Object + Send + Sync + 'static,
    Q: DeltaQueue<K> + ReflectorStore<K> + 'static,
    C: CacheWrite<K> + 'static,
{
    /// Starts the informer on a task of the current tokio runtime. Idempotent.
    pub fn start(&self) {
        let mut task = self.task.lock().unwrap_or_else(PoisonError::into_inner);
        if task.is_none() {
            let informer = Arc::clone(&self.inner);
            *task = Some(tokio::spawn(async move { informer.run().await }));
            if let Some((checker, check)) = &self.check {
                let (checker, check) = (Arc::clone(checker), check.clone());
                *self
                    .check_task
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) =
                    Some(tokio::spawn(async move { checker.run(&check).await }));
            }
        }
    }

    /// Runs a consistency check now, when checks are switched on: the report, or `None` when
    /// they are off or this one was skipped or failed (see [`consistency`](Self::consistency)).
    pub async fn check_consistency(&self) -> Option<crate::consistency::ConsistencyReport> {
        let (checker, _) = self.check.as_ref()?;
        checker.check().await
    }

    /// How the consistency checks have gone, when they are switched on
    /// ([`InformerBuilder::consistency_check`], or the `KINFORMER_CONSISTENCY_CHECK`
    /// environment variable).
    pub fn consistency(&self) -> Option<ConsistencyStats> {
        self.check.as_ref().map(|(checker, _)| checker.stats())
    }

    /// How far the current (or last) list has got: objects, rate, and, where the server says
    /// how many remain, the time left. `None` for an informer fed by a stream of events.
    pub fn progress(&self) -> Option<ListProgress> {
        self.progress.as_ref().map(ProgressTracker::snapshot)
    }

    /// The last failure the reflector retried (a refused connection, a 401, a 410), if any.
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Where the informer stands on its way to its first sync.
    pub fn sync_state(&self) -> SyncState {
        SyncState {
            name: self.name.to_string(),
            synced: self.inner.has_synced(),
            progress: self.progress(),
            last_error: self.last_error(),
        }
    }

    /// Waits at most `timeout` for the first sync, as [`wait_synced`](Self::wait_synced), and
    /// says why when it does not come.
    ///
    /// # Errors
    /// [`NotSynced`] with how far the list got and the last failure the reflector retried.
    pub async fn wait_synced_for(&self, timeout: Duration) -> std::result::Result<(), NotSynced> {
        if self.wait_synced(Some(timeout)).await {
            return Ok(());
        }
        Err(NotSynced {
            waited: timeout,
            informers: vec![self.sync_state()],
        })
    }

    /// Waits until the first list is in the cache and has been handed to the handlers (`true`),
    /// or `timeout` passes, or the informer is shut down first (`false`). `None` waits as long
    /// as it takes. client-go's `WaitForCacheSync` for one informer.
    pub async fn wait_synced(&self, timeout: Option<Duration>) -> bool {
        let synced = self.inner.wait_synced();
        match timeout {
            Some(t) => tokio::time::timeout(t, synced).await.unwrap_or(false),
            None => synced.await,
        }
    }

    /// `true` once the first list is in the cache and has been handed to the handlers.
    pub fn has_synced(&self) -> bool {
        self.inner.has_synced()
    }

    /// Adds a handler with the informer's resync period; see
    /// [`SharedIndexInformer::add_handler`].
    ///
    /// # Errors
    /// [`Error::Informer`] once the informer has been shut down.
    pub fn add_handler(&self, handler: impl ResourceEventHandler<K>) -> Result<Registration<K>> {
        Ok(self.inner.add_handler(handler)?)
    }

    /// Adds a handler with its own resync period; see
    /// [`SharedIndexInformer::add_handler_with_resync`].
    ///
    /// # Errors
    /// [`Error::Informer`] once the informer has been shut down.
    pub fn add_handler_with_resync(
        &self,
        handler: impl ResourceEventHandler<K>,
        resync: Duration,
    ) -> Result<Registration<K>> {
        Ok(self.inner.add_handler_with_resync(handler, Some(resync))?)
    }

    /// Every notification as a `Stream`; see [`SharedIndexInformer::event_stream`].
    ///
    /// # Errors
    /// [`Error::Informer`] once the informer has been shut down.
    pub fn event_stream(&self) -> Result<EventStream<K>> {
        Ok(self.inner.event_stream()?)
    }

    /// The resourceVersion the cache has caught up to, once the first list is complete.
    pub fn last_sync_resource_version(&self) -> Option<ResourceVersion> {
        self.inner.last_sync_resource_version()
    }

    /// The resourceVersion the cache has reached (see
    /// [`SharedIndexInformer::cache_resource_version`]).
    pub fn cache_resource_version(&self) -> Option<ResourceVersion> {
        self.inner.cache_resource_version()
    }

    /// Waits until the cache has reached `resource_version`, at most `timeout` (see
    /// [`SharedIndexInformer::wait_until_fresh`]).
    ///
    /// # Errors
    /// [`FreshnessError`]: an opaque version, the time ran out, or the informer stopped.
    pub async fn wait_until_fresh(
        &self,
        resource_version: &ResourceVersion,
        timeout: Duration,
    ) -> std::result::Result<(), FreshnessError> {
        self.inner.wait_until_fresh(resource_version, timeout).await
    }

    /// Read-your-writes for the cache: record each write's version, ask whether the cache has
    /// caught up for that key (see [`Freshness`]); [`FreshKeys`](crate::FreshKeys) makes a work
    /// queue hold keys until then.
    pub fn freshness(&self) -> Freshness {
        self.inner.freshness()
    }

    /// The cache.
    pub fn cache(&self) -> &Arc<C> {
        self.inner.cache()
    }

    /// The informer's name: the resource's, unless the builder was given one.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Stops the watch, lets the handlers finish (as configured) and waits for everything to
    /// stop. Handlers can no longer be added afterwards. Idempotent.
    ///
    /// # Panics
    /// With a consistency check set to [`OnMismatch::Panic`](crate::consistency::OnMismatch),
    /// with its report, if it found the cache differing from the server.
    pub async fn shutdown(&self) {
        self.inner.shutdown().await;
        let task = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            let _ = task.await;
        }
        let check = self
            .check_task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(check) = check {
            if !check.is_finished() {
                check.abort();
            }
            if let Err(e) = check.await
                && e.is_panic()
            {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }

    /// The shared informer inside, to share with code that speaks to that layer.
    pub fn shared(&self) -> &Arc<SharedIndexInformer<K, Q, C>> {
        &self.inner
    }
}

impl<K, Q> Informer<K, Q, Indexer<K>>
where
    K: Object + Send + Sync + 'static,
    Q: DeltaQueue<K> + ReflectorStore<K> + 'static,
{
    /// A lister over the cache; its "not found" errors name the informer's resource.
    pub fn lister(&self) -> Lister<K> {
        Lister::new(self.inner.cache().reader(), Arc::clone(&self.name))
    }
}

impl<K, Q, C> HasSynced for Informer<K, Q, C>
where
    K: Send + Sync + 'static,
    Q: Send + Sync,
    C: Send + Sync,
{
    fn has_synced(&self) -> bool {
        HasSynced::has_synced(&*self.inner)
    }

    fn wait_synced(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + '_>> {
        HasSynced::wait_synced(&*self.inner)
    }
}

impl<K, Q, C> ManagedInformer for Informer<K, Q, C>
where
    K: Object + Send + Sync + 'static,
    Q: DeltaQueue<K> + ReflectorStore<K> + 'static,
    C: CacheWrite<K> + 'static,
{
    fn run_boxed(
        self: Arc<Self>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(async move { self.inner.run().await })
    }

    fn shutdown_boxed(
        self: Arc<Self>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(async move { self.shutdown().await })
    }
}

/// Makes the queue from the cache, so that the queue's known objects are the informer's cache.
type QueueMaker<K, Q> = Box<dyn FnOnce(Arc<dyn CacheRead<K>>) -> Result<Q> + Send>;

/// How many deltas the default pipeline's queue holds before the watch waits for the consumer.
///
/// The queue between the reflector and the informer's consumer is bounded with backpressure:
/// when the cache or the handlers' dispatch fall behind the watch, the reflector stops reading
/// (and the server's stream waits in the connection) instead of queueing every event in memory.
/// Nothing is ever dropped. At this size a burst of watch events still flows at full speed (the
/// consumer pops up to 1000 deltas at a time), and at ~35 KB per decoded pod the queue holds at
/// most ~70 MB. Change it with [`InformerBuilder::queue_capacity`].
pub const DEFAULT_QUEUE_CAPACITY: usize = 2048;

fn default_queue<K: Object + Send + Sync + 'static>(
    capacity: usize,
) -> QueueMaker<K, DeltaFifo<K>> {
    Box::new(move |known| {
        Ok(DeltaFifo::builder()
            .known_objects(known)
            .capacity(capacity)
            .build()?)
    })
}

/// Where an informer's events come from.
enum Source<K> {
    /// A list/watch, run by a reflector with the builder's reflector settings.
    ListWatch(BoxListWatch<K>),
    /// Any stream of store events.
    Events(StoreEvents<K>),
}

/// Builds an informer; each layer can be swapped: the source ([`list_watch`](Self::list_watch),
/// or [`events`](Self::events) to replace the reflector too), the queue ([`queue`](Self::queue)),
/// the cache ([`cache`](Self::cache)). See [`Informer::builder`].
///
/// The default settings are client-go's: the handler buffers are unbounded, so a handler that
/// falls behind never delays the cache or the other handlers (its backlog is visible through
/// [`Registration::backlog`]; [`BufferPolicy`](kinformer_shared_informer::BufferPolicy) bounds
/// it, through [`config`](Self::config)); streaming lists are tried first and a server that
/// refuses them is listed and watched.
pub struct InformerBuilder<K, Q = DeltaFifo<K>, C = Indexer<K>> {
    source: Option<Source<K>>,
    reflector: kinformer_reflector::Config,
    name: Option<String>,
    queue: QueueMaker<K, Q>,
    cache: Result<Arc<C>>,
    config: InformerConfig<K>,
    handlers: Vec<(Box<dyn ResourceEventHandler<K>>, Option<Duration>)>,
    check: Option<ConsistencyCheck>,
    /// Set by [`strip_managed_fields`](Self::strip_managed_fields): runs before the transform.
    strip: Option<Transform<K>>,
}

impl<K, Q, C> fmt::Debug for InformerBuilder<K, Q, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerBuilder")
            .field("source", &self.source.is_some())
            .field("reflector", &self.reflector)
            .field("config", &self.config)
            .field("handlers", &self.handlers.len())
            .finish_non_exhaustive()
    }
}

impl<K: Object + Send + Sync + 'static> InformerBuilder<K> {
    fn new() -> Self {
        let cache = Indexer::with_indexers([(index::NAMESPACE.to_string(), index::namespace())])
            .map(Arc::new)
            .map_err(Error::from);
        Self {
            source: None,
            reflector: kinformer_reflector::Config::default(),
            name: None,
            queue: default_queue(DEFAULT_QUEUE_CAPACITY),
            cache,
            config: InformerConfig::default(),
            handlers: Vec::new(),
            check: None,
            strip: None,
        }
    }
}

impl<K: Object + Send + Sync + 'static, C> InformerBuilder<K, DeltaFifo<K>, C> {
    /// Bounds the default delta FIFO at `capacity` deltas ([`DEFAULT_QUEUE_CAPACITY`] unless
    /// set): while it is full the watch waits for the consumer, and nothing is dropped. A
    /// capacity of 0 is refused by [`build`](Self::build).
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer::Informer;
    /// # use kinformer::core::{ListParams, ListWatch, ObjectList, WatchParams, list_watch};
    /// # struct Nothing;
    /// # #[async_trait::async_trait]
    /// # impl ListWatch<Pod> for Nothing {
    /// #     async fn list(&self, _: &ListParams) -> Result<ObjectList<Pod>, list_watch::Error> { unimplemented!() }
    /// #     async fn watch(&self, _: &WatchParams) -> Result<list_watch::WatchStream<Pod>, list_watch::Error> { unimplemented!() }
    /// # }
    /// let informer = Informer::<Pod>::builder().list_watch(Nothing).queue_capacity(256).build();
    /// assert!(informer.is_ok());
    /// let refused = Informer::<Pod>::builder().list_watch(Nothing).queue_capacity(0).build();
    /// assert!(matches!(refused, Err(kinformer::Error::Queue(_))));
    /// ```
    #[must_use]
    pub fn queue_capacity(mut self, capacity: usize) -> Self {
        self.queue = default_queue(capacity);
        self
    }
}

impl<K, Q, C> InformerBuilder<K, Q, C>
where
    K: Object + Send + Sync + 'static,
    Q: DeltaQueue<K> + ReflectorStore<K> + 'static,
    C: CacheWrite<K> + 'static,
{
    /// Where the objects come from: the HTTP client's `Api`, or any other [`ListWatch`], run by
    /// the reflector with the settings of [`reflector`](Self::reflector).
    #[must_use]
    pub fn list_watch(mut self, source: impl ListWatch<K> + 'static) -> Self {
        self.source = Some(Source::ListWatch(BoxListWatch::new(source)));
        self
    }

    /// Replaces the reflector too: the informer takes any stream of [`StoreEvent`]s (a
    /// `kinformer_reflector::watcher` of your own settings, kube-runtime's `watcher()` through a
    /// `map`, a replay). The stream is pulled only while the queue is ready.
    #[must_use]
    pub fn events(mut self, events: impl Stream<Item = StoreEvent<K>> + Send + 'static) -> Self {
        self.source = Some(Source::Events(Box::pin(events)));
        self
    }

    /// The events of a partitioned source ([`kinformer::partition`](crate::partition):
    /// [`sharded`](crate::partition::sharded), [`namespaced`](crate::partition::namespaced)),
    /// which merge several watches: as [`events`](Self::events), and the cache's version then
    /// moves only with the merged bookmarks ([`InformerConfig::merged_source`]), so that waiting
    /// until fresh never takes one watch's version for all of them.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer::core::shard::{ShardKey, ShardRanges};
    /// use kinformer::prelude::*;
    /// # let sim = kinformer_sim::SimServer::start(kinformer_sim::SimConfig::default()).await?;
    /// # let client = Client::new(kinformer::client::Config::new(sim.url()))?;
    ///
    /// let (events, shards) = kinformer::partition::sharded(
    ///     Api::<Pod>::all(client),
    ///     ShardRanges::split(ShardKey::Uid, 2, 0),
    ///     Default::default(),
    /// );
    /// let informer = Informer::<Pod>::builder().partitioned(events).build()?;
    /// informer.start();
    /// assert!(informer.wait_synced(None).await);
    /// assert!(shards.ranges().contains_hash(0));
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn partitioned(mut self, events: kinformer_partition::PartitionedEvents<K>) -> Self {
        self.config.merged_source = true;
        self.events(events)
    }

    /// The informer's name, in logs, handler names and the lister's "not found" errors; by
    /// default the object type's name in lower case (`pod`), as client-go's listers say it.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Replaces the queue (the delta FIFO by default): `make` is given the cache, to consult as
    /// its known objects, so that the queue and the informer can never disagree on the cache.
    /// `make` may fail with any error [`Error`] converts from (a delta FIFO's settings, or
    /// [`Infallible`](std::convert::Infallible)); [`build`](Self::build) returns it.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer::Informer;
    /// use kinformer::delta_fifo::{DeltaFifo, Mode};
    /// # use kinformer::core::{ListParams, ListWatch, ObjectList, WatchParams, list_watch};
    /// # struct Nothing;
    /// # #[async_trait::async_trait]
    /// # impl ListWatch<Pod> for Nothing {
    /// #     async fn list(&self, _: &ListParams) -> Result<ObjectList<Pod>, list_watch::Error> { unimplemented!() }
    /// #     async fn watch(&self, _: &WatchParams) -> Result<list_watch::WatchStream<Pod>, list_watch::Error> { unimplemented!() }
    /// # }
    /// let classic = Informer::<Pod>::builder()
    ///     .list_watch(Nothing)
    ///     .queue(|known| DeltaFifo::builder().mode(Mode::Classic).known_objects(known).build())
    ///     .build();
    /// assert!(classic.is_ok());
    /// ```
    pub fn queue<Q2, E>(
        self,
        make: impl FnOnce(Arc<dyn CacheRead<K>>) -> std::result::Result<Q2, E> + Send + 'static,
    ) -> InformerBuilder<K, Q2, C>
    where
        Q2: DeltaQueue<K> + ReflectorStore<K> + 'static,
        Error: From<E>,
    {
        InformerBuilder {
            source: self.source,
            reflector: self.reflector,
            name: self.name,
            queue: Box::new(move |known| Ok(make(known)?)),
            cache: self.cache,
            config: self.config,
            handlers: self.handlers,
            check: self.check,
            strip: self.strip,
        }
    }

    /// Replaces the cache (the indexer by default). The queue consults it as its known objects.
    pub fn cache<C2>(self, cache: Arc<C2>) -> InformerBuilder<K, Q, C2>
    where
        C2: CacheWrite<K> + 'static,
    {
        InformerBuilder {
            source: self.source,
            reflector: self.reflector,
            name: self.name,
            queue: self.queue,
            cache: Ok(cache),
            config: self.config,
            handlers: self.handlers,
            check: self.check,
            strip: self.strip,
        }
    }

    /// Adds a handler (with the informer's resync period).
    #[must_use]
    pub fn handler(mut self, handler: impl ResourceEventHandler<K>) -> Self {
        self.handlers.push((Box::new(handler), None));
        self
    }

    /// Adds a handler with its own resync period.
    #[must_use]
    pub fn handler_with_resync(
        mut self,
        handler: impl ResourceEventHandler<K>,
        resync: Duration,
    ) -> Self {
        self.handlers.push((Box::new(handler), Some(resync)));
        self
    }

    /// The informer's resync period (none by default).
    #[must_use]
    pub fn resync(mut self, period: Duration) -> Self {
        self.config.resync_period = Some(period);
        self
    }

    /// A function applied once to each object before it is stored.
    #[must_use]
    pub fn transform(mut self, f: impl Fn(Arc<K>) -> Arc<K> + Send + Sync + 'static) -> Self {
        self.config.transform = Some(Arc::new(f));
        self
    }

    /// Drops `metadata.managedFields` from every object before it is stored, ahead of any
    /// [`transform`](Self::transform): the usual choice for a controller that never reads them
    /// (controller-runtime's `TransformStripManagedFields`). They are the largest part of a
    /// typed object: from an eighth to two fifths of a decoded `Pod`, by how many writers left
    /// their entries (server-side apply's field manager writes them on every cluster since
    /// 1.18; docs/benchmarks.md).
    ///
    /// This drops them after they are decoded. A client set to skip them
    /// (`Config::managed_fields = ManagedFieldsDecode::Skip`, in `kinformer::client`) cuts them
    /// out of the bytes before decoding, which saves building them: most of a dense object's
    /// decoding. Keep this transform with it, for whatever that scan does not recognize.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer::Informer;
    /// # use kinformer::core::{ListParams, ListWatch, ObjectList, WatchParams, list_watch};
    /// # struct Nothing;
    /// # #[async_trait::async_trait]
    /// # impl ListWatch<Pod> for Nothing {
    /// #     async fn list(&self, _: &ListParams) -> Result<ObjectList<Pod>, list_watch::Error> { unimplemented!() }
    /// #     async fn watch(&self, _: &WatchParams) -> Result<list_watch::WatchStream<Pod>, list_watch::Error> { unimplemented!() }
    /// # }
    /// let informer = Informer::<Pod>::builder()
    ///     .list_watch(Nothing)
    ///     .strip_managed_fields()
    ///     .build()
    ///     .unwrap();
    /// assert!(informer.shared().transform().is_some());
    /// ```
    #[must_use]
    pub fn strip_managed_fields(mut self) -> Self
    where
        K: ManagedFields + Clone,
    {
        self.strip = Some(Arc::new(strip_managed_fields::<K>));
        self
    }

    /// The reflector's settings: selectors, page size, backoff, streaming lists, the watch-error
    /// hook. Its resync period is not used: the informer resyncs its handlers itself.
    #[must_use]
    pub fn reflector(mut self, config: kinformer_reflector::Config) -> Self {
        self.reflector = config;
        self
    }

    /// Every informer setting at once (`InformerConfig::default()` unless set). Its name is
    /// replaced by the builder's [`name`](Self::name) when one is given.
    #[must_use]
    pub fn config(mut self, config: InformerConfig<K>) -> Self {
        // A partitioned source stays one whatever the settings say.
        let merged = self.config.merged_source;
        self.config = config;
        self.config.merged_source |= merged;
        self
    }

    /// Compares the cache with the server's list at the cache's own resourceVersion after sync
    /// and then on the check's period (see [`consistency`](crate::consistency)); off unless set
    /// here or by the `KINFORMER_CONSISTENCY_CHECK` environment variable. Needs a
    /// [`list_watch`](Self::list_watch) source and the in-order queue (the default).
    #[must_use]
    pub fn consistency_check(mut self, check: ConsistencyCheck) -> Self {
        self.check = Some(check);
        self
    }

    /// The informer, ready to [`start`](Informer::start).
    pub fn build(self) -> Result<Informer<K, Q, C>> {
        let name = self
            .name
            .or_else(|| Some(self.reflector.name.clone()).filter(|n| !n.is_empty()))
            .unwrap_or_else(type_name::<K>);
        // The reflector's metrics and the informer's name the same resource (the name when
        // neither was told one).
        let resource = Some(self.config.resource.clone())
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| self.reflector.resource.clone());
        let check = self.check.or_else(ConsistencyCheck::from_env);
        let mut checked = None;
        let mut progress = None;
        let last_error: Arc<Mutex<Option<String>>> = Arc::default();
        let events: StoreEvents<K> = match self.source.ok_or(Error::MissingListWatch)? {
            Source::Events(events) => events,
            Source::ListWatch(list_watch) => {
                let mut reflector = self.reflector;
                if reflector.name.is_empty() {
                    reflector.name.clone_from(&name);
                }
                reflector.resource.clone_from(&resource);
                reflector.resync_period = None;
                let tracker = reflector.progress.get_or_insert_with(ProgressTracker::new);
                progress = Some(tracker.clone());
                let user_hook = reflector.on_watch_error.take();
                let noted = Arc::clone(&last_error);
                reflector.on_watch_error = Some(Arc::new(move |info| {
                    *noted.lock().unwrap_or_else(PoisonError::into_inner) =
                        Some(info.error.to_string());
                    if let Some(hook) = &user_hook {
                        hook(info);
                    }
                }));
                if let Some(check) = check {
                    checked = Some((
                        list_watch.clone(),
                        reflector.label_selector.clone(),
                        reflector.field_selector.clone(),
                        check,
                    ));
                }
                Box::pin(kinformer_reflector::watcher(list_watch, reflector))
            }
        };
        let cache = self.cache?;
        let known: Arc<dyn CacheRead<K>> = cache.clone();
        let queue = Arc::new((self.queue)(known)?);
        let mut config = self.config;
        if let Some(strip) = self.strip {
            config.transform = Some(match config.transform.take() {
                None => strip,
                Some(then) => Arc::new(move |obj| then(strip(obj))),
            });
        }
        config.name.clone_from(&name);
        config.resource = resource;
        let informer = SharedIndexInformer::new(events, queue, cache, config);
        for (handler, resync) in self.handlers {
            let added = match resync {
                Some(period) => informer.add_handler_with_resync(handler, Some(period)),
                None => informer.add_handler(handler),
            };
            added?;
        }
        let inner = Arc::new(informer);
        let check = checked.map(|(source, labels, fields, check)| {
            let checker =
                ConsistencyChecker::new(Arc::clone(&inner), source, labels, fields, &name);
            (Arc::new(checker), check)
        });
        Ok(Informer {
            inner,
            name: name.into(),
            task: Mutex::new(None),
            check,
            check_task: Mutex::new(None),
            progress,
            last_error,
        })
    }
}

/// `K`'s name in lower case, as client-go's listers name their resource: `pod` for `Pod` and
/// for `Compact<Pod>` (the innermost type argument).
fn type_name<K>() -> String {
    let full = std::any::type_name::<K>();
    let inner = full.rsplit('<').next().unwrap_or(full);
    let inner = inner.split(['>', ',']).next().unwrap_or(inner);
    inner.rsplit("::").next().unwrap_or(inner).to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::type_name;

    #[test]
    fn the_default_name_is_the_innermost_type_in_lower_case() {
        assert_eq!(
            type_name::<kinformer_core::DynamicObject>(),
            "dynamicobject"
        );
        assert_eq!(
            type_name::<Vec<kinformer_core::DynamicObject>>(),
            "dynamicobject"
        );
        assert_eq!(type_name::<u8>(), "u8");
    }
}
