//! `cargo xtask bench [--scenario NAME]... [--client NAME]... [--shape burst|paced]...
//! [--pod dense|realistic] [--quick] [--reps N] [--json] [--docs | --no-docs]`: kinformer side by
//! side with kube-rs' `kube-runtime` on the same workloads, in the same run, against the same
//! simulated server.
//!
//! It builds the benches crate's binaries in release mode, starts `bench-sim` (its own process)
//! once per scenario and server shape (burst, the headline, then paced; see `run::Shape`), then
//! runs every client once per repetition (`bench-client`, one process per run, clients
//! interleaved so that drift hits all alike), and prints the medians with their minimum and
//! maximum, the ratios to kube-runtime and, on the burst shape, the targets beside them. Targets
//! are printed, never asserted. A full unfiltered run (or `--docs`) rewrites the figures section
//! of `docs/benchmarks.md` and its chart.

#[allow(unreachable_pub, dead_code)]
pub(crate) mod run;

mod report;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use clap::builder::{PossibleValuesParser, TypedValueParser as _};
use indicatif::{ProgressBar, ProgressStyle};

use run::{CLIENTS, PodSize, Row, Scenario, Shape, Sim, Size};

/// The flags of `cargo xtask bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Runs only this scenario (repeatable); all of them by default.
    #[arg(long = "scenario", value_name = "NAME", value_parser = scenario_names())]
    scenarios: Vec<String>,
    /// Runs only this client (repeatable); all of them by default.
    #[arg(long = "client", value_name = "NAME", value_parser = client_names())]
    clients: Vec<String>,
    /// Runs only this server shape (repeatable); burst (the headline) and paced by default.
    #[arg(
        long = "shape",
        value_name = "SHAPE",
        value_parser = PossibleValuesParser::new(Shape::ALL.map(Shape::as_str))
            .map(|s| Shape::parse(&s).expect("a listed shape"))
    )]
    shapes: Vec<Shape>,
    /// The pods the server holds: dense (10-15 KB, the headline) or realistic (about 5 KB).
    #[arg(
        long = "pod",
        value_name = "SIZE",
        value_parser = PossibleValuesParser::new(PodSize::ALL.map(PodSize::as_str))
            .map(|s| PodSize::parse(&s).expect("a listed size"))
    )]
    pods: Option<PodSize>,
    /// Scales the counts down, so that a run takes minutes on 2 cores.
    #[arg(long)]
    quick: bool,
    /// Repetitions of each measurement (3 by default, 1 with --quick).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    reps: Option<u16>,
    /// Prints one JSON object per scenario, shape and client instead of the table.
    #[arg(long)]
    json: bool,
    /// Rewrites the figures of docs/benchmarks.md and its chart (a full unfiltered run does).
    #[arg(long, conflicts_with = "no_docs")]
    docs: bool,
    /// Leaves docs/benchmarks.md alone, even after a full unfiltered run.
    #[arg(long)]
    no_docs: bool,
}

fn scenario_names() -> PossibleValuesParser {
    PossibleValuesParser::new(
        run::scenarios(Size::Full)
            .into_iter()
            .map(|s| s.name)
            .collect::<Vec<_>>(),
    )
}

fn client_names() -> PossibleValuesParser {
    PossibleValuesParser::new(CLIENTS.iter().map(|c| c.name).collect::<Vec<_>>())
}

impl Args {
    /// Whether this run writes docs/benchmarks.md: when asked, or after a full unfiltered run.
    fn writes_docs(&self) -> bool {
        let unfiltered = self.scenarios.is_empty()
            && self.clients.is_empty()
            && self.shapes.is_empty()
            && self.pods.is_none();
        self.docs || (!self.no_docs && unfiltered && !self.quick)
    }
}

/// Builds `bench-sim` and `bench-client` in release mode; returns the folder that holds them.
fn build(root: &Path) -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "-p", "kinformer-benches", "--bins"])
        .current_dir(root)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err("building the bench binaries failed".into());
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_relative() { root.join(t) } else { t })
        .unwrap_or_else(|| root.join("target"));
    Ok(target.join("release"))
}

/// Runs `cargo xtask bench` with `options`; `typed` is what followed `bench` on the command
/// line, for the record in the docs.
pub(crate) fn main(root: &Path, options: &Args, typed: &[String]) -> ExitCode {
    let started = Instant::now();
    let bins = match build(root) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("xtask bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    let size = if options.quick {
        Size::Quick
    } else {
        Size::Full
    };
    let scenarios: Vec<Scenario> = run::scenarios(size)
        .into_iter()
        .filter(|s| options.scenarios.is_empty() || options.scenarios.iter().any(|n| n == s.name))
        .collect();
    let clients: Vec<_> = CLIENTS
        .iter()
        .filter(|c| options.clients.is_empty() || options.clients.iter().any(|n| n == c.name))
        .collect();
    let reps = options
        .reps
        .map_or(if options.quick { 1 } else { 3 }, usize::from);
    let timeout = Duration::from_secs(if options.quick { 120 } else { 600 });
    let built = clients.iter().filter(|c| c.built).count();
    // The headline shape first, whatever the order asked.
    let shapes: Vec<Shape> = Shape::ALL
        .into_iter()
        .filter(|s| options.shapes.is_empty() || options.shapes.contains(s))
        .collect();
    let pods = options.pods.unwrap_or(PodSize::Dense);

    let bar = ProgressBar::new((scenarios.len() * shapes.len() * built * reps) as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let mut rows: Vec<Row> = Vec::new();
    for (scenario, shape) in scenarios
        .iter()
        .flat_map(|s| shapes.iter().map(move |sh| (s, *sh)))
    {
        let name = format!("{} [{}]", scenario.name, shape.as_str());
        bar.set_message(format!(
            "{name}: seeding {} {} pods",
            scenario.pods,
            pods.as_str()
        ));
        let started = Sim::start(&bins.join("bench-sim"), scenario.pods, shape, pods, timeout);
        let mut sim = match started {
            Ok(sim) => sim,
            Err(e) => {
                bar.println(format!("{name}: the server did not start: {e}"));
                for c in clients.iter().filter(|c| c.built) {
                    rows.push(Row::failed(scenario.name, shape, c.name, e.clone()));
                    bar.inc(reps as u64);
                }
                continue;
            }
        };
        for rep in 1..=reps {
            for c in clients.iter().filter(|c| c.built) {
                bar.set_message(format!("{name} / {} / rep {rep}", c.name));
                let row = run::run_client(
                    &bins.join("bench-client"),
                    &mut sim,
                    scenario,
                    c.name,
                    timeout,
                );
                if !row.ok {
                    bar.println(format!(
                        "{name} / {} / rep {rep}: not ok: {}",
                        c.name, row.note
                    ));
                }
                rows.push(row);
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    let elapsed = started.elapsed();
    let summaries = report::summarise(&scenarios, &shapes, &clients, &rows);
    if options.json {
        for s in &summaries {
            let mut json = s.to_json();
            json["pod"] = pods.as_str().into();
            println!("{json}");
        }
    } else {
        print!(
            "{}",
            report::table(&scenarios, &shapes, pods.as_str(), &summaries)
        );
        println!(
            "{} scenarios x {} shapes x {} clients x {reps} reps in {:.0} s",
            scenarios.len(),
            shapes.len(),
            built,
            elapsed.as_secs_f64()
        );
    }
    if options.writes_docs() {
        let command = std::iter::once("cargo xtask bench".to_owned())
            .chain(typed.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ");
        let written = report::write_docs(
            root,
            &command,
            &scenarios,
            &shapes,
            pods.as_str(),
            &summaries,
            elapsed,
        );
        match written {
            Ok(()) => eprintln!("xtask bench: docs/benchmarks.md and its chart rewritten"),
            Err(e) => {
                eprintln!("xtask bench: cannot write the docs: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    /// The flags of `bench` alone.
    #[derive(Debug, clap::Parser)]
    struct Bench {
        #[command(flatten)]
        args: Args,
    }

    fn parse(line: &str) -> Result<Args, String> {
        Bench::try_parse_from(std::iter::once("bench").chain(line.split_whitespace()))
            .map(|b| b.args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn parses_the_options_and_refuses_unknown_names() {
        let o = parse(
            "--scenario upd-10k --scenario relist --quick --reps 2 --json --client kube-runtime --shape paced --pod realistic",
        )
        .unwrap();
        assert_eq!(o.scenarios, ["upd-10k", "relist"]);
        assert_eq!(o.clients, ["kube-runtime"]);
        assert_eq!(o.shapes, [Shape::Paced]);
        assert_eq!(o.pods, Some(PodSize::Realistic));
        assert!(o.quick && o.json);
        assert_eq!(o.reps, Some(2));
        assert!(parse("--scenario nope").unwrap_err().contains("upd-10k"));
        assert!(parse("--client nope").unwrap_err().contains("kube-runtime"));
        assert!(parse("--shape square").unwrap_err().contains("burst"));
        assert!(parse("--pod huge").unwrap_err().contains("dense"));
        assert!(parse("--reps 0").is_err());
        assert!(parse("--reps").is_err());
        assert!(parse("--fast").is_err());
        assert!(parse("--docs --no-docs").is_err());
    }

    #[test]
    fn docs_are_written_when_asked_or_after_a_full_unfiltered_run() {
        assert!(parse("").unwrap().writes_docs());
        assert!(parse("--docs --quick").unwrap().writes_docs());
        assert!(parse("--docs --scenario relist").unwrap().writes_docs());
        for line in [
            "--no-docs",
            "--quick",
            "--scenario relist",
            "--shape burst",
            "--pod dense",
        ] {
            assert!(!parse(line).unwrap().writes_docs(), "{line}");
        }
    }

    #[test]
    fn every_scenario_of_the_issue_exists_at_every_size() {
        for size in [Size::Full, Size::Quick, Size::Tiny] {
            let names: Vec<&str> = run::scenarios(size).iter().map(|s| s.name).collect();
            assert_eq!(
                names,
                [
                    "upd-10k",
                    "sync-100k",
                    "stream-100k",
                    "churn-10k",
                    "sync-150k",
                    "fanout",
                    "relist",
                    "lister"
                ]
            );
        }
        let full = run::scenarios(Size::Full);
        assert_eq!(full[1].pods, 100_000);
        assert_eq!(full[4].pods, 150_000);
        assert_eq!(full[0].events, 100_000);
        // Churn deletes and re-adds 40% of the pods.
        assert_eq!(full[3].events, full[3].pods * 4 / 10 * 2);
        assert!(
            run::CLIENTS
                .iter()
                .any(|c| c.name == run::BASELINE && c.built)
        );
    }
}
