//! Workload generators: realistic pods, and a deterministic churn of creates, updates and deletes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kinformer_core::{ApiResource, Scope};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::error::Error;
use crate::store::{DeleteOptions, Store, rfc3339, splitmix, uuid_from_bits};

/// The namespaces seeded pods live in.
const NAMESPACES: [&str; 5] = ["default", "shop", "payments", "monitoring", "kube-system"];
const APPS: [&str; 8] = [
    "web", "api", "cart", "checkout", "search", "worker", "metrics", "auth",
];
const PHASES: [&str; 3] = ["Running", "Pending", "Succeeded"];

/// A small deterministic random number generator (splitmix64).
#[derive(Debug, Clone)]
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(1);
        splitmix(self.0)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub(crate) fn pick<'a>(&mut self, of: &[&'a str]) -> &'a str {
        of[self.below(of.len() as u64) as usize]
    }
}

fn hex(r: &mut Rng, n: usize) -> String {
    let alphabet = b"bcdfghjklmnpqrstvwxz2456789";
    (0..n)
        .map(|_| alphabet[r.below(alphabet.len() as u64) as usize] as char)
        .collect()
}

fn uuid(r: &mut Rng) -> String {
    let a = r.next();
    uuid_from_bits(a, r.next())
}

/// A realistic pod of about 4-5 KB of JSON: labels, annotations, an owner reference,
/// managedFields, two containers with env, resources, ports, probes and volume mounts, volumes,
/// and a status with conditions and container statuses. The same `(index, seed)` always gives the
/// same pod; different indexes give different names.
///
/// ```
/// let pod = kinformer_sim::generate_pod(7, 1);
/// assert_eq!(pod, kinformer_sim::generate_pod(7, 1));
/// let size = serde_json::to_vec(&pod).unwrap().len();
/// assert!((3500..6000).contains(&size), "{size}");
/// ```
pub fn generate_pod(index: usize, seed: u64) -> Value {
    let mut r = Rng(splitmix(seed ^ (index as u64).wrapping_mul(0x9e37_79b9)));
    let ns = NAMESPACES[index % NAMESPACES.len()];
    let app = r.pick(&APPS);
    let hash = format!("{}{}", hex(&mut r, 8), r.below(10));
    let name = format!("{app}-{hash}-{}{index}", hex(&mut r, 5));
    let node = format!("node-{}", r.below(50));
    let ts = rfc3339(1_767_225_600 + r.below(86_400 * 30));
    let ip = format!("10.{}.{}.{}", 244, r.below(250), r.below(250) + 2);
    let host_ip = format!("192.168.{}.{}", r.below(4), r.below(250) + 2);
    let version = format!("{}.{}.{}", 1 + r.below(3), r.below(20), r.below(10));
    let image = format!("registry.example.com/{ns}/{app}:{version}");
    let phase = if r.below(10) < 8 {
        "Running"
    } else {
        r.pick(&PHASES)
    };
    let tier = r.pick(&["frontend", "backend", "data"]);
    let env: Vec<Value> = [
        ("LOG_LEVEL", r.pick(&["info", "debug", "warn"]).to_owned()),
        ("APP_NAME", app.to_owned()),
        ("APP_VERSION", version.clone()),
        ("DATABASE_URL", format!("postgres://{app}@db.{ns}.svc.cluster.local:5432/{app}")),
        ("CACHE_TTL_SECONDS", r.below(3600).to_string()),
    ]
    .into_iter()
    .map(|(n, v)| json!({"name": n, "value": v}))
    .chain([json!({"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}})])
    .collect();
    let token_volume = format!("kube-api-access-{}", hex(&mut r, 5));
    let container_id = |r: &mut Rng| {
        format!(
            "containerd://{:016x}{:016x}{:016x}{:016x}",
            r.next(),
            r.next(),
            r.next(),
            r.next()
        )
    };
    let rs_uid = uuid(&mut r);
    let conditions: Vec<Value> = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .iter()
    .map(|t| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": ts}))
    .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": format!("{app}-{hash}-"),
            "namespace": ns,
            "creationTimestamp": ts,
            "labels": {
                "app": app,
                "pod-template-hash": hash,
                "tier": tier,
                "version": version,
                "app.kubernetes.io/part-of": "kinformer-demo",
            },
            "annotations": {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "9090",
            },
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": format!("{app}-{hash}"),
                "uid": rs_uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": ts,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}}, "f:ownerReferences": {".": {}, format!("k:{{\"uid\":\"{rs_uid}\"}}"): {}}}},
                },
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": ts,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:startTime": {}}},
                    "subresource": "status",
                },
            ],
        },
        "spec": {
            "volumes": [
                {"name": "config", "configMap": {"name": format!("{app}-config"), "defaultMode": 420}},
                {"name": token_volume, "projected": {"sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                ], "defaultMode": 420}},
            ],
            "containers": [
                {
                    "name": app,
                    "image": image,
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}, {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
                    "env": env,
                    "resources": {"limits": {"cpu": "1", "memory": "512Mi"}, "requests": {"cpu": format!("{}m", 100 + r.below(400)), "memory": "256Mi"}},
                    "volumeMounts": [
                        {"name": "config", "mountPath": "/etc/app", "readOnly": true},
                        {"name": token_volume, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true},
                    ],
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, "initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                },
                {
                    "name": "proxy",
                    "image": "registry.example.com/mesh/proxy:1.22.3",
                    "args": ["proxy", "sidecar", "--log-level=warning"],
                    "ports": [{"name": "proxy-admin", "containerPort": 15000, "protocol": "TCP"}],
                    "resources": {"limits": {"cpu": "200m", "memory": "128Mi"}, "requests": {"cpu": "10m", "memory": "40Mi"}},
                    "volumeMounts": [{"name": token_volume, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                },
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "nodeName": node,
            "securityContext": {"runAsNonRoot": true, "fsGroup": 2000},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ],
            "priority": 0,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": phase,
            "conditions": conditions,
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": ts,
            "containerStatuses": [
                {"name": app, "state": {"running": {"startedAt": ts}}, "lastState": {}, "ready": true, "restartCount": r.below(3), "image": image, "imageID": format!("{image}@sha256:{:016x}{:016x}", r.next(), r.next()), "containerID": container_id(&mut r), "started": true},
                {"name": "proxy", "state": {"running": {"startedAt": ts}}, "lastState": {}, "ready": true, "restartCount": 0, "image": "registry.example.com/mesh/proxy:1.22.3", "imageID": format!("registry.example.com/mesh/proxy@sha256:{:016x}{:016x}", r.next(), r.next()), "containerID": container_id(&mut r), "started": true},
            ],
            "qosClass": "Burstable",
        },
    })
}

fn pods() -> ApiResource {
    ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced)
}

fn namespaces() -> ApiResource {
    ApiResource::new("", "v1", "Namespace", "namespaces", Scope::Cluster)
}

/// How a churn loop writes: `rate_per_sec` writes per second (about a fifth creates, three fifths
/// updates, a fifth deletes, so the population stays level), deterministic from `seed`. Deletes
/// are graceful: a scheduled, running pod is first marked Terminating (a MODIFIED event with
/// `deletionTimestamp`) and deleted when its grace period ends.
#[derive(Debug, Clone)]
pub struct ChurnConfig {
    /// Writes per second.
    pub rate_per_sec: f64,
    /// The seed of the sequence of writes.
    pub seed: u64,
}

impl ChurnConfig {
    /// Parses a rate such as `50/s`, `50`, or `3000/m`.
    ///
    /// ```
    /// use kinformer_sim::ChurnConfig;
    /// assert_eq!(ChurnConfig::parse_rate("50/s").unwrap(), 50.0);
    /// assert_eq!(ChurnConfig::parse_rate("120/m").unwrap(), 2.0);
    /// assert!(ChurnConfig::parse_rate("fast").is_err());
    /// ```
    pub fn parse_rate(s: &str) -> Result<f64, Error> {
        let (n, per) = s.split_once('/').unwrap_or((s, "s"));
        let n: f64 = n
            .trim()
            .parse()
            .map_err(|_| Error::InvalidArgument(format!("churn rate {s:?} is not a number")))?;
        let secs = match per.trim() {
            "s" | "sec" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unknown churn period {other:?}"
                )));
            }
        };
        if !(n.is_finite() && n >= 0.0) {
            return Err(Error::InvalidArgument(format!(
                "churn rate {s:?} must be positive"
            )));
        }
        Ok(n / secs)
    }
}

/// A running churn loop; it stops when stopped or dropped.
#[derive(Debug)]
pub struct ChurnHandle {
    task: JoinHandle<()>,
    writes: Arc<AtomicU64>,
}

impl ChurnHandle {
    /// Wraps a running write loop and its counter of writes.
    pub(crate) fn new(task: JoinHandle<()>, writes: Arc<AtomicU64>) -> Self {
        Self { task, writes }
    }

    /// How many writes the loop has made so far.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Stops the loop.
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for ChurnHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Store {
    /// Creates `n` realistic pods ([`generate_pod`] with indexes `0..n`) spread over a few
    /// namespaces (created too if missing), deterministic from `seed`. Pods that already exist are
    /// left alone.
    pub fn seed_pods(&self, n: usize, seed: u64) {
        for ns in NAMESPACES {
            let _ = self.create(&namespaces(), json!({"metadata": {"name": ns}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}));
        }
        // Write in batches so that the lock is released now and then for readers.
        let mut i = 0;
        while i < n {
            let end = (i + 1000).min(n);
            let batch: Vec<Value> = (i..end).map(|k| generate_pod(k, seed)).collect();
            self.create_many(&pods(), batch);
            i = end;
        }
    }

    /// Starts a churn loop of pod creates, updates and deletes on the current tokio runtime.
    pub fn churn(&self, config: ChurnConfig) -> ChurnHandle {
        let writes = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(churn_loop(self.clone(), config, Arc::clone(&writes)));
        ChurnHandle { task, writes }
    }
}

/// One churn write.
fn churn_step(store: &Store, rng: &mut Rng, next_index: &mut usize, seed: u64) {
    let res = pods();
    let roll = rng.below(5);
    let (rv, _) = store.versions();
    let Ok(snap) = store.snapshot(&(String::new(), "pods".to_owned()), rv) else {
        return;
    };
    if roll == 0 || snap.is_empty() {
        let _ = store.create(&res, generate_pod(*next_index, seed));
        *next_index += 1;
        return;
    }
    let victim = &snap[rng.below(snap.len() as u64) as usize];
    if roll == 4 {
        // A graceful delete, as a controller makes it: scheduled pods turn Terminating first.
        let _ = store.delete_with(
            &res,
            Some(&victim.namespace),
            &victim.name,
            &DeleteOptions::default(),
        );
    } else {
        let patch = json!({
            "metadata": {"labels": {"churn": rng.below(4).to_string()}},
            "status": {"phase": rng.pick(&PHASES), "podIP": format!("10.245.{}.{}", rng.below(250), rng.below(250))},
        });
        let _ = store.patch(&res, Some(&victim.namespace), &victim.name, patch);
    }
}

async fn churn_loop(store: Store, config: ChurnConfig, writes: Arc<AtomicU64>) {
    if config.rate_per_sec <= 0.0 {
        return;
    }
    let mut rng = Rng(splitmix(config.seed ^ 0xc4u64));
    let mut next_index = 1_000_000_000usize;
    let tick = Duration::from_millis(10);
    let per_tick = config.rate_per_sec / 100.0;
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut owed = 0.0;
    // Runs until the handle aborts the task.
    loop {
        ticker.tick().await;
        owed += per_tick;
        while owed >= 1.0 {
            churn_step(&store, &mut rng, &mut next_index, config.seed);
            writes.fetch_add(1, Ordering::Relaxed);
            owed -= 1.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_are_deterministic_distinct_and_realistic() {
        assert_eq!(generate_pod(1, 9), generate_pod(1, 9));
        assert_ne!(
            generate_pod(1, 9)["metadata"]["name"],
            generate_pod(2, 9)["metadata"]["name"]
        );
        let sizes: Vec<usize> = (0..50)
            .map(|i| serde_json::to_vec(&generate_pod(i, 3)).unwrap().len())
            .collect();
        let avg = sizes.iter().sum::<usize>() / sizes.len();
        assert!((4000..=5200).contains(&avg), "average pod size {avg}");
        let pod: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(generate_pod(3, 3)).unwrap();
        assert_eq!(pod.spec.unwrap().containers.len(), 2);
    }

    #[test]
    fn seeding_creates_pods_and_namespaces() {
        let s = Store::new(100_000);
        s.seed_pods(20, 1);
        assert_eq!(s.list(&pods(), None).len(), 20);
        assert_eq!(s.list(&namespaces(), None).len(), NAMESPACES.len());
        assert_eq!(s.list(&pods(), Some("shop")).len(), 4);
        // Seeding more keeps the existing pods and adds the rest.
        s.seed_pods(25, 1);
        assert_eq!(s.list(&pods(), None).len(), 25);
    }

    #[tokio::test(start_paused = true)]
    async fn churn_writes_at_the_chosen_rate() {
        let s = Store::new(100_000);
        s.seed_pods(10, 1);
        let before = s.resource_version();
        let h = s.churn(ChurnConfig {
            rate_per_sec: 200.0,
            seed: 5,
        });
        tokio::time::sleep(Duration::from_millis(1005)).await;
        let writes = h.writes();
        assert!((190..=210).contains(&writes), "{writes}");
        h.stop();
        assert!(s.resource_version() > before);
    }
}
