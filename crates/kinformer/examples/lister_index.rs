//! A lister with a custom index: pods by node. The informer's cache gets a `by-node` index next to
//! the namespace one; once synced, the lister answers "which pods run on this node" from memory.
//!
//! `cargo run -p kinformer --example lister_index` against your kubeconfig's cluster, or an
//! in-process simulated cluster when there is none.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kinformer::indexer::{Indexer, index};
use kinformer::prelude::*;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    support::init_logging();
    let (client, _sim) = support::connect().await?;

    // A custom index: any function from an object to the values it is filed under.
    let by_node = index::func(|pod: &Pod| {
        Ok(pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .into_iter()
            .collect())
    });
    let cache = Arc::new(Indexer::with_indexers([
        (index::NAMESPACE.to_string(), index::namespace()),
        ("by-node".to_string(), by_node),
    ])?);
    let pods = Informer::<Pod>::builder()
        .list_watch(Api::all(client))
        .cache(cache)
        .build()?;
    pods.start();
    support::synced_or_exit(pods.wait_synced_for(support::sync_timeout()).await);

    let lister = pods.lister();
    let mut per_node = BTreeMap::new();
    for node in pods.cache().reader().list_index_func_values("by-node")? {
        per_node.insert(node.clone(), lister.by_index("by-node", &node)?.len());
    }
    for (node, count) in &per_node {
        println!("{node}: {count} pods");
    }
    let unscheduled =
        lister.list(&LabelSelector::everything()).len() - per_node.values().sum::<usize>();
    println!("unscheduled: {unscheduled} pods");
    pods.shutdown().await;
    Ok(())
}
