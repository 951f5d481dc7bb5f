//! What each cache form of a realistic ~5 KB pod costs: heap bytes per object (counted by the
//! allocator) for the typed `Pod` (with and without its `managedFields`, also on the simulated
//! cluster's pods, whose `managedFields` are their real writers'), `Compact<Pod>`,
//! `Compressed<Pod>` and `CompactMessage<Pod>`, and the time to decode each from JSON (the last
//! from protobuf) and to get the typed pod back.
//!
//! `cargo bench -p kinformer-compact --bench forms`. The memory figures are printed first (the
//! allocator counts bytes live on the heap, so they do not depend on the machine's other load),
//! then the CPU time per object of the calling thread (from `/proc`, Linux only, so that other
//! load on the machine does not inflate it as it does criterion's wall-clock figures), then
//! criterion's measurements.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kinformer_compact::{Codec, CodecConfig, Compact, CompactMessage, Compressed};
use kinformer_protobuf::convert::Protobuf as _;
use peak_alloc::PeakAlloc;

#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

/// Objects held at once to measure the heap per object.
const HELD: usize = 5_000;
/// Pods the compressed form's dictionary is trained on before anything is measured.
const TRAIN: usize = 256;

/// The JSON of `n` realistic pods from the simulated server's generator, from index `from`.
fn pods(from: usize, n: usize) -> Vec<Vec<u8>> {
    (from..from + n)
        .map(|i| serde_json::to_vec(&kinformer_sim::generate_pod(i, 1)).unwrap())
        .collect()
}

/// The protobuf messages of the pods whose JSON is `jsons`.
fn messages(jsons: &[Vec<u8>]) -> Vec<Vec<u8>> {
    jsons
        .iter()
        .map(|j| {
            let mut out = Vec::new();
            serde_json::from_slice::<Pod>(j).unwrap().encode(&mut out);
            out
        })
        .collect()
}

/// Heap bytes per object held, each decoded from `jsons` by `decode` and kept in an `Arc` (as
/// the cache keeps it).
fn heap_per_object<T>(jsons: &[Vec<u8>], decode: impl Fn(&[u8]) -> T) -> f64 {
    let before = HEAP.current_usage();
    let held: Vec<Arc<T>> = jsons.iter().map(|j| Arc::new(decode(j))).collect();
    let after = HEAP.current_usage();
    let per = (after - before) as f64 / held.len() as f64;
    drop(black_box(held));
    per
}

fn train() {
    Codec::set::<Pod>(Codec::new(CodecConfig {
        train_after: TRAIN,
        ..CodecConfig::default()
    }));
    for json in pods(1_000_000, TRAIN) {
        black_box(Compressed::<Pod>::from_json(&json).unwrap());
    }
    assert!(
        Codec::of::<Pod>().dictionary().is_some(),
        "dictionary trained"
    );
}

fn memory() {
    train();
    let jsons = pods(0, HELD);
    let json = jsons.iter().map(Vec::len).sum::<usize>() as f64 / HELD as f64;
    let typed = heap_per_object(&jsons, |j| serde_json::from_slice::<Pod>(j).unwrap());
    let stripped = heap_per_object(&jsons, |j| {
        let mut pod = serde_json::from_slice::<Pod>(j).unwrap();
        pod.metadata.managed_fields = None;
        pod
    });
    let compact = heap_per_object(&jsons, |j| Compact::<Pod>::from_json(j).unwrap());
    let compressed = heap_per_object(&jsons, |j| Compressed::<Pod>::from_json(j).unwrap());
    let pbs = messages(&jsons);
    let pb = pbs.iter().map(Vec::len).sum::<usize>() as f64 / HELD as f64;
    let message = heap_per_object(&pbs, |m| CompactMessage::<Pod>::from_message(m).unwrap());
    let dictionary = Codec::of::<Pod>().dictionary().map_or(0, |d| d.size());
    println!("heap per object over {HELD} pods of {json:.0} B of JSON on average:");
    println!("  Pod             {:>8.0} B", typed);
    println!(
        "  Pod, stripped   {:>8.0} B  ({:.1}x less; `strip_managed_fields`)",
        stripped,
        typed / stripped
    );
    println!(
        "  Compact<Pod>    {:>8.0} B  ({:.1}x less)",
        compact,
        typed / compact
    );
    println!(
        "  Compressed<Pod> {:>8.0} B  ({:.1}x less; plus one {dictionary} B dictionary per type)",
        compressed,
        typed / compressed
    );
    println!(
        "  CompactMessage<Pod> {:>4.0} B  ({:.1}x less; from {pb:.0} B of protobuf on average)",
        message,
        typed / message
    );
    cluster_pods();
}

/// The same for the pods of the simulated cluster (`kinformer sim`), whose `managedFields` are
/// those their real writers leave (the controller manager, the scheduler, the kubelet), not the
/// two small entries of the pods above: where stripping them matters most.
fn cluster_pods() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let jsons: Vec<Vec<u8>> = rt.block_on(async {
        let sim = kinformer_sim::SimServer::start(kinformer_sim::SimConfig::default())
            .await
            .unwrap();
        sim.seed_cluster(&kinformer_sim::ClusterConfig {
            pods: 2000,
            seed: 1,
            rate_per_sec: 0.0,
        });
        let pods = kinformer_core::ApiResource::of::<Pod>();
        let jsons = sim
            .store()
            .list(&pods, None)
            .iter()
            .map(|p| serde_json::to_vec(p).unwrap())
            .collect();
        sim.shutdown().await;
        jsons
    });
    let json = jsons.iter().map(Vec::len).sum::<usize>() as f64 / jsons.len() as f64;
    let typed = heap_per_object(&jsons, |j| serde_json::from_slice::<Pod>(j).unwrap());
    let stripped = heap_per_object(&jsons, |j| {
        let mut pod = serde_json::from_slice::<Pod>(j).unwrap();
        pod.metadata.managed_fields = None;
        pod
    });
    println!(
        "heap per object over the simulated cluster's {} pods of {json:.0} B of JSON on average:",
        jsons.len()
    );
    println!("  Pod             {:>8.0} B", typed);
    println!(
        "  Pod, stripped   {:>8.0} B  ({:.1}x less; `strip_managed_fields`)",
        stripped,
        typed / stripped
    );
}

/// The calling thread's CPU time (user and system) in seconds, from `/proc/thread-self/stat`.
fn thread_cpu() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // The fields after the command name; utime and stime are the 14th and 15th of the line.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    // Linux reports these in USER_HZ, which is 100.
    Some((ticks(11)? + ticks(12)?) / 100.0)
}

/// CPU microseconds per call of `f`, over at least one CPU second (or 2 million calls).
fn cpu_per_call(mut f: impl FnMut(usize)) -> Option<f64> {
    let start = thread_cpu()?;
    let mut calls = 0;
    loop {
        for _ in 0..1000 {
            f(calls);
            calls += 1;
        }
        let spent = thread_cpu()? - start;
        if spent >= 1.0 || calls >= 2_000_000 {
            return Some(spent / calls as f64 * 1e6);
        }
    }
}

fn cpu(jsons: &[Vec<u8>], compact: &[Compact<Pod>], compressed: &[Compressed<Pod>]) {
    let n = jsons.len();
    let pbs = messages(jsons);
    let in_pb: Vec<CompactMessage<Pod>> = pbs
        .iter()
        .map(|m| CompactMessage::from_message(m).unwrap())
        .collect();
    let rows: [(&str, Option<f64>); 9] = [
        (
            "decode Pod",
            cpu_per_call(|i| {
                black_box(serde_json::from_slice::<Pod>(&jsons[i % n]).unwrap());
            }),
        ),
        (
            "decode Compact<Pod>",
            cpu_per_call(|i| {
                black_box(Compact::<Pod>::from_json(&jsons[i % n]).unwrap());
            }),
        ),
        (
            "decode Compressed<Pod>",
            cpu_per_call(|i| {
                black_box(Compressed::<Pod>::from_json(&jsons[i % n]).unwrap());
            }),
        ),
        (
            "Compact<Pod>::typed",
            cpu_per_call(|i| {
                black_box(compact[i % n].typed().unwrap());
            }),
        ),
        (
            "Compressed<Pod>::typed",
            cpu_per_call(|i| {
                black_box(compressed[i % n].typed().unwrap());
            }),
        ),
        (
            "Compressed<Pod>::json",
            cpu_per_call(|i| {
                black_box(compressed[i % n].json().unwrap());
            }),
        ),
        (
            "decode Pod (protobuf)",
            cpu_per_call(|i| {
                black_box(Pod::decode(&pbs[i % n]).unwrap());
            }),
        ),
        (
            "decode CompactMessage<Pod>",
            cpu_per_call(|i| {
                black_box(CompactMessage::<Pod>::from_message(&pbs[i % n]).unwrap());
            }),
        ),
        (
            "CompactMessage<Pod>::typed",
            cpu_per_call(|i| {
                black_box(in_pb[i % n].typed().unwrap());
            }),
        ),
    ];
    println!("CPU time per object (this thread, from /proc):");
    for (what, us) in rows {
        match us {
            Some(us) => println!("  {what:<27} {us:>7.1} µs"),
            None => println!("  {what:<27} (no /proc on this system)"),
        }
    }
}

fn decode(c: &mut Criterion) {
    memory();
    let jsons = pods(0, 64);
    {
        let compact: Vec<Compact<Pod>> = jsons
            .iter()
            .map(|j| Compact::from_json(j).unwrap())
            .collect();
        let compressed: Vec<Compressed<Pod>> = jsons
            .iter()
            .map(|j| Compressed::from_json(j).unwrap())
            .collect();
        cpu(&jsons, &compact, &compressed);
    }
    let mut g = c.benchmark_group("decode");
    let mut i = 0;
    let mut next = || {
        i = (i + 1) % jsons.len();
        &jsons[i][..]
    };
    g.bench_function("Pod", |b| {
        b.iter(|| serde_json::from_slice::<Pod>(next()).unwrap())
    });
    g.bench_function("Compact<Pod>", |b| {
        b.iter(|| Compact::<Pod>::from_json(next()).unwrap())
    });
    g.bench_function("Compressed<Pod>", |b| {
        b.iter(|| Compressed::<Pod>::from_json(next()).unwrap())
    });
    g.finish();

    let compact: Vec<Compact<Pod>> = jsons
        .iter()
        .map(|j| Compact::from_json(j).unwrap())
        .collect();
    let compressed: Vec<Compressed<Pod>> = jsons
        .iter()
        .map(|j| Compressed::from_json(j).unwrap())
        .collect();
    let mut g = c.benchmark_group("typed");
    let mut i = 0;
    g.bench_function("Compact<Pod>", |b| {
        b.iter(|| {
            i = (i + 1) % compact.len();
            compact[i].typed().unwrap()
        })
    });
    g.bench_function("Compressed<Pod>", |b| {
        b.iter(|| {
            i = (i + 1) % compressed.len();
            compressed[i].typed().unwrap()
        })
    });
    g.bench_function("Compressed<Pod> json only", |b| {
        b.iter(|| {
            i = (i + 1) % compressed.len();
            compressed[i].json().unwrap()
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = decode
}
criterion_main!(benches);
