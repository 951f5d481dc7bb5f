//! The simulated API server of `cargo xtask bench`, in its own process so that its CPU and memory
//! never count against a client.
//!
//! `bench-sim --pods N [--seed S] [--shape burst|paced] [--pod dense|realistic]` seeds N pods of
//! the given size (`kinformer_benches::pods`), prints `url <URL>`, then reads commands on stdin,
//! one per line, answering each with `done <events>`:
//!
//! - `update <n>`: n MODIFIED events, each a status update as real ones are
//!   (`kinformer_benches::pods::update_patch`), pods in turn;
//! - `churn <n>`: n pods deleted and added again (2n events);
//! - `stream`: (burst) renders the current pods as a streaming list's initial events;
//! - `relist`: the open watches end and the next watch gets 410 Gone, so clients list again.
//!
//! How the events of `update` and `churn` reach a client is the server's shape:
//!
//! - `paced`: the command is sent once the client has synced; the events are written to the store
//!   while the open watches are held back, then released, and the simulated server hands them to
//!   the connection one line per frame;
//! - `burst` (`kinformer_benches::burst`): the command is sent before the client starts; the
//!   events are written and rendered ahead of time, the client lists at the version before them,
//!   and its watch receives them all at once, back to back in 128 KiB writes.
//!
//! It exits when its stdin closes.

use std::io::{BufRead as _, Write as _};
use std::time::Duration;

use kinformer_benches::burst::{Front, Rendered};
use kinformer_benches::pods::{self, PodSize};
use kinformer_core::{ApiResource, Scope};
use kinformer_sim::{SimConfig, SimServer, Store, generate_pod};
use serde_json::Value;

/// How long each renewal holds the watches back; renewed every fifth of it while writing, so
/// that the watches resume at most this long after the last write.
const HOLD: Duration = Duration::from_millis(500);

fn pods() -> ApiResource {
    ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced)
}

fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn number(args: &[String], name: &str, default: u64) -> u64 {
    arg(args, name).map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} takes a number, not {v:?}"))
    })
}

/// The name and namespace of the seeded pod `index` (the same for both sizes).
fn identity(index: usize, seed: u64) -> (String, String) {
    let pod = generate_pod(index, seed);
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    (
        text(&pod["metadata"]["namespace"]),
        text(&pod["metadata"]["name"]),
    )
}

/// Seeds `n` pods of `size`.
fn seed_pods(store: &Store, n: usize, seed: u64, size: PodSize) {
    match size {
        // In bulk, under the store's lock.
        PodSize::Realistic => store.seed_pods(n, seed),
        PodSize::Dense => {
            // The namespaces.
            store.seed_pods(0, seed);
            for i in 0..n {
                store
                    .create(&pods(), pods::dense_pod(i, seed))
                    .expect("a new pod is created");
            }
        }
    }
}

struct Writer {
    store: Store,
    size: PodSize,
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

    /// `n` updates; each written event goes to `rendered` too, if given.
    fn update(&mut self, n: usize, mut rendered: Option<&mut Rendered>) -> usize {
        let res = pods();
        let mut done = 0;
        for i in 0..n {
            self.revision += 1;
            let index = i % self.pods;
            let (ns, name) = self.id(index);
            let patch = pods::update_patch(&pods::pod(self.size, index, self.seed), self.revision);
            if let Ok(after) = self.store.patch(&res, Some(&ns), &name, patch) {
                done += 1;
                if let Some(r) = rendered.as_deref_mut() {
                    r.push("MODIFIED", &after);
                }
            }
        }
        done
    }

    /// `n` pods deleted, then added again; each written event goes to `rendered` too, if given.
    fn churn(&mut self, n: usize, mut rendered: Option<&mut Rendered>) -> usize {
        let res = pods();
        let mut events = 0;
        for i in 0..n.min(self.pods) {
            let (ns, name) = self.id(i);
            if let Ok(gone) = self.store.delete(&res, Some(&ns), &name) {
                events += 1;
                if let Some(r) = rendered.as_deref_mut() {
                    r.push("DELETED", &gone);
                }
            }
        }
        for i in 0..n.min(self.pods) {
            if let Ok(made) = self.store.create(&res, pods::pod(self.size, i, self.seed)) {
                events += 1;
                if let Some(r) = rendered.as_deref_mut() {
                    r.push("ADDED", &made);
                }
            }
        }
        events
    }
}

/// How events reach the clients.
enum Shape {
    Paced,
    Burst(Front),
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n = number(&args, "--pods", 1000) as usize;
    let seed = number(&args, "--seed", 1);
    let size = arg(&args, "--pod").map_or(PodSize::Dense, |v| {
        PodSize::parse(v).unwrap_or_else(|| panic!("--pod takes dense or realistic, not {v:?}"))
    });
    let burst = match arg(&args, "--shape") {
        None | Some("burst") => true,
        Some("paced") => false,
        Some(v) => panic!("--shape takes burst or paced, not {v:?}"),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async {
        let config = SimConfig {
            // Every write of a scenario stays in history until the next command compacts it, so
            // no watch ever needs a relist.
            history_window: 4_000_000,
            compaction_interval: None,
            ..SimConfig::default()
        };
        let sim = SimServer::start(config)
            .await
            .expect("the simulated server starts");
        seed_pods(&sim.store(), n, seed, size);
        let shape = if burst {
            Shape::Burst(
                Front::start(sim.addr())
                    .await
                    .expect("the front server starts"),
            )
        } else {
            Shape::Paced
        };
        let url = match &shape {
            Shape::Paced => sim.url(),
            Shape::Burst(front) => front.url(),
        };
        println!("url {url}");
        std::io::stdout().flush().expect("stdout");
        let mut writer = Writer {
            store: sim.store().clone(),
            size,
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
            let command = words.next();
            let count = words
                .next()
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if matches!(command, Some("update" | "churn")) {
                // No client needs the writes of the commands before: keep the history to this
                // command's.
                sim.faults().compact_now();
            }
            let events = match (command, &shape) {
                (Some("update" | "churn"), Shape::Paced) => {
                    let held = hold(&sim);
                    let n = if command == Some("update") {
                        writer.update(count, None)
                    } else {
                        writer.churn(count, None)
                    };
                    held.abort();
                    n
                }
                (Some("update" | "churn"), Shape::Burst(front)) => {
                    front.clear();
                    let base = writer.store.resource_version();
                    let mut rendered = Rendered::default();
                    let n = if command == Some("update") {
                        writer.update(count, Some(&mut rendered))
                    } else {
                        writer.churn(count, Some(&mut rendered))
                    };
                    front.queue_events(base, rendered);
                    n
                }
                (Some("stream"), Shape::Burst(front)) => {
                    front.clear();
                    let rv = writer.store.resource_version();
                    let mut rendered = Rendered::default();
                    for pod in writer.store.list(&pods(), None) {
                        rendered.push("ADDED", &pod);
                    }
                    rendered.push_initial_events_end(rv);
                    front.queue_initial(rendered);
                    0
                }
                (Some("stream"), Shape::Paced) => 0,
                (Some("relist"), _) => {
                    if let Shape::Burst(front) = &shape {
                        front.clear();
                        front.close_watches();
                    }
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
