//! Nothing: this crate exists for its tests, which use `kinformer-sim` from outside the
//! kinformer workspace.
