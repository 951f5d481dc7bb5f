//! Decoding a watch response: newline-delimited JSON, split into lines as the bytes arrive and
//! decoded on all cores, the events handed on in the order of their lines.

use std::fmt;
use std::pin::Pin;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::{FutureExt as _, Stream, StreamExt as _};
use kinformer_core::gather::GatherBuffer;
use kinformer_core::trim::ManagedFieldsDecode;
use kinformer_core::{
    Bookmark, Object, ResourceVersion, WatchEvent, WatchStream, missing_identity,
};
use kinformer_protobuf::convert::Codec;
use kinformer_protobuf::wire;
use serde::de::DeserializeOwned;

use crate::Error;
use crate::metric_names;

/// The client's metric handles for one request ([`metric_names`]): made once per list page or
/// watch, so that a chunk or a batch only bumps an atomic.
#[derive(Debug, Clone)]
pub(crate) struct Traffic {
    /// Bytes of the body read.
    pub(crate) bytes: metrics::Counter,
    /// Seconds decoding a list page, or a batch of watch lines.
    pub(crate) decode: metrics::Histogram,
}

impl Traffic {
    /// The handles of a `verb` (`list`, `watch`) on `resource` (`pods`, `deployments.apps`).
    pub(crate) fn new(resource: &kinformer_core::ApiResource, verb: &'static str) -> Self {
        let resource = if resource.group.is_empty() {
            resource.plural.clone()
        } else {
            format!("{}.{}", resource.plural, resource.group)
        };
        let labels = [
            metrics::Label::new("resource", resource),
            metrics::Label::new("verb", verb),
        ];
        Self {
            bytes: metrics::counter!(metric_names::BYTES_READ, labels.to_vec()),
            decode: metrics::histogram!(metric_names::DECODE_SECONDS, labels.to_vec()),
        }
    }

    /// Handles that record nothing (a body decoded for no resource in particular).
    pub(crate) fn none() -> Self {
        Self {
            bytes: metrics::Counter::noop(),
            decode: metrics::Histogram::noop(),
        }
    }
}

/// One complete line of a watch body (without its newline), and where it was.
struct Line {
    /// The line's bytes: a slice of the chunk it lay in, or its gathered parts.
    bytes: Bytes,
    /// Its 1-based number in the stream.
    number: u64,
    /// The stream offset of its first byte.
    offset: u64,
}

/// Splits a byte stream into lines without copying the lines that lie inside one chunk; only a
/// line split across chunks is gathered, in a buffer that never grows past the maximum length.
struct LineSplitter {
    /// The start of a line that began in an earlier chunk.
    pending: BytesMut,
    /// Where `pending` comes from, and goes back to once its line is dropped.
    gather: GatherBuffer,
    /// The chunk being split, and how far it has been consumed.
    chunk: Bytes,
    pos: usize,
    max_line: usize,
    /// Lines completed so far.
    lines: u64,
    /// The stream offset of the line being assembled.
    line_start: u64,
    done: bool,
}

impl LineSplitter {
    fn new(max_line: usize) -> Self {
        Self {
            pending: BytesMut::new(),
            gather: GatherBuffer::default(),
            chunk: Bytes::new(),
            pos: 0,
            max_line,
            lines: 0,
            line_start: 0,
            done: false,
        }
    }

    /// Adds the next chunk. Any unread part of the previous chunk is kept.
    fn push(&mut self, chunk: Bytes) {
        if self.done {
            return;
        }
        if self.pos < self.chunk.len() {
            let rest = self.chunk.slice(self.pos..);
            self.pend(&rest);
        }
        self.chunk = chunk;
        self.pos = 0;
    }

    /// The next complete line (blank ones too); `None` when more bytes are needed or after an
    /// error. A line longer than the limit is an [`Error::LineTooLong`], after which nothing
    /// more comes.
    fn next_line(&mut self) -> Option<Result<Line, Error>> {
        if self.done {
            return None;
        }
        let rest = &self.chunk[self.pos..];
        if rest.is_empty() {
            return None;
        }
        let Some(i) = memchr::memchr(b'\n', rest) else {
            if self.pending.len() + rest.len() > self.max_line {
                return Some(Err(self.too_long()));
            }
            let rest = self.chunk.slice(self.pos..);
            self.pend(&rest);
            self.pos = self.chunk.len();
            return None;
        };
        let len = self.pending.len() + i;
        if len > self.max_line {
            return Some(Err(self.too_long()));
        }
        let start = self.pos;
        self.pos += i + 1;
        let offset = self.line_start;
        self.line_start += len as u64 + 1;
        self.lines += 1;
        let bytes = if self.pending.is_empty() {
            self.chunk.slice(start..start + i)
        } else {
            let end = self.chunk.slice(start..start + i);
            self.pend(&end);
            self.gather.finish(std::mem::take(&mut self.pending))
        };
        Some(Ok(Line {
            bytes,
            number: self.lines,
            offset,
        }))
    }

    /// Ends the stream: the bytes after the last newline (empty when the body ended with one).
    fn finish(&mut self) -> Vec<u8> {
        if self.done {
            return Vec::new();
        }
        self.done = true;
        let rest = &self.chunk[self.pos..];
        self.pending.extend_from_slice(rest);
        self.pos = self.chunk.len();
        Vec::from(std::mem::take(&mut self.pending))
    }

    /// Appends to the line being gathered, which starts in the last gathered line's buffer
    /// when nothing holds that line any more.
    fn pend(&mut self, bytes: &[u8]) {
        if self.pending.capacity() == 0 {
            self.pending = self.gather.start(bytes.len());
        }
        self.pending.extend_from_slice(bytes);
    }

    fn too_long(&mut self) -> Error {
        self.done = true;
        self.pending = BytesMut::new();
        Error::LineTooLong {
            line: self.lines + 1,
            limit: self.max_line,
        }
    }
}

/// How a watch body is framed and its events decoded.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WatchFormat {
    /// Newline-delimited JSON.
    Json,
    /// Length-prefixed protobuf frames, the objects decoded with the kind's codec.
    Protobuf(&'static Codec),
}

/// Splits a protobuf watch body into frames, handed on as [`Line`]s numbered by frame; a frame
/// that lies inside one chunk is not copied, and none may exceed the limit.
struct FrameSplitter {
    frames: wire::FrameDecoder,
    count: u64,
    offset: u64,
    done: bool,
}

impl FrameSplitter {
    fn next_line(&mut self) -> Option<Result<Line, Error>> {
        if self.done {
            return None;
        }
        match self.frames.next_frame() {
            Ok(Some(frame)) => {
                self.count += 1;
                let offset = self.offset;
                self.offset += frame.len() as u64 + 4;
                Some(Ok(Line {
                    bytes: frame,
                    number: self.count,
                    offset,
                }))
            }
            Ok(None) => None,
            Err(source) => {
                self.done = true;
                Some(Err(Error::Protobuf {
                    what: "watch event",
                    at: Some(format!("frame {}", self.count + 1)),
                    source,
                }))
            }
        }
    }
}

/// A watch body's splitter, by its framing.
enum Splitter {
    Lines(LineSplitter),
    Frames(FrameSplitter),
}

impl Splitter {
    fn new(format: WatchFormat, max_line: usize) -> Self {
        match format {
            WatchFormat::Json => Self::Lines(LineSplitter::new(max_line)),
            WatchFormat::Protobuf(_) => Self::Frames(FrameSplitter {
                frames: wire::FrameDecoder::new(max_line),
                count: 0,
                offset: 0,
                done: false,
            }),
        }
    }

    fn push(&mut self, chunk: Bytes) {
        match self {
            Self::Lines(l) => l.push(chunk),
            Self::Frames(f) if !f.done => f.frames.push(chunk),
            Self::Frames(_) => {}
        }
    }

    fn next_line(&mut self) -> Option<Result<Line, Error>> {
        match self {
            Self::Lines(l) => l.next_line(),
            Self::Frames(f) => f.next_line(),
        }
    }

    /// Whether a split unit is nothing to decode: a blank JSON line (a frame is never skipped,
    /// whatever its bytes).
    fn is_blank(&self, line: &Line) -> bool {
        matches!(self, Self::Lines(_)) && is_blank(&line.bytes)
    }

    /// How the stream ends once the body has: with the bytes after the last newline, or, for
    /// frames, cut if a frame was left incomplete.
    fn finish(&mut self) -> End {
        match self {
            Self::Lines(l) => End::Tail(l.finish()),
            Self::Frames(f) => {
                f.done = true;
                match f.frames.finish() {
                    Ok(()) => End::Tail(Vec::new()),
                    Err(e) => End::Fail(Error::Interrupted {
                        events: 0,
                        reason: format!("the stream ended inside a frame: {e}"),
                    }),
                }
            }
        }
    }
}

/// Splits a watch response into lines and decodes each into a [`WatchEvent`], without copying
/// complete lines: a line that lies inside one chunk is decoded straight from that chunk; only a
/// line split across chunks is gathered in a buffer, which never grows past the maximum line
/// length.
///
/// This is the sequential decoder, for callers that feed bytes by hand; [`decode_watch`] (and
/// every watch of [`Client`](crate::Client)) decodes on all cores.
///
/// Feed chunks with [`push`](Self::push), take events with [`next_event`](Self::next_event) until
/// it returns `None`, and call [`finish`](Self::finish) when the body ends. After an error the
/// decoder yields nothing more.
///
/// ```
/// use bytes::Bytes;
/// use kinformer_client::WatchDecoder;
/// use kinformer_core::{DynamicObject, WatchEvent};
///
/// let mut decoder = WatchDecoder::new(1 << 20);
/// decoder.push(Bytes::from_static(br#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}
/// {"type":"DELETED","obj"#));
/// assert!(matches!(decoder.next_event::<DynamicObject>(), Some(Ok(WatchEvent::Added(_)))));
/// assert!(decoder.next_event::<DynamicObject>().is_none()); // the second line is incomplete
/// decoder.push(Bytes::from_static(b"ect\":{\"metadata\":{\"name\":\"a\"}}}\n"));
/// assert!(matches!(decoder.next_event::<DynamicObject>(), Some(Ok(WatchEvent::Deleted(_)))));
/// assert!(decoder.finish::<DynamicObject>().is_none());
/// ```
pub struct WatchDecoder {
    split: Splitter,
    format: WatchFormat,
    /// Events decoded so far.
    events: u64,
    /// What each object must have, and what is left out of it.
    rules: Rules,
    done: bool,
}

impl fmt::Debug for WatchDecoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("WatchDecoder");
        match &self.split {
            Splitter::Lines(split) => d
                .field("pending", &split.pending.len())
                .field("unread", &(split.chunk.len() - split.pos))
                .field("max_line", &split.max_line)
                .field("lines", &split.lines),
            Splitter::Frames(split) => d.field("frames", &split.count),
        };
        d.field("events", &self.events)
            .field("done", &self.done)
            .finish()
    }
}

impl WatchDecoder {
    /// A decoder that refuses lines longer than `max_line` bytes.
    pub fn new(max_line: usize) -> Self {
        Self {
            split: Splitter::new(WatchFormat::Json, max_line),
            format: WatchFormat::Json,
            events: 0,
            rules: Rules::default(),
            done: false,
        }
    }

    /// A decoder of a protobuf watch body (`application/vnd.kubernetes.protobuf;stream=watch`):
    /// length-prefixed frames, each a `WatchEvent` whose object `codec` decodes. A frame longer
    /// than `max_frame` bytes is refused when its length is read. Its events must be taken as
    /// the codec's type ([`next_event`](Self::next_event) with another type is an error).
    ///
    /// ```
    /// use bytes::Bytes;
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_client::WatchDecoder;
    /// use kinformer_core::WatchEvent;
    /// use kinformer_protobuf::{convert, wire};
    ///
    /// let codec = convert::codec::<Pod>().unwrap();
    /// let mut pod = Pod::default();
    /// pod.metadata.name = Some("web".into());
    /// pod.metadata.namespace = Some("default".into());
    /// let (mut message, mut object, mut event, mut body) = (vec![], vec![], vec![], vec![]);
    /// convert::Protobuf::encode(&pod, &mut message);
    /// wire::encode_envelope("v1", "Pod", &message, &mut object);
    /// wire::encode_watch_event(wire::EventType::Added, &object, &mut event);
    /// wire::encode_frame(&event, &mut body);
    ///
    /// let mut decoder = WatchDecoder::protobuf(codec, 1 << 20);
    /// decoder.push(Bytes::from(body));
    /// match decoder.next_event::<Pod>() {
    ///     Some(Ok(WatchEvent::Added(p))) => assert_eq!(p.metadata.name.as_deref(), Some("web")),
    ///     other => panic!("{other:?}"),
    /// }
    /// assert!(decoder.finish::<Pod>().is_none());
    /// ```
    pub fn protobuf(codec: &'static Codec, max_frame: usize) -> Self {
        let format = WatchFormat::Protobuf(codec);
        Self {
            split: Splitter::new(format, max_frame),
            format,
            events: 0,
            rules: Rules::default(),
            done: false,
        }
    }

    /// Also refuse an added, modified or deleted object without a `metadata.namespace`: set it
    /// for a namespaced resource, whose objects always carry one. (An object without a
    /// `metadata.name` is always refused.)
    pub fn require_namespace(mut self, yes: bool) -> Self {
        self.rules.require_namespace = yes;
        self
    }

    /// Whether each object's `metadata.managedFields` is decoded or left out
    /// ([`ManagedFieldsDecode`]; decoded unless set): see
    /// [`Config::managed_fields`](crate::Config::managed_fields).
    ///
    /// ```
    /// use bytes::Bytes;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kinformer_client::WatchDecoder;
    /// use kinformer_core::WatchEvent;
    /// use kinformer_core::trim::ManagedFieldsDecode;
    ///
    /// let mut decoder = WatchDecoder::new(1 << 20).managed_fields(ManagedFieldsDecode::Skip);
    /// decoder.push(Bytes::from_static(
    ///     br#"{"type":"ADDED","object":{"metadata":{"name":"a","managedFields":[{"manager":"m"}]}}}
    /// "#,
    /// ));
    /// let Some(Ok(WatchEvent::Added(cm))) = decoder.next_event::<ConfigMap>() else { panic!() };
    /// assert_eq!(cm.metadata.name.as_deref(), Some("a"));
    /// assert_eq!(cm.metadata.managed_fields, None);
    /// ```
    pub fn managed_fields(mut self, decode: ManagedFieldsDecode) -> Self {
        self.rules.managed_fields = decode;
        self
    }

    /// Events decoded so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Adds the next chunk of the body. Any unread part of the previous chunk is kept.
    pub fn push(&mut self, chunk: Bytes) {
        if !self.done {
            self.split.push(chunk);
        }
    }

    /// The next complete event, `None` when more bytes are needed (or after an error).
    pub fn next_event<K: Object + DeserializeOwned>(
        &mut self,
    ) -> Option<Result<WatchEvent<K>, Error>> {
        while !self.done {
            let line = match self.split.next_line()? {
                Ok(line) => line,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            };
            let decoded = match self.format {
                WatchFormat::Json => decode_line(&line, self.rules),
                WatchFormat::Protobuf(codec) => Some(decode_frame(&line, codec, self.rules)),
            };
            match decoded {
                None => continue,
                Some(Ok(event)) => {
                    self.events += 1;
                    return Some(Ok(event));
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }

    /// Ends the stream: a complete last line without its newline is decoded; an incomplete one
    /// means the connection was cut mid-line, reported as [`Error::Interrupted`] (resumable).
    pub fn finish<K: Object + DeserializeOwned>(&mut self) -> Option<Result<WatchEvent<K>, Error>> {
        if self.done {
            return None;
        }
        self.done = true;
        let tail = match self.split.finish() {
            End::Tail(tail) => tail,
            End::Fail(Error::Interrupted { reason, .. }) => {
                return Some(Err(Error::Interrupted {
                    events: self.events,
                    reason,
                }));
            }
            End::Fail(e) => return Some(Err(e)),
        };
        let result = decode_tail::<K>(&tail, self.rules, self.events)?;
        if result.is_ok() {
            self.events += 1;
        }
        Some(result)
    }
}

/// What each decoded object must have, and what is left out of it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Rules {
    /// Whether an object without a namespace is refused.
    pub(crate) require_namespace: bool,
    /// Whether its managed fields are decoded or cut out first.
    pub(crate) managed_fields: ManagedFieldsDecode,
}

/// Decodes one line; `None` for a blank one. The object of an added, modified or deleted event
/// must have a name (and a namespace when `require_namespace`).
fn decode_line<K: Object + DeserializeOwned>(
    line: &Line,
    rules: Rules,
) -> Option<Result<WatchEvent<K>, Error>> {
    decode_event(&line.bytes, rules).map(|r| {
        r.map_err(|source| Error::Decode {
            what: "watch event",
            line: Some(line.number),
            offset: Some(line.offset),
            source,
        })
    })
}

/// Decodes one protobuf frame: a `WatchEvent` in its envelope, whose object is the kind's
/// message in its own envelope (a `Status` for an ERROR). A bookmark's object is read for its
/// resourceVersion and annotations alone.
fn decode_frame<K: Object>(
    line: &Line,
    codec: &'static Codec,
    rules: Rules,
) -> Result<WatchEvent<K>, Error> {
    let fail = |source| Error::Protobuf {
        what: "watch event",
        at: Some(format!("frame {}", line.number)),
        source,
    };
    let event = wire::read_watch_event(&line.bytes).map_err(fail)?;
    let envelope = wire::read_envelope(event.object).map_err(fail)?;
    match event.event_type {
        wire::EventType::Error => {
            let status = wire::decode_status(envelope.raw).map_err(fail)?;
            return Ok(WatchEvent::Error(crate::error::status_from_wire(status)));
        }
        wire::EventType::Bookmark => {
            let object = codec.decode_json(envelope.raw).map_err(fail)?;
            let meta = &object["metadata"];
            let annotations = meta["annotations"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                        .collect()
                })
                .unwrap_or_default();
            return Ok(WatchEvent::Bookmark(Bookmark {
                resource_version: ResourceVersion::from(
                    meta["resourceVersion"].as_str().unwrap_or_default(),
                ),
                annotations,
            }));
        }
        _ => {}
    }
    if envelope.kind != codec.kind() || envelope.api_version != codec.api_version() {
        return Err(fail(kinformer_protobuf::Error::UnexpectedKind {
            expected: format!("{}/{}", codec.api_version(), codec.kind()),
            found: format!("{}/{}", envelope.api_version, envelope.kind),
        }));
    }
    let message = kinformer_protobuf::trim::message(rules.managed_fields, envelope.raw);
    let object = match codec.decode::<K>(&message) {
        Some(decoded) => decoded.map_err(fail)?,
        None => {
            return Err(fail(kinformer_protobuf::Error::UnexpectedKind {
                expected: std::any::type_name::<K>().to_owned(),
                found: format!("{}/{}", codec.api_version(), codec.kind()),
            }));
        }
    };
    if let Some(field) = missing_identity(&*object, rules.require_namespace) {
        return Err(fail(kinformer_protobuf::Error::MissingField {
            what: "watch event object",
            field,
        }));
    }
    Ok(match event.event_type {
        wire::EventType::Added => WatchEvent::Added(object),
        wire::EventType::Modified => WatchEvent::Modified(object),
        _ => WatchEvent::Deleted(object),
    })
}

/// Decodes the bytes after the last newline of a body: a last line that lacks only its newline
/// is an event; anything else there means the connection was cut mid-line.
fn decode_tail<K: Object + DeserializeOwned>(
    tail: &[u8],
    rules: Rules,
    events: u64,
) -> Option<Result<WatchEvent<K>, Error>> {
    decode_event(tail, rules).map(|r| {
        r.map_err(|_| Error::Interrupted {
            events,
            reason: format!(
                "the stream ended inside a line ({} bytes received of it)",
                tail.len()
            ),
        })
    })
}

/// A line with nothing to decode: empty, or only whitespace (a `\r` before the newline).
fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

fn decode_event<K: Object + DeserializeOwned>(
    line: &[u8],
    rules: Rules,
) -> Option<Result<WatchEvent<K>, kinformer_core::Error>> {
    if is_blank(line) {
        return None;
    }
    let line = rules.managed_fields.event(line);
    let event = match WatchEvent::from_json(&line) {
        Ok(event) => event,
        Err(e) => return Some(Err(e)),
    };
    let object = match &event {
        WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => Some(&**o),
        WatchEvent::Bookmark(_) | WatchEvent::Error(_) => None,
    };
    if let Some(field) = object.and_then(|o| missing_identity(o, rules.require_namespace)) {
        return Some(Err(kinformer_core::Error::Decode {
            what: "watch event",
            source: serde::de::Error::custom(format_args!("the object has no {field}")),
        }));
    }
    Some(Ok(event))
}

/// Decodes a watch body (any stream of byte chunks) into events as they arrive.
///
/// The body is split into lines as it arrives, and batches of lines are decoded as tasks on the
/// runtime's worker threads, as many at once as the machine has cores; the events come out in
/// the order of their lines. A batch takes the lines that are ready (up to about 64 KiB, counting
/// every byte including newlines and blank lines, and at most 1024 lines), so a busy stream is
/// decoded in parallel while a quiet one hands each event on at once; a small batch is decoded
/// in place, without a hand-off. The work in flight is bounded: the body is read only as fast as
/// the stream is consumed, a few batches ahead. Blank lines are skipped as they are split, and
/// each batch's worth of nothing but blank lines is a cooperative yield point (tokio's task
/// budget), so a server that sends nothing but newlines, as fast as it can, holds neither memory
/// nor the thread.
///
/// The stream ends (`None`) when the body ends cleanly, and after its first error, the neutral
/// [`list_watch::Error`](kinformer_core::list_watch::Error) with this crate's [`Error`] inside
/// ([`Error::from_list_watch`]); its kind says whether to resume or relist. `idle`, when set,
/// ends the stream with [`Error::IdleTimeout`] if no chunk arrives for that long. An error from
/// `body` ends it with [`Error::Interrupted`]: the connection was cut, and a new watch from the
/// last seen resourceVersion resumes it. Any error comes after every event of the lines before
/// it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use bytes::Bytes;
/// use futures_util::StreamExt;
/// use kinformer_client::decode_watch;
/// use kinformer_core::{DynamicObject, WatchEvent};
///
/// let chunks = vec![
///     Ok::<_, std::io::Error>(Bytes::from_static(b"{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resour")),
///     Ok(Bytes::from_static(b"ceVersion\":\"9\"}}}\n")),
/// ];
/// let mut events = decode_watch::<DynamicObject, _, _>(futures_util::stream::iter(chunks), 1 << 20, None);
/// match events.next().await {
///     Some(Ok(WatchEvent::Bookmark(b))) => assert_eq!(b.resource_version.as_str(), "9"),
///     other => panic!("{other:?}"),
/// }
/// assert!(events.next().await.is_none());
/// # }
/// ```
pub fn decode_watch<K, S, E>(body: S, max_line: usize, idle: Option<Duration>) -> WatchStream<K>
where
    K: Object + DeserializeOwned,
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    decode_watch_with(body, max_line, false, idle, Parallel::default())
}

/// How a watch body is decoded in parallel.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Parallel {
    /// The most batches decoding at once.
    pub(crate) workers: usize,
    /// A batch is handed on once its lines reach this many bytes, newlines and blank lines
    /// included.
    pub(crate) batch_bytes: usize,
    /// A batch is handed on once it has split this many lines, blank ones included.
    pub(crate) batch_lines: usize,
    /// A batch smaller than this is decoded on the reading task, without a hand-off.
    pub(crate) inline_below: usize,
}

/// A batch is cut at this many bytes of lines: at ~5 KB per pod, a dozen events, whose decode
/// (~300 µs) dwarfs the hand-off to another task (~1 µs).
const BATCH_BYTES: usize = 64 * 1024;
/// A batch is cut at this many lines, whatever their size: a line costs a `Line` (48 bytes)
/// until it is decoded, and a run of tiny lines (a blank line is one byte) must not pile up.
/// Real events are larger than 64 bytes, so for them the byte bound comes first.
const BATCH_LINES: usize = 1024;
/// A batch under this many bytes (a small event or two) is decoded in place: a hand-off would
/// cost about as much as the decode. A single ~5 KB pod event is handed off, so that a busy
/// watch spreads over the workers.
const INLINE_BELOW: usize = 4 * 1024;

impl Default for Parallel {
    fn default() -> Self {
        Self {
            workers: std::thread::available_parallelism().map_or(1, usize::from),
            batch_bytes: BATCH_BYTES,
            batch_lines: BATCH_LINES,
            inline_below: INLINE_BELOW,
        }
    }
}

/// Lines to decode, and how the stream ends after them, if it does.
struct Batch {
    lines: Vec<Line>,
    end: Option<End>,
}

enum End {
    /// The body ended; these are the bytes after its last newline.
    Tail(Vec<u8>),
    /// The stream ends with this error (an `Interrupted` gets its event count on the way out).
    Fail(Error),
}

impl Batch {
    fn bytes(&self) -> usize {
        self.lines.iter().map(|l| l.bytes.len()).sum()
    }

    /// Decodes the lines in order, up to the first error, which ends the result.
    fn decode<K: Object + DeserializeOwned>(
        self,
        rules: Rules,
        format: WatchFormat,
    ) -> Vec<Result<WatchEvent<K>, Error>> {
        let mut out = Vec::with_capacity(self.lines.len() + 1);
        for line in &self.lines {
            let decoded = match format {
                WatchFormat::Json => decode_line(line, rules),
                WatchFormat::Protobuf(codec) => Some(decode_frame(line, codec, rules)),
            };
            match decoded {
                None => {}
                Some(Ok(event)) => out.push(Ok(event)),
                Some(Err(e)) => {
                    out.push(Err(e));
                    return out;
                }
            }
        }
        // The chunks the lines share are released here, by the thread that decoded them.
        drop(self.lines);
        match self.end {
            None => {}
            Some(End::Fail(e)) => out.push(Err(e)),
            Some(End::Tail(tail)) => out.extend(decode_tail(&tail, rules, 0)),
        }
        out
    }
}

/// The reading half: pulls chunks from the body and cuts batches of lines.
struct Reader<S> {
    body: Pin<Box<S>>,
    split: Splitter,
    idle: Option<Duration>,
    batch_bytes: usize,
    batch_lines: usize,
    ended: bool,
    /// Counts the bytes read.
    bytes: metrics::Counter,
}

impl<S, E> Reader<S>
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    /// The next batch: the lines that are complete once the body has no more bytes ready (or
    /// once they reach the batch size in bytes or in lines), and the end of the stream if it
    /// came. Blank lines are counted and dropped; each batch's worth of nothing but blank lines
    /// is a cooperative yield point (tokio's task budget) before the splitting goes on.
    async fn next_batch(&mut self) -> Option<Batch> {
        if self.ended {
            return None;
        }
        let mut batch = Batch {
            lines: Vec::new(),
            end: None,
        };
        // Bytes (with their newlines) and lines split into this batch, blank ones included.
        let (mut bytes, mut lines) = (0, 0);
        loop {
            while let Some(line) = self.split.next_line() {
                match line {
                    Ok(line) => {
                        bytes += line.bytes.len() + 1;
                        lines += 1;
                        if !self.split.is_blank(&line) {
                            batch.lines.push(line);
                        }
                        if bytes >= self.batch_bytes || lines >= self.batch_lines {
                            if !batch.lines.is_empty() {
                                return Some(batch);
                            }
                            // Nothing but blank lines: a cooperative yield point, so that the
                            // runtime gets to run something else (the consumer's other branches,
                            // a Ctrl-C handler) once this task has used its budget. Outside a
                            // runtime there is no budget, and this never waits.
                            (bytes, lines) = (0, 0);
                            tokio::task::coop::consume_budget().await;
                        }
                    }
                    Err(e) => return Some(self.end(batch, End::Fail(e))),
                }
            }
            let next = if !batch.lines.is_empty() {
                // Hand on what is complete rather than wait for more.
                match self.body.next().now_or_never() {
                    Some(next) => next,
                    None => return Some(batch),
                }
            } else if let Some(idle) = self.idle {
                match tokio::time::timeout(idle, self.body.next()).await {
                    Ok(next) => next,
                    Err(_) => {
                        tracing::debug!(?idle, "watch idle, ending the stream");
                        return Some(self.end(batch, End::Fail(Error::IdleTimeout { idle })));
                    }
                }
            } else {
                self.body.next().await
            };
            match next {
                Some(Ok(chunk)) => {
                    self.bytes.increment(chunk.len() as u64);
                    self.split.push(chunk);
                }
                Some(Err(e)) => {
                    let reason = error_chain(&e);
                    tracing::debug!(%reason, "watch stream interrupted");
                    let cut = Error::Interrupted { events: 0, reason };
                    return Some(self.end(batch, End::Fail(cut)));
                }
                None => {
                    let end = self.split.finish();
                    return Some(self.end(batch, end));
                }
            }
        }
    }

    fn end(&mut self, mut batch: Batch, end: End) -> Batch {
        self.ended = true;
        batch.end = Some(end);
        batch
    }
}

/// [`decode_watch`] with the settings of the caller.
pub(crate) fn decode_watch_with<K, S, E>(
    body: S,
    max_line: usize,
    require_namespace: bool,
    idle: Option<Duration>,
    parallel: Parallel,
) -> WatchStream<K>
where
    K: Object + DeserializeOwned,
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    decode_watch_counted(
        body,
        max_line,
        Rules {
            require_namespace,
            managed_fields: ManagedFieldsDecode::Keep,
        },
        idle,
        parallel,
        Traffic::none(),
        WatchFormat::Json,
    )
}

/// [`decode_watch_with`], recording the bytes read and the time each batch takes to decode.
pub(crate) fn decode_watch_counted<K, S, E>(
    body: S,
    max_line: usize,
    rules: Rules,
    idle: Option<Duration>,
    parallel: Parallel,
    traffic: Traffic,
    format: WatchFormat,
) -> WatchStream<K>
where
    K: Object + DeserializeOwned,
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let Traffic { bytes, decode } = traffic;
    let reader = Reader {
        body: Box::pin(body),
        split: Splitter::new(format, max_line),
        idle,
        batch_bytes: parallel.batch_bytes.max(1),
        batch_lines: parallel.batch_lines.max(1),
        ended: false,
        bytes,
    };
    let batches = futures_util::stream::unfold(reader, |mut reader| async move {
        let batch = reader.next_batch().await?;
        Some((batch, reader))
    });
    let decoded = batches
        .map(move |batch| {
            let timer = decode.clone();
            let timed = move |batch: Batch| {
                let started = std::time::Instant::now();
                let events = batch.decode::<K>(rules, format);
                timer.record(started.elapsed());
                events
            };
            // Without a second core, or outside a runtime, there is nowhere to hand a batch to.
            let runtime = (parallel.workers > 1 && batch.bytes() >= parallel.inline_below)
                .then(tokio::runtime::Handle::try_current)
                .and_then(Result::ok);
            if let Some(runtime) = runtime {
                // A task on the runtime's workers, not a blocking thread: the objects of a watch
                // are then allocated on the same few threads as those of the list before it and
                // of the events after it, whose memory they reuse (with blocking threads, the
                // resident size of a typed cache doubled under updates), and the hand-off is a
                // queue push rather than the wake-up of a parked thread (a blocking thread per
                // batch cost a third of the event rate on 2 cores; docs/benchmarks.md).
                let task = runtime.spawn(async move { timed(batch) });
                futures_util::future::Either::Left(task.map(|joined| match joined {
                    Ok(events) => events,
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    Err(_) => vec![Err(Error::Interrupted {
                        events: 0,
                        reason: "the runtime shut down while decoding".to_owned(),
                    })],
                }))
            } else {
                futures_util::future::Either::Right(futures_util::future::ready(timed(batch)))
            }
        })
        .buffered(parallel.workers.max(1));
    struct Out<D, K> {
        decoded: Pin<Box<D>>,
        current: std::vec::IntoIter<Result<WatchEvent<K>, Error>>,
        delivered: u64,
        ended: bool,
    }
    let out = Out {
        decoded: Box::pin(decoded),
        current: Vec::new().into_iter(),
        delivered: 0,
        ended: false,
    };
    Box::pin(futures_util::stream::unfold(out, |mut out| async move {
        loop {
            if out.ended {
                return None;
            }
            match out.current.next() {
                Some(Ok(event)) => {
                    out.delivered += 1;
                    return Some((Ok(event), out));
                }
                Some(Err(mut e)) => {
                    out.ended = true;
                    if let Error::Interrupted { events, .. } = &mut e {
                        *events = out.delivered;
                    }
                    return Some((Err(e.into()), out));
                }
                None => match out.decoded.next().await {
                    Some(events) => out.current = events.into_iter(),
                    None => return None,
                },
            }
        }
    }))
}

/// An error and its sources, joined by `: `.
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    let mut depth = 0;
    while let Some(s) = source
        && depth < 8
    {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
        depth += 1;
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinformer_core::list_watch::{self, ErrorKind};
    use kinformer_core::{DynamicObject, Object};

    /// A stream's item with the client's error taken out of the neutral one, which must hold it.
    fn rich(
        item: Option<Result<WatchEvent<DynamicObject>, list_watch::Error>>,
    ) -> Option<Result<WatchEvent<DynamicObject>, Error>> {
        item.map(|r| r.map_err(|e| Error::try_from(e).expect("the client's error")))
    }

    fn line(kind: &str, name: &str, rv: u32) -> String {
        format!(
            r#"{{"type":"{kind}","object":{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}},"data":{{"k":"{}"}}}}}}"#,
            "x".repeat(rv as usize % 50)
        )
    }

    /// Feeds `body` in chunks of `size` bytes and collects what comes out.
    fn run(body: &[u8], size: usize, max_line: usize) -> Vec<Result<String, String>> {
        let mut d = WatchDecoder::new(max_line);
        let mut out = Vec::new();
        let summarize = |r: Result<WatchEvent<DynamicObject>, Error>| match r {
            Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)) => Ok(
                format!("{}@{}", o.name(), o.resource_version().unwrap_or_default()),
            ),
            Ok(WatchEvent::Bookmark(b)) => Ok(format!("bookmark@{}", b.resource_version)),
            Ok(WatchEvent::Error(s)) => Ok(format!("error {}", s.code)),
            Err(e) => Err(e.to_string()),
        };
        for chunk in body.chunks(size.max(1)) {
            d.push(Bytes::copy_from_slice(chunk));
            while let Some(r) = d.next_event::<DynamicObject>() {
                out.push(summarize(r));
            }
        }
        if let Some(r) = d.finish::<DynamicObject>() {
            out.push(summarize(r));
        }
        out
    }

    #[test]
    fn lines_split_across_chunks_stay_whole_whether_held_or_dropped() {
        let body: String = (0..40)
            .map(|i| line("ADDED", &format!("cm-{i}"), i) + "\n")
            .collect();
        let expected: Vec<&str> = body.lines().collect();
        for size in [1, 7, 64, 150] {
            // Held, as a form that keeps its bytes holds them: no later line may be gathered
            // over an earlier one.
            let mut split = LineSplitter::new(1 << 20);
            let mut held = Vec::new();
            for chunk in body.as_bytes().chunks(size) {
                split.push(Bytes::copy_from_slice(chunk));
                while let Some(line) = split.next_line() {
                    held.push(line.unwrap().bytes);
                }
            }
            let held: Vec<&[u8]> = held.iter().map(|b| &b[..]).collect();
            let expected: Vec<&[u8]> = expected.iter().map(|l| l.as_bytes()).collect();
            assert_eq!(held, expected, "chunks of {size}, lines held");
            // Dropped at once, as the typed path drops them: the buffer goes round.
            let mut split = LineSplitter::new(1 << 20);
            let mut n = 0;
            for chunk in body.as_bytes().chunks(size) {
                split.push(Bytes::copy_from_slice(chunk));
                while let Some(line) = split.next_line() {
                    assert_eq!(&line.unwrap().bytes[..], expected[n], "chunks of {size}");
                    n += 1;
                }
            }
            assert_eq!(n, expected.len());
        }
    }

    #[test]
    fn any_chunking_gives_the_same_events() {
        let body: String = (1..=20)
            .map(|i| {
                line(
                    ["ADDED", "MODIFIED", "DELETED"][i as usize % 3],
                    &format!("cm{i}"),
                    i,
                ) + "\n"
            })
            .collect();
        let want = run(body.as_bytes(), body.len(), 1 << 20);
        assert_eq!(want.len(), 20);
        assert!(want.iter().all(Result::is_ok));
        for size in [1, 2, 3, 7, 64, 100, 199, 4096] {
            assert_eq!(
                run(body.as_bytes(), size, 1 << 20),
                want,
                "chunk size {size}"
            );
        }
    }

    #[test]
    fn blank_lines_and_crlf_are_tolerated() {
        let body = format!(
            "\n{}\r\n\n  \n{}\n",
            line("ADDED", "a", 1),
            line("MODIFIED", "a", 2)
        );
        for size in [1, 5, 1000] {
            assert_eq!(
                run(body.as_bytes(), size, 1 << 20),
                vec![Ok("a@1".to_owned()), Ok("a@2".to_owned())]
            );
        }
    }

    #[test]
    fn oversized_line_ends_the_stream_with_a_typed_error() {
        let big = line("ADDED", "big", 1)
            .replace("\"k\":\"x\"", &format!("\"k\":\"{}\"", "y".repeat(5000)));
        let body = format!(
            "{}\n{big}\n{}\n",
            line("ADDED", "a", 1),
            line("ADDED", "after", 3)
        );
        for size in [1, 100, 100_000] {
            let mut d = WatchDecoder::new(1000);
            let mut got = Vec::new();
            for chunk in body.as_bytes().chunks(size) {
                d.push(Bytes::copy_from_slice(chunk));
                while let Some(r) = d.next_event::<DynamicObject>() {
                    got.push(r);
                }
                let Splitter::Lines(split) = &d.split else {
                    unreachable!("a JSON decoder splits lines")
                };
                assert!(split.pending.len() <= 1000, "buffer grew past the limit");
            }
            assert!(d.finish::<DynamicObject>().is_none());
            assert_eq!(got.len(), 2, "chunk size {size}");
            assert!(got[0].is_ok());
            match &got[1] {
                Err(Error::LineTooLong {
                    line: 2,
                    limit: 1000,
                }) => {}
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn malformed_line_is_a_decode_error_that_says_where() {
        let first = line("ADDED", "a", 1);
        let body = format!(
            "{first}\n{{\"type\":\"ADDED\",\"object\":{{\"metadata\":7}}}}\n{}\n",
            line("ADDED", "b", 2)
        );
        for size in [1, 13, 10_000] {
            let out = run(body.as_bytes(), size, 1 << 20);
            assert_eq!(out.len(), 2, "{out:?}");
            let err = out[1].as_ref().unwrap_err();
            let want = format!("line 2 (byte {} of the stream)", first.len() + 1);
            assert!(err.contains(&want), "{err}");
        }
    }

    #[test]
    fn eof_mid_line_is_an_interruption_not_a_decode_error() {
        let full = line("ADDED", "a", 1);
        let body = format!("{full}\n{}", &full[..full.len() / 2]);
        let mut d = WatchDecoder::new(1 << 20);
        d.push(Bytes::from(body));
        assert!(d.next_event::<DynamicObject>().unwrap().is_ok());
        assert!(d.next_event::<DynamicObject>().is_none());
        match d.finish::<DynamicObject>() {
            Some(Err(e @ Error::Interrupted { events: 1, .. })) => assert!(e.is_resumable()),
            other => panic!("{other:?}"),
        }
        // A complete last line without its newline still counts.
        assert_eq!(
            run(full.as_bytes(), 10, 1 << 20),
            vec![Ok("a@1".to_owned())]
        );
    }

    #[test]
    fn objects_without_a_name_or_namespace_are_decode_errors_naming_the_line() {
        let first = line("ADDED", "a", 1);
        let cases = [
            (
                r#"{"type":"ADDED","object":{"kind":"ConfigMap"}}"#,
                false,
                "metadata.name",
            ),
            (
                r#"{"type":"MODIFIED","object":{"metadata":{"name":""}}}"#,
                false,
                "metadata.name",
            ),
            (
                r#"{"type":"DELETED","object":{"metadata":{"resourceVersion":"2"}}}"#,
                false,
                "metadata.name",
            ),
            (
                r#"{"type":"ADDED","object":{"metadata":{"name":"b"}}}"#,
                true,
                "metadata.namespace",
            ),
        ];
        for (bad, require_namespace, field) in cases {
            let body = format!("{first}\n{bad}\n{}\n", line("ADDED", "c", 3));
            let mut d = WatchDecoder::new(1 << 20).require_namespace(require_namespace);
            d.push(Bytes::from(body));
            assert!(d.next_event::<DynamicObject>().unwrap().is_ok());
            match d.next_event::<DynamicObject>() {
                Some(Err(e @ Error::Decode { line: Some(2), .. })) => {
                    assert!(e.to_string().contains(&format!("has no {field}")), "{e}");
                    assert!(!e.is_retryable() && !e.is_resumable());
                }
                other => panic!("{bad}: {other:?}"),
            }
            assert!(d.next_event::<DynamicObject>().is_none(), "the stream ends");
        }
        // Bookmarks and ERROR events carry no name; a cluster-scoped object no namespace.
        let body = concat!(
            r#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"5"}}}"#,
            "\n",
            r#"{"type":"ERROR","object":{"kind":"Status","code":410}}"#,
            "\n",
            r#"{"type":"ADDED","object":{"metadata":{"name":"node-1"}}}"#,
            "\n",
        );
        let out = run(body.as_bytes(), 7, 1 << 20);
        assert_eq!(out.len(), 3, "{out:?}");
        assert!(out.iter().all(Result::is_ok), "{out:?}");
    }

    #[test]
    fn error_events_come_through_as_events() {
        let body = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}}\n";
        assert_eq!(
            run(body.as_bytes(), 4, 1 << 20),
            vec![Ok("error 410".to_owned())]
        );
    }

    #[tokio::test]
    async fn stream_maps_body_errors_and_idleness() {
        let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
            Ok(Bytes::from(line("ADDED", "a", 1) + "\n{\"type\":")),
            Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "reset by peer",
            )),
        ];
        let mut s =
            decode_watch::<DynamicObject, _, _>(futures_util::stream::iter(chunks), 1 << 20, None);
        assert!(s.next().await.unwrap().is_ok());
        let cut = s.next().await;
        assert!(
            matches!(&cut, Some(Err(e)) if e.kind() == ErrorKind::Resume),
            "{cut:?}"
        );
        match rich(cut) {
            Some(Err(Error::Interrupted { events: 1, reason })) => {
                assert!(reason.contains("reset"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        assert!(s.next().await.is_none());

        tokio::time::pause();
        let pending = futures_util::stream::pending::<Result<Bytes, std::io::Error>>();
        let mut s =
            decode_watch::<DynamicObject, _, _>(pending, 1 << 20, Some(Duration::from_secs(30)));
        match rich(s.next().await) {
            Some(Err(e @ Error::IdleTimeout { .. })) => assert!(e.is_resumable()),
            other => panic!("{other:?}"),
        }
        assert!(s.next().await.is_none());
    }

    /// A parallel setup that hands every line to a worker on its own, so batches finish out of
    /// order whenever the threads race.
    fn eager(workers: usize, batch_bytes: usize) -> Parallel {
        Parallel {
            workers,
            batch_bytes,
            batch_lines: BATCH_LINES,
            inline_below: 0,
        }
    }

    /// An event as a line of text, or its error's message (the neutral error shows the
    /// client's).
    fn summarize<E: fmt::Display>(
        r: &Result<WatchEvent<DynamicObject>, E>,
    ) -> Result<String, String> {
        match r {
            Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)) => Ok(
                format!("{}@{}", o.name(), o.resource_version().unwrap_or_default()),
            ),
            Ok(WatchEvent::Bookmark(b)) => Ok(format!("bookmark@{}", b.resource_version)),
            Ok(WatchEvent::Error(s)) => Ok(format!("error {}", s.code)),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn collect_parallel(
        body: &[u8],
        size: usize,
        parallel: Parallel,
    ) -> Vec<Result<String, String>> {
        let chunks: Vec<Result<Bytes, std::io::Error>> = body
            .chunks(size)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let stream = decode_watch_with::<DynamicObject, _, _>(
            futures_util::stream::iter(chunks),
            1 << 20,
            false,
            None,
            parallel,
        );
        stream.map(|r| summarize(&r)).collect().await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn parallel_decode_keeps_the_order_of_the_lines() {
        let body: String = (1..=500)
            .map(|i| {
                let kind = ["ADDED", "MODIFIED", "DELETED"][i as usize % 3];
                let mut l = line(kind, &format!("cm{i}"), i);
                if i % 97 == 0 {
                    l.push_str("\n\n"); // blank lines are skipped wherever they fall
                }
                l + "\n"
            })
            .collect();
        let want = run(body.as_bytes(), body.len(), 1 << 20);
        assert_eq!(want.len(), 500);
        for (size, workers, batch) in [(1 << 20, 8, 1), (7, 4, 1), (100, 3, 300), (4096, 2, 0)] {
            let got = collect_parallel(body.as_bytes(), size, eager(workers, batch)).await;
            assert_eq!(
                got, want,
                "chunks of {size}, {workers} workers, batches of {batch}"
            );
        }
        // The default settings, and a stream polled outside any runtime, agree too.
        let got = collect_parallel(body.as_bytes(), 1500, Parallel::default()).await;
        assert_eq!(got, want);
        let chunks = vec![Ok::<_, std::io::Error>(Bytes::from(body.clone()))];
        let got: Vec<_> = std::thread::spawn(move || {
            let mut stream = decode_watch_with::<DynamicObject, _, _>(
                futures_util::stream::iter(chunks),
                1 << 20,
                false,
                None,
                eager(4, 1),
            );
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            let mut got = Vec::new();
            // Everything is ready at once: no poll may be pending.
            for _ in 0..1000 {
                match stream.as_mut().poll_next(&mut cx) {
                    std::task::Poll::Ready(Some(r)) => got.push(summarize(&r)),
                    std::task::Poll::Ready(None) => return got,
                    std::task::Poll::Pending => panic!("pending without a runtime"),
                }
            }
            panic!("the stream did not end");
        })
        .join()
        .unwrap();
        assert_eq!(got, want);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_error_mid_batch_comes_after_the_events_before_it() {
        let lines: Vec<String> = (1..=6)
            .map(|i| line("ADDED", &format!("cm{i}"), i))
            .collect();
        let bad = r#"{"type":"ADDED","object":{"metadata":7}}"#;
        let body = format!(
            "{}\n{}\n{}\n{bad}\n{}\n{}\n",
            lines[0], lines[1], lines[2], lines[3], lines[4]
        );
        let offset = lines[..3].iter().map(|l| l.len() + 1).sum::<usize>();
        // One batch holding every line, several batches, and a line per batch.
        for batch in [1 << 20, 200, 1] {
            let got = collect_parallel(body.as_bytes(), 64, eager(4, batch)).await;
            assert_eq!(got.len(), 4, "batches of {batch}: {got:?}");
            assert_eq!(
                got[..3],
                [
                    Ok("cm1@1".to_owned()),
                    Ok("cm2@2".to_owned()),
                    Ok("cm3@3".to_owned())
                ]
            );
            let err = got[3].as_ref().unwrap_err();
            assert!(
                err.contains(&format!("line 4 (byte {offset} of the stream)")),
                "{err}"
            );
        }
        // A line over the limit, and a cut mid-line, also come after the events before them,
        // and a cut counts the events delivered.
        let cut = format!("{}\n{}\n{}", lines[0], lines[1], &lines[2][..20]);
        let chunks = vec![Ok::<_, std::io::Error>(Bytes::from(cut))];
        let mut stream = decode_watch_with::<DynamicObject, _, _>(
            futures_util::stream::iter(chunks),
            1 << 20,
            false,
            None,
            eager(4, 1),
        );
        assert!(stream.next().await.unwrap().is_ok());
        assert!(stream.next().await.unwrap().is_ok());
        match rich(stream.next().await) {
            Some(Err(Error::Interrupted { events: 2, .. })) => {}
            other => panic!("{other:?}"),
        }
        assert!(stream.next().await.is_none());
        let long = format!("{}\n{}\n{}\n", lines[0], "x".repeat(3000), lines[1]);
        let chunks = vec![Ok::<_, std::io::Error>(Bytes::from(long))];
        let mut stream = decode_watch_with::<DynamicObject, _, _>(
            futures_util::stream::iter(chunks),
            1000,
            false,
            None,
            eager(4, 1 << 20),
        );
        assert!(stream.next().await.unwrap().is_ok());
        assert!(matches!(
            rich(stream.next().await),
            Some(Err(Error::LineTooLong {
                line: 2,
                limit: 1000
            }))
        ));
        assert!(stream.next().await.is_none());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_body_is_read_only_a_few_batches_ahead_of_the_consumer() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        // An endless body of ~200-byte lines in 1 KiB chunks, counting the chunks it gives out.
        let one = line("MODIFIED", "cm", 7) + "\n";
        let block = Bytes::from(one.repeat(1024 / one.len() + 1));
        let pulled = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&pulled);
        let body = futures_util::stream::repeat_with(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok::<_, std::io::Error>(block.clone())
        });
        let (workers, batch_bytes) = (3, 4096);
        let mut stream = decode_watch_with::<DynamicObject, _, _>(
            body,
            1 << 20,
            false,
            None,
            eager(workers, batch_bytes),
        );
        // Ahead of the consumer: the batches in flight, the one being cut, and the one being
        // handed out, each at most a batch plus a chunk.
        let bound_bytes = (workers + 2) * (batch_bytes + 1024 + one.len());
        let mut taken = 0usize;
        for round in 0..50 {
            for _ in 0..round * 7 {
                assert!(stream.next().await.unwrap().is_ok());
                taken += 1;
            }
            let read = pulled.load(Ordering::SeqCst) * 1024;
            let ahead = read.saturating_sub(taken * one.len());
            assert!(
                ahead <= bound_bytes,
                "round {round}: {ahead} bytes read ahead of {taken} events (bound {bound_bytes})"
            );
        }
        assert!(taken > 8000, "the stream kept flowing");
    }

    /// A reader over `chunks`, with the default batch bounds.
    fn reader(
        chunks: Vec<Bytes>,
    ) -> Reader<impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static> {
        Reader {
            body: Box::pin(futures_util::stream::iter(chunks.into_iter().map(Ok))),
            split: Splitter::new(WatchFormat::Json, 1 << 20),
            idle: None,
            batch_bytes: BATCH_BYTES,
            batch_lines: BATCH_LINES,
            ended: false,
            bytes: metrics::Counter::noop(),
        }
    }

    /// A server that sends nothing but blank lines, as fast as it can: not one of them is kept,
    /// whatever their number, and lines too small for the byte cut are cut by their count.
    #[tokio::test]
    async fn blank_lines_are_counted_and_never_kept() {
        // 4 MiB of blank lines of every kind (about 1.7 million lines), all ready at once.
        let blanks = Bytes::from(b"\n\r\n  \n\t\n\n".repeat(64 * 1024 / 10));
        let mut r = reader(vec![blanks.clone(); 64]);
        let batch = r.next_batch().await.unwrap();
        assert!(
            batch.lines.is_empty(),
            "{} blank lines kept",
            batch.lines.len()
        );
        assert!(matches!(&batch.end, Some(End::Tail(t)) if t.is_empty()));
        assert!(r.next_batch().await.is_none());

        // Events between the blank lines: each batch holds at most 64 KiB of lines, blank lines
        // and newlines counted, and at most 1024 lines.
        let event = line("ADDED", "a", 1);
        let mut body = Vec::new();
        for i in 0..200 {
            body.extend_from_slice(event.as_bytes());
            body.extend_from_slice(&b"\n".repeat(if i % 2 == 0 { 1 } else { 30_000 }));
        }
        let mut r = reader(vec![Bytes::from(body)]);
        let mut events = 0;
        while let Some(batch) = r.next_batch().await {
            assert!(batch.lines.len() <= BATCH_LINES);
            let bytes = batch.bytes() + batch.lines.len();
            assert!(
                bytes <= BATCH_BYTES + event.len() + 1,
                "{bytes} bytes in a batch"
            );
            assert!(batch.lines.iter().all(|l| !is_blank(&l.bytes)));
            events += batch.lines.len();
        }
        assert_eq!(events, 200);

        // Tiny lines that are not blank (each a decode error, but the reader does not judge):
        // cut at 1024 lines, not at 64 KiB.
        let tiny = Bytes::from(b"x\n".repeat(10_000));
        let mut r = reader(vec![tiny]);
        let sizes: Vec<usize> = std::iter::from_fn(|| {
            futures_util::FutureExt::now_or_never(r.next_batch())
                .flatten()
                .map(|b| b.lines.len())
        })
        .collect();
        assert_eq!(sizes.iter().sum::<usize>(), 10_000);
        assert!(sizes.iter().all(|n| *n <= BATCH_LINES), "{sizes:?}");
    }

    /// An endless body of blank lines does not hold the thread: the consumer's task yields, so
    /// the other tasks of a single-threaded runtime run, and the stream can be dropped.
    #[tokio::test]
    async fn an_endless_body_of_blank_lines_yields_to_the_runtime() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        const GIVE_UP: usize = 16 << 20;
        let block = Bytes::from(b"\n\r\n  \n".repeat(64 * 1024 / 7));
        let pulled = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&pulled);
        let body = futures_util::stream::repeat_with(move || {
            let n = counter.fetch_add(block.len(), Ordering::SeqCst);
            // Without a yield, nothing else ever runs: end the test's wait rather than loop.
            assert!(
                n < GIVE_UP,
                "read {n} bytes of blank lines without yielding"
            );
            Ok::<_, std::io::Error>(block.clone())
        });
        let mut stream = decode_watch_with::<DynamicObject, _, _>(
            body,
            1 << 20,
            false,
            None,
            Parallel::default(),
        );
        let consumer = tokio::spawn(async move { stream.next().await.is_some() });
        let mut turns = 0;
        while pulled.load(Ordering::SeqCst) < 4 << 20 {
            tokio::task::yield_now().await;
            assert!(!consumer.is_finished(), "the consumer gave up");
            turns += 1;
            assert!(turns < 1_000_000);
        }
        assert!(
            turns > 3,
            "this task ran {turns} times while 4 MiB was read"
        );
        consumer.abort();
        assert!(consumer.await.unwrap_err().is_cancelled());
    }
}
