//! The builder of the default pipeline, each layer replaceable.

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kinformer_core::{
    BoxListWatch, CacheRead, CacheWrite, DeltaQueue, ListWatch, Object, ReflectorStore,
};
use kinformer_delta_fifo::DeltaFifo;
use kinformer_indexer::{Indexer, IndexerReader, index};
use kinformer_lister::Lister;
use kinformer_shared_informer::{InformerConfig, ResourceEventHandler, SharedIndexInformer};

use crate::{Error, Result};

/// The default pipeline's shared informer: any list/watch, the delta FIFO, the indexer.
pub type DefaultInformer<K> = SharedIndexInformer<K, BoxListWatch<K>, DeltaFifo<K>, Indexer<K>>;

/// An informer from [`InformerBuilder::build`]: the shared informer (every method of
/// [`SharedIndexInformer`] through `Deref`: `add_handler`, `has_synced`, `cache`, ...), with
/// [`start`](Self::start), [`shutdown`](Self::shutdown) and, over the indexer, a
/// [`lister`](Self::lister).
pub struct InformerHandle<K, Q, C> {
    inner: Arc<SharedIndexInformer<K, BoxListWatch<K>, Q, C>>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// The informer of the default pipeline; `Informer::<Pod>::builder()` starts here.
pub type Informer<K, Q = DeltaFifo<K>, C = Indexer<K>> = InformerHandle<K, Q, C>;

impl<K, Q, C> fmt::Debug for InformerHandle<K, Q, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerHandle")
            .field("informer", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<K, Q, C> Deref for InformerHandle<K, Q, C> {
    type Target = SharedIndexInformer<K, BoxListWatch<K>, Q, C>;
    fn deref(&self) -> &Self::Target {
        &self.inner
    }
}

impl<K: Object + Send + Sync + 'static> Informer<K> {
    /// A builder with the default layers: a delta FIFO (in-order) and an indexer with a
    /// namespace index. Give it a source with [`list_watch`](InformerBuilder::list_watch).
    pub fn builder() -> InformerBuilder<K> {
        InformerBuilder::new()
    }
}

impl<K, Q, C> InformerHandle<K, Q, C>
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
        }
    }

    /// Stops the watch, lets the handlers finish (as configured) and waits for everything to
    /// stop.
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
    }

    /// The shared informer itself, to share with other code.
    pub fn shared(&self) -> &Arc<SharedIndexInformer<K, BoxListWatch<K>, Q, C>> {
        &self.inner
    }
}

impl<K, Q> InformerHandle<K, Q, Indexer<K>>
where
    K: Object + Send + Sync + 'static,
    Q: DeltaQueue<K> + ReflectorStore<K> + 'static,
{
    /// A lister over the cache; `resource` names the resource in "not found" errors (`pods`).
    pub fn lister(&self, resource: &str) -> Lister<K, IndexerReader<K>> {
        Lister::new(self.inner.cache().reader(), resource)
    }
}

type QueueMaker<K, Q> = Box<dyn FnOnce(Arc<dyn CacheRead<K>>) -> Result<Arc<Q>> + Send>;

/// How many deltas the default pipeline's queue holds before the watch waits for the consumer.
///
/// The queue between the reflector and the informer's consumer is bounded with backpressure:
/// when the cache or the handlers' dispatch fall behind the watch, the reflector stops reading
/// (and the server's stream waits in the connection) instead of queueing every event in memory.
/// Nothing is ever dropped. At this size a burst of watch events still flows at full speed (the
/// consumer pops up to 1000 deltas at a time), and at ~35 KB per decoded pod the queue holds at
/// most ~70 MB. Change it with [`InformerBuilder::queue_capacity`].
pub const DEFAULT_QUEUE_CAPACITY: usize = 2048;

/// The informer settings of the default pipeline: `InformerConfig::default()`, whose handler
/// buffers are unbounded as client-go's are, so that a handler that falls behind never delays the
/// cache or the other handlers. Its backlog is visible ([`Registration::backlog`]); to bound the
/// memory it can hold, choose [`BufferPolicy::Backpressure`](kinformer_shared_informer::BufferPolicy::Backpressure) or
/// [`BufferPolicy::CoalescePerKey`](kinformer_shared_informer::BufferPolicy::CoalescePerKey)
/// with [`InformerBuilder::config`] (`handler_buffer`).
///
/// [`Registration::backlog`]: kinformer_shared_informer::Registration::backlog
fn default_config<K>() -> InformerConfig<K> {
    InformerConfig::default()
}

fn default_queue<K: Object + Send + Sync + 'static>(
    capacity: usize,
) -> QueueMaker<K, DeltaFifo<K>> {
    Box::new(move |known| {
        let queue = DeltaFifo::builder()
            .known_objects(known)
            .capacity(capacity)
            .build()?;
        Ok(Arc::new(queue))
    })
}

/// Builds an informer; each layer can be swapped: the source (`list_watch`), the queue
/// (`queue`), the cache (`cache`). See [`Informer::builder`].
pub struct InformerBuilder<K, Q = DeltaFifo<K>, C = Indexer<K>> {
    list_watch: Option<BoxListWatch<K>>,
    queue: QueueMaker<K, Q>,
    cache: Result<Arc<C>>,
    config: InformerConfig<K>,
    handlers: Vec<(Box<dyn ResourceEventHandler<K>>, Option<Duration>)>,
}

impl<K, Q, C> fmt::Debug for InformerBuilder<K, Q, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerBuilder")
            .field("list_watch", &self.list_watch.is_some())
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
            list_watch: None,
            queue: default_queue(DEFAULT_QUEUE_CAPACITY),
            cache,
            config: default_config(),
            handlers: Vec::new(),
        }
    }
}

impl<K: Object + Send + Sync + 'static, C> InformerBuilder<K, DeltaFifo<K>, C> {
    /// Bounds the default delta FIFO at `capacity` deltas ([`DEFAULT_QUEUE_CAPACITY`] unless
    /// set): while it is full the watch waits for the consumer, and nothing is dropped. A
    /// capacity of 0 is refused by [`build`](Self::build). Replaces a queue given with
    /// [`queue`](InformerBuilder::queue).
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
    /// Where the objects come from: the HTTP client's `Api`, or any other [`ListWatch`].
    #[must_use]
    pub fn list_watch(mut self, source: impl ListWatch<K> + 'static) -> Self {
        self.list_watch = Some(BoxListWatch::new(source));
        self
    }

    /// Replaces the queue (the delta FIFO by default).
    pub fn queue<Q2>(self, queue: Arc<Q2>) -> InformerBuilder<K, Q2, C>
    where
        Q2: DeltaQueue<K> + ReflectorStore<K> + 'static,
    {
        InformerBuilder {
            list_watch: self.list_watch,
            queue: Box::new(move |_| Ok(queue)),
            cache: self.cache,
            config: self.config,
            handlers: self.handlers,
        }
    }

    /// Replaces the cache (the indexer by default). The default queue consults it as its known
    /// objects.
    pub fn cache<C2>(self, cache: Arc<C2>) -> InformerBuilder<K, Q, C2>
    where
        C2: CacheWrite<K> + 'static,
    {
        InformerBuilder {
            list_watch: self.list_watch,
            queue: self.queue,
            cache: Ok(cache),
            config: self.config,
            handlers: self.handlers,
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

    /// The reflector's settings: name, selectors, page size, backoff, streaming lists, hook.
    #[must_use]
    pub fn reflector(mut self, config: kinformer_reflector::Config) -> Self {
        self.config.reflector = config;
        self
    }

    /// Every informer setting at once. The default pipeline's settings are
    /// `InformerConfig::default()` (one unbounded buffer per handler).
    #[must_use]
    pub fn config(mut self, config: InformerConfig<K>) -> Self {
        self.config = config;
        self
    }

    /// The informer, ready to [`start`](InformerHandle::start).
    pub fn build(self) -> Result<InformerHandle<K, Q, C>> {
        let list_watch = self.list_watch.ok_or(Error::MissingListWatch)?;
        let cache = self.cache?;
        let known: Arc<dyn CacheRead<K>> = cache.clone();
        let queue = (self.queue)(known)?;
        let informer = SharedIndexInformer::new(list_watch, queue, cache, self.config);
        for (handler, resync) in self.handlers {
            match resync {
                Some(period) => informer.add_handler_with_resync(handler, Some(period)),
                None => informer.add_handler(handler),
            };
        }
        Ok(InformerHandle {
            inner: Arc::new(informer),
            task: Mutex::new(None),
        })
    }
}
