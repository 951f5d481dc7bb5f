//! Coordination between replicas through `coordination.k8s.io/v1` Leases: leader election, and
//! shard membership that splits the objects of a resource between replicas.
//!
//! What it does:
//! - [`LeaseStore`]: the seam, what the coordination needs from Leases (get, create, update
//!   with optimistic concurrency, delete, list by label), with errors that tell apart not
//!   found, a conflict (someone else wrote first) and other failures. Implemented over HTTP by
//!   [`kinformer_client::Api<Lease>`](kinformer_client::Api) and in memory by
//!   [`MemoryLeaseStore`].
//! - [`LeaderElector`]: client-go's `tools/leaderelection` on a Lease: one leader among
//!   candidates, renewals, take-over of an expired or released Lease, callbacks.
//! - [`ShardMembership`]: replicas of a group each hold a Lease, agree on the live members, and
//!   split the hash space of [`ShardRanges`](kinformer_core::shard::ShardRanges) between them,
//!   telling a [`ShardOwner`](kinformer_core::shard::ShardOwner) what to act on.
//!
//! What it does not: coordinated leader election (`LeaseCandidate`, `strategy`,
//! `preferredHolder`), events, health checks, or metrics. It reads no clock of another machine:
//! every decision rests on this process's monotonic clock ([`tokio::time::Instant`]). The
//! wall-clock times it writes into Leases (`acquireTime`, `renewTime`) are for people and
//! other clients; a Lease held by another counts as expired only when its record has not
//! changed for its `leaseDurationSeconds` as measured locally since this process last saw it
//! change, as client-go does with its `observedTime`. Clocks may disagree about the time of
//! day; they are assumed to run at about the same rate.
//!
//! # Shard membership
//!
//! Each replica of a group holds one Lease of its own, named `<group>-<identity>`, labelled
//! [`SHARD_GROUP_LABEL`]` = <group>`, held by its identity, and renewed every retry period.
//! Every retry period each replica also lists the group's Leases and takes the live ones as
//! the members; member `i` of the `n` sorted identities is assigned
//! [`ShardRanges::split`](kinformer_core::shard::ShardRanges::split)`(key, n, i)`. Ranges move
//! by these rules:
//!
//! 1. **The annotation says what is held.** Each Lease carries [`SHARD_RANGES_ANNOTATION`],
//!    the ranges its holder holds in `shardSelector` form (empty for none). It may say more
//!    than the owner acts on (a claim being checked), never less.
//! 2. **Release first.** Ranges a replica holds but is no longer assigned are released by
//!    calling `owner.set_ranges(held minus released)` and waiting for it to return (the owner
//!    no longer acts on them then); only after that is the annotation updated to drop them.
//! 3. **Claim before acting.** A replica takes a range only where no other live member's
//!    annotation holds any part of it. It first writes the claim into its own Lease's
//!    annotation (an update at its Lease's resourceVersion); after that write succeeded it
//!    lists the group again, keeps only what no other live member's annotation holds (two
//!    replicas that briefly disagree about the members may claim the same free range: each
//!    then sees the other's claim and steps back), and only then calls
//!    `owner.set_ranges(held plus claimed)`. Of two replicas claiming one range, the one that
//!    wrote last lists after the other's write, so they never both act on it.
//! 4. **Let go when late.** A replica that could not write its Lease within the renew
//!    deadline (counted from the start of its last successful write) calls
//!    `owner.set_ranges(empty)` at once, before the lease duration has passed, because the
//!    others take its ranges once its Lease looks expired to them. It rejoins when it can write
//!    again, holding nothing. The owner must let go within `lease_duration - renew_deadline`.
//! 5. **Leave gracefully.** A stop releases everything (the owner first), then deletes the
//!    replica's Lease, so the others take over at their next look rather than after a lease
//!    duration.
//!
//! So a range is never held by two live replicas as their owners see it, and after its holder
//! dies it is unowned for about a lease duration plus a couple of retry periods. Identities
//! must be unique among live replicas, and every member of a group must hash the same
//! [`ShardKey`](kinformer_core::shard::ShardKey).
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
mod membership;
mod store;
mod timing;

pub use elector::{ElectionEnd, LeaderElectionConfig, LeaderElector, LeaderStatus, Leadership};
pub use error::{BoxError, Error};
pub use membership::{
    SHARD_GROUP_LABEL, SHARD_RANGES_ANNOTATION, ShardMembership, ShardMembershipConfig,
};
pub use store::{LeaseStore, MemoryLeaseStore};
pub use timing::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, JITTER_FACTOR,
};
