//! Decoding of hand-written Kubernetes JSON, shaped as the API reference documents it: a watch
//! stream of Deployment events and a NodeList, through typed, dynamic and metadata-only objects.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Node;
use kinformer_core::{
    ApiResource, DynamicObject, LabelSelector, Object, ObjectList, PartialObjectMetadata, Scope,
    WatchEvent,
};

const WATCH: &str = include_str!("fixtures/deployment-watch.jsonl");
const NODES: &str = include_str!("fixtures/node-list.json");

/// A short description of an event, to compare streams as data.
fn describe<K: Object>(ev: &WatchEvent<K>) -> String {
    match ev {
        WatchEvent::Added(o) => {
            format!("ADDED {} @{}", o.key(), o.resource_version().unwrap_or("-"))
        }
        WatchEvent::Modified(o) => format!(
            "MODIFIED {} @{}",
            o.key(),
            o.resource_version().unwrap_or("-")
        ),
        WatchEvent::Deleted(o) => format!(
            "DELETED {} @{}",
            o.key(),
            o.resource_version().unwrap_or("-")
        ),
        WatchEvent::Bookmark(b) => format!("BOOKMARK @{}", b.resource_version),
        WatchEvent::Error(s) => format!("ERROR {} {}", s.code, s.reason),
    }
}

const EXPECTED: [&str; 5] = [
    "ADDED shop/checkout @88120",
    "MODIFIED shop/checkout @88191",
    "BOOKMARK @88230",
    "DELETED shop/checkout @88305",
    "ERROR 410 Expired",
];

fn decode_all<K: Object + serde::de::DeserializeOwned>() -> Vec<WatchEvent<K>> {
    WATCH
        .lines()
        .map(|l| WatchEvent::<K>::from_json(l.as_bytes()).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn typed_watch_stream() {
    let events = decode_all::<Deployment>();
    let got: Vec<String> = events.iter().map(describe).collect();
    assert_eq!(got, EXPECTED);
    let WatchEvent::Modified(d) = &events[1] else {
        unreachable!()
    };
    assert_eq!(d.spec.replicas, Some(5));
    let WatchEvent::Error(status) = &events[4] else {
        unreachable!()
    };
    assert!(status.is_gone());
}

#[test]
fn dynamic_and_metadata_only_watch_streams_agree_with_typed() {
    let dynamic: Vec<String> = decode_all::<DynamicObject>().iter().map(describe).collect();
    let partial: Vec<String> = decode_all::<PartialObjectMetadata>()
        .iter()
        .map(describe)
        .collect();
    assert_eq!(dynamic, EXPECTED);
    assert_eq!(partial, EXPECTED);
    let WatchEvent::Added(d) = &decode_all::<DynamicObject>()[0] else {
        unreachable!()
    };
    assert_eq!(d.types.kind, "Deployment");
    assert_eq!(d.data["spec"]["replicas"], 3);
}

#[test]
fn cluster_scoped_list() {
    let list = ObjectList::<Node>::from_json(NODES.as_bytes()).unwrap();
    assert_eq!(list.resource_version.as_str(), "401233");
    assert_eq!(list.continue_token, None);
    let names: Vec<String> = list.items.iter().map(|n| n.key().to_string()).collect();
    assert_eq!(names, ["worker-a1", "worker-b1"]);
    assert_eq!(ApiResource::of::<Node>().scope, Scope::Cluster);

    let zone_a: LabelSelector = "topology.kubernetes.io/zone=zone-a,node-role.kubernetes.io/worker"
        .parse()
        .unwrap();
    let matching: Vec<&Arc<Node>> = list
        .items
        .iter()
        .filter(|n| zone_a.matches(n.labels()))
        .collect();
    assert_eq!(matching.len(), 1);
    assert_eq!(matching[0].name(), "worker-a1");
}
