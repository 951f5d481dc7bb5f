//! `watch` and `get` on the informer, as a user runs them against a simulated server: the exact
//! event lines, JSON lines, `-o name`, names, short names, the embedded fallback and its refusal,
//! and Ctrl-C.

mod support;

use std::process::Stdio;

use kinformer_core::{ApiResource, Scope};
use kinformer_sim::{SimConfig, SimServer};
use serde_json::{Value, json};
use support::{KillOnDrop, Lines, bare, run, signal, wait_bounded};

fn pods() -> ApiResource {
    ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced)
}

/// A plain-HTTP simulated server with two pods whose status is known, and a kubeconfig for it.
async fn sim_with_two_pods() -> (
    SimServer,
    tempfile::TempDir,
    std::path::PathBuf,
    [String; 2],
) {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let store = sim.store();
    let mut versions = Vec::new();
    for (name, node, phase, restarts) in [
        ("web-1", "node-1", "Running", 3),
        ("web-2", "node-2", "Pending", 0),
    ] {
        let created = store
            .create(
                &pods(),
                json!({
                    "metadata": {"name": name, "namespace": "shop", "labels": {"app": "web"}},
                    "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
                    "status": {"phase": phase, "containerStatuses": [
                        {"name": "c", "ready": phase == "Running", "restartCount": restarts}]}
                }),
            )
            .unwrap();
        versions.push(
            created["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, sim.kubeconfig_yaml()).unwrap();
    let versions = [versions[0].clone(), versions[1].clone()];
    (sim, dir, path, versions)
}

/// Runs `kinformer ARGS --kubeconfig PATH` to completion off the async threads.
async fn kinformer(
    dir: &std::path::Path,
    path: &std::path::Path,
    args: &[&str],
) -> (std::process::ExitStatus, String, String) {
    let mut cmd = bare(dir);
    cmd.args(args).arg("--kubeconfig").arg(path);
    tokio::task::spawn_blocking(move || run(cmd)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prints_each_event_with_its_version_and_a_pod_summary() {
    let (_sim, dir, path, [rv1, rv2]) = sim_with_two_pods().await;
    let (status, out, err) = kinformer(
        dir.path(),
        &path,
        &["watch", "po", "-A", "--max-events", "2"],
    )
    .await;
    assert!(status.success(), "{err}");
    assert_eq!(
        out,
        format!(
            "ADDED    shop/web-1\trv={rv1}\tstatus=Running node=node-1 restarts=3\n\
             ADDED    shop/web-2\trv={rv2}\tstatus=Pending node=node-2 restarts=0\n"
        )
    );
    assert!(err.is_empty(), "{err}");

    // One object by name.
    let (status, out, err) = kinformer(
        dir.path(),
        &path,
        &["watch", "pods", "web-2", "-A", "--max-events", "1"],
    )
    .await;
    assert!(status.success(), "{err}");
    assert_eq!(
        out,
        format!("ADDED    shop/web-2\trv={rv2}\tstatus=Pending node=node-2 restarts=0\n")
    );

    let (status, out, err) = kinformer(
        dir.path(),
        &path,
        &[
            "watch",
            "pods",
            "-nshop",
            "--max-events",
            "1",
            "--show-labels",
            "-o",
            "wide",
        ],
    )
    .await;
    assert!(status.success(), "{err}");
    assert_eq!(
        out,
        format!(
            "ADDED    shop/web-1\trv={rv1}\tstatus=Running node=node-1 restarts=3 ip=<none> \
             labels=app=web\n"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_o_json_prints_one_document_per_line() {
    let (_sim, dir, path, [rv1, rv2]) = sim_with_two_pods().await;
    let (status, out, err) = kinformer(
        dir.path(),
        &path,
        &["watch", "pod", "-A", "-o", "json", "--max-events", "2"],
    )
    .await;
    assert!(status.success(), "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{out}");
    for (line, (name, rv)) in lines.iter().zip([("web-1", &rv1), ("web-2", &rv2)]) {
        assert_eq!(line["type"], "ADDED");
        assert_eq!(line["key"], format!("shop/{name}"));
        assert_eq!(line["resourceVersion"], rv.as_str());
        assert_eq!(line["tombstone"], false);
        assert_eq!(line["object"]["kind"], "Pod");
        assert_eq!(line["object"]["metadata"]["name"], name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_prints_names_single_objects_and_reports_missing_ones() {
    let (_sim, dir, path, _) = sim_with_two_pods().await;
    let (status, out, err) = kinformer(dir.path(), &path, &["get", "po", "-A", "-o", "name"]).await;
    assert!(status.success(), "{err}");
    assert_eq!(out, "pod/web-1\npod/web-2\n");

    // Several types: a table each, names carrying their type.
    let (status, out, err) =
        kinformer(dir.path(), &path, &["get", "pods,deploy", "-n", "shop"]).await;
    assert!(status.success(), "{err}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{out}");
    assert_eq!(rows[1][..4], ["pod/web-1", "1/1", "Running", "3"], "{out}");
    assert_eq!(rows[2][..4], ["pod/web-2", "0/1", "Pending", "0"], "{out}");
    // No deployments: as kubectl, nothing is said when another type printed something.
    assert_eq!(err, "");
    let (status, out, err) = kinformer(dir.path(), &path, &["watch", "pods,nodes"]).await;
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(
        err,
        "error: watch takes one resource type; run one watch per type\n"
    );

    // Flags before the verb, as kubectl takes them.
    let (status, out, err) = kinformer(
        dir.path(),
        &path,
        &["-nshop", "-o", "name", "get", "po", "web-1"],
    )
    .await;
    assert!(status.success(), "{err}");
    assert_eq!(out, "pod/web-1\n");

    let (status, out, err) =
        kinformer(dir.path(), &path, &["get", "pods.", "web-2", "-n", "shop"]).await;
    assert!(status.success(), "{err}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert_eq!(rows[0], ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert_eq!(rows[1][..4], ["web-2", "0/1", "Pending", "0"]);

    let (status, out, err) = kinformer(dir.path(), &path, &["get", "pods", "nope"]).await;
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(err, "kinformer: pods \"nope\" not found\n");

    let (status, out, err) = kinformer(
        dir.path(),
        &path,
        &["get", "deployments.apps", "-o", "json"],
    )
    .await;
    assert!(status.success(), "{err}");
    // As kubectl: an empty List, and no "No resources found".
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["kind"], "List", "{out}");
    assert_eq!(list["items"], json!([]), "{out}");
    assert!(err.is_empty(), "{err}");

    let (status, out, err) = kinformer(
        dir.path(),
        &path,
        &["get", "deployments.apps", "-o", "name"],
    )
    .await;
    assert!(status.success(), "{err}");
    assert!(out.is_empty(), "{out}");
    // As kubectl: the namespace is named when every type asked for lives in one.
    assert_eq!(err, "No resources found in default namespace.\n");
    let (status, _, err) = kinformer(
        dir.path(),
        &path,
        &["get", "deployments.apps", "-A", "-o", "name"],
    )
    .await;
    assert!(status.success(), "{err}");
    assert_eq!(err, "No resources found\n");
}

#[test]
fn no_sim_forbids_the_embedded_cluster() {
    let home = tempfile::tempdir().unwrap();
    let mut flag = bare(home.path());
    flag.args(["get", "pods", "--no-sim"]);
    let mut env = bare(home.path());
    env.env("KINFORMER_NO_SIM", "1").args(["watch", "pods"]);
    for cmd in [flag, env] {
        let (status, out, err) = run(cmd);
        // Exit 5: no kubeconfig where one is required.
        assert_eq!(status.code(), Some(5), "{err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("kinformer: no kubeconfig found"), "{err}");
        assert!(err.contains("--kubeconfig"), "{err}");
        assert!(!err.contains("embedded simulated cluster at"), "{err}");
    }
    // `KINFORMER_NO_SIM=0` does not forbid it.
    let mut cmd = bare(home.path());
    cmd.env("KINFORMER_NO_SIM", "0").args([
        "get",
        "pods",
        "-A",
        "--sim-pods",
        "2",
        "--sim-churn",
        "0",
        "-o",
        "name",
    ]);
    let (status, out, err) = run(cmd);
    assert!(status.success(), "{err}");
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(err.starts_with("kinformer: no kubeconfig found: using an embedded simulated cluster at http://127.0.0.1:"), "{err}");
}

#[test]
fn ctrl_c_stops_a_healthy_watch_with_exit_130_and_whole_lines() {
    support::signal_stops_a_healthy_watch("INT", 130);
}

#[test]
fn stats_reports_counters_until_ctrl_c() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = bare(home.path());
    cmd.args([
        "stats",
        "pods",
        "-A",
        "--sim",
        "--sim-pods",
        "5",
        "--sim-churn",
        "0",
    ])
    .args(["--interval", "100ms"])
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let mut child = KillOnDrop(cmd.spawn().unwrap());
    let out = Lines::new(child.0.stdout.take().unwrap());
    let field = |line: &str, name: &str| -> String {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")).map(str::to_owned))
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    };
    // Bounded: the cache holds the five pods within a few reports.
    let mut synced = None;
    for _ in 0..300 {
        let line = out.next();
        assert!(line.starts_with("elapsed="), "{line}");
        if field(&line, "cache") == "5" {
            synced = Some(line);
            break;
        }
    }
    let line = synced.expect("the cache to fill");
    assert_eq!(field(&line, "lists"), "1", "{line}");
    assert_eq!(field(&line, "relists"), "0", "{line}");
    assert_eq!(field(&line, "watch_restarts"), "0", "{line}");
    assert_eq!(field(&line, "errors"), "0", "{line}");
    assert_eq!(field(&line, "lag"), "0", "{line}");
    signal(&child.0, "INT");
    assert_eq!(wait_bounded(&mut child.0).code(), Some(130));
}
