//! The reflector as a `Stream` of events, for code that wants events without a cache.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use futures_util::Stream;
use kinformer_core::{ListWatch, Object, ReflectorStore, StoreError, StoreEvent};

use crate::{Config, Reflector, ReflectorHandle, Result};

/// How many events a [`Watcher`] holds ahead of its reader before the reflector waits: one, so
/// that a reader that pulls only while its own store has room (a shared informer over a bounded
/// queue) holds the watch back at that bound, with no read-ahead of its own. The reflector is
/// polled on the reader's task, so a buffer this small costs a poll per event, not a wake-up.
pub const WATCHER_BUFFER: usize = 1;

/// The store of a [`Watcher`]: a short queue its reader drains.
struct Queue<K> {
    events: Mutex<VecDeque<StoreEvent<K>>>,
}

impl<K> Queue<K> {
    fn lock(&self) -> MutexGuard<'_, VecDeque<StoreEvent<K>>> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<K: Object> ReflectorStore<K> for Queue<K> {
    fn apply(&self, event: StoreEvent<K>) -> std::result::Result<(), StoreError> {
        self.lock().push_back(event);
        Ok(())
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

/// The reflector's list-then-watch loop as a `Stream` of [`StoreEvent`]s, with the same retry
/// rules and the relist protocol surfaced as begin/page/end events: what kube-runtime's
/// `watcher()` offers. A consumer that keeps state applies a relist at
/// [`RelistEnd`](StoreEvent::RelistEnd) and drops what it gathered at
/// [`RelistAbandoned`](StoreEvent::RelistAbandoned) or a new [`RelistBegin`](StoreEvent::RelistBegin);
/// any [`ReflectorStore`] does exactly that with [`apply`](ReflectorStore::apply), and a shared
/// informer takes this stream as its source. The stream ends only when stopped through [`Watcher::handle`]; failures are retried
/// and reported to the [`WatchErrorHandler`](crate::WatchErrorHandler) in `config`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use futures_util::StreamExt as _;
/// use kinformer_core::StoreEvent;
/// use kinformer_reflector::{Config, watcher};
/// use kinformer_test_support::{ScriptedListWatch, typed_pods};
///
/// let mut events = watcher(ScriptedListWatch::new(typed_pods(2), "9"), Config::default());
/// assert!(matches!(events.next().await, Some(StoreEvent::RelistBegin)));
/// assert!(matches!(events.next().await, Some(StoreEvent::RelistPage(page)) if page.len() == 2));
/// assert!(matches!(events.next().await, Some(StoreEvent::RelistEnd(rv)) if rv.as_str() == "9"));
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
    type Item = StoreEvent<K>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<StoreEvent<K>>> {
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
