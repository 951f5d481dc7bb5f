//! The factory against the simulated server: sharing, scope, per-type resync, start, sync and
//! shutdown, and dynamic and metadata-only informers built through it.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_client::{Api, Client, Config as ClientConfig};
use kinformer_core::{ApiResource, CacheRead, DynamicObject, Object, PartialObjectMetadata, Scope};
use kinformer_delta_fifo::DeltaFifo;
use kinformer_indexer::Indexer;
use kinformer_shared_informer::{
    InformerConfig, InformerOptions, SharedIndexInformer, SharedInformerFactory,
};
use kinformer_sim::{SimConfig, SimServer};
use serde_json::json;

fn pods() -> ApiResource {
    ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced)
}

fn widgets() -> ApiResource {
    ApiResource::new("example.com", "v1", "Widget", "widgets", Scope::Namespaced)
}

fn config<K>(name: &str, options: &InformerOptions) -> InformerConfig<K> {
    InformerConfig {
        name: name.into(),
        resync_period: options.resync_period,
        ..InformerConfig::default()
    }
}

/// The reflector over `api` with the factory's scope. It lists and watches (no streaming list),
/// so that the sharing shows in the list requests counted here.
fn events<K>(api: Api<K>, name: &str, options: &InformerOptions) -> kinformer_reflector::Watcher<K>
where
    K: kinformer_core::Object + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    let config = kinformer_reflector::Config {
        name: name.into(),
        label_selector: options.label_selector.clone(),
        field_selector: options.field_selector.clone(),
        seed: Some(5),
        streaming_list: kinformer_reflector::StreamingList::Off,
        ..kinformer_reflector::Config::default()
    };
    kinformer_reflector::watcher(api, config)
}

type Informer<K> = SharedIndexInformer<K, DeltaFifo<K>, Indexer<K>>;

fn typed_pods(client: &Client, options: &InformerOptions) -> Informer<Pod> {
    let api = match &options.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let cache = Arc::new(Indexer::new());
    let queue = Arc::new(DeltaFifo::new(cache.clone()));
    SharedIndexInformer::new(
        events(api, "factory-pods", options),
        queue,
        cache,
        config("factory-pods", options),
    )
}

fn pod_metadata(client: &Client, options: &InformerOptions) -> Informer<PartialObjectMetadata> {
    let api = Api::metadata(client.clone(), &pods(), options.namespace.as_deref());
    let cache = Arc::new(Indexer::new());
    let queue = Arc::new(DeltaFifo::new(cache.clone()));
    SharedIndexInformer::new(
        events(api, "factory-meta", options),
        queue,
        cache,
        config("factory-meta", options),
    )
}

fn dynamic(resource: ApiResource) -> impl Fn(&Client, &InformerOptions) -> Informer<DynamicObject> {
    move |client, options| {
        let api = match &options.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let cache = Arc::new(Indexer::new());
        let queue = Arc::new(DeltaFifo::new(cache.clone()));
        SharedIndexInformer::new(
            events(api, "factory-dyn", options),
            queue,
            cache,
            config("factory-dyn", options),
        )
    }
}

fn lists(sim: &SimServer, path: &str) -> usize {
    sim.requests()
        .iter()
        .filter(|r| r.path == path && !r.is_watch())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_factory_shares_one_informer_per_type_and_runs_them_together() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(12, 1);
    sim.store().register_crd(widgets());
    for name in ["a", "b"] {
        sim.store()
            .create(
                &widgets(),
                json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "namespace": "default"}, "spec": {"size": 3}}),
            )
            .unwrap();
    }
    let client = Client::new(ClientConfig::new(sim.url())).unwrap();
    let factory = SharedInformerFactory::new(client, Some(Duration::from_secs(600)));
    factory.set_resync_for("pods-metadata", Duration::from_secs(60));

    let pods_informer = factory.informer_for("pods", typed_pods);
    assert!(Arc::ptr_eq(
        &pods_informer,
        &factory.informer_for("pods", typed_pods)
    ));
    let metadata = factory.informer_for("pods-metadata", pod_metadata);
    let widgets_informer = factory.informer_for("widgets.example.com", dynamic(widgets()));

    factory.start();
    factory.start();
    let synced = factory
        .wait_for_cache_sync(Some(Duration::from_secs(20)))
        .await;
    assert_eq!(synced.len(), 3);
    assert!(synced.values().all(|s| *s), "{synced:?}");

    // One list each: starting twice started nothing twice.
    assert_eq!(lists(&sim, "/api/v1/pods"), 2, "typed and metadata-only");
    assert_eq!(lists(&sim, "/apis/example.com/v1/widgets"), 1);

    assert_eq!(pods_informer.cache().list_keys().len(), 12);
    let meta = metadata.cache().list();
    assert_eq!(meta.len(), 12);
    assert!(meta.iter().all(|m| m.resource_version().is_some()));
    let widget = widgets_informer.cache().get_by_key("default/a").unwrap();
    assert_eq!(widget.data["spec"]["size"], 3);
    assert_eq!(widget.types.kind, "Widget");

    factory.shutdown().await;
    assert!(
        factory
            .wait_for_cache_sync(Some(Duration::ZERO))
            .await
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_factory_scope_and_per_type_resync_reach_each_informer() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(40, 1);
    let client = Client::new(ClientConfig::new(sim.url())).unwrap();
    let factory = SharedInformerFactory::with_options(
        client,
        InformerOptions {
            namespace: Some("shop".into()),
            label_selector: Some("tier=frontend".into()),
            resync_period: Some(Duration::from_secs(600)),
            ..InformerOptions::default()
        },
    );
    factory.set_resync_for("pods", Duration::from_secs(30));
    let seen = std::sync::Mutex::new(None);
    let informer = factory.informer_for("pods", |client: &Client, options: &InformerOptions| {
        *seen.lock().unwrap() = Some(options.clone());
        typed_pods(client, options)
    });
    let options = seen.lock().unwrap().clone().unwrap();
    assert_eq!(options.resync_period, Some(Duration::from_secs(30)));
    factory.start();
    assert!(
        factory
            .wait_for_cache_sync(Some(Duration::from_secs(20)))
            .await
            .values()
            .all(|s| *s)
    );
    let list = sim
        .requests()
        .into_iter()
        .find(|r| !r.is_watch() && r.path.ends_with("/pods"))
        .unwrap();
    assert_eq!(list.path, "/api/v1/namespaces/shop/pods");
    assert_eq!(list.param("labelSelector"), Some("tier=frontend"));
    let expected = sim
        .store()
        .list(&pods(), Some("shop"))
        .iter()
        .filter(|p| p["metadata"]["labels"]["tier"] == "frontend")
        .count();
    assert!(
        expected > 0 && expected < 8,
        "the scope selects some pods: {expected}"
    );
    assert_eq!(informer.cache().list_keys().len(), expected);
    factory.shutdown().await;
}
