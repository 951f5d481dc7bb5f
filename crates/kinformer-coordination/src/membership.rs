//! Shard membership: replicas of a group split the hash space between them through one Lease
//! each, and hand ranges over without two acting on one at once.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kinformer_core::Object as _;
use kinformer_core::shard::{ShardKey, ShardOwner, ShardRanges};
use kinformer_core::validation;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until, timeout, timeout_at};
use tracing::Instrument as _;

use crate::timing::{
    self, DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, Observed,
    holder_of, jittered, lease_duration_of, lease_duration_seconds, now_micro,
};
use crate::{Error, LeaseStore};

/// The label that puts a Lease in a group: its value is the group's name.
pub const SHARD_GROUP_LABEL: &str = "kinformer.io/shard-group";

/// The annotation on each member's Lease that says which ranges its holder holds: the
/// `shardSelector` form of the ranges ([`ShardRanges::to_selector`]), empty for none. It may
/// say more than the holder acts on (a claim not yet acted on), never less.
pub const SHARD_RANGES_ANNOTATION: &str = "kinformer.io/shard-ranges";

/// How much a round's period is stretched at random, at most, so that replicas started
/// together do not claim in lockstep. Below [`JITTER_FACTOR`](crate::JITTER_FACTOR) − 1, so a
/// renewal comes within `retry_period * JITTER_FACTOR`, which validation keeps under the renew
/// deadline.
const ROUND_JITTER: f64 = 0.2;

/// What a [`ShardMembership`] needs: the group, who this replica is, the hashed field, and the
/// same three timings as leader election.
///
/// ```
/// use kinformer_coordination::ShardMembershipConfig;
///
/// let config = ShardMembershipConfig::new("indexers", "pod-a");
/// assert_eq!(config.lease_name(), "indexers-pod-a");
/// assert_eq!(config.label_selector(), "kinformer.io/shard-group=indexers");
/// assert!(config.validate().is_ok());
/// assert!(ShardMembershipConfig::new("Indexers", "pod-a").validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardMembershipConfig {
    /// The group's name: a DNS-1123 label, the value of [`SHARD_GROUP_LABEL`] on every member's
    /// Lease, and the start of each Lease's name.
    pub group: String,
    /// This replica's identity, unique among the group's live replicas (a pod's name, say):
    /// its Lease's `holderIdentity`, and the rest of its Lease's name (`<group>-<identity>`).
    pub identity: String,
    /// Which field of an object is hashed. Every member of a group must use the same.
    pub key: ShardKey,
    /// How long others wait, after they last saw a member's Lease change, before they count it
    /// gone and take its ranges. Written as `leaseDurationSeconds`, rounded up to whole
    /// seconds. Default 15 s.
    pub lease_duration: Duration,
    /// How long a replica keeps trying to renew its Lease before it lets go of every range.
    /// Default 10 s.
    pub renew_deadline: Duration,
    /// How often a replica renews its Lease and looks at the group. Default 2 s.
    pub retry_period: Duration,
}

impl ShardMembershipConfig {
    /// The configuration hashing uids, with leader election's usual timings (15 s, 10 s, 2 s).
    pub fn new(group: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            identity: identity.into(),
            key: ShardKey::Uid,
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }

    /// The name of this replica's Lease: `<group>-<identity>`.
    pub fn lease_name(&self) -> String {
        format!("{}-{}", self.group, self.identity)
    }

    /// The label selector of the group's Leases: `kinformer.io/shard-group=<group>`.
    pub fn label_selector(&self) -> String {
        format!("{SHARD_GROUP_LABEL}={}", self.group)
    }

    /// The timings as leader election checks them (`lease_duration > renew_deadline >
    /// retry_period *` [`JITTER_FACTOR`](crate::JITTER_FACTOR), all above zero), a non-empty
    /// identity, a group that is a DNS-1123 label, and a Lease name that is a DNS-1123
    /// subdomain.
    pub fn validate(&self) -> Result<(), Error> {
        timing::validate(
            &self.identity,
            self.lease_duration,
            self.renew_deadline,
            self.retry_period,
        )?;
        let problems = validation::is_dns1123_label(&self.group);
        if !problems.is_empty() {
            return Err(Error::InvalidName {
                what: "group",
                value: self.group.clone(),
                problems: problems.join("; "),
            });
        }
        timing::validate_lease_name(&self.lease_name())
    }
}

/// One replica of a group that splits the hash space of [`ShardKey`] between its live members,
/// and tells a [`ShardOwner`] which ranges to act on.
///
/// Each replica holds one Lease of its own (`<group>-<identity>`, labelled
/// [`SHARD_GROUP_LABEL`]` = <group>`, held by its identity) and renews it every retry period.
/// Every retry period it also lists the group's Leases: the live ones are the members (a Lease
/// with no holder is not live, and one held by another counts as gone once its record has not
/// changed for its `leaseDurationSeconds` as measured by this process's monotonic clock since
/// it last saw it change). Every replica derives the same assignment from the sorted member
/// identities: member `i` of `n` owns [`ShardRanges::split`]`(key, n, i)`.
///
/// Ranges change hands by the rules in the [crate documentation](crate#shard-membership), so
/// that no range is acted on by two live replicas at once, and none is left unowned for much
/// more than a lease duration after its holder dies.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use kinformer_coordination::{MemoryLeaseStore, ShardMembership, ShardMembershipConfig};
/// use kinformer_core::shard::{ShardOwner, ShardRanges};
///
/// /// A worker pool that would start and stop work by range.
/// struct Workers;
///
/// #[async_trait::async_trait]
/// impl ShardOwner for Workers {
///     async fn set_ranges(&self, owned: ShardRanges) {
///         // Stop the work on ranges no longer owned before returning; start the rest.
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let store = MemoryLeaseStore::new();
/// let member = ShardMembership::new(
///     store.clone(),
///     Arc::new(Workers),
///     ShardMembershipConfig::new("indexers", "pod-a"),
/// )
/// .unwrap();
/// let mut held = member.held();
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let run = tokio::spawn(member.run(async { stopped.await.ok(); }));
///
/// // Alone in its group, it takes the whole space.
/// held.wait_for(ShardRanges::is_all).await.unwrap();
/// stop.send(()).unwrap();
/// run.await.unwrap();
/// assert!(held.borrow().is_empty());
/// # }
/// ```
pub struct ShardMembership {
    store: Arc<dyn LeaseStore>,
    owner: Arc<dyn ShardOwner>,
    config: ShardMembershipConfig,
    held: watch::Sender<ShardRanges>,
    members: watch::Sender<Vec<String>>,
}

impl fmt::Debug for ShardMembership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardMembership")
            .field("config", &self.config)
            .field("held", &*self.held.borrow())
            .field("members", &*self.members.borrow())
            .finish_non_exhaustive()
    }
}

impl ShardMembership {
    /// A replica with this configuration ([`validated`](ShardMembershipConfig::validate)),
    /// coordinating through `store` and telling `owner` what to act on. The owner is assumed to
    /// act on nothing yet. Nothing happens until [`run`](Self::run).
    pub fn new(
        store: impl LeaseStore + 'static,
        owner: impl ShardOwner + 'static,
        config: ShardMembershipConfig,
    ) -> Result<Self, Error> {
        config.validate()?;
        let none = ShardRanges::none(config.key);
        Ok(Self {
            store: Arc::new(store),
            owner: Arc::new(owner),
            config,
            held: watch::channel(none).0,
            members: watch::channel(Vec::new()).0,
        })
    }

    /// The ranges the owner holds: what it was last told, once its
    /// [`set_ranges`](ShardOwner::set_ranges) returned.
    pub fn held(&self) -> watch::Receiver<ShardRanges> {
        self.held.subscribe()
    }

    /// The group's live members as this replica last saw them, sorted by identity (itself
    /// included while its own Lease is renewed in time; empty once stopped).
    pub fn members(&self) -> watch::Receiver<Vec<String>> {
        self.members.subscribe()
    }

    /// The configuration.
    pub fn config(&self) -> &ShardMembershipConfig {
        &self.config
    }

    /// Takes part in the group until `shutdown` completes, then stops gracefully: the owner
    /// lets go of every range first, then this replica's Lease is deleted, so the others take
    /// its ranges over at their next look instead of after a lease duration. A round in
    /// progress is cut short at its next store call; an owner's `set_ranges` in progress is
    /// waited for.
    ///
    /// Dropping the returned future instead stops at once, releasing nothing: the owner is not
    /// told, and the Lease is left to expire, as when the process dies.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let span = tracing::info_span!(
            "shard_membership",
            group = %self.config.group,
            identity = %self.config.identity,
        );
        let (stop_tx, stop) = watch::channel(false);
        let mut replica = Replica::new(self, stop);
        let signal = async move {
            shutdown.await;
            let _ = stop_tx.send(true);
            std::future::pending::<()>().await;
        };
        async move {
            tracing::info!("joining the group");
            tokio::select! {
                () = signal => {}
                () = replica.rounds() => {}
            }
            replica.stop().await;
        }
        .instrument(span)
        .await;
    }
}

/// What this replica saw of the group in one list.
#[derive(Debug)]
struct View {
    /// The live members' identities, sorted, this replica included when it is healthy.
    members: Vec<String>,
    /// What the other live members' annotations hold.
    others: ShardRanges,
}

/// A replica's state while it runs.
struct Replica {
    store: Arc<dyn LeaseStore>,
    owner: Arc<dyn ShardOwner>,
    config: ShardMembershipConfig,
    held_tx: watch::Sender<ShardRanges>,
    members_tx: watch::Sender<Vec<String>>,
    stop: watch::Receiver<bool>,
    lease_name: String,
    selector: String,
    /// Our Lease as last read or written: its resourceVersion is the next update's
    /// precondition. `None` to read it first.
    own: Option<Lease>,
    /// What the owner holds.
    held: ShardRanges,
    /// When the last successful write of our Lease started: a bound from below on when the
    /// server took it, and so on when the others can see it expire.
    last_written: Option<Instant>,
    /// Every other Lease of the group: its resourceVersion as last seen, and since when.
    observed: HashMap<String, Observed<String>>,
}

impl Replica {
    fn new(m: ShardMembership, stop: watch::Receiver<bool>) -> Self {
        Self {
            lease_name: m.config.lease_name(),
            selector: m.config.label_selector(),
            held: ShardRanges::none(m.config.key),
            store: m.store,
            owner: m.owner,
            config: m.config,
            held_tx: m.held,
            members_tx: m.members,
            stop,
            own: None,
            last_written: None,
            observed: HashMap::new(),
        }
    }

    fn stopping(&self) -> bool {
        *self.stop.borrow() || self.stop.has_changed().is_err()
    }

    /// When this replica must have let go of every range unless it writes its Lease again.
    fn deadline(&self) -> Option<Instant> {
        self.last_written.map(|t| t + self.config.renew_deadline)
    }

    /// Whether the last successful write of our Lease is within the renew deadline.
    fn healthy(&self, now: Instant) -> bool {
        self.deadline().is_some_and(|d| now < d)
    }

    /// The bound on a store call starting now: the renew deadline while healthy (past it the
    /// answer is of no use), one renew deadline from now otherwise.
    fn call_deadline(&self) -> Instant {
        let now = Instant::now();
        match self.deadline() {
            Some(d) if d > now => d,
            _ => now + self.config.renew_deadline,
        }
    }

    /// `call`, bounded by [`call_deadline`](Self::call_deadline) and cut short by a stop:
    /// `None` when it did not finish.
    async fn bounded<T>(&self, call: impl Future<Output = Result<T, Error>>) -> Option<T> {
        let mut stop = self.stop.clone();
        let result = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => return None,
            result = timeout_at(self.call_deadline(), call) => result,
        };
        match result {
            Ok(Ok(value)) => Some(value),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "the Lease store failed");
                None
            }
            Err(_) => {
                tracing::debug!("the Lease store did not answer in time");
                None
            }
        }
    }

    /// Rounds, every retry period (stretched a little at random), until a stop. Between
    /// rounds, lets go of every range as soon as the renew deadline passes.
    async fn rounds(&mut self) {
        loop {
            self.round().await;
            if self.stopping() {
                return;
            }
            let next = Instant::now() + jittered(self.config.retry_period, ROUND_JITTER);
            loop {
                let wake = match self.deadline() {
                    Some(d) if d < next && !self.held.is_empty() => d,
                    _ => next,
                };
                let mut stop = self.stop.clone();
                tokio::select! {
                    biased;
                    _ = stop.wait_for(|s| *s) => return,
                    () = sleep_until(wake) => {}
                }
                if Instant::now() >= next {
                    break;
                }
                self.let_go_if_late().await;
            }
        }
    }

    /// One round: renew, look at the group, release what is no longer ours, claim what is.
    async fn round(&mut self) {
        self.let_go_if_late().await;
        let held = self.held.clone();
        if !self.write_own(&held).await {
            self.let_go_if_late().await;
            return;
        }
        let Some(view) = self.view().await else {
            return;
        };
        let target = match view.members.binary_search(&self.config.identity) {
            Ok(i) => ShardRanges::split(self.config.key, view.members.len(), i),
            Err(_) => ShardRanges::none(self.config.key),
        };

        // Release first: the owner lets go, and only then does the annotation say so.
        let release = self.held.difference(&target);
        if !release.is_empty() {
            tracing::info!(ranges = %release, "releasing");
            let keep = self.held.difference(&release);
            self.set_held(keep).await;
            let held = self.held.clone();
            self.write_own(&held).await;
        }

        // Claim before acting: what is ours and held by no other live member is written into
        // our annotation; it is acted on only if, after that write, no other live member's
        // annotation holds any of it (two replicas whose views of the group differ for a
        // moment may claim the same free range: both see each other's claim and step back).
        let want = target.difference(&self.held).difference(&view.others);
        if want.is_empty() || self.stopping() || !self.healthy(Instant::now()) {
            return;
        }
        let claim = self.held.union(&want);
        if !self.write_own(&claim).await {
            return;
        }
        let Some(after) = self.view().await else {
            return;
        };
        let grant = want.difference(&after.others);
        if grant != want {
            tracing::debug!(
                contested = %want.difference(&grant),
                "another member claimed some of the same ranges: stepping back from those"
            );
            let annotation = self.held.union(&grant);
            self.write_own(&annotation).await;
        }
        if grant.is_empty() || self.stopping() || !self.healthy(Instant::now()) {
            return;
        }
        tracing::info!(ranges = %grant, "taking");
        let now_held = self.held.union(&grant);
        self.set_held(now_held).await;
    }

    /// Lets go of every range if the renew deadline has passed: others may take them once our
    /// Lease looks expired to them, a lease duration after our last write at the earliest.
    async fn let_go_if_late(&mut self) {
        if self.healthy(Instant::now()) {
            return;
        }
        self.publish_members(Vec::new());
        if !self.held.is_empty() {
            tracing::warn!(
                renew_deadline = ?self.config.renew_deadline,
                "the Lease was not renewed within the renew deadline: letting go of every range"
            );
            self.set_held(ShardRanges::none(self.config.key)).await;
        }
    }

    /// Tells the owner, waits for it, and publishes what it holds.
    async fn set_held(&mut self, ranges: ShardRanges) {
        self.owner.set_ranges(ranges.clone()).await;
        self.held = ranges.clone();
        self.held_tx.send_replace(ranges);
    }

    fn publish_members(&self, members: Vec<String>) {
        self.members_tx.send_if_modified(|m| {
            if *m == members {
                return false;
            }
            tracing::info!(?members, "members");
            *m = members;
            true
        });
    }

    /// Writes our Lease, renewed, with `ranges` as its annotation (creating it when absent);
    /// whether that succeeded.
    async fn write_own(&mut self, ranges: &ShardRanges) -> bool {
        let start = Instant::now();
        let store = self.store.clone();
        let mut own = self.own.clone();
        let written = self
            .bounded(async {
                // Twice at most: a conflict or a missing Lease is read again once.
                let mut last = None;
                for _ in 0..2 {
                    let current = match own.take() {
                        Some(lease) => Some(lease),
                        None => match store.get(&self.lease_name).await {
                            Ok(lease) => Some(lease),
                            Err(Error::NotFound { .. }) => None,
                            Err(e) => return Err(e),
                        },
                    };
                    let result = match current {
                        Some(lease) => store.update(&self.renewed(lease, ranges)).await,
                        None => {
                            let mut lease = Lease::default();
                            lease.metadata.name = Some(self.lease_name.clone());
                            store.create(&self.renewed(lease, ranges)).await
                        }
                    };
                    match result {
                        Err(e @ (Error::Conflict { .. } | Error::NotFound { .. })) => {
                            last = Some(e);
                        }
                        other => return other,
                    }
                }
                Err(last.unwrap_or(Error::Conflict {
                    name: self.lease_name.clone(),
                }))
            })
            .await;
        match written {
            Some(stored) => {
                self.own = Some(stored);
                self.last_written = Some(start);
                true
            }
            None => {
                // Read it again next time: the version we had may be stale.
                self.own = None;
                false
            }
        }
    }

    /// `lease` as this replica writes it: in the group, held by us, renewed now, annotated
    /// with `ranges`.
    fn renewed(&self, mut lease: Lease, ranges: &ShardRanges) -> Lease {
        let labels = lease.metadata.labels.get_or_insert_with(BTreeMap::new);
        labels.insert(SHARD_GROUP_LABEL.to_owned(), self.config.group.clone());
        let annotations = lease.metadata.annotations.get_or_insert_with(BTreeMap::new);
        annotations.insert(SHARD_RANGES_ANNOTATION.to_owned(), ranges.to_selector());
        let now = now_micro();
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            spec.holder_identity = Some(self.config.identity.clone());
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions =
                Some(spec.lease_transitions.map_or(0, |t| t.saturating_add(1)));
        }
        spec.lease_duration_seconds = Some(lease_duration_seconds(self.config.lease_duration));
        spec.renew_time = Some(now);
        lease
    }

    /// Lists the group and updates what this replica has observed of it.
    async fn view(&mut self) -> Option<View> {
        let store = self.store.clone();
        let leases = self.bounded(store.list(&self.selector)).await?;
        let now = Instant::now();
        let mut members = Vec::new();
        let mut others = ShardRanges::none(self.config.key);
        let mut seen = HashMap::with_capacity(leases.len());
        for lease in &leases {
            let name = lease.name();
            if name == self.lease_name {
                continue;
            }
            let version = lease.resource_version().unwrap_or_default().to_owned();
            let observed = match self.observed.remove(name) {
                Some(mut o) => {
                    o.see(version, now);
                    o
                }
                None => Observed::new(version, now),
            };
            let spec = lease.spec.as_ref();
            let live = holder_of(spec)
                .filter(|h| *h != self.config.identity)
                .filter(|_| observed.unexpired(lease_duration_of(spec), now));
            seen.insert(name.to_owned(), observed);
            let Some(holder) = live else {
                continue;
            };
            members.push(holder.to_owned());
            others = others.union(&self.annotated(lease));
        }
        self.observed = seen;
        if self.healthy(now) {
            members.push(self.config.identity.clone());
        }
        members.sort_unstable();
        members.dedup();
        self.publish_members(members.clone());
        Some(View { members, others })
    }

    /// The ranges a member's annotation holds. One that cannot be read counts as holding
    /// everything: nothing is taken from a member whose holdings are unknown.
    fn annotated(&self, lease: &Lease) -> ShardRanges {
        let value = lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SHARD_RANGES_ANNOTATION))
            .map(String::as_str)
            .unwrap_or_default();
        if value.is_empty() {
            return ShardRanges::none(self.config.key);
        }
        ShardRanges::parse(value).unwrap_or_else(|e| {
            tracing::warn!(lease = lease.name(), error = %e, "unreadable ranges: counting them as everything");
            ShardRanges::all(self.config.key)
        })
    }

    /// A graceful stop: the owner lets go of everything, then our Lease is deleted (if it is
    /// still ours), within one renew deadline.
    async fn stop(&mut self) {
        tracing::info!("leaving the group");
        if !self.held.is_empty() {
            self.set_held(ShardRanges::none(self.config.key)).await;
        }
        self.publish_members(Vec::new());
        let mut version = self
            .own
            .as_ref()
            .and_then(|l| l.resource_version())
            .map(str::to_owned);
        let deleted = timeout(self.config.renew_deadline, async {
            loop {
                if version.is_none() {
                    let lease = match self.store.get(&self.lease_name).await {
                        Err(Error::NotFound { .. }) => return Ok(()),
                        other => other?,
                    };
                    if holder_of(lease.spec.as_ref()) != Some(self.config.identity.as_str()) {
                        return Ok(());
                    }
                    version = lease.resource_version().map(str::to_owned);
                }
                match self
                    .store
                    .delete(&self.lease_name, version.as_deref())
                    .await
                {
                    Ok(()) | Err(Error::NotFound { .. }) => return Ok(()),
                    Err(Error::Conflict { .. }) => version = None,
                    Err(e) => return Err(e),
                }
            }
        })
        .await;
        match deleted {
            Ok(Ok(())) => tracing::info!("left the group"),
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot delete the Lease: it will expire"),
            Err(_) => tracing::warn!("cannot delete the Lease in time: it will expire"),
        }
    }
}
