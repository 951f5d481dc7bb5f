//! The soak's writer: seeded creates, updates and deletes of pods over HTTP, across namespaces,
//! with graceful deletions, finalizers, names used again, and pods entering and leaving the
//! label selector.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The namespaces the soak writes in.
pub(crate) const NAMESPACES: [&str; 4] = ["chaos-a", "chaos-b", "chaos-c", "chaos-d"];
/// The label the selector-filtered informer selects on.
pub(crate) const TIER: &str = "chaos/tier";
/// The selector-filtered informer's label selector.
pub(crate) const SELECTOR: &str = "chaos/tier=in";
/// The finalizer the writer puts on some pods and takes off after their delete.
const FINALIZER: &str = "kinformer.example/chaos";

/// What the writer did, by operation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Writes {
    /// Pods created.
    pub creates: u64,
    /// Pods created under the name of a pod deleted before.
    pub recreates: u64,
    /// Label and annotation changes (some move a pod into or out of the selector).
    pub updates: u64,
    /// Deletes with the pod's grace period (the pod turns Terminating first).
    pub graceful_deletes: u64,
    /// Deletes with `gracePeriodSeconds=0`.
    pub immediate_deletes: u64,
    /// Finalizers removed from deleted pods, which deletes them.
    pub finalizers_removed: u64,
    /// Requests the server refused (injected failures, conflicts, a pod already gone) or that
    /// a dropped connection cut.
    pub refused: u64,
}

#[derive(Debug, Clone)]
struct Pod {
    namespace: &'static str,
    name: String,
    finalizer: bool,
}

/// The seeded writer. It keeps its own idea of which pods exist; the server is the truth, and a
/// refused write only corrects that idea.
pub(crate) struct Writer {
    addr: SocketAddr,
    rng: fastrand::Rng,
    seed: u64,
    next_index: usize,
    live: Vec<Pod>,
    /// Deleted with a finalizer: they stay, Terminating, until the writer removes it.
    held: Vec<Pod>,
    gone: Vec<Pod>,
    target: usize,
    pub(crate) writes: Writes,
}

impl Writer {
    pub(crate) fn new(addr: SocketAddr, seed: u64, target: usize) -> Self {
        Self {
            addr,
            rng: fastrand::Rng::with_seed(seed),
            seed,
            next_index: 0,
            live: Vec::new(),
            held: Vec::new(),
            gone: Vec::new(),
            target,
            writes: Writes::default(),
        }
    }

    /// One write, chosen at random (creates weigh more while there are fewer pods than the
    /// target).
    pub(crate) async fn step(&mut self) {
        let roll = self.rng.u32(0..100);
        let create_share = if self.live.len() < self.target {
            40
        } else {
            15
        };
        if roll < create_share || self.live.is_empty() {
            self.create().await;
        } else if roll < 70 {
            self.update().await;
        } else if roll < 90 || self.held.is_empty() {
            self.delete().await;
        } else {
            self.release().await;
        }
    }

    pub(crate) async fn create(&mut self) {
        let reuse = !self.gone.is_empty() && self.rng.u32(0..100) < 15;
        let (namespace, name) = if reuse {
            let i = self.rng.usize(0..self.gone.len());
            let p = self.gone.swap_remove(i);
            (p.namespace, p.name)
        } else {
            self.next_index += 1;
            (
                NAMESPACES[self.rng.usize(0..NAMESPACES.len())],
                format!("chaos-{}-{}", self.seed, self.next_index),
            )
        };
        let finalizer = self.rng.u32(0..100) < 20;
        let mut pod = kinformer_sim::generate_pod(self.next_index, self.seed);
        let meta = &mut pod["metadata"];
        meta["name"] = json!(name);
        meta["namespace"] = json!(namespace);
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generateName",
        ] {
            if let Some(m) = meta.as_object_mut() {
                m.remove(field);
            }
        }
        meta["labels"][TIER] = json!(self.tier());
        if finalizer {
            meta["finalizers"] = json!([FINALIZER]);
        }
        pod["spec"]["terminationGracePeriodSeconds"] = json!(self.rng.u32(1..=3));
        let path = format!("/api/v1/namespaces/{namespace}/pods");
        match request(self.addr, "POST", &path, Some(("application/json", &pod))).await {
            Some(201) => {
                self.writes.creates += 1;
                if reuse {
                    self.writes.recreates += 1;
                }
                self.live.push(Pod {
                    namespace,
                    name,
                    finalizer,
                });
            }
            _ => {
                self.writes.refused += 1;
                if reuse {
                    // Perhaps still terminating; try the name again later.
                    self.gone.push(Pod {
                        namespace,
                        name,
                        finalizer,
                    });
                }
            }
        }
    }

    fn tier(&mut self) -> &'static str {
        if self.rng.bool() { "in" } else { "out" }
    }

    async fn update(&mut self) {
        let i = self.rng.usize(0..self.live.len());
        let mut patch =
            json!({"metadata": {"annotations": {"chaos/step": self.rng.u64(..).to_string()}}});
        if self.rng.u32(0..100) < 40 {
            patch["metadata"]["labels"] = json!({ TIER: self.tier() });
        }
        let p = &self.live[i];
        let path = format!("/api/v1/namespaces/{}/pods/{}", p.namespace, p.name);
        match request(
            self.addr,
            "PATCH",
            &path,
            Some(("application/merge-patch+json", &patch)),
        )
        .await
        {
            Some(200) => self.writes.updates += 1,
            Some(404) => {
                // Deleted meanwhile (a grace period ended); forget it.
                self.writes.refused += 1;
                let p = self.live.swap_remove(i);
                self.gone.push(p);
            }
            _ => self.writes.refused += 1,
        }
    }

    async fn delete(&mut self) {
        let i = self.rng.usize(0..self.live.len());
        let immediate = self.rng.u32(0..100) < 30;
        let p = &self.live[i];
        let mut path = format!("/api/v1/namespaces/{}/pods/{}", p.namespace, p.name);
        if immediate {
            path.push_str("?gracePeriodSeconds=0");
        }
        match request(self.addr, "DELETE", &path, None).await {
            Some(200 | 202) => {
                if immediate {
                    self.writes.immediate_deletes += 1;
                } else {
                    self.writes.graceful_deletes += 1;
                }
                let p = self.live.swap_remove(i);
                if p.finalizer {
                    self.held.push(p);
                } else {
                    self.gone.push(p);
                }
            }
            Some(404) => {
                self.writes.refused += 1;
                let p = self.live.swap_remove(i);
                self.gone.push(p);
            }
            _ => self.writes.refused += 1,
        }
    }

    /// Removes the finalizer of a deleted pod, which deletes it (once its grace period is over,
    /// or at once if it is over already).
    async fn release(&mut self) {
        let i = self.rng.usize(0..self.held.len());
        let p = &self.held[i];
        let path = format!("/api/v1/namespaces/{}/pods/{}", p.namespace, p.name);
        let patch = json!({"metadata": {"finalizers": null}});
        match request(
            self.addr,
            "PATCH",
            &path,
            Some(("application/merge-patch+json", &patch)),
        )
        .await
        {
            Some(200) => {
                self.writes.finalizers_removed += 1;
                let p = self.held.swap_remove(i);
                self.gone.push(p);
            }
            Some(404) => {
                self.writes.refused += 1;
                let p = self.held.swap_remove(i);
                self.gone.push(p);
            }
            _ => self.writes.refused += 1,
        }
    }
}

/// One HTTP/1.1 request on a connection of its own; the status code, or `None` if the
/// connection failed (a dropped connection is one of the faults).
pub(crate) async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<(&str, &Value)>,
) -> Option<u16> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await.ok()?;
        let bytes = body
            .map(|(_, v)| serde_json::to_vec(v).unwrap_or_default())
            .unwrap_or_default();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nConnection: close\r\nContent-Length: {}\r\n",
            bytes.len()
        );
        if let Some((content_type, _)) = body {
            head.push_str(&format!("Content-Type: {content_type}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await.ok()?;
        stream.write_all(&bytes).await.ok()?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.ok()?;
        let line = response.split(|b| *b == b'\n').next()?;
        let line = std::str::from_utf8(line).ok()?;
        line.split(' ').nth(1)?.parse().ok()
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .ok()
        .flatten()
}
