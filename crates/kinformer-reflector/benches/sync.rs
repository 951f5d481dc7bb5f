//! The reflector over real HTTP: the initial sync of 10k and 100k realistic pods (~4.5 KB of
//! JSON each) from the simulated server on 127.0.0.1 into an indexer, and 100k `MODIFIED`
//! events through one watch.
//!
//! `cargo bench -p kinformer-reflector --bench sync`. The server runs in the same process, on the
//! same two worker threads, so the figures include its cost of serving; they are a floor for
//! what the reflector does against a server of its own.

#![allow(missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kinformer_client::{Api, Client, Config as ClientConfig};
use kinformer_core::list_watch::{self, ListWatch, WatchStream};
use kinformer_core::{
    ApiResource, ListParams, ObjectList, ReflectorStore, Scope, StoreError, StoreEvent, WatchEvent,
    WatchParams,
};
use kinformer_indexer::{Indexer, index};
use kinformer_reflector::{Config, Reflector};
use kinformer_sim::{SimConfig, SimServer};
use serde_json::json;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn indexer() -> Arc<Indexer<Pod>> {
    Arc::new(Indexer::with_indexers([(index::NAMESPACE.to_string(), index::namespace())]).unwrap())
}

fn pods(sim: &SimServer) -> Api<Pod> {
    Api::all(Client::new(ClientConfig::new(sim.url())).unwrap())
}

/// Runs a reflector from `source` into a fresh indexer until it has synced to `target`.
async fn sync_to<L: ListWatch<Pod> + 'static>(source: L, target: &str) -> Duration {
    sync_into(source, indexer(), target).await
}

/// Runs a reflector from `source` into `store` until it has synced to `target`.
async fn sync_into<L, S>(source: L, store: S, target: &str) -> Duration
where
    L: ListWatch<Pod> + 'static,
    S: ReflectorStore<Pod> + 'static,
{
    let reflector = Reflector::new(source, store, Config::default());
    let handle = reflector.handle();
    let start = Instant::now();
    let run = tokio::spawn(async move { reflector.run().await });
    while handle
        .last_sync_resource_version()
        .is_none_or(|v| v.as_str() != target)
    {
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    let elapsed = start.elapsed();
    handle.stop();
    run.await.unwrap().unwrap();
    elapsed
}

/// A store that drops every object at once: the reflector's cost without a cache's.
struct Discard;

impl ReflectorStore<Pod> for Discard {
    fn apply(&self, _: StoreEvent<Pod>) -> Result<(), StoreError> {
        Ok(())
    }
}

fn initial_sync(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("reflector_initial_sync");
    group.sample_size(10);
    for n in [10_000usize, 100_000] {
        let sim = rt.block_on(SimServer::start(SimConfig::default())).unwrap();
        sim.store().seed_pods(n, 1);
        let target = sim.store().resource_version().to_string();
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(format!("{n}_pods"), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| rt.block_on(sync_to(pods(&sim), &target)))
                    .sum()
            });
        });
        rt.block_on(sim.shutdown());
    }
    group.finish();
}

/// Lists nothing at a fixed version, so the watch replays the server's history from there.
struct ReplayFrom {
    api: Api<Pod>,
    resource_version: String,
}

#[async_trait]
impl ListWatch<Pod> for ReplayFrom {
    async fn list(&self, _: &ListParams) -> Result<ObjectList<Pod>, list_watch::Error> {
        Ok(ObjectList::new(
            Vec::new(),
            self.resource_version.as_str().into(),
        ))
    }
    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<Pod>, list_watch::Error> {
        ListWatch::watch(&self.api, params).await
    }
}

fn watch_events(c: &mut Criterion) {
    const EVENTS: usize = 100_000;
    const PODS: usize = 1000;
    let rt = runtime();
    let sim = rt
        .block_on(SimServer::start(SimConfig {
            history_window: 2 * EVENTS,
            ..SimConfig::default()
        }))
        .unwrap();
    sim.store().seed_pods(PODS, 1);
    let before = sim.store().resource_version().to_string();
    let resource = ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced);
    let names: Vec<(String, String)> = sim
        .store()
        .list(&resource, None)
        .iter()
        .map(|p| {
            let m = &p["metadata"];
            (
                m["namespace"].as_str().unwrap().to_owned(),
                m["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for i in 0..EVENTS {
        let (ns, name) = &names[i % names.len()];
        sim.store()
            .patch(
                &resource,
                Some(ns),
                name,
                json!({"metadata": {"labels": {"step": i.to_string()}}}),
            )
            .unwrap();
    }
    let target = sim.store().resource_version().to_string();
    let mut group = c.benchmark_group("reflector_watch");
    group.sample_size(10);
    group.throughput(Throughput::Elements(EVENTS as u64));
    let replay = || ReplayFrom {
        api: pods(&sim),
        resource_version: before.clone(),
    };
    group.bench_function("100k_modified", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| rt.block_on(sync_to(replay(), &target)))
                .sum()
        });
    });
    group.bench_function("100k_modified_discarded", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| rt.block_on(sync_into(replay(), Discard, &target)))
                .sum()
        });
    });
    // The same events read straight off the client's watch stream, with no reflector and no
    // store: the part of the cost that is the server's and the decoder's.
    group.bench_function("100k_modified_client_only", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    rt.block_on(async {
                        let api = pods(&sim);
                        let params = WatchParams {
                            resource_version: Some(before.clone()),
                            ..WatchParams::default()
                        };
                        let start = Instant::now();
                        let mut stream = ListWatch::watch(&api, &params).await.unwrap();
                        let mut seen = 0;
                        while seen < EVENTS {
                            match stream.next().await {
                                Some(Ok(WatchEvent::Modified(_))) => seen += 1,
                                Some(Ok(_)) => {}
                                other => panic!("the watch ended early: {other:?}"),
                            }
                        }
                        start.elapsed()
                    })
                })
                .sum()
        });
    });
    group.finish();
    rt.block_on(sim.shutdown());
}

criterion_group!(benches, initial_sync, watch_events);
criterion_main!(benches);
