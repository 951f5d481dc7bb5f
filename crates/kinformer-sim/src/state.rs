//! What every request handler shares: the store, the fault state, the accepted credentials,
//! the configuration, the log of requests received and the server's churn.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::auth::Auth;
use crate::config::SimConfig;
use crate::faults::FaultState;
use crate::store::Store;
use crate::workload::{ChurnConfig, ChurnHandle};

/// How many requests [`SimServer::requests`](crate::SimServer::requests) remembers: the most
/// recent ones.
pub const REQUEST_LOG_CAPACITY: usize = 10_000;

/// One request the server received, as [`SimServer::requests`](crate::SimServer::requests) lists
/// it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// The HTTP method, e.g. `GET`.
    pub method: String,
    /// The path, e.g. `/api/v1/pods`.
    pub path: String,
    /// The query parameters in the order sent, percent-decoded.
    pub query: Vec<(String, String)>,
    /// The `Accept-Encoding` header, if sent: what the client would take compressed.
    pub accept_encoding: Option<String>,
    /// The `Accept` header, if sent: the media types the client would take.
    pub accept: Option<String>,
}

impl RecordedRequest {
    /// The value of query parameter `name`, if it was sent.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// `true` for a watch (`watch=true` or `watch=1`).
    pub fn is_watch(&self) -> bool {
        matches!(self.param("watch"), Some("true" | "1"))
    }
}

/// What every request handler shares.
pub(crate) struct Shared {
    pub(crate) store: Store,
    pub(crate) requests: Mutex<VecDeque<RecordedRequest>>,
    pub(crate) faults: Arc<FaultState>,
    pub(crate) auth: RwLock<Auth>,
    pub(crate) config: SimConfig,
    pub(crate) addr: SocketAddr,
    /// The churn the server runs ([`SimServer::set_churn`](crate::SimServer::set_churn) and the
    /// admin endpoint).
    pub(crate) churn: Mutex<Option<ChurnHandle>>,
}

impl Shared {
    /// Starts, replaces or (with `None`) stops the server's churn.
    pub(crate) fn set_churn(&self, config: Option<ChurnConfig>) {
        self.replace_churn(config.map(|c| self.store.churn(c)));
    }

    /// Makes `next` the server's churn, stopping the one it replaces.
    pub(crate) fn replace_churn(&self, next: Option<ChurnHandle>) {
        if let Some(old) = std::mem::replace(&mut *self.churn.lock(), next) {
            old.stop();
        }
    }
}
