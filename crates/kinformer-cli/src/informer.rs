//! `watch` and `get` on kinformer's informer: the facade's default pipeline (reflector, delta
//! FIFO, shared informer, indexer) over the HTTP client.
//!
//! `watch` prints every notification the informer hands its handlers: the initial list as
//! `ADDED`, then each change; a delete the informer only inferred from a relist (a tombstone) is
//! marked as such. `get` waits for the cache to sync and prints it.
//!
//! The reflector retries what can be retried, forever, as an informer must. The tool hears of
//! each failure through the reflector's watch-error hook: a failure retrying cannot fix ends the
//! command; the others are remembered, so that Ctrl-C during a retry reports what was failing.
//! `get`, like `kubectl get`, retries nothing: its first failure ends it.
//!
//! The informer caches each object in its compressed form ([`Cached`]): its metadata decoded,
//! the rest of its JSON compressed. Objects are decoded when printed, one at a time.

use std::io::{IsTerminal, Write};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kinformer::core::ListProgress;
use kinformer::core::Notification;
use kinformer::core::list_watch::{self, ErrorKind};
use kinformer::prelude::*;
use kinformer::reflector::Phase;
use tokio::sync::mpsc;

use crate::print::{self, Cached, Event, EventType, Item, Printable, Style};
use crate::{Class, Error, Signal};
use kinformer::core::TypeMeta;

/// The source, counting the list pages received, for the progress line.
struct CountedLists<L> {
    inner: L,
    listed: Arc<Listed>,
}

/// List pages received so far (the informer's progress counts the objects).
#[derive(Debug, Default)]
pub(crate) struct Listed {
    pages: AtomicU64,
}

#[async_trait::async_trait]
impl<K, L: ListWatch<K>> ListWatch<K> for CountedLists<L> {
    async fn list(
        &self,
        params: &kinformer::core::ListParams,
    ) -> Result<kinformer::core::ObjectList<K>, list_watch::Error> {
        let page = self.inner.list(params).await?;
        self.listed.pages.fetch_add(1, Ordering::Relaxed);
        Ok(page)
    }

    async fn watch(
        &self,
        params: &kinformer::core::WatchParams,
    ) -> Result<kinformer::core::WatchStream<K>, list_watch::Error> {
        self.inner.watch(params).await
    }
}

/// A failure the reflector reported through its hook.
#[derive(Debug)]
pub(crate) struct Failure {
    /// `list: ...` or `watch: ...`.
    cause: String,
    /// Whether retrying can fix it.
    pub(crate) fatal: bool,
    /// What kind of failure it is, for the exit code.
    class: Class,
    /// How long the server asked to wait before the next request (`Retry-After`), if it did.
    pub(crate) retry_after: Option<Duration>,
}

impl Failure {
    /// A failure: its line, whether retrying can fix it, and its class.
    pub(crate) fn new(cause: String, fatal: bool, class: Class) -> Self {
        Self {
            cause,
            fatal,
            class,
            retry_after: None,
        }
    }

    /// The phase (`list` or `watch`) and class: a failure like the last one retried is not
    /// logged again.
    fn episode(&self) -> (&str, Class) {
        (self.cause.split(':').next().unwrap_or_default(), self.class)
    }

    /// The failure as the tool reports it.
    pub(crate) fn into_error(self) -> Error {
        Error::Failed {
            cause: self.cause,
            class: self.class,
        }
    }

    /// The failure as the tool reports it when Ctrl-C or SIGTERM came while it was retried.
    fn interrupted(self) -> Error {
        Error::InterruptedWhileRetrying {
            cause: self.cause,
            class: self.class,
        }
    }
}

/// The failures the tool retries, logged at `warn` once per episode (a failure unlike the one
/// before, or after progress) by the tool itself, since only the tool knows what it does next.
/// The reflector's own `list/watch failed; retrying` warning is filtered out of the log
/// ([`reflector_warning`]): the tool ends on some failures that the reflector would retry.
#[derive(Debug, Default)]
pub(crate) struct Retried {
    last: Option<(String, Class)>,
}

impl Retried {
    /// Logs `f`, which the tool goes on retrying, unless it continues the same episode.
    pub(crate) fn note(&mut self, f: &Failure, what: std::fmt::Arguments<'_>) {
        let (phase, class) = f.episode();
        if self
            .last
            .as_ref()
            .is_some_and(|(p, c)| p == phase && *c == class)
        {
            tracing::debug!("{}; still retrying", f.cause);
            return;
        }
        self.last = Some((phase.to_owned(), class));
        tracing::warn!("{}; {what}", f.cause);
    }

    /// Progress: the next failure starts a new episode.
    pub(crate) fn healthy(&mut self) {
        self.last = None;
    }
}

/// Whether a log event is the reflector's warning about a failure it retries (`list/watch
/// failed; retrying`), which the tool replaces with its own words: the tool ends on failures
/// retrying cannot fix, and `get` on most failures, where the reflector would retry them.
pub(crate) fn reflector_warning(meta: &tracing::Metadata<'_>) -> bool {
    meta.is_event()
        && *meta.level() == tracing::Level::WARN
        && meta.target() == "kinformer_reflector::reflector"
}

/// How long a clean shutdown of the informer may take before the tool exits anyway.
const SHUTDOWN_BOUND: Duration = Duration::from_secs(5);

/// What a run of `watch` or `get` needs.
#[derive(Debug)]
pub(crate) struct Run {
    /// The source.
    pub(crate) api: Api<Cached>,
    /// The reflector's name, for logs and metrics.
    pub(crate) name: String,
    /// `-l`.
    pub(crate) label_selector: Option<String>,
    /// `--field-selector`.
    pub(crate) field_selector: Option<String>,
    /// How to print.
    pub(crate) style: Style,
    /// Where the list pages and objects received are counted.
    pub(crate) listed: Arc<Listed>,
    /// How many times `get` has already waited for a throttling server (the first request's
    /// waits): the bound is on the command's waits, all together.
    pub(crate) throttled: u32,
}

/// Builds the informer; returns it with the failures its reflector reports and the style.
pub(crate) fn build(
    run: Run,
) -> Result<(Informer<Cached>, mpsc::UnboundedReceiver<Failure>, Style), Error> {
    let (failures_tx, failures) = mpsc::unbounded_channel();
    let config = kinformer::reflector::Config {
        name: run.name,
        label_selector: run.label_selector,
        field_selector: run.field_selector,
        // Lists, as kubectl does: the progress line counts the list's pages as they arrive, and
        // `get` prints a list.
        streaming_list: kinformer::reflector::StreamingList::Off,
        // The latest state, in pages, as kubectl reads it. A list at resourceVersion=0 is served
        // from the watch cache in one body whatever the page size: every object's JSON at once
        // (some 490 MB for 100k pods), past the client's bound on a list body.
        initial_list: kinformer::reflector::InitialList::Consistent,
        ..kinformer::reflector::Config::default()
    }
    .with_watch_error_handler(move |info| {
        let phase = match info.phase {
            Phase::List => "list",
            _ => "watch",
        };
        let mut failure = Failure::new(
            format!("{phase}: {}", info.error),
            info.error.kind() == ErrorKind::Fatal,
            Class::of_list_watch(info.error),
        );
        failure.retry_after = info.error.retry_after();
        let _ = failures_tx.send(failure);
    });
    let informer = Informer::<Cached>::builder()
        .list_watch(CountedLists {
            inner: run.api,
            listed: run.listed,
        })
        .reflector(config)
        .build()?;
    Ok((informer, failures, run.style))
}

/// Stops the informer, bounded in time.
pub(crate) async fn stop(informer: &Informer<Cached>) {
    let _ = tokio::time::timeout(SHUTDOWN_BOUND, informer.shutdown()).await;
}

/// Prints every notification until `max_events` lines have been printed, a failure retrying
/// cannot fix, or `interrupt` completes. `retrying`: a failure already seen before the informer
/// starts, which it is about to retry.
///
/// `rows`: print as `get -w` does ([`print::watched`]: the notifications already waiting as one
/// aligned table, the header only over the first, or one document per object) instead of
/// event lines.
pub(crate) async fn watch(
    run: Run,
    retrying: Option<Failure>,
    max_events: Option<u64>,
    rows: bool,
    out: &mut impl Write,
    interrupt: impl Future<Output = Signal>,
) -> Result<(), Error> {
    if max_events == Some(0) {
        return Ok(());
    }
    let types = types_of(&run.api);
    let (informer, mut failures, style) = build(run)?;
    let mut events = informer.event_stream()?;
    informer.start();
    let mut interrupt = pin!(interrupt);
    let mut printed = 0u64;
    // The failure being retried, if any: what Ctrl-C reports.
    let mut episode: Option<Failure> = retrying;
    let mut retried = Retried::default();
    if let Some(f) = &episode {
        retried.note(f, format_args!("retrying"));
    }
    let result = loop {
        tokio::select! {
            biased;
            signal = &mut interrupt => {
                // A failure reported just before the signal is still being retried.
                while let Ok(f) = failures.try_recv() {
                    episode = Some(f);
                }
                break Err(match episode.take() {
                    // Nobody reads stderr any more: end quietly.
                    Some(f) if signal != Signal::OutputClosed => f.interrupted(),
                    _ => Error::Interrupted(signal),
                });
            }
            Some(f) = failures.recv() => {
                if f.fatal {
                    break Err(f.into_error());
                }
                retried.note(&f, format_args!("retrying"));
                episode = Some(f);
            }
            n = events.next() => {
                let Some(n) = n else { break Ok(()) };
                episode = None;
                retried.healthy();
                if rows {
                    // What is already there is printed as one table, aligned (the initial
                    // list, as kubectl prints it); each later change as rows of its own.
                    let mut batch = vec![n];
                    while max_events.is_none_or(|m| printed + (batch.len() as u64) < m) {
                        match futures_util::FutureExt::now_or_never(events.next()) {
                            Some(Some(n)) => batch.push(n),
                            _ => break,
                        }
                    }
                    let objects: Vec<Item> = batch
                        .iter()
                        .map(|n| item(object_of(n), &types))
                        .collect();
                    let now = k8s_openapi::jiff::Timestamp::now();
                    if let Err(e) = print::watched(out, &style, &objects, printed == 0, now)
                        .and_then(|()| out.flush())
                    {
                        break Err(e.into());
                    }
                    printed += batch.len() as u64;
                } else {
                    if let Err(e) = print_notification(out, &style, &n, &types) {
                        break Err(e.into());
                    }
                    printed += 1;
                }
                if max_events.is_some_and(|m| printed >= m) {
                    break Ok(());
                }
            }
        }
    };
    drop(events);
    stop(&informer).await;
    result
}

/// The `apiVersion` and `kind` of the objects of `api`'s resource.
fn types_of(api: &Api<Cached>) -> Arc<TypeMeta> {
    let resource = api.resource();
    Arc::new(TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    })
}

/// A cached object as it is printed.
fn item(object: &Arc<Cached>, types: &Arc<TypeMeta>) -> Item {
    Item {
        object: Arc::clone(object),
        types: Arc::clone(types),
    }
}

/// The object a notification carries: the new state, or a deleted object's last known one.
fn object_of(n: &Notification<Cached>) -> &Arc<Cached> {
    match n {
        Notification::Added { object, .. } => object,
        Notification::Updated { new, .. } => new,
        Notification::Deleted { object } => match object {
            DeltaObject::Object(o) => o,
            DeltaObject::DeletedFinalStateUnknown(t) => &t.last_known,
        },
    }
}

/// Prints one notification as an event line, its object decoded for it alone.
fn print_notification(
    out: &mut impl Write,
    style: &Style,
    n: &Notification<Cached>,
    types: &Arc<TypeMeta>,
) -> std::io::Result<()> {
    let (kind, tombstone) = match n {
        Notification::Added { .. } => (EventType::Added, false),
        Notification::Updated { .. } => (EventType::Modified, false),
        Notification::Deleted { object } => (
            EventType::Deleted,
            matches!(object, DeltaObject::DeletedFinalStateUnknown(_)),
        ),
    };
    let object = item(object_of(n), types);
    let object = object.decoded()?;
    print::event(
        out,
        style,
        &Event {
            kind,
            object: &object,
            tombstone,
        },
    )?;
    out.flush()
}

/// How often the progress line is redrawn.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// The progress of the first list on stderr, drawn by indicatif: objects received, pages, rate,
/// bytes, and where the server says how many remain (`remainingItemCount`), a bar and the time
/// left. Shown only on a terminal (indicatif draws nothing elsewhere), and only once the list
/// has taken longer than [`Self::AFTER`], so a quick list draws nothing.
#[derive(Debug)]
struct Progress {
    resource: String,
    started: Instant,
    bar: Option<ProgressBar>,
}

impl Progress {
    const AFTER: Duration = Duration::from_millis(300);

    fn new(resource: &str) -> Self {
        Self {
            resource: resource.to_owned(),
            started: Instant::now(),
            bar: None,
        }
    }

    /// The words beside the bar, the most useful first: a narrow terminal cuts the end.
    fn line(resource: &str, list: &ListProgress, pages: u64, cached: usize) -> String {
        let mut line = match list.remaining {
            Some(remaining) => {
                let mut line = format!(
                    "listing {resource}: {} of {} objects",
                    list.objects,
                    list.objects + remaining
                );
                if let Some(eta) = list.eta() {
                    line.push_str(&format!(", about {:.0}s left", eta.as_secs_f64().ceil()));
                }
                line
            }
            None => format!("listing {resource}: {} objects", list.objects),
        };
        line.push_str(&format!(
            ", {:.0}/s, {pages} {}",
            list.rate(),
            if pages == 1 { "page" } else { "pages" }
        ));
        if let Some(bytes) = list.bytes {
            line.push_str(&format!(", {:.1} MiB", bytes as f64 / (1024.0 * 1024.0)));
        }
        line.push_str(&format!(
            ", {cached} cached, {:.1}s",
            list.elapsed.as_secs_f64()
        ));
        line
    }

    fn show(&mut self, list: Option<ListProgress>, pages: u64, cached: usize) {
        if self.started.elapsed() < Self::AFTER {
            return;
        }
        let list = list.unwrap_or_default();
        // The resource's name may come from the server's discovery.
        let message =
            crate::terminal::safe(&Self::line(&self.resource, &list, pages, cached)).into_owned();
        let bar = self.bar.get_or_insert_with(|| {
            // Made hidden, and shown once it has something to say.
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
            bar.set_style(
                ProgressStyle::with_template("kinformer: {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar
        });
        bar.set_message(message);
        if let Some(remaining) = list.remaining {
            if bar.length().is_none() {
                bar.set_style(
                    ProgressStyle::with_template("kinformer: [{bar:20}] {wide_msg}")
                        .unwrap_or_else(|_| ProgressStyle::default_bar())
                        .progress_chars("=> "),
                );
            }
            bar.set_length(list.objects + remaining);
        }
        bar.set_position(list.objects);
        if bar.is_hidden() {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    fn clear(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Waits for the cache to sync, then returns its objects sorted by key (only those called
/// `names`, when given; a name it does not hold is [`Error::NotFound`]). The first failure ends
/// it, as `kubectl get` does.
pub(crate) async fn get(
    run: Run,
    names: &[String],
    interrupt: impl Future<Output = Signal>,
) -> Result<Vec<Item>, Error> {
    let resource = run.api.resource().plural.clone();
    let types = types_of(&run.api);
    let listed = Arc::clone(&run.listed);
    let mut throttled = run.throttled;
    let (informer, mut failures, _style) = build(run)?;
    informer.start();
    let informers: [&dyn kinformer::shared_informer::HasSynced; 1] = [&informer];
    let mut sync = pin!(wait_for_cache_sync(&informers, None));
    let mut interrupt = pin!(interrupt);
    // On a terminal, a line on stderr tells how the initial list is going.
    let mut progress = std::io::stderr()
        .is_terminal()
        .then(|| Progress::new(&resource));
    let mut ticker = tokio::time::interval(PROGRESS_EVERY);
    let mut retried = Retried::default();
    let synced = loop {
        tokio::select! {
            signal = &mut interrupt => break Err(Error::Interrupted(signal)),
            Some(f) = failures.recv() => {
                // A server that asks to be asked again later (429, or a 5xx with Retry-After)
                // is, as by kubectl, a bounded number of times; the reflector waits as asked.
                match f.retry_after {
                    Some(wait) if !f.fatal && throttled < crate::MAX_THROTTLED_RETRIES
                        && wait <= crate::MAX_RETRY_AFTER =>
                    {
                        throttled += 1;
                        retried.note(&f, format_args!(
                            "retrying in {} as the server asks ({throttled} of {})",
                            crate::seconds(wait),
                            crate::MAX_THROTTLED_RETRIES
                        ));
                    }
                    _ => break Err(f.into_error()),
                }
            }
            _ = &mut sync => break Ok(()),
            _ = ticker.tick() => {
                if let Some(p) = &mut progress {
                    let pages = listed.pages.load(Ordering::Relaxed);
                    p.show(informer.progress(), pages, informer.cache().list_keys().len());
                }
            }
        }
    };
    if let Some(p) = progress {
        p.clear();
    }
    let mut objects = informer.cache().list();
    stop(&informer).await;
    synced?;
    objects.sort_by_key(|o| o.key());
    let mut objects: Vec<Item> = objects
        .into_iter()
        .map(|object| Item {
            object,
            types: Arc::clone(&types),
        })
        .collect();
    if !names.is_empty() {
        objects.retain(|o| names.iter().any(|n| n == o.printed_name()));
        for name in names {
            if !objects.iter().any(|o| o.printed_name() == name) {
                return Err(Error::NotFound {
                    resource,
                    name: name.clone(),
                });
            }
        }
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the informer caches of a realistic pod holds well under its JSON, where a decoded
    /// `DynamicObject` holds several times it: the heap the allocator counts live once 2,000
    /// of the simulated server's pods are decoded as the informer's client decodes them.
    #[test]
    fn the_cache_holds_objects_in_less_heap_than_their_json() {
        const PODS: usize = 2000;
        let jsons: Vec<Vec<u8>> = (0..PODS)
            .map(|i| serde_json::to_vec(&kinformer_sim::generate_pod(i, 7)).unwrap())
            .collect();
        let json_bytes: usize = jsons.iter().map(Vec::len).sum();
        // The allocator counts the whole process, and other unit tests run beside this one:
        // the smallest of three rounds is the one they disturbed least.
        let held = (0..3)
            .map(|_| {
                let before = crate::HEAP.current_usage();
                let cached: Vec<Arc<Cached>> = jsons
                    .iter()
                    .map(|j| Arc::new(serde_json::from_slice::<Cached>(j).unwrap()))
                    .collect();
                let held = crate::HEAP.current_usage().saturating_sub(before);
                assert_eq!(cached.len(), PODS);
                held
            })
            .min()
            .unwrap();
        assert!(
            held * 2 < json_bytes,
            "{PODS} cached pods hold {held} bytes of heap for {json_bytes} bytes of JSON"
        );
    }

    #[test]
    fn the_progress_line_counts_objects_rate_and_time_left() {
        let list = ListProgress {
            listing: true,
            lists: 1,
            objects: 1000,
            bytes: Some(5 * 1024 * 1024),
            remaining: Some(3000),
            elapsed: Duration::from_millis(2000),
        };
        assert_eq!(
            Progress::line("pods", &list, 3, 900),
            "listing pods: 1000 of 4000 objects, about 6s left, 500/s, 3 pages, 5.0 MiB, 900 cached, 2.0s"
        );
        let list = ListProgress {
            objects: 7,
            remaining: None,
            bytes: None,
            elapsed: Duration::from_millis(400),
            ..list
        };
        assert_eq!(
            Progress::line("pods", &list, 1, 0),
            "listing pods: 7 objects, 18/s, 1 page, 0 cached, 0.4s"
        );
    }
}
