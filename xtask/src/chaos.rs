//! `cargo xtask chaos [--seconds N] [--seed S] [--docs]`: runs the chaos soak (the `chaos` binary
//! of `kinformer-benches`, which wires the whole pipeline) and prints its report; with `--docs`,
//! the report is also written into `docs/reliability.md`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The flags of `cargo xtask chaos`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// How long the soak runs, in seconds (the soak's default: 600).
    #[arg(long, value_name = "N")]
    seconds: Option<u64>,
    /// The seed of the workload and of the fault schedule (the soak's default: 1).
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
    /// Writes the report into the chaos section of docs/reliability.md.
    #[arg(long)]
    docs: bool,
}

impl Args {
    /// Where the soak writes its report: docs/reliability.md when asked, nowhere otherwise.
    fn report(&self, root: &Path) -> Option<PathBuf> {
        self.docs.then(|| root.join("docs").join("reliability.md"))
    }

    /// The soak's own flags.
    fn passed(&self, root: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for (flag, value) in [("--seconds", self.seconds), ("--seed", self.seed)] {
            if let Some(v) = value {
                out.push(flag.to_owned());
                out.push(v.to_string());
            }
        }
        if let Some(report) = self.report(root) {
            out.push("--report".to_owned());
            out.push(report.display().to_string());
        }
        out
    }
}

/// Runs the soak. It is built with the test profile (dependencies optimised, as `cargo test`
/// builds them), so that it reuses what the tests built.
pub(crate) fn run(root: &Path, args: &Args) -> ExitCode {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .current_dir(root)
        .args(["run", "-p", "kinformer-benches", "--bin", "chaos", "--"])
        .args(args.passed(root))
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

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Chaos {
        #[command(flatten)]
        args: Args,
    }

    fn parse(line: &str) -> Args {
        Chaos::try_parse_from(std::iter::once("chaos").chain(line.split_whitespace()))
            .unwrap()
            .args
    }

    #[test]
    fn the_docs_are_written_only_when_asked() {
        let root = Path::new("/ws");
        assert_eq!(parse("").report(root), None);
        assert_eq!(parse("--seconds 5 --seed 3").report(root), None);
        assert_eq!(
            parse("--docs").report(root),
            Some(root.join("docs").join("reliability.md"))
        );
        assert_eq!(parse("").passed(root), Vec::<String>::new());
        assert_eq!(
            parse("--seconds 5 --seed 3").passed(root),
            ["--seconds", "5", "--seed", "3"]
        );
        let passed = parse("--docs --seed 3").passed(root);
        assert_eq!(passed[..3], ["--seed", "3", "--report"]);
        assert!(passed[3].ends_with("reliability.md"), "{passed:?}");
        assert!(
            Chaos::try_parse_from(["chaos", "--seconds", "soon"]).is_err(),
            "a number is required"
        );
    }
}
