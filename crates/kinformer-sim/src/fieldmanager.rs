//! The field manager: `metadata.managedFields` as the API server writes it on every create,
//! update and patch (`apimachinery/pkg/util/managedfields`, `endpoints/handlers/rest.go`).
//!
//! Each entry names a manager (the request's `fieldManager`, or its `User-Agent` up to the first
//! `/`), the operation (`Update`; server-side apply is refused by the sim), the API version, the
//! subresource (`status` for writes to `/status`), the time, and the set of fields it owns in the
//! `FieldsV1` form. A write gives its manager the fields it added or changed and takes them away
//! from every other manager; a manager left owning nothing loses its entry. A write that changes
//! nothing leaves `managedFields` as it was, timestamps included.

use kinformer_core::Status;
use serde_json::{Map, Value};

use crate::fields;
use crate::store::{ResourceInfo, status};

/// The longest manager name the API accepts (`FieldManagerMaxLength`).
const MAX_MANAGER: usize = 128;

/// Who writes, as the request names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Manager {
    name: String,
    subresource: Option<&'static str>,
}

impl Manager {
    /// The manager of a request: its `fieldManager` (400 if too long or unprintable), else the
    /// printable part of its `User-Agent` before the first `/`, cut to 128 bytes.
    pub(crate) fn of_request(
        field_manager: Option<&str>,
        user_agent: Option<&str>,
        status_write: bool,
        options: &str,
    ) -> Result<Self, Status> {
        let invalid = |detail: String| {
            status(
                422,
                "Invalid",
                format!("{options}.meta.k8s.io \"\" is invalid: fieldManager: {detail}"),
            )
        };
        let name = match field_manager.filter(|m| !m.is_empty()) {
            Some(m) if m.len() > MAX_MANAGER => {
                return Err(invalid(format!(
                    "Too long: may not be more than {MAX_MANAGER} bytes"
                )));
            }
            Some(m) if m.chars().any(|c| c.is_control()) => {
                return Err(invalid(format!(
                    "Invalid value: {m:?}: must only contain printable characters"
                )));
            }
            Some(m) => m.to_owned(),
            None => {
                let prefix = user_agent.unwrap_or_default().split('/').next();
                let mut out = String::new();
                for c in prefix.unwrap_or_default().chars() {
                    if c.is_control() {
                        continue;
                    }
                    if out.len() + c.len_utf8() > MAX_MANAGER {
                        break;
                    }
                    out.push(c);
                }
                out
            }
        };
        Ok(Self {
            name,
            subresource: status_write.then_some("status"),
        })
    }

    fn as_fields(&self) -> fields::Manager<'_> {
        fields::Manager {
            name: &self.name,
            subresource: self.subresource,
        }
    }
}

/// Records a create by `manager`: it owns every field it sent (and the defaults applied to
/// them); managed fields sent with the object are replaced.
pub(crate) fn on_create(info: &ResourceInfo, manager: &Manager, object: &mut Value) {
    let view = owned_view(info, manager, object);
    let managed = fields::record(
        &Value::Array(Vec::new()),
        manager.as_fields(),
        &api_version(info),
        &crate::store::now_rfc3339(),
        &Value::Object(Map::new()),
        &view,
    );
    set_managed(object, managed.unwrap_or(Value::Null));
}

/// Records an update (or patch) of `old` into `new` by `manager`.
pub(crate) fn on_update(info: &ResourceInfo, manager: &Manager, old: &Value, new: &mut Value) {
    let sent = new["metadata"].get("managedFields").cloned();
    let stored = old["metadata"]
        .get("managedFields")
        .cloned()
        .unwrap_or(Value::Null);
    // An empty or missing list keeps what is stored; `[{}]` resets it; anything else replaces
    // it (a client may rewrite ownership) as long as it parses.
    let base = match sent {
        Some(Value::Array(items)) if items.len() == 1 && items[0] == Value::Object(Map::new()) => {
            Value::Array(Vec::new())
        }
        Some(Value::Array(items)) if !items.is_empty() && items.iter().all(valid_entry) => {
            Value::Array(items)
        }
        _ => stored.clone(),
    };
    set_managed(new, base.clone());
    if same_but_bookkeeping(old, new) {
        // Nothing changed: no new timestamps, no write.
        set_managed(new, stored);
        return;
    }
    let recorded = fields::record(
        &base,
        manager.as_fields(),
        &api_version(info),
        &crate::store::now_rfc3339(),
        &owned_view(info, manager, old),
        &owned_view(info, manager, new),
    );
    if let Some(managed) = recorded {
        set_managed(new, managed);
    }
}

fn valid_entry(e: &Value) -> bool {
    e.get("manager").is_none_or(Value::is_string)
        && e.get("operation").is_some_and(Value::is_string)
        && e.get("fieldsV1").is_none_or(Value::is_object)
}

fn api_version(info: &ResourceInfo) -> String {
    crate::validation::group_version(&info.api)
}

fn set_managed(object: &mut Value, managed: Value) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    match managed {
        Value::Array(a) if a.is_empty() => {
            meta.remove("managedFields");
        }
        Value::Null => {
            meta.remove("managedFields");
        }
        m => {
            meta.insert("managedFields".into(), m);
        }
    }
}

/// Whether `a` and `b` differ at most in `managedFields` and `resourceVersion`, compared in
/// place (an update compares every write this way).
fn same_but_bookkeeping(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let skip = |k: &str| k == "managedFields" || k == "resourceVersion";
    let same_meta = |x: Option<&Value>, y: Option<&Value>| match (
        x.and_then(Value::as_object),
        y.and_then(Value::as_object),
    ) {
        (Some(x), Some(y)) => {
            x.iter().filter(|(k, _)| !skip(k)).count() == y.iter().filter(|(k, _)| !skip(k)).count()
                && x.iter()
                    .filter(|(k, _)| !skip(k))
                    .all(|(k, v)| y.get(k) == Some(v))
        }
        _ => x == y,
    };
    a.len() == b.len()
        && a.iter().all(|(k, v)| match k.as_str() {
            "metadata" => same_meta(Some(v), b.get(k)),
            _ => b.get(k) == Some(v),
        })
}

/// What a write by `manager` can own: a kind with a status subresource splits ownership between
/// writes to the object (everything but the status) and to `/status` (the status only), as the
/// strategies' reset fields do; the server's own metadata is left out by the comparison
/// (`fieldmanager/internal/stripmeta.go`).
fn owned_view(info: &ResourceInfo, manager: &Manager, object: &Value) -> Value {
    let mut o = object.clone();
    if info.status_subresource
        && let Some(map) = o.as_object_mut()
    {
        if manager.subresource.is_some() {
            map.retain(|k, _| k == "status");
        } else {
            map.remove("status");
        }
    }
    if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in ["deletionTimestamp", "deletionGracePeriodSeconds"] {
            meta.remove(k);
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinformer_core::{ApiResource, Scope};
    use serde_json::json;

    fn pods() -> ResourceInfo {
        ResourceInfo::new(ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced))
    }

    fn manager(name: &str, status: bool) -> Manager {
        Manager::of_request(Some(name), None, status, "UpdateOptions").unwrap()
    }

    fn entry<'a>(object: &'a Value, name: &str) -> Option<&'a Value> {
        object["metadata"]["managedFields"]
            .as_array()?
            .iter()
            .find(|e| e["manager"] == name)
    }

    #[test]
    fn the_manager_is_named_by_the_request_or_its_user_agent() {
        let m = Manager::of_request(
            None,
            Some("kubectl/v1.33.0 (linux/amd64)"),
            false,
            "CreateOptions",
        )
        .unwrap();
        assert_eq!(m.name, "kubectl");
        let m = Manager::of_request(Some(""), Some("a\u{7}b/1"), true, "UpdateOptions").unwrap();
        assert_eq!((m.name.as_str(), m.subresource), ("ab", Some("status")));
        let long = "x".repeat(129);
        assert_eq!(
            Manager::of_request(Some(&long), None, false, "CreateOptions")
                .unwrap_err()
                .code,
            422
        );
        let m = Manager::of_request(None, Some(&long), false, "CreateOptions").unwrap();
        assert_eq!(m.name.len(), 128);
    }

    #[test]
    fn a_create_owns_what_it_sent_but_the_status_and_the_server_s_metadata() {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "uid": "u", "labels": {"app": "a"}, "finalizers": ["x/y"]},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending"}
        });
        on_create(&pods(), &manager("kubectl-create", false), &mut pod);
        let managed = pod["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(managed.len(), 1);
        let e = &managed[0];
        assert_eq!(
            (
                &e["manager"],
                &e["operation"],
                &e["apiVersion"],
                &e["fieldsType"]
            ),
            (
                &json!("kubectl-create"),
                &json!("Update"),
                &json!("v1"),
                &json!("FieldsV1")
            )
        );
        assert!(e.get("subresource").is_none());
        let fields = &e["fieldsV1"];
        assert!(
            fields["f:metadata"]["f:labels"]["f:app"].is_object(),
            "{fields}"
        );
        assert!(
            fields["f:metadata"]["f:finalizers"]["v:\"x/y\""].is_object(),
            "{fields}"
        );
        assert!(
            fields["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["f:image"].is_object(),
            "{fields}"
        );
        assert!(fields["f:metadata"].get("f:uid").is_none(), "{fields}");
        assert!(fields.get("f:status").is_none(), "{fields}");
    }

    #[test]
    fn an_update_moves_the_fields_it_changes_and_a_no_op_changes_nothing() {
        let info = pods();
        let mut v1 =
            json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "1"}}, "spec": {"x": 1}});
        on_create(&info, &manager("creator", false), &mut v1);
        let mut v2 = v1.clone();
        v2["metadata"]["labels"]["b"] = json!("2");
        v2["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        on_update(&info, &manager("editor", false), &v1, &mut v2);
        let editor = &entry(&v2, "editor").unwrap()["fieldsV1"];
        assert_eq!(editor, &json!({"f:metadata": {"f:labels": {"f:b": {}}}}));
        let creator = &entry(&v2, "creator").unwrap()["fieldsV1"];
        assert!(
            creator["f:metadata"]["f:labels"].get("f:b").is_none(),
            "{creator}"
        );
        assert!(creator["f:spec"]["f:x"].is_object(), "{creator}");

        // A status write gets an entry of its own, owning only the status.
        let mut v3 = v2.clone();
        v3["status"] = json!({"phase": "Running"});
        on_update(&info, &manager("kubelet", true), &v2, &mut v3);
        let kubelet = entry(&v3, "kubelet").unwrap();
        assert_eq!(kubelet["subresource"], "status");
        assert_eq!(kubelet["fieldsV1"], json!({"f:status": {"f:phase": {}}}));

        let mut same = v3.clone();
        on_update(&info, &manager("other", false), &v3, &mut same);
        assert_eq!(same, v3);

        // `[{}]` resets the list: only the writer's entry is left.
        let mut v4 = v3.clone();
        v4["spec"]["x"] = json!(2);
        v4["metadata"]["managedFields"] = json!([{}]);
        on_update(&info, &manager("editor", false), &v3, &mut v4);
        let managers: Vec<&str> = v4["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, ["editor"]);
    }
}
