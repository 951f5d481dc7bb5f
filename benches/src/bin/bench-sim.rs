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
//! The commands are sent before a scenario's first client starts, and their events are written
//! once: every client lists at the version just before them (a front server before the simulated
//! one, `kinformer_benches::burst`, serves lists at version 0 exactly there) and its watch then
//! receives them all. How they reach the client is the server's shape:
//!
//! - `burst`: the events are rendered ahead of time, and the watch receives them all at once,
//!   back to back in 128 KiB writes, as a real API server's watch handler writes a backlog;
//! - `paced`: the watch goes through to the simulated server, which replays the events from its
//!   history and hands them to the connection one line per frame, which is kinder to a client.
//!
//! It exits when its stdin closes.

use std::io::{BufRead as _, Write as _};

use kinformer_benches::burst::{Front, Rendered};
use kinformer_benches::pods::{self, PodSize};
use kinformer_core::{ApiResource, Scope};
use kinformer_sim::{SimConfig, SimServer, Store, generate_pod};
use serde_json::Value;

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
    /// What an update of each seeded pod reads of it (its conditions, container statuses and
    /// `managedFields`), made on first use rather than the whole pod again for every update.
    bases: Vec<Value>,
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
            while self.bases.len() <= index {
                let pod = pods::pod(self.size, self.bases.len(), self.seed);
                self.bases.push(pods::update_base(&pod));
            }
            let patch = pods::update_patch(&self.bases[index], self.revision);
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

/// Lists the pods once in protobuf, page by page, straight from the simulated server: the
/// server keeps each object's protobuf form once rendered, as a real API server's watch cache
/// keeps one serialization per object and encoding (and a real server stores protobuf to begin
/// with). Without this the first protobuf client of a run would pay for turning every pod's
/// JSON into protobuf, a cost no real server has.
async fn render_protobuf(addr: std::net::SocketAddr) {
    use kinformer_core::ListParams;
    use kinformer_core::list_watch::ListWatch as _;
    let mut config = kinformer_client::Config::new(format!("http://{addr}"));
    config.object_encoding = kinformer_client::ObjectEncoding::Protobuf;
    let client = kinformer_client::Client::new(config).expect("a client of the simulated server");
    let api = kinformer_client::Api::<k8s_openapi::api::core::v1::Pod>::all(client);
    let mut params = ListParams {
        limit: Some(1000),
        ..ListParams::default()
    };
    loop {
        let page = api.list(&params).await.expect("the protobuf list pages");
        match page.continue_token {
            Some(token) if !token.is_empty() => params.continue_token = Some(token),
            _ => break,
        }
    }
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
            // Clients and repetitions watch from the same version for as long as a scenario
            // runs: the watch cache keeps its events all that time.
            watch_cache_window: std::time::Duration::from_secs(86_400),
            ..SimConfig::default()
        };
        let sim = SimServer::start(config)
            .await
            .expect("the simulated server starts");
        seed_pods(&sim.store(), n, seed, size);
        render_protobuf(sim.addr()).await;
        let front = Front::start(sim.addr())
            .await
            .expect("the front server starts");
        let url = front.url();
        println!("url {url}");
        std::io::stdout().flush().expect("stdout");
        let mut writer = Writer {
            store: sim.store().clone(),
            size,
            pods: n.max(1),
            seed,
            revision: 0,
            ids: Vec::new(),
            bases: Vec::new(),
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
            let events = match command {
                Some(c @ ("update" | "churn")) => {
                    front.clear();
                    let base = writer.store.resource_version();
                    let mut rendered = Rendered::default();
                    let render = burst.then_some(&mut rendered);
                    let n = if c == "update" {
                        writer.update(count, render)
                    } else {
                        writer.churn(count, render)
                    };
                    if burst {
                        front.queue_events(base, rendered);
                    } else {
                        front.list_at(base);
                    }
                    n
                }
                Some("stream") if burst => {
                    front.clear();
                    let rv = writer.store.resource_version();
                    let mut rendered = Rendered::default();
                    // One pod at a time: the whole list as JSON values holds ten times its
                    // bytes, more than the machine has for 100k dense pods.
                    for i in 0..writer.pods {
                        let (ns, name) = writer.id(i);
                        if let Some(pod) = writer.store.get(&pods(), Some(&ns), &name) {
                            rendered.push("ADDED", &pod);
                        }
                    }
                    rendered.push_initial_events_end(rv);
                    front.queue_initial(rendered);
                    0
                }
                Some("stream") => 0,
                Some("relist") => {
                    front.clear();
                    front.close_watches();
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
