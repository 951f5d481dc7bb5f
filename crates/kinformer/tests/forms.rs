//! One suite, run over each cache form of a pod: the typed `Pod`, `Compact<Pod>` and
//! `Compressed<Pod>`. Each informer is the facade's default pipeline against the simulated
//! server over HTTP; the suite checks what handlers hear (adds, updates, deletes, tombstones after
//! a relist), what the cache and the lister answer (by key, by namespace, by label selector, by a
//! label index and by a custom index that reads the typed object), and that every cached object
//! types to exactly what the server holds.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::{Arc, Once};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer::compact::{Codec, CodecConfig, Form};
use kinformer::indexer::{Indexer, index};
use kinformer::prelude::*;
use kinformer_sim::{SimConfig, SimServer};
use kinformer_test_support::{Heard, Recorder};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// What the suite needs of a form: an object the client decodes, that types to a `Pod`, and that
/// names the pods resource.
trait PodForm:
    Form<Pod>
    + DeserializeOwned
    + k8s_openapi::Resource<Scope = k8s_openapi::NamespaceResourceScope>
    + Debug
{
}
impl<F> PodForm for F where
    F: Form<Pod>
        + DeserializeOwned
        + k8s_openapi::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Debug
{
}

const BY_APP: &str = "by-app";
const BY_NODE: &str = "by-node";

fn pods() -> ApiResource {
    ApiResource::of::<Pod>()
}

/// The default pipeline over `F`, with a label index and a custom index on `spec.nodeName`
/// (which only the typed object knows), recording what its handler hears.
async fn start<F: PodForm>(sim: &SimServer) -> (Informer<F>, Recorder<F>) {
    small_dictionary();
    let cache = Indexer::<F>::with_indexers([
        (index::NAMESPACE.to_string(), index::namespace()),
        (BY_APP.to_string(), index::label("app")),
        (
            BY_NODE.to_string(),
            index::func(|p: &F| {
                let pod = p.typed().map_err(|e| e.to_string())?;
                Ok(pod.spec.and_then(|s| s.node_name).into_iter().collect())
            }),
        ),
    ])
    .unwrap();
    let client = Client::new(kinformer::client::Config::new(sim.url())).unwrap();
    let record = record::<F>();
    let informer = Informer::<F>::builder()
        .list_watch(Api::<F>::all(client))
        .cache(Arc::new(cache))
        .reflector(kinformer::reflector::Config {
            name: "pods".into(),
            seed: Some(3),
            backoff: kinformer::reflector::BackoffConfig {
                initial: Duration::from_millis(5),
                max: Duration::from_millis(50),
                ..kinformer::reflector::BackoffConfig::default()
            },
            ..kinformer::reflector::Config::default()
        })
        .handler(record.clone())
        .build()
        .unwrap();
    informer.start();
    assert!(informer.wait_synced(Some(Duration::from_secs(30))).await);
    (informer, record)
}

/// Makes the compressed form train its dictionary on the first 16 pods, so that the suite's
/// compressed informers hold pods compressed both without and with a dictionary.
fn small_dictionary() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        Codec::set::<Pod>(Codec::new(CodecConfig {
            train_after: 16,
            dictionary_size: 8 * 1024,
            ..CodecConfig::default()
        }));
    });
}

/// What a handler hears, one line per call: `add key rv`, `update key rv>rv`, `delete key rv`,
/// `tombstone key rv`, plus the pod's phase read from the typed object (so every form pays for
/// what a real handler reads).
fn record<F: PodForm>() -> Recorder<F> {
    Recorder::with_format(|heard: &Heard<'_, F>| match heard {
        Heard::Add { object, .. } => {
            format!(
                "add {} {} {}",
                object.key(),
                rv(&***object),
                phase(&***object)
            )
        }
        other => other.to_string(),
    })
}

fn rv<F: Object>(o: &F) -> &str {
    o.resource_version().unwrap_or("")
}

fn phase<F: Form<Pod>>(o: &F) -> String {
    let pod = o.typed().expect("every cached object types");
    pod.status.and_then(|s| s.phase).unwrap_or_default()
}

/// Waits, in bounded steps, until `cond` holds.
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..4000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for {what}");
}

fn create(sim: &SimServer, name: &str, app: &str, node: &str) {
    sim.store()
        .create(
            &pods(),
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}]},
                "status": {"phase": "Pending"}}),
        )
        .unwrap();
}

fn patch(sim: &SimServer, name: &str, patch: Value) {
    sim.store()
        .patch(&pods(), Some("default"), name, patch)
        .unwrap();
}

fn delete(sim: &SimServer, name: &str) {
    sim.store().delete(&pods(), Some("default"), name).unwrap();
}

/// Waits until the cache holds the server's latest resource version: not only the reflector's
/// last synced version, which moves when an event is queued, before the cache applies it. The
/// handlers hear an event after the cache holds it, so a test that needs them waits for them.
async fn caught_up<F: PodForm>(sim: &SimServer, informer: &Informer<F>) {
    let last: kinformer::core::ResourceVersion = sim.store().resource_version().to_string().into();
    informer
        .wait_until_fresh(&last, Duration::from_secs(10))
        .await
        .expect("the cache to catch up with the server");
}

/// The server's pods, decoded as typed pods by key.
fn server_pods(sim: &SimServer) -> BTreeMap<String, Pod> {
    sim.store()
        .list(&pods(), None)
        .into_iter()
        .map(|v| {
            let pod: Pod = serde_json::from_value(v).unwrap();
            (pod.key().to_string(), pod)
        })
        .collect()
}

/// The cache holds exactly the server's pods, and each types to the server's pod.
fn assert_cache_is_server<F: PodForm>(sim: &SimServer, informer: &Informer<F>) {
    let server = server_pods(sim);
    let cached: BTreeMap<String, Pod> = informer
        .cache()
        .list()
        .iter()
        .map(|o| (o.key().to_string(), o.typed().unwrap()))
        .collect();
    assert_eq!(
        cached.keys().collect::<Vec<_>>(),
        server.keys().collect::<Vec<_>>()
    );
    assert!(
        cached == server,
        "a cached object differs from the server's"
    );
}

fn keys<F: Object>(objects: &[Arc<F>]) -> BTreeSet<String> {
    objects.iter().map(|o| o.key().to_string()).collect()
}

/// Adds, updates and deletes reach the handler in order, per key, after the cache holds them;
/// the cache ends equal to the server.
async fn handlers_hear_every_change<F: PodForm>() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(20, 1);
    let (informer, record) = start::<F>(&sim).await;
    eventually("the seeded pods' adds", || record.lines().len() == 20).await;
    assert!(
        record.lines().iter().all(|l| !l.ends_with(' ')),
        "each seeded pod has a phase: {:?}",
        record.lines()
    );
    create(&sim, "w0", "web", "node-a");
    create(&sim, "w1", "web", "node-a");
    patch(&sim, "w0", json!({"status": {"phase": "Running"}}));
    delete(&sim, "w1");
    caught_up(&sim, &informer).await;
    let w0 = sim.store().get(&pods(), Some("default"), "w0").unwrap();
    let w0_rv = w0["metadata"]["resourceVersion"].as_str().unwrap();
    eventually("the handler to hear the delete", || {
        record
            .lines()
            .iter()
            .any(|l| l.starts_with("delete default/w1"))
    })
    .await;
    let heard: Vec<String> = record.lines()[20..].to_vec();
    assert_eq!(heard.len(), 4, "{heard:?}");
    assert!(heard[0].starts_with("add default/w0 ") && heard[0].ends_with(" Pending"));
    assert!(heard[1].starts_with("add default/w1 "));
    assert!(
        heard[2].starts_with("update default/w0 ") && heard[2].ends_with(&format!(">{w0_rv}")),
        "{heard:?}"
    );
    assert!(heard[3].starts_with("delete default/w1 "), "{heard:?}");
    let cached = informer.cache().get_by_key("default/w0").unwrap();
    assert_eq!(phase(&*cached), "Running");
    assert_eq!(rv(&*cached), w0_rv);
    assert_cache_is_server(&sim, &informer);
    informer.shutdown().await;
}

/// The lister and the indexes answer as the server's state says, by key, by namespace, by label
/// selector, by a label index and by a custom index over the typed object; and they follow
/// updates that move an object between index values and deletes that remove it.
async fn lister_and_indexes_answer_as_the_server<F: PodForm>() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(60, 7);
    let (informer, _record) = start::<F>(&sim).await;
    let lister = informer.lister();
    let server = server_pods(&sim);

    let app = |p: &Pod| {
        p.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .cloned()
    };
    let node = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone());
    let expect = |f: &dyn Fn(&Pod) -> bool| -> BTreeSet<String> {
        server
            .iter()
            .filter(|(_, p)| f(p))
            .map(|(k, _)| k.clone())
            .collect()
    };

    // Label selector, across namespaces and in one.
    let web: LabelSelector = "app in (web, api)".parse().unwrap();
    let want = expect(&|p| matches!(app(p).as_deref(), Some("web" | "api")));
    assert!(!want.is_empty());
    assert_eq!(keys(&lister.list(&web)), want);
    let want_shop = expect(&|p| {
        p.metadata.namespace.as_deref() == Some("shop")
            && matches!(app(p).as_deref(), Some("web" | "api"))
    });
    assert_eq!(keys(&lister.namespaced("shop").list(&web)), want_shop);
    // By namespace, and by name within it.
    let in_shop = expect(&|p| p.metadata.namespace.as_deref() == Some("shop"));
    assert_eq!(
        keys(&lister.namespaced("shop").list(&LabelSelector::everything())),
        in_shop
    );
    let (some_key, some_pod) = server.iter().next().unwrap();
    let (ns, name) = some_key.split_once('/').unwrap();
    let got = lister.namespaced(ns).get(name).unwrap();
    assert_eq!(got.typed().unwrap(), *some_pod);
    assert!(lister.namespaced(ns).get("no-such-pod").is_err());
    // The label index and the custom index over the typed object.
    for value in ["web", "worker"] {
        assert_eq!(
            keys(&lister.by_index(BY_APP, value).unwrap()),
            expect(&|p| app(p).as_deref() == Some(value))
        );
    }
    let some_node = node(some_pod).unwrap();
    let on_node = expect(&|p| node(p).as_deref() == Some(&some_node));
    assert_eq!(
        keys(&lister.by_index(BY_NODE, &some_node).unwrap()),
        on_node
    );

    // An update moves a pod between index values; a delete takes it out of every index.
    create(&sim, "mover", "web", "node-x");
    eventually("the new pod in the custom index", || {
        lister.by_index(BY_NODE, "node-x").unwrap().len() == 1
    })
    .await;
    assert_eq!(
        keys(&lister.by_index(BY_NODE, "node-x").unwrap()),
        BTreeSet::from(["default/mover".to_string()])
    );
    patch(
        &sim,
        "mover",
        json!({"metadata": {"labels": {"app": "batch"}}, "spec": {"nodeName": "node-y"}}),
    );
    eventually("the update in the custom index", || {
        lister.by_index(BY_NODE, "node-y").unwrap().len() == 1
    })
    .await;
    assert!(lister.by_index(BY_NODE, "node-x").unwrap().is_empty());
    assert_eq!(
        keys(&lister.by_index(BY_APP, "batch").unwrap()),
        BTreeSet::from(["default/mover".to_string()])
    );
    assert!(
        !keys(&lister.list(&"app=web".parse().unwrap())).contains("default/mover"),
        "the selector sees the new label"
    );
    delete(&sim, "mover");
    eventually("the delete in the cache", || {
        lister.namespaced("default").get("mover").is_err()
    })
    .await;
    assert!(lister.by_index(BY_NODE, "node-y").unwrap().is_empty());
    assert!(lister.by_index(BY_APP, "batch").unwrap().is_empty());
    assert_cache_is_server(&sim, &informer);
    informer.shutdown().await;
}

/// A delete the watch missed is found by the relist that follows a 410, and reaches the handler
/// as a tombstone carrying the last state the cache held; the unchanged pods cause no update, and
/// a pod changed while the watch was down arrives as an update.
async fn a_relist_after_gone_gives_tombstones_and_updates<F: PodForm>() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(5, 1);
    create(&sim, "doomed", "web", "node-a");
    create(&sim, "changed", "web", "node-a");
    let doomed_rv =
        sim.store().get(&pods(), Some("default"), "doomed").unwrap()["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_owned();
    let (informer, record) = start::<F>(&sim).await;
    eventually("the listed pods' adds", || record.lines().len() == 7).await;
    let before = record.lines().len();
    // The open watch ends before it can deliver the writes, the next one answers 410, and the
    // relist finds one pod gone and one changed.
    sim.faults().close_watches_after_events(0);
    sim.faults().gone_next_watch();
    delete(&sim, "doomed");
    patch(&sim, "changed", json!({"status": {"phase": "Running"}}));
    eventually("the tombstone", || {
        record.lines().iter().any(|l| l.starts_with("tombstone"))
    })
    .await;
    sim.faults().clear();
    caught_up(&sim, &informer).await;
    eventually("the update", || {
        record
            .lines()
            .iter()
            .any(|l| l.starts_with("update default/changed"))
    })
    .await;
    let after: Vec<String> = record.lines()[before..].to_vec();
    assert!(
        after.contains(&format!("tombstone default/doomed {doomed_rv}")),
        "{after:?}"
    );
    assert_eq!(after.len(), 2, "only the delete and the change: {after:?}");
    assert_eq!(
        phase(&*informer.cache().get_by_key("default/changed").unwrap()),
        "Running"
    );
    assert_cache_is_server(&sim, &informer);
    informer.shutdown().await;
}

/// Instantiates the suite for one form.
macro_rules! suite {
    ($($form:ident: $ty:ty),* $(,)?) => {$(
        mod $form {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn handlers_hear_every_change() {
                super::handlers_hear_every_change::<$ty>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn lister_and_indexes_answer_as_the_server() {
                super::lister_and_indexes_answer_as_the_server::<$ty>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_relist_after_gone_gives_tombstones_and_updates() {
                super::a_relist_after_gone_gives_tombstones_and_updates::<$ty>().await;
            }
        }
    )*};
}

suite! {
    typed: Pod,
    compact: Compact<Pod>,
    compressed: Compressed<Pod>,
}

/// Once the shared codec has seen its 16 samples, a compressed informer's pods are compressed
/// with the trained dictionary, and still type to the server's pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressed_cache_uses_the_trained_dictionary() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(40, 5);
    let (informer, _record) = start::<Compressed<Pod>>(&sim).await;
    assert!(Codec::of::<Pod>().dictionary().is_some());
    let cached = informer.cache().list();
    assert!(cached.iter().any(|p| p.has_dictionary()));
    assert_cache_is_server(&sim, &informer);
    informer.shutdown().await;
}
