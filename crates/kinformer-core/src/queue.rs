//! The consumer side of the delta queue: where the delta FIFO meets the shared informer.

use std::sync::Arc;
use std::time::Duration;

use crate::{DeletedFinalStateUnknown, Delta, ResourceVersion};

/// An atomic relist, as an in-order queue hands it to its consumer: apply it as one step.
///
/// The consumer replaces its whole store with `objects`, then delivers a delete for every
/// tombstone (keys the store held that the list lacks), then an add or update for each object in
/// list order.
pub struct ReplaceStep<K> {
    /// The complete list, in the order the server sent it.
    pub objects: Vec<Arc<K>>,
    /// The resourceVersion of the list.
    pub resource_version: ResourceVersion,
    /// The objects the consumer's store will hold when it reaches this step that the list lacks,
    /// each with the newest state the queue knew.
    pub tombstones: Vec<DeletedFinalStateUnknown<K>>,
    /// `true` for the informer's first list (the initial sync).
    pub is_initial_list: bool,
}

impl<K> Clone for ReplaceStep<K> {
    fn clone(&self) -> Self {
        Self {
            objects: self.objects.clone(),
            resource_version: self.resource_version.clone(),
            tombstones: self.tombstones.clone(),
            is_initial_list: self.is_initial_list,
        }
    }
}

impl<K: std::fmt::Debug> std::fmt::Debug for ReplaceStep<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplaceStep")
            .field("objects", &self.objects)
            .field("resource_version", &self.resource_version)
            .field("tombstones", &self.tombstones)
            .field("is_initial_list", &self.is_initial_list)
            .finish()
    }
}

/// What one [`DeltaQueue::pop`] hands the consumer.
pub enum Popped<K> {
    /// Every queued delta of one key, oldest first (client-go's classic `DeltaFIFO`: the deltas
    /// of the key that has waited longest).
    Key(Vec<Delta<K>>),
    /// Up to the queue's batch size of consecutive single deltas, each of a different key, in
    /// arrival order (in-order mode): the consumer may apply them to its store under one lock.
    Batch(Vec<Delta<K>>),
    /// An atomic relist (in-order mode).
    Replace(ReplaceStep<K>),
}

impl<K> Popped<K> {
    /// How many deltas this pop carries (a [`Popped::Replace`] counts its objects and tombstones).
    pub fn len(&self) -> usize {
        match self {
            Self::Key(d) | Self::Batch(d) => d.len(),
            Self::Replace(r) => r.objects.len() + r.tombstones.len(),
        }
    }

    /// `true` when the pop carries no delta (only an empty relist does).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K> Clone for Popped<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Key(d) => Self::Key(d.clone()),
            Self::Batch(d) => Self::Batch(d.clone()),
            Self::Replace(r) => Self::Replace(r.clone()),
        }
    }
}

impl<K: std::fmt::Debug> std::fmt::Debug for Popped<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Key(d) => f.debug_tuple("Key").field(d).finish(),
            Self::Batch(d) => f.debug_tuple("Batch").field(d).finish(),
            Self::Replace(r) => f.debug_tuple("Replace").field(r).finish(),
        }
    }
}

/// The consumer side of a delta queue: what the shared informer pops from.
///
/// The writer side is [`ReflectorStore`](crate::ReflectorStore). `pop` is async (it waits for
/// work); everything else is synchronous and cheap. The trait is dyn-compatible, so an informer
/// can hold an `Arc<dyn DeltaQueue<K>>`; the future `pop` returns is `Send`.
///
/// ```
/// use std::sync::Arc;
/// use kinformer_core::{Delta, DeltaQueue, DeltaType, DynamicObject, Popped};
///
/// /// A queue that is always empty and closed: the smallest possible implementation.
/// #[derive(Debug)]
/// struct Closed;
///
/// #[async_trait::async_trait]
/// impl DeltaQueue<DynamicObject> for Closed {
///     async fn pop(&self) -> Option<Popped<DynamicObject>> { None }
///     fn requeue(&self, _: Vec<Delta<DynamicObject>>) -> bool { false }
///     fn has_synced(&self) -> bool { true }
///     fn close(&self) {}
///     fn depth(&self) -> usize { 0 }
/// }
///
/// let queue: Arc<dyn DeltaQueue<DynamicObject>> = Arc::new(Closed);
/// assert!(queue.oldest_age().is_none());
/// assert!(!queue.requeue(vec![Delta::of(DeltaType::Added, Arc::new(DynamicObject::default()))]));
/// ```
#[async_trait::async_trait]
pub trait DeltaQueue<K>: Send + Sync {
    /// Waits for work and takes it off the queue. Returns `None` once the queue is closed and
    /// everything queued before the close has been popped. Cancel-safe: dropping the future
    /// before it completes loses nothing.
    async fn pop(&self) -> Option<Popped<K>>;

    /// Hands back the deltas of one key whose processing failed, so they are retried. They go
    /// back (at the end of the queue) only if nothing newer is queued for that key; returns
    /// whether they did. Requeued deltas do not count again towards [`has_synced`](Self::has_synced).
    fn requeue(&self, deltas: Vec<Delta<K>>) -> bool;

    /// `true` once every delta of the first relist has been popped (at once if the first relist
    /// was empty, or if the first write was not a relist).
    fn has_synced(&self) -> bool;

    /// Closes the queue: writers get an error from then on, and `pop` returns `None` once the
    /// queue is drained.
    fn close(&self);

    /// How many items wait (keys in classic mode, deltas and relists in in-order mode).
    fn depth(&self) -> usize;

    /// How long the oldest waiting item has waited; `None` when the queue is empty. The default
    /// says nothing is known.
    fn oldest_age(&self) -> Option<Duration> {
        None
    }
}

macro_rules! forward_queue {
    ($($ptr:ty),*) => {$(
        #[async_trait::async_trait]
        impl<K, Q: DeltaQueue<K> + ?Sized> DeltaQueue<K> for $ptr {
            async fn pop(&self) -> Option<Popped<K>> {
                (**self).pop().await
            }
            fn requeue(&self, deltas: Vec<Delta<K>>) -> bool {
                (**self).requeue(deltas)
            }
            fn has_synced(&self) -> bool {
                (**self).has_synced()
            }
            fn close(&self) {
                (**self).close()
            }
            fn depth(&self) -> usize {
                (**self).depth()
            }
            fn oldest_age(&self) -> Option<Duration> {
                (**self).oldest_age()
            }
        }
    )*};
}

forward_queue!(&Q, Arc<Q>, Box<Q>);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DeltaObject, DeltaType, DynamicObject, ObjectKey};

    #[test]
    fn popped_counts_its_deltas() {
        let obj = Arc::new(DynamicObject::default());
        let key = Popped::Key(vec![Delta::of(DeltaType::Added, Arc::clone(&obj))]);
        assert_eq!(key.len(), 1);
        let step = Popped::Replace(ReplaceStep {
            objects: vec![Arc::clone(&obj)],
            resource_version: "3".into(),
            tombstones: vec![DeletedFinalStateUnknown {
                key: ObjectKey::new(None, "gone"),
                last_known: Arc::clone(&obj),
            }],
            is_initial_list: true,
        });
        assert_eq!(step.len(), 2);
        assert!(Popped::<DynamicObject>::Batch(Vec::new()).is_empty());
        let cloned = step.clone();
        let Popped::Replace(r) = cloned else {
            panic!("clone keeps the variant")
        };
        assert!(Arc::ptr_eq(&r.objects[0], &obj), "clone shares objects");
        let _ = DeltaObject::Object(obj);
    }
}
