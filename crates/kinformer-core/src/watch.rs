//! Watch events, decoded once from one line of a watch stream.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::de::{self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::{Error, Object, ResourceVersion, Status};

/// The annotation a bookmark carries when it ends the initial events of a streaming list
/// (`sendInitialEvents=true`).
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// One event of a watch stream.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_core::{Object, WatchEvent};
///
/// let line = br#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"ns","resourceVersion":"10"}}}"#;
/// match WatchEvent::<Pod>::from_json(line).unwrap() {
///     WatchEvent::Added(pod) => assert_eq!(pod.resource_version(), Some("10")),
///     other => panic!("unexpected {other:?}"),
/// }
///
/// let line = br#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
/// match WatchEvent::<Pod>::from_json(line).unwrap() {
///     WatchEvent::Bookmark(b) => assert!(b.is_initial_events_end()),
///     other => panic!("unexpected {other:?}"),
/// }
/// ```
pub enum WatchEvent<K> {
    /// `ADDED`: an object was created (or entered the watch's selector).
    Added(Arc<K>),
    /// `MODIFIED`: an object changed.
    Modified(Arc<K>),
    /// `DELETED`: an object was deleted (or left the watch's selector); the object is its last state.
    Deleted(Arc<K>),
    /// `BOOKMARK`: the watch has seen everything up to this resource version.
    Bookmark(Bookmark),
    /// `ERROR`: the server ended the watch with this status (410 when the version is too old).
    Error(Status),
}

impl<K> Clone for WatchEvent<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Added(o) => Self::Added(Arc::clone(o)),
            Self::Modified(o) => Self::Modified(Arc::clone(o)),
            Self::Deleted(o) => Self::Deleted(Arc::clone(o)),
            Self::Bookmark(b) => Self::Bookmark(b.clone()),
            Self::Error(s) => Self::Error(s.clone()),
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for WatchEvent<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Added(o) => f.debug_tuple("Added").field(o).finish(),
            Self::Modified(o) => f.debug_tuple("Modified").field(o).finish(),
            Self::Deleted(o) => f.debug_tuple("Deleted").field(o).finish(),
            Self::Bookmark(b) => f.debug_tuple("Bookmark").field(b).finish(),
            Self::Error(s) => f.debug_tuple("Error").field(s).finish(),
        }
    }
}

/// A `BOOKMARK` event's content: a resource version, and annotations such as
/// [`INITIAL_EVENTS_END_ANNOTATION`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bookmark {
    /// The resource version the watch has reached.
    pub resource_version: ResourceVersion,
    /// The bookmark object's `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
}

impl Bookmark {
    /// `true` when this bookmark ends the initial events of a streaming list.
    pub fn is_initial_events_end(&self) -> bool {
        self.annotations
            .get(INITIAL_EVENTS_END_ANNOTATION)
            .is_some_and(|v| v == "true")
    }
}

impl<K: Object + DeserializeOwned> WatchEvent<K> {
    /// Decodes one line of a watch stream (`{"type": ..., "object": ...}`), decoding the object
    /// straight into `K` in one pass when `type` comes first, as the API server writes it.
    ///
    /// An `ADDED`, `MODIFIED` or `DELETED` line of a type that asks for the tape parser
    /// ([`Object::JSON_DECODER`]) is decoded with it. Otherwise, or if it refuses the line, the
    /// line is checked to be UTF-8 once, as a whole, and then parsed as text: parsing bytes
    /// would check every string again on its own, which cost a twentieth of a typed pipeline's
    /// time on dense pods (docs/benchmarks.md). A line that is not UTF-8 is parsed as bytes, so
    /// that its error names the place.
    pub fn from_json(line: &[u8]) -> Result<Self, Error> {
        if K::JSON_DECODER == crate::JsonDecoder::Tape
            && let Some(event) = Self::from_tape(line)
        {
            return Ok(event);
        }
        let event = match std::str::from_utf8(line) {
            Ok(text) => Self::parse(serde_json::Deserializer::from_str(text)),
            Err(_) => Self::parse(serde_json::Deserializer::from_slice(line)),
        };
        match event {
            Ok(Decoded::Event(e)) => Ok(e),
            Ok(Decoded::Unknown(t)) => Err(Error::UnknownEventType(t)),
            Err(source) => Err(Error::Decode {
                what: "watch event",
                source,
            }),
        }
    }

    /// An object event as the API server writes it (`type` first) through the tape parser;
    /// `None` for any other line, or one it refuses.
    fn from_tape(line: &[u8]) -> Option<Self> {
        /// The event's object; its `type` was read from the line's first bytes.
        #[derive(Deserialize)]
        struct ObjectEvent<K> {
            object: K,
        }
        let rest = line.strip_prefix(br#"{"type":""#)?;
        let event: fn(Arc<K>) -> Self = if rest.starts_with(br#"MODIFIED""#) {
            Self::Modified
        } else if rest.starts_with(br#"ADDED""#) {
            Self::Added
        } else if rest.starts_with(br#"DELETED""#) {
            Self::Deleted
        } else {
            return None;
        };
        let decoded: ObjectEvent<K> = crate::json::tape(line)?;
        Some(event(Arc::new(decoded.object)))
    }

    fn parse<'de, R: serde_json::de::Read<'de>>(
        mut de: serde_json::Deserializer<R>,
    ) -> Result<Decoded<K>, serde_json::Error> {
        EventSeed::<K>(PhantomData)
            .deserialize(&mut de)
            .and_then(|e| de.end().map(|()| e))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum EventType {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

impl EventType {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ADDED" => Self::Added,
            "MODIFIED" => Self::Modified,
            "DELETED" => Self::Deleted,
            "BOOKMARK" => Self::Bookmark,
            "ERROR" => Self::Error,
            _ => return None,
        })
    }
}

enum Decoded<K> {
    Event(WatchEvent<K>),
    Unknown(String),
}

#[derive(Deserialize)]
struct BookmarkObject {
    #[serde(default)]
    metadata: BookmarkMeta,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct BookmarkMeta {
    #[serde(default)]
    resource_version: String,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

/// The object of an event, decoded according to a type that is already known.
struct ObjectSeed<K>(EventType, PhantomData<K>);

impl<'de, K: DeserializeOwned> DeserializeSeed<'de> for ObjectSeed<K> {
    type Value = WatchEvent<K>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        Ok(match self.0 {
            EventType::Added => WatchEvent::Added(Arc::new(K::deserialize(d)?)),
            EventType::Modified => WatchEvent::Modified(Arc::new(K::deserialize(d)?)),
            EventType::Deleted => WatchEvent::Deleted(Arc::new(K::deserialize(d)?)),
            EventType::Error => WatchEvent::Error(Status::deserialize(d)?),
            EventType::Bookmark => {
                let b = BookmarkObject::deserialize(d)?;
                WatchEvent::Bookmark(Bookmark {
                    resource_version: b.metadata.resource_version.into(),
                    annotations: b.metadata.annotations.unwrap_or_default(),
                })
            }
        })
    }
}

/// The keys of a watch event, read without allocating.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Field {
    Type,
    Object,
    #[serde(other)]
    Other,
}

/// The value of `type`: a known event type, or the unknown string.
struct TypeField(Result<EventType, String>);

impl<'de> Deserialize<'de> for TypeField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = TypeField;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a watch event type string")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<TypeField, E> {
                Ok(TypeField(EventType::parse(s).ok_or_else(|| s.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

struct EventSeed<K>(PhantomData<K>);

impl<'de, K: DeserializeOwned> DeserializeSeed<'de> for EventSeed<K> {
    type Value = Decoded<K>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, K: DeserializeOwned> Visitor<'de> for EventSeed<K> {
    type Value = Decoded<K>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a watch event object with \"type\" and \"object\"")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kind: Option<Result<EventType, String>> = None;
        let mut event: Option<WatchEvent<K>> = None;
        // Only when "object" comes before "type": keep its text and decode it afterwards.
        let mut early_object: Option<Box<RawValue>> = None;
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Type => {
                    if kind.is_some() {
                        return Err(de::Error::duplicate_field("type"));
                    }
                    kind = Some(map.next_value::<TypeField>()?.0);
                }
                Field::Object => {
                    if event.is_some() || early_object.is_some() {
                        return Err(de::Error::duplicate_field("object"));
                    }
                    match &kind {
                        Some(Ok(t)) => {
                            event = Some(map.next_value_seed(ObjectSeed(*t, PhantomData))?)
                        }
                        Some(Err(_)) => {
                            map.next_value::<IgnoredAny>()?;
                        }
                        None => early_object = Some(map.next_value()?),
                    }
                }
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let kind = match kind {
            None => return Err(de::Error::missing_field("type")),
            Some(Err(unknown)) => return Ok(Decoded::Unknown(unknown)),
            Some(Ok(t)) => t,
        };
        if let Some(raw) = early_object {
            let mut de = serde_json::Deserializer::from_str(raw.get());
            event = Some(
                ObjectSeed(kind, PhantomData)
                    .deserialize(&mut de)
                    .map_err(de::Error::custom)?,
            );
        }
        event
            .map(Decoded::Event)
            .ok_or_else(|| de::Error::missing_field("object"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DynamicObject, Object, PartialObjectMetadata};
    use k8s_openapi::api::core::v1::Pod;

    const POD_ADDED: &str = r#"{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"nginx-7c5ddbdf54-2xq9b","generateName":"nginx-7c5ddbdf54-","namespace":"default","uid":"8a1c0b2e-4a45-4c1e-9b8e-2d3f5a6b7c8d","resourceVersion":"51234","creationTimestamp":"2024-05-01T10:00:00Z","labels":{"app":"nginx","pod-template-hash":"7c5ddbdf54"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"nginx-7c5ddbdf54","uid":"11111111-2222-3333-4444-555555555555","controller":true,"blockOwnerDeletion":true}]},"spec":{"containers":[{"name":"nginx","image":"nginx:1.27","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}],"nodeName":"node-1","restartPolicy":"Always"},"status":{"phase":"Running","podIP":"10.244.1.7","conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2024-05-01T10:00:05Z"}]}}}"#;

    /// A pod with three containers (a `Vec` that `serde_json` grows to a capacity of four).
    fn three_containers(kind: &str) -> String {
        let mut pod =
            serde_json::from_str::<serde_json::Value>(POD_ADDED).unwrap()["object"].clone();
        let c = pod["spec"]["containers"][0].clone();
        pod["spec"]["containers"] = serde_json::json!([c, c, c]);
        // `type` first, as the API server writes it (a `json!` map would sort it last).
        format!(r#"{{"type":"{kind}","object":{pod}}}"#)
    }

    #[test]
    fn typed_objects_take_the_tape_parser_and_get_no_spare_capacity() {
        for kind in ["ADDED", "MODIFIED", "DELETED"] {
            let line = three_containers(kind);
            let (WatchEvent::Added(p) | WatchEvent::Modified(p) | WatchEvent::Deleted(p)) =
                WatchEvent::<Pod>::from_json(line.as_bytes()).unwrap()
            else {
                panic!("{kind} did not decode to an object event");
            };
            let containers = &p.spec.as_ref().unwrap().containers;
            assert_eq!(containers.len(), 3);
            assert_eq!(
                containers.capacity(),
                3,
                "a Vec with spare capacity: not the tape"
            );
            // The same pod as serde_json decodes it.
            let plain: serde_json::Value = serde_json::from_str(&line).unwrap();
            assert_eq!(
                *p,
                serde_json::from_value::<Pod>(plain["object"].clone()).unwrap()
            );
        }
        // serde_json's own decode would have left room for a fourth.
        let plain: serde_json::Value = serde_json::from_str(&three_containers("ADDED")).unwrap();
        let text = plain["object"].to_string();
        let grown: Pod = serde_json::from_str(&text).unwrap();
        assert_eq!(grown.spec.unwrap().containers.capacity(), 4);
    }

    #[test]
    fn what_the_tape_parser_refuses_gets_serde_jsons_error() {
        let line = three_containers("MODIFIED")
            .replace("\"containerPort\":80", "\"containerPort\":\"80\"");
        let err = WatchEvent::<Pod>::from_json(line.as_bytes()).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::Decode { .. }), "{err:?}");
        assert!(
            text.contains("invalid type") && text.contains("column"),
            "{text}"
        );
        // A type that keeps the default parser decodes the same line's shape as before.
        let line = three_containers("MODIFIED");
        let Ok(WatchEvent::Modified(o)) = WatchEvent::<DynamicObject>::from_json(line.as_bytes())
        else {
            panic!("a dynamic object did not decode");
        };
        assert_eq!(o.name(), "nginx-7c5ddbdf54-2xq9b");
    }

    #[test]
    fn a_line_that_is_not_utf8_is_a_decode_error_naming_the_place() {
        // A name whose bytes are not UTF-8: the line cannot be parsed as text, and the bytes
        // parser names the column of the bad string.
        let mut line = br#"{"type":"ADDED","object":{"metadata":{"name":"a"#.to_vec();
        line.extend_from_slice(b"\xff\xfe");
        line.extend_from_slice(br#""}}}"#);
        let err = WatchEvent::<Pod>::from_json(&line).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::Decode { .. }), "{err:?}");
        assert!(
            text.contains("unicode") && text.contains("column"),
            "{text}"
        );
        // Valid text with escapes decodes as before.
        let escaped = POD_ADDED.replace("nginx:1.27", "nginx:\\u00e9\\n");
        let Ok(WatchEvent::Added(p)) = WatchEvent::<Pod>::from_json(escaped.as_bytes()) else {
            panic!("an escaped string did not decode");
        };
        let image = p.spec.as_ref().unwrap().containers[0].image.as_deref();
        assert_eq!(image, Some("nginx:\u{e9}\n"));
    }

    #[test]
    fn decodes_every_event_type() {
        let modified = POD_ADDED.replace("ADDED", "MODIFIED");
        let deleted = POD_ADDED.replace("ADDED", "DELETED");
        let cases: Vec<(&str, &str)> = vec![
            (POD_ADDED, "Added"),
            (&modified, "Modified"),
            (&deleted, "Deleted"),
        ];
        for (line, want) in cases {
            let ev = WatchEvent::<Pod>::from_json(line.as_bytes()).unwrap();
            let (got, pod) = match ev {
                WatchEvent::Added(p) => ("Added", p),
                WatchEvent::Modified(p) => ("Modified", p),
                WatchEvent::Deleted(p) => ("Deleted", p),
                other => panic!("{other:?}"),
            };
            assert_eq!(got, want);
            assert_eq!(pod.key().as_str(), "default/nginx-7c5ddbdf54-2xq9b");
            assert_eq!(pod.resource_version(), Some("51234"));
            assert_eq!(pod.labels()["app"], "nginx");
            let owners = pod.owner_references();
            assert_eq!(owners.len(), 1);
            assert_eq!(owners[0].uid, "11111111-2222-3333-4444-555555555555");
            assert!(owners[0].controller);
            assert_eq!(
                pod.spec.as_ref().unwrap().node_name.as_deref(),
                Some("node-1")
            );
        }
    }

    #[test]
    fn decodes_object_before_type() {
        let line =
            r#"{"object":{"metadata":{"name":"a","resourceVersion":"3"}},"type":"MODIFIED"}"#;
        match WatchEvent::<DynamicObject>::from_json(line.as_bytes()).unwrap() {
            WatchEvent::Modified(o) => assert_eq!(o.resource_version(), Some("3")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn decodes_bookmarks() {
        let plain = r#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"12746","creationTimestamp":null},"spec":{"containers":null},"status":{}}}"#;
        match WatchEvent::<Pod>::from_json(plain.as_bytes()).unwrap() {
            WatchEvent::Bookmark(b) => {
                assert_eq!(b.resource_version.as_str(), "12746");
                assert!(!b.is_initial_events_end());
            }
            other => panic!("{other:?}"),
        }
        let end = r#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"99","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
        match WatchEvent::<PartialObjectMetadata>::from_json(end.as_bytes()).unwrap() {
            WatchEvent::Bookmark(b) => assert!(b.is_initial_events_end()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn decodes_error_events() {
        let line = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 5 (30)","reason":"Expired","code":410}}"#;
        match WatchEvent::<Pod>::from_json(line.as_bytes()).unwrap() {
            WatchEvent::Error(s) => {
                assert!(s.is_gone());
                assert_eq!(s.code, 410);
                assert_eq!(s.message, "too old resource version: 5 (30)");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rejects_bad_lines_with_typed_errors() {
        let cases: &[(&str, &str)] = &[
            (r#"{"type":"ADDED","object":{"metadata":"#, "Decode"),
            (r#"{"type":"ADDED"}"#, "Decode"),
            (r#"{"object":{}}"#, "Decode"),
            (
                r#"{"type":"ADDED","object":{"metadata":{"name":5}}}"#,
                "Decode",
            ),
            (r#"{"type":"ADDED","object":{}} trailing"#, "Decode"),
            (r#"[1,2]"#, "Decode"),
            ("", "Decode"),
            (r#"{"type":"EXPLODED","object":{}}"#, "Unknown"),
        ];
        for (line, want) in cases {
            let err = WatchEvent::<DynamicObject>::from_json(line.as_bytes()).unwrap_err();
            let got = match err {
                Error::Decode { .. } => "Decode",
                Error::UnknownEventType(_) => "Unknown",
                other => panic!("{line}: {other}"),
            };
            assert_eq!(got, *want, "{line}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = WatchEvent::<Pod>::from_json(&bytes);
        }
    }
}
