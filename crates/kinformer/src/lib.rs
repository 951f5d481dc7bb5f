//! kinformer: Kubernetes informers in Rust.
//!
//! This facade will wire the default pipeline (client, reflector, delta FIFO, shared informer,
//! indexer, lister), re-export every layer and offer a prelude and a builder in which any layer can
//! be replaced. It does no work of its own.
//!
//! Until the pipeline layers land, it re-exports the shared vocabulary:
//!
//! ```
//! use kinformer::core::ObjectKey;
//! assert_eq!(ObjectKey::new(Some("default"), "web").as_str(), "default/web");
//! ```

#![forbid(unsafe_code)]

#[doc(inline)]
pub use kinformer_core as core;
