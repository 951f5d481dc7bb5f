//! Leader election on one Lease, with client-go's `tools/leaderelection` semantics.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use tokio::sync::watch;
use tokio::time::{Instant, sleep, sleep_until, timeout, timeout_at};
use tracing::Instrument as _;

use crate::timing::{
    self, DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, JITTER_FACTOR,
    Observed, holder_of, jittered, lease_duration_of, lease_duration_seconds, now_micro,
};
use crate::{Error, LeaseStore};

/// What a [`LeaderElector`] needs: the Lease, who this candidate is, and client-go's three
/// timings.
///
/// ```
/// use std::time::Duration;
/// use kinformer_coordination::LeaderElectionConfig;
///
/// let config = LeaderElectionConfig::new("my-controller", "pod-a");
/// assert_eq!(config.lease_duration, Duration::from_secs(15));
/// assert!(config.validate().is_ok());
///
/// let hasty = LeaderElectionConfig { renew_deadline: Duration::from_secs(2), ..config };
/// assert!(hasty.validate().is_err()); // not above 1.2 retry periods of 2 s
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// The Lease's name (in the store's namespace).
    pub lease_name: String,
    /// This candidate's identity, written as the Lease's `holderIdentity`: unique among the
    /// candidates (a pod's name, say).
    pub identity: String,
    /// How long others wait, after they last saw the Lease change, before they take it over.
    /// Written as `leaseDurationSeconds`, rounded up to whole seconds. Default 15 s.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leading. Default 10 s.
    pub renew_deadline: Duration,
    /// How often a candidate tries to acquire (stretched at random by up to
    /// [`JITTER_FACTOR`]) and the leader renews. Default 2 s.
    pub retry_period: Duration,
    /// Release the Lease when leading ends (its holder cleared and `leaseDurationSeconds` 1,
    /// as client-go's `ReleaseOnCancel`), so that another candidate takes over at once instead
    /// of after a lease duration. Default `false`.
    pub release_on_cancel: bool,
}

impl LeaderElectionConfig {
    /// The configuration with client-go's usual timings (15 s, 10 s, 2 s) and no release.
    pub fn new(lease_name: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            lease_name: lease_name.into(),
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
            release_on_cancel: false,
        }
    }

    /// client-go's checks: `lease_duration > renew_deadline > retry_period *`
    /// [`JITTER_FACTOR`], every duration above zero, a non-empty identity; and a Lease name
    /// that is a DNS-1123 subdomain.
    pub fn validate(&self) -> Result<(), Error> {
        timing::validate(
            &self.identity,
            self.lease_duration,
            self.renew_deadline,
            self.retry_period,
        )?;
        timing::validate_lease_name(&self.lease_name)
    }
}

/// How [`LeaderElector::run`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionEnd {
    /// The shutdown future completed (whether or not this candidate was leading).
    Shutdown,
    /// This candidate led, and stopped: no renewal succeeded within the renew deadline, or
    /// another candidate was found holding the Lease. As client-go's `Run`, the elector does
    /// not compete again; make a new one to.
    LeadershipLost,
}

/// The signal handed to the work started on gaining leadership: it fires when leadership ends
/// (lost, or the elector stopped). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Leadership {
    lost: watch::Receiver<bool>,
}

impl Leadership {
    /// Completes once leadership has ended. The work guarded by leadership must stop then.
    pub async fn lost(&self) {
        let mut lost = self.lost.clone();
        // An error means the elector is gone, which ends leadership too.
        let _ = lost.wait_for(|lost| *lost).await;
    }

    /// Whether leadership has ended.
    pub fn is_lost(&self) -> bool {
        *self.lost.borrow() || self.lost.has_changed().is_err()
    }
}

/// What the elector last knew.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct LeaderState {
    leading: bool,
    leader: Option<String>,
}

/// What a [`LeaderElector`] knows now, readable while it runs. Cheap to clone.
#[derive(Debug, Clone)]
pub struct LeaderStatus {
    state: watch::Receiver<LeaderState>,
}

impl LeaderStatus {
    /// Whether this candidate leads: between `on_started_leading` and the end of leadership.
    pub fn is_leader(&self) -> bool {
        self.state.borrow().leading
    }

    /// The leader as last observed in the Lease: the last non-empty `holderIdentity` seen, this
    /// candidate included (client-go's `GetLeader`). `None` before any was seen, and after this
    /// candidate released the Lease.
    pub fn leader(&self) -> Option<String> {
        self.state.borrow().leader.clone()
    }

    /// Waits for [`is_leader`](Self::is_leader) or [`leader`](Self::leader) to change; `false`
    /// once the elector has ended and nothing will change any more.
    pub async fn changed(&mut self) -> bool {
        self.state.changed().await.is_ok()
    }
}

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;
type StartedLeading = Arc<dyn Fn(Leadership) -> BoxFuture + Send + Sync>;
type StoppedLeading = Arc<dyn Fn() + Send + Sync>;
type NewLeader = Arc<dyn Fn(&str) + Send + Sync>;

/// The callbacks, each optional.
#[derive(Default, Clone)]
struct Callbacks {
    started: Option<StartedLeading>,
    stopped: Option<StoppedLeading>,
    new_leader: Option<NewLeader>,
}

/// A candidate for leadership through one `coordination.k8s.io/v1` Lease, as client-go's
/// `LeaderElector`:
///
/// - **Acquire**: every retry period (stretched at random by up to [`JITTER_FACTOR`]), read
///   the Lease; create it when absent; take it over only when it is released (no holder) or
///   expired, and then with the resourceVersion read, so that of two candidates only one wins
///   (the other's write is a conflict, and it tries again later). A Lease held by another
///   counts as expired only when its record has not changed for its `leaseDurationSeconds` as
///   measured by this process's monotonic clock since it last saw it change: the wall-clock
///   times in the Lease are written (`acquireTime` on acquisition, `renewTime` on every
///   renewal, `leaseTransitions` incremented on a change of holder) but never trusted.
/// - **Lead**: renew every retry period; when no renewal succeeded within the renew deadline
///   (counted from the start of the last successful one, so before anyone else can see the
///   Lease expire), or the Lease is found held by another, leadership ends.
/// - **Callbacks**: `on_new_leader(identity)` when the observed holder changes (this candidate
///   included, before `on_started_leading`); `on_started_leading(leadership)` on gaining
///   leadership, whose future is spawned and told through [`Leadership`] when leadership
///   ends; `on_stopped_leading()` once that future has returned. `on_started_leading` and
///   `on_stopped_leading` always come in pairs (client-go calls `OnStoppedLeading` even for a
///   candidate that never led; this elector does not).
/// - **Release**: with [`release_on_cancel`](LeaderElectionConfig::release_on_cancel), once
///   the leading work has returned, the Lease's holder is cleared with `leaseDurationSeconds`
///   1 (if the Lease still names this candidate), so another takes over at its next try.
///
/// ```
/// use std::time::Duration;
/// use kinformer_coordination::{ElectionEnd, LeaderElectionConfig, LeaderElector, MemoryLeaseStore};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let store = MemoryLeaseStore::new();
/// let config = LeaderElectionConfig {
///     release_on_cancel: true,
///     ..LeaderElectionConfig::new("my-controller", "pod-a")
/// };
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let elector = LeaderElector::new(store, config)
///     .unwrap()
///     .on_started_leading(move |leadership| async move {
///         // Lead until told otherwise, then return.
///         leadership.lost().await;
///     })
///     .on_new_leader(|leader| println!("{leader} leads"));
/// let mut status = elector.status();
/// let run = tokio::spawn(elector.run(async { stopped.await.ok(); }));
///
/// while !status.is_leader() {
///     status.changed().await;
/// }
/// assert_eq!(status.leader().as_deref(), Some("pod-a"));
/// stop.send(()).unwrap();
/// assert_eq!(run.await.unwrap(), ElectionEnd::Shutdown);
/// # }
/// ```
pub struct LeaderElector {
    store: Arc<dyn LeaseStore>,
    config: LeaderElectionConfig,
    callbacks: Callbacks,
    state: watch::Sender<LeaderState>,
}

impl fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderElector")
            .field("config", &self.config)
            .field("state", &*self.state.borrow())
            .finish_non_exhaustive()
    }
}

impl LeaderElector {
    /// A candidate with this configuration ([`validated`](LeaderElectionConfig::validate))
    /// over `store` (an [`Api<Lease>`](kinformer_client::Api), a [`MemoryLeaseStore`](crate::MemoryLeaseStore),
    /// an `Arc<dyn LeaseStore>`...). It does nothing until [`run`](Self::run).
    pub fn new(
        store: impl LeaseStore + 'static,
        config: LeaderElectionConfig,
    ) -> Result<Self, Error> {
        config.validate()?;
        Ok(Self {
            store: Arc::new(store),
            config,
            callbacks: Callbacks::default(),
            state: watch::channel(LeaderState::default()).0,
        })
    }

    /// On gaining leadership, `f` is called with the [`Leadership`] signal, and the future it
    /// returns is spawned: the work this candidate does while it leads. The future must return
    /// once [`Leadership::lost`] completes; the elector waits for it before
    /// `on_stopped_leading` and before releasing the Lease.
    #[must_use]
    pub fn on_started_leading<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(Leadership) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.callbacks.started = Some(Arc::new(move |l| Box::pin(f(l))));
        self
    }

    /// `f` is called once leadership has ended and the leading work has returned (before the
    /// release, if any).
    #[must_use]
    pub fn on_stopped_leading(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.callbacks.stopped = Some(Arc::new(f));
        self
    }

    /// `f` is called with the holder's identity whenever the observed holder of the Lease
    /// changes to a new one (this candidate included). It runs on the elector's task: keep it
    /// short.
    #[must_use]
    pub fn on_new_leader(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.callbacks.new_leader = Some(Arc::new(f));
        self
    }

    /// A handle on what the elector knows, to read while it runs.
    pub fn status(&self) -> LeaderStatus {
        LeaderStatus {
            state: self.state.subscribe(),
        }
    }

    /// Whether this candidate leads now (see [`LeaderStatus::is_leader`]).
    pub fn is_leader(&self) -> bool {
        self.state.borrow().leading
    }

    /// The leader as last observed (see [`LeaderStatus::leader`]).
    pub fn leader(&self) -> Option<String> {
        self.state.borrow().leader.clone()
    }

    /// The configuration.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.config
    }

    /// Competes for the Lease until `shutdown` completes or, having led, leadership is lost.
    ///
    /// Dropping the returned future stops everything at once: the leading work is told
    /// (through [`Leadership`]), nothing is released, and the Lease expires for the others
    /// after its duration.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> ElectionEnd {
        let mut shutdown: Shutdown<'_> = Box::pin(shutdown);
        let Self {
            store,
            config,
            callbacks,
            state,
        } = self;
        let span = tracing::info_span!(
            "leader_election",
            lease = %config.lease_name,
            identity = %config.identity,
        );
        let election = Election {
            store,
            config,
            callbacks,
            state,
            observed: None,
            lease: None,
            reported: None,
        };
        election.run(&mut shutdown).instrument(span).await
    }
}

/// The elector's state while it runs.
struct Election {
    store: Arc<dyn LeaseStore>,
    config: LeaderElectionConfig,
    callbacks: Callbacks,
    state: watch::Sender<LeaderState>,
    /// The Lease's spec as last seen, and when it was first seen so.
    observed: Option<Observed<LeaseSpec>>,
    /// The Lease as last read or written: its resourceVersion is the next update's
    /// precondition.
    lease: Option<Lease>,
    /// The holder last reported to `on_new_leader`.
    reported: Option<String>,
}

type Shutdown<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

impl Election {
    /// [`LeaderElector::run`], once the elector's parts are taken apart.
    async fn run(mut self, shutdown: &mut Shutdown<'_>) -> ElectionEnd {
        tracing::info!("trying to acquire the lease");
        let Some(acquired_at) = self.acquire(shutdown).await else {
            return ElectionEnd::Shutdown;
        };
        tracing::info!("acquired the lease: leading");
        self.state.send_modify(|s| s.leading = true);
        let (lost_tx, lost_rx) = watch::channel(false);
        let work = self
            .callbacks
            .started
            .clone()
            .map(|f| tokio::spawn(f(Leadership { lost: lost_rx })));

        let end = self.renew(acquired_at, shutdown).await;

        self.state.send_modify(|s| s.leading = false);
        let _ = lost_tx.send(true);
        if let Some(work) = work
            && let Err(e) = work.await
        {
            tracing::error!(error = %e, "the leading work failed");
        }
        if let Some(f) = &self.callbacks.stopped {
            f();
        }
        if self.config.release_on_cancel {
            self.release().await;
        }
        end
    }

    /// Tries every jittered retry period until the Lease is ours: the instant the successful
    /// attempt started, or `None` on shutdown.
    async fn acquire(&mut self, shutdown: &mut Shutdown<'_>) -> Option<Instant> {
        loop {
            let start = Instant::now();
            // Bounded, so that a store that hangs is tried again.
            let attempt = timeout(self.config.renew_deadline, self.try_acquire_or_renew(start));
            let acquired = tokio::select! {
                biased;
                () = &mut *shutdown => return None,
                acquired = attempt => acquired.unwrap_or(false),
            };
            self.report_transition();
            if acquired {
                return Some(start);
            }
            tokio::select! {
                biased;
                () = &mut *shutdown => return None,
                () = sleep(jittered(self.config.retry_period, JITTER_FACTOR)) => {}
            }
        }
    }

    /// Renews every retry period until shutdown, or until no renewal succeeded within the renew
    /// deadline (counted from the start of the last successful write, a bound from below on
    /// when the server took it), or another holds the Lease.
    async fn renew(&mut self, acquired_at: Instant, shutdown: &mut Shutdown<'_>) -> ElectionEnd {
        let mut last_renewed = acquired_at;
        loop {
            let deadline = last_renewed + self.config.renew_deadline;
            let next = Instant::now() + self.config.retry_period;
            tokio::select! {
                biased;
                () = &mut *shutdown => return ElectionEnd::Shutdown,
                () = sleep_until(next.min(deadline)) => {}
            }
            if Instant::now() >= deadline {
                tracing::warn!(
                    renew_deadline = ?self.config.renew_deadline,
                    "no renewal succeeded within the renew deadline: leadership lost"
                );
                return ElectionEnd::LeadershipLost;
            }
            let start = Instant::now();
            let attempt = timeout_at(deadline, self.try_acquire_or_renew(start));
            let renewed = tokio::select! {
                biased;
                () = &mut *shutdown => return ElectionEnd::Shutdown,
                renewed = attempt => renewed,
            };
            self.report_transition();
            match renewed {
                Ok(true) => last_renewed = start,
                Ok(false) if self.held_by_other() => {
                    tracing::warn!(holder = ?self.observed_holder(), "the lease is held by another: leadership lost");
                    return ElectionEnd::LeadershipLost;
                }
                Ok(false) => {}
                Err(_) => tracing::debug!("the renewal did not finish by the renew deadline"),
            }
        }
    }

    /// One attempt, as client-go's `tryAcquireOrRenew`: whether this candidate holds the Lease
    /// after it. `now` is when the attempt started.
    async fn try_acquire_or_renew(&mut self, now: Instant) -> bool {
        // The fast path: renew the Lease as last written, without reading it first.
        if self.holds(now)
            && let Some(lease) = self.lease.clone()
        {
            match self.store.update(&self.renewed(lease, false)).await {
                Ok(stored) => {
                    self.note_written(stored, now);
                    return true;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "renewal at the last version failed: reading the lease")
                }
            }
        }

        let lease = match self.store.get(&self.config.lease_name).await {
            Ok(lease) => lease,
            Err(Error::NotFound { .. }) => return self.create(now).await,
            Err(e) => {
                tracing::debug!(error = %e, "cannot read the lease");
                return false;
            }
        };
        let spec = lease.spec.clone().unwrap_or_default();
        match &mut self.observed {
            Some(observed) => observed.see(spec, now),
            None => self.observed = Some(Observed::new(spec, now)),
        }
        self.lease = Some(lease.clone());
        let holder = self.observed_holder();
        if holder.is_some_and(|h| h != self.config.identity) && self.observed_unexpired(now) {
            tracing::trace!(?holder, "the lease is held and has not expired");
            return false;
        }
        let taking_over = holder != Some(self.config.identity.as_str());
        match self.store.update(&self.renewed(lease, taking_over)).await {
            Ok(stored) => {
                self.note_written(stored, now);
                true
            }
            Err(e) => {
                // A conflict: another candidate wrote first, and may have won.
                tracing::debug!(error = %e, "cannot update the lease");
                false
            }
        }
    }

    /// Creates the Lease, held by this candidate.
    async fn create(&mut self, now: Instant) -> bool {
        let mut lease = Lease::default();
        lease.metadata.name = Some(self.config.lease_name.clone());
        match self.store.create(&self.renewed(lease, true)).await {
            Ok(stored) => {
                self.note_written(stored, now);
                true
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot create the lease");
                false
            }
        }
    }

    /// `lease` held by this candidate, renewed now; taken over from another (or from none)
    /// when `taking_over`: acquired now, one more transition.
    fn renewed(&self, mut lease: Lease, taking_over: bool) -> Lease {
        let now = now_micro();
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(self.config.identity.clone());
        spec.lease_duration_seconds = Some(lease_duration_seconds(self.config.lease_duration));
        spec.renew_time = Some(now.clone());
        if taking_over {
            spec.acquire_time = Some(now);
            spec.lease_transitions =
                Some(spec.lease_transitions.map_or(0, |t| t.saturating_add(1)));
        } else {
            spec.acquire_time.get_or_insert(now);
            spec.lease_transitions.get_or_insert(0);
        }
        lease
    }

    /// The Lease as this candidate wrote it, at the start of the write.
    fn note_written(&mut self, stored: Lease, now: Instant) {
        self.observed = Some(Observed::new(stored.spec.clone().unwrap_or_default(), now));
        self.lease = Some(stored);
    }

    fn observed_holder(&self) -> Option<&str> {
        holder_of(self.observed.as_ref().map(|o| &o.record))
    }

    fn observed_unexpired(&self, now: Instant) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|o| o.unexpired(lease_duration_of(Some(&o.record)), now))
    }

    /// Whether this candidate holds the Lease, as last observed, and it has not expired.
    fn holds(&self, now: Instant) -> bool {
        self.observed_holder() == Some(self.config.identity.as_str())
            && self.observed_unexpired(now)
    }

    fn held_by_other(&self) -> bool {
        self.observed_holder()
            .is_some_and(|h| h != self.config.identity)
    }

    /// Tells `on_new_leader` and the status about a new holder.
    fn report_transition(&mut self) {
        let Some(holder) = self.observed_holder() else {
            return;
        };
        if self.reported.as_deref() == Some(holder) {
            return;
        }
        let holder = holder.to_owned();
        tracing::info!(leader = %holder, "new leader");
        self.reported = Some(holder.clone());
        self.state.send_modify(|s| s.leader = Some(holder.clone()));
        if let Some(f) = &self.callbacks.new_leader {
            f(&holder);
        }
    }

    /// Clears the holder (client-go's `release`), if the Lease still names this candidate,
    /// within one renew deadline.
    async fn release(&mut self) {
        let released = timeout(self.config.renew_deadline, async {
            loop {
                let mut lease = match self.store.get(&self.config.lease_name).await {
                    Ok(lease) => lease,
                    Err(e) => return Err(e),
                };
                if holder_of(lease.spec.as_ref()) != Some(self.config.identity.as_str()) {
                    return Ok(false);
                }
                let now = now_micro();
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                spec.holder_identity = Some(String::new());
                spec.lease_duration_seconds = Some(1);
                spec.renew_time = Some(now.clone());
                spec.acquire_time = Some(now);
                match self.store.update(&lease).await {
                    Ok(stored) => {
                        self.note_written(stored, Instant::now());
                        return Ok(true);
                    }
                    Err(Error::Conflict { .. }) => continue,
                    Err(e) => return Err(e),
                }
            }
        })
        .await;
        match released {
            Ok(Ok(true)) => {
                tracing::info!("released the lease");
                self.state.send_modify(|s| s.leader = None);
            }
            Ok(Ok(false)) => tracing::debug!("the lease was not ours to release"),
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot release the lease"),
            Err(_) => tracing::warn!("cannot release the lease within the renew deadline"),
        }
    }
}
