//! Leader election: over the in-memory store with tokio's clock paused (exact timings), and over
//! real HTTP against the simulated API server (real time, generous bounds, strict invariants).

mod support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kinformer_client::{Api, Client, Config};
use kinformer_coordination::{
    ElectionEnd, Error, LeaderElectionConfig, LeaderElector, LeaderStatus, LeaseStore,
    MemoryLeaseStore,
};
use kinformer_sim::{SimConfig, SimServer};
use parking_lot::Mutex;
use support::{FaultyStore, Leading, Writes};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Everything the candidates' callbacks said, in order.
type Events = Arc<Mutex<Vec<String>>>;

struct Candidate {
    status: LeaderStatus,
    stop: Option<oneshot::Sender<()>>,
    run: JoinHandle<ElectionEnd>,
}

impl Candidate {
    fn start(
        store: impl LeaseStore + 'static,
        config: LeaderElectionConfig,
        leading: &Leading,
        events: &Events,
    ) -> Self {
        let id = config.identity.clone();
        let (on_new, on_start, on_stop) = (events.clone(), events.clone(), events.clone());
        let (started_by, leading) = (id.clone(), leading.clone());
        let stopped_by = id.clone();
        let new_leader_seen_by = id.clone();
        let elector = LeaderElector::new(store, config)
            .unwrap()
            .on_new_leader(move |leader| {
                on_new
                    .lock()
                    .push(format!("{new_leader_seen_by}: new leader {leader}"));
            })
            .on_started_leading(move |leadership| {
                on_start.lock().push(format!("{started_by}: started"));
                leading.started(&started_by);
                let (id, leading) = (started_by.clone(), leading.clone());
                async move {
                    leadership.lost().await;
                    assert!(leadership.is_lost());
                    leading.stopped(&id);
                }
            })
            .on_stopped_leading(move || on_stop.lock().push(format!("{stopped_by}: stopped")));
        let status = elector.status();
        let (stop, stopped) = oneshot::channel::<()>();
        let run = tokio::spawn(elector.run(async {
            stopped.await.ok();
        }));
        Self {
            status,
            stop: Some(stop),
            run,
        }
    }

    async fn stop(mut self) -> ElectionEnd {
        self.stop.take().unwrap().send(()).ok();
        self.run.await.unwrap()
    }

    /// Waits until this candidate has seen `leader` hold the Lease.
    async fn wait_sees(&mut self, leader: &str, bound: Duration) {
        tokio::time::timeout(bound, async {
            while self.status.leader().as_deref() != Some(leader) {
                assert!(self.status.changed().await, "the elector ended");
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{leader} not seen within {bound:?}"));
    }
}

fn config(id: &str, lease: Duration, renew: Duration, retry: Duration) -> LeaderElectionConfig {
    LeaderElectionConfig {
        lease_duration: lease,
        renew_deadline: renew,
        retry_period: retry,
        release_on_cancel: true,
        ..LeaderElectionConfig::new("controller", id)
    }
}

/// What each candidate heard when a led, released, and b took over; never both leading.
fn assert_a_led_then_b(events: &Events, leading: &Leading) {
    assert_eq!(
        events_of(events, "a"),
        ["a: new leader a", "a: started", "a: stopped"]
    );
    assert_eq!(
        events_of(events, "b"),
        [
            "b: new leader a",
            "b: new leader b",
            "b: started",
            "b: stopped"
        ]
    );
    assert!(
        leading.violations().is_empty(),
        "{:?}",
        leading.violations()
    );
}

fn events_of(events: &Events, id: &str) -> Vec<String> {
    let prefix = format!("{id}: ");
    events
        .lock()
        .iter()
        .filter(|e| e.starts_with(&prefix))
        .cloned()
        .collect()
}

fn spec(lease: &Lease) -> &k8s_openapi::api::coordination::v1::LeaseSpec {
    lease.spec.as_ref().unwrap()
}

const S: fn(u64) -> Duration = Duration::from_secs;

/// The longest a candidate waits between two tries: a retry period stretched by 1.2.
fn longest_wait(retry: Duration) -> Duration {
    retry.mul_f64(1.0 + kinformer_coordination::JITTER_FACTOR)
}

#[tokio::test(start_paused = true)]
async fn one_of_two_leads_and_a_release_hands_over_at_the_next_try() {
    let store = MemoryLeaseStore::new();
    let (leading, events) = (Leading::default(), Events::default());
    let a = Candidate::start(
        store.clone(),
        config("a", S(15), S(10), S(2)),
        &leading,
        &events,
    );
    leading.wait_for(Some("a"), S(1)).await;
    let created = store.get("controller").await.unwrap();
    assert_eq!(spec(&created).holder_identity.as_deref(), Some("a"));
    assert_eq!(spec(&created).lease_transitions, Some(0));
    assert_eq!(spec(&created).lease_duration_seconds, Some(15));
    assert!(spec(&created).acquire_time.is_some());
    assert_eq!(spec(&created).acquire_time, spec(&created).renew_time);

    let mut b = Candidate::start(
        store.clone(),
        config("b", S(15), S(10), S(2)),
        &leading,
        &events,
    );
    b.wait_sees("a", S(10)).await;
    assert!(a.status.is_leader() && !b.status.is_leader());
    // a renews meanwhile: the record changes, its acquisition does not.
    tokio::time::sleep(S(60)).await;
    assert_eq!(leading.current().as_deref(), Some("a"));
    let renewed = store.get("controller").await.unwrap();
    assert_ne!(
        renewed.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(spec(&renewed).acquire_time, spec(&created).acquire_time);
    assert!(spec(&renewed).renew_time >= spec(&created).renew_time);
    assert_eq!(spec(&renewed).lease_transitions, Some(0));

    let stopped_at = Instant::now();
    assert_eq!(a.stop().await, ElectionEnd::Shutdown);
    let released = store.get("controller").await.unwrap();
    assert_eq!(spec(&released).holder_identity.as_deref(), Some(""));
    assert_eq!(spec(&released).lease_duration_seconds, Some(1));
    assert_eq!(spec(&released).lease_transitions, Some(0));

    let b_leads = leading.wait_for(Some("b"), S(30)).await;
    assert!(
        b_leads - stopped_at <= longest_wait(S(2)),
        "b took over {:?} after the release",
        b_leads - stopped_at
    );
    let taken = store.get("controller").await.unwrap();
    assert_eq!(spec(&taken).holder_identity.as_deref(), Some("b"));
    assert_eq!(spec(&taken).lease_transitions, Some(1));
    assert_ne!(spec(&taken).acquire_time, spec(&created).acquire_time);
    assert_eq!(b.stop().await, ElectionEnd::Shutdown);

    assert_a_led_then_b(&events, &leading);
}

/// The wall-clock times in a Lease decide nothing: a Lease another holds is taken over a lease
/// duration after this candidate first saw it, whether its renewTime says it is fresh or
/// long expired.
#[tokio::test(start_paused = true)]
async fn expiry_is_measured_on_the_local_clock_not_the_renew_time() {
    for (name, renewed) in [
        ("far-past", "1970-01-02T00:00:00.000000Z"),
        ("far-future", "2200-01-01T00:00:00.000000Z"),
    ] {
        let store = MemoryLeaseStore::new();
        let mut ghost = Lease::default();
        ghost.metadata.name = Some("controller".into());
        ghost.spec = Some(k8s_openapi::api::coordination::v1::LeaseSpec {
            holder_identity: Some("ghost".into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(renewed.parse().unwrap())),
            acquire_time: Some(MicroTime(renewed.parse().unwrap())),
            lease_transitions: Some(4),
            ..Default::default()
        });
        store.create(&ghost).await.unwrap();

        let (leading, events) = (Leading::default(), Events::default());
        let started = Instant::now();
        let mut b = Candidate::start(
            store.clone(),
            config("b", S(15), S(10), S(2)),
            &leading,
            &events,
        );
        b.wait_sees("ghost", S(1)).await;
        let leads = leading.wait_for(Some("b"), S(60)).await;
        let waited = leads - started;
        assert!(
            waited >= S(15) && waited <= S(15) + longest_wait(S(2)),
            "{name}: took over after {waited:?}"
        );
        let taken = store.get("controller").await.unwrap();
        assert_eq!(spec(&taken).lease_transitions, Some(5), "{name}");
        b.stop().await;
    }
}

/// The leader's writes fail (or hang): it stops leading within the renew deadline of its last
/// renewal, and the other candidate leads once the Lease has not changed for a lease duration;
/// never both at once.
#[tokio::test(start_paused = true)]
async fn a_leader_that_cannot_renew_stops_before_the_other_takes_over() {
    for writes in [Writes::Fail, Writes::Hang] {
        let store = MemoryLeaseStore::new();
        let faulty = FaultyStore::new(store.clone());
        let (leading, events) = (Leading::default(), Events::default());
        let (lease, renew, retry) = (S(15), S(10), S(2));
        let a = Candidate::start(
            faulty.clone(),
            config("a", lease, renew, retry),
            &leading,
            &events,
        );
        leading.wait_for(Some("a"), S(1)).await;
        let mut b = Candidate::start(
            store.clone(),
            config("b", lease, renew, retry),
            &leading,
            &events,
        );
        b.wait_sees("a", S(10)).await;

        tokio::time::sleep(S(7)).await;
        let last_version = store
            .get("controller")
            .await
            .unwrap()
            .metadata
            .resource_version;
        faulty.set_writes(writes);
        let failed_at = Instant::now();
        let lost_at = leading.wait_for(None, S(60)).await;
        assert!(
            lost_at - failed_at <= renew,
            "{writes:?}: stopped leading {:?} after the writes failed",
            lost_at - failed_at
        );
        assert_eq!(
            a.run.await.unwrap(),
            ElectionEnd::LeadershipLost,
            "{writes:?}"
        );
        let b_leads = leading.wait_for(Some("b"), S(60)).await;
        // b saw the last renewal no earlier than it was made, after the writes started failing
        // at the latest; it waits a lease duration from there, give or take its tries.
        assert!(
            b_leads - lost_at >= lease - renew,
            "{writes:?}: b led {:?} after a stopped",
            b_leads - lost_at
        );
        assert!(
            b_leads - failed_at <= lease + longest_wait(retry) + retry,
            "{writes:?}: b led {:?} after a's writes failed",
            b_leads - failed_at
        );
        assert_ne!(
            store
                .get("controller")
                .await
                .unwrap()
                .metadata
                .resource_version,
            last_version
        );
        assert_eq!(
            events_of(&events, "a"),
            ["a: new leader a", "a: started", "a: stopped"]
        );
        b.stop().await;
        assert!(
            leading.violations().is_empty(),
            "{:?}",
            leading.violations()
        );
    }
}

#[test]
fn configurations_are_checked_before_anything_runs() {
    let store = MemoryLeaseStore::new();
    let bad = |change: fn(&mut LeaderElectionConfig)| {
        let mut c = LeaderElectionConfig::new("controller", "a");
        change(&mut c);
        LeaderElector::new(store.clone(), c).unwrap_err()
    };
    assert!(matches!(
        bad(|c| c.lease_duration = S(10)),
        Error::LeaseDurationNotAboveRenewDeadline { .. }
    ));
    assert!(matches!(
        bad(|c| c.retry_period = S(9)),
        Error::RenewDeadlineNotAboveRetryPeriod { .. }
    ));
    assert!(matches!(
        bad(|c| c.retry_period = Duration::ZERO),
        Error::ZeroDuration {
            field: "retry_period"
        }
    ));
    assert!(matches!(bad(|c| c.identity.clear()), Error::EmptyIdentity));
    assert!(matches!(
        bad(|c| c.lease_name = "Not_A_Name".into()),
        Error::InvalidName {
            what: "Lease name",
            ..
        }
    ));
}

async fn sim_leases() -> (SimServer, Api<Lease>) {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let client = Client::new(Config::new(sim.url())).unwrap();
    let leases = Api::namespaced(client, "default");
    (sim, leases)
}

/// Two candidates over HTTP: one leads, the other follows it, and a release hands over well
/// before the lease duration would have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_one_leads_and_a_release_hands_over() {
    let (_sim, leases) = sim_leases().await;
    let (lease, renew, retry) = (S(10), S(5), Duration::from_millis(200));
    let (leading, events) = (Leading::default(), Events::default());
    let a = Candidate::start(
        leases.clone(),
        config("a", lease, renew, retry),
        &leading,
        &events,
    );
    leading.wait_for(Some("a"), S(20)).await;
    let mut b = Candidate::start(
        leases.clone(),
        config("b", lease, renew, retry),
        &leading,
        &events,
    );
    b.wait_sees("a", S(20)).await;
    assert!(!b.status.is_leader());

    let stopped_at = Instant::now();
    assert_eq!(a.stop().await, ElectionEnd::Shutdown);
    let b_leads = leading.wait_for(Some("b"), S(20)).await;
    assert!(
        b_leads - stopped_at < lease,
        "b waited {:?}: the release did not hand over",
        b_leads - stopped_at
    );
    let taken = LeaseStore::get(&leases, "controller").await.unwrap();
    assert_eq!(spec(&taken).holder_identity.as_deref(), Some("b"));
    assert_eq!(spec(&taken).lease_transitions, Some(1));
    b.stop().await;
    let released = LeaseStore::get(&leases, "controller").await.unwrap();
    assert_eq!(spec(&released).holder_identity.as_deref(), Some(""));
    assert_a_led_then_b(&events, &leading);
}

/// Over HTTP, the leader's renewals hang: it stops leading at its renew deadline, and the other
/// takes over after the lease expires, never while the first leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_a_leader_whose_renewals_hang_steps_down() {
    let (_sim, leases) = sim_leases().await;
    let (lease, renew, retry) = (S(2), S(1), Duration::from_millis(200));
    let faulty = FaultyStore::new(leases.clone());
    let (leading, events) = (Leading::default(), Events::default());
    let a = Candidate::start(
        faulty.clone(),
        config("a", lease, renew, retry),
        &leading,
        &events,
    );
    leading.wait_for(Some("a"), S(20)).await;
    let mut b = Candidate::start(
        leases.clone(),
        config("b", lease, renew, retry),
        &leading,
        &events,
    );
    b.wait_sees("a", S(20)).await;

    faulty.set_writes(Writes::Hang);
    let failed_at = Instant::now();
    let lost_at = leading.wait_for(None, S(20)).await;
    // The deadline counts from the last successful renewal, before the writes began to hang
    // (the paused-clock test checks it exactly); here a loaded machine's scheduling may add to
    // it, and what must hold is that a stops before its Lease can expire for b, which the
    // recorder checks.
    assert!(
        lost_at - failed_at < lease,
        "a stopped leading {:?} after its writes began to hang",
        lost_at - failed_at
    );
    assert_eq!(a.run.await.unwrap(), ElectionEnd::LeadershipLost);
    leading.wait_for(Some("b"), S(20)).await;
    b.stop().await;
    assert!(
        leading.violations().is_empty(),
        "{:?}",
        leading.violations()
    );
}
