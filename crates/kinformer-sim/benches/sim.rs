//! Benchmarks of the simulated server: list page rendering and watch event fan-out.

fn main() {}
