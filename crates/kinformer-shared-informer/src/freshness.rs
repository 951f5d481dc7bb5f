//! How fresh the cache is: the resourceVersion it has reached, and the versions a controller
//! wrote and wants to read back (read-your-writes).
//!
//! The informer moves the version as its consumer applies what it pops: to a batch's last
//! object's version, a relist's list version, a bookmark's version. The in-order queue (the
//! default) hands bookmarks out in their place, so the version is exact: when it reads `R`, the
//! cache holds every change up to `R`. The classic queue pops by key and drops bookmarks: its
//! cache is known to have reached a version only when the queue is empty, and the version moves
//! then.
//!
//! Versions are compared as Kubernetes 1.35 allows (KEP-5504: decimal integers); asking about an
//! opaque version is an error, never a guess.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kinformer_core::{NotComparable, ResourceVersion};
use parking_lot::Mutex;
use tokio::sync::watch;

/// Why a freshness question has no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FreshnessError {
    /// A version (asked for, written, or the cache's own) is not a decimal integer: the server
    /// makes opaque versions, and no order can be trusted. Not retryable: read from the server
    /// instead of the cache.
    #[error(transparent)]
    NotComparable(#[from] NotComparable),
    /// The cache did not reach the version in time. Retry later, or read from the server.
    #[error(
        "the cache of {informer:?} did not reach resource version {wanted} within {waited:?} (it is at {reached})"
    )]
    Timeout {
        /// The informer's name.
        informer: String,
        /// The version waited for.
        wanted: ResourceVersion,
        /// Where the cache was when the wait ended (`none` before the first list).
        reached: String,
        /// How long it waited.
        waited: Duration,
    },
    /// The informer was shut down before its cache reached the version. Give up.
    #[error("the informer {informer:?} was shut down before its cache reached {wanted}")]
    Stopped {
        /// The informer's name.
        informer: String,
        /// The version waited for.
        wanted: ResourceVersion,
    },
}

/// The cache's freshness, shared by the informer and every [`Freshness`] handle.
pub(crate) struct State {
    /// The version the cache has reached.
    reached: watch::Sender<Option<ResourceVersion>>,
    /// Per key, the newest version a write of it returned, until the cache reaches it.
    wrote: Mutex<HashMap<String, ResourceVersion>>,
}

impl State {
    pub(crate) fn new() -> Self {
        Self {
            reached: watch::channel(None).0,
            wrote: Mutex::new(HashMap::new()),
        }
    }

    /// The cache holds everything up to `rv` and nothing newer (an in-order pop).
    pub(crate) fn set(&self, rv: &ResourceVersion) {
        self.reached.send_if_modified(|held| {
            if held.as_ref() == Some(rv) {
                return false;
            }
            *held = Some(rv.clone());
            true
        });
    }

    /// The cache holds at least everything up to `rv` (the classic queue, drained).
    pub(crate) fn advance(&self, rv: &ResourceVersion) {
        self.reached.send_if_modified(|held| {
            let newer = match held {
                None => true,
                Some(h) => !matches!(rv.compare(h), Ok(Ordering::Less | Ordering::Equal)),
            };
            if newer {
                *held = Some(rv.clone());
            }
            newer
        });
    }

    /// A key's object left the cache: a write of it is read back as its absence.
    pub(crate) fn forget(&self, key: &str) {
        let mut wrote = self.wrote.lock();
        if !wrote.is_empty() {
            wrote.remove(key);
        }
    }

    pub(crate) fn has_writes(&self) -> bool {
        !self.wrote.lock().is_empty()
    }

    pub(crate) fn reached(&self) -> Option<ResourceVersion> {
        self.reached.borrow().clone()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Option<ResourceVersion>> {
        self.reached.subscribe()
    }
}

/// `reached` is at least `wanted`.
fn at_least(
    reached: Option<&ResourceVersion>,
    wanted: &ResourceVersion,
) -> Result<bool, NotComparable> {
    match reached {
        None => Ok(false),
        Some(r) => Ok(r.compare(wanted)? != Ordering::Less),
    }
}

/// The version of the object the cache holds under a key, if it holds one.
pub(crate) type VersionOf = Arc<dyn Fn(&str) -> Option<ResourceVersion> + Send + Sync>;

/// Read-your-writes for one informer's cache: record the version a write returned for a key,
/// then ask whether (or wait until) the cache is at least that fresh for the key.
///
/// A controller that writes an object and then reads its own cache may not see its write yet
/// and act twice. With a `Freshness` it records [`wrote`](Self::wrote) after each write and
/// checks [`is_fresh`](Self::is_fresh) before acting on what the cache says about that key (a
/// work queue can hold the key until then). A key is fresh once the cache has reached the
/// written version, or holds the key's object at that version or newer; a key whose object is
/// deleted from the cache is forgotten (it is fresh: the cache agrees it is gone). Cheap to
/// clone; clones share the record.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::Arc;
/// use futures_util::{StreamExt as _, stream};
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_core::StoreEvent;
/// use kinformer_delta_fifo::DeltaFifo;
/// use kinformer_indexer::Indexer;
/// use kinformer_shared_informer::{InformerConfig, SharedIndexInformer};
/// use kinformer_test_support::typed_pods;
///
/// let events = stream::iter([
///     StoreEvent::RelistBegin,
///     StoreEvent::RelistPage(typed_pods(1)),
///     StoreEvent::RelistEnd("7".into()),
/// ])
/// .chain(stream::pending());
/// let cache = Arc::new(Indexer::<Pod>::new());
/// let queue = Arc::new(DeltaFifo::new(cache.clone()));
/// let informer = Arc::new(SharedIndexInformer::new(events, queue, cache, InformerConfig::default()));
/// let freshness = informer.freshness();
/// // A write of default/web returned version 9; the cache is not there yet.
/// freshness.wrote("default/web", "9".into());
/// assert_eq!(freshness.is_fresh("default/web"), Ok(false));
/// assert_eq!(freshness.is_fresh("default/other"), Ok(true));
/// # }
/// ```
#[derive(Clone)]
pub struct Freshness {
    state: Arc<State>,
    informer: Arc<str>,
    resource: Arc<str>,
    /// The object the cache holds for a key, and its version, if it holds one.
    lookup: VersionOf,
}

impl std::fmt::Debug for Freshness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Freshness")
            .field("informer", &self.informer)
            .field("reached", &self.state.reached())
            .field("writes", &self.state.wrote.lock().len())
            .finish()
    }
}

impl Freshness {
    pub(crate) fn new(
        state: Arc<State>,
        informer: &str,
        resource: &str,
        lookup: VersionOf,
    ) -> Self {
        Self {
            state,
            informer: informer.into(),
            resource: resource.into(),
            lookup,
        }
    }

    /// The resourceVersion the cache has reached: every change up to it is in the cache. `None`
    /// before the first list is stored.
    pub fn reached(&self) -> Option<ResourceVersion> {
        self.state.reached()
    }

    /// The name of the informer whose cache this is (for logs and metrics).
    pub fn informer(&self) -> &str {
        &self.informer
    }

    /// The resource that informer caches, as its metrics name it.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Records that a write of `key` (`namespace/name`, or `name`) returned `resource_version`
    /// (the `metadata.resourceVersion` of the response). A newer record of the key replaces an
    /// older one.
    pub fn wrote(&self, key: &str, resource_version: ResourceVersion) {
        let mut wrote = self.state.wrote.lock();
        match wrote.get_mut(key) {
            Some(held) => {
                if !matches!(
                    resource_version.compare(held),
                    Ok(Ordering::Less | Ordering::Equal)
                ) {
                    *held = resource_version;
                }
            }
            None => {
                wrote.insert(key.to_owned(), resource_version);
            }
        }
    }

    /// Whether the cache is at least as fresh for `key` as the last write recorded for it
    /// (`true` when none is recorded). A fresh key's record is dropped.
    ///
    /// # Errors
    /// [`FreshnessError::NotComparable`] when the written version, or the version the answer
    /// depends on, is opaque.
    pub fn is_fresh(&self, key: &str) -> Result<bool, FreshnessError> {
        let Some(wanted) = self.state.wrote.lock().get(key).cloned() else {
            return Ok(true);
        };
        let fresh = at_least(self.state.reached().as_ref(), &wanted)?
            || at_least((self.lookup)(key).as_ref(), &wanted)?;
        if fresh {
            let mut wrote = self.state.wrote.lock();
            if wrote.get(key) == Some(&wanted) {
                wrote.remove(key);
            }
        }
        Ok(fresh)
    }

    /// Waits until [`is_fresh`](Self::is_fresh) says `true` for `key`, at most `timeout`.
    ///
    /// # Errors
    /// [`FreshnessError::Timeout`] naming where the cache got to;
    /// [`FreshnessError::NotComparable`] for an opaque version.
    pub async fn wait_fresh(&self, key: &str, timeout: Duration) -> Result<(), FreshnessError> {
        let mut changes = self.state.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            changes.borrow_and_update();
            if self.is_fresh(key)? {
                return Ok(());
            }
            let wanted = self.state.wrote.lock().get(key).cloned();
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                // The informer is gone, or the time is up: one last look.
                Ok(Err(_)) | Err(_) => {
                    if self.is_fresh(key)? {
                        return Ok(());
                    }
                    return Err(FreshnessError::Timeout {
                        informer: self.informer.to_string(),
                        wanted: wanted.unwrap_or_else(|| ResourceVersion::from("")),
                        reached: shown(self.state.reached().as_ref()),
                        waited: timeout,
                    });
                }
            }
        }
    }

    /// A future that resolves when the cache's version moves (so a key that was not fresh may
    /// be now), or the informer is gone. It watches from the moment this is called, not from
    /// its first poll: a change in between is not missed.
    pub fn changed(&self) -> impl std::future::Future<Output = ()> + Send + Sync + 'static {
        let mut changes = self.state.subscribe();
        async move {
            let _ = changes.changed().await;
        }
    }
}

pub(crate) fn shown(rv: Option<&ResourceVersion>) -> String {
    rv.map_or_else(|| "none".to_owned(), ToString::to_string)
}

/// Waits until the cache has reached `wanted`, at most `timeout`, or the informer stops.
pub(crate) async fn wait_until(
    state: &State,
    informer: &str,
    mut stop: watch::Receiver<bool>,
    wanted: &ResourceVersion,
    timeout: Duration,
) -> Result<(), FreshnessError> {
    if !wanted.is_comparable() {
        return Err(NotComparable {
            version: wanted.clone(),
        }
        .into());
    }
    let mut changes = state.subscribe();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let reached = changes.borrow_and_update().clone();
        if at_least(reached.as_ref(), wanted)? {
            return Ok(());
        }
        tokio::select! {
            biased;
            changed = changes.changed() => {
                if changed.is_err() {
                    break;
                }
            }
            _ = stop.wait_for(|s| *s) => {
                return Err(FreshnessError::Stopped {
                    informer: informer.to_owned(),
                    wanted: wanted.clone(),
                });
            }
            () = tokio::time::sleep_until(deadline) => break,
        }
    }
    let reached = state.reached();
    if at_least(reached.as_ref(), wanted)? {
        return Ok(());
    }
    Err(FreshnessError::Timeout {
        informer: informer.to_owned(),
        wanted: wanted.clone(),
        reached: shown(reached.as_ref()),
        waited: timeout,
    })
}
