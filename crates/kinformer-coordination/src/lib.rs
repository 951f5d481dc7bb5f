//! Coordination between replicas through `coordination.k8s.io/v1` Leases: leader election.
//!
//! What it does:
//! - [`LeaseStore`]: the seam, what the coordination needs from Leases (get, create, update
//!   with optimistic concurrency, delete, list by label), with errors that tell apart not
//!   found, a conflict (someone else wrote first) and other failures. Implemented over HTTP by
//!   [`kinformer_client::Api<Lease>`](kinformer_client::Api) and in memory by
//!   [`MemoryLeaseStore`].
//! - [`LeaderElector`]: client-go's `tools/leaderelection` on a Lease: one leader among
//!   candidates, renewals, take-over of an expired or released Lease, callbacks.
//!
//! What it does not: shard membership (yet), coordinated leader election (`LeaseCandidate`, `strategy`,
//! `preferredHolder`), events, health checks, or metrics. It reads no clock of another machine:
//! every decision rests on this process's monotonic clock ([`tokio::time::Instant`]). The
//! wall-clock times it writes into Leases (`acquireTime`, `renewTime`) are for people and
//! other clients; a Lease held by another counts as expired only when its record has not
//! changed for its `leaseDurationSeconds` as measured locally since this process last saw it
//! change, as client-go does with its `observedTime`. Clocks may disagree about the time of
//! day; they are assumed to run at about the same rate.
//!
//! # Example
//!
//! Two candidates in one process, over the in-memory store (over HTTP, each would hold an
//! `Api::<Lease>::namespaced(client, namespace)` instead):
//!
//! ```
//! use kinformer_coordination::{LeaderElectionConfig, LeaderElector, MemoryLeaseStore};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let store = MemoryLeaseStore::new();
//! let mut statuses = Vec::new();
//! let mut stops = Vec::new();
//! for identity in ["a", "b"] {
//!     let config = LeaderElectionConfig::new("controller", identity);
//!     let elector = LeaderElector::new(store.clone(), config).unwrap();
//!     statuses.push(elector.status());
//!     let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//!     stops.push(stop);
//!     tokio::spawn(elector.run(async { stopped.await.ok(); }));
//! }
//! // Wait until both have seen a leader: they name the same one, and only it leads.
//! for status in &mut statuses {
//!     while status.leader().is_none() {
//!         status.changed().await;
//!     }
//! }
//! assert_eq!(statuses[0].leader(), statuses[1].leader());
//! assert_eq!(statuses.iter().filter(|s| s.is_leader()).count(), 1);
//! # }
//! ```

#![forbid(unsafe_code)]

mod elector;
mod error;
mod store;
mod timing;

pub use elector::{ElectionEnd, LeaderElectionConfig, LeaderElector, LeaderStatus, Leadership};
pub use error::{BoxError, Error};
pub use store::{LeaseStore, MemoryLeaseStore};
pub use timing::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, JITTER_FACTOR,
};
