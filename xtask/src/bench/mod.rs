//! `cargo xtask bench [--scenario NAME]... [--client NAME]... [--quick] [--reps N] [--json]
//! [--docs | --no-docs]`: kinformer side by side with kube-rs' `kube-runtime` on the same
//! workloads, in the same run, against the same simulated server.
//!
//! It builds the benches crate's binaries in release mode, starts `bench-sim` (its own process)
//! once per scenario, then runs every client once per repetition (`bench-client`, one process per
//! run, clients interleaved so that drift hits all alike), and prints the medians with their
//! minimum and maximum, the ratios to kube-runtime and the targets beside them. Targets are
//! printed, never asserted. A full unfiltered run (or `--docs`) rewrites the figures section of
//! `docs/benchmarks.md` and its chart.

#[allow(unreachable_pub, dead_code)]
pub(crate) mod run;

mod report;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use run::{CLIENTS, Row, Scenario, Sim, Size};

/// The command line, parsed.
#[derive(Debug, Default)]
struct Options {
    scenarios: Vec<String>,
    clients: Vec<String>,
    quick: bool,
    reps: Option<usize>,
    json: bool,
    docs: Option<bool>,
}

const USAGE: &str = "usage: cargo xtask bench [--scenario NAME]... [--client NAME]... [--quick] [--reps N] [--json] [--docs|--no-docs]";

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "--scenario" => o.scenarios.push(value("--scenario")?),
            "--client" => o.clients.push(value("--client")?),
            "--quick" => o.quick = true,
            "--json" => o.json = true,
            "--docs" => o.docs = Some(true),
            "--no-docs" => o.docs = Some(false),
            "--reps" => {
                let n: usize = value("--reps")?
                    .parse()
                    .map_err(|_| "--reps takes a number".to_owned())?;
                if n == 0 {
                    return Err("--reps must be at least 1".into());
                }
                o.reps = Some(n);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let size = if o.quick { Size::Quick } else { Size::Full };
    let known: Vec<&str> = run::scenarios(size).iter().map(|s| s.name).collect();
    for s in &o.scenarios {
        if !known.contains(&s.as_str()) {
            return Err(format!("no scenario {s:?}; there are {}", known.join(", ")));
        }
    }
    for c in &o.clients {
        if !CLIENTS.iter().any(|k| k.name == c) {
            let names: Vec<&str> = CLIENTS.iter().map(|k| k.name).collect();
            return Err(format!("no client {c:?}; there are {}", names.join(", ")));
        }
    }
    Ok(o)
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

/// Runs `cargo xtask bench` with `args` (after `bench`).
pub(crate) fn main(root: &Path, args: &[String]) -> ExitCode {
    let options = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("xtask bench: {e}\n{USAGE}");
            return ExitCode::FAILURE;
        }
    };
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
    let reps = options.reps.unwrap_or(if options.quick { 1 } else { 3 });
    let timeout = Duration::from_secs(if options.quick { 120 } else { 600 });
    let built = clients.iter().filter(|c| c.built).count();

    let bar = ProgressBar::new((scenarios.len() * built * reps) as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let mut rows: Vec<Row> = Vec::new();
    for scenario in &scenarios {
        bar.set_message(format!("{}: seeding {} pods", scenario.name, scenario.pods));
        let mut sim = match Sim::start(&bins.join("bench-sim"), scenario.pods, timeout) {
            Ok(sim) => sim,
            Err(e) => {
                bar.println(format!("{}: the server did not start: {e}", scenario.name));
                for c in clients.iter().filter(|c| c.built) {
                    rows.push(Row::failed(scenario.name, c.name, e.clone()));
                    bar.inc(reps as u64);
                }
                continue;
            }
        };
        for rep in 1..=reps {
            for c in clients.iter().filter(|c| c.built) {
                bar.set_message(format!("{} / {} / rep {rep}", scenario.name, c.name));
                let row = run::run_client(
                    &bins.join("bench-client"),
                    &mut sim,
                    scenario,
                    c.name,
                    timeout,
                );
                if !row.ok {
                    bar.println(format!(
                        "{} / {} / rep {rep}: not ok: {}",
                        scenario.name, c.name, row.note
                    ));
                }
                rows.push(row);
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    let elapsed = started.elapsed();
    let summaries = report::summarise(&scenarios, &clients, &rows);
    if options.json {
        for s in &summaries {
            println!("{}", s.to_json());
        }
    } else {
        print!("{}", report::table(&scenarios, &summaries));
        println!(
            "{} scenarios x {} clients x {reps} reps in {:.0} s",
            scenarios.len(),
            built,
            elapsed.as_secs_f64()
        );
    }
    let unfiltered = options.scenarios.is_empty() && options.clients.is_empty();
    if options.docs.unwrap_or(unfiltered && !options.quick) {
        let command = std::iter::once("cargo xtask bench".to_owned())
            .chain(args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ");
        match report::write_docs(root, &command, &scenarios, &summaries, elapsed) {
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
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn parses_the_options_and_refuses_unknown_names() {
        let o = parse(&args(
            "--scenario upd-10k --scenario relist --quick --reps 2 --json --client kube-runtime",
        ))
        .unwrap();
        assert_eq!(o.scenarios, ["upd-10k", "relist"]);
        assert_eq!(o.clients, ["kube-runtime"]);
        assert!(o.quick && o.json);
        assert_eq!(o.reps, Some(2));
        assert!(
            parse(&args("--scenario nope"))
                .unwrap_err()
                .contains("upd-10k")
        );
        assert!(
            parse(&args("--client nope"))
                .unwrap_err()
                .contains("kube-runtime")
        );
        assert!(parse(&args("--reps 0")).is_err());
        assert!(parse(&args("--reps")).is_err());
        assert!(parse(&args("--fast")).is_err());
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
