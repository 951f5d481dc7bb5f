//! Each example runs against the in-process simulated cluster, bounded in time, so none rots.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The example binary `cargo test` built beside this test.
fn example(name: &str) -> PathBuf {
    let deps = std::env::current_exe().unwrap();
    let dir = deps.parent().unwrap().parent().unwrap().join("examples");
    dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

/// Runs an example for `seconds` with no kubeconfig anywhere; kills it if it outlives a minute.
fn run(name: &str, seconds: u64) -> Output {
    run_with(name, seconds, &[])
}

/// Runs an example that ends by itself, with `args`.
fn run_with_args(name: &str, args: &[&str]) -> Output {
    run_with(name, 1, args)
}

fn run_with(name: &str, seconds: u64, args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(example(name))
        .args(args)
        .env("HOME", home.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("KINFORMER_EXAMPLE_SECONDS", seconds.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("example {name} ({}): {e}", example(name).display()));
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("example {name} did not stop");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "example {name} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[test]
fn pod_watcher_prints_every_change_in_client_gos_words() {
    let output = run("pod_watcher", 3);
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("simulated cluster"), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let added = lines
        .iter()
        .filter(|l| l.starts_with("Pod Added: "))
        .count();
    assert!(added >= 50, "the 50 pods of the first list: {added}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("Pod Updated: ") || l.starts_with("Pod Deleted: ")),
        "churn reached the handler"
    );
    for line in &lines {
        let (what, key) = line.split_once(": ").unwrap();
        assert!(
            ["Pod Added", "Pod Updated", "Pod Deleted"].contains(&what),
            "{line}"
        );
        assert_eq!(key.split('/').count(), 2, "{line}");
    }
}

fn stdout_lines(output: &Output) -> Vec<String> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn lister_index_counts_pods_per_node_from_a_custom_index() {
    let output = run("lister_index", 0);
    let lines = stdout_lines(&output);
    let mut total = 0;
    for line in &lines {
        let (node, count) = line.split_once(": ").unwrap();
        assert!(!node.is_empty(), "{line}");
        total += count
            .strip_suffix(" pods")
            .unwrap()
            .parse::<usize>()
            .unwrap();
    }
    assert!(lines.iter().any(|l| l.starts_with("unscheduled: ")));
    assert!(lines.len() >= 2, "at least one node: {lines:?}");
    assert!(total >= 50, "every pod counted once: {total}");
}

#[test]
fn dynamic_crd_watches_a_custom_resource_with_no_rust_type() {
    let lines = stdout_lines(&run("dynamic_crd", 2));
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("Widget Added: default/widget-") && l.contains("(size ")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("Widget Deleted: ")),
        "{lines:?}"
    );
}

#[test]
fn bespoke_pipeline_runs_with_its_own_source_queue_and_cache() {
    let output = run("bespoke_pipeline", 1);
    let lines = stdout_lines(&output);
    assert!(lines.iter().any(|l| l.starts_with("Pod Added: ")));
    assert!(
        lines.iter().all(|l| !l.contains(" kube-system/")),
        "its source leaves kube-system out"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cached namespaces:") && !stderr.contains("kube-system"),
        "{stderr}"
    );
}

#[test]
fn controller_reconciles_each_key_from_the_lister() {
    let lines = stdout_lines(&run("controller", 3));
    let reconciled = lines
        .iter()
        .filter(|l| l.starts_with("reconciled "))
        .count();
    assert!(
        reconciled >= 50,
        "every pod of the first list, then changes: {reconciled}"
    );
    for line in &lines {
        let rest = line.strip_prefix("reconciled ").unwrap();
        let (key, outcome) = rest.split_once(": ").unwrap();
        assert_eq!(key.split('/').count(), 2, "{line}");
        assert!(!outcome.is_empty(), "{line}");
    }
}

/// Runs an example against a kubeconfig whose cluster refuses connections, with a short sync
/// timeout; returns its exit status and stderr.
fn run_against_a_refused_port(name: &str, rust_log: Option<&str>) -> (bool, String) {
    let home = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    std::fs::create_dir_all(home.path().join(".kube")).unwrap();
    std::fs::write(
        home.path().join(".kube/config"),
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"http://127.0.0.1:{port}\"}}\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    let mut command = Command::new(example(name));
    command
        .env("HOME", home.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("RUST_LOG")
        .env("KINFORMER_EXAMPLE_SYNC_SECONDS", "2")
        .env("KINFORMER_EXAMPLE_SECONDS", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(level) = rust_log {
        command.env("RUST_LOG", level);
    }
    let mut child = command.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("example {name} did not give up");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn an_example_that_cannot_reach_its_cluster_says_why_and_stops() {
    let (ok, stderr) = run_against_a_refused_port("pod_watcher", None);
    assert!(!ok, "{stderr}");
    assert!(
        stderr.contains("1 informer(s) not synced after 2.0 s; pods: "),
        "{stderr}"
    );
    assert!(stderr.contains("last error:"), "{stderr}");
    // The default level shows the reflector's retried failure.
    assert!(stderr.contains("WARN"), "{stderr}");
    assert!(stderr.contains("retrying"), "{stderr}");
    assert!(!stderr.contains("DEBUG"), "{stderr}");
    // RUST_LOG is honoured.
    let (_, verbose) = run_against_a_refused_port("pod_watcher", Some("debug"));
    assert!(verbose.contains("DEBUG"), "{verbose}");
}

#[test]
fn sharded_group_splits_the_pods_through_leases_and_hands_over_when_a_replica_leaves() {
    let output = run_with_args("sharded_group", &["--pods", "400"]);
    let lines = stdout_lines(&output);
    // Both ways of filtering end with two replicas holding half the space each, and the
    // example itself checks that their caches partition the server's pods.
    for how in ["server-side", "client-side"] {
        let holds: Vec<&String> = lines
            .iter()
            .filter(|l| l.starts_with(&format!("{how}: pods-")))
            .collect();
        assert_eq!(holds.len(), 2, "{lines:#?}");
        assert!(
            holds
                .iter()
                .all(|l| l.contains("holds 50.0% of the hash space")),
            "{holds:#?}"
        );
    }
    // The load table: a server-side replica receives about a third of what a client-side one does.
    let sync_mib = |how: &str| -> Vec<f64> {
        lines
            .iter()
            .filter(|l| l.starts_with(how) && l.contains("replica-"))
            .map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap())
            .collect()
    };
    let (client, server) = (sync_mib("client-side "), sync_mib("server-side "));
    assert_eq!((client.len(), server.len()), (3, 3), "{lines:#?}");
    for (c, s) in client.iter().zip(&server) {
        assert!(
            s < &(c * 0.6),
            "server-side {s} MiB against client-side {c} MiB"
        );
    }
}
