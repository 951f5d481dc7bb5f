//! The client against the simulated API server over real HTTP and HTTPS on 127.0.0.1: lists,
//! watches and their faults, TLS, and every way of authenticating.

mod support;

use kinformer_test_support::read_request_head;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer_client::{Api, AuthConfig, Client, Config, Error, Kubeconfig, KubeconfigOptions};
use kinformer_core::list_watch::{DEFAULT_PAGE_SIZE, Pager, list_all};
use kinformer_core::{
    ApiResource, DynamicObject, ListParams, Object, PartialObjectMetadata, Scope, WatchEvent,
    WatchParams,
};
use kinformer_sim::{Auth, RequestKind, SimConfig, SimServer};
use serde_json::json;
use support::{Events, RichErrors as _};

/// The bound on waiting for any one thing in these tests.
const BOUND: Duration = Duration::from_secs(10);

async fn sim(config: SimConfig) -> SimServer {
    SimServer::start(config).await.expect("sim starts")
}

/// The client configuration from the sim's own kubeconfig.
fn config_of(sim: &SimServer) -> Config {
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_yaml(), None).unwrap();
    Config::from_kubeconfig(&kc, &KubeconfigOptions::default()).unwrap()
}

fn client_of(sim: &SimServer) -> Client {
    Client::new(config_of(sim)).unwrap()
}

/// The next item of a watch, failing the test if none comes within the bound.
async fn next<K>(s: &mut Events<K>) -> Option<Result<WatchEvent<K>, Error>> {
    tokio::time::timeout(BOUND, s.next())
        .await
        .expect("watch produced nothing within the bound")
}

/// The next event that is not a bookmark.
async fn next_change<K>(s: &mut Events<K>) -> Option<Result<WatchEvent<K>, Error>> {
    for _ in 0..1000 {
        match next(s).await {
            Some(Ok(WatchEvent::Bookmark(_))) => continue,
            other => return other,
        }
    }
    panic!("only bookmarks");
}

fn configmap(ns: &str, name: &str, labels: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns, "labels": labels},
           "data": {"k": "v"}})
}

async fn typed_list_walks_all_pages(tls: bool) {
    let sim = sim(SimConfig {
        tls,
        ..SimConfig::default()
    })
    .await;
    sim.store().seed_pods(1234, 7);
    let pods: Api<Pod> = Api::all(client_of(&sim));
    let mut pager = Pager::new(&pods, &ListParams::default(), 100);
    let mut pages = 0;
    let mut keys = BTreeSet::new();
    let mut versions = BTreeSet::new();
    while let Some(page) = pager.next_page().await.unwrap() {
        assert!(!page.restarted);
        assert!(page.list.items.len() <= 100);
        pages += 1;
        versions.insert(page.list.resource_version.to_string());
        keys.extend(page.list.items.iter().map(|p| p.key().to_string()));
    }
    assert_eq!(pages, 13);
    assert_eq!(keys.len(), 1234, "every pod exactly once");
    assert_eq!(versions.len(), 1, "all pages come from one snapshot");
    let all = list_all(&pods, &ListParams::default(), DEFAULT_PAGE_SIZE)
        .await
        .unwrap();
    assert_eq!(all.items.len(), 1234);
    let one = &all.items[0];
    assert!(
        one.spec.as_ref().is_some_and(|s| !s.containers.is_empty()),
        "typed pods decoded"
    );
}

#[tokio::test]
async fn typed_list_walks_all_pages_over_http() {
    typed_list_walks_all_pages(false).await;
}

#[tokio::test]
async fn typed_list_walks_all_pages_over_https() {
    typed_list_walks_all_pages(true).await;
}

#[tokio::test]
async fn dynamic_list_with_selectors_and_metadata_only() {
    let sim = sim(SimConfig::default()).await;
    let widgets = ApiResource::new("example.com", "v1", "Widget", "widgets", Scope::Namespaced);
    sim.store().register_crd(widgets.clone());
    for (ns, name, tier) in [
        ("a", "w1", "web"),
        ("a", "w2", "db"),
        ("b", "w3", "web"),
        ("b", "w4", "cache"),
    ] {
        let obj = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                         "metadata": {"name": name, "namespace": ns, "labels": {"tier": tier}},
                         "spec": {"size": 3}});
        sim.store().create(&widgets, obj).unwrap();
    }
    let client = client_of(&sim);
    let names = |items: &[Arc<DynamicObject>]| {
        items
            .iter()
            .map(|o| o.name().to_owned())
            .collect::<Vec<_>>()
    };

    let all = Api::<DynamicObject>::all_with(client.clone(), &widgets);
    let page = all.list_rich(&ListParams::default()).await.unwrap();
    assert_eq!(names(&page.items), ["w1", "w2", "w3", "w4"]);
    assert_eq!(page.items[0].data["spec"]["size"], 3);
    assert_eq!(page.items[0].types.kind, "Widget");

    let selected = all
        .list_rich(&ListParams {
            label_selector: Some("tier in (web,cache)".into()),
            ..ListParams::default()
        })
        .await
        .unwrap();
    assert_eq!(names(&selected.items), ["w1", "w3", "w4"]);
    let by_field = all
        .list_rich(&ListParams {
            field_selector: Some("metadata.name!=w3".into()),
            ..ListParams::default()
        })
        .await
        .unwrap();
    assert_eq!(names(&by_field.items), ["w1", "w2", "w4"]);

    let in_b = Api::<DynamicObject>::namespaced_with(client.clone(), "b", &widgets);
    assert_eq!(
        names(&in_b.list_rich(&ListParams::default()).await.unwrap().items),
        ["w3", "w4"]
    );

    let meta = Api::<PartialObjectMetadata>::metadata(client.clone(), &widgets, Some("a"));
    let page = list_all(&meta, &ListParams::default(), 1).await.unwrap();
    let meta_names: Vec<_> = page.items.iter().map(|o| o.name().to_owned()).collect();
    assert_eq!(meta_names, ["w1", "w2"]);
    assert_eq!(page.items[0].labels()["tier"], "web");
    let mut events = meta
        .watch_rich(&WatchParams {
            resource_version: Some(page.resource_version.to_string()),
            ..WatchParams::default()
        })
        .await
        .unwrap();
    let obj = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w5", "namespace": "a"}});
    sim.store().create(&widgets, obj).unwrap();
    match next_change(&mut events).await {
        Some(Ok(WatchEvent::Added(o))) => assert_eq!(o.key().as_str(), "a/w5"),
        other => panic!("{other:?}"),
    }

    let missing = ApiResource::new("example.com", "v1", "Gadget", "gadgets", Scope::Namespaced);
    let err = Api::<DynamicObject>::all_with(client, &missing)
        .list_rich(&ListParams::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
}

#[tokio::test]
async fn expired_continue_token_falls_back_to_a_full_list() {
    let sim = sim(SimConfig::default()).await;
    sim.store().seed_pods(50, 3);
    let pods: Api<Pod> = Api::all(client_of(&sim));
    let mut pager = Pager::new(&pods, &ListParams::default(), 20);
    let first = pager.next_page().await.unwrap().unwrap();
    assert_eq!(first.list.items.len(), 20);
    let cm = ApiResource::of::<ConfigMap>();
    sim.store()
        .create(&cm, configmap("default", "bump", json!({})))
        .unwrap();
    sim.faults().compact_now();
    // The raw continue request is refused with 410...
    let raw = pods
        .list_rich(&ListParams {
            limit: Some(20),
            continue_token: first.list.continue_token.clone(),
            ..ListParams::default()
        })
        .await
        .unwrap_err();
    assert!(raw.is_gone(), "{raw}");
    // ...and the pager falls back to one unpaged list.
    let second = pager.next_page().await.unwrap().unwrap();
    assert!(second.restarted);
    assert_eq!(second.list.items.len(), 50);
    assert!(pager.next_page().await.unwrap().is_none());
}

#[tokio::test]
async fn watch_delivers_every_event_type_and_bookmarks() {
    let sim = sim(SimConfig {
        bookmark_interval: Duration::from_millis(50),
        ..SimConfig::default()
    })
    .await;
    let cm = ApiResource::of::<ConfigMap>();
    let api: Api<ConfigMap> = Api::namespaced(client_of(&sim), "default");
    let start = api
        .list_rich(&ListParams::default())
        .await
        .unwrap()
        .resource_version;
    let mut events = api
        .watch_rich(&WatchParams {
            resource_version: Some(start.to_string()),
            allow_watch_bookmarks: true,
            ..WatchParams::default()
        })
        .await
        .unwrap();
    let store = sim.store();
    store
        .create(&cm, configmap("default", "c1", json!({"a": "1"})))
        .unwrap();
    store
        .patch(&cm, Some("default"), "c1", json!({"data": {"k": "v2"}}))
        .unwrap();
    store.delete(&cm, Some("default"), "c1").unwrap();

    let mut seen = Vec::new();
    for _ in 0..3 {
        match next_change(&mut events).await {
            Some(Ok(WatchEvent::Added(o))) => seen.push(("ADDED", o)),
            Some(Ok(WatchEvent::Modified(o))) => seen.push(("MODIFIED", o)),
            Some(Ok(WatchEvent::Deleted(o))) => seen.push(("DELETED", o)),
            other => panic!("{other:?}"),
        }
    }
    let kinds: Vec<_> = seen.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
    assert_eq!(seen[1].1.data.as_ref().unwrap()["k"], "v2");
    assert!(seen.iter().all(|(_, o)| o.key().as_str() == "default/c1"));
    let mut bookmarks = 0;
    for _ in 0..100 {
        match next(&mut events).await {
            Some(Ok(WatchEvent::Bookmark(b))) => {
                assert!(!b.resource_version.as_str().is_empty());
                bookmarks += 1;
                if bookmarks == 2 {
                    break;
                }
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(bookmarks, 2);
}

#[tokio::test]
async fn watch_gone_arrives_as_an_error_event() {
    let sim = sim(SimConfig::default()).await;
    let pods: Api<Pod> = Api::all(client_of(&sim));
    sim.faults().gone_next_watch();
    let mut events = pods.watch_rich(&WatchParams::default()).await.unwrap();
    match next(&mut events).await {
        Some(Ok(WatchEvent::Error(status))) => assert!(status.is_gone(), "{status:?}"),
        other => panic!("{other:?}"),
    }
    assert!(
        next(&mut events).await.is_none(),
        "the stream ends after the ERROR event"
    );

    // Watching from a compacted version is refused the same way, as an event or a 410 answer.
    sim.store().seed_pods(5, 1);
    sim.faults().compact_now();
    match pods
        .watch_rich(&WatchParams {
            resource_version: Some("1".into()),
            ..WatchParams::default()
        })
        .await
    {
        Err(e) => assert!(e.is_gone(), "{e}"),
        Ok(mut s) => match next(&mut s).await {
            Some(Ok(WatchEvent::Error(status))) => assert!(status.is_gone()),
            other => panic!("{other:?}"),
        },
    }
}

#[tokio::test]
async fn watch_ends_cleanly_at_timeout_seconds_and_after_a_closed_stream() {
    let sim = sim(SimConfig::default()).await;
    let api: Api<ConfigMap> = Api::all(client_of(&sim));
    let mut events = api
        .watch_rich(&WatchParams {
            timeout_seconds: Some(1),
            ..WatchParams::default()
        })
        .await
        .unwrap();
    let started = std::time::Instant::now();
    assert!(
        next(&mut events).await.is_none(),
        "server timeout ends the stream without error"
    );
    assert!(started.elapsed() >= Duration::from_millis(900));

    sim.faults().close_watches_after_events(2);
    let mut events = api.watch_rich(&WatchParams::default()).await.unwrap();
    let cm = ApiResource::of::<ConfigMap>();
    for i in 0..3 {
        sim.store()
            .create(&cm, configmap("default", &format!("c{i}"), json!({})))
            .unwrap();
    }
    assert!(matches!(
        next(&mut events).await,
        Some(Ok(WatchEvent::Added(_)))
    ));
    assert!(matches!(
        next(&mut events).await,
        Some(Ok(WatchEvent::Added(_)))
    ));
    assert!(next(&mut events).await.is_none());
}

#[tokio::test]
async fn stalled_watch_hits_the_idle_timeout() {
    let sim = sim(SimConfig {
        bookmark_interval: Duration::from_millis(50),
        ..SimConfig::default()
    })
    .await;
    let mut config = config_of(&sim);
    config.watch_idle_timeout = Duration::from_secs(1);
    let api: Api<ConfigMap> = Api::all(Client::new(config).unwrap());
    let mut events = api
        .watch_rich(&WatchParams {
            allow_watch_bookmarks: true,
            ..WatchParams::default()
        })
        .await
        .unwrap();
    // Bookmarks keep a healthy watch alive past the idle limit...
    for _ in 0..12 {
        assert!(matches!(
            next(&mut events).await,
            Some(Ok(WatchEvent::Bookmark(_)))
        ));
    }
    // ...a stalled one is ended.
    sim.faults().stall_watches(Duration::from_secs(5));
    let mut result = None;
    for _ in 0..100 {
        match next(&mut events).await {
            Some(Ok(WatchEvent::Bookmark(_))) => continue,
            other => {
                result = other;
                break;
            }
        }
    }
    match result {
        Some(Err(e @ Error::IdleTimeout { .. })) => assert!(e.is_resumable()),
        other => panic!("{other:?}"),
    }
    assert!(next(&mut events).await.is_none());
}

/// Opens a watch on configmaps, arms a fault, creates one configmap, and returns what came.
async fn watch_with_fault(
    sim: &SimServer,
    client: Client,
    arm: impl FnOnce(&kinformer_sim::Faults),
) -> Vec<Result<(), Error>> {
    let api: Api<ConfigMap> = Api::all(client);
    let from = sim.store().resource_version().to_string();
    let mut events = api
        .watch_rich(&WatchParams {
            resource_version: Some(from),
            ..WatchParams::default()
        })
        .await
        .unwrap();
    arm(&sim.faults());
    let cm = ApiResource::of::<ConfigMap>();
    let n = sim.store().resource_version();
    sim.store()
        .create(&cm, configmap("default", &format!("x{n}"), json!({})))
        .unwrap();
    sim.store()
        .create(&cm, configmap("default", &format!("y{n}"), json!({})))
        .unwrap();
    let mut out = Vec::new();
    while let Some(item) = next(&mut events).await {
        out.push(item.map(drop));
        if out.len() > 10 {
            break;
        }
    }
    out
}

#[tokio::test]
async fn malformed_line_ends_the_watch_with_a_decode_error() {
    let sim = sim(SimConfig::default()).await;
    let out = watch_with_fault(&sim, client_of(&sim), |f| f.malformed_next_watch_line()).await;
    assert_eq!(out.len(), 1, "{out:?}");
    match &out[0] {
        Err(
            e @ Error::Decode {
                line: Some(1),
                offset: Some(0),
                ..
            },
        ) => {
            assert!(!e.is_resumable());
            assert!(e.to_string().contains("line 1"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn oversized_line_ends_the_watch_with_a_typed_error() {
    let sim = sim(SimConfig::default()).await;
    let mut config = config_of(&sim);
    config.max_watch_line = 64 * 1024;
    let out = watch_with_fault(&sim, Client::new(config).unwrap(), |f| {
        f.oversized_next_watch_line(1 << 20)
    })
    .await;
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(
        matches!(
            out[0],
            Err(Error::LineTooLong {
                line: 1,
                limit: 65536
            })
        ),
        "{out:?}"
    );
    // Under the limit the same padded line is just an event.
    let out = watch_with_fault(&sim, client_of(&sim), |f| {
        f.close_watches_after_events(2);
        f.oversized_next_watch_line(200_000);
    })
    .await;
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(out.iter().all(Result::is_ok));
}

#[tokio::test]
async fn connection_cut_mid_line_is_resumable() {
    for tls in [false, true] {
        let sim = sim(SimConfig {
            tls,
            ..SimConfig::default()
        })
        .await;
        let out = watch_with_fault(&sim, client_of(&sim), |f| f.cut_next_watch_mid_line()).await;
        assert_eq!(out.len(), 1, "{out:?}");
        match &out[0] {
            Err(e @ Error::Interrupted { events: 0, .. }) => {
                assert!(e.is_resumable() && e.is_retryable())
            }
            other => panic!("tls={tls}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn error_answers_say_what_to_do() {
    let sim = sim(SimConfig::default()).await;
    let pods: Api<Pod> = Api::all(client_of(&sim));
    sim.faults().fail_next(RequestKind::List, 429, 1, Some(2));
    let e = pods.list_rich(&ListParams::default()).await.unwrap_err();
    assert!(matches!(e, Error::Throttled { .. }), "{e}");
    assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
    sim.faults().fail_next(RequestKind::Watch, 503, 1, None);
    let e = pods
        .watch_rich(&WatchParams::default())
        .await
        .err()
        .unwrap();
    assert!(
        matches!(e, Error::ServerError { code: 503, .. }) && e.is_retryable(),
        "{e}"
    );
    assert!(pods.list_rich(&ListParams::default()).await.is_ok());

    let past = sim.store().resource_version() + 1000;
    let e = pods
        .list_rich(&ListParams {
            resource_version: Some(past.to_string()),
            ..ListParams::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(e, Error::TooLargeResourceVersion { .. }), "{e}");

    let port = sim.addr().port();
    sim.shutdown().await;
    let closed = Client::new(Config::new(format!("http://127.0.0.1:{port}"))).unwrap();
    let e = Api::<Pod>::all(closed)
        .list_rich(&ListParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Connect { .. }) && e.is_retryable(),
        "{e}"
    );
}

#[tokio::test]
async fn bearer_token_and_basic_auth() {
    let sim = sim(SimConfig {
        tls: true,
        auth: Auth::BearerToken("good-token".into()),
        ..SimConfig::default()
    })
    .await;
    let config = config_of(&sim);
    assert!(!format!("{config:?}").contains("good-token"));
    let client = Client::new(config.clone()).unwrap();
    assert!(!format!("{client:?}").contains("good-token"));
    Api::<Pod>::all(client)
        .list_rich(&ListParams::default())
        .await
        .unwrap();

    let mut wrong = config.clone();
    wrong.auth = AuthConfig::Token("bad-token".into());
    let e = Api::<Pod>::all(Client::new(wrong).unwrap())
        .list_rich(&ListParams::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Unauthorized { .. }), "{e}");
    assert!(!e.to_string().contains("bad-token") && !format!("{e:?}").contains("bad-token"));

    sim.set_auth(Auth::Basic {
        username: "ann".into(),
        password: "pw-123".into(),
    });
    let basic = config_of(&sim);
    assert!(!format!("{basic:?}").contains("pw-123"));
    Api::<Pod>::all(Client::new(basic).unwrap())
        .list_rich(&ListParams::default())
        .await
        .unwrap();
    let mut wrong = config;
    wrong.auth = AuthConfig::Basic {
        username: "ann".into(),
        password: "nope".into(),
    };
    let e = Api::<Pod>::all(Client::new(wrong).unwrap())
        .list_rich(&ListParams::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Unauthorized { .. }), "{e}");
}

#[tokio::test]
async fn token_file_rotation_is_followed() {
    let sim = sim(SimConfig {
        auth: Auth::BearerToken("token-1".into()),
        ..SimConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "token-1\n").unwrap();
    let mut config = config_of(&sim);
    config.auth = AuthConfig::TokenFile(token.clone());
    let pods: Api<Pod> = Api::all(Client::new(config).unwrap());
    pods.list_rich(&ListParams::default()).await.unwrap();
    for i in 2..5 {
        let t = format!("token-{i}");
        sim.set_auth(Auth::BearerToken(t.clone()));
        std::fs::write(&token, format!("{t}\n")).unwrap();
        pods.list_rich(&ListParams::default()).await.unwrap();
    }
    // A token the server no longer accepts, and no new one: 401 after one refresh.
    sim.set_auth(Auth::BearerToken("token-99".into()));
    let e = pods.list_rich(&ListParams::default()).await.unwrap_err();
    assert!(matches!(e, Error::Unauthorized { .. }), "{e}");
}

#[tokio::test]
async fn client_certificate_auth() {
    let sim = sim(SimConfig {
        tls: true,
        auth: Auth::ClientCert,
        ..SimConfig::default()
    })
    .await;
    // The sim's kubeconfig carries a freshly issued client certificate as -data fields.
    let config = config_of(&sim);
    let id = config
        .client_identity
        .clone()
        .expect("kubeconfig has a client certificate");
    assert!(!format!("{config:?}").contains(id.key_pem.expose().lines().nth(1).unwrap()));
    Api::<Pod>::all(Client::new(config.clone()).unwrap())
        .list_rich(&ListParams::default())
        .await
        .unwrap();

    let mut without = config.clone();
    without.client_identity = None;
    let e = Api::<Pod>::all(Client::new(without).unwrap())
        .list_rich(&ListParams::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Unauthorized { .. }), "{e}");

    // A certificate from another CA is not accepted.
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["intruder".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let mut other = config;
    other.client_identity = Some(kinformer_client::ClientIdentity {
        cert_pem: cert.pem().into_bytes(),
        key_pem: key.serialize_pem().into(),
    });
    let e = Api::<Pod>::all(Client::new(other).unwrap())
        .list_rich(&ListParams::default())
        .await
        .unwrap_err();
    assert!(!matches!(e, Error::Gone { .. }), "{e}");
}

#[tokio::test]
async fn server_verification_wrong_ca_insecure_skip_and_server_name() {
    let sim = sim(SimConfig {
        tls: true,
        ..SimConfig::default()
    })
    .await;
    let good = config_of(&sim);
    let list = |config: Config| async move {
        Api::<Pod>::all(Client::new(config).unwrap())
            .list_rich(&ListParams::default())
            .await
    };
    list(good.clone()).await.unwrap();

    let key = rcgen::KeyPair::generate().unwrap();
    let other_ca = rcgen::CertificateParams::new(vec!["other".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let mut wrong_ca = good.clone();
    wrong_ca.root_certs_pem = Some(other_ca.pem().into_bytes());
    let e = list(wrong_ca.clone()).await.unwrap_err();
    assert!(matches!(e, Error::Tls { .. }) && !e.is_retryable(), "{e}");

    let mut insecure = wrong_ca;
    insecure.insecure_skip_tls_verify = true;
    list(insecure).await.unwrap();

    // The server certificate names 127.0.0.1 and localhost.
    let mut named = good.clone();
    named.tls_server_name = Some("localhost".into());
    list(named.clone()).await.unwrap();
    named.tls_server_name = Some("kubernetes.example".into());
    let e = list(named).await.unwrap_err();
    assert!(matches!(e, Error::Tls { .. }), "{e}");
}

/// Writes an exec plugin script that counts its runs, records `KUBERNETES_EXEC_INFO`, and prints a
/// token `tok-<run>` expiring at `$EXP` (from the plugin's env).
fn exec_plugin(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let script = dir.join("cred.sh");
    std::fs::write(
        &script,
        r#"#!/bin/sh
n=$(cat "$STATE/count" 2>/dev/null || echo 0)
n=$((n+1))
echo "$n" > "$STATE/count"
printf '%s' "$KUBERNETES_EXEC_INFO" > "$STATE/info"
printf '%s|' "$@" > "$STATE/args"
printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"tok-%s","expirationTimestamp":"%s"}}\n' "$API" "$n" "$EXP"
"#,
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

fn exec_kubeconfig(sim: &SimServer, dir: &Path, api_version: &str, exp: &str) -> Config {
    let yaml = format!(
        r#"apiVersion: v1
kind: Config
current-context: sim
clusters: [{{name: sim, cluster: {{server: "{url}"}}}}]
contexts: [{{name: sim, context: {{cluster: sim, user: plugin}}}}]
users:
- name: plugin
  user:
    exec:
      apiVersion: {api_version}
      command: ./cred.sh
      args: ["get-token", "--cluster", "sim one"]
      provideClusterInfo: true
      interactiveMode: Never
      env:
      - {{name: STATE, value: "{state}"}}
      - {{name: API, value: "{api_version}"}}
      - {{name: EXP, value: "{exp}"}}
"#,
        url = sim.url(),
        state = dir.display(),
    );
    let path = dir.join("config");
    std::fs::write(&path, yaml).unwrap();
    Config::from_path(&path, &KubeconfigOptions::default()).unwrap()
}

fn runs(dir: &Path) -> u32 {
    std::fs::read_to_string(dir.join("count")).map_or(0, |s| s.trim().parse().unwrap())
}

#[tokio::test]
async fn exec_plugin_credentials_are_cached_expire_and_rerun_on_401() {
    for api in [
        "client.authentication.k8s.io/v1",
        "client.authentication.k8s.io/v1beta1",
    ] {
        // Cached until expiry: two requests, one run.
        let sim = sim(SimConfig {
            auth: Auth::BearerToken("tok-1".into()),
            ..SimConfig::default()
        })
        .await;
        let dir = tempfile::tempdir().unwrap();
        exec_plugin(dir.path());
        let pods = Api::<Pod>::all(
            Client::new(exec_kubeconfig(
                &sim,
                dir.path(),
                api,
                "2999-01-01T00:00:00Z",
            ))
            .unwrap(),
        );
        pods.list_rich(&ListParams::default()).await.unwrap();
        pods.list_rich(&ListParams::default()).await.unwrap();
        assert_eq!(runs(dir.path()), 1, "{api}");
        let info: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("info")).unwrap())
                .unwrap();
        assert_eq!(info["kind"], "ExecCredential");
        assert_eq!(info["apiVersion"], api);
        assert_eq!(info["spec"]["cluster"]["server"], sim.url());
        assert_eq!(info["spec"]["interactive"], false);
        let args = std::fs::read_to_string(dir.path().join("args")).unwrap();
        assert_eq!(args, "get-token|--cluster|sim one|");

        // Rotated on the server: the 401 re-runs the plugin once and the request succeeds.
        sim.set_auth(Auth::BearerToken("tok-2".into()));
        pods.list_rich(&ListParams::default()).await.unwrap();
        assert_eq!(runs(dir.path()), 2);
        pods.list_rich(&ListParams::default()).await.unwrap();
        assert_eq!(runs(dir.path()), 2, "the new credential is cached");

        // An expired credential is fetched again before every request.
        let dir = tempfile::tempdir().unwrap();
        exec_plugin(dir.path());
        sim.set_auth(Auth::Any(
            (1..=3)
                .map(|i| Auth::BearerToken(format!("tok-{i}")))
                .collect(),
        ));
        let pods = Api::<Pod>::all(
            Client::new(exec_kubeconfig(
                &sim,
                dir.path(),
                api,
                "2001-01-01T00:00:00Z",
            ))
            .unwrap(),
        );
        pods.list_rich(&ListParams::default()).await.unwrap();
        pods.list_rich(&ListParams::default()).await.unwrap();
        assert_eq!(runs(dir.path()), 2);
    }
}

#[tokio::test]
async fn exec_plugin_failures_are_reported() {
    use std::os::unix::fs::PermissionsExt as _;
    let sim = sim(SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("cred.sh");
    std::fs::write(&script, "#!/bin/sh\necho 'login expired' >&2\nexit 3\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = exec_kubeconfig(&sim, dir.path(), "client.authentication.k8s.io/v1", "");
    let e = Api::<Pod>::all(Client::new(config).unwrap())
        .list_rich(&ListParams::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Auth { .. }), "{e}");
    assert!(e.to_string().contains("login expired"), "{e}");

    // A command that cannot be run: the error carries the install hint.
    let mut config = exec_kubeconfig(&sim, dir.path(), "client.authentication.k8s.io/v1", "");
    if let AuthConfig::Exec { exec, .. } = &mut config.auth {
        exec.command = dir.path().join("not-installed").display().to_string();
        exec.install_hint = Some("install it from the vendor".into());
    }
    let e = Api::<Pod>::all(Client::new(config).unwrap())
        .list_rich(&ListParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Auth { .. }) && e.to_string().contains("install it from the vendor"),
        "{e}"
    );
}

/// Collects formatted log output.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn requests_are_traced_and_watches_use_http2_over_tls() {
    let sim = sim(SimConfig {
        tls: true,
        auth: Auth::BearerToken("span-secret".into()),
        ..SimConfig::default()
    })
    .await;
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("kinformer_client=debug"))
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let api: Api<ConfigMap> = Api::namespaced(client_of(&sim), "default");
    api.list_rich(&ListParams::default()).await.unwrap();
    let mut watches = Vec::new();
    for _ in 0..3 {
        watches.push(api.watch_rich(&WatchParams::default()).await.unwrap());
    }
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = log.lines().filter(|l| l.ends_with(": response")).collect();
    assert_eq!(lines.len(), 4, "{log}");
    assert_eq!(
        lines.iter().filter(|l| l.contains("watch=true")).count(),
        3,
        "{log}"
    );
    for line in &lines {
        assert!(line.contains("method=\"GET\""), "{line}");
        assert!(
            line.contains("path=/api/v1/namespaces/default/configmaps"),
            "{line}"
        );
        assert!(line.contains("status=200"), "{line}");
        assert!(line.contains("version=HTTP/2.0"), "{line}");
        assert!(line.contains("duration_ms="), "{line}");
    }
    assert!(!log.contains("span-secret"), "{log}");
}

#[tokio::test]
async fn exec_plugin_can_hand_out_a_client_certificate() {
    use std::os::unix::fs::PermissionsExt as _;
    let sim = sim(SimConfig {
        tls: true,
        auth: Auth::ClientCert,
        ..SimConfig::default()
    })
    .await;
    let (cert, key) = sim.issue_client_cert("exec-user");
    let dir = tempfile::tempdir().unwrap();
    let credential = json!({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                            "status": {"clientCertificateData": cert, "clientKeyData": key}});
    std::fs::write(dir.path().join("credential.json"), credential.to_string()).unwrap();
    let script = dir.path().join("cred.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\ncat \"$(dirname \"$0\")/credential.json\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut config = config_of(&sim);
    config.client_identity = None;
    config.auth = AuthConfig::Exec {
        exec: Box::new(kinformer_client::ExecConfig {
            command: script.display().to_string(),
            api_version: "client.authentication.k8s.io/v1".into(),
            ..Default::default()
        }),
        cluster: None,
    };
    Api::<Pod>::all(Client::new(config).unwrap())
        .list_rich(&ListParams::default())
        .await
        .unwrap();
}

/// A bare HTTP/1.1 server on 127.0.0.1 for what the sim does not do (gzip, acting as a proxy):
/// records each request's head and answers it with `respond(head)`, then closes.
async fn raw_server(
    respond: fn(&str) -> Vec<u8>,
) -> (std::net::SocketAddr, Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::AsyncWriteExt as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let heads = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let heads = Arc::clone(&heads);
            tokio::spawn(async move {
                let Some(head) = read_request_head(&mut conn).await else {
                    return;
                };
                let head = head.text.to_ascii_lowercase();
                let response = respond(&head);
                heads.lock().unwrap().push(head);
                let _ = conn.write_all(&response).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    (addr, seen)
}

const RAW_LIST: &str = r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"zipped","namespace":"default"}}]}"#;
const RAW_EVENT: &str = r#"{"type":"ADDED","object":{"metadata":{"name":"plain","namespace":"default","resourceVersion":"6"}}}"#;

/// Lists answer gzip-compressed when the request accepts it; watches answer plain, chunked.
fn respond_gzip_or_plain(head: &str) -> Vec<u8> {
    use std::io::Write as _;
    if head.contains("watch=true") {
        let line = format!("{RAW_EVENT}\n");
        return format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n{:x}\r\n{line}\r\n0\r\n\r\n",
            line.len()
        )
        .into_bytes();
    }
    let gzip = head
        .lines()
        .any(|l| l.starts_with("accept-encoding:") && l.contains("gzip"));
    let body = if gzip {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(RAW_LIST.as_bytes()).unwrap();
        enc.finish().unwrap()
    } else {
        RAW_LIST.as_bytes().to_vec()
    };
    let mut out = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{}content-length: {}\r\nconnection: close\r\n\r\n",
        if gzip { "content-encoding: gzip\r\n" } else { "" },
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

#[tokio::test]
async fn lists_accept_gzip_and_watches_ask_for_identity() {
    let (addr, seen) = raw_server(respond_gzip_or_plain).await;
    let api: Api<ConfigMap> = Api::all(Client::new(Config::new(format!("http://{addr}"))).unwrap());
    let list = api.list_rich(&ListParams::default()).await.unwrap();
    assert_eq!(list.items[0].name(), "zipped");
    let mut events = api.watch_rich(&WatchParams::default()).await.unwrap();
    assert!(
        matches!(next(&mut events).await, Some(Ok(WatchEvent::Added(o))) if o.name() == "plain")
    );
    assert!(next(&mut events).await.is_none());
    let heads = seen.lock().unwrap().clone();
    assert_eq!(heads.len(), 2);
    assert!(heads[0].contains("accept-encoding: gzip"), "{}", heads[0]);
    assert!(
        heads[1].contains("watch=true") && heads[1].contains("accept-encoding: identity"),
        "{}",
        heads[1]
    );
}

#[tokio::test]
async fn proxy_url_routes_requests_through_the_proxy() {
    let (addr, seen) = raw_server(respond_gzip_or_plain).await;
    let mut config = Config::new("http://cluster.invalid:6443");
    config.proxy_url = Some(format!("http://{addr}"));
    let api: Api<ConfigMap> = Api::all(Client::new(config).unwrap());
    assert_eq!(
        api.list_rich(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    let heads = seen.lock().unwrap().clone();
    assert!(
        heads[0].starts_with("get http://cluster.invalid:6443/api/v1/configmaps"),
        "{}",
        heads[0]
    );
}

/// The proxy environment with Go's rules, against a fake proxy on 127.0.0.1 that records every
/// request it gets (and answers it, as the API server would). The environment is a lookup
/// function, so that no test changes the process's.
#[tokio::test]
async fn the_proxy_environment_follows_go_rules_and_never_proxies_loopback() {
    use kinformer_client::ProxyEnv;
    let (proxy, through_proxy) = raw_server(respond_gzip_or_plain).await;
    let (server, direct) = raw_server(respond_gzip_or_plain).await;
    let proxy_url = format!("http://{proxy}");
    let env_of = |vars: Vec<(&'static str, String)>| {
        ProxyEnv::from_lookup(move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.clone())
        })
    };
    let list = |url: String, env: ProxyEnv| {
        let mut config = Config::new(url);
        config.proxy_env = Some(env);
        config.connect_timeout = Duration::from_secs(2);
        let api: Api<ConfigMap> = Api::all(Client::new(config).unwrap());
        async move {
            tokio::time::timeout(BOUND, api.list_rich(&ListParams::default()))
                .await
                .expect("answered within the bound")
        }
    };
    let counts = || {
        (
            through_proxy.lock().unwrap().len(),
            direct.lock().unwrap().len(),
        )
    };

    // Loopback goes direct with HTTP_PROXY set, by address and by name.
    let env = env_of(vec![("HTTP_PROXY", proxy_url.clone())]);
    list(format!("http://{server}"), env.clone()).await.unwrap();
    list(format!("http://localhost:{}", server.port()), env.clone())
        .await
        .unwrap();
    assert_eq!(counts(), (0, 2), "loopback went through the proxy");

    // A host that is not loopback goes through it (the proxy answers for it: no name lookup).
    list("http://cluster.invalid:6443".into(), env.clone())
        .await
        .unwrap();
    assert_eq!(counts(), (1, 2));
    let head = through_proxy.lock().unwrap()[0].clone();
    assert!(
        head.starts_with("get http://cluster.invalid:6443/api/v1/configmaps"),
        "{head}"
    );
    // A value without a scheme means http://, and http_proxy is read too.
    let bare = env_of(vec![("http_proxy", proxy.to_string())]);
    list("http://cluster.invalid:6443".into(), bare)
        .await
        .unwrap();
    assert_eq!(counts(), (2, 2));

    // NO_PROXY excludes it: the request goes direct (and finds no such host).
    for no_proxy in ["cluster.invalid", ".invalid", "*", "cluster.invalid:6443"] {
        let env = env_of(vec![
            ("HTTP_PROXY", proxy_url.clone()),
            ("NO_PROXY", no_proxy.into()),
        ]);
        let e = list("http://cluster.invalid:6443".into(), env)
            .await
            .unwrap_err();
        assert!(
            matches!(e, Error::Connect { .. } | Error::Timeout { .. }),
            "{e}"
        );
        assert_eq!(counts(), (2, 2), "NO_PROXY={no_proxy}");
    }
    // HTTPS_PROXY is for https URLs only; CGI ignores HTTP_PROXY.
    for vars in [
        vec![("HTTPS_PROXY", proxy_url.clone())],
        vec![
            ("HTTP_PROXY", proxy_url.clone()),
            ("REQUEST_METHOD", "GET".into()),
        ],
    ] {
        assert!(
            list("http://cluster.invalid:6443".into(), env_of(vars))
                .await
                .is_err()
        );
        assert_eq!(counts(), (2, 2));
    }

    // A kubeconfig's proxy-url wins over the environment, loopback included, as in client-go.
    let mut config = Config::new(format!("http://{server}"));
    config.proxy_url = Some(proxy_url.clone());
    config.proxy_env = Some(env_of(vec![("NO_PROXY", "*".into())]));
    let api: Api<ConfigMap> = Api::all(Client::new(config).unwrap());
    api.list_rich(&ListParams::default()).await.unwrap();
    assert_eq!(counts(), (3, 2));

    // A SOCKS proxy the server would go through is refused up front, naming the variable;
    // one the server would not go through does not matter.
    let socks = env_of(vec![("HTTPS_PROXY", "socks5://127.0.0.1:1080".into())]);
    let mut config = Config::new("https://cluster.invalid:6443");
    config.proxy_env = Some(socks.clone());
    let e = Client::new(config).unwrap_err();
    assert!(
        matches!(&e, Error::Config { field, .. } if field == "HTTPS_PROXY"),
        "{e}"
    );
    let mut config = Config::new(format!("https://{server}"));
    config.proxy_env = Some(socks);
    Client::new(config).unwrap();
}
