//! Timings shared by the elector and the membership, their validation, and the two clocks: the
//! local monotonic one that decides, and the wall clock that is only written down.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kinformer_core::validation;
use tokio::time::Instant;

use crate::Error;

/// How far a retry period is stretched at random, at most, between two attempts to acquire:
/// the wait is `retry_period * (1 + JITTER_FACTOR * r)` for `r` uniform in `[0, 1)`, as
/// client-go's `wait.JitterUntil` with its `JitterFactor`. The renew deadline must exceed
/// `retry_period * JITTER_FACTOR`.
pub const JITTER_FACTOR: f64 = 1.2;

/// The default lease duration: 15 s, client-go's usual value.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// The default renew deadline: 10 s.
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);

/// The default retry period: 2 s.
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// client-go's checks: every duration above zero, `lease_duration > renew_deadline >
/// retry_period * JITTER_FACTOR`, and an identity.
pub(crate) fn validate(
    identity: &str,
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
) -> Result<(), Error> {
    for (field, d) in [
        ("lease_duration", lease_duration),
        ("renew_deadline", renew_deadline),
        ("retry_period", retry_period),
    ] {
        if d.is_zero() {
            return Err(Error::ZeroDuration { field });
        }
    }
    if lease_duration <= renew_deadline {
        return Err(Error::LeaseDurationNotAboveRenewDeadline {
            lease_duration,
            renew_deadline,
        });
    }
    if renew_deadline <= retry_period.mul_f64(JITTER_FACTOR) {
        return Err(Error::RenewDeadlineNotAboveRetryPeriod {
            renew_deadline,
            retry_period,
        });
    }
    if identity.is_empty() {
        return Err(Error::EmptyIdentity);
    }
    Ok(())
}

/// A Lease's name must be a DNS-1123 subdomain.
pub(crate) fn validate_lease_name(name: &str) -> Result<(), Error> {
    let problems = validation::is_dns1123_subdomain(name);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::InvalidName {
            what: "Lease name",
            value: name.to_owned(),
            problems: problems.join("; "),
        })
    }
}

/// `leaseDurationSeconds` for a lease duration: whole seconds, rounded up (at least 1), so
/// that others never wait less than the holder counts on.
pub(crate) fn lease_duration_seconds(d: Duration) -> i32 {
    let secs = d.as_nanos().div_ceil(1_000_000_000).max(1);
    i32::try_from(secs).unwrap_or(i32::MAX)
}

/// How long a Lease counts as held after its record was last seen to change: its
/// `leaseDurationSeconds`, as the holder wrote it (0 when absent: expired at once).
pub(crate) fn lease_duration_of(spec: Option<&LeaseSpec>) -> Duration {
    let secs = spec.and_then(|s| s.lease_duration_seconds).unwrap_or(0);
    Duration::from_secs(u64::try_from(secs).unwrap_or(0))
}

/// The holder a Lease names, `None` for none (absent or empty: released).
pub(crate) fn holder_of(spec: Option<&LeaseSpec>) -> Option<&str> {
    spec.and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

/// The wall clock as a `MicroTime`, cut to whole microseconds (what the API server keeps):
/// written into Leases for people and other clients, never used to decide.
pub(crate) fn now_micro() -> MicroTime {
    let micros = match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(since) => i64::try_from(since.as_micros()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_micros()).unwrap_or(i64::MAX),
    };
    MicroTime(Timestamp::from_microsecond(micros).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// `period` stretched by up to `factor` of itself, at random.
pub(crate) fn jittered(period: Duration, factor: f64) -> Duration {
    period + period.mul_f64(factor * fastrand::f64())
}

/// What this process last saw of a record and when it first saw it so, by the local monotonic
/// clock: the only time a decision about someone else's Lease rests on (client-go's
/// `observedTime`).
#[derive(Debug, Clone)]
pub(crate) struct Observed<R> {
    /// The record.
    pub(crate) record: R,
    /// When it was first seen as it is.
    pub(crate) at: Instant,
}

impl<R: PartialEq> Observed<R> {
    /// A record first seen now.
    pub(crate) fn new(record: R, now: Instant) -> Self {
        Self { record, at: now }
    }

    /// Notes `record` as seen at `now`: the observation time moves only when the record changed.
    pub(crate) fn see(&mut self, record: R, now: Instant) {
        if self.record != record {
            *self = Self::new(record, now);
        }
    }

    /// Whether a Lease whose record this is still counts as held at `now`, for `duration` from
    /// when it was last seen to change.
    pub(crate) fn unexpired(&self, duration: Duration, now: Instant) -> bool {
        now < self.at + duration
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_follows_client_go() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        assert!(validate("a", s(15), s(10), s(2)).is_ok());
        assert!(validate("a", s(1), ms(700), ms(200)).is_ok());
        let cases: Vec<(Duration, Duration, Duration, &str, &str)> = vec![
            (s(0), s(10), s(2), "a", "ZeroDuration(lease_duration)"),
            (s(15), s(0), s(2), "a", "ZeroDuration(renew_deadline)"),
            (s(15), s(10), s(0), "a", "ZeroDuration(retry_period)"),
            (s(10), s(10), s(2), "a", "LeaseDuration"),
            (s(9), s(10), s(2), "a", "LeaseDuration"),
            // 10 s is not above 1.2 * 9 s; exactly 1.2 * retry is not enough either.
            (s(15), s(10), s(9), "a", "RenewDeadline"),
            (s(15), ms(2400), s(2), "a", "RenewDeadline"),
            (s(15), s(10), s(2), "", "EmptyIdentity"),
        ];
        for (lease, renew, retry, id, want) in cases {
            let got = match validate(id, lease, renew, retry).unwrap_err() {
                Error::ZeroDuration { field } => format!("ZeroDuration({field})"),
                Error::LeaseDurationNotAboveRenewDeadline { .. } => "LeaseDuration".into(),
                Error::RenewDeadlineNotAboveRetryPeriod { .. } => "RenewDeadline".into(),
                Error::EmptyIdentity => "EmptyIdentity".into(),
                other => panic!("{other}"),
            };
            assert_eq!(got, want, "{lease:?} {renew:?} {retry:?} {id:?}");
        }
    }

    #[test]
    fn lease_seconds_round_up() {
        assert_eq!(lease_duration_seconds(Duration::from_secs(15)), 15);
        assert_eq!(lease_duration_seconds(Duration::from_millis(1500)), 2);
        assert_eq!(lease_duration_seconds(Duration::from_millis(1)), 1);
        assert_eq!(lease_duration_seconds(Duration::MAX), i32::MAX);
    }

    #[test]
    fn wall_clock_is_whole_microseconds() {
        assert_eq!(now_micro().0.subsec_nanosecond() % 1000, 0);
    }

    #[test]
    fn jitter_stays_in_its_bounds() {
        let p = Duration::from_millis(100);
        for _ in 0..100 {
            let j = jittered(p, JITTER_FACTOR);
            assert!(j >= p && j <= p.mul_f64(1.0 + JITTER_FACTOR), "{j:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn observation_time_moves_only_on_change() {
        let t0 = Instant::now();
        let mut o = Observed::new("a", t0);
        tokio::time::advance(Duration::from_secs(1)).await;
        o.see("a", Instant::now());
        assert_eq!(o.at, t0);
        assert!(o.unexpired(Duration::from_secs(2), Instant::now()));
        assert!(!o.unexpired(Duration::from_secs(1), Instant::now()));
        o.see("b", Instant::now());
        assert_eq!(o.at, Instant::now());
    }
}
