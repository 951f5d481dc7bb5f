//! The simulated cluster model: what it seeds and how it churns must look like a real cluster at
//! every step (owners and nodes that exist, generated names, graceful deletion), add up once
//! rollouts settle, and be the same for the same seed.

use std::collections::{BTreeMap, BTreeSet};

use kinformer_core::{ApiResource, Scope};
use kinformer_sim::{Cluster, ClusterConfig, ClusterWrite, SimConfig, SimServer, WriteKind};
use serde_json::Value;

const ALPHANUMS: &str = "bcdfghjklmnpqrstvwxz2456789";
/// The characters an encoded `pod-template-hash` can hold: decimal digits mapped into
/// [`ALPHANUMS`].
const HASH_CHARS: &str = "456789bcdf";

fn res(group: &str, kind: &str, plural: &str, scope: Scope) -> ApiResource {
    ApiResource::new(group, "v1", kind, plural, scope)
}

fn pods() -> ApiResource {
    res("", "Pod", "pods", Scope::Namespaced)
}
fn nodes() -> ApiResource {
    res("", "Node", "nodes", Scope::Cluster)
}
fn namespaces() -> ApiResource {
    res("", "Namespace", "namespaces", Scope::Cluster)
}
fn services() -> ApiResource {
    res("", "Service", "services", Scope::Namespaced)
}
fn deployments() -> ApiResource {
    res("apps", "Deployment", "deployments", Scope::Namespaced)
}
fn replicasets() -> ApiResource {
    res("apps", "ReplicaSet", "replicasets", Scope::Namespaced)
}
fn daemonsets() -> ApiResource {
    res("apps", "DaemonSet", "daemonsets", Scope::Namespaced)
}

/// A seeded cluster in the store of a server whose runtime is not driven: the server's own
/// kubelet loop never runs, so every deletion is the model's.
fn store(
    pods: usize,
    seed: u64,
) -> (
    SimServer,
    kinformer_sim::Store,
    Cluster,
    tokio::runtime::Runtime,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sim = rt.block_on(SimServer::start(SimConfig::default())).unwrap();
    let store = sim.store();
    let cluster = Cluster::seed(
        &store,
        &ClusterConfig {
            pods,
            seed,
            rate_per_sec: 0.0,
        },
    );
    (sim, store, cluster, rt)
}

/// The string at a path of keys and array indexes, or "".
fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .fold(v, |v, p| match p.parse::<usize>() {
            Ok(i) => &v[i],
            Err(_) => &v[*p],
        })
        .as_str()
        .unwrap_or("")
}

fn key(o: &Value) -> (String, String) {
    (
        s(o, &["metadata", "namespace"]).to_owned(),
        s(o, &["metadata", "name"]).to_owned(),
    )
}

/// Everything the invariants look at, listed once.
struct View {
    pods: BTreeMap<(String, String), Value>,
    uids: BTreeMap<(&'static str, String, String), String>,
    nodes: BTreeSet<String>,
    namespaces: BTreeSet<String>,
    deployments: Vec<Value>,
    replicasets: Vec<Value>,
    services: Vec<Value>,
}

fn view(store: &kinformer_sim::Store) -> View {
    let mut uids = BTreeMap::new();
    let mut add = |kind: &'static str, list: &[Value]| {
        for o in list {
            let (ns, name) = key(o);
            uids.insert((kind, ns, name), s(o, &["metadata", "uid"]).to_owned());
        }
    };
    let node_list = store.list(&nodes(), None);
    let deployments = store.list(&deployments(), None);
    let replicasets = store.list(&replicasets(), None);
    let daemonsets = store.list(&daemonsets(), None);
    add("Node", &node_list);
    add("Deployment", &deployments);
    add("ReplicaSet", &replicasets);
    add("DaemonSet", &daemonsets);
    View {
        pods: store
            .list(&pods(), None)
            .into_iter()
            .map(|p| (key(&p), p))
            .collect(),
        uids,
        nodes: node_list
            .iter()
            .map(|n| s(n, &["metadata", "name"]).to_owned())
            .collect(),
        namespaces: store
            .list(&namespaces(), None)
            .iter()
            .map(|n| s(n, &["metadata", "name"]).to_owned())
            .collect(),
        deployments,
        replicasets,
        services: store.list(&services(), None),
    }
}

/// Every owner reference names an object that exists (kind, namespace, name and uid), every
/// `nodeName` a node, every namespace of a pod a namespace; names have the generated shape.
fn assert_consistent(v: &View, at: &str) {
    let owned: Vec<(&str, &Value)> = v
        .pods
        .values()
        .map(|p| ("pod", p))
        .chain(v.replicasets.iter().map(|r| ("replicaset", r)))
        .collect();
    for (what, o) in owned {
        let (ns, name) = key(o);
        assert!(
            v.namespaces.contains(&ns),
            "{at}: {what} {ns}/{name}: no namespace"
        );
        let refs = o["metadata"]["ownerReferences"]
            .as_array()
            .unwrap_or_else(|| panic!("{at}: {what} {ns}/{name} has no owner"));
        assert_eq!(refs.len(), 1, "{at}: {what} {ns}/{name}");
        let r = &refs[0];
        assert_eq!(r["controller"], true, "{at}: {what} {ns}/{name}");
        let kind = s(r, &["kind"]);
        let kind: &'static str = match kind {
            "Node" => "Node",
            "ReplicaSet" => "ReplicaSet",
            "Deployment" => "Deployment",
            "DaemonSet" => "DaemonSet",
            other => panic!("{at}: unexpected owner kind {other}"),
        };
        let expected_api = if kind == "Node" { "v1" } else { "apps/v1" };
        assert_eq!(
            s(r, &["apiVersion"]),
            expected_api,
            "{at}: {what} {ns}/{name}"
        );
        let owner_ns = if kind == "Node" {
            String::new()
        } else {
            ns.clone()
        };
        let uid = v
            .uids
            .get(&(kind, owner_ns, s(r, &["name"]).to_owned()))
            .unwrap_or_else(|| {
                panic!(
                    "{at}: {what} {ns}/{name}: owner {kind} {} missing",
                    s(r, &["name"])
                )
            });
        assert_eq!(uid, s(r, &["uid"]), "{at}: {what} {ns}/{name}: owner uid");
    }
    for ((ns, name), p) in &v.pods {
        let node = s(p, &["spec", "nodeName"]);
        if !node.is_empty() {
            assert!(
                v.nodes.contains(node),
                "{at}: pod {ns}/{name} on missing node {node}"
            );
        }
        let owner = &p["metadata"]["ownerReferences"][0];
        let owner_name = s(owner, &["name"]);
        match s(owner, &["kind"]) {
            "ReplicaSet" => {
                let hash = s(p, &["metadata", "labels", "pod-template-hash"]);
                assert!(
                    (6..=10).contains(&hash.len()) && hash.chars().all(|c| HASH_CHARS.contains(c)),
                    "{at}: pod {name}: hash {hash:?}"
                );
                assert!(
                    owner_name.ends_with(&format!("-{hash}")),
                    "{at}: {owner_name} / {hash}"
                );
                assert_generated(name, owner_name, at);
            }
            "DaemonSet" => assert_generated(name, owner_name, at),
            _ => assert_eq!(
                name,
                &format!(
                    "{}-{owner_name}",
                    s(p, &["metadata", "labels", "component"])
                ),
                "{at}"
            ),
        }
    }
}

/// `{prefix}-` and five characters of the generated-name alphabet.
fn assert_generated(name: &str, prefix: &str, at: &str) {
    let tail = name
        .strip_prefix(prefix)
        .and_then(|t| t.strip_prefix('-'))
        .unwrap_or_else(|| panic!("{at}: {name} does not start with {prefix}-"));
    assert_eq!(tail.len(), 5, "{at}: {name}");
    assert!(tail.chars().all(|c| ALPHANUMS.contains(c)), "{at}: {name}");
}

fn selects(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .is_some_and(|m| !m.is_empty() && m.iter().all(|(k, v)| labels.get(k) == Some(v)))
}

#[test]
fn the_seeded_cluster_looks_real() {
    let (_sim, store, _cluster, _rt) = store(200, 1);
    let v = view(&store);
    assert_eq!(v.pods.len(), 200);
    assert_consistent(&v, "seed");
    for ns in [
        "default",
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "shop",
        "payments",
        "monitoring",
    ] {
        assert!(v.namespaces.contains(ns), "{ns}");
    }
    // A control plane and workers, each Ready, with capacity and a kubelet version.
    assert!(v.nodes.contains("kinformer-control-plane"), "{:?}", v.nodes);
    assert!(v.nodes.len() >= 3, "{:?}", v.nodes);
    for n in store.list(&nodes(), None) {
        let ready = n["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        assert!(ready, "{n}");
        assert!(s(&n, &["status", "nodeInfo", "kubeletVersion"]).starts_with("v1."));
        assert_eq!(s(&n, &["status", "allocatable", "pods"]), "110");
        assert!(
            !s(&n, &["status", "addresses", "0", "address"]).is_empty()
                || n["status"]["addresses"][0]["address"].is_string()
        );
    }
    // kube-system: static control-plane pods, kube-proxy on every node, coredns.
    let system: Vec<&str> = v
        .pods
        .keys()
        .filter(|(ns, _)| ns == "kube-system")
        .map(|(_, n)| n.as_str())
        .collect();
    for static_pod in [
        "etcd-",
        "kube-apiserver-",
        "kube-controller-manager-",
        "kube-scheduler-",
    ] {
        assert!(
            system.contains(&format!("{static_pod}kinformer-control-plane").as_str()),
            "{system:?}"
        );
    }
    assert_eq!(
        system
            .iter()
            .filter(|n| n.starts_with("kube-proxy-"))
            .count(),
        v.nodes.len()
    );
    assert_eq!(
        system.iter().filter(|n| n.starts_with("coredns-")).count(),
        2
    );
    // Deployments add up: spec, current replica set and running pods.
    for d in &v.deployments {
        let (ns, name) = key(d);
        let want = d["spec"]["replicas"].as_u64().unwrap();
        let current: Vec<&Value> = v
            .replicasets
            .iter()
            .filter(|r| {
                s(r, &["metadata", "ownerReferences", "0", "uid"]) == s(d, &["metadata", "uid"])
                    && r["spec"]["replicas"].as_u64() != Some(0)
            })
            .collect();
        assert_eq!(current.len(), 1, "{ns}/{name}");
        assert_eq!(
            current[0]["spec"]["replicas"].as_u64(),
            Some(want),
            "{ns}/{name}"
        );
        let owned = v
            .pods
            .values()
            .filter(|p| {
                s(p, &["metadata", "ownerReferences", "0", "uid"])
                    == s(current[0], &["metadata", "uid"])
            })
            .count();
        assert_eq!(owned as u64, want, "{ns}/{name}");
        if name != "report-builder" {
            assert_eq!(
                d["status"]["readyReplicas"].as_u64(),
                Some(want),
                "{ns}/{name}: {}",
                d["status"]
            );
        }
    }
    // Services select the pods of their deployment.
    for svc in &v.services {
        let (ns, name) = key(svc);
        if name == "kubernetes" {
            continue;
        }
        let selected = v
            .pods
            .values()
            .filter(|p| {
                s(p, &["metadata", "namespace"]) == ns
                    && selects(&svc["spec"]["selector"], &p["metadata"]["labels"])
            })
            .count();
        assert!(selected > 0, "service {ns}/{name} selects nothing");
    }
    // Mostly running, and one pod that no node can hold.
    let phases: Vec<&str> = v
        .pods
        .values()
        .map(|p| s(p, &["status", "phase"]))
        .collect();
    assert_eq!(
        phases.iter().filter(|p| **p == "Pending").count(),
        1,
        "{phases:?}"
    );
    assert_eq!(phases.iter().filter(|p| **p == "Running").count(), 199);
}

#[test]
fn every_step_keeps_owners_nodes_and_names_real_and_deletes_gracefully() {
    let (_sim, store, mut cluster, _rt) = store(60, 7);
    let mut before = view(&store);
    assert_consistent(&before, "seed");
    let mut seen = BTreeMap::<&str, usize>::new();
    let mut terminating_seen = 0;
    for step in 0..800 {
        let writes = cluster.step(&store);
        for w in &writes {
            *seen.entry(w.reason).or_default() += 1;
        }
        let now = view(&store);
        let at = format!("step {step} after {writes:?}");
        assert_consistent(&now, &at);
        for (k, old) in &before.pods {
            if now.pods.contains_key(k) {
                continue;
            }
            // Gone: it was terminating, finished, or never scheduled (then there was nothing to stop).
            let marked = old["metadata"]["deletionTimestamp"].is_string();
            let finished = matches!(s(old, &["status", "phase"]), "Failed" | "Succeeded");
            let unscheduled = s(old, &["spec", "nodeName"]).is_empty();
            assert!(
                marked || finished || unscheduled,
                "{at}: {k:?} vanished while {}",
                old["status"]["phase"]
            );
            terminating_seen += usize::from(marked);
        }
        before = now;
    }
    // The churn did all the things a cluster does.
    for reason in [
        "created",
        "scheduled",
        "creating containers",
        "running",
        "container crashed",
        "restarted",
        "evicted",
        "terminating",
        "deleted after its grace period",
        "rollout started",
        "rollout scaled up",
        "rollout scaled down",
        "scaled",
        "heartbeat",
    ] {
        assert!(seen.contains_key(reason), "never {reason}: {seen:?}");
    }
    assert!(terminating_seen > 10, "{terminating_seen}");
    // Restart counts went up somewhere.
    let restarts: u64 = before
        .pods
        .values()
        .map(|p| {
            p["status"]["containerStatuses"][0]["restartCount"]
                .as_u64()
                .unwrap_or(0)
        })
        .sum();
    assert!(restarts > 0);
}

#[test]
fn a_rollout_replaces_pods_within_its_surge_and_settles_to_the_new_replica_set() {
    let (_sim, store, mut cluster, _rt) = store(60, 3);
    let old_rs = |store: &kinformer_sim::Store| -> Vec<(String, u64)> {
        store
            .list(&replicasets(), Some("default"))
            .iter()
            .filter(|r| s(r, &["metadata", "name"]).starts_with("web-"))
            .map(|r| {
                (
                    s(r, &["metadata", "name"]).to_owned(),
                    r["spec"]["replicas"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let deploy = store.get(&deployments(), Some("default"), "web").unwrap();
    let desired = deploy["spec"]["replicas"].as_u64().unwrap();
    let image = s(
        &deploy,
        &["spec", "template", "spec", "containers", "0", "image"],
    )
    .to_owned();
    let writes = cluster.rollout(&store, "default", "web");
    assert_eq!(writes.len(), 2, "{writes:?}");
    assert_eq!(
        (writes[0].kind, writes[0].resource),
        (WriteKind::Created, "replicasets")
    );
    let new_rs = writes[0].name.clone();
    assert!(
        cluster.rollout(&store, "default", "web").is_empty(),
        "one rollout at a time"
    );
    let surge = desired.div_ceil(4).max(1);
    let mut overlapped = false;
    // Bounded: the rollout's own work, one action at a time.
    for _ in 0..2000 {
        if !cluster.settle(&store, 1) {
            let sets = old_rs(&store);
            let total: u64 = sets.iter().map(|(_, n)| n).sum();
            assert!(total <= desired + surge, "{sets:?}");
            let new = sets
                .iter()
                .find(|(n, _)| *n == new_rs)
                .map_or(0, |(_, n)| *n);
            overlapped |= new > 0 && new < total;
        } else {
            break;
        }
    }
    assert!(cluster.settle(&store, 10_000), "settles");
    assert!(
        overlapped,
        "the new replica set grew while the old one shrank"
    );
    let deploy = store.get(&deployments(), Some("default"), "web").unwrap();
    assert_ne!(
        s(
            &deploy,
            &["spec", "template", "spec", "containers", "0", "image"]
        ),
        image
    );
    assert_eq!(
        deploy["status"]["updatedReplicas"].as_u64(),
        Some(desired),
        "{}",
        deploy["status"]
    );
    assert_eq!(deploy["status"]["readyReplicas"].as_u64(), Some(desired));
    assert_eq!(deploy["status"]["replicas"].as_u64(), Some(desired));
    let progressing = &deploy["status"]["conditions"][1];
    assert_eq!(s(progressing, &["reason"]), "NewReplicaSetAvailable");
    for (name, replicas) in old_rs(&store) {
        assert_eq!(replicas, if name == new_rs { desired } else { 0 }, "{name}");
    }
    let web: Vec<Value> = store
        .list(&pods(), Some("default"))
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["app"] == "web")
        .collect();
    assert_eq!(web.len() as u64, desired);
    for p in &web {
        assert_eq!(s(p, &["metadata", "ownerReferences", "0", "name"]), new_rs);
        assert_eq!(s(p, &["status", "phase"]), "Running");
        assert!(p["metadata"].get("deletionTimestamp").is_none());
    }
    assert_consistent(&view(&store), "settled");
}

#[test]
fn replicas_add_up_once_the_churn_settles() {
    let (_sim, store, mut cluster, _rt) = store(120, 11);
    for _ in 0..800 {
        cluster.step(&store);
    }
    assert!(cluster.settle(&store, 100_000), "settles");
    let v = view(&store);
    assert_consistent(&v, "settled");
    for d in &v.deployments {
        let (ns, name) = key(d);
        let want = d["spec"]["replicas"].as_u64().unwrap();
        let mut total = 0;
        for r in v.replicasets.iter().filter(|r| {
            s(r, &["metadata", "ownerReferences", "0", "uid"]) == s(d, &["metadata", "uid"])
        }) {
            let spec = r["spec"]["replicas"].as_u64().unwrap();
            let pods: Vec<&Value> = v
                .pods
                .values()
                .filter(|p| {
                    s(p, &["metadata", "ownerReferences", "0", "uid"]) == s(r, &["metadata", "uid"])
                })
                .collect();
            assert_eq!(pods.len() as u64, spec, "{}", s(r, &["metadata", "name"]));
            assert_eq!(
                r["status"]["replicas"].as_u64(),
                Some(spec),
                "{}",
                r["status"]
            );
            assert!(
                pods.iter()
                    .all(|p| p["metadata"].get("deletionTimestamp").is_none())
            );
            total += spec;
        }
        assert_eq!(total, want, "{ns}/{name}");
        assert_eq!(
            d["status"]["replicas"].as_u64(),
            Some(want),
            "{ns}/{name}: {}",
            d["status"]
        );
        if name != "report-builder" {
            assert_eq!(
                d["status"]["readyReplicas"].as_u64(),
                Some(want),
                "{ns}/{name}"
            );
        }
    }
}

/// A pod's namespace, name, node and phase.
type PodState = (String, String, String, String);

/// What two runs are compared on: everything but timestamps and uids, which come from the clock
/// and the store.
fn trace(seed: u64) -> (Vec<ClusterWrite>, Vec<PodState>) {
    let (_sim, store, mut cluster, _rt) = store(50, seed);
    let writes: Vec<ClusterWrite> = (0..400).flat_map(|_| cluster.step(&store)).collect();
    let pods = store
        .list(&pods(), None)
        .iter()
        .map(|p| {
            let (ns, name) = key(p);
            (
                ns,
                name,
                s(p, &["spec", "nodeName"]).to_owned(),
                s(p, &["status", "phase"]).to_owned(),
            )
        })
        .collect();
    (writes, pods)
}

#[test]
fn every_write_lands_once_and_a_pod_delete_is_marked_first() {
    let (_sim, store, mut cluster, _rt) = store(50, 7);
    let before = store.resource_version();
    let writes: Vec<ClusterWrite> = (0..400).flat_map(|_| cluster.step(&store)).collect();
    // Each write is one version, but a pod's delete is two: the registry marks the pod with a
    // zero grace period (a MODIFIED), then deletes it.
    let pod_deletes = writes
        .iter()
        .filter(|w| w.kind == WriteKind::Deleted && w.resource == "pods")
        .count();
    assert!(pod_deletes > 0, "the trace deletes pods");
    assert_eq!(
        store.resource_version() - before,
        (writes.len() + pod_deletes) as u64
    );
}

#[test]
fn the_same_seed_gives_the_same_cluster_and_writes() {
    let a = trace(5);
    assert_eq!(a, trace(5));
    assert_ne!(a.0, trace(6).0);
    assert!(a.0.len() >= 400, "{}", a.0.len());
}

#[tokio::test(start_paused = true)]
async fn the_churn_writes_through_the_store_at_its_rate() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let store = sim.store();
    let cluster = Cluster::seed(
        &store,
        &ClusterConfig {
            pods: 30,
            seed: 2,
            rate_per_sec: 400.0,
        },
    );
    let before = store.resource_version();
    let churn = cluster.churn(&store);
    tokio::time::sleep(std::time::Duration::from_millis(1005)).await;
    let writes = churn.writes();
    assert!((380..=410).contains(&writes), "{writes}");
    churn.stop();
    // Every write landed: one version each, two for a pod's delete (counted exactly by
    // `every_write_lands_once_and_a_pod_delete_is_marked_first`).
    let versions = store.resource_version() - before;
    assert!(
        (writes..=2 * writes).contains(&versions),
        "{versions} for {writes}"
    );
    assert_consistent(&view(&store), "after the churn");
    sim.shutdown().await;
}
