//! Where the reflector meets its source of objects: the [`ListWatch`] trait, its boxed form, a
//! neutral [`Error`] that says what the caller should do, and the [`Pager`] that walks every page
//! of a list.
//!
//! The HTTP implementation lives in `kinformer-client`; anything else (recorded fixtures, a replay
//! from disk, an adapter over another Kubernetes library) implements [`ListWatch`] with this crate
//! alone, and pulls in no HTTP stack.
//!
//! ```
//! use std::sync::Arc;
//! use async_trait::async_trait;
//! use kinformer_core::list_watch::{self, BoxListWatch, ListWatch, WatchStream};
//! use kinformer_core::{DynamicObject, ListParams, ObjectList, WatchParams};
//!
//! /// Serves a fixed snapshot and a watch that ends at once.
//! struct Fixture(Vec<Arc<DynamicObject>>);
//!
//! #[async_trait]
//! impl ListWatch<DynamicObject> for Fixture {
//!     async fn list(&self, _: &ListParams) -> Result<ObjectList<DynamicObject>, list_watch::Error> {
//!         Ok(ObjectList::new(self.0.clone(), "1".into()))
//!     }
//!     async fn watch(&self, _: &WatchParams) -> Result<WatchStream<DynamicObject>, list_watch::Error> {
//!         Ok(list_watch::empty_stream())
//!     }
//! }
//!
//! let lw = BoxListWatch::new(Fixture(vec![Arc::new(DynamicObject::default())]));
//! let all = futures_executor_free_block_on(list_watch::list_all(&lw, &ListParams::default(), 500));
//! assert_eq!(all.unwrap().items.len(), 1);
//! # // A tiny executor: the future above completes without waiting on anything.
//! # fn futures_executor_free_block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     let mut f = std::pin::pin!(f);
//! #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
//! #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
//! # }
//! ```

use std::collections::HashSet;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_core::Stream;

use crate::{ListParams, ObjectList, ResourceVersion, WatchEvent, WatchParams};

/// The default page size of [`list_all`] and [`Pager`], as client-go's pager uses.
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// The most pages a [`Pager`] fetches for one list unless told otherwise: 100,000 pages of 500
/// is 50 million objects, far past any real cluster, yet it bounds a server that never stops.
pub const DEFAULT_MAX_PAGES: usize = 100_000;

/// A boxed error from an implementation, kept as the source of an [`Error`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A stream of watch events, as [`ListWatch::watch`] returns it. It ends cleanly when the server
/// closes the watch, or with one error.
pub type WatchStream<K> = Pin<Box<dyn Stream<Item = Result<WatchEvent<K>, Error>> + Send>>;

/// A watch stream that ends at once: handy for fixtures.
pub fn empty_stream<K: 'static>() -> WatchStream<K> {
    Box::pin(Empty(std::marker::PhantomData))
}

struct Empty<K>(std::marker::PhantomData<fn() -> K>);

impl<K> Stream for Empty<K> {
    type Item = Result<WatchEvent<K>, Error>;
    fn poll_next(
        self: Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Ready(None)
    }
}

/// What the caller of a [`ListWatch`] should do about an [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The requested resourceVersion or continue token is gone (410 Gone, `Expired`), or the
    /// server cannot serve it: list again.
    Relist,
    /// A watch stream broke (a cut connection, an idle stream): watch again from the last
    /// resourceVersion seen, with no list.
    Resume,
    /// A passing failure (429, 5xx, a refused connection, a timeout): try the same request again
    /// after [`Error::retry_after`] if given, else after a backoff.
    Retry,
    /// Retrying the same request cannot help (a bad request, a failing credential plugin, 401
    /// after a refresh, 403, 404, an answer that cannot be decoded): give up, or wait for a
    /// person to fix something.
    Fatal,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Relist => "relist",
            Self::Resume => "resume",
            Self::Retry => "retry",
            Self::Fatal => "fatal",
        })
    }
}

/// The error of a [`ListWatch`]: a [`kind`](Self::kind) the caller acts on, an optional delay the
/// server asked for, and the implementation's own error as the source (downcast it with
/// [`get_ref`](Self::get_ref) for the details). Shaped like `std::io::Error`.
///
/// ```
/// use std::time::Duration;
/// use kinformer_core::list_watch::{Error, ErrorKind};
///
/// let e = Error::new(ErrorKind::Retry, "server error 503").with_retry_after(Some(Duration::from_secs(2)));
/// assert_eq!(e.kind(), ErrorKind::Retry);
/// assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
/// assert_eq!(e.to_string(), "server error 503");
/// ```
pub struct Error {
    kind: ErrorKind,
    retry_after: Option<Duration>,
    source: BoxError,
}

impl Error {
    /// An error of this kind, caused by `source` (any error, or a message).
    pub fn new(kind: ErrorKind, source: impl Into<BoxError>) -> Self {
        Self {
            kind,
            retry_after: None,
            source: source.into(),
        }
    }

    /// The same error, with the delay the server asked for (a `Retry-After`).
    #[must_use]
    pub fn with_retry_after(mut self, retry_after: Option<Duration>) -> Self {
        self.retry_after = retry_after;
        self
    }

    /// What the caller should do.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// How long the server asked the caller to wait before retrying, if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// The implementation's error.
    pub fn get_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.source
    }

    /// The implementation's error, by value.
    pub fn into_inner(self) -> BoxError {
        self.source
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind)
            .field("retry_after", &self.retry_after)
            .field("source", &self.source)
            .finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.source, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.source()
    }
}

/// Why a [`Pager`] stopped a list that the server kept going: the source of an [`Error`] of kind
/// [`ErrorKind::Retry`] (the next list may be served by a healthier server).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PagerError {
    /// The server handed out a continue token it had handed out before in this list: following
    /// it would loop forever.
    #[error("the server repeated continue token {token:?} after {pages} pages")]
    RepeatedContinueToken {
        /// The token, cut to 64 characters.
        token: String,
        /// Pages fetched so far.
        pages: usize,
    },
    /// The list went past the pager's page limit ([`Pager::max_pages`]).
    #[error("the list went past {max_pages} pages")]
    TooManyPages {
        /// The limit.
        max_pages: usize,
    },
}

/// Lists and watches one kind of object: all the reflector needs from the API server.
///
/// Dyn-compatible, so that a run-time choice (the HTTP client, a recorded fixture, an adapter
/// over another library) can hide behind a [`BoxListWatch`]. Implementations are `Send + Sync`
/// and their futures are `Send`. See the [module documentation](self) for an example.
#[async_trait]
pub trait ListWatch<K>: Send + Sync {
    /// Lists one page (`limit`/`continue` in `params` select it).
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, Error>;

    /// Opens a watch. The stream ends cleanly when the server closes it, or with one error.
    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<K>, Error>;
}

macro_rules! forward_list_watch {
    ($($ptr:ty),*) => {$(
        #[async_trait]
        impl<K, T: ListWatch<K> + ?Sized> ListWatch<K> for $ptr {
            async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, Error> {
                (**self).list(params).await
            }
            async fn watch(&self, params: &WatchParams) -> Result<WatchStream<K>, Error> {
                (**self).watch(params).await
            }
        }
    )*};
}

forward_list_watch!(&T, Arc<T>, Box<T>);

/// Any [`ListWatch`] behind one type, chosen at run time. Cheap to clone.
pub struct BoxListWatch<K>(Arc<dyn ListWatch<K>>);

impl<K> BoxListWatch<K> {
    /// Boxes an implementation.
    pub fn new(inner: impl ListWatch<K> + 'static) -> Self {
        Self(Arc::new(inner))
    }
}

impl<K> Clone for BoxListWatch<K> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<K> fmt::Debug for BoxListWatch<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BoxListWatch")
    }
}

#[async_trait]
impl<K> ListWatch<K> for BoxListWatch<K> {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, Error> {
        self.0.list(params).await
    }
    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<K>, Error> {
        self.0.watch(params).await
    }
}

/// One page from a [`Pager`].
pub struct Page<K> {
    /// The page.
    pub list: ObjectList<K>,
    /// `true` when the continue token expired and this page is a fresh, unpaged list of
    /// everything: the caller must drop the pages it got before this one.
    pub restarted: bool,
}

impl<K> fmt::Debug for Page<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Page")
            .field("list", &self.list)
            .field("restarted", &self.restarted)
            .finish()
    }
}

/// Walks the pages of a list with `limit`/`continue`, as client-go's pager does: when a continue
/// token has expired (an error of kind [`ErrorKind::Relist`]), it falls back to one unpaged list
/// with the original options (and so at the original resourceVersion).
///
/// Page by page, a caller can apply a large list without holding it twice. A server that
/// repeats a continue token, or goes past [`max_pages`](Self::max_pages), ends the list with an
/// error of kind [`ErrorKind::Retry`] whose source is a [`PagerError`].
pub struct Pager<'a, K> {
    source: &'a (dyn ListWatch<K> + 'a),
    params: ListParams,
    page_size: u32,
    max_pages: usize,
    pages: usize,
    continue_token: Option<String>,
    seen_tokens: HashSet<String>,
    done: bool,
}

impl<K> fmt::Debug for Pager<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pager")
            .field("params", &self.params)
            .field("page_size", &self.page_size)
            .field("max_pages", &self.max_pages)
            .field("pages", &self.pages)
            .field("continue_token", &self.continue_token.is_some())
            .field("done", &self.done)
            .finish()
    }
}

impl<'a, K> Pager<'a, K> {
    /// A pager over `source` with these options; `page_size` 0 lists in one request. A `limit`
    /// already in `params` wins over `page_size`.
    pub fn new(source: &'a (dyn ListWatch<K> + 'a), params: &ListParams, page_size: u32) -> Self {
        Self {
            source,
            params: params.clone(),
            page_size,
            max_pages: DEFAULT_MAX_PAGES,
            pages: 0,
            continue_token: None,
            seen_tokens: HashSet::new(),
            done: false,
        }
    }

    /// The most pages this list may take ([`DEFAULT_MAX_PAGES`] by default; at least 1).
    #[must_use]
    pub fn max_pages(mut self, max_pages: usize) -> Self {
        self.max_pages = max_pages.max(1);
        self
    }

    fn fail(&mut self, e: PagerError) -> Error {
        self.done = true;
        tracing::warn!(error = %e, "list stopped");
        Error::new(ErrorKind::Retry, e)
    }

    /// The next page, `None` after the last.
    pub async fn next_page(&mut self) -> Result<Option<Page<K>>, Error> {
        if self.done {
            return Ok(None);
        }
        if self.pages >= self.max_pages {
            return Err(self.fail(PagerError::TooManyPages {
                max_pages: self.max_pages,
            }));
        }
        let mut params = self.params.clone();
        if params.limit.is_none() && self.page_size > 0 {
            params.limit = Some(self.page_size);
        }
        if let Some(token) = &self.continue_token {
            // A continue token carries the snapshot's version itself.
            params.continue_token = Some(token.clone());
            params.resource_version = None;
            params.resource_version_match = None;
        }
        self.pages += 1;
        let (list, restarted) = match self.source.list(&params).await {
            Ok(list) => (list, false),
            Err(e) if e.kind() == ErrorKind::Relist && self.continue_token.is_some() => {
                tracing::debug!("continue token expired: listing everything in one request");
                let mut full = self.params.clone();
                full.limit = None;
                full.continue_token = None;
                self.done = true;
                let list = self.source.list(&full).await?;
                (list, true)
            }
            Err(e) => {
                self.done = true;
                return Err(e);
            }
        };
        if restarted {
            return Ok(Some(Page {
                list,
                restarted: true,
            }));
        }
        match &list.continue_token {
            None => self.done = true,
            Some(token) if token.is_empty() => self.done = true,
            Some(token) => {
                if !self.seen_tokens.insert(token.clone()) {
                    let token: String = token.chars().take(64).collect();
                    let pages = self.pages;
                    return Err(self.fail(PagerError::RepeatedContinueToken { token, pages }));
                }
            }
        }
        self.continue_token = list.continue_token.clone().filter(|t| !t.is_empty());
        Ok(Some(Page { list, restarted }))
    }
}

/// Lists every page (`page_size` objects at a time, [`DEFAULT_PAGE_SIZE`] is client-go's) and
/// returns all the objects with the snapshot's resourceVersion: the first page's, which the
/// continue token pins (as client-go keeps it), or the fallback list's. Falls back to one
/// unpaged list when a continue token expires, as [`Pager`] does.
pub async fn list_all<K>(
    source: &(dyn ListWatch<K> + '_),
    params: &ListParams,
    page_size: u32,
) -> Result<ObjectList<K>, Error> {
    let mut pager = Pager::new(source, params, page_size);
    let mut items = Vec::new();
    let mut resource_version: Option<ResourceVersion> = None;
    while let Some(page) = pager.next_page().await? {
        if page.restarted {
            items.clear();
            resource_version = None;
        }
        if items.is_empty() {
            items = page.list.items;
        } else {
            items.extend(page.list.items);
        }
        resource_version.get_or_insert(page.list.resource_version);
    }
    Ok(ObjectList::new(
        items,
        resource_version.unwrap_or_else(|| ResourceVersion::from("")),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DynamicObject;
    use std::sync::Mutex;
    use std::task::{Context, Poll, Waker};

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }

    /// Serves `n` objects in pages; the continue token expires after `expire_after` pages; each
    /// page reports resourceVersion `42 + page`; `repeat_token` makes every page hand out `"x"`.
    struct Paged {
        n: usize,
        expire_after: Option<usize>,
        repeat_token: bool,
        endless: bool,
        calls: Mutex<Vec<ListParams>>,
    }

    impl Paged {
        fn new(n: usize) -> Self {
            Self {
                n,
                expire_after: None,
                repeat_token: false,
                endless: false,
                calls: Mutex::new(Vec::new()),
            }
        }
    }

    fn obj(i: usize) -> Arc<DynamicObject> {
        let mut o = DynamicObject::default();
        o.metadata.name = Some(format!("o{i}"));
        Arc::new(o)
    }

    #[async_trait]
    impl ListWatch<DynamicObject> for Paged {
        async fn list(&self, p: &ListParams) -> Result<ObjectList<DynamicObject>, Error> {
            let pages_served = {
                let mut calls = self.calls.lock().unwrap();
                calls.push(p.clone());
                calls.len() - 1
            };
            if p.continue_token.is_some() && self.expire_after.is_some_and(|e| pages_served >= e) {
                return Err(Error::new(ErrorKind::Relist, "continue token expired"));
            }
            if self.repeat_token {
                return Ok(ObjectList {
                    continue_token: Some("x".into()),
                    ..ObjectList::new(vec![obj(0)], "1".into())
                });
            }
            let start: usize = p
                .continue_token
                .as_deref()
                .map_or(0, |t| t.parse().unwrap());
            let end = p.limit.map_or(self.n, |l| (start + l as usize).min(self.n));
            let next = if self.endless {
                start + p.limit.unwrap_or(1) as usize
            } else {
                end
            };
            Ok(ObjectList {
                continue_token: (next < self.n || self.endless).then(|| next.to_string()),
                ..ObjectList::new(
                    (start..end).map(obj).collect(),
                    (42 + pages_served).to_string().into(),
                )
            })
        }
        async fn watch(&self, _: &WatchParams) -> Result<WatchStream<DynamicObject>, Error> {
            Ok(empty_stream())
        }
    }

    #[test]
    fn walks_every_page_and_keeps_the_first_pages_version() {
        let src = Paged::new(1201);
        let params = ListParams {
            resource_version: Some("0".into()),
            ..ListParams::default()
        };
        let all = block_on(list_all(&src, &params, DEFAULT_PAGE_SIZE)).unwrap();
        assert_eq!(all.items.len(), 1201);
        assert_eq!(all.items[1200].metadata.name.as_deref(), Some("o1200"));
        assert_eq!(
            all.resource_version.as_str(),
            "42",
            "the snapshot's version is the first page's"
        );
        let calls = src.calls.lock().unwrap();
        assert_eq!(calls.len(), 3);
        assert_eq!(calls[0].resource_version.as_deref(), Some("0"));
        assert_eq!(
            calls[1].resource_version, None,
            "continue requests carry no resourceVersion"
        );
        assert_eq!(calls[1].continue_token.as_deref(), Some("500"));
    }

    #[test]
    fn expired_continue_falls_back_to_one_unpaged_list() {
        let src = Paged {
            expire_after: Some(1),
            ..Paged::new(30)
        };
        let params = ListParams {
            resource_version: Some("7".into()),
            label_selector: Some("a=b".into()),
            ..ListParams::default()
        };
        let mut pager = Pager::new(&src, &params, 10);
        let first = block_on(pager.next_page()).unwrap().unwrap();
        assert_eq!((first.list.items.len(), first.restarted), (10, false));
        let second = block_on(pager.next_page()).unwrap().unwrap();
        assert_eq!((second.list.items.len(), second.restarted), (30, true));
        assert!(block_on(pager.next_page()).unwrap().is_none());
        let fallback = src.calls.lock().unwrap().last().cloned().unwrap();
        assert_eq!(fallback.limit, None);
        assert_eq!(fallback.continue_token, None);
        assert_eq!(fallback.resource_version.as_deref(), Some("7"));
        assert_eq!(fallback.label_selector.as_deref(), Some("a=b"));

        let src = Paged {
            expire_after: Some(2),
            ..Paged::new(30)
        };
        let all = block_on(list_all(&src, &params, 10)).unwrap();
        assert_eq!(all.items.len(), 30, "pages before the fallback are dropped");
        assert_eq!(
            all.resource_version.as_str(),
            "45",
            "the fallback's version"
        );
    }

    #[test]
    fn a_repeated_continue_token_stops_the_list() {
        let src = Paged {
            repeat_token: true,
            ..Paged::new(1)
        };
        let err = block_on(list_all(&src, &ListParams::default(), 10)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Retry);
        let source = err.get_ref().downcast_ref::<PagerError>().unwrap();
        assert_eq!(
            source,
            &PagerError::RepeatedContinueToken {
                token: "x".into(),
                pages: 2
            }
        );
        assert_eq!(
            src.calls.lock().unwrap().len(),
            2,
            "no request after the repeat"
        );
    }

    #[test]
    fn an_endless_list_stops_at_the_page_limit() {
        let src = Paged {
            endless: true,
            ..Paged::new(5)
        };
        let mut pager = Pager::new(&src, &ListParams::default(), 1).max_pages(20);
        let mut pages = 0;
        let err = loop {
            match block_on(pager.next_page()) {
                Ok(Some(_)) => pages += 1,
                Ok(None) => panic!("an endless list never ends by itself"),
                Err(e) => break e,
            }
        };
        assert_eq!(pages, 20);
        assert_eq!(err.kind(), ErrorKind::Retry);
        assert!(err.to_string().contains("20 pages"), "{err}");
        assert!(block_on(pager.next_page()).unwrap().is_none());
    }

    #[test]
    fn errors_keep_their_source_and_kind() {
        let e = Error::new(ErrorKind::Fatal, PagerError::TooManyPages { max_pages: 3 });
        assert!(e.get_ref().is::<PagerError>());
        assert_eq!(e.kind().to_string(), "fatal");
        assert!(format!("{e:?}").contains("Fatal"));
        let inner = e.into_inner();
        assert_eq!(inner.to_string(), "the list went past 3 pages");
    }

    #[test]
    fn public_types_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<BoxListWatch<DynamicObject>>();
        check::<Pager<'static, DynamicObject>>();
        check::<Error>();
        fn send<T: Send>(_: &T) {}
        let src = Paged::new(1);
        send(&list_all(&src, &ListParams::default(), 1));
        let mut pager = Pager::new(&src, &ListParams::default(), 1);
        send(&pager.next_page());
        let boxed = BoxListWatch::new(Paged::new(1));
        send(&boxed.watch(&WatchParams::default()));
        let _: &dyn ListWatch<DynamicObject> = &boxed;
    }
}
