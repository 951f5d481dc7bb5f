//! Where the cache meets its readers and its one writer: [`CacheRead`], [`IndexRead`] and
//! [`CacheWrite`].
//!
//! The indexer implements all three; the lister reads through [`IndexRead`], the delta FIFO asks
//! [`CacheRead`] what the consumer holds, and the shared informer writes through [`CacheWrite`],
//! which hands back the object each write replaced (what `on_update(old, new)` needs).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::{Object, ObjectKey, StoreError};

/// The name of the namespace index, by convention: the index whose values are the objects'
/// namespaces. [`IndexRead::namespace_index`] finds it.
pub const NAMESPACE_INDEX: &str = "namespace";

/// Read access to a cache of objects by key (client-go's `KeyListerGetter`, and the read half of
/// its `Store`). Three required methods; dyn-compatible; forwarded through `&T`, `Arc<T>` and
/// `Box<T>`. Implemented for a plain `BTreeMap<ObjectKey, Arc<K>>` too, for tests and tools.
///
/// ```
/// use std::collections::BTreeMap;
/// use std::sync::Arc;
/// use kinformer_core::{CacheRead, DynamicObject, ObjectKey};
///
/// let mut cache: BTreeMap<ObjectKey, Arc<DynamicObject>> = BTreeMap::new();
/// cache.insert(ObjectKey::new(Some("ns"), "a"), Arc::new(DynamicObject::default()));
/// let read: &dyn CacheRead<DynamicObject> = &cache;
/// assert_eq!(read.list_keys(), vec![ObjectKey::new(Some("ns"), "a")]);
/// assert!(read.get_by_key("ns/a").is_some());
/// assert_eq!(read.list().len(), 1);
/// ```
pub trait CacheRead<K>: Send + Sync {
    /// The object stored under `key`, if any.
    fn get_by_key(&self, key: &str) -> Option<Arc<K>>;

    /// Every key the cache holds, in no particular order.
    fn list_keys(&self) -> Vec<ObjectKey>;

    /// Calls `f` on every cached object, in no particular order. The cache may be locked while
    /// `f` runs: keep it short and do not write to the cache from it.
    fn for_each(&self, f: &mut dyn FnMut(&Arc<K>));

    /// Every cached object, in no particular order.
    fn list(&self) -> Vec<Arc<K>> {
        let mut out = Vec::new();
        self.for_each(&mut |o| out.push(Arc::clone(o)));
        out
    }
}

/// Read access to a cache's named indexes, on top of [`CacheRead`]: where the lister meets the
/// indexer. An index maps each object to values (a namespace, a label's value, a node name); a
/// read asks for the objects that produced one value.
///
/// ```
/// use std::sync::Arc;
/// use kinformer_core::{CacheRead, DynamicObject, IndexRead, ObjectKey, StoreError};
///
/// /// A cache with no indexes at all.
/// struct Plain(std::collections::BTreeMap<ObjectKey, Arc<DynamicObject>>);
/// impl CacheRead<DynamicObject> for Plain {
///     fn get_by_key(&self, key: &str) -> Option<Arc<DynamicObject>> { self.0.get(key).cloned() }
///     fn list_keys(&self) -> Vec<ObjectKey> { self.0.keys().cloned().collect() }
///     fn for_each(&self, f: &mut dyn FnMut(&Arc<DynamicObject>)) { self.0.values().for_each(f) }
/// }
/// impl IndexRead<DynamicObject> for Plain {
///     fn for_each_indexed(&self, index: &str, _: &str, _: &mut dyn FnMut(&Arc<DynamicObject>))
///         -> Result<(), StoreError> { Err(StoreError::UnknownIndex { name: index.into() }) }
///     fn index_names(&self) -> Vec<String> { Vec::new() }
/// }
///
/// let plain = Plain(Default::default());
/// assert!(plain.namespace_index().is_none());
/// assert!(plain.by_index("namespace", "shop").is_err());
/// ```
pub trait IndexRead<K>: CacheRead<K> {
    /// Calls `f` on every object whose index `index` produced `value`; an unknown index is
    /// [`StoreError::UnknownIndex`].
    fn for_each_indexed(
        &self,
        index: &str,
        value: &str,
        f: &mut dyn FnMut(&Arc<K>),
    ) -> Result<(), StoreError>;

    /// The names of every index.
    fn index_names(&self) -> Vec<String>;

    /// Whether an index of this name exists.
    fn has_index(&self, index: &str) -> bool {
        self.index_names().iter().any(|n| n == index)
    }

    /// The name of the index by namespace ([`NAMESPACE_INDEX`]), if the cache has one: a
    /// namespaced query reads it instead of scanning everything.
    fn namespace_index(&self) -> Option<&'static str> {
        self.has_index(NAMESPACE_INDEX).then_some(NAMESPACE_INDEX)
    }

    /// The objects whose index `index` produced `value`.
    fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, StoreError> {
        let mut out = Vec::new();
        self.for_each_indexed(index, value, &mut |o| out.push(Arc::clone(o)))?;
        Ok(out)
    }
}

/// One write of a batch for [`CacheWrite::apply_batch`].
pub enum CacheOp<K> {
    /// Store the object under its key (an add or an update).
    Upsert(Arc<K>),
    /// Remove whatever is stored under the key.
    Remove(ObjectKey),
}

impl<K> Clone for CacheOp<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Upsert(o) => Self::Upsert(Arc::clone(o)),
            Self::Remove(k) => Self::Remove(k.clone()),
        }
    }
}

impl<K: std::fmt::Debug> std::fmt::Debug for CacheOp<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Upsert(o) => f.debug_tuple("Upsert").field(o).finish(),
            Self::Remove(k) => f.debug_tuple("Remove").field(k).finish(),
        }
    }
}

/// What [`CacheWrite::replace_all`] did: for each listed object (in list order) the object it
/// replaced or the reason it was refused, and every object the cache held that the list lacks.
pub struct Replaced<K> {
    /// One entry per listed object: `Ok(Some(old))` replaced `old`, `Ok(None)` was new,
    /// `Err(_)` was refused (an index function failed) and is not in the cache.
    pub outcomes: Vec<Result<Option<Arc<K>>, StoreError>>,
    /// What the cache held that it no longer holds (listed objects that were refused included),
    /// in key order.
    pub removed: Vec<Arc<K>>,
}

impl<K> std::fmt::Debug for Replaced<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replaced")
            .field("outcomes", &self.outcomes.len())
            .field("removed", &self.removed.len())
            .finish()
    }
}

/// The one writer of a cache: what the shared informer applies popped deltas through. Every
/// write returns what it replaced, so the informer can call `on_update(old, new)` and tell an
/// add from an update without a second lookup.
///
/// ```
/// use std::collections::BTreeMap;
/// use std::sync::{Arc, Mutex};
/// use kinformer_core::{CacheOp, CacheWrite, DynamicObject, ObjectKey};
///
/// let cache: Mutex<BTreeMap<ObjectKey, Arc<DynamicObject>>> = Mutex::default();
/// let mut pod = DynamicObject::default();
/// pod.metadata.name = Some("a".into());
/// let pod = Arc::new(pod);
/// assert!(cache.upsert(Arc::clone(&pod)).unwrap().is_none());
/// assert!(Arc::ptr_eq(&cache.upsert(Arc::clone(&pod)).unwrap().unwrap(), &pod));
/// let previous = cache.apply_batch(vec![CacheOp::Remove(ObjectKey::new(None, "a"))]);
/// assert!(previous[0].as_ref().unwrap().is_some());
/// ```
pub trait CacheWrite<K>: CacheRead<K> {
    /// Stores `object` under its key; returns what was stored there before.
    fn upsert(&self, object: Arc<K>) -> Result<Option<Arc<K>>, StoreError>;

    /// Removes what is stored under `key`; returns it.
    fn remove(&self, key: &str) -> Option<Arc<K>>;

    /// Applies `ops` in order, as one write (readers see all of them or none); returns, per
    /// op, what it replaced or removed. The default applies them one by one.
    fn apply_batch(&self, ops: Vec<CacheOp<K>>) -> Vec<Result<Option<Arc<K>>, StoreError>> {
        ops.into_iter()
            .map(|op| match op {
                CacheOp::Upsert(o) => self.upsert(o),
                CacheOp::Remove(k) => Ok(self.remove(k.as_str())),
            })
            .collect()
    }

    /// Makes the cache hold exactly `objects` (an object an index function refuses is left
    /// out), visible to readers at once; says what each object replaced and what was removed.
    fn replace_all(&self, objects: Vec<Arc<K>>) -> Replaced<K>;
}

macro_rules! forward_cache {
    ($($ptr:ty),*) => {$(
        impl<K, C: CacheRead<K> + ?Sized> CacheRead<K> for $ptr {
            fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
                (**self).get_by_key(key)
            }
            fn list_keys(&self) -> Vec<ObjectKey> {
                (**self).list_keys()
            }
            fn for_each(&self, f: &mut dyn FnMut(&Arc<K>)) {
                (**self).for_each(f)
            }
            fn list(&self) -> Vec<Arc<K>> {
                (**self).list()
            }
        }

        impl<K, C: IndexRead<K> + ?Sized> IndexRead<K> for $ptr {
            fn for_each_indexed(
                &self,
                index: &str,
                value: &str,
                f: &mut dyn FnMut(&Arc<K>),
            ) -> Result<(), StoreError> {
                (**self).for_each_indexed(index, value, f)
            }
            fn index_names(&self) -> Vec<String> {
                (**self).index_names()
            }
            fn has_index(&self, index: &str) -> bool {
                (**self).has_index(index)
            }
            fn namespace_index(&self) -> Option<&'static str> {
                (**self).namespace_index()
            }
        }

        impl<K, C: CacheWrite<K> + ?Sized> CacheWrite<K> for $ptr {
            fn upsert(&self, object: Arc<K>) -> Result<Option<Arc<K>>, StoreError> {
                (**self).upsert(object)
            }
            fn remove(&self, key: &str) -> Option<Arc<K>> {
                (**self).remove(key)
            }
            fn apply_batch(&self, ops: Vec<CacheOp<K>>) -> Vec<Result<Option<Arc<K>>, StoreError>> {
                (**self).apply_batch(ops)
            }
            fn replace_all(&self, objects: Vec<Arc<K>>) -> Replaced<K> {
                (**self).replace_all(objects)
            }
        }
    )*};
}

forward_cache!(&C, Arc<C>, Box<C>);

impl<K: Send + Sync> CacheRead<K> for BTreeMap<ObjectKey, Arc<K>> {
    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.get(key).cloned()
    }

    fn list_keys(&self) -> Vec<ObjectKey> {
        self.keys().cloned().collect()
    }

    fn for_each(&self, f: &mut dyn FnMut(&Arc<K>)) {
        self.values().for_each(f)
    }
}

/// A map behind a mutex is the smallest complete cache: tests, tools and the examples use it.
impl<K: Send + Sync> CacheRead<K> for std::sync::Mutex<BTreeMap<ObjectKey, Arc<K>>> {
    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        lock(self).get(key).cloned()
    }

    fn list_keys(&self) -> Vec<ObjectKey> {
        lock(self).keys().cloned().collect()
    }

    fn for_each(&self, f: &mut dyn FnMut(&Arc<K>)) {
        lock(self).values().for_each(f)
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock leaves a map that is still a valid map.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<K: Object> CacheWrite<K> for std::sync::Mutex<BTreeMap<ObjectKey, Arc<K>>> {
    fn upsert(&self, object: Arc<K>) -> Result<Option<Arc<K>>, StoreError> {
        Ok(lock(self).insert(object.key(), object))
    }

    fn remove(&self, key: &str) -> Option<Arc<K>> {
        lock(self).remove(key)
    }

    fn apply_batch(&self, ops: Vec<CacheOp<K>>) -> Vec<Result<Option<Arc<K>>, StoreError>> {
        let mut map = lock(self);
        ops.into_iter()
            .map(|op| {
                Ok(match op {
                    CacheOp::Upsert(o) => map.insert(o.key(), o),
                    CacheOp::Remove(k) => map.remove(&k),
                })
            })
            .collect()
    }

    fn replace_all(&self, objects: Vec<Arc<K>>) -> Replaced<K> {
        let mut map = lock(self);
        let mut old = std::mem::take(&mut *map);
        let outcomes = objects
            .into_iter()
            .map(|o| {
                let key = o.key();
                let previous = old.remove(&key);
                map.insert(key, o);
                Ok(previous)
            })
            .collect();
        Replaced {
            outcomes,
            removed: old.into_values().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DynamicObject;
    use std::sync::Mutex;

    fn obj(name: &str) -> Arc<DynamicObject> {
        let mut o = DynamicObject::default();
        o.metadata.name = Some(name.into());
        Arc::new(o)
    }

    #[test]
    fn traits_are_dyn_compatible_and_forward_through_pointers() {
        let cache: Mutex<BTreeMap<ObjectKey, Arc<DynamicObject>>> = Mutex::default();
        let boxed: Box<dyn CacheWrite<DynamicObject>> = Box::new(cache);
        let arc: Arc<dyn CacheWrite<DynamicObject>> = Arc::from(boxed);
        assert!(arc.upsert(obj("a")).unwrap().is_none());
        let by_ref: &dyn CacheRead<DynamicObject> = &&arc;
        assert!(by_ref.get_by_key("a").is_some());
        assert_eq!(by_ref.list().len(), 1);
    }

    #[test]
    fn a_mutex_map_replaces_and_says_what_it_replaced_and_removed() {
        let cache: Mutex<BTreeMap<ObjectKey, Arc<DynamicObject>>> = Mutex::default();
        let (a, b) = (obj("a"), obj("b"));
        cache.upsert(Arc::clone(&a)).unwrap();
        cache.upsert(Arc::clone(&b)).unwrap();
        let a2 = obj("a");
        let c = obj("c");
        let r = cache.replace_all(vec![Arc::clone(&a2), Arc::clone(&c)]);
        assert!(Arc::ptr_eq(
            r.outcomes[0].as_ref().unwrap().as_ref().unwrap(),
            &a
        ));
        assert!(r.outcomes[1].as_ref().unwrap().is_none());
        assert_eq!(r.removed.len(), 1);
        assert!(Arc::ptr_eq(&r.removed[0], &b));
        assert_eq!(cache.list_keys().len(), 2);
        let out = cache.apply_batch(vec![
            CacheOp::Remove(ObjectKey::new(None, "c")),
            CacheOp::Remove(ObjectKey::new(None, "c")),
            CacheOp::Upsert(obj("d")),
        ]);
        assert!(out[0].as_ref().unwrap().is_some());
        assert!(out[1].as_ref().unwrap().is_none(), "removed already");
        assert!(out[2].as_ref().unwrap().is_none());
    }
}
