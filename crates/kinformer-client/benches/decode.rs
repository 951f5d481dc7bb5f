//! Watch-stream decode throughput: our chunked decoder against plain `serde_json::from_slice` on
//! the same lines, for typed pods and dynamic objects (~4.5 KB pod events).
//!
//! Run with `cargo bench -p kinformer-client --bench decode`. Besides criterion's figures it prints
//! a summary with events/s, MB/s and the decoder's overhead over `serde_json::from_slice`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group};
use k8s_openapi::api::core::v1::Pod;
use kinformer_client::WatchDecoder;
use kinformer_core::DynamicObject;
use serde::Deserialize;
use serde::de::DeserializeOwned;

const EVENTS: usize = 2000;
/// Chunk sizes seen on real watch connections vary; cycle through a few of them.
const CHUNK_SIZES: [usize; 4] = [16 * 1024, 4096, 1500, 9000];

/// A watch stream of pod events: the full body and the lines without newlines.
struct Workload {
    body: Vec<u8>,
    chunks: Vec<Bytes>,
    lines: Vec<(usize, usize)>,
}

fn workload() -> Workload {
    let mut body = Vec::new();
    let mut lines = Vec::new();
    for i in 0..EVENTS {
        let kind = ["ADDED", "MODIFIED", "MODIFIED", "DELETED"][i % 4];
        let event = serde_json::json!({"type": kind, "object": kinformer_sim::generate_pod(i, 42)});
        let start = body.len();
        serde_json::to_writer(&mut body, &event).unwrap();
        lines.push((start, body.len()));
        body.push(b'\n');
    }
    let shared = Bytes::from(body.clone());
    let mut chunks = Vec::new();
    let mut pos = 0;
    let mut n = 0;
    while pos < shared.len() {
        let end = (pos + CHUNK_SIZES[n % CHUNK_SIZES.len()]).min(shared.len());
        chunks.push(shared.slice(pos..end));
        pos = end;
        n += 1;
    }
    Workload {
        body,
        chunks,
        lines,
    }
}

/// The plain `serde_json` shape of a watch event.
#[derive(Deserialize)]
struct PlainEvent<K> {
    #[serde(rename = "type")]
    _kind: String,
    #[serde(rename = "object")]
    _object: K,
}

fn ours<K: kinformer_core::Object + DeserializeOwned>(w: &Workload) -> usize {
    let mut decoder = WatchDecoder::new(kinformer_client::DEFAULT_MAX_WATCH_LINE);
    let mut n = 0;
    for chunk in &w.chunks {
        decoder.push(chunk.clone());
        while let Some(event) = decoder.next_event::<K>() {
            black_box(event.unwrap());
            n += 1;
        }
    }
    assert!(decoder.finish::<K>().is_none());
    n
}

fn plain<K: DeserializeOwned>(w: &Workload) -> usize {
    for &(start, end) in &w.lines {
        black_box(serde_json::from_slice::<PlainEvent<K>>(&w.body[start..end]).unwrap());
    }
    w.lines.len()
}

fn bench(c: &mut Criterion) {
    let w = workload();
    let mut group = c.benchmark_group("watch_decode");
    group.throughput(Throughput::Bytes(w.body.len() as u64));
    group.bench_function("typed/kinformer", |b| b.iter(|| ours::<Pod>(&w)));
    group.bench_function("typed/serde_json_from_slice", |b| {
        b.iter(|| plain::<Pod>(&w))
    });
    group.bench_function("dynamic/kinformer", |b| {
        b.iter(|| ours::<DynamicObject>(&w))
    });
    group.bench_function("dynamic/serde_json_from_slice", |b| {
        b.iter(|| plain::<DynamicObject>(&w))
    });
    group.finish();
}

/// Times `a` and `b` over the workload, alternating them for about two seconds so that both see
/// the same machine load, and returns the best seconds per pass of each.
fn time_pair(w: &Workload, a: fn(&Workload) -> usize, b: fn(&Workload) -> usize) -> (f64, f64) {
    let (mut best_a, mut best_b) = (f64::MAX, f64::MAX);
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut rounds = 0;
    while rounds < 3 || (Instant::now() < deadline && rounds < 1000) {
        let start = Instant::now();
        assert_eq!(a(w), EVENTS);
        best_a = best_a.min(start.elapsed().as_secs_f64());
        let start = Instant::now();
        assert_eq!(b(w), EVENTS);
        best_b = best_b.min(start.elapsed().as_secs_f64());
        rounds += 1;
    }
    (best_a, best_b)
}

fn summary() {
    let w = workload();
    let mb = w.body.len() as f64 / 1e6;
    println!(
        "\nwatch decode summary: {EVENTS} events, {:.0} bytes per line on average, {} chunks",
        w.body.len() as f64 / EVENTS as f64,
        w.chunks.len()
    );
    type Pass = fn(&Workload) -> usize;
    let cases: [(&str, Pass, Pass); 2] = [
        ("typed Pod", ours::<Pod>, plain::<Pod>),
        (
            "DynamicObject",
            ours::<DynamicObject>,
            plain::<DynamicObject>,
        ),
    ];
    for (name, ours_fn, plain_fn) in cases {
        let (t_ours, t_plain) = time_pair(&w, ours_fn, plain_fn);
        for (who, t) in [
            ("kinformer decoder", t_ours),
            ("serde_json::from_slice", t_plain),
        ] {
            println!(
                "  {name:<14} {who:<24} {:>10.0} events/s {:>8.1} MB/s",
                EVENTS as f64 / t,
                mb / t
            );
        }
        println!(
            "  {name:<14} decoder overhead over from_slice: {:+.1}%",
            (t_ours / t_plain - 1.0) * 100.0
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
