//! Lister queries as data (namespace, selector → exact keys), the namespace index's cost, errors,
//! and a property test against a plain filter over every object.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kinformer_core::{
    ApiResource, CacheRead, CacheWrite, DynamicObject, IndexRead, LabelSelector, Object, ObjectKey,
    Scope, StoreError,
};
use kinformer_indexer::{Indexer, index};
use kinformer_lister::{Error, Lister};
use proptest::prelude::*;

fn obj(ns: &str, name: &str, labels: &[(&str, &str)]) -> Arc<DynamicObject> {
    let mut o = DynamicObject::default();
    o.metadata.namespace = (!ns.is_empty()).then(|| ns.to_string());
    o.metadata.name = Some(name.into());
    o.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    Arc::new(o)
}

fn sorted_keys(objects: Vec<Arc<DynamicObject>>) -> Vec<String> {
    let mut k: Vec<String> = objects.iter().map(|o| o.key().to_string()).collect();
    k.sort();
    k
}

/// (namespace, name, labels).
type Spec = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

const OBJECTS: &[Spec] = &[
    ("shop", "web-0", &[("app", "web"), ("tier", "front")]),
    (
        "shop",
        "web-1",
        &[("app", "web"), ("tier", "front"), ("canary", "yes")],
    ),
    ("shop", "db-0", &[("app", "db"), ("tier", "back")]),
    ("blog", "web-0", &[("app", "web")]),
    ("blog", "cache", &[]),
    ("", "node-1", &[("zone", "a")]),
];

/// (namespace, selector, expected keys); `None` lists all namespaces through `Lister::list`.
const QUERIES: &[(Option<&str>, &str, &[&str])] = &[
    (
        None,
        "",
        &[
            "blog/cache",
            "blog/web-0",
            "node-1",
            "shop/db-0",
            "shop/web-0",
            "shop/web-1",
        ],
    ),
    (None, "app=web", &["blog/web-0", "shop/web-0", "shop/web-1"]),
    (None, "app=web,!canary", &["blog/web-0", "shop/web-0"]),
    (
        None,
        "app in (web,db),tier",
        &["shop/db-0", "shop/web-0", "shop/web-1"],
    ),
    (None, "zone", &["node-1"]),
    (None, "app=none", &[]),
    (Some("shop"), "", &["shop/db-0", "shop/web-0", "shop/web-1"]),
    (Some("shop"), "tier=front", &["shop/web-0", "shop/web-1"]),
    (Some("blog"), "app!=web", &["blog/cache"]),
    (Some("blog"), "tier", &[]),
    (Some("nowhere"), "", &[]),
    (
        Some(""),
        "app=web",
        &["blog/web-0", "shop/web-0", "shop/web-1"],
    ),
];

fn filled(with_namespace_index: bool) -> Indexer<DynamicObject> {
    let indexer = Indexer::new();
    if with_namespace_index {
        indexer
            .add_indexers([(index::NAMESPACE.to_string(), index::namespace())])
            .unwrap();
    }
    for (ns, name, labels) in OBJECTS {
        indexer.upsert(obj(ns, name, labels)).unwrap();
    }
    indexer
}

#[test]
fn queries_return_exactly_the_matching_objects_with_and_without_a_namespace_index() {
    for with_index in [true, false] {
        let indexer = filled(with_index);
        let lister = Lister::new(indexer.reader(), "widgets");
        for (ns, selector, want) in QUERIES {
            let sel: LabelSelector = selector.parse().unwrap();
            let got = match ns {
                None => lister.list(&sel),
                Some(ns) => lister.namespaced(ns).list(&sel),
            };
            assert_eq!(
                sorted_keys(got),
                *want,
                "index {with_index}, {ns:?}, {selector:?}"
            );
        }
        assert!(lister.list(&LabelSelector::nothing()).is_empty());
        assert!(
            lister
                .namespaced("shop")
                .list(&LabelSelector::nothing())
                .is_empty()
        );
    }
}

#[test]
fn get_finds_by_name_and_not_found_names_the_resource() {
    let indexer = filled(true);
    let deployments =
        ApiResource::new("apps", "v1", "Deployment", "deployments", Scope::Namespaced);
    let lister = Lister::for_resource(indexer.reader(), &deployments);
    assert_eq!(
        lister.namespaced("shop").get("db-0").unwrap().name(),
        "db-0"
    );
    assert_eq!(lister.get("node-1").unwrap().name(), "node-1");
    let err = lister.namespaced("blog").get("db-0").unwrap_err();
    assert_eq!(err.to_string(), r#"deployments.apps "db-0" not found"#);
    assert_eq!(
        err,
        Error::NotFound {
            resource: "deployments.apps".into(),
            namespace: Some("blog".into()),
            name: "db-0".into()
        }
    );
    let err = lister.get("web-0").unwrap_err();
    assert!(matches!(
        err,
        Error::NotFound {
            namespace: None,
            ..
        }
    ));
}

#[test]
fn by_index_answers_any_index_and_reports_unknown_ones() {
    let indexer = filled(true);
    indexer
        .add_indexers([("app".to_string(), index::label("app"))])
        .unwrap();
    let lister = Lister::new(indexer.reader(), "widgets");
    assert_eq!(
        sorted_keys(lister.by_index("app", "web").unwrap()),
        ["blog/web-0", "shop/web-0", "shop/web-1"]
    );
    assert_eq!(
        lister.by_index("nope", "x").unwrap_err(),
        Error::Index(StoreError::UnknownIndex {
            name: "nope".into()
        })
    );
}

/// Counts the objects a lister is shown.
struct Counting<R> {
    inner: R,
    visited: AtomicUsize,
}

impl<K, R: IndexRead<K>> CacheRead<K> for Counting<R> {
    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.inner.get_by_key(key)
    }
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.inner.list_keys()
    }
    fn for_each(&self, f: &mut dyn FnMut(&Arc<K>)) {
        self.inner.for_each(&mut |o| {
            self.visited.fetch_add(1, Ordering::Relaxed);
            f(o)
        })
    }
}

impl<K, R: IndexRead<K>> IndexRead<K> for Counting<R> {
    fn for_each_indexed(
        &self,
        index: &str,
        value: &str,
        f: &mut dyn FnMut(&Arc<K>),
    ) -> Result<(), StoreError> {
        self.inner.for_each_indexed(index, value, &mut |o| {
            self.visited.fetch_add(1, Ordering::Relaxed);
            f(o)
        })
    }
    fn index_names(&self) -> Vec<String> {
        self.inner.index_names()
    }
    fn namespace_index(&self) -> Option<&'static str> {
        self.inner.namespace_index()
    }
}

/// `n` objects: 10 in namespace `small`, the rest in `big`.
fn fill_small_and_big(indexer: &Indexer<DynamicObject>, n: usize) {
    for i in 0..n {
        let ns = if i < 10 { "small" } else { "big" };
        indexer.upsert(obj(ns, &format!("o{i}"), &[])).unwrap();
    }
}

#[test]
fn a_namespace_list_costs_that_namespace_only_when_indexed() {
    let indexer =
        Indexer::with_indexers([(index::NAMESPACE.to_string(), index::namespace())]).unwrap();
    fill_small_and_big(&indexer, 1000);
    let lister = Lister::new(
        Counting {
            inner: indexer.reader(),
            visited: AtomicUsize::new(0),
        },
        "widgets",
    );
    assert_eq!(
        lister
            .namespaced("small")
            .list(&LabelSelector::everything())
            .len(),
        10
    );
    assert_eq!(
        lister.reader().visited.load(Ordering::Relaxed),
        10,
        "only the namespace's objects"
    );

    let unindexed = Indexer::new();
    for i in 0..1000 {
        unindexed
            .upsert(obj(
                if i < 10 { "small" } else { "big" },
                &format!("o{i}"),
                &[],
            ))
            .unwrap();
    }
    let lister = Lister::new(
        Counting {
            inner: unindexed.reader(),
            visited: AtomicUsize::new(0),
        },
        "widgets",
    );
    assert_eq!(
        lister
            .namespaced("small")
            .list(&LabelSelector::everything())
            .len(),
        10
    );
    assert_eq!(
        lister.reader().visited.load(Ordering::Relaxed),
        1000,
        "a scan without the index"
    );
}

/// A cache whose namespace index has another name, which it says through `namespace_index`.
struct Renamed<R>(R);

impl<K, R: IndexRead<K>> CacheRead<K> for Renamed<R> {
    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.0.get_by_key(key)
    }
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.0.list_keys()
    }
    fn for_each(&self, f: &mut dyn FnMut(&Arc<K>)) {
        self.0.for_each(f)
    }
}

impl<K, R: IndexRead<K>> IndexRead<K> for Renamed<R> {
    fn for_each_indexed(
        &self,
        index: &str,
        value: &str,
        f: &mut dyn FnMut(&Arc<K>),
    ) -> Result<(), StoreError> {
        self.0.for_each_indexed(index, value, f)
    }
    fn index_names(&self) -> Vec<String> {
        self.0.index_names()
    }
    fn namespace_index(&self) -> Option<&'static str> {
        Some("by-ns")
    }
}

#[test]
fn the_namespace_index_is_the_one_the_cache_names() {
    let indexer = Indexer::with_indexers([("by-ns".to_string(), index::namespace())]).unwrap();
    fill_small_and_big(&indexer, 100);
    let lister = Lister::new(
        Counting {
            inner: Renamed(indexer.reader()),
            visited: AtomicUsize::new(0),
        },
        "widgets",
    );
    assert_eq!(
        lister
            .namespaced("small")
            .list(&LabelSelector::everything())
            .len(),
        10
    );
    assert_eq!(lister.reader().visited.load(Ordering::Relaxed), 10);
}

const NS: &[&str] = &["", "a", "b"];
const KEYS: &[&str] = &["app", "tier"];
const VALUES: &[&str] = &["x", "y"];

fn selector() -> impl Strategy<Value = String> {
    let req = (0..KEYS.len(), 0..5usize, 0..VALUES.len()).prop_map(|(k, op, v)| {
        let (k, v) = (KEYS[k], VALUES[v]);
        match op {
            0 => format!("{k}={v}"),
            1 => format!("{k}!={v}"),
            2 => k.to_string(),
            3 => format!("!{k}"),
            _ => format!("{k} in (x,{v})"),
        }
    });
    proptest::collection::vec(req, 0..3).prop_map(|r| r.join(","))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn lists_equal_a_plain_filter(
        objects in proptest::collection::vec((0..NS.len(), 0..8usize, proptest::collection::btree_map(0..KEYS.len(), 0..VALUES.len(), 0..3)), 0..20),
        queries in proptest::collection::vec((0..NS.len(), selector()), 1..6),
        with_index in any::<bool>(),
    ) {
        let indexer = Indexer::new();
        if with_index {
            indexer.add_indexers([(index::NAMESPACE.to_string(), index::namespace())]).unwrap();
        }
        let mut model: BTreeMap<String, Arc<DynamicObject>> = BTreeMap::new();
        for (ns, name, labels) in objects {
            let labels: Vec<(&str, &str)> = labels.into_iter().map(|(k, v)| (KEYS[k], VALUES[v])).collect();
            let o = obj(NS[ns], &format!("o{name}"), &labels);
            model.insert(o.key().to_string(), Arc::clone(&o));
            indexer.upsert(o).unwrap();
        }
        let lister = Lister::new(indexer.reader(), "widgets");
        for (ns, sel) in queries {
            let parsed: LabelSelector = sel.parse().unwrap();
            let want: Vec<String> = model
                .iter()
                .filter(|(_, o)| NS[ns].is_empty() || o.namespace() == Some(NS[ns]))
                .filter(|(_, o)| parsed.matches(o.labels()))
                .map(|(k, _)| k.clone())
                .collect();
            prop_assert_eq!(sorted_keys(lister.namespaced(NS[ns]).list(&parsed)), want, "{:?} {:?}", NS[ns], sel);
        }
    }
}

#[test]
fn listers_are_send_sync_and_work_over_a_dyn_reader() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    let indexer = filled(true);
    let dyn_reader: Arc<dyn IndexRead<DynamicObject>> = Arc::new(indexer.reader());
    let lister = Lister::new(dyn_reader, "widgets");
    send_sync(&lister);
    send_sync(&lister.namespaced("shop"));
    assert_eq!(
        lister
            .namespaced("shop")
            .list(&LabelSelector::everything())
            .len(),
        3
    );
}
