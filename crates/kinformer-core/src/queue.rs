//! The consumer side of the delta queue, where the delta FIFO meets the shared informer, and the
//! consumer contract: how a popped item is applied to a cache ([`apply_popped`]).

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::{
    CacheOp, CacheWrite, DeletedFinalStateUnknown, Delta, DeltaObject, DeltaType, Object,
    ResourceVersion, StoreError,
};

/// An atomic relist, as an in-order queue hands it to its consumer: apply it as one step.
///
/// The consumer replaces its whole store with `objects`, then delivers a delete for every object
/// its store held that the list lacks, then an add or update for each object in list order
/// ([`apply_popped`] does exactly that).
pub struct ReplaceStep<K> {
    /// The complete list, in the order the server sent it.
    pub objects: Vec<Arc<K>>,
    /// The resourceVersion of the list.
    pub resource_version: ResourceVersion,
    /// What the queue's known objects held, when the step was popped, that the list lacks. A
    /// consumer that applies the step with the queue's [`DeltaQueue::poll_pop`] and keeps the
    /// known objects as its store gets exactly these deletions from [`apply_popped`]; without
    /// known objects it is empty, and the consumer's own store says what to delete.
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
    /// A resync as one step (in-order mode): re-deliver every object the consumer's store holds
    /// when it reaches this step, as an update from the object to itself.
    Resync,
    /// A bookmark, in its place among the deltas (in-order mode): once the consumer reaches it,
    /// its store holds every change up to this resourceVersion. It changes nothing in the store.
    Bookmark(ResourceVersion),
}

impl<K> Popped<K> {
    /// How many deltas this pop carries (a [`Popped::Replace`] counts its objects and tombstones).
    pub fn len(&self) -> usize {
        match self {
            Self::Key(d) | Self::Batch(d) => d.len(),
            Self::Replace(r) => r.objects.len() + r.tombstones.len(),
            Self::Resync | Self::Bookmark(_) => 0,
        }
    }

    /// `true` when the pop carries no delta (an empty relist, a resync step, a bookmark).
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
            Self::Resync => Self::Resync,
            Self::Bookmark(rv) => Self::Bookmark(rv.clone()),
        }
    }
}

impl<K: std::fmt::Debug> std::fmt::Debug for Popped<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Key(d) => f.debug_tuple("Key").field(d).finish(),
            Self::Batch(d) => f.debug_tuple("Batch").field(d).finish(),
            Self::Replace(r) => f.debug_tuple("Replace").field(r).finish(),
            Self::Resync => f.write_str("Resync"),
            Self::Bookmark(rv) => f.debug_tuple("Bookmark").field(rv).finish(),
        }
    }
}

/// The consumer side of a delta queue: what the shared informer pops from.
///
/// The writer side is [`ReflectorStore`](crate::ReflectorStore). One method pops:
/// [`poll_pop`](Self::poll_pop), which hands the next item to the consumer's `apply` *while no
/// writer can reach the queue*. That is the consumer contract: a consumer that updates its store
/// inside `apply` (as [`pop_into`](Self::pop_into) does) never lets a write slip between the pop
/// and the store update, so a delete that arrives then is judged against the store that already
/// holds the popped object and is never lost (client-go's `Pop(process)` keeps the same rule).
/// [`pop`](Self::pop) takes an item out without applying it, for consumers that keep no store
/// the queue consults.
///
/// Everything else is synchronous and cheap. The trait is dyn-compatible, so an informer can hold
/// an `Arc<dyn DeltaQueue<K>>`; the futures it returns are `Send`.
///
/// ```
/// use std::sync::Arc;
/// use std::task::{Context, Poll};
/// use kinformer_core::{Delta, DeltaQueue, DeltaType, DynamicObject, Popped};
///
/// /// A queue that is always empty and closed: the smallest possible implementation.
/// #[derive(Debug)]
/// struct Closed;
///
/// impl DeltaQueue<DynamicObject> for Closed {
///     fn poll_pop(&self, _: &mut Context<'_>, _: &mut dyn FnMut(Popped<DynamicObject>)) -> Poll<bool> {
///         Poll::Ready(false)
///     }
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
pub trait DeltaQueue<K: Object>: Send + Sync {
    /// Polls for the next item. When there is one, takes it off the queue, runs `apply` on it
    /// before any write can reach the queue, and returns `Ready(true)`. Returns `Ready(false)`
    /// once the queue is closed and everything queued before the close has been popped;
    /// `Pending` (and wakes the task later) while the queue is empty.
    fn poll_pop(&self, cx: &mut Context<'_>, apply: &mut dyn FnMut(Popped<K>)) -> Poll<bool>;

    /// Hands back the deltas of one key whose processing failed, so they are retried. They go
    /// back (at the end of the queue) only if nothing newer is queued for that key; returns
    /// whether they did. Requeued deltas do not count again towards [`has_synced`](Self::has_synced).
    fn requeue(&self, deltas: Vec<Delta<K>>) -> bool;

    /// `true` once every delta of the first relist has been popped (at once if the first relist
    /// was empty, or if the first write was not a relist).
    fn has_synced(&self) -> bool;

    /// Closes the queue: writers get [`StoreError::Closed`] from then on, and pops end once the
    /// queue is drained.
    fn close(&self);

    /// How many items wait (keys in classic mode, deltas and steps in in-order mode).
    fn depth(&self) -> usize;

    /// Whether bookmarks written to the queue come out of it in their place, as
    /// [`Popped::Bookmark`]. A queue that cannot keep them in order (client-go's classic
    /// `DeltaFIFO` pops by key) drops them; the default says so.
    fn passes_bookmarks(&self) -> bool {
        false
    }

    /// How long the oldest waiting item has waited; `None` when the queue is empty. The default
    /// says nothing is known.
    fn oldest_age(&self) -> Option<Duration> {
        None
    }

    /// Waits for the next item and takes it off the queue without applying it anywhere. Returns
    /// `None` once the queue is closed and drained. Cancel-safe: dropping the future before it
    /// completes loses nothing. For a `dyn DeltaQueue`, use [`PopFuture::new`].
    fn pop(&self) -> PopFuture<'_, K>
    where
        Self: Sized,
    {
        PopFuture::new(self)
    }

    /// Waits for the next item and applies it to `cache` by the consumer contract
    /// ([`apply_popped`]) before any write can reach the queue; returns the item and what
    /// changed, for the handlers. Returns `None` once the queue is closed and drained.
    /// Cancel-safe. For a `dyn DeltaQueue`, use [`PopIntoFuture::new`].
    fn pop_into<'a>(&'a self, cache: &'a (dyn CacheWrite<K> + 'a)) -> PopIntoFuture<'a, K>
    where
        Self: Sized,
    {
        PopIntoFuture::new(self, cache)
    }
}

/// The future of [`DeltaQueue::pop`]: the next item, taken off the queue and applied nowhere.
#[must_use = "futures do nothing unless polled"]
pub struct PopFuture<'a, K: Object> {
    queue: &'a (dyn DeltaQueue<K> + 'a),
}

impl<'a, K: Object> PopFuture<'a, K> {
    /// Pops from any queue, `dyn` included.
    pub fn new(queue: &'a (dyn DeltaQueue<K> + 'a)) -> Self {
        Self { queue }
    }
}

impl<K: Object> std::fmt::Debug for PopFuture<'_, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PopFuture")
    }
}

impl<K: Object> std::future::Future for PopFuture<'_, K> {
    type Output = Option<Popped<K>>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut out = None;
        let open = std::task::ready!(self.queue.poll_pop(cx, &mut |popped| out = Some(popped)));
        Poll::Ready(if open { out } else { None })
    }
}

/// The future of [`DeltaQueue::pop_into`]: the next item, applied to a cache by the consumer
/// contract while no writer could reach the queue.
#[must_use = "futures do nothing unless polled"]
pub struct PopIntoFuture<'a, K: Object> {
    queue: &'a (dyn DeltaQueue<K> + 'a),
    cache: &'a (dyn CacheWrite<K> + 'a),
}

impl<'a, K: Object> PopIntoFuture<'a, K> {
    /// Pops from any queue, `dyn` included, into `cache`.
    pub fn new(queue: &'a (dyn DeltaQueue<K> + 'a), cache: &'a (dyn CacheWrite<K> + 'a)) -> Self {
        Self { queue, cache }
    }
}

impl<K: Object> std::fmt::Debug for PopIntoFuture<'_, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PopIntoFuture")
    }
}

/// What [`DeltaQueue::pop_into`] yields: the item, and what applying it changed.
pub struct PoppedItem<K> {
    /// The item as the queue handed it out.
    pub popped: Popped<K>,
    /// What applying it to the cache changed.
    pub applied: Applied<K>,
}

impl<K: std::fmt::Debug> std::fmt::Debug for PoppedItem<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoppedItem")
            .field("popped", &self.popped)
            .field("applied", &self.applied)
            .finish()
    }
}

impl<K: Object> std::future::Future for PopIntoFuture<'_, K> {
    type Output = Option<PoppedItem<K>>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let cache = self.cache;
        let mut out = None;
        let open = std::task::ready!(self.queue.poll_pop(cx, &mut |popped| {
            let applied = apply_popped(&popped, cache);
            out = Some(PoppedItem { popped, applied });
        }));
        Poll::Ready(if open { out } else { None })
    }
}

/// One change to the cache, as a handler hears of it.
pub enum Notification<K> {
    /// A new object (client-go's `OnAdd(obj, isInInitialList)`).
    Added {
        /// The object.
        object: Arc<K>,
        /// `true` when it came with the informer's initial list.
        is_in_initial_list: bool,
    },
    /// A changed object, or a resync (then `old` and `new` are the same object).
    Updated {
        /// What the cache held before.
        old: Arc<K>,
        /// What it holds now.
        new: Arc<K>,
    },
    /// An object left the cache: the server's last state, or a tombstone when the delete was
    /// inferred from a relist.
    Deleted {
        /// The object or its tombstone.
        object: DeltaObject<K>,
    },
}

impl<K> Clone for Notification<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Added {
                object,
                is_in_initial_list,
            } => Self::Added {
                object: Arc::clone(object),
                is_in_initial_list: *is_in_initial_list,
            },
            Self::Updated { old, new } => Self::Updated {
                old: Arc::clone(old),
                new: Arc::clone(new),
            },
            Self::Deleted { object } => Self::Deleted {
                object: object.clone(),
            },
        }
    }
}

impl<K: std::fmt::Debug> std::fmt::Debug for Notification<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Added {
                object,
                is_in_initial_list,
            } => f
                .debug_struct("Added")
                .field("object", object)
                .field("is_in_initial_list", is_in_initial_list)
                .finish(),
            Self::Updated { old, new } => f
                .debug_struct("Updated")
                .field("old", old)
                .field("new", new)
                .finish(),
            Self::Deleted { object } => f.debug_struct("Deleted").field("object", object).finish(),
        }
    }
}

/// What applying one popped item to a cache changed: the notifications for the handlers, in
/// order, and the writes the cache refused (an index function failed; the object is not cached).
pub struct Applied<K> {
    /// What the handlers hear, in order.
    pub notifications: Vec<Notification<K>>,
    /// Writes the cache refused; the informer logs them and goes on, as client-go does.
    pub errors: Vec<StoreError>,
}

impl<K> Default for Applied<K> {
    fn default() -> Self {
        Self {
            notifications: Vec::new(),
            errors: Vec::new(),
        }
    }
}

impl<K: Object> Applied<K> {
    /// What the handlers hear when `new` was stored over `previous`: an add, an update, or,
    /// when `previous` is another incarnation of the name (its uid differs), a tombstone for it
    /// and an add.
    fn stored(&mut self, previous: Option<Arc<K>>, new: Arc<K>, is_in_initial_list: bool) {
        let old = match previous {
            Some(old) if !same_incarnation(&*old, &*new) => {
                self.notifications.push(Notification::Deleted {
                    object: DeltaObject::DeletedFinalStateUnknown(DeletedFinalStateUnknown {
                        key: old.key(),
                        last_known: old,
                    }),
                });
                None
            }
            other => other,
        };
        self.notifications.push(match old {
            Some(old) => Notification::Updated { old, new },
            None => Notification::Added {
                object: new,
                is_in_initial_list,
            },
        });
    }
}

/// `false` only when both objects carry a uid and the uids differ.
fn same_incarnation<K: Object>(a: &K, b: &K) -> bool {
    match (a.uid(), b.uid()) {
        (Some(x), Some(y)) if !x.is_empty() && !y.is_empty() => x == y,
        _ => true,
    }
}

impl<K: std::fmt::Debug> std::fmt::Debug for Applied<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Applied")
            .field("notifications", &self.notifications)
            .field("errors", &self.errors)
            .finish()
    }
}

/// The consumer contract: applies one popped item to `cache` and says what the handlers hear
/// (client-go's `processDeltas`, and its atomic FIFO's relist).
///
/// - An `Added`, `Updated`, `Replaced` or `Sync` delta stores its object: `Updated { old, new }`
///   when the cache held the key, else `Added` (with the delta's `is_initial_list`).
/// - A `Deleted` delta removes the key: `Deleted` with the delta's object (or tombstone) when the
///   cache held it; nothing when it did not (a delete already applied, or of a key never seen).
/// - A relist step replaces the whole cache at once: a `Deleted` tombstone for every object the
///   cache held that the list lacks (with the object it held), then `Added` or `Updated` for each
///   listed object, in list order.
/// - A resync step: `Updated` from each cached object to itself.
/// - A bookmark: nothing (the consumer may note that its store has reached the version).
/// - Where `Updated` would go from one incarnation of a name to another (both objects carry a
///   uid and the uids differ: the object was deleted and created again while the watch did not
///   see it, and a relist found the new one), the notifications are a `Deleted` tombstone with
///   the old object, then `Added` with the new one, so that every delete reaches the handlers.
///   client-go notifies an update here.
///
/// Deltas of a [`Popped::Key`] or [`Popped::Batch`] are applied as one write.
pub fn apply_popped<K: Object>(popped: &Popped<K>, cache: &(dyn CacheWrite<K> + '_)) -> Applied<K> {
    let mut applied = Applied::default();
    match popped {
        Popped::Key(deltas) | Popped::Batch(deltas) => {
            let ops = deltas
                .iter()
                .map(|d| match d.kind {
                    DeltaType::Deleted => CacheOp::Remove(d.key()),
                    _ => CacheOp::Upsert(Arc::clone(d.object.object())),
                })
                .collect();
            let outcomes = cache.apply_batch(ops);
            for (delta, outcome) in deltas.iter().zip(outcomes) {
                let previous = match outcome {
                    Ok(previous) => previous,
                    Err(e) => {
                        applied.errors.push(e);
                        continue;
                    }
                };
                match (delta.kind, previous) {
                    (DeltaType::Deleted, None) => {}
                    (DeltaType::Deleted, Some(_)) => {
                        applied.notifications.push(Notification::Deleted {
                            object: delta.object.clone(),
                        });
                    }
                    (_, previous) => applied.stored(
                        previous,
                        Arc::clone(delta.object.object()),
                        delta.is_initial_list,
                    ),
                }
            }
        }
        Popped::Replace(step) => {
            let replaced = cache.replace_all(step.objects.clone());
            for last_known in replaced.removed {
                applied.notifications.push(Notification::Deleted {
                    object: DeltaObject::DeletedFinalStateUnknown(DeletedFinalStateUnknown {
                        key: last_known.key(),
                        last_known,
                    }),
                });
            }
            for (object, outcome) in step.objects.iter().zip(replaced.outcomes) {
                match outcome {
                    Ok(previous) => {
                        applied.stored(previous, Arc::clone(object), step.is_initial_list);
                    }
                    Err(e) => applied.errors.push(e),
                }
            }
        }
        Popped::Resync => cache.for_each(&mut |o| {
            applied.notifications.push(Notification::Updated {
                old: Arc::clone(o),
                new: Arc::clone(o),
            })
        }),
        // The consumer notes the version; the store and the handlers' events are unchanged.
        Popped::Bookmark(_) => {}
    }
    applied
}

macro_rules! forward_queue {
    ($($ptr:ty),*) => {$(
        impl<K: Object, Q: DeltaQueue<K> + ?Sized> DeltaQueue<K> for $ptr {
            fn poll_pop(&self, cx: &mut Context<'_>, apply: &mut dyn FnMut(Popped<K>)) -> Poll<bool> {
                (**self).poll_pop(cx, apply)
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
            fn passes_bookmarks(&self) -> bool {
                (**self).passes_bookmarks()
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
    use crate::{CacheWrite, DeltaObject, DeltaType, DynamicObject, ObjectKey};

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

    fn at(name: &str, rv: &str) -> Arc<DynamicObject> {
        let mut o = DynamicObject::default();
        o.metadata.name = Some(name.into());
        o.metadata.resource_version = Some(rv.into());
        Arc::new(o)
    }

    fn heard(applied: &Applied<DynamicObject>) -> Vec<String> {
        let show = |o: &DynamicObject| {
            format!(
                "{}@{}",
                o.metadata.name.as_deref().unwrap_or(""),
                o.metadata.resource_version.as_deref().unwrap_or("")
            )
        };
        applied
            .notifications
            .iter()
            .map(|n| match n {
                Notification::Added {
                    object,
                    is_in_initial_list,
                } => format!(
                    "+{}{}",
                    show(object),
                    if *is_in_initial_list { "*" } else { "" }
                ),
                Notification::Updated { old, new } => format!("~{}>{}", show(old), show(new)),
                Notification::Deleted { object } if object.is_tombstone() => {
                    format!("-?{}", show(object.object()))
                }
                Notification::Deleted { object } => format!("-{}", show(object.object())),
            })
            .collect()
    }

    #[test]
    fn the_consumer_contract_applies_each_kind_of_pop_and_says_what_changed() {
        type Map = std::collections::BTreeMap<ObjectKey, Arc<DynamicObject>>;
        let cache: std::sync::Mutex<Map> = Default::default();
        let mut initial = Delta::of(DeltaType::Replaced, at("a", "1"));
        initial.is_initial_list = true;
        let steps: Vec<(Popped<DynamicObject>, &[&str], &[&str])> = vec![
            (
                Popped::Batch(vec![initial, Delta::of(DeltaType::Added, at("b", "1"))]),
                &["+a@1*", "+b@1"],
                &["a@1", "b@1"],
            ),
            (
                // One key's deltas: an update of a held key, then its delete.
                Popped::Key(vec![
                    Delta::of(DeltaType::Updated, at("a", "2")),
                    Delta::of(DeltaType::Deleted, at("a", "3")),
                ]),
                &["~a@1>a@2", "-a@3"],
                &["b@1"],
            ),
            (
                // A delete of a key the store does not hold tells nobody.
                Popped::Batch(vec![Delta::of(DeltaType::Deleted, at("zz", "4"))]),
                &[],
                &["b@1"],
            ),
            (
                Popped::Batch(vec![Delta::of(DeltaType::Sync, at("b", "1"))]),
                &["~b@1>b@1"],
                &["b@1"],
            ),
            (
                // A relist: tombstones for what it lacks first, then the list in order.
                Popped::Replace(ReplaceStep {
                    objects: vec![at("c", "5"), at("b", "5")],
                    resource_version: "5".into(),
                    tombstones: Vec::new(),
                    is_initial_list: false,
                }),
                &["~b@1>b@5", "+c@5"],
                &["b@5", "c@5"],
            ),
            (Popped::Resync, &["~b@5>b@5", "~c@5>c@5"], &["b@5", "c@5"]),
            (
                Popped::Replace(ReplaceStep {
                    objects: vec![at("c", "6")],
                    resource_version: "6".into(),
                    tombstones: Vec::new(),
                    is_initial_list: false,
                }),
                &["-?b@5", "~c@5>c@6"],
                &["c@6"],
            ),
        ];
        for (i, (popped, want_heard, want_held)) in steps.into_iter().enumerate() {
            let applied = apply_popped(&popped, &cache);
            assert!(applied.errors.is_empty());
            // What is heard, as a set: the order within a relist has its own test below.
            let mut got = heard(&applied);
            got.sort();
            let mut want: Vec<String> = want_heard.iter().map(|s| s.to_string()).collect();
            want.sort();
            assert_eq!(got, want, "step {i}");
            let held: Vec<String> = cache
                .lock()
                .unwrap()
                .values()
                .map(|o| {
                    format!(
                        "{}@{}",
                        o.metadata.name.as_deref().unwrap(),
                        o.metadata.resource_version.as_deref().unwrap()
                    )
                })
                .collect();
            assert_eq!(held, want_held, "step {i}");
        }
    }

    #[test]
    fn a_relist_tells_of_deletions_before_the_list_in_list_order() {
        type Map = std::collections::BTreeMap<ObjectKey, Arc<DynamicObject>>;
        let cache: std::sync::Mutex<Map> = Default::default();
        cache.upsert(at("gone", "1")).unwrap();
        let applied = apply_popped(
            &Popped::Replace(ReplaceStep {
                objects: vec![at("z", "2"), at("a", "2")],
                resource_version: "2".into(),
                tombstones: Vec::new(),
                is_initial_list: true,
            }),
            &cache,
        );
        assert_eq!(heard(&applied), ["-?gone@1", "+z@2*", "+a@2*"]);
    }

    #[test]
    fn a_name_taken_by_a_new_incarnation_is_heard_as_a_delete_then_an_add() {
        type Map = std::collections::BTreeMap<ObjectKey, Arc<DynamicObject>>;
        let with_uid = |name: &str, rv: &str, uid: &str| {
            let mut o = (*at(name, rv)).clone();
            o.metadata.uid = Some(uid.into());
            Arc::new(o)
        };
        let cache: std::sync::Mutex<Map> = Default::default();
        cache.upsert(with_uid("a", "1", "u1")).unwrap();
        cache.upsert(with_uid("b", "1", "u1")).unwrap();
        // A relist finds `a` deleted and created again while the watch was away: its old
        // incarnation's delete must not turn into an update.
        let applied = apply_popped(
            &Popped::Replace(ReplaceStep {
                objects: vec![with_uid("a", "5", "u2"), with_uid("b", "5", "u1")],
                resource_version: "5".into(),
                tombstones: Vec::new(),
                is_initial_list: false,
            }),
            &cache,
        );
        assert_eq!(heard(&applied), ["-?a@1", "+a@5", "~b@1>b@5"]);
        // The same through a key's deltas (the classic FIFO's relist), and objects without a
        // uid are one incarnation as before.
        let applied = apply_popped(
            &Popped::Key(vec![Delta::of(
                DeltaType::Replaced,
                with_uid("a", "6", "u3"),
            )]),
            &cache,
        );
        assert_eq!(heard(&applied), ["-?a@5", "+a@6"]);
        let applied = apply_popped(
            &Popped::Batch(vec![Delta::of(DeltaType::Updated, at("a", "7"))]),
            &cache,
        );
        assert_eq!(heard(&applied), ["~a@6>a@7"]);
    }
}
