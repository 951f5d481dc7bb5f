//! The simulated API server of `cargo xtask bench`, in its own process so that its CPU and memory
//! never count against a client.
//!
//! `bench-sim --pods N [--seed S]` seeds N realistic pods (in bulk, under the store's lock), prints
//! `url <URL>`, then reads commands on stdin, one per line, answering each with `done <events>`:
//!
//! - `update <n>`: n MODIFIED events (a label and the phase of pods in turn), all written while
//!   the open watches are held back, so that they reach the client queued at once;
//! - `churn <n>`: n pods deleted and added again (2n events), held back the same way;
//! - `relist`: the open watches end and the next watch gets 410 Gone, so clients list again.
//!
//! It exits when its stdin closes.

use std::io::{BufRead as _, Write as _};
use std::time::Duration;

use kinformer_core::{ApiResource, Scope};
use kinformer_sim::{SimConfig, SimServer, Store, generate_pod};
use serde_json::json;

/// How long each renewal holds the watches back; renewed every fifth of it while writing, so
/// that the watches resume at most this long after the last write.
const HOLD: Duration = Duration::from_millis(500);

fn pods() -> ApiResource {
    ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced)
}

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number, not {v:?}"))
        })
}

/// The name and namespace of the seeded pod `index`.
fn identity(index: usize, seed: u64) -> (String, String) {
    let pod = generate_pod(index, seed);
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    (
        text(&pod["metadata"]["namespace"]),
        text(&pod["metadata"]["name"]),
    )
}

struct Writer {
    store: Store,
    pods: usize,
    seed: u64,
    /// Bumped by every update, so that no update is a no-op.
    revision: u64,
    /// The namespace and name of the seeded pods, made on first use.
    ids: Vec<(String, String)>,
}

/// Holds the open watches back until the returned task is aborted.
fn hold(sim: &SimServer) -> tokio::task::JoinHandle<()> {
    let faults = sim.faults();
    faults.stall_watches(HOLD);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(HOLD / 5).await;
            faults.stall_watches(HOLD);
        }
    })
}

impl Writer {
    fn id(&mut self, index: usize) -> (String, String) {
        while self.ids.len() <= index {
            self.ids.push(identity(self.ids.len(), self.seed));
        }
        self.ids[index].clone()
    }

    fn update(&mut self, n: usize) -> usize {
        let phases = ["Running", "Pending", "Succeeded", "Failed"];
        let res = pods();
        let mut done = 0;
        for i in 0..n {
            self.revision += 1;
            let (ns, name) = self.id(i % self.pods);
            let patch = json!({
                "metadata": {"labels": {"bench-revision": self.revision.to_string()}},
                "status": {"phase": phases[(self.revision % 4) as usize]},
            });
            if self.store.patch(&res, Some(&ns), &name, patch).is_ok() {
                done += 1;
            }
        }
        done
    }

    fn churn(&mut self, n: usize) -> usize {
        let res = pods();
        let mut events = 0;
        for i in 0..n.min(self.pods) {
            let (ns, name) = self.id(i);
            if self.store.delete(&res, Some(&ns), &name).is_ok() {
                events += 1;
            }
        }
        for i in 0..n.min(self.pods) {
            if self.store.create(&res, generate_pod(i, self.seed)).is_ok() {
                events += 1;
            }
        }
        events
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n = arg(&args, "--pods", 1000) as usize;
    let seed = arg(&args, "--seed", 1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async {
        let config = SimConfig {
            // Every write of a scenario stays in history, so no watch ever needs a relist.
            history_window: 4_000_000,
            compaction_interval: None,
            ..SimConfig::default()
        };
        let sim = SimServer::start(config)
            .await
            .expect("the simulated server starts");
        sim.store().seed_pods(n, seed);
        println!("url {}", sim.url());
        std::io::stdout().flush().expect("stdout");
        let mut writer = Writer {
            store: sim.store().clone(),
            pods: n.max(1),
            seed,
            revision: 0,
            ids: Vec::new(),
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        while let Some(line) = rx.recv().await {
            let mut words = line.split_whitespace();
            let count = |w: Option<&str>| w.and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
            let events = match words.next() {
                Some("update") => {
                    let held = hold(&sim);
                    let n = writer.update(count(words.next()));
                    held.abort();
                    n
                }
                Some("churn") => {
                    let held = hold(&sim);
                    let n = writer.churn(count(words.next()));
                    held.abort();
                    n
                }
                Some("relist") => {
                    sim.faults().gone_next_watch();
                    sim.faults().close_all_watches_now();
                    0
                }
                _ => {
                    eprintln!("bench-sim: unknown command {line:?}");
                    continue;
                }
            };
            println!("done {events}");
            std::io::stdout().flush().expect("stdout");
        }
        sim.shutdown().await;
    });
}
