//! The reflector: lists, then watches from that resourceVersion, and keeps a store in step.
//!
//! This crate is being built; see the workspace README for the crate map.

#![forbid(unsafe_code)]
