//! The indexer: a thread-safe keyed cache of objects with custom indexes.
//!
//! This crate is being built; see the workspace README for the crate map.

#![forbid(unsafe_code)]
