//! Content negotiation of responses (the `Accept` header) and the `Table` form `kubectl get`
//! prints from.

use bytes::Bytes;
use kinformer_core::{INITIAL_EVENTS_END_ANNOTATION, Status};
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
    /// Full objects as protobuf (`application/vnd.kubernetes.protobuf`, watches framed with
    /// `;stream=watch`): built-in kinds only.
    Protobuf,
}

/// What a request reads: one object, a collection, or a watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    Get,
    List,
    Watch,
}

/// Picks the first acceptable media type of an `Accept` header, as the API server does. JSON and
/// YAML are served for every resource; protobuf only where `protobuf` says the kind has an
/// encoding (built-in kinds: custom resources have none, and their server does not list it),
/// and only for full objects (the sim has no protobuf `Table` or `PartialObjectMetadata`, so
/// those fall through to the next type listed, or to 406, as on a server without them). `Err`
/// is the 406 NotAcceptable a server answers when nothing listed is acceptable.
pub(crate) fn negotiate(accept: Option<&str>, read: Read, protobuf: bool) -> Result<Form, Status> {
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
        if mime == "application/vnd.kubernetes.protobuf" {
            if protobuf && !media.contains("as=") {
                return Ok(Form::Protobuf);
            }
            continue;
        }
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
            // Negotiation accepts either metadata form on every endpoint (the request scope's
            // `AllowsMediaTypeTransform`); the transform then refuses the wrong one with 406
            // rather than falling back to the next media type (`endpoints/handlers/response.go`).
            (Some("PartialObjectMetadataList"), _) if meta_group => {
                return Err(not_acceptable(
                    "you requested PartialObjectMetadataList, but the requested object is not a list",
                ));
            }
            (Some("PartialObjectMetadata"), Read::List) if meta_group => {
                return Err(not_acceptable(
                    "you requested PartialObjectMetadata, but the requested object is a list",
                ));
            }
            _ => None,
        };
        if let Some(f) = form {
            return Ok(f);
        }
    }
    let accepted = if protobuf {
        "application/json, application/yaml, application/vnd.kubernetes.protobuf"
    } else {
        "application/json, application/yaml"
    };
    Err(status(
        406,
        "NotAcceptable",
        format!("only the following media types are accepted: {accepted}"),
    ))
}

/// The negotiation of a write's answer (create, update, patch, delete), which the sim writes as
/// JSON only: `Ok` when `accept` lists JSON (or a wildcard) for a full object, `Err` the 406 a
/// server without the other serializers answers before it reads the body, as the write
/// handlers negotiate first (`endpoints/handlers/create.go`). A real server also answers writes
/// in YAML, protobuf and as a `Table`; a client that lists only those is refused here, never
/// answered in JSON it did not ask for.
pub(crate) fn negotiate_write(accept: Option<&str>) -> Result<(), Status> {
    let Some(accept) = accept.map(str::trim).filter(|a| !a.is_empty()) else {
        return Ok(());
    };
    let json = accept.split(',').any(|media| {
        let mut parts = media.split(';').map(str::trim);
        let mime = parts.next().unwrap_or_default().to_ascii_lowercase();
        let mut q = 1.0_f32;
        let mut transform = false;
        for p in parts {
            match p.split_once('=') {
                Some(("q", x)) => q = x.trim().parse().unwrap_or(1.0),
                Some(("as", _)) => transform = true,
                _ => {}
            }
        }
        q > 0.0
            && !transform
            && matches!(mime.as_str(), "application/json" | "application/*" | "*/*")
    });
    if json {
        Ok(())
    } else {
        Err(status(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json",
        ))
    }
}

fn not_acceptable(message: &str) -> Status {
    status(406, "NotAcceptable", message)
}

/// `2d3h`, `5m12s`, `42s`: how the API server prints an age in a table's AGE column
/// (`apimachinery/pkg/util/duration.HumanDuration`), for clients that print their own tables the
/// way kubectl shows the server's. A negative age counts as 0.
///
/// ```
/// use kinformer_sim::human_duration;
///
/// assert_eq!(human_duration(312), "5m12s");
/// assert_eq!(human_duration(4 * 86_400 + 11 * 3600), "4d11h");
/// assert_eq!(human_duration(30 * 86_400), "30d");
/// ```
pub fn human_duration(secs: i64) -> String {
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

/// The age cell (`translateTimestampSince`): `<unknown>` without a creation timestamp, as for
/// the empty objects of bookmarks.
fn age(object: &Value, now: i64) -> String {
    object["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map_or_else(
            || "<unknown>".to_owned(),
            |t| human_duration(now - t.as_second()),
        )
}

fn column(name: &str, r#type: &str, format: &str, description: &str, priority: u8) -> Value {
    json!({"name": name, "type": r#type, "format": format, "description": description, "priority": priority})
}

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// The column definitions of a resource's table.
fn columns_of(info: &ResourceInfo) -> Vec<Value> {
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

/// The `Ready`, `Status` and `Restarts` cells of a pod, as kubectl prints them.
#[derive(Debug, PartialEq, Eq)]
struct PodCells {
    /// `ready/total`: containers running and ready (plus started sidecars that are ready) over
    /// containers (plus sidecars).
    ready: String,
    /// The phase, the pod's reason, or what its init containers or containers are doing.
    status: String,
    /// The count, and how long ago the last restart was (`3 (5m ago)`).
    restarts: String,
}

fn items(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

fn non_empty(v: &Value) -> Option<&str> {
    v.as_str().filter(|s| !s.is_empty())
}

/// A container state (`waiting`, `running`, `terminated`), when the status has it.
fn state<'a>(c: &'a Value, which: &str) -> Option<&'a Value> {
    c["state"].get(which).filter(|s| s.is_object())
}

/// When a container's previous run ended (`lastState.terminated.finishedAt`), in seconds.
fn last_finished(c: &Value) -> Option<i64> {
    c["lastState"]
        .get("terminated")
        .filter(|t| t.is_object())
        .and_then(|t| t["finishedAt"].as_str())
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map(|t| t.as_second())
}

/// `Signal:N` when the container was killed by a signal, else `ExitCode:N`.
fn exit_reason(terminated: &Value) -> String {
    match count(&terminated["signal"]) {
        0 => format!("ExitCode:{}", count(&terminated["exitCode"])),
        signal => format!("Signal:{signal}"),
    }
}

/// The pod cells exactly as the API server's pod printer computes them
/// (`pkg/printers/internalversion/printers.go`, `printPod`): the reason starts as the phase (or
/// `status.reason`, or `SchedulingGated`); the first init container that has not succeeded says
/// `Init:<reason>`, `Init:Signal:N`, `Init:ExitCode:N` or `Init:i/n`; once initialised, the
/// containers from last to first: a waiting or terminated reason, else `Signal:N` / `ExitCode:N`
/// (`Completed` with a container still running and ready reads `Running`, or `NotReady` without
/// the Ready condition); a deleted pod is `Terminating` unless its phase is terminal (`Unknown`
/// for a pod whose node was lost).
fn pod_cells(pod: &Value, now: i64) -> PodCells {
    let spec = &pod["spec"];
    let st = &pod["status"];
    let conditions = items(&st["conditions"]);
    let phase = st["phase"].as_str().unwrap_or_default();
    let mut reason = non_empty(&st["reason"]).unwrap_or(phase).to_owned();
    if conditions
        .iter()
        .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated")
    {
        reason = "SchedulingGated".to_owned();
    }

    let init_specs = items(&spec["initContainers"]);
    // A restartable init container is a sidecar: counted with the containers.
    let sidecar = |name: &Value| {
        init_specs
            .iter()
            .rev()
            .find(|c| c["name"] == *name)
            .is_some_and(|c| c["restartPolicy"] == "Always")
    };
    let total = items(&spec["containers"]).len()
        + init_specs
            .iter()
            .filter(|c| c["restartPolicy"] == "Always")
            .count();
    let mut ready = 0;
    let (mut restarts, mut last) = (0, None);
    let (mut sidecar_restarts, mut sidecar_last) = (0, None);
    let mut initializing = false;
    for (i, c) in items(&st["initContainerStatuses"]).iter().enumerate() {
        let n = count(&c["restartCount"]);
        restarts += n;
        last = last.max(last_finished(c));
        let is_sidecar = sidecar(&c["name"]);
        if is_sidecar {
            sidecar_restarts += n;
            sidecar_last = sidecar_last.max(last_finished(c));
        }
        let terminated = state(c, "terminated");
        if terminated.is_some_and(|t| count(&t["exitCode"]) == 0) {
            continue;
        }
        if is_sidecar && c["started"] == true {
            if c["ready"] == true {
                ready += 1;
            }
            continue;
        }
        let waiting = state(c, "waiting")
            .and_then(|w| non_empty(&w["reason"]))
            .filter(|r| *r != "PodInitializing");
        reason = match (terminated, waiting) {
            (Some(t), _) => match non_empty(&t["reason"]) {
                Some(r) => format!("Init:{r}"),
                None => format!("Init:{}", exit_reason(t)),
            },
            (None, Some(w)) => format!("Init:{w}"),
            (None, None) => format!("Init:{i}/{}", init_specs.len()),
        };
        initializing = true;
        break;
    }

    // `isPodInitializedConditionTrue`: the first Initialized condition decides.
    let initialized = conditions
        .iter()
        .find(|c| c["type"] == "Initialized")
        .is_some_and(|c| c["status"] == "True");
    if !initializing || initialized {
        restarts = sidecar_restarts;
        last = sidecar_last;
        let mut has_running = false;
        for c in items(&st["containerStatuses"]).iter().rev() {
            restarts += count(&c["restartCount"]);
            last = last.max(last_finished(c));
            let terminated = state(c, "terminated");
            if let Some(r) = state(c, "waiting").and_then(|w| non_empty(&w["reason"])) {
                r.clone_into(&mut reason);
            } else if let Some(t) = terminated {
                reason = non_empty(&t["reason"]).map_or_else(|| exit_reason(t), str::to_owned);
            } else if c["ready"] == true && state(c, "running").is_some() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = conditions
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.to_owned();
        }
    }

    let deleting = pod["metadata"]["deletionTimestamp"].is_string();
    if deleting && st["reason"] == "NodeLost" {
        reason = "Unknown".to_owned();
    } else if deleting && !matches!(phase, "Succeeded" | "Failed") {
        reason = "Terminating".to_owned();
    }

    let restarts = match last {
        Some(at) if restarts != 0 => format!("{restarts} ({} ago)", human_duration(now - at)),
        _ => restarts.to_string(),
    };
    PodCells {
        ready: format!("{ready}/{total}"),
        status: reason,
        restarts,
    }
}

/// The row conditions of a finished pod (`podSuccessConditions`, `podFailedConditions`).
fn pod_row_conditions(pod: &Value) -> Option<Value> {
    let (reason, message) = match pod["status"]["phase"].as_str()? {
        "Succeeded" => ("Succeeded", "The pod has completed successfully."),
        "Failed" => ("Failed", "The pod failed."),
        _ => return None,
    };
    Some(json!([{"type": "Completed", "status": "True", "reason": reason, "message": message}]))
}

/// The readiness gates cell: `<none>`, or how many of the gates' conditions are true.
fn readiness_gates(pod: &Value) -> String {
    let gates = items(&pod["spec"]["readinessGates"]);
    if gates.is_empty() {
        return "<none>".to_owned();
    }
    let conditions = items(&pod["status"]["conditions"]);
    let met = gates
        .iter()
        .filter(|g| {
            conditions
                .iter()
                .find(|c| c["type"] == g["conditionType"])
                .is_some_and(|c| c["status"] == "True")
        })
        .count();
    format!("{met}/{}", gates.len())
}

fn cells(info: &ResourceInfo, o: &Value, now: i64) -> Vec<Value> {
    let name = json!(o["metadata"]["name"].as_str().unwrap_or_default());
    match (info.api.group.as_str(), info.api.plural.as_str()) {
        ("", "pods") => {
            let PodCells {
                ready,
                status,
                restarts,
            } = pod_cells(o, now);
            let none = || json!("<none>");
            let text = |v: &Value| non_empty(v).map_or_else(none, |s| json!(s));
            vec![
                name,
                json!(ready),
                json!(status),
                json!(restarts),
                json!(age(o, now)),
                text(&o["status"]["podIPs"][0]["ip"]),
                text(&o["spec"]["nodeName"]),
                text(&o["status"]["nominatedNodeName"]),
                json!(readiness_gates(o)),
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
    table_with(info, objects, list_meta, include, true)
}

/// Whether an object is the bookmark that ends a watch's initial events.
fn ends_initial_events(object: &Value) -> bool {
    object["metadata"]["annotations"][INITIAL_EVENTS_END_ANNOTATION] == "true"
}

/// A `Table`, with its column definitions or (`columns: false`, as later events of a watch
/// carry it) `"columnDefinitions": null`.
fn table_with(
    info: &ResourceInfo,
    objects: &[Value],
    list_meta: Value,
    include: IncludeObject,
    columns: bool,
) -> Value {
    let now = jiff::Timestamp::now().as_second();
    let pods = info.api.group.is_empty() && info.api.plural == "pods";
    let rows: Vec<Value> = objects
        .iter()
        .map(|v| {
            let mut row = json!({"cells": cells(info, v, now)});
            if pods && let Some(c) = pod_row_conditions(v) {
                row["conditions"] = c;
            }
            // `asTable` keeps the metadata of the bookmark that ends the initial events even
            // when the request asked for no object, so that the client sees the annotation.
            let include = match include {
                IncludeObject::None if ends_initial_events(v) => IncludeObject::Metadata,
                other => other,
            };
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
        "columnDefinitions": if columns { Value::Array(columns_of(info)) } else { Value::Null },
        "rows": rows,
    })
}

/// A watch event's object as a one-row `Table`, as the API server sends watch events (and
/// bookmarks) to a client that asked for tables. Only the first event of a stream carries the
/// column definitions: the watch's encoder sets `NoHeaders` once it has encoded one object
/// (`staging/src/k8s.io/apiserver/pkg/endpoints/handlers/response.go`, `watchEmbeddedEncoder`),
/// and the table generator then leaves them out.
pub(crate) fn table_event_object(
    info: &ResourceInfo,
    object: &Value,
    include: IncludeObject,
    columns: bool,
) -> Bytes {
    let meta = json!({"resourceVersion": object["metadata"]["resourceVersion"]});
    let t = table_with(info, std::slice::from_ref(object), meta, include, columns);
    Bytes::from(serde_json::to_vec(&t).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_picks_the_first_acceptable_type() {
        let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(
            negotiate(Some(table), Read::List, false).unwrap(),
            Form::Table
        );
        assert_eq!(
            negotiate(Some(table), Read::Watch, false).unwrap(),
            Form::Table
        );
        assert_eq!(negotiate(None, Read::Get, false).unwrap(), Form::Full);
        assert_eq!(
            negotiate(Some("*/*"), Read::Get, false).unwrap(),
            Form::Full
        );
        let pb = "application/vnd.kubernetes.protobuf, application/json";
        assert_eq!(negotiate(Some(pb), Read::List, false).unwrap(), Form::Full);
        for only in [
            "application/vnd.kubernetes.protobuf",
            "text/html",
            "application/json;as=Table;v=v2;g=meta.k8s.io",
            "application/json;q=0",
        ] {
            assert_eq!(
                negotiate(Some(only), Read::List, false).unwrap_err().code,
                406,
                "{only}"
            );
        }
        assert_eq!(
            negotiate(Some("application/yaml"), Read::Get, false).unwrap(),
            Form::Yaml
        );
        assert_eq!(
            negotiate(Some("application/yaml"), Read::Watch, false)
                .unwrap_err()
                .code,
            406
        );
        let meta_list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        let meta = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        assert_eq!(
            negotiate(Some(meta_list), Read::List, false).unwrap(),
            Form::Metadata
        );
        assert_eq!(
            negotiate(Some(meta), Read::Get, false).unwrap(),
            Form::Metadata
        );
        assert_eq!(
            negotiate(Some(meta), Read::Watch, false).unwrap(),
            Form::Metadata
        );
        assert_eq!(
            negotiate(Some(meta), Read::List, false).unwrap_err().code,
            406
        );
        assert_eq!(
            negotiate(Some(meta_list), Read::Get, false)
                .unwrap_err()
                .code,
            406
        );
    }

    #[test]
    fn protobuf_is_picked_for_kinds_that_have_it_and_falls_through_for_the_rest() {
        let pb = "application/vnd.kubernetes.protobuf, application/json";
        let only = "application/vnd.kubernetes.protobuf";
        for read in [Read::Get, Read::List, Read::Watch] {
            assert_eq!(negotiate(Some(pb), read, true).unwrap(), Form::Protobuf);
            assert_eq!(negotiate(Some(only), read, true).unwrap(), Form::Protobuf);
            // A custom resource: JSON where listed, else 406 without protobuf among the types.
            assert_eq!(negotiate(Some(pb), read, false).unwrap(), Form::Full);
            let refused = negotiate(Some(only), read, false).unwrap_err();
            assert_eq!(refused.code, 406);
            assert!(!refused.message.contains("protobuf"), "{}", refused.message);
        }
        // JSON first wins; a protobuf Table is not served, so the JSON Table after it is.
        let json_first = "application/json, application/vnd.kubernetes.protobuf";
        assert_eq!(
            negotiate(Some(json_first), Read::List, true).unwrap(),
            Form::Full
        );
        let tables = "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json;as=Table;v=v1;g=meta.k8s.io";
        assert_eq!(
            negotiate(Some(tables), Read::List, true).unwrap(),
            Form::Table
        );
        let refused = negotiate(Some("text/html"), Read::List, true).unwrap_err();
        assert!(
            refused
                .message
                .contains("application/vnd.kubernetes.protobuf")
        );
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
        assert_eq!(cells.len(), columns_of(&info).len(), "{plural}");
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

    /// A container status in one of the states the kubelet writes.
    fn container(name: &str, state: Value, ready: bool, restarts: i64) -> Value {
        json!({"name": name, "ready": ready, "restartCount": restarts, "state": state, "lastState": {}})
    }

    fn running() -> Value {
        json!({"running": {"startedAt": "2023-11-14T20:00:00Z"}})
    }

    fn waiting(reason: &str) -> Value {
        json!({"waiting": {"reason": reason}})
    }

    fn terminated(reason: &str, exit_code: i64, signal: i64) -> Value {
        let mut t = json!({"exitCode": exit_code, "finishedAt": "2023-11-14T21:00:00Z"});
        if !reason.is_empty() {
            t["reason"] = json!(reason);
        }
        if signal != 0 {
            t["signal"] = json!(signal);
        }
        json!({"terminated": t})
    }

    fn condition(kind: &str, status: bool) -> Value {
        json!({"type": kind, "status": if status { "True" } else { "False" }})
    }

    #[test]
    fn pod_cells_follow_the_pod_printer() {
        let now = 1_700_000_000; // 2023-11-14T22:13:20Z
        let two = json!([{"name": "a"}, {"name": "b"}]);
        let one = json!([{"name": "a"}]);
        let crashed = json!({"name": "a", "ready": false, "restartCount": 3, "state": waiting("CrashLoopBackOff"),
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2023-11-14T22:08:20Z"}}});
        let sidecar = json!([{"name": "mesh", "restartPolicy": "Always"}, {"name": "setup"}]);
        // (what, spec or containers, status, metadata, expected READY, STATUS, RESTARTS)
        let cases: Vec<(&str, Value, Value, Value, [&str; 3])> = vec![
            (
                "running and ready",
                two.clone(),
                json!({"phase": "Running", "conditions": [condition("Ready", true)],
                "containerStatuses": [container("a", running(), true, 0), container("b", running(), true, 1)]}),
                json!({}),
                ["2/2", "Running", "1"],
            ),
            (
                "running, one container not ready",
                two.clone(),
                json!({"phase": "Running",
                "containerStatuses": [container("a", running(), true, 0), container("b", running(), false, 0)]}),
                json!({}),
                ["1/2", "Running", "0"],
            ),
            (
                "pending, unscheduled",
                one.clone(),
                json!({"phase": "Pending"}),
                json!({}),
                ["0/1", "Pending", "0"],
            ),
            (
                "scheduling gated",
                one.clone(),
                json!({"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
                json!({}),
                ["0/1", "SchedulingGated", "0"],
            ),
            (
                "creating",
                one.clone(),
                json!({"phase": "Pending",
                "containerStatuses": [container("a", waiting("ContainerCreating"), false, 0)]}),
                json!({}),
                ["0/1", "ContainerCreating", "0"],
            ),
            (
                "crash loop, with the last restart's age",
                one.clone(),
                json!({"phase": "Running",
                "containerStatuses": [crashed]}),
                json!({}),
                ["0/1", "CrashLoopBackOff", "3 (5m ago)"],
            ),
            (
                "the first container's reason wins",
                two.clone(),
                json!({"phase": "Pending",
                "containerStatuses": [container("a", waiting("ErrImagePull"), false, 0), container("b", waiting("ContainerCreating"), false, 0)]}),
                json!({}),
                ["0/2", "ErrImagePull", "0"],
            ),
            (
                "killed by a signal",
                one.clone(),
                json!({"phase": "Running",
                "containerStatuses": [container("a", terminated("", 137, 9), false, 0)]}),
                json!({}),
                ["0/1", "Signal:9", "0"],
            ),
            (
                "an exit code without a reason",
                one.clone(),
                json!({"phase": "Running",
                "containerStatuses": [container("a", terminated("", 2, 0), false, 0)]}),
                json!({}),
                ["0/1", "ExitCode:2", "0"],
            ),
            (
                "completed",
                two.clone(),
                json!({"phase": "Succeeded",
                "containerStatuses": [container("a", terminated("Completed", 0, 0), false, 0), container("b", terminated("Completed", 0, 0), false, 0)]}),
                json!({}),
                ["0/2", "Completed", "0"],
            ),
            (
                "completed with a container still running, pod ready",
                two.clone(),
                json!({"phase": "Running", "conditions": [condition("Ready", true)],
                "containerStatuses": [container("a", terminated("Completed", 0, 0), false, 0), container("b", running(), true, 0)]}),
                json!({}),
                ["1/2", "Running", "0"],
            ),
            (
                "completed with a container still running, pod not ready",
                two.clone(),
                json!({"phase": "Running", "conditions": [condition("Ready", false)],
                "containerStatuses": [container("a", terminated("Completed", 0, 0), false, 0), container("b", running(), true, 0)]}),
                json!({}),
                ["1/2", "NotReady", "0"],
            ),
            (
                "evicted, its container lost",
                one.clone(),
                json!({"phase": "Failed", "reason": "Evicted",
                "containerStatuses": [container("a", terminated("ContainerStatusUnknown", 137, 0), false, 2)]}),
                json!({}),
                ["0/1", "ContainerStatusUnknown", "2"],
            ),
            (
                "evicted before its containers reported",
                one.clone(),
                json!({"phase": "Failed", "reason": "Evicted"}),
                json!({}),
                ["0/1", "Evicted", "0"],
            ),
            (
                "terminating",
                one.clone(),
                json!({"phase": "Running", "containerStatuses": [container("a", running(), true, 0)]}),
                json!({"deletionTimestamp": "2023-11-14T22:13:00Z"}),
                ["1/1", "Terminating", "0"],
            ),
            (
                "a finished pod being deleted keeps its status",
                one.clone(),
                json!({"phase": "Succeeded",
                "containerStatuses": [container("a", terminated("Completed", 0, 0), false, 0)]}),
                json!({"deletionTimestamp": "2023-11-14T22:13:00Z"}),
                ["0/1", "Completed", "0"],
            ),
            (
                "node lost",
                one.clone(),
                json!({"phase": "Running", "reason": "NodeLost",
                "containerStatuses": [container("a", running(), true, 0)]}),
                json!({"deletionTimestamp": "2023-11-14T22:13:00Z"}),
                ["1/1", "Unknown", "0"],
            ),
            (
                "waiting for the first init container",
                json!({"initContainers": [{"name": "setup"}], "containers": [{"name": "a"}]}),
                json!({"phase": "Pending", "conditions": [condition("Initialized", false)],
                    "initContainerStatuses": [container("setup", waiting("PodInitializing"), false, 0)],
                    "containerStatuses": [container("a", waiting("PodInitializing"), false, 0)]}),
                json!({}),
                ["0/1", "Init:0/1", "0"],
            ),
            (
                "the second init container running",
                json!({"initContainers": [{"name": "s1"}, {"name": "s2"}], "containers": [{"name": "a"}]}),
                json!({"phase": "Pending", "initContainerStatuses": [container("s1", terminated("Completed", 0, 0), false, 0), container("s2", running(), false, 0)],
                    "containerStatuses": [container("a", waiting("PodInitializing"), false, 5)]}),
                json!({}),
                ["0/1", "Init:1/2", "0"],
            ),
            (
                "an init container crash-looping; only init restarts count",
                json!({"initContainers": [{"name": "setup"}], "containers": [{"name": "a"}]}),
                json!({"phase": "Pending", "initContainerStatuses": [container("setup", waiting("CrashLoopBackOff"), false, 4)],
                    "containerStatuses": [container("a", waiting("PodInitializing"), false, 7)]}),
                json!({}),
                ["0/1", "Init:CrashLoopBackOff", "4"],
            ),
            (
                "an init container failed",
                json!({"initContainers": [{"name": "setup"}], "containers": [{"name": "a"}]}),
                json!({"phase": "Failed", "initContainerStatuses": [container("setup", terminated("Error", 1, 0), false, 0)]}),
                json!({}),
                ["0/1", "Init:Error", "0"],
            ),
            (
                "an init container exited without a reason",
                json!({"initContainers": [{"name": "setup"}], "containers": [{"name": "a"}]}),
                json!({"phase": "Pending", "initContainerStatuses": [container("setup", terminated("", 3, 0), false, 0)]}),
                json!({}),
                ["0/1", "Init:ExitCode:3", "0"],
            ),
            (
                "an init container killed by a signal",
                json!({"initContainers": [{"name": "setup"}], "containers": [{"name": "a"}]}),
                json!({"phase": "Pending", "initContainerStatuses": [container("setup", terminated("", 143, 15), false, 0)]}),
                json!({}),
                ["0/1", "Init:Signal:15", "0"],
            ),
            (
                "an init container that exited 0 has succeeded, whatever its signal",
                json!({"initContainers": [{"name": "setup"}], "containers": [{"name": "a"}]}),
                json!({"phase": "Pending", "initContainerStatuses": [container("setup", terminated("", 0, 15), false, 0)]}),
                json!({}),
                ["0/1", "Pending", "0"],
            ),
            (
                "a started sidecar counts with the containers",
                json!({"initContainers": sidecar, "containers": [{"name": "a"}]}),
                json!({"phase": "Running", "conditions": [condition("Initialized", true), condition("Ready", true)],
                    "initContainerStatuses": [{"name": "mesh", "started": true, "ready": true, "restartCount": 1, "state": running()},
                        container("setup", terminated("Completed", 0, 0), false, 0)],
                    "containerStatuses": [container("a", running(), true, 2)]}),
                json!({}),
                ["2/2", "Running", "3"],
            ),
            (
                "the empty object of a bookmark",
                json!({"containers": null}),
                json!({}),
                json!({"resourceVersion": "9", "creationTimestamp": null}),
                ["0/0", "", "0"],
            ),
        ];
        for (what, spec, status, metadata, [ready, status_cell, restarts]) in cases {
            // A bare list is the pod's containers.
            let spec = if spec.is_array() {
                json!({"containers": spec})
            } else {
                spec
            };
            let pod = json!({"metadata": metadata, "spec": spec, "status": status});
            let got = pod_cells(&pod, now);
            assert_eq!(
                [
                    got.ready.as_str(),
                    got.status.as_str(),
                    got.restarts.as_str()
                ],
                [ready, status_cell, restarts],
                "{what}"
            );
        }
    }

    #[test]
    fn finished_pods_rows_carry_the_completed_condition() {
        let succeeded = json!({"status": {"phase": "Succeeded"}});
        assert_eq!(
            pod_row_conditions(&succeeded).unwrap()[0],
            json!({"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed successfully."})
        );
        let failed = json!({"status": {"phase": "Failed"}});
        assert_eq!(pod_row_conditions(&failed).unwrap()[0]["reason"], "Failed");
        assert_eq!(
            pod_row_conditions(&json!({"status": {"phase": "Running"}})),
            None
        );
        let gated = json!({"spec": {"readinessGates": [{"conditionType": "x"}, {"conditionType": "y"}]},
            "status": {"conditions": [condition("x", true), condition("y", false)]}});
        assert_eq!(readiness_gates(&gated), "1/2");
        assert_eq!(readiness_gates(&json!({})), "<none>");
    }
}
