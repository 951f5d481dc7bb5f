//! The fault schedule: every fault class the simulated server has, fired in seeded rounds (each
//! round fires every class once, in a seeded order), so even a short run fires them all.

use std::collections::BTreeMap;
use std::time::Duration;

use kinformer_sim::{Faults, RequestKind};

/// Client-side limit on a watch line in the soak; the "rejected" oversized lines exceed it.
pub(crate) const MAX_WATCH_LINE: usize = 256 * 1024;

/// One kind of fault the schedule fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultClass {
    /// Half of a watch line, then the connection is torn down.
    CutMidLine,
    /// Every open watch ends cleanly.
    CloseWatches,
    /// Watches send nothing, bookmarks included, for 0.2-2 s.
    Stall,
    /// The next watch gets an `ERROR` event with 410 Gone.
    GoneOnWatch,
    /// The next list page with a continue token answers 410 Gone; the next watch too, so that
    /// a (paged) relist follows.
    GoneOnContinue,
    /// All history is dropped: resuming at any older version answers 410.
    Compact,
    /// 1-3 requests answer 429 with `Retry-After: 1`.
    TooManyRequests,
    /// 1-3 requests answer 500.
    InternalError,
    /// 1-3 requests answer 503 with `Retry-After: 1`.
    Unavailable,
    /// A line of invalid JSON on a watch.
    MalformedLine,
    /// A 64 KiB watch line: over the usual size, under the client's limit.
    LargeLine,
    /// A 1 MiB watch line: over the client's limit, so the stream ends with an error.
    OversizedLine,
    /// List bodies and watch streams wait 1-5 ms per chunk until the next fault.
    SlowChunks,
    /// Every connection is dropped at once, as an API server restart.
    Restart,
}

impl FaultClass {
    /// Every class, in a fixed order.
    pub const ALL: [FaultClass; 14] = [
        FaultClass::CutMidLine,
        FaultClass::CloseWatches,
        FaultClass::Stall,
        FaultClass::GoneOnWatch,
        FaultClass::GoneOnContinue,
        FaultClass::Compact,
        FaultClass::TooManyRequests,
        FaultClass::InternalError,
        FaultClass::Unavailable,
        FaultClass::MalformedLine,
        FaultClass::LargeLine,
        FaultClass::OversizedLine,
        FaultClass::SlowChunks,
        FaultClass::Restart,
    ];

    /// A short name for the report.
    pub fn name(self) -> &'static str {
        match self {
            FaultClass::CutMidLine => "stream cut mid-line",
            FaultClass::CloseWatches => "watches closed",
            FaultClass::Stall => "watch stall",
            FaultClass::GoneOnWatch => "410 on watch",
            FaultClass::GoneOnContinue => "410 on continue",
            FaultClass::Compact => "compaction",
            FaultClass::TooManyRequests => "429 burst (Retry-After)",
            FaultClass::InternalError => "500 burst",
            FaultClass::Unavailable => "503 burst (Retry-After)",
            FaultClass::MalformedLine => "malformed line",
            FaultClass::LargeLine => "64 KiB line (accepted)",
            FaultClass::OversizedLine => "1 MiB line (over the limit)",
            FaultClass::SlowChunks => "slow chunks",
            FaultClass::Restart => "restart (all connections dropped)",
        }
    }
}

/// Fires faults in seeded rounds and counts them.
pub(crate) struct Schedule {
    faults: Faults,
    rng: fastrand::Rng,
    round: Vec<FaultClass>,
    slow: bool,
    pub(crate) fired: BTreeMap<FaultClass, u64>,
}

impl Schedule {
    pub(crate) fn new(faults: Faults, seed: u64) -> Self {
        Self {
            faults,
            rng: fastrand::Rng::with_seed(seed ^ 0xfa17),
            round: Vec::new(),
            slow: false,
            fired: FaultClass::ALL.iter().map(|c| (*c, 0)).collect(),
        }
    }

    /// The wait before the next fault, between `min` and `max`.
    pub(crate) fn next_wait(&mut self, min: Duration, max: Duration) -> Duration {
        let span = max.saturating_sub(min).as_millis() as u64;
        min + Duration::from_millis(self.rng.u64(0..=span))
    }

    fn kind(&mut self) -> RequestKind {
        [RequestKind::List, RequestKind::Watch, RequestKind::Any][self.rng.usize(0..3)]
    }

    /// Fires the next fault of the round.
    pub(crate) fn fire(&mut self) {
        if self.slow {
            self.faults.slow_chunks(None);
            self.slow = false;
        }
        if self.round.is_empty() {
            self.round = FaultClass::ALL.to_vec();
            self.rng.shuffle(&mut self.round);
        }
        let class = self.round.pop().expect("refilled above");
        let f = self.faults.clone();
        match class {
            FaultClass::CutMidLine => f.cut_next_watch_mid_line(),
            FaultClass::CloseWatches => f.close_all_watches_now(),
            FaultClass::Stall => {
                f.stall_watches(Duration::from_millis(self.rng.u64(200..=2000)));
            }
            FaultClass::GoneOnWatch => f.gone_next_watch(),
            FaultClass::GoneOnContinue => {
                f.gone_next_continue();
                f.gone_next_watch();
            }
            FaultClass::Compact => f.compact_now(),
            FaultClass::TooManyRequests => {
                let (kind, n) = (self.kind(), self.rng.usize(1..=3));
                f.fail_next(kind, 429, n, Some(1));
            }
            FaultClass::InternalError => {
                let (kind, n) = (self.kind(), self.rng.usize(1..=3));
                f.fail_next(kind, 500, n, None);
            }
            FaultClass::Unavailable => {
                let (kind, n) = (self.kind(), self.rng.usize(1..=3));
                f.fail_next(kind, 503, n, Some(1));
            }
            FaultClass::MalformedLine => f.malformed_next_watch_line(),
            FaultClass::LargeLine => f.oversized_next_watch_line(64 * 1024),
            FaultClass::OversizedLine => f.oversized_next_watch_line(4 * MAX_WATCH_LINE),
            FaultClass::SlowChunks => {
                f.slow_chunks(Some(Duration::from_millis(self.rng.u64(1..=5))));
                self.slow = true;
            }
            FaultClass::Restart => f.drop_all_connections(),
        }
        *self.fired.entry(class).or_default() += 1;
    }

    /// Disarms everything, before the informers are left to settle.
    pub(crate) fn calm(&mut self) {
        self.faults.clear();
        self.slow = false;
    }
}
