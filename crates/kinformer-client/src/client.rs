//! The HTTP client: one connection pool per API server, shared by every list and watch.

use std::collections::VecDeque;
use std::fmt;
use std::hash::BuildHasher as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt as _;
use kinformer_core::list_watch::BoxError;
use kinformer_core::trim::ManagedFieldsDecode;
use kinformer_core::{
    ApiResource, DynamicObject, ListParams, Object, ObjectList, Scope, WatchParams, WatchStream,
    validation,
};
use reqwest::header::{ACCEPT, ACCEPT_ENCODING, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::Instrument as _;

use crate::auth::Credentials;
use crate::body::{Body, BodyError, Encoding, decoded, encoding_of};
use crate::decode::{Parallel, Rules, Traffic, WatchFormat, decode_watch_counted, error_chain};
use crate::list::{Decoded, decode_json_list, decode_protobuf_list};
use crate::{Config, Error, ListBound, ObjectEncoding, ProxyEnv};
use kinformer_protobuf::convert::Codec;

/// `Accept` for full objects.
pub(crate) const ACCEPT_JSON: &str = "application/json";
/// `Accept` for protobuf alone.
const ACCEPT_PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// `Accept` for protobuf, with JSON where the server cannot: client-go's default for built-in
/// kinds.
const ACCEPT_PROTOBUF_OR_JSON: &str = "application/vnd.kubernetes.protobuf, application/json";
/// `Accept` for a metadata-only list.
pub(crate) const ACCEPT_METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
/// `Accept` for a metadata-only watch.
pub(crate) const ACCEPT_METADATA: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

/// What a request is, for the headers and limits it gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Request {
    /// A list, a document, or a write (its answer is one object or a `Status`): bounded by the
    /// request timeout, compression welcome.
    List,
    /// A watch: no request timeout; compressed only when it carries a whole state.
    Watch { compressible: bool },
}

impl Request {
    /// The encoding the request asks for, and accepts.
    fn encoding(self) -> Encoding {
        match self {
            Self::List | Self::Watch { compressible: true } => Encoding::Gzip,
            Self::Watch {
                compressible: false,
            } => Encoding::Identity,
        }
    }
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
    max_list_pages: usize,
    max_list_objects: usize,
    max_list_bytes: u64,
    lists: ListsInProgress,
    watch_idle_margin: Duration,
    watch_idle_timeout: Duration,
    max_watch_line: usize,
    object_encoding: ObjectEncoding,
    managed_fields: ManagedFieldsDecode,
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
    /// A client for these settings. Fails on unusable TLS material or a bad proxy URL (the
    /// kubeconfig's `proxy-url`, or a SOCKS proxy in the environment that the server's URL
    /// would go through: this client speaks to HTTP proxies only); it does not connect yet.
    ///
    /// Without a `proxy_url`, the proxy environment ([`Config::proxy_env`], or the process's)
    /// decides for each request with Go's rules ([`ProxyEnv`]); requests to the loopback
    /// interface never go through a proxy.
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
            .http2_adaptive_window(true)
            // The client asks for gzip itself where it wants it, checks what came, and undoes it
            // itself (`body`): reqwest would decode gzip whatever the request asked for.
            .no_gzip()
            // reqwest's own reading of the environment proxies loopback: the decision is ours.
            .no_proxy();
        builder = match &config.proxy_url {
            Some(proxy) => builder.proxy(reqwest::Proxy::all(proxy).map_err(|e| {
                let shown = crate::secret::redact_url(proxy);
                Error::config(None, "proxy-url", format!("{shown:?}: {e}"))
            })?),
            // As client-go: without a proxy-url, the proxy environment applies, with Go's rules.
            None => {
                let env = config.proxy_env.clone().unwrap_or_else(ProxyEnv::from_env);
                env_proxy(builder, env, &config.cluster_url)?
            }
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
                max_list_pages: config.max_list_pages,
                max_list_objects: config.max_list_objects,
                max_list_bytes: config.max_list_bytes,
                lists: ListsInProgress::default(),
                watch_idle_margin: config.watch_idle_margin,
                watch_idle_timeout: config.watch_idle_timeout,
                max_watch_line: config.max_watch_line,
                object_encoding: config.object_encoding,
                managed_fields: config.managed_fields,
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

    /// Obtains the credentials the next request will send, without sending a request: runs the
    /// exec credential plugin (bounded by [`Config::exec_timeout`]), reads the token file, or
    /// checks the oidc id-token's expiry, unless a cached credential is still valid. A program
    /// can so tell credentials that cannot be obtained ([`Error::Auth`],
    /// [`Error::ExecTimeout`]) from a server that does not answer.
    pub async fn authenticate(&self) -> Result<(), Error> {
        self.inner.credentials.header().await.map(|_| ())
    }

    /// Lists one page of `resource` (in `namespace`, or across all namespaces when `None`). The
    /// response may be gzip-compressed.
    ///
    /// The namespace and the resource's path segments are checked first
    /// ([`Error::InvalidName`], before any request). An item without a name, or of a namespaced
    /// resource without a namespace, is an [`Error::Decode`] naming the item.
    ///
    /// A page asked for with a continue token counts toward the list that handed out the token:
    /// the client follows each list along its tokens, whoever pages it, and ends one that goes
    /// past [`Config::max_list_pages`], [`Config::max_list_objects`] or
    /// [`Config::max_list_bytes`] with [`Error::ListTooLarge`].
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
        let base = checked_list_path(resource, namespace)?;
        let lists = &self.inner.lists;
        let from = params
            .continue_token
            .as_deref()
            .filter(|t| !t.is_empty())
            .map(|t| lists.key(&base, t));
        let before = from.map(|k| lists.get(k)).unwrap_or_default();
        let too_large = |bound, limit| Error::ListTooLarge {
            bound,
            limit,
            pages: before.pages,
        };
        if before.pages >= self.inner.max_list_pages {
            return Err(too_large(
                ListBound::Pages,
                self.inner.max_list_pages as u64,
            ));
        }
        let path = with_query(base.clone(), &params.to_query());
        let codec = self.protobuf_codec::<K>(resource, accept, params.shard_selector.is_some());
        let accept = codec.map_or(accept, |(_, accept)| accept);
        let (response, encoding) = self.send(&path, accept, Request::List).await?;
        let protobuf = codec.filter(|_| is_protobuf(response.headers()));
        // The page may take what is left of the list's bytes, and no more than a page may.
        let left = self.inner.max_list_bytes.saturating_sub(before.bytes);
        let limit = usize::try_from(left).map_or(self.inner.max_list_body, |left| {
            left.min(self.inner.max_list_body)
        });
        let over = |e| match e {
            Error::BodyTooLarge { .. } if limit < self.inner.max_list_body => {
                too_large(ListBound::Bytes, self.inner.max_list_bytes)
            }
            other => other,
        };
        let traffic = Traffic::new(resource, "list");
        let scope = resource.scope;
        let max_items = self
            .inner
            .max_list_objects
            .saturating_sub(usize::try_from(before.objects).unwrap_or(usize::MAX));
        let too_many = || too_large(ListBound::Objects, self.inner.max_list_objects as u64);
        // Decoded while it arrives: its bytes are dropped as its items are decoded.
        let chunks = self
            .body_chunks(response, encoding, limit)
            .map_err(over)?
            .into_stream();
        let managed_fields = self.inner.managed_fields;
        let decoded = match protobuf {
            Some((codec, _)) => {
                decode_protobuf_list(chunks, codec, scope, managed_fields, max_items, too_many)
                    .await
            }
            None => decode_json_list(chunks, scope, managed_fields, max_items, too_many).await,
        };
        let Decoded {
            mut list,
            bytes: body_len,
            decoding,
        } = decoded.map_err(over)?;
        traffic.decode.record(decoding);
        traffic.bytes.increment(body_len);
        let bytes = before.bytes + body_len;
        // Within max_list_objects: the decoders refuse the item past it.
        let objects = before.objects + list.items.len() as u64;
        let to = list
            .continue_token
            .as_deref()
            .filter(|t| !t.is_empty())
            .map(|t| lists.key(&base, t));
        let totals = ListTotals {
            pages: before.pages + 1,
            objects,
            bytes,
        };
        lists.advance(from, to, totals);
        fill_dynamic_types(&mut list, resource);
        Ok(list)
    }

    /// Opens a watch on `resource` and decodes its events as they arrive.
    ///
    /// The stream is core's [`WatchStream`]: its error is the neutral
    /// [`list_watch::Error`](kinformer_core::list_watch::Error), with this crate's [`Error`]
    /// inside ([`Error::from_list_watch`]). It has no total deadline. If no bytes arrive for
    /// `timeoutSeconds` plus the configured margin (or the configured idle limit when
    /// `timeoutSeconds` is not set), it ends with [`Error::IdleTimeout`]. A watch asks for
    /// `Accept-Encoding: identity`, but for a streaming list (`sendInitialEvents`), which
    /// carries the whole state as a list does and asks for gzip; an answer in an encoding that
    /// was not asked for is [`Error::UnexpectedEncoding`], and its body is not read. The
    /// namespace is checked first, as for [`list`](Self::list); an event whose object has no
    /// name (or, for a namespaced resource, no namespace) ends the stream with
    /// [`Error::Decode`] naming the line.
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
        let codec = self.protobuf_codec::<K>(resource, accept, params.shard_selector.is_some());
        let accept = codec.map_or(accept, |(_, accept)| accept);
        let (response, encoding) = self
            .send(&path, accept, Request::Watch { compressible })
            .await?;
        let format = match codec {
            Some((codec, _)) if is_protobuf(response.headers()) => WatchFormat::Protobuf(codec),
            _ => WatchFormat::Json,
        };
        let idle = match params.timeout_seconds {
            Some(t) => Duration::from_secs(u64::from(t)) + self.inner.watch_idle_margin,
            None => self.inner.watch_idle_timeout,
        };
        Ok(decode_watch_counted(
            decoded(response, encoding),
            self.inner.max_watch_line,
            Rules {
                require_namespace: resource.scope == Scope::Namespaced,
                managed_fields: self.inner.managed_fields,
            },
            Some(idle),
            Parallel::default(),
            Traffic::new(resource, "watch"),
            format,
        ))
    }

    /// The protobuf codec a full-object list or watch of `K` on `resource` uses under this
    /// configuration, and the `Accept` that asks for it: none for other forms (`accept` is not
    /// plain JSON), for a request with a shard selector, for types without a codec, and for a
    /// resource that is not the codec's kind.
    fn protobuf_codec<K: 'static>(
        &self,
        resource: &ApiResource,
        accept: &'static str,
        shard_selector: bool,
    ) -> Option<(&'static Codec, &'static str)> {
        if accept != ACCEPT_JSON || shard_selector {
            return None;
        }
        let accept = match self.inner.object_encoding {
            ObjectEncoding::ProtobufWherePossible => ACCEPT_PROTOBUF_OR_JSON,
            ObjectEncoding::Protobuf => ACCEPT_PROTOBUF,
            _ => return None,
        };
        let codec = kinformer_protobuf::convert::codec::<K>()?;
        (codec.kind() == resource.kind && codec.api_version() == resource.api_version)
            .then_some((codec, accept))
    }

    /// GETs `path` (a server-relative path such as `/api/v1`) and decodes its JSON body as `T`,
    /// with the same bounds, credentials and error mapping as a list. `what` names the document
    /// in a decoding error.
    pub(crate) async fn get_json<T: DeserializeOwned>(
        &self,
        path: &str,
        what: &'static str,
    ) -> Result<T, Error> {
        let (response, encoding) = self.send(path, ACCEPT_JSON, Request::List).await?;
        let body = self
            .read_list_body(response, encoding, self.inner.max_list_body)
            .await?;
        serde_json::from_slice(&body).map_err(|source| Error::Decode {
            what,
            line: None,
            offset: None,
            source: kinformer_core::Error::Decode { what, source },
        })
    }

    /// GETs `path` with this `Accept`: the body (bounded as a list body is) and the response's
    /// `Content-Type`, for a caller that decodes according to what the server chose.
    pub(crate) async fn get_bytes(
        &self,
        path: &str,
        accept: &'static str,
    ) -> Result<(Vec<u8>, Option<String>), Error> {
        let (response, encoding) = self.send(path, accept, Request::List).await?;
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = self
            .read_list_body(response, encoding, self.inner.max_list_body)
            .await?;
        Ok((body, content_type))
    }

    /// GETs one object of `resource` by name and decodes it as `K`. The answer is bounded as a
    /// list page is ([`Config::max_list_body`](crate::Config::max_list_body)).
    pub(crate) async fn get_object<K: DeserializeOwned>(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
        accept: &'static str,
    ) -> Result<K, Error> {
        let path = checked_object_path(resource, namespace, Some(name))?;
        let (response, encoding) = self.send(&path, accept, Request::List).await?;
        self.read_object(response, encoding).await
    }

    /// Sends `object` as JSON with `method` (POST to the collection when `name` is `None`, PUT
    /// to the object otherwise) and decodes the object the server answers with.
    pub(crate) async fn write_object<K: Serialize + DeserializeOwned>(
        &self,
        method: Method,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: Option<&str>,
        object: &K,
    ) -> Result<K, Error> {
        let path = checked_object_path(resource, namespace, name)?;
        let body = serde_json::to_vec(object).map_err(|e| Error::InvalidRequest {
            message: format!("cannot encode the object as JSON: {e}"),
        })?;
        let (response, encoding) = self
            .send_with(method, &path, ACCEPT_JSON, Request::List, Some(body.into()))
            .await?;
        self.read_object(response, encoding).await
    }

    /// DELETEs one object, with `preconditions.resourceVersion` when `resource_version` is given.
    /// The answer (the object, or a `Status`) is read, bounded, and dropped.
    pub(crate) async fn delete_object(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<(), Error> {
        let path = checked_object_path(resource, namespace, Some(name))?;
        let mut options = serde_json::json!({"kind": "DeleteOptions", "apiVersion": "v1"});
        if let Some(rv) = resource_version {
            options["preconditions"] = serde_json::json!({ "resourceVersion": rv });
        }
        let body = Bytes::from(options.to_string());
        let (response, encoding) = self
            .send_with(
                Method::DELETE,
                &path,
                ACCEPT_JSON,
                Request::List,
                Some(body),
            )
            .await?;
        self.read_list_body(response, encoding, self.inner.max_list_body)
            .await?;
        Ok(())
    }

    /// Reads an answer that is one object (bounded as a list body) and decodes it as `K`.
    async fn read_object<K: DeserializeOwned>(
        &self,
        response: reqwest::Response,
        encoding: Encoding,
    ) -> Result<K, Error> {
        let body = self
            .read_list_body(response, encoding, self.inner.max_list_body)
            .await?;
        serde_json::from_slice(&body).map_err(|source| Error::Decode {
            what: "object",
            line: None,
            offset: None,
            source: kinformer_core::Error::Decode {
                what: "object",
                source,
            },
        })
    }

    /// Reads a list body: at most `limit` bytes once decompressed (else
    /// [`Error::BodyTooLarge`] naming `limit`), with no more than `list_progress_timeout`
    /// between chunks.
    async fn read_list_body(
        &self,
        response: reqwest::Response,
        encoding: Encoding,
        limit: usize,
    ) -> Result<Vec<u8>, Error> {
        // The announced length is the body's own only when it is not gzipped.
        let capacity = match encoding {
            Encoding::Identity => response.content_length().unwrap_or(0) as usize,
            Encoding::Gzip => 0,
        };
        let mut chunks = self.body_chunks(response, encoding, limit)?;
        let mut body = Vec::with_capacity(capacity.min(limit));
        while let Some(chunk) = chunks.next().await? {
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// The chunks of a response body, decompressed, each within `list_progress_timeout` of
    /// the one before, `limit` bytes in all at most ([`Error::BodyTooLarge`] past it, or at once
    /// if the announced length is over it).
    fn body_chunks(
        &self,
        response: reqwest::Response,
        encoding: Encoding,
        limit: usize,
    ) -> Result<BodyChunks, Error> {
        // The announced length is the compressed one for a gzip body: a bound from below.
        if response.content_length().unwrap_or(0) > limit as u64 {
            return Err(Error::BodyTooLarge { limit });
        }
        Ok(BodyChunks {
            client: self.clone(),
            chunks: decoded(response, encoding),
            progress: self.inner.list_progress_timeout,
            left: limit,
            limit,
        })
    }

    /// Maps a failure to read a body: the transport's, or corrupt gzip (which is a
    /// [`Error::Request`]: the body did not arrive as sent).
    fn body_error(&self, e: &BodyError) -> Error {
        match e {
            BodyError::Transport(e) => self.transport_error(e),
            BodyError::Gzip(_) => Error::Request {
                source: error_chain(e).into(),
            },
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
    /// response of a 2xx answer and the encoding of its body (one the request asked for, else
    /// [`Error::UnexpectedEncoding`]), the mapped error otherwise.
    async fn send(
        &self,
        path: &str,
        accept: &'static str,
        kind: Request,
    ) -> Result<(reqwest::Response, Encoding), Error> {
        self.send_with(Method::GET, path, accept, kind, None).await
    }

    /// Sends a request with this method and, when given, this JSON body, the way
    /// [`send`](Self::send) sends a GET: the same credentials (and retry on a 401), bounds,
    /// encodings and error mapping. The body is cheap to clone for the retry.
    async fn send_with(
        &self,
        method: Method,
        path: &str,
        accept: &'static str,
        kind: Request,
        body: Option<Bytes>,
    ) -> Result<(reqwest::Response, Encoding), Error> {
        let watch = matches!(kind, Request::Watch { .. });
        let span = tracing::debug_span!(
            "request",
            method = method.as_str(),
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
                let mut request = self
                    .inner
                    .http
                    .request(method.clone(), &url)
                    .header(ACCEPT, accept)
                    .header(ACCEPT_ENCODING, kind.encoding().header_value());
                if let Some(body) = &body {
                    request = request.header(CONTENT_TYPE, ACCEPT_JSON).body(body.clone());
                }
                // A watch lasts as long as the server keeps it: no request timeout.
                if let (Request::List, Some(limit)) = (kind, self.inner.request_timeout) {
                    request = request.timeout(limit);
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
                    let encoding = encoding_of(response.headers(), kind.encoding())?;
                    return Ok((response, encoding));
                }
                if status == StatusCode::UNAUTHORIZED
                    && !refreshed
                    && self.inner.credentials.invalidate().await
                {
                    tracing::debug!("401: fetching credentials again and retrying once");
                    refreshed = true;
                    continue;
                }
                let error = self.error_from_response(response, kind.encoding()).await;
                tracing::debug!(%error, "error response");
                return Err(error);
            }
        }
        .instrument(span)
        .await
    }
}

/// The proxy of the environment, by Go's rules, for every request (`Proxy::custom` asks per
/// connection, so a redirect to another host is judged on its own). A SOCKS proxy that the
/// server's own URL would go through is refused here: reqwest is built without SOCKS, and a
/// proxy that cannot be used must not be silently skipped.
fn env_proxy(
    builder: reqwest::ClientBuilder,
    env: ProxyEnv,
    cluster_url: &str,
) -> Result<reqwest::ClientBuilder, Error> {
    if env.is_empty() {
        return Ok(builder);
    }
    if let Some((proxy, var)) = reqwest::Url::parse(cluster_url)
        .ok()
        .as_ref()
        .and_then(|url| env.select(url))
    {
        let shown = crate::secret::redact_url(proxy.as_str());
        if !matches!(proxy.scheme(), "http" | "https") {
            return Err(Error::config(
                None,
                var,
                format!(
                    "{shown:?}: only HTTP(S) proxies are supported; set NO_PROXY for the \
                     server, or a proxy-url in the kubeconfig"
                ),
            ));
        }
        tracing::debug!(proxy = %shown, from = var, "requests go through the proxy");
    }
    Ok(builder.proxy(reqwest::Proxy::custom(move |url| {
        env.select(url).map(|(proxy, _)| proxy.clone())
    })))
}

/// How far each list in progress has come, by the continue token that carries it on, so that a
/// list is bounded over all its pages whoever pages it. At most [`MAX_LISTS_IN_PROGRESS`] are
/// kept; the oldest is forgotten first (a list abandoned mid-way is never finished).
#[derive(Default)]
struct ListsInProgress {
    hasher: std::hash::RandomState,
    /// (the key of the list path and the token that continues it, the list's totals so far)
    lists: parking_lot::Mutex<VecDeque<(u64, ListTotals)>>,
}

/// The most lists one client follows at once.
const MAX_LISTS_IN_PROGRESS: usize = 1024;

/// What one list has taken so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct ListTotals {
    pages: usize,
    objects: u64,
    bytes: u64,
}

impl ListsInProgress {
    /// The key of a continue token of the list at `path`.
    fn key(&self, path: &str, token: &str) -> u64 {
        self.hasher.hash_one((path, token))
    }

    /// The totals of the list that `key` continues (zero for a token the client did not hand
    /// out, or forgot).
    fn get(&self, key: u64) -> ListTotals {
        let lists = self.lists.lock();
        lists
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, t)| *t)
            .unwrap_or_default()
    }

    /// A page was received: the token `from` is used up, and `to` (if the list goes on)
    /// continues it with these totals.
    fn advance(&self, from: Option<u64>, to: Option<u64>, totals: ListTotals) {
        let mut lists = self.lists.lock();
        if let Some(from) = from {
            lists.retain(|(k, _)| *k != from);
        }
        if let Some(to) = to {
            lists.retain(|(k, _)| *k != to);
            if lists.len() >= MAX_LISTS_IN_PROGRESS {
                lists.pop_front();
            }
            lists.push_back((to, totals));
        }
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
    /// [`MAX_ERROR_BODY`] bytes of the body are read (decompressed, when it came in the gzip
    /// that was asked for; a body in another encoding is not read), with the list progress
    /// bound between chunks; what arrived by then is used.
    async fn error_from_response(&self, response: reqwest::Response, asked: Encoding) -> Error {
        let code = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut body = Vec::new();
        if let Ok(encoding) = encoding_of(response.headers(), asked) {
            let mut chunks: Body = decoded(response, encoding);
            while body.len() < MAX_ERROR_BODY {
                match tokio::time::timeout(self.inner.list_progress_timeout, chunks.next()).await {
                    Ok(Some(Ok(chunk))) => {
                        let room = MAX_ERROR_BODY - body.len();
                        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                    }
                    _ => break,
                }
            }
        }
        Error::from_response(code, retry_after.as_deref(), &body)
    }
}

/// Whether a response's `Content-Type` is protobuf (`application/vnd.kubernetes.protobuf`, with
/// or without `;stream=watch`).
fn is_protobuf(headers: &reqwest::header::HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case(ACCEPT_PROTOBUF))
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

/// The path of one object of `resource` (`name`), or of the collection a new one is created in
/// (`None`), after checking what comes from outside as [`checked_list_path`] does, and the name
/// as a path segment. A namespaced resource needs a namespace here: an object is read and
/// written in its own.
fn checked_object_path(
    resource: &ApiResource,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Result<String, Error> {
    let namespace = match resource.scope {
        Scope::Namespaced => match namespace.filter(|ns| !ns.is_empty()) {
            Some(ns) => Some(ns),
            None => {
                return Err(Error::InvalidName {
                    what: "namespace",
                    value: String::new(),
                    problems: "may not be empty: an object of a namespaced resource is read \
                               and written in its namespace (Api::namespaced)"
                        .to_owned(),
                });
            }
        },
        Scope::Cluster => None,
    };
    let base = checked_list_path(resource, namespace)?;
    let Some(name) = name else {
        return Ok(base);
    };
    let problems = validation::validate_object_name(name);
    if !problems.is_empty() {
        return Err(Error::InvalidName {
            what: "name",
            value: name.to_owned(),
            problems: problems.join("; "),
        });
    }
    Ok(resource.object_path(namespace, name))
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

/// A response body's chunks as [`Client::body_chunks`] bounds them.
struct BodyChunks {
    client: Client,
    chunks: Body,
    progress: Duration,
    /// Bytes the body may still take.
    left: usize,
    limit: usize,
}

impl BodyChunks {
    /// The next chunk, `None` at the body's end.
    async fn next(&mut self) -> Result<Option<Bytes>, Error> {
        let chunk = tokio::time::timeout(self.progress, self.chunks.next())
            .await
            .map_err(|_| Error::Timeout {
                waiting_for: "the next bytes of the response body",
                limit: self.progress,
            })?
            .transpose()
            .map_err(|e| self.client.body_error(&e))?;
        if let Some(chunk) = &chunk {
            if chunk.len() > self.left {
                tracing::debug!(limit = self.limit, "response body over the limit");
                return Err(Error::BodyTooLarge { limit: self.limit });
            }
            self.left -= chunk.len();
        }
        Ok(chunk)
    }

    /// The chunks as a stream that ends after its first error.
    fn into_stream(self) -> impl futures_util::Stream<Item = Result<Bytes, Error>> + Unpin {
        Box::pin(futures_util::stream::unfold(
            Some(self),
            |state| async move {
                let mut chunks = state?;
                match chunks.next().await {
                    Ok(Some(chunk)) => Some((Ok(chunk), Some(chunks))),
                    Ok(None) => None,
                    Err(e) => Some((Err(e), None)),
                }
            },
        ))
    }
}
