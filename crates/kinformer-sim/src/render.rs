//! Response bodies built by concatenating pre-rendered object JSON.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kinformer_core::{INITIAL_EVENTS_END_ANNOTATION, Status};
use serde_json::Value;

use crate::store::Stored;

/// List bodies are cut into chunks of about this size.
pub(crate) const CHUNK: usize = 256 * 1024;

/// The JSON of a `Status` object, with `kind`, `apiVersion` and `metadata` as the server sends it.
pub(crate) fn status_json(status: &Status) -> Bytes {
    status_json_with_continue(status, None)
}

/// The JSON of a `Status` whose `metadata.continue` carries a continue token.
pub(crate) fn status_json_with_continue(status: &Status, continue_token: Option<&str>) -> Bytes {
    let mut v = serde_json::to_value(status).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        let mut out = serde_json::Map::new();
        out.insert("kind".into(), "Status".into());
        out.insert("apiVersion".into(), "v1".into());
        let mut meta = serde_json::Map::new();
        if let Some(c) = continue_token {
            meta.insert("continue".into(), c.into());
        }
        out.insert("metadata".into(), Value::Object(meta));
        out.append(m);
        v = Value::Object(out);
    }
    Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
}

/// One line of a JSON watch stream as the API server writes it: `{"type":"<kind>","object":<object>}`
/// and a newline, `type` first.
///
/// The order matters to a client: kinformer's decoder (and any that reads the type before it
/// decodes the object) takes a one-pass path only when `type` comes first, and falls back to a
/// slower one otherwise. A line built with `serde_json::json!` has its keys sorted, `object`
/// before `type`, which no API server writes; benches and tests that build watch lines by hand
/// should build them with this.
///
/// ```
/// let line = kinformer_sim::watch_event_line("ADDED", br#"{"metadata":{"name":"a"}}"#);
/// assert_eq!(&line[..], &b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n"[..]);
/// ```
pub fn watch_event_line(kind: &str, object: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(object.len() + kind.len() + 24);
    b.put_slice(b"{\"type\":\"");
    b.put_slice(kind.as_bytes());
    b.put_slice(b"\",\"object\":");
    b.put_slice(object);
    b.put_slice(b"}\n");
    b.freeze()
}

/// The fields besides `metadata` that an empty object of a built-in kind serialises to (Go's
/// zero values), which is what the watch cache's bookmark objects are.
fn empty_object_fields(kind: &str, api_version: &str) -> &'static str {
    match (api_version, kind) {
        ("v1", "Pod") => r#","spec":{"containers":null},"status":{}"#,
        ("v1", "Service") => r#","spec":{},"status":{"loadBalancer":{}}"#,
        ("v1", "Namespace") => r#","spec":{},"status":{}"#,
        ("v1", "Node") => {
            r#","spec":{},"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":0}},"nodeInfo":{"machineID":"","systemUUID":"","bootID":"","kernelVersion":"","osImage":"","containerRuntimeVersion":"","kubeletVersion":"","kubeProxyVersion":"","operatingSystem":"","architecture":""}}"#
        }
        ("v1", "Event") => {
            r#","involvedObject":{},"reason":"","message":"","source":{},"firstTimestamp":null,"lastTimestamp":null,"type":"","eventTime":null,"reportingComponent":"","reportingInstance":"""#
        }
        ("apps/v1", "Deployment") => {
            r#","spec":{"selector":null,"template":{"metadata":{"creationTimestamp":null},"spec":{"containers":null}},"strategy":{}},"status":{}"#
        }
        ("apps/v1", "ReplicaSet") => {
            r#","spec":{"selector":null,"template":{"metadata":{"creationTimestamp":null},"spec":{"containers":null}}},"status":{"replicas":0}"#
        }
        ("apps/v1", "StatefulSet") => {
            r#","spec":{"selector":null,"template":{"metadata":{"creationTimestamp":null},"spec":{"containers":null}},"serviceName":"","updateStrategy":{}},"status":{"replicas":0,"availableReplicas":0}"#
        }
        ("apps/v1", "DaemonSet") => {
            r#","spec":{"selector":null,"template":{"metadata":{"creationTimestamp":null},"spec":{"containers":null}},"updateStrategy":{}},"status":{"currentNumberScheduled":0,"numberMisscheduled":0,"desiredNumberScheduled":0,"numberReady":0}"#
        }
        _ => "",
    }
}

/// Whether the kind is one the API server serves from Go types (its zero-value fields, such as
/// `"creationTimestamp":null`, appear in bookmarks); custom resources are unstructured.
fn is_builtin(api_version: &str) -> bool {
    matches!(api_version, "v1" | "apps/v1" | "meta.k8s.io/v1")
}

/// The object of a `BOOKMARK` shaped as the watch cache sends it: an empty object of the watched
/// kind whose `metadata` holds only `resourceVersion` (plus the initial-events-end annotation when
/// it ends a streaming list). Built-in kinds carry their Go zero values
/// (`"creationTimestamp":null`, `"spec":{"containers":null}` for a pod); custom resources carry
/// only the three fields.
pub(crate) fn bookmark_object(
    kind: &str,
    api_version: &str,
    rv: u64,
    initial_events_end: bool,
) -> Bytes {
    let annotations = if initial_events_end {
        format!(",\"annotations\":{{\"{INITIAL_EVENTS_END_ANNOTATION}\":\"true\"}}")
    } else {
        String::new()
    };
    let created = if is_builtin(api_version) {
        ",\"creationTimestamp\":null"
    } else {
        ""
    };
    let rest = empty_object_fields(kind, api_version);
    Bytes::from(format!(
        "{{\"kind\":\"{kind}\",\"apiVersion\":\"{api_version}\",\"metadata\":{{\"resourceVersion\":\"{rv}\"{created}{annotations}}}{rest}}}"
    ))
}

/// A `BOOKMARK` line whose object is [`bookmark_object`].
pub(crate) fn bookmark_line(
    kind: &str,
    api_version: &str,
    rv: u64,
    initial_events_end: bool,
) -> Bytes {
    watch_event_line(
        "BOOKMARK",
        &bookmark_object(kind, api_version, rv, initial_events_end),
    )
}

/// An `ERROR` line carrying a status.
pub(crate) fn error_line(status: &Status) -> Bytes {
    watch_event_line("ERROR", &status_json(status))
}

/// The metadata of a list response.
#[derive(Debug, Default)]
pub(crate) struct ListMeta<'a> {
    pub(crate) resource_version: u64,
    pub(crate) continue_token: Option<&'a str>,
    pub(crate) remaining: Option<u64>,
    /// The shard selector the list applied, echoed as `shardInfo.selector` (KEP-5866).
    pub(crate) shard_selector: Option<&'a str>,
}

impl ListMeta<'_> {
    /// The metadata as a JSON object, for the lists that are rendered whole (Tables, YAML).
    pub(crate) fn to_json(&self) -> Value {
        let mut m = serde_json::json!({"resourceVersion": self.resource_version.to_string()});
        if let Some(c) = self.continue_token {
            m["continue"] = Value::from(c);
        }
        if let Some(r) = self.remaining {
            m["remainingItemCount"] = Value::from(r);
        }
        if let Some(s) = self.shard_selector {
            m["shardInfo"] = serde_json::json!({"selector": s});
        }
        m
    }
}

/// A list body, rendered lazily chunk by chunk (about [`CHUNK`] bytes each) from pre-rendered
/// objects, so that a list of any size is never held in memory whole.
pub(crate) struct ListChunks {
    head: Option<Bytes>,
    items: std::vec::IntoIter<Arc<Stored>>,
    meta_only: bool,
    first: bool,
    done: bool,
}

impl ListChunks {
    pub(crate) fn new(
        kind: &str,
        api_version: &str,
        meta: &ListMeta<'_>,
        items: Vec<Arc<Stored>>,
        meta_only: bool,
    ) -> Self {
        let mut b = BytesMut::with_capacity(256);
        b.put_slice(b"{\"kind\":\"");
        b.put_slice(kind.as_bytes());
        b.put_slice(b"\",\"apiVersion\":\"");
        b.put_slice(api_version.as_bytes());
        b.put_slice(b"\",\"metadata\":{\"resourceVersion\":\"");
        b.put_slice(meta.resource_version.to_string().as_bytes());
        b.put_slice(b"\"");
        if let Some(c) = meta.continue_token {
            b.put_slice(b",\"continue\":\"");
            b.put_slice(c.as_bytes());
            b.put_slice(b"\"");
        }
        if let Some(r) = meta.remaining {
            b.put_slice(b",\"remainingItemCount\":");
            b.put_slice(r.to_string().as_bytes());
        }
        if let Some(s) = meta.shard_selector {
            b.put_slice(b",\"shardInfo\":{\"selector\":");
            b.put_slice(&serde_json::to_vec(s).unwrap_or_else(|_| b"\"\"".to_vec()));
            b.put_slice(b"}");
        }
        b.put_slice(b"},\"items\":[");
        Self {
            head: Some(b.freeze()),
            items: items.into_iter(),
            meta_only,
            first: true,
            done: false,
        }
    }
}

impl ListChunks {
    /// The length of the whole body, known before it is rendered.
    pub(crate) fn total_len(&self) -> usize {
        let items: usize = self
            .items
            .as_slice()
            .iter()
            .map(|o| {
                if self.meta_only {
                    o.meta_json().len()
                } else {
                    o.item_len()
                }
            })
            .sum();
        let head = self.head.as_ref().map_or(0, Bytes::len);
        head + items + self.items.len().saturating_sub(1) + 2
    }
}

impl Iterator for ListChunks {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        let mut b = BytesMut::with_capacity(CHUNK + 16 * 1024);
        if let Some(h) = self.head.take() {
            b.put_slice(&h);
        }
        while b.len() < CHUNK {
            let Some(o) = self.items.next() else {
                b.put_slice(b"]}");
                self.done = true;
                break;
            };
            if !self.first {
                b.put_u8(b',');
            }
            self.first = false;
            if self.meta_only {
                // Metadata-only list items keep their kind, as the real server sends them.
                b.put_slice(o.meta_json());
            } else {
                let (open, rest) = o.item_json();
                b.put_slice(open);
                b.put_slice(rest);
            }
        }
        Some(b.freeze())
    }
}

/// Responses larger than this are gzip-compressed for clients that accept it, as the API
/// server's `APIResponseCompression` does.
pub(crate) const GZIP_THRESHOLD: usize = 128 * 1024;

/// Gzips a body made of chunks, chunk by chunk, at the speed-first level the API server uses.
pub(crate) struct GzipChunks<I> {
    inner: I,
    encoder: Option<flate2::write::GzEncoder<Vec<u8>>>,
}

impl<I> GzipChunks<I> {
    pub(crate) fn new(inner: I) -> Self {
        Self {
            inner,
            encoder: Some(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::fast(),
            )),
        }
    }
}

impl<I: Iterator<Item = Bytes>> Iterator for GzipChunks<I> {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        use std::io::Write as _;
        // Bounded by the inner iterator, which is finite.
        loop {
            let encoder = self.encoder.as_mut()?;
            match self.inner.next() {
                Some(chunk) => {
                    // Writing into a Vec cannot fail.
                    let _ = encoder.write_all(&chunk);
                    let out = std::mem::take(encoder.get_mut());
                    if !out.is_empty() {
                        return Some(Bytes::from(out));
                    }
                }
                None => {
                    let out = self.encoder.take()?.finish().unwrap_or_default();
                    return Some(Bytes::from(out));
                }
            }
        }
    }
}

/// Gzips a whole body.
pub(crate) fn gzip(body: &[u8]) -> Bytes {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4),
        flate2::Compression::fast(),
    );
    // Writing into a Vec cannot fail.
    let _ = encoder.write_all(body);
    Bytes::from(encoder.finish().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_chunks_are_valid_json_across_chunks() {
        let store = crate::store::Store::new(1000);
        let cms = kinformer_core::ApiResource::new(
            "",
            "v1",
            "ConfigMap",
            "configmaps",
            kinformer_core::Scope::Namespaced,
        );
        let big = "a".repeat(5000);
        for i in 0..200 {
            store.create(&cms, serde_json::json!({"metadata": {"name": format!("c{i:03}")}, "data": {"x": big}})).unwrap();
        }
        let items: Vec<_> = (0..200)
            .map(|i| store.get_stored(&cms, None, &format!("c{i:03}")).unwrap())
            .collect();
        let meta = ListMeta {
            resource_version: 42,
            continue_token: Some("tok"),
            remaining: Some(3),
            shard_selector: None,
        };
        let list = ListChunks::new("ConfigMapList", "v1", &meta, items.clone(), false);
        let total = list.total_len();
        let chunks: Vec<Bytes> = list.collect();
        assert_eq!(total, chunks.iter().map(Bytes::len).sum::<usize>());
        assert!(chunks.len() > 1);
        let v: Value = serde_json::from_slice(&chunks.concat()).unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], "42");
        assert_eq!(v["metadata"]["continue"], "tok");
        assert_eq!(v["metadata"]["remainingItemCount"], 3);
        assert_eq!(v["items"].as_array().unwrap().len(), 200);
        assert_eq!(v["items"][199]["metadata"]["name"], "c199");
        // List items carry no kind or apiVersion; the list's kind says what they are.
        assert_eq!(v["items"][0].get("kind"), None);
        assert_eq!(v["items"][0].get("apiVersion"), None);
        let meta_only: Vec<Bytes> = ListChunks::new(
            "PartialObjectMetadataList",
            "meta.k8s.io/v1",
            &meta,
            items,
            true,
        )
        .collect();
        let v: Value = serde_json::from_slice(&meta_only.concat()).unwrap();
        assert_eq!(v["items"][0]["kind"], "PartialObjectMetadata");
        let empty: Vec<Bytes> =
            ListChunks::new("PodList", "v1", &ListMeta::default(), Vec::new(), false).collect();
        let v: Value = serde_json::from_slice(&empty.concat()).unwrap();
        assert_eq!(v["items"], serde_json::json!([]));
    }

    #[test]
    fn bookmarks_of_every_kind_are_valid_json() {
        for (kind, api_version) in [
            ("Pod", "v1"),
            ("Service", "v1"),
            ("ConfigMap", "v1"),
            ("Namespace", "v1"),
            ("Node", "v1"),
            ("Event", "v1"),
            ("Deployment", "apps/v1"),
            ("ReplicaSet", "apps/v1"),
            ("StatefulSet", "apps/v1"),
            ("DaemonSet", "apps/v1"),
            ("PartialObjectMetadata", "meta.k8s.io/v1"),
            ("Widget", "example.com/v1"),
        ] {
            let b = bookmark_line(kind, api_version, 9, false);
            let v: Value = serde_json::from_slice(&b).unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(v["object"]["kind"], kind);
            assert_eq!(v["object"]["metadata"]["resourceVersion"], "9");
        }
    }

    #[test]
    fn lines_are_valid_json() {
        let b = bookmark_line("Pod", "v1", 7, true);
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            v["object"]["metadata"]["annotations"][INITIAL_EVENTS_END_ANNOTATION],
            "true"
        );
        let e = error_line(&Status::failure(410, "Expired", "too old"));
        let v: Value = serde_json::from_slice(&e).unwrap();
        assert_eq!(
            (
                v["type"].as_str(),
                v["object"]["kind"].as_str(),
                v["object"]["code"].as_u64()
            ),
            (Some("ERROR"), Some("Status"), Some(410))
        );
    }
}
