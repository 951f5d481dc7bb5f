//! The traits where the reflector, the delta FIFO and the indexer meet.

use std::sync::Arc;
use std::task::{Context, Poll};

use crate::{Error, Object, ObjectKey, ResourceVersion};

/// What a reflector writes into: client-go's `cache.Store` as the reflector sees it.
///
/// The delta FIFO implements it (the default pipeline), and so does the indexer (a reflector that
/// fills a cache directly, with no handlers). Writes are synchronous and cheap; a store that wants
/// to slow its writer down (a bounded queue) says so through [`poll_ready`](Self::poll_ready),
/// which the reflector awaits before each write.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use kinformer_core::{DynamicObject, Error, Object, ReflectorStore, ResourceVersion};
///
/// /// Counts writes; a stand-in for a real store.
/// #[derive(Default)]
/// struct Counter(Mutex<usize>);
///
/// impl ReflectorStore<DynamicObject> for Counter {
///     fn add(&self, _: Arc<DynamicObject>) -> Result<(), Error> { *self.0.lock().unwrap() += 1; Ok(()) }
///     fn update(&self, _: Arc<DynamicObject>) -> Result<(), Error> { *self.0.lock().unwrap() += 1; Ok(()) }
///     fn delete(&self, _: Arc<DynamicObject>) -> Result<(), Error> { *self.0.lock().unwrap() += 1; Ok(()) }
///     fn replace(&self, list: Vec<Arc<DynamicObject>>, _: ResourceVersion) -> Result<(), Error> {
///         *self.0.lock().unwrap() = list.len();
///         Ok(())
///     }
/// }
///
/// let store = Arc::new(Counter::default());
/// store.add(Arc::new(DynamicObject::default())).unwrap();
/// store.replace(vec![], "5".into()).unwrap();
/// assert_eq!(*store.0.lock().unwrap(), 0);
/// ```
pub trait ReflectorStore<K: Object>: Send + Sync {
    /// An `ADDED` event.
    fn add(&self, object: Arc<K>) -> Result<(), Error>;

    /// A `MODIFIED` event.
    fn update(&self, object: Arc<K>) -> Result<(), Error>;

    /// A `DELETED` event; `object` is the last state the server sent.
    fn delete(&self, object: Arc<K>) -> Result<(), Error>;

    /// A complete list at `resource_version`: the store's contents become exactly `objects`, and
    /// whatever it held that the list lacks is deleted.
    fn replace(&self, objects: Vec<Arc<K>>, resource_version: ResourceVersion)
    -> Result<(), Error>;

    /// A periodic resync: re-deliver what is known. The default does nothing.
    fn resync(&self) -> Result<(), Error> {
        Ok(())
    }

    /// The watch has reached `resource_version` (a bookmark, or the end of a list). The default
    /// does nothing.
    fn bookmark(&self, resource_version: &ResourceVersion) {
        let _ = resource_version;
    }

    /// Ready for another write? A bounded store returns `Pending` while full and wakes the task
    /// when there is room: backpressure, never a dropped event. The default is always ready.
    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let _ = cx;
        Poll::Ready(Ok(()))
    }
}

/// What a store already holds, as the delta FIFO asks it (client-go's `KeyListerGetter`): the FIFO
/// consults the indexer to make tombstones on `Replace` and `Sync` deltas on resync.
///
/// ```
/// use std::collections::BTreeMap;
/// use std::sync::Arc;
/// use kinformer_core::{DynamicObject, KnownObjects, ObjectKey};
///
/// let mut known: BTreeMap<ObjectKey, Arc<DynamicObject>> = BTreeMap::new();
/// known.insert(ObjectKey::new(Some("ns"), "a"), Arc::new(DynamicObject::default()));
/// assert_eq!(known.list_keys(), vec![ObjectKey::new(Some("ns"), "a")]);
/// assert!(known.get_by_key("ns/a").is_some());
/// ```
pub trait KnownObjects<K>: Send + Sync {
    /// Every key the store holds.
    fn list_keys(&self) -> Vec<ObjectKey>;

    /// The object stored under `key`, if any.
    fn get_by_key(&self, key: &str) -> Option<Arc<K>>;
}

macro_rules! forward_store {
    ($($ptr:ty),*) => {$(
        impl<K: Object, S: ReflectorStore<K> + ?Sized> ReflectorStore<K> for $ptr {
            fn add(&self, object: Arc<K>) -> Result<(), Error> {
                (**self).add(object)
            }
            fn update(&self, object: Arc<K>) -> Result<(), Error> {
                (**self).update(object)
            }
            fn delete(&self, object: Arc<K>) -> Result<(), Error> {
                (**self).delete(object)
            }
            fn replace(&self, objects: Vec<Arc<K>>, rv: ResourceVersion) -> Result<(), Error> {
                (**self).replace(objects, rv)
            }
            fn resync(&self) -> Result<(), Error> {
                (**self).resync()
            }
            fn bookmark(&self, rv: &ResourceVersion) {
                (**self).bookmark(rv)
            }
            fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
                (**self).poll_ready(cx)
            }
        }

        impl<K, S: KnownObjects<K> + ?Sized> KnownObjects<K> for $ptr {
            fn list_keys(&self) -> Vec<ObjectKey> {
                (**self).list_keys()
            }
            fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
                (**self).get_by_key(key)
            }
        }
    )*};
}

forward_store!(&S, Arc<S>, Box<S>);

impl<K: Send + Sync> KnownObjects<K> for std::collections::BTreeMap<ObjectKey, Arc<K>> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.keys().cloned().collect()
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.get(key).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DynamicObject;

    fn assert_dyn_compatible(
        _: &dyn ReflectorStore<DynamicObject>,
        _: &dyn KnownObjects<DynamicObject>,
    ) {
    }

    #[test]
    fn traits_are_dyn_compatible_and_forward_through_pointers() {
        let map: std::collections::BTreeMap<ObjectKey, Arc<DynamicObject>> = Default::default();
        let boxed: Box<dyn KnownObjects<DynamicObject>> = Box::new(map);
        let arc: Arc<dyn KnownObjects<DynamicObject>> = Arc::from(boxed);
        assert!(arc.list_keys().is_empty());
        let by_ref: &dyn KnownObjects<DynamicObject> = &&arc;
        assert!(by_ref.get_by_key("x").is_none());
        let _ = assert_dyn_compatible;
    }
}
