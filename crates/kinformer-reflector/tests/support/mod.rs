//! What the reflector's HTTP tests share: a simulated server, a client for its pods, a store
//! that records the protocol calls, and readers of the requests the server saw.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_client::{Api, Client, Config as ClientConfig};
use kinformer_core::{
    ApiResource, CacheRead, Object, ReflectorStore, Scope, StoreError, StoreEvent,
};
use kinformer_indexer::Indexer;
use kinformer_reflector::{BackoffConfig, Config, Reflector, ReflectorHandle, StreamingList};
use kinformer_sim::{RecordedRequest, SimConfig, SimServer};
use serde_json::json;

pub const PODS_PATH: &str = "/api/v1/pods";

pub fn pods_resource() -> ApiResource {
    ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced)
}

pub async fn sim() -> SimServer {
    SimServer::start(SimConfig::default()).await.unwrap()
}

/// A server started as with `--watch-cache=false`: the only kind whose lists at
/// `resourceVersion=0` honour `limit`, so the first list is paged.
pub async fn paging_sim() -> SimServer {
    SimServer::start(SimConfig {
        watch_cache: false,
        ..SimConfig::default()
    })
    .await
    .unwrap()
}

pub fn pods_api(sim: &SimServer) -> Api<Pod> {
    Api::all(Client::new(ClientConfig::new(sim.url())).unwrap())
}

/// A reflector configuration for tests: fixed seed, quick backoff.
pub fn config() -> Config {
    Config {
        name: "pods".into(),
        seed: Some(7),
        // These tests check list-then-watch; streaming lists (the default) have tests of their own.
        streaming_list: StreamingList::Off,
        backoff: BackoffConfig {
            initial: Duration::from_millis(5),
            max: Duration::from_millis(50),
            ..BackoffConfig::default()
        },
        ..Config::default()
    }
}

/// An indexer behind a log of every protocol call the reflector made.
#[derive(Default)]
pub struct Recorder {
    pub cache: Indexer<Pod>,
    log: Mutex<Vec<String>>,
    /// Every resourceVersion seen per key, in order (events and relist pages alike).
    history: Mutex<BTreeMap<String, Vec<u64>>>,
}

impl Recorder {
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    fn note(&self, entry: String) {
        self.log.lock().unwrap().push(entry);
    }

    fn saw(&self, object: &Pod) {
        let rv = object.resource_version().unwrap_or("0").parse().unwrap();
        self.history
            .lock()
            .unwrap()
            .entry(object.key().to_string())
            .or_default()
            .push(rv);
    }

    pub fn history(&self) -> BTreeMap<String, Vec<u64>> {
        self.history.lock().unwrap().clone()
    }

    /// Every key the cache holds, with its resourceVersion.
    pub fn state(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        self.cache.for_each(&mut |o: &Arc<Pod>| {
            out.insert(
                o.key().to_string(),
                o.resource_version().unwrap_or_default().to_owned(),
            );
        });
        out
    }
}

impl ReflectorStore<Pod> for Recorder {
    fn apply(&self, event: StoreEvent<Pod>) -> Result<(), StoreError> {
        match &event {
            StoreEvent::Added(o) => self.note(format!("add {}", o.name())),
            StoreEvent::Modified(o) => self.note(format!("update {}", o.name())),
            StoreEvent::Deleted(o) => self.note(format!("delete {}", o.name())),
            StoreEvent::RelistBegin => self.note("begin".into()),
            StoreEvent::RelistPage(page) => self.note(format!("page {}", page.len())),
            StoreEvent::RelistEnd(_) => self.note("end".into()),
            StoreEvent::RelistAbandoned => self.note("abandon".into()),
            StoreEvent::Resync => {
                self.note("resync".into());
                return Ok(());
            }
            StoreEvent::Bookmark(rv) => {
                self.note(format!("bookmark {rv}"));
                return Ok(());
            }
        }
        match &event {
            StoreEvent::Added(o) | StoreEvent::Modified(o) | StoreEvent::Deleted(o) => self.saw(o),
            StoreEvent::RelistPage(page) => page.iter().for_each(|o| self.saw(o)),
            _ => {}
        }
        self.cache.apply(event)
    }
    fn poll_ready(&self, _: &mut Context<'_>) -> Poll<Result<(), StoreError>> {
        Poll::Ready(Ok(()))
    }
}

/// Every key the server holds for pods, with its resourceVersion.
pub fn server_state(sim: &SimServer) -> BTreeMap<String, String> {
    sim.store()
        .list(&pods_resource(), None)
        .into_iter()
        .map(|p| {
            let m = &p["metadata"];
            (
                format!(
                    "{}/{}",
                    m["namespace"].as_str().unwrap(),
                    m["name"].as_str().unwrap()
                ),
                m["resourceVersion"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

pub fn create_pod(sim: &SimServer, name: &str) -> String {
    let created = sim
        .store()
        .create(
            &pods_resource(),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}}),
        )
        .unwrap();
    created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Writes a config map: the server's version moves on without a pod event.
pub fn move_on_without_pods(sim: &SimServer) {
    let configmaps = ApiResource::new("", "v1", "ConfigMap", "configmaps", Scope::Namespaced);
    let name = format!("c{}", sim.store().resource_version());
    sim.store()
        .create(
            &configmaps,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}),
        )
        .unwrap();
}

/// A simulated server with some pods, and a reflector from it into a [`Recorder`], running.
pub struct Rig {
    pub sim: SimServer,
    pub store: Arc<Recorder>,
    pub handle: ReflectorHandle,
    run: tokio::task::JoinHandle<kinformer_reflector::Result<()>>,
}

impl Rig {
    /// `pods` generated pods on a fresh server, and the reflector started with `config`.
    pub async fn start(pods: usize, config: Config) -> Self {
        Self::start_armed(pods, config, |_| {}).await
    }

    /// As [`start`](Self::start), with `arm` turning the server's fault knobs before the
    /// reflector's first request.
    pub async fn start_armed(pods: usize, config: Config, arm: impl FnOnce(&SimServer)) -> Self {
        Self::start_on(sim().await, pods, config, arm)
    }

    /// As [`start_armed`](Self::start_armed), on `sim`.
    pub fn start_on(
        sim: SimServer,
        pods: usize,
        config: Config,
        arm: impl FnOnce(&SimServer),
    ) -> Self {
        sim.store().seed_pods(pods, 1);
        arm(&sim);
        let store = Arc::new(Recorder::default());
        let (handle, run) = spawn(Reflector::new(pods_api(&sim), Arc::clone(&store), config));
        Self {
            sim,
            store,
            handle,
            run,
        }
    }

    /// Stops the reflector; it must stop cleanly.
    pub async fn stop(self) {
        self.handle.stop();
        self.run.await.unwrap().unwrap();
    }
}

/// Starts `reflector` on its own task.
pub fn spawn<L>(
    reflector: Reflector<Pod, L, Arc<Recorder>>,
) -> (
    ReflectorHandle,
    tokio::task::JoinHandle<kinformer_reflector::Result<()>>,
)
where
    L: kinformer_core::ListWatch<Pod> + 'static,
{
    let handle = reflector.handle();
    (handle, tokio::spawn(async move { reflector.run().await }))
}

/// Waits for `cond`, checking every few milliseconds, for at most 20 s.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..4000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for {what}");
}

/// The pod list and watch requests the server saw, each summarised as `list rv=0 limit=500`,
/// `list continue`, `watch rv=12`, `watch rv= initial`.
pub fn pod_requests(sim: &SimServer) -> Vec<String> {
    sim.requests()
        .iter()
        .filter(|r| r.path == PODS_PATH)
        .map(summary)
        .collect()
}

pub fn summary(r: &RecordedRequest) -> String {
    let mut s = String::from(if r.is_watch() { "watch" } else { "list" });
    if r.param("continue").is_some() {
        s.push_str(" continue");
    } else if let Some(rv) = r.param("resourceVersion") {
        s.push_str(&format!(" rv={rv}"));
    } else {
        s.push_str(" rv=");
    }
    if let Some(limit) = r.param("limit") {
        s.push_str(&format!(" limit={limit}"));
    }
    if r.param("sendInitialEvents") == Some("true") {
        s.push_str(" initial");
    }
    s
}

/// The last watch request the server saw.
pub fn last_watch(sim: &SimServer) -> RecordedRequest {
    sim.requests()
        .into_iter()
        .rfind(|r| r.path == PODS_PATH && r.is_watch())
        .expect("a watch")
}

pub fn watches(sim: &SimServer) -> usize {
    pod_requests(sim)
        .iter()
        .filter(|r| r.starts_with("watch"))
        .count()
}
