//! An HTTP client for the write tests: JSON bodies (merge patches for `PATCH`), status and
//! body back.

#![allow(dead_code)]

use kinformer_sim::{SimConfig, SimServer};
use serde_json::Value;

/// A plain client of one simulated server.
pub(crate) struct Api {
    c: reqwest::Client,
    base: String,
}

impl Api {
    /// A server with the default configuration, and a client of it.
    pub(crate) async fn start() -> (SimServer, Api) {
        Self::start_with(SimConfig::default()).await
    }

    /// A server with `config`, and a client of it.
    pub(crate) async fn start_with(config: SimConfig) -> (SimServer, Api) {
        let sim = SimServer::start(config).await.unwrap();
        // reqwest is built without a default TLS provider; these tests speak plain HTTP.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let api = Api {
            c: reqwest::Client::new(),
            base: sim.url(),
        };
        (sim, api)
    }

    /// The raw response: status, headers, body as JSON (`Null` if it is not JSON).
    pub(crate) async fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> (u16, reqwest::header::HeaderMap, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut r = self
            .c
            .request(method.clone(), format!("{}{path}", self.base));
        if let Some(b) = body {
            let ct = if method == reqwest::Method::PATCH {
                "application/merge-patch+json"
            } else {
                "application/json"
            };
            r = r.header("content-type", ct).body(b.to_vec());
        }
        let r = r.send().await.unwrap();
        let code = r.status().as_u16();
        let headers = r.headers().clone();
        let bytes = r.bytes().await.unwrap();
        (
            code,
            headers,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    pub(crate) async fn send(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let body = body.map(|b| b.to_string().into_bytes());
        let (code, _, v) = self.request(method, path, body.as_deref()).await;
        (code, v)
    }

    pub(crate) async fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (code, v) = self.send(method, path, body).await;
        assert!((200..300).contains(&code), "{method} {path}: {code} {v}");
        v
    }
}

pub(crate) fn rv(v: &Value) -> &str {
    v["metadata"]["resourceVersion"].as_str().unwrap()
}
