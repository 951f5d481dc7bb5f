//! `kinformer watch` against small hostile API servers written here, bound to 127.0.0.1: a server
//! that closes every watch at once, one that answers 410 to every watch, one whose watches deliver
//! one event and close, and servers whose answers retrying cannot fix. The servers count requests
//! over a bounded run; the tests assert counts, never timings.

mod support;

use std::process::Stdio;
use std::time::Duration;

use support::{BIN, BOUND, KillOnDrop, drain, signal, wait_bounded};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// How long the misbehaving servers are watched: long enough for a hot loop to send thousands of
/// requests, and for a backoff to send a handful.
const WINDOW: Duration = Duration::from_secs(3);

/// How a server answers.
#[derive(Debug, Clone, Copy)]
enum Script {
    /// Lists are fine; every watch is an empty 200, closed at once.
    EmptyWatch,
    /// Lists are fine; every watch is a 410 Gone.
    GoneWatch,
    /// Lists are fine; every watch delivers one event and closes.
    FlappingWatch,
    /// Every list answers this status code.
    ListStatus(u16),
    /// Requests are read and never answered.
    Silent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    List,
    Watch,
}

const LIST: &str = r#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"1"},"items":[]}"#;
const EVENT: &str = "{\"type\":\"ADDED\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"resourceVersion\":\"2\"}}}\n";

fn status(code: u16) -> String {
    format!(
        r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"scripted {code}","reason":"Scripted","code":{code}}}"#
    )
}

/// Serves `script` on 127.0.0.1 until the test ends; reports each request's kind.
async fn serve(script: Script) -> (u16, mpsc::UnboundedReceiver<Kind>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&head);
                let target = line.split_whitespace().nth(1).unwrap_or_default();
                let kind = if target.contains("watch=true") {
                    Kind::Watch
                } else {
                    Kind::List
                };
                let _ = tx.send(kind);
                if let Script::Silent = script {
                    // Hold the connection open, unanswered, until the test ends.
                    std::future::pending::<()>().await;
                }
                let (code, body) = match (script, kind) {
                    (Script::ListStatus(code), Kind::List) => (code, status(code)),
                    (_, Kind::List) => (200, LIST.to_owned()),
                    (Script::EmptyWatch, Kind::Watch) => (200, String::new()),
                    (Script::GoneWatch, Kind::Watch) => (410, status(410)),
                    (Script::FlappingWatch, Kind::Watch) => (200, EVENT.to_owned()),
                    (Script::ListStatus(_), Kind::Watch) | (Script::Silent, _) => {
                        (500, status(500))
                    }
                };
                let answer = format!(
                    "HTTP/1.1 {code} Scripted\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    (port, rx)
}

/// A kubeconfig for a plain-HTTP server, with the given `user:` body.
fn kubeconfig(dir: &std::path::Path, server: &str, user: &str) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\nusers:\n- name: u\n  user: {user}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
    );
    std::fs::write(&path, yaml).unwrap();
    path
}

/// `kinformer watch pods` against the kubeconfig, logging at `warn`.
fn watch_command(dir: &std::path::Path, kubeconfig: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(BIN);
    cmd.env("HOME", dir)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("RUST_LOG", "warn")
        .args(["watch", "pods", "--kubeconfig"])
        .arg(kubeconfig)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// Runs `kinformer watch` against `script` for [`WINDOW`] after its first request, then Ctrl-C.
/// Returns (lists, watches, exit code, stderr).
async fn count_for_a_while(script: Script) -> (usize, usize, Option<i32>, String) {
    let (port, mut requests) = serve(script).await;
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), "{}");
    let mut child = KillOnDrop(watch_command(dir.path(), &path).spawn().unwrap());
    let stderr = drain(child.0.stderr.take().unwrap());
    let first = tokio::time::timeout(BOUND, requests.recv())
        .await
        .expect("a first request")
        .unwrap();
    let (mut lists, mut watches) = (0, 0);
    let mut count = |k: Kind| match k {
        Kind::List => lists += 1,
        Kind::Watch => watches += 1,
    };
    count(first);
    let deadline = tokio::time::Instant::now() + WINDOW;
    while let Ok(Some(k)) = tokio::time::timeout_at(deadline, requests.recv()).await {
        count(k);
    }
    signal(&child.0, "INT");
    let status = tokio::task::spawn_blocking(move || wait_bounded(&mut child.0))
        .await
        .unwrap();
    (lists, watches, status.code(), stderr.join().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_closed_at_once_is_backed_off_then_relisted() {
    let (lists, watches, code, err) = count_for_a_while(Script::EmptyWatch).await;
    assert!(watches >= 2, "it gave up: {watches} watches\n{err}");
    assert!(watches < 10, "{watches} watches in {WINDOW:?}");
    // Each short watch is followed by a relist, as client-go does.
    assert!(lists >= watches, "{lists} lists, {watches} watches");
    // The cause is logged once per episode at warn, and Ctrl-C reports it: not exit 0.
    assert_eq!(
        err.matches("WARN").count(),
        1,
        "one warning per episode:\n{err}"
    );
    assert!(err.contains("with no event; listing again"), "{err}");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("interrupted while retrying"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_410_backs_off_between_relists() {
    let (lists, watches, code, err) = count_for_a_while(Script::GoneWatch).await;
    assert!(lists >= 2, "it gave up: {lists} lists\n{err}");
    assert!(lists < 10, "{lists} relists in {WINDOW:?}");
    assert!(watches < 10, "{watches} watches in {WINDOW:?}");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("410"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flapping_watch_does_not_reset_the_backoff() {
    let (_, watches, _, err) = count_for_a_while(Script::FlappingWatch).await;
    assert!(watches >= 2, "it gave up: {watches} watches\n{err}");
    assert!(watches < 10, "{watches} watches in {WINDOW:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_retrying_cannot_fix_end_the_command() {
    // Each with the exit code of its class: a malformed request (2), credentials (4), an
    // unknown resource (6).
    // The line says what to check where there is something to say.
    for (code, exit, says) in [
        (400, 2, "scripted 400"),
        (401, 4, "(check the credentials of the kubeconfig's user)"),
        (403, 4, "check its RBAC permissions)"),
        (404, 6, "scripted 404"),
    ] {
        let (port, mut requests) = serve(Script::ListStatus(code)).await;
        let dir = tempfile::tempdir().unwrap();
        let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), "{}");
        let cmd = watch_command(dir.path(), &path);
        let (status, _, err) = tokio::task::spawn_blocking(move || support::run(cmd))
            .await
            .unwrap();
        assert_eq!(status.code(), Some(exit), "{code}: {err}");
        assert!(err.contains(&code.to_string()), "{code}: {err}");
        assert!(err.contains(says), "{code}: {err}");
        assert_eq!(err.lines().count(), 1, "{code}: {err}");
        let mut lists = 0;
        while requests.try_recv().is_ok() {
            lists += 1;
        }
        // One request, and for a 401 perhaps one more after refreshing the credentials.
        assert!((1..=2).contains(&lists), "{code}: {lists} requests");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_credential_plugin_ends_the_command() {
    let (port, mut requests) = serve(Script::EmptyWatch).await;
    let dir = tempfile::tempdir().unwrap();
    let user = "\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: false\n      interactiveMode: Never";
    let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), user);
    let cmd = watch_command(dir.path(), &path);
    let (status, _, err) = tokio::task::spawn_blocking(move || support::run(cmd))
        .await
        .unwrap();
    // Exit 4: credentials.
    assert_eq!(status.code(), Some(4), "{err}");
    assert!(err.contains("credentials"), "{err}");
    assert!(requests.try_recv().is_err(), "a request went out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scripted_server_counts_lists_and_watches() {
    let (port, mut requests) = serve(Script::EmptyWatch).await;
    for target in ["/api/v1/pods", "/api/v1/pods?watch=true"] {
        let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        conn.write_all(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut answer = String::new();
        conn.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    assert_eq!(requests.recv().await, Some(Kind::List));
    assert_eq!(requests.recv().await, Some(Kind::Watch));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_retried_with_its_cause_and_ctrl_c_reports_it() {
    // A port nothing listens on any more: every connection is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), "{}");
    let child = KillOnDrop(watch_command(dir.path(), &path).spawn().unwrap());
    // The code of the failure being retried: 3, the server cannot be reached.
    support::ctrl_c_while_retrying(child, "cannot connect", 3, "cannot connect").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_timeout_bounds_a_list_that_is_never_answered() {
    let (port, mut requests) = serve(Script::Silent).await;
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), "{}");
    let mut cmd = std::process::Command::new(BIN);
    cmd.env("HOME", dir.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .args(["get", "pods", "--request-timeout", "1s", "--kubeconfig"])
        .arg(&path);
    let (status, out, err) = tokio::task::spawn_blocking(move || support::run(cmd))
        .await
        .unwrap();
    // Exit 3: no answer in time, the server cannot be reached.
    assert_eq!(status.code(), Some(3), "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("timed out") || err.contains("timeout"),
        "{err}"
    );
    assert_eq!(requests.try_recv().ok(), Some(Kind::List));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_a_first_request_that_is_never_answered() {
    let (port, mut requests) = serve(Script::Silent).await;
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), "{}");
    for verb in ["get", "watch"] {
        let mut cmd = std::process::Command::new(BIN);
        cmd.env("HOME", dir.path())
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("RUST_LOG", "warn")
            .args([verb, "pods", "--kubeconfig"])
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = KillOnDrop(cmd.spawn().unwrap());
        let out = drain(child.0.stdout.take().unwrap());
        let err = drain(child.0.stderr.take().unwrap());
        let first = tokio::time::timeout(BOUND, requests.recv())
            .await
            .expect("a first request")
            .unwrap();
        assert_eq!(first, Kind::List, "{verb}");
        signal(&child.0, "INT");
        let status = tokio::task::spawn_blocking(move || wait_bounded(&mut child.0))
            .await
            .unwrap();
        assert_eq!(status.code(), Some(130), "{verb}");
        assert!(out.join().unwrap().is_empty(), "{verb}");
        assert!(err.join().unwrap().is_empty(), "{verb}");
    }
}
