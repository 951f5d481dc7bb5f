//! The `kinformer` command-line tool: lists and watches a resource and prints what it sees.
//!
//! ```text
//! kinformer watch pods                 # against your kubeconfig, or an embedded simulated cluster
//! kinformer get nodes --kubeconfig k   # list once
//! ```
//!
//! Configuration is found where kubectl finds it (`--kubeconfig`, `KUBECONFIG`, `~/.kube/config`,
//! the in-cluster service account). When there is none at all, or with `--sim`, the tool starts an
//! embedded simulated API server with seeded pods and a steady churn of writes, so the command
//! works on any machine. A configuration that exists but is broken is reported, never replaced.
//!
//! Until the reflector and shared informer layers exist, `watch` runs its own small list-then-watch
//! loop over `kinformer-client` (re-watch from the last resourceVersion, relist on 410, back off
//! on retryable errors). It prints metadata only: the tool asks the server for
//! `PartialObjectMetadata`, which is all it shows.

#![forbid(unsafe_code)]

mod args;
mod watch;

use std::io::Write;
use std::process::ExitCode;

use kinformer_client::{Api, Client, Config, KubeconfigOptions};
use kinformer_core::PartialObjectMetadata;
use kinformer_sim::{ChurnConfig, SimConfig, SimServer};

use crate::args::{Args, Command};

/// Everything that can stop the tool.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// The command line is wrong; the message includes the usage.
    #[error("{0}")]
    Usage(String),
    /// The API server, the connection or the configuration failed.
    #[error(transparent)]
    Client(#[from] kinformer_client::Error),
    /// Listing or watching failed in a way retrying cannot fix.
    #[error(transparent)]
    ListWatch(#[from] kinformer_core::list_watch::Error),
    /// The embedded simulated cluster could not start.
    #[error("embedded simulated cluster: {0}")]
    Sim(#[from] kinformer_sim::Error),
    /// Writing the output failed (a closed pipe, say).
    #[error("writing output: {0}")]
    Output(#[from] std::io::Error),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    if matches!(
        std::env::args().nth(1).as_deref(),
        Some("-h" | "--help" | "help")
    ) {
        println!("{}", args::USAGE);
        return ExitCode::SUCCESS;
    }
    let args = match args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kinformer: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Error::Usage(u)) => {
            eprintln!("{u}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("kinformer: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Error> {
    let options = KubeconfigOptions {
        context: args.context.clone(),
        ..KubeconfigOptions::default()
    };
    let config = if args.sim {
        None
    } else if let Some(path) = &args.kubeconfig {
        Some(Config::from_path(path, &options)?)
    } else {
        Config::find(&options)?
    };
    // Keep the embedded server and its churn alive for as long as the command runs.
    let mut embedded = None;
    let config = match config {
        Some(c) => c,
        None => {
            let sim = SimServer::start(SimConfig::default()).await?;
            let store = sim.store();
            store.seed_pods(args.sim_pods, args.seed);
            let churn = (args.sim_churn > 0.0).then(|| {
                store.churn(ChurnConfig {
                    rate_per_sec: args.sim_churn,
                    seed: args.seed,
                })
            });
            eprintln!(
                "kinformer: {}: using an embedded simulated cluster at {} ({} pods, {} writes/s)",
                if args.sim {
                    "--sim"
                } else {
                    "no kubeconfig found"
                },
                sim.url(),
                args.sim_pods,
                args.sim_churn,
            );
            let config = Config::new(sim.url());
            embedded = Some((sim, churn));
            config
        }
    };
    let client = Client::new(config)?;
    // An informer watches every namespace unless told otherwise.
    let api: Api<PartialObjectMetadata> =
        Api::metadata(client, &args.resource, args.namespace.as_deref());
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let selectors = args.selectors();
    let result = match args.command {
        Command::Get => watch::get(&api, &selectors, &mut out).await,
        Command::Watch => tokio::select! {
            r = watch::watch(&api, &selectors, args.max_events, &mut out) => r,
            r = tokio::signal::ctrl_c() => r.map_err(Error::from),
        },
    };
    out.flush()?;
    if let Some((sim, churn)) = embedded {
        drop(churn);
        sim.shutdown().await;
    }
    result
}
