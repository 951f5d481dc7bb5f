//! The machinery of `cargo xtask bench`, end to end on tiny scenarios, so that it cannot rot:
//! the simulated server in its own process, a kinformer client and the kube-runtime client each in
//! theirs, measured through `/proc`. It asserts that every run happened and produced a
//! well-formed row; it asserts no timing.

// The very code `cargo xtask bench` runs (it depends on std and serde_json only).
#[allow(dead_code, unreachable_pub)]
#[path = "../../xtask/src/bench/run.rs"]
mod run;

use std::path::Path;
use std::time::Duration;

use run::{Kind, Row, Sim, Size};

const TIMEOUT: Duration = Duration::from_secs(60);

fn scenario(name: &str) -> run::Scenario {
    run::scenarios(Size::Tiny)
        .into_iter()
        .find(|s| s.name == name)
        .expect("a scenario of that name")
}

fn well_formed(row: &Row, scenario: &run::Scenario, client: &str) {
    assert!(row.ok, "{row:?}");
    assert_eq!(
        (row.scenario.as_str(), row.client.as_str()),
        (scenario.name, client)
    );
    assert!(row.sync_ms.is_finite() && row.sync_ms > 0.0, "{row:?}");
    assert!(
        row.peak_rss_mb.is_finite() && row.peak_rss_mb > 1.0,
        "{row:?}"
    );
    assert!(row.cpu_s.is_finite() && row.cpu_s >= 0.0, "{row:?}");
    match scenario.kind {
        Kind::Update => assert!(row.events_per_s.is_some_and(|r| r > 0.0), "{row:?}"),
        _ => assert_eq!(row.events_per_s, None, "{row:?}"),
    }
    let json = row.to_json();
    for key in [
        "scenario",
        "client",
        "sync_ms",
        "events_per_s",
        "peak_rss_mb",
        "cpu_s",
        "ok",
    ] {
        assert!(json.get(key).is_some(), "{key} missing from {json}");
    }
}

fn run_all(name: &str, check: impl Fn(&Row)) {
    let sc = scenario(name);
    let mut sim = Sim::start(Path::new(env!("CARGO_BIN_EXE_bench-sim")), sc.pods, TIMEOUT)
        .expect("the simulated server starts");
    for client in ["kinformer-typed", run::BASELINE] {
        let row = run::run_client(
            Path::new(env!("CARGO_BIN_EXE_bench-client")),
            &mut sim,
            &sc,
            client,
            TIMEOUT,
        );
        well_formed(&row, &sc, client);
        check(&row);
    }
}

#[test]
fn updates_reach_both_clients_exactly_once() {
    run_all("upd-10k", |_| {});
}

#[test]
fn a_forced_relist_is_seen_and_measured_by_both_clients() {
    run_all("relist", |row| {
        let ratio = row.extra.get("relist_ratio").copied().unwrap_or(f64::NAN);
        assert!(ratio.is_finite() && ratio > 0.0, "{row:?}");
    });
}

#[test]
fn an_unknown_client_is_a_failed_row_not_a_hang() {
    let sc = scenario("sync-100k");
    let mut sim = Sim::start(Path::new(env!("CARGO_BIN_EXE_bench-sim")), sc.pods, TIMEOUT)
        .expect("the simulated server starts");
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
