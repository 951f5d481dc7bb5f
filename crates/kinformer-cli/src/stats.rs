//! `kinformer stats <resource>`: an informer's live counters, one line per interval.
//!
//! The reflector counts lists, relists, watches and failures through the `metrics` facade; the
//! tool installs a small recorder that keeps each counter in an atomic so it can read them.
//! Events by type are counted by a handler, the handler's lag is its registration's backlog, and
//! the cache size is the indexer's.

use std::collections::HashMap;
use std::io::Write;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kinformer::prelude::*;
use kinformer::reflector::metric_names as names;
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};

/// A recorder that keeps every counter in an atomic, summed over labels other than `type` and
/// `kind`. Gauges and histograms are not kept.
#[derive(Debug, Default)]
pub(crate) struct AtomicRecorder {
    counters: parking_lot::Mutex<HashMap<String, Arc<AtomicU64>>>,
}

impl AtomicRecorder {
    /// The counter's value: `name`, or `name{label}` for the `type` or `kind` label's value.
    pub(crate) fn get(&self, name: &str) -> u64 {
        self.counters
            .lock()
            .get(name)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    fn slot(&self, key: &Key) -> Arc<AtomicU64> {
        let mut name = key.name().to_owned();
        for label in key.labels() {
            if matches!(label.key(), "type" | "kind") {
                name = format!("{name}{{{}}}", label.value());
            }
        }
        Arc::clone(self.counters.lock().entry(name).or_default())
    }
}

impl Recorder for AtomicRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.slot(key))
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

/// Installs the recorder for the whole process; `None` if another one is installed.
pub(crate) fn install() -> Option<&'static AtomicRecorder> {
    let recorder: &'static AtomicRecorder = Box::leak(Box::default());
    metrics::set_global_recorder(recorder).ok()?;
    Some(recorder)
}

/// Events the handler saw, by type.
#[derive(Debug, Default)]
struct Seen {
    added: AtomicU64,
    modified: AtomicU64,
    deleted: AtomicU64,
    tombstones: AtomicU64,
}

/// One report's numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Sample {
    pub(crate) added: u64,
    pub(crate) modified: u64,
    pub(crate) deleted: u64,
    pub(crate) tombstones: u64,
    pub(crate) cache: usize,
    pub(crate) lag: usize,
    pub(crate) lists: u64,
    pub(crate) relists: u64,
    pub(crate) watches: u64,
    pub(crate) errors: u64,
}

/// A report line: the rates over the last interval, then the totals and gauges.
pub(crate) fn line(elapsed: Duration, interval: Duration, before: &Sample, now: &Sample) -> String {
    let secs = interval.as_secs_f64().max(f64::EPSILON);
    let rate = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / secs;
    format!(
        "elapsed={}s added/s={:.1} modified/s={:.1} deleted/s={:.1} cache={} lag={} lists={} \
         relists={} watch_restarts={} errors={} tombstones={}",
        elapsed.as_secs(),
        rate(before.added, now.added),
        rate(before.modified, now.modified),
        rate(before.deleted, now.deleted),
        now.cache,
        now.lag,
        now.lists,
        now.relists,
        now.watches.saturating_sub(1),
        now.errors,
        now.tombstones,
    )
}

/// Runs the informer of `run` and prints a report every `interval`, `count` times (forever
/// when `None`), until `interrupt`.
pub(crate) async fn stats(
    run: crate::informer::Run,
    recorder: Option<&'static AtomicRecorder>,
    interval: Duration,
    count: Option<u64>,
    out: &mut impl Write,
    interrupt: impl Future<Output = crate::Signal>,
) -> Result<(), crate::Error> {
    let (informer, mut failures, _) = crate::informer::build(run)?;
    let seen = Arc::new(Seen::default());
    let s = Arc::clone(&seen);
    let (a, m, d) = (Arc::clone(&s), Arc::clone(&s), s);
    let registration = informer.add_handler(
        HandlerFns::new()
            .on_add(move |_: &Arc<DynamicObject>, _| {
                a.added.fetch_add(1, Ordering::Relaxed);
            })
            .on_update(move |_, _| {
                m.modified.fetch_add(1, Ordering::Relaxed);
            })
            .on_delete(move |o: &DeltaObject<DynamicObject>| {
                d.deleted.fetch_add(1, Ordering::Relaxed);
                if matches!(o, DeltaObject::DeletedFinalStateUnknown(_)) {
                    d.tombstones.fetch_add(1, Ordering::Relaxed);
                }
            }),
    )?;
    informer.start();
    let start = Instant::now();
    let sample = || {
        let r = |n: &str| recorder.map_or(0, |r| r.get(n));
        Sample {
            added: seen.added.load(Ordering::Relaxed),
            modified: seen.modified.load(Ordering::Relaxed),
            deleted: seen.deleted.load(Ordering::Relaxed),
            tombstones: seen.tombstones.load(Ordering::Relaxed),
            cache: informer.cache().list_keys().len(),
            lag: registration.backlog(),
            lists: r(names::LISTS),
            relists: r(names::RELISTS),
            watches: r(names::WATCHES),
            errors: ["relist", "resume", "retry", "fatal"]
                .iter()
                .map(|k| r(&format!("{}{{{k}}}", names::ERRORS)))
                .sum(),
        }
    };
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    let mut interrupt = pin!(interrupt);
    let mut before = Sample::default();
    let mut printed = 0u64;
    let result = loop {
        tokio::select! {
            biased;
            signal = &mut interrupt => break Err(crate::Error::Interrupted(signal)),
            Some(f) = failures.recv() => {
                if f.fatal {
                    break Err(f.into_error());
                }
            }
            _ = ticker.tick() => {
                let now = sample();
                let text = line(start.elapsed(), interval, &before, &now);
                before = now;
                if let Err(e) = writeln!(out, "{text}").and_then(|()| out.flush()) {
                    break Err(e.into());
                }
                printed += 1;
                if count.is_some_and(|c| printed >= c) {
                    break Ok(());
                }
            }
        }
    };
    registration.remove();
    crate::informer::stop(&informer).await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_shows_rates_totals_and_restarts() {
        let before = Sample {
            added: 10,
            modified: 5,
            ..Sample::default()
        };
        let now = Sample {
            added: 14,
            modified: 25,
            deleted: 2,
            tombstones: 1,
            cache: 12,
            lag: 3,
            lists: 2,
            relists: 1,
            watches: 3,
            errors: 1,
        };
        assert_eq!(
            line(
                Duration::from_secs(6),
                Duration::from_secs(2),
                &before,
                &now
            ),
            "elapsed=6s added/s=2.0 modified/s=10.0 deleted/s=1.0 cache=12 lag=3 lists=2 \
             relists=1 watch_restarts=2 errors=1 tombstones=1"
        );
    }

    #[test]
    fn the_recorder_keeps_counters_by_type_and_kind() {
        let r = AtomicRecorder::default();
        let key = |labels: Vec<(&'static str, &'static str)>| {
            Key::from_parts(
                names::EVENTS,
                labels
                    .into_iter()
                    .map(|(k, v)| metrics::Label::new(k, v))
                    .collect::<Vec<_>>(),
            )
        };
        let meta = Metadata::new("t", metrics::Level::INFO, None);
        let c = r.register_counter(&key(vec![("reflector", "pods"), ("type", "added")]), &meta);
        c.increment(3);
        r.register_counter(&key(vec![("reflector", "pods")]), &meta)
            .increment(1);
        assert_eq!(r.get(&format!("{}{{added}}", names::EVENTS)), 3);
        assert_eq!(r.get(names::EVENTS), 1);
        assert_eq!(r.get("nothing"), 0);
    }
}
