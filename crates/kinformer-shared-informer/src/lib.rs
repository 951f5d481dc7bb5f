//! The shared informer: one list/watch shared by many event handlers.
//!
//! This crate is being built; see the workspace README for the crate map.

#![forbid(unsafe_code)]
