//! The model at work: what the scheduler, the kubelets, the replica set, deployment and
//! endpointslice controllers and the pod garbage collector write for each action that comes
//! due, and the activities (rollouts, scaling, crashes, evictions, heartbeats) that start new
//! work. Every write records its field manager in `managedFields`.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::store::{DeleteOptions, Deletion, Store, Write};

use super::model::{
    Action, Cluster, ClusterWrite, Container, Key, Owner, Phase, PodM, RsM, WriteKind,
};
use super::names::{suffix, template_hash};
use super::objects::{
    api_version, condition_why, created_uid, node_conditions, pod_template_spec, resource,
};
use crate::fields::{
    CONTROLLER, CONTROLLER_STATUS, History, KUBECTL_SCALE, KUBECTL_SET, KUBELET_STATUS, Manager,
    SCHEDULER_STATUS, record,
};

impl Cluster {
    /// Does what `action` names (or, for [`Action::Activity`], starts something new).
    pub(super) fn apply(&mut self, store: &Store, action: Action) -> Vec<ClusterWrite> {
        match action {
            Action::Activity => self.activity(store),
            Action::Schedule(k) => self.transition(store, &k, Phase::Unscheduled, Phase::Scheduled),
            Action::StartContainers(k) => {
                self.transition(store, &k, Phase::Scheduled, Phase::Creating)
            }
            Action::Run(k) => self.transition(store, &k, Phase::Creating, Phase::Running),
            Action::Recover(k) => self.transition(store, &k, Phase::CrashLoop, Phase::Running),
            Action::Gone(k) => self.remove_pod(
                store,
                &k,
                Phase::Terminating,
                "deleted after its grace period",
            ),
            Action::Collect(k) => {
                self.remove_pod(store, &k, Phase::Failed, "evicted pod collected")
            }
            Action::Reconcile(k) => self.reconcile(store, &k),
            Action::Status(d) => self.write_status(store, d, "status"),
            Action::Rollout(d) => self.rollout_step(store, d),
            Action::Prune(d) => self.prune(store, d),
            Action::Endpoints(d) => self.sync_endpoints(store, d),
        }
    }

    fn activity(&mut self, store: &Store) -> Vec<ClusterWrite> {
        let roll = self.rng.below(100);
        match roll {
            0..35 => self.crash(store),
            35..55 => {
                let d = self.pick_deploy();
                d.map_or_else(Vec::new, |d| self.start_rollout(store, d))
            }
            55..80 => self.scale(store),
            80..88 => self.evict(store),
            _ => self.heartbeat(store),
        }
    }

    /// A deployment the churn may change: not frozen, not rolling out.
    fn pick_deploy(&mut self) -> Option<usize> {
        let free: Vec<usize> = (0..self.deploys.len())
            .filter(|&d| !self.deploys[d].frozen && !self.deploys[d].rolling)
            .collect();
        (!free.is_empty()).then(|| free[self.rng.below(free.len() as u64) as usize])
    }

    /// One of the pods `pick` accepts, at random.
    fn pick_pod(&mut self, pick: impl Fn(&PodM) -> bool) -> Option<Key> {
        let keys: Vec<Key> = self
            .pods
            .iter()
            .filter(|(_, p)| pick(p))
            .map(|(k, _)| k.clone())
            .collect();
        if keys.is_empty() {
            return None;
        }
        let i = self.rng.below(keys.len() as u64) as usize;
        keys.into_iter().nth(i)
    }

    fn deploy_of(&self, pod: &Key) -> Option<usize> {
        let rs = self.pods.get(pod)?.rs.as_ref()?;
        self.sets.get(rs).map(|r| r.deploy)
    }

    /// Writes a pod's status (and its node, when it was just bound) after a change of phase: the
    /// scheduler's binding, or the status the scheduler or the kubelet writes.
    fn write_pod(&mut self, store: &Store, key: &Key, reason: &'static str) -> Vec<ClusterWrite> {
        let pod = &self.pods[key];
        let mut patch = json!({"status": self.pod_status(key, pod)});
        if let Some(n) = pod.node {
            patch["spec"] = json!({"nodeName": self.nodes[n].name});
        }
        let by = match pod.phase {
            // A binding records no manager.
            Phase::Unscheduled | Phase::Scheduled => None,
            Phase::Unschedulable => Some(SCHEDULER_STATUS),
            _ => Some(KUBELET_STATUS),
        };
        match patched(store, "pods", key, patch, by) {
            Ok(true) => vec![write(WriteKind::Updated, "pods", key, reason)],
            Ok(false) => Vec::new(),
            Err(e) => {
                tracing::debug!(pod = %key.1, error = %e.message, "pod gone from under the model");
                self.forget_pod(key);
                Vec::new()
            }
        }
    }

    /// Moves a pod from `from` to `to` and queues what comes next.
    fn transition(
        &mut self,
        store: &Store,
        key: &Key,
        from: Phase,
        to: Phase,
    ) -> Vec<ClusterWrite> {
        if self.pods.get(key).is_none_or(|p| p.phase != from) {
            return Vec::new();
        }
        let now = Self::now();
        let node = (to == Phase::Scheduled).then(|| {
            let system = self.pods[key].system;
            self.pick_node(system)
        });
        let ip = match (to, self.pods[key].node.or(node)) {
            (Phase::Running, Some(n)) if self.pods[key].ip.is_none() => Some(self.pod_ip(n)),
            _ => None,
        };
        let pod = self.pods.get_mut(key).expect("checked");
        pod.phase = to;
        pod.since = now.clone();
        if let Some(n) = node {
            pod.node = Some(n);
            pod.scheduled_at = now.clone();
        }
        if let Some(ip) = ip {
            pod.ip = Some(ip);
        }
        if to == Phase::Running {
            pod.started_at = now;
        }
        let reason = match to {
            Phase::Scheduled => "scheduled",
            Phase::Creating => "creating containers",
            _ if from == Phase::CrashLoop => "restarted",
            _ => "running",
        };
        let writes = self.write_pod(store, key, reason);
        if writes.is_empty() {
            return writes;
        }
        match to {
            Phase::Scheduled => self.at(1, Action::StartContainers(key.clone())),
            Phase::Creating => {
                let delay = self.range(2, 6);
                self.at(delay, Action::Run(key.clone()));
            }
            _ => {
                if let Some(d) = self.deploy_of(key) {
                    self.at(1, Action::Status(d));
                    self.at(1, Action::Endpoints(d));
                }
            }
        }
        writes
    }

    fn crash(&mut self, store: &Store) -> Vec<ClusterWrite> {
        // Applications crash; the control plane and add-ons are left steady.
        let Some(key) = self.pick_pod(|p| p.phase == Phase::Running && !p.system) else {
            return Vec::new();
        };
        let now = Self::now();
        let pod = self.pods.get_mut(&key).expect("picked");
        pod.phase = Phase::CrashLoop;
        pod.restarts += 1;
        pod.last_exit = Some(now.clone());
        pod.since = now;
        let writes = self.write_pod(store, &key, "container crashed");
        if !writes.is_empty() {
            let delay = self.range(4, 14);
            self.at(delay, Action::Recover(key.clone()));
            if let Some(d) = self.deploy_of(&key) {
                self.at(1, Action::Status(d));
                self.at(1, Action::Endpoints(d));
            }
        }
        writes
    }

    fn evict(&mut self, store: &Store) -> Vec<ClusterWrite> {
        let movable: BTreeSet<Key> = self
            .sets
            .iter()
            .filter(|(_, r)| !self.deploys[r.deploy].frozen)
            .map(|(k, _)| k.clone())
            .collect();
        let Some(key) = self.pick_pod(|p| {
            p.phase == Phase::Running && p.rs.as_ref().is_some_and(|r| movable.contains(r))
        }) else {
            return Vec::new();
        };
        let pod = self.pods.get_mut(&key).expect("picked");
        pod.phase = Phase::Failed;
        pod.since = Self::now();
        let rs = pod.rs.clone();
        let writes = self.write_pod(store, &key, "evicted");
        if !writes.is_empty() {
            if let Some(rs) = rs {
                self.at(0, Action::Reconcile(rs));
            }
            if let Some(d) = self.deploy_of(&key) {
                self.at(1, Action::Status(d));
                self.at(1, Action::Endpoints(d));
            }
            let delay = self.range(20, 60);
            self.at(delay, Action::Collect(key));
        }
        writes
    }

    fn heartbeat(&mut self, store: &Store) -> Vec<ClusterWrite> {
        if self.nodes.is_empty() {
            return Vec::new();
        }
        let i = self.rng.below(self.nodes.len() as u64) as usize;
        let name = self.nodes[i].name.clone();
        let Some(node) = store.get(&resource("nodes"), None, &name) else {
            return Vec::new();
        };
        let created = node["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        // The clock's second, or the second after the last heartbeat when the clock has not
        // moved on: a heartbeat always writes, so the same seed makes the same writes however
        // fast the steps run.
        let last = node["status"]["conditions"][0]["lastHeartbeatTime"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map_or(0, jiff::Timestamp::as_second);
        let now = jiff::Timestamp::now().as_second().max(last + 1);
        let beat = crate::store::rfc3339(u64::try_from(now).unwrap_or(0));
        let patch = json!({"status": {"conditions": node_conditions(&created, &beat)}});
        let key = (String::new(), name);
        match patched(store, "nodes", &key, patch, Some(KUBELET_STATUS)) {
            Ok(true) => vec![write(WriteKind::Updated, "nodes", &key, "heartbeat")],
            _ => Vec::new(),
        }
    }

    fn scale(&mut self, store: &Store) -> Vec<ClusterWrite> {
        let Some(d) = self.pick_deploy() else {
            return Vec::new();
        };
        let (base, current) = (self.deploys[d].base, self.deploys[d].replicas);
        let low = base.saturating_sub(1).max(1);
        let high = base + 2;
        let mut to = self.range(u64::from(low), u64::from(high)) as u32;
        if to == current {
            to = if current > low {
                current - 1
            } else {
                current + 1
            };
        }
        self.deploys[d].replicas = to;
        self.deploys[d].generation += 1;
        let key = self.deploys[d].key.clone();
        let rs = self.deploys[d].current.clone();
        let mut writes = Vec::new();
        // `kubectl scale`, through the scale subresource.
        let patch = json!({"spec": {"replicas": to}});
        if patched(store, "deployments", &key, patch, Some(KUBECTL_SCALE)) == Ok(true) {
            writes.push(write(WriteKind::Updated, "deployments", &key, "scaled"));
        }
        writes.extend(self.set_rs_replicas(store, &rs, to, "scaled"));
        self.at(0, Action::Reconcile(rs));
        writes
    }

    fn set_rs_replicas(
        &mut self,
        store: &Store,
        rs: &Key,
        to: u32,
        reason: &'static str,
    ) -> Vec<ClusterWrite> {
        let Some(set) = self.sets.get_mut(rs) else {
            return Vec::new();
        };
        set.replicas = to;
        set.generation += 1;
        let desired = self.deploys[set.deploy].replicas;
        let patch = json!({
            "metadata": {"annotations": {"deployment.kubernetes.io/desired-replicas": desired.to_string()}},
            "spec": {"replicas": to},
        });
        match patched(store, "replicasets", rs, patch, Some(CONTROLLER)) {
            Ok(true) => vec![write(WriteKind::Updated, "replicasets", rs, reason)],
            _ => Vec::new(),
        }
    }

    /// Pods of a replica set that count towards its replicas.
    fn active(&self, rs: &Key) -> Vec<Key> {
        self.sets.get(rs).map_or_else(Vec::new, |s| {
            s.pods
                .iter()
                .filter(|k| {
                    self.pods
                        .get(*k)
                        .is_some_and(|p| !matches!(p.phase, Phase::Failed | Phase::Terminating))
                })
                .cloned()
                .collect()
        })
    }

    /// The replica set controller: one pod created or one deleted towards the spec.
    fn reconcile(&mut self, store: &Store, rs: &Key) -> Vec<ClusterWrite> {
        let Some(set) = self.sets.get(rs) else {
            return Vec::new();
        };
        let wanted = set.replicas as usize;
        let active = self.active(rs);
        let d = set.deploy;
        let writes = if active.len() < wanted {
            self.create_pod(store, rs)
        } else if active.len() > wanted {
            // Not-ready pods go first, then the newest.
            let victim = active
                .iter()
                .max_by_key(|k| {
                    let p = &self.pods[*k];
                    (p.phase != Phase::Running, p.born, (*k).clone())
                })
                .cloned()
                .expect("not empty");
            self.at(1, Action::Endpoints(d));
            self.terminate(store, &victim)
        } else {
            return Vec::new();
        };
        if active.len().abs_diff(wanted) > 1 {
            self.at(1, Action::Reconcile(rs.clone()));
        }
        self.at(2, Action::Status(d));
        writes
    }

    fn create_pod(&mut self, store: &Store, rs: &Key) -> Vec<ClusterWrite> {
        let set = &self.sets[rs];
        let d = &self.deploys[set.deploy];
        let mut labels = d.selector.clone();
        labels["pod-template-hash"] = json!(set.hash);
        let owner = Owner {
            api_version: "apps/v1",
            kind: "ReplicaSet",
            name: rs.1.clone(),
            uid: set.uid.clone(),
        };
        let stuck = d.stuck;
        let pod = PodM {
            owner,
            rs: Some(rs.clone()),
            labels,
            container: set.container.clone(),
            system: d.frozen && !d.stuck,
            node: None,
            ip: None,
            phase: if stuck {
                Phase::Unschedulable
            } else {
                Phase::Unscheduled
            },
            restarts: 0,
            born: self.clock,
            uid: String::new(),
            scheduled_at: String::new(),
            started_at: String::new(),
            since: Self::now(),
            last_exit: None,
            token: suffix(&mut self.rng),
        };
        let name = self.new_pod_name(rs);
        let key = (rs.0.clone(), name);
        let object = self.pod_object(&key, &pod, &Self::now());
        match store.create(&resource("pods"), object) {
            Ok(created) => {
                let uid = created["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                self.pods.insert(key.clone(), PodM { uid, ..pod });
                self.sets
                    .get_mut(rs)
                    .expect("present")
                    .pods
                    .insert(key.clone());
                if !stuck {
                    self.at(1, Action::Schedule(key.clone()));
                }
                vec![write(WriteKind::Created, "pods", &key, "created")]
            }
            Err(_) => Vec::new(),
        }
    }

    /// A graceful delete: the pod turns Terminating, and goes when its grace period ends.
    fn terminate(&mut self, store: &Store, key: &Key) -> Vec<ClusterWrite> {
        match store.delete_with(
            &resource("pods"),
            Some(&key.0),
            &key.1,
            &DeleteOptions::default(),
        ) {
            Ok((_, Deletion::Pending)) => {
                self.pods.get_mut(key).expect("known").phase = Phase::Terminating;
                let delay = self.range(6, 16);
                self.at(delay, Action::Gone(key.clone()));
                vec![write(WriteKind::Updated, "pods", key, "terminating")]
            }
            Ok((_, Deletion::Gone)) => {
                // Never scheduled: nothing to stop, so it goes at once.
                self.forget_pod(key);
                vec![write(
                    WriteKind::Deleted,
                    "pods",
                    key,
                    "deleted before it was scheduled",
                )]
            }
            Err(_) => {
                self.forget_pod(key);
                Vec::new()
            }
        }
    }

    fn remove_pod(
        &mut self,
        store: &Store,
        key: &Key,
        from: Phase,
        reason: &'static str,
    ) -> Vec<ClusterWrite> {
        if self.pods.get(key).is_none_or(|p| p.phase != from) {
            return Vec::new();
        }
        let force = DeleteOptions {
            grace_period_seconds: Some(0),
            ..DeleteOptions::default()
        };
        let d = self.deploy_of(key);
        let gone = store
            .delete_with(&resource("pods"), Some(&key.0), &key.1, &force)
            .is_ok();
        self.forget_pod(key);
        if let Some(d) = d {
            self.at(1, Action::Status(d));
            self.at(1, Action::Endpoints(d));
        }
        if gone {
            vec![write(WriteKind::Deleted, "pods", key, reason)]
        } else {
            Vec::new()
        }
    }

    /// Drops a pod from the model; its replica set makes up for it if it was active.
    fn forget_pod(&mut self, key: &Key) {
        let Some(pod) = self.pods.remove(key) else {
            return;
        };
        if let Some(n) = pod.node {
            self.nodes[n].pods = self.nodes[n].pods.saturating_sub(1);
        }
        if let Some(rs) = &pod.rs {
            if let Some(set) = self.sets.get_mut(rs) {
                set.pods.remove(key);
                let d = set.deploy;
                self.at(1, Action::Endpoints(d));
            }
            if !matches!(pod.phase, Phase::Terminating | Phase::Failed) {
                self.at(1, Action::Reconcile(rs.clone()));
            }
        }
    }

    pub(super) fn start_rollout(&mut self, store: &Store, d: usize) -> Vec<ClusterWrite> {
        let deploy = &mut self.deploys[d];
        let (a, b, c) = deploy.version;
        deploy.version = if self.rng.below(5) == 0 {
            (a, b + 1, 0)
        } else {
            (a, b, c + 1)
        };
        deploy.revision += 1;
        deploy.generation += 1;
        deploy.rolling = true;
        let (a, b, c) = deploy.version;
        let container = Container {
            image: format!("{}:{a}.{b}.{c}", deploy.container.image),
            ..deploy.container.clone()
        };
        let revision = deploy.revision;
        let key = deploy.key.clone();
        let old = std::mem::take(&mut deploy.current);
        let rs = self.create_rs(store, d, revision, container.clone(), 0, None);
        let deploy = &mut self.deploys[d];
        deploy.history.push(old);
        deploy.current = rs.clone();
        let mut writes = vec![write(
            WriteKind::Created,
            "replicasets",
            &rs,
            "rollout started",
        )];
        // `kubectl set image`; the controller writes the new revision with the status.
        let patch = json!({
            "spec": {"template": {"spec": {"containers": [container.json()]}}},
        });
        if patched(store, "deployments", &key, patch, Some(KUBECTL_SET)) == Ok(true) {
            writes.push(write(WriteKind::Updated, "deployments", &key, "new image"));
        }
        self.at(1, Action::Rollout(d));
        self.at(1, Action::Status(d));
        writes
    }

    /// One step of a rolling update with 25% surge and 25% unavailable, as the deployment
    /// controller makes it: scale the new replica set up while the total stays within the surge,
    /// scale an old one down while enough pods stay ready.
    fn rollout_step(&mut self, store: &Store, d: usize) -> Vec<ClusterWrite> {
        let deploy = &self.deploys[d];
        let desired = deploy.replicas;
        let surge = desired.div_ceil(4).max(1);
        let unavailable = desired / 4;
        let new = deploy.current.clone();
        let new_spec = self.sets.get(&new).map_or(0, |s| s.replicas);
        let olds: Vec<Key> = deploy
            .history
            .iter()
            .filter(|k| self.sets.get(*k).is_some_and(|s| s.replicas > 0))
            .cloned()
            .collect();
        let old_spec: u32 = olds.iter().map(|k| self.sets[k].replicas).sum();
        let mut sets = olds.clone();
        sets.push(new.clone());
        let ready = sets
            .iter()
            .flat_map(|k| self.active(k))
            .filter(|k| self.pods[k].phase == Phase::Running)
            .count() as u32;
        if new_spec < desired && new_spec + old_spec < desired + surge {
            let writes = self.set_rs_replicas(store, &new, new_spec + 1, "rollout scaled up");
            self.at(0, Action::Reconcile(new));
            self.at(2, Action::Rollout(d));
            return writes;
        }
        if let Some(old) = olds.first()
            && ready > desired - unavailable
        {
            let to = self.sets[old].replicas - 1;
            let writes = self.set_rs_replicas(store, old, to, "rollout scaled down");
            self.at(0, Action::Reconcile(old.clone()));
            self.at(2, Action::Rollout(d));
            return writes;
        }
        let new_ready = self
            .active(&new)
            .iter()
            .filter(|k| self.pods[*k].phase == Phase::Running)
            .count() as u32;
        if olds.is_empty() && new_ready >= desired {
            self.deploys[d].rolling = false;
            self.at(1, Action::Prune(d));
            return self.write_status(store, d, "rollout complete");
        }
        // Waiting for pods to become ready.
        self.at(3, Action::Rollout(d));
        Vec::new()
    }

    /// Keeps two old replica sets per deployment, as a short `revisionHistoryLimit` would.
    fn prune(&mut self, store: &Store, d: usize) -> Vec<ClusterWrite> {
        let history = &self.deploys[d].history;
        if history.len() <= 2 {
            return Vec::new();
        }
        let oldest = history[0].clone();
        if self
            .sets
            .get(&oldest)
            .is_some_and(|s| s.replicas > 0 || !s.pods.is_empty())
        {
            self.at(5, Action::Prune(d));
            return Vec::new();
        }
        self.deploys[d].history.remove(0);
        self.sets.remove(&oldest);
        if self.deploys[d].history.len() > 2 {
            self.at(1, Action::Prune(d));
        }
        match store.delete(&resource("replicasets"), Some(&oldest.0), &oldest.1) {
            Ok(_) => vec![write(
                WriteKind::Deleted,
                "replicasets",
                &oldest,
                "old revision pruned",
            )],
            Err(_) => Vec::new(),
        }
    }

    /// Writes the status of a deployment's replica sets and of the deployment, where it changed.
    pub(super) fn write_status(
        &mut self,
        store: &Store,
        d: usize,
        reason: &'static str,
    ) -> Vec<ClusterWrite> {
        let mut writes = Vec::new();
        let deploy = &self.deploys[d];
        let mut keys = deploy.history.clone();
        keys.push(deploy.current.clone());
        let (mut total, mut ready_total, mut updated) = (0, 0, 0);
        for key in &keys {
            let active = self.active(key);
            let replicas = active.len() as u32;
            let ready = active
                .iter()
                .filter(|k| self.pods[*k].phase == Phase::Running)
                .count() as u32;
            total += replicas;
            ready_total += ready;
            if *key == self.deploys[d].current {
                updated = replicas;
            }
            let Some(set) = self.sets.get_mut(key) else {
                continue;
            };
            let generation = set.generation;
            if set.written == Some((replicas, ready)) {
                continue;
            }
            set.written = Some((replicas, ready));
            let patch = json!({"status": {
                "replicas": replicas,
                "fullyLabeledReplicas": replicas,
                "readyReplicas": ready,
                "availableReplicas": ready,
                "observedGeneration": generation,
            }});
            if patched(store, "replicasets", key, patch, Some(CONTROLLER_STATUS)) == Ok(true) {
                writes.push(write(WriteKind::Updated, "replicasets", key, reason));
            }
        }
        let deploy = &mut self.deploys[d];
        let now_written = (total, updated, ready_total, deploy.rolling);
        if deploy.written != Some(now_written) {
            deploy.written = Some(now_written);
            let now = Self::now();
            let min_available = deploy.replicas - deploy.replicas / 4;
            let available = if ready_total >= min_available {
                condition_why(
                    "Available",
                    true,
                    &now,
                    "MinimumReplicasAvailable",
                    "Deployment has minimum availability.",
                )
            } else {
                condition_why(
                    "Available",
                    false,
                    &now,
                    "MinimumReplicasUnavailable",
                    "Deployment does not have minimum availability.",
                )
            };
            let rs = &deploy.current.1;
            let progressing = if deploy.stuck {
                condition_why(
                    "Progressing",
                    false,
                    &now,
                    "ProgressDeadlineExceeded",
                    &format!("ReplicaSet \"{rs}\" has timed out progressing."),
                )
            } else if deploy.rolling {
                condition_why(
                    "Progressing",
                    true,
                    &now,
                    "ReplicaSetUpdated",
                    &format!("ReplicaSet \"{rs}\" is progressing."),
                )
            } else {
                condition_why(
                    "Progressing",
                    true,
                    &now,
                    "NewReplicaSetAvailable",
                    &format!("ReplicaSet \"{rs}\" has successfully progressed."),
                )
            };
            let (mut a, mut p) = (available, progressing);
            for c in [&mut a, &mut p] {
                let o = c.as_object_mut().expect("an object");
                o.remove("lastProbeTime");
                o.insert("lastUpdateTime".into(), json!(now));
            }
            let mut status = json!({
                "observedGeneration": deploy.generation,
                "replicas": total,
                "updatedReplicas": updated,
                "readyReplicas": ready_total,
                "availableReplicas": ready_total,
                "conditions": [a, p],
            });
            if deploy.replicas > ready_total {
                status["unavailableReplicas"] = json!(deploy.replicas - ready_total);
            } else {
                status["unavailableReplicas"] = Value::Null;
            }
            let key = deploy.key.clone();
            // The controller writes the revision through `/status` too (`SetDeploymentRevision`
            // and `UpdateStatus`).
            let patch = json!({
                "metadata": {"annotations": {"deployment.kubernetes.io/revision": deploy.revision.to_string()}},
                "status": status,
            });
            if patched(store, "deployments", &key, patch, Some(CONTROLLER_STATUS)) == Ok(true) {
                writes.push(write(WriteKind::Updated, "deployments", &key, reason));
            }
        }
        writes
    }

    /// The endpoints of a deployment's service, as the endpointslice controller lists them: the
    /// pods with an IP that are running, crash-looping (not ready) or terminating (serving,
    /// not ready), by name; at most 100 (`--max-endpoints-per-slice`; no service here has more
    /// pods).
    pub(super) fn endpoints(&self, d: usize) -> Value {
        let deploy = &self.deploys[d];
        let pods: BTreeSet<&Key> = deploy
            .history
            .iter()
            .chain([&deploy.current])
            .filter_map(|k| self.sets.get(k))
            .flat_map(|s| &s.pods)
            .collect();
        let endpoints: Vec<Value> = pods
            .into_iter()
            .filter_map(|key| {
                let pod = self.pods.get(key)?;
                let (ready, serving, terminating) = match pod.phase {
                    Phase::Running => (true, true, false),
                    Phase::CrashLoop => (false, false, false),
                    Phase::Terminating => (false, true, true),
                    _ => return None,
                };
                let node = &self.nodes[pod.node?];
                Some(json!({
                    "addresses": [pod.ip.as_ref()?],
                    "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
                    "nodeName": node.name,
                    "targetRef": {"kind": "Pod", "name": key.1, "namespace": key.0, "uid": pod.uid},
                    "zone": zone(node.index),
                }))
            })
            .take(100)
            .collect();
        json!(endpoints)
    }

    /// The endpointslice controller: the slice of a deployment's service follows its pods.
    fn sync_endpoints(&mut self, store: &Store, d: usize) -> Vec<ClusterWrite> {
        let endpoints = self.endpoints(d);
        let Some(slice) = &self.deploys[d].slice else {
            return Vec::new();
        };
        if slice.endpoints == endpoints {
            return Vec::new();
        }
        let key = (self.deploys[d].key.0.clone(), slice.name.clone());
        let patch = json!({
            "metadata": {"annotations": {"endpoints.kubernetes.io/last-change-trigger-time": Self::now()}},
            "endpoints": endpoints,
        });
        let written = patched(store, "endpointslices", &key, patch, Some(CONTROLLER)) == Ok(true);
        if let Some(slice) = &mut self.deploys[d].slice {
            slice.endpoints = endpoints;
        }
        if written {
            vec![write(
                WriteKind::Updated,
                "endpointslices",
                &key,
                "endpoints changed",
            )]
        } else {
            Vec::new()
        }
    }

    // ----- what seeding shares with the controllers -----

    /// Creates a replica set of deployment `d` at `revision`, with `replicas` wanted.
    pub(super) fn create_rs(
        &mut self,
        store: &Store,
        d: usize,
        revision: u32,
        container: Container,
        replicas: u32,
        age: Option<i64>,
    ) -> Key {
        let deploy = &self.deploys[d];
        let (ns, dname) = deploy.key.clone();
        let hash = template_hash(&format!("{ns}/{dname}/{}/{revision}", container.image));
        let name = format!("{dname}-{hash}");
        let mut labels = deploy.selector.clone();
        labels["pod-template-hash"] = json!(hash);
        let max = replicas + replicas.div_ceil(4).max(1);
        let created = age.map_or_else(Self::now, |age| self.ago(age));
        let mut h = History::new("apps/v1");
        h.write(
            CONTROLLER,
            &created,
            json!({
                "metadata": {
                    "labels": labels,
                    "annotations": {
                        "deployment.kubernetes.io/desired-replicas": deploy.replicas.to_string(),
                        "deployment.kubernetes.io/max-replicas": max.to_string(),
                        "deployment.kubernetes.io/revision": revision.to_string(),
                    },
                    "ownerReferences": Owner { api_version: "apps/v1", kind: "Deployment", name: dname.clone(), uid: deploy.uid.clone() }.json(),
                },
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels}, "spec": pod_template_spec(&container)},
                },
            }),
        );
        h.untracked(json!({
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": created},
            "status": {"replicas": 0, "observedGeneration": 1},
        }));
        let uid = created_uid(store.create(&resource("replicasets"), h.finish()));
        let key = (ns, name);
        self.sets.insert(
            key.clone(),
            RsM {
                uid,
                hash,
                deploy: d,
                replicas,
                container,
                pods: BTreeSet::new(),
                generation: 1,
                written: None,
            },
        );
        key
    }

    /// The worker with the fewest pods (any node for system pods).
    pub(super) fn pick_node(&mut self, system: bool) -> usize {
        let best = self
            .nodes
            .iter()
            .filter(|n| system || !n.control_plane || self.nodes.len() == 1)
            .min_by_key(|n| (n.pods, n.index))
            .map_or(0, |n| n.index);
        self.nodes[best].pods += 1;
        best
    }

    pub(super) fn pod_ip(&mut self, node: usize) -> String {
        let n = &mut self.nodes[node];
        n.next_ip = n.next_ip % 253 + 1;
        format!("10.244.{}.{}", n.index, n.next_ip + 1)
    }
}

/// The topology zone of node `index` (its `topology.kubernetes.io/zone` label).
pub(super) fn zone(index: usize) -> String {
    format!("local-1{}", ["a", "b", "c"][index % 3])
}

/// Applies a merge patch as `by` (`None`: a write no manager is recorded for, as a binding),
/// whose entry in `managedFields` takes what the patch changed; `Ok(false)` when it changed
/// nothing (and so wrote nothing).
fn patched(
    store: &Store,
    plural: &str,
    key: &Key,
    patch: Value,
    by: Option<Manager<'static>>,
) -> Result<bool, kinformer_core::Status> {
    let before = store.resource_version();
    let ns = (!key.0.is_empty()).then_some(key.0.as_str());
    let check = |old: &Value, new: &mut Value| -> Result<(), kinformer_core::Status> {
        let managed = by.and_then(|by| {
            let now = Cluster::now();
            record(
                &old["metadata"]["managedFields"],
                by,
                api_version(plural),
                &now,
                old,
                new,
            )
        });
        if let Some(managed) = managed {
            new["metadata"]["managedFields"] = managed;
        }
        Ok(())
    };
    let after = store.write_patch(
        &resource(plural),
        ns,
        &key.1,
        patch,
        false,
        Write::Storage,
        &check,
        false,
    )?;
    let rv = after["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse::<u64>().ok());
    Ok(rv.is_some_and(|rv| rv > before))
}

fn write(kind: WriteKind, resource: &'static str, key: &Key, reason: &'static str) -> ClusterWrite {
    ClusterWrite {
        kind,
        resource,
        namespace: key.0.clone(),
        name: key.1.clone(),
        reason,
    }
}
