//! Data-driven scenarios: writes to an indexer and the exact contents of its multi-value index.

mod support;

use kinformer_core::{CacheWrite, ReflectorStoreExt};
use kinformer_indexer::Indexer;
use support::{dump, obj, tags};

#[derive(Debug, Clone, Copy)]
enum Op {
    /// Add or update the cluster-scoped object `name` with these comma-separated tags.
    Put(&'static str, &'static str),
    Del(&'static str),
    Replace(&'static [(&'static str, &'static str)]),
    /// A relist through the reflector's protocol, one slice per page.
    Relist(&'static [&'static [(&'static str, &'static str)]]),
    /// The `tags` index must be exactly this: value -> sorted keys.
    Expect(&'static [(&'static str, &'static [&'static str])]),
}

use Op::*;

const SCENARIOS: &[(&str, &[Op])] = &[
    (
        "a multi-value update shrinks the object's values and removes the empty ones",
        &[
            Put("a", "x,y,z"),
            Put("b", "y"),
            Expect(&[("x", &["a"]), ("y", &["a", "b"]), ("z", &["a"])]),
            Put("a", "y"),
            Expect(&[("y", &["a", "b"])]),
            Put("a", "w,y"),
            Expect(&[("w", &["a"]), ("y", &["a", "b"])]),
            Del("b"),
            Expect(&[("w", &["a"]), ("y", &["a"])]),
            Del("a"),
            Expect(&[]),
        ],
    ),
    (
        "an object that loses every value leaves the index",
        &[
            Put("a", "x"),
            Put("a", ""),
            Expect(&[]),
            Put("a", "x"),
            Expect(&[("x", &["a"])]),
        ],
    ),
    (
        "a value produced twice counts once",
        &[
            Put("a", "x,x"),
            Expect(&[("x", &["a"])]),
            Put("a", "y"),
            Expect(&[("y", &["a"])]),
        ],
    ),
    (
        "deleting an unknown key changes nothing",
        &[Put("a", "x"), Del("zz"), Expect(&[("x", &["a"])])],
    ),
    (
        "replace rebuilds every index",
        &[
            Put("a", "x"),
            Replace(&[("b", "y"), ("c", "x,y")]),
            Expect(&[("x", &["c"]), ("y", &["b", "c"])]),
            Replace(&[]),
            Expect(&[]),
        ],
    ),
    (
        "a key listed twice in a replace keeps the later object",
        &[Replace(&[("a", "x"), ("a", "y")]), Expect(&[("y", &["a"])])],
    ),
    (
        "a relist by pages rebuilds every index, a key listed on two pages keeps the later",
        &[
            Put("a", "x"),
            Put("z", "w"),
            Relist(&[&[("b", "y"), ("a", "x")], &[], &[("c", "x,y"), ("b", "z")]]),
            Expect(&[("x", &["a", "c"]), ("y", &["c"]), ("z", &["b"])]),
            Relist(&[]),
            Expect(&[]),
        ],
    ),
];

#[test]
fn scenarios() {
    for (name, ops) in SCENARIOS {
        let indexer = Indexer::with_indexers([("tags".to_string(), tags())]).unwrap();
        let reader = indexer.reader();
        for (i, op) in ops.iter().enumerate() {
            match *op {
                Put(n, t) => {
                    indexer.upsert(obj("", n, t)).unwrap();
                }
                Del(n) => {
                    indexer.remove(n);
                }
                Replace(list) => {
                    let replaced =
                        indexer.replace_all(list.iter().map(|(n, t)| obj("", n, t)).collect());
                    assert!(
                        replaced.outcomes.iter().all(Result::is_ok),
                        "{name}: step {i}"
                    );
                }
                Relist(pages) => {
                    indexer.begin_relist().unwrap();
                    for page in pages {
                        let page = page.iter().map(|(n, t)| obj("", n, t)).collect();
                        indexer.relist_page(page).unwrap();
                    }
                    indexer.end_relist("1".into()).unwrap();
                }
                Expect(want) => {
                    let want: Vec<(String, Vec<String>)> = want
                        .iter()
                        .map(|(v, keys)| {
                            (v.to_string(), keys.iter().map(|k| k.to_string()).collect())
                        })
                        .collect();
                    let got: Vec<(String, Vec<String>)> =
                        dump(&reader, "tags").into_iter().collect();
                    assert_eq!(got, want, "{name}: step {i}");
                }
            }
        }
    }
}
