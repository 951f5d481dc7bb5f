//! The machinery of `cargo xtask bench`, end to end on tiny scenarios, so that it cannot rot:
//! the simulated server in its own process, a kinformer client and the kube-runtime client each in
//! theirs, measured through `/proc`. It asserts that every run happened and produced a
//! well-formed row; it asserts no timing. Both server shapes run: the burst shape (every event
//! queued before the watch connects, written in 128 KiB writes) and the paced one.

// The very code `cargo xtask bench` runs (it depends on std and serde_json only).
#[allow(dead_code, unreachable_pub)]
#[path = "../../xtask/src/bench/run.rs"]
mod run;

use std::path::Path;
use std::time::Duration;

use run::{Kind, PodSize, Row, Shape, Sim, Size};

const TIMEOUT: Duration = Duration::from_secs(60);

fn scenario(name: &str) -> run::Scenario {
    run::scenarios(Size::Tiny)
        .into_iter()
        .find(|s| s.name == name)
        .expect("a scenario of that name")
}

fn well_formed(row: &Row, scenario: &run::Scenario, shape: Shape, client: &str) {
    assert!(row.ok, "{row:?}");
    assert_eq!(
        (
            row.scenario.as_str(),
            row.shape.as_str(),
            row.client.as_str()
        ),
        (scenario.name, shape.as_str(), client)
    );
    assert!(row.sync_ms.is_finite() && row.sync_ms > 0.0, "{row:?}");
    assert!(
        row.peak_rss_mb.is_finite() && row.peak_rss_mb > 1.0,
        "{row:?}"
    );
    assert!(row.cpu_s.is_finite() && row.cpu_s >= 0.0, "{row:?}");
    match scenario.kind {
        Kind::Update | Kind::Churn => {
            assert!(row.events_per_s.is_some_and(|r| r > 0.0), "{row:?}");
            assert!(
                row.cpu_per_k_events
                    .is_some_and(|c| c.is_finite() && c >= 0.0),
                "{row:?}"
            );
        }
        _ => {
            assert_eq!(row.events_per_s, None, "{row:?}");
            assert_eq!(row.cpu_per_k_events, None, "{row:?}");
        }
    }
    let json = row.to_json();
    for key in [
        "scenario",
        "client",
        "shape",
        "sync_ms",
        "events_per_s",
        "cpu_per_k_events",
        "peak_rss_mb",
        "cpu_s",
        "ok",
    ] {
        assert!(json.get(key).is_some(), "{key} missing from {json}");
    }
}

fn start(sc: &run::Scenario, shape: Shape) -> Sim {
    Sim::start(
        Path::new(env!("CARGO_BIN_EXE_bench-sim")),
        sc.pods,
        shape,
        PodSize::Dense,
        TIMEOUT,
    )
    .expect("the simulated server starts")
}

fn run_all(name: &str, shape: Shape, check: impl Fn(&Row)) {
    let sc = scenario(name);
    let mut sim = start(&sc, shape);
    for client in ["kinformer-typed", run::BASELINE] {
        let row = run::run_client(
            Path::new(env!("CARGO_BIN_EXE_bench-client")),
            &mut sim,
            &sc,
            client,
            TIMEOUT,
        );
        well_formed(&row, &sc, shape, client);
        check(&row);
    }
}

#[test]
fn a_burst_of_updates_reaches_both_clients_exactly_once() {
    run_all("upd-10k", Shape::Burst, |_| {});
}

#[test]
fn paced_updates_reach_both_clients_exactly_once() {
    run_all("upd-10k", Shape::Paced, |_| {});
}

#[test]
fn a_burst_of_deletes_and_adds_reaches_both_clients_exactly_once() {
    run_all("churn-10k", Shape::Burst, |_| {});
}

#[test]
fn a_streaming_list_in_one_burst_syncs_both_clients() {
    run_all("stream-100k", Shape::Burst, |_| {});
}

#[test]
fn a_forced_relist_is_seen_and_measured_by_both_clients() {
    run_all("relist", Shape::Burst, |row| {
        let ratio = row.extra.get("relist_ratio").copied().unwrap_or(f64::NAN);
        assert!(ratio.is_finite() && ratio > 0.0, "{row:?}");
    });
}

#[test]
fn an_unknown_client_is_a_failed_row_not_a_hang() {
    let sc = scenario("sync-100k");
    let mut sim = start(&sc, Shape::Burst);
    let row = run::run_client(
        Path::new(env!("CARGO_BIN_EXE_bench-client")),
        &mut sim,
        &sc,
        "no-such-client",
        TIMEOUT,
    );
    assert!(!row.ok);
    assert!(row.note.contains("no-such-client"), "{row:?}");
}
