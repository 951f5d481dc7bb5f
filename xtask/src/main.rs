//! Project tasks for kinformer, run as `cargo xtask <task>` (`cargo xtask <task> --help` for the
//! flags of each):
//!
//! - `tidy`: the workspace's structural rules (also run as a test by `cargo test`).
//! - `bench`: kinformer side by side with kube-rs on the same workloads (see `bench`).
//! - `chaos`: the chaos soak; `--docs` records its report in docs/reliability.md.
//! - `fuzz`: every cargo-fuzz target for a while each, recorded in docs/reliability.md.
//! - `protobuf`: generates kinformer-protobuf's conversions from k8s-pb and k8s-openapi; `--check`
//!   fails when the checked-in file is stale (also run as a test by `cargo test`).

#![forbid(unsafe_code)]

mod bench;
mod chaos;
mod fuzz;
mod protobuf;
mod tidy;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Project tasks for kinformer.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

/// One task.
#[derive(Debug, Subcommand)]
enum Task {
    /// Checks the workspace's structural rules.
    Tidy,
    /// Runs kinformer side by side with kube-runtime on the same workloads and prints the figures.
    Bench(bench::Args),
    /// Runs the chaos soak against the whole pipeline.
    Chaos(chaos::Args),
    /// Runs the cargo-fuzz targets and records the runs in docs/reliability.md.
    Fuzz(fuzz::Args),
    /// Generates kinformer-protobuf's conversions between k8s-openapi and k8s-pb.
    Protobuf(protobuf::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The task's own arguments as typed, for the command recorded in the docs.
    let typed: Vec<String> = std::env::args().skip(2).collect();
    let root = workspace_root();
    match cli.task {
        Task::Tidy => match tidy::check(&root) {
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
        Task::Bench(args) => bench::main(&root, &args, &typed),
        Task::Chaos(args) => chaos::run(&root, &args),
        Task::Fuzz(args) => fuzz::run(&root, &args, &typed),
        Task::Protobuf(args) => protobuf::run(&root, &args),
    }
}

/// The workspace root: the parent of this crate's folder.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;
    use clap::error::ErrorKind;

    use super::*;

    fn parse(line: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("xtask").chain(line.split_whitespace()))
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_task_answers_help() {
        for task in ["tidy", "bench", "chaos", "fuzz", "protobuf"] {
            let e = parse(&format!("{task} --help")).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::DisplayHelp, "{task}");
            // `--help` is a successful exit, with the usage on stdout.
            assert_eq!(e.exit_code(), 0, "{task}");
            assert!(e.to_string().contains("Usage: cargo xtask"), "{task}: {e}");
        }
        let help = parse("bench --help").unwrap_err().to_string();
        for flag in [
            "--scenario",
            "--client",
            "--shape",
            "--pod",
            "--quick",
            "--reps",
            "--json",
            "--docs",
            "--no-docs",
        ] {
            assert!(help.contains(flag), "{flag} missing from {help}");
        }
        let help = parse("chaos --help").unwrap_err().to_string();
        for flag in ["--seconds", "--seed", "--docs"] {
            assert!(help.contains(flag), "{flag} missing from {help}");
        }
    }

    #[test]
    fn unknown_flags_and_tasks_are_errors() {
        for line in [
            "bench --fast",
            "chaos --frobnicate",
            "fuzz --nope",
            "protobuf --nope",
            "tidy --x",
            "nope",
            "",
        ] {
            let e = parse(line).unwrap_err();
            assert_ne!(e.exit_code(), 0, "{line:?}");
            assert_ne!(e.kind(), ErrorKind::DisplayHelp, "{line:?}");
        }
        assert_eq!(
            parse("bench --fast").unwrap_err().kind(),
            ErrorKind::UnknownArgument
        );
    }
}
