//! Discovery against the simulated API server over real HTTP on 127.0.0.1, and against a server
//! that accepts connections and never answers.

use std::time::Duration;

use kinformer_client::{Client, Config, Discovery, Error, Kubeconfig, KubeconfigOptions};
use kinformer_core::{ApiResource, Scope};
use kinformer_sim::{SimConfig, SimServer};

/// The bound on waiting for any one thing in these tests.
const BOUND: Duration = Duration::from_secs(10);

fn client_of(sim: &SimServer) -> Client {
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_yaml(), None).unwrap();
    Client::new(Config::from_kubeconfig(&kc, &KubeconfigOptions::default()).unwrap()).unwrap()
}

#[tokio::test]
async fn discovery_finds_built_in_and_custom_resources() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let widgets = ApiResource::new("example.com", "v1", "Widget", "widgets", Scope::Namespaced);
    sim.store().register_crd(widgets.clone());
    let client = client_of(&sim);
    let discovery = Discovery::fetch(&client, Some(BOUND)).await.unwrap();
    assert!(discovery.failed_group_versions().is_empty());
    // The core group comes first, in the server's order.
    assert_eq!(discovery.resources()[0].resource.group, "");

    let found = discovery.resolve("widgets").unwrap();
    assert_eq!(found.resource, widgets);
    assert!(found.preferred && found.supports("watch"));
    assert_eq!(found.singular, "widget");
    for name in [
        "widget",
        "Widget",
        "widgets.example.com",
        "widgets.v1.example.com",
    ] {
        assert_eq!(discovery.resolve(name).unwrap().resource, widgets, "{name}");
    }
    let deploy = discovery.resolve("deploy").unwrap();
    assert_eq!(
        (
            deploy.resource.group.as_str(),
            deploy.resource.kind.as_str()
        ),
        ("apps", "Deployment")
    );
    let nodes = discovery.resolve("no").unwrap();
    assert_eq!(nodes.resource.scope, Scope::Cluster);
    assert!(discovery.resolve("foo").is_none());
    assert!(discovery.resolve("widgets.example.org").is_none());
}

#[tokio::test]
async fn discovery_of_a_server_that_never_answers_times_out() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accept connections, read nothing, answer nothing, until the test ends.
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            open.push(conn);
        }
    });
    let client = Client::new(Config::new(format!("http://127.0.0.1:{port}"))).unwrap();
    let limit = Duration::from_millis(300);
    let result = tokio::time::timeout(BOUND, Discovery::fetch(&client, Some(limit)))
        .await
        .expect("discovery ends within its own bound");
    match result {
        Err(Error::Timeout {
            waiting_for,
            limit: hit,
        }) => {
            assert_eq!(waiting_for, "the discovery documents");
            assert_eq!(hit, limit);
        }
        other => panic!("{other:?}"),
    }
    held.abort();
}

#[tokio::test]
async fn discovery_reports_a_refused_connection() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = Client::new(Config::new(format!("http://127.0.0.1:{port}"))).unwrap();
    let result = tokio::time::timeout(BOUND, Discovery::fetch(&client, Some(BOUND)))
        .await
        .unwrap();
    assert!(matches!(result, Err(Error::Connect { .. })), "{result:?}");
}
