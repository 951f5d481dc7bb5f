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

use std::io::{IsTerminal, Write};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use kinformer::core::Notification;
use kinformer::core::list_watch::{self, ErrorKind};
use kinformer::prelude::*;
use kinformer::reflector::Phase;
use tokio::sync::mpsc;

use crate::print::{self, Event, EventType, Style};
use crate::{Class, Error, Signal};

/// The source, counting the list pages and objects received, for the progress line.
struct CountedLists<L> {
    inner: L,
    listed: Arc<Listed>,
}

/// List pages and objects received so far.
#[derive(Debug, Default)]
pub(crate) struct Listed {
    pages: AtomicU64,
    objects: AtomicU64,
}

#[async_trait::async_trait]
impl<K, L: ListWatch<K>> ListWatch<K> for CountedLists<L> {
    async fn list(
        &self,
        params: &kinformer::core::ListParams,
    ) -> Result<kinformer::core::ObjectList<K>, list_watch::Error> {
        let page = self.inner.list(params).await?;
        self.listed.pages.fetch_add(1, Ordering::Relaxed);
        self.listed
            .objects
            .fetch_add(page.items.len() as u64, Ordering::Relaxed);
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
}

impl Failure {
    /// A failure: its line, whether retrying can fix it, and its class.
    pub(crate) fn new(cause: String, fatal: bool, class: Class) -> Self {
        Self {
            cause,
            fatal,
            class,
        }
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

/// How long a clean shutdown of the informer may take before the tool exits anyway.
const SHUTDOWN_BOUND: Duration = Duration::from_secs(5);

/// What a run of `watch` or `get` needs.
#[derive(Debug)]
pub(crate) struct Run {
    /// The source.
    pub(crate) api: Api<DynamicObject>,
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
}

/// Builds the informer; returns it with the failures its reflector reports and the style.
pub(crate) fn build(
    run: Run,
) -> Result<
    (
        Informer<DynamicObject>,
        mpsc::UnboundedReceiver<Failure>,
        Style,
    ),
    Error,
> {
    let (failures_tx, failures) = mpsc::unbounded_channel();
    let config = kinformer::reflector::Config {
        name: run.name,
        label_selector: run.label_selector,
        field_selector: run.field_selector,
        // Lists, as kubectl does: the progress line counts the list's pages as they arrive, and
        // `get` prints a list.
        streaming_list: kinformer::reflector::StreamingList::Off,
        ..kinformer::reflector::Config::default()
    }
    .with_watch_error_handler(move |info| {
        let phase = match info.phase {
            Phase::List => "list",
            _ => "watch",
        };
        let _ = failures_tx.send(Failure::new(
            format!("{phase}: {}", info.error),
            info.error.kind() == ErrorKind::Fatal,
            Class::of_list_watch(info.error),
        ));
    });
    let informer = Informer::<DynamicObject>::builder()
        .list_watch(CountedLists {
            inner: run.api,
            listed: run.listed,
        })
        .reflector(config)
        .build()?;
    Ok((informer, failures, run.style))
}

/// Stops the informer, bounded in time.
pub(crate) async fn stop(informer: &Informer<DynamicObject>) {
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
    let (informer, mut failures, style) = build(run)?;
    let mut events = informer.event_stream()?;
    informer.start();
    let mut interrupt = pin!(interrupt);
    let mut printed = 0u64;
    // The failure being retried, if any: what Ctrl-C reports.
    let mut episode: Option<Failure> = retrying;
    let result = loop {
        tokio::select! {
            biased;
            signal = &mut interrupt => {
                // A failure reported just before the signal is still being retried.
                while let Ok(f) = failures.try_recv() {
                    episode = Some(f);
                }
                break Err(match episode.take() {
                    Some(f) => f.interrupted(),
                    None => Error::Interrupted(signal),
                });
            }
            Some(f) = failures.recv() => {
                if f.fatal {
                    break Err(f.into_error());
                }
                episode = Some(f);
            }
            n = events.next() => {
                let Some(n) = n else { break Ok(()) };
                episode = None;
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
                    let objects: Vec<&DynamicObject> = batch.iter().map(object_of).collect();
                    let now = k8s_openapi::jiff::Timestamp::now();
                    if let Err(e) = print::watched(out, &style, &objects, printed == 0, now)
                        .and_then(|()| out.flush())
                    {
                        break Err(e.into());
                    }
                    printed += batch.len() as u64;
                } else {
                    if let Err(e) = print_notification(out, &style, &n) {
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

/// The object a notification carries: the new state, or a deleted object's last known one.
fn object_of(n: &Notification<DynamicObject>) -> &DynamicObject {
    match n {
        Notification::Added { object, .. } => object,
        Notification::Updated { new, .. } => new,
        Notification::Deleted { object } => match object {
            DeltaObject::Object(o) => o,
            DeltaObject::DeletedFinalStateUnknown(t) => &t.last_known,
        },
    }
}

/// Prints one notification as an event line.
fn print_notification(
    out: &mut impl Write,
    style: &Style,
    n: &Notification<DynamicObject>,
) -> std::io::Result<()> {
    let e = match n {
        Notification::Added { object, .. } => Event {
            kind: EventType::Added,
            object,
            tombstone: false,
        },
        Notification::Updated { new, .. } => Event {
            kind: EventType::Modified,
            object: new,
            tombstone: false,
        },
        Notification::Deleted { object } => match object {
            DeltaObject::Object(o) => Event {
                kind: EventType::Deleted,
                object: o,
                tombstone: false,
            },
            DeltaObject::DeletedFinalStateUnknown(t) => Event {
                kind: EventType::Deleted,
                object: &t.last_known,
                tombstone: true,
            },
        },
    };
    print::event(out, style, &e)?;
    out.flush()
}

/// How often the progress line is redrawn.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// A one-line progress indicator on stderr, redrawn in place: objects received and time spent.
/// Shown only on a terminal, and only once the list has taken longer than [`Self::AFTER`], so a
/// quick list draws nothing.
#[derive(Debug)]
struct Progress {
    resource: String,
    started: Instant,
    drawn: bool,
}

impl Progress {
    const AFTER: Duration = Duration::from_millis(300);

    fn new(resource: &str) -> Self {
        Self {
            resource: resource.to_owned(),
            started: Instant::now(),
            drawn: false,
        }
    }

    fn line(resource: &str, objects: u64, pages: u64, cached: usize, elapsed: Duration) -> String {
        format!(
            "kinformer: listing {resource}: {objects} objects in {pages} {}, {cached} cached, {:.1}s",
            if pages == 1 { "page" } else { "pages" },
            elapsed.as_secs_f64()
        )
    }

    fn show(&mut self, listed: &Listed, cached: usize) {
        let objects = listed.objects.load(Ordering::Relaxed);
        let pages = listed.pages.load(Ordering::Relaxed);
        let elapsed = self.started.elapsed();
        if elapsed < Self::AFTER {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[2K{}",
            Self::line(&self.resource, objects, pages, cached, elapsed)
        );
        let _ = err.flush();
        self.drawn = true;
    }

    fn clear(self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
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
) -> Result<Vec<Arc<DynamicObject>>, Error> {
    let resource = run.api.resource().plural.clone();
    let listed = Arc::clone(&run.listed);
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
    let synced = loop {
        tokio::select! {
            signal = &mut interrupt => break Err(Error::Interrupted(signal)),
            Some(f) = failures.recv() => break Err(f.into_error()),
            _ = &mut sync => break Ok(()),
            _ = ticker.tick() => {
                if let Some(p) = &mut progress {
                    p.show(&listed, informer.cache().list_keys().len());
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
    if !names.is_empty() {
        objects.retain(|o| names.iter().any(|n| n == o.name()));
        for name in names {
            if !objects.iter().any(|o| o.name() == name) {
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

    #[test]
    fn the_progress_line_counts_objects_and_time() {
        assert_eq!(
            Progress::line("pods", 1234, 3, 1000, Duration::from_millis(2150)),
            "kinformer: listing pods: 1234 objects in 3 pages, 1000 cached, 2.1s"
        );
        assert_eq!(
            Progress::line("pods", 7, 1, 0, Duration::from_millis(400)),
            "kinformer: listing pods: 7 objects in 1 page, 0 cached, 0.4s"
        );
    }
}
