//! kinformer: Kubernetes informers in Rust.
//!
//! An informer lists a resource once, keeps a local cache current from a long-lived watch, and
//! calls your handlers on every change, so a controller never polls the API server. This crate
//! wires the default pipeline and re-exports every layer:
//!
//! ```text
//! API server --list/watch--> client --> reflector --> delta FIFO --> shared informer --> indexer <-- lister
//!                                                                          '--> handlers
//! ```
//!
//! `Factory` (with the default `client` feature) gives the common case in a few lines: one
//! informer per type over one client, started, waited for and stopped together, as client-go's
//! `SharedInformerFactory`. [`Informer::builder`] builds one informer and lets any layer be
//! swapped: `.list_watch(..)` (any [`ListWatch`](core::ListWatch): the HTTP client's `Api`, or
//! your own source), `.events(..)` (any stream of [`StoreEvent`](core::StoreEvent)s, which
//! replaces the reflector too), `.queue(..)`, `.cache(..)`, `.handler(..)`. The HTTP client sits
//! behind the default `client` feature: a pipeline fed from another source compiles without it.
//! The cache forms (`kinformer::compact`) sit behind the default `compact` feature.
//!
//! Controllers take keys from [`workqueue`]: client-go's work queue, with its rate limiters.
//!
//! Beyond one replica, [`partition`] feeds one informer from a changing set of shard ranges
//! (KEP-5866's `shardSelector`, or the same hash on the client) or namespaces: give its events to
//! [`InformerBuilder::partitioned`]. `coordination` (with the `client` feature) elects a leader and splits the
//! ranges between replicas through Leases. docs/scale-out.md shows when to shard and what a
//! hand-over guarantees.
//!
//! The cached object type is yours to choose: a typed `Pod`, a [`DynamicObject`](core::DynamicObject),
//! metadata only, or one of the [`compact`] forms (`Compact<Pod>`, `Compressed<Pod>`), which keep
//! the raw JSON (plain or compressed) with the decoded metadata and decode the typed object only
//! when a handler asks: `Informer::<Compact<Pod>>::builder().list_watch(Api::all(client))`.
//!
//! # Example
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use kinformer::prelude::*;
//! use k8s_openapi::api::core::v1::Pod;
//! # let sim = kinformer_sim::SimServer::start(kinformer_sim::SimConfig::default()).await?;
//! # sim.store().seed_pods(3, 1);
//! # let client = Client::new(kinformer::client::Config::new(sim.url()))?;
//!
//! let factory = Factory::new(client);
//! let pods = factory.informer::<Pod>();
//! pods.add_handler(HandlerFns::new().on_add(|pod: &Arc<Pod>, _| println!("Pod Added: {}", pod.key())))?;
//! factory.start();
//! assert!(factory.wait_synced(None).await);
//! println!("{} pods cached", pods.lister().list(&LabelSelector::everything()).len());
//! factory.shutdown().await;
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

mod builder;
pub mod consistency;
#[cfg(feature = "client")]
mod factory;
mod fresh;
mod sync;

/// README.md's Rust examples, compiled as doc tests so they never drift from the code.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

#[cfg(feature = "client")]
#[doc(inline)]
pub use kinformer_client as client;
#[cfg(feature = "compact")]
#[doc(inline)]
pub use kinformer_compact as compact;
#[cfg(feature = "client")]
#[doc(inline)]
pub use kinformer_coordination as coordination;
#[doc(inline)]
pub use kinformer_core as core;
#[doc(inline)]
pub use kinformer_delta_fifo as delta_fifo;
#[doc(inline)]
pub use kinformer_indexer as indexer;
#[doc(inline)]
pub use kinformer_lister as lister;
#[doc(inline)]
pub use kinformer_partition as partition;
#[doc(inline)]
pub use kinformer_reflector as reflector;
#[doc(inline)]
pub use kinformer_shared_informer as shared_informer;
#[doc(inline)]
pub use kinformer_workqueue as workqueue;

pub use builder::{DEFAULT_QUEUE_CAPACITY, Informer, InformerBuilder, Lister};
#[cfg(feature = "client")]
pub use factory::Factory;
pub use fresh::FreshKeys;
pub use sync::{NotSynced, SyncState};

/// What building a pipeline can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The builder was given no source to list and watch: call `.list_watch(..)`.
    #[error("no list/watch source: call .list_watch(..) on the builder")]
    MissingListWatch,
    /// The delta FIFO refused its settings.
    #[error(transparent)]
    Queue(#[from] kinformer_delta_fifo::Error),
    /// The indexer refused an index.
    #[error(transparent)]
    Indexer(#[from] kinformer_indexer::Error),
    /// The informer refused a handler: it has been shut down.
    #[error(transparent)]
    Informer(#[from] kinformer_shared_informer::Error),
}

/// A queue that cannot fail to build (see [`InformerBuilder::queue`]).
impl From<std::convert::Infallible> for Error {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What most programs need, in one `use`.
pub mod prelude {
    pub use std::sync::Arc;

    #[cfg(feature = "client")]
    pub use kinformer_client::{Api, Client};
    #[cfg(feature = "compact")]
    pub use kinformer_compact::{Compact, Compressed};
    pub use kinformer_core::{
        ApiResource, CacheRead, DeltaObject, DynamicObject, IndexRead, LabelSelector, ListWatch,
        Object, ObjectKey, PartialObjectMetadata, StoreEvent,
    };
    pub use kinformer_shared_informer::{
        FilteringHandler, HandlerFns, HasSynced, Registration, ResourceEventHandler,
        wait_for_cache_sync,
    };

    #[cfg(feature = "client")]
    pub use crate::Factory;
    pub use crate::FreshKeys;
    pub use crate::{Informer, InformerBuilder, Lister};
    pub use kinformer_workqueue::{RateLimitingQueue, WorkQueue};
}
