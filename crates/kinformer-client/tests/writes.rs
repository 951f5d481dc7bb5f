//! Single-object reads and writes against the simulated API server over real HTTP: each
//! success, and each error a caller acts on (not found, already exists, conflict) as its own
//! variant.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_client::{Api, AuthConfig, Client, Config, Error, Kubeconfig, KubeconfigOptions};
use kinformer_core::{ApiResource, DynamicObject, PartialObjectMetadata, Scope};
use kinformer_sim::{Auth, RequestKind, SimConfig, SimServer};
use serde_json::json;

async fn sim(config: SimConfig) -> SimServer {
    SimServer::start(config).await.expect("sim starts")
}

/// The client configuration from the sim's own kubeconfig (its TLS and credentials).
fn config_of(sim: &SimServer) -> Config {
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_yaml(), None).unwrap();
    Config::from_kubeconfig(&kc, &KubeconfigOptions::default()).unwrap()
}

fn configmap(name: &str, value: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.data = Some([("k".to_string(), value.to_string())].into());
    cm
}

fn rv<K: kinformer_core::Object>(o: &K) -> String {
    o.resource_version()
        .expect("a stored object has a version")
        .to_owned()
}

#[tokio::test]
async fn each_write_and_each_error_kind_on_configmaps() {
    let sim = sim(SimConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(Client::new(config_of(&sim)).unwrap(), "default");

    let e = api.get("settings").await.unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");

    let created = api.create(&configmap("settings", "1")).await.unwrap();
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"));
    assert!(created.metadata.uid.is_some());
    let e = api.create(&configmap("settings", "2")).await.unwrap_err();
    assert!(matches!(e, Error::AlreadyExists { .. }), "{e}");
    assert!(!e.is_retryable());

    let got = api.get("settings").await.unwrap();
    assert_eq!(got, created);

    // An update at the version read.
    let mut next = got.clone();
    next.data = Some([("k".to_string(), "3".to_string())].into());
    let replaced = api.replace("settings", &next).await.unwrap();
    assert_ne!(rv(&replaced), rv(&created));
    assert_eq!(replaced.data, next.data);
    // The same update again is from a stale read: someone (we) wrote first.
    let e = api.replace("settings", &next).await.unwrap_err();
    assert!(matches!(e, Error::Conflict { .. }), "{e}");
    assert_eq!(api.get("settings").await.unwrap(), replaced);
    let e = api
        .replace("missing", &configmap("missing", "x"))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");

    // A delete with a stale precondition leaves the object; the current one removes it.
    let e = api
        .delete("settings", Some(&rv(&created)))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Conflict { .. }), "{e}");
    api.get("settings").await.unwrap();
    api.delete("settings", Some(&rv(&replaced))).await.unwrap();
    assert!(matches!(
        api.get("settings").await,
        Err(Error::NotFound { .. })
    ));
    let e = api.delete("settings", None).await.unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");

    // Without a precondition, a delete takes whatever is there.
    api.create(&configmap("other", "1")).await.unwrap();
    api.delete("other", None).await.unwrap();

    // Every other refusal keeps the server's Status.
    let e = api.create(&ConfigMap::default()).await.unwrap_err();
    match &e {
        Error::Api { status } => assert_eq!(status.code, 422, "{e}"),
        other => panic!("{other}"),
    }

    let methods: Vec<String> = sim
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/configmaps"))
        .map(|r| r.method)
        .collect();
    for method in ["GET", "POST", "PUT", "DELETE"] {
        assert!(methods.iter().any(|m| m == method), "{method}: {methods:?}");
    }
}

/// Leases, as leader election writes them: a renewal at the version read wins, a candidate
/// that read before it gets a conflict.
#[tokio::test]
async fn leases_take_optimistic_writes() {
    let sim = sim(SimConfig::default()).await;
    let leases: Api<Lease> = Api::namespaced(Client::new(config_of(&sim)).unwrap(), "default");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "leader", "labels": {"app": "x"}},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "leaseTransitions": 0,
                 "renewTime": "2026-01-02T03:04:05.000000Z"},
    }))
    .unwrap();
    let created = leases.create(&lease).await.unwrap();
    let mut renewed = created.clone();
    renewed.spec.as_mut().unwrap().renew_time =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            "2026-01-02T03:04:10.000000Z".parse().unwrap(),
        ));
    let renewed = leases.replace("leader", &renewed).await.unwrap();
    let mut stolen = created.clone();
    stolen.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let e = leases.replace("leader", &stolen).await.unwrap_err();
    assert!(matches!(e, Error::Conflict { .. }), "{e}");
    let read = leases.get("leader").await.unwrap();
    assert_eq!(read, renewed);
    assert_eq!(
        read.spec.unwrap().holder_identity.as_deref(),
        Some("a"),
        "the losing write changed nothing"
    );
}

#[tokio::test]
async fn dynamic_objects_are_written_too() {
    let sim = sim(SimConfig::default()).await;
    let resource = ApiResource::of::<ConfigMap>();
    let api = Api::<DynamicObject>::namespaced_with(
        Client::new(config_of(&sim)).unwrap(),
        "default",
        &resource,
    );
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "dyn"}, "data": {"a": "b"},
    }))
    .unwrap();
    let created = api.create(&object).await.unwrap();
    assert_eq!(created.types.kind, "ConfigMap");
    let got = api.get("dyn").await.unwrap();
    assert_eq!(got.data["data"]["a"], "b");
    assert_eq!(rv(&got), rv(&created));
}

/// What is refused before any request: a namespaced object without a namespace, a name that is
/// not a path segment, a write through a metadata-only Api.
#[tokio::test]
async fn bad_requests_are_refused_before_sending() {
    let sim = sim(SimConfig::default()).await;
    let client = Client::new(config_of(&sim)).unwrap();
    sim.clear_requests();

    let everywhere: Api<ConfigMap> = Api::all(client.clone());
    let e = everywhere.get("x").await.unwrap_err();
    assert!(
        matches!(
            &e,
            Error::InvalidName {
                what: "namespace",
                ..
            }
        ),
        "{e}"
    );
    let e = everywhere.create(&configmap("x", "1")).await.unwrap_err();
    assert!(
        matches!(
            &e,
            Error::InvalidName {
                what: "namespace",
                ..
            }
        ),
        "{e}"
    );

    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for bad in ["", ".", "..", "a/b"] {
        let e = api.delete(bad, None).await.unwrap_err();
        assert!(
            matches!(&e, Error::InvalidName { what: "name", .. }),
            "{bad:?}: {e}"
        );
    }

    let meta = Api::<PartialObjectMetadata>::metadata(
        client,
        &ApiResource::new("", "v1", "ConfigMap", "configmaps", Scope::Namespaced),
        Some("default"),
    );
    let e = meta.delete("x", None).await.unwrap_err();
    assert!(matches!(&e, Error::InvalidRequest { .. }), "{e}");
    assert!(sim.requests().is_empty(), "{:?}", sim.requests());
}

#[tokio::test]
async fn a_metadata_only_api_gets_metadata() {
    let sim = sim(SimConfig::default()).await;
    let client = Client::new(config_of(&sim)).unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(&configmap("m", "1"))
        .await
        .unwrap();
    let meta = Api::<PartialObjectMetadata>::metadata(
        client,
        &ApiResource::of::<ConfigMap>(),
        Some("default"),
    );
    let got = meta.get("m").await.unwrap();
    assert_eq!(got.metadata.name.as_deref(), Some("m"));
}

/// Writes go the way reads go: TLS, a bearer token, a retry with fresh credentials after a 401
/// (which sends the body again), and server failures mapped to retryable errors.
#[tokio::test]
async fn writes_share_the_request_path_of_reads() {
    let sim = sim(SimConfig {
        tls: true,
        auth: Auth::BearerToken("token-1".into()),
        ..SimConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "token-1\n").unwrap();
    let mut config = config_of(&sim);
    config.auth = AuthConfig::TokenFile(token.clone());
    let api: Api<ConfigMap> = Api::namespaced(Client::new(config).unwrap(), "default");
    api.create(&configmap("a", "1")).await.unwrap();

    // The token rotates: the cached one is refused once, the write goes through with the new.
    sim.set_auth(Auth::BearerToken("token-2".into()));
    std::fs::write(&token, "token-2\n").unwrap();
    let created = api.create(&configmap("b", "2")).await.unwrap();
    assert_eq!(api.get("b").await.unwrap(), created);

    sim.faults().fail_next(RequestKind::Any, 503, 1, Some(2));
    let e = api.delete("b", None).await.unwrap_err();
    assert!(matches!(e, Error::ServerError { code: 503, .. }), "{e}");
    assert!(e.is_retryable());
    api.delete("b", None).await.unwrap();
}
