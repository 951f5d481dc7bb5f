//! `kinformer sim`: runs the simulated API server until Ctrl-C (or SIGTERM) and writes a
//! kubeconfig that `kubectl` and kinformer accept.
//!
//! The kubeconfig holds the server's credentials, so it is created exclusively with mode 0600: an
//! existing file is never overwritten (the command refuses and names it), and on exit only the
//! file this process created is removed.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kinformer_sim::{Auth, ChurnConfig, ChurnHandle, Cluster, ClusterConfig, SimConfig, SimServer};

use crate::Error;
use crate::args::SimArgs;

/// A kubeconfig file this process created; removed on drop if it is still that file.
#[derive(Debug)]
struct OwnedFile {
    path: PathBuf,
    file: Option<File>,
    /// The device, inode and change time of the file as written, so a file put in its place
    /// (which may reuse the inode number) is left alone.
    #[cfg(unix)]
    id: Option<(u64, u64, i64, i64)>,
}

impl OwnedFile {
    /// Creates `path`, which must not exist, readable and writable by its owner only.
    fn create(path: &Path) -> Result<Self, Error> {
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::AlreadyExists {
                Error::KubeconfigExists(path.to_owned())
            } else {
                Error::KubeconfigWrite {
                    path: path.to_owned(),
                    source,
                }
            }
        })?;
        let mut created = Self {
            path: path.to_owned(),
            file: Some(file),
            #[cfg(unix)]
            id: None,
        };
        created.remember()?;
        Ok(created)
    }

    /// Records the identity of the file as it is now.
    fn remember(&mut self) -> Result<(), Error> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let meta = self
                .file
                .as_ref()
                .expect("open")
                .metadata()
                .map_err(|source| Error::KubeconfigWrite {
                    path: self.path.clone(),
                    source,
                })?;
            self.id = Some((meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec()));
        }
        Ok(())
    }

    /// Writes the contents and closes the file.
    fn write(&mut self, contents: &str) -> Result<(), Error> {
        let file = self.file.as_mut().expect("written once");
        file.write_all(contents.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|source| Error::KubeconfigWrite {
                path: self.path.clone(),
                source,
            })?;
        self.remember()?;
        self.file = None;
        Ok(())
    }

    /// Whether the path still names the file this process created.
    fn still_ours(&self) -> bool {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            std::fs::symlink_metadata(&self.path)
                .is_ok_and(|m| Some((m.dev(), m.ino(), m.ctime(), m.ctime_nsec())) == self.id)
        }
        #[cfg(not(unix))]
        {
            true
        }
    }
}

impl Drop for OwnedFile {
    fn drop(&mut self) {
        self.file.take();
        if self.still_ours()
            && let Err(e) = std::fs::remove_file(&self.path)
        {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot remove the kubeconfig");
        }
    }
}

/// Ctrl-C, or on Unix SIGTERM too, listened for from the moment it is made: a signal that
/// arrives right after the address is printed is not lost to the default handler.
#[derive(Debug)]
struct StopSignal {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl StopSignal {
    fn listen() -> Result<Self, Error> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                interrupt: signal(SignalKind::interrupt()).map_err(Error::Signal)?,
                terminate: signal(SignalKind::terminate()).map_err(Error::Signal)?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Self {})
        }
    }

    /// The next Ctrl-C or SIGTERM.
    async fn wait(&mut self) -> Result<crate::Signal, Error> {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => Ok(crate::Signal::Interrupt),
                _ = self.terminate.recv() => Ok(crate::Signal::Terminate),
            }
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c()
                .await
                .map(|()| crate::Signal::Interrupt)
                .map_err(Error::Signal)
        }
    }
}

/// Starts the simulated cluster that `watch`, `get` and `stats` fall back to: `pods` pods in a
/// cluster that looks real (see [`Cluster`]), changing at `churn` writes a second, the same for
/// the same `seed`. The handle keeps the churn going; dropping it stops the churn.
pub(crate) async fn embedded(
    pods: usize,
    churn: f64,
    seed: u64,
) -> Result<(SimServer, Option<ChurnHandle>), Error> {
    let sim = SimServer::start(SimConfig::default()).await?;
    let store = sim.store();
    let cluster = Cluster::seed(
        &store,
        &ClusterConfig {
            pods,
            seed,
            rate_per_sec: churn,
        },
    );
    let churn = (churn > 0.0).then(|| cluster.churn(&store));
    Ok((sim, churn))
}

/// Runs `kinformer sim` until Ctrl-C or SIGTERM.
pub(crate) async fn run(args: SimArgs) -> Result<(), Error> {
    let mut stop = StopSignal::listen()?;
    // An explicit path is claimed before anything starts, so a refusal costs nothing.
    let explicit = args
        .kubeconfig
        .as_deref()
        .map(OwnedFile::create)
        .transpose()?;
    let sim = SimServer::start(SimConfig {
        tls: args.tls,
        auth: args.token.clone().map_or(Auth::None, Auth::BearerToken),
        port: args.port,
        version: args.kube_version,
        watch_cache: !args.no_watch_cache,
        admin: args.admin,
        ..SimConfig::default()
    })
    .await?;
    let mut kubeconfig = match explicit {
        Some(file) => file,
        None => OwnedFile::create(&std::env::temp_dir().join(format!(
            "kinformer-sim-{}-{}.kubeconfig",
            sim.addr().port(),
            std::process::id()
        )))?,
    };
    kubeconfig.write(&sim.kubeconfig_yaml())?;
    // The server runs the churn, so that the admin endpoint can stop and restart it.
    let sim = if args.pods > 0 {
        // A cluster that looks real: nodes, deployments, replica sets, their pods, services.
        // Seeding a large one takes a while: it runs on a thread of its own, so that Ctrl-C
        // and SIGTERM still stop the command (and remove the kubeconfig) meanwhile.
        let config = ClusterConfig {
            pods: args.pods,
            seed: args.seed,
            rate_per_sec: args.churn,
        };
        let sim = std::sync::Arc::new(sim);
        let seeding = tokio::task::spawn_blocking({
            let sim = std::sync::Arc::clone(&sim);
            move || sim.seed_cluster(&config)
        });
        tokio::select! {
            signal = stop.wait() => {
                let signal = signal?;
                tracing::info!("interrupted while seeding; stopping");
                // The seeding thread is left to the process's exit; the server stops with it.
                drop(kubeconfig);
                return Err(Error::Interrupted(signal));
            }
            seeded = seeding => {
                if let Err(e) = seeded {
                    std::panic::resume_unwind(e.into_panic());
                }
            }
        }
        std::sync::Arc::into_inner(sim).expect("the seeding thread has ended")
    } else {
        // An empty server stays empty unless asked to churn; then pods come and go alone.
        sim.set_churn((args.churn > 0.0).then_some(ChurnConfig {
            rate_per_sec: args.churn,
            seed: args.seed,
        }));
        sim
    };
    let path = kubeconfig.path.display();
    // A closed stdout does not stop the server: the kubeconfig is still there to be used.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "kinformer sim listening on {}", sim.url())
        .and_then(|()| writeln!(out, "kubeconfig: {path}"))
        .and_then(|()| writeln!(out, "try: kubectl --kubeconfig {path} get pods -A"))
        .and_then(|()| {
            if args.admin {
                writeln!(
                    out,
                    "admin: POST {}/kinformer-sim/admin/<action>",
                    sim.url()
                )
            } else {
                Ok(())
            }
        })
        .and_then(|()| out.flush());
    drop(out);
    let stopped = stop.wait().await.map(|_| ());
    tracing::info!("stopping");
    sim.set_churn(None);
    let _ = tokio::time::timeout(Duration::from_secs(5), sim.shutdown()).await;
    drop(kubeconfig);
    stopped
}
