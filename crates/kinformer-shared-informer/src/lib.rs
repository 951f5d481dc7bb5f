//! The shared informer: one list/watch per resource, shared by many event handlers.
//!
//! What it will do: pop deltas from the queue, update the indexer first, then fan each change out to
//! every registered handler, each with its own buffer and task, so a slow or panicking handler never
//! holds up the others; replay the cache to late handlers; report `has_synced`.
//! What it does not do: talk to the API server (the reflector and client do) or answer queries (the
//! lister does).
//!
//! This crate is not implemented yet; it is a placeholder in the workspace layout.

#![forbid(unsafe_code)]
