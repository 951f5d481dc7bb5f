//! `kinformer-sim`: runs the simulated Kubernetes API server until Ctrl-C.
//!
//! ```text
//! kinformer-sim [--port 0] [--pods 1000] [--churn 50/s] [--seed 1] [--tls] [--token TOKEN]
//!               [--kubeconfig PATH]
//! ```
//! Prints the address it bound and the path of a kubeconfig that `kubectl` and kinformer accept.

use std::path::PathBuf;

use kinformer_sim::{Auth, ChurnConfig, Error, SimConfig, SimServer};

#[derive(Debug)]
struct Args {
    port: u16,
    pods: usize,
    churn: f64,
    seed: u64,
    tls: bool,
    token: Option<String>,
    kubeconfig: Option<PathBuf>,
}

const USAGE: &str = "usage: kinformer-sim [--port N] [--pods N] [--churn RATE/s] [--seed N] [--tls] [--token T] [--kubeconfig PATH]";

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, Error> {
    let mut a = Args {
        port: 0,
        pods: 0,
        churn: 0.0,
        seed: 1,
        tls: false,
        token: None,
        kubeconfig: None,
    };
    let bad = |what: &str| Error::InvalidArgument(format!("{what}\n{USAGE}"));
    while let Some(flag) = it.next() {
        let (flag, inline) = match flag.split_once('=') {
            Some((f, v)) => (f.to_owned(), Some(v.to_owned())),
            None => (flag, None),
        };
        if flag == "--tls" {
            a.tls = true;
            continue;
        }
        if flag == "--help" || flag == "-h" {
            return Err(bad("help requested"));
        }
        let value = inline
            .or_else(|| it.next())
            .ok_or_else(|| bad(&format!("{flag} needs a value")))?;
        let num = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| bad(&format!("{flag}: {v:?} is not a number")))
        };
        match flag.as_str() {
            "--port" => {
                a.port = u16::try_from(num(&value)?).map_err(|_| bad("--port is too large"))?
            }
            "--pods" => {
                a.pods = usize::try_from(num(&value)?).map_err(|_| bad("--pods is too large"))?
            }
            "--churn" => a.churn = ChurnConfig::parse_rate(&value)?,
            "--seed" => a.seed = num(&value)?,
            "--token" => a.token = Some(value),
            "--kubeconfig" => a.kubeconfig = Some(PathBuf::from(value)),
            other => return Err(bad(&format!("unknown flag {other}"))),
        }
    }
    Ok(a)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = parse_args(std::env::args().skip(1))?;
    let sim = SimServer::start(SimConfig {
        tls: args.tls,
        auth: args.token.clone().map_or(Auth::None, Auth::BearerToken),
        port: args.port,
        ..SimConfig::default()
    })
    .await?;
    let store = sim.store();
    if args.pods > 0 {
        store.seed_pods(args.pods, args.seed);
    }
    let path = args.kubeconfig.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("kinformer-sim-{}.kubeconfig", sim.addr().port()))
    });
    std::fs::write(&path, sim.kubeconfig_yaml())?;
    let _churn = (args.churn > 0.0).then(|| {
        store.churn(ChurnConfig {
            rate_per_sec: args.churn,
            seed: args.seed,
        })
    });
    println!("kinformer-sim listening on {}", sim.url());
    println!("kubeconfig: {}", path.display());
    println!("try: kubectl --kubeconfig {} get pods -A", path.display());
    tokio::signal::ctrl_c().await?;
    sim.shutdown().await;
    let _ = std::fs::remove_file(&path);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flags() {
        let a = parse_args(
            [
                "--port",
                "0",
                "--pods=1000",
                "--churn",
                "50/s",
                "--tls",
                "--token",
                "t",
            ]
            .into_iter()
            .map(String::from),
        )
        .unwrap();
        assert_eq!((a.port, a.pods, a.churn, a.tls), (0, 1000, 50.0, true));
        assert_eq!(a.token.as_deref(), Some("t"));
        assert!(parse_args(["--pods"].into_iter().map(String::from)).is_err());
        assert!(parse_args(["--what", "1"].into_iter().map(String::from)).is_err());
    }
}
