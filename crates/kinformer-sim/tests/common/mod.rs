//! An HTTP client for the write tests: JSON bodies (merge patches for `PATCH`), status and
//! body back; and a reader of watch streams, line by line.

#![allow(dead_code)]

use std::time::Duration;

use bytes::Bytes;
use kinformer_sim::{SimConfig, SimServer};
use serde_json::Value;

/// How long any single read of a watch stream may take before the test fails.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

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

/// Reads a watch stream line by line, each read bounded by [`WAIT`].
pub(crate) struct Lines {
    /// The watch's response, read chunk by chunk.
    pub(crate) resp: reqwest::Response,
    /// What has arrived past the last whole line.
    pub(crate) buf: Vec<u8>,
}

/// One read of a watch stream.
#[derive(Debug)]
pub(crate) enum Read {
    Line(Bytes),
    /// The server ended the stream cleanly.
    End,
    /// The stream failed (connection dropped or cut).
    Broken,
}

impl Lines {
    /// Opens the watch at `url`, which must answer 200.
    pub(crate) async fn open(c: &reqwest::Client, url: &str) -> Self {
        let resp = c.get(url).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{url}");
        Self {
            resp,
            buf: Vec::new(),
        }
    }

    pub(crate) async fn read(&mut self) -> Read {
        self.read_within(WAIT)
            .await
            .expect("no watch line within the bound")
    }

    /// `None` if nothing arrived within `d`.
    pub(crate) async fn read_within(&mut self, d: Duration) -> Option<Read> {
        let deadline = tokio::time::Instant::now() + d;
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return Some(Read::Line(Bytes::from(line)));
            }
            match tokio::time::timeout_at(deadline, self.resp.chunk()).await {
                Err(_) => return None,
                Ok(Ok(Some(c))) => self.buf.extend_from_slice(&c),
                Ok(Ok(None)) => return Some(Read::End),
                Ok(Err(_)) => return Some(Read::Broken),
            }
        }
    }

    /// The next line as a JSON event.
    pub(crate) async fn event(&mut self) -> Value {
        match self.read().await {
            Read::Line(l) => serde_json::from_slice(&l)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&l))),
            other => panic!("expected an event, got {other:?}"),
        }
    }

    /// The next event that is not a bookmark.
    pub(crate) async fn object_event(&mut self) -> Value {
        for _ in 0..1000 {
            let e = self.event().await;
            if e["type"] != "BOOKMARK" {
                return e;
            }
        }
        panic!("only bookmarks");
    }

    /// `(type, name)` of the events up to and including `(kind, last)`, bookmarks skipped.
    pub(crate) async fn until(&mut self, kind: &str, last: &str) -> Vec<(String, String)> {
        let mut seen = Vec::new();
        for _ in 0..10_000 {
            let e = self.object_event().await;
            let got = ev(&e);
            let done = got == pair(kind, last);
            seen.push(got);
            if done {
                return seen;
            }
        }
        panic!("no {kind} {last} in 10 000 events: {seen:?}");
    }
}

/// `(type, name)` of a watch event.
pub(crate) fn ev(e: &Value) -> (String, String) {
    (
        e["type"].as_str().unwrap_or_default().to_owned(),
        e["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

/// `(type, name)` as [`ev`] gives it.
pub(crate) fn pair(t: &str, n: &str) -> (String, String) {
    (t.to_owned(), n.to_owned())
}
