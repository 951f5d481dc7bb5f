//! Counters through the `metrics` facade. With no recorder installed they cost nothing; the
//! handles are made once per run, so the hot path only bumps an atomic.

use kinformer_core::list_watch::ErrorKind;
use metrics::{Counter, Label, counter};

/// The counter names, each labelled `reflector` with [`Config::name`](crate::Config::name).
pub mod names {
    /// Every list, the first one included (a streaming list counts as one).
    pub const LISTS: &str = "kinformer_reflector_lists_total";
    /// Lists after the first: each one a full resync with the server.
    pub const RELISTS: &str = "kinformer_reflector_relists_total";
    /// Watches opened (a streaming list's watch included).
    pub const WATCHES: &str = "kinformer_reflector_watches_total";
    /// Watch events applied, labelled `type` (`added`, `modified`, `deleted`).
    pub const EVENTS: &str = "kinformer_reflector_events_total";
    /// Bookmarks received.
    pub const BOOKMARKS: &str = "kinformer_reflector_bookmarks_total";
    /// Failures retried, labelled `kind` (`relist`, `resume`, `retry`, `fatal`).
    pub const ERRORS: &str = "kinformer_reflector_errors_total";
    /// Milliseconds spent waiting before retries.
    pub const BACKOFF_MILLISECONDS: &str = "kinformer_reflector_backoff_milliseconds_total";
}

pub(crate) struct Metrics {
    name: String,
    pub(crate) lists: Counter,
    pub(crate) relists: Counter,
    pub(crate) watches: Counter,
    pub(crate) added: Counter,
    pub(crate) modified: Counter,
    pub(crate) deleted: Counter,
    pub(crate) bookmarks: Counter,
    pub(crate) backoff_ms: Counter,
}

impl Metrics {
    pub(crate) fn new(name: &str) -> Self {
        let label = || vec![Label::new("reflector", name.to_owned())];
        let event = |t: &'static str| {
            counter!(
                names::EVENTS,
                vec![
                    Label::new("reflector", name.to_owned()),
                    Label::new("type", t)
                ]
            )
        };
        Self {
            name: name.to_owned(),
            lists: counter!(names::LISTS, label()),
            relists: counter!(names::RELISTS, label()),
            watches: counter!(names::WATCHES, label()),
            added: event("added"),
            modified: event("modified"),
            deleted: event("deleted"),
            bookmarks: counter!(names::BOOKMARKS, label()),
            backoff_ms: counter!(names::BACKOFF_MILLISECONDS, label()),
        }
    }

    /// Failures are rare: the handle is made when one happens.
    pub(crate) fn error(&self, kind: ErrorKind) {
        counter!(
            names::ERRORS,
            vec![
                Label::new("reflector", self.name.clone()),
                Label::new("kind", kind.to_string())
            ]
        )
        .increment(1);
    }
}
