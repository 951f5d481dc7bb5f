//! Resource versions: opaque strings that Kubernetes 1.35 made comparable.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

/// A `metadata.resourceVersion` or a list's resourceVersion.
///
/// Kubernetes long said clients must treat resource versions as opaque: compared for equality and
/// passed back to the server, never ordered. Since 1.35 (KEP-5504) a resource version that is a
/// decimal integer may be ordered: [`compare`](Self::compare) does that, and answers an error for
/// a version that is not one, never a guess. Cloning is cheap.
///
/// ```
/// use std::cmp::Ordering;
/// use kinformer_core::ResourceVersion;
///
/// let rv = ResourceVersion::from("12345");
/// assert_eq!(rv.as_str(), "12345");
/// assert_eq!(rv, ResourceVersion::from("12345".to_string()));
/// assert_eq!(rv.compare(&ResourceVersion::from("9999")), Ok(Ordering::Greater));
/// assert!(rv.compare(&ResourceVersion::from("opaque-7")).is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ResourceVersion(Arc<str>);

impl ResourceVersion {
    /// The version as the server wrote it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this version may be ordered: a decimal integer without a sign or leading zeros,
    /// as KEP-5504 defines comparable versions.
    pub fn is_comparable(&self) -> bool {
        comparable(&self.0)
    }

    /// Orders two versions as the API server does since 1.35 (KEP-5504): both must be decimal
    /// integers without leading zeros; the longer is the greater, and equal lengths compare digit
    /// by digit, so versions of any size compare exactly.
    ///
    /// # Errors
    /// [`NotComparable`] naming the version that is not such an integer: a server that makes
    /// opaque versions cannot be asked "is the cache at least this fresh".
    pub fn compare(&self, other: &ResourceVersion) -> Result<Ordering, NotComparable> {
        for v in [self, other] {
            if !v.is_comparable() {
                return Err(NotComparable { version: v.clone() });
            }
        }
        Ok(self
            .0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.cmp(&other.0)))
    }
}

fn comparable(s: &str) -> bool {
    match s.as_bytes() {
        [] => false,
        [b'0'] => true,
        [b'0', ..] => false,
        digits => digits.iter().all(u8::is_ascii_digit),
    }
}

/// A resource version that cannot be ordered: not a decimal integer (KEP-5504). Not retryable:
/// the server makes opaque versions, and freshness cannot be judged against it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resource version {version} cannot be ordered: it is not a decimal integer")]
pub struct NotComparable {
    /// The version that is not comparable.
    pub version: ResourceVersion,
}

impl From<&str> for ResourceVersion {
    fn from(s: &str) -> Self {
        Self(s.into())
    }
}

impl From<String> for ResourceVersion {
    fn from(s: String) -> Self {
        Self(s.into())
    }
}

impl fmt::Display for ResourceVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ResourceVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl AsRef<str> for ResourceVersion {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rv(s: &str) -> ResourceVersion {
        ResourceVersion::from(s)
    }

    #[test]
    fn integers_compare_by_length_then_digits_and_nothing_else_compares() {
        assert_eq!(rv("10").compare(&rv("9")), Ok(Ordering::Greater));
        assert_eq!(rv("123").compare(&rv("124")), Ok(Ordering::Less));
        assert_eq!(rv("0").compare(&rv("0")), Ok(Ordering::Equal));
        let big = "18446744073709551616123";
        assert_eq!(
            rv(big).compare(&rv("18446744073709551615")),
            Ok(Ordering::Greater)
        );
        for bad in ["", "01", "-1", "+1", "1.0", "abc", " 1"] {
            let err = rv(bad).compare(&rv("1")).unwrap_err();
            assert_eq!(err.version, rv(bad), "{bad:?}");
            assert!(rv("1").compare(&rv(bad)).is_err(), "{bad:?}");
            assert!(!rv(bad).is_comparable());
        }
    }
}
