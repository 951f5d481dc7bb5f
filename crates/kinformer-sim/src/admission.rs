//! What the API server does to a created object before storing it, for the kinds the sim
//! serves: the namespace must exist (NamespaceLifecycle), pods and namespaces get the defaults
//! and initial status a real server gives them, and the other kinds with a status subresource
//! start without a status.

use kinformer_core::{ApiResource, Scope, Status, StatusCause, StatusDetails};
use serde_json::{Map, Value, json};

use crate::store::{ResourceInfo, Store, status};

/// Namespaces a cluster always has; they exist for admission even before anyone creates them.
const SYSTEM_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

fn namespaces() -> ApiResource {
    ApiResource::new("", "v1", "Namespace", "namespaces", Scope::Cluster)
}

/// Admits a create over the API: checks the namespace and applies defaults.
pub(crate) fn admit_create(
    store: &Store,
    info: &ResourceInfo,
    object: &mut Value,
    path_namespace: Option<&str>,
) -> Result<(), Status> {
    if !object.is_object() {
        return Ok(());
    }
    let api = &info.api;
    if api.scope == Scope::Namespaced {
        let ns = object["metadata"]["namespace"]
            .as_str()
            .or(path_namespace)
            .unwrap_or("default")
            .to_owned();
        check_namespace(store, api, object, &ns)?;
    }
    match (api.group.as_str(), api.plural.as_str()) {
        ("", "pods") => default_pod(object),
        ("", "namespaces") => default_namespace(object),
        // Nodes keep the status they are created with (a kubelet registers its node that way).
        ("", "nodes") => {}
        // Every other kind with a status subresource starts with none (its strategy's
        // PrepareForCreate; apiextensions' for custom resources with `subresources.status`).
        _ if info.status_subresource => {
            if let Some(map) = object.as_object_mut() {
                map.remove("status");
            }
        }
        _ => {}
    }
    Ok(())
}

fn check_namespace(
    store: &Store,
    api: &ApiResource,
    object: &Value,
    ns: &str,
) -> Result<(), Status> {
    match store.get(&namespaces(), None, ns) {
        None if SYSTEM_NAMESPACES.contains(&ns) => Ok(()),
        None => {
            let mut s = status(404, "NotFound", format!("namespaces \"{ns}\" not found"));
            s.details = Some(StatusDetails {
                name: ns.to_owned(),
                kind: "namespaces".to_owned(),
                ..StatusDetails::default()
            });
            Err(s)
        }
        Some(n) if n["metadata"].get("deletionTimestamp").is_some() => {
            let name = object["metadata"]["name"]
                .as_str()
                .or_else(|| object["metadata"]["generateName"].as_str())
                .unwrap_or_default();
            let mut s = status(
                403,
                "Forbidden",
                format!(
                    "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                    api.plural
                ),
            );
            // The lifecycle plugin names the cause, so that a client can tell this 403 from
            // an authorization one (`plugin/pkg/admission/namespace/lifecycle/admission.go`).
            s.details = Some(StatusDetails {
                name: name.to_owned(),
                kind: api.plural.clone(),
                causes: vec![StatusCause {
                    reason: "NamespaceTerminating".to_owned(),
                    message: format!("namespace {ns} is being terminated"),
                    field: "metadata.namespace".to_owned(),
                }],
                ..StatusDetails::default()
            });
            Err(s)
        }
        Some(_) => Ok(()),
    }
}

/// Sets `key` to `value` unless it is set.
fn default_field(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_owned(), value);
    }
}

fn object_mut<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let map = v.as_object_mut()?;
    let entry = map
        .entry(key.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut()
}

/// The pull policy the API server defaults from the image: `Always` for `:latest` or no tag.
fn pull_policy(image: &str) -> &'static str {
    let name = image.rsplit('/').next().unwrap_or(image);
    let tag = name.split('@').next().unwrap_or(name).split_once(':');
    if image.contains('@') {
        return "IfNotPresent";
    }
    match tag {
        None | Some((_, "latest")) => "Always",
        Some(_) => "IfNotPresent",
    }
}

/// The QoS class of a pod spec: BestEffort without requests or limits, Guaranteed when every
/// container's cpu and memory limits equal its requests, Burstable otherwise.
fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = spec["containers"]
        .as_array()
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    let empty = |v: &Value| v.as_object().is_none_or(Map::is_empty);
    if containers
        .iter()
        .all(|c| empty(&c["resources"]["requests"]) && empty(&c["resources"]["limits"]))
    {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        let r = &c["resources"];
        ["cpu", "memory"].iter().all(|k| {
            let limit = &r["limits"][*k];
            !limit.is_null() && (r["requests"][*k].is_null() || r["requests"][*k] == *limit)
        })
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// The defaults a real API server gives a pod (its defaulting functions and the
/// ServiceAccount and DefaultTolerationSeconds admission plugins), and the status of a new pod:
/// whatever status the client sent is replaced by `phase: Pending` and its QoS class.
fn default_pod(pod: &mut Value) {
    default_pod_spec(pod);
    if let Some(spec) = object_mut(pod, "spec") {
        default_field(spec, "serviceAccountName", json!("default"));
        let sa = spec["serviceAccountName"].clone();
        default_field(spec, "serviceAccount", sa);
        default_field(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
        default_field(spec, "priority", json!(0));
        default_field(
            spec,
            "tolerations",
            json!([
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ]),
        );
    }
    let qos = qos_class(&pod["spec"]);
    if let Some(map) = pod.as_object_mut() {
        map.insert(
            "status".into(),
            json!({"phase": "Pending", "qosClass": qos}),
        );
    }
}

/// The defaults every decode of a pod gets, on updates as on creates (`SetDefaults_PodSpec` and
/// `SetDefaults_Container` in `pkg/apis/core/v1/defaults.go`; an empty `resources` is how the
/// typed object serialises), and `serviceAccount` mirroring `serviceAccountName` as conversion
/// writes it. The admission plugins' defaults (service account, priority, tolerations) are a
/// create's only.
fn default_pod_spec(pod: &mut Value) {
    if let Some(spec) = object_mut(pod, "spec") {
        default_field(spec, "restartPolicy", json!("Always"));
        default_field(spec, "terminationGracePeriodSeconds", json!(30));
        default_field(spec, "dnsPolicy", json!("ClusterFirst"));
        default_field(spec, "securityContext", json!({}));
        default_field(spec, "schedulerName", json!("default-scheduler"));
        default_field(spec, "enableServiceLinks", json!(true));
        if let Some(sa) = spec
            .get("serviceAccountName")
            .filter(|v| !v.is_null())
            .cloned()
        {
            default_field(spec, "serviceAccount", sa);
        }
        for list in ["initContainers", "containers"] {
            let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
                continue;
            };
            for c in containers.iter_mut().filter_map(Value::as_object_mut) {
                let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
                let policy = pull_policy(image);
                default_field(c, "imagePullPolicy", json!(policy));
                default_field(c, "terminationMessagePath", json!("/dev/termination-log"));
                default_field(c, "terminationMessagePolicy", json!("File"));
                default_field(c, "resources", json!({}));
                if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                        default_field(p, "protocol", json!("TCP"));
                    }
                }
            }
        }
    }
}

/// Defaults an object written over HTTP by an update or a patch, as every decode defaults it.
pub(crate) fn default_update(info: &ResourceInfo, object: &mut Value) {
    if object.is_object() && !info.custom && info.api.group.is_empty() && info.api.plural == "pods"
    {
        default_pod_spec(object);
    }
}

/// A new namespace: the `kubernetes` finalizer added to any it brings, phase `Active`, and its
/// name label (`pkg/registry/core/namespace/strategy.go`, `PrepareForCreate`).
fn default_namespace(ns: &mut Value) {
    let name = ns["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if let Some(meta) = object_mut(ns, "metadata")
        && !name.is_empty()
        && let Some(labels) = {
            default_field(meta, "labels", json!({}));
            meta.get_mut("labels").and_then(Value::as_object_mut)
        }
    {
        labels.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    // The strategy's PrepareForCreate appends `kubernetes` to the finalizers sent, if missing.
    if let Some(spec) = object_mut(ns, "spec") {
        let finalizers = spec.entry("finalizers").or_insert_with(|| json!([]));
        if !finalizers.is_array() {
            *finalizers = json!([]);
        }
        if let Some(list) = finalizers.as_array_mut()
            && !list.iter().any(|f| f == "kubernetes")
        {
            list.push(json!("kubernetes"));
        }
    }
    if let Some(map) = ns.as_object_mut() {
        map.insert("status".into(), json!({"phase": "Active"}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_follows_the_tag() {
        assert_eq!(pull_policy("nginx"), "Always");
        assert_eq!(pull_policy("nginx:latest"), "Always");
        assert_eq!(pull_policy("nginx:1.27"), "IfNotPresent");
        assert_eq!(pull_policy("registry:5000/app"), "Always");
        assert_eq!(pull_policy("registry:5000/app:v1"), "IfNotPresent");
        assert_eq!(pull_policy("app@sha256:abc"), "IfNotPresent");
    }

    #[test]
    fn qos_classes() {
        assert_eq!(qos_class(&json!({"containers": [{}]})), "BestEffort");
        let g = json!({"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]});
        assert_eq!(qos_class(&g), "Guaranteed");
        let b = json!({"containers": [{"resources": {"requests": {"cpu": "1"}}}]});
        assert_eq!(qos_class(&b), "Burstable");
    }
}
