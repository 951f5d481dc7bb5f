//! What the examples share: a client for the cluster of your kubeconfig or, when there is none,
//! for an in-process simulated cluster with churn; and how long to run.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use kinformer::client::{Client, Config, KubeconfigOptions};
use kinformer_sim::{ClusterConfig, SimConfig, SimServer};

/// A client, and the simulated server behind it when there was no cluster to connect to (keep
/// it alive while the example runs).
pub async fn connect() -> Result<(Client, Option<SimServer>), Box<dyn std::error::Error>> {
    if let Some(config) = Config::find(&KubeconfigOptions::default())? {
        return Ok((Client::new(config)?, None));
    }
    let sim = SimServer::start(SimConfig::default()).await?;
    // A small cluster that looks real (nodes, deployments, replica sets, pods, services) and
    // keeps changing: rollouts, scaling, pods starting, crashing and terminating.
    sim.seed_cluster(&ClusterConfig {
        pods: 50,
        seed: 1,
        rate_per_sec: 10.0,
    });
    eprintln!(
        "no kubeconfig found: running against an in-process simulated cluster at {} with 50 pods and 10 writes/s",
        sim.url()
    );
    Ok((Client::new(Config::new(sim.url()))?, Some(sim)))
}

/// Logs to stderr as `RUST_LOG` says (`warn` when it is unset: the reflector's retried
/// failures, with what failed), so that a program that cannot reach its cluster says why.
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
}

/// How long the examples wait for their informers' first sync before they give up and say
/// which informer is late and why: 30 s, or `KINFORMER_EXAMPLE_SYNC_SECONDS`.
pub fn sync_timeout() -> Duration {
    let seconds = std::env::var("KINFORMER_EXAMPLE_SYNC_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(30);
    Duration::from_secs(seconds)
}

/// Goes on once synced; otherwise says which informer is late, how far it got and its last
/// error, and exits with status 1.
pub fn synced_or_exit(result: Result<(), kinformer::NotSynced>) {
    if let Err(late) = result {
        eprintln!("{late}");
        std::process::exit(1);
    }
}

/// Runs until Ctrl-C, or for `KINFORMER_EXAMPLE_SECONDS` seconds when that is set (the tests
/// that keep the examples from rotting set it).
pub async fn run_for_a_while() {
    let limit = std::env::var("KINFORMER_EXAMPLE_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok());
    match limit {
        Some(seconds) => tokio::time::sleep(Duration::from_secs(seconds)).await,
        None => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
