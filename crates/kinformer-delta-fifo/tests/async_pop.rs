//! The async side: pop waits for work and ends on close, a bounded queue holds its writer back
//! without dropping anything, and every handle and future is `Send` and `Sync`.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use kinformer_core::{
    DeltaQueue, DynamicObject, Popped, ReflectorStore, ReflectorStoreExt, StoreError,
};
use kinformer_delta_fifo::{DeltaFifo, Mode};
use support::{obj, render};

/// Counts how often it was woken.
#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn fifo(mode: Mode) -> Arc<DeltaFifo<DynamicObject>> {
    Arc::new(
        DeltaFifo::builder()
            .mode(mode)
            .known_objects(Arc::new(support::Store::default()))
            .build()
            .unwrap(),
    )
}

#[tokio::test]
async fn pop_waits_for_work_and_wakes_on_a_write() {
    for mode in [Mode::Classic, Mode::InOrder] {
        let q = fifo(mode);
        let popper = tokio::spawn({
            let q = Arc::clone(&q);
            async move { q.pop().await.map(|p| render(&p)) }
        });
        // Let the popper park on the empty queue first.
        tokio::task::yield_now().await;
        q.add(obj("a", "1")).unwrap();
        let got = tokio::time::timeout(Duration::from_secs(10), popper)
            .await
            .unwrap()
            .unwrap();
        let want = match mode {
            Mode::Classic => "a: Added(a@1)",
            _ => "batch: Added(a@1)",
        };
        assert_eq!(got.as_deref(), Some(want));
    }
}

#[tokio::test]
async fn pop_drains_then_returns_none_after_close_and_writes_fail() {
    let q = fifo(Mode::Classic);
    q.add(obj("a", "1")).unwrap();
    let dq: Arc<dyn DeltaQueue<DynamicObject>> = q.clone();
    dq.close();
    assert!(matches!(q.add(obj("b", "2")), Err(StoreError::Closed)));
    assert!(!dq.requeue(vec![]), "nothing to requeue");
    assert!(
        matches!(dq.pop().await, Some(Popped::Key(_))),
        "what was queued is still handed out"
    );
    assert!(dq.pop().await.is_none());
    // A popper already waiting is woken by close.
    let q = fifo(Mode::InOrder);
    let waiting = tokio::spawn({
        let q = Arc::clone(&q);
        async move { q.pop().await.is_none() }
    });
    tokio::task::yield_now().await;
    q.close();
    assert!(
        tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .unwrap()
            .unwrap()
    );
}

#[test]
fn a_full_queue_holds_the_writer_back_and_wakes_it_when_there_is_room() {
    for mode in [Mode::Classic, Mode::InOrder] {
        // One delta per pop, so both modes free one slot at a time.
        let q = DeltaFifo::builder()
            .mode(mode)
            .known_objects(Arc::new(support::Store::default()))
            .capacity(2)
            .batch_size(1)
            .build()
            .unwrap();
        let counter = Arc::new(CountingWaker::default());
        let waker = Waker::from(Arc::clone(&counter));
        let mut cx = Context::from_waker(&waker);
        assert!(matches!(q.poll_ready(&mut cx), Poll::Ready(Ok(()))));
        q.add(obj("a", "1")).unwrap();
        q.add(obj("b", "2")).unwrap();
        assert!(q.poll_ready(&mut cx).is_pending(), "{mode:?}: full");
        // A writer that ignores poll_ready still loses nothing.
        q.add(obj("c", "3")).unwrap();
        assert_eq!(q.depth(), 3);
        assert!(q.try_pop().is_some());
        assert_eq!(
            counter.0.load(Ordering::SeqCst),
            0,
            "{mode:?}: still at capacity"
        );
        assert!(q.try_pop().is_some());
        assert_eq!(
            counter.0.load(Ordering::SeqCst),
            1,
            "{mode:?}: woken once there is room"
        );
        assert!(matches!(q.poll_ready(&mut cx), Poll::Ready(Ok(()))));
        q.close();
        assert!(matches!(
            q.poll_ready(&mut cx),
            Poll::Ready(Err(StoreError::Closed))
        ));
    }
}

#[tokio::test]
async fn a_bounded_queue_delivers_every_event_to_a_slow_consumer() {
    let q = Arc::new(
        DeltaFifo::<DynamicObject>::builder()
            .mode(Mode::InOrder)
            .capacity(4)
            .batch_size(3)
            .build()
            .unwrap(),
    );
    let writer = tokio::spawn({
        let q = Arc::clone(&q);
        async move {
            for i in 0..200 {
                std::future::poll_fn(|cx| q.poll_ready(cx)).await.unwrap();
                q.add(obj(&format!("o{i}"), "1")).unwrap();
                assert!(q.depth() <= 4, "the bound holds for a writer that waits");
            }
            q.close();
        }
    });
    let mut seen = 0;
    for _ in 0..1000 {
        match tokio::time::timeout(Duration::from_secs(10), q.pop())
            .await
            .unwrap()
        {
            Some(p) => seen += p.len(),
            None => break,
        }
        tokio::task::yield_now().await;
    }
    writer.await.unwrap();
    assert_eq!(seen, 200);
}

#[test]
fn oldest_age_is_reported_while_something_waits() {
    let q = fifo(Mode::Classic);
    assert!(q.oldest_age().is_none());
    q.add(obj("a", "1")).unwrap();
    assert!(q.oldest_age().is_some());
    q.try_pop();
    assert!(q.oldest_age().is_none());
}

#[test]
fn handles_and_futures_are_send_and_sync() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    let q = fifo(Mode::Classic);
    send_sync(&q);
    send(&q.pop());
    let dq: Arc<dyn DeltaQueue<DynamicObject>> = q;
    send(&dq.pop());
}

#[test]
fn requeue_refuses_deltas_of_several_keys_and_an_empty_list() {
    use kinformer_core::{Delta, DeltaType};
    for mode in [Mode::Classic, Mode::InOrder] {
        let q = fifo(mode);
        let mixed = vec![
            Delta::of(DeltaType::Added, obj("a", "1")),
            Delta::of(DeltaType::Added, obj("b", "1")),
        ];
        assert!(!q.requeue(mixed), "{mode:?}");
        assert!(!q.requeue(Vec::new()), "{mode:?}");
        assert_eq!(q.depth(), 0);
    }
}
