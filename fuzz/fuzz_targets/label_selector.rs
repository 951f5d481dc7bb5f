//! Fuzz target: see [`kinformer_fuzz::label_selector`] for the properties it checks.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kinformer_fuzz::label_selector(data));
