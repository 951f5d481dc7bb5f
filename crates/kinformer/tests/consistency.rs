//! The consistency check over HTTP against the simulated server: none reported while the watch
//! tells the truth, and a planted divergence (an object changed behind the informer's back, its
//! events hidden from watches) reported by key, periodically, and loudly when asked.

use std::time::Duration;

use futures_util::FutureExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kinformer::consistency::{ConsistencyCheck, OnMismatch};
use kinformer::core::{ApiResource, ResourceVersion, Scope};
use kinformer::prelude::*;
use kinformer_sim::{SimConfig, SimServer};
use serde_json::json;

fn configmaps() -> ApiResource {
    ApiResource::new("", "v1", "ConfigMap", "configmaps", Scope::Namespaced)
}

fn put(sim: &SimServer, name: &str, value: &str) -> ResourceVersion {
    let store = sim.store();
    let object = json!({"metadata": {"name": name, "namespace": "default"}, "data": {"v": value}});
    let out = match store.get(&configmaps(), Some("default"), name) {
        Some(_) => store
            .patch(
                &configmaps(),
                Some("default"),
                name,
                json!({"data": {"v": value}}),
            )
            .unwrap(),
        None => store.create(&configmaps(), object).unwrap(),
    };
    out["metadata"]["resourceVersion"].as_str().unwrap().into()
}

async fn start(sim: &SimServer, check: ConsistencyCheck) -> Informer<ConfigMap> {
    let client = Client::new(kinformer::client::Config::new(sim.url())).unwrap();
    let informer = Informer::<ConfigMap>::builder()
        .list_watch(Api::all(client))
        .consistency_check(check)
        .build()
        .unwrap();
    informer.start();
    assert!(informer.wait_synced(Some(Duration::from_secs(10))).await);
    informer
}

/// Changes `b` with its events hidden, then writes `c` so the cache moves past the hidden write.
async fn plant_divergence(sim: &SimServer, informer: &Informer<ConfigMap>) {
    sim.faults().hide_from_watches(Some("default"), "b");
    put(sim, "b", "changed behind the informer's back");
    let visible = put(sim, "c", "1");
    informer
        .wait_until_fresh(&visible, Duration::from_secs(10))
        .await
        .unwrap();
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truthful_watch_passes_and_a_hidden_change_is_reported_by_key() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    for name in ["a", "b"] {
        put(&sim, name, "0");
    }
    let once = ConsistencyCheck {
        period: None,
        on_mismatch: OnMismatch::Log,
    };
    let informer = start(&sim, once).await;
    // The check after sync found nothing.
    eventually("the check after sync", || {
        informer.consistency().is_some_and(|s| s.checks == 1)
    })
    .await;
    assert_eq!(informer.consistency().unwrap().mismatches, 0);
    put(&sim, "a", "1");
    let report = informer.check_consistency().await.unwrap();
    assert!(report.is_consistent(), "{report}");

    plant_divergence(&sim, &informer).await;
    let report = informer.check_consistency().await.unwrap();
    assert_eq!(report.differing.len(), 1, "{report}");
    assert_eq!(report.differing[0].0, "default/b");
    assert!(
        report.missing.is_empty() && report.extra.is_empty(),
        "{report}"
    );
    let stats = informer.consistency().unwrap();
    assert_eq!((stats.checks, stats.mismatches), (3, 1));
    assert_eq!(stats.last_mismatch, Some(report));
    informer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_periodic_check_finds_the_divergence_and_fails_loudly_when_asked() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    put(&sim, "b", "0");
    let loud = ConsistencyCheck {
        period: Some(Duration::from_millis(50)),
        on_mismatch: OnMismatch::Panic,
    };
    let informer = start(&sim, loud).await;
    plant_divergence(&sim, &informer).await;
    eventually("a periodic check to find the divergence", || {
        informer.consistency().is_some_and(|s| s.mismatches > 0)
    })
    .await;
    let shutdown = std::panic::AssertUnwindSafe(informer.shutdown())
        .catch_unwind()
        .await;
    let panic = shutdown.expect_err("shutdown re-raises the check's panic");
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("default/b"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_the_server_can_no_longer_answer_is_skipped() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    put(&sim, "a", "0");
    let once = ConsistencyCheck {
        period: None,
        on_mismatch: OnMismatch::Log,
    };
    let informer = start(&sim, once).await;
    eventually("the check after sync", || {
        informer.consistency().is_some_and(|s| s.checks == 1)
    })
    .await;
    // The watch is held back while the history behind the cache's version is compacted away:
    // the exact list at that version answers 410.
    sim.faults().stall_watches(Duration::from_secs(30));
    put(&sim, "a", "1");
    put(&sim, "a", "2");
    sim.faults().compact_now();
    assert_eq!(informer.check_consistency().await, None);
    let stats = informer.consistency().unwrap();
    assert_eq!((stats.checks, stats.skipped, stats.errors), (1, 1, 0));
    sim.faults().clear();
    informer.shutdown().await;
}
