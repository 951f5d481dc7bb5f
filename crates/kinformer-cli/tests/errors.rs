//! Each class of user error gets one line on stderr and its own exit code (`kinformer --help`
//! lists them); SIGTERM stops a watch as Ctrl-C does; a server that accepts connections and
//! never answers is reported within the bound on the first answer.

mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use support::{KillOnDrop, bare, drain, kinformer, run, signal, wait_bounded};

/// A kubeconfig for a plain-HTTP server, with the given `user:` body.
fn kubeconfig(dir: &std::path::Path, server: &str, user: &str) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\nusers:\n- name: u\n  user: {user}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
    );
    std::fs::write(&path, yaml).unwrap();
    path
}

/// A port on 127.0.0.1 that nothing listens on any more.
fn refused_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_bad_selector_exits_2() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = bare(home.path());
    cmd.args(["get", "pods", "--sim", "-l", "a==b==c"]);
    let (status, out, err) = run(cmd);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.starts_with("error: invalid value 'a==b==c'"), "{err}");
    assert!(err.contains("invalid selector"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(
        dir.path(),
        &format!("http://127.0.0.1:{}", refused_port()),
        "{}",
    );
    // The fast path (pods) and discovery (widgets) alike.
    for resource in ["pods", "widgets"] {
        let (code, out, err) = kinformer(dir.path(), &path, &["get", resource]).await;
        assert_eq!(code, Some(3), "{resource}: {err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("kinformer: cannot connect to the API server"),
            "{err}"
        );
        assert!(
            err.contains("is the API server up, and is the kubeconfig's server address right?"),
            "{err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_exit_4() {
    let sim = kinformer_sim::SimServer::start(kinformer_sim::SimConfig {
        auth: kinformer_sim::Auth::BearerToken("right".into()),
        ..kinformer_sim::SimConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), &sim.url(), "\n    token: wrong");
    for resource in ["pods", "widgets"] {
        let (code, out, err) = kinformer(dir.path(), &path, &["get", resource]).await;
        assert_eq!(code, Some(4), "{resource}: {err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("kinformer: unauthorized (401)"), "{err}");
        assert!(
            err.contains("check the credentials of the kubeconfig's user"),
            "{err}"
        );
        assert!(!err.contains("wrong"), "the token is never printed: {err}");
    }
}

#[test]
fn a_broken_kubeconfig_exits_5() {
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), "http://127.0.0.1:1", "{}");
    let mut cmd = bare(dir.path());
    cmd.args(["watch", "pods", "--context", "nope", "--kubeconfig"])
        .arg(&path);
    let (status, out, err) = run(cmd);
    assert_eq!(status.code(), Some(5), "{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("kinformer: "), "{err}");
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn an_unknown_resource_exits_6_in_kubectls_words() {
    let home = tempfile::tempdir().unwrap();
    for (args, named) in [
        (&["get", "foo"][..], "foo"),
        (&["watch", "foo.example.com"][..], "foo"),
        (&["get", "pods,deployments.batch"][..], "deployments"),
    ] {
        let mut cmd = bare(home.path());
        cmd.args(args)
            .args(["--sim", "--sim-pods", "0", "--sim-churn", "0"]);
        let (status, out, err) = run(cmd);
        assert_eq!(status.code(), Some(6), "{args:?}: {err}");
        assert!(out.is_empty(), "{out}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 2, "the fallback notice, then the error: {err}");
        assert_eq!(
            lines[1],
            format!("error: the server doesn't have a resource type \"{named}\"")
        );
    }
}

#[test]
fn sigterm_stops_a_healthy_watch_with_exit_143_and_whole_lines() {
    support::signal_stops_a_healthy_watch("TERM", 143);
}

/// Serves 127.0.0.1: accepts every connection and never answers. Reports each connection.
async fn black_hole_reporting() -> (u16, tokio::sync::mpsc::UnboundedReceiver<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            held.push(conn);
            let _ = tx.send(());
        }
    });
    (port, rx)
}

/// A server that accepts every connection and never answers.
async fn black_hole() -> u16 {
    black_hole_reporting().await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_is_reported_within_the_first_answer_bound() {
    let port = black_hole().await;
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), "{}");
    // Both at once: the fast path's first list, and discovery for a custom resource.
    let started = Instant::now();
    let (pods, widgets) = tokio::join!(
        kinformer(dir.path(), &path, &["get", "pods"]),
        kinformer(dir.path(), &path, &["get", "widgets"]),
    );
    // The tool's bound is 10 s; the client's own (60 s on response headers) must not be what
    // ended them.
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "{:?}",
        started.elapsed()
    );
    for ((code, out, err), waited_for) in [
        (pods, "an answer to the first request"),
        (widgets, "the discovery documents"),
    ] {
        assert_eq!(code, Some(3), "{err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with(&format!(
                "kinformer: timed out after 10s waiting for {waited_for}"
            )),
            "{err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_while_watch_retries_a_silent_server_exits_3_naming_the_timeout() {
    let port = black_hole().await;
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), "{}");
    let mut cmd = bare(dir.path());
    cmd.args(["watch", "pods", "--request-timeout", "1s", "--kubeconfig"])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = KillOnDrop(cmd.spawn().unwrap());
    // The code of the failure being retried: 3, the server does not answer.
    support::ctrl_c_while_retrying(child, "timed out after 1s", 3, "timed out").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_discovery_that_is_never_answered() {
    let (port, mut connections) = black_hole_reporting().await;
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"), "{}");
    let mut cmd = bare(dir.path());
    // No bound of the tool's own: only Ctrl-C ends the wait in time.
    cmd.args(["get", "widgets", "--request-timeout", "0", "--kubeconfig"])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = KillOnDrop(cmd.spawn().unwrap());
    let out = drain(child.0.stdout.take().unwrap());
    let err = drain(child.0.stderr.take().unwrap());
    tokio::time::timeout(support::BOUND, connections.recv())
        .await
        .expect("discovery connects")
        .unwrap();
    signal(&child.0, "INT");
    let status = tokio::task::spawn_blocking(move || wait_bounded(&mut child.0))
        .await
        .unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(out.join().unwrap().is_empty());
    assert!(err.join().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_that_cannot_be_obtained_exit_4_before_any_request() {
    let (port, mut connections) = black_hole_reporting().await;
    let dir = tempfile::tempdir().unwrap();
    let server = format!("http://127.0.0.1:{port}");
    for (user, says) in [
        // A plugin that hangs: killed at its bound (`--request-timeout`, else 60 s).
        (
            "\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: sleep\n      args: [\"600\"]\n      interactiveMode: Never",
            "did not finish within 1s and was killed",
        ),
        // A token file that is not there.
        (
            "\n    tokenFile: no-such-token-file",
            "users[u].user.tokenFile: ",
        ),
    ] {
        let path = kubeconfig(dir.path(), &server, user);
        for verb in ["get", "watch"] {
            let (code, out, err) = kinformer(
                dir.path(),
                &path,
                &[verb, "pods", "--request-timeout", "1s"],
            )
            .await;
            assert_eq!(code, Some(4), "{verb}: {err}");
            assert!(out.is_empty(), "{out}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains(says), "{verb}: {err}");
            assert!(
                err.contains("(check the credentials of the kubeconfig's user)"),
                "{err}"
            );
        }
    }
    assert!(connections.try_recv().is_err(), "a request went out");
}

/// An unsigned JWT whose claims are `claims` (the simulated server compares bearer tokens, it
/// does not verify them).
fn jwt(claims: &serde_json::Value) -> String {
    use base64::Engine as _;
    let part = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    format!(
        "{}.{}.c2lnbmF0dXJl",
        part(br#"{"alg":"RS256","typ":"JWT"}"#),
        part(claims.to_string().as_bytes())
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oidc_id_token_is_sent_while_valid_and_an_expired_one_says_what_to_do() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let valid = jwt(&serde_json::json!({"iss": "https://idp.example", "exp": now + 3600}));
    let sim = kinformer_sim::SimServer::start(kinformer_sim::SimConfig {
        auth: kinformer_sim::Auth::BearerToken(valid.clone()),
        ..kinformer_sim::SimConfig::default()
    })
    .await
    .unwrap();
    sim.store().seed_pods(2, 1);
    let dir = tempfile::tempdir().unwrap();
    let oidc = |config: &str| {
        format!(
            "\n    auth-provider:\n      name: oidc\n      config:\n        client-id: kinformer\n        idp-issuer-url: https://idp.example\n{config}"
        )
    };
    // A valid id-token is the bearer token, as kubectl's oidc plugin sends it.
    let path = kubeconfig(
        dir.path(),
        &sim.url(),
        &oidc(&format!("        id-token: {valid}")),
    );
    let (code, out, err) = kinformer(dir.path(), &path, &["get", "pods", "-A", "-o", "name"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.lines().count(), 2, "{out}");

    // An expired one is never sent: the line says what to do, with and without a refresh token.
    let expired = jwt(&serde_json::json!({"exp": now - 60}));
    for (extra, todo) in [
        ("", "sign in again"),
        (
            "\n        refresh-token: r3fresh-S3cret",
            "run any kubectl command with this context",
        ),
    ] {
        let path = kubeconfig(
            dir.path(),
            &sim.url(),
            &oidc(&format!("        id-token: {expired}{extra}")),
        );
        let (code, out, err) = kinformer(dir.path(), &path, &["get", "pods"]).await;
        assert_eq!(code, Some(4), "{err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("the oidc id-token of user \"u\" expired at "),
            "{err}"
        );
        assert!(err.contains(todo), "{err}");
        assert!(!err.contains(&expired) && !err.contains("S3cret"), "{err}");
    }
    // A token that is not a JWT is a broken kubeconfig; a removed provider is named as such.
    for (user, code, says) in [
        (oidc("        id-token: not-a-jwt"), 5, "not a JWT"),
        (
            "\n    auth-provider:\n      name: gcp".to_owned(),
            5,
            "\"gcp\" auth provider was removed",
        ),
    ] {
        let path = kubeconfig(dir.path(), &sim.url(), &user);
        let (status, _, err) = kinformer(dir.path(), &path, &["get", "pods"]).await;
        assert_eq!(status, Some(code), "{err}");
        assert!(err.contains(says), "{err}");
    }
}
