//! `cargo xtask chaos [--seconds N] [--seed S]`: runs the chaos soak (the `chaos` binary of
//! `kinformer-benches`, which wires the whole pipeline) and has it write its report into
//! `docs/reliability.md`.

use std::path::Path;
use std::process::{Command, ExitCode};

/// Runs the soak with `args` (`--seconds N`, `--seed S`). It is built with the test profile
/// (dependencies optimised, as `cargo test` builds them), so that it reuses what the tests built.
pub(crate) fn run(root: &Path, args: &[String]) -> ExitCode {
    let mut passed = Vec::new();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        match (flag.as_str(), it.next()) {
            ("--seconds" | "--seed", Some(value)) if value.parse::<u64>().is_ok() => {
                passed.push(flag.clone());
                passed.push(value.clone());
            }
            _ => {
                eprintln!("usage: cargo xtask chaos [--seconds N] [--seed S]");
                return ExitCode::from(2);
            }
        }
    }
    let report = root.join("docs").join("reliability.md");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .current_dir(root)
        .args(["run", "-p", "kinformer-benches", "--bin", "chaos", "--"])
        .args(&passed)
        .arg("--report")
        .arg(&report)
        .status();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("xtask chaos: cannot run cargo: {e}");
            ExitCode::FAILURE
        }
    }
}
