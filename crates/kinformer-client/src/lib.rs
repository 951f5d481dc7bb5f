//! Raw Kubernetes list/watch over HTTP: the bottom layer of kinformer that touches the network.
//!
//! This crate is being built; see the workspace README for the crate map.

#![forbid(unsafe_code)]
