//! Watch-stream decode throughput: our chunked decoder against plain `serde_json::from_slice` on
//! the same lines, for typed pods and dynamic objects (~4.5 KB pod events); and the same events
//! in protobuf (as the API server frames them) into the typed pod, with the list of the same pods
//! decoded from JSON and from protobuf.
//!
//! Run with `cargo bench -p kinformer-client --bench decode`. Besides criterion's figures it prints
//! a summary with events/s, MB/s, the decoder's overhead over `serde_json::from_slice`, and
//! protobuf's rate over JSON's beside its target (2.5x), clones of decoded pods (the same
//! allocations, writes and frees without parsing) with JSON's time over theirs, which is about
//! the most any encoding can gain over JSON, the list again with its pods dropped after the clock
//! stops, each kind's list made and dropped alone with the two timed apart, and the direct
//! protobuf decoder's rate over the reference path through k8s-pb's messages.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group};
use k8s_openapi::api::core::v1::Pod;
use kinformer_client::WatchDecoder;
use kinformer_core::{DynamicObject, ObjectList, Scope};
use kinformer_protobuf::convert::{self, Codec, Protobuf as _};
use kinformer_protobuf::wire;
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
    /// The same events as a protobuf watch body, cut into chunks of the same sizes.
    pb_body: Vec<u8>,
    pb_chunks: Vec<Bytes>,
    /// The same pods as one list, JSON and protobuf.
    list_json: Vec<u8>,
    list_pb: Bytes,
    /// A few of the pods, decoded, to clone (see [`clones_watch`]).
    sample: Vec<Pod>,
}

/// How many decoded pods are cloned in turn: few enough to stay in the cache, so that a
/// clone reads little more than a decoder reads.
const SAMPLE: usize = 16;

/// `body` cut into chunks of the cycled sizes.
fn cut(body: &[u8]) -> Vec<Bytes> {
    let shared = Bytes::copy_from_slice(body);
    let mut chunks = Vec::new();
    let mut pos = 0;
    let mut n = 0;
    while pos < shared.len() {
        let end = (pos + CHUNK_SIZES[n % CHUNK_SIZES.len()]).min(shared.len());
        chunks.push(shared.slice(pos..end));
        pos = end;
        n += 1;
    }
    chunks
}

fn pod_codec() -> &'static Codec {
    convert::codec::<Pod>().expect("Pod has a protobuf codec")
}

fn workload() -> Workload {
    let mut body = Vec::new();
    let mut lines = Vec::new();
    let mut pb_body = Vec::new();
    let mut items = Vec::new();
    let mut messages = Vec::new();
    for i in 0..EVENTS {
        let kind = ["ADDED", "MODIFIED", "MODIFIED", "DELETED"][i % 4];
        let pod = kinformer_sim::generate_pod(i, 42);
        // The line as the API server writes it, `type` first: a line built with `json!` has
        // its keys sorted, `object` first, and takes the decoder's slower path.
        let line = kinformer_sim::watch_event_line(kind, &serde_json::to_vec(&pod).unwrap());
        let start = body.len();
        body.extend_from_slice(&line);
        lines.push((start, body.len() - 1));
        // The same event as the API server's protobuf watch sends it.
        let typed: Pod = serde_json::from_value(pod.clone()).unwrap();
        let mut message = Vec::new();
        typed.encode(&mut message);
        let mut object = Vec::new();
        wire::encode_envelope("v1", "Pod", &message, &mut object);
        let event_type = match kind {
            "ADDED" => wire::EventType::Added,
            "MODIFIED" => wire::EventType::Modified,
            _ => wire::EventType::Deleted,
        };
        let mut event = Vec::new();
        wire::encode_watch_event(event_type, &object, &mut event);
        wire::encode_frame(&event, &mut pb_body);
        items.push(pod);
        messages.push(message);
    }
    // The list as the API server writes it: `metadata` before `items` (a `json!` map would sort
    // it after), and items without their `kind` and `apiVersion`, which the list's kind gives.
    let mut list_json =
        br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":["#
            .to_vec();
    for (i, pod) in items.iter().enumerate() {
        if i > 0 {
            list_json.push(b',');
        }
        let mut pod = pod.clone();
        if let Some(fields) = pod.as_object_mut() {
            fields.remove("kind");
            fields.remove("apiVersion");
        }
        serde_json::to_writer(&mut list_json, &pod).unwrap();
    }
    list_json.extend_from_slice(b"]}");
    let slices: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
    let mut list = Vec::new();
    let meta = wire::ListMeta {
        resource_version: Some("1".to_owned()),
        ..wire::ListMeta::default()
    };
    wire::encode_list(&meta, &slices, &mut list);
    let mut list_pb = Vec::new();
    wire::encode_envelope("v1", "PodList", &list, &mut list_pb);
    Workload {
        chunks: cut(&body),
        body,
        lines,
        pb_chunks: cut(&pb_body),
        pb_body,
        list_json,
        list_pb: Bytes::from(list_pb),
        sample: items
            .iter()
            .take(SAMPLE)
            .map(|pod| serde_json::from_value(pod.clone()).unwrap())
            .collect(),
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

/// The protobuf watch body through the client's decoder, into typed pods.
fn ours_protobuf(w: &Workload) -> usize {
    let mut decoder = WatchDecoder::protobuf(pod_codec(), kinformer_client::DEFAULT_MAX_WATCH_LINE);
    let mut n = 0;
    for chunk in &w.pb_chunks {
        decoder.push(chunk.clone());
        while let Some(event) = decoder.next_event::<Pod>() {
            black_box(event.unwrap());
            n += 1;
        }
    }
    assert!(decoder.finish::<Pod>().is_none());
    n
}

/// The JSON list, as each of the client's list-decoding runs decodes its items.
fn list_json(w: &Workload) -> usize {
    black_box(list_json_items(w)).len()
}

fn list_json_items(w: &Workload) -> Vec<Arc<Pod>> {
    ObjectList::<Pod>::from_json_scoped(&w.list_json, Scope::Namespaced)
        .unwrap()
        .items
}

/// The protobuf list, as each of the client's list-decoding runs decodes its items: every item
/// kept until the whole list is decoded, as the JSON list keeps them (dropping each at once
/// would hand the allocator a different pattern from the JSON side's, and from the client's).
fn list_protobuf(w: &Workload) -> usize {
    black_box(list_protobuf_items(w)).len()
}

fn list_protobuf_items(w: &Workload) -> Vec<Arc<Pod>> {
    let codec = pod_codec();
    protobuf_items(w, |item| codec.decode::<Pod>(item).unwrap().unwrap())
}

/// The protobuf list through the reference path (k8s-pb's prost messages, then the conversion
/// into k8s-openapi): what the direct decoder replaced, kept to show the difference.
fn list_protobuf_reference(w: &Workload) -> usize {
    black_box(protobuf_items(w, |item| Pod::decode_message(item).unwrap())).len()
}

/// The items of the protobuf list, each decoded by `decode`. As in the client, the envelope and
/// the list of raw items are freed before the items are returned, so that the objects are
/// dropped last, as on the JSON side. Freeing the 64 KB of raw items after the objects would
/// make glibc consolidate the small chunks those objects left in its fastbins inside this pass,
/// while the JSON pass leaves them to whichever pass comes next: alternated with JSON, the
/// protobuf pass paid for both.
fn protobuf_items<T>(w: &Workload, decode: impl Fn(&[u8]) -> T) -> Vec<T> {
    let envelope = wire::decode_envelope(w.list_pb.clone()).unwrap();
    let list = wire::decode_list(envelope.raw).unwrap();
    list.items.iter().map(|item| decode(item)).collect()
}

/// Clones of decoded pods, watch-shaped: as many pods as the watch carries, each cloned from a
/// decoded one and dropped at once, as a watch event's object is. A clone makes the allocations a
/// decoder into `Pod` makes, writes the same bytes into them and frees them, but parses nothing.
/// So JSON's time over this pass's is about the most any encoding can gain over JSON: not a strict
/// bound, since a decoder may allocate in an order the allocator serves faster, or read fewer
/// cache lines than a clone, which follows the pointers of the pod it copies.
fn clones_watch(w: &Workload) -> usize {
    for i in 0..EVENTS {
        black_box(Arc::new(w.sample[i % SAMPLE].clone()));
    }
    EVENTS
}

/// The same clones, list-shaped: every clone kept until the whole list is made, then all dropped.
fn clones_list(w: &Workload) -> usize {
    black_box(clones_list_items(w)).len()
}

fn clones_list_items(w: &Workload) -> Vec<Arc<Pod>> {
    (0..EVENTS)
        .map(|i| Arc::new(w.sample[i % SAMPLE].clone()))
        .collect()
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
    let mut group = c.benchmark_group("watch_decode_protobuf");
    group.throughput(Throughput::Bytes(w.pb_body.len() as u64));
    group.bench_function("typed/kinformer", |b| b.iter(|| ours_protobuf(&w)));
    group.finish();
    let mut group = c.benchmark_group("list_decode");
    group.throughput(Throughput::Elements(EVENTS as u64));
    group.bench_function("typed/json", |b| b.iter(|| list_json(&w)));
    group.bench_function("typed/protobuf", |b| b.iter(|| list_protobuf(&w)));
    group.bench_function("typed/protobuf_via_k8s_pb", |b| {
        b.iter(|| list_protobuf_reference(&w))
    });
    group.finish();
}

/// Times `a` and `b` over the workload, alternating them for about two seconds so that both see
/// the same machine load, and returns the best seconds per pass of each.
fn time_pair<T: Passed>(w: &Workload, a: fn(&Workload) -> T, b: fn(&Workload) -> T) -> (f64, f64) {
    let (mut best_a, mut best_b) = (f64::MAX, f64::MAX);
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut rounds = 0;
    while rounds < 3 || (Instant::now() < deadline && rounds < 1000) {
        for (pass, best) in [(a, &mut best_a), (b, &mut best_b)] {
            let start = Instant::now();
            let passed = black_box(pass(w));
            *best = best.min(start.elapsed().as_secs_f64());
            assert_eq!(passed.pods(), EVENTS);
        }
        rounds += 1;
    }
    (best_a, best_b)
}

/// What a timed pass returns. A pass that returns its pods has them dropped after the clock
/// stops, so that it times the decode alone, as the informer's first list decodes its pods and
/// keeps them; one that returns a count has dropped them inside the pass.
trait Passed {
    /// How many pods the pass went through.
    fn pods(&self) -> usize;
}

impl Passed for usize {
    fn pods(&self) -> usize {
        *self
    }
}

impl Passed for Vec<Arc<Pod>> {
    fn pods(&self) -> usize {
        self.len()
    }
}

/// How many lists [`alone`] makes and drops, after one it does not time.
const ALONE_CYCLES: usize = 7;

/// Makes the list with `pass` and drops it, over and over with nothing else between, and
/// returns the median seconds of the making and of the dropping. Under glibc's allocator a free
/// may leave work (merging small free chunks) to whichever allocation comes next, so in the
/// alternated loops of [`time_pair`] one kind's pass can pay for the other's drop; here each kind
/// pays only for its own, and the sum of the two medians is what a list of it costs.
fn alone(w: &Workload, pass: fn(&Workload) -> Vec<Arc<Pod>>) -> (f64, f64) {
    drop(black_box(pass(w)));
    let (mut decodes, mut drops) = (Vec::new(), Vec::new());
    for _ in 0..ALONE_CYCLES {
        let start = Instant::now();
        let items = black_box(pass(w));
        decodes.push(start.elapsed().as_secs_f64());
        assert_eq!(items.len(), EVENTS);
        let start = Instant::now();
        drop(items);
        drops.push(start.elapsed().as_secs_f64());
    }
    (median(&mut decodes), median(&mut drops))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Prints protobuf's rate beside JSON's, from their seconds per pass.
fn protobuf_line(label: &str, t_json: f64, t_pb: f64) {
    println!(
        "  {label} JSON {:>8.0} pods/s  protobuf {:>8.0} pods/s  protobuf/JSON {:.2}x (target 2.50x)",
        EVENTS as f64 / t_json,
        EVENTS as f64 / t_pb,
        t_json / t_pb
    );
}

/// Prints the clones' rate and JSON's time over theirs, from their seconds per pass.
fn clones_line(label: &str, t_json: f64, t_clones: f64) {
    println!(
        "  {label} clones of decoded pods (the same allocations, writes and frees, no parsing) {:>8.0} pods/s: JSON/clones {:.2}x",
        EVENTS as f64 / t_clones,
        t_json / t_clones
    );
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
    println!(
        "protobuf against JSON, into the typed Pod ({:.0} bytes per frame on average):",
        w.pb_body.len() as f64 / EVENTS as f64
    );
    let cases: [(&str, Pass, Pass, Pass); 2] = [
        ("watch", ours::<Pod>, ours_protobuf, clones_watch),
        ("list", list_json, list_protobuf, clones_list),
    ];
    for (name, json, protobuf, clones) in cases {
        let label = format!("{name:<6}");
        let (t_json, t_pb) = time_pair(&w, json, protobuf);
        protobuf_line(&label, t_json, t_pb);
        // The clones are timed against JSON in a loop of their own, so that the ratio above is
        // measured exactly as before.
        let (t_json, t_clones) = time_pair(&w, json, clones);
        clones_line(&label, t_json, t_clones);
    }
    let label = "list, the pods dropped after the clock stops:";
    let (t_json, t_pb) = time_pair(&w, list_json_items, list_protobuf_items);
    protobuf_line(label, t_json, t_pb);
    let (t_json, t_clones) = time_pair(&w, list_json_items, clones_list_items);
    clones_line(label, t_json, t_clones);
    println!(
        "  list, each kind alone for {ALONE_CYCLES} cycles, its decode and its drop timed apart (medians):"
    );
    type Keeps = fn(&Workload) -> Vec<Arc<Pod>>;
    let kinds: [(&str, Keeps); 3] = [
        ("JSON", list_json_items),
        ("protobuf", list_protobuf_items),
        ("clones", clones_list_items),
    ];
    let times = kinds.map(|(_, pass)| alone(&w, pass));
    let json = times[0].0 + times[0].1;
    for ((name, _), (decode, drop)) in kinds.into_iter().zip(times) {
        println!(
            "    {name:<8} decode {:6.1} ms  drop {:6.1} ms  both {:8.0} pods/s: JSON's time over its {:.2}x",
            decode * 1e3,
            drop * 1e3,
            EVENTS as f64 / (decode + drop),
            json / (decode + drop)
        );
    }
    let (t_direct, t_reference) = time_pair(&w, list_protobuf, list_protobuf_reference);
    println!(
        "  decoded straight into k8s-openapi {:>8.0} pods/s, through k8s-pb's messages {:>8.0} pods/s: {:.2}x",
        EVENTS as f64 / t_direct,
        EVENTS as f64 / t_reference,
        t_reference / t_direct
    );
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
    // Under a profiler (`--profile-time`) only the benchmarks chosen run, so that the profile
    // holds them alone.
    if !std::env::args().any(|arg| arg == "--profile-time") {
        summary();
    }
}
