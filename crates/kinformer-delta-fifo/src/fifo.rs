//! The queue itself: both modes behind one lock, the relist protocol, and the pop that applies
//! under the lock.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use kinformer_core::{
    CacheRead, CacheWrite, Delta, DeltaQueue, DeltaType, Object, Popped, PoppedItem,
    ReflectorStore, ResourceVersion, StoreError, StoreEvent, apply_popped,
};
use parking_lot::Mutex;

use crate::Error;
use crate::classic::Classic;
use crate::in_order::InOrder;

/// How the queue orders and hands out deltas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// client-go's `DeltaFIFO`: one entry per key holding that key's deltas; a key keeps its
    /// place while more deltas arrive; [`pop`](DeltaQueue::pop) hands out all deltas of the oldest
    /// key as [`Popped::Key`].
    Classic,
    /// client-go's current default (`RealFIFO`), and ours: a flat queue of single deltas in
    /// arrival order, popped as [`Popped::Batch`]es of consecutive deltas with distinct keys; a
    /// relist is one atomic [`Popped::Replace`] step and a resync one [`Popped::Resync`] step.
    #[default]
    InOrder,
}

/// The default most deltas of one in-order pop, as client-go's `RealFIFO` batches.
pub const DEFAULT_BATCH_SIZE: usize = 1000;

/// Builds a [`DeltaFifo`].
pub struct DeltaFifoBuilder<K> {
    mode: Mode,
    known: Option<Arc<dyn CacheRead<K>>>,
    capacity: Option<usize>,
    batch_size: usize,
}

impl<K> fmt::Debug for DeltaFifoBuilder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeltaFifoBuilder")
            .field("mode", &self.mode)
            .field("known_objects", &self.known.is_some())
            .field("capacity", &self.capacity)
            .field("batch_size", &self.batch_size)
            .finish()
    }
}

impl<K: Object> DeltaFifoBuilder<K> {
    /// The queue's mode (default [`Mode::InOrder`]). [`Mode::Classic`] needs
    /// [`known_objects`](Self::known_objects).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// What the consumer's store holds (client-go's `knownObjects`, normally the indexer): read
    /// to skip deletes of keys nobody holds, to make a relist's tombstones, and (classic mode) to
    /// resync. Without it (in-order mode only) a delete is always queued, and the consumer's
    /// store decides whether it removes anything (its apply answers with no notification when it
    /// does not).
    pub fn known_objects(mut self, known: Arc<dyn CacheRead<K>>) -> Self {
        self.known = Some(known);
        self
    }

    /// Bounds the queue to `capacity` items: while it is full, [`ReflectorStore::poll_ready`]
    /// is `Pending` (the writer waits), nothing is ever dropped. Unbounded by default.
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// The most deltas one in-order pop hands out (default [`DEFAULT_BATCH_SIZE`]). Ignored in
    /// classic mode.
    pub fn batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Builds the queue.
    pub fn build(self) -> Result<DeltaFifo<K>, Error> {
        if self.capacity == Some(0) {
            return Err(Error::ZeroCapacity);
        }
        if self.batch_size == 0 {
            return Err(Error::ZeroBatchSize);
        }
        if self.mode == Mode::Classic && self.known.is_none() {
            return Err(Error::ClassicWithoutKnownObjects);
        }
        let queue = match self.mode {
            Mode::Classic => Queue::Classic(Classic::new()),
            Mode::InOrder => Queue::InOrder(InOrder::new()),
        };
        Ok(DeltaFifo {
            state: Mutex::new(State {
                queue,
                relist: None,
                populated: false,
                initial_remaining: 0,
                closed: false,
                consumers: Vec::new(),
                writers: Vec::new(),
            }),
            known: self.known,
            capacity: self.capacity,
            batch_size: self.batch_size,
            mode: self.mode,
        })
    }
}

/// The delta FIFO: what the reflector writes into ([`ReflectorStore`]) and what the informer pops
/// from ([`DeltaQueue`]). See the crate documentation for the rules it follows.
pub struct DeltaFifo<K> {
    state: Mutex<State<K>>,
    known: Option<Arc<dyn CacheRead<K>>>,
    capacity: Option<usize>,
    batch_size: usize,
    mode: Mode,
}

impl<K: Object> fmt::Debug for DeltaFifo<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("DeltaFifo")
            .field("mode", &self.mode)
            .field("depth", &state.queue.depth())
            .field("closed", &state.closed)
            .field("capacity", &self.capacity)
            .finish()
    }
}

struct State<K> {
    queue: Queue<K>,
    /// The relist being gathered page by page (`begin_relist` .. `end_relist`).
    relist: Option<Vec<Arc<K>>>,
    /// Some write (other than a resync) has happened.
    populated: bool,
    /// Items still queued that were queued when the first relist arrived.
    initial_remaining: usize,
    closed: bool,
    /// Tasks waiting in `pop`.
    consumers: Vec<Waker>,
    /// Writers waiting in `poll_ready` for room.
    writers: Vec<Waker>,
}

enum Queue<K> {
    Classic(Classic<K>),
    InOrder(InOrder<K>),
}

impl<K: Object> Queue<K> {
    fn depth(&self) -> usize {
        match self {
            Self::Classic(c) => c.depth(),
            Self::InOrder(q) => q.depth(),
        }
    }
}

impl<K: Object> DeltaFifo<K> {
    /// A builder: in-order mode, unbounded, batches of [`DEFAULT_BATCH_SIZE`], no known objects.
    pub fn builder() -> DeltaFifoBuilder<K> {
        DeltaFifoBuilder {
            mode: Mode::default(),
            known: None,
            capacity: None,
            batch_size: DEFAULT_BATCH_SIZE,
        }
    }

    /// An in-order, unbounded queue that consults `known` (normally the indexer).
    pub fn new(known: Arc<dyn CacheRead<K>>) -> Self {
        Self::builder()
            .known_objects(known)
            .build()
            .expect("the default configuration is valid")
    }

    /// The queue's mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether [`close`](DeltaQueue::close) has been called.
    pub fn is_closed(&self) -> bool {
        self.state.lock().closed
    }

    /// Takes the next item if there is one, without waiting and without applying it anywhere.
    pub fn try_pop(&self) -> Option<Popped<K>> {
        let mut out = None;
        self.pop_step(None, &mut |p| out = Some(p));
        out
    }

    /// Takes the next item if there is one, without waiting, and applies it to `cache` by the
    /// consumer contract ([`apply_popped`]) before any write can reach the queue.
    pub fn try_pop_into(&self, cache: &dyn CacheWrite<K>) -> Option<PoppedItem<K>> {
        let mut out = None;
        self.pop_step(None, &mut |popped| {
            let applied = apply_popped(&popped, cache);
            out = Some(PoppedItem { popped, applied });
        });
        out
    }

    /// One pop under the lock: the item, if any, goes to `apply` before the lock is released.
    /// Returns `Some(true)` when an item was applied, `Some(false)` when closed and drained,
    /// `None` when empty (and `cx`'s waker, if given, is registered).
    fn pop_step(
        &self,
        cx: Option<&mut Context<'_>>,
        apply: &mut dyn FnMut(Popped<K>),
    ) -> Option<bool> {
        let (result, wake) = {
            let mut state = self.state.lock();
            let popped = match &mut state.queue {
                Queue::Classic(c) => c.pop(),
                Queue::InOrder(q) => q.pop(self.batch_size, self.known.as_deref()),
            };
            let result = match popped {
                Some((popped, items)) => {
                    state.initial_remaining = state.initial_remaining.saturating_sub(items);
                    // The consumer applies while no writer can reach the queue: a delete that
                    // arrives now is judged against a store that already holds what was popped.
                    apply(popped);
                    Some(true)
                }
                None if state.closed => Some(false),
                None => {
                    if let Some(cx) = cx
                        && !state.consumers.iter().any(|w| w.will_wake(cx.waker()))
                    {
                        state.consumers.push(cx.waker().clone());
                    }
                    None
                }
            };
            (result, self.writers_to_wake(&mut state))
        };
        wake.into_iter().for_each(Waker::wake);
        result
    }

    fn writers_to_wake(&self, state: &mut State<K>) -> Vec<Waker> {
        match self.capacity {
            Some(cap) if !state.writers.is_empty() && state.queue.depth() < cap => {
                std::mem::take(&mut state.writers)
            }
            _ => Vec::new(),
        }
    }

    /// Runs one write under the lock, then wakes the consumers.
    fn write<R>(
        &self,
        f: impl FnOnce(&mut State<K>, Option<&dyn CacheRead<K>>) -> R,
    ) -> Result<R, StoreError> {
        let (r, wake) = {
            let mut state = self.state.lock();
            if state.closed {
                return Err(StoreError::Closed);
            }
            let r = f(&mut state, self.known.as_deref());
            let wake = if state.consumers.is_empty() {
                Vec::new()
            } else {
                std::mem::take(&mut state.consumers)
            };
            (r, wake)
        };
        wake.into_iter().for_each(Waker::wake);
        Ok(r)
    }

    fn push_live(&self, kind: DeltaType, object: Arc<K>) -> Result<(), StoreError> {
        let key = object.key();
        self.write(|state, known| {
            state.populated = true;
            let delta = Delta::of(kind, object);
            match &mut state.queue {
                Queue::Classic(c) => c.push_live(key, delta, known),
                Queue::InOrder(q) => q.push_live(key, delta, known),
            }
        })
    }

    /// Adds a page to the relist being gathered.
    fn gather_page(&self, objects: Vec<Arc<K>>) -> Result<(), StoreError> {
        let mut state = self.state.lock();
        if state.closed {
            return Err(StoreError::Closed);
        }
        let known = self.known.as_deref();
        let State { queue, relist, .. } = &mut *state;
        let gathered = relist.get_or_insert_with(Vec::new);
        gathered.reserve(objects.len());
        for object in objects {
            let kept = held_copy(queue, known, &object).unwrap_or(object);
            gathered.push(kept);
        }
        Ok(())
    }

    /// Queues the gathered relist (an empty one if none was begun) as one step.
    fn end_relist(&self, resource_version: ResourceVersion) -> Result<(), StoreError> {
        self.write(|state, known| {
            let objects = state.relist.take().unwrap_or_default();
            let initial = !state.populated;
            state.populated = true;
            let counts_popped_step = match &mut state.queue {
                Queue::Classic(c) => {
                    c.replace(objects, known, initial);
                    false
                }
                Queue::InOrder(q) => {
                    q.replace(objects, resource_version, initial);
                    true
                }
            };
            if initial {
                // In-order, even an empty first relist is a step: synced once it is popped.
                state.initial_remaining = state.queue.depth();
                debug_assert!(!counts_popped_step || state.initial_remaining > 0);
            }
        })
    }
}

/// The object the queue or the store already holds for `object`'s key at the same
/// resourceVersion, if any: a relist keeps that one and drops the fresh copy.
fn held_copy<K: Object>(
    queue: &Queue<K>,
    known: Option<&dyn CacheRead<K>>,
    object: &Arc<K>,
) -> Option<Arc<K>> {
    let rv = object.resource_version()?;
    let key = object.key();
    let queued = match queue {
        Queue::Classic(c) => c.newest(key.as_str()),
        Queue::InOrder(q) => q.newest(key.as_str()),
    };
    let held = match queued {
        Some(q) => Arc::clone(q),
        None => known?.get_by_key(key.as_str())?,
    };
    (held.resource_version() == Some(rv)).then_some(held)
}

/// The reflector's writes, as client-go's `DeltaFIFO`/`RealFIFO` take them: a watch event is one
/// delta; a relist is gathered page by page and queued only at its end, so an abandoned list
/// leaves nothing behind, and an object the queue or the store already holds at the same
/// resourceVersion is kept as the held `Arc` (the fresh copy is dropped as its page arrives); a
/// resync re-delivers what the store holds; a bookmark changes nothing.
impl<K: Object> ReflectorStore<K> for DeltaFifo<K> {
    fn apply(&self, event: StoreEvent<K>) -> Result<(), StoreError> {
        match event {
            StoreEvent::Added(o) => self.push_live(DeltaType::Added, o),
            StoreEvent::Modified(o) => self.push_live(DeltaType::Updated, o),
            StoreEvent::Deleted(o) => self.push_live(DeltaType::Deleted, o),
            StoreEvent::RelistBegin => self.write(|state, _| state.relist = Some(Vec::new())),
            StoreEvent::RelistPage(objects) => self.gather_page(objects),
            StoreEvent::RelistEnd(resource_version) => self.end_relist(resource_version),
            StoreEvent::RelistAbandoned => {
                self.state.lock().relist = None;
                Ok(())
            }
            StoreEvent::Resync => self.write(|state, known| match &mut state.queue {
                Queue::Classic(c) => {
                    if let Some(known) = known {
                        c.resync(known);
                    }
                }
                Queue::InOrder(q) => q.resync(),
            }),
            // In order, a bookmark tells the consumer how far its store has come; classic mode
            // pops by key and has no place to keep it. A relist being gathered would land behind
            // it: such a bookmark says nothing about the store, and is dropped too.
            StoreEvent::Bookmark(resource_version) => {
                self.write(|state, _| match (&mut state.queue, &state.relist) {
                    (Queue::InOrder(q), None) => q.bookmark(resource_version),
                    _ => tracing::trace!(%resource_version, "bookmark dropped"),
                })
            }
        }
    }

    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), StoreError>> {
        let mut state = self.state.lock();
        if state.closed {
            return Poll::Ready(Err(StoreError::Closed));
        }
        match self.capacity {
            Some(cap) if state.queue.depth() >= cap => {
                if !state.writers.iter().any(|w| w.will_wake(cx.waker())) {
                    state.writers.push(cx.waker().clone());
                }
                Poll::Pending
            }
            _ => Poll::Ready(Ok(())),
        }
    }
}

/// The informer's side: pops that apply under the lock, requeue, close, and the sync and
/// metrics reads. [`pop`](DeltaQueue::pop) and [`pop_into`](DeltaQueue::pop_into) are the
/// trait's own, over [`poll_pop`](DeltaQueue::poll_pop).
impl<K: Object> DeltaQueue<K> for DeltaFifo<K> {
    fn poll_pop(&self, cx: &mut Context<'_>, apply: &mut dyn FnMut(Popped<K>)) -> Poll<bool> {
        match self.pop_step(Some(cx), apply) {
            Some(open) => Poll::Ready(open),
            None => Poll::Pending,
        }
    }

    fn requeue(&self, deltas: Vec<Delta<K>>) -> bool {
        let Some(first) = deltas.first() else {
            return false;
        };
        let key = first.key();
        if deltas[1..].iter().any(|d| d.key() != key) {
            tracing::warn!(%key, "requeue refused: the deltas are not all of one key");
            return false;
        }
        let wake = {
            let mut state = self.state.lock();
            if state.closed {
                return false;
            }
            let back = match &mut state.queue {
                Queue::Classic(c) => c.requeue(key, deltas),
                Queue::InOrder(q) => q.requeue(key, deltas),
            };
            if !back {
                return false;
            }
            state.populated = true;
            std::mem::take(&mut state.consumers)
        };
        wake.into_iter().for_each(Waker::wake);
        true
    }

    fn has_synced(&self) -> bool {
        let state = self.state.lock();
        state.populated && state.initial_remaining == 0
    }

    /// Closes the queue: writes fail with [`StoreError::Closed`] from now on, pops drain what is
    /// queued and then end.
    fn close(&self) {
        let wakers = {
            let mut state = self.state.lock();
            state.closed = true;
            state.relist = None;
            let mut w = std::mem::take(&mut state.consumers);
            w.append(&mut state.writers);
            w
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// How many items wait: keys in classic mode, deltas and steps in in-order mode.
    fn depth(&self) -> usize {
        self.state.lock().queue.depth()
    }

    /// In-order mode passes bookmarks; classic mode drops them.
    fn passes_bookmarks(&self) -> bool {
        self.mode == Mode::InOrder
    }

    /// How long the oldest waiting item has waited (`None` when empty). In classic mode a key's
    /// age counts from its first queued delta.
    fn oldest_age(&self) -> Option<Duration> {
        let state = self.state.lock();
        let since = match &state.queue {
            Queue::Classic(c) => c.oldest(),
            Queue::InOrder(q) => q.oldest(),
        };
        since.map(|s| s.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classic::{dedup_deletes, tombstone};
    use kinformer_core::DynamicObject;
    use kinformer_core::ObjectKey;

    fn obj(name: &str) -> Arc<DynamicObject> {
        let mut o = DynamicObject::default();
        o.metadata.name = Some(name.into());
        Arc::new(o)
    }

    fn deleted(name: &str, tomb: bool) -> Delta<DynamicObject> {
        if tomb {
            tombstone(ObjectKey::new(None, name), obj(name), false)
        } else {
            Delta::of(DeltaType::Deleted, obj(name))
        }
    }

    #[test]
    fn doubled_deletes_keep_the_older_unless_it_is_a_tombstone() {
        // (older is tombstone, newer is tombstone) -> which survives
        for (older_tomb, newer_tomb, keep_older) in [
            (false, false, true),
            (false, true, true),
            (true, false, false),
            (true, true, false),
        ] {
            let older = deleted("a", older_tomb);
            let newer = deleted("a", newer_tomb);
            let (older_ptr, newer_ptr) = (
                Arc::clone(older.object.object()),
                Arc::clone(newer.object.object()),
            );
            let mut deltas = vec![Delta::of(DeltaType::Added, obj("a")), older, newer];
            dedup_deletes(&mut deltas);
            assert_eq!(deltas.len(), 2);
            let kept = deltas[1].object.object();
            let want = if keep_older { &older_ptr } else { &newer_ptr };
            assert!(Arc::ptr_eq(kept, want), "{older_tomb} {newer_tomb}");
        }
        let mut not_doubled = vec![deleted("a", false), Delta::of(DeltaType::Added, obj("a"))];
        dedup_deletes(&mut not_doubled);
        assert_eq!(not_doubled.len(), 2);
    }

    #[test]
    fn builder_rejects_zero_sizes() {
        assert_eq!(
            DeltaFifo::<DynamicObject>::builder()
                .capacity(0)
                .build()
                .unwrap_err(),
            Error::ZeroCapacity
        );
        assert_eq!(
            DeltaFifo::<DynamicObject>::builder()
                .batch_size(0)
                .build()
                .unwrap_err(),
            Error::ZeroBatchSize
        );
        assert_eq!(
            DeltaFifo::<DynamicObject>::builder()
                .mode(Mode::Classic)
                .build()
                .unwrap_err(),
            Error::ClassicWithoutKnownObjects
        );
    }

    #[test]
    fn the_default_is_in_order_with_batches_of_a_thousand() {
        let fifo = DeltaFifo::<DynamicObject>::builder().build().unwrap();
        assert_eq!(fifo.mode(), Mode::InOrder);
        assert_eq!(fifo.batch_size, DEFAULT_BATCH_SIZE);
        assert_eq!(DEFAULT_BATCH_SIZE, 1000);
    }
}
