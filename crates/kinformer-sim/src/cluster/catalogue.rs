//! The fixed data the seeding draws from: the node names' prefix, the kubelet release, the
//! applications of the seeded deployments and the control-plane components.

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
