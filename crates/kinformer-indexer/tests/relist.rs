//! The relist protocol (pages, restart, abandon, unchanged objects keep their `Arc`), what every
//! write returns, `apply_batch` seen whole by readers, and `Send`/`Sync` of the public types.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use kinformer_core::{
    CacheOp, CacheRead, CacheWrite, DynamicObject, IndexRead, Object, ObjectKey, ReflectorStoreExt,
    StoreError,
};
use kinformer_indexer::{Error, IndexFunc, Indexer, IndexerReader, index};
use support::{dump, tags};

/// `obj` with a resourceVersion.
fn obj(ns: &str, name: &str, tags: &str, rv: &str) -> Arc<DynamicObject> {
    let o = support::obj(ns, name, tags);
    let mut o = DynamicObject::clone(&o);
    o.metadata.resource_version = Some(rv.into());
    Arc::new(o)
}

fn indexer() -> Indexer<DynamicObject> {
    Indexer::with_indexers([
        ("tags".to_string(), tags()),
        (index::NAMESPACE.to_string(), index::namespace()),
    ])
    .unwrap()
}

/// Everything a reader can see: each key with its object, and both indexes.
struct Snapshot {
    objects: Vec<(ObjectKey, Arc<DynamicObject>)>,
    tags: BTreeMap<String, Vec<String>>,
    namespaces: BTreeMap<String, Vec<String>>,
}

fn snapshot(r: &IndexerReader<DynamicObject>) -> Snapshot {
    Snapshot {
        objects: r
            .list_keys()
            .into_iter()
            .map(|k| {
                let o = r.get_by_key(k.as_str()).unwrap();
                (k, o)
            })
            .collect(),
        tags: dump(r, "tags"),
        namespaces: dump(r, index::NAMESPACE),
    }
}

/// Same keys, the same `Arc` under each (`Arc::ptr_eq`), the same index contents.
fn assert_same(a: &Snapshot, b: &Snapshot, what: &str) {
    let keys = |s: &Snapshot| s.objects.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(keys(a), keys(b), "{what}: keys");
    for ((k, x), (_, y)) in a.objects.iter().zip(&b.objects) {
        assert!(Arc::ptr_eq(x, y), "{what}: {k} is another Arc");
    }
    assert_eq!(a.tags, b.tags, "{what}: tags index");
    assert_eq!(a.namespaces, b.namespaces, "{what}: namespace index");
}

/// The state before a relist: three objects at resourceVersions 1..3.
fn held() -> Vec<Arc<DynamicObject>> {
    vec![
        obj("a", "p", "x", "1"),
        obj("a", "q", "x,y", "2"),
        obj("b", "r", "y", "3"),
    ]
}

/// A relist of the held state: `a/p` unchanged (same resourceVersion), `a/q` changed, `b/r`
/// gone, `b/s` new, `b/t` refused by the tags index, `c/u` listed twice (the later wins).
fn listed() -> Vec<Arc<DynamicObject>> {
    vec![
        obj("a", "p", "x", "1"),
        obj("a", "q", "z", "4"),
        obj("c", "u", "x", "5"),
        obj("b", "s", "x,z", "6"),
        obj("b", "t", "bad", "7"),
        obj("c", "u", "y", "8"),
    ]
}

fn filled(objects: &[Arc<DynamicObject>]) -> Indexer<DynamicObject> {
    let i = indexer();
    for o in objects {
        i.upsert(Arc::clone(o)).unwrap();
    }
    i
}

/// Runs a relist of `list` cut at `cuts` (page boundaries) on an indexer holding `held`; returns
/// the indexer and what `end_relist` answered.
fn relist_in_pages(
    held: &[Arc<DynamicObject>],
    list: &[Arc<DynamicObject>],
    cuts: &[usize],
) -> (Indexer<DynamicObject>, Result<(), StoreError>) {
    let i = filled(held);
    i.begin_relist().unwrap();
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(list.len());
    for w in bounds.windows(2) {
        i.relist_page(list[w[0]..w[1]].to_vec()).unwrap();
    }
    let result = i.end_relist("9".into());
    (i, result)
}

#[test]
fn a_relist_in_pages_equals_the_same_relist_whole() {
    let held = held();
    let list = listed();
    let (whole, whole_result) = relist_in_pages(&held, &list, &[]);
    let want = snapshot(&whole.reader());
    // The relist replaced what it should: a sanity check of the reference itself.
    assert_eq!(
        want.objects
            .iter()
            .map(|(k, _)| k.as_str())
            .collect::<Vec<_>>(),
        ["a/p", "a/q", "b/s", "c/u"]
    );
    assert!(
        Arc::ptr_eq(&want.objects[0].1, &held[0]),
        "unchanged keeps the held Arc"
    );
    assert!(
        Arc::ptr_eq(&want.objects[1].1, &list[1]),
        "changed takes the listed one"
    );
    assert_eq!(
        want.objects[3].1.labels()["tags"],
        "y",
        "a key listed twice keeps the later"
    );
    assert!(matches!(&whole_result, Err(StoreError::IndexFunc { key, .. }) if key == "b/t"));

    let splits: &[&[usize]] = &[
        &[0],
        &[6],
        &[1],
        &[3],
        &[5],
        &[1, 2, 3, 4, 5],
        &[0, 0, 6],
        &[2, 4],
        &[2, 2, 3],
    ];
    for cuts in splits {
        let (paged, result) = relist_in_pages(&held, &list, cuts);
        assert_same(
            &snapshot(&paged.reader()),
            &want,
            &format!("pages cut at {cuts:?}"),
        );
        assert_eq!(result, whole_result, "pages cut at {cuts:?}");
    }
}

#[test]
fn a_restart_mid_list_equals_one_clean_relist() {
    let held = held();
    let list = listed();
    let (clean, clean_result) = relist_in_pages(&held, &list, &[3]);
    let i = filled(&held);
    i.begin_relist().unwrap();
    // A first attempt that got partway, with an object the second one does not list and a
    // refused one (its error must not outlive the restart).
    i.relist_page(vec![
        obj("z", "gone", "x", "1"),
        obj("z", "bad", "bad", "1"),
    ])
    .unwrap();
    i.relist_page(list[..2].to_vec()).unwrap();
    i.begin_relist().unwrap();
    i.relist_page(list[..3].to_vec()).unwrap();
    i.relist_page(list[3..].to_vec()).unwrap();
    let result = i.end_relist("9".into());
    assert_same(
        &snapshot(&i.reader()),
        &snapshot(&clean.reader()),
        "restart",
    );
    assert_eq!(result, clean_result);

    // A restart with an all-good list ends without an error from the first attempt.
    let i = filled(&held);
    i.begin_relist().unwrap();
    i.relist_page(vec![obj("z", "bad", "bad", "1")]).unwrap();
    i.begin_relist().unwrap();
    i.relist_page(held.clone()).unwrap();
    assert_eq!(i.end_relist("9".into()), Ok(()));
}

#[test]
fn an_abandoned_relist_leaves_the_cache_exactly_as_before() {
    let held = held();
    let i = filled(&held);
    let r = i.reader();
    let before = snapshot(&r);
    i.begin_relist().unwrap();
    i.relist_page(listed()).unwrap();
    assert_same(&snapshot(&r), &before, "nothing is visible mid-list");
    i.abandon_relist();
    assert_same(&snapshot(&r), &before, "abandoned");
    // Abandoning without a relist does nothing; an end after an abandon is an empty list.
    i.abandon_relist();
    assert_same(&snapshot(&r), &before, "abandoned twice");
    assert_eq!(i.end_relist("9".into()), Ok(()));
    assert!(r.is_empty());
    assert!(dump(&r, "tags").is_empty());
}

#[test]
fn relisting_an_unchanged_state_keeps_every_held_arc_and_drops_the_fresh_copies() {
    // An index function that counts its calls: an unchanged object must not run it.
    let calls = Arc::new(AtomicUsize::new(0));
    let counting: IndexFunc<DynamicObject> = {
        let calls = Arc::clone(&calls);
        index::func(move |o: &DynamicObject| {
            calls.fetch_add(1, Ordering::Relaxed);
            Ok(vec![o.name().to_string()])
        })
    };
    let i = Indexer::with_indexers([
        ("tags".to_string(), tags()),
        (index::NAMESPACE.to_string(), index::namespace()),
        ("name".to_string(), counting),
    ])
    .unwrap();
    let held: Vec<Arc<DynamicObject>> = (0..100)
        .map(|n| obj("ns", &format!("o{n}"), "x,y", &n.to_string()))
        .collect();
    for o in &held {
        i.upsert(Arc::clone(o)).unwrap();
    }
    let r = i.reader();
    let before = snapshot(&r);
    let calls_before = calls.load(Ordering::Relaxed);
    i.begin_relist().unwrap();
    let mut fresh: Vec<Weak<DynamicObject>> = Vec::new();
    for chunk in held.chunks(30) {
        let page: Vec<Arc<DynamicObject>> = chunk
            .iter()
            .map(|o| Arc::new(DynamicObject::clone(o)))
            .collect();
        fresh.extend(page.iter().map(Arc::downgrade));
        i.relist_page(page).unwrap();
        // Dropped as soon as the page is taken, before the relist ends.
        assert!(
            fresh.iter().all(|w| w.upgrade().is_none()),
            "a fresh copy is kept"
        );
    }
    i.end_relist("100".into()).unwrap();
    assert_same(&snapshot(&r), &before, "unchanged relist");
    for o in &held {
        assert!(Arc::ptr_eq(&r.get(o).unwrap(), o));
    }
    assert_eq!(
        calls.load(Ordering::Relaxed),
        calls_before,
        "no index function ran"
    );

    // An object with no resourceVersion is never taken for unchanged.
    let mut no_rv = DynamicObject::clone(&held[0]);
    no_rv.metadata.resource_version = None;
    i.upsert(Arc::new(no_rv.clone())).unwrap();
    let held_no_rv = r.get_by_key("ns/o0").unwrap();
    i.replace(vec![Arc::new(no_rv)], "101".into()).unwrap();
    assert!(!Arc::ptr_eq(&r.get_by_key("ns/o0").unwrap(), &held_no_rv));
}

#[test]
fn writes_between_begin_and_end_apply_to_the_live_cache_until_the_end() {
    let i = filled(&held());
    let r = i.reader();
    i.begin_relist().unwrap();
    i.relist_page(vec![obj("a", "p", "x", "1")]).unwrap();
    ReflectorStoreExt::add(&i, obj("d", "new", "w", "10")).unwrap();
    ReflectorStoreExt::delete(&i, obj("a", "q", "", "2")).unwrap();
    assert!(r.get_by_key("d/new").is_some());
    assert!(r.get_by_key("a/q").is_none());
    assert_eq!(r.index_keys("tags", "w").unwrap().len(), 1);
    i.end_relist("11".into()).unwrap();
    assert_eq!(
        r.list_keys().iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        ["a/p"]
    );
    assert_eq!(dump(&r, "tags").keys().collect::<Vec<_>>(), ["x"]);
}

#[test]
fn an_index_added_mid_relist_indexes_the_staged_objects_too() {
    let i = Indexer::new();
    i.upsert(obj("a", "p", "x", "1")).unwrap();
    i.begin_relist().unwrap();
    i.relist_page(vec![obj("a", "p", "x", "1"), obj("b", "q", "y", "2")])
        .unwrap();
    i.add_indexers([("tags".to_string(), tags())]).unwrap();
    let r = i.reader();
    assert_eq!(dump(&r, "tags").keys().collect::<Vec<_>>(), ["x"]);
    i.end_relist("3".into()).unwrap();
    assert_eq!(dump(&r, "tags").keys().collect::<Vec<_>>(), ["x", "y"]);
    // A staged object the new function refuses: nothing is added, live or staged.
    i.begin_relist().unwrap();
    i.relist_page(vec![obj("c", "r", "w", "4")]).unwrap();
    let picky = index::func(|o: &DynamicObject| {
        if o.name() == "r" {
            Err("no r".to_string())
        } else {
            Ok(vec![])
        }
    });
    assert!(matches!(
        i.add_indexers([("picky".to_string(), picky)]),
        Err(Error::IndexFunc { .. })
    ));
    assert_eq!(r.index_names(), ["tags"]);
}

#[test]
fn every_write_returns_the_object_it_replaced() {
    let i = indexer();
    let (a1, a2, b1) = (
        obj("n", "a", "x", "1"),
        obj("n", "a", "y", "2"),
        obj("n", "b", "x", "3"),
    );
    assert!(i.upsert(Arc::clone(&a1)).unwrap().is_none());
    assert!(Arc::ptr_eq(
        &i.upsert(Arc::clone(&a2)).unwrap().unwrap(),
        &a1
    ));
    assert!(i.upsert(obj("n", "a", "bad", "9")).is_err());
    assert!(Arc::ptr_eq(&i.remove("n/a").unwrap(), &a2));
    assert!(i.remove("n/a").is_none());

    let (c1, c2) = (obj("n", "c", "x", "4"), obj("n", "c", "z", "5"));
    i.upsert(Arc::clone(&a1)).unwrap();
    let out = i.apply_batch(vec![
        CacheOp::Upsert(Arc::clone(&b1)),
        CacheOp::Upsert(Arc::clone(&c1)),
        CacheOp::Upsert(Arc::clone(&c2)),
        CacheOp::Upsert(obj("n", "d", "bad", "6")),
        CacheOp::Remove(ObjectKey::new(Some("n"), "a")),
        CacheOp::Remove(ObjectKey::new(Some("n"), "a")),
    ]);
    assert_eq!(out.len(), 6);
    assert!(out[0].as_ref().unwrap().is_none());
    assert!(out[1].as_ref().unwrap().is_none());
    assert!(Arc::ptr_eq(out[2].as_ref().unwrap().as_ref().unwrap(), &c1));
    assert!(matches!(&out[3], Err(StoreError::IndexFunc { key, .. }) if key == "n/d"));
    assert!(Arc::ptr_eq(out[4].as_ref().unwrap().as_ref().unwrap(), &a1));
    assert!(out[5].as_ref().unwrap().is_none());
    let r = i.reader();
    assert_eq!(
        r.list_keys().iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        ["n/b", "n/c"]
    );
    assert_eq!(dump(&r, "tags").keys().collect::<Vec<_>>(), ["x", "z"]);

    // replace_all: per object what it replaced; removed in key order, refused-but-held included.
    i.upsert(obj("n", "e", "x", "7")).unwrap();
    i.upsert(obj("m", "f", "x", "8")).unwrap();
    let (b2, g) = (obj("n", "b", "y", "10"), obj("n", "g", "x", "11"));
    let replaced = i.replace_all(vec![
        Arc::clone(&b2),
        Arc::clone(&g),
        obj("n", "c", "bad", "12"),
    ]);
    assert!(Arc::ptr_eq(
        replaced.outcomes[0].as_ref().unwrap().as_ref().unwrap(),
        &b1
    ));
    assert!(replaced.outcomes[1].as_ref().unwrap().is_none());
    assert!(
        matches!(&replaced.outcomes[2], Err(StoreError::IndexFunc { key, .. }) if key == "n/c")
    );
    assert_eq!(
        replaced
            .removed
            .iter()
            .map(|o| o.key().to_string())
            .collect::<Vec<_>>(),
        ["m/f", "n/c", "n/e"]
    );
    assert!(Arc::ptr_eq(&replaced.removed[1], &c2));
    assert_eq!(
        r.list_keys().iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        ["n/b", "n/g"]
    );
    assert_eq!(dump(&r, "tags").keys().collect::<Vec<_>>(), ["x", "y"]);
    assert_eq!(dump(&r, index::NAMESPACE).keys().collect::<Vec<_>>(), ["n"]);
}

#[test]
fn readers_never_see_half_a_batch() {
    // Invariant kept by every batch: exactly one of `p`, `q` is tagged `x` and the other `y`,
    // and `r` is always there (each batch removes and re-adds it).
    let i = indexer();
    i.upsert(obj("n", "p", "x", "0")).unwrap();
    i.upsert(obj("n", "q", "y", "0")).unwrap();
    i.upsert(obj("n", "r", "z", "0")).unwrap();
    let reader = i.reader();
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (r, done) = (reader.clone(), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut checks = 0u64;
                while !done.load(Ordering::Relaxed) || checks == 0 {
                    // One read lock for the whole look, through the index and through the items.
                    let mut seen: Vec<String> = Vec::new();
                    r.for_each(&mut |o| seen.push(o.labels()["tags"].clone()));
                    seen.sort();
                    assert_eq!(seen, ["x", "y", "z"], "a half-applied batch");
                    for value in ["x", "y"] {
                        let found = r.by_index("tags", value).unwrap();
                        assert_eq!(found.len(), 1, "{value} has one object");
                        assert_eq!(found[0].labels()["tags"], value);
                    }
                    assert_eq!(r.index_keys("tags", "z").unwrap().len(), 1);
                    checks += 1;
                }
                checks
            })
        })
        .collect();
    for round in 1..=2000u32 {
        let (px, qx) = if round % 2 == 0 {
            ("x", "y")
        } else {
            ("y", "x")
        };
        let rv = round.to_string();
        let out = i.apply_batch(vec![
            CacheOp::Upsert(obj("n", "p", px, &rv)),
            CacheOp::Remove(ObjectKey::new(Some("n"), "r")),
            CacheOp::Upsert(obj("n", "q", qx, &rv)),
            CacheOp::Upsert(obj("n", "r", "z", &rv)),
        ]);
        assert!(out[..3].iter().all(|o| matches!(o, Ok(Some(_)))));
        assert!(
            matches!(out[3], Ok(None)),
            "r was removed earlier in the batch"
        );
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
}

#[test]
fn public_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Indexer<DynamicObject>>();
    send_sync::<IndexerReader<DynamicObject>>();
    send_sync::<Indexer<k8s_openapi::api::core::v1::Pod>>();
    send_sync::<IndexerReader<k8s_openapi::api::core::v1::Pod>>();
    send_sync::<Error>();
    send_sync::<IndexFunc<DynamicObject>>();
    // And usable as the core seams, boxed.
    let i = indexer();
    let write: Box<dyn CacheWrite<DynamicObject>> = Box::new(indexer());
    assert!(write.upsert(obj("n", "a", "x", "1")).unwrap().is_none());
    let store: Arc<dyn kinformer_core::ReflectorStore<DynamicObject>> = Arc::new(indexer());
    store
        .replace(vec![obj("n", "a", "x", "1")], "1".into())
        .unwrap();
    let read: Arc<dyn IndexRead<DynamicObject>> = Arc::new(i.reader());
    assert_eq!(read.namespace_index(), Some(index::NAMESPACE));
    let read: &dyn IndexRead<DynamicObject> = &i;
    assert!(read.has_index("tags"));
}
