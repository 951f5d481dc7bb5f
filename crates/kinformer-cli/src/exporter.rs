//! `--metrics-addr`: every metric of the pipeline (docs/metrics.md) in Prometheus text format,
//! served over HTTP at `/metrics` (any path answers) while the command runs; and the recorder
//! `stats` reads. Both are installed as one global recorder, before any metric handle is made.

use std::net::{SocketAddr, TcpListener};

use metrics_exporter_prometheus::PrometheusBuilder;
use metrics_util::layers::FanoutBuilder;

use crate::Error;
use crate::stats::AtomicRecorder;

/// What [`install`] installed.
#[derive(Debug, Default)]
pub(crate) struct Installed {
    /// The recorder `stats` reads, when asked for.
    pub(crate) stats: Option<&'static AtomicRecorder>,
    /// Where the Prometheus endpoint listens, when asked for.
    pub(crate) serving: Option<SocketAddr>,
}

/// Installs the process's recorder: the Prometheus exporter listening on `addr` (port 0: a free
/// port, chosen here so that it can be reported), the recorder `stats` reads when `stats`, or
/// both through a fan-out. Must run inside the tokio runtime, which serves the endpoint.
///
/// # Errors
/// [`Error::Usage`] when the address cannot be listened on (in use, not local, refused).
pub(crate) fn install(addr: Option<SocketAddr>, stats: bool) -> Result<Installed, Error> {
    let atomic: Option<&'static AtomicRecorder> =
        stats.then(|| &*Box::leak(Box::<AtomicRecorder>::default()));
    let prometheus = match addr {
        None => None,
        Some(addr) => {
            let addr = with_port(addr)?;
            let (recorder, exporter) = PrometheusBuilder::new()
                .with_http_listener(addr)
                .build()
                .map_err(|e| Error::Usage(format!("--metrics-addr {addr}: {e}")))?;
            tokio::spawn(async move {
                if exporter.await.is_err() {
                    tracing::warn!(%addr, "the metrics endpoint stopped");
                }
            });
            Some((recorder, addr))
        }
    };
    let serving = prometheus.as_ref().map(|(_, addr)| *addr);
    let installed = match (atomic, prometheus) {
        (None, None) => return Ok(Installed::default()),
        (Some(a), None) => metrics::set_global_recorder(a).is_ok(),
        (None, Some((p, _))) => metrics::set_global_recorder(p).is_ok(),
        (Some(a), Some((p, _))) => {
            let both = FanoutBuilder::default()
                .add_recorder(a)
                .add_recorder(p)
                .build();
            metrics::set_global_recorder(both).is_ok()
        }
    };
    if !installed {
        tracing::warn!("another metrics recorder is installed; kinformer's metrics go there");
        return Ok(Installed::default());
    }
    Ok(Installed {
        stats: atomic,
        serving,
    })
}

/// `addr`, with a free port in place of port 0: the exporter does not say which port it bound,
/// so one is found by binding and letting go first (the exporter binds it again at once).
fn with_port(addr: SocketAddr) -> Result<SocketAddr, Error> {
    if addr.port() != 0 {
        return Ok(addr);
    }
    TcpListener::bind(addr)
        .and_then(|l| l.local_addr())
        .map_err(|e| Error::Usage(format!("--metrics-addr {addr}: {e}")))
}
