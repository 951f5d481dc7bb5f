//! `kinformer watch` against small hostile API servers written here, bound to 127.0.0.1: a server
//! that closes every watch at once, one that answers 410 to every watch, one whose watches deliver
//! one event and close, and servers whose answers retrying cannot fix. The servers count requests
//! over a bounded run; the tests assert counts, never timings.

mod support;

use kinformer_test_support::read_request_head;
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
                let Some(head) = read_request_head(&mut conn).await else {
                    return;
                };
                let target = head.target();
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

/// One answer of a [`serve_with`] server: status, extra header lines (each ending in `\r\n`) and
/// body; `None` holds the connection open, unanswered (a watch that sends nothing).
type Answer = Option<(u16, String, String)>;

/// Serves `answer(n, target)` to the n-th request (counting from 0) on 127.0.0.1 until the test
/// ends; reports each request's target.
async fn serve_with(
    answer: impl Fn(usize, &str) -> Answer + Send + Sync + 'static,
) -> (u16, mpsc::UnboundedReceiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::unbounded_channel();
    let answer = std::sync::Arc::new(answer);
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let (tx, answer, served) = (tx.clone(), answer.clone(), served.clone());
            tokio::spawn(async move {
                let Some(head) = read_request_head(&mut conn).await else {
                    return;
                };
                let target = head.target().to_owned();
                let n = served.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ = tx.send(target.clone());
                let Some((code, headers, body)) = answer(n, &target) else {
                    std::future::pending::<()>().await;
                    return;
                };
                let reply = format!(
                    "HTTP/1.1 {code} Scripted\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(reply.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    (port, rx)
}

/// What a hostile server puts in names, messages and fields: a title change, a screen clear, a
/// colour, a cursor move, a carriage return, a one-byte CSI and a right-to-left override.
const HOSTILE: &str = "\u{1b}]0;owned\u{7}\u{1b}[2J\u{1b}[31m\u{1b}[1A\r\u{9b}6n\u{202e}";

/// A pod list of one pod whose every field a table shows carries [`HOSTILE`] text.
fn hostile_pod_list() -> String {
    let h = serde_json::Value::from(HOSTILE).to_string();
    let h = &h[1..h.len() - 1];
    format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"5"}},"items":[{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"web{h}","namespace":"shop{h}","resourceVersion":"5","creationTimestamp":"2026-01-01T00:00:00Z","labels":{{"app":"w{h}"}}}},"spec":{{"nodeName":"node{h}","containers":[{{"name":"a"}}]}},"status":{{"phase":"Running{h}","podIP":"10.0.0.1{h}"}}}}]}}"#
    )
}

/// A Status of `code` whose message carries [`HOSTILE`] text.
fn hostile_status(code: u16) -> String {
    serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("denied{HOSTILE}"), "reason": "Forbidden", "code": code,
    })
    .to_string()
}

/// Whether `text` holds a character that acts on a terminal (line ends and tabs aside).
fn acts_on_a_terminal(text: &str) -> bool {
    text.chars().any(|c| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    })
}

/// `kinformer ARGS --kubeconfig PATH`, logging at `warn`, run to its end off the async threads.
async fn kinformer_against(
    dir: &std::path::Path,
    kubeconfig: &std::path::Path,
    args: &[&str],
) -> (Option<i32>, String, String) {
    let mut cmd = std::process::Command::new(BIN);
    cmd.env("HOME", dir)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("RUST_LOG", "warn")
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdin(Stdio::null());
    let (status, out, err) = tokio::task::spawn_blocking(move || support::run(cmd))
        .await
        .unwrap();
    (status.code(), out, err)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_text_reaches_the_terminal_escaped_and_json_and_yaml_exact() {
    let (port, _requests) = serve_with(|_, target| {
        if target.contains("watch=true") {
            None
        } else {
            Some((200, String::new(), hostile_pod_list()))
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), "{}");
    for output in ["wide", "name"] {
        let (code, out, err) = kinformer_against(
            dir.path(),
            &path,
            &["get", "pods", "-A", "--show-labels", "-o", output],
        )
        .await;
        assert_eq!(code, Some(0), "{err}");
        assert!(out.contains("web\\x1b]0;owned\\x07"), "{output}: {out:?}");
        assert!(!acts_on_a_terminal(&out), "{output}: {out:?}");
        assert!(!acts_on_a_terminal(&err), "{output}: {err:?}");
    }
    // Machine output stays exact: the serializers escape what must be escaped.
    let name = format!("web{HOSTILE}");
    let (code, out, err) =
        kinformer_against(dir.path(), &path, &["get", "pods", "-A", "-o", "json"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(!acts_on_a_terminal(&out), "{out:?}");
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["items"][0]["metadata"]["name"], name.as_str());
    let (code, out, err) =
        kinformer_against(dir.path(), &path, &["get", "pods", "-A", "-o", "yaml"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
    let list: serde_json::Value = serde_yaml_ng::from_str(&out).unwrap();
    assert_eq!(list["items"][0]["metadata"]["name"], name.as_str());
    // `watch` prints the same names escaped.
    let (code, out, err) =
        kinformer_against(dir.path(), &path, &["watch", "pods", "--max-events", "1"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with("ADDED    shop\\x1b]0;owned\\x07"),
        "{out:?}"
    );
    assert!(!acts_on_a_terminal(&out), "{out:?}");
}

/// `get` lists the latest state in pages, as kubectl does: a list at `resourceVersion=0` is
/// served from the watch cache in one body whatever its limit (every object's JSON at once, past
/// the client's bound on a list body at 100k pods).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_lists_the_latest_state_in_pages() {
    let (port, mut requests) = serve_with(|_, target| {
        if target.contains("watch=true") {
            None
        } else {
            Some((200, String::new(), hostile_pod_list()))
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), "{}");
    let (code, _, err) =
        kinformer_against(dir.path(), &path, &["get", "pods", "-A", "-o", "name"]).await;
    assert_eq!(code, Some(0), "{err}");
    let mut lists = Vec::new();
    while let Ok(target) = requests.try_recv() {
        if !target.contains("watch=true") {
            lists.push(target);
        }
    }
    // The one-object request first, then the informer's list.
    assert!(lists.iter().any(|t| t.contains("limit=500")), "{lists:?}");
    assert!(
        lists.iter().all(|t| !t.contains("resourceVersion=")),
        "{lists:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_messages_in_errors_and_warnings_reach_the_terminal_escaped() {
    // A Status whose message moves the cursor and retitles the terminal: as `get`'s error line...
    let (port, _requests) =
        serve_with(|_, _| Some((403, String::new(), hostile_status(403)))).await;
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), "{}");
    let (code, _, err) = kinformer_against(dir.path(), &path, &["get", "pods"]).await;
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("denied\\x1b]0;owned\\x07"), "{err:?}");
    assert!(!acts_on_a_terminal(&err), "{err:?}");
    assert_eq!(err.lines().count(), 1, "{err:?}");
    // ... and as the warning of a failure `watch` retries (in a log field, too, at debug).
    let (port, mut requests) =
        serve_with(|_, _| Some((500, String::new(), hostile_status(500)))).await;
    let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), "{}");
    let mut cmd = watch_command(dir.path(), &path);
    cmd.env("RUST_LOG", "debug");
    let mut child = KillOnDrop(cmd.spawn().unwrap());
    let err = drain(child.0.stderr.take().unwrap());
    // The first failure, and the retry after it: both logged by then.
    for _ in 0..2 {
        tokio::time::timeout(BOUND, requests.recv())
            .await
            .expect("a request")
            .unwrap();
    }
    signal(&child.0, "INT");
    let status = tokio::task::spawn_blocking(move || wait_bounded(&mut child.0))
        .await
        .unwrap();
    let err = err.join().unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("WARN"), "{err}");
    assert!(err.contains("denied\\x1b]0;owned\\x07"), "{err:?}");
    assert!(!acts_on_a_terminal(&err), "{err:?}");
}

/// A page of a pod list with no items, continuing nowhere.
const EMPTY_PODS: &str =
    r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_waits_as_a_throttling_server_asks_a_bounded_number_of_times() {
    let throttled = |wait: u32| Some((429, format!("Retry-After: {wait}\r\n"), status(429)));
    // The first list (the probe) is throttled twice, the informer's list once: `get` waits as
    // asked each time and prints what it then gets.
    let (port, mut requests) = serve_with(move |n, target| match n {
        _ if target.contains("watch=true") => None,
        0 | 1 | 3 => throttled(1),
        _ => Some((200, String::new(), hostile_pod_list())),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), "{}");
    let (code, out, err) =
        kinformer_against(dir.path(), &path, &["get", "pods", "-A", "-o", "name"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("pod/web"), "{out}");
    assert!(
        err.contains("retrying in 1s as the server asks (1 of 10)"),
        "{err}"
    );
    let mut lists = 0;
    while let Ok(target) = requests.try_recv() {
        lists += usize::from(!target.contains("watch=true"));
    }
    assert_eq!(lists, 5, "{err}");

    // A server that never stops throttling: 10 waits, then its answer ends `get` (exit 1).
    let (port, mut requests) = serve_with(move |_, _| throttled(0)).await;
    let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), "{}");
    let (code, _, err) = kinformer_against(dir.path(), &path, &["get", "pods"]).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.lines().last().unwrap().contains("429"), "{err}");
    assert!(
        err.contains("(10 of 10)") && !err.contains("(11 of 10)"),
        "{err}"
    );
    let mut sent = 0;
    while requests.try_recv().is_ok() {
        sent += 1;
    }
    assert_eq!(sent, 11, "{err}");

    // One that asks for more than the longest wait is not waited for.
    let (port, _) = serve_with(move |_, _| throttled(3600)).await;
    let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), "{}");
    let (code, _, err) = kinformer_against(dir.path(), &path, &["get", "pods"]).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(!err.contains("retrying"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_that_ends_the_command_is_not_logged_as_retried() {
    // The probe passes; the informer's list is refused (watch: retrying cannot fix it) or fails
    // with a 500 (get: gives up on it, as kubectl does).
    for (verb, code, exit) in [("watch", 403, 4), ("get", 500, 1)] {
        let (port, _requests) = serve_with(move |n, target| match n {
            _ if target.contains("watch=true") => None,
            0 => Some((200, String::new(), EMPTY_PODS.to_owned())),
            _ => Some((code, String::new(), status(code))),
        })
        .await;
        let dir = tempfile::tempdir().unwrap();
        let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), "{}");
        let (status, _, err) = kinformer_against(dir.path(), &path, &[verb, "pods"]).await;
        assert_eq!(status, Some(exit), "{verb}: {err}");
        assert!(!err.contains("retrying"), "{verb}: {err}");
        assert_eq!(err.lines().count(), 1, "{verb}: {err}");
        assert!(err.contains(&format!("scripted {code}")), "{verb}: {err}");
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_into_a_pipe_that_closes_ends_quietly() {
    // `kinformer watch pods 2>&1 | head -1` against a server that keeps failing: the log goes on
    // (at debug, every retry), into a pipe whose reader has gone.
    let (port, _requests) = serve(Script::ListStatus(500)).await;
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), "{}");
    let (reader, writer) = std::io::pipe().unwrap();
    let mut cmd = watch_command(dir.path(), &path);
    cmd.env("RUST_LOG", "debug")
        .stdout(writer.try_clone().unwrap())
        .stderr(writer);
    let mut child = KillOnDrop(cmd.spawn().unwrap());
    // The command's copies only: the pipe closes when its reader does.
    drop(cmd);
    let line = tokio::task::spawn_blocking(move || {
        use std::io::BufRead as _;
        let mut line = String::new();
        let _ = std::io::BufReader::new(reader).read_line(&mut line);
        line
    })
    .await
    .unwrap();
    assert!(!line.is_empty());
    let status = tokio::task::spawn_blocking(move || wait_bounded(&mut child.0))
        .await
        .unwrap();
    // Ended by itself, quietly, as for a closed stdout: not a panic (101), not a hang.
    assert_eq!(status.code(), Some(0), "{status:?}");
}
