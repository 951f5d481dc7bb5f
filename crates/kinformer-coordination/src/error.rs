//! The error type of `kinformer-coordination`.

use std::time::Duration;

/// A boxed error from a [`LeaseStore`](crate::LeaseStore) implementation, kept as the source of
/// [`Error::Store`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What can go wrong: a Lease store's answer that the coordination acts on (not found, someone
/// else wrote first, any other failure), or a configuration that cannot work.
///
/// The store variants are what a [`LeaseStore`](crate::LeaseStore) answers; the elector and the
/// membership act on them themselves (create a Lease that is not found, read again after a
/// conflict, retry later after a failure) and never end on one. The configuration variants come
/// from [`LeaderElectionConfig::validate`](crate::LeaderElectionConfig::validate) and
/// [`ShardMembershipConfig::validate`](crate::ShardMembershipConfig::validate), before anything
/// runs.
///
/// ```
/// use kinformer_coordination::Error;
///
/// let e = Error::Conflict { name: "leader".into() };
/// assert!(e.is_conflict() && !e.is_not_found());
/// let e = Error::store("connection refused");
/// assert_eq!(e.to_string(), "the Lease store failed: connection refused");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The Lease does not exist. For a get: create it. For an update or a delete: it was deleted
    /// meanwhile; read again.
    #[error("Lease {name:?} not found")]
    NotFound {
        /// The Lease's name.
        name: String,
    },

    /// Someone else wrote first: a create of a Lease that exists, or an update or delete made at
    /// a resourceVersion that is no longer the Lease's. Not retryable as is: read the Lease
    /// again and decide anew.
    #[error("Lease {name:?} was written by someone else first")]
    Conflict {
        /// The Lease's name.
        name: String,
    },

    /// Any other failure of the store: the API server unreachable, throttled, failing, or
    /// refusing the request. Retry later (the elector and the membership retry every retry
    /// period).
    #[error("the Lease store failed: {source}")]
    Store {
        /// The implementation's error.
        #[source]
        source: BoxError,
    },

    /// A duration of the configuration is zero. Not retryable: fix the configuration.
    #[error("{field} must be greater than zero")]
    ZeroDuration {
        /// `"lease_duration"`, `"renew_deadline"` or `"retry_period"`.
        field: &'static str,
    },

    /// `lease_duration` is not greater than `renew_deadline`: a holder that gives up at its
    /// renew deadline would still be acting when others take its Lease over. Not retryable.
    #[error(
        "lease_duration ({lease_duration:?}) must be greater than renew_deadline ({renew_deadline:?})"
    )]
    LeaseDurationNotAboveRenewDeadline {
        /// The configured lease duration.
        lease_duration: Duration,
        /// The configured renew deadline.
        renew_deadline: Duration,
    },

    /// `renew_deadline` is not greater than `retry_period` times the jitter factor
    /// ([`JITTER_FACTOR`](crate::JITTER_FACTOR), 1.2): a renewal could not be tried in time.
    /// Not retryable.
    #[error(
        "renew_deadline ({renew_deadline:?}) must be greater than retry_period ({retry_period:?}) \
         times the jitter factor 1.2"
    )]
    RenewDeadlineNotAboveRetryPeriod {
        /// The configured renew deadline.
        renew_deadline: Duration,
        /// The configured retry period.
        retry_period: Duration,
    },

    /// The identity is empty: a Lease held by `""` counts as held by nobody. Not retryable.
    #[error("the identity must not be empty")]
    EmptyIdentity,

    /// A name is not usable: the Lease's name is not a DNS-1123 subdomain, or the group is not a
    /// DNS-1123 label (it is a label value too). Not retryable.
    #[error("invalid {what} {value:?}: {problems}")]
    InvalidName {
        /// `"Lease name"` or `"group"`.
        what: &'static str,
        /// The value as given.
        value: String,
        /// Every problem found, joined by `; `.
        problems: String,
    },
}

impl Error {
    /// [`Error::Store`] with `source` as its cause: how a [`LeaseStore`](crate::LeaseStore)
    /// implementation reports a failure that is neither "not found" nor a conflict.
    pub fn store(source: impl Into<BoxError>) -> Self {
        Self::Store {
            source: source.into(),
        }
    }

    /// Whether the Lease was not found.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// Whether someone else wrote first.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_keep_their_source() {
        let e = Error::store(std::io::Error::other("reset"));
        assert!(!e.is_conflict() && !e.is_not_found());
        let source = std::error::Error::source(&e).unwrap();
        assert_eq!(source.to_string(), "reset");
    }
}
