//! Listers: typed, namespaced, label-selector queries on a cache, with no API calls.
//!
//! This crate is being built; see the workspace README for the crate map.

#![forbid(unsafe_code)]
