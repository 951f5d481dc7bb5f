//! The model's vocabulary and state: the public configuration and write records, the
//! model's own view of the nodes, replica sets, deployments and pods it wrote, the actions it
//! queues, and its clock and work queue. Everything else in `cluster` reads and changes this.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::store::rfc3339;
use crate::workload::Rng;

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
    /// The resource, by plural name (`pods`, `replicasets`, `deployments`, `nodes`,
    /// `endpointslices`, ...).
    pub resource: &'static str,
    /// The namespace, empty for cluster-scoped objects.
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// Why, in a few words (`scheduled`, `rollout scaled up`, `terminating`, ...).
    pub reason: &'static str,
}

/// `(namespace, name)`.
pub(super) type Key = (String, String);

/// An owner reference, always the controller's.
#[derive(Debug, Clone)]
pub(super) struct Owner {
    pub(super) api_version: &'static str,
    pub(super) kind: &'static str,
    pub(super) name: String,
    pub(super) uid: String,
}

/// Where a pod is in its life, as the model drives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Phase {
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
pub(super) struct Container {
    pub(super) name: String,
    pub(super) image: String,
    pub(super) port: u16,
    pub(super) cpu: &'static str,
    pub(super) memory: &'static str,
}

#[derive(Debug, Clone)]
pub(super) struct NodeM {
    pub(super) name: String,
    pub(super) uid: String,
    pub(super) ip: String,
    pub(super) index: usize,
    pub(super) control_plane: bool,
    /// Pods bound to it.
    pub(super) pods: u32,
    /// The last pod IP handed out, within the node's /24.
    pub(super) next_ip: u32,
}

#[derive(Debug, Clone)]
pub(super) struct PodM {
    pub(super) owner: Owner,
    /// The replica set that owns it, if one does.
    pub(super) rs: Option<Key>,
    pub(super) labels: Value,
    pub(super) container: Container,
    /// Tolerates the control-plane taint and runs as a critical system pod.
    pub(super) system: bool,
    pub(super) node: Option<usize>,
    pub(super) ip: Option<String>,
    pub(super) phase: Phase,
    pub(super) restarts: u32,
    /// The step it was created at: scale-downs remove the newest first.
    pub(super) born: u64,
    pub(super) uid: String,
    /// When it was scheduled, started, and last left a state (RFC 3339).
    pub(super) scheduled_at: String,
    pub(super) started_at: String,
    pub(super) since: String,
    /// When its container last exited, if it ever did.
    pub(super) last_exit: Option<String>,
    /// The five characters of its `kube-api-access-*` token volume; empty for a static pod's
    /// mirror, which has none.
    pub(super) token: String,
}

#[derive(Debug, Clone)]
pub(super) struct RsM {
    pub(super) uid: String,
    pub(super) hash: String,
    pub(super) deploy: usize,
    pub(super) replicas: u32,
    pub(super) container: Container,
    pub(super) pods: BTreeSet<Key>,
    /// `metadata.generation`: bumped by every change of the spec.
    pub(super) generation: u32,
    /// The status last written: (replicas, ready).
    pub(super) written: Option<(u32, u32)>,
}

#[derive(Debug, Clone)]
pub(super) struct DeployM {
    pub(super) key: Key,
    pub(super) uid: String,
    pub(super) selector: Value,
    pub(super) container: Container,
    pub(super) replicas: u32,
    /// The replica count it was seeded with; scaling stays near it.
    pub(super) base: u32,
    pub(super) version: (u32, u32, u32),
    pub(super) revision: u32,
    pub(super) current: Key,
    /// Older replica sets, oldest first.
    pub(super) history: Vec<Key>,
    pub(super) rolling: bool,
    /// Left alone by the churn (cluster add-ons, and the deployment that cannot be scheduled).
    pub(super) frozen: bool,
    pub(super) stuck: bool,
    /// Seconds before seeding it was created.
    pub(super) age: i64,
    /// `metadata.generation`: bumped by every change of the spec.
    pub(super) generation: u32,
    /// The status last written: (replicas, updated, ready, rolling).
    pub(super) written: Option<(u32, u32, u32, bool)>,
    /// The EndpointSlice of its service, once seeded.
    pub(super) slice: Option<SliceM>,
}

/// The EndpointSlice the endpointslice controller keeps for a deployment's service.
#[derive(Debug, Clone)]
pub(super) struct SliceM {
    /// `SERVICE-xxxxx`.
    pub(super) name: String,
    /// The endpoints last written.
    pub(super) endpoints: Value,
}

/// One thing the model does when its time comes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Action {
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
    /// The endpointslice controller syncs a deployment's service.
    Endpoints(usize),
}

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
///   whose selector matches them, with the service's EndpointSlice; with 20 pods or more, one
///   deployment whose pod no node can hold (Pending, `Unschedulable`);
/// - every pod as dense as a real one: service account and its projected token volume, the
///   defaults and tolerations the API server adds, container statuses with image and container
///   IDs and mounts; every object with the `managedFields` its writers leave (the controller
///   manager, the kubelet, the scheduler, `kubectl`, `kubeadm`), kept up to date by the churn.
///
/// What the churn does: rolling updates (a new replica set scaled up while the old one scales
/// down, within 25% surge and 25% unavailable), scaling, pods going Pending, then
/// `ContainerCreating`, then Running, containers crashing into `CrashLoopBackOff` and restarting
/// (restart counts go up), evictions (Failed pods, replaced, later collected), graceful deletion
/// (pods Terminating for a while before they are deleted), node heartbeats, and the
/// EndpointSlices following the pods that become ready, not ready, terminating or go.
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
    pub(super) config: ClusterConfig,
    pub(super) rng: Rng,
    /// The model's clock, in steps.
    pub(super) clock: u64,
    /// Wall-clock seconds at seeding, for back-dated timestamps.
    pub(super) epoch: i64,
    pub(super) nodes: Vec<NodeM>,
    pub(super) deploys: Vec<DeployM>,
    pub(super) sets: BTreeMap<Key, RsM>,
    pub(super) pods: BTreeMap<Key, PodM>,
    /// What is due, by (step, sequence).
    pub(super) queue: BTreeMap<(u64, u64), Action>,
    pub(super) seq: u64,
    /// Deployments with a status write queued.
    pub(super) status_queued: BTreeSet<usize>,
    /// Deployments with an EndpointSlice sync queued.
    pub(super) endpoints_queued: BTreeSet<usize>,
}

/// The model's clock and its work queue.
impl Cluster {
    pub(super) fn at(&mut self, delay: u64, action: Action) {
        // One status write (or sync) covers every change before it: never queue two.
        let fresh = match action {
            Action::Status(d) => self.status_queued.insert(d),
            Action::Endpoints(d) => self.endpoints_queued.insert(d),
            _ => true,
        };
        if !fresh {
            return;
        }
        self.seq += 1;
        self.queue.insert((self.clock + delay, self.seq), action);
    }

    pub(super) fn pop_due(&mut self) -> Option<Action> {
        let (&(due, _), _) = self.queue.first_key_value()?;
        (due <= self.clock).then(|| self.pop())
    }

    pub(super) fn pop(&mut self) -> Action {
        let (_, action) = self.queue.pop_first().expect("not empty");
        match action {
            Action::Status(d) => {
                self.status_queued.remove(&d);
            }
            Action::Endpoints(d) => {
                self.endpoints_queued.remove(&d);
            }
            _ => {}
        }
        action
    }

    /// A timestamp `ago` seconds before seeding.
    pub(super) fn ago(&self, ago: i64) -> String {
        rfc3339(u64::try_from(self.epoch - ago).unwrap_or(0))
    }

    pub(super) fn now() -> String {
        rfc3339(u64::try_from(jiff::Timestamp::now().as_second()).unwrap_or(0))
    }

    pub(super) fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.rng.below(high - low + 1)
    }
}
