//! The reflector: lists a resource, then watches it from the list's resourceVersion, and writes
//! what it sees into a [`ReflectorStore`](kinformer_core::ReflectorStore), so the store
//! converges to the server's state through every disconnect, expiry and error.
//!
//! What it does, as client-go's reflector:
//! - **Lists** page by page (500 per page) from the watch cache (`resourceVersion=0`) or with a
//!   consistent read, handing each page to the store through the relist protocol, so a relist
//!   never holds two copies of the state; or lists with a **streaming list**
//!   (`sendInitialEvents`), with a fallback when the server refuses one.
//! - **Watches** from the last synced version with bookmarks and a randomised server timeout;
//!   watches again when a watch ends; lists again on 410 Gone (from the last version, then with
//!   a consistent read when that is gone too) or after a watch that ends at once with nothing.
//! - **Retries** everything, never stopping silently: `Retry-After` when the server sends one,
//!   otherwise exponential backoff with full jitter (800 ms doubling to 30 s, reset after two
//!   healthy minutes); a watch that cannot start because of 429 or an outage is retried at the
//!   same version with no list. Each failure episode is logged once, every failure reaches the
//!   [`WatchErrorHandler`], and counters go through the `metrics` facade ([`metric_names`]).
//! - Calls the store's resync on a period, reports the last synced resourceVersion, and stops
//!   cleanly through a [`ReflectorHandle`] or by being dropped.
//!
//! For events without a store, [`watcher`] is the same loop as a `Stream` of
//! [`StoreEvent`](kinformer_core::StoreEvent)s: what a shared informer takes as its source.
//!
//! What it does not do: decode HTTP (the client layer does, behind
//! [`ListWatch`](kinformer_core::ListWatch)), keep a cache (its store does), or call handlers
//! (the shared informer does). `docs/semantics.md` lists where it differs from client-go.
//!
//! # Example: a reflector filling an indexer from the simulated server
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_client::{Api, Client, Config as ClientConfig};
//! use kinformer_core::CacheRead;
//! use kinformer_indexer::Indexer;
//! use kinformer_reflector::{Config, Reflector};
//! use kinformer_sim::{SimConfig, SimServer};
//!
//! let sim = SimServer::start(SimConfig::default()).await.unwrap();
//! sim.store().seed_pods(20, 1);
//! let client = Client::new(ClientConfig::new(&sim.url())).unwrap();
//! let pods: Api<Pod> = Api::all(client);
//! let cache = Arc::new(Indexer::<Pod>::new());
//!
//! let reflector = Reflector::new(pods, Arc::clone(&cache), Config { name: "pods".into(), ..Config::default() });
//! let handle = reflector.handle();
//! let run = tokio::spawn(async move { reflector.run().await });
//! while handle.last_sync_resource_version().is_none() {
//!     tokio::time::sleep(std::time::Duration::from_millis(5)).await;
//! }
//! assert_eq!(cache.list_keys().len(), 20);
//! handle.stop();
//! run.await.unwrap().unwrap();
//! # }
//! ```

#![forbid(unsafe_code)]

mod backoff;
mod config;
mod error;
mod events;
mod metrics;
mod reflector;

pub use config::{
    BackoffConfig, Config, InitialList, Phase, StreamingList, WatchErrorHandler, WatchErrorInfo,
};
pub use error::Error;
pub use events::{WATCHER_BUFFER, Watcher, watcher};
pub use metrics::names as metric_names;
pub use reflector::{Reflector, ReflectorHandle};

/// The result of [`Reflector::run`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
