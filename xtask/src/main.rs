//! Project tasks for kinformer, run as `cargo xtask <task>`:
//!
//! - `tidy`: the workspace's structural rules (also run as a test by `cargo test`).
//! - `bench`: kinformer side by side with kube-rs on the same workloads (see `bench`).
//! - `fuzz`: every cargo-fuzz target for a while each, recorded in docs/reliability.md.

#![forbid(unsafe_code)]

mod bench;
mod chaos;
mod fuzz;
mod tidy;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("tidy") => match tidy::check(&workspace_root()) {
            Ok(()) => {
                println!("tidy: ok");
                ExitCode::SUCCESS
            }
            Err(problems) => {
                for p in problems {
                    eprintln!("tidy: {p}");
                }
                ExitCode::FAILURE
            }
        },
        Some("bench") => bench::main(&workspace_root(), &args[1..]),
        Some("chaos") => chaos::run(&workspace_root(), &args[1..]),
        Some("fuzz") => fuzz::run(&workspace_root(), &args[1..]),
        _ => {
            eprintln!("usage: cargo xtask <tidy|bench|chaos|fuzz>");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root: the parent of this crate's folder.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}
