//! How a server starts: [`SimConfig`] and the Kubernetes release it behaves like
//! ([`KubeVersion`]). Plain data, read by the server and by every handler through its shared
//! state.

use std::time::Duration;

use crate::auth::Auth;

/// The Kubernetes release a [`SimServer`](crate::SimServer) claims to be in `/version`.
///
/// The releases modelled list alike: a list at `resourceVersion=0` is served whole from the watch
/// cache on every one of them, `limit` ignored (the apiserver's
/// `staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go`, `computeListLimit`, unchanged by
/// 1.34's cache snapshots). A server pages such a list only with its watch cache off
/// ([`SimConfig::watch_cache`]).
///
/// ```
/// use kinformer_sim::{KubeVersion, SimConfig};
///
/// let old = SimConfig { version: KubeVersion::V1_33, ..SimConfig::default() };
/// assert_eq!(old.version.minor(), 33);
/// assert_eq!(SimConfig::default().version, KubeVersion::V1_34);
/// assert_eq!(KubeVersion::parse("1.32"), Some(KubeVersion::V1_32));
/// assert_eq!(KubeVersion::parse("v1.36"), Some(KubeVersion::V1_36));
/// assert_eq!(KubeVersion::parse("1.37"), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum KubeVersion {
    /// Kubernetes 1.32.
    V1_32,
    /// Kubernetes 1.33.
    V1_33,
    /// Kubernetes 1.34 (the default).
    #[default]
    V1_34,
    /// Kubernetes 1.35.
    V1_35,
    /// Kubernetes 1.36, the first release with the `ShardedListAndWatch` gate (alpha, off by
    /// default; see [`SimConfig::sharded_list_and_watch`]).
    V1_36,
}

impl KubeVersion {
    /// The minor version, e.g. `34`.
    pub fn minor(self) -> u32 {
        match self {
            Self::V1_32 => 32,
            Self::V1_33 => 33,
            Self::V1_34 => 34,
            Self::V1_35 => 35,
            Self::V1_36 => 36,
        }
    }

    /// Whether pods carry `metadata.generation`: from 1.33, whose pod strategy sets it on create
    /// and bumps it with the spec (`pkg/registry/core/pod/strategy.go`).
    pub fn pods_have_generation(self) -> bool {
        self >= Self::V1_33
    }

    /// Whether pods keep `status.observedGeneration` and their conditions' `observedGeneration`:
    /// from 1.34, where `PodObservedGenerationTracking` is on by default (KEP-5067: alpha in
    /// 1.33, beta in 1.34).
    pub fn pods_track_observed_generation(self) -> bool {
        self >= Self::V1_34
    }

    /// The versions of aggregated discovery (`apidiscovery.k8s.io`) `/api` and `/apis` serve
    /// to a client that asks for them in `Accept`, most preferred first: `v2` since 1.30 (GA),
    /// and the beta `v2beta1` from 1.26 to 1.34 (later releases stopped serving it). An empty
    /// list would mean the plain documents only.
    ///
    /// ```
    /// use kinformer_sim::KubeVersion;
    ///
    /// assert_eq!(KubeVersion::V1_34.aggregated_discovery(), ["v2", "v2beta1"]);
    /// assert_eq!(KubeVersion::V1_36.aggregated_discovery(), ["v2"]);
    /// ```
    pub fn aggregated_discovery(self) -> &'static [&'static str] {
        match self.minor() {
            30..=34 => &["v2", "v2beta1"],
            26..=29 => &["v2beta1"],
            35.. => &["v2"],
            _ => &[],
        }
    }

    /// Whether the release has the `ShardedListAndWatch` feature gate (KEP-5866: alpha from
    /// 1.36, off by default), which a server needs before it reads a list's or watch's
    /// `shardSelector`. Earlier releases do not know the parameter and ignore it.
    ///
    /// ```
    /// use kinformer_sim::KubeVersion;
    ///
    /// assert!(KubeVersion::V1_36.has_sharded_list_and_watch());
    /// assert!(!KubeVersion::V1_35.has_sharded_list_and_watch());
    /// ```
    pub fn has_sharded_list_and_watch(self) -> bool {
        self >= Self::V1_36
    }

    /// Parses `1.33`, `v1.33` or `33`; `None` for a release the sim does not model.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().trim_start_matches('v');
        let minor = s.strip_prefix("1.").unwrap_or(s);
        let minor = minor.split('.').next().unwrap_or(minor);
        match minor {
            "32" => Some(Self::V1_32),
            "33" => Some(Self::V1_33),
            "34" => Some(Self::V1_34),
            "35" => Some(Self::V1_35),
            "36" => Some(Self::V1_36),
            _ => None,
        }
    }
}

/// How a [`SimServer`](crate::SimServer) starts. Build it with struct update syntax from `Default`.
///
/// The defaults are a real API server's: bookmarks about once a minute, history kept for
/// five to ten minutes (compacted every five), gzip for large responses, Kubernetes 1.34.
/// Tests that need things to happen sooner turn the knobs down.
///
/// ```
/// use std::time::Duration;
/// use kinformer_sim::{Auth, SimConfig};
///
/// let config = SimConfig {
///     tls: true,
///     auth: Auth::BearerToken("secret".into()),
///     bookmark_interval: Duration::from_millis(50),
///     ..SimConfig::default()
/// };
/// assert_eq!(config.history_window, 100_000);
/// assert_eq!(SimConfig::default().bookmark_interval, Duration::from_secs(60));
/// ```
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Serve HTTPS with a generated CA and server certificate (for 127.0.0.1 and localhost).
    /// Default `false`: plain HTTP.
    pub tls: bool,
    /// The credentials requests must present. Default [`Auth::None`].
    pub auth: Auth,
    /// The Kubernetes release the server claims to be. Default 1.34.
    pub version: KubeVersion,
    /// Serve lists at `resourceVersion=0` and periodic bookmarks from a watch cache, as the API
    /// server does by default (`--watch-cache=true`). Default `true`.
    ///
    /// Off, the server behaves like one started with `--watch-cache=false`: every list is read
    /// from storage, which honours `limit` at `resourceVersion=0` too (the one way a real server
    /// pages a first list at `0`, and so the way to test a reflector's paged relists), and
    /// watches get no periodic bookmarks (storage sends only a streaming list's closing one).
    pub watch_cache: bool,
    /// How long the watch cache keeps each resource's events (besides its last 100 whatever
    /// their age, and up to 102 400 of them for the default): a watch from a version older than
    /// that answers 410, however much history storage keeps for lists. Default 75 s, the
    /// apiserver's `DefaultEventFreshDuration`; the cache's capacity bound grows with a longer
    /// one, as the cacher's does.
    pub watch_cache_window: Duration,
    /// At most this many past events are kept, whatever their age (the oldest are compacted
    /// first); older versions answer 410. Default 100 000. Tests set a small number to make a
    /// resume fail after a few writes.
    pub history_window: usize,
    /// How often history is compacted, as the API server asks etcd to every 5 minutes: each
    /// compaction drops the events older than the version seen at the previous one, so between
    /// one and two intervals of history are kept. `None` never compacts on a timer. Default 5 min.
    pub compaction_interval: Option<Duration>,
    /// How often open watches that allow bookmarks get a `BOOKMARK`; another is sent 2 s before
    /// a watch's timeout, as the watch cache does. Default 60 s.
    pub bookmark_interval: Duration,
    /// Gzip responses over 128 KiB for clients that send `Accept-Encoding: gzip`, as the API
    /// server does by default (watches are never compressed). Default `true`.
    pub compression: bool,
    /// Serve the admin endpoints under `/kinformer-sim/admin/` (fault injection for clients
    /// outside the process; see `docs/sim.md`). Default `false`.
    pub admin: bool,
    /// How long a request for a resourceVersion newer than the server's waits for it before
    /// answering 504 "Too large resource version" (the real server waits 3 s). Default 500 ms.
    pub too_large_wait: Duration,
    /// The port to bind on 127.0.0.1; 0 (the default) picks a free one.
    pub port: u16,
    /// The `ShardedListAndWatch` feature gate (KEP-5866, alpha, off by default), which exists
    /// from Kubernetes 1.36 on. Default `false`.
    ///
    /// On, with [`SimConfig::version`] 1.36 or later, lists, watches and delete-collections
    /// read the `shardSelector` parameter: only objects whose `metadata.uid` (or
    /// `metadata.namespace`) hashes into one of its ranges are listed, sent as events or
    /// deleted; every list response that applied it echoes it in `metadata.shardInfo`; and a
    /// malformed one answers 422 `Invalid`. Off, or on an earlier release, the parameter is
    /// ignored as an unknown one: everything is listed and watched, and lists carry no
    /// `shardInfo`, which is how a client tells that a server did not filter.
    ///
    /// ```
    /// use kinformer_sim::{KubeVersion, SimConfig};
    ///
    /// let sharded = SimConfig {
    ///     version: KubeVersion::V1_36,
    ///     sharded_list_and_watch: true,
    ///     ..SimConfig::default()
    /// };
    /// assert!(sharded.version.has_sharded_list_and_watch());
    /// ```
    pub sharded_list_and_watch: bool,
}

impl SimConfig {
    /// Whether the server reads `shardSelector`: the gate is on and the release has it.
    pub(crate) fn honours_shard_selector(&self) -> bool {
        self.sharded_list_and_watch && self.version.has_sharded_list_and_watch()
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            tls: false,
            auth: Auth::None,
            version: KubeVersion::default(),
            watch_cache: true,
            watch_cache_window: Duration::from_secs(75),
            history_window: 100_000,
            compaction_interval: Some(Duration::from_secs(300)),
            bookmark_interval: Duration::from_secs(60),
            compression: true,
            admin: false,
            too_large_wait: Duration::from_millis(500),
            port: 0,
            sharded_list_and_watch: false,
        }
    }
}
