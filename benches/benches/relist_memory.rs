//! Peak memory of a relist of an unchanged state, page by page, against the steady state: into
//! the indexer directly, and through each delta FIFO mode into the indexer as the consumer's
//! store. Every page is a fresh deep copy of the objects (what a decoder hands over), so a store
//! that kept both copies would show it. Aim: peak at most 1.2x steady state.
//!
//! `cargo bench -p kinformer-benches --bench relist_memory`. Memory is counted by the allocator
//! (bytes live on the heap), so the figures do not depend on the machine's other load.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{ReflectorStore, ReflectorStoreExt, ResourceVersion};
use kinformer_delta_fifo::{DeltaFifo, Mode};
use kinformer_indexer::{Indexer, index};
use peak_alloc::PeakAlloc;

#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

const PODS: usize = 100_000;
const PAGE: usize = 500;
const AIM: f64 = 1.2;

/// Relists `pods` page by page into `store`, each page a fresh deep copy.
fn relist(store: &dyn ReflectorStore<Pod>, pods: &[Arc<Pod>]) {
    store.begin_relist().unwrap();
    for page in pods.chunks(PAGE) {
        let fresh: Vec<Arc<Pod>> = page.iter().map(|p| Arc::new(Pod::clone(p))).collect();
        store.relist_page(fresh).unwrap();
    }
    store.end_relist(ResourceVersion::from("2000000")).unwrap();
}

fn indexer() -> Indexer<Pod> {
    Indexer::with_indexers([(index::NAMESPACE.to_string(), index::namespace())]).unwrap()
}

/// Relists `pods` as one list held whole before it is handed over, as a `replace(Vec)` API forces
/// a caller to: the baseline the page-by-page protocol is measured against.
fn relist_whole(store: &dyn ReflectorStore<Pod>, pods: &[Arc<Pod>]) {
    let fresh: Vec<Arc<Pod>> = pods.iter().map(|p| Arc::new(Pod::clone(p))).collect();
    store
        .replace(fresh, ResourceVersion::from("2000000"))
        .unwrap();
}

/// Steady state and peak, in bytes, of one relist.
fn measure(mode: Option<Mode>, whole: bool) -> (usize, usize) {
    let pods = kinformer_test_support::typed_pods(PODS);
    let cache = Arc::new(indexer());
    // The steady state: the cache holds every pod, and nothing else does.
    relist(&*cache, &pods);
    drop(pods);
    let fifo = mode.map(|mode| {
        DeltaFifo::builder()
            .mode(mode)
            .known_objects(cache.clone())
            .build()
            .unwrap()
    });
    // The objects as the cache holds them: the "server" lists the same versions again.
    let listed = {
        let mut all = kinformer_core::CacheRead::list(&*cache);
        all.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        all
    };
    let steady = HEAP.current_usage();
    HEAP.reset_peak_usage();
    match &fifo {
        None if whole => relist_whole(&*cache, &listed),
        None => relist(&*cache, &listed),
        Some(fifo) => {
            relist(fifo, &listed);
            while fifo.try_pop_into(&*cache).is_some() {}
        }
    }
    let peak = HEAP.peak_usage();
    drop(fifo);
    (steady, peak)
}

fn main() {
    // `cargo test --benches` runs bench targets with `--test`: keep that quick.
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    println!("relist of {PODS} unchanged pods in pages of {PAGE}; aim: peak <= {AIM}x steady");
    println!(
        "{:<28} {:>12} {:>12} {:>8}",
        "store", "steady MiB", "peak MiB", "ratio"
    );
    for (name, mode, whole) in [
        ("indexer, list held whole", None, true),
        ("indexer", None, false),
        ("in-order FIFO -> indexer", Some(Mode::InOrder), false),
        ("classic FIFO -> indexer", Some(Mode::Classic), false),
    ] {
        let (steady, peak) = measure(mode, whole);
        let ratio = peak as f64 / steady as f64;
        println!(
            "{name:<28} {:>12.1} {:>12.1} {:>7.2}x {}",
            steady as f64 / 1048576.0,
            peak as f64 / 1048576.0,
            ratio,
            if ratio <= AIM {
                "meets the aim"
            } else {
                "MISSES the aim"
            }
        );
    }
}
