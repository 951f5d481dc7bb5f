//! What the coordination tests share: a Lease store that can be made to fail, a shard owner
//! that checks at every call that no range is held twice, a recorder of leading intervals that
//! checks no two candidates lead at once, and bounded waits on conditions.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::Lease;
use kinformer_coordination::{Error, LeaseStore};
use kinformer_core::shard::{ShardKey, ShardOwner, ShardRanges};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

/// How a [`FaultyStore`]'s writes behave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Writes {
    /// As the inner store's.
    Pass = 0,
    /// Fail at once.
    Fail = 1,
    /// Never answer.
    Hang = 2,
}

/// A store whose writes (create, update, delete) can be made to fail or hang; reads pass.
#[derive(Clone)]
pub struct FaultyStore<S> {
    inner: S,
    writes: Arc<AtomicU8>,
}

impl<S> FaultyStore<S> {
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            writes: Arc::new(AtomicU8::new(Writes::Pass as u8)),
        }
    }

    pub fn set_writes(&self, writes: Writes) {
        self.writes.store(writes as u8, Ordering::SeqCst);
    }

    async fn gate(&self) -> Result<(), Error> {
        match self.writes.load(Ordering::SeqCst) {
            0 => Ok(()),
            1 => Err(Error::store("writes are failing")),
            _ => std::future::pending().await,
        }
    }
}

#[async_trait]
impl<S: LeaseStore> LeaseStore for FaultyStore<S> {
    async fn get(&self, name: &str) -> Result<Lease, Error> {
        self.inner.get(name).await
    }
    async fn create(&self, lease: &Lease) -> Result<Lease, Error> {
        self.gate().await?;
        self.inner.create(lease).await
    }
    async fn update(&self, lease: &Lease) -> Result<Lease, Error> {
        self.gate().await?;
        self.inner.update(lease).await
    }
    async fn delete(&self, name: &str, resource_version: Option<&str>) -> Result<(), Error> {
        self.gate().await?;
        self.inner.delete(name, resource_version).await
    }
    async fn list(&self, label_selector: &str) -> Result<Vec<Lease>, Error> {
        self.inner.list(label_selector).await
    }
}

/// What every replica's owner holds, shared: each `set_ranges` checks that no two replicas
/// hold any part of one range.
#[derive(Clone)]
pub struct Owners {
    held: Arc<Mutex<BTreeMap<String, ShardRanges>>>,
    violations: Arc<Mutex<Vec<String>>>,
    calls: Arc<watch::Sender<u64>>,
    /// How long each `set_ranges` takes (as an owner that has work to stop).
    delay: Duration,
}

impl Owners {
    pub fn new(delay: Duration) -> Self {
        Self {
            held: Arc::default(),
            violations: Arc::default(),
            calls: Arc::new(watch::channel(0).0),
            delay,
        }
    }

    /// The owner of one replica.
    pub fn owner(&self, replica: &str) -> ReplicaOwner {
        ReplicaOwner {
            owners: self.clone(),
            replica: replica.to_owned(),
        }
    }

    /// A replica that was killed: its owner acts on nothing any more.
    pub fn forget(&self, replica: &str) {
        self.held.lock().remove(replica);
        self.calls.send_modify(|c| *c += 1);
    }

    pub fn snapshot(&self) -> BTreeMap<String, ShardRanges> {
        self.held.lock().clone()
    }

    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().clone()
    }

    /// Waits until `condition` holds of what the owners hold, failing the test at once on a
    /// violation, or when `bound` passes.
    pub async fn wait_until(
        &self,
        what: &str,
        bound: Duration,
        condition: impl Fn(&BTreeMap<String, ShardRanges>) -> bool,
    ) {
        let mut calls = self.calls.subscribe();
        let waited = tokio::time::timeout(bound, async {
            loop {
                let violations = self.violations();
                assert!(violations.is_empty(), "{violations:#?}");
                if condition(&self.held.lock()) {
                    return;
                }
                calls.changed().await.unwrap();
            }
        })
        .await;
        if waited.is_err() {
            panic!(
                "not within {bound:?}: {what}; the owners hold {:#?}",
                self.snapshot()
            );
        }
    }
}

/// Whether `replicas` (exactly those) hold ranges that cover the whole space, each some.
pub fn cover(held: &BTreeMap<String, ShardRanges>, replicas: &[&str]) -> bool {
    let holding: Vec<&str> = held
        .iter()
        .filter(|(_, r)| !r.is_empty())
        .map(|(k, _)| k.as_str())
        .collect();
    let all = held
        .values()
        .fold(ShardRanges::none(ShardKey::Uid), |a, r| a.union(r));
    holding == replicas && all.is_all()
}

/// The shard owner of one replica.
pub struct ReplicaOwner {
    owners: Owners,
    replica: String,
}

#[async_trait]
impl ShardOwner for ReplicaOwner {
    async fn set_ranges(&self, owned: ShardRanges) {
        if !self.owners.delay.is_zero() {
            tokio::time::sleep(self.owners.delay).await;
        }
        let mut held = self.owners.held.lock();
        held.insert(self.replica.clone(), owned);
        let mut violations = Vec::new();
        for (a, ra) in held.iter() {
            for (b, rb) in held.range::<String, _>((
                std::ops::Bound::Excluded(a.clone()),
                std::ops::Bound::Unbounded,
            )) {
                let both = ra.intersection(rb);
                if !both.is_empty() {
                    violations.push(format!("{a} and {b} both hold {both}"));
                }
            }
        }
        drop(held);
        self.owners.violations.lock().extend(violations);
        self.owners.calls.send_modify(|c| *c += 1);
    }
}

/// Who leads, as the candidates' leading work sees it: a candidate starts leading when its
/// `on_started_leading` is called, and stops when its work sees leadership lost. Starting
/// while another leads is a violation.
#[derive(Clone, Default)]
pub struct Leading {
    state: Arc<Mutex<LeadingState>>,
    changes: Arc<watch::Sender<u64>>,
}

#[derive(Default)]
struct LeadingState {
    current: Option<String>,
    /// Every start and stop, in order, with the time it happened.
    log: Vec<(Instant, String)>,
    violations: Vec<String>,
}

impl Leading {
    pub fn started(&self, id: &str) {
        let mut s = self.state.lock();
        if let Some(other) = &s.current {
            let v = format!("{id} started leading while {other} led");
            s.violations.push(v);
        }
        s.current = Some(id.to_owned());
        s.log.push((Instant::now(), format!("{id} started")));
        drop(s);
        self.changes.send_modify(|c| *c += 1);
    }

    pub fn stopped(&self, id: &str) {
        let mut s = self.state.lock();
        if s.current.as_deref() == Some(id) {
            s.current = None;
        }
        s.log.push((Instant::now(), format!("{id} stopped")));
        drop(s);
        self.changes.send_modify(|c| *c += 1);
    }

    pub fn current(&self) -> Option<String> {
        self.state.lock().current.clone()
    }

    pub fn log(&self) -> Vec<(Instant, String)> {
        self.state.lock().log.clone()
    }

    pub fn violations(&self) -> Vec<String> {
        self.state.lock().violations.clone()
    }

    /// Waits until `id` leads (or, with `None`, nobody does), failing at once on a violation.
    pub async fn wait_for(&self, id: Option<&str>, bound: Duration) -> Instant {
        let mut changes = self.changes.subscribe();
        let waited = tokio::time::timeout(bound, async {
            loop {
                let violations = self.violations();
                assert!(violations.is_empty(), "{violations:#?}");
                if self.current().as_deref() == id {
                    return Instant::now();
                }
                changes.changed().await.unwrap();
            }
        })
        .await;
        match waited {
            Ok(at) => at,
            Err(_) => panic!("{id:?} not leading within {bound:?}: {:#?}", self.log()),
        }
    }
}

/// Checks `check` every `every` until it holds, failing the test when `bound` passes first: for
/// conditions nothing signals (what a store holds).
pub async fn eventually<F, Fut>(what: &str, bound: Duration, every: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + bound;
    loop {
        if check().await {
            return;
        }
        assert!(Instant::now() < deadline, "not within {bound:?}: {what}");
        tokio::time::sleep(every).await;
    }
}
