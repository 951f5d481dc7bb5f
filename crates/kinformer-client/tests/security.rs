//! Whom the client trusts and how it treats credential plugins: server certificates verified by
//! default, `insecure-skip-tls-verify` only from the kubeconfig and warned about on every start,
//! and exec plugins run with their environment and `KUBERNETES_EXEC_INFO`, under a timeout, each
//! failure one error that names the plugin and never quotes what it printed on stdout.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kinformer_client::{Api, AuthConfig, Client, Config, Error, ExecConfig, ExecEnvVar};
use kinformer_client::{Kubeconfig, KubeconfigOptions};
use kinformer_core::ListParams;
use kinformer_sim::{Auth, SimConfig, SimServer};
use support::RichErrors as _;

/// The bound on anything these tests wait for.
const BOUND: Duration = Duration::from_secs(20);

async fn tls_sim(auth: Auth) -> SimServer {
    SimServer::start(SimConfig {
        tls: true,
        auth,
        ..SimConfig::default()
    })
    .await
    .expect("sim starts")
}

async fn list(config: Config) -> Result<(), Error> {
    let pods: Api<Pod> = Api::all(Client::new(config)?);
    tokio::time::timeout(BOUND, pods.list_rich(&ListParams::default()))
        .await
        .expect("the list ends within the bound")
        .map(drop)
}

fn from_yaml(yaml: &str) -> Config {
    let kc = Kubeconfig::from_yaml(yaml, None).unwrap();
    Config::from_kubeconfig(&kc, &KubeconfigOptions::default()).unwrap()
}

/// A kubeconfig for `url` with these extra cluster fields and no user.
fn kubeconfig(url: &str, cluster_fields: &str) -> String {
    format!(
        "current-context: c\n\
         clusters: [{{name: s, cluster: {{server: \"{url}\"{cluster_fields}}}}}]\n\
         contexts: [{{name: c, context: {{cluster: s}}}}]\n"
    )
}

/// Formatted log output, collected.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// A subscriber for this thread that writes every event at `level` and above here.
    fn subscriber(&self, level: &str) -> impl tracing::Subscriber + Send + Sync + use<> {
        let writer = self.clone();
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(level))
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish()
    }
}

#[tokio::test]
async fn a_self_signed_server_is_refused_unless_its_ca_is_configured() {
    let sim = tls_sim(Auth::None).await;
    // No CA and no insecure flag: the system's roots, which do not hold the sim's own CA.
    let bare = from_yaml(&kubeconfig(&sim.url(), ""));
    assert!(!bare.insecure_skip_tls_verify && bare.root_certs_pem.is_none());
    let e = list(bare).await.unwrap_err();
    assert!(matches!(e, Error::Tls { .. }) && !e.is_retryable(), "{e}");
    assert!(
        !matches!(list(Config::new(sim.url())).await, Ok(())),
        "Config::new verifies too"
    );
    // The same server, its CA configured: accepted.
    let ca = kinformer_sim_ca_data(&sim);
    list(from_yaml(&kubeconfig(
        &sim.url(),
        &format!(", certificate-authority-data: {ca}"),
    )))
    .await
    .unwrap();
}

fn kinformer_sim_ca_data(sim: &SimServer) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(sim.ca_pem().expect("TLS mode"))
}

#[tokio::test]
async fn insecure_skip_tls_verify_comes_only_from_the_kubeconfig_and_warns_on_every_start() {
    let sim = tls_sim(Auth::None).await;
    let captured = Captured::default();
    let _guard = tracing::subscriber::set_default(captured.subscriber("warn"));

    let insecure = from_yaml(&kubeconfig(&sim.url(), ", insecure-skip-tls-verify: true"));
    assert!(insecure.insecure_skip_tls_verify);
    for _ in 0..3 {
        list(insecure.clone()).await.unwrap();
    }
    let log = captured.text();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("insecure-skip-tls-verify"))
        .collect();
    assert_eq!(warnings.len(), 3, "one warning per client started:\n{log}");
    assert!(warnings[0].contains(&sim.url()), "{log}");

    // `false`, or absent: verified, refused, and nothing to warn about.
    captured.0.lock().unwrap().clear();
    for fields in [", insecure-skip-tls-verify: false", ""] {
        let verified = from_yaml(&kubeconfig(&sim.url(), fields));
        assert!(!verified.insecure_skip_tls_verify);
        let e = list(verified).await.unwrap_err();
        assert!(matches!(e, Error::Tls { .. }), "{e}");
    }
    assert!(!captured.text().contains("insecure"), "{}", captured.text());
}

#[tokio::test]
async fn a_configured_ca_is_the_only_one_trusted() {
    // Two servers, each with a CA of its own: the CA of one does not vouch for the other.
    let a = tls_sim(Auth::None).await;
    let b = tls_sim(Auth::None).await;
    let pinned_to_a = |url: String| {
        from_yaml(&kubeconfig(
            &url,
            &format!(
                ", certificate-authority-data: {}",
                kinformer_sim_ca_data(&a)
            ),
        ))
    };
    list(pinned_to_a(a.url())).await.unwrap();
    let e = list(pinned_to_a(b.url())).await.unwrap_err();
    assert!(matches!(e, Error::Tls { .. }), "{e}");
}

/// Writes an executable shell script.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Settings that authenticate to `sim` with the plugin `command` (v1), passing `STATE=dir`.
fn exec_config(sim: &SimServer, command: &Path, state: &Path, timeout: Duration) -> Config {
    let mut config = Config::new(sim.url());
    config.exec_timeout = timeout;
    config.auth = AuthConfig::Exec {
        exec: Box::new(ExecConfig {
            command: command.display().to_string(),
            api_version: "client.authentication.k8s.io/v1".into(),
            env: vec![
                ExecEnvVar {
                    name: "STATE".into(),
                    value: state.display().to_string().into(),
                },
                ExecEnvVar {
                    name: "PLUGIN_SECRET".into(),
                    value: "env-value-7c1e".into(),
                },
            ],
            ..ExecConfig::default()
        }),
        cluster: None,
    };
    config
}

/// How many times the plugin ran (each run appends a line to `$STATE/runs`).
fn runs(state: &Path) -> usize {
    std::fs::read_to_string(state.join("runs")).map_or(0, |s| s.lines().count())
}

const COUNT_RUN: &str = "echo run >> \"$STATE/runs\"\n";

#[tokio::test]
async fn exec_plugins_get_their_environment_and_the_exec_info() {
    let sim = SimServer::start(SimConfig {
        auth: Auth::BearerToken("plugin-token-51d0".into()),
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plugin = script(
        dir.path(),
        "cred.sh",
        &format!(
            "{COUNT_RUN}printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$STATE/info\"\n\
             printf '%s' \"$PLUGIN_SECRET\" > \"$STATE/env\"\n\
             printf '%s' \"${{PATH:+path-inherited}}\" > \"$STATE/path\"\n\
             echo '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\
             \"status\":{{\"token\":\"plugin-token-51d0\"}}}}'\n"
        ),
    );
    list(exec_config(&sim, &plugin, dir.path(), BOUND))
        .await
        .unwrap();
    assert_eq!(runs(dir.path()), 1);
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap();
    assert_eq!(read("env"), "env-value-7c1e");
    assert_eq!(
        read("path"),
        "path-inherited",
        "the parent's environment too"
    );
    let info: serde_json::Value = serde_json::from_str(&read("info")).unwrap();
    assert_eq!(
        info,
        serde_json::json!({
            "apiVersion": "client.authentication.k8s.io/v1",
            "kind": "ExecCredential",
            "spec": {"interactive": false},
        }),
        "without provideClusterInfo there is no spec.cluster"
    );
}

/// Runs one list with `plugin` and returns its error, after checking that it is one line naming
/// the plugin, that the plugin ran once, and that `hidden` is nowhere in the error.
async fn plugin_error(body: &str, timeout: Duration, hidden: &[&str]) -> Error {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plugin = script(dir.path(), "cred-plugin.sh", &format!("{COUNT_RUN}{body}"));
    let e = list(exec_config(&sim, &plugin, dir.path(), timeout))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains(&*plugin.to_string_lossy()), "{text}");
    assert_eq!(runs(dir.path()), 1, "{text}");
    for h in hidden {
        assert!(!text.contains(h), "{h} in {text}");
        assert!(!format!("{e:?}").contains(h), "{h} in {e:?}");
    }
    e
}

#[tokio::test]
async fn a_plugin_that_hangs_is_killed_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let started = Instant::now();
    let e = plugin_error(
        &format!("echo $$ > '{}'\nexec sleep 600\n", pid_file.display()),
        Duration::from_millis(300),
        &[],
    )
    .await;
    assert!(
        matches!(&e, Error::ExecTimeout { timeout, .. } if *timeout == Duration::from_millis(300)),
        "{e}"
    );
    assert!(!e.is_retryable(), "{e}");
    assert!(started.elapsed() < BOUND);
    // Killed and reaped: the process is gone, not left sleeping.
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(
        !Path::new("/proc").join(pid.trim()).exists(),
        "plugin {} still exists",
        pid.trim()
    );
}

#[tokio::test]
async fn a_plugin_that_exits_non_zero_is_one_error_with_its_message() {
    let e = plugin_error(
        "echo '{\"status\":{\"token\":\"stdout-token-9a1f\"}}'\n\
         echo 'login expired' >&2\necho 'run: login --again' >&2\nexit 3\n",
        BOUND,
        &["stdout-token-9a1f"],
    )
    .await;
    assert!(matches!(e, Error::Auth { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains("exit status: 3"), "{text}");
    assert!(
        text.contains("login expired | run: login --again"),
        "{text}"
    );
}

#[tokio::test]
async fn a_plugin_that_prints_garbage_is_one_error_that_does_not_quote_it() {
    let cases: &[(&str, &str)] = &[
        ("echo 'garbage-5e2a not json'", "is not JSON"),
        ("printf ''", "ends before the JSON does"),
        (
            "echo '{\"apiVersion\": \"client.authentication.k8s.io/v1\"'",
            "ends before",
        ),
        (
            "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":\"garbage-5e2a\"}'",
            "does not have the shape of an ExecCredential",
        ),
        (
            "echo '{\"apiVersion\":\"garbage-5e2a\",\"kind\":\"garbage-5e2a\",\"status\":{\"token\":\"t\"}}'",
            "unknown value of 12 characters",
        ),
        (
            "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\",\"expirationTimestamp\":\"garbage-5e2a\"}}'",
            "is not an RFC 3339 time",
        ),
        (
            "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{}}'",
            "neither a token nor a client certificate",
        ),
        (
            "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"clientKeyData\":\"garbage-5e2a\"}}'",
            "must come together",
        ),
    ];
    for (body, expected) in cases {
        let e = plugin_error(&format!("{body}\n"), BOUND, &["garbage-5e2a"]).await;
        assert!(matches!(e, Error::Auth { .. }), "{body}: {e}");
        assert!(e.to_string().contains(expected), "{body}: {e}");
    }
}
