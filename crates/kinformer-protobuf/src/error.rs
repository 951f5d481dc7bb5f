//! The crate's one error type.

/// What went wrong decoding (or converting) Kubernetes protobuf.
///
/// Every variant is a fault of the bytes received, never of the caller: a client that gets one
/// cannot fix it by retrying the same bytes, and should treat the response (or the watch) as
/// broken: relist, or fall back to JSON.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The body does not begin with the protobuf envelope's magic bytes `k8s\0`: the server
    /// sent something else (JSON, an HTML error page) under a protobuf content type.
    #[error("not a Kubernetes protobuf body: it does not begin with the magic bytes k8s\\0")]
    NotProtobuf,
    /// A message is not valid protobuf for its type.
    #[error("malformed protobuf {what}: {source}")]
    Decode {
        /// The message that failed (`Unknown`, `WatchEvent`, `PodList`, ...).
        what: &'static str,
        /// What prost found wrong.
        #[source]
        source: prost::DecodeError,
    },
    /// A watch frame announces more bytes than the decoder accepts.
    #[error("a protobuf watch frame of {len} bytes is over the limit of {limit} bytes")]
    FrameTooLarge {
        /// The length the frame announced.
        len: usize,
        /// The most the decoder accepts.
        limit: usize,
    },
    /// The stream ended in the middle of something: a frame's length or its bytes.
    #[error("the protobuf stream ended in the middle of {what}")]
    Truncated {
        /// What was cut short.
        what: &'static str,
    },
    /// Bytes that are not valid protobuf: a length past the end of its message, a varint over
    /// ten bytes, a field with the wrong wire type for its type, invalid UTF-8 in a string,
    /// messages nested too deep.
    #[error("malformed protobuf: {0}")]
    Malformed(&'static str),
    /// The envelope names a kind other than the one expected.
    #[error("expected a protobuf {expected}, the envelope says {found}")]
    UnexpectedKind {
        /// `apiVersion/kind` expected.
        expected: String,
        /// `apiVersion/kind` found.
        found: String,
    },
    /// The envelope says its bytes are encoded (compressed) in a way this crate does not read.
    #[error("the protobuf envelope's content encoding {0:?} is not supported")]
    ContentEncoding(String),
    /// A watch event of a type Kubernetes does not send.
    #[error("unknown watch event type {0:?}")]
    UnknownEventType(String),
    /// A field a message must carry is missing.
    #[error("protobuf {what} has no {field}")]
    MissingField {
        /// The message.
        what: &'static str,
        /// The field.
        field: &'static str,
    },
    /// A field that carries JSON inside the protobuf (`RawExtension`, `FieldsV1`, `JSON`)
    /// holds bytes that are not JSON.
    #[error("protobuf field {field} should hold JSON: {source}")]
    EmbeddedJson {
        /// The field's type.
        field: &'static str,
        /// What the JSON parser found.
        #[source]
        source: serde_json::Error,
    },
    /// A timestamp out of the range a timestamp can hold.
    #[error("protobuf timestamp {seconds}s {nanos}ns is out of range")]
    Time {
        /// Seconds since the Unix epoch.
        seconds: i64,
        /// Nanoseconds within the second.
        nanos: i32,
    },
    /// An `IntOrString` message whose type is neither 0 (integer) nor 1 (string).
    #[error("protobuf IntOrString has unknown type {0}")]
    IntOrStringType(i64),
    /// A JSON object that does not deserialize into the typed kind it claims to be (or a typed
    /// object that does not serialize to JSON).
    #[error("JSON is not a valid {kind}: {source}")]
    Json {
        /// The kind (`Pod`, ...).
        kind: &'static str,
        /// What serde_json found wrong.
        #[source]
        source: serde_json::Error,
    },
}
