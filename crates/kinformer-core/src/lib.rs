//! The shared vocabulary of kinformer: everything two layers of the informer pipeline must agree on.
//!
//! `kinformer-core` holds the types that travel between the client, the reflector, the delta FIFO,
//! the indexer, the shared informer and the lister:
//!
//! - [`Object`]: the few facts a layer needs about an object (key, namespace, name, uid,
//!   resourceVersion, labels, owner references). Every k8s-openapi resource type implements it, and
//!   so do [`DynamicObject`] and [`PartialObjectMetadata`]. Layers are generic over it, so a compact
//!   cache form is just another object type.
//! - [`ApiResource`]: group, version, kind, plural and scope, with the list and watch URL paths.
//! - [`ObjectKey`]: the cache key exactly as client-go makes it (`namespace/name`, or `name`).
//! - [`ResourceVersion`]: an opaque version string.
//! - [`WatchEvent`], [`ObjectList`], [`ListParams`], [`WatchParams`]: the list/watch protocol.
//! - [`Delta`], [`DeltaType`], [`DeletedFinalStateUnknown`]: what the delta FIFO hands on, with a
//!   typed tombstone so no handler ever needs a type assertion.
//! - [`LabelSelector`] and [`FieldSelector`]: Kubernetes' selector grammar, parsed, matched, rendered.
//! - [`gather`]: one buffer, used again and again, for the events of a stream that arrive split
//!   across chunks.
//! - [`trim`]: a JSON object without a member (its `metadata.managedFields`), cut out of the
//!   bytes before they are decoded, for decoders whose caller drops it anyway.
//! - The traits where two layers meet, so that no layer depends on another layer's
//!   implementation: [`ListWatch`] (the reflector's source, in [`list_watch`] with its neutral
//!   error and the pager), [`ReflectorStore`] (what the reflector writes into: one [`StoreEvent`] at a
//!   time, the relist protocol among them), [`DeltaQueue`] (what the informer pops from, with the consumer contract
//!   [`apply_popped`]), and the cache's [`CacheRead`], [`IndexRead`] and [`CacheWrite`].
//!
//! It does no IO and pulls in no async runtime. Its errors: [`Error`] for parsing and decoding,
//! [`StoreError`] at the store and cache seams, [`list_watch::Error`] at the list/watch seam.
//!
//! # k8s-openapi
//! This crate enables no Kubernetes version feature of `k8s-openapi`: the final binary chooses one
//! (for example `latest`), as that crate's documentation asks of libraries.
//!
//! # Example
//! ```
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_core::{ApiResource, LabelSelector, Object, ObjectKey};
//!
//! let pod: Pod = serde_json::from_str(
//!     r#"{"metadata":{"name":"web-0","namespace":"shop","labels":{"app":"web"}}}"#,
//! )
//! .unwrap();
//! assert_eq!(pod.key(), ObjectKey::new(Some("shop"), "web-0"));
//!
//! let selector: LabelSelector = "app in (web, api), tier!=db".parse().unwrap();
//! assert!(selector.matches(pod.labels()));
//!
//! let pods = ApiResource::of::<Pod>();
//! assert_eq!(pods.list_path(Some("shop")), "/api/v1/namespaces/shop/pods");
//! ```

mod cache;
mod delta;
mod dynamic;
mod error;
pub mod gather;
mod json;
mod key;
mod list;
pub mod list_watch;
mod managed_fields;
mod object;
mod progress;
mod queue;
mod resource;
pub mod selector;
pub mod shard;
mod status;
mod store;
pub mod trim;
pub mod validation;
mod version;
mod watch;

pub use cache::{CacheOp, CacheRead, CacheWrite, IndexRead, NAMESPACE_INDEX, Replaced};
pub use delta::{DeletedFinalStateUnknown, Delta, DeltaObject, DeltaType};
pub use dynamic::{DynamicObject, PartialObjectMetadata, TypeMeta};
pub use error::{Error, StoreError};
pub use json::JsonDecoder;
pub use key::ObjectKey;
pub use list::{
    ItemRun, JsonListSplitter, ListPage, ListParams, ObjectList, ResourceVersionMatch, WatchParams,
};
pub use list_watch::{BoxListWatch, ListWatch, WatchStream};
pub use managed_fields::{ManagedFields, strip_managed_fields};
pub use object::{Object, OwnerRef, missing_identity};
pub use progress::{ListProgress, ProgressTracker};
pub use queue::{
    Applied, DeltaQueue, Notification, PopFuture, PopIntoFuture, Popped, PoppedItem, ReplaceStep,
    apply_popped,
};
pub use resource::{ApiResource, Scope};
pub use selector::{FieldSelector, LabelSelector};
pub use status::{Status, StatusCause, StatusDetails};
pub use store::{ReflectorStore, ReflectorStoreExt, StoreEvent};
pub use version::{NotComparable, ResourceVersion};
pub use watch::{Bookmark, INITIAL_EVENTS_END_ANNOTATION, WatchEvent};

/// `k8s-openapi`, re-exported so that users name the same version of it that kinformer uses.
pub use k8s_openapi;
