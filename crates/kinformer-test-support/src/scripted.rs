//! A scripted, in-memory [`ListWatch`]: a state it lists page by page, and watches it serves
//! from a script, recording every request. For tests of anything that consumes a `ListWatch`
//! (the reflector first), with no server and no HTTP stack.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use kinformer_core::list_watch::{self, ErrorKind, ListWatch, WatchStream};
use kinformer_core::{ListParams, ObjectList, ResourceVersion, WatchEvent, WatchParams};

/// What one watch request gets: these events in order, then the end of the stream.
pub type WatchScript<K> = Vec<Result<WatchEvent<K>, list_watch::Error>>;

/// A [`ListWatch`] over a state held in memory.
///
/// Lists serve the current state (set with [`set_state`](Self::set_state)) in pages of the
/// request's `limit`, with continue tokens; errors queued with [`fail_next_list`](Self::fail_next_list)
/// are answered first, one per request. Each watch takes the next script queued with
/// [`push_watch`](Self::push_watch), or ends at once when none is left. A streaming list (a
/// watch with `sendInitialEvents`) is refused with a fatal error, as a server without the feature
/// refuses it (422), so a reflector falls back to list and watch; the refused request is kept
/// but takes no script. Every request is kept, in order, for the test to inspect.
///
/// ```
/// use std::sync::Arc;
/// use kinformer_core::list_watch::{self, ListWatch};
/// use kinformer_core::{DynamicObject, ListParams};
/// use kinformer_test_support::ScriptedListWatch;
///
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// let source = ScriptedListWatch::new(vec![Arc::new(DynamicObject::default())], "7");
/// let all = block_on(list_watch::list_all(&source, &ListParams::default(), 500)).unwrap();
/// assert_eq!((all.items.len(), all.resource_version.as_str()), (1, "7"));
/// assert_eq!(source.list_requests().len(), 1);
/// ```
pub struct ScriptedListWatch<K> {
    inner: Mutex<Inner<K>>,
}

struct Inner<K> {
    objects: Vec<Arc<K>>,
    resource_version: ResourceVersion,
    list_errors: VecDeque<list_watch::Error>,
    watches: VecDeque<WatchScript<K>>,
    list_requests: Vec<ListParams>,
    watch_requests: Vec<WatchParams>,
}

impl<K> std::fmt::Debug for ScriptedListWatch<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("ScriptedListWatch")
            .field("objects", &inner.objects.len())
            .field("resource_version", &inner.resource_version)
            .field("watches_queued", &inner.watches.len())
            .finish()
    }
}

impl<K> ScriptedListWatch<K> {
    /// A source whose state is `objects` at `resource_version`.
    pub fn new(objects: Vec<Arc<K>>, resource_version: &str) -> Self {
        Self {
            inner: Mutex::new(Inner {
                objects,
                resource_version: resource_version.into(),
                list_errors: VecDeque::new(),
                watches: VecDeque::new(),
                list_requests: Vec::new(),
                watch_requests: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<K>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces the state later lists serve.
    pub fn set_state(&self, objects: Vec<Arc<K>>, resource_version: &str) {
        let mut inner = self.lock();
        inner.objects = objects;
        inner.resource_version = resource_version.into();
    }

    /// The next list request (a first page or a continuation) fails with `error`.
    pub fn fail_next_list(&self, error: list_watch::Error) {
        self.lock().list_errors.push_back(error);
    }

    /// The next watch request that has no script yet gets these events, then the end.
    pub fn push_watch(&self, events: WatchScript<K>) {
        self.lock().watches.push_back(events);
    }

    /// Every list request so far, in order.
    pub fn list_requests(&self) -> Vec<ListParams> {
        self.lock().list_requests.clone()
    }

    /// Every watch request so far, in order.
    pub fn watch_requests(&self) -> Vec<WatchParams> {
        self.lock().watch_requests.clone()
    }
}

#[async_trait]
impl<K: Send + Sync + 'static> ListWatch<K> for ScriptedListWatch<K> {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, list_watch::Error> {
        let mut inner = self.lock();
        inner.list_requests.push(params.clone());
        if let Some(error) = inner.list_errors.pop_front() {
            return Err(error);
        }
        let start = match params.continue_token.as_deref() {
            None => 0,
            Some(token) => token.parse::<usize>().map_err(|_| {
                list_watch::Error::new(ErrorKind::Fatal, format!("bad continue token {token:?}"))
            })?,
        };
        let total = inner.objects.len();
        let start = start.min(total);
        let end = params
            .limit
            .filter(|l| *l > 0)
            .map_or(total, |l| (start + l as usize).min(total));
        Ok(ObjectList {
            items: inner.objects[start..end].to_vec(),
            resource_version: inner.resource_version.clone(),
            continue_token: (end < total).then(|| end.to_string()),
            remaining_item_count: (end < total).then(|| (total - end) as i64),
            shard_selector: None,
        })
    }

    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<K>, list_watch::Error> {
        let mut inner = self.lock();
        inner.watch_requests.push(params.clone());
        if params.send_initial_events {
            return Err(list_watch::Error::new(
                ErrorKind::Fatal,
                "sendInitialEvents: Forbidden: this scripted source serves no streaming list",
            ));
        }
        let events = inner.watches.pop_front().unwrap_or_default();
        Ok(Box::pin(Scripted(events.into())))
    }
}

/// A watch stream that yields its script, then ends.
struct Scripted<K>(VecDeque<Result<WatchEvent<K>, list_watch::Error>>);

impl<K> futures_core::Stream for Scripted<K> {
    type Item = Result<WatchEvent<K>, list_watch::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Ready(self.0.pop_front())
    }
}

// Unpin for any K: the script is a VecDeque.
impl<K> Unpin for Scripted<K> {}
