//! The informer's life with no reflector at all: fed by a hand-made stream of store events, it
//! stores and tells; once shut down it refuses new handlers; and every wait for its sync ends
//! when it does.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt as _, stream};
use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{CacheRead, Object, StoreEvent};
use kinformer_delta_fifo::DeltaFifo;
use kinformer_indexer::Indexer;
use kinformer_shared_informer::{
    Error, HasSynced, InformerConfig, SharedIndexInformer, wait_for_cache_sync,
};
use kinformer_test_support::{Heard, Recorder};
use tokio::sync::mpsc;

type Informer = SharedIndexInformer<Pod, DeltaFifo<Pod>, Indexer<Pod>>;

fn pod(name: &str, version: u64) -> Arc<Pod> {
    let mut p = Pod::default();
    p.metadata.name = Some(name.to_owned());
    p.metadata.namespace = Some("ns".to_owned());
    p.metadata.uid = Some(format!("uid-{name}"));
    p.metadata.resource_version = Some(version.to_string());
    Arc::new(p)
}

fn informer(
    events: impl futures_core::Stream<Item = StoreEvent<Pod>> + Send + 'static,
) -> Arc<Informer> {
    let cache = Arc::new(Indexer::<Pod>::new());
    let queue = Arc::new(DeltaFifo::new(cache.clone()));
    let config = InformerConfig {
        name: "hand-made".into(),
        ..InformerConfig::default()
    };
    Arc::new(SharedIndexInformer::new(events, queue, cache, config))
}

/// Writes down every call, one line each: `add key rv initial`, `update key rv>rv`,
/// `delete key`, `tombstone key`.
fn recorder() -> Recorder<Pod> {
    Recorder::with_format(|heard: &Heard<'_, Pod>| match heard {
        Heard::Delete(o) => format!("{} {}", heard.verb(), o.key()),
        other => other.to_string(),
    })
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for {what}");
}

fn cached(informer: &Informer) -> Vec<String> {
    let mut out = Vec::new();
    informer.cache().for_each(&mut |p: &Arc<Pod>| {
        out.push(format!("{} {}", p.key(), p.resource_version().unwrap()));
    });
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_runs_from_a_hand_made_stream_of_store_events() {
    let (tx, mut rx) = mpsc::unbounded_channel::<StoreEvent<Pod>>();
    let informer = informer(stream::poll_fn(move |cx| rx.poll_recv(cx)));
    let lines = recorder();
    let registration = informer.add_handler(lines.clone()).unwrap();
    let run = tokio::spawn({
        let informer = Arc::clone(&informer);
        async move { informer.run().await }
    });

    // The first list: the informer is synced at its end, and the handler hears it as initial.
    for event in [
        StoreEvent::RelistBegin,
        StoreEvent::RelistPage(vec![pod("a", 1)]),
        StoreEvent::RelistPage(vec![pod("b", 2)]),
        StoreEvent::RelistEnd("2".into()),
    ] {
        tx.send(event).unwrap();
    }
    assert!(informer.wait_synced().await);
    assert_eq!(cached(&informer), ["ns/a 1", "ns/b 2"]);
    assert_eq!(informer.last_sync_resource_version().unwrap().as_str(), "2");

    // Watch events and a bookmark.
    for event in [
        StoreEvent::Modified(pod("a", 3)),
        StoreEvent::Deleted(pod("b", 4)),
        StoreEvent::Bookmark("5".into()),
    ] {
        tx.send(event).unwrap();
    }
    eventually("the bookmark", || {
        informer
            .last_sync_resource_version()
            .is_some_and(|v| v.as_str() == "5")
    })
    .await;
    // The version is the producer's, set when the bookmark is queued; the consumer applies the
    // events before it on its own.
    eventually("the events applied", || cached(&informer) == ["ns/a 3"]).await;
    assert_eq!(cached(&informer), ["ns/a 3"]);

    // A relist that lacks `a`: a tombstone, and the new object.
    for event in [
        StoreEvent::RelistBegin,
        StoreEvent::RelistPage(vec![pod("c", 6)]),
        StoreEvent::RelistEnd("6".into()),
    ] {
        tx.send(event).unwrap();
    }
    eventually("the relist", || lines.lines().len() == 6).await;
    assert_eq!(cached(&informer), ["ns/c 6"]);
    assert_eq!(
        lines.lines(),
        [
            "add ns/a 1 true",
            "add ns/b 2 true",
            "update ns/a 1>3",
            "delete ns/b",
            "tombstone ns/a",
            "add ns/c 6 false",
        ]
    );

    // The source ends: the cache stays as it is, and the informer serves it until shut down.
    drop(tx);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!run.is_finished());
    assert_eq!(cached(&informer), ["ns/c 6"]);
    drop(registration);
    informer.shutdown().await;
    run.await.unwrap();
}

#[tokio::test]
async fn a_handler_added_after_shutdown_is_refused() {
    let list = stream::iter([
        StoreEvent::RelistBegin,
        StoreEvent::RelistPage(vec![pod("a", 1)]),
        StoreEvent::RelistEnd("1".into()),
    ]);
    let informer = informer(list.chain(stream::pending()));
    let run = tokio::spawn({
        let informer = Arc::clone(&informer);
        async move { informer.run().await }
    });
    assert!(informer.wait_synced().await);
    informer.shutdown().await;
    run.await.unwrap();
    let refused = Error::Stopped {
        informer: "hand-made".into(),
    };
    assert_eq!(informer.add_handler(recorder()).unwrap_err(), refused);
    assert_eq!(
        informer
            .add_handler_with_resync(recorder(), Some(Duration::from_secs(5)))
            .unwrap_err(),
        refused
    );
    assert_eq!(informer.event_stream().unwrap_err(), refused);
    assert!(refused.to_string().contains("shut down"), "{refused}");

    // Shut down before it ever ran: refused as well.
    let never_ran = self::informer(stream::pending());
    never_ran.shutdown().await;
    assert!(never_ran.add_handler(recorder()).is_err());
}

#[tokio::test]
async fn waits_for_sync_end_with_false_when_the_informer_is_shut_down() {
    // A source that never lists: nothing would ever sync.
    let informer = informer(stream::pending());
    let run = tokio::spawn({
        let informer = Arc::clone(&informer);
        async move { informer.run().await }
    });
    let waits = tokio::spawn({
        let informer = Arc::clone(&informer);
        async move {
            let all = wait_for_cache_sync(&[&*informer], None).await;
            let one = HasSynced::wait_synced(&*informer).await;
            (all, one)
        }
    });
    tokio::task::yield_now().await;
    assert!(!waits.is_finished());
    informer.shutdown().await;
    let ended = tokio::time::timeout(Duration::from_secs(5), waits).await;
    assert_eq!(
        ended.expect("the waits end at shutdown").unwrap(),
        (false, false)
    );
    assert!(!informer.has_synced());
    // Asked after the shutdown, it answers at once.
    assert!(!wait_for_cache_sync(&[&*informer], None).await);
    run.await.unwrap();
}
