//! What the informer's in-memory tests share: a fake server that sends each write to the open
//! watch, and a handler that writes down and checks its history (test-support's `Recorder`).

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use kinformer_core::list_watch::{self, ErrorKind, ListWatch, WatchStream};
use kinformer_core::{CacheRead, ListParams, Object, ObjectList, WatchEvent, WatchParams};
use kinformer_shared_informer::Registration;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

pub type Sender = UnboundedSender<Result<WatchEvent<Pod>, list_watch::Error>>;

#[derive(Default)]
pub struct Server {
    version: u64,
    objects: BTreeMap<String, Arc<Pod>>,
    watch: Option<Sender>,
}

/// A server in memory: lists its state, and sends each write to the open watch (if any).
#[derive(Clone, Default)]
pub struct Fake(pub Arc<Mutex<Server>>);

pub fn pod(name: &str, version: u64) -> Arc<Pod> {
    let mut p = Pod::default();
    p.metadata.name = Some(name.to_owned());
    p.metadata.namespace = Some("ns".to_owned());
    p.metadata.resource_version = Some(version.to_string());
    Arc::new(p)
}

impl Fake {
    /// Writes `name` (`None`: deletes it); `silent` keeps the event off the watch, as a watch
    /// that missed it.
    pub fn write(&self, name: &str, delete: bool, silent: bool) {
        let mut s = self.0.lock().unwrap();
        s.version += 1;
        let object = pod(name, s.version);
        let event = if delete {
            match s.objects.remove(name) {
                Some(_) => WatchEvent::Deleted(object),
                None => return,
            }
        } else if s
            .objects
            .insert(name.to_owned(), Arc::clone(&object))
            .is_some()
        {
            WatchEvent::Modified(object)
        } else {
            WatchEvent::Added(object)
        };
        if !silent && let Some(tx) = &s.watch {
            let _ = tx.send(Ok(event));
        }
    }

    /// Ends the open watch with "relist" (as a 410).
    pub fn expire(&self) {
        if let Some(tx) = self.0.lock().unwrap().watch.take() {
            let _ = tx.send(Err(list_watch::Error::new(ErrorKind::Relist, "expired")));
        }
    }

    pub fn state(&self) -> BTreeMap<String, String> {
        self.0
            .lock()
            .unwrap()
            .objects
            .iter()
            .map(|(k, o)| (format!("ns/{k}"), o.resource_version().unwrap().to_owned()))
            .collect()
    }
}

#[async_trait]
impl ListWatch<Pod> for Fake {
    async fn list(&self, _: &ListParams) -> Result<ObjectList<Pod>, list_watch::Error> {
        let s = self.0.lock().unwrap();
        Ok(ObjectList::new(
            s.objects.values().cloned().collect(),
            s.version.to_string().into(),
        ))
    }
    async fn watch(&self, _: &WatchParams) -> Result<WatchStream<Pod>, list_watch::Error> {
        let (tx, mut rx) = unbounded_channel();
        self.0.lock().unwrap().watch = Some(tx);
        Ok(Box::pin(futures_util::stream::poll_fn(move |cx| {
            rx.poll_recv(cx)
        })))
    }
}

/// Writes down each call, and checks the history per key ([`Recorder::replay`]).
pub type History = kinformer_test_support::Recorder<Pod>;

pub fn settle(regs: &[Registration<Pod>]) {
    for _ in 0..5000 {
        if regs.iter().all(|r| r.backlog() == 0) {
            std::thread::sleep(Duration::from_millis(1));
            if regs.iter().all(|r| r.backlog() == 0) {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("handlers did not settle");
}

/// Every key `cache` holds, with its resourceVersion: comparable with [`Fake::state`].
pub fn cached_state(cache: &dyn CacheRead<Pod>) -> BTreeMap<String, String> {
    cache
        .list()
        .iter()
        .map(|o| {
            (
                o.key().to_string(),
                o.resource_version().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Ends the open watch so a relist catches up what the watches missed, then waits (`tries`
/// times `step`, on tokio's clock) for `cache` to equal the server; returns the server's state.
pub async fn catch_up(
    fake: &Fake,
    cache: &dyn CacheRead<Pod>,
    step: Duration,
    tries: usize,
) -> BTreeMap<String, String> {
    fake.expire();
    let target = fake.state();
    for _ in 0..tries {
        if cached_state(cache) == target {
            break;
        }
        tokio::time::sleep(step).await;
    }
    target
}

/// The reflector over `source` as an informer's event stream. It lists and watches: the fakes
/// here serve no streaming list.
pub fn events<L: ListWatch<Pod> + 'static>(source: L) -> kinformer_reflector::Watcher<Pod> {
    kinformer_reflector::watcher(
        source,
        kinformer_reflector::Config {
            name: "pods".into(),
            seed: Some(1),
            streaming_list: kinformer_reflector::StreamingList::Off,
            ..kinformer_reflector::Config::default()
        },
    )
}
