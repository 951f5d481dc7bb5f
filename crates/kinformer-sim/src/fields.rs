//! `metadata.managedFields` as the API server's field manager records writes (the cluster
//! model's, and every write over HTTP), all of them `Update`s: what a write changed, as structured-merge-diff compares the object before and
//! after it (`f:` a field, `k:{"name":"app"}` a list item by its merge keys, `v:"x"` a member of
//! a set, `.` a field that is itself in the set as well as its children), and each manager's
//! entry, which takes the fields it changed from whoever had them and its time when it writes.
//!
//! The schema is the little of Kubernetes' that the model's objects need: which lists are
//! merged by which keys and which are atomic, which structs are atomic, and which fields are
//! structs that are never nil (so an object that adds fields under them does not own them).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

/// A set of fields, as `fieldsV1` encodes it: a tree of path elements (`f:name`, `k:{...}`,
/// `v:"x"`) whose nodes are in the set themselves, or lead to nodes that are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Fields {
    member: bool,
    children: BTreeMap<String, Fields>,
}

/// Who writes: a field manager and the subresource it writes through, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Manager<'a> {
    pub(crate) name: &'a str,
    pub(crate) subresource: Option<&'a str>,
}

impl Manager<'static> {
    pub(crate) const fn main(name: &'static str) -> Self {
        Self {
            name,
            subresource: None,
        }
    }

    pub(crate) const fn status(name: &'static str) -> Self {
        Self {
            name,
            subresource: Some("status"),
        }
    }
}

pub(crate) const CONTROLLER: Manager<'static> = Manager::main("kube-controller-manager");
pub(crate) const CONTROLLER_STATUS: Manager<'static> = Manager::status("kube-controller-manager");
pub(crate) const KUBELET: Manager<'static> = Manager::main("kubelet");
pub(crate) const KUBELET_STATUS: Manager<'static> = Manager::status("kubelet");
pub(crate) const SCHEDULER_STATUS: Manager<'static> = Manager::status("kube-scheduler");
pub(crate) const KUBEADM: Manager<'static> = Manager::main("kubeadm");
pub(crate) const APISERVER: Manager<'static> = Manager::main("kube-apiserver");
pub(crate) const CLIENT_SIDE_APPLY: Manager<'static> = Manager::main("kubectl-client-side-apply");
pub(crate) const KUBECTL_CREATE: Manager<'static> = Manager::main("kubectl-create");
pub(crate) const KUBECTL_SET: Manager<'static> = Manager::main("kubectl-set");
pub(crate) const KUBECTL_SCALE: Manager<'static> = Manager {
    name: "kubectl",
    subresource: Some("scale"),
};
pub(crate) const CLOUD_STATUS: Manager<'static> = Manager::status("cloud-controller-manager");

/// How a list merges (`listType` and `listMapKey` in k8s.io/api).
enum ListType {
    Atomic,
    Set,
    Map(&'static [&'static str]),
}

/// The list type of `field` of a map at `depth` whose own element is `parent`.
fn list_type(depth: usize, parent: &str, field: &str) -> ListType {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets" => ListType::Map(&["name"]),
        "volumeMounts" => ListType::Map(&["mountPath"]),
        // Node addresses; an EndpointSlice's are inside its atomic `endpoints`.
        "conditions" | "addresses" => ListType::Map(&["type"]),
        "podIPs" => ListType::Map(&["ip"]),
        "ownerReferences" => ListType::Map(&["uid"]),
        // A container's ports, then a service's; an EndpointSlice's are atomic.
        "ports" if parent.starts_with("k:") => ListType::Map(&["containerPort", "protocol"]),
        "ports" if depth == 1 && parent == "f:spec" => ListType::Map(&["port", "protocol"]),
        "finalizers" if parent == "f:metadata" => ListType::Set,
        "podCIDRs" => ListType::Set,
        _ => ListType::Atomic,
    }
}

/// Structs and maps the schema marks atomic (a label selector, a node selector, a service's
/// selector): owned whole.
fn atomic_map(field: &str) -> bool {
    matches!(
        field,
        "selector" | "requiredDuringSchedulingIgnoredDuringExecution" | "labelSelector"
    )
}

/// Fields that are never nil in the Go types (structs held by value, `containers`): an object
/// that did not set them still had them, so adding fields under them does not add them.
fn never_nil(field: &str) -> bool {
    matches!(
        field,
        "metadata"
            | "spec"
            | "status"
            | "template"
            | "strategy"
            | "updateStrategy"
            | "resources"
            | "nodeInfo"
            | "daemonEndpoints"
            | "kubeletEndpoint"
            | "loadBalancer"
            | "containers"
    )
}

/// What the field manager leaves out of every set (`stripMeta`): `field` of a map at `depth`
/// whose own element is `parent`.
fn stripped(depth: usize, parent: &str, field: &str) -> bool {
    match depth {
        0 => matches!(field, "apiVersion" | "kind"),
        1 if parent == "f:metadata" => matches!(
            field,
            "name"
                | "namespace"
                | "uid"
                | "resourceVersion"
                | "creationTimestamp"
                | "generation"
                | "managedFields"
                | "selfLink"
        ),
        _ => false,
    }
}

/// The `k:` element of a list item: its merge keys as compact JSON, in key order.
fn item_key(keys: &[&str], item: &Value) -> String {
    let key: Map<String, Value> = keys
        .iter()
        .filter_map(|k| item.get(*k).map(|v| ((*k).to_owned(), v.clone())))
        .collect();
    format!("k:{}", Value::Object(key))
}

/// Compares a map at `depth` (its own element `parent`) before and after a write: what changed
/// goes into `changed`, what went into `removed`, both the nodes of the map's path.
fn diff_map(
    depth: usize,
    parent: &str,
    old: Option<&Map<String, Value>>,
    new: &Map<String, Value>,
    changed: &mut Fields,
    removed: &mut Fields,
) {
    for (k, v) in new {
        if stripped(depth, parent, k) {
            continue;
        }
        let el = format!("f:{k}");
        let old = old.and_then(|o| o.get(k));
        // Nothing can go from under a field that was not there.
        let mut none = Fields::default();
        let r = if old.is_some() {
            removed.child(&el)
        } else {
            &mut none
        };
        diff_value(depth, parent, k, &el, old, v, changed.child(&el), r);
        changed.prune(&el);
        removed.prune(&el);
    }
    for k in old.into_iter().flat_map(Map::keys) {
        if !new.contains_key(k) && !stripped(depth, parent, k) {
            removed.child(&format!("f:{k}")).member = true;
        }
    }
}

/// Compares `field` (element `el`) of a map at `depth` (element `parent`).
#[allow(clippy::too_many_arguments)]
fn diff_value(
    depth: usize,
    parent: &str,
    field: &str,
    el: &str,
    old: Option<&Value>,
    new: &Value,
    changed: &mut Fields,
    removed: &mut Fields,
) {
    let leaf = |changed: &mut Fields, old: Option<&Value>, new: &Value| {
        changed.member |= old != Some(new);
    };
    match new {
        Value::Object(m) if !m.is_empty() && !atomic_map(field) => {
            let old = old.and_then(Value::as_object);
            changed.member |= old.is_none() && !never_nil(field);
            diff_map(depth + 1, el, old, m, changed, removed);
        }
        Value::Array(items) => match list_type(depth, parent, field) {
            ListType::Atomic => leaf(changed, old, new),
            ListType::Set => {
                let old = old.and_then(Value::as_array);
                changed.member |= old.is_none();
                for item in items {
                    if !old.is_some_and(|o| o.contains(item)) {
                        changed.child(&format!("v:{item}")).member = true;
                    }
                }
                for item in old.into_iter().flatten() {
                    if !items.contains(item) {
                        removed.child(&format!("v:{item}")).member = true;
                    }
                }
            }
            ListType::Map(keys) => {
                let old = old.and_then(Value::as_array);
                changed.member |= old.is_none() && !never_nil(field);
                let old_items: Vec<(String, &Value)> = old
                    .into_iter()
                    .flatten()
                    .map(|i| (item_key(keys, i), i))
                    .collect();
                let mut kept = BTreeSet::new();
                for item in items {
                    let key = item_key(keys, item);
                    let before = old_items.iter().find(|(k, _)| *k == key).map(|(_, i)| *i);
                    let mut none = Fields::default();
                    let c = changed.child(&key);
                    let r = if before.is_some() {
                        removed.child(&key)
                    } else {
                        &mut none
                    };
                    if field == "ownerReferences" {
                        // An owner reference is an atomic struct.
                        leaf(c, before, item);
                    } else {
                        c.member |= before.is_none();
                        if let Some(m) = item.as_object() {
                            diff_map(depth + 2, &key, before.and_then(Value::as_object), m, c, r);
                        }
                    }
                    changed.prune(&key);
                    removed.prune(&key);
                    kept.insert(key);
                }
                for (key, _) in old_items {
                    if !kept.contains(&key) {
                        removed.child(&key).member = true;
                    }
                }
            }
        },
        // Scalars, nulls, empty objects and atomic structs.
        _ => leaf(changed, old, new),
    }
}

impl Fields {
    /// What a write changed from `old` to `new`: the fields it set or changed, and those it
    /// removed (with everything under them).
    fn changed(old: &Value, new: &Value) -> (Self, Self) {
        let (mut changed, mut removed) = (Self::default(), Self::default());
        let empty = Map::new();
        diff_map(
            0,
            "",
            old.as_object(),
            new.as_object().unwrap_or(&empty),
            &mut changed,
            &mut removed,
        );
        (changed, removed)
    }

    fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    fn child(&mut self, el: &str) -> &mut Self {
        self.children.entry(el.to_owned()).or_default()
    }

    /// Drops the child `el` if it holds nothing.
    fn prune(&mut self, el: &str) {
        if self.children.get(el).is_some_and(Self::is_empty) {
            self.children.remove(el);
        }
    }

    fn union(&mut self, other: &Self) {
        self.member |= other.member;
        for (k, c) in &other.children {
            self.child(k).union(c);
        }
    }

    /// Removes the members of `other`.
    fn subtract(&mut self, other: &Self) {
        self.member &= !other.member;
        for (k, c) in &other.children {
            if let Some(mine) = self.children.get_mut(k) {
                mine.subtract(c);
                self.prune(k);
            }
        }
    }

    /// Removes the members of `other` and everything under them.
    fn remove_under(&mut self, other: &Self) {
        for (k, c) in &other.children {
            if c.member {
                self.children.remove(k);
            } else if let Some(mine) = self.children.get_mut(k) {
                mine.remove_under(c);
                self.prune(k);
            }
        }
    }

    fn from_json(fields: &Value) -> Self {
        fn node(v: &Value) -> Fields {
            let mut f = Fields::default();
            if let Some(m) = v.as_object() {
                f.member = m.is_empty();
                for (k, child) in m {
                    if k == "." {
                        f.member = true;
                    } else {
                        f.children.insert(k.clone(), node(child));
                    }
                }
            }
            f
        }
        let mut root = node(fields);
        root.member = false;
        root
    }

    /// The `fieldsV1` encoding.
    pub(crate) fn to_json(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), json!({}));
        }
        for (k, c) in &self.children {
            m.insert(k.clone(), c.to_json());
        }
        Value::Object(m)
    }

    /// Whether the set holds `path` (elements as `fieldsV1` names them).
    #[cfg(test)]
    pub(crate) fn has(&self, path: &[&str]) -> bool {
        let mut node = self;
        for el in path {
            match node.children.get(*el) {
                Some(c) => node = c,
                None => return false,
            }
        }
        node.member
    }

    /// The set of a `managedFields` entry.
    #[cfg(test)]
    pub(crate) fn of_entry(entry: &Value) -> Self {
        Self::from_json(&entry["fieldsV1"])
    }
}

/// Compares the map `old` at `depth` (element `parent`) with what merging the map `patch` into
/// it (RFC 7386) makes of it, looking only at what the patch touches.
fn diff_patch(
    depth: usize,
    parent: &str,
    old: Option<&Map<String, Value>>,
    patch: &Map<String, Value>,
    changed: &mut Fields,
    removed: &mut Fields,
) {
    for (k, v) in patch {
        if stripped(depth, parent, k) {
            continue;
        }
        let el = format!("f:{k}");
        let before = old.and_then(|o| o.get(k));
        match v {
            Value::Null => {
                if before.is_some() {
                    removed.child(&el).member = true;
                }
            }
            Value::Object(m)
                if !m.is_empty() && !atomic_map(k) && before.is_some_and(Value::is_object) =>
            {
                let c = changed.child(&el);
                diff_patch(
                    depth + 1,
                    &el,
                    before.and_then(Value::as_object),
                    m,
                    c,
                    removed.child(&el),
                );
            }
            _ => {
                let mut none = Fields::default();
                let r = if before.is_some() {
                    removed.child(&el)
                } else {
                    &mut none
                };
                diff_value(depth, parent, k, &el, before, v, changed.child(&el), r);
            }
        }
        changed.prune(&el);
        removed.prune(&el);
    }
}

/// An object's `managedFields`: each entry with its set of fields.
#[derive(Debug, Clone, Default)]
struct ManagedFields(Vec<(Map<String, Value>, Fields)>);

impl ManagedFields {
    fn from_json(managed: &Value) -> Self {
        Self(
            managed
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_object)
                .map(|e| (e.clone(), Fields::from_json(&e["fieldsV1"])))
                .collect(),
        )
    }

    /// `by` changed `changed` and removed `removed` at `time`, as the field manager records an
    /// `Update`: `by`'s entry takes what changed and the new time, other managers lose what
    /// changed, everyone loses what was removed, empty entries go.
    fn update(
        &mut self,
        by: Manager<'_>,
        api_version: &str,
        time: &str,
        changed: &Fields,
        removed: &Fields,
    ) {
        let is_mine = |e: &Map<String, Value>| {
            e.get("manager").and_then(Value::as_str).unwrap_or_default() == by.name
                && e.get("operation").and_then(Value::as_str) == Some("Update")
                && e.get("apiVersion").and_then(Value::as_str) == Some(api_version)
                && e.get("subresource").and_then(Value::as_str) == by.subresource
        };
        if !self.0.iter().any(|(e, _)| is_mine(e)) {
            let mut e = Map::new();
            // An empty name is left out, as the API's `omitempty` leaves it.
            if !by.name.is_empty() {
                e.insert("manager".into(), json!(by.name));
            }
            e.insert("operation".into(), json!("Update"));
            e.insert("apiVersion".into(), json!(api_version));
            e.insert("fieldsType".into(), json!("FieldsV1"));
            if let Some(s) = by.subresource {
                e.insert("subresource".into(), json!(s));
            }
            self.0.push((e, Fields::default()));
        }
        for (e, fields) in &mut self.0 {
            fields.remove_under(removed);
            if is_mine(e) {
                if fields.is_empty() {
                    fields.clone_from(changed);
                } else {
                    fields.union(changed);
                }
                e.insert("time".into(), json!(time));
            } else {
                fields.subtract(changed);
            }
        }
        self.0.retain(|(_, f)| !f.is_empty());
    }

    /// The entries in the API server's order: operation, time, manager, API version,
    /// subresource.
    fn to_json(&self) -> Value {
        let key = |e: &Map<String, Value>| {
            ["operation", "time", "manager", "apiVersion", "subresource"]
                .map(|k| e.get(k).and_then(Value::as_str).unwrap_or("").to_owned())
        };
        let mut entries: Vec<&(Map<String, Value>, Fields)> = self.0.iter().collect();
        entries.sort_by_key(|(e, _)| key(e));
        Value::Array(
            entries
                .into_iter()
                .map(|(e, f)| {
                    let mut e = e.clone();
                    e.insert("fieldsV1".into(), f.to_json());
                    Value::Object(e)
                })
                .collect(),
        )
    }
}

/// The `managedFields` after `by` changed the object from `old` to `new` at `time` (see
/// [`ManagedFields::update`]). `None` when the write changed nothing the field manager tracks.
pub(crate) fn record(
    managed: &Value,
    by: Manager<'_>,
    api_version: &str,
    time: &str,
    old: &Value,
    new: &Value,
) -> Option<Value> {
    let (changed, removed) = Fields::changed(old, new);
    if changed.is_empty() && removed.is_empty() {
        return None;
    }
    let mut entries = ManagedFields::from_json(managed);
    entries.update(by, api_version, time, &changed, &removed);
    Some(entries.to_json())
}

/// RFC 7386 merge of an owned patch, moving its values.
fn merge(target: &mut Value, patch: Value) {
    let Value::Object(patch) = patch else {
        *target = patch;
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in patch {
            if v.is_null() {
                t.remove(&k);
            } else {
                merge(t.entry(k).or_insert(Value::Null), v);
            }
        }
    }
}

/// An object from its fields, moved in (`json!` copies the values it is given).
pub(crate) fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// An object built write by write, as its managers and the server wrote it, so that its
/// `managedFields` are those the writes leave.
pub(crate) struct History {
    api_version: &'static str,
    object: Value,
    managed: ManagedFields,
}

impl History {
    pub(crate) fn new(api_version: &'static str) -> Self {
        Self {
            api_version,
            object: json!({}),
            managed: ManagedFields::default(),
        }
    }

    /// `by` merges `patch` (RFC 7386, an object) into the object at `time`.
    pub(crate) fn write(&mut self, by: Manager<'_>, time: &str, patch: Value) -> &mut Self {
        let (mut changed, mut removed) = (Fields::default(), Fields::default());
        if let Some(p) = patch.as_object() {
            diff_patch(
                0,
                "",
                self.object.as_object(),
                p,
                &mut changed,
                &mut removed,
            );
        }
        if !changed.is_empty() || !removed.is_empty() {
            self.managed
                .update(by, self.api_version, time, &changed, &removed);
        }
        merge(&mut self.object, patch);
        self
    }

    /// A change no manager is recorded for: what the server sets (defaults after decoding,
    /// admission, allocated IPs), a binding.
    pub(crate) fn untracked(&mut self, patch: Value) -> &mut Self {
        merge(&mut self.object, patch);
        self
    }

    /// The object so far, before its `managedFields`.
    pub(crate) fn object(&self) -> &Value {
        &self.object
    }

    /// The object, with its `managedFields`.
    pub(crate) fn finish(self) -> Value {
        let mut object = self.object;
        if !self.managed.0.is_empty() {
            object["metadata"]["managedFields"] = self.managed.to_json();
        }
        object
    }
}
