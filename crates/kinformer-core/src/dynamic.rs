//! Objects whose Rust type is not known at compile time, and metadata-only objects.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::object::{HasObjectMeta, object_from_meta};
use crate::{ApiResource, OwnerRef};

/// `apiVersion` and `kind`, as every Kubernetes object carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeMeta {
    /// `apiVersion`, for example `v1` or `apps/v1`.
    #[serde(rename = "apiVersion", default)]
    pub api_version: String,
    /// `kind`, for example `Pod`.
    #[serde(default)]
    pub kind: String,
}

/// An object of any resource: `apiVersion`, `kind` and `metadata` decoded, everything else kept as
/// JSON. Use it for custom resources and for resources chosen at run time.
///
/// ```
/// use kinformer_core::{DynamicObject, Object};
///
/// let obj: DynamicObject = serde_json::from_str(r#"{
///     "apiVersion": "example.com/v1", "kind": "Widget",
///     "metadata": {"name": "w1", "namespace": "default", "resourceVersion": "7"},
///     "spec": {"size": 3}
/// }"#).unwrap();
/// assert_eq!(obj.types.kind, "Widget");
/// assert_eq!(obj.resource_version(), Some("7"));
/// assert_eq!(obj.data["spec"]["size"], 3);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DynamicObject {
    /// `apiVersion` and `kind`.
    #[serde(flatten)]
    pub types: TypeMeta,
    /// `metadata`.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Every other top-level field (`spec`, `status`, `data`, ...), as JSON.
    #[serde(flatten)]
    pub data: serde_json::Value,
}

impl DynamicObject {
    /// An empty object of the given resource with this name, for building objects by hand.
    pub fn new(resource: &ApiResource, name: &str) -> Self {
        Self {
            types: TypeMeta {
                api_version: resource.api_version.clone(),
                kind: resource.kind.clone(),
            },
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            data: serde_json::Value::Object(serde_json::Map::new()),
        }
    }
}

/// An object's `apiVersion`, `kind` and `metadata` alone: what the API server returns to a client
/// that asks for `application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`. Metadata-only
/// informers cache these, at a fraction of the memory of full objects.
///
/// ```
/// use kinformer_core::{Object, PartialObjectMetadata};
///
/// let obj: PartialObjectMetadata = serde_json::from_str(r#"{
///     "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
///     "metadata": {"name": "web-0", "namespace": "shop", "uid": "1f2e"}
/// }"#).unwrap();
/// assert_eq!(obj.uid(), Some("1f2e"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PartialObjectMetadata {
    /// `apiVersion` and `kind`.
    #[serde(flatten)]
    pub types: TypeMeta,
    /// `metadata`.
    #[serde(default)]
    pub metadata: ObjectMeta,
}

impl HasObjectMeta for DynamicObject {
    fn object_meta(&self) -> &ObjectMeta {
        &self.metadata
    }
}

impl HasObjectMeta for PartialObjectMetadata {
    fn object_meta(&self) -> &ObjectMeta {
        &self.metadata
    }
}

object_from_meta!(impl for DynamicObject where);
object_from_meta!(impl for PartialObjectMetadata where);
