//! The protobuf form of responses (`application/vnd.kubernetes.protobuf`), for the built-in
//! kinds that have one: objects, lists, watch frames and statuses, as the API server's protobuf
//! serializer writes them. Custom resources have none: negotiation never picks it for them.

use bytes::Bytes;
use kinformer_core::{ApiResource, INITIAL_EVENTS_END_ANNOTATION, Status};
use kinformer_protobuf::wire;

pub(crate) use kinformer_protobuf::convert::Codec;

use crate::render::ListMeta;
use crate::store::Stored;

/// The protobuf codec of `api`'s kind, when it is a built-in kind with one.
pub(crate) fn codec(api: &ApiResource) -> Option<&'static Codec> {
    kinformer_protobuf::convert::codec_for(&api.api_version, &api.kind)
}

/// The body of one object: the envelope naming its kind around its message. An object whose
/// JSON does not fit the kind's typed form (possible only for what the sim's own admin API
/// wrote) is an error naming why.
pub(crate) fn object_body(codec: &Codec, json: &[u8]) -> Result<Bytes, String> {
    let value: serde_json::Value = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    value_body(codec, &value)
}

/// [`object_body`] of an object already parsed.
pub(crate) fn value_body(codec: &Codec, value: &serde_json::Value) -> Result<Bytes, String> {
    let mut message = Vec::new();
    codec
        .encode_json(value, &mut message)
        .map_err(|e| format!("cannot encode the object as protobuf: {e}"))?;
    Ok(envelope(codec.api_version(), codec.kind(), &message))
}

fn envelope(api_version: &str, kind: &str, message: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(message.len() + 32);
    wire::encode_envelope(api_version, kind, message, &mut out);
    Bytes::from(out)
}

/// The message inside an object's body.
fn message_of(body: &Bytes) -> Result<Bytes, String> {
    wire::decode_envelope(body.clone())
        .map(|e| e.raw)
        .map_err(|e| e.to_string())
}

/// A list body: the envelope naming `<Kind>List` around the list's metadata and its items'
/// messages. The shard selector is not echoed: the protobuf `ListMeta` of the releases the
/// messages come from has no `shardInfo`.
pub(crate) fn list_body(
    codec: &Codec,
    meta: &ListMeta<'_>,
    items: &[std::sync::Arc<Stored>],
) -> Result<Bytes, String> {
    let mut messages = Vec::with_capacity(items.len());
    for o in items {
        messages.push(message_of(o.protobuf(codec)?)?);
    }
    let slices: Vec<&[u8]> = messages.iter().map(|m| &m[..]).collect();
    let wire_meta = wire::ListMeta {
        resource_version: Some(meta.resource_version.to_string()),
        continue_token: meta.continue_token.map(str::to_owned),
        remaining_item_count: meta.remaining.map(|r| r as i64),
    };
    let mut list = Vec::with_capacity(messages.iter().map(|m| m.len() + 8).sum::<usize>() + 64);
    wire::encode_list(&wire_meta, &slices, &mut list);
    Ok(envelope(
        codec.api_version(),
        &format!("{}List", codec.kind()),
        &list,
    ))
}

/// A watch frame (length prefix included) of an event whose object is `object_body`.
pub(crate) fn event_frame(event_type: wire::EventType, object_body: &[u8]) -> Bytes {
    let mut event = Vec::with_capacity(object_body.len() + 32);
    wire::encode_watch_event(event_type, object_body, &mut event);
    let mut frame = Vec::with_capacity(event.len() + 4);
    wire::encode_frame(&event, &mut frame);
    Bytes::from(frame)
}

/// The body of a status, as an error response or an ERROR event's object carries it.
pub(crate) fn status_body(status: &Status) -> Bytes {
    status_body_with_continue(status, None)
}

/// [`status_body`] with a continue token in its `metadata`, as the 410 of an expired continue
/// token carries one. The details (the object, the causes, the retry delay) are written when
/// the status has them, as the JSON form writes them.
pub(crate) fn status_body_with_continue(status: &Status, continue_token: Option<&str>) -> Bytes {
    let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    let s = wire::Status {
        metadata: wire::ListMeta {
            continue_token: continue_token.map(str::to_owned),
            ..wire::ListMeta::default()
        },
        status: Some(if status.status.is_empty() {
            "Failure".to_owned()
        } else {
            status.status.clone()
        }),
        message: Some(status.message.clone()),
        reason: Some(status.reason.clone()),
        details: status.details.as_ref().map(|d| wire::StatusDetails {
            name: some(&d.name),
            group: some(&d.group),
            kind: some(&d.kind),
            uid: some(&d.uid),
            causes: d
                .causes
                .iter()
                .map(|c| wire::StatusCause {
                    reason: some(&c.reason),
                    message: some(&c.message),
                    field: some(&c.field),
                })
                .collect(),
            retry_after_seconds: (d.retry_after_seconds > 0)
                .then(|| i32::try_from(d.retry_after_seconds).unwrap_or(i32::MAX)),
        }),
        code: Some(i32::from(status.code)),
    };
    let mut message = Vec::new();
    wire::encode_status(&s, &mut message);
    envelope("v1", "Status", &message)
}

/// The ERROR frame of a status.
pub(crate) fn error_frame(status: &Status) -> Bytes {
    event_frame(wire::EventType::Error, &status_body(status))
}

/// The BOOKMARK frame at `rv`: an empty object of the kind carrying only its resourceVersion
/// (and the initial-events-end annotation when it ends a streaming list).
pub(crate) fn bookmark_frame(codec: &Codec, rv: u64, initial_events_end: bool) -> Bytes {
    let mut metadata = serde_json::json!({ "resourceVersion": rv.to_string() });
    if initial_events_end {
        metadata["annotations"] = serde_json::json!({ INITIAL_EVENTS_END_ANNOTATION: "true" });
    }
    let object = serde_json::json!({ "metadata": metadata });
    let mut message = Vec::new();
    // An object with nothing but metadata fits every kind's typed form.
    let body = match codec.encode_json(&object, &mut message) {
        Ok(()) => envelope(codec.api_version(), codec.kind(), &message),
        Err(e) => {
            tracing::warn!(error = %e, "cannot encode a bookmark as protobuf");
            Bytes::new()
        }
    };
    event_frame(wire::EventType::Bookmark, &body)
}

/// A frame whose bytes are not a `WatchEvent` (a field whose length runs past the frame's end):
/// the protobuf stream's malformed line.
pub(crate) fn malformed_frame() -> Bytes {
    let mut frame = Vec::new();
    wire::encode_frame(b"\x0a\xff\xff\xff\x0f", &mut frame);
    Bytes::from(frame)
}

/// `frame` grown to `size` bytes (its length prefix excluded) by an unknown field appended to
/// its `WatchEvent` message, which a decoder skips: the protobuf stream's oversized line.
pub(crate) fn pad_frame(frame: &Bytes, size: usize) -> Bytes {
    let body = &frame[4.min(frame.len())..];
    // The field's key (field 15, length-delimited) and a length of up to five bytes.
    let overhead = body.len() + 1 + 5;
    let n = size.saturating_sub(overhead);
    let mut padded = Vec::with_capacity(overhead + n);
    padded.extend_from_slice(body);
    padded.push(15 << 3 | 2);
    let mut len = n as u64;
    // The length as a varint padded to five bytes, so that the total is exact.
    for i in 0..5 {
        let mut b = (len & 0x7f) as u8;
        len >>= 7;
        if i < 4 {
            b |= 0x80;
        }
        padded.push(b);
    }
    padded.resize(overhead + n, 0);
    let mut out = Vec::with_capacity(padded.len() + 4);
    wire::encode_frame(&padded, &mut out);
    Bytes::from(out)
}
