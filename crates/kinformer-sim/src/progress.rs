//! How far each open watch stream has got: the highest resourceVersion it has handed to its
//! connection, for tests that wait until a client's watch has caught up
//! ([`SimServer::wait_until_watches_reach`](crate::SimServer::wait_until_watches_reach)).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::sync::watch;

/// The open watch streams of one server and the version each has reached.
#[derive(Debug)]
pub(crate) struct WatchProgress {
    open: Mutex<Vec<Arc<AtomicU64>>>,
    /// Bumped whenever a watch opens, closes or moves on.
    changed: watch::Sender<()>,
}

impl WatchProgress {
    pub(crate) fn new() -> Self {
        Self {
            open: Mutex::new(Vec::new()),
            changed: watch::channel(()).0,
        }
    }

    /// Counts a watch stream as open, having reached nothing yet, until the returned guard drops.
    pub(crate) fn open(&self) -> OpenWatch<'_> {
        let reached = Arc::new(AtomicU64::new(0));
        self.open.lock().push(Arc::clone(&reached));
        self.changed.send_replace(());
        OpenWatch {
            progress: self,
            reached,
        }
    }

    /// The version each open watch has reached, in the order they opened.
    pub(crate) fn reached(&self) -> Vec<u64> {
        self.open
            .lock()
            .iter()
            .map(|r| r.load(Ordering::Acquire))
            .collect()
    }

    /// A receiver that sees a change whenever a watch opens, closes or moves on.
    pub(crate) fn subscribe(&self) -> watch::Receiver<()> {
        self.changed.subscribe()
    }
}

/// One open watch stream, counted by its [`WatchProgress`] until dropped.
#[derive(Debug)]
pub(crate) struct OpenWatch<'a> {
    progress: &'a WatchProgress,
    reached: Arc<AtomicU64>,
}

impl OpenWatch<'_> {
    /// Records that the stream has handed every event up to `rv` to its connection (or skipped
    /// it, for events it does not select).
    pub(crate) fn reached(&self, rv: u64) {
        if self.reached.fetch_max(rv, Ordering::AcqRel) < rv {
            self.progress.changed.send_replace(());
        }
    }
}

impl Drop for OpenWatch<'_> {
    fn drop(&mut self) {
        self.progress
            .open
            .lock()
            .retain(|r| !Arc::ptr_eq(r, &self.reached));
        self.progress.changed.send_replace(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_count_while_open_and_only_move_forward() {
        let progress = WatchProgress::new();
        let mut changes = progress.subscribe();
        changes.borrow_and_update();
        let a = progress.open();
        let b = progress.open();
        assert_eq!(progress.reached(), [0, 0]);
        a.reached(7);
        a.reached(5);
        assert_eq!(progress.reached(), [7, 0]);
        assert!(changes.has_changed().unwrap());
        changes.borrow_and_update();
        // Reaching a version already reached is no news.
        a.reached(7);
        assert!(!changes.has_changed().unwrap());
        drop(b);
        assert!(changes.has_changed().unwrap());
        assert_eq!(progress.reached(), [7]);
        drop(a);
        assert!(progress.reached().is_empty());
    }
}
