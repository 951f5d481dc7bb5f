//! The wire framing on hand-built bytes, and against k8s-pb's prost messages (an encoder and a
//! decoder written independently of this crate's) as the reference for field numbers.

use bytes::Bytes;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb;
use k8s_pb::apimachinery::pkg::runtime::{RawExtension, TypeMeta, Unknown};
use kinformer_protobuf::Error;
use kinformer_protobuf::wire::{
    self, EventType, FrameDecoder, ListMeta, RawWatchEvent, Status, StatusCause, StatusDetails,
};
use prost::Message;

fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    wire::encode_envelope(api_version, kind, raw, &mut out);
    out
}

#[test]
fn envelope_bytes_are_what_the_go_encoder_writes() {
    let body = envelope("v1", "Pod", b"\x0a\x00");
    let expected: &[u8] = b"k8s\0\
        \x0a\x09\x0a\x02v1\x12\x03Pod\
        \x12\x02\x0a\x00\
        \x1a\x00\
        \x22\x00";
    assert_eq!(body, expected);
}

#[test]
fn envelope_round_trips_and_raw_is_a_slice_of_the_body() {
    let body = Bytes::from(envelope("apps/v1", "Deployment", b"object bytes"));
    let decoded = wire::decode_envelope(body.clone()).unwrap();
    assert_eq!(decoded.api_version, "apps/v1");
    assert_eq!(decoded.kind, "Deployment");
    assert_eq!(&decoded.raw[..], b"object bytes");
    let inside = body.as_ptr_range();
    assert!(inside.contains(&decoded.raw.as_ptr()), "raw was copied");
}

#[test]
fn envelope_agrees_with_k8s_pb() {
    let body = envelope("v1", "Status", b"\x01\x02\x03");
    let unknown = Unknown::decode(&body[4..]).unwrap();
    assert_eq!(
        unknown.type_meta,
        Some(TypeMeta {
            api_version: Some("v1".into()),
            kind: Some("Status".into())
        })
    );
    assert_eq!(unknown.raw.as_deref(), Some(&[1u8, 2, 3][..]));
    assert_eq!(unknown.content_encoding.as_deref(), Some(""));
    assert_eq!(unknown.content_type.as_deref(), Some(""));

    // And the other way: k8s-pb's encoding (no empty fields) reads back.
    let mut body = wire::MAGIC.to_vec();
    Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some("v1".into()),
            kind: Some("PodList".into()),
        }),
        raw: Some(b"xyz".to_vec()),
        content_encoding: None,
        content_type: Some(wire::CONTENT_TYPE.into()),
    }
    .encode(&mut body)
    .unwrap();
    let decoded = wire::decode_envelope(body.into()).unwrap();
    assert_eq!(
        (decoded.api_version.as_str(), decoded.kind.as_str()),
        ("v1", "PodList")
    );
    assert_eq!(&decoded.raw[..], b"xyz");
}

#[test]
fn a_body_without_the_magic_is_not_protobuf() {
    for body in [
        &b""[..],
        b"k8s",
        b"{\"kind\":\"Pod\"}",
        b"k8s\x01\x0a\x00",
        b"<html>",
    ] {
        assert!(
            matches!(
                wire::decode_envelope(Bytes::copy_from_slice(body)),
                Err(Error::NotProtobuf)
            ),
            "{body:?}"
        );
    }
}

#[test]
fn the_magic_alone_is_an_empty_envelope() {
    let decoded = wire::decode_envelope(Bytes::from_static(b"k8s\0")).unwrap();
    assert_eq!(decoded.kind, "");
    assert!(decoded.raw.is_empty());
}

#[test]
fn a_content_encoding_is_refused() {
    let mut body = envelope("v1", "Pod", b"");
    // Replace the empty contentEncoding (`1a 00`, then `22 00`) with "gzip".
    body.truncate(body.len() - 4);
    body.extend_from_slice(b"\x1a\x04gzip\x22\x00");
    match wire::decode_envelope(body.into()) {
        Err(Error::ContentEncoding(e)) => assert_eq!(e, "gzip"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_fields_are_skipped() {
    let mut body = b"k8s\0".to_vec();
    // Field 9 varint, field 10 fixed64, field 11 fixed32, field 12 bytes, field 13 a group.
    body.extend_from_slice(b"\x48\x96\x01");
    body.extend_from_slice(b"\x51\x01\x02\x03\x04\x05\x06\x07\x08");
    body.extend_from_slice(b"\x5d\x01\x02\x03\x04");
    body.extend_from_slice(b"\x62\x03abc");
    body.extend_from_slice(b"\x6b\x08\x01\x6c");
    // typeMeta with an unknown field inside, then raw.
    body.extend_from_slice(b"\x0a\x0b\x0a\x02v1\x12\x03Pod\x78\x05");
    body.extend_from_slice(b"\x12\x02hi");
    body.extend_from_slice(b"\x62\x00");
    let decoded = wire::decode_envelope(body.into()).unwrap();
    assert_eq!(
        (decoded.api_version.as_str(), decoded.kind.as_str()),
        ("v1", "Pod")
    );
    assert_eq!(&decoded.raw[..], b"hi");
}

#[test]
fn a_known_field_of_the_wrong_wire_type_is_a_decode_error() {
    // raw (2) as a varint.
    let body = Bytes::from_static(b"k8s\0\x10\x05");
    assert!(matches!(
        wire::decode_envelope(body),
        Err(Error::Decode {
            what: "Unknown",
            ..
        })
    ));
    // kind (2 of typeMeta) as fixed32.
    let body = Bytes::from_static(b"k8s\0\x0a\x05\x15\x01\x02\x03\x04");
    assert!(matches!(
        wire::decode_envelope(body),
        Err(Error::Decode {
            what: "TypeMeta",
            ..
        })
    ));
    // A watch event's type as a varint.
    assert!(matches!(
        wire::decode_watch_event(Bytes::from_static(b"\x08\x01")),
        Err(Error::Decode {
            what: "WatchEvent",
            ..
        })
    ));
    // remainingItemCount as bytes.
    assert!(matches!(
        wire::decode_list(Bytes::from_static(b"\x0a\x03\x22\x01\x00")),
        Err(Error::Decode {
            what: "ListMeta",
            ..
        })
    ));
    // A Status code as bytes.
    assert!(matches!(
        wire::decode_status(b"\x32\x00"),
        Err(Error::Decode { what: "Status", .. })
    ));
}

#[test]
fn a_length_that_claims_too_much_is_an_error() {
    // raw claims 2^62 bytes: no allocation, an error.
    let body = Bytes::from_static(b"k8s\0\x12\x80\x80\x80\x80\x80\x80\x80\x80\x40abc");
    assert!(matches!(
        wire::decode_envelope(body),
        Err(Error::Decode {
            what: "Unknown",
            ..
        })
    ));
    // typeMeta claims one byte more than there is.
    let body = Bytes::from_static(b"k8s\0\x0a\x05\x0a\x02v1");
    assert!(matches!(
        wire::decode_envelope(body),
        Err(Error::Decode { .. })
    ));
    // An item claims more than the list holds.
    assert!(matches!(
        wire::decode_list(Bytes::from_static(b"\x12\x05abc")),
        Err(Error::Decode { what: "list", .. })
    ));
    // A varint that never ends.
    assert!(matches!(
        wire::decode_list(Bytes::from_static(b"\x20\xff\xff")),
        Err(Error::Decode { .. })
    ));
    // A string that is not UTF-8.
    assert!(matches!(
        wire::decode_status(b"\x1a\x02\xff\xfe"),
        Err(Error::Decode { what: "Status", .. })
    ));
}

fn watch_frame(event_type: EventType, object: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    wire::encode_watch_event(event_type, object, &mut out);
    out
}

#[test]
fn watch_event_bytes_are_what_the_go_encoder_writes() {
    let frame = watch_frame(EventType::Added, b"k8s\0");
    let expected: &[u8] = b"\x0a\x05ADDED\x12\x06\x0a\x04k8s\0";
    assert_eq!(frame, expected);
}

#[test]
fn watch_events_agree_with_k8s_pb() {
    let object = envelope("v1", "Pod", b"pod");
    let frame = watch_frame(EventType::Deleted, &object);
    let event = pb::WatchEvent::decode(&frame[..]).unwrap();
    assert_eq!(event.r#type.as_deref(), Some("DELETED"));
    assert_eq!(event.object.unwrap().raw.as_deref(), Some(&object[..]));

    let mut frame = Vec::new();
    pb::WatchEvent {
        r#type: Some("BOOKMARK".into()),
        object: Some(RawExtension {
            raw: Some(object.clone()),
        }),
    }
    .encode(&mut frame)
    .unwrap();
    let event = wire::decode_watch_event(frame.into()).unwrap();
    assert_eq!(event.event_type, EventType::Bookmark);
    assert_eq!(event.object, object);
}

#[test]
fn every_event_type_round_trips_and_the_object_is_a_slice() {
    let object = envelope("v1", "ConfigMap", b"cm");
    for event_type in [
        EventType::Added,
        EventType::Modified,
        EventType::Deleted,
        EventType::Bookmark,
        EventType::Error,
    ] {
        let frame = Bytes::from(watch_frame(event_type, &object));
        let event = wire::decode_watch_event(frame.clone()).unwrap();
        assert_eq!(
            event,
            RawWatchEvent {
                event_type,
                object: Bytes::from(object.clone())
            }
        );
        assert!(frame.as_ptr_range().contains(&event.object.as_ptr()));
    }
}

#[test]
fn an_enveloped_watch_event_is_read_too() {
    let object = envelope("v1", "Pod", b"pod");
    let frame = envelope(
        "meta.k8s.io/v1",
        "WatchEvent",
        &watch_frame(EventType::Modified, &object),
    );
    let event = wire::decode_watch_event(frame.into()).unwrap();
    assert_eq!(event.event_type, EventType::Modified);
    assert_eq!(event.object, object);

    let frame = envelope("v1", "Pod", b"");
    assert!(matches!(
        wire::decode_watch_event(frame.into()),
        Err(Error::UnexpectedKind { .. })
    ));
}

#[test]
fn watch_events_without_a_type_or_object_or_with_a_strange_type_are_refused() {
    assert!(matches!(
        wire::decode_watch_event(Bytes::new()),
        Err(Error::MissingField { field: "type", .. })
    ));
    assert!(matches!(
        wire::decode_watch_event(Bytes::from_static(b"\x0a\x05ADDED")),
        Err(Error::MissingField {
            field: "object",
            ..
        })
    ));
    assert!(matches!(
        wire::decode_watch_event(Bytes::from_static(b"\x0a\x08EXPLODED\x12\x00")),
        Err(Error::UnknownEventType(t)) if t == "EXPLODED"
    ));
    // An unknown field in the event and in its RawExtension is skipped.
    let event = wire::decode_watch_event(Bytes::from_static(
        b"\x18\x01\x0a\x05ADDED\x12\x05\x10\x07\x0a\x01x",
    ))
    .unwrap();
    assert_eq!(&event.object[..], b"x");
}

fn framed(frames: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        wire::encode_frame(f, &mut out);
    }
    out
}

#[test]
fn frames_are_length_prefixed_big_endian() {
    assert_eq!(framed(&[b"abc"]), b"\0\0\0\x03abc");
    assert_eq!(framed(&[b""]), b"\0\0\0\0");
}

#[test]
fn frames_split_across_many_tiny_chunks() {
    let big = vec![7u8; 300];
    let frames: [&[u8]; 4] = [b"first", b"", &big, b"last"];
    let stream = framed(&frames);
    for chunk in [1, 2, 3, 5, 7, 64] {
        let mut decoder = FrameDecoder::new(1024);
        let mut got = Vec::new();
        for piece in stream.chunks(chunk) {
            decoder.push(Bytes::copy_from_slice(piece));
            while let Some(frame) = decoder.next_frame().unwrap() {
                got.push(frame);
            }
        }
        decoder.finish().unwrap();
        assert_eq!(got, frames, "chunks of {chunk}");
    }
}

#[test]
fn a_frame_within_one_chunk_is_a_slice_of_it() {
    let stream = Bytes::from(framed(&[b"one", b"two"]));
    let mut decoder = FrameDecoder::new(16);
    decoder.push(stream.clone());
    let one = decoder.next_frame().unwrap().unwrap();
    let two = decoder.next_frame().unwrap().unwrap();
    assert_eq!((&one[..], &two[..]), (&b"one"[..], &b"two"[..]));
    assert!(stream.as_ptr_range().contains(&one.as_ptr()));
    assert!(stream.as_ptr_range().contains(&two.as_ptr()));
    assert_eq!(decoder.next_frame().unwrap(), None);
    decoder.finish().unwrap();
}

#[test]
fn a_frame_over_the_limit_is_refused_from_its_length_alone() {
    let mut decoder = FrameDecoder::new(10);
    decoder.push(Bytes::from_static(b"\0\0\0\x0aexactly10!"));
    assert_eq!(&decoder.next_frame().unwrap().unwrap()[..], b"exactly10!");
    // Only the length of the next frame: refused before any of its bytes arrive.
    decoder.push(Bytes::from_static(b"\xff\xff\xff\xff"));
    assert!(matches!(
        decoder.next_frame(),
        Err(Error::FrameTooLarge {
            len: 0xffff_ffff,
            limit: 10
        })
    ));
    // And it stays refused.
    decoder.push(Bytes::from_static(b"\0\0\0\x01x"));
    assert!(matches!(
        decoder.next_frame(),
        Err(Error::FrameTooLarge { .. })
    ));
    assert!(matches!(decoder.finish(), Err(Error::FrameTooLarge { .. })));
}

#[test]
fn a_stream_that_ends_mid_frame_is_truncated() {
    let mut decoder = FrameDecoder::new(64);
    decoder.finish().unwrap();
    decoder.push(Bytes::from_static(b"\0\0"));
    assert_eq!(decoder.next_frame().unwrap(), None);
    assert!(matches!(
        decoder.finish(),
        Err(Error::Truncated {
            what: "a watch frame's length"
        })
    ));
    decoder.push(Bytes::from_static(b"\0\x05ab"));
    assert_eq!(decoder.next_frame().unwrap(), None);
    assert!(matches!(
        decoder.finish(),
        Err(Error::Truncated {
            what: "a watch frame"
        })
    ));
    decoder.push(Bytes::from_static(b"cde"));
    assert_eq!(&decoder.next_frame().unwrap().unwrap()[..], b"abcde");
    decoder.finish().unwrap();
}

#[test]
fn list_bytes_are_what_the_go_encoder_writes() {
    let meta = ListMeta {
        resource_version: Some("42".into()),
        continue_token: None,
        remaining_item_count: Some(3),
    };
    let mut out = Vec::new();
    wire::encode_list(&meta, &[b"a", b""], &mut out);
    let expected: &[u8] = b"\x0a\x0a\x0a\x00\x12\x0242\x1a\x00\x20\x03\x12\x01a\x12\x00";
    assert_eq!(out, expected);
}

#[test]
fn lists_round_trip_with_items_as_slices() {
    let meta = ListMeta {
        resource_version: Some("1234".into()),
        continue_token: Some("token".into()),
        remaining_item_count: Some(-1),
    };
    let mut out = Vec::new();
    wire::encode_list(&meta, &[b"item one", b"item two"], &mut out);
    let message = Bytes::from(out);
    let list = wire::decode_list(message.clone()).unwrap();
    assert_eq!(list.meta, meta);
    assert_eq!(list.items, [&b"item one"[..], b"item two"]);
    for item in &list.items {
        assert!(message.as_ptr_range().contains(&item.as_ptr()));
    }
}

#[test]
fn lists_agree_with_k8s_pb() {
    let mut out = Vec::new();
    let meta = ListMeta {
        resource_version: Some("9".into()),
        continue_token: Some("c".into()),
        remaining_item_count: None,
    };
    wire::encode_list(&meta, &[], &mut out);
    // A PodList's metadata is a ListMeta at field 1: read it with k8s-pb's PodList.
    let pods = k8s_pb::api::core::v1::PodList::decode(&out[..]).unwrap();
    let pb_meta = pods.metadata.unwrap();
    assert_eq!(pb_meta.resource_version.as_deref(), Some("9"));
    assert_eq!(pb_meta.r#continue.as_deref(), Some("c"));
    assert_eq!(pb_meta.remaining_item_count, None);

    let mut out = Vec::new();
    k8s_pb::api::core::v1::PodList {
        metadata: Some(pb::ListMeta {
            resource_version: Some("77".into()),
            remaining_item_count: Some(5),
            ..Default::default()
        }),
        items: vec![Default::default(), Default::default()],
    }
    .encode(&mut out)
    .unwrap();
    let list = wire::decode_list(out.into()).unwrap();
    assert_eq!(list.meta.resource_version.as_deref(), Some("77"));
    assert_eq!(list.meta.continue_token, None);
    assert_eq!(list.meta.remaining_item_count, Some(5));
    assert_eq!(list.items.len(), 2);
}

#[test]
fn list_metadata_in_two_pieces_merges() {
    // metadata twice: the first sets resourceVersion, the second continue.
    let list = wire::decode_list(Bytes::from_static(
        b"\x0a\x03\x12\x015\x0a\x03\x1a\x01c\x12\x00",
    ))
    .unwrap();
    assert_eq!(list.meta.resource_version.as_deref(), Some("5"));
    assert_eq!(list.meta.continue_token.as_deref(), Some("c"));
    assert_eq!(list.items.len(), 1);
}

fn sample_status() -> Status {
    Status {
        metadata: ListMeta {
            continue_token: Some("next".into()),
            ..ListMeta::default()
        },
        status: Some("Failure".into()),
        message: Some("too old resource version: 1 (42)".into()),
        reason: Some("Expired".into()),
        details: Some(StatusDetails {
            name: Some("web".into()),
            kind: Some("pods".into()),
            uid: Some("u-1".into()),
            retry_after_seconds: Some(3),
            causes: vec![StatusCause {
                reason: Some("FieldValueInvalid".into()),
                message: None,
                field: Some("metadata.name".into()),
            }],
            ..StatusDetails::default()
        }),
        code: Some(410),
    }
}

#[test]
fn status_round_trips() {
    for status in [sample_status(), Status::default()] {
        let mut out = Vec::new();
        wire::encode_status(&status, &mut out);
        assert_eq!(wire::decode_status(&out).unwrap(), status);
    }
}

#[test]
fn status_agrees_with_k8s_pb() {
    let mut out = Vec::new();
    wire::encode_status(&sample_status(), &mut out);
    let status = pb::Status::decode(&out[..]).unwrap();
    assert_eq!(status.code, Some(410));
    assert_eq!(status.reason.as_deref(), Some("Expired"));
    assert_eq!(status.metadata.unwrap().r#continue.as_deref(), Some("next"));
    let details = status.details.unwrap();
    assert_eq!(details.name.as_deref(), Some("web"));
    assert_eq!(details.group.as_deref(), Some(""));
    assert_eq!(details.uid.as_deref(), Some("u-1"));
    assert_eq!(details.retry_after_seconds, Some(3));
    assert_eq!(details.causes[0].field.as_deref(), Some("metadata.name"));
    assert_eq!(details.causes[0].message.as_deref(), Some(""));

    // What k8s-pb writes reads back; a negative code too.
    let mut out = Vec::new();
    pb::Status {
        status: Some("Failure".into()),
        code: Some(-5),
        details: Some(pb::StatusDetails {
            causes: vec![pb::StatusCause {
                message: Some("m".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode(&mut out)
    .unwrap();
    let status = wire::decode_status(&out).unwrap();
    assert_eq!(status.status.as_deref(), Some("Failure"));
    assert_eq!(status.code, Some(-5));
    assert_eq!(status.metadata, ListMeta::default());
    let details = status.details.unwrap();
    assert_eq!(details.retry_after_seconds, None);
    assert_eq!(details.causes[0].message.as_deref(), Some("m"));

    // A status without details reads back without them, as Go's nil pointer.
    let mut out = Vec::new();
    pb::Status {
        code: Some(404),
        ..Default::default()
    }
    .encode(&mut out)
    .unwrap();
    assert_eq!(wire::decode_status(&out).unwrap().details, None);
}

#[test]
fn an_error_event_carries_a_status_in_its_envelope() {
    let mut message = Vec::new();
    wire::encode_status(&sample_status(), &mut message);
    let object = envelope("v1", "Status", &message);
    let mut stream = Vec::new();
    wire::encode_frame(&watch_frame(EventType::Error, &object), &mut stream);

    let mut decoder = FrameDecoder::new(1 << 16);
    decoder.push(stream.into());
    let event = wire::decode_watch_event(decoder.next_frame().unwrap().unwrap()).unwrap();
    assert_eq!(event.event_type, EventType::Error);
    let envelope = wire::decode_envelope(event.object).unwrap();
    assert_eq!(envelope.kind, "Status");
    assert_eq!(wire::decode_status(&envelope.raw).unwrap(), sample_status());
}

#[test]
fn the_borrowing_readers_agree_with_the_owning_ones() {
    let mut pod = Vec::new();
    wire::encode_envelope("v1", "Pod", b"\x0a\x03\x0a\x01a", &mut pod);
    let mut event = Vec::new();
    wire::encode_watch_event(EventType::Modified, &pod, &mut event);
    // The event bare, as the API server writes it, and inside an envelope of its own.
    let mut enveloped = Vec::new();
    wire::encode_envelope("meta.k8s.io/v1", "WatchEvent", &event, &mut enveloped);
    for frame in [event, enveloped] {
        let owned = wire::decode_watch_event(Bytes::from(frame.clone())).unwrap();
        let borrowed = wire::read_watch_event(&frame).unwrap();
        assert_eq!(borrowed.event_type, owned.event_type);
        assert_eq!(borrowed.object, &owned.object[..]);
        let owned = wire::decode_envelope(owned.object).unwrap();
        let borrowed = wire::read_envelope(borrowed.object).unwrap();
        assert_eq!(
            (borrowed.api_version, borrowed.kind, borrowed.raw),
            (
                owned.api_version.as_str(),
                owned.kind.as_str(),
                &owned.raw[..]
            )
        );
    }
}

#[test]
fn malformed_length_delimited_fields_are_reported_in_prost_words() {
    let cases: [(&[u8], &str); 3] = [
        // message (3) as a varint.
        (b"\x18\x01", "invalid wire type"),
        // message claims five bytes and has two.
        (b"\x1a\x05ab", "buffer underflow"),
        // message is not UTF-8.
        (b"\x1a\x02\xff\xfe", "not UTF-8"),
    ];
    for (message, words) in cases {
        let error = wire::decode_status(message).unwrap_err();
        assert!(
            matches!(error, Error::Decode { what: "Status", .. }),
            "{message:?}: {error:?}"
        );
        assert!(error.to_string().contains(words), "{message:?}: {error}");
    }
}
