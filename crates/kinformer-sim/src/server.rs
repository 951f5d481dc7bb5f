//! The HTTP(S) server: listener, TLS, connections and authentication; each authenticated
//! request is recorded and handed to the router.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use parking_lot::{Mutex, RwLock};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::auth::{Auth, Presented, TlsMaterial, kubeconfig};
use crate::cluster::{Cluster, ClusterConfig};
use crate::config::SimConfig;
use crate::error::Error;
use crate::faults::{FaultState, Faults};
use crate::namespaces::namespace_controllers;
use crate::request::Query;
use crate::response::{Body, status_response};
use crate::router;
use crate::state::{REQUEST_LOG_CAPACITY, RecordedRequest, Shared};
use crate::store::Store;
use crate::workload::ChurnConfig;

/// A running simulated API server on 127.0.0.1.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use kinformer_sim::{SimConfig, SimServer};
///
/// let sim = SimServer::start(SimConfig { tls: true, ..SimConfig::default() }).await.unwrap();
/// assert!(sim.url().starts_with("https://127.0.0.1:"));
/// assert!(sim.ca_pem().unwrap().contains("BEGIN CERTIFICATE"));
/// assert!(sim.kubeconfig_yaml().contains("certificate-authority-data"));
/// sim.shutdown().await;
/// # }
/// ```
pub struct SimServer {
    shared: Arc<Shared>,
    tls: Option<Arc<TlsMaterial>>,
    shutdown: watch::Sender<bool>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for SimServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimServer")
            .field("url", &self.url())
            .finish_non_exhaustive()
    }
}

impl SimServer {
    /// Binds 127.0.0.1 (port 0 unless configured) and starts serving in the background on the
    /// current tokio runtime.
    pub async fn start(config: SimConfig) -> Result<Self, Error> {
        let tls = if config.tls {
            Some(Arc::new(TlsMaterial::generate()?))
        } else {
            None
        };
        let bind = SocketAddr::from(([127, 0, 0, 1], config.port));
        let listener = TcpListener::bind(bind)
            .await
            .map_err(|source| Error::Bind { addr: bind, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| Error::Bind { addr: bind, source })?;
        let store = Store::new(config.history_window);
        if !config.version.pods_have_generation() {
            store.without_pod_generation();
        }
        if !config.version.pods_track_observed_generation() {
            store.without_pod_observed_generation();
        }
        let shared = Arc::new(Shared {
            store,
            requests: Mutex::new(std::collections::VecDeque::new()),
            faults: Arc::new(FaultState::new()),
            auth: RwLock::new(config.auth.clone()),
            config,
            addr,
            churn: Mutex::new(None),
        });
        let (shutdown, shutdown_rx) = watch::channel(false);
        tokio::spawn(kubelet_loop(shared.store.clone(), shutdown_rx.clone()));
        tokio::spawn(namespace_controllers(
            shared.store.clone(),
            tls.as_ref().map(|t| t.ca_pem.clone()),
            shutdown_rx.clone(),
        ));
        if let Some(every) = shared.config.compaction_interval {
            tokio::spawn(compaction_loop(
                shared.store.clone(),
                every,
                shutdown_rx.clone(),
            ));
        }
        let accept = tokio::spawn(accept_loop(
            listener,
            Arc::clone(&shared),
            tls.clone(),
            shutdown_rx,
        ));
        tracing::debug!(%addr, tls = tls.is_some(), "kinformer-sim serving");
        Ok(Self {
            shared,
            tls,
            shutdown,
            accept: Some(accept),
        })
    }

    /// The base URL: `http://127.0.0.1:PORT` or `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.shared.addr)
    }

    /// The address the server is bound to.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// The PEM of the CA that signed the server certificate (TLS mode only).
    pub fn ca_pem(&self) -> Option<String> {
        self.tls.as_ref().map(|t| t.ca_pem.clone())
    }

    /// A client certificate for `common_name` and its PKCS#8 private key, both PEM, signed by the
    /// server's client CA, so that [`Auth::ClientCert`] accepts it. Outside TLS mode (or if key
    /// generation fails) both strings are empty.
    pub fn issue_client_cert(&self, common_name: &str) -> (String, String) {
        self.tls
            .as_ref()
            .and_then(|t| t.issue_client_cert(common_name).ok())
            .unwrap_or_default()
    }

    /// A kubeconfig for this server that `kubectl` accepts: the server URL, the CA (TLS mode) and
    /// the first credential the current [`Auth`] accepts (a token, a user name and password, or a
    /// freshly issued client certificate).
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig(&self.url(), self.tls.as_deref(), &self.shared.auth.read())
    }

    /// Changes the accepted credentials from now on (for token rotation tests). Open watches are
    /// not affected.
    pub fn set_auth(&self, auth: Auth) {
        *self.shared.auth.write() = auth;
    }

    /// The requests received so far (after authentication), oldest first: the most recent
    /// [`REQUEST_LOG_CAPACITY`]. Tests assert what a client asked for, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().iter().cloned().collect()
    }

    /// Forgets the requests received so far.
    pub fn clear_requests(&self) {
        self.shared.requests.lock().clear();
    }

    /// The in-process handle to the storage.
    pub fn store(&self) -> Store {
        self.shared.store.clone()
    }

    /// Starts (or replaces) a churn of pod writes run by the server, or stops it with `None`. The
    /// admin endpoint `churn` controls the same churn.
    pub fn set_churn(&self, config: Option<ChurnConfig>) {
        self.shared.set_churn(config);
    }

    /// Seeds a cluster that looks like a real one ([`Cluster`]: nodes, namespaces, deployments,
    /// replica sets, pods, services) and, when [`ClusterConfig::rate_per_sec`] is above zero,
    /// runs its churn as the server's churn, replacing any ([`SimServer::set_churn`] and the
    /// admin endpoint `churn` replace it in turn). Call it on the server's tokio runtime.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use kinformer_sim::{ClusterConfig, SimConfig, SimServer};
    ///
    /// let sim = SimServer::start(SimConfig::default()).await.unwrap();
    /// sim.seed_cluster(&ClusterConfig { pods: 50, seed: 7, rate_per_sec: 4.0 });
    /// // kubectl get nodes,deploy,rs,pods,svc -A now shows a small cluster that keeps changing.
    /// sim.shutdown().await;
    /// # }
    /// ```
    pub fn seed_cluster(&self, config: &ClusterConfig) {
        let cluster = Cluster::seed(&self.shared.store, config);
        let next = (config.rate_per_sec > 0.0).then(|| cluster.churn(&self.shared.store));
        self.shared.replace_churn(next);
    }

    /// The fault injection knobs.
    pub fn faults(&self) -> Faults {
        Faults {
            state: Arc::clone(&self.shared.faults),
            store: self.shared.store.clone(),
        }
    }

    /// Stops accepting and drops every open connection.
    pub async fn shutdown(mut self) {
        self.shutdown.send_replace(true);
        self.shared.set_churn(None);
        if let Some(accept) = self.accept.take() {
            let _ = accept.await;
        }
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
        self.shared.set_churn(None);
    }
}

/// Deletes pods whose grace period has ended, as their kubelet would once their containers
/// stopped.
async fn kubelet_loop(store: Store, mut shutdown: watch::Receiver<bool>) {
    // Bounded by shutdown: the loop ends when the server is shut down or dropped.
    loop {
        let next = store.next_termination();
        tokio::select! {
            () = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => store.finish_terminations(tokio::time::Instant::now()),
            () = store.termination_scheduled() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
    }
}

/// Compacts history every `every`, up to the version seen at the previous compaction, as the API
/// server's compactor asks etcd to: between one and two intervals of history are kept.
async fn compaction_loop(store: Store, every: Duration, mut shutdown: watch::Receiver<bool>) {
    let every = every.max(Duration::from_millis(1));
    let mut seen = store.resource_version();
    // Bounded by shutdown: the loop ends when the server is shut down or dropped.
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        store.compact_to(seen);
        seen = store.resource_version();
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    tls: Option<Arc<TlsMaterial>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let acceptor = tls.map(|t| tokio_rustls::TlsAcceptor::from(Arc::clone(&t.server_config)));
    // Bounded by shutdown: the loop ends when the server is shut down or dropped.
    loop {
        let (tcp, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
            _ = shutdown.wait_for(|s| *s) => return,
        };
        let _ = tcp.set_nodelay(true);
        let shared = Arc::clone(&shared);
        let acceptor = acceptor.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let mut drop_all = shared.faults.drop_all.subscribe();
            drop_all.borrow_and_update();
            match acceptor {
                Some(acceptor) => {
                    let tls = tokio::select! {
                        r = acceptor.accept(tcp) => r,
                        _ = drop_all.changed() => return,
                    };
                    match tls {
                        Ok(stream) => {
                            let client_cert = stream
                                .get_ref()
                                .1
                                .peer_certificates()
                                .is_some_and(|c| !c.is_empty());
                            serve(stream, shared, client_cert, drop_all, shutdown).await;
                        }
                        Err(e) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                    }
                }
                None => serve(tcp, shared, false, drop_all, shutdown).await,
            }
        });
    }
}

/// The `SETTINGS_MAX_CONCURRENT_STREAMS` a kube-apiserver advertises: it leaves
/// `--http2-max-streams-per-connection` at 0, so its secure server sets 100, what Go's HTTP/2
/// clients assume before they see the server's settings, rather than Go's server default of 250
/// (`staging/src/k8s.io/apiserver/pkg/server/secure_serving.go`, `Serve`). Aggregated API
/// servers built from `RecommendedOptions` set 1000.
const HTTP2_MAX_CONCURRENT_STREAMS: u32 = 100;

/// The apiserver's per-stream HTTP/2 receive window and largest frame it reads: 256 KiB
/// (`resourceBody99Percentile` in `secure_serving.go`), instead of Go's 1 MiB; its connection
/// window is that times [`HTTP2_MAX_CONCURRENT_STREAMS`].
const HTTP2_STREAM_BUFFER: u32 = 256 * 1024;

async fn serve<IO>(
    io: IO,
    shared: Arc<Shared>,
    client_cert: bool,
    mut drop_all: watch::Receiver<u64>,
    mut shutdown: watch::Receiver<bool>,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let shared = Arc::clone(&shared);
        async move { Ok::<_, Infallible>(handle(shared, client_cert, req).await) }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http2()
        .max_concurrent_streams(HTTP2_MAX_CONCURRENT_STREAMS)
        .initial_stream_window_size(HTTP2_STREAM_BUFFER)
        .initial_connection_window_size(HTTP2_STREAM_BUFFER * HTTP2_MAX_CONCURRENT_STREAMS)
        .max_frame_size(HTTP2_STREAM_BUFFER);
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::select! {
        r = conn => if let Err(e) = r {
            tracing::debug!(error = %e, "connection ended with an error");
        },
        _ = drop_all.changed() => tracing::debug!("connection dropped by fault injection"),
        _ = shutdown.wait_for(|s| *s) => {},
    }
}

fn record(shared: &Shared, parts: &http::request::Parts) {
    let query = Query::parse(parts.uri.query().unwrap_or_default()).0;
    let mut log = shared.requests.lock();
    if log.len() == REQUEST_LOG_CAPACITY {
        log.pop_front();
    }
    log.push_back(RecordedRequest {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        query,
        accept_encoding: parts
            .headers
            .get(http::header::ACCEPT_ENCODING)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        accept: parts
            .headers
            .get(http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    });
}

async fn handle(shared: Arc<Shared>, client_cert: bool, req: Request<Incoming>) -> Response<Body> {
    let authorization = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let presented = Presented {
        authorization,
        client_cert,
    };
    if !shared.auth.read().accepts(&presented) {
        tracing::debug!(path = %req.uri().path(), "unauthorized request");
        return status_response(&kinformer_core::Status::failure(
            401,
            "Unauthorized",
            "Unauthorized",
        ));
    }
    let (parts, body) = req.into_parts();
    record(&shared, &parts);
    router::route(&shared, parts, body.map_err(std::io::Error::other).boxed()).await
}
