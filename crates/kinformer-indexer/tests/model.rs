//! Property test: random writes against a plain map; after every step each index equals a
//! recomputation from scratch, the cache holds exactly the model's objects, and every write
//! returned what the model says it replaced.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use kinformer_core::{
    CacheOp, CacheRead, CacheWrite, DynamicObject, Object, ObjectKey, ReflectorStoreExt, StoreError,
};
use kinformer_indexer::{Error, IndexFunc, Indexer, index};
use proptest::prelude::*;
use support::{dump, obj, tags};

const NAMESPACES: &[&str] = &["", "a", "b"];
const NAMES: &[&str] = &["p", "q", "r"];
const TAGS: &[&str] = &["x", "y", "z", "bad"];

#[derive(Debug, Clone)]
enum Op {
    Put(usize, usize, Vec<usize>),
    Delete(usize, usize),
    Replace(Vec<(usize, usize, Vec<usize>)>),
    /// A relist through the reflector's protocol, cut into pages at these points.
    Relist(Vec<(usize, usize, Vec<usize>)>, Vec<usize>),
    /// Puts (`Some`) and deletes (`None`) in one `apply_batch`.
    Batch(Vec<(usize, usize, Option<Vec<usize>>)>),
    /// Add the namespace index (an error if it exists already).
    AddNamespaceIndex,
}

fn tag_set() -> impl Strategy<Value = Vec<usize>> + Clone {
    proptest::collection::vec(0..TAGS.len(), 0..4)
}

fn op() -> impl Strategy<Value = Op> {
    let put = (0..NAMESPACES.len(), 0..NAMES.len(), tag_set());
    prop_oneof![
        6 => put.clone().prop_map(|(n, m, t)| Op::Put(n, m, t)),
        3 => (0..NAMESPACES.len(), 0..NAMES.len()).prop_map(|(n, m)| Op::Delete(n, m)),
        1 => proptest::collection::vec(put.clone(), 0..6).prop_map(Op::Replace),
        1 => (proptest::collection::vec(put, 0..6), proptest::collection::vec(0..7usize, 0..3))
            .prop_map(|(l, s)| Op::Relist(l, s)),
        2 => proptest::collection::vec(
            (0..NAMESPACES.len(), 0..NAMES.len(), proptest::option::of(tag_set())),
            0..5,
        )
        .prop_map(Op::Batch),
        1 => Just(Op::AddNamespaceIndex),
    ]
}

fn make(ns: usize, name: usize, t: &[usize]) -> Arc<DynamicObject> {
    let tags: Vec<&str> = t.iter().map(|&i| TAGS[i]).collect();
    obj(NAMESPACES[ns], NAMES[name], &tags.join(","))
}

/// An index recomputed from scratch over the model's objects.
fn recompute(
    func: &IndexFunc<DynamicObject>,
    model: &BTreeMap<ObjectKey, Arc<DynamicObject>>,
) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (key, o) in model {
        let mut values = func(o).expect("the model holds only indexable objects");
        values.sort();
        values.dedup();
        for v in values {
            out.entry(v).or_default().push(key.to_string());
        }
    }
    out
}

/// Both `None`, or both the same `Arc`.
fn same(got: &Option<Arc<DynamicObject>>, want: &Option<Arc<DynamicObject>>) -> bool {
    match (got, want) {
        (None, None) => true,
        (Some(g), Some(w)) => Arc::ptr_eq(g, w),
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn indexes_always_equal_a_recomputation(ops in proptest::collection::vec(op(), 0..40)) {
        let indexer = Indexer::with_indexers([("tags".to_string(), tags())]).unwrap();
        let reader = indexer.reader();
        let mut funcs: Vec<(&str, IndexFunc<DynamicObject>)> = vec![("tags", tags())];
        let mut model: BTreeMap<ObjectKey, Arc<DynamicObject>> = BTreeMap::new();
        let indexable = |o: &DynamicObject| !o.labels()["tags"].split(',').any(|t| t == "bad");
        for (step, op) in ops.into_iter().enumerate() {
            match op {
                Op::Put(ns, name, t) => {
                    let o = make(ns, name, &t);
                    let result = indexer.upsert(Arc::clone(&o));
                    if indexable(&o) {
                        let previous = model.insert(o.key(), o);
                        prop_assert!(same(&result.unwrap(), &previous), "previous at step {}", step);
                    } else {
                        let is_index_func_error = matches!(result, Err(StoreError::IndexFunc { .. }));
                        prop_assert!(is_index_func_error);
                    }
                }
                Op::Delete(ns, name) => {
                    let key = ObjectKey::new(Some(NAMESPACES[ns]), NAMES[name]);
                    let removed = indexer.remove(key.as_str());
                    prop_assert!(same(&removed, &model.remove(&key)), "removed at step {}", step);
                }
                Op::Replace(list) => {
                    let list: Vec<Arc<DynamicObject>> = list.iter().map(|(n, m, t)| make(*n, *m, t)).collect();
                    let replaced = indexer.replace_all(list.clone());
                    prop_assert_eq!(replaced.outcomes.len(), list.len());
                    let mut next: BTreeMap<ObjectKey, Arc<DynamicObject>> = BTreeMap::new();
                    for (o, outcome) in list.iter().zip(&replaced.outcomes) {
                        if indexable(o) {
                            let previous = next.insert(o.key(), Arc::clone(o)).or_else(|| model.get(&o.key()).cloned());
                            prop_assert!(same(outcome.as_ref().unwrap(), &previous), "outcome at step {}", step);
                        } else {
                            let is_index_func_error = matches!(outcome, Err(StoreError::IndexFunc { .. }));
                            prop_assert!(is_index_func_error);
                        }
                    }
                    let want_removed: Vec<Arc<DynamicObject>> = model
                        .iter()
                        .filter(|(k, _)| !next.contains_key(*k))
                        .map(|(_, o)| Arc::clone(o))
                        .collect();
                    prop_assert_eq!(replaced.removed.len(), want_removed.len());
                    for (got, want) in replaced.removed.iter().zip(&want_removed) {
                        prop_assert!(Arc::ptr_eq(got, want), "removed in key order at step {}", step);
                    }
                    model = next;
                }
                Op::Relist(list, mut cuts) => {
                    let list: Vec<Arc<DynamicObject>> = list.iter().map(|(n, m, t)| make(*n, *m, t)).collect();
                    cuts.push(0);
                    cuts.push(list.len());
                    cuts.iter_mut().for_each(|c| *c = (*c).min(list.len()));
                    cuts.sort_unstable();
                    indexer.begin_relist().unwrap();
                    for w in cuts.windows(2) {
                        indexer.relist_page(list[w[0]..w[1]].to_vec()).unwrap();
                    }
                    let result = indexer.end_relist("1".into());
                    prop_assert_eq!(result.is_ok(), list.iter().all(|o| indexable(o)));
                    let mut next = BTreeMap::new();
                    for o in list.into_iter().filter(|o| indexable(o)) {
                        next.insert(o.key(), o);
                    }
                    model = next;
                }
                Op::Batch(ops) => {
                    let ops: Vec<CacheOp<DynamicObject>> = ops
                        .iter()
                        .map(|(n, m, t)| match t {
                            Some(t) => CacheOp::Upsert(make(*n, *m, t)),
                            None => CacheOp::Remove(ObjectKey::new(Some(NAMESPACES[*n]), NAMES[*m])),
                        })
                        .collect();
                    let outcomes = indexer.apply_batch(ops.clone());
                    prop_assert_eq!(outcomes.len(), ops.len());
                    for (op, outcome) in ops.into_iter().zip(outcomes) {
                        match op {
                            CacheOp::Upsert(o) if indexable(&o) => {
                                let previous = model.insert(o.key(), o);
                                prop_assert!(same(&outcome.unwrap(), &previous), "batch upsert at step {}", step);
                            }
                            CacheOp::Upsert(_) => {
                                let is_index_func_error = matches!(outcome, Err(StoreError::IndexFunc { .. }));
                                prop_assert!(is_index_func_error);
                            }
                            CacheOp::Remove(key) => {
                                prop_assert!(same(&outcome.unwrap(), &model.remove(&key)), "batch remove at step {}", step);
                            }
                        }
                    }
                }
                Op::AddNamespaceIndex => {
                    let result = indexer.add_indexers([(index::NAMESPACE.to_string(), index::namespace())]);
                    if funcs.iter().any(|(n, _)| *n == index::NAMESPACE) {
                        let is_duplicate = matches!(result, Err(Error::DuplicateIndex { .. }));
                        prop_assert!(is_duplicate);
                    } else {
                        prop_assert!(result.is_ok());
                        funcs.push((index::NAMESPACE, index::namespace()));
                    }
                }
            }
            let keys: Vec<ObjectKey> = model.keys().cloned().collect();
            prop_assert_eq!(reader.list_keys(), keys, "keys after step {}", step);
            for (key, o) in &model {
                let got = reader.get_by_key(key.as_str());
                prop_assert!(got.is_some_and(|g| Arc::ptr_eq(&g, o)), "{} after step {}", key, step);
            }
            for (name, func) in &funcs {
                prop_assert_eq!(dump(&reader, name), recompute(func, &model), "index {} after step {}", name, step);
            }
        }
    }
}
