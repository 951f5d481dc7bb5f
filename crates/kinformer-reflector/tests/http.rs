//! The reflector's rules, one test each, against the simulated API server over HTTP: each
//! asserts the requests the server saw (parameters, in order) and the final store.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kinformer_core::list_watch::ErrorKind;
use kinformer_reflector::{Config, InitialList, Phase, Reflector, StreamingList};
use kinformer_sim::RequestKind;
use support::*;

#[tokio::test]
async fn the_first_list_is_served_whole_from_the_watch_cache_then_the_watch_starts_at_its_version()
{
    // A real server's watch cache ignores `limit` at "0": one response, however many pods.
    let rig = Rig::start(1200, config()).await;
    let (sim, store, handle) = (&rig.sim, &rig.store, &rig.handle);
    eventually("the watch", || watches(sim) == 1).await;

    let listed = sim.store().resource_version().to_string();
    assert_eq!(
        pod_requests(sim),
        ["list rv=0 limit=500", &format!("watch rv={listed}")]
    );
    let watch = last_watch(sim);
    assert_eq!(watch.param("allowWatchBookmarks"), Some("true"));
    let timeout: u64 = watch.param("timeoutSeconds").unwrap().parse().unwrap();
    assert!((300..600).contains(&timeout), "timeout {timeout}");
    assert_eq!(store.log()[..3], ["begin", "page 1200", "end"]);
    assert_eq!(store.state(), server_state(sim));
    assert_eq!(
        handle.last_sync_resource_version().unwrap().as_str(),
        listed
    );
    rig.stop().await;
}

#[tokio::test]
async fn a_server_without_a_watch_cache_pages_the_first_list_and_the_watch_starts_at_its_version() {
    let rig = Rig::start_on(paging_sim().await, 1200, config(), |_| {});
    let (sim, store, handle) = (&rig.sim, &rig.store, &rig.handle);
    eventually("the watch", || watches(sim) == 1).await;

    let listed = sim.store().resource_version().to_string();
    assert_eq!(
        pod_requests(sim),
        [
            "list rv=0 limit=500",
            "list continue limit=500",
            "list continue limit=500",
            &format!("watch rv={listed}"),
        ]
    );
    assert_eq!(
        store.log()[..5],
        ["begin", "page 500", "page 500", "page 200", "end"]
    );
    assert_eq!(store.state(), server_state(sim));
    assert_eq!(
        handle.last_sync_resource_version().unwrap().as_str(),
        listed
    );
    rig.stop().await;
}

#[tokio::test]
async fn a_consistent_first_list_sends_no_resource_version() {
    let config = Config {
        initial_list: InitialList::Consistent,
        ..config()
    };
    let rig = Rig::start(3, config).await;
    let (sim, store, _handle) = (&rig.sim, &rig.store, &rig.handle);
    eventually("the watch", || watches(sim) == 1).await;
    assert_eq!(pod_requests(sim)[0], "list rv= limit=500");
    assert_eq!(store.state(), server_state(sim));
    rig.stop().await;
}

#[tokio::test]
async fn watch_events_reach_the_store_and_advance_the_version() {
    let rig = Rig::start(5, config()).await;
    let (sim, store, handle) = (&rig.sim, &rig.store, &rig.handle);
    eventually("the watch", || watches(sim) == 1).await;

    let created = create_pod(sim, "fresh");
    let victim = server_state(sim).into_keys().next().unwrap();
    let (ns, name) = victim.split_once('/').unwrap();
    sim.store()
        .delete(&pods_resource(), Some(ns), name)
        .unwrap();
    let last = sim.store().resource_version().to_string();
    eventually("the delete", || {
        handle
            .last_sync_resource_version()
            .is_some_and(|v| v.as_str() == last)
    })
    .await;
    assert!(store.log().contains(&"add fresh".to_owned()));
    assert!(store.log().contains(&format!("delete {name}")));
    assert_eq!(store.state()["default/fresh"], created);
    assert_eq!(store.state(), server_state(sim));
    assert_eq!(watches(sim), 1, "one watch carried every event");
    rig.stop().await;
}

#[tokio::test]
async fn a_watch_that_closes_normally_is_reopened_from_the_last_version_with_no_list() {
    let rig = Rig::start(3, config()).await;
    let (sim, store, _handle) = (&rig.sim, &rig.store, &rig.handle);
    eventually("the watch", || watches(sim) == 1).await;
    let seen = create_pod(sim, "a");
    eventually("the event", || store.state().contains_key("default/a")).await;
    sim.faults().close_all_watches_now();
    eventually("a second watch", || watches(sim) == 2).await;

    let requests = pod_requests(sim);
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert_eq!(requests[2], format!("watch rv={seen}"));
    rig.stop().await;
}

#[tokio::test]
async fn a_watch_that_ends_at_once_with_nothing_is_followed_by_a_relist() {
    let rig = Rig::start(3, config()).await;
    let (sim, store, handle) = (&rig.sim, &rig.store, &rig.handle);
    eventually("the watch", || watches(sim) == 1).await;
    let listed = handle.last_sync_resource_version().unwrap();
    // The open watch ends, without delivering it, at the next event.
    sim.faults().close_watches_after_events(0);
    create_pod(sim, "unseen");
    eventually("a second watch", || watches(sim) == 2).await;
    sim.faults().clear();

    assert_eq!(
        pod_requests(sim)[1..],
        [
            format!("watch rv={listed}"),
            // Three pods fit one page, so the list was not paged and the relist is not.
            format!("list rv={listed}"),
            format!("watch rv={}", sim.store().resource_version()),
        ]
    );
    assert_eq!(store.state(), server_state(sim));
    rig.stop().await;
}

#[tokio::test]
async fn a_410_relists_from_the_last_version_then_with_a_consistent_read_when_that_is_gone_too() {
    // Pages of two from a server without a watch cache, so the first list is paged and relists
    // stay paged.
    let config = Config {
        page_size: 2,
        ..config()
    };
    let rig = Rig::start_on(paging_sim().await, 5, config, |_| {});
    let (sim, store, handle) = (&rig.sim, &rig.store, &rig.handle);
    eventually("the watch", || watches(sim) == 1).await;
    let listed = handle.last_sync_resource_version().unwrap();
    let seen = create_pod(sim, "seen");
    eventually("the event", || store.state().contains_key("default/seen")).await;
    // The watch answers 410, and so does the list at the last synced version.
    sim.faults().gone_next_watch();
    sim.faults().fail_next(RequestKind::List, 410, 1, None);
    sim.faults().close_all_watches_now();
    eventually("the watch after the relist", || watches(sim) == 3).await;

    let requests = pod_requests(sim);
    assert_eq!(
        requests,
        [
            "list rv=0 limit=2".to_owned(),
            "list continue limit=2".to_owned(),
            "list continue limit=2".to_owned(),
            format!("watch rv={listed}"),
            format!("watch rv={seen}"),
            format!("list rv={seen} limit=2"),
            "list rv= limit=2".to_owned(),
            "list continue limit=2".to_owned(),
            "list continue limit=2".to_owned(),
            format!("watch rv={}", sim.store().resource_version()),
        ]
    );
    assert_eq!(store.state(), server_state(sim));
    rig.stop().await;
}

#[tokio::test]
async fn a_watch_refused_with_429_or_a_5xx_is_retried_at_the_same_version_with_no_list() {
    let reports = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&reports);
    let config = config().with_watch_error_handler(move |info| {
        seen.lock()
            .unwrap()
            .push((info.phase, info.error.kind(), info.will_relist));
    });
    let rig = Rig::start_armed(3, config, |sim| {
        sim.faults().fail_next(RequestKind::Watch, 429, 2, None);
        sim.faults().fail_next(RequestKind::Watch, 503, 1, None);
    })
    .await;
    let (sim, handle) = (&rig.sim, &rig.handle);
    eventually("the fourth watch", || watches(sim) == 4).await;

    let listed = handle.last_sync_resource_version().unwrap();
    let watch = format!("watch rv={listed}");
    assert_eq!(
        pod_requests(sim),
        ["list rv=0 limit=500", &watch, &watch, &watch, &watch]
    );
    assert_eq!(
        *reports.lock().unwrap(),
        [(Phase::Watch, ErrorKind::Retry, false); 3]
    );
    rig.stop().await;
}

#[tokio::test]
async fn bookmarks_advance_the_version_the_next_watch_starts_from() {
    let sim = kinformer_sim::SimServer::start(kinformer_sim::SimConfig {
        bookmark_interval: Duration::from_millis(20),
        ..kinformer_sim::SimConfig::default()
    })
    .await
    .unwrap();
    sim.store().seed_pods(3, 1);
    let store = Arc::new(Recorder::default());
    let (handle, run) = spawn(Reflector::new(pods_api(&sim), Arc::clone(&store), config()));
    eventually("the watch", || watches(&sim) == 1).await;
    move_on_without_pods(&sim);
    let now = sim.store().resource_version().to_string();
    eventually("a bookmark at the new version", || {
        store.log().contains(&format!("bookmark {now}"))
    })
    .await;
    assert_eq!(handle.last_sync_resource_version().unwrap().as_str(), now);
    sim.faults().close_all_watches_now();
    eventually("a second watch", || watches(&sim) == 2).await;
    assert_eq!(pod_requests(&sim)[2], format!("watch rv={now}"));
    handle.stop();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_403_is_retried_reported_every_time_and_never_stops_the_reflector() {
    let reports = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&reports);
    let config = config().with_watch_error_handler(move |info| {
        seen.lock().unwrap().push((info.phase, info.will_relist));
    });
    let rig = Rig::start_armed(3, config, |sim| {
        sim.faults().fail_next(RequestKind::List, 403, 3, None);
    })
    .await;
    let (sim, store) = (&rig.sim, &rig.store);
    eventually("the watch", || watches(sim) == 1).await;
    assert_eq!(*reports.lock().unwrap(), [(Phase::List, true); 3]);
    assert_eq!(
        pod_requests(sim)
            .iter()
            .filter(|r| r.starts_with("list"))
            .count(),
        4
    );
    assert_eq!(store.state(), server_state(sim));
    rig.stop().await;
}

#[tokio::test]
async fn a_streaming_list_fills_the_store_then_goes_on_as_the_watch() {
    let config = Config {
        streaming_list: StreamingList::On,
        page_size: 2,
        ..config()
    };
    let rig = Rig::start(5, config).await;
    let (sim, store, handle) = (&rig.sim, &rig.store, &rig.handle);
    eventually("the sync", || handle.last_sync_resource_version().is_some()).await;
    assert_eq!(store.log(), ["begin", "page 2", "page 2", "page 1", "end"]);
    let watch = last_watch(sim);
    assert_eq!(watch.param("resourceVersionMatch"), Some("NotOlderThan"));
    assert_eq!(watch.param("allowWatchBookmarks"), Some("true"));
    assert_eq!(pod_requests(sim), ["watch rv= initial"]);

    create_pod(sim, "live");
    eventually("the live event", || {
        store.state().contains_key("default/live")
    })
    .await;
    assert_eq!(
        pod_requests(sim).len(),
        1,
        "the same watch carries live events"
    );
    assert_eq!(store.state(), server_state(sim));
    rig.stop().await;
}

#[tokio::test]
async fn a_refused_streaming_list_falls_back_to_list_and_watch() {
    for (mode, later) in [
        (StreamingList::On, "watch rv=VERSION initial"),
        (StreamingList::Auto, "list rv=VERSION"),
    ] {
        let sim = sim().await;
        sim.store().seed_pods(3, 1);
        let store = Arc::new(Recorder::default());
        let config = Config {
            streaming_list: mode,
            ..config()
        };
        // A server that does not know the parameter rejects the request.
        sim.faults().fail_next(RequestKind::Watch, 422, 1, None);
        let (handle, run) = spawn(Reflector::new(pods_api(&sim), Arc::clone(&store), config));
        eventually("the watch", || watches(&sim) == 2).await;
        let listed = handle.last_sync_resource_version().unwrap().to_string();
        assert_eq!(
            pod_requests(&sim),
            [
                "watch rv= initial".to_owned(),
                "list rv=0 limit=500".to_owned(),
                format!("watch rv={listed}"),
            ],
            "{mode:?}"
        );
        assert_eq!(store.state(), server_state(&sim));
        // The next relist tries streaming again only when told to always stream.
        sim.faults().close_watches_after_events(0);
        create_pod(&sim, "x");
        eventually("the relist", || pod_requests(&sim).len() >= 4).await;
        sim.faults().clear();
        assert_eq!(
            pod_requests(&sim)[3],
            later.replace("VERSION", &listed),
            "{mode:?}"
        );
        handle.stop();
        run.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn a_streaming_list_cut_before_its_end_bookmark_is_abandoned_and_the_cycle_lists() {
    // Without a watch cache, so that the list that follows is paged.
    let sim = paging_sim().await;
    sim.store().seed_pods(6, 1);
    let store = Arc::new(Recorder::default());
    let faults = sim.faults();
    let incomplete = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&incomplete);
    let config = Config {
        streaming_list: StreamingList::On,
        page_size: 2,
        ..config()
    }
    .with_watch_error_handler(move |info| {
        if info
            .error
            .to_string()
            .contains("before its initial events were complete")
        {
            seen.fetch_add(1, Ordering::SeqCst);
            faults.clear();
        }
    });
    // The first stream ends after three of its six initial events.
    sim.faults().close_watches_after_events(3);
    let (handle, run) = spawn(Reflector::new(pods_api(&sim), Arc::clone(&store), config));
    eventually("the sync", || handle.last_sync_resource_version().is_some()).await;

    assert_eq!(incomplete.load(Ordering::SeqCst), 1);
    // As client-go: the failed streaming list is followed at once by a list, then the watch.
    let listed = handle.last_sync_resource_version().unwrap().to_string();
    eventually("the watch", || pod_requests(&sim).len() >= 5).await;
    assert_eq!(
        pod_requests(&sim),
        [
            "watch rv= initial".to_owned(),
            "list rv=0 limit=2".to_owned(),
            "list continue limit=2".to_owned(),
            "list continue limit=2".to_owned(),
            format!("watch rv={listed}"),
        ]
    );
    assert_eq!(
        store.log(),
        [
            "begin", "page 2", "abandon", "begin", "page 2", "page 2", "page 2", "end"
        ]
    );
    assert_eq!(store.state(), server_state(&sim));
    handle.stop();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn stopping_returns_after_dropping_the_request_in_flight() {
    let sim = sim().await;
    sim.store().seed_pods(3, 1);
    let store = Arc::new(Recorder::default());
    let (handle, run) = spawn(Reflector::new(pods_api(&sim), Arc::clone(&store), config()));
    eventually("the watch", || watches(&sim) == 1).await;
    handle.stop();
    // The watch is open and quiet: the stop must not wait for it.
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("stopped promptly")
        .unwrap()
        .unwrap();
    assert!(handle.is_stopped());
}

/// The pods of the server, compacting its history after the first page is served, so the
/// continue token of that page has expired when the next page is asked for.
struct CompactsAfterFirstPage {
    api: kinformer_client::Api<k8s_openapi::api::core::v1::Pod>,
    sim: Arc<kinformer_sim::SimServer>,
    done: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl kinformer_core::ListWatch<k8s_openapi::api::core::v1::Pod> for CompactsAfterFirstPage {
    async fn list(
        &self,
        params: &kinformer_core::ListParams,
    ) -> Result<
        kinformer_core::ObjectList<k8s_openapi::api::core::v1::Pod>,
        kinformer_core::list_watch::Error,
    > {
        let page = kinformer_core::ListWatch::list(&self.api, params).await?;
        if !self.done.swap(true, Ordering::SeqCst) {
            create_pod(&self.sim, "after-the-first-page");
            self.sim.faults().compact_now();
        }
        Ok(page)
    }
    async fn watch(
        &self,
        params: &kinformer_core::WatchParams,
    ) -> Result<
        kinformer_core::WatchStream<k8s_openapi::api::core::v1::Pod>,
        kinformer_core::list_watch::Error,
    > {
        kinformer_core::ListWatch::watch(&self.api, params).await
    }
}

#[tokio::test]
async fn a_continue_token_that_expires_mid_list_restarts_the_list_whole() {
    // Without a watch cache, so that the first list is paged.
    let sim = Arc::new(paging_sim().await);
    sim.store().seed_pods(5, 1);
    let store = Arc::new(Recorder::default());
    let source = CompactsAfterFirstPage {
        api: pods_api(&sim),
        sim: Arc::clone(&sim),
        done: std::sync::atomic::AtomicBool::new(false),
    };
    let config = Config {
        page_size: 2,
        ..config()
    };
    let (handle, run) = spawn(Reflector::new(source, Arc::clone(&store), config));
    eventually("the watch", || watches(&sim) == 1).await;
    assert_eq!(
        pod_requests(&sim),
        [
            "list rv=0 limit=2".to_owned(),
            "list continue limit=2".to_owned(),
            "list rv=0".to_owned(),
            format!("watch rv={}", sim.store().resource_version()),
        ]
    );
    assert_eq!(store.log(), ["begin", "page 2", "begin", "page 6", "end"]);
    assert_eq!(store.state(), server_state(&sim));
    handle.stop();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn relists_are_paged_only_when_the_server_paged_the_first_list_with_and_without_a_watch_cache()
 {
    for watch_cache in [true, false] {
        let sim = kinformer_sim::SimServer::start(kinformer_sim::SimConfig {
            watch_cache,
            ..kinformer_sim::SimConfig::default()
        })
        .await
        .unwrap();
        sim.store().seed_pods(5, 1);
        let store = Arc::new(Recorder::default());
        let config = Config {
            page_size: 2,
            ..config()
        };
        let (handle, run) = spawn(Reflector::new(pods_api(&sim), Arc::clone(&store), config));
        eventually("the watch", || watches(&sim) == 1).await;
        let seen = create_pod(&sim, "seen");
        eventually("the event", || store.state().contains_key("default/seen")).await;
        // The server moves on without a pod event, forgets the version the reflector holds, and
        // the watch is answered 410.
        move_on_without_pods(&sim);
        sim.faults().compact_now();
        sim.faults().gone_next_watch();
        sim.faults().close_all_watches_now();
        eventually("the watch after the relist", || watches(&sim) == 3).await;

        let now = sim.store().resource_version();
        let expected: Vec<String> = if !watch_cache {
            // Paged at "0", so the relist at the last version is paged: an exact read there,
            // which the compaction has made 410, and then the consistent read, paged.
            vec![
                "list rv=0 limit=2".into(),
                "list continue limit=2".into(),
                "list continue limit=2".into(),
                format!("watch rv={}", seen.parse::<u64>().unwrap() - 1),
                format!("watch rv={seen}"),
                format!("list rv={seen} limit=2"),
                "list rv= limit=2".into(),
                "list continue limit=2".into(),
                "list continue limit=2".into(),
                format!("watch rv={now}"),
            ]
        } else {
            // The server ignored the limit at "0": one response, so the relist at the last
            // version goes without a limit and the watch cache serves it.
            vec![
                "list rv=0 limit=2".into(),
                format!("watch rv={}", seen.parse::<u64>().unwrap() - 1),
                format!("watch rv={seen}"),
                format!("list rv={seen}"),
                format!("watch rv={now}"),
            ]
        };
        assert_eq!(pod_requests(&sim), expected, "watch cache {watch_cache}");
        assert_eq!(
            store.state(),
            server_state(&sim),
            "watch cache {watch_cache}"
        );
        handle.stop();
        run.await.unwrap().unwrap();
    }
}
