//! The burst shape of `bench-sim`: a front server before the simulated API server that writes
//! watch events as a real API server's watch handler does when its queue is full.
//!
//! The simulated server hands each event to its connection as a frame of its own. A real API
//! server's watch handler writes events as they come and flushes only when its queue is empty,
//! so a client that falls behind receives its backlog in large writes, lines cut anywhere. The
//! front renders every event of a scenario ahead of time ([`Rendered`]), queues them all before
//! the watch connects ([`Front::queue_events`]), and then writes them back to back in
//! [`CHUNK`]-byte writes, as fast as the socket accepts. Clients list at the version just before
//! those events (the front turns a list at `resourceVersion=0` into an exact read at that
//! version), so the watch that follows the list finds them all waiting.
//!
//! A streaming list (`sendInitialEvents=true`) is served the same way from
//! [`Front::queue_initial`]. Every other request, and any watch the front holds no events for,
//! goes through to the simulated server unchanged, its body written in [`CHUNK`]-byte writes.
//!
//! The paced shape uses the front too, holding no events ([`Front::list_at`]): lists are still
//! served at the version before the scenario's events, and the watch that follows goes through to
//! the simulated server, which replays those events from its history one line per frame. Either
//! way a scenario's events are written once, and every client after the first lists at the same
//! version and receives the very same events.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt as _;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The size of each write of a burst: 128 KiB.
pub const CHUNK: usize = 128 * 1024;

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// The form a watch asks for: the full object as JSON, `PartialObjectMetadata`, or the full
/// object in protobuf frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Full,
    Meta,
    Protobuf,
}

/// Watch events rendered ahead of time, in every form a client may ask for: the full object
/// and `PartialObjectMetadata` as JSON lines, and the full object as protobuf frames (as the API
/// server writes a protobuf watch: a length, then a `WatchEvent` whose object is the pod's
/// envelope).
#[derive(Debug, Default)]
pub struct Rendered {
    full: Vec<u8>,
    meta: Vec<u8>,
    pb: Vec<u8>,
    /// The version of each event, ascending, and where it starts in each form.
    rvs: Vec<u64>,
    full_at: Vec<usize>,
    meta_at: Vec<usize>,
    pb_at: Vec<usize>,
}

/// Appends the protobuf frame of a watch event whose object is `object` (a pod as JSON).
fn frame(out: &mut Vec<u8>, kind: &str, object: &Value) {
    use kinformer_protobuf::wire;
    let codec = kinformer_protobuf::convert::codec_for("v1", "Pod").expect("pods have a codec");
    let mut message = Vec::new();
    codec
        .encode_json(object, &mut message)
        .expect("a pod the bench wrote fits the typed Pod");
    let mut envelope = Vec::new();
    wire::encode_envelope("v1", "Pod", &message, &mut envelope);
    let event_type = match kind {
        "ADDED" => wire::EventType::Added,
        "MODIFIED" => wire::EventType::Modified,
        "DELETED" => wire::EventType::Deleted,
        _ => wire::EventType::Bookmark,
    };
    let mut event = Vec::new();
    wire::encode_watch_event(event_type, &envelope, &mut event);
    wire::encode_frame(&event, out);
}

fn line(out: &mut Vec<u8>, kind: &str, object: &Value) {
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    serde_json::to_writer(&mut *out, object).expect("a JSON value serialises");
    out.extend_from_slice(b"}\n");
}

impl Rendered {
    /// Appends one event (`ADDED`, `MODIFIED` or `DELETED`) of `object`, whose
    /// `metadata.resourceVersion` is the event's version.
    pub fn push(&mut self, kind: &str, object: &Value) {
        let rv = object["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        self.rvs.push(rv);
        self.full_at.push(self.full.len());
        self.meta_at.push(self.meta.len());
        self.pb_at.push(self.pb.len());
        line(&mut self.full, kind, object);
        frame(&mut self.pb, kind, object);
        let meta = json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": object["metadata"],
        });
        line(&mut self.meta, kind, &meta);
    }

    /// Appends the bookmark that ends a streaming list's initial events, at `rv`.
    pub fn push_initial_events_end(&mut self, rv: u64) {
        for (out, kind, api_version) in [
            (&mut self.full, "Pod", "v1"),
            (&mut self.meta, "PartialObjectMetadata", "meta.k8s.io/v1"),
        ] {
            let bookmark = json!({
                "kind": kind,
                "apiVersion": api_version,
                "metadata": {
                    "resourceVersion": rv.to_string(),
                    "annotations": {"k8s.io/initial-events-end": "true"},
                },
            });
            line(out, "BOOKMARK", &bookmark);
        }
        let bookmark = json!({
            "metadata": {
                "resourceVersion": rv.to_string(),
                "annotations": {"k8s.io/initial-events-end": "true"},
            },
        });
        frame(&mut self.pb, "BOOKMARK", &bookmark);
    }

    /// The number of events.
    pub fn len(&self) -> usize {
        self.rvs.len()
    }

    /// No events.
    pub fn is_empty(&self) -> bool {
        self.rvs.is_empty()
    }

    /// The bytes of each form.
    pub fn bytes(&self) -> (usize, usize) {
        (self.full.len(), self.meta.len())
    }

    fn freeze(self) -> Queued {
        Queued {
            full: Bytes::from(self.full),
            meta: Bytes::from(self.meta),
            pb: Bytes::from(self.pb),
            rvs: self.rvs,
            full_at: self.full_at,
            meta_at: self.meta_at,
            pb_at: self.pb_at,
        }
    }
}

#[derive(Debug)]
struct Queued {
    full: Bytes,
    meta: Bytes,
    pb: Bytes,
    rvs: Vec<u64>,
    full_at: Vec<usize>,
    meta_at: Vec<usize>,
    pb_at: Vec<usize>,
}

impl Queued {
    fn form(&self, form: Form) -> (&Bytes, &[usize]) {
        match form {
            Form::Full => (&self.full, &self.full_at),
            Form::Meta => (&self.meta, &self.meta_at),
            Form::Protobuf => (&self.pb, &self.pb_at),
        }
    }

    /// The events after `rv`, in the form asked for.
    fn after(&self, rv: u64, form: Form) -> Bytes {
        let i = self.rvs.partition_point(|r| *r <= rv);
        let (bytes, at) = self.form(form);
        let start = at.get(i).copied().unwrap_or(bytes.len());
        bytes.slice(start..)
    }

    fn all(&self, form: Form) -> Bytes {
        self.form(form).0.clone()
    }
}

#[derive(Debug)]
struct State {
    upstream: SocketAddr,
    /// The version lists at version 0 (or with none) are served at exactly, if any.
    base: Mutex<Option<u64>>,
    /// Events after the base, for the watch that follows a list at the base.
    events: Mutex<Option<Arc<Queued>>>,
    /// A streaming list's initial events.
    initial: Mutex<Option<Arc<Queued>>>,
    /// Bumped to end every watch the front serves.
    close: watch::Sender<u64>,
}

/// The front server; it stops with the runtime it was started on.
#[derive(Debug)]
pub struct Front {
    addr: SocketAddr,
    state: Arc<State>,
}

impl Front {
    /// Listens on 127.0.0.1 (a free port) before the simulated server at `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Front> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            upstream,
            base: Mutex::new(None),
            events: Mutex::new(None),
            initial: Mutex::new(None),
            close: watch::channel(0).0,
        });
        let shared = Arc::clone(&state);
        tokio::spawn(async move {
            loop {
                let stream = match listener.accept().await {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::debug!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let state = Arc::clone(&shared);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let state = Arc::clone(&state);
                        async move { Ok::<_, Infallible>(handle(&state, req).await) }
                    });
                    if let Err(e) = hyper::server::conn::http1::Builder::new()
                        .timer(hyper_util::rt::TokioTimer::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                    {
                        tracing::debug!(error = %e, "front connection ended");
                    }
                });
            }
        });
        Ok(Front { addr, state })
    }

    /// The URL clients use.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues `events`, all after version `base`: lists at version 0 (or with no version) are
    /// then served at exactly `base`, and a watch from `base` or later gets the events after its
    /// version in one burst.
    pub fn queue_events(&self, base: u64, events: Rendered) {
        *self.state.events.lock() = Some(Arc::new(events.freeze()));
        *self.state.base.lock() = Some(base);
    }

    /// Serves lists at version 0 (or with no version) at exactly `base`, and lets every watch
    /// through: the simulated server then replays the events after the list's version from its
    /// history, one line per frame (the paced shape).
    pub fn list_at(&self, base: u64) {
        *self.state.events.lock() = None;
        *self.state.base.lock() = Some(base);
    }

    /// Queues the initial events of a streaming list (ending with its bookmark).
    pub fn queue_initial(&self, initial: Rendered) {
        *self.state.initial.lock() = Some(Arc::new(initial.freeze()));
    }

    /// Forgets what was queued: every request then goes through.
    pub fn clear(&self) {
        *self.state.base.lock() = None;
        *self.state.events.lock() = None;
        *self.state.initial.lock() = None;
    }

    /// Ends every watch the front is serving.
    pub fn close_watches(&self) {
        self.state.close.send_modify(|g| *g += 1);
    }
}

/// The query parameter `name`, if present (the bench's values need no decoding).
fn param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then_some(v)
    })
}

/// The query with `resourceVersion` and `resourceVersionMatch` replaced by an exact read at `rv`.
fn exact_at(query: &str, rv: u64) -> String {
    let mut kept: Vec<&str> = query
        .split('&')
        .filter(|kv| {
            let k = kv.split_once('=').map_or(*kv, |(k, _)| k);
            !kv.is_empty() && k != "resourceVersion" && k != "resourceVersionMatch"
        })
        .collect();
    let exact = format!("resourceVersion={rv}&resourceVersionMatch=Exact");
    kept.push(&exact);
    kept.join("&")
}

fn error(code: StatusCode, message: String) -> Response<Body> {
    let mut r = Response::new(
        http_body_util::Full::new(Bytes::from(message))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *r.status_mut() = code;
    r
}

async fn handle(state: &Arc<State>, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or_default().to_owned();
    let pods = path == "/api/v1/pods";
    let watching = matches!(param(&query, "watch"), Some("true" | "1"));
    if pods && watching {
        let accept = req
            .headers()
            .get(hyper::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        // The first type listed wins, as in the API server's negotiation.
        let form = if accept.contains("as=PartialObjectMetadata") {
            Form::Meta
        } else if accept
            .trim_start()
            .starts_with(kinformer_protobuf::wire::CONTENT_TYPE)
        {
            Form::Protobuf
        } else {
            Form::Full
        };
        if let Some(body) = queued_watch(state, &query, form) {
            return burst(state, &query, body, form);
        }
    }
    let mut query = query;
    if pods
        && !watching
        && param(&query, "continue").is_none()
        && matches!(param(&query, "resourceVersion"), None | Some("0" | ""))
        && let Some(base) = *state.base.lock()
    {
        query = exact_at(&query, base);
    }
    match forward(state, req, &path, &query, watching).await {
        Ok(r) => r,
        Err(e) => error(StatusCode::BAD_GATEWAY, format!("bench front: {e}")),
    }
}

/// What the front holds for a watch with `query`, if anything.
fn queued_watch(state: &State, query: &str, form: Form) -> Option<Bytes> {
    if param(query, "sendInitialEvents") == Some("true") {
        return state.initial.lock().as_ref().map(|q| q.all(form));
    }
    let rv: u64 = param(query, "resourceVersion")?.parse().ok()?;
    let base = (*state.base.lock())?;
    let events = state.events.lock();
    let queued = events.as_ref()?;
    (rv >= base).then(|| queued.after(rv, form))
}

/// A watch response: `body` in [`CHUNK`]-byte writes back to back, then nothing until the
/// client goes, the watch's `timeoutSeconds` pass, or the front closes its watches.
fn burst(state: &State, query: &str, body: Bytes, form: Form) -> Response<Body> {
    let chunks: Vec<Bytes> = (0..body.len())
        .step_by(CHUNK)
        .map(|at| body.slice(at..(at + CHUNK).min(body.len())))
        .collect();
    let timeout = param(query, "timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .map_or(Duration::from_secs(1800), Duration::from_secs);
    let mut close = state.close.subscribe();
    close.borrow_and_update();
    let end = async move {
        tokio::select! {
            _ = close.changed() => {}
            () = tokio::time::sleep(timeout) => {}
        }
    };
    let frames = futures_util::stream::iter(chunks)
        .map(|c| Ok::<_, std::io::Error>(Frame::data(c)))
        .chain(futures_util::stream::once(end).filter_map(|()| async { None }));
    let mut r = Response::new(StreamBody::new(frames).boxed_unsync());
    let content_type = match form {
        Form::Protobuf => kinformer_protobuf::wire::WATCH_CONTENT_TYPE,
        Form::Full | Form::Meta => "application/json",
    };
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    r
}

fn io_error(e: impl std::error::Error + Send + Sync + 'static) -> std::io::Error {
    std::io::Error::other(e)
}

/// Sends the request on to the simulated server (on a connection of its own). A watch's body
/// streams through; any other body is read whole and written in [`CHUNK`]-byte writes.
async fn forward(
    state: &State,
    req: Request<Incoming>,
    path: &str,
    query: &str,
    watching: bool,
) -> Result<Response<Body>, std::io::Error> {
    let stream = TcpStream::connect(state.upstream).await?;
    stream.set_nodelay(true)?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(io_error)?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "upstream connection ended");
        }
    });
    let (mut parts, body) = req.into_parts();
    let uri = if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    };
    parts.uri = uri.parse().map_err(io_error)?;
    let response = send
        .send_request(Request::from_parts(parts, body))
        .await
        .map_err(io_error)?;
    let (parts, body) = response.into_parts();
    if watching {
        return Ok(Response::from_parts(
            parts,
            body.map_err(io_error).boxed_unsync(),
        ));
    }
    let whole = body.collect().await.map_err(io_error)?.to_bytes();
    let chunks: Vec<Result<Frame<Bytes>, std::io::Error>> = (0..whole.len())
        .step_by(CHUNK)
        .map(|at| Ok(Frame::data(whole.slice(at..(at + CHUNK).min(whole.len())))))
        .collect();
    Ok(Response::from_parts(
        parts,
        StreamBody::new(futures_util::stream::iter(chunks)).boxed_unsync(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_at_version_zero_becomes_an_exact_read() {
        assert_eq!(
            exact_at("limit=500&resourceVersion=0", 42),
            "limit=500&resourceVersion=42&resourceVersionMatch=Exact"
        );
        assert_eq!(
            exact_at("", 7),
            "resourceVersion=7&resourceVersionMatch=Exact"
        );
        assert_eq!(
            param("watch=true&resourceVersion=5", "resourceVersion"),
            Some("5")
        );
        assert_eq!(param("watch=true", "resourceVersion"), None);
    }

    #[test]
    fn a_watch_gets_the_events_after_its_version() {
        let mut r = Rendered::default();
        for rv in [11, 12, 13] {
            r.push(
                "MODIFIED",
                &json!({"metadata": {"name": "a", "resourceVersion": rv.to_string()}}),
            );
        }
        assert_eq!(r.len(), 3);
        let q = r.freeze();
        let lines = |b: Bytes| String::from_utf8(b.to_vec()).unwrap();
        assert_eq!(lines(q.after(10, Form::Full)).lines().count(), 3);
        let after_12 = lines(q.after(12, Form::Full));
        assert_eq!(after_12.lines().count(), 1);
        assert!(
            after_12.contains("\"resourceVersion\":\"13\""),
            "{after_12}"
        );
        assert!(lines(q.after(13, Form::Meta)).is_empty());
        assert!(lines(q.after(11, Form::Meta)).contains("PartialObjectMetadata"));
        // The same events in protobuf frames: the last one alone after 12.
        let codec = kinformer_protobuf::convert::codec_for("v1", "Pod").unwrap();
        let mut frames = kinformer_protobuf::wire::FrameDecoder::new(1 << 20);
        frames.push(q.after(12, Form::Protobuf));
        let event =
            kinformer_protobuf::wire::decode_watch_event(frames.next_frame().unwrap().unwrap())
                .unwrap();
        let object = kinformer_protobuf::wire::decode_envelope(event.object).unwrap();
        let pod = codec.decode_json(&object.raw).unwrap();
        assert_eq!(pod["metadata"]["resourceVersion"], "13");
        assert!(frames.next_frame().unwrap().is_none());
        frames.finish().unwrap();
    }
}
