//! The object abstraction every layer is generic over.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::ObjectKey;

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

/// The few facts about a Kubernetes object that the informer layers need.
///
/// Every k8s-openapi resource type implements it (through `k8s_openapi::Metadata`), and so do
/// [`DynamicObject`](crate::DynamicObject) and [`PartialObjectMetadata`](crate::PartialObjectMetadata).
/// A cache form of an object (raw JSON bytes plus decoded metadata, say) implements it directly and
/// then works with every layer unchanged.
///
/// Objects travel between layers as `Arc<K>`, hence the `Send + Sync + 'static` bound.
///
/// ```
/// use kinformer_core::{Object, ObjectKey};
/// use std::collections::BTreeMap;
///
/// /// A hand-made object type: only what the cache needs.
/// struct Lease { namespace: String, name: String, labels: BTreeMap<String, String> }
///
/// impl Object for Lease {
///     fn name(&self) -> &str { &self.name }
///     fn namespace(&self) -> Option<&str> { Some(&self.namespace) }
///     fn uid(&self) -> Option<&str> { None }
///     fn resource_version(&self) -> Option<&str> { None }
///     fn labels(&self) -> &BTreeMap<String, String> { &self.labels }
/// }
///
/// let lease = Lease { namespace: "kube-system".into(), name: "leader".into(), labels: BTreeMap::new() };
/// assert_eq!(lease.key(), ObjectKey::new(Some("kube-system"), "leader"));
/// assert!(lease.owner_references().is_empty());
/// ```
pub trait Object: Send + Sync + 'static {
    /// Which parser kinformer's decoders use for this type's JSON. `serde_json` unless the type
    /// says otherwise; k8s-openapi's types use [`JsonDecoder::Tape`](crate::JsonDecoder::Tape),
    /// which gives their `Vec`s no spare capacity.
    const JSON_DECODER: crate::JsonDecoder = crate::JsonDecoder::SerdeJson;

    /// `metadata.name` (empty if the object has none).
    fn name(&self) -> &str;

    /// `metadata.namespace`, `None` for cluster-scoped objects.
    fn namespace(&self) -> Option<&str>;

    /// `metadata.uid`.
    fn uid(&self) -> Option<&str>;

    /// `metadata.resourceVersion`.
    fn resource_version(&self) -> Option<&str>;

    /// `metadata.labels` (an empty map when there are none).
    fn labels(&self) -> &BTreeMap<String, String>;

    /// `metadata.ownerReferences`. The default says there are none.
    fn owner_references(&self) -> Vec<OwnerRef<'_>> {
        Vec::new()
    }

    /// The cache key, `namespace/name` or `name`, as client-go's `MetaNamespaceKeyFunc` makes it.
    fn key(&self) -> ObjectKey {
        ObjectKey::new(self.namespace(), self.name())
    }
}

/// A borrowed view of one `metadata.ownerReferences` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerRef<'a> {
    /// The owner's apiVersion.
    pub api_version: &'a str,
    /// The owner's kind.
    pub kind: &'a str,
    /// The owner's name.
    pub name: &'a str,
    /// The owner's uid.
    pub uid: &'a str,
    /// Whether this owner is the managing controller.
    pub controller: bool,
}

/// The view of a k8s-openapi owner reference, for a form that keeps `OwnerReference`s of its
/// own: an absent `controller` is `false`.
///
/// ```
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
/// use kinformer_core::OwnerRef;
///
/// let owner = OwnerReference {
///     api_version: "apps/v1".into(),
///     kind: "ReplicaSet".into(),
///     name: "web-5d4f".into(),
///     uid: "6f1c".into(),
///     ..OwnerReference::default()
/// };
/// let view = OwnerRef::from(&owner);
/// assert_eq!((view.kind, view.name, view.controller), ("ReplicaSet", "web-5d4f", false));
/// ```
impl<'a> From<&'a OwnerReference> for OwnerRef<'a> {
    fn from(o: &'a OwnerReference) -> Self {
        OwnerRef {
            api_version: &o.api_version,
            kind: &o.kind,
            name: &o.name,
            uid: &o.uid,
            controller: o.controller.unwrap_or(false),
        }
    }
}

/// Reads the [`Object`] facts out of an `ObjectMeta`. Shared by every type that carries one.
pub(crate) mod meta {
    use super::*;

    pub(crate) fn name(m: &ObjectMeta) -> &str {
        m.name.as_deref().unwrap_or_default()
    }

    pub(crate) fn labels(m: &ObjectMeta) -> &BTreeMap<String, String> {
        m.labels.as_ref().unwrap_or(&NO_LABELS)
    }

    pub(crate) fn owner_references(m: &ObjectMeta) -> Vec<OwnerRef<'_>> {
        m.owner_references
            .iter()
            .flatten()
            .map(OwnerRef::from)
            .collect()
    }
}

/// Implements [`Object`] for a type from the way it reaches its `ObjectMeta`.
macro_rules! object_from_meta {
    (impl$(<$g:ident>)? for $ty:ty where $($bounds:tt)*) => {
        $crate::object::object_from_meta!(@ [] impl$(<$g>)? for $ty where $($bounds)*);
    };
    (tape impl$(<$g:ident>)? for $ty:ty where $($bounds:tt)*) => {
        $crate::object::object_from_meta!(
            @ [const JSON_DECODER: $crate::JsonDecoder = $crate::JsonDecoder::Tape;]
            impl$(<$g>)? for $ty where $($bounds)*
        );
    };
    (@ [$($extra:tt)*] impl$(<$g:ident>)? for $ty:ty where $($bounds:tt)*) => {
        impl$(<$g>)? $crate::Object for $ty where $($bounds)* {
            $($extra)*
            fn name(&self) -> &str {
                $crate::object::meta::name(self.object_meta())
            }
            fn namespace(&self) -> Option<&str> {
                self.object_meta().namespace.as_deref()
            }
            fn uid(&self) -> Option<&str> {
                self.object_meta().uid.as_deref()
            }
            fn resource_version(&self) -> Option<&str> {
                self.object_meta().resource_version.as_deref()
            }
            fn labels(&self) -> &BTreeMap<String, String> {
                $crate::object::meta::labels(self.object_meta())
            }
            fn owner_references(&self) -> Vec<OwnerRef<'_>> {
                $crate::object::meta::owner_references(self.object_meta())
            }
        }
    };
}
pub(crate) use object_from_meta;

/// Access to an `ObjectMeta`, for the types this crate implements [`Object`] for.
pub(crate) trait HasObjectMeta {
    fn object_meta(&self) -> &ObjectMeta;
}

impl<T> HasObjectMeta for T
where
    T: k8s_openapi::Metadata<Ty = ObjectMeta>,
{
    fn object_meta(&self) -> &ObjectMeta {
        self.metadata()
    }
}

// k8s-openapi's types keep no `RawValue`: they take the tape parser, which sizes their `Vec`s.
object_from_meta!(tape impl<T> for T where T: k8s_openapi::Metadata<Ty = ObjectMeta> + Send + Sync + 'static);

/// What `object` lacks that every object the API server sends has: a `metadata.name`, and for a
/// namespaced resource (`namespaced`) a `metadata.namespace`. `None` when nothing is missing. A
/// decoder refuses such an object rather than let a cache file it under an empty key; it reads
/// the decoded object, so the JSON is parsed once.
///
/// ```
/// use kinformer_core::{DynamicObject, missing_identity};
///
/// let mut o = DynamicObject::default();
/// assert_eq!(missing_identity(&o, false), Some("metadata.name"));
/// o.metadata.name = Some("a".into());
/// assert_eq!(missing_identity(&o, false), None);
/// assert_eq!(missing_identity(&o, true), Some("metadata.namespace"));
/// ```
pub fn missing_identity<K: Object + ?Sized>(object: &K, namespaced: bool) -> Option<&'static str> {
    if object.name().is_empty() {
        return Some("metadata.name");
    }
    if namespaced && object.namespace().is_none_or(str::is_empty) {
        return Some("metadata.namespace");
    }
    None
}
