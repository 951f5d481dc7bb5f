//! Startup that reports, over HTTP against the simulated server: an informer's progress while
//! and after it lists, and a wait for sync that names the late informer, how far it got and its
//! last error.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer::prelude::*;
use kinformer_sim::{RequestKind, SimConfig, SimServer};

async fn sim_with_pods(n: usize) -> SimServer {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(n, 1);
    sim
}

fn client(sim: &SimServer) -> Client {
    Client::new(kinformer::client::Config::new(sim.url())).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_counts_the_list_and_ends_with_it() {
    let sim = sim_with_pods(1_200).await;
    let pods = Informer::<Pod>::builder()
        .list_watch(Api::all(client(&sim)))
        .build()
        .unwrap();
    let before = pods.progress().unwrap();
    assert_eq!((before.lists, before.listing), (0, false));
    pods.start();
    pods.wait_synced_for(Duration::from_secs(20)).await.unwrap();
    let after = pods.progress().unwrap();
    assert_eq!(
        (after.lists, after.objects, after.listing),
        (1, 1_200, false)
    );
    assert!(
        after.to_string().starts_with("listed: 1200 objects"),
        "{after}"
    );
    assert!(pods.sync_state().synced);
    pods.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_times_out_names_the_informer_and_its_last_error() {
    let sim = sim_with_pods(10).await;
    sim.faults().fail_next(RequestKind::Any, 503, 10_000, None);
    let factory = Factory::new(client(&sim));
    let _pods = factory.informer::<Pod>();
    factory.start();
    let late = factory
        .wait_synced_for(Duration::from_millis(500))
        .await
        .unwrap_err();
    assert_eq!(late.informers.len(), 1, "{late}");
    let pods = &late.informers[0];
    assert_eq!(pods.name, "pods");
    assert!(!pods.synced);
    let error = pods.last_error.as_deref().unwrap_or_default();
    assert!(error.contains("503"), "{late}");
    assert!(late.to_string().contains("last error:"), "{late}");
    // Once the server answers, the same wait succeeds.
    sim.faults().clear();
    factory
        .wait_synced_for(Duration::from_secs(30))
        .await
        .unwrap();
    factory.shutdown().await;
}
