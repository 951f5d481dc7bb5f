//! Fault injection: knobs a test turns to make the server misbehave the way real ones do.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::progress::WatchProgress;
use crate::store::Store;

/// Which requests a [`Faults::fail_next`] failure applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestKind {
    /// List requests (a `GET` of a collection without `watch`).
    List,
    /// Watch requests.
    Watch,
    /// Any API request after authentication (lists, watches, gets, writes, discovery).
    Any,
}

#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) kind: RequestKind,
    pub(crate) code: u16,
    pub(crate) remaining: usize,
    pub(crate) retry_after: Option<u32>,
}

#[derive(Debug)]
pub(crate) struct FaultState {
    /// `(generation, n)`: every watch ends after `n` more events; watches note the generation.
    pub(crate) close_after: Mutex<Option<(u64, usize)>>,
    close_after_gen: AtomicU64,
    /// Bumped to end every open watch cleanly.
    pub(crate) close_all: watch::Sender<u64>,
    /// Bumped to drop every connection abruptly.
    pub(crate) drop_all: watch::Sender<u64>,
    pub(crate) stall_until: Mutex<Option<Instant>>,
    pub(crate) failures: Mutex<Vec<Failure>>,
    pub(crate) gone_next_watch: AtomicBool,
    pub(crate) gone_next_continue: AtomicBool,
    pub(crate) malformed_next_line: AtomicBool,
    pub(crate) oversized_next_line: AtomicUsize,
    pub(crate) cut_next_line: AtomicBool,
    pub(crate) slow_chunks: Mutex<Option<Duration>>,
    /// Objects (`namespace`, `name`; `""` for cluster-scoped) whose events no watch sends.
    pub(crate) hidden: Mutex<Vec<(String, String)>>,
    /// Not a fault: how far each open watch stream has got. It lives here because the server
    /// handle and every watch stream already share this state.
    pub(crate) watches: WatchProgress,
}

impl FaultState {
    pub(crate) fn new() -> Self {
        Self {
            close_after: Mutex::new(None),
            close_after_gen: AtomicU64::new(0),
            close_all: watch::channel(0).0,
            drop_all: watch::channel(0).0,
            stall_until: Mutex::new(None),
            failures: Mutex::new(Vec::new()),
            gone_next_watch: AtomicBool::new(false),
            gone_next_continue: AtomicBool::new(false),
            malformed_next_line: AtomicBool::new(false),
            oversized_next_line: AtomicUsize::new(0),
            cut_next_line: AtomicBool::new(false),
            slow_chunks: Mutex::new(None),
            hidden: Mutex::new(Vec::new()),
            watches: WatchProgress::new(),
        }
    }

    /// The failure to answer a request of this kind with, if one is armed: `(code, retry_after)`.
    pub(crate) fn take_failure(&self, kind: RequestKind) -> Option<(u16, Option<u32>)> {
        let mut failures = self.failures.lock();
        let idx = failures
            .iter()
            .position(|f| f.remaining > 0 && (f.kind == RequestKind::Any || f.kind == kind))?;
        let f = &mut failures[idx];
        f.remaining -= 1;
        let out = (f.code, f.retry_after);
        if f.remaining == 0 {
            failures.remove(idx);
        }
        Some(out)
    }

    /// How long streams must stay silent from now, if stalled.
    pub(crate) fn stalled_until(&self) -> Option<Instant> {
        let until = (*self.stall_until.lock())?;
        (until > Instant::now()).then_some(until)
    }

    /// Whether watches keep this object's events to themselves.
    pub(crate) fn hidden_from_watches(&self, o: &crate::store::Stored) -> bool {
        let hidden = self.hidden.lock();
        !hidden.is_empty()
            && hidden
                .iter()
                .any(|(ns, name)| *ns == o.namespace && *name == o.name)
    }

    pub(crate) fn slow_chunks(&self) -> Option<Duration> {
        *self.slow_chunks.lock()
    }

    pub(crate) fn take(flag: &AtomicBool) -> bool {
        flag.swap(false, Ordering::AcqRel)
    }
}

/// Fault injection for one [`SimServer`](crate::SimServer). Cheap to clone; every knob applies to
/// requests and streams from the moment it is turned.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use kinformer_sim::{RequestKind, SimConfig, SimServer};
///
/// let sim = SimServer::start(SimConfig::default()).await.unwrap();
/// // The next two lists answer 429 with `Retry-After: 1`, the third succeeds.
/// sim.faults().fail_next(RequestKind::List, 429, 2, Some(1));
/// # }
/// ```
#[derive(Clone)]
pub struct Faults {
    pub(crate) state: Arc<FaultState>,
    pub(crate) store: Store,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl Faults {
    /// Every open and future watch ends cleanly (the chunked stream is terminated normally) after
    /// `n` more ADDED/MODIFIED/DELETED events. Each watch does this once; it stays armed for new
    /// watches until [`Faults::clear`].
    pub fn close_watches_after_events(&self, n: usize) {
        let generation = self.state.close_after_gen.fetch_add(1, Ordering::AcqRel) + 1;
        *self.state.close_after.lock() = Some((generation, n));
    }

    /// Ends every open watch cleanly now.
    pub fn close_all_watches_now(&self) {
        self.state.close_all.send_modify(|g| *g += 1);
    }

    /// Open watches send nothing (no events, no bookmarks) for this long from now; events are
    /// delivered afterwards.
    pub fn stall_watches(&self, duration: Duration) {
        *self.state.stall_until.lock() = Some(Instant::now() + duration);
    }

    /// Answers the next `count` requests of `kind` with `code` (429, 500, 503, ...), as the API
    /// server writes that code: a 429, which its request filters send before any handler runs,
    /// is plain text (`Too many requests, please try again later.`); any other code is a
    /// `Status` in the encoding the request negotiated (protobuf or JSON). With `retry_after`,
    /// a `Retry-After` header too, and for a `Status` its `details.retryAfterSeconds`.
    pub fn fail_next(&self, kind: RequestKind, code: u16, count: usize, retry_after: Option<u32>) {
        if count > 0 {
            self.state.failures.lock().push(Failure {
                kind,
                code,
                remaining: count,
                retry_after,
            });
        }
    }

    /// The next watch request gets an `ERROR` event carrying a 410 `Expired` status, then ends.
    pub fn gone_next_watch(&self) {
        self.state.gone_next_watch.store(true, Ordering::Release);
    }

    /// The next list request that carries a `continue` token answers 410 `Expired`, as when its
    /// version was compacted between two pages (the Status carries a token that goes on at the
    /// latest version, as the real server's does). Unlike [`Faults::compact_now`] it fires on the
    /// next page whenever that comes, and keeps the history.
    pub fn gone_next_continue(&self) {
        self.state.gone_next_continue.store(true, Ordering::Release);
    }

    /// Drops all history: any older resourceVersion (for watch, exact list or continue token) now
    /// answers 410.
    pub fn compact_now(&self) {
        self.store.compact_now();
    }

    /// The next event line sent on any watch (open or next) is preceded by one line of invalid JSON.
    pub fn malformed_next_watch_line(&self) {
        self.state
            .malformed_next_line
            .store(true, Ordering::Release);
    }

    /// The next event line sent on any watch is padded (with a valid JSON field) to `bytes` bytes,
    /// not counting its newline.
    pub fn oversized_next_watch_line(&self, bytes: usize) {
        self.state
            .oversized_next_line
            .store(bytes.max(1), Ordering::Release);
    }

    /// For the next event on any watch: sends the first half of its line, then drops the TCP
    /// connection.
    pub fn cut_next_watch_mid_line(&self) {
        self.state.cut_next_line.store(true, Ordering::Release);
    }

    /// Waits this long before every chunk of list bodies and watch streams (`None` to stop).
    pub fn slow_chunks(&self, delay: Option<Duration>) {
        *self.state.slow_chunks.lock() = delay;
    }

    /// No watch sends the events of the object `namespace/name` (`None` for a cluster-scoped
    /// one) from now until [`Faults::clear`], as a watch cache that lost them would; lists and
    /// gets still show it. A watcher's cache then differs from the server until it relists:
    /// what a consistency check is for.
    pub fn hide_from_watches(&self, namespace: Option<&str>, name: &str) {
        self.state
            .hidden
            .lock()
            .push((namespace.unwrap_or_default().to_owned(), name.to_owned()));
    }

    /// Drops every open connection at once, as an API server restart would. Storage is kept and
    /// new connections are accepted.
    pub fn drop_all_connections(&self) {
        self.state.drop_all.send_modify(|g| *g += 1);
    }

    /// Disarms every knob (history already compacted stays compacted).
    pub fn clear(&self) {
        let s = &self.state;
        *s.close_after.lock() = None;
        *s.stall_until.lock() = None;
        s.failures.lock().clear();
        s.gone_next_watch.store(false, Ordering::Release);
        s.gone_next_continue.store(false, Ordering::Release);
        s.malformed_next_line.store(false, Ordering::Release);
        s.oversized_next_line.store(0, Ordering::Release);
        s.cut_next_line.store(false, Ordering::Release);
        *s.slow_chunks.lock() = None;
        s.hidden.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_consumed_in_order_and_by_kind() {
        let s = FaultState::new();
        s.failures.lock().push(Failure {
            kind: RequestKind::Watch,
            code: 503,
            remaining: 1,
            retry_after: None,
        });
        s.failures.lock().push(Failure {
            kind: RequestKind::Any,
            code: 429,
            remaining: 2,
            retry_after: Some(3),
        });
        assert_eq!(s.take_failure(RequestKind::List), Some((429, Some(3))));
        assert_eq!(s.take_failure(RequestKind::Watch), Some((503, None)));
        assert_eq!(s.take_failure(RequestKind::Watch), Some((429, Some(3))));
        assert_eq!(s.take_failure(RequestKind::Watch), None);
    }
}
