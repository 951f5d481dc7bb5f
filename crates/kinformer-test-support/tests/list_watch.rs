//! A `ListWatch` with no HTTP client behind it: this crate depends on kinformer-core alone, and
//! lists a scripted in-memory source page by page through core's pager.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use kinformer_core::list_watch::{self, ErrorKind, ListWatch, Pager};
use kinformer_core::{DynamicObject, ListParams, WatchEvent, WatchParams};
use kinformer_test_support::ScriptedListWatch;

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

fn objects(n: usize) -> Vec<Arc<DynamicObject>> {
    (0..n)
        .map(|i| {
            let mut o = DynamicObject::default();
            o.metadata.name = Some(format!("o{i:03}"));
            Arc::new(o)
        })
        .collect()
}

#[test]
fn the_core_pager_lists_a_scripted_source_page_by_page() {
    let source = ScriptedListWatch::new(objects(25), "40");
    let mut pager = Pager::new(&source, &ListParams::default(), 10);
    let mut sizes = Vec::new();
    let mut names = Vec::new();
    while let Some(page) = block_on(pager.next_page()).unwrap() {
        assert!(!page.restarted);
        assert_eq!(page.list.resource_version.as_str(), "40");
        sizes.push(page.list.items.len());
        names.extend(
            page.list
                .items
                .iter()
                .map(|o| o.metadata.name.clone().unwrap()),
        );
    }
    assert_eq!(sizes, [10, 10, 5]);
    assert_eq!(names.len(), 25);
    assert_eq!(names[24], "o024");
    let requests = source.list_requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[1].continue_token.as_deref(), Some("10"));
    assert_eq!(requests[2].limit, Some(10));
}

#[test]
fn an_expired_continue_token_falls_back_to_one_full_list() {
    let source = ScriptedListWatch::new(objects(25), "40");
    let all = {
        let mut pager = Pager::new(&source, &ListParams::default(), 10);
        let first = block_on(pager.next_page()).unwrap().unwrap();
        assert_eq!(first.list.items.len(), 10);
        source.fail_next_list(list_watch::Error::new(
            ErrorKind::Relist,
            "continue expired",
        ));
        source.set_state(objects(12), "55");
        let second = block_on(pager.next_page()).unwrap().unwrap();
        assert!(second.restarted);
        assert!(block_on(pager.next_page()).unwrap().is_none());
        second.list
    };
    assert_eq!((all.items.len(), all.resource_version.as_str()), (12, "55"));
    let last = source.list_requests().pop().unwrap();
    assert_eq!((last.limit, last.continue_token), (None, None));
}

#[test]
fn watches_serve_their_scripts_in_order_then_end() {
    let source = ScriptedListWatch::<DynamicObject>::new(Vec::new(), "1");
    let first = objects(1).remove(0);
    source.push_watch(vec![
        Ok(WatchEvent::Added(Arc::clone(&first))),
        Err(list_watch::Error::new(ErrorKind::Resume, "cut")),
    ]);
    let lw: &dyn ListWatch<DynamicObject> = &source;
    let mut stream = block_on(lw.watch(&WatchParams::default())).unwrap();
    let next = |s: &mut list_watch::WatchStream<DynamicObject>| {
        block_on(std::future::poll_fn(|cx| s.as_mut().poll_next(cx)))
    };
    assert!(matches!(next(&mut stream), Some(Ok(WatchEvent::Added(o))) if Arc::ptr_eq(&o, &first)));
    assert_eq!(
        next(&mut stream).unwrap().unwrap_err().kind(),
        ErrorKind::Resume
    );
    assert!(next(&mut stream).is_none());
    let mut second = block_on(lw.watch(&WatchParams {
        resource_version: Some("9".into()),
        ..WatchParams::default()
    }))
    .unwrap();
    assert!(
        next(&mut second).is_none(),
        "no script left: the watch ends at once"
    );
    let requests = source.watch_requests();
    assert_eq!(requests[1].resource_version.as_deref(), Some("9"));

    // A streaming list is refused as a server without the feature refuses it.
    let refused = block_on(lw.watch(&WatchParams {
        send_initial_events: true,
        ..WatchParams::default()
    }));
    assert_eq!(refused.err().map(|e| e.kind()), Some(ErrorKind::Fatal));
    assert_eq!(source.watch_requests().len(), 3);
}

#[test]
fn the_scripted_source_and_its_futures_are_send_and_sync() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    let source = ScriptedListWatch::<DynamicObject>::new(Vec::new(), "1");
    send_sync(&source);
    send(&source.list(&ListParams::default()));
    send(&source.watch(&WatchParams::default()));
    let boxed = list_watch::BoxListWatch::new(source);
    send_sync(&boxed);
}
