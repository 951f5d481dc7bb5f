//! Startup that reports: how far each informer's first list has got, and a wait for sync that
//! says which informers are late and why.

use std::fmt;
use std::time::Duration;

use kinformer_core::ListProgress;

/// Where one informer stands on its way to its first sync.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncState {
    /// The informer's name.
    pub name: String,
    /// Its first list is in the cache and handed to the handlers.
    pub synced: bool,
    /// How far its current (or last) list has got, for an informer fed by a list/watch.
    pub progress: Option<ListProgress>,
    /// The last failure its reflector retried, if any.
    pub last_error: Option<String>,
}

impl fmt::Display for SyncState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.name)?;
        if self.synced {
            return f.write_str("synced");
        }
        match &self.progress {
            Some(p) => write!(f, "{p}")?,
            None => f.write_str("not synced")?,
        }
        if let Some(e) = &self.last_error {
            write!(f, "; last error: {e}")?;
        }
        Ok(())
    }
}

/// Informers that did not sync in time: each one late, how far it got, and its last error.
/// Retry the wait, or give up and report it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct NotSynced {
    /// How long the wait lasted.
    pub waited: Duration,
    /// The informers that had not synced (or were shut down first).
    pub informers: Vec<SyncState>,
}

impl fmt::Display for NotSynced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} informer(s) not synced after {:.1} s",
            self.informers.len(),
            self.waited.as_secs_f64()
        )?;
        for s in &self.informers {
            write!(f, "; {s}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_informer_is_named_with_its_progress_and_last_error() {
        let late = NotSynced {
            waited: Duration::from_secs(5),
            informers: vec![SyncState {
                name: "pods".into(),
                synced: false,
                progress: Some(ListProgress::default()),
                last_error: Some("401 Unauthorized".into()),
            }],
        };
        assert_eq!(
            late.to_string(),
            "1 informer(s) not synced after 5.0 s; pods: no list started yet; last error: 401 Unauthorized"
        );
    }
}
