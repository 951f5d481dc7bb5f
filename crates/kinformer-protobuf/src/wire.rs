//! The protobuf framing: envelope, watch frames, lists and status.
//!
//! What the API server writes, as apimachinery's protobuf serializers write it:
//!
//! - **A body** (`application/vnd.kubernetes.protobuf`): the four bytes [`MAGIC`] (`k8s\0`),
//!   then a `runtime.Unknown` message whose `typeMeta` names the object's `apiVersion` and
//!   `kind` and whose `raw` is the object's own message ([`decode_envelope`],
//!   [`encode_envelope`]).
//! - **A watch** (`application/vnd.kubernetes.protobuf;stream=watch`): frames, each a four-byte
//!   big-endian length and that many bytes ([`FrameDecoder`], [`encode_frame`]). Each frame is a
//!   `metav1.WatchEvent` message. apimachinery encodes the event with the protobuf *stream*
//!   serializer, which is its raw serializer (no magic, no envelope), while the event's
//!   `object.raw` is the object encoded with the full serializer: magic and envelope included
//!   ([`decode_watch_event`], [`encode_watch_event`]).
//! - **A list** (`PodList`, ...): a message with `metadata` (a `ListMeta`) at field 1 and the
//!   items at field 2, each the item's own message with no envelope ([`decode_list`],
//!   [`encode_list`]).
//! - **An error**: a `Status` (`v1`, `Status`) in the envelope ([`decode_status`],
//!   [`encode_status`]).
//!
//! Decoding is by hand over [`Bytes`], with `prost`'s wire primitives: the object bytes it
//! hands out (an envelope's `raw`, a watch event's object, a list's items) are slices of the
//! input, never copies. Unknown fields are skipped, as protobuf requires; a known field with the
//! wrong wire type is a [`Error::Decode`]. No input makes decoding panic, and no length prefix
//! makes it allocate: a length that claims more than what is left is an error.
//!
//! Encoding is for the simulated server and for tests. It writes what the Go encoder writes:
//! fields in ascending order, and (as gogo-protobuf does for Kubernetes' non-pointer fields)
//! strings and numbers even when empty or zero.
//!
//! # Example
//!
//! A watch event for a pod, framed, split across two chunks, and decoded back:
//!
//! ```
//! use bytes::Bytes;
//! use kinformer_protobuf::wire::{self, EventType, FrameDecoder};
//!
//! // The pod's own message would come from the pod; any bytes do here.
//! let mut pod = Vec::new();
//! wire::encode_envelope("v1", "Pod", b"\x0a\x05\x0a\x03web", &mut pod);
//!
//! let mut event = Vec::new();
//! wire::encode_watch_event(EventType::Added, &pod, &mut event);
//! let mut stream = Vec::new();
//! wire::encode_frame(&event, &mut stream);
//!
//! let mut frames = FrameDecoder::new(1 << 20);
//! let stream = Bytes::from(stream);
//! frames.push(stream.slice(..3));
//! assert_eq!(frames.next_frame()?, None);
//! frames.push(stream.slice(3..));
//! let frame = frames.next_frame()?.expect("a whole frame");
//! frames.finish()?;
//!
//! let event = wire::decode_watch_event(frame)?;
//! assert_eq!(event.event_type, EventType::Added);
//! let object = wire::decode_envelope(event.object)?;
//! assert_eq!((object.api_version.as_str(), object.kind.as_str()), ("v1", "Pod"));
//! assert_eq!(&object.raw[..], b"\x0a\x05\x0a\x03web");
//! # Ok::<(), kinformer_protobuf::Error>(())
//! ```

mod chunks;
mod list_splitter;

use bytes::Bytes;
use prost::DecodeError;
use prost::encoding::{
    DecodeContext, WireType, check_wire_type, decode_key, decode_varint, encode_key, encode_varint,
    encoded_len_varint, skip_field,
};

use crate::Error;
use chunks::Chunks;
pub use list_splitter::{ListSplitter, SplitList};

/// The four bytes every protobuf body begins with, before its `runtime.Unknown` envelope.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// The content type of a protobuf body (a single object, a list or a `Status`).
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The content type of a protobuf watch stream: length-prefixed `WatchEvent` frames.
pub const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

// ---------------------------------------------------------------------------------------------
// Reading fields.

/// A message being read: its remaining bytes, and its name for errors. It borrows the bytes,
/// so reading a field copies nothing; the functions that hand out [`Bytes`] slice their input
/// where a field lies ([`Bytes::slice_ref`]).
struct Fields<'a> {
    buf: &'a [u8],
    what: &'static str,
}

impl<'a> Fields<'a> {
    fn new(buf: &'a [u8], what: &'static str) -> Self {
        Fields { buf, what }
    }

    fn fail(&self, source: DecodeError) -> Error {
        Error::Decode {
            what: self.what,
            source,
        }
    }

    /// The next field's number and wire type, or `None` at the message's end.
    fn next(&mut self) -> Result<Option<(u32, WireType)>, Error> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        decode_key(&mut self.buf)
            .map(Some)
            .map_err(|e| self.fail(e))
    }

    /// Skips a field this decoder does not read.
    fn skip(&mut self, tag: u32, wire_type: WireType) -> Result<(), Error> {
        skip_field(wire_type, tag, &mut self.buf, DecodeContext::default())
            .map_err(|e| self.fail(e))
    }

    /// A length-delimited field's bytes, borrowed.
    fn bytes(&mut self, wire_type: WireType) -> Result<&'a [u8], Error> {
        let at = self.buf;
        let read = check_wire_type(WireType::LengthDelimited, wire_type)
            .and_then(|()| decode_varint(&mut self.buf));
        match read.map(usize::try_from) {
            Ok(Ok(len)) if len <= self.buf.len() => {
                let (field, rest) = self.buf.split_at(len);
                self.buf = rest;
                Ok(field)
            }
            _ => Err(self.prost_error(at, wire_type)),
        }
    }

    /// A string field, borrowed (UTF-8 checked).
    fn string(&mut self, wire_type: WireType) -> Result<&'a str, Error> {
        let at = self.buf;
        let bytes = self.bytes(wire_type)?;
        crate::utf8::text(bytes).ok_or_else(|| self.prost_error(at, wire_type))
    }

    /// The error prost gives for the length-delimited field at `at`, which this reader has
    /// found malformed (a wrong wire type, a bad or overlong length, text that is not UTF-8):
    /// the same words as every other field's errors.
    #[cold]
    fn prost_error(&self, mut at: &[u8], wire_type: WireType) -> Error {
        let mut text = String::new();
        match prost::encoding::string::merge(
            wire_type,
            &mut text,
            &mut at,
            DecodeContext::default(),
        ) {
            Err(source) => self.fail(source),
            Ok(()) => {
                Error::Malformed("a length-delimited field prost reads and this reader does not")
            }
        }
    }

    /// A string field where empty means unset, as it does for Go's non-pointer strings.
    fn optional_string(&mut self, wire_type: WireType) -> Result<Option<String>, Error> {
        self.string(wire_type)
            .map(|s| (!s.is_empty()).then(|| s.to_owned()))
    }

    fn int32(&mut self, wire_type: WireType) -> Result<i32, Error> {
        let mut value = 0;
        prost::encoding::int32::merge(
            wire_type,
            &mut value,
            &mut self.buf,
            DecodeContext::default(),
        )
        .map_err(|e| self.fail(e))?;
        Ok(value)
    }

    fn int64(&mut self, wire_type: WireType) -> Result<i64, Error> {
        let mut value = 0;
        prost::encoding::int64::merge(
            wire_type,
            &mut value,
            &mut self.buf,
            DecodeContext::default(),
        )
        .map_err(|e| self.fail(e))?;
        Ok(value)
    }

    /// An embedded message field: its bytes, to be read as a message of their own.
    fn message(&mut self, wire_type: WireType, what: &'static str) -> Result<Fields<'a>, Error> {
        self.bytes(wire_type).map(|b| Fields::new(b, what))
    }
}

// ---------------------------------------------------------------------------------------------
// Writing fields.

fn put_len_field(tag: u32, value: &[u8], out: &mut Vec<u8>) {
    put_len_header(tag, value.len(), out);
    out.extend_from_slice(value);
}

fn put_len_header(tag: u32, len: usize, out: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(len as u64, out);
}

/// Encoded size of a length-delimited field with a one-byte key (field numbers up to 15).
fn len_field_size(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

/// An `int32` the way protobuf (and Go) writes it: negative values sign-extended to 64 bits.
fn put_int32_field(tag: u32, value: i32, out: &mut Vec<u8>) {
    encode_key(tag, WireType::Varint, out);
    encode_varint(i64::from(value) as u64, out);
}

fn put_int64_field(tag: u32, value: i64, out: &mut Vec<u8>) {
    encode_key(tag, WireType::Varint, out);
    encode_varint(value as u64, out);
}

fn opt_str(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("")
}

// ---------------------------------------------------------------------------------------------
// The envelope.

/// An envelope's contents: the kind it names and the object's own message.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// `typeMeta.apiVersion`: `v1`, `apps/v1`, ... (empty if the envelope has none).
    pub api_version: String,
    /// `typeMeta.kind`: `Pod`, `PodList`, `Status`, ... (empty if the envelope has none).
    pub kind: String,
    /// The object's own message: a zero-copy slice of the body.
    pub raw: Bytes,
}

/// An envelope's contents, borrowed from the body: what [`read_envelope`] finds, for a caller
/// that decodes the object at once and keeps nothing of the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvelopeRef<'a> {
    /// `typeMeta.apiVersion` (empty if the envelope has none).
    pub api_version: &'a str,
    /// `typeMeta.kind` (empty if the envelope has none).
    pub kind: &'a str,
    /// The object's own message.
    pub raw: &'a [u8],
}

/// Reads a protobuf body: the magic bytes, then the `runtime.Unknown` envelope.
///
/// # Errors
///
/// [`Error::NotProtobuf`] if the body does not begin with [`MAGIC`]; [`Error::Decode`] if the
/// envelope is malformed; [`Error::ContentEncoding`] if it says its `raw` bytes are encoded
/// (the API server never sets one).
pub fn decode_envelope(body: Bytes) -> Result<Envelope, Error> {
    let envelope = read_envelope(&body)?;
    Ok(Envelope {
        api_version: envelope.api_version.to_owned(),
        kind: envelope.kind.to_owned(),
        raw: body.slice_ref(envelope.raw),
    })
}

/// [`decode_envelope`] without copies: the kind's names and the object's message borrowed
/// from `body`.
///
/// ```
/// use kinformer_protobuf::wire;
///
/// let mut body = Vec::new();
/// wire::encode_envelope("v1", "Pod", b"\x0a\x00", &mut body);
/// let envelope = wire::read_envelope(&body)?;
/// assert_eq!((envelope.api_version, envelope.kind), ("v1", "Pod"));
/// assert_eq!(envelope.raw, b"\x0a\x00");
/// # Ok::<(), kinformer_protobuf::Error>(())
/// ```
///
/// # Errors
///
/// As [`decode_envelope`].
pub fn read_envelope(body: &[u8]) -> Result<EnvelopeRef<'_>, Error> {
    let Some(unknown) = body.strip_prefix(&MAGIC) else {
        return Err(Error::NotProtobuf);
    };
    let mut unknown = Fields::new(unknown, "Unknown");
    let mut envelope = EnvelopeRef {
        api_version: "",
        kind: "",
        raw: &[],
    };
    let mut content_encoding = "";
    while let Some((tag, wire_type)) = unknown.next()? {
        match tag {
            1 => {
                // Repeated occurrences of an embedded message merge, field by field.
                let mut type_meta = unknown.message(wire_type, "TypeMeta")?;
                while let Some((tag, wire_type)) = type_meta.next()? {
                    match tag {
                        1 => envelope.api_version = type_meta.string(wire_type)?,
                        2 => envelope.kind = type_meta.string(wire_type)?,
                        _ => type_meta.skip(tag, wire_type)?,
                    }
                }
            }
            2 => envelope.raw = unknown.bytes(wire_type)?,
            3 => content_encoding = unknown.string(wire_type)?,
            // contentType: the API server leaves it empty; apimachinery's decoder ignores it.
            4 => {
                unknown.string(wire_type)?;
            }
            _ => unknown.skip(tag, wire_type)?,
        }
    }
    if !content_encoding.is_empty() {
        return Err(Error::ContentEncoding(content_encoding.to_owned()));
    }
    Ok(envelope)
}

/// Appends a protobuf body to `out`: the magic bytes, then a `runtime.Unknown` naming
/// `api_version` and `kind` and carrying `raw`, the object's own message.
///
/// The fields are written as apimachinery's `Unknown.NestedMarshalTo` writes them: `typeMeta`
/// (1, with `apiVersion` 1 and `kind` 2), `raw` (2), then `contentEncoding` (3) and
/// `contentType` (4) as empty strings, present though empty, because gogo-protobuf writes
/// Kubernetes' non-pointer strings unconditionally. Byte for byte what a real API server sends.
pub fn encode_envelope(api_version: &str, kind: &str, raw: &[u8], out: &mut Vec<u8>) {
    out.reserve(MAGIC.len() + 16 + api_version.len() + kind.len() + raw.len());
    out.extend_from_slice(&MAGIC);
    let type_meta_len = len_field_size(api_version.len()) + len_field_size(kind.len());
    put_len_header(1, type_meta_len, out);
    put_len_field(1, api_version.as_bytes(), out);
    put_len_field(2, kind.as_bytes(), out);
    put_len_field(2, raw, out);
    put_len_field(3, b"", out);
    put_len_field(4, b"", out);
}

// ---------------------------------------------------------------------------------------------
// Watch frames.

/// Splits a watch body into its frames, incrementally: push the body's chunks as they come,
/// take the frames as they complete.
///
/// Each frame is a four-byte big-endian length and that many bytes. A frame that lies within
/// one pushed chunk is handed out as a slice of it (zero-copy); one that straddles chunks is
/// gathered into one buffer. Bounded: a frame that announces more than the limit is refused as
/// soon as its length is read, before any of it is kept, and the decoder then stays failed and
/// drops whatever is pushed to it.
#[derive(Debug)]
pub struct FrameDecoder {
    /// The longest frame accepted, in bytes (the length prefix not counted).
    limit: usize,
    /// Chunks pushed and not yet consumed.
    chunks: Chunks,
    /// The length of the frame refused for being over the limit, once one was.
    failed: Option<usize>,
}

/// The length prefix of a watch frame.
const FRAME_HEADER: usize = 4;

impl FrameDecoder {
    /// A decoder that accepts frames of up to `limit` bytes.
    pub fn new(limit: usize) -> Self {
        FrameDecoder {
            limit,
            chunks: Chunks::default(),
            failed: None,
        }
    }

    /// Adds the next chunk of the body. Empty chunks are ignored, and so is everything once
    /// the decoder has refused a frame.
    pub fn push(&mut self, chunk: Bytes) {
        if self.failed.is_none() {
            self.chunks.push(chunk);
        }
    }

    /// The next whole frame's bytes (without the length prefix), or `None` if the bytes pushed
    /// so far end before one is complete.
    ///
    /// # Errors
    ///
    /// [`Error::FrameTooLarge`] if the next frame announces more than the limit; every call
    /// after that returns the same error.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, Error> {
        if let Some(len) = self.failed {
            return Err(self.too_large(len));
        }
        let mut header = [0u8; FRAME_HEADER];
        if self.chunks.peek(&mut header) < FRAME_HEADER {
            return Ok(None);
        }
        // A `u32` always fits a `usize` on the targets this crate builds for (32 and 64 bits).
        let len = u32::from_be_bytes(header) as usize;
        if len > self.limit {
            self.failed = Some(len);
            self.chunks.clear();
            return Err(self.too_large(len));
        }
        if self.chunks.len() - FRAME_HEADER < len {
            return Ok(None);
        }
        self.chunks.consume(FRAME_HEADER);
        Ok(Some(self.chunks.take(len)))
    }

    /// Says whether the body ended between frames, as it should.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] if a partial frame (or a partial length) is left;
    /// [`Error::FrameTooLarge`] if the decoder refused a frame before.
    pub fn finish(&mut self) -> Result<(), Error> {
        if let Some(len) = self.failed {
            return Err(self.too_large(len));
        }
        match self.chunks.len() {
            0 => Ok(()),
            n if n < FRAME_HEADER => Err(Error::Truncated {
                what: "a watch frame's length",
            }),
            _ => Err(Error::Truncated {
                what: "a watch frame",
            }),
        }
    }

    fn too_large(&self, len: usize) -> Error {
        Error::FrameTooLarge {
            len,
            limit: self.limit,
        }
    }
}

/// Appends a watch frame to `out`: `frame`'s length as four big-endian bytes, then `frame`.
///
/// # Panics
///
/// If `frame` is 4 GiB or longer, which the length cannot say.
pub fn encode_frame(frame: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(frame.len()).expect("a watch frame is shorter than 4 GiB");
    out.reserve(FRAME_HEADER + frame.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(frame);
}

// ---------------------------------------------------------------------------------------------
// Watch events.

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `ADDED`: an object was created (or, on a new watch, exists).
    Added,
    /// `MODIFIED`: an object changed.
    Modified,
    /// `DELETED`: an object was deleted; the event carries its last state.
    Deleted,
    /// `BOOKMARK`: no change, only a resource version the watch has reached.
    Bookmark,
    /// `ERROR`: the watch failed; the event carries a `Status`.
    Error,
}

impl EventType {
    /// The type as the wire spells it: `ADDED`, `MODIFIED`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
            EventType::Bookmark => "BOOKMARK",
            EventType::Error => "ERROR",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ADDED" => EventType::Added,
            "MODIFIED" => EventType::Modified,
            "DELETED" => EventType::Deleted,
            "BOOKMARK" => EventType::Bookmark,
            "ERROR" => EventType::Error,
            _ => return None,
        })
    }
}

/// One watch event, its object still encoded.
#[derive(Debug, Clone, PartialEq)]
pub struct RawWatchEvent {
    /// What happened.
    pub event_type: EventType,
    /// The embedded object's body, magic and envelope included (read it with
    /// [`decode_envelope`]): a zero-copy slice of the frame. For [`EventType::Error`], a
    /// `Status`.
    pub object: Bytes,
}

/// Reads one watch frame: a `metav1.WatchEvent` (`type` at field 1, `object` at field 2, a
/// `RawExtension` whose `raw` at field 1 is the object's body).
///
/// The API server writes the event bare (apimachinery's stream serializer for protobuf is its
/// raw serializer), and that is what [`encode_watch_event`] writes. A frame that instead holds
/// the event in the magic-and-envelope form of a body (kind `WatchEvent`) is read too.
///
/// # Errors
///
/// [`Error::Decode`] if the event is malformed; [`Error::MissingField`] if it has no type or no
/// object; [`Error::UnknownEventType`] for a type Kubernetes does not send;
/// [`Error::UnexpectedKind`] (or an envelope's errors) for an enveloped frame that is not a
/// `WatchEvent`.
pub fn decode_watch_event(frame: Bytes) -> Result<RawWatchEvent, Error> {
    let event = read_watch_event(&frame)?;
    Ok(RawWatchEvent {
        event_type: event.event_type,
        object: frame.slice_ref(event.object),
    })
}

/// One watch event borrowed from its frame: what [`read_watch_event`] finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchEventRef<'a> {
    /// What happened.
    pub event_type: EventType,
    /// The embedded object's body, magic and envelope included (read it with
    /// [`read_envelope`]). For [`EventType::Error`], a `Status`.
    pub object: &'a [u8],
}

/// [`decode_watch_event`] without copies: the object's body borrowed from `frame`.
///
/// ```
/// use kinformer_protobuf::wire::{self, EventType};
///
/// let mut pod = Vec::new();
/// wire::encode_envelope("v1", "Pod", b"\x0a\x00", &mut pod);
/// let mut frame = Vec::new();
/// wire::encode_watch_event(EventType::Deleted, &pod, &mut frame);
/// let event = wire::read_watch_event(&frame)?;
/// assert_eq!(event.event_type, EventType::Deleted);
/// assert_eq!(wire::read_envelope(event.object)?.kind, "Pod");
/// # Ok::<(), kinformer_protobuf::Error>(())
/// ```
///
/// # Errors
///
/// As [`decode_watch_event`].
pub fn read_watch_event(frame: &[u8]) -> Result<WatchEventRef<'_>, Error> {
    let message = if frame.starts_with(&MAGIC) {
        let envelope = read_envelope(frame)?;
        if envelope.kind != "WatchEvent" {
            return Err(Error::UnexpectedKind {
                expected: "meta.k8s.io/v1/WatchEvent".to_owned(),
                found: format!("{}/{}", envelope.api_version, envelope.kind),
            });
        }
        envelope.raw
    } else {
        frame
    };
    let mut event = Fields::new(message, "WatchEvent");
    let mut event_type = None;
    let mut object = None;
    while let Some((tag, wire_type)) = event.next()? {
        match tag {
            1 => event_type = Some(event.string(wire_type)?),
            2 => {
                let mut extension = event.message(wire_type, "RawExtension")?;
                while let Some((tag, wire_type)) = extension.next()? {
                    match tag {
                        1 => object = Some(extension.bytes(wire_type)?),
                        _ => extension.skip(tag, wire_type)?,
                    }
                }
            }
            _ => event.skip(tag, wire_type)?,
        }
    }
    let event_type = match event_type {
        None => {
            return Err(Error::MissingField {
                what: "WatchEvent",
                field: "type",
            });
        }
        Some(t) => EventType::parse(t).ok_or_else(|| Error::UnknownEventType(t.to_owned()))?,
    };
    let object = object.ok_or(Error::MissingField {
        what: "WatchEvent",
        field: "object",
    })?;
    Ok(WatchEventRef { event_type, object })
}

/// Appends one watch frame's bytes (no length prefix: see [`encode_frame`]) to `out`: a bare
/// `metav1.WatchEvent` of `event_type` whose object is `object_envelope`, a whole body (magic
/// and envelope included, as [`encode_envelope`] writes it). This is what the API server
/// writes: `type` (1), then `object` (2) holding `raw` (1).
pub fn encode_watch_event(event_type: EventType, object_envelope: &[u8], out: &mut Vec<u8>) {
    let event_type = event_type.as_str();
    out.reserve(16 + event_type.len() + object_envelope.len());
    put_len_field(1, event_type.as_bytes(), out);
    put_len_header(2, len_field_size(object_envelope.len()), out);
    put_len_field(1, object_envelope, out);
}

// ---------------------------------------------------------------------------------------------
// Lists.

/// The list metadata an informer needs (a `metav1.ListMeta`, its `selfLink` dropped).
///
/// An empty string on the wire is `None` here: Go's non-pointer strings cannot tell unset from
/// empty, and Kubernetes means unset by empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListMeta {
    /// `resourceVersion`: the version the list is at.
    pub resource_version: Option<String>,
    /// `continue`: the token for the next page, if there is one.
    pub continue_token: Option<String>,
    /// `remainingItemCount`: how many items the pages after this one hold, if the server said.
    pub remaining_item_count: Option<i64>,
}

impl ListMeta {
    /// Reads a `ListMeta` message's fields into `self`, as protobuf merges a repeated field.
    fn merge_from(&mut self, mut meta: Fields<'_>) -> Result<(), Error> {
        while let Some((tag, wire_type)) = meta.next()? {
            match tag {
                2 => self.resource_version = meta.optional_string(wire_type)?,
                3 => self.continue_token = meta.optional_string(wire_type)?,
                4 => self.remaining_item_count = Some(meta.int64(wire_type)?),
                // selfLink (1), shardInfo (5) and anything newer.
                _ => meta.skip(tag, wire_type)?,
            }
        }
        Ok(())
    }

    /// Appends the `ListMeta` message (its fields, no key or length), as Go writes it:
    /// `selfLink` (1), `resourceVersion` (2) and `continue` (3) always, empty if unset, then
    /// `remainingItemCount` (4) if set.
    fn encode_body(&self, out: &mut Vec<u8>) {
        put_len_field(1, b"", out);
        put_len_field(2, opt_str(&self.resource_version).as_bytes(), out);
        put_len_field(3, opt_str(&self.continue_token).as_bytes(), out);
        if let Some(count) = self.remaining_item_count {
            put_int64_field(4, count, out);
        }
    }
}

/// A list message split: its metadata and each item's message, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct RawList {
    /// The list's metadata.
    pub meta: ListMeta,
    /// Each item's own message (no envelope): zero-copy slices of the list.
    pub items: Vec<Bytes>,
}

/// Reads a list message (the envelope's `raw` of a `PodList`, ...): `metadata` at field 1,
/// `items` at field 2. Other fields are skipped.
///
/// # Errors
///
/// [`Error::Decode`] if the list is malformed.
pub fn decode_list(message: Bytes) -> Result<RawList, Error> {
    let mut list = Fields::new(&message, "list");
    let mut raw = RawList {
        meta: ListMeta::default(),
        items: Vec::new(),
    };
    while let Some((tag, wire_type)) = list.next()? {
        match tag {
            1 => raw.meta.merge_from(list.message(wire_type, "ListMeta")?)?,
            2 => raw.items.push(message.slice_ref(list.bytes(wire_type)?)),
            _ => list.skip(tag, wire_type)?,
        }
    }
    Ok(raw)
}

/// Appends a list message (to wrap in an envelope of kind `PodList`, ...) to `out`:
/// `metadata` (1, see [`ListMeta`] for its fields), then each of `items` (2), each an item's
/// own message.
pub fn encode_list(meta: &ListMeta, items: &[&[u8]], out: &mut Vec<u8>) {
    let mut body = Vec::new();
    meta.encode_body(&mut body);
    put_len_field(1, &body, out);
    for item in items {
        put_len_field(2, item, out);
    }
}

// ---------------------------------------------------------------------------------------------
// Status.

/// A `metav1.Status`, neutral: what an error response or an `ERROR` watch event says.
///
/// As in [`ListMeta`], an empty string or a zero on the wire is `None` here.
///
/// ```
/// use kinformer_protobuf::wire::{self, ListMeta, Status, StatusDetails};
///
/// // The 410 of an expired continue token carries a token to go on with.
/// let expired = Status {
///     metadata: ListMeta { continue_token: Some("next".into()), ..ListMeta::default() },
///     reason: Some("Expired".into()),
///     code: Some(410),
///     details: Some(StatusDetails { retry_after_seconds: Some(1), ..StatusDetails::default() }),
///     ..Status::default()
/// };
/// let mut message = Vec::new();
/// wire::encode_status(&expired, &mut message);
/// assert_eq!(wire::decode_status(&message)?, expired);
/// # Ok::<(), kinformer_protobuf::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// `metadata`: a list's metadata, set on the 410 of an expired continue token, whose
    /// `continue` goes on from the same place at the latest version.
    pub metadata: ListMeta,
    /// `status`: `Success` or `Failure`.
    pub status: Option<String>,
    /// `message`: for people.
    pub message: Option<String>,
    /// `reason`: for programs (`NotFound`, `Expired`, `TooManyRequests`, ...).
    pub reason: Option<String>,
    /// `details`: what the status is about, when the server said.
    pub details: Option<StatusDetails>,
    /// `code`: the HTTP status code it stands for.
    pub code: Option<i32>,
}

/// A [`Status`]'s details (`metav1.StatusDetails`): the object it is about, the causes, and
/// how long to wait before retrying.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusDetails {
    /// `name`: the object's name.
    pub name: Option<String>,
    /// `group`: its API group.
    pub group: Option<String>,
    /// `kind`: its kind.
    pub kind: Option<String>,
    /// `uid`: its uid.
    pub uid: Option<String>,
    /// `causes`: what exactly went wrong, field by field.
    pub causes: Vec<StatusCause>,
    /// `retryAfterSeconds`: how long to wait before retrying, if the server said.
    pub retry_after_seconds: Option<i32>,
}

/// One of a [`Status`]'s causes (`metav1.StatusCause`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusCause {
    /// `reason` (`type` in JSON): `FieldValueInvalid`, ...
    pub reason: Option<String>,
    /// `message`: for people.
    pub message: Option<String>,
    /// `field`: the field at fault, as a path (`spec.containers[0].name`).
    pub field: Option<String>,
}

/// Reads a `Status` message (the envelope's `raw`, not the whole body).
///
/// # Errors
///
/// [`Error::Decode`] if the message is malformed.
pub fn decode_status(message: &[u8]) -> Result<Status, Error> {
    let mut fields = Fields::new(message, "Status");
    let mut status = Status::default();
    while let Some((tag, wire_type)) = fields.next()? {
        match tag {
            1 => status
                .metadata
                .merge_from(fields.message(wire_type, "ListMeta")?)?,
            2 => status.status = fields.optional_string(wire_type)?,
            3 => status.message = fields.optional_string(wire_type)?,
            4 => status.reason = fields.optional_string(wire_type)?,
            5 => status
                .details
                .get_or_insert_default()
                .merge_from(fields.message(wire_type, "StatusDetails")?)?,
            6 => {
                let code = fields.int32(wire_type)?;
                status.code = (code != 0).then_some(code);
            }
            // Anything newer.
            _ => fields.skip(tag, wire_type)?,
        }
    }
    Ok(status)
}

impl StatusDetails {
    /// Reads a `StatusDetails` message's fields into `self`, as protobuf merges a message field
    /// seen twice.
    fn merge_from(&mut self, mut details: Fields<'_>) -> Result<(), Error> {
        while let Some((tag, wire_type)) = details.next()? {
            match tag {
                1 => self.name = details.optional_string(wire_type)?,
                2 => self.group = details.optional_string(wire_type)?,
                3 => self.kind = details.optional_string(wire_type)?,
                4 => {
                    let mut fields = details.message(wire_type, "StatusCause")?;
                    let mut cause = StatusCause::default();
                    while let Some((tag, wire_type)) = fields.next()? {
                        match tag {
                            1 => cause.reason = fields.optional_string(wire_type)?,
                            2 => cause.message = fields.optional_string(wire_type)?,
                            3 => cause.field = fields.optional_string(wire_type)?,
                            _ => fields.skip(tag, wire_type)?,
                        }
                    }
                    self.causes.push(cause);
                }
                5 => {
                    let seconds = details.int32(wire_type)?;
                    self.retry_after_seconds = (seconds != 0).then_some(seconds);
                }
                6 => self.uid = details.optional_string(wire_type)?,
                _ => details.skip(tag, wire_type)?,
            }
        }
        Ok(())
    }

    /// Appends the `StatusDetails` message (its fields, no key or length), as Go writes it:
    /// `name` (1), `group` (2), `kind` (3), each of `causes` (4), `retryAfterSeconds` (5) and
    /// `uid` (6), unset strings and numbers written empty and zero.
    fn encode_body(&self, out: &mut Vec<u8>) {
        put_len_field(1, opt_str(&self.name).as_bytes(), out);
        put_len_field(2, opt_str(&self.group).as_bytes(), out);
        put_len_field(3, opt_str(&self.kind).as_bytes(), out);
        let mut cause_body = Vec::new();
        for cause in &self.causes {
            cause_body.clear();
            put_len_field(1, opt_str(&cause.reason).as_bytes(), &mut cause_body);
            put_len_field(2, opt_str(&cause.message).as_bytes(), &mut cause_body);
            put_len_field(3, opt_str(&cause.field).as_bytes(), &mut cause_body);
            put_len_field(4, &cause_body, out);
        }
        put_int32_field(5, self.retry_after_seconds.unwrap_or(0), out);
        put_len_field(6, opt_str(&self.uid).as_bytes(), out);
    }
}

/// Appends a `Status` message to `out` (to wrap in an envelope: `v1`, `Status`), as Go writes
/// it: `metadata` (1, a `ListMeta` written in full), `status` (2), `message` (3) and `reason`
/// (4) always, `details` (5) when there are any, then `code` (6) always. Unset strings and
/// numbers are written empty and zero.
pub fn encode_status(status: &Status, out: &mut Vec<u8>) {
    let mut body = Vec::new();
    status.metadata.encode_body(&mut body);
    put_len_field(1, &body, out);
    put_len_field(2, opt_str(&status.status).as_bytes(), out);
    put_len_field(3, opt_str(&status.message).as_bytes(), out);
    put_len_field(4, opt_str(&status.reason).as_bytes(), out);
    if let Some(details) = &status.details {
        body.clear();
        details.encode_body(&mut body);
        put_len_field(5, &body, out);
    }
    put_int32_field(6, status.code.unwrap_or(0), out);
}
