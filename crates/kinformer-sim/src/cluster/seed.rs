//! Seeding: the nodes, namespaces, control-plane and add-on pods, application deployments with
//! their replica sets and pods, and the services and EndpointSlices a new [`Cluster`] writes,
//! back-dated so that it looks lived in, each object with the `managedFields` of the writes
//! that made it.

use serde_json::{Value, json};

use crate::store::Store;
use crate::workload::Rng;

use super::catalogue::{CATALOGUE, CLUSTER_NAME, CONTROL_PLANE, KUBELET_VERSION, NODE_IMAGES};
use super::controllers::zone;
use super::model::{Cluster, Container, DeployM, Key, NodeM, Owner, Phase, PodM, SliceM};
use super::names::{fnv32, hex64, suffix, template_hash};
use super::objects::{created_uid, deployment_spec, node_conditions, pod_template_spec, resource};
use crate::fields::{
    APISERVER, CLIENT_SIDE_APPLY, CLOUD_STATUS, CONTROLLER, CONTROLLER_STATUS, History, KUBEADM,
    KUBECTL_CREATE, KUBECTL_SET, KUBELET, KUBELET_STATUS, Manager,
};

/// What `kubectl apply` keeps of the manifest it applied, in the object's
/// `kubectl.kubernetes.io/last-applied-configuration` annotation.
fn last_applied(manifest: &Value) -> String {
    format!("{manifest}\n")
}

impl Cluster {
    /// Writes the whole cluster for `config.pods` pods.
    pub(super) fn seed_all(&mut self, store: &Store) {
        let budget = self.config.pods;
        // Room for the system pods, and then some, or applications only.
        let with_system = budget >= 16;
        let workers = if with_system {
            (budget / 40).clamp(2, 500)
        } else {
            1
        };
        let system_pods = if with_system {
            4 + (workers + 1) + 2
        } else {
            0
        };
        let mut apps = budget - system_pods;
        let stuck = apps >= 20;
        if stuck {
            apps -= 1;
        }

        let cluster_age = 86_400 * (30 + self.rng.below(60) as i64);
        for i in 0..=workers {
            self.seed_node(store, i, cluster_age);
        }
        let mut namespaces: Vec<String> =
            ["default", "kube-system", "kube-public", "kube-node-lease"]
                .map(str::to_owned)
                .to_vec();

        // Spread the application pods: one each, then by weight.
        let count = if apps <= CATALOGUE.len() {
            apps
        } else {
            CATALOGUE.len().max(apps.div_ceil(12))
        };
        let mut replicas = vec![1u32; count];
        let mut left = apps - count;
        while left > 0 {
            for (i, r) in replicas.iter_mut().enumerate() {
                let add = (CATALOGUE[i % CATALOGUE.len()].2 as usize).min(left);
                *r += add as u32;
                left -= add;
                if left == 0 {
                    break;
                }
            }
        }

        let app_ns = |i: usize| {
            let ns = CATALOGUE[i % CATALOGUE.len()].0;
            match i / CATALOGUE.len() {
                0 => ns.to_owned(),
                // More of the same: the other environments, then numbered copies.
                1 => format!("{ns}-staging"),
                2 => format!("{ns}-dev"),
                3 => format!("{ns}-qa"),
                k => format!("{ns}-{k}"),
            }
        };
        for i in 0..count {
            if !namespaces.contains(&app_ns(i)) {
                namespaces.push(app_ns(i));
            }
        }
        if stuck {
            namespaces.push("analytics".to_owned());
        }
        for (i, ns) in namespaces.iter().enumerate() {
            // The API server makes the system namespaces; someone ran `kubectl create ns`.
            let (age, by) = if i < 4 {
                (cluster_age, APISERVER)
            } else {
                (cluster_age - 3600, KUBECTL_CREATE)
            };
            let created = self.ago(age);
            let mut h = History::new("v1");
            h.write(
                by,
                &created,
                json!({"metadata": {"labels": {"kubernetes.io/metadata.name": ns}}}),
            )
            .untracked(json!({
                "metadata": {"name": ns, "creationTimestamp": created},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            }));
            let _ = store.create(&resource("namespaces"), h.finish());
        }

        if with_system {
            self.seed_system(store, cluster_age);
        }
        for (i, &r) in replicas.iter().enumerate() {
            let (_, name, _, image, version, port, cpu, memory) = CATALOGUE[i % CATALOGUE.len()];
            let ns = app_ns(i);
            let container = Container {
                name: name.to_owned(),
                image: image.to_owned(),
                port,
                cpu,
                memory,
            };
            let age = 86_400 * (2 + self.rng.below(25) as i64);
            self.seed_deployment(store, &ns, name, container, version, r, age, false);
        }
        if stuck {
            let container = Container {
                name: "report-builder".to_owned(),
                image: "registry.example.com/analytics/report-builder".to_owned(),
                port: 8080,
                cpu: "2",
                memory: "96Gi",
            };
            self.seed_deployment(
                store,
                "analytics",
                "report-builder",
                container,
                (0, 9, 1),
                1,
                3600,
                true,
            );
        }
        self.seed_services(store, cluster_age);
    }

    fn seed_node(&mut self, store: &Store, index: usize, cluster_age: i64) {
        let control_plane = index == 0;
        let name = match index {
            0 => format!("{CLUSTER_NAME}-control-plane"),
            1 => format!("{CLUSTER_NAME}-worker"),
            n => format!("{CLUSTER_NAME}-worker{n}"),
        };
        let ip = format!("172.18.{}.{}", index / 250, index % 250 + 2);
        let (cpu, memory) = if control_plane || self.rng.below(3) > 0 {
            ("8", "32871692Ki")
        } else {
            ("16", "65843396Ki")
        };
        let labels = json!({
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "topology.kubernetes.io/region": "local-1",
            "topology.kubernetes.io/zone": zone(index),
        });
        let created = self.ago(cluster_age - index as i64 * 20);
        let joined = self.ago(cluster_age - index as i64 * 20 - 2);
        let beat = self.rng.below(40) as i64;
        let heartbeat = self.ago(beat);
        let bits = |r: &mut Rng| format!("{:016x}{:016x}", r.next(), r.next());
        let images: Vec<Value> = NODE_IMAGES
            .iter()
            .map(|(image, size)| {
                let repo = image.rsplit_once(':').map_or(*image, |(r, _)| r);
                let digest = hex64(u64::from(fnv32(image)));
                json!({"names": [format!("{repo}@sha256:{digest}"), image], "sizeBytes": size})
            })
            .collect();
        // The kubelet registers the node, kubeadm labels and taints it, the node IPAM and TTL
        // controllers give it a pod CIDR and a TTL, then the kubelet reports its status.
        let mut h = History::new("v1");
        h.write(
            KUBELET,
            &created,
            json!({
                "metadata": {"labels": labels, "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
                "spec": {"providerID": format!("kind://docker/{CLUSTER_NAME}/{name}")},
            }),
        );
        h.untracked(json!({"metadata": {"name": name, "creationTimestamp": created}}));
        let mut kubeadm = json!({"metadata": {"annotations": {"kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock"}}});
        if control_plane {
            kubeadm["metadata"]["labels"] = json!({
                "node-role.kubernetes.io/control-plane": "",
                "node.kubernetes.io/exclude-from-external-load-balancers": "",
            });
            kubeadm["spec"] = json!({"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]});
        }
        h.write(KUBEADM, &joined, kubeadm);
        h.write(
            CONTROLLER,
            &joined,
            json!({
                "metadata": {"annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
                "spec": {"podCIDR": format!("10.244.{index}.0/24"), "podCIDRs": [format!("10.244.{index}.0/24")]},
            }),
        );
        let status = json!({
            "status": {
                "capacity": {"cpu": cpu, "ephemeral-storage": "203056560Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": memory, "pods": "110"},
                "allocatable": {"cpu": cpu, "ephemeral-storage": "203056560Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": memory, "pods": "110"},
                "conditions": node_conditions(&created, &heartbeat),
                "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": bits(&mut self.rng),
                    "systemUUID": crate::store::uuid_from_bits(self.rng.next(), self.rng.next()),
                    "bootID": crate::store::uuid_from_bits(self.rng.next(), self.rng.next()),
                    "kernelVersion": "6.8.0-60-generic",
                    "osImage": "Debian GNU/Linux 12 (bookworm)",
                    "containerRuntimeVersion": "containerd://2.1.3",
                    "kubeletVersion": KUBELET_VERSION,
                    "kubeProxyVersion": KUBELET_VERSION,
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
                "images": images,
                "features": {"supplementalGroupsPolicy": true},
                "runtimeHandlers": [
                    {"name": "runc", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
                    {"name": "", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
                ],
            },
        });
        h.write(KUBELET_STATUS, &heartbeat, status);
        let uid = created_uid(store.create(&resource("nodes"), h.finish()));
        self.nodes.push(NodeM {
            name,
            uid,
            ip,
            index,
            control_plane,
            pods: 0,
            next_ip: 1,
        });
    }

    fn seed_system(&mut self, store: &Store, cluster_age: i64) {
        let cp = &self.nodes[0];
        let (cp_name, cp_uid) = (cp.name.clone(), cp.uid.clone());
        for (component, image, cpu) in CONTROL_PLANE {
            let owner = Owner {
                api_version: "v1",
                kind: "Node",
                name: cp_name.clone(),
                uid: cp_uid.clone(),
            };
            // Requests as kubeadm's manifests have them (cpu, and memory for etcd).
            let container = Container {
                name: component.to_owned(),
                image: image.to_owned(),
                port: 0,
                cpu,
                memory: "",
            };
            let labels = json!({"component": component, "tier": "control-plane"});
            let name = format!("{component}-{cp_name}");
            self.seed_pod(
                store,
                "kube-system",
                &name,
                owner,
                None,
                labels,
                container,
                true,
                Some(0),
                cluster_age - 30,
            );
        }
        // kube-proxy: a daemon set with a pod on every node.
        let hash = template_hash("kube-system/kube-proxy/1");
        let proxy = Container {
            name: "kube-proxy".to_owned(),
            image: format!("registry.k8s.io/kube-proxy:{KUBELET_VERSION}"),
            port: 0,
            cpu: "0",
            memory: "0",
        };
        let n = self.nodes.len();
        let created = self.ago(cluster_age - 25);
        let mut h = History::new("apps/v1");
        h.write(
            KUBEADM,
            &created,
            json!({
                "metadata": {"labels": {"k8s-app": "kube-proxy"}},
                "spec": {
                    "selector": {"matchLabels": {"k8s-app": "kube-proxy"}},
                    "template": {"metadata": {"labels": {"k8s-app": "kube-proxy"}}, "spec": pod_template_spec(&proxy)},
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
                    "revisionHistoryLimit": 10,
                },
            }),
        )
        .untracked(json!({
            "metadata": {"name": "kube-proxy", "namespace": "kube-system", "creationTimestamp": created, "annotations": {"deprecated.daemonset.template.generation": "1"}},
        }))
        .write(
            CONTROLLER_STATUS,
            &self.ago(cluster_age - 25 - n as i64 * 20 - 10),
            json!({"status": {"currentNumberScheduled": n, "desiredNumberScheduled": n, "numberAvailable": n, "numberMisscheduled": 0, "numberReady": n, "observedGeneration": 1, "updatedNumberScheduled": n}}),
        );
        let ds_uid = created_uid(store.create(&resource("daemonsets"), h.finish()));
        for i in 0..n {
            let owner = Owner {
                api_version: "apps/v1",
                kind: "DaemonSet",
                name: "kube-proxy".to_owned(),
                uid: ds_uid.clone(),
            };
            let labels = json!({"k8s-app": "kube-proxy", "controller-revision-hash": hash, "pod-template-generation": "1"});
            let name = format!("kube-proxy-{}", suffix(&mut self.rng));
            self.seed_pod(
                store,
                "kube-system",
                &name,
                owner,
                None,
                labels,
                proxy.clone(),
                true,
                Some(i),
                cluster_age - 25 - i as i64 * 20,
            );
        }
        let coredns = Container {
            name: "coredns".to_owned(),
            image: "registry.k8s.io/coredns/coredns".to_owned(),
            port: 53,
            cpu: "100m",
            memory: "70Mi",
        };
        self.seed_deployment(
            store,
            "kube-system",
            "coredns",
            coredns,
            (1, 12, 1),
            2,
            cluster_age - 25,
            true,
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn seed_deployment(
        &mut self,
        store: &Store,
        ns: &str,
        name: &str,
        mut container: Container,
        version: (u32, u32, u32),
        replicas: u32,
        age: i64,
        frozen: bool,
    ) {
        let selector = if name == "coredns" {
            json!({"k8s-app": "kube-dns"})
        } else {
            json!({"app": name})
        };
        let repo = container.image.clone();
        let tag = |v: (u32, u32, u32)| format!("{repo}:{}.{}.{}", v.0, v.1, v.2);
        container.image = tag(version);
        let stuck = ns == "analytics";
        // Half the deployments were updated once since they were created.
        let revision = if frozen || self.rng.below(2) == 0 {
            1
        } else {
            2
        };
        let created = self.ago(age);
        let rs_age = if revision == 2 {
            86_400 * (self.rng.below(age as u64 / 86_400).max(1) as i64)
        } else {
            age - 1
        };
        let old_container = Container {
            image: tag((version.0, version.1, version.2.saturating_sub(1))),
            ..container.clone()
        };
        let mut deploy = DeployM {
            key: (ns.to_owned(), name.to_owned()),
            uid: String::new(),
            selector: selector.clone(),
            container: Container {
                image: repo.clone(),
                ..container.clone()
            },
            replicas,
            base: replicas,
            version,
            revision,
            current: (String::new(), String::new()),
            history: Vec::new(),
            rolling: false,
            frozen,
            stuck,
            age,
            generation: 1,
            written: None,
            slice: None,
        };
        // kubeadm's add-ons, or `kubectl apply` of the first revision, then `kubectl set image`
        // for the second; the controller writes the revision with the status, below.
        let first = if revision == 2 {
            &old_container
        } else {
            &container
        };
        let mut h = History::new("apps/v1");
        let mut metadata = json!({"labels": selector});
        let by = if ns == "kube-system" {
            KUBEADM
        } else {
            let user = |c: &Container| {
                let mut c = json!({"name": c.name, "image": c.image, "ports": [{"name": "http", "containerPort": c.port}], "resources": {"requests": {"cpu": c.cpu, "memory": c.memory}, "limits": {"memory": c.memory}}});
                if c["ports"][0]["containerPort"] == 0 {
                    c.as_object_mut().expect("an object").remove("ports");
                }
                c
            };
            let manifest = json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"annotations": {}, "labels": selector, "name": name, "namespace": ns},
                "spec": {"replicas": replicas, "selector": {"matchLabels": selector}, "template": {"metadata": {"labels": selector}, "spec": {"containers": [user(first)]}}},
            });
            metadata["annotations"] = json!({"kubectl.kubernetes.io/last-applied-configuration": last_applied(&manifest)});
            CLIENT_SIDE_APPLY
        };
        h.write(
            by,
            &created,
            json!({"metadata": metadata, "spec": deployment_spec(&selector, replicas, first)}),
        )
        .untracked(
            json!({"metadata": {"name": name, "namespace": ns, "creationTimestamp": created}}),
        );
        if revision == 2 {
            h.write(
                KUBECTL_SET,
                &self.ago(rs_age),
                json!({"spec": {"template": {"spec": {"containers": [container.json()]}}}}),
            );
        }
        deploy.uid = created_uid(store.create(&resource("deployments"), h.finish()));
        self.deploys.push(deploy);
        let d = self.deploys.len() - 1;
        if revision == 2 {
            let key = self.create_rs(store, d, 1, old_container, 0, Some(age - 60));
            self.deploys[d].history.push(key);
        }
        let key = self.create_rs(
            store,
            d,
            revision,
            container.clone(),
            replicas,
            Some(rs_age),
        );
        self.deploys[d].current = key.clone();
        let rs = &self.sets[&key];
        let owner = Owner {
            api_version: "apps/v1",
            kind: "ReplicaSet",
            name: key.1.clone(),
            uid: rs.uid.clone(),
        };
        let mut labels = selector.clone();
        labels["pod-template-hash"] = json!(rs.hash);
        for _ in 0..replicas {
            let name = self.new_pod_name(&key);
            let node = if stuck {
                None
            } else {
                Some(self.pick_node(false))
            };
            let pod_age = if self.rng.below(5) == 0 {
                self.range(600, rs_age.max(601) as u64) as i64
            } else {
                rs_age - 5
            };
            self.seed_pod(
                store,
                ns,
                &name,
                owner.clone(),
                Some(key.clone()),
                labels.clone(),
                container.clone(),
                frozen && !stuck,
                node,
                pod_age,
            );
            self.sets
                .get_mut(&key)
                .expect("created")
                .pods
                .insert((ns.to_owned(), name));
        }
        self.write_status(store, d, "seeded");
    }

    /// Writes a running pod (or a pending one with no node) as seeding finds it.
    #[allow(clippy::too_many_arguments)]
    fn seed_pod(
        &mut self,
        store: &Store,
        ns: &str,
        name: &str,
        owner: Owner,
        rs: Option<Key>,
        labels: Value,
        container: Container,
        system: bool,
        node: Option<usize>,
        age: i64,
    ) {
        let created = self.ago(age);
        let started = self.ago(age - 4);
        let owner_kind = owner.kind;
        let (phase, ip) = match node {
            Some(n) => {
                // pick_node counted replica-set pods; static and daemon pods are counted here.
                if rs.is_none() {
                    self.nodes[n].pods += 1;
                }
                // Static and daemon pods here use the host's network, as kube-proxy and the
                // control plane do.
                let ip = if rs.is_none() {
                    self.nodes[n].ip.clone()
                } else {
                    self.pod_ip(n)
                };
                (Phase::Running, Some(ip))
            }
            None => (Phase::Unschedulable, None),
        };
        let restarts = if node.is_some() && self.rng.below(7) == 0 {
            1 + self.rng.below(4) as u32
        } else {
            0
        };
        let exited = (age - 10).min(self.rng.below(86_400) as i64 + 60);
        let last_exit = (restarts > 0).then(|| self.ago(exited));
        let pod = PodM {
            owner,
            rs,
            labels,
            container,
            system,
            node,
            ip,
            phase,
            restarts,
            born: 0,
            uid: String::new(),
            scheduled_at: created.clone(),
            started_at: last_exit.clone().unwrap_or(started),
            since: created.clone(),
            last_exit,
            // A static pod's mirror has no service account.
            token: if owner_kind == "Node" {
                String::new()
            } else {
                suffix(&mut self.rng)
            },
        };
        let key = (ns.to_owned(), name.to_owned());
        let object = self.pod_object(&key, &pod, &created);
        let uid = created_uid(store.create(&resource("pods"), object));
        self.pods.insert(key, PodM { uid, ..pod });
    }

    /// The services: `kubernetes`, written by the API server, with its EndpointSlice; one per
    /// deployment, `kubectl apply`'d (`kube-dns` by kubeadm), with the EndpointSlice the
    /// endpointslice controller keeps for it.
    fn seed_services(&mut self, store: &Store, cluster_age: i64) {
        let at = self.ago(cluster_age);
        let mut h = History::new("v1");
        h.write(
            APISERVER,
            &at,
            json!({
                "metadata": {"labels": {"component": "apiserver", "provider": "kubernetes"}},
                "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}], "sessionAffinity": "None", "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster"},
            }),
        )
        .untracked(json!({
            "metadata": {"name": "kubernetes", "namespace": "default", "creationTimestamp": at},
            "spec": {"clusterIPs": ["10.96.0.1"], "ipFamilies": ["IPv4"]},
            "status": {"loadBalancer": {}},
        }));
        let _ = store.create(&resource("services"), h.finish());
        if let Some(cp) = self.nodes.first() {
            let mut h = History::new("discovery.k8s.io/v1");
            h.write(
                APISERVER,
                &at,
                json!({
                    "metadata": {"labels": {"kubernetes.io/service-name": "kubernetes"}},
                    "addressType": "IPv4",
                    "endpoints": [{"addresses": [cp.ip], "conditions": {"ready": true}}],
                    "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}],
                }),
            )
            .untracked(json!({"metadata": {"name": "kubernetes", "namespace": "default", "creationTimestamp": at}}));
            let _ = store.create(&resource("endpointslices"), h.finish());
        }
        for d in 0..self.deploys.len() {
            self.seed_service(store, d, cluster_age);
        }
    }

    fn seed_service(&mut self, store: &Store, d: usize, cluster_age: i64) {
        let deploy = &self.deploys[d];
        let (ns, name) = deploy.key.clone();
        let coredns = name == "coredns";
        let ip = if coredns {
            "10.96.0.10".to_owned()
        } else {
            format!("10.96.{}.{}", 1 + d / 200, 20 + d % 200)
        };
        let (ports, slice_ports) = if coredns {
            (
                json!([
                    {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
                    {"name": "metrics", "port": 9153, "protocol": "TCP", "targetPort": 9153},
                ]),
                json!([
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
                    {"name": "dns", "port": 53, "protocol": "UDP"},
                    {"name": "metrics", "port": 9153, "protocol": "TCP"},
                ]),
            )
        } else {
            let port = if deploy.container.port == 8443 {
                443
            } else {
                80
            };
            (
                json!([{"name": "http", "port": port, "protocol": "TCP", "targetPort": deploy.container.port}]),
                json!([{"name": "http", "port": deploy.container.port, "protocol": "TCP"}]),
            )
        };
        let svc = if coredns { "kube-dns" } else { name.as_str() }.to_owned();
        // The storefront faces the internet; the rest is internal.
        let public = name == "storefront";
        let mut labels = deploy.selector.clone();
        let created = self.ago(if coredns {
            cluster_age - 25
        } else {
            deploy.age - 5
        });
        // What the writer sent, with the defaults the API server fills in when it decodes.
        let mut spec = json!({
            "type": if public { "LoadBalancer" } else { "ClusterIP" },
            "selector": deploy.selector, "ports": ports,
            "sessionAffinity": "None", "internalTrafficPolicy": "Cluster",
        });
        let mut metadata = json!({});
        let by: Manager<'static> = if coredns {
            labels["kubernetes.io/cluster-service"] = json!("true");
            labels["kubernetes.io/name"] = json!("CoreDNS");
            metadata["annotations"] =
                json!({"prometheus.io/port": "9153", "prometheus.io/scrape": "true"});
            spec["clusterIP"] = json!(ip);
            KUBEADM
        } else {
            let mut manifest = json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"annotations": {}, "labels": labels, "name": svc, "namespace": ns},
                "spec": {"ports": [{"name": "http", "port": ports[0]["port"], "targetPort": deploy.container.port}], "selector": deploy.selector},
            });
            if public {
                manifest["spec"]["type"] = json!("LoadBalancer");
            }
            metadata["annotations"] = json!({"kubectl.kubernetes.io/last-applied-configuration": last_applied(&manifest)});
            CLIENT_SIDE_APPLY
        };
        metadata["labels"] = labels.clone();
        if public {
            spec["externalTrafficPolicy"] = json!("Cluster");
            spec["allocateLoadBalancerNodePorts"] = json!(true);
        }
        let mut h = History::new("v1");
        h.write(by, &created, json!({"metadata": metadata, "spec": spec}));
        // Allocated by the API server: the cluster IP, its families and the node port.
        let mut allocated = json!({
            "metadata": {"name": svc, "namespace": ns, "creationTimestamp": created},
            "spec": {"clusterIP": ip, "clusterIPs": [ip], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"},
            "status": {"loadBalancer": {}},
        });
        if public {
            let mut ports = h.object()["spec"]["ports"].clone();
            ports[0]["nodePort"] = json!(30000 + (fnv32(&ns) % 2000) as u16);
            allocated["spec"]["ports"] = ports;
        }
        h.untracked(allocated);
        if public {
            let ingress = json!([{"ip": format!("172.18.255.{}", 200 + d % 50), "ipMode": "VIP"}]);
            h.write(
                CLOUD_STATUS,
                &self.ago(deploy.age - 40),
                json!({"status": {"loadBalancer": {"ingress": ingress}}}),
            );
        }
        let uid = created_uid(store.create(&resource("services"), h.finish()));

        // Its EndpointSlice, last written when its last pod became ready.
        let endpoints = self.endpoints(d);
        let changed = self.deploys[d]
            .history
            .iter()
            .chain([&self.deploys[d].current])
            .filter_map(|k| self.sets.get(k))
            .flat_map(|s| &s.pods)
            .filter_map(|k| self.pods.get(k))
            .filter(|p| p.phase == Phase::Running)
            .map(|p| p.started_at.clone())
            .max()
            .unwrap_or_else(|| created.clone())
            .max(created.clone());
        let slice = format!("{svc}-{}", suffix(&mut self.rng));
        let mut slice_labels = labels;
        slice_labels["endpointslice.kubernetes.io/managed-by"] =
            json!("endpointslice-controller.k8s.io");
        slice_labels["kubernetes.io/service-name"] = json!(svc);
        let owner = json!([{"apiVersion": "v1", "kind": "Service", "name": svc, "uid": uid, "controller": true, "blockOwnerDeletion": true}]);
        let mut h = History::new("discovery.k8s.io/v1");
        h.write(
            CONTROLLER,
            &changed,
            json!({
                "metadata": {
                    "generateName": format!("{svc}-"),
                    "labels": slice_labels,
                    "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": changed},
                    "ownerReferences": owner,
                },
                "addressType": "IPv4",
                "endpoints": endpoints,
                "ports": slice_ports,
            }),
        )
        .untracked(
            json!({"metadata": {"name": slice, "namespace": ns, "creationTimestamp": created}}),
        );
        let _ = store.create(&resource("endpointslices"), h.finish());
        self.deploys[d].slice = Some(SliceM {
            name: slice,
            endpoints,
        });
    }
}
