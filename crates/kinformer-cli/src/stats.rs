//! `kinformer stats <resource>`: an informer's live metrics, one line per interval.
//!
//! The pipeline records through the `metrics` facade (docs/metrics.md); the tool installs a
//! small recorder that keeps each counter and gauge in an atomic, so it can read them (beside
//! the Prometheus exporter, with `--metrics-addr`). Events by type are counted by a handler, so
//! that the initial list's objects count as adds; the handler's lag is its registration's
//! backlog.

use std::collections::HashMap;
use std::io::Write;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kinformer::prelude::*;
use kinformer::reflector::metric_names as reflector_names;
use kinformer::shared_informer::metric_names as informer_names;
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};

/// A recorder that keeps every counter and gauge in an atomic (a count, or a gauge's `f64`
/// bits), one per name and labels; reads sum over the labels other than `informer`.
/// Histograms are not kept.
#[derive(Debug, Default)]
pub(crate) struct AtomicRecorder {
    slots: parking_lot::Mutex<HashMap<Key, Arc<AtomicU64>>>,
}

fn of_informer(key: &Key, name: &str, informer: &str) -> bool {
    key.name() == name
        && key
            .labels()
            .any(|l| l.key() == "informer" && l.value() == informer)
}

impl AtomicRecorder {
    /// A counter of `informer`: the sum over its other labels (`type`, `outcome`, ...).
    pub(crate) fn counter(&self, name: &str, informer: &str) -> u64 {
        self.slots
            .lock()
            .iter()
            .filter(|(key, _)| of_informer(key, name, informer))
            .map(|(_, value)| value.load(Ordering::Relaxed))
            .sum()
    }

    /// A gauge of `informer`; `None` before it is set.
    pub(crate) fn gauge(&self, name: &str, informer: &str) -> Option<f64> {
        self.slots
            .lock()
            .iter()
            .find(|(key, _)| of_informer(key, name, informer))
            .map(|(_, value)| f64::from_bits(value.load(Ordering::Relaxed)))
            .filter(|v| !v.is_nan())
    }

    fn slot(&self, key: &Key, initial: u64) -> Arc<AtomicU64> {
        let mut slots = self.slots.lock();
        Arc::clone(
            slots
                .entry(key.clone())
                .or_insert_with(|| Arc::new(AtomicU64::new(initial))),
        )
    }
}

impl Recorder for AtomicRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.slot(key, 0))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        // NaN until set: a gauge never set reads as unknown, not as 0.
        Gauge::from_arc(self.slot(key, f64::NAN.to_bits()))
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
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
    /// Objects in the cache.
    pub(crate) cache: u64,
    /// The handler's backlog.
    pub(crate) lag: usize,
    /// Items in the informer's queue.
    pub(crate) queue: u64,
    /// The version the cache has reached, once known.
    pub(crate) rv: Option<u64>,
    /// Watch events.
    pub(crate) events: u64,
    pub(crate) lists: u64,
    pub(crate) relists: u64,
    pub(crate) watch_restarts: u64,
    pub(crate) errors: u64,
}

/// A report line: the rates over the last interval, then the totals and gauges, then the
/// informer's name.
pub(crate) fn line(
    elapsed: Duration,
    interval: Duration,
    before: &Sample,
    now: &Sample,
    informer: &str,
) -> String {
    let secs = interval.as_secs_f64().max(f64::EPSILON);
    let rate = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / secs;
    let rv = now.rv.map_or_else(|| "-".to_owned(), |rv| rv.to_string());
    format!(
        "elapsed={}s added/s={:.1} modified/s={:.1} deleted/s={:.1} cache={} lag={} queue={} \
         rv={rv} events={} lists={} relists={} watch_restarts={} errors={} tombstones={} \
         informer={informer}",
        elapsed.as_secs(),
        rate(before.added, now.added),
        rate(before.modified, now.modified),
        rate(before.deleted, now.deleted),
        now.cache,
        now.lag,
        now.queue,
        now.events,
        now.lists,
        now.relists,
        now.watch_restarts,
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
            .on_add(move |_: &Arc<crate::print::Cached>, _| {
                a.added.fetch_add(1, Ordering::Relaxed);
            })
            .on_update(move |_, _| {
                m.modified.fetch_add(1, Ordering::Relaxed);
            })
            .on_delete(move |o: &DeltaObject<crate::print::Cached>| {
                d.deleted.fetch_add(1, Ordering::Relaxed);
                if matches!(o, DeltaObject::DeletedFinalStateUnknown(_)) {
                    d.tombstones.fetch_add(1, Ordering::Relaxed);
                }
            }),
    )?;
    informer.start();
    let start = Instant::now();
    let name = informer.name().to_owned();
    let sample = || {
        let counter = |n: &str| recorder.map_or(0, |r| r.counter(n, &name));
        let gauge = |n: &str| recorder.and_then(|r| r.gauge(n, &name));
        Sample {
            added: seen.added.load(Ordering::Relaxed),
            modified: seen.modified.load(Ordering::Relaxed),
            deleted: seen.deleted.load(Ordering::Relaxed),
            tombstones: seen.tombstones.load(Ordering::Relaxed),
            // The gauge is set at the first pop; without a recorder, the cache is counted.
            cache: gauge(informer_names::CACHE_OBJECTS)
                .map_or_else(|| informer.cache().list_keys().len() as u64, |v| v as u64),
            lag: registration.backlog(),
            queue: gauge(informer_names::QUEUE_DEPTH).map_or(0, |v| v as u64),
            rv: gauge(informer_names::CACHE_RESOURCE_VERSION).map(|v| v as u64),
            events: counter(reflector_names::EVENTS),
            lists: counter(reflector_names::LISTS),
            relists: counter(reflector_names::RELISTS),
            watch_restarts: counter(reflector_names::WATCH_RESTARTS),
            errors: counter(reflector_names::ERRORS),
        }
    };
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    let mut interrupt = pin!(interrupt);
    let mut before = Sample::default();
    let mut printed = 0u64;
    let mut retried = crate::informer::Retried::default();
    let result = loop {
        tokio::select! {
            biased;
            signal = &mut interrupt => break Err(crate::Error::Interrupted(signal)),
            Some(f) = failures.recv() => {
                if f.fatal {
                    break Err(f.into_error());
                }
                retried.note(&f, format_args!("retrying"));
            }
            _ = ticker.tick() => {
                let now = sample();
                // The informer's name comes from the resource's, which discovery may give.
                let text = line(start.elapsed(), interval, &before, &now, &crate::terminal::safe(&name));
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
    fn a_report_shows_rates_totals_and_gauges() {
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
            queue: 4,
            rv: Some(4711),
            events: 30,
            lists: 2,
            relists: 1,
            watch_restarts: 2,
            errors: 1,
        };
        assert_eq!(
            line(
                Duration::from_secs(6),
                Duration::from_secs(2),
                &before,
                &now,
                "pods"
            ),
            "elapsed=6s added/s=2.0 modified/s=10.0 deleted/s=1.0 cache=12 lag=3 queue=4 \
             rv=4711 events=30 lists=2 relists=1 watch_restarts=2 errors=1 tombstones=1 \
             informer=pods"
        );
        let unknown = line(
            Duration::ZERO,
            Duration::from_secs(1),
            &before,
            &before,
            "x",
        );
        assert!(unknown.contains(" rv=- "), "{unknown}");
    }

    #[test]
    fn the_recorder_keeps_counters_and_gauges_per_informer() {
        let r = AtomicRecorder::default();
        let key = |name: &'static str, labels: &[(&'static str, &'static str)]| {
            Key::from_parts(
                name,
                labels
                    .iter()
                    .map(|(k, v)| metrics::Label::new(*k, *v))
                    .collect::<Vec<_>>(),
            )
        };
        let meta = Metadata::new("t", metrics::Level::INFO, None);
        let events = reflector_names::EVENTS;
        r.register_counter(
            &key(events, &[("informer", "pods"), ("type", "added")]),
            &meta,
        )
        .increment(3);
        r.register_counter(
            &key(events, &[("informer", "pods"), ("type", "deleted")]),
            &meta,
        )
        .increment(1);
        // The same key again: the same counter.
        r.register_counter(
            &key(events, &[("informer", "pods"), ("type", "added")]),
            &meta,
        )
        .increment(1);
        r.register_counter(
            &key(events, &[("informer", "nodes"), ("type", "added")]),
            &meta,
        )
        .increment(7);
        assert_eq!(r.counter(events, "pods"), 5);
        assert_eq!(r.counter(events, "nodes"), 7);
        assert_eq!(r.counter("nothing", "pods"), 0);

        let depth = informer_names::QUEUE_DEPTH;
        let g = r.register_gauge(&key(depth, &[("informer", "pods")]), &meta);
        assert_eq!(r.gauge(depth, "pods"), None, "not set yet");
        g.set(42.0);
        assert_eq!(r.gauge(depth, "pods"), Some(42.0));
        assert_eq!(r.gauge(depth, "nodes"), None);
    }
}
