//! How the model's view becomes API objects: the resources it writes, the JSON of pods (spec
//! and the status of each phase), pod templates, deployment specs, owner references and
//! conditions, and reading back the uid the store gave a created object.

use kinformer_core::{ApiResource, Scope};
use serde_json::{Value, json};

use super::model::{Cluster, Container, Key, Owner, Phase, PodM};
use super::names::{fnv32, hex64};

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
    pub(super) fn json(&self) -> Value {
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

pub(super) fn pod_template_spec(container: &Container) -> Value {
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

impl Cluster {
    /// A pod as the model writes it: metadata, spec and the status of its phase.
    pub(super) fn pod_object(&self, key: &Key, pod: &PodM, created: Option<&str>) -> Value {
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
    pub(super) fn pod_status(&self, key: &Key, pod: &PodM) -> Value {
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
}
