//! The relist protocol: a relist delivered page by page gives exactly what the same relist
//! delivered whole gives; a restart mid-list is one clean relist; an abandoned one leaves the
//! queue as it was; and an unchanged object keeps the `Arc` already held.

mod support;

use std::sync::Arc;

use kinformer_core::{DeltaQueue, DynamicObject, Popped, ReflectorStoreExt};
use kinformer_delta_fifo::{DeltaFifo, Mode};
use support::{Store, obj, render};

const MODES: [(Mode, bool); 3] = [
    (Mode::InOrder, true),
    (Mode::InOrder, false),
    (Mode::Classic, true),
];

/// A store holding `a@1 b@1 c@1`, a FIFO over it with a few writes queued.
fn setup(mode: Mode, known: bool) -> (Store, DeltaFifo<DynamicObject>) {
    let store = Store::with(&[("a", "1"), ("b", "1"), ("c", "1")]);
    let mut builder = DeltaFifo::builder().mode(mode).batch_size(3);
    if known {
        builder = builder.known_objects(Arc::new(store.clone()));
    }
    let fifo = builder.build().unwrap();
    fifo.update(obj("b", "2")).unwrap();
    fifo.add(obj("d", "3")).unwrap();
    (store, fifo)
}

fn list() -> Vec<Arc<DynamicObject>> {
    ["a", "d", "e", "f", "g"]
        .iter()
        .map(|n| obj(n, if *n == "a" { "1" } else { "4" }))
        .collect()
}

/// Pops and applies everything; the renderings, then the store.
fn drain(fifo: &DeltaFifo<DynamicObject>, store: &Store) -> (Vec<String>, Vec<String>) {
    let mut popped = Vec::new();
    while let Some(item) = fifo.try_pop_into(&*store.0) {
        popped.push(render(&item.popped));
        let heard: Vec<String> = item
            .applied
            .notifications
            .iter()
            .map(support::render_notification)
            .collect();
        popped.push(format!("heard {}", heard.join(" ")));
    }
    (popped, store.render())
}

fn whole(mode: Mode, known: bool) -> (Vec<String>, Vec<String>) {
    let (store, fifo) = setup(mode, known);
    fifo.replace(list(), "5".into()).unwrap();
    drain(&fifo, &store)
}

#[test]
fn a_relist_in_pages_gives_what_the_same_relist_gives_whole() {
    for (mode, known) in MODES {
        let want = whole(mode, known);
        for split in [vec![1], vec![2, 4], vec![1, 2, 3, 4], vec![0, 5]] {
            let (store, fifo) = setup(mode, known);
            let objects = list();
            fifo.begin_relist().unwrap();
            let mut from = 0;
            for to in split.iter().copied().chain([objects.len()]) {
                fifo.relist_page(objects[from..to].to_vec()).unwrap();
                from = to;
            }
            fifo.end_relist("5".into()).unwrap();
            assert_eq!(
                drain(&fifo, &store),
                want,
                "{mode:?} known={known} {split:?}"
            );
        }
    }
}

#[test]
fn a_relist_begun_again_is_one_clean_relist() {
    for (mode, known) in MODES {
        let want = whole(mode, known);
        let (store, fifo) = setup(mode, known);
        fifo.begin_relist().unwrap();
        fifo.relist_page(vec![obj("zombie", "9"), obj("a", "9")])
            .unwrap();
        // The continue token expired: the pager lists everything again.
        fifo.begin_relist().unwrap();
        let objects = list();
        fifo.relist_page(objects[..2].to_vec()).unwrap();
        fifo.relist_page(objects[2..].to_vec()).unwrap();
        fifo.end_relist("5".into()).unwrap();
        assert_eq!(drain(&fifo, &store), want, "{mode:?} known={known}");
    }
}

#[test]
fn an_abandoned_relist_leaves_the_queue_as_it_was() {
    for (mode, known) in MODES {
        let (store, untouched) = setup(mode, known);
        let want = drain(&untouched, &store);
        let (store, fifo) = setup(mode, known);
        let depth = fifo.depth();
        fifo.begin_relist().unwrap();
        fifo.relist_page(list()).unwrap();
        assert_eq!(
            fifo.depth(),
            depth,
            "{mode:?}: nothing is queued before the end"
        );
        fifo.abandon_relist();
        assert_eq!(drain(&fifo, &store), want, "{mode:?} known={known}");
    }
}

#[test]
fn an_unchanged_object_keeps_the_held_arc_and_the_fresh_copy_is_dropped() {
    for (mode, known) in [(Mode::InOrder, true), (Mode::Classic, true)] {
        let store = Store::with(&[("a", "1"), ("b", "1")]);
        let fifo = DeltaFifo::builder()
            .mode(mode)
            .known_objects(Arc::new(store.clone()))
            .build()
            .unwrap();
        // A queued change is held too: its object is the newest state.
        let queued_c = obj("c", "2");
        fifo.add(Arc::clone(&queued_c)).unwrap();
        let held_a = store.0.lock().unwrap()["a"].clone();
        let (fresh_a, fresh_b, fresh_c) = (obj("a", "1"), obj("b", "7"), obj("c", "2"));
        let weak_a = Arc::downgrade(&fresh_a);
        let weak_c = Arc::downgrade(&fresh_c);
        fifo.begin_relist().unwrap();
        fifo.relist_page(vec![fresh_a, Arc::clone(&fresh_b), fresh_c])
            .unwrap();
        assert!(
            weak_a.upgrade().is_none(),
            "{mode:?}: the fresh copy of a@1 is gone already"
        );
        assert!(
            weak_c.upgrade().is_none(),
            "{mode:?}: the fresh copy of c@2 is gone already"
        );
        fifo.end_relist("8".into()).unwrap();
        let mut relisted = Vec::new();
        while let Some(p) = fifo.try_pop_into(&*store.0) {
            match p.popped {
                Popped::Replace(step) => relisted.extend(step.objects),
                Popped::Key(d) | Popped::Batch(d) => relisted.extend(
                    d.into_iter()
                        .filter(|d| d.kind == kinformer_core::DeltaType::Replaced)
                        .map(|d| Arc::clone(d.object.object())),
                ),
                Popped::Resync | Popped::Bookmark(_) => {}
            }
        }
        let by_name = |n: &str| {
            relisted
                .iter()
                .find(|o| o.metadata.name.as_deref() == Some(n))
                .unwrap()
        };
        assert!(Arc::ptr_eq(by_name("a"), &held_a), "{mode:?} known={known}");
        assert!(
            Arc::ptr_eq(by_name("b"), &fresh_b),
            "{mode:?}: a changed object is the fresh one"
        );
        assert!(
            Arc::ptr_eq(by_name("c"), &queued_c),
            "{mode:?}: the queued state is held"
        );
    }
}
