//! Property tests of the wire framing: arbitrary events, lists and statuses round-trip through
//! encode and decode; arbitrary bytes never make a decoder panic. The last ones are the
//! `protobuf_watch` fuzz target's property (`fuzz/src/protobuf.rs`, included here), on inputs
//! proptest builds from valid streams, cut and corrupted, and on the fuzz seeds, which a test
//! here writes (see [`fuzz_seeds_are_current`]).

#[allow(unreachable_pub, dead_code)]
#[path = "../../../fuzz/src/protobuf.rs"]
mod fuzz_property;

use bytes::Bytes;
use kinformer_protobuf::wire::{
    self, EventType, FrameDecoder, ListMeta, ListSplitter, RawWatchEvent, Status, StatusCause,
    StatusDetails,
};
use proptest::prelude::*;

fn event_type() -> impl Strategy<Value = EventType> {
    prop_oneof![
        Just(EventType::Added),
        Just(EventType::Modified),
        Just(EventType::Deleted),
        Just(EventType::Bookmark),
        Just(EventType::Error),
    ]
}

/// A string the wire can tell from unset: non-empty.
fn text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of("\\PC{1,12}")
}

fn list_meta() -> impl Strategy<Value = ListMeta> {
    (text(), text(), proptest::option::of(any::<i64>())).prop_map(
        |(resource_version, continue_token, remaining_item_count)| ListMeta {
            resource_version,
            continue_token,
            remaining_item_count,
        },
    )
}

fn status() -> impl Strategy<Value = Status> {
    let cause = (text(), text(), text()).prop_map(|(reason, message, field)| StatusCause {
        reason,
        message,
        field,
    });
    let nonzero = any::<i32>().prop_filter("zero is unset", |n| *n != 0);
    let details = (
        (text(), text(), text(), text()),
        proptest::collection::vec(cause, 0..3),
        proptest::option::of(nonzero.clone()),
    )
        .prop_map(
            |((name, group, kind, uid), causes, retry_after_seconds)| StatusDetails {
                name,
                group,
                kind,
                uid,
                causes,
                retry_after_seconds,
            },
        );
    (
        list_meta(),
        (text(), text(), text()),
        proptest::option::of(details),
        proptest::option::of(nonzero),
    )
        .prop_map(
            |(metadata, (status, message, reason), details, code)| Status {
                metadata,
                status,
                message,
                reason,
                details,
                code,
            },
        )
}

fn object() -> impl Strategy<Value = (String, String, Vec<u8>)> {
    (
        "[a-z./0-9]{0,12}",
        "[A-Za-z]{0,12}",
        proptest::collection::vec(any::<u8>(), 0..64),
    )
}

/// Valid watch streams: events with enveloped objects, framed.
fn stream() -> impl Strategy<Value = (Vec<(EventType, Vec<u8>)>, Vec<u8>)> {
    proptest::collection::vec((event_type(), object()), 0..6).prop_map(|events| {
        let mut stream = Vec::new();
        let mut expected = Vec::new();
        for (event_type, (api_version, kind, raw)) in events {
            let mut object = Vec::new();
            wire::encode_envelope(&api_version, &kind, &raw, &mut object);
            let mut frame = Vec::new();
            wire::encode_watch_event(event_type, &object, &mut frame);
            wire::encode_frame(&frame, &mut stream);
            expected.push((event_type, object));
        }
        (expected, stream)
    })
}

/// Inputs for the fuzz property: a valid stream (or list, or status, enveloped), then cut
/// short, with bytes flipped, or with garbage appended; a limit byte and chunk sizes before it.
fn fuzz_input() -> impl Strategy<Value = Vec<u8>> {
    let body = prop_oneof![
        stream().prop_map(|(_, s)| s),
        (list_meta(), proptest::collection::vec(object(), 0..4)).prop_map(|(meta, items)| {
            let items: Vec<&[u8]> = items.iter().map(|(_, _, raw)| &raw[..]).collect();
            let mut list = Vec::new();
            wire::encode_list(&meta, &items, &mut list);
            let mut body = Vec::new();
            wire::encode_envelope("v1", "PodList", &list, &mut body);
            body
        }),
        status().prop_map(|s| {
            let mut message = Vec::new();
            wire::encode_status(&s, &mut message);
            let mut body = Vec::new();
            wire::encode_envelope("v1", "Status", &message, &mut body);
            body
        }),
        proptest::collection::vec(any::<u8>(), 0..128),
    ];
    (
        any::<u8>(),
        proptest::collection::vec(any::<u8>(), 0..16),
        body,
        any::<prop::sample::Index>(),
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
        proptest::collection::vec(any::<u8>(), 0..8),
        0..3u8,
    )
        .prop_map(|(limit, cuts, mut body, cut_at, flips, tail, how)| {
            match how {
                0 if !body.is_empty() => body.truncate(cut_at.index(body.len())),
                1 if !body.is_empty() => {
                    for (at, byte) in flips {
                        let i = at.index(body.len());
                        body[i] ^= byte;
                    }
                }
                2 => body.extend_from_slice(&tail),
                _ => {}
            }
            let mut data = vec![limit, cuts.len() as u8];
            data.extend_from_slice(&cuts);
            data.extend_from_slice(&body);
            data
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn watch_streams_round_trip_in_any_chunks(
        (expected, stream) in stream(),
        chunk in 1usize..40,
    ) {
        let mut decoder = FrameDecoder::new(1 << 16);
        let mut got = Vec::new();
        for piece in stream.chunks(chunk) {
            decoder.push(Bytes::copy_from_slice(piece));
            while let Some(frame) = decoder.next_frame().unwrap() {
                let RawWatchEvent { event_type, object } = wire::decode_watch_event(frame).unwrap();
                got.push((event_type, object.to_vec()));
            }
        }
        decoder.finish().unwrap();
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn envelopes_round_trip((api_version, kind, raw) in object()) {
        let mut body = Vec::new();
        wire::encode_envelope(&api_version, &kind, &raw, &mut body);
        let envelope = wire::decode_envelope(body.into()).unwrap();
        prop_assert_eq!(envelope.api_version, api_version);
        prop_assert_eq!(envelope.kind, kind);
        prop_assert_eq!(&envelope.raw[..], &raw[..]);
    }

    #[test]
    fn lists_round_trip(
        meta in list_meta(),
        items in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..32), 0..8),
    ) {
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        let mut message = Vec::new();
        wire::encode_list(&meta, &refs, &mut message);
        let list = wire::decode_list(message.into()).unwrap();
        prop_assert_eq!(list.meta, meta);
        prop_assert_eq!(list.items, items);
    }

    #[test]
    fn list_bodies_split_as_they_arrive(
        meta in list_meta(),
        items in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..32), 0..8),
        chunk in 1usize..40,
        cut in any::<prop::sample::Index>(),
    ) {
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        let mut list = Vec::new();
        wire::encode_list(&meta, &refs, &mut list);
        let mut body = Vec::new();
        wire::encode_envelope("apps/v1", "DeploymentList", &list, &mut body);
        let body = Bytes::from(body);

        let mut splitter = ListSplitter::new();
        let mut got = Vec::new();
        for piece in body.chunks(chunk) {
            splitter.push(Bytes::copy_from_slice(piece));
            while let Some(item) = splitter.next_item().unwrap() {
                // The type comes before the list, as a real server writes it.
                prop_assert_eq!(splitter.type_meta(), Some(("apps/v1", "DeploymentList")));
                got.push(item.to_vec());
            }
        }
        let split = splitter.finish().unwrap();
        prop_assert_eq!(got, items);
        prop_assert_eq!(split.meta, meta);
        prop_assert_eq!((split.api_version.as_str(), split.kind.as_str()), ("apps/v1", "DeploymentList"));

        // A body cut anywhere inside its list is refused at its end, whatever it handed out
        // before. (Cut between the envelope's fields, it is a shorter valid body, as protobuf
        // has it: the transport tells a cut body then.) The envelope ends with two empty
        // fields, contentEncoding and contentType, after the list.
        let list_end = body.len() - 4;
        let short = body.slice(..list_end - list.len() + cut.index(list.len()));
        let mut splitter = ListSplitter::new();
        splitter.push(short.clone());
        while let Ok(Some(_)) = splitter.next_item() {}
        let refused = splitter.finish().unwrap_err();
        prop_assert!(
            matches!(
                refused,
                kinformer_protobuf::Error::Truncated { .. } | kinformer_protobuf::Error::NotProtobuf
            ),
            "{:?} at {}", refused, short.len()
        );
    }

    #[test]
    fn statuses_round_trip(status in status()) {
        let mut message = Vec::new();
        wire::encode_status(&status, &mut message);
        prop_assert_eq!(wire::decode_status(&message).unwrap(), status);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        fuzz_property::protobuf_watch(&data);
    }

    #[test]
    fn the_fuzz_property_holds(data in fuzz_input()) {
        fuzz_property::protobuf_watch(&data);
    }
}

/// A pod with something of every leaf the direct decoder reads (times, quantities, an
/// int-or-string, embedded JSON, maps, lists of structs), as the API server encodes it.
fn realistic_pod() -> Vec<u8> {
    use k8s_openapi::api::core::v1::Pod;
    use kinformer_protobuf::convert::Protobuf as _;
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-0", "namespace": "shop", "uid": "0b5f", "resourceVersion": "12",
            "creationTimestamp": "2024-05-01T10:00:00Z", "labels": { "app": "web" },
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "77",
                "controller": true
            }],
            "managedFields": [{
                "manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                "time": "2024-05-01T10:00:07Z", "fieldsType": "FieldsV1",
                "fieldsV1": { "f:status": { "f:podIP": {} } }, "subresource": "status"
            }]
        },
        "spec": {
            "nodeName": "node-1",
            "containers": [{
                "name": "web", "image": "nginx:1.27", "args": ["--port", "8080"],
                "ports": [{ "containerPort": 8080, "protocol": "TCP" }],
                "resources": { "requests": { "cpu": "100m", "memory": "64Mi" } },
                "readinessProbe": { "httpGet": { "path": "/", "port": "http" }, "periodSeconds": 5 },
                "env": [
                    { "name": "A", "value": "1" },
                    { "name": "B", "valueFrom": { "configMapKeyRef": { "name": "cm", "key": "b" } } }
                ]
            }],
            "volumes": [{ "name": "data", "configMap": { "name": "cm", "defaultMode": 420 } }]
        },
        "status": {
            "phase": "Running", "podIP": "10.0.0.7", "startTime": "2024-05-01T10:00:05Z",
            "conditions": [{
                "type": "Ready", "status": "True", "lastTransitionTime": "2024-05-01T10:00:07Z"
            }]
        }
    }))
    .unwrap();
    let mut message = Vec::new();
    pod.encode(&mut message);
    message
}

/// The seeds of the `protobuf_watch` fuzz target, as its input reads them (limit byte, chunk
/// count and sizes, body): a stream of every event type (an `ERROR` one carrying a `Status`),
/// a list body, and one event of a realistic pod (for the object decoders).
fn fuzz_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut stream = Vec::new();
    for (event_type, kind, raw) in [
        (
            EventType::Added,
            "Pod",
            &b"\x0a\x0b\x0a\x03web\x1a\x04prod"[..],
        ),
        (
            EventType::Modified,
            "Pod",
            b"\x0a\x0b\x0a\x03web\x1a\x04prod",
        ),
        (EventType::Deleted, "Pod", b""),
        (EventType::Bookmark, "Pod", b"\x0a\x04\x32\x0242"),
    ] {
        let mut object = Vec::new();
        wire::encode_envelope("v1", kind, raw, &mut object);
        let mut frame = Vec::new();
        wire::encode_watch_event(event_type, &object, &mut frame);
        wire::encode_frame(&frame, &mut stream);
    }
    let mut message = Vec::new();
    wire::encode_status(
        &Status {
            status: Some("Failure".into()),
            message: Some("too old resource version".into()),
            reason: Some("Expired".into()),
            code: Some(410),
            ..Status::default()
        },
        &mut message,
    );
    let mut object = Vec::new();
    wire::encode_envelope("v1", "Status", &message, &mut object);
    let mut frame = Vec::new();
    wire::encode_watch_event(EventType::Error, &object, &mut frame);
    wire::encode_frame(&frame, &mut stream);

    let mut list = Vec::new();
    let meta = ListMeta {
        resource_version: Some("42".into()),
        continue_token: Some("next".into()),
        remaining_item_count: Some(2),
    };
    wire::encode_list(
        &meta,
        &[b"\x0a\x05\x0a\x03one", b"\x0a\x05\x0a\x03two"],
        &mut list,
    );
    let mut body = Vec::new();
    wire::encode_envelope("v1", "PodList", &list, &mut body);

    let with_header = |limit: u8, cuts: &[u8], body: &[u8]| {
        let mut data = vec![limit, cuts.len() as u8];
        data.extend_from_slice(cuts);
        data.extend_from_slice(body);
        data
    };
    let mut object = Vec::new();
    wire::encode_envelope("v1", "Pod", &realistic_pod(), &mut object);
    let mut frame = Vec::new();
    wire::encode_watch_event(EventType::Modified, &object, &mut frame);
    let mut pod = Vec::new();
    wire::encode_frame(&frame, &mut pod);
    vec![
        ("stream", with_header(8, &[1, 3, 7, 30], &stream)),
        ("list", with_header(8, &[], &body)),
        ("pod", with_header(12, &[], &pod)),
    ]
}

fn seeds_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/protobuf_watch")
}

/// The seed files are what [`fuzz_seeds`] makes. Run with `KINFORMER_WRITE_SEEDS=1` to
/// (re)write them after changing it.
#[test]
fn fuzz_seeds_are_current() {
    let dir = seeds_dir();
    let write = std::env::var_os("KINFORMER_WRITE_SEEDS").is_some();
    for (name, data) in fuzz_seeds() {
        let path = dir.join(name);
        if write {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &data).unwrap();
        }
        let on_disk = std::fs::read(&path).unwrap_or_default();
        assert!(
            on_disk == data,
            "fuzz seed {name} is stale: rerun with KINFORMER_WRITE_SEEDS=1"
        );
    }
}

/// Every seed passes the fuzz property, and decodes in full (the stream's five events, the
/// list's two items): the seeds start the fuzzer from valid input.
#[test]
fn the_fuzz_seeds_pass() {
    let mut checked = 0;
    for entry in std::fs::read_dir(seeds_dir()).unwrap() {
        fuzz_property::protobuf_watch(&std::fs::read(entry.unwrap().path()).unwrap());
        checked += 1;
    }
    assert!(checked >= 3, "{checked}");
    for (name, data) in fuzz_seeds() {
        let body = Bytes::from(data[2 + usize::from(data[1])..].to_vec());
        match name {
            "stream" => {
                let mut decoder = FrameDecoder::new(1 << 12);
                decoder.push(body);
                let mut events = 0;
                while let Some(frame) = decoder.next_frame().unwrap() {
                    wire::decode_envelope(wire::decode_watch_event(frame).unwrap().object).unwrap();
                    events += 1;
                }
                decoder.finish().unwrap();
                assert_eq!(events, 5);
            }
            "pod" => {
                use k8s_openapi::api::core::v1::Pod;
                use kinformer_protobuf::convert::Protobuf as _;
                let mut decoder = FrameDecoder::new(1 << 12);
                decoder.push(body);
                let frame = decoder.next_frame().unwrap().unwrap();
                let event = wire::decode_watch_event(frame).unwrap();
                let pod = Pod::decode(&wire::decode_envelope(event.object).unwrap().raw).unwrap();
                assert_eq!(pod.metadata.name.as_deref(), Some("web-0"));
                assert_eq!(
                    pod.spec.unwrap().containers[0].env.as_ref().unwrap().len(),
                    2
                );
            }
            _ => {
                let envelope = wire::decode_envelope(body).unwrap();
                assert_eq!(wire::decode_list(envelope.raw).unwrap().items.len(), 2);
            }
        }
    }
}
