//! End-to-end benchmarks of kinformer side by side with its peers. The scenarios are added with the
//! pipeline layers they measure; `cargo xtask bench` runs them.
