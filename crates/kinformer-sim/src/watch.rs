//! Watch streams: initial events, live events from the shared history, bookmarks, timeouts,
//! selector transitions and the watch faults.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, header};
use http_body_util::{BodyExt as _, StreamBody};
use hyper::Response;
use hyper::body::Frame;
use kinformer_core::FieldSelector;
use kinformer_core::Status;
use kinformer_core::selector::{FieldOperator, FieldRequirement};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::faults::FaultState;
use crate::render::{bookmark_line, bookmark_object, error_line, watch_event_line};
use crate::request::{Filter, Query, Target, parse_rv, timeout_seconds, wait_for_version};
use crate::response::Body;
use crate::state::Shared;
use crate::store::{Event, EventKind, Stored, status, too_large, too_old};
use crate::table::{Form, IncludeObject, table_event_object};
use crate::validation;

/// The default watch timeout when the request gives none (the real server picks 30-60 minutes).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// Events read from the history per lock.
const BATCH: usize = 1024;

/// Where a watch starts.
#[derive(Debug, Clone, Copy)]
enum Start {
    /// ADDED for every current object, then (for a streaming list) the initial-events-end bookmark.
    Initial { end_bookmark: bool },
    /// Events after this version.
    From(u64),
}

struct Spec {
    target: Target,
    filter: Filter,
    meta_only: bool,
    /// Events as protobuf frames, with the kind's codec.
    protobuf: Option<&'static crate::protobuf::Codec>,
    /// Events as one-row Tables, with what rows carry.
    table: Option<IncludeObject>,
    /// Whether the next Table still carries the column definitions (only the first does).
    table_columns: AtomicBool,
    bookmarks: bool,
    start: Start,
    timeout: Duration,
}

/// The 422 for a combination of watch options the list options' validation forbids.
fn watch_invalid(field: &str, message: &str) -> Status {
    validation::invalid_list_options(&[validation::FieldError::forbidden(field, message)])
}

pub(crate) async fn handle(
    shared: &Arc<Shared>,
    target: Target,
    q: &Query,
    form: Form,
) -> Result<Response<Body>, Status> {
    let meta_only = form == Form::Metadata;
    let protobuf = match form {
        Form::Protobuf => Some(crate::api::protobuf_codec(&target.info)?),
        _ => None,
    };
    let table = (form == Form::Table)
        .then(|| IncludeObject::parse(q.get("includeObject")))
        .transpose()?;
    let mut filter = Filter::from_query(
        &target.info,
        target.namespace.clone(),
        q,
        shared.config.honours_shard_selector(),
    )?;
    if let Some(name) = &target.name {
        let mut reqs = filter.field.requirements().to_vec();
        reqs.push(FieldRequirement {
            field: "metadata.name".to_owned(),
            operator: FieldOperator::Equals,
            value: name.clone(),
        });
        filter.field = FieldSelector::from_requirements(reqs);
    }
    let bookmarks = q.flag("allowWatchBookmarks");
    let send_initial = q.get("sendInitialEvents");
    let rv_match = q.get("resourceVersionMatch");
    let rv = q.get("resourceVersion");
    if send_initial.is_some() {
        if rv_match != Some("NotOlderThan") {
            return Err(watch_invalid(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if !bookmarks {
            return Err(watch_invalid(
                "allowWatchBookmarks",
                "sendInitialEvents requires setting allowWatchBookmarks to true",
            ));
        }
    } else if rv_match.is_some() {
        return Err(watch_invalid(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ));
    }
    let requested = match rv {
        None | Some("0") => None,
        Some(r) => Some(parse_rv(r)?),
    };
    if let Some(r) = requested
        && r > shared.store.resource_version()
        && !wait_for_version(shared, r).await
    {
        return Err(too_large(r, shared.store.resource_version()));
    }
    let start = match (send_initial, requested) {
        (Some("true"), _) => Start::Initial { end_bookmark: true },
        (Some(_), None) => Start::From(shared.store.resource_version()),
        (None, None) => Start::Initial {
            end_bookmark: false,
        },
        (_, Some(r)) => Start::From(r),
    };
    // None or 0: the server's default; a negative timeout has already passed
    // (`endpoints/handlers/get.go`, `handleWatch`).
    let timeout = match timeout_seconds(q)? {
        None | Some(0) => DEFAULT_TIMEOUT,
        Some(t) => Duration::from_secs(t.max(0).unsigned_abs()),
    };
    let spec = Spec {
        target,
        filter,
        meta_only,
        protobuf,
        table,
        table_columns: AtomicBool::new(true),
        bookmarks,
        start,
        timeout,
    };
    let (tx, mut rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    let writer = Writer {
        tx,
        protobuf: protobuf.is_some(),
        faults: Arc::clone(&shared.faults),
        close_gen: 0,
        close_left: None,
    };
    tokio::spawn(run(Arc::clone(shared), spec, writer));
    let body = futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx).map(|o| o.map(|r| r.map(Frame::data)))
    });
    let mut r = Response::new(StreamBody::new(body).boxed());
    let content_type = if protobuf.is_some() {
        kinformer_protobuf::wire::WATCH_CONTENT_TYPE
    } else {
        "application/json"
    };
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(r)
}

/// Whether to go on writing.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Go,
    Stop,
}

/// Writes lines to one watch stream, applying the stream faults.
struct Writer {
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    /// The stream carries protobuf frames: the malformed and oversized faults are frames too.
    protobuf: bool,
    faults: Arc<FaultState>,
    close_gen: u64,
    close_left: Option<usize>,
}

impl Writer {
    /// Waits out a stall and the slow-chunks delay.
    async fn pace(&self) {
        if let Some(until) = self.faults.stalled_until() {
            tokio::time::sleep_until(until).await;
        }
        if let Some(d) = self.faults.slow_chunks() {
            tokio::time::sleep(d).await;
        }
    }

    async fn send(&mut self, line: Bytes) -> Flow {
        self.pace().await;
        match self.tx.send(Ok(line)).await {
            Ok(()) => Flow::Go,
            Err(_) => Flow::Stop,
        }
    }

    /// Sends an ADDED/MODIFIED/DELETED line.
    async fn send_event(&mut self, line: Bytes) -> Flow {
        match *self.faults.close_after.lock() {
            Some((generation, n)) if generation != self.close_gen => {
                self.close_gen = generation;
                self.close_left = Some(n);
            }
            Some(_) => {}
            None => self.close_left = None,
        }
        if self.close_left == Some(0) {
            return Flow::Stop;
        }
        self.pace().await;
        let f = &self.faults;
        let malformed = if self.protobuf {
            crate::protobuf::malformed_frame()
        } else {
            Bytes::from_static(b"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\n")
        };
        if FaultState::take(&f.malformed_next_line) && self.tx.send(Ok(malformed)).await.is_err() {
            return Flow::Stop;
        }
        let size = f.oversized_next_line.swap(0, Ordering::AcqRel);
        let line = match size {
            0 => line,
            _ if self.protobuf => crate::protobuf::pad_frame(&line, size),
            _ => pad(&line, size),
        };
        if FaultState::take(&f.cut_next_line) {
            let half = line.slice(..line.len() / 2);
            let _ = self.tx.send(Ok(half)).await;
            // Let the connection write the half line out before it is torn down.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = self
                .tx
                .send(Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "cut by fault injection",
                )))
                .await;
            return Flow::Stop;
        }
        if self.tx.send(Ok(line)).await.is_err() {
            return Flow::Stop;
        }
        if let Some(n) = &mut self.close_left {
            *n -= 1;
            if *n == 0 {
                return Flow::Stop;
            }
        }
        Flow::Go
    }
}

/// Pads an event line with a `"padding"` field so that it is `size` bytes long without its newline.
fn pad(line: &Bytes, size: usize) -> Bytes {
    // `line` ends with `}\n`.
    let core = &line[..line.len().saturating_sub(2)];
    let overhead = core.len() + ",\"padding\":\"\"}".len();
    let n = size.saturating_sub(overhead);
    let mut b = BytesMut::with_capacity(overhead + n + 1);
    b.put_slice(core);
    b.put_slice(b",\"padding\":\"");
    b.put_bytes(b'x', n);
    b.put_slice(b"\"}\n");
    b.freeze()
}

/// The object JSON of a watch event's line, in the requested form.
fn object_bytes(o: &Stored, meta_only: bool) -> &Bytes {
    if meta_only { o.meta_json() } else { &o.json }
}

/// Which line of an event a watcher sends.
#[derive(Clone, Copy)]
enum Variant {
    Added = 0,
    Modified = 1,
    Deleted = 2,
    /// The object left the selector: DELETED with its previous state at the event's version.
    Left = 3,
}

/// The frame of an event in protobuf, rendered once and shared by every watcher that sends it.
/// An object the kind's typed form cannot hold (only the sim's admin API can store one) is an
/// ERROR frame with a 500.
fn frame(ev: &Event, variant: Variant, codec: &crate::protobuf::Codec) -> Bytes {
    use crate::protobuf::{error_frame, event_frame, value_body};
    use kinformer_protobuf::wire::EventType;
    let idx = variant as usize * 3 + 2;
    ev.lines[idx]
        .get_or_init(|| {
            let (event_type, body) = match variant {
                Variant::Added => (EventType::Added, ev.object.protobuf(codec).cloned()),
                Variant::Modified => (EventType::Modified, ev.object.protobuf(codec).cloned()),
                Variant::Deleted => (EventType::Deleted, ev.object.protobuf(codec).cloned()),
                Variant::Left => {
                    let prev = ev.prev.as_ref().unwrap_or(&ev.object);
                    let mut v = prev.value();
                    v["metadata"]["resourceVersion"] = ev.rv.to_string().into();
                    (EventType::Deleted, value_body(codec, &v))
                }
            };
            match body {
                Ok(body) => event_frame(event_type, &body),
                Err(message) => error_frame(&status(500, "InternalError", message)),
            }
        })
        .clone()
}

/// The line of an event, rendered once and shared by every watcher that sends it.
fn line(ev: &Event, variant: Variant, meta_only: bool) -> Bytes {
    let idx = variant as usize * 3 + usize::from(meta_only);
    ev.lines[idx]
        .get_or_init(|| match variant {
            Variant::Added => watch_event_line("ADDED", object_bytes(&ev.object, meta_only)),
            Variant::Modified => watch_event_line("MODIFIED", object_bytes(&ev.object, meta_only)),
            Variant::Deleted => watch_event_line("DELETED", object_bytes(&ev.object, meta_only)),
            Variant::Left => {
                let prev = ev.prev.as_ref().unwrap_or(&ev.object);
                let mut v = prev.value();
                v["metadata"]["resourceVersion"] = ev.rv.to_string().into();
                if meta_only {
                    v = serde_json::json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": v["metadata"],
                    });
                }
                watch_event_line("DELETED", &serde_json::to_vec(&v).unwrap_or_default())
            }
        })
        .clone()
}

impl Spec {
    /// The line this watch sends for an event, if any: objects entering the selector are ADDED,
    /// objects leaving it are DELETED.
    fn line_for(&self, ev: &Event) -> Option<Bytes> {
        if *ev.resource != *self.target.info.key || !self.filter.in_namespace(&ev.object) {
            return None;
        }
        let now = self.filter.selects(&ev.object);
        let before = ev.prev.as_ref().is_some_and(|p| self.filter.selects(p));
        let variant = match (ev.kind, before, now) {
            (EventKind::Added, _, true) => Variant::Added,
            (EventKind::Modified, true, true) => Variant::Modified,
            (EventKind::Modified, false, true) => Variant::Added,
            (EventKind::Modified, true, false) => Variant::Left,
            (EventKind::Deleted, _, true) => Variant::Deleted,
            _ => return None,
        };
        if let Some(include) = self.table {
            return Some(self.table_line(ev, variant, include));
        }
        if let Some(codec) = self.protobuf {
            return Some(frame(ev, variant, codec));
        }
        Some(line(ev, variant, self.meta_only))
    }

    /// An event line whose object is a one-row Table (rendered for this watcher alone).
    fn table_line(&self, ev: &Event, variant: Variant, include: IncludeObject) -> Bytes {
        let (kind, object) = match variant {
            Variant::Added => ("ADDED", ev.object.value()),
            Variant::Modified => ("MODIFIED", ev.object.value()),
            Variant::Deleted => ("DELETED", ev.object.value()),
            Variant::Left => {
                let mut v = ev.prev.as_ref().unwrap_or(&ev.object).value();
                v["metadata"]["resourceVersion"] = ev.rv.to_string().into();
                ("DELETED", v)
            }
        };
        watch_event_line(kind, &self.table_object(&object, include))
    }

    /// A one-row Table of `object`; the first of the stream carries the column definitions.
    fn table_object(&self, object: &serde_json::Value, include: IncludeObject) -> Bytes {
        let columns = self.table_columns.swap(false, Ordering::Relaxed);
        table_event_object(&self.target.info, object, include, columns)
    }

    /// The ADDED line of an object sent as part of the initial state.
    fn initial_line(&self, o: &Stored) -> Bytes {
        if let Some(codec) = self.protobuf {
            return match o.protobuf(codec) {
                Ok(body) => {
                    crate::protobuf::event_frame(kinformer_protobuf::wire::EventType::Added, body)
                }
                Err(message) => self.error(&status(500, "InternalError", message)),
            };
        }
        match self.table {
            Some(include) => watch_event_line("ADDED", &self.table_object(&o.value(), include)),
            None => watch_event_line("ADDED", object_bytes(o, self.meta_only)),
        }
    }

    /// A BOOKMARK line. Asked for as Tables, the bookmark's empty object is converted like any
    /// other event's (`doTransformObject` converts everything but a `Status`).
    fn bookmark(&self, rv: u64, end: bool) -> Bytes {
        if let Some(codec) = self.protobuf {
            return crate::protobuf::bookmark_frame(codec, rv, end);
        }
        let api = &self.target.info.api;
        if let Some(include) = self.table {
            let object = bookmark_object(&api.kind, &api.api_version, rv, end);
            let object = serde_json::from_slice(&object).unwrap_or_default();
            return watch_event_line("BOOKMARK", &self.table_object(&object, include));
        }
        if self.meta_only {
            bookmark_line("PartialObjectMetadata", "meta.k8s.io/v1", rv, end)
        } else {
            bookmark_line(&api.kind, &api.api_version, rv, end)
        }
    }
}

impl Spec {
    /// The ERROR event of a status, in the stream's encoding.
    fn error(&self, status: &Status) -> Bytes {
        if self.protobuf.is_some() {
            crate::protobuf::error_frame(status)
        } else {
            error_line(status)
        }
    }
}

async fn run(shared: Arc<Shared>, spec: Spec, mut w: Writer) {
    let mut close_all = shared.faults.close_all.subscribe();
    close_all.borrow_and_update();
    let deadline = Instant::now() + spec.timeout;
    let closed = w.tx.clone();
    // Once `close_all_watches_now` returns, no write made after it reaches any watch, so a test
    // can change the store knowing every open watch has missed the change: the select looks at
    // the close first, and `stream` checks it again between reading events and sending them.
    let close_check = close_all.clone();
    tokio::select! {
        biased;
        _ = close_all.changed() => tracing::debug!("watch closed by fault injection"),
        () = closed.closed() => {}
        () = tokio::time::sleep_until(deadline) => tracing::debug!("watch timed out"),
        () = stream(&shared, &spec, &mut w, &close_check, deadline) => {}
    }
}

/// How long before a watch's timeout the watch cache sends its last bookmark.
const PRE_TIMEOUT_BOOKMARK: Duration = Duration::from_secs(2);

/// When the next bookmark is due, as the watch cache schedules them: one `interval` from `now`,
/// or 2 s before the watch's deadline if that comes first; none once that moment has passed.
fn next_bookmark(now: Instant, interval: Duration, deadline: Instant) -> Option<Instant> {
    let heartbeat = now + interval;
    let pre_timeout = deadline.checked_sub(PRE_TIMEOUT_BOOKMARK)?;
    let at = heartbeat.min(pre_timeout);
    (at > now).then_some(at)
}

async fn stream(
    shared: &Shared,
    spec: &Spec,
    w: &mut Writer,
    close_all: &watch::Receiver<u64>,
    deadline: Instant,
) {
    let store = &shared.store;
    let mut notify = store.subscribe();
    notify.borrow_and_update();
    if FaultState::take(&shared.faults.gone_next_watch) {
        let (current, _) = store.versions();
        let gone = too_old(current.saturating_sub(1), current);
        let _ = w.send(spec.error(&expired(shared, gone))).await;
        return;
    }
    let progress = shared.faults.watches.open();
    let mut pos = match spec.start {
        Start::Initial { end_bookmark } => {
            let at = store.resource_version();
            let snap = match store.snapshot(&spec.target.info.key, at) {
                Ok(s) => s,
                Err(s) => {
                    let _ = w.send(spec.error(&s)).await;
                    return;
                }
            };
            for o in snap.iter().filter(|o| spec.filter.matches(o)) {
                let line = spec.initial_line(o);
                if w.send_event(line).await == Flow::Stop {
                    return;
                }
            }
            if end_bookmark && w.send(spec.bookmark(at, true)).await == Flow::Stop {
                return;
            }
            at
        }
        Start::From(rv) => {
            // A version older than the watch cache holds for this resource is too old, however
            // much history storage keeps (`storage/cacher/watch_cache.go`,
            // `getAllEventsSinceLocked`).
            let window = shared.config.watch_cache_window;
            if shared.config.watch_cache
                && let Some(floor) = store.watch_cache_floor(&spec.target.info.key, window)
                && rv < floor.saturating_sub(1)
            {
                let gone = too_old(rv, floor - 1);
                let _ = w.send(spec.error(&expired(shared, gone))).await;
                return;
            }
            rv
        }
    };
    progress.reached(pos);
    let interval = shared
        .config
        .bookmark_interval
        .max(Duration::from_millis(1));
    let mut bookmark_at = next_bookmark(Instant::now(), interval, deadline);
    // Bounded by the watch timeout, close faults and the client going away (see `run`).
    // Whether the watch has started: a version gone before it starts is answered with an
    // in-stream 410; a connected watcher that falls that far behind is closed instead, as the
    // cacher closes a watcher too slow to take its events (`storage/cacher/cache_watcher.go`).
    let mut connected = false;
    loop {
        loop {
            let events = match store.events_after(pos, BATCH) {
                Ok(e) => e,
                Err(_) if connected => return,
                Err(s) => {
                    let _ = w.send(spec.error(&expired(shared, s))).await;
                    return;
                }
            };
            connected = true;
            if events.is_empty() {
                break;
            }
            if events.len() == BATCH
                && shared.config.watch_cache
                && store
                    .watch_cache_floor(&spec.target.info.key, shared.config.watch_cache_window)
                    .is_some_and(|floor| pos < floor.saturating_sub(1))
            {
                return;
            }
            if close_all.has_changed().unwrap_or(true) {
                return;
            }
            for ev in &events {
                if !shared.faults.hidden_from_watches(&ev.object)
                    && let Some(line) = spec.line_for(ev)
                    && w.send_event(line).await == Flow::Stop
                {
                    return;
                }
                pos = ev.rv;
            }
            progress.reached(pos);
        }
        // Periodic bookmarks come from the watch cache; storage's watch sends none.
        let due = bookmark_at.filter(|_| spec.bookmarks && shared.config.watch_cache);
        tokio::select! {
            r = notify.changed() => if r.is_err() { return },
            () = sleep_until_some(due) => {
                if w.send(spec.bookmark(pos, false)).await == Flow::Stop {
                    return;
                }
                bookmark_at = next_bookmark(Instant::now(), interval, deadline);
            }
        }
    }
}

/// The 410 of a watch from a compacted version: the watch cache's message, with the versions
/// ([`too_old`]), or, on a server without a watch cache, etcd's, without them
/// (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/errors.go`, `interpretWatchError`).
fn expired(shared: &Shared, s: Status) -> Status {
    if shared.config.watch_cache || s.code != 410 {
        return s;
    }
    status(
        410,
        "Expired",
        "The resourceVersion for the provided watch is too old.",
    )
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bookmarks_are_due_each_interval_and_before_the_deadline() {
        let now = Instant::now();
        let minute = Duration::from_secs(60);
        let deadline = now + Duration::from_secs(600);
        assert_eq!(next_bookmark(now, minute, deadline), Some(now + minute));
        let soon = now + Duration::from_secs(30);
        assert_eq!(
            next_bookmark(now, minute, soon),
            Some(soon - PRE_TIMEOUT_BOOKMARK)
        );
        // Once the pre-timeout bookmark is sent, no more are due.
        let late = soon - PRE_TIMEOUT_BOOKMARK;
        assert_eq!(next_bookmark(late, minute, soon), None);
        assert_eq!(
            next_bookmark(now, minute, now + Duration::from_secs(1)),
            None
        );
    }

    #[test]
    fn padding_reaches_the_requested_size() {
        let line = watch_event_line("ADDED", br#"{"metadata":{"name":"a"}}"#);
        let padded = pad(&line, 1000);
        assert_eq!(padded.len(), 1001);
        let v: serde_json::Value = serde_json::from_slice(&padded).unwrap();
        assert_eq!(v["object"]["metadata"]["name"], "a");
        // A size below the line's own length leaves the line valid and unpadded.
        let small = pad(&line, 3);
        assert!(serde_json::from_slice::<serde_json::Value>(&small).is_ok());
    }
}
