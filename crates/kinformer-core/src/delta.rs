//! Deltas: what the delta FIFO hands to its consumer, and the typed tombstone.

use std::fmt;
use std::sync::Arc;

use crate::{Object, ObjectKey};

/// What happened to an object, as client-go's `DeltaType` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeltaType {
    /// The object was added.
    Added,
    /// The object was updated.
    Updated,
    /// The object was deleted; the delta may carry a tombstone.
    Deleted,
    /// The object was part of a relist (a `Replace`); the consumer decides whether it is new.
    Replaced,
    /// A periodic resync re-delivers the object unchanged.
    Sync,
}

/// A deleted object whose final state was not observed: the watch missed the delete, and a relist
/// found the object gone. `last_known` is the newest state the pipeline had.
///
/// client-go hands handlers a `cache.DeletedFinalStateUnknown` that they must type-assert; here it is
/// a variant of [`DeltaObject`], so no handler can panic on it.
pub struct DeletedFinalStateUnknown<K> {
    /// The key of the deleted object.
    pub key: ObjectKey,
    /// The last state of the object that the pipeline knew.
    pub last_known: Arc<K>,
}

impl<K> Clone for DeletedFinalStateUnknown<K> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            last_known: Arc::clone(&self.last_known),
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for DeletedFinalStateUnknown<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeletedFinalStateUnknown")
            .field("key", &self.key)
            .field("last_known", &self.last_known)
            .finish()
    }
}

/// The object a delta carries: the object itself, or a tombstone for a delete that was not seen.
pub enum DeltaObject<K> {
    /// The object as observed.
    Object(Arc<K>),
    /// A delete that was inferred from a relist.
    DeletedFinalStateUnknown(DeletedFinalStateUnknown<K>),
}

impl<K> Clone for DeltaObject<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Object(o) => Self::Object(Arc::clone(o)),
            Self::DeletedFinalStateUnknown(t) => Self::DeletedFinalStateUnknown(t.clone()),
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for DeltaObject<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Object(o) => f.debug_tuple("Object").field(o).finish(),
            Self::DeletedFinalStateUnknown(t) => fmt::Debug::fmt(t, f),
        }
    }
}

impl<K: Object> DeltaObject<K> {
    /// The key of the object (the tombstone's key for a tombstone).
    pub fn key(&self) -> ObjectKey {
        match self {
            Self::Object(o) => o.key(),
            Self::DeletedFinalStateUnknown(t) => t.key.clone(),
        }
    }
}

impl<K> DeltaObject<K> {
    /// The object, or the last known state for a tombstone.
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Object(o) => o,
            Self::DeletedFinalStateUnknown(t) => &t.last_known,
        }
    }

    /// `true` for a tombstone.
    pub fn is_tombstone(&self) -> bool {
        matches!(self, Self::DeletedFinalStateUnknown(_))
    }
}

/// One change to one object.
///
/// ```
/// use std::sync::Arc;
/// use kinformer_core::{Delta, DeltaObject, DeltaType, DeletedFinalStateUnknown, DynamicObject, ObjectKey};
///
/// let last = Arc::new(DynamicObject::default());
/// let delta = Delta::new(
///     DeltaType::Deleted,
///     DeltaObject::DeletedFinalStateUnknown(DeletedFinalStateUnknown {
///         key: ObjectKey::new(Some("ns"), "gone"),
///         last_known: last,
///     }),
/// );
/// assert!(delta.object.is_tombstone());
/// assert_eq!(delta.key().as_str(), "ns/gone");
/// assert!(!delta.is_initial_list);
/// ```
pub struct Delta<K> {
    /// What happened.
    pub kind: DeltaType,
    /// The object (or tombstone) after it happened.
    pub object: DeltaObject<K>,
    /// `true` when the delta comes from the first list of the informer (the initial sync), so a
    /// handler can tell replayed state from live changes.
    pub is_initial_list: bool,
}

impl<K> Delta<K> {
    /// A delta that is not part of the initial list.
    pub fn new(kind: DeltaType, object: DeltaObject<K>) -> Self {
        Self {
            kind,
            object,
            is_initial_list: false,
        }
    }

    /// A delta carrying a live object.
    pub fn of(kind: DeltaType, object: Arc<K>) -> Self {
        Self::new(kind, DeltaObject::Object(object))
    }
}

impl<K: Object> Delta<K> {
    /// The key of the delta's object.
    pub fn key(&self) -> ObjectKey {
        self.object.key()
    }
}

impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        Self {
            kind: self.kind,
            object: self.object.clone(),
            is_initial_list: self.is_initial_list,
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for Delta<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delta")
            .field("kind", &self.kind)
            .field("object", &self.object)
            .field("is_initial_list", &self.is_initial_list)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DynamicObject;

    #[test]
    fn tombstones_keep_their_key_and_last_state() {
        let mut obj = DynamicObject::default();
        obj.metadata.name = Some("a".into());
        obj.metadata.namespace = Some("ns".into());
        obj.metadata.resource_version = Some("6".into());
        let obj = Arc::new(obj);
        // The tombstone's key wins even if it differs from the object's own key.
        let t = DeltaObject::DeletedFinalStateUnknown(DeletedFinalStateUnknown {
            key: ObjectKey::new(Some("ns"), "a"),
            last_known: Arc::clone(&obj),
        });
        let d = Delta::new(DeltaType::Deleted, t);
        assert_eq!(d.key().as_str(), "ns/a");
        assert!(Arc::ptr_eq(d.object.object(), &obj));
        let cloned = d.clone();
        assert!(
            Arc::ptr_eq(cloned.object.object(), &obj),
            "clone shares the object"
        );
        assert!(cloned.object.is_tombstone());
        let live = Delta::of(DeltaType::Added, obj);
        assert!(!live.object.is_tombstone());
    }
}
