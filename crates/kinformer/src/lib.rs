//! kinformer: Kubernetes informers in Rust. This facade wires the default pipeline.
//!
//! This crate is being built; see the workspace README for the crate map.

#![forbid(unsafe_code)]
