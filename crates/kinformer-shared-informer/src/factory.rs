//! The factory: one informer per type, shared, started and stopped together.

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use kinformer_core::{CacheWrite, DeltaQueue, Object, ReflectorStore};
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::{HasSynced, SharedIndexInformer};

/// What a factory passes to the function that builds one of its informers: the factory-wide
/// scope and the resync period for this type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InformerOptions {
    /// The namespace to watch; `None` for all.
    pub namespace: Option<String>,
    /// `labelSelector` of every list and watch.
    pub label_selector: Option<String>,
    /// `fieldSelector` of every list and watch.
    pub field_selector: Option<String>,
    /// The informer's resync period: the type's own, else the factory's default.
    pub resync_period: Option<Duration>,
}

/// An informer a factory can start, wait for and stop, whatever its object type and layers.
pub trait ManagedInformer: HasSynced + Send + Sync + 'static {
    /// Runs until shut down.
    fn run_boxed(self: Arc<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>>;
    /// Shuts down and waits for every task and handler thread.
    fn shutdown_boxed(self: Arc<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

impl<K, Q, C> ManagedInformer for SharedIndexInformer<K, Q, C>
where
    K: Object + Send + Sync + 'static,
    Q: DeltaQueue<K> + ReflectorStore<K> + 'static,
    C: CacheWrite<K> + 'static,
{
    fn run_boxed(self: Arc<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move { self.run().await })
    }
    fn shutdown_boxed(self: Arc<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move { self.shutdown().await })
    }
}

/// An informer to stop, and its task if it was started.
type Running = (
    Arc<dyn ManagedInformer>,
    Option<tokio::task::JoinHandle<()>>,
);

struct Entry {
    name: String,
    informer: Arc<dyn ManagedInformer>,
    any: Arc<dyn Any + Send + Sync>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// Hands out one informer per type and resource, shared by everyone who asks, as client-go's
/// `SharedInformerFactory`; starts them together, waits for them together, stops them together.
///
/// The factory is generic over the client it passes to each informer's constructor, and over
/// nothing else: [`informer_for`](Self::informer_for) takes the function that builds an
/// informer (any layers, any object type: typed, dynamic for a custom resource, metadata-only),
/// so a custom informer is just another function. The `kinformer` facade adds typed shortcuts.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_delta_fifo::DeltaFifo;
/// use kinformer_indexer::Indexer;
/// use kinformer_shared_informer::{InformerConfig, InformerOptions, SharedIndexInformer, SharedInformerFactory};
/// use kinformer_reflector::{Config, watcher};
/// use kinformer_test_support::{ScriptedListWatch, typed_pods};
///
/// // The "client" here is a set of pods; with kinformer-client it is a `Client`.
/// let factory = SharedInformerFactory::new(typed_pods(2), None);
/// let build = |pods: &Vec<Arc<Pod>>, options: &InformerOptions| {
///     let cache = Arc::new(Indexer::<Pod>::new());
///     let queue = Arc::new(DeltaFifo::new(cache.clone()));
///     let config = InformerConfig { resync_period: options.resync_period, ..InformerConfig::default() };
///     let events = watcher(ScriptedListWatch::new(pods.clone(), "4"), Config::default());
///     SharedIndexInformer::new(events, queue, cache, config)
/// };
/// let pods = factory.informer_for("pods", build);
/// assert!(Arc::ptr_eq(&pods, &factory.informer_for("pods", build)), "asked twice, one informer");
/// factory.start();
/// assert!(factory.wait_for_cache_sync(Some(Duration::from_secs(5))).await.values().all(|s| *s));
/// factory.shutdown().await;
/// # }
/// ```
pub struct SharedInformerFactory<C> {
    client: C,
    options: InformerOptions,
    resync_for: Mutex<HashMap<String, Duration>>,
    entries: Mutex<HashMap<(TypeId, String), Entry>>,
    shut_down: watch::Sender<bool>,
}

impl<C> fmt::Debug for SharedInformerFactory<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self
            .entries
            .lock()
            .values()
            .map(|e| e.name.clone())
            .collect();
        f.debug_struct("SharedInformerFactory")
            .field("options", &self.options)
            .field("informers", &names)
            .finish_non_exhaustive()
    }
}

impl<C: Send + Sync + 'static> SharedInformerFactory<C> {
    /// A factory over `client`, whose informers resync every `default_resync` (or never).
    pub fn new(client: C, default_resync: Option<Duration>) -> Self {
        Self::with_options(
            client,
            InformerOptions {
                resync_period: default_resync,
                ..InformerOptions::default()
            },
        )
    }

    /// A factory with a namespace, selectors and a default resync for all its informers.
    pub fn with_options(client: C, options: InformerOptions) -> Self {
        Self {
            client,
            options,
            resync_for: Mutex::new(HashMap::new()),
            entries: Mutex::new(HashMap::new()),
            shut_down: watch::channel(false).0,
        }
    }

    /// The client each informer is built from.
    pub fn client(&self) -> &C {
        &self.client
    }

    /// Gives the informers named `name` made from now on their own resync period.
    pub fn set_resync_for(&self, name: &str, period: Duration) {
        self.resync_for.lock().insert(name.to_owned(), period);
    }

    /// The informer of type `I` named `name` (for example `pods`, or `widgets.example.com`),
    /// built with `new` the first time it is asked for and shared after that. An informer added
    /// after [`start`](Self::start) starts at the next `start`.
    pub fn informer_for<I, F>(&self, name: &str, new: F) -> Arc<I>
    where
        I: ManagedInformer,
        F: FnOnce(&C, &InformerOptions) -> I,
    {
        let key = (TypeId::of::<I>(), name.to_owned());
        let mut entries = self.entries.lock();
        if let Some(entry) = entries.get(&key) {
            return Arc::clone(&entry.any)
                .downcast::<I>()
                .expect("entries are keyed by their type");
        }
        let mut options = self.options.clone();
        if let Some(p) = self.resync_for.lock().get(name) {
            options.resync_period = Some(*p);
        }
        let informer = Arc::new(new(&self.client, &options));
        entries.insert(
            key,
            Entry {
                name: name.to_owned(),
                informer: informer.clone(),
                any: informer.clone(),
                task: None,
            },
        );
        informer
    }

    /// Starts every informer not yet running, each on a task of its own (on the current tokio
    /// runtime). Idempotent; after [`shutdown`](Self::shutdown) it starts nothing.
    pub fn start(&self) {
        if *self.shut_down.borrow() {
            return;
        }
        for entry in self.entries.lock().values_mut() {
            if entry.task.is_none() {
                let informer = Arc::clone(&entry.informer);
                entry.task = Some(tokio::spawn(informer.run_boxed()));
            }
        }
    }

    /// Waits until every started informer has synced, or `timeout` passes; says for each (by
    /// name) whether it has.
    pub async fn wait_for_cache_sync(&self, timeout: Option<Duration>) -> BTreeMap<String, bool> {
        let started: Vec<(String, Arc<dyn ManagedInformer>)> = self
            .entries
            .lock()
            .values()
            .filter(|e| e.task.is_some())
            .map(|e| (e.name.clone(), Arc::clone(&e.informer)))
            .collect();
        let informers: Vec<&dyn HasSynced> = started
            .iter()
            .map(|(_, i)| &**i as &dyn HasSynced)
            .collect();
        crate::wait_for_cache_sync(&informers, timeout).await;
        started
            .iter()
            .map(|(name, i)| (name.clone(), i.has_synced()))
            .collect()
    }

    /// Stops every informer and waits until each has stopped, its handler threads included.
    pub async fn shutdown(&self) {
        self.shut_down.send_replace(true);
        let running: Vec<Running> = self
            .entries
            .lock()
            .values_mut()
            .map(|e| (Arc::clone(&e.informer), e.task.take()))
            .collect();
        for (informer, task) in running {
            informer.shutdown_boxed().await;
            if let Some(task) = task {
                let _ = task.await;
            }
        }
    }
}
