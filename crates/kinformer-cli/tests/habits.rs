//! kubectl's habits, as a user types them, against a simulated server: the context's namespace
//! by default, TYPE/NAME arguments, one object or one `List` for `-o yaml|json`, quoted
//! timestamps, `-o jsonpath=` and `-o custom-columns=`, `--no-headers`, `-L`, `--sort-by`,
//! `--show-kind`, `get -w`, `-v=N`, and names that are checked before they reach a request.

mod support;

use kinformer_core::{ApiResource, Scope};
use kinformer_sim::{SimConfig, SimServer};
use serde_json::{Value, json};
use support::kinformer;

fn pods() -> ApiResource {
    ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced)
}

/// A simulated server with pods in two namespaces (`shop`: web-1 Running with 3 restarts,
/// web-2 Pending; `default`: db-1 Running), and a kubeconfig whose context's namespace is
/// `shop`.
async fn sim() -> (SimServer, tempfile::TempDir, std::path::PathBuf) {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let store = sim.store();
    let namespaces = ApiResource::new("", "v1", "Namespace", "namespaces", Scope::Cluster);
    for ns in ["default", "shop"] {
        store
            .create(&namespaces, json!({"metadata": {"name": ns}}))
            .unwrap();
    }
    for (ns, name, phase, restarts, tier) in [
        ("shop", "web-1", "Running", 3, "front"),
        ("shop", "web-2", "Pending", 0, "back"),
        ("default", "db-1", "Running", 1, "data"),
    ] {
        store
            .create(
                &pods(),
                json!({
                    "metadata": {"name": name, "namespace": ns,
                                 "labels": {"app": "web", "example.com/tier": tier}},
                    "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "i"}]},
                    "status": {"phase": phase, "containerStatuses": [
                        {"name": "c", "ready": phase == "Running", "restartCount": restarts}]}
                }),
            )
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    let yaml = sim.kubeconfig_yaml();
    assert!(yaml.contains("namespace: default\n"), "{yaml}");
    std::fs::write(
        &path,
        yaml.replace("namespace: default\n", "namespace: shop\n"),
    )
    .unwrap();
    (sim, dir, path)
}

/// The NAME column of a table (the first column).
fn names(table: &str) -> Vec<&str> {
    table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_namespace_is_the_contexts() {
    let (_sim, dir, path) = sim().await;
    let (code, out, err) = kinformer(dir.path(), &path, &["get", "pods"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("NAME "), "no NAMESPACE column: {out}");
    assert_eq!(names(&out), ["web-1", "web-2"]);
    let (_, out, _) = kinformer(dir.path(), &path, &["get", "pods", "-n", "default"]).await;
    assert_eq!(names(&out), ["db-1"]);
    let (_, out, _) = kinformer(dir.path(), &path, &["get", "pods", "-A"]).await;
    assert!(out.starts_with("NAMESPACE "), "{out}");
    assert_eq!(out.lines().count(), 4, "{out}");
    // `watch` too: only the context's namespace.
    let (code, out, err) = kinformer(
        dir.path(),
        &path,
        &["watch", "pods", "--max-events", "2", "-o", "name"],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "ADDED    pod/web-1\nADDED    pod/web-2\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_object_prints_itself_and_several_types_print_one_list() {
    let (_sim, dir, path) = sim().await;
    for args in [
        &["get", "ns", "default", "-o", "yaml"][..],
        &["get", "ns/default", "-o", "yaml"][..],
    ] {
        let (code, out, err) = kinformer(dir.path(), &path, args).await;
        assert_eq!(code, Some(0), "{err}");
        let doc: Value = serde_yaml_ng::from_str(&out).unwrap();
        assert_eq!(doc["kind"], "Namespace", "{args:?}: {out}");
        assert_eq!(doc["metadata"]["name"], "default");
        // Timestamps are quoted strings, as kubectl prints them.
        assert!(out.contains("  creationTimestamp: \""), "{out}");
    }
    let (code, out, _) = kinformer(dir.path(), &path, &["get", "pod/web-1", "-o", "json"]).await;
    assert_eq!(code, Some(0));
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["kind"], "Pod");
    // kubectl's JSON: four spaces of indentation.
    assert!(out.starts_with("{\n    \"apiVersion\": \"v1\",\n"), "{out}");

    // Two types: one document, a List of both.
    let (code, out, err) =
        kinformer(dir.path(), &path, &["get", "pods,ns", "-A", "-o", "json"]).await;
    assert_eq!(code, Some(0), "{err}");
    let list: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(list["kind"], "List");
    let kinds: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "Pod").count(),
        3,
        "{kinds:?}"
    );
    assert!(kinds.contains(&"Namespace"), "{kinds:?}");
    let (code, out, _) = kinformer(dir.path(), &path, &["get", "pods,ns", "-o", "yaml"]).await;
    assert_eq!(code, Some(0));
    let list: Value = serde_yaml_ng::from_str(&out).expect("one YAML document");
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"][0]["kind"], "Pod");
    // Several names of one type: a List too.
    let (_, out, _) = kinformer(
        dir.path(),
        &path,
        &["get", "pods", "web-1", "web-2", "-o", "json"],
    )
    .await;
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jsonpath_and_custom_columns_print_as_kubectl() {
    let (_sim, dir, path) = sim().await;
    let get = |args: &'static [&'static str]| kinformer(dir.path(), &path, args);
    let (code, out, err) = get(&["get", "pods", "-o", "jsonpath={.items[*].metadata.name}"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "web-1 web-2");
    let (_, out, _) = get(&[
        "get",
        "pods",
        "-A",
        "-o",
        r#"jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{"\t"}{.status.phase}{"\n"}{end}"#,
    ])
    .await;
    assert_eq!(
        out,
        "default/db-1\tRunning\nshop/web-1\tRunning\nshop/web-2\tPending\n"
    );
    let (_, out, _) = get(&[
        "get",
        "pods",
        "-A",
        "-o",
        r#"jsonpath={.items[?(@.status.phase=="Running")].metadata.name}"#,
    ])
    .await;
    assert_eq!(out, "db-1 web-1");
    let (_, out, _) = get(&["get", "pod", "web-2", "-o", "jsonpath={.status.phase}"]).await;
    assert_eq!(out, "Pending");
    let (code, _, err) = get(&["get", "pods", "-o", "jsonpath={.items[0,1]}"]).await;
    assert_eq!(code, Some(2));
    assert!(err.contains("unions"), "{err}");

    let (code, out, err) = get(&[
        "get",
        "pods",
        "-o",
        "custom-columns=NAME:.metadata.name,PHASE:{.status.phase},RESTARTS:.status.containerStatuses[*].restartCount,NOPE:.spec.nope",
    ])
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "NAME    PHASE     RESTARTS   NOPE\n\
         web-1   Running   3          <none>\n\
         web-2   Pending   0          <none>\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_flags_shape_the_table_as_kubectl() {
    let (_sim, dir, path) = sim().await;
    let get = |args: &'static [&'static str]| kinformer(dir.path(), &path, args);
    let (code, out, err) = get(&["get", "pods", "--no-headers", "-o", "name"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "pod/web-1\npod/web-2\n");
    let (_, out, _) = get(&["get", "pods", "--no-headers"]).await;
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.starts_with("web-1 "), "{out}");

    let (_, out, _) = get(&["get", "pods", "-L", "app,example.com/tier"]).await;
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "APP", "TIER"]
    );
    assert!(
        out.lines().nth(1).unwrap().ends_with("web   front"),
        "{out}"
    );

    // Sorted by restarts (numbers as numbers), then by phase.
    let (code, out, err) = get(&[
        "get",
        "pods",
        "-A",
        "--sort-by",
        ".status.containerStatuses[0].restartCount",
        "-o",
        "name",
    ])
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "pod/web-2\npod/db-1\npod/web-1\n");
    let (_, out, _) = get(&["get", "pods", "--sort-by", "{.status.phase}", "-o", "name"]).await;
    assert_eq!(out, "pod/web-2\npod/web-1\n");

    let (_, out, _) = get(&["get", "pods", "--show-kind"]).await;
    assert_eq!(names(&out), ["pod/web-1", "pod/web-2"]);

    // TYPE/NAME arguments, one table per type.
    let (code, out, err) = get(&["get", "pod/web-2", "ns/shop"]).await;
    assert_eq!(code, Some(0), "{err}");
    let tables: Vec<&str> = out.split("\n\n").collect();
    assert_eq!(tables.len(), 2, "{out}");
    assert_eq!(names(tables[0]), ["pod/web-2"]);
    assert_eq!(names(tables[1]), ["namespace/shop"]);
    // Without headers, no blank line between the tables either, as kubectl.
    let (_, out, _) = get(&["get", "pod/web-2", "ns/shop", "--no-headers"]).await;
    assert_eq!(
        names(&format!("\n{out}")),
        ["pod/web-2", "namespace/shop"],
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_prints_rows_under_one_header() {
    let (_sim, dir, path) = sim().await;
    let (code, out, err) = kinformer(
        dir.path(),
        &path,
        &["get", "pods", "-w", "--max-events", "2"],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    let cells =
        |l: &str| -> Vec<String> { l.split_whitespace().take(4).map(str::to_owned).collect() };
    assert_eq!(
        cells(lines[0]),
        ["NAME", "READY", "STATUS", "RESTARTS"],
        "{out}"
    );
    assert_eq!(cells(lines[1]), ["web-1", "1/1", "Running", "3"], "{out}");
    assert_eq!(cells(lines[2]), ["web-2", "0/1", "Pending", "0"], "{out}");
    let (_, out, _) = kinformer(
        dir.path(),
        &path,
        &[
            "get",
            "pods",
            "--watch",
            "--max-events",
            "1",
            "-o",
            "jsonpath={.metadata.name}",
        ],
    )
    .await;
    assert_eq!(out, "web-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verbosity_shows_requests_and_names_are_checked() {
    let (_sim, dir, path) = sim().await;
    let (code, _, err) = kinformer(dir.path(), &path, &["get", "pods", "-v=6"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("DEBUG"), "{err}");
    assert!(err.contains("/api/v1/namespaces/shop/pods"), "{err}");
    let (_, _, err) = kinformer(dir.path(), &path, &["get", "pods", "-v=0"]).await;
    assert!(err.is_empty(), "{err}");

    for (args, says) in [
        (&["get", "pods", ".."][..], "invalid resource name"),
        (&["watch", "pods", "a%2F"][..], "invalid resource name"),
        (&["get", "pod/web-1", "web-2"][..], "resource/name form"),
        (
            &["get", "pods", "pod/web-1"][..],
            "no need to specify a resource type",
        ),
        (&["watch", "pods", "a", "b"][..], "at most one NAME"),
    ] {
        let (code, out, err) = kinformer(dir.path(), &path, args).await;
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.is_empty(), "{out}");
    }
}
