//! Indexer benchmarks at 100k pods (k8s-openapi `Pod`s with realistic metadata, a container and
//! a node, built in memory): add, update and delete per second; `get` and `by_index` latency with
//! four concurrent readers while a writer updates. Ends with a table of targets against measured
//! figures.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kinformer_core::Object;
use kinformer_indexer::{Indexer, IndexerReader, index};

const PODS: usize = 100_000;

/// 100 namespaces, 1000 nodes, 2000 ReplicaSets; names, uids, labels and owners as a cluster
/// has them.
fn pods(n: usize) -> Vec<Arc<Pod>> {
    (0..n)
        .map(|i| {
            let app = format!("app-{:04}", i % 2000);
            let hash = format!("{:010x}", (i % 2000) * 7919);
            Arc::new(Pod {
                metadata: ObjectMeta {
                    name: Some(format!("{app}-{hash}-{i:06}")),
                    namespace: Some(format!("team-{:03}", i % 100)),
                    uid: Some(format!("{i:08x}-0000-4000-8000-{:012x}", i * 31)),
                    resource_version: Some((1_000_000 + i).to_string()),
                    labels: Some(BTreeMap::from([
                        ("app".to_string(), app.clone()),
                        ("pod-template-hash".to_string(), hash.clone()),
                        (
                            "tier".to_string(),
                            ["web", "api", "db", "cache"][i % 4].to_string(),
                        ),
                        ("version".to_string(), format!("v{}", i % 7)),
                    ])),
                    owner_references: Some(vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "ReplicaSet".into(),
                        name: format!("{app}-{hash}"),
                        uid: format!("rs-{:08x}", i % 2000),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]),
                    ..ObjectMeta::default()
                },
                spec: Some(PodSpec {
                    node_name: Some(format!("node-{:04}", i % 1000)),
                    containers: vec![Container {
                        name: "main".into(),
                        image: Some(format!("registry.example/{app}:1.{}", i % 7)),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
                status: Some(PodStatus {
                    phase: Some("Running".into()),
                    pod_ip: Some(format!("10.{}.{}.{}", i >> 16 & 255, i >> 8 & 255, i & 255)),
                    ..PodStatus::default()
                }),
            })
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
    i.replace(pods.to_vec()).unwrap();
    i
}

/// Runs `f` on the calling thread while three more readers and one writer hammer the cache.
fn under_contention<T>(
    indexer: &Indexer<Pod>,
    pods: &[Arc<Pod>],
    f: impl FnOnce(&IndexerReader<Pod>) -> T,
) -> T {
    let stop = AtomicBool::new(false);
    let reader = indexer.reader();
    thread::scope(|s| {
        for t in 0..3 {
            let (r, stop) = (reader.clone(), &stop);
            s.spawn(move || {
                let mut i = t * 7;
                while !stop.load(Ordering::Relaxed) {
                    black_box(r.get_by_key(pods[i % PODS].key().as_str()));
                    i += 13;
                }
            });
        }
        let stop_w = &stop;
        s.spawn(move || {
            let mut i = 0;
            while !stop_w.load(Ordering::Relaxed) {
                indexer.update(Arc::clone(&pods[i % PODS])).unwrap();
                i += 1;
            }
        });
        let out = f(&reader);
        stop.store(true, Ordering::Relaxed);
        out
    })
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
                    i.add(Arc::clone(p)).unwrap();
                }
                total += start.elapsed();
            }
            total
        })
    });
    let full = filled(pods);
    g.bench_function("update 100k", |b| {
        b.iter(|| {
            for p in pods {
                full.update(Arc::clone(p)).unwrap();
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
                    black_box(i.delete_key(k));
                }
                total += start.elapsed();
            }
            total
        })
    });
    g.bench_function("replace 100k", |b| {
        b.iter(|| full.replace(pods.to_vec()).unwrap())
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
    g.bench_function("get, 4 readers + 1 writer", |b| {
        b.iter_custom(|iters| {
            under_contention(&full, pods, |r| {
                let start = Instant::now();
                for j in 0..iters as usize {
                    black_box(r.get_by_key(&keys[(j * 7919) % PODS]));
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("by_index node (100 pods), 4 readers + 1 writer", |b| {
        b.iter_custom(|iters| {
            under_contention(&full, pods, |r| {
                let start = Instant::now();
                for j in 0..iters as usize {
                    black_box(
                        r.by_index(index::POD_NODE_NAME, &format!("node-{:04}", j % 1000))
                            .unwrap(),
                    );
                }
                start.elapsed()
            })
        })
    });
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
    let update = rate(PODS, 5, || {
        let start = Instant::now();
        for p in pods {
            full.update(Arc::clone(p)).unwrap();
        }
        start.elapsed()
    });
    let add = rate(PODS, 3, || {
        let i = indexer();
        let start = Instant::now();
        for p in pods {
            i.add(Arc::clone(p)).unwrap();
        }
        start.elapsed()
    });
    let delete = rate(PODS, 3, || {
        let i = filled(pods);
        let start = Instant::now();
        for k in &keys {
            black_box(i.delete_key(k));
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
            under_contention(&full, pods, |r| {
                let start = Instant::now();
                for j in 0..1_000_000usize {
                    black_box(r.get_by_key(&keys[(j * 7919) % PODS]));
                }
                start.elapsed()
            })
        });
    let by_index_busy = 1e9
        / rate(10_000, 3, || {
            under_contention(&full, pods, |r| {
                let start = Instant::now();
                for j in 0..10_000usize {
                    black_box(
                        r.by_index(index::POD_NODE_NAME, &format!("node-{:04}", j % 1000))
                            .unwrap(),
                    );
                }
                start.elapsed()
            })
        });
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    println!();
    println!("indexer at {PODS} pods (namespace + spec.nodeName indexes), {cores} cores:");
    println!("  {:<44} {:>14} {:>14}", "", "target", "measured");
    let mark = |ok: bool| if ok { "ok" } else { "MISSED" };
    println!(
        "  {:<44} {:>14} {:>11.2} M/s {}",
        "update",
        ">= 1 M/s",
        update / 1e6,
        mark(update >= 1e6)
    );
    println!(
        "  {:<44} {:>14} {:>11.2} M/s",
        "add (empty cache)",
        "",
        add / 1e6
    );
    println!("  {:<44} {:>14} {:>11.2} M/s", "delete", "", delete / 1e6);
    println!(
        "  {:<44} {:>14} {:>11.0} ns {}",
        "get, uncontended",
        "<= 100 ns",
        get_alone,
        mark(get_alone <= 100.0)
    );
    println!(
        "  {:<44} {:>14} {:>11.0} ns {}",
        "get, 4 readers + 1 writer",
        "<= 100 ns",
        get_busy,
        mark(get_busy <= 100.0)
    );
    println!(
        "  {:<44} {:>14} {:>11.0} ns",
        "by_index node (100 pods), 4 readers + 1 writer", "", by_index_busy
    );
}

fn main() {
    let pods = pods(PODS);
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c, &pods);
    c.final_summary();
    summary(&pods);
}
