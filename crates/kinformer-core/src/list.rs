//! List results and the options of list and watch requests.

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use serde_json::value::RawValue;

use crate::trim::ManagedFieldsDecode;
use crate::{Error, Object, ResourceVersion, Scope, missing_identity};

mod splitter;

pub use splitter::{ItemRun, JsonListSplitter};

/// One page of a list response.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_core::ObjectList;
///
/// let page = ObjectList::<Pod>::from_json(br#"{
///     "kind": "PodList", "apiVersion": "v1",
///     "metadata": {"resourceVersion": "500", "continue": "abc", "remainingItemCount": 7},
///     "items": [{"metadata": {"name": "a", "namespace": "ns"}}]
/// }"#).unwrap();
/// assert_eq!(page.items.len(), 1);
/// assert_eq!(page.resource_version.as_str(), "500");
/// assert_eq!(page.continue_token.as_deref(), Some("abc"));
/// assert_eq!(page.remaining_item_count, Some(7));
/// ```
pub struct ObjectList<K> {
    /// The objects of this page, each decoded once and shared.
    pub items: Vec<Arc<K>>,
    /// The list's resourceVersion: the version of the snapshot this page belongs to.
    pub resource_version: ResourceVersion,
    /// The token that fetches the next page, `None` on the last page.
    pub continue_token: Option<String>,
    /// How many objects remain after this page, when the server says.
    pub remaining_item_count: Option<i64>,
    /// `metadata.shardInfo.selector`: the shard selector the server applied to this list, echoed
    /// (KEP-5866). `None` from a server that did not filter, however the request asked.
    pub shard_selector: Option<String>,
}

impl<K> Clone for ObjectList<K> {
    fn clone(&self) -> Self {
        Self {
            items: self.items.clone(),
            resource_version: self.resource_version.clone(),
            continue_token: self.continue_token.clone(),
            remaining_item_count: self.remaining_item_count,
            shard_selector: self.shard_selector.clone(),
        }
    }
}

impl<K> fmt::Debug for ObjectList<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectList")
            .field("items", &self.items.len())
            .field("resource_version", &self.resource_version)
            .field("continue_token", &self.continue_token)
            .field("remaining_item_count", &self.remaining_item_count)
            .field("shard_selector", &self.shard_selector)
            .finish()
    }
}

#[derive(Deserialize)]
struct RawList<'a> {
    #[serde(default)]
    metadata: RawListMeta,
    #[serde(default, borrow)]
    items: Option<Vec<&'a RawValue>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawListMeta {
    #[serde(default)]
    resource_version: String,
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
    #[serde(default)]
    remaining_item_count: Option<i64>,
    #[serde(default)]
    shard_info: Option<RawShardInfo>,
}

#[derive(Debug, Deserialize, Default)]
struct RawShardInfo {
    #[serde(default)]
    selector: Option<String>,
}

impl<K> ObjectList<K> {
    /// A complete list (no continue token, no remaining count) of `items` at `resource_version`.
    ///
    /// ```
    /// use kinformer_core::{DynamicObject, ObjectList};
    /// let list = ObjectList::<DynamicObject>::new(Vec::new(), "7".into());
    /// assert!(list.continue_token.is_none());
    /// ```
    pub fn new(items: Vec<Arc<K>>, resource_version: ResourceVersion) -> Self {
        Self {
            items,
            resource_version,
            continue_token: None,
            remaining_item_count: None,
            shard_selector: None,
        }
    }
}

impl<K: Object + DeserializeOwned> ObjectList<K> {
    /// Decodes a list response body (`PodList`, `PartialObjectMetadataList`, any `*List`). An empty
    /// continue token counts as none.
    ///
    /// An item without a `metadata.name` is an [`Error::Decode`] naming the item (`items[3]`):
    /// the API server never sends one, and a cache would file it under an empty key.
    pub fn from_json(body: &[u8]) -> Result<Self, Error> {
        Self::decode(body, None)
    }

    /// Like [`from_json`](Self::from_json), and for a [`Scope::Namespaced`] resource an item
    /// without a `metadata.namespace` is an error too.
    ///
    /// ```
    /// use kinformer_core::{DynamicObject, Error, ObjectList, Scope};
    ///
    /// let body = br#"{"metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"a"}}]}"#;
    /// assert!(ObjectList::<DynamicObject>::from_json_scoped(body, Scope::Cluster).is_ok());
    /// let e = ObjectList::<DynamicObject>::from_json_scoped(body, Scope::Namespaced).unwrap_err();
    /// assert!(e.to_string().contains("items[0] has no metadata.namespace"), "{e}");
    /// ```
    pub fn from_json_scoped(body: &[u8], scope: Scope) -> Result<Self, Error> {
        Self::decode(body, Some(scope))
    }

    fn decode(body: &[u8], scope: Option<Scope>) -> Result<Self, Error> {
        let page = ListPage::locate(body)?;
        let items = page.decode_items(body, 0..page.len(), scope)?;
        Ok(page.into_list(items))
    }
}

/// A list response body whose items are located but not yet decoded: where each item lies in
/// the body, and the list's metadata. It lets a caller decode the items in runs, wherever it
/// likes (on several tasks of an async runtime, say), and assemble the page in order.
///
/// ```
/// use kinformer_core::{DynamicObject, ListPage, Scope};
///
/// let body = br#"{"metadata":{"resourceVersion":"9","continue":"c"},"items":[
///     {"metadata":{"name":"a"}},{"metadata":{"name":"b"}},{"metadata":{"name":"c"}}]}"#;
/// let page = ListPage::locate(body).unwrap();
/// assert_eq!(page.len(), 3);
/// let mut items = page.decode_items::<DynamicObject>(body, 0..1, Some(Scope::Cluster)).unwrap();
/// items.extend(page.decode_items(body, 1..3, Some(Scope::Cluster)).unwrap());
/// let list = page.into_list(items);
/// assert_eq!(list.items[2].metadata.name.as_deref(), Some("c"));
/// assert_eq!(list.continue_token.as_deref(), Some("c"));
/// ```
#[derive(Debug, Clone)]
pub struct ListPage {
    /// The byte range of each item in the body, in order.
    items: Vec<std::ops::Range<usize>>,
    resource_version: ResourceVersion,
    continue_token: Option<String>,
    remaining_item_count: Option<i64>,
    shard_selector: Option<String>,
}

impl ListPage {
    /// Reads a list body's metadata and finds its items, checking that the body is one JSON
    /// list object, without decoding any item.
    pub fn locate(body: &[u8]) -> Result<Self, Error> {
        // serde would also read a struct from an array of its fields in order: a list body is
        // an object.
        if body.trim_ascii_start().first().is_some_and(|b| *b != b'{') {
            return Err(Error::Decode {
                what: "list",
                source: serde::de::Error::custom("a list body is a JSON object"),
            });
        }
        let raw: RawList<'_> = serde_json::from_slice(body).map_err(|source| Error::Decode {
            what: "list",
            source,
        })?;
        let base = body.as_ptr() as usize;
        let items = raw
            .items
            .unwrap_or_default()
            .iter()
            .map(|item| {
                // A raw item borrows its bytes from `body`, so its offset is its address less
                // the body's.
                let start = item.get().as_ptr() as usize - base;
                start..start + item.get().len()
            })
            .collect();
        Ok(Self {
            items,
            resource_version: raw.metadata.resource_version.into(),
            continue_token: raw.metadata.continue_token.filter(|c| !c.is_empty()),
            remaining_item_count: raw.metadata.remaining_item_count,
            shard_selector: raw.metadata.shard_info.and_then(|i| i.selector),
        })
    }

    /// How many items the page holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the page holds no item.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Decodes the items numbered `run` (a range of item numbers, not bytes) from `body`, the
    /// body this page was located in. An item without a name, or without a namespace when
    /// `scope` is [`Scope::Namespaced`], is an [`Error::Decode`] naming it (`items[3]`), as is
    /// an item that does not decode; the error names the first bad item of the run.
    ///
    /// # Panics
    ///
    /// If `run` goes past [`len`](Self::len), or `body` is shorter than the located one.
    pub fn decode_items<K: Object + DeserializeOwned>(
        &self,
        body: &[u8],
        run: std::ops::Range<usize>,
        scope: Option<Scope>,
    ) -> Result<Vec<Arc<K>>, Error> {
        decode_ranges(
            body,
            &self.items[run.clone()],
            run.start,
            scope,
            ManagedFieldsDecode::Keep,
        )
    }

    /// The page as an [`ObjectList`] of its decoded `items`.
    pub fn into_list<K>(self, items: Vec<Arc<K>>) -> ObjectList<K> {
        ObjectList {
            items,
            resource_version: self.resource_version,
            continue_token: self.continue_token,
            remaining_item_count: self.remaining_item_count,
            shard_selector: self.shard_selector,
        }
    }
}

/// Decodes the items at `ranges` of `body`, the first of them item number `first` of its list:
/// an item that does not decode, has no name, or (for [`Scope::Namespaced`]) no namespace, is
/// an [`Error::Decode`] naming it (`items[3]`); the error names the first bad item.
fn decode_ranges<K: Object + DeserializeOwned>(
    body: &[u8],
    ranges: &[std::ops::Range<usize>],
    first: usize,
    scope: Option<Scope>,
    managed_fields: ManagedFieldsDecode,
) -> Result<Vec<Arc<K>>, Error> {
    let decode_error = |source| Error::Decode {
        what: "list",
        source,
    };
    let namespaced = scope == Some(Scope::Namespaced);
    let mut out = Vec::with_capacity(ranges.len());
    for (i, bytes) in (first..).zip(ranges) {
        let item = managed_fields.object(&body[bytes.clone()]);
        let object: K = crate::json::object(&item)
            .map_err(|e| decode_error(serde::de::Error::custom(format_args!("items[{i}]: {e}"))))?;
        if let Some(field) = missing_identity(&object, namespaced) {
            return Err(decode_error(serde::de::Error::custom(format_args!(
                "items[{i}] has no {field}"
            ))));
        }
        out.push(Arc::new(object));
    }
    Ok(out)
}

/// How the server interprets a request's `resourceVersion` (`resourceVersionMatch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceVersionMatch {
    /// Data at least as new as the given version.
    NotOlderThan,
    /// Data at exactly the given version.
    Exact,
}

impl ResourceVersionMatch {
    /// The value as the API expects it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotOlderThan => "NotOlderThan",
            Self::Exact => "Exact",
        }
    }
}

/// The query of a list request. Build it with struct update syntax from `Default`.
///
/// ```
/// use kinformer_core::{ListParams, ResourceVersionMatch};
///
/// let params = ListParams {
///     label_selector: Some("app=web,tier in (a,b)".into()),
///     limit: Some(500),
///     resource_version: Some("0".into()),
///     resource_version_match: Some(ResourceVersionMatch::NotOlderThan),
///     ..ListParams::default()
/// };
/// assert_eq!(
///     params.to_query(),
///     "labelSelector=app%3Dweb%2Ctier+in+%28a%2Cb%29&limit=500&resourceVersion=0&resourceVersionMatch=NotOlderThan"
/// );
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListParams {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `shardSelector` (KEP-5866, alpha in 1.36): the hash ranges to list
    /// ([`ShardRanges::to_selector`](crate::shard::ShardRanges::to_selector)). A server without
    /// the feature ignores it; it says it applied it in the list's
    /// [`shard_selector`](ObjectList::shard_selector).
    pub shard_selector: Option<String>,
    /// `limit`: the page size.
    pub limit: Option<u32>,
    /// `continue`: the token of the page to fetch.
    pub continue_token: Option<String>,
    /// `resourceVersion`: `""`/`None` for the most recent, `"0"` for any, or a version.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<ResourceVersionMatch>,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<u32>,
}

impl ListParams {
    /// The URL query string (without `?`), percent-encoded.
    pub fn to_query(&self) -> String {
        let mut q = Query::default();
        q.opt("labelSelector", self.label_selector.as_deref());
        q.opt("fieldSelector", self.field_selector.as_deref());
        q.opt("shardSelector", self.shard_selector.as_deref());
        q.opt_num("limit", self.limit);
        q.opt("continue", self.continue_token.as_deref());
        q.opt("resourceVersion", self.resource_version.as_deref());
        q.opt(
            "resourceVersionMatch",
            self.resource_version_match
                .map(ResourceVersionMatch::as_str),
        );
        q.opt_num("timeoutSeconds", self.timeout_seconds);
        q.finish()
    }
}

/// The query of a watch request.
///
/// ```
/// use kinformer_core::WatchParams;
///
/// let params = WatchParams {
///     resource_version: Some("1200".into()),
///     allow_watch_bookmarks: true,
///     timeout_seconds: Some(300),
///     ..WatchParams::default()
/// };
/// assert_eq!(
///     params.to_query(),
///     "watch=true&resourceVersion=1200&timeoutSeconds=300&allowWatchBookmarks=true"
/// );
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchParams {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `shardSelector` (KEP-5866): see [`ListParams::shard_selector`]. A watch says nothing of
    /// whether it was applied; a list with the same selector does.
    pub shard_selector: Option<String>,
    /// `resourceVersion` to watch from.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch` (`NotOlderThan` with `sendInitialEvents`).
    pub resource_version_match: Option<ResourceVersionMatch>,
    /// `timeoutSeconds`: the server ends the watch after this long.
    pub timeout_seconds: Option<u32>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: bool,
    /// `sendInitialEvents`: a streaming list, ended by a bookmark annotated
    /// [`INITIAL_EVENTS_END_ANNOTATION`](crate::INITIAL_EVENTS_END_ANNOTATION).
    pub send_initial_events: bool,
}

impl WatchParams {
    /// The URL query string (without `?`), percent-encoded, starting with `watch=true`.
    pub fn to_query(&self) -> String {
        let mut q = Query::default();
        q.pair("watch", "true");
        q.opt("labelSelector", self.label_selector.as_deref());
        q.opt("fieldSelector", self.field_selector.as_deref());
        q.opt("shardSelector", self.shard_selector.as_deref());
        q.opt("resourceVersion", self.resource_version.as_deref());
        q.opt(
            "resourceVersionMatch",
            self.resource_version_match
                .map(ResourceVersionMatch::as_str),
        );
        q.opt_num("timeoutSeconds", self.timeout_seconds);
        if self.allow_watch_bookmarks {
            q.pair("allowWatchBookmarks", "true");
        }
        if self.send_initial_events {
            q.pair("sendInitialEvents", "true");
        }
        q.finish()
    }
}

/// An `application/x-www-form-urlencoded` query under construction.
struct Query(form_urlencoded::Serializer<'static, String>);

impl Default for Query {
    fn default() -> Self {
        Self(form_urlencoded::Serializer::new(String::new()))
    }
}

impl Query {
    fn pair(&mut self, key: &str, value: &str) {
        self.0.append_pair(key, value);
    }

    fn opt(&mut self, key: &str, value: Option<&str>) {
        if let Some(v) = value {
            self.pair(key, v);
        }
    }

    fn opt_num(&mut self, key: &str, value: Option<u32>) {
        if let Some(v) = value {
            self.pair(key, &v.to_string());
        }
    }

    fn finish(mut self) -> String {
        self.0.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DynamicObject, Object, PartialObjectMetadata};
    use k8s_openapi::api::core::v1::Pod;

    #[test]
    fn typed_list_items_get_no_spare_capacity() {
        let c = serde_json::json!({"name": "c", "image": "i"});
        let pod = serde_json::json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [c, c, c]}});
        let body =
            serde_json::json!({"metadata": {"resourceVersion": "7"}, "items": [pod]}).to_string();
        let page = ListPage::locate(body.as_bytes()).unwrap();
        let items: Vec<Arc<Pod>> = page
            .decode_items(body.as_bytes(), 0..1, Some(Scope::Namespaced))
            .unwrap();
        let containers = &items[0].spec.as_ref().unwrap().containers;
        assert_eq!((containers.len(), containers.capacity()), (3, 3));
    }

    #[test]
    fn decodes_a_real_pod_list() {
        let body = r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"12345","continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzNDUsInN0YXJ0IjoiYiJ9","remainingItemCount":3},"items":[{"metadata":{"name":"a","namespace":"default","uid":"u-a","resourceVersion":"100","labels":{"app":"x"}},"spec":{"containers":[{"name":"c","image":"busybox"}]},"status":{"phase":"Pending"}},{"metadata":{"name":"b","namespace":"kube-system","uid":"u-b","resourceVersion":"101"},"spec":{"containers":[]}}]}"#;
        let list = ObjectList::<Pod>::from_json(body.as_bytes()).unwrap();
        let keys: Vec<_> = list.items.iter().map(|p| p.key().to_string()).collect();
        assert_eq!(keys, ["default/a", "kube-system/b"]);
        assert_eq!(list.resource_version.as_str(), "12345");
        assert!(list.continue_token.is_some());
        assert_eq!(list.remaining_item_count, Some(3));
    }

    #[test]
    fn decodes_last_pages_and_empty_lists() {
        let cases = [
            r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[]}"#,
            r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":""},"items":null}"#,
            r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9"}}"#,
        ];
        for body in cases {
            let list = ObjectList::<DynamicObject>::from_json(body.as_bytes()).unwrap();
            assert!(list.items.is_empty(), "{body}");
            assert_eq!(list.continue_token, None, "{body}");
            assert_eq!(list.resource_version.as_str(), "9");
        }
    }

    #[test]
    fn decodes_metadata_only_lists() {
        let body = r#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"77"},"items":[{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"n1","uid":"x","resourceVersion":"70"}}]}"#;
        let list = ObjectList::<PartialObjectMetadata>::from_json(body.as_bytes()).unwrap();
        assert_eq!(list.items[0].name(), "n1");
        assert_eq!(list.items[0].namespace(), None);
    }

    #[test]
    fn rejects_malformed_lists() {
        for body in [
            r#"{"items":{}}"#,
            r#"{"items":[{"metadata":7}]}"#,
            "not json",
        ] {
            assert!(matches!(
                ObjectList::<Pod>::from_json(body.as_bytes()),
                Err(Error::Decode { what: "list", .. })
            ));
        }
    }

    #[test]
    fn items_without_a_name_or_namespace_are_decode_errors_naming_the_item() {
        let list =
            |items: &str| format!(r#"{{"metadata":{{"resourceVersion":"3"}},"items":[{items}]}}"#);
        let good = r#"{"metadata":{"name":"a","namespace":"ns"}}"#;
        let cases = [
            (r#"{"spec":{}}"#, None, "items[1] has no metadata.name"),
            (r#"{"metadata":{}}"#, None, "items[1] has no metadata.name"),
            (
                r#"{"metadata":{"name":""}}"#,
                None,
                "items[1] has no metadata.name",
            ),
            (
                r#"{"metadata":{"name":null}}"#,
                None,
                "items[1] has no metadata.name",
            ),
            (r#"{"metadata":7}"#, None, "items[1]"),
            (
                r#"{"metadata":{"name":"b"}}"#,
                Some(Scope::Namespaced),
                "items[1] has no metadata.namespace",
            ),
            (
                r#"{"metadata":{"name":"b","namespace":""}}"#,
                Some(Scope::Namespaced),
                "items[1] has no metadata.namespace",
            ),
        ];
        for (item, scope, want) in cases {
            let body = list(&format!("{good},{item}"));
            let result = match scope {
                None => ObjectList::<DynamicObject>::from_json(body.as_bytes()),
                Some(s) => ObjectList::<DynamicObject>::from_json_scoped(body.as_bytes(), s),
            };
            match result {
                Err(e @ Error::Decode { what: "list", .. }) => {
                    assert!(e.to_string().contains(want), "{item}: {e}")
                }
                Ok(_) => panic!("{item} accepted"),
                Err(e) => panic!("{item}: {e}"),
            }
        }
        let ok = list(&format!(r#"{good},{{"metadata":{{"name":"n\u0031"}}}}"#));
        let nodes =
            ObjectList::<DynamicObject>::from_json_scoped(ok.as_bytes(), Scope::Cluster).unwrap();
        assert_eq!(nodes.items[1].name(), "n1");
        assert!(
            ObjectList::<DynamicObject>::from_json_scoped(list(good).as_bytes(), Scope::Namespaced)
                .is_ok()
        );
    }

    #[test]
    fn query_values_are_form_encoded() {
        let p = ListParams {
            label_selector: Some("a in (x y),b!=ü&c=#".into()),
            ..ListParams::default()
        };
        assert_eq!(
            p.to_query(),
            "labelSelector=a+in+%28x+y%29%2Cb%21%3D%C3%BC%26c%3D%23"
        );
    }

    #[test]
    fn encodes_every_parameter() {
        let p = ListParams {
            label_selector: Some("a!=b".into()),
            field_selector: Some("spec.nodeName=node-1".into()),
            shard_selector: Some("shardRange(object.metadata.uid, '0x0', '0x8')".into()),
            limit: Some(10),
            continue_token: Some("tok/=+".into()),
            resource_version: Some("5".into()),
            resource_version_match: Some(ResourceVersionMatch::Exact),
            timeout_seconds: Some(30),
        };
        assert_eq!(
            p.to_query(),
            "labelSelector=a%21%3Db&fieldSelector=spec.nodeName%3Dnode-1&shardSelector=shardRange%28object.metadata.uid%2C+%270x0%27%2C+%270x8%27%29&limit=10&continue=tok%2F%3D%2B&resourceVersion=5&resourceVersionMatch=Exact&timeoutSeconds=30"
        );
        assert_eq!(ListParams::default().to_query(), "");
        let w = WatchParams {
            resource_version: Some("7".into()),
            resource_version_match: Some(ResourceVersionMatch::NotOlderThan),
            send_initial_events: true,
            allow_watch_bookmarks: true,
            ..WatchParams::default()
        };
        assert_eq!(
            w.to_query(),
            "watch=true&resourceVersion=7&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&sendInitialEvents=true"
        );
    }
}
