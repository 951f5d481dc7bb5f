//! The `kinformer` binary end to end: its fallback to the embedded simulated cluster, `get` and
//! `watch` against a kubeconfig over TLS with a token, and a watch that converges through a
//! compaction (410) by relisting, printing the delete it could not see.

mod support;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

use kinformer_core::{ApiResource, Scope};
use kinformer_sim::{Auth, RequestKind, SimConfig, SimServer};
use serde_json::json;
use support::{BOUND, KillOnDrop, bare, run, wait_bounded};
use tokio::sync::mpsc;

fn pods() -> ApiResource {
    ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced)
}

/// The keys (`namespace/name`) of the rows of a `kinformer get` table for all namespaces, after
/// checking its header.
fn keys_of(out: &str) -> BTreeSet<String> {
    let mut lines = out.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{out}"
    );
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(cells.len(), header.len(), "{l}");
            format!("{}/{}", cells[0], cells[1])
        })
        .collect()
}

#[test]
fn watch_falls_back_to_an_embedded_cluster_when_nothing_is_configured() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = bare(home.path());
    cmd.args([
        "watch",
        "pods",
        "-A",
        "--sim-pods",
        "4",
        "--sim-churn",
        "200/s",
    ]);
    cmd.args(["--max-events", "10", "--seed", "3"]);
    let (status, out, err) = run(cmd);
    assert!(status.success(), "{err}");
    assert!(err.contains("no kubeconfig found"), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 10, "{out}");
    assert_consistent_history(&lines);
}

/// Replays printed events: an ADDED key must be new, a MODIFIED or DELETED one known, and each
/// key's resource versions must rise (the simulated server's are integers).
fn assert_consistent_history(lines: &[&str]) {
    let mut known: std::collections::BTreeMap<&str, u64> = Default::default();
    for line in lines {
        let mut parts = line.split_whitespace();
        let (kind, key) = (parts.next().unwrap(), parts.next().unwrap());
        let rv: u64 = parts
            .next()
            .unwrap()
            .trim_start_matches("rv=")
            .parse()
            .unwrap();
        match kind {
            "ADDED" => assert!(known.insert(key, rv).is_none(), "added twice: {line}"),
            "MODIFIED" => {
                let old = known
                    .insert(key, rv)
                    .unwrap_or_else(|| panic!("unknown: {line}"));
                assert!(old < rv, "version went back: {line}");
            }
            "DELETED" => {
                let old = known
                    .remove(key)
                    .unwrap_or_else(|| panic!("unknown: {line}"));
                assert!(old <= rv, "version went back: {line}");
            }
            other => panic!("unexpected event kind {other}: {line}"),
        }
    }
}

#[test]
fn a_broken_kubeconfig_is_reported_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config");
    std::fs::write(&path, "clusters: [this is: not yaml").unwrap();
    let mut cmd = bare(dir.path());
    cmd.env("KUBECONFIG", &path).args(["get", "pods"]);
    let (status, out, err) = run(cmd);
    // Exit 5: a broken kubeconfig.
    assert_eq!(status.code(), Some(5), "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains(&*path.to_string_lossy()), "{err}");
    assert!(!err.contains("embedded"), "{err}");
}

#[test]
fn bad_command_lines_exit_2_with_a_help_hint() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = bare(home.path());
    cmd.args(["watch", "pods,,nodes"]);
    let (status, out, err) = run(cmd);
    assert_eq!(status.code(), Some(2));
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("invalid value 'pods,,nodes'"), "{err}");
    assert!(err.contains("empty resource name"), "{err}");
    assert!(err.contains("--help"), "{err}");

    let mut cmd = bare(home.path());
    cmd.arg("--help");
    let (status, out, _) = run(cmd);
    assert!(status.success());
    assert!(out.contains("Usage: kinformer"), "{out}");
}

async fn tls_sim() -> (SimServer, tempfile::TempDir, std::path::PathBuf) {
    let sim = SimServer::start(SimConfig {
        tls: true,
        auth: Auth::BearerToken("s3cret".into()),
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, sim.kubeconfig_yaml()).unwrap();
    (sim, dir, path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_lists_what_the_server_holds_through_a_kubeconfig() {
    let (sim, dir, path) = tls_sim().await;
    sim.store().seed_pods(7, 11);
    let mut cmd = bare(dir.path());
    cmd.arg("get")
        .arg("pods")
        .arg("-A")
        .arg("--kubeconfig")
        .arg(&path);
    let (status, out, err) = tokio::task::spawn_blocking(move || run(cmd)).await.unwrap();
    assert!(status.success(), "{err}");
    let want: BTreeSet<String> = sim
        .store()
        .list(&pods(), None)
        .iter()
        .map(|p| {
            let m = &p["metadata"];
            format!(
                "{}/{}",
                m["namespace"].as_str().unwrap(),
                m["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(want.len(), 7);
    assert_eq!(keys_of(&out), want, "{out}");
    // Only the table on stdout: a header and one row per object.
    assert_eq!(out.lines().count(), 8, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_converges_through_a_compaction_by_relisting() {
    let (sim, dir, path) = tls_sim().await;
    let store = sim.store();
    for name in ["a", "b", "c"] {
        store
            .create(
                &pods(),
                json!({"metadata": {"name": name, "namespace": "ns"}}),
            )
            .unwrap();
    }
    let mut cmd = bare(dir.path());
    cmd.arg("watch")
        .arg("pods")
        .arg("-A")
        .arg("--kubeconfig")
        .arg(&path)
        .args(["--max-events", "6"]);
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let stdout = child.0.stdout.take().unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let mut next = async || {
        tokio::time::timeout(BOUND, rx.recv())
            .await
            .expect("a line within the bound")
            .expect("kinformer still running")
    };
    for want in ["ns/a", "ns/b", "ns/c"] {
        let line = next().await;
        assert!(line.starts_with("ADDED") && line.contains(want), "{line}");
    }
    // A change while the watch is open arrives as it happens.
    store
        .create(
            &pods(),
            json!({"metadata": {"name": "live", "namespace": "ns"}}),
        )
        .unwrap();
    let line = next().await;
    assert!(
        line.starts_with("ADDED") && line.contains("ns/live"),
        "{line}"
    );

    // Take the watch down and keep it down, change things, and compact the history so the
    // watch cannot resume: only a relist can tell what happened.
    let faults = sim.faults();
    faults.fail_next(RequestKind::Watch, 503, 1_000_000, None);
    faults.close_all_watches_now();
    store.delete(&pods(), Some("ns"), "b").unwrap();
    store
        .create(
            &pods(),
            json!({"metadata": {"name": "d", "namespace": "ns"}}),
        )
        .unwrap();
    faults.compact_now();
    faults.clear();

    // The relist brings both, in the order the informer's queue delivers them; the delete it
    // could only infer is a tombstone.
    let mut after = [next().await, next().await];
    after.sort();
    let [added, deleted] = after;
    assert!(added.starts_with("ADDED    ns/d\trv="), "{added}");
    assert!(!added.contains("tombstone"), "{added}");
    assert!(deleted.starts_with("DELETED  ns/b\trv="), "{deleted}");
    assert!(
        deleted.contains("\t(tombstone: deleted while the watch was down)"),
        "{deleted}"
    );
    let status = tokio::task::spawn_blocking(move || wait_bounded(&mut child.0))
        .await
        .unwrap();
    assert!(status.success());
}

#[test]
fn the_readme_says_how_to_install_which_rust_and_which_namespace() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let rust_version = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .expect("the workspace's rust-version")
        .trim_matches('"');
    assert!(
        readme.contains("cargo install --path crates/kinformer-cli"),
        "no install step"
    );
    assert!(
        readme.contains(&format!("Rust {rust_version} or newer")),
        "the README does not give the minimum Rust, {rust_version}"
    );
    assert!(
        readme.contains("namespace of the kubeconfig's context") && readme.contains("`-A`"),
        "the README does not say which namespace get lists"
    );
}
