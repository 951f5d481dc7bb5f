//! Decoding a watch response: newline-delimited JSON, decoded as the bytes arrive.

use std::fmt;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};
use kinformer_core::{Object, WatchEvent, missing_identity};
use serde::de::DeserializeOwned;

use crate::Error;

/// A stream of watch events. It ends (`None`) when the server closes the watch cleanly, and
/// after the first error, which says whether to resume ([`Error::is_resumable`]) or relist.
pub type WatchStream<K> = Pin<Box<dyn Stream<Item = Result<WatchEvent<K>, Error>> + Send>>;

/// Splits a watch response into lines and decodes each into a [`WatchEvent`], without copying
/// complete lines: a line that lies inside one chunk is decoded straight from that chunk; only a
/// line split across chunks is gathered in a buffer, which never grows past the maximum line
/// length.
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
    /// The start of a line that began in an earlier chunk.
    pending: Vec<u8>,
    /// The chunk being split, and how far it has been consumed.
    chunk: Bytes,
    pos: usize,
    max_line: usize,
    /// Lines completed so far.
    lines: u64,
    /// The stream offset of the line being assembled.
    line_start: u64,
    /// Events decoded so far.
    events: u64,
    /// Whether an object without a namespace is refused.
    require_namespace: bool,
    done: bool,
}

impl fmt::Debug for WatchDecoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchDecoder")
            .field("pending", &self.pending.len())
            .field("unread", &(self.chunk.len() - self.pos))
            .field("max_line", &self.max_line)
            .field("lines", &self.lines)
            .field("events", &self.events)
            .field("done", &self.done)
            .finish()
    }
}

impl WatchDecoder {
    /// A decoder that refuses lines longer than `max_line` bytes.
    pub fn new(max_line: usize) -> Self {
        Self {
            pending: Vec::new(),
            chunk: Bytes::new(),
            pos: 0,
            max_line,
            lines: 0,
            line_start: 0,
            events: 0,
            require_namespace: false,
            done: false,
        }
    }

    /// Also refuse an added, modified or deleted object without a `metadata.namespace`: set it
    /// for a namespaced resource, whose objects always carry one. (An object without a
    /// `metadata.name` is always refused.)
    pub fn require_namespace(mut self, yes: bool) -> Self {
        self.require_namespace = yes;
        self
    }

    /// Events decoded so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Adds the next chunk of the body. Any unread part of the previous chunk is kept.
    pub fn push(&mut self, chunk: Bytes) {
        if self.done {
            return;
        }
        if self.pos < self.chunk.len() {
            let rest = self.chunk.slice(self.pos..);
            self.pending.extend_from_slice(&rest);
        }
        self.chunk = chunk;
        self.pos = 0;
    }

    /// The next complete event, `None` when more bytes are needed (or after an error).
    pub fn next_event<K: Object + DeserializeOwned>(
        &mut self,
    ) -> Option<Result<WatchEvent<K>, Error>> {
        while !self.done {
            let rest = &self.chunk[self.pos..];
            if rest.is_empty() {
                return None;
            }
            let Some(i) = memchr::memchr(b'\n', rest) else {
                if self.pending.len() + rest.len() > self.max_line {
                    return Some(Err(self.too_long()));
                }
                self.pending.extend_from_slice(rest);
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
            let need_ns = self.require_namespace;
            let result = if self.pending.is_empty() {
                decode_line(&self.chunk[start..start + i], need_ns)
            } else {
                self.pending
                    .extend_from_slice(&self.chunk[start..start + i]);
                let r = decode_line(&self.pending, need_ns);
                self.pending.clear();
                r
            };
            match result {
                None => continue,
                Some(Ok(event)) => {
                    self.events += 1;
                    return Some(Ok(event));
                }
                Some(Err(source)) => {
                    self.done = true;
                    return Some(Err(Error::Decode {
                        what: "watch event",
                        line: Some(self.lines),
                        offset: Some(offset),
                        source,
                    }));
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
        let rest = &self.chunk[self.pos..];
        self.pending.extend_from_slice(rest);
        self.pos = self.chunk.len();
        let tail = std::mem::take(&mut self.pending);
        match decode_line::<K>(&tail, self.require_namespace) {
            None => None,
            Some(Ok(event)) => {
                self.events += 1;
                Some(Ok(event))
            }
            Some(Err(_)) => Some(Err(Error::Interrupted {
                events: self.events,
                reason: format!(
                    "the stream ended inside a line ({} bytes received of it)",
                    tail.len()
                ),
            })),
        }
    }

    fn too_long(&mut self) -> Error {
        self.done = true;
        self.pending = Vec::new();
        Error::LineTooLong {
            line: self.lines + 1,
            limit: self.max_line,
        }
    }
}

/// Decodes one line; `None` for a blank one. The object of an added, modified or deleted event
/// must have a name (and a namespace when `require_namespace`).
fn decode_line<K: Object + DeserializeOwned>(
    line: &[u8],
    require_namespace: bool,
) -> Option<Result<WatchEvent<K>, kinformer_core::Error>> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let event = match WatchEvent::from_json(line) {
        Ok(event) => event,
        Err(e) => return Some(Err(e)),
    };
    let object = match &event {
        WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => Some(&**o),
        WatchEvent::Bookmark(_) | WatchEvent::Error(_) => None,
    };
    if let Some(field) = object.and_then(|o| missing_identity(o, require_namespace)) {
        return Some(Err(kinformer_core::Error::Decode {
            what: "watch event",
            source: serde::de::Error::custom(format_args!("the object has no {field}")),
        }));
    }
    Some(Ok(event))
}

/// Decodes a watch body (any stream of byte chunks) into events as they arrive.
///
/// `idle`, when set, ends the stream with [`Error::IdleTimeout`] if no chunk arrives for that
/// long. An error from `body` ends it with [`Error::Interrupted`]: the connection was cut, and a
/// new watch from the last seen resourceVersion resumes it.
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
    decode_watch_with(body, WatchDecoder::new(max_line), idle)
}

/// [`decode_watch`] with a decoder set up by the caller.
pub(crate) fn decode_watch_with<K, S, E>(
    body: S,
    decoder: WatchDecoder,
    idle: Option<Duration>,
) -> WatchStream<K>
where
    K: Object + DeserializeOwned,
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    struct State<S> {
        body: Pin<Box<S>>,
        decoder: WatchDecoder,
        idle: Option<Duration>,
        ended: bool,
    }
    let state = State {
        body: Box::pin(body),
        decoder,
        idle,
        ended: false,
    };
    Box::pin(futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if st.ended {
                return None;
            }
            if let Some(r) = st.decoder.next_event::<K>() {
                st.ended = r.is_err();
                return Some((r, st));
            }
            let next = match st.idle {
                Some(idle) => match tokio::time::timeout(idle, st.body.next()).await {
                    Ok(next) => next,
                    Err(_) => {
                        st.ended = true;
                        tracing::debug!(?idle, "watch idle, ending the stream");
                        return Some((Err(Error::IdleTimeout { idle }), st));
                    }
                },
                None => st.body.next().await,
            };
            match next {
                Some(Ok(chunk)) => st.decoder.push(chunk),
                Some(Err(e)) => {
                    st.ended = true;
                    let reason = error_chain(&e);
                    tracing::debug!(%reason, "watch stream interrupted");
                    let events = st.decoder.events();
                    return Some((Err(Error::Interrupted { events, reason }), st));
                }
                None => {
                    st.ended = true;
                    let r = st.decoder.finish::<K>();
                    return r.map(|r| (r, st));
                }
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
    use kinformer_core::{DynamicObject, Object};

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
                assert!(d.pending.len() <= 1000, "buffer grew past the limit");
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
        match s.next().await {
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
        match s.next().await {
            Some(Err(e @ Error::IdleTimeout { .. })) => assert!(e.is_resumable()),
            other => panic!("{other:?}"),
        }
        assert!(s.next().await.is_none());
    }
}
