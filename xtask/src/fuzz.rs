//! `cargo xtask fuzz [--seconds N] [--jobs J] [--target NAME]...`: runs the cargo-fuzz targets of
//! `fuzz/` (all of them unless some are named) for N seconds each (default 60), J at a time
//! (default 1), under memory limits, and writes what ran into the "Fuzzing" section of
//! docs/reliability.md (between `<!-- fuzz:begin -->` and `<!-- fuzz:end -->`): one row per
//! target, kept from earlier runs for targets not run this time.
//!
//! Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Builds once into
//! `target/fuzz`; each target's corpus grows in `target/fuzz/corpus/<target>`, seeded from
//! `fuzz/seeds/<target>`; a finding is written to `fuzz/artifacts/<target>/` and fails the task.
//! With `--record-logs` it runs nothing: it records the runs whose logs are in
//! `target/fuzz/logs/<target>.log` (made with the command the rows then show, ending with a line
//! `exit <status>`).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime};

use clap::builder::PossibleValuesParser;

/// Every target, with the parser it drives, in the order they run.
const TARGETS: &[(&str, &str)] = &[
    (
        "watch_stream",
        "watch-stream decoder, arbitrary bytes and chunk boundaries",
    ),
    ("list", "list bodies: dynamic, metadata-only and typed"),
    ("label_selector", "label selector parsing and rendering"),
    ("field_selector", "field selector parsing and rendering"),
    ("kubeconfig", "kubeconfig parsing and context resolution"),
    (
        "continue_token",
        "continue tokens: server decoding, client carrying",
    ),
    (
        "status_body",
        "error answers: Status bodies and anything else",
    ),
    (
        "protobuf_watch",
        "protobuf watch frames, envelopes, lists and Status, arbitrary chunk boundaries; objects decoded straight and through k8s-pb, compared",
    ),
];

/// No single allocation may reach this: inputs are a few kilobytes.
const MALLOC_LIMIT_MB: u32 = 64;
/// The resident memory a target may reach (the sanitizer's own overhead included).
const RSS_LIMIT_MB: u32 = 1024;
/// One input may take this long.
const TIMEOUT_SECONDS: u32 = 10;

const BEGIN: &str = "<!-- fuzz:begin -->";
const END: &str = "<!-- fuzz:end -->";

/// The flags of `cargo xtask fuzz`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// How long each target runs, in seconds.
    #[arg(long, value_name = "N", default_value_t = 60)]
    seconds: u64,
    /// How many targets run at a time.
    #[arg(long, value_name = "J", default_value_t = 1)]
    jobs: usize,
    /// Runs only this target (repeatable); all of them by default.
    #[arg(
        long = "target",
        value_name = "NAME",
        value_parser = PossibleValuesParser::new(TARGETS.iter().map(|(t, _)| *t).collect::<Vec<_>>())
    )]
    targets: Vec<String>,
    /// Runs nothing: records the runs whose logs are in target/fuzz/logs.
    #[arg(long = "record-logs")]
    record_only: bool,
}

/// What the command line asked for.
#[derive(Debug)]
struct Options {
    seconds: u64,
    jobs: usize,
    targets: Vec<&'static str>,
    /// Only read the logs of runs made before (by hand, with the command each row shows) and
    /// record them.
    record_only: bool,
}

impl From<&Args> for Options {
    fn from(args: &Args) -> Options {
        // In the order given; clap has checked the names.
        let mut targets: Vec<&'static str> = args
            .targets
            .iter()
            .filter_map(|a| TARGETS.iter().find(|(t, _)| t == a).map(|(t, _)| *t))
            .collect();
        if targets.is_empty() {
            targets = TARGETS.iter().map(|(t, _)| *t).collect();
        }
        Options {
            seconds: args.seconds,
            jobs: args.jobs.max(1),
            targets,
            record_only: args.record_only,
        }
    }
}

/// The outcome of one target's run.
#[derive(Debug)]
struct Outcome {
    target: &'static str,
    seconds: u64,
    executions: Option<u64>,
    peak_rss_mb: Option<u64>,
    findings: Vec<String>,
}

/// Runs the task with `args`; `typed` is what followed `fuzz` on the command line, for the
/// record. The exit code says whether every target ran clean.
pub(crate) fn run(root: &Path, args: &Args, typed: &[String]) -> ExitCode {
    let options = Options::from(args);
    let target_dir = root.join("target/fuzz");
    if options.record_only {
        let outcomes: Vec<Outcome> = options
            .targets
            .iter()
            .map(|t| {
                let log = target_dir.join("logs").join(format!("{t}.log"));
                let text = fs::read_to_string(&log).unwrap_or_default();
                let clean = text.lines().any(|l| l.trim() == "exit 0");
                let seconds = text
                    .lines()
                    .filter_map(|l| l.split(" runs in ").nth(1))
                    .filter_map(|r| r.split_whitespace().next()?.parse::<u64>().ok())
                    .next_back()
                    .unwrap_or(0);
                read_outcome(root, t, Duration::from_secs(seconds), &log, clean)
            })
            .collect();
        let command = format!(
            "cargo +nightly fuzz run --fuzz-dir fuzz --debug-assertions --target-dir target/fuzz <target> target/fuzz/corpus/<target> fuzz/seeds/<target> -- -max_total_time={} -rss_limit_mb={RSS_LIMIT_MB} -malloc_limit_mb={MALLOC_LIMIT_MB} -timeout={TIMEOUT_SECONDS} -print_final_stats=1",
            options.seconds
        );
        return match record(root, &outcomes, &command) {
            Ok(()) if outcomes.iter().all(|o| o.findings.is_empty()) => ExitCode::SUCCESS,
            Ok(()) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("xtask fuzz: cannot write docs/reliability.md: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let status = cargo_fuzz(root, &target_dir, "build")
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => {
            eprintln!("xtask fuzz: building the targets failed ({s}); is cargo-fuzz installed?");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("xtask fuzz: cannot run cargo +nightly fuzz: {e}");
            return ExitCode::FAILURE;
        }
    }
    let mut outcomes = Vec::new();
    let mut queue = options.targets.iter().copied();
    let mut running: Vec<(&'static str, Child, Instant, PathBuf)> = Vec::new();
    loop {
        while running.len() < options.jobs {
            let Some(target) = queue.next() else { break };
            match start(root, &target_dir, target, options.seconds) {
                Ok((child, log)) => running.push((target, child, Instant::now(), log)),
                Err(e) => {
                    eprintln!("xtask fuzz: {target}: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        if running.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
        let mut i = 0;
        while i < running.len() {
            let done = match running[i].1.try_wait() {
                Ok(Some(status)) => Some(status.success()),
                Ok(None) => None,
                Err(_) => Some(false),
            };
            let Some(clean) = done else {
                i += 1;
                continue;
            };
            let (target, _, started, log) = running.swap_remove(i);
            let outcome = read_outcome(root, target, started.elapsed(), &log, clean);
            println!(
                "fuzz {target}: {} s, {} executions, {} findings",
                outcome.seconds,
                outcome
                    .executions
                    .map_or_else(|| "?".to_owned(), |n| n.to_string()),
                outcome.findings.len()
            );
            for f in &outcome.findings {
                println!("  finding: {f}");
            }
            outcomes.push(outcome);
        }
    }
    let command = command_line(typed);
    if let Err(e) = record(root, &outcomes, &command) {
        eprintln!("xtask fuzz: cannot write docs/reliability.md: {e}");
        return ExitCode::FAILURE;
    }
    if outcomes.iter().all(|o| o.findings.is_empty()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `cargo +nightly fuzz <sub>` with the flags every build and run shares, so that a run reuses
/// the build.
fn cargo_fuzz(root: &Path, target_dir: &Path, sub: &str) -> Command {
    let mut cmd = Command::new("cargo");
    // `cargo xtask` runs under the stable toolchain's `cargo run`, whose environment (the
    // toolchain, the library path, the package variables) would make the nightly build see a
    // changed environment and build every dependency again.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if (key.starts_with("CARGO") && key != "CARGO_HOME")
            || key.starts_with("RUSTUP_TOOLCHAIN")
            || key == "LD_LIBRARY_PATH"
            || key == "RUST_RECURSION_COUNT"
        {
            cmd.env_remove(&*key);
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        let kept: Vec<PathBuf> = std::env::split_paths(&path)
            .filter(|p| !p.to_string_lossy().contains("/.rustup/toolchains/"))
            .collect();
        if let Ok(joined) = std::env::join_paths(kept) {
            cmd.env("PATH", joined);
        }
    }
    cmd.current_dir(root)
        .args([
            "+nightly",
            "fuzz",
            sub,
            "--fuzz-dir",
            "fuzz",
            "--debug-assertions",
        ])
        .arg("--target-dir")
        .arg(target_dir);
    cmd
}

/// Starts one target for `seconds`, its output going to a log file.
fn start(
    root: &Path,
    target_dir: &Path,
    target: &str,
    seconds: u64,
) -> std::io::Result<(Child, PathBuf)> {
    let corpus = target_dir.join("corpus").join(target);
    let seeds = root.join("fuzz/seeds").join(target);
    let logs = target_dir.join("logs");
    fs::create_dir_all(&corpus)?;
    fs::create_dir_all(&logs)?;
    fs::create_dir_all(root.join("fuzz/artifacts").join(target))?;
    let log = logs.join(format!("{target}.log"));
    let out = fs::File::create(&log)?;
    let mut cmd = cargo_fuzz(root, target_dir, "run");
    cmd.arg(target).arg(&corpus);
    if seeds.is_dir() {
        cmd.arg(&seeds);
    }
    cmd.arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-rss_limit_mb={RSS_LIMIT_MB}"))
        .arg(format!("-malloc_limit_mb={MALLOC_LIMIT_MB}"))
        .arg(format!("-timeout={TIMEOUT_SECONDS}"))
        .arg("-print_final_stats=1")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    println!(
        "fuzz {target}: running for {seconds} s, log in {}",
        log.display()
    );
    Ok((cmd.spawn()?, log))
}

/// Reads a finished run's log: executions, peak memory, and what it found.
fn read_outcome(
    root: &Path,
    target: &'static str,
    took: Duration,
    log: &Path,
    clean: bool,
) -> Outcome {
    let text = fs::read_to_string(log).unwrap_or_default();
    let stat = |name: &str| {
        text.lines()
            .filter_map(|l| l.strip_prefix(name))
            .filter_map(|v| v.trim().parse::<u64>().ok())
            .next_back()
    };
    let mut findings: Vec<String> = text
        .lines()
        .filter(|l| l.contains("Test unit written to"))
        .map(|l| {
            l.split("Test unit written to")
                .nth(1)
                .unwrap_or("")
                .trim()
                .to_owned()
        })
        .collect();
    if !clean && findings.is_empty() {
        findings.push(format!(
            "the run failed without an artifact; see {}",
            log.strip_prefix(root).unwrap_or(log).display()
        ));
    }
    Outcome {
        target,
        seconds: took.as_secs(),
        executions: stat("stat::number_of_executed_units:"),
        peak_rss_mb: stat("stat::peak_rss_mb:"),
        findings,
    }
}

/// The command as typed, for the record.
fn command_line(args: &[String]) -> String {
    let mut out = "cargo xtask fuzz".to_owned();
    for a in args {
        out.push(' ');
        out.push_str(a);
    }
    out
}

/// One row of the table: the target name and the row's text.
fn row(o: &Outcome, date: &str, command: &str) -> String {
    let describe = TARGETS
        .iter()
        .find(|(t, _)| *t == o.target)
        .map_or("", |(_, d)| d);
    let findings = if o.findings.is_empty() {
        "0".to_owned()
    } else {
        format!("{}: {}", o.findings.len(), o.findings.join(", "))
    };
    format!(
        "| `{}` | {describe} | {} | {} | {} | {findings} | {date} | `{command}` |",
        o.target,
        o.seconds,
        o.executions.map_or_else(|| "?".to_owned(), group_thousands),
        o.peak_rss_mb
            .map_or_else(|| "?".to_owned(), |n| n.to_string()),
    )
}

fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Writes the section, keeping the rows of targets this run did not touch.
fn record(root: &Path, outcomes: &[Outcome], command: &str) -> std::io::Result<()> {
    let path = root.join("docs/reliability.md");
    let text = fs::read_to_string(&path).unwrap_or_default();
    let date = today();
    let mut rows: BTreeMap<String, String> = BTreeMap::new();
    if let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END))
        && b < e
    {
        for line in text[b..e].lines() {
            if let Some(name) = line.strip_prefix("| `").and_then(|l| l.split('`').next())
                && TARGETS.iter().any(|(t, _)| *t == name)
            {
                rows.insert(name.to_owned(), line.to_owned());
            }
        }
    }
    for o in outcomes {
        rows.insert(o.target.to_owned(), row(o, &date, command));
    }
    let ordered: Vec<&str> = TARGETS
        .iter()
        .filter_map(|(t, _)| rows.get(*t).map(String::as_str))
        .collect();
    let section = format!(
        "{BEGIN}\n## Fuzzing\n\n\
         Every parser that reads input kinformer does not control has a cargo-fuzz target in \
         `fuzz/` (its own workspace and lockfile; nightly). The properties are in \
         `fuzz/src/lib.rs` (and `fuzz/src/protobuf.rs` for `protobuf_watch`): no panic, every \
         refusal the typed error the parser documents, and per target what a success must \
         satisfy (chunk boundaries change nothing; what parses renders and parses back the \
         same; nameless objects never get through). `cargo test` checks the same properties \
         with proptest (`kinformer-client: properties`, `kinformer-protobuf: wire_props`). \
         Each run is \
         limited to {MALLOC_LIMIT_MB} MB for any one allocation (`-malloc_limit_mb`), \
         {RSS_LIMIT_MB} MB resident (`-rss_limit_mb`) and {TIMEOUT_SECONDS} s per input, under \
         AddressSanitizer with debug assertions. Written by `cargo xtask fuzz`; each row is the \
         last run of that target. A row whose command is a `cargo +nightly fuzz run` line was \
         run that way and recorded with `cargo xtask fuzz --record-logs`.\n\n\
         | target | what it drives | seconds | executions | peak RSS (MB) | findings | date | command |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n\
         {}\n{END}",
        ordered.join("\n")
    );
    let new = match (text.find(BEGIN), text.find(END)) {
        (Some(b), Some(e)) if b < e => {
            format!("{}{section}{}", &text[..b], &text[e + END.len()..])
        }
        _ if text.trim().is_empty() => format!("{section}\n"),
        _ => format!("{}\n\n{section}\n", text.trim_end()),
    };
    fs::write(path, new)
}

/// Today's date (UTC) as `YYYY-MM-DD`, from the system clock.
fn today() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    // Days since 1970-01-01 to a civil date (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Fuzz {
        #[command(flatten)]
        args: Args,
    }

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        use clap::Parser as _;
        Fuzz::try_parse_from(std::iter::once("fuzz").chain(args.iter().copied()))
            .map(|f| Options::from(&f.args))
    }

    #[test]
    fn arguments_select_targets_and_reject_unknown_ones() {
        let o = parse(&["--seconds", "600", "--target", "list", "--jobs", "2"]).unwrap();
        assert_eq!((o.seconds, o.jobs, o.targets), (600, 2, vec!["list"]));
        let all = parse(&[]).unwrap();
        assert_eq!((all.seconds, all.jobs), (60, 1));
        assert_eq!(all.targets.len(), TARGETS.len());
        assert!(parse(&["--target", "nope"]).is_err());
        assert!(parse(&["--seconds"]).is_err());
        assert!(parse(&["--frobnicate"]).is_err());
    }

    #[test]
    fn every_target_has_a_source_file() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let manifest = fs::read_to_string(root.join("fuzz/Cargo.toml")).unwrap();
        for (t, _) in TARGETS {
            assert!(
                root.join(format!("fuzz/fuzz_targets/{t}.rs")).is_file(),
                "{t}"
            );
            assert!(manifest.contains(&format!("name = \"{t}\"")), "{t}");
        }
    }

    #[test]
    fn a_run_replaces_its_rows_and_keeps_the_others() {
        let dir = std::env::temp_dir().join(format!("xtask-fuzz-{}", std::process::id()));
        fs::create_dir_all(dir.join("docs")).unwrap();
        let path = dir.join("docs/reliability.md");
        fs::write(
            &path,
            "# Reliability\n\n<!-- chaos:begin -->\nkept\n<!-- chaos:end -->\n",
        )
        .unwrap();
        let outcome = |target, executions| Outcome {
            target,
            seconds: 600,
            executions: Some(executions),
            peak_rss_mb: Some(80),
            findings: Vec::new(),
        };
        record(
            &dir,
            &[outcome("list", 1_234_567), outcome("status_body", 5)],
            "c1",
        )
        .unwrap();
        record(&dir, &[outcome("list", 7)], "c2").unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("<!-- chaos:begin -->\nkept\n<!-- chaos:end -->"),
            "{text}"
        );
        assert_eq!(text.matches(BEGIN).count(), 1, "{text}");
        assert!(
            text.contains("| `list` |") && text.contains("| 7 |"),
            "{text}"
        );
        assert!(!text.contains("1,234,567"), "{text}");
        assert!(
            text.contains("| `status_body` |") && text.contains("`c1`"),
            "{text}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dates_and_numbers_are_written_plainly() {
        assert_eq!(group_thousands(1_234_567), "1,234,567");
        assert_eq!(group_thousands(999), "999");
        let d = today();
        assert_eq!(d.len(), 10, "{d}");
        assert!(d.starts_with("20"), "{d}");
    }
}
