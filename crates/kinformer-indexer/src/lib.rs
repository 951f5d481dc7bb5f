//! The indexer: a thread-safe cache of `Arc<K>` by object key, with named indexes.
//!
//! An [`Indexer`] is the writer the pipeline holds; [`IndexerReader`]s are cheap clones anyone
//! may hold. The cache keeps objects by key (`namespace/name` or `name`) and, for each named
//! [`IndexFunc`] (object → list of values), which keys produced each value:
//!
//! - add, update, delete keep every index consistent incrementally; replace rebuilds them all and
//!   swaps the new contents in at once;
//! - reads: [`get_by_key`](IndexerReader::get_by_key), [`list`](IndexerReader::list),
//!   [`list_keys`](IndexerReader::list_keys), [`index`](IndexerReader::index) (objects sharing
//!   any of an object's values), [`by_index`](IndexerReader::by_index),
//!   [`index_keys`](IndexerReader::index_keys) (sorted) and
//!   [`list_index_func_values`](IndexerReader::list_index_func_values);
//! - [`add_indexers`](Indexer::add_indexers) works at any time and indexes what is cached; a
//!   duplicate name, an unknown index name and a failing index function are [`Error`]s, never
//!   panics; a value whose set of keys becomes empty is removed;
//! - built-in index functions in [`index`]: namespace, a label's value, owner UIDs, a pod's
//!   `spec.nodeName`.
//!
//! Reads never block each other (a `parking_lot` reader-writer lock); a writer computes index
//! values before it takes the lock and holds it only for the one update. Each entry keeps the
//! values its object produced (sharing the value strings with the index), so an update compares
//! them with the new ones and touches the index only where they differ. The indexer implements
//! [`ReflectorStore`](kinformer_core::ReflectorStore), so a reflector can fill it directly, and
//! [`KnownObjects`](kinformer_core::KnownObjects), which the delta FIFO consults. Listers read it
//! through the small [`IndexerRead`] trait.
//!
//! # What it does not do
//! No IO, no events: it does not tell anyone that something changed (the informer does). It
//! does not copy objects: what you get is the `Arc` that was stored.
//!
//! # Example
//! An indexer with no informer:
//! ```
//! use std::sync::Arc;
//! use kinformer_core::DynamicObject;
//! use kinformer_indexer::{Indexer, index};
//!
//! fn obj(ns: &str, name: &str, app: &str) -> Arc<DynamicObject> {
//!     let mut o = DynamicObject::default();
//!     o.metadata.namespace = Some(ns.into());
//!     o.metadata.name = Some(name.into());
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
//! indexer.add(obj("shop", "web-0", "web")).unwrap();
//! indexer.add(obj("shop", "db-0", "db")).unwrap();
//! indexer.add(obj("blog", "web-0", "web")).unwrap();
//!
//! assert!(reader.get_by_key("shop/web-0").is_some());
//! let keys = reader.index_keys("app", "web").unwrap();
//! assert_eq!(keys.iter().map(|k| k.as_str()).collect::<Vec<_>>(), ["blog/web-0", "shop/web-0"]);
//! assert_eq!(reader.list_index_func_values(index::NAMESPACE).unwrap(), ["blog", "shop"]);
//! assert!(reader.by_index("no-such-index", "x").is_err());
//!
//! indexer.delete_key("blog/web-0");
//! assert_eq!(reader.list_index_func_values(index::NAMESPACE).unwrap(), ["shop"]);
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

/// What the indexer can report. None of these is retryable as such: each names a mistake in how
/// the cache is used or an object the index functions cannot handle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No index has this name. Add it with [`Indexer::add_indexers`] or fix the name.
    #[error("no index named {name:?}")]
    UnknownIndex {
        /// The name asked for.
        name: String,
    },
    /// An index of this name exists already (or the name was given twice); nothing was added.
    #[error("an index named {name:?} exists already")]
    DuplicateIndex {
        /// The name given.
        name: String,
    },
    /// An index function failed for an object. On add or update the object was not stored; on
    /// replace it was left out; on `add_indexers` no index was added. Not retryable for this
    /// object: fix the function or the object.
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

/// Read access to a cache, where the lister meets the indexer.
///
/// Four required methods; [`list`](Self::list) and [`by_index`](Self::by_index) have default
/// bodies. The callbacks run while the cache is read-locked: keep them short and do not write to
/// the cache from them. Implemented by [`IndexerReader`] and forwarded through `&T`, `Arc<T>` and
/// `Box<T>`; dyn-compatible.
///
/// ```
/// use std::sync::Arc;
/// use kinformer_core::DynamicObject;
/// use kinformer_indexer::{Indexer, IndexerRead};
///
/// let indexer: Indexer<DynamicObject> = Indexer::new();
/// let read: Arc<dyn IndexerRead<DynamicObject>> = Arc::new(indexer.reader());
/// assert!(read.list().is_empty());
/// assert!(!read.has_index("namespace"));
/// ```
pub trait IndexerRead<K>: Send + Sync {
    /// The object cached under `key`.
    fn get_by_key(&self, key: &str) -> Option<Arc<K>>;

    /// Calls `f` on every cached object, in no particular order.
    fn for_each(&self, f: &mut dyn FnMut(&Arc<K>));

    /// Calls `f` on every object whose index `index` produced `value`; an unknown index is
    /// [`Error::UnknownIndex`].
    fn for_each_indexed(
        &self,
        index: &str,
        value: &str,
        f: &mut dyn FnMut(&Arc<K>),
    ) -> Result<(), Error>;

    /// Whether an index of this name exists.
    fn has_index(&self, index: &str) -> bool;

    /// Every cached object.
    fn list(&self) -> Vec<Arc<K>> {
        let mut out = Vec::new();
        self.for_each(&mut |o| out.push(Arc::clone(o)));
        out
    }

    /// The objects whose index `index` produced `value`.
    fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, Error> {
        let mut out = Vec::new();
        self.for_each_indexed(index, value, &mut |o| out.push(Arc::clone(o)))?;
        Ok(out)
    }
}

macro_rules! forward_read {
    ($($ptr:ty),*) => {$(
        impl<K, R: IndexerRead<K> + ?Sized> IndexerRead<K> for $ptr {
            fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
                (**self).get_by_key(key)
            }
            fn for_each(&self, f: &mut dyn FnMut(&Arc<K>)) {
                (**self).for_each(f)
            }
            fn for_each_indexed(&self, index: &str, value: &str, f: &mut dyn FnMut(&Arc<K>)) -> Result<(), Error> {
                (**self).for_each_indexed(index, value, f)
            }
            fn has_index(&self, index: &str) -> bool {
                (**self).has_index(index)
            }
        }
    )*};
}

forward_read!(&R, Arc<R>, Box<R>);
