//! A simulated Kubernetes API server that speaks list/watch over real HTTP.
//!
//! This crate is being built; see the workspace README for the crate map.

#![forbid(unsafe_code)]
