//! The kubeconfig file: its model, reading, and merging several files with kubectl's rules.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer};

use crate::secret::redact_url;
use crate::{Error, SecretString};

/// A kubeconfig, as kubectl reads it (`apiVersion: v1`, `kind: Config`).
///
/// Read one with [`Kubeconfig::read_from`], several with [`Kubeconfig::read_all`] (merged as
/// kubectl merges `KUBECONFIG`), or parse text with [`Kubeconfig::from_yaml`]. Relative file paths
/// inside it are resolved against the folder of the file they came from, as kubectl does.
///
/// ```
/// use kinformer_client::Kubeconfig;
///
/// let kc = Kubeconfig::from_yaml(r#"
/// apiVersion: v1
/// kind: Config
/// current-context: dev
/// clusters:
/// - name: c1
///   cluster: {server: "https://10.0.0.1:6443", certificate-authority: ca.crt}
/// users:
/// - name: alice
///   user: {token: "abc"}
/// contexts:
/// - name: dev
///   context: {cluster: c1, user: alice, namespace: shop}
/// "#, Some(std::path::Path::new("/etc/kube/config"))).unwrap();
/// assert_eq!(kc.current_context.as_deref(), Some("dev"));
/// let ca = kc.clusters[0].cluster.certificate_authority.as_ref().unwrap();
/// assert_eq!(ca, std::path::Path::new("/etc/kube/ca.crt"));
/// // Credentials never show in Debug output.
/// assert!(!format!("{kc:?}").contains("abc"));
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Kubeconfig {
    /// `current-context`.
    #[serde(default)]
    pub current_context: Option<String>,
    /// `clusters`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub clusters: Vec<NamedCluster>,
    /// `users`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub users: Vec<NamedAuthInfo>,
    /// `contexts`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub contexts: Vec<NamedContext>,
    /// The files this kubeconfig was read from, in order (empty for parsed text).
    #[serde(skip)]
    pub files: Vec<PathBuf>,
    /// The file that set `current-context`.
    #[serde(skip)]
    pub current_context_source: Option<PathBuf>,
}

/// One entry of `clusters`.
#[derive(Debug, Clone, Deserialize)]
pub struct NamedCluster {
    /// The cluster's name.
    pub name: String,
    /// Its settings.
    #[serde(default)]
    pub cluster: Cluster,
    /// The file this entry was read from (set by reading; `None` for parsed text).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// A cluster's connection settings. `Debug` hides credentials written into the server or proxy
/// URL.
#[derive(Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Cluster {
    /// `server`: the API server's URL.
    #[serde(default)]
    pub server: Option<String>,
    /// `certificate-authority`: a PEM file of the CA(s) to trust, instead of the system roots.
    #[serde(default)]
    pub certificate_authority: Option<PathBuf>,
    /// `certificate-authority-data`: the same, base64-encoded PEM inline.
    #[serde(default)]
    pub certificate_authority_data: Option<String>,
    /// `insecure-skip-tls-verify`: do not verify the server's certificate (logged as a warning).
    #[serde(default)]
    pub insecure_skip_tls_verify: bool,
    /// `tls-server-name`: the name to verify the server's certificate against (and send as SNI).
    #[serde(default)]
    pub tls_server_name: Option<String>,
    /// `proxy-url`: an HTTP(S) proxy for this cluster.
    #[serde(default)]
    pub proxy_url: Option<String>,
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redact = |u: &Option<String>| u.as_deref().map(redact_url);
        f.debug_struct("Cluster")
            .field("server", &redact(&self.server))
            .field("certificate_authority", &self.certificate_authority)
            .field(
                "certificate_authority_data",
                &self
                    .certificate_authority_data
                    .as_ref()
                    .map(|d| format!("<{} bytes>", d.len())),
            )
            .field("insecure_skip_tls_verify", &self.insecure_skip_tls_verify)
            .field("tls_server_name", &self.tls_server_name)
            .field("proxy_url", &redact(&self.proxy_url))
            .finish()
    }
}

/// One entry of `users`.
#[derive(Debug, Clone, Deserialize)]
pub struct NamedAuthInfo {
    /// The user's name.
    pub name: String,
    /// Its credentials.
    #[serde(default)]
    pub user: AuthInfo,
    /// The file this entry was read from (set by reading; `None` for parsed text).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// A user's credentials. `Debug` never shows a token, password or key.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct AuthInfo {
    /// `token`: a bearer token.
    #[serde(default)]
    pub token: Option<SecretString>,
    /// `tokenFile`: a file holding a bearer token, re-read when it changes.
    #[serde(default, rename = "tokenFile")]
    pub token_file: Option<PathBuf>,
    /// `client-certificate`: a PEM client certificate file.
    #[serde(default)]
    pub client_certificate: Option<PathBuf>,
    /// `client-certificate-data`: the same, base64-encoded inline.
    #[serde(default)]
    pub client_certificate_data: Option<String>,
    /// `client-key`: a PEM private key file (PKCS#1 RSA, SEC1 EC or PKCS#8).
    #[serde(default)]
    pub client_key: Option<PathBuf>,
    /// `client-key-data`: the same, base64-encoded inline.
    #[serde(default)]
    pub client_key_data: Option<SecretString>,
    /// `username` for basic authentication.
    #[serde(default)]
    pub username: Option<String>,
    /// `password` for basic authentication.
    #[serde(default)]
    pub password: Option<SecretString>,
    /// `exec`: a credential plugin.
    #[serde(default)]
    pub exec: Option<ExecConfig>,
    /// `auth-provider`: one of the in-tree auth providers. Only `oidc` is still supported, with a
    /// configured `id-token`, as kubectl's oidc plugin sends it; the others were removed from
    /// Kubernetes clients and are reported.
    #[serde(default)]
    pub auth_provider: Option<AuthProviderConfig>,
}

/// `users[].user.auth-provider`. `Debug` shows the setting names, never their values.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct AuthProviderConfig {
    /// The provider: `oidc`, or one that was removed (`gcp`, `azure`).
    #[serde(default)]
    pub name: String,
    /// Its settings (`id-token`, `refresh-token`, `idp-issuer-url`, `client-id`, ...).
    #[serde(default, deserialize_with = "null_as_empty_map")]
    pub config: std::collections::BTreeMap<String, SecretString>,
}

/// The exec credential API, version 1: an `exec.apiVersion`, and what a plugin answers with.
pub(crate) const EXEC_V1: &str = "client.authentication.k8s.io/v1";
/// The exec credential API, version 1beta1.
pub(crate) const EXEC_V1BETA1: &str = "client.authentication.k8s.io/v1beta1";

/// An exec credential plugin (`users[].user.exec`). `Debug` shows the command, not its
/// arguments (which may carry credentials) nor the environment values.
#[derive(Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecConfig {
    /// The program to run. A relative path with a `/` in it is resolved against the kubeconfig's
    /// folder; a bare name is looked up on `PATH`.
    #[serde(default)]
    pub command: String,
    /// Its arguments.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub args: Vec<String>,
    /// Extra environment variables.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub env: Vec<ExecEnvVar>,
    /// `client.authentication.k8s.io/v1` or `client.authentication.k8s.io/v1beta1`.
    #[serde(default)]
    pub api_version: String,
    /// `installHint`: shown when the command cannot be run.
    #[serde(default)]
    pub install_hint: Option<String>,
    /// `provideClusterInfo`: pass the cluster's settings in `KUBERNETES_EXEC_INFO`.
    #[serde(default)]
    pub provide_cluster_info: bool,
    /// `interactiveMode` (`Never`, `IfAvailable`, `Always`). This client never runs plugins
    /// interactively, so `Always` is refused.
    #[serde(default)]
    pub interactive_mode: Option<String>,
}

impl fmt::Debug for ExecConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecConfig")
            .field("command", &self.command)
            .field("args", &format_args!("<{} hidden>", self.args.len()))
            .field("env", &self.env.iter().map(|e| &e.name).collect::<Vec<_>>())
            .field("api_version", &self.api_version)
            .field("install_hint", &self.install_hint)
            .field("provide_cluster_info", &self.provide_cluster_info)
            .field("interactive_mode", &self.interactive_mode)
            .finish()
    }
}

/// One `exec.env` entry. The value may be a secret, so `Debug` hides it.
#[derive(Debug, Clone, Deserialize)]
pub struct ExecEnvVar {
    /// The variable's name.
    pub name: String,
    /// Its value.
    pub value: SecretString,
}

/// One entry of `contexts`.
#[derive(Debug, Clone, Deserialize)]
pub struct NamedContext {
    /// The context's name.
    pub name: String,
    /// What it points at.
    #[serde(default)]
    pub context: Context,
    /// The file this entry was read from (set by reading; `None` for parsed text).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// A context: a cluster, a user and a default namespace.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Context {
    /// The cluster's name.
    #[serde(default)]
    pub cluster: String,
    /// The user's name (may be empty: no credentials).
    #[serde(default)]
    pub user: String,
    /// The default namespace (`default` when empty).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// A map that may be written as `null`.
fn null_as_empty_map<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<std::collections::BTreeMap<String, SecretString>, D::Error> {
    Option::deserialize(d).map(Option::unwrap_or_default)
}

fn null_as_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

impl Kubeconfig {
    /// Parses kubeconfig text. `origin` is the file it came from: relative paths inside are
    /// resolved against its folder and entries remember it for error messages.
    pub fn from_yaml(text: &str, origin: Option<&Path>) -> Result<Self, Error> {
        let mut kc: Self = if text.trim().is_empty() {
            Self::default()
        } else {
            serde_yaml_ng::from_str(text).map_err(|e| yaml_error(origin, &e))?
        };
        if let Some(origin) = origin {
            kc.resolve_paths(origin);
        }
        Ok(kc)
    }

    /// Reads one kubeconfig file. A missing or unreadable file is an error naming it.
    pub fn read_from(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::config(Some(path), "kubeconfig", format!("cannot read: {e}")))?;
        Self::from_yaml(&text, Some(path))
    }

    /// Reads several kubeconfig files and merges them with kubectl's rules (see
    /// [`Kubeconfig::merge`]). Files that do not exist are skipped, as kubectl skips them in
    /// `KUBECONFIG`; a file that exists but does not parse is an error.
    pub fn read_all(paths: &[PathBuf]) -> Result<Self, Error> {
        let mut merged = Self::default();
        for path in paths {
            if !path.exists() {
                tracing::debug!(path = %path.display(), "kubeconfig file does not exist, skipped");
                continue;
            }
            merged = merged.merge(Self::read_from(path)?);
        }
        Ok(merged)
    }

    /// Merges `later` into `self`, as kubectl merges the files of `KUBECONFIG`: the first file to
    /// set a value wins. A cluster, user or context named in both is kept whole from `self`;
    /// `current-context` is kept from `self` unless `self` has none.
    ///
    /// ```
    /// use kinformer_client::Kubeconfig;
    ///
    /// let first = Kubeconfig::from_yaml("clusters: [{name: a, cluster: {server: 'https://one'}}]", None).unwrap();
    /// let second = Kubeconfig::from_yaml(
    ///     "current-context: x\nclusters: [{name: a, cluster: {server: 'https://two'}}, {name: b, cluster: {}}]",
    ///     None,
    /// ).unwrap();
    /// let merged = first.merge(second);
    /// assert_eq!(merged.current_context.as_deref(), Some("x"));
    /// assert_eq!(merged.clusters.len(), 2);
    /// assert_eq!(merged.clusters[0].cluster.server.as_deref(), Some("https://one"));
    /// ```
    pub fn merge(mut self, later: Self) -> Self {
        if self.current_context.as_deref().is_none_or(str::is_empty) {
            self.current_context = later.current_context;
            self.current_context_source = later.current_context_source;
        }
        self.files.extend(later.files);
        merge_named(&mut self.clusters, later.clusters, |c| &c.name);
        merge_named(&mut self.users, later.users, |u| &u.name);
        merge_named(&mut self.contexts, later.contexts, |c| &c.name);
        self
    }

    /// Resolves relative paths against the folder of `origin` and records it as every entry's
    /// source.
    fn resolve_paths(&mut self, origin: &Path) {
        let dir = origin.parent().unwrap_or(Path::new("."));
        self.files = vec![origin.to_path_buf()];
        if self
            .current_context
            .as_deref()
            .is_some_and(|c| !c.is_empty())
        {
            self.current_context_source = Some(origin.to_path_buf());
        }
        let resolve = |p: &mut Option<PathBuf>| {
            if let Some(path) = p
                && path.is_relative()
                && !path.as_os_str().is_empty()
            {
                *path = dir.join(&*path);
            }
        };
        for c in &mut self.clusters {
            c.source = Some(origin.to_path_buf());
            resolve(&mut c.cluster.certificate_authority);
        }
        for u in &mut self.users {
            u.source = Some(origin.to_path_buf());
            resolve(&mut u.user.token_file);
            resolve(&mut u.user.client_certificate);
            resolve(&mut u.user.client_key);
            if let Some(exec) = &mut u.user.exec {
                let cmd = Path::new(&exec.command);
                if cmd.is_relative() && exec.command.contains(std::path::MAIN_SEPARATOR) {
                    exec.command = dir.join(cmd).to_string_lossy().into_owned();
                }
            }
        }
        for c in &mut self.contexts {
            c.source = Some(origin.to_path_buf());
        }
    }
}

fn merge_named<T>(into: &mut Vec<T>, later: Vec<T>, name: impl Fn(&T) -> &String) {
    for item in later {
        if !into.iter().any(|i| name(i) == name(&item)) {
            into.push(item);
        }
    }
}

/// A YAML error, naming the file and the field path (serde_yaml_ng puts `clusters[0].cluster.server:`
/// in front of its message).
fn yaml_error(origin: Option<&Path>, e: &serde_yaml_ng::Error) -> Error {
    let text = e.to_string();
    let location = match e.location() {
        Some(l) if !text.contains(" at line ") => {
            format!(" (line {}, column {})", l.line(), l.column())
        }
        _ => String::new(),
    };
    match text.split_once(": ") {
        Some((field, message)) if !field.contains(' ') => {
            Error::config(origin, field, format!("{message}{location}"))
        }
        _ => Error::config(origin, "kubeconfig", format!("{text}{location}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_and_empty_sections_are_empty() {
        for text in [
            "",
            "clusters: null\nusers: ~\ncontexts: []",
            "apiVersion: v1\nkind: Config",
        ] {
            let kc = Kubeconfig::from_yaml(text, None).unwrap();
            assert!(kc.clusters.is_empty() && kc.users.is_empty() && kc.contexts.is_empty());
        }
    }

    #[test]
    fn malformed_yaml_names_file_and_field() {
        let cases: &[(&str, &str)] = &[
            ("clusters: {a: b}", "clusters"),
            (
                "clusters: [{name: a, cluster: {insecure-skip-tls-verify: maybe}}]",
                "clusters[0].cluster.insecure-skip-tls-verify",
            ),
            (
                "users: [{name: a, user: {exec: {args: 5}}}]",
                "users[0].user.exec.args",
            ),
            (
                "users: [{name: a, user: {token: 12345}}]",
                "users[0].user.token",
            ),
            ("clusters: [{cluster: {}}]", "clusters[0]"),
            ("clusters: [ {", "kubeconfig"),
        ];
        for (text, field) in cases {
            let err = Kubeconfig::from_yaml(text, Some(Path::new("/k/config"))).unwrap_err();
            match &err {
                Error::Config { path, field: f, .. } => {
                    assert_eq!(path.as_deref(), Some(Path::new("/k/config")), "{text}");
                    assert_eq!(f, field, "{text}: {err}");
                }
                other => panic!("{other}"),
            }
            assert!(!err.to_string().contains("12345"), "{err}");
        }
    }

    #[test]
    fn exec_command_with_a_slash_is_resolved_bare_names_are_not() {
        let text = "users: [{name: a, user: {exec: {command: ./bin/cred}}}, {name: b, user: {exec: {command: aws}}}]";
        let kc = Kubeconfig::from_yaml(text, Some(Path::new("/home/me/.kube/config"))).unwrap();
        assert_eq!(
            kc.users[0].user.exec.as_ref().unwrap().command,
            "/home/me/.kube/./bin/cred"
        );
        assert_eq!(kc.users[1].user.exec.as_ref().unwrap().command, "aws");
    }

    #[test]
    fn debug_hides_credentials_in_every_field() {
        let text = r#"
users:
- name: a
  user:
    token: tok-secret-1
    password: pw-secret-2
    client-key-data: key-secret-3
    auth-provider: {name: oidc, config: {id-token: idt-secret-4}}
    exec:
      command: cred
      args: ["--token=arg-secret-5"]
      env: [{name: API_KEY, value: env-secret-6}]
clusters:
- name: c
  cluster:
    server: https://ann:url-secret-7@127.0.0.1:6443
    proxy-url: http://bob:proxy-secret-8@127.0.0.1:3128
"#;
        let kc = Kubeconfig::from_yaml(text, None).unwrap();
        let debug = format!("{kc:?}");
        let provider = kc.users[0].user.auth_provider.as_ref().unwrap();
        assert_eq!(provider.name, "oidc");
        assert_eq!(provider.config["id-token"].expose(), "idt-secret-4");
        assert!(debug.contains("API_KEY"), "{debug}");
        assert!(debug.contains("redacted@127.0.0.1:3128"), "{debug}");
        for n in 1..=8 {
            assert!(!debug.contains(&format!("secret-{n}")), "{debug}");
        }
    }
}
