//! The retry schedule: backon's exponential steps, full jitter, and a reset after a healthy spell.

use std::time::Duration;

use backon::{BackoffBuilder as _, ExponentialBackoff, ExponentialBuilder};
use tokio::time::Instant;

use crate::config::BackoffConfig;

/// Waits between retries. Each [`next_delay`](Self::next_delay) takes the next step of an
/// exponential schedule and draws the wait at random in `[0, step]` (full jitter, so that many
/// reflectors hit by the same outage spread out); after `reset_after` without a call, the
/// schedule starts again from its first step, as client-go's backoff manager does.
pub(crate) struct Backoff {
    config: BackoffConfig,
    steps: ExponentialBackoff,
    last: Option<Instant>,
}

impl Backoff {
    pub(crate) fn new(config: BackoffConfig) -> Self {
        Self {
            config,
            steps: Self::schedule(&config),
            last: None,
        }
    }

    fn schedule(config: &BackoffConfig) -> ExponentialBackoff {
        ExponentialBuilder::new()
            .with_min_delay(config.initial)
            .with_max_delay(config.max.max(config.initial))
            .with_factor(config.factor.max(1.0))
            .without_max_times()
            .build()
    }

    /// The step to wait next, before jitter.
    pub(crate) fn next_step(&mut self, now: Instant) -> Duration {
        if self
            .last
            .is_some_and(|last| now.duration_since(last) >= self.config.reset_after)
        {
            self.steps = Self::schedule(&self.config);
        }
        self.last = Some(now);
        // The schedule has no end (`without_max_times`); the cap is the fallback all the same.
        self.steps.next().unwrap_or(self.config.max)
    }

    /// The wait before the next retry: a random point of the next step.
    pub(crate) fn next_delay(&mut self, now: Instant, rng: &mut fastrand::Rng) -> Duration {
        let step = self.next_step(now);
        let nanos = u64::try_from(step.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rng.u64(0..=nanos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_double_up_to_the_cap_and_start_over_after_a_healthy_spell() {
        let mut b = Backoff::new(BackoffConfig::default());
        let t0 = Instant::now();
        let steps: Vec<u64> = (0..8)
            .map(|i| b.next_step(t0 + Duration::from_secs(i)).as_millis() as u64)
            .collect();
        assert_eq!(steps, [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
        // Less than two minutes since the last failure: the schedule goes on.
        let later = t0 + Duration::from_secs(7 + 119);
        assert_eq!(b.next_step(later), Duration::from_secs(30));
        // Two minutes of health: back to the first step.
        let healthy = later + Duration::from_secs(120);
        assert_eq!(b.next_step(healthy), Duration::from_millis(800));
    }

    #[test]
    fn the_jittered_wait_lies_within_the_step_and_is_replayable() {
        let draw = |seed| {
            let mut b = Backoff::new(BackoffConfig::default());
            let mut rng = fastrand::Rng::with_seed(seed);
            let t0 = Instant::now();
            (0..6)
                .map(|_| b.next_delay(t0, &mut rng))
                .collect::<Vec<_>>()
        };
        let a = draw(7);
        assert_eq!(a, draw(7), "same seed, same waits");
        assert_ne!(a, draw(8));
        let mut step = Duration::from_millis(800);
        for d in a {
            assert!(d <= step, "{d:?} > {step:?}");
            step *= 2;
        }
    }
}
