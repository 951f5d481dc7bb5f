//! Sharded informers over HTTP: a server that applies KEP-5866's `shardSelector` (the sim at 1.36
//! with the `ShardedListAndWatch` gate on) and one that ignores it (1.34) give every replica the
//! same objects, by the same hash of the uid.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer::core::shard::{ShardKey, ShardRanges, fnv1a64};
use kinformer::partition::ShardFiltering;
use kinformer::prelude::*;
use kinformer_sim::{KubeVersion, SimConfig, SimServer};

/// Three replicas' caches of the pods, each sharded by `key`: their keys, and who filtered.
async fn three_shards(
    sim: &SimServer,
    key: ShardKey,
) -> (Vec<BTreeSet<String>>, Vec<ShardFiltering>) {
    let client = Client::new(kinformer::client::Config::new(sim.url())).unwrap();
    let mut keys = Vec::new();
    let mut filtering = Vec::new();
    for member in 0..3 {
        let ranges = ShardRanges::split(key, 3, member);
        let (events, shards) = kinformer::partition::sharded(
            Api::<Pod>::all(client.clone()),
            ranges,
            kinformer::reflector::Config::default(),
        );
        let informer = Informer::<Pod>::builder()
            .partitioned(events)
            .build()
            .unwrap();
        informer.start();
        assert!(informer.wait_synced(Some(Duration::from_secs(20))).await);
        keys.push(
            informer
                .cache()
                .list_keys()
                .into_iter()
                .map(|k| k.to_string())
                .collect(),
        );
        filtering.push(shards.filtering());
        informer.shutdown().await;
    }
    (keys, filtering)
}

/// The pods' keys by the member of three whose range holds the hash of their `key` field,
/// computed here from the server's objects, with the sim's own hash checked against ours on
/// the way.
fn expected(sim: &SimServer, key: ShardKey) -> Vec<BTreeSet<String>> {
    let mut by_member = vec![BTreeSet::new(); 3];
    for pod in sim.store().list_typed::<Pod>(None).unwrap() {
        let field = match key {
            ShardKey::Uid => pod.metadata.uid.clone().unwrap(),
            ShardKey::Namespace => pod.metadata.namespace.clone().unwrap(),
        };
        assert_eq!(kinformer_sim::shard_hash(&field), fnv1a64(field.as_bytes()));
        let member = (0..3)
            .find(|&m| ShardRanges::split(key, 3, m).contains(&pod))
            .unwrap();
        by_member[member].insert(pod.key().to_string());
    }
    by_member
}

async fn both_servers() -> (SimServer, SimServer) {
    let applies = SimServer::start(SimConfig {
        version: KubeVersion::V1_36,
        sharded_list_and_watch: true,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let ignores = SimServer::start(SimConfig::default()).await.unwrap();
    for sim in [&applies, &ignores] {
        sim.store().seed_pods(300, 5);
    }
    (applies, ignores)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_and_client_side_sharding_give_the_same_assignment() {
    let (applies, ignores) = both_servers().await;
    let (server_side, how) = three_shards(&applies, ShardKey::Uid).await;
    assert_eq!(how, [ShardFiltering::Server; 3]);
    assert_eq!(server_side, expected(&applies, ShardKey::Uid));
    // The server filtered: each list carried a selector and came back a third of the whole.
    let lists: Vec<_> = applies
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/v1/pods" && r.param("shardSelector").is_some())
        .collect();
    assert!(lists.len() >= 3, "{lists:#?}");

    let (client_side, how) = three_shards(&ignores, ShardKey::Uid).await;
    assert_eq!(how, [ShardFiltering::Client; 3]);
    assert_eq!(client_side, expected(&ignores, ShardKey::Uid));

    // Every pod in exactly one shard, and the shards of fair size.
    for (shards, sim) in [(&server_side, &applies), (&client_side, &ignores)] {
        let all: BTreeSet<String> = shards.iter().flatten().cloned().collect();
        assert_eq!(all.len(), shards.iter().map(BTreeSet::len).sum::<usize>());
        assert_eq!(
            all.len(),
            sim.store().list_typed::<Pod>(None).unwrap().len()
        );
        assert!(
            shards.iter().all(|s| s.len() > 50),
            "{:?}",
            shards.iter().map(BTreeSet::len).collect::<Vec<_>>()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharding_by_namespace_keeps_each_namespace_in_one_replica() {
    let (applies, ignores) = both_servers().await;
    for (sim, how) in [
        (&applies, ShardFiltering::Server),
        (&ignores, ShardFiltering::Client),
    ] {
        let (shards, filtering) = three_shards(sim, ShardKey::Namespace).await;
        assert_eq!(filtering, [how; 3]);
        assert_eq!(shards, expected(sim, ShardKey::Namespace));
        let namespaces_of = |keys: &BTreeSet<String>| -> BTreeSet<String> {
            keys.iter()
                .map(|k| k.split('/').next().unwrap().to_owned())
                .collect()
        };
        let owned: Vec<BTreeSet<String>> = shards.iter().map(namespaces_of).collect();
        for (i, a) in owned.iter().enumerate() {
            for b in &owned[i + 1..] {
                assert!(a.is_disjoint(b), "a namespace in two replicas: {owned:?}");
            }
        }
    }
}
