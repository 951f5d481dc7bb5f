//! The reflector's own errors.

use std::time::Duration;

use kinformer_core::list_watch::{self, ErrorKind};
use kinformer_core::{Status, StoreError};

/// What went wrong inside a reflector. [`Reflector::run`](crate::Reflector::run) returns one only
/// when it cannot go on ([`StoreClosed`](Self::StoreClosed)); the others are the sources of the
/// failures a [`WatchErrorHandler`](crate::WatchErrorHandler) hears about, which the reflector
/// retries.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store refused a write because it was closed (the pipeline behind it shut down): the
    /// reflector stops. Give up, or build a new pipeline.
    #[error("the store is closed")]
    StoreClosed,
    /// The store refused a write for another reason: the reflector lists again after a backoff.
    #[error("the store refused a write: {0}")]
    Store(#[source] StoreError),
    /// A watch ended within the short-watch time without delivering anything: often a server
    /// or proxy that closes watches at once. The reflector lists again after a backoff.
    #[error("the watch ended after {elapsed:?} with no event; listing again")]
    ShortWatch {
        /// How long the watch lasted.
        elapsed: Duration,
    },
    /// A watch ended within the short-watch time after delivering events: the version is good,
    /// so the reflector watches again from it, after a backoff step rather than at once.
    #[error(
        "the watch ended after {elapsed:?} and {events} events; watching again after a backoff"
    )]
    WatchClosedEarly {
        /// How long the watch lasted.
        elapsed: Duration,
        /// The events it delivered.
        events: usize,
    },
    /// The server ended a watch with an `ERROR` event other than 410: the reflector lists again
    /// after a backoff.
    #[error("the watch ended with an error from the server: {} ({})", .0.message, .0.code)]
    WatchStatus(Status),
    /// A streaming list ended before the bookmark that marks the end of its initial events:
    /// what it delivered is dropped and the list is retried.
    #[error(
        "the streaming list ended before its initial events were complete ({received} received)"
    )]
    StreamingListIncomplete {
        /// The objects received before the end.
        received: usize,
    },
    /// A streaming list delivered an event other than `ADDED` or a bookmark before its initial
    /// events were complete: a server that does not follow the protocol.
    #[error("the streaming list delivered a {event} event among its initial events")]
    StreamingListProtocol {
        /// The event's type.
        event: &'static str,
    },
}

impl Error {
    /// The failure, as a [`list_watch::Error`] of the kind the reflector acts on.
    pub(crate) fn into_list_watch(self) -> list_watch::Error {
        let kind = match &self {
            Self::StoreClosed | Self::Store(_) => ErrorKind::Fatal,
            Self::ShortWatch { .. } => ErrorKind::Relist,
            Self::WatchClosedEarly { .. } => ErrorKind::Resume,
            Self::WatchStatus(status) if status.is_gone() => ErrorKind::Relist,
            Self::WatchStatus(status) if status.code == 429 || status.code >= 500 => {
                ErrorKind::Retry
            }
            Self::WatchStatus(_) => ErrorKind::Fatal,
            Self::StreamingListIncomplete { .. } => ErrorKind::Retry,
            Self::StreamingListProtocol { .. } => ErrorKind::Fatal,
        };
        let retry_after = match &self {
            Self::WatchStatus(status) => status
                .details
                .as_ref()
                .map(|d| d.retry_after_seconds)
                .filter(|s| *s > 0)
                .map(|s| Duration::from_secs(u64::from(s))),
            _ => None,
        };
        list_watch::Error::new(kind, self).with_retry_after(retry_after)
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Closed => Self::StoreClosed,
            other => Self::Store(other),
        }
    }
}
