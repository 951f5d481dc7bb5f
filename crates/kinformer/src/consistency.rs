//! A consistency check you can switch on: the cache compared with the server's list at the
//! cache's own resourceVersion, as client-go's `KUBE_WATCHLIST_INCONSISTENCY_DETECTOR` does
//! after a streaming list, here after sync and then on a period, for any list/watch.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kinformer_core::list_watch::{self, BoxListWatch, ErrorKind};
use kinformer_core::{
    CacheWrite, DeltaQueue, ListParams, Object, ReflectorStore, ResourceVersion,
    ResourceVersionMatch,
};
use kinformer_shared_informer::SharedIndexInformer;

/// The environment variable that switches the check on for every informer the builder makes:
/// `log` reports mismatches; any other non-empty value other than `0` also fails loudly
/// ([`OnMismatch::Panic`]), as client-go's detector does. Checks run after sync and every
/// [`DEFAULT_PERIOD`].
pub const ENV: &str = "KINFORMER_CONSISTENCY_CHECK";

/// How often the check runs after the first one, unless configured.
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(600);

/// The metric counting checks by outcome (`consistent`, `mismatch`, `skipped`, `error`),
/// labelled `informer` and `outcome`.
pub const METRIC: &str = "kinformer_informer_consistency_checks_total";

/// What a mismatch does besides being logged and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OnMismatch {
    /// Log it (at error level) and count it. The default.
    #[default]
    Log,
    /// Also panic in the checking task: [`Informer::shutdown`](crate::Informer::shutdown)
    /// then panics with the report, so a test that turns this on cannot miss it.
    Panic,
}

/// A consistency check's settings ([`InformerBuilder::consistency_check`](crate::InformerBuilder::consistency_check)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsistencyCheck {
    /// How long after one check the next runs; `None`: only once, after sync.
    pub period: Option<Duration>,
    /// What a mismatch does.
    pub on_mismatch: OnMismatch,
}

impl Default for ConsistencyCheck {
    fn default() -> Self {
        Self {
            period: Some(DEFAULT_PERIOD),
            on_mismatch: OnMismatch::Log,
        }
    }
}

impl ConsistencyCheck {
    /// The check [`ENV`] asks for, if it asks for one.
    pub fn from_env() -> Option<Self> {
        Self::from_value(std::env::var(ENV).ok().as_deref())
    }

    fn from_value(value: Option<&str>) -> Option<Self> {
        match value.map(str::trim) {
            None | Some("" | "0") => None,
            Some("log") => Some(Self::default()),
            Some(_) => Some(Self {
                on_mismatch: OnMismatch::Panic,
                ..Self::default()
            }),
        }
    }
}

/// What one check found: the keys the cache lacks, the keys it holds that the server does not,
/// and the keys at another version (`key`, the cache's version, the server's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsistencyReport {
    /// The version both sides were read at.
    pub resource_version: String,
    /// Keys the server lists that the cache lacks.
    pub missing: Vec<String>,
    /// Keys the cache holds that the server does not list.
    pub extra: Vec<String>,
    /// Keys at different versions: the key, the cache's version, the server's.
    pub differing: Vec<(String, String, String)>,
}

impl ConsistencyReport {
    /// `true` when the cache equals the server's list.
    pub fn is_consistent(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty() && self.differing.is_empty()
    }
}

impl std::fmt::Display for ConsistencyReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const SHOWN: usize = 10;
        write!(
            f,
            "at resource version {}: {} missing, {} extra, {} at another version",
            self.resource_version,
            self.missing.len(),
            self.extra.len(),
            self.differing.len()
        )?;
        if !self.missing.is_empty() {
            write!(
                f,
                "; missing {:?}",
                &self.missing[..self.missing.len().min(SHOWN)]
            )?;
        }
        if !self.extra.is_empty() {
            write!(
                f,
                "; extra {:?}",
                &self.extra[..self.extra.len().min(SHOWN)]
            )?;
        }
        if !self.differing.is_empty() {
            write!(
                f,
                "; differing (key, cache, server) {:?}",
                &self.differing[..self.differing.len().min(SHOWN)]
            )?;
        }
        Ok(())
    }
}

/// How the checks have gone so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsistencyStats {
    /// Checks that compared the cache with the server.
    pub checks: u64,
    /// Of those, the ones that found a difference.
    pub mismatches: u64,
    /// Checks skipped: the server no longer had the cache's version (410), or the queue does
    /// not give an exact version (the classic one).
    pub skipped: u64,
    /// Checks whose list failed otherwise.
    pub errors: u64,
    /// The last mismatch found.
    pub last_mismatch: Option<ConsistencyReport>,
}

/// Runs consistency checks of one informer against its list/watch. The facade's builder makes
/// one when asked ([`InformerBuilder::consistency_check`](crate::InformerBuilder::consistency_check),
/// or [`ENV`]); build one yourself for an informer wired by hand.
pub struct ConsistencyChecker<K, Q, C> {
    informer: Arc<SharedIndexInformer<K, Q, C>>,
    source: BoxListWatch<K>,
    params: ListParams,
    name: String,
    stats: Mutex<ConsistencyStats>,
}

impl<K, Q, C> std::fmt::Debug for ConsistencyChecker<K, Q, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsistencyChecker")
            .field("informer", &self.name)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<K, Q, C> ConsistencyChecker<K, Q, C> {
    /// The stats so far.
    pub fn stats(&self) -> ConsistencyStats {
        self.stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl<K, Q, C> ConsistencyChecker<K, Q, C>
where
    K: Object + Send + Sync + 'static,
    Q: DeltaQueue<K> + ReflectorStore<K> + 'static,
    C: CacheWrite<K> + 'static,
{
    /// A checker of `informer` against `source`, listing with the selectors of `params` (the
    /// informer's own: the cache holds only what they select).
    pub fn new(
        informer: Arc<SharedIndexInformer<K, Q, C>>,
        source: BoxListWatch<K>,
        label_selector: Option<String>,
        field_selector: Option<String>,
        name: &str,
    ) -> Self {
        Self {
            informer,
            source,
            params: ListParams {
                label_selector,
                field_selector,
                ..ListParams::default()
            },
            name: name.to_owned(),
            stats: Mutex::new(ConsistencyStats::default()),
        }
    }

    /// One check now: lists the server at the cache's exact version and compares keys and
    /// resourceVersions, after the informer's transform. `None` when skipped or the list
    /// failed (counted, and logged).
    pub async fn check(&self) -> Option<ConsistencyReport> {
        let Some((rv, cached)) = self.informer.snapshot() else {
            tracing::info!(informer = %self.name, "consistency check skipped: the queue gives no exact cache version");
            self.count("skipped", |s| s.skipped += 1);
            return None;
        };
        let params = ListParams {
            resource_version: Some(rv.to_string()),
            resource_version_match: Some(ResourceVersionMatch::Exact),
            ..self.params.clone()
        };
        let listed = match list_watch::list_all(
            &self.source,
            &params,
            list_watch::DEFAULT_PAGE_SIZE,
        )
        .await
        {
            Ok(list) => list,
            Err(e) if e.kind() == ErrorKind::Relist => {
                tracing::info!(informer = %self.name, resource_version = %rv, "consistency check skipped: the server no longer has the cache's version");
                self.count("skipped", |s| s.skipped += 1);
                return None;
            }
            Err(e) => {
                tracing::warn!(informer = %self.name, error = %e, "consistency check: the list failed");
                self.count("error", |s| s.errors += 1);
                return None;
            }
        };
        let transform = self.informer.transform();
        let server: BTreeMap<String, String> = listed
            .items
            .into_iter()
            .map(|o| match &transform {
                Some(t) => t(o),
                None => o,
            })
            .map(|o| (o.key().to_string(), version(&*o)))
            .collect();
        let cache: BTreeMap<String, String> = cached
            .iter()
            .map(|o| (o.key().to_string(), version(&**o)))
            .collect();
        let report = compare(&rv, &cache, &server);
        if report.is_consistent() {
            self.count("consistent", |s| s.checks += 1);
        } else {
            tracing::error!(informer = %self.name, %report, "the cache differs from the server");
            self.count("mismatch", |s| {
                s.checks += 1;
                s.mismatches += 1;
                s.last_mismatch = Some(report.clone());
            });
        }
        Some(report)
    }

    /// Checks once the informer has synced, then every `check.period`, until the informer
    /// stops. Under [`OnMismatch::Panic`], panics at the first mismatch.
    pub async fn run(&self, check: &ConsistencyCheck) {
        if !self.informer.wait_synced().await {
            return;
        }
        loop {
            if let Some(report) = self.check().await
                && !report.is_consistent()
                && check.on_mismatch == OnMismatch::Panic
            {
                panic!(
                    "informer {:?}: the cache differs from the server {report}",
                    self.name
                );
            }
            let Some(period) = check.period else {
                return;
            };
            tokio::time::sleep(period).await;
            if self.informer.is_stopped() {
                return;
            }
        }
    }

    fn count(&self, outcome: &'static str, f: impl FnOnce(&mut ConsistencyStats)) {
        metrics::counter!(
            METRIC,
            "informer" => self.name.clone(),
            "resource" => self.informer.resource().to_owned(),
            "outcome" => outcome
        )
        .increment(1);
        f(&mut self.stats.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

fn version<K: Object + ?Sized>(o: &K) -> String {
    o.resource_version().unwrap_or_default().to_owned()
}

fn compare(
    rv: &ResourceVersion,
    cache: &BTreeMap<String, String>,
    server: &BTreeMap<String, String>,
) -> ConsistencyReport {
    let mut report = ConsistencyReport {
        resource_version: rv.to_string(),
        ..ConsistencyReport::default()
    };
    for (key, server_rv) in server {
        match cache.get(key) {
            None => report.missing.push(key.clone()),
            Some(cache_rv) if cache_rv != server_rv => {
                report
                    .differing
                    .push((key.clone(), cache_rv.clone(), server_rv.clone()));
            }
            Some(_) => {}
        }
    }
    report.extra = cache
        .keys()
        .filter(|k| !server.contains_key(*k))
        .cloned()
        .collect();
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_switches_it_on_and_says_how_loud() {
        assert_eq!(ConsistencyCheck::from_value(None), None);
        assert_eq!(ConsistencyCheck::from_value(Some("0")), None);
        assert_eq!(ConsistencyCheck::from_value(Some(" ")), None);
        assert_eq!(
            ConsistencyCheck::from_value(Some("log"))
                .unwrap()
                .on_mismatch,
            OnMismatch::Log
        );
        assert_eq!(
            ConsistencyCheck::from_value(Some("1")).unwrap().on_mismatch,
            OnMismatch::Panic
        );
    }

    #[test]
    fn a_report_names_missing_extra_and_differing_keys() {
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        };
        let cache = map(&[("ns/a", "1"), ("ns/b", "2"), ("ns/x", "3")]);
        let server = map(&[("ns/a", "1"), ("ns/b", "5"), ("ns/c", "4")]);
        let report = compare(&"9".into(), &cache, &server);
        assert_eq!(report.missing, ["ns/c"]);
        assert_eq!(report.extra, ["ns/x"]);
        assert_eq!(
            report.differing,
            [("ns/b".to_owned(), "2".to_owned(), "5".to_owned())]
        );
        assert!(!report.is_consistent());
        assert_eq!(
            report.to_string(),
            "at resource version 9: 1 missing, 1 extra, 1 at another version; missing [\"ns/c\"]; extra [\"ns/x\"]; differing (key, cache, server) [(\"ns/b\", \"2\", \"5\")]"
        );
        assert!(compare(&"9".into(), &cache, &cache).is_consistent());
    }
}
