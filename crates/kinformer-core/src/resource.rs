//! Which resource a list or watch is about, and its URL paths.

use std::any::TypeId;

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

/// Whether a resource lives in namespaces or is cluster-wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Objects live in a namespace (pods, services, configmaps).
    Namespaced,
    /// Objects are cluster-wide (nodes, namespaces).
    Cluster,
}

/// A resource as the API server names it: group, version, kind, plural and scope.
///
/// Derive it from a k8s-openapi type with [`ApiResource::of`], or build it for any custom resource
/// with [`ApiResource::new`].
///
/// ```
/// use kinformer_core::{ApiResource, Scope};
///
/// let widgets = ApiResource::new("example.com", "v1", "Widget", "widgets", Scope::Namespaced);
/// assert_eq!(widgets.api_version, "example.com/v1");
/// assert_eq!(widgets.list_path(None), "/apis/example.com/v1/widgets");
/// assert_eq!(widgets.list_path(Some("dev")), "/apis/example.com/v1/namespaces/dev/widgets");
///
/// let nodes = ApiResource::new("", "v1", "Node", "nodes", Scope::Cluster);
/// assert_eq!(nodes.list_path(Some("ignored")), "/api/v1/nodes");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ApiResource {
    /// The API group, empty for the core group.
    pub group: String,
    /// The version, for example `v1`.
    pub version: String,
    /// `group/version`, or just `version` for the core group.
    pub api_version: String,
    /// The kind, for example `Pod`.
    pub kind: String,
    /// The plural resource name used in URLs, for example `pods`.
    pub plural: String,
    /// Namespaced or cluster-wide.
    pub scope: Scope,
}

impl ApiResource {
    /// A resource from its parts, for custom resources and resources chosen at run time.
    pub fn new(group: &str, version: &str, kind: &str, plural: &str, scope: Scope) -> Self {
        let api_version = if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        };
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            api_version,
            kind: kind.to_owned(),
            plural: plural.to_owned(),
            scope,
        }
    }

    /// The resource of a k8s-openapi type.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::{Namespace, Pod};
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// use kinformer_core::{ApiResource, Scope};
    ///
    /// assert_eq!(ApiResource::of::<Pod>().scope, Scope::Namespaced);
    /// assert_eq!(ApiResource::of::<Namespace>().scope, Scope::Cluster);
    /// assert_eq!(ApiResource::of::<Deployment>().list_path(None), "/apis/apps/v1/deployments");
    /// ```
    pub fn of<K: k8s_openapi::Resource>() -> Self
    where
        K::Scope: 'static,
    {
        let scope = if TypeId::of::<K::Scope>() == TypeId::of::<k8s_openapi::ClusterResourceScope>()
        {
            Scope::Cluster
        } else {
            Scope::Namespaced
        };
        Self {
            group: K::GROUP.to_owned(),
            version: K::VERSION.to_owned(),
            api_version: K::API_VERSION.to_owned(),
            kind: K::KIND.to_owned(),
            plural: K::URL_PATH_SEGMENT.to_owned(),
            scope,
        }
    }

    /// The URL path that lists (and, with `watch=true`, watches) this resource: in one namespace
    /// when `namespace` is given and the resource is namespaced, across all namespaces otherwise.
    /// An empty namespace means all namespaces, as client-go's `NamespaceAll` does.
    ///
    /// Every segment is percent-encoded, so a `?`, `#`, `/` or `%` in one stays inside it. This
    /// does not make a bad name good: `.` and `..` still move up the path, so check names first
    /// with [`validation`](crate::validation) (the client does, before any request). `{` and `}`
    /// are left as they are, so that a path template (`{namespace}`) comes through whole.
    ///
    /// ```
    /// use kinformer_core::{ApiResource, Scope};
    /// let pods = ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced);
    /// assert_eq!(pods.list_path(Some("shop?limit=1")), "/api/v1/namespaces/shop%3Flimit=1/pods");
    /// assert_eq!(pods.list_path(Some("")), "/api/v1/pods");
    /// assert_eq!(pods.list_path(Some("{namespace}")), "/api/v1/namespaces/{namespace}/pods");
    /// ```
    pub fn list_path(&self, namespace: Option<&str>) -> String {
        let mut path = String::new();
        if self.group.is_empty() {
            path.push_str("/api");
        } else {
            path.push_str("/apis");
            push_segment(&mut path, &self.group);
        }
        push_segment(&mut path, &self.version);
        if let (Scope::Namespaced, Some(ns)) = (self.scope, namespace)
            && !ns.is_empty()
        {
            path.push_str("/namespaces");
            push_segment(&mut path, ns);
        }
        push_segment(&mut path, &self.plural);
        path
    }

    /// The URL path of one object of this resource.
    ///
    /// ```
    /// use kinformer_core::{ApiResource, Scope};
    /// let pods = ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced);
    /// assert_eq!(pods.object_path(Some("dev"), "web-0"), "/api/v1/namespaces/dev/pods/web-0");
    /// assert_eq!(pods.object_path(Some("dev"), "a/b#c"), "/api/v1/namespaces/dev/pods/a%2Fb%23c");
    /// ```
    ///
    /// The name is percent-encoded like every segment of [`list_path`](Self::list_path), and as
    /// there, check it first ([`validation::validate_object_name`](crate::validation::validate_object_name)).
    pub fn object_path(&self, namespace: Option<&str>, name: &str) -> String {
        let mut path = self.list_path(namespace);
        push_segment(&mut path, name);
        path
    }
}

/// What is percent-encoded in a path segment: the URL standard's path-segment set (controls,
/// space, `"`, `#`, `<`, `>`, `?`, `` ` ``, `/`, `%`), plus `\` (a separator in http URLs),
/// `^` and `|`, and every non-ASCII byte; but not `{` and `}`, which path templates use.
const PATH_SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'|');

/// Appends `/` and the percent-encoded `segment`.
fn push_segment(path: &mut String, segment: &str) {
    path.push('/');
    path.extend(utf8_percent_encode(segment, PATH_SEGMENT));
}

/// Makes a form of a kind a resource of that kind: implements `k8s_openapi::Resource` for
/// `Form<K>` with `K`'s group, version, kind, plural and scope, so that
/// [`ApiResource::of::<Form<Pod>>()`](ApiResource::of) names pods. The compact forms
/// (`kinformer_compact::Compact`, `kinformer_compact::Compressed`,
/// `kinformer_protobuf::CompactMessage`) use it; a form of your own can too.
///
/// ```
/// use std::marker::PhantomData;
///
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_core::{ApiResource, Scope};
///
/// /// Some other way to keep a `K`.
/// struct Kept<K>(PhantomData<K>);
/// kinformer_core::resource_of_kind!(Kept);
///
/// let pods = ApiResource::of::<Kept<Pod>>();
/// assert_eq!((pods.kind.as_str(), pods.plural.as_str()), ("Pod", "pods"));
/// assert_eq!(pods.scope, Scope::Namespaced);
/// ```
#[macro_export]
macro_rules! resource_of_kind {
    ($form:ident) => {
        impl<K: $crate::k8s_openapi::Resource> $crate::k8s_openapi::Resource for $form<K> {
            const API_VERSION: &'static str = K::API_VERSION;
            const GROUP: &'static str = K::GROUP;
            const KIND: &'static str = K::KIND;
            const VERSION: &'static str = K::VERSION;
            const URL_PATH_SEGMENT: &'static str = K::URL_PATH_SEGMENT;
            type Scope = K::Scope;
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_segment_is_percent_encoded() {
        let odd = ApiResource::new("ex ample.com", "v1?", "Odd", "odds#", Scope::Namespaced);
        assert_eq!(
            odd.list_path(Some("a/b%c\\d")),
            "/apis/ex%20ample.com/v1%3F/namespaces/a%2Fb%25c%5Cd/odds%23"
        );
        assert_eq!(
            odd.object_path(None, "n\u{e4}me\n"),
            "/apis/ex%20ample.com/v1%3F/odds%23/n%C3%A4me%0A"
        );
        let cluster = ApiResource::new("", "v1", "Node", "nodes", Scope::Cluster);
        assert_eq!(cluster.list_path(Some("x/y")), "/api/v1/nodes");
    }
}
