//! Benchmarks of the simulated server: list page rendering and watch event fan-out, measured
//! end to end over HTTP on 127.0.0.1 (the client only counts bytes, it decodes nothing).
//!
//! `KINFORMER_SIM_BENCH_PODS` sets how many pods are seeded (default 10 000).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kinformer_core::{ApiResource, Scope};
use kinformer_sim::{SimConfig, SimServer};
use serde_json::json;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn client() -> reqwest::Client {
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    // Without Accept-Encoding: the bench measures serving bytes, not gzip.
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_gzip()
        .build()
        .unwrap()
}

async fn body_len(c: &reqwest::Client, url: &str) -> u64 {
    let mut r = c.get(url).send().await.unwrap();
    let mut n = 0;
    while let Some(chunk) = r.chunk().await.unwrap() {
        n += chunk.len() as u64;
    }
    n
}

fn list(c: &mut Criterion) {
    let pods: usize = std::env::var("KINFORMER_SIM_BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let rt = runtime();
    let sim = rt.block_on(SimServer::start(SimConfig::default())).unwrap();
    sim.store().seed_pods(pods, 1);
    let http = client();
    let mut g = c.benchmark_group("list");
    g.sample_size(10);
    for (name, query) in [
        ("full", String::new()),
        ("page_500", "?limit=500".to_owned()),
    ] {
        let url = format!("{}/api/v1/pods{query}", sim.url());
        let bytes = rt.block_on(body_len(&http, &url));
        g.throughput(Throughput::Bytes(bytes));
        g.bench_function(format!("{name}_of_{pods}_pods"), |b| {
            b.iter(|| rt.block_on(body_len(&http, &url)));
        });
    }
    g.finish();
}

fn fan_out(c: &mut Criterion) {
    const WATCHERS: usize = 100;
    const EVENTS: u64 = 50;
    let rt = runtime();
    let sim = rt.block_on(SimServer::start(SimConfig::default())).unwrap();
    let store = sim.store();
    store.seed_pods(EVENTS as usize, 1);
    let pods = ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced);
    let names: Vec<(String, String)> = store
        .list(&pods, None)
        .iter()
        .map(|p| {
            let m = &p["metadata"];
            (
                m["namespace"].as_str().unwrap().to_owned(),
                m["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let lines = Arc::new(AtomicU64::new(0));
    let http = client();
    let url = format!(
        "{}/api/v1/pods?watch=true&resourceVersion={}",
        sim.url(),
        store.resource_version()
    );
    for _ in 0..WATCHERS {
        let (http, url, lines) = (http.clone(), url.clone(), Arc::clone(&lines));
        rt.spawn(async move {
            let mut r = http.get(&url).send().await.unwrap();
            while let Ok(Some(chunk)) = r.chunk().await {
                let n = chunk.iter().filter(|b| **b == b'\n').count() as u64;
                lines.fetch_add(n, Ordering::Relaxed);
            }
        });
    }
    let mut g = c.benchmark_group("watch_fan_out");
    g.sample_size(10);
    g.throughput(Throughput::Elements(EVENTS * WATCHERS as u64));
    let mut round = 0u64;
    g.bench_function(format!("{EVENTS}_events_to_{WATCHERS}_watchers"), |b| {
        b.iter_custom(|iters| {
            let started = Instant::now();
            for _ in 0..iters {
                round += 1;
                let before = lines.load(Ordering::Relaxed);
                for (ns, name) in &names {
                    store
                        .patch(
                            &pods,
                            Some(ns),
                            name,
                            json!({"metadata": {"labels": {"round": round.to_string()}}}),
                        )
                        .unwrap();
                }
                let want = before + EVENTS * WATCHERS as u64;
                let deadline = Instant::now() + Duration::from_secs(30);
                while lines.load(Ordering::Relaxed) < want {
                    assert!(Instant::now() < deadline, "watchers fell behind");
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            started.elapsed()
        });
    });
    g.finish();
}

criterion_group!(benches, list, fan_out);
criterion_main!(benches);
