//! The validation a real API server does on writes, over HTTP: each answer a cluster gives that
//! the sim once accepted (docs/sim.md, "Writes", names the Kubernetes file behind each).

mod common;

use common::Api;
use serde_json::json;

const PODS: &str = "/api/v1/namespaces/default/pods";

fn pod(name: &str) -> serde_json::Value {
    json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}})
}

#[tokio::test]
async fn names_containers_versions_and_kinds_are_checked_on_create() {
    let (_sim, api) = Api::start().await;
    let (code, s) = api.send("POST", PODS, Some(pod("Web_1"))).await;
    assert_eq!((code, s["reason"].as_str()), (422, Some("Invalid")));
    assert!(
        s["message"].as_str().unwrap().starts_with(
            "Pod \"Web_1\" is invalid: metadata.name: Invalid value: \"Web_1\": a lowercase RFC 1123 subdomain"
        ),
        "{s}"
    );
    let cause = &s["details"]["causes"][0];
    assert_eq!(
        (cause["reason"].as_str(), cause["field"].as_str()),
        (Some("FieldValueInvalid"), Some("metadata.name"))
    );

    let (code, s) = api
        .send(
            "POST",
            "/api/v1/namespaces",
            Some(json!({"metadata": {"name": "a.b"}})),
        )
        .await;
    assert_eq!(code, 422, "a namespace's name is a label: {s}");
    let (code, s) = api
        .send(
            "POST",
            "/api/v1/namespaces/default/services",
            Some(json!({"metadata": {"name": "1svc"}})),
        )
        .await;
    assert_eq!(code, 422, "a service's name starts with a letter: {s}");

    let (code, s) = api
        .send(
            "POST",
            PODS,
            Some(json!({"metadata": {"name": "empty"}, "spec": {"containers": []}})),
        )
        .await;
    assert_eq!(code, 422);
    assert_eq!(
        s["message"],
        "Pod \"empty\" is invalid: spec.containers: Required value"
    );
    assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueRequired");

    let mut versioned = pod("v");
    versioned["metadata"]["resourceVersion"] = json!("12");
    let (code, s) = api.send("POST", PODS, Some(versioned)).await;
    assert_eq!((code, s["reason"].as_str()), (500, Some("InternalError")));
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .contains("resourceVersion should not be set on objects to be created")
    );

    let mut wrong = pod("w");
    wrong["apiVersion"] = json!("apps/v1");
    let (code, s) = api.send("POST", PODS, Some(wrong)).await;
    assert_eq!(code, 400);
    assert_eq!(
        s["message"],
        "the API version in the data (apps/v1) does not match the expected API version (v1)"
    );
    let mut wrong = pod("w");
    wrong["kind"] = json!("ConfigMap");
    assert_eq!(api.send("POST", PODS, Some(wrong)).await.0, 400);

    // Nothing of the refused creates was stored.
    let (_, list) = api.send("GET", PODS, None).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn pod_updates_may_change_only_the_mutable_fields_and_defaults_count_as_unchanged() {
    let (_sim, api) = Api::start().await;
    let created = api.ok("POST", PODS, Some(pod("p"))).await;
    let path = format!("{PODS}/p");
    // An image change is allowed; so is a PUT of the object as created, defaults left out.
    api.ok(
        "PATCH",
        &path,
        Some(json!({"spec": {"containers": [{"name": "c", "image": "i:2"}]}})),
    )
    .await;
    let mut as_written = pod("p");
    as_written["spec"]["containers"][0]["image"] = json!("i:2");
    as_written["spec"]["serviceAccountName"] = created["spec"]["serviceAccountName"].clone();
    as_written["spec"]["tolerations"] = created["spec"]["tolerations"].clone();
    as_written["spec"]["priority"] = created["spec"]["priority"].clone();
    as_written["spec"]["preemptionPolicy"] = created["spec"]["preemptionPolicy"].clone();
    api.ok("PUT", &path, Some(as_written)).await;

    let (code, s) = api
        .send(
            "PATCH",
            &path,
            Some(json!({"spec": {"containers": [{"name": "c", "image": "i:2", "env": [{"name": "A", "value": "1"}]}]}})),
        )
        .await;
    assert_eq!(code, 422, "{s}");
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .starts_with("Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"),
        "{s}"
    );
    assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueForbidden");
}

#[tokio::test]
async fn no_finalizer_is_added_to_an_object_being_deleted() {
    let (_sim, api) = Api::start().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    api.ok(
        "POST",
        cms,
        Some(json!({"metadata": {"name": "c", "finalizers": ["a.example.com/x"]}})),
    )
    .await;
    api.send("DELETE", &format!("{cms}/c"), None).await;
    let (code, s) = api
        .send(
            "PATCH",
            &format!("{cms}/c"),
            Some(json!({"metadata": {"finalizers": ["a.example.com/x", "b.example.com/y"]}})),
        )
        .await;
    assert_eq!(code, 422);
    assert_eq!(
        s["message"],
        "ConfigMap \"c\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"b.example.com/y\"}"
    );
    // Removing the last finalizer still ends the deletion.
    api.ok(
        "PATCH",
        &format!("{cms}/c"),
        Some(json!({"metadata": {"finalizers": null}})),
    )
    .await;
    assert_eq!(api.send("GET", &format!("{cms}/c"), None).await.0, 404);
}

#[tokio::test]
async fn field_validation_decides_what_duplicate_fields_cost() {
    let (_sim, api) = Api::start().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let body = |name: &str| {
        format!(r#"{{"metadata": {{"name": "{name}"}}, "data": {{"k": "first", "k": "last"}}}}"#)
    };
    let (code, _, s) = api
        .request(
            "POST",
            &format!("{cms}?fieldValidation=Strict"),
            Some(body("s").as_bytes()),
        )
        .await;
    assert_eq!(
        (code, s["message"].as_str()),
        (
            400,
            Some("strict decoding error: duplicate field \"data.k\"")
        )
    );

    // Warn (the default): stored with the last value, and a warning header.
    let (code, headers, o) = api.request("POST", cms, Some(body("w").as_bytes())).await;
    assert_eq!((code, o["data"]["k"].as_str()), (201, Some("last")));
    let warning = headers
        .get("warning")
        .expect("a Warning header")
        .to_str()
        .unwrap();
    assert_eq!(warning, "299 - \"duplicate field \\\"data.k\\\"\"");

    let (code, headers, _) = api
        .request(
            "POST",
            &format!("{cms}?fieldValidation=Ignore"),
            Some(body("i").as_bytes()),
        )
        .await;
    assert_eq!((code, headers.get("warning")), (201, None));
    let (code, _, _) = api
        .request(
            "POST",
            &format!("{cms}?fieldValidation=Loose"),
            Some(body("l").as_bytes()),
        )
        .await;
    assert_eq!(code, 400);
}

#[tokio::test]
async fn unknown_fields_are_reported_as_field_validation_says_and_never_stored() {
    let (_sim, api) = Api::start().await;
    let body = |name: &str| {
        json!({
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "i:1", "imagePullPolicyy": "Always"}], "nope": 1}
        })
        .to_string()
    };
    let expected = "strict decoding error: unknown field \"spec.containers[0].imagePullPolicyy\", unknown field \"spec.nope\"";
    let (code, _, s) = api
        .request(
            "POST",
            &format!("{PODS}?fieldValidation=Strict"),
            Some(body("s").as_bytes()),
        )
        .await;
    assert_eq!((code, s["message"].as_str()), (400, Some(expected)));

    // Warn (the default): stored without them, one warning each.
    let (code, headers, o) = api.request("POST", PODS, Some(body("w").as_bytes())).await;
    assert_eq!(code, 201);
    assert_eq!(o["spec"].get("nope"), None);
    assert_eq!(o["spec"]["containers"][0].get("imagePullPolicyy"), None);
    let warnings: Vec<&str> = headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(
        warnings,
        [
            "299 - \"unknown field \\\"spec.containers[0].imagePullPolicyy\\\"\"",
            "299 - \"unknown field \\\"spec.nope\\\"\""
        ]
    );
    let stored = api.ok("GET", &format!("{PODS}/w"), None).await;
    assert_eq!(stored["spec"].get("nope"), None);

    // Ignore: dropped in silence.
    let (code, headers, o) = api
        .request(
            "POST",
            &format!("{PODS}?fieldValidation=Ignore"),
            Some(body("i").as_bytes()),
        )
        .await;
    assert_eq!((code, headers.get("warning")), (201, None));
    assert_eq!(o["spec"].get("nope"), None);

    // A patch's unknown and duplicate fields cost the same.
    let (code, _, s) = api
        .request(
            "PATCH",
            &format!("{PODS}/w?fieldValidation=Strict"),
            Some(br#"{"metadata": {"labelz": {"a": "b"}}}"#),
        )
        .await;
    assert_eq!(
        (code, s["message"].as_str()),
        (
            400,
            Some("strict decoding error: unknown field \"metadata.labelz\"")
        )
    );
    let (code, _, s) = api
        .request(
            "PATCH",
            &format!("{PODS}/w?fieldValidation=Strict"),
            Some(br#"{"metadata": {"labels": {"a": "1", "a": "2"}}}"#),
        )
        .await;
    assert_eq!(
        (code, s["message"].as_str()),
        (
            400,
            Some("strict decoding error: duplicate field \"metadata.labels.a\"")
        )
    );
    let (code, headers, o) = api
        .request(
            "PATCH",
            &format!("{PODS}/w"),
            Some(br#"{"metadata": {"labelz": {"a": "b"}, "labels": {"a": "1"}}}"#),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(o["metadata"].get("labelz"), None);
    assert_eq!(o["metadata"]["labels"]["a"], "1");
    assert!(headers.get("warning").is_some());

    // A value of the wrong type is refused whatever the directive.
    let (code, _, s) = api
        .request(
            "POST",
            &format!("{PODS}?fieldValidation=Ignore"),
            Some(br#"{"metadata": {"name": "t"}, "spec": {"containers": [{"name": "c", "image": "i"}], "priority": "high"}}"#),
        )
        .await;
    assert_eq!(code, 400);
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .starts_with("Pod in version \"v1\" cannot be handled as a Pod: "),
        "{s}"
    );
}

#[tokio::test]
async fn every_write_records_its_field_manager() {
    let (sim, api) = Api::start().await;
    let created = api
        .ok(
            "POST",
            &format!("{PODS}?fieldManager=kubectl-create"),
            Some(pod("m")),
        )
        .await;
    let managed = created["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(managed.len(), 1, "{created}");
    assert_eq!(managed[0]["manager"], "kubectl-create");
    assert_eq!(managed[0]["operation"], "Update");
    assert_eq!(managed[0]["apiVersion"], "v1");
    assert_eq!(managed[0]["fieldsType"], "FieldsV1");
    let fields = &managed[0]["fieldsV1"];
    assert!(fields["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["f:image"].is_object());
    // The defaults applied on create belong to the creator too; the status to nobody.
    assert!(fields["f:spec"]["f:restartPolicy"].is_object(), "{fields}");
    assert_eq!(fields.get("f:status"), None);

    // Without `fieldManager`, the manager is the user agent up to its first `/`.
    let c = reqwest::Client::new();
    let r = c
        .patch(format!("{}{PODS}/m", sim.url()))
        .header(
            "user-agent",
            "kubectl/v1.33.1 (linux/amd64) kubernetes/8adc0f0",
        )
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"metadata": {"labels": {"team": "a"}}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let labelled: serde_json::Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    let managed = labelled["metadata"]["managedFields"].as_array().unwrap();
    let kubectl = managed.iter().find(|e| e["manager"] == "kubectl").unwrap();
    assert_eq!(
        kubectl["fieldsV1"],
        json!({"f:metadata": {"f:labels": {".": {}, "f:team": {}}}})
    );

    // A status write has an entry of its own.
    let status = api
        .ok(
            "PATCH",
            &format!("{PODS}/m/status?fieldManager=kubelet"),
            Some(json!({"status": {"message": "hello"}})),
        )
        .await;
    let kubelet = status["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "kubelet")
        .unwrap()
        .clone();
    assert_eq!(kubelet["subresource"], "status");
    assert_eq!(kubelet["fieldsV1"], json!({"f:status": {"f:message": {}}}));

    // Replacing the object with itself changes nothing: no new version, no new timestamps.
    let same = api
        .ok(
            "PUT",
            &format!("{PODS}/m?fieldManager=other"),
            Some(status.clone()),
        )
        .await;
    assert_eq!(same["metadata"], status["metadata"]);

    let (code, s) = api
        .send(
            "POST",
            &format!("{PODS}?fieldManager={}", "x".repeat(129)),
            Some(pod("long")),
        )
        .await;
    assert_eq!(code, 422, "{s}");
}
