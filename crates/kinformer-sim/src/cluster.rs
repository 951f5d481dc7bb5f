//! A simulated cluster that looks like a real one: nodes, namespaces, deployments with their
//! replica sets and pods, a daemon set, control-plane pods and services, seeded and then churned
//! by a small model of the controllers and kubelets that run a real cluster.
//!
//! Everything the model writes goes through [`Store`], so watches see ordinary `ADDED`,
//! `MODIFIED` and `DELETED` events, and every choice comes from one seeded generator: the same
//! [`ClusterConfig`] gives the same objects and the same sequence of writes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kinformer_core::{ApiResource, Scope};
use serde_json::{Value, json};

use crate::store::{DeleteOptions, Deletion, Store, rfc3339, splitmix};
use crate::workload::{ChurnHandle, Rng};

/// The alphabet Kubernetes draws generated names and encoded hashes from (no vowels, no
/// look-alike digits), as `k8s.io/apimachinery/pkg/util/rand` does.
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The kubelet and kube-proxy release the nodes report.
const KUBELET_VERSION: &str = "v1.34.1";

/// The name prefix of the nodes (`kinformer-control-plane`, `kinformer-worker`,
/// `kinformer-worker2`, ...), shaped like a local development cluster's.
const CLUSTER_NAME: &str = "kinformer";

/// How big a simulated cluster is, how it is seeded and how fast it changes.
///
/// ```
/// use kinformer_sim::ClusterConfig;
/// let config = ClusterConfig { pods: 60, ..ClusterConfig::default() };
/// assert_eq!(config.seed, 1);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// How many pods the cluster starts with, exactly: control-plane, `kube-proxy` and `coredns`
    /// pods included when there is room for them (16 pods or more), the rest spread over the
    /// application deployments. Nodes are added as the count grows (about one worker per 40
    /// pods). The count moves with the churn (scaling, rollouts' surge, evictions).
    pub pods: usize,
    /// The seed of every choice: names, sizes, versions and the sequence of changes.
    pub seed: u64,
    /// About how many writes per second the churn makes ([`Cluster::churn`]); 0 seeds only.
    pub rate_per_sec: f64,
}

impl Default for ClusterConfig {
    /// 200 pods, seed 1, four writes a second.
    fn default() -> Self {
        Self {
            pods: 200,
            seed: 1,
            rate_per_sec: 4.0,
        }
    }
}

/// What one write of the model did to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// Created (an `ADDED` event).
    Created,
    /// Changed, or marked for deletion (a `MODIFIED` event).
    Updated,
    /// Removed (a `DELETED` event).
    Deleted,
}

/// One write of the model: which object it touched and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterWrite {
    /// What the write did.
    pub kind: WriteKind,
    /// The resource, by plural name (`pods`, `replicasets`, `deployments`, `nodes`, ...).
    pub resource: &'static str,
    /// The namespace, empty for cluster-scoped objects.
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// Why, in a few words (`scheduled`, `rollout scaled up`, `terminating`, ...).
    pub reason: &'static str,
}

/// `(namespace, name)`.
type Key = (String, String);

fn resource(plural: &str) -> ApiResource {
    match plural {
        "pods" => ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced),
        "services" => ApiResource::new("", "v1", "Service", "services", Scope::Namespaced),
        "namespaces" => ApiResource::new("", "v1", "Namespace", "namespaces", Scope::Cluster),
        "nodes" => ApiResource::new("", "v1", "Node", "nodes", Scope::Cluster),
        "deployments" => {
            ApiResource::new("apps", "v1", "Deployment", "deployments", Scope::Namespaced)
        }
        "replicasets" => {
            ApiResource::new("apps", "v1", "ReplicaSet", "replicasets", Scope::Namespaced)
        }
        _ => ApiResource::new("apps", "v1", "DaemonSet", "daemonsets", Scope::Namespaced),
    }
}

/// 32-bit FNV-1a, the hash the deployment controller names replica sets with.
fn fnv32(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5, |h: u32, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// A `pod-template-hash`: the decimal hash, each digit mapped into [`ALPHANUMS`] as
/// `rand.SafeEncodeString` does (so only `4-9` and `b c d f` appear, as in real clusters).
fn template_hash(s: &str) -> String {
    fnv32(s)
        .to_string()
        .bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

/// The five random characters a generated name ends with.
fn suffix(rng: &mut Rng) -> String {
    (0..5)
        .map(|_| ALPHANUMS[rng.below(ALPHANUMS.len() as u64) as usize] as char)
        .collect()
}

fn condition(kind: &str, ok: bool, at: &str) -> Value {
    json!({"type": kind, "status": if ok { "True" } else { "False" }, "lastProbeTime": null, "lastTransitionTime": at})
}

fn condition_why(kind: &str, ok: bool, at: &str, reason: &str, message: &str) -> Value {
    let mut c = condition(kind, ok, at);
    c["reason"] = json!(reason);
    c["message"] = json!(message);
    c
}

/// An owner reference, always the controller's.
#[derive(Debug, Clone)]
struct Owner {
    api_version: &'static str,
    kind: &'static str,
    name: String,
    uid: String,
}

impl Owner {
    fn json(&self) -> Value {
        json!([{
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": true,
            "blockOwnerDeletion": true,
        }])
    }
}

/// Where a pod is in its life, as the model drives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    /// Created, not yet bound to a node.
    Unscheduled,
    /// No node has room for it: stays Pending.
    Unschedulable,
    /// Bound to a node, containers not started.
    Scheduled,
    /// `ContainerCreating`.
    Creating,
    /// Its container crashed and is waiting to restart (`CrashLoopBackOff`).
    CrashLoop,
    /// Running and ready.
    Running,
    /// Evicted by its kubelet: phase Failed until collected.
    Failed,
    /// Marked for deletion, in its grace period.
    Terminating,
}

/// The container a pod runs.
#[derive(Debug, Clone)]
struct Container {
    name: String,
    image: String,
    port: u16,
    cpu: &'static str,
    memory: &'static str,
}

impl Container {
    fn json(&self) -> Value {
        json!({
            "name": self.name,
            "image": self.image,
            "ports": [{"name": "http", "containerPort": self.port, "protocol": "TCP"}],
            "resources": {"requests": {"cpu": self.cpu, "memory": self.memory}, "limits": {"memory": self.memory}},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
        })
    }
}

#[derive(Debug, Clone)]
struct NodeM {
    name: String,
    uid: String,
    ip: String,
    index: usize,
    control_plane: bool,
    /// Pods bound to it.
    pods: u32,
    /// The last pod IP handed out, within the node's /24.
    next_ip: u32,
}

#[derive(Debug, Clone)]
struct PodM {
    owner: Owner,
    /// The replica set that owns it, if one does.
    rs: Option<Key>,
    labels: Value,
    container: Container,
    /// Tolerates the control-plane taint and runs as a critical system pod.
    system: bool,
    node: Option<usize>,
    ip: Option<String>,
    phase: Phase,
    restarts: u32,
    /// The step it was created at: scale-downs remove the newest first.
    born: u64,
    uid: String,
    /// When it was scheduled, started, and last left a state (RFC 3339).
    scheduled_at: String,
    started_at: String,
    since: String,
    /// When its container last exited, if it ever did.
    last_exit: Option<String>,
}

#[derive(Debug, Clone)]
struct RsM {
    uid: String,
    hash: String,
    deploy: usize,
    replicas: u32,
    container: Container,
    pods: BTreeSet<Key>,
    /// `metadata.generation`: bumped by every change of the spec.
    generation: u32,
    /// The status last written: (replicas, ready).
    written: Option<(u32, u32)>,
}

#[derive(Debug, Clone)]
struct DeployM {
    key: Key,
    uid: String,
    selector: Value,
    container: Container,
    replicas: u32,
    /// The replica count it was seeded with; scaling stays near it.
    base: u32,
    version: (u32, u32, u32),
    revision: u32,
    current: Key,
    /// Older replica sets, oldest first.
    history: Vec<Key>,
    rolling: bool,
    /// Left alone by the churn (cluster add-ons, and the deployment that cannot be scheduled).
    frozen: bool,
    stuck: bool,
    /// Seconds before seeding it was created.
    age: i64,
    /// `metadata.generation`: bumped by every change of the spec.
    generation: u32,
    /// The status last written: (replicas, updated, ready, rolling).
    written: Option<(u32, u32, u32, bool)>,
}

/// One thing the model does when its time comes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    /// Start something new: a rollout, a scale, a crash, an eviction, a node heartbeat.
    Activity,
    Schedule(Key),
    StartContainers(Key),
    Run(Key),
    Recover(Key),
    /// The kubelet finished a terminating pod's grace period.
    Gone(Key),
    /// The pod garbage collector removes an evicted pod.
    Collect(Key),
    /// The replica set controller matches pods to the spec.
    Reconcile(Key),
    /// The replica set and deployment controllers write status.
    Status(usize),
    /// One step of a rolling update.
    Rollout(usize),
    /// Old replica sets beyond the history limit go.
    Prune(usize),
}

/// An application a seeded deployment runs: namespace, name, weight in the pod budget, image,
/// version, port, cpu and memory requests.
type App = (
    &'static str,
    &'static str,
    u32,
    &'static str,
    (u32, u32, u32),
    u16,
    &'static str,
    &'static str,
);

/// The applications of the seeded deployments.
const CATALOGUE: [App; 11] = [
    (
        "default",
        "web",
        3,
        "nginx",
        (1, 27, 3),
        80,
        "100m",
        "128Mi",
    ),
    (
        "default",
        "api",
        2,
        "registry.example.com/platform/api",
        (3, 8, 2),
        8080,
        "250m",
        "256Mi",
    ),
    (
        "shop",
        "storefront",
        3,
        "registry.example.com/shop/storefront",
        (2, 14, 0),
        3000,
        "200m",
        "256Mi",
    ),
    (
        "shop",
        "cart",
        2,
        "registry.example.com/shop/cart",
        (1, 9, 4),
        8080,
        "100m",
        "128Mi",
    ),
    (
        "shop",
        "catalog",
        2,
        "registry.example.com/shop/catalog",
        (1, 22, 1),
        8080,
        "250m",
        "512Mi",
    ),
    (
        "shop",
        "checkout",
        2,
        "registry.example.com/shop/checkout",
        (4, 2, 7),
        8080,
        "200m",
        "256Mi",
    ),
    (
        "payments",
        "payments-api",
        2,
        "registry.example.com/payments/api",
        (2, 5, 3),
        8443,
        "500m",
        "512Mi",
    ),
    (
        "payments",
        "ledger",
        1,
        "registry.example.com/payments/ledger",
        (1, 3, 0),
        8080,
        "250m",
        "1Gi",
    ),
    (
        "monitoring",
        "prometheus",
        1,
        "quay.io/prometheus/prometheus",
        (3, 4, 1),
        9090,
        "500m",
        "2Gi",
    ),
    (
        "monitoring",
        "grafana",
        1,
        "docker.io/grafana/grafana",
        (11, 5, 2),
        3000,
        "100m",
        "256Mi",
    ),
    (
        "monitoring",
        "kube-state-metrics",
        1,
        "registry.k8s.io/kube-state-metrics/kube-state-metrics",
        (2, 15, 0),
        8080,
        "100m",
        "190Mi",
    ),
];

/// The control-plane components that run as static pods on the control-plane node.
const CONTROL_PLANE: [(&str, &str, &str); 4] = [
    ("etcd", "registry.k8s.io/etcd:3.6.4-0", "100m"),
    (
        "kube-apiserver",
        "registry.k8s.io/kube-apiserver:v1.34.1",
        "250m",
    ),
    (
        "kube-controller-manager",
        "registry.k8s.io/kube-controller-manager:v1.34.1",
        "200m",
    ),
    (
        "kube-scheduler",
        "registry.k8s.io/kube-scheduler:v1.34.1",
        "100m",
    ),
];

/// A simulated cluster: the objects it seeded and a model of the controllers and kubelets that
/// change them.
///
/// [`Cluster::seed`] writes the cluster; [`Cluster::step`] makes the next change, one write or a
/// few; [`Cluster::churn`] makes changes on the tokio runtime at [`ClusterConfig::rate_per_sec`].
/// The model keeps its own view of what it wrote; objects others change or delete are not read
/// back (a pod deleted behind its back is replaced, as a replica set controller would).
///
/// What it seeds, for `pods` pods:
/// - nodes `kinformer-control-plane` and workers `kinformer-worker`, `kinformer-worker2`, ...
///   with capacity, allocatable, Ready conditions, addresses, `nodeInfo` (kubelet version, OS,
///   runtime) and the well-known labels; the control plane is tainted;
/// - namespaces `default`, `kube-system`, `kube-public`, `kube-node-lease` and the application
///   namespaces;
/// - in `kube-system`: static `etcd`, `kube-apiserver`, `kube-controller-manager` and
///   `kube-scheduler` pods owned by their node, the `kube-proxy` daemon set with a pod per node,
///   the `coredns` deployment and the `kube-dns` service;
/// - application deployments (`default/web`, `shop/cart`, `monitoring/prometheus`, ...), each
///   with its current replica set, sometimes an older one scaled to zero, its pods and a service
///   whose selector matches them; with 20 pods or more, one deployment whose pod no node can
///   hold (Pending, `Unschedulable`).
///
/// What the churn does: rolling updates (a new replica set scaled up while the old one scales
/// down, within 25% surge and 25% unavailable), scaling, pods going Pending, then
/// `ContainerCreating`, then Running, containers crashing into `CrashLoopBackOff` and restarting
/// (restart counts go up), evictions (Failed pods, replaced, later collected), graceful deletion
/// (pods Terminating for a while before they are deleted) and node heartbeats.
///
/// ```
/// use kinformer_core::{ApiResource, Scope};
/// use kinformer_sim::{Cluster, ClusterConfig, SimConfig, SimServer};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let sim = SimServer::start(SimConfig::default()).await.unwrap();
/// let store = sim.store();
/// let mut cluster = Cluster::seed(&store, &ClusterConfig { pods: 40, ..ClusterConfig::default() });
/// let pods = ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced);
/// assert_eq!(store.list(&pods, None).len(), 40);
/// let writes = cluster.step(&store);
/// assert!(!writes.is_empty());
/// // Or let it run on its own at ClusterConfig::rate_per_sec:
/// let _churn = cluster.churn(&store);
/// # }
/// ```
#[derive(Debug)]
pub struct Cluster {
    config: ClusterConfig,
    rng: Rng,
    /// The model's clock, in steps.
    clock: u64,
    /// Wall-clock seconds at seeding, for back-dated timestamps.
    epoch: i64,
    nodes: Vec<NodeM>,
    deploys: Vec<DeployM>,
    sets: BTreeMap<Key, RsM>,
    pods: BTreeMap<Key, PodM>,
    /// What is due, by (step, sequence).
    queue: BTreeMap<(u64, u64), Action>,
    seq: u64,
    /// Deployments with a status write queued.
    status_queued: BTreeSet<usize>,
}

impl Cluster {
    /// Writes a cluster of `config.pods` pods into `store` (see [`Cluster`] for what it holds)
    /// and returns the model that churns it. Objects that already exist are left alone.
    pub fn seed(store: &Store, config: &ClusterConfig) -> Self {
        let mut c = Self {
            config: config.clone(),
            rng: Rng(splitmix(config.seed ^ 0xc1u64)),
            clock: 0,
            epoch: jiff::Timestamp::now().as_second(),
            nodes: Vec::new(),
            deploys: Vec::new(),
            sets: BTreeMap::new(),
            pods: BTreeMap::new(),
            queue: BTreeMap::new(),
            seq: 0,
            status_queued: BTreeSet::new(),
        };
        c.seed_all(store);
        c
    }

    /// The configuration it was seeded with.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// Makes the next change: the first piece of work that is due (a pod to schedule, start or
    /// remove, a replica set to reconcile, a status to write, the next step of a rollout), or,
    /// when nothing is due, a new activity. Returns the writes it made (usually one, a few for
    /// status updates and the start of a rollout); empty only if nothing could be done.
    pub fn step(&mut self, store: &Store) -> Vec<ClusterWrite> {
        self.clock += 1;
        // Bounded: a few tries at finding something to do.
        for _ in 0..8 {
            let action = self.pop_due().unwrap_or(Action::Activity);
            let writes = self.apply(store, action);
            if !writes.is_empty() {
                return writes;
            }
        }
        Vec::new()
    }

    /// Runs the work already queued, and the work it queues, without starting anything new, until
    /// nothing is left or `max_writes` writes were made: rollouts finish, pods reach Running or
    /// go, statuses are written. Returns whether the cluster settled.
    pub fn settle(&mut self, store: &Store, max_writes: usize) -> bool {
        let mut writes = 0;
        while writes < max_writes {
            let Some((&(due, _), _)) = self.queue.first_key_value() else {
                return true;
            };
            let action = self.pop();
            self.clock = self.clock.max(due);
            writes += self.apply(store, action).len().max(1);
        }
        self.queue.is_empty()
    }

    /// Starts a rolling update of the deployment `namespace/name` to a new image version, as
    /// `kubectl set image` would. Returns the writes (the new replica set, the deployment), or
    /// nothing when there is no such deployment or it is rolling out already.
    pub fn rollout(&mut self, store: &Store, namespace: &str, name: &str) -> Vec<ClusterWrite> {
        let Some(d) = self
            .deploys
            .iter()
            .position(|d| d.key.0 == namespace && d.key.1 == name && !d.rolling)
        else {
            return Vec::new();
        };
        self.start_rollout(store, d)
    }

    /// Starts making changes on the current tokio runtime, at about
    /// [`ClusterConfig::rate_per_sec`] writes a second, until the handle is stopped or dropped.
    pub fn churn(self, store: &Store) -> ChurnHandle {
        let writes = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(churn_loop(self, store.clone(), Arc::clone(&writes)));
        ChurnHandle::new(task, writes)
    }

    // ----- time and the queue -----

    fn at(&mut self, delay: u64, action: Action) {
        // One status write covers every change before it: never queue two.
        if let Action::Status(d) = action
            && !self.status_queued.insert(d)
        {
            return;
        }
        self.seq += 1;
        self.queue.insert((self.clock + delay, self.seq), action);
    }

    fn pop_due(&mut self) -> Option<Action> {
        let (&(due, _), _) = self.queue.first_key_value()?;
        (due <= self.clock).then(|| self.pop())
    }

    fn pop(&mut self) -> Action {
        let (_, action) = self.queue.pop_first().expect("not empty");
        if let Action::Status(d) = action {
            self.status_queued.remove(&d);
        }
        action
    }

    /// A timestamp `ago` seconds before seeding.
    fn ago(&self, ago: i64) -> String {
        rfc3339(u64::try_from(self.epoch - ago).unwrap_or(0))
    }

    fn now() -> String {
        rfc3339(u64::try_from(jiff::Timestamp::now().as_second()).unwrap_or(0))
    }

    fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.rng.below(high - low + 1)
    }

    // ----- seeding -----

    fn seed_all(&mut self, store: &Store) {
        let budget = self.config.pods;
        // Room for the system pods, and then some, or applications only.
        let with_system = budget >= 16;
        let workers = if with_system {
            (budget / 40).clamp(2, 500)
        } else {
            1
        };
        let system_pods = if with_system {
            4 + (workers + 1) + 2
        } else {
            0
        };
        let mut apps = budget - system_pods;
        let stuck = apps >= 20;
        if stuck {
            apps -= 1;
        }

        let cluster_age = 86_400 * (30 + self.rng.below(60) as i64);
        for i in 0..=workers {
            self.seed_node(store, i, cluster_age);
        }
        let mut namespaces: Vec<String> =
            ["default", "kube-system", "kube-public", "kube-node-lease"]
                .map(str::to_owned)
                .to_vec();

        // Spread the application pods: one each, then by weight.
        let count = if apps <= CATALOGUE.len() {
            apps
        } else {
            CATALOGUE.len().max(apps.div_ceil(12))
        };
        let mut replicas = vec![1u32; count];
        let mut left = apps - count;
        while left > 0 {
            for (i, r) in replicas.iter_mut().enumerate() {
                let add = (CATALOGUE[i % CATALOGUE.len()].2 as usize).min(left);
                *r += add as u32;
                left -= add;
                if left == 0 {
                    break;
                }
            }
        }

        let app_ns = |i: usize| {
            let ns = CATALOGUE[i % CATALOGUE.len()].0;
            match i / CATALOGUE.len() {
                0 => ns.to_owned(),
                // More of the same: the other environments, then numbered copies.
                1 => format!("{ns}-staging"),
                2 => format!("{ns}-dev"),
                3 => format!("{ns}-qa"),
                k => format!("{ns}-{k}"),
            }
        };
        for i in 0..count {
            if !namespaces.contains(&app_ns(i)) {
                namespaces.push(app_ns(i));
            }
        }
        if stuck {
            namespaces.push("analytics".to_owned());
        }
        for (i, ns) in namespaces.iter().enumerate() {
            let age = if i < 4 {
                cluster_age
            } else {
                cluster_age - 3600
            };
            let object = json!({
                "metadata": {"name": ns, "creationTimestamp": self.ago(age), "labels": {"kubernetes.io/metadata.name": ns}},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            });
            let _ = store.create(&resource("namespaces"), object);
        }

        if with_system {
            self.seed_system(store, cluster_age);
        }
        for (i, &r) in replicas.iter().enumerate() {
            let (_, name, _, image, version, port, cpu, memory) = CATALOGUE[i % CATALOGUE.len()];
            let ns = app_ns(i);
            let container = Container {
                name: name.to_owned(),
                image: image.to_owned(),
                port,
                cpu,
                memory,
            };
            let age = 86_400 * (2 + self.rng.below(25) as i64);
            self.seed_deployment(store, &ns, name, container, version, r, age, false);
        }
        if stuck {
            let container = Container {
                name: "report-builder".to_owned(),
                image: "registry.example.com/analytics/report-builder".to_owned(),
                port: 8080,
                cpu: "2",
                memory: "96Gi",
            };
            self.seed_deployment(
                store,
                "analytics",
                "report-builder",
                container,
                (0, 9, 1),
                1,
                3600,
                true,
            );
        }
        self.seed_services(store, cluster_age);
    }

    fn seed_node(&mut self, store: &Store, index: usize, cluster_age: i64) {
        let control_plane = index == 0;
        let name = match index {
            0 => format!("{CLUSTER_NAME}-control-plane"),
            1 => format!("{CLUSTER_NAME}-worker"),
            n => format!("{CLUSTER_NAME}-worker{n}"),
        };
        let ip = format!("172.18.{}.{}", index / 250, index % 250 + 2);
        let (cpu, memory) = if control_plane || self.rng.below(3) > 0 {
            ("8", "32871692Ki")
        } else {
            ("16", "65843396Ki")
        };
        let zone = ["a", "b", "c"][index % 3];
        let mut labels = json!({
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "topology.kubernetes.io/region": "local-1",
            "topology.kubernetes.io/zone": format!("local-1{zone}"),
        });
        let mut taints = json!([]);
        if control_plane {
            labels["node-role.kubernetes.io/control-plane"] = json!("");
            labels["node.kubernetes.io/exclude-from-external-load-balancers"] = json!("");
            taints =
                json!([{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]);
        }
        let created = self.ago(cluster_age - index as i64 * 20);
        let beat = self.rng.below(40) as i64;
        let heartbeat = self.ago(beat);
        let bits = |r: &mut Rng| format!("{:016x}{:016x}", r.next(), r.next());
        let object = json!({
            "metadata": {
                "name": name,
                "creationTimestamp": created,
                "labels": labels,
                "annotations": {
                    "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
                    "node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                },
            },
            "spec": {
                "podCIDR": format!("10.244.{index}.0/24"),
                "podCIDRs": [format!("10.244.{index}.0/24")],
                "providerID": format!("kind://docker/{CLUSTER_NAME}/{name}"),
                "taints": taints,
            },
            "status": {
                "capacity": {"cpu": cpu, "ephemeral-storage": "203056560Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": memory, "pods": "110"},
                "allocatable": {"cpu": cpu, "ephemeral-storage": "203056560Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": memory, "pods": "110"},
                "conditions": node_conditions(&created, &heartbeat),
                "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": bits(&mut self.rng),
                    "systemUUID": crate::store::uuid_from_bits(self.rng.next(), self.rng.next()),
                    "bootID": crate::store::uuid_from_bits(self.rng.next(), self.rng.next()),
                    "kernelVersion": "6.8.0-60-generic",
                    "osImage": "Debian GNU/Linux 12 (bookworm)",
                    "containerRuntimeVersion": "containerd://2.1.3",
                    "kubeletVersion": KUBELET_VERSION,
                    "kubeProxyVersion": KUBELET_VERSION,
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
            },
        });
        let uid = created_uid(store.create(&resource("nodes"), object));
        self.nodes.push(NodeM {
            name,
            uid,
            ip,
            index,
            control_plane,
            pods: 0,
            next_ip: 1,
        });
    }

    fn seed_system(&mut self, store: &Store, cluster_age: i64) {
        let cp = &self.nodes[0];
        let (cp_name, cp_uid) = (cp.name.clone(), cp.uid.clone());
        for (component, image, cpu) in CONTROL_PLANE {
            let owner = Owner {
                api_version: "v1",
                kind: "Node",
                name: cp_name.clone(),
                uid: cp_uid.clone(),
            };
            let container = Container {
                name: component.to_owned(),
                image: image.to_owned(),
                port: 0,
                cpu,
                memory: "128Mi",
            };
            let labels = json!({"component": component, "tier": "control-plane"});
            let name = format!("{component}-{cp_name}");
            self.seed_pod(
                store,
                "kube-system",
                &name,
                owner,
                None,
                labels,
                container,
                true,
                Some(0),
                cluster_age - 30,
            );
        }
        // kube-proxy: a daemon set with a pod on every node.
        let hash = template_hash("kube-system/kube-proxy/1");
        let proxy = Container {
            name: "kube-proxy".to_owned(),
            image: format!("registry.k8s.io/kube-proxy:{KUBELET_VERSION}"),
            port: 0,
            cpu: "0",
            memory: "0",
        };
        let n = self.nodes.len();
        let ds = json!({
            "metadata": {"name": "kube-proxy", "namespace": "kube-system", "creationTimestamp": self.ago(cluster_age - 25), "labels": {"k8s-app": "kube-proxy"}, "annotations": {"deprecated.daemonset.template.generation": "1"}},
            "spec": {
                "selector": {"matchLabels": {"k8s-app": "kube-proxy"}},
                "template": {"metadata": {"labels": {"k8s-app": "kube-proxy"}}, "spec": {"containers": [proxy.json()], "priorityClassName": "system-node-critical", "hostNetwork": true}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
                "revisionHistoryLimit": 10,
            },
            "status": {"currentNumberScheduled": n, "desiredNumberScheduled": n, "numberAvailable": n, "numberMisscheduled": 0, "numberReady": n, "observedGeneration": 1, "updatedNumberScheduled": n},
        });
        let ds_uid = created_uid(store.create(&resource("daemonsets"), ds));
        for i in 0..n {
            let owner = Owner {
                api_version: "apps/v1",
                kind: "DaemonSet",
                name: "kube-proxy".to_owned(),
                uid: ds_uid.clone(),
            };
            let labels = json!({"k8s-app": "kube-proxy", "controller-revision-hash": hash, "pod-template-generation": "1"});
            let name = format!("kube-proxy-{}", suffix(&mut self.rng));
            self.seed_pod(
                store,
                "kube-system",
                &name,
                owner,
                None,
                labels,
                proxy.clone(),
                true,
                Some(i),
                cluster_age - 25 - i as i64 * 20,
            );
        }
        let coredns = Container {
            name: "coredns".to_owned(),
            image: "registry.k8s.io/coredns/coredns".to_owned(),
            port: 53,
            cpu: "100m",
            memory: "70Mi",
        };
        self.seed_deployment(
            store,
            "kube-system",
            "coredns",
            coredns,
            (1, 12, 1),
            2,
            cluster_age - 25,
            true,
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn seed_deployment(
        &mut self,
        store: &Store,
        ns: &str,
        name: &str,
        mut container: Container,
        version: (u32, u32, u32),
        replicas: u32,
        age: i64,
        frozen: bool,
    ) {
        let selector = if name == "coredns" {
            json!({"k8s-app": "kube-dns"})
        } else {
            json!({"app": name})
        };
        let repo = container.image.clone();
        let tag = |v: (u32, u32, u32)| format!("{repo}:{}.{}.{}", v.0, v.1, v.2);
        container.image = tag(version);
        let stuck = ns == "analytics";
        // Half the deployments were updated once since they were created.
        let revision = if frozen || self.rng.below(2) == 0 {
            1
        } else {
            2
        };
        let created = self.ago(age);
        let mut deploy = DeployM {
            key: (ns.to_owned(), name.to_owned()),
            uid: String::new(),
            selector: selector.clone(),
            container: Container {
                image: repo.clone(),
                ..container.clone()
            },
            replicas,
            base: replicas,
            version,
            revision,
            current: (String::new(), String::new()),
            history: Vec::new(),
            rolling: false,
            frozen,
            stuck,
            age,
            generation: 1,
            written: None,
        };
        let object = json!({
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": created, "labels": selector, "annotations": {"deployment.kubernetes.io/revision": revision.to_string()}},
            "spec": deployment_spec(&selector, replicas, &container),
        });
        deploy.uid = created_uid(store.create(&resource("deployments"), object));
        self.deploys.push(deploy);
        let d = self.deploys.len() - 1;
        if revision == 2 {
            let old = Container {
                image: tag((version.0, version.1, version.2.saturating_sub(1))),
                ..container.clone()
            };
            let key = self.create_rs(store, d, 1, old, 0, Some(age - 60));
            self.deploys[d].history.push(key);
        }
        let rs_age = if revision == 2 {
            86_400 * (self.rng.below(age as u64 / 86_400).max(1) as i64)
        } else {
            age - 1
        };
        let key = self.create_rs(
            store,
            d,
            revision,
            container.clone(),
            replicas,
            Some(rs_age),
        );
        self.deploys[d].current = key.clone();
        let rs = &self.sets[&key];
        let owner = Owner {
            api_version: "apps/v1",
            kind: "ReplicaSet",
            name: key.1.clone(),
            uid: rs.uid.clone(),
        };
        let mut labels = selector.clone();
        labels["pod-template-hash"] = json!(rs.hash);
        for _ in 0..replicas {
            let name = self.new_pod_name(&key);
            let node = if stuck {
                None
            } else {
                Some(self.pick_node(false))
            };
            let pod_age = if self.rng.below(5) == 0 {
                self.range(600, rs_age.max(601) as u64) as i64
            } else {
                rs_age - 5
            };
            self.seed_pod(
                store,
                ns,
                &name,
                owner.clone(),
                Some(key.clone()),
                labels.clone(),
                container.clone(),
                frozen && !stuck,
                node,
                pod_age,
            );
            self.sets
                .get_mut(&key)
                .expect("created")
                .pods
                .insert((ns.to_owned(), name));
        }
        self.write_status(store, d, "seeded");
    }

    /// Creates a replica set of deployment `d` at `revision`, with `replicas` wanted.
    fn create_rs(
        &mut self,
        store: &Store,
        d: usize,
        revision: u32,
        container: Container,
        replicas: u32,
        age: Option<i64>,
    ) -> Key {
        let deploy = &self.deploys[d];
        let (ns, dname) = deploy.key.clone();
        let hash = template_hash(&format!("{ns}/{dname}/{}/{revision}", container.image));
        let name = format!("{dname}-{hash}");
        let mut labels = deploy.selector.clone();
        labels["pod-template-hash"] = json!(hash);
        let max = replicas + replicas.div_ceil(4).max(1);
        let mut metadata = json!({
            "name": name,
            "namespace": ns,
            "labels": labels,
            "annotations": {
                "deployment.kubernetes.io/desired-replicas": deploy.replicas.to_string(),
                "deployment.kubernetes.io/max-replicas": max.to_string(),
                "deployment.kubernetes.io/revision": revision.to_string(),
            },
            "ownerReferences": Owner { api_version: "apps/v1", kind: "Deployment", name: dname.clone(), uid: deploy.uid.clone() }.json(),
        });
        if let Some(age) = age {
            metadata["creationTimestamp"] = json!(self.ago(age));
        }
        let object = json!({
            "metadata": metadata,
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod_template_spec(&container)},
            },
            "status": {"replicas": 0, "observedGeneration": 1},
        });
        let uid = created_uid(store.create(&resource("replicasets"), object));
        let key = (ns, name);
        self.sets.insert(
            key.clone(),
            RsM {
                uid,
                hash,
                deploy: d,
                replicas,
                container,
                pods: BTreeSet::new(),
                generation: 1,
                written: None,
            },
        );
        key
    }

    fn new_pod_name(&mut self, rs: &Key) -> String {
        // Bounded: a collision among 27^5 names is rare, and a few tries end it.
        for _ in 0..16 {
            let name = format!("{}-{}", rs.1, suffix(&mut self.rng));
            if !self.pods.contains_key(&(rs.0.clone(), name.clone())) {
                return name;
            }
        }
        format!("{}-{}", rs.1, suffix(&mut self.rng))
    }

    /// The worker with the fewest pods (any node for system pods).
    fn pick_node(&mut self, system: bool) -> usize {
        let best = self
            .nodes
            .iter()
            .filter(|n| system || !n.control_plane || self.nodes.len() == 1)
            .min_by_key(|n| (n.pods, n.index))
            .map_or(0, |n| n.index);
        self.nodes[best].pods += 1;
        best
    }

    fn pod_ip(&mut self, node: usize) -> String {
        let n = &mut self.nodes[node];
        n.next_ip = n.next_ip % 253 + 1;
        format!("10.244.{}.{}", n.index, n.next_ip + 1)
    }

    /// Writes a running pod (or a pending one with no node) as seeding finds it.
    #[allow(clippy::too_many_arguments)]
    fn seed_pod(
        &mut self,
        store: &Store,
        ns: &str,
        name: &str,
        owner: Owner,
        rs: Option<Key>,
        labels: Value,
        container: Container,
        system: bool,
        node: Option<usize>,
        age: i64,
    ) {
        let created = self.ago(age);
        let started = self.ago(age - 4);
        let (phase, ip) = match node {
            Some(n) => {
                // pick_node counted replica-set pods; static and daemon pods are counted here.
                if rs.is_none() {
                    self.nodes[n].pods += 1;
                }
                // Static and daemon pods here use the host's network, as kube-proxy and the
                // control plane do.
                let ip = if rs.is_none() {
                    self.nodes[n].ip.clone()
                } else {
                    self.pod_ip(n)
                };
                (Phase::Running, Some(ip))
            }
            None => (Phase::Unschedulable, None),
        };
        let restarts = if node.is_some() && self.rng.below(7) == 0 {
            1 + self.rng.below(4) as u32
        } else {
            0
        };
        let exited = (age - 10).min(self.rng.below(86_400) as i64 + 60);
        let last_exit = (restarts > 0).then(|| self.ago(exited));
        let pod = PodM {
            owner,
            rs,
            labels,
            container,
            system,
            node,
            ip,
            phase,
            restarts,
            born: 0,
            uid: String::new(),
            scheduled_at: created.clone(),
            started_at: last_exit.clone().unwrap_or(started),
            since: created.clone(),
            last_exit,
        };
        let key = (ns.to_owned(), name.to_owned());
        let object = self.pod_object(&key, &pod, Some(&created));
        let uid = created_uid(store.create(&resource("pods"), object));
        self.pods.insert(key, PodM { uid, ..pod });
    }

    fn seed_services(&mut self, store: &Store, cluster_age: i64) {
        let kubernetes = json!({
            "metadata": {"name": "kubernetes", "namespace": "default", "creationTimestamp": self.ago(cluster_age), "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"], "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}], "sessionAffinity": "None", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster"},
            "status": {"loadBalancer": {}},
        });
        let _ = store.create(&resource("services"), kubernetes);
        for (i, d) in self.deploys.iter().enumerate() {
            let (ns, name) = &d.key;
            let coredns = name == "coredns";
            let ip = if coredns {
                "10.96.0.10".to_owned()
            } else {
                format!("10.96.{}.{}", 1 + i / 200, 20 + i % 200)
            };
            let ports = if coredns {
                json!([
                    {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
                    {"name": "metrics", "port": 9153, "protocol": "TCP", "targetPort": 9153},
                ])
            } else {
                let port = if d.container.port == 8443 { 443 } else { 80 };
                json!([{"name": "http", "port": port, "protocol": "TCP", "targetPort": d.container.port}])
            };
            let svc = if coredns { "kube-dns" } else { name.as_str() };
            // The storefront faces the internet; the rest is internal.
            let public = name == "storefront";
            let mut spec = json!({
                "type": if public { "LoadBalancer" } else { "ClusterIP" },
                "clusterIP": ip, "clusterIPs": [ip],
                "selector": d.selector, "ports": ports,
                "sessionAffinity": "None", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster",
            });
            let mut status = json!({"loadBalancer": {}});
            if public {
                spec["externalTrafficPolicy"] = json!("Cluster");
                spec["ports"][0]["nodePort"] = json!(30000 + (fnv32(ns) % 2000) as u16);
                status = json!({"loadBalancer": {"ingress": [{"ip": format!("172.18.255.{}", 200 + i % 50), "ipMode": "VIP"}]}});
            }
            let object = json!({
                "metadata": {"name": svc, "namespace": ns, "creationTimestamp": self.ago(if coredns { cluster_age - 25 } else { d.age - 5 }), "labels": d.selector},
                "spec": spec,
                "status": status,
            });
            let _ = store.create(&resource("services"), object);
        }
    }

    // ----- objects -----

    fn pod_object(&self, key: &Key, pod: &PodM, created: Option<&str>) -> Value {
        let (ns, name) = key;
        let mut metadata = json!({
            "name": name,
            "namespace": ns,
            "labels": pod.labels,
            "ownerReferences": pod.owner.json(),
        });
        if pod.owner.kind != "Node" {
            metadata["generateName"] = json!(format!("{}-", pod.owner.name));
        }
        if let Some(created) = created {
            metadata["creationTimestamp"] = json!(created);
        }
        let mut spec = pod_template_spec(&pod.container);
        if let Some(n) = pod.node {
            spec["nodeName"] = json!(self.nodes[n].name);
        }
        if pod.system {
            spec["priorityClassName"] = json!("system-node-critical");
            spec["priority"] = json!(2_000_001_000);
            spec["tolerations"] = json!([{"operator": "Exists"}]);
        }
        json!({
            "metadata": metadata,
            "spec": spec,
            "status": self.pod_status(key, pod),
        })
    }

    /// The status the kubelet (or the scheduler) writes for a pod in its phase.
    fn pod_status(&self, key: &Key, pod: &PodM) -> Value {
        let qos = "Burstable";
        let scheduled = condition("PodScheduled", true, &pod.scheduled_at);
        let host = pod.node.map(|n| self.nodes[n].ip.clone());
        let c = &pod.container;
        let container_id = format!(
            "containerd://{}",
            hex64(u64::from(fnv32(&pod.uid)) << 8 | u64::from(pod.restarts))
        );
        let image_id = format!(
            "{}@sha256:{}",
            c.image.split(':').next().unwrap_or(""),
            hex64(u64::from(fnv32(&c.image)))
        );
        let last_state = match &pod.last_exit {
            Some(at) => {
                json!({"terminated": {"exitCode": 1, "reason": "Error", "startedAt": pod.scheduled_at, "finishedAt": at, "containerID": container_id}})
            }
            None => json!({}),
        };
        let not_ready = format!("containers with unready status: [{}]", c.name);
        match pod.phase {
            Phase::Unscheduled => json!({"phase": "Pending", "qosClass": qos}),
            Phase::Unschedulable => {
                let n = self.nodes.len();
                let message = format!(
                    "0/{n} nodes are available: 1 node(s) had untolerated taint {{node-role.kubernetes.io/control-plane: }}, {} Insufficient memory. preemption: 0/{n} nodes are available: 1 Preemption is not helpful for scheduling, {} No preemption victims found for incoming pod.",
                    n - 1,
                    n - 1
                );
                json!({"phase": "Pending", "conditions": [condition_why("PodScheduled", false, &pod.since, "Unschedulable", &message)], "qosClass": qos})
            }
            Phase::Scheduled => {
                json!({"phase": "Pending", "conditions": [scheduled], "qosClass": qos})
            }
            Phase::Creating => json!({
                "phase": "Pending",
                "hostIP": host, "hostIPs": [{"ip": host}],
                "startTime": pod.since,
                "conditions": [
                    condition("PodReadyToStartContainers", false, &pod.since),
                    condition("Initialized", true, &pod.since),
                    condition_why("Ready", false, &pod.since, "ContainersNotReady", &not_ready),
                    condition_why("ContainersReady", false, &pod.since, "ContainersNotReady", &not_ready),
                    scheduled,
                ],
                "containerStatuses": [{"name": c.name, "image": c.image, "imageID": "", "ready": false, "restartCount": 0, "started": false, "state": {"waiting": {"reason": "ContainerCreating"}}, "lastState": {}}],
                "qosClass": qos,
            }),
            Phase::Running | Phase::CrashLoop | Phase::Terminating => {
                let running = pod.phase != Phase::CrashLoop;
                let state = if running {
                    json!({"running": {"startedAt": pod.started_at}})
                } else {
                    json!({"waiting": {"reason": "CrashLoopBackOff", "message": format!("back-off 10s restarting failed container={} pod={}_{}({})", c.name, key.1, key.0, pod.uid)}})
                };
                let ready_reason = |kind| {
                    if running {
                        condition(kind, true, &pod.since)
                    } else {
                        condition_why(kind, false, &pod.since, "ContainersNotReady", &not_ready)
                    }
                };
                json!({
                    "phase": "Running",
                    "hostIP": host, "hostIPs": [{"ip": host}],
                    "podIP": pod.ip, "podIPs": [{"ip": pod.ip}],
                    "startTime": pod.scheduled_at,
                    "conditions": [
                        condition("PodReadyToStartContainers", true, &pod.scheduled_at),
                        condition("Initialized", true, &pod.scheduled_at),
                        ready_reason("Ready"),
                        ready_reason("ContainersReady"),
                        scheduled,
                    ],
                    "containerStatuses": [{"name": c.name, "image": c.image, "imageID": image_id, "containerID": container_id, "ready": running, "restartCount": pod.restarts, "started": running, "state": state, "lastState": last_state}],
                    "qosClass": qos,
                })
            }
            Phase::Failed => json!({
                "phase": "Failed",
                "reason": "Evicted",
                "message": format!("The node was low on resource: memory. Threshold quantity: 100Mi, available: 91328Ki. Container {} was using 1402312Ki, request is {}, has larger consumption of memory. ", c.name, c.memory),
                "hostIP": host, "hostIPs": [{"ip": host}],
                "podIP": pod.ip, "podIPs": [{"ip": pod.ip}],
                "startTime": pod.scheduled_at,
                "conditions": [
                    condition_why("DisruptionTarget", true, &pod.since, "TerminationByKubelet", "The node was low on resource: memory."),
                    condition("PodReadyToStartContainers", false, &pod.since),
                    condition("Initialized", true, &pod.scheduled_at),
                    condition_why("Ready", false, &pod.since, "PodFailed", ""),
                    condition_why("ContainersReady", false, &pod.since, "PodFailed", ""),
                    scheduled,
                ],
                "containerStatuses": [{"name": c.name, "image": c.image, "imageID": image_id, "containerID": container_id, "ready": false, "restartCount": pod.restarts, "started": false, "state": {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown", "message": "The container could not be located when the pod was terminated", "startedAt": pod.started_at, "finishedAt": pod.since}}, "lastState": last_state}],
                "qosClass": qos,
            }),
        }
    }

    // ----- the model at work -----

    fn apply(&mut self, store: &Store, action: Action) -> Vec<ClusterWrite> {
        match action {
            Action::Activity => self.activity(store),
            Action::Schedule(k) => self.transition(store, &k, Phase::Unscheduled, Phase::Scheduled),
            Action::StartContainers(k) => {
                self.transition(store, &k, Phase::Scheduled, Phase::Creating)
            }
            Action::Run(k) => self.transition(store, &k, Phase::Creating, Phase::Running),
            Action::Recover(k) => self.transition(store, &k, Phase::CrashLoop, Phase::Running),
            Action::Gone(k) => self.remove_pod(
                store,
                &k,
                Phase::Terminating,
                "deleted after its grace period",
            ),
            Action::Collect(k) => {
                self.remove_pod(store, &k, Phase::Failed, "evicted pod collected")
            }
            Action::Reconcile(k) => self.reconcile(store, &k),
            Action::Status(d) => self.write_status(store, d, "status"),
            Action::Rollout(d) => self.rollout_step(store, d),
            Action::Prune(d) => self.prune(store, d),
        }
    }

    fn activity(&mut self, store: &Store) -> Vec<ClusterWrite> {
        let roll = self.rng.below(100);
        match roll {
            0..35 => self.crash(store),
            35..55 => {
                let d = self.pick_deploy();
                d.map_or_else(Vec::new, |d| self.start_rollout(store, d))
            }
            55..80 => self.scale(store),
            80..88 => self.evict(store),
            _ => self.heartbeat(store),
        }
    }

    /// A deployment the churn may change: not frozen, not rolling out.
    fn pick_deploy(&mut self) -> Option<usize> {
        let free: Vec<usize> = (0..self.deploys.len())
            .filter(|&d| !self.deploys[d].frozen && !self.deploys[d].rolling)
            .collect();
        (!free.is_empty()).then(|| free[self.rng.below(free.len() as u64) as usize])
    }

    /// One of the pods `pick` accepts, at random.
    fn pick_pod(&mut self, pick: impl Fn(&PodM) -> bool) -> Option<Key> {
        let keys: Vec<Key> = self
            .pods
            .iter()
            .filter(|(_, p)| pick(p))
            .map(|(k, _)| k.clone())
            .collect();
        if keys.is_empty() {
            return None;
        }
        let i = self.rng.below(keys.len() as u64) as usize;
        keys.into_iter().nth(i)
    }

    fn deploy_of(&self, pod: &Key) -> Option<usize> {
        let rs = self.pods.get(pod)?.rs.as_ref()?;
        self.sets.get(rs).map(|r| r.deploy)
    }

    /// Writes a pod's status (and its node, when it was just bound) after a change of phase.
    fn write_pod(&mut self, store: &Store, key: &Key, reason: &'static str) -> Vec<ClusterWrite> {
        let pod = &self.pods[key];
        let mut patch = json!({"status": self.pod_status(key, pod)});
        if let Some(n) = pod.node {
            patch["spec"] = json!({"nodeName": self.nodes[n].name});
        }
        match patched(store, "pods", key, patch) {
            Ok(true) => vec![write(WriteKind::Updated, "pods", key, reason)],
            Ok(false) => Vec::new(),
            Err(e) => {
                tracing::debug!(pod = %key.1, error = %e.message, "pod gone from under the model");
                self.forget_pod(key);
                Vec::new()
            }
        }
    }

    /// Moves a pod from `from` to `to` and queues what comes next.
    fn transition(
        &mut self,
        store: &Store,
        key: &Key,
        from: Phase,
        to: Phase,
    ) -> Vec<ClusterWrite> {
        if self.pods.get(key).is_none_or(|p| p.phase != from) {
            return Vec::new();
        }
        let now = Self::now();
        let node = (to == Phase::Scheduled).then(|| {
            let system = self.pods[key].system;
            self.pick_node(system)
        });
        let ip = match (to, self.pods[key].node.or(node)) {
            (Phase::Running, Some(n)) if self.pods[key].ip.is_none() => Some(self.pod_ip(n)),
            _ => None,
        };
        let pod = self.pods.get_mut(key).expect("checked");
        pod.phase = to;
        pod.since = now.clone();
        if let Some(n) = node {
            pod.node = Some(n);
            pod.scheduled_at = now.clone();
        }
        if let Some(ip) = ip {
            pod.ip = Some(ip);
        }
        if to == Phase::Running {
            pod.started_at = now;
        }
        let reason = match to {
            Phase::Scheduled => "scheduled",
            Phase::Creating => "creating containers",
            _ if from == Phase::CrashLoop => "restarted",
            _ => "running",
        };
        let writes = self.write_pod(store, key, reason);
        if writes.is_empty() {
            return writes;
        }
        match to {
            Phase::Scheduled => self.at(1, Action::StartContainers(key.clone())),
            Phase::Creating => {
                let delay = self.range(2, 6);
                self.at(delay, Action::Run(key.clone()));
            }
            _ => {
                if let Some(d) = self.deploy_of(key) {
                    self.at(1, Action::Status(d));
                }
            }
        }
        writes
    }

    fn crash(&mut self, store: &Store) -> Vec<ClusterWrite> {
        // Applications crash; the control plane and add-ons are left steady.
        let Some(key) = self.pick_pod(|p| p.phase == Phase::Running && !p.system) else {
            return Vec::new();
        };
        let now = Self::now();
        let pod = self.pods.get_mut(&key).expect("picked");
        pod.phase = Phase::CrashLoop;
        pod.restarts += 1;
        pod.last_exit = Some(now.clone());
        pod.since = now;
        let writes = self.write_pod(store, &key, "container crashed");
        if !writes.is_empty() {
            let delay = self.range(4, 14);
            self.at(delay, Action::Recover(key.clone()));
            if let Some(d) = self.deploy_of(&key) {
                self.at(1, Action::Status(d));
            }
        }
        writes
    }

    fn evict(&mut self, store: &Store) -> Vec<ClusterWrite> {
        let movable: BTreeSet<Key> = self
            .sets
            .iter()
            .filter(|(_, r)| !self.deploys[r.deploy].frozen)
            .map(|(k, _)| k.clone())
            .collect();
        let Some(key) = self.pick_pod(|p| {
            p.phase == Phase::Running && p.rs.as_ref().is_some_and(|r| movable.contains(r))
        }) else {
            return Vec::new();
        };
        let pod = self.pods.get_mut(&key).expect("picked");
        pod.phase = Phase::Failed;
        pod.since = Self::now();
        let rs = pod.rs.clone();
        let writes = self.write_pod(store, &key, "evicted");
        if !writes.is_empty() {
            if let Some(rs) = rs {
                self.at(0, Action::Reconcile(rs));
            }
            if let Some(d) = self.deploy_of(&key) {
                self.at(1, Action::Status(d));
            }
            let delay = self.range(20, 60);
            self.at(delay, Action::Collect(key));
        }
        writes
    }

    fn heartbeat(&mut self, store: &Store) -> Vec<ClusterWrite> {
        if self.nodes.is_empty() {
            return Vec::new();
        }
        let i = self.rng.below(self.nodes.len() as u64) as usize;
        let name = self.nodes[i].name.clone();
        let Some(node) = store.get(&resource("nodes"), None, &name) else {
            return Vec::new();
        };
        let created = node["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let patch = json!({"status": {"conditions": node_conditions(&created, &Self::now())}});
        let key = (String::new(), name);
        match patched(store, "nodes", &key, patch) {
            Ok(true) => vec![write(WriteKind::Updated, "nodes", &key, "heartbeat")],
            _ => Vec::new(),
        }
    }

    fn scale(&mut self, store: &Store) -> Vec<ClusterWrite> {
        let Some(d) = self.pick_deploy() else {
            return Vec::new();
        };
        let (base, current) = (self.deploys[d].base, self.deploys[d].replicas);
        let low = base.saturating_sub(1).max(1);
        let high = base + 2;
        let mut to = self.range(u64::from(low), u64::from(high)) as u32;
        if to == current {
            to = if current > low {
                current - 1
            } else {
                current + 1
            };
        }
        self.deploys[d].replicas = to;
        self.deploys[d].generation += 1;
        let key = self.deploys[d].key.clone();
        let rs = self.deploys[d].current.clone();
        let mut writes = Vec::new();
        let patch = json!({"spec": {"replicas": to}});
        if patched(store, "deployments", &key, patch) == Ok(true) {
            writes.push(write(WriteKind::Updated, "deployments", &key, "scaled"));
        }
        writes.extend(self.set_rs_replicas(store, &rs, to, "scaled"));
        self.at(0, Action::Reconcile(rs));
        writes
    }

    fn set_rs_replicas(
        &mut self,
        store: &Store,
        rs: &Key,
        to: u32,
        reason: &'static str,
    ) -> Vec<ClusterWrite> {
        let Some(set) = self.sets.get_mut(rs) else {
            return Vec::new();
        };
        set.replicas = to;
        set.generation += 1;
        let desired = self.deploys[set.deploy].replicas;
        let patch = json!({
            "metadata": {"annotations": {"deployment.kubernetes.io/desired-replicas": desired.to_string()}},
            "spec": {"replicas": to},
        });
        match patched(store, "replicasets", rs, patch) {
            Ok(true) => vec![write(WriteKind::Updated, "replicasets", rs, reason)],
            _ => Vec::new(),
        }
    }

    /// Pods of a replica set that count towards its replicas.
    fn active(&self, rs: &Key) -> Vec<Key> {
        self.sets.get(rs).map_or_else(Vec::new, |s| {
            s.pods
                .iter()
                .filter(|k| {
                    self.pods
                        .get(*k)
                        .is_some_and(|p| !matches!(p.phase, Phase::Failed | Phase::Terminating))
                })
                .cloned()
                .collect()
        })
    }

    /// The replica set controller: one pod created or one deleted towards the spec.
    fn reconcile(&mut self, store: &Store, rs: &Key) -> Vec<ClusterWrite> {
        let Some(set) = self.sets.get(rs) else {
            return Vec::new();
        };
        let wanted = set.replicas as usize;
        let active = self.active(rs);
        let d = set.deploy;
        let writes = if active.len() < wanted {
            self.create_pod(store, rs)
        } else if active.len() > wanted {
            // Not-ready pods go first, then the newest.
            let victim = active
                .iter()
                .max_by_key(|k| {
                    let p = &self.pods[*k];
                    (p.phase != Phase::Running, p.born, (*k).clone())
                })
                .cloned()
                .expect("not empty");
            self.terminate(store, &victim)
        } else {
            return Vec::new();
        };
        if active.len().abs_diff(wanted) > 1 {
            self.at(1, Action::Reconcile(rs.clone()));
        }
        self.at(2, Action::Status(d));
        writes
    }

    fn create_pod(&mut self, store: &Store, rs: &Key) -> Vec<ClusterWrite> {
        let set = &self.sets[rs];
        let d = &self.deploys[set.deploy];
        let mut labels = d.selector.clone();
        labels["pod-template-hash"] = json!(set.hash);
        let owner = Owner {
            api_version: "apps/v1",
            kind: "ReplicaSet",
            name: rs.1.clone(),
            uid: set.uid.clone(),
        };
        let stuck = d.stuck;
        let pod = PodM {
            owner,
            rs: Some(rs.clone()),
            labels,
            container: set.container.clone(),
            system: d.frozen && !d.stuck,
            node: None,
            ip: None,
            phase: if stuck {
                Phase::Unschedulable
            } else {
                Phase::Unscheduled
            },
            restarts: 0,
            born: self.clock,
            uid: String::new(),
            scheduled_at: String::new(),
            started_at: String::new(),
            since: Self::now(),
            last_exit: None,
        };
        let name = self.new_pod_name(rs);
        let key = (rs.0.clone(), name);
        let object = self.pod_object(&key, &pod, None);
        match store.create(&resource("pods"), object) {
            Ok(created) => {
                let uid = created["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                self.pods.insert(key.clone(), PodM { uid, ..pod });
                self.sets
                    .get_mut(rs)
                    .expect("present")
                    .pods
                    .insert(key.clone());
                if !stuck {
                    self.at(1, Action::Schedule(key.clone()));
                }
                vec![write(WriteKind::Created, "pods", &key, "created")]
            }
            Err(_) => Vec::new(),
        }
    }

    /// A graceful delete: the pod turns Terminating, and goes when its grace period ends.
    fn terminate(&mut self, store: &Store, key: &Key) -> Vec<ClusterWrite> {
        match store.delete_with(
            &resource("pods"),
            Some(&key.0),
            &key.1,
            &DeleteOptions::default(),
        ) {
            Ok((_, Deletion::Pending)) => {
                self.pods.get_mut(key).expect("known").phase = Phase::Terminating;
                let delay = self.range(6, 16);
                self.at(delay, Action::Gone(key.clone()));
                vec![write(WriteKind::Updated, "pods", key, "terminating")]
            }
            Ok((_, Deletion::Gone)) => {
                // Never scheduled: nothing to stop, so it goes at once.
                self.forget_pod(key);
                vec![write(
                    WriteKind::Deleted,
                    "pods",
                    key,
                    "deleted before it was scheduled",
                )]
            }
            Err(_) => {
                self.forget_pod(key);
                Vec::new()
            }
        }
    }

    fn remove_pod(
        &mut self,
        store: &Store,
        key: &Key,
        from: Phase,
        reason: &'static str,
    ) -> Vec<ClusterWrite> {
        if self.pods.get(key).is_none_or(|p| p.phase != from) {
            return Vec::new();
        }
        let force = DeleteOptions {
            grace_period_seconds: Some(0),
            ..DeleteOptions::default()
        };
        let d = self.deploy_of(key);
        let gone = store
            .delete_with(&resource("pods"), Some(&key.0), &key.1, &force)
            .is_ok();
        self.forget_pod(key);
        if let Some(d) = d {
            self.at(1, Action::Status(d));
        }
        if gone {
            vec![write(WriteKind::Deleted, "pods", key, reason)]
        } else {
            Vec::new()
        }
    }

    /// Drops a pod from the model; its replica set makes up for it if it was active.
    fn forget_pod(&mut self, key: &Key) {
        let Some(pod) = self.pods.remove(key) else {
            return;
        };
        if let Some(n) = pod.node {
            self.nodes[n].pods = self.nodes[n].pods.saturating_sub(1);
        }
        if let Some(rs) = &pod.rs {
            if let Some(set) = self.sets.get_mut(rs) {
                set.pods.remove(key);
            }
            if !matches!(pod.phase, Phase::Terminating | Phase::Failed) {
                self.at(1, Action::Reconcile(rs.clone()));
            }
        }
    }

    fn start_rollout(&mut self, store: &Store, d: usize) -> Vec<ClusterWrite> {
        let deploy = &mut self.deploys[d];
        let (a, b, c) = deploy.version;
        deploy.version = if self.rng.below(5) == 0 {
            (a, b + 1, 0)
        } else {
            (a, b, c + 1)
        };
        deploy.revision += 1;
        deploy.generation += 1;
        deploy.rolling = true;
        let (a, b, c) = deploy.version;
        let container = Container {
            image: format!("{}:{a}.{b}.{c}", deploy.container.image),
            ..deploy.container.clone()
        };
        let revision = deploy.revision;
        let key = deploy.key.clone();
        let old = std::mem::take(&mut deploy.current);
        let rs = self.create_rs(store, d, revision, container.clone(), 0, None);
        let deploy = &mut self.deploys[d];
        deploy.history.push(old);
        deploy.current = rs.clone();
        let mut writes = vec![write(
            WriteKind::Created,
            "replicasets",
            &rs,
            "rollout started",
        )];
        let patch = json!({
            "metadata": {"annotations": {"deployment.kubernetes.io/revision": revision.to_string()}},
            "spec": {"template": {"spec": {"containers": [container.json()]}}},
        });
        if patched(store, "deployments", &key, patch) == Ok(true) {
            writes.push(write(WriteKind::Updated, "deployments", &key, "new image"));
        }
        self.at(1, Action::Rollout(d));
        self.at(1, Action::Status(d));
        writes
    }

    /// One step of a rolling update with 25% surge and 25% unavailable, as the deployment
    /// controller makes it: scale the new replica set up while the total stays within the surge,
    /// scale an old one down while enough pods stay ready.
    fn rollout_step(&mut self, store: &Store, d: usize) -> Vec<ClusterWrite> {
        let deploy = &self.deploys[d];
        let desired = deploy.replicas;
        let surge = desired.div_ceil(4).max(1);
        let unavailable = desired / 4;
        let new = deploy.current.clone();
        let new_spec = self.sets.get(&new).map_or(0, |s| s.replicas);
        let olds: Vec<Key> = deploy
            .history
            .iter()
            .filter(|k| self.sets.get(*k).is_some_and(|s| s.replicas > 0))
            .cloned()
            .collect();
        let old_spec: u32 = olds.iter().map(|k| self.sets[k].replicas).sum();
        let mut sets = olds.clone();
        sets.push(new.clone());
        let ready = sets
            .iter()
            .flat_map(|k| self.active(k))
            .filter(|k| self.pods[k].phase == Phase::Running)
            .count() as u32;
        if new_spec < desired && new_spec + old_spec < desired + surge {
            let writes = self.set_rs_replicas(store, &new, new_spec + 1, "rollout scaled up");
            self.at(0, Action::Reconcile(new));
            self.at(2, Action::Rollout(d));
            return writes;
        }
        if let Some(old) = olds.first()
            && ready > desired - unavailable
        {
            let to = self.sets[old].replicas - 1;
            let writes = self.set_rs_replicas(store, old, to, "rollout scaled down");
            self.at(0, Action::Reconcile(old.clone()));
            self.at(2, Action::Rollout(d));
            return writes;
        }
        let new_ready = self
            .active(&new)
            .iter()
            .filter(|k| self.pods[*k].phase == Phase::Running)
            .count() as u32;
        if olds.is_empty() && new_ready >= desired {
            self.deploys[d].rolling = false;
            self.at(1, Action::Prune(d));
            return self.write_status(store, d, "rollout complete");
        }
        // Waiting for pods to become ready.
        self.at(3, Action::Rollout(d));
        Vec::new()
    }

    /// Keeps two old replica sets per deployment, as a short `revisionHistoryLimit` would.
    fn prune(&mut self, store: &Store, d: usize) -> Vec<ClusterWrite> {
        let history = &self.deploys[d].history;
        if history.len() <= 2 {
            return Vec::new();
        }
        let oldest = history[0].clone();
        if self
            .sets
            .get(&oldest)
            .is_some_and(|s| s.replicas > 0 || !s.pods.is_empty())
        {
            self.at(5, Action::Prune(d));
            return Vec::new();
        }
        self.deploys[d].history.remove(0);
        self.sets.remove(&oldest);
        if self.deploys[d].history.len() > 2 {
            self.at(1, Action::Prune(d));
        }
        match store.delete(&resource("replicasets"), Some(&oldest.0), &oldest.1) {
            Ok(_) => vec![write(
                WriteKind::Deleted,
                "replicasets",
                &oldest,
                "old revision pruned",
            )],
            Err(_) => Vec::new(),
        }
    }

    /// Writes the status of a deployment's replica sets and of the deployment, where it changed.
    fn write_status(&mut self, store: &Store, d: usize, reason: &'static str) -> Vec<ClusterWrite> {
        let mut writes = Vec::new();
        let deploy = &self.deploys[d];
        let mut keys = deploy.history.clone();
        keys.push(deploy.current.clone());
        let (mut total, mut ready_total, mut updated) = (0, 0, 0);
        for key in &keys {
            let active = self.active(key);
            let replicas = active.len() as u32;
            let ready = active
                .iter()
                .filter(|k| self.pods[*k].phase == Phase::Running)
                .count() as u32;
            total += replicas;
            ready_total += ready;
            if *key == self.deploys[d].current {
                updated = replicas;
            }
            let Some(set) = self.sets.get_mut(key) else {
                continue;
            };
            let generation = set.generation;
            if set.written == Some((replicas, ready)) {
                continue;
            }
            set.written = Some((replicas, ready));
            let patch = json!({"status": {
                "replicas": replicas,
                "fullyLabeledReplicas": replicas,
                "readyReplicas": ready,
                "availableReplicas": ready,
                "observedGeneration": generation,
            }});
            if patched(store, "replicasets", key, patch) == Ok(true) {
                writes.push(write(WriteKind::Updated, "replicasets", key, reason));
            }
        }
        let deploy = &mut self.deploys[d];
        let now_written = (total, updated, ready_total, deploy.rolling);
        if deploy.written != Some(now_written) {
            deploy.written = Some(now_written);
            let now = Self::now();
            let min_available = deploy.replicas - deploy.replicas / 4;
            let available = if ready_total >= min_available {
                condition_why(
                    "Available",
                    true,
                    &now,
                    "MinimumReplicasAvailable",
                    "Deployment has minimum availability.",
                )
            } else {
                condition_why(
                    "Available",
                    false,
                    &now,
                    "MinimumReplicasUnavailable",
                    "Deployment does not have minimum availability.",
                )
            };
            let rs = &deploy.current.1;
            let progressing = if deploy.stuck {
                condition_why(
                    "Progressing",
                    false,
                    &now,
                    "ProgressDeadlineExceeded",
                    &format!("ReplicaSet \"{rs}\" has timed out progressing."),
                )
            } else if deploy.rolling {
                condition_why(
                    "Progressing",
                    true,
                    &now,
                    "ReplicaSetUpdated",
                    &format!("ReplicaSet \"{rs}\" is progressing."),
                )
            } else {
                condition_why(
                    "Progressing",
                    true,
                    &now,
                    "NewReplicaSetAvailable",
                    &format!("ReplicaSet \"{rs}\" has successfully progressed."),
                )
            };
            let (mut a, mut p) = (available, progressing);
            for c in [&mut a, &mut p] {
                let o = c.as_object_mut().expect("an object");
                o.remove("lastProbeTime");
                o.insert("lastUpdateTime".into(), json!(now));
            }
            let mut status = json!({
                "observedGeneration": deploy.generation,
                "replicas": total,
                "updatedReplicas": updated,
                "readyReplicas": ready_total,
                "availableReplicas": ready_total,
                "conditions": [a, p],
            });
            if deploy.replicas > ready_total {
                status["unavailableReplicas"] = json!(deploy.replicas - ready_total);
            } else {
                status["unavailableReplicas"] = Value::Null;
            }
            let key = deploy.key.clone();
            if patched(store, "deployments", &key, json!({"status": status})) == Ok(true) {
                writes.push(write(WriteKind::Updated, "deployments", &key, reason));
            }
        }
        writes
    }
}

/// Applies a merge patch; `Ok(false)` when it changed nothing (and so wrote nothing).
fn patched(
    store: &Store,
    plural: &str,
    key: &Key,
    patch: Value,
) -> Result<bool, kinformer_core::Status> {
    let before = store.resource_version();
    let ns = (!key.0.is_empty()).then_some(key.0.as_str());
    let after = store.patch(&resource(plural), ns, &key.1, patch)?;
    let rv = after["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse::<u64>().ok());
    Ok(rv.is_some_and(|rv| rv > before))
}

/// 64 hex digits (a container ID or an image digest) from a number.
fn hex64(x: u64) -> String {
    (0..4)
        .map(|i| format!("{:016x}", splitmix(x.wrapping_add(i))))
        .collect()
}

fn write(kind: WriteKind, resource: &'static str, key: &Key, reason: &'static str) -> ClusterWrite {
    ClusterWrite {
        kind,
        resource,
        namespace: key.0.clone(),
        name: key.1.clone(),
        reason,
    }
}

fn created_uid(created: Result<Value, kinformer_core::Status>) -> String {
    match created {
        Ok(v) => v["metadata"]["uid"].as_str().unwrap_or_default().to_owned(),
        Err(e) => {
            tracing::debug!(error = %e.message, "seed object not created");
            String::new()
        }
    }
}

fn node_conditions(created: &str, heartbeat: &str) -> Value {
    let c = |kind: &str, status: &str, reason: &str, message: &str| json!({"type": kind, "status": status, "lastHeartbeatTime": heartbeat, "lastTransitionTime": created, "reason": reason, "message": message});
    json!([
        c(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available"
        ),
        c(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure"
        ),
        c(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available"
        ),
        c(
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status"
        ),
    ])
}

fn pod_template_spec(container: &Container) -> Value {
    let mut c = container.json();
    if container.port == 0 {
        c.as_object_mut().expect("an object").remove("ports");
    }
    json!({
        "containers": [c],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ],
        "priority": 0,
        "enableServiceLinks": true,
        "preemptionPolicy": "PreemptLowerPriority",
    })
}

fn deployment_spec(selector: &Value, replicas: u32, container: &Container) -> Value {
    json!({
        "replicas": replicas,
        "selector": {"matchLabels": selector},
        "template": {"metadata": {"labels": selector}, "spec": pod_template_spec(container)},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
        "revisionHistoryLimit": 2,
        "progressDeadlineSeconds": 600,
    })
}

async fn churn_loop(mut cluster: Cluster, store: Store, writes: Arc<AtomicU64>) {
    let rate = cluster.config.rate_per_sec;
    if rate.is_nan() || rate <= 0.0 {
        return;
    }
    let tick = Duration::from_millis(10);
    let per_tick = rate / 100.0;
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut owed = 0.0;
    // Runs until the handle aborts the task.
    loop {
        ticker.tick().await;
        owed += per_tick;
        while owed >= 1.0 {
            let made = cluster.step(&store).len();
            writes.fetch_add(made as u64, Ordering::Relaxed);
            // A step that found nothing to do still uses its turn.
            owed -= made.max(1) as f64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_hashes_use_the_encoded_digit_alphabet() {
        let h = template_hash("default/web/nginx:1.27.3/1");
        assert!((6..=10).contains(&h.len()), "{h}");
        assert!(h.chars().all(|c| "456789bcdf".contains(c)), "{h}");
        assert_eq!(h, template_hash("default/web/nginx:1.27.3/1"));
        assert_ne!(h, template_hash("default/web/nginx:1.27.4/2"));
    }

    #[test]
    fn small_budgets_are_met_exactly() {
        for pods in [0, 1, 2, 5, 15, 16, 19, 20, 50, 333] {
            let s = Store::new(100_000);
            Cluster::seed(
                &s,
                &ClusterConfig {
                    pods,
                    ..ClusterConfig::default()
                },
            );
            assert_eq!(s.list(&resource("pods"), None).len(), pods, "{pods}");
        }
    }
}
