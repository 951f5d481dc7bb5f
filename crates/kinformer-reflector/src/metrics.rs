//! Counters through the `metrics` facade. With no recorder installed they cost nothing; the
//! handles are made once per run, so the hot path only bumps an atomic. docs/metrics.md lists
//! every metric of the pipeline.

use kinformer_core::list_watch::{self, ErrorKind};
use metrics::{Counter, Label, counter};

use crate::Error;

/// The counter names. Each is labelled `informer` with [`Config::name`](crate::Config::name)
/// and `resource` with [`Config::resource`](crate::Config::resource) (the name when empty).
pub mod names {
    /// Lists that ended, labelled `outcome`: `success` (the store holds the list) or `error`.
    /// A streaming list counts as a list (and its watch, once the initial events are in, as a
    /// watch); a list stopped on request counts as neither.
    pub const LISTS: &str = "kinformer_reflector_lists_total";
    /// Lists started again, labelled `cause`: after the store held a list (`expired`: 410 Gone
    /// or Expired; `too_large_resource_version`: the server has not reached the version yet;
    /// `short_watch`: a watch ended at once with nothing; `error`: any other failure), or a
    /// paged list started again from the beginning because its continue token expired
    /// (`expired_continue`).
    pub const RELISTS: &str = "kinformer_reflector_relists_total";
    /// Watches that ended, labelled `outcome`: `success` (opened, and ended by the server's
    /// timeout or a closed connection) or `error` (refused, or ended by a failure the reflector
    /// reports: a 410, an error event, a watch that ended at once).
    pub const WATCHES: &str = "kinformer_reflector_watches_total";
    /// Watches opened again from the last synced version after the previous one ended, with no
    /// list in between.
    pub const WATCH_RESTARTS: &str = "kinformer_reflector_watch_restarts_total";
    /// Watch events applied, labelled `type` (`added`, `modified`, `deleted`).
    pub const EVENTS: &str = "kinformer_reflector_events_total";
    /// Bookmarks received.
    pub const BOOKMARKS: &str = "kinformer_reflector_bookmarks_total";
    /// Failures retried, labelled `kind` (`relist`, `resume`, `retry`, `fatal`).
    pub const ERRORS: &str = "kinformer_reflector_errors_total";
    /// Milliseconds spent waiting before retries.
    pub const BACKOFF_MILLISECONDS: &str = "kinformer_reflector_backoff_milliseconds_total";
}

/// Why a relist happened, as the `cause` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RelistCause {
    /// 410 Gone / Expired: the last synced version is compacted away.
    Expired,
    /// The server (a lagging watch cache) has not reached the version asked for.
    TooLargeResourceVersion,
    /// A paged list's continue token expired: the list started again.
    ExpiredContinue,
    /// A watch ended at once having delivered nothing.
    ShortWatch,
    /// Any other failure.
    Error,
}

impl RelistCause {
    /// The cause of a relist that `e` led to.
    pub(crate) fn of(e: &list_watch::Error) -> Self {
        if e.kind() != ErrorKind::Relist {
            return Self::Error;
        }
        match e.get_ref().downcast_ref::<Error>() {
            Some(Error::ShortWatch { .. }) => return Self::ShortWatch,
            Some(Error::WatchStatus(_)) => return Self::Expired,
            _ => {}
        }
        // As client-go's `isTooLargeResourceVersionError`, which falls back to the message for
        // servers that send no cause: the reflector names no client, so the message is what it
        // can read. Failures are rare; the text is built only then.
        let mut text = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            text.push_str(": ");
            text.push_str(&s.to_string());
            source = s.source();
        }
        let text = text.to_ascii_lowercase();
        if text.contains("too large resource version")
            || text.contains("resource version too large")
            || text.contains("resourceversiontoolarge")
        {
            Self::TooLargeResourceVersion
        } else {
            Self::Expired
        }
    }
}

pub(crate) struct Metrics {
    labels: [Label; 2],
    list_success: Counter,
    list_error: Counter,
    watch_success: Counter,
    watch_error: Counter,
    pub(crate) watch_restarts: Counter,
    relists: [Counter; 5],
    pub(crate) added: Counter,
    pub(crate) modified: Counter,
    pub(crate) deleted: Counter,
    pub(crate) bookmarks: Counter,
    pub(crate) backoff_ms: Counter,
}

impl Metrics {
    pub(crate) fn new(name: &str, resource: &str) -> Self {
        let resource = if resource.is_empty() { name } else { resource };
        let labels = [
            Label::new("informer", name.to_owned()),
            Label::new("resource", resource.to_owned()),
        ];
        let with = |key: &'static str, value: &'static str| {
            let mut all = labels.to_vec();
            all.push(Label::new(key, value));
            all
        };
        let relist = |cause| counter!(names::RELISTS, with("cause", cause));
        Self {
            list_success: counter!(names::LISTS, with("outcome", "success")),
            list_error: counter!(names::LISTS, with("outcome", "error")),
            watch_success: counter!(names::WATCHES, with("outcome", "success")),
            watch_error: counter!(names::WATCHES, with("outcome", "error")),
            watch_restarts: counter!(names::WATCH_RESTARTS, labels.to_vec()),
            relists: [
                relist("expired"),
                relist("too_large_resource_version"),
                relist("expired_continue"),
                relist("short_watch"),
                relist("error"),
            ],
            added: counter!(names::EVENTS, with("type", "added")),
            modified: counter!(names::EVENTS, with("type", "modified")),
            deleted: counter!(names::EVENTS, with("type", "deleted")),
            bookmarks: counter!(names::BOOKMARKS, labels.to_vec()),
            backoff_ms: counter!(names::BACKOFF_MILLISECONDS, labels.to_vec()),
            labels,
        }
    }

    /// A list ended: `ok` when the store holds it.
    pub(crate) fn list(&self, ok: bool) {
        if ok {
            &self.list_success
        } else {
            &self.list_error
        }
        .increment(1);
    }

    /// A watch ended: `ok` unless it was refused or ended by a failure.
    pub(crate) fn watch(&self, ok: bool) {
        if ok {
            &self.watch_success
        } else {
            &self.watch_error
        }
        .increment(1);
    }

    pub(crate) fn relist(&self, cause: RelistCause) {
        self.relists[cause as usize].increment(1);
    }

    /// Failures are rare: the handle is made when one happens.
    pub(crate) fn error(&self, kind: ErrorKind) {
        let mut labels = self.labels.to_vec();
        labels.push(Label::new("kind", kind.to_string()));
        counter!(names::ERRORS, labels).increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Text(&'static str);

    #[test]
    fn each_failure_names_its_relist_cause() {
        use std::time::Duration;
        let relist = |text| list_watch::Error::new(ErrorKind::Relist, Text(text));
        let cases = [
            (
                relist("gone: too old resource version: 3 (7)"),
                RelistCause::Expired,
            ),
            (
                relist("resource version too large: Too large resource version: 9, current: 7"),
                RelistCause::TooLargeResourceVersion,
            ),
            (
                Error::ShortWatch {
                    elapsed: Duration::ZERO,
                }
                .into_list_watch(),
                RelistCause::ShortWatch,
            ),
            (
                Error::WatchStatus(kinformer_core::Status::failure(410, "Expired", "too old"))
                    .into_list_watch(),
                RelistCause::Expired,
            ),
            (
                list_watch::Error::new(ErrorKind::Retry, Text("503")),
                RelistCause::Error,
            ),
            (
                list_watch::Error::new(ErrorKind::Fatal, Text("forbidden")),
                RelistCause::Error,
            ),
        ];
        for (e, cause) in cases {
            assert_eq!(RelistCause::of(&e), cause, "{e}");
        }
    }
}
