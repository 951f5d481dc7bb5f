//! Content negotiation of responses (the `Accept` header) and the `Table` form `kubectl get`
//! prints from.

use bytes::Bytes;
use kinformer_core::Status;
use serde_json::{Value, json};

use crate::store::{ResourceInfo, status};

/// The form of objects a response carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// Full objects (`application/json`).
    Full,
    /// `PartialObjectMetadata` / `PartialObjectMetadataList`.
    Metadata,
    /// A `meta.k8s.io` `Table` (of one row per watch event).
    Table,
    /// Full objects as YAML (`application/yaml`; gets and lists only, as YAML has no stream
    /// framing for watches).
    Yaml,
}

/// What a request reads: one object, a collection, or a watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    Get,
    List,
    Watch,
}

/// Picks the first acceptable media type of an `Accept` header, as the API server does, for a
/// server that speaks JSON only (it has no protobuf, CBOR or YAML serializer). `Err` is the 406
/// NotAcceptable a server answers when nothing listed is acceptable.
pub(crate) fn negotiate(accept: Option<&str>, read: Read) -> Result<Form, Status> {
    let Some(accept) = accept.map(str::trim).filter(|a| !a.is_empty()) else {
        return Ok(Form::Full);
    };
    let mut candidates: Vec<(f32, usize, &str)> = accept
        .split(',')
        .enumerate()
        .filter_map(|(i, t)| {
            let q = t
                .split(';')
                .skip(1)
                .find_map(|p| p.trim().strip_prefix("q=").and_then(|q| q.parse().ok()))
                .unwrap_or(1.0);
            (q > 0.0).then_some((q, i, t.trim()))
        })
        .collect();
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, _, media) in candidates {
        let mut parts = media.split(';').map(str::trim);
        let mime = parts.next().unwrap_or_default().to_ascii_lowercase();
        if mime == "application/yaml" {
            if read != Read::Watch && !media.contains("as=") {
                return Ok(Form::Yaml);
            }
            continue;
        }
        if !matches!(mime.as_str(), "application/json" | "application/*" | "*/*") {
            continue;
        }
        let (mut r#as, mut g, mut v) = (None, None, None);
        for p in parts {
            match p.split_once('=') {
                Some(("as", x)) => r#as = Some(x),
                Some(("g", x)) => g = Some(x),
                Some(("v", x)) => v = Some(x),
                _ => {}
            }
        }
        let meta_group = g == Some("meta.k8s.io") && matches!(v, Some("v1" | "v1beta1"));
        let form = match (r#as, read) {
            (None, _) => Some(Form::Full),
            (Some("Table"), _) if meta_group => Some(Form::Table),
            (Some("PartialObjectMetadataList"), Read::List) if meta_group => Some(Form::Metadata),
            (Some("PartialObjectMetadata"), Read::Get | Read::Watch) if meta_group => {
                Some(Form::Metadata)
            }
            _ => None,
        };
        if let Some(f) = form {
            return Ok(f);
        }
    }
    Err(status(
        406,
        "NotAcceptable",
        "only the following media types are accepted: application/json, application/yaml",
    ))
}

/// `2d3h`, `5m12s`, `42s`: how the API server prints an age (`duration.HumanDuration`).
pub(crate) fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        let rem = s % 60;
        if rem == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{rem}s")
        }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        let rem = m % 60;
        if rem == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{rem}m")
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        let rem = h % 24;
        if rem == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{rem}h")
        }
    } else if h < 24 * 365 * 2 {
        format!("{d}d")
    } else if h < 24 * 365 * 8 {
        let y = d / 365;
        let rem = d % 365;
        if rem == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{rem}d")
        }
    } else {
        format!("{}y", d / 365)
    }
}

fn age(object: &Value, now: i64) -> String {
    let created = object["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map_or(now, |t| t.as_second());
    human_duration(now - created)
}

fn column(name: &str, r#type: &str, format: &str, description: &str, priority: u8) -> Value {
    json!({"name": name, "type": r#type, "format": format, "description": description, "priority": priority})
}

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// The column definitions of a resource's table.
fn columns(info: &ResourceInfo) -> Vec<Value> {
    let name = column("Name", "string", "name", NAME_DESCRIPTION, 0);
    let age = column("Age", "string", "", AGE_DESCRIPTION, 0);
    match (info.api.group.as_str(), info.api.plural.as_str()) {
        ("", "pods") => vec![
            name,
            column(
                "Ready",
                "string",
                "",
                "The aggregate readiness state of this pod for accepting traffic.",
                0,
            ),
            column(
                "Status",
                "string",
                "",
                "The aggregate status of the containers in this pod.",
                0,
            ),
            column(
                "Restarts",
                "string",
                "",
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                0,
            ),
            age,
            column(
                "IP",
                "string",
                "",
                "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
                1,
            ),
            column(
                "Node",
                "string",
                "",
                "NodeName is a request to schedule this pod onto a specific node.",
                1,
            ),
            column(
                "Nominated Node",
                "string",
                "",
                "nominatedNodeName is set only when this pod preempts other pods on the node.",
                1,
            ),
            column(
                "Readiness Gates",
                "string",
                "",
                "If specified, all readiness gates will be evaluated for pod readiness.",
                1,
            ),
        ],
        ("", "namespaces") => vec![
            name,
            column("Status", "string", "", "The status of the namespace", 0),
            age,
        ],
        ("", "configmaps") => vec![
            name,
            column(
                "Data",
                "integer",
                "",
                "Data contains the configuration data.",
                0,
            ),
            age,
        ],
        ("", "nodes") => vec![
            name,
            column("Status", "string", "", "The status of the node", 0),
            column("Roles", "string", "", "The roles of the node", 0),
            age,
            column(
                "Version",
                "string",
                "",
                "Kubelet Version reported by the node.",
                0,
            ),
            column(
                "Internal-IP",
                "string",
                "",
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
                1,
            ),
            column(
                "External-IP",
                "string",
                "",
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
                1,
            ),
            column(
                "OS-Image",
                "string",
                "",
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
                1,
            ),
            column(
                "Kernel-Version",
                "string",
                "",
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
                1,
            ),
            column(
                "Container-Runtime",
                "string",
                "",
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
                1,
            ),
        ],
        ("", "services") => vec![
            name,
            column(
                "Type",
                "string",
                "",
                "type determines how the Service is exposed.",
                0,
            ),
            column(
                "Cluster-IP",
                "string",
                "",
                "clusterIP is the IP address of the service and is usually assigned randomly.",
                0,
            ),
            column(
                "External-IP",
                "string",
                "",
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
                0,
            ),
            column(
                "Port(s)",
                "string",
                "",
                "The list of ports that are exposed by this service.",
                0,
            ),
            age,
            column(
                "Selector",
                "string",
                "",
                "Route service traffic to pods with label keys and values matching this selector.",
                1,
            ),
        ],
        ("apps", "deployments") => {
            let mut c = vec![
                name,
                column(
                    "Ready",
                    "string",
                    "",
                    "Number of the pod with ready state",
                    0,
                ),
                column(
                    "Up-to-date",
                    "integer",
                    "",
                    "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                    0,
                ),
                column(
                    "Available",
                    "integer",
                    "",
                    "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
                    0,
                ),
                age,
            ];
            c.extend(workload_wide_columns());
            c
        }
        ("apps", "replicasets") => {
            let mut c = vec![
                name,
                column(
                    "Desired",
                    "integer",
                    "",
                    "Replicas is the number of desired replicas.",
                    0,
                ),
                column(
                    "Current",
                    "integer",
                    "",
                    "Replicas is the most recently observed number of replicas.",
                    0,
                ),
                column(
                    "Ready",
                    "integer",
                    "",
                    "readyReplicas is the number of pods targeted by this ReplicaSet with a Ready Condition.",
                    0,
                ),
                age,
            ];
            c.extend(workload_wide_columns());
            c
        }
        ("apps", "daemonsets") => {
            let mut c = vec![
                name,
                column(
                    "Desired",
                    "integer",
                    "",
                    "The total number of nodes that should be running the daemon pod.",
                    0,
                ),
                column(
                    "Current",
                    "integer",
                    "",
                    "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
                    0,
                ),
                column(
                    "Ready",
                    "integer",
                    "",
                    "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
                    0,
                ),
                column(
                    "Up-to-date",
                    "integer",
                    "",
                    "The total number of nodes that are running updated daemon pod",
                    0,
                ),
                column(
                    "Available",
                    "integer",
                    "",
                    "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
                    0,
                ),
                column(
                    "Node Selector",
                    "string",
                    "",
                    "NodeSelector is a selector which must be true for the pod to fit on a node.",
                    0,
                ),
                age,
            ];
            c.extend(workload_wide_columns());
            c
        }
        _ => vec![name, age],
    }
}

/// The wide columns of deployments, replica sets and daemon sets.
fn workload_wide_columns() -> Vec<Value> {
    vec![
        column(
            "Containers",
            "string",
            "",
            "Names of each container in the template.",
            1,
        ),
        column(
            "Images",
            "string",
            "",
            "Images referenced by each container in the template.",
            1,
        ),
        column(
            "Selector",
            "string",
            "",
            "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
            1,
        ),
    ]
}

/// `key=value,...` of a label map, sorted by key (as `labels.Set.String` prints it).
fn label_string(labels: &Value) -> String {
    let mut pairs: Vec<String> = labels
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".to_owned()
    } else {
        pairs.join(",")
    }
}

/// The containers and images cells of a workload's pod template, and its selector.
fn workload_wide_cells(o: &Value) -> [Value; 3] {
    let containers = o["spec"]["template"]["spec"]["containers"].as_array();
    let join = |field: &str| {
        containers
            .map(|cs| {
                cs.iter()
                    .map(|c| c[field].as_str().unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    };
    [
        json!(join("name")),
        json!(join("image")),
        json!(label_string(&o["spec"]["selector"]["matchLabels"])),
    ]
}

fn count(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// A node's status column: `Ready`, `NotReady` or `Unknown`, then `SchedulingDisabled` when
/// cordoned.
fn node_status(node: &Value) -> String {
    let ready = node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .map_or("Unknown", |c| match c["status"].as_str() {
            Some("True") => "Ready",
            Some("False") => "NotReady",
            _ => "Unknown",
        });
    if node["spec"]["unschedulable"] == true {
        format!("{ready},SchedulingDisabled")
    } else {
        ready.to_owned()
    }
}

/// A node's roles, from its `node-role.kubernetes.io/<role>` labels.
fn node_roles(node: &Value) -> String {
    let mut roles: Vec<&str> = node["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/"))
        .filter(|r| !r.is_empty())
        .collect();
    roles.sort_unstable();
    if roles.is_empty() {
        "<none>".to_owned()
    } else {
        roles.join(",")
    }
}

fn node_address(node: &Value, kind: &str) -> String {
    node["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["type"] == kind)
        .and_then(|a| a["address"].as_str())
        .unwrap_or("<none>")
        .to_owned()
}

/// A service's external IP column: its external IPs, or a load balancer's ingress (or
/// `<pending>` while it has none).
fn service_external_ip(svc: &Value) -> String {
    let spec = &svc["spec"];
    let mut ips: Vec<String> = spec["externalIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i.as_str().map(str::to_owned))
        .collect();
    if spec["type"] == "LoadBalancer" {
        ips.extend(
            svc["status"]["loadBalancer"]["ingress"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|i| i["ip"].as_str().or_else(|| i["hostname"].as_str()))
                .map(str::to_owned),
        );
        if ips.is_empty() {
            return "<pending>".to_owned();
        }
    }
    if spec["type"] == "ExternalName" {
        return spec["externalName"].as_str().unwrap_or("<none>").to_owned();
    }
    if ips.is_empty() {
        "<none>".to_owned()
    } else {
        ips.join(",")
    }
}

/// `80/TCP,443:30443/TCP`.
fn service_ports(svc: &Value) -> String {
    let ports: Vec<String> = svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let protocol = p["protocol"].as_str().unwrap_or("TCP");
            match p["nodePort"].as_i64() {
                Some(node) => format!("{}:{node}/{protocol}", count(&p["port"])),
                None => format!("{}/{protocol}", count(&p["port"])),
            }
        })
        .collect();
    if ports.is_empty() {
        "<none>".to_owned()
    } else {
        ports.join(",")
    }
}

/// The restarts column: the count, and how long ago the last one was when there was one.
fn restarts_cell(statuses: Option<&Vec<Value>>, now: i64) -> String {
    let Some(statuses) = statuses else {
        return "0".to_owned();
    };
    let restarts: i64 = statuses.iter().map(|c| count(&c["restartCount"])).sum();
    let last = statuses
        .iter()
        .filter_map(|c| c["lastState"]["terminated"]["finishedAt"].as_str())
        .filter_map(|t| t.parse::<jiff::Timestamp>().ok())
        .map(|t| t.as_second())
        .max();
    match last {
        Some(at) if restarts > 0 => format!("{restarts} ({} ago)", human_duration(now - at)),
        _ => restarts.to_string(),
    }
}

/// The status `kubectl get pods` shows: the pod's reason or phase, a container's waiting or
/// terminated reason, or `Terminating`.
fn pod_status(pod: &Value) -> String {
    let st = &pod["status"];
    let mut reason = st["reason"]
        .as_str()
        .or_else(|| st["phase"].as_str())
        .unwrap_or("Unknown")
        .to_owned();
    for c in st["containerStatuses"].as_array().into_iter().flatten() {
        if let Some(r) = c["state"]["waiting"]["reason"]
            .as_str()
            .filter(|r| !r.is_empty())
        {
            reason = r.to_owned();
        } else if let Some(r) = c["state"]["terminated"]["reason"]
            .as_str()
            .filter(|r| !r.is_empty())
        {
            reason = r.to_owned();
        }
    }
    if pod["metadata"].get("deletionTimestamp").is_some() {
        reason = "Terminating".to_owned();
    }
    reason
}

fn cells(info: &ResourceInfo, o: &Value, now: i64) -> Vec<Value> {
    let name = json!(o["metadata"]["name"].as_str().unwrap_or_default());
    match (info.api.group.as_str(), info.api.plural.as_str()) {
        ("", "pods") => {
            let total = o["spec"]["containers"].as_array().map_or(0, Vec::len);
            let statuses = o["status"]["containerStatuses"].as_array();
            let ready = statuses.map_or(0, |s| s.iter().filter(|c| c["ready"] == true).count());
            let none = || json!("<none>");
            let text = |v: &Value| {
                v.as_str()
                    .filter(|s| !s.is_empty())
                    .map_or_else(none, |s| json!(s))
            };
            vec![
                name,
                json!(format!("{ready}/{total}")),
                json!(pod_status(o)),
                json!(restarts_cell(statuses, now)),
                json!(age(o, now)),
                text(&o["status"]["podIP"]),
                text(&o["spec"]["nodeName"]),
                text(&o["status"]["nominatedNodeName"]),
                none(),
            ]
        }
        ("", "namespaces") => vec![
            name,
            json!(o["status"]["phase"].as_str().unwrap_or_default()),
            json!(age(o, now)),
        ],
        ("", "configmaps") => vec![
            name,
            json!(
                o["data"].as_object().map_or(0, serde_json::Map::len)
                    + o["binaryData"].as_object().map_or(0, serde_json::Map::len)
            ),
            json!(age(o, now)),
        ],
        ("", "nodes") => {
            let info = &o["status"]["nodeInfo"];
            let text = |v: &Value| json!(v.as_str().unwrap_or("<unknown>"));
            vec![
                name,
                json!(node_status(o)),
                json!(node_roles(o)),
                json!(age(o, now)),
                text(&info["kubeletVersion"]),
                json!(node_address(o, "InternalIP")),
                json!(node_address(o, "ExternalIP")),
                text(&info["osImage"]),
                text(&info["kernelVersion"]),
                text(&info["containerRuntimeVersion"]),
            ]
        }
        ("", "services") => vec![
            name,
            json!(o["spec"]["type"].as_str().unwrap_or("ClusterIP")),
            json!(o["spec"]["clusterIP"].as_str().unwrap_or("<none>")),
            json!(service_external_ip(o)),
            json!(service_ports(o)),
            json!(age(o, now)),
            json!(label_string(&o["spec"]["selector"])),
        ],
        ("apps", "deployments") => {
            let st = &o["status"];
            let mut c = vec![
                name,
                json!(format!(
                    "{}/{}",
                    count(&st["readyReplicas"]),
                    count(&o["spec"]["replicas"])
                )),
                json!(count(&st["updatedReplicas"])),
                json!(count(&st["availableReplicas"])),
                json!(age(o, now)),
            ];
            c.extend(workload_wide_cells(o));
            c
        }
        ("apps", "replicasets") => {
            let st = &o["status"];
            let mut c = vec![
                name,
                json!(count(&o["spec"]["replicas"])),
                json!(count(&st["replicas"])),
                json!(count(&st["readyReplicas"])),
                json!(age(o, now)),
            ];
            c.extend(workload_wide_cells(o));
            c
        }
        ("apps", "daemonsets") => {
            let st = &o["status"];
            let selector = &o["spec"]["template"]["spec"]["nodeSelector"];
            let mut c = vec![
                name,
                json!(count(&st["desiredNumberScheduled"])),
                json!(count(&st["currentNumberScheduled"])),
                json!(count(&st["numberReady"])),
                json!(count(&st["updatedNumberScheduled"])),
                json!(count(&st["numberAvailable"])),
                json!(label_string(selector)),
                json!(age(o, now)),
            ];
            c.extend(workload_wide_cells(o));
            c
        }
        _ => vec![name, json!(age(o, now))],
    }
}

/// What a table row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub(crate) fn parse(s: Option<&str>) -> Result<Self, Status> {
        match s {
            None | Some("Metadata") => Ok(Self::Metadata),
            Some("None") => Ok(Self::None),
            Some("Object") => Ok(Self::Object),
            Some(other) => Err(status(
                400,
                "BadRequest",
                format!("includeObject must be one of None, Metadata or Object, not {other:?}"),
            )),
        }
    }
}

/// A `Table` of objects, as `kubectl get` asks for it.
pub(crate) fn table(
    info: &ResourceInfo,
    objects: &[Value],
    list_meta: Value,
    include: IncludeObject,
) -> Value {
    let now = jiff::Timestamp::now().as_second();
    let rows: Vec<Value> = objects
        .iter()
        .map(|v| {
            let mut row = json!({"cells": cells(info, v, now)});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row["object"] = json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": v["metadata"],
                    });
                }
                IncludeObject::Object => row["object"] = v.clone(),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns(info),
        "rows": rows,
    })
}

/// A watch event's object as a one-row `Table`, as the API server sends watch events to a
/// client that asked for tables.
pub(crate) fn table_event_object(
    info: &ResourceInfo,
    object: &Value,
    include: IncludeObject,
) -> Bytes {
    let meta = json!({"resourceVersion": object["metadata"]["resourceVersion"]});
    let t = table(info, std::slice::from_ref(object), meta, include);
    Bytes::from(serde_json::to_vec(&t).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_picks_the_first_acceptable_type() {
        let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate(Some(table), Read::List).unwrap(), Form::Table);
        assert_eq!(negotiate(Some(table), Read::Watch).unwrap(), Form::Table);
        assert_eq!(negotiate(None, Read::Get).unwrap(), Form::Full);
        assert_eq!(negotiate(Some("*/*"), Read::Get).unwrap(), Form::Full);
        let pb = "application/vnd.kubernetes.protobuf, application/json";
        assert_eq!(negotiate(Some(pb), Read::List).unwrap(), Form::Full);
        for only in [
            "application/vnd.kubernetes.protobuf",
            "text/html",
            "application/json;as=Table;v=v2;g=meta.k8s.io",
            "application/json;q=0",
        ] {
            assert_eq!(
                negotiate(Some(only), Read::List).unwrap_err().code,
                406,
                "{only}"
            );
        }
        assert_eq!(
            negotiate(Some("application/yaml"), Read::Get).unwrap(),
            Form::Yaml
        );
        assert_eq!(
            negotiate(Some("application/yaml"), Read::Watch)
                .unwrap_err()
                .code,
            406
        );
        let meta_list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        let meta = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        assert_eq!(
            negotiate(Some(meta_list), Read::List).unwrap(),
            Form::Metadata
        );
        assert_eq!(negotiate(Some(meta), Read::Get).unwrap(), Form::Metadata);
        assert_eq!(negotiate(Some(meta), Read::Watch).unwrap(), Form::Metadata);
        assert_eq!(negotiate(Some(meta), Read::List).unwrap_err().code, 406);
        assert_eq!(negotiate(Some(meta_list), Read::Get).unwrap_err().code, 406);
    }

    #[test]
    fn ages_print_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(312), "5m12s");
        assert_eq!(human_duration(45 * 60), "45m");
        assert_eq!(human_duration(5 * 3600 + 60 * 7), "5h7m");
        assert_eq!(human_duration(30 * 3600), "30h");
        assert_eq!(human_duration(3 * 86_400 + 3600), "3d1h");
        assert_eq!(human_duration(40 * 86_400), "40d");
    }

    fn row(group: &str, kind: &str, plural: &str, object: &Value, now: i64) -> Vec<Value> {
        use kinformer_core::{ApiResource, Scope};
        let info = ResourceInfo::new(ApiResource::new(
            group,
            "v1",
            kind,
            plural,
            Scope::Namespaced,
        ));
        let cells = cells(&info, object, now);
        assert_eq!(cells.len(), columns(&info).len(), "{plural}");
        cells
    }

    #[test]
    fn workload_node_and_service_rows_print_like_kubectl() {
        let now = 1_700_000_000;
        let created = "2023-11-14T22:13:20Z"; // now
        let node = json!({
            "metadata": {"name": "n1", "creationTimestamp": created, "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "addresses": [{"type": "InternalIP", "address": "172.18.0.2"}],
                "nodeInfo": {"kubeletVersion": "v1.34.1", "osImage": "Debian", "kernelVersion": "6.8", "containerRuntimeVersion": "containerd://2.1.3"}},
        });
        let cells = row("", "Node", "nodes", &node, now + 3 * 3600);
        assert_eq!(
            cells[..5],
            [
                json!("n1"),
                json!("Ready"),
                json!("control-plane"),
                json!("3h"),
                json!("v1.34.1")
            ]
        );
        assert_eq!(cells[5..7], [json!("172.18.0.2"), json!("<none>")]);

        let svc = json!({"metadata": {"name": "web"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.96.1.20", "selector": {"app": "web"},
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}]}, "status": {"loadBalancer": {}}});
        let cells = row("", "Service", "services", &svc, now);
        assert_eq!(
            cells[1..5],
            [
                json!("LoadBalancer"),
                json!("10.96.1.20"),
                json!("<pending>"),
                json!("80:30080/TCP")
            ]
        );
        assert_eq!(cells[6], json!("app=web"));

        let deploy = json!({"metadata": {"name": "web"}, "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.27.3"}]}}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
        let cells = row("apps", "Deployment", "deployments", &deploy, now);
        assert_eq!(cells[1..4], [json!("2/3"), json!(3), json!(2)]);
        assert_eq!(
            cells[5..],
            [json!("web"), json!("nginx:1.27.3"), json!("app=web")]
        );

        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Running",
            "containerStatuses": [{"ready": true, "restartCount": 2, "lastState": {"terminated": {"finishedAt": "2023-11-14T20:13:20Z"}}}]}});
        let cells = row("", "Pod", "pods", &pod, now);
        assert_eq!(cells[3], json!("2 (120m ago)"));
    }
}
