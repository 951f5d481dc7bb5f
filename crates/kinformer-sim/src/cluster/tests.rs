//! Unit tests of the cluster model's pieces; the behaviour as a whole is tested in
//! `tests/cluster.rs`.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::model::{Action, Phase};
use super::names::template_hash;
use super::objects::resource;
use super::{Cluster, ClusterConfig, WriteKind};
use crate::fields::{CLIENT_SIDE_APPLY, Fields, KUBECTL_SET, record};
use crate::store::Store;

fn seeded(pods: usize) -> (Store, Cluster) {
    let store = Store::new(100_000);
    let cluster = Cluster::seed(
        &store,
        &ClusterConfig {
            pods,
            rate_per_sec: 0.0,
            ..ClusterConfig::default()
        },
    );
    (store, cluster)
}

/// The object stored as `namespace/name` of `plural`.
fn get(store: &Store, plural: &str, ns: &str, name: &str) -> Value {
    let ns = (!ns.is_empty()).then_some(ns);
    store.get(&resource(plural), ns, name).expect("stored")
}

/// The `managedFields` entry of `manager` (and `subresource`), if any.
fn entry<'a>(object: &'a Value, manager: &str, subresource: Option<&str>) -> Option<&'a Value> {
    object["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager && e["subresource"].as_str() == subresource)
}

/// The pods of a deployment (`app` label) that are running, by name.
fn running(store: &Store, ns: &str, app: &str) -> Vec<String> {
    store
        .list(&resource("pods"), Some(ns))
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["app"] == app && p["status"]["phase"] == "Running")
        .filter(|p| p["metadata"].get("deletionTimestamp").is_none())
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

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

#[test]
fn field_sets_have_the_field_managers_shape() {
    // What a replica set controller sends for a pod, and the set an Update records for it.
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-1", "namespace": "default", "generateName": "web-",
            "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u1", "controller": true}],
            "finalizers": ["example.com/keep"],
        },
        "spec": {
            "containers": [{
                "name": "app", "image": "nginx",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "env": [{"name": "A", "value": "1"}],
                "resources": {},
            }],
            "tolerations": [{"operator": "Exists"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
        },
    });
    let managed = record(
        &Value::Null,
        CLIENT_SIDE_APPLY,
        "v1",
        "t0",
        &json!({}),
        &pod,
    )
    .expect("a change");
    let expected = json!({
        "f:metadata": {
            "f:finalizers": {".": {}, "v:\"example.com/keep\"": {}},
            "f:generateName": {},
            "f:labels": {".": {}, "f:app": {}},
            "f:ownerReferences": {".": {}, "k:{\"uid\":\"u1\"}": {}},
        },
        "f:spec": {
            "f:affinity": {".": {}, "f:nodeAffinity": {".": {}, "f:requiredDuringSchedulingIgnoredDuringExecution": {}}},
            "f:containers": {"k:{\"name\":\"app\"}": {
                ".": {},
                "f:env": {".": {}, "k:{\"name\":\"A\"}": {".": {}, "f:name": {}, "f:value": {}}},
                "f:image": {},
                "f:name": {},
                "f:ports": {".": {}, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:protocol": {}}},
                "f:resources": {},
            }},
            "f:tolerations": {},
        },
    });
    assert_eq!(managed[0]["fieldsV1"], expected);
    assert_eq!(managed[0]["manager"], "kubectl-client-side-apply");
    assert_eq!(managed[0]["operation"], "Update");
    assert_eq!(managed[0]["time"], "t0");
    assert!(managed[0].get("subresource").is_none());

    // A later write by another manager takes only what it changed; a write that changes
    // nothing records nothing.
    let mut new = pod.clone();
    new["spec"]["containers"][0]["image"] = json!("nginx:2");
    let managed = record(&managed, KUBECTL_SET, "v1", "t1", &pod, &new).expect("a change");
    let set = Fields::of_entry(&managed[1]);
    assert_eq!(managed[1]["manager"], "kubectl-set");
    assert!(set.has(&["f:spec", "f:containers", "k:{\"name\":\"app\"}", "f:image"]));
    assert_eq!(
        managed[1]["fieldsV1"]["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"],
        json!({"f:image": {}})
    );
    let apply = Fields::of_entry(&managed[0]);
    assert!(!apply.has(&["f:spec", "f:containers", "k:{\"name\":\"app\"}", "f:image"]));
    assert!(apply.has(&["f:spec", "f:containers", "k:{\"name\":\"app\"}", "f:name"]));
    assert_eq!(managed[0]["time"], "t0");
    assert!(record(&managed, KUBECTL_SET, "v1", "t2", &new, &new).is_none());
}

/// `value` with its nulls taken out, as a typed round trip leaves it.
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        v => v.clone(),
    }
}

#[test]
fn every_seeded_object_is_a_valid_object_of_its_kind() {
    use k8s_openapi::api::{apps, core, discovery};
    fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(v: &Value) -> Value {
        let typed: T = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{e}: {v}"));
        serde_json::to_value(typed).unwrap()
    }
    let (store, mut cluster) = seeded(120);
    for _ in 0..200 {
        cluster.step(&store);
    }
    for plural in [
        "pods",
        "nodes",
        "namespaces",
        "services",
        "deployments",
        "replicasets",
        "daemonsets",
        "endpointslices",
    ] {
        let objects = store.list(&resource(plural), None);
        assert!(!objects.is_empty(), "{plural}");
        for o in objects {
            let typed = match plural {
                "pods" => round_trip::<core::v1::Pod>(&o),
                "nodes" => round_trip::<core::v1::Node>(&o),
                "namespaces" => round_trip::<core::v1::Namespace>(&o),
                "services" => round_trip::<core::v1::Service>(&o),
                "deployments" => round_trip::<apps::v1::Deployment>(&o),
                "replicasets" => round_trip::<apps::v1::ReplicaSet>(&o),
                "daemonsets" => round_trip::<apps::v1::DaemonSet>(&o),
                _ => round_trip::<discovery::v1::EndpointSlice>(&o),
            };
            // Every field is one the kind has: nothing is lost on the way.
            assert_eq!(typed, without_nulls(&o), "{plural}");
            assert!(
                o["metadata"]["managedFields"]
                    .as_array()
                    .is_some_and(|m| !m.is_empty()),
                "{plural} {} has no managedFields",
                o["metadata"]["name"]
            );
        }
    }
}

#[test]
fn a_deployment_pod_has_its_service_account_token_defaults_and_managers() {
    let (store, _cluster) = seeded(200);
    let pod = store
        .list(&resource("pods"), Some("default"))
        .into_iter()
        .find(|p| p["metadata"]["labels"]["app"] == "web")
        .expect("a web pod");
    let spec = &pod["spec"];
    assert_eq!(spec["serviceAccountName"], "default");
    assert_eq!(spec["serviceAccount"], "default");
    let volume = &spec["volumes"][0];
    let name = volume["name"].as_str().unwrap();
    let suffix = name.strip_prefix("kube-api-access-").expect(name);
    assert_eq!(suffix.len(), 5, "{name}");
    assert!(
        suffix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
        "{name}"
    );
    assert_eq!(
        volume["projected"],
        json!({"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]})
    );
    for c in spec["containers"].as_array().unwrap() {
        assert!(
            c["volumeMounts"].as_array().unwrap().contains(&json!({
                "name": name,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "readOnly": true,
            })),
            "{c}"
        );
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
    }
    assert_eq!(spec["dnsPolicy"], "ClusterFirst");
    assert_eq!(spec["enableServiceLinks"], true);
    assert_eq!(spec["preemptionPolicy"], "PreemptLowerPriority");
    assert_eq!(spec["priority"], 0);
    assert_eq!(spec["schedulerName"], "default-scheduler");
    assert_eq!(spec["securityContext"], json!({}));
    assert_eq!(
        spec["tolerations"],
        json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ])
    );
    let status = &pod["status"];
    assert_eq!(status["qosClass"], "Burstable");
    assert_eq!(status["hostIPs"][0]["ip"], status["hostIP"]);
    assert_eq!(status["podIPs"][0]["ip"], status["podIP"]);
    let conditions: Vec<&str> = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        conditions,
        [
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled"
        ]
    );
    let cs = &status["containerStatuses"][0];
    assert!(cs["imageID"].as_str().unwrap().contains("@sha256:"), "{cs}");
    assert!(
        cs["containerID"]
            .as_str()
            .unwrap()
            .starts_with("containerd://"),
        "{cs}"
    );
    assert_eq!(cs["started"], true);
    assert_eq!(
        cs["volumeMounts"][0],
        json!({"name": name, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true, "recursiveReadOnly": "Disabled"})
    );

    // The replica set controller created it, the kubelet wrote its status; the admission
    // plugins' and the binding's changes have no manager.
    let managers: Vec<(&str, &str, Option<&str>)> = pod["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap(),
                e["operation"].as_str().unwrap(),
                e["subresource"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        managers,
        [
            ("kube-controller-manager", "Update", None),
            ("kubelet", "Update", Some("status"))
        ]
    );
    let controller = Fields::of_entry(entry(&pod, "kube-controller-manager", None).unwrap());
    let container = "k:{\"name\":\"web\"}";
    for path in [
        &["f:metadata", "f:generateName"][..],
        &["f:metadata", "f:labels"],
        &["f:metadata", "f:labels", "f:app"],
        &["f:metadata", "f:labels", "f:pod-template-hash"],
        &["f:spec", "f:containers", container],
        &["f:spec", "f:containers", container, "f:image"],
        &[
            "f:spec",
            "f:containers",
            container,
            "f:ports",
            "k:{\"containerPort\":80,\"protocol\":\"TCP\"}",
            "f:containerPort",
        ],
        &[
            "f:spec",
            "f:containers",
            container,
            "f:resources",
            "f:requests",
            "f:cpu",
        ],
        &["f:spec", "f:enableServiceLinks"],
        &["f:spec", "f:securityContext"],
    ] {
        assert!(controller.has(path), "{path:?}");
    }
    for path in [
        &["f:spec", "f:volumes"][..],
        &["f:spec", "f:serviceAccountName"],
        &["f:spec", "f:nodeName"],
        &["f:spec", "f:containers"],
        &["f:metadata"],
    ] {
        assert!(!controller.has(path), "{path:?}");
    }
    let owner = format!(
        "k:{{\"uid\":\"{}\"}}",
        pod["metadata"]["ownerReferences"][0]["uid"]
            .as_str()
            .unwrap()
    );
    assert!(controller.has(&["f:metadata", "f:ownerReferences", &owner]));
    let kubelet = entry(&pod, "kubelet", Some("status")).unwrap();
    let kubelet_set = Fields::of_entry(kubelet);
    let pod_ip = format!("k:{{\"ip\":\"{}\"}}", status["podIP"].as_str().unwrap());
    for path in [
        &["f:status", "f:phase"][..],
        &["f:status", "f:podIPs", &pod_ip, "f:ip"],
        &[
            "f:status",
            "f:conditions",
            "k:{\"type\":\"Ready\"}",
            "f:status",
        ],
        &["f:status", "f:containerStatuses"],
        &["f:status", "f:hostIPs"],
    ] {
        assert!(kubelet_set.has(path), "{path:?}");
    }
    // The scheduler's condition and the server's QoS class are not the kubelet's.
    assert!(!kubelet_set.has(&["f:status", "f:conditions", "k:{\"type\":\"PodScheduled\"}"]));
    assert!(!kubelet_set.has(&["f:status", "f:qosClass"]));
    assert!(kubelet["time"].as_str() >= pod["metadata"]["creationTimestamp"].as_str());
}

#[test]
fn static_pods_are_mirrors_without_a_service_account() {
    let (store, _cluster) = seeded(60);
    let pod = get(
        &store,
        "pods",
        "kube-system",
        "kube-apiserver-kinformer-control-plane",
    );
    assert!(pod["spec"].get("serviceAccountName").is_none(), "{pod}");
    assert_eq!(pod["spec"]["hostNetwork"], true);
    assert_eq!(pod["spec"]["priority"], 2_000_001_000);
    assert_eq!(
        pod["metadata"]["annotations"]["kubernetes.io/config.source"],
        "file"
    );
    assert!(entry(&pod, "kubelet", None).is_some());
    assert!(entry(&pod, "kubelet", Some("status")).is_some());
}

#[test]
fn writes_keep_each_managers_fields_and_time() {
    let start = Cluster::now();
    let (store, mut cluster) = seeded(60);
    let mut crashed = None;
    let mut scaled = None;
    for _ in 0..2_000 {
        for w in cluster.step(&store) {
            match (w.resource, w.reason) {
                ("pods", "container crashed") => crashed = Some((w.namespace, w.name)),
                ("deployments", "scaled") => scaled = Some((w.namespace, w.name)),
                _ => {}
            }
        }
        if crashed.is_some() && scaled.is_some() {
            break;
        }
    }
    // A crash is the kubelet's status write: its entry has the new time, the controller's is
    // left as it was.
    let (ns, name) = crashed.expect("a crash");
    let pod = get(&store, "pods", &ns, &name);
    let kubelet = entry(&pod, "kubelet", Some("status")).unwrap();
    let controller = entry(&pod, "kube-controller-manager", None).unwrap();
    assert!(
        kubelet["time"].as_str().unwrap() >= start.as_str(),
        "{kubelet}"
    );
    assert_eq!(controller["time"], pod["metadata"]["creationTimestamp"]);
    assert!(Fields::of_entry(kubelet).has(&["f:status", "f:containerStatuses"]));
    // `kubectl scale` takes the replicas from `kubectl apply`.
    let (ns, name) = scaled.expect("a scale");
    let deploy = get(&store, "deployments", &ns, &name);
    let scale = deploy["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "kubectl" && e["subresource"] == "scale")
        .expect("kubectl's scale entry");
    assert_eq!(scale["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
    let apply = Fields::of_entry(entry(&deploy, "kubectl-client-side-apply", None).unwrap());
    assert!(!apply.has(&["f:spec", "f:replicas"]));
    assert!(apply.has(&["f:spec", "f:revisionHistoryLimit"]));
    let status =
        Fields::of_entry(entry(&deploy, "kube-controller-manager", Some("status")).unwrap());
    assert!(status.has(&["f:status", "f:readyReplicas"]));
    assert!(status.has(&[
        "f:metadata",
        "f:annotations",
        "f:deployment.kubernetes.io/revision"
    ]));
}

/// The endpoints of an EndpointSlice by pod name: (ready, serving, terminating).
fn endpoints(slice: &Value) -> Vec<(String, bool, bool, bool)> {
    slice["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let c = &e["conditions"];
            (
                e["targetRef"]["name"].as_str().unwrap().to_owned(),
                c["ready"] == true,
                c["serving"] == true,
                c["terminating"] == true,
            )
        })
        .collect()
}

fn slice_of(store: &Store, ns: &str, service: &str) -> Value {
    let slices: Vec<Value> = store
        .list(&resource("endpointslices"), Some(ns))
        .into_iter()
        .filter(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] == service)
        .collect();
    assert_eq!(slices.len(), 1, "{ns}/{service}");
    slices.into_iter().next().unwrap()
}

#[test]
fn a_service_endpoint_slice_lists_its_ready_pods_and_follows_a_rollout() {
    let (store, mut cluster) = seeded(200);
    let service = get(&store, "services", "default", "web");
    let slice = slice_of(&store, "default", "web");
    let name = slice["metadata"]["name"].as_str().unwrap();
    let tail = name.strip_prefix("web-").expect(name);
    assert_eq!(tail.len(), 5, "{name}");
    assert_eq!(
        slice["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    assert_eq!(slice["metadata"]["ownerReferences"][0]["kind"], "Service");
    assert_eq!(
        slice["metadata"]["ownerReferences"][0]["uid"],
        service["metadata"]["uid"]
    );
    assert_eq!(slice["addressType"], "IPv4");
    assert_eq!(
        slice["ports"],
        json!([{"name": "http", "port": 80, "protocol": "TCP"}])
    );
    let mut ready = running(&store, "default", "web");
    ready.sort();
    let listed: Vec<String> = endpoints(&slice).into_iter().map(|e| e.0).collect();
    assert_eq!(listed, ready);
    for e in slice["endpoints"].as_array().unwrap() {
        assert_eq!(
            e["conditions"],
            json!({"ready": true, "serving": true, "terminating": false})
        );
        let pod = get(
            &store,
            "pods",
            "default",
            e["targetRef"]["name"].as_str().unwrap(),
        );
        assert_eq!(e["addresses"][0], pod["status"]["podIP"]);
        assert_eq!(e["nodeName"], pod["spec"]["nodeName"]);
        assert_eq!(e["targetRef"]["uid"], pod["metadata"]["uid"]);
        let node = get(
            &store,
            "nodes",
            "",
            pod["spec"]["nodeName"].as_str().unwrap(),
        );
        assert_eq!(
            e["zone"],
            node["metadata"]["labels"]["topology.kubernetes.io/zone"]
        );
    }
    let kubernetes = get(&store, "endpointslices", "default", "kubernetes");
    assert_eq!(kubernetes["endpoints"][0]["addresses"][0], "172.18.0.2");

    // A rollout replaces every pod: the slice shows the old ones terminating, then only the
    // new ones.
    let old: Vec<String> = listed;
    assert!(!cluster.rollout(&store, "default", "web").is_empty());
    let mut saw_terminating = false;
    let mut versions = BTreeSet::new();
    for _ in 0..10_000 {
        if cluster.settle(&store, 1) {
            break;
        }
        let slice = slice_of(&store, "default", "web");
        saw_terminating |= endpoints(&slice)
            .iter()
            .any(|e| old.contains(&e.0) && (e.1, e.2, e.3) == (false, true, true));
        versions.insert(
            slice["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    assert!(saw_terminating);
    // A write for each pod that came, went or changed, give or take what one sync covers.
    assert!(
        versions.len() > old.len(),
        "{} for {}",
        versions.len(),
        old.len()
    );
    let slice = slice_of(&store, "default", "web");
    let mut ready = running(&store, "default", "web");
    ready.sort();
    let listed: Vec<String> = endpoints(&slice).into_iter().map(|e| e.0).collect();
    assert_eq!(listed, ready);
    assert!(
        listed.iter().all(|p| !old.contains(p)),
        "{listed:?} / {old:?}"
    );
    assert!(
        entry(&slice, "kube-controller-manager", None).unwrap()["time"].as_str()
            > slice["metadata"]["creationTimestamp"].as_str()
    );
}

#[test]
fn an_endpoint_slice_drops_a_pod_that_goes() {
    let (store, mut cluster) = seeded(120);
    let slice = slice_of(&store, "default", "web");
    let (gone, ..) = endpoints(&slice)[0].clone();
    let key = ("default".to_owned(), gone.clone());
    // Its kubelet ends its grace period: the pod is deleted, the controller syncs the slice.
    cluster.pods.get_mut(&key).unwrap().phase = Phase::Terminating;
    let writes = cluster.apply(&store, Action::Gone(key));
    assert_eq!(writes[0].kind, WriteKind::Deleted);
    assert!(cluster.settle(&store, 1_000));
    let slice = slice_of(&store, "default", "web");
    let listed: Vec<String> = endpoints(&slice).into_iter().map(|e| e.0).collect();
    assert!(!listed.contains(&gone), "{listed:?}");
    let mut ready = running(&store, "default", "web");
    ready.sort();
    assert_eq!(listed, ready);
}

#[test]
fn a_deployment_pod_is_4_to_6_kb_of_json() {
    let (store, _cluster) = seeded(400);
    let mut sizes: Vec<(usize, String)> = store
        .list(&resource("pods"), None)
        .iter()
        .filter(|p| p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet")
        .filter(|p| p["status"]["phase"] == "Running")
        .map(|p| {
            (
                serde_json::to_vec(p).unwrap().len(),
                p["metadata"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    sizes.sort();
    // The add-ons' pods (`coredns`: probes, security context, a config volume) are bigger.
    let add_ons: Vec<(usize, String)> = sizes
        .iter()
        .filter(|(_, name)| name.starts_with("coredns-"))
        .cloned()
        .collect();
    sizes.retain(|(_, name)| !name.starts_with("coredns-"));
    println!("add-on pods: {add_ons:?}");
    let (min, median, max) = (&sizes[0], &sizes[sizes.len() / 2], &sizes[sizes.len() - 1]);
    println!(
        "deployment pods: {} running, min {} B ({}), median {} B ({}), max {} B ({})",
        sizes.len(),
        min.0,
        min.1,
        median.0,
        median.1,
        max.0,
        max.1
    );
    assert!((4096..=6144).contains(&median.0), "{median:?}");
    assert!(
        sizes.iter().all(|(s, _)| (4000..=6500).contains(s)),
        "{min:?} {max:?}"
    );
}
