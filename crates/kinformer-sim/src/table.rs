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
        _ => vec![name, age],
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
            let restarts: i64 = statuses.map_or(0, |s| {
                s.iter()
                    .map(|c| c["restartCount"].as_i64().unwrap_or(0))
                    .sum()
            });
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
                json!(restarts.to_string()),
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
}
