//! A controller and its test in one program, against the simulated API server in-process.
//!
//! The controller counts pods by phase from its informer's cache after every change. The test
//! starts a server, seeds pods, throttles the controller's first request, then cuts its watch
//! mid-line and compacts history under it while pods change, and checks after each step that
//! the controller's counts match the server's. It prints each check and exits 0 when all pass.
//!
//! `cargo run -p kinformer-sim --example controller_test`

use std::collections::BTreeMap;
use std::error::Error;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer::client::{Client, Config};
use kinformer::prelude::*;
use kinformer_sim::{RequestKind, SimConfig, SimServer, Store};
use serde_json::json;
use tokio::sync::watch;

/// The bound on every wait.
const WAIT: Duration = Duration::from_secs(10);

/// Pods by `status.phase`.
type Counts = BTreeMap<String, usize>;

fn phase_counts<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Counts {
    let mut counts = Counts::new();
    for pod in pods {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        *counts
            .entry(phase.unwrap_or("Unknown").to_owned())
            .or_default() += 1;
    }
    counts
}

/// The controller: after every change it counts the pods in its cache, and publishes the
/// counts. It knows the API server only by its URL.
fn start_controller(url: &str) -> Result<(Factory, watch::Receiver<Counts>), Box<dyn Error>> {
    let factory = Factory::new(Client::new(Config::new(url))?);
    let pods = factory.informer::<Pod>();
    let (published, counts) = watch::channel(Counts::new());
    let lister = pods.lister();
    let publish = Arc::new(move || {
        let cached = lister.list(&LabelSelector::everything());
        published.send_replace(phase_counts(cached.iter().map(|p| &**p)));
    });
    let (added, updated, deleted) = (publish.clone(), publish.clone(), publish);
    pods.add_handler(
        HandlerFns::new()
            .on_add(move |_: &Arc<Pod>, _| added())
            .on_update(move |_, _: &Arc<Pod>| updated())
            .on_delete(move |_: &DeltaObject<Pod>| deleted()),
    )?;
    factory.start();
    Ok((factory, counts))
}

/// Waits until the controller's counts are the server's, and says so.
async fn converged(
    step: &str,
    store: &Store,
    counts: &mut watch::Receiver<Counts>,
) -> Result<(), Box<dyn Error>> {
    let pods = store.list_typed::<Pod>(None).map_err(|s| s.message)?;
    let expected = phase_counts(&pods);
    let caught_up = matches!(
        tokio::time::timeout(WAIT, counts.wait_for(|c| *c == expected)).await,
        Ok(Ok(_))
    );
    if !caught_up {
        return Err(
            format!("{step}: the controller did not count {expected:?} within {WAIT:?}").into(),
        );
    }
    println!("ok: {step}: the controller counts {expected:?}");
    Ok(())
}

/// The first pod of the store, as (namespace, name).
fn first_pod(store: &Store) -> Result<(String, String), Box<dyn Error>> {
    let pods = store.list_typed::<Pod>(None).map_err(|s| s.message)?;
    let meta = &pods.first().ok_or("no pods")?.metadata;
    Ok((
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    ))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let sim = SimServer::start(SimConfig::default()).await?;
    let store = sim.store();
    store.seed_pods(30, 7);

    // The controller's first request is answered 429 Too Many Requests: it must retry.
    sim.faults().fail_next(RequestKind::Any, 429, 1, None);
    let (factory, mut counts) = start_controller(&sim.url())?;
    if !factory.wait_synced(Some(WAIT)).await {
        return Err("the controller did not sync".into());
    }
    converged("after a 429", &store, &mut counts).await?;
    let requests = sim.requests();
    if requests.len() < 2 || requests[0].path != requests[1].path {
        return Err(format!("the throttled request was not retried: {requests:#?}").into());
    }

    // The next event line is cut in half and the connection dropped: the controller must
    // reconnect and resume where it was.
    sim.wait_until_watches_reach(store.resource_version(), WAIT)
        .await?;
    sim.faults().cut_next_watch_mid_line();
    let (namespace, name) = first_pod(&store)?;
    store
        .patch_typed::<Pod>(
            Some(namespace.as_str()),
            &name,
            json!({"status": {"phase": "Failed"}}),
        )
        .map_err(|s| s.message)?;
    converged("after a watch cut mid-line", &store, &mut counts).await?;

    // Every watch is closed, a pod deleted and history compacted: a watch resumed from before
    // the compaction answers 410 Gone and the controller lists again. Either way it must see
    // the delete.
    sim.wait_until_watches_reach(store.resource_version(), WAIT)
        .await?;
    sim.faults().close_all_watches_now();
    store
        .delete_typed::<Pod>(Some(namespace.as_str()), &name)
        .map_err(|s| s.message)?;
    sim.faults().compact_now();
    converged("after a 410 and a relist", &store, &mut counts).await?;

    factory.shutdown().await;
    sim.shutdown().await;
    println!("ok: every check passed");
    Ok(())
}
