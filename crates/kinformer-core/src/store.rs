//! Where the reflector meets the store it writes into: one [`StoreEvent`] at a time, through
//! [`ReflectorStore::apply`].

use std::sync::Arc;
use std::task::{Context, Poll};

use crate::{Object, ResourceVersion, StoreError};

/// One write of a reflector into its store: a watch event, a step of the relist protocol, a
/// bookmark or a resync, in the order the reflector saw them.
///
/// This is the whole vocabulary of the seam between the reflector and what it feeds. The delta
/// FIFO and the indexer take it through [`ReflectorStore::apply`]; the reflector's `watcher`
/// offers it as a `Stream`; and a shared informer pulls any stream of it, so a source other than
/// the reflector (kube-runtime's `watcher()` through a `map`, a recorded replay, a test's
/// hand-made list) is one adapter away.
///
/// # The relist protocol
/// A list arrives page by page, and the store takes it that way, so that no one holds the whole
/// list and the state it replaces as two full copies: [`RelistBegin`](Self::RelistBegin), then a
/// [`RelistPage`](Self::RelistPage) for each page, then [`RelistEnd`](Self::RelistEnd) with the
/// list's resourceVersion, which deletes (with a tombstone) whatever the store held that the
/// list lacks and makes the relist visible. `RelistBegin` again before the end starts over (a
/// pager whose continue token expired lists everything again); [`RelistAbandoned`](Self::RelistAbandoned)
/// drops a list that failed halfway, and the store is as it was before the relist began. A
/// listed object whose resourceVersion equals the one the store already holds keeps the held
/// `Arc`, and the fresh copy is dropped at once. A streaming list (initial events, then the end
/// bookmark) uses the same protocol. `RelistEnd` without a list begun is an empty list.
///
/// Whether a relist is the initial list (its objects reach handlers with `is_in_initial_list`)
/// is the store's to know: it is the first write the store takes.
///
/// There is deliberately no catch-all variant and the enum is exhaustive: a store that matches
/// on it handles every write, and a new kind of write is a change every store must consider.
#[derive(Debug)]
pub enum StoreEvent<K> {
    /// A list begins (or begins again: whatever the unfinished one gathered is dropped).
    RelistBegin,
    /// One page of the list begun last, in the server's order.
    RelistPage(Vec<Arc<K>>),
    /// The list is complete at this resourceVersion: the store's contents become exactly the
    /// listed objects, and whatever it held that the list lacks is deleted.
    RelistEnd(ResourceVersion),
    /// The list failed halfway: nothing of it may be taken for complete. The store is as it was
    /// before [`RelistBegin`](Self::RelistBegin). Without a list begun, nothing happens.
    RelistAbandoned,
    /// An `ADDED` watch event.
    Added(Arc<K>),
    /// A `MODIFIED` watch event.
    Modified(Arc<K>),
    /// A `DELETED` watch event, with the last state the server sent.
    Deleted(Arc<K>),
    /// The watch has reached this resourceVersion (a bookmark).
    Bookmark(ResourceVersion),
    /// A periodic resync: re-deliver what is known.
    Resync,
}

/// Clones share the objects (`Arc`s), whatever `K` is.
impl<K> Clone for StoreEvent<K> {
    fn clone(&self) -> Self {
        match self {
            Self::RelistBegin => Self::RelistBegin,
            Self::RelistPage(page) => Self::RelistPage(page.clone()),
            Self::RelistEnd(rv) => Self::RelistEnd(rv.clone()),
            Self::RelistAbandoned => Self::RelistAbandoned,
            Self::Added(o) => Self::Added(Arc::clone(o)),
            Self::Modified(o) => Self::Modified(Arc::clone(o)),
            Self::Deleted(o) => Self::Deleted(Arc::clone(o)),
            Self::Bookmark(rv) => Self::Bookmark(rv.clone()),
            Self::Resync => Self::Resync,
        }
    }
}

impl<K> StoreEvent<K> {
    /// The resourceVersion the store has caught up to once it has applied this event: the list's
    /// at its end, a bookmark's, or a watched object's own. `None` for the other steps.
    pub fn synced_resource_version(&self) -> Option<&str>
    where
        K: Object,
    {
        match self {
            Self::RelistEnd(rv) | Self::Bookmark(rv) => Some(rv.as_str()),
            Self::Added(o) | Self::Modified(o) | Self::Deleted(o) => o.resource_version(),
            Self::RelistBegin | Self::RelistPage(_) | Self::RelistAbandoned | Self::Resync => None,
        }
    }

    /// Applies `f` to every object the event carries (a transform before storing). Tombstones
    /// never travel here, and bookmarks, resyncs and relist steps carry no object.
    #[must_use]
    pub fn map_objects(self, mut f: impl FnMut(Arc<K>) -> Arc<K>) -> Self {
        match self {
            Self::Added(o) => Self::Added(f(o)),
            Self::Modified(o) => Self::Modified(f(o)),
            Self::Deleted(o) => Self::Deleted(f(o)),
            Self::RelistPage(page) => Self::RelistPage(page.into_iter().map(f).collect()),
            other => other,
        }
    }
}

/// What a reflector writes into: client-go's `cache.Store` as the reflector sees it, reduced to
/// one write ([`apply`](Self::apply) of a [`StoreEvent`]) and backpressure
/// ([`poll_ready`](Self::poll_ready)), as tower's `Service` is `poll_ready` plus `call`.
///
/// The delta FIFO implements it (the default pipeline), and so does the indexer (a reflector that
/// fills a cache directly, with no handlers). Writes are synchronous and cheap; a store that wants
/// to slow its writer down (a bounded queue) says so through `poll_ready`, which the writer awaits
/// before each write. [`ReflectorStoreExt`] spells the events as method calls for code that
/// writes by hand (`store.add(pod)`, `store.replace(objects, rv)`).
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use kinformer_core::{DynamicObject, ReflectorStore, ReflectorStoreExt, StoreError, StoreEvent};
///
/// /// Counts what it holds; a stand-in for a real store.
/// #[derive(Default)]
/// struct Counter { held: Mutex<usize>, relist: Mutex<Option<usize>> }
///
/// impl ReflectorStore<DynamicObject> for Counter {
///     fn apply(&self, event: StoreEvent<DynamicObject>) -> Result<(), StoreError> {
///         let (mut held, mut relist) = (self.held.lock().unwrap(), self.relist.lock().unwrap());
///         match event {
///             StoreEvent::Added(_) => *held += 1,
///             StoreEvent::Deleted(_) => *held -= 1,
///             StoreEvent::RelistBegin => *relist = Some(0),
///             StoreEvent::RelistPage(page) => *relist.get_or_insert(0) += page.len(),
///             StoreEvent::RelistEnd(_) => *held = relist.take().unwrap_or(0),
///             StoreEvent::RelistAbandoned => *relist = None,
///             StoreEvent::Modified(_) | StoreEvent::Bookmark(_) | StoreEvent::Resync => {}
///         }
///         Ok(())
///     }
/// }
///
/// let store = Counter::default();
/// store.add(Arc::new(DynamicObject::default())).unwrap();
/// store.replace(vec![], "5".into()).unwrap();
/// assert_eq!(*store.held.lock().unwrap(), 0);
/// ```
pub trait ReflectorStore<K: Object>: Send + Sync {
    /// Takes one write. An error refuses this write only ([`StoreError::Closed`] refuses every
    /// write from now on); a refused [`StoreEvent::RelistEnd`] leaves the relist to be abandoned.
    fn apply(&self, event: StoreEvent<K>) -> Result<(), StoreError>;

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
            fn apply(&self, event: StoreEvent<K>) -> Result<(), StoreError> {
                (**self).apply(event)
            }
            fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), StoreError>> {
                (**self).poll_ready(cx)
            }
        }
    )*};
}

forward_store!(&S, Arc<S>, Box<S>);

/// Each [`StoreEvent`] as a method, for any [`ReflectorStore`]: for code that writes into a
/// store by hand (tests, a bespoke source). Every method is one [`apply`](ReflectorStore::apply)
/// but [`replace`](Self::replace), which is the relist protocol in one call.
pub trait ReflectorStoreExt<K: Object>: ReflectorStore<K> {
    /// [`StoreEvent::Added`].
    fn add(&self, object: Arc<K>) -> Result<(), StoreError> {
        self.apply(StoreEvent::Added(object))
    }
    /// [`StoreEvent::Modified`].
    fn update(&self, object: Arc<K>) -> Result<(), StoreError> {
        self.apply(StoreEvent::Modified(object))
    }
    /// [`StoreEvent::Deleted`].
    fn delete(&self, object: Arc<K>) -> Result<(), StoreError> {
        self.apply(StoreEvent::Deleted(object))
    }
    /// [`StoreEvent::RelistBegin`].
    fn begin_relist(&self) -> Result<(), StoreError> {
        self.apply(StoreEvent::RelistBegin)
    }
    /// [`StoreEvent::RelistPage`].
    fn relist_page(&self, objects: Vec<Arc<K>>) -> Result<(), StoreError> {
        self.apply(StoreEvent::RelistPage(objects))
    }
    /// [`StoreEvent::RelistEnd`].
    fn end_relist(&self, resource_version: ResourceVersion) -> Result<(), StoreError> {
        self.apply(StoreEvent::RelistEnd(resource_version))
    }
    /// [`StoreEvent::RelistAbandoned`]. A store cannot refuse to forget a list.
    fn abandon_relist(&self) {
        // A store that refuses it (a closed one) has nothing of the list left to forget.
        let _ = self.apply(StoreEvent::RelistAbandoned);
    }
    /// [`StoreEvent::Resync`].
    fn resync(&self) -> Result<(), StoreError> {
        self.apply(StoreEvent::Resync)
    }
    /// [`StoreEvent::Bookmark`].
    fn bookmark(&self, resource_version: ResourceVersion) -> Result<(), StoreError> {
        self.apply(StoreEvent::Bookmark(resource_version))
    }
    /// A complete list at `resource_version` in one call: begin, one page, end; a refused page
    /// or end abandons the relist, so the store is left as it was.
    fn replace(
        &self,
        objects: Vec<Arc<K>>,
        resource_version: ResourceVersion,
    ) -> Result<(), StoreError> {
        self.begin_relist()?;
        let result = self
            .relist_page(objects)
            .and_then(|()| self.end_relist(resource_version));
        if result.is_err() {
            self.abandon_relist();
        }
        result
    }
}

impl<K: Object, S: ReflectorStore<K> + ?Sized> ReflectorStoreExt<K> for S {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DynamicObject;
    use std::sync::Mutex;

    /// Records every event it is given; refuses pages.
    #[derive(Default)]
    struct Refuses(Mutex<Vec<&'static str>>);

    impl ReflectorStore<DynamicObject> for Refuses {
        fn apply(&self, event: StoreEvent<DynamicObject>) -> Result<(), StoreError> {
            let (name, result) = match event {
                StoreEvent::RelistBegin => ("begin", Ok(())),
                StoreEvent::RelistPage(_) => ("page", Err(StoreError::Closed)),
                StoreEvent::RelistEnd(_) => ("end", Ok(())),
                StoreEvent::RelistAbandoned => ("abandon", Ok(())),
                StoreEvent::Added(_) => ("add", Err(StoreError::Closed)),
                _ => ("other", Ok(())),
            };
            self.0.lock().unwrap().push(name);
            result
        }
    }

    #[test]
    fn the_trait_is_dyn_compatible_and_forwards_through_pointers() {
        fn takes(_: &dyn ReflectorStore<DynamicObject>) {}
        let boxed: Box<dyn ReflectorStore<DynamicObject>> = Box::new(Refuses::default());
        let arc: Arc<dyn ReflectorStore<DynamicObject>> = Arc::from(boxed);
        takes(&&arc);
        assert_eq!(
            arc.add(Arc::new(DynamicObject::default())),
            Err(StoreError::Closed)
        );
    }

    #[test]
    fn a_refused_page_abandons_the_relist_and_never_ends_it() {
        let store = Refuses::default();
        assert_eq!(store.replace(vec![], "1".into()), Err(StoreError::Closed));
        assert_eq!(*store.0.lock().unwrap(), ["begin", "page", "abandon"]);
    }

    #[test]
    fn events_say_which_version_they_sync_to_and_map_their_objects() {
        let mut pod = DynamicObject::default();
        pod.metadata.resource_version = Some("7".into());
        let pod = Arc::new(pod);
        assert_eq!(
            StoreEvent::Added(Arc::clone(&pod)).synced_resource_version(),
            Some("7")
        );
        assert_eq!(
            StoreEvent::<DynamicObject>::RelistEnd("9".into()).synced_resource_version(),
            Some("9")
        );
        assert_eq!(
            StoreEvent::<DynamicObject>::RelistBegin.synced_resource_version(),
            None
        );
        let mut seen = 0;
        let page = StoreEvent::RelistPage(vec![Arc::clone(&pod), pod]).map_objects(|o| {
            seen += 1;
            o
        });
        assert_eq!(seen, 2);
        assert!(matches!(page, StoreEvent::RelistPage(p) if p.len() == 2));
    }
}
