//! Shard ranges: slices of the 64-bit FNV-1a hash space of an object's uid or namespace, as
//! KEP-5866's `shardSelector` names them (`shardRange(object.metadata.uid, '0x0',
//! '0x8000000000000000')`, terms joined by `||`).
//!
//! One [`ShardRanges`] value says which objects a replica owns, whether the server filters
//! (the ranges go in `shardSelector`) or the client does ([`ShardRanges::contains`], the same
//! hash): one configuration gives the same assignment on every cluster.
//!
//! ```
//! use kinformer_core::shard::{ShardKey, ShardRanges};
//!
//! // Member 1 of 4: the second quarter of the hash space.
//! let mine = ShardRanges::split(ShardKey::Uid, 4, 1);
//! assert_eq!(
//!     mine.to_selector(),
//!     "shardRange(object.metadata.uid, '0x4000000000000000', '0x8000000000000000')"
//! );
//! assert_eq!(ShardRanges::parse(&mine.to_selector()).unwrap(), mine);
//! ```

use std::fmt;

use crate::{Error, Object};

/// 2^64: the exclusive end of the whole hash space.
const SPACE_END: u128 = 1 << 64;

/// The 64-bit FNV-1a hash of `bytes` (offset basis `0xcbf29ce484222325`, prime
/// `0x100000001b3`), the hash KEP-5866 places objects with.
///
/// ```
/// use kinformer_core::shard::fnv1a64;
/// assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
/// assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
/// assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
/// ```
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Which field of an object is hashed to place it in a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ShardKey {
    /// `object.metadata.uid`: objects spread evenly, each on its own.
    #[default]
    Uid,
    /// `object.metadata.namespace`: a namespace's objects stay together (cluster-scoped objects
    /// hash the empty string).
    Namespace,
}

impl ShardKey {
    /// The field path as `shardRange()` names it: `object.metadata.uid`.
    pub fn path(self) -> &'static str {
        match self {
            Self::Uid => "object.metadata.uid",
            Self::Namespace => "object.metadata.namespace",
        }
    }

    /// The hash of `object`'s field. An object without a uid (one made by hand, never one
    /// from a server) hashes the empty string.
    pub fn hash<K: Object + ?Sized>(self, object: &K) -> u64 {
        let field = match self {
            Self::Uid => object.uid(),
            Self::Namespace => object.namespace(),
        };
        fnv1a64(field.unwrap_or_default().as_bytes())
    }
}

/// One slice `[start, end)` of the hash space; `end` may be 2^64 (the space's end).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardRange {
    start: u64,
    end: u128,
}

impl ShardRange {
    /// The whole hash space, `[0x0, 0x10000000000000000)`.
    pub const FULL: Self = Self {
        start: 0,
        end: SPACE_END,
    };

    /// `[start, end)`; `None` unless `start < end <= 2^64`.
    ///
    /// ```
    /// use kinformer_core::shard::ShardRange;
    /// assert!(ShardRange::new(0, 1 << 63).is_some());
    /// assert!(ShardRange::new(5, 5).is_none());
    /// assert!(ShardRange::new(0, (1 << 64) + 1).is_none());
    /// ```
    pub fn new(start: u64, end: u128) -> Option<Self> {
        (u128::from(start) < end && end <= SPACE_END).then_some(Self { start, end })
    }

    /// The inclusive start.
    pub fn start(self) -> u64 {
        self.start
    }

    /// The exclusive end (at most 2^64).
    pub fn end(self) -> u128 {
        self.end
    }

    /// Whether `hash` lies in the range.
    pub fn contains(self, hash: u64) -> bool {
        hash >= self.start && u128::from(hash) < self.end
    }
}

impl fmt::Display for ShardRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:#x}, {:#x})", self.start, self.end)
    }
}

/// A set of shard ranges over one [`ShardKey`]: what a replica owns. Kept sorted, disjoint and
/// with touching ranges merged, so equal sets compare equal and print the same selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ShardRanges {
    key: ShardKey,
    ranges: Vec<ShardRange>,
}

impl ShardRanges {
    /// The set of `ranges` (in any order, overlapping or not) over `key`.
    pub fn new(key: ShardKey, ranges: impl IntoIterator<Item = ShardRange>) -> Self {
        let mut ranges: Vec<ShardRange> = ranges.into_iter().collect();
        ranges.sort_unstable();
        let mut merged: Vec<ShardRange> = Vec::with_capacity(ranges.len());
        for r in ranges {
            match merged.last_mut() {
                Some(last) if u128::from(r.start) <= last.end => last.end = last.end.max(r.end),
                _ => merged.push(r),
            }
        }
        Self {
            key,
            ranges: merged,
        }
    }

    /// No range: owns nothing.
    pub fn none(key: ShardKey) -> Self {
        Self::new(key, [])
    }

    /// The whole hash space: owns everything.
    pub fn all(key: ShardKey) -> Self {
        Self::new(key, [ShardRange::FULL])
    }

    /// Member `index` of `members` in an even split of the hash space into contiguous ranges
    /// (`index` counts from 0): every member that knows the same count derives the same
    /// assignment, and the members' ranges cover the space exactly once.
    ///
    /// ```
    /// use kinformer_core::shard::{ShardKey, ShardRanges};
    /// let thirds: Vec<_> = (0..3).map(|i| ShardRanges::split(ShardKey::Uid, 3, i)).collect();
    /// let all = thirds.iter().fold(ShardRanges::none(ShardKey::Uid), |a, b| a.union(b));
    /// assert_eq!(all, ShardRanges::all(ShardKey::Uid));
    /// assert!(thirds[0].intersection(&thirds[1]).is_empty());
    /// ```
    ///
    /// # Panics
    /// When `members` is 0 or `index >= members`.
    pub fn split(key: ShardKey, members: usize, index: usize) -> Self {
        assert!(index < members, "member {index} of {members}");
        let at = |i: usize| SPACE_END * i as u128 / members as u128;
        let start = u64::try_from(at(index)).expect("a start below 2^64");
        Self::new(key, ShardRange::new(start, at(index + 1)))
    }

    /// The field the ranges hash.
    pub fn key(&self) -> ShardKey {
        self.key
    }

    /// The ranges, sorted and disjoint.
    pub fn ranges(&self) -> &[ShardRange] {
        &self.ranges
    }

    /// Whether the set owns nothing.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Whether the set covers the whole hash space.
    pub fn is_all(&self) -> bool {
        self.ranges == [ShardRange::FULL]
    }

    /// Whether `hash` lies in one of the ranges.
    pub fn contains_hash(&self, hash: u64) -> bool {
        let i = self.ranges.partition_point(|r| r.end <= u128::from(hash));
        self.ranges.get(i).is_some_and(|r| r.contains(hash))
    }

    /// Whether the set owns `object`: its key field's hash lies in one of the ranges.
    pub fn contains<K: Object + ?Sized>(&self, object: &K) -> bool {
        self.contains_hash(self.key.hash(object))
    }

    /// The ranges of both sets (over this set's key).
    #[must_use]
    pub fn union(&self, other: &Self) -> Self {
        Self::new(self.key, self.ranges.iter().chain(&other.ranges).copied())
    }

    /// The ranges of this set that `other` lacks.
    #[must_use]
    pub fn difference(&self, other: &Self) -> Self {
        let mut out = Vec::new();
        for r in &self.ranges {
            let mut start = u128::from(r.start);
            for o in &other.ranges {
                let (os, oe) = (u128::from(o.start), o.end);
                if oe <= start || os >= r.end {
                    continue;
                }
                if os > start {
                    out.extend(ShardRange::new(start as u64, os));
                }
                start = start.max(oe);
            }
            if start < r.end {
                out.extend(ShardRange::new(start as u64, r.end));
            }
        }
        Self::new(self.key, out)
    }

    /// The ranges both sets hold.
    #[must_use]
    pub fn intersection(&self, other: &Self) -> Self {
        self.difference(&self.difference(other))
    }

    /// The fraction of the hash space the set covers, from 0 to 1.
    pub fn fraction(&self) -> f64 {
        let covered: u128 = self
            .ranges
            .iter()
            .map(|r| r.end - u128::from(r.start))
            .sum();
        covered as f64 / SPACE_END as f64
    }

    /// The `shardSelector` query value: one `shardRange()` term per range, joined by ` || `;
    /// empty for an empty set (which a caller must not send: it would select everything).
    pub fn to_selector(&self) -> String {
        self.ranges
            .iter()
            .map(|r| {
                format!(
                    "shardRange({}, '{:#x}', '{:#x}')",
                    self.key.path(),
                    r.start,
                    r.end
                )
            })
            .collect::<Vec<_>>()
            .join(" || ")
    }

    /// Parses a `shardSelector` value: `shardRange(<path>, '<0xhex>', '<0xhex>')` terms joined
    /// by `||`, all over the same path. A malformed one is an [`Error::InvalidSelector`].
    ///
    /// ```
    /// use kinformer_core::shard::{ShardKey, ShardRanges};
    /// let s = ShardRanges::parse(
    ///     "shardRange(object.metadata.namespace, '0x0', '0x8') || shardRange(object.metadata.namespace, '0x8', '0x10')",
    /// ).unwrap();
    /// assert_eq!(s.key(), ShardKey::Namespace);
    /// assert_eq!(s.ranges().len(), 1);
    /// assert!(ShardRanges::parse("shardRange(metadata.uid, '0x0', '0x1')").is_err());
    /// ```
    pub fn parse(input: &str) -> Result<Self, Error> {
        let fail = |position: usize, message: &str| Error::InvalidSelector {
            input: input.to_string(),
            position,
            message: message.to_string(),
        };
        let mut key = None;
        let mut ranges = Vec::new();
        let mut offset = 0;
        for term in input.split("||") {
            let at = offset + (term.len() - term.trim_start().len());
            offset += term.len() + 2;
            let body = term
                .trim()
                .strip_prefix("shardRange(")
                .and_then(|t| t.strip_suffix(')'))
                .ok_or_else(|| fail(at, "expected shardRange(<path>, '<0xstart>', '<0xend>')"))?;
            let parts: Vec<&str> = body.split(',').map(str::trim).collect();
            let [path, start, end] = parts[..] else {
                return Err(fail(at, "shardRange takes three arguments"));
            };
            let this = match path {
                "object.metadata.uid" => ShardKey::Uid,
                "object.metadata.namespace" => ShardKey::Namespace,
                _ => {
                    return Err(fail(
                        at,
                        "the path must be object.metadata.uid or object.metadata.namespace",
                    ));
                }
            };
            if key.is_some_and(|k| k != this) {
                return Err(fail(at, "every shardRange must hash the same path"));
            }
            key = Some(this);
            let bound = |s: &str| -> Option<u128> {
                let hex = s.strip_prefix("'0x")?.strip_suffix('\'')?;
                if hex.is_empty() || hex.len() > 17 {
                    return None;
                }
                u128::from_str_radix(hex, 16).ok()
            };
            let (Some(s), Some(e)) = (bound(start), bound(end)) else {
                return Err(fail(at, "bounds are single-quoted hex with a 0x prefix"));
            };
            let range = u64::try_from(s)
                .ok()
                .and_then(|s| ShardRange::new(s, e))
                .ok_or_else(|| fail(at, "a range needs start < end <= 0x10000000000000000"))?;
            ranges.push(range);
        }
        Ok(Self::new(key.unwrap_or_default(), ranges))
    }
}

impl fmt::Display for ShardRanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ranges.is_empty() {
            return f.write_str("no shard range");
        }
        f.write_str(&self.to_selector())
    }
}

/// Whatever acts on a set of shard ranges: a sharded informer, a worker pool. Shard membership
/// (a group of replicas coordinating through Leases) tells it what it owns, and relies on the
/// promise below to hand ranges over without two replicas acting on one at once.
///
/// ```
/// use std::sync::Mutex;
/// use kinformer_core::shard::{ShardKey, ShardOwner, ShardRanges};
///
/// #[derive(Default)]
/// struct Remember(Mutex<Option<ShardRanges>>);
///
/// #[async_trait::async_trait]
/// impl ShardOwner for Remember {
///     async fn set_ranges(&self, owned: ShardRanges) {
///         *self.0.lock().unwrap() = Some(owned);
///     }
/// }
/// # futures_util::future::FutureExt::now_or_never(async {
/// let owner = Remember::default();
/// owner.set_ranges(ShardRanges::split(ShardKey::Uid, 2, 0)).await;
/// assert!(owner.0.lock().unwrap().as_ref().unwrap().contains_hash(0));
/// # }).unwrap();
/// ```
#[async_trait::async_trait]
pub trait ShardOwner: Send + Sync {
    /// From now on the owner acts on `owned` only. Returns once nothing of the ranges it gave up
    /// is acted on any more (a sharded informer: their objects have left the cache and its
    /// handlers were told, as deletes), so that the caller may let another replica take them.
    /// Ranges newly owned may still be loading when it returns (their list has begun).
    async fn set_ranges(&self, owned: ShardRanges);
}

#[async_trait::async_trait]
impl<T: ShardOwner + ?Sized> ShardOwner for std::sync::Arc<T> {
    async fn set_ranges(&self, owned: ShardRanges) {
        (**self).set_ranges(owned).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(ranges: &[(u64, u128)]) -> ShardRanges {
        ShardRanges::new(
            ShardKey::Uid,
            ranges.iter().map(|&(s, e)| ShardRange::new(s, e).unwrap()),
        )
    }

    #[test]
    fn touching_and_overlapping_ranges_merge() {
        assert_eq!(set(&[(10, 20), (0, 10), (15, 30)]), set(&[(0, 30)]));
        assert_eq!(set(&[(0, 5), (6, 9)]).ranges().len(), 2);
    }

    #[test]
    fn the_full_range_prints_its_end_as_two_to_the_64() {
        assert_eq!(
            ShardRanges::all(ShardKey::Uid).to_selector(),
            "shardRange(object.metadata.uid, '0x0', '0x10000000000000000')"
        );
    }

    #[test]
    fn malformed_selectors_are_refused() {
        for bad in [
            "",
            "shardRange(object.metadata.uid, '0x0', '0x1') ||",
            "shardRange(object.metadata.uid, \"0x0\", \"0x1\")",
            "shardRange(object.metadata.uid, '0', '0x1')",
            "shardRange(object.metadata.uid, '0x1', '0x1')",
            "shardRange(object.metadata.uid, '0x0', '0x10000000000000001')",
            "shardRange(object.metadata.name, '0x0', '0x1')",
            "shardRange(object.metadata.uid, '0x0')",
            "shardRange(object.metadata.uid, '0x0', '0x1') || shardRange(object.metadata.namespace, '0x1', '0x2')",
            "hashRange(object.metadata.uid, '0x0', '0x1')",
        ] {
            assert!(ShardRanges::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    fn arb_set() -> impl Strategy<Value = ShardRanges> {
        prop::collection::vec((any::<u64>(), any::<u64>()), 0..5).prop_map(|pairs| {
            ShardRanges::new(
                ShardKey::Uid,
                pairs.into_iter().filter_map(|(a, b)| {
                    let (lo, hi) = (a.min(b), a.max(b));
                    ShardRange::new(lo, u128::from(hi) + 1)
                }),
            )
        })
    }

    proptest! {
        #[test]
        fn set_operations_agree_with_membership(a in arb_set(), b in arb_set(), h in any::<u64>()) {
            let (ia, ib) = (a.contains_hash(h), b.contains_hash(h));
            prop_assert_eq!(a.union(&b).contains_hash(h), ia || ib);
            prop_assert_eq!(a.difference(&b).contains_hash(h), ia && !ib);
            prop_assert_eq!(a.intersection(&b).contains_hash(h), ia && ib);
            // Bounds of the ranges are where mistakes hide.
            for r in a.ranges() {
                prop_assert!(a.contains_hash(r.start()));
                prop_assert_eq!(b.contains_hash(r.start()), b.ranges().iter().any(|x| x.contains(r.start())));
            }
        }

        #[test]
        fn selectors_round_trip(a in arb_set()) {
            if !a.is_empty() {
                prop_assert_eq!(ShardRanges::parse(&a.to_selector()).unwrap(), a);
            }
        }

        #[test]
        fn even_splits_cover_the_space_once(n in 1usize..40, h in any::<u64>()) {
            let owners = (0..n).filter(|&i| ShardRanges::split(ShardKey::Uid, n, i).contains_hash(h)).count();
            prop_assert_eq!(owners, 1);
        }
    }
}
