//! What the registry's strategies do to writes over HTTP, kind by kind: the status subresource
//! (writes to an object keep its stored status, writes to `/status` keep the rest, as each
//! kind's `PrepareForUpdate` does) and `metadata.generation` (only on the kinds that have it,
//! bumped only by spec changes). Each rule is cited in docs/sim.md with the apiserver file
//! behind it.

mod common;

use common::{Api, rv};
use kinformer_core::{ApiResource, Scope};
use kinformer_sim::{KubeVersion, SimConfig};
use serde_json::json;

const PODS: &str = "/api/v1/namespaces/default/pods";

#[tokio::test]
async fn a_pod_write_keeps_its_status_and_a_status_write_keeps_its_spec_and_owners() {
    let (_sim, api) = Api::start().await;
    let created = api
        .ok(
            "POST",
            PODS,
            Some(json!({
                "metadata": {"name": "p", "labels": {"a": "1"},
                    "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u"}]},
                "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n"},
                "status": {"phase": "Running"},
            })),
        )
        .await;
    assert_eq!(
        created["status"]["phase"], "Pending",
        "a create's status is replaced"
    );
    assert_eq!(created["metadata"]["generation"], 1);

    // The object: a new label and a status are sent; the label is stored, the status is not.
    let mut sent = created.clone();
    sent["metadata"]["labels"]["a"] = json!("2");
    sent["status"]["phase"] = json!("Running");
    let put = api.ok("PUT", &format!("{PODS}/p"), Some(sent)).await;
    assert_eq!(put["metadata"]["labels"]["a"], "2");
    assert_eq!(put["status"]["phase"], "Pending");
    assert_eq!(put["metadata"]["generation"], 1, "labels are not the spec");

    // A status alone sent to the object writes nothing: no new version.
    let same = api
        .ok(
            "PATCH",
            &format!("{PODS}/p"),
            Some(json!({"status": {"phase": "Failed"}})),
        )
        .await;
    assert_eq!(
        (rv(&same), &same["status"]["phase"]),
        (rv(&put), &json!("Pending"))
    );

    // `/status`: the status is stored; the spec and owners are kept, labels may change.
    let status = api
        .ok(
            "PATCH",
            &format!("{PODS}/p/status"),
            Some(json!({
                "metadata": {"labels": {"a": "3"}, "ownerReferences": null},
                "spec": {"activeDeadlineSeconds": 5},
                "status": {"phase": "Running", "qosClass": null},
            })),
        )
        .await;
    assert_eq!(status["status"]["phase"], "Running");
    assert_eq!(
        status["status"]["qosClass"], "BestEffort",
        "the QoS class is backfilled"
    );
    assert_eq!(status["spec"].get("activeDeadlineSeconds"), None);
    assert_eq!(status["metadata"]["ownerReferences"][0]["name"], "o");
    assert_eq!(status["metadata"]["labels"]["a"], "3");
    assert_eq!(status["metadata"]["generation"], 1);

    // A spec change through the object bumps the generation.
    let spec = api
        .ok(
            "PATCH",
            &format!("{PODS}/p"),
            Some(json!({"spec": {"activeDeadlineSeconds": 5}})),
        )
        .await;
    assert_eq!(spec["metadata"]["generation"], 2);
    assert_eq!(spec["status"]["phase"], "Running");
}

#[tokio::test]
async fn workloads_start_without_a_status_and_keep_what_their_status_strategy_keeps() {
    let (_sim, api) = Api::start().await;
    // Each kind's own fields: a daemon set has no replicas (a field a kind lacks is dropped).
    for (plural, keeps_labels, spec_field, status_field) in [
        ("deployments", true, "replicas", "replicas"),
        ("replicasets", false, "replicas", "replicas"),
        ("statefulsets", false, "replicas", "replicas"),
        ("daemonsets", false, "minReadySeconds", "numberReady"),
    ] {
        let base = format!("/apis/apps/v1/namespaces/default/{plural}");
        let created = api
            .ok(
                "POST",
                &base,
                Some(json!({
                    "metadata": {"name": "w", "labels": {"a": "1"}},
                    "spec": {spec_field: 1},
                    "status": {status_field: 7},
                })),
            )
            .await;
        assert_eq!(
            created.get("status"),
            None,
            "{plural}: a create's status is dropped"
        );
        assert_eq!(created["metadata"]["generation"], 1, "{plural}");

        let status = api
            .ok(
                "PATCH",
                &format!("{base}/w/status"),
                Some(json!({
                    "metadata": {"labels": {"a": "2"}, "annotations": {"n": "1"}},
                    "spec": {spec_field: 9},
                    "status": {status_field: 1},
                })),
            )
            .await;
        assert_eq!(status["status"][status_field], 1, "{plural}");
        assert_eq!(status["spec"][spec_field], 1, "{plural}: the spec is kept");
        assert_eq!(status["metadata"]["annotations"]["n"], "1", "{plural}");
        let label = if keeps_labels { "1" } else { "2" };
        assert_eq!(status["metadata"]["labels"]["a"], label, "{plural}");
        assert_eq!(status["metadata"]["generation"], 1, "{plural}");

        let scaled = api
            .ok(
                "PATCH",
                &format!("{base}/w"),
                Some(json!({"spec": {spec_field: 3}, "status": {status_field: 0}})),
            )
            .await;
        assert_eq!(scaled["metadata"]["generation"], 2, "{plural}");
        assert_eq!(
            scaled["status"][status_field], 1,
            "{plural}: the status is kept"
        );
    }
}

#[tokio::test]
async fn generation_only_on_the_kinds_that_have_it() {
    let (_sim, api) = Api::start().await;
    for (path, body) in [
        (
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": "x"}, "data": {"k": "v"}}),
        ),
        (
            "/api/v1/namespaces/default/secrets",
            json!({"metadata": {"name": "x"}, "data": {"k": "dg=="}}),
        ),
        (
            "/api/v1/namespaces/default/services",
            json!({"metadata": {"name": "x"}, "spec": {"ports": [{"port": 80}]}}),
        ),
        (
            "/api/v1/nodes",
            json!({"metadata": {"name": "x"}, "spec": {}}),
        ),
        ("/api/v1/namespaces", json!({"metadata": {"name": "x"}})),
    ] {
        let created = api.ok("POST", path, Some(body)).await;
        assert_eq!(created["metadata"].get("generation"), None, "{path}");
        let patched = api
            .ok(
                "PATCH",
                &format!("{path}/x"),
                Some(json!({"metadata": {"labels": {"l": "1"}}, "spec": {"z": 1}, "data": {"k2": "dg=="}})),
            )
            .await;
        assert_eq!(patched["metadata"].get("generation"), None, "{path}");
    }
}

#[tokio::test]
async fn pods_have_a_generation_from_1_33_only() {
    for (version, expected) in [
        (KubeVersion::V1_32, None),
        (KubeVersion::V1_33, Some(json!(1))),
        (KubeVersion::V1_34, Some(json!(1))),
        (KubeVersion::V1_36, Some(json!(1))),
    ] {
        let (_sim, api) = Api::start_with(SimConfig {
            version,
            ..SimConfig::default()
        })
        .await;
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}});
        let created = api.ok("POST", PODS, Some(pod)).await;
        assert_eq!(
            created["metadata"].get("generation").cloned(),
            expected,
            "{version:?}"
        );
        let patched = api
            .ok(
                "PATCH",
                &format!("{PODS}/p"),
                Some(json!({"spec": {"activeDeadlineSeconds": 60}})),
            )
            .await;
        let bumped = expected.map(|_| json!(2));
        assert_eq!(
            patched["metadata"].get("generation").cloned(),
            bumped,
            "{version:?}"
        );
    }
}

#[tokio::test]
async fn pods_keep_their_status_observed_generation_from_1_34_only() {
    for (version, kept) in [
        (KubeVersion::V1_32, false),
        (KubeVersion::V1_33, false),
        (KubeVersion::V1_34, true),
        (KubeVersion::V1_36, true),
    ] {
        let (_sim, api) = Api::start_with(SimConfig {
            version,
            ..SimConfig::default()
        })
        .await;
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}});
        api.ok("POST", PODS, Some(pod)).await;
        // The kubelet's status write names the generation it saw, on the status and each
        // condition; a server without the feature drops both.
        let status = api
            .ok(
                "PATCH",
                &format!("{PODS}/p/status"),
                Some(
                    json!({"status": {"phase": "Running", "observedGeneration": 1,
                    "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1}]}}),
                ),
            )
            .await;
        assert_eq!(status["status"]["phase"], "Running", "{version:?}");
        let expected = kept.then(|| json!(1));
        assert_eq!(
            status["status"].get("observedGeneration").cloned(),
            expected,
            "{version:?}"
        );
        assert_eq!(
            status["status"]["conditions"][0]
                .get("observedGeneration")
                .cloned(),
            expected,
            "{version:?}"
        );
        let read = api.ok("GET", &format!("{PODS}/p"), None).await;
        assert_eq!(read["status"], status["status"], "{version:?}");
    }
}

#[tokio::test]
async fn services_nodes_and_namespaces_split_status_from_the_rest() {
    let (_sim, api) = Api::start().await;
    let svc = "/api/v1/namespaces/default/services";
    let created = api
        .ok(
            "POST",
            svc,
            Some(
                json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]},
                "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}),
            ),
        )
        .await;
    assert_eq!(
        created.get("status"),
        None,
        "a service starts without a status"
    );
    let lb = json!({"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}]}});
    let s = api
        .ok(
            "PATCH",
            &format!("{svc}/s/status"),
            Some(json!({"spec": {"ports": [{"port": 81}]}, "status": lb})),
        )
        .await;
    assert_eq!(
        (&s["status"], &s["spec"]["ports"][0]["port"]),
        (&lb, &json!(80))
    );

    // A node keeps the status it is registered with; its object writes keep the stored one.
    let node = api
        .ok(
            "POST",
            "/api/v1/nodes",
            Some(json!({"metadata": {"name": "n"}, "status": {"phase": "Running"}})),
        )
        .await;
    assert_eq!(node["status"]["phase"], "Running");
    let n = api
        .ok(
            "PATCH",
            "/api/v1/nodes/n",
            Some(json!({"spec": {"unschedulable": true}, "status": {"phase": "Pending"}})),
        )
        .await;
    assert_eq!(
        (&n["spec"]["unschedulable"], &n["status"]["phase"]),
        (&json!(true), &json!("Running"))
    );

    // A namespace's object writes keep its status and its spec's finalizers.
    api.ok(
        "POST",
        "/api/v1/namespaces",
        Some(json!({"metadata": {"name": "ns"}})),
    )
    .await;
    let ns = api
        .ok(
            "PATCH",
            "/api/v1/namespaces/ns",
            Some(
                json!({"spec": {"finalizers": []}, "status": {"phase": "Terminating"},
                "metadata": {"labels": {"team": "a"}}}),
            ),
        )
        .await;
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(ns["metadata"]["labels"]["team"], "a");
}

#[tokio::test]
async fn custom_resources_follow_their_definition_s_status_subresource() {
    let (sim, api) = Api::start().await;
    let with = ApiResource::new("example.com", "v1", "Widget", "widgets", Scope::Namespaced);
    let without = ApiResource::new("example.com", "v1", "Gadget", "gadgets", Scope::Namespaced);
    sim.store().register_crd_with_status(with);
    sim.store().register_crd(without);
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let gadgets = "/apis/example.com/v1/namespaces/default/gadgets";
    let body = json!({"metadata": {"name": "x"}, "spec": {"size": 1}, "status": {"ready": true}});

    let w = api.ok("POST", widgets, Some(body.clone())).await;
    assert_eq!(
        (w.get("status"), &w["metadata"]["generation"]),
        (None, &json!(1))
    );
    // Through `/status`, only the status (and managedFields) changes.
    let ws = api
        .ok(
            "PATCH",
            &format!("{widgets}/x/status"),
            Some(json!({"metadata": {"labels": {"l": "1"}}, "spec": {"size": 9}, "status": {"ready": true}})),
        )
        .await;
    assert_eq!(ws["status"]["ready"], true);
    assert_eq!(ws["spec"]["size"], 1);
    assert_eq!(ws["metadata"].get("labels"), None);
    assert_eq!(ws["metadata"]["generation"], 1);
    // Through the object, the status is kept and a spec change bumps the generation.
    let wo = api
        .ok(
            "PATCH",
            &format!("{widgets}/x"),
            Some(json!({"spec": {"size": 2}, "status": {"ready": false}})),
        )
        .await;
    assert_eq!(
        (&wo["status"]["ready"], &wo["metadata"]["generation"]),
        (&json!(true), &json!(2))
    );

    // Without the subresource, the status is part of the object and bumps the generation.
    let g = api.ok("POST", gadgets, Some(body)).await;
    assert_eq!(g["status"]["ready"], true);
    let gs = api
        .ok(
            "PATCH",
            &format!("{gadgets}/x"),
            Some(json!({"status": {"ready": false}})),
        )
        .await;
    assert_eq!(
        (&gs["status"]["ready"], &gs["metadata"]["generation"]),
        (&json!(false), &json!(2))
    );
    let (code, _) = api
        .send(
            "PATCH",
            &format!("{gadgets}/x/status"),
            Some(json!({"status": {}})),
        )
        .await;
    assert_eq!(code, 404, "no status subresource, no path");
}

#[tokio::test]
async fn the_status_path_exists_only_where_the_kind_has_one_and_only_for_reads_and_writes() {
    let (_sim, api) = Api::start().await;
    api.ok(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(json!({"metadata": {"name": "c"}})),
    )
    .await;
    let (code, _) = api
        .send(
            "GET",
            "/api/v1/namespaces/default/configmaps/c/status",
            None,
        )
        .await;
    assert_eq!(code, 404);
    api.ok(
        "POST",
        PODS,
        Some(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})),
    )
    .await;
    let got = api.ok("GET", &format!("{PODS}/p/status"), None).await;
    assert_eq!(got["metadata"]["name"], "p");
    let (code, s) = api.send("DELETE", &format!("{PODS}/p/status"), None).await;
    assert_eq!(
        (code, s["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
    assert_eq!(
        api.ok("GET", &format!("{PODS}/p"), None).await["metadata"]["name"],
        "p"
    );
}

#[tokio::test]
async fn marking_an_object_for_deletion_bumps_only_a_generation_it_has() {
    let (_sim, api) = Api::start().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    api.ok(
        "POST",
        cms,
        Some(json!({"metadata": {"name": "c", "finalizers": ["example.com/hold"]}})),
    )
    .await;
    let (code, _) = api.send("DELETE", &format!("{cms}/c"), None).await;
    assert!((200..300).contains(&code));
    let held = api.ok("GET", &format!("{cms}/c"), None).await;
    assert!(held["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(held["metadata"].get("generation"), None);

    let deploys = "/apis/apps/v1/namespaces/default/deployments";
    api.ok(
        "POST",
        deploys,
        Some(json!({"metadata": {"name": "d", "finalizers": ["example.com/hold"]}, "spec": {}})),
    )
    .await;
    api.send("DELETE", &format!("{deploys}/d"), None).await;
    let held = api.ok("GET", &format!("{deploys}/d"), None).await;
    assert_eq!(held["metadata"]["generation"], 2);
}

#[tokio::test]
async fn endpoint_slices_have_a_generation_bumped_by_endpoints_and_labels() {
    let (_sim, api) = Api::start().await;
    let path = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";
    let created = api
        .ok(
            "POST",
            path,
            Some(json!({
                "metadata": {"name": "web-abc12", "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.1"]}],
                "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
            })),
        )
        .await;
    assert_eq!(created["metadata"]["generation"], 1);
    let generation = |v: &serde_json::Value| v["metadata"]["generation"].as_i64();
    let one = format!("{path}/web-abc12");
    let patch = |body| api.ok("PATCH", &one, Some(body));
    // An annotation is metadata: no bump.
    let annotated = patch(json!({"metadata": {"annotations": {"a": "1"}}})).await;
    assert_eq!(generation(&annotated), Some(1));
    // Labels bump it, as the endpoints do.
    let labelled = patch(json!({"metadata": {"labels": {"extra": "1"}}})).await;
    assert_eq!(generation(&labelled), Some(2));
    let moved = patch(json!({"endpoints": [{"addresses": ["10.0.0.2"]}]})).await;
    assert_eq!(generation(&moved), Some(3));
}

#[tokio::test]
async fn a_delete_answers_the_object_where_the_storage_returns_it_else_a_status() {
    let (_sim, api) = Api::start().await;
    let base = "/api/v1/namespaces/default";
    for plural in ["serviceaccounts", "configmaps", "secrets"] {
        api.ok(
            "POST",
            &format!("{base}/{plural}"),
            Some(json!({"metadata": {"name": "x"}})),
        )
        .await;
        let out = api.ok("DELETE", &format!("{base}/{plural}/x"), None).await;
        if plural == "serviceaccounts" {
            // `ReturnDeletedObject` (pkg/registry/core/serviceaccount/storage/storage.go).
            assert_eq!(
                (out["kind"].as_str(), out["metadata"]["name"].as_str()),
                (Some("ServiceAccount"), Some("x"))
            );
        } else {
            assert_eq!(
                (
                    out["kind"].as_str(),
                    out["status"].as_str(),
                    out["details"]["name"].as_str(),
                    out["details"]["kind"].as_str()
                ),
                (Some("Status"), Some("Success"), Some("x"), Some(plural)),
                "{plural}"
            );
        }
    }
}

#[tokio::test]
async fn leases_take_optimistic_writes_as_leader_election_makes_them() {
    let (_sim, api) = Api::start().await;
    let path = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let created = api
        .ok(
            "POST",
            path,
            Some(json!({
                "metadata": {"name": "controller"},
                "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
                         "acquireTime": "2026-12-02T04:00:00.000000Z",
                         "renewTime": "2026-12-02T04:00:00.000000Z", "leaseTransitions": 0},
            })),
        )
        .await;
    assert_eq!(created["spec"]["holderIdentity"], "a");
    assert_eq!(created["metadata"].get("generation"), None);
    // A renewal at the version read succeeds.
    let mut renewed = created.clone();
    renewed["spec"]["renewTime"] = json!("2026-12-02T04:00:05.000000Z");
    let renewed = api
        .ok("PUT", &format!("{path}/controller"), Some(renewed))
        .await;
    assert_ne!(rv(&renewed), rv(&created));
    // A second candidate that read before the renewal loses the race: 409, nothing written.
    let mut stolen = created.clone();
    stolen["spec"]["holderIdentity"] = json!("b");
    let (code, s) = api
        .send("PUT", &format!("{path}/controller"), Some(stolen))
        .await;
    assert_eq!((code, s["reason"].as_str()), (409, Some("Conflict")), "{s}");
    let read = api.ok("GET", &format!("{path}/controller"), None).await;
    assert_eq!(read["spec"]["holderIdentity"], "a");
    assert_eq!(rv(&read), rv(&renewed));
    // Leases have a schema: an unknown field is refused under Strict validation.
    let (code, _) = api
        .send(
            "POST",
            &format!("{path}?fieldValidation=Strict"),
            Some(json!({"metadata": {"name": "x"}, "spec": {"holder": "typo"}})),
        )
        .await;
    assert_eq!(code, 400);
}
