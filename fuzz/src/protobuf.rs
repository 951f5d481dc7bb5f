//! The property of the `protobuf_watch` fuzz target: Kubernetes' protobuf framing
//! (`kinformer_protobuf::wire`) on arbitrary bytes cut at arbitrary chunk boundaries, and the
//! objects inside decoded both ways (straight into k8s-openapi, and through k8s-pb's messages),
//! and without their managed fields.
//!
//! Not a module of the fuzz crate's library: `src/lib.rs` is included by kinformer-client's
//! tests, which do not depend on kinformer-protobuf. The target includes this file
//! (`fuzz_targets/protobuf_watch.rs`), and so do kinformer-protobuf's tests
//! (`crates/kinformer-protobuf/tests/wire_props.rs`), which check it on proptest's inputs and
//! on the seeds.

use std::fmt::Debug;

use bytes::Bytes;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{ManagedFields, Object};
use kinformer_protobuf::convert::Protobuf;
use kinformer_protobuf::trim::without_managed_fields;
use kinformer_protobuf::wire::{self, FrameDecoder, ListSplitter, SplitList};
use kinformer_protobuf::{CompactMessage, Error};

/// Whether `part` lies inside `whole` (a zero-copy slice of it), or is empty.
fn within(part: &Bytes, whole: &Bytes) -> bool {
    part.is_empty() || {
        let range = whole.as_ptr_range();
        range.contains(&part.as_ptr()) && part.len() <= whole.len()
    }
}

/// A refusal of one of the message decoders: always one of the typed errors they document.
fn check_refusal(e: &Error) {
    assert!(
        matches!(
            e,
            Error::Decode { .. }
                | Error::NotProtobuf
                | Error::ContentEncoding(_)
                | Error::MissingField { .. }
                | Error::UnknownEventType(_)
                | Error::UnexpectedKind { .. }
        ),
        "unexpected refusal {e:?}"
    );
    let _ = e.to_string();
}

/// Whether an error is about nesting: the direct decoder and prost count depth alike but not
/// to the same step (a kind without a default is decoded by prost with a budget of its own).
fn nesting(e: &Error) -> bool {
    let text = e.to_string();
    text.contains("deep") || text.contains("recursion")
}

/// `message` as a `K`, decoded straight into k8s-openapi and through k8s-pb's messages: never a
/// panic; the same value when both accept it; what the reference accepts, the direct decoder
/// accepts too (except at the nesting limit). The direct decoder may accept what the reference
/// refuses: it skips, as unknown, a field the k8s-openapi version lacks (k8s-pb's `workloadRef`
/// of a Pod under 1.37), where prost still checks it; what it accepted then re-encodes to bytes
/// the reference reads back to the same value.
fn agree<K: Protobuf + PartialEq + Debug>(message: &[u8]) {
    match (K::decode(message), K::decode_message(message)) {
        (Ok(direct), Ok(reference)) => assert_eq!(direct, reference, "{}", K::KIND),
        (Err(_), Err(_)) => {}
        (Ok(direct), Err(_)) => {
            let mut again = Vec::new();
            direct.encode(&mut again);
            assert_eq!(K::decode_message(&again).unwrap(), direct, "{}", K::KIND);
        }
        (Err(e), Ok(_)) => assert!(
            nesting(&e),
            "{}: the direct decoder refused what the reference accepts: {e}",
            K::KIND
        ),
    }
}

/// The compact form over protobuf accepts every message the direct decoder accepts (it reads
/// the metadata and only frames the rest), with the same metadata, and gives back the direct
/// decoder's object.
fn compact_agrees<K: Protobuf + Object + PartialEq + Debug>(message: &[u8]) {
    let compact = CompactMessage::<K>::from_message(message);
    if let Ok(typed) = K::decode(message) {
        let compact = compact.unwrap_or_else(|e| panic!("{}: compact refused: {e}", K::KIND));
        assert_eq!(compact.key(), typed.key(), "{}", K::KIND);
        assert_eq!(compact.resource_version(), typed.resource_version());
        assert_eq!(compact.labels(), typed.labels());
        assert_eq!(compact.owner_references(), typed.owner_references());
        assert_eq!(compact.typed().unwrap(), typed);
    }
}

/// The message without its managed fields (`kinformer_protobuf::trim`): never a panic; when
/// the whole message decodes, the trimmed one decodes to the same object without managed
/// fields.
fn trim_agrees<K: Protobuf + ManagedFields + Clone + PartialEq + Debug>(message: &[u8]) {
    let trimmed = without_managed_fields(message);
    let decoded = K::decode(&trimmed);
    if let Ok(whole) = K::decode(message) {
        let mut stripped = whole.clone();
        stripped.clear_managed_fields();
        match decoded {
            Ok(decoded) => assert_eq!(decoded, stripped, "{}", K::KIND),
            Err(e) => panic!("{}: trimmed refused what the whole accepted: {e}", K::KIND),
        }
    }
}

/// The object decoders on `message`: a Pod, and a Deployment (whose conditions have no
/// default and go through prost), typed, without managed fields and in the compact form.
fn check_object(message: &[u8]) {
    agree::<Pod>(message);
    agree::<Deployment>(message);
    trim_agrees::<Pod>(message);
    trim_agrees::<Deployment>(message);
    compact_agrees::<Pod>(message);
    compact_agrees::<Deployment>(message);
}

/// Every message decoder on `body` as a whole body, and the ones its contents lead to: never
/// a panic; what decodes encodes back to bytes that decode to the same; slices stay within
/// what they came from.
fn check_message(body: &Bytes) {
    match wire::decode_watch_event(body.clone()) {
        Ok(event) => {
            assert!(within(&event.object, body), "the object is not a slice");
            let mut again = Vec::new();
            wire::encode_watch_event(event.event_type, &event.object, &mut again);
            assert_eq!(wire::decode_watch_event(again.into()).unwrap(), event);
            check_envelope(&event.object);
        }
        Err(e) => check_refusal(&e),
    }
    check_envelope(body);
    check_list(body);
    check_status(body);
    check_object(body);
}

fn check_envelope(body: &Bytes) {
    match wire::decode_envelope(body.clone()) {
        Ok(envelope) => {
            assert!(within(&envelope.raw, body), "raw is not a slice");
            let mut again = Vec::new();
            wire::encode_envelope(
                &envelope.api_version,
                &envelope.kind,
                &envelope.raw,
                &mut again,
            );
            assert_eq!(wire::decode_envelope(again.into()).unwrap(), envelope);
            check_list(&envelope.raw);
            check_status(&envelope.raw);
            check_object(&envelope.raw);
        }
        Err(e) => check_refusal(&e),
    }
}

fn check_list(message: &Bytes) {
    match wire::decode_list(message.clone()) {
        Ok(list) => {
            let total: usize = list.items.iter().map(Bytes::len).sum();
            assert!(total <= message.len());
            assert!(list.items.iter().all(|i| within(i, message)));
            // Items are at least two bytes each on the wire: bounded by the input.
            assert!(list.items.len() <= message.len() / 2);
            let items: Vec<&[u8]> = list.items.iter().map(|i| &i[..]).collect();
            let mut again = Vec::new();
            wire::encode_list(&list.meta, &items, &mut again);
            assert_eq!(wire::decode_list(again.into()).unwrap(), list);
        }
        Err(e) => check_refusal(&e),
    }
}

fn check_status(message: &[u8]) {
    match wire::decode_status(message) {
        Ok(status) => {
            let causes = status.details.as_ref().map_or(0, |d| d.causes.len());
            assert!(causes <= message.len() / 2);
            let mut again = Vec::new();
            wire::encode_status(&status, &mut again);
            assert_eq!(wire::decode_status(&again).unwrap(), status);
        }
        Err(e) => check_refusal(&e),
    }
}

/// `body` cut into chunks at `cuts` (sizes, cycled, each at least one byte; one chunk if none).
fn pieces<'a>(body: &'a Bytes, cuts: &'a [usize]) -> impl Iterator<Item = Bytes> + 'a {
    let mut sizes = cuts.iter().cycle();
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= body.len() {
            return None;
        }
        let size = if cuts.is_empty() {
            body.len()
        } else {
            sizes.next().copied().unwrap_or(1).max(1)
        };
        let end = (at + size).min(body.len());
        let piece = body.slice(at..end);
        at = end;
        Some(piece)
    })
}

/// What a frame decoder made of a stream: its frames, and how it ended.
type Split = (Vec<Bytes>, Result<(), String>);

/// Splits `body` into frames, pushing it in chunks cut at `cuts` (cycled; none if empty):
/// never a frame over the limit; nothing after a refusal; the only refusals are
/// `FrameTooLarge` (with this limit) and, at the end, `Truncated`.
fn split(body: &Bytes, cuts: &[usize], limit: usize) -> Split {
    let mut decoder = FrameDecoder::new(limit);
    let mut frames = Vec::new();
    for piece in pieces(body, cuts) {
        decoder.push(piece);
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => {
                    assert!(frame.len() <= limit, "a frame over the limit got through");
                    frames.push(frame);
                }
                Ok(None) => break,
                Err(Error::FrameTooLarge { len, limit: l }) => {
                    assert!(len > limit && l == limit);
                    // It stays refused.
                    assert!(matches!(
                        decoder.next_frame(),
                        Err(Error::FrameTooLarge { .. })
                    ));
                    assert!(matches!(decoder.finish(), Err(Error::FrameTooLarge { .. })));
                    return (frames, Err("too large".to_owned()));
                }
                Err(e) => panic!("unexpected refusal {e:?}"),
            }
        }
    }
    match decoder.finish() {
        Ok(()) => (frames, Ok(())),
        Err(Error::Truncated { what }) => (frames, Err(what.to_owned())),
        Err(e) => panic!("unexpected refusal at the end {e:?}"),
    }
}

/// What a list splitter made of a body: its items and what it said beside them, or its refusal.
type SplitBody = Result<(Vec<Bytes>, SplitList), String>;

/// Splits `body` as a list body, pushing it in chunks cut at `cuts` (cycled; none if empty),
/// taking items after every push: the only refusals are the ones the splitter documents.
fn split_list(body: &Bytes, cuts: &[usize]) -> SplitBody {
    let mut splitter = ListSplitter::new();
    let mut items = Vec::new();
    let refused = |e: Error| {
        assert!(
            matches!(
                e,
                Error::Decode { .. }
                    | Error::Malformed(_)
                    | Error::NotProtobuf
                    | Error::Truncated { .. }
                    | Error::ContentEncoding(_)
            ),
            "unexpected refusal {e:?}"
        );
        Err(e.to_string())
    };
    for piece in pieces(body, cuts) {
        splitter.push(piece);
        loop {
            match splitter.next_item() {
                Ok(Some(item)) => items.push(item),
                Ok(None) => break,
                Err(e) => {
                    // It stays refused.
                    assert!(splitter.next_item().is_err());
                    return refused(e);
                }
            }
        }
    }
    match splitter.finish() {
        Ok(list) => {
            assert_eq!(list.items, items.len());
            Ok((items, list))
        }
        Err(e) => refused(e),
    }
}

/// The list splitter on `body`: the chunk boundaries change nothing, and it reads what the
/// whole-body decoders read (`decode_envelope`, then `decode_list`): the same items, metadata
/// and kind when both accept, a refusal when they refuse. It may refuse what they accept only
/// for the two things it documents: a group field and a second `raw`.
fn check_split_list(body: &Bytes, cuts: &[usize]) {
    let whole = split_list(body, &[]);
    let cut = split_list(body, cuts);
    assert_eq!(whole, cut, "the chunk boundaries changed the list");
    let reference = wire::decode_envelope(body.clone()).and_then(|envelope| {
        let list = wire::decode_list(envelope.raw)?;
        Ok((envelope.api_version, envelope.kind, list))
    });
    match (cut, reference) {
        (Ok((items, split)), Ok((api_version, kind, list))) => {
            assert_eq!(items, list.items);
            assert_eq!(split.meta, list.meta);
            assert_eq!((split.api_version, split.kind), (api_version, kind));
        }
        (Ok(split), Err(e)) => {
            panic!("the splitter accepted {split:?}, the whole decode refused: {e}")
        }
        (Err(e), Ok(_)) => assert!(
            e.contains("group") || e.contains("two raw"),
            "the splitter refused what the whole decode accepts: {e}"
        ),
        (Err(_), Err(_)) => {}
    }
}

/// The protobuf watch framing and every message decoder, on arbitrary bytes: never a panic;
/// every refusal is a typed error the decoder documents; the chunk boundaries change nothing
/// (the same frames and the same ending as the body in one chunk); frames are never over the
/// limit and refused from their length alone; a list body split as it arrives is the list
/// decoded whole ([`check_split_list`]); what decodes re-encodes to the same; object,
/// raw and item bytes are slices of what they came from. Memory stays bounded by the input
/// (the fuzzer's malloc limit catches an allocation a length prefix could make).
///
/// Input: one byte choosing the frame limit (`16 << (b % 20)` bytes), one byte `n`, then
/// `n % 16` chunk sizes (one byte each), then the body.
pub fn protobuf_watch(data: &[u8]) {
    let (limit, rest) = match data {
        [b, rest @ ..] => (16usize << (b % 20), rest),
        [] => (16, data),
    };
    let (n, rest) = match rest {
        [n, rest @ ..] => (usize::from(n % 16).min(rest.len()), rest),
        [] => (0, rest),
    };
    let (cuts, body) = rest.split_at(n);
    let cuts: Vec<usize> = cuts.iter().map(|&c| usize::from(c)).collect();
    let body = Bytes::copy_from_slice(body);

    let whole = split(&body, &[], limit);
    let cut = split(&body, &cuts, limit);
    assert_eq!(whole, cut, "the chunk boundaries changed the frames");
    for frame in &cut.0 {
        check_message(frame);
    }
    check_split_list(&body, &cuts);
    // The body itself, as any of the messages.
    check_message(&body);
}
