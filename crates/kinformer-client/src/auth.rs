//! Credentials at request time: fixed tokens, token files that rotate, basic auth, and exec
//! credential plugins with their cache.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use reqwest::header::HeaderValue;
use serde::Deserialize;
use tokio::sync::Mutex;

use crate::kubeconfig::{EXEC_V1, EXEC_V1BETA1, ExecConfig};
use crate::tls::ClientCert;
use crate::{AuthConfig, Error, SecretString};

/// A credential is refreshed this long before its stated expiry.
const EXPIRY_SKEW: Duration = Duration::from_secs(10);
/// The most of an exec plugin's stdout (and of its stderr) that is read.
const MAX_EXEC_OUTPUT: u64 = 1024 * 1024;

/// Where the `Authorization` header of each request comes from.
#[derive(Debug)]
pub(crate) enum Credentials {
    None,
    Static(HeaderValue),
    TokenFile(TokenFile),
    Exec(ExecPlugin),
    Oidc(OidcToken),
}

impl Credentials {
    pub(crate) fn new(
        auth: &AuthConfig,
        cert: Arc<ClientCert>,
        exec_timeout: Duration,
    ) -> Result<Self, Error> {
        Ok(match auth {
            AuthConfig::None => Self::None,
            AuthConfig::Token(t) => Self::Static(bearer(t.expose())?),
            AuthConfig::Basic { username, password } => {
                let raw = format!("{username}:{}", password.expose());
                let encoded = base64::engine::general_purpose::STANDARD.encode(raw);
                Self::Static(sensitive(&format!("Basic {encoded}"))?)
            }
            AuthConfig::TokenFile(path) => Self::TokenFile(TokenFile {
                path: path.clone(),
                cached: Mutex::new(None),
            }),
            AuthConfig::Oidc {
                user,
                id_token,
                expires,
                refresh_token,
            } => Self::Oidc(OidcToken {
                user: user.clone(),
                header: id_token.as_ref().map(|t| bearer(t.expose())).transpose()?,
                expires: *expires,
                refresh_token: *refresh_token,
            }),
            AuthConfig::Exec { exec, cluster } => Self::Exec(ExecPlugin {
                exec: exec.as_ref().clone(),
                cluster: cluster.clone(),
                cached: Mutex::new(None),
                cert,
                timeout: exec_timeout,
            }),
        })
    }

    /// The `Authorization` header for the next request, if any.
    pub(crate) async fn header(&self) -> Result<Option<HeaderValue>, Error> {
        match self {
            Self::None => Ok(None),
            Self::Static(h) => Ok(Some(h.clone())),
            Self::TokenFile(f) => f.header().await.map(Some),
            Self::Exec(e) => e.header().await,
            Self::Oidc(o) => o.header(SystemTime::now()).map(Some),
        }
    }

    /// Forgets cached credentials after a 401. Returns `true` when fetching them again may help.
    pub(crate) async fn invalidate(&self) -> bool {
        match self {
            Self::None | Self::Static(_) | Self::Oidc(_) => false,
            Self::TokenFile(f) => {
                *f.cached.lock().await = None;
                true
            }
            Self::Exec(e) => {
                *e.cached.lock().await = None;
                true
            }
        }
    }
}

fn sensitive(value: &str) -> Result<HeaderValue, Error> {
    let mut h = HeaderValue::from_str(value).map_err(|_| Error::Auth {
        message: "the credential holds characters not allowed in an HTTP header".into(),
    })?;
    h.set_sensitive(true);
    Ok(h)
}

fn bearer(token: &str) -> Result<HeaderValue, Error> {
    sensitive(&format!("Bearer {}", token.trim()))
}

/// A token file, read again whenever its modification time or length changes, or after a 401.
#[derive(Debug)]
pub(crate) struct TokenFile {
    path: PathBuf,
    cached: Mutex<Option<(Option<SystemTime>, u64, HeaderValue)>>,
}

impl TokenFile {
    async fn header(&self) -> Result<HeaderValue, Error> {
        let read_err = |e: std::io::Error| Error::Auth {
            message: format!("cannot read token file {}: {e}", self.path.display()),
        };
        let meta = tokio::fs::metadata(&self.path).await.map_err(read_err)?;
        let stamp = (meta.modified().ok(), meta.len());
        let mut cached = self.cached.lock().await;
        if let Some((mtime, len, h)) = cached.as_ref()
            && (*mtime, *len) == stamp
        {
            return Ok(h.clone());
        }
        let token = tokio::fs::read_to_string(&self.path)
            .await
            .map_err(read_err)?;
        if token.trim().is_empty() {
            return Err(Error::Auth {
                message: format!("token file {} is empty", self.path.display()),
            });
        }
        tracing::debug!(path = %self.path.display(), "token file read");
        let h = bearer(&token)?;
        *cached = Some((stamp.0, stamp.1, h.clone()));
        Ok(h)
    }
}

/// The `oidc` auth provider's configured id-token, sent while it is valid, as kubectl's oidc
/// plugin sends it. Refreshing it (with the `refresh-token`, at the identity provider) is left to
/// the tools that write it; without a valid id-token, a request fails saying what to do.
#[derive(Debug)]
pub(crate) struct OidcToken {
    user: String,
    header: Option<HeaderValue>,
    expires: Option<SystemTime>,
    refresh_token: bool,
}

impl OidcToken {
    fn header(&self, now: SystemTime) -> Result<HeaderValue, Error> {
        let problem = match (&self.header, self.expires) {
            // As kubectl: valid until its expiry, with no margin.
            (Some(h), Some(expires)) if now < expires => return Ok(h.clone()),
            (Some(_), Some(expires)) => format!("expired at {}", rfc3339(expires)),
            (Some(_), None) => {
                "carries no expiry (no exp claim), which kubectl counts as expired".to_owned()
            }
            (None, _) => "is not set".to_owned(),
        };
        let todo = if self.refresh_token {
            "run any kubectl command with this context (kubectl get --raw /version): kubectl \
             refreshes the id-token with the refresh-token and writes it into the kubeconfig"
        } else {
            "sign in again with the tool that wrote it so that it writes a fresh one, or use an \
             exec credential plugin instead (such as kubelogin, kubectl oidc-login)"
        };
        Err(Error::Auth {
            message: format!(
                "the oidc id-token of user {:?} {problem}; kinformer sends a configured id-token \
                 but does not refresh it: {todo}",
                self.user
            ),
        })
    }
}

/// A time as RFC 3339, to the second.
fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    k8s_openapi::jiff::Timestamp::from_second(secs)
        .map_or_else(|_| format!("{secs}s after the epoch"), |t| t.to_string())
}

/// An exec credential plugin, its cached credential, and the client certificate it may set.
#[derive(Debug)]
pub(crate) struct ExecPlugin {
    exec: ExecConfig,
    cluster: Option<serde_json::Value>,
    cached: Mutex<Option<ExecCredential>>,
    cert: Arc<ClientCert>,
    /// The bound on one run; a plugin still running then is killed.
    timeout: Duration,
}

#[derive(Debug, Clone)]
struct ExecCredential {
    header: Option<HeaderValue>,
    expires: Option<SystemTime>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecOutput {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    status: Option<ExecStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecStatus {
    #[serde(default)]
    token: Option<SecretString>,
    #[serde(default)]
    expiration_timestamp: Option<String>,
    #[serde(default)]
    client_certificate_data: Option<String>,
    #[serde(default)]
    client_key_data: Option<SecretString>,
}

impl ExecPlugin {
    async fn header(&self) -> Result<Option<HeaderValue>, Error> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = cached.as_ref()
            && c.expires
                .is_none_or(|t| SystemTime::now() + EXPIRY_SKEW < t)
        {
            return Ok(c.header.clone());
        }
        let cred = self.run().await?;
        let header = cred.header.clone();
        *cached = Some(cred);
        Ok(header)
    }

    async fn run(&self) -> Result<ExecCredential, Error> {
        let cmd = &self.exec.command;
        let fail = |message: String| Error::Auth {
            message: format!("exec plugin {cmd:?}: {message}"),
        };
        let mut spec = serde_json::json!({ "interactive": false });
        if let Some(cluster) = &self.cluster {
            spec["cluster"] = cluster.clone();
        }
        let info = serde_json::json!({
            "apiVersion": self.exec.api_version,
            "kind": "ExecCredential",
            "spec": spec,
        });
        let mut command = tokio::process::Command::new(cmd);
        command
            .args(&self.exec.args)
            .envs(self.exec.env.iter().map(|e| (&e.name, e.value.expose())))
            .env("KUBERNETES_EXEC_INFO", info.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        tracing::debug!(command = %cmd, "running exec credential plugin");
        let mut child = command.spawn().map_err(|e| {
            let hint = self.exec.install_hint.as_deref().unwrap_or_default();
            fail(format!("cannot run: {e}. {hint}").trim_end().to_owned())
        })?;
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let finished = tokio::time::timeout(self.timeout, async {
            let (stdout, stderr, status) =
                tokio::join!(read_capped(stdout), read_capped(stderr), child.wait());
            status.map(|status| (status, stdout, stderr))
        })
        .await;
        let output = match finished {
            Ok(result) => result.map_err(|e| fail(format!("cannot wait for it: {e}")))?,
            Err(_) => {
                // Kill it and reap it, so that no hung plugin outlives the request.
                if let Err(e) = child.kill().await {
                    tracing::warn!(command = %cmd, error = %e, "cannot kill the exec plugin");
                }
                tracing::debug!(command = %cmd, timeout = ?self.timeout, "exec plugin killed");
                return Err(Error::ExecTimeout {
                    command: cmd.clone(),
                    timeout: self.timeout,
                });
            }
        };
        let output = std::process::Output {
            status: output.0,
            stdout: output.1,
            stderr: output.2,
        };
        if !output.status.success() {
            // The plugin's own words to its user (client-go shows its stderr too), on one line.
            let stderr = String::from_utf8_lossy(&output.stderr);
            let stderr = stderr
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" | ");
            let stderr: String = stderr.chars().take(300).collect();
            return Err(fail(format!("exited with {}: {stderr}", output.status)));
        }
        let out: ExecOutput = serde_json::from_slice(&output.stdout)
            .map_err(|e| fail(format!("output is not an ExecCredential: {}", describe(&e))))?;
        if out.kind != "ExecCredential" || out.api_version != self.exec.api_version {
            return Err(fail(format!(
                "returned apiVersion {} and kind {}, expected {:?} and \"ExecCredential\"",
                shown(&out.api_version, &[EXEC_V1, EXEC_V1BETA1]),
                shown(&out.kind, &["ExecCredential"]),
                self.exec.api_version
            )));
        }
        let status = out
            .status
            .ok_or_else(|| fail("output has no status".into()))?;
        let expires = match &status.expiration_timestamp {
            Some(ts) if !ts.is_empty() => Some(parse_time(ts).ok_or_else(|| {
                fail(format!(
                    "expirationTimestamp {} is not an RFC 3339 time",
                    shown_time(ts)
                ))
            })?),
            _ => None,
        };
        let header = match status.token.as_ref().filter(|t| !t.expose().is_empty()) {
            Some(t) => Some(bearer(t.expose())?),
            None => None,
        };
        match (&status.client_certificate_data, &status.client_key_data) {
            (Some(cert), Some(key)) if !cert.is_empty() => {
                self.cert
                    .set_pem(cert.as_bytes(), key.expose().as_bytes())?;
            }
            (Some(_), None) | (None, Some(_)) => {
                return Err(fail(
                    "clientCertificateData and clientKeyData must come together".into(),
                ));
            }
            _ if header.is_none() => {
                return Err(fail(
                    "returned neither a token nor a client certificate".into(),
                ));
            }
            _ => {}
        }
        tracing::debug!(command = %cmd, ?expires, "exec credential obtained");
        Ok(ExecCredential { header, expires })
    }
}

/// Reads a plugin's pipe to its end, keeping at most [`MAX_EXEC_OUTPUT`] bytes and discarding
/// the rest (so that a chatty plugin never blocks on a full pipe).
async fn read_capped(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> Vec<u8> {
    use tokio::io::AsyncReadExt as _;
    let mut out = Vec::new();
    if let Some(pipe) = pipe {
        let mut kept = pipe.take(MAX_EXEC_OUTPUT);
        // A read error leaves what was read; the plugin's exit status tells the rest.
        if kept.read_to_end(&mut out).await.is_ok() {
            let _ = tokio::io::copy(&mut kept.into_inner(), &mut tokio::io::sink()).await;
        }
    }
    out
}

/// What is wrong with a plugin's stdout, without quoting it: serde's messages can echo a value
/// (`invalid type: string "..."`), and that value may be the credential itself.
fn describe(e: &serde_json::Error) -> String {
    let what = match e.classify() {
        serde_json::error::Category::Io => "cannot be read",
        serde_json::error::Category::Syntax => "is not JSON",
        serde_json::error::Category::Data => "does not have the shape of an ExecCredential",
        serde_json::error::Category::Eof => "ends before the JSON does",
    };
    format!("it {what} (line {}, column {})", e.line(), e.column())
}

/// A field of a plugin's output for an error message: quoted when it is one of the values this
/// client knows, else only its length, since a plugin that puts a credential in the wrong place
/// must not see it printed.
fn shown(s: &str, known: &[&str]) -> String {
    if s.is_empty() {
        "nothing".to_owned()
    } else if known.contains(&s) {
        format!("{s:?}")
    } else {
        format!("an unknown value of {} characters", s.chars().count())
    }
}

/// A timestamp that did not parse, quoted when it holds only the characters of a time.
fn shown_time(ts: &str) -> String {
    if ts.len() <= 40
        && ts
            .chars()
            .all(|c| c.is_ascii_digit() || "TZtz:.+- ".contains(c))
    {
        format!("{ts:?}")
    } else {
        shown(ts, &[])
    }
}

/// Parses an RFC 3339 timestamp.
fn parse_time(s: &str) -> Option<SystemTime> {
    let ts = s.parse::<k8s_openapi::jiff::Timestamp>().ok()?;
    let secs = u64::try_from(ts.as_second()).ok()?;
    let nanos = u32::try_from(ts.subsec_nanosecond()).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rfc3339() {
        let t = parse_time("2030-01-02T03:04:05Z").unwrap();
        let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
        assert_eq!(secs, 1_893_553_445);
        assert!(parse_time("2030-01-02T03:04:05.5+01:00").is_some());
        assert!(parse_time("tomorrow").is_none());
    }

    #[test]
    fn an_oidc_id_token_is_sent_until_it_expires_then_says_what_to_do() {
        let at = |secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        let token = |expires, refresh_token| OidcToken {
            user: "ann".into(),
            header: Some(bearer("idt").unwrap()),
            expires,
            refresh_token,
        };
        let h = token(Some(at(2_000)), false).header(at(1_999)).unwrap();
        assert_eq!(h.to_str().unwrap(), "Bearer idt");
        let e = token(Some(at(2_000)), false)
            .header(at(2_000))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("user \"ann\" expired at 1970-01-01T00:33:20Z"),
            "{e}"
        );
        assert!(
            e.contains("sign in again") && e.contains("exec credential plugin"),
            "{e}"
        );
        let e = token(Some(at(2_000)), true).header(at(3_000)).unwrap_err();
        assert!(matches!(e, Error::Auth { .. }));
        assert!(e.to_string().contains("refresh-token"), "{e}");
        let e = token(None, false).header(at(0)).unwrap_err().to_string();
        assert!(e.contains("no exp claim"), "{e}");
        let mut missing = token(None, false);
        missing.header = None;
        let e = missing.header(at(0)).unwrap_err().to_string();
        assert!(e.contains("is not set"), "{e}");
        assert!(!e.contains("idt"), "{e}");
    }

    #[test]
    fn header_values_are_sensitive_and_hidden() {
        let h = bearer("abc\n").unwrap();
        assert!(h.is_sensitive());
        assert_eq!(h.to_str().unwrap(), "Bearer abc");
        assert!(!format!("{h:?}").contains("abc"));
        assert!(matches!(bearer("a\u{1}b"), Err(Error::Auth { .. })));
    }
}
