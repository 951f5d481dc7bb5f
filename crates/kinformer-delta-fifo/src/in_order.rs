//! In-order mode (client-go's `RealFIFO`): a flat queue of single deltas in arrival order, with a
//! relist and a resync each queued as one atomic step.

use std::collections::VecDeque;
use std::collections::hash_map::Entry as MapEntry;
use std::sync::Arc;
use std::time::Instant;

use foldhash::{HashMap, HashMapExt, HashSet};
use kinformer_core::{
    CacheRead, DeletedFinalStateUnknown, Delta, DeltaType, Object, ObjectKey, Popped, ReplaceStep,
    ResourceVersion,
};

pub(crate) struct InOrder<K> {
    items: VecDeque<Item<K>>,
    /// For every key with a queued delta (or listed by a queued relist): how many queued items
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
    Resync {
        since: Instant,
    },
    Bookmark {
        resource_version: ResourceVersion,
        since: Instant,
    },
}

struct Pending<K> {
    count: usize,
    newest: Option<Arc<K>>,
    /// The last batch that took a delta of this key: a batch holds each key once.
    batch: u64,
}

impl<K: Object> InOrder<K> {
    pub(crate) fn new() -> Self {
        Self {
            items: VecDeque::new(),
            pending: HashMap::new(),
            replaces_queued: 0,
            batches: 0,
        }
    }

    pub(crate) fn depth(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn oldest(&self) -> Option<Instant> {
        self.items.front().map(|i| match i {
            Item::Delta { since, .. }
            | Item::Replace { since, .. }
            | Item::Resync { since }
            | Item::Bookmark { since, .. } => *since,
        })
    }

    /// The newest state queued for `key` (`None` when nothing is queued or it is a delete).
    pub(crate) fn newest(&self, key: &str) -> Option<&Arc<K>> {
        self.pending.get(key)?.newest.as_ref()
    }

    fn note(&mut self, key: ObjectKey, newest: Option<Arc<K>>) {
        match self.pending.entry(key) {
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
    }

    fn push(&mut self, key: ObjectKey, delta: Delta<K>) {
        let newest = match delta.kind {
            DeltaType::Deleted => None,
            _ => Some(Arc::clone(delta.object.object())),
        };
        self.note(key.clone(), newest);
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

    /// Whether the consumer's store may hold `key` once it has applied everything queued.
    /// Without known objects nothing says it does not, so the answer is yes.
    fn may_hold(&self, key: &str, known: Option<&dyn CacheRead<K>>) -> bool {
        match self.pending.get(key) {
            Some(p) => p.newest.is_some(),
            // A queued relist that does not list the key removes it.
            None if self.replaces_queued > 0 => false,
            None => known.is_none_or(|k| k.get_by_key(key).is_some()),
        }
    }

    /// A live write. A delete of a key the store will not hold when it gets there (a second
    /// delete, or a delete behind a relist that drops the key) would only repeat one: ignored.
    pub(crate) fn push_live(
        &mut self,
        key: ObjectKey,
        delta: Delta<K>,
        known: Option<&dyn CacheRead<K>>,
    ) {
        if delta.kind == DeltaType::Deleted && !self.may_hold(key.as_str(), known) {
            tracing::trace!(%key, "delete of an unknown key ignored");
            return;
        }
        self.push(key, delta);
    }

    /// Hands deltas back unless a relist or anything of the key is queued.
    pub(crate) fn requeue(&mut self, key: ObjectKey, deltas: Vec<Delta<K>>) -> bool {
        if self.replaces_queued > 0 || self.pending.contains_key(&key) {
            return false;
        }
        for delta in deltas {
            self.push(key.clone(), delta);
        }
        true
    }

    /// A relist, queued as one step.
    pub(crate) fn replace(
        &mut self,
        objects: Vec<Arc<K>>,
        resource_version: ResourceVersion,
        initial: bool,
    ) {
        let keys: Vec<ObjectKey> = objects.iter().map(|o| o.key()).collect();
        // The relist removes every queued key it does not list.
        for p in self.pending.values_mut() {
            p.newest = None;
        }
        for (key, object) in keys.iter().zip(&objects) {
            self.note(key.clone(), Some(Arc::clone(object)));
        }
        self.replaces_queued += 1;
        self.items.push_back(Item::Replace {
            step: Box::new(ReplaceStep {
                objects,
                resource_version,
                tombstones: Vec::new(),
                is_initial_list: initial,
            }),
            keys,
            since: Instant::now(),
        });
    }

    /// A resync, queued as one step (two in a row are one).
    pub(crate) fn resync(&mut self) {
        if !matches!(self.items.back(), Some(Item::Resync { .. })) {
            self.items.push_back(Item::Resync {
                since: Instant::now(),
            });
        }
    }

    /// A bookmark, in its place: once the consumer pops it, its store holds everything up to
    /// the version. Bookmarks in a row are one, the newest.
    pub(crate) fn bookmark(&mut self, resource_version: ResourceVersion) {
        if let Some(Item::Bookmark {
            resource_version: queued,
            ..
        }) = self.items.back_mut()
        {
            *queued = resource_version;
            return;
        }
        self.items.push_back(Item::Bookmark {
            resource_version,
            since: Instant::now(),
        });
    }

    /// The next item: a bookmark, a relist or resync step alone, or a batch of up to `batch_size`
    /// consecutive deltas with distinct keys. A relist's tombstones are what `known` holds now
    /// that the list lacks: the consumer has applied everything queued before the step.
    pub(crate) fn pop(
        &mut self,
        batch_size: usize,
        known: Option<&dyn CacheRead<K>>,
    ) -> Option<(Popped<K>, usize)> {
        match self.items.front()? {
            Item::Resync { .. } => {
                self.items.pop_front();
                Some((Popped::Resync, 1))
            }
            Item::Bookmark { .. } => {
                let Some(Item::Bookmark {
                    resource_version, ..
                }) = self.items.pop_front()
                else {
                    unreachable!("the front was just seen to be a bookmark");
                };
                Some((Popped::Bookmark(resource_version), 1))
            }
            Item::Replace { .. } => {
                let Some(Item::Replace { mut step, keys, .. }) = self.items.pop_front() else {
                    unreachable!("the front was just seen to be a relist");
                };
                self.replaces_queued -= 1;
                if let Some(known) = known {
                    let listed: HashSet<&ObjectKey> = keys.iter().collect();
                    let mut tombstones: Vec<DeletedFinalStateUnknown<K>> = known
                        .list_keys()
                        .into_iter()
                        .filter(|k| !listed.contains(k))
                        .filter_map(|key| {
                            let last_known = known.get_by_key(key.as_str())?;
                            Some(DeletedFinalStateUnknown { key, last_known })
                        })
                        .collect();
                    tombstones.sort_by(|a, b| a.key.cmp(&b.key));
                    step.tombstones = tombstones;
                }
                for key in &keys {
                    self.release(key);
                }
                Some((Popped::Replace(*step), 1))
            }
            Item::Delta { .. } => {
                self.batches += 1;
                let id = self.batches;
                let mut batch = Vec::new();
                while batch.len() < batch_size {
                    let Some(Item::Delta { key, .. }) = self.items.front() else {
                        break;
                    };
                    let p = self
                        .pending
                        .get_mut(key)
                        .expect("every queued delta's key is pending");
                    if p.batch == id {
                        break;
                    }
                    p.batch = id;
                    p.count -= 1;
                    let last = p.count == 0;
                    let Some(Item::Delta { key, delta, .. }) = self.items.pop_front() else {
                        unreachable!("the front was just seen to be a delta");
                    };
                    if last {
                        self.pending.remove(&key);
                    }
                    batch.push(delta);
                }
                let n = batch.len();
                Some((Popped::Batch(batch), n))
            }
        }
    }
}
