//! The progress of `get`'s initial list (objects, the server's `remainingItemCount` as a bar and
//! the time left): drawn on stderr when stderr is a terminal (a pseudo-terminal made by
//! util-linux `script`), absent when it is not.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use kinformer_core::{ApiResource, Scope};
use kinformer_sim::{SimConfig, SimServer};
use serde_json::json;
use support::{BIN, bare, run};

/// Pods in the cluster: three pages of the reflector's 500.
const PODS: usize = 1200;

/// Fails with how to install `script` when it is missing.
fn require_script() {
    if let Err(e) = Command::new("script")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        panic!(
            "`script` (util-linux) must be on PATH for this test ({e}): install it, for \
             example with `apt-get install bsdutils` on Debian or Ubuntu"
        );
    }
}

/// A server with [`PODS`] pods whose list bodies arrive slowly: each chunk after a page's first
/// waits 300 ms, so a page (500 pods of a kilobyte: more than one of the server's chunks) takes
/// at least that, and the whole list well over the 300 ms after which the progress line
/// appears.
async fn slow_sim() -> (SimServer, tempfile::TempDir, std::path::PathBuf) {
    // A server without a watch cache, so that the first list comes in pages to count.
    let sim = SimServer::start(SimConfig {
        watch_cache: false,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let pods = ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced);
    // A kilobyte per pod: a page of 500 is several of the server's chunks.
    let padding = "x".repeat(1024);
    for i in 0..PODS {
        sim.store()
            .create(
                &pods,
                json!({"metadata": {"name": format!("web-{i:04}"), "namespace": "shop",
                                    "annotations": {"note": padding}},
                       "spec": {"containers": [{"name": "c", "image": "i"}]}}),
            )
            .unwrap();
    }
    sim.faults().slow_chunks(Some(Duration::from_millis(300)));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, sim.kubeconfig_yaml()).unwrap();
    (sim, dir, path)
}

/// Quotes a path for `sh -c`.
fn quoted(p: &std::path::Path) -> String {
    format!("'{}'", p.to_str().unwrap().replace('\'', r"'\''"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_progress_line_shows_on_a_terminal_and_nowhere_else() {
    require_script();
    let (_sim, dir, path) = slow_sim().await;

    // On a terminal: `script` runs the command on a pseudo-terminal and copies what the
    // terminal shows to its stdout; the command's own stdout goes to a file.
    let listed = dir.path().join("listed");
    let line = format!(
        "{} get pods -A -o name --kubeconfig {} > {}",
        quoted(std::path::Path::new(BIN)),
        quoted(&path),
        quoted(&listed)
    );
    let mut cmd = Command::new("script");
    cmd.args(["-q", "-e", "-c", &line, "/dev/null"])
        .env("HOME", dir.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    let (status, terminal, script_err) =
        tokio::task::spawn_blocking(move || run(cmd)).await.unwrap();
    assert!(status.success(), "{status:?} {terminal:?} {script_err}");
    assert_eq!(
        std::fs::read_to_string(&listed).unwrap().lines().count(),
        PODS,
        "the data went to stdout"
    );
    // Redrawn in place, with objects counted as they arrive against the server's
    // `remainingItemCount`, with a bar and the time left...
    let drawn = terminal.matches("\r\x1b[2Kkinformer: [").count();
    assert!(drawn >= 2, "{terminal:?}");
    assert!(
        terminal.contains("] listing pods: 500 of 1200 objects, about "),
        "{terminal:?}"
    );
    assert!(
        terminal.contains("] listing pods: 1000 of 1200 objects, about "),
        "{terminal:?}"
    );
    // ...never drawn empty...
    assert!(!terminal.contains("kinformer:  "), "{terminal:?}");
    // ...and erased at the end: nothing of it is left on the terminal.
    assert!(terminal.ends_with("\r\x1b[2K"), "{terminal:?}");

    // Not a terminal: nothing of it.
    let mut cmd = bare(dir.path());
    cmd.args(["get", "pods", "-A", "-o", "name", "--kubeconfig"])
        .arg(&path);
    let (status, out, err) = tokio::task::spawn_blocking(move || run(cmd)).await.unwrap();
    assert!(status.success(), "{err}");
    assert_eq!(out.lines().count(), PODS);
    assert!(err.is_empty(), "{err:?}");
}
