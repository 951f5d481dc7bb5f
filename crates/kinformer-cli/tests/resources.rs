//! Resource names resolved through the server's discovery, as kubectl resolves them: custom
//! resources by plural, singular, kind and `resource[.version].group`, and the core group
//! preferred when two groups serve the same name.

mod support;

use kinformer_core::{ApiResource, Scope};
use kinformer_sim::{SimConfig, SimServer};
use serde_json::json;
use support::kinformer;

/// A simulated server with one widget (a custom resource) and an event in two groups: the core
/// group and a custom `example.com`.
async fn sim_with_custom_resources() -> (SimServer, tempfile::TempDir, std::path::PathBuf) {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let store = sim.store();
    let widgets = ApiResource::new("example.com", "v1", "Widget", "widgets", Scope::Namespaced);
    let events = ApiResource::new("example.com", "v1", "Event", "events", Scope::Namespaced);
    store.register_crd(widgets.clone());
    store.register_crd(events.clone());
    store
        .create(
            &widgets,
            json!({"apiVersion": "example.com/v1", "kind": "Widget",
                   "metadata": {"name": "w1", "namespace": "shop"}, "spec": {"size": 3}}),
        )
        .unwrap();
    store
        .create(
            &events,
            json!({"apiVersion": "example.com/v1", "kind": "Event",
                   "metadata": {"name": "custom-event", "namespace": "shop"}}),
        )
        .unwrap();
    store
        .create(
            &ApiResource::new("", "v1", "Event", "events", Scope::Namespaced),
            json!({"apiVersion": "v1", "kind": "Event",
                   "metadata": {"name": "core-event", "namespace": "shop"},
                   "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "shop"},
                   "reason": "Started", "type": "Normal"}),
        )
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, sim.kubeconfig_yaml()).unwrap();
    (sim, dir, path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_resolve_by_every_kind_of_name() {
    let (_sim, dir, path) = sim_with_custom_resources().await;
    for name in [
        "widgets",
        "widget",
        "Widget",
        "widgets.example.com",
        "widgets.v1.example.com",
    ] {
        let (code, out, err) =
            kinformer(dir.path(), &path, &["get", name, "-A", "-o", "name"]).await;
        assert_eq!(code, Some(0), "{name}: {err}");
        assert_eq!(out, "widget.example.com/w1\n", "{name}");
        assert!(err.is_empty(), "{name}: {err}");
    }
    let (code, out, err) = kinformer(
        dir.path(),
        &path,
        &["watch", "widgets.example.com", "-A", "--max-events", "1"],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("ADDED    shop/w1\trv="), "{out}");
    // A built-in type and a custom one in one command.
    let (code, out, err) = kinformer(
        dir.path(),
        &path,
        &["get", "ns,widgets", "-A", "-o", "name"],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.ends_with("widget.example.com/w1\n"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_core_group_wins_a_name_two_groups_serve() {
    let (_sim, dir, path) = sim_with_custom_resources().await;
    for (name, expected) in [
        ("events", "event/core-event\n"),
        ("ev", "event/core-event\n"),
        ("events.", "event/core-event\n"),
        ("events.example.com", "event.example.com/custom-event\n"),
    ] {
        let (code, out, err) =
            kinformer(dir.path(), &path, &["get", name, "-A", "-o", "name"]).await;
        assert_eq!(code, Some(0), "{name}: {err}");
        assert_eq!(out, expected, "{name}");
    }
}
