//! Dropping `metadata.managedFields` before an object is cached.
//!
//! Server-side apply's field ownership is written on every object, and in a typed cache it is
//! the most expensive field there is: k8s-openapi keeps `fieldsV1` as a `serde_json::Value`, and
//! each of its small nested maps takes a whole B-tree node. A pod of the simulated cluster (5.4 KB
//! of JSON, with the entries its real writers leave) decodes to 37.6 KB, 41% of it
//! `managedFields`; a pod with two small entries, 13% (`cargo bench -p kinformer-compact --bench
//! forms`, docs/benchmarks.md). Most controllers never read them; client-go's users drop them
//! with a transform, as controller-runtime's `TransformStripManagedFields` does, and so can
//! ours.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::{DynamicObject, PartialObjectMetadata};

/// An object whose `metadata.managedFields` can be read and dropped: every k8s-openapi type,
/// [`DynamicObject`] and [`PartialObjectMetadata`].
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
/// use kinformer_core::ManagedFields;
///
/// let mut cm = ConfigMap::default();
/// cm.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
/// assert!(cm.has_managed_fields());
/// cm.clear_managed_fields();
/// assert!(!cm.has_managed_fields());
/// ```
pub trait ManagedFields {
    /// Whether `metadata.managedFields` is set.
    fn has_managed_fields(&self) -> bool;

    /// Removes `metadata.managedFields`.
    fn clear_managed_fields(&mut self);
}

fn meta_has(meta: &ObjectMeta) -> bool {
    meta.managed_fields.is_some()
}

impl<T> ManagedFields for T
where
    T: k8s_openapi::Metadata<Ty = ObjectMeta>,
{
    fn has_managed_fields(&self) -> bool {
        meta_has(self.metadata())
    }

    fn clear_managed_fields(&mut self) {
        self.metadata_mut().managed_fields = None;
    }
}

impl ManagedFields for DynamicObject {
    fn has_managed_fields(&self) -> bool {
        meta_has(&self.metadata)
    }

    fn clear_managed_fields(&mut self) {
        self.metadata.managed_fields = None;
    }
}

impl ManagedFields for PartialObjectMetadata {
    fn has_managed_fields(&self) -> bool {
        meta_has(&self.metadata)
    }

    fn clear_managed_fields(&mut self) {
        self.metadata.managed_fields = None;
    }
}

/// A transform that drops `metadata.managedFields`: pass it to an informer's `transform` (or
/// the facade builder's `strip_managed_fields`). The object is changed in place when nothing
/// else holds it, as is the case for a freshly decoded one; a shared object without managed
/// fields is returned as it is, and only a shared one with them is copied.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::Pod;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
/// use kinformer_core::{ManagedFields, strip_managed_fields};
///
/// let mut pod = Pod::default();
/// pod.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
///     manager: Some("kubectl".into()),
///     ..ManagedFieldsEntry::default()
/// }]);
/// let pod = strip_managed_fields(Arc::new(pod));
/// assert!(!pod.has_managed_fields());
/// ```
pub fn strip_managed_fields<K: ManagedFields + Clone>(mut obj: Arc<K>) -> Arc<K> {
    if !obj.has_managed_fields() {
        return obj;
    }
    Arc::make_mut(&mut obj).clear_managed_fields();
    obj
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    use super::*;

    fn with_fields() -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some("web-0".into());
        pod.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        pod
    }

    #[test]
    fn a_fresh_object_is_changed_in_place() {
        let obj = Arc::new(with_fields());
        let before = Arc::as_ptr(&obj);
        let stripped = strip_managed_fields(obj);
        assert_eq!(Arc::as_ptr(&stripped), before);
        assert!(!stripped.has_managed_fields());
        assert_eq!(stripped.metadata.name.as_deref(), Some("web-0"));
    }

    #[test]
    fn a_shared_object_is_copied_and_the_other_holder_keeps_its_fields() {
        let obj = Arc::new(with_fields());
        let other = Arc::clone(&obj);
        let stripped = strip_managed_fields(obj);
        assert!(!stripped.has_managed_fields());
        assert!(other.has_managed_fields());
    }

    #[test]
    fn a_shared_object_without_fields_is_not_copied() {
        let obj = Arc::new(Pod::default());
        let other = Arc::clone(&obj);
        let same = strip_managed_fields(obj);
        assert!(Arc::ptr_eq(&same, &other));
    }

    #[test]
    fn dynamic_and_metadata_objects_lose_them_too() {
        let mut dynamic = DynamicObject::default();
        dynamic.metadata.managed_fields = Some(Vec::new());
        assert!(!strip_managed_fields(Arc::new(dynamic)).has_managed_fields());
        let mut meta = PartialObjectMetadata::default();
        meta.metadata.managed_fields = Some(Vec::new());
        assert!(!strip_managed_fields(Arc::new(meta)).has_managed_fields());
    }
}
