//! The resolved connection settings of a [`Client`](crate::Client): where the server is, how to
//! trust it, and how to authenticate.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use kinformer_core::trim::ManagedFieldsDecode;

use crate::kubeconfig::{
    EXEC_V1, EXEC_V1BETA1, ExecConfig, Kubeconfig, NamedAuthInfo, NamedCluster,
};
use crate::secret::redact_url;
use crate::{Error, ProxyEnv, SecretString};

/// The folder where Kubernetes mounts a pod's service-account token, CA and namespace.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The default maximum length of one watch line: 16 MiB.
pub const DEFAULT_MAX_WATCH_LINE: usize = 16 * 1024 * 1024;

/// The default maximum size of a list response body once decompressed: the whole list's bound,
/// [`DEFAULT_MAX_LIST_BYTES`] (4 GiB; all of memory's range on a 32-bit target).
///
/// One body may be the whole list: the API server answers a list at `resourceVersion=0` (a
/// reflector's first list, as client-go's) from its watch cache, whole, whatever its `limit`.
/// 100,000 dense pods make 1.5 GB of JSON, so any smaller bound per body would refuse, on every
/// retry, a list that the bound on the whole list allows.
pub const DEFAULT_MAX_LIST_BODY: usize = if DEFAULT_MAX_LIST_BYTES > usize::MAX as u64 {
    usize::MAX
} else {
    DEFAULT_MAX_LIST_BYTES as usize
};

/// The default bound on a whole non-watch request, from sending it to the last byte of its body:
/// 2 minutes, twice what the API server itself allows a non-watch request (60 s), so that only a
/// server that trickles its answer (or a link far slower than any cluster's) ever meets it.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// The default most pages one list may take, followed from continue token to continue token:
/// 100,000, the pager's own bound (`kinformer_core::list_watch::DEFAULT_MAX_PAGES`).
pub const DEFAULT_MAX_LIST_PAGES: usize = kinformer_core::list_watch::DEFAULT_MAX_PAGES;

/// The default most objects one list may hold over all its pages: 5 million, over thirty times
/// the 150,000 pods of Kubernetes' largest tested cluster.
pub const DEFAULT_MAX_LIST_OBJECTS: usize = 5_000_000;

/// The default most bytes one list's bodies may hold over all its pages, counted after
/// decompression: 4 GiB, twice etcd's default storage quota (2 GiB) from which the API server
/// serves (its JSON is larger than the protobuf etcd stores, but not by that much once
/// `managedFields` and history are left aside).
pub const DEFAULT_MAX_LIST_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// Everything a [`Client`](crate::Client) needs to reach and authenticate to one API server.
///
/// Make one from a kubeconfig ([`Config::from_kubeconfig`], [`Config::from_path`]), from the
/// usual places in kubectl's order ([`Config::infer`]), from inside a pod
/// ([`Config::incluster`]), or by hand with [`Config::new`]. `Debug` never shows credentials.
///
/// ```
/// use kinformer_client::{AuthConfig, Config};
///
/// let mut config = Config::new("https://127.0.0.1:6443");
/// config.auth = AuthConfig::Token("t0ken".into());
/// config.default_namespace = "shop".into();
/// assert!(!format!("{config:?}").contains("t0ken"));
/// ```
#[derive(Clone)]
pub struct Config {
    /// The API server's base URL, without a trailing slash.
    pub cluster_url: String,
    /// The namespace of the selected context (`default` when it names none).
    pub default_namespace: String,
    /// PEM of the CA(s) to trust. When set, only these are trusted, as client-go does; when
    /// `None`, the system's roots are.
    pub root_certs_pem: Option<Vec<u8>>,
    /// Skip verification of the server's certificate. Honoured only when set, with a warning.
    pub insecure_skip_tls_verify: bool,
    /// Verify the server's certificate against this name instead of the URL's host.
    pub tls_server_name: Option<String>,
    /// An HTTP(S) proxy for every request (a kubeconfig cluster's `proxy-url`). When set, the
    /// proxy environment is not consulted, as in client-go.
    pub proxy_url: Option<String>,
    /// The proxy environment used when `proxy_url` is `None`, with Go's rules (see
    /// [`ProxyEnv`]): `None` (the default) reads the process's `HTTPS_PROXY`, `HTTP_PROXY`
    /// and `NO_PROXY` when the client is built; `Some(ProxyEnv::default())` proxies nothing.
    /// Requests to the loopback interface are never proxied.
    pub proxy_env: Option<ProxyEnv>,
    /// A client certificate and key to present.
    pub client_identity: Option<ClientIdentity>,
    /// How requests authenticate.
    pub auth: AuthConfig,
    /// The bound on establishing a connection, TCP and TLS handshake together (default 30 s,
    /// client-go's dial timeout). Hitting it is [`Error::Timeout`].
    pub connect_timeout: Duration,
    /// The bound on waiting for the response headers once the request is sent, for lists and
    /// watches alike (default 60 s: the API server itself ends a non-watch request after 60 s).
    /// Hitting it is [`Error::Timeout`].
    pub response_header_timeout: Duration,
    /// The bound on a whole non-watch request (a list page, a discovery document), from sending
    /// it to the last byte of the body: kubectl's `--request-timeout`. Default
    /// [`DEFAULT_REQUEST_TIMEOUT`] (2 min), so that a body sent a byte at a time cannot hold a
    /// request forever; `None` (kubectl's `0`) sets none, and the other bounds still apply.
    /// Watches never have one. Hitting it is [`Error::Timeout`] waiting for "the whole
    /// request".
    pub request_timeout: Option<Duration>,
    /// The bound on waiting for the next bytes of a list body: a list that stalls for this long
    /// ends with [`Error::Timeout`] (default 60 s).
    pub list_progress_timeout: Duration,
    /// The largest list (or other non-watch) response body accepted, counted after
    /// decompression; a larger one ends with [`Error::BodyTooLarge`] once this many bytes have
    /// arrived (default [`DEFAULT_MAX_LIST_BODY`], 4 GiB: a list at `resourceVersion=0` comes
    /// whole in one body, so a bound below [`max_list_bytes`](Self::max_list_bytes) refuses
    /// lists that bound allows).
    pub max_list_body: usize,
    /// The most pages one list may take, counted along its continue tokens (default
    /// [`DEFAULT_MAX_LIST_PAGES`], 100,000). The page past it is not requested: the list ends
    /// with [`Error::ListTooLarge`].
    pub max_list_pages: usize,
    /// The most objects one list may hold over all its pages, counted along its continue tokens
    /// (default [`DEFAULT_MAX_LIST_OBJECTS`], 5 million). The page that goes past it ends the
    /// list with [`Error::ListTooLarge`]. A server that hands out a new continue token with
    /// every page meets this bound, or the next one, and cannot fill the memory.
    pub max_list_objects: usize,
    /// The most bytes one list's bodies may hold over all its pages once decompressed, counted
    /// along its continue tokens (default [`DEFAULT_MAX_LIST_BYTES`], 4 GiB). The page that goes
    /// past it ends the list with [`Error::ListTooLarge`], before it is decoded.
    pub max_list_bytes: u64,
    /// The bound on one run of an exec credential plugin; a plugin still running then is killed
    /// and the request fails with [`Error::ExecTimeout`] (default 60 s).
    pub exec_timeout: Duration,
    /// How long a watch may stay silent (no bytes at all, not even a bookmark) beyond its
    /// `timeoutSeconds` before it is ended with [`Error::IdleTimeout`] (default 30 s): the
    /// server should have closed it by then.
    pub watch_idle_margin: Duration,
    /// How long a watch without `timeoutSeconds` may stay silent before it is ended with
    /// [`Error::IdleTimeout`] (default 10 min).
    pub watch_idle_timeout: Duration,
    /// The longest watch line accepted; a longer one ends the stream with
    /// [`Error::LineTooLong`] (default [`DEFAULT_MAX_WATCH_LINE`], 16 MiB).
    pub max_watch_line: usize,
    /// The encoding lists and watches ask for (default [`ObjectEncoding::Json`]).
    pub object_encoding: ObjectEncoding,
    /// Whether the objects of lists and watches (full objects, JSON or protobuf) are decoded with
    /// their `metadata.managedFields` (default [`ManagedFieldsDecode::Keep`]), or come without
    /// them ([`ManagedFieldsDecode::Skip`]): the entries are cut out of each object's bytes
    /// before it is decoded, which on an object that many writers touched is most of its
    /// decoding (and of its memory until a transform drops them). For clients whose informers
    /// strip them anyway (the facade builder's `strip_managed_fields`); a key the scan of the
    /// bytes does not recognize (JSON that spells `managedFields` with escapes, which no API
    /// server writes) is decoded as usual, so keep the informer's transform too. Gets and
    /// writes decode everything.
    pub managed_fields: ManagedFieldsDecode,
}

/// The encoding a list or a watch asks the API server for.
///
/// The API server speaks protobuf (`application/vnd.kubernetes.protobuf`) for its built-in
/// kinds, as client-go asks by default; custom resources and dynamic objects are JSON whatever
/// this says, and so is a list or watch that carries a shard selector (the protobuf list
/// metadata of the releases the messages come from has no `shardInfo`, so the server's answer
/// to the selector could not be read). Which Rust types have a protobuf codec:
/// [`kinformer_protobuf::convert::codec`].
///
/// ```
/// use kinformer_client::{Config, ObjectEncoding};
///
/// let mut config = Config::new("https://127.0.0.1:6443");
/// assert_eq!(config.object_encoding, ObjectEncoding::Json);
/// config.object_encoding = ObjectEncoding::ProtobufWherePossible;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ObjectEncoding {
    /// JSON for everything.
    #[default]
    Json,
    /// Protobuf for the built-in kinds that have a codec, with JSON listed after it in
    /// `Accept`, so that a server (or a proxy) that cannot answer in protobuf answers in JSON,
    /// which is decoded as JSON.
    ProtobufWherePossible,
    /// Protobuf alone for the built-in kinds that have a codec: a server that cannot answer in
    /// protobuf answers 406 ([`Error::Api`](crate::Error) with the server's message).
    Protobuf,
}

/// A client certificate chain and its private key, both PEM.
#[derive(Clone)]
pub struct ClientIdentity {
    /// The certificate chain, PEM.
    pub cert_pem: Vec<u8>,
    /// The private key, PEM (PKCS#1 RSA, SEC1 EC or PKCS#8).
    pub key_pem: SecretString,
}

impl fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("cert_pem", &format_args!("<{} bytes>", self.cert_pem.len()))
            .field("key_pem", &self.key_pem)
            .finish()
    }
}

/// How requests authenticate. `Debug` never shows a credential.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum AuthConfig {
    /// No credentials (or a client certificate alone).
    #[default]
    None,
    /// A fixed bearer token.
    Token(SecretString),
    /// A bearer token read from this file, and read again when the file changes or the server
    /// answers 401 (bound service-account tokens rotate).
    TokenFile(PathBuf),
    /// HTTP basic authentication.
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: SecretString,
    },
    /// An exec credential plugin; its credential is cached until it expires and fetched again on
    /// a 401.
    Exec {
        /// The plugin's settings.
        exec: Box<ExecConfig>,
        /// The cluster's settings passed to the plugin when it asks (`provideClusterInfo`).
        cluster: Option<serde_json::Value>,
    },
    /// The `oidc` auth provider: its `id-token` is sent as a bearer token until it expires (its
    /// `exp` claim), as kubectl's oidc plugin does. It is never refreshed: a request without a
    /// valid id-token fails with [`Error::Auth`] saying what to do.
    Oidc {
        /// The kubeconfig's name for the user, for messages.
        user: String,
        /// `id-token`, when set.
        id_token: Option<SecretString>,
        /// When the id-token expires; `None` when it has no `exp` claim (then it counts as
        /// expired, as in kubectl).
        expires: Option<std::time::SystemTime>,
        /// Whether a `refresh-token` is set (kubectl would refresh with it).
        refresh_token: bool,
    },
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("cluster_url", &redact_url(&self.cluster_url))
            .field("default_namespace", &self.default_namespace)
            .field(
                "root_certs_pem",
                &self
                    .root_certs_pem
                    .as_ref()
                    .map(|p| format!("<{} bytes>", p.len())),
            )
            .field("insecure_skip_tls_verify", &self.insecure_skip_tls_verify)
            .field("tls_server_name", &self.tls_server_name)
            .field("proxy_url", &self.proxy_url.as_deref().map(redact_url))
            .field("proxy_env", &self.proxy_env)
            .field("client_identity", &self.client_identity)
            .field("auth", &self.auth)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_header_timeout", &self.response_header_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("list_progress_timeout", &self.list_progress_timeout)
            .field("max_list_body", &self.max_list_body)
            .field("max_list_pages", &self.max_list_pages)
            .field("max_list_objects", &self.max_list_objects)
            .field("max_list_bytes", &self.max_list_bytes)
            .field("exec_timeout", &self.exec_timeout)
            .field("watch_idle_margin", &self.watch_idle_margin)
            .field("watch_idle_timeout", &self.watch_idle_timeout)
            .field("max_watch_line", &self.max_watch_line)
            .field("object_encoding", &self.object_encoding)
            .field("managed_fields", &self.managed_fields)
            .finish()
    }
}

/// Which context, cluster and user of a kubeconfig to use. Empty fields mean "as the kubeconfig
/// says" (its `current-context`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeconfigOptions {
    /// The context to use instead of `current-context`.
    pub context: Option<String>,
    /// The cluster to use instead of the context's.
    pub cluster: Option<String>,
    /// The user to use instead of the context's.
    pub user: Option<String>,
}

impl Config {
    /// Settings for this URL with no TLS material, no credentials and the default limits.
    pub fn new(cluster_url: impl Into<String>) -> Self {
        Self {
            cluster_url: cluster_url.into().trim_end_matches('/').to_owned(),
            default_namespace: "default".to_owned(),
            root_certs_pem: None,
            insecure_skip_tls_verify: false,
            tls_server_name: None,
            proxy_url: None,
            proxy_env: None,
            client_identity: None,
            auth: AuthConfig::None,
            connect_timeout: Duration::from_secs(30),
            response_header_timeout: Duration::from_secs(60),
            request_timeout: Some(DEFAULT_REQUEST_TIMEOUT),
            list_progress_timeout: Duration::from_secs(60),
            max_list_body: DEFAULT_MAX_LIST_BODY,
            max_list_pages: DEFAULT_MAX_LIST_PAGES,
            max_list_objects: DEFAULT_MAX_LIST_OBJECTS,
            max_list_bytes: DEFAULT_MAX_LIST_BYTES,
            exec_timeout: Duration::from_secs(60),
            watch_idle_margin: Duration::from_secs(30),
            watch_idle_timeout: Duration::from_secs(600),
            max_watch_line: DEFAULT_MAX_WATCH_LINE,
            object_encoding: ObjectEncoding::Json,
            managed_fields: ManagedFieldsDecode::Keep,
        }
    }

    /// Finds the settings where kubectl would, in this order: the `KUBECONFIG` files (merged,
    /// first to set a value wins), `~/.kube/config`, then the in-cluster service account.
    pub fn infer(options: &KubeconfigOptions) -> Result<Self, Error> {
        Self::find(options)?.ok_or_else(nothing_configured)
    }

    /// Like [`Config::infer`], but `Ok(None)` when there is nothing to find: no `KUBECONFIG`, no
    /// `~/.kube/config`, and no `KUBERNETES_SERVICE_HOST`. A tool that has a fallback of its own
    /// (an embedded simulated cluster, say) uses this, so that a kubeconfig that exists but is
    /// broken is still reported rather than silently replaced.
    pub fn find(options: &KubeconfigOptions) -> Result<Option<Self>, Error> {
        infer_with(options, &|name| std::env::var_os(name))
    }

    /// The settings from `explicit` when given (a `--kubeconfig` flag, say), else from
    /// [`Config::infer`].
    pub fn load(explicit: Option<&Path>, options: &KubeconfigOptions) -> Result<Self, Error> {
        match explicit {
            Some(path) => Self::from_path(path, options),
            None => Self::infer(options),
        }
    }

    /// Reads one kubeconfig file and resolves the selected context.
    pub fn from_path(path: impl AsRef<Path>, options: &KubeconfigOptions) -> Result<Self, Error> {
        Self::from_kubeconfig(&Kubeconfig::read_from(path)?, options)
    }

    /// Resolves the selected context of a kubeconfig: its cluster, user and namespace. Reads the
    /// files it names (CA, client certificate and key) and checks every base64 and PEM field, so
    /// that a bad one is reported here, naming the file and the field.
    pub fn from_kubeconfig(kc: &Kubeconfig, options: &KubeconfigOptions) -> Result<Self, Error> {
        let origin = kc
            .current_context_source
            .clone()
            .or_else(|| kc.files.first().cloned());
        let (ctx_name, field) = match (&options.context, &kc.current_context) {
            (Some(c), _) => (c.clone(), "context"),
            (None, Some(c)) if !c.is_empty() => (c.clone(), "current-context"),
            _ if options.cluster.is_some() => (String::new(), "context"),
            _ => {
                return Err(Error::config(
                    origin.as_deref(),
                    "current-context",
                    "no context is selected: set current-context or choose a context",
                ));
            }
        };
        let context = kc.contexts.iter().find(|c| c.name == ctx_name);
        if context.is_none() && !ctx_name.is_empty() {
            return Err(Error::config(
                origin.as_deref(),
                field,
                format!("context {ctx_name:?} not found"),
            ));
        }
        let ctx_source = context.and_then(|c| c.source.clone()).or(origin);
        let cluster_name = options
            .cluster
            .clone()
            .or_else(|| context.map(|c| c.context.cluster.clone()))
            .unwrap_or_default();
        let cluster = kc
            .clusters
            .iter()
            .find(|c| c.name == cluster_name)
            .ok_or_else(|| {
                Error::config(
                    ctx_source.as_deref(),
                    format!("contexts[{ctx_name}].context.cluster"),
                    format!("cluster {cluster_name:?} not found"),
                )
            })?;
        let user_name = options
            .user
            .clone()
            .or_else(|| context.map(|c| c.context.user.clone()))
            .unwrap_or_default();
        let user = if user_name.is_empty() {
            None
        } else {
            Some(
                kc.users
                    .iter()
                    .find(|u| u.name == user_name)
                    .ok_or_else(|| {
                        Error::config(
                            ctx_source.as_deref(),
                            format!("contexts[{ctx_name}].context.user"),
                            format!("user {user_name:?} not found"),
                        )
                    })?,
            )
        };

        let mut config = cluster_settings(cluster)?;
        if let Some(ns) = context.and_then(|c| c.context.namespace.as_deref())
            && !ns.is_empty()
        {
            config.default_namespace = ns.to_owned();
        }
        if let Some(user) = user {
            apply_user(&mut config, user, cluster)?;
        }
        Ok(config)
    }

    /// The settings of a pod's service account: `KUBERNETES_SERVICE_HOST` and
    /// `KUBERNETES_SERVICE_PORT`, and the token (re-read as it rotates), `ca.crt` and `namespace`
    /// files of [`SERVICE_ACCOUNT_DIR`].
    pub fn incluster() -> Result<Self, Error> {
        incluster_with(Path::new(SERVICE_ACCOUNT_DIR), &|name| {
            std::env::var(name).ok()
        })
    }
}

type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

fn nothing_configured() -> Error {
    Error::config(
        None,
        "kubeconfig",
        "no KUBECONFIG, no ~/.kube/config, and not in a cluster (KUBERNETES_SERVICE_HOST: not set)",
    )
}

fn infer_with(
    options: &KubeconfigOptions,
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<Option<Config>, Error> {
    if let Some(list) = env("KUBECONFIG").filter(|v| !v.is_empty()) {
        let paths: Vec<PathBuf> = std::env::split_paths(&list)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        if !paths.iter().any(|p| p.exists()) {
            return Err(Error::config(
                None,
                "KUBECONFIG",
                format!("none of the files exist: {}", list.to_string_lossy()),
            ));
        }
        return Config::from_kubeconfig(&Kubeconfig::read_all(&paths)?, options).map(Some);
    }
    if let Some(home) = env("HOME").or_else(|| env("USERPROFILE")) {
        let path = PathBuf::from(home).join(".kube").join("config");
        if path.exists() {
            return Config::from_path(&path, options).map(Some);
        }
    }
    let lookup = |name: &str| env(name).and_then(|v| v.into_string().ok());
    if lookup("KUBERNETES_SERVICE_HOST").is_none_or(|h| h.is_empty()) {
        return Ok(None);
    }
    incluster_with(Path::new(SERVICE_ACCOUNT_DIR), &lookup).map(Some)
}

fn incluster_with(dir: &Path, env: Lookup<'_>) -> Result<Config, Error> {
    let host = env("KUBERNETES_SERVICE_HOST")
        .filter(|h| !h.is_empty())
        .ok_or_else(|| Error::config(None, "KUBERNETES_SERVICE_HOST", "not set"))?;
    let port = env("KUBERNETES_SERVICE_PORT")
        .filter(|p| !p.is_empty())
        .ok_or_else(|| Error::config(None, "KUBERNETES_SERVICE_PORT", "not set"))?;
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host
    };
    let mut config = Config::new(format!("https://{host}:{port}"));
    let ca = dir.join("ca.crt");
    let pem = std::fs::read(&ca)
        .map_err(|e| Error::config(Some(&ca), "ca.crt", format!("cannot read: {e}")))?;
    check_certs(&pem, Some(&ca), "ca.crt")?;
    config.root_certs_pem = Some(pem);
    let token = dir.join("token");
    if !token.exists() {
        return Err(Error::config(
            Some(&token),
            "token",
            "service-account token file missing",
        ));
    }
    config.auth = AuthConfig::TokenFile(token);
    if let Ok(ns) = std::fs::read_to_string(dir.join("namespace"))
        && !ns.trim().is_empty()
    {
        config.default_namespace = ns.trim().to_owned();
    }
    Ok(config)
}

fn cluster_settings(named: &NamedCluster) -> Result<Config, Error> {
    let src = named.source.as_deref();
    let field = |f: &str| format!("clusters[{}].cluster.{f}", named.name);
    let c = &named.cluster;
    let server = c
        .server
        .as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Error::config(src, field("server"), "missing"))?;
    match reqwest::Url::parse(server) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
        Ok(_) => {
            return Err(Error::config(
                src,
                field("server"),
                format!("{:?} is not an http(s) URL", redact_url(server)),
            ));
        }
        Err(e) => {
            return Err(Error::config(
                src,
                field("server"),
                format!("{:?}: {e}", redact_url(server)),
            ));
        }
    }
    let mut config = Config::new(server);
    config.root_certs_pem = match (&c.certificate_authority_data, &c.certificate_authority) {
        (Some(data), _) if !data.is_empty() => {
            let f = field("certificate-authority-data");
            let pem = decode_base64(data, src, &f)?;
            check_certs(&pem, src, &f)?;
            Some(pem)
        }
        (_, Some(path)) if !path.as_os_str().is_empty() => {
            let f = field("certificate-authority");
            let pem = read_file(path, src, &f)?;
            check_certs(&pem, src, &f)?;
            Some(pem)
        }
        _ => None,
    };
    config.insecure_skip_tls_verify = c.insecure_skip_tls_verify;
    config.tls_server_name = c.tls_server_name.clone().filter(|s| !s.is_empty());
    if let Some(proxy) = c.proxy_url.as_deref().filter(|p| !p.is_empty()) {
        if let Err(e) = reqwest::Url::parse(proxy) {
            return Err(Error::config(
                src,
                field("proxy-url"),
                format!("{:?}: {e}", redact_url(proxy)),
            ));
        }
        config.proxy_url = Some(proxy.to_owned());
    }
    Ok(config)
}

fn apply_user(
    config: &mut Config,
    named: &NamedAuthInfo,
    cluster: &NamedCluster,
) -> Result<(), Error> {
    let src = named.source.as_deref();
    let field = |f: &str| format!("users[{}].user.{f}", named.name);
    let u = &named.user;
    let mut oidc = None;
    if let Some(provider) = &u.auth_provider {
        if provider.name != "oidc" {
            return Err(Error::config(
                src,
                field("auth-provider"),
                format!(
                    "the {:?} auth provider was removed from Kubernetes clients (only oidc \
                     remains); use an exec credential plugin",
                    provider.name
                ),
            ));
        }
        let id_token = provider
            .config
            .get("id-token")
            .filter(|t| !t.expose().trim().is_empty())
            .cloned();
        let expires = match &id_token {
            Some(token) => jwt_expiry(token.expose()).map_err(|problem| {
                Error::config(src, field("auth-provider.config.id-token"), problem)
            })?,
            None => None,
        };
        oidc = Some(AuthConfig::Oidc {
            user: named.name.clone(),
            id_token,
            expires,
            refresh_token: provider
                .config
                .get("refresh-token")
                .is_some_and(|t| !t.expose().is_empty()),
        });
    }

    let cert = match (&u.client_certificate_data, &u.client_certificate) {
        (Some(d), _) if !d.is_empty() => {
            let f = field("client-certificate-data");
            Some((decode_base64(d, src, &f)?, f))
        }
        (_, Some(p)) if !p.as_os_str().is_empty() => {
            let f = field("client-certificate");
            Some((read_file(p, src, &f)?, f))
        }
        _ => None,
    };
    let key = match (&u.client_key_data, &u.client_key) {
        (Some(d), _) if !d.expose().is_empty() => {
            let f = field("client-key-data");
            Some((decode_base64(d.expose(), src, &f)?, f))
        }
        (_, Some(p)) if !p.as_os_str().is_empty() => {
            let f = field("client-key");
            Some((read_file(p, src, &f)?, f))
        }
        _ => None,
    };
    match (cert, key) {
        (Some((cert, cf)), Some((key, kf))) => {
            check_certs(&cert, src, &cf)?;
            check_key(&key, src, &kf)?;
            let key_pem =
                String::from_utf8(key).map_err(|_| Error::config(src, &kf, "not PEM text"))?;
            config.client_identity = Some(ClientIdentity {
                cert_pem: cert,
                key_pem: key_pem.into(),
            });
        }
        (Some(_), None) => {
            return Err(Error::config(
                src,
                field("client-key"),
                "a client certificate needs a key",
            ));
        }
        (None, Some(_)) => {
            return Err(Error::config(
                src,
                field("client-certificate"),
                "a client key needs a certificate",
            ));
        }
        (None, None) => {}
    }

    config.auth = if let Some(oidc) = oidc {
        oidc
    } else if let Some(token) = u.token.as_ref().filter(|t| !t.expose().is_empty()) {
        AuthConfig::Token(token.clone())
    } else if let Some(path) = u.token_file.as_ref().filter(|p| !p.as_os_str().is_empty()) {
        if !path.exists() {
            return Err(Error::config(
                src,
                field("tokenFile"),
                format!("{} does not exist", path.display()),
            ));
        }
        AuthConfig::TokenFile(path.clone())
    } else if let Some(username) = u.username.as_ref().filter(|n| !n.is_empty()) {
        let password = u
            .password
            .clone()
            .ok_or_else(|| Error::config(src, field("password"), "username without password"))?;
        AuthConfig::Basic {
            username: username.clone(),
            password,
        }
    } else if let Some(exec) = &u.exec {
        if exec.command.is_empty() {
            return Err(Error::config(src, field("exec.command"), "missing"));
        }
        if !matches!(exec.api_version.as_str(), EXEC_V1 | EXEC_V1BETA1) {
            return Err(Error::config(
                src,
                field("exec.apiVersion"),
                format!(
                    "{:?} is not supported; use {} or {}",
                    exec.api_version, EXEC_V1, EXEC_V1BETA1
                ),
            ));
        }
        if exec.interactive_mode.as_deref() == Some("Always") {
            return Err(Error::config(
                src,
                field("exec.interactiveMode"),
                "Always needs a terminal; this client runs plugins non-interactively",
            ));
        }
        let cluster_info = exec
            .provide_cluster_info
            .then(|| exec_cluster_info(config, cluster));
        AuthConfig::Exec {
            exec: Box::new(exec.clone()),
            cluster: cluster_info,
        }
    } else {
        AuthConfig::None
    };
    Ok(())
}

/// The expiry of an OIDC id-token: its `exp` claim (seconds since the epoch), `None` without one.
/// The token is a JWT: three base64url parts, the second a JSON object of claims; its signature
/// is the server's to check. The error never quotes the token.
fn jwt_expiry(token: &str) -> Result<Option<std::time::SystemTime>, String> {
    let parts: Vec<&str> = token.trim().split('.').collect();
    let [_, payload, _] = parts[..] else {
        return Err("not a JWT (three base64url parts separated by dots)".into());
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| "not a JWT: its claims are not base64url".to_owned())?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|_| "not a JWT: its claims are not a JSON object".to_owned())?;
    Ok(claims
        .get("exp")
        .and_then(serde_json::Value::as_f64)
        .filter(|exp| exp.is_finite() && *exp >= 0.0)
        .map(|exp| std::time::SystemTime::UNIX_EPOCH + Duration::from_secs_f64(exp.min(1e12))))
}

/// The `spec.cluster` of `KUBERNETES_EXEC_INFO`.
fn exec_cluster_info(config: &Config, cluster: &NamedCluster) -> serde_json::Value {
    let mut info = serde_json::json!({ "server": config.cluster_url });
    if let Some(pem) = &config.root_certs_pem {
        info["certificate-authority-data"] =
            base64::engine::general_purpose::STANDARD.encode(pem).into();
    }
    if cluster.cluster.insecure_skip_tls_verify {
        info["insecure-skip-tls-verify"] = true.into();
    }
    if let Some(name) = &config.tls_server_name {
        info["tls-server-name"] = name.clone().into();
    }
    if let Some(proxy) = &config.proxy_url {
        info["proxy-url"] = proxy.clone().into();
    }
    info
}

fn decode_base64(data: &str, src: Option<&Path>, field: &str) -> Result<Vec<u8>, Error> {
    let compact: String = data.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|e| Error::config(src, field, format!("invalid base64: {e}")))
}

fn read_file(path: &Path, src: Option<&Path>, field: &str) -> Result<Vec<u8>, Error> {
    std::fs::read(path)
        .map_err(|e| Error::config(src, field, format!("cannot read {}: {e}", path.display())))
}

/// Checks that `pem` holds at least one certificate.
pub(crate) fn check_certs(pem: &[u8], src: Option<&Path>, field: &str) -> Result<(), Error> {
    let mut n = 0;
    for cert in CertificateDer::pem_slice_iter(pem) {
        cert.map_err(|e| Error::config(src, field, format!("invalid PEM: {e}")))?;
        n += 1;
    }
    if n == 0 {
        return Err(Error::config(src, field, "no PEM certificate found"));
    }
    Ok(())
}

/// Checks that `pem` holds a private key.
fn check_key(pem: &[u8], src: Option<&Path>, field: &str) -> Result<(), Error> {
    PrivateKeyDer::from_pem_slice(pem)
        .map(drop)
        .map_err(|e| Error::config(src, field, format!("no usable PEM private key: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn urls_with_credentials_are_redacted() {
        let mut config = Config::new("https://ann:pw-9f2c@127.0.0.1:6443");
        config.proxy_url = Some("http://bob:proxy-pw-9f2c@127.0.0.1:3128".into());
        let debug = format!("{config:?}");
        assert!(!debug.contains("9f2c"), "{debug}");
        assert!(debug.contains("redacted@127.0.0.1:3128"), "{debug}");
        for (server, proxy) in [
            ("ftp://ann:pw-9f2c@h", "http://p"),
            ("https://ann:pw-9f2c@[bad", "http://p"),
            ("https://h", "http://bob:pw-9f2c@[bad"),
        ] {
            let kc = Kubeconfig::from_yaml(
                &format!(
                    "current-context: c\nclusters: [{{name: s, cluster: {{server: '{server}', proxy-url: '{proxy}'}}}}]\ncontexts: [{{name: c, context: {{cluster: s}}}}]"
                ),
                None,
            )
            .unwrap();
            let err = Config::from_kubeconfig(&kc, &KubeconfigOptions::default()).unwrap_err();
            assert!(!err.to_string().contains("9f2c"), "{err}");
        }
    }

    #[test]
    fn incluster_reads_the_service_account_folder() {
        let dir = tempfile::tempdir().unwrap();
        let env: HashMap<&str, &str> = [
            ("KUBERNETES_SERVICE_HOST", "fd00::1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
        ]
        .into_iter()
        .collect();
        let lookup = |k: &str| env.get(k).map(|v| (*v).to_owned());
        // Without ca.crt: an error naming the file.
        let err = incluster_with(dir.path(), &lookup).unwrap_err();
        assert!(err.to_string().contains("ca.crt"), "{err}");

        let key = rcgen::KeyPair::generate().unwrap();
        let ca = rcgen::CertificateParams::new(vec!["kubernetes.default".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(dir.path().join("ca.crt"), ca.pem()).unwrap();
        std::fs::write(dir.path().join("token"), "tok").unwrap();
        std::fs::write(dir.path().join("namespace"), "team-a\n").unwrap();
        let config = incluster_with(dir.path(), &lookup).unwrap();
        assert_eq!(config.cluster_url, "https://[fd00::1]:443");
        assert_eq!(config.default_namespace, "team-a");
        assert!(matches!(&config.auth, AuthConfig::TokenFile(p) if p == &dir.path().join("token")));
        assert!(config.root_certs_pem.is_some());

        let none = |_: &str| None;
        let err = incluster_with(dir.path(), &none).unwrap_err();
        assert!(err.to_string().contains("KUBERNETES_SERVICE_HOST"), "{err}");
    }

    #[test]
    fn infer_prefers_kubeconfig_then_home_then_incluster() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::write(
            &a,
            "current-context: ctx\ncontexts: [{name: ctx, context: {cluster: c}}]",
        )
        .unwrap();
        std::fs::write(
            &b,
            "clusters: [{name: c, cluster: {server: 'http://from-b:1'}}]",
        )
        .unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".kube")).unwrap();
        std::fs::write(
            home.join(".kube/config"),
            "current-context: h\ncontexts: [{name: h, context: {cluster: c}}]\nclusters: [{name: c, cluster: {server: 'http://from-home:1'}}]",
        )
        .unwrap();
        let list = std::env::join_paths([&a, &dir.path().join("missing"), &b]).unwrap();
        let with_kubeconfig = |k: &str| match k {
            "KUBECONFIG" => Some(list.clone()),
            "HOME" => Some(home.clone().into_os_string()),
            _ => None,
        };
        let c = infer_with(&KubeconfigOptions::default(), &with_kubeconfig).unwrap();
        assert_eq!(c.unwrap().cluster_url, "http://from-b:1");
        let home_only = |k: &str| (k == "HOME").then(|| home.clone().into_os_string());
        let c = infer_with(&KubeconfigOptions::default(), &home_only).unwrap();
        assert_eq!(c.unwrap().cluster_url, "http://from-home:1");
        let nothing = |_: &str| None;
        assert!(
            infer_with(&KubeconfigOptions::default(), &nothing)
                .unwrap()
                .is_none()
        );
        assert!(
            nothing_configured()
                .to_string()
                .contains("not in a cluster")
        );
        let missing = dir.path().join("nope").into_os_string();
        let bad_list = |k: &str| (k == "KUBECONFIG").then(|| missing.clone());
        let err = infer_with(&KubeconfigOptions::default(), &bad_list).unwrap_err();
        assert!(err.to_string().contains("KUBECONFIG"), "{err}");
    }
}
