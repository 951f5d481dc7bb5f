//! The reflector as a `Stream` of events, for code that wants events without a cache.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use futures_util::Stream;
use kinformer_core::{ListWatch, Object, ReflectorStore, ResourceVersion, StoreError};

use crate::{Config, Reflector, ReflectorHandle, Result};

/// How many events a [`Watcher`] gathers ahead of its reader before the reflector waits.
pub const WATCHER_BUFFER: usize = 64;

/// One step of a [`watcher`]: the relist protocol and the watch events, in the order the
/// reflector wrote them. A consumer that keeps state applies a relist at
/// [`RelistEnd`](Self::RelistEnd) and drops what it gathered at
/// [`RelistAbandoned`](Self::RelistAbandoned) or a new [`RelistBegin`](Self::RelistBegin).
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<K> {
    /// A list begins (or begins again after an expired continue token).
    RelistBegin,
    /// One page of the list, in the server's order.
    RelistPage(Vec<Arc<K>>),
    /// The list is complete at this resourceVersion: the objects of its pages are the state.
    RelistEnd(ResourceVersion),
    /// The list failed halfway; what its pages held is not a state.
    RelistAbandoned,
    /// `ADDED`.
    Added(Arc<K>),
    /// `MODIFIED`.
    Modified(Arc<K>),
    /// `DELETED`, with the object's last state.
    Deleted(Arc<K>),
    /// The watch has reached this resourceVersion.
    Bookmark(ResourceVersion),
    /// The resync period has passed.
    Resync,
}

/// The store of a [`Watcher`]: a short queue its reader drains.
struct Queue<K> {
    events: Mutex<VecDeque<Event<K>>>,
}

impl<K> Queue<K> {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Event<K>>> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, event: Event<K>) -> std::result::Result<(), StoreError> {
        self.lock().push_back(event);
        Ok(())
    }
}

impl<K: Object> ReflectorStore<K> for Queue<K> {
    fn add(&self, object: Arc<K>) -> std::result::Result<(), StoreError> {
        self.push(Event::Added(object))
    }
    fn update(&self, object: Arc<K>) -> std::result::Result<(), StoreError> {
        self.push(Event::Modified(object))
    }
    fn delete(&self, object: Arc<K>) -> std::result::Result<(), StoreError> {
        self.push(Event::Deleted(object))
    }
    fn begin_relist(&self) -> std::result::Result<(), StoreError> {
        self.push(Event::RelistBegin)
    }
    fn relist_page(&self, objects: Vec<Arc<K>>) -> std::result::Result<(), StoreError> {
        self.push(Event::RelistPage(objects))
    }
    fn end_relist(&self, resource_version: ResourceVersion) -> std::result::Result<(), StoreError> {
        self.push(Event::RelistEnd(resource_version))
    }
    fn abandon_relist(&self) {
        self.lock().push_back(Event::RelistAbandoned);
    }
    fn resync(&self) -> std::result::Result<(), StoreError> {
        self.push(Event::Resync)
    }
    fn bookmark(&self, resource_version: &ResourceVersion) {
        self.lock()
            .push_back(Event::Bookmark(resource_version.clone()));
    }
    /// Full until the reader takes an event. No waker is needed: the reader polls the
    /// reflector only once it has drained the queue (see [`Watcher`]'s `poll_next`).
    fn poll_ready(&self, _: &mut Context<'_>) -> Poll<std::result::Result<(), StoreError>> {
        if self.lock().len() < WATCHER_BUFFER {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }
}

type RunFuture = Pin<Box<dyn Future<Output = Result<()>> + Send>>;

/// The stream [`watcher`] returns. Polling it drives the reflector on the reader's task: no
/// task is spawned, at most [`WATCHER_BUFFER`] events wait for the reader, and dropping the
/// stream stops everything.
pub struct Watcher<K> {
    queue: Arc<Queue<K>>,
    run: Option<RunFuture>,
    handle: ReflectorHandle,
}

impl<K> fmt::Debug for Watcher<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watcher")
            .field("buffered", &self.queue.lock().len())
            .field("running", &self.run.is_some())
            .field("handle", &self.handle)
            .finish()
    }
}

impl<K> Watcher<K> {
    /// A handle on the reflector inside: its last synced resourceVersion, and `stop`, after
    /// which the stream ends once its buffered events are read.
    pub fn handle(&self) -> ReflectorHandle {
        self.handle.clone()
    }
}

/// The reflector's list-then-watch loop as a `Stream` of [`Event`]s, with the same retry rules
/// and the relist protocol surfaced as begin/page/end events: what kube-runtime's `watcher()`
/// offers. The stream ends only when stopped through [`Watcher::handle`]; failures are retried
/// and reported to the [`WatchErrorHandler`](crate::WatchErrorHandler) in `config`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use futures_util::StreamExt as _;
/// use kinformer_reflector::{Config, Event, watcher};
/// use kinformer_test_support::{ScriptedListWatch, typed_pods};
///
/// let mut events = watcher(ScriptedListWatch::new(typed_pods(2), "9"), Config::default());
/// assert!(matches!(events.next().await, Some(Event::RelistBegin)));
/// assert!(matches!(events.next().await, Some(Event::RelistPage(page)) if page.len() == 2));
/// assert!(matches!(events.next().await, Some(Event::RelistEnd(rv)) if rv.as_str() == "9"));
/// events.handle().stop();
/// while events.next().await.is_some() {}
/// # }
/// ```
pub fn watcher<K, L>(list_watch: L, config: Config) -> Watcher<K>
where
    K: Object + Send + Sync + 'static,
    L: ListWatch<K> + 'static,
{
    let queue = Arc::new(Queue {
        events: Mutex::new(VecDeque::new()),
    });
    let reflector = Reflector::new(list_watch, Arc::clone(&queue), config);
    let handle = reflector.handle();
    let run: RunFuture = Box::pin(async move { reflector.run().await });
    Watcher {
        queue,
        run: Some(run),
        handle,
    }
}

impl<K> Stream for Watcher<K> {
    type Item = Event<K>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event<K>>> {
        let this = self.get_mut();
        if let Some(event) = this.queue.lock().pop_front() {
            return Poll::Ready(Some(event));
        }
        let Some(run) = this.run.as_mut() else {
            return Poll::Ready(None);
        };
        // The queue is empty, so the reflector can write: run it until it has written something
        // (or the buffer is full), or is waiting on the server.
        let finished = run.as_mut().poll(cx);
        if let Poll::Ready(result) = finished {
            if let Err(e) = result {
                tracing::error!(error = %e, "watcher stopped");
            }
            this.run = None;
        }
        match this.queue.lock().pop_front() {
            Some(event) => Poll::Ready(Some(event)),
            None if this.run.is_none() => Poll::Ready(None),
            None => Poll::Pending,
        }
    }
}
