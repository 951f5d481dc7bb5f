//! The HTTP implementation of [`ListWatch`] for one resource, and how the client's rich errors
//! become the neutral ones at that seam.

use std::fmt;
use std::marker::PhantomData;

use async_trait::async_trait;
use kinformer_core::list_watch::{self, ErrorKind, ListWatch};
use kinformer_core::{
    ApiResource, DynamicObject, ListParams, Object, ObjectList, PartialObjectMetadata, Scope,
    WatchParams,
};
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::client::{ACCEPT_JSON, ACCEPT_METADATA, ACCEPT_METADATA_LIST};
use crate::{Client, Error};

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
/// use kinformer_client::{Api, Client};
/// use kinformer_core::list_watch::ListWatch;
/// use kinformer_core::{ApiResource, DynamicObject, ListParams, Scope};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
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

/// Reads and writes of one object at a time: `get`, `create`, `replace` (an update with the
/// object's `resourceVersion` as precondition) and `delete`. They go through the same requests
/// as lists do: credentials (refreshed once on a 401), TLS, the request timeout, the bounded
/// body ([`Config::max_list_body`](crate::Config::max_list_body)), and the error mapping of
/// `Status` answers, where each outcome a caller acts on has its own variant:
/// [`Error::NotFound`], [`Error::AlreadyExists`], [`Error::Conflict`].
///
/// A namespaced resource's objects are read and written in the [`Api`]'s namespace: an [`Api`]
/// made with [`Api::all`] refuses ([`Error::InvalidName`], before any request). So does an
/// object name that is not a path segment.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kinformer_client::{Api, Client, Config, Error};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let sim = kinformer_sim::SimServer::start(Default::default()).await.unwrap();
/// let api: Api<ConfigMap> = Api::namespaced(Client::new(Config::new(&sim.url())).unwrap(), "default");
///
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("settings".into());
/// let created = api.create(&cm).await.unwrap();
/// assert!(matches!(api.create(&cm).await, Err(Error::AlreadyExists { .. })));
///
/// // An update at the version read succeeds; a second one from the same, now stale, read is
/// // a conflict: someone else wrote first.
/// let mut changed = created.clone();
/// changed.data = Some([("mode".to_string(), "fast".to_string())].into());
/// let replaced = api.replace("settings", &changed).await.unwrap();
/// assert!(matches!(api.replace("settings", &changed).await, Err(Error::Conflict { .. })));
///
/// assert_eq!(api.get("settings").await.unwrap(), replaced);
/// let version = replaced.metadata.resource_version.as_deref();
/// api.delete("settings", version).await.unwrap();
/// assert!(matches!(api.get("settings").await, Err(Error::NotFound { .. })));
/// # }
/// ```
impl<K> Api<K>
where
    K: Serialize + DeserializeOwned,
{
    /// The object named `name` (a GET). [`Error::NotFound`] when there is none.
    pub async fn get(&self, name: &str) -> Result<K, Error> {
        let accept = match self.form {
            Form::Full => ACCEPT_JSON,
            Form::Metadata => ACCEPT_METADATA,
        };
        self.client
            .get_object(&self.resource, self.namespace.as_deref(), name, accept)
            .await
    }

    /// Creates `object` (a POST to the collection) and returns it as stored: with its uid,
    /// resourceVersion and the server's defaults. [`Error::AlreadyExists`] when an object of
    /// that name exists.
    pub async fn create(&self, object: &K) -> Result<K, Error> {
        self.check_writable()?;
        self.client
            .write_object(
                Method::POST,
                &self.resource,
                self.namespace.as_deref(),
                None,
                object,
            )
            .await
    }

    /// Replaces the object named `name` with `object` (a PUT) and returns it as stored. The
    /// `metadata.resourceVersion` of `object` is a precondition: [`Error::Conflict`] when the
    /// object has been written since that version (read it again, and decide anew).
    /// [`Error::NotFound`] when there is no such object.
    pub async fn replace(&self, name: &str, object: &K) -> Result<K, Error> {
        self.check_writable()?;
        self.client
            .write_object(
                Method::PUT,
                &self.resource,
                self.namespace.as_deref(),
                Some(name),
                object,
            )
            .await
    }

    /// Deletes the object named `name`. With `resource_version`, only if the object is still at
    /// that version (`DeleteOptions.preconditions.resourceVersion`): [`Error::Conflict`]
    /// otherwise. [`Error::NotFound`] when there is no such object. A delete that the server
    /// only starts (an object with finalizers, a pod's graceful deletion) counts as done.
    pub async fn delete(&self, name: &str, resource_version: Option<&str>) -> Result<(), Error> {
        self.check_writable()?;
        self.client
            .delete_object(
                &self.resource,
                self.namespace.as_deref(),
                name,
                resource_version,
            )
            .await
    }

    /// A metadata-only [`Api`] reads; it cannot write whole objects.
    fn check_writable(&self) -> Result<(), Error> {
        match self.form {
            Form::Full => Ok(()),
            Form::Metadata => Err(Error::InvalidRequest {
                message: "a metadata-only Api does not write objects".to_owned(),
            }),
        }
    }
}

#[async_trait]
impl<K> ListWatch<K> for Api<K>
where
    K: Object + DeserializeOwned,
{
    /// Lists one page (`limit`/`continue` in `params` select it). The error carries this
    /// crate's [`Error`]: [`Error::from_list_watch`] gets it back.
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, list_watch::Error> {
        let accept = match self.form {
            Form::Full => ACCEPT_JSON,
            Form::Metadata => ACCEPT_METADATA_LIST,
        };
        Ok(self
            .client
            .list_as(&self.resource, self.namespace.as_deref(), params, accept)
            .await?)
    }

    /// Opens a watch. Its errors, and those on the stream, carry this crate's [`Error`]:
    /// [`Error::from_list_watch`] gets it back.
    async fn watch(
        &self,
        params: &WatchParams,
    ) -> Result<list_watch::WatchStream<K>, list_watch::Error> {
        let accept = match self.form {
            Form::Full => ACCEPT_JSON,
            Form::Metadata => ACCEPT_METADATA,
        };
        Ok(self
            .client
            .watch_as(&self.resource, self.namespace.as_deref(), params, accept)
            .await?)
    }
}

impl Error {
    /// What a caller of [`ListWatch`] should do about this error: relist on 410 Gone and on a
    /// resourceVersion the server cannot serve yet, resume a broken watch, retry what
    /// [`is_retryable`](Self::is_retryable), and give up on the rest.
    pub fn kind(&self) -> ErrorKind {
        if self.is_gone() || matches!(self, Self::TooLargeResourceVersion { .. }) {
            ErrorKind::Relist
        } else if self.is_resumable() {
            ErrorKind::Resume
        } else if self.is_retryable() {
            ErrorKind::Retry
        } else {
            ErrorKind::Fatal
        }
    }
}

/// The neutral error keeps this one as its source: [`Error::from_list_watch`] (or a downcast of
/// [`get_ref`](list_watch::Error::get_ref)) gets it back.
impl From<Error> for list_watch::Error {
    fn from(e: Error) -> Self {
        let (kind, retry_after) = (e.kind(), e.retry_after());
        list_watch::Error::new(kind, e).with_retry_after(retry_after)
    }
}

/// The client's error inside a neutral one, by value; the neutral error comes back unchanged when
/// it holds none (it came from another implementation of [`ListWatch`]).
impl TryFrom<list_watch::Error> for Error {
    type Error = list_watch::Error;

    fn try_from(e: list_watch::Error) -> Result<Self, list_watch::Error> {
        if !e.get_ref().is::<Self>() {
            return Err(e);
        }
        let (kind, retry_after) = (e.kind(), e.retry_after());
        match e.into_inner().downcast::<Self>() {
            Ok(rich) => Ok(*rich),
            Err(other) => Err(list_watch::Error::new(kind, other).with_retry_after(retry_after)),
        }
    }
}

impl Error {
    /// The client's error that a [`ListWatch`] error carries, if it came from this crate:
    /// [`Api`]'s `list` and `watch` answer with the neutral [`list_watch::Error`] (a kind to act
    /// on), and this is how a caller that needs the details (the HTTP status, the server's
    /// message, which wait timed out) gets them. It is the neutral error's
    /// [`get_ref`](list_watch::Error::get_ref), or else the first of this crate's errors along
    /// that error's sources (a layer that wrapped ours).
    ///
    /// Not `std::error::Error::source()`: like `std::io::Error`, the neutral error shows its
    /// inner error's message as its own, and so its `source()` is the inner error's source.
    ///
    /// ```
    /// use kinformer_client::{Api, Client, Config, Error};
    /// use kinformer_core::list_watch::{ErrorKind, ListWatch};
    /// use kinformer_core::{ApiResource, DynamicObject, ListParams, Scope};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let client = Client::new(Config::new("http://127.0.0.1:1")).unwrap();
    /// let widgets = ApiResource::new("example.com", "v1", "Widget", "widgets", Scope::Namespaced);
    /// // A namespace that is not a DNS label is refused before any request.
    /// let api = Api::<DynamicObject>::namespaced_with(client, "Not/Valid", &widgets);
    /// let e = api.list(&ListParams::default()).await.unwrap_err();
    /// assert_eq!(e.kind(), ErrorKind::Fatal);
    /// assert!(matches!(Error::from_list_watch(&e), Some(Error::InvalidName { .. })));
    /// // By value, when the caller keeps only the client's error:
    /// assert!(matches!(Error::try_from(e), Ok(Error::InvalidName { .. })));
    /// # }
    /// ```
    pub fn from_list_watch(e: &list_watch::Error) -> Option<&Self> {
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e.get_ref());
        // Bounded: a source chain is short, and this never loops on a cyclic one.
        for _ in 0..16 {
            let current = next?;
            if let Some(rich) = current.downcast_ref::<Self>() {
                return Some(rich);
            }
            next = current.source();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn errors_cross_the_seam_with_their_kind_and_delay() {
        let cases = [
            (
                Error::Gone {
                    message: "expired".into(),
                },
                ErrorKind::Relist,
                None,
            ),
            (
                Error::TooLargeResourceVersion {
                    message: "later".into(),
                },
                ErrorKind::Relist,
                None,
            ),
            (
                Error::Throttled {
                    retry_after: Some(Duration::from_secs(3)),
                    message: "slow".into(),
                },
                ErrorKind::Retry,
                Some(Duration::from_secs(3)),
            ),
            (
                Error::Forbidden {
                    message: "no".into(),
                },
                ErrorKind::Fatal,
                None,
            ),
        ];
        for (e, kind, delay) in cases {
            let text = e.to_string();
            let neutral = list_watch::Error::from(e);
            assert_eq!(
                (neutral.kind(), neutral.retry_after()),
                (kind, delay),
                "{text}"
            );
            assert_eq!(neutral.to_string(), text);
            assert!(
                neutral.get_ref().is::<Error>(),
                "the rich error is the source"
            );
        }
    }

    /// A caller of [`ListWatch`] gets the client's own error back from the neutral one: from a
    /// list, from opening a watch, by reference and by value, and from behind a layer that
    /// wrapped it.
    #[tokio::test]
    async fn the_client_error_is_reached_from_the_neutral_one() {
        let client = Client::new(crate::Config::new("http://127.0.0.1:1")).unwrap();
        let pods = ApiResource::of::<k8s_openapi::api::core::v1::Pod>();
        // Refused before any request: nothing listens at that address, nothing is sent.
        let api = Api::<DynamicObject>::namespaced_with(client, "Not/Valid", &pods);
        let invalid = |e: Option<&Error>| matches!(e, Some(Error::InvalidName { what: "namespace", value, .. }) if value == "Not/Valid");

        let listed = ListWatch::list(&api, &ListParams::default())
            .await
            .unwrap_err();
        assert_eq!(listed.kind(), ErrorKind::Fatal);
        assert!(invalid(Error::from_list_watch(&listed)), "{listed:?}");
        assert!(invalid(listed.get_ref().downcast_ref::<Error>()));
        let watched = match ListWatch::watch(&api, &WatchParams::default()).await {
            Err(e) => e,
            Ok(_) => panic!("an invalid namespace opened a watch"),
        };
        assert!(invalid(Error::from_list_watch(&watched)), "{watched:?}");

        let text = listed.to_string();
        let owned = Error::try_from(listed).unwrap();
        assert!(invalid(Some(&owned)));
        assert_eq!(owned.to_string(), text);

        // Another implementation's error is handed back as it was.
        let foreign = list_watch::Error::new(ErrorKind::Retry, "elsewhere")
            .with_retry_after(Some(Duration::from_secs(1)));
        assert!(Error::from_list_watch(&foreign).is_none());
        let back = Error::try_from(foreign).unwrap_err();
        assert_eq!(
            (back.kind(), back.retry_after(), back.to_string()),
            (
                ErrorKind::Retry,
                Some(Duration::from_secs(1)),
                "elsewhere".to_owned()
            )
        );

        // Wrapped by another layer, the client's error is found along the sources.
        #[derive(Debug, thiserror::Error)]
        #[error("while relisting")]
        struct Wrapper(#[source] Error);
        let wrapped = list_watch::Error::new(ErrorKind::Fatal, Wrapper(owned));
        assert!(invalid(Error::from_list_watch(&wrapped)));
    }

    #[test]
    fn public_types_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Client>();
        check::<Api<DynamicObject>>();
        check::<Error>();
        check::<crate::Config>();
        let _: &dyn ListWatch<DynamicObject> = &Api::<DynamicObject>::all_with(
            Client::new(crate::Config::new("http://127.0.0.1:1")).unwrap(),
            &ApiResource::of::<k8s_openapi::api::core::v1::Pod>(),
        );
    }
}
