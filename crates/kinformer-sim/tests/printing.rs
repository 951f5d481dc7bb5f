//! What the simulated server prints and advertises the way a real API server does, over HTTP on
//! 127.0.0.1: the pod columns of `Table` responses (`printPod`), column definitions only on the
//! first `Table` of a watch, the versions in a watch's 410, and the HTTP/2 settings. The real
//! `kubectl` reads the pod columns in the last test: it needs `kubectl` on `PATH` and fails
//! without it, as `tests/kubectl.rs` does.

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use kinformer_core::{ApiResource, Scope};
use kinformer_sim::{Cluster, ClusterConfig, SimConfig, SimServer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// How long any single wait in these tests may take before the test fails.
const WAIT: Duration = Duration::from_secs(10);

/// The `Accept` header `kubectl get` sends.
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

fn pods() -> ApiResource {
    ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced)
}

/// A client for plain HTTP (reqwest is built without a TLS crypto provider of its own).
fn client() -> reqwest::Client {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .build()
        .unwrap()
}

async fn start(config: SimConfig) -> SimServer {
    SimServer::start(config).await.unwrap()
}

async fn get_table(c: &reqwest::Client, url: &str) -> Value {
    let r = c.get(url).header("accept", TABLE).send().await.unwrap();
    assert_eq!(r.status(), 200, "{url}");
    serde_json::from_slice(&r.bytes().await.unwrap()).unwrap()
}

/// Reads a watch stream line by line, each read bounded by [`WAIT`].
struct Lines {
    resp: reqwest::Response,
    buf: Vec<u8>,
}

impl Lines {
    async fn open(c: &reqwest::Client, url: &str, accept: &str) -> Self {
        let resp = c.get(url).header("accept", accept).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{url}");
        Self {
            resp,
            buf: Vec::new(),
        }
    }

    /// The next line, or `None` once the server ended the stream.
    async fn line(&mut self) -> Option<Bytes> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return Some(Bytes::from(line));
            }
            let chunk = tokio::time::timeout_at(deadline, self.resp.chunk())
                .await
                .expect("no watch line within the bound")
                .expect("the watch stream failed");
            match chunk {
                Some(c) => self.buf.extend_from_slice(&c),
                None => return None,
            }
        }
    }

    async fn event(&mut self) -> Value {
        let line = self.line().await.expect("the watch ended");
        serde_json::from_slice(&line)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&line)))
    }
}

fn cell(row: &Value, i: usize) -> &str {
    row["cells"][i].as_str().unwrap_or_default()
}

/// Every pod state the cluster model writes, watched as Tables: `(phase, READY, STATUS)` per
/// event, and the RESTARTS cell of crash-looping pods.
#[tokio::test]
async fn pod_rows_of_every_phase_the_cluster_writes() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store();
    // From before the first write, so that the watch replays every pod event.
    let from = store.resource_version().max(1);
    let config = ClusterConfig {
        pods: 40,
        seed: 3,
        rate_per_sec: 0.0,
    };
    let mut cluster = Cluster::seed(&store, &config);
    for _ in 0..600 {
        cluster.step(&store);
    }
    // What printPod makes of each state `Cluster` writes (one container per pod); each is seen.
    let expected: BTreeSet<(&'static str, &'static str, &'static str)> = [
        // Unscheduled, unschedulable, and bound but not started.
        ("Pending", "0/1", "Pending"),
        ("Pending", "0/1", "ContainerCreating"),
        ("Running", "1/1", "Running"),
        ("Running", "0/1", "CrashLoopBackOff"),
        // `deletionTimestamp` set on a pod that has not finished.
        ("Running", "1/1", "Terminating"),
        // Evicted: the container's terminated reason wins over the pod's `Evicted`.
        ("Failed", "0/1", "ContainerStatusUnknown"),
    ]
    .into();
    // Pods deleted while starting or crash-looping may turn up too.
    let also = [
        ("Pending", "0/1", "Terminating"),
        ("Running", "0/1", "Terminating"),
    ];
    let c = client();
    let url = format!(
        "{}/api/v1/pods?watch=1&resourceVersion={from}&includeObject=Object",
        sim.url()
    );
    let mut w = Lines::open(&c, &url, TABLE).await;
    let mut seen = BTreeSet::new();
    let mut crash_restarts = Vec::new();
    while !expected.is_subset(&seen) {
        let e = w.event().await;
        let row = &e["object"]["rows"][0];
        let phase = row["object"]["status"]["phase"]
            .as_str()
            .unwrap_or_default();
        let key = (phase, cell(row, 1), cell(row, 2));
        let known = expected
            .iter()
            .chain(&also)
            .find(|k| **k == key)
            .unwrap_or_else(|| {
                panic!(
                    "unexpected row {key:?} for {} {}",
                    row["object"]["metadata"], row["object"]["status"]
                )
            });
        if known.2 == "CrashLoopBackOff" {
            crash_restarts.push(cell(row, 3).to_owned());
        }
        // Finished pods' rows say so (`podFailedConditions`).
        if phase == "Failed" {
            assert_eq!(row["conditions"][0]["reason"], "Failed", "{row}");
        } else {
            assert!(row.get("conditions").is_none(), "{row}");
        }
        seen.insert(*known);
    }
    // A crashed container has restarted at least once, and the cell says when it last did.
    assert!(
        crash_restarts
            .iter()
            .all(|r| r.ends_with(" ago)") && !r.starts_with('0')),
        "{crash_restarts:?}"
    );
}

/// The pods `Store::seed_pods` and the plain churn write carry a phase and running, ready
/// containers: the STATUS cell is the phase (`Succeeded` is not `Completed`: no container
/// terminated), READY counts both containers.
#[tokio::test]
async fn pod_rows_of_the_seeded_workload() {
    let sim = start(SimConfig::default()).await;
    sim.store().seed_pods(40, 5);
    let c = client();
    let t = get_table(
        &c,
        &format!("{}/api/v1/pods?includeObject=Object", sim.url()),
    )
    .await;
    let mut phases = BTreeSet::new();
    for row in t["rows"].as_array().unwrap() {
        let phase = row["object"]["status"]["phase"].as_str().unwrap();
        phases.insert(phase.to_owned());
        assert_eq!((cell(row, 1), cell(row, 2)), ("2/2", phase), "{row}");
        assert_eq!(
            cell(row, 5),
            row["object"]["status"]["podIPs"][0]["ip"].as_str().unwrap()
        );
        assert_eq!(cell(row, 8), "<none>");
    }
    assert_eq!(
        phases,
        ["Pending", "Running", "Succeeded"]
            .map(str::to_owned)
            .into()
    );
}

fn pod_with(name: &str, status: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}, "status": status})
}

#[tokio::test]
async fn only_the_first_table_of_a_watch_carries_the_column_definitions() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store();
    for name in ["a", "b"] {
        store
            .create(&pods(), pod_with(name, json!({"phase": "Running"})))
            .unwrap();
    }
    let c = client();
    let base = format!("{}/api/v1/namespaces/ns/pods", sim.url());
    let mut w = Lines::open(&c, &format!("{base}?watch=1"), TABLE).await;
    let first = w.event().await;
    assert_eq!(
        (first["type"].as_str(), first["object"]["kind"].as_str()),
        (Some("ADDED"), Some("Table"))
    );
    let columns = first["object"]["columnDefinitions"].as_array().unwrap();
    assert_eq!(columns.len(), 9);
    assert_eq!(
        first["object"]["rows"][0]["cells"]
            .as_array()
            .unwrap()
            .len(),
        9
    );
    // Later tables carry rows only: `"columnDefinitions": null`, as Go encodes a nil slice.
    let second = w.event().await;
    assert_eq!(cell(&second["object"]["rows"][0], 0), "b");
    assert_eq!(
        second["object"].get("columnDefinitions"),
        Some(&Value::Null)
    );
    store
        .create(&pods(), pod_with("c", json!({"phase": "Pending"})))
        .unwrap();
    let live = w.event().await;
    assert_eq!(
        (live["type"].as_str(), cell(&live["object"]["rows"][0], 2)),
        (Some("ADDED"), "Pending")
    );
    assert_eq!(live["object"].get("columnDefinitions"), Some(&Value::Null));
    assert_eq!(
        live["object"]["metadata"]["resourceVersion"],
        live["object"]["rows"][0]["object"]["metadata"]["resourceVersion"]
    );
    // Each watch starts again with the columns.
    let mut again = Lines::open(&c, &format!("{base}?watch=1"), TABLE).await;
    assert!(again.event().await["object"]["columnDefinitions"].is_array());

    // A bookmark is converted like any event, so when it comes first it carries the columns:
    // its row prints the empty pod, and keeps its metadata (with the initial-events-end
    // annotation) even when no object was asked for.
    let streaming = format!(
        "{}/api/v1/namespaces/empty/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&includeObject=None",
        sim.url()
    );
    let mut w = Lines::open(&c, &streaming, TABLE).await;
    let bookmark = w.event().await;
    assert_eq!(
        (
            bookmark["type"].as_str(),
            bookmark["object"]["kind"].as_str()
        ),
        (Some("BOOKMARK"), Some("Table"))
    );
    let t = &bookmark["object"];
    assert_eq!(t["columnDefinitions"].as_array().unwrap().len(), 9);
    assert_eq!(
        t["rows"][0]["cells"],
        json!([
            "",
            "0/0",
            "",
            "0",
            "<unknown>",
            "<none>",
            "<none>",
            "<none>",
            "<none>"
        ])
    );
    let meta = &t["rows"][0]["object"];
    assert_eq!(meta["kind"], "PartialObjectMetadata");
    assert_eq!(
        meta["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(
        t["metadata"]["resourceVersion"].as_str(),
        Some(store.resource_version().to_string().as_str())
    );
    let mut p = pod_with("late", json!({"phase": "Running"}));
    p["metadata"]["namespace"] = json!("empty");
    store.create(&pods(), p).unwrap();
    let e = w.event().await;
    assert_eq!(e["type"], "ADDED");
    assert_eq!(e["object"].get("columnDefinitions"), Some(&Value::Null));
    assert_eq!(cell(&e["object"]["rows"][0], 0), "late");
    assert!(e["object"]["rows"][0].get("object").is_none(), "{e}");
}

/// The ERROR event of a watch from a compacted version names the version asked for and the
/// oldest one a watch can still start from, not the current one.
#[tokio::test]
async fn a_too_old_watch_names_the_oldest_version_it_could_start_from() {
    let window = 5;
    for watch_cache in [true, false] {
        let sim = start(SimConfig {
            history_window: window,
            watch_cache,
            ..SimConfig::default()
        })
        .await;
        let store = sim.store();
        for i in 0..12 {
            store
                .create(&pods(), pod_with(&format!("p{i}"), json!({})))
                .unwrap();
        }
        // The history holds the last `window` events: watching from the version before the
        // oldest of them still works, one below that is too old.
        let oldest = store.resource_version() - window as u64;
        let c = client();
        let watch = |rv: u64| format!("{}/api/v1/pods?watch=1&resourceVersion={rv}", sim.url());
        let mut w = Lines::open(&c, &watch(oldest - 1), "application/json").await;
        let e = w.event().await;
        assert_eq!(
            (
                e["type"].as_str(),
                e["object"]["code"].as_u64(),
                e["object"]["reason"].as_str()
            ),
            (Some("ERROR"), Some(410), Some("Expired"))
        );
        let message = if watch_cache {
            // The watch cache's words (`getAllEventsSinceLocked`).
            format!("too old resource version: {} ({oldest})", oldest - 1)
        } else {
            // etcd's (`interpretWatchError`), without versions.
            "The resourceVersion for the provided watch is too old.".to_owned()
        };
        assert_eq!(e["object"]["message"], message.as_str());
        assert!(w.line().await.is_none(), "the stream ends after the error");

        let mut w = Lines::open(&c, &watch(oldest), "application/json").await;
        let e = w.event().await;
        assert_eq!(e["type"], "ADDED");
        assert_eq!(
            e["object"]["metadata"]["resourceVersion"],
            (oldest + 1).to_string()
        );
    }
}

/// The settings of an HTTP/2 connection, read from the server's first SETTINGS frame over a
/// cleartext (prior knowledge) connection: `(identifier, value)` pairs.
async fn http2_settings(addr: std::net::SocketAddr) -> Vec<(u16, u32)> {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    // The client preface, then an empty SETTINGS frame.
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let mut header = [0u8; 9];
    tokio::time::timeout(WAIT, tcp.read_exact(&mut header))
        .await
        .expect("no frame from the server")
        .unwrap();
    let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
    assert_eq!(
        (header[3], header[4]),
        (4, 0),
        "a SETTINGS frame, not an ack"
    );
    let mut payload = vec![0u8; len];
    tokio::time::timeout(WAIT, tcp.read_exact(&mut payload))
        .await
        .expect("a truncated frame")
        .unwrap();
    payload
        .chunks_exact(6)
        .map(|s| {
            (
                u16::from_be_bytes([s[0], s[1]]),
                u32::from_be_bytes([s[2], s[3], s[4], s[5]]),
            )
        })
        .collect()
}

#[tokio::test]
async fn http2_settings_are_the_apiservers() {
    let sim = start(SimConfig::default()).await;
    let settings = http2_settings(sim.addr()).await;
    let get = |id: u16| settings.iter().find(|(i, _)| *i == id).map(|(_, v)| *v);
    // SETTINGS_MAX_CONCURRENT_STREAMS: 100, as kube-apiserver's secure server sets it.
    assert_eq!(get(0x3), Some(100), "{settings:?}");
    // SETTINGS_INITIAL_WINDOW_SIZE and SETTINGS_MAX_FRAME_SIZE: 256 KiB.
    assert_eq!(get(0x4), Some(256 * 1024), "{settings:?}");
    assert_eq!(get(0x5), Some(256 * 1024), "{settings:?}");
}

/// `kubectl get pods` prints the server's STATUS cells as they are.
#[tokio::test]
async fn kubectl_prints_the_status_cells() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store();
    let running = json!({"running": {"startedAt": "2024-01-01T00:00:00Z"}});
    let cases = [
        (
            "crashing",
            json!({"phase": "Running", "containerStatuses": [{"name": "c", "ready": false, "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2024-01-01T00:00:00Z"}}}]}),
            ["0/1", "CrashLoopBackOff"],
        ),
        (
            "done",
            json!({"phase": "Succeeded", "containerStatuses": [{"name": "c", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}),
            ["0/1", "Completed"],
        ),
        (
            "killed",
            json!({"phase": "Running", "containerStatuses": [{"name": "c", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 137, "signal": 9}}}]}),
            ["0/1", "Signal:9"],
        ),
        (
            "serving",
            json!({"phase": "Running", "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0, "state": running}]}),
            ["1/1", "Running"],
        ),
    ];
    for (name, status, _) in &cases {
        store
            .create(&pods(), pod_with(name, status.clone()))
            .unwrap();
    }
    let mut init = pod_with(
        "starting",
        json!({"phase": "Pending", "initContainerStatuses": [{"name": "setup", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "PodInitializing"}}}]}),
    );
    init["spec"]["initContainers"] = json!([{"name": "setup", "image": "busybox"}]);
    store.create(&pods(), init).unwrap();

    let dir = std::env::temp_dir().join(format!(
        "kinformer-sim-printing-{}-{}",
        std::process::id(),
        sim.addr().port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("kubeconfig"), sim.kubeconfig_yaml()).unwrap();
    let out = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .args(["get", "pods", "-n", "ns"])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), out)
        .await
        .expect("kubectl did not finish")
        .expect("kubectl must be on PATH for this test");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = |name: &str| -> Vec<String> {
        stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} missing:\n{stdout}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    for (name, _, [ready, status]) in &cases {
        assert_eq!(printed(name)[1..3], [*ready, *status], "{stdout}");
    }
    assert_eq!(printed("starting")[1..3], ["0/1", "Init:0/1"], "{stdout}");
    // The restarts cell, with how long ago the last one was.
    assert_eq!(printed("crashing")[3], "4", "{stdout}");
    assert!(printed("crashing")[4].starts_with('('), "{stdout}");
}
