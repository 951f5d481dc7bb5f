//! How the model's view becomes API objects: the resources it writes, the JSON of pods (spec as
//! their controller, the admission plugins and the scheduler leave it, and the status of each
//! phase, with the `managedFields` of those writes), pod templates, deployment specs, owner
//! references and conditions, and reading back the uid the store gave a created object.

use kinformer_core::{ApiResource, Scope};
use serde_json::{Value, json};

use super::catalogue::system_spec;
use super::model::{Cluster, Container, Key, Owner, Phase, PodM};
use super::names::{fnv32, hex64};
use crate::fields::{CONTROLLER, History, KUBELET, KUBELET_STATUS, SCHEDULER_STATUS, object};
use crate::store::merge_patch;

/// Where the ServiceAccount admission plugin mounts a pod's token.
pub(super) const TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

pub(super) fn resource(plural: &str) -> ApiResource {
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
        "endpointslices" => ApiResource::new(
            "discovery.k8s.io",
            "v1",
            "EndpointSlice",
            "endpointslices",
            Scope::Namespaced,
        ),
        _ => ApiResource::new("apps", "v1", "DaemonSet", "daemonsets", Scope::Namespaced),
    }
}

pub(super) fn condition(kind: &str, ok: bool, at: &str) -> Value {
    json!({"type": kind, "status": if ok { "True" } else { "False" }, "lastProbeTime": null, "lastTransitionTime": at})
}

pub(super) fn condition_why(kind: &str, ok: bool, at: &str, reason: &str, message: &str) -> Value {
    let mut c = condition(kind, ok, at);
    c["reason"] = json!(reason);
    c["message"] = json!(message);
    c
}

/// The `apiVersion` of a resource the model writes.
pub(super) fn api_version(plural: &str) -> &'static str {
    match plural {
        "deployments" | "replicasets" | "daemonsets" => "apps/v1",
        "endpointslices" => "discovery.k8s.io/v1",
        _ => "v1",
    }
}

impl Owner {
    pub(super) fn json(&self) -> Value {
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

impl Container {
    /// The container as its manifest has it, with the API's defaults. A system pod's container
    /// (`kube-proxy`, `coredns`, the control plane's) has what its manifest adds; `node` and
    /// `ip` are the node of a static pod, which its command names.
    pub(super) fn json_on(&self, node: &str, ip: &str) -> Value {
        let mut c = json!({
            "name": self.name,
            "image": self.image,
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
        });
        if self.port != 0 {
            c["ports"] = json!([{"name": "http", "containerPort": self.port, "protocol": "TCP"}]);
        }
        c["resources"] = if self.cpu == "0" {
            json!({})
        } else if self.memory.is_empty() {
            json!({"requests": {"cpu": self.cpu}})
        } else {
            json!({"requests": {"cpu": self.cpu, "memory": self.memory}, "limits": {"memory": self.memory}})
        };
        if let Some((extra, _)) = system_spec(&self.name, node, ip) {
            merge_patch(&mut c, &extra);
        }
        c
    }

    pub(super) fn json(&self) -> Value {
        self.json_on("", "")
    }

    /// The pod's QoS class: requests without matching limits make it Burstable.
    fn qos(&self) -> &'static str {
        if self.cpu == "0" {
            "BestEffort"
        } else {
            "Burstable"
        }
    }

    /// Who the container's process runs as (`status.containerStatuses[].user`): its image's
    /// user.
    fn user(&self) -> Value {
        let id = match self.name.as_str() {
            "coredns" => 65532,
            "prometheus" | "kube-state-metrics" => 65534,
            "grafana" => 472,
            _ if self.image.starts_with("registry.example.com/") => 10001,
            _ => 0,
        };
        json!({"linux": {"uid": id, "gid": id, "supplementalGroups": [id]}})
    }
}

pub(super) fn node_conditions(created: &str, heartbeat: &str) -> Value {
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

/// A pod template's spec as the API server stores it: the manifest's (with a system pod's
/// service account, volumes, tolerations and priority class) and the API's defaults. What the
/// admission plugins add to a pod (service account, token volume, default tolerations,
/// priority) is not in a template.
pub(super) fn pod_template_spec(container: &Container) -> Value {
    template_spec_on(container, "", "")
}

fn template_spec_on(container: &Container, node: &str, ip: &str) -> Value {
    let mut spec = json!({
        "containers": [container.json_on(node, ip)],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler",
        "securityContext": {},
    });
    if let Some((_, pod)) = system_spec(&container.name, node, ip) {
        merge_patch(&mut spec, &pod);
    }
    spec
}

pub(super) fn deployment_spec(selector: &Value, replicas: u32, container: &Container) -> Value {
    json!({
        "replicas": replicas,
        "selector": {"matchLabels": selector},
        "template": {"metadata": {"labels": selector}, "spec": pod_template_spec(container)},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
        "revisionHistoryLimit": 2,
        "progressDeadlineSeconds": 600,
    })
}

pub(super) fn created_uid(created: Result<Value, kinformer_core::Status>) -> String {
    match created {
        Ok(v) => v["metadata"]["uid"].as_str().unwrap_or_default().to_owned(),
        Err(e) => {
            tracing::debug!(error = %e.message, "seed object not created");
            String::new()
        }
    }
}

/// The projected volume the ServiceAccount admission plugin adds for the token.
fn token_volume(name: &str) -> Value {
    json!({"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}})
}

/// What the admission plugins add to a pod's spec (as a merge patch of the lists they touch):
/// ServiceAccount the service account, its twin `serviceAccount` and the token volume mounted in
/// every container (not for a static pod's mirror), DefaultTolerationSeconds the not-ready and
/// unreachable tolerations, Priority the priority of the class.
fn admitted(spec: &Value, token: &str) -> Value {
    let mut patch = json!({});
    if !token.is_empty() {
        let account = spec["serviceAccountName"]
            .as_str()
            .unwrap_or("default")
            .to_owned();
        let volume = format!("kube-api-access-{token}");
        let mut volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
        volumes.push(token_volume(&volume));
        let containers: Vec<Value> = spec["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let mut c = c.clone();
                let mut mounts = c["volumeMounts"].as_array().cloned().unwrap_or_default();
                mounts.push(json!({"name": volume, "mountPath": TOKEN_PATH, "readOnly": true}));
                c["volumeMounts"] = json!(mounts);
                c
            })
            .collect();
        patch = json!({
            "serviceAccountName": account,
            "serviceAccount": account,
            "volumes": volumes,
            "containers": containers,
        });
    }
    let mut tolerations = spec["tolerations"].as_array().cloned().unwrap_or_default();
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = tolerations.iter().any(|t| {
            (t["key"] == key || t.get("key").is_none() && t["operator"] == "Exists")
                && (t["effect"] == "NoExecute" || t.get("effect").is_none())
        });
        if !tolerated {
            tolerations.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
    patch["tolerations"] = json!(tolerations);
    patch["priority"] = json!(match spec["priorityClassName"].as_str() {
        Some("system-node-critical") => 2_000_001_000,
        Some("system-cluster-critical") => 2_000_000_000,
        _ => 0,
    });
    patch["preemptionPolicy"] = json!("PreemptLowerPriority");
    patch
}

/// What the daemon set controller adds to the pods it makes: affinity to their node, and the
/// tolerations of node conditions (`AddOrUpdateDaemonPodTolerations`).
fn daemon_pod(spec: &mut Value, node: &str) {
    spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}});
    let mut tolerations = spec["tolerations"].as_array().cloned().unwrap_or_default();
    for (key, effect) in [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
        ("node.kubernetes.io/network-unavailable", "NoSchedule"),
    ] {
        tolerations.push(json!({"key": key, "operator": "Exists", "effect": effect}));
    }
    spec["tolerations"] = json!(tolerations);
}

impl Cluster {
    /// The node a pod is bound to, by name and IP (empty when it is not bound).
    fn node_of(&self, pod: &PodM) -> (&str, &str) {
        pod.node.map_or(("", ""), |n| {
            (self.nodes[n].name.as_str(), self.nodes[n].ip.as_str())
        })
    }

    /// A pod as it was written, write by write: created by its controller (a static pod's
    /// mirror by its kubelet) at `created`, admitted, bound, and given its status by the
    /// scheduler or the kubelet; with the `managedFields` those writes leave.
    pub(super) fn pod_object(&self, key: &Key, pod: &PodM, created: &str) -> Value {
        let (ns, name) = key;
        let (node, ip) = self.node_of(pod);
        let mirror = pod.owner.kind == "Node";
        let mut metadata = json!({"labels": pod.labels, "ownerReferences": pod.owner.json()});
        let mut spec = template_spec_on(&pod.container, node, ip);
        // Defaulted when the pod is decoded.
        spec["enableServiceLinks"] = json!(true);
        let creator = if mirror {
            let hash = &hex64(u64::from(fnv32(&pod.container.name)))[..32];
            let seen = format!(
                "{}.{:09}Z",
                created.trim_end_matches('Z'),
                fnv32(name) % 1_000_000_000
            );
            metadata["annotations"] = json!({
                "kubernetes.io/config.hash": hash,
                "kubernetes.io/config.mirror": hash,
                "kubernetes.io/config.seen": seen,
                "kubernetes.io/config.source": "file",
            });
            match pod.container.name.as_str() {
                "kube-apiserver" => {
                    metadata["annotations"]["kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"] =
                        json!(format!("{ip}:6443"));
                }
                "etcd" => {
                    metadata["annotations"]["kubeadm.kubernetes.io/etcd.advertise-client-urls"] =
                        json!(format!("https://{ip}:2379"));
                }
                _ => {}
            }
            spec["nodeName"] = json!(node);
            KUBELET
        } else {
            metadata["generateName"] = json!(format!("{}-", pod.owner.name));
            if pod.owner.kind == "DaemonSet" {
                daemon_pod(&mut spec, node);
            }
            CONTROLLER
        };
        let mut h = History::new("v1");
        h.write(
            creator,
            created,
            object([("metadata", metadata), ("spec", spec)]),
        );
        let admitted = admitted(&h.object()["spec"], &pod.token);
        h.untracked(object([
            (
                "metadata",
                json!({"name": name, "namespace": ns, "creationTimestamp": created}),
            ),
            ("spec", admitted),
            (
                "status",
                json!({"phase": "Pending", "qosClass": pod.container.qos()}),
            ),
        ]));
        let status = self.pod_status(key, pod);
        if !mirror && pod.phase >= Phase::Scheduled && pod.phase != Phase::Unschedulable {
            // The binding: no manager is recorded for it.
            h.untracked(json!({
                "spec": {"nodeName": node},
                "status": {"conditions": [condition("PodScheduled", true, &pod.scheduled_at)]},
            }));
        }
        match pod.phase {
            Phase::Unscheduled | Phase::Scheduled => {}
            Phase::Unschedulable => {
                h.write(SCHEDULER_STATUS, &pod.since, object([("status", status)]));
            }
            _ => {
                h.write(
                    KUBELET_STATUS,
                    &pod.started_at,
                    object([("status", status)]),
                );
            }
        }
        h.finish()
    }

    /// The mounts of a pod's container (`container`, its spec as in the template) as the
    /// kubelet reports them.
    fn mount_statuses(pod: &PodM, container: &Value) -> Value {
        let mut mounts = container["volumeMounts"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if !pod.token.is_empty() {
            mounts.push(json!({"name": format!("kube-api-access-{}", pod.token), "mountPath": TOKEN_PATH, "readOnly": true}));
        }
        let mounts: Vec<Value> = mounts
            .into_iter()
            .map(|mut m| {
                if m["readOnly"] == true {
                    m["recursiveReadOnly"] = json!("Disabled");
                }
                m
            })
            .collect();
        json!(mounts)
    }

    /// The status the kubelet (or the scheduler) writes for a pod in its phase.
    pub(super) fn pod_status(&self, key: &Key, pod: &PodM) -> Value {
        let qos = pod.container.qos();
        let scheduled = condition("PodScheduled", true, &pod.scheduled_at);
        // The kubelet's conditions name the generation they saw (pods are never changed here).
        let kubelet = |c: Value| {
            let mut c = c;
            c["observedGeneration"] = json!(1);
            c
        };
        let host = pod.node.map(|n| self.nodes[n].ip.clone());
        let c = &pod.container;
        // From the pod's key: its uid is not known before its first write.
        let container_id = |restarts: u32| {
            let id = fnv32(&format!("{}/{}", key.0, key.1));
            format!(
                "containerd://{}",
                hex64(u64::from(id) << 8 | u64::from(restarts))
            )
        };
        let image_id = format!(
            "{}@sha256:{}",
            c.image.split(':').next().unwrap_or(""),
            hex64(u64::from(fnv32(&c.image)))
        );
        let last_state = match &pod.last_exit {
            Some(at) => {
                json!({"terminated": {"exitCode": 1, "reason": "Error", "startedAt": pod.scheduled_at, "finishedAt": at, "containerID": container_id(pod.restarts.saturating_sub(1))}})
            }
            None => json!({}),
        };
        let (node, ip) = self.node_of(pod);
        let spec = c.json_on(node, ip);
        let mounts = Self::mount_statuses(pod, &spec);
        let resources = &spec["resources"];
        let status_of = |ready: bool, started: bool, state: Value| {
            let mut s = json!({"name": c.name, "image": c.image, "imageID": image_id, "containerID": container_id(pod.restarts), "ready": ready, "restartCount": pod.restarts, "started": started});
            s["state"] = state;
            s["lastState"] = last_state.clone();
            s["volumeMounts"] = mounts.clone();
            s["user"] = c.user();
            if resources.as_object().is_some_and(|r| !r.is_empty()) {
                s["resources"] = resources.clone();
            }
            s
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
                "observedGeneration": 1,
                "hostIP": host, "hostIPs": [{"ip": host}],
                "startTime": pod.since,
                "conditions": [
                    kubelet(condition("PodReadyToStartContainers", false, &pod.since)),
                    kubelet(condition("Initialized", true, &pod.since)),
                    kubelet(condition_why("Ready", false, &pod.since, "ContainersNotReady", &not_ready)),
                    kubelet(condition_why("ContainersReady", false, &pod.since, "ContainersNotReady", &not_ready)),
                    scheduled,
                ],
                "containerStatuses": [{"name": c.name, "image": c.image, "imageID": "", "ready": false, "restartCount": 0, "started": false, "state": {"waiting": {"reason": "ContainerCreating"}}, "lastState": {}, "volumeMounts": mounts}],
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
                    kubelet(if running {
                        condition(kind, true, &pod.since)
                    } else {
                        condition_why(kind, false, &pod.since, "ContainersNotReady", &not_ready)
                    })
                };
                json!({
                    "phase": "Running",
                    "observedGeneration": 1,
                    "hostIP": host, "hostIPs": [{"ip": host}],
                    "podIP": pod.ip, "podIPs": [{"ip": pod.ip}],
                    "startTime": pod.scheduled_at,
                    "conditions": [
                        kubelet(condition("PodReadyToStartContainers", true, &pod.scheduled_at)),
                        kubelet(condition("Initialized", true, &pod.scheduled_at)),
                        ready_reason("Ready"),
                        ready_reason("ContainersReady"),
                        scheduled,
                    ],
                    "containerStatuses": [status_of(running, running, state)],
                    "qosClass": qos,
                })
            }
            Phase::Failed => json!({
                "phase": "Failed",
                "observedGeneration": 1,
                "reason": "Evicted",
                "message": format!("The node was low on resource: memory. Threshold quantity: 100Mi, available: 91328Ki. Container {} was using 1402312Ki, request is {}, has larger consumption of memory. ", c.name, c.memory),
                "hostIP": host, "hostIPs": [{"ip": host}],
                "podIP": pod.ip, "podIPs": [{"ip": pod.ip}],
                "startTime": pod.scheduled_at,
                "conditions": [
                    kubelet(condition_why("DisruptionTarget", true, &pod.since, "TerminationByKubelet", "The node was low on resource: memory.")),
                    kubelet(condition("PodReadyToStartContainers", false, &pod.since)),
                    kubelet(condition("Initialized", true, &pod.scheduled_at)),
                    kubelet(condition_why("Ready", false, &pod.since, "PodFailed", "")),
                    kubelet(condition_why("ContainersReady", false, &pod.since, "PodFailed", "")),
                    scheduled,
                ],
                "containerStatuses": [status_of(false, false, json!({"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown", "message": "The container could not be located when the pod was terminated", "startedAt": pod.started_at, "finishedAt": pod.since}}))],
                "qosClass": qos,
            }),
        }
    }
}
