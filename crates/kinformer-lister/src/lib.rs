//! Listers: typed queries on a cache, answered from memory without API calls.
//!
//! A [`Lister`] reads any cache that implements `kinformer-core`'s [`IndexRead`] (the
//! indexer's reader, a `kinformer_indexer::Indexer` itself, or your own cache): this crate depends
//! on `kinformer-core` only.
//!
//! - [`list`](Lister::list) every object matching a label selector;
//! - [`namespaced`](Lister::namespaced) gives a [`NamespaceLister`] whose `list` uses the
//!   namespace index (the one [`IndexRead::namespace_index`] names, by convention
//!   [`NAMESPACE_INDEX`](kinformer_core::NAMESPACE_INDEX)) when the cache has one, so its cost is
//!   proportional to that namespace's objects, and scans the cache otherwise;
//! - [`get`](NamespaceLister::get) by name, with an [`Error::NotFound`] that names the resource,
//!   worded as the API server words it (`pods "web-0" not found`);
//! - [`by_index`](Lister::by_index) for any index value; the cache's refusal (an unknown index)
//!   comes back as it is, a [`StoreError`] inside [`Error::Index`].
//!
//! An empty selector matches everything; a selector that can match nothing
//! ([`LabelSelector::nothing`]) returns nothing without looking at the cache. The namespace `""`
//! means all namespaces, as in client-go.
//!
//! # What it does not do
//! It never calls the API server and never waits for the cache to sync: ask the informer's
//! `has_synced` first. It does not copy objects: results are the cached `Arc`s, in no particular
//! order.
//!
//! # Example
//! A lister over an indexer filled by hand:
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_core::{ApiResource, CacheWrite, LabelSelector};
//! use kinformer_indexer::{Indexer, index};
//! use kinformer_lister::{Error, Lister};
//!
//! let pod = |ns: &str, name: &str, app: &str| -> Arc<Pod> {
//!     Arc::new(serde_json::from_value(serde_json::json!({
//!         "metadata": {"namespace": ns, "name": name, "labels": {"app": app}}
//!     })).unwrap())
//! };
//! let indexer = Indexer::with_indexers([(index::NAMESPACE.to_string(), index::namespace())]).unwrap();
//! indexer.upsert(pod("shop", "web-0", "web")).unwrap();
//! indexer.upsert(pod("shop", "db-0", "db")).unwrap();
//! indexer.upsert(pod("blog", "web-0", "web")).unwrap();
//!
//! let pods = Lister::for_resource(indexer.reader(), &ApiResource::of::<Pod>());
//! let web: LabelSelector = "app=web".parse().unwrap();
//! assert_eq!(pods.list(&web).len(), 2);
//! assert_eq!(pods.namespaced("shop").list(&web).len(), 1);
//! assert_eq!(pods.namespaced("shop").list(&LabelSelector::everything()).len(), 2);
//! assert!(pods.namespaced("blog").get("web-0").is_ok());
//! let err = pods.namespaced("blog").get("db-0").unwrap_err();
//! assert!(matches!(err, Error::NotFound { .. }));
//! assert_eq!(err.to_string(), r#"pods "db-0" not found"#);
//! assert!(matches!(pods.by_index("nope", "x"), Err(Error::Index(_))));
//! ```

#![forbid(unsafe_code)]

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use kinformer_core::{ApiResource, IndexRead, LabelSelector, Object, ObjectKey, StoreError};

/// What a lister can report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No cached object has this name (in this namespace). Not retryable as such: the cache
    /// reflects the server; if the informer has not synced yet, wait for it and ask again.
    #[error("{resource} {name:?} not found")]
    NotFound {
        /// The resource, as the lister was told (`pods`, `deployments.apps`).
        resource: Arc<str>,
        /// The namespace searched, `None` for a cluster-scoped get.
        namespace: Option<String>,
        /// The name asked for.
        name: String,
    },
    /// The cache refused an index query, as the cache said it
    /// ([`StoreError::UnknownIndex`] for an unknown index name: add the index or fix the name).
    /// Not retryable.
    #[error(transparent)]
    Index(#[from] StoreError),
}

/// Typed queries over a cache of `K`, for one resource.
pub struct Lister<K, R> {
    reader: R,
    resource: Arc<str>,
    _objects: PhantomData<fn() -> K>,
}

impl<K, R: Clone> Clone for Lister<K, R> {
    fn clone(&self) -> Self {
        Self {
            reader: self.reader.clone(),
            resource: Arc::clone(&self.resource),
            _objects: PhantomData,
        }
    }
}

impl<K, R> fmt::Debug for Lister<K, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lister")
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

impl<K: Object, R: IndexRead<K>> Lister<K, R> {
    /// A lister over `reader`; `resource` names the resource in errors (`pods`).
    pub fn new(reader: R, resource: impl Into<Arc<str>>) -> Self {
        Self {
            reader,
            resource: resource.into(),
            _objects: PhantomData,
        }
    }

    /// A lister over `reader` for `resource`, named as the API server names it in errors: the
    /// plural, with the group after a dot for a grouped resource (`deployments.apps`).
    pub fn for_resource(reader: R, resource: &ApiResource) -> Self {
        let name = if resource.group.is_empty() {
            resource.plural.clone()
        } else {
            format!("{}.{}", resource.plural, resource.group)
        };
        Self::new(reader, name)
    }

    /// The cache this lister reads.
    pub fn reader(&self) -> &R {
        &self.reader
    }

    /// Every cached object whose labels match `selector`, in all namespaces.
    pub fn list(&self, selector: &LabelSelector) -> Vec<Arc<K>> {
        let mut out = Vec::new();
        if selector.is_nothing() {
            return out;
        }
        let everything = selector.is_everything();
        self.reader.for_each(&mut |o| {
            if everything || selector.matches(o.labels()) {
                out.push(Arc::clone(o));
            }
        });
        out
    }

    /// The cluster-scoped object `name`.
    pub fn get(&self, name: &str) -> Result<Arc<K>, Error> {
        self.reader
            .get_by_key(ObjectKey::new(None, name).as_str())
            .ok_or_else(|| self.not_found(None, name))
    }

    /// Queries limited to `namespace` (`""`: all namespaces).
    pub fn namespaced(&self, namespace: &str) -> NamespaceLister<'_, K, R> {
        NamespaceLister {
            lister: self,
            namespace: namespace.to_owned(),
        }
    }

    /// The cached objects whose index `index` produced `value`.
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, Error> {
        Ok(self.reader.by_index(index, value)?)
    }

    fn not_found(&self, namespace: Option<&str>, name: &str) -> Error {
        Error::NotFound {
            resource: Arc::clone(&self.resource),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        }
    }
}

/// Queries limited to one namespace; made by [`Lister::namespaced`].
pub struct NamespaceLister<'a, K, R> {
    lister: &'a Lister<K, R>,
    namespace: String,
}

impl<K, R> fmt::Debug for NamespaceLister<'_, K, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NamespaceLister")
            .field("resource", &self.lister.resource)
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl<K: Object, R: IndexRead<K>> NamespaceLister<'_, K, R> {
    /// The namespace's objects whose labels match `selector`. Uses the namespace index when the
    /// cache has one ([`IndexRead::namespace_index`]), and scans the whole cache otherwise.
    pub fn list(&self, selector: &LabelSelector) -> Vec<Arc<K>> {
        if self.namespace.is_empty() {
            return self.lister.list(selector);
        }
        let mut out = Vec::new();
        if selector.is_nothing() {
            return out;
        }
        let everything = selector.is_everything();
        let reader = &self.lister.reader;
        let ns = self.namespace.as_str();
        let indexed = reader.namespace_index().is_some_and(|index| {
            reader
                .for_each_indexed(index, ns, &mut |o| {
                    if everything || selector.matches(o.labels()) {
                        out.push(Arc::clone(o));
                    }
                })
                .is_ok()
        });
        if !indexed {
            tracing::trace!(namespace = ns, "no namespace index: scanning the cache");
            out.clear();
            reader.for_each(&mut |o| {
                if o.namespace() == Some(ns) && (everything || selector.matches(o.labels())) {
                    out.push(Arc::clone(o));
                }
            });
        }
        out
    }

    /// The object `name` in this namespace.
    pub fn get(&self, name: &str) -> Result<Arc<K>, Error> {
        self.lister
            .reader
            .get_by_key(ObjectKey::new(Some(&self.namespace), name).as_str())
            .ok_or_else(|| self.lister.not_found(Some(&self.namespace), name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinformer_core::{DynamicObject, Scope};
    use kinformer_indexer::Indexer;

    #[test]
    fn resources_are_named_as_the_api_server_names_them() {
        let reader = Indexer::<DynamicObject>::new().reader();
        let core = ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced);
        let apps = ApiResource::new("apps", "v1", "Deployment", "deployments", Scope::Namespaced);
        let pods = Lister::for_resource(reader.clone(), &core);
        assert_eq!(
            pods.get("x").unwrap_err().to_string(),
            r#"pods "x" not found"#
        );
        let deployments = Lister::for_resource(reader, &apps);
        let err = deployments.namespaced("ns").get("x").unwrap_err();
        assert_eq!(err.to_string(), r#"deployments.apps "x" not found"#);
    }
}
