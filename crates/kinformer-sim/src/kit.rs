//! The test kit: what a test of a controller needs beyond starting the server, seeding it and
//! turning fault knobs. Typed writes and reads of the store for any k8s-openapi resource type
//! (or any type that implements [`k8s_openapi::Resource`](kinformer_core::k8s_openapi::Resource)),
//! and bounded waits: until the store holds what a client wrote, and until every open watch has
//! been sent a version. `docs/testing.md` shows them in a whole test.

use std::time::Duration;

use kinformer_core::k8s_openapi::Resource;
use kinformer_core::{ApiResource, Status};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::time::Instant;

use crate::error::Error;
use crate::server::SimServer;
use crate::store::{Store, not_found, status};

/// The testing guide's Rust examples, compiled and run as doc tests so they never drift.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/testing.md")]
struct TestingGuide;

/// The resource a typed object is stored under.
fn resource_of<K>() -> ApiResource
where
    K: Resource,
    K::Scope: 'static,
{
    ApiResource::of::<K>()
}

/// A typed object as the JSON the store takes.
fn encode<K: Serialize>(api: &ApiResource, object: &K) -> Result<Value, Status> {
    serde_json::to_value(object).map_err(|e| {
        status(
            400,
            "BadRequest",
            format!("cannot encode the {} as JSON: {e}", api.kind),
        )
    })
}

/// A stored object as the type the caller asked for.
fn decode<K: DeserializeOwned>(api: &ApiResource, object: Value) -> Result<K, Status> {
    serde_json::from_value(object).map_err(|e| {
        status(
            500,
            "InternalError",
            format!(
                "the stored {} does not decode as {}: {e}",
                api.kind,
                std::any::type_name::<K>()
            ),
        )
    })
}

/// Typed writes and reads: the JSON methods of [`Store`] for a typed object, which name its
/// resource themselves (from [`k8s_openapi::Resource`](kinformer_core::k8s_openapi::Resource))
/// and answer with the stored object decoded as the same type, server-set fields included. A
/// custom resource gets them by implementing that trait for its type; JSON objects of any
/// resource keep using [`Store::create`] and friends.
impl Store {
    /// Creates a typed object, as [`Store::create`] does: 409 `AlreadyExists` if it exists, 404
    /// `NotFound` for a resource the server does not serve (register custom resources first with
    /// [`Store::register_crd`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    /// use kinformer_sim::{SimConfig, SimServer};
    ///
    /// let sim = SimServer::start(SimConfig::default()).await.unwrap();
    /// let cm = ConfigMap {
    ///     metadata: ObjectMeta { name: Some("settings".into()), namespace: Some("shop".into()), ..Default::default() },
    ///     data: Some([("mode".to_owned(), "fast".to_owned())].into()),
    ///     ..Default::default()
    /// };
    /// let stored = sim.store().create_typed(&cm).unwrap();
    /// assert_eq!(stored.metadata.resource_version, Some(sim.store().resource_version().to_string()));
    /// assert!(stored.metadata.uid.is_some());
    /// assert_eq!(sim.store().create_typed(&cm).unwrap_err().code, 409);
    /// # }
    /// ```
    pub fn create_typed<K>(&self, object: &K) -> Result<K, Status>
    where
        K: Resource + Serialize + DeserializeOwned,
        K::Scope: 'static,
    {
        let api = resource_of::<K>();
        let created = self.create(&api, encode(&api, object)?)?;
        decode(&api, created)
    }

    /// Replaces a typed object, as [`Store::update`] does: 404 if it is missing; 409 `Conflict`
    /// if its `metadata.resourceVersion` is set and is not the stored one.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    /// use kinformer_sim::{SimConfig, SimServer};
    ///
    /// let sim = SimServer::start(SimConfig::default()).await.unwrap();
    /// let store = sim.store();
    /// let mut cm = store
    ///     .create_typed(&ConfigMap {
    ///         metadata: ObjectMeta { name: Some("settings".into()), ..Default::default() },
    ///         ..Default::default()
    ///     })
    ///     .unwrap();
    /// let stale = cm.clone();
    /// cm.data = Some([("mode".to_owned(), "safe".to_owned())].into());
    /// let updated = store.update_typed(&cm).unwrap();
    /// assert_eq!(updated.data, cm.data);
    /// // The first update moved the resourceVersion on: a write from the old one conflicts.
    /// assert_eq!(store.update_typed(&stale).unwrap_err().code, 409);
    /// # }
    /// ```
    pub fn update_typed<K>(&self, object: &K) -> Result<K, Status>
    where
        K: Resource + Serialize + DeserializeOwned,
        K::Scope: 'static,
    {
        let api = resource_of::<K>();
        let updated = self.update(&api, encode(&api, object)?)?;
        decode(&api, updated)
    }

    /// Creates a typed object, or replaces the stored one whatever its resourceVersion: the
    /// object is stored as given either way, which is what seeding a test wants.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use k8s_openapi::api::core::v1::Namespace;
    /// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    /// use kinformer_sim::{SimConfig, SimServer};
    ///
    /// let sim = SimServer::start(SimConfig::default()).await.unwrap();
    /// let mut shop = Namespace {
    ///     metadata: ObjectMeta { name: Some("shop".into()), ..Default::default() },
    ///     ..Default::default()
    /// };
    /// let first = sim.store().create_or_replace_typed(&shop).unwrap();
    /// shop.metadata.labels = Some([("team".to_owned(), "web".to_owned())].into());
    /// let second = sim.store().create_or_replace_typed(&shop).unwrap();
    /// assert_eq!(second.metadata.uid, first.metadata.uid, "replaced, not created again");
    /// assert_eq!(second.metadata.labels, shop.metadata.labels);
    /// # }
    /// ```
    pub fn create_or_replace_typed<K>(&self, object: &K) -> Result<K, Status>
    where
        K: Resource + Serialize + DeserializeOwned,
        K::Scope: 'static,
    {
        let api = resource_of::<K>();
        let mut value = encode(&api, object)?;
        // Whatever version the object was read at, it replaces what is stored.
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        let stored = match self.create(&api, value.clone()) {
            Err(s) if s.code == 409 && s.reason == "AlreadyExists" => self.update(&api, value)?,
            other => other?,
        };
        decode(&api, stored)
    }

    /// Applies a JSON merge patch to a typed object, as [`Store::patch`] does, and answers with
    /// the patched object: the way to change one field (a pod's phase, a status condition)
    /// without writing the whole object.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_sim::{SimConfig, SimServer, generate_pod};
    ///
    /// let sim = SimServer::start(SimConfig::default()).await.unwrap();
    /// let pod: Pod = serde_json::from_value(generate_pod(0, 1)).unwrap();
    /// let pod = sim.store().create_typed(&pod).unwrap();
    /// let (namespace, name) = (pod.metadata.namespace.as_deref(), pod.metadata.name.as_deref().unwrap());
    /// let failed = sim
    ///     .store()
    ///     .patch_typed::<Pod>(namespace, name, serde_json::json!({"status": {"phase": "Failed"}}))
    ///     .unwrap();
    /// assert_eq!(failed.status.unwrap().phase.as_deref(), Some("Failed"));
    /// # }
    /// ```
    pub fn patch_typed<K>(
        &self,
        namespace: Option<&str>,
        name: &str,
        merge_patch: Value,
    ) -> Result<K, Status>
    where
        K: Resource + DeserializeOwned,
        K::Scope: 'static,
    {
        let api = resource_of::<K>();
        let patched = self.patch(&api, namespace, name, merge_patch)?;
        decode(&api, patched)
    }

    /// Deletes a typed object at once, as [`Store::delete`] does, and answers with its last
    /// state, which carries the delete's resource version. 404 if it is missing.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_sim::{SimConfig, SimServer};
    ///
    /// let sim = SimServer::start(SimConfig::default()).await.unwrap();
    /// let store = sim.store();
    /// store.seed_pods(1, 1);
    /// let pod = store.list_typed::<Pod>(None).unwrap().remove(0);
    /// let name = pod.metadata.name.as_deref().unwrap();
    /// let gone = store.delete_typed::<Pod>(pod.metadata.namespace.as_deref(), name).unwrap();
    /// assert_eq!(gone.metadata.resource_version, Some(store.resource_version().to_string()));
    /// assert!(store.list_typed::<Pod>(None).unwrap().is_empty());
    /// # }
    /// ```
    pub fn delete_typed<K>(&self, namespace: Option<&str>, name: &str) -> Result<K, Status>
    where
        K: Resource + DeserializeOwned,
        K::Scope: 'static,
    {
        let api = resource_of::<K>();
        let deleted = self.delete(&api, namespace, name)?;
        decode(&api, deleted)
    }

    /// The stored object, decoded: 404 `NotFound` if there is none, as a `GET` answers.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use k8s_openapi::api::core::v1::Namespace;
    /// use kinformer_sim::{SimConfig, SimServer};
    ///
    /// let sim = SimServer::start(SimConfig::default()).await.unwrap();
    /// sim.store().seed_pods(1, 1); // creates the pods' namespaces too
    /// let default = sim.store().get_typed::<Namespace>(None, "default").unwrap();
    /// assert_eq!(default.metadata.name.as_deref(), Some("default"));
    /// assert_eq!(sim.store().get_typed::<Namespace>(None, "nope").unwrap_err().code, 404);
    /// # }
    /// ```
    pub fn get_typed<K>(&self, namespace: Option<&str>, name: &str) -> Result<K, Status>
    where
        K: Resource + DeserializeOwned,
        K::Scope: 'static,
    {
        let api = resource_of::<K>();
        let object = self
            .get(&api, namespace, name)
            .ok_or_else(|| not_found(&api, name))?;
        decode(&api, object)
    }

    /// Every stored object of the type (in one namespace, or all), decoded, sorted by namespace
    /// and name.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_sim::{SimConfig, SimServer};
    ///
    /// let sim = SimServer::start(SimConfig::default()).await.unwrap();
    /// sim.store().seed_pods(10, 7);
    /// let pods = sim.store().list_typed::<Pod>(None).unwrap();
    /// assert_eq!(pods.len(), 10);
    /// assert!(pods.iter().all(|p| p.status.is_some()));
    /// # }
    /// ```
    pub fn list_typed<K>(&self, namespace: Option<&str>) -> Result<Vec<K>, Status>
    where
        K: Resource + DeserializeOwned,
        K::Scope: 'static,
    {
        let api = resource_of::<K>();
        self.list(&api, namespace)
            .into_iter()
            .map(|o| decode(&api, o))
            .collect()
    }

    /// Waits until `condition` holds for the store, checking it now and after every write (over
    /// HTTP or in-process), for at most `timeout`: the way a test waits for what the client
    /// under test writes, without sleeping. [`Error::Timeout`] if it never held.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_sim::{SimConfig, SimServer};
    ///
    /// let sim = SimServer::start(SimConfig::default()).await.unwrap();
    /// let store = sim.store();
    /// // Here the writer is a task of the test; in a real test it is the controller under test.
    /// let writer = store.clone();
    /// tokio::spawn(async move { writer.seed_pods(3, 1) });
    /// store
    ///     .wait_until(Duration::from_secs(10), |s| s.list_typed::<Pod>(None).is_ok_and(|p| p.len() == 3))
    ///     .await
    ///     .unwrap();
    /// # }
    /// ```
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut condition: impl FnMut(&Store) -> bool,
    ) -> Result<(), Error> {
        let started = Instant::now();
        let deadline = started + timeout;
        let mut writes = self.subscribe();
        // Bounded by the deadline.
        loop {
            // Marked seen before the check, so that a write made during it wakes the next wait.
            writes.borrow_and_update();
            if condition(self) {
                return Ok(());
            }
            match tokio::time::timeout_at(deadline, writes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => {
                    return Err(Error::Timeout {
                        waited: started.elapsed(),
                        condition: format!(
                            "a condition on the store (at resourceVersion {})",
                            self.resource_version()
                        ),
                    });
                }
            }
        }
    }
}

impl SimServer {
    /// Waits until at least one watch is open and every open watch has been sent every event up
    /// to resourceVersion `rv`, for at most `timeout`; [`Error::Timeout`] otherwise.
    ///
    /// A watch counts from the moment its request is accepted until its stream ends (a watch
    /// that a fault ends stops counting). "Sent" means handed to the connection: the events
    /// that watch selects are on their way to the client, those it does not select skipped,
    /// and its initial events, for a watch that has them, all sent. Whether the client has
    /// read and handled them is for the test to check on the client's side.
    ///
    /// Use it to know a client's watch is open and caught up before a fault that needs one
    /// (cutting a stream mid-line, stalling it), or to wait out a stall. Pass
    /// [`Store::resource_version`] for "everything written so far".
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    /// use kinformer_sim::{SimConfig, SimServer};
    ///
    /// let sim = SimServer::start(SimConfig::default()).await.unwrap();
    /// sim.store().seed_pods(5, 1);
    /// let rv = sim.store().resource_version();
    ///
    /// // Any client watching from the start; here a bare HTTP/1.0 request, read by no one.
    /// use tokio::io::AsyncWriteExt as _;
    /// let mut watch = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
    /// watch.write_all(b"GET /api/v1/pods?watch=true HTTP/1.0\r\n\r\n").await.unwrap();
    ///
    /// sim.wait_until_watches_reach(rv, Duration::from_secs(10)).await.unwrap();
    /// # }
    /// ```
    pub async fn wait_until_watches_reach(&self, rv: u64, timeout: Duration) -> Result<(), Error> {
        let faults = self.faults();
        let progress = &faults.state.watches;
        let started = Instant::now();
        let deadline = started + timeout;
        let mut changes = progress.subscribe();
        // Bounded by the deadline.
        loop {
            // Marked seen before the check, so that progress made during it wakes the next wait.
            changes.borrow_and_update();
            let reached = progress.reached();
            if !reached.is_empty() && reached.iter().all(|r| *r >= rv) {
                return Ok(());
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => {
                    let reached = progress.reached();
                    let slowest = reached.iter().min().copied();
                    return Err(Error::Timeout {
                        waited: started.elapsed(),
                        condition: match slowest {
                            None => format!(
                                "a watch to reach resourceVersion {rv}, but no watch is open"
                            ),
                            Some(slowest) => format!(
                                "every open watch to reach resourceVersion {rv}: {} open, the slowest at {slowest}",
                                reached.len()
                            ),
                        },
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncWriteExt as _;
    use tokio::net::TcpStream;

    use crate::{Error, SimConfig, SimServer};

    /// The bound on every wait that is meant to succeed.
    const WAIT: Duration = Duration::from_secs(10);

    /// Opens a watch over HTTP/1.0 and never reads it.
    async fn open_watch(sim: &SimServer, path_and_query: &str) -> TcpStream {
        let mut stream = TcpStream::connect(sim.addr()).await.unwrap();
        let request = format!("GET {path_and_query} HTTP/1.0\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        stream
    }

    #[tokio::test]
    async fn watches_reach_what_is_written_unless_stalled() {
        let sim = SimServer::start(SimConfig::default()).await.unwrap();
        let store = sim.store();
        store.seed_pods(3, 1);
        let _pods = open_watch(&sim, "/api/v1/pods?watch=true").await;
        sim.wait_until_watches_reach(store.resource_version(), WAIT)
            .await
            .unwrap();
        // A watch that selects none of the events to come moves on as well.
        let from = store.resource_version();
        let _nodes = open_watch(
            &sim,
            &format!("/api/v1/nodes?watch=true&resourceVersion={from}"),
        )
        .await;
        store.seed_pods(6, 1);
        sim.wait_until_watches_reach(store.resource_version(), WAIT)
            .await
            .unwrap();

        // The pods watch is sent nothing for an hour: it has not reached the next write, the
        // nodes watch has.
        sim.faults().stall_watches(Duration::from_secs(3600));
        store.seed_pods(7, 1);
        let err = sim
            .wait_until_watches_reach(store.resource_version(), Duration::from_millis(50))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        assert!(err.to_string().contains("the slowest at"), "{err}");
    }

    #[tokio::test]
    async fn with_no_watch_open_the_wait_times_out_and_says_so() {
        let sim = SimServer::start(SimConfig::default()).await.unwrap();
        let err = sim
            .wait_until_watches_reach(0, Duration::from_millis(10))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no watch is open"), "{err}");
    }

    #[tokio::test]
    async fn the_waits_are_send() {
        fn send<T: Send>(_: T) {}
        let sim = SimServer::start(SimConfig::default()).await.unwrap();
        let store = sim.store();
        send(sim.wait_until_watches_reach(1, WAIT));
        send(store.wait_until(WAIT, |_| true));
    }

    /// The testing guide shows its whole test exactly as the test file that runs it.
    #[test]
    fn the_testing_guide_shows_the_guide_test_verbatim() {
        let guide = include_str!("../../../docs/testing.md");
        let test = include_str!("../tests/testing_guide.rs");
        assert!(
            guide.contains(test),
            "docs/testing.md must show crates/kinformer-sim/tests/testing_guide.rs verbatim"
        );
    }
}
