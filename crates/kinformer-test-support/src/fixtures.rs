//! Typed pods built in memory, for benchmarks and tests that need many objects and no server.
//!
//! The layout is fixed so that figures compare across runs and crates: 100 namespaces
//! (`team-000`..`team-099`) of equal size, 1000 nodes, 2000 ReplicaSets as owners, and a `tier`
//! label (`web`, `api`, `db`, `cache`) spread evenly inside every namespace.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// The tiers, spread evenly inside every namespace.
pub const TIERS: [&str; 4] = ["web", "api", "db", "cache"];

/// The name of pod `i` of [`typed_pods`], for lookups by name.
///
/// ```
/// let pods = kinformer_test_support::typed_pods(300);
/// assert_eq!(pods[142].metadata.name.as_deref(), Some(kinformer_test_support::typed_pod_name(142).as_str()));
/// ```
pub fn typed_pod_name(i: usize) -> String {
    let app = format!("app-{:04}", i % 2000);
    let hash = format!("{:010x}", (i % 2000) * 7919);
    format!("{app}-{hash}-{i:06}")
}

/// `n` pods with realistic metadata (name, namespace, uid, resourceVersion, labels `app`,
/// `pod-template-hash`, `tier`, `version`, a controlling ReplicaSet owner), a container, a node and
/// a running status. Pod `i` lives in namespace `team-{i % 100}` on node `node-{i % 1000}` and has
/// tier `TIERS[(i / 100) % 4]`.
///
/// ```
/// use kinformer_core::Object;
///
/// let pods = kinformer_test_support::typed_pods(1000);
/// assert_eq!(pods[42].namespace(), Some("team-042"));
/// let web_in_team_042 = pods
///     .iter()
///     .filter(|p| p.namespace() == Some("team-042") && p.labels()["tier"] == "web")
///     .count();
/// assert_eq!(web_in_team_042, 3); // of the 10 pods in team-042: i = 42, 442, 842
/// ```
pub fn typed_pods(n: usize) -> Vec<Arc<Pod>> {
    (0..n).map(|i| Arc::new(typed_pod(i))).collect()
}

fn typed_pod(i: usize) -> Pod {
    let app = format!("app-{:04}", i % 2000);
    let hash = format!("{:010x}", (i % 2000) * 7919);
    Pod {
        metadata: ObjectMeta {
            name: Some(typed_pod_name(i)),
            namespace: Some(format!("team-{:03}", i % 100)),
            uid: Some(format!("{i:08x}-0000-4000-8000-{:012x}", i * 31)),
            resource_version: Some((1_000_000 + i).to_string()),
            labels: Some(BTreeMap::from([
                ("app".to_owned(), app.clone()),
                ("pod-template-hash".to_owned(), hash.clone()),
                ("tier".to_owned(), TIERS[(i / 100) % 4].to_owned()),
                ("version".to_owned(), format!("v{}", i % 7)),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: format!("{app}-{hash}"),
                uid: format!("rs-{:08x}", i % 2000),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(format!("node-{:04}", i % 1000)),
            containers: vec![Container {
                name: "main".into(),
                image: Some(format!("registry.example/{app}:1.{}", i % 7)),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            pod_ip: Some(format!(
                "10.{}.{}.{}",
                (i >> 16) & 255,
                (i >> 8) & 255,
                i & 255
            )),
            ..PodStatus::default()
        }),
    }
}
