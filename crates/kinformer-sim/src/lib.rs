//! A simulated Kubernetes API server that speaks list/watch over real HTTP.
//!
//! `kinformer-sim` serves the Kubernetes REST API on 127.0.0.1 well enough that kinformer's client,
//! reflector and informer tests, its benches, its CLI's embedded default and `kubectl` itself run
//! against it unchanged. It is built for tests: it starts in milliseconds, is scripted in-process,
//! and misbehaves on request.
//!
//! What it does:
//! - **Storage like etcd**: objects of any resource (pods, services, configmaps, secrets,
//!   namespaces, nodes, apps deployments and friends, and any resource registered at run time with
//!   [`Store::register_crd`]), one global resource version bumped by every write, server-set
//!   `uid`, `creationTimestamp`, `generation` and `resourceVersion`, a bounded history (the
//!   compaction window) and consistent snapshots at past versions.
//! - **The REST API**: list with label and field selectors (and, on 1.36 with the alpha
//!   gate on, KEP-5866's shard selectors, [`SimConfig::sharded_list_and_watch`]),
//!   `limit`/`continue` pages from one
//!   snapshot, every `resourceVersion`/`resourceVersionMatch` mode as the real server reads it
//!   (exact reads for limited legacy lists, 410 when too old, 504 when too new, `resourceVersion=0`
//!   served whole from the watch cache, or paged by a server without one,
//!   [`SimConfig::watch_cache`]); watch with bookmarks shaped and timed like the watch cache's,
//!   timeouts, selector transitions, streaming lists (`sendInitialEvents`); create, replace, merge
//!   and strategic merge patch, delete with preconditions, `dryRun`, graceful deletion of pods
//!   and finalizers; the status subresource and `metadata.generation` kind by kind, as the
//!   registry's strategies keep them; namespace checks and pod defaults on create; content
//!   negotiation with
//!   metadata-only, `Table`, YAML and (for the built-in kinds) protobuf responses (406
//!   otherwise); gzip for large responses;
//!   discovery for `kubectl`; `Status` bodies for every error.
//! - **TLS and authentication**: HTTPS with a generated CA, bearer tokens, basic auth, client
//!   certificates ([`Auth`]).
//! - **Fault injection** ([`Faults`], and over HTTP with [`SimConfig::admin`]): closed, stalled,
//!   cut, malformed or oversized watch streams, 429/500/503 answers, forced 410s, compaction,
//!   slow chunks, dropped connections.
//! - **A test kit**: typed writes and reads of any k8s-openapi type ([`Store::create_typed`]
//!   and friends), bounded waits until the store holds what a client wrote
//!   ([`Store::wait_until`]) and until every open watch has been sent a version
//!   ([`SimServer::wait_until_watches_reach`]), and the log of requests received
//!   ([`SimServer::requests`]). `docs/testing.md` tests a controller with them.
//! - **Workloads**: realistic pods ([`Store::seed_pods`], [`generate_pod`]) and a deterministic
//!   churn of creates, updates and graceful deletes ([`Store::churn`], [`SimServer::set_churn`]).
//! - **A cluster that looks real** ([`Cluster`], [`SimServer::seed_cluster`]): nodes, namespaces,
//!   deployments with their replica sets and pods, kube-system, services, whose owner references
//!   and node names point at objects that exist, churned by rollouts, scaling, pods moving
//!   through their phases, crash loops, evictions and graceful deletions, deterministic for a
//!   seed. The `kinformer` CLI's embedded cluster and the examples run on it.
//!
//! The defaults are a real server's (bookmarks each minute, history compacted every five
//! minutes, Kubernetes 1.34); tests turn [`SimConfig`]'s knobs down when they need things sooner.
//!
//! What it does not do: CBOR, protobuf request bodies and protobuf `Table` and metadata forms
//! (406/415), JSON patch and server-side apply (415),
//! schema validation and most admission, aggregated discovery, authorization policies, garbage
//! collection, and persistence. `docs/sim.md` maps each behaviour to the real server's.
//!
//! # How the code is layered
//!
//! Each module uses only the modules listed after it, so a request's path through the code
//! runs one way, and nothing below the router knows a router or a server exists:
//! - `kit`: the test kit's typed store methods and waits, on top of the server and the store;
//! - `server`: the listener, TLS, connections and authentication of [`SimServer`], which hand
//!   every request to the `router`;
//! - `router`: picks the handler for a path, injects failures, negotiates the content type;
//! - the handlers: `api` (reads, lists and writes of a resource's objects), `watch`,
//!   `discovery`, `admin`;
//! - their HTTP plumbing: `request` (the query, the object a path names, selectors, versions),
//!   `response` (the body type, JSON and `Status` answers, gzip, streamed lists), `state` (what
//!   every handler shares), `config` ([`SimConfig`]);
//! - below HTTP: `cluster` (a folder of its own, layered the same way) and `workload` (seeded
//!   objects and their churn), `faults` (with `progress`, how far each open watch has got),
//!   `table`, `render`, `admission`, `validation`, `auth`,
//!   and at the bottom `store` (with `smp`, and `shard`: the shard selectors of lists and
//!   watches and the hash they select by) and `error`.
//!
//! # Example
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use kinformer_core::{ApiResource, Scope};
//! use kinformer_sim::{SimConfig, SimServer};
//!
//! let sim = SimServer::start(SimConfig::default()).await.unwrap();
//! let pods = ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced);
//! sim.store().seed_pods(3, 42);
//! assert_eq!(sim.store().list(&pods, None).len(), 3);
//!
//! // Any HTTP client now sees them at sim.url(), for example
//! // GET {url}/api/v1/pods?limit=2 or GET {url}/api/v1/pods?watch=true&resourceVersion=0.
//! assert!(sim.url().starts_with("http://127.0.0.1:"));
//!
//! // Make the next watch request fail with 410 Gone.
//! sim.faults().gone_next_watch();
//! sim.shutdown().await;
//! # }
//! ```

#![forbid(unsafe_code)]
// The store answers with `kinformer_core::Status` (the API's own error object), as the HTTP API
// does; failures are rare and off the hot path, so its size does not matter.
#![allow(clippy::result_large_err)]

mod admin;
mod admission;
mod api;
mod auth;
mod cluster;
mod config;
mod discovery;
mod error;
mod faults;
mod fieldmanager;
mod fields;
mod kit;
mod namespaces;
mod progress;
mod protobuf;
mod render;
mod request;
mod response;
mod router;
mod schema;
mod server;
mod shard;
mod smp;
mod state;
mod store;
mod table;
mod validation;
mod watch;
mod workload;

pub use api::{decode_continue_token, encode_continue_token};
pub use auth::Auth;
pub use cluster::{Cluster, ClusterConfig, ClusterWrite, WriteKind};
pub use config::{KubeVersion, SimConfig};
pub use error::Error;
pub use faults::{Faults, RequestKind};
pub use render::watch_event_line;
pub use server::SimServer;
pub use shard::shard_hash;
pub use state::{REQUEST_LOG_CAPACITY, RecordedRequest};
pub use store::Store;
pub use table::human_duration;
pub use workload::{ChurnConfig, ChurnHandle, generate_pod};
