//! The Rust version of client-go's classic pod watcher: an informer on pods that prints each
//! change as `Pod Added: NAMESPACE/NAME`, `Pod Updated: ...`, `Pod Deleted: ...`.
//!
//! `cargo run -p kinformer --example pod_watcher` against your kubeconfig's cluster, or, when
//! there is none, an in-process simulated cluster with churn (it says so on stderr). Ctrl-C stops it.

mod support;

use k8s_openapi::api::core::v1::Pod;
use kinformer::prelude::*;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    support::init_logging();
    let (client, _sim) = support::connect().await?;

    let factory = Factory::new(client);
    let pods = factory.informer::<Pod>();
    pods.add_handler(
        HandlerFns::new()
            .on_add(|pod: &Arc<Pod>, _| println!("Pod Added: {}", pod.key()))
            .on_update(|_, pod: &Arc<Pod>| println!("Pod Updated: {}", pod.key()))
            .on_delete(|pod: &DeltaObject<Pod>| println!("Pod Deleted: {}", pod.key())),
    )?;
    factory.start();
    // Names the late informer, how far it got and its last error when the cluster does not
    // answer in time.
    support::synced_or_exit(factory.wait_synced_for(support::sync_timeout()).await);
    eprintln!(
        "synced: {} pods in the cache",
        pods.cache().list_keys().len()
    );

    support::run_for_a_while().await;
    factory.shutdown().await;
    Ok(())
}
