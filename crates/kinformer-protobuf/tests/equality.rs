//! JSON -> k8s-openapi -> protobuf -> k8s-openapi gives back what JSON alone gives, for every
//! kind with a protobuf encoding: realistic objects as an API server sends them, mutated by
//! proptest (labels, annotations, names, integers, timestamps, quantities, optional fields).

use std::collections::BTreeMap;
use std::fmt::Debug;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Endpoints, Event, Namespace, Node, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::serde::Serialize;
use k8s_openapi::serde::de::DeserializeOwned;
use kinformer_core::{ManagedFields, Object};
use kinformer_protobuf::convert::{Protobuf, codec, codec_for};
use kinformer_protobuf::trim::without_managed_fields;
use kinformer_protobuf::{CompactMessage, Error};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use prost::Message as _;
use serde_json::{Value, json};

/// The managed fields of a Pod as the API server records them.
fn managed_fields() -> Value {
    json!([
        {
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2024-05-01T10:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": { "f:labels": { ".": {}, "f:app": {} } },
                "f:spec": { "f:containers": { "k:{\"name\":\"web\"}": { ".": {}, "f:image": {} } } }
            }
        },
        {
            "manager": "kubelet",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2024-05-01T10:00:07Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": { "f:status": { "f:conditions": {}, "f:podIP": {} } },
            "subresource": "status"
        }
    ])
}

/// A pod template's spec: containers with resources, ports, probes, env, volumes.
fn pod_spec() -> Value {
    json!({
        "containers": [{
            "name": "web",
            "image": "nginx:1.27",
            "imagePullPolicy": "IfNotPresent",
            "args": ["--port", "8080"],
            "ports": [
                { "name": "http", "containerPort": 8080, "protocol": "TCP" },
                { "name": "metrics", "containerPort": 9090, "hostPort": 19090, "protocol": "TCP" }
            ],
            "env": [
                { "name": "MODE", "value": "production" },
                { "name": "NODE", "valueFrom": { "fieldRef": { "apiVersion": "v1", "fieldPath": "spec.nodeName" } } },
                { "name": "TOKEN", "valueFrom": { "secretKeyRef": { "name": "web-token", "key": "token", "optional": false } } },
                { "name": "LEVEL", "valueFrom": { "configMapKeyRef": { "name": "web-config", "key": "level" } } },
                { "name": "MEM", "valueFrom": { "resourceFieldRef": { "resource": "limits.memory", "divisor": "1Mi" } } }
            ],
            "envFrom": [{ "configMapRef": { "name": "web-env" }, "prefix": "APP_" }, { "secretRef": { "name": "web-secret-env" } }],
            "resources": {
                "requests": { "cpu": "250m", "memory": "64Mi" },
                "limits": { "cpu": "1", "memory": "128Mi", "ephemeral-storage": "1Gi" }
            },
            "livenessProbe": {
                "httpGet": { "path": "/healthz", "port": "http", "scheme": "HTTP" },
                "initialDelaySeconds": 3, "periodSeconds": 10, "failureThreshold": 3
            },
            "readinessProbe": { "tcpSocket": { "port": 8080 }, "timeoutSeconds": 1 },
            "startupProbe": { "exec": { "command": ["cat", "/tmp/ready"] } },
            "lifecycle": { "preStop": { "exec": { "command": ["sleep", "5"] } } },
            "volumeMounts": [
                { "name": "config", "mountPath": "/etc/web", "readOnly": true },
                { "name": "token", "mountPath": "/var/run/secrets/tokens" }
            ],
            "securityContext": {
                "runAsNonRoot": true, "runAsUser": 1000, "allowPrivilegeEscalation": false,
                "capabilities": { "drop": ["ALL"] },
                "seccompProfile": { "type": "RuntimeDefault" }
            },
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File"
        }],
        "initContainers": [{ "name": "init", "image": "busybox:1.36", "command": ["sh", "-c", "true"] }],
        "volumes": [
            { "name": "config", "configMap": { "name": "web-config", "defaultMode": 420, "items": [{ "key": "level", "path": "level.txt" }] } },
            { "name": "data", "emptyDir": { "sizeLimit": "500Mi" } },
            { "name": "secret", "secret": { "secretName": "web-secret", "optional": true } },
            { "name": "token", "projected": { "sources": [
                { "serviceAccountToken": { "audience": "vault", "expirationSeconds": 3600, "path": "token" } },
                { "configMap": { "name": "kube-root-ca.crt", "items": [{ "key": "ca.crt", "path": "ca.crt" }] } },
                { "downwardAPI": { "items": [{ "path": "namespace", "fieldRef": { "apiVersion": "v1", "fieldPath": "metadata.namespace" } }] } }
            ], "defaultMode": 420 } },
            { "name": "claim", "persistentVolumeClaim": { "claimName": "web-data" } }
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "web",
        "nodeName": "node-1",
        "priority": 0,
        "schedulerName": "default-scheduler",
        "nodeSelector": { "kubernetes.io/os": "linux" },
        "tolerations": [
            { "key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300 }
        ],
        "affinity": { "podAntiAffinity": { "preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100,
            "podAffinityTerm": {
                "labelSelector": { "matchExpressions": [{ "key": "app", "operator": "In", "values": ["web"] }] },
                "topologyKey": "kubernetes.io/hostname"
            }
        }] } },
        "securityContext": { "fsGroup": 2000 },
        "enableServiceLinks": true,
        "preemptionPolicy": "PreemptLowerPriority"
    })
}

/// Metadata as a server writes it.
fn metadata(name: &str, namespace: Option<&str>) -> Value {
    let mut m = json!({
        "name": name,
        "uid": "3b6f5d1e-8c1a-4b7e-9a55-0f3c2d1e4a5b",
        "resourceVersion": "123456",
        "generation": 3,
        "creationTimestamp": "2024-05-01T10:00:00Z",
        "labels": { "app": "web", "tier": "frontend" },
        "annotations": { "kubernetes.io/description": "the web tier" }
    });
    if let Some(ns) = namespace {
        m["namespace"] = json!(ns);
    }
    m
}

fn pod() -> Value {
    let mut meta = metadata("web-7d4b9c-x2k8q", Some("default"));
    meta["managedFields"] = managed_fields();
    meta["ownerReferences"] = json!([{
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c",
        "uid": "a1b2c3d4-0000-4000-8000-000000000001", "controller": true, "blockOwnerDeletion": true
    }]);
    meta["generateName"] = json!("web-7d4b9c-");
    let mut spec = pod_spec();
    spec["ephemeralContainers"] = json!([{
        "name": "debugger", "image": "busybox:1.36", "stdin": true, "tty": true, "targetContainerName": "web"
    }]);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {
            "phase": "Running",
            "conditions": [
                { "type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2024-05-01T10:00:07Z" },
                { "type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-05-01T10:00:00Z" }
            ],
            "hostIP": "10.0.0.11",
            "hostIPs": [{ "ip": "10.0.0.11" }],
            "podIP": "10.244.1.17",
            "podIPs": [{ "ip": "10.244.1.17" }, { "ip": "fd00::17" }],
            "startTime": "2024-05-01T10:00:01Z",
            "qosClass": "Burstable",
            "initContainerStatuses": [{
                "name": "init", "ready": true, "restartCount": 0, "image": "busybox:1.36",
                "imageID": "docker.io/library/busybox@sha256:0123", "containerID": "containerd://aa",
                "state": { "terminated": { "exitCode": 0, "reason": "Completed", "startedAt": "2024-05-01T10:00:02Z", "finishedAt": "2024-05-01T10:00:03Z", "containerID": "containerd://aa" } }
            }],
            "containerStatuses": [{
                "name": "web", "ready": true, "started": true, "restartCount": 2, "image": "nginx:1.27",
                "imageID": "docker.io/library/nginx@sha256:4567", "containerID": "containerd://bb",
                "state": { "running": { "startedAt": "2024-05-01T10:00:05Z" } },
                "lastState": { "terminated": { "exitCode": 137, "reason": "OOMKilled", "signal": 9, "startedAt": "2024-05-01T09:59:00Z", "finishedAt": "2024-05-01T10:00:04Z" } },
                "resources": { "requests": { "cpu": "250m", "memory": "64Mi" } }
            }]
        }
    })
}

fn service() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata("web", Some("default")),
        "spec": {
            "type": "LoadBalancer",
            "selector": { "app": "web" },
            "ports": [
                { "name": "http", "protocol": "TCP", "port": 80, "targetPort": "http", "nodePort": 31080 },
                { "name": "metrics", "protocol": "TCP", "port": 9090, "targetPort": 9090, "appProtocol": "http" }
            ],
            "clusterIP": "10.96.12.34",
            "clusterIPs": ["10.96.12.34"],
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": { "clientIP": { "timeoutSeconds": 10800 } },
            "externalTrafficPolicy": "Local",
            "healthCheckNodePort": 32000,
            "internalTrafficPolicy": "Cluster",
            "allocateLoadBalancerNodePorts": true
        },
        "status": { "loadBalancer": { "ingress": [{ "ip": "203.0.113.10", "ipMode": "VIP", "ports": [{ "port": 80, "protocol": "TCP" }] }] } }
    })
}

fn config_map() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata("web-config", Some("default")),
        "data": { "level": "debug", "config.yaml": "listen: :8080\nworkers: 4\n" },
        "binaryData": { "logo.png": "iVBORw0KGgo=" },
        "immutable": false
    })
}

fn secret() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata("web-secret", Some("default")),
        "type": "kubernetes.io/tls",
        "data": { "tls.crt": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t", "tls.key": "AAECAwQFBgcICf8=" }
    })
}

fn service_account() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata("web", Some("default")),
        "secrets": [{ "name": "web-token-abcde", "namespace": "default", "kind": "Secret" }],
        "imagePullSecrets": [{ "name": "registry" }],
        "automountServiceAccountToken": false
    })
}

fn endpoints() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": metadata("web", Some("default")),
        "subsets": [{
            "addresses": [{
                "ip": "10.244.1.17", "nodeName": "node-1", "hostname": "web-0",
                "targetRef": { "kind": "Pod", "namespace": "default", "name": "web-0", "uid": "3b6f5d1e-8c1a-4b7e-9a55-0f3c2d1e4a5b" }
            }],
            "notReadyAddresses": [{ "ip": "10.244.2.3" }],
            "ports": [{ "name": "http", "port": 8080, "protocol": "TCP" }]
        }]
    })
}

fn event() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": metadata("web-0.17c2a3b4d5e6f789", Some("default")),
        "involvedObject": { "kind": "Pod", "namespace": "default", "name": "web-0", "uid": "3b6f5d1e-8c1a-4b7e-9a55-0f3c2d1e4a5b", "apiVersion": "v1", "resourceVersion": "123400", "fieldPath": "spec.containers{web}" },
        "reason": "BackOff",
        "message": "Back-off restarting failed container web in pod web-0_default",
        "source": { "component": "kubelet", "host": "node-1" },
        "firstTimestamp": "2024-05-01T10:00:04Z",
        "lastTimestamp": "2024-05-01T10:05:04Z",
        "count": 7,
        "type": "Warning",
        "eventTime": "2024-05-01T10:00:04.123456Z",
        "series": { "count": 7, "lastObservedTime": "2024-05-01T10:05:04.654321Z" },
        "action": "Restarting",
        "related": { "kind": "Node", "name": "node-1" },
        "reportingComponent": "kubelet",
        "reportingInstance": "node-1"
    })
}

fn namespace() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": metadata("team-a", None),
        "spec": { "finalizers": ["kubernetes"] },
        "status": {
            "phase": "Terminating",
            "conditions": [{ "type": "NamespaceDeletionContentFailure", "status": "False", "lastTransitionTime": "2024-05-01T10:00:00Z", "reason": "ContentDeleted", "message": "All content successfully deleted" }]
        }
    })
}

fn node() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata("node-1", None),
        "spec": {
            "podCIDR": "10.244.1.0/24",
            "podCIDRs": ["10.244.1.0/24", "fd00:1::/64"],
            "providerID": "kind://docker/kind/node-1",
            "taints": [{ "key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule" }, { "key": "maintenance", "value": "true", "effect": "NoExecute", "timeAdded": "2024-05-01T09:00:00Z" }],
            "unschedulable": true
        },
        "status": {
            "capacity": { "cpu": "8", "memory": "32781612Ki", "pods": "110", "ephemeral-storage": "102626232Ki" },
            "allocatable": { "cpu": "7800m", "memory": "32167212Ki", "pods": "110", "hugepages-2Mi": "0" },
            "conditions": [{ "type": "Ready", "status": "True", "lastHeartbeatTime": "2024-05-01T10:00:00Z", "lastTransitionTime": "2024-04-30T08:00:00Z", "reason": "KubeletReady", "message": "kubelet is posting ready status" }],
            "addresses": [{ "type": "InternalIP", "address": "10.0.0.11" }, { "type": "Hostname", "address": "node-1" }],
            "daemonEndpoints": { "kubeletEndpoint": { "Port": 10250 } },
            "nodeInfo": {
                "machineID": "m1", "systemUUID": "s1", "bootID": "b1", "kernelVersion": "6.8.0",
                "osImage": "Debian GNU/Linux 12", "containerRuntimeVersion": "containerd://1.7.15",
                "kubeletVersion": "v1.35.0", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"
            },
            "images": [{ "names": ["docker.io/library/nginx@sha256:4567", "docker.io/library/nginx:1.27"], "sizeBytes": 71000000 }],
            "volumesInUse": ["kubernetes.io/csi/ebs^vol-1"],
            "volumesAttached": [{ "name": "kubernetes.io/csi/ebs^vol-1", "devicePath": "/dev/xvdba" }]
        }
    })
}

/// A pod template as workloads carry it.
fn template() -> Value {
    json!({ "metadata": { "labels": { "app": "web" }, "annotations": { "kubectl.kubernetes.io/restartedAt": "2024-05-01T09:00:00Z" } }, "spec": pod_spec() })
}

fn selector() -> Value {
    json!({ "matchLabels": { "app": "web" }, "matchExpressions": [{ "key": "tier", "operator": "In", "values": ["frontend", "edge"] }] })
}

fn workload_conditions() -> Value {
    json!([{ "type": "Available", "status": "True", "lastUpdateTime": "2024-05-01T10:00:10Z", "lastTransitionTime": "2024-05-01T10:00:10Z", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability." }])
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata("web", Some("default")),
        "spec": {
            "replicas": 3,
            "selector": selector(),
            "template": template(),
            "strategy": { "type": "RollingUpdate", "rollingUpdate": { "maxSurge": "25%", "maxUnavailable": 0 } },
            "minReadySeconds": 5,
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600
        },
        "status": { "observedGeneration": 3, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3, "conditions": workload_conditions() }
    })
}

fn replica_set() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": metadata("web-7d4b9c", Some("default")),
        "spec": { "replicas": 3, "minReadySeconds": 5, "selector": selector(), "template": template() },
        "status": { "replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 2, "availableReplicas": 2, "observedGeneration": 3 }
    })
}

fn stateful_set() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata("db", Some("default")),
        "spec": {
            "replicas": 3,
            "serviceName": "db",
            "selector": selector(),
            "template": template(),
            "podManagementPolicy": "Parallel",
            "updateStrategy": { "type": "RollingUpdate", "rollingUpdate": { "partition": 1, "maxUnavailable": "50%" } },
            "volumeClaimTemplates": [{
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": { "name": "data" },
                "spec": { "accessModes": ["ReadWriteOnce"], "storageClassName": "standard", "resources": { "requests": { "storage": "10Gi" } }, "volumeMode": "Filesystem" }
            }],
            "persistentVolumeClaimRetentionPolicy": { "whenDeleted": "Retain", "whenScaled": "Delete" },
            "ordinals": { "start": 0 }
        },
        "status": { "observedGeneration": 3, "replicas": 3, "readyReplicas": 3, "currentReplicas": 3, "updatedReplicas": 3, "currentRevision": "db-5f9c", "updateRevision": "db-5f9c", "collisionCount": 0, "availableReplicas": 3 }
    })
}

fn daemon_set() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": metadata("agent", Some("kube-system")),
        "spec": {
            "selector": selector(),
            "template": template(),
            "updateStrategy": { "type": "RollingUpdate", "rollingUpdate": { "maxUnavailable": 1, "maxSurge": 0 } },
            "revisionHistoryLimit": 10
        },
        "status": { "currentNumberScheduled": 3, "numberMisscheduled": 0, "desiredNumberScheduled": 3, "numberReady": 3, "observedGeneration": 3, "updatedNumberScheduled": 3, "numberAvailable": 3 }
    })
}

fn endpoint_slice() -> Value {
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": metadata("web-abc12", Some("default")),
        "addressType": "IPv4",
        "endpoints": [{
            "addresses": ["10.244.1.17"],
            "conditions": { "ready": true, "serving": true, "terminating": false },
            "hostname": "web-0",
            "nodeName": "node-1",
            "zone": "eu-west-1a",
            "targetRef": { "kind": "Pod", "namespace": "default", "name": "web-0", "uid": "3b6f5d1e-8c1a-4b7e-9a55-0f3c2d1e4a5b" },
            "hints": { "forZones": [{ "name": "eu-west-1a" }] }
        }],
        "ports": [{ "name": "http", "protocol": "TCP", "port": 8080, "appProtocol": "http" }]
    })
}

fn lease() -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata("kube-controller-manager", Some("kube-system")),
        "spec": {
            "holderIdentity": "cp-1_5b1c2d3e-aaaa-bbbb-cccc-0123456789ab",
            "leaseDurationSeconds": 15,
            "acquireTime": "2024-05-01T10:00:00.000001Z",
            "renewTime": "2024-05-01T10:05:02.123456Z",
            "leaseTransitions": 4
        }
    })
}

/// Every kind's realistic object.
fn fixtures() -> Vec<Value> {
    vec![
        pod(),
        service(),
        config_map(),
        secret(),
        service_account(),
        endpoints(),
        event(),
        namespace(),
        node(),
        deployment(),
        replica_set(),
        stateful_set(),
        daemon_set(),
        endpoint_slice(),
        lease(),
    ]
}

/// What proptest varies in an object.
#[derive(Debug, Clone)]
struct Mutation {
    name: String,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    generation: Option<i64>,
    /// Seconds since the epoch for `Time` fields.
    seconds: i64,
    /// Microseconds for `MicroTime` fields.
    micros: i32,
    quantity: String,
    integer: i32,
    /// Which optional fields to drop: bit `i` for the `i`-th optional field met.
    drop: u64,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let key = "([a-z0-9.-]{1,12}/)?[a-z][a-z0-9_.-]{0,15}";
    let map = proptest::option::of(proptest::collection::btree_map(key, "\\PC{0,24}", 1..6));
    (
        "[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?",
        map.clone(),
        map,
        proptest::option::of(1..i64::MAX),
        // 1970 to 2100.
        0..4_102_444_800_i64,
        0..1_000_000_i32,
        prop_oneof![
            Just("0".to_owned()),
            Just("1.5".to_owned()),
            Just("1e3".to_owned()),
            "[1-9][0-9]{0,4}(m|Ki|Mi|Gi|k|M|G)?",
        ],
        0..65_536_i32,
        any::<u64>(),
    )
        .prop_map(
            |(name, labels, annotations, generation, seconds, micros, quantity, integer, drop)| {
                Mutation {
                    name,
                    labels,
                    annotations,
                    generation,
                    seconds,
                    micros,
                    quantity,
                    integer,
                    drop,
                }
            },
        )
}

/// `Time` fields (second precision).
const TIME_KEYS: &[&str] = &[
    "creationTimestamp",
    "lastTransitionTime",
    "lastHeartbeatTime",
    "lastUpdateTime",
    "startTime",
    "startedAt",
    "finishedAt",
    "firstTimestamp",
    "lastTimestamp",
    "timeAdded",
    "time",
];
/// `MicroTime` fields.
const MICRO_TIME_KEYS: &[&str] = &["renewTime", "acquireTime", "eventTime", "lastObservedTime"];
/// Maps of quantities.
const QUANTITY_MAPS: &[&str] = &["requests", "limits", "capacity", "allocatable"];
/// Integer fields that take any non-negative `i32`.
const INT_KEYS: &[&str] = &[
    "replicas",
    "restartCount",
    "count",
    "leaseDurationSeconds",
    "leaseTransitions",
    "readyReplicas",
    "containerPort",
    "exitCode",
];
/// Optional fields proptest may drop.
const OPTIONAL_KEYS: &[&str] = &[
    "annotations",
    "uid",
    "generation",
    "hostIP",
    "nodeName",
    "priority",
    "status",
    "startTime",
    "lastState",
    "readinessProbe",
    "securityContext",
    "targetRef",
    "binaryData",
    "immutable",
    "eventTime",
    "series",
    "holderIdentity",
    "acquireTime",
    "renewTime",
    "taints",
    "strategy",
    "hints",
    "zone",
    "sessionAffinityConfig",
    "volumeClaimTemplates",
    "ephemeralContainers",
    "managedFields",
    "message",
    "reason",
    "tolerationSeconds",
];

/// Applies `m` to every place of `value` it concerns; `dropped` counts optional fields met.
fn mutate(value: &mut Value, m: &Mutation, met: &mut u32) {
    match value {
        Value::Object(object) => {
            let keys: Vec<String> = object.keys().cloned().collect();
            for key in keys {
                if OPTIONAL_KEYS.contains(&key.as_str()) {
                    let bit = *met % 64;
                    *met += 1;
                    if m.drop & (1 << bit) != 0 {
                        object.remove(&key);
                        continue;
                    }
                }
                let field = object.get_mut(&key).expect("a key just listed");
                if field.is_string() && TIME_KEYS.contains(&key.as_str()) {
                    let t = jiff::Timestamp::from_second(m.seconds).unwrap();
                    *field = json!(t.to_string());
                } else if field.is_string() && MICRO_TIME_KEYS.contains(&key.as_str()) {
                    let t = jiff::Timestamp::new(m.seconds, m.micros * 1000).unwrap();
                    *field = json!(t.to_string());
                } else if field.is_number() && INT_KEYS.contains(&key.as_str()) {
                    *field = json!(m.integer);
                } else if QUANTITY_MAPS.contains(&key.as_str())
                    && let Some(map) = field.as_object_mut()
                {
                    if let Some(first) = map.values_mut().next() {
                        *first = json!(m.quantity);
                    }
                } else {
                    mutate(field, m, met);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| mutate(v, m, met)),
        _ => {}
    }
}

/// Applies a mutation to an object: its metadata, then everything else.
fn apply(object: &mut Value, m: &Mutation) {
    let meta = &mut object["metadata"];
    meta["name"] = json!(m.name);
    match &m.labels {
        Some(labels) => meta["labels"] = json!(labels),
        None => {
            meta.as_object_mut().unwrap().remove("labels");
        }
    }
    if let Some(annotations) = &m.annotations {
        meta["annotations"] = json!(annotations);
    }
    if let Some(generation) = m.generation {
        meta["generation"] = json!(generation);
    }
    let mut met = 0;
    mutate(object, m, &mut met);
}

/// JSON -> K -> protobuf -> K equals JSON -> K, typed and as JSON; and the codec found by
/// `apiVersion` and `kind` agrees.
fn round_trip<K>(json: &Value) -> Result<(), TestCaseError>
where
    K: Protobuf + Object + ManagedFields + Clone + Serialize + DeserializeOwned + PartialEq + Debug,
{
    let typed: K = serde_json::from_value(json.clone())
        .map_err(|e| TestCaseError::fail(format!("{} does not deserialize: {e}", K::KIND)))?;
    let mut bytes = Vec::new();
    typed.encode(&mut bytes);
    let back = K::decode(&bytes).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(&back, &typed);
    // The reference path, through k8s-pb's messages, gives the same value.
    let reference = K::decode_message(&bytes).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(&reference, &typed);
    let expected = serde_json::to_value(&typed).unwrap();
    prop_assert_eq!(serde_json::to_value(&back).unwrap(), expected.clone());

    let codec = codec_for(K::API_VERSION, K::KIND).expect("every kind has a codec");
    let mut from_json = Vec::new();
    codec
        .encode_json(json, &mut from_json)
        .map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(&from_json, &bytes);
    prop_assert_eq!(codec.decode_json(&bytes).unwrap(), expected);
    let arc = codec
        .decode::<K>(&bytes)
        .expect("the codec's own type")
        .unwrap();
    prop_assert_eq!(&*arc, &typed);

    // The compact form over protobuf reads the same metadata (field 1 of every kind's message)
    // and gives the same object back; its codec is the kind's.
    let compact = CompactMessage::<K>::from_message(&bytes)
        .map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(compact.key(), typed.key());
    prop_assert_eq!(compact.uid(), typed.uid());
    prop_assert_eq!(compact.resource_version(), typed.resource_version());
    prop_assert_eq!(compact.labels(), typed.labels());
    prop_assert_eq!(compact.owner_references(), typed.owner_references());
    prop_assert_eq!(&compact.typed().unwrap(), &typed);
    let compact_codec = kinformer_protobuf::convert::codec::<CompactMessage<K>>()
        .expect("every kind's compact form");
    prop_assert_eq!(
        (compact_codec.api_version(), compact_codec.kind()),
        (K::API_VERSION, K::KIND)
    );
    let decoded = compact_codec
        .decode::<CompactMessage<K>>(&bytes)
        .expect("the compact codec's own type")
        .unwrap();
    prop_assert_eq!(&*decoded, &compact);

    // Without its managed fields, the message decodes to the object without them, and to
    // nothing else; a message without them is lent as it is.
    let trimmed = without_managed_fields(&bytes);
    let mut stripped = typed.clone();
    stripped.clear_managed_fields();
    let decoded = K::decode(&trimmed).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(&decoded, &stripped);
    prop_assert_eq!(
        matches!(trimmed, std::borrow::Cow::Borrowed(_)),
        !typed.has_managed_fields()
    );
    Ok(())
}

/// The direct decoder and the reference path (k8s-pb's messages, then the conversion) accept
/// and reject the same bytes, and agree on what they accept.
fn agree<K: Protobuf + PartialEq + Debug>(bytes: &[u8]) {
    let direct = K::decode(bytes);
    let reference = K::decode_message(bytes);
    match (&direct, &reference) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "{}: {bytes:?}", K::KIND),
        (Err(_), Err(_)) => {}
        _ => panic!(
            "{}: direct {:?} but reference {:?} for {bytes:?}",
            K::KIND,
            direct.map(drop),
            reference.map(drop)
        ),
    }
}

/// Calls the generic function `f::<K>(args)` for the kind `K` that `json`'s `apiVersion` and
/// `kind` name.
macro_rules! for_kind {
    ($json:expr, $f:ident($($arg:expr),*)) => {
        match ($json["apiVersion"].as_str().unwrap(), $json["kind"].as_str().unwrap()) {
            ("v1", "Pod") => $f::<Pod>($($arg),*),
            ("v1", "Service") => $f::<Service>($($arg),*),
            ("v1", "ConfigMap") => $f::<ConfigMap>($($arg),*),
            ("v1", "Secret") => $f::<Secret>($($arg),*),
            ("v1", "ServiceAccount") => $f::<ServiceAccount>($($arg),*),
            ("v1", "Endpoints") => $f::<Endpoints>($($arg),*),
            ("v1", "Event") => $f::<Event>($($arg),*),
            ("v1", "Namespace") => $f::<Namespace>($($arg),*),
            ("v1", "Node") => $f::<Node>($($arg),*),
            ("apps/v1", "Deployment") => $f::<Deployment>($($arg),*),
            ("apps/v1", "ReplicaSet") => $f::<ReplicaSet>($($arg),*),
            ("apps/v1", "StatefulSet") => $f::<StatefulSet>($($arg),*),
            ("apps/v1", "DaemonSet") => $f::<DaemonSet>($($arg),*),
            ("discovery.k8s.io/v1", "EndpointSlice") => $f::<EndpointSlice>($($arg),*),
            ("coordination.k8s.io/v1", "Lease") => $f::<Lease>($($arg),*),
            other => panic!("no fixture dispatch for {other:?}"),
        }
    };
}

/// [`agree`] for the kind named by `apiVersion` and `kind`.
fn agree_on(json: &Value, bytes: &[u8]) {
    for_kind!(json, agree(bytes))
}

/// Round-trips one object, by its `apiVersion` and `kind`.
fn check(json: &Value) -> Result<(), TestCaseError> {
    for_kind!(json, round_trip(json))
}

#[test]
fn the_fixtures_round_trip_as_they_are() {
    for fixture in fixtures() {
        if let Err(e) = check(&fixture) {
            panic!("{}: {e}", fixture["kind"]);
        }
    }
}

#[test]
fn mutated_objects_round_trip() {
    let config = Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let fixtures = fixtures();
    let strategy = (0..fixtures.len(), mutation());
    runner
        .run(&strategy, |(index, m)| {
            let mut object = fixtures[index].clone();
            apply(&mut object, &m);
            check(&object)
        })
        .unwrap();
}

#[test]
fn the_codec_table_covers_every_kind_both_ways() {
    macro_rules! covered {
        ($($kind:ty),*) => {$(
            let by_type = codec::<$kind>().expect(stringify!($kind));
            let by_name = codec_for(<$kind>::API_VERSION, <$kind>::KIND).expect(stringify!($kind));
            assert!(std::ptr::eq(by_type, by_name), "{}", stringify!($kind));
            assert_eq!(
                (by_type.api_version(), by_type.kind()),
                (<$kind as k8s_openapi::Resource>::API_VERSION, <$kind as k8s_openapi::Resource>::KIND),
            );
        )*};
    }
    covered!(
        Pod,
        Service,
        ConfigMap,
        Secret,
        ServiceAccount,
        Endpoints,
        Event,
        Namespace,
        Node,
        Deployment,
        ReplicaSet,
        StatefulSet,
        DaemonSet,
        EndpointSlice,
        Lease
    );
    assert!(codec::<String>().is_none());
    assert!(codec_for("v1", "PodList").is_none());
    assert!(codec_for("apps/v1", "Pod").is_none());
    // A codec does not decode into another kind.
    let pod = codec::<Pod>().unwrap();
    assert!(pod.decode::<Service>(&[]).is_none());
    // JSON that is not the codec's kind is an error, not a panic.
    let mut out = Vec::new();
    assert!(matches!(
        pod.encode_json(&json!({ "spec": { "containers": 7 } }), &mut out),
        Err(Error::Json { kind: "Pod", .. })
    ));
}

#[test]
fn truncated_and_garbled_messages_are_errors_not_panics() {
    for fixture in fixtures() {
        let codec = codec_for(
            fixture["apiVersion"].as_str().unwrap(),
            fixture["kind"].as_str().unwrap(),
        )
        .unwrap();
        let mut bytes = Vec::new();
        codec.encode_json(&fixture, &mut bytes).unwrap();
        // Every prefix decodes or fails, without panicking; dropping the last byte cuts the last
        // field (a message or string, for every fixture) short, which is an error.
        for len in 0..bytes.len() {
            let _ = codec.decode_json(&bytes[..len]);
            agree_on(&fixture, &bytes[..len]);
        }
        assert!(
            codec.decode_json(&bytes[..bytes.len() - 1]).is_err(),
            "{}",
            fixture["kind"]
        );
        // Flipped bytes: no panic whatever they decode to.
        for i in (0..bytes.len()).step_by(7) {
            let mut garbled = bytes.clone();
            garbled[i] ^= 0xa5;
            let _ = codec.decode_json(&garbled);
            agree_on(&fixture, &garbled);
        }
        assert!(codec.decode_json(&[0xff; 16]).is_err());
    }
}

#[test]
fn bad_leaves_are_errors() {
    use k8s_pb::api::core::v1 as pb;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;

    let encode = |pod: &pb::Pod| pod.encode_to_vec();
    // Bad JSON inside managedFields.
    let pod = pb::Pod {
        metadata: Some(pb_meta::ObjectMeta {
            managed_fields: vec![pb_meta::ManagedFieldsEntry {
                fields_v1: Some(pb_meta::FieldsV1 {
                    raw: Some(b"{not json".to_vec()),
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    assert!(matches!(
        Pod::decode(&encode(&pod)),
        Err(Error::EmbeddedJson {
            field: "FieldsV1",
            ..
        })
    ));
    // A timestamp past what a timestamp holds.
    let pod = pb::Pod {
        metadata: Some(pb_meta::ObjectMeta {
            creation_timestamp: Some(pb_meta::Time {
                seconds: Some(i64::MAX),
                nanos: Some(0),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert!(matches!(
        Pod::decode(&encode(&pod)),
        Err(Error::Time { .. })
    ));
    // An int-or-string of an unknown type.
    let service = pb::Service {
        spec: Some(pb::ServiceSpec {
            ports: vec![pb::ServicePort {
                target_port: Some(k8s_pb::apimachinery::pkg::util::intstr::IntOrString {
                    r#type: Some(7),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    assert!(matches!(
        Service::decode(&service.encode_to_vec()),
        Err(Error::IntOrStringType(7))
    ));
    // A condition without its required transition time.
    let namespace = pb::Namespace {
        status: Some(pb::NamespaceStatus {
            conditions: vec![pb::NamespaceCondition::default()],
            ..Default::default()
        }),
        ..Default::default()
    };
    // NamespaceCondition's time is optional in k8s-openapi: this decodes.
    assert!(Namespace::decode(&namespace.encode_to_vec()).is_ok());
}

#[test]
fn an_empty_message_is_the_default_object() {
    assert_eq!(Pod::decode(&[]).unwrap(), Pod::default());
    assert_eq!(Lease::decode(&[]).unwrap(), Lease::default());
}
