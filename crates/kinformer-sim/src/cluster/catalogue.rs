//! The fixed data the seeding draws from: the node names' prefix, the kubelet release, the
//! applications of the seeded deployments, the control-plane components and what the manifests
//! of the system pods hold.

use serde_json::{Value, json};

/// The kubelet and kube-proxy release the nodes report.
pub(super) const KUBELET_VERSION: &str = "v1.34.1";

/// The name prefix of the nodes (`kinformer-control-plane`, `kinformer-worker`,
/// `kinformer-worker2`, ...), shaped like a local development cluster's.
pub(super) const CLUSTER_NAME: &str = "kinformer";

/// An application a seeded deployment runs: namespace, name, weight in the pod budget, image,
/// version, port, cpu and memory requests.
pub(super) type App = (
    &'static str,
    &'static str,
    u32,
    &'static str,
    (u32, u32, u32),
    u16,
    &'static str,
    &'static str,
);

/// The applications of the seeded deployments.
pub(super) const CATALOGUE: [App; 11] = [
    (
        "default",
        "web",
        3,
        "nginx",
        (1, 27, 3),
        80,
        "100m",
        "128Mi",
    ),
    (
        "default",
        "api",
        2,
        "registry.example.com/platform/api",
        (3, 8, 2),
        8080,
        "250m",
        "256Mi",
    ),
    (
        "shop",
        "storefront",
        3,
        "registry.example.com/shop/storefront",
        (2, 14, 0),
        3000,
        "200m",
        "256Mi",
    ),
    (
        "shop",
        "cart",
        2,
        "registry.example.com/shop/cart",
        (1, 9, 4),
        8080,
        "100m",
        "128Mi",
    ),
    (
        "shop",
        "catalog",
        2,
        "registry.example.com/shop/catalog",
        (1, 22, 1),
        8080,
        "250m",
        "512Mi",
    ),
    (
        "shop",
        "checkout",
        2,
        "registry.example.com/shop/checkout",
        (4, 2, 7),
        8080,
        "200m",
        "256Mi",
    ),
    (
        "payments",
        "payments-api",
        2,
        "registry.example.com/payments/api",
        (2, 5, 3),
        8443,
        "500m",
        "512Mi",
    ),
    (
        "payments",
        "ledger",
        1,
        "registry.example.com/payments/ledger",
        (1, 3, 0),
        8080,
        "250m",
        "1Gi",
    ),
    (
        "monitoring",
        "prometheus",
        1,
        "quay.io/prometheus/prometheus",
        (3, 4, 1),
        9090,
        "500m",
        "2Gi",
    ),
    (
        "monitoring",
        "grafana",
        1,
        "docker.io/grafana/grafana",
        (11, 5, 2),
        3000,
        "100m",
        "256Mi",
    ),
    (
        "monitoring",
        "kube-state-metrics",
        1,
        "registry.k8s.io/kube-state-metrics/kube-state-metrics",
        (2, 15, 0),
        8080,
        "100m",
        "190Mi",
    ),
];

/// The control-plane components that run as static pods on the control-plane node.
pub(super) const CONTROL_PLANE: [(&str, &str, &str); 4] = [
    ("etcd", "registry.k8s.io/etcd:3.6.4-0", "100m"),
    (
        "kube-apiserver",
        "registry.k8s.io/kube-apiserver:v1.34.1",
        "250m",
    ),
    (
        "kube-controller-manager",
        "registry.k8s.io/kube-controller-manager:v1.34.1",
        "200m",
    ),
    (
        "kube-scheduler",
        "registry.k8s.io/kube-scheduler:v1.34.1",
        "100m",
    ),
];

/// A probe as kubeadm and the add-ons' manifests write them, with the API's defaults.
fn probe(
    path: &str,
    port: u16,
    host: Option<&str>,
    failure: u32,
    delay: u32,
    period: u32,
    timeout: u32,
) -> Value {
    let mut get = json!({"path": path, "port": port, "scheme": if port == 6443 || port == 10257 || port == 10259 { "HTTPS" } else { "HTTP" }});
    if let Some(host) = host {
        get["host"] = json!(host);
    }
    let mut p = json!({"failureThreshold": failure, "httpGet": get, "periodSeconds": period, "successThreshold": 1, "timeoutSeconds": timeout});
    if delay > 0 {
        p["initialDelaySeconds"] = json!(delay);
    }
    p
}

fn host_path(name: &str, path: &str, kind: &str) -> Value {
    json!({"name": name, "hostPath": {"path": path, "type": kind}})
}

fn mount(name: &str, path: &str, read_only: bool) -> Value {
    let mut m = json!({"name": name, "mountPath": path});
    if read_only {
        m["readOnly"] = json!(true);
    }
    m
}

/// What the manifests of the control plane's static pods (as kubeadm writes them), the
/// `kube-proxy` daemon set and the `coredns` deployment add to a container named `name` and to
/// its pod's spec: `(container, pod)`, both merge patches. `None` for application containers.
pub(super) fn system_spec(name: &str, node: &str, ip: &str) -> Option<(Value, Value)> {
    let pki = || {
        vec![
            host_path("ca-certs", "/etc/ssl/certs", "DirectoryOrCreate"),
            host_path(
                "etc-ca-certificates",
                "/etc/ca-certificates",
                "DirectoryOrCreate",
            ),
            host_path("k8s-certs", "/etc/kubernetes/pki", "DirectoryOrCreate"),
            host_path(
                "usr-local-share-ca-certificates",
                "/usr/local/share/ca-certificates",
                "DirectoryOrCreate",
            ),
            host_path(
                "usr-share-ca-certificates",
                "/usr/share/ca-certificates",
                "DirectoryOrCreate",
            ),
        ]
    };
    let pki_mounts = || {
        vec![
            mount("ca-certs", "/etc/ssl/certs", true),
            mount("etc-ca-certificates", "/etc/ca-certificates", true),
            mount("k8s-certs", "/etc/kubernetes/pki", true),
            mount(
                "usr-local-share-ca-certificates",
                "/usr/local/share/ca-certificates",
                true,
            ),
            mount(
                "usr-share-ca-certificates",
                "/usr/share/ca-certificates",
                true,
            ),
        ]
    };
    let static_pod = |volumes: Vec<Value>| {
        json!({
            "hostNetwork": true,
            "priorityClassName": "system-node-critical",
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "tolerations": [{"effect": "NoExecute", "operator": "Exists"}],
            "volumes": volumes,
        })
    };
    let spec = match name {
        "etcd" => (
            json!({
                "command": [
                    "etcd",
                    format!("--advertise-client-urls=https://{ip}:2379"),
                    "--cert-file=/etc/kubernetes/pki/etcd/server.crt",
                    "--client-cert-auth=true",
                    "--data-dir=/var/lib/etcd",
                    "--feature-gates=InitialCorruptCheck=true",
                    format!("--initial-advertise-peer-urls=https://{ip}:2380"),
                    format!("--initial-cluster={node}=https://{ip}:2380"),
                    "--key-file=/etc/kubernetes/pki/etcd/server.key",
                    format!("--listen-client-urls=https://127.0.0.1:2379,https://{ip}:2379"),
                    "--listen-metrics-urls=http://127.0.0.1:2381",
                    format!("--listen-peer-urls=https://{ip}:2380"),
                    format!("--name={node}"),
                    "--peer-cert-file=/etc/kubernetes/pki/etcd/peer.crt",
                    "--peer-client-cert-auth=true",
                    "--peer-key-file=/etc/kubernetes/pki/etcd/peer.key",
                    "--peer-trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt",
                    "--snapshot-count=10000",
                    "--trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt",
                    "--watch-progress-notify-interval=5s",
                ],
                "livenessProbe": probe("/livez", 2381, Some("127.0.0.1"), 8, 10, 10, 15),
                "readinessProbe": probe("/readyz", 2381, Some("127.0.0.1"), 3, 0, 1, 15),
                "startupProbe": probe("/readyz", 2381, Some("127.0.0.1"), 24, 10, 10, 15),
                "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}},
                "volumeMounts": [mount("etcd-data", "/var/lib/etcd", false), mount("etcd-certs", "/etc/kubernetes/pki/etcd", false)],
            }),
            static_pod(vec![
                host_path(
                    "etcd-certs",
                    "/etc/kubernetes/pki/etcd",
                    "DirectoryOrCreate",
                ),
                host_path("etcd-data", "/var/lib/etcd", "DirectoryOrCreate"),
            ]),
        ),
        "kube-apiserver" => (
            json!({
                "command": [
                    "kube-apiserver",
                    format!("--advertise-address={ip}"),
                    "--allow-privileged=true",
                    "--authorization-mode=Node,RBAC",
                    "--client-ca-file=/etc/kubernetes/pki/ca.crt",
                    "--enable-admission-plugins=NodeRestriction",
                    "--enable-bootstrap-token-auth=true",
                    "--etcd-cafile=/etc/kubernetes/pki/etcd/ca.crt",
                    "--etcd-certfile=/etc/kubernetes/pki/apiserver-etcd-client.crt",
                    "--etcd-keyfile=/etc/kubernetes/pki/apiserver-etcd-client.key",
                    "--etcd-servers=https://127.0.0.1:2379",
                    "--kubelet-client-certificate=/etc/kubernetes/pki/apiserver-kubelet-client.crt",
                    "--kubelet-client-key=/etc/kubernetes/pki/apiserver-kubelet-client.key",
                    "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
                    "--proxy-client-cert-file=/etc/kubernetes/pki/front-proxy-client.crt",
                    "--proxy-client-key-file=/etc/kubernetes/pki/front-proxy-client.key",
                    "--requestheader-allowed-names=front-proxy-client",
                    "--requestheader-client-ca-file=/etc/kubernetes/pki/front-proxy-ca.crt",
                    "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                    "--requestheader-group-headers=X-Remote-Group",
                    "--requestheader-username-headers=X-Remote-User",
                    "--runtime-config=",
                    "--secure-port=6443",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    "--service-account-key-file=/etc/kubernetes/pki/sa.pub",
                    "--service-account-signing-key-file=/etc/kubernetes/pki/sa.key",
                    "--service-cluster-ip-range=10.96.0.0/16",
                    "--tls-cert-file=/etc/kubernetes/pki/apiserver.crt",
                    "--tls-private-key-file=/etc/kubernetes/pki/apiserver.key",
                ],
                "livenessProbe": probe("/livez", 6443, Some(ip), 8, 10, 10, 15),
                "readinessProbe": probe("/readyz", 6443, Some(ip), 3, 0, 1, 15),
                "startupProbe": probe("/livez", 6443, Some(ip), 24, 10, 10, 15),
                "resources": {"requests": {"cpu": "250m"}},
                "volumeMounts": pki_mounts(),
            }),
            static_pod(pki()),
        ),
        "kube-controller-manager" => (
            json!({
                "command": [
                    "kube-controller-manager",
                    "--allocate-node-cidrs=true",
                    "--authentication-kubeconfig=/etc/kubernetes/controller-manager.conf",
                    "--authorization-kubeconfig=/etc/kubernetes/controller-manager.conf",
                    "--bind-address=127.0.0.1",
                    "--client-ca-file=/etc/kubernetes/pki/ca.crt",
                    format!("--cluster-cidr=10.244.0.0/16"),
                    format!("--cluster-name={}", CLUSTER_NAME),
                    "--cluster-signing-cert-file=/etc/kubernetes/pki/ca.crt",
                    "--cluster-signing-key-file=/etc/kubernetes/pki/ca.key",
                    "--controllers=*,bootstrapsigner,tokencleaner",
                    "--enable-hostpath-provisioner=true",
                    "--kubeconfig=/etc/kubernetes/controller-manager.conf",
                    "--leader-elect=true",
                    "--requestheader-client-ca-file=/etc/kubernetes/pki/front-proxy-ca.crt",
                    "--root-ca-file=/etc/kubernetes/pki/ca.crt",
                    "--service-account-private-key-file=/etc/kubernetes/pki/sa.key",
                    "--service-cluster-ip-range=10.96.0.0/16",
                    "--use-service-account-credentials=true",
                ],
                "livenessProbe": probe("/healthz", 10257, Some("127.0.0.1"), 8, 10, 10, 15),
                "startupProbe": probe("/healthz", 10257, Some("127.0.0.1"), 24, 10, 10, 15),
                "resources": {"requests": {"cpu": "200m"}},
                "volumeMounts": pki_mounts().into_iter().chain([
                    mount("flexvolume-dir", "/usr/libexec/kubernetes/kubelet-plugins/volume/exec", false),
                    mount("kubeconfig", "/etc/kubernetes/controller-manager.conf", true),
                ]).collect::<Vec<_>>(),
            }),
            static_pod(
                pki()
                    .into_iter()
                    .chain([
                        host_path(
                            "flexvolume-dir",
                            "/usr/libexec/kubernetes/kubelet-plugins/volume/exec",
                            "DirectoryOrCreate",
                        ),
                        host_path(
                            "kubeconfig",
                            "/etc/kubernetes/controller-manager.conf",
                            "FileOrCreate",
                        ),
                    ])
                    .collect(),
            ),
        ),
        "kube-scheduler" => (
            json!({
                "command": [
                    "kube-scheduler",
                    "--authentication-kubeconfig=/etc/kubernetes/scheduler.conf",
                    "--authorization-kubeconfig=/etc/kubernetes/scheduler.conf",
                    "--bind-address=127.0.0.1",
                    "--kubeconfig=/etc/kubernetes/scheduler.conf",
                    "--leader-elect=true",
                ],
                "livenessProbe": probe("/livez", 10259, Some("127.0.0.1"), 8, 10, 10, 15),
                "readinessProbe": probe("/readyz", 10259, Some("127.0.0.1"), 3, 0, 1, 15),
                "startupProbe": probe("/livez", 10259, Some("127.0.0.1"), 24, 10, 10, 15),
                "resources": {"requests": {"cpu": "100m"}},
                "volumeMounts": [mount("kubeconfig", "/etc/kubernetes/scheduler.conf", true)],
            }),
            static_pod(vec![host_path(
                "kubeconfig",
                "/etc/kubernetes/scheduler.conf",
                "FileOrCreate",
            )]),
        ),
        "kube-proxy" => (
            json!({
                "command": ["/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf", "--hostname-override=$(NODE_NAME)"],
                "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}],
                "securityContext": {"privileged": true},
                "volumeMounts": [
                    mount("kube-proxy", "/var/lib/kube-proxy", false),
                    mount("xtables-lock", "/run/xtables.lock", false),
                    mount("lib-modules", "/lib/modules", true),
                ],
            }),
            json!({
                "hostNetwork": true,
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "priorityClassName": "system-node-critical",
                "serviceAccount": "kube-proxy",
                "serviceAccountName": "kube-proxy",
                "tolerations": [{"operator": "Exists"}],
                "volumes": [
                    {"name": "kube-proxy", "configMap": {"name": "kube-proxy", "defaultMode": 420}},
                    host_path("xtables-lock", "/run/xtables.lock", "FileOrCreate"),
                    host_path("lib-modules", "/lib/modules", ""),
                ],
            }),
        ),
        "coredns" => (
            json!({
                "args": ["-conf", "/etc/coredns/Corefile"],
                "ports": [
                    {"containerPort": 53, "name": "dns", "protocol": "UDP"},
                    {"containerPort": 53, "name": "dns-tcp", "protocol": "TCP"},
                    {"containerPort": 9153, "name": "metrics", "protocol": "TCP"},
                ],
                "livenessProbe": probe("/health", 8080, None, 5, 60, 10, 5),
                "readinessProbe": probe("/ready", 8181, None, 3, 0, 10, 1),
                "resources": {"limits": {"memory": "170Mi"}},
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}, "readOnlyRootFilesystem": true},
                "volumeMounts": [mount("config-volume", "/etc/coredns", true)],
            }),
            json!({
                "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"podAffinityTerm": {"labelSelector": {"matchExpressions": [{"key": "k8s-app", "operator": "In", "values": ["kube-dns"]}]}, "topologyKey": "kubernetes.io/hostname"}, "weight": 100}]}},
                "dnsPolicy": "Default",
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "priorityClassName": "system-cluster-critical",
                "serviceAccount": "coredns",
                "serviceAccountName": "coredns",
                "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}, {"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane"}],
                "volumes": [{"name": "config-volume", "configMap": {"name": "coredns", "defaultMode": 420, "items": [{"key": "Corefile", "path": "Corefile"}]}}],
            }),
        ),
        _ => return None,
    };
    Some(spec)
}

/// The images every node has pulled, with their sizes, as `status.images` lists them (the
/// images of the node's pods are added to these).
pub(super) const NODE_IMAGES: [(&str, u64); 8] = [
    ("registry.k8s.io/etcd:3.6.4-0", 23_642_458),
    ("registry.k8s.io/kube-apiserver:v1.34.1", 27_061_991),
    (
        "registry.k8s.io/kube-controller-manager:v1.34.1",
        22_819_474,
    ),
    ("registry.k8s.io/kube-proxy:v1.34.1", 25_963_718),
    ("registry.k8s.io/kube-scheduler:v1.34.1", 17_385_568),
    ("registry.k8s.io/coredns/coredns:v1.12.1", 20_392_204),
    ("docker.io/kindest/kindnetd:v20250512-df8de77b", 44_375_501),
    ("registry.k8s.io/pause:3.10.1", 320_448),
];
