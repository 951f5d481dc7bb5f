//! Where an informer's events come from: any stream of store events (the reflector is a layer
//! like the others), streaming lists by default with a fallback, and the factory's informers.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt as _, stream};
use k8s_openapi::api::core::v1::Pod;
use kinformer::core::{CacheRead, ObjectKey, StoreEvent};
use kinformer::prelude::*;
use kinformer_sim::{RequestKind, SimConfig, SimServer};
use kinformer_test_support::{Heard, Recorder};

fn pod(name: &str, version: u64) -> Pod {
    let mut p = Pod::default();
    p.metadata.name = Some(name.to_owned());
    p.metadata.namespace = Some("ns".to_owned());
    p.metadata.resource_version = Some(version.to_string());
    p
}

/// The events of another watcher library, shaped as kube-runtime's `watcher::Event`: a relist
/// is `Init`, an `InitApply` per object and `InitDone`; a watch applies or deletes.
enum Foreign {
    Init,
    InitApply(Pod),
    InitDone,
    Apply(Pod),
    Delete(Pod),
}

/// The whole adapter from that library to an informer: a `map`.
fn adapt(event: Foreign) -> StoreEvent<Pod> {
    match event {
        Foreign::Init => StoreEvent::RelistBegin,
        Foreign::InitApply(p) => StoreEvent::RelistPage(vec![Arc::new(p)]),
        Foreign::InitDone => StoreEvent::RelistEnd("".into()),
        Foreign::Apply(p) => StoreEvent::Modified(Arc::new(p)),
        Foreign::Delete(p) => StoreEvent::Deleted(Arc::new(p)),
    }
}

/// Writes down every call, one line each: `add key initial`, `update key`, `delete key`.
fn recorder() -> Recorder<Pod> {
    Recorder::with_format(|heard: &Heard<'_, Pod>| match heard {
        Heard::Add { object, initial } => format!("add {} {initial}", object.key()),
        Heard::Update { new, .. } => format!("update {}", new.key()),
        Heard::Delete(o) => format!("delete {}", o.key()),
    })
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_runs_from_another_watchers_events_through_a_map() {
    let foreign = stream::iter([
        Foreign::Init,
        Foreign::InitApply(pod("a", 1)),
        Foreign::InitApply(pod("b", 2)),
        Foreign::InitDone,
        Foreign::Apply(pod("c", 3)),
        Foreign::Apply(pod("a", 4)),
        Foreign::Delete(pod("b", 5)),
    ])
    .chain(stream::pending());
    let lines = recorder();
    let pods = Informer::<Pod>::builder()
        .events(foreign.map(adapt))
        .handler(lines.clone())
        .build()
        .unwrap();
    pods.start();
    assert!(pods.wait_synced(Some(Duration::from_secs(10))).await);
    eventually("every event", || lines.len() == 5).await;
    assert_eq!(
        lines.lines(),
        [
            "add ns/a true",
            "add ns/b true",
            "add ns/c false",
            "update ns/a",
            "delete ns/b"
        ]
    );
    let mut keys = pods.cache().list_keys();
    keys.sort();
    assert_eq!(
        keys,
        [
            ObjectKey::new(Some("ns"), "a"),
            ObjectKey::new(Some("ns"), "c")
        ]
    );
    let lister = pods.lister();
    assert!(lister.namespaced("ns").get("b").is_err());
    assert_eq!(pods.name(), "pod", "named after the object type");
    pods.shutdown().await;
}

/// The pod requests the server saw, as `list` or `watch` with whether it asked for initial
/// events.
fn pod_requests(sim: &SimServer) -> Vec<String> {
    sim.requests()
        .iter()
        .filter(|r| r.path == "/api/v1/pods")
        .map(|r| match (r.is_watch(), r.param("sendInitialEvents")) {
            (true, Some("true")) => "streaming list".to_owned(),
            (true, _) => "watch".to_owned(),
            (false, _) => "list".to_owned(),
        })
        .collect()
}

/// The `Accept-Encoding` of each pod request, in order.
fn accept_encodings(sim: &SimServer) -> Vec<String> {
    sim.requests()
        .iter()
        .filter(|r| r.path == "/api/v1/pods")
        .map(|r| r.accept_encoding.clone().unwrap_or_default())
        .collect()
}

async fn client(sim: &SimServer) -> Client {
    Client::new(kinformer::client::Config::new(sim.url())).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_lists_are_the_default_and_a_server_that_refuses_them_is_listed() {
    // A server that serves them: one streaming list, which goes on as the watch.
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(5, 1);
    let pods = Informer::<Pod>::builder()
        .list_watch(Api::all(client(&sim).await))
        .build()
        .unwrap();
    pods.start();
    assert!(pods.wait_synced(Some(Duration::from_secs(20))).await);
    assert_eq!(pods.cache().list_keys().len(), 5);
    assert_eq!(pod_requests(&sim), ["streaming list"]);
    // It carries the whole state, as a list does: it may come compressed, as client-go asks.
    assert!(
        accept_encodings(&sim)[0].contains("gzip"),
        "{:?}",
        accept_encodings(&sim)
    );
    pods.shutdown().await;

    // A server that answers 422, as one without the feature does: listed, then watched, and
    // not asked again for a streaming list.
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(5, 1);
    sim.faults().fail_next(RequestKind::Watch, 422, 1, None);
    let factory = Factory::new(client(&sim).await);
    let pods = factory.informer::<Pod>();
    factory.start();
    assert!(factory.wait_synced(Some(Duration::from_secs(20))).await);
    assert_eq!(pods.cache().list_keys().len(), 5);
    eventually("the watch", || pod_requests(&sim).len() == 3).await;
    assert_eq!(pod_requests(&sim), ["streaming list", "list", "watch"]);
    // A plain watch's events come one by one: never compressed.
    assert_eq!(accept_encodings(&sim)[2], "identity");
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_factory_shares_one_informer_per_type_and_options_and_stops_them_all() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(20, 2);
    let factory = Factory::new(client(&sim).await)
        .resync(Duration::from_secs(600))
        .transform(|p: Arc<Pod>| {
            let mut p = Pod::clone(&p);
            p.metadata.managed_fields = None;
            p.metadata
                .annotations
                .get_or_insert_default()
                .insert("transformed".into(), "yes".into());
            Arc::new(p)
        });
    let pods = factory.informer::<Pod>();
    assert!(Arc::ptr_eq(&pods, &factory.informer::<Pod>()));
    let compact = factory.informer::<Compact<Pod>>();
    let metadata = factory.metadata(&ApiResource::of::<Pod>());
    assert_eq!(pods.name(), "pods");
    let factory = factory.namespace("shop");
    let scoped = factory.informer::<Pod>();
    assert!(
        !Arc::ptr_eq(&pods, &scoped),
        "other options, another informer"
    );

    let lines = recorder();
    pods.add_handler(lines.clone()).unwrap();
    factory.start();
    assert!(factory.wait_synced(Some(Duration::from_secs(20))).await);
    let all = pods.lister().list(&LabelSelector::everything());
    assert_eq!(
        all.len(),
        sim.store().list(&ApiResource::of::<Pod>(), None).len()
    );
    assert!(
        all.iter()
            .all(|p| p.metadata.annotations.as_ref().unwrap()["transformed"] == "yes")
    );
    assert_eq!(compact.cache().list_keys().len(), all.len());
    assert_eq!(metadata.cache().list_keys().len(), all.len());
    assert!(
        scoped
            .cache()
            .list_keys()
            .iter()
            .all(|k| k.namespace() == Some("shop"))
    );
    eventually("the handler", || lines.len() == all.len()).await;

    factory.shutdown().await;
    // Every informer is stopped: no handler can be added, and waits end at once.
    assert!(matches!(
        pods.add_handler(recorder()),
        Err(kinformer::Error::Informer(_))
    ));
    assert!(scoped.add_handler(recorder()).is_err());
}

#[tokio::test]
async fn wait_synced_returns_false_as_soon_as_the_informer_is_shut_down() {
    let pods = Arc::new(
        Informer::<Pod>::builder()
            .events(stream::pending())
            .build()
            .unwrap(),
    );
    pods.start();
    let waiting = tokio::spawn({
        let pods = Arc::clone(&pods);
        async move { pods.wait_synced(None).await }
    });
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished());
    pods.shutdown().await;
    let synced = tokio::time::timeout(Duration::from_secs(5), waiting).await;
    assert!(!synced.expect("the wait ends at shutdown").unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_fields_are_stripped_before_the_transform_and_the_cache() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let pods = ApiResource::of::<Pod>();
    let with_fields = |name: &str| {
        serde_json::json!({
            "metadata": {"name": name, "namespace": "shop", "managedFields": [{
                "manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:containers": {}}}
            }]},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]}
        })
    };
    sim.store().create(&pods, with_fields("listed")).unwrap();
    let seen_by_transform = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&seen_by_transform);
    let informer = Informer::<Pod>::builder()
        .list_watch(Api::all(client(&sim).await))
        .strip_managed_fields()
        .transform(move |p: Arc<Pod>| {
            seen.lock()
                .unwrap()
                .push(p.metadata.managed_fields.is_some());
            p
        })
        .build()
        .unwrap();
    informer.start();
    assert!(informer.wait_synced(Some(Duration::from_secs(20))).await);
    // Watched as well as listed.
    sim.store().create(&pods, with_fields("watched")).unwrap();
    let lister = informer.lister();
    eventually("the watched pod", || {
        lister.list(&LabelSelector::everything()).len() == 2
    })
    .await;

    let server = sim.store().list(&pods, None);
    assert!(
        server
            .iter()
            .all(|p| p["metadata"]["managedFields"].is_array())
    );
    let cached = lister.list(&LabelSelector::everything());
    assert!(cached.iter().all(|p| p.metadata.managed_fields.is_none()));
    assert!(
        cached
            .iter()
            .all(|p| p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some("nginx"))
    );
    // The user's transform ran after the strip, on every object.
    let seen = seen_by_transform.lock().unwrap().clone();
    assert_eq!(seen, [false, false]);
    informer.shutdown().await;
}
