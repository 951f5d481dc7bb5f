//! Lists and watches in protobuf against the simulated API server, over real HTTP on
//! 127.0.0.1: the same objects as JSON gives, the negotiation a real server does (protobuf for
//! built-in kinds, JSON or 406 for custom resources), bookmarks, streaming lists and errors.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer_client::{
    Client, Config, Error, Kubeconfig, KubeconfigOptions, ManagedFieldsDecode, ObjectEncoding,
};
use kinformer_core::{
    ApiResource, DynamicObject, ListParams, ObjectList, ResourceVersionMatch, Scope, WatchEvent,
    WatchParams,
};
use kinformer_sim::{RequestKind, SimConfig, SimServer};

/// The bound on waiting for any one thing in these tests.
const BOUND: Duration = Duration::from_secs(10);

fn pods() -> ApiResource {
    ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced)
}

fn client_of(sim: &SimServer, encoding: ObjectEncoding) -> Client {
    Client::new(config_of(sim, encoding)).unwrap()
}

/// The configuration of a client of `sim` that asks for `encoding`.
fn config_of(sim: &SimServer, encoding: ObjectEncoding) -> Config {
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_yaml(), None).unwrap();
    let mut config = Config::from_kubeconfig(&kc, &KubeconfigOptions::default()).unwrap();
    config.object_encoding = encoding;
    config
}

/// The `Accept` of the last list (or watch) the server logged.
fn last_content_type_asked(sim: &SimServer, verb: &str) -> Option<String> {
    sim.requests()
        .iter()
        .rev()
        .find(|r| r.method == "GET" && r.is_watch() == (verb == "watch"))
        .and_then(|r| r.accept.clone())
}

/// A bare HTTP client, to send the `Accept` headers the client never sends.
fn raw_http() -> reqwest::Client {
    // reqwest is built without a default TLS provider; these requests are plain HTTP.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

async fn list_all<K>(client: &Client, resource: &ApiResource, limit: Option<u32>) -> ObjectList<K>
where
    K: kinformer_core::Object + serde::de::DeserializeOwned,
{
    let mut params = ListParams {
        limit,
        ..ListParams::default()
    };
    let mut all = client.list::<K>(resource, None, &params).await.unwrap();
    while let Some(token) = all.continue_token.take() {
        params.continue_token = Some(token);
        let page = client.list::<K>(resource, None, &params).await.unwrap();
        all.items.extend(page.items);
        all.continue_token = page.continue_token;
    }
    all
}

#[tokio::test]
async fn a_protobuf_list_gives_the_objects_a_json_list_gives() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(300, 7);
    let json = client_of(&sim, ObjectEncoding::Json);
    let pb = client_of(&sim, ObjectEncoding::Protobuf);
    // Paged, so that continue tokens and remaining counts cross the protobuf list metadata.
    let from_json: ObjectList<Pod> = list_all(&json, &pods(), Some(70)).await;
    let from_pb: ObjectList<Pod> = list_all(&pb, &pods(), Some(70)).await;
    assert_eq!(from_pb.items.len(), 300);
    assert_eq!(from_pb.resource_version, from_json.resource_version);
    for (a, b) in from_json.items.iter().zip(&from_pb.items) {
        assert_eq!(**a, **b);
    }
    let page = pb
        .list::<Pod>(
            &pods(),
            None,
            &ListParams {
                limit: Some(100),
                ..ListParams::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(page.remaining_item_count, Some(200));
    assert!(page.continue_token.is_some());
    assert_eq!(
        last_content_type_asked(&sim, "list").as_deref(),
        Some("application/vnd.kubernetes.protobuf")
    );
}

#[tokio::test]
async fn a_whole_protobuf_list_decoded_as_it_arrives_gives_the_objects_a_json_list_gives() {
    // At version 0 the server answers from its watch cache, whole and gzipped whatever the
    // limit: more items than the client decodes at once (16 runs of 64), in chunks that cut
    // items anywhere.
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(1500, 11);
    let params = ListParams {
        limit: Some(500),
        resource_version: Some("0".into()),
        ..ListParams::default()
    };
    let json = client_of(&sim, ObjectEncoding::Json);
    let pb = client_of(&sim, ObjectEncoding::Protobuf);
    let from_json: ObjectList<Pod> = json.list(&pods(), None, &params).await.unwrap();
    let from_pb: ObjectList<Pod> = pb.list(&pods(), None, &params).await.unwrap();
    assert_eq!(from_pb.items.len(), 1500);
    assert!(from_pb.continue_token.is_none());
    assert_eq!(from_pb.resource_version, from_json.resource_version);
    for (a, b) in from_json.items.iter().zip(&from_pb.items) {
        assert_eq!(**a, **b);
    }
    let answered = sim.requests();
    let list = answered
        .iter()
        .rev()
        .find(|r| r.method == "GET" && !r.is_watch())
        .unwrap();
    assert_eq!(
        list.accept.as_deref(),
        Some("application/vnd.kubernetes.protobuf")
    );
    assert!(
        list.accept_encoding
            .as_deref()
            .is_some_and(|e| e.contains("gzip"))
    );
}

#[tokio::test]
async fn a_protobuf_watch_gives_the_events_a_json_watch_gives_with_bookmarks_and_errors() {
    let sim = SimServer::start(SimConfig {
        bookmark_interval: Duration::from_millis(50),
        ..SimConfig::default()
    })
    .await
    .unwrap();
    sim.store().seed_pods(20, 3);
    let json = client_of(&sim, ObjectEncoding::Json);
    let pb = client_of(&sim, ObjectEncoding::ProtobufWherePossible);
    let start = json
        .list::<Pod>(&pods(), None, &ListParams::default())
        .await
        .unwrap()
        .resource_version;
    let params = WatchParams {
        resource_version: Some(start.as_str().to_owned()),
        allow_watch_bookmarks: true,
        timeout_seconds: Some(5),
        ..WatchParams::default()
    };
    let mut from_json = json.watch::<Pod>(&pods(), None, &params).await.unwrap();
    let mut from_pb = pb.watch::<Pod>(&pods(), None, &params).await.unwrap();
    // Changes of every kind: a create, an update, a delete.
    let store = sim.store();
    let mut pod = kinformer_sim::generate_pod(1000, 3);
    pod["metadata"]["namespace"] = "default".into();
    let created = store.create(&pods(), pod).unwrap();
    let mut changed = created.clone();
    changed["metadata"]["labels"]["changed"] = "yes".into();
    store.update(&pods(), changed).unwrap();
    let name = created["metadata"]["name"].as_str().unwrap().to_owned();
    store.delete(&pods(), Some("default"), &name).unwrap();
    let objects = |events: &[WatchEvent<Pod>]| -> Vec<(String, Arc<Pod>)> {
        events
            .iter()
            .filter_map(|e| match e {
                WatchEvent::Added(o) => Some(("ADDED".to_owned(), Arc::clone(o))),
                WatchEvent::Modified(o) => Some(("MODIFIED".to_owned(), Arc::clone(o))),
                WatchEvent::Deleted(o) => Some(("DELETED".to_owned(), Arc::clone(o))),
                _ => None,
            })
            .collect()
    };
    let mut json_events = Vec::new();
    let mut pb_events = Vec::new();
    let mut pb_bookmark = None;
    tokio::time::timeout(BOUND, async {
        while objects(&json_events).len() < 3 {
            json_events.push(from_json.next().await.unwrap().unwrap());
        }
        while objects(&pb_events).len() < 3 || pb_bookmark.is_none() {
            let event = from_pb.next().await.unwrap().unwrap();
            if let WatchEvent::Bookmark(b) = &event {
                pb_bookmark = Some(b.resource_version.clone());
            }
            pb_events.push(event);
        }
    })
    .await
    .expect("the events within the bound");
    assert_eq!(objects(&pb_events), objects(&json_events));
    assert!(pb_bookmark.is_some_and(|rv| !rv.as_str().is_empty()));
    assert_eq!(
        last_content_type_asked(&sim, "watch").as_deref(),
        Some("application/vnd.kubernetes.protobuf, application/json")
    );

    // A watch from a version the server has compacted away ends with a 410 ERROR, in protobuf.
    sim.faults().compact_now();
    let mut gone = pb
        .watch::<Pod>(
            &pods(),
            None,
            &WatchParams {
                resource_version: Some(start.as_str().to_owned()),
                ..WatchParams::default()
            },
        )
        .await
        .unwrap();
    let event = tokio::time::timeout(BOUND, gone.next()).await.unwrap();
    match event {
        Some(Ok(WatchEvent::Error(status))) => assert_eq!(status.code, 410, "{status:?}"),
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
}

/// `CompactMessage<Pod>`, the compact form over protobuf: its codec is found as `Pod`'s is, its
/// lists and watches come in protobuf, and its typed view is the object JSON gives; from a JSON
/// answer it is built through the typed object.
#[tokio::test]
async fn the_compact_form_over_protobuf_gives_the_objects_the_typed_form_gives() {
    use kinformer_core::Object as _;
    use kinformer_protobuf::CompactMessage;

    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(120, 5);
    let json = client_of(&sim, ObjectEncoding::Json);
    let pb = client_of(&sim, ObjectEncoding::Protobuf);
    let typed: ObjectList<Pod> = list_all(&json, &pods(), None).await;
    let compact: ObjectList<CompactMessage<Pod>> = list_all(&pb, &pods(), Some(50)).await;
    assert_eq!(
        last_content_type_asked(&sim, "list").as_deref(),
        Some("application/vnd.kubernetes.protobuf")
    );
    assert_eq!(compact.resource_version, typed.resource_version);
    assert_eq!(compact.items.len(), typed.items.len());
    for (t, c) in typed.items.iter().zip(&compact.items) {
        assert_eq!(c.key(), t.key());
        assert_eq!(c.resource_version(), t.resource_version());
        assert_eq!(c.labels(), t.labels());
        assert_eq!(c.typed().unwrap(), **t);
    }
    // A JSON answer builds the same form.
    let from_json: ObjectList<CompactMessage<Pod>> = list_all(&json, &pods(), None).await;
    assert_eq!(
        last_content_type_asked(&sim, "list").as_deref(),
        Some("application/json")
    );
    assert_eq!(from_json.items, compact.items);

    let params = WatchParams {
        resource_version: Some(typed.resource_version.as_str().to_owned()),
        timeout_seconds: Some(5),
        ..WatchParams::default()
    };
    let mut events = pb
        .watch::<CompactMessage<Pod>>(&pods(), None, &params)
        .await
        .unwrap();
    let store = sim.store();
    let mut pod = kinformer_sim::generate_pod(1000, 5);
    pod["metadata"]["namespace"] = "default".into();
    let created = store.create(&pods(), pod).unwrap();
    let name = created["metadata"]["name"].as_str().unwrap().to_owned();
    store.delete(&pods(), Some("default"), &name).unwrap();
    let created: Pod = serde_json::from_value(created).unwrap();
    let seen = tokio::time::timeout(BOUND, async {
        let mut seen = Vec::new();
        while seen.len() < 2 {
            match events.next().await.unwrap().unwrap() {
                WatchEvent::Added(o) => seen.push(("ADDED", o)),
                WatchEvent::Deleted(o) => seen.push(("DELETED", o)),
                WatchEvent::Bookmark(_) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        seen
    })
    .await
    .expect("the events within the bound");
    assert_eq!(
        last_content_type_asked(&sim, "watch").as_deref(),
        Some("application/vnd.kubernetes.protobuf")
    );
    assert_eq!(seen[0].0, "ADDED");
    assert_eq!(seen[0].1.typed().unwrap(), created);
    assert_eq!(seen[1].0, "DELETED");
    assert_eq!(seen[1].1.name(), name);
}

#[tokio::test]
async fn a_protobuf_streaming_list_ends_with_the_initial_events_bookmark() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(50, 9);
    let pb = client_of(&sim, ObjectEncoding::Protobuf);
    let mut stream = pb
        .watch::<Pod>(
            &pods(),
            None,
            &WatchParams {
                send_initial_events: true,
                resource_version_match: Some(ResourceVersionMatch::NotOlderThan),
                allow_watch_bookmarks: true,
                timeout_seconds: Some(5),
                ..WatchParams::default()
            },
        )
        .await
        .unwrap();
    let mut added = 0;
    tokio::time::timeout(BOUND, async {
        loop {
            match stream.next().await.unwrap().unwrap() {
                WatchEvent::Added(_) => added += 1,
                WatchEvent::Bookmark(b) if b.is_initial_events_end() => break,
                other => panic!("unexpected {other:?}"),
            }
        }
    })
    .await
    .expect("the initial events within the bound");
    assert_eq!(added, 50);
}

#[tokio::test]
async fn custom_resources_and_dynamic_objects_stay_json_and_protobuf_alone_is_refused_for_them() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let widgets = ApiResource::new("example.com", "v1", "Widget", "widgets", Scope::Namespaced);
    sim.store().register_crd(widgets.clone());
    sim.store()
        .create(
            &widgets,
            serde_json::json!({"metadata": {"name": "w", "namespace": "default"}, "spec": {"size": 3}}),
        )
        .unwrap();
    sim.store().seed_pods(5, 1);
    let pb = client_of(&sim, ObjectEncoding::Protobuf);
    // No codec for these types: the client asks for JSON, and gets it.
    let listed = pb
        .list::<DynamicObject>(&widgets, None, &ListParams::default())
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(
        last_content_type_asked(&sim, "list").as_deref(),
        Some("application/json")
    );
    let as_dynamic = pb
        .list::<DynamicObject>(&pods(), None, &ListParams::default())
        .await
        .unwrap();
    assert_eq!(as_dynamic.items.len(), 5);
    // A typed config map has a codec: protobuf.
    let configmaps = ApiResource::new("", "v1", "ConfigMap", "configmaps", Scope::Namespaced);
    pb.list::<ConfigMap>(&configmaps, None, &ListParams::default())
        .await
        .unwrap();
    assert_eq!(
        last_content_type_asked(&sim, "list").as_deref(),
        Some("application/vnd.kubernetes.protobuf")
    );

    // What a real server answers a request for protobuf alone on a custom resource: 406, and
    // JSON where JSON is listed after it.
    let http = raw_http();
    let url = format!("{}/apis/example.com/v1/widgets", sim.url());
    let only = http
        .get(&url)
        .header("Accept", "application/vnd.kubernetes.protobuf")
        .send()
        .await
        .unwrap();
    assert_eq!(only.status().as_u16(), 406);
    let fallback = http
        .get(&url)
        .header(
            "Accept",
            "application/vnd.kubernetes.protobuf, application/json",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(fallback.status().as_u16(), 200);
    assert_eq!(
        fallback.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
}

#[tokio::test]
async fn a_protobuf_error_answer_maps_to_the_same_error_as_json() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(10, 1);
    let pb = client_of(&sim, ObjectEncoding::Protobuf);
    // A continue token of a version the server has compacted: 410, as a protobuf Status.
    let first = pb
        .list::<Pod>(
            &pods(),
            None,
            &ListParams {
                limit: Some(3),
                ..ListParams::default()
            },
        )
        .await
        .unwrap();
    let store = sim.store();
    let mut pod = kinformer_sim::generate_pod(99, 1);
    pod["metadata"]["namespace"] = "default".into();
    store.create(&pods(), pod).unwrap();
    sim.faults().compact_now();
    let err = pb
        .list::<Pod>(
            &pods(),
            None,
            &ListParams {
                limit: Some(3),
                continue_token: first.continue_token.clone(),
                ..ListParams::default()
            },
        )
        .await
        .unwrap_err();
    assert!(err.is_gone(), "{err}");

    // The same 410 asked for in protobuf comes in protobuf, with the token to go on from the
    // same place at the latest version in its metadata, as the JSON one has it.
    let http = raw_http();
    let expired = http
        .get(format!(
            "{}/api/v1/pods?limit=3&continue={}",
            sim.url(),
            first.continue_token.as_deref().unwrap()
        ))
        .header("Accept", "application/vnd.kubernetes.protobuf")
        .send()
        .await
        .unwrap();
    assert_eq!(expired.status().as_u16(), 410);
    assert_eq!(
        expired.headers()["content-type"].to_str().unwrap(),
        "application/vnd.kubernetes.protobuf"
    );
    let body = expired.bytes().await.unwrap();
    let envelope = kinformer_protobuf::wire::decode_envelope(body.clone()).unwrap();
    assert_eq!(envelope.kind, "Status");
    let status = kinformer_protobuf::wire::decode_status(&envelope.raw).unwrap();
    assert_eq!(
        (status.reason.as_deref(), status.code),
        (Some("Expired"), Some(410))
    );
    let inconsistent = status.metadata.continue_token.expect("a continue token");
    assert!(Error::from_response(410, None, &body).is_gone());
    let rest = pb
        .list::<Pod>(
            &pods(),
            None,
            &ListParams {
                continue_token: Some(inconsistent),
                ..ListParams::default()
            },
        )
        .await
        .unwrap();
    // The rest of the list at the latest version, from where the first page stopped.
    let key = |p: &Pod| (p.metadata.namespace.clone(), p.metadata.name.clone());
    let all = list_all::<Pod>(&pb, &pods(), None).await;
    let last = key(first.items.last().unwrap());
    let after: Vec<_> = all
        .items
        .iter()
        .map(|p| key(p))
        .filter(|k| *k > last)
        .collect();
    assert_eq!(rest.items.iter().map(|p| key(p)).collect::<Vec<_>>(), after);
    assert!(!after.is_empty());

    // The body of a protobuf error is a protobuf Status: the client reads its reason.
    let missing = http
        .get(format!("{}/api/v1/namespaces/default/pods/nope", sim.url()))
        .header("Accept", "application/vnd.kubernetes.protobuf")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
    assert_eq!(
        missing.headers()["content-type"].to_str().unwrap(),
        "application/vnd.kubernetes.protobuf"
    );
    let body = missing.bytes().await.unwrap();
    assert!(body.starts_with(b"k8s\0"));
    match Error::from_response(404, None, &body) {
        Error::NotFound { message } => assert!(message.contains("nope"), "{message}"),
        other => panic!("{other:?}"),
    }
    // With the details the JSON form has: the object it is about.
    let envelope = kinformer_protobuf::wire::decode_envelope(body).unwrap();
    let details = kinformer_protobuf::wire::decode_status(&envelope.raw)
        .unwrap()
        .details
        .expect("details");
    assert_eq!(
        (details.name.as_deref(), details.kind.as_deref()),
        (Some("nope"), Some("pods"))
    );
}

#[tokio::test]
async fn an_object_leaving_a_protobuf_watchs_selector_is_deleted_at_the_events_version() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let store = sim.store();
    let mut pod = kinformer_sim::generate_pod(5, 2);
    pod["metadata"]["namespace"] = "default".into();
    pod["metadata"]["labels"]["watched"] = "yes".into();
    let created = store.create(&pods(), pod).unwrap();
    let pb = client_of(&sim, ObjectEncoding::Protobuf);
    let mut stream = pb
        .watch::<Pod>(
            &pods(),
            None,
            &WatchParams {
                label_selector: Some("watched=yes".to_owned()),
                resource_version: Some(
                    created["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                ),
                timeout_seconds: Some(5),
                ..WatchParams::default()
            },
        )
        .await
        .unwrap();
    let mut relabelled = created.clone();
    relabelled["metadata"]["labels"]["watched"] = "no".into();
    let updated = store.update(&pods(), relabelled).unwrap();
    let event = tokio::time::timeout(BOUND, stream.next()).await.unwrap();
    match event {
        Some(Ok(WatchEvent::Deleted(p))) => {
            // Its state before the change, at the change's version.
            let labels = p.metadata.labels.as_ref().unwrap();
            assert_eq!(labels["watched"], "yes");
            assert_eq!(
                p.metadata.resource_version.as_deref(),
                updated["metadata"]["resourceVersion"].as_str()
            );
        }
        other => panic!("expected DELETED, got {other:?}"),
    }
}

#[tokio::test]
async fn failures_a_protobuf_list_or_watch_meets_say_what_to_do_as_json_ones_do() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(3, 1);
    let pb = client_of(&sim, ObjectEncoding::Protobuf);
    let faults = sim.faults();
    // A Status in protobuf, with the retry delay of its header and its details.
    faults.fail_next(RequestKind::List, 503, 1, Some(2));
    let err = pb
        .list::<Pod>(&pods(), None, &ListParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::ServerError { code: 503, .. }) && err.is_retryable(),
        "{err}"
    );
    assert_eq!(err.retry_after(), Some(Duration::from_secs(2)));
    assert_eq!(
        last_content_type_asked(&sim, "list").as_deref(),
        Some("application/vnd.kubernetes.protobuf")
    );
    // The request filters' 429 is plain text, whatever was asked: still throttling.
    faults.fail_next(RequestKind::Watch, 429, 1, Some(3));
    let err = pb
        .watch::<Pod>(&pods(), None, &WatchParams::default())
        .await
        .err()
        .unwrap();
    assert!(matches!(err, Error::Throttled { .. }), "{err}");
    assert_eq!(err.retry_after(), Some(Duration::from_secs(3)));
    assert!(err.to_string().contains("Too many requests"), "{err}");
    // Nothing else is failed: the next list and watch are answered in protobuf.
    assert_eq!(
        pb.list::<Pod>(&pods(), None, &ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        3
    );
    assert!(
        pb.watch::<Pod>(&pods(), None, &WatchParams::default())
            .await
            .is_ok()
    );
}

/// A client of `sim` with `encoding` and managed fields left out at decode.
fn lean_client_of(sim: &SimServer, encoding: ObjectEncoding) -> Client {
    let mut config = config_of(sim, encoding);
    config.managed_fields = ManagedFieldsDecode::Skip;
    Client::new(config).unwrap()
}

/// Whether every pod has managed fields (`true`) or none has (`false`).
fn all_with_managed_fields(pods: &[Arc<Pod>], with: bool) -> bool {
    pods.iter()
        .all(|p| p.metadata.managed_fields.is_some() == with)
}

fn without_managed_fields(pods: &[Arc<Pod>]) -> Vec<Pod> {
    pods.iter()
        .map(|p| {
            let mut p = Pod::clone(p);
            p.metadata.managed_fields = None;
            p
        })
        .collect()
}

#[tokio::test]
async fn managed_fields_left_out_at_decode_leave_the_objects_otherwise_as_they_are() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(30, 3);
    for encoding in [ObjectEncoding::Json, ObjectEncoding::Protobuf] {
        let full = client_of(&sim, encoding);
        let lean = lean_client_of(&sim, encoding);
        // A paged list, and a whole one from the watch cache.
        let paged = list_all::<Pod>(&full, &pods(), Some(7)).await;
        assert!(
            all_with_managed_fields(&paged.items, true),
            "the seeded pods carry managed fields"
        );
        let lean_paged = list_all::<Pod>(&lean, &pods(), Some(7)).await;
        assert_eq!(
            without_managed_fields(&lean_paged.items),
            without_managed_fields(&paged.items),
            "{encoding:?}"
        );
        assert!(
            all_with_managed_fields(&lean_paged.items, false),
            "{encoding:?}"
        );
        let whole = ListParams {
            resource_version: Some("0".to_owned()),
            ..ListParams::default()
        };
        let lean_whole = lean.list::<Pod>(&pods(), None, &whole).await.unwrap();
        assert_eq!(lean_whole.items.len(), 30);
        assert!(all_with_managed_fields(&lean_whole.items, false));

        // A watch: the same events, their objects without managed fields.
        let params = WatchParams {
            resource_version: Some(paged.resource_version.as_str().to_owned()),
            timeout_seconds: Some(5),
            ..WatchParams::default()
        };
        let mut from_full = full.watch::<Pod>(&pods(), None, &params).await.unwrap();
        let mut from_lean = lean.watch::<Pod>(&pods(), None, &params).await.unwrap();
        let name = paged.items[0].metadata.name.clone().unwrap();
        let namespace = paged.items[0].metadata.namespace.clone().unwrap();
        let mut changed = sim.store().get(&pods(), Some(&namespace), &name).unwrap();
        changed["metadata"]["labels"]["changed"] = format!("{encoding:?}").into();
        sim.store().update(&pods(), changed).unwrap();
        let (full_event, lean_event) = tokio::time::timeout(BOUND, async {
            (
                from_full.next().await.unwrap().unwrap(),
                from_lean.next().await.unwrap().unwrap(),
            )
        })
        .await
        .expect("the update within the bound");
        match (full_event, lean_event) {
            (WatchEvent::Modified(full), WatchEvent::Modified(lean)) => {
                assert!(full.metadata.managed_fields.is_some());
                assert_eq!(lean.metadata.managed_fields, None);
                assert_eq!(
                    without_managed_fields(&[lean]),
                    without_managed_fields(&[full])
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
