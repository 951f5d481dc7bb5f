//! The pattern every controller author writes next: an informer whose handlers only put keys in
//! a rate-limited work queue, and workers that take each key and reconcile it from the lister
//! (the cache). A failed key comes back after client-go's default controller delays
//! (`add_rate_limited`), a reconciled one has its failures forgotten (`forget`). A key changed ten
//! times while queued is reconciled once, and never by two workers at once.
//!
//! `cargo run -p kinformer --example controller` against your kubeconfig's cluster, or an
//! in-process simulated cluster when there is none.

mod support;

use k8s_openapi::api::core::v1::Pod;
use kinformer::indexer::IndexerReader;
use kinformer::lister::{self, Lister};
use kinformer::prelude::*;

/// Retries of one key before it is dropped (until its next change queues it again).
const MAX_RETRIES: u32 = 5;

/// Brings the world in line with one pod: here, it only reports what it would act on.
fn reconcile(pods: &Lister<Pod, IndexerReader<Pod>>, key: &str) -> Result<(), lister::Error> {
    let (namespace, name) = key.split_once('/').unwrap_or(("", key));
    match pods.namespaced(namespace).get(name) {
        Ok(pod) => {
            let phase = pod
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .unwrap_or("Unknown");
            println!("reconciled {key}: {phase}");
            Ok(())
        }
        Err(lister::Error::NotFound { .. }) => {
            println!("reconciled {key}: deleted");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    support::init_logging();
    let (client, _sim) = support::connect().await?;
    // client-go's `NewTypedRateLimitingQueue(DefaultTypedControllerRateLimiter())`.
    let queue: RateLimitingQueue<String> = RateLimitingQueue::new();

    let enqueue = |queue: &RateLimitingQueue<String>| {
        let queue = queue.clone();
        move |key: ObjectKey| queue.add(key.to_string())
    };
    let (on_add, on_update, on_delete) = (enqueue(&queue), enqueue(&queue), enqueue(&queue));
    let factory = Factory::new(client);
    let pods = factory.informer::<Pod>();
    pods.add_handler(
        HandlerFns::new()
            .on_add(move |pod: &Arc<Pod>, _| on_add(pod.key()))
            .on_update(move |_, pod: &Arc<Pod>| on_update(pod.key()))
            .on_delete(move |pod: &DeltaObject<Pod>| on_delete(pod.key())),
    )?;
    factory.start();
    support::synced_or_exit(factory.wait_synced_for(support::sync_timeout()).await);

    let workers: Vec<_> = (0..2)
        .map(|_| {
            let queue = queue.clone();
            let lister = pods.lister();
            tokio::spawn(async move {
                while let Some(key) = queue.get().await {
                    match reconcile(&lister, &key) {
                        // Succeeded: its next failure starts again from the shortest delay.
                        Ok(()) => queue.forget(&key),
                        Err(e) if queue.num_requeues(&key) < MAX_RETRIES => {
                            eprintln!("reconciling {key} failed, will retry: {e}");
                            queue.add_rate_limited(key.clone());
                        }
                        Err(e) => {
                            eprintln!(
                                "reconciling {key} failed {MAX_RETRIES} times, giving up: {e}"
                            );
                            queue.forget(&key);
                        }
                    }
                    queue.done(&key);
                }
            })
        })
        .collect();

    support::run_for_a_while().await;
    queue.shut_down();
    for worker in workers {
        worker.await?;
    }
    factory.shutdown().await;
    Ok(())
}
