//! Fuzz target: see [`kinformer_fuzz::kubeconfig`] for the properties it checks.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kinformer_fuzz::kubeconfig(data));
