//! The error type of `kinformer-sim`.

use std::net::SocketAddr;
use std::time::Duration;

/// What can go wrong when starting or running the simulated server. API failures are not errors
/// of this type: they are Kubernetes `Status` answers ([`kinformer_core::Status`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The listening socket could not be bound. Retryable with another port (port 0 always picks a
    /// free one); not retryable if the address itself is unusable.
    #[error("cannot bind {addr}: {source}")]
    Bind {
        /// The address that was to be bound.
        addr: SocketAddr,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },

    /// Generating the CA, the server certificate or a client certificate failed. Not retryable:
    /// the crypto backend refused the parameters.
    #[error("cannot generate TLS certificates: {0}")]
    Certificate(String),

    /// The TLS configuration was rejected. Not retryable.
    #[error("cannot configure TLS: {0}")]
    Tls(#[from] rustls::Error),

    /// Reading or writing a file (the binary's kubeconfig) failed. Retryable once the file system
    /// problem is fixed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),

    /// A command-line argument or workload setting is invalid. Not retryable: fix the argument.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A wait of the test kit ran out of time before its condition held
    /// ([`SimServer::wait_until_watches_reach`](crate::SimServer::wait_until_watches_reach),
    /// [`Store::wait_until`](crate::Store::wait_until)). Retryable with a longer timeout, but in a
    /// test it usually means the client under test never watched, stopped, or fell behind.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    /// use kinformer_sim::{Error, SimConfig, SimServer};
    ///
    /// let sim = SimServer::start(SimConfig::default()).await.unwrap();
    /// // Nobody watches this server, so no watch reaches anything.
    /// let err = sim.wait_until_watches_reach(1, Duration::from_millis(10)).await.unwrap_err();
    /// assert!(matches!(err, Error::Timeout { .. }), "{err}");
    /// # }
    /// ```
    #[error("waited {waited:?} for {condition}")]
    Timeout {
        /// How long the wait lasted.
        waited: Duration,
        /// What was waited for, and how far things had got when the time ran out.
        condition: String,
    },
}
