//! Resource versions: opaque strings.

use std::fmt;
use std::sync::Arc;

/// A `metadata.resourceVersion` or a list's resourceVersion.
///
/// Kubernetes says clients must treat resource versions as opaque: they may be compared for
/// equality and passed back to the server, never ordered. This type offers exactly that. Cloning is
/// cheap.
///
/// ```
/// use kinformer_core::ResourceVersion;
///
/// let rv = ResourceVersion::from("12345");
/// assert_eq!(rv.as_str(), "12345");
/// assert_eq!(rv, ResourceVersion::from("12345".to_string()));
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ResourceVersion(Arc<str>);

impl ResourceVersion {
    /// The version as the server wrote it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
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
