//! End-to-end benchmarks of kinformer side by side with its peers, and the chaos soak.
//!
//! `cargo xtask bench` runs this crate's binaries: `bench-sim`, the simulated API server in its
//! own process, and `bench-client`, one informer client per process (kinformer through its
//! facade, or kube-rs' `kube-runtime`), so that the OS measures each client alone. The criterion-free
//! benches under `benches/` measure single layers over real HTTP. `cargo xtask chaos` runs the
//! [`chaos`] soak. [`pods`] holds the pods the bench serves and the updates it makes to them;
//! [`burst`] is the server shape that writes queued watch events back to back in large writes.

#![forbid(unsafe_code)]

pub mod burst;
pub mod chaos;
pub mod pods;
