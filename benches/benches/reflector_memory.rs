//! The reflector's memory over real HTTP: it syncs 100k realistic pods from the simulated
//! server into an indexer, then is made to relist (its watch fails with "relist", as after a
//! 410); the peak during that relist is compared with the steady state. Aim: at most 1.2x.
//!
//! `cargo bench -p kinformer-benches --bench reflector_memory`. The simulated server runs in a
//! child process (this same binary, started with `KINFORMER_BENCH_SIM`), so this process holds
//! only the client, the reflector and the cache. Heap bytes come from the allocator; RSS from
//! `/proc/self/status` (VmRSS, and VmHWM reset through `/proc/self/clear_refs` before the relist).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::pin::Pin;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use kinformer_client::{Api, Client, Config as ClientConfig};
use kinformer_core::list_watch::{self, ErrorKind, ListWatch, WatchStream};
use kinformer_core::{ListParams, ObjectList, WatchParams};
use kinformer_indexer::{Indexer, index};
use kinformer_reflector::{Config, Reflector};
use peak_alloc::PeakAlloc;
use tokio::sync::Notify;

#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

const PODS: usize = 100_000;
const AIM: f64 = 1.2;
const SIM_ENV: &str = "KINFORMER_BENCH_SIM";

/// The child: serves `n` pods until its stdin closes.
fn serve(n: usize) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let sim = kinformer_sim::SimServer::start(kinformer_sim::SimConfig::default())
            .await
            .unwrap();
        sim.store().seed_pods(n, 1);
        println!("{}", sim.url());
        std::io::stdout().flush().unwrap();
        tokio::task::spawn_blocking(|| {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
        })
        .await
        .unwrap();
    });
}

/// The client's pods, with a way to make the open watch fail with "relist".
struct Forced {
    api: Api<Pod>,
    relist: Arc<Notify>,
    watches: AtomicUsize,
}

#[async_trait]
impl ListWatch<Pod> for Forced {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<Pod>, list_watch::Error> {
        ListWatch::list(&self.api, params).await
    }
    async fn watch(&self, params: &WatchParams) -> Result<WatchStream<Pod>, list_watch::Error> {
        let inner = ListWatch::watch(&self.api, params).await?;
        self.watches.fetch_add(1, Ordering::SeqCst);
        let relist = Arc::clone(&self.relist);
        let forced = futures_util::stream::once(async move {
            relist.notified().await;
            Err(list_watch::Error::new(ErrorKind::Relist, "forced relist"))
        });
        let merged: Pin<Box<dyn futures_util::Stream<Item = _> + Send>> =
            Box::pin(futures_util::stream::select(inner, forced));
        Ok(merged)
    }
}

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    if let Ok(n) = std::env::var(SIM_ENV) {
        serve(n.parse().unwrap());
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        // `cargo test --benches` asks for the list of benchmarks: there are none to list.
        return;
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(SIM_ENV, PODS.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let url = url.trim().to_owned();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let relist = Arc::new(Notify::new());
        let source = Arc::new(Forced {
            api: Api::all(Client::new(ClientConfig::new(url)).unwrap()),
            relist: Arc::clone(&relist),
            watches: AtomicUsize::new(0),
        });
        let cache = Arc::new(
            Indexer::<Pod>::with_indexers([(index::NAMESPACE.to_string(), index::namespace())])
                .unwrap(),
        );
        let before = HEAP.current_usage();
        let reflector = Reflector::new(Arc::clone(&source), Arc::clone(&cache), Config::default());
        let handle = reflector.handle();
        let start = Instant::now();
        let run = tokio::spawn(async move { reflector.run().await });
        while source.watches.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let sync = start.elapsed();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let steady = HEAP.current_usage() - before;
        let steady_rss = status_kib("VmRSS:");

        HEAP.reset_peak_usage();
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        let relist_start = Instant::now();
        relist.notify_one();
        while source.watches.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let relist_time = relist_start.elapsed();
        let peak = HEAP.peak_usage() - before;
        let peak_rss = status_kib("VmHWM:");
        handle.stop();
        run.await.unwrap().unwrap();
        assert_eq!(kinformer_core::CacheRead::list_keys(&*cache).len(), PODS);

        println!("reflector memory: {PODS} pods over HTTP into an indexer, then a forced relist");
        println!(
            "  initial sync          {:>8.2} s  ({:.0} pods/s)",
            sync.as_secs_f64(),
            PODS as f64 / sync.as_secs_f64()
        );
        println!(
            "  relist                {:>8.2} s",
            relist_time.as_secs_f64()
        );
        println!("  heap steady           {:>8.1} MiB", mib(steady));
        println!(
            "  heap peak (relist)    {:>8.1} MiB  ratio {:.2}x  (aim <= {AIM}x)",
            mib(peak),
            peak as f64 / steady as f64
        );
        println!(
            "  RSS steady / peak     {:>8.1} / {:.1} MiB  ratio {:.2}x",
            steady_rss as f64 / 1024.0,
            peak_rss as f64 / 1024.0,
            peak_rss as f64 / steady_rss.max(1) as f64
        );
    });
    drop(child.stdin.take());
    let _ = child.wait();
}
