//! Dispatch: 100k `MODIFIED` events of 1000 small objects from an in-memory source through the
//! whole informer (reflector, in-order delta FIFO, indexer) to 1 and to 10 handlers; and the lag
//! of a fast handler while another is slow (50 µs per event).
//!
//! `cargo bench -p kinformer-shared-informer --bench dispatch`. No HTTP and no decoding: this is
//! the informer's own cost per event. It also prints the process's CPU time per event with one
//! handler (from `/proc`, Linux only; other load on the machine inflates it less than it does
//! wall-clock time). With `KINFORMER_BENCH_METRICS=1` the Prometheus recorder is installed
//! first: the difference between the two runs is what the metrics cost per event.

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

/// The process's CPU time so far (user and system), from `/proc/self/stat`; `None` elsewhere.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(") ")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name and state.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // The kernel's USER_HZ, 100 on every Linux this runs on.
    Some(Duration::from_millis(ticks * 10))
}

fn dispatch(c: &mut Criterion) {
    let metrics =
        std::env::var_os("KINFORMER_BENCH_METRICS").is_some_and(|v| !v.is_empty() && v != "0");
    if metrics {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .install_recorder()
            .expect("the Prometheus recorder");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // CPU per event, over enough runs for the clock's 10 ms ticks to vanish.
    if let Some(before) = process_cpu() {
        const RUNS: u32 = 20;
        for _ in 0..RUNS {
            run(&rt, &[Counter::default()], 1);
        }
        if let Some(after) = process_cpu() {
            let per_event = (after - before) / (RUNS * EVENTS as u32);
            println!(
                "CPU per event, 1 handler, {} runs{}: {:.0} ns",
                RUNS,
                if metrics {
                    ", Prometheus recorder installed"
                } else {
                    ", no recorder"
                },
                per_event.as_nanos()
            );
        }
    }
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
