//! Placeholder; filled below.
#![allow(missing_docs)]
fn main() {}
