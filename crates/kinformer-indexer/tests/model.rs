//! Property test: random writes against a plain map; after every step each index equals a
//! recomputation from scratch, and the cache holds exactly the model's objects.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use kinformer_core::{DynamicObject, Object, ObjectKey};
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
        1 => proptest::collection::vec(put, 0..6).prop_map(Op::Replace),
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
                    let result = indexer.add(Arc::clone(&o));
                    if indexable(&o) {
                        prop_assert!(result.is_ok());
                        model.insert(o.key(), o);
                    } else {
                        let is_index_func_error = matches!(result, Err(Error::IndexFunc { .. }));
                        prop_assert!(is_index_func_error);
                    }
                }
                Op::Delete(ns, name) => {
                    let key = ObjectKey::new(Some(NAMESPACES[ns]), NAMES[name]);
                    let removed = indexer.delete_key(key.as_str());
                    prop_assert_eq!(removed.is_some(), model.remove(&key).is_some());
                }
                Op::Replace(list) => {
                    let list: Vec<Arc<DynamicObject>> = list.iter().map(|(n, m, t)| make(*n, *m, t)).collect();
                    let result = indexer.replace(list.clone());
                    prop_assert_eq!(result.is_ok(), list.iter().all(|o| indexable(o)));
                    model = list.into_iter().filter(|o| indexable(o)).map(|o| (o.key(), o)).collect();
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
