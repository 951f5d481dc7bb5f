//! The list-then-watch loop.

use std::fmt;
use std::future::{Future, poll_fn};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::StreamExt as _;
use kinformer_core::list_watch::{self, ErrorKind, Pager};
use kinformer_core::{
    ListParams, ListWatch, Object, ProgressTracker, ReflectorStore, ResourceVersion,
    ResourceVersionMatch, StoreError, StoreEvent, WatchEvent, WatchParams, WatchStream,
};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::config::{Config, InitialList, Phase, StreamingList, WatchErrorInfo};
use crate::metrics::{Metrics, RelistCause};
use crate::{Error, Result};

/// Lists a resource, then watches it from the list's resourceVersion, and writes everything it
/// sees into a [`ReflectorStore`], for as long as it runs: client-go's `Reflector`.
///
/// [`run`](Self::run) never gives up on the server: every failure is logged (once per episode),
/// handed to the [`WatchErrorHandler`](crate::WatchErrorHandler), and retried, with a watch
/// again when that is enough and a list when it is not. It returns when stopped through a
/// [`ReflectorHandle`], or with [`Error::StoreClosed`] when the store behind it is closed.
/// Dropping the future returned by `run` is a clean stop as well: a relist in progress is
/// abandoned, so the store is left as it was before the relist began.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::Arc;
/// use kinformer_core::CacheRead;
/// use kinformer_indexer::Indexer;
/// use kinformer_reflector::{Config, Reflector};
/// use kinformer_test_support::{ScriptedListWatch, typed_pods};
///
/// // Any ListWatch will do: an HTTP client's Api, or this in-memory one.
/// let list_watch = ScriptedListWatch::new(typed_pods(3), "7");
/// let cache = Arc::new(Indexer::new());
/// let reflector = Reflector::new(list_watch, Arc::clone(&cache), Config::default());
/// let handle = reflector.handle();
/// let run = tokio::spawn(async move { reflector.run().await });
/// while handle.last_sync_resource_version().is_none() {
///     tokio::task::yield_now().await;
/// }
/// assert_eq!(cache.list_keys().len(), 3);
/// handle.stop();
/// run.await.unwrap().unwrap();
/// # }
/// ```
pub struct Reflector<K, L, S> {
    list_watch: L,
    store: S,
    config: Config,
    shared: Arc<Shared>,
    _objects: PhantomData<fn() -> K>,
}

struct Shared {
    last_sync: Mutex<Option<ResourceVersion>>,
    stop: watch::Sender<bool>,
}

impl<K, L, S> fmt::Debug for Reflector<K, L, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reflector")
            .field("config", &self.config)
            .field(
                "last_sync",
                &self.shared.last_sync.lock().ok().and_then(|g| g.clone()),
            )
            .finish_non_exhaustive()
    }
}

/// A handle on a running [`Reflector`]: its progress, and a way to stop it. Cheap to clone.
#[derive(Clone)]
pub struct ReflectorHandle {
    shared: Arc<Shared>,
}

impl fmt::Debug for ReflectorHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReflectorHandle")
            .field("last_sync", &self.last_sync_resource_version())
            .field("stopped", &self.is_stopped())
            .finish()
    }
}

impl ReflectorHandle {
    /// The resourceVersion the store has caught up to: the last list's, event's or bookmark's
    /// (client-go's `LastSyncResourceVersion`). `None` until the first list is complete.
    pub fn last_sync_resource_version(&self) -> Option<ResourceVersion> {
        self.shared
            .last_sync
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Asks the reflector to stop. [`Reflector::run`] returns `Ok(())` once the request or
    /// stream in flight is dropped and a relist in progress is abandoned. Idempotent.
    pub fn stop(&self) {
        self.shared.stop.send_replace(true);
    }

    /// `true` once [`stop`](Self::stop) was called.
    pub fn is_stopped(&self) -> bool {
        *self.shared.stop.borrow()
    }
}

impl<K, L, S> Reflector<K, L, S>
where
    K: Object + Send + Sync + 'static,
    L: ListWatch<K>,
    S: ReflectorStore<K>,
{
    /// A reflector that lists and watches through `list_watch` into `store`.
    pub fn new(list_watch: L, store: S, config: Config) -> Self {
        Self {
            list_watch,
            store,
            config,
            shared: Arc::new(Shared {
                last_sync: Mutex::new(None),
                stop: watch::channel(false).0,
            }),
            _objects: PhantomData,
        }
    }

    /// A handle to watch its progress and stop it.
    pub fn handle(&self) -> ReflectorHandle {
        ReflectorHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The store it writes into.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Lists and watches until stopped. Returns `Ok(())` when stopped through a
    /// [`ReflectorHandle`] and [`Error::StoreClosed`] when the store is closed; every other
    /// failure is retried. Cancellation-safe: dropping the future stops the reflector cleanly.
    pub async fn run(&self) -> Result<()> {
        let span = tracing::info_span!(
            "reflector",
            name = %self.config.name,
            resource_version = tracing::field::Empty
        );
        let run = async move { Runner::new(self).run().await };
        tracing::Instrument::instrument(run, span).await
    }
}

/// Why a step of the loop did not complete.
enum Interrupt {
    /// Asked to stop.
    Stopped,
    /// The store is closed.
    StoreClosed,
    /// A failure to report and retry.
    Failed(list_watch::Error),
}

type Flow<T> = std::result::Result<T, Interrupt>;

fn store_failure(e: StoreError) -> Interrupt {
    match Error::from(e) {
        Error::StoreClosed => Interrupt::StoreClosed,
        other => Interrupt::Failed(other.into_list_watch()),
    }
}

/// Drops a relist that did not finish, whatever the reason (an error, a stop, a dropped future).
struct RelistGuard<'a, K: Object, S: ReflectorStore<K>> {
    store: &'a S,
    open: bool,
    _objects: PhantomData<fn() -> K>,
}

impl<'a, K: Object, S: ReflectorStore<K>> RelistGuard<'a, K, S> {
    fn new(store: &'a S) -> Self {
        Self {
            store,
            open: false,
            _objects: PhantomData,
        }
    }

    fn begin(&mut self) -> Flow<()> {
        self.open = true;
        self.store
            .apply(StoreEvent::RelistBegin)
            .map_err(store_failure)
    }

    fn page(&mut self, objects: Vec<Arc<K>>) -> Flow<()> {
        self.store
            .apply(StoreEvent::RelistPage(objects))
            .map_err(store_failure)
    }

    fn end(mut self, resource_version: ResourceVersion) -> Flow<()> {
        self.open = false;
        if let Err(e) = self.store.apply(StoreEvent::RelistEnd(resource_version)) {
            abandon(self.store);
            return Err(store_failure(e));
        }
        Ok(())
    }
}

/// Tells the store a relist will not end; a store that refuses (a closed one) has nothing of it
/// left to forget.
fn abandon<K: Object, S: ReflectorStore<K>>(store: &S) {
    let _ = store.apply(StoreEvent::RelistAbandoned);
}

impl<K: Object, S: ReflectorStore<K>> Drop for RelistGuard<'_, K, S> {
    fn drop(&mut self) {
        if self.open {
            tracing::debug!("relist abandoned");
            abandon(self.store);
        }
    }
}

/// The state of one [`Reflector::run`].
struct Runner<'a, K, L, S> {
    list_watch: &'a L,
    store: &'a S,
    config: &'a Config,
    shared: &'a Shared,
    stop: watch::Receiver<bool>,
    rng: fastrand::Rng,
    backoff: Backoff,
    metrics: Metrics,
    /// The version the store has caught up to; empty before the first list.
    last_sync: String,
    /// The last synced version cannot be listed at (410, or too new): list the latest instead.
    last_sync_unavailable: bool,
    /// The first list at "0" came in pages, so the server pages lists: relists stay paged.
    paginated: bool,
    /// Streaming lists are worth trying (false once an `Auto` reflector saw them refused).
    streaming: bool,
    /// The kind of the failure being retried, so that an episode is logged once.
    episode: Option<(Phase, ErrorKind)>,
    next_resync: Option<Instant>,
    /// Why the next sync lists again (the failure that ended the last watch or list).
    relist_cause: RelistCause,
    _objects: PhantomData<fn() -> K>,
}

impl<'a, K, L, S> Runner<'a, K, L, S>
where
    K: Object + Send + Sync + 'static,
    L: ListWatch<K>,
    S: ReflectorStore<K>,
{
    fn new(reflector: &'a Reflector<K, L, S>) -> Self {
        let config = &reflector.config;
        let seed = config.seed.unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
        Self {
            list_watch: &reflector.list_watch,
            store: &reflector.store,
            config,
            shared: &reflector.shared,
            stop: reflector.shared.stop.subscribe(),
            rng: fastrand::Rng::with_seed(seed),
            backoff: Backoff::new(config.backoff),
            metrics: Metrics::new(&config.name, &config.resource),
            last_sync: String::new(),
            last_sync_unavailable: false,
            paginated: false,
            streaming: config.streaming_list != StreamingList::Off,
            episode: None,
            next_resync: None,
            relist_cause: RelistCause::Error,
            _objects: PhantomData,
        }
    }

    async fn run(&mut self) -> Result<()> {
        loop {
            let live = match self.sync().await {
                Ok(live) => live,
                Err(Interrupt::Stopped) => return Ok(()),
                Err(Interrupt::StoreClosed) => return Err(Error::StoreClosed),
                Err(Interrupt::Failed(e)) => {
                    self.report(Phase::List, &e, true);
                    match self.wait_before_retry(&e).await {
                        Ok(()) => continue,
                        Err(_) => return Ok(()),
                    }
                }
            };
            match self.watch(live).await {
                Interrupt::Stopped => return Ok(()),
                Interrupt::StoreClosed => return Err(Error::StoreClosed),
                Interrupt::Failed(e) => {
                    self.report(Phase::Watch, &e, true);
                    if self.wait_before_retry(&e).await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }

    // ---- waiting -------------------------------------------------------------------------

    /// Runs `f` unless asked to stop first; a stop drops `f` (and so the request in flight).
    async fn until_stopped<F: Future>(&mut self, f: F) -> Flow<F::Output> {
        if *self.stop.borrow() {
            return Err(Interrupt::Stopped);
        }
        tokio::select! {
            biased;
            _ = self.stop.wait_for(|stopped| *stopped) => Err(Interrupt::Stopped),
            out = f => Ok(out),
        }
    }

    /// Waits until the store takes another write (backpressure from a bounded store).
    async fn store_ready(&mut self) -> Flow<()> {
        let store = self.store;
        self.until_stopped(poll_fn(|cx| store.poll_ready(cx)))
            .await?
            .map_err(store_failure)
    }

    /// Waits before a retry: what the server asked for, or the next backoff step.
    async fn wait_before_retry(&mut self, e: &list_watch::Error) -> Flow<()> {
        let delay = match e.retry_after() {
            Some(d) => d,
            None => self.backoff.next_delay(Instant::now(), &mut self.rng),
        };
        self.metrics
            .backoff_ms
            .increment(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX));
        tracing::debug!(?delay, "waiting before retrying");
        self.until_stopped(tokio::time::sleep(delay)).await
    }

    // ---- reporting -----------------------------------------------------------------------

    fn report(&mut self, phase: Phase, error: &list_watch::Error, will_relist: bool) {
        self.metrics.error(error.kind());
        if will_relist {
            self.relist_cause = RelistCause::of(error);
        }
        let episode = (phase, error.kind());
        if self.episode == Some(episode) {
            tracing::debug!(?phase, kind = %error.kind(), will_relist, %error, "still failing");
        } else {
            self.episode = Some(episode);
            tracing::warn!(?phase, kind = %error.kind(), will_relist, %error, "list/watch failed; retrying");
        }
        if let Some(handler) = &self.config.on_watch_error {
            handler(&WatchErrorInfo {
                error,
                phase,
                will_relist,
            });
        }
    }

    /// Progress in `phase` ends an episode of failures in that phase; progress of the watch
    /// (an event, a bookmark) ends any episode. A list that succeeds does not end an episode of
    /// failing watches (a credential allowed to list but not to watch fails on every cycle).
    fn healthy(&mut self, phase: Phase) {
        match self.episode {
            Some((failing, kind)) if failing == phase || phase == Phase::Watch => {
                self.episode = None;
                tracing::info!(phase = ?failing, %kind, "list/watch recovered");
            }
            _ => {}
        }
    }

    fn synced_to(&mut self, resource_version: &str) {
        if resource_version.is_empty() || resource_version == self.last_sync {
            return;
        }
        self.last_sync.clear();
        self.last_sync.push_str(resource_version);
        *self
            .shared
            .last_sync
            .lock()
            .unwrap_or_else(PoisonError::into_inner) =
            Some(ResourceVersion::from(resource_version));
    }

    // ---- listing -------------------------------------------------------------------------

    /// Brings the store up to date with a list (or a streaming list, whose stream then goes on
    /// as the live watch and is returned).
    async fn sync(&mut self) -> Flow<Option<WatchStream<K>>> {
        // Once the store has held a list, every sync is a relist (one per sync, whatever
        // fallbacks it takes), for the failure that ended the last watch or list.
        if !self.last_sync.is_empty() {
            self.metrics.relist(self.relist_cause);
        }
        self.relist_cause = RelistCause::Error;
        if self.streaming {
            let streamed = self.streaming_list().await;
            match &streamed {
                Ok(_) => self.metrics.list(true),
                Err(
                    StreamingFailure::Refused(_)
                    | StreamingFailure::Interrupted(Interrupt::Failed(_)),
                ) => self.metrics.list(false),
                Err(StreamingFailure::Interrupted(_)) => {}
            }
            match streamed {
                Ok(stream) => return Ok(Some(stream)),
                Err(StreamingFailure::Refused(e)) => {
                    if e.kind() == ErrorKind::Relist {
                        self.last_sync_unavailable = true;
                    }
                    if self.config.streaming_list == StreamingList::Auto
                        && e.kind() == ErrorKind::Fatal
                    {
                        tracing::info!(error = %e, "the server refused a streaming list; listing from now on");
                        self.streaming = false;
                    }
                    self.report(Phase::List, &e, true);
                }
                // As client-go: a streaming list that fails after it started (cut before its
                // end bookmark, a 410, an error event) falls back to a list for this cycle,
                // "because making progress is better than deadlocking"; the next relist
                // streams again.
                Err(StreamingFailure::Interrupted(Interrupt::Failed(e))) => {
                    self.report(Phase::List, &e, true);
                }
                Err(StreamingFailure::Interrupted(i)) => return Err(i),
            }
        }
        self.list().await?;
        Ok(None)
    }

    /// The version to list at: client-go's `relistResourceVersion`.
    fn relist_resource_version(&self) -> String {
        if self.last_sync_unavailable {
            String::new()
        } else if self.last_sync.is_empty() {
            match self.config.initial_list {
                InitialList::Consistent => String::new(),
                _ => "0".to_owned(),
            }
        } else {
            self.last_sync.clone()
        }
    }

    async fn list(&mut self) -> Flow<()> {
        let resource_version = self.relist_resource_version();
        let listed = self.list_at(&resource_version).await;
        self.count_list(&listed);
        match listed {
            Err(Interrupt::Failed(e))
                if e.kind() == ErrorKind::Relist && !resource_version.is_empty() =>
            {
                // The version is compacted away, or newer than the server has: list the
                // latest at once, as client-go does, rather than waiting on a backoff.
                tracing::info!(%resource_version, error = %e, "cannot list at the last synced version; listing the latest");
                self.last_sync_unavailable = true;
                let listed = self.list_at("").await;
                self.count_list(&listed);
                listed
            }
            other => other,
        }
    }

    /// Counts a list that ended (one stopped on request, or by a closed store, is not counted).
    fn count_list(&self, listed: &Flow<()>) {
        match listed {
            Ok(()) => self.metrics.list(true),
            Err(Interrupt::Failed(_)) => self.metrics.list(false),
            Err(_) => {}
        }
    }

    async fn list_at(&mut self, resource_version: &str) -> Flow<()> {
        // As client-go: a list at a specific version is served by the watch cache only without
        // a limit, so it goes unpaged unless the server has shown it pages lists at "0".
        let paged = resource_version.is_empty() || resource_version == "0" || self.paginated;
        let page_size = if paged { self.config.page_size } else { 0 };
        let params = ListParams {
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
            resource_version: Some(resource_version.to_owned()).filter(|v| !v.is_empty()),
            ..ListParams::default()
        };
        tracing::debug!(%resource_version, page_size, "listing");

        let list_watch: &dyn ListWatch<K> = self.list_watch;
        let mut pager = Pager::new(list_watch, &params, page_size);
        let mut relist = RelistGuard::new(self.store);
        self.store_ready().await?;
        relist.begin()?;
        self.progress(ProgressTracker::begin);
        let mut version: Option<ResourceVersion> = None;
        let mut first_page = true;
        let mut server_paged = false;
        let mut objects = 0usize;
        while let Some(page) = self
            .until_stopped(pager.next_page())
            .await?
            .map_err(Interrupt::Failed)?
        {
            if page.restarted {
                // The continue token expired: the pager listed everything again in one go.
                self.metrics.relist(RelistCause::ExpiredContinue);
                self.store_ready().await?;
                relist.begin()?;
                self.progress(ProgressTracker::begin);
                version = None;
                objects = 0;
            }
            if first_page {
                server_paged = page
                    .list
                    .continue_token
                    .as_deref()
                    .is_some_and(|t| !t.is_empty());
                first_page = false;
            }
            version.get_or_insert(page.list.resource_version);
            objects += page.list.items.len();
            let (listed, remaining) = (
                page.list.items.len() as u64,
                page.list
                    .remaining_item_count
                    .and_then(|r| u64::try_from(r).ok()),
            );
            self.progress(|p| p.page(listed, None, remaining));
            self.store_ready().await?;
            relist.page(page.list.items)?;
        }
        let version = version.unwrap_or_else(|| ResourceVersion::from(""));
        relist.end(version.clone())?;
        self.progress(ProgressTracker::end);
        if resource_version == "0" && server_paged {
            self.paginated = true;
        }
        self.last_sync_unavailable = false;
        self.synced_to(version.as_str());
        self.healthy(Phase::List);
        tracing::debug!(objects, resource_version = %version, "list complete");
        Ok(())
    }

    /// A streaming list: one watch with `sendInitialEvents=true` whose `ADDED` events fill a
    /// relist until the bookmark that ends the initial events.
    async fn streaming_list(&mut self) -> std::result::Result<WatchStream<K>, StreamingFailure> {
        let resource_version = if self.last_sync_unavailable {
            String::new()
        } else {
            self.last_sync.clone()
        };
        let params = WatchParams {
            resource_version_match: Some(ResourceVersionMatch::NotOlderThan),
            send_initial_events: true,
            ..self.watch_params(&resource_version)
        };
        tracing::debug!(%resource_version, "streaming list");
        let list_watch = self.list_watch;
        let mut stream = match self.until_stopped(list_watch.watch(&params)).await? {
            Ok(stream) => stream,
            Err(e) => return Err(StreamingFailure::Refused(e)),
        };
        let mut relist = RelistGuard::new(self.store);
        self.store_ready().await?;
        relist.begin()?;
        self.progress(ProgressTracker::begin);
        let page_size = usize::try_from(self.config.page_size.max(1)).unwrap_or(usize::MAX);
        let mut page = Vec::new();
        let mut received = 0usize;
        loop {
            let item = self.until_stopped(stream.next()).await?;
            let event = match item {
                None => {
                    return Err(Interrupt::Failed(
                        Error::StreamingListIncomplete { received }.into_list_watch(),
                    )
                    .into());
                }
                Some(Err(e)) => {
                    if e.kind() == ErrorKind::Relist {
                        self.last_sync_unavailable = true;
                    }
                    let e = if e.kind() == ErrorKind::Resume {
                        Error::StreamingListIncomplete { received }.into_list_watch()
                    } else {
                        e
                    };
                    return Err(Interrupt::Failed(e).into());
                }
                Some(Ok(event)) => event,
            };
            match event {
                WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                    received += 1;
                    page.push(object);
                    if page.len() >= page_size {
                        self.store_ready().await?;
                        self.progress(|p| p.page(page.len() as u64, None, None));
                        relist.page(std::mem::take(&mut page))?;
                    }
                }
                WatchEvent::Deleted(_) => {
                    return Err(Interrupt::Failed(
                        Error::StreamingListProtocol { event: "DELETED" }.into_list_watch(),
                    )
                    .into());
                }
                WatchEvent::Bookmark(bookmark) if bookmark.is_initial_events_end() => {
                    if !page.is_empty() {
                        self.store_ready().await?;
                        self.progress(|p| p.page(page.len() as u64, None, None));
                        relist.page(std::mem::take(&mut page))?;
                    }
                    let version = bookmark.resource_version;
                    self.store_ready().await?;
                    relist.end(version.clone())?;
                    self.progress(ProgressTracker::end);
                    self.last_sync_unavailable = false;
                    self.synced_to(version.as_str());
                    self.healthy(Phase::List);
                    tracing::debug!(objects = received, resource_version = %version, "streaming list complete");
                    return Ok(stream);
                }
                WatchEvent::Bookmark(_) => {}
                WatchEvent::Error(status) => {
                    if status.is_gone() {
                        self.last_sync_unavailable = true;
                    }
                    return Err(
                        Interrupt::Failed(Error::WatchStatus(status).into_list_watch()).into(),
                    );
                }
            }
        }
    }

    /// Writes to the configured progress tracker, if any.
    fn progress(&self, f: impl FnOnce(&ProgressTracker)) {
        if let Some(p) = &self.config.progress {
            f(p);
        }
    }

    // ---- watching ------------------------------------------------------------------------

    fn watch_params(&mut self, resource_version: &str) -> WatchParams {
        let min = self.config.min_watch_timeout.as_secs().max(1);
        let timeout = self.rng.u64(min..2 * min);
        WatchParams {
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
            resource_version: Some(resource_version.to_owned()).filter(|v| !v.is_empty()),
            timeout_seconds: Some(u32::try_from(timeout).unwrap_or(u32::MAX)),
            allow_watch_bookmarks: true,
            ..WatchParams::default()
        }
    }

    /// Watches, and watches again, until something calls for a relist (returned) or a stop.
    async fn watch(&mut self, mut live: Option<WatchStream<K>>) -> Interrupt {
        if let Some(period) = self.config.resync_period {
            self.next_resync = Some(Instant::now() + period);
        }
        let mut first = true;
        loop {
            if !first {
                self.metrics.watch_restarts.increment(1);
            }
            first = false;
            let started = Instant::now();
            let (stream, delivered) = match live.take() {
                // The streaming list's watch goes on; it has delivered its initial events.
                Some(stream) => (stream, 1),
                None => {
                    let params = self.watch_params(&self.last_sync.clone());
                    // The span carries the version each watch starts from (events carry theirs).
                    tracing::Span::current().record("resource_version", self.last_sync.as_str());
                    tracing::debug!(resource_version = %self.last_sync, timeout = ?params.timeout_seconds, "watching");
                    let list_watch = self.list_watch;
                    match self.until_stopped(list_watch.watch(&params)).await {
                        Err(i) => return i,
                        Ok(Ok(stream)) => (stream, 0),
                        Ok(Err(e)) if matches!(e.kind(), ErrorKind::Retry | ErrorKind::Resume) => {
                            // 429, a refused connection, a 5xx: the version is still good, so
                            // watch again from it after a wait, with no list.
                            self.metrics.watch(false);
                            self.report(Phase::Watch, &e, false);
                            if let Err(i) = self.wait_before_retry(&e).await {
                                return i;
                            }
                            continue;
                        }
                        Ok(Err(e)) => {
                            self.metrics.watch(false);
                            return Interrupt::Failed(e);
                        }
                    }
                }
            };
            let events = match self.consume(stream).await {
                Ok(events) => events + delivered,
                Err(i) => {
                    if matches!(i, Interrupt::Failed(_)) {
                        self.metrics.watch(false);
                    }
                    return i;
                }
            };
            let elapsed = started.elapsed();
            // A watch that ends at once is reported as a failure, and counted as one.
            self.metrics.watch(elapsed >= self.config.short_watch);
            if events == 0 && elapsed < self.config.short_watch {
                return Interrupt::Failed(Error::ShortWatch { elapsed }.into_list_watch());
            }
            if elapsed < self.config.short_watch {
                // It delivered something, so the version is good and no relist is needed; but a
                // server or proxy that ends every watch at once must not be asked again at once
                // (thousands of watches a second): wait a backoff step first.
                let e = Error::WatchClosedEarly { elapsed, events }.into_list_watch();
                self.report(Phase::Watch, &e, false);
                if let Err(i) = self.wait_before_retry(&e).await {
                    return i;
                }
            }
        }
    }

    /// Applies a watch stream's events until it ends; returns how many it delivered.
    async fn consume(&mut self, mut stream: WatchStream<K>) -> Flow<usize> {
        let mut events = 0usize;
        loop {
            let resync = self.next_resync;
            let item = self
                .until_stopped(async {
                    match resync {
                        Some(at) => tokio::select! {
                            biased;
                            item = stream.next() => Some(item),
                            () = tokio::time::sleep_until(at) => None,
                        },
                        None => Some(stream.next().await),
                    }
                })
                .await?;
            let Some(item) = item else {
                self.resync()?;
                continue;
            };
            match item {
                None => return Ok(events),
                Some(Err(e)) if e.kind() == ErrorKind::Resume => {
                    tracing::debug!(error = %e, "watch interrupted; watching again");
                    return Ok(events);
                }
                Some(Err(e)) => return Err(Interrupt::Failed(e)),
                Some(Ok(event)) => {
                    events += 1;
                    self.apply(event).await?;
                }
            }
        }
    }

    async fn apply(&mut self, event: WatchEvent<K>) -> Flow<()> {
        let write = match event {
            WatchEvent::Added(o) => {
                self.metrics.added.increment(1);
                StoreEvent::Added(o)
            }
            WatchEvent::Modified(o) => {
                self.metrics.modified.increment(1);
                StoreEvent::Modified(o)
            }
            WatchEvent::Deleted(o) => {
                self.metrics.deleted.increment(1);
                StoreEvent::Deleted(o)
            }
            WatchEvent::Bookmark(bookmark) => {
                self.metrics.bookmarks.increment(1);
                StoreEvent::Bookmark(bookmark.resource_version)
            }
            WatchEvent::Error(status) => {
                return Err(Interrupt::Failed(
                    Error::WatchStatus(status).into_list_watch(),
                ));
            }
        };
        // The event goes to the store; a second reference (a count, not a copy) names the key
        // if the store refuses it and the version it has caught up to if it takes it.
        let kept = write.clone();
        self.store_ready().await?;
        if let Err(e) = self.store.apply(write) {
            match Error::from(e) {
                Error::StoreClosed => return Err(Interrupt::StoreClosed),
                // As client-go: a write the store refuses is logged and the watch goes on.
                other => match &kept {
                    StoreEvent::Added(o) | StoreEvent::Modified(o) | StoreEvent::Deleted(o) => {
                        tracing::error!(key = %o.key(), error = %other, "the store refused a watch event");
                    }
                    _ => tracing::error!(error = %other, "the store refused a bookmark"),
                },
            }
        }
        if let Some(rv) = kept.synced_resource_version() {
            self.synced_to(rv);
        }
        self.healthy(Phase::Watch);
        Ok(())
    }

    fn resync(&mut self) -> Flow<()> {
        if let Some(period) = self.config.resync_period {
            self.next_resync = Some(Instant::now() + period);
        }
        tracing::debug!("resync");
        self.store.apply(StoreEvent::Resync).map_err(store_failure)
    }
}

/// How a streaming list failed: refused at the start (fall back to a list) or interrupted.
enum StreamingFailure {
    Refused(list_watch::Error),
    Interrupted(Interrupt),
}

impl From<Interrupt> for StreamingFailure {
    fn from(i: Interrupt) -> Self {
        Self::Interrupted(i)
    }
}
