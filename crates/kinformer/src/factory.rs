//! The factory of informers over one client, as client-go's `SharedInformerFactory`.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kinformer_client::{Api, Client};
use kinformer_core::k8s_openapi::Resource;
use kinformer_core::{ApiResource, DynamicObject, ListWatch, Object, PartialObjectMetadata};
use kinformer_shared_informer::{InformerOptions, SharedInformerFactory, Transform};

use crate::{Informer, NotSynced, SyncState};

/// One informer per type and resource over one client, shared by everyone who asks, started,
/// waited for and stopped together: client-go's `SharedInformerFactory`.
///
/// The factory's scope (namespace, selectors) and default resync apply to every informer it
/// makes; a transform is given per type. Each informer is the default pipeline
/// ([`Informer::builder`]).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer::prelude::*;
/// # let sim = kinformer_sim::SimServer::start(kinformer_sim::SimConfig::default()).await?;
/// # sim.store().seed_pods(3, 1);
/// # let client = Client::new(kinformer::client::Config::new(sim.url()))?;
///
/// let factory = Factory::new(client).resync(Duration::from_secs(60));
/// let pods = factory.informer::<Pod>();
/// pods.add_handler(HandlerFns::new().on_add(|pod: &Arc<Pod>, _| println!("added {}", pod.key())))?;
/// factory.start();
/// assert!(factory.wait_synced(None).await);
/// assert_eq!(pods.lister().list(&LabelSelector::everything()).len(), 3);
/// assert!(Arc::ptr_eq(&pods, &factory.informer::<Pod>()), "one informer per type");
/// factory.shutdown().await;
/// # Ok(()) }
/// ```
pub struct Factory {
    inner: SharedInformerFactory<Client>,
    options: InformerOptions,
    transforms: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
    resync_for: Mutex<HashMap<TypeId, Duration>>,
    /// Each informer's sync state, by its key, for a wait that reports.
    states: Mutex<Vec<(String, StateFn)>>,
}

type StateFn = Arc<dyn Fn() -> SyncState + Send + Sync>;

impl fmt::Debug for Factory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Factory")
            .field("informers", &self.inner)
            .field("options", &self.options)
            .field("transforms", &self.transforms.len())
            .finish_non_exhaustive()
    }
}

impl Factory {
    /// A factory over `client`: all namespaces, no selectors, no resync.
    pub fn new(client: Client) -> Self {
        Self {
            inner: SharedInformerFactory::new(client, None),
            options: InformerOptions::default(),
            transforms: HashMap::new(),
            resync_for: Mutex::new(HashMap::new()),
            states: Mutex::new(Vec::new()),
        }
    }

    /// Changes the options of the informers made from now on; one made earlier keeps its own
    /// (one informer per type, resource and options).
    fn with_options(mut self, change: impl FnOnce(&mut InformerOptions)) -> Self {
        change(&mut self.options);
        self
    }

    /// Every informer watches this namespace only (client-go's `WithNamespace`).
    #[must_use]
    pub fn namespace(self, namespace: &str) -> Self {
        self.with_options(|o| o.namespace = Some(namespace.to_owned()))
    }

    /// Every list and watch carries this `labelSelector` (client-go's `WithTweakListOptions`).
    #[must_use]
    pub fn label_selector(self, selector: &str) -> Self {
        self.with_options(|o| o.label_selector = Some(selector.to_owned()))
    }

    /// Every list and watch carries this `fieldSelector`.
    #[must_use]
    pub fn field_selector(self, selector: &str) -> Self {
        self.with_options(|o| o.field_selector = Some(selector.to_owned()))
    }

    /// The resync period of every informer (client-go's `defaultResync`); none by default.
    #[must_use]
    pub fn resync(self, period: Duration) -> Self {
        self.with_options(|o| o.resync_period = Some(period))
    }

    /// The resync period of the informers of `K` (client-go's `WithCustomResyncConfig`).
    #[must_use]
    pub fn resync_for<K: 'static>(self, period: Duration) -> Self {
        self.resync_for
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(TypeId::of::<K>(), period);
        self
    }

    /// A function applied once to every object of type `K` before it is stored (client-go's
    /// `WithTransform`, per type), for example to drop `managedFields`.
    #[must_use]
    pub fn transform<K: Object>(
        mut self,
        f: impl Fn(Arc<K>) -> Arc<K> + Send + Sync + 'static,
    ) -> Self {
        let transform: Transform<K> = Arc::new(f);
        self.transforms
            .insert(TypeId::of::<K>(), Arc::new(transform));
        self
    }

    /// The informer of a built-in or typed resource (`Pod`, `Deployment`, a `kube`-style custom
    /// resource type, or a compact form such as `Compact<Pod>`): made the first time it is asked
    /// for, shared after that. An informer made after [`start`](Self::start) starts at the next
    /// `start`.
    pub fn informer<K>(&self) -> Arc<Informer<K>>
    where
        K: Object + Resource + Send + Sync + 'static,
        Api<K>: ListWatch<K>,
    {
        let resource = ApiResource::of::<K>();
        self.make(&resource, |client, namespace| {
            Api::with_resource(client.clone(), resource.clone(), namespace)
        })
    }

    /// The informer of a resource chosen at run time (a custom resource found through
    /// discovery), as dynamic objects.
    pub fn dynamic(&self, resource: &ApiResource) -> Arc<Informer<DynamicObject>> {
        self.make(resource, |client, namespace| {
            Api::with_resource(client.clone(), resource.clone(), namespace)
        })
    }

    /// The informer of a resource's metadata alone (`PartialObjectMetadata`): client-go's
    /// metadata informer.
    pub fn metadata(&self, resource: &ApiResource) -> Arc<Informer<PartialObjectMetadata>> {
        self.make(resource, |client, namespace| {
            Api::metadata(client.clone(), resource, namespace)
        })
    }

    fn make<K>(
        &self,
        resource: &ApiResource,
        api: impl FnOnce(&Client, Option<&str>) -> Api<K>,
    ) -> Arc<Informer<K>>
    where
        K: Object + Send + Sync + 'static,
        Api<K>: ListWatch<K>,
    {
        let name = if resource.group.is_empty() {
            resource.plural.clone()
        } else {
            format!("{}.{}", resource.plural, resource.group)
        };
        let options = &self.options;
        // One informer per type, resource and options.
        let key = format!(
            "{name} namespace={:?} labels={:?} fields={:?}",
            options.namespace, options.label_selector, options.field_selector
        );
        let transform = self
            .transforms
            .get(&TypeId::of::<K>())
            .and_then(|t| t.downcast_ref::<Transform<K>>())
            .cloned();
        let resync_for = self
            .resync_for
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&TypeId::of::<K>())
            .copied();
        let informer = self.inner.informer_for(&key, |client, _| {
            let mut builder = Informer::<K>::builder()
                .name(name.clone())
                .list_watch(api(client, options.namespace.as_deref()))
                .reflector(kinformer_reflector::Config {
                    label_selector: options.label_selector.clone(),
                    field_selector: options.field_selector.clone(),
                    ..kinformer_reflector::Config::default()
                });
            if let Some(period) = resync_for.or(options.resync_period) {
                builder = builder.resync(period);
            }
            if let Some(transform) = transform {
                builder = builder.transform(move |o| transform(o));
            }
            builder
                .build()
                .expect("the default pipeline with a list/watch always builds")
        });
        let mut states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        if !states.iter().any(|(k, _)| *k == key) {
            let weak = Arc::downgrade(&informer);
            let name = informer.name().to_owned();
            states.push((
                key,
                Arc::new(move || match weak.upgrade() {
                    Some(informer) => informer.sync_state(),
                    None => SyncState {
                        name: name.clone(),
                        synced: false,
                        progress: None,
                        last_error: None,
                    },
                }),
            ));
        }
        informer
    }

    /// Starts every informer not yet running, each on a task of its own (on the current tokio
    /// runtime). Idempotent; after [`shutdown`](Self::shutdown) it starts nothing.
    pub fn start(&self) {
        self.inner.start();
    }

    /// Waits until every started informer has synced (`true`), or `timeout` passes, or one is
    /// shut down first (`false`): client-go's `WaitForCacheSync`.
    pub async fn wait_synced(&self, timeout: Option<Duration>) -> bool {
        let synced = self.inner.wait_for_cache_sync(timeout).await;
        synced.values().all(|s| *s)
    }

    /// Waits at most `timeout` until every started informer has synced, as
    /// [`wait_synced`](Self::wait_synced), and says which did not and why.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer::prelude::*;
    ///
    /// // Nothing listens on this port: the wait ends with the reason.
    /// let client = Client::new(kinformer::client::Config::new("http://127.0.0.1:9"))?;
    /// let factory = Factory::new(client);
    /// let _pods = factory.informer::<Pod>();
    /// factory.start();
    /// let late = factory.wait_synced_for(Duration::from_millis(300)).await.unwrap_err();
    /// assert_eq!(late.informers[0].name, "pods");
    /// assert!(late.to_string().starts_with("1 informer(s) not synced after 0.3 s; pods: "));
    /// factory.shutdown().await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`NotSynced`] naming each informer not synced, how far its list got and its last
    /// retried failure.
    pub async fn wait_synced_for(&self, timeout: Duration) -> Result<(), NotSynced> {
        if self.wait_synced(Some(timeout)).await {
            return Ok(());
        }
        let states: Vec<StateFn> = self
            .states
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(_, f)| Arc::clone(f))
            .collect();
        Err(NotSynced {
            waited: timeout,
            informers: states.iter().map(|f| f()).filter(|s| !s.synced).collect(),
        })
    }

    /// Stops every informer and waits until each has stopped, its handler threads included.
    pub async fn shutdown(&self) {
        self.inner.shutdown().await;
    }

    /// The client every informer lists and watches through.
    pub fn client(&self) -> &Client {
        self.inner.client()
    }
}
