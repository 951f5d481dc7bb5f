//! The reflector: lists a resource, then watches from that resourceVersion, and writes what it sees
//! into a [`ReflectorStore`](kinformer_core::ReflectorStore).
//!
//! What it will do: re-watch when a stream ends, relist on 410 Gone, back off with jitter and honour
//! Retry-After, use bookmarks and streaming lists, and call a resync hook on a period.
//! What it does not do: decode HTTP (the client layer does), keep a cache (its store does), or call
//! handlers (the shared informer does).
//!
//! This crate is not implemented yet; it is a placeholder in the workspace layout.

#![forbid(unsafe_code)]
