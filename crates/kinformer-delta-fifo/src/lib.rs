//! The delta FIFO: a per-key queue of deltas between the reflector and the informer.
//!
//! This crate is being built; see the workspace README for the crate map.

#![forbid(unsafe_code)]
