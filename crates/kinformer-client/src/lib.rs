//! Raw Kubernetes list/watch (and single-object reads and writes) over HTTP: the bottom layer of
//! kinformer that touches the network.
//!
//! What it does:
//! - [`Api`]: the HTTP implementation of
//!   [`ListWatch`](kinformer_core::list_watch::ListWatch) (the trait the reflector consumes,
//!   defined in `kinformer-core`) for one resource, typed (any k8s-openapi type), dynamic
//!   ([`DynamicObject`](kinformer_core::DynamicObject) with an
//!   [`ApiResource`](kinformer_core::ApiResource)) or metadata-only
//!   ([`PartialObjectMetadata`](kinformer_core::PartialObjectMetadata)), namespaced or
//!   cluster-wide.
//! - Watches decoded as the bytes arrive ([`WatchDecoder`], [`decode_watch`]), with a maximum
//!   line length, an idle timeout, and typed errors that say whether to resume or relist.
//! - [`Discovery`]: the resources the server serves (`/api`, `/apis` and each group version's
//!   list, fetched at once under one bound), and kubectl's way of resolving a typed name
//!   (`po`, `deployments.apps`, `widgets.example.com`) to one of them.
//! - [`Config`] from a kubeconfig ([`Kubeconfig`], merged across `KUBECONFIG` files with kubectl's
//!   rules) or from inside a pod: TLS with rustls, bearer tokens, rotating token files, basic
//!   auth, client certificates, and exec credential plugins.
//! - Proxies as kubectl: a cluster's `proxy-url`, else `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY`
//!   with the rules of Go's `ProxyFromEnvironment` ([`ProxyEnv`]); loopback is never proxied.
//! - Bounds on everything a server controls: waits, body and line sizes, each list's pages,
//!   objects and bytes along its continue tokens, the whole time of a non-watch request, and
//!   encodings that were not asked for (see [`Config`]'s fields).
//! - Counts the bytes of each list and watch body and times their decoding through the
//!   `metrics` facade ([`metric_names`]), at no cost when no recorder is installed.
//!
//! What it does not do: retry, back off, relist or resume. Every [`Error`] says which of those
//! fits ([`Error::kind`], [`Error::is_retryable`], [`Error::is_gone`], [`Error::is_resumable`],
//! [`Error::retry_after`]), and [`Api`] answers through
//! [`ListWatch`](kinformer_core::list_watch::ListWatch) with the neutral
//! [`list_watch::Error`](kinformer_core::list_watch::Error) of the same kind, which the
//! reflector acts on; [`Error::from_list_watch`] gets the client's error back from it. Paging over
//! any `ListWatch` is `kinformer_core::list_watch::{Pager, list_all}`. Besides lists and watches
//! it reads and writes one object at a time ([`Api::get`], [`Api::create`], [`Api::replace`],
//! [`Api::delete`], with optimistic concurrency on `resourceVersion`), and no more: no patch,
//! no apply, no subresources, no collection deletes. Of the legacy auth-provider plugins only `oidc` is kept (its configured `id-token` is
//! sent while valid, never refreshed); the others are refused. `tls-server-name` changes which
//! name the server's certificate is verified against, not the SNI sent.
//!
//! Modules, each using only those before it: `error`, `secret`, `kubeconfig` (the file), `proxy`
//! (the proxy environment, with Go's rules), `config` (describes), `tls` and `auth` (build from
//! it), `body` (encodings), `decode`, `list`, `client`, `api`, `discovery`.
//!
//! # Example
//! ```no_run
//! use futures_util::StreamExt;
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_client::{Api, Client};
//! use kinformer_core::list_watch::{DEFAULT_PAGE_SIZE, ErrorKind, ListWatch, list_all};
//! use kinformer_core::{ListParams, WatchEvent, WatchParams};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::try_default()?;
//! let pods: Api<Pod> = Api::all(client);
//! let snapshot = list_all(&pods, &ListParams::default(), DEFAULT_PAGE_SIZE).await?;
//! let mut events = pods
//!     .watch(&WatchParams {
//!         resource_version: Some(snapshot.resource_version.to_string()),
//!         allow_watch_bookmarks: true,
//!         timeout_seconds: Some(300),
//!         ..WatchParams::default()
//!     })
//!     .await?;
//! while let Some(event) = events.next().await {
//!     match event {
//!         Ok(WatchEvent::Added(pod)) => println!("added {:?}", pod.metadata.name),
//!         Ok(_) => {}
//!         Err(e) if e.kind() == ErrorKind::Resume => break, // watch again from the last resourceVersion
//!         Err(e) => return Err(e.into()),
//!     }
//! }
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

mod api;
mod auth;
mod body;
mod client;
mod config;
mod decode;
#[cfg(test)]
mod decode_threads;
mod discovery;
mod error;
mod kubeconfig;
mod list;
mod proxy;
mod secret;
mod tls;

pub use api::Api;
pub use client::Client;
pub use config::{
    AuthConfig, ClientIdentity, Config, DEFAULT_MAX_LIST_BODY, DEFAULT_MAX_LIST_BYTES,
    DEFAULT_MAX_LIST_OBJECTS, DEFAULT_MAX_LIST_PAGES, DEFAULT_MAX_WATCH_LINE,
    DEFAULT_REQUEST_TIMEOUT, KubeconfigOptions, ObjectEncoding, SERVICE_ACCOUNT_DIR,
};
pub use decode::{WatchDecoder, decode_watch};
pub use discovery::{DiscoveredResource, Discovery, DiscoveryOptions, FailedGroupVersion};
pub use error::{Error, ListBound};
pub use kinformer_core::trim::ManagedFieldsDecode;
pub use kubeconfig::{
    AuthInfo, Cluster, Context, ExecConfig, ExecEnvVar, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext,
};
pub use proxy::ProxyEnv;
pub use secret::SecretString;

/// The names of the client's metrics, through the `metrics` facade (docs/metrics.md lists every
/// metric of the pipeline). Each is labelled `resource` (the plural, with the group when there
/// is one: `deployments.apps`) and `verb` (`list`, or `watch` for watches and streaming lists).
/// With no recorder installed they cost nothing; the handles are made once per request.
pub mod metric_names {
    /// Bytes of list and watch response bodies read, after gzip decompression (a counter).
    pub const BYTES_READ: &str = "kinformer_client_bytes_read_total";
    /// Seconds decoding a list page, or a batch of watch lines (what the body had ready, up to
    /// 64 KiB), into objects (a histogram).
    pub const DECODE_SECONDS: &str = "kinformer_client_decode_seconds";
}
