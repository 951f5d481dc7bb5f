//! Object keys: `namespace/name` for namespaced objects, `name` for cluster-scoped ones.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

use crate::Error;

/// The key under which the cache stores an object, exactly as client-go's
/// `MetaNamespaceKeyFunc` makes it: `namespace/name`, or `name` when the object has no namespace.
///
/// Cloning is cheap (a reference count): keys are copied into queues and indexes on every event.
///
/// ```
/// use kinformer_core::ObjectKey;
///
/// let key = ObjectKey::new(Some("default"), "nginx");
/// assert_eq!(key.as_str(), "default/nginx");
/// assert_eq!(key.namespace(), Some("default"));
/// assert_eq!(key.name(), "nginx");
///
/// let node = ObjectKey::new(None, "node-1");
/// assert_eq!(node.as_str(), "node-1");
///
/// let parsed: ObjectKey = "default/nginx".parse().unwrap();
/// assert_eq!(parsed, key);
/// assert!("a/b/c".parse::<ObjectKey>().is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(Arc<str>);

impl ObjectKey {
    /// Makes the key of an object with this namespace and name. An empty namespace counts as none,
    /// as in client-go.
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        match namespace {
            Some(ns) if !ns.is_empty() => {
                // Keys are made on every event: join the parts on the stack so that the `Arc<str>`
                // is the only allocation. Kubernetes names fit (namespace ≤ 63, name ≤ 253 bytes).
                let len = ns.len() + 1 + name.len();
                let mut buf = [0u8; 320];
                if len > buf.len() {
                    return Self(format!("{ns}/{name}").into());
                }
                buf[..ns.len()].copy_from_slice(ns.as_bytes());
                buf[ns.len()] = b'/';
                buf[ns.len() + 1..len].copy_from_slice(name.as_bytes());
                let joined = std::str::from_utf8(&buf[..len])
                    .expect("two strings joined by an ASCII '/' are UTF-8");
                Self(joined.into())
            }
            _ => Self(name.into()),
        }
    }

    /// Splits a key into namespace and name, the inverse of [`ObjectKey::new`] (client-go's
    /// `SplitMetaNamespaceKey`). Unlike client-go, an empty name or an empty namespace before a `/`
    /// is rejected: no object has either.
    pub fn split(key: &str) -> Result<(Option<&str>, &str), Error> {
        let invalid = |reason| Error::InvalidKey {
            key: key.to_owned(),
            reason,
        };
        match key.split_once('/') {
            None if key.is_empty() => Err(invalid("the name is empty")),
            None => Ok((None, key)),
            Some((_, name)) if name.contains('/') => Err(invalid("more than one '/'")),
            Some(("", _)) => Err(invalid("the namespace before '/' is empty")),
            Some((_, "")) => Err(invalid("the name after '/' is empty")),
            Some((ns, name)) => Ok((Some(ns), name)),
        }
    }

    /// The key as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The namespace part, if any.
    pub fn namespace(&self) -> Option<&str> {
        self.0.split_once('/').map(|(ns, _)| ns)
    }

    /// The name part.
    pub fn name(&self) -> &str {
        self.0.split_once('/').map_or(&self.0, |(_, name)| name)
    }
}

impl std::str::FromStr for ObjectKey {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        Self::split(s)?;
        Ok(Self(s.into()))
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl Borrow<str> for ObjectKey {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ObjectKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn makes_keys_like_client_go() {
        assert_eq!(ObjectKey::new(Some("ns"), "a").as_str(), "ns/a");
        let long = "n".repeat(400);
        assert_eq!(
            ObjectKey::new(Some("ns"), &long).as_str(),
            format!("ns/{long}")
        );
        let fits = "é".repeat(100);
        assert_eq!(ObjectKey::new(Some("ns"), &fits).name(), fits);
        assert_eq!(ObjectKey::new(Some(""), "a").as_str(), "a");
        assert_eq!(ObjectKey::new(None, "a").as_str(), "a");
    }

    #[test]
    fn splits_and_rejects_malformed_keys() {
        type Split<'a> = Result<(Option<&'a str>, &'a str), &'a str>;
        let cases: &[(&str, Split<'_>)] = &[
            ("a", Ok((None, "a"))),
            ("ns/a", Ok((Some("ns"), "a"))),
            ("", Err("the name is empty")),
            ("ns/", Err("the name after '/' is empty")),
            ("/a", Err("the namespace before '/' is empty")),
            ("a/b/c", Err("more than one '/'")),
            ("//", Err("more than one '/'")),
        ];
        for (input, expected) in cases {
            let got = ObjectKey::split(input);
            match (got, expected) {
                (Ok(got), Ok(want)) => assert_eq!(got, *want, "{input}"),
                (Err(Error::InvalidKey { key, reason }), Err(want)) => {
                    assert_eq!(key, *input);
                    assert_eq!(reason, *want, "{input}");
                }
                (got, want) => panic!("{input}: got {got:?}, want {want:?}"),
            }
        }
    }

    proptest! {
        #[test]
        fn split_inverts_new(ns in proptest::option::of("[a-z0-9-]{1,20}"), name in "[a-z0-9.-]{1,40}") {
            let key = ObjectKey::new(ns.as_deref(), &name);
            prop_assert_eq!(ObjectKey::split(key.as_str()).unwrap(), (ns.as_deref(), name.as_str()));
            prop_assert_eq!(key.namespace(), ns.as_deref());
            prop_assert_eq!(key.name(), name.as_str());
            prop_assert_eq!(key.as_str().parse::<ObjectKey>().unwrap(), key);
        }

        #[test]
        fn split_never_panics(s in ".*") {
            let _ = ObjectKey::split(&s);
        }
    }
}
