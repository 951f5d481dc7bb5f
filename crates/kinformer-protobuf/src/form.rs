//! [`CompactMessage`]: an object kept as its protobuf message, plus the metadata every layer
//! reads.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::serde::de::{DeserializeOwned, Error as _};
use k8s_openapi::serde::ser::Error as _;
use k8s_openapi::serde::{Deserialize, Deserializer, Serialize, Serializer};
use kinformer_core::{Object, OwnerRef};

use crate::Error;
use crate::convert::Protobuf;
use crate::convert::direct::{self, Merge};

/// An object of the built-in kind `K` kept as the protobuf message it came in, with its metadata
/// decoded: the compact form over protobuf. A realistic 5 KB (as JSON) pod keeps some 3.5 KB of
/// message and its metadata where the typed `Pod` takes some 36 KB of heap, and costs a decode
/// of the metadata alone where the typed form decodes everything.
///
/// `CompactMessage<K>` implements [`Object`], so every layer (reflector, delta FIFO, indexer,
/// lister, shared informer) takes it as it takes `K`. A handler that needs more calls
/// [`typed`](Self::typed), which decodes the message into `K` then and there (through the same
/// decoder a typed informer uses).
///
/// The client decodes it from protobuf lists and watches when its configuration asks for
/// protobuf (`ObjectEncoding::Protobuf` or `ObjectEncoding::ProtobufWherePossible`): the kind's
/// codec ([`codec`](crate::convert::codec)) knows the form. Against a server that answers in JSON
/// it still works, decoded from JSON into `K` and encoded into the message, which costs more
/// than the typed form; a client that speaks JSON should cache `K` or
/// `kinformer_compact::Compact<K>` instead. It serializes as `K`'s JSON.
///
/// Decoding checks that the bytes are a well-formed message and that its `metadata` is valid;
/// a field of the rest that does not fit `K` (invalid UTF-8 in a string, say) shows up when
/// [`typed`](Self::typed) is called.
///
/// ```
/// use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
/// use kinformer_core::{Object, ObjectKey};
/// use kinformer_protobuf::CompactMessage;
/// use kinformer_protobuf::convert::Protobuf;
///
/// let mut pod = Pod::default();
/// pod.metadata.name = Some("web-0".into());
/// pod.metadata.namespace = Some("shop".into());
/// pod.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
/// pod.spec = Some(PodSpec {
///     node_name: Some("node-1".into()),
///     containers: vec![Container { name: "web".into(), ..Container::default() }],
///     ..PodSpec::default()
/// });
/// let mut message = Vec::new();
/// pod.encode(&mut message);
///
/// let compact = CompactMessage::<Pod>::from_message(&message)?;
/// assert_eq!(compact.key(), ObjectKey::new(Some("shop"), "web-0"));
/// assert_eq!(compact.labels()["app"], "web");
/// assert_eq!(compact.message(), message.as_slice());
///
/// // The rest is decoded when asked for.
/// let typed: Pod = compact.typed()?;
/// assert_eq!(typed.spec.unwrap().node_name.as_deref(), Some("node-1"));
/// # Ok::<(), kinformer_protobuf::Error>(())
/// ```
pub struct CompactMessage<K> {
    inner: Arc<Inner>,
    _kind: PhantomData<fn() -> K>,
}

struct Inner {
    meta: Meta,
    message: Box<[u8]>,
}

/// What [`Object`] answers, and nothing else. Strings are boxed (no spare capacity).
#[derive(Debug, Default)]
struct Meta {
    name: Box<str>,
    namespace: Option<Box<str>>,
    uid: Option<Box<str>>,
    resource_version: Option<Box<str>>,
    labels: BTreeMap<String, String>,
    owners: Box<[OwnerReference]>,
}

/// `ObjectMeta`'s field numbers that [`Meta`] keeps (from `generated.proto` of apimachinery's
/// `meta/v1`); every other field (annotations, managed fields, ...) is skipped unread.
const META_FIELDS: [u32; 6] = [
    1,  // name
    3,  // namespace
    5,  // uid
    6,  // resourceVersion
    11, // labels
    13, // ownerReferences
];

/// The field number of `metadata` in every built-in kind's message.
const METADATA: u32 = 1;

impl Meta {
    /// Decodes the metadata of a kind's message: field 1 (`metadata`) and, in it, the fields
    /// [`META_FIELDS`] names. Walks the whole message, so bytes that are not a message fail.
    fn decode(message: &[u8]) -> Result<Self, Error> {
        let mut meta = ObjectMeta::default();
        direct::fields(message, 0, |tag, wire, r, depth| {
            if tag != METADATA {
                return r.skip(wire, depth);
            }
            direct::fields(r.bytes(wire)?, depth, |tag, wire, r, depth| {
                if META_FIELDS.contains(&tag) {
                    meta.merge_field(tag, wire, r, depth)
                } else {
                    r.skip(wire, depth)
                }
            })
        })?;
        Ok(Self {
            name: meta.name.unwrap_or_default().into_boxed_str(),
            namespace: meta.namespace.map(String::into_boxed_str),
            uid: meta.uid.map(String::into_boxed_str),
            resource_version: meta.resource_version.map(String::into_boxed_str),
            labels: meta.labels.unwrap_or_default(),
            owners: meta.owner_references.unwrap_or_default().into_boxed_slice(),
        })
    }
}

impl<K> CompactMessage<K> {
    /// Decodes the metadata of `message`, the kind's own message (inside the envelope, no
    /// magic), and keeps a copy of the bytes.
    ///
    /// Fails with [`Error::Malformed`] when the bytes are not a protobuf message or its
    /// metadata is not valid.
    pub fn from_message(message: &[u8]) -> Result<Self, Error> {
        let meta = Meta::decode(message)?;
        Ok(Self {
            inner: Arc::new(Inner {
                meta,
                message: message.into(),
            }),
            _kind: PhantomData,
        })
    }

    /// The object's message, exactly as it was received.
    pub fn message(&self) -> &[u8] {
        &self.inner.message
    }

    fn meta(&self) -> &Meta {
        &self.inner.meta
    }
}

impl<K: Protobuf> CompactMessage<K> {
    /// Builds the compact form of a typed object, through its message.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kinformer_core::Object;
    /// use kinformer_protobuf::CompactMessage;
    ///
    /// let mut settings = ConfigMap::default();
    /// settings.metadata.name = Some("settings".into());
    /// let compact = CompactMessage::from_typed(&settings);
    /// assert_eq!(compact.name(), "settings");
    /// assert_eq!(compact.typed()?, settings);
    /// # Ok::<(), kinformer_protobuf::Error>(())
    /// ```
    pub fn from_typed(object: &K) -> Self {
        let mut message = Vec::new();
        object.encode(&mut message);
        match Self::from_message(&message) {
            Ok(compact) => compact,
            Err(e) => unreachable!("a message just encoded decodes: {e}"),
        }
    }

    /// Decodes the whole message into `K`. Each call decodes anew; keep the result (or use
    /// `kinformer_compact::DecodedCache`) when a handler needs it more than once.
    ///
    /// Fails when the message does not fit `K`, with the error [`Protobuf::decode`] gives.
    pub fn typed(&self) -> Result<K, Error> {
        K::decode(self.message())
    }
}

impl<K: 'static> Object for CompactMessage<K> {
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
    fn labels(&self) -> &BTreeMap<String, String> {
        &self.meta().labels
    }
    fn owner_references(&self) -> Vec<OwnerRef<'_>> {
        self.meta().owners.iter().map(OwnerRef::from).collect()
    }
}

/// A clone shares the object: it costs a reference count, never a copy of the bytes.
impl<K> Clone for CompactMessage<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            _kind: PhantomData,
        }
    }
}

impl<K> PartialEq for CompactMessage<K> {
    /// Two compact objects are equal when their messages are the same, byte for byte.
    fn eq(&self, other: &Self) -> bool {
        self.message() == other.message()
    }
}

impl<K> Eq for CompactMessage<K> {}

impl<K> fmt::Debug for CompactMessage<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.meta();
        f.debug_struct("CompactMessage")
            .field("namespace", &m.namespace)
            .field("name", &m.name)
            .field("resource_version", &m.resource_version)
            .field("message_bytes", &self.message().len())
            .finish()
    }
}

/// From `K`'s serialized form (JSON, as a server that cannot answer in protobuf sends it):
/// decoded into `K`, then encoded into the message.
impl<'de, K: Protobuf + DeserializeOwned> Deserialize<'de> for CompactMessage<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let typed = K::deserialize(d).map_err(D::Error::custom)?;
        Ok(Self::from_typed(&typed))
    }
}

/// As `K` serializes: the message is decoded into `K` first.
impl<K: Protobuf + Serialize> Serialize for CompactMessage<K> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.typed().map_err(S::Error::custom)?.serialize(s)
    }
}

// `CompactMessage<K>` is a resource of the same kind as `K`, so that
// `Api::<CompactMessage<Pod>>::all(client)` and `ApiResource::of::<CompactMessage<Pod>>()`
// name pods.
kinformer_core::resource_of_kind!(CompactMessage);

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use kinformer_core::ApiResource;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web-0", "namespace": "shop", "uid": "u-1", "resourceVersion": "42",
                "labels": {"app": "web", "tier": "front"},
                "annotations": {"note": "kept in the message only"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web-abc", "uid": "rs-1", "controller": true}],
                "managedFields": [{"manager": "kubectl", "operation": "Apply",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
            },
            "spec": {"nodeName": "node-1", "containers": [{"name": "web", "image": "nginx"}]},
            "status": {"phase": "Running"},
        }))
        .unwrap()
    }

    fn message(object: &impl Protobuf) -> Vec<u8> {
        let mut out = Vec::new();
        object.encode(&mut out);
        out
    }

    #[test]
    fn keeps_what_every_layer_reads_and_the_message_for_the_rest() {
        let pod = pod();
        let bytes = message(&pod);
        let compact = CompactMessage::<Pod>::from_message(&bytes).unwrap();
        assert_eq!(compact.name(), "web-0");
        assert_eq!(compact.namespace(), Some("shop"));
        assert_eq!(compact.uid(), Some("u-1"));
        assert_eq!(compact.resource_version(), Some("42"));
        assert_eq!(compact.labels(), pod.metadata.labels.as_ref().unwrap());
        let owners = compact.owner_references();
        assert_eq!(owners.len(), 1);
        assert_eq!((owners[0].kind, owners[0].name), ("ReplicaSet", "web-abc"));
        assert!(owners[0].controller);
        assert_eq!(compact.message(), bytes.as_slice());
        assert_eq!(compact.typed().unwrap(), pod);
    }

    #[test]
    fn reads_the_same_metadata_as_the_typed_object_of_another_kind() {
        let deployment = Deployment {
            metadata: pod().metadata,
            ..Deployment::default()
        };
        let compact = CompactMessage::<Deployment>::from_message(&message(&deployment)).unwrap();
        assert_eq!(compact.key(), deployment.key());
        assert_eq!(compact.labels(), deployment.labels());
        assert_eq!(compact.typed().unwrap(), deployment);
    }

    #[test]
    fn metadata_fields_it_does_not_keep_are_not_decoded() {
        // Managed fields whose embedded JSON is not JSON: the typed decode refuses them, the
        // compact form never reads them.
        let mut pod = pod();
        pod.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            fields_v1: Some(FieldsV1(serde_json::json!({"f:a": {}}))),
            ..ManagedFieldsEntry::default()
        }]);
        let mut bytes = message(&pod);
        let at = bytes
            .windows(b"f:a".len())
            .position(|w| w == b"f:a")
            .unwrap();
        bytes[at - 1] = b'!';
        let compact = CompactMessage::<Pod>::from_message(&bytes).unwrap();
        assert_eq!(compact.name(), "web-0");
        assert!(matches!(compact.typed(), Err(Error::EmbeddedJson { .. })));
    }

    #[test]
    fn bytes_that_are_not_a_message_are_refused() {
        let bytes = message(&pod());
        for cut in [1, 2, bytes.len() / 2, bytes.len() - 1] {
            assert!(
                matches!(
                    CompactMessage::<Pod>::from_message(&bytes[..cut]),
                    Err(Error::Malformed(_))
                ),
                "cut at {cut}"
            );
        }
        // `metadata` as a varint rather than a message.
        assert!(matches!(
            CompactMessage::<Pod>::from_message(&[0x08, 0x01]),
            Err(Error::Malformed(_))
        ));
        assert_eq!(CompactMessage::<Pod>::from_message(&[]).unwrap().name(), "");
    }

    #[test]
    fn goes_through_json_as_its_kind_and_names_its_kinds_resource() {
        let pod = pod();
        let compact = CompactMessage::from_typed(&pod);
        let json = serde_json::to_value(&compact).unwrap();
        assert_eq!(json, serde_json::to_value(&pod).unwrap());
        let back: CompactMessage<Pod> = serde_json::from_value(json).unwrap();
        assert_eq!(back, compact);
        assert_eq!(
            ApiResource::of::<CompactMessage<Pod>>(),
            ApiResource::of::<Pod>()
        );
    }

    #[test]
    fn a_clone_shares_the_message() {
        let a = CompactMessage::from_typed(&pod());
        let b = a.clone();
        assert!(std::ptr::eq(a.message(), b.message()));
    }
}
