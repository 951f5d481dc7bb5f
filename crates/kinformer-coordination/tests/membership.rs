//! Shard membership: three replicas split the hash space, one leaves gracefully, one dies, one
//! cannot renew; every owner call checks that no range is held by two replicas at once. Over
//! the in-memory store with tokio's clock paused, and over real HTTP against the simulated API
//! server.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kinformer_client::{Api, Client, Config};
use kinformer_coordination::{
    Error, LeaseStore, MemoryLeaseStore, SHARD_GROUP_LABEL, SHARD_RANGES_ANNOTATION,
    ShardMembership, ShardMembershipConfig,
};
use kinformer_core::shard::{ShardKey, ShardRanges};
use kinformer_sim::{SimConfig, SimServer};
use support::{FaultyStore, Owners, Writes, cover, eventually};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

const S: fn(u64) -> Duration = Duration::from_secs;
const MS: fn(u64) -> Duration = Duration::from_millis;

/// One running replica.
struct Replica {
    held: watch::Receiver<ShardRanges>,
    members: watch::Receiver<Vec<String>>,
    stop: Option<oneshot::Sender<()>>,
    run: JoinHandle<()>,
}

impl Replica {
    fn start(
        store: impl LeaseStore + 'static,
        owners: &Owners,
        config: ShardMembershipConfig,
    ) -> Self {
        let owner = owners.owner(&config.identity);
        let member = ShardMembership::new(store, owner, config).unwrap();
        let (held, members) = (member.held(), member.members());
        let (stop, stopped) = oneshot::channel::<()>();
        let run = tokio::spawn(member.run(async {
            stopped.await.ok();
        }));
        Self {
            held,
            members,
            stop: Some(stop),
            run,
        }
    }

    /// A graceful stop, waited for.
    async fn stop(mut self) {
        self.stop.take().unwrap().send(()).ok();
        self.run.await.unwrap();
    }

    /// Stops its tasks at once, as a crash would: no release, the Lease left behind.
    async fn kill(self) {
        self.run.abort();
        assert!(self.run.await.unwrap_err().is_cancelled());
    }
}

fn config(id: &str, lease: Duration, renew: Duration, retry: Duration) -> ShardMembershipConfig {
    ShardMembershipConfig {
        lease_duration: lease,
        renew_deadline: renew,
        retry_period: retry,
        ..ShardMembershipConfig::new("workers", id)
    }
}

/// Every Lease of the group, by name.
async fn group(store: &impl LeaseStore) -> BTreeMap<String, Lease> {
    store
        .list(&format!("{SHARD_GROUP_LABEL}=workers"))
        .await
        .unwrap()
        .into_iter()
        .map(|l| (l.metadata.name.clone().unwrap(), l))
        .collect()
}

fn annotation(lease: &Lease) -> ShardRanges {
    let value = &lease.metadata.annotations.as_ref().unwrap()[SHARD_RANGES_ANNOTATION];
    if value.is_empty() {
        ShardRanges::none(ShardKey::Uid)
    } else {
        ShardRanges::parse(value).unwrap()
    }
}

/// Three replicas split the space; one leaves gracefully, the two others split it; one of those
/// dies, the last takes everything after about a lease duration.
async fn join_leave_and_die(store: impl LeaseStore + Clone + 'static, timings: [Duration; 3]) {
    let [lease, renew, retry] = timings;
    let bound = S(20);
    let owners = Owners::new(MS(5));
    let mut replicas: BTreeMap<&str, Replica> = ["a", "b", "c"]
        .into_iter()
        .map(|id| {
            (
                id,
                Replica::start(store.clone(), &owners, config(id, lease, renew, retry)),
            )
        })
        .collect();
    owners
        .wait_until("a, b and c cover the space", bound, |h| {
            cover(h, &["a", "b", "c"])
        })
        .await;
    // At rest, every replica holds its third, and its Lease says so.
    let thirds: Vec<ShardRanges> = (0..3)
        .map(|i| ShardRanges::split(ShardKey::Uid, 3, i))
        .collect();
    owners
        .wait_until("each holds its own third", bound, |h| {
            ["a", "b", "c"]
                .iter()
                .zip(&thirds)
                .all(|(id, third)| h.get(*id) == Some(third))
        })
        .await;
    // The Leases say so once the last annotation is written.
    // The Leases say so once the last annotation is written, and each replica's handles agree.
    eventually("each Lease says its third", bound, retry, || async {
        let leases = group(&store).await;
        leases.len() == 3
            && ["a", "b", "c"].iter().zip(&thirds).all(|(id, third)| {
                let r = &replicas[id];
                *r.held.borrow() == *third
                    && *r.members.borrow() == ["a", "b", "c"]
                    && leases.get(&format!("workers-{id}")).is_some_and(|lease| {
                        lease.spec.as_ref().unwrap().holder_identity.as_deref() == Some(*id)
                            && annotation(lease) == *third
                    })
            })
    })
    .await;

    // b leaves: it lets go first, then deletes its Lease, and a and c split the space.
    replicas.remove("b").unwrap().stop().await;
    assert!(owners.snapshot()["b"].is_empty());
    assert!(!group(&store).await.contains_key("workers-b"));
    owners
        .wait_until("a and c cover the space", bound, |h| cover(h, &["a", "c"]))
        .await;

    // c dies: its owner acts on nothing any more, its Lease stays, and a takes everything once
    // that Lease has not changed for a lease duration.
    let killed_at = Instant::now();
    replicas.remove("c").unwrap().kill().await;
    owners.forget("c");
    owners
        .wait_until("a covers the space", bound, |h| cover(h, &["a"]))
        .await;
    // Not before c's Lease expired: a lease duration after c's last write, which was at most
    // a round before it died.
    let took = killed_at.elapsed();
    assert!(took >= lease / 2, "a took over after {took:?}");
    assert!(group(&store).await.contains_key("workers-c"));
    let a_members = replicas["a"].members.clone();
    eventually("a sees itself alone", bound, retry, || {
        let alone = *a_members.borrow() == ["a"];
        async move { alone }
    })
    .await;

    // a leaves too; the dead c's Lease is all that is left.
    replicas.remove("a").unwrap().stop().await;
    assert_eq!(
        group(&store).await.keys().collect::<Vec<_>>(),
        ["workers-c"]
    );
    assert!(owners.violations().is_empty(), "{:?}", owners.violations());
}

#[tokio::test(start_paused = true)]
async fn replicas_join_leave_and_die_over_the_memory_store() {
    join_leave_and_die(MemoryLeaseStore::new(), [S(15), S(10), S(2)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_join_leave_and_die_over_http() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let leases: Api<Lease> =
        Api::namespaced(Client::new(Config::new(sim.url())).unwrap(), "default");
    join_leave_and_die(leases, [S(1), MS(700), MS(200)]).await;
}

/// A replica whose writes fail lets go of everything within its renew deadline; the others
/// take its ranges once its Lease looks expired; when it can write again it rejoins.
async fn late_renewals(store: impl LeaseStore + Clone + 'static, timings: [Duration; 3]) {
    let [lease, renew, retry] = timings;
    let bound = S(20);
    let owners = Owners::new(MS(5));
    let faulty = FaultyStore::new(store.clone());
    let a = Replica::start(store.clone(), &owners, config("a", lease, renew, retry));
    let b = Replica::start(store.clone(), &owners, config("b", lease, renew, retry));
    let c = Replica::start(faulty.clone(), &owners, config("c", lease, renew, retry));
    owners
        .wait_until("a, b and c cover the space", bound, |h| {
            cover(h, &["a", "b", "c"])
        })
        .await;

    faulty.set_writes(Writes::Hang);
    let failed_at = Instant::now();
    let mut c_held = c.held.clone();
    tokio::time::timeout(bound, c_held.wait_for(ShardRanges::is_empty))
        .await
        .expect("c let go")
        .unwrap();
    // The owners' check says that c let go before a and b took its ranges.
    owners
        .wait_until("a and b cover the space", bound, |h| cover(h, &["a", "b"]))
        .await;
    assert!(
        failed_at.elapsed() >= lease / 2,
        "taken before c's Lease expired"
    );

    faulty.set_writes(Writes::Pass);
    owners
        .wait_until("c is back", bound, |h| cover(h, &["a", "b", "c"]))
        .await;
    for r in [a, b, c] {
        r.stop().await;
    }
    assert!(owners.violations().is_empty(), "{:?}", owners.violations());
}

#[tokio::test(start_paused = true)]
async fn a_replica_that_cannot_renew_lets_go_in_time_over_the_memory_store() {
    late_renewals(MemoryLeaseStore::new(), [S(15), S(10), S(2)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_cannot_renew_lets_go_in_time_over_http() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let leases: Api<Lease> =
        Api::namespaced(Client::new(Config::new(sim.url())).unwrap(), "default");
    late_renewals(leases, [S(2), S(1), MS(200)]).await;
}

/// With the clock paused the timings are exact: the late replica lets go no later than its
/// renew deadline after its last successful write.
#[tokio::test(start_paused = true)]
async fn letting_go_comes_before_the_lease_can_expire() {
    let store = MemoryLeaseStore::new();
    let owners = Owners::new(Duration::ZERO);
    let faulty = FaultyStore::new(store.clone());
    let (lease, renew, retry) = (S(15), S(10), S(2));
    let a = Replica::start(faulty.clone(), &owners, config("a", lease, renew, retry));
    owners
        .wait_until("a holds everything", S(60), |h| cover(h, &["a"]))
        .await;
    let last_written = Instant::now();
    let version = store
        .get("workers-a")
        .await
        .unwrap()
        .metadata
        .resource_version;
    faulty.set_writes(Writes::Fail);
    let mut held = a.held.clone();
    held.wait_for(ShardRanges::is_empty).await.unwrap();
    // The last successful write was at most a round (a jittered retry period) before the
    // failures began.
    let after = last_written.elapsed();
    assert!(after <= renew, "let go {after:?} after the failures began");
    assert_eq!(
        store
            .get("workers-a")
            .await
            .unwrap()
            .metadata
            .resource_version,
        version
    );
    a.stop().await;
}

/// A replica alone holds everything; a Lease whose annotation cannot be read counts as
/// holding everything, so nothing is taken while it lives.
#[tokio::test(start_paused = true)]
async fn unreadable_holdings_block_claims_until_their_lease_expires() {
    let store = MemoryLeaseStore::new();
    let mut odd = Lease::default();
    odd.metadata.name = Some("workers-zed".into());
    odd.metadata.labels = Some([(SHARD_GROUP_LABEL.to_owned(), "workers".to_owned())].into());
    odd.metadata.annotations =
        Some([(SHARD_RANGES_ANNOTATION.to_owned(), "garbage".to_owned())].into());
    odd.spec = Some(k8s_openapi::api::coordination::v1::LeaseSpec {
        holder_identity: Some("zed".into()),
        lease_duration_seconds: Some(15),
        ..Default::default()
    });
    store.create(&odd).await.unwrap();
    let owners = Owners::new(Duration::ZERO);
    let started = Instant::now();
    let a = Replica::start(store.clone(), &owners, config("a", S(15), S(10), S(2)));
    owners
        .wait_until("a holds everything", S(60), |h| cover(h, &["a"]))
        .await;
    assert!(
        started.elapsed() >= S(15),
        "took over after {:?}",
        started.elapsed()
    );
    a.stop().await;
}

#[test]
fn configurations_are_checked_before_anything_runs() {
    let bad = |change: fn(&mut ShardMembershipConfig)| {
        let mut c = ShardMembershipConfig::new("workers", "a");
        change(&mut c);
        ShardMembership::new(
            MemoryLeaseStore::new(),
            Owners::new(Duration::ZERO).owner("a"),
            c,
        )
        .unwrap_err()
    };
    assert!(matches!(
        bad(|c| c.renew_deadline = S(20)),
        Error::LeaseDurationNotAboveRenewDeadline { .. }
    ));
    assert!(matches!(
        bad(|c| c.retry_period = S(10)),
        Error::RenewDeadlineNotAboveRetryPeriod { .. }
    ));
    assert!(matches!(
        bad(|c| c.lease_duration = Duration::ZERO),
        Error::ZeroDuration {
            field: "lease_duration"
        }
    ));
    assert!(matches!(bad(|c| c.identity.clear()), Error::EmptyIdentity));
    assert!(matches!(
        bad(|c| c.group = "Workers".into()),
        Error::InvalidName { what: "group", .. }
    ));
    assert!(matches!(
        bad(|c| c.identity = "A_B".into()),
        Error::InvalidName {
            what: "Lease name",
            ..
        }
    ));
}

#[test]
fn public_handles_and_futures_are_send_and_sync() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    use kinformer_coordination::{LeaderElectionConfig, LeaderElector};

    let store = MemoryLeaseStore::new();
    send_sync(&store);
    let dyn_store: std::sync::Arc<dyn LeaseStore> = std::sync::Arc::new(store.clone());
    send_sync(&dyn_store);
    send(&dyn_store.get("x"));
    send(&dyn_store.list(""));

    let elector = LeaderElector::new(store.clone(), LeaderElectionConfig::new("l", "a")).unwrap();
    send_sync(&elector);
    send_sync(&elector.status());
    send(&elector.status().changed());
    send(&elector.run(std::future::pending::<()>()));

    let member = ShardMembership::new(
        store,
        Owners::new(Duration::ZERO).owner("a"),
        ShardMembershipConfig::new("workers", "a"),
    )
    .unwrap();
    send_sync(&member);
    send_sync(&member.held());
    send(&member.run(std::future::pending::<()>()));
    send_sync(&Error::store("x"));
}
