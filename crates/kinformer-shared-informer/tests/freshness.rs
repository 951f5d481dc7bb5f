//! Freshness you can ask for: the version the cache has reached, a wait until it reaches one,
//! read-your-writes per key, and bookmarks handed to handlers in their place. The informer is
//! fed by a hand-made stream of store events, so each step is exactly where the test puts it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{CacheRead, Object, ResourceVersion, StoreEvent};
use kinformer_delta_fifo::{DeltaFifo, Mode};
use kinformer_indexer::Indexer;
use kinformer_shared_informer::{FreshnessError, HandlerFns, InformerConfig, SharedIndexInformer};
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

fn rv(s: &str) -> ResourceVersion {
    ResourceVersion::from(s)
}

struct Rig {
    informer: Arc<Informer>,
    tx: mpsc::UnboundedSender<StoreEvent<Pod>>,
    run: tokio::task::JoinHandle<()>,
}

/// An informer fed by a channel, its queue in `mode`, listed at version 5 with one pod.
async fn rig(mode: Mode) -> Rig {
    rig_with(mode, false).await
}

/// As [`rig`], for a source that merges several watches when `merged`.
async fn rig_with(mode: Mode, merged: bool) -> Rig {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let events = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let cache = Arc::new(Indexer::<Pod>::new());
    let queue = Arc::new(
        DeltaFifo::builder()
            .mode(mode)
            .known_objects(cache.clone())
            .build()
            .unwrap(),
    );
    let config = InformerConfig {
        name: "pods".into(),
        merged_source: merged,
        ..InformerConfig::default()
    };
    let informer = Arc::new(SharedIndexInformer::new(events, queue, cache, config));
    let run = tokio::spawn({
        let informer = Arc::clone(&informer);
        async move { informer.run().await }
    });
    tx.send(StoreEvent::RelistBegin).unwrap();
    tx.send(StoreEvent::RelistPage(vec![pod("a", 3)])).unwrap();
    tx.send(StoreEvent::RelistEnd(rv("5"))).unwrap();
    assert!(informer.wait_synced().await);
    Rig { informer, tx, run }
}

impl Rig {
    async fn stop(self) {
        self.informer.shutdown().await;
        self.run.await.unwrap();
    }
}

/// Lets the informer's tasks run until nothing more happens (the tests run on one thread).
async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn the_wait_ends_only_once_the_cache_holds_the_version() {
    let r = rig(Mode::InOrder).await;
    assert_eq!(r.informer.cache_resource_version(), Some(rv("5")));
    r.informer
        .wait_until_fresh(&rv("5"), Duration::from_secs(5))
        .await
        .unwrap();

    let wait = tokio::spawn({
        let informer = Arc::clone(&r.informer);
        async move {
            informer
                .wait_until_fresh(&rv("7"), Duration::from_secs(30))
                .await?;
            // What the cache holds the moment the wait ends.
            Ok::<_, FreshnessError>(
                informer
                    .cache()
                    .get_by_key("ns/b")
                    .map(|p| p.resource_version().unwrap().to_owned()),
            )
        }
    });
    settle().await;
    assert!(!wait.is_finished());
    r.tx.send(StoreEvent::Added(pod("b", 6))).unwrap();
    settle().await;
    assert!(!wait.is_finished(), "the cache is at 6, not 7");
    assert_eq!(r.informer.cache_resource_version(), Some(rv("6")));
    r.tx.send(StoreEvent::Modified(pod("b", 7))).unwrap();
    assert_eq!(wait.await.unwrap().unwrap().as_deref(), Some("7"));
    r.stop().await;
}

#[tokio::test]
async fn a_bookmark_moves_the_cache_version_and_reaches_each_handler_after_the_changes_before_it() {
    let r = rig(Mode::InOrder).await;
    let heard = Arc::new(Mutex::new(Vec::new()));
    let log = |heard: &Arc<Mutex<Vec<String>>>| {
        let (a, b) = (Arc::clone(heard), Arc::clone(heard));
        HandlerFns::<Pod>::new()
            .on_update(move |_, new| {
                a.lock()
                    .unwrap()
                    .push(format!("update {}", new.resource_version().unwrap()))
            })
            .on_bookmark(move |rv| b.lock().unwrap().push(format!("bookmark {rv}")))
    };
    let registration = r.informer.add_handler(log(&heard)).unwrap();
    r.tx.send(StoreEvent::Modified(pod("a", 8))).unwrap();
    r.tx.send(StoreEvent::Bookmark(rv("12"))).unwrap();
    r.informer
        .wait_until_fresh(&rv("12"), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(r.informer.cache_resource_version(), Some(rv("12")));
    for _ in 0..2000 {
        if registration.backlog() == 0 && heard.lock().unwrap().len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let heard = heard.lock().unwrap().clone();
    // The replay of the cache (a pod at 3) comes as an add, not logged here.
    assert_eq!(heard, ["update 8", "bookmark 12"]);
    r.stop().await;
}

#[tokio::test]
async fn opaque_versions_late_caches_and_stopped_informers_are_errors() {
    let r = rig(Mode::InOrder).await;
    let opaque = r
        .informer
        .wait_until_fresh(&rv("abc"), Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(
        matches!(opaque, FreshnessError::NotComparable(_)),
        "{opaque}"
    );

    tokio::time::pause();
    let late = r
        .informer
        .wait_until_fresh(&rv("9"), Duration::from_secs(3))
        .await
        .unwrap_err();
    let FreshnessError::Timeout {
        wanted,
        reached,
        waited,
        ..
    } = &late
    else {
        panic!("{late}");
    };
    assert_eq!((wanted.as_str(), reached.as_str()), ("9", "5"));
    assert_eq!(*waited, Duration::from_secs(3));
    assert!(
        late.to_string()
            .contains("did not reach resource version 9")
    );
    tokio::time::resume();

    let stopped = tokio::spawn({
        let informer = Arc::clone(&r.informer);
        async move {
            informer
                .wait_until_fresh(&rv("9"), Duration::from_secs(60))
                .await
        }
    });
    settle().await;
    r.informer.shutdown().await;
    assert!(matches!(
        stopped.await.unwrap(),
        Err(FreshnessError::Stopped { .. })
    ));
    r.run.await.unwrap();
}

#[tokio::test]
async fn the_classic_queue_moves_the_version_when_it_is_empty() {
    let r = rig(Mode::Classic).await;
    assert_eq!(r.informer.cache_resource_version(), Some(rv("5")));
    r.tx.send(StoreEvent::Added(pod("b", 6))).unwrap();
    r.informer
        .wait_until_fresh(&rv("6"), Duration::from_secs(5))
        .await
        .unwrap();
    // A bookmark into an empty classic queue: the cache holds everything up to it.
    r.tx.send(StoreEvent::Bookmark(rv("10"))).unwrap();
    r.informer
        .wait_until_fresh(&rv("10"), Duration::from_secs(5))
        .await
        .unwrap();
    r.stop().await;
}

#[tokio::test]
async fn a_write_is_fresh_once_the_cache_shows_it_and_a_deleted_key_is_forgotten() {
    let r = rig(Mode::InOrder).await;
    let fresh = r.informer.freshness();
    assert_eq!(fresh.is_fresh("ns/a"), Ok(true), "nothing written");

    // Our write of ns/a returned 20; another write of ns/z (ours too) 21.
    fresh.wrote("ns/a", rv("20"));
    fresh.wrote("ns/z", rv("21"));
    assert_eq!(fresh.is_fresh("ns/a"), Ok(false));
    let waiting = tokio::spawn({
        let fresh = fresh.clone();
        async move { fresh.wait_fresh("ns/a", Duration::from_secs(30)).await }
    });
    settle().await;
    assert!(!waiting.is_finished());
    // Other changes before ours do not make it fresh.
    r.tx.send(StoreEvent::Added(pod("b", 19))).unwrap();
    settle().await;
    assert!(!waiting.is_finished());
    assert_eq!(fresh.is_fresh("ns/a"), Ok(false));
    r.tx.send(StoreEvent::Modified(pod("a", 20))).unwrap();
    waiting.await.unwrap().unwrap();
    assert_eq!(fresh.is_fresh("ns/a"), Ok(true));

    // ns/z is deleted by someone else before our write shows: forgotten, hence fresh.
    r.tx.send(StoreEvent::Added(pod("z", 21))).unwrap();
    fresh.wrote("ns/z", rv("30"));
    r.tx.send(StoreEvent::Deleted(pod("z", 22))).unwrap();
    fresh
        .wait_fresh("ns/z", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(fresh.is_fresh("ns/z"), Ok(true));

    // An opaque written version cannot be judged.
    fresh.wrote("ns/b", rv("x-1"));
    assert!(matches!(
        fresh.is_fresh("ns/b"),
        Err(FreshnessError::NotComparable(_))
    ));
    r.stop().await;
}

#[tokio::test]
async fn a_merged_sources_cache_version_moves_only_with_its_bookmarks() {
    for merged in [false, true] {
        let r = rig_with(Mode::InOrder, merged).await;
        let fresh = r.informer.freshness();
        // Our write of ns/a, in a partition whose watch lags, returned 20.
        fresh.wrote("ns/a", rv("20"));
        // Another partition's watch is further on.
        r.tx.send(StoreEvent::Added(pod("b", 30))).unwrap();
        settle().await;
        // One watch's version says nothing of the other's when the source is merged.
        assert_eq!(fresh.is_fresh("ns/a"), Ok(!merged), "merged: {merged}");
        if merged {
            // The merge's bookmark: every watch has reached 25.
            r.tx.send(StoreEvent::Bookmark(rv("25"))).unwrap();
            settle().await;
            assert_eq!(fresh.is_fresh("ns/a"), Ok(true));
        }
        r.stop().await;
    }
}
