//! The machinery of `cargo xtask bench`: the scenarios and clients, the simulated server in its
//! own process, and one client process per measurement, measured from outside through `/proc`.
//!
//! This file depends on the standard library and `serde_json` only, so that the benches crate's
//! smoke test compiles the very same code (`#[path]`) and runs it against the freshly built
//! `bench-sim` and `bench-client` binaries.
//!
//! The conversation with the two binaries is line-based. `bench-sim --pods N --shape S --pod P`
//! prints `url <URL>` once it serves N pods, then answers each command on its stdin
//! (`update <n>`, `churn <n>`, `stream`, `relist`) with one `done <events>` line, and exits when
//! its stdin closes. `update` and `churn` are sent before the first client of the scenario
//! starts, so that every event is written before its watch connects, and every client after it
//! lists at the same version and gets the same events (with the burst shape in 128 KiB writes,
//! with the paced one replayed from the server's history one line per frame). `bench-client <client> --url .. --kind .. --pods .. --events ..` prints
//! `synced <ms>` once its cache holds every pod and its handler has seen them, `steady` when asked
//! to settle (the relist scenario), and `result <json>` at the end; it then waits for its stdin to
//! close, so that its peak RSS and CPU time can be read from `/proc/<pid>` while it still exists.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// What a scenario makes the server do once a client has synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Nothing: the initial list is the measurement.
    Sync,
    /// Nothing, but the client lists with a streaming list (`sendInitialEvents`).
    Stream,
    /// `events` MODIFIED events, all queued for the watch at once.
    Update,
    /// `events / 2` pods deleted and added again (so `events` watch events).
    Churn,
    /// Like `Update`, with ten handlers of which one is slow.
    Fanout,
    /// The watch is made to fail with 410 Gone, so the client lists everything again.
    Relist,
    /// Nothing; the client then times its cache's reads.
    Lister,
}

impl Kind {
    /// The name the client binary takes with `--kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Sync => "sync",
            Kind::Stream => "stream",
            Kind::Update => "update",
            Kind::Churn => "churn",
            Kind::Fanout => "fanout",
            Kind::Relist => "relist",
            Kind::Lister => "lister",
        }
    }
}

/// How the simulated server delivers the events of a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Every event rendered ahead of time and queued before the watch connects, then written
    /// back to back in 128 KiB writes, as a real API server's watch handler writes a backlog.
    Burst,
    /// Every event written before the watch connects, then replayed from the server's history
    /// and handed to the connection one line per frame.
    Paced,
}

impl Shape {
    /// Both shapes, the headline first.
    pub const ALL: [Shape; 2] = [Shape::Burst, Shape::Paced];

    /// The name on the command line and in the output.
    pub fn as_str(self) -> &'static str {
        match self {
            Shape::Burst => "burst",
            Shape::Paced => "paced",
        }
    }

    /// The shape of a name.
    pub fn parse(name: &str) -> Option<Shape> {
        Shape::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// How large and nested the served pods are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodSize {
    /// 10-15 KB of JSON: several containers, many env vars, volumes, probes, `managedFields`.
    Dense,
    /// About 5 KB of JSON: two containers.
    Realistic,
}

impl PodSize {
    /// Both sizes, the headline first.
    pub const ALL: [PodSize; 2] = [PodSize::Dense, PodSize::Realistic];

    /// The name on the command line and in the output.
    pub fn as_str(self) -> &'static str {
        match self {
            PodSize::Dense => "dense",
            PodSize::Realistic => "realistic",
        }
    }

    /// The size of a name.
    pub fn parse(name: &str) -> Option<PodSize> {
        PodSize::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// How large the scenarios are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// The counts of the issue that defines the scenarios.
    Full,
    /// Scaled down so that every scenario for every client runs in a few minutes on 2 cores.
    Quick,
    /// A few dozen objects: enough to exercise the machinery (the smoke test).
    Tiny,
}

/// One workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    /// The name on the command line and in the output (`upd-10k`).
    pub name: &'static str,
    /// What happens after the sync.
    pub kind: Kind,
    /// Pods the server holds when the client starts.
    pub pods: usize,
    /// Watch events the client must see after its sync (for `Relist`, the pods listed again).
    pub events: usize,
    /// One line on what it measures.
    pub about: &'static str,
}

impl Scenario {
    /// The command that makes the scenario's events on the server, if it has any.
    pub fn command(&self) -> Option<String> {
        match self.kind {
            Kind::Update | Kind::Fanout => Some(format!("update {}", self.events)),
            Kind::Churn => Some(format!("churn {}", self.events / 2)),
            Kind::Sync | Kind::Stream | Kind::Relist | Kind::Lister => None,
        }
    }
}

/// Every scenario, at `size`, in the order they run.
pub fn scenarios(size: Size) -> Vec<Scenario> {
    // (full, quick, tiny) counts.
    let n = |full: usize, quick: usize, tiny: usize| match size {
        Size::Full => full,
        Size::Quick => quick,
        Size::Tiny => tiny,
    };
    vec![
        Scenario {
            name: "upd-10k",
            kind: Kind::Update,
            pods: n(10_000, 5_000, 40),
            events: n(100_000, 20_000, 100),
            about: "MODIFIED events (status updates), all queued for the watch: the sustained rate",
        },
        Scenario {
            name: "sync-100k",
            kind: Kind::Sync,
            pods: n(100_000, 10_000, 40),
            events: 0,
            about: "initial list of the pods, in pages of 500",
        },
        Scenario {
            name: "stream-100k",
            kind: Kind::Stream,
            pods: n(100_000, 10_000, 40),
            events: 0,
            about: "the same pods by streaming list (sendInitialEvents)",
        },
        Scenario {
            name: "churn-10k",
            kind: Kind::Churn,
            pods: n(10_000, 2_500, 40),
            events: n(8_000, 2_000, 32),
            about: "40% of the pods deleted and added again",
        },
        Scenario {
            name: "sync-150k",
            kind: Kind::Sync,
            pods: n(150_000, 15_000, 40),
            events: 0,
            about: "initial list at the Kubernetes limit of pods per cluster",
        },
        Scenario {
            name: "fanout",
            kind: Kind::Fanout,
            pods: n(10_000, 2_000, 40),
            events: n(20_000, 4_000, 50),
            about: "10 handlers, one slow (100 us per event): the fast handlers' rate",
        },
        Scenario {
            name: "relist",
            kind: Kind::Relist,
            pods: n(100_000, 10_000, 40),
            events: n(100_000, 10_000, 40),
            about: "peak RSS during a forced relist (410 Gone) against the steady state",
        },
        Scenario {
            name: "lister",
            kind: Kind::Lister,
            pods: n(100_000, 10_000, 40),
            events: 0,
            about: "get, namespace list and by-index latency over the synced cache",
        },
    ]
}

/// One client the bench can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientSpec {
    /// The name on the command line, in the output, and given to `bench-client`.
    pub name: &'static str,
    /// `false` for a client whose object type does not exist yet: it gets a "not built yet" row.
    pub built: bool,
    /// What it runs.
    pub about: &'static str,
}

/// The name of the client every ratio is taken against.
pub const BASELINE: &str = "kube-runtime";

/// Every client, in the order of the output. Adding one is a row here and an arm in
/// `bench-client`'s `match` on the name.
pub const CLIENTS: &[ClientSpec] = &[
    ClientSpec {
        name: "kinformer-typed",
        built: true,
        about: "kinformer::Informer::<Pod>, cache of Arc<Pod>",
    },
    ClientSpec {
        name: "kinformer-typed-pb",
        built: true,
        about: "kinformer::Informer::<Pod>, cache of Arc<Pod>, lists and watches in protobuf",
    },
    ClientSpec {
        name: "kinformer-compact-pb",
        built: true,
        about: "kinformer with kinformer_compact::CompactMessage<Pod> (protobuf message + metadata)",
    },
    ClientSpec {
        name: "kinformer-compact",
        built: true,
        about: "kinformer with kinformer_compact::Compact<Pod> (raw JSON + metadata)",
    },
    ClientSpec {
        name: "kinformer-compressed",
        built: true,
        about: "kinformer with kinformer_compact::Compressed<Pod> (zstd with a dictionary)",
    },
    ClientSpec {
        name: "kinformer-metadata",
        built: true,
        about: "kinformer with PartialObjectMetadata (metadata-only lists and watches)",
    },
    ClientSpec {
        name: BASELINE,
        built: true,
        about: "kube-runtime 5.0 reflector(watcher(..)).default_backoff()",
    },
];

/// One measurement: a scenario run once by one client.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The scenario's name.
    pub scenario: String,
    /// The server's shape (`burst`, `paced`).
    pub shape: String,
    /// The client's name.
    pub client: String,
    /// Wall time from the client's start to its cache holding every pod, in milliseconds.
    pub sync_ms: f64,
    /// Watch events per second after the sync (`None` where the scenario has none).
    pub events_per_s: Option<f64>,
    /// CPU seconds per 1,000 watch events: the client's CPU time from its sync to its end over
    /// the scenario's events (`None` where the scenario has none).
    pub cpu_per_k_events: Option<f64>,
    /// The client process's peak resident set (`VmHWM`), in MiB; for `relist`, the peak during
    /// the relist.
    pub peak_rss_mb: f64,
    /// User and system CPU time of the client process, in seconds.
    pub cpu_s: f64,
    /// The client saw exactly the expected events, never relisted (but where made to), and exited
    /// cleanly.
    pub ok: bool,
    /// Scenario-specific figures (`relist_ratio`, `get_us`, ...).
    pub extra: BTreeMap<String, f64>,
    /// Why `ok` is false, or what is worth knowing.
    pub note: String,
}

impl Row {
    /// A failed measurement.
    pub fn failed(scenario: &str, shape: Shape, client: &str, note: impl Into<String>) -> Row {
        Row {
            scenario: scenario.to_owned(),
            shape: shape.as_str().to_owned(),
            client: client.to_owned(),
            sync_ms: f64::NAN,
            events_per_s: None,
            cpu_per_k_events: None,
            peak_rss_mb: f64::NAN,
            cpu_s: f64::NAN,
            ok: false,
            extra: BTreeMap::new(),
            note: note.into(),
        }
    }

    /// The row as one JSON object (`--json` prints one per line).
    pub fn to_json(&self) -> Value {
        let num = |v: f64| if v.is_finite() { json!(v) } else { Value::Null };
        let mut o = json!({
            "scenario": self.scenario,
            "shape": self.shape,
            "client": self.client,
            "sync_ms": num(self.sync_ms),
            "events_per_s": self.events_per_s.map_or(Value::Null, num),
            "cpu_per_k_events": self.cpu_per_k_events.map_or(Value::Null, num),
            "peak_rss_mb": num(self.peak_rss_mb),
            "cpu_s": num(self.cpu_s),
            "ok": self.ok,
        });
        for (k, v) in &self.extra {
            o[k.as_str()] = num(*v);
        }
        if !self.note.is_empty() {
            o["note"] = json!(self.note);
        }
        o
    }
}

/// Lines read from a child's stdout on a thread, so that reads can time out.
#[derive(Debug)]
struct Lines(Receiver<String>);

impl Lines {
    fn spawn(out: impl std::io::Read + Send + 'static) -> Lines {
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines(rx)
    }

    /// The next line starting with `prefix` (the rest of it), skipping others, until `deadline`.
    fn expect(&self, prefix: &str, deadline: Instant) -> Result<String, String> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.0.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return Ok(rest.trim().to_owned());
                    }
                    // A client that gives up early says why in its result.
                    if let Some(result) = line.strip_prefix("result ") {
                        let why = serde_json::from_str::<Value>(result)
                            .ok()
                            .and_then(|v| v.get("why")?.as_str().map(str::to_owned))
                            .unwrap_or_else(|| result.to_owned());
                        return Err(format!("gave up before `{}`: {why}", prefix.trim()));
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!("timed out waiting for `{prefix}`"));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!("exited before `{prefix}`"));
                }
            }
        }
    }
}

/// The simulated server, running in its own process until dropped.
#[derive(Debug)]
pub struct Sim {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines,
    url: String,
    shape: Shape,
    /// The scenario whose events the server has written (and queued), if any.
    prepared: Option<&'static str>,
}

impl Sim {
    /// Starts `bench-sim` holding `pods` pods of `size`, serving them with `shape`, and waits (at
    /// most `timeout`) until it serves them.
    pub fn start(
        bin: &Path,
        pods: usize,
        shape: Shape,
        size: PodSize,
        timeout: Duration,
    ) -> Result<Sim, String> {
        let mut child = Command::new(bin)
            .args(["--pods", &pods.to_string()])
            .args(["--shape", shape.as_str(), "--pod", size.as_str()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let stdin = child.stdin.take();
        let lines = Lines::spawn(child.stdout.take().expect("piped"));
        let url = lines.expect("url ", Instant::now() + timeout);
        // Dropping the half-built server on failure closes its stdin, which ends it.
        let mut sim = Sim {
            child,
            stdin,
            lines,
            url: String::new(),
            shape,
            prepared: None,
        };
        sim.url = url?;
        Ok(sim)
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Has the server write the events of `scenario` (and, with the burst shape, render and queue
    /// them and a streaming list's initial events) unless it already holds them: once per
    /// scenario, not once per client. Clients only read, so every client and repetition after the
    /// first lists at the same version and receives the very same events.
    pub fn prepare(&mut self, scenario: &Scenario, timeout: Duration) -> Result<(), String> {
        if self.prepared == Some(scenario.name) {
            return Ok(());
        }
        self.prepared = None;
        if let Some(command) = scenario.command() {
            self.command(&command, timeout)?;
        }
        if scenario.kind == Kind::Stream && self.shape == Shape::Burst {
            self.command("stream", timeout)?;
        }
        self.prepared = Some(scenario.name);
        Ok(())
    }

    /// Sends one command and waits for its `done` line.
    pub fn command(&mut self, command: &str, timeout: Duration) -> Result<String, String> {
        let stdin = self.stdin.as_mut().ok_or("the server's stdin is closed")?;
        writeln!(stdin, "{command}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("the server is gone: {e}"))?;
        self.lines.expect("done", Instant::now() + timeout)
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        // The server keeps nothing worth a graceful end.
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A field of `/proc/<pid>/status` in KiB.
fn status_kib(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// User plus system CPU seconds of a process, from `/proc/<pid>/stat`.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at field 3 (state).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // Linux reports clock ticks of USER_HZ, 100 on every architecture it supports.
    Some((utime + stime) / 100.0)
}

/// Runs `client` once on `scenario` against `sim`; never panics: a failure is a row with
/// `ok: false` and a note.
pub fn run_client(
    bin: &Path,
    sim: &mut Sim,
    scenario: &Scenario,
    client: &str,
    timeout: Duration,
) -> Row {
    match try_run_client(bin, sim, scenario, client, timeout) {
        Ok(row) => row,
        Err(e) => Row::failed(scenario.name, sim.shape(), client, e),
    }
}

fn try_run_client(
    bin: &Path,
    sim: &mut Sim,
    scenario: &Scenario,
    client: &str,
    timeout: Duration,
) -> Result<Row, String> {
    // Every event is written (and, with the burst shape, rendered and queued) before the client
    // connects, once for all the clients of the scenario.
    sim.prepare(scenario, timeout)?;
    let deadline = Instant::now() + timeout;
    let mut child = Command::new(bin)
        .args([
            client,
            "--url",
            sim.url(),
            "--kind",
            scenario.kind.as_str(),
            "--pods",
            &scenario.pods.to_string(),
            "--events",
            &scenario.events.to_string(),
            "--timeout-ms",
            &timeout.as_millis().to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    let pid = child.id();
    let stdin = child.stdin.take();
    let lines = Lines::spawn(child.stdout.take().expect("piped"));
    let outcome = drive(&lines, sim, scenario, pid, deadline);
    let (peak_kib, cpu) = (status_kib(pid, "VmHWM:"), cpu_seconds(pid));
    drop(stdin);
    let (sync_ms, result, steady_kib, cpu_at_sync) = match outcome {
        Ok(v) => v,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    let status = child.wait().map_err(|e| e.to_string())?;
    let mut extra = BTreeMap::new();
    if let Some(map) = result.get("extra").and_then(Value::as_object) {
        for (k, v) in map {
            if let Some(v) = v.as_f64() {
                extra.insert(k.clone(), v);
            }
        }
    }
    let peak_kib = peak_kib.ok_or("cannot read the client's VmHWM")?;
    if let Some(steady) = steady_kib {
        extra.insert("steady_rss_mb".into(), steady / 1024.0);
        extra.insert("relist_ratio".into(), peak_kib / steady.max(1.0));
    }
    let ok = result.get("ok").and_then(Value::as_bool) == Some(true) && status.success();
    let mut note = result
        .get("why")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if !status.success() {
        note = format!("{note} (exit: {status})").trim().to_owned();
    }
    let cpu = cpu.ok_or("cannot read the client's CPU time")?;
    let cpu_per_k_events = match (scenario.command(), cpu_at_sync) {
        (Some(_), Some(at_sync)) if scenario.events > 0 => {
            Some((cpu - at_sync).max(0.0) / scenario.events as f64 * 1000.0)
        }
        _ => None,
    };
    Ok(Row {
        scenario: scenario.name.to_owned(),
        shape: sim.shape().as_str().to_owned(),
        client: client.to_owned(),
        sync_ms,
        events_per_s: result.get("events_per_s").and_then(Value::as_f64),
        cpu_per_k_events,
        peak_rss_mb: peak_kib / 1024.0,
        cpu_s: cpu,
        ok,
        extra,
        note,
    })
}

/// The conversation with one client: its sync time, its result, for `relist` the RSS it held
/// before the relist, and its CPU time when it had synced.
fn drive(
    lines: &Lines,
    sim: &mut Sim,
    scenario: &Scenario,
    pid: u32,
    deadline: Instant,
) -> Result<(f64, Value, Option<f64>, Option<f64>), String> {
    let left = || deadline.saturating_duration_since(Instant::now());
    let sync_ms: f64 = lines
        .expect("synced ", deadline)?
        .parse()
        .map_err(|_| "a malformed `synced` line")?;
    let cpu_at_sync = cpu_seconds(pid);
    let mut steady_kib = None;
    match scenario.kind {
        Kind::Relist => {
            lines.expect("steady", deadline)?;
            steady_kib = Some(status_kib(pid, "VmRSS:").ok_or("cannot read the client's RSS")?);
            // Resets VmHWM to the current RSS, so that it then holds the relist's peak.
            std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
                .map_err(|e| format!("cannot reset the client's peak RSS: {e}"))?;
            sim.command("relist", left())?;
        }
        Kind::Update | Kind::Fanout | Kind::Churn | Kind::Sync | Kind::Stream | Kind::Lister => {}
    }
    let result = lines.expect("result ", deadline)?;
    let result: Value =
        serde_json::from_str(&result).map_err(|e| format!("a malformed result: {e}"))?;
    Ok((sync_ms, result, steady_kib, cpu_at_sync))
}
