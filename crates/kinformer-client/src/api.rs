//! The list/watch trait the reflector consumes, its boxed form, the HTTP implementation for one
//! resource, and the pager that walks every page of a list.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use kinformer_core::{
    ApiResource, DynamicObject, ListParams, ObjectList, PartialObjectMetadata, ResourceVersion,
    Scope, WatchParams,
};
use serde::de::DeserializeOwned;

use crate::client::{ACCEPT_JSON, ACCEPT_METADATA, ACCEPT_METADATA_LIST};
use crate::{Client, Error, WatchStream};

/// The default page size of [`list_all`] and [`Pager`], as client-go's pager uses.
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// Lists and watches one kind of object: all the reflector needs from the network.
///
/// Dyn-compatible, so that a run-time choice (the HTTP [`Api`], a recorded-fixture client, one
/// backed by another Kubernetes library) can hide behind a [`BoxListWatch`]. Implementations are
/// `Send + Sync` and their futures are `Send`.
///
/// ```
/// use std::sync::Arc;
/// use async_trait::async_trait;
/// use futures_util::StreamExt;
/// use kinformer_client::{BoxListWatch, Error, ListWatch, WatchStream};
/// use kinformer_core::{DynamicObject, ListParams, ObjectList, WatchParams};
///
/// /// Serves a fixed snapshot and a watch that ends at once.
/// struct Fixture(Vec<Arc<DynamicObject>>);
///
/// #[async_trait]
/// impl ListWatch<DynamicObject> for Fixture {
///     async fn list(&self, _: &ListParams) -> Result<ObjectList<DynamicObject>, Error> {
///         Ok(ObjectList { items: self.0.clone(), resource_version: "1".into(), continue_token: None, remaining_item_count: None })
///     }
///     async fn watch(&self, _: &WatchParams) -> Result<WatchStream<DynamicObject>, Error> {
///         Ok(futures_util::stream::empty().boxed())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let lw = BoxListWatch::new(Fixture(vec![Arc::new(DynamicObject::default())]));
/// let all = kinformer_client::list_all(&lw, &ListParams::default(), 500).await.unwrap();
/// assert_eq!(all.items.len(), 1);
/// # }
/// ```
#[async_trait]
pub trait ListWatch<K>: Send + Sync {
    /// Lists one page (`limit`/`continue` in `params` select it).
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, Error>;

    /// Opens a watch. The stream ends cleanly when the server closes it, or with one error.
    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<K>, Error>;
}

#[async_trait]
impl<K, T: ListWatch<K> + ?Sized> ListWatch<K> for &T {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, Error> {
        (**self).list(params).await
    }
    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<K>, Error> {
        (**self).watch(params).await
    }
}

#[async_trait]
impl<K, T: ListWatch<K> + ?Sized> ListWatch<K> for Arc<T> {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, Error> {
        (**self).list(params).await
    }
    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<K>, Error> {
        (**self).watch(params).await
    }
}

#[async_trait]
impl<K, T: ListWatch<K> + ?Sized> ListWatch<K> for Box<T> {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, Error> {
        (**self).list(params).await
    }
    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<K>, Error> {
        (**self).watch(params).await
    }
}

/// Any [`ListWatch`] behind one type, chosen at run time. Cheap to clone.
pub struct BoxListWatch<K>(Arc<dyn ListWatch<K>>);

impl<K> BoxListWatch<K> {
    /// Boxes an implementation.
    pub fn new(inner: impl ListWatch<K> + 'static) -> Self {
        Self(Arc::new(inner))
    }
}

impl<K> Clone for BoxListWatch<K> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<K> fmt::Debug for BoxListWatch<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BoxListWatch")
    }
}

#[async_trait]
impl<K> ListWatch<K> for BoxListWatch<K> {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, Error> {
        self.0.list(params).await
    }
    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<K>, Error> {
        self.0.watch(params).await
    }
}

/// Full objects or metadata only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Full,
    Metadata,
}

/// The HTTP [`ListWatch`] of one resource, in one namespace or across all of them.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_client::{Api, Client, ListWatch};
/// use kinformer_core::{ApiResource, DynamicObject, ListParams, Scope};
///
/// # async fn run() -> Result<(), kinformer_client::Error> {
/// let client = Client::try_default()?;
/// let pods: Api<Pod> = Api::namespaced(client.clone(), "shop");
/// let page = pods.list(&ListParams { limit: Some(50), ..Default::default() }).await?;
///
/// let widgets = ApiResource::new("example.com", "v1", "Widget", "widgets", Scope::Namespaced);
/// let all_widgets = Api::<DynamicObject>::all_with(client, &widgets);
/// # Ok(()) }
/// ```
pub struct Api<K> {
    client: Client,
    resource: ApiResource,
    namespace: Option<String>,
    form: Form,
    _kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Api<K> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            resource: self.resource.clone(),
            namespace: self.namespace.clone(),
            form: self.form,
            _kind: PhantomData,
        }
    }
}

impl<K> fmt::Debug for Api<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Api")
            .field("resource", &self.resource)
            .field("namespace", &self.namespace)
            .field("metadata_only", &(self.form == Form::Metadata))
            .finish()
    }
}

impl<K> Api<K> {
    /// Objects of `resource` decoded as `K` (for typed custom resources), in `namespace` or in
    /// all namespaces when `None`. The namespace is ignored for cluster-scoped resources.
    pub fn with_resource(client: Client, resource: ApiResource, namespace: Option<&str>) -> Self {
        let namespace = match resource.scope {
            Scope::Namespaced => namespace.map(str::to_owned),
            Scope::Cluster => None,
        };
        Self {
            client,
            resource,
            namespace,
            form: Form::Full,
            _kind: PhantomData,
        }
    }

    /// The resource.
    pub fn resource(&self) -> &ApiResource {
        &self.resource
    }

    /// The namespace, `None` for all namespaces.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }
}

impl<K: k8s_openapi::Resource> Api<K>
where
    K::Scope: 'static,
{
    /// Every object of this type, in all namespaces (or cluster-wide).
    pub fn all(client: Client) -> Self {
        Self::with_resource(client, ApiResource::of::<K>(), None)
    }

    /// Objects of this type in one namespace.
    pub fn namespaced(client: Client, namespace: &str) -> Self {
        Self::with_resource(client, ApiResource::of::<K>(), Some(namespace))
    }

    /// Objects of this type in the client's default namespace.
    pub fn default_namespaced(client: Client) -> Self {
        let ns = client.default_namespace().to_owned();
        Self::with_resource(client, ApiResource::of::<K>(), Some(&ns))
    }
}

impl Api<DynamicObject> {
    /// Every object of a resource chosen at run time, in all namespaces.
    pub fn all_with(client: Client, resource: &ApiResource) -> Self {
        Self::with_resource(client, resource.clone(), None)
    }

    /// Objects of a resource chosen at run time, in one namespace.
    pub fn namespaced_with(client: Client, namespace: &str, resource: &ApiResource) -> Self {
        Self::with_resource(client, resource.clone(), Some(namespace))
    }
}

impl Api<PartialObjectMetadata> {
    /// The metadata alone of a resource's objects (`as=PartialObjectMetadata`), in `namespace` or
    /// all namespaces.
    pub fn metadata(client: Client, resource: &ApiResource, namespace: Option<&str>) -> Self {
        let mut api = Self::with_resource(client, resource.clone(), namespace);
        api.form = Form::Metadata;
        api
    }
}

#[async_trait]
impl<K> ListWatch<K> for Api<K>
where
    K: DeserializeOwned + Send + Sync + 'static,
{
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, Error> {
        let accept = match self.form {
            Form::Full => ACCEPT_JSON,
            Form::Metadata => ACCEPT_METADATA_LIST,
        };
        self.client
            .list_as(&self.resource, self.namespace.as_deref(), params, accept)
            .await
    }

    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<K>, Error> {
        let accept = match self.form {
            Form::Full => ACCEPT_JSON,
            Form::Metadata => ACCEPT_METADATA,
        };
        self.client
            .watch_as(&self.resource, self.namespace.as_deref(), params, accept)
            .await
    }
}

/// One page from a [`Pager`].
pub struct Page<K> {
    /// The page.
    pub list: ObjectList<K>,
    /// `true` when the continue token expired and this page is a fresh, unpaged list of
    /// everything: the caller must drop the pages it got before this one.
    pub restarted: bool,
}

impl<K> fmt::Debug for Page<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Page")
            .field("list", &self.list)
            .field("restarted", &self.restarted)
            .finish()
    }
}

/// Walks the pages of a list with `limit`/`continue`, as client-go's pager does: when a continue
/// token has expired (410), it falls back to one unpaged list with the original options (and so
/// at the original resourceVersion).
///
/// Page by page, a caller can apply a large list without holding it twice.
pub struct Pager<'a, K> {
    source: &'a (dyn ListWatch<K> + 'a),
    params: ListParams,
    page_size: u32,
    continue_token: Option<String>,
    done: bool,
}

impl<K> fmt::Debug for Pager<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pager")
            .field("params", &self.params)
            .field("page_size", &self.page_size)
            .field("continue_token", &self.continue_token.is_some())
            .field("done", &self.done)
            .finish()
    }
}

impl<'a, K> Pager<'a, K> {
    /// A pager over `source` with these options; `page_size` 0 lists in one request. A `limit`
    /// already in `params` wins over `page_size`.
    pub fn new(source: &'a (dyn ListWatch<K> + 'a), params: &ListParams, page_size: u32) -> Self {
        Self {
            source,
            params: params.clone(),
            page_size,
            continue_token: None,
            done: false,
        }
    }

    /// The next page, `None` after the last.
    pub async fn next_page(&mut self) -> Result<Option<Page<K>>, Error> {
        if self.done {
            return Ok(None);
        }
        let mut params = self.params.clone();
        if params.limit.is_none() && self.page_size > 0 {
            params.limit = Some(self.page_size);
        }
        if let Some(token) = &self.continue_token {
            // A continue token carries the snapshot's version itself.
            params.continue_token = Some(token.clone());
            params.resource_version = None;
            params.resource_version_match = None;
        }
        let (list, restarted) = match self.source.list(&params).await {
            Ok(list) => (list, false),
            Err(e) if e.is_gone() && self.continue_token.is_some() => {
                tracing::debug!("continue token expired: listing everything in one request");
                let mut full = self.params.clone();
                full.limit = None;
                full.continue_token = None;
                let list = self.source.list(&full).await?;
                self.done = true;
                (list, true)
            }
            Err(e) => {
                self.done = true;
                return Err(e);
            }
        };
        self.continue_token = list.continue_token.clone();
        if self.continue_token.is_none() {
            self.done = true;
        }
        Ok(Some(Page { list, restarted }))
    }
}

/// Lists every page (`page_size` objects at a time, [`DEFAULT_PAGE_SIZE`] is client-go's) and
/// returns all the objects with the snapshot's resourceVersion. Falls back to one unpaged list
/// when a continue token expires, as [`Pager`] does.
pub async fn list_all<K>(
    source: &(dyn ListWatch<K> + '_),
    params: &ListParams,
    page_size: u32,
) -> Result<ObjectList<K>, Error> {
    let mut pager = Pager::new(source, params, page_size);
    let mut items = Vec::new();
    let mut resource_version = ResourceVersion::from("");
    while let Some(page) = pager.next_page().await? {
        if page.restarted {
            items.clear();
        }
        if items.is_empty() {
            items = page.list.items;
        } else {
            items.extend(page.list.items);
        }
        resource_version = page.list.resource_version;
    }
    Ok(ObjectList {
        items,
        resource_version,
        continue_token: None,
        remaining_item_count: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    /// Serves `n` objects in pages; the continue token expires after `expire_after` pages.
    struct Paged {
        n: usize,
        expire_after: Option<usize>,
        calls: Mutex<Vec<ListParams>>,
    }

    fn obj(i: usize) -> Arc<DynamicObject> {
        let mut o = DynamicObject::default();
        o.metadata.name = Some(format!("o{i}"));
        Arc::new(o)
    }

    #[async_trait]
    impl ListWatch<DynamicObject> for Paged {
        async fn list(&self, p: &ListParams) -> Result<ObjectList<DynamicObject>, Error> {
            let pages_served = {
                let mut calls = self.calls.lock();
                calls.push(p.clone());
                calls.len() - 1
            };
            if p.continue_token.is_some() && self.expire_after.is_some_and(|e| pages_served >= e) {
                return Err(Error::Gone {
                    message: "continue token expired".into(),
                });
            }
            let start: usize = p
                .continue_token
                .as_deref()
                .map_or(0, |t| t.parse().unwrap());
            let end = p.limit.map_or(self.n, |l| (start + l as usize).min(self.n));
            Ok(ObjectList {
                items: (start..end).map(obj).collect(),
                resource_version: "42".into(),
                continue_token: (end < self.n).then(|| end.to_string()),
                remaining_item_count: None,
            })
        }
        async fn watch(&self, _: &WatchParams) -> Result<WatchStream<DynamicObject>, Error> {
            unimplemented!()
        }
    }

    #[tokio::test]
    async fn walks_every_page() {
        let src = Paged {
            n: 1201,
            expire_after: None,
            calls: Mutex::new(Vec::new()),
        };
        let params = ListParams {
            resource_version: Some("0".into()),
            ..ListParams::default()
        };
        let all = list_all(&src, &params, DEFAULT_PAGE_SIZE).await.unwrap();
        assert_eq!(all.items.len(), 1201);
        assert_eq!(all.items[1200].metadata.name.as_deref(), Some("o1200"));
        assert_eq!(all.resource_version.as_str(), "42");
        let calls = src.calls.lock();
        assert_eq!(calls.len(), 3);
        assert_eq!(calls[0].resource_version.as_deref(), Some("0"));
        assert_eq!(
            calls[1].resource_version, None,
            "continue requests carry no resourceVersion"
        );
        assert_eq!(calls[1].continue_token.as_deref(), Some("500"));
    }

    #[tokio::test]
    async fn expired_continue_falls_back_to_one_unpaged_list() {
        let src = Paged {
            n: 30,
            expire_after: Some(1),
            calls: Mutex::new(Vec::new()),
        };
        let params = ListParams {
            resource_version: Some("7".into()),
            label_selector: Some("a=b".into()),
            ..ListParams::default()
        };
        let mut pager = Pager::new(&src, &params, 10);
        let first = pager.next_page().await.unwrap().unwrap();
        assert_eq!((first.list.items.len(), first.restarted), (10, false));
        let second = pager.next_page().await.unwrap().unwrap();
        assert_eq!((second.list.items.len(), second.restarted), (30, true));
        assert!(pager.next_page().await.unwrap().is_none());
        let fallback = src.calls.lock().last().cloned().unwrap();
        assert_eq!(fallback.limit, None);
        assert_eq!(fallback.continue_token, None);
        assert_eq!(fallback.resource_version.as_deref(), Some("7"));
        assert_eq!(fallback.label_selector.as_deref(), Some("a=b"));

        let src = Paged {
            n: 30,
            expire_after: Some(2),
            calls: Mutex::new(Vec::new()),
        };
        let all = list_all(&src, &params, 10).await.unwrap();
        assert_eq!(all.items.len(), 30, "pages before the fallback are dropped");
    }

    #[test]
    fn public_types_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Client>();
        check::<Api<DynamicObject>>();
        check::<BoxListWatch<DynamicObject>>();
        check::<Pager<'static, DynamicObject>>();
        check::<Error>();
        check::<crate::Config>();
        fn send<T: Send>(_: &T) {}
        let src = Paged {
            n: 1,
            expire_after: None,
            calls: Mutex::new(Vec::new()),
        };
        send(&list_all(&src, &ListParams::default(), 1));
        let mut pager = Pager::new(&src, &ListParams::default(), 1);
        send(&pager.next_page());
    }
}
