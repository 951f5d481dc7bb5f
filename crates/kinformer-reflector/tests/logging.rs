//! How the reflector reports failures through logs, in a test binary of its own: tracing's
//! per-callsite interest is process-wide, and tests on other threads that log with no subscriber
//! race this test's subscriber for it (the warnings then go uncounted).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kinformer_reflector::Reflector;
use kinformer_sim::RequestKind;
use support::*;

/// Counts the reflector's warnings.
#[derive(Clone, Default)]
struct Warnings(Arc<AtomicUsize>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() == tracing::Level::WARN && meta.target().starts_with("kinformer_reflector")
        {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[tokio::test]
async fn each_episode_of_failures_is_logged_once_and_every_failure_reaches_the_hook() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let warnings = Warnings::default();
    // This test's runtime runs every task on this thread, where the subscriber is the default.
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(warnings.clone()));
    let sim = sim().await;
    sim.store().seed_pods(3, 1);
    let store = Arc::new(Recorder::default());
    let reports = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&reports);
    let config = config().with_watch_error_handler(move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
    });
    // Episode one: three lists refused.
    sim.faults().fail_next(RequestKind::List, 403, 3, None);
    let (handle, run) = spawn(Reflector::new(pods_api(&sim), Arc::clone(&store), config));
    eventually("the watch", || watches(&sim) == 1).await;
    assert_eq!(warnings.0.load(Ordering::SeqCst), 1);

    // An event first, so that closing the watch is not taken for a short watch (a relist): it
    // is a watch closed early after an event, reported once and watched again after a backoff.
    create_pod(&sim, "first");
    eventually("the event", || store.state().contains_key("default/first")).await;
    // Episode three: allowed to list but not to watch, three times over. The lists in between
    // succeed, and the episode goes on until the watch does.
    sim.faults().fail_next(RequestKind::Watch, 403, 3, None);
    sim.faults().close_all_watches_now();
    eventually("a watch that works", || watches(&sim) == 5).await;
    create_pod(&sim, "proof");
    eventually("the event", || store.state().contains_key("default/proof")).await;
    assert_eq!(
        reports.load(Ordering::SeqCst),
        7,
        "every failure reached the hook"
    );
    assert_eq!(
        warnings.0.load(Ordering::SeqCst),
        3,
        "one warning per episode: refused lists, the early close, refused watches"
    );
    handle.stop();
    run.await.unwrap().unwrap();
}
