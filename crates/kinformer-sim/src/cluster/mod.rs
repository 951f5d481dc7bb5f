//! A simulated cluster that looks like a real one: nodes, namespaces, deployments with their
//! replica sets and pods, a daemon set, control-plane pods and services, seeded and then churned
//! by a small model of the controllers and kubelets that run a real cluster.
//!
//! Everything the model writes goes through [`Store`], so watches see ordinary `ADDED`,
//! `MODIFIED` and `DELETED` events, and every choice comes from one seeded generator: the same
//! [`ClusterConfig`] gives the same objects and the same sequence of writes.
//!
//! The files, each with one job, lowest first: `fields` the `managedFields` the field manager
//! records for each write; `model` holds the vocabulary and the state (the public
//! configuration and write records, the model's view of what it wrote, its clock and work
//! queue); `catalogue` the fixed data seeding draws from; `names` Kubernetes-shaped names and
//! hashes; `objects` how the model's view becomes API objects; `controllers` what the
//! scheduler, kubelets and controllers write for each action (seeding reuses its replica set,
//! scheduling, status and EndpointSlice pieces); `seed` the first write of the cluster; this
//! file the public entry points and the churn on the tokio runtime. Each file uses only files
//! before it.

mod catalogue;
mod controllers;
mod model;
mod names;
mod objects;
mod seed;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use model::{Cluster, ClusterConfig, ClusterWrite, WriteKind};

use crate::store::{Store, splitmix};
use crate::workload::{ChurnHandle, Rng};
use model::Action;

impl Cluster {
    /// Writes a cluster of `config.pods` pods into `store` (see [`Cluster`] for what it holds)
    /// and returns the model that churns it. Objects that already exist are left alone.
    pub fn seed(store: &Store, config: &ClusterConfig) -> Self {
        let mut c = Self {
            config: config.clone(),
            rng: Rng(splitmix(config.seed ^ 0xc1u64)),
            clock: 0,
            epoch: jiff::Timestamp::now().as_second(),
            nodes: Vec::new(),
            deploys: Vec::new(),
            sets: BTreeMap::new(),
            pods: BTreeMap::new(),
            queue: BTreeMap::new(),
            seq: 0,
            status_queued: BTreeSet::new(),
            endpoints_queued: BTreeSet::new(),
        };
        c.seed_all(store);
        c
    }

    /// The configuration it was seeded with.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// Makes the next change: the first piece of work that is due (a pod to schedule, start or
    /// remove, a replica set to reconcile, a status to write, the next step of a rollout), or,
    /// when nothing is due, a new activity. Returns the writes it made (usually one, a few for
    /// status updates and the start of a rollout); empty only if nothing could be done.
    pub fn step(&mut self, store: &Store) -> Vec<ClusterWrite> {
        self.clock += 1;
        // Bounded: a few tries at finding something to do.
        for _ in 0..8 {
            let action = self.pop_due().unwrap_or(Action::Activity);
            let writes = self.apply(store, action);
            if !writes.is_empty() {
                return writes;
            }
        }
        Vec::new()
    }

    /// Runs the work already queued, and the work it queues, without starting anything new, until
    /// nothing is left or `max_writes` writes were made: rollouts finish, pods reach Running or
    /// go, statuses are written. Returns whether the cluster settled.
    pub fn settle(&mut self, store: &Store, max_writes: usize) -> bool {
        let mut writes = 0;
        while writes < max_writes {
            let Some((&(due, _), _)) = self.queue.first_key_value() else {
                return true;
            };
            let action = self.pop();
            self.clock = self.clock.max(due);
            writes += self.apply(store, action).len().max(1);
        }
        self.queue.is_empty()
    }

    /// Starts a rolling update of the deployment `namespace/name` to a new image version, as
    /// `kubectl set image` would. Returns the writes (the new replica set, the deployment), or
    /// nothing when there is no such deployment or it is rolling out already.
    pub fn rollout(&mut self, store: &Store, namespace: &str, name: &str) -> Vec<ClusterWrite> {
        let Some(d) = self
            .deploys
            .iter()
            .position(|d| d.key.0 == namespace && d.key.1 == name && !d.rolling)
        else {
            return Vec::new();
        };
        self.start_rollout(store, d)
    }

    /// Starts making changes on the current tokio runtime, at about
    /// [`ClusterConfig::rate_per_sec`] writes a second, until the handle is stopped or dropped.
    pub fn churn(self, store: &Store) -> ChurnHandle {
        let writes = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(churn_loop(self, store.clone(), Arc::clone(&writes)));
        ChurnHandle::new(task, writes)
    }
}

async fn churn_loop(mut cluster: Cluster, store: Store, writes: Arc<AtomicU64>) {
    let rate = cluster.config.rate_per_sec;
    if rate.is_nan() || rate <= 0.0 {
        return;
    }
    let tick = Duration::from_millis(10);
    let per_tick = rate / 100.0;
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut owed = 0.0;
    // Runs until the handle aborts the task.
    loop {
        ticker.tick().await;
        owed += per_tick;
        while owed >= 1.0 {
            let made = cluster.step(&store).len();
            writes.fetch_add(made as u64, Ordering::Relaxed);
            // A step that found nothing to do still uses its turn.
            owed -= made.max(1) as f64;
        }
    }
}
