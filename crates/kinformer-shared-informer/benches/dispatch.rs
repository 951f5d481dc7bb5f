//! Dispatch: 100k `MODIFIED` events of 1000 small objects from an in-memory source through the
//! whole informer (reflector, in-order delta FIFO, indexer) to 1 and to 10 handlers; and the lag
//! of a fast handler while another is slow (50 µs per event).
//!
//! `cargo bench -p kinformer-shared-informer --bench dispatch`. No HTTP and no decoding: this is
//! the informer's own cost per event.

#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kinformer_core::{ApiResource, DynamicObject, Scope, WatchEvent};
use kinformer_delta_fifo::DeltaFifo;
use kinformer_indexer::Indexer;
use kinformer_shared_informer::{InformerConfig, ResourceEventHandler, SharedIndexInformer};
use kinformer_test_support::Replay;

const OBJECTS: usize = 1000;
const EVENTS: usize = 100_000;

fn object(i: usize, version: usize) -> Arc<DynamicObject> {
    let resource = ApiResource::new("", "v1", "ConfigMap", "configmaps", Scope::Namespaced);
    let mut o = DynamicObject::new(&resource, &format!("cm-{i}"));
    o.metadata.namespace = Some("bench".into());
    o.metadata.resource_version = Some(version.to_string());
    Arc::new(o)
}

/// Lists `OBJECTS` objects, then serves `EVENTS` prepared events on one watch that then stays open.
fn prepared() -> Replay<DynamicObject> {
    let events: Vec<_> = (0..EVENTS)
        .map(|n| WatchEvent::Modified(object(n % OBJECTS, OBJECTS + 1 + n)))
        .collect();
    Replay::new(
        (0..OBJECTS).map(|i| object(i, i + 1)).collect(),
        &OBJECTS.to_string(),
    )
    .with_events(events)
}

#[derive(Clone, Default)]
struct Counter {
    seen: Arc<AtomicU64>,
    cost: Duration,
}

impl ResourceEventHandler<DynamicObject> for Counter {
    fn on_update(&self, _: &Arc<DynamicObject>, _: &Arc<DynamicObject>) {
        if !self.cost.is_zero() {
            let until = Instant::now() + self.cost;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        self.seen.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs the informer with `handlers`; returns when the first `wait_for` handlers have every
/// event: (time until the cache is at the last version, time until those handlers are done).
fn run(
    rt: &tokio::runtime::Runtime,
    handlers: &[Counter],
    wait_for: usize,
) -> (Duration, Duration) {
    rt.block_on(async {
        let cache = Arc::new(Indexer::<DynamicObject>::new());
        let queue = Arc::new(DeltaFifo::new(cache.clone()));
        let events = kinformer_reflector::watcher(
            prepared(),
            kinformer_reflector::Config {
                streaming_list: kinformer_reflector::StreamingList::Off,
                ..kinformer_reflector::Config::default()
            },
        );
        let informer = Arc::new(SharedIndexInformer::new(
            events,
            queue,
            cache,
            InformerConfig {
                // Slow handlers still working are not waited for.
                drain_on_shutdown: false,
                ..InformerConfig::default()
            },
        ));
        for h in handlers {
            informer.add_handler(h.clone()).unwrap();
        }
        let start = Instant::now();
        let task = tokio::spawn({
            let informer = Arc::clone(&informer);
            async move { informer.run().await }
        });
        let last = (OBJECTS + EVENTS).to_string();
        let mut cache_done = None;
        loop {
            if cache_done.is_none()
                && informer
                    .last_sync_resource_version()
                    .is_some_and(|v| v.as_str() == last)
            {
                cache_done = Some(start.elapsed());
            }
            if handlers[..wait_for]
                .iter()
                .all(|h| h.seen.load(Ordering::Relaxed) == EVENTS as u64)
            {
                break;
            }
            tokio::time::sleep(Duration::from_micros(100)).await;
        }
        let done = start.elapsed();
        informer.shutdown().await;
        task.await.unwrap();
        (cache_done.unwrap_or(done), done)
    })
}

fn dispatch(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("informer_dispatch");
    group.sample_size(10);
    group.throughput(Throughput::Elements(EVENTS as u64));
    for n in [1usize, 10] {
        group.bench_function(format!("{n}_handlers"), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        let handlers: Vec<Counter> = (0..n).map(|_| Counter::default()).collect();
                        run(&rt, &handlers, n).1
                    })
                    .sum()
            });
        });
    }
    group.finish();

    // The lag of a fast handler beside a slow one: how long after the cache it finishes.
    let alone = run(&rt, &[Counter::default()], 1);
    let slow = Counter {
        cost: Duration::from_micros(50),
        ..Counter::default()
    };
    let beside = run(&rt, &[Counter::default(), slow], 1);
    println!(
        "fast handler alone: cache at {:?}, handler done at {:?}; beside a 50 µs/event handler: cache at {:?}, fast handler done at {:?}",
        alone.0, alone.1, beside.0, beside.1
    );
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
