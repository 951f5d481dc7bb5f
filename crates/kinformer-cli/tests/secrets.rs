//! What kinformer reveals and whom it trusts, end to end.
//!
//! The secret scan: the `kinformer` binary (`RUST_LOG=trace`) and an in-process informer (every
//! tracing event at TRACE, and every panic message, captured) run against the simulated server
//! over TLS with each kind of credential (token, basic, client certificate, token file, exec
//! plugin with a token, exec plugin with a client certificate), each holding distinctive secrets; with credentials the server refuses (401); and with
//! broken kubeconfigs and credential sources. Everything they print, log or panic with, and the
//! `Debug` and `Display` of every config, client and error, is scanned for each secret and its
//! base64 forms. Every run of the binary has `TMPDIR` pointing at an empty folder that must stay
//! empty: no client key (or anything else) is written to disk.
//!
//! Trust: a CA in the kubeconfig is the only one trusted, even when the system store (here
//! `SSL_CERT_FILE`) vouches for the server. The embedded simulated server and `kinformer sim`
//! listen on 127.0.0.1 only, and the embedded one has no admin surface.

mod support;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use k8s_openapi::api::core::v1::Pod;
use kinformer::Informer;
use kinformer::prelude::HandlerFns;
use kinformer_client::{Api, Client, Config, Kubeconfig, KubeconfigOptions};
use kinformer_core::ListParams;
use kinformer_core::list_watch::ListWatch as _;
use kinformer_sim::{Auth, SimConfig, SimServer};
use support::{BOUND, KillOnDrop, Lines, bare, run};

// ---------------------------------------------------------------------------------------------
// Capturing everything the process logs or panics with.

/// Every tracing event of this test process (TRACE, all targets, `log` records included) and
/// every panic message.
fn captured() -> &'static Mutex<Vec<u8>> {
    static CAPTURED: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();
    static INSTALLED: OnceLock<()> = OnceLock::new();
    let buffer = CAPTURED.get_or_init(|| Mutex::new(Vec::new()));
    INSTALLED.get_or_init(|| {
        use tracing_subscriber::util::SubscriberInitExt as _;
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("trace"))
            .with_ansi(false)
            .with_writer(|| Capture)
            .finish()
            .try_init()
            .expect("the only subscriber of this test binary");
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let _ = writeln!(Capture, "panic: {info}");
            default_hook(info);
        }));
    });
    buffer
}

/// A writer into [`captured`].
struct Capture;

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        captured()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn captured_text() -> String {
    String::from_utf8_lossy(&captured().lock().unwrap_or_else(|e| e.into_inner())).into_owned()
}

/// Waits until the captured log holds `needle` at least `times` times.
async fn wait_for_log(needle: &str, times: usize) {
    let deadline = Instant::now() + BOUND;
    while captured_text().matches(needle).count() < times {
        assert!(
            Instant::now() < deadline,
            "{needle:?} not logged {times} times within {BOUND:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Secrets and the scan.

/// A secret as it might leak: itself and its base64 forms.
fn forms(secret: &str) -> Vec<String> {
    let mut forms = vec![secret.to_owned()];
    for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
        forms.push(engine.encode(secret));
    }
    forms.sort();
    forms.dedup();
    forms
}

/// Fails if `text` (what `what` printed or logged) holds any form of any secret.
fn assert_no_secret(what: &str, text: &str, secrets: &[String]) {
    for secret in secrets {
        for form in forms(secret) {
            if let Some(at) = text.find(&form) {
                let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
                let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
                panic!(
                    "{what}: secret {secret:?} appears (as {form:?}) in:\n{}",
                    &text[start..end]
                );
            }
        }
    }
}

#[test]
fn the_scan_finds_a_secret_in_every_form() {
    let secret = "scan-S3cr3t?>~".to_owned();
    let secrets = [secret.clone()];
    assert_no_secret("clean", "nothing to see", &secrets);
    let encoded = [
        STANDARD.encode(&secret),
        STANDARD_NO_PAD.encode(&secret),
        URL_SAFE_NO_PAD.encode(&secret),
    ];
    for text in [
        secret.clone(),
        format!("a\nAuthorization: Basic {}\nb", encoded[0]),
    ]
    .into_iter()
    .chain(encoded.iter().cloned())
    {
        let found = std::panic::catch_unwind(|| assert_no_secret("leaky", &text, &secrets));
        assert!(found.is_err(), "not found in {text:?}");
    }
}

/// The base64 body lines of a PEM private key, each a secret in itself.
fn key_secrets(key_pem: &str) -> Vec<String> {
    let body: Vec<&str> = key_pem
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() >= 16)
        .collect();
    let mut secrets: Vec<String> = body.iter().map(|l| (*l).to_owned()).collect();
    secrets.push(body.concat());
    secrets.push(key_pem.to_owned());
    secrets
}

// ---------------------------------------------------------------------------------------------
// Scenarios.

/// The kinds of credential a kubeconfig can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Token,
    Basic,
    ClientCert,
    TokenFile,
    Exec,
    /// An exec plugin that hands out a client certificate and key.
    ExecClientCert,
}

const KINDS: [Kind; 6] = [
    Kind::Token,
    Kind::Basic,
    Kind::ClientCert,
    Kind::TokenFile,
    Kind::Exec,
    Kind::ExecClientCert,
];

/// A server over TLS and a kubeconfig for it, with the secrets the kubeconfig holds.
struct Scenario {
    name: String,
    /// Kept alive for as long as the scenario runs.
    _sim: SimServer,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    secrets: Vec<String>,
}

/// Writes an executable shell script.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A kubeconfig for `sim` (its URL and CA) with `user` as the user's fields, indented.
fn kubeconfig_yaml(sim: &SimServer, user: &str) -> String {
    let user: String = user.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters:\n- name: s\n  cluster:\n    server: {}\n    certificate-authority-data: {}\n\
         contexts:\n- name: c\n  context: {{cluster: s, user: u}}\n\
         users:\n- name: u\n  user:\n{user}",
        sim.url(),
        STANDARD.encode(sim.ca_pem().expect("TLS mode")),
    )
}

impl Scenario {
    /// `kind` of credential; when `accepted` is false the server wants another one (401).
    async fn new(kind: Kind, accepted: bool) -> Self {
        let tag = format!("{kind:?}").to_lowercase();
        let sim = SimServer::start(SimConfig {
            tls: true,
            ..SimConfig::default()
        })
        .await
        .unwrap();
        sim.store().seed_pods(3, 5);
        let dir = tempfile::tempdir().unwrap();
        let token = format!("{tag}-token-S3cr3t-0b1d4e");
        let other = Auth::BearerToken("the-server-wants-another-token".into());
        let (user, secrets, auth) = match kind {
            Kind::Token => (
                format!("token: {token}"),
                vec![token.clone()],
                Auth::BearerToken(token),
            ),
            Kind::Basic => {
                let password = "basic-password-S3cr3t-77aa".to_owned();
                (
                    format!("username: ann\npassword: {password}"),
                    vec![password.clone(), format!("ann:{password}")],
                    Auth::Basic {
                        username: "ann".into(),
                        password,
                    },
                )
            }
            Kind::ClientCert => {
                let (cert, key) = sim.issue_client_cert("secret-scan");
                (
                    format!(
                        "client-certificate-data: {}\nclient-key-data: {}",
                        STANDARD.encode(&cert),
                        STANDARD.encode(&key)
                    ),
                    key_secrets(&key),
                    Auth::ClientCert,
                )
            }
            Kind::TokenFile => {
                let path = dir.path().join("token");
                std::fs::write(&path, format!("{token}\n")).unwrap();
                (
                    format!("tokenFile: {}", path.display()),
                    vec![token.clone()],
                    Auth::BearerToken(token),
                )
            }
            Kind::Exec => {
                let arg = "exec-arg-S3cr3t-19f0".to_owned();
                let env = "exec-env-S3cr3t-5c3a".to_owned();
                let plugin = script(
                    dir.path(),
                    "cred.sh",
                    &format!(
                        "echo '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\
                         \"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{token}\"}}}}'\n"
                    ),
                );
                (
                    format!(
                        "exec:\n  apiVersion: client.authentication.k8s.io/v1\n  \
                         command: {}\n  args: [\"--secret={arg}\"]\n  \
                         env: [{{name: PLUGIN_KEY, value: {env}}}]\n  provideClusterInfo: true",
                        plugin.display()
                    ),
                    vec![token.clone(), arg, env],
                    Auth::BearerToken(token),
                )
            }
            Kind::ExecClientCert => {
                let (cert, key) = sim.issue_client_cert("secret-scan-exec");
                let credential = serde_json::json!({
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "kind": "ExecCredential",
                    "status": {"clientCertificateData": cert, "clientKeyData": key},
                });
                let output = dir.path().join("credential.json");
                std::fs::write(&output, credential.to_string()).unwrap();
                let plugin = script(
                    dir.path(),
                    "cred.sh",
                    &format!("cat '{}'\n", output.display()),
                );
                (
                    format!(
                        "exec:\n  apiVersion: client.authentication.k8s.io/v1\n  command: {}",
                        plugin.display()
                    ),
                    key_secrets(&key),
                    Auth::ClientCert,
                )
            }
        };
        // Refused: the server wants a token none of them has (a client certificate included).
        sim.set_auth(if accepted { auth } else { other });
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_yaml(&sim, &user)).unwrap();
        Self {
            name: format!("{tag}{}", if accepted { "" } else { " (refused)" }),
            _sim: sim,
            dir,
            kubeconfig,
            secrets,
        }
    }
}

/// Kubeconfigs and credential sources that are broken, each holding secrets; none gets as far as
/// a successful request. Returns (name, folder, kubeconfig, secrets).
fn broken(sim: &SimServer) -> Vec<(String, tempfile::TempDir, PathBuf, Vec<String>)> {
    let bad_key = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7bad+Key+S3cr3t+9d\n-----END PRIVATE KEY-----\n";
    let cases: Vec<(&str, String, Vec<String>)> = vec![
        (
            "YAML syntax error",
            "token: yaml-token-S3cr3t-a1b2\npassword: [yaml-password-S3cr3t-c3d4".into(),
            vec![
                "yaml-token-S3cr3t-a1b2".into(),
                "yaml-password-S3cr3t-c3d4".into(),
            ],
        ),
        (
            "token of the wrong type",
            "token: 918273645501827364".into(),
            vec!["918273645501827364".into()],
        ),
        (
            "password of the wrong type",
            "username: ann\npassword: {nested: map-password-S3cr3t-e5f6}".into(),
            vec!["map-password-S3cr3t-e5f6".into()],
        ),
        (
            "client key data not base64",
            "client-certificate-data: AAAA\nclient-key-data: \"key-data-S3cr3t-!!-0a9b\"".into(),
            vec!["key-data-S3cr3t-!!-0a9b".into()],
        ),
        (
            "client key not a key",
            format!(
                "client-certificate-data: {}\nclient-key-data: {}",
                STANDARD.encode(sim.ca_pem().unwrap()),
                STANDARD.encode(bad_key)
            ),
            key_secrets(bad_key),
        ),
        (
            "exec apiVersion unsupported",
            "exec:\n  apiVersion: client.authentication.k8s.io/v1alpha1\n  command: cred\n  \
             args: [\"--key=bad-exec-arg-S3cr3t-7e8f\"]\n  \
             env: [{name: K, value: bad-exec-env-S3cr3t-9a0b}]"
                .into(),
            vec![
                "bad-exec-arg-S3cr3t-7e8f".into(),
                "bad-exec-env-S3cr3t-9a0b".into(),
            ],
        ),
        (
            "auth-provider",
            "auth-provider:\n  name: oidc\n  config: {id-token: oidc-id-token-S3cr3t-1c2d, \
             refresh-token: oidc-refresh-S3cr3t-3e4f}"
                .into(),
            vec![
                "oidc-id-token-S3cr3t-1c2d".into(),
                "oidc-refresh-S3cr3t-3e4f".into(),
            ],
        ),
    ];
    let mut out = Vec::new();
    for (name, user, secrets) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, kubeconfig_yaml(sim, &user)).unwrap();
        out.push((name.to_owned(), dir, path, secrets));
    }
    // Credentials in URLs: a proxy's (a usual place for them), and a server's.
    let ca = STANDARD.encode(sim.ca_pem().unwrap());
    for (name, server, proxy, secret) in [
        (
            "proxy-url with credentials, unreachable",
            sim.url(),
            "http://proxy-user:proxy-pw-S3cr3t-8d9e@127.0.0.1:1",
            "proxy-pw-S3cr3t-8d9e",
        ),
        (
            "server URL with credentials, unreachable",
            "https://url-user:url-pw-S3cr3t-2f3a@127.0.0.1:1".to_owned(),
            "",
            "url-pw-S3cr3t-2f3a",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(
            &path,
            format!(
                "current-context: c\nclusters: [{{name: s, cluster: {{server: \"{server}\", \
                 certificate-authority-data: {ca}, proxy-url: \"{proxy}\"}}}}]\n\
                 contexts: [{{name: c, context: {{cluster: s}}}}]\n"
            ),
        )
        .unwrap();
        out.push((name.into(), dir, path, vec![secret.into()]));
    }
    // Sources that are read at request time.
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "file-token-S3cr3t\u{1}-5a6b\n").unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(
        &path,
        kubeconfig_yaml(sim, &format!("tokenFile: {}", token_file.display())),
    )
    .unwrap();
    out.push((
        "token file with a control character".into(),
        dir,
        path,
        vec![
            "file-token-S3cr3t\u{1}-5a6b".into(),
            "file-token-S3cr3t".into(),
        ],
    ));
    let dir = tempfile::tempdir().unwrap();
    let plugin = script(
        dir.path(),
        "cred.sh",
        "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\
         \"status\":\"garbage-exec-output-S3cr3t-7c8d\"}'\n",
    );
    let path = dir.path().join("kubeconfig");
    std::fs::write(
        &path,
        kubeconfig_yaml(
            sim,
            &format!(
                "exec:\n  apiVersion: client.authentication.k8s.io/v1\n  command: {}",
                plugin.display()
            ),
        ),
    )
    .unwrap();
    out.push((
        "exec plugin printing garbage".into(),
        dir,
        path,
        vec!["garbage-exec-output-S3cr3t-7c8d".into()],
    ));
    out
}

// ---------------------------------------------------------------------------------------------
// The binary.

/// Runs `kinformer` with `args` at `RUST_LOG=trace` and `TMPDIR` an empty folder; checks the
/// folder is still empty and nothing printed holds a secret. Returns (success, stdout, stderr).
fn run_scanned(home: &Path, args: &[&str], secrets: &[String], what: &str) -> (bool, String) {
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = bare(home);
    cmd.args(args)
        .env("RUST_LOG", "trace")
        .env("TMPDIR", tmp.path())
        .env("KINFORMER_NO_SIM", "1");
    let (status, out, err) = run(cmd);
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "{what}: files left in TMPDIR: {left:?}");
    assert_no_secret(&format!("{what}: stdout"), &out, secrets);
    assert_no_secret(&format!("{what}: stderr"), &err, secrets);
    (status.success(), format!("{out}\n{err}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_prints_and_logs_no_secret_and_writes_no_file() {
    for accepted in [true, false] {
        for kind in KINDS {
            let s = Scenario::new(kind, accepted).await;
            let (kubeconfig, secrets, name) =
                (s.kubeconfig.clone(), s.secrets.clone(), s.name.clone());
            let home = s.dir.path().to_owned();
            let output = tokio::task::spawn_blocking(move || {
                let path = kubeconfig.to_str().unwrap();
                let get = ["get", "pods", "-A", "--kubeconfig", path];
                let (ok, output) = run_scanned(&home, &get, &secrets, &format!("get, {name}"));
                assert_eq!(ok, accepted, "get, {name}: {output}");
                if accepted {
                    let watch = [
                        "watch",
                        "pods",
                        "-A",
                        "--max-events",
                        "2",
                        "--kubeconfig",
                        path,
                    ];
                    let (ok, w) = run_scanned(&home, &watch, &secrets, &format!("watch, {name}"));
                    assert!(ok, "watch, {name}: {w}");
                }
                output
            })
            .await
            .unwrap();
            // The trace really covered the request: TLS, HTTP and the client all logged.
            for target in ["rustls", "kinformer_client"] {
                assert!(
                    output.contains(target),
                    "{}: no {target} log:\n{output}",
                    s.name
                );
            }
            if !accepted {
                assert!(output.contains("401"), "{}: {output}", s.name);
            }
        }
    }
    let sim = SimServer::start(SimConfig {
        tls: true,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    for (name, dir, path, secrets) in broken(&sim) {
        let home = dir.path().to_owned();
        tokio::task::spawn_blocking(move || {
            let get = ["get", "pods", "--kubeconfig", path.to_str().unwrap()];
            let (ok, output) = run_scanned(&home, &get, &secrets, &name);
            assert!(!ok, "{name}: {output}");
            assert!(output.contains("kinformer: "), "{name}: {output}");
        })
        .await
        .unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// An informer in this process.

/// The `Debug` of the kubeconfig at `path`, or of the error reading it.
fn kubeconfig_debug(path: &Path) -> String {
    match Kubeconfig::read_from(path) {
        Ok(kc) => format!("{kc:?}\n"),
        Err(e) => format!("{e}\n{e:?}\n"),
    }
}

/// Runs an informer from `kubeconfig` until synced (or, when `accepted` is false, until the
/// reflector has logged a failure), with a handler that panics once; returns the
/// `Debug` and `Display` of everything it made along the way.
async fn run_informer(kubeconfig: &Path, accepted: bool) -> String {
    let mut seen = kubeconfig_debug(kubeconfig);
    let config = match Config::from_path(kubeconfig, &KubeconfigOptions::default()) {
        Ok(c) => c,
        Err(e) => return format!("{seen}{e}\n{e:?}"),
    };
    seen += &format!("{config:?}\n");
    let client = Client::new(config).unwrap();
    seen += &format!("{client:?}\n");
    let pods: Api<Pod> = Api::all(client);
    match pods.list(&ListParams::default()).await {
        Ok(_) => assert!(accepted, "the server refused nothing"),
        Err(e) => seen += &format!("{e}\n{e:?}\n"),
    }
    let panicked = Arc::new(AtomicBool::new(false));
    let once = Arc::clone(&panicked);
    let failures_before = captured_text().matches("list/watch failed").count();
    let informer = Informer::<Pod>::builder()
        .list_watch(pods)
        .handler(HandlerFns::new().on_add(move |pod: &Arc<Pod>, _| {
            if !once.swap(true, Ordering::SeqCst) {
                panic!("handler gives up on {:?}", pod.metadata.name);
            }
        }))
        .build()
        .unwrap();
    informer.start();
    if accepted {
        assert!(informer.wait_synced(Some(BOUND)).await);
        let deadline = Instant::now() + BOUND;
        while !panicked.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "the handler never ran");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    } else {
        wait_for_log("list/watch failed", failures_before + 1).await;
    }
    informer.shutdown().await;
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_logs_no_secret_at_trace() {
    captured();
    let mut all_secrets = Vec::new();
    let mut seen = String::new();
    for accepted in [true, false] {
        for kind in KINDS {
            let s = Scenario::new(kind, accepted).await;
            let text = run_informer(&s.kubeconfig, accepted).await;
            assert_no_secret(&s.name, &text, &s.secrets);
            all_secrets.extend(s.secrets.clone());
            seen += &text;
        }
    }
    let sim = SimServer::start(SimConfig {
        tls: true,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    for (name, _dir, path, secrets) in broken(&sim) {
        let config = Config::from_path(&path, &KubeconfigOptions::default());
        let text = kubeconfig_debug(&path)
            + &match config {
                Err(e) => format!("{e}\n{e:?}"),
                Ok(config) => {
                    let shown = format!("{config:?}");
                    let client = Client::new(config).unwrap();
                    let shown = format!("{shown}\n{client:?}");
                    let e = Api::<Pod>::all(client)
                        .list(&ListParams::default())
                        .await
                        .unwrap_err();
                    format!("{shown}\n{e}\n{e:?}")
                }
            };
        assert_no_secret(&name, &text, &secrets);
        all_secrets.extend(secrets);
        seen += &text;
    }
    let log = captured_text();
    // The capture really holds TRACE from the TLS and HTTP layers, and the handler's panic.
    for needle in ["TRACE", "rustls", "hyper", "kinformer_client", "panic: "] {
        assert!(log.contains(needle), "no {needle:?} in the capture");
    }
    assert_no_secret("the informer's log", &log, &all_secrets);
    assert_no_secret("Debug and Display", &seen, &all_secrets);
}

// ---------------------------------------------------------------------------------------------
// Trust.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_ca_is_the_only_one_trusted_even_over_the_system_store() {
    let tls = || {
        SimServer::start(SimConfig {
            tls: true,
            ..SimConfig::default()
        })
    };
    let (server, other) = (tls().await.unwrap(), tls().await.unwrap());
    server.store().seed_pods(2, 1);
    let dir = tempfile::tempdir().unwrap();
    // The "system store" vouches for the server's CA.
    let system = dir.path().join("system.pem");
    std::fs::write(&system, server.ca_pem().unwrap()).unwrap();
    let unrelated = dir.path().join("unrelated.pem");
    std::fs::write(&unrelated, other.ca_pem().unwrap()).unwrap();
    let write = |name: &str, cluster: String| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                "current-context: c\nclusters: [{{name: s, cluster: {{server: \"{}\"{cluster}}}}}]\n\
                 contexts: [{{name: c, context: {{cluster: s}}}}]\n",
                server.url()
            ),
        )
        .unwrap();
        path
    };
    let no_ca = write("no-ca", String::new());
    let pinned = write(
        "pinned",
        format!(
            ", certificate-authority-data: {}",
            STANDARD.encode(other.ca_pem().unwrap())
        ),
    );
    let home = dir.path().to_owned();
    tokio::task::spawn_blocking(move || {
        let get = |kubeconfig: &Path, system_store: &Path| {
            let mut cmd = bare(&home);
            cmd.args(["get", "pods", "-A", "--kubeconfig"])
                .arg(kubeconfig);
            cmd.env("SSL_CERT_FILE", system_store)
                .env_remove("SSL_CERT_DIR");
            let (status, out, err) = run(cmd);
            (status.success(), format!("{out}{err}"))
        };
        // Without a CA in the kubeconfig, the system store decides.
        let (ok, out) = get(&no_ca, &system);
        assert!(ok, "the system store trusts the server: {out}");
        let (ok, out) = get(&no_ca, &unrelated);
        assert!(!ok && out.contains("TLS"), "nothing vouches for it: {out}");
        // With one, only that CA counts: the system store's trust does not.
        let (ok, out) = get(&pinned, &system);
        assert!(!ok && out.contains("TLS"), "pinned to another CA: {out}");
    })
    .await
    .unwrap();
}

// ---------------------------------------------------------------------------------------------
// The simulated servers the binary starts.

/// `true` when something accepts TCP connections at `addr`.
fn accepts(addr: &str) -> bool {
    std::net::TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(5)).is_ok()
}

/// A plain HTTP/1.0 request to `host:port`: the status code.
fn status_of(authority: &str, method: &str, path: &str) -> u16 {
    use std::io::Read as _;
    let mut tcp = std::net::TcpStream::connect(authority).unwrap();
    tcp.set_read_timeout(Some(BOUND)).unwrap();
    write!(
        tcp,
        "{method} {path} HTTP/1.0\r\nHost: {authority}\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    tcp.read_to_string(&mut out).unwrap();
    out.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Checks that the server at `url` (`http://127.0.0.1:PORT`) listens on 127.0.0.1 only: not on
/// another loopback address, not on IPv6, not on every interface.
fn assert_loopback_only(url: &str) {
    let port = url
        .strip_prefix("http://127.0.0.1:")
        .unwrap_or_else(|| panic!("not on 127.0.0.1: {url}"));
    assert!(accepts(&format!("127.0.0.1:{port}")));
    for other in [format!("127.0.0.2:{port}"), format!("[::1]:{port}")] {
        assert!(!accepts(&other), "{url} also answers at {other}");
    }
}

/// The admin endpoint that arms a fault: 404 when the admin surface is off.
const ADMIN_FAULT: &str = "/kinformer-sim/admin/fail?kind=list&code=503&count=1";

#[cfg(target_os = "linux")]
#[test]
fn the_embedded_cluster_listens_on_loopback_only_and_has_no_admin_surface() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = bare(home.path());
    cmd.args([
        "watch",
        "pods",
        "--sim",
        "--sim-pods",
        "1",
        "--sim-churn",
        "0/s",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    let mut child = KillOnDrop(cmd.spawn().unwrap());
    let lines = Lines::new(child.0.stderr.take().unwrap());
    let line = lines.next();
    let url = line
        .split_once("embedded simulated cluster at ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{line}"))
        .to_owned();
    assert_loopback_only(&url);
    let authority = url.trim_start_matches("http://");
    assert_eq!(status_of(authority, "POST", ADMIN_FAULT), 404);
    assert_eq!(status_of(authority, "GET", "/api/v1/pods"), 200);
    drop(child);
}

#[cfg(target_os = "linux")]
#[test]
fn kinformer_sim_listens_on_loopback_only_with_or_without_admin() {
    for admin in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        let mut cmd = bare(dir.path());
        cmd.arg("sim")
            .args(if admin { &["--admin"][..] } else { &[] })
            .arg("--kubeconfig")
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = KillOnDrop(cmd.spawn().unwrap());
        let lines = Lines::new(child.0.stdout.take().unwrap());
        let first = lines.next();
        let url = first
            .strip_prefix("kinformer sim listening on ")
            .unwrap_or_else(|| panic!("{first}"))
            .to_owned();
        assert_loopback_only(&url);
        let expected = if admin { 200 } else { 404 };
        let authority = url.trim_start_matches("http://");
        assert_eq!(
            status_of(authority, "POST", ADMIN_FAULT),
            expected,
            "admin {admin}"
        );
        drop(child);
    }
}
