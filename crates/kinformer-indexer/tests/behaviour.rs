//! Errors, built-in indexes, the store and cache traits, and reads running while a writer writes.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinformer_core::{
    CacheRead, CacheWrite, DynamicObject, IndexRead, Object, ReflectorStoreExt, StoreError,
};
use kinformer_indexer::{Error, Indexer, IndexerReader, index};
use support::{dump, obj, tags};

fn keys(objects: &[Arc<DynamicObject>]) -> Vec<String> {
    let mut k: Vec<String> = objects.iter().map(|o| o.key().to_string()).collect();
    k.sort();
    k
}

#[test]
fn an_unknown_index_name_is_an_error_for_every_read() {
    let indexer: Indexer<DynamicObject> = Indexer::new();
    let r = indexer.reader();
    let unknown = StoreError::UnknownIndex {
        name: "nope".into(),
    };
    assert_eq!(r.by_index("nope", "x").unwrap_err(), unknown);
    assert_eq!(r.index("nope", &obj("", "a", "")).unwrap_err(), unknown);
    assert_eq!(r.index_keys("nope", "x").unwrap_err(), unknown);
    assert_eq!(r.list_index_func_values("nope").unwrap_err(), unknown);
    assert_eq!(
        r.for_each_indexed("nope", "x", &mut |_| {}).unwrap_err(),
        unknown
    );
    assert!(!r.has_index("nope"));
    assert_eq!(
        IndexRead::by_index(&indexer, "nope", "x").unwrap_err(),
        unknown
    );
    assert!(r.namespace_index().is_none());
}

#[test]
fn a_duplicate_index_name_is_an_error_and_adds_nothing() {
    let indexer = Indexer::with_indexers([("tags".to_string(), tags())]).unwrap();
    let err = indexer.add_indexers([
        ("ns".to_string(), index::namespace()),
        ("tags".to_string(), tags()),
    ]);
    assert_eq!(
        err.unwrap_err(),
        Error::DuplicateIndex {
            name: "tags".into()
        }
    );
    let err = indexer.add_indexers([
        ("ns".to_string(), index::namespace()),
        ("ns".to_string(), index::namespace()),
    ]);
    assert_eq!(
        err.unwrap_err(),
        Error::DuplicateIndex { name: "ns".into() }
    );
    assert_eq!(indexer.reader().index_names(), ["tags"]);
}

#[test]
fn indexes_added_later_index_what_is_cached() {
    let indexer = Indexer::new();
    indexer.upsert(obj("shop", "a", "x")).unwrap();
    indexer.upsert(obj("blog", "b", "x,y")).unwrap();
    indexer
        .add_indexers([("tags".to_string(), tags())])
        .unwrap();
    indexer
        .add_indexers([(index::NAMESPACE.to_string(), index::namespace())])
        .unwrap();
    let r = indexer.reader();
    assert_eq!(r.index_names(), ["tags", "namespace"]);
    assert_eq!(
        dump(&r, "tags").into_iter().collect::<Vec<_>>(),
        [
            (
                "x".to_string(),
                vec!["blog/b".to_string(), "shop/a".to_string()]
            ),
            ("y".to_string(), vec!["blog/b".to_string()])
        ]
    );
    assert_eq!(
        keys(&r.by_index(index::NAMESPACE, "shop").unwrap()),
        ["shop/a"]
    );
}

#[test]
fn a_failing_index_function_is_returned_never_a_panic() {
    let indexer = Indexer::with_indexers([("tags".to_string(), tags())]).unwrap();
    let r = indexer.reader();
    indexer.upsert(obj("ns", "a", "x")).unwrap();
    // Add/update: not stored, the previous state stays.
    let err = indexer.upsert(obj("ns", "a", "bad")).unwrap_err();
    assert!(
        matches!(&err, StoreError::IndexFunc { index, key, .. } if index == "tags" && key == "ns/a"),
        "{err}"
    );
    assert_eq!(r.get_by_key("ns/a").unwrap().labels()["tags"], "x");
    assert_eq!(keys(&r.by_index("tags", "x").unwrap()), ["ns/a"]);
    // Through the reflector's trait the error is the same, field for field (nothing lost).
    let store_err = ReflectorStoreExt::add(&indexer, obj("ns", "b", "bad")).unwrap_err();
    assert_eq!(
        store_err,
        StoreError::IndexFunc {
            index: "tags".into(),
            key: "ns/b".into(),
            message: "the tag `bad` cannot be indexed".into(),
        }
    );
    assert!(r.get_by_key("ns/b").is_none());
    // Replace: the failing object is left out, the others are stored.
    let replaced = indexer.replace_all(vec![
        obj("ns", "c", "y"),
        obj("ns", "d", "bad"),
        obj("ns", "e", "y"),
    ]);
    assert!(
        matches!(&replaced.outcomes[1], Err(StoreError::IndexFunc { key, .. }) if key == "ns/d")
    );
    assert!(replaced.outcomes[0].is_ok() && replaced.outcomes[2].is_ok());
    assert_eq!(
        r.list_keys().iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        ["ns/c", "ns/e"]
    );
    // The same through the reflector's replace: the first refusal comes back after the swap.
    let err = ReflectorStoreExt::replace(
        &indexer,
        vec![
            obj("ns", "c", "y"),
            obj("ns", "d", "bad"),
            obj("ns", "e", "y"),
        ],
        "5".into(),
    )
    .unwrap_err();
    assert!(matches!(err, StoreError::IndexFunc { ref key, .. } if key == "ns/d"));
    assert_eq!(
        r.list_keys().iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        ["ns/c", "ns/e"]
    );
    // add_indexers: nothing is added if the function fails on a cached object.
    let picky = index::func(|o: &DynamicObject| {
        if o.name() == "e" {
            Err("no e".into())
        } else {
            Ok(vec![])
        }
    });
    assert!(matches!(
        indexer.add_indexers([("picky".to_string(), picky)]),
        Err(Error::IndexFunc { .. })
    ));
    assert_eq!(r.index_names(), ["tags"]);
    // index(): the function's error for the probe object.
    assert!(matches!(
        r.index("tags", &obj("ns", "z", "bad")),
        Err(StoreError::IndexFunc { .. })
    ));
}

#[test]
fn index_returns_objects_sharing_any_value() {
    let indexer = Indexer::with_indexers([("tags".to_string(), tags())]).unwrap();
    indexer.upsert(obj("", "a", "x")).unwrap();
    indexer.upsert(obj("", "b", "y")).unwrap();
    indexer.upsert(obj("", "c", "z")).unwrap();
    indexer.upsert(obj("", "d", "x,y")).unwrap();
    let r = indexer.reader();
    assert_eq!(
        keys(&r.index("tags", &obj("", "probe", "x,y")).unwrap()),
        ["a", "b", "d"]
    );
    assert!(r.index("tags", &obj("", "probe", "q")).unwrap().is_empty());
    assert!(r.by_index("tags", "q").unwrap().is_empty());
}

#[test]
fn delete_removes_whatever_is_stored_under_the_key() {
    let indexer = Indexer::with_indexers([("tags".to_string(), tags())]).unwrap();
    indexer.upsert(obj("", "a", "x")).unwrap();
    // The delete carries another state of the object; the stored one's values are removed.
    ReflectorStoreExt::delete(&indexer, obj("", "a", "y")).unwrap();
    assert!(dump(&indexer.reader(), "tags").is_empty());
    assert!(indexer.reader().is_empty());
    ReflectorStoreExt::delete(&indexer, obj("", "a", "x")).unwrap();
    // Removing by key returns the stored object, whatever state the caller knows.
    indexer.upsert(obj("", "a", "x")).unwrap();
    let removed = indexer.remove(obj("", "a", "y").key().as_str()).unwrap();
    assert_eq!(removed.labels()["tags"], "x");
    assert!(dump(&indexer.reader(), "tags").is_empty());
    assert!(indexer.remove("a").is_none());
}

fn pod(ns: &str, name: &str, node: &str) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            ..PodSpec::default()
        }),
        ..Pod::default()
    })
}

#[test]
fn pods_by_node_and_namespace_through_the_store_traits() {
    let indexer = Indexer::with_indexers([
        (index::NAMESPACE.to_string(), index::namespace()),
        (index::POD_NODE_NAME.to_string(), index::pod_node_name()),
    ])
    .unwrap();
    let store: &dyn kinformer_core::ReflectorStore<Pod> = &indexer;
    store
        .replace(
            vec![
                pod("a", "p1", "n1"),
                pod("a", "p2", "n2"),
                pod("b", "p3", "n1"),
            ],
            "10".into(),
        )
        .unwrap();
    store.update(pod("a", "p2", "n1")).unwrap();
    store.delete(pod("b", "p3", "n1")).unwrap();
    let r = indexer.reader();
    let known: &dyn CacheRead<Pod> = &r;
    assert_eq!(
        known
            .list_keys()
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>(),
        ["a/p1", "a/p2"]
    );
    assert!(CacheRead::get_by_key(&indexer, "a/p1").is_some());
    assert_eq!(IndexRead::index_names(&indexer), r.index_names());
    assert_eq!(r.index_keys(index::POD_NODE_NAME, "n1").unwrap().len(), 2);
    assert_eq!(
        r.list_index_func_values(index::POD_NODE_NAME).unwrap(),
        ["n1"]
    );
    assert_eq!(r.list_index_func_values(index::NAMESPACE).unwrap(), ["a"]);
}

#[test]
fn readers_see_each_update_whole_while_a_writer_writes() {
    // Each object moves between two values; a reader must never see a key under a value its
    // object does not have, nor a value with no key.
    let indexer = Indexer::with_indexers([("tags".to_string(), tags())]).unwrap();
    for i in 0..50 {
        indexer.upsert(obj("", &format!("o{i}"), "even")).unwrap();
    }
    let reader: IndexerReader<DynamicObject> = indexer.reader();
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (r, done) = (reader.clone(), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut checks = 0u64;
                while !done.load(Ordering::Relaxed) || checks == 0 {
                    for value in ["even", "odd"] {
                        for o in r.by_index("tags", value).unwrap() {
                            assert_eq!(o.labels()["tags"], value);
                        }
                    }
                    assert_eq!(r.len(), 50);
                    checks += 1;
                }
                checks
            })
        })
        .collect();
    for round in 0..200 {
        let value = if round % 2 == 0 { "odd" } else { "even" };
        for i in 0..50 {
            ReflectorStoreExt::update(&indexer, obj("", &format!("o{i}"), value)).unwrap();
        }
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert_eq!(dump(&reader, "tags")["even"].len(), 50);
}

#[test]
fn handles_are_send_sync_and_readers_are_cloneable_and_dyn() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    let indexer: Indexer<DynamicObject> = Indexer::new();
    send_sync(&indexer);
    let reader = indexer.reader();
    send_sync(&reader);
    let boxed: Box<dyn IndexRead<DynamicObject>> = Box::new(reader.clone());
    let arc: Arc<dyn IndexRead<DynamicObject>> = Arc::new(boxed);
    indexer.upsert(obj("", "a", "")).unwrap();
    assert_eq!(arc.list().len(), 1);
    assert!(arc.get_by_key("a").is_some());
}
