//! A namespace's life as a real API server and kube-controller-manager give it, over HTTP: a
//! delete turns it `Terminating` and answers it; the namespace controller deletes its content
//! (pods gracefully, objects with finalizers only marked), says in the namespace's conditions
//! what remains, and finalizes it once it is empty, when it goes unless its own finalizers hold
//! it; a new namespace gets its `kube-root-ca.crt` ConfigMap and `default` ServiceAccount.
//! docs/sim.md cites the Kubernetes code behind each rule.

mod common;

use std::time::Duration;

use common::{Api, rv};
use kinformer_core::{ApiResource, Scope};
use kinformer_sim::{SimConfig, SimServer, Store};
use serde_json::{Value, json};

/// The bound on every wait.
const WAIT: Duration = Duration::from_secs(10);

const NS: &str = "/api/v1/namespaces";

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

/// A pod no node runs: its delete needs no kubelet.
fn pod(name: &str, finalizers: &[&str]) -> Value {
    json!({
        "metadata": {"name": name, "finalizers": finalizers},
        "spec": {"containers": [{"name": "c", "image": "i:1"}]},
    })
}

/// Creates namespace `name` (with `finalizers` in its metadata) and waits until its controllers
/// have given it its ConfigMap and ServiceAccount, so that what a test watches next is only its
/// own doing.
async fn namespace(sim: &SimServer, api: &Api, name: &str, finalizers: &[&str]) -> Value {
    let created = api
        .ok(
            "POST",
            NS,
            Some(json!({"metadata": {"name": name, "finalizers": finalizers}})),
        )
        .await;
    let store = sim.store();
    store
        .wait_until(WAIT, |s| {
            s.get(&configmaps(), Some(name), "kube-root-ca.crt")
                .is_some()
                && s.get(&serviceaccounts(), Some(name), "default").is_some()
        })
        .await
        .unwrap();
    created
}

/// The stored namespace, once `condition` holds for it.
async fn namespace_when(store: &Store, name: &str, condition: impl Fn(&Value) -> bool) -> Value {
    store
        .wait_until(WAIT, |s| {
            s.get(&namespaces(), None, name)
                .is_some_and(|ns| condition(&ns))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}: {:?}", store.get(&namespaces(), None, name)));
    store.get(&namespaces(), None, name).unwrap()
}

async fn gone(store: &Store, name: &str) {
    store
        .wait_until(WAIT, |s| s.get(&namespaces(), None, name).is_none())
        .await
        .unwrap_or_else(|e| panic!("{e}: {:?}", store.get(&namespaces(), None, name)));
}

fn condition<'a>(ns: &'a Value, kind: &str) -> &'a Value {
    ns["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind))
        .unwrap_or(&Value::Null)
}

/// `(status, reason, message)` of a condition.
fn said<'a>(ns: &'a Value, kind: &str) -> (&'a str, &'a str, &'a str) {
    let c = condition(ns, kind);
    let s = |f: &str| c[f].as_str().unwrap_or_default();
    (s("status"), s("reason"), s("message"))
}

/// The deleter's five conditions as it writes them once nothing is left.
const ALL_CLEAR: [(&str, &str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "False",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "False",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "False",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "False",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "False",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
];

/// One watch stream, read event by event.
struct Watch {
    resp: reqwest::Response,
    buf: Vec<u8>,
}

impl Watch {
    async fn open(api_base: &str, path: &str, from: &str) -> Self {
        let url = format!("{api_base}{path}?watch=true&resourceVersion={from}");
        let resp = reqwest::Client::new().get(&url).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{url}");
        Self {
            resp,
            buf: Vec::new(),
        }
    }

    /// The next event that is not a bookmark, within [`WAIT`].
    async fn next(&mut self) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                let event: Value = serde_json::from_slice(&line).unwrap();
                if event["type"] != "BOOKMARK" {
                    return event;
                }
                continue;
            }
            let chunk = tokio::time::timeout_at(deadline, self.resp.chunk())
                .await
                .expect("no watch event within the bound")
                .unwrap()
                .expect("the watch ended");
            self.buf.extend_from_slice(&chunk);
        }
    }
}

/// `(resourceVersion, kind, event type, name)` of a watch event.
fn row(e: &Value) -> (u64, String, String, String) {
    let o = &e["object"];
    (
        rv(o).parse().unwrap(),
        o["kind"].as_str().unwrap().to_owned(),
        e["type"].as_str().unwrap().to_owned(),
        o["metadata"]["name"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn a_delete_answers_the_terminating_namespace_which_stays_until_emptied() {
    let (sim, api) = Api::start().await;
    let created = namespace(&sim, &api, "x", &[]).await;
    // A ConfigMap with a finalizer keeps the namespace for as long as the test needs it.
    api.ok(
        "POST",
        &format!("{NS}/x/configmaps"),
        Some(json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})),
    )
    .await;

    let deleted = api.ok("DELETE", &format!("{NS}/x"), None).await;
    assert_eq!(deleted["kind"], "Namespace", "the namespace, not a Status");
    assert_eq!(deleted["status"]["phase"], "Terminating");
    assert!(deleted["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        deleted["metadata"].get("deletionGracePeriodSeconds"),
        None,
        "the namespace registry sets none"
    );
    assert_eq!(deleted["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(deleted["metadata"]["uid"], created["metadata"]["uid"]);

    let (code, got) = api.send("GET", &format!("{NS}/x"), None).await;
    assert_eq!(
        (code, got["status"]["phase"].as_str()),
        (200, Some("Terminating"))
    );

    // The controller deletes what it can, and reports what holds the namespace.
    let store = sim.store();
    let held = namespace_when(&store, "x", |ns| {
        condition(ns, "NamespaceFinalizersRemaining")["status"] == "True"
    })
    .await;
    // A second delete answers the namespace as it is: no 409, nothing written.
    let again = api.ok("DELETE", &format!("{NS}/x"), None).await;
    assert_eq!(
        (again["kind"].as_str(), rv(&again)),
        (Some("Namespace"), rv(&held))
    );
    assert_eq!(
        store
            .list(&configmaps(), Some("x"))
            .iter()
            .map(|c| c["metadata"]["name"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>(),
        ["held"],
        "everything else is gone"
    );

    api.ok(
        "PATCH",
        &format!("{NS}/x/configmaps/held"),
        Some(json!({"metadata": {"finalizers": null}})),
    )
    .await;
    gone(&store, "x").await;
    assert_eq!(api.send("GET", &format!("{NS}/x"), None).await.0, 404);
}

#[tokio::test]
async fn contents_go_first_then_the_namespace_in_watch_order() {
    let (sim, api) = Api::start().await;
    namespace(&sim, &api, "x", &[]).await;
    api.ok(
        "POST",
        &format!("{NS}/x/configmaps"),
        Some(json!({"metadata": {"name": "c"}})),
    )
    .await;
    api.ok("POST", &format!("{NS}/x/pods"), Some(pod("p", &[])))
        .await;
    let from = sim.store().resource_version().to_string();
    let base = sim.url();
    let mut ns_watch = Watch::open(&base, NS, &from).await;
    let mut watches = [
        (
            Watch::open(&base, &format!("{NS}/x/configmaps"), &from).await,
            2,
        ),
        (Watch::open(&base, &format!("{NS}/x/pods"), &from).await, 2),
        (
            Watch::open(&base, &format!("{NS}/x/serviceaccounts"), &from).await,
            1,
        ),
    ];

    api.ok("DELETE", &format!("{NS}/x"), None).await;

    let mut ns_events = Vec::new();
    loop {
        let e = ns_watch.next().await;
        let done = e["type"] == "DELETED";
        ns_events.push(e);
        if done {
            break;
        }
    }
    let mut content = Vec::new();
    for (w, n) in &mut watches {
        for _ in 0..*n {
            content.push(row(&w.next().await));
        }
    }
    content.sort();

    // The namespace: Terminating, then the conditions once its content is gone (still with the
    // `kubernetes` finalizer), then deleted by the finalize write, carrying its last state.
    let ns_rows: Vec<(String, String)> = ns_events
        .iter()
        .map(|e| {
            let (_, _, kind, name) = row(e);
            (kind, name)
        })
        .collect();
    assert_eq!(
        ns_rows,
        [
            ("MODIFIED".to_owned(), "x".to_owned()),
            ("MODIFIED".to_owned(), "x".to_owned()),
            ("DELETED".to_owned(), "x".to_owned()),
        ],
        "{ns_events:#?}"
    );
    let terminating = &ns_events[0]["object"];
    assert_eq!(terminating["status"]["phase"], "Terminating");
    assert_eq!(terminating["status"].get("conditions"), None);
    let cleared = &ns_events[1]["object"];
    for (kind, status, reason, message) in ALL_CLEAR {
        assert_eq!(said(cleared, kind), (status, reason, message), "{kind}");
    }
    assert_eq!(cleared["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(ns_events[2]["object"]["status"], cleared["status"]);

    // The content: every deletion between the two namespace writes, a pod marked first.
    let (first, last) = (row(&ns_events[0]).0, row(&ns_events[1]).0);
    assert!(
        content.iter().all(|(v, ..)| first < *v && *v < last),
        "{first} {content:?} {last}"
    );
    let what: Vec<(&str, &str, &str)> = content
        .iter()
        .map(|(_, kind, event, name)| (kind.as_str(), event.as_str(), name.as_str()))
        .collect();
    let mut expected = vec![
        ("ConfigMap", "DELETED", "c"),
        ("ConfigMap", "DELETED", "kube-root-ca.crt"),
        ("Pod", "MODIFIED", "p"),
        ("Pod", "DELETED", "p"),
        ("ServiceAccount", "DELETED", "default"),
    ];
    let mut got = what.clone();
    got.sort_by_key(|(kind, _, name)| (*kind, *name));
    expected.sort_by_key(|(kind, _, name)| (*kind, *name));
    assert_eq!(got, expected, "{content:?}");
    let pod_events: Vec<&str> = what
        .iter()
        .filter(|(kind, ..)| *kind == "Pod")
        .map(|(_, event, _)| *event)
        .collect();
    assert_eq!(pod_events, ["MODIFIED", "DELETED"]);
    assert_eq!(api.send("GET", &format!("{NS}/x"), None).await.0, 404);
}

#[tokio::test]
async fn a_pod_with_a_finalizer_holds_the_namespace_and_the_conditions_say_so() {
    let (sim, api) = Api::start().await;
    namespace(&sim, &api, "x", &[]).await;
    for p in [pod("a", &[]), pod("held", &["example.com/hold"])] {
        api.ok("POST", &format!("{NS}/x/pods"), Some(p)).await;
    }
    api.ok("DELETE", &format!("{NS}/x"), None).await;

    let store = sim.store();
    let ns = namespace_when(&store, "x", |ns| {
        condition(ns, "NamespaceFinalizersRemaining")["status"] == "True"
    })
    .await;
    assert_eq!(
        said(&ns, "NamespaceFinalizersRemaining"),
        (
            "True",
            "SomeFinalizersRemain",
            "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
        )
    );
    assert_eq!(
        said(&ns, "NamespaceContentRemaining"),
        (
            "True",
            "SomeResourcesRemain",
            "Some resources are remaining: pods. has 1 resource instances"
        )
    );
    for (kind, status, reason, message) in &ALL_CLEAR[..3] {
        assert_eq!(said(&ns, kind), (*status, *reason, *message), "{kind}");
    }
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    // The held pod is marked and stays; the other is gone.
    let (code, held) = api.send("GET", &format!("{NS}/x/pods/held"), None).await;
    assert_eq!(code, 200);
    assert!(held["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        api.send("GET", &format!("{NS}/x/pods/a"), None).await.0,
        404
    );
    let (code, got) = api.send("GET", &format!("{NS}/x"), None).await;
    assert_eq!(
        (code, got["status"]["phase"].as_str()),
        (200, Some("Terminating"))
    );

    // The finalizer's controller finishes: the pod goes, then the namespace.
    api.ok(
        "PATCH",
        &format!("{NS}/x/pods/held"),
        Some(json!({"metadata": {"finalizers": null}})),
    )
    .await;
    gone(&store, "x").await;
}

#[tokio::test]
async fn a_terminating_pod_holds_the_namespace_until_its_kubelet_deletes_it() {
    let (sim, api) = Api::start().await;
    namespace(&sim, &api, "x", &[]).await;
    // Scheduled, so its delete waits its grace period for the kubelet.
    let mut p = pod("p", &[]);
    p["spec"]["nodeName"] = json!("n");
    p["spec"]["terminationGracePeriodSeconds"] = json!(1);
    api.ok("POST", &format!("{NS}/x/pods"), Some(p)).await;
    api.ok("DELETE", &format!("{NS}/x"), None).await;

    let store = sim.store();
    let ns = namespace_when(&store, "x", |ns| {
        condition(ns, "NamespaceContentRemaining")["status"] == "True"
    })
    .await;
    assert_eq!(
        said(&ns, "NamespaceContentRemaining").2,
        "Some resources are remaining: pods. has 1 resource instances"
    );
    let (_, status, reason, message) = ALL_CLEAR[4];
    assert_eq!(
        said(&ns, "NamespaceFinalizersRemaining"),
        (status, reason, message),
        "no finalizers, only a grace period"
    );
    let (_, terminating) = api.send("GET", &format!("{NS}/x/pods/p"), None).await;
    assert_eq!(terminating["metadata"]["deletionGracePeriodSeconds"], 1);
    gone(&store, "x").await;
}

#[tokio::test]
async fn a_finalizer_of_the_namespace_holds_it_after_it_is_finalized() {
    let (sim, api) = Api::start().await;
    namespace(&sim, &api, "x", &["example.com/ns"]).await;
    let from = sim.store().resource_version().to_string();
    let mut w = Watch::open(&sim.url(), NS, &from).await;
    api.ok("DELETE", &format!("{NS}/x"), None).await;

    // Terminating, conditions, then finalized: `kubernetes` out of `spec.finalizers`.
    let mut events = Vec::new();
    for _ in 0..3 {
        events.push(w.next().await);
    }
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["MODIFIED", "MODIFIED", "MODIFIED"], "{events:#?}");
    let finalized = &events[2]["object"];
    assert_eq!(finalized["spec"].get("finalizers"), None, "{finalized}");
    assert_eq!(
        finalized["metadata"]["finalizers"],
        json!(["example.com/ns"])
    );
    assert_eq!(finalized["status"]["phase"], "Terminating");
    let (code, got) = api.send("GET", &format!("{NS}/x"), None).await;
    assert_eq!((code, rv(&got)), (200, rv(finalized)), "still there");

    // The namespace's own finalizer removed: the update deletes it.
    api.ok(
        "PATCH",
        &format!("{NS}/x"),
        Some(json!({"metadata": {"finalizers": null}})),
    )
    .await;
    assert_eq!(w.next().await["type"], "DELETED");
    assert_eq!(api.send("GET", &format!("{NS}/x"), None).await.0, 404);
}

#[tokio::test]
async fn nothing_new_can_be_created_in_a_terminating_namespace() {
    let (sim, api) = Api::start().await;
    namespace(&sim, &api, "x", &["example.com/ns"]).await;
    api.ok("DELETE", &format!("{NS}/x"), None).await;
    let (code, s) = api
        .send(
            "POST",
            &format!("{NS}/x/configmaps"),
            Some(json!({"metadata": {"name": "new"}})),
        )
        .await;
    assert_eq!(
        (code, s["reason"].as_str(), s["message"].as_str()),
        (
            403,
            Some("Forbidden"),
            Some(
                "configmaps \"new\" is forbidden: unable to create new content in namespace x because it is being terminated"
            )
        )
    );
    // The lifecycle plugin's cause tells it from an authorization 403.
    assert_eq!(
        s["details"]["causes"],
        json!([{"reason": "NamespaceTerminating", "message": "namespace x is being terminated", "field": "metadata.namespace"}])
    );
    // Nor do the controllers put back what the namespace controller deleted.
    let store = sim.store();
    namespace_when(&store, "x", |ns| ns["spec"].get("finalizers").is_none()).await;
    assert!(store.list(&configmaps(), Some("x")).is_empty());
    assert!(store.list(&serviceaccounts(), Some("x")).is_empty());
}

#[tokio::test]
async fn a_new_namespace_gets_its_root_ca_and_default_service_account_back_when_deleted() {
    let (sim, api) = Api::start().await;
    namespace(&sim, &api, "x", &[]).await;
    let cm = api
        .ok("GET", &format!("{NS}/x/configmaps/kube-root-ca.crt"), None)
        .await;
    assert!(
        cm["data"]["ca.crt"]
            .as_str()
            .unwrap()
            .starts_with("-----BEGIN CERTIFICATE-----\n"),
        "{cm}"
    );
    assert_eq!(
        cm["metadata"]["annotations"]["kubernetes.io/description"],
        "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
    );
    let sa = api
        .ok("GET", &format!("{NS}/x/serviceaccounts/default"), None)
        .await;
    assert_eq!(sa["metadata"]["namespace"], "x");

    // Deleted or changed, they are put back.
    let store = sim.store();
    api.ok(
        "DELETE",
        &format!("{NS}/x/configmaps/kube-root-ca.crt"),
        None,
    )
    .await;
    api.ok("DELETE", &format!("{NS}/x/serviceaccounts/default"), None)
        .await;
    store
        .wait_until(WAIT, |s| {
            s.get(&configmaps(), Some("x"), "kube-root-ca.crt")
                .is_some_and(|c| c["metadata"]["uid"] != cm["metadata"]["uid"])
                && s.get(&serviceaccounts(), Some("x"), "default")
                    .is_some_and(|a| a["metadata"]["uid"] != sa["metadata"]["uid"])
        })
        .await
        .unwrap();
    api.ok(
        "PATCH",
        &format!("{NS}/x/configmaps/kube-root-ca.crt"),
        Some(json!({"data": {"ca.crt": "tampered"}})),
    )
    .await;
    store
        .wait_until(WAIT, |s| {
            s.get(&configmaps(), Some("x"), "kube-root-ca.crt")
                .is_some_and(|c| c["data"] == cm["data"])
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn in_process_namespaces_live_the_same_life_and_carry_the_servers_ca() {
    let sim = SimServer::start(SimConfig {
        tls: true,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let store = sim.store();
    store
        .create(
            &namespaces(),
            json!({"metadata": {"name": "x"}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
        )
        .unwrap();
    store
        .wait_until(WAIT, |s| {
            s.get(&serviceaccounts(), Some("x"), "default").is_some()
                && s.get(&configmaps(), Some("x"), "kube-root-ca.crt")
                    .is_some_and(|c| c["data"]["ca.crt"].as_str() == sim.ca_pem().as_deref())
        })
        .await
        .unwrap();
    store
        .create(
            &configmaps(),
            json!({"metadata": {"name": "c", "namespace": "x"}}),
        )
        .unwrap();

    let deleted = store.delete(&namespaces(), None, "x").unwrap();
    assert_eq!(deleted["status"]["phase"], "Terminating");
    assert!(store.get(&namespaces(), None, "x").is_some());
    gone(&store, "x").await;
    assert!(store.list(&configmaps(), Some("x")).is_empty());
    assert!(store.list(&serviceaccounts(), Some("x")).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_running_pods_grace_period_holds_the_namespace_on_the_paused_clock() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let store = sim.store();
    let pods = ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced);
    store
        .create(
            &namespaces(),
            json!({"metadata": {"name": "x"}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
        )
        .unwrap();
    store
        .create(
            &pods,
            json!({
                "metadata": {"name": "p", "namespace": "x"},
                "spec": {"nodeName": "n", "terminationGracePeriodSeconds": 30,
                    "containers": [{"name": "c", "image": "i:1"}]},
                "status": {"phase": "Running"},
            }),
        )
        .unwrap();
    let started = tokio::time::Instant::now();
    store.delete(&namespaces(), None, "x").unwrap();

    // The kubelet takes the pod's whole grace period; until then the namespace waits for it.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let ns = store.get(&namespaces(), None, "x").unwrap();
    assert_eq!(
        said(&ns, "NamespaceContentRemaining").2,
        "Some resources are remaining: pods. has 1 resource instances"
    );
    store
        .wait_until(Duration::from_secs(60), |s| {
            s.get(&namespaces(), None, "x").is_none()
        })
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(
        (Duration::from_secs(30)..Duration::from_secs(31)).contains(&took),
        "{took:?}"
    );
}

#[tokio::test]
async fn a_created_namespace_gets_kubernetes_after_the_finalizers_it_brings() {
    let (_sim, api) = Api::start().await;
    let created = api
        .ok(
            "POST",
            NS,
            Some(json!({"metadata": {"name": "f"}, "spec": {"finalizers": ["example.com/keep"]}})),
        )
        .await;
    assert_eq!(
        created["spec"]["finalizers"],
        json!(["example.com/keep", "kubernetes"])
    );
    let plain = api
        .ok("POST", NS, Some(json!({"metadata": {"name": "g"}})))
        .await;
    assert_eq!(plain["spec"]["finalizers"], json!(["kubernetes"]));
}

#[tokio::test]
async fn finalize_replaces_only_the_spec_finalizers_and_takes_only_put() {
    let (sim, api) = Api::start().await;
    let created = namespace(&sim, &api, "fin", &[]).await;
    let path = format!("{NS}/fin/finalize");
    // What kubectl's `replace --raw .../finalize` sends: the whole namespace, with other
    // changes that the subresource ignores.
    let mut sent = created.clone();
    sent["spec"]["finalizers"] = json!(["example.com/other"]);
    sent["metadata"]["labels"]["new"] = json!("1");
    sent["status"]["phase"] = json!("Terminating");
    let finalized = api.ok("PUT", &path, Some(sent)).await;
    assert_eq!(
        finalized["spec"]["finalizers"],
        json!(["example.com/other"])
    );
    assert_eq!(finalized["metadata"]["labels"].get("new"), None);
    assert_eq!(finalized["status"]["phase"], "Active");
    assert_ne!(rv(&finalized), rv(&created));
    let stored = api.ok("GET", &format!("{NS}/fin"), None).await;
    assert_eq!(stored["spec"], finalized["spec"]);
    // A write to the namespace itself keeps the finalizers the subresource set.
    let mut replaced = stored.clone();
    replaced["spec"]["finalizers"] = json!([]);
    let kept = api.ok("PUT", &format!("{NS}/fin"), Some(replaced)).await;
    assert_eq!(kept["spec"]["finalizers"], json!(["example.com/other"]));
    for method in ["GET", "PATCH", "DELETE", "POST"] {
        let (code, s) = api.send(method, &path, Some(json!({}))).await;
        assert_eq!((method, code), (method, 405), "{s}");
    }
    // Only namespaces have it.
    let (code, _) = api
        .send(
            "PUT",
            "/api/v1/namespaces/fin/configmaps/x/finalize",
            Some(json!({})),
        )
        .await;
    assert_eq!(code, 404);
}
