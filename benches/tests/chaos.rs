//! The chaos soak, short: 8 s of the seeded workload and every fault class with seed 1, against
//! the factory's informers and handlers. It must find no invariant violation, and must have
//! fired every fault class and made the informers relist and rewatch, and restarted replicas
//! of the sharded group both ways, or it proved nothing.
//! It counts its heap as the `chaos` binary does, so the memory bounds weigh what is held.

use std::time::Duration;

use kinformer_benches::chaos::{self, ChaosConfig, FaultClass, HeapMeter};
use peak_alloc::PeakAlloc;

#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_soak_with_every_fault_class_finds_no_violation() {
    let config = ChaosConfig {
        pods: 80,
        writes_per_second: 80,
        fault_wait: (Duration::from_millis(40), Duration::from_millis(120)),
        quiesce_every: Duration::from_secs(4),
        settle_timeout: Duration::from_secs(60),
        heap: Some(HeapMeter {
            current: || HEAP.current_usage(),
            peak: || HEAP.peak_usage(),
        }),
        ..ChaosConfig::new(8, 1)
    };
    let report = chaos::run(&config).await.expect("the soak starts");
    let text = report.markdown("cargo test -p kinformer-benches --test chaos");
    assert!(report.passed(), "{text}");
    for class in FaultClass::ALL {
        assert!(
            report.faults[&class] >= 1,
            "{} never fired:\n{text}",
            class.name()
        );
    }
    assert!(report.relists >= 1 && report.watch_restarts >= 1, "{text}");
    // Each form was weighed on the server's pods: the typed pod, with its `managedFields`
    // decoded, costs the most; the compact one, JSON bytes and decoded metadata, the least.
    let (typed, compact, metadata) = report.weights.expect("weighed");
    assert!(
        typed > metadata && metadata > compact && compact > 0,
        "{text}"
    );
    assert!(report.peak_heap.is_some_and(|h| h > typed * 80), "{text}");
    assert_eq!(report.quiescent_checks, 2, "{text}");
    // Each quiescence checks the four caches against the server at their own versions.
    assert!(report.consistency_checks >= 8, "{text}");
    let panicking = report
        .handlers
        .iter()
        .find(|h| h.name == "pods/panicking")
        .expect("the panicking handler");
    assert!(panicking.panics >= 1, "{text}");
    let deletes: u64 = report
        .handlers
        .iter()
        .map(|h| h.heard.deletes + h.heard.tombstones)
        .sum();
    assert!(deletes >= 1, "{text}");
    // The sharded group: each phase begins with a restart, graceful and abrupt in turn, the
    // first two waiting until the others have taken the ranges over (after an abrupt death,
    // once the Lease has expired), and every one of them moves ranges between the replicas.
    let restarts = report.shards.restarts;
    assert!(restarts.graceful >= 1 && restarts.abrupt >= 1, "{text}");
    assert!(restarts.taken_over >= 2, "{text}");
    // After an abrupt death nothing is released: the others wait for the 2 s Lease to expire.
    assert!(
        restarts.slowest_abrupt_take_over >= Duration::from_secs(1),
        "{text}"
    );
    assert!(
        report.shards.hand_overs >= 3 + 2 * restarts.graceful + restarts.abrupt,
        "{text}"
    );
    assert_eq!(report.shards.overlaps, 0, "{text}");
}
