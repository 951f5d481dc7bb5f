//! The error type of `kinformer-client`.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use kinformer_core::Status;
use kinformer_core::list_watch::BoxError;

/// Everything that can go wrong talking to the API server. Each variant says what the caller
/// should do; [`Error::is_retryable`], [`Error::is_gone`] and [`Error::retry_after`] sum it up.
///
/// No variant ever carries a token, a password or key material: `Display` and `Debug` are safe to
/// log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// 410 Gone / `Expired`: the requested resourceVersion (or continue token) is too old. Not
    /// retryable as is: relist (a watch resumes only after a fresh list).
    #[error("410 gone: {message}")]
    Gone {
        /// The server's message.
        message: String,
    },

    /// 504 with cause `ResourceVersionTooLarge`: the server (a lagging cache) has not yet seen the
    /// requested resourceVersion. Retryable after a short wait, at the same version.
    #[error("resource version too large: {message}")]
    TooLargeResourceVersion {
        /// The server's message.
        message: String,
    },

    /// 429 Too Many Requests: retryable, after `retry_after` when the server says.
    #[error("throttled (429){}: {message}", fmt_retry(*retry_after))]
    Throttled {
        /// The server's `Retry-After` (header or `details.retryAfterSeconds`).
        retry_after: Option<Duration>,
        /// The server's message.
        message: String,
    },

    /// A 5xx answer: the server failed. Retryable with backoff (after `retry_after` when given).
    #[error("server error {code}{}: {message}", fmt_retry(*retry_after))]
    ServerError {
        /// The HTTP status code.
        code: u16,
        /// The server's `Retry-After`, if any.
        retry_after: Option<Duration>,
        /// The server's message.
        message: String,
    },

    /// 401 Unauthorized: the credentials were refused even after refreshing them once (a re-read
    /// token file, a re-run exec plugin). Not retryable until the credentials are fixed.
    #[error("unauthorized (401): {message}")]
    Unauthorized {
        /// The server's message.
        message: String,
    },

    /// 403 Forbidden: the identity is known but may not do this. Not retryable.
    #[error("forbidden (403): {message}")]
    Forbidden {
        /// The server's message.
        message: String,
    },

    /// 404 Not Found: the resource (or namespace, or API group) does not exist. Not retryable;
    /// a missing CRD may appear later.
    #[error("not found (404): {message}")]
    NotFound {
        /// The server's message.
        message: String,
    },

    /// 409 `Conflict`: a write (an update, or a delete with a `resourceVersion` precondition)
    /// was made against a resourceVersion that is no longer the object's: someone else wrote
    /// first. Not retryable as is: read the object again and decide anew.
    #[error("conflict (409): {message}")]
    Conflict {
        /// The server's message.
        message: String,
    },

    /// 409 `AlreadyExists`: a create named an object that exists. Not retryable as is: read it,
    /// or replace it.
    #[error("already exists (409): {message}")]
    AlreadyExists {
        /// The server's message.
        message: String,
    },

    /// Any other error answer (400, 422, ...). Not retryable: the request is wrong.
    #[error("API error {}: {} {}", status.code, status.reason, status.message)]
    Api {
        /// The `Status` the server returned (or one made from the status line).
        status: Box<Status>,
    },

    /// TLS failed: the server's certificate is not trusted (wrong CA, wrong name) or our own TLS
    /// material is unusable. Not retryable until the configuration changes.
    #[error("TLS: {message}")]
    Tls {
        /// What failed.
        message: String,
    },

    /// The server could not be reached (connection refused, DNS). Retryable with backoff.
    #[error("cannot connect to the API server: {source}")]
    Connect {
        /// The underlying error.
        #[source]
        source: BoxError,
    },

    /// The request failed in transit: the connection was reset or closed before the answer was
    /// complete. Retryable with backoff.
    #[error("request failed: {source}")]
    Request {
        /// The underlying error.
        #[source]
        source: BoxError,
    },

    /// A wait hit its bound: connecting (TCP and the TLS handshake, [`Config::connect_timeout`]),
    /// the response headers ([`Config::response_header_timeout`]), the next bytes of a list
    /// body ([`Config::list_progress_timeout`]), or the whole request
    /// ([`Config::request_timeout`]). Retryable with backoff.
    ///
    /// [`Config::connect_timeout`]: crate::Config::connect_timeout
    /// [`Config::response_header_timeout`]: crate::Config::response_header_timeout
    /// [`Config::list_progress_timeout`]: crate::Config::list_progress_timeout
    /// [`Config::request_timeout`]: crate::Config::request_timeout
    #[error("timed out after {limit:?} waiting for {waiting_for}")]
    Timeout {
        /// What was awaited: `"a connection"`, `"the response headers"`, `"the next bytes of
        /// the response body"` or `"the whole request"`.
        waiting_for: &'static str,
        /// The bound that was hit.
        limit: Duration,
    },

    /// The request could not be built: the server URL does not parse, a header value is not
    /// allowed. Not retryable: the same request fails the same way.
    #[error("cannot build the request: {message}")]
    InvalidRequest {
        /// What is wrong.
        message: String,
    },

    /// A namespace (or a segment of the resource: group, version, plural) is not valid, so no
    /// request was sent. Checked as the API server does: a namespace is a DNS-1123 label of at
    /// most 63 characters. Not retryable.
    #[error("invalid {what} {}: {problems}", fmt_value(value))]
    InvalidName {
        /// Which part of the path: `"namespace"`, `"API group"`, `"API version"` or
        /// `"resource"`.
        what: &'static str,
        /// The value as given.
        value: String,
        /// Every problem found, joined by `; `.
        problems: String,
    },

    /// A response body grew past the configured maximum once decompressed
    /// ([`Config::max_list_body`](crate::Config::max_list_body)). Reading stopped at the limit.
    /// Not retryable as is: list in smaller pages, or raise the limit.
    #[error("response body exceeds the maximum of {limit} bytes")]
    BodyTooLarge {
        /// The configured maximum in bytes.
        limit: usize,
    },

    /// One list, followed along its continue tokens, went past a configured bound: more pages
    /// ([`Config::max_list_pages`]), objects ([`Config::max_list_objects`]) or bytes
    /// ([`Config::max_list_bytes`]) than allowed. The page past the bound is not requested (or
    /// not decoded), and nothing of the list should be kept. Not retryable as is: a server that
    /// hands out a new continue token on every page would do it again; when the server really
    /// holds that much, raise the bound the message names.
    ///
    /// [`Config::max_list_pages`]: crate::Config::max_list_pages
    /// [`Config::max_list_objects`]: crate::Config::max_list_objects
    /// [`Config::max_list_bytes`]: crate::Config::max_list_bytes
    #[error(
        "the list went past its bound of {limit} {bound} ({pages} pages received); if the \
         server really holds that many, raise Config::{}",
        bound.config_field()
    )]
    ListTooLarge {
        /// Which bound.
        bound: ListBound,
        /// The bound's value.
        limit: u64,
        /// The pages received before it was hit.
        pages: usize,
    },

    /// The server answered with a `Content-Encoding` the client did not ask for (gzip when a
    /// watch asked for `identity`, or an encoding the client never asks for, such as `br`). The
    /// body was not read. Not retryable: the server (or a proxy on the way) needs fixing.
    #[error(
        "the server answered with Content-Encoding {} although the client asked for {asked}",
        fmt_value(encoding)
    )]
    UnexpectedEncoding {
        /// The `Content-Encoding` of the answer.
        encoding: String,
        /// The `Accept-Encoding` of the request: `"identity"` or `"gzip"`.
        asked: &'static str,
    },

    /// The watch stream was cut (the connection dropped, possibly mid-line). Not a decode error:
    /// resume watching from the last resourceVersion seen.
    #[error("watch stream interrupted after {events} events: {reason}")]
    Interrupted {
        /// Events decoded on this stream before the cut.
        events: u64,
        /// What happened.
        reason: String,
    },

    /// No bytes arrived on a watch for this long (`timeoutSeconds` plus a margin, or the
    /// configured idle limit). The stream is ended; resume watching from the last
    /// resourceVersion seen.
    #[error("watch idle for {idle:?}: no bytes received")]
    IdleTimeout {
        /// The idle limit that was hit.
        idle: Duration,
    },

    /// A watch line grew past the configured maximum without a newline. The stream is ended;
    /// retrying may hit the same object again, so raise the limit or give up.
    #[error("watch line {line} exceeds the maximum of {limit} bytes")]
    LineTooLong {
        /// The 1-based number of the offending line in the stream.
        line: u64,
        /// The configured maximum line length in bytes.
        limit: usize,
    },

    /// A response could not be decoded. Not retryable for this payload; for a watch, the stream is
    /// ended and a relist is the safe way on.
    #[error("cannot decode {what}{}: {source}", fmt_location(*line, *offset))]
    Decode {
        /// What was being decoded: `"watch event"` or `"list"`.
        what: &'static str,
        /// For a watch: the 1-based line number in the stream.
        line: Option<u64>,
        /// For a watch: the byte offset of that line's start in the stream.
        offset: Option<u64>,
        /// The decoding error, with the column inside the line.
        #[source]
        source: kinformer_core::Error,
    },

    /// A protobuf response could not be decoded: a malformed envelope, frame or message, or a
    /// frame over [`Config::max_watch_line`](crate::Config). Not retryable for this payload; for
    /// a watch, the stream is ended and a relist is the safe way on.
    #[error("cannot decode protobuf {what}{}: {source}", fmt_at(at.as_deref()))]
    Protobuf {
        /// What was being decoded: `"watch event"` or `"list"`.
        what: &'static str,
        /// Where: `frame 3` (1-based, in a watch stream), `items[10]` (in a list).
        at: Option<String>,
        /// What was wrong.
        #[source]
        source: kinformer_protobuf::Error,
    },

    /// The configuration is unusable: a malformed or missing kubeconfig, a missing referenced
    /// file, bad base64 or PEM. Names the file (when there is one) and the field. Not retryable.
    #[error("{}{field}: {message}", fmt_path(path.as_ref()))]
    Config {
        /// The kubeconfig (or referenced file) concerned, when there is one.
        path: Option<PathBuf>,
        /// The field, for example `users[alice].client-key-data`.
        field: String,
        /// What is wrong.
        message: String,
    },

    /// Credentials could not be obtained at request time: an exec plugin failed or answered
    /// something unusable, a token file is missing or empty. Not retryable: the cause (the
    /// plugin's login, the file) needs fixing first, and the message says what it is.
    #[error("cannot get credentials: {message}")]
    Auth {
        /// What failed, never the credential itself.
        message: String,
    },

    /// An exec credential plugin did not finish within
    /// [`Config::exec_timeout`](crate::Config::exec_timeout); it was killed. Not retryable: a
    /// plugin that waits for something (a browser login, a prompt) needs a person.
    #[error("exec plugin {command:?} did not finish within {timeout:?} and was killed")]
    ExecTimeout {
        /// The plugin's command.
        command: String,
        /// The bound that was hit.
        timeout: Duration,
    },
}

/// Which bound of a list [`Error::ListTooLarge`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ListBound {
    /// Pages ([`Config::max_list_pages`](crate::Config::max_list_pages)).
    Pages,
    /// Objects ([`Config::max_list_objects`](crate::Config::max_list_objects)).
    Objects,
    /// Bytes of the bodies, decompressed ([`Config::max_list_bytes`](crate::Config::max_list_bytes)).
    Bytes,
}

impl ListBound {
    /// The field of [`Config`](crate::Config) that sets this bound: `"max_list_pages"`,
    /// `"max_list_objects"` or `"max_list_bytes"`.
    pub fn config_field(self) -> &'static str {
        match self {
            Self::Pages => "max_list_pages",
            Self::Objects => "max_list_objects",
            Self::Bytes => "max_list_bytes",
        }
    }
}

impl fmt::Display for ListBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Pages => "pages",
            Self::Objects => "objects",
            Self::Bytes => "bytes",
        })
    }
}

fn fmt_retry(d: Option<Duration>) -> String {
    d.map(|d| format!(", retry after {}s", d.as_secs()))
        .unwrap_or_default()
}

/// ` at <where>` for a protobuf error.
fn fmt_at(at: Option<&str>) -> String {
    at.map(|at| format!(" at {at}")).unwrap_or_default()
}

/// The `Status` of a protobuf error body (one that begins with the envelope's magic bytes).
fn status_of_protobuf(body: &[u8]) -> Option<Status> {
    use kinformer_protobuf::wire;
    if !body.starts_with(&wire::MAGIC) {
        return None;
    }
    let envelope = wire::read_envelope(body).ok()?;
    let s = wire::decode_status(envelope.raw).ok()?;
    Some(status_from_wire(s))
}

/// A protobuf `Status` as core's, details (causes, retry delay) included, as the JSON one
/// reads.
pub(crate) fn status_from_wire(s: kinformer_protobuf::wire::Status) -> Status {
    let details = s.details.map(|d| kinformer_core::StatusDetails {
        name: d.name.unwrap_or_default(),
        group: d.group.unwrap_or_default(),
        kind: d.kind.unwrap_or_default(),
        uid: d.uid.unwrap_or_default(),
        causes: d
            .causes
            .into_iter()
            .map(|c| kinformer_core::StatusCause {
                reason: c.reason.unwrap_or_default(),
                message: c.message.unwrap_or_default(),
                field: c.field.unwrap_or_default(),
            })
            .collect(),
        // A negative delay means nothing; JSON's unsigned field cannot hold one either.
        retry_after_seconds: d
            .retry_after_seconds
            .and_then(|s| u32::try_from(s).ok())
            .unwrap_or_default(),
    });
    Status {
        status: s.status.unwrap_or_default(),
        message: s.message.unwrap_or_default(),
        reason: s.reason.unwrap_or_default(),
        code: s
            .code
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or_default(),
        details,
    }
}

fn fmt_location(line: Option<u64>, offset: Option<u64>) -> String {
    match (line, offset) {
        (Some(l), Some(o)) => format!(" at line {l} (byte {o} of the stream)"),
        (Some(l), None) => format!(" at line {l}"),
        _ => String::new(),
    }
}

/// A value for a message, cut short when long (an untrusted value may be huge).
fn fmt_value(value: &str) -> String {
    const MAX: usize = 100;
    match value.char_indices().nth(MAX) {
        Some((i, _)) => format!("{:?}... ({} bytes)", &value[..i], value.len()),
        None => format!("{value:?}"),
    }
}

fn fmt_path(p: Option<&PathBuf>) -> String {
    p.map(|p| format!("{}: ", p.display())).unwrap_or_default()
}

impl Error {
    /// `true` when the same request may succeed if repeated later (with backoff): throttling,
    /// server errors, a refused connection, a transport failure or timeout, a too-large
    /// resourceVersion, cut or idle watches.
    ///
    /// `false` for what repeating cannot fix: a request that cannot be built, an invalid
    /// namespace, bad configuration or TLS material, credentials that cannot be obtained or are
    /// refused after a refresh, 4xx answers (a 409 conflict among them: read again first),
    /// bodies, lines and lists over their limits, an encoding that was not asked for,
    /// undecodable answers.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Throttled { .. }
                | Self::ServerError { .. }
                | Self::TooLargeResourceVersion { .. }
                | Self::Connect { .. }
                | Self::Request { .. }
                | Self::Timeout { .. }
                | Self::Interrupted { .. }
                | Self::IdleTimeout { .. }
        )
    }

    /// `true` for 410 Gone / Expired: the caller must relist.
    pub fn is_gone(&self) -> bool {
        matches!(self, Self::Gone { .. })
    }

    /// `true` when a watch ended in a way that a new watch from the last seen resourceVersion
    /// fixes (a cut connection or an idle stream).
    pub fn is_resumable(&self) -> bool {
        matches!(self, Self::Interrupted { .. } | Self::IdleTimeout { .. })
    }

    /// How long the server asked the caller to wait, if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Throttled { retry_after, .. } | Self::ServerError { retry_after, .. } => {
                *retry_after
            }
            _ => None,
        }
    }

    /// Maps an error answer (its HTTP status code, its `Retry-After` header, and its body) to the
    /// variant that tells the caller what to do, as the client does for every answer that is not
    /// a 2xx. A body that is a `Status` gives its code, reason and message; any other body
    /// (HTML from a proxy, plain text, nothing) gives a status made from `code`, with at most
    /// 512 characters of the body as its message. It never fails: whatever the server sent, the
    /// result is an error of the right kind.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kinformer_client::Error;
    ///
    /// let e = Error::from_response(503, Some("7"), b"<html>upstream down</html>");
    /// assert!(matches!(e, Error::ServerError { code: 503, .. }));
    /// assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
    ///
    /// let body = br#"{"kind":"Status","code":410,"reason":"Expired","message":"too old"}"#;
    /// assert!(Error::from_response(200, None, body).is_gone());
    /// ```
    pub fn from_response(code: u16, retry_after: Option<&str>, body: &[u8]) -> Self {
        let retry_after = retry_after
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let canonical = reqwest::StatusCode::from_u16(code)
            .ok()
            .and_then(|c| c.canonical_reason())
            .unwrap_or_default();
        let mut status = status_of_protobuf(body)
            .or_else(|| serde_json::from_slice::<Status>(body).ok())
            .filter(|s| s.code != 0 || !s.reason.is_empty() || !s.message.is_empty())
            .unwrap_or_else(|| {
                // A body that is not a Status is the text of whoever answered (the API
                // server's request filters write their 429 with Go's `http.Error`, which ends
                // it with a newline): kept as the message, without the surrounding whitespace.
                let text: String = String::from_utf8_lossy(body).chars().take(512).collect();
                Status::failure(code, canonical, text.trim().to_owned())
            });
        if status.code == 0 {
            status.code = code;
        }
        Self::from_status(status, retry_after)
    }

    /// Maps an error answer to the variant that tells the caller what to do.
    pub(crate) fn from_status(status: Status, retry_after: Option<Duration>) -> Self {
        let message = status.message.clone();
        let retry_after = retry_after.or_else(|| {
            status
                .details
                .as_ref()
                .map(|d| d.retry_after_seconds)
                .filter(|s| *s > 0)
                .map(|s| Duration::from_secs(u64::from(s)))
        });
        match status.code {
            410 => Self::Gone { message },
            504 if status.is_too_large_resource_version() => {
                Self::TooLargeResourceVersion { message }
            }
            429 => Self::Throttled {
                retry_after,
                message,
            },
            500..=599 => Self::ServerError {
                code: status.code,
                retry_after,
                message,
            },
            401 => Self::Unauthorized { message },
            403 => Self::Forbidden { message },
            404 => Self::NotFound { message },
            409 if status.reason == "AlreadyExists" => Self::AlreadyExists { message },
            409 => Self::Conflict { message },
            _ if status.is_gone() => Self::Gone { message },
            _ => Self::Api {
                status: Box::new(status),
            },
        }
    }

    /// Whether this is a configuration error about credentials the configuration names but that
    /// are not there: a user's `tokenFile`, or the in-cluster service-account token, that does
    /// not exist. A tool reports it as a credentials problem (kubectl's exit for auth failures),
    /// not as a broken kubeconfig.
    pub fn is_missing_credentials(&self) -> bool {
        matches!(self, Self::Config { field, .. } if field.ends_with(".tokenFile") || field == "token")
    }

    pub(crate) fn config(
        path: Option<&std::path::Path>,
        field: impl fmt::Display,
        message: impl fmt::Display,
    ) -> Self {
        Self::Config {
            path: path.map(std::path::Path::to_path_buf),
            field: field.to_string(),
            message: message.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinformer_core::{StatusCause, StatusDetails};

    #[test]
    fn maps_statuses_to_what_the_caller_must_do() {
        let too_large = Status {
            details: Some(StatusDetails {
                causes: vec![StatusCause {
                    reason: "ResourceVersionTooLarge".into(),
                    ..StatusCause::default()
                }],
                ..StatusDetails::default()
            }),
            ..Status::failure(504, "Timeout", "Too large resource version")
        };
        let cases: Vec<(Status, Option<u64>, &str, bool, bool)> = vec![
            (
                Status::failure(410, "Expired", "too old"),
                None,
                "Gone",
                false,
                true,
            ),
            (
                Status::failure(0, "Expired", "too old"),
                None,
                "Gone",
                false,
                true,
            ),
            (too_large, None, "TooLarge", true, false),
            (
                Status::failure(504, "Timeout", "x"),
                None,
                "Server",
                true,
                false,
            ),
            (
                Status::failure(429, "TooManyRequests", "x"),
                Some(3),
                "Throttled",
                true,
                false,
            ),
            (
                Status::failure(503, "ServiceUnavailable", "x"),
                None,
                "Server",
                true,
                false,
            ),
            (
                Status::failure(401, "Unauthorized", "x"),
                None,
                "Unauthorized",
                false,
                false,
            ),
            (
                Status::failure(403, "Forbidden", "x"),
                None,
                "Forbidden",
                false,
                false,
            ),
            (
                Status::failure(404, "NotFound", "x"),
                None,
                "NotFound",
                false,
                false,
            ),
            (
                Status::failure(409, "Conflict", "x"),
                None,
                "Conflict",
                false,
                false,
            ),
            (
                Status::failure(409, "AlreadyExists", "x"),
                None,
                "AlreadyExists",
                false,
                false,
            ),
            (
                Status::failure(422, "Invalid", "x"),
                None,
                "Api",
                false,
                false,
            ),
        ];
        for (status, retry, want, retryable, gone) in cases {
            let e = Error::from_status(status.clone(), retry.map(Duration::from_secs));
            let got = match &e {
                Error::Gone { .. } => "Gone",
                Error::TooLargeResourceVersion { .. } => "TooLarge",
                Error::Throttled { .. } => "Throttled",
                Error::ServerError { .. } => "Server",
                Error::Unauthorized { .. } => "Unauthorized",
                Error::Forbidden { .. } => "Forbidden",
                Error::NotFound { .. } => "NotFound",
                Error::Conflict { .. } => "Conflict",
                Error::AlreadyExists { .. } => "AlreadyExists",
                Error::Api { .. } => "Api",
                other => panic!("{other}"),
            };
            assert_eq!(got, want, "{status:?}");
            assert_eq!(e.is_retryable(), retryable, "{status:?}");
            assert_eq!(e.is_gone(), gone, "{status:?}");
            assert_eq!(e.retry_after(), retry.map(Duration::from_secs));
        }
    }

    #[test]
    fn a_missing_token_file_is_missing_credentials() {
        let missing = |field: &str| Error::config(None, field, "does not exist");
        assert!(missing("users[u].user.tokenFile").is_missing_credentials());
        assert!(missing("token").is_missing_credentials());
        assert!(!missing("users[u].user.client-key").is_missing_credentials());
        assert!(!missing("contexts").is_missing_credentials());
        let auth = Error::Auth {
            message: "m".into(),
        };
        assert!(!auth.is_missing_credentials());
    }

    /// Every variant and what it tells the caller: (retryable, gone, resumable, retry_after).
    #[test]
    fn every_variant_says_what_to_do() {
        let secs = |s| Some(Duration::from_secs(s));
        let source = || -> BoxError { "boom".into() };
        let decode = || {
            kinformer_core::WatchEvent::<kinformer_core::DynamicObject>::from_json(b"{")
                .unwrap_err()
        };
        let m = || "m".to_owned();
        #[rustfmt::skip]
        let table: Vec<(Error, bool, bool, bool, Option<Duration>)> = vec![
            (Error::Gone { message: m() }, false, true, false, None),
            (Error::TooLargeResourceVersion { message: m() }, true, false, false, None),
            (Error::Throttled { retry_after: secs(3), message: m() }, true, false, false, secs(3)),
            (Error::Throttled { retry_after: None, message: m() }, true, false, false, None),
            (Error::ServerError { code: 503, retry_after: secs(5), message: m() }, true, false, false, secs(5)),
            (Error::ServerError { code: 500, retry_after: None, message: m() }, true, false, false, None),
            (Error::Unauthorized { message: m() }, false, false, false, None),
            (Error::Forbidden { message: m() }, false, false, false, None),
            (Error::NotFound { message: m() }, false, false, false, None),
            (Error::Conflict { message: m() }, false, false, false, None),
            (Error::AlreadyExists { message: m() }, false, false, false, None),
            (Error::Api { status: Box::new(Status::failure(400, "BadRequest", "m")) }, false, false, false, None),
            (Error::Tls { message: m() }, false, false, false, None),
            (Error::Connect { source: source() }, true, false, false, None),
            (Error::Request { source: source() }, true, false, false, None),
            (Error::Timeout { waiting_for: "the response headers", limit: Duration::from_secs(1) }, true, false, false, None),
            (Error::InvalidRequest { message: m() }, false, false, false, None),
            (Error::InvalidName { what: "namespace", value: m(), problems: m() }, false, false, false, None),
            (Error::BodyTooLarge { limit: 10 }, false, false, false, None),
            (Error::ListTooLarge { bound: ListBound::Objects, limit: 10, pages: 2 }, false, false, false, None),
            (Error::UnexpectedEncoding { encoding: "gzip".into(), asked: "identity" }, false, false, false, None),
            (Error::Interrupted { events: 1, reason: m() }, true, false, true, None),
            (Error::IdleTimeout { idle: Duration::from_secs(1) }, true, false, true, None),
            (Error::LineTooLong { line: 1, limit: 10 }, false, false, false, None),
            (Error::Decode { what: "list", line: None, offset: None, source: decode() }, false, false, false, None),
            (Error::Config { path: None, field: m(), message: m() }, false, false, false, None),
            (Error::Auth { message: m() }, false, false, false, None),
            (Error::ExecTimeout { command: m(), timeout: Duration::from_secs(1) }, false, false, false, None),
        ];
        for (e, retryable, gone, resumable, retry_after) in table {
            assert_eq!(
                (
                    e.is_retryable(),
                    e.is_gone(),
                    e.is_resumable(),
                    e.retry_after()
                ),
                (retryable, gone, resumable, retry_after),
                "{e:?}"
            );
        }
    }

    #[test]
    fn long_invalid_names_are_cut_short_in_messages() {
        let e = Error::InvalidName {
            what: "namespace",
            value: "a".repeat(130_000),
            problems: "must be no more than 63 characters".into(),
        };
        let text = e.to_string();
        assert!(text.len() < 300, "{text}");
        assert!(text.contains("(130000 bytes)"), "{text}");
    }

    #[test]
    fn retry_after_falls_back_to_status_details() {
        let status = Status {
            details: Some(StatusDetails {
                retry_after_seconds: 7,
                ..StatusDetails::default()
            }),
            ..Status::failure(429, "TooManyRequests", "slow down")
        };
        let e = Error::from_status(status, None);
        assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(e.to_string(), "throttled (429), retry after 7s: slow down");
    }

    #[test]
    fn a_protobuf_status_keeps_its_details_as_a_json_one_does() {
        use kinformer_protobuf::wire;
        let mut message = Vec::new();
        wire::encode_status(
            &wire::Status {
                status: Some("Failure".into()),
                message: Some("slow down".into()),
                reason: Some("TooManyRequests".into()),
                code: Some(429),
                details: Some(wire::StatusDetails {
                    name: Some("web".into()),
                    kind: Some("pods".into()),
                    retry_after_seconds: Some(7),
                    causes: vec![wire::StatusCause {
                        reason: Some("FieldValueInvalid".into()),
                        field: Some("spec.replicas".into()),
                        ..wire::StatusCause::default()
                    }],
                    ..wire::StatusDetails::default()
                }),
                ..wire::Status::default()
            },
            &mut message,
        );
        let mut body = Vec::new();
        wire::encode_envelope("v1", "Status", &message, &mut body);
        let status = status_of_protobuf(&body).unwrap();
        let details = status.details.as_ref().unwrap();
        assert_eq!((&*details.name, &*details.kind), ("web", "pods"));
        assert_eq!(details.causes[0].field, "spec.replicas");
        assert_eq!(details.causes[0].reason, "FieldValueInvalid");
        // No Retry-After header: the delay comes from the details, as with JSON.
        let e = Error::from_response(429, None, &body);
        assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));

        // A negative delay is no delay.
        let mut message = Vec::new();
        wire::encode_status(
            &wire::Status {
                code: Some(429),
                details: Some(wire::StatusDetails {
                    retry_after_seconds: Some(-3),
                    ..wire::StatusDetails::default()
                }),
                ..wire::Status::default()
            },
            &mut message,
        );
        let mut body = Vec::new();
        wire::encode_envelope("v1", "Status", &message, &mut body);
        assert_eq!(Error::from_response(429, None, &body).retry_after(), None);
    }

    #[test]
    fn the_api_servers_plain_text_429_is_throttling_with_its_header_delay() {
        // What the API server's priority-and-fairness and max-in-flight filters write.
        let body = b"Too many requests, please try again later.\n";
        let e = Error::from_response(429, Some("1"), body);
        match &e {
            Error::Throttled {
                retry_after,
                message,
            } => {
                assert_eq!(*retry_after, Some(Duration::from_secs(1)));
                assert_eq!(message, "Too many requests, please try again later.");
            }
            other => panic!("{other:?}"),
        }
        assert!(e.is_retryable());
    }

    #[test]
    fn decode_errors_say_where() {
        let source = kinformer_core::WatchEvent::<kinformer_core::DynamicObject>::from_json(b"{")
            .unwrap_err();
        let e = Error::Decode {
            what: "watch event",
            line: Some(3),
            offset: Some(120),
            source,
        };
        let text = e.to_string();
        assert!(text.contains("line 3 (byte 120"), "{text}");
        assert!(!e.is_retryable());
    }
}
