//! The pods `cargo xtask bench` serves, and the updates it makes to them.
//!
//! Two sizes: [`PodSize::Realistic`] is `kinformer_sim::generate_pod` (about 5 KB of JSON: two
//! containers, a few env vars, two `managedFields` entries), and [`PodSize::Dense`] is a pod as a
//! production workload's often is (10-15 KB: an init container and three containers with many env
//! vars, volumes and volume mounts, probes, resources, affinity, topology spread, and the long
//! `managedFields` that the controller and the kubelet leave). The same `(index, seed)` always gives
//! the same pod, and both sizes share names and namespaces for an index.
//!
//! [`update_patch`] is one status update as a kubelet or controller makes it: the phase, the
//! conditions (with new `lastTransitionTime` and `lastProbeTime`), the containers' readiness, the
//! `managedFields` times, and a label or an annotation all change; the server gives it a new
//! `resourceVersion`.
//!
//! ```
//! use kinformer_benches::pods::{PodSize, pod, update_patch};
//!
//! let dense = pod(PodSize::Dense, 7, 1);
//! let size = serde_json::to_vec(&dense).unwrap().len();
//! assert!((10_000..=15_000).contains(&size), "{size}");
//! assert_eq!(dense["metadata"]["name"], pod(PodSize::Realistic, 7, 1)["metadata"]["name"]);
//! let patch = update_patch(&dense, 3);
//! assert!(patch["status"]["conditions"].is_array());
//! ```

use serde_json::{Value, json};

/// How large and nested the served pods are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodSize {
    /// `kinformer_sim::generate_pod`: about 5 KB of JSON.
    Realistic,
    /// [`dense_pod`]: 10-15 KB of JSON.
    Dense,
}

impl PodSize {
    /// The name on the command line (`realistic`, `dense`).
    pub fn as_str(self) -> &'static str {
        match self {
            PodSize::Realistic => "realistic",
            PodSize::Dense => "dense",
        }
    }

    /// The size of a command-line name.
    pub fn parse(name: &str) -> Option<PodSize> {
        match name {
            "realistic" => Some(PodSize::Realistic),
            "dense" => Some(PodSize::Dense),
            _ => None,
        }
    }
}

/// The pod `index` of `size`, deterministic from `seed`.
pub fn pod(size: PodSize, index: usize, seed: u64) -> Value {
    match size {
        PodSize::Realistic => kinformer_sim::generate_pod(index, seed),
        PodSize::Dense => dense_pod(index, seed),
    }
}

/// splitmix64: a small, good, deterministic mixer.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(1);
        mix(self.0)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<'a>(&mut self, of: &[&'a str]) -> &'a str {
        of[self.below(of.len() as u64) as usize]
    }
    fn hex(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| char::from(b"0123456789abcdef"[self.below(16) as usize]))
            .collect()
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` of a Unix time.
pub fn rfc3339(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let secs = unix_secs % 86_400;
    // Days to civil date (proleptic Gregorian calendar), after the era-based algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// The first second of 2026, the clock the generated pods start from.
const EPOCH: u64 = 1_767_225_600;

/// An env var with a literal value.
fn env(name: &str, value: impl Into<String>) -> Value {
    json!({"name": name, "value": value.into()})
}

/// The `fieldsV1` entries of a container as server-side apply records them.
fn container_fields(name: &str, env: &[Value], mounts: &[Value], ports: &[u64]) -> Value {
    let mut f = serde_json::Map::new();
    f.insert(".".into(), json!({}));
    f.insert("f:name".into(), json!({}));
    f.insert("f:image".into(), json!({}));
    f.insert("f:imagePullPolicy".into(), json!({}));
    f.insert(
        "f:resources".into(),
        json!({".": {}, "f:limits": {".": {}, "f:cpu": {}, "f:memory": {}}, "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}}),
    );
    f.insert("f:terminationMessagePath".into(), json!({}));
    f.insert("f:terminationMessagePolicy".into(), json!({}));
    let mut e = serde_json::Map::new();
    e.insert(".".into(), json!({}));
    for v in env {
        let n = v["name"].as_str().unwrap_or_default();
        e.insert(
            format!("k:{{\"name\":\"{n}\"}}"),
            json!({".": {}, "f:name": {}, "f:value": {}}),
        );
    }
    f.insert("f:env".into(), Value::Object(e));
    if !mounts.is_empty() {
        f.insert("f:volumeMounts".into(), json!({}));
    }
    let mut p = serde_json::Map::new();
    p.insert(".".into(), json!({}));
    for port in ports {
        p.insert(
            format!("k:{{\"containerPort\":{port},\"protocol\":\"TCP\"}}"),
            json!({".": {}, "f:containerPort": {}, "f:name": {}, "f:protocol": {}}),
        );
    }
    f.insert("f:ports".into(), Value::Object(p));
    json!({ format!("k:{{\"name\":\"{name}\"}}"): Value::Object(f) })
}

fn probe(path: &str, port: u64, delay: u64) -> Value {
    json!({
        "httpGet": {"path": path, "port": port, "scheme": "HTTP"},
        "initialDelaySeconds": delay, "periodSeconds": 10, "timeoutSeconds": 2,
        "successThreshold": 1, "failureThreshold": 3,
    })
}

fn mount(name: &str, path: &str, read_only: bool) -> Value {
    json!({"name": name, "mountPath": path, "readOnly": read_only})
}

/// A dense pod (10-15 KB of JSON) as a production Deployment's pod often is: an init container
/// and three containers (the application, a service-mesh proxy and a log shipper) with many env
/// vars (literal, from secrets, config maps and the downward API), seven volumes and their mounts,
/// liveness, readiness and startup probes, resources, security contexts, affinity, tolerations
/// and topology spread, the `managedFields` of two managers, and a full status. It has the name
/// and namespace of `kinformer_sim::generate_pod(index, seed)`.
pub fn dense_pod(index: usize, seed: u64) -> Value {
    let base = kinformer_sim::generate_pod(index, seed);
    let meta = &base["metadata"];
    let name = meta["name"].as_str().unwrap_or_default().to_owned();
    let ns = meta["namespace"].as_str().unwrap_or_default().to_owned();
    let app = meta["labels"]["app"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let hash = meta["labels"]["pod-template-hash"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let owner = meta["ownerReferences"].clone();
    let rs_uid = owner[0]["uid"].as_str().unwrap_or_default().to_owned();
    let mut r = Rng(mix(
        seed ^ (index as u64).wrapping_mul(0x2545_f491_4f6c_dd1d)
    ));
    let created = EPOCH + r.below(86_400 * 30);
    let ts = rfc3339(created);
    let started = rfc3339(created + 3 + r.below(20));
    let version = format!("{}.{}.{}", 1 + r.below(4), r.below(30), r.below(10));
    let image = format!("registry.example.com/{ns}/{app}:{version}");
    let node = format!(
        "ip-10-{}-{}-{}.eu-west-1.compute.internal",
        r.below(4),
        r.below(250),
        r.below(250)
    );
    let ip = format!(
        "10.{}.{}.{}",
        100 + r.below(20),
        r.below(250),
        r.below(250) + 2
    );
    let host_ip = format!("10.{}.{}.{}", r.below(4), r.below(250), r.below(250) + 2);
    let team = r.pick(&["storefront", "payments", "platform", "search", "data"]);
    let tier = r.pick(&["frontend", "backend", "data"]);
    let token = format!("kube-api-access-{}", r.hex(5));
    let app_env: Vec<Value> = vec![
        env("LOG_LEVEL", r.pick(&["info", "debug", "warn"])),
        env("LOG_FORMAT", "json"),
        env("APP_NAME", app.clone()),
        env("APP_VERSION", version.clone()),
        env("HTTP_PORT", "8080"),
        env("DATABASE_HOST", format!("{app}-db.{ns}.svc.cluster.local")),
        env(
            "REDIS_URL",
            format!("redis://{app}-cache.{ns}.svc.cluster.local:6379/0"),
        ),
        env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://otel-collector.monitoring.svc:4317",
        ),
        env("CACHE_TTL_SECONDS", r.below(3600).to_string()),
        json!({"name": "DATABASE_PASSWORD", "valueFrom": {"secretKeyRef": {"name": format!("{app}-db"), "key": "password"}}}),
        json!({"name": "REGION", "valueFrom": {"configMapKeyRef": {"name": "cluster-info", "key": "region"}}}),
        json!({"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}),
        json!({"name": "MEMORY_LIMIT", "valueFrom": {"resourceFieldRef": {"containerName": app, "resource": "limits.memory", "divisor": "1Mi"}}}),
    ];
    let proxy_env: Vec<Value> = vec![
        env("ISTIO_META_CLUSTER_ID", "Kubernetes"),
        env("ISTIO_META_WORKLOAD_NAME", app.clone()),
        json!({"name": "INSTANCE_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}),
    ];
    let shipper_env: Vec<Value> = vec![
        env("FLUENT_BIT_LOG_LEVEL", "warn"),
        env("OUTPUT_HOST", "logs.monitoring.svc.cluster.local"),
        env("OUTPUT_PORT", "24224"),
    ];
    let app_mounts = vec![
        mount("config", "/etc/app", true),
        mount("secrets", "/etc/app/secrets", true),
        mount("tmp", "/tmp", false),
        mount("cache", "/var/cache/app", false),
        mount("data", "/var/lib/app", false),
        mount(
            &token,
            "/var/run/secrets/kubernetes.io/serviceaccount",
            true,
        ),
    ];
    let proxy_mounts = vec![
        mount("istio-envoy", "/etc/istio/proxy", false),
        mount(
            &token,
            "/var/run/secrets/kubernetes.io/serviceaccount",
            true,
        ),
    ];
    let shipper_mounts = vec![
        mount("tmp", "/var/log/app", true),
        mount(
            &token,
            "/var/run/secrets/kubernetes.io/serviceaccount",
            true,
        ),
    ];
    let container_id = |r: &mut Rng| format!("containerd://{}", r.hex(64));
    let image_id = |r: &mut Rng, image: &str| format!("{image}@sha256:{}", r.hex(64));
    let restricted = json!({
        "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true,
        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
    });
    let conditions: Vec<Value> = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .iter()
    .map(|t| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": started}))
    .collect();
    let running = |name: &str, image: &str, r: &mut Rng| {
        json!({
            "name": name, "state": {"running": {"startedAt": started}}, "lastState": {},
            "ready": true, "restartCount": r.below(3), "image": image,
            "imageID": image_id(r, image), "containerID": container_id(r), "started": true,
        })
    };
    let proxy_image = "registry.example.com/istio/proxyv2:1.24.2";
    let shipper_image = "registry.example.com/fluent/fluent-bit:3.2.4";
    let container_statuses = vec![
        running(&app, &image, &mut r),
        running("istio-proxy", proxy_image, &mut r),
        running("log-shipper", shipper_image, &mut r),
    ];
    let init_status = json!({
        "name": "migrate", "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": ts, "finishedAt": started, "containerID": container_id(&mut r)}},
        "lastState": {}, "ready": true, "restartCount": 0, "image": image.clone(),
        "imageID": image_id(&mut r, &image), "containerID": container_id(&mut r), "started": false,
    });
    let mut spec_fields = serde_json::Map::new();
    for (c, e, m, p) in [
        (
            app.as_str(),
            &app_env,
            &app_mounts,
            &[8080_u64, 9000, 9090][..],
        ),
        ("istio-proxy", &proxy_env, &proxy_mounts, &[15090][..]),
        ("log-shipper", &shipper_env, &shipper_mounts, &[][..]),
    ] {
        if let Value::Object(o) = container_fields(c, e, m, p) {
            spec_fields.extend(o);
        }
    }
    let managed = json!([
        {
            "manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": ts,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/default-container": {}, "f:checksum/config": {}, "f:prometheus.io/scrape": {}}, "f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:app.kubernetes.io/name": {}, "f:pod-template-hash": {}, "f:tier": {}, "f:team": {}}, "f:ownerReferences": {".": {}, format!("k:{{\"uid\":\"{rs_uid}\"}}"): {}}},
                "f:spec": {"f:affinity": {".": {}, "f:podAntiAffinity": {}}, "f:containers": Value::Object(spec_fields), "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}, "f:topologySpreadConstraints": {}, "f:volumes": {}},
            },
        },
        {
            "manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": started,
            "fieldsType": "FieldsV1", "subresource": "status",
            "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"ContainersReady\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}, "k:{\"type\":\"Initialized\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}, "k:{\"type\":\"Ready\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}}, "f:containerStatuses": {}, "f:hostIP": {}, "f:initContainerStatuses": {}, "f:phase": {}, "f:podIP": {}, "f:podIPs": {}, "f:startTime": {}}},
        },
    ]);
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
                "app.kubernetes.io/name": app,
                "app.kubernetes.io/instance": format!("{app}-{ns}"),
                "app.kubernetes.io/version": version,
                "app.kubernetes.io/component": tier,
                "app.kubernetes.io/part-of": "kinformer-demo",
                "app.kubernetes.io/managed-by": "Helm",
                "pod-template-hash": hash,
                "tier": tier,
                "team": team,
                "security.istio.io/tlsMode": "istio",
                "service.istio.io/canonical-name": app,
            },
            "annotations": {
                "kubectl.kubernetes.io/default-container": app,
                "checksum/config": r.hex(64),
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "9090",
                "prometheus.io/path": "/metrics",
            },
            "ownerReferences": owner,
            "managedFields": managed,
        },
        "spec": {
            "volumes": [
                {"name": "config", "configMap": {"name": format!("{app}-config"), "defaultMode": 420}},
                {"name": "secrets", "secret": {"secretName": format!("{app}-secrets"), "defaultMode": 288}},
                {"name": "tmp", "emptyDir": {}},
                {"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "256Mi"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": format!("{app}-data")}},
                {"name": "istio-envoy", "emptyDir": {"medium": "Memory"}},
                {"name": token, "projected": {"sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                ], "defaultMode": 420}},
            ],
            "initContainers": [{
                "name": "migrate", "image": image.clone(), "command": ["/app/bin/migrate", "--wait-for-db", "--timeout=120s"],
                "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
                "volumeMounts": [mount(&token, "/var/run/secrets/kubernetes.io/serviceaccount", true)],
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent", "securityContext": restricted.clone(),
            }],
            "containers": [
                {
                    "name": app, "image": image, "args": ["serve", "--config=/etc/app/config.yaml"],
                    "ports": [
                        {"name": "http", "containerPort": 8080, "protocol": "TCP"},
                        {"name": "grpc", "containerPort": 9000, "protocol": "TCP"},
                        {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
                    ],
                    "envFrom": [{"configMapRef": {"name": format!("{app}-env")}}, {"secretRef": {"name": format!("{app}-env"), "optional": true}}],
                    "env": app_env,
                    "resources": {"limits": {"cpu": "2", "memory": "2Gi", "ephemeral-storage": "1Gi"}, "requests": {"cpu": format!("{}m", 200 + r.below(800)), "memory": "1Gi", "ephemeral-storage": "256Mi"}},
                    "volumeMounts": app_mounts,
                    "livenessProbe": probe("/healthz", 8080, 15),
                    "readinessProbe": probe("/ready", 8080, 5),
                    "startupProbe": probe("/started", 8080, 0),
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent", "securityContext": restricted.clone(),
                },
                {
                    "name": "istio-proxy", "image": proxy_image,
                    "args": ["proxy", "sidecar", "--domain", format!("{ns}.svc.cluster.local"), "--proxyLogLevel=warning"],
                    "ports": [{"name": "http-envoy-prom", "containerPort": 15090, "protocol": "TCP"}],
                    "env": proxy_env,
                    "resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
                    "volumeMounts": proxy_mounts,
                    "readinessProbe": probe("/healthz/ready", 15021, 1),
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                },
                {
                    "name": "log-shipper", "image": shipper_image,
                    "env": shipper_env,
                    "resources": {"limits": {"cpu": "200m", "memory": "128Mi"}, "requests": {"cpu": "20m", "memory": "32Mi"}},
                    "volumeMounts": shipper_mounts,
                    "livenessProbe": probe("/api/v1/health", 2020, 10),
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                },
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 45,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": app,
            "serviceAccount": app,
            "nodeName": node,
            "nodeSelector": {"kubernetes.io/os": "linux", "node.kubernetes.io/pool": "general"},
            "securityContext": {"runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001, "seccompProfile": {"type": "RuntimeDefault"}},
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100,
                "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"},
            }]}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": app}}}],
            "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ],
            "priority": 0,
            "enableServiceLinks": false,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": "Running",
            "conditions": conditions,
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": ts,
            "initContainerStatuses": [init_status],
            "containerStatuses": container_statuses,
            "qosClass": "Burstable",
        },
    })
}

const PHASES: [&str; 4] = ["Running", "Pending", "Succeeded", "Failed"];

/// What [`update_patch`] reads of `pod`: its conditions, container statuses and `managedFields`.
/// A writer that updates the same pods again and again can keep these instead of the pods, and
/// gets the same patches from them.
///
/// ```
/// use kinformer_benches::pods::{PodSize, pod, update_base, update_patch};
///
/// let dense = pod(PodSize::Dense, 3, 1);
/// assert_eq!(update_patch(&update_base(&dense), 8), update_patch(&dense, 8));
/// ```
pub fn update_base(pod: &Value) -> Value {
    json!({
        "metadata": {"managedFields": pod["metadata"]["managedFields"]},
        "status": {
            "conditions": pod["status"]["conditions"],
            "containerStatuses": pod["status"]["containerStatuses"],
        },
    })
}

/// A merge patch (RFC 7386) that makes the `revision`-th update of `pod` (the pod as generated,
/// of either size), as a kubelet's status update and a controller's touch make it together:
///
/// - `status.phase` moves on, and the `Ready` and `ContainersReady` conditions flip, with a new
///   `lastTransitionTime`; every condition gets a new `lastProbeTime`;
/// - every container's `ready` flips with them;
/// - every `managedFields` entry's `time` moves on;
/// - even revisions set the `bench-revision` label, odd ones the `bench.kinformer.dev/heartbeat`
///   annotation.
///
/// Arrays are replaced whole by a merge patch, so the patch holds the whole changed arrays.
pub fn update_patch(pod: &Value, revision: u64) -> Value {
    let now = rfc3339(EPOCH + 86_400 * 40 + revision);
    let ready = revision.is_multiple_of(2);
    let flag = if ready { "True" } else { "False" };
    let conditions: Vec<Value> = pod["status"]["conditions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let mut c = c.clone();
            c["lastProbeTime"] = json!(now);
            if matches!(c["type"].as_str(), Some("Ready" | "ContainersReady")) {
                c["status"] = json!(flag);
                c["lastTransitionTime"] = json!(now);
            }
            c
        })
        .collect();
    let statuses: Vec<Value> = pod["status"]["containerStatuses"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s["ready"] = json!(ready);
            s
        })
        .collect();
    let managed: Vec<Value> = pod["metadata"]["managedFields"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|m| {
            let mut m = m.clone();
            m["time"] = json!(now);
            m
        })
        .collect();
    let mut metadata = json!({"managedFields": managed});
    if revision.is_multiple_of(2) {
        metadata["labels"] = json!({"bench-revision": revision.to_string()});
    } else {
        metadata["annotations"] = json!({"bench.kinformer.dev/heartbeat": now});
    }
    json!({
        "metadata": metadata,
        "status": {
            "phase": PHASES[(revision % 4) as usize],
            "conditions": conditions,
            "containerStatuses": statuses,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn len(v: &Value) -> usize {
        serde_json::to_vec(v).unwrap().len()
    }

    #[test]
    fn dense_pods_are_dense_deterministic_and_distinct() {
        let sizes: Vec<usize> = (0..200).map(|i| len(&dense_pod(i, 1))).collect();
        let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
        assert!(*min >= 10_000 && *max <= 15_000, "{min}-{max}");
        assert_eq!(dense_pod(5, 1), dense_pod(5, 1));
        assert_ne!(dense_pod(5, 1), dense_pod(5, 2));
        let names: std::collections::BTreeSet<String> = (0..200)
            .map(|i| {
                dense_pod(i, 1)["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(names.len(), 200);
        // The typed client decodes it.
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(dense_pod(3, 1)).unwrap();
        assert_eq!(pod.spec.unwrap().containers.len(), 3);
    }

    #[test]
    fn an_update_changes_status_times_and_a_label_or_an_annotation() {
        for size in [PodSize::Realistic, PodSize::Dense] {
            let before = pod(size, 4, 1);
            for revision in [1, 2] {
                let patch = update_patch(&before, revision);
                let mut after = before.clone();
                json_merge(&mut after, &patch);
                assert_ne!(
                    after["status"]["conditions"],
                    before["status"]["conditions"]
                );
                // The containers' readiness follows the Ready condition.
                let ready = after["status"]["conditions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|c| c["type"] == "Ready")
                    .map(|c| c["status"] == "True")
                    .unwrap();
                for s in after["status"]["containerStatuses"].as_array().unwrap() {
                    assert_eq!(s["ready"], ready, "{revision}");
                }
                assert_ne!(
                    after["metadata"]["managedFields"],
                    before["metadata"]["managedFields"]
                );
                let tagged = if revision % 2 == 0 {
                    &after["metadata"]["labels"]["bench-revision"]
                } else {
                    &after["metadata"]["annotations"]["bench.kinformer.dev/heartbeat"]
                };
                assert!(tagged.is_string(), "{revision}: {after}");
                // Still a pod the typed client decodes, with as many conditions as before.
                let typed: k8s_openapi::api::core::v1::Pod = serde_json::from_value(after).unwrap();
                assert_eq!(
                    typed.status.unwrap().conditions.unwrap().len(),
                    before["status"]["conditions"].as_array().unwrap().len()
                );
            }
            // Two updates in a row differ.
            assert_ne!(update_patch(&before, 5), update_patch(&before, 6));
        }
    }

    /// RFC 7386, as the simulated server applies it.
    fn json_merge(target: &mut Value, patch: &Value) {
        match (target, patch) {
            (Value::Object(t), Value::Object(p)) => {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        json_merge(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
            (t, p) => *t = p.clone(),
        }
    }

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(EPOCH + 3_723), "2026-01-01T01:02:03Z");
    }
}
