//! The cache: objects by key plus named indexes, behind one reader-writer lock, and a staged
//! relist beside it.

use derive_where::derive_where;
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::fmt;
use std::sync::Arc;

use kinformer_core::{
    CacheOp, CacheRead, CacheWrite, IndexRead, Object, ObjectKey, ReflectorStore, Replaced,
    ResourceVersion, StoreError, StoreEvent,
};
use parking_lot::{Mutex, RwLock};

use crate::{Error, IndexFunc};

/// For each value an index function produced, the keys that produced it. The value strings are
/// shared with the cached entries that carry them.
type Values = HashMap<Arc<str>, HashSet<ObjectKey>>;

/// The values of every index for one entry, in index order.
type EntryValues = Box<[Box<[Arc<str>]>]>;

/// Index values computed for keys (per key, one list per index), not yet applied.
type ComputedValues = Vec<(ObjectKey, Vec<Vec<String>>)>;

/// One named index.
struct Index<K> {
    name: String,
    func: IndexFunc<K>,
    values: Values,
}

/// A cached object with the values each index function gave it (in index order), so that an
/// update or delete never has to run the functions on the old object again.
struct Entry<K> {
    object: Arc<K>,
    values: EntryValues,
}

/// The contents of a cache: the live one, or a relist being built beside it.
struct Inner<K> {
    items: HashMap<ObjectKey, Entry<K>>,
    indexes: Vec<Index<K>>,
}

/// A relist being built: new contents beside the live ones, swapped in at its end.
struct Stage<K> {
    inner: Inner<K>,
    /// The first object an index function refused (it was left out).
    first_error: Option<StoreError>,
}

/// What only the writer touches, behind the writer mutex.
struct Writer<K> {
    /// The index functions, in the order of `Inner::indexes`.
    funcs: Vec<(String, IndexFunc<K>)>,
    /// The relist begun and not yet ended or abandoned.
    stage: Option<Stage<K>>,
}

struct Shared<K> {
    inner: RwLock<Inner<K>>,
    /// Serialises writers, so a writer can compute index values before it takes `inner` for the
    /// one update.
    writer: Mutex<Writer<K>>,
}

/// The writer side of the cache, held by the pipeline (the informer, or a reflector directly).
///
/// It writes through [`CacheWrite`] (every write returns what it replaced) and
/// [`ReflectorStore`] (with a native relist protocol), and reads through [`CacheRead`] and
/// [`IndexRead`]. It is deliberately not `Clone`: hand out [`IndexerReader`]s with
/// [`reader`](Self::reader).
pub struct Indexer<K> {
    shared: Arc<Shared<K>>,
}

/// A read handle on the cache; clone it freely. Reads never block each other; they wait only
/// while a writer applies one update (or swaps a relist in). Its reads by key, the list and
/// [`by_index`](IndexRead::by_index) are those of [`CacheRead`] and [`IndexRead`] (import the
/// traits); its inherent methods are the reads the traits lack (the count, a lookup by object,
/// sorted index keys, client-go's `Index` and `ListIndexFuncValues`).
#[derive_where(Clone)]
pub struct IndexerReader<K> {
    shared: Arc<Shared<K>>,
}

impl<K> fmt::Debug for Indexer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug(&self.shared, "Indexer", f)
    }
}

impl<K> fmt::Debug for IndexerReader<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug(&self.shared, "IndexerReader", f)
    }
}

fn debug<K>(shared: &Shared<K>, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let inner = shared.inner.read();
    let names: Vec<&str> = inner.indexes.iter().map(|i| i.name.as_str()).collect();
    f.debug_struct(name)
        .field("len", &inner.items.len())
        .field("indexes", &names)
        .finish()
}

impl<K> Default for Indexer<K> {
    fn default() -> Self {
        Self {
            shared: Arc::new(Shared {
                inner: RwLock::new(Inner::empty(&[])),
                writer: Mutex::new(Writer {
                    funcs: Vec::new(),
                    stage: None,
                }),
            }),
        }
    }
}

/// An index function refused an object: becomes [`StoreError::IndexFunc`] on a write and
/// [`Error::IndexFunc`] on `add_indexers`, field for field.
struct Refusal {
    index: String,
    key: String,
    message: String,
}

impl Refusal {
    fn into_store(self) -> StoreError {
        StoreError::IndexFunc {
            index: self.index,
            key: self.key,
            message: self.message,
        }
    }

    fn into_config(self) -> Error {
        Error::IndexFunc {
            index: self.index,
            key: self.key,
            message: self.message,
        }
    }
}

/// Runs one index function; its values come back sorted and without duplicates.
fn run<K>(
    name: &str,
    func: &IndexFunc<K>,
    key: &ObjectKey,
    object: &K,
) -> Result<Vec<String>, Refusal> {
    let mut values = func(object).map_err(|message| Refusal {
        index: name.to_owned(),
        key: key.to_string(),
        message,
    })?;
    if values.len() > 1 {
        values.sort_unstable();
        values.dedup();
    }
    Ok(values)
}

/// The values of every index function for one object, in index order.
fn compute<K>(
    funcs: &[(String, IndexFunc<K>)],
    key: &ObjectKey,
    object: &K,
) -> Result<Vec<Vec<String>>, Refusal> {
    funcs
        .iter()
        .map(|(name, func)| run(name, func, key, object))
        .collect()
}

/// Moves `key` in one index from its `old` values to its `new` ones; returns the values to
/// store with the entry (shared with the index's own).
fn reindex(
    values: &mut Values,
    key: &ObjectKey,
    old: &[Arc<str>],
    new: Vec<String>,
) -> Box<[Arc<str>]> {
    if old.len() == new.len() && old.iter().zip(&new).all(|(o, n)| **o == **n) {
        return old.into();
    }
    for value in old.iter().filter(|v| !new.iter().any(|n| **n == ***v)) {
        remove_from(values, value, key);
    }
    new.into_iter()
        .map(|value| file_under(values, key, &value, || value.as_str().into()))
        .collect()
}

/// Files `key` under `value` and returns the value string the index keeps: the index's own when
/// it has one, else `make()` (which becomes the index's).
fn file_under(
    values: &mut Values,
    key: &ObjectKey,
    value: &str,
    make: impl FnOnce() -> Arc<str>,
) -> Arc<str> {
    if let Some((shared, _)) = values.get_key_value(value) {
        let shared = Arc::clone(shared);
        if let Some(keys) = values.get_mut(&shared) {
            keys.insert(key.clone());
        }
        return shared;
    }
    let shared = make();
    values.insert(Arc::clone(&shared), HashSet::from_iter([key.clone()]));
    shared
}

/// Files `key` under values computed already (another cache's entry): no index function runs.
/// The value strings are shared with this index's own when it has them, and with `computed`
/// otherwise.
fn index_computed(values: &mut Values, key: &ObjectKey, computed: &[Arc<str>]) -> Box<[Arc<str>]> {
    computed
        .iter()
        .map(|value| file_under(values, key, value, || Arc::clone(value)))
        .collect()
}

fn remove_from(values: &mut Values, value: &str, key: &ObjectKey) {
    if let Some(keys) = values.get_mut(value) {
        keys.remove(key);
        if keys.is_empty() {
            values.remove(value);
        }
    }
}

/// Where the values of a staged entry come from.
enum Computed<'a> {
    /// Run just now.
    Fresh(Vec<Vec<String>>),
    /// Taken from the live entry the object is.
    Live(&'a EntryValues),
}

impl<K> Inner<K> {
    /// Empty contents with these indexes.
    fn empty(funcs: &[(String, IndexFunc<K>)]) -> Self {
        Self {
            items: HashMap::new(),
            indexes: funcs
                .iter()
                .map(|(name, func)| Index {
                    name: name.clone(),
                    func: Arc::clone(func),
                    values: HashMap::new(),
                })
                .collect(),
        }
    }

    /// Stores `object` under `key` with its computed values, keeping every index incremental;
    /// returns the object it replaced.
    fn upsert(&mut self, key: ObjectKey, object: Arc<K>, new: Vec<Vec<String>>) -> Option<Arc<K>> {
        let Self { items, indexes } = self;
        match items.get_mut(&key) {
            Some(entry) => {
                let values = indexes
                    .iter_mut()
                    .zip(new)
                    .enumerate()
                    .map(|(i, (index, new))| {
                        reindex(&mut index.values, &key, &entry.values[i], new)
                    })
                    .collect();
                entry.values = values;
                Some(std::mem::replace(&mut entry.object, object))
            }
            None => {
                let values = indexes
                    .iter_mut()
                    .zip(new)
                    .map(|(index, new)| reindex(&mut index.values, &key, &[], new))
                    .collect();
                items.insert(key, Entry { object, values });
                None
            }
        }
    }

    /// Stores `object` under `key` with values computed already (`Computed::Live`) or just now,
    /// replacing whatever was under `key` wholesale; returns the object it replaced.
    fn put(&mut self, key: ObjectKey, object: Arc<K>, computed: Computed<'_>) -> Option<Arc<K>> {
        let previous = self.remove(key.as_str());
        let values = match computed {
            Computed::Fresh(new) => self
                .indexes
                .iter_mut()
                .zip(new)
                .map(|(index, new)| reindex(&mut index.values, &key, &[], new))
                .collect(),
            Computed::Live(live) => self
                .indexes
                .iter_mut()
                .zip(live.iter())
                .map(|(index, live)| index_computed(&mut index.values, &key, live))
                .collect(),
        };
        self.items.insert(key, Entry { object, values });
        previous
    }

    /// Removes what is stored under `key` and its index values; returns it.
    fn remove(&mut self, key: &str) -> Option<Arc<K>> {
        let Self { items, indexes } = self;
        let (key, entry) = items.remove_entry(key)?;
        for (index, values) in indexes.iter_mut().zip(&entry.values) {
            for value in values {
                remove_from(&mut index.values, value, &key);
            }
        }
        Some(entry.object)
    }

    /// Adds indexes with the values computed for each key (in index order).
    fn extend_indexes(&mut self, new: &[(String, IndexFunc<K>)], computed: ComputedValues) {
        let first = self.indexes.len();
        self.indexes.extend(new.iter().map(|(name, func)| Index {
            name: name.clone(),
            func: Arc::clone(func),
            values: HashMap::new(),
        }));
        let Self { items, indexes } = self;
        for (key, values) in computed {
            let Some(entry) = items.get_mut(&key) else {
                continue;
            };
            let mut all: Vec<Box<[Arc<str>]>> = std::mem::take(&mut entry.values).into_vec();
            for (index, vals) in indexes[first..].iter_mut().zip(values) {
                all.push(reindex(&mut index.values, &key, &[], vals));
            }
            entry.values = all.into_boxed_slice();
        }
    }

    fn objects(&self) -> Vec<(ObjectKey, Arc<K>)> {
        self.items
            .iter()
            .map(|(k, e)| (k.clone(), Arc::clone(&e.object)))
            .collect()
    }

    fn find(&self, name: &str) -> Result<&Index<K>, StoreError> {
        self.indexes
            .iter()
            .find(|i| i.name == name)
            .ok_or_else(|| StoreError::UnknownIndex {
                name: name.to_owned(),
            })
    }
}

/// Index values for `objects` under `new` functions; the first refusal stops it.
fn compute_all<K>(
    new: &[(String, IndexFunc<K>)],
    objects: Vec<(ObjectKey, Arc<K>)>,
) -> Result<ComputedValues, Refusal> {
    objects
        .into_iter()
        .map(|(key, object)| compute(new, &key, &object).map(|values| (key, values)))
        .collect()
}

/// Whether two states of an object are the same version: both have a resourceVersion and they
/// are equal.
fn same_version<K: Object>(held: &K, listed: &K) -> bool {
    matches!(
        (held.resource_version(), listed.resource_version()),
        (Some(a), Some(b)) if a == b
    )
}

impl<K: Object> Indexer<K> {
    /// An empty cache with no indexes.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty cache with these indexes; a duplicate name is [`Error::DuplicateIndex`].
    pub fn with_indexers(
        indexers: impl IntoIterator<Item = (String, IndexFunc<K>)>,
    ) -> Result<Self, Error> {
        let indexer = Self::new();
        indexer.add_indexers(indexers)?;
        Ok(indexer)
    }

    /// A read handle on this cache.
    pub fn reader(&self) -> IndexerReader<K> {
        IndexerReader {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Adds indexes, at any time: the objects already cached (and those of a relist being
    /// built) are indexed at once. A name already in use (or given twice) is
    /// [`Error::DuplicateIndex`]; an index function failing on a cached object is
    /// [`Error::IndexFunc`]. On error no index is added.
    pub fn add_indexers(
        &self,
        indexers: impl IntoIterator<Item = (String, IndexFunc<K>)>,
    ) -> Result<(), Error> {
        let mut writer = self.shared.writer.lock();
        let new: Vec<(String, IndexFunc<K>)> = indexers.into_iter().collect();
        for (i, (name, _)) in new.iter().enumerate() {
            if writer.funcs.iter().any(|(n, _)| n == name)
                || new[..i].iter().any(|(n, _)| n == name)
            {
                return Err(Error::DuplicateIndex { name: name.clone() });
            }
        }
        if new.is_empty() {
            return Ok(());
        }
        // Compute every value without holding the lock: no other writer runs meanwhile.
        let live = self.shared.inner.read().objects();
        let live = compute_all(&new, live).map_err(Refusal::into_config)?;
        let staged = match &writer.stage {
            Some(stage) => {
                Some(compute_all(&new, stage.inner.objects()).map_err(Refusal::into_config)?)
            }
            None => None,
        };
        self.shared.inner.write().extend_indexes(&new, live);
        if let (Some(stage), Some(staged)) = (writer.stage.as_mut(), staged) {
            stage.inner.extend_indexes(&new, staged);
        }
        writer.funcs.extend(new);
        Ok(())
    }
}

/// Both handles read the cache the same way, through the shared state.
macro_rules! reads_through_shared {
    ($($handle:ident),*) => {$(
        impl<K: Object> CacheRead<K> for $handle<K> {
            fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
                self.shared.get_by_key(key)
            }

            /// Sorted.
            fn list_keys(&self) -> Vec<ObjectKey> {
                self.shared.list_keys()
            }

            fn for_each(&self, f: &mut dyn FnMut(&Arc<K>)) {
                self.shared.for_each(f)
            }

            fn list(&self) -> Vec<Arc<K>> {
                self.shared.list()
            }
        }

        impl<K: Object> IndexRead<K> for $handle<K> {
            fn for_each_indexed(
                &self,
                index: &str,
                value: &str,
                f: &mut dyn FnMut(&Arc<K>),
            ) -> Result<(), StoreError> {
                self.shared.for_each_indexed(index, value, f)
            }

            /// In the order they were added.
            fn index_names(&self) -> Vec<String> {
                self.shared.index_names()
            }
        }
    )*};
}

reads_through_shared!(Indexer, IndexerReader);

/// The cache's writes. Each computes the index values before it takes the lock, and holds the
/// lock only to apply them; an entry keeps its values, so an update never runs an index
/// function on the object it replaces.
impl<K: Object> CacheWrite<K> for Indexer<K> {
    /// Adds or updates `object` (client-go's `Add` and `Update` are the same); returns what was
    /// stored under its key. If an index function refuses it, it is not stored, the cache is
    /// unchanged and the refusal is [`StoreError::IndexFunc`].
    fn upsert(&self, object: Arc<K>) -> Result<Option<Arc<K>>, StoreError> {
        let key = object.key();
        let writer = self.shared.writer.lock();
        let new = compute(&writer.funcs, &key, &object).map_err(Refusal::into_store)?;
        let previous = self.shared.inner.write().upsert(key, object, new);
        drop(writer);
        Ok(previous)
    }

    /// Removes the object stored under `key`; returns it, or `None` if nothing was there.
    fn remove(&self, key: &str) -> Option<Arc<K>> {
        let writer = self.shared.writer.lock();
        let removed = self.shared.inner.write().remove(key);
        drop(writer);
        removed
    }

    /// Applies `ops` in order under one write lock: readers see all of them or none. The index
    /// values of every upsert are computed first, without the lock; an upsert an index function
    /// refuses is skipped (its outcome is the refusal) and the others apply.
    fn apply_batch(&self, ops: Vec<CacheOp<K>>) -> Vec<Result<Option<Arc<K>>, StoreError>> {
        enum Ready<K> {
            Upsert(ObjectKey, Arc<K>, Vec<Vec<String>>),
            Remove(ObjectKey),
            Refused(StoreError),
        }
        let writer = self.shared.writer.lock();
        let ready: Vec<Ready<K>> = ops
            .into_iter()
            .map(|op| match op {
                CacheOp::Upsert(object) => {
                    let key = object.key();
                    match compute(&writer.funcs, &key, &object) {
                        Ok(new) => Ready::Upsert(key, object, new),
                        Err(refusal) => Ready::Refused(refusal.into_store()),
                    }
                }
                CacheOp::Remove(key) => Ready::Remove(key),
            })
            .collect();
        let mut inner = self.shared.inner.write();
        let outcomes = ready
            .into_iter()
            .map(|op| match op {
                Ready::Upsert(key, object, new) => Ok(inner.upsert(key, object, new)),
                Ready::Remove(key) => Ok(inner.remove(key.as_str())),
                Ready::Refused(e) => Err(e),
            })
            .collect();
        drop(inner);
        drop(writer);
        outcomes
    }

    /// Makes the cache hold exactly `objects`, rebuilding every index: the new contents are
    /// built without holding the lock and swapped in at once. Each outcome is what the object
    /// replaced (the held object, or an earlier listing of the same key), or the refusal of an
    /// index function (the object is left out; if its key was held, the held object is in
    /// `removed`). `removed` is in key order.
    fn replace_all(&self, objects: Vec<Arc<K>>) -> Replaced<K> {
        let writer = self.shared.writer.lock();
        let mut next = Inner::empty(&writer.funcs);
        let mut outcomes = Vec::with_capacity(objects.len());
        {
            let live = self.shared.inner.read();
            for object in objects {
                let key = object.key();
                match compute(&writer.funcs, &key, &object) {
                    Ok(new) => {
                        let previous = next
                            .put(key.clone(), object, Computed::Fresh(new))
                            .or_else(|| live.items.get(&key).map(|e| Arc::clone(&e.object)));
                        outcomes.push(Ok(previous));
                    }
                    Err(refusal) => {
                        let e = refusal.into_store();
                        tracing::warn!(error = %e, "object left out of the cache");
                        outcomes.push(Err(e));
                    }
                }
            }
        }
        let old = std::mem::replace(&mut *self.shared.inner.write(), next);
        // Still the only writer: the live contents are the ones just swapped in.
        let live = self.shared.inner.read();
        let mut removed: Vec<(ObjectKey, Arc<K>)> = old
            .items
            .into_iter()
            .filter(|(key, _)| !live.items.contains_key(key))
            .map(|(key, entry)| (key, entry.object))
            .collect();
        drop(live);
        drop(writer);
        removed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Replaced {
            outcomes,
            removed: removed.into_iter().map(|(_, o)| o).collect(),
        }
    }
}

/// A reflector can fill the indexer directly. Watch events are upserts and removes (a delete
/// removes whatever is stored under the object's key, whatever its state; a key not cached is a
/// no-op); the relist protocol is native: [`RelistBegin`](StoreEvent::RelistBegin) starts a
/// staged build (new contents and indexes) beside the live cache, each page adds to it, and
/// [`RelistEnd`](StoreEvent::RelistEnd) swaps it in at once. A listed object whose
/// resourceVersion equals the held one's keeps the held `Arc` and its index values (no index
/// function runs, and the fresh copy is dropped at once), so relisting an unchanged state holds
/// one copy of the objects plus one page. Watch events between the begin and the end apply to the
/// live cache; the end then replaces them with the list. Bookmarks and resyncs change nothing.
impl<K: Object> ReflectorStore<K> for Indexer<K> {
    fn apply(&self, event: StoreEvent<K>) -> Result<(), StoreError> {
        match event {
            StoreEvent::Added(object) | StoreEvent::Modified(object) => {
                self.upsert(object).map(drop)
            }
            StoreEvent::Deleted(object) => {
                self.remove(object.key().as_str());
                Ok(())
            }
            StoreEvent::RelistBegin => {
                self.begin_stage();
                Ok(())
            }
            StoreEvent::RelistPage(objects) => {
                self.stage_page(objects);
                Ok(())
            }
            StoreEvent::RelistEnd(resource_version) => self.swap_stage(&resource_version),
            StoreEvent::RelistAbandoned => {
                let dropped = self.shared.writer.lock().stage.take();
                drop(dropped);
                Ok(())
            }
            StoreEvent::Bookmark(_) | StoreEvent::Resync => Ok(()),
        }
    }
}

impl<K: Object> Indexer<K> {
    /// Starts a staged relist; one begun earlier and not ended is dropped.
    fn begin_stage(&self) {
        let mut writer = self.shared.writer.lock();
        let stage = Stage {
            inner: Inner::empty(&writer.funcs),
            first_error: None,
        };
        let dropped = writer.stage.replace(stage);
        drop(writer);
        drop(dropped);
    }

    /// Adds a page to the relist being built (one begins if none has). A key listed twice
    /// keeps the later object. An object an index function refuses is left out (an earlier
    /// listing of its key stays); the first refusal is returned when the relist ends.
    fn stage_page(&self, objects: Vec<Arc<K>>) {
        let mut guard = self.shared.writer.lock();
        let writer = &mut *guard;
        let stage = writer.stage.get_or_insert_with(|| Stage {
            inner: Inner::empty(&writer.funcs),
            first_error: None,
        });
        // Only this writer changes the live cache, and it holds the writer mutex: the read
        // lock blocks no one but a writer, and none can wait for it.
        let live = self.shared.inner.read();
        for object in objects {
            let key = object.key();
            match live.items.get(&key) {
                Some(held) if same_version(&*held.object, &*object) => {
                    drop(object);
                    let held_object = Arc::clone(&held.object);
                    stage
                        .inner
                        .put(key, held_object, Computed::Live(&held.values));
                }
                _ => match compute(&writer.funcs, &key, &object) {
                    Ok(new) => {
                        stage.inner.put(key, object, Computed::Fresh(new));
                    }
                    Err(refusal) => {
                        let e = refusal.into_store();
                        tracing::warn!(error = %e, "object left out of the relist");
                        stage.first_error.get_or_insert(e);
                    }
                },
            }
        }
    }

    /// Swaps the relist in at once (without one begun, the list is empty); then returns the
    /// first refusal of an index function, if any.
    fn swap_stage(&self, resource_version: &ResourceVersion) -> Result<(), StoreError> {
        let mut writer = self.shared.writer.lock();
        let stage = writer.stage.take().unwrap_or_else(|| Stage {
            inner: Inner::empty(&writer.funcs),
            first_error: None,
        });
        let old = std::mem::replace(&mut *self.shared.inner.write(), stage.inner);
        drop(writer);
        tracing::debug!(%resource_version, "relist swapped in");
        // The replaced contents are freed outside both locks.
        drop(old);
        stage.first_error.map_or(Ok(()), Err)
    }
}

impl<K> Shared<K> {
    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.inner
            .read()
            .items
            .get(key)
            .map(|e| Arc::clone(&e.object))
    }

    fn list_keys(&self) -> Vec<ObjectKey> {
        let mut keys: Vec<ObjectKey> = self.inner.read().items.keys().cloned().collect();
        keys.sort_unstable();
        keys
    }

    fn for_each(&self, f: &mut dyn FnMut(&Arc<K>)) {
        self.inner.read().items.values().for_each(|e| f(&e.object));
    }

    fn list(&self) -> Vec<Arc<K>> {
        self.inner
            .read()
            .items
            .values()
            .map(|e| Arc::clone(&e.object))
            .collect()
    }

    fn for_each_indexed(
        &self,
        index: &str,
        value: &str,
        f: &mut dyn FnMut(&Arc<K>),
    ) -> Result<(), StoreError> {
        let inner = self.inner.read();
        if let Some(keys) = inner.find(index)?.values.get(value) {
            keys.iter()
                .filter_map(|k| inner.items.get(k).map(|e| &e.object))
                .for_each(f);
        }
        Ok(())
    }

    fn index_names(&self) -> Vec<String> {
        self.inner
            .read()
            .indexes
            .iter()
            .map(|i| i.name.clone())
            .collect()
    }
}

impl<K: Object> IndexerReader<K> {
    /// The cached state of `object` (looked up by its key).
    pub fn get(&self, object: &K) -> Option<Arc<K>> {
        self.get_by_key(object.key().as_str())
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.shared.inner.read().items.len()
    }

    /// `true` when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cached objects that share any value of index `name` with `object` (client-go's
    /// `Index`), in no particular order. Errors: [`StoreError::UnknownIndex`], or
    /// [`StoreError::IndexFunc`] when the index function fails on `object`.
    pub fn index(&self, name: &str, object: &K) -> Result<Vec<Arc<K>>, StoreError> {
        // Run the caller's function outside the lock.
        let func = Arc::clone(&self.shared.inner.read().find(name)?.func);
        let values = run(name, &func, &object.key(), object).map_err(Refusal::into_store)?;
        let inner = self.shared.inner.read();
        let index = inner.find(name)?;
        let mut keys: HashSet<&ObjectKey> = HashSet::new();
        for value in &values {
            if let Some(set) = index.values.get(value.as_str()) {
                keys.extend(set);
            }
        }
        Ok(keys
            .into_iter()
            .filter_map(|k| inner.items.get(k).map(|e| &e.object))
            .cloned()
            .collect())
    }

    /// The keys whose index `name` produced `value`, sorted; an unknown index is
    /// [`StoreError::UnknownIndex`].
    pub fn index_keys(&self, name: &str, value: &str) -> Result<Vec<ObjectKey>, StoreError> {
        let inner = self.shared.inner.read();
        let mut keys: Vec<ObjectKey> = inner
            .find(name)?
            .values
            .get(value)
            .map(|k| k.iter().cloned().collect())
            .unwrap_or_default();
        drop(inner);
        keys.sort_unstable();
        Ok(keys)
    }

    /// Every value index `name` currently holds (values with no object are removed), sorted;
    /// an unknown index is [`StoreError::UnknownIndex`] (client-go returns an empty list).
    pub fn list_index_func_values(&self, name: &str) -> Result<Vec<String>, StoreError> {
        let inner = self.shared.inner.read();
        let mut values: Vec<String> = inner
            .find(name)?
            .values
            .keys()
            .map(|v| v.to_string())
            .collect();
        drop(inner);
        values.sort_unstable();
        Ok(values)
    }
}
