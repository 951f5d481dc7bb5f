//! `kinformer sim` serving the real `kubectl`: seeded pods and a churn of writes. This test needs
//! `kubectl` on `PATH` and fails (it does not skip) without it; on Debian and Ubuntu it comes with
//! the `kubernetes-client` package, which CI installs.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;
use support::{KillOnDrop, Lines, bare, run};

/// Runs kubectl against `kubeconfig` to completion; panics unless it succeeds. Returns stdout.
fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> String {
    let mut cmd = Command::new("kubectl");
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .stdin(Stdio::null());
    let (status, out, err) = run(cmd);
    assert!(status.success(), "kubectl {args:?} failed: {err}\n{out}");
    out
}

/// Fails with how to install kubectl when it is missing.
fn require_kubectl() {
    if let Err(e) = Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        panic!(
            "kubectl must be on PATH for this test ({e}): install it, for example with \
             `apt-get install kubernetes-client` on Debian or Ubuntu, as .ci/run does"
        );
    }
}

#[test]
fn kinformer_sim_serves_seeded_pods_and_churn_to_kubectl() {
    require_kubectl();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let cache = dir.path().join("cache");
    let mut cmd = bare(dir.path());
    cmd.args([
        "sim",
        "--port",
        "0",
        "--pods",
        "30",
        "--churn",
        "50/s",
        "--kubeconfig",
    ])
    .arg(&kubeconfig)
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let mut sim = KillOnDrop(cmd.spawn().unwrap());
    let lines = Lines::new(sim.0.stdout.take().unwrap());
    let (listening, path, hint) = (lines.next(), lines.next(), lines.next());
    assert!(
        listening.contains("listening on http://127.0.0.1:"),
        "{listening}"
    );
    assert_eq!(path, format!("kubeconfig: {}", kubeconfig.display()));
    assert!(hint.starts_with("try: kubectl --kubeconfig "), "{hint}");

    let names = kubectl(&kubeconfig, &cache, &["get", "pods", "-A", "-o", "name"]);
    let count = names.lines().count();
    assert!((20..=40).contains(&count), "{count} pods:\n{names}");
    // The churn keeps writing: the list's resourceVersion moves on.
    let rv = |raw: &str| -> u64 {
        let v: Value = serde_json::from_str(raw).unwrap();
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    let raw = ["get", "--raw", "/api/v1/pods?limit=1"];
    let first = rv(&kubectl(&kubeconfig, &cache, &raw));
    let mut later = first;
    for _ in 0..100 {
        later = rv(&kubectl(&kubeconfig, &cache, &raw));
        if later > first {
            break;
        }
    }
    assert!(later > first, "no churn writes seen");
}
