//! The delta FIFO: the queue between the reflector and the informer, with client-go's semantics.
//!
//! [`DeltaFifo`] is what a reflector writes into (it implements
//! [`ReflectorStore`](kinformer_core::ReflectorStore): add, update, delete, replace with a full list
//! at a resourceVersion, resync, bookmark) and what an informer pops from (it implements
//! [`DeltaQueue`](kinformer_core::DeltaQueue)). It turns writes into
//! [`Delta`](kinformer_core::Delta)s and never drops one.
//!
//! # Modes
//! - [`Mode::Classic`] (client-go's `DeltaFIFO`): one entry per key with that key's deltas in
//!   order; a key keeps its place while more deltas arrive; a pop hands out all deltas of the
//!   oldest key. Two consecutive `Deleted` deltas collapse to one (the older, unless the older is a
//!   tombstone). A relist queues a `Replaced` delta per listed object, then a tombstone
//!   ([`DeletedFinalStateUnknown`](kinformer_core::DeletedFinalStateUnknown)) for each queued key
//!   the list lacks (with the newest queued state), then one for each key the store holds that the
//!   list lacks and nothing queued names (with the stored state).
//! - [`Mode::InOrder`] (client-go's current default): a flat queue of single deltas in arrival
//!   order, popped in batches of consecutive deltas with distinct keys; a relist is one atomic
//!   step carrying the list and the tombstones for every key the consumer's store will hold when
//!   it reaches the step that the list lacks.
//!
//! In both modes a delete of a key that is neither queued nor known to the store is ignored, a
//! resync queues a `Sync` delta for each known key with nothing queued, and
//! [`has_synced`](DeltaFifo::has_synced) turns true once everything queued by the first relist
//! has been popped. A consumer whose processing fails hands the deltas back with
//! [`requeue`](DeltaFifo::requeue); they go back only if nothing newer is queued for the key.
//!
//! The queue is unbounded unless built with a [`capacity`](DeltaFifoBuilder::capacity): then a
//! full queue makes [`poll_ready`](kinformer_core::ReflectorStore::poll_ready) pending, so the
//! writer slows down; nothing is ever dropped. [`depth`](DeltaFifo::depth) and
//! [`oldest_age`](DeltaFifo::oldest_age) are there for metrics.
//!
//! # What it does not do
//! No IO, no store of its own: what the consumer has applied is known only through the
//! [`KnownObjects`](kinformer_core::KnownObjects) it is given (normally the indexer's reader). It
//! does not transform objects and does not run handlers. Writes report a closed queue as
//! [`kinformer_core::Error::StoreClosed`].
//!
//! # Example
//! A FIFO fed by hand, with a plain map as the consumer's store:
//! ```
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//! use kinformer_core::{DeltaType, DynamicObject, ObjectKey, Popped, ReflectorStore};
//! use kinformer_delta_fifo::DeltaFifo;
//!
//! fn pod(name: &str, rv: &str) -> Arc<DynamicObject> {
//!     let mut o = DynamicObject::default();
//!     o.metadata.namespace = Some("ns".into());
//!     o.metadata.name = Some(name.into());
//!     o.metadata.resource_version = Some(rv.into());
//!     Arc::new(o)
//! }
//!
//! let known: BTreeMap<ObjectKey, Arc<DynamicObject>> = BTreeMap::new();
//! let fifo = DeltaFifo::new(Arc::new(known));
//! fifo.add(pod("foo", "10")).unwrap();
//! fifo.add(pod("bar", "1")).unwrap();
//! fifo.update(pod("foo", "11")).unwrap();
//!
//! // foo keeps its place and hands out both its deltas at once.
//! let Some(Popped::Key(deltas)) = fifo.try_pop() else { panic!() };
//! let kinds: Vec<_> = deltas.iter().map(|d| d.kind).collect();
//! assert_eq!(kinds, [DeltaType::Added, DeltaType::Updated]);
//! assert_eq!(deltas[0].key().as_str(), "ns/foo");
//! assert_eq!(fifo.depth(), 1);
//! assert!(fifo.has_synced(), "the first write was not a relist");
//! ```

#![forbid(unsafe_code)]

mod fifo;

pub use fifo::{DeltaFifo, DeltaFifoBuilder, Mode};

/// Why a [`DeltaFifo`] could not be built. Not retryable: fix the configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A capacity of zero would block every write forever; leave the queue unbounded or give it
    /// room for at least one item.
    #[error("a delta FIFO's capacity must be at least 1")]
    ZeroCapacity,
    /// An in-order pop must be able to hand out at least one delta.
    #[error("a delta FIFO's batch size must be at least 1")]
    ZeroBatchSize,
}
