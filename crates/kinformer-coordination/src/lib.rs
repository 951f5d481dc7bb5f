//! Coordination between replicas through `coordination.k8s.io/v1` Leases.
//!
//! What it does: [`LeaseStore`], the seam, what the coordination needs from Leases (get,
//! create, update with optimistic concurrency, delete, list by label), with errors that tell
//! apart not found, a conflict (someone else wrote first) and other failures. Implemented over
//! HTTP by [`kinformer_client::Api<Lease>`](kinformer_client::Api) and in memory by
//! [`MemoryLeaseStore`].
//!
//! What it does not (yet): elect a leader, or split shards between replicas.
//!
//! ```
//! use kinformer_coordination::{LeaseStore, MemoryLeaseStore};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let store = MemoryLeaseStore::new();
//! assert!(store.get("leader").await.unwrap_err().is_not_found());
//! # }
//! ```

#![forbid(unsafe_code)]

mod error;
mod store;

pub use error::{BoxError, Error};
pub use store::{LeaseStore, MemoryLeaseStore};
