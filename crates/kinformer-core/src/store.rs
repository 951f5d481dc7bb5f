//! Where the reflector meets the store it writes into: [`ReflectorStore`] and its relist protocol.

use std::sync::Arc;
use std::task::{Context, Poll};

use crate::{Object, ResourceVersion, StoreError};

/// What a reflector writes into: client-go's `cache.Store` as the reflector sees it.
///
/// The delta FIFO implements it (the default pipeline), and so does the indexer (a reflector that
/// fills a cache directly, with no handlers). Writes are synchronous and cheap; a store that wants
/// to slow its writer down (a bounded queue) says so through [`poll_ready`](Self::poll_ready),
/// which the reflector awaits before each write.
///
/// # The relist protocol
/// A list arrives page by page, and the store takes it that way, so that no one holds the whole
/// list and the state it replaces as two full copies:
/// [`begin_relist`](Self::begin_relist), then [`relist_page`](Self::relist_page) for each page,
/// then [`end_relist`](Self::end_relist) with the list's resourceVersion, which deletes (with a
/// tombstone) whatever the store held that the list lacks and makes the relist visible.
/// `begin_relist` again before the end starts over (a pager whose continue token expired lists
/// everything again); [`abandon_relist`](Self::abandon_relist) drops a list that failed halfway,
/// and the store is as it was before the relist began. A listed object whose resourceVersion
/// equals the one the store already holds keeps the held `Arc`, and the fresh copy is dropped at
/// once. A streaming list (initial events, then the end bookmark) uses the same protocol.
/// [`replace`](Self::replace) is the whole protocol in one call.
///
/// Whether a relist is the initial list (its objects reach handlers with `is_in_initial_list`)
/// is the store's to know: it is the first write the store takes.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use kinformer_core::{DynamicObject, Object, ReflectorStore, ResourceVersion, StoreError};
///
/// /// Counts what it holds; a stand-in for a real store.
/// #[derive(Default)]
/// struct Counter { held: Mutex<usize>, relist: Mutex<Option<usize>> }
///
/// impl ReflectorStore<DynamicObject> for Counter {
///     fn add(&self, _: Arc<DynamicObject>) -> Result<(), StoreError> { *self.held.lock().unwrap() += 1; Ok(()) }
///     fn update(&self, _: Arc<DynamicObject>) -> Result<(), StoreError> { Ok(()) }
///     fn delete(&self, _: Arc<DynamicObject>) -> Result<(), StoreError> { *self.held.lock().unwrap() -= 1; Ok(()) }
///     fn begin_relist(&self) -> Result<(), StoreError> { *self.relist.lock().unwrap() = Some(0); Ok(()) }
///     fn relist_page(&self, page: Vec<Arc<DynamicObject>>) -> Result<(), StoreError> {
///         *self.relist.lock().unwrap().as_mut().expect("begun") += page.len();
///         Ok(())
///     }
///     fn end_relist(&self, _: ResourceVersion) -> Result<(), StoreError> {
///         *self.held.lock().unwrap() = self.relist.lock().unwrap().take().expect("begun");
///         Ok(())
///     }
///     fn abandon_relist(&self) { self.relist.lock().unwrap().take(); }
/// }
///
/// let store = Counter::default();
/// store.add(Arc::new(DynamicObject::default())).unwrap();
/// store.replace(vec![], "5".into()).unwrap();
/// assert_eq!(*store.held.lock().unwrap(), 0);
/// ```
pub trait ReflectorStore<K: Object>: Send + Sync {
    /// An `ADDED` event.
    fn add(&self, object: Arc<K>) -> Result<(), StoreError>;

    /// A `MODIFIED` event.
    fn update(&self, object: Arc<K>) -> Result<(), StoreError>;

    /// A `DELETED` event; `object` is the last state the server sent.
    fn delete(&self, object: Arc<K>) -> Result<(), StoreError>;

    /// A list begins (or begins again: whatever the unfinished one gathered is dropped).
    fn begin_relist(&self) -> Result<(), StoreError>;

    /// One page of the list begun last, in the server's order.
    fn relist_page(&self, objects: Vec<Arc<K>>) -> Result<(), StoreError>;

    /// The list is complete at `resource_version`: the store's contents become exactly the
    /// listed objects, and whatever it held that the list lacks is deleted. Without a list
    /// begun, this is an empty list.
    fn end_relist(&self, resource_version: ResourceVersion) -> Result<(), StoreError>;

    /// The list failed halfway: nothing of it may be taken for complete. The store is as it was
    /// before [`begin_relist`](Self::begin_relist). Without a list begun, nothing happens.
    fn abandon_relist(&self);

    /// A complete list at `resource_version`, in one call: `begin_relist`, one `relist_page`,
    /// `end_relist`.
    fn replace(
        &self,
        objects: Vec<Arc<K>>,
        resource_version: ResourceVersion,
    ) -> Result<(), StoreError> {
        self.begin_relist()?;
        if let Err(e) = self.relist_page(objects) {
            self.abandon_relist();
            return Err(e);
        }
        self.end_relist(resource_version)
    }

    /// A periodic resync: re-deliver what is known. The default does nothing.
    fn resync(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// The watch has reached `resource_version` (a bookmark, or the end of a list). The default
    /// does nothing.
    fn bookmark(&self, resource_version: &ResourceVersion) {
        let _ = resource_version;
    }

    /// Ready for another write? A bounded store returns `Pending` while full and wakes the task
    /// when there is room: backpressure, never a dropped event. The default is always ready.
    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), StoreError>> {
        let _ = cx;
        Poll::Ready(Ok(()))
    }
}

macro_rules! forward_store {
    ($($ptr:ty),*) => {$(
        impl<K: Object, S: ReflectorStore<K> + ?Sized> ReflectorStore<K> for $ptr {
            fn add(&self, object: Arc<K>) -> Result<(), StoreError> {
                (**self).add(object)
            }
            fn update(&self, object: Arc<K>) -> Result<(), StoreError> {
                (**self).update(object)
            }
            fn delete(&self, object: Arc<K>) -> Result<(), StoreError> {
                (**self).delete(object)
            }
            fn begin_relist(&self) -> Result<(), StoreError> {
                (**self).begin_relist()
            }
            fn relist_page(&self, objects: Vec<Arc<K>>) -> Result<(), StoreError> {
                (**self).relist_page(objects)
            }
            fn end_relist(&self, rv: ResourceVersion) -> Result<(), StoreError> {
                (**self).end_relist(rv)
            }
            fn abandon_relist(&self) {
                (**self).abandon_relist()
            }
            fn replace(&self, objects: Vec<Arc<K>>, rv: ResourceVersion) -> Result<(), StoreError> {
                (**self).replace(objects, rv)
            }
            fn resync(&self) -> Result<(), StoreError> {
                (**self).resync()
            }
            fn bookmark(&self, rv: &ResourceVersion) {
                (**self).bookmark(rv)
            }
            fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), StoreError>> {
                (**self).poll_ready(cx)
            }
        }

    )*};
}

forward_store!(&S, Arc<S>, Box<S>);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DynamicObject;

    #[test]
    fn the_trait_is_dyn_compatible_and_forwards_through_pointers() {
        fn takes(_: &dyn ReflectorStore<DynamicObject>) {}
        struct Refuses;
        impl ReflectorStore<DynamicObject> for Refuses {
            fn add(&self, _: Arc<DynamicObject>) -> Result<(), StoreError> {
                Err(StoreError::Closed)
            }
            fn update(&self, _: Arc<DynamicObject>) -> Result<(), StoreError> {
                Err(StoreError::Closed)
            }
            fn delete(&self, _: Arc<DynamicObject>) -> Result<(), StoreError> {
                Err(StoreError::Closed)
            }
            fn begin_relist(&self) -> Result<(), StoreError> {
                Ok(())
            }
            fn relist_page(&self, _: Vec<Arc<DynamicObject>>) -> Result<(), StoreError> {
                Err(StoreError::Closed)
            }
            fn end_relist(&self, _: ResourceVersion) -> Result<(), StoreError> {
                panic!("a failed page must not end the relist")
            }
            fn abandon_relist(&self) {}
        }
        let boxed: Box<dyn ReflectorStore<DynamicObject>> = Box::new(Refuses);
        let arc: Arc<dyn ReflectorStore<DynamicObject>> = Arc::from(boxed);
        takes(&&arc);
        assert_eq!(arc.replace(vec![], "1".into()), Err(StoreError::Closed));
    }
}
