//! Partitioned sources over HTTP against the simulated API server: shard ranges that change
//! without a relist of what is kept, and namespace sets that change while events flow. Each
//! test ends at quiescence with the cache equal to the server's objects in scope, and the
//! handlers' story consistent with it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinformer_client::{Api, Client, Config as ClientConfig};
use kinformer_core::shard::{ShardKey, ShardOwner, ShardRange, ShardRanges};
use kinformer_core::{BoxListWatch, CacheRead, Object, StoreEvent};
use kinformer_delta_fifo::DeltaFifo;
use kinformer_indexer::Indexer;
use kinformer_partition::{NamespaceScope, PartitionedEvents};
use kinformer_reflector::Config;
use kinformer_shared_informer::{InformerConfig, SharedIndexInformer};
use kinformer_sim::{SimConfig, SimServer};
use kinformer_test_support::Recorder;

type Informer = SharedIndexInformer<ConfigMap, DeltaFifo<ConfigMap>, Indexer<ConfigMap>>;

struct Running {
    informer: Arc<Informer>,
    heard: Recorder<ConfigMap>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start(events: PartitionedEvents<ConfigMap>) -> Self {
        let cache = Arc::new(Indexer::<ConfigMap>::new());
        let queue = Arc::new(DeltaFifo::new(cache.clone()));
        let config = InformerConfig {
            merged_source: true,
            ..InformerConfig::default()
        };
        let informer = Arc::new(SharedIndexInformer::new(events, queue, cache, config));
        let heard = Recorder::new();
        informer.add_handler(heard.clone()).unwrap();
        let task = tokio::spawn({
            let informer = Arc::clone(&informer);
            async move { informer.run().await }
        });
        Self {
            informer,
            heard,
            task,
        }
    }

    fn keys(&self) -> BTreeSet<String> {
        self.informer
            .cache()
            .list_keys()
            .into_iter()
            .map(|k| k.to_string())
            .collect()
    }

    async fn stop(self) {
        self.informer.shutdown().await;
        self.task.await.unwrap();
    }
}

/// What the handlers were told, replayed: key to the version last heard. An add only for a key
/// not held, an update or a delete only for one held, and an update only from what was heard
/// last. (An object may leave the scope and come back unchanged, so an add may repeat a version
/// the key had before its delete.)
fn story(heard: &Recorder<ConfigMap>) -> std::collections::BTreeMap<String, String> {
    let mut held = std::collections::BTreeMap::new();
    for line in heard.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words[..] {
            ["add", key, rv, _] => {
                assert!(
                    held.insert(key.to_string(), rv.to_string()).is_none(),
                    "{line}: held"
                );
            }
            ["update", key, versions] => {
                let (old, new) = versions.split_once('>').unwrap();
                let was = held.insert(key.to_string(), new.to_string());
                assert_eq!(was.as_deref(), Some(old), "{line}");
            }
            ["delete" | "tombstone", key, _] => {
                assert!(held.remove(key).is_some(), "{line}: not held");
            }
            _ => panic!("unexpected line {line}"),
        }
    }
    held
}

/// The cache as key to resourceVersion.
fn cached(informer: &Informer) -> std::collections::BTreeMap<String, String> {
    informer
        .cache()
        .list()
        .iter()
        .map(|c| {
            (
                c.key().to_string(),
                c.metadata.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// Polls `check` until it holds, for at most 20 s (a loaded machine is slow, never wrong).
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn configmap(ns: &str, name: &str, n: u64) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..ObjectMeta::default()
        },
        data: Some([("n".to_string(), n.to_string())].into()),
        ..ConfigMap::default()
    }
}

fn namespace(name: &str, team: Option<&str>) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: team.map(|t| [("team".to_string(), t.to_string())].into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}

/// The server's configmaps that `keep` selects, as keys.
fn server_keys(sim: &SimServer, keep: impl Fn(&ConfigMap) -> bool) -> BTreeSet<String> {
    sim.store()
        .list_typed::<ConfigMap>(None)
        .unwrap()
        .iter()
        .filter(|c| keep(c))
        .map(|c| c.key().to_string())
        .collect()
}

async fn sim_with_namespaces(names: &[&str]) -> SimServer {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    for ns in names {
        sim.store().create_typed(&namespace(ns, None)).unwrap();
    }
    sim
}

fn client(sim: &SimServer) -> Client {
    Client::new(ClientConfig::new(sim.url())).unwrap()
}

fn quarter(i: u64) -> ShardRange {
    ShardRange::new(i << 62, u128::from(i + 1) << 62).unwrap()
}

/// Requests that list: a plain list, or a watch that sends its initial events.
fn lists(sim: &SimServer) -> usize {
    sim.requests()
        .iter()
        .filter(|r| r.path.ends_with("/configmaps"))
        .filter(|r| !r.is_watch() || r.param("sendInitialEvents") == Some("true"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_change_keeps_what_stays_without_a_relist() {
    let sim = sim_with_namespaces(&["a", "b", "c"]).await;
    for i in 0..90 {
        let ns = ["a", "b", "c"][i % 3];
        sim.store()
            .create_typed(&configmap(ns, &format!("cm-{i}"), 0))
            .unwrap();
    }
    let first = ShardRanges::new(ShardKey::Uid, [quarter(0), quarter(1)]);
    let (events, shards) = kinformer_partition::sharded(
        Api::<ConfigMap>::all(client(&sim)),
        first.clone(),
        Config::default(),
    );
    let run = Running::start(events);
    assert!(run.informer.wait_synced().await);
    assert_eq!(run.keys(), server_keys(&sim, |c| first.contains(c)));

    // Keep the first quarter, give up the second, take the third.
    let second = ShardRanges::new(ShardKey::Uid, [quarter(0), quarter(2)]);
    let given_up = ShardRanges::new(ShardKey::Uid, [quarter(1)]);
    let kept_before: Vec<Arc<ConfigMap>> = run
        .informer
        .cache()
        .list()
        .into_iter()
        .filter(|c| second.contains(&**c))
        .collect();
    assert!(!kept_before.is_empty());
    sim.clear_requests();
    let owner = shards.owner(run.informer.cache().clone());
    owner.set_ranges(second.clone()).await;
    // The owner returns only once nothing given up is cached.
    assert!(
        run.informer
            .cache()
            .list()
            .iter()
            .all(|c| !given_up.contains(&**c))
    );
    assert_eq!(shards.ranges(), second);

    // Events keep flowing in every quarter while the new range joins.
    for i in 90..150 {
        let ns = ["a", "b", "c"][i % 3];
        sim.store()
            .create_typed(&configmap(ns, &format!("cm-{i}"), 0))
            .unwrap();
    }
    for i in (0..150).step_by(7) {
        let ns = ["a", "b", "c"][i % 3];
        sim.store()
            .delete_typed::<ConfigMap>(Some(ns), &format!("cm-{i}"))
            .unwrap();
    }
    eventually("the cache holds the new ranges", || {
        run.keys() == server_keys(&sim, |c| second.contains(c))
    })
    .await;

    // One list, of the range taken; the kept objects are the very ones decoded before.
    assert_eq!(lists(&sim), 1, "{:#?}", sim.requests());
    for old in &kept_before {
        if let Some(now) = run.informer.cache().get_by_key(old.key().as_str())
            && now.metadata.resource_version == old.metadata.resource_version
        {
            assert!(Arc::ptr_eq(old, &now), "{} was decoded again", old.key());
        }
    }
    // The handlers' story ends where the cache is, with every given-up object deleted (told on
    // the handlers' own thread, after the cache holds it).
    eventually("the handlers are told everything", || {
        story(&run.heard) == cached(&run.informer)
    })
    .await;
    assert_eq!(story(&run.heard), cached(&run.informer));
    let deletes = run
        .heard
        .lines()
        .iter()
        .filter(|l| l.starts_with("delete "))
        .count();
    assert!(deletes > 0);
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_set_that_changes_while_events_flow_converges() {
    let names = ["a", "b", "c", "d"];
    let sim = sim_with_namespaces(&names).await;
    let client = client(&sim);
    let in_ns = move |ns: &str| BoxListWatch::new(Api::<ConfigMap>::namespaced(client.clone(), ns));
    let (events, scope) = kinformer_partition::namespaced(
        in_ns,
        NamespaceScope::names(["a", "b"]),
        Config::default(),
    );
    let run = Running::start(events);
    assert!(run.informer.wait_synced().await);

    // Writes in every namespace, and between them the set changes: the watches deliver while
    // partitions come and go.
    let store = sim.store();
    let mut rng = fastrand::Rng::with_seed(7);
    let sets = [&["b", "c"][..], &["a", "c", "d"], &["d"], &["a", "d"]];
    for step in 0..600u64 {
        if step % 150 == 60 {
            let set = sets[(step / 150) as usize];
            scope.set(set.iter().copied()).await.unwrap();
        }
        let ns = names[rng.usize(..names.len())];
        let name = format!("cm-{}", rng.usize(..25));
        match store.get_typed::<ConfigMap>(Some(ns), &name) {
            Err(_) => {
                store.create_typed(&configmap(ns, &name, step)).unwrap();
            }
            Ok(_) if rng.bool() => {
                store.delete_typed::<ConfigMap>(Some(ns), &name).unwrap();
            }
            Ok(mut cm) => {
                cm.data = configmap(ns, &name, step).data;
                store.update_typed(&cm).unwrap();
            }
        }
        if step % 10 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let last: BTreeSet<&str> = ["a", "d"].into();
    eventually("the cache holds the last set's objects", || {
        run.keys()
            == server_keys(&sim, |c| {
                last.contains(c.metadata.namespace.as_deref().unwrap_or_default())
            })
    })
    .await;
    eventually("the handlers are told everything", || {
        story(&run.heard) == cached(&run.informer)
    })
    .await;
    assert_eq!(scope.names(), ["a", "d"].map(String::from).into());
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_selector_follows_the_labels() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    for (ns, team) in [("a", Some("x")), ("b", Some("y")), ("c", None)] {
        sim.store().create_typed(&namespace(ns, team)).unwrap();
        for i in 0..5 {
            sim.store()
                .create_typed(&configmap(ns, &format!("cm-{i}"), 0))
                .unwrap();
        }
    }
    let client = client(&sim);
    let scope = NamespaceScope::selected(
        Api::<Namespace>::all(client.clone()),
        "team=x",
        Config::default(),
    );
    let in_ns = move |ns: &str| BoxListWatch::new(Api::<ConfigMap>::namespaced(client.clone(), ns));
    let (events, _) = kinformer_partition::namespaced(in_ns, scope, Config::default());
    let run = Running::start(events);
    assert!(run.informer.wait_synced().await);
    let of = |names: &[&str]| {
        server_keys(&sim, |c| {
            names.contains(&c.metadata.namespace.as_deref().unwrap_or_default())
        })
    };
    assert_eq!(run.keys(), of(&["a"]));

    // c joins the team, a leaves it.
    sim.store()
        .update_typed(&namespace("c", Some("x")))
        .unwrap();
    eventually("c joins", || run.keys() == of(&["a", "c"])).await;
    sim.store()
        .update_typed(&namespace("a", Some("z")))
        .unwrap();
    eventually("a leaves", || run.keys() == of(&["c"])).await;
    eventually("the handlers are told everything", || {
        story(&run.heard) == cached(&run.informer)
    })
    .await;
    run.stop().await;
}

/// The events a partitioned source sends before its first sync are one list of the whole
/// cache, even with several partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_lists_of_all_partitions_are_one_list() {
    use futures_util::StreamExt;
    let sim = sim_with_namespaces(&["a", "b"]).await;
    for ns in ["a", "b"] {
        for i in 0..3 {
            sim.store()
                .create_typed(&configmap(ns, &format!("cm-{i}"), 0))
                .unwrap();
        }
    }
    let client = client(&sim);
    let in_ns = move |ns: &str| BoxListWatch::new(Api::<ConfigMap>::namespaced(client.clone(), ns));
    let (mut events, _) = kinformer_partition::namespaced(
        in_ns,
        NamespaceScope::names(["a", "b"]),
        Config::default(),
    );
    let mut steps = Vec::new();
    let mut listed = 0;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .unwrap()
            .unwrap();
        match &event {
            StoreEvent::RelistBegin => steps.push("begin"),
            StoreEvent::RelistPage(page) => listed += page.len(),
            StoreEvent::RelistEnd(_) => {
                steps.push("end");
                break;
            }
            _ => steps.push("other"),
        }
    }
    assert_eq!(steps, ["begin", "end"]);
    // Six of ours and each namespace's kube-root-ca.crt.
    assert_eq!(listed, server_keys(&sim, |_| true).len());
    assert_eq!(listed, 8);
}
