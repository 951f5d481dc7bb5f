//! The metadata every layer reads, decoded alone from an object's JSON.

use std::collections::BTreeMap;
use std::fmt;

use kinformer_core::OwnerRef;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::Error;

/// The decoded `metadata` of an object: what [`kinformer_core::Object`] answers, and nothing
/// else. Strings are boxed (no spare capacity).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Meta {
    pub(crate) name: Box<str>,
    pub(crate) namespace: Option<Box<str>>,
    pub(crate) uid: Option<Box<str>>,
    pub(crate) resource_version: Option<Box<str>>,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) owners: Box<[Owner]>,
}

/// One `metadata.ownerReferences` entry, the part [`OwnerRef`] shows.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Owner {
    #[serde(default)]
    api_version: Box<str>,
    #[serde(default)]
    kind: Box<str>,
    #[serde(default)]
    name: Box<str>,
    #[serde(default)]
    uid: Box<str>,
    #[serde(default)]
    controller: Option<bool>,
}

impl Owner {
    pub(crate) fn as_ref(&self) -> OwnerRef<'_> {
        OwnerRef {
            api_version: &self.api_version,
            kind: &self.kind,
            name: &self.name,
            uid: &self.uid,
            controller: self.controller.unwrap_or(false),
        }
    }
}

/// The top level of an object, where only `metadata` is decoded; every other field (`spec`,
/// `status`, ...) is skipped without building anything. Only a JSON object decodes.
struct Envelope {
    metadata: Option<MetaWire>,
}

/// A top-level key, matched without allocating.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum TopField {
    Metadata,
    #[serde(other)]
    Other,
}

impl<'de> Deserialize<'de> for Envelope {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Envelope;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
                let mut metadata = None;
                while let Some(field) = map.next_key::<TopField>()? {
                    match field {
                        TopField::Metadata => metadata = map.next_value()?,
                        TopField::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(Envelope { metadata })
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaWire {
    #[serde(default)]
    name: Option<Box<str>>,
    #[serde(default)]
    namespace: Option<Box<str>>,
    #[serde(default)]
    uid: Option<Box<str>>,
    #[serde(default)]
    resource_version: Option<Box<str>>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    owner_references: Option<Vec<Owner>>,
}

impl Meta {
    /// Decodes the metadata of the object whose JSON is `json`. Fails if `json` is not a JSON
    /// object or its `metadata` has the wrong shape.
    pub(crate) fn decode(json: &str) -> Result<Self, Error> {
        let envelope: Envelope =
            serde_json::from_str(json).map_err(|source| Error::Decode { source })?;
        let Some(m) = envelope.metadata else {
            return Ok(Self::default());
        };
        Ok(Self {
            name: m.name.unwrap_or_default(),
            namespace: m.namespace,
            uid: m.uid,
            resource_version: m.resource_version,
            labels: m.labels.unwrap_or_default(),
            owners: m.owner_references.unwrap_or_default().into_boxed_slice(),
        })
    }

    pub(crate) fn owner_references(&self) -> Vec<OwnerRef<'_>> {
        self.owners.iter().map(Owner::as_ref).collect()
    }
}

/// Implements [`kinformer_core::Object`] (from `meta()`), [`Form`](crate::Form) (from `typed()`) and
/// a sharing `Clone` for a form whose fields are `inner: Arc<..>` and `_kind: PhantomData<K>`.
macro_rules! object_from_meta {
    ($ty:ident) => {
        impl<K: 'static> kinformer_core::Object for $ty<K> {
            fn name(&self) -> &str {
                &self.meta().name
            }
            fn namespace(&self) -> Option<&str> {
                self.meta().namespace.as_deref()
            }
            fn uid(&self) -> Option<&str> {
                self.meta().uid.as_deref()
            }
            fn resource_version(&self) -> Option<&str> {
                self.meta().resource_version.as_deref()
            }
            fn labels(&self) -> &std::collections::BTreeMap<String, String> {
                &self.meta().labels
            }
            fn owner_references(&self) -> Vec<kinformer_core::OwnerRef<'_>> {
                self.meta().owner_references()
            }
        }

        impl<K: serde::de::DeserializeOwned + 'static> crate::Form<K> for $ty<K> {
            fn typed(&self) -> Result<K, crate::Error> {
                $ty::typed(self)
            }
        }

        /// A clone shares the object: it costs a reference count, never a copy of the bytes.
        impl<K> Clone for $ty<K> {
            fn clone(&self) -> Self {
                Self {
                    inner: std::sync::Arc::clone(&self.inner),
                    _kind: std::marker::PhantomData,
                }
            }
        }
    };
}
pub(crate) use object_from_meta;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_metadata_and_skips_the_rest() {
        let m = Meta::decode(
            r#"{"spec":{"x":[1,{"y":null}]},"metadata":{"name":"a","namespace":"ns","uid":"u",
            "resourceVersion":"7","labels":{"app":"web"},"annotations":{"big":"..."},
            "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"r1","controller":true}]},
            "status":{"phase":"Running"}}"#,
        )
        .unwrap();
        assert_eq!(&*m.name, "a");
        assert_eq!(m.namespace.as_deref(), Some("ns"));
        assert_eq!(m.uid.as_deref(), Some("u"));
        assert_eq!(m.resource_version.as_deref(), Some("7"));
        assert_eq!(m.labels["app"], "web");
        let owners = m.owner_references();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].kind, "ReplicaSet");
        assert!(owners[0].controller);
    }

    #[test]
    fn missing_or_null_metadata_is_empty_and_non_objects_fail() {
        assert_eq!(Meta::decode("{}").unwrap(), Meta::default());
        assert_eq!(
            Meta::decode(r#"{"metadata":null}"#).unwrap(),
            Meta::default()
        );
        assert_eq!(
            Meta::decode(r#"{"metadata":{"labels":null,"ownerReferences":null}}"#).unwrap(),
            Meta::default()
        );
        for bad in ["[]", "3", "null", r#"{"metadata":{"labels":{"a":1}}}"#, "{"] {
            assert!(
                matches!(Meta::decode(bad), Err(Error::Decode { .. })),
                "{bad}"
            );
        }
    }
}
