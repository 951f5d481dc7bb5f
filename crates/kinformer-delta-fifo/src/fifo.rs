//! The queue itself: both modes behind one lock.

use std::collections::VecDeque;
use std::collections::hash_map::Entry as MapEntry;
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use kinformer_core::{
    DeletedFinalStateUnknown, Delta, DeltaObject, DeltaQueue, DeltaType, Error as CoreError,
    KnownObjects, Object, ObjectKey, Popped, ReflectorStore, ReplaceStep, ResourceVersion,
};
use parking_lot::Mutex;

use crate::Error;

/// How the queue orders and hands out deltas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// client-go's `DeltaFIFO`: one entry per key holding that key's deltas; a key keeps its
    /// place while more deltas arrive; [`pop`](DeltaFifo::pop) hands out all deltas of the oldest
    /// key as [`Popped::Key`].
    #[default]
    Classic,
    /// client-go's current default (`RealFIFO`): a flat queue of single deltas in arrival order,
    /// popped as [`Popped::Batch`]es of consecutive deltas with distinct keys, and relists as one
    /// atomic [`Popped::Replace`] step.
    InOrder,
}

/// Builds a [`DeltaFifo`].
pub struct DeltaFifoBuilder<K> {
    mode: Mode,
    known: Option<Arc<dyn KnownObjects<K>>>,
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
    /// The queue's mode (default [`Mode::Classic`]).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// What the consumer's store already holds (client-go's `knownObjects`, normally the
    /// indexer's reader): consulted for tombstones on relist, for resync, and to ignore deletes of
    /// unknown keys. Without it, only queued keys are known.
    pub fn known_objects(mut self, known: Arc<dyn KnownObjects<K>>) -> Self {
        self.known = Some(known);
        self
    }

    /// Bounds the queue to `capacity` items: while it is full, [`ReflectorStore::poll_ready`]
    /// is `Pending` (the writer waits), nothing is ever dropped. Unbounded by default.
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// The most deltas one in-order pop hands out (default 64). Ignored in classic mode.
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
        let queue = match self.mode {
            Mode::Classic => Queue::Classic(Classic {
                items: HashMap::new(),
                order: VecDeque::new(),
            }),
            Mode::InOrder => Queue::InOrder(InOrder {
                items: VecDeque::new(),
                pending: HashMap::new(),
                replaces_queued: 0,
                batches: 0,
            }),
        };
        Ok(DeltaFifo {
            state: Mutex::new(State {
                queue,
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
    known: Option<Arc<dyn KnownObjects<K>>>,
    capacity: Option<usize>,
    batch_size: usize,
    mode: Mode,
}

impl<K> fmt::Debug for DeltaFifo<K> {
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

impl<K> Queue<K> {
    fn depth(&self) -> usize {
        match self {
            Self::Classic(c) => c.order.len(),
            Self::InOrder(q) => q.items.len(),
        }
    }
}

struct Classic<K> {
    items: HashMap<ObjectKey, Entry<K>>,
    order: VecDeque<ObjectKey>,
}

struct Entry<K> {
    deltas: Vec<Delta<K>>,
    since: Instant,
}

struct InOrder<K> {
    items: VecDeque<Item<K>>,
    /// For every key with a queued delta (or named by a queued relist): how many queued items
    /// touch it and its newest queued state (`None`: deleted).
    pending: HashMap<ObjectKey, Pending<K>>,
    replaces_queued: usize,
    /// Batches handed out so far; numbers each batch.
    batches: u64,
}

enum Item<K> {
    Delta {
        key: ObjectKey,
        delta: Delta<K>,
        since: Instant,
    },
    Replace {
        /// Boxed: a relist is rare and large, and inline it would make every queued delta as big.
        step: Box<ReplaceStep<K>>,
        /// The keys of `step.objects`, computed once.
        keys: Vec<ObjectKey>,
        since: Instant,
    },
}

struct Pending<K> {
    count: usize,
    newest: Option<Arc<K>>,
    /// The last batch that took a delta of this key: a batch holds each key once.
    batch: u64,
}

impl<K> Classic<K> {
    /// client-go's `queueActionLocked`: append, collapse a doubled delete, keep the key's place.
    fn push(&mut self, key: ObjectKey, delta: Delta<K>) {
        match self.items.entry(key) {
            MapEntry::Occupied(mut e) => {
                let deltas = &mut e.get_mut().deltas;
                deltas.push(delta);
                dedup_deletes(deltas);
            }
            MapEntry::Vacant(v) => {
                self.order.push_back(v.key().clone());
                v.insert(Entry {
                    deltas: vec![delta],
                    since: Instant::now(),
                });
            }
        }
    }
}

/// Two consecutive `Deleted` deltas collapse to one: the older, unless the older is a tombstone,
/// then the newer (client-go's `dedupDeltas`).
fn dedup_deletes<K>(deltas: &mut Vec<Delta<K>>) {
    let n = deltas.len();
    if n < 2 {
        return;
    }
    let (older, newer) = (&deltas[n - 2], &deltas[n - 1]);
    if older.kind != DeltaType::Deleted || newer.kind != DeltaType::Deleted {
        return;
    }
    if older.object.is_tombstone() {
        deltas.remove(n - 2);
    } else {
        deltas.pop();
    }
}

impl<K> InOrder<K> {
    fn push(&mut self, key: ObjectKey, delta: Delta<K>) {
        let newest = match delta.kind {
            DeltaType::Deleted => None,
            _ => Some(Arc::clone(delta.object.object())),
        };
        match self.pending.entry(key.clone()) {
            MapEntry::Occupied(mut e) => {
                let p = e.get_mut();
                p.count += 1;
                p.newest = newest;
            }
            MapEntry::Vacant(v) => {
                v.insert(Pending {
                    count: 1,
                    newest,
                    batch: 0,
                });
            }
        }
        self.items.push_back(Item::Delta {
            key,
            delta,
            since: Instant::now(),
        });
    }

    fn release(&mut self, key: &ObjectKey) {
        if let MapEntry::Occupied(mut e) = self.pending.entry(key.clone()) {
            e.get_mut().count -= 1;
            if e.get().count == 0 {
                e.remove();
            }
        }
    }

    /// Whether the consumer's store will hold `key` once it has applied everything queued.
    fn will_hold(&self, key: &str, known: Option<&dyn KnownObjects<K>>) -> bool {
        match self.pending.get(key) {
            Some(p) => p.newest.is_some(),
            None if self.replaces_queued > 0 => false,
            None => known.is_some_and(|k| k.get_by_key(key).is_some()),
        }
    }
}

fn tombstone<K>(key: ObjectKey, last_known: Arc<K>, is_initial_list: bool) -> Delta<K> {
    Delta {
        kind: DeltaType::Deleted,
        object: DeltaObject::DeletedFinalStateUnknown(DeletedFinalStateUnknown { key, last_known }),
        is_initial_list,
    }
}

impl<K: Object> DeltaFifo<K> {
    /// A builder, classic mode, unbounded, with no known objects.
    pub fn builder() -> DeltaFifoBuilder<K> {
        DeltaFifoBuilder {
            mode: Mode::Classic,
            known: None,
            capacity: None,
            batch_size: 64,
        }
    }

    /// A classic, unbounded queue that consults `known` (normally the indexer's reader).
    pub fn new(known: Arc<dyn KnownObjects<K>>) -> Self {
        Self::builder()
            .known_objects(known)
            .build()
            .expect("the default configuration is valid")
    }

    /// The queue's mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// How many items wait: keys in classic mode, deltas and relists in in-order mode.
    pub fn depth(&self) -> usize {
        self.state.lock().queue.depth()
    }

    /// How long the oldest waiting item has waited (`None` when empty). In classic mode a key's
    /// age counts from its first queued delta.
    pub fn oldest_age(&self) -> Option<Duration> {
        let state = self.state.lock();
        let since = match &state.queue {
            Queue::Classic(c) => c
                .order
                .front()
                .and_then(|k| c.items.get(k))
                .map(|e| e.since),
            Queue::InOrder(q) => q.items.front().map(|i| match i {
                Item::Delta { since, .. } | Item::Replace { since, .. } => *since,
            }),
        };
        since.map(|s| s.elapsed())
    }

    /// Whether [`close`](Self::close) has been called.
    pub fn is_closed(&self) -> bool {
        self.state.lock().closed
    }

    /// `true` once every delta of the first relist has been popped; see [`DeltaQueue::has_synced`].
    pub fn has_synced(&self) -> bool {
        let state = self.state.lock();
        state.populated && state.initial_remaining == 0
    }

    /// Closes the queue: writes fail with [`kinformer_core::Error::StoreClosed`] from now on,
    /// [`pop`](Self::pop) drains what is queued and then returns `None`.
    pub fn close(&self) {
        let wakers = {
            let mut state = self.state.lock();
            state.closed = true;
            let mut w = std::mem::take(&mut state.consumers);
            w.append(&mut state.writers);
            w
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Takes the next item if there is one, without waiting.
    pub fn try_pop(&self) -> Option<Popped<K>> {
        let (popped, wake) = {
            let mut state = self.state.lock();
            let popped = self.pop_locked(&mut state);
            (popped, self.writers_to_wake(&mut state))
        };
        wake.into_iter().for_each(Waker::wake);
        popped
    }

    /// Waits for the next item; `None` once the queue is closed and drained. Cancel-safe.
    pub async fn pop(&self) -> Option<Popped<K>> {
        std::future::poll_fn(|cx| self.poll_pop(cx)).await
    }

    /// Polls for the next item: the building block of [`pop`](Self::pop).
    pub fn poll_pop(&self, cx: &mut Context<'_>) -> Poll<Option<Popped<K>>> {
        let (result, wake) = {
            let mut state = self.state.lock();
            let result = match self.pop_locked(&mut state) {
                Some(p) => Poll::Ready(Some(p)),
                None if state.closed => Poll::Ready(None),
                None => {
                    if !state.consumers.iter().any(|w| w.will_wake(cx.waker())) {
                        state.consumers.push(cx.waker().clone());
                    }
                    Poll::Pending
                }
            };
            (result, self.writers_to_wake(&mut state))
        };
        wake.into_iter().for_each(Waker::wake);
        result
    }

    /// Hands back the deltas of one key for a retry; see [`DeltaQueue::requeue`].
    pub fn requeue(&self, deltas: Vec<Delta<K>>) -> bool {
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
            match &mut state.queue {
                Queue::Classic(c) => {
                    if c.items.contains_key(&key) {
                        return false;
                    }
                    c.order.push_back(key.clone());
                    c.items.insert(
                        key,
                        Entry {
                            deltas,
                            since: Instant::now(),
                        },
                    );
                }
                Queue::InOrder(q) => {
                    if q.replaces_queued > 0 || q.pending.contains_key(&key) {
                        return false;
                    }
                    for delta in deltas {
                        q.push(key.clone(), delta);
                    }
                }
            }
            state.populated = true;
            std::mem::take(&mut state.consumers)
        };
        wake.into_iter().for_each(Waker::wake);
        true
    }

    fn writers_to_wake(&self, state: &mut State<K>) -> Vec<Waker> {
        match self.capacity {
            Some(cap) if !state.writers.is_empty() && state.queue.depth() < cap => {
                std::mem::take(&mut state.writers)
            }
            _ => Vec::new(),
        }
    }

    fn pop_locked(&self, state: &mut State<K>) -> Option<Popped<K>> {
        let (popped, items) = match &mut state.queue {
            Queue::Classic(c) => {
                let key = c.order.pop_front()?;
                let entry = c.items.remove(&key).expect("every queued key has an entry");
                (Popped::Key(entry.deltas), 1)
            }
            Queue::InOrder(q) => match q.items.front()? {
                Item::Replace { .. } => {
                    let Some(Item::Replace { step, keys, .. }) = q.items.pop_front() else {
                        unreachable!("the front was just seen to be a relist");
                    };
                    q.replaces_queued -= 1;
                    for key in &keys {
                        q.release(key);
                    }
                    for t in &step.tombstones {
                        q.release(&t.key);
                    }
                    (Popped::Replace(*step), 1)
                }
                Item::Delta { .. } => {
                    q.batches += 1;
                    let id = q.batches;
                    let mut batch = Vec::new();
                    while batch.len() < self.batch_size {
                        let Some(Item::Delta { key, .. }) = q.items.front() else {
                            break;
                        };
                        let p = q
                            .pending
                            .get_mut(key)
                            .expect("every queued delta's key is pending");
                        if p.batch == id {
                            break;
                        }
                        p.batch = id;
                        p.count -= 1;
                        let last = p.count == 0;
                        let Some(Item::Delta { key, delta, .. }) = q.items.pop_front() else {
                            unreachable!("the front was just seen to be a delta");
                        };
                        if last {
                            q.pending.remove(&key);
                        }
                        batch.push(delta);
                    }
                    let n = batch.len();
                    (Popped::Batch(batch), n)
                }
            },
        };
        state.initial_remaining = state.initial_remaining.saturating_sub(items);
        Some(popped)
    }

    /// Runs one write under the lock, then wakes the consumers.
    fn write(
        &self,
        f: impl FnOnce(&mut State<K>, Option<&dyn KnownObjects<K>>),
    ) -> Result<(), CoreError> {
        let wake = {
            let mut state = self.state.lock();
            if state.closed {
                return Err(CoreError::StoreClosed);
            }
            f(&mut state, self.known.as_deref());
            if state.consumers.is_empty() {
                Vec::new()
            } else {
                std::mem::take(&mut state.consumers)
            }
        };
        wake.into_iter().for_each(Waker::wake);
        Ok(())
    }

    fn push_live(&self, kind: DeltaType, object: Arc<K>) -> Result<(), CoreError> {
        let key = object.key();
        self.write(|state, known| {
            state.populated = true;
            let delta = Delta::of(kind, object);
            match &mut state.queue {
                Queue::Classic(c) => {
                    if kind == DeltaType::Deleted
                        && !c.items.contains_key(&key)
                        && known.is_none_or(|k| k.get_by_key(key.as_str()).is_none())
                    {
                        tracing::trace!(%key, "delete of an unknown key ignored");
                        return;
                    }
                    c.push(key, delta);
                }
                Queue::InOrder(q) => {
                    // The store will not hold the key when it gets here: a second delete (or a delete
                    // behind a relist that drops the key) would only repeat one.
                    if kind == DeltaType::Deleted && !q.will_hold(key.as_str(), known) {
                        tracing::trace!(%key, "delete of an unknown key ignored");
                        return;
                    }
                    q.push(key, delta);
                }
            }
        })
    }
}

fn replace_classic<K: Object>(
    c: &mut Classic<K>,
    objects: Vec<Arc<K>>,
    known: Option<&dyn KnownObjects<K>>,
    initial: bool,
) {
    let mut listed: HashSet<ObjectKey> = HashSet::with_capacity(objects.len());
    for object in objects {
        let key = object.key();
        listed.insert(key.clone());
        let mut delta = Delta::of(DeltaType::Replaced, object);
        delta.is_initial_list = initial;
        c.push(key, delta);
    }
    // Queued keys the list lacks: a tombstone with the newest queued state.
    let missing: Vec<ObjectKey> = c
        .order
        .iter()
        .filter(|k| !listed.contains(*k))
        .cloned()
        .collect();
    for key in missing {
        let newest = c.items[&key]
            .deltas
            .last()
            .map(|d| Arc::clone(d.object.object()))
            .expect("a queued entry has a delta");
        c.push(key.clone(), tombstone(key, newest, initial));
    }
    // Keys the store holds, the list lacks and nothing queued names: a tombstone with the stored
    // state.
    if let Some(known) = known {
        for key in known.list_keys() {
            if listed.contains(&key) || c.items.contains_key(&key) {
                continue;
            }
            if let Some(stored) = known.get_by_key(key.as_str()) {
                c.push(key.clone(), tombstone(key, stored, initial));
            }
        }
    }
}

fn replace_in_order<K: Object>(
    q: &mut InOrder<K>,
    objects: Vec<Arc<K>>,
    resource_version: ResourceVersion,
    known: Option<&dyn KnownObjects<K>>,
    initial: bool,
) -> bool {
    let keys: Vec<ObjectKey> = objects.iter().map(|o| o.key()).collect();
    let listed: HashSet<&ObjectKey> = keys.iter().collect();
    let mut tombstones: Vec<DeletedFinalStateUnknown<K>> = q
        .pending
        .iter()
        .filter(|(k, _)| !listed.contains(k))
        .filter_map(|(k, p)| {
            p.newest.as_ref().map(|o| DeletedFinalStateUnknown {
                key: k.clone(),
                last_known: Arc::clone(o),
            })
        })
        .collect();
    if q.replaces_queued == 0
        && let Some(known) = known
    {
        for key in known.list_keys() {
            if listed.contains(&key) || q.pending.contains_key(&key) {
                continue;
            }
            if let Some(stored) = known.get_by_key(key.as_str()) {
                tombstones.push(DeletedFinalStateUnknown {
                    key,
                    last_known: stored,
                });
            }
        }
    }
    tombstones.sort_by(|a, b| a.key.cmp(&b.key));
    drop(listed);
    for (key, object) in keys.iter().zip(&objects) {
        let p = q.pending.entry(key.clone()).or_insert(Pending {
            count: 0,
            newest: None,
            batch: 0,
        });
        p.count += 1;
        p.newest = Some(Arc::clone(object));
    }
    for t in &tombstones {
        let p = q.pending.entry(t.key.clone()).or_insert(Pending {
            count: 0,
            newest: None,
            batch: 0,
        });
        p.count += 1;
        p.newest = None;
    }
    let empty = objects.is_empty() && tombstones.is_empty();
    q.replaces_queued += 1;
    q.items.push_back(Item::Replace {
        step: Box::new(ReplaceStep {
            objects,
            resource_version,
            tombstones,
            is_initial_list: initial,
        }),
        keys,
        since: Instant::now(),
    });
    empty
}

impl<K: Object> ReflectorStore<K> for DeltaFifo<K> {
    fn add(&self, object: Arc<K>) -> Result<(), CoreError> {
        self.push_live(DeltaType::Added, object)
    }

    fn update(&self, object: Arc<K>) -> Result<(), CoreError> {
        self.push_live(DeltaType::Updated, object)
    }

    fn delete(&self, object: Arc<K>) -> Result<(), CoreError> {
        self.push_live(DeltaType::Deleted, object)
    }

    fn replace(
        &self,
        objects: Vec<Arc<K>>,
        resource_version: ResourceVersion,
    ) -> Result<(), CoreError> {
        self.write(|state, known| {
            let initial = !state.populated;
            state.populated = true;
            let empty = match &mut state.queue {
                Queue::Classic(c) => {
                    replace_classic(c, objects, known, initial);
                    false
                }
                Queue::InOrder(q) => replace_in_order(q, objects, resource_version, known, initial),
            };
            if initial {
                state.initial_remaining = if empty { 0 } else { state.queue.depth() };
            }
        })
    }

    fn resync(&self) -> Result<(), CoreError> {
        let Some(known) = self.known.as_deref() else {
            return Ok(());
        };
        let keys = known.list_keys();
        self.write(|state, _| match &mut state.queue {
            Queue::Classic(c) => {
                for key in keys {
                    if c.items.contains_key(&key) {
                        continue;
                    }
                    if let Some(stored) = known.get_by_key(key.as_str()) {
                        c.push(key, Delta::of(DeltaType::Sync, stored));
                    }
                }
            }
            Queue::InOrder(q) => {
                // A queued relist names every key the store will hold: nothing to re-deliver.
                if q.replaces_queued > 0 {
                    return;
                }
                for key in keys {
                    if q.pending.contains_key(&key) {
                        continue;
                    }
                    if let Some(stored) = known.get_by_key(key.as_str()) {
                        q.push(key, Delta::of(DeltaType::Sync, stored));
                    }
                }
            }
        })
    }

    fn bookmark(&self, resource_version: &ResourceVersion) {
        tracing::trace!(%resource_version, "bookmark");
    }

    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), CoreError>> {
        let mut state = self.state.lock();
        if state.closed {
            return Poll::Ready(Err(CoreError::StoreClosed));
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

#[async_trait::async_trait]
impl<K: Object> DeltaQueue<K> for DeltaFifo<K> {
    async fn pop(&self) -> Option<Popped<K>> {
        DeltaFifo::pop(self).await
    }

    fn requeue(&self, deltas: Vec<Delta<K>>) -> bool {
        DeltaFifo::requeue(self, deltas)
    }

    fn has_synced(&self) -> bool {
        DeltaFifo::has_synced(self)
    }

    fn close(&self) {
        DeltaFifo::close(self)
    }

    fn depth(&self) -> usize {
        DeltaFifo::depth(self)
    }

    fn oldest_age(&self) -> Option<Duration> {
        DeltaFifo::oldest_age(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinformer_core::DynamicObject;

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
    }
}
