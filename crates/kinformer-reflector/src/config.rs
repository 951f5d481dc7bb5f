//! How a reflector lists, watches and backs off.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kinformer_core::ProgressTracker;
use kinformer_core::list_watch::{self, DEFAULT_PAGE_SIZE};

/// Where the first list reads from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum InitialList {
    /// `resourceVersion=0`: any version, served from the API server's watch cache (cheap for the
    /// server; possibly a little stale, which the watch then catches up). client-go's default.
    #[default]
    WatchCache,
    /// `resourceVersion=""`: a consistent read of the latest state (served from etcd, or from a
    /// watch cache that has caught up on servers with consistent reads from cache).
    Consistent,
}

/// Whether the reflector lists with a streaming list (`sendInitialEvents=true`): one watch that
/// delivers the current state as `ADDED` events, then the bookmark annotated
/// `k8s.io/initial-events-end`, then carries on as the live watch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamingList {
    /// Always list with `list` requests (client-go's default before 1.35).
    Off,
    /// Always try a streaming list first; when the server refuses it, list and watch for that
    /// cycle, and try streaming again at the next relist.
    On,
    /// Try a streaming list; when the server refuses it as a request it does not understand (a
    /// 4xx answer), stop trying for this reflector's lifetime and list and watch. The default,
    /// as client-go's since 1.35.
    #[default]
    Auto,
}

/// The retry schedule: exponential from `initial` by `factor` up to `max`, each wait drawn at
/// random between zero and the step (full jitter), restarting from `initial` after `reset_after`
/// without a failure. The defaults are client-go's reflector's: 800 ms, doubling, 30 s, 2 min.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffConfig {
    /// The first step.
    pub initial: Duration,
    /// The largest step.
    pub max: Duration,
    /// The growth factor, at least 1.
    pub factor: f32,
    /// A time without any failure after which the schedule starts again from `initial`.
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            factor: 2.0,
            reset_after: Duration::from_secs(120),
        }
    }
}

/// Where a reflector was when something failed, as its [`WatchErrorHandler`] hears it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Listing (or streaming the initial events).
    List,
    /// Opening a watch, or reading one.
    Watch,
}

/// What a [`WatchErrorHandler`] is told about one failure.
#[derive(Debug)]
#[non_exhaustive]
pub struct WatchErrorInfo<'a> {
    /// The failure, with the kind the reflector acted on; reflector-made failures (a short watch,
    /// a store that refused a write) have an [`Error`](crate::Error) as their source.
    pub error: &'a list_watch::Error,
    /// Where it happened.
    pub phase: Phase,
    /// `true` when the reflector will list again; `false` when it retries the same watch.
    pub will_relist: bool,
}

/// A hook called with every failure the reflector retries (client-go's `WatchErrorHandler`).
/// The reflector has already logged it; the hook is for the application's own reaction (a
/// metric, a health flag). It must not block.
pub type WatchErrorHandler = Arc<dyn Fn(&WatchErrorInfo<'_>) + Send + Sync>;

/// How a [`Reflector`](crate::Reflector) behaves. Build it with struct update syntax from
/// `Default`.
///
/// ```
/// use std::time::Duration;
/// use kinformer_reflector::{Config, InitialList};
///
/// let config = Config {
///     name: "pods".into(),
///     label_selector: Some("app=web".into()),
///     initial_list: InitialList::Consistent,
///     resync_period: Some(Duration::from_secs(600)),
///     ..Config::default()
/// };
/// assert_eq!(config.page_size, 500);
/// assert_eq!(config.min_watch_timeout, Duration::from_secs(300));
/// ```
#[derive(Clone)]
pub struct Config {
    /// A name for logs and metrics, usually the resource (`pods`, `deployments.apps`).
    pub name: String,
    /// The resource, for the `resource` label of the metrics (`pods`, `deployments.apps`);
    /// empty (the default): the name.
    pub resource: String,
    /// `labelSelector` of every list and watch.
    pub label_selector: Option<String>,
    /// `fieldSelector` of every list and watch.
    pub field_selector: Option<String>,
    /// Objects per list page; 0 lists in one request. Default 500, as client-go.
    pub page_size: u32,
    /// Where the first list reads from. Default [`InitialList::WatchCache`].
    pub initial_list: InitialList,
    /// Whether to list with streaming lists. Default [`StreamingList::Auto`]: try one, fall back
    /// to list and watch on a server that refuses it.
    pub streaming_list: StreamingList,
    /// Each watch asks the server to end it after a time drawn at random between this and twice
    /// this, so that many reflectors do not reconnect in lockstep. Default 5 minutes.
    pub min_watch_timeout: Duration,
    /// A watch that ends within this time having delivered nothing is taken as a sign of trouble
    /// and followed by a relist. Default 1 s, as client-go.
    pub short_watch: Duration,
    /// The retry schedule.
    pub backoff: BackoffConfig,
    /// How often to send the store a [`Resync`](kinformer_core::StoreEvent::Resync); `None`
    /// (the default) never.
    pub resync_period: Option<Duration>,
    /// The seed of the jitter and the watch timeouts; `None` (the default) seeds from the clock.
    /// Tests fix it to replay exactly.
    pub seed: Option<u64>,
    /// Called with every failure the reflector retries.
    pub on_watch_error: Option<WatchErrorHandler>,
    /// Where each list's progress is written (objects, what the server says remains), for an
    /// informer to show while it waits for its first sync; `None` (the default) keeps none.
    pub progress: Option<ProgressTracker>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            name: String::new(),
            resource: String::new(),
            label_selector: None,
            field_selector: None,
            page_size: DEFAULT_PAGE_SIZE,
            initial_list: InitialList::default(),
            streaming_list: StreamingList::default(),
            min_watch_timeout: Duration::from_secs(300),
            short_watch: Duration::from_secs(1),
            backoff: BackoffConfig::default(),
            resync_period: None,
            seed: None,
            on_watch_error: None,
            progress: None,
        }
    }
}

impl Config {
    /// The same configuration with `handler` as the [`WatchErrorHandler`].
    #[must_use]
    pub fn with_watch_error_handler(
        mut self,
        handler: impl Fn(&WatchErrorInfo<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.on_watch_error = Some(Arc::new(handler));
        self
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("name", &self.name)
            .field("resource", &self.resource)
            .field("label_selector", &self.label_selector)
            .field("field_selector", &self.field_selector)
            .field("page_size", &self.page_size)
            .field("initial_list", &self.initial_list)
            .field("streaming_list", &self.streaming_list)
            .field("min_watch_timeout", &self.min_watch_timeout)
            .field("short_watch", &self.short_watch)
            .field("backoff", &self.backoff)
            .field("resync_period", &self.resync_period)
            .field("seed", &self.seed)
            .field("on_watch_error", &self.on_watch_error.is_some())
            .field("progress", &self.progress.is_some())
            .finish()
    }
}
