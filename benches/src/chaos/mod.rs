//! The chaos soak: a seeded workload on the simulated API server over HTTP, with every fault
//! class the server has firing on a schedule, against a factory of informers with handlers (one
//! slow, one that panics now and then), checking the informers' promises all along and at every
//! quiescent point.
//!
//! The informers: typed pods, compact pods (`kinformer_compact::Compact<Pod>`), metadata-only
//! pods, and typed pods behind a label selector. The handlers: on typed pods, a fast recorder, a
//! slow one, one that panics now and then, and a recorder behind a [`FilteringHandler`] with the
//! selector's filter; on each of the other three, a fast recorder. Beside the factory, a sharded
//! group: three replicas of a typed pod informer splitting the pods through shard membership on
//! Leases, one of them restarted every few seconds, gracefully or abruptly.
//!
//! Invariants, each a counted violation with a message:
//! - continuously: each handler's calls form a valid history per key (no add while holding the
//!   key, no update or delete of a key not held, an update's old object is the one last heard,
//!   versions only grow, an incarnation's delete arrives before another incarnation of the name
//!   is heard); no cached object is ahead of the server or goes back; the fast handlers' oldest
//!   pending notification stays younger than the slow handler's stalls; the process's resident
//!   memory stays within a bound proportional to what the caches hold; no panic but the
//!   deliberate ones happens anywhere; no hash range is acted on by two replicas of the sharded
//!   group at once, and no replica keeps an object outside the ranges it holds;
//! - at each quiescent point (faults disarmed, writes paused): every cache equals the server's
//!   objects for its filter (keys, uids and resourceVersions), and so does what every handler
//!   believes: a delete that never reached a handler leaves it holding the key. The panicking
//!   handler's panics were all caught and counted. The sharded group's replicas are all up, hold
//!   ranges that cover the hash space exactly once, cache only pods of their ranges, and their
//!   caches together equal the server's pods, none in two caches.
//!
//! `cargo xtask chaos [--seconds N] [--seed S]` runs it and prints the report (with `--docs`, it
//! also writes it into `docs/reliability.md`); `tests/chaos.rs` runs a few seconds of it under
//! `cargo test`.

pub mod doc;
mod faults;
mod history;
mod shards;
mod weight;
mod workload;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer::client::{Api, Client, Config as ClientConfig};
use kinformer::consistency::ConsistencyChecker;
use kinformer::core::list_watch::BoxListWatch;
use kinformer::core::{ApiResource, CacheRead, Object, PartialObjectMetadata, Scope};
use kinformer::delta_fifo::DeltaFifo;
use kinformer::indexer::Indexer;
use kinformer::reflector::{BackoffConfig, StreamingList};
use kinformer::shared_informer::{
    FilteringHandler, InformerConfig, InformerOptions, Registration, SharedIndexInformer,
    SharedInformerFactory,
};
use kinformer_compact::Compact;
use kinformer_sim::{KubeVersion, SimConfig, SimServer, Store};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;

pub use faults::FaultClass;
pub use history::Heard;
pub use shards::Restarts;
pub use workload::Writes;

use history::{Behaviour, DELIBERATE_PANIC, Held, Recorder};
use shards::{Group, Outside, Replicas};
use workload::{NAMESPACES, TIER, Writer};

pub use weight::HeapMeter;
use weight::Weights;

/// What can stop the soak before it checks anything.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The simulated server did not start.
    #[error("the simulated server did not start: {0}")]
    Sim(#[from] kinformer_sim::Error),
    /// The HTTP client could not be built.
    #[error("the client could not be built: {0}")]
    Client(#[from] kinformer::client::Error),
    /// A replica of the sharded group could not join it (its configuration was refused).
    #[error("a replica of the sharded group could not be made: {0}")]
    Membership(#[from] kinformer::coordination::Error),
}

/// How long and how hard the soak runs. [`ChaosConfig::new`] gives the defaults of
/// `cargo xtask chaos`.
///
/// ```
/// let config = kinformer_benches::chaos::ChaosConfig::new(600, 1);
/// assert_eq!(config.pods, 200);
/// ```
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    /// How long the workload and the faults run, in seconds (quiescent checks not counted).
    pub seconds: u64,
    /// The seed of the workload, the fault schedule and the reflectors' jitter.
    pub seed: u64,
    /// About how many pods the workload keeps on the server.
    pub pods: usize,
    /// Writes the workload attempts per second.
    pub writes_per_second: u32,
    /// The wait between two faults is drawn from this range.
    pub fault_wait: (Duration, Duration),
    /// How often the workload pauses for a quiescent check.
    pub quiesce_every: Duration,
    /// How long the informers and handlers get to agree with the server at a quiescent point
    /// before that counts as a violation.
    pub settle_timeout: Duration,
    /// The slow handler sleeps this long on every 150th call; the other handlers' oldest
    /// pending notification must stay younger than this.
    pub slow_stall: Duration,
    /// The live heap, where the program counts it: the memory bound then weighs each cached
    /// form on the server's own pods (see [`HeapMeter`]) and the report shows the peak heap.
    pub heap: Option<HeapMeter>,
}

impl ChaosConfig {
    /// The soak's defaults for `seconds` and `seed`.
    pub fn new(seconds: u64, seed: u64) -> Self {
        Self {
            seconds,
            seed,
            pods: 200,
            writes_per_second: 100,
            fault_wait: (Duration::from_millis(100), Duration::from_millis(700)),
            quiesce_every: Duration::from_secs(60),
            settle_timeout: Duration::from_secs(60),
            slow_stall: Duration::from_secs(2),
            heap: None,
        }
    }
}

/// What one handler heard and how it fared.
#[derive(Debug, Clone)]
pub struct HandlerReport {
    /// `informer/handler`.
    pub name: String,
    /// Calls by kind.
    pub heard: Heard,
    /// Panics the informer caught and counted.
    pub panics: u64,
    /// The age of the oldest notification it had not yet handled, at its highest.
    pub max_lag: Duration,
}

/// The sharded group's figures.
#[derive(Debug, Clone, Default)]
pub struct ShardReport {
    /// Replicas in the group.
    pub replicas: usize,
    /// Replicas taken down and started again, by how they went down.
    pub restarts: Restarts,
    /// Hand-overs seen: calls of the replicas' owners' `set_ranges`.
    pub hand_overs: u64,
    /// Times a replica was told to act on a range another replica still acted on (0 to pass).
    pub overlaps: u64,
    /// Lease writes the server answered as done: part of the server's writes.
    pub lease_writes: u64,
    /// Lists (without a continue token) the group's informers made.
    pub lists: u64,
    /// Watches the group's informers opened.
    pub watches: u64,
}

/// The soak's figures and its verdict.
#[derive(Debug, Clone)]
pub struct ChaosReport {
    /// The seed the run was made with.
    pub seed: u64,
    /// Seconds of workload and faults.
    pub seconds: u64,
    /// Wall-clock time of the whole run, quiescent checks included.
    pub elapsed: Duration,
    /// What the writer did.
    pub writes: Writes,
    /// Writes the server made (its resourceVersion advanced this much): the writer's, the
    /// deletions at the end of grace periods, and the sharded group's Lease writes.
    pub server_writes: u64,
    /// Faults fired, by class.
    pub faults: BTreeMap<FaultClass, u64>,
    /// Lists started by the informers after their first (relists, whatever caused them).
    pub relists: u64,
    /// List pages requested with a continue token.
    pub continue_pages: u64,
    /// Watches opened after each informer's first.
    pub watch_restarts: u64,
    /// Quiescent checks made (the last one at the end).
    pub quiescent_checks: u64,
    /// Consistency checks that compared a cache with the server's list at the cache's own
    /// version (during the faults and at each quiescence), and those skipped (the server had
    /// compacted the version away, or a fault failed the list).
    pub consistency_checks: u64,
    /// See [`consistency_checks`](Self::consistency_checks).
    pub consistency_skipped: u64,
    /// The longest time the informers and handlers took to agree with the server once the
    /// faults stopped.
    pub max_settle: Duration,
    /// Every handler.
    pub handlers: Vec<HandlerReport>,
    /// The sharded group.
    pub shards: ShardReport,
    /// The most objects the caches held together (the sharded group's included).
    pub max_cached: usize,
    /// The process's peak resident memory (Linux), in bytes.
    pub peak_rss: Option<u64>,
    /// The resident-memory bound at the end (it only grows: it follows the most the held
    /// objects ever weighed), in bytes.
    pub rss_bound: Option<u64>,
    /// The most heap ever live at once, where the program counts it.
    pub peak_heap: Option<u64>,
    /// The heap one object of each form took, as measured at the start (typed `Pod`,
    /// `Compact<Pod>`, `PartialObjectMetadata`), where the program counts it.
    pub weights: Option<(u64, u64, u64)>,
    /// Invariant violations (0 to pass).
    pub violation_count: u64,
    /// The first violations, in the order found.
    pub violations: Vec<String>,
}

impl ChaosReport {
    /// `true` if no invariant was violated.
    pub fn passed(&self) -> bool {
        self.violation_count == 0
    }

    /// The largest handler lag among the handlers whose name contains `part`.
    pub fn max_lag_of(&self, part: &str) -> Duration {
        self.handlers
            .iter()
            .filter(|h| h.name.contains(part))
            .map(|h| h.max_lag)
            .max()
            .unwrap_or_default()
    }

    /// The report as Markdown, with `command` as the way to replay it.
    pub fn markdown(&self, command: &str) -> String {
        let mut s = String::new();
        let w = &self.writes;
        let mib = |b: u64| format!("{:.0} MiB", b as f64 / (1024.0 * 1024.0));
        let _ = writeln!(
            s,
            "#### Seed {}: {} violations\n\nReplay: `{command}`\n",
            self.seed, self.violation_count
        );
        let _ = writeln!(s, "| Figure | Value |\n| --- | --- |");
        let _ = writeln!(
            s,
            "| Workload | {} s ({:.0} s with the quiescent checks) |",
            self.seconds,
            self.elapsed.as_secs_f64()
        );
        let _ = writeln!(
            s,
            "| Writes | {} creates ({} reusing a deleted name), {} updates, {} graceful and {} immediate deletes, {} finalizers removed; {} refused or cut |",
            w.creates,
            w.recreates,
            w.updates,
            w.graceful_deletes,
            w.immediate_deletes,
            w.finalizers_removed,
            w.refused
        );
        let _ = writeln!(
            s,
            "| Events generated (server writes) | {} ({} of them the sharded group's Lease writes) |",
            self.server_writes, self.shards.lease_writes
        );
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(c, n)| format!("{} {n}", c.name()))
            .collect();
        let total: u64 = self.faults.values().sum();
        let _ = writeln!(s, "| Faults fired | {total}: {} |", faults.join(", "));
        let _ = writeln!(
            s,
            "| Relists | {} ({} continue pages) |",
            self.relists, self.continue_pages
        );
        let _ = writeln!(s, "| Watch restarts | {} |", self.watch_restarts);
        let g = &self.shards;
        let r = g.restarts;
        let _ = writeln!(
            s,
            "| Sharded group | {} replicas on Leases: {} restarts ({} graceful, {} abrupt; {} waited until the others held every range: slowest {:.1} s after a graceful stop, {:.1} s after an abrupt death), {} hand-overs (`set_ranges` calls), {} lists and {} watches |",
            g.replicas,
            r.total(),
            r.graceful,
            r.abrupt,
            r.taken_over,
            r.slowest_graceful_take_over.as_secs_f64(),
            r.slowest_abrupt_take_over.as_secs_f64(),
            g.hand_overs,
            g.lists,
            g.watches
        );
        let _ = writeln!(
            s,
            "| Ranges acted on by two replicas at once | {} |",
            g.overlaps
        );
        let _ = writeln!(
            s,
            "| Quiescent checks | {} (slowest settle {:.1} s) |",
            self.quiescent_checks,
            self.max_settle.as_secs_f64()
        );
        let _ = writeln!(
            s,
            "| Consistency checks (cache against the server's list at the cache's version) | {} ({} skipped: version compacted, or the list failed under a fault) |",
            self.consistency_checks, self.consistency_skipped
        );
        let lag_fast = self
            .handlers
            .iter()
            .filter(|h| !h.name.ends_with("/slow"))
            .map(|h| h.max_lag)
            .max()
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "| Max handler lag | slow handler {:.2} s; every other handler {:.3} s |",
            self.max_lag_of("/slow").as_secs_f64(),
            lag_fast.as_secs_f64()
        );
        let _ = writeln!(
            s,
            "| Peak RSS | {} (bound {}; at most {} cached objects) |",
            self.peak_rss.map(mib).unwrap_or_else(|| "n/a".into()),
            self.rss_bound.map(mib).unwrap_or_else(|| "n/a".into()),
            self.max_cached
        );
        if let (Some(heap), Some((typed, compact, metadata))) = (self.peak_heap, self.weights) {
            let _ = writeln!(
                s,
                "| Peak heap | {} (one object: typed {:.1} KiB, compact {:.1} KiB, metadata {:.1} KiB) |",
                mib(heap),
                typed as f64 / 1024.0,
                compact as f64 / 1024.0,
                metadata as f64 / 1024.0
            );
        }
        let _ = writeln!(s, "| Invariant violations | **{}** |", self.violation_count);
        let _ = writeln!(
            s,
            "\n| Handler | Adds | Updates | Deletes | Tombstones | Panics caught | Max lag |\n| --- | --- | --- | --- | --- | --- | --- |"
        );
        for h in &self.handlers {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {:.3} s |",
                h.name,
                h.heard.adds,
                h.heard.updates,
                h.heard.deletes,
                h.heard.tombstones,
                h.panics,
                h.max_lag.as_secs_f64()
            );
        }
        for v in &self.violations {
            let _ = writeln!(s, "\n- violation: {v}");
        }
        s
    }
}

/// Invariant violations, shared by every check: a count and the first few messages.
#[derive(Clone, Default)]
pub(crate) struct Violations(Arc<Mutex<(u64, Vec<String>)>>);

impl Violations {
    pub(crate) fn report(&self, what: String) {
        tracing::error!(violation = %what, "chaos: invariant violated");
        let mut v = self.0.lock();
        v.0 += 1;
        if v.1.len() < 20 {
            v.1.push(what);
        }
    }
    fn count(&self) -> u64 {
        self.0.lock().0
    }
}

fn pods() -> ApiResource {
    ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced)
}

fn namespaces() -> ApiResource {
    ApiResource::new("", "v1", "Namespace", "namespaces", Scope::Cluster)
}

type Informer<K> = SharedIndexInformer<K, DeltaFifo<K>, Indexer<K>>;

type Checker<K> = ConsistencyChecker<K, DeltaFifo<K>, Indexer<K>>;

/// The consistency checks of every informer: each compares its cache with the server's list at
/// the cache's own version; a difference is a violation.
struct Consistency {
    typed: Checker<Pod>,
    selected: Checker<Pod>,
    compact: Checker<Compact<Pod>>,
    metadata: Checker<PartialObjectMetadata>,
}

impl Consistency {
    async fn check(&self, violations: &Violations) {
        let reports = [
            self.typed.check().await,
            self.selected.check().await,
            self.compact.check().await,
            self.metadata.check().await,
        ];
        for (name, report) in ["pods", "pods-selected", "pods-compact", "pods-metadata"]
            .into_iter()
            .zip(reports)
        {
            if let Some(report) = report.filter(|r| !r.is_consistent()) {
                violations.report(format!(
                    "informer {name}: the cache differs from the server {report}"
                ));
            }
        }
    }

    /// `(checks, skipped)` over every informer.
    fn totals(&self) -> (u64, u64) {
        let all = [
            self.typed.stats(),
            self.selected.stats(),
            self.compact.stats(),
            self.metadata.stats(),
        ];
        (
            all.iter().map(|s| s.checks).sum(),
            all.iter().map(|s| s.skipped + s.errors).sum(),
        )
    }
}

/// Which of the server's pods an informer or handler should end up holding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Filter {
    All,
    Selected,
}

/// The server's pods as `key -> (uid, version)`, with whether each is selected.
fn server_state(store: &Store) -> BTreeMap<String, (Held, bool)> {
    store
        .list(&pods(), None)
        .iter()
        .map(|p| {
            let m = &p["metadata"];
            let key = format!(
                "{}/{}",
                m["namespace"].as_str().unwrap_or_default(),
                m["name"].as_str().unwrap_or_default()
            );
            let held = Held {
                uid: m["uid"].as_str().unwrap_or_default().to_owned(),
                version: m["resourceVersion"]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
            };
            let selected = m["labels"][TIER].as_str() == Some("in");
            (key, (held, selected))
        })
        .collect()
}

fn filtered(server: &BTreeMap<String, (Held, bool)>, filter: Filter) -> BTreeMap<String, Held> {
    server
        .iter()
        .filter(|(_, (_, selected))| filter == Filter::All || *selected)
        .map(|(k, (h, _))| (k.clone(), h.clone()))
        .collect()
}

fn held_of<K: Object>(o: &K) -> Held {
    Held {
        uid: o.uid().unwrap_or_default().to_owned(),
        version: o
            .resource_version()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    }
}

/// An informer's cache, seen through its object type.
struct CacheView {
    name: &'static str,
    filter: Filter,
    state: Box<dyn Fn() -> BTreeMap<String, Held> + Send + Sync>,
    /// What the previous continuous check saw, to catch a version going back.
    last: HashMap<String, Held>,
    /// Heap bytes one cached object of this form takes.
    weight: u64,
}

fn cache_view<K: Object + Send + Sync + 'static>(
    name: &'static str,
    filter: Filter,
    cache: &Arc<Indexer<K>>,
    weight: u64,
) -> CacheView {
    let cache = Arc::clone(cache);
    CacheView {
        name,
        filter,
        state: Box::new(move || {
            CacheRead::list(&*cache)
                .iter()
                .map(|o| (o.key().to_string(), held_of(&**o)))
                .collect()
        }),
        last: HashMap::new(),
        weight,
    }
}

/// A handler, seen through its registration and its recorder.
struct HandlerView {
    recorder: Recorder,
    filter: Filter,
    slow: bool,
    backlog: Box<dyn Fn() -> usize + Send + Sync>,
    lag: Box<dyn Fn() -> Option<Duration> + Send + Sync>,
    panics: Box<dyn Fn() -> u64 + Send + Sync>,
    max_lag: Duration,
    lag_reported: bool,
    /// Heap bytes one object of the informer's form takes.
    weight: u64,
}

fn handler_view<K: Object + Send + Sync + 'static>(
    recorder: Recorder,
    filter: Filter,
    registration: Registration<K>,
    weight: u64,
) -> HandlerView {
    let registration = Arc::new(registration);
    let (a, b, c) = (
        Arc::clone(&registration),
        Arc::clone(&registration),
        registration,
    );
    HandlerView {
        slow: recorder.name().ends_with("/slow"),
        recorder,
        filter,
        backlog: Box::new(move || a.backlog()),
        lag: Box::new(move || b.oldest_pending_age()),
        panics: Box::new(move || c.panics()),
        max_lag: Duration::ZERO,
        lag_reported: false,
        weight,
    }
}

/// The reflector over `api`, as the informer's event stream. Typed informers take the default
/// (a streaming list where the server serves one); the compact and metadata-only ones list and
/// watch, so that both ways of listing run through every fault.
fn events<K>(
    api: Api<K>,
    name: &str,
    selector: Option<&str>,
    seed: u64,
    streaming_list: StreamingList,
) -> kinformer::reflector::Watcher<K>
where
    K: Object + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    let config = reflector_config(name, selector, seed, streaming_list);
    kinformer::reflector::watcher(api, config)
}

/// The settings of every reflector of the soak.
fn reflector_config(
    name: &str,
    selector: Option<&str>,
    seed: u64,
    streaming_list: StreamingList,
) -> kinformer::reflector::Config {
    kinformer::reflector::Config {
        name: name.into(),
        label_selector: selector.map(str::to_owned),
        // Small pages, so that every paged relist exercises continue tokens.
        page_size: 40,
        backoff: BackoffConfig {
            initial: Duration::from_millis(50),
            max: Duration::from_secs(2),
            ..BackoffConfig::default()
        },
        seed: Some(seed),
        streaming_list,
        ..kinformer::reflector::Config::default()
    }
}

fn informer_config<K>(name: &str) -> InformerConfig<K> {
    InformerConfig {
        name: name.into(),
        ..InformerConfig::default()
    }
}

fn typed(
    seed: u64,
    name: &'static str,
    selector: Option<&'static str>,
) -> impl FnOnce(&Client, &InformerOptions) -> Informer<Pod> {
    move |client, _| {
        let cache = Arc::new(Indexer::new());
        let queue = Arc::new(DeltaFifo::new(cache.clone()));
        let api = Api::all(client.clone());
        SharedIndexInformer::new(
            events(api, name, selector, seed, StreamingList::default()),
            queue,
            cache,
            informer_config(name),
        )
    }
}

fn compact(seed: u64) -> impl FnOnce(&Client, &InformerOptions) -> Informer<Compact<Pod>> {
    move |client, _| {
        let cache = Arc::new(Indexer::new());
        let queue = Arc::new(DeltaFifo::new(cache.clone()));
        let api = Api::all(client.clone());
        SharedIndexInformer::new(
            events(api, "pods-compact", None, seed, StreamingList::Off),
            queue,
            cache,
            informer_config("pods-compact"),
        )
    }
}

fn metadata(
    seed: u64,
) -> impl FnOnce(&Client, &InformerOptions) -> Informer<PartialObjectMetadata> {
    move |client, _| {
        let cache = Arc::new(Indexer::new());
        let queue = Arc::new(DeltaFifo::new(cache.clone()));
        let api = Api::metadata(client.clone(), &pods(), None);
        SharedIndexInformer::new(
            events(api, "pods-metadata", None, seed, StreamingList::Off),
            queue,
            cache,
            informer_config("pods-metadata"),
        )
    }
}

/// Resident memory now and at its peak, in bytes (Linux only).
fn rss() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse::<u64>()
            .ok()
            .map(|kb| kb * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Request counts from the server's log: the factory's informers', and the sharded group's
/// (told apart by their label selector).
#[derive(Default)]
struct Requests {
    lists: u64,
    continue_pages: u64,
    watches: u64,
    group_lists: u64,
    group_watches: u64,
}

impl Requests {
    fn harvest(&mut self, sim: &SimServer) {
        let log = sim.requests();
        sim.clear_requests();
        for r in log
            .iter()
            .filter(|r| r.method == "GET" && r.path == "/api/v1/pods")
        {
            let group = r.param("labelSelector") == Some(shards::SELECTOR);
            if group {
                if r.is_watch() {
                    self.group_watches += 1;
                } else if r.param("continue").is_none() {
                    self.group_lists += 1;
                }
            } else if r.is_watch() {
                self.watches += 1;
            } else if r.param("resourceVersionMatch") == Some("Exact") {
                // A consistency check's list (the reflector never lists an exact version).
            } else if r.param("continue").is_some() {
                self.continue_pages += 1;
            } else {
                self.lists += 1;
            }
        }
    }
}

/// Runs the soak (on the current multi-threaded tokio runtime) and returns its figures. While
/// it runs, the process's panic hook counts every panic but the panicking handler's deliberate
/// ones as a violation; the previous hook is restored at the end.
pub async fn run(config: &ChaosConfig) -> Result<ChaosReport, Error> {
    let violations = Violations::default();
    let stray_panics = Arc::new(AtomicU64::new(0));
    let previous_hook = Arc::new(std::panic::take_hook());
    {
        let (stray, previous) = (Arc::clone(&stray_panics), Arc::clone(&previous_hook));
        std::panic::set_hook(Box::new(move |info| {
            let deliberate = info
                .payload()
                .downcast_ref::<String>()
                .is_some_and(|m| m.contains(DELIBERATE_PANIC));
            if !deliberate {
                stray.fetch_add(1, Ordering::SeqCst);
                previous(info);
            }
        }));
    }
    let result = soak(config, &violations, &stray_panics).await;
    drop(std::panic::take_hook());
    if let Ok(previous) = Arc::try_unwrap(previous_hook) {
        std::panic::set_hook(previous);
    }
    result
}

async fn soak(
    config: &ChaosConfig,
    violations: &Violations,
    stray_panics: &AtomicU64,
) -> Result<ChaosReport, Error> {
    let started = Instant::now();
    let sim = SimServer::start(SimConfig {
        version: KubeVersion::V1_34,
        // A bounded history (about 10 MB of pods), compacted on a timer as well.
        history_window: 2_000,
        compaction_interval: Some(Duration::from_secs(20)),
        bookmark_interval: Duration::from_secs(1),
        ..SimConfig::default()
    })
    .await?;
    let store = sim.store();
    for ns in NAMESPACES {
        let _ = store.create(
            &namespaces(),
            json!({"metadata": {"name": ns}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
        );
    }
    let rv_start = store.resource_version();
    let baseline = rss().map(|(now, _)| now);
    let heap_baseline = config.heap.map(|m| (m.current)() as u64);

    // The pods the first lists find, so that they are paged.
    let mut writer = Writer::new(sim.addr(), config.seed, config.pods);
    while writer.writes.creates < config.pods as u64 / 2 && writer.writes.refused < 1_000 {
        writer.create().await;
    }

    let weights = config
        .heap
        .and_then(|meter| Weights::measure(meter, &store.list(&pods(), None)))
        .unwrap_or(Weights::fixed(RSS_PER_OBJECT));

    let mut client_config = ClientConfig::new(sim.url());
    client_config.max_watch_line = faults::MAX_WATCH_LINE;
    let check_client = Client::new(client_config.clone())?;
    let factory = SharedInformerFactory::new(Client::new(client_config.clone())?, None);
    let seed = config.seed;
    let typed_pods = factory.informer_for("pods", typed(seed, "pods", None));
    let meta = factory.informer_for("pods-metadata", metadata(seed.wrapping_add(1)));
    let compact_pods = factory.informer_for("pods-compact", compact(seed.wrapping_add(3)));
    let selected = factory.informer_for(
        "pods-selected",
        typed(
            seed.wrapping_add(2),
            "pods-selected",
            Some(workload::SELECTOR),
        ),
    );

    let rec = |name: &str, b: Behaviour| Recorder::new(name, b, violations.clone());
    let mut handlers = Vec::new();
    for (name, behaviour) in [
        ("pods/fast", Behaviour::Fast),
        (
            "pods/slow",
            Behaviour::Slow {
                per_call: Duration::from_millis(1),
                stall: config.slow_stall,
                every: 150,
            },
        ),
        ("pods/panicking", Behaviour::Panics { every: 97 }),
    ] {
        let r = rec(name, behaviour);
        let registration = typed_pods.add_handler(r.clone()).unwrap();
        handlers.push(handler_view(r, Filter::All, registration, weights.typed));
    }
    let r = rec("pods/filtered", Behaviour::Fast);
    let registration = typed_pods
        .add_handler(FilteringHandler::new(
            |p: &Pod| p.labels().get(TIER).map(String::as_str) == Some("in"),
            r.clone(),
        ))
        .unwrap();
    handlers.push(handler_view(
        r,
        Filter::Selected,
        registration,
        weights.typed,
    ));
    let r = rec("pods-compact/fast", Behaviour::Fast);
    let registration = compact_pods.add_handler(r.clone()).unwrap();
    handlers.push(handler_view(r, Filter::All, registration, weights.compact));
    let r = rec("pods-metadata/fast", Behaviour::Fast);
    let registration = meta.add_handler(r.clone()).unwrap();
    handlers.push(handler_view(r, Filter::All, registration, weights.metadata));
    let r = rec("pods-selected/fast", Behaviour::Fast);
    let registration = selected.add_handler(r.clone()).unwrap();
    handlers.push(handler_view(
        r,
        Filter::Selected,
        registration,
        weights.typed,
    ));

    let consistency = Consistency {
        typed: ConsistencyChecker::new(
            Arc::clone(&typed_pods),
            BoxListWatch::new(Api::<Pod>::all(check_client.clone())),
            None,
            None,
            "pods",
        ),
        selected: ConsistencyChecker::new(
            Arc::clone(&selected),
            BoxListWatch::new(Api::<Pod>::all(check_client.clone())),
            Some(workload::SELECTOR.to_owned()),
            None,
            "pods-selected",
        ),
        compact: ConsistencyChecker::new(
            Arc::clone(&compact_pods),
            BoxListWatch::new(Api::<Compact<Pod>>::all(check_client.clone())),
            None,
            None,
            "pods-compact",
        ),
        metadata: ConsistencyChecker::new(
            Arc::clone(&meta),
            BoxListWatch::new(Api::metadata(check_client, &pods(), None)),
            None,
            None,
            "pods-metadata",
        ),
    };
    let mut caches = vec![
        cache_view("pods", Filter::All, typed_pods.cache(), weights.typed),
        cache_view(
            "pods-compact",
            Filter::All,
            compact_pods.cache(),
            weights.compact,
        ),
        cache_view("pods-metadata", Filter::All, meta.cache(), weights.metadata),
        cache_view(
            "pods-selected",
            Filter::Selected,
            selected.cache(),
            weights.typed,
        ),
    ];

    factory.start();
    let synced = factory
        .wait_for_cache_sync(Some(config.settle_timeout))
        .await;
    for (name, ok) in &synced {
        if !ok {
            violations.report(format!("informer {name} did not sync"));
        }
    }
    // The sharded group, each replica with a client of its own: once it has split the hash
    // space and its caches hold the server's pods, the phases begin.
    let mut group = Group::start(client_config, seed, violations)?;
    let replicas = group.replicas();
    quiesce(
        &store,
        &[],
        &mut [],
        &replicas,
        config,
        violations,
        "once the sharded group started",
    )
    .await;

    let mut requests = Requests::default();
    let mut schedule = faults::Schedule::new(sim.faults(), config.seed);
    let mut peak = Peak {
        baseline,
        heap_baseline,
        measured: weights.measured,
        shard_weight: weights.typed,
        ..Peak::default()
    };
    let mut outside = Outside::default();
    let mut quiescent_checks = 0;
    let mut max_settle = Duration::ZERO;
    let mut remaining = Duration::from_secs(config.seconds);
    while !remaining.is_zero() {
        let phase = remaining.min(config.quiesce_every);
        remaining -= phase;
        // Writes and faults, with the continuous checks.
        let (stop_tx, stop_rx) = watch::channel(false);
        let write_task = tokio::spawn(write_loop(
            writer,
            config.writes_per_second,
            stop_rx.clone(),
        ));
        let fault_task = tokio::spawn(fault_loop(schedule, config.fault_wait, stop_rx.clone()));
        let restart_task =
            tokio::spawn(shards::restart_loop(group, config.settle_timeout, stop_rx));
        let phase_end = Instant::now() + phase;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut ticks = 0u64;
        while Instant::now() < phase_end {
            tick.tick().await;
            ticks += 1;
            sample_lags(&mut handlers, config.slow_stall, violations);
            if ticks.is_multiple_of(10) {
                check_caches(&mut caches, &store, violations);
                replicas.check(
                    &mut outside,
                    || filtered(&server_state(&store), Filter::All),
                    violations,
                );
                requests.harvest(&sim);
                peak.sample(&caches, &handlers, &replicas, config.heap, violations);
            }
            if ticks.is_multiple_of(20) {
                consistency.check(violations).await;
            }
        }
        let _ = stop_tx.send(true);
        writer = write_task.await.expect("the writer does not panic");
        schedule = fault_task.await.expect("the fault schedule does not panic");
        // Quiescence, once the restart under way has brought its replica back.
        schedule.calm();
        group = restart_task.await.expect("the restarts do not panic");
        let settle = quiesce(
            &store,
            &caches,
            &mut handlers,
            &replicas,
            config,
            violations,
            "after the faults stopped",
        )
        .await;
        max_settle = max_settle.max(settle);
        consistency.check(violations).await;
        quiescent_checks += 1;
        requests.harvest(&sim);
        peak.sample(&caches, &handlers, &replicas, config.heap, violations);
    }

    for h in &handlers {
        let caught = (h.panics)();
        let thrown = h.recorder.deliberate_panics();
        if caught != thrown {
            violations.report(format!(
                "handler {}: {thrown} panics thrown, {caught} caught and counted",
                h.recorder.name()
            ));
        }
    }
    let strays = stray_panics.load(Ordering::SeqCst);
    if strays > 0 {
        violations.report(format!("{strays} panics outside the panicking handler"));
    }
    let server_writes = store.resource_version() - rv_start;
    let shard_report = ShardReport {
        replicas: shards::REPLICAS,
        restarts: group.restarts,
        hand_overs: group.hand_overs(),
        overlaps: group.overlaps(),
        lease_writes: group.lease_writes(),
        lists: requests.group_lists,
        watches: requests.group_watches,
    };
    group.shutdown(config.settle_timeout).await;
    factory.shutdown().await;
    sim.shutdown().await;

    let informers = caches.len() as u64;
    let (consistency_checks, consistency_skipped) = consistency.totals();
    let (count, first) = violations.0.lock().clone();
    debug_assert_eq!(count, violations.count());
    Ok(ChaosReport {
        seed: config.seed,
        seconds: config.seconds,
        elapsed: started.elapsed(),
        writes: writer.writes,
        server_writes,
        faults: schedule.fired,
        relists: requests.lists.saturating_sub(informers),
        continue_pages: requests.continue_pages,
        watch_restarts: requests.watches.saturating_sub(informers),
        quiescent_checks,
        consistency_checks,
        consistency_skipped,
        max_settle,
        handlers: handlers
            .iter()
            .map(|h| HandlerReport {
                name: h.recorder.name().to_owned(),
                heard: h.recorder.heard(),
                panics: (h.panics)(),
                max_lag: h.max_lag,
            })
            .collect(),
        shards: shard_report,
        max_cached: peak.max_cached,
        peak_rss: rss().map(|(_, hwm)| hwm),
        rss_bound: peak.rss_bound,
        peak_heap: config.heap.map(|m| (m.peak)() as u64),
        weights: weights
            .measured
            .then_some((weights.typed, weights.compact, weights.metadata)),
        violation_count: count,
        violations: first,
    })
}

async fn write_loop(mut writer: Writer, rate: u32, mut stop: watch::Receiver<bool>) -> Writer {
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let per_tick = f64::from(rate) / 100.0;
    let mut owed = 0.0;
    while !*stop.borrow() {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => break,
        }
        owed += per_tick;
        while owed >= 1.0 {
            writer.step().await;
            owed -= 1.0;
        }
    }
    writer
}

async fn fault_loop(
    mut schedule: faults::Schedule,
    (min, max): (Duration, Duration),
    mut stop: watch::Receiver<bool>,
) -> faults::Schedule {
    while !*stop.borrow() {
        let wait = schedule.next_wait(min, max);
        tokio::select! {
            _ = tokio::time::sleep(wait) => schedule.fire(),
            _ = stop.changed() => break,
        }
    }
    schedule
}

fn sample_lags(handlers: &mut [HandlerView], bound: Duration, violations: &Violations) {
    for h in handlers {
        let lag = (h.lag)().unwrap_or_default();
        h.max_lag = h.max_lag.max(lag);
        if !h.slow && lag >= bound && !h.lag_reported {
            h.lag_reported = true;
            violations.report(format!(
                "handler {}: a notification waited {lag:?}, as long as the slow handler's stall",
                h.recorder.name()
            ));
        }
    }
}

/// No cached object is ahead of the server's version of the same incarnation (the caches are
/// read before the server, which is never behind them), and no cached version goes back between
/// two checks.
fn check_caches(caches: &mut [CacheView], store: &Store, violations: &Violations) {
    let seen: Vec<BTreeMap<String, Held>> = caches.iter().map(|c| (c.state)()).collect();
    let server = server_state(store);
    for (c, now) in caches.iter_mut().zip(seen) {
        for (key, held) in &now {
            if let Some((s, _)) = server.get(key)
                && s.uid == held.uid
                && s.version < held.version
            {
                violations.report(format!(
                    "cache {}: {key} at {} is ahead of the server's {}",
                    c.name, held.version, s.version
                ));
            }
            if let Some(before) = c.last.get(key)
                && before.uid == held.uid
                && before.version > held.version
            {
                violations.report(format!(
                    "cache {}: {key} went back from {} to {}",
                    c.name, before.version, held.version
                ));
            }
        }
        c.last = now.into_iter().collect();
    }
}

/// Memory: resident memory stays under a fixed allowance plus the most the held objects have
/// weighed (an allocator keeps what was freed for reuse, so resident memory follows the high
/// water mark, not what is held now); where the heap is counted, the live heap stays under the
/// allowance plus what is held now.
#[derive(Default)]
struct Peak {
    baseline: Option<u64>,
    /// The live heap at the start, where it is counted.
    heap_baseline: Option<u64>,
    /// Whether the weights were measured: the allocator's slack is then added on top.
    measured: bool,
    /// Heap bytes one object of the sharded group's caches takes (a typed pod).
    shard_weight: u64,
    max_cached: usize,
    /// The most the held objects have weighed.
    max_held: u64,
    rss_bound: Option<u64>,
    rss_reported: bool,
    heap_reported: bool,
}

/// Memory allowed above the start whatever the caches hold: the server's bounded history, the
/// runtime, buffers, a relist's or a consistency check's list in flight.
const RSS_ALLOWANCE: u64 = 96 * 1024 * 1024;
/// Resident memory allowed per cached object or pending notification where the objects were
/// not weighed (a program without a counting allocator).
const RSS_PER_OBJECT: u64 = 64 * 1024;
/// Resident memory per heap byte held, where the objects were weighed: what the allocator
/// keeps besides the live bytes (free lists, per-thread arenas, fragments).
const ALLOCATOR_SLACK: (u64, u64) = (3, 2);
/// Live heap per byte the held objects weighed when measured: objects grow a little as the
/// writer's updates add `managedFields` entries.
const GROWTH: (u64, u64) = (5, 4);

impl Peak {
    /// What the held objects weigh: each cached object once (the sharded group's replicas
    /// decode their own, so theirs count too); each pending notification twice, since an
    /// update holds the old object as well as the new, and the old one may be held by nothing
    /// else.
    fn held(
        &self,
        caches: &[CacheView],
        handlers: &[HandlerView],
        group: &Replicas,
    ) -> (usize, u64, u64) {
        let mut cached = group.cached();
        let mut objects = cached as u64;
        let mut bytes = cached as u64 * self.shard_weight;
        for c in caches {
            let n = (c.state)().len();
            cached += n;
            objects += n as u64;
            bytes += n as u64 * c.weight;
        }
        for h in handlers {
            let n = (h.backlog)() as u64;
            objects += n;
            bytes += 2 * n * h.weight;
        }
        (cached, objects, bytes)
    }

    fn sample(
        &mut self,
        caches: &[CacheView],
        handlers: &[HandlerView],
        group: &Replicas,
        heap: Option<HeapMeter>,
        violations: &Violations,
    ) {
        let (cached, objects, bytes) = self.held(caches, handlers, group);
        let held = if self.measured {
            bytes * ALLOCATOR_SLACK.0 / ALLOCATOR_SLACK.1
        } else {
            RSS_PER_OBJECT * objects
        };
        self.max_held = self.max_held.max(held);
        if let (Some(meter), Some(start)) = (heap, self.heap_baseline) {
            let now = (meter.current)() as u64;
            let bound = start + RSS_ALLOWANCE + bytes * GROWTH.0 / GROWTH.1;
            if self.measured && now > bound && !self.heap_reported {
                self.heap_reported = true;
                violations.report(format!(
                    "live heap {} MiB over the bound {} MiB ({objects} objects cached or pending, weighing {} MiB)",
                    now >> 20,
                    bound >> 20,
                    bytes >> 20
                ));
            }
        }
        let (Some(baseline), Some((now, _))) = (self.baseline, rss()) else {
            return;
        };
        let bound = baseline + RSS_ALLOWANCE + self.max_held;
        self.max_cached = self.max_cached.max(cached);
        self.rss_bound = Some(bound);
        if now > bound && !self.rss_reported {
            self.rss_reported = true;
            violations.report(format!(
                "resident memory {} MiB over the bound {} MiB (at most {} MiB of objects held, with the allocator's share)",
                now >> 20,
                bound >> 20,
                self.max_held >> 20
            ));
        }
    }
}

/// Waits until every cache, every handler and the sharded group agree with the server (and
/// the server has stopped changing), or the settle timeout passes (then each disagreement is a
/// violation, reported as found `when`). Returns how long it took.
async fn quiesce(
    store: &Store,
    caches: &[CacheView],
    handlers: &mut [HandlerView],
    group: &Replicas,
    config: &ChaosConfig,
    violations: &Violations,
    when: &str,
) -> Duration {
    let started = Instant::now();
    let deadline = started + config.settle_timeout;
    loop {
        let rv = store.resource_version();
        let server = server_state(store);
        let mut disagreements = Vec::new();
        for c in caches {
            let want = filtered(&server, c.filter);
            let have = (c.state)();
            if have != want {
                disagreements.push(format!("cache {}: {}", c.name, diff(&have, &want)));
            }
        }
        for h in handlers.iter() {
            if (h.backlog)() > 0 {
                disagreements.push(format!(
                    "handler {}: {} notifications pending",
                    h.recorder.name(),
                    (h.backlog)()
                ));
                continue;
            }
            let want = filtered(&server, h.filter);
            let have = h.recorder.state();
            if have != want {
                disagreements.push(format!(
                    "handler {}: {}",
                    h.recorder.name(),
                    diff(&have, &want)
                ));
            }
        }
        disagreements.extend(group.disagreements(&filtered(&server, Filter::All)));
        if disagreements.is_empty() && rv == store.resource_version() {
            return started.elapsed();
        }
        if Instant::now() >= deadline {
            for d in disagreements {
                violations.report(format!(
                    "not equal to the server {:?} {when}: {d}",
                    config.settle_timeout
                ));
            }
            return started.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The first few differences between what is held and what the server has.
fn diff(have: &BTreeMap<String, Held>, want: &BTreeMap<String, Held>) -> String {
    let mut out = Vec::new();
    for (k, w) in want {
        match have.get(k) {
            None => out.push(format!("{k} missing (server {} at {})", w.uid, w.version)),
            Some(h) if h != w => out.push(format!(
                "{k} is {} at {}, server {} at {}",
                h.uid, h.version, w.uid, w.version
            )),
            Some(_) => {}
        }
    }
    for (k, h) in have {
        if !want.contains_key(k) {
            out.push(format!(
                "{k} ({} at {}) deleted on the server",
                h.uid, h.version
            ));
        }
    }
    let n = out.len();
    out.truncate(3);
    format!("{n} keys differ: {}", out.join("; "))
}
