//! Integration tests of the simulated API server, each speaking HTTP(S) over 127.0.0.1.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kinformer_core::{ApiResource, Scope};
use kinformer_sim::{Auth, KubeVersion, RequestKind, SimConfig, SimServer};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};

mod common;
use common::{Lines, Read, WAIT, ev, pair};

fn pods() -> ApiResource {
    ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced)
}

fn tls_config(ca: Option<&str>, identity: Option<(&str, &str)>) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = ca {
        for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match identity {
        Some((cert, key)) => {
            let certs = CertificateDer::pem_slice_iter(cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
            builder.with_client_auth_cert(certs, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config
}

fn client_with(ca: Option<&str>, identity: Option<(&str, &str)>) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls_config(ca, identity))
        .build()
        .unwrap()
}

trait JsonBody {
    fn json_body(self, v: &Value) -> Self;
}

impl JsonBody for reqwest::RequestBuilder {
    fn json_body(self, v: &Value) -> Self {
        self.header("content-type", "application/json")
            .body(v.to_string())
    }
}

async fn body_json(r: reqwest::Response) -> Value {
    serde_json::from_slice(&r.bytes().await.unwrap()).unwrap()
}

fn client() -> reqwest::Client {
    client_with(None, None)
}

async fn start(config: SimConfig) -> SimServer {
    SimServer::start(config).await.unwrap()
}

async fn get_json(c: &reqwest::Client, url: &str) -> (u16, Value) {
    let r = c.get(url).send().await.unwrap();
    let code = r.status().as_u16();
    let body = r.bytes().await.unwrap();
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

fn pod(name: &str, ns: &str, labels: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}})
}

#[tokio::test]
async fn pagination_is_one_snapshot_under_concurrent_writes() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store();
    for i in 0..50 {
        store
            .create(&pods(), pod(&format!("p{i:02}"), "ns", json!({})))
            .unwrap();
    }
    let before: Vec<String> = store
        .list(&pods(), None)
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    let c = client();
    let base = format!("{}/api/v1/namespaces/ns/pods", sim.url());
    let (code, first) = get_json(&c, &format!("{base}?limit=10")).await;
    assert_eq!(code, 200);
    let rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(first["metadata"]["remainingItemCount"], 40);
    let mut seen = names(&first);
    let mut token = first["metadata"]["continue"].as_str().unwrap().to_owned();
    // Bounded: 50 objects in pages of 10.
    for round in 0..10 {
        // Writes between pages: deletes, updates and creates that the snapshot must not show.
        store
            .delete(&pods(), Some("ns"), &format!("p{:02}", 45 - round))
            .unwrap();
        store
            .patch(
                &pods(),
                Some("ns"),
                &format!("p{:02}", 49 - round),
                json!({"metadata": {"labels": {"x": "y"}}}),
            )
            .unwrap();
        store
            .create(&pods(), pod(&format!("p{round:02}a"), "ns", json!({})))
            .unwrap();
        let (code, page) = get_json(&c, &format!("{base}?limit=10&continue={token}")).await;
        assert_eq!(code, 200, "{page}");
        assert_eq!(page["metadata"]["resourceVersion"], rv.as_str());
        for item in page["items"].as_array().unwrap() {
            assert_eq!(
                item["metadata"].get("labels"),
                Some(&json!({})),
                "a page showed a later write"
            );
        }
        seen.extend(names(&page));
        match page["metadata"]["continue"].as_str() {
            Some(t) => token = t.to_owned(),
            None => break,
        }
    }
    assert_eq!(seen, before);
}

#[tokio::test]
async fn expired_continue_token_answers_410() {
    let sim = start(SimConfig::default()).await;
    sim.store().seed_pods(30, 1);
    let c = client();
    let (_, first) = get_json(&c, &format!("{}/api/v1/pods?limit=5", sim.url())).await;
    let token = first["metadata"]["continue"].as_str().unwrap().to_owned();
    // Sorted after every seeded pod, so the rest of the list includes it.
    sim.store()
        .create(&pods(), pod("new", "zz", json!({})))
        .unwrap();
    sim.faults().compact_now();
    let (code, status) = get_json(
        &c,
        &format!("{}/api/v1/pods?limit=5&continue={token}", sim.url()),
    )
    .await;
    assert_eq!(code, 410);
    assert_eq!(
        (
            status["kind"].as_str(),
            status["reason"].as_str(),
            status["code"].as_u64()
        ),
        (Some("Status"), Some("Expired"), Some(410))
    );
    // The 410 carries a token that goes on, inconsistently, at the latest version.
    let next = status["metadata"]["continue"].as_str().unwrap().to_owned();
    let (code, rest) = get_json(
        &c,
        &format!("{}/api/v1/pods?limit=100&continue={next}", sim.url()),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        rest["metadata"]["resourceVersion"],
        sim.store().resource_version().to_string()
    );
    let mut seen = names(&first);
    seen.extend(names(&rest));
    assert_eq!(seen.len(), 31, "every pod once, and the new one");
    assert!(seen.contains(&"new".to_owned()));
    // A malformed token is a bad request.
    let (code, _) = get_json(
        &c,
        &format!("{}/api/v1/pods?limit=5&continue=garbage", sim.url()),
    )
    .await;
    assert_eq!(code, 400);
}

#[tokio::test]
async fn compacted_versions_answer_410_on_watch_and_exact_list() {
    let sim = start(SimConfig {
        history_window: 5,
        ..SimConfig::default()
    })
    .await;
    let store = sim.store();
    let first = store.create(&pods(), pod("a", "ns", json!({}))).unwrap();
    let old_rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    for i in 0..10 {
        store
            .create(&pods(), pod(&format!("b{i}"), "ns", json!({})))
            .unwrap();
    }
    let c = client();
    let mut w = Lines::open(
        &c,
        &format!(
            "{}/api/v1/pods?watch=true&resourceVersion={old_rv}",
            sim.url()
        ),
    )
    .await;
    let e = w.event().await;
    assert_eq!(e["type"], "ERROR");
    assert_eq!(
        (
            e["object"]["kind"].as_str(),
            e["object"]["code"].as_u64(),
            e["object"]["reason"].as_str()
        ),
        (Some("Status"), Some(410), Some("Expired"))
    );
    assert!(
        e["object"]["message"]
            .as_str()
            .unwrap()
            .starts_with("too old resource version")
    );
    assert!(matches!(w.read().await, Read::End));
    let (code, s) = get_json(
        &c,
        &format!(
            "{}/api/v1/pods?resourceVersion={old_rv}&resourceVersionMatch=Exact",
            sim.url()
        ),
    )
    .await;
    assert_eq!((code, s["reason"].as_str()), (410, Some("Expired")));
    // A version inside the window still works, exactly.
    let recent = store.resource_version() - 2;
    let (code, l) = get_json(
        &c,
        &format!(
            "{}/api/v1/pods?resourceVersion={recent}&resourceVersionMatch=Exact",
            sim.url()
        ),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(l["metadata"]["resourceVersion"], recent.to_string());
    assert_eq!(l["items"].as_array().unwrap().len(), 9);
}

#[tokio::test]
async fn too_large_resource_version_answers_504() {
    let sim = start(SimConfig {
        too_large_wait: Duration::from_millis(50),
        ..SimConfig::default()
    })
    .await;
    let c = client();
    let future = sim.store().resource_version() + 100;
    for q in [
        format!("resourceVersion={future}&resourceVersionMatch=NotOlderThan"),
        format!("resourceVersion={future}&resourceVersionMatch=Exact"),
        format!("resourceVersion={future}"),
        format!("watch=true&resourceVersion={future}"),
    ] {
        let (code, s) = get_json(&c, &format!("{}/api/v1/pods?{q}", sim.url())).await;
        assert_eq!(code, 504, "{q}");
        assert_eq!(
            s["details"]["causes"][0]["reason"], "ResourceVersionTooLarge",
            "{q}"
        );
        assert!(
            s["message"]
                .as_str()
                .unwrap()
                .contains("Too large resource version")
        );
    }
}

#[tokio::test]
async fn timeout_seconds_zero_is_the_default_negative_has_passed_and_garbage_is_400() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    let rv = sim.store().resource_version();
    let watch = |t: &str| {
        format!(
            "{}/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds={t}",
            sim.url()
        )
    };
    // 0 is the server's default (tens of minutes), not a watch that ends at once.
    let mut w = Lines::open(&c, &watch("0")).await;
    assert!(w.read_within(Duration::from_millis(300)).await.is_none());
    // A negative timeout has already passed: the stream ends cleanly, at once.
    let mut w = Lines::open(&c, &watch("-5")).await;
    assert!(matches!(w.read().await, Read::End));
    for url in [
        watch("soon"),
        format!("{}/api/v1/pods?timeoutSeconds=1.5", sim.url()),
    ] {
        let (code, s) = get_json(&c, &url).await;
        assert_eq!(
            (code, s["reason"].as_str()),
            (400, Some("BadRequest")),
            "{url}"
        );
    }
}

#[tokio::test]
async fn a_get_honours_its_resource_version() {
    let sim = start(SimConfig {
        too_large_wait: Duration::from_millis(50),
        ..SimConfig::default()
    })
    .await;
    let created = sim
        .store()
        .create(&pods(), pod("a", "ns", json!({})))
        .unwrap();
    let rv: u64 = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let c = client();
    let url = |v: &str| {
        format!(
            "{}/api/v1/namespaces/ns/pods/a?resourceVersion={v}",
            sim.url()
        )
    };
    for v in ["", "0", &rv.to_string()] {
        let (code, o) = get_json(&c, &url(v)).await;
        assert_eq!(
            (code, o["metadata"]["name"].as_str()),
            (200, Some("a")),
            "{v:?}"
        );
    }
    let (code, s) = get_json(&c, &url("x1")).await;
    assert_eq!((code, s["reason"].as_str()), (400, Some("BadRequest")));
    let (code, s) = get_json(&c, &url(&(rv + 10).to_string())).await;
    assert_eq!(code, 504);
    assert_eq!(
        s["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
}

#[tokio::test]
async fn the_first_acceptable_media_type_wins_even_when_its_transform_then_refuses() {
    let sim = start(SimConfig::default()).await;
    sim.store()
        .create(&pods(), pod("a", "ns", json!({})))
        .unwrap();
    let c = client();
    let fetch = |path: String, accept: &'static str| {
        let c = c.clone();
        async move {
            let r = c.get(path).header("accept", accept).send().await.unwrap();
            let code = r.status().as_u16();
            (code, body_json(r).await)
        }
    };
    let get = format!("{}/api/v1/namespaces/ns/pods/a", sim.url());
    let list = format!("{}/api/v1/pods", sim.url());
    let (code, s) = fetch(
        get.clone(),
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
    )
    .await;
    assert_eq!(
        (code, s["reason"].as_str()),
        (406, Some("NotAcceptable")),
        "{s}"
    );
    let (code, s) = fetch(
        list.clone(),
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
    )
    .await;
    assert_eq!(
        (code, s["reason"].as_str()),
        (406, Some("NotAcceptable")),
        "{s}"
    );
    // The right form for each is served, and a form the server does not know is skipped.
    let (code, m) = fetch(
        get,
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    )
    .await;
    assert_eq!(
        (code, m["kind"].as_str()),
        (200, Some("PartialObjectMetadata"))
    );
    let (code, l) = fetch(
        list,
        "application/json;as=Unknown;g=example.com;v=v1,application/json",
    )
    .await;
    assert_eq!((code, l["kind"].as_str()), (200, Some("PodList")));
}

#[tokio::test]
async fn list_resource_version_semantics() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store();
    let a = store
        .create(&pods(), pod("a", "ns", json!({"v": "1"})))
        .unwrap();
    let at = a["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    store
        .patch(
            &pods(),
            Some("ns"),
            "a",
            json!({"metadata": {"labels": {"v": "2"}}}),
        )
        .unwrap();
    let c = client();
    let base = format!("{}/api/v1/pods", sim.url());
    let (_, exact) = get_json(
        &c,
        &format!("{base}?resourceVersion={at}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!(exact["items"][0]["metadata"]["labels"]["v"], "1");
    assert_eq!(exact["metadata"]["resourceVersion"], at.as_str());
    for q in [
        "",
        "?resourceVersion=0",
        &format!("?resourceVersion={at}&resourceVersionMatch=NotOlderThan"),
    ] {
        let (_, l) = get_json(&c, &format!("{base}{q}")).await;
        assert_eq!(l["items"][0]["metadata"]["labels"]["v"], "2", "{q}");
        assert_eq!(
            l["metadata"]["resourceVersion"],
            store.resource_version().to_string()
        );
        assert_eq!(l["kind"], "PodList");
    }
    for q in [
        "?resourceVersionMatch=Exact",
        "?resourceVersion=0&resourceVersionMatch=Exact",
    ] {
        let (code, s) = get_json(&c, &format!("{base}{q}")).await;
        assert_eq!((code, s["reason"].as_str()), (422, Some("Invalid")), "{q}");
        assert_list_options_invalid(&s, "resourceVersionMatch");
    }
}

/// A 422 of `ValidateListOptions`, as the handlers wrap its errors: `ListOptions` in
/// `meta.k8s.io`, unnamed, with the field's cause.
fn assert_list_options_invalid(s: &Value, field: &str) {
    assert_eq!(s["details"]["kind"], "ListOptions", "{s}");
    assert_eq!(s["details"]["group"], "meta.k8s.io", "{s}");
    assert!(s["details"].get("name").is_none(), "{s}");
    assert_eq!(s["details"]["causes"][0]["field"], field, "{s}");
    assert_eq!(
        s["details"]["causes"][0]["reason"], "FieldValueForbidden",
        "{s}"
    );
    let message = s["message"].as_str().unwrap();
    let forbidden = format!("ListOptions.meta.k8s.io \"\" is invalid: {field}: Forbidden: ");
    assert!(message.starts_with(&forbidden), "{message}");
}

#[tokio::test]
async fn bookmarks_have_the_watch_cache_shape() {
    let sim = start(SimConfig {
        bookmark_interval: Duration::from_millis(30),
        ..SimConfig::default()
    })
    .await;
    sim.store()
        .create(&pods(), pod("a", "ns", json!({})))
        .unwrap();
    let rv = sim.store().resource_version();
    let c = client();
    let mut w = Lines::open(
        &c,
        &format!(
            "{}/api/v1/pods?watch=1&resourceVersion={rv}&allowWatchBookmarks=true",
            sim.url()
        ),
    )
    .await;
    let e = w.event().await;
    // An empty pod, as the watch cache's bookmarks are: Go's zero values and the version.
    assert_eq!(
        e,
        json!({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": rv.to_string(), "creationTimestamp": null}, "spec": {"containers": null}, "status": {}}})
    );
    sim.store()
        .create(&pods(), pod("b", "ns", json!({})))
        .unwrap();
    assert_eq!(ev(&w.object_event().await), pair("ADDED", "b"));
    let e = w.event().await;
    assert_eq!(
        e["object"]["metadata"]["resourceVersion"],
        (rv + 1).to_string()
    );
    // Without allowWatchBookmarks, none are sent.
    let mut w = Lines::open(
        &c,
        &format!(
            "{}/api/v1/pods?watch=1&resourceVersion={}",
            sim.url(),
            rv + 1
        ),
    )
    .await;
    assert!(w.read_within(Duration::from_millis(200)).await.is_none());
}

#[tokio::test]
async fn watch_timeout_ends_the_stream_cleanly() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    let rv = sim.store().resource_version();
    let started = std::time::Instant::now();
    let mut w = Lines::open(
        &c,
        &format!(
            "{}/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=1",
            sim.url()
        ),
    )
    .await;
    assert!(matches!(w.read().await, Read::End));
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn selectors_filter_lists() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store();
    store
        .create(
            &pods(),
            pod("a", "ns1", json!({"app": "web", "tier": "fe"})),
        )
        .unwrap();
    store
        .create(&pods(), pod("b", "ns1", json!({"app": "api"})))
        .unwrap();
    store
        .create(&pods(), pod("c", "ns2", json!({"app": "web"})))
        .unwrap();
    store
        .patch(
            &pods(),
            Some("ns2"),
            "c",
            json!({"spec": {"nodeName": "node-2"}, "status": {"phase": "Pending"}}),
        )
        .unwrap();
    let c = client();
    let cases: &[(&str, &[&str])] = &[
        ("labelSelector=app%3Dweb", &["a", "c"]),
        ("labelSelector=app+in+(web,api),!tier", &["b", "c"]),
        ("labelSelector=tier", &["a"]),
        ("fieldSelector=metadata.namespace%3Dns2", &["c"]),
        ("fieldSelector=metadata.name%3Db", &["b"]),
        ("fieldSelector=spec.nodeName%3Dnode-1", &["a", "b"]),
        ("fieldSelector=status.phase!%3DRunning", &["c"]),
        (
            "fieldSelector=status.phase%3DRunning&labelSelector=app%3Dweb",
            &["a"],
        ),
        ("labelSelector=app%3Dweb&limit=1", &["a"]),
    ];
    for (q, want) in cases {
        let (code, l) = get_json(&c, &format!("{}/api/v1/pods?{q}", sim.url())).await;
        assert_eq!(code, 200, "{q}: {l}");
        assert_eq!(names(&l), *want, "{q}");
    }
    let (code, l) = get_json(
        &c,
        &format!(
            "{}/api/v1/namespaces/ns1/pods?labelSelector=app%3Dweb",
            sim.url()
        ),
    )
    .await;
    assert_eq!((code, names(&l)), (200, vec!["a".to_owned()]));
    let (code, s) = get_json(
        &c,
        &format!("{}/api/v1/pods?fieldSelector=spec.unknown%3Dx", sim.url()),
    )
    .await;
    assert_eq!((code, s["reason"].as_str()), (400, Some("BadRequest")));
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .contains("field label not supported")
    );
    let (code, _) = get_json(
        &c,
        &format!("{}/api/v1/pods?labelSelector=app+in+(web", sim.url()),
    )
    .await;
    assert_eq!(code, 400);
}

#[tokio::test]
async fn selectors_on_watch_turn_transitions_into_added_and_deleted() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store();
    let rv = store.resource_version();
    let c = client();
    let mut w = Lines::open(
        &c,
        &format!(
            "{}/api/v1/namespaces/ns/pods?watch=true&resourceVersion={rv}&labelSelector=app%3Dweb",
            sim.url()
        ),
    )
    .await;
    let mut f = Lines::open(
        &c,
        &format!(
            "{}/api/v1/pods?watch=true&resourceVersion={rv}&fieldSelector=status.phase%3DRunning",
            sim.url()
        ),
    )
    .await;
    store
        .create(&pods(), pod("other-ns", "elsewhere", json!({"app": "web"})))
        .unwrap();
    store
        .create(&pods(), pod("api", "ns", json!({"app": "api"})))
        .unwrap();
    store
        .create(&pods(), pod("a", "ns", json!({"app": "web"})))
        .unwrap();
    store
        .patch(
            &pods(),
            Some("ns"),
            "a",
            json!({"metadata": {"annotations": {"x": "1"}}}),
        )
        .unwrap();
    let left = store
        .patch(
            &pods(),
            Some("ns"),
            "a",
            json!({"metadata": {"labels": {"app": "db"}}}),
        )
        .unwrap();
    store
        .patch(
            &pods(),
            Some("ns"),
            "api",
            json!({"metadata": {"labels": {"app": "web"}}}),
        )
        .unwrap();
    store.delete(&pods(), Some("ns"), "api").unwrap();
    store.delete(&pods(), Some("ns"), "a").unwrap();
    let mut got = Vec::new();
    for _ in 0..5 {
        let e = w.object_event().await;
        if ev(&e) == pair("DELETED", "a") {
            // Leaving the selector: the previous state, at the version of the change.
            assert_eq!(e["object"]["metadata"]["labels"]["app"], "web");
            assert_eq!(
                e["object"]["metadata"]["resourceVersion"],
                left["metadata"]["resourceVersion"]
            );
        }
        got.push(ev(&e));
    }
    assert_eq!(
        got,
        [
            pair("ADDED", "a"),
            pair("MODIFIED", "a"),
            pair("DELETED", "a"),
            pair("ADDED", "api"),
            pair("DELETED", "api")
        ]
    );
    // Nothing more: the delete of "a" happened outside the selector.
    assert!(w.read_within(Duration::from_millis(100)).await.is_none());

    store
        .patch(
            &pods(),
            Some("elsewhere"),
            "other-ns",
            json!({"status": {"phase": "Failed"}}),
        )
        .unwrap();
    store
        .patch(
            &pods(),
            Some("elsewhere"),
            "other-ns",
            json!({"status": {"phase": "Running"}}),
        )
        .unwrap();
    let mut got = Vec::new();
    for _ in 0..8 {
        got.push(ev(&f.object_event().await));
    }
    assert_eq!(
        got,
        [
            pair("ADDED", "other-ns"),
            pair("ADDED", "api"),
            pair("ADDED", "a"),
            pair("MODIFIED", "a"),
            pair("MODIFIED", "a"),
            pair("MODIFIED", "api"),
            pair("DELETED", "api"),
            pair("DELETED", "a"),
        ]
    );
    assert_eq!(ev(&f.object_event().await), pair("DELETED", "other-ns"));
    assert_eq!(ev(&f.object_event().await), pair("ADDED", "other-ns"));
}

#[tokio::test]
async fn watch_from_zero_sends_current_objects_first() {
    let sim = start(SimConfig::default()).await;
    sim.store().seed_pods(7, 3);
    let c = client();
    let mut w = Lines::open(
        &c,
        &format!("{}/api/v1/pods?watch=true&resourceVersion=0", sim.url()),
    )
    .await;
    let mut added = BTreeSet::new();
    for _ in 0..7 {
        let e = w.event().await;
        assert_eq!(e["type"], "ADDED");
        added.insert(e["object"]["metadata"]["name"].as_str().unwrap().to_owned());
    }
    assert_eq!(added.len(), 7);
    // Old-style watch paths work too.
    let mut w = Lines::open(
        &c,
        &format!("{}/api/v1/watch/namespaces/shop/pods", sim.url()),
    )
    .await;
    assert_eq!(w.event().await["object"]["metadata"]["namespace"], "shop");
}

#[tokio::test]
async fn streaming_list_ends_initial_events_with_a_bookmark() {
    let sim = start(SimConfig {
        bookmark_interval: Duration::from_secs(60),
        ..SimConfig::default()
    })
    .await;
    sim.store().seed_pods(12, 1);
    // The seeded namespaces get their ConfigMap and ServiceAccount from the server's controllers;
    // the version the stream starts at is the one after those writes.
    let configmaps = ApiResource::new("", "v1", "ConfigMap", "configmaps", Scope::Namespaced);
    let accounts = ApiResource::new(
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        Scope::Namespaced,
    );
    sim.store()
        .wait_until(WAIT, |s| {
            s.list(&configmaps, None).len() == 5 && s.list(&accounts, None).len() == 5
        })
        .await
        .unwrap();
    let rv = sim.store().resource_version();
    let c = client();
    let q = "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=";
    let mut w = Lines::open(&c, &format!("{}/api/v1/pods?{q}", sim.url())).await;
    for _ in 0..12 {
        assert_eq!(w.event().await["type"], "ADDED");
    }
    let b = w.event().await;
    assert_eq!(b["type"], "BOOKMARK");
    assert_eq!(
        b["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(b["object"]["metadata"]["resourceVersion"], rv.to_string());
    sim.store()
        .create(&pods(), pod("live", "default", json!({})))
        .unwrap();
    assert_eq!(ev(&w.event().await), pair("ADDED", "live"));
    // Invalid combinations are rejected as the real server does.
    for (bad, field) in [
        (
            "watch=true&sendInitialEvents=true&allowWatchBookmarks=true",
            "resourceVersionMatch",
        ),
        (
            "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
            "allowWatchBookmarks",
        ),
        (
            "watch=true&resourceVersionMatch=NotOlderThan&resourceVersion=1",
            "resourceVersionMatch",
        ),
    ] {
        let (code, s) = get_json(&c, &format!("{}/api/v1/pods?{bad}", sim.url())).await;
        assert_eq!(
            (code, s["reason"].as_str()),
            (422, Some("Invalid")),
            "{bad}"
        );
        assert_list_options_invalid(&s, field);
    }
}

#[tokio::test]
async fn metadata_only_lists_gets_and_watches() {
    let sim = start(SimConfig::default()).await;
    sim.store().seed_pods(3, 1);
    let c = client();
    let accept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    let r = c
        .get(format!("{}/api/v1/pods", sim.url()))
        .header("accept", accept)
        .send()
        .await
        .unwrap();
    let l: Value = body_json(r).await;
    assert_eq!(
        (l["kind"].as_str(), l["apiVersion"].as_str()),
        (Some("PartialObjectMetadataList"), Some("meta.k8s.io/v1"))
    );
    let items = l["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    for i in items {
        assert_eq!(i["kind"], "PartialObjectMetadata");
        assert!(i.get("spec").is_none() && i.get("status").is_none());
        assert!(i["metadata"]["uid"].is_string() && i["metadata"]["labels"].is_object());
    }
    let name = items[0]["metadata"]["name"].as_str().unwrap();
    let ns = items[0]["metadata"]["namespace"].as_str().unwrap();
    let r = c
        .get(format!("{}/api/v1/namespaces/{ns}/pods/{name}", sim.url()))
        .header(
            "accept",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .send()
        .await
        .unwrap();
    let o: Value = body_json(r).await;
    assert_eq!(o["kind"], "PartialObjectMetadata");
    let rv = sim.store().resource_version();
    let resp = c
        .get(format!(
            "{}/api/v1/pods?watch=true&resourceVersion={rv}",
            sim.url()
        ))
        .header(
            "accept",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .send()
        .await
        .unwrap();
    let mut w = Lines {
        resp,
        buf: Vec::new(),
    };
    sim.store()
        .patch(
            &pods(),
            Some(ns),
            name,
            json!({"status": {"phase": "Failed"}}),
        )
        .unwrap();
    let e = w.event().await;
    assert_eq!(
        (e["type"].as_str(), e["object"]["kind"].as_str()),
        (Some("MODIFIED"), Some("PartialObjectMetadata"))
    );
    assert!(e["object"].get("status").is_none());
    // Without the header, full objects.
    let (_, full) = get_json(&c, &format!("{}/api/v1/pods", sim.url())).await;
    assert!(full["items"][0]["spec"]["containers"].is_array());
}

#[tokio::test]
async fn writes_over_http_and_their_errors() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    let base = format!("{}/api/v1/namespaces/dev/configmaps", sim.url());
    // Objects are created only in a namespace that exists.
    let r = c
        .post(&base)
        .json_body(&json!({"metadata": {"name": "cm"}, "data": {"a": "1"}}))
        .send()
        .await
        .unwrap();
    let s: Value = body_json(r).await;
    assert_eq!(
        (s["code"].as_u64(), s["message"].as_str()),
        (Some(404), Some("namespaces \"dev\" not found"))
    );
    let r = c
        .post(format!("{}/api/v1/namespaces", sim.url()))
        .json_body(&json!({"metadata": {"name": "dev"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = c
        .post(&base)
        .json_body(&json!({"metadata": {"name": "cm"}, "data": {"a": "1"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let created: Value = body_json(r).await;
    assert_eq!(created["metadata"]["namespace"], "dev");
    assert!(
        created["metadata"]["uid"].is_string()
            && created["metadata"]["creationTimestamp"].is_string()
    );
    let r = c
        .post(&base)
        .json_body(&json!({"metadata": {"name": "cm"}}))
        .send()
        .await
        .unwrap();
    let s: Value = body_json(r).await;
    assert_eq!(
        (s["code"].as_u64(), s["reason"].as_str()),
        (Some(409), Some("AlreadyExists"))
    );
    let r = c
        .post(&base)
        .json_body(&json!({"metadata": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let mut replaced = created.clone();
    replaced["data"]["a"] = json!("2");
    let r = c
        .put(format!("{base}/cm"))
        .json_body(&replaced)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let updated: Value = body_json(r).await;
    assert_ne!(
        updated["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    // A replace from a stale version conflicts.
    let r = c
        .put(format!("{base}/cm"))
        .json_body(&replaced)
        .send()
        .await
        .unwrap();
    let s: Value = body_json(r).await;
    assert_eq!(
        (s["code"].as_u64(), s["reason"].as_str()),
        (Some(409), Some("Conflict"))
    );
    let r = c
        .patch(format!("{base}/cm"))
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"data":{"b":"3","a":null}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let patched: Value = body_json(r).await;
    assert_eq!(patched["data"], json!({"b": "3"}));
    let r = c
        .patch(format!("{base}/cm"))
        .header("content-type", "application/json-patch+json")
        .body("[]")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    let (code, got) = get_json(&c, &format!("{base}/cm")).await;
    assert_eq!((code, &got["data"]), (200, &json!({"b": "3"})));
    let r = c.delete(format!("{base}/cm")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let (code, s) = get_json(&c, &format!("{base}/cm")).await;
    assert_eq!(
        (code, s["reason"].as_str(), s["details"]["name"].as_str()),
        (404, Some("NotFound"), Some("cm"))
    );
    let (code, _) = get_json(&c, &format!("{}/api/v1/nosuchthings", sim.url())).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn custom_resources_become_servable() {
    let sim = start(SimConfig::default()).await;
    let widgets = ApiResource::new("example.com", "v1", "Widget", "widgets", Scope::Namespaced);
    let c = client();
    let url = format!("{}/apis/example.com/v1/namespaces/a/widgets", sim.url());
    assert_eq!(get_json(&c, &url).await.0, 404);
    sim.store().register_crd(widgets.clone());
    sim.store()
        .create(
            &widgets,
            json!({"metadata": {"name": "w", "namespace": "a"}, "spec": {"size": 3}}),
        )
        .unwrap();
    let (code, l) = get_json(&c, &url).await;
    assert_eq!(
        (code, l["kind"].as_str(), names(&l)),
        (200, Some("WidgetList"), vec!["w".to_owned()])
    );
    let (_, groups) = get_json(&c, &format!("{}/apis", sim.url())).await;
    assert!(
        groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "example.com")
    );
    let (_, rl) = get_json(&c, &format!("{}/apis/example.com/v1", sim.url())).await;
    assert_eq!(rl["resources"][0]["kind"], "Widget");
}

#[tokio::test]
async fn fault_close_watches_after_events() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    let rv = sim.store().resource_version();
    let url = format!("{}/api/v1/pods?watch=true&resourceVersion={rv}", sim.url());
    let mut open = Lines::open(&c, &url).await;
    sim.faults().close_watches_after_events(2);
    for i in 0..3 {
        sim.store()
            .create(&pods(), pod(&format!("p{i}"), "ns", json!({})))
            .unwrap();
    }
    assert_eq!(ev(&open.event().await), pair("ADDED", "p0"));
    assert_eq!(ev(&open.event().await), pair("ADDED", "p1"));
    assert!(matches!(open.read().await, Read::End));
    // A new watch gets the same treatment; after clear, it stays open.
    let mut next = Lines::open(&c, &url).await;
    assert_eq!(ev(&next.event().await), pair("ADDED", "p0"));
    assert_eq!(ev(&next.event().await), pair("ADDED", "p1"));
    assert!(matches!(next.read().await, Read::End));
    sim.faults().clear();
    let mut after = Lines::open(&c, &url).await;
    for want in ["p0", "p1", "p2"] {
        assert_eq!(ev(&after.event().await), pair("ADDED", want));
    }
    assert!(
        after
            .read_within(Duration::from_millis(100))
            .await
            .is_none()
    );
}

#[tokio::test]
async fn fault_close_all_watches_now() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    let url = format!("{}/api/v1/pods?watch=true&resourceVersion=1", sim.url());
    let mut a = Lines::open(&c, &url).await;
    let mut b = Lines::open(&c, &url).await;
    sim.faults().close_all_watches_now();
    assert!(matches!(a.read().await, Read::End));
    assert!(matches!(b.read().await, Read::End));
    // New watches are not affected.
    let mut d = Lines::open(&c, &url).await;
    sim.store()
        .create(&pods(), pod("x", "ns", json!({})))
        .unwrap();
    assert_eq!(ev(&d.event().await), pair("ADDED", "x"));
}

#[tokio::test]
async fn fault_stall_watches() {
    let sim = start(SimConfig {
        bookmark_interval: Duration::from_millis(20),
        ..SimConfig::default()
    })
    .await;
    let c = client();
    let rv = sim.store().resource_version();
    let mut w = Lines::open(
        &c,
        &format!(
            "{}/api/v1/pods?watch=true&resourceVersion={rv}&allowWatchBookmarks=true",
            sim.url()
        ),
    )
    .await;
    assert_eq!(w.event().await["type"], "BOOKMARK");
    sim.faults().stall_watches(Duration::from_millis(400));
    // Drain what may have been in flight before the stall.
    while w.read_within(Duration::from_millis(50)).await.is_some() {}
    sim.store()
        .create(&pods(), pod("late", "ns", json!({})))
        .unwrap();
    let started = std::time::Instant::now();
    assert!(
        w.read_within(Duration::from_millis(250)).await.is_none(),
        "sent during a stall"
    );
    assert_eq!(ev(&w.object_event().await), pair("ADDED", "late"));
    assert!(started.elapsed() >= Duration::from_millis(250));
}

#[tokio::test]
async fn fault_fail_next_requests() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    let list = format!("{}/api/v1/pods", sim.url());
    sim.faults().fail_next(RequestKind::List, 429, 2, Some(3));
    // A 429 is the API server's request filters' answer, Go's `http.Error`: plain text with a
    // Retry-After header, whatever encoding the request asked for.
    for accept in ["application/json", "application/vnd.kubernetes.protobuf"] {
        let r = c.get(&list).header("accept", accept).send().await.unwrap();
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()["retry-after"], "3");
        assert_eq!(
            r.headers()["content-type"],
            "text/plain; charset=utf-8",
            "{accept}"
        );
        assert_eq!(
            r.text().await.unwrap(),
            "Too many requests, please try again later.\n"
        );
    }
    assert_eq!(c.get(&list).send().await.unwrap().status(), 200);
    // Any other code is a Status in the encoding the request negotiated.
    sim.faults().fail_next(RequestKind::List, 503, 1, Some(2));
    let r = c
        .get(&list)
        .header(
            "accept",
            "application/vnd.kubernetes.protobuf, application/json",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "2");
    assert_eq!(
        r.headers()["content-type"],
        kinformer_protobuf::wire::CONTENT_TYPE
    );
    let envelope = kinformer_protobuf::wire::decode_envelope(r.bytes().await.unwrap()).unwrap();
    let s = kinformer_protobuf::wire::decode_status(&envelope.raw).unwrap();
    assert_eq!(
        (
            s.code,
            s.reason.as_deref(),
            s.details.and_then(|d| d.retry_after_seconds)
        ),
        (Some(503), Some("ServiceUnavailable"), Some(2))
    );
    // The filters answer before the handler negotiates: a request that would get a 406 gets
    // the injected failure, in JSON.
    sim.faults().fail_next(RequestKind::List, 500, 1, None);
    let r = c
        .get(&list)
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 500);
    assert_eq!(body_json(r).await["reason"], "InternalError");
    assert_eq!(
        c.get(&list)
            .header("accept", "text/html")
            .send()
            .await
            .unwrap()
            .status(),
        406
    );
    sim.faults().fail_next(RequestKind::Watch, 503, 1, None);
    assert_eq!(
        c.get(&list).send().await.unwrap().status(),
        200,
        "a watch failure must not hit lists"
    );
    let r = c.get(format!("{list}?watch=true")).send().await.unwrap();
    assert_eq!(r.status(), 503);
    sim.faults().fail_next(RequestKind::Any, 500, 1, None);
    let (code, s) = get_json(&c, &format!("{list}?watch=true")).await;
    assert_eq!((code, s["reason"].as_str()), (500, Some("InternalError")));
    assert_eq!(c.get(&list).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn fault_gone_next_continue_expires_one_continue_token() {
    let sim = start(SimConfig::default()).await;
    sim.store().seed_pods(12, 1);
    let c = client();
    let (_, first) = get_json(&c, &format!("{}/api/v1/pods?limit=5", sim.url())).await;
    let token = first["metadata"]["continue"].as_str().unwrap().to_owned();
    sim.faults().gone_next_continue();
    // A list without a token is not what the knob waits for.
    let (code, _) = get_json(&c, &format!("{}/api/v1/pods?limit=5", sim.url())).await;
    assert_eq!(code, 200);
    let page = format!("{}/api/v1/pods?limit=5&continue={token}", sim.url());
    let (code, status) = get_json(&c, &page).await;
    assert_eq!((code, status["reason"].as_str()), (410, Some("Expired")));
    assert!(status["metadata"]["continue"].is_string(), "{status}");
    // Only the next one: the same token is served again, history is kept.
    let (code, rest) = get_json(&c, &page).await;
    assert_eq!(code, 200);
    assert_eq!(names(&first).len() + names(&rest).len(), 10);
}

#[tokio::test]
async fn fault_gone_next_watch() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    sim.faults().gone_next_watch();
    let url = format!(
        "{}/api/v1/pods?watch=true&resourceVersion={}",
        sim.url(),
        sim.store().resource_version()
    );
    let mut w = Lines::open(&c, &url).await;
    let e = w.event().await;
    assert_eq!(
        (
            e["type"].as_str(),
            e["object"]["code"].as_u64(),
            e["object"]["reason"].as_str()
        ),
        (Some("ERROR"), Some(410), Some("Expired"))
    );
    assert!(matches!(w.read().await, Read::End));
    // Only the next one.
    let mut w = Lines::open(&c, &url).await;
    sim.store()
        .create(&pods(), pod("x", "ns", json!({})))
        .unwrap();
    assert_eq!(ev(&w.event().await), pair("ADDED", "x"));
}

#[tokio::test]
async fn fault_malformed_and_oversized_lines() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    let url = format!(
        "{}/api/v1/pods?watch=true&resourceVersion={}",
        sim.url(),
        sim.store().resource_version()
    );
    let mut w = Lines::open(&c, &url).await;
    sim.faults().malformed_next_watch_line();
    sim.store()
        .create(&pods(), pod("a", "ns", json!({})))
        .unwrap();
    let Read::Line(bad) = w.read().await else {
        panic!("no line")
    };
    assert!(
        serde_json::from_slice::<Value>(&bad).is_err(),
        "{}",
        String::from_utf8_lossy(&bad)
    );
    assert_eq!(ev(&w.event().await), pair("ADDED", "a"));
    sim.faults().oversized_next_watch_line(3 * 1024 * 1024);
    sim.store()
        .create(&pods(), pod("b", "ns", json!({})))
        .unwrap();
    let Read::Line(big) = w.read().await else {
        panic!("no line")
    };
    assert_eq!(big.len(), 3 * 1024 * 1024 + 1);
    let e: Value = serde_json::from_slice(&big).unwrap();
    assert_eq!(ev(&e), pair("ADDED", "b"));
    sim.store()
        .create(&pods(), pod("c", "ns", json!({})))
        .unwrap();
    let Read::Line(normal) = w.read().await else {
        panic!("no line")
    };
    assert!(normal.len() < 1000);
}

#[tokio::test]
async fn fault_cut_next_watch_mid_line() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    let url = format!(
        "{}/api/v1/pods?watch=true&resourceVersion={}",
        sim.url(),
        sim.store().resource_version()
    );
    let mut w = Lines::open(&c, &url).await;
    sim.faults().cut_next_watch_mid_line();
    sim.store()
        .create(&pods(), pod("a", "ns", json!({})))
        .unwrap();
    assert!(matches!(w.read().await, Read::Broken));
    assert!(
        !w.buf.is_empty() && !w.buf.contains(&b'\n'),
        "half a line arrives first"
    );
    // Storage is intact and a new watch sees the event.
    let mut w = Lines::open(&c, &url).await;
    assert_eq!(ev(&w.event().await), pair("ADDED", "a"));
}

#[tokio::test]
async fn fault_slow_chunks() {
    let sim = start(SimConfig::default()).await;
    sim.store().seed_pods(200, 1);
    let c = client();
    let list = format!("{}/api/v1/pods", sim.url());
    sim.faults().slow_chunks(Some(Duration::from_millis(100)));
    let started = std::time::Instant::now();
    let (code, l) = get_json(&c, &list).await;
    assert_eq!((code, l["items"].as_array().unwrap().len()), (200, 200));
    let slow = started.elapsed();
    // About 1 MB in 256 KiB chunks: at least three delays.
    assert!(slow >= Duration::from_millis(300), "{slow:?}");
    sim.faults().slow_chunks(None);
    let started = std::time::Instant::now();
    get_json(&c, &list).await;
    let fast = started.elapsed();
    // Cleared, the same list skips at least two of the three delays. Relative to the slow run,
    // not an absolute bound, so a loaded machine slows both alike.
    assert!(
        fast + Duration::from_millis(200) < slow,
        "{fast:?} vs {slow:?}"
    );
}

#[tokio::test]
async fn fault_drop_all_connections_keeps_storage() {
    let sim = start(SimConfig::default()).await;
    sim.store()
        .create(&pods(), pod("kept", "ns", json!({})))
        .unwrap();
    let c = client();
    let url = format!(
        "{}/api/v1/pods?watch=true&resourceVersion={}",
        sim.url(),
        sim.store().resource_version()
    );
    let mut w = Lines::open(&c, &url).await;
    sim.faults().drop_all_connections();
    assert!(matches!(w.read().await, Read::Broken | Read::End));
    let (code, l) = get_json(&client(), &format!("{}/api/v1/pods", sim.url())).await;
    assert_eq!((code, names(&l)), (200, vec!["kept".to_owned()]));
}

#[tokio::test]
async fn fault_compact_now_breaks_lagging_watch_resumes_only() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    let start_rv = sim.store().resource_version();
    sim.store()
        .create(&pods(), pod("a", "ns", json!({})))
        .unwrap();
    let current = sim.store().resource_version();
    let mut caught_up = Lines::open(
        &c,
        &format!(
            "{}/api/v1/pods?watch=true&resourceVersion={current}",
            sim.url()
        ),
    )
    .await;
    sim.faults().compact_now();
    let mut old = Lines::open(
        &c,
        &format!(
            "{}/api/v1/pods?watch=true&resourceVersion={start_rv}",
            sim.url()
        ),
    )
    .await;
    assert_eq!(old.event().await["object"]["code"], 410);
    sim.store()
        .create(&pods(), pod("b", "ns", json!({})))
        .unwrap();
    assert_eq!(ev(&caught_up.event().await), pair("ADDED", "b"));
}

#[tokio::test]
async fn tls_with_ca_token_rotation_and_basic_auth() {
    let sim = start(SimConfig {
        tls: true,
        auth: Auth::BearerToken("t1".into()),
        ..SimConfig::default()
    })
    .await;
    let ca = sim.ca_pem().unwrap();
    let url = format!("{}/api/v1/pods", sim.url());
    assert!(
        client().get(&url).send().await.is_err(),
        "an untrusted server certificate must fail"
    );
    let c = client_with(Some(&ca), None);
    let r = c.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let s: Value = body_json(r).await;
    assert_eq!(
        (s["kind"].as_str(), s["reason"].as_str(), s["code"].as_u64()),
        (Some("Status"), Some("Unauthorized"), Some(401))
    );
    assert_eq!(
        c.get(&url)
            .bearer_auth("wrong")
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    assert_eq!(
        c.get(&url).bearer_auth("t1").send().await.unwrap().status(),
        200
    );
    // localhost is in the certificate too.
    let local = url.replace("127.0.0.1", "localhost");
    assert_eq!(
        c.get(&local)
            .bearer_auth("t1")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    sim.set_auth(Auth::Any(vec![
        Auth::BearerToken("t2".into()),
        Auth::Basic {
            username: "u".into(),
            password: "p".into(),
        },
    ]));
    assert_eq!(
        c.get(&url).bearer_auth("t1").send().await.unwrap().status(),
        401
    );
    assert_eq!(
        c.get(&url).bearer_auth("t2").send().await.unwrap().status(),
        200
    );
    assert_eq!(
        c.get(&url)
            .basic_auth("u", Some("p"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        c.get(&url)
            .basic_auth("u", Some("x"))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    let kc = sim.kubeconfig_yaml();
    assert!(
        kc.contains("token: \"t2\"") && kc.contains(&sim.url()),
        "{kc}"
    );
    // Watches work over TLS, on HTTP/2 (negotiated with ALPN).
    let rv = sim.store().resource_version();
    let resp = c
        .get(format!("{url}?watch=true&resourceVersion={rv}"))
        .bearer_auth("t2")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.version(), reqwest::Version::HTTP_2);
    let mut w = Lines {
        resp,
        buf: Vec::new(),
    };
    sim.store()
        .create(&pods(), pod("over-h2", "ns", json!({})))
        .unwrap();
    assert_eq!(ev(&w.event().await), pair("ADDED", "over-h2"));
}

#[tokio::test]
async fn tls_client_certificates() {
    let sim = start(SimConfig {
        tls: true,
        auth: Auth::ClientCert,
        ..SimConfig::default()
    })
    .await;
    let ca = sim.ca_pem().unwrap();
    let url = format!("{}/api/v1/pods", sim.url());
    let (cert, key) = sim.issue_client_cert("alice");
    let with_cert = client_with(Some(&ca), Some((&cert, &key)));
    assert_eq!(with_cert.get(&url).send().await.unwrap().status(), 200);
    let without = client_with(Some(&ca), None);
    let r = without.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(
        without
            .get(&url)
            .bearer_auth("anything")
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    // A certificate from another server's client CA is refused during the handshake.
    let other = start(SimConfig {
        tls: true,
        ..SimConfig::default()
    })
    .await;
    let (cert2, key2) = other.issue_client_cert("mallory");
    let stranger = client_with(Some(&ca), Some((&cert2, &key2)));
    assert!(stranger.get(&url).send().await.is_err());
    assert!(sim.kubeconfig_yaml().contains("client-certificate-data"));
}

#[tokio::test]
async fn discovery_answers_for_clients() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    let (_, v) = get_json(&c, &format!("{}/version", sim.url())).await;
    assert_eq!(v["major"], "1");
    let (_, api) = get_json(&c, &format!("{}/api", sim.url())).await;
    assert_eq!(api["versions"], json!(["v1"]));
    let (_, core) = get_json(&c, &format!("{}/api/v1", sim.url())).await;
    let pods = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods")
        .unwrap()
        .clone();
    assert_eq!(
        (pods["kind"].as_str(), pods["namespaced"].as_bool()),
        (Some("Pod"), Some(true))
    );
    assert!(pods["verbs"].as_array().unwrap().contains(&json!("watch")));
    let (_, apps) = get_json(&c, &format!("{}/apis/apps/v1", sim.url())).await;
    assert!(
        apps["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "deployments")
    );
    // Older kubectl fetches an OpenAPI v2 document as protobuf before `create`.
    let r = c
        .get(format!("{}/openapi/v2", sim.url()))
        .header(
            "accept",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.bytes().await.unwrap().starts_with(b"\x0a\x032.0\x12"));
    let (_, v3) = get_json(&c, &format!("{}/openapi/v3", sim.url())).await;
    assert!(v3["paths"]["api/v1"]["serverRelativeURL"].is_string());
}

#[test]
fn public_handles_and_futures_are_send_and_sync() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    fn types<T: Send + Sync>() {}
    types::<SimServer>();
    types::<kinformer_sim::Store>();
    types::<kinformer_sim::Faults>();
    types::<kinformer_sim::ChurnHandle>();
    types::<kinformer_sim::Error>();
    types::<Auth>();
    let start = SimServer::start(SimConfig::default());
    send(&start);
    drop(start);
    send_sync(&SimConfig::default());
}

#[tokio::test]
async fn the_request_log_lists_what_clients_asked_in_order() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let http = client();
    for q in [
        "limit=2&resourceVersion=0",
        "labelSelector=app%3Dweb&limit=1",
    ] {
        http.get(format!("{}/api/v1/pods?{q}", sim.url()))
            .send()
            .await
            .unwrap();
    }
    let log = sim.requests();
    assert_eq!(log.len(), 2);
    assert_eq!(
        (log[0].method.as_str(), log[0].path.as_str()),
        ("GET", "/api/v1/pods")
    );
    assert_eq!(log[0].param("resourceVersion"), Some("0"));
    assert_eq!(log[1].param("labelSelector"), Some("app=web"), "decoded");
    assert!(!log[1].is_watch());
    sim.clear_requests();
    assert!(sim.requests().is_empty());
    sim.shutdown().await;
}

#[tokio::test]
async fn legacy_list_with_limit_is_an_exact_read_and_expires() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store();
    store
        .create(&pods(), pod("a", "ns", json!({"v": "1"})))
        .unwrap();
    let at = store.resource_version();
    store
        .patch(
            &pods(),
            Some("ns"),
            "a",
            json!({"metadata": {"labels": {"v": "2"}}}),
        )
        .unwrap();
    store.create(&pods(), pod("b", "ns", json!({}))).unwrap();
    let c = client();
    let base = format!("{}/api/v1/pods", sim.url());
    // With a limit and no resourceVersionMatch, the version is read exactly.
    let (code, l) = get_json(&c, &format!("{base}?limit=1&resourceVersion={at}")).await;
    assert_eq!(code, 200);
    assert_eq!(l["metadata"]["resourceVersion"], at.to_string());
    assert_eq!(names(&l), ["a"]);
    assert_eq!(l["items"][0]["metadata"]["labels"]["v"], "1");
    assert_eq!(
        l["metadata"].get("continue"),
        None,
        "b did not exist at {at}"
    );
    // Without a limit, the same request reads the current state (not older than `at`).
    let (_, l) = get_json(&c, &format!("{base}?resourceVersion={at}")).await;
    assert_eq!(
        l["metadata"]["resourceVersion"],
        store.resource_version().to_string()
    );
    // Once compacted, the exact read answers 410 (the not-older-than read still works).
    sim.faults().compact_now();
    let (code, s) = get_json(&c, &format!("{base}?limit=1&resourceVersion={at}")).await;
    assert_eq!((code, s["reason"].as_str()), (410, Some("Expired")));
    let (code, _) = get_json(&c, &format!("{base}?resourceVersion={at}")).await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn resource_version_zero_lists_ignore_the_limit_unless_the_watch_cache_is_off() {
    // The watch cache serves "0" whole on every release (cacher.go, `computeListLimit`); only a
    // server without one reads it from storage, which pages.
    for (version, watch_cache, paged) in [
        (KubeVersion::V1_32, true, false),
        (KubeVersion::V1_33, true, false),
        (KubeVersion::V1_34, true, false),
        (KubeVersion::V1_35, true, false),
        (KubeVersion::V1_36, true, false),
        (KubeVersion::V1_34, false, true),
    ] {
        let sim = start(SimConfig {
            version,
            watch_cache,
            ..SimConfig::default()
        })
        .await;
        sim.store().seed_pods(10, 1);
        let c = client();
        let (_, v) = get_json(&c, &format!("{}/version", sim.url())).await;
        assert_eq!(v["minor"], version.minor().to_string());
        let (code, l) = get_json(
            &c,
            &format!("{}/api/v1/pods?resourceVersion=0&limit=3", sim.url()),
        )
        .await;
        assert_eq!(code, 200);
        let n = l["items"].as_array().unwrap().len();
        let case = format!("{version:?}, watch cache {watch_cache}");
        if paged {
            assert_eq!(n, 3, "{case}");
            assert!(l["metadata"]["continue"].is_string(), "{case}");
        } else {
            assert_eq!(n, 10, "{case}: the watch cache ignores the limit");
            assert_eq!(l["metadata"].get("continue"), None, "{case}");
        }
        // Any other list honours the limit either way.
        for query in [
            "limit=3",
            "limit=3&resourceVersion=",
            "limit=3&resourceVersion=1&resourceVersionMatch=NotOlderThan",
        ] {
            let (_, l) = get_json(&c, &format!("{}/api/v1/pods?{query}", sim.url())).await;
            assert_eq!(l["items"].as_array().unwrap().len(), 3, "{case}: {query}");
        }
    }
}

#[tokio::test]
async fn without_a_watch_cache_watches_get_no_periodic_bookmarks() {
    for watch_cache in [true, false] {
        let sim = start(SimConfig {
            watch_cache,
            bookmark_interval: Duration::from_millis(20),
            ..SimConfig::default()
        })
        .await;
        let rv = sim.store().resource_version();
        let c = client();
        let mut w = Lines::open(
            &c,
            &format!(
                "{}/api/v1/pods?watch=true&allowWatchBookmarks=true&resourceVersion={rv}",
                sim.url()
            ),
        )
        .await;
        // What arrives in 300 ms: bookmarks every 20 ms with a watch cache, nothing without.
        let mut bookmarks = 0;
        let until = tokio::time::Instant::now() + Duration::from_millis(300);
        while let Some(left) = until.checked_duration_since(tokio::time::Instant::now()) {
            match w.read_within(left).await {
                Some(Read::Line(l)) => {
                    let e: Value = serde_json::from_slice(&l).unwrap();
                    assert_eq!(e["type"], "BOOKMARK", "{e}");
                    bookmarks += 1;
                }
                Some(other) => panic!("the watch ended: {other:?}"),
                None => break,
            }
        }
        if watch_cache {
            assert!(bookmarks >= 2, "{bookmarks} bookmarks in 300 ms at 20 ms");
        } else {
            assert_eq!(bookmarks, 0);
        }
    }
}

#[tokio::test]
async fn list_items_carry_no_kind_but_gets_watches_and_metadata_items_do() {
    let sim = start(SimConfig::default()).await;
    sim.store()
        .create(&pods(), pod("a", "ns", json!({})))
        .unwrap();
    let c = client();
    let (_, l) = get_json(&c, &format!("{}/api/v1/pods", sim.url())).await;
    assert_eq!(
        (l["kind"].as_str(), l["apiVersion"].as_str()),
        (Some("PodList"), Some("v1"))
    );
    let item = l["items"][0].as_object().unwrap();
    assert!(
        !item.contains_key("kind") && !item.contains_key("apiVersion"),
        "{item:?}"
    );
    assert_eq!(item["metadata"]["name"], "a");
    let (_, o) = get_json(&c, &format!("{}/api/v1/namespaces/ns/pods/a", sim.url())).await;
    assert_eq!(
        (o["kind"].as_str(), o["apiVersion"].as_str()),
        (Some("Pod"), Some("v1"))
    );
    let r = c
        .get(format!("{}/api/v1/pods", sim.url()))
        .header(
            "accept",
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        )
        .send()
        .await
        .unwrap();
    let m = body_json(r).await;
    assert_eq!(m["items"][0]["kind"], "PartialObjectMetadata");
    let mut w = Lines::open(&c, &format!("{}/api/v1/pods?watch=1", sim.url())).await;
    let e = w.event().await;
    assert_eq!(
        (
            e["object"]["kind"].as_str(),
            e["object"]["apiVersion"].as_str()
        ),
        (Some("Pod"), Some("v1"))
    );
}

#[tokio::test]
async fn bookmarks_come_each_minute_and_just_before_the_timeout() {
    // The default interval is a minute, so the only bookmark of a 4 s watch is the one the
    // watch cache sends 2 s before the timeout; then the stream ends.
    let sim = start(SimConfig::default()).await;
    let c = client();
    let rv = sim.store().resource_version();
    let started = tokio::time::Instant::now();
    let mut w = Lines::open(
        &c,
        &format!(
            "{}/api/v1/pods?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=4",
            sim.url()
        ),
    )
    .await;
    let e = w.event().await;
    let at = started.elapsed();
    assert_eq!(e["type"], "BOOKMARK");
    assert!(
        at >= Duration::from_millis(1500) && at < Duration::from_millis(3900),
        "bookmark after {at:?}"
    );
    assert!(matches!(w.read().await, Read::End));
    assert!(started.elapsed() >= Duration::from_millis(3900));
}

#[tokio::test]
async fn the_watch_cache_forgets_before_storage_does_and_per_resource() {
    let cms = ApiResource::new("", "v1", "ConfigMap", "configmaps", Scope::Namespaced);
    let sim = start(SimConfig {
        watch_cache_window: Duration::from_millis(100),
        ..SimConfig::default()
    })
    .await;
    let store = sim.store();
    let before = store.resource_version();
    let cm = |name: String| json!({"metadata": {"name": name, "namespace": "ns"}});
    for i in 0..150 {
        store.create(&cms, cm(format!("old{i}"))).unwrap();
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    let recent = store.resource_version();
    for i in 0..5 {
        store.create(&cms, cm(format!("new{i}"))).unwrap();
    }
    let c = client();
    let watch = |plural: &str, rv: u64| {
        format!(
            "{}/api/v1/{plural}?watch=true&resourceVersion={rv}",
            sim.url()
        )
    };
    // The cache holds the last 100 events of configmaps: older versions are too old to watch
    // from, though storage still reads them exactly.
    let mut w = Lines::open(&c, &watch("configmaps", before)).await;
    let e = w.event().await;
    assert_eq!(
        (e["type"].as_str(), &e["object"]["code"]),
        (Some("ERROR"), &json!(410))
    );
    let oldest_held = store.resource_version() - 100 + 1;
    assert_eq!(
        e["object"]["message"],
        format!("too old resource version: {before} ({})", oldest_held - 1)
    );
    let (code, _) = get_json(
        &c,
        &format!(
            "{}/api/v1/configmaps?resourceVersion={before}&resourceVersionMatch=Exact&limit=1",
            sim.url()
        ),
    )
    .await;
    assert_eq!(code, 200, "storage keeps what the watch cache let go");
    // From a version the cache still holds, the watch goes on.
    let mut w = Lines::open(&c, &watch("configmaps", recent)).await;
    assert_eq!(ev(&w.event().await), pair("ADDED", "new0"));
    // Pods have their own cache, which has let nothing go.
    sim.store()
        .create(&pods(), pod("p", "ns", json!({})))
        .unwrap();
    let mut w = Lines::open(&c, &watch("pods", before)).await;
    assert_eq!(ev(&w.event().await), pair("ADDED", "p"));
}

#[tokio::test]
async fn history_is_time_based_and_compacted_periodically() {
    let cms = ApiResource::new("", "v1", "ConfigMap", "configmaps", Scope::Namespaced);
    // By default far more than 10 000 events are kept (compaction is every 5 minutes).
    let sim = start(SimConfig::default()).await;
    let store = sim.store();
    store
        .create(
            &cms,
            json!({"metadata": {"name": "first", "namespace": "ns"}}),
        )
        .unwrap();
    let first = store.resource_version();
    for i in 0..12_000 {
        store
            .create(
                &cms,
                json!({"metadata": {"name": format!("c{i}"), "namespace": "ns"}}),
            )
            .unwrap();
    }
    let c = client();
    let exact = |sim: &SimServer, rv: u64| {
        format!(
            "{}/api/v1/configmaps?resourceVersion={rv}&resourceVersionMatch=Exact&limit=1",
            sim.url()
        )
    };
    let (code, _) = get_json(&c, &exact(&sim, first)).await;
    assert_eq!(code, 200);

    // With a short interval, a version survives the first compaction after it was written and
    // is gone after the second.
    let every = Duration::from_millis(300);
    let sim = start(SimConfig {
        compaction_interval: Some(every),
        ..SimConfig::default()
    })
    .await;
    let started = tokio::time::Instant::now();
    sim.store()
        .create(&cms, json!({"metadata": {"name": "a", "namespace": "ns"}}))
        .unwrap();
    let at = sim.store().resource_version();
    sim.store()
        .create(&cms, json!({"metadata": {"name": "b", "namespace": "ns"}}))
        .unwrap();
    let mut gone_after = None;
    for _ in 0..200 {
        let (code, _) = get_json(&c, &exact(&sim, at)).await;
        if code == 410 {
            gone_after = Some(started.elapsed());
            break;
        }
        assert_eq!(code, 200);
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let gone_after = gone_after.expect("compacted within 5 s");
    assert!(gone_after >= every, "compacted after {gone_after:?}");
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    use std::io::Read as _;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .unwrap();
    out
}

#[tokio::test]
async fn large_lists_are_gzipped_when_asked_and_watches_never() {
    let sim = start(SimConfig::default()).await;
    sim.store().seed_pods(100, 1);
    // A client that does not decompress, to see the bytes on the wire.
    let raw = reqwest::Client::builder()
        .tls_backend_preconfigured(tls_config(None, None))
        .no_gzip()
        .build()
        .unwrap();
    let url = format!("{}/api/v1/pods", sim.url());
    let plain = raw.get(&url).send().await.unwrap();
    assert_eq!(plain.headers().get("content-encoding"), None);
    let plain = plain.bytes().await.unwrap();
    assert!(plain.len() > 128 * 1024, "{}", plain.len());

    let r = raw
        .get(&url)
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-encoding"], "gzip");
    assert_eq!(r.headers()["vary"], "Accept-Encoding");
    let zipped = r.bytes().await.unwrap();
    assert!(
        zipped.len() < plain.len() / 2,
        "{} of {}",
        zipped.len(),
        plain.len()
    );
    assert_eq!(gunzip(&zipped), plain.to_vec());

    // Small responses, refused gzip, and watches are sent plain.
    for (q, accept) in [
        ("?limit=1", "gzip"),
        ("", "gzip;q=0"),
        ("", "identity"),
        ("?watch=1", "gzip"),
    ] {
        let r = raw
            .get(format!("{url}{q}"))
            .header("accept-encoding", accept)
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers().get("content-encoding"), None, "{q} {accept}");
    }

    // A server configured without compression never gzips.
    let off = start(SimConfig {
        compression: false,
        ..SimConfig::default()
    })
    .await;
    off.store().seed_pods(100, 1);
    let r = raw
        .get(format!("{}/api/v1/pods", off.url()))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers().get("content-encoding"), None);
}

async fn send_json(
    c: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut r = c.request(method, url);
    if let Some(b) = body {
        r = r.json_body(&b);
    }
    let r = r.send().await.unwrap();
    let code = r.status().as_u16();
    (code, body_json(r).await)
}

#[tokio::test]
async fn deletes_honour_preconditions_and_dry_run_writes_nothing() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    let base = format!("{}/api/v1/namespaces/default/configmaps", sim.url());
    use reqwest::Method;
    // A dry-run create answers 201 with the object and stores nothing.
    let (code, o) = send_json(
        &c,
        Method::POST,
        &format!("{base}?dryRun=All"),
        Some(json!({"metadata": {"name": "cm"}, "data": {"a": "1"}})),
    )
    .await;
    assert_eq!((code, o["metadata"]["name"].as_str()), (201, Some("cm")));
    let rv = sim.store().resource_version();
    assert_eq!(get_json(&c, &format!("{base}/cm")).await.0, 404);
    let (code, created) = send_json(
        &c,
        Method::POST,
        &base,
        Some(json!({"metadata": {"name": "cm"}, "data": {"a": "1"}})),
    )
    .await;
    assert_eq!(code, 201);
    let uid = created["metadata"]["uid"].as_str().unwrap().to_owned();
    let at = sim.store().resource_version();
    assert_eq!(at, rv + 1);
    let mut w = Lines::open(&c, &format!("{base}?watch=1&resourceVersion={at}")).await;
    // Dry-run patch, replace and delete change nothing and send no event.
    let r = c
        .patch(format!("{base}/cm?dryRun=All"))
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"data":{"a":"2"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(body_json(r).await["data"]["a"], "2");
    let mut replaced = created.clone();
    replaced["data"]["a"] = json!("3");
    let (code, _) = send_json(
        &c,
        Method::PUT,
        &format!("{base}/cm?dryRun=All"),
        Some(replaced),
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = send_json(
        &c,
        Method::DELETE,
        &format!("{base}/cm"),
        Some(json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]})),
    )
    .await;
    assert_eq!(code, 200);
    let (code, got) = get_json(&c, &format!("{base}/cm")).await;
    assert_eq!((code, &got["data"]["a"]), (200, &json!("1")));
    assert_eq!(sim.store().resource_version(), at);
    assert!(w.read_within(Duration::from_millis(200)).await.is_none());
    // Preconditions that do not match answer 409 and delete nothing.
    for pre in [
        json!({"resourceVersion": "1"}),
        json!({"uid": "not-the-uid"}),
    ] {
        let (code, s) = send_json(
            &c,
            Method::DELETE,
            &format!("{base}/cm"),
            Some(json!({"preconditions": pre})),
        )
        .await;
        assert_eq!(
            (code, s["reason"].as_str()),
            (409, Some("Conflict")),
            "{pre}"
        );
    }
    assert_eq!(get_json(&c, &format!("{base}/cm")).await.0, 200);
    let (code, _) = send_json(
        &c,
        Method::DELETE,
        &format!("{base}/cm"),
        Some(json!({"preconditions": {"uid": uid, "resourceVersion": at.to_string()}})),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(ev(&w.object_event().await), pair("DELETED", "cm"));
    // An unknown dry-run value is refused.
    let (code, _) = send_json(
        &c,
        Method::POST,
        &format!("{base}?dryRun=Some"),
        Some(json!({"metadata": {"name": "x"}})),
    )
    .await;
    assert_eq!(code, 400);
}

#[tokio::test]
async fn pods_are_deleted_gracefully_and_finalizers_hold_objects() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    use reqwest::Method;
    let base = format!("{}/api/v1/namespaces/default/pods", sim.url());
    let at = sim.store().resource_version();
    let mut w = Lines::open(&c, &format!("{base}?watch=1&resourceVersion={at}")).await;
    let scheduled = |name: &str, grace: u32| json!({"metadata": {"name": name}, "spec": {"nodeName": "node-1", "terminationGracePeriodSeconds": grace, "containers": [{"name": "c", "image": "nginx"}]}});
    for (name, grace) in [("slow", 1), ("forced", 30)] {
        let (code, _) = send_json(&c, Method::POST, &base, Some(scheduled(name, grace))).await;
        assert_eq!(code, 201);
        assert_eq!(ev(&w.object_event().await), pair("ADDED", name));
    }
    // A scheduled pod is marked Terminating first, then deleted when its grace period ends.
    let started = tokio::time::Instant::now();
    let (code, o) = send_json(&c, Method::DELETE, &format!("{base}/slow"), None).await;
    assert_eq!(code, 200);
    assert!(o["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(o["metadata"]["deletionGracePeriodSeconds"], 1);
    let e = w.object_event().await;
    assert_eq!(ev(&e), pair("MODIFIED", "slow"));
    assert_eq!(e["object"]["metadata"]["deletionGracePeriodSeconds"], 1);
    // When the period ends, the kubelet reports the stopped containers and the terminal phase,
    // then deletes with no grace period: the registry marks that first, then deletes.
    let stopped = w.object_event().await;
    assert_eq!(ev(&stopped), pair("MODIFIED", "slow"));
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(stopped["object"]["status"]["phase"], "Succeeded");
    let last = w.object_event().await;
    assert_eq!(ev(&last), pair("MODIFIED", "slow"));
    assert_eq!(last["object"]["metadata"]["deletionGracePeriodSeconds"], 0);
    let gone = w.object_event().await;
    assert_eq!(ev(&gone), pair("DELETED", "slow"));
    assert_eq!(gone["object"]["metadata"]["deletionGracePeriodSeconds"], 0);
    // gracePeriodSeconds=0 deletes at once, marked first.
    let (code, o) = send_json(
        &c,
        Method::DELETE,
        &format!("{base}/forced?gracePeriodSeconds=0"),
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        o["metadata"]["deletionGracePeriodSeconds"], 0,
        "a pod's delete answers the pod"
    );
    let marked = w.object_event().await;
    assert_eq!(ev(&marked), pair("MODIFIED", "forced"));
    assert!(marked["object"]["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(ev(&w.object_event().await), pair("DELETED", "forced"));
    // An unscheduled pod has nothing to stop: it goes at once.
    let (code, _) = send_json(&c, Method::POST, &base, Some(json!({"metadata": {"name": "pending"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))).await;
    assert_eq!(code, 201);
    assert_eq!(ev(&w.object_event().await), pair("ADDED", "pending"));
    send_json(&c, Method::DELETE, &format!("{base}/pending"), None).await;
    assert_eq!(ev(&w.object_event().await), pair("MODIFIED", "pending"));
    assert_eq!(ev(&w.object_event().await), pair("DELETED", "pending"));

    // Finalizers keep an object, marked for deletion, until they are removed.
    let cms = format!("{}/api/v1/namespaces/default/configmaps", sim.url());
    let (code, _) = send_json(
        &c,
        Method::POST,
        &cms,
        Some(json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})),
    )
    .await;
    assert_eq!(code, 201);
    let (code, o) = send_json(&c, Method::DELETE, &format!("{cms}/held"), None).await;
    assert_eq!(code, 200);
    assert!(o["metadata"]["deletionTimestamp"].is_string());
    let (code, got) = get_json(&c, &format!("{cms}/held")).await;
    assert_eq!(code, 200);
    assert!(got["metadata"]["deletionTimestamp"].is_string());
    let mut cw = Lines::open(
        &c,
        &format!(
            "{cms}?watch=1&resourceVersion={}",
            sim.store().resource_version()
        ),
    )
    .await;
    let r = c
        .patch(format!("{cms}/held"))
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"metadata":{"finalizers":null}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(ev(&cw.object_event().await), pair("DELETED", "held"));
    assert_eq!(get_json(&c, &format!("{cms}/held")).await.0, 404);
}

#[tokio::test]
async fn churn_makes_terminating_pods() {
    let sim = start(SimConfig::default()).await;
    sim.store().seed_pods(50, 3);
    let c = client();
    let at = sim.store().resource_version();
    let mut w = Lines::open(
        &c,
        &format!("{}/api/v1/pods?watch=1&resourceVersion={at}", sim.url()),
    )
    .await;
    let _churn = sim.store().churn(kinformer_sim::ChurnConfig {
        rate_per_sec: 500.0,
        seed: 9,
    });
    let mut terminating = false;
    for _ in 0..5_000 {
        let e = w.object_event().await;
        if e["type"] == "MODIFIED" && e["object"]["metadata"]["deletionTimestamp"].is_string() {
            terminating = true;
            break;
        }
    }
    assert!(terminating, "no pod turned Terminating");
}

#[tokio::test]
async fn created_pods_get_defaults_and_namespaces_are_real() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    use reqwest::Method;
    let (code, ns) = send_json(
        &c,
        Method::POST,
        &format!("{}/api/v1/namespaces", sim.url()),
        Some(json!({"metadata": {"name": "shop"}})),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    let (code, pod) = send_json(
        &c,
        Method::POST,
        &format!("{}/api/v1/namespaces/shop/pods", sim.url()),
        Some(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}]}, "status": {"phase": "Running"}})),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(
        pod["status"],
        json!({"phase": "Pending", "qosClass": "BestEffort"})
    );
    let spec = &pod["spec"];
    for (field, want) in [
        ("restartPolicy", json!("Always")),
        ("dnsPolicy", json!("ClusterFirst")),
        ("schedulerName", json!("default-scheduler")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("serviceAccountName", json!("default")),
        ("enableServiceLinks", json!(true)),
    ] {
        assert_eq!(spec[field], want, "{field}");
    }
    let container = &spec["containers"][0];
    assert_eq!(container["imagePullPolicy"], "Always");
    assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(container["ports"][0]["protocol"], "TCP");
    // A missing namespace is 404; the built-in ones exist.
    let (code, s) = send_json(
        &c,
        Method::POST,
        &format!("{}/api/v1/namespaces/nope/pods", sim.url()),
        Some(json!({"metadata": {"name": "p"}})),
    )
    .await;
    assert_eq!(
        (code, s["details"]["kind"].as_str()),
        (404, Some("namespaces"))
    );
    let (code, _) = send_json(
        &c,
        Method::POST,
        &format!("{}/api/v1/namespaces/kube-system/configmaps", sim.url()),
        Some(json!({"metadata": {"name": "c"}})),
    )
    .await;
    assert_eq!(code, 201);
    // Deleting a namespace answers it Terminating; the namespace controller then deletes what is
    // in it (a pod is marked, then deleted), then the namespace goes.
    let at = sim.store().resource_version();
    let mut w = Lines::open(
        &c,
        &format!("{}/api/v1/pods?watch=1&resourceVersion={at}", sim.url()),
    )
    .await;
    let (code, gone) = send_json(
        &c,
        Method::DELETE,
        &format!("{}/api/v1/namespaces/shop", sim.url()),
        None,
    )
    .await;
    assert_eq!(
        (code, gone["status"]["phase"].as_str()),
        (200, Some("Terminating"))
    );
    assert_eq!(ev(&w.object_event().await), pair("MODIFIED", "p"));
    assert_eq!(ev(&w.object_event().await), pair("DELETED", "p"));
    let namespaces = ApiResource::new("", "v1", "Namespace", "namespaces", Scope::Cluster);
    sim.store()
        .wait_until(WAIT, |s| s.get(&namespaces, None, "shop").is_none())
        .await
        .unwrap();
    assert_eq!(
        get_json(&c, &format!("{}/api/v1/namespaces/shop", sim.url()))
            .await
            .0,
        404
    );
}

#[tokio::test]
async fn strategic_merge_patches_merge_lists_by_key_and_store_no_directive() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    sim.store()
        .create(&pods(), json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c", "image": "a:1", "ports": [{"containerPort": 80}]}, {"name": "d", "image": "d:1"}]}}))
        .unwrap();
    // What kubectl apply sends to change one image.
    let r = c
        .patch(format!("{}/api/v1/namespaces/default/pods/p", sim.url()))
        .header("content-type", "application/strategic-merge-patch+json")
        .body(r#"{"spec":{"$setElementOrder/containers":[{"name":"c"},{"name":"d"}],"containers":[{"name":"c","image":"a:2"}]}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let stored = sim.store().get(&pods(), Some("default"), "p").unwrap();
    let containers = &stored["spec"]["containers"];
    assert_eq!(containers[0]["image"], "a:2");
    assert_eq!(containers[0]["ports"][0]["containerPort"], 80);
    assert_eq!(containers[1]["name"], "d");
    assert!(!stored.to_string().contains("$setElementOrder"), "{stored}");
    // Custom resources have no strategic merge patch: 415, as on a real server.
    let widgets = ApiResource::new("example.com", "v1", "Widget", "widgets", Scope::Namespaced);
    sim.store().register_crd(widgets.clone());
    sim.store()
        .create(
            &widgets,
            json!({"metadata": {"name": "w", "namespace": "default"}}),
        )
        .unwrap();
    let r = c
        .patch(format!(
            "{}/apis/example.com/v1/namespaces/default/widgets/w",
            sim.url()
        ))
        .header("content-type", "application/strategic-merge-patch+json")
        .body(r#"{"spec":{"size":2}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    assert_eq!(body_json(r).await["reason"], "UnsupportedMediaType");
    // Request bodies the sim cannot decode are refused the same way.
    let r = c
        .post(format!("{}/api/v1/namespaces/default/pods", sim.url()))
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .body(vec![0x6b, 0x38, 0x73, 0x00])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
}

#[tokio::test]
async fn content_negotiation_answers_406_and_serves_tables() {
    let sim = start(SimConfig::default()).await;
    sim.store()
        .create(&pods(), pod("a", "default", json!({})))
        .unwrap();
    let c = client();
    let list = format!("{}/api/v1/pods", sim.url());
    let one = format!("{}/api/v1/namespaces/default/pods/a", sim.url());
    let code = |url: String, accept: &'static str| {
        let c = c.clone();
        async move {
            let r = c.get(url).header("accept", accept).send().await.unwrap();
            let code = r.status().as_u16();
            (code, body_json(r).await)
        }
    };
    // Pods have a protobuf encoding, as on a real server: served, not refused.
    let r = c
        .get(list.clone())
        .header("accept", "application/vnd.kubernetes.protobuf")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(
        r.headers()["content-type"].to_str().unwrap(),
        "application/vnd.kubernetes.protobuf"
    );
    assert!(r.bytes().await.unwrap().starts_with(b"k8s\0"));
    for (url, accept) in [
        (
            list.clone(),
            "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
        ),
        (list.clone(), "text/html"),
        (format!("{list}?watch=1"), "application/yaml"),
        (
            list.clone(),
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        ),
        (
            one.clone(),
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        ),
        (
            format!("{list}?watch=1"),
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        ),
    ] {
        let (status, s) = code(url.clone(), accept).await;
        assert_eq!(
            (status, s["reason"].as_str()),
            (406, Some("NotAcceptable")),
            "{url} {accept}"
        );
    }
    // YAML for gets and lists.
    let r = c
        .get(&list)
        .header("accept", "application/yaml")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "application/yaml");
    let text = r.text().await.unwrap();
    assert!(
        text.starts_with("apiVersion: v1\nitems:") || text.contains("kind: PodList"),
        "{text}"
    );
    assert!(text.contains("name: a"), "{text}");
    // JSON as a listed alternative is served.
    let (status, l) = code(list.clone(), "text/html, application/json").await;
    assert_eq!((status, l["kind"].as_str()), (200, Some("PodList")));
    // The Table kubectl asks for.
    let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let (status, t) = code(list.clone(), kubectl).await;
    assert_eq!((status, t["kind"].as_str()), (200, Some("Table")));
    let names: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["priority"] == 0)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Name", "Ready", "Status", "Restarts", "Age"]);
    assert_eq!(t["rows"][0]["cells"][0], "a");
    assert_eq!(t["rows"][0]["cells"][2], "Running");
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    let (_, t) = code(one, kubectl).await;
    assert_eq!(t["rows"].as_array().unwrap().len(), 1);
    // Watch events become one-row tables.
    let r = c
        .get(format!("{list}?watch=1&resourceVersion=0"))
        .header("accept", kubectl)
        .send()
        .await
        .unwrap();
    let mut w = Lines {
        resp: r,
        buf: Vec::new(),
    };
    let e = w.event().await;
    assert_eq!(
        (e["type"].as_str(), e["object"]["kind"].as_str()),
        (Some("ADDED"), Some("Table"))
    );
    assert_eq!(e["object"]["rows"][0]["cells"][0], "a");
}

#[tokio::test]
async fn a_write_whose_answer_cannot_be_json_is_refused_before_it_happens() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    let pods_url = format!("{}/api/v1/namespaces/default/pods", sim.url());
    let body = json!({
        "metadata": {"name": "w"},
        "spec": {"containers": [{"name": "c", "image": "i:1"}]},
    })
    .to_string();
    // The sim answers writes in JSON alone: an Accept without JSON gets the 406 a server without
    // the other serializers answers, and nothing is written.
    for accept in [
        "application/vnd.kubernetes.protobuf",
        "application/yaml",
        "application/json;as=Table;g=meta.k8s.io;v=v1",
        "application/json;q=0",
    ] {
        let r = c
            .post(pods_url.clone())
            .header("content-type", "application/json")
            .header("accept", accept)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 406, "{accept}");
        assert_eq!(body_json(r).await["reason"], "NotAcceptable", "{accept}");
    }
    assert!(sim.store().get(&pods(), Some("default"), "w").is_none());
    // A 406 comes before the body is read: an undecodable body is not what is refused.
    let r = c
        .post(pods_url.clone())
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .header("accept", "application/vnd.kubernetes.protobuf")
        .body(vec![0x6b, 0x38, 0x73, 0x00])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 406);
    // JSON listed after protobuf, as client-go's typed clients ask: answered in JSON.
    let r = c
        .post(pods_url.clone())
        .header("content-type", "application/json")
        .header(
            "accept",
            "application/vnd.kubernetes.protobuf, application/json",
        )
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(
        r.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
    let r = c
        .delete(format!("{pods_url}/w"))
        .header("accept", "application/vnd.kubernetes.protobuf")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 406);
    assert!(sim.store().get(&pods(), Some("default"), "w").is_some());
}

#[tokio::test]
async fn admin_endpoints_turn_the_fault_knobs_over_http() {
    let off = start(SimConfig::default()).await;
    let c = client();
    let post = |base: String, action: &str| {
        let c = c.clone();
        let url = format!("{base}/kinformer-sim/admin/{action}");
        async move { c.post(url).send().await.unwrap() }
    };
    assert_eq!(
        post(off.url(), "compact").await.status(),
        404,
        "off by default"
    );

    let sim = start(SimConfig {
        admin: true,
        auth: Auth::BearerToken("t".into()),
        ..SimConfig::default()
    })
    .await;
    // Behind the same authentication as the API.
    assert_eq!(post(sim.url(), "compact").await.status(), 401);
    let authed = |action: &str| {
        let c = c.clone();
        let url = format!("{}/kinformer-sim/admin/{action}", sim.url());
        async move { c.post(url).bearer_auth("t").send().await.unwrap() }
    };
    let get = |path: &str| {
        let c = c.clone();
        let url = format!("{}{path}", sim.url());
        async move { c.get(url).bearer_auth("t").send().await.unwrap() }
    };
    sim.store()
        .create(&pods(), pod("a", "ns", json!({})))
        .unwrap();
    let at = sim.store().resource_version();
    sim.store()
        .create(&pods(), pod("b", "ns", json!({})))
        .unwrap();
    assert_eq!(authed("compact").await.status(), 200);
    let r = get(&format!(
        "/api/v1/pods?resourceVersion={at}&resourceVersionMatch=Exact"
    ))
    .await;
    assert_eq!(r.status(), 410);

    assert_eq!(
        authed("fail?kind=list&code=429&count=1&retryAfter=2")
            .await
            .status(),
        200
    );
    let r = get("/api/v1/pods").await;
    assert_eq!(
        (
            r.status().as_u16(),
            r.headers()["retry-after"].to_str().unwrap()
        ),
        (429, "2")
    );
    assert_eq!(get("/api/v1/pods").await.status(), 200);

    let mut w = Lines {
        resp: get("/api/v1/pods?watch=1&resourceVersion=0").await,
        buf: Vec::new(),
    };
    assert_eq!(ev(&w.object_event().await), pair("ADDED", "a"));
    assert_eq!(ev(&w.object_event().await), pair("ADDED", "b"));
    assert_eq!(authed("close-watches").await.status(), 200);
    assert!(matches!(w.read().await, Read::End));

    let before = sim.store().resource_version();
    assert_eq!(authed("churn?rate=200/s&seed=3").await.status(), 200);
    let mut grew = false;
    for _ in 0..200 {
        if sim.store().resource_version() > before + 5 {
            grew = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(grew, "churn wrote nothing");
    assert_eq!(authed("churn?rate=0").await.status(), 200);

    for action in [
        "stall?ms=10",
        "gone-next-watch",
        "gone-next-continue",
        "drop-connections",
        "clear",
    ] {
        assert_eq!(authed(action).await.status(), 200, "{action}");
    }
    assert_eq!(authed("fail?code=abc").await.status(), 400);
    assert_eq!(authed("nonsense").await.status(), 404);
    let r = c
        .get(format!("{}/kinformer-sim/admin/compact", sim.url()))
        .bearer_auth("t")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
}
