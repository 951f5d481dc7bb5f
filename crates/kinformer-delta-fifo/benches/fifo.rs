//! Delta FIFO benchmarks at 100k pods (k8s-openapi `Pod`s with realistic metadata, built in
//! memory by `kinformer_test_support::typed_pods`): push then pop every pod, in classic and in-order mode, through the reflector's and
//! the consumer's traits. Ends with a table of the target against measured figures.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{ObjectKey, ReflectorStoreExt};
use kinformer_delta_fifo::{DeltaFifo, Mode};

const PODS: usize = 100_000;

fn fifo(mode: Mode) -> DeltaFifo<Pod> {
    let known: BTreeMap<ObjectKey, Arc<Pod>> = BTreeMap::new();
    DeltaFifo::builder()
        .mode(mode)
        .known_objects(Arc::new(known))
        .build()
        .unwrap()
}

/// Pushes every pod as an update, then pops until empty; returns the time and the deltas seen.
fn push_pop(mode: Mode, pods: &[Arc<Pod>]) -> (Duration, usize) {
    let q = fifo(mode);
    let start = Instant::now();
    for p in pods {
        q.update(Arc::clone(p)).unwrap();
    }
    let mut seen = 0;
    while let Some(p) = q.try_pop() {
        seen += p.len();
        black_box(p);
    }
    (start.elapsed(), seen)
}

/// A relist of every pod, then pops until empty (the initial sync's path).
fn relist_pop(mode: Mode, pods: &[Arc<Pod>]) -> Duration {
    let q = fifo(mode);
    let list = pods.to_vec();
    let start = Instant::now();
    q.replace(list, "1".into()).unwrap();
    let mut seen = 0;
    while let Some(p) = q.try_pop() {
        seen += p.len();
        black_box(p);
    }
    assert_eq!(seen, pods.len());
    start.elapsed()
}

/// Interleaved: push one, pop one (the steady state of a keeping-up informer).
fn interleaved(mode: Mode, pods: &[Arc<Pod>]) -> Duration {
    let q = fifo(mode);
    let start = Instant::now();
    for p in pods {
        q.update(Arc::clone(p)).unwrap();
        black_box(q.try_pop());
    }
    start.elapsed()
}

fn main() {
    let pods = kinformer_test_support::typed_pods(PODS);
    let mut c = Criterion::default().configure_from_args();
    {
        let mut g = c.benchmark_group("delta-fifo");
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(3));
        g.throughput(Throughput::Elements(PODS as u64));
        for (name, mode) in [("classic", Mode::Classic), ("in-order", Mode::InOrder)] {
            g.bench_function(format!("{name}: push 100k then pop all"), |b| {
                b.iter_custom(|iters| (0..iters).map(|_| push_pop(mode, &pods).0).sum())
            });
            g.bench_function(format!("{name}: relist 100k then pop all"), |b| {
                b.iter_custom(|iters| (0..iters).map(|_| relist_pop(mode, &pods)).sum())
            });
            g.bench_function(format!("{name}: push one, pop one, 100k times"), |b| {
                b.iter_custom(|iters| (0..iters).map(|_| interleaved(mode, &pods)).sum())
            });
        }
        g.finish();
    }
    c.final_summary();

    println!();
    println!("delta FIFO at {PODS} pods:");
    println!("  {:<40} {:>12} {:>14}", "push+pop", "target", "measured");
    for (name, mode) in [("classic", Mode::Classic), ("in-order", Mode::InOrder)] {
        let best = (0..5)
            .map(|_| {
                let (t, seen) = push_pop(mode, &pods);
                assert_eq!(seen, PODS, "every delta comes out");
                t
            })
            .min()
            .unwrap();
        let r = PODS as f64 / best.as_secs_f64();
        let ok = if r >= 2e6 { "ok" } else { "MISSED" };
        println!(
            "  {:<40} {:>12} {:>10.2} M/s {ok}",
            format!("{name}, push all then pop all"),
            ">= 2 M/s",
            r / 1e6
        );
        let best = (0..5).map(|_| relist_pop(mode, &pods)).min().unwrap();
        let r = PODS as f64 / best.as_secs_f64();
        println!(
            "  {:<40} {:>12} {:>10.2} M/s",
            format!("{name}, relist all then pop all"),
            "",
            r / 1e6
        );
        let best = (0..5).map(|_| interleaved(mode, &pods)).min().unwrap();
        let r = PODS as f64 / best.as_secs_f64();
        let ok = if r >= 2e6 { "ok" } else { "MISSED" };
        println!(
            "  {:<40} {:>12} {:>10.2} M/s {ok}",
            format!("{name}, push one pop one"),
            ">= 2 M/s",
            r / 1e6
        );
    }
}
