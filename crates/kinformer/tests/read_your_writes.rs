//! Freshness against the simulated server over HTTP, with its watches held back: the wait for a
//! version ends only once the cache holds it, and a controller that writes and then reads its
//! own cache through a work queue gated by `FreshKeys` never acts on a stale read (the same
//! controller on a plain queue does, which is what the gate is for).

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kinformer::core::{ApiResource, ResourceVersion, Scope};
use kinformer::prelude::*;
use kinformer::workqueue::default_controller_rate_limiter;
use kinformer_sim::{SimConfig, SimServer};
use serde_json::json;

fn configmaps() -> ApiResource {
    ApiResource::new("", "v1", "ConfigMap", "configmaps", Scope::Namespaced)
}

/// The counter a reconcile reads and writes.
fn count(cm: &ConfigMap) -> u64 {
    cm.data
        .as_ref()
        .and_then(|d| d.get("n"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Writes `n` into the counter, as a controller's write to the API server; returns the
/// version the server answered.
fn write(sim: &SimServer, n: u64) -> ResourceVersion {
    let out = sim
        .store()
        .patch(
            &configmaps(),
            Some("default"),
            "counter",
            json!({"data": {"n": n.to_string()}}),
        )
        .unwrap();
    out["metadata"]["resourceVersion"].as_str().unwrap().into()
}

async fn setup() -> (SimServer, Informer<ConfigMap>) {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store()
        .create(
            &configmaps(),
            json!({"metadata": {"name": "counter", "namespace": "default"}, "data": {"n": "0"}}),
        )
        .unwrap();
    let client = Client::new(kinformer::client::Config::new(sim.url())).unwrap();
    let informer = Informer::<ConfigMap>::builder()
        .list_watch(Api::all(client))
        .build()
        .unwrap();
    informer.start();
    assert!(informer.wait_synced(Some(Duration::from_secs(10))).await);
    (sim, informer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wait_for_a_version_ends_only_once_the_cache_holds_it() {
    let (sim, informer) = setup().await;
    // The watch is held back: a write now reaches the cache only after the stall.
    sim.faults().stall_watches(Duration::from_secs(2));
    let written = write(&sim, 1);
    let lister = informer.lister();
    let wait = informer.wait_until_fresh(&written, Duration::from_secs(20));
    tokio::pin!(wait);
    // Poll the wait beside the cache: whenever it has ended, the cache shows the write.
    let mut polls = 0;
    loop {
        polls += 1;
        tokio::select! {
            done = &mut wait => {
                done.unwrap();
                break;
            }
            () = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        assert!(polls < 2000, "the wait never ended");
    }
    assert!(
        polls > 1,
        "the wait ended before the held-back watch delivered the write"
    );
    let cm = lister.namespaced("default").get("counter").unwrap();
    assert_eq!(count(&cm), 1);
    assert_eq!(
        cm.metadata.resource_version.as_deref(),
        Some(written.as_str())
    );
    informer.shutdown().await;
}

/// Runs `rounds` reconciles of the counter: each reads it from the cache, expects the value it
/// wrote last, writes the next one (with the watch held back), records the write, and queues the
/// key again at once. Returns how many reads were stale.
async fn reconcile_rounds(
    sim: &SimServer,
    informer: &Informer<ConfigMap>,
    queue: RateLimitingQueue<String>,
    rounds: u64,
) -> u64 {
    let lister = informer.lister();
    let freshness = informer.freshness();
    let mut stale = 0;
    let mut last_written = 0;
    queue.add("default/counter".to_owned());
    for _ in 0..rounds {
        let key = tokio::time::timeout(Duration::from_secs(20), queue.get())
            .await
            .expect("the key came back")
            .unwrap();
        let seen = count(&lister.namespaced("default").get("counter").unwrap());
        if seen != last_written {
            stale += 1;
        }
        sim.faults().stall_watches(Duration::from_millis(300));
        last_written = seen + 1;
        let rv = write(sim, last_written);
        freshness.wrote(&key, rv);
        queue.add(key.clone());
        queue.forget(&key);
        queue.done(&key);
    }
    queue.shut_down();
    stale
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_gated_on_its_writes_never_reads_its_own_stale_cache() {
    let (sim, informer) = setup().await;
    let gated = RateLimitingQueue::with_rate_limiter_and_gate(
        default_controller_rate_limiter(),
        FreshKeys::new(informer.freshness()),
    );
    assert_eq!(reconcile_rounds(&sim, &informer, gated, 5).await, 0);
    // Each round acted once, on what it had written: the server holds 5.
    let stored = sim.store().get(&configmaps(), Some("default"), "counter");
    assert_eq!(stored.unwrap()["data"]["n"], "5");
    informer.shutdown().await;

    // The same controller on a plain queue reads its cache before its write shows.
    let (sim, informer) = setup().await;
    let plain = RateLimitingQueue::new();
    assert!(reconcile_rounds(&sim, &informer, plain, 3).await > 0);
    informer.shutdown().await;
}
