//! The controllers of kube-controller-manager that look after namespaces, run by the server as
//! one task next to its kubelet:
//!
//! - the namespace controller (`pkg/controller/namespace/namespace_controller.go` and
//!   `deletion/namespaced_resources_deleter.go`): once a namespace is marked for deletion, it
//!   deletes everything in it as `deletecollection` does (pods gracefully, objects with
//!   finalizers only marked), reports what remains in the namespace's five deletion conditions
//!   (`deletion/status_condition_utils.go`), looks again while content remains, and when nothing
//!   is left takes the `kubernetes` finalizer out of `spec.finalizers`, as its `/finalize` write
//!   does; the registry then deletes the namespace, unless `metadata.finalizers` still hold it;
//! - the root CA publisher (`pkg/controller/certificates/rootcacertpublisher/publisher.go`): a
//!   `kube-root-ca.crt` ConfigMap in every namespace, put back when deleted or changed;
//! - the service account controller (`pkg/controller/serviceaccount/serviceaccounts_controller.go`):
//!   a `default` ServiceAccount in every active namespace, put back when deleted.
//!
//! They follow the store's history as their informers follow a watch (and relist when it has
//! been compacted away), so in-process writes count as much as HTTP ones. A bare [`Store`], with
//! no server, runs none of them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kinformer_core::{ApiResource, Scope};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::store::{DeleteOptions, Event, EventKind, Store, Write, now_rfc3339};

/// The finalizer of `spec.finalizers` the namespace controller owns (`FinalizerKubernetes`).
const FINALIZER: &str = "kubernetes";

/// The root CA publisher's ConfigMap, and the annotation that says what it is for
/// (`RootCACertConfigMapName`, `DescriptionAnnotation`, `Description`).
const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// The service account every active namespace gets (`DefaultServiceAccountsControllerOptions`).
const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// How long the deleter allows finalizers on remaining content (`finalizerEstimateSeconds`).
const FINALIZER_ESTIMATE_SECONDS: u64 = 15;

/// How soon after a change to a terminating namespace, or to anything in it, the sim syncs the
/// namespace. The real controller waits 5 s after each change of the namespace
/// (`namespaceDeletionGracePeriod`, for HA API servers to catch up) and otherwise polls while
/// content remains; the sim has one API server and looks again as soon as the writes of the
/// moment (a kubelet's status report and its delete) have landed.
const SETTLE: Duration = Duration::from_millis(10);

/// A failed sync is retried after 5 ms, doubling up to 60 s (`nsControllerRateLimiter`).
const BACKOFF_FIRST: Duration = Duration::from_millis(5);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// How many events are read from the history at a time.
const BATCH: usize = 4096;

/// The conditions the deleter owns, in the order it writes them, each with the reason and
/// message of its healthy (`False`) form (`status_condition_utils.go`: `conditionTypes`,
/// `okReasons`, `okMessages`).
const CONDITIONS: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
];

fn namespaces() -> ApiResource {
    ApiResource::new("", "v1", "Namespace", "namespaces", Scope::Cluster)
}

fn configmaps() -> ApiResource {
    ApiResource::new("", "v1", "ConfigMap", "configmaps", Scope::Namespaced)
}

fn serviceaccounts() -> ApiResource {
    ApiResource::new(
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        Scope::Namespaced,
    )
}

fn is_core(e: &Event, plural: &str) -> bool {
    e.resource.0.is_empty() && e.resource.1 == plural
}

fn terminating(ns: &Value) -> bool {
    ns["metadata"].get("deletionTimestamp").is_some()
}

/// Runs the namespace controller, the root CA publisher and the service account controller until
/// `shutdown`. `ca_pem` is the CA the published ConfigMap carries (the server's, with TLS; one
/// generated on first use otherwise).
pub(crate) async fn namespace_controllers(
    store: Store,
    ca_pem: Option<String>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut writes = store.subscribe();
    let mut controllers = Controllers::new(store, ca_pem);
    // Bounded by shutdown: the loop ends when the server is shut down or dropped. Each turn
    // waits for a write or a requeue, and writes only what has changed, so it never spins.
    loop {
        // Marked seen before reading, so that a write made meanwhile wakes the next turn.
        writes.borrow_and_update();
        controllers.catch_up();
        controllers.publish();
        controllers.sync_due(Instant::now());
        let next = controllers.next_due();
        tokio::select! {
            changed = writes.changed() => if changed.is_err() {
                return;
            },
            () = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
    }
}

/// A namespace marked for deletion, as the namespace controller's queue holds it.
#[derive(Debug)]
struct Queued {
    /// When the controller first saw it terminating: its estimates count from here.
    since: Instant,
    /// When to sync it next.
    due: Instant,
    /// Failed syncs in a row, for the backoff.
    failures: u32,
}

/// What one sync of a terminating namespace asks for next.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Nothing more to do: finalized, gone, or no longer terminating.
    Done,
    /// Content remains: look again after this long (`ResourcesRemainingError`).
    Remaining(Duration),
    /// A write failed or content remains unexpectedly: retry with backoff.
    Failed,
}

struct Controllers {
    store: Store,
    ca_pem: Option<String>,
    /// The version of the last event read.
    seen: u64,
    /// Whether the history has been read from the start (or relisted) yet.
    listed: bool,
    /// Namespaces whose ConfigMap and ServiceAccount are to be checked.
    publish: BTreeSet<String>,
    /// Terminating namespaces.
    queue: BTreeMap<String, Queued>,
}

impl Controllers {
    fn new(store: Store, ca_pem: Option<String>) -> Self {
        Self {
            store,
            ca_pem,
            seen: 0,
            listed: false,
            publish: BTreeSet::new(),
            queue: BTreeMap::new(),
        }
    }

    /// Reads what was written since the last turn, as the controllers' informers would get it;
    /// relists every namespace instead when that history has been compacted away (or on the
    /// first turn). A write made meanwhile wakes the next turn.
    fn catch_up(&mut self) {
        if !self.listed {
            self.relist();
            return;
        }
        // Bounded: each round reads newer events, up to the current version.
        loop {
            let events = match self.store.events_after(self.seen, BATCH) {
                Ok(events) => events,
                Err(_) => {
                    self.relist();
                    return;
                }
            };
            let Some(last) = events.last() else {
                return;
            };
            self.seen = last.rv;
            for e in &events {
                self.observe(e);
            }
        }
    }

    fn relist(&mut self) {
        let (rv, _) = self.store.versions();
        let listed = self.store.list(&namespaces(), None);
        let names: BTreeSet<String> = listed
            .iter()
            .filter_map(|ns| ns["metadata"]["name"].as_str().map(str::to_owned))
            .collect();
        self.queue.retain(|name, _| names.contains(name));
        for ns in &listed {
            self.observe_namespace(ns);
        }
        self.seen = rv;
        self.listed = true;
    }

    fn observe(&mut self, e: &Event) {
        let now = Instant::now();
        if is_core(e, "namespaces") {
            if e.kind == EventKind::Deleted {
                self.queue.remove(&e.object.name);
                self.publish.remove(&e.object.name);
            } else {
                self.observe_namespace(&e.object.value());
            }
            return;
        }
        let ns = &e.object.namespace;
        if ns.is_empty() {
            return;
        }
        // The publisher puts its ConfigMap back when it is deleted or changed, the service account
        // controller its account when deleted.
        let republish = match e.kind {
            EventKind::Added => false,
            EventKind::Modified => is_core(e, "configmaps") && e.object.name == ROOT_CA_CONFIGMAP,
            EventKind::Deleted => {
                (is_core(e, "configmaps") && e.object.name == ROOT_CA_CONFIGMAP)
                    || (is_core(e, "serviceaccounts") && e.object.name == DEFAULT_SERVICE_ACCOUNT)
            }
        };
        if republish {
            self.publish.insert(ns.clone());
        }
        // Content of a terminating namespace changed: look at it again soon.
        if let Some(q) = self.queue.get_mut(ns) {
            q.due = q.due.min(now + SETTLE);
        }
    }

    fn observe_namespace(&mut self, ns: &Value) {
        let Some(name) = ns["metadata"]["name"].as_str() else {
            return;
        };
        let now = Instant::now();
        if terminating(ns) {
            self.queue
                .entry(name.to_owned())
                .and_modify(|q| q.due = q.due.min(now + SETTLE))
                .or_insert(Queued {
                    since: now,
                    due: now + SETTLE,
                    failures: 0,
                });
        } else {
            self.queue.remove(name);
            self.publish.insert(name.to_owned());
        }
    }

    fn next_due(&self) -> Option<Instant> {
        self.queue.values().map(|q| q.due).min()
    }

    /// The root CA publisher's and the service account controller's syncs, for every namespace
    /// that has changed.
    fn publish(&mut self) {
        for name in std::mem::take(&mut self.publish) {
            let Some(ns) = self.store.get(&namespaces(), None, &name) else {
                continue;
            };
            // Content cannot be created in a terminating namespace (NamespaceLifecycle
            // refuses it), so neither controller tries.
            if terminating(&ns) {
                continue;
            }
            self.publish_root_ca(&name);
            if ns["status"]["phase"] == "Active" {
                self.ensure_service_account(&name);
            }
        }
    }

    fn publish_root_ca(&mut self, ns: &str) {
        let pem = self.ca_pem.get_or_insert_with(generate_ca_pem).clone();
        let data = json!({ "ca.crt": pem });
        match self.store.get(&configmaps(), Some(ns), ROOT_CA_CONFIGMAP) {
            None => {
                let cm = json!({
                    "metadata": {
                        "name": ROOT_CA_CONFIGMAP,
                        "namespace": ns,
                        "annotations": { DESCRIPTION_ANNOTATION: DESCRIPTION },
                    },
                    "data": data,
                });
                if let Err(e) = self.store.create(&configmaps(), cm) {
                    tracing::debug!(ns, error = %e.message, "root CA ConfigMap not created");
                }
            }
            Some(mut cm) => {
                let described = cm["metadata"]["annotations"][DESCRIPTION_ANNOTATION]
                    .as_str()
                    .is_some_and(|d| !d.is_empty());
                if cm["data"] == data && described {
                    return;
                }
                cm["data"] = data;
                let annotations = &mut cm["metadata"]["annotations"];
                if !annotations.is_object() {
                    *annotations = json!({});
                }
                annotations[DESCRIPTION_ANNOTATION] = json!(DESCRIPTION);
                if let Err(e) = self.store.update(&configmaps(), cm) {
                    tracing::debug!(ns, error = %e.message, "root CA ConfigMap not restored");
                    // A conflict: read it again on the next turn.
                    self.publish.insert(ns.to_owned());
                }
            }
        }
    }

    fn ensure_service_account(&mut self, ns: &str) {
        if self
            .store
            .get_stored(&serviceaccounts(), Some(ns), DEFAULT_SERVICE_ACCOUNT)
            .is_some()
        {
            return;
        }
        let sa = json!({"metadata": {"name": DEFAULT_SERVICE_ACCOUNT, "namespace": ns}});
        if let Err(e) = self.store.create(&serviceaccounts(), sa) {
            tracing::debug!(ns, error = %e.message, "default ServiceAccount not created");
        }
    }

    /// Syncs every terminating namespace that is due.
    fn sync_due(&mut self, now: Instant) {
        let due: Vec<String> = self
            .queue
            .iter()
            .filter(|(_, q)| q.due <= now)
            .map(|(name, _)| name.clone())
            .collect();
        for name in due {
            let Some(since) = self.queue.get(&name).map(|q| q.since) else {
                continue;
            };
            let outcome = sync_namespace(&self.store, &name, now.saturating_duration_since(since));
            tracing::debug!(namespace = %name, ?outcome, "namespace synced");
            let Some(q) = self.queue.get_mut(&name) else {
                continue;
            };
            match outcome {
                Outcome::Done => {
                    self.queue.remove(&name);
                }
                Outcome::Remaining(after) => {
                    q.failures = 0;
                    q.due = now + after;
                }
                Outcome::Failed => {
                    let backoff = BACKOFF_FIRST
                        .saturating_mul(1 << q.failures.min(20))
                        .min(BACKOFF_MAX);
                    q.failures += 1;
                    q.due = now + backoff;
                }
            }
        }
    }
}

/// One sync of the namespace controller (`namespacedResourcesDeleter.Delete`): `elapsed` is how
/// long the namespace has been terminating.
fn sync_namespace(store: &Store, name: &str, elapsed: Duration) -> Outcome {
    let api = namespaces();
    let Some(mut ns) = store.get(&api, None, name) else {
        return Outcome::Done;
    };
    if !terminating(&ns) {
        return Outcome::Done;
    }
    // The phase, should anything have written it back.
    if ns["status"]["phase"] != "Terminating" {
        if let Some(status) = status_object(&mut ns["status"]) {
            status.insert("phase".into(), json!("Terminating"));
        }
        match write_status(store, ns) {
            Ok(written) => ns = written,
            Err(()) => return Outcome::Failed,
        }
    }
    let finalizers: Vec<String> = ns["spec"]["finalizers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|f| f.as_str().map(str::to_owned))
        .collect();
    if finalizers.is_empty() {
        return Outcome::Done;
    }
    let content = delete_all_content(store, name, elapsed);
    // The conditions are written whenever they change, so that a namespace that recovers says so.
    let mut status = ns["status"].clone();
    if update_conditions(&mut status, &content) {
        ns["status"] = status;
        match write_status(store, ns) {
            Ok(written) => ns = written,
            Err(()) => return Outcome::Failed,
        }
    }
    if !content.errors.is_empty() {
        return Outcome::Failed;
    }
    if content.estimate > 0 {
        return Outcome::Remaining(Duration::from_secs(content.estimate / 2 + 1));
    }
    // Finalize: `spec.finalizers` without ours, as a sorted set (`finalizeNamespace`).
    let rest: BTreeSet<&str> = finalizers
        .iter()
        .map(String::as_str)
        .filter(|f| *f != FINALIZER)
        .collect();
    if let Some(spec) = ns.get_mut("spec").and_then(Value::as_object_mut) {
        if rest.is_empty() {
            spec.remove("finalizers");
        } else {
            spec.insert("finalizers".into(), json!(rest));
        }
    }
    match store.write_update(&api, ns, None, Write::Storage, &|_, _| Ok(()), false) {
        Ok(_) => Outcome::Done,
        Err(e) if e.code == 404 => Outcome::Done,
        Err(e) => {
            tracing::debug!(namespace = name, error = %e.message, "namespace not finalized");
            Outcome::Failed
        }
    }
}

/// Writes a namespace's status (as `UpdateStatus` does, with its resourceVersion as the
/// precondition) and returns what was stored.
fn write_status(store: &Store, ns: Value) -> Result<Value, ()> {
    store
        .write_update(
            &namespaces(),
            ns,
            None,
            Write::Status,
            &|_, _| Ok(()),
            false,
        )
        .map_err(|e| tracing::debug!(error = %e.message, "namespace status not written"))
}

/// What one pass over a namespace's content found (`allGVRDeletionMetadata` and the errors).
#[derive(Debug, Default)]
struct Content {
    /// Seconds to wait before looking again; 0 when nothing remains.
    estimate: u64,
    /// `resource.group` of each resource with objects left, and how many.
    remaining: BTreeMap<String, usize>,
    /// Each finalizer on the objects left, and on how many.
    finalizers: BTreeMap<String, usize>,
    errors: Vec<String>,
}

/// Deletes everything in namespace `ns`, resource by resource, as the deleter's
/// `deleteAllContent` does, and says what is left.
fn delete_all_content(store: &Store, ns: &str, elapsed: Duration) -> Content {
    let mut content = Content::default();
    for info in store.resources() {
        let api = &info.api;
        if api.scope != Scope::Namespaced {
            continue;
        }
        let is_pods = api.group.is_empty() && api.plural == "pods";
        // The estimate first: the longest grace period of a pod not yet finished
        // (`estimateGracefulTerminationForPods`), unless that long has passed already.
        let mut estimate = 0;
        let objects = store.list(api, Some(ns));
        if is_pods {
            estimate = objects
                .iter()
                .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
                .filter_map(|p| p["spec"]["terminationGracePeriodSeconds"].as_u64())
                .max()
                .unwrap_or(0);
            if elapsed >= Duration::from_secs(estimate) {
                estimate = 0;
            }
        }
        // deletecollection: each object deleted with the default options.
        for o in &objects {
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            if let Err(e) = store.delete_with(api, Some(ns), name, &DeleteOptions::default())
                && e.code != 404
            {
                content.errors.push(e.message);
            }
        }
        let left = store.list(api, Some(ns));
        if left.is_empty() {
            continue;
        }
        let mut finalizers: BTreeMap<String, usize> = BTreeMap::new();
        for o in &left {
            for f in o["metadata"]["finalizers"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                if let Some(f) = f.as_str() {
                    *finalizers.entry(f.to_owned()).or_default() += 1;
                }
            }
        }
        let estimate = if estimate != 0 {
            estimate
        } else if !finalizers.is_empty() {
            FINALIZER_ESTIMATE_SECONDS
        } else {
            // Nothing should hold it, yet it is there.
            content.errors.push(format!(
                "unexpected items still remain in namespace: {ns} for gvr: {}/{}, Resource={}",
                api.group, api.version, api.plural
            ));
            0
        };
        content.estimate = content.estimate.max(estimate);
        *content
            .remaining
            .entry(format!("{}.{}", api.plural, api.group))
            .or_default() += left.len();
        for (f, n) in finalizers {
            *content.finalizers.entry(f).or_default() += n;
        }
    }
    content
}

/// Sets the deleter's five conditions in `status` from what a pass found, as
/// `namespaceConditionUpdater` does: the failing ones as found, the others in their healthy form;
/// a condition's `lastTransitionTime` changes only with its status. Returns whether anything
/// changed.
fn update_conditions(status: &mut Value, content: &Content) -> bool {
    let mut failing: BTreeMap<&str, (&str, String)> = BTreeMap::new();
    if !content.errors.is_empty() {
        let mut errors = content.errors.clone();
        errors.sort();
        failing.insert(
            "NamespaceDeletionContentFailure",
            (
                "ContentDeletionFailed",
                format!(
                    "Failed to delete all resource types, {} remaining: {}",
                    errors.len(),
                    errors.join(", ")
                ),
            ),
        );
    }
    if !content.remaining.is_empty() {
        let mut each: Vec<String> = content
            .remaining
            .iter()
            .map(|(resource, n)| format!("{resource} has {n} resource instances"))
            .collect();
        each.sort();
        failing.insert(
            "NamespaceContentRemaining",
            (
                "SomeResourcesRemain",
                format!("Some resources are remaining: {}", each.join(", ")),
            ),
        );
    }
    if !content.finalizers.is_empty() {
        let mut each: Vec<String> = content
            .finalizers
            .iter()
            .map(|(f, n)| format!("{f} in {n} resource instances"))
            .collect();
        each.sort();
        failing.insert(
            "NamespaceFinalizersRemaining",
            (
                "SomeFinalizersRemain",
                format!(
                    "Some content in the namespace has finalizers remaining: {}",
                    each.join(", ")
                ),
            ),
        );
    }
    let Some(status) = status_object(status) else {
        return false;
    };
    let conditions = status
        .entry("conditions")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !conditions.is_array() {
        *conditions = Value::Array(Vec::new());
    }
    let Some(conditions) = conditions.as_array_mut() else {
        return false;
    };
    let mut changed = false;
    for (kind, ok_reason, ok_message) in CONDITIONS {
        let (state, reason, message) = match failing.get(kind) {
            Some((reason, message)) => ("True", *reason, message.clone()),
            None => ("False", ok_reason, ok_message.to_owned()),
        };
        match conditions.iter_mut().find(|c| c["type"] == kind) {
            None => {
                conditions.push(json!({
                    "type": kind,
                    "status": state,
                    "lastTransitionTime": now_rfc3339(),
                    "reason": reason,
                    "message": message,
                }));
                changed = true;
            }
            Some(old) => {
                if old["status"] == state && old["reason"] == reason && old["message"] == message {
                    continue;
                }
                if old["status"] != state {
                    old["lastTransitionTime"] = json!(now_rfc3339());
                }
                old["status"] = json!(state);
                old["reason"] = json!(reason);
                old["message"] = json!(message);
                changed = true;
            }
        }
    }
    changed
}

fn status_object(status: &mut Value) -> Option<&mut Map<String, Value>> {
    if !status.is_object() {
        *status = Value::Object(Map::new());
    }
    status.as_object_mut()
}

/// A self-signed CA certificate for the published ConfigMap of a server without TLS, whose
/// clients need no CA but whose namespaces still carry one.
fn generate_ca_pem() -> String {
    let mut params = rcgen::CertificateParams::default();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "kinformer-sim-ca");
    rcgen::KeyPair::generate()
        .and_then(|key| params.self_signed(&key))
        .map(|cert| cert.pem())
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "no CA certificate for kube-root-ca.crt");
            String::new()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(remaining: &[(&str, usize)], finalizers: &[(&str, usize)]) -> Content {
        Content {
            estimate: 0,
            remaining: remaining
                .iter()
                .map(|(r, n)| ((*r).to_owned(), *n))
                .collect(),
            finalizers: finalizers
                .iter()
                .map(|(f, n)| ((*f).to_owned(), *n))
                .collect(),
            errors: Vec::new(),
        }
    }

    fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
        status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == kind))
            .unwrap_or(&Value::Null)
    }

    #[test]
    fn conditions_say_what_remains_with_the_real_messages() {
        let mut status = json!({"phase": "Terminating"});
        let found = content(
            &[("pods.", 2), ("widgets.example.com", 1)],
            &[("example.com/hold", 1), ("a/b", 2)],
        );
        assert!(update_conditions(&mut status, &found));
        let types: Vec<&str> = status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, CONDITIONS.map(|c| c.0));
        let remaining = condition(&status, "NamespaceContentRemaining");
        assert_eq!(
            (
                &remaining["status"],
                &remaining["reason"],
                &remaining["message"]
            ),
            (
                &json!("True"),
                &json!("SomeResourcesRemain"),
                &json!(
                    "Some resources are remaining: pods. has 2 resource instances, widgets.example.com has 1 resource instances"
                )
            )
        );
        let held = condition(&status, "NamespaceFinalizersRemaining");
        assert_eq!(
            (&held["reason"], &held["message"]),
            (
                &json!("SomeFinalizersRemain"),
                &json!(
                    "Some content in the namespace has finalizers remaining: a/b in 2 resource instances, example.com/hold in 1 resource instances"
                )
            )
        );
        let discovery = condition(&status, "NamespaceDeletionDiscoveryFailure");
        assert_eq!(
            (&discovery["status"], &discovery["reason"]),
            (&json!("False"), &json!("ResourcesDiscovered"))
        );
        // The same findings again change nothing.
        assert!(!update_conditions(&mut status, &found));
    }

    #[test]
    fn a_condition_keeps_its_transition_time_until_its_status_changes() {
        let mut status = json!({"phase": "Terminating", "conditions": [
            {"type": "NamespaceContentRemaining", "status": "True", "lastTransitionTime": "then",
             "reason": "SomeResourcesRemain", "message": "Some resources are remaining: pods. has 2 resource instances"},
        ]});
        assert!(update_conditions(
            &mut status,
            &content(&[("pods.", 1)], &[])
        ));
        let c = condition(&status, "NamespaceContentRemaining");
        assert_eq!(c["lastTransitionTime"], "then", "same status, new message");
        assert_eq!(
            c["message"],
            "Some resources are remaining: pods. has 1 resource instances"
        );
        assert!(update_conditions(&mut status, &content(&[], &[])));
        let c = condition(&status, "NamespaceContentRemaining");
        assert_ne!(c["lastTransitionTime"], "then");
        assert_eq!(
            (&c["status"], &c["reason"], &c["message"]),
            (
                &json!("False"),
                &json!("ContentRemoved"),
                &json!("All content successfully removed")
            )
        );
    }

    #[test]
    fn content_left_without_a_reason_is_a_deletion_failure() {
        let mut status = json!({});
        let mut found = content(&[("pods.", 1)], &[]);
        found.errors.push(
            "unexpected items still remain in namespace: x for gvr: /v1, Resource=pods".into(),
        );
        assert!(update_conditions(&mut status, &found));
        let c = condition(&status, "NamespaceDeletionContentFailure");
        assert_eq!(
            (&c["status"], &c["reason"], &c["message"]),
            (
                &json!("True"),
                &json!("ContentDeletionFailed"),
                &json!(
                    "Failed to delete all resource types, 1 remaining: unexpected items still remain in namespace: x for gvr: /v1, Resource=pods"
                )
            )
        );
    }

    #[test]
    fn the_generated_ca_is_a_pem_certificate() {
        assert!(generate_ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
    }
}
