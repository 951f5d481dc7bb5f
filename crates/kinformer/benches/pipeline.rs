//! The default pipeline (`Informer::<Pod>::builder()`) over real HTTP, as users run it:
//!
//! - `watch`: 100k `MODIFIED` events of realistic pods (~5 KB of JSON each), queued on the
//!   server before the watch opens, read by one watch into the informer, whose handler counts
//!   every event and reads `status.phase`. Reports events/s and the heap's peak while they flow.
//! - `list`: the initial sync of 100k pods (the reflector's default paging). Reports the sync
//!   time and the heap's peak and steady state.
//!
//! `cargo bench -p kinformer --bench pipeline [-- watch|list]`. The simulated server runs in a
//! child process (this same binary, started with `KINFORMER_BENCH_SIM`), so this process holds
//! only the client and the pipeline, and the heap figures (from the allocator) are the
//! pipeline's. `KINFORMER_BENCH_N` changes the number of events or pods.

#![allow(missing_docs)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use kinformer::prelude::*;
use kinformer_core::list_watch::{self, WatchStream};
use kinformer_core::{ListParams, ObjectList, Scope, WatchParams};
use peak_alloc::PeakAlloc;
use serde_json::json;

#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

const SIM_ENV: &str = "KINFORMER_BENCH_SIM";
/// Pods patched round-robin by the watch scenario.
const WATCH_PODS: usize = 10_000;

/// The child: serves pods until its stdin closes. `list:N` seeds N pods; `watch:N` seeds
/// [`WATCH_PODS`] pods and then makes N label patches, and prints the resourceVersion before them.
fn serve(spec: &str) {
    let (scenario, n) = spec.split_once(':').unwrap();
    let n: usize = n.parse().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let sim = kinformer_sim::SimServer::start(kinformer_sim::SimConfig {
            history_window: 2 * n + 10,
            ..kinformer_sim::SimConfig::default()
        })
        .await
        .unwrap();
        let store = sim.store();
        let mut before = String::new();
        if scenario == "list" {
            store.seed_pods(n, 1);
        } else {
            store.seed_pods(WATCH_PODS, 1);
            before = store.resource_version().to_string();
            let resource = ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced);
            let names: Vec<(String, String)> = store
                .list(&resource, None)
                .iter()
                .map(|p| {
                    let m = &p["metadata"];
                    let field = |f: &str| m[f].as_str().unwrap().to_owned();
                    (field("namespace"), field("name"))
                })
                .collect();
            for i in 0..n {
                let (ns, name) = &names[i % names.len()];
                store
                    .patch(
                        &resource,
                        Some(ns),
                        name,
                        json!({"metadata": {"labels": {"step": i.to_string()}}}),
                    )
                    .unwrap();
            }
        }
        println!("{} {before}", sim.url());
        std::io::stdout().flush().unwrap();
        tokio::task::spawn_blocking(|| {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
        })
        .await
        .unwrap();
    });
}

fn start_sim(spec: &str) -> (Child, String, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(SIM_ENV, spec)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let mut parts = line.split_whitespace();
    let url = parts.next().unwrap().to_owned();
    let before = parts.next().unwrap_or_default().to_owned();
    (child, url, before)
}

/// Lists nothing at a fixed version, so the watch replays the server's history from there.
struct ReplayFrom {
    api: Api<Pod>,
    resource_version: String,
}

#[async_trait]
impl ListWatch<Pod> for ReplayFrom {
    async fn list(&self, _: &ListParams) -> Result<ObjectList<Pod>, list_watch::Error> {
        Ok(ObjectList::new(
            Vec::new(),
            self.resource_version.as_str().into(),
        ))
    }
    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<Pod>, list_watch::Error> {
        ListWatch::watch(&self.api, params).await
    }
}

/// Counts every event and reads one field of each object, as a real handler would.
#[derive(Default)]
struct Counting {
    events: AtomicUsize,
    running: AtomicUsize,
}

impl Counting {
    fn saw(&self, pod: &Pod) {
        if pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
            self.running.fetch_add(1, Ordering::Relaxed);
        }
        self.events.fetch_add(1, Ordering::Release);
    }
}

/// The handler: the shared counts.
struct Handler(Arc<Counting>);

impl ResourceEventHandler<Pod> for Handler {
    fn on_add(&self, pod: &Arc<Pod>, _: bool) {
        self.0.saw(pod);
    }
    fn on_update(&self, _: &Arc<Pod>, pod: &Arc<Pod>) {
        self.0.saw(pod);
    }
}

fn client(url: &str) -> Client {
    Client::new(kinformer::client::Config::new(url)).unwrap()
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

async fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what} took longer than {limit:?}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

async fn watch(n: usize) {
    let (mut child, url, before) = start_sim(&format!("watch:{n}"));
    let counting = Arc::new(Counting::default());
    let base = HEAP.current_usage();
    HEAP.reset_peak_usage();
    let informer = Informer::<Pod>::builder()
        .list_watch(ReplayFrom {
            api: Api::all(client(&url)),
            resource_version: before,
        })
        .build()
        .unwrap();
    let registration = informer
        .add_handler(Handler(Arc::clone(&counting)))
        .unwrap();
    let mut backlog = 0;
    let start = Instant::now();
    informer.start();
    wait_until("the watch", Duration::from_secs(600), || {
        backlog = backlog.max(registration.backlog());
        counting.events.load(Ordering::Acquire) >= n
    })
    .await;
    let elapsed = start.elapsed();
    let peak = HEAP.peak_usage().saturating_sub(base);
    let cached = informer.cache().list_keys().len();
    informer.shutdown().await;
    drop(child.stdin.take());
    let _ = child.wait();
    println!(
        "watch: {n} MODIFIED events of {WATCH_PODS} pods in {:.2} s = {:.0} events/s; heap peak {:.1} MiB; handler backlog up to {backlog}; {cached} cached",
        elapsed.as_secs_f64(),
        n as f64 / elapsed.as_secs_f64(),
        mib(peak),
    );
}

async fn list(n: usize) {
    let (mut child, url, _) = start_sim(&format!("list:{n}"));
    let counting = Arc::new(Counting::default());
    let base = HEAP.current_usage();
    HEAP.reset_peak_usage();
    let informer = Informer::<Pod>::builder()
        .list_watch(Api::all(client(&url)))
        .handler(Handler(Arc::clone(&counting)))
        .build()
        .unwrap();
    let start = Instant::now();
    informer.start();
    wait_until("the sync", Duration::from_secs(600), || {
        informer.has_synced() && counting.events.load(Ordering::Acquire) >= n
    })
    .await;
    let elapsed = start.elapsed();
    let peak = HEAP.peak_usage().saturating_sub(base);
    let steady = HEAP.current_usage().saturating_sub(base);
    let cached = informer.cache().list_keys().len();
    informer.shutdown().await;
    drop(child.stdin.take());
    let _ = child.wait();
    println!(
        "list: {n} pods synced in {:.2} s = {:.0} pods/s; heap peak {:.1} MiB, steady {:.1} MiB ({:.1} KiB per pod); {cached} cached",
        elapsed.as_secs_f64(),
        n as f64 / elapsed.as_secs_f64(),
        mib(peak),
        mib(steady),
        steady as f64 / 1024.0 / n as f64,
    );
}

fn main() {
    if let Ok(spec) = std::env::var(SIM_ENV) {
        serve(&spec);
        return;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        // `cargo test --benches` asks for the list of benchmarks: there are none to list.
        return;
    }
    let n: usize = std::env::var("KINFORMER_BENCH_N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let only = |name: &str| {
        !args.iter().any(|a| a == "watch" || a == "list") || args.iter().any(|a| a == name)
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if only("watch") {
        rt.block_on(watch(n));
    }
    if only("list") {
        rt.block_on(list(n));
    }
}
