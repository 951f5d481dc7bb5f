//! `kinformer-sim` used from a crate outside its workspace: start the server, seed pods, list
//! them over plain HTTP, write typed objects, inject a fault and wait for a watch.

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer_sim::{RequestKind, SimConfig, SimServer};
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// The bound on every wait.
const WAIT: Duration = Duration::from_secs(10);

/// A `GET` over HTTP/1.0, the plainest client there is: the server closes the connection after
/// the body. Answers the status code and the JSON body.
async fn get(addr: SocketAddr, path: &str) -> (u16, Value) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.0\r\nAccept: application/json\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut response))
        .await
        .expect("a whole response within the bound")
        .unwrap();
    let response = String::from_utf8(response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, serde_json::from_str(body).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kit_works_from_outside_the_workspace() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let store = sim.store();
    store.seed_pods(5, 42);

    // Listed over HTTP, the seeded pods are all there.
    let (code, list) = get(sim.addr(), "/api/v1/pods").await;
    assert_eq!(code, 200);
    assert_eq!(list["items"].as_array().unwrap().len(), 5);
    assert_eq!(store.list_typed::<Pod>(None).unwrap().len(), 5);

    // A typed write is served over HTTP as written.
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("settings".into());
    cm.data = Some([("mode".to_owned(), "fast".to_owned())].into());
    let stored = store.create_typed(&cm).unwrap();
    let (code, got) = get(sim.addr(), "/api/v1/namespaces/default/configmaps/settings").await;
    assert_eq!(code, 200);
    assert_eq!(got["data"]["mode"], "fast");
    assert_eq!(
        got["metadata"]["resourceVersion"].as_str(),
        stored.metadata.resource_version.as_deref()
    );

    // A fault: the next request answers 503 with a Status, the one after succeeds.
    sim.faults().fail_next(RequestKind::Any, 503, 1, None);
    let (code, status) = get(sim.addr(), "/api/v1/pods").await;
    assert_eq!((code, status["kind"].as_str()), (503, Some("Status")));
    assert_eq!(get(sim.addr(), "/api/v1/pods").await.0, 200);

    // A watch, opened and never read: the server has sent it everything written so far.
    let mut watch = TcpStream::connect(sim.addr()).await.unwrap();
    watch
        .write_all(b"GET /api/v1/pods?watch=true HTTP/1.0\r\n\r\n")
        .await
        .unwrap();
    sim.wait_until_watches_reach(store.resource_version(), WAIT)
        .await
        .unwrap();

    // The request log holds what was asked, in order.
    let requests = sim.requests();
    assert_eq!(requests.len(), 5);
    assert!(requests[4].is_watch());
    sim.shutdown().await;
}
