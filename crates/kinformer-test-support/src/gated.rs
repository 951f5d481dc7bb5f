//! [`GatedCache`], a cache whose writes a test can hold: to make a cache that falls behind, or
//! to stop the writer inside one write and act while it waits there.

use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use kinformer_core::{CacheOp, CacheRead, CacheWrite, IndexRead, ObjectKey, Replaced, StoreError};

/// Where a paused write stops: see [`GatedCache::pause_next_write`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pause {
    /// Before the write reaches the inner cache: it does not hold the change yet.
    Before,
    /// After the inner cache made the write: it holds the change, the writer has not returned.
    After,
}

#[derive(Default)]
struct Gate {
    closed: bool,
    armed: Option<Pause>,
    paused: bool,
    released: bool,
}

/// A cache (any [`CacheWrite`]) behind a gate the test controls. Reads, and writes while the
/// gate lets them through, go straight to the inner cache; index reads too, when it has them.
///
/// Two ways to hold writes:
/// - [`close`](Self::close) and [`open`](Self::open): while closed, every write waits before it
///   reaches the inner cache (a cache that falls behind);
/// - [`pause_next_write`](Self::pause_next_write): the next write stops, before or after it is
///   made, until [`release`](Self::release); [`wait_paused`](Self::wait_paused) waits for a
///   writer to get there (to act while the writer is inside its write).
///
/// A held write blocks its thread; on a multi-thread tokio runtime it first tells tokio so
/// (`block_in_place`), so the runtime's other tasks go on.
///
/// ```
/// use std::collections::BTreeMap;
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use kinformer_core::{CacheRead, CacheWrite, DynamicObject, ObjectKey};
/// use kinformer_test_support::{GatedCache, Pause};
///
/// let cache: Arc<GatedCache<Mutex<BTreeMap<ObjectKey, Arc<DynamicObject>>>>> =
///     Arc::new(GatedCache::new(Mutex::default()));
/// cache.pause_next_write(Pause::After);
/// let writer = std::thread::spawn({
///     let cache = Arc::clone(&cache);
///     move || cache.upsert(Arc::new(DynamicObject::default())).unwrap()
/// });
/// assert!(cache.wait_paused(Duration::from_secs(20)));
/// assert_eq!(cache.list_keys().len(), 1, "made, and the writer still waits");
/// cache.release();
/// assert!(writer.join().unwrap().is_none());
/// ```
pub struct GatedCache<C> {
    inner: C,
    gate: Mutex<Gate>,
    changed: Condvar,
}

impl<C> fmt::Debug for GatedCache<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gate = self.lock();
        f.debug_struct("GatedCache")
            .field("closed", &gate.closed)
            .field("armed", &gate.armed)
            .field("paused", &gate.paused)
            .finish_non_exhaustive()
    }
}

impl<C: Default> Default for GatedCache<C> {
    fn default() -> Self {
        Self::new(C::default())
    }
}

impl<C> GatedCache<C> {
    /// `inner` behind an open gate.
    ///
    /// ```
    /// # use std::collections::BTreeMap;
    /// # use std::sync::{Arc, Mutex};
    /// # use kinformer_core::{DynamicObject, ObjectKey};
    /// let cache = kinformer_test_support::GatedCache::new(
    ///     Mutex::<BTreeMap<ObjectKey, Arc<DynamicObject>>>::default(),
    /// );
    /// assert!(cache.inner().lock().unwrap().is_empty());
    /// ```
    pub fn new(inner: C) -> Self {
        Self {
            inner,
            gate: Mutex::new(Gate::default()),
            changed: Condvar::new(),
        }
    }

    /// The inner cache, to read or write past the gate.
    ///
    /// ```
    /// let cache = kinformer_test_support::GatedCache::new(vec![1, 2]);
    /// assert_eq!(cache.inner().len(), 2);
    /// ```
    pub fn inner(&self) -> &C {
        &self.inner
    }

    fn lock(&self) -> MutexGuard<'_, Gate> {
        self.gate.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(
        &'a self,
        gate: MutexGuard<'a, Gate>,
        until: impl Fn(&Gate) -> bool,
    ) -> MutexGuard<'a, Gate> {
        self.changed
            .wait_while(gate, |g| !until(g))
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// From now on every write waits, before it reaches the inner cache, until
    /// [`open`](Self::open).
    ///
    /// ```
    /// # use std::collections::BTreeMap;
    /// # use std::sync::{Arc, Mutex};
    /// # use kinformer_core::{CacheWrite, DynamicObject, ObjectKey};
    /// let cache: Arc<kinformer_test_support::GatedCache<Mutex<BTreeMap<ObjectKey, Arc<DynamicObject>>>>> =
    ///     Arc::default();
    /// cache.close();
    /// let writer = std::thread::spawn({
    ///     let cache = Arc::clone(&cache);
    ///     move || cache.remove("gone")
    /// });
    /// cache.open();
    /// assert!(writer.join().unwrap().is_none());
    /// ```
    pub fn close(&self) {
        self.lock().closed = true;
    }

    /// Lets every write through again, the waiting ones first.
    ///
    /// ```
    /// let cache = kinformer_test_support::GatedCache::new(());
    /// cache.close();
    /// cache.open();
    /// ```
    pub fn open(&self) {
        self.lock().closed = false;
        self.changed.notify_all();
    }

    /// The next write (of any kind) stops at `at` until [`release`](Self::release); later
    /// writes go through. Arming again before a write came replaces `at`.
    ///
    /// ```
    /// use kinformer_test_support::{GatedCache, Pause};
    /// let cache = GatedCache::new(());
    /// cache.pause_next_write(Pause::Before);
    /// ```
    pub fn pause_next_write(&self, at: Pause) {
        let mut gate = self.lock();
        gate.armed = Some(at);
        gate.paused = false;
        gate.released = false;
    }

    /// Waits, at most `timeout`, for a write to stop at the pause armed by
    /// [`pause_next_write`](Self::pause_next_write); `true` once one has.
    ///
    /// ```
    /// use std::time::Duration;
    /// let cache = kinformer_test_support::GatedCache::new(());
    /// assert!(!cache.wait_paused(Duration::from_millis(1)), "no write came");
    /// ```
    pub fn wait_paused(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut gate = self.lock();
        while !gate.paused {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            gate = self
                .changed
                .wait_timeout(gate, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    /// Lets the paused write go on (or the next one, if none has paused yet).
    ///
    /// ```
    /// let cache = kinformer_test_support::GatedCache::new(());
    /// cache.release();
    /// ```
    pub fn release(&self) {
        self.lock().released = true;
        self.changed.notify_all();
    }

    /// Holds the calling writer as the gate says, around `write`.
    fn write<R>(&self, write: impl FnOnce(&C) -> R) -> R {
        let pause = {
            let mut gate = self.lock();
            if gate.closed {
                gate = block(|| self.wait(gate, |g| !g.closed));
            }
            gate.armed.take()
        };
        if pause == Some(Pause::Before) {
            self.pause();
        }
        let out = write(&self.inner);
        if pause == Some(Pause::After) {
            self.pause();
        }
        out
    }

    fn pause(&self) {
        let mut gate = self.lock();
        gate.paused = true;
        self.changed.notify_all();
        drop(block(|| self.wait(gate, |g| g.released)));
    }
}

/// Blocks the calling thread in `f`, telling a multi-thread tokio runtime first when called on
/// one of its workers, so that its other tasks go on meanwhile.
fn block<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

impl<K, C: CacheRead<K>> CacheRead<K> for GatedCache<C> {
    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.inner.get_by_key(key)
    }
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.inner.list_keys()
    }
    fn for_each(&self, f: &mut dyn FnMut(&Arc<K>)) {
        self.inner.for_each(f);
    }
    fn list(&self) -> Vec<Arc<K>> {
        self.inner.list()
    }
}

impl<K, C: IndexRead<K>> IndexRead<K> for GatedCache<C> {
    fn for_each_indexed(
        &self,
        index: &str,
        value: &str,
        f: &mut dyn FnMut(&Arc<K>),
    ) -> Result<(), StoreError> {
        self.inner.for_each_indexed(index, value, f)
    }
    fn index_names(&self) -> Vec<String> {
        self.inner.index_names()
    }
    fn has_index(&self, index: &str) -> bool {
        self.inner.has_index(index)
    }
    fn namespace_index(&self) -> Option<&'static str> {
        self.inner.namespace_index()
    }
}

impl<K, C: CacheWrite<K>> CacheWrite<K> for GatedCache<C> {
    fn upsert(&self, object: Arc<K>) -> Result<Option<Arc<K>>, StoreError> {
        self.write(|c| c.upsert(object))
    }
    fn remove(&self, key: &str) -> Option<Arc<K>> {
        self.write(|c| c.remove(key))
    }
    fn apply_batch(&self, ops: Vec<CacheOp<K>>) -> Vec<Result<Option<Arc<K>>, StoreError>> {
        self.write(|c| c.apply_batch(ops))
    }
    fn replace_all(&self, objects: Vec<Arc<K>>) -> Replaced<K> {
        self.write(|c| c.replace_all(objects))
    }
}
