//! The delta FIFO: the queue between the reflector and the informer, with client-go's semantics.
//!
//! [`DeltaFifo`] is what a reflector writes into (it implements
//! [`ReflectorStore`](kinformer_core::ReflectorStore): add, update, delete, a relist page by page,
//! resync, bookmark) and what an informer pops from (it implements
//! [`DeltaQueue`](kinformer_core::DeltaQueue)). It turns writes into
//! [`Delta`](kinformer_core::Delta)s and never drops one.
//!
//! # Modes
//! - [`Mode::InOrder`] (client-go's current default `RealFIFO`, and ours): a flat queue of single
//!   deltas in arrival order, popped in batches (up to [`DEFAULT_BATCH_SIZE`]) of consecutive
//!   deltas with distinct keys; a relist is one atomic step, and a resync one "sync all" step that
//!   re-delivers every object the consumer's store holds when it gets there. A relist step's
//!   deletions come from the consumer's store when it applies the step.
//! - [`Mode::Classic`] (client-go's `DeltaFIFO`): one entry per key with that key's deltas in
//!   order; a key keeps its place while more deltas arrive; a pop hands out all deltas of the
//!   oldest key. Two consecutive `Deleted` deltas collapse to one (the older, unless the older is a
//!   tombstone). A relist queues a `Replaced` delta per listed object, then a tombstone
//!   ([`DeletedFinalStateUnknown`](kinformer_core::DeletedFinalStateUnknown)) for each queued key
//!   the list lacks (with the newest queued state), then one for each key the store holds that the
//!   list lacks and nothing queued names (with the stored state); a resync queues a `Sync` delta
//!   for each stored key with nothing queued.
//!
//! In both modes a delete of a key that is neither queued nor held by the consumer's store is
//! ignored (without known objects it is queued, and the store decides), and
//! [`has_synced`](kinformer_core::DeltaQueue::has_synced) turns true once everything queued by
//! the first relist has been popped. A consumer whose processing fails hands the deltas back with
//! [`requeue`](kinformer_core::DeltaQueue::requeue); they go back only if nothing newer is queued
//! for the key.
//!
//! # The consumer contract
//! A pop hands the item to the consumer *while the queue is locked*
//! ([`DeltaQueue::poll_pop`](kinformer_core::DeltaQueue::poll_pop),
//! [`pop_into`](kinformer_core::DeltaQueue::pop_into),
//! [`try_pop_into`](DeltaFifo::try_pop_into)), and the consumer applies it to its store by
//! [`apply_popped`](kinformer_core::apply_popped) before any write can reach the queue. So a
//! write never lands between a pop and the store update: a delete that arrives then finds the
//! popped object in the store and is queued, never lost, and a relist's tombstones are computed
//! against a store that holds everything popped before it (client-go's `Pop(process)` holds its
//! lock the same way). [`pop`](kinformer_core::DeltaQueue::pop) and
//! [`try_pop`](DeltaFifo::try_pop) take items out without applying them, for consumers whose
//! store the queue does not consult. The queue's consumer side is the
//! [`DeltaQueue`](kinformer_core::DeltaQueue) trait: import it to pop, requeue, close or ask
//! whether the queue has synced.
//!
//! # Relists, page by page
//! [`ReflectorStore`](kinformer_core::ReflectorStore)'s relist protocol gathers the pages and
//! queues the relist only when it ends, so an abandoned or restarted list leaves nothing behind.
//! A listed object that the queue or the store already holds at the same resourceVersion is
//! kept as the held `Arc` and the fresh copy is dropped at once: relisting an unchanged state
//! costs a vector of pointers, not a second copy of the objects.
//!
//! The queue is unbounded unless built with a [`capacity`](DeltaFifoBuilder::capacity): then a
//! full queue makes [`poll_ready`](kinformer_core::ReflectorStore::poll_ready) pending, so the
//! writer slows down; nothing is ever dropped. [`depth`](kinformer_core::DeltaQueue::depth) and
//! [`oldest_age`](kinformer_core::DeltaQueue::oldest_age) are there for metrics.
//!
//! # What it does not do
//! No IO, no store of its own: what the consumer has applied is known only through the
//! [`CacheRead`](kinformer_core::CacheRead) it is given (normally the indexer). It does not
//! transform objects and does not run handlers. Writes report a closed queue as
//! [`StoreError::Closed`](kinformer_core::StoreError::Closed).
//!
//! # Example
//! A FIFO fed by hand, with a map behind a mutex as the consumer's store:
//! ```
//! use std::collections::BTreeMap;
//! use std::sync::{Arc, Mutex};
//! use kinformer_core::{
//!     DeltaQueue, DynamicObject, Notification, ObjectKey, Popped, ReflectorStoreExt,
//! };
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
//! let store: Arc<Mutex<BTreeMap<ObjectKey, Arc<DynamicObject>>>> = Arc::default();
//! let fifo = DeltaFifo::new(store.clone());
//! fifo.replace(vec![pod("foo", "10")], "10".into()).unwrap();
//! fifo.update(pod("foo", "11")).unwrap();
//! fifo.add(pod("bar", "1")).unwrap();
//!
//! // The relist is one step; the store holds its objects once it is applied.
//! let item = fifo.try_pop_into(&*store).unwrap();
//! assert!(matches!(item.popped, Popped::Replace(_)));
//! assert!(matches!(&item.applied.notifications[..], [Notification::Added { is_in_initial_list: true, .. }]));
//! assert!(fifo.has_synced());
//!
//! // Then the live deltas, in arrival order, in one batch.
//! let item = fifo.try_pop_into(&*store).unwrap();
//! let Popped::Batch(deltas) = &item.popped else { panic!() };
//! assert_eq!(deltas.len(), 2);
//! assert!(matches!(&item.applied.notifications[0], Notification::Updated { .. }));
//! assert_eq!(store.lock().unwrap().len(), 2);
//! ```

#![forbid(unsafe_code)]

mod classic;
mod fifo;
mod in_order;

pub use fifo::{DEFAULT_BATCH_SIZE, DeltaFifo, DeltaFifoBuilder, Mode};

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
    /// A classic queue hands out a relist key by key, so only the consumer's store can say
    /// which objects the relist deleted: without it those deletes would be lost. Give the queue
    /// [`known_objects`](DeltaFifoBuilder::known_objects), or use [`Mode::InOrder`], whose relist
    /// step lets the consumer compute them.
    #[error("a classic delta FIFO needs the consumer's store as its known objects")]
    ClassicWithoutKnownObjects,
}
