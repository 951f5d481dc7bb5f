//! The HTTP client: one connection pool per API server, shared by every list and watch.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kinformer_core::list_watch::BoxError;
use kinformer_core::{
    ApiResource, DynamicObject, ListParams, Object, ObjectList, Scope, WatchParams, WatchStream,
    validation,
};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, ACCEPT_ENCODING, AUTHORIZATION, RETRY_AFTER};
use serde::de::DeserializeOwned;
use tracing::Instrument as _;

use crate::auth::Credentials;
use crate::decode::{Parallel, decode_watch_with, error_chain};
use crate::list::decode_list;
use crate::{Config, Error};

/// `Accept` for full objects.
pub(crate) const ACCEPT_JSON: &str = "application/json";
/// `Accept` for a metadata-only list.
pub(crate) const ACCEPT_METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
/// `Accept` for a metadata-only watch.
pub(crate) const ACCEPT_METADATA: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

/// What a request is, for the headers and limits it gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Request {
    /// A list or a document: bounded by the request timeout, compression welcome.
    List,
    /// A watch: no request timeout; compressed only when it carries a whole state.
    Watch { compressible: bool },
}

/// A client for one API server: lists pages and opens watches over a shared connection pool
/// (HTTP/2 when the server offers it, so many watches share one connection).
///
/// Cheap to clone. Most code uses it through [`Api`](crate::Api), which fixes the resource and
/// namespace and implements [`ListWatch`](kinformer_core::list_watch::ListWatch).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    base: String,
    default_namespace: String,
    credentials: Credentials,
    connect_timeout: Duration,
    response_header_timeout: Duration,
    request_timeout: Option<Duration>,
    list_progress_timeout: Duration,
    max_list_body: usize,
    watch_idle_margin: Duration,
    watch_idle_timeout: Duration,
    max_watch_line: usize,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("url", &crate::secret::redact_url(self.inner.base.as_str()))
            .field("default_namespace", &self.inner.default_namespace)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client for these settings. Fails on unusable TLS material or a bad proxy URL; it does
    /// not connect yet.
    pub fn new(config: Config) -> Result<Self, Error> {
        let (tls, cert) = crate::tls::client_config(&config)?;
        let credentials = Credentials::new(&config.auth, cert, config.exec_timeout)?;
        let mut builder = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .connect_timeout(config.connect_timeout)
            .tcp_nodelay(true)
            .user_agent(concat!("kinformer/", env!("CARGO_PKG_VERSION")))
            .http2_keep_alive_interval(Duration::from_secs(30))
            .http2_keep_alive_while_idle(true)
            .http2_adaptive_window(true);
        builder = match &config.proxy_url {
            Some(proxy) => builder.proxy(reqwest::Proxy::all(proxy).map_err(|e| {
                let shown = crate::secret::redact_url(proxy);
                Error::config(None, "proxy-url", format!("{shown:?}: {e}"))
            })?),
            // As client-go: without a proxy-url, the usual proxy environment variables apply.
            None => builder,
        };
        let http = builder.build().map_err(|e| Error::Tls {
            message: error_chain(&e),
        })?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                base: config.cluster_url.trim_end_matches('/').to_owned(),
                default_namespace: config.default_namespace,
                credentials,
                connect_timeout: config.connect_timeout,
                response_header_timeout: config.response_header_timeout,
                request_timeout: config.request_timeout,
                list_progress_timeout: config.list_progress_timeout,
                max_list_body: config.max_list_body,
                watch_idle_margin: config.watch_idle_margin,
                watch_idle_timeout: config.watch_idle_timeout,
                max_watch_line: config.max_watch_line,
            }),
        })
    }

    /// A client from [`Config::infer`] with the kubeconfig's current context.
    pub fn try_default() -> Result<Self, Error> {
        Self::new(Config::infer(&Default::default())?)
    }

    /// The API server's base URL.
    pub fn url(&self) -> &str {
        &self.inner.base
    }

    /// The namespace of the configuration's context.
    pub fn default_namespace(&self) -> &str {
        &self.inner.default_namespace
    }

    /// Lists one page of `resource` (in `namespace`, or across all namespaces when `None`). The
    /// response may be gzip-compressed.
    ///
    /// The namespace and the resource's path segments are checked first
    /// ([`Error::InvalidName`], before any request). An item without a name, or of a namespaced
    /// resource without a namespace, is an [`Error::Decode`] naming the item.
    pub async fn list<K: Object + DeserializeOwned>(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        params: &ListParams,
    ) -> Result<ObjectList<K>, Error> {
        self.list_as(resource, namespace, params, ACCEPT_JSON).await
    }

    pub(crate) async fn list_as<K: Object + DeserializeOwned>(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        params: &ListParams,
        accept: &'static str,
    ) -> Result<ObjectList<K>, Error> {
        let path = with_query(checked_list_path(resource, namespace)?, &params.to_query());
        let response = self.send(&path, accept, Request::List).await?;
        let body = self.read_list_body(response).await?;
        let scope = resource.scope;
        let decoded = decode_list(body, scope).await;
        let mut list = decoded.map_err(|source| Error::Decode {
            what: "list",
            line: None,
            offset: None,
            source,
        })?;
        fill_dynamic_types(&mut list, resource);
        Ok(list)
    }

    /// Opens a watch on `resource` and decodes its events as they arrive.
    ///
    /// The stream is core's [`WatchStream`]: its error is the neutral
    /// [`list_watch::Error`](kinformer_core::list_watch::Error), with this crate's [`Error`]
    /// inside ([`Error::from_list_watch`]). It has no total deadline. If no bytes arrive for
    /// `timeoutSeconds` plus the configured margin (or the configured idle limit when
    /// `timeoutSeconds` is not set), it ends with [`Error::IdleTimeout`]. Compression is refused for watches,
    /// but for a streaming list (`sendInitialEvents`), which carries the whole state as a list does. The namespace is checked
    /// first, as for [`list`](Self::list); an event whose object has no name (or, for a
    /// namespaced resource, no namespace) ends the stream with [`Error::Decode`] naming the
    /// line.
    pub async fn watch<K>(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        params: &WatchParams,
    ) -> Result<WatchStream<K>, Error>
    where
        K: Object + DeserializeOwned,
    {
        self.watch_as(resource, namespace, params, ACCEPT_JSON)
            .await
    }

    pub(crate) async fn watch_as<K>(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        params: &WatchParams,
        accept: &'static str,
    ) -> Result<WatchStream<K>, Error>
    where
        K: Object + DeserializeOwned,
    {
        let path = with_query(checked_list_path(resource, namespace)?, &params.to_query());
        // A streaming list carries the whole state, as a list does: it may come compressed, as
        // client-go asks since 1.37. A plain watch may not (its events come one by one).
        let compressible = params.send_initial_events;
        let response = self
            .send(&path, accept, Request::Watch { compressible })
            .await?;
        let idle = match params.timeout_seconds {
            Some(t) => Duration::from_secs(u64::from(t)) + self.inner.watch_idle_margin,
            None => self.inner.watch_idle_timeout,
        };
        Ok(decode_watch_with(
            response.bytes_stream(),
            self.inner.max_watch_line,
            resource.scope == Scope::Namespaced,
            Some(idle),
            Parallel::default(),
        ))
    }

    /// GETs `path` (a server-relative path such as `/api/v1`) and decodes its JSON body as `T`,
    /// with the same bounds, credentials and error mapping as a list. `what` names the document
    /// in a decoding error.
    pub(crate) async fn get_json<T: DeserializeOwned>(
        &self,
        path: &str,
        what: &'static str,
    ) -> Result<T, Error> {
        let response = self.send(path, ACCEPT_JSON, Request::List).await?;
        let body = self.read_list_body(response).await?;
        serde_json::from_slice(&body).map_err(|source| Error::Decode {
            what,
            line: None,
            offset: None,
            source: kinformer_core::Error::Decode { what, source },
        })
    }

    /// Reads a list body: at most `max_list_body` bytes once decompressed, with no more than
    /// `list_progress_timeout` between chunks.
    async fn read_list_body(&self, mut response: reqwest::Response) -> Result<Vec<u8>, Error> {
        let limit = self.inner.max_list_body;
        let announced = response.content_length().unwrap_or(0);
        if announced > limit as u64 {
            return Err(Error::BodyTooLarge { limit });
        }
        let progress = self.inner.list_progress_timeout;
        // The announced length is at most the limit here; a compressed body announces none.
        let mut body = Vec::with_capacity(announced as usize);
        loop {
            let chunk = tokio::time::timeout(progress, response.chunk())
                .await
                .map_err(|_| Error::Timeout {
                    waiting_for: "the next bytes of the response body",
                    limit: progress,
                })?
                .map_err(|e| self.transport_error(&e))?;
            let Some(chunk) = chunk else {
                return Ok(body);
            };
            if chunk.len() > limit - body.len() {
                tracing::debug!(limit, "response body over the limit");
                return Err(Error::BodyTooLarge { limit });
            }
            body.extend_from_slice(&chunk);
        }
    }

    /// Maps a transport failure: TLS, a timeout, a request that cannot be built, connect, or
    /// other.
    fn transport_error(&self, e: &reqwest::Error) -> Error {
        if let Some(tls) = find_tls_error(e) {
            return Error::Tls { message: tls };
        }
        if e.is_builder() {
            return Error::InvalidRequest {
                message: error_chain(e),
            };
        }
        if e.is_timeout() {
            if e.is_connect() {
                return Error::Timeout {
                    waiting_for: "a connection",
                    limit: self.inner.connect_timeout,
                };
            }
            if let Some(limit) = self.inner.request_timeout {
                return Error::Timeout {
                    waiting_for: "the whole request",
                    limit,
                };
            }
        }
        let source: BoxError = error_chain(e).into();
        if e.is_connect() {
            Error::Connect { source }
        } else {
            Error::Request { source }
        }
    }

    /// Sends a GET, with credentials, retrying once with fresh credentials on a 401. Returns the
    /// response of a 2xx answer, the mapped error otherwise.
    async fn send(
        &self,
        path: &str,
        accept: &'static str,
        kind: Request,
    ) -> Result<reqwest::Response, Error> {
        let watch = matches!(kind, Request::Watch { .. });
        let span = tracing::debug_span!(
            "request",
            method = "GET",
            path = %path.split('?').next().unwrap_or_default(),
            watch,
            status = tracing::field::Empty,
            version = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
        );
        async move {
            let url = format!("{}{path}", self.inner.base);
            let started = Instant::now();
            let mut refreshed = false;
            loop {
                let mut request = self.inner.http.get(&url).header(ACCEPT, accept);
                match kind {
                    // A watch lasts as long as the server keeps it: no request timeout.
                    Request::Watch { compressible: true } => {}
                    Request::Watch {
                        compressible: false,
                    } => {
                        request = request.header(ACCEPT_ENCODING, "identity");
                    }
                    Request::List => {
                        if let Some(limit) = self.inner.request_timeout {
                            request = request.timeout(limit);
                        }
                    }
                }
                if let Some(auth) = self.inner.credentials.header().await? {
                    request = request.header(AUTHORIZATION, auth);
                }
                let limit = self.inner.response_header_timeout;
                let result = tokio::time::timeout(limit, request.send()).await;
                let span = tracing::Span::current();
                span.record("duration_ms", started.elapsed().as_millis() as u64);
                let response = result
                    .map_err(|_| Error::Timeout {
                        waiting_for: "the response headers",
                        limit,
                    })?
                    .map_err(|e| self.transport_error(&e))?;
                let status = response.status();
                span.record("status", status.as_u16());
                span.record("version", tracing::field::debug(response.version()));
                if status.is_success() {
                    tracing::debug!("response");
                    return Ok(response);
                }
                if status == StatusCode::UNAUTHORIZED
                    && !refreshed
                    && self.inner.credentials.invalidate().await
                {
                    tracing::debug!("401: fetching credentials again and retrying once");
                    refreshed = true;
                    continue;
                }
                let error = self.error_from_response(response).await;
                tracing::debug!(%error, "error response");
                return Err(error);
            }
        }
        .instrument(span)
        .await
    }
}

fn with_query(mut path: String, query: &str) -> String {
    if !query.is_empty() {
        path.push('?');
        path.push_str(query);
    }
    path
}

/// The most of an error answer's body that is read: its message is all that is used.
const MAX_ERROR_BODY: usize = 64 * 1024;

impl Client {
    /// Maps an error answer to [`Error`], from its `Status` body when it has one. At most
    /// [`MAX_ERROR_BODY`] bytes of the body are read, with the list progress bound between
    /// chunks; what arrived by then is used.
    async fn error_from_response(&self, mut response: reqwest::Response) -> Error {
        let code = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut body = Vec::new();
        while body.len() < MAX_ERROR_BODY {
            match tokio::time::timeout(self.inner.list_progress_timeout, response.chunk()).await {
                Ok(Ok(Some(chunk))) => {
                    let room = MAX_ERROR_BODY - body.len();
                    body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                }
                _ => break,
            }
        }
        Error::from_response(code, retry_after.as_deref(), &body)
    }
}

/// The list path of `resource` in `namespace`, after checking every segment that comes from
/// outside: the namespace as the API server does (a DNS-1123 label), the group as a DNS-1123
/// subdomain, the version and plural as path segments.
fn checked_list_path(resource: &ApiResource, namespace: Option<&str>) -> Result<String, Error> {
    let check = |what: &'static str, value: &str, problems: Vec<String>| {
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::InvalidName {
                what,
                value: value.to_owned(),
                problems: problems.join("; "),
            })
        }
    };
    if !resource.group.is_empty() {
        check(
            "API group",
            &resource.group,
            validation::is_dns1123_subdomain(&resource.group),
        )?;
    }
    check(
        "API version",
        &resource.version,
        validation::is_valid_path_segment_name(&resource.version),
    )?;
    check(
        "resource",
        &resource.plural,
        validation::is_valid_path_segment_name(&resource.plural),
    )?;
    if let (Scope::Namespaced, Some(ns)) = (resource.scope, namespace) {
        let mut problems = validation::validate_namespace_name(ns);
        if ns.is_empty() {
            problems = vec!["may not be empty (list or watch all namespaces instead)".to_owned()];
        }
        check("namespace", ns, problems)?;
    }
    Ok(resource.list_path(namespace))
}

/// Finds a rustls error among the sources of `e` (including errors wrapped in `io::Error`).
fn find_tls_error(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut depth = 0;
    while let Some(err) = current
        && depth < 16
    {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        // `io::Error::source` skips the error it wraps: step into it instead.
        current = match err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
        depth += 1;
    }
    None
}

/// The API server leaves `kind` and `apiVersion` out of list items (the list's kind says what
/// they are). Typed objects know their own; a [`DynamicObject`] is given the listed resource's,
/// as client-go does for the items of an unstructured list.
fn fill_dynamic_types<K: Object>(list: &mut ObjectList<K>, resource: &ApiResource) {
    for item in &mut list.items {
        let Some(object) = Arc::get_mut(item)
            .and_then(|o| (o as &mut dyn std::any::Any).downcast_mut::<DynamicObject>())
        else {
            continue;
        };
        if object.types.kind.is_empty() {
            object.types.kind.clone_from(&resource.kind);
        }
        if object.types.api_version.is_empty() {
            object.types.api_version.clone_from(&resource.api_version);
        }
    }
}
