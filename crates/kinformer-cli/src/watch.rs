//! `get` and `watch`: list once, or list then watch and print every change.
//!
//! `watch` keeps the keys and resource versions it has printed, so that a relist (after a 410)
//! prints exactly the difference: objects that appeared, changed, or vanished while the watch was
//! down. This is a small interim loop; the reflector layer will take its place.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::time::Duration;

use futures_util::StreamExt;
use kinformer_core::list_watch::{DEFAULT_PAGE_SIZE, ErrorKind, ListWatch, list_all};
use kinformer_core::{
    ListParams, Object, ObjectKey, ObjectList, PartialObjectMetadata, WatchEvent, WatchParams,
};

use crate::Error;

/// The server ends each watch after this long; the loop then watches again from where it was.
const WATCH_TIMEOUT_SECONDS: u32 = 290;

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

/// Waits before retrying; doubles up to ten seconds, or as long as the server asked.
async fn back_off(attempt: &mut u32, asked: Option<Duration>) {
    let exp = Duration::from_millis(200) * 2u32.saturating_pow((*attempt).min(6));
    let wait = asked.unwrap_or(exp).min(Duration::from_secs(10));
    *attempt += 1;
    tracing::warn!(?wait, "retrying");
    tokio::time::sleep(wait).await;
}

/// Lists, prints the initial objects as `ADDED`, then watches and prints every change, until
/// `max_events` lines have been printed (or forever).
pub(crate) async fn watch(
    api: &dyn ListWatch<PartialObjectMetadata>,
    params: &ListParams,
    max_events: Option<u64>,
    out: &mut impl Write,
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
    let mut attempt = 0;
    'relist: loop {
        let list = match list_all(api, params, DEFAULT_PAGE_SIZE).await {
            Ok(list) => list,
            Err(e) if e.kind() != ErrorKind::Fatal => {
                back_off(&mut attempt, e.retry_after()).await;
                continue 'relist;
            }
            Err(e) => return Err(e.into()),
        };
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
            let mut events = match api.watch(&wp).await {
                Ok(s) => s,
                Err(e) if e.kind() == ErrorKind::Relist => continue 'relist,
                Err(e) if e.kind() != ErrorKind::Fatal => {
                    back_off(&mut attempt, e.retry_after()).await;
                    continue 'watch;
                }
                Err(e) => return Err(e.into()),
            };
            while let Some(event) = events.next().await {
                let (kind, obj) = match event {
                    Ok(WatchEvent::Added(o)) => ("ADDED", o),
                    Ok(WatchEvent::Modified(o)) => ("MODIFIED", o),
                    Ok(WatchEvent::Deleted(o)) => ("DELETED", o),
                    Ok(WatchEvent::Bookmark(b)) => {
                        rv = b.resource_version.to_string();
                        continue;
                    }
                    Ok(WatchEvent::Error(status)) if status.is_gone() => continue 'relist,
                    Ok(WatchEvent::Error(status)) => {
                        tracing::warn!(code = status.code, reason = %status.reason, message = %status.message, "watch ended with an error");
                        back_off(&mut attempt, None).await;
                        continue 'watch;
                    }
                    Err(e) if e.kind() == ErrorKind::Relist => continue 'relist,
                    Err(e) if e.kind() != ErrorKind::Fatal => {
                        tracing::info!(error = %e, "watch interrupted; resuming");
                        back_off(&mut attempt, e.retry_after()).await;
                        continue 'watch;
                    }
                    Err(e) => return Err(e.into()),
                };
                attempt = 0;
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
            // The server closed the stream (its timeout, say): watch again from `rv`.
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
