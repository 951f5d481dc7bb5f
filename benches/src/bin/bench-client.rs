//! One informer client of `cargo xtask bench`, alone in its process so that the OS measures it
//! alone: `bench-client <client> --url URL --kind KIND --pods N --events E --timeout-ms T`.
//!
//! Every client runs as its users run it, and its handler counts every event and reads one field
//! of the object (`status.phase`, or the `app` label where only metadata is decoded), so that no
//! client skips decoding what a real handler needs. It prints `synced <ms>` once its cache holds
//! the N pods and its handler has seen them, `steady` before a forced relist, and
//! `result <json>` (`ok`, the counts, `events_per_s`, scenario figures under `extra`); then it
//! waits for its stdin to close, so that the bench can read its peak RSS and CPU time from
//! `/proc`. A client is `ok` only if it saw exactly the expected events and never relisted
//! (`relist`: exactly once).

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures_util::TryStreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kinformer::prelude::*;
use kinformer_core::list_watch::{self, WatchStream};
use kinformer_core::{ListParams, ObjectList, WatchParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The handler that is slow in `fanout`: this long per event after the sync.
const SLOW_HANDLER: Duration = Duration::from_micros(100);
/// Handlers in `fanout`; the last one is slow.
const FANOUT: usize = 10;
/// After the expected events, how long to watch for any unexpected ones.
const GRACE: Duration = Duration::from_millis(200);

#[derive(Debug, Clone)]
struct Args {
    client: String,
    url: String,
    kind: String,
    pods: u64,
    events: u64,
    timeout: Duration,
}

fn parse_args() -> Result<Args, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| -> Result<String, String> {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
            .ok_or_else(|| format!("{name} is required"))
    };
    let number = |name: &str| -> Result<u64, String> {
        value(name)?
            .parse()
            .map_err(|_| format!("{name} takes a number"))
    };
    Ok(Args {
        client: args.first().cloned().ok_or("the client name is required")?,
        url: value("--url")?,
        kind: value("--kind")?,
        pods: number("--pods")?,
        events: number("--events")?,
        // Leave the bench a tenth of its time to read the result of a client that gave up.
        timeout: Duration::from_millis(number("--timeout-ms")?).mul_f64(0.9),
    })
}

/// What one handler saw.
#[derive(Debug)]
struct Tally {
    /// Objects of the initial list.
    initial: AtomicU64,
    /// Events after the sync.
    events: AtomicU64,
    /// Sum of the lengths of the field read, so that the read is not optimised away.
    read: AtomicUsize,
    /// The event count at which the rate's clock starts (a tenth in, past any warm-up).
    warm: u64,
    /// The expected event count, at which the clock stops.
    expected: u64,
    warm_at: OnceLock<Instant>,
    done_at: OnceLock<Instant>,
    /// Sleeps this long on every event after the sync.
    slow: Option<Duration>,
}

impl Tally {
    fn new(expected: u64, slow: Option<Duration>) -> Arc<Self> {
        Arc::new(Tally {
            initial: AtomicU64::new(0),
            events: AtomicU64::new(0),
            read: AtomicUsize::new(0),
            warm: (expected / 10).max(1),
            expected,
            warm_at: OnceLock::new(),
            done_at: OnceLock::new(),
            slow,
        })
    }

    fn initial(&self, field: usize) {
        self.read.fetch_add(field, Ordering::Relaxed);
        self.initial.fetch_add(1, Ordering::Relaxed);
    }

    fn event(&self, field: usize) {
        self.read.fetch_add(field, Ordering::Relaxed);
        if let Some(d) = self.slow {
            // A handler blocked on slow work, as a real one calling out would be.
            std::thread::sleep(d);
        }
        let n = self.events.fetch_add(1, Ordering::Relaxed) + 1;
        if n == self.warm {
            let _ = self.warm_at.set(Instant::now());
        }
        if n == self.expected {
            let _ = self.done_at.set(Instant::now());
        }
    }

    fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// Events per second between the warm mark and the last expected event.
    fn rate(&self) -> Option<f64> {
        let (a, b) = (self.warm_at.get()?, self.done_at.get()?);
        let secs = b.duration_since(*a).as_secs_f64();
        let n = self.expected - self.warm;
        (n > 0 && secs > 0.0).then(|| n as f64 / secs)
    }
}

/// The handlers of one run: one, or `FANOUT` with the last one slow.
struct Tallies(Vec<Arc<Tally>>);

impl Tallies {
    fn new(args: &Args) -> Self {
        if args.kind == "fanout" {
            let mut v: Vec<_> = (1..FANOUT).map(|_| Tally::new(args.events, None)).collect();
            v.push(Tally::new(args.events, Some(SLOW_HANDLER)));
            Tallies(v)
        } else {
            Tallies(vec![Tally::new(args.events, None)])
        }
    }

    /// The handlers that are not slow.
    fn fast(&self) -> impl Iterator<Item = &Arc<Tally>> {
        self.0.iter().filter(|t| t.slow.is_none())
    }
}

/// What a client reports beyond its handlers' counts.
#[derive(Debug, Default)]
struct Report {
    relists: u64,
    extra: BTreeMap<String, f64>,
}

/// Counts how often a kinformer source starts a full list (a relist), by list or by streaming
/// list, and how many paged lists it completed.
struct Counting<L> {
    inner: L,
    starts: Arc<AtomicU64>,
    completed: Arc<AtomicU64>,
}

#[async_trait]
impl<K: Send + 'static, L: ListWatch<K>> ListWatch<K> for Counting<L> {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, list_watch::Error> {
        if params.continue_token.is_none() {
            self.starts.fetch_add(1, Ordering::SeqCst);
        }
        let page = self.inner.list(params).await?;
        if page.continue_token.as_deref().is_none_or(str::is_empty) {
            self.completed.fetch_add(1, Ordering::SeqCst);
        }
        Ok(page)
    }
    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<K>, list_watch::Error> {
        if params.send_initial_events {
            self.starts.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.watch(params).await
    }
}

/// Polls `done` every millisecond until it holds or `deadline` passes.
async fn wait_until(deadline: Instant, done: impl Fn() -> bool) -> bool {
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    true
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The phase's length: the one field a typed handler reads.
fn phase(pod: &Pod) -> usize {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .map_or(0, str::len)
}

/// The `app` label's length: what a metadata-only handler reads.
fn app_label<K: Object>(o: &K) -> usize {
    o.labels().get("app").map_or(0, String::len)
}

/// The steps every client shares after it started: wait for the sync, then for the scenario's
/// events; `synced` tells whether the cache is complete, `lists` how many full lists the client
/// has completed (two once a forced relist is done).
async fn follow(
    args: &Args,
    start: Instant,
    deadline: Instant,
    tallies: &Tallies,
    synced: impl Fn() -> bool,
    lists: impl Fn() -> u64,
) -> Result<(), String> {
    let complete = || {
        synced()
            && tallies
                .0
                .iter()
                .all(|t| t.initial.load(Ordering::Relaxed) >= args.pods)
    };
    if !wait_until(deadline, complete).await {
        return Err(format!(
            "not synced in time ({} of {} objects)",
            tallies.0[0].initial.load(Ordering::Relaxed),
            args.pods
        ));
    }
    say(&format!(
        "synced {:.1}",
        start.elapsed().as_secs_f64() * 1000.0
    ));
    match args.kind.as_str() {
        "relist" => {
            // Let the post-sync allocations settle before the steady state is read, and keep the
            // watch open long enough that its end is not taken for a failing watch (a watch that
            // ends within a second with nothing delivered makes a reflector list again at once).
            tokio::time::sleep(Duration::from_millis(1500)).await;
            say("steady");
            wait_until(deadline, || lists() >= 2).await;
        }
        "update" | "churn" => {
            let t = &tallies.0[0];
            wait_until(deadline, || t.events() >= t.expected).await;
        }
        "fanout" => {
            wait_until(deadline, || {
                tallies.0.iter().all(|t| t.events() >= t.expected)
            })
            .await;
        }
        _ => {}
    }
    tokio::time::sleep(GRACE).await;
    Ok(())
}

/// The result line: `ok` only with exactly the expected counts.
fn verdict(args: &Args, tallies: &Tallies, report: Report) -> Value {
    let expected_relists = u64::from(args.kind == "relist");
    let mut why = Vec::new();
    for (i, t) in tallies.0.iter().enumerate() {
        let initial = t.initial.load(Ordering::Relaxed);
        if initial != args.pods {
            why.push(format!(
                "handler {i}: {initial} initial objects, not {}",
                args.pods
            ));
        }
        // What a relist hands the handlers differs by design (kube-runtime replays every object;
        // an informer notifies only changes): the relist scenario counts lists instead.
        if args.kind != "relist" && t.events() != t.expected {
            why.push(format!(
                "handler {i}: {} events, not {}",
                t.events(),
                t.expected
            ));
        }
    }
    if report.relists != expected_relists {
        why.push(format!(
            "{} relists, not {expected_relists}",
            report.relists
        ));
    }
    // The slowest fast handler's rate.
    let rate = tallies
        .fast()
        .map(|t| t.rate())
        .try_fold(f64::INFINITY, |acc, r| r.map(|r| acc.min(r)));
    let rate = match args.kind.as_str() {
        "update" | "churn" | "fanout" => rate.filter(|r| r.is_finite()),
        _ => None,
    };
    json!({
        "ok": why.is_empty(),
        "why": why.join("; "),
        "initial": tallies.0[0].initial.load(Ordering::Relaxed),
        "events": tallies.0[0].events(),
        "relists": report.relists,
        "events_per_s": rate,
        "read": tallies.0.iter().map(|t| t.read.load(Ordering::Relaxed)).sum::<usize>(),
        "extra": report.extra,
    })
}

/// Median time of `f` over `samples`, in microseconds.
fn time_each<T>(samples: &[T], mut f: impl FnMut(&T) -> usize) -> f64 {
    let mut times: Vec<f64> = samples
        .iter()
        .map(|s| {
            let t = Instant::now();
            std::hint::black_box(f(s));
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times.get(times.len() / 2).copied().unwrap_or(f64::NAN)
}

/// kinformer's default pipeline through the facade, for any object type the client decodes.
async fn kinformer<K>(
    args: &Args,
    api: Api<K>,
    read: fn(&K) -> usize,
    tallies: &Tallies,
) -> Result<Report, String>
where
    K: Object + DeserializeOwned + Send + Sync + 'static,
{
    let starts = Arc::new(AtomicU64::new(0));
    let completed = Arc::new(AtomicU64::new(0));
    let source = Counting {
        inner: api,
        starts: Arc::clone(&starts),
        completed: Arc::clone(&completed),
    };
    let cache = Arc::new(
        kinformer::indexer::Indexer::<K>::with_indexers([
            (
                kinformer::indexer::index::NAMESPACE.to_string(),
                kinformer::indexer::index::namespace(),
            ),
            ("app".to_string(), kinformer::indexer::index::label("app")),
        ])
        .map_err(|e| e.to_string())?,
    );
    let reflector = kinformer::reflector::Config {
        name: "pods".into(),
        streaming_list: if args.kind == "stream" {
            kinformer::reflector::StreamingList::On
        } else {
            kinformer::reflector::StreamingList::Off
        },
        ..kinformer::reflector::Config::default()
    };
    let mut builder = Informer::<K>::builder()
        .list_watch(source)
        .cache(cache)
        .reflector(reflector);
    for t in &tallies.0 {
        let (add, update, delete) = (Arc::clone(t), Arc::clone(t), Arc::clone(t));
        builder = builder.handler(
            HandlerFns::new()
                .on_add(move |o: &Arc<K>, initial| {
                    if initial {
                        add.initial(read(o));
                    } else {
                        add.event(read(o));
                    }
                })
                .on_update(move |_, o: &Arc<K>| update.event(read(o)))
                .on_delete(move |o: &DeltaObject<K>| {
                    delete.event(AsRef::<str>::as_ref(&o.key()).len())
                }),
        );
    }
    let informer = builder.build().map_err(|e| e.to_string())?;
    let start = Instant::now();
    let deadline = start + args.timeout;
    informer.start();
    let relists = || starts.load(Ordering::SeqCst).saturating_sub(1);
    let lists = || completed.load(Ordering::SeqCst);
    follow(
        args,
        start,
        deadline,
        tallies,
        || informer.has_synced(),
        lists,
    )
    .await?;
    let mut report = Report {
        relists: relists(),
        ..Report::default()
    };
    if args.kind == "lister" {
        let lister = informer.lister();
        let all = lister.list(&LabelSelector::everything());
        let keys: Vec<(String, String)> = all
            .iter()
            .step_by((all.len() / 1000).max(1))
            .map(|o| {
                (
                    o.namespace().unwrap_or_default().to_owned(),
                    o.name().to_owned(),
                )
            })
            .collect();
        let namespaces: Vec<String> = keys.iter().map(|k| k.0.clone()).take(50).collect();
        let apps: Vec<String> = all
            .iter()
            .filter_map(|o| o.labels().get("app").cloned())
            .take(50)
            .collect();
        let get = time_each(&keys, |(ns, name)| {
            lister.namespaced(ns).get(name).map_or(0, |o| read(&o))
        });
        let ns_list = time_each(&namespaces, |ns| {
            lister
                .namespaced(ns)
                .list(&LabelSelector::everything())
                .len()
        });
        let by_index = time_each(&apps, |app| {
            lister.by_index("app", app).map_or(0, |v| v.len())
        });
        report.extra.insert("get_us".into(), get);
        report.extra.insert("ns_list_us".into(), ns_list);
        report.extra.insert("index_us".into(), by_index);
    }
    Ok(report)
}

/// kube-rs as its users run it: `reflector(writer, watcher(api, config)).default_backoff()`, the
/// handler called on each event of the stream.
async fn kube_runtime(args: &Args, tallies: &Tallies) -> Result<Report, String> {
    use kube_runtime::watcher::Event;
    use kube_runtime::{WatchStreamExt as _, reflector, watcher};

    let config = kube::Config::new(args.url.parse().map_err(|e| format!("{e}"))?);
    let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
    let api: kube::Api<Pod> = kube::Api::all(client);
    let mut wc = watcher::Config::default();
    if args.kind == "stream" {
        wc = wc.streaming_lists();
    }
    let (store, writer) = reflector::store::<Pod>();
    let inits = Arc::new(AtomicU64::new(0));
    let dones = Arc::new(AtomicU64::new(0));
    let synced = Arc::new(AtomicBool::new(false));
    let stream = reflector(writer, watcher(api, wc)).default_backoff();
    let handlers: Vec<Arc<Tally>> = tallies.0.clone();
    let (inits2, dones2, synced2) = (Arc::clone(&inits), Arc::clone(&dones), Arc::clone(&synced));
    let start = Instant::now();
    let deadline = start + args.timeout;
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            let event = match stream.try_next().await {
                Ok(Some(e)) => e,
                Ok(None) => break,
                // default_backoff retries; an error item is only reported.
                Err(_) => continue,
            };
            let first_sync = !synced2.load(Ordering::Relaxed);
            match &event {
                Event::Init => {
                    inits2.fetch_add(1, Ordering::SeqCst);
                }
                Event::InitApply(pod) => {
                    for h in &handlers {
                        if first_sync {
                            h.initial(phase(pod));
                        } else {
                            h.event(phase(pod));
                        }
                    }
                }
                Event::InitDone => {
                    dones2.fetch_add(1, Ordering::SeqCst);
                    synced2.store(true, Ordering::SeqCst);
                }
                Event::Apply(pod) => handlers.iter().for_each(|h| h.event(phase(pod))),
                Event::Delete(pod) => handlers
                    .iter()
                    .for_each(|h| h.event(pod.metadata.name.as_deref().map_or(0, str::len))),
            }
        }
    });
    let relists = || inits.load(Ordering::SeqCst).saturating_sub(1);
    let followed = follow(
        args,
        start,
        deadline,
        tallies,
        || synced.load(Ordering::SeqCst),
        || dones.load(Ordering::SeqCst),
    )
    .await;
    let mut report = Report {
        relists: relists(),
        ..Report::default()
    };
    if followed.is_ok() && args.kind == "lister" {
        use kube_runtime::reflector::ObjectRef;
        let all = store.state();
        let keys: Vec<(String, String)> = all
            .iter()
            .step_by((all.len() / 1000).max(1))
            .map(|o| {
                (
                    o.metadata.namespace.clone().unwrap_or_default(),
                    o.metadata.name.clone().unwrap_or_default(),
                )
            })
            .collect();
        let namespaces: Vec<String> = keys.iter().map(|k| k.0.clone()).take(50).collect();
        let apps: Vec<String> = all
            .iter()
            .filter_map(|o| o.metadata.labels.as_ref()?.get("app").cloned())
            .take(50)
            .collect();
        // kube-runtime's store has no indexes: a namespace or label query filters every object.
        let get = time_each(&keys, |(ns, name)| {
            store
                .get(&ObjectRef::new(name).within(ns))
                .map_or(0, |p| phase(&p))
        });
        let ns_list = time_each(&namespaces, |ns| {
            store
                .state_filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()))
                .len()
        });
        let by_index = time_each(&apps, |app| {
            store
                .state_filter(|p| {
                    p.metadata.labels.as_ref().and_then(|l| l.get("app")) == Some(app)
                })
                .len()
        });
        report.extra.insert("get_us".into(), get);
        report.extra.insert("ns_list_us".into(), ns_list);
        report.extra.insert("index_us".into(), by_index);
    }
    task.abort();
    followed.map(|()| report)
}

async fn run(args: &Args, tallies: &Tallies) -> Result<Report, String> {
    let kinformer_client = || {
        kinformer::client::Client::new(kinformer::client::Config::new(args.url.clone()))
            .map_err(|e| e.to_string())
    };
    match args.client.as_str() {
        "kinformer-typed" => {
            kinformer::<Pod>(args, Api::all(kinformer_client()?), phase, tallies).await
        }
        // The same typed cache, its lists and watches in protobuf.
        "kinformer-typed-pb" => {
            let mut config = kinformer::client::Config::new(args.url.clone());
            config.object_encoding = kinformer::client::ObjectEncoding::Protobuf;
            let client = kinformer::client::Client::new(config).map_err(|e| e.to_string())?;
            kinformer::<Pod>(args, Api::all(client), phase, tallies).await
        }
        // Compact forms: the handler reads a label, as a controller that enqueues keys does, so
        // no typed decode happens at event time.
        "kinformer-compact" => {
            let api = Api::<Compact<Pod>>::all(kinformer_client()?);
            kinformer::<Compact<Pod>>(args, api, app_label, tallies).await
        }
        // The compact form over protobuf: the pods' messages as received, plus their metadata.
        "kinformer-compact-pb" => {
            let mut config = kinformer::client::Config::new(args.url.clone());
            config.object_encoding = kinformer::client::ObjectEncoding::Protobuf;
            let client = kinformer::client::Client::new(config).map_err(|e| e.to_string())?;
            let api = Api::<kinformer_compact::CompactMessage<Pod>>::all(client);
            kinformer::<kinformer_compact::CompactMessage<Pod>>(args, api, app_label, tallies).await
        }
        "kinformer-compressed" => {
            let api = Api::<Compressed<Pod>>::all(kinformer_client()?);
            kinformer::<Compressed<Pod>>(args, api, app_label, tallies).await
        }
        "kinformer-metadata" => {
            let api = Api::metadata(kinformer_client()?, &ApiResource::of::<Pod>(), None);
            kinformer::<PartialObjectMetadata>(args, api, app_label, tallies).await
        }
        "kube-runtime" => kube_runtime(args, tallies).await,
        other => Err(format!("no client {other:?} in this build")),
    }
}

/// The environment variable that installs the Prometheus recorder (no listener) before the
/// client starts, to measure what kinformer's metrics cost: `KINFORMER_BENCH_METRICS=1 cargo xtask
/// bench ...`. Set to anything but empty or `0`.
const METRICS_ENV: &str = "KINFORMER_BENCH_METRICS";

/// Installs the Prometheus recorder when [`METRICS_ENV`] asks for it, and renders it every 10 s
/// on a thread of its own, as a scrape would (which also drains the histograms' samples).
fn install_metrics_recorder() {
    if std::env::var_os(METRICS_ENV).is_none_or(|v| v.is_empty() || v == "0") {
        return;
    }
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .expect("no other metrics recorder in bench-client");
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_secs(10));
            std::hint::black_box(handle.render());
        }
    });
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench-client: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    install_metrics_recorder();
    let tallies = Tallies::new(&args);
    let result = rt.block_on(run(&args, &tallies));
    let line = match result {
        Ok(report) => verdict(&args, &tallies, report),
        Err(why) => json!({"ok": false, "why": why}),
    };
    say(&format!("result {line}"));
    // Stay alive, as measured, until the bench has read this process's figures.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    // Skip the runtime's teardown: the figures are taken.
    std::process::exit(0);
}
