//! `get` and `watch`: list once, or list then watch and print every change.
//!
//! `watch` keeps the keys and resource versions it has printed, so that a relist (after a 410)
//! prints exactly the difference: objects that appeared, changed, or vanished while the watch was
//! down. This is a small interim loop; the reflector layer will take its place.
//!
//! How it treats failures, after client-go's reflector:
//! - an error retrying cannot fix (a bad request, a refused or failing credential, 403, 404, a bad
//!   TLS or kubeconfig setting) ends the command with the cause;
//! - any other failure is retried after an exponential backoff with jitter, which resets only after
//!   two minutes without a failure, not on any good event; each attempt is logged with its cause
//!   at `debug`, and the first of an episode at `warn`;
//! - a 410 (the watch's version was compacted away) relists, after the same backoff, so an endless
//!   410 cannot turn into a relist loop;
//! - a watch that the server closes within a second is a failure too (back off; relist if it
//!   delivered nothing, as client-go does), so a server that closes every watch at once is not
//!   hammered.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::io::Write;
use std::time::Duration;

use futures_util::StreamExt;
use kinformer_core::list_watch::{self, DEFAULT_PAGE_SIZE, ErrorKind, ListWatch, list_all};
use kinformer_core::{
    ListParams, Object, ObjectKey, ObjectList, PartialObjectMetadata, Status, WatchEvent,
    WatchParams,
};
use tokio::time::Instant;

use crate::Error;

/// The server ends each watch after this long; the loop then watches again from where it was.
const WATCH_TIMEOUT_SECONDS: u32 = 290;

/// A watch closed sooner than this counts as a failure (client-go's "very short watch").
const SHORT_WATCH: Duration = Duration::from_secs(1);

/// Lists once and prints one line per object, sorted by key.
pub(crate) async fn get(
    api: &dyn ListWatch<PartialObjectMetadata>,
    params: &ListParams,
    out: &mut impl Write,
) -> Result<(), Error> {
    let list = list_all(api, params, DEFAULT_PAGE_SIZE).await?;
    let mut rows: Vec<(ObjectKey, &str)> = list
        .items
        .iter()
        .map(|o| (o.key(), o.resource_version().unwrap_or("")))
        .collect();
    rows.sort();
    for (key, rv) in rows {
        writeln!(out, "{key}\trv={rv}")?;
    }
    writeln!(
        out,
        "# {} objects at resourceVersion {}",
        list.items.len(),
        list.resource_version
    )?;
    Ok(())
}

/// What to do about a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Back off, then list again (the resource version is gone).
    Relist,
    /// Back off, then watch again from the last resource version (the stream broke).
    Resume,
    /// Back off (at least as long as the server asked), then try the same step again.
    Retry(Option<Duration>),
    /// Retrying cannot fix it: stop with the cause.
    Fatal,
}

/// What the loop does about a list or watch error: what its kind says (a credential that cannot
/// be obtained, such as a failing exec plugin, is `Fatal` already).
fn action(e: &list_watch::Error) -> Action {
    match e.kind() {
        ErrorKind::Relist => Action::Relist,
        ErrorKind::Resume => Action::Resume,
        ErrorKind::Retry => Action::Retry(e.retry_after()),
        _ => Action::Fatal,
    }
}

/// What the loop does about an `ERROR` event inside a watch stream.
fn status_action(status: &Status) -> Action {
    match status.code {
        410 => Action::Relist,
        429 | 500.. | 0 => Action::Retry(None),
        _ if status.is_gone() => Action::Relist,
        _ => Action::Fatal,
    }
}

/// The retry state: an exponential backoff with jitter that resets after a period of health, and
/// the cause of the current retry episode (for the log and for Ctrl-C).
#[derive(Debug)]
struct Backoff {
    /// The next base wait (before jitter).
    next: Duration,
    /// When the last backoff began; the backoff resets when this is long ago.
    last_failure: Option<Instant>,
    /// The cause of the failure being retried, until something succeeds.
    episode: Option<String>,
    /// State of the jitter's random numbers.
    rng: u64,
}

impl Backoff {
    /// The first wait (client-go's reflector: 800 ms).
    const INITIAL: Duration = Duration::from_millis(800);
    /// The longest base wait (client-go's reflector: 30 s).
    const MAX: Duration = Duration::from_secs(30);
    /// A failure after this long without one starts again from [`Self::INITIAL`] (client-go: 2 min).
    const RESET_AFTER: Duration = Duration::from_secs(120);

    fn new(seed: u64) -> Self {
        Self {
            next: Self::INITIAL,
            last_failure: None,
            episode: None,
            rng: seed,
        }
    }

    /// Records a failure; returns how long to wait before trying again: the base wait plus up to
    /// as much again of jitter, and never less than the server asked.
    fn failed(&mut self, cause: &str, asked: Option<Duration>, now: Instant) -> Duration {
        if self
            .last_failure
            .is_some_and(|t| now.duration_since(t) >= Self::RESET_AFTER)
        {
            self.next = Self::INITIAL;
        }
        self.last_failure = Some(now);
        let base = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        let jitter = base.mul_f64(self.unit());
        let wait = (base + jitter).max(asked.unwrap_or_default());
        if self.episode.is_none() {
            tracing::warn!(cause, ?wait, "retrying");
        } else {
            tracing::debug!(cause, ?wait, "retrying");
        }
        self.episode = Some(cause.to_owned());
        wait
    }

    /// Records progress: the episode (not the backoff) ends.
    fn progressed(&mut self) {
        if let Some(cause) = self.episode.take() {
            tracing::info!(after = %cause, "recovered");
        }
    }

    /// A number in `[0, 1)` (splitmix64).
    fn unit(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Prints events and counts them against the optional limit.
struct Printer<'a, W> {
    out: &'a mut W,
    printed: u64,
    max: Option<u64>,
}

impl<W: Write> Printer<'_, W> {
    /// Prints one event; `Ok(true)` once the limit is reached.
    fn event(&mut self, kind: &str, key: &ObjectKey, rv: &str) -> Result<bool, Error> {
        writeln!(self.out, "{kind:<9}{key}\trv={rv}")?;
        self.out.flush()?;
        self.printed += 1;
        Ok(self.max.is_some_and(|m| self.printed >= m))
    }
}

/// Lists, prints the initial objects as `ADDED`, then watches and prints every change, until
/// `max_events` lines have been printed, a failure retrying cannot fix, or `interrupt` completes.
/// An interrupt while a failure is being retried is reported as that failure.
pub(crate) async fn watch(
    api: &dyn ListWatch<PartialObjectMetadata>,
    params: &ListParams,
    max_events: Option<u64>,
    out: &mut impl Write,
    interrupt: impl Future<Output = std::io::Result<()>>,
) -> Result<(), Error> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id());
    let backoff = RefCell::new(Backoff::new(seed));
    tokio::select! {
        r = watch_loop(api, params, max_events, out, &backoff) => r,
        r = interrupt => {
            r.map_err(Error::Signal)?;
            match backoff.borrow_mut().episode.take() {
                Some(cause) => Err(Error::InterruptedWhileRetrying(cause)),
                None => Ok(()),
            }
        }
    }
}

/// Waits as the backoff says after a failure.
async fn back_off(backoff: &RefCell<Backoff>, cause: &str, asked: Option<Duration>) {
    let wait = backoff.borrow_mut().failed(cause, asked, Instant::now());
    tokio::time::sleep(wait).await;
}

/// Where the loop goes on after a failure it retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// List again.
    Relist,
    /// Watch again from the last resourceVersion.
    Watch,
}

/// After a failure: `None` when retrying cannot fix it; else backs off (as long as the server
/// asked, when it did) and says where to go on.
async fn recover(backoff: &RefCell<Backoff>, action: Action, cause: &str) -> Option<Next> {
    let (next, asked) = match action {
        Action::Fatal => return None,
        Action::Relist => (Next::Relist, None),
        Action::Resume => (Next::Watch, None),
        Action::Retry(asked) => (Next::Watch, asked),
    };
    back_off(backoff, cause, asked).await;
    Some(next)
}

async fn watch_loop(
    api: &dyn ListWatch<PartialObjectMetadata>,
    params: &ListParams,
    max_events: Option<u64>,
    out: &mut impl Write,
    backoff: &RefCell<Backoff>,
) -> Result<(), Error> {
    let mut printer = Printer {
        out,
        printed: 0,
        max: max_events,
    };
    if max_events == Some(0) {
        return Ok(());
    }
    let mut known: HashMap<ObjectKey, String> = HashMap::new();
    'relist: loop {
        let list = match list_all(api, params, DEFAULT_PAGE_SIZE).await {
            Ok(list) => list,
            // Whatever the failure, the list is what is tried again.
            Err(e) => match recover(backoff, action(&e), &format!("list: {e}")).await {
                None => return Err(e.into()),
                Some(_) => continue 'relist,
            },
        };
        // A list alone does not end a retry episode: the watch after it may fail the same way.
        if apply_list(&mut known, &list, &mut printer)? {
            return Ok(());
        }
        let mut rv = list.resource_version.to_string();
        'watch: loop {
            let wp = WatchParams {
                label_selector: params.label_selector.clone(),
                field_selector: params.field_selector.clone(),
                resource_version: Some(rv.clone()),
                timeout_seconds: Some(WATCH_TIMEOUT_SECONDS),
                allow_watch_bookmarks: true,
                ..WatchParams::default()
            };
            let opened = Instant::now();
            let mut events = match api.watch(&wp).await {
                Ok(s) => s,
                Err(e) => match recover(backoff, action(&e), &format!("watch: {e}")).await {
                    None => return Err(e.into()),
                    Some(Next::Relist) => continue 'relist,
                    Some(Next::Watch) => continue 'watch,
                },
            };
            let mut delivered = 0u64;
            // A watch that stays open past the short-watch limit is healthy: the episode ends.
            let healthy_at = opened + SHORT_WATCH;
            loop {
                let next = if backoff.borrow().episode.is_some() && Instant::now() < healthy_at {
                    match tokio::time::timeout_at(healthy_at, events.next()).await {
                        Ok(next) => next,
                        Err(_) => {
                            backoff.borrow_mut().progressed();
                            continue;
                        }
                    }
                } else {
                    events.next().await
                };
                let Some(event) = next else { break };
                let (kind, obj) = match event {
                    Ok(WatchEvent::Added(o)) => ("ADDED", o),
                    Ok(WatchEvent::Modified(o)) => ("MODIFIED", o),
                    Ok(WatchEvent::Deleted(o)) => ("DELETED", o),
                    Ok(WatchEvent::Bookmark(b)) => {
                        delivered += 1;
                        rv = b.resource_version.to_string();
                        continue;
                    }
                    Ok(WatchEvent::Error(status)) => {
                        let cause = format!(
                            "watch ended with {} {}: {}",
                            status.code, status.reason, status.message
                        );
                        match recover(backoff, status_action(&status), &cause).await {
                            None => {
                                return Err(list_watch::Error::new(ErrorKind::Fatal, cause).into());
                            }
                            Some(Next::Relist) => continue 'relist,
                            Some(Next::Watch) => continue 'watch,
                        }
                    }
                    Err(e) => match recover(backoff, action(&e), &format!("watch: {e}")).await {
                        None => return Err(e.into()),
                        Some(Next::Relist) => continue 'relist,
                        Some(Next::Watch) => continue 'watch,
                    },
                };
                delivered += 1;
                backoff.borrow_mut().progressed();
                let key = obj.key();
                let obj_rv = obj.resource_version().unwrap_or("").to_owned();
                if kind == "DELETED" {
                    known.remove(&key);
                } else {
                    known.insert(key.clone(), obj_rv.clone());
                }
                if !obj_rv.is_empty() {
                    rv.clone_from(&obj_rv);
                }
                if printer.event(kind, &key, &obj_rv)? {
                    return Ok(());
                }
            }
            // The server closed the stream. After its timeout, watch again from `rv` at once; a
            // stream closed within a second is a failure: back off, and relist if it delivered
            // nothing (the server may not be able to serve watches from this version).
            if opened.elapsed() < SHORT_WATCH {
                let cause = format!(
                    "the server closed the watch within a second, after {delivered} events"
                );
                back_off(backoff, &cause, None).await;
                if delivered == 0 {
                    continue 'relist;
                }
            }
        }
    }
}

/// Prints what a (re)list changes relative to what was printed before; `Ok(true)` once the limit
/// is reached.
fn apply_list<W: Write>(
    known: &mut HashMap<ObjectKey, String>,
    list: &ObjectList<PartialObjectMetadata>,
    printer: &mut Printer<'_, W>,
) -> Result<bool, Error> {
    let mut listed = HashSet::with_capacity(list.items.len());
    for obj in &list.items {
        let key = obj.key();
        let rv = obj.resource_version().unwrap_or("").to_owned();
        listed.insert(key.clone());
        let kind = match known.insert(key.clone(), rv.clone()) {
            None => "ADDED",
            Some(old) if old != rv => "MODIFIED",
            Some(_) => continue,
        };
        if printer.event(kind, &key, &rv)? {
            return Ok(true);
        }
    }
    // Deleted while no watch was open: the last version printed is all that is known.
    let mut gone: Vec<ObjectKey> = known
        .keys()
        .filter(|k| !listed.contains(*k))
        .cloned()
        .collect();
    gone.sort();
    for key in gone {
        let rv = known.remove(&key).unwrap_or_default();
        if printer.event("DELETED", &key, &rv)? {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_and_resets_only_after_two_minutes_of_health() {
        let start = Instant::now();
        let mut b = Backoff::new(7);
        let mut t = start;
        for i in 0..8 {
            let wait = b.failed("x", None, t);
            let base = (Backoff::INITIAL * 2u32.pow(i)).min(Backoff::MAX);
            assert!(wait >= base && wait < base * 2, "attempt {i}: {wait:?}");
            t += wait;
        }
        // A good event does not reset it; only a failure two minutes after the last one does.
        let last = t - Duration::from_secs(1);
        b.failed("x", None, last);
        b.progressed();
        let wait = b.failed("x", None, last + Duration::from_secs(119));
        assert!(wait >= Backoff::MAX, "{wait:?}");
        let wait = b.failed("x", None, last + Duration::from_secs(119 + 121));
        assert!(wait < Backoff::INITIAL * 2, "{wait:?}");
        // The server's Retry-After is a floor.
        let mut b = Backoff::new(1);
        let wait = b.failed("x", Some(Duration::from_secs(5)), start);
        assert!(wait >= Duration::from_secs(5));
    }

    #[test]
    fn only_errors_retrying_can_fix_are_retried() {
        use kinformer_client::Error as E;
        let m = || "m".to_owned();
        let api = |code: u16| E::Api {
            status: Box::new(Status {
                code,
                ..Status::default()
            }),
        };
        let cases: Vec<(E, Action)> = vec![
            (E::Gone { message: m() }, Action::Relist),
            (
                E::Throttled {
                    retry_after: Some(Duration::from_secs(3)),
                    message: m(),
                },
                Action::Retry(Some(Duration::from_secs(3))),
            ),
            (
                E::ServerError {
                    code: 500,
                    retry_after: None,
                    message: m(),
                },
                Action::Retry(None),
            ),
            (
                E::Connect {
                    source: "refused".into(),
                },
                Action::Retry(None),
            ),
            (
                E::Interrupted {
                    events: 1,
                    reason: m(),
                },
                Action::Resume,
            ),
            (E::Unauthorized { message: m() }, Action::Fatal),
            (E::Forbidden { message: m() }, Action::Fatal),
            (E::NotFound { message: m() }, Action::Fatal),
            (api(400), Action::Fatal),
            (api(422), Action::Fatal),
            (E::Tls { message: m() }, Action::Fatal),
            (E::Auth { message: m() }, Action::Fatal),
            (
                E::Config {
                    path: None,
                    field: "server".into(),
                    message: m(),
                },
                Action::Fatal,
            ),
        ];
        for (e, want) in cases {
            let shown = e.to_string();
            assert_eq!(action(&list_watch::Error::from(e)), want, "{shown}");
        }
        for (code, want) in [
            (410, Action::Relist),
            (500, Action::Retry(None)),
            (429, Action::Retry(None)),
            (403, Action::Fatal),
            (400, Action::Fatal),
        ] {
            let status = Status {
                code,
                ..Status::default()
            };
            assert_eq!(status_action(&status), want, "{code}");
        }
    }
}
