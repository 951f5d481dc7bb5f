//! Fuzz target: see [`kinformer_fuzz::watch_stream`] for the properties it checks.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kinformer_fuzz::watch_stream(data));
