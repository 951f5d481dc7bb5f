//! Fixtures shared by kinformer's tests and benches. Not published: it is a dev-dependency only.
//!
//! One module per kind of fixture:
//! - [`fixtures`]: typed pods built in memory, in a fixed layout, for benches and tests that need
//!   many objects and no server.
//! - [`scripted`]: [`ScriptedListWatch`], an in-memory `ListWatch` that lists a state page by page
//!   and serves scripted watches, for tests of anything that consumes a `ListWatch`. It depends on
//!   `kinformer-core` alone: no HTTP client.
//!
//! ```
//! let pods = kinformer_test_support::typed_pods(3);
//! assert_eq!(pods.len(), 3);
//! ```

#![forbid(unsafe_code)]

pub mod fixtures;
pub mod scripted;

pub use fixtures::{TIERS, typed_pod_name, typed_pods};
pub use scripted::{ScriptedListWatch, WatchScript};
