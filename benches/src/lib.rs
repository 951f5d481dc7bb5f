//! End-to-end benchmarks of kinformer side by side with its peers, and the chaos soak. The
//! scenarios are added with the pipeline layers they measure; `cargo xtask bench` runs them.
//! `cargo xtask chaos` runs the [`chaos`] soak.

#![forbid(unsafe_code)]

pub mod chaos;
