//! The chaos soak as a command: `chaos [--seconds N] [--seed S] [--report docs/reliability.md]`.
//! `cargo xtask chaos` runs it. Prints the report; with `--report`, writes it into that file's
//! chaos section. Exits with 1 if an invariant was violated.

use std::process::ExitCode;

use kinformer_benches::chaos::{self, ChaosConfig, HeapMeter};
use peak_alloc::PeakAlloc;

/// Counts the live heap, so that the soak weighs the objects it holds and reports the peak.
#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

fn usage() -> ExitCode {
    eprintln!("usage: chaos [--seconds N] [--seed S] [--report PATH]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut seconds = 600;
    let mut seed = 1;
    let mut report = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next();
        match (arg.as_str(), value) {
            ("--seconds", Some(v)) => match v.parse() {
                Ok(n) => seconds = n,
                Err(_) => return usage(),
            },
            ("--seed", Some(v)) => match v.parse() {
                Ok(n) => seed = n,
                Err(_) => return usage(),
            },
            ("--report", Some(v)) => report = Some(v),
            _ => return usage(),
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // The deliberate panics are counted by the soak; their log lines would bury the rest.
                .unwrap_or_else(|_| "error,kinformer_shared_informer::handler=off".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let config = ChaosConfig {
        heap: Some(HeapMeter {
            current: || HEAP.current_usage(),
            peak: || HEAP.peak_usage(),
        }),
        ..ChaosConfig::new(seconds, seed)
    };
    eprintln!("chaos: {seconds} s with seed {seed}");
    let result = match runtime.block_on(chaos::run(&config)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("chaos: {e}");
            return ExitCode::FAILURE;
        }
    };
    let command = format!("cargo xtask chaos --seconds {seconds} --seed {seed}");
    let markdown = result.markdown(&command);
    println!("{markdown}");
    if let Some(path) = report {
        let doc = std::fs::read_to_string(&path).unwrap_or_default();
        if let Err(e) = std::fs::write(&path, chaos::doc::write_block(&doc, seed, &markdown)) {
            eprintln!("chaos: cannot write {path}: {e}");
            return ExitCode::FAILURE;
        }
        eprintln!("chaos: report written to {path}");
    }
    if result.passed() {
        ExitCode::SUCCESS
    } else {
        eprintln!("chaos: {} invariant violations", result.violation_count);
        ExitCode::FAILURE
    }
}
