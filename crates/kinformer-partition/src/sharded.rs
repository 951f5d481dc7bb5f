//! A list/watch restricted to shard ranges: by the server where it applies `shardSelector`
//! (KEP-5866), by the client (the same FNV-1a hash) where it does not.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use async_trait::async_trait;
use futures_util::StreamExt;
use kinformer_core::list_watch::{self, WatchStream};
use kinformer_core::shard::ShardRanges;
use kinformer_core::{
    BoxListWatch, ListParams, ListWatch, Object, ObjectList, WatchEvent, WatchParams,
};

/// Who filters a sharded source's objects, once the server has been asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardFiltering {
    /// Not known yet: no list has been answered.
    Unknown,
    /// The server applies `shardSelector` (its list echoed the selector in `shardInfo`).
    Server,
    /// The server ignored `shardSelector` (no `shardInfo`: a release before 1.36, or the
    /// `ShardedListAndWatch` gate off): the client lists everything and keeps its ranges.
    Client,
}

/// What the sources of one sharded informer learnt of the server, shared by all of them.
#[derive(Debug, Default)]
pub(crate) struct Negotiated(AtomicU8);

impl Negotiated {
    pub(crate) fn get(&self) -> ShardFiltering {
        match self.0.load(Ordering::Acquire) {
            1 => ShardFiltering::Server,
            2 => ShardFiltering::Client,
            _ => ShardFiltering::Unknown,
        }
    }

    fn learn(&self, server_applied: bool) {
        let was = self
            .0
            .swap(if server_applied { 1 } else { 2 }, Ordering::AcqRel);
        if was == 0 {
            if server_applied {
                tracing::debug!("the server applies shardSelector");
            } else {
                tracing::info!(
                    "the server ignored shardSelector (no shardInfo in its list): filtering shards on the client"
                );
            }
        } else if was != if server_applied { 1 } else { 2 } {
            tracing::warn!(
                server_applied,
                "the server changed its answer to shardSelector"
            );
        }
    }
}

/// A [`ListWatch`] that lists and watches only the objects in `ranges`. It sends the ranges as
/// `shardSelector` until a list shows the server ignores it, and keeps only the objects of its
/// ranges whatever the server sent, so the result is the same either way.
pub(crate) struct ShardedListWatch<K> {
    inner: BoxListWatch<K>,
    ranges: ShardRanges,
    negotiated: Arc<Negotiated>,
}

impl<K> ShardedListWatch<K> {
    pub(crate) fn new(
        inner: BoxListWatch<K>,
        ranges: ShardRanges,
        negotiated: Arc<Negotiated>,
    ) -> Self {
        Self {
            inner,
            ranges,
            negotiated,
        }
    }

    /// The selector to send: none for the whole space (nothing to select) or once the server
    /// is known to ignore it.
    fn selector(&self) -> Option<String> {
        (!self.ranges.is_all() && self.negotiated.get() != ShardFiltering::Client)
            .then(|| self.ranges.to_selector())
    }
}

#[async_trait]
impl<K: Object + Send + Sync + 'static> ListWatch<K> for ShardedListWatch<K> {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, list_watch::Error> {
        let selector = self.selector();
        let asked = selector.is_some();
        let params = ListParams {
            shard_selector: selector,
            ..params.clone()
        };
        let mut list = self.inner.list(&params).await?;
        if asked {
            self.negotiated.learn(list.shard_selector.is_some());
        }
        if !self.ranges.is_all() {
            list.items.retain(|o| self.ranges.contains(&**o));
        }
        Ok(list)
    }

    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<K>, list_watch::Error> {
        if self.negotiated.get() == ShardFiltering::Unknown && !self.ranges.is_all() {
            // A watch says nothing of whether the server applied the selector: ask with the
            // smallest list (a streaming list comes here first).
            self.list(&ListParams {
                label_selector: params.label_selector.clone(),
                field_selector: params.field_selector.clone(),
                limit: Some(1),
                ..ListParams::default()
            })
            .await?;
        }
        let params = WatchParams {
            shard_selector: self.selector(),
            ..params.clone()
        };
        let stream = self.inner.watch(&params).await?;
        if self.ranges.is_all() {
            return Ok(stream);
        }
        let ranges = self.ranges.clone();
        Ok(Box::pin(stream.filter(move |event| {
            let keep = match event {
                Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)) => {
                    ranges.contains(&**o)
                }
                _ => true,
            };
            futures_util::future::ready(keep)
        })))
    }
}
