//! The two costs of the typed path that kinformer controls, on dense pods (10-15 KB of JSON,
//! `managedFields` and all), each beside the way it was done before:
//!
//! - `typed_decode`: kinformer's `WatchEvent::from_json` (the object decoded in one pass with
//!   the tape parser, the line being as the API server writes it, `type` first) against
//!   `serde_json::from_slice` into the same `{type, object}` shape (every string checked on its
//!   own), which is also how kube-rs decodes each line; and the
//!   same events as protobuf watch events (`WatchEvent`, envelope, `Pod` message) decoded
//!   straight into the same `Pod`, as `kinformer-typed-pb` decodes them; and as many clones of
//!   decoded pods, which make the allocations, writes and frees of a decode without parsing, so
//!   that JSON's time over theirs is about the most any encoding can gain over JSON on these pods;
//!   and the JSON and protobuf decodes again with `metadata.managedFields` cut out of the bytes
//!   first (`*_without_managed_fields`), as a client set to skip them decodes;
//! - `replaced_pod_dies`: where the pod an update replaces is freed, timed on the decoding
//!   thread: there (as kube-runtime does), on a thread that only frees (as a handler thread
//!   holding the last reference did), or handed back to the decoding thread (as a shared
//!   informer now does, through the handler buffer's next push).
//!
//! `cargo bench -p kinformer-benches --bench typed_path`; docs/benchmarks.md has the figures,
//! docs/client.md the protobuf one.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kinformer_benches::pods::{PodSize, pod, update_patch};
use kinformer_core::WatchEvent;
use kinformer_core::trim::ManagedFieldsDecode;
use kinformer_protobuf::convert::Codec;
use serde::Deserialize;

const EVENTS: usize = 200;

/// The lines of `EVENTS` MODIFIED events of dense pods, each after one status update.
fn lines() -> Vec<Vec<u8>> {
    (0..EVENTS)
        .map(|i| {
            let mut p = pod(PodSize::Dense, i, 7);
            let patch = update_patch(&p, i as u64 + 1);
            json_patch(&mut p, &patch);
            // As the API server writes the line, `type` first (see `watch_event_line`).
            let line =
                kinformer_sim::watch_event_line("MODIFIED", &serde_json::to_vec(&p).unwrap());
            line[..line.len() - 1].to_vec()
        })
        .collect()
}

/// The events of `lines` as protobuf `WatchEvent` messages, as a protobuf watch frames them
/// (the frame's length prefix aside).
fn protobuf_events(codec: &Codec, lines: &[Vec<u8>]) -> Vec<bytes::Bytes> {
    use kinformer_protobuf::wire;
    lines
        .iter()
        .map(|l| {
            let event: serde_json::Value = serde_json::from_slice(l).unwrap();
            let mut message = Vec::new();
            codec.encode_json(&event["object"], &mut message).unwrap();
            let mut envelope = Vec::new();
            wire::encode_envelope("v1", "Pod", &message, &mut envelope);
            let mut out = Vec::new();
            wire::encode_watch_event(wire::EventType::Modified, &envelope, &mut out);
            bytes::Bytes::from(out)
        })
        .collect()
}

/// Merges `patch` into `target` as a JSON merge patch does.
fn json_patch(target: &mut serde_json::Value, patch: &serde_json::Value) {
    match (target, patch) {
        (serde_json::Value::Object(t), serde_json::Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    json_patch(t.entry(k.clone()).or_insert(serde_json::Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// The plain `serde_json` shape of a watch event.
#[derive(Deserialize)]
struct PlainEvent {
    #[serde(rename = "type")]
    _kind: String,
    #[serde(rename = "object")]
    _object: Pod,
}

fn bench(c: &mut Criterion) {
    let lines = lines();
    let bytes: usize = lines.iter().map(Vec::len).sum();
    let mut group = c.benchmark_group("typed_decode");
    group.throughput(Throughput::Elements(EVENTS as u64));
    group.bench_function("kinformer_from_json", |b| {
        b.iter(|| {
            for l in &lines {
                black_box(WatchEvent::<Pod>::from_json(l).unwrap());
            }
        })
    });
    group.bench_function("serde_json_from_slice", |b| {
        b.iter(|| {
            for l in &lines {
                black_box(serde_json::from_slice::<PlainEvent>(l).unwrap());
            }
        })
    });
    let codec = kinformer_protobuf::convert::codec::<Pod>().expect("Pod has a protobuf codec");
    let events = protobuf_events(codec, &lines);
    group.bench_function("kinformer_from_protobuf", |b| {
        b.iter(|| {
            for e in &events {
                let event = kinformer_protobuf::wire::decode_watch_event(e.clone()).unwrap();
                let envelope = kinformer_protobuf::wire::decode_envelope(event.object).unwrap();
                black_box(codec.decode::<Pod>(&envelope.raw).unwrap().unwrap());
            }
        })
    });
    // The same two decodes with the managed fields cut out of the bytes first, as a client
    // whose `Config::managed_fields` is `Skip` decodes them.
    assert!(
        lines
            .iter()
            .all(|l| ManagedFieldsDecode::Skip.event(l).len() < l.len()),
        "every line loses its managed fields"
    );
    group.bench_function("kinformer_from_json_without_managed_fields", |b| {
        b.iter(|| {
            for l in &lines {
                let line = ManagedFieldsDecode::Skip.event(l);
                black_box(WatchEvent::<Pod>::from_json(&line).unwrap());
            }
        })
    });
    group.bench_function("kinformer_from_protobuf_without_managed_fields", |b| {
        b.iter(|| {
            for e in &events {
                let event = kinformer_protobuf::wire::decode_watch_event(e.clone()).unwrap();
                let envelope = kinformer_protobuf::wire::decode_envelope(event.object).unwrap();
                let message =
                    kinformer_protobuf::trim::message(ManagedFieldsDecode::Skip, &envelope.raw);
                black_box(codec.decode::<Pod>(&message).unwrap().unwrap());
            }
        })
    });
    // A few pods, so that the clones read them from the cache, as a decoder reads its bytes.
    let sample: Vec<Pod> = lines
        .iter()
        .take(4)
        .map(|l| match WatchEvent::<Pod>::from_json(l).unwrap() {
            WatchEvent::Modified(pod) => Pod::clone(&pod),
            other => panic!("the lines are MODIFIED events, not {other:?}"),
        })
        .collect();
    group.bench_function("clone_of_a_decoded_pod", |b| {
        b.iter(|| {
            for i in 0..EVENTS {
                black_box(std::sync::Arc::new(sample[i % sample.len()].clone()));
            }
        })
    });
    group.finish();
    let trimmed: usize = lines
        .iter()
        .map(|l| ManagedFieldsDecode::Skip.event(l).len())
        .sum();
    println!(
        "{EVENTS} events, {} bytes a line on average ({} without managed fields), {} bytes a \
         protobuf event",
        bytes / EVENTS,
        trimmed / EVENTS,
        events.iter().map(|e| e.len()).sum::<usize>() / EVENTS
    );
}

/// Where the replaced pod dies: each event's pod replaces the last one of its key in a cache of
/// `EVENTS` keys, as an informer's update does, and the old one is dropped on the decoding thread,
/// or on a second thread that only drops, or handed back to the decoding thread in batches of 64
/// and dropped there.
fn where_replaced_dies(c: &mut Criterion) {
    use std::sync::Arc;
    use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
    let lines = lines();
    let decode = |l: &[u8]| match WatchEvent::<Pod>::from_json(l).unwrap() {
        WatchEvent::Modified(p) => p,
        _ => unreachable!(),
    };
    let mut group = c.benchmark_group("replaced_pod_dies");
    group.throughput(Throughput::Elements(EVENTS as u64));
    let mut cache: Vec<Arc<Pod>> = lines.iter().map(|l| decode(l)).collect();
    group.bench_function("on_the_decoding_thread", |b| {
        b.iter(|| {
            for (i, l) in lines.iter().enumerate() {
                let old = std::mem::replace(&mut cache[i], decode(l));
                black_box(&old);
            }
        })
    });
    // The second thread: it drops what it gets, or sends it back in batches of 64.
    let spawn = |back: Option<SyncSender<Vec<Arc<Pod>>>>| {
        let (tx, rx): (SyncSender<Arc<Pod>>, Receiver<Arc<Pod>>) = sync_channel(1024);
        let thread = std::thread::spawn(move || {
            let mut batch = Vec::with_capacity(64);
            while let Ok(p) = rx.recv() {
                match &back {
                    None => drop(p),
                    Some(back) => {
                        batch.push(p);
                        if batch.len() == 64 {
                            let _ =
                                back.send(std::mem::replace(&mut batch, Vec::with_capacity(64)));
                        }
                    }
                }
            }
        });
        (tx, thread)
    };
    let (tx, thread) = spawn(None);
    group.bench_function("on_a_thread_that_only_drops", |b| {
        b.iter(|| {
            for (i, l) in lines.iter().enumerate() {
                let old = std::mem::replace(&mut cache[i], decode(l));
                tx.send(old).unwrap();
            }
        })
    });
    drop(tx);
    thread.join().unwrap();
    let (back_tx, back_rx) = sync_channel(1024);
    let (tx, thread) = spawn(Some(back_tx));
    group.bench_function("handed_back_to_the_decoding_thread", |b| {
        b.iter(|| {
            for (i, l) in lines.iter().enumerate() {
                let old = std::mem::replace(&mut cache[i], decode(l));
                tx.send(old).unwrap();
                while let Ok(spent) = back_rx.try_recv() {
                    drop(spent);
                }
            }
        })
    });
    drop(tx);
    thread.join().unwrap();
    group.finish();
}

criterion_group!(benches, bench, where_replaced_dies);
criterion_main!(benches);
