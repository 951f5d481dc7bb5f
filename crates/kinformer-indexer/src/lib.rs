//! The indexer: a thread-safe cache of `Arc<K>` by object key, with named indexes.
//!
//! An [`Indexer`] is the writer the pipeline holds; [`IndexerReader`]s are cheap clones anyone
//! may hold. The cache keeps objects by key (`namespace/name` or `name`) and, for each named
//! [`IndexFunc`] (object → list of values), which keys produced each value. It implements the
//! cache seams of `kinformer-core`, so no other layer depends on this crate:
//!
//! - [`CacheWrite`](kinformer_core::CacheWrite) on the [`Indexer`]: `upsert` and `remove`
//!   return the object they replaced, `apply_batch` applies several writes under one write lock
//!   (readers see all of them or none), `replace_all` builds new contents off the lock, swaps
//!   them in at once and says what each object replaced and what was removed;
//! - [`ReflectorStore`](kinformer_core::ReflectorStore) on the [`Indexer`], so a reflector can
//!   fill it directly, with a native relist protocol: a relist is built page by page beside the
//!   live cache and swapped in at its end (abandoning it leaves the cache untouched); a listed
//!   object whose resourceVersion equals the held one's keeps the held `Arc` and its index values,
//!   and the fresh copy is dropped at once, so relisting an unchanged state never holds two copies
//!   of the objects;
//! - [`CacheRead`](kinformer_core::CacheRead) and [`IndexRead`](kinformer_core::IndexRead) on
//!   both handles: what the delta FIFO asks about the consumer's objects and what the lister
//!   reads ([`get_by_key`](kinformer_core::CacheRead::get_by_key),
//!   [`list`](kinformer_core::CacheRead::list), [`list_keys`](kinformer_core::CacheRead::list_keys)
//!   (sorted here), [`by_index`](kinformer_core::IndexRead::by_index)...). [`IndexerReader`] adds
//!   the reads the traits lack: [`get`](IndexerReader::get), [`len`](IndexerReader::len),
//!   [`index`](IndexerReader::index) (objects sharing any of an object's values),
//!   [`index_keys`](IndexerReader::index_keys) (sorted) and
//!   [`list_index_func_values`](IndexerReader::list_index_func_values); an unknown index is
//!   [`StoreError::UnknownIndex`](kinformer_core::StoreError::UnknownIndex), never a panic;
//! - [`add_indexers`](Indexer::add_indexers) works at any time and indexes what is cached; a
//!   duplicate name and a failing index function are this crate's [`Error`]s; a value whose set
//!   of keys becomes empty is removed;
//! - built-in index functions in [`index`]: namespace, a label's value, owner UIDs, a pod's
//!   `spec.nodeName`.
//!
//! Reads never block each other (a `parking_lot` reader-writer lock); a writer computes index
//! values before it takes the lock and holds it only to apply them. Each entry keeps the values
//! its object produced (sharing the value strings with the index), so an update compares them
//! with the new ones and touches the index only where they differ, and never runs an index
//! function on the object it replaces. An object an index function refuses is not stored:
//! writes answer [`StoreError::IndexFunc`](kinformer_core::StoreError::IndexFunc).
//!
//! # What it does not do
//! No IO, no events: it does not tell anyone that something changed (the informer does, from
//! what the writes return). It does not copy objects: what you get is the `Arc` that was stored.
//!
//! # Example
//! An indexer with no informer:
//! ```
//! use std::sync::Arc;
//! use kinformer_core::{CacheRead, CacheWrite, DynamicObject, IndexRead, ReflectorStoreExt};
//! use kinformer_indexer::{Indexer, index};
//!
//! fn obj(ns: &str, name: &str, app: &str, rv: &str) -> Arc<DynamicObject> {
//!     let mut o = DynamicObject::default();
//!     o.metadata.namespace = Some(ns.into());
//!     o.metadata.name = Some(name.into());
//!     o.metadata.resource_version = Some(rv.into());
//!     o.metadata.labels = Some([("app".to_string(), app.to_string())].into());
//!     Arc::new(o)
//! }
//!
//! let indexer = Indexer::with_indexers([
//!     (index::NAMESPACE.to_string(), index::namespace()),
//!     ("app".to_string(), index::label("app")),
//! ])
//! .unwrap();
//! let reader = indexer.reader();
//! let web = obj("shop", "web-0", "web", "1");
//! assert!(indexer.upsert(Arc::clone(&web)).unwrap().is_none());
//! indexer.upsert(obj("shop", "db-0", "db", "2")).unwrap();
//! indexer.upsert(obj("blog", "web-0", "web", "3")).unwrap();
//!
//! assert!(reader.get_by_key("shop/web-0").is_some());
//! let keys = reader.index_keys("app", "web").unwrap();
//! assert_eq!(keys.iter().map(|k| k.as_str()).collect::<Vec<_>>(), ["blog/web-0", "shop/web-0"]);
//! assert_eq!(reader.list_index_func_values(index::NAMESPACE).unwrap(), ["blog", "shop"]);
//! assert_eq!(reader.namespace_index(), Some(index::NAMESPACE));
//! assert!(reader.by_index("no-such-index", "x").is_err());
//!
//! // The removed object comes back.
//! assert!(indexer.remove("blog/web-0").is_some());
//! assert_eq!(reader.list_index_func_values(index::NAMESPACE).unwrap(), ["shop"]);
//!
//! // A relist page by page; an unchanged object keeps the `Arc` already held.
//! indexer.begin_relist().unwrap();
//! indexer.relist_page(vec![obj("shop", "web-0", "web", "1")]).unwrap();
//! assert_eq!(reader.len(), 2, "nothing is visible before the end");
//! indexer.end_relist("10".into()).unwrap();
//! assert_eq!(reader.len(), 1);
//! assert!(Arc::ptr_eq(&reader.get_by_key("shop/web-0").unwrap(), &web));
//! ```

#![forbid(unsafe_code)]

use std::sync::Arc;

pub mod index;
mod store;

pub use store::{Indexer, IndexerReader};

/// An index function: the values under which an object is indexed (none, one or several), or a
/// message saying why it cannot be indexed. It runs once per stored version of an object: the
/// values are kept with the entry, so updates and deletes never run it on the old object.
pub type IndexFunc<K> = Arc<dyn Fn(&K) -> Result<Vec<String>, String> + Send + Sync>;

/// What can go wrong configuring the indexes ([`Indexer::with_indexers`],
/// [`Indexer::add_indexers`]). Neither is retryable as such: each names a mistake in the
/// configuration or an object the new index functions cannot handle. Reads and writes answer
/// [`kinformer_core::StoreError`] instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An index of this name exists already (or the name was given twice); nothing was added.
    #[error("an index named {name:?} exists already")]
    DuplicateIndex {
        /// The name given.
        name: String,
    },
    /// A new index function failed for a cached object, so no index was added. Fix the function
    /// or the object.
    #[error("index function {index:?} failed for {key}: {message}")]
    IndexFunc {
        /// The name of the index.
        index: String,
        /// The key of the object.
        key: String,
        /// What the function said.
        message: String,
    },
}
