//! One cache fed by a changing set of partitions: the shard ranges a replica owns, or a set of
//! namespaces. Each partition is listed and watched by its own reflector; their events merge
//! into one stream of [`StoreEvent`]s for one informer, whose cache and lister span them all.
//!
//! - [`sharded`]: the objects whose uid (or namespace) hashes into the owned
//!   [`ShardRanges`]. Where the server supports KEP-5866 the ranges go in `shardSelector`;
//!   where it ignores it (no `shardInfo` in its list), the client keeps the same ranges with the
//!   same hash, so one configuration gives the same assignment on every cluster
//!   ([`Shards::filtering`] says which happened).
//! - [`namespaced`]: the objects of a set of namespaces, each listed and watched in its own
//!   namespace (what a Role grants), the set given by name or by a namespace label selector.
//!
//! The set changes at run time ([`Shards::set_ranges`], [`Namespaces::set`]):
//! - what stays covered stays cached, with no new list;
//! - what is no longer covered leaves the cache as deletes, so handlers hear of it;
//! - what is newly covered is listed by a new partition and joins the cache as adds; its watch
//!   continues from its list, so nothing between them is missed.
//!
//! The first lists of the partitions there at the start form one list of the whole cache, so
//! the informer syncs once all of them are in. A partition that must list again later (its
//! watch expired) cannot replace the whole cache: its list becomes adds and updates, and
//! deletes of its objects the list lacks. The merged stream sends a bookmark at the lowest
//! version every partition has reached.
//!
//! What it does not do: decide what a replica owns (shard membership does, in
//! `kinformer-coordination`; [`Shards::owner`] is the [`ShardOwner`] it drives), or keep a cache
//! (the informer does).
//!
//! # Example: a cache of one half of the pods
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_client::{Api, Client, Config as ClientConfig};
//! use kinformer_core::shard::{ShardKey, ShardRanges};
//! use kinformer_core::CacheRead;
//! use kinformer_delta_fifo::DeltaFifo;
//! use kinformer_indexer::Indexer;
//! use kinformer_partition::ShardFiltering;
//! use kinformer_shared_informer::{InformerConfig, SharedIndexInformer};
//! use kinformer_sim::{SimConfig, SimServer};
//!
//! let sim = SimServer::start(SimConfig::default()).await.unwrap();
//! sim.store().seed_pods(40, 2);
//! let client = Client::new(ClientConfig::new(&sim.url())).unwrap();
//! let half = ShardRanges::split(ShardKey::Uid, 2, 0);
//! let (events, shards) =
//!     kinformer_partition::sharded(Api::<Pod>::all(client), half.clone(), Default::default());
//! let cache = Arc::new(Indexer::<Pod>::new());
//! let queue = Arc::new(DeltaFifo::new(cache.clone()));
//! // The events merge several watches: only the merged bookmarks move the cache's version.
//! let config = InformerConfig { merged_source: true, ..InformerConfig::default() };
//! let informer = Arc::new(SharedIndexInformer::new(events, queue, cache, config));
//! let run = tokio::spawn({
//!     let informer = informer.clone();
//!     async move { informer.run().await }
//! });
//! assert!(informer.wait_synced().await);
//! let pods = informer.cache().list();
//! assert!(!pods.is_empty() && pods.len() < 40);
//! assert!(pods.iter().all(|p| half.contains(&**p)));
//! // This sim serves 1.34, which has no shardSelector: the client filtered.
//! assert_eq!(shards.filtering(), ShardFiltering::Client);
//! informer.shutdown().await;
//! run.await.unwrap();
//! # }
//! ```

#![forbid(unsafe_code)]

mod merge;
mod sharded;

use std::collections::BTreeSet;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use kinformer_core::shard::{ShardOwner, ShardRanges};
use kinformer_core::{BoxListWatch, CacheRead, ListWatch, Object, StoreEvent};
use kinformer_reflector::Config;
use tokio::sync::{mpsc, oneshot};

use merge::{Command, Merge, NamespaceEvent, NamespaceEvents, Scope, Spawn};
pub use sharded::ShardFiltering;
use sharded::{Negotiated, ShardedListWatch};

/// The errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The merged event stream is gone (the informer it fed stopped): nothing can change its
    /// partitions any more. Give up.
    #[error("the partitioned source has stopped")]
    Stopped,
}

/// The merged events of a set of partitions: a stream for an informer, built with
/// `InformerConfig::merged_source` set (the facade's `InformerBuilder::partitioned` does it).
/// Created by [`sharded`] or [`namespaced`].
pub struct PartitionedEvents<K> {
    inner: Pin<Box<dyn Stream<Item = StoreEvent<K>> + Send>>,
}

impl<K> fmt::Debug for PartitionedEvents<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartitionedEvents").finish_non_exhaustive()
    }
}

impl<K> Stream for PartitionedEvents<K> {
    type Item = StoreEvent<K>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<StoreEvent<K>>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// The settings of one partition's reflector: the base settings under a name of its own, with
/// no progress tracker (one per partition would mislead) and a seed of its own.
fn partition_config(base: &Config, number: u64, what: &str) -> Config {
    let mut config = base.clone();
    let name = if base.name.is_empty() {
        "partition"
    } else {
        base.name.as_str()
    };
    config.name = format!("{name}[{what}]");
    config.progress = None;
    config.seed = base
        .seed
        .map(|s| s ^ number.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    config
}

/// A sharded source: the objects `list_watch` serves whose hash lies in `owned`, each
/// partition run by a reflector with the settings of `config` (its selectors apply too).
/// Returns the events for an informer and the handle that changes the ranges.
pub fn sharded<K>(
    list_watch: impl ListWatch<K> + 'static,
    owned: ShardRanges,
    config: Config,
) -> (PartitionedEvents<K>, Shards)
where
    K: Object + Send + Sync + 'static,
{
    let source = BoxListWatch::new(list_watch);
    let negotiated = Arc::new(Negotiated::default());
    let spawn: Spawn<K> = {
        let negotiated = Arc::clone(&negotiated);
        Box::new(move |scope, number| {
            let Scope::Shard(ranges) = scope else {
                unreachable!("a sharded source makes shard partitions only");
            };
            let list_watch =
                ShardedListWatch::new(source.clone(), ranges.clone(), Arc::clone(&negotiated));
            let config = partition_config(
                &config,
                number,
                &format!("{} of the hash space", fraction(ranges)),
            );
            Box::pin(kinformer_reflector::watcher(list_watch, config))
        })
    };
    let (commands, receiver) = mpsc::unbounded_channel();
    let scopes = if owned.is_empty() {
        Vec::new()
    } else {
        vec![Scope::Shard(owned.clone())]
    };
    let merge = Merge::new(scopes, spawn, receiver, None);
    let events = PartitionedEvents {
        inner: Box::pin(merge.into_stream()),
    };
    let shards = Shards {
        commands,
        owned: Arc::new(Mutex::new(owned)),
        negotiated,
    };
    (events, shards)
}

fn fraction(ranges: &ShardRanges) -> String {
    format!("{:.1}%", ranges.fraction() * 100.0)
}

/// Changes what a [`sharded`] source owns. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Shards {
    commands: mpsc::UnboundedSender<Command>,
    owned: Arc<Mutex<ShardRanges>>,
    negotiated: Arc<Negotiated>,
}

impl Shards {
    /// Owns `owned` from now on: ranges kept stay cached without a new list, ranges given up
    /// leave as deletes, ranges taken are listed and join. Returns once the merged stream has
    /// taken the change (the deletes are on their way to the cache; see [`owner`](Self::owner)
    /// to wait until they are in it).
    pub async fn set_ranges(&self, owned: ShardRanges) -> Result<(), Error> {
        let (done, applied) = oneshot::channel();
        *self.owned.lock().unwrap_or_else(PoisonError::into_inner) = owned.clone();
        self.commands
            .send(Command::Shards(owned, done))
            .map_err(|_| Error::Stopped)?;
        applied.await.map_err(|_| Error::Stopped)
    }

    /// The ranges owned now.
    pub fn ranges(&self) -> ShardRanges {
        self.owned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Who filters: the server (`shardSelector` applied), the client (the server ignored it),
    /// or not known before the first list.
    pub fn filtering(&self) -> ShardFiltering {
        self.negotiated.get()
    }

    /// The [`ShardOwner`] that shard membership drives: it changes the ranges, and returns only
    /// once `cache` (the cache of the informer these events feed) holds no object of the ranges
    /// given up, so their deletes have reached the handlers' queues.
    pub fn owner<K, C>(&self, cache: Arc<C>) -> CacheOwner<K>
    where
        C: CacheRead<K> + 'static,
    {
        CacheOwner {
            shards: self.clone(),
            cache,
        }
    }
}

/// A [`ShardOwner`] over a sharded informer's cache ([`Shards::owner`]).
pub struct CacheOwner<K> {
    shards: Shards,
    cache: Arc<dyn CacheRead<K>>,
}

impl<K> fmt::Debug for CacheOwner<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheOwner")
            .field("shards", &self.shards)
            .finish_non_exhaustive()
    }
}

impl<K: Object + Send + Sync + 'static> CacheOwner<K> {
    /// Whether the cache holds an object of `ranges`.
    fn holds_any(&self, ranges: &ShardRanges) -> bool {
        let mut any = false;
        self.cache
            .for_each(&mut |o| any = any || ranges.contains(&**o));
        any
    }
}

#[async_trait::async_trait]
impl<K: Object + Send + Sync + 'static> ShardOwner for CacheOwner<K> {
    async fn set_ranges(&self, owned: ShardRanges) {
        let given_up = self.shards.ranges().difference(&owned);
        if self.shards.set_ranges(owned).await.is_err() {
            return;
        }
        // The consumer applies the deletes soon after; look again at a growing interval
        // until none of the given-up objects is left, or the source is gone.
        let mut wait = Duration::from_millis(1);
        while !given_up.is_empty() && self.holds_any(&given_up) {
            if self.shards.commands.is_closed() {
                return;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_millis(50));
        }
    }
}

/// Which namespaces a [`namespaced`] source covers.
pub enum NamespaceScope {
    /// These namespaces (changed later with [`Namespaces::set`]).
    Names(BTreeSet<String>),
    /// The namespaces a label selector selects, followed as they are created, relabelled and
    /// deleted. Made by [`NamespaceScope::selected`].
    Selected(NamespaceEventsSource),
}

impl fmt::Debug for NamespaceScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Names(names) => f.debug_tuple("Names").field(names).finish(),
            Self::Selected(_) => f.debug_tuple("Selected").finish_non_exhaustive(),
        }
    }
}

/// The watch of a namespace label selector, for [`NamespaceScope::Selected`].
pub struct NamespaceEventsSource(NamespaceEvents);

impl fmt::Debug for NamespaceEventsSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NamespaceEventsSource")
            .finish_non_exhaustive()
    }
}

impl NamespaceScope {
    /// These namespaces.
    ///
    /// ```
    /// let scope = kinformer_partition::NamespaceScope::names(["team-a", "team-b"]);
    /// assert!(matches!(scope, kinformer_partition::NamespaceScope::Names(n) if n.len() == 2));
    /// ```
    pub fn names<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        Self::Names(names.into_iter().map(Into::into).collect())
    }

    /// The namespaces `label_selector` selects, listed and watched through `namespaces` (a
    /// list/watch of `Namespace`s, or of their metadata) by a reflector with the settings of
    /// `config`.
    pub fn selected<N>(
        namespaces: impl ListWatch<N> + 'static,
        label_selector: impl Into<String>,
        config: Config,
    ) -> Self
    where
        N: Object + Send + Sync + 'static,
    {
        let config = Config {
            label_selector: Some(label_selector.into()),
            progress: None,
            name: "namespaces".into(),
            ..config
        };
        let events = kinformer_reflector::watcher(namespaces, config).filter_map(|event| {
            let mapped = match event {
                StoreEvent::RelistBegin => Some(NamespaceEvent::ListBegin),
                StoreEvent::RelistPage(page) => Some(NamespaceEvent::ListPage(
                    page.iter().map(|n| n.name().to_owned()).collect(),
                )),
                StoreEvent::RelistEnd(_) => Some(NamespaceEvent::ListEnd),
                StoreEvent::Added(n) | StoreEvent::Modified(n) => {
                    Some(NamespaceEvent::Selected(n.name().to_owned()))
                }
                StoreEvent::Deleted(n) => Some(NamespaceEvent::Unselected(n.name().to_owned())),
                StoreEvent::RelistAbandoned | StoreEvent::Bookmark(_) | StoreEvent::Resync => None,
            };
            futures_util::future::ready(mapped)
        });
        Self::Selected(NamespaceEventsSource(Box::pin(events)))
    }
}

/// A source over a set of namespaces: `list_watch_in(ns)` gives the list/watch of the resource
/// in namespace `ns` (`Api::namespaced(client, ns)`), each run by a reflector with the settings
/// of `config`. Returns the events for an informer and the handle that changes the set (for a
/// [`NamespaceScope::Names`] scope; a selector's set follows the namespaces' labels).
pub fn namespaced<K>(
    list_watch_in: impl Fn(&str) -> BoxListWatch<K> + Send + 'static,
    scope: NamespaceScope,
    config: Config,
) -> (PartitionedEvents<K>, Namespaces)
where
    K: Object + Send + Sync + 'static,
{
    let spawn: Spawn<K> = Box::new(move |scope, number| {
        let Scope::Namespace(ns) = scope else {
            unreachable!("a namespaced source makes namespace partitions only");
        };
        let config = partition_config(&config, number, ns);
        Box::pin(kinformer_reflector::watcher(list_watch_in(ns), config))
    });
    let (commands, receiver) = mpsc::unbounded_channel();
    let (scopes, selector, names) = match scope {
        NamespaceScope::Names(names) => (
            names.iter().cloned().map(Scope::Namespace).collect(),
            None,
            names,
        ),
        NamespaceScope::Selected(NamespaceEventsSource(events)) => {
            (Vec::new(), Some(events), BTreeSet::new())
        }
    };
    let merge = Merge::new(scopes, spawn, receiver, selector);
    let events = PartitionedEvents {
        inner: Box::pin(merge.into_stream()),
    };
    let handle = Namespaces {
        commands,
        names: Arc::new(Mutex::new(names)),
    };
    (events, handle)
}

/// Changes the namespaces of a [`namespaced`] source. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Namespaces {
    commands: mpsc::UnboundedSender<Command>,
    names: Arc<Mutex<BTreeSet<String>>>,
}

impl Namespaces {
    /// Covers `names` from now on: a namespace added is listed and watched and joins the cache,
    /// one removed leaves it as deletes. Returns once the merged stream has taken the change.
    /// For a source whose namespaces a selector chooses, the selector's next change overrides
    /// this.
    pub async fn set<S: Into<String>>(
        &self,
        names: impl IntoIterator<Item = S>,
    ) -> Result<(), Error> {
        let names: BTreeSet<String> = names.into_iter().map(Into::into).collect();
        *self.names.lock().unwrap_or_else(PoisonError::into_inner) = names.clone();
        let (done, applied) = oneshot::channel();
        self.commands
            .send(Command::Namespaces(names, done))
            .map_err(|_| Error::Stopped)?;
        applied.await.map_err(|_| Error::Stopped)
    }

    /// The namespaces last given to [`set`](Self::set) (or at the start).
    pub fn names(&self) -> BTreeSet<String> {
        self.names
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
