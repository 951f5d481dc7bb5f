//! Indexer benchmarks at 100k pods (k8s-openapi `Pod`s with realistic metadata, a container and
//! a node, built in memory by `kinformer_test_support::typed_pods`): add, update, delete,
//! `replace_all` and an unchanged relist by pages; `get` and `by_index` latency with
//! four concurrent readers while a writer updates. Ends with a table of targets against measured
//! figures.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{CacheRead, CacheWrite, IndexRead, Object, ReflectorStoreExt};
use kinformer_indexer::{Indexer, IndexerReader, index};

const PODS: usize = 100_000;

/// The same pods at their next resourceVersion: distinct objects, as a watch delivers them.
fn next_versions(pods: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
    pods.iter()
        .map(|p| {
            let mut next = Pod::clone(p);
            let rv: u64 = next
                .metadata
                .resource_version
                .as_deref()
                .unwrap()
                .parse()
                .unwrap();
            next.metadata.resource_version = Some((rv + PODS as u64).to_string());
            Arc::new(next)
        })
        .collect()
}

fn indexer() -> Indexer<Pod> {
    Indexer::with_indexers([
        (index::NAMESPACE.to_string(), index::namespace()),
        (index::POD_NODE_NAME.to_string(), index::pod_node_name()),
    ])
    .unwrap()
}

fn filled(pods: &[Arc<Pod>]) -> Indexer<Pod> {
    let i = indexer();
    let replaced = i.replace_all(pods.to_vec());
    assert!(replaced.outcomes.iter().all(Result::is_ok));
    i
}

/// Four reader threads each run `op(reader, j)` for `j` in `0..ops_per_reader` while one writer
/// updates pods as fast as it can; returns the wall time until every reader is done. Wall time
/// divided by all readers' operations is the amortised cost of one read on this machine.
fn contended(
    indexer: &Indexer<Pod>,
    pods: &[Arc<Pod>],
    ops_per_reader: usize,
    op: impl Fn(&IndexerReader<Pod>, usize) + Sync,
) -> Duration {
    let stop = AtomicBool::new(false);
    let reader = indexer.reader();
    let op = &op;
    thread::scope(|s| {
        let stop_w = &stop;
        s.spawn(move || {
            let mut i = 0;
            while !stop_w.load(Ordering::Relaxed) {
                indexer.upsert(Arc::clone(&pods[i % PODS])).unwrap();
                i += 1;
            }
        });
        let start = Instant::now();
        let readers: Vec<_> = (0..4)
            .map(|t| {
                let r = reader.clone();
                s.spawn(move || {
                    for j in 0..ops_per_reader {
                        op(&r, j + t * 7);
                    }
                })
            })
            .collect();
        for r in readers {
            r.join().unwrap();
        }
        let wall = start.elapsed();
        stop.store(true, Ordering::Relaxed);
        wall
    })
}

fn nodes() -> Vec<String> {
    (0..1000).map(|n| format!("node-{n:04}")).collect()
}

fn keys(pods: &[Arc<Pod>]) -> Vec<String> {
    pods.iter().map(|p| p.key().to_string()).collect()
}

fn benches(c: &mut Criterion, pods: &[Arc<Pod>]) {
    let keys = keys(pods);
    let mut g = c.benchmark_group("indexer");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements(PODS as u64));
    g.bench_function("add 100k", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let i = indexer();
                let start = Instant::now();
                for p in pods {
                    i.upsert(Arc::clone(p)).unwrap();
                }
                total += start.elapsed();
            }
            total
        })
    });
    let full = filled(pods);
    // Each update stores a new object (the next resourceVersion) over the cached one.
    let next = next_versions(pods);
    let mut flip = false;
    g.bench_function("update 100k", |b| {
        b.iter(|| {
            flip = !flip;
            for p in if flip { &next } else { pods } {
                full.upsert(Arc::clone(p)).unwrap();
            }
        })
    });
    g.bench_function("delete 100k", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let i = filled(pods);
                let start = Instant::now();
                for k in &keys {
                    black_box(i.remove(k));
                }
                total += start.elapsed();
            }
            total
        })
    });
    g.bench_function("replace_all 100k", |b| {
        b.iter(|| black_box(full.replace_all(pods.to_vec())))
    });
    // The held objects listed again: every one keeps its `Arc` and index values.
    g.bench_function("relist 100k unchanged, pages of 500", |b| {
        b.iter(|| {
            full.begin_relist().unwrap();
            for page in pods.chunks(500) {
                full.relist_page(page.to_vec()).unwrap();
            }
            full.end_relist("1".into()).unwrap();
        })
    });
    g.throughput(Throughput::Elements(1));
    let reader = full.reader();
    let mut n = 0;
    g.bench_function("get, uncontended", |b| {
        b.iter(|| {
            n = (n + 7919) % PODS;
            black_box(reader.get_by_key(&keys[n]))
        })
    });
    g.bench_function("get, 1k hot keys, uncontended", |b| {
        b.iter(|| {
            n = (n + 7) % 1000;
            black_box(reader.get_by_key(&keys[n]))
        })
    });
    g.bench_function("get, 4 readers + 1 writer (amortised)", |b| {
        b.iter_custom(|iters| {
            contended(&full, pods, (iters as usize).div_ceil(4), |r, j| {
                black_box(r.get_by_key(&keys[(j * 7919) % PODS]));
            })
        })
    });
    let nodes = nodes();
    g.bench_function(
        "by_index node (100 pods), 4 readers + 1 writer (amortised)",
        |b| {
            b.iter_custom(|iters| {
                contended(&full, pods, (iters as usize).div_ceil(4), |r, j| {
                    black_box(r.by_index(index::POD_NODE_NAME, &nodes[j % 1000]).unwrap());
                })
            })
        },
    );
    g.finish();
}

/// Best of `rounds` timings of `f`, as a rate per second for `n` operations.
fn rate(n: usize, rounds: usize, mut f: impl FnMut() -> Duration) -> f64 {
    let best = (0..rounds).map(|_| f()).min().unwrap();
    n as f64 / best.as_secs_f64()
}

fn summary(pods: &[Arc<Pod>]) {
    let keys = keys(pods);
    let full = filled(pods);
    let next = next_versions(pods);
    let mut flip = false;
    let update = rate(PODS, 6, || {
        flip = !flip;
        let start = Instant::now();
        for p in if flip { &next } else { pods } {
            full.upsert(Arc::clone(p)).unwrap();
        }
        start.elapsed()
    });
    let add = rate(PODS, 3, || {
        let i = indexer();
        let start = Instant::now();
        for p in pods {
            i.upsert(Arc::clone(p)).unwrap();
        }
        start.elapsed()
    });
    let delete = rate(PODS, 3, || {
        let i = filled(pods);
        let start = Instant::now();
        for k in &keys {
            black_box(i.remove(k));
        }
        start.elapsed()
    });
    let reader = full.reader();
    let get_alone = 1e9
        / rate(1_000_000, 3, || {
            let start = Instant::now();
            for j in 0..1_000_000usize {
                black_box(reader.get_by_key(&keys[(j * 7919) % PODS]));
            }
            start.elapsed()
        });
    let get_busy = 1e9
        / rate(1_000_000, 3, || {
            contended(&full, pods, 250_000, |r, j| {
                black_box(r.get_by_key(&keys[(j * 7919) % PODS]));
            })
        });
    let nodes = nodes();
    let by_index_busy = 1e9
        / rate(10_000, 3, || {
            contended(&full, pods, 2_500, |r, j| {
                black_box(r.by_index(index::POD_NODE_NAME, &nodes[j % 1000]).unwrap());
            })
        });
    let get_hot = 1e9
        / rate(1_000_000, 3, || {
            let start = Instant::now();
            for j in 0..1_000_000usize {
                black_box(reader.get_by_key(&keys[(j * 7) % 1000]));
            }
            start.elapsed()
        });
    let get_hot_busy = 1e9
        / rate(1_000_000, 3, || {
            contended(&full, pods, 250_000, |r, j| {
                black_box(r.get_by_key(&keys[(j * 7) % 1000]));
            })
        });
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().next().unwrap_or("?").to_string();
    let row = |what: &str, target: &str, measured: String, ok: Option<bool>| {
        let verdict = match ok {
            Some(true) => "ok",
            Some(false) => "MISSED",
            None => "",
        };
        println!("  {what:<56} {target:>10} {measured:>12} {verdict}");
    };
    let per_s = |r: f64| format!("{:.2} M/s", r / 1e6);
    let ns = |t: f64| format!("{t:.0} ns");
    println!();
    println!(
        "indexer at {PODS} pods (namespace + spec.nodeName indexes), {cores} cores, load average {load}:"
    );
    row("", "target", "measured".to_string(), None);
    row("update", ">= 1 M/s", per_s(update), Some(update >= 1e6));
    row("add (empty cache)", "", per_s(add), None);
    row("delete", "", per_s(delete), None);
    row(
        "get, 1k hot keys, uncontended",
        "<= 100 ns",
        ns(get_hot),
        Some(get_hot <= 100.0),
    );
    row(
        "get, 1k hot keys, 4 readers + 1 writer, amortised",
        "<= 100 ns",
        ns(get_hot_busy),
        Some(get_hot_busy <= 100.0),
    );
    row(
        "get, random of 100k, uncontended",
        "<= 100 ns",
        ns(get_alone),
        Some(get_alone <= 100.0),
    );
    row(
        "get, random of 100k, 4 readers + 1 writer, amortised",
        "<= 100 ns",
        ns(get_busy),
        Some(get_busy <= 100.0),
    );
    row(
        "by_index node (100 pods), 4 readers + 1 writer, amortised",
        "",
        ns(by_index_busy),
        None,
    );
    println!(
        "  A random get over 100k pods misses the CPU cache several times (the caller's key, the"
    );
    println!(
        "  table, the stored key, the object's reference count); hot keys show the lookup itself."
    );
}

fn main() {
    let pods = kinformer_test_support::typed_pods(PODS);
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c, &pods);
    c.final_summary();
    summary(&pods);
}
