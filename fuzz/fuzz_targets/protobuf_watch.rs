//! Fuzz target: see `fuzz/src/protobuf.rs` (`protobuf_watch`) for the properties it checks.

#![no_main]

#[path = "../src/protobuf.rs"]
mod protobuf;

libfuzzer_sys::fuzz_target!(|data: &[u8]| protobuf::protobuf_watch(data));
