//! Convergence under faults: random create/update/delete workloads on the simulated server with
//! random faults between the writes (cut and closed watches, 410s, compaction, 429 and 500
//! bursts with Retry-After, stalls, a restart that drops every connection). Each case has a
//! fixed seed, so a failure replays exactly. Once the workload stops and the reflector catches
//! up, the store holds exactly the server's objects at their resourceVersions, and no key's
//! resourceVersion ever went backwards in what the store was told.

mod support;

use std::sync::Arc;
use std::time::Duration;

use kinformer_reflector::{Config, Reflector, StreamingList};
use kinformer_sim::RequestKind;
use serde_json::json;
use support::*;

const CASES: u64 = 6;
const WRITES: usize = 150;

async fn case(seed: u64) {
    let sim = sim().await;
    let mut rng = fastrand::Rng::with_seed(seed);
    sim.store().seed_pods(40, seed);
    let store = Arc::new(Recorder::default());
    let config = Config {
        page_size: 7,
        streaming_list: if seed.is_multiple_of(2) {
            StreamingList::Off
        } else {
            StreamingList::On
        },
        seed: Some(seed),
        ..config()
    };
    let (handle, run) = spawn(Reflector::new(pods_api(&sim), Arc::clone(&store), config));
    let pods = pods_resource();
    let mut faults = 0;
    for i in 0..WRITES {
        let names: Vec<String> = server_state(&sim).into_keys().collect();
        match rng.u8(0..10) {
            0..=3 => {
                create_pod(&sim, &format!("w{seed}-{i}"));
            }
            4..=7 if !names.is_empty() => {
                let key = &names[rng.usize(0..names.len())];
                let (ns, name) = key.split_once('/').unwrap();
                let _ = sim.store().patch(
                    &pods,
                    Some(ns),
                    name,
                    json!({"metadata": {"labels": {"step": i.to_string()}}}),
                );
            }
            _ if !names.is_empty() => {
                let key = &names[rng.usize(0..names.len())];
                let (ns, name) = key.split_once('/').unwrap();
                let _ = sim.store().delete(&pods, Some(ns), name);
            }
            _ => {}
        }
        if rng.u8(0..8) == 0 {
            faults += 1;
            let f = sim.faults();
            match rng.u8(0..9) {
                0 => f.close_all_watches_now(),
                1 => f.gone_next_watch(),
                2 => f.compact_now(),
                3 => f.fail_next(RequestKind::Watch, 429, rng.usize(1..3), Some(1)),
                4 => f.fail_next(RequestKind::Any, 500, rng.usize(1..3), None),
                5 => f.stall_watches(Duration::from_millis(rng.u64(50..300))),
                6 => f.drop_all_connections(),
                7 => f.cut_next_watch_mid_line(),
                _ => {
                    f.compact_now();
                    f.close_all_watches_now();
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.u64(0..4))).await;
    }
    let f = sim.faults();
    f.clear();
    let target = server_state(&sim);
    let version = sim.store().resource_version().to_string();
    // Catching up: the store equals the server, and the reflector is at the server's version
    // (a bookmark or a relist brings it there even when the last write was to no pod).
    for _ in 0..6000 {
        if store.state() == target {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        store.state(),
        target,
        "seed {seed}: the store did not converge ({faults} faults)"
    );
    for (key, seen) in store.history() {
        assert!(
            seen.windows(2).all(|w| w[0] <= w[1]),
            "seed {seed}: {key} went backwards: {seen:?}"
        );
        if let Some(rv) = target.get(&key) {
            assert_eq!(seen.last().unwrap().to_string(), *rv, "seed {seed}: {key}");
        }
    }
    assert!(!version.is_empty());
    handle.stop();
    run.await.unwrap().unwrap();
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_converges_to_the_server_through_random_faults() {
    for seed in 1..=CASES {
        case(seed).await;
    }
}
