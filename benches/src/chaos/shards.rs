//! The sharded group: three replicas of a typed pod informer, each caching only the pods whose
//! uid hashes into the ranges its `ShardMembership` holds, coordinated through one Lease each.
//! Each replica has its own client, so the faults hit its lists, watches and Lease calls. One
//! replica at a time is taken down and started again under the same identity (as a StatefulSet
//! pod comes back), alternately gracefully (it leaves the group) and abruptly (its membership is
//! aborted and its Lease left to expire).
//!
//! A recording [`ShardOwner`] around each replica's owner keeps, for the whole group, what each
//! replica acts on: a range from the moment `set_ranges` is called with it until a call without
//! it has returned. Two replicas acting on one range at once is a violation.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kinformer::client::{Api, Client, Config as ClientConfig};
use kinformer::coordination::{LeaseStore, ShardMembership, ShardMembershipConfig};
use kinformer::core::shard::{ShardKey, ShardOwner, ShardRanges};
use kinformer::core::{CacheRead, Object};
use kinformer::delta_fifo::DeltaFifo;
use kinformer::indexer::Indexer;
use kinformer::partition::CacheOwner;
use kinformer::reflector::StreamingList;
use kinformer::shared_informer::{InformerConfig, SharedIndexInformer};
use parking_lot::Mutex;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};

use super::history::Held;
use super::workload::TIER;
use super::{Error, Informer, Violations, diff, held_of, informer_config, reflector_config};

/// How many replicas the group has.
pub(crate) const REPLICAS: usize = 3;
/// The group's name: its Leases are `chaos-shards-replica-<i>`, in [`NAMESPACE`].
const GROUP: &str = "chaos-shards";
/// Where the group's Leases live.
const NAMESPACE: &str = "default";
/// Short timings, so that a replica that dies is replaced within a few seconds.
pub(crate) const LEASE_DURATION: Duration = Duration::from_secs(2);
const RENEW_DEADLINE: Duration = Duration::from_millis(1500);
const RETRY_PERIOD: Duration = Duration::from_millis(250);
/// The group's informers select the pods carrying the tier label: every pod the writer makes,
/// so all of them. The selector tells the group's requests apart in the server's log.
pub(crate) const SELECTOR: &str = TIER;
/// How long a cached object may lie outside the ranges its replica's membership holds before
/// that is a violation: the cache is read before the ranges, so a hand-over between the two
/// reads shows an object outside for a moment, never for a lease duration.
const OUTSIDE_GRACE: Duration = LEASE_DURATION;

/// Restarts of the group's replicas, by how they went down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Restarts {
    /// The replica left the group (its ranges released, its Lease deleted), then came back.
    pub graceful: u64,
    /// The replica's membership was aborted and its informer shut down without releasing
    /// anything (its Lease left to expire), then it came back.
    pub abrupt: u64,
    /// Restarts whose replica came back only once the others held the whole hash space.
    pub taken_over: u64,
    /// Of those, the longest the others took to hold the whole hash space after a graceful
    /// stop.
    pub slowest_graceful_take_over: Duration,
    /// The same after an abrupt death: its Lease had to expire first.
    pub slowest_abrupt_take_over: Duration,
}

impl Restarts {
    /// Every restart.
    pub fn total(self) -> u64 {
        self.graceful + self.abrupt
    }
}

/// What each replica acts on, as its owner's `set_ranges` calls say, for the whole group.
struct Ledger {
    acting: Mutex<Vec<ShardRanges>>,
    /// `set_ranges` calls.
    calls: AtomicU64,
    /// Times a replica started acting on a range another one was acting on.
    overlaps: AtomicU64,
    violations: Violations,
}

impl Ledger {
    fn new(violations: Violations) -> Self {
        Self {
            acting: Mutex::new(vec![ShardRanges::none(ShardKey::Uid); REPLICAS]),
            calls: AtomicU64::new(0),
            overlaps: AtomicU64::new(0),
            violations,
        }
    }

    /// Replica `index` is told to act on `owned`: it acts on what it did and on `owned` until
    /// the call returns. Anything another replica acts on now is acted on twice.
    fn called(&self, index: usize, owned: &ShardRanges) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let mut acting = self.acting.lock();
        acting[index] = acting[index].union(owned);
        for (other, theirs) in acting.iter().enumerate() {
            let both = theirs.intersection(&acting[index]);
            if other != index && !both.is_empty() {
                self.overlaps.fetch_add(1, Ordering::Relaxed);
                self.violations.report(format!(
                    "shard group: replica-{index} was told to act on {both} while replica-{other} still acted on it"
                ));
            }
        }
    }

    /// Replica `index`'s call returned: it acts on `owned` only.
    fn returned(&self, index: usize, owned: &ShardRanges) {
        self.acting.lock()[index] = owned.clone();
    }

    /// Replica `index` is gone (its informer has stopped): it acts on nothing.
    fn gone(&self, index: usize) {
        self.acting.lock()[index] = ShardRanges::none(ShardKey::Uid);
    }

    fn acting(&self, index: usize) -> ShardRanges {
        self.acting.lock()[index].clone()
    }
}

/// A replica's owner as membership drives it, recorded in the group's [`Ledger`].
struct Recording {
    index: usize,
    inner: CacheOwner<Pod>,
    ledger: Arc<Ledger>,
}

#[async_trait::async_trait]
impl ShardOwner for Recording {
    async fn set_ranges(&self, owned: ShardRanges) {
        self.ledger.called(self.index, &owned);
        self.inner.set_ranges(owned.clone()).await;
        self.ledger.returned(self.index, &owned);
    }
}

/// A replica's Leases over HTTP, counting the writes the server answered as done: the
/// server's resourceVersion counts them beside the pods' writes.
struct CountedLeases {
    api: Api<Lease>,
    writes: Arc<AtomicU64>,
}

impl CountedLeases {
    fn count<T>(
        &self,
        result: Result<T, kinformer::coordination::Error>,
    ) -> Result<T, kinformer::coordination::Error> {
        if result.is_ok() {
            self.writes.fetch_add(1, Ordering::Relaxed);
        }
        result
    }
}

#[async_trait::async_trait]
impl LeaseStore for CountedLeases {
    async fn get(&self, name: &str) -> Result<Lease, kinformer::coordination::Error> {
        LeaseStore::get(&self.api, name).await
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, kinformer::coordination::Error> {
        let result = LeaseStore::create(&self.api, lease).await;
        self.count(result)
    }

    async fn update(&self, lease: &Lease) -> Result<Lease, kinformer::coordination::Error> {
        let result = LeaseStore::update(&self.api, lease).await;
        self.count(result)
    }

    async fn delete(
        &self,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<(), kinformer::coordination::Error> {
        let result = LeaseStore::delete(&self.api, name, resource_version).await;
        self.count(result)
    }

    async fn list(
        &self,
        label_selector: &str,
    ) -> Result<Vec<Lease>, kinformer::coordination::Error> {
        LeaseStore::list(&self.api, label_selector).await
    }
}

/// A running replica.
struct Instance {
    informer: Arc<Informer<Pod>>,
    informer_run: JoinHandle<()>,
    membership: JoinHandle<()>,
    stop: oneshot::Sender<()>,
}

/// What the checks see of a running replica.
#[derive(Clone)]
struct Live {
    cache: Arc<Indexer<Pod>>,
    /// What its membership says its owner holds.
    held: watch::Receiver<ShardRanges>,
    /// Which start of a replica this is, counted over the group.
    incarnation: u64,
}

/// The group's replicas as the checks see them, shared with the task that restarts them: a
/// replica is here from its start until its informer has stopped and been dropped.
#[derive(Clone, Default)]
pub(crate) struct Replicas(Arc<Mutex<Vec<Option<Live>>>>);

/// Since when each cached object of a replica has lain outside the ranges it holds, between
/// two continuous checks.
#[derive(Default)]
pub(crate) struct Outside {
    since: HashMap<(usize, u64, String), Instant>,
    reported: HashSet<(usize, u64, String)>,
}

impl Replicas {
    fn set(&self, index: usize, live: Option<Live>) {
        let mut all = self.0.lock();
        if all.len() < REPLICAS {
            all.resize(REPLICAS, None);
        }
        all[index] = live;
    }

    fn live(&self) -> Vec<(usize, Live)> {
        let all = self.0.lock();
        all.iter()
            .enumerate()
            .filter_map(|(i, l)| l.clone().map(|l| (i, l)))
            .collect()
    }

    /// The objects the replicas' caches hold together.
    pub(crate) fn cached(&self) -> usize {
        self.live()
            .iter()
            .map(|(_, l)| l.cache.list_keys().len())
            .sum()
    }

    /// The continuous check: no replica keeps an object outside the ranges it holds for
    /// [`OUTSIDE_GRACE`], and no cached object is ahead of the server's version of the same
    /// incarnation (the caches are read before the server).
    pub(crate) fn check(
        &self,
        outside: &mut Outside,
        server: impl FnOnce() -> BTreeMap<String, Held>,
        violations: &Violations,
    ) {
        let now = Instant::now();
        let mut seen = HashMap::new();
        let mut cached = Vec::new();
        for (index, live) in self.live() {
            // The cache first, then the ranges: an object taken in between is in both.
            let pods = CacheRead::list(&*live.cache);
            let held = live.held.borrow().clone();
            let mut late = Vec::new();
            for pod in pods.iter().filter(|p| !held.contains(&***p)) {
                let key = (index, live.incarnation, pod.key().to_string());
                let since = outside.since.get(&key).copied().unwrap_or(now);
                if now - since >= OUTSIDE_GRACE && outside.reported.insert(key.clone()) {
                    late.push(key.2.clone());
                }
                seen.insert(key, since);
            }
            if !late.is_empty() {
                violations.report(format!(
                    "shard group: replica-{index} has cached {} pods outside the ranges it holds ({:.1}% of the hash space) for {OUTSIDE_GRACE:?} or more: {}",
                    late.len(),
                    held.fraction() * 100.0,
                    first_few(&late)
                ));
            }
            cached.push((index, pods));
        }
        outside.since = seen;
        let server = server();
        for (index, pods) in cached {
            for pod in pods {
                let key = pod.key().to_string();
                let held = held_of(&*pod);
                if let Some(s) = server.get(&key)
                    && s.uid == held.uid
                    && s.version < held.version
                {
                    violations.report(format!(
                        "shard group: replica-{index} caches {key} at {}, ahead of the server's {}",
                        held.version, s.version
                    ));
                }
            }
        }
    }

    /// What keeps the group from agreeing with the server at a quiescent point, where `pods`
    /// are the server's: every replica up, holding ranges that together cover the hash space
    /// exactly once, each caching only pods of its ranges, and the caches together holding the
    /// server's pods (keys, uids and versions), none in two caches. Empty when all holds.
    pub(crate) fn disagreements(&self, pods: &BTreeMap<String, Held>) -> Vec<String> {
        let live = self.live();
        let mut out = Vec::new();
        if live.len() < REPLICAS {
            out.push(format!(
                "shard group: {} of {REPLICAS} replicas are up",
                live.len()
            ));
        }
        let held: Vec<ShardRanges> = live.iter().map(|(_, l)| l.held.borrow().clone()).collect();
        let mut covered = ShardRanges::none(ShardKey::Uid);
        let mut once = true;
        for h in &held {
            once &= !h.is_empty() && covered.intersection(h).is_empty();
            covered = covered.union(h);
        }
        if !once || !covered.is_all() {
            let each: Vec<String> = live
                .iter()
                .zip(&held)
                .map(|((i, _), h)| format!("replica-{i} holds {:.1}% ({h})", h.fraction() * 100.0))
                .collect();
            out.push(format!(
                "shard group: the held ranges do not cover the hash space exactly once: {}",
                each.join("; ")
            ));
        }
        let mut have: BTreeMap<String, (usize, Held)> = BTreeMap::new();
        let mut twice = Vec::new();
        let mut strays = Vec::new();
        for ((index, l), h) in live.iter().zip(&held) {
            for pod in CacheRead::list(&*l.cache) {
                let key = pod.key().to_string();
                if !h.contains(&*pod) {
                    strays.push(format!("{key} in replica-{index}"));
                }
                if let Some((first, _)) = have.insert(key.clone(), (*index, held_of(&*pod))) {
                    twice.push(format!("{key} in replica-{first} and replica-{index}"));
                }
            }
        }
        if !strays.is_empty() {
            out.push(format!(
                "shard group: {} cached pods lie outside their replica's ranges: {}",
                strays.len(),
                first_few(&strays)
            ));
        }
        if !twice.is_empty() {
            out.push(format!(
                "shard group: {} pods are in two caches: {}",
                twice.len(),
                first_few(&twice)
            ));
        }
        let have: BTreeMap<String, Held> = have.into_iter().map(|(k, (_, h))| (k, h)).collect();
        if have != *pods {
            out.push(format!(
                "shard group: the caches together: {}",
                diff(&have, pods)
            ));
        }
        out
    }
}

fn first_few(items: &[String]) -> String {
    let few: Vec<&str> = items.iter().take(3).map(String::as_str).collect();
    few.join("; ")
}

/// The group: its replicas, what they act on, and the seeded choice of restarts.
pub(crate) struct Group {
    client: ClientConfig,
    seed: u64,
    instances: Vec<Option<Instance>>,
    replicas: Replicas,
    ledger: Arc<Ledger>,
    /// Lease writes the server answered as done, over every replica.
    lease_writes: Arc<AtomicU64>,
    rng: fastrand::Rng,
    /// Replicas started so far: each start's number tells its incarnation apart.
    starts: u64,
    violations: Violations,
    pub(crate) restarts: Restarts,
}

impl Group {
    /// Starts the replicas, each with its own client made from `client`.
    pub(crate) fn start(
        client: ClientConfig,
        seed: u64,
        violations: &Violations,
    ) -> Result<Self, Error> {
        let mut group = Self {
            client,
            seed,
            instances: (0..REPLICAS).map(|_| None).collect(),
            replicas: Replicas::default(),
            ledger: Arc::new(Ledger::new(violations.clone())),
            lease_writes: Arc::default(),
            rng: fastrand::Rng::with_seed(seed ^ 0x5ba4d),
            starts: 0,
            violations: violations.clone(),
            restarts: Restarts::default(),
        };
        for index in 0..REPLICAS {
            group.start_replica(index)?;
        }
        Ok(group)
    }

    /// The replicas as the checks see them.
    pub(crate) fn replicas(&self) -> Replicas {
        self.replicas.clone()
    }

    /// `set_ranges` calls so far.
    pub(crate) fn hand_overs(&self) -> u64 {
        self.ledger.calls.load(Ordering::Relaxed)
    }

    /// Lease writes the server answered as done.
    pub(crate) fn lease_writes(&self) -> u64 {
        self.lease_writes.load(Ordering::Relaxed)
    }

    /// Times two replicas acted on one range at once.
    pub(crate) fn overlaps(&self) -> u64 {
        self.ledger.overlaps.load(Ordering::Relaxed)
    }

    fn start_replica(&mut self, index: usize) -> Result<(), Error> {
        let incarnation = self.starts;
        self.starts += 1;
        let name = format!("pods-shard-{index}");
        let client = Client::new(self.client.clone())?;
        let config = reflector_config(
            &name,
            Some(SELECTOR),
            self.seed ^ self.starts.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            StreamingList::default(),
        );
        // The replica acts on nothing until the group gives it ranges.
        let (events, shards) = kinformer::partition::sharded(
            Api::<Pod>::all(client.clone()),
            ShardRanges::none(ShardKey::Uid),
            config,
        );
        let cache = Arc::new(Indexer::new());
        let queue = Arc::new(DeltaFifo::new(cache.clone()));
        let informer = Arc::new(SharedIndexInformer::new(
            events,
            queue,
            cache.clone(),
            InformerConfig {
                // Its events come from a merge of partitions: the cache version moves with the
                // merge's bookmarks only.
                merged_source: true,
                ..informer_config(&name)
            },
        ));
        let informer_run = tokio::spawn({
            let informer = Arc::clone(&informer);
            async move { informer.run().await }
        });
        let owner = Recording {
            index,
            inner: shards.owner(cache.clone()),
            ledger: Arc::clone(&self.ledger),
        };
        let config = ShardMembershipConfig {
            lease_duration: LEASE_DURATION,
            renew_deadline: RENEW_DEADLINE,
            retry_period: RETRY_PERIOD,
            ..ShardMembershipConfig::new(GROUP, format!("replica-{index}"))
        };
        let leases = CountedLeases {
            api: Api::namespaced(client, NAMESPACE),
            writes: Arc::clone(&self.lease_writes),
        };
        let membership = ShardMembership::new(leases, owner, config)?;
        let held = membership.held();
        let (stop, stopped) = oneshot::channel::<()>();
        let membership = tokio::spawn(membership.run(async {
            let _ = stopped.await;
        }));
        self.instances[index] = Some(Instance {
            informer,
            informer_run,
            membership,
            stop,
        });
        self.replicas.set(
            index,
            Some(Live {
                cache,
                held,
                incarnation,
            }),
        );
        Ok(())
    }

    /// Takes replica `index` down: gracefully (it leaves the group, then its informer stops)
    /// or abruptly (its membership is aborted, releasing nothing, then its informer stops).
    /// Each step is bounded by `bound`; one that overruns is a violation.
    async fn stop_replica(&mut self, index: usize, abrupt: bool, bound: Duration) {
        let Some(mut instance) = self.instances[index].take() else {
            return;
        };
        if abrupt {
            instance.membership.abort();
            let _ = (&mut instance.membership).await;
        } else {
            let _ = instance.stop.send(());
            if timeout(bound, &mut instance.membership).await.is_err() {
                self.violations.report(format!(
                    "shard group: replica-{index} did not leave the group within {bound:?}"
                ));
                instance.membership.abort();
                let _ = (&mut instance.membership).await;
            } else {
                let acting = self.ledger.acting(index);
                if !acting.is_empty() {
                    self.violations.report(format!(
                        "shard group: replica-{index} left the group still acting on {acting}"
                    ));
                }
            }
        }
        if timeout(bound, instance.informer.shutdown()).await.is_err() {
            self.violations.report(format!(
                "shard group: replica-{index}'s informer did not stop within {bound:?}"
            ));
        }
        instance.informer_run.abort();
        let _ = instance.informer_run.await;
        // Its informer has stopped: whatever it was told, it acts on nothing now.
        self.ledger.gone(index);
        drop(instance.informer);
        self.replicas.set(index, None);
    }

    /// Takes one replica, chosen by the seed, down and starts it again under the same
    /// identity. Four kinds take turns: a graceful stop and an abrupt death, each first
    /// waiting (within `bound`) until the others hold the whole hash space (at their next look
    /// after a graceful stop, once its Lease has expired after an abrupt death), then each
    /// coming back before that could happen. Each then stays down a little longer, seeded, up
    /// to a lease duration.
    async fn restart_one(&mut self, bound: Duration) {
        let n = self.restarts.total();
        let abrupt = n % 2 == 1;
        let take_over = (n / 2).is_multiple_of(2);
        let index = self.rng.usize(0..REPLICAS);
        let lease = LEASE_DURATION.as_millis() as u64;
        let down = Duration::from_millis(self.rng.u64(0..=lease));
        tracing::info!(
            index,
            abrupt,
            take_over,
            ?down,
            "chaos: restarting a replica of the sharded group"
        );
        self.stop_replica(index, abrupt, bound).await;
        if abrupt {
            self.restarts.abrupt += 1;
        } else {
            self.restarts.graceful += 1;
        }
        if take_over {
            self.await_take_over(index, abrupt, bound).await;
        }
        // The replica stays down this long more: a schedule, not a wait for a condition.
        tokio::time::sleep(down).await;
        if let Err(e) = self.start_replica(index) {
            self.violations.report(format!(
                "shard group: replica-{index} could not start again: {e}"
            ));
        }
    }

    /// Waits until the replicas up hold the whole hash space between them, after replica
    /// `index` went down; past `bound`, that is a violation.
    async fn await_take_over(&mut self, index: usize, abrupt: bool, bound: Duration) {
        let started = Instant::now();
        loop {
            let mut held = ShardRanges::none(ShardKey::Uid);
            for (_, live) in self.replicas.live() {
                held = held.union(&live.held.borrow());
            }
            let took = started.elapsed();
            if held.is_all() {
                self.restarts.taken_over += 1;
                let slowest = if abrupt {
                    &mut self.restarts.slowest_abrupt_take_over
                } else {
                    &mut self.restarts.slowest_graceful_take_over
                };
                *slowest = (*slowest).max(took);
                return;
            }
            if took >= bound {
                self.violations.report(format!(
                    "shard group: the other replicas did not take replica-{index}'s ranges over within {bound:?} (they hold {:.1}% of the hash space)",
                    held.fraction() * 100.0
                ));
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops every replica at the end, abruptly: nothing is checked after the last quiescence.
    pub(crate) async fn shutdown(mut self, bound: Duration) {
        for index in 0..REPLICAS {
            self.stop_replica(index, true, bound).await;
        }
    }
}

/// Restarts replicas while a phase lasts: one at its start, then one every 2-5 s (seeded),
/// until `stop`. A restart begun always finishes, so every replica is up when this returns.
pub(crate) async fn restart_loop(
    mut group: Group,
    bound: Duration,
    mut stop: watch::Receiver<bool>,
) -> Group {
    loop {
        group.restart_one(bound).await;
        let gap = Duration::from_millis(group.rng.u64(2_000..=5_000));
        tokio::select! {
            () = tokio::time::sleep(gap) => {}
            _ = stop.changed() => {}
        }
        if *stop.borrow() || stop.has_changed().is_err() {
            return group;
        }
    }
}
