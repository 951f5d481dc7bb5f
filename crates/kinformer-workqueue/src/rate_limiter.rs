//! How long an item waits before it is retried: client-go's `workqueue` rate limiters.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::Error;

/// Decides how long an item waits before it is queued again: client-go's
/// `workqueue.TypedRateLimiter`.
///
/// [`when`](Self::when) is asked once per retry and counts it; [`forget`](Self::forget) ends
/// the item's history (call it when the item succeeded); [`num_requeues`](Self::num_requeues)
/// says how many retries are counted. Methods take `&self`, as a limiter is shared by every
/// worker of a queue: keep the bookkeeping behind a lock. Implemented for `&R`, `Box<R>` and
/// `Arc<R>`, so a limiter can be shared or boxed ([`BoxRateLimiter`]).
///
/// ```
/// use std::time::Duration;
/// use kinformer_workqueue::RateLimiter;
///
/// /// Always one second, and no memory.
/// struct OneSecond;
///
/// impl<T> RateLimiter<T> for OneSecond {
///     fn when(&self, _item: &T) -> Duration {
///         Duration::from_secs(1)
///     }
///     fn forget(&self, _item: &T) {}
///     fn num_requeues(&self, _item: &T) -> u32 {
///         0
///     }
/// }
///
/// let queue = kinformer_workqueue::RateLimitingQueue::with_rate_limiter(OneSecond);
/// queue.add_rate_limited("default/web");
/// ```
pub trait RateLimiter<T>: Send + Sync {
    /// How long `item` waits before its next retry; counts this retry.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kinformer_workqueue::{ExponentialFailureRateLimiter, RateLimiter};
    ///
    /// let limiter = ExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1));
    /// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
    /// assert_eq!(limiter.when(&"a"), Duration::from_millis(10));
    /// ```
    fn when(&self, item: &T) -> Duration;

    /// Forgets `item`'s retries: its next delay starts again from the beginning.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kinformer_workqueue::{ExponentialFailureRateLimiter, RateLimiter};
    ///
    /// let limiter = ExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1));
    /// limiter.when(&"a");
    /// limiter.forget(&"a");
    /// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
    /// ```
    fn forget(&self, item: &T);

    /// How many retries of `item` are counted since it was last forgotten.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kinformer_workqueue::{ExponentialFailureRateLimiter, RateLimiter};
    ///
    /// let limiter = ExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1));
    /// limiter.when(&"a");
    /// limiter.when(&"a");
    /// assert_eq!(limiter.num_requeues(&"a"), 2);
    /// ```
    fn num_requeues(&self, item: &T) -> u32;
}

/// A rate limiter of any kind, boxed.
///
/// ```
/// use kinformer_workqueue::{BoxRateLimiter, default_controller_rate_limiter};
///
/// let limiter: BoxRateLimiter<String> = Box::new(default_controller_rate_limiter());
/// ```
pub type BoxRateLimiter<T> = Box<dyn RateLimiter<T>>;

/// A limiter behind a reference or a pointer is the limiter itself.
macro_rules! forward_limiter {
    ($($ptr:ty),*) => {$(
        impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for $ptr {
            fn when(&self, item: &T) -> Duration {
                (**self).when(item)
            }
            fn forget(&self, item: &T) {
                (**self).forget(item)
            }
            fn num_requeues(&self, item: &T) -> u32 {
                (**self).num_requeues(item)
            }
        }
    )*};
}

forward_limiter!(&R, Box<R>, Arc<R>);

fn lock<S>(state: &Mutex<S>) -> MutexGuard<'_, S> {
    // Every change under these locks is a single step: a poisoned lock holds nothing half-done.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Per item, `base * 2^retries`, at most `max`: client-go's
/// `ItemExponentialFailureRateLimiter`. The first retry waits `base`.
///
/// ```
/// use std::time::Duration;
/// use kinformer_workqueue::{ExponentialFailureRateLimiter, RateLimiter};
///
/// let limiter = ExponentialFailureRateLimiter::new(Duration::from_millis(100), Duration::from_millis(300));
/// let delays: Vec<_> = (0..4).map(|_| limiter.when(&"a").as_millis()).collect();
/// assert_eq!(delays, [100, 200, 300, 300]);
/// assert_eq!(limiter.when(&"b"), Duration::from_millis(100)); // each item on its own
/// ```
pub struct ExponentialFailureRateLimiter<T> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<T, u32>>,
}

impl<T> fmt::Debug for ExponentialFailureRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExponentialFailureRateLimiter")
            .field("base", &self.base)
            .field("max", &self.max)
            .field("items", &lock(&self.failures).len())
            .finish()
    }
}

impl<T> ExponentialFailureRateLimiter<T> {
    /// Retries of an item wait `base`, `2 * base`, `4 * base`, ..., never more than `max`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let limiter = kinformer_workqueue::ExponentialFailureRateLimiter::<String>::new(
    ///     Duration::from_millis(5),
    ///     Duration::from_secs(1000),
    /// );
    /// ```
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// `base * 2^exponent`, at most `max`, without overflow.
    fn delay(&self, exponent: u32) -> Duration {
        let max = self.max.as_nanos();
        let nanos = 1u128
            .checked_shl(exponent)
            .filter(|_| exponent < 64)
            .and_then(|factor| self.base.as_nanos().checked_mul(factor))
            .map_or(max, |nanos| nanos.min(max));
        // At most `max`'s nanoseconds, so the seconds fit a u64.
        Duration::new(
            (nanos / 1_000_000_000) as u64,
            (nanos % 1_000_000_000) as u32,
        )
    }
}

impl<T: Hash + Eq + Clone + Send> RateLimiter<T> for ExponentialFailureRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let exponent = {
            let mut failures = lock(&self.failures);
            let count = failures.entry(item.clone()).or_insert(0);
            let exponent = *count;
            *count = count.saturating_add(1);
            exponent
        };
        self.delay(exponent)
    }

    fn forget(&self, item: &T) {
        lock(&self.failures).remove(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        lock(&self.failures).get(item).copied().unwrap_or(0)
    }
}

struct Bucket {
    /// Tokens left; below zero once retries are booked ahead.
    tokens: f64,
    /// When `tokens` was last brought up to date; `None` before the first retry (a full bucket).
    last: Option<Instant>,
}

/// One bucket for all items: `qps` retries a second on average, `burst` at once: client-go's
/// `BucketRateLimiter` (over `golang.org/x/time/rate`). Each retry takes a token; when none is
/// left, the retry is booked for when its token will have been refilled. The bucket starts full
/// and refills on tokio's clock. It counts no item: [`forget`](RateLimiter::forget) does
/// nothing and [`num_requeues`](RateLimiter::num_requeues) is 0.
///
/// ```
/// use std::time::Duration;
/// use kinformer_workqueue::{BucketRateLimiter, RateLimiter};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let limiter = BucketRateLimiter::new(4.0, 2).unwrap();
/// assert_eq!(limiter.when(&"a"), Duration::ZERO); // the burst
/// assert_eq!(limiter.when(&"b"), Duration::ZERO);
/// assert_eq!(limiter.when(&"c"), Duration::from_millis(250)); // then 4 a second
/// assert_eq!(limiter.when(&"d"), Duration::from_millis(500));
/// # }
/// ```
pub struct BucketRateLimiter {
    qps: f64,
    burst: u32,
    bucket: Mutex<Bucket>,
}

impl fmt::Debug for BucketRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BucketRateLimiter")
            .field("qps", &self.qps)
            .field("burst", &self.burst)
            .finish()
    }
}

impl BucketRateLimiter {
    /// A full bucket of `burst` tokens, refilled at `qps` tokens a second.
    ///
    /// # Errors
    /// [`Error::InvalidBucket`] unless `qps` is finite and above 0 and `burst` is at least 1
    /// (client-go's limiter would then delay every retry for ever).
    ///
    /// ```
    /// use kinformer_workqueue::BucketRateLimiter;
    ///
    /// assert!(BucketRateLimiter::new(10.0, 100).is_ok());
    /// assert!(BucketRateLimiter::new(0.0, 100).is_err());
    /// assert!(BucketRateLimiter::new(10.0, 0).is_err());
    /// ```
    pub fn new(qps: f64, burst: u32) -> Result<Self, Error> {
        if !(qps.is_finite() && qps > 0.0) || burst == 0 {
            return Err(Error::InvalidBucket { qps, burst });
        }
        Ok(Self {
            qps,
            burst,
            bucket: Mutex::new(Bucket {
                tokens: f64::from(burst),
                last: None,
            }),
        })
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        let now = Instant::now();
        let mut bucket = lock(&self.bucket);
        if let Some(last) = bucket.last {
            let refill = now.saturating_duration_since(last).as_secs_f64() * self.qps;
            bucket.tokens = (bucket.tokens + refill).min(f64::from(self.burst));
        }
        bucket.last = Some(now);
        bucket.tokens -= 1.0;
        if bucket.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::try_from_secs_f64(-bucket.tokens / self.qps).unwrap_or(Duration::MAX)
        }
    }

    fn forget(&self, _item: &T) {}

    fn num_requeues(&self, _item: &T) -> u32 {
        0
    }
}

/// The longest delay of several limiters: client-go's `MaxOfRateLimiter`. Every limiter is
/// asked (so each counts the retry); [`forget`](RateLimiter::forget) forgets in all of them;
/// [`num_requeues`](RateLimiter::num_requeues) is the largest count. With no limiter, no delay.
///
/// ```
/// use std::time::Duration;
/// use kinformer_workqueue::{BucketRateLimiter, ExponentialFailureRateLimiter, MaxOfRateLimiter, RateLimiter};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let limiter = MaxOfRateLimiter::new(vec![
///     Box::new(ExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1))),
///     Box::new(BucketRateLimiter::new(1.0, 1).unwrap()),
/// ]);
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(1)); // the item's own backoff
/// assert_eq!(limiter.when(&"b"), Duration::from_secs(1)); // the bucket is empty
/// # }
/// ```
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<BoxRateLimiter<T>>,
}

impl<T> fmt::Debug for MaxOfRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaxOfRateLimiter")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}

impl<T> MaxOfRateLimiter<T> {
    /// The largest delay of `limiters`.
    ///
    /// ```
    /// use kinformer_workqueue::{BucketRateLimiter, MaxOfRateLimiter};
    ///
    /// let limiter = MaxOfRateLimiter::<String>::new(vec![Box::new(BucketRateLimiter::new(5.0, 10).unwrap())]);
    /// ```
    pub fn new(limiters: Vec<BoxRateLimiter<T>>) -> Self {
        Self { limiters }
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.limiters
            .iter()
            .map(|limiter| limiter.when(item))
            .fold(Duration::ZERO, Duration::max)
    }

    fn forget(&self, item: &T) {
        for limiter in &self.limiters {
            limiter.forget(item);
        }
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.limiters
            .iter()
            .map(|limiter| limiter.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

/// client-go's `DefaultControllerRateLimiter`: the larger of a per-item exponential backoff
/// from 5 ms to 1000 s and one bucket of 10 retries a second with a burst of 100, so one item
/// failing fast backs off alone, and many items failing at once are spread out overall.
///
/// ```
/// use std::time::Duration;
/// use kinformer_workqueue::{RateLimiter, default_controller_rate_limiter};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let limiter = default_controller_rate_limiter();
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(10));
/// assert_eq!(limiter.num_requeues(&"a"), 2);
/// # }
/// ```
pub fn default_controller_rate_limiter<T>() -> MaxOfRateLimiter<T>
where
    T: Hash + Eq + Clone + Send + 'static,
{
    MaxOfRateLimiter::new(vec![
        Box::new(ExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(BucketRateLimiter::new(10.0, 100).expect("10 qps and a burst of 100 are valid")),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Within a microsecond: the bucket computes in floating point, as `x/time/rate` does.
    fn close(a: Duration, b: Duration) -> bool {
        a.abs_diff(b) <= Duration::from_micros(1)
    }

    #[test]
    fn exponential_doubles_per_item_up_to_max_and_forget_starts_over() {
        let limiter = ExponentialFailureRateLimiter::new(ms(5), Duration::from_secs(1000));
        let delays: Vec<Duration> = (0..5).map(|_| limiter.when(&"one")).collect();
        assert_eq!(delays, [ms(5), ms(10), ms(20), ms(40), ms(80)]);
        assert_eq!(limiter.num_requeues(&"one"), 5);
        assert_eq!(limiter.when(&"two"), ms(5));
        assert_eq!(limiter.num_requeues(&"two"), 1);
        limiter.forget(&"one");
        assert_eq!(limiter.num_requeues(&"one"), 0);
        assert_eq!(limiter.when(&"one"), ms(5));
    }

    #[test]
    fn exponential_saturates_at_max_without_overflow() {
        let limiter = ExponentialFailureRateLimiter::new(ms(5), Duration::from_secs(1000));
        let mut last = Duration::ZERO;
        for _ in 0..200 {
            last = limiter.when(&"k");
        }
        assert_eq!(last, Duration::from_secs(1000));
        assert_eq!(limiter.num_requeues(&"k"), 200);

        let huge = ExponentialFailureRateLimiter::new(Duration::MAX, Duration::MAX);
        assert_eq!(huge.when(&1), Duration::MAX);
        assert_eq!(huge.when(&1), Duration::MAX);
        assert_eq!(huge.delay(u32::MAX), Duration::MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_allows_the_burst_then_spaces_retries_at_qps() {
        let limiter = BucketRateLimiter::new(10.0, 3).unwrap();
        let first: Vec<Duration> = (0..5).map(|i| limiter.when(&i)).collect();
        assert_eq!(&first[..3], [Duration::ZERO; 3]);
        assert!(close(first[3], ms(100)), "{first:?}");
        assert!(close(first[4], ms(200)), "{first:?}");
        // 300 ms later three tokens came back, two of them owed already.
        tokio::time::advance(ms(300)).await;
        assert_eq!(limiter.when(&0), Duration::ZERO);
        assert!(close(limiter.when(&0), ms(100)));
        // A long pause refills to the burst, no further.
        tokio::time::advance(Duration::from_secs(60)).await;
        let again: Vec<Duration> = (0..4).map(|i| limiter.when(&i)).collect();
        assert_eq!(&again[..3], [Duration::ZERO; 3]);
        assert!(close(again[3], ms(100)), "{again:?}");
        assert_eq!(RateLimiter::<u8>::num_requeues(&limiter, &0), 0);
    }

    #[test]
    fn bucket_refuses_settings_that_never_allow_a_retry() {
        for (qps, burst) in [
            (0.0, 1),
            (-1.0, 1),
            (f64::NAN, 1),
            (f64::INFINITY, 1),
            (1.0, 0),
        ] {
            assert!(
                matches!(
                    BucketRateLimiter::new(qps, burst),
                    Err(Error::InvalidBucket { .. })
                ),
                "{qps} {burst}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn default_controller_limiter_is_the_larger_of_backoff_and_bucket() {
        let limiter = default_controller_rate_limiter::<String>();
        let hot = "hot".to_string();
        // One item failing: its own backoff, the bucket being full.
        assert_eq!(limiter.when(&hot), ms(5));
        assert_eq!(limiter.when(&hot), ms(10));
        assert_eq!(limiter.num_requeues(&hot), 2);
        // 98 more items drain the burst of 100 at once; the next waits for the bucket.
        for i in 0..98 {
            assert_eq!(limiter.when(&format!("item-{i}")), ms(5));
        }
        assert!(close(limiter.when(&"one-more".to_string()), ms(100)));
        assert!(close(limiter.when(&"and-another".to_string()), ms(200)));
        limiter.forget(&hot);
        assert_eq!(limiter.num_requeues(&hot), 0);
    }

    #[test]
    fn max_of_nothing_waits_nothing_and_forwards_through_pointers() {
        let none = MaxOfRateLimiter::<u8>::new(Vec::new());
        assert_eq!(none.when(&1), Duration::ZERO);
        assert_eq!(none.num_requeues(&1), 0);

        let shared = Arc::new(ExponentialFailureRateLimiter::new(ms(1), ms(8)));
        let by_ref = &*shared;
        assert_eq!(by_ref.when(&1), ms(1));
        let boxed: BoxRateLimiter<u8> = Box::new(Arc::clone(&shared));
        assert_eq!(boxed.when(&1), ms(2));
        assert_eq!(shared.num_requeues(&1), 2);
        boxed.forget(&1);
        assert_eq!(RateLimiter::num_requeues(&shared, &1), 0);
    }
}
