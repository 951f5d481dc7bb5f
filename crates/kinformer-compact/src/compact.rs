//! [`Compact`]: an object kept as its raw JSON plus its decoded metadata.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::Error;
use crate::meta::{Meta, object_from_meta};

/// An object of type `K` kept as the JSON it came in, with its metadata decoded: about 6 KB for a
/// 5 KB pod where the typed `Pod` takes some 36 KB, and a decode of the metadata alone where
/// the typed form decodes everything.
///
/// `Compact<K>` implements [`Object`](kinformer_core::Object), so every layer (reflector, delta
/// FIFO, indexer, lister, shared informer) takes it as it takes `K`: keys, resource versions,
/// labels, owner references and namespaces come from the decoded metadata. A handler that needs
/// more calls [`typed`](Self::typed), which decodes the JSON into `K` then and there.
///
/// It decodes with serde from a JSON object (as [`WatchEvent`](kinformer_core::WatchEvent) and
/// [`ObjectList`](kinformer_core::ObjectList) decode their objects), and serializes back to the
/// very same JSON. Both go through `serde_json` (bytes, a reader or a `serde_json::Value`);
/// another serde format is refused when decoding. A clone shares the bytes.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_compact::Compact;
/// use kinformer_core::{Object, ObjectKey};
///
/// let json = br#"{"apiVersion":"v1","kind":"Pod",
///     "metadata":{"name":"web-0","namespace":"shop","resourceVersion":"12","labels":{"app":"web"}},
///     "spec":{"nodeName":"node-1","containers":[{"name":"web","image":"nginx"}]}}"#;
/// let pod = Compact::<Pod>::from_json(json).unwrap();
/// assert_eq!(pod.key(), ObjectKey::new(Some("shop"), "web-0"));
/// assert_eq!(pod.labels()["app"], "web");
///
/// // The rest is decoded when asked for.
/// let typed: Pod = pod.typed().unwrap();
/// assert_eq!(typed.spec.unwrap().node_name.as_deref(), Some("node-1"));
///
/// // It writes back the JSON it came in.
/// assert_eq!(serde_json::to_vec(&pod).unwrap(), json);
/// ```
pub struct Compact<K> {
    inner: Arc<Inner>,
    _kind: PhantomData<fn() -> K>,
}

struct Inner {
    meta: Meta,
    json: Box<RawValue>,
}

impl<K> Compact<K> {
    /// Decodes the metadata of the JSON object `json` and keeps the bytes as they are.
    ///
    /// Fails with [`Error::Decode`] when `json` is not one JSON object, or when its `metadata`
    /// has the wrong shape. The rest of the object is only checked to be JSON: a field of the
    /// wrong type for `K` shows up when [`typed`](Self::typed) is called.
    pub fn from_json(json: &[u8]) -> Result<Self, Error> {
        let raw: Box<RawValue> =
            serde_json::from_slice(json).map_err(|source| Error::Decode { source })?;
        Self::from_raw(raw)
    }

    /// Builds the compact form of a typed object, through its JSON.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_compact::Compact;
    /// use kinformer_core::Object;
    ///
    /// let mut pod = Pod::default();
    /// pod.metadata.name = Some("a".into());
    /// let compact = Compact::from_typed(&pod).unwrap();
    /// assert_eq!(compact.name(), "a");
    /// assert_eq!(compact.typed().unwrap(), pod);
    /// ```
    pub fn from_typed(object: &K) -> Result<Self, Error>
    where
        K: Serialize,
    {
        let raw =
            serde_json::value::to_raw_value(object).map_err(|source| Error::Decode { source })?;
        Self::from_raw(raw)
    }

    pub(crate) fn from_raw(json: Box<RawValue>) -> Result<Self, Error> {
        let meta = Meta::decode(json.get())?;
        Ok(Self {
            inner: Arc::new(Inner { meta, json }),
            _kind: PhantomData,
        })
    }

    /// The object's JSON, exactly as it was received.
    pub fn json(&self) -> &str {
        self.inner.json.get()
    }

    /// Decodes the whole object into `K`. Each call decodes anew; keep the result, or use a
    /// [`DecodedCache`](crate::DecodedCache), when a handler needs it more than once.
    ///
    /// Fails with [`Error::Typed`] when the JSON does not fit `K`.
    pub fn typed(&self) -> Result<K, Error>
    where
        K: DeserializeOwned,
    {
        serde_json::from_str(self.json()).map_err(|source| Error::Typed { source })
    }

    pub(crate) fn meta(&self) -> &Meta {
        &self.inner.meta
    }
}

object_from_meta!(Compact);

impl<K> PartialEq for Compact<K> {
    /// Two compact objects are equal when their JSON is the same, byte for byte.
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json()
    }
}

impl<K> Eq for Compact<K> {}

impl<K> fmt::Debug for Compact<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.meta();
        f.debug_struct("Compact")
            .field("namespace", &m.namespace)
            .field("name", &m.name)
            .field("resource_version", &m.resource_version)
            .field("json_bytes", &self.json().len())
            .finish()
    }
}

impl<'de, K> Deserialize<'de> for Compact<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        Self::from_raw(raw).map_err(D::Error::custom)
    }
}

impl<K> Serialize for Compact<K> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.inner.json.serialize(s)
    }
}

// `Compact<K>` is a resource of the same kind as `K`, so that `Api::<Compact<Pod>>::all(client)`
// and `ApiResource::of::<Compact<Pod>>()` name pods.
kinformer_core::resource_of_kind!(Compact);

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use kinformer_core::{ApiResource, Object, WatchEvent};

    #[test]
    fn decodes_inside_a_watch_event_and_writes_the_same_bytes_back() {
        let object = r#"{"metadata":{"name":"a","namespace":"ns","resourceVersion":"3"},"spec":{"containers":[]}}"#;
        let line = format!(r#"{{"type":"MODIFIED","object":{object}}}"#);
        let WatchEvent::Modified(pod) =
            WatchEvent::<Compact<Pod>>::from_json(line.as_bytes()).unwrap()
        else {
            panic!("not a MODIFIED event");
        };
        assert_eq!(pod.json(), object);
        assert_eq!(pod.resource_version(), Some("3"));
        assert_eq!(serde_json::to_string(&*pod).unwrap(), object);
    }

    #[test]
    fn decodes_from_a_json_value_too() {
        let value = serde_json::json!({"metadata": {"name": "a", "labels": {"x": "y"}}});
        let pod: Compact<Pod> = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(pod.labels()["x"], "y");
        assert_eq!(serde_json::to_value(&pod).unwrap(), value);
    }

    #[test]
    fn names_the_same_resource_as_its_type() {
        assert_eq!(ApiResource::of::<Compact<Pod>>(), ApiResource::of::<Pod>());
    }

    #[test]
    fn a_clone_shares_the_bytes() {
        let a = Compact::<Pod>::from_json(br#"{"metadata":{"name":"a"}}"#).unwrap();
        let b = a.clone();
        assert!(std::ptr::eq(a.json(), b.json()));
        assert_eq!(a, b);
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        assert!(matches!(
            Compact::<Pod>::from_json(b"{\"metadata\":"),
            Err(Error::Decode { .. })
        ));
        assert!(matches!(
            Compact::<Pod>::from_json(b"[1]"),
            Err(Error::Decode { .. })
        ));
        let c = Compact::<Pod>::from_json(br#"{"metadata":{"name":"a"},"spec":7}"#).unwrap();
        assert_eq!(c.name(), "a");
        assert!(matches!(c.typed(), Err(Error::Typed { .. })));
    }
}
