//! Lister benchmarks at 100k pods (k8s-openapi `Pod`s with realistic metadata, built in memory
//! by `kinformer_test_support::typed_pods`: 100 namespaces of 1000, a quarter of each in tier `web`): a
//! namespace list with and without the namespace index, with and without a label selector, and a
//! cluster-wide selector list.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{ApiResource, CacheWrite, LabelSelector};
use kinformer_indexer::{Indexer, index};
use kinformer_lister::Lister;

const PODS: usize = 100_000;

fn main() {
    let pods = kinformer_test_support::typed_pods(PODS);
    let name_42 = kinformer_test_support::typed_pod_name(42);
    let indexed =
        Indexer::with_indexers([(index::NAMESPACE.to_string(), index::namespace())]).unwrap();
    let replaced = indexed.replace_all(pods.clone());
    assert!(replaced.outcomes.iter().all(Result::is_ok));
    let plain = Indexer::new();
    let replaced = plain.replace_all(pods);
    assert!(replaced.outcomes.iter().all(Result::is_ok));
    let resource = ApiResource::of::<Pod>();
    let with_index = Lister::for_resource(indexed.reader(), &resource);
    let without_index = Lister::for_resource(plain.reader(), &resource);
    let everything = LabelSelector::everything();
    let web: LabelSelector = "tier=web".parse().unwrap();

    let mut c = Criterion::default().configure_from_args();
    {
        let mut g = c.benchmark_group("lister");
        g.sample_size(20)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));
        g.bench_function("namespace list (1000 of 100k), indexed", |b| {
            b.iter(|| black_box(with_index.namespaced("team-042").list(&everything)))
        });
        g.bench_function("namespace list tier=web (250 of 100k), indexed", |b| {
            b.iter(|| black_box(with_index.namespaced("team-042").list(&web)))
        });
        g.bench_function("namespace list (1000 of 100k), scan", |b| {
            b.iter(|| black_box(without_index.namespaced("team-042").list(&everything)))
        });
        g.bench_function("cluster list tier=web (25k of 100k)", |b| {
            b.iter(|| black_box(with_index.list(&web)))
        });
        g.bench_function("get", |b| {
            b.iter(|| black_box(with_index.namespaced("team-042").get(&name_42)))
        });
        g.finish();
    }
    c.final_summary();

    let time = |f: &dyn Fn() -> usize| {
        (0..20)
            .map(|_| {
                let s = Instant::now();
                black_box(f());
                s.elapsed()
            })
            .min()
            .unwrap()
    };
    let ns_indexed = time(&|| with_index.namespaced("team-042").list(&everything).len());
    let ns_scan = time(&|| without_index.namespaced("team-042").list(&everything).len());
    println!();
    println!("lister at {PODS} pods, namespace of 1000:");
    println!(
        "  namespace list, indexed: {:>10.1} µs",
        ns_indexed.as_secs_f64() * 1e6
    );
    println!(
        "  namespace list, scan:    {:>10.1} µs",
        ns_scan.as_secs_f64() * 1e6
    );
    println!(
        "  the index makes it {:.0}x cheaper (cost follows the namespace, not the cache)",
        ns_scan.as_secs_f64() / ns_indexed.as_secs_f64()
    );
}
