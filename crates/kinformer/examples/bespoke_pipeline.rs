//! Every layer of the pipeline is a trait: this example swaps three of them for code of its own.
//! - the source: a `ListWatch` that wraps the HTTP client and leaves `kube-system` out before
//!   anything is decoded into the cache;
//! - the queue: the delta FIFO in its classic per-key mode instead of the in-order default;
//! - the cache: a plain `Mutex<BTreeMap>` instead of the indexer.
//!
//! `cargo run -p kinformer --example bespoke_pipeline` against your kubeconfig's cluster, or an
//! in-process simulated cluster when there is none.

mod support;

use std::collections::BTreeMap;
use std::sync::Mutex;

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kinformer::core::list_watch::{self, WatchStream};
use kinformer::core::{ListParams, ObjectList, WatchEvent, WatchParams};
use kinformer::delta_fifo::{DeltaFifo, Mode};
use kinformer::prelude::*;

/// The client's pods, without those of `kube-system`.
struct NoKubeSystem(Api<Pod>);

fn wanted(pod: &Pod) -> bool {
    pod.namespace() != Some("kube-system")
}

#[async_trait::async_trait]
impl ListWatch<Pod> for NoKubeSystem {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<Pod>, list_watch::Error> {
        let mut page = ListWatch::list(&self.0, params).await?;
        page.items.retain(|pod| wanted(pod));
        Ok(page)
    }

    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<Pod>, list_watch::Error> {
        let stream = ListWatch::watch(&self.0, params).await?;
        Ok(Box::pin(stream.filter(|event| {
            let keep = match event {
                Ok(WatchEvent::Added(p) | WatchEvent::Modified(p) | WatchEvent::Deleted(p)) => {
                    wanted(p)
                }
                _ => true,
            };
            std::future::ready(keep)
        })))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    support::init_logging();
    let (client, _sim) = support::connect().await?;

    let cache: Arc<Mutex<BTreeMap<ObjectKey, Arc<Pod>>>> = Arc::default();
    let pods = Informer::<Pod>::builder()
        .list_watch(NoKubeSystem(Api::all(client)))
        .cache(Arc::clone(&cache))
        // The queue consults the cache it is given as its known objects.
        .queue(|known| {
            DeltaFifo::builder()
                .mode(Mode::Classic)
                .known_objects(known)
                .build()
        })
        .handler(HandlerFns::new().on_add(|pod: &Arc<Pod>, _| println!("Pod Added: {}", pod.key())))
        .build()?;
    pods.start();
    support::synced_or_exit(pods.wait_synced_for(support::sync_timeout()).await);
    let namespaces: std::collections::BTreeSet<String> = cache
        .lock()
        .map_err(|_| "the cache lock is poisoned")?
        .keys()
        .filter_map(|k| k.namespace().map(str::to_owned))
        .collect();
    eprintln!("cached namespaces: {namespaces:?}");
    support::run_for_a_while().await;
    pods.shutdown().await;
    Ok(())
}
