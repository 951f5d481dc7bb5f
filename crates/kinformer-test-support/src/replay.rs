//! [`Replay`], a [`ListWatch`] that lists a fixed state and replays prepared events on its
//! watch, which then stays open: a steady source for tests and benches of what consumes one.

use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use async_trait::async_trait;
use kinformer_core::list_watch::{self, ErrorKind, ListWatch, WatchStream};
use kinformer_core::{ListParams, ObjectList, ResourceVersion, WatchEvent, WatchParams};

type Events<K> = Box<dyn Iterator<Item = WatchEvent<K>> + Send>;

struct Inner<K> {
    list: Vec<Arc<K>>,
    resource_version: ResourceVersion,
    events: Mutex<Option<Events<K>>>,
    lists: AtomicUsize,
    pulled: AtomicUsize,
}

/// A [`ListWatch`] that lists `list` at one resourceVersion, every time, and whose first watch
/// replays the prepared events, then stays open and quiet, as does every later watch. The
/// events are drawn from their iterator only as the watch is read, so a lazy iterator makes
/// each event when it is read; [`pulled`](Self::pulled) counts them. Clones share one source.
///
/// It lists and watches: a streaming list (a watch with `sendInitialEvents`) is refused with a
/// fatal error, as a server without the feature refuses it, so a reflector falls back to a list.
///
/// ```
/// use std::sync::Arc;
/// use kinformer_core::list_watch::ListWatch;
/// use kinformer_core::{DynamicObject, ListParams, WatchEvent, WatchParams};
/// use kinformer_test_support::Replay;
///
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// let object = Arc::new(DynamicObject::default());
/// let source = Replay::new(vec![Arc::clone(&object)], "1")
///     .with_events((0..3).map(move |_| WatchEvent::Modified(Arc::clone(&object))));
/// let listed = block_on(source.list(&ListParams::default())).unwrap();
/// assert_eq!((listed.items.len(), listed.resource_version.as_str()), (1, "1"));
///
/// let mut watch = block_on(source.watch(&WatchParams::default())).unwrap();
/// let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// assert!(watch.as_mut().poll_next(&mut cx).is_ready());
/// assert_eq!((source.lists(), source.pulled()), (1, 1), "one event read so far");
/// for _ in 0..2 {
///     assert!(watch.as_mut().poll_next(&mut cx).is_ready());
/// }
/// assert!(watch.as_mut().poll_next(&mut cx).is_pending(), "then it stays open");
/// ```
pub struct Replay<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for Replay<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> fmt::Debug for Replay<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replay")
            .field("list", &self.inner.list.len())
            .field("resource_version", &self.inner.resource_version)
            .field("lists", &self.lists())
            .field("pulled", &self.pulled())
            .finish_non_exhaustive()
    }
}

impl<K> Replay<K> {
    /// A source that lists `list` at `resource_version` and whose watches stay open and quiet.
    ///
    /// ```
    /// let quiet = kinformer_test_support::Replay::new(kinformer_test_support::typed_pods(3), "5");
    /// assert_eq!(quiet.pulled(), 0);
    /// ```
    pub fn new(list: Vec<Arc<K>>, resource_version: &str) -> Self {
        Self {
            inner: Arc::new(Inner {
                list,
                resource_version: resource_version.into(),
                events: Mutex::new(None),
                lists: AtomicUsize::new(0),
                pulled: AtomicUsize::new(0),
            }),
        }
    }

    /// The first watch (from now on) replays `events`, then stays open.
    ///
    /// ```
    /// use kinformer_core::{DynamicObject, WatchEvent};
    /// let source = kinformer_test_support::Replay::<DynamicObject>::new(Vec::new(), "1")
    ///     .with_events(Vec::<WatchEvent<DynamicObject>>::new());
    /// assert_eq!(source.lists(), 0);
    /// ```
    pub fn with_events<I>(self, events: I) -> Self
    where
        I: IntoIterator<Item = WatchEvent<K>>,
        I::IntoIter: Send + 'static,
    {
        *self
            .inner
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Box::new(events.into_iter()));
        self
    }

    /// How many list requests came so far.
    ///
    /// ```
    /// let source = kinformer_test_support::Replay::<kinformer_core::DynamicObject>::new(Vec::new(), "1");
    /// assert_eq!(source.lists(), 0);
    /// ```
    pub fn lists(&self) -> usize {
        self.inner.lists.load(Ordering::SeqCst)
    }

    /// How many events the watch has handed out so far.
    ///
    /// ```
    /// let source = kinformer_test_support::Replay::<kinformer_core::DynamicObject>::new(Vec::new(), "1");
    /// assert_eq!(source.pulled(), 0);
    /// ```
    pub fn pulled(&self) -> usize {
        self.inner.pulled.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl<K: Send + Sync + 'static> ListWatch<K> for Replay<K> {
    async fn list(&self, _: &ListParams) -> Result<ObjectList<K>, list_watch::Error> {
        self.inner.lists.fetch_add(1, Ordering::SeqCst);
        Ok(ObjectList::new(
            self.inner.list.clone(),
            self.inner.resource_version.clone(),
        ))
    }

    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<K>, list_watch::Error> {
        if params.send_initial_events {
            return Err(list_watch::Error::new(
                ErrorKind::Fatal,
                "sendInitialEvents: Forbidden: this replaying source serves no streaming list",
            ));
        }
        let events = self
            .inner
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        Ok(Box::pin(Replaying {
            events,
            source: Arc::clone(&self.inner),
        }))
    }
}

/// A watch that yields its events as they are read, then stays open.
struct Replaying<K> {
    events: Option<Events<K>>,
    source: Arc<Inner<K>>,
}

// Unpin for any K: both fields are pointers.
impl<K> Unpin for Replaying<K> {}

impl<K> futures_core::Stream for Replaying<K> {
    type Item = Result<WatchEvent<K>, list_watch::Error>;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.events.as_mut().and_then(Iterator::next) {
            Some(event) => {
                self.source.pulled.fetch_add(1, Ordering::SeqCst);
                Poll::Ready(Some(Ok(event)))
            }
            None => {
                // Open and quiet from now on: nothing will ever wake this watch.
                self.events = None;
                Poll::Pending
            }
        }
    }
}
