//! Fixtures shared by kinformer's tests and benches. Not published: it is a dev-dependency only.
//!
//! One module per kind of fixture:
//! - [`fixtures`]: typed pods built in memory, in a fixed layout, for benches and tests that need
//!   many objects and no server.
//! - [`scripted`]: [`ScriptedListWatch`], an in-memory `ListWatch` that lists a state page by page
//!   and serves scripted watches, for tests of anything that consumes a `ListWatch`. It depends on
//!   `kinformer-core` alone: no HTTP client.
//! - [`replay`]: [`Replay`], a `ListWatch` that lists a fixed state and replays prepared events
//!   on its watch, which then stays open: a steady source for tests and benches.
//! - [`gated`]: [`GatedCache`], a wrapper of any cache whose writes the test can hold: all of
//!   them while a gate is closed, or the next one, paused before or after it is made.
//! - [`http`]: [`read_request_head`], for the hand-written servers of hostile-server tests.
//! - [`counting`]: [`CountingProxy`], a TCP forwarder that counts the requests and bytes one
//!   client costs a server.
//! - [`recorder`] (feature `informer`, on by default): [`Recorder`], a `ResourceEventHandler`
//!   that writes down every call it hears, one line each, and checks that they form a valid
//!   history per key.
//!
//! ```
//! let pods = kinformer_test_support::typed_pods(3);
//! assert_eq!(pods.len(), 3);
//! ```

#![forbid(unsafe_code)]

pub mod counting;
pub mod fixtures;
pub mod gated;
pub mod http;
#[cfg(feature = "informer")]
pub mod recorder;
pub mod replay;
pub mod scripted;

pub use counting::CountingProxy;
pub use fixtures::{TIERS, typed_pod_name, typed_pods};
pub use gated::{GatedCache, Pause};
pub use http::{RequestHead, read_request_head};
#[cfg(feature = "informer")]
pub use recorder::{Heard, Recorder};
pub use replay::Replay;
pub use scripted::{ScriptedListWatch, WatchScript};
