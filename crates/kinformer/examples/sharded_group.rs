//! Three replicas of a sharded controller in one process, coordinating through Leases, against
//! the simulated API server: each replica caches only the pods whose uid hashes into the
//! ranges the group gives it. One replica stops; its ranges move to the other two; at rest the
//! union of the caches is the server's pods and no pod is in two caches.
//!
//! It runs twice: against a server that applies KEP-5866's `shardSelector` (the sim at 1.36
//! with the `ShardedListAndWatch` gate on), and against one that ignores it (1.34), where each
//! replica lists everything and keeps its ranges by the same hash. Between the two, the table
//! at the end shows what each costs the API server per replica (requests and bytes on the
//! wire, counted by a forwarder in front of each replica), beside one unsharded informer.
//!
//! `cargo run -p kinformer --example sharded_group` (`-- --pods N` for another size).

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kinformer::coordination::{ShardMembership, ShardMembershipConfig};
use kinformer::core::shard::{ShardKey, ShardRanges};
use kinformer::partition::{ShardFiltering, Shards};
use kinformer::prelude::*;
use kinformer_sim::{ChurnConfig, KubeVersion, SimConfig, SimServer};
use kinformer_test_support::CountingProxy;
use tokio::sync::{oneshot, watch};

/// One replica: its informer, its membership's view of what it holds, and its shards' handle.
struct Replica {
    informer: Informer<Pod>,
    held: watch::Receiver<ShardRanges>,
    stop: Option<oneshot::Sender<()>>,
    run: tokio::task::JoinHandle<()>,
    shards: Shards,
}

impl Replica {
    async fn start(sim: &SimServer, index: usize) -> Result<Self, Box<dyn std::error::Error>> {
        let client = Client::new(kinformer::client::Config::new(sim.url()))?;
        // The replica owns nothing until the group gives it ranges.
        let (events, shards) = kinformer::partition::sharded(
            Api::<Pod>::all(client.clone()),
            ShardRanges::none(ShardKey::Uid),
            kinformer::reflector::Config::default(),
        );
        let informer = Informer::<Pod>::builder()
            .name(format!("pods-{index}"))
            .partitioned(events)
            .build()?;
        informer.start();
        let owner = shards.owner(informer.cache().clone());
        // Short timings, so that the example moves quickly: a replica that dies is replaced
        // after two seconds.
        let config = ShardMembershipConfig {
            lease_duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry_period: Duration::from_millis(250),
            ..ShardMembershipConfig::new("pod-indexers", format!("replica-{index}"))
        };
        let membership =
            ShardMembership::new(Api::<Lease>::namespaced(client, "default"), owner, config)?;
        let held = membership.held();
        let (stop, stopped) = oneshot::channel::<()>();
        let run = tokio::spawn(membership.run(async {
            let _ = stopped.await;
        }));
        Ok(Self {
            informer,
            held,
            stop: Some(stop),
            run,
            shards,
        })
    }

    fn keys(&self) -> BTreeSet<String> {
        let keys = self.informer.cache().list_keys();
        keys.into_iter().map(|k| k.to_string()).collect()
    }

    /// Leaves the group gracefully: its ranges are let go (their pods leave its cache), then
    /// its Lease is deleted, so the others take over at once.
    async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.run).await.ok();
        self.informer.shutdown().await;
    }
}

/// Waits for `check`, at most 60 s.
async fn until(what: &str, mut check: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !check() {
        if tokio::time::Instant::now() > deadline {
            return Err(format!("timed out waiting until {what}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Each of `replicas` holds ranges, and together they cover the hash space exactly once.
fn cover_once(replicas: &[&Replica]) -> bool {
    let mut all = ShardRanges::none(ShardKey::Uid);
    for r in replicas {
        let held = r.held.borrow().clone();
        if held.is_empty() || !all.intersection(&held).is_empty() {
            return false;
        }
        all = all.union(&held);
    }
    all.is_all()
}

fn server_pods(sim: &SimServer) -> BTreeSet<String> {
    let pods = sim.store().list_typed::<Pod>(None).unwrap_or_default();
    pods.iter().map(|p| p.key().to_string()).collect()
}

/// The union of the caches is the server's pods, and no pod is in two caches.
fn caches_partition_the_server(sim: &SimServer, replicas: &[&Replica]) -> bool {
    let mut union = BTreeSet::new();
    for r in replicas {
        for key in r.keys() {
            if !union.insert(key) {
                return false;
            }
        }
    }
    union == server_pods(sim)
}

/// Runs a group of three replicas through Leases against `config`'s server: they split the
/// pods, one leaves while the pods churn, and the two left end up with every pod exactly once.
/// Returns who filtered.
async fn run_group(
    label: &'static str,
    config: SimConfig,
    pods: usize,
) -> Result<ShardFiltering, Box<dyn std::error::Error>> {
    let sim = SimServer::start(config).await?;
    sim.store().seed_pods(pods, 7);
    let mut replicas = Vec::new();
    for i in 0..3 {
        replicas.push(Replica::start(&sim, i).await?);
    }
    let all: Vec<&Replica> = replicas.iter().collect();
    until("three replicas split the hash space", || cover_once(&all)).await?;
    sim.set_churn(Some(ChurnConfig {
        rate_per_sec: 200.0,
        seed: 11,
    }));
    tokio::time::sleep(Duration::from_millis(500)).await;

    // One replica leaves while the pods churn; its ranges move to the other two.
    replicas[2].stop().await;
    let two: Vec<&Replica> = replicas[..2].iter().collect();
    until("two replicas split the hash space", || cover_once(&two)).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    sim.set_churn(None);
    until("the two caches partition the server's pods", || {
        caches_partition_the_server(&sim, &two)
    })
    .await?;
    for r in &two {
        let held = r.held.borrow().clone();
        let cached = r.informer.cache().list();
        assert!(cached.iter().all(|p| held.contains(&**p)));
        println!(
            "{label}: {} holds {:.1}% of the hash space and caches {} of {} pods",
            r.informer.name(),
            held.fraction() * 100.0,
            cached.len(),
            server_pods(&sim).len(),
        );
    }
    let filtering = replicas[0].shards.filtering();
    for r in &mut replicas[..2] {
        r.stop().await;
    }
    Ok(filtering)
}

/// What one replica cost the server: its first sync, then its watch while the pods churned.
struct Load {
    sync_requests: u64,
    sync_bytes: u64,
    churn_bytes: u64,
}

/// Three replicas with fixed thirds of the hash space (or one unsharded informer when `shards`
/// is 1), each behind a counting forwarder: what each costs the server to sync, and per
/// thousand writes of churn. Returns the loads and the number of writes.
async fn measure_load(
    config: SimConfig,
    shards: usize,
    pods: usize,
) -> Result<(Vec<Load>, u64), Box<dyn std::error::Error>> {
    let sim = SimServer::start(config).await?;
    sim.store().seed_pods(pods, 7);
    let mut replicas = Vec::new();
    for i in 0..shards {
        let proxy = CountingProxy::start(sim.addr()).await?;
        let client = Client::new(kinformer::client::Config::new(proxy.url()))?;
        let informer = if shards == 1 {
            Informer::<Pod>::builder()
                .list_watch(Api::all(client))
                .build()?
        } else {
            let (events, _) = kinformer::partition::sharded(
                Api::<Pod>::all(client),
                ShardRanges::split(ShardKey::Uid, shards, i),
                kinformer::reflector::Config::default(),
            );
            Informer::<Pod>::builder().partitioned(events).build()?
        };
        informer.start();
        informer.wait_synced_for(Duration::from_secs(60)).await?;
        replicas.push((informer, proxy));
    }
    let synced: Vec<(u64, u64)> = replicas
        .iter()
        .map(|(_, p)| (p.requests(), p.bytes_to_client()))
        .collect();
    let before = sim.store().resource_version();
    sim.set_churn(Some(ChurnConfig {
        rate_per_sec: 300.0,
        seed: 11,
    }));
    tokio::time::sleep(Duration::from_secs(3)).await;
    sim.set_churn(None);
    let writes = sim.store().resource_version() - before;
    until("the caches hold the server's pods", || {
        let mut union = BTreeSet::new();
        let mut total = 0;
        for (informer, _) in &replicas {
            let keys = informer.cache().list_keys();
            total += keys.len();
            union.extend(keys.into_iter().map(|k| k.to_string()));
        }
        total == union.len() && union == server_pods(&sim)
    })
    .await?;
    let mut loads = Vec::new();
    for ((informer, proxy), (sync_requests, sync_bytes)) in replicas.into_iter().zip(synced) {
        loads.push(Load {
            sync_requests,
            sync_bytes,
            churn_bytes: proxy.bytes_to_client() - sync_bytes,
        });
        informer.shutdown().await;
    }
    Ok((loads, writes))
}

fn server_side() -> SimConfig {
    SimConfig {
        version: KubeVersion::V1_36,
        sharded_list_and_watch: true,
        ..SimConfig::default()
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pods = std::env::args()
        .skip_while(|a| a != "--pods")
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(3000);
    // The 1.36 server applies the selector; the 1.34 one ignores it and the client filters.
    let how = run_group("server-side", server_side(), pods).await?;
    assert_eq!(how, ShardFiltering::Server);
    let how = run_group("client-side", SimConfig::default(), pods).await?;
    assert_eq!(how, ShardFiltering::Client);

    println!();
    println!("What each replica costs the API server: {pods} pods, then churn at 300 writes/s");
    println!(
        "{:<12} {:<10} {:>14} {:>10} {:>22}",
        "sharding", "replica", "sync requests", "sync MiB", "churn KiB/1000 writes"
    );
    for (label, config, shards) in [
        ("none", SimConfig::default(), 1),
        ("client-side", SimConfig::default(), 3),
        ("server-side", server_side(), 3),
    ] {
        let (loads, writes) = measure_load(config, shards, pods).await?;
        for (i, load) in loads.iter().enumerate() {
            println!(
                "{:<12} {:<10} {:>14} {:>10.2} {:>22.1}",
                label,
                format!("replica-{i}"),
                load.sync_requests,
                load.sync_bytes as f64 / (1024.0 * 1024.0),
                load.churn_bytes as f64 / 1024.0 / (writes.max(1) as f64 / 1000.0),
            );
        }
    }
    Ok(())
}
