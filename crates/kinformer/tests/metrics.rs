//! Every metric docs/metrics.md lists is recorded, with the type it gives, by an informer driven
//! over HTTP against the simulated server through lists, watches and failures; the names come
//! from the doc's table, so the doc and the code cannot drift apart.
//!
//! The recorder is global (the informer records from tokio tasks and handler threads, which a
//! thread-local recorder would not see), so this file holds one test.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kinformer::consistency::{ConsistencyCheck, OnMismatch};
use kinformer::core::{ApiResource, ResourceVersion, Scope};
use kinformer::prelude::*;
use kinformer::reflector::{BackoffConfig, InitialList, StreamingList};
use kinformer::workqueue::Gate as _;
use kinformer_sim::{RequestKind, SimConfig, SimServer};
use metrics_util::MetricKind;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use serde_json::json;

fn configmaps() -> ApiResource {
    ApiResource::new("", "v1", "ConfigMap", "configmaps", Scope::Namespaced)
}

fn put(sim: &SimServer, name: &str, value: &str) -> ResourceVersion {
    let store = sim.store();
    let object = json!({"metadata": {"name": name, "namespace": "default"}, "data": {"v": value}});
    let out = match store.get(&configmaps(), Some("default"), name) {
        Some(_) => store
            .patch(
                &configmaps(),
                Some("default"),
                name,
                json!({"data": {"v": value}}),
            )
            .unwrap(),
        None => store.create(&configmaps(), object).unwrap(),
    };
    out["metadata"]["resourceVersion"].as_str().unwrap().into()
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

/// The metrics docs/metrics.md's table lists: name, type and label keys, from each row whose
/// first cell is a metric name in backquotes (the label keys are the backquoted words of the
/// labels cell outside parentheses, which hold their values).
fn documented() -> Vec<(String, String, BTreeSet<String>)> {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/metrics.md"
    ))
    .expect("docs/metrics.md");
    let rows: Vec<(String, String, BTreeSet<String>)> = doc
        .lines()
        .filter_map(|line| {
            let mut cells = line.strip_prefix('|')?.split('|').map(str::trim);
            let name = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            let kind = cells.next()?;
            let _unit = cells.next()?;
            let labels = label_keys(cells.next()?);
            name.starts_with("kinformer_")
                .then(|| (name.to_owned(), kind.to_owned(), labels))
        })
        .collect();
    assert!(rows.len() >= 20, "the table of docs/metrics.md: {rows:?}");
    rows
}

/// The backquoted words of a labels cell outside parentheses: `` `informer`, `outcome`
/// (`success`, `error`) `` gives `informer` and `outcome`.
fn label_keys(cell: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut depth = 0;
    let mut word: Option<String> = None;
    for c in cell.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            '`' if depth == 0 => match word.take() {
                Some(w) => {
                    keys.insert(w);
                }
                None => word = Some(String::new()),
            },
            c => {
                if let Some(w) = &mut word {
                    w.push(c);
                }
            }
        }
    }
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_metric_is_recorded() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");

    let sim = SimServer::start(SimConfig {
        bookmark_interval: Duration::from_millis(50),
        ..SimConfig::default()
    })
    .await
    .unwrap();
    for name in ["a", "b", "c", "d", "e"] {
        put(&sim, name, "0");
    }
    // The first list's second page answers 410: the pager lists again from the start.
    sim.faults().gone_next_continue();

    let client = Client::new(kinformer::client::Config::new(sim.url())).unwrap();
    let bookmarked = Arc::new(AtomicBool::new(false));
    let seen = Arc::clone(&bookmarked);
    let informer = Informer::<ConfigMap>::builder()
        .name("cms")
        .list_watch(Api::all(client))
        .reflector(kinformer::reflector::Config {
            resource: "configmaps".into(),
            // Pages of two, read consistently (a list at "0" comes from the watch cache unpaged).
            page_size: 2,
            initial_list: InitialList::Consistent,
            streaming_list: StreamingList::Off,
            short_watch: Duration::from_millis(1),
            backoff: BackoffConfig {
                initial: Duration::from_millis(10),
                max: Duration::from_millis(50),
                ..BackoffConfig::default()
            },
            ..kinformer::reflector::Config::default()
        })
        .handler(
            HandlerFns::new()
                .on_add(|o: &Arc<ConfigMap>, _| {
                    assert_ne!(o.metadata.name.as_deref(), Some("boom"), "a handler panic");
                })
                .on_bookmark(move |_| seen.store(true, Ordering::SeqCst)),
        )
        .consistency_check(ConsistencyCheck {
            period: None,
            on_mismatch: OnMismatch::Log,
        })
        .build()
        .unwrap();
    informer.start();
    informer
        .wait_synced_for(Duration::from_secs(20))
        .await
        .unwrap();
    let fresh = |rv: ResourceVersion| {
        let informer = &informer;
        async move {
            informer
                .wait_until_fresh(&rv, Duration::from_secs(20))
                .await
                .unwrap();
        }
    };

    // Events of each type, a bookmark, and a handler that panics.
    put(&sim, "a", "1");
    put(&sim, "boom", "0");
    sim.store()
        .delete(&configmaps(), Some("default"), "b")
        .unwrap();
    fresh(put(&sim, "f", "0")).await;
    eventually("a bookmark", || bookmarked.load(Ordering::SeqCst)).await;

    // A watch the server ends: the reflector watches again.
    sim.faults().close_all_watches_now();
    fresh(put(&sim, "g", "0")).await;

    // A watch answered with 410, then a relist that fails once: lists again until one succeeds.
    sim.faults().fail_next(RequestKind::List, 500, 1, None);
    sim.faults().gone_next_watch();
    sim.faults().close_all_watches_now();
    fresh(put(&sim, "h", "0")).await;

    // A key written past what the cache holds is held back by the read-your-writes gate.
    let freshness = informer.freshness();
    freshness.wrote("default/a", "999999999".into());
    let gate = FreshKeys::new(freshness);
    assert!(!gate.is_open(&"default/a".to_owned()));

    eventually("the consistency check", || {
        informer.consistency().is_some_and(|s| s.checks >= 1)
    })
    .await;
    informer.shutdown().await;

    let mut recorded: BTreeMap<String, (MetricKind, f64)> = BTreeMap::new();
    let mut labels: BTreeMap<String, BTreeSet<BTreeSet<String>>> = BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let (kind, key) = key.into_parts();
        let amount = match value {
            DebugValue::Counter(n) => n as f64,
            DebugValue::Gauge(g) => g.into_inner(),
            DebugValue::Histogram(samples) => samples.len() as f64,
        };
        let entry = recorded.entry(key.name().to_owned()).or_insert((kind, 0.0));
        entry.1 += amount;
        labels
            .entry(key.name().to_owned())
            .or_default()
            .insert(key.labels().map(|l| l.key().to_owned()).collect());
    }
    let mut missing = Vec::new();
    for (name, kind, keys) in documented() {
        // Every series of the metric carries exactly the documented labels.
        if let Some(seen) = labels.get(&name)
            && seen.iter().any(|s| *s != keys)
        {
            missing.push(format!(
                "{name}: recorded with labels {seen:?}, documented with {keys:?}"
            ));
        }
        let want = match kind.as_str() {
            "counter" => MetricKind::Counter,
            "gauge" => MetricKind::Gauge,
            "histogram" => MetricKind::Histogram,
            other => panic!("{name}: the type {other:?} in docs/metrics.md"),
        };
        match recorded.get(&name) {
            None => missing.push(format!("{name}: not recorded")),
            Some((got, _)) if *got != want => {
                missing.push(format!(
                    "{name}: recorded as a {got:?}, documented as a {kind}"
                ));
            }
            // A counter or a histogram was registered by every informer; it must have counted.
            Some((got, amount)) if *got != MetricKind::Gauge && *amount == 0.0 => {
                missing.push(format!("{name}: registered but never counted"));
            }
            Some(_) => {}
        }
    }
    let documented: Vec<String> = documented().into_iter().map(|(n, _, _)| n).collect();
    let undocumented: Vec<&String> = recorded
        .keys()
        .filter(|n| n.starts_with("kinformer_") && !documented.contains(n))
        .collect();
    assert!(
        missing.is_empty() && undocumented.is_empty(),
        "missing: {missing:#?}\nrecorded but not in docs/metrics.md: {undocumented:#?}"
    );
    // A few values, where the scenario fixes them: f, g, h and boom joined; b left.
    assert_eq!(recorded["kinformer_informer_cache_objects"].1, 8.0);
    assert!(recorded["kinformer_informer_cache_resource_version"].1 > 0.0);
    assert!(recorded["kinformer_informer_time_to_first_sync_seconds"].1 > 0.0);
    sim.shutdown().await;
}
