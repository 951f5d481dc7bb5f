//! The shared informer: one list/watch of a resource shared by many event handlers, with a cache
//! that is updated before any handler hears of a change.
//!
//! What it does, as client-go's `SharedIndexInformer`:
//! - Pulls a stream of [`StoreEvent`](kinformer_core::StoreEvent)s (normally the reflector's
//!   `watcher(api, config)`; any stream will do: kube-runtime's `watcher()` through a `map`, a
//!   replay, a test's hand-made list) into a queue (normally the delta FIFO), only while the queue
//!   is ready, and pops it into a cache (normally the indexer) by the consumer contract of
//!   `kinformer-core`, so a delete can never be lost between the queue and the cache. Each layer
//!   is a core trait or a stream and can be replaced; this crate depends on `kinformer-core`
//!   alone.
//! - Hands each change to every handler ([`ResourceEventHandler`], or closures through
//!   [`HandlerFns`]). Each handler has its own buffer and thread: a slow or stuck handler never
//!   delays the cache, the other handlers or the watch. A handler that panics is logged with its
//!   name and the object's key, counted, and called again for the next event (aborting instead
//!   is a setting).
//! - Replays the cache to a handler added after start (`on_add(obj, true)` for each object, then
//!   live events, with no gap and no duplicate); each [`Registration`] has its own `has_synced`
//!   and can be removed.
//! - Resyncs per handler with client-go's rules, and gives updates whose old and new
//!   resourceVersions are equal only to handlers due for a resync, so a relist does not flood
//!   every handler with no-op updates.
//! - `has_synced`, [`wait_for_cache_sync`] over any number of informers (event-driven, with a
//!   timeout, and `false` at once for an informer shut down before it synced), the last synced
//!   resourceVersion, a transform applied once before an object is
//!   stored, and a shutdown that stops the watch, drains or drops the buffers, and waits for
//!   every handler thread.
//!
//! - Offers every notification as a `Stream` ([`SharedIndexInformer::event_stream`]) and
//!   filtering handlers ([`FilteringHandler`]: entering the filter is an add, leaving it a
//!   delete).
//!
//! - A [`SharedInformerFactory`] hands out one informer per type and resource, with a
//!   factory-wide scope and resync, per-type resync, and starts, waits for and stops them
//!   together. Each informer is built by a function the caller gives, so dynamic, metadata-only
//!   and custom informers are just other functions.
//!
//! # Example
//! An informer fed by a hand-made stream of store events; with a server, the stream is
//! `kinformer_reflector::watcher(Api::all(client), config)`.
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use futures_util::{StreamExt as _, stream};
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_core::StoreEvent;
//! use kinformer_delta_fifo::DeltaFifo;
//! use kinformer_indexer::Indexer;
//! use kinformer_shared_informer::{HandlerFns, InformerConfig, SharedIndexInformer, wait_for_cache_sync};
//! use kinformer_test_support::typed_pods;
//!
//! // A list of three pods, then a watch that stays open with nothing to say.
//! let events = stream::iter([
//!     StoreEvent::RelistBegin,
//!     StoreEvent::RelistPage(typed_pods(3)),
//!     StoreEvent::RelistEnd("7".into()),
//! ])
//! .chain(stream::pending());
//! let cache = Arc::new(Indexer::<Pod>::new());
//! let queue = Arc::new(DeltaFifo::new(cache.clone()));
//! let informer = Arc::new(SharedIndexInformer::new(events, queue, cache, InformerConfig::default()));
//! let added = Arc::new(AtomicUsize::new(0));
//! let seen = added.clone();
//! let registration = informer
//!     .add_handler(HandlerFns::new().on_add(move |_, _| {
//!         seen.fetch_add(1, Ordering::SeqCst);
//!     }))
//!     .unwrap();
//! let run = tokio::spawn({
//!     let informer = informer.clone();
//!     async move { informer.run().await }
//! });
//! assert!(wait_for_cache_sync(&[&*informer], None).await);
//! while !registration.has_synced() {
//!     tokio::task::yield_now().await;
//! }
//! assert_eq!(added.load(Ordering::SeqCst), 3);
//! assert_eq!(informer.last_sync_resource_version().unwrap().as_str(), "7");
//! informer.shutdown().await;
//! run.await.unwrap();
//! # }
//! ```

#![forbid(unsafe_code)]

mod factory;
mod freshness;
mod handler;
mod informer;

pub use factory::{InformerOptions, ManagedInformer, SharedInformerFactory};
pub use freshness::{Freshness, FreshnessError};
pub use handler::{BufferPolicy, FilteringHandler, HandlerFns, ResourceEventHandler};
pub use informer::StoreEvents;
pub use informer::{
    EventStream, HasSynced, InformerConfig, MIN_RESYNC_PERIOD, Registration, SharedIndexInformer,
    Transform, wait_for_cache_sync,
};

/// What the shared informer can refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A handler was added to an informer that has been shut down: it would hear nothing and
    /// its thread would never stop. Give up, or build a new informer.
    #[error("handler not added: the informer {informer:?} has been shut down")]
    Stopped {
        /// The informer's name.
        informer: String,
    },
}

/// The names of the informer's metrics, through the `metrics` facade (docs/metrics.md lists
/// every metric of the pipeline). The informer's own gauges are labelled `informer` with
/// [`InformerConfig::name`](crate::InformerConfig::name) and `resource` with
/// [`InformerConfig::resource`](crate::InformerConfig::resource) (the name when
/// empty); a handler's are labelled `handler` with its name (`pods#0`: the informer's name and
/// the handler's number). Gauges of versions hold them as numbers: versions are decimal
/// integers (KEP-5504), and one that is not is skipped.
pub mod metric_names {
    /// Objects in the cache (a gauge).
    pub const CACHE_OBJECTS: &str = "kinformer_informer_cache_objects";
    /// The resourceVersion the cache has reached (a gauge; see
    /// [`SharedIndexInformer::cache_resource_version`](crate::SharedIndexInformer::cache_resource_version)).
    pub const CACHE_RESOURCE_VERSION: &str = "kinformer_informer_cache_resource_version";
    /// The resourceVersion of the last bookmark the informer took (a gauge).
    pub const BOOKMARK_RESOURCE_VERSION: &str = "kinformer_informer_bookmark_resource_version";
    /// Items waiting in the queue between the watch and the cache, after the last pop (a gauge).
    pub const QUEUE_DEPTH: &str = "kinformer_informer_queue_depth";
    /// How long the oldest item in the queue had waited, in seconds, after the last pop (a
    /// gauge; 0 when the queue is empty).
    pub const QUEUE_OLDEST_AGE_SECONDS: &str = "kinformer_informer_queue_oldest_age_seconds";
    /// Seconds from [`run`](crate::SharedIndexInformer::run) to the first sync (a gauge, set
    /// once).
    pub const TIME_TO_FIRST_SYNC_SECONDS: &str = "kinformer_informer_time_to_first_sync_seconds";
    /// Handler panics, labelled `handler`.
    pub const HANDLER_PANICS: &str = "kinformer_informer_handler_panics_total";
    /// Notifications a handler has not yet handled (a gauge), labelled `handler`.
    pub const HANDLER_BACKLOG: &str = "kinformer_informer_handler_backlog";
    /// How long the notification a handler last took had waited, in seconds (a gauge),
    /// labelled `handler`.
    pub const HANDLER_LAG_SECONDS: &str = "kinformer_informer_handler_lag_seconds";
}
