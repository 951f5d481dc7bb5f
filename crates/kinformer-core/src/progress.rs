//! How far a list has got: what a reflector reports while it lists, and what an informer shows
//! while it waits for its first sync.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A list's progress at one moment.
///
/// ```
/// use std::time::Duration;
/// use kinformer_core::ListProgress;
///
/// let p = ListProgress {
///     listing: true,
///     lists: 1,
///     objects: 2_000,
///     remaining: Some(6_000),
///     elapsed: Duration::from_secs(2),
///     ..ListProgress::default()
/// };
/// assert_eq!(p.rate(), 1_000.0);
/// assert_eq!(p.eta(), Some(Duration::from_secs(6)));
/// assert_eq!(p.to_string(), "listing: 2000 objects in 2.0 s (1000/s), about 6000 left, about 6 s to go");
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListProgress {
    /// A list is under way.
    pub listing: bool,
    /// Lists started so far (the first one included).
    pub lists: u64,
    /// Objects received by the current (or last) list.
    pub objects: u64,
    /// Bytes of list responses read by the current (or last) list, where the source says.
    pub bytes: Option<u64>,
    /// Objects still to come, as the server last said (`remainingItemCount`).
    pub remaining: Option<u64>,
    /// Time since the current (or last) list started.
    pub elapsed: Duration,
}

impl ListProgress {
    /// Objects per second so far.
    pub fn rate(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.objects as f64 / secs
        } else {
            0.0
        }
    }

    /// The time left at the rate so far, where the server says how many objects remain.
    pub fn eta(&self) -> Option<Duration> {
        let remaining = self.remaining?;
        let rate = self.rate();
        (rate > 0.0).then(|| Duration::from_secs_f64(remaining as f64 / rate))
    }
}

impl std::fmt::Display for ListProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.lists == 0 {
            return f.write_str("no list started yet");
        }
        let state = if self.listing { "listing" } else { "listed" };
        write!(
            f,
            "{state}: {} objects in {:.1} s ({:.0}/s)",
            self.objects,
            self.elapsed.as_secs_f64(),
            self.rate()
        )?;
        if let Some(bytes) = self.bytes {
            write!(f, ", {:.1} MiB", bytes as f64 / (1024.0 * 1024.0))?;
        }
        if self.listing
            && let Some(remaining) = self.remaining
        {
            write!(f, ", about {remaining} left")?;
            if let Some(eta) = self.eta() {
                write!(f, ", about {:.0} s to go", eta.as_secs_f64())?;
            }
        }
        Ok(())
    }
}

#[derive(Debug, Default)]
struct State {
    lists: u64,
    listing: bool,
    objects: u64,
    bytes: Option<u64>,
    remaining: Option<u64>,
    started: Option<Instant>,
    ended: Option<Instant>,
}

/// Where a reflector writes its progress and an informer reads it. Cheap to clone; clones
/// share the figures.
#[derive(Debug, Clone, Default)]
pub struct ProgressTracker(Arc<Mutex<State>>);

impl ProgressTracker {
    /// A tracker with no list yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// A list starts.
    pub fn begin(&self) {
        self.with(|s| {
            s.lists += 1;
            s.listing = true;
            s.objects = 0;
            s.bytes = None;
            s.remaining = None;
            s.started = Some(Instant::now());
            s.ended = None;
        });
    }

    /// A page (or a streamed object) arrived: `objects` more, `bytes` more where known, and
    /// what the server says remains.
    pub fn page(&self, objects: u64, bytes: Option<u64>, remaining: Option<u64>) {
        self.with(|s| {
            s.objects += objects;
            if let Some(b) = bytes {
                s.bytes = Some(s.bytes.unwrap_or(0) + b);
            }
            s.remaining = remaining;
        });
    }

    /// The list is complete (or abandoned).
    pub fn end(&self) {
        self.with(|s| {
            s.listing = false;
            s.remaining = None;
            s.ended = Some(Instant::now());
        });
    }

    /// The figures now.
    pub fn snapshot(&self) -> ListProgress {
        self.with(|s| ListProgress {
            listing: s.listing,
            lists: s.lists,
            objects: s.objects,
            bytes: s.bytes,
            remaining: s.remaining,
            elapsed: match (s.started, s.ended) {
                (Some(start), Some(end)) => end.duration_since(start),
                (Some(start), None) => start.elapsed(),
                _ => Duration::ZERO,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tracker_counts_pages_and_restarts_with_each_list() {
        let t = ProgressTracker::new();
        assert_eq!(t.snapshot().to_string(), "no list started yet");
        t.begin();
        t.page(500, Some(1024), Some(1500));
        t.page(500, None, Some(1000));
        let p = t.snapshot();
        assert!(p.listing);
        assert_eq!(
            (p.lists, p.objects, p.bytes, p.remaining),
            (1, 1000, Some(1024), Some(1000))
        );
        t.end();
        let p = t.snapshot();
        assert!(!p.listing && p.remaining.is_none());
        assert!(p.to_string().starts_with("listed: 1000 objects"), "{p}");
        t.begin();
        assert_eq!((t.snapshot().lists, t.snapshot().objects), (2, 0));
    }
}
