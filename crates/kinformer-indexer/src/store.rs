//! The cache: objects by key plus named indexes, behind one reader-writer lock.

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::fmt;
use std::sync::Arc;

use kinformer_core::{
    Error as CoreError, KnownObjects, Object, ObjectKey, ReflectorStore, ResourceVersion,
};
use parking_lot::{Mutex, RwLock};

use crate::{Error, IndexFunc, IndexerRead};

/// For each value an index function produced, the keys that produced it. The value strings are
/// shared with the cached entries that carry them.
type Values = HashMap<Arc<str>, HashSet<ObjectKey>>;

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
    values: Box<[Box<[Arc<str>]>]>,
}

struct Inner<K> {
    items: HashMap<ObjectKey, Entry<K>>,
    indexes: Vec<Index<K>>,
}

struct Shared<K> {
    inner: RwLock<Inner<K>>,
    /// Serialises writers, so a writer can compute index values before it takes `inner` for the
    /// one update. Holds the index functions in the order of `Inner::indexes`.
    writer: Mutex<Vec<(String, IndexFunc<K>)>>,
}

/// The writer side of the cache, held by the pipeline (the informer, or a reflector directly).
///
/// It is deliberately not `Clone`: hand out [`IndexerReader`]s with [`reader`](Self::reader).
pub struct Indexer<K> {
    shared: Arc<Shared<K>>,
}

/// A read handle on the cache; clone it freely. Reads never block each other; they wait only
/// while a writer applies one update.
pub struct IndexerReader<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for IndexerReader<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
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
                inner: RwLock::new(Inner {
                    items: HashMap::new(),
                    indexes: Vec::new(),
                }),
                writer: Mutex::new(Vec::new()),
            }),
        }
    }
}

/// Runs one index function; its error becomes [`Error::IndexFunc`].
fn run<K>(
    name: &str,
    func: &IndexFunc<K>,
    key: &ObjectKey,
    object: &K,
) -> Result<Vec<String>, Error> {
    let mut values = func(object).map_err(|message| Error::IndexFunc {
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
) -> Result<Vec<Vec<String>>, Error> {
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
        .map(|value| match values.get_key_value(value.as_str()) {
            Some((shared, _)) => {
                let shared = Arc::clone(shared);
                if let Some(keys) = values.get_mut(&shared) {
                    keys.insert(key.clone());
                }
                shared
            }
            None => {
                let shared: Arc<str> = value.into();
                values.insert(Arc::clone(&shared), HashSet::from_iter([key.clone()]));
                shared
            }
        })
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

impl<K: Object> Indexer<K> {
    /// An empty cache with no indexes.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty cache with these indexes; a duplicate name is an error.
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

    /// Adds indexes, at any time: the objects already cached are indexed at once. A name already
    /// in use (or given twice) is [`Error::DuplicateIndex`]; an index function failing on a
    /// cached object is [`Error::IndexFunc`]. On error no index is added.
    pub fn add_indexers(
        &self,
        indexers: impl IntoIterator<Item = (String, IndexFunc<K>)>,
    ) -> Result<(), Error> {
        let mut funcs = self.shared.writer.lock();
        let new: Vec<(String, IndexFunc<K>)> = indexers.into_iter().collect();
        for (i, (name, _)) in new.iter().enumerate() {
            if funcs.iter().any(|(n, _)| n == name) || new[..i].iter().any(|(n, _)| n == name) {
                return Err(Error::DuplicateIndex { name: name.clone() });
            }
        }
        if new.is_empty() {
            return Ok(());
        }
        // Compute every value without holding the lock: no other writer runs meanwhile.
        let items: Vec<(ObjectKey, Arc<K>)> = self
            .shared
            .inner
            .read()
            .items
            .iter()
            .map(|(k, e)| (k.clone(), Arc::clone(&e.object)))
            .collect();
        let mut computed: Vec<(ObjectKey, Vec<Vec<String>>)> = Vec::with_capacity(items.len());
        for (key, object) in items {
            let values = compute(&new, &key, &object)?;
            computed.push((key, values));
        }
        let mut inner = self.shared.inner.write();
        let first = inner.indexes.len();
        inner.indexes.extend(new.iter().map(|(name, func)| Index {
            name: name.clone(),
            func: Arc::clone(func),
            values: HashMap::new(),
        }));
        let Inner { items, indexes } = &mut *inner;
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
        drop(inner);
        funcs.extend(new);
        Ok(())
    }

    /// Adds or updates `object` (client-go's `Add` and `Update` are the same). If an index
    /// function fails on it, it is not stored and the cache is unchanged.
    pub fn add(&self, object: Arc<K>) -> Result<(), Error> {
        let key = object.key();
        let funcs = self.shared.writer.lock();
        let new = compute(&funcs, &key, &object)?;
        let replaced = {
            let mut inner = self.shared.inner.write();
            let Inner { items, indexes } = &mut *inner;
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
        };
        drop(funcs);
        // The replaced object is freed outside the lock.
        drop(replaced);
        Ok(())
    }

    /// Same as [`add`](Self::add).
    pub fn update(&self, object: Arc<K>) -> Result<(), Error> {
        self.add(object)
    }

    /// Removes the object stored under `object`'s key (whatever its state); a key not cached is
    /// a no-op. Returns the removed object.
    pub fn delete(&self, object: &K) -> Option<Arc<K>> {
        self.delete_key(object.key().as_str())
    }

    /// Removes the object stored under `key`; returns it, or `None` if nothing was cached there.
    pub fn delete_key(&self, key: &str) -> Option<Arc<K>> {
        let funcs = self.shared.writer.lock();
        let removed = {
            let mut inner = self.shared.inner.write();
            let Inner { items, indexes } = &mut *inner;
            let (key, entry) = items.remove_entry(key)?;
            for (index, values) in indexes.iter_mut().zip(&entry.values) {
                for value in values {
                    remove_from(&mut index.values, value, &key);
                }
            }
            entry
        };
        drop(funcs);
        Some(removed.object)
    }

    /// Makes the cache hold exactly `objects`, rebuilding every index. The new contents are built
    /// without holding the lock and swapped in at once. An object an index function fails on is
    /// left out, and the first such failure is returned after the swap. A key listed twice keeps
    /// the later object.
    pub fn replace(&self, objects: Vec<Arc<K>>) -> Result<(), Error> {
        let funcs = self.shared.writer.lock();
        let mut items: HashMap<ObjectKey, Entry<K>> = HashMap::with_capacity(objects.len());
        let mut indexes: Vec<Index<K>> = funcs
            .iter()
            .map(|(name, func)| Index {
                name: name.clone(),
                func: Arc::clone(func),
                values: HashMap::new(),
            })
            .collect();
        let mut first_error = None;
        for object in objects {
            let key = object.key();
            let new = match compute(&funcs, &key, &object) {
                Ok(new) => new,
                Err(e) => {
                    tracing::warn!(error = %e, "object left out of the cache");
                    first_error.get_or_insert(e);
                    continue;
                }
            };
            let old = items.remove(&key);
            let values = indexes
                .iter_mut()
                .zip(new)
                .enumerate()
                .map(|(i, (index, new))| {
                    let old = old.as_ref().map_or(&[][..], |e| &e.values[i][..]);
                    reindex(&mut index.values, &key, old, new)
                })
                .collect();
            items.insert(key, Entry { object, values });
        }
        let previous = {
            let mut inner = self.shared.inner.write();
            std::mem::replace(&mut *inner, Inner { items, indexes })
        };
        drop(funcs);
        drop(previous);
        first_error.map_or(Ok(()), Err)
    }
}

fn index_func_error(e: Error) -> CoreError {
    match e {
        Error::IndexFunc {
            index,
            key,
            message,
        } => CoreError::IndexFunc {
            index,
            key,
            message,
        },
        other => CoreError::IndexFunc {
            index: String::new(),
            key: String::new(),
            message: other.to_string(),
        },
    }
}

impl<K: Object> ReflectorStore<K> for Indexer<K> {
    fn add(&self, object: Arc<K>) -> Result<(), CoreError> {
        Indexer::add(self, object).map_err(index_func_error)
    }

    fn update(&self, object: Arc<K>) -> Result<(), CoreError> {
        Indexer::add(self, object).map_err(index_func_error)
    }

    fn delete(&self, object: Arc<K>) -> Result<(), CoreError> {
        Indexer::delete(self, &object);
        Ok(())
    }

    fn replace(
        &self,
        objects: Vec<Arc<K>>,
        _resource_version: ResourceVersion,
    ) -> Result<(), CoreError> {
        Indexer::replace(self, objects).map_err(index_func_error)
    }
}

impl<K: Object> KnownObjects<K> for Indexer<K> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.reader().list_keys()
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.shared.get_by_key(key)
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
}

impl<K: Object> IndexerReader<K> {
    /// The object cached under `key` (`namespace/name` or `name`).
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.shared.get_by_key(key)
    }

    /// The cached state of `object` (looked up by its key).
    pub fn get(&self, object: &K) -> Option<Arc<K>> {
        self.get_by_key(object.key().as_str())
    }

    /// Every cached object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.shared
            .inner
            .read()
            .items
            .values()
            .map(|e| Arc::clone(&e.object))
            .collect()
    }

    /// Every cached key, sorted.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        let mut keys: Vec<ObjectKey> = self.shared.inner.read().items.keys().cloned().collect();
        keys.sort_unstable();
        keys
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.shared.inner.read().items.len()
    }

    /// `true` when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The names of the indexes, in the order they were added.
    pub fn index_names(&self) -> Vec<String> {
        self.shared
            .inner
            .read()
            .indexes
            .iter()
            .map(|i| i.name.clone())
            .collect()
    }

    /// The cached objects that share any value of index `name` with `object` (client-go's
    /// `Index`), in no particular order. Errors: unknown index, or the index function failing on
    /// `object`.
    pub fn index(&self, name: &str, object: &K) -> Result<Vec<Arc<K>>, Error> {
        // Run the caller's function outside the lock.
        let func = {
            let inner = self.shared.inner.read();
            Arc::clone(&find(&inner, name)?.func)
        };
        let values = func(object).map_err(|message| Error::IndexFunc {
            index: name.to_owned(),
            key: object.key().to_string(),
            message,
        })?;
        let inner = self.shared.inner.read();
        let index = find(&inner, name)?;
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

    /// The cached objects whose index `name` produced `value`, in no particular order.
    pub fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<K>>, Error> {
        let inner = self.shared.inner.read();
        let index = find(&inner, name)?;
        Ok(index
            .values
            .get(value)
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| inner.items.get(k).map(|e| &e.object))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The keys whose index `name` produced `value`, sorted.
    pub fn index_keys(&self, name: &str, value: &str) -> Result<Vec<ObjectKey>, Error> {
        let inner = self.shared.inner.read();
        let index = find(&inner, name)?;
        let mut keys: Vec<ObjectKey> = index
            .values
            .get(value)
            .map(|k| k.iter().cloned().collect())
            .unwrap_or_default();
        drop(inner);
        keys.sort_unstable();
        Ok(keys)
    }

    /// Every value index `name` currently holds (values with no object are removed), sorted.
    pub fn list_index_func_values(&self, name: &str) -> Result<Vec<String>, Error> {
        let inner = self.shared.inner.read();
        let mut values: Vec<String> = find(&inner, name)?
            .values
            .keys()
            .map(|v| v.to_string())
            .collect();
        drop(inner);
        values.sort_unstable();
        Ok(values)
    }
}

fn find<'a, K>(inner: &'a Inner<K>, name: &str) -> Result<&'a Index<K>, Error> {
    inner
        .indexes
        .iter()
        .find(|i| i.name == name)
        .ok_or_else(|| Error::UnknownIndex {
            name: name.to_owned(),
        })
}

impl<K: Object> KnownObjects<K> for IndexerReader<K> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        IndexerReader::list_keys(self)
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        IndexerReader::get_by_key(self, key)
    }
}

impl<K: Object> IndexerRead<K> for IndexerReader<K> {
    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        IndexerReader::get_by_key(self, key)
    }

    fn for_each(&self, f: &mut dyn FnMut(&Arc<K>)) {
        self.shared
            .inner
            .read()
            .items
            .values()
            .for_each(|e| f(&e.object));
    }

    fn for_each_indexed(
        &self,
        index: &str,
        value: &str,
        f: &mut dyn FnMut(&Arc<K>),
    ) -> Result<(), Error> {
        let inner = self.shared.inner.read();
        if let Some(keys) = find(&inner, index)?.values.get(value) {
            keys.iter()
                .filter_map(|k| inner.items.get(k).map(|e| &e.object))
                .for_each(f);
        }
        Ok(())
    }

    fn has_index(&self, index: &str) -> bool {
        find(&self.shared.inner.read(), index).is_ok()
    }
}
