//! A controller tested against the simulated API server: seed it, point the controller at it,
//! inject a fault, wait, and assert on what the controller did and on the requests it made.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinformer::client::{Client, Config};
use kinformer::prelude::*;
use kinformer_sim::{SimConfig, SimServer};
use tokio::sync::mpsc;

/// The bound on every wait: a test that fails, fails within it.
const WAIT: Duration = Duration::from_secs(10);

/// What the controller reports after each reconcile: a ConfigMap's key and its greeting, or
/// `None` once the ConfigMap is gone. A real controller would act on the cluster instead.
type Report = (String, Option<String>);

/// The controller under test: an informer on ConfigMaps whose handlers reconcile every change.
/// It takes the API server's URL, as it would take a kubeconfig.
fn start_controller(
    url: &str,
) -> Result<(Factory, mpsc::UnboundedReceiver<Report>), Box<dyn std::error::Error>> {
    let factory = Factory::new(Client::new(Config::new(url))?);
    let (reports, received) = mpsc::unbounded_channel();
    let (added, updated, deleted) = (reports.clone(), reports.clone(), reports);
    factory.informer::<ConfigMap>().add_handler(
        HandlerFns::new()
            .on_add(move |cm: &Arc<ConfigMap>, _| {
                let _ = added.send(reconcile(cm));
            })
            .on_update(move |_, cm: &Arc<ConfigMap>| {
                let _ = updated.send(reconcile(cm));
            })
            .on_delete(move |cm: &DeltaObject<ConfigMap>| {
                let _ = deleted.send((cm.key().to_string(), None));
            }),
    )?;
    factory.start();
    Ok((factory, received))
}

fn reconcile(cm: &ConfigMap) -> Report {
    let greeting = cm.data.as_ref().and_then(|d| d.get("greeting")).cloned();
    (cm.key().to_string(), greeting)
}

fn configmap(namespace: &str, name: &str, greeting: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            namespace: Some(namespace.to_owned()),
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some([("greeting".to_owned(), greeting.to_owned())].into()),
        ..ConfigMap::default()
    }
}

/// Waits for the controller to report `expected`, passing over other reports (a relist
/// reconciles every object again).
async fn expect_report(reports: &mut mpsc::UnboundedReceiver<Report>, expected: Report) {
    let found = tokio::time::timeout(WAIT, async {
        while let Some(report) = reports.recv().await {
            if report == expected {
                return true;
            }
        }
        false
    });
    assert!(
        found.await.unwrap_or(false),
        "the controller did not report {expected:?} within {WAIT:?}"
    );
}

fn report(key: &str, greeting: Option<&str>) -> Report {
    (key.to_owned(), greeting.map(str::to_owned))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_follows_every_change_through_a_410() {
    // Start the server in-process and seed it with typed objects.
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let store = sim.store();
    store
        .create_typed(&configmap("shop", "front", "hello"))
        .unwrap();

    // Point the controller at the server: its first list brings the seeded object.
    let (factory, mut reports) = start_controller(&sim.url()).unwrap();
    assert!(factory.wait_synced(Some(WAIT)).await);
    expect_report(&mut reports, report("shop/front", Some("hello"))).await;

    // Its watch is open and has been sent everything written so far.
    let written = store.resource_version();
    sim.wait_until_watches_reach(written, WAIT).await.unwrap();

    // The server ends every open watch and answers the next one with 410 Gone: the controller
    // must list again, and must not miss the change made meanwhile.
    sim.faults().gone_next_watch();
    sim.faults().close_all_watches_now();
    let mut front: ConfigMap = store.get_typed(Some("shop"), "front").unwrap();
    front.data = Some([("greeting".to_owned(), "bonjour".to_owned())].into());
    store.update_typed(&front).unwrap();
    expect_report(&mut reports, report("shop/front", Some("bonjour"))).await;

    // Deletes reach it too, through its new watch.
    store
        .delete_typed::<ConfigMap>(Some("shop"), "front")
        .unwrap();
    expect_report(&mut reports, report("shop/front", None)).await;

    // The requests it made: it listed again after the 410 (a plain list, or a streaming list,
    // which is a watch that starts with the current objects), and every watch asked for
    // bookmarks.
    let requests = sim.requests();
    assert!(
        requests
            .iter()
            .all(|r| r.method == "GET" && r.path == "/api/v1/configmaps")
    );
    let lists = requests
        .iter()
        .filter(|r| !r.is_watch() || r.param("sendInitialEvents") == Some("true"))
        .count();
    assert!(lists >= 2, "{requests:#?}");
    assert!(
        requests
            .iter()
            .filter(|r| r.is_watch())
            .all(|r| r.param("allowWatchBookmarks") == Some("true"))
    );

    factory.shutdown().await;
    sim.shutdown().await;
}
