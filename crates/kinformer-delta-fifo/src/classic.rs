//! Classic mode (client-go's `DeltaFIFO`): one entry per key with that key's deltas, in the order
//! keys first arrived.

use std::collections::VecDeque;
use std::collections::hash_map::Entry as MapEntry;
use std::sync::Arc;
use std::time::Instant;

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use kinformer_core::{
    CacheRead, DeletedFinalStateUnknown, Delta, DeltaObject, DeltaType, Object, ObjectKey, Popped,
};

pub(crate) struct Classic<K> {
    items: HashMap<ObjectKey, Entry<K>>,
    order: VecDeque<ObjectKey>,
}

struct Entry<K> {
    deltas: Vec<Delta<K>>,
    since: Instant,
}

impl<K: Object> Classic<K> {
    pub(crate) fn new() -> Self {
        Self {
            items: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    pub(crate) fn depth(&self) -> usize {
        self.order.len()
    }

    pub(crate) fn oldest(&self) -> Option<Instant> {
        self.order
            .front()
            .and_then(|k| self.items.get(k))
            .map(|e| e.since)
    }

    /// The newest state queued for `key` (`None` when nothing is queued or the newest is a
    /// delete).
    pub(crate) fn newest(&self, key: &str) -> Option<&Arc<K>> {
        let last = self.items.get(key)?.deltas.last()?;
        (last.kind != DeltaType::Deleted).then(|| last.object.object())
    }

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

    /// A live write. A delete of a key that is neither queued nor held by the consumer's store is
    /// ignored; without known objects nothing says the store lacks the key, so it is queued (the
    /// consumer's apply drops it if its store lacks the key).
    pub(crate) fn push_live(
        &mut self,
        key: ObjectKey,
        delta: Delta<K>,
        known: Option<&dyn CacheRead<K>>,
    ) {
        if delta.kind == DeltaType::Deleted
            && !self.items.contains_key(&key)
            && known.is_some_and(|k| k.get_by_key(key.as_str()).is_none())
        {
            tracing::trace!(%key, "delete of an unknown key ignored");
            return;
        }
        self.push(key, delta);
    }

    /// Hands deltas back unless something is queued for the key.
    pub(crate) fn requeue(&mut self, key: ObjectKey, deltas: Vec<Delta<K>>) -> bool {
        if self.items.contains_key(&key) {
            return false;
        }
        self.order.push_back(key.clone());
        self.items.insert(
            key,
            Entry {
                deltas,
                since: Instant::now(),
            },
        );
        true
    }

    pub(crate) fn pop(&mut self) -> Option<(Popped<K>, usize)> {
        let key = self.order.pop_front()?;
        let entry = self
            .items
            .remove(&key)
            .expect("every queued key has an entry");
        Some((Popped::Key(entry.deltas), 1))
    }

    /// A relist: a `Replaced` delta per listed object, then a tombstone for each queued key the
    /// list lacks (with the newest queued state), then one for each key the store holds that the
    /// list lacks and nothing queued names (with the stored state).
    pub(crate) fn replace(
        &mut self,
        objects: Vec<Arc<K>>,
        known: Option<&dyn CacheRead<K>>,
        initial: bool,
    ) {
        let mut listed: HashSet<ObjectKey> = HashSet::with_capacity(objects.len());
        for object in objects {
            let key = object.key();
            listed.insert(key.clone());
            let mut delta = Delta::of(DeltaType::Replaced, object);
            delta.is_initial_list = initial;
            self.push(key, delta);
        }
        let missing: Vec<ObjectKey> = self
            .order
            .iter()
            .filter(|k| !listed.contains(*k))
            .cloned()
            .collect();
        for key in missing {
            let newest = self.items[&key]
                .deltas
                .last()
                .map(|d| Arc::clone(d.object.object()))
                .expect("a queued entry has a delta");
            self.push(key.clone(), tombstone(key, newest, initial));
        }
        if let Some(known) = known {
            for key in known.list_keys() {
                if listed.contains(&key) || self.items.contains_key(&key) {
                    continue;
                }
                if let Some(stored) = known.get_by_key(key.as_str()) {
                    self.push(key.clone(), tombstone(key, stored, initial));
                }
            }
        }
    }

    /// A resync: a `Sync` delta for each known key with nothing queued.
    pub(crate) fn resync(&mut self, known: &dyn CacheRead<K>) {
        for key in known.list_keys() {
            if self.items.contains_key(&key) {
                continue;
            }
            if let Some(stored) = known.get_by_key(key.as_str()) {
                self.push(key, Delta::of(DeltaType::Sync, stored));
            }
        }
    }
}

/// Two consecutive `Deleted` deltas collapse to one: the older, unless the older is a tombstone,
/// then the newer (client-go's `dedupDeltas`).
pub(crate) fn dedup_deletes<K>(deltas: &mut Vec<Delta<K>>) {
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

/// A delete the queue infers (a relist lacks the key) rather than sees: a tombstone carrying the
/// last state known.
pub(crate) fn tombstone<K>(key: ObjectKey, last_known: Arc<K>, is_initial_list: bool) -> Delta<K> {
    Delta {
        kind: DeltaType::Deleted,
        object: DeltaObject::DeletedFinalStateUnknown(DeletedFinalStateUnknown { key, last_known }),
        is_initial_list,
    }
}
