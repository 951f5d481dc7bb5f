//! Discovery against the simulated API server over real HTTP on 127.0.0.1, and against a server
//! that accepts connections and never answers.

use kinformer_test_support::read_request_head;
use std::time::Duration;

use kinformer_client::{
    Client, Config, Discovery, DiscoveryOptions, Error, Kubeconfig, KubeconfigOptions,
};
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

/// The paths of the discovery requests a sim received (`/api...`, `/apis...` without a
/// resource below a group version).
fn discovery_paths(sim: &SimServer) -> Vec<String> {
    let mut paths: Vec<String> = sim
        .requests()
        .into_iter()
        .map(|r| r.path)
        .filter(|p| p == "/api" || p == "/apis" || p.split('/').count() <= 4)
        .collect();
    paths.sort();
    paths
}

#[tokio::test]
async fn aggregated_discovery_takes_two_requests() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let widgets = ApiResource::new("example.com", "v1", "Widget", "widgets", Scope::Namespaced);
    sim.store().register_crd(widgets.clone());
    let client = client_of(&sim);
    sim.clear_requests();
    let discovery = Discovery::fetch(&client, Some(BOUND)).await.unwrap();
    // `/api` and `/apis` answered with every group's resources: no request per group version.
    assert_eq!(discovery_paths(&sim), ["/api", "/apis"]);
    assert!(discovery.failures().is_empty());
    assert_eq!(discovery.resolve("widgets").unwrap().resource, widgets);
    let pods = discovery.resolve("po").unwrap();
    assert_eq!(
        (
            pods.resource.group.as_str(),
            pods.resource.kind.as_str(),
            pods.singular.as_str()
        ),
        ("", "Pod", "pod")
    );
    assert!(pods.categories.contains(&"all".to_owned()), "{pods:?}");
    assert_eq!(
        discovery.resolve("no").unwrap().resource.scope,
        Scope::Cluster
    );
    assert_eq!(discovery.resources()[0].resource.group, "");
    // Subresources are not types.
    assert!(
        discovery
            .resources()
            .iter()
            .all(|r| !r.resource.plural.contains('/'))
    );
}

/// One GET over a fresh connection: the status code, the headers (names in lower case) and the
/// body as JSON (`null` when empty).
async fn raw_get(
    addr: std::net::SocketAddr,
    path: &str,
    headers: Vec<(&str, String)>,
) -> (u16, Vec<(String, String)>, serde_json::Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(BOUND, conn.read_to_end(&mut raw))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let code = lines
        .next()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let body = if body.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_str(body).unwrap()
    };
    (code, headers, body)
}

fn header(headers: &[(String, String)], name: &str) -> String {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

/// The sim negotiates aggregated discovery as the apiserver does.
#[tokio::test]
async fn the_sim_serves_aggregated_discovery_only_when_asked() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let addr = sim.addr();
    let get = |path: &'static str, accept: &'static str| {
        raw_get(addr, path, vec![("Accept", accept.to_owned())])
    };
    const V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let (code, headers, doc) = get(
        "/apis",
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
    )
    .await;
    assert_eq!(code, 200);
    let ct = header(&headers, "content-type");
    let etag = headers
        .iter()
        .find(|(k, _)| k == "etag")
        .map(|(_, v)| v.clone());
    assert_eq!(ct, V2);
    assert_eq!(doc["kind"], "APIGroupDiscoveryList");
    assert_eq!(doc["apiVersion"], "apidiscovery.k8s.io/v2");
    let apps = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "apps")
        .unwrap();
    let deploy = apps["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "deployments")
        .unwrap();
    assert_eq!(deploy["responseKind"]["kind"], "Deployment");
    assert_eq!(deploy["scope"], "Namespaced");
    assert_eq!(deploy["shortNames"][0], "deploy");
    assert_eq!(apps["versions"][0]["freshness"], "Current");
    let etag = etag.expect("an ETag");
    assert_eq!(header(&headers, "vary"), "Accept");
    // The same document again is 304 with its ETag.
    let (code, _, _) = raw_get(
        addr,
        "/apis",
        vec![("Accept", V2.to_owned()), ("If-None-Match", etag)],
    )
    .await;
    assert_eq!(code, 304);
    let (_, _, core) = get("/api", V2).await;
    assert_eq!(core["items"][0]["versions"][0]["version"], "v1");
    assert!(core["items"][0]["metadata"].get("name").is_none());
    // The beta, still served by 1.34; plain JSON first means the plain document.
    let (_, headers, _) = get(
        "/apis",
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
    )
    .await;
    let ct = header(&headers, "content-type");
    assert!(ct.contains("v=v2beta1"), "{ct}");
    for plain in [
        "application/json",
        "application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        "*/*",
        "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json",
    ] {
        let (_, headers, doc) = get("/apis", plain).await;
        assert_eq!(
            header(&headers, "content-type"),
            "application/json",
            "{plain}"
        );
        assert_eq!(doc["kind"], "APIGroupList", "{plain}");
    }
}

/// A server without aggregated discovery (it ignores the Accept parameters) whose
/// `hung.example.com/v1` never answers, and whose `broken.example.com/v1` answers 503. Counts
/// the requests for each path.
async fn server_with_a_hung_group() -> (u16, std::sync::Arc<parking_lot::Mutex<Vec<String>>>) {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let log = std::sync::Arc::clone(&log);
            tokio::spawn(async move {
                loop {
                    let Some(head) = read_request_head(&mut conn).await else {
                        return;
                    };
                    let path = head.target().to_owned();
                    log.lock().push(path.clone());
                    let (code, body) = match path.as_str() {
                        "/api" => (200, r#"{"kind":"APIVersions","versions":["v1"]}"#.to_owned()),
                        "/apis" => (200, r#"{"kind":"APIGroupList","groups":[
                            {"name":"example.com","versions":[{"groupVersion":"example.com/v1","version":"v1"}]},
                            {"name":"hung.example.com","versions":[{"groupVersion":"hung.example.com/v1","version":"v1"}]},
                            {"name":"broken.example.com","versions":[{"groupVersion":"broken.example.com/v1","version":"v1"}]}]}"#.to_owned()),
                        "/api/v1" => (200, r#"{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["list","watch"],"shortNames":["po"]}]}"#.to_owned()),
                        "/apis/example.com/v1" => (200, r#"{"kind":"APIResourceList","groupVersion":"example.com/v1","resources":[{"name":"widgets","singularName":"widget","namespaced":true,"kind":"Widget","verbs":["list","watch"]}]}"#.to_owned()),
                        "/apis/broken.example.com/v1" => (503, r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server is currently unable to handle the request","reason":"ServiceUnavailable","code":503}"#.to_owned()),
                        _ => {
                            // hung.example.com: never answered.
                            std::future::pending::<()>().await;
                            return;
                        }
                    };
                    let reason = if code == 200 {
                        "OK"
                    } else {
                        "Service Unavailable"
                    };
                    let response = format!(
                        "HTTP/1.1 {code} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if conn.write_all(response.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, seen)
}

#[tokio::test]
async fn one_hung_group_fails_alone_and_the_others_resolve() {
    let (port, _seen) = server_with_a_hung_group().await;
    let client = Client::new(Config::new(format!("http://127.0.0.1:{port}"))).unwrap();
    let options = DiscoveryOptions {
        timeout: Some(BOUND),
        group_timeout: Some(Duration::from_millis(500)),
        ..DiscoveryOptions::default()
    };
    let discovery = tokio::time::timeout(BOUND, Discovery::fetch_with(&client, &options))
        .await
        .expect("bounded by the group's bound")
        .unwrap();
    assert_eq!(
        discovery.resolve("widgets").unwrap().resource.group,
        "example.com"
    );
    assert_eq!(discovery.resolve("po").unwrap().resource.plural, "pods");
    let mut failed: Vec<String> = discovery
        .failures()
        .iter()
        .map(ToString::to_string)
        .collect();
    failed.sort();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(
        failed[0].starts_with("couldn't get resource list for broken.example.com/v1: ")
            && failed[0].contains("the server is currently unable to handle the request"),
        "{failed:?}"
    );
    assert!(
        failed[1].starts_with("couldn't get resource list for hung.example.com/v1: ")
            && failed[1].contains("timed out"),
        "{failed:?}"
    );
}

#[tokio::test]
async fn discovery_is_cached_on_disk_like_kubectl() {
    let (port, seen) = server_with_a_hung_group().await;
    let client = Client::new(Config::new(format!("http://127.0.0.1:{port}"))).unwrap();
    let root = tempfile::tempdir().unwrap();
    let dir = DiscoveryOptions::cache_dir_for(root.path(), client.url());
    assert_eq!(
        dir,
        root.path()
            .join("discovery")
            .join(format!("127.0.0.1_{port}"))
    );
    let options = DiscoveryOptions {
        timeout: Some(BOUND),
        group_timeout: Some(Duration::from_millis(300)),
        cache_dir: Some(dir.clone()),
        ..DiscoveryOptions::default()
    };
    let first = Discovery::fetch_with(&client, &options).await.unwrap();
    assert!(!first.from_cache());
    // kubectl's layout; nothing for the group versions that failed.
    for file in [
        "servergroups.json",
        "v1/serverresources.json",
        "example.com/v1/serverresources.json",
    ] {
        assert!(dir.join(file).is_file(), "{file}");
    }
    assert!(!dir.join("hung.example.com").exists());
    let groups: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("servergroups.json")).unwrap()).unwrap();
    assert_eq!(groups["kind"], "APIGroupList");
    assert_eq!(groups["groups"][0]["name"], "");
    let resources: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("example.com/v1/serverresources.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(resources["groupVersion"], "example.com/v1");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("servergroups.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o007, 0, "not readable by others: {mode:o}");
    }

    // Fresh: the groups and the cached lists come from the disk; only the failed ones are asked
    // for again.
    seen.lock().clear();
    let second = Discovery::fetch_with(&client, &options).await.unwrap();
    assert!(second.from_cache());
    assert_eq!(second.resolve("widgets"), first.resolve("widgets"));
    let mut asked = seen.lock().clone();
    asked.sort();
    assert_eq!(
        asked,
        ["/apis/broken.example.com/v1", "/apis/hung.example.com/v1"]
    );

    // Past the TTL, or asked to refresh: the server again.
    for options in [
        DiscoveryOptions {
            ttl: Duration::ZERO,
            ..options.clone()
        },
        DiscoveryOptions {
            refresh: true,
            ..options.clone()
        },
    ] {
        seen.lock().clear();
        let again = Discovery::fetch_with(&client, &options).await.unwrap();
        assert!(!again.from_cache());
        assert!(seen.lock().contains(&"/apis".to_owned()));
    }
}
