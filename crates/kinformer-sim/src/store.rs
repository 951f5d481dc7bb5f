//! Storage like etcd behind the API server: objects of every resource, one global resource
//! version, a bounded history of changes (the compaction window), and snapshots at past versions.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use kinformer_core::{ApiResource, Scope, Status, StatusDetails};
use parking_lot::Mutex;
use serde_json::{Map, Value};
use tokio::sync::watch;

use crate::shard::shard_hash;

/// How a resource is looked up in storage: (group, plural).
pub(crate) type ResKey = (String, String);

/// The storage key of an object inside its resource: (namespace, name); namespace is empty for
/// cluster-scoped objects. Sorted the way the API server lists: by namespace, then name.
pub(crate) type ObjKey = (String, String);

/// One stored version of an object, with its JSON rendered once.
#[derive(Debug)]
pub(crate) struct Stored {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) rv: u64,
    /// The object's JSON, exactly as gets and watch events send it. It always starts with
    /// `{"kind":"<Kind>","apiVersion":"<version>",` (or is just those two fields), so that the
    /// form list items take, without them, is `{` followed by `json[item_offset..]`.
    pub(crate) json: Bytes,
    /// Where the fields after `kind` and `apiVersion` start in `json` (see [`Stored::item_json`]).
    item_offset: usize,
    pub(crate) labels: BTreeMap<String, String>,
    /// The values of the fields this resource supports in field selectors.
    pub(crate) fields: Vec<(&'static str, String)>,
    /// The `PartialObjectMetadata` form, rendered on first use.
    meta_json: OnceLock<Bytes>,
    /// The protobuf form (`k8s\0` envelope and message) of a built-in kind's object, rendered
    /// on first use, as the watch cache keeps one serialization per object and encoding.
    protobuf: OnceLock<Result<Bytes, String>>,
    /// The FNV-1a hash of `metadata.uid`, which shard selectors on the uid compare with (the
    /// uid never changes, so every version of an object has the same).
    pub(crate) uid_hash: u64,
}

impl Stored {
    fn from_value(value: &Value, res: &ResourceInfo) -> Arc<Self> {
        let meta = &value["metadata"];
        let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let labels = meta["labels"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), s(v))).collect())
            .unwrap_or_default();
        let fields = res
            .field_paths
            .iter()
            .map(|path| (*path, field_value(value, path)))
            .collect();
        let (json, item_offset) = render_object(value, &res.api.kind, &res.api.api_version);
        Arc::new(Self {
            namespace: s(&meta["namespace"]),
            name: s(&meta["name"]),
            rv: meta["resourceVersion"]
                .as_str()
                .and_then(|v| v.parse().ok())
                .unwrap_or_default(),
            json,
            item_offset,
            labels,
            fields,
            meta_json: OnceLock::new(),
            protobuf: OnceLock::new(),
            uid_hash: shard_hash(meta["uid"].as_str().unwrap_or_default()),
        })
    }

    pub(crate) fn key(&self) -> ObjKey {
        (self.namespace.clone(), self.name.clone())
    }

    /// The object as a list item carries it: without `kind` and `apiVersion` (the list's kind
    /// says what its items are), as `(b"{", rest)`: the two slices written one after the other.
    pub(crate) fn item_json(&self) -> (&'static [u8], &[u8]) {
        (b"{", &self.json[self.item_offset..])
    }

    /// The length of [`Stored::item_json`].
    pub(crate) fn item_len(&self) -> usize {
        1 + self.json.len() - self.item_offset
    }

    /// The stored object as JSON.
    pub(crate) fn value(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }

    /// The protobuf body of this object (the `k8s\0` envelope around its message), rendered
    /// once; an error names what kept the stored JSON from the kind's typed form.
    pub(crate) fn protobuf(&self, codec: &crate::protobuf::Codec) -> Result<&Bytes, String> {
        self.protobuf
            .get_or_init(|| crate::protobuf::object_body(codec, &self.json))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The `PartialObjectMetadata` JSON of this object, rendered once.
    pub(crate) fn meta_json(&self) -> &Bytes {
        self.meta_json.get_or_init(|| {
            let v = self.value();
            Bytes::from(
                serde_json::to_vec(&serde_json::json!({
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": v["metadata"],
                }))
                .unwrap_or_default(),
            )
        })
    }

    /// The value of a field selector field (`None` if the resource does not support the field).
    pub(crate) fn field(&self, path: &str) -> Option<&str> {
        match path {
            "metadata.name" => Some(&self.name),
            "metadata.namespace" => Some(&self.namespace),
            _ => self
                .fields
                .iter()
                .find(|(p, _)| *p == path)
                .map(|(_, v)| v.as_str()),
        }
    }
}

/// Renders an object with `kind` and `apiVersion` first (as the API server writes them) and
/// returns the JSON with the offset where the remaining fields start (see [`Stored::item_json`]).
fn render_object(value: &Value, kind: &str, api_version: &str) -> (Bytes, usize) {
    let mut rest = value.as_object().cloned().unwrap_or_default();
    rest.remove("kind");
    rest.remove("apiVersion");
    let rest = serde_json::to_vec(&Value::Object(rest)).unwrap_or_else(|_| b"{}".to_vec());
    let k = serde_json::to_vec(kind).unwrap_or_default();
    let a = serde_json::to_vec(api_version).unwrap_or_default();
    let mut out = Vec::with_capacity(rest.len() + k.len() + a.len() + 24);
    out.extend_from_slice(b"{\"kind\":");
    out.extend_from_slice(&k);
    out.extend_from_slice(b",\"apiVersion\":");
    out.extend_from_slice(&a);
    let offset = if rest.len() > 2 {
        out.push(b',');
        let offset = out.len();
        out.extend_from_slice(&rest[1..]);
        offset
    } else {
        out.push(b'}');
        out.len() - 1
    };
    (Bytes::from(out), offset)
}

/// Reads a dotted path (`spec.nodeName`) from JSON; missing fields read as "".
fn field_value(value: &Value, path: &str) -> String {
    let mut v = value;
    for part in path.split('.') {
        v = &v[part];
    }
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// What kind of change an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventKind {
    Added,
    Modified,
    Deleted,
}

/// One write, as the history keeps it and every watcher reads it.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) rv: u64,
    pub(crate) resource: Arc<ResKey>,
    pub(crate) kind: EventKind,
    /// The object after the write; for a delete, its last state carrying the delete's version.
    pub(crate) object: Arc<Stored>,
    /// The object before the write (`None` for a create).
    pub(crate) prev: Option<Arc<Stored>>,
    /// Watch lines (JSON) and frames (protobuf), rendered once per event on first use and
    /// shared by every watcher: four variants in three forms.
    pub(crate) lines: [OnceLock<Bytes>; 12],
    /// When it was written: how long the watch cache keeps it.
    pub(crate) at: tokio::time::Instant,
}

/// A resource the store serves, with what discovery and field selectors need.
#[derive(Debug, Clone)]
pub(crate) struct ResourceInfo {
    pub(crate) api: ApiResource,
    pub(crate) key: Arc<ResKey>,
    pub(crate) singular: String,
    pub(crate) short_names: Vec<&'static str>,
    pub(crate) field_paths: Vec<&'static str>,
    /// Served with a `/status` subresource: writes to the object keep its stored status, writes
    /// to `/status` keep the rest (per kind, as the registry's strategies do).
    pub(crate) status_subresource: bool,
    /// The kind has `metadata.generation` (set to 1 on create, bumped by spec changes).
    pub(crate) generation: bool,
    /// Writes lose `status.observedGeneration` and `status.conditions[].observedGeneration`
    /// (pods before 1.34, where `PodObservedGenerationTracking` is off by default).
    pub(crate) drops_observed_generation: bool,
    /// A custom resource (registered with [`Store::register_crd`]).
    pub(crate) custom: bool,
}

/// The fewest events of a resource its watch cache holds, however old
/// (`storage/cacher/watch_cache_history.go`, `defaultLowerBoundCapacity`).
pub(crate) const WATCH_CACHE_MIN_EVENTS: usize = 100;

/// The most events a watch cache keeping `window` of history holds: 102 400 for the default
/// window of 75 s, doubled for each doubling of a longer one (`capacityUpperBound`).
fn watch_cache_capacity(window: Duration) -> usize {
    const DEFAULT: Duration = Duration::from_secs(75);
    const UPPER: usize = 100 * 1024;
    if window <= DEFAULT {
        return UPPER;
    }
    let exponent = (window.as_secs_f64() / DEFAULT.as_secs_f64()).log2().ceil();
    // Kept within a 32-bit count, as the cacher caps it.
    let exponent = exponent.clamp(0.0, 14.0) as u32;
    UPPER << exponent
}

/// What an update goes through before it is stored, given the stored object and the object
/// about to be stored: the API layer's defaulting and validation (storage does neither).
pub(crate) type Check<'a> = &'a dyn Fn(&Value, &mut Value) -> Result<(), Status>;

/// Which write of an object the request is, for the rules the registry's strategies apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Write {
    /// An in-process write to storage: stored as sent.
    Storage,
    /// A write to the object itself over HTTP.
    Object,
    /// A write to its `/status` subresource over HTTP.
    Status,
    /// A write to a namespace's `/finalize` subresource over HTTP: only `spec.finalizers`.
    Finalize,
}

impl ResourceInfo {
    pub(crate) fn new(api: ApiResource) -> Self {
        let builtin = |plurals: &[&str]| {
            matches!(api.group.as_str(), "" | "apps") && plurals.contains(&api.plural.as_str())
        };
        // pkg/registry/{core,apps}/<kind>/strategy.go: the kinds with a status strategy, and
        // the kinds whose PrepareForCreate sets a generation.
        let status_subresource = builtin(&[
            "pods",
            "services",
            "namespaces",
            "nodes",
            "deployments",
            "replicasets",
            "statefulsets",
            "daemonsets",
        ]);
        let generation = builtin(&[
            "pods",
            "deployments",
            "replicasets",
            "statefulsets",
            "daemonsets",
        ]) || is_endpoint_slices(&api);
        let field_paths = match (api.group.as_str(), api.plural.as_str()) {
            ("", "pods") => vec![
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ],
            ("", "secrets") => vec!["type"],
            ("", "namespaces") => vec!["status.phase"],
            ("", "nodes") => vec!["spec.unschedulable"],
            ("", "events") => vec![
                "involvedObject.kind",
                "involvedObject.name",
                "involvedObject.namespace",
                "involvedObject.uid",
                "reason",
                "type",
            ],
            _ => Vec::new(),
        };
        let short_names = match (api.group.as_str(), api.plural.as_str()) {
            ("", "pods") => vec!["po"],
            ("", "services") => vec!["svc"],
            ("", "configmaps") => vec!["cm"],
            ("", "namespaces") => vec!["ns"],
            ("", "nodes") => vec!["no"],
            ("", "serviceaccounts") => vec!["sa"],
            ("", "endpoints") => vec!["ep"],
            ("", "events") => vec!["ev"],
            ("apps", "deployments") => vec!["deploy"],
            ("apps", "replicasets") => vec!["rs"],
            ("apps", "statefulsets") => vec!["sts"],
            ("apps", "daemonsets") => vec!["ds"],
            _ => Vec::new(),
        };
        Self {
            key: Arc::new((api.group.clone(), api.plural.clone())),
            singular: api.kind.to_ascii_lowercase(),
            short_names,
            field_paths,
            status_subresource,
            generation,
            drops_observed_generation: false,
            custom: false,
            api,
        }
    }

    /// A custom resource, with or without a status subresource; custom resources always have
    /// `metadata.generation`.
    pub(crate) fn custom(api: ApiResource, status_subresource: bool) -> Self {
        Self {
            status_subresource,
            generation: true,
            custom: true,
            ..Self::new(api)
        }
    }

    /// Whether `after` differs from `before` in what bumps `metadata.generation`: the spec of a
    /// built-in kind; everything but metadata (and status, with a status subresource) of a
    /// custom resource, as the apiextensions strategy compares.
    fn spec_changed(&self, before: &Value, after: &Value) -> bool {
        if self.custom {
            let counts = |k: &str| {
                !matches!(k, "metadata" | "kind" | "apiVersion")
                    && (!self.status_subresource || k != "status")
            };
            top_level(before, counts) != top_level(after, counts)
        } else if is_endpoint_slices(&self.api) {
            // pkg/registry/discovery/endpointslice/strategy.go: anything but `metadata`, or the
            // labels, bumps the generation (an EndpointSlice has no spec).
            let counts = |k: &str| !matches!(k, "metadata" | "kind" | "apiVersion");
            top_level(before, counts) != top_level(after, counts)
                || before["metadata"].get("labels") != after["metadata"].get("labels")
        } else {
            before.get("spec") != after.get("spec")
        }
    }

    /// Whether the resource supports this field in field selectors.
    pub(crate) fn supports_field(&self, path: &str) -> bool {
        path == "metadata.name" || path == "metadata.namespace" || self.field_paths.contains(&path)
    }
}

/// The resources every simulated cluster serves from the start.
fn builtin_resources() -> Vec<ApiResource> {
    use Scope::{Cluster, Namespaced};
    [
        ("", "Pod", "pods", Namespaced),
        ("", "Service", "services", Namespaced),
        ("", "ConfigMap", "configmaps", Namespaced),
        ("", "Secret", "secrets", Namespaced),
        ("", "ServiceAccount", "serviceaccounts", Namespaced),
        ("", "Endpoints", "endpoints", Namespaced),
        ("", "Event", "events", Namespaced),
        ("", "Namespace", "namespaces", Cluster),
        ("", "Node", "nodes", Cluster),
        ("apps", "Deployment", "deployments", Namespaced),
        ("apps", "ReplicaSet", "replicasets", Namespaced),
        ("apps", "StatefulSet", "statefulsets", Namespaced),
        ("apps", "DaemonSet", "daemonsets", Namespaced),
        (
            "discovery.k8s.io",
            "EndpointSlice",
            "endpointslices",
            Namespaced,
        ),
        // Leader election and shard membership coordinate through them.
        ("coordination.k8s.io", "Lease", "leases", Namespaced),
    ]
    .into_iter()
    .map(|(g, k, p, s)| ApiResource::new(g, "v1", k, p, s))
    .collect()
}

/// How many snapshots at past versions are kept for continue tokens and exact reads.
const SNAPSHOT_CACHE: usize = 16;

/// A consistent view of one resource at one resource version, sorted by key.
pub(crate) type Snapshot = Arc<Vec<Arc<Stored>>>;

struct State {
    rv: u64,
    compacted: u64,
    resources: HashMap<ResKey, ResourceInfo>,
    tables: HashMap<ResKey, BTreeMap<ObjKey, Arc<Stored>>>,
    history: VecDeque<Arc<Event>>,
    history_window: usize,
    snapshots: VecDeque<(ResKey, u64, Snapshot)>,
    uid_counter: u64,
    /// Pods in their grace period: when the kubelet would delete each.
    terminations: Vec<(tokio::time::Instant, ResKey, ObjKey)>,
}

pub(crate) struct StoreInner {
    state: Mutex<State>,
    notify: watch::Sender<u64>,
    /// Woken when a pod starts terminating.
    terminations: tokio::sync::Notify,
}

/// The simulated cluster's storage, as tests and load generators write to it in-process.
///
/// Cheap to clone; all clones share the same storage. Every write returns the stored object (with
/// `uid`, `resourceVersion`, `creationTimestamp` and `generation` set by the server) or a
/// [`Status`] exactly as the HTTP API would answer. Watchers see in-process writes like HTTP ones.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use kinformer_core::{ApiResource, Scope};
/// use kinformer_sim::{SimConfig, SimServer};
///
/// let sim = SimServer::start(SimConfig::default()).await.unwrap();
/// let cms = ApiResource::new("", "v1", "ConfigMap", "configmaps", Scope::Namespaced);
/// let store = sim.store();
/// let created = store
///     .create(&cms, serde_json::json!({"metadata": {"name": "a", "namespace": "dev"}, "data": {"k": "v"}}))
///     .unwrap();
/// assert_eq!(created["metadata"]["resourceVersion"], store.resource_version().to_string());
/// let err = store.create(&cms, created.clone()).unwrap_err();
/// assert_eq!((err.code, err.reason.as_str()), (409, "AlreadyExists"));
/// # }
/// ```
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<StoreInner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("resource_version", &self.resource_version())
            .finish_non_exhaustive()
    }
}

/// Builds a Kubernetes `Failure` status with details naming the object.
pub(crate) fn status(code: u16, reason: &str, message: impl Into<String>) -> Status {
    Status::failure(code, reason, message)
}

pub(crate) fn object_status(
    code: u16,
    reason: &str,
    message: String,
    res: &ApiResource,
    name: &str,
) -> Status {
    let mut s = status(code, reason, message);
    s.details = Some(StatusDetails {
        name: name.to_owned(),
        group: res.group.clone(),
        kind: res.plural.clone(),
        ..StatusDetails::default()
    });
    s
}

pub(crate) fn not_found(res: &ApiResource, name: &str) -> Status {
    let what = qualified(res);
    object_status(
        404,
        "NotFound",
        format!("{what} \"{name}\" not found"),
        res,
        name,
    )
}

fn qualified(res: &ApiResource) -> String {
    if res.group.is_empty() {
        res.plural.clone()
    } else {
        format!("{}.{}", res.plural, res.group)
    }
}

fn conflict(res: &ApiResource, name: &str) -> Status {
    let what = qualified(res);
    object_status(
        409,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {what} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
        ),
        res,
        name,
    )
}

pub(crate) fn invalid(res: &ApiResource, name: &str, field: &str, message: &str) -> Status {
    let mut s = object_status(
        422,
        "Invalid",
        format!("{} \"{name}\" is invalid: {field}: {message}", res.kind),
        res,
        name,
    );
    if let Some(d) = s.details.as_mut() {
        d.kind = res.kind.clone();
        d.causes.push(kinformer_core::StatusCause {
            reason: "FieldValueInvalid".to_owned(),
            message: message.to_owned(),
            field: field.to_owned(),
        });
    }
    s
}

/// The watch cache's "too old resource version: R (O)" status, where `O` is the oldest version a
/// watch can still start from: one below the oldest event the cache holds, not the current version
/// (`staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go`,
/// `getAllEventsSinceLocked`, `oldest-1`). Here that is the compacted version.
pub(crate) fn too_old(requested: u64, oldest: u64) -> Status {
    status(
        410,
        "Expired",
        format!("too old resource version: {requested} ({oldest})"),
    )
}

/// A 504 "Too large resource version" status with its `ResourceVersionTooLarge` cause.
pub(crate) fn too_large(requested: u64, current: u64) -> Status {
    let mut s = status(
        504,
        "Timeout",
        format!("Too large resource version: {requested}, current: {current}"),
    );
    s.details = Some(StatusDetails {
        causes: vec![kinformer_core::StatusCause {
            reason: "ResourceVersionTooLarge".to_owned(),
            message: "Too large resource version".to_owned(),
            field: String::new(),
        }],
        retry_after_seconds: 1,
        ..StatusDetails::default()
    });
    s
}

/// Formats seconds since the Unix epoch as RFC 3339 UTC (`2024-05-01T10:00:00Z`), the way the
/// API server writes `creationTimestamp`.
pub(crate) fn rfc3339(secs: u64) -> String {
    i64::try_from(secs)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .map_or_else(|| "9999-12-31T23:59:59Z".to_owned(), |t| t.to_string())
}

/// The current time in whole seconds, as RFC 3339 UTC.
pub(crate) fn now_rfc3339() -> String {
    rfc3339(u64::try_from(jiff::Timestamp::now().as_second()).unwrap_or(0))
}

/// A deterministic, well-formed UUID (version 4 layout) from a counter.
fn uid_from(n: u64) -> String {
    let a = splitmix(n);
    uuid_from_bits(a, splitmix(a ^ 0x5151_5151))
}

/// A UUID in the version 4 layout from 128 random bits.
pub(crate) fn uuid_from_bits(a: u64, b: u64) -> String {
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | (b >> 48) & 0x3fff,
        b & 0xffff_ffff_ffff
    )
}

pub(crate) fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// RFC 7386 JSON merge patch.
/// The top-level fields of `v` whose names `counts` keeps, borrowed.
fn top_level(v: &Value, counts: impl Fn(&str) -> bool) -> Vec<(&String, &Value)> {
    v.as_object()
        .map(|m| m.iter().filter(|(k, _)| counts(k)).collect())
        .unwrap_or_default()
}

/// `discovery.k8s.io` EndpointSlices.
fn is_endpoint_slices(api: &ApiResource) -> bool {
    api.group == "discovery.k8s.io" && api.plural == "endpointslices"
}

/// Removes `status.observedGeneration` and every `status.conditions[].observedGeneration`.
fn drop_observed_generation(object: &mut Value) {
    let Some(status) = object.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    status.remove("observedGeneration");
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conditions.iter_mut().filter_map(Value::as_object_mut) {
            c.remove("observedGeneration");
        }
    }
}

pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// Whether `metadata.finalizers` holds any.
fn has_finalizers(v: &Value) -> bool {
    v["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty())
}

/// Whether `res` is the built-in namespaces, whose deletion is the namespace controller's.
fn is_namespaces(res: &ApiResource) -> bool {
    res.group.is_empty() && res.plural == "namespaces"
}

/// Whether a namespace's `spec.finalizers` (the namespace controller's `kubernetes`, or another
/// finalizing controller's) still hold it: until they are removed, a namespace marked for
/// deletion is not deleted by an update or a delete (`ShouldDeleteNamespaceDuringUpdate`).
fn namespace_held(info: &ResourceInfo, v: &Value) -> bool {
    !info.custom
        && is_namespaces(&info.api)
        && v["spec"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
}

fn set_rv(v: &mut Value, rv: u64) {
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

fn precondition_failed(res: &ApiResource, name: &str, message: &str) -> Status {
    object_status(409, "Conflict", message.to_owned(), res, name)
}

/// What a `DELETE` asks for besides the object: `DeleteOptions`, from its body and query.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeleteOptions {
    pub(crate) precondition_uid: Option<String>,
    pub(crate) precondition_resource_version: Option<String>,
    pub(crate) grace_period_seconds: Option<i64>,
    pub(crate) dry_run: bool,
}

/// Whether a delete removed the object or marked it for deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deletion {
    /// Removed (a DELETED event).
    Gone,
    /// Marked with a `deletionTimestamp`; removed when its grace period ends and its finalizers
    /// are gone.
    Pending,
}

/// The status a kubelet reports for a pod whose containers it has stopped for its deletion, as a
/// merge patch: every container terminated (exit code 0, `Completed`, started when it last
/// started), not ready, and the terminal phase, which a deleted pod always reaches before its
/// final delete (`pkg/kubelet/kubelet_pods.go`, `getPhase`, and `status/status_manager.go`).
/// `None` for a pod already in a terminal phase.
fn stopped_status(pod: &Value) -> Option<Value> {
    if matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    ) {
        return None;
    }
    let now = now_rfc3339();
    let containers: Vec<Value> = pod["status"]["containerStatuses"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let started = c["state"]["running"]["startedAt"].clone();
            let mut c = c.clone();
            c["ready"] = Value::Bool(false);
            c["started"] = Value::Bool(false);
            c["state"] = serde_json::json!({"terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": started,
                "finishedAt": now,
            }});
            c
        })
        .collect();
    let conditions: Vec<Value> = pod["status"]["conditions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let mut c = c.clone();
            if matches!(c["type"].as_str(), Some("Ready" | "ContainersReady"))
                && c["status"] != "False"
            {
                c["status"] = Value::from("False");
                c["reason"] = Value::from("PodCompleted");
                c["lastTransitionTime"] = Value::from(now.clone());
            }
            c
        })
        .collect();
    let mut status = serde_json::json!({"phase": "Succeeded"});
    if pod["status"].get("conditions").is_some() {
        status["conditions"] = Value::Array(conditions);
    }
    if pod["status"].get("containerStatuses").is_some() {
        status["containerStatuses"] = Value::Array(containers);
    }
    Some(serde_json::json!({ "status": status }))
}

/// A write to an object with a status subresource keeps the stored status (every kind's
/// `PrepareForUpdate`), and a namespace's write keeps its `spec.finalizers` (changed only through
/// `/finalize`).
fn keep_stored_status(info: &ResourceInfo, object: &mut Value, old: &Value) {
    let Some(obj) = object.as_object_mut() else {
        return;
    };
    match old.get("status") {
        Some(status) => obj.insert("status".into(), status.clone()),
        None => obj.remove("status"),
    };
    if !info.custom && info.api.plural == "namespaces" {
        let finalizers = old["spec"].get("finalizers").cloned();
        if let Some(spec) = obj
            .entry("spec")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
        {
            match finalizers {
                Some(f) => spec.insert("finalizers".into(), f),
                None => spec.remove("finalizers"),
            };
        }
    }
}

/// A write to `/status` keeps what the kind's status strategy keeps: a custom resource
/// everything but its status and `managedFields` (apiextensions' `statusStrategy`); a built-in
/// kind its spec, and pods their owner references (and QoS class, if the write drops it),
/// deployments their labels (`pkg/registry/{core,apps}/<kind>/strategy.go`).
/// A namespace's `/finalize` write keeps everything stored but `spec.finalizers`, which it
/// replaces (`namespaceFinalizeStrategy.PrepareForUpdate`), and the managed fields the write
/// recorded.
fn keep_all_but_finalizers(object: &Value, old: &Value) -> Value {
    let mut kept = old.clone();
    let finalizers = object["spec"].get("finalizers").cloned();
    if let Some(k) = kept.as_object_mut() {
        let spec = k.entry("spec").or_insert_with(|| Value::Object(Map::new()));
        if let Some(spec) = spec.as_object_mut() {
            match finalizers {
                Some(f) => spec.insert("finalizers".into(), f),
                None => spec.remove("finalizers"),
            };
        }
        if let (Some(m), Some(fields)) = (
            k.get_mut("metadata").and_then(Value::as_object_mut),
            object["metadata"].get("managedFields"),
        ) {
            m.insert("managedFields".into(), fields.clone());
        }
    }
    kept
}

fn keep_all_but_status(info: &ResourceInfo, object: Value, old: &Value) -> Value {
    if info.custom {
        let mut kept = old.clone();
        if let Some(k) = kept.as_object_mut() {
            match object.get("status") {
                Some(status) => k.insert("status".into(), status.clone()),
                None => k.remove("status"),
            };
            if let (Some(m), Some(fields)) = (
                k.get_mut("metadata").and_then(Value::as_object_mut),
                object["metadata"].get("managedFields"),
            ) {
                m.insert("managedFields".into(), fields.clone());
            }
        }
        return kept;
    }
    let mut object = object;
    let Some(obj) = object.as_object_mut() else {
        return object;
    };
    match old.get("spec") {
        Some(spec) => obj.insert("spec".into(), spec.clone()),
        None => obj.remove("spec"),
    };
    let keep_meta = |obj: &mut Map<String, Value>, field: &str| {
        let kept = old["metadata"].get(field).cloned();
        if let Some(m) = obj
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
        {
            match kept {
                Some(v) => m.insert(field.into(), v),
                None => m.remove(field),
            };
        }
    };
    match info.api.plural.as_str() {
        "pods" => {
            keep_meta(obj, "ownerReferences");
            let qos = &old["status"]["qosClass"];
            if !qos.is_null()
                && obj
                    .get("status")
                    .is_none_or(|s| s.get("qosClass").is_none_or(Value::is_null))
                && let Some(status) = obj
                    .entry("status")
                    .or_insert_with(|| Value::Object(Map::new()))
                    .as_object_mut()
            {
                status.insert("qosClass".into(), qos.clone());
            }
        }
        "deployments" => keep_meta(obj, "labels"),
        _ => {}
    }
    object
}

impl Store {
    pub(crate) fn new(history_window: usize) -> Self {
        let resources = builtin_resources()
            .into_iter()
            .map(|r| {
                let info = ResourceInfo::new(r);
                ((*info.key).clone(), info)
            })
            .collect();
        let (notify, _) = watch::channel(1);
        Self {
            inner: Arc::new(StoreInner {
                state: Mutex::new(State {
                    rv: 1,
                    compacted: 1,
                    resources,
                    tables: HashMap::new(),
                    history: VecDeque::new(),
                    history_window: history_window.max(1),
                    snapshots: VecDeque::new(),
                    uid_counter: 0,
                    terminations: Vec::new(),
                }),
                notify,
                terminations: tokio::sync::Notify::new(),
            }),
        }
    }

    /// The current global resource version: the version of the latest write.
    pub fn resource_version(&self) -> u64 {
        self.inner.state.lock().rv
    }

    /// Makes a custom resource (or any resource not built in) servable over HTTP and writable here,
    /// as a CustomResourceDefinition without a status subresource: its status is written with
    /// the rest of the object, and every change outside `metadata` bumps `metadata.generation`.
    /// Registering a resource again changes nothing.
    pub fn register_crd(&self, resource: ApiResource) {
        self.register(ResourceInfo::custom(resource, false));
    }

    /// As [`register_crd`](Self::register_crd), for a CustomResourceDefinition with
    /// `subresources.status`: writes to the object over HTTP keep its stored status, writes to
    /// its `/status` keep everything but the status, and only changes outside `metadata` and
    /// `status` bump `metadata.generation`. In-process writes store what they are given.
    pub fn register_crd_with_status(&self, resource: ApiResource) {
        self.register(ResourceInfo::custom(resource, true));
    }

    /// Pods lose `metadata.generation`, as on releases before 1.33, where the pod strategy's
    /// `PrepareForCreate` did not set one (`pkg/registry/core/pod/strategy.go`).
    pub(crate) fn without_pod_generation(&self) {
        let key = (String::new(), "pods".to_owned());
        if let Some(info) = self.inner.state.lock().resources.get_mut(&key) {
            info.generation = false;
        }
    }

    /// Pod writes lose `status.observedGeneration` and the conditions' `observedGeneration`, as
    /// on releases where `PodObservedGenerationTracking` is off (alpha in 1.33, on from 1.34): the
    /// registry drops a disabled feature's status fields (`dropDisabledPodStatusFields`,
    /// `pkg/api/pod/util.go`).
    pub(crate) fn without_pod_observed_generation(&self) {
        let key = (String::new(), "pods".to_owned());
        if let Some(info) = self.inner.state.lock().resources.get_mut(&key) {
            info.drops_observed_generation = true;
        }
    }

    fn register(&self, info: ResourceInfo) {
        self.inner
            .state
            .lock()
            .resources
            .entry((*info.key).clone())
            .or_insert(info);
    }

    /// Creates an object (POST semantics): 409 `AlreadyExists` if it exists, 422 `Invalid` without
    /// a name, 404 `NotFound` for a resource the server does not serve. A namespaced object without
    /// `metadata.namespace` goes to `default`; `metadata.generateName` makes a name.
    pub fn create(&self, resource: &ApiResource, object: Value) -> Result<Value, Status> {
        self.write_create(resource, object, None, false)
    }

    /// Replaces an object (PUT semantics): 404 if missing; 409 `Conflict` if `metadata.resourceVersion`
    /// is set and is not the stored one. A replace that changes nothing writes nothing.
    pub fn update(&self, resource: &ApiResource, object: Value) -> Result<Value, Status> {
        self.write_update(
            resource,
            object,
            None,
            Write::Storage,
            &|_, _| Ok(()),
            false,
        )
    }

    /// Applies a JSON merge patch (RFC 7386) to an object. A `metadata.resourceVersion` in the patch
    /// is a precondition (409 `Conflict` if stale).
    pub fn patch(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
        merge_patch: Value,
    ) -> Result<Value, Status> {
        self.write_patch(
            resource,
            namespace,
            name,
            merge_patch,
            false,
            Write::Storage,
            &|_, _| Ok(()),
            false,
        )
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write_patch(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
        merge_patch: Value,
        strategic: bool,
        write: Write,
        check: Check<'_>,
        dry_run: bool,
    ) -> Result<Value, Status> {
        let mut state = self.inner.state.lock();
        let info = state.info(resource)?;
        let key = obj_key(&info.api, namespace, name);
        let current = state
            .tables
            .get(&*info.key)
            .and_then(|t| t.get(&key))
            .cloned()
            .ok_or_else(|| not_found(&info.api, name))?;
        let mut value = current.value();
        // A resourceVersion in the patch is a precondition, not a value to store.
        let mut patch = merge_patch;
        if let Some(rv) = patch
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .and_then(|m| m.remove("resourceVersion"))
            && rv.as_str() != Some(current.rv.to_string().as_str())
        {
            return Err(conflict(&info.api, name));
        }
        if strategic {
            crate::smp::apply(&mut value, &patch);
        } else {
            self::merge_patch(&mut value, &patch);
        }
        let out = state.replace(&info, value, &current, write, check, dry_run)?;
        drop(state);
        self.notify();
        Ok(out)
    }

    /// Deletes an object at once, as a forced deletion does (no grace period; finalizers are not
    /// waited for), and returns its last state, which carries the delete's resource version. 404
    /// if missing. A `DELETE` over HTTP is graceful instead (see `docs/sim.md`).
    ///
    /// A namespace is deleted as over HTTP, since no delete of a namespace is immediate: it turns
    /// `Terminating` and is returned so; a running server's namespace controller then deletes
    /// what is in it, and the namespace once it is empty. With no server there is no controller,
    /// and it stays `Terminating`.
    pub fn delete(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, Status> {
        if is_namespaces(resource) {
            return self
                .delete_with(resource, None, name, &DeleteOptions::default())
                .map(|(object, _)| object);
        }
        let out = self.inner.state.lock().delete(resource, namespace, name)?;
        self.notify();
        Ok(out)
    }

    /// A delete as the API server makes it (see [`DeleteOptions`]).
    pub(crate) fn delete_with(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<(Value, Deletion), Status> {
        let out = if is_namespaces(resource) {
            self.inner
                .state
                .lock()
                .delete_namespace(resource, name, opts)?
        } else {
            self.inner
                .state
                .lock()
                .delete_with(resource, namespace, name, opts)?
        };
        if !opts.dry_run {
            self.notify();
            self.inner.terminations.notify_one();
        }
        Ok(out)
    }

    /// When the next pod's grace period ends, if any is terminating.
    pub(crate) fn next_termination(&self) -> Option<tokio::time::Instant> {
        self.inner
            .state
            .lock()
            .terminations
            .iter()
            .map(|(at, _, _)| *at)
            .min()
    }

    /// Waits until a new termination is scheduled.
    pub(crate) async fn termination_scheduled(&self) {
        self.inner.terminations.notified().await;
    }

    /// Ends the grace period of every pod due by `now`, as the kubelet does: it deletes them with
    /// no grace period (those with finalizers stay until the finalizers are removed).
    pub(crate) fn finish_terminations(&self, now: tokio::time::Instant) {
        let due: Vec<(ResKey, ObjKey)> = {
            let mut s = self.inner.state.lock();
            let (due, later) = std::mem::take(&mut s.terminations)
                .into_iter()
                .partition(|(at, _, _)| *at <= now);
            s.terminations = later;
            due.into_iter().map(|(_, r, k)| (r, k)).collect::<Vec<_>>()
        };
        for ((group, plural), (ns, name)) in due {
            let Some(info) = self.resource(&group, &plural) else {
                continue;
            };
            let ns = (!ns.is_empty()).then_some(ns.as_str());
            // The kubelet first reports the stopped containers and the terminal phase, then
            // deletes with no grace period. The pod may have been deleted meanwhile.
            if let Some(pod) = self.get(&info.api, ns, &name)
                && let Some(patch) = stopped_status(&pod)
            {
                let _ = self.patch(&info.api, ns, &name, patch);
            }
            let force = DeleteOptions {
                grace_period_seconds: Some(0),
                ..DeleteOptions::default()
            };
            let _ = self.delete_with(&info.api, ns, &name, &force);
        }
    }

    /// The stored object, if any.
    pub fn get(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        self.get_stored(resource, namespace, name)
            .map(|s| s.value())
    }

    /// All stored objects of a resource (in one namespace, or all), sorted by namespace and name.
    pub fn list(&self, resource: &ApiResource, namespace: Option<&str>) -> Vec<Value> {
        let state = self.inner.state.lock();
        let key = (resource.group.clone(), resource.plural.clone());
        let Some(table) = state.tables.get(&key) else {
            return Vec::new();
        };
        let items: Vec<Arc<Stored>> = match (resource.scope, namespace) {
            (Scope::Namespaced, Some(ns)) => range_of(table, ns).cloned().collect(),
            _ => table.values().cloned().collect(),
        };
        drop(state);
        items.iter().map(|s| s.value()).collect()
    }

    pub(crate) fn get_stored(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<Stored>> {
        let state = self.inner.state.lock();
        let key = (resource.group.clone(), resource.plural.clone());
        state
            .tables
            .get(&key)?
            .get(&obj_key(resource, namespace, name))
            .cloned()
    }

    pub(crate) fn write_create(
        &self,
        resource: &ApiResource,
        object: Value,
        path_namespace: Option<&str>,
        dry_run: bool,
    ) -> Result<Value, Status> {
        let out = self
            .inner
            .state
            .lock()
            .create(resource, object, path_namespace, dry_run)?;
        self.notify();
        Ok(out)
    }

    pub(crate) fn write_update(
        &self,
        resource: &ApiResource,
        object: Value,
        path: Option<(Option<&str>, &str)>,
        write: Write,
        check: Check<'_>,
        dry_run: bool,
    ) -> Result<Value, Status> {
        let mut state = self.inner.state.lock();
        let info = state.info(resource)?;
        let meta = &object["metadata"];
        let name = meta["name"].as_str().unwrap_or_default().to_owned();
        let ns = meta["namespace"].as_str().map(str::to_owned);
        if let Some((path_ns, path_name)) = path {
            if path_name != name {
                return Err(status(
                    400,
                    "BadRequest",
                    "the name of the object does not match the name on the URL",
                ));
            }
            if info.api.scope == Scope::Namespaced
                && ns.as_deref().is_some_and(|n| Some(n) != path_ns)
            {
                return Err(status(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
        let ns = ns.or_else(|| path.and_then(|p| p.0.map(str::to_owned)));
        let key = obj_key(&info.api, ns.as_deref().or(Some("default")), &name);
        let current = state
            .tables
            .get(&*info.key)
            .and_then(|t| t.get(&key))
            .cloned()
            .ok_or_else(|| not_found(&info.api, &name))?;
        if let Some(rv) = meta["resourceVersion"].as_str()
            && !rv.is_empty()
            && rv != current.rv.to_string()
        {
            return Err(conflict(&info.api, &name));
        }
        let out = state.replace(&info, object, &current, write, check, dry_run)?;
        drop(state);
        self.notify();
        Ok(out)
    }

    /// Resource info for a URL's group and plural.
    pub(crate) fn resource(&self, group: &str, plural: &str) -> Option<ResourceInfo> {
        self.inner
            .state
            .lock()
            .resources
            .get(&(group.to_owned(), plural.to_owned()))
            .cloned()
    }

    /// Every served resource, sorted by group, version and plural.
    pub(crate) fn resources(&self) -> Vec<ResourceInfo> {
        let mut all: Vec<ResourceInfo> = self
            .inner
            .state
            .lock()
            .resources
            .values()
            .cloned()
            .collect();
        all.sort_by(|a, b| {
            (&a.api.group, &a.api.version, &a.api.plural).cmp(&(
                &b.api.group,
                &b.api.version,
                &b.api.plural,
            ))
        });
        all
    }

    /// `(current, compacted)`: versions below `compacted` can no longer be read or watched from.
    pub(crate) fn versions(&self) -> (u64, u64) {
        let s = self.inner.state.lock();
        (s.rv, s.compacted)
    }

    /// A consistent view of a resource at `at` (must be between compacted and current).
    pub(crate) fn snapshot(&self, res: &ResKey, at: u64) -> Result<Snapshot, Status> {
        self.inner.state.lock().snapshot(res, at)
    }

    /// Events with a version above `after`, at most `max`, or `Err` when `after` is compacted.
    pub(crate) fn events_after(&self, after: u64, max: usize) -> Result<Vec<Arc<Event>>, Status> {
        let s = self.inner.state.lock();
        if after < s.compacted {
            return Err(too_old(after, s.compacted));
        }
        let Some(first) = s.history.front().map(|e| e.rv) else {
            return Ok(Vec::new());
        };
        let start = (after + 1).saturating_sub(first) as usize;
        Ok(s.history
            .range(start.min(s.history.len())..)
            .take(max)
            .cloned()
            .collect())
    }

    /// The version of the oldest event of `resource` its watch cache still holds, if the cache has
    /// let older ones of it go; `None` while it holds all of them that history has.
    ///
    /// Each resource's watch cache keeps its last [`WATCH_CACHE_MIN_EVENTS`] events and every
    /// event younger than `window`, up to a capacity bound (`storage/cacher/watch_cache_history.go`:
    /// a cyclic buffer of 100 to 102 400 events that doubles while everything in it is fresher
    /// than the window, and halves when its recent quarter is older).
    pub(crate) fn watch_cache_floor(&self, resource: &ResKey, window: Duration) -> Option<u64> {
        let s = self.inner.state.lock();
        let now = tokio::time::Instant::now();
        let fresh_after = now.checked_sub(window);
        let cap = watch_cache_capacity(window);
        // All of history is fresh and within the bound: nothing has been let go.
        if s.history.len() <= cap
            && s.history
                .front()
                .is_none_or(|e| fresh_after.is_none_or(|t| e.at > t))
        {
            return None;
        }
        let mut held = 0usize;
        let mut oldest = None;
        for e in s.history.iter().rev().filter(|e| *e.resource == *resource) {
            let fresh = fresh_after.is_none_or(|t| e.at > t);
            if held < cap && (held < WATCH_CACHE_MIN_EVENTS || fresh) {
                held += 1;
                oldest = Some(e.rv);
            } else {
                // An older event of this resource the cache no longer holds.
                return oldest.or(Some(e.rv + 1));
            }
        }
        None
    }

    /// Compacts history up to `rv`, as etcd compaction at that revision does: events up to it are
    /// dropped and versions below it answer 410. Compacting below what is already compacted
    /// changes nothing.
    pub(crate) fn compact_to(&self, rv: u64) {
        let mut s = self.inner.state.lock();
        let rv = rv.min(s.rv);
        if rv <= s.compacted {
            return;
        }
        while s.history.front().is_some_and(|e| e.rv <= rv) {
            s.history.pop_front();
        }
        s.compacted = rv;
        s.snapshots.retain(|(_, at, _)| *at >= rv);
        tracing::debug!(compacted = rv, "history compacted");
    }

    /// Drops all history: any older version now answers 410.
    pub(crate) fn compact_now(&self) {
        let mut s = self.inner.state.lock();
        s.history.clear();
        s.compacted = s.rv;
        s.snapshots.clear();
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.notify.subscribe()
    }

    fn notify(&self) {
        let rv = self.inner.state.lock().rv;
        self.inner.notify.send_replace(rv);
    }

    /// Creates many objects under one lock (workload generators); returns how many were created.
    /// Objects that cannot be created (for example because they exist) are skipped.
    pub(crate) fn create_many(&self, resource: &ApiResource, objects: Vec<Value>) -> usize {
        let mut created = 0;
        {
            let mut state = self.inner.state.lock();
            for o in objects {
                match state.create(resource, o, None, false) {
                    Ok(_) => created += 1,
                    Err(e) => tracing::debug!(error = %e.message, "create skipped"),
                }
            }
        }
        self.notify();
        created
    }
}

fn obj_key(res: &ApiResource, namespace: Option<&str>, name: &str) -> ObjKey {
    match res.scope {
        Scope::Namespaced => (namespace.unwrap_or("default").to_owned(), name.to_owned()),
        Scope::Cluster => (String::new(), name.to_owned()),
    }
}

/// The objects of one namespace in a table.
fn range_of<'a>(
    table: &'a BTreeMap<ObjKey, Arc<Stored>>,
    ns: &str,
) -> impl Iterator<Item = &'a Arc<Stored>> + 'a {
    let ns = ns.to_owned();
    table
        .range((ns.clone(), String::new())..)
        .take_while(move |((n, _), _)| *n == ns)
        .map(|(_, v)| v)
}

impl State {
    fn info(&self, res: &ApiResource) -> Result<ResourceInfo, Status> {
        self.resources
            .get(&(res.group.clone(), res.plural.clone()))
            .cloned()
            .ok_or_else(|| {
                status(
                    404,
                    "NotFound",
                    format!(
                        "the server could not find the requested resource ({})",
                        qualified(res)
                    ),
                )
            })
    }

    fn next_uid(&mut self) -> String {
        self.uid_counter += 1;
        uid_from(self.uid_counter ^ self.rv.rotate_left(32))
    }

    fn create(
        &mut self,
        res: &ApiResource,
        mut object: Value,
        path_namespace: Option<&str>,
        dry_run: bool,
    ) -> Result<Value, Status> {
        let info = self.info(res)?;
        let api = &info.api;
        let Some(obj) = object.as_object_mut() else {
            return Err(invalid(
                api,
                "",
                "metadata",
                "the object must be a JSON object",
            ));
        };
        obj.insert("apiVersion".into(), Value::String(api.api_version.clone()));
        obj.insert("kind".into(), Value::String(api.kind.clone()));
        let meta = obj
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(meta) = meta.as_object_mut() else {
            return Err(invalid(api, "", "metadata", "must be an object"));
        };
        let mut name = meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if name.is_empty() {
            let Some(prefix) = meta.get("generateName").and_then(Value::as_str) else {
                return Err(invalid(
                    api,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                ));
            };
            self.uid_counter += 1;
            let suffix: String = (0..5)
                .map(|i| {
                    let alphabet = b"bcdfghjklmnpqrstvwxz2456789";
                    let r = splitmix(self.uid_counter * 31 + i);
                    alphabet[(r % alphabet.len() as u64) as usize] as char
                })
                .collect();
            name = format!("{prefix}{suffix}");
            meta.insert("name".into(), Value::String(name.clone()));
        }
        let namespace = match api.scope {
            Scope::Cluster => {
                meta.remove("namespace");
                String::new()
            }
            Scope::Namespaced => {
                let given = meta
                    .get("namespace")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                if let (Some(g), Some(p)) = (&given, path_namespace)
                    && g != p
                {
                    return Err(status(
                        400,
                        "BadRequest",
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                let ns = given
                    .or_else(|| path_namespace.map(str::to_owned))
                    .unwrap_or_else(|| "default".to_owned());
                meta.insert("namespace".into(), Value::String(ns.clone()));
                ns
            }
        };
        let table = self.tables.entry((*info.key).clone()).or_default();
        if table.contains_key(&(namespace.clone(), name.clone())) {
            let what = qualified(api);
            return Err(object_status(
                409,
                "AlreadyExists",
                format!("{what} \"{name}\" already exists"),
                api,
                &name,
            ));
        }
        let rv = self.rv + 1;
        let uid = self.next_uid();
        let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
            unreachable_meta()
        };
        meta.insert("uid".into(), Value::String(uid));
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        if info.generation {
            meta.insert("generation".into(), Value::from(1));
        } else {
            meta.remove("generation");
        }
        if info.drops_observed_generation {
            drop_observed_generation(&mut object);
        }
        let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
            unreachable_meta()
        };
        if !meta.get("creationTimestamp").is_some_and(Value::is_string) {
            meta.insert("creationTimestamp".into(), Value::String(now_rfc3339()));
        }
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        if dry_run {
            // Nothing is stored, so the object has no version yet.
            meta.remove("resourceVersion");
            return Ok(object);
        }
        let stored = Stored::from_value(&object, &info);
        self.commit(&info, EventKind::Added, stored, None);
        Ok(object)
    }

    /// Replaces `current` with `object`, keeping server-owned metadata, and what the kind's
    /// strategy keeps for this `write`.
    fn replace(
        &mut self,
        info: &ResourceInfo,
        mut object: Value,
        current: &Arc<Stored>,
        write: Write,
        check: Check<'_>,
        dry_run: bool,
    ) -> Result<Value, Status> {
        let api = &info.api;
        let old = current.value();
        if info.status_subresource && object.is_object() {
            match write {
                Write::Storage => {}
                Write::Object => keep_stored_status(info, &mut object, &old),
                Write::Status => object = keep_all_but_status(info, object, &old),
                Write::Finalize => object = keep_all_but_finalizers(&object, &old),
            }
        }
        let Some(obj) = object.as_object_mut() else {
            return Err(invalid(
                api,
                &current.name,
                "metadata",
                "the object must be a JSON object",
            ));
        };
        obj.insert("apiVersion".into(), Value::String(api.api_version.clone()));
        obj.insert("kind".into(), Value::String(api.kind.clone()));
        let old_meta = &old["metadata"];
        let meta = obj
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(meta) = meta.as_object_mut() else {
            return Err(invalid(api, &current.name, "metadata", "must be an object"));
        };
        if meta
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| n != current.name)
        {
            return Err(invalid(
                api,
                &current.name,
                "metadata.name",
                "field is immutable",
            ));
        }
        meta.insert("name".into(), Value::String(current.name.clone()));
        if api.scope == Scope::Namespaced {
            meta.insert("namespace".into(), Value::String(current.namespace.clone()));
        } else {
            meta.remove("namespace");
        }
        for k in [
            "uid",
            "creationTimestamp",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            match old_meta.get(k) {
                Some(v) => meta.insert(k.into(), v.clone()),
                None => meta.remove(k),
            };
        }
        meta.insert(
            "resourceVersion".into(),
            Value::String(current.rv.to_string()),
        );
        check(&old, &mut object)?;
        if info.drops_observed_generation {
            drop_observed_generation(&mut object);
        }
        if object == old || dry_run {
            return Ok(object);
        }
        // An object marked for deletion whose last finalizer is removed (and whose grace period is
        // over) is deleted instead of updated, as the registry does.
        if old_meta.get("deletionTimestamp").is_some()
            && !has_finalizers(&object)
            && old_meta["deletionGracePeriodSeconds"].as_i64().unwrap_or(0) == 0
            && !namespace_held(info, &object)
        {
            return Ok(self.remove(info, current));
        }
        let rv = self.rv + 1;
        // Only a change of the spec bumps the generation, and never through `/status`.
        let bump = info.generation && write != Write::Status && info.spec_changed(&old, &object);
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
            if bump {
                let generation = old_meta["generation"].as_i64().unwrap_or(0);
                meta.insert("generation".into(), Value::from(generation + 1));
            }
        }
        let stored = Stored::from_value(&object, info);
        self.commit(info, EventKind::Modified, stored, Some(Arc::clone(current)));
        Ok(object)
    }

    fn delete(
        &mut self,
        res: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, Status> {
        let info = self.info(res)?;
        let key = obj_key(&info.api, namespace, name);
        let current = self
            .tables
            .get(&*info.key)
            .and_then(|t| t.get(&key))
            .cloned()
            .ok_or_else(|| not_found(&info.api, name))?;
        Ok(self.remove(&info, &current))
    }

    /// Removes an object: a DELETED event carrying its last state at the delete's version.
    fn remove(&mut self, info: &ResourceInfo, current: &Arc<Stored>) -> Value {
        let mut last = current.value();
        let rv = self.rv + 1;
        if let Some(meta) = last.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let stored = Stored::from_value(&last, info);
        self.commit(info, EventKind::Deleted, stored, Some(Arc::clone(current)));
        last
    }

    /// Deletes a namespace as its registry does (`pkg/registry/core/namespace/storage/storage.go`,
    /// `Delete`): the first delete sets `deletionTimestamp` and phase `Terminating` (a MODIFIED)
    /// and leaves the rest to the namespace controller (`crate::namespaces`), which empties the
    /// namespace and then takes its finalizer out of `spec.finalizers`. Until then a delete
    /// answers the namespace as it is; after, it is an ordinary delete.
    fn delete_namespace(
        &mut self,
        res: &ApiResource,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<(Value, Deletion), Status> {
        let info = self.info(res)?;
        let key = obj_key(&info.api, None, name);
        let current = self
            .tables
            .get(&*info.key)
            .and_then(|t| t.get(&key))
            .cloned()
            .ok_or_else(|| not_found(&info.api, name))?;
        // Preconditions first, through the ordinary path on a copy of the options.
        let check = DeleteOptions {
            dry_run: true,
            ..opts.clone()
        };
        self.delete_with(res, None, name, &check)?;
        let mut object = current.value();
        if object["metadata"].get("deletionTimestamp").is_some() {
            if namespace_held(&info, &object) {
                return Ok((object, Deletion::Pending));
            }
            return self.delete_with(res, None, name, opts);
        }
        if let Some(m) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("deletionTimestamp".into(), Value::String(now_rfc3339()));
        }
        object["status"]["phase"] = Value::from("Terminating");
        if opts.dry_run {
            return Ok((object, Deletion::Pending));
        }
        set_rv(&mut object, self.rv + 1);
        let stored = Stored::from_value(&object, &info);
        self.commit(&info, EventKind::Modified, stored, Some(current));
        Ok((object, Deletion::Pending))
    }

    /// A delete as the API server makes it: preconditions, dry run, graceful deletion of pods,
    /// finalizers. Returns the object as the response carries it and whether it is gone.
    fn delete_with(
        &mut self,
        res: &ApiResource,
        namespace: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<(Value, Deletion), Status> {
        let info = self.info(res)?;
        let key = obj_key(&info.api, namespace, name);
        let current = self
            .tables
            .get(&*info.key)
            .and_then(|t| t.get(&key))
            .cloned()
            .ok_or_else(|| not_found(&info.api, name))?;
        let mut object = current.value();
        let meta = &object["metadata"];
        if let Some(uid) = &opts.precondition_uid
            && meta["uid"].as_str() != Some(uid.as_str())
        {
            return Err(precondition_failed(
                &info.api,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta["uid"].as_str().unwrap_or_default()
                ),
            ));
        }
        if let Some(rv) = &opts.precondition_resource_version
            && *rv != current.rv.to_string()
        {
            return Err(precondition_failed(
                &info.api,
                name,
                &format!(
                    "Operation cannot be fulfilled on {} \"{name}\": the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                    qualified(&info.api),
                    current.rv
                ),
            ));
        }
        let is_pod = info.api.group.is_empty() && info.api.plural == "pods";
        let grace = if is_pod {
            let requested = opts.grace_period_seconds.unwrap_or_else(|| {
                object["spec"]["terminationGracePeriodSeconds"]
                    .as_i64()
                    .unwrap_or(30)
            });
            let unscheduled = object["spec"]["nodeName"]
                .as_str()
                .unwrap_or_default()
                .is_empty();
            let finished = matches!(
                object["status"]["phase"].as_str(),
                Some("Succeeded" | "Failed")
            );
            if unscheduled || finished {
                0
            } else {
                requested.max(0)
            }
        } else {
            0
        };
        let terminating = meta.get("deletionTimestamp").is_some();
        let current_grace = meta["deletionGracePeriodSeconds"].as_i64();
        let finalizers = has_finalizers(&object);
        if grace == 0 && !finalizers {
            if opts.dry_run {
                return Ok((object, Deletion::Gone));
            }
            // A pod's delete is graceful even at zero: the registry first writes the mark (a
            // MODIFIED with `deletionTimestamp` and a zero grace period), then deletes, unless
            // the stored pod already carries a zero grace period
            // (`registry/generic/registry/store.go`, `Delete`; `registry/rest/delete.go`).
            if is_pod && current_grace != Some(0) {
                let now = u64::try_from(jiff::Timestamp::now().as_second()).unwrap_or(0);
                let generation = meta["generation"].as_i64().filter(|g| *g > 0);
                if let Some(m) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.insert("deletionTimestamp".into(), Value::String(rfc3339(now)));
                    m.insert("deletionGracePeriodSeconds".into(), Value::from(0));
                    if let Some(g) = generation
                        && !terminating
                    {
                        m.insert("generation".into(), Value::from(g + 1));
                    }
                }
                set_rv(&mut object, self.rv + 1);
                let marked = Stored::from_value(&object, &info);
                self.commit(
                    &info,
                    EventKind::Modified,
                    Arc::clone(&marked),
                    Some(current),
                );
                return Ok((self.remove(&info, &marked), Deletion::Gone));
            }
            return Ok((self.remove(&info, &current), Deletion::Gone));
        }
        // Marked for deletion: a deletionTimestamp, and a grace period that only ever shortens.
        if terminating && current_grace.is_some_and(|g| g <= grace) {
            return Ok((object, Deletion::Pending));
        }
        let now = jiff::Timestamp::now().as_second();
        // The first mark bumps a generation the object has (registry/rest/delete.go).
        let generation = meta["generation"].as_i64().filter(|g| *g > 0);
        if let Some(m) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            let at = u64::try_from(now + grace).unwrap_or(0);
            if !(terminating && grace == 0) {
                m.insert("deletionTimestamp".into(), Value::String(rfc3339(at)));
            }
            m.insert("deletionGracePeriodSeconds".into(), Value::from(grace));
            if let Some(g) = generation
                && !terminating
            {
                m.insert("generation".into(), Value::from(g + 1));
            }
        }
        if opts.dry_run {
            return Ok((object, Deletion::Pending));
        }
        let rv = self.rv + 1;
        set_rv(&mut object, rv);
        let stored = Stored::from_value(&object, &info);
        self.commit(&info, EventKind::Modified, stored, Some(current));
        if grace > 0 {
            // The kubelet deletes the pod once its containers have had the grace period to stop.
            let due =
                tokio::time::Instant::now() + std::time::Duration::from_secs(grace.unsigned_abs());
            self.terminations.push((due, (*info.key).clone(), key));
        }
        Ok((object, Deletion::Pending))
    }

    /// Applies a write: bumps the global version, updates the table, records the event.
    fn commit(
        &mut self,
        info: &ResourceInfo,
        kind: EventKind,
        object: Arc<Stored>,
        prev: Option<Arc<Stored>>,
    ) {
        self.rv += 1;
        debug_assert_eq!(object.rv, self.rv);
        let table = self.tables.entry((*info.key).clone()).or_default();
        if kind == EventKind::Deleted {
            table.remove(&object.key());
        } else {
            table.insert(object.key(), Arc::clone(&object));
        }
        self.history.push_back(Arc::new(Event {
            rv: self.rv,
            resource: Arc::clone(&info.key),
            kind,
            object,
            prev,
            lines: Default::default(),
            at: tokio::time::Instant::now(),
        }));
        while self.history.len() > self.history_window {
            if let Some(e) = self.history.pop_front() {
                self.compacted = e.rv;
            }
        }
        let compacted = self.compacted;
        self.snapshots.retain(|(_, at, _)| *at >= compacted);
    }

    fn snapshot(&mut self, res: &ResKey, at: u64) -> Result<Snapshot, Status> {
        if at < self.compacted {
            return Err(too_old(at, self.compacted));
        }
        if let Some((_, _, snap)) = self.snapshots.iter().find(|(r, a, _)| r == res && *a == at) {
            return Ok(Arc::clone(snap));
        }
        let empty = BTreeMap::new();
        let table = self.tables.get(res).unwrap_or(&empty);
        let snap: Vec<Arc<Stored>> = if at >= self.rv {
            table.values().cloned().collect()
        } else {
            // Roll the current state back to `at` by undoing every later write of this resource.
            let mut past = table.clone();
            for ev in self.history.iter().rev().take_while(|e| e.rv > at) {
                if *ev.resource != *res {
                    continue;
                }
                match (&ev.kind, &ev.prev) {
                    (EventKind::Added, _) => {
                        past.remove(&ev.object.key());
                    }
                    (_, Some(prev)) => {
                        past.insert(prev.key(), Arc::clone(prev));
                    }
                    (_, None) => {}
                }
            }
            past.into_values().collect()
        };
        let snap = Arc::new(snap);
        self.snapshots
            .push_back((res.clone(), at.min(self.rv), Arc::clone(&snap)));
        while self.snapshots.len() > SNAPSHOT_CACHE {
            self.snapshots.pop_front();
        }
        Ok(snap)
    }
}

fn unreachable_meta() -> ! {
    // `metadata` was inserted as an object just above.
    panic!("metadata is an object")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pods() -> ApiResource {
        ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced)
    }

    #[test]
    fn rfc3339_formats_known_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_714_557_600), "2024-05-01T10:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(u64::MAX), "9999-12-31T23:59:59Z");
        let now = now_rfc3339();
        assert!(now.len() == 20 && now.ends_with('Z'), "{now}");
    }

    #[test]
    fn merge_patch_follows_rfc7386() {
        let mut t = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge_patch(&mut t, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(t, json!({"a": "z", "c": {"d": "e"}}));
        merge_patch(&mut t, &json!({"a": [1]}));
        assert_eq!(t["a"], json!([1]));
    }

    #[test]
    fn writes_bump_versions_and_generation() {
        let s = Store::new(100);
        let a = s
            .create(
                &pods(),
                json!({"metadata": {"name": "a"}, "spec": {"x": 1}}),
            )
            .unwrap();
        assert_eq!(a["metadata"]["namespace"], "default");
        assert_eq!(a["metadata"]["generation"], 1);
        assert_eq!(a["metadata"]["resourceVersion"], "2");
        // A no-op replace writes nothing.
        let same = s.update(&pods(), a.clone()).unwrap();
        assert_eq!(same["metadata"]["resourceVersion"], "2");
        assert_eq!(s.resource_version(), 2);
        // A label change bumps the version but not the generation.
        let b = s
            .patch(
                &pods(),
                Some("default"),
                "a",
                json!({"metadata": {"labels": {"x": "y"}}}),
            )
            .unwrap();
        assert_eq!(
            (
                b["metadata"]["resourceVersion"].as_str(),
                b["metadata"]["generation"].as_i64()
            ),
            (Some("3"), Some(1))
        );
        let c = s
            .patch(&pods(), Some("default"), "a", json!({"spec": {"x": 2}}))
            .unwrap();
        assert_eq!(c["metadata"]["generation"], 2);
        // A stale resourceVersion conflicts.
        let err = s.update(&pods(), a).unwrap_err();
        assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
        let d = s.delete(&pods(), Some("default"), "a").unwrap();
        assert_eq!(d["metadata"]["resourceVersion"], "5");
        assert_eq!(
            s.delete(&pods(), Some("default"), "a").unwrap_err().code,
            404
        );
    }

    #[test]
    fn snapshots_roll_back_to_past_versions() {
        let s = Store::new(100);
        let p = pods();
        for n in ["a", "b", "c"] {
            s.create(&p, json!({"metadata": {"name": n}})).unwrap();
        }
        let at = s.resource_version();
        s.delete(&p, None, "a").unwrap();
        s.patch(&p, None, "b", json!({"metadata": {"labels": {"v": "2"}}}))
            .unwrap();
        s.create(&p, json!({"metadata": {"name": "d"}})).unwrap();
        let key = (String::new(), "pods".to_owned());
        let snap = s.snapshot(&key, at).unwrap();
        let names: Vec<_> = snap
            .iter()
            .map(|o| (o.name.as_str(), o.labels.len()))
            .collect();
        assert_eq!(names, [("a", 0), ("b", 0), ("c", 0)]);
        s.compact_now();
        assert_eq!(s.snapshot(&key, at).unwrap_err().code, 410);
    }

    #[test]
    fn history_window_compacts_oldest_events() {
        let s = Store::new(2);
        for n in ["a", "b", "c"] {
            s.create(&pods(), json!({"metadata": {"name": n}})).unwrap();
        }
        let (rv, compacted) = s.versions();
        assert_eq!((rv, compacted), (4, 2));
        assert_eq!(s.events_after(1, 10).unwrap_err().code, 410);
        let evs = s.events_after(2, 10).unwrap();
        assert_eq!(evs.iter().map(|e| e.rv).collect::<Vec<_>>(), [3, 4]);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Create(u8, u8),
        Patch(u8, u8),
        Delete(u8),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            (0u8..5, 0u8..3).prop_map(|(n, v)| Op::Create(n, v)),
            (0u8..5, 0u8..3).prop_map(|(n, v)| Op::Patch(n, v)),
            (0u8..5).prop_map(Op::Delete),
        ]
    }

    type Model = BTreeMap<String, u8>;

    fn view(objects: &[Arc<Stored>]) -> Model {
        objects
            .iter()
            .map(|o| (o.name.clone(), o.labels["v"].parse().unwrap()))
            .collect()
    }

    proptest::proptest! {
        /// The store against a map: every write's outcome, the current state, every snapshot still
        /// inside the history window, and replaying the history from the oldest kept version.
        #[test]
        fn store_matches_a_model(ops in proptest::collection::vec(op(), 0..40), window in 2usize..30) {
            let s = Store::new(window);
            let p = pods();
            let key = (String::new(), "pods".to_owned());
            let mut model = Model::new();
            let mut states = vec![(s.resource_version(), model.clone())];
            for op in ops {
                let before = s.resource_version();
                let (ok, changed) = match &op {
                    Op::Create(n, v) => {
                        let name = format!("p{n}");
                        let r = s.create(&p, json!({"metadata": {"name": name, "labels": {"v": v.to_string()}}}));
                        let ok = !model.contains_key(&name);
                        if ok { model.insert(name, *v); }
                        (r.is_ok() == ok, ok)
                    }
                    Op::Patch(n, v) => {
                        let name = format!("p{n}");
                        let r = s.patch(&p, None, &name, json!({"metadata": {"labels": {"v": v.to_string()}}}));
                        let old = model.get(&name).copied();
                        if old.is_some() { model.insert(name, *v); }
                        (r.is_ok() == old.is_some(), old.is_some_and(|o| o != *v))
                    }
                    Op::Delete(n) => {
                        let name = format!("p{n}");
                        let r = s.delete(&p, None, &name);
                        let ok = model.remove(&name).is_some();
                        (r.is_ok() == ok, ok)
                    }
                };
                proptest::prop_assert!(ok, "{op:?}");
                proptest::prop_assert_eq!(s.resource_version(), before + u64::from(changed), "{:?}", op);
                if changed { states.push((s.resource_version(), model.clone())); }
            }
            let (current, compacted) = s.versions();
            proptest::prop_assert_eq!(view(&s.snapshot(&key, current).unwrap()), model.clone());
            for (rv, state) in &states {
                match s.snapshot(&key, *rv) {
                    Ok(snap) => {
                        proptest::prop_assert!(*rv >= compacted);
                        proptest::prop_assert_eq!(&view(&snap), state);
                    }
                    Err(e) => proptest::prop_assert!(*rv < compacted && e.code == 410),
                }
            }
            // Replaying the kept history over the oldest readable state gives the current state.
            let mut replay = view(&s.snapshot(&key, compacted).unwrap());
            for ev in s.events_after(compacted, usize::MAX).unwrap() {
                match ev.kind {
                    EventKind::Deleted => { replay.remove(&ev.object.name); }
                    _ => { replay.insert(ev.object.name.clone(), ev.object.labels["v"].parse().unwrap()); }
                }
            }
            proptest::prop_assert_eq!(replay, model);
        }
    }
}
