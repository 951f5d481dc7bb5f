//! Data-driven scenarios: a known store, a list of writes, pops with the exact output expected.
//!
//! Each scenario runs against one mode; the consumer applies every pop to the store the FIFO
//! consults as its known objects, as an informer does with its indexer.

mod support;

use std::sync::Arc;

use kinformer_core::{Delta, DeltaQueue, DynamicObject, Popped, ReflectorStoreExt};
use kinformer_delta_fifo::{DeltaFifo, Mode};
use support::{Store, obj, render, render_notification};

/// One step of a scenario.
#[derive(Debug, Clone, Copy)]
enum Op {
    Add(&'static str, &'static str),
    Update(&'static str, &'static str),
    Delete(&'static str, &'static str),
    /// The listed `(name, rv)`s at the list's resourceVersion.
    Replace(&'static [(&'static str, &'static str)], &'static str),
    Resync,
    /// A watch bookmark at this resourceVersion.
    Bookmark(&'static str),
    /// A relist in steps: begin, a page of `(name, rv)`s, the end at a resourceVersion.
    RelistBegin,
    RelistPage(&'static [(&'static str, &'static str)]),
    RelistEnd(&'static str),
    /// Pop, expect this rendering, apply it to the store.
    Pop(&'static str),
    /// Pop, expect this rendering, apply it, and keep the deltas for a later `Requeue`.
    PopHold(&'static str),
    /// Requeue the held deltas; expect whether they went back.
    Requeue(bool),
    Synced(bool),
    /// Expect the store to hold exactly these `name@rv`s.
    StoreIs(&'static [&'static str]),
    /// Expect the last pop's application to have told handlers exactly this (see
    /// `render_notification`).
    Heard(&'static [&'static str]),
}

use Op::*;

struct Scenario {
    name: &'static str,
    mode: Mode,
    batch: usize,
    known: &'static [(&'static str, &'static str)],
    ops: &'static [Op],
}

const SCENARIOS: &[Scenario] = &[
    // --- bookmarks --------------------------------------------------------------------------
    Scenario {
        name: "in order: a bookmark waits behind what came before it, and ends a batch",
        mode: Mode::InOrder,
        batch: 64,
        known: &[],
        ops: &[
            Add("a", "1"),
            Bookmark("5"),
            Bookmark("6"),
            Add("b", "7"),
            Pop("batch: Added(a@1)"),
            Pop("bookmark@6"),
            Heard(&[]),
            StoreIs(&["a@1"]),
            Pop("batch: Added(b@7)"),
        ],
    },
    Scenario {
        name: "in order: a bookmark during a relist's pages is dropped",
        mode: Mode::InOrder,
        batch: 64,
        known: &[],
        ops: &[
            RelistBegin,
            Bookmark("5"),
            RelistPage(&[("a", "1")]),
            RelistEnd("9"),
            Pop("replace@9* [a@1] tombstones []"),
        ],
    },
    Scenario {
        name: "classic: bookmarks have no place and are dropped",
        mode: Mode::Classic,
        batch: 64,
        known: &[],
        ops: &[Add("a", "1"), Bookmark("5"), Pop("a: Added(a@1)")],
    },
    // --- ordering ---------------------------------------------------------------------------
    Scenario {
        name: "classic: a queued key keeps its place while more deltas arrive",
        mode: Mode::Classic,
        batch: 64,
        known: &[],
        ops: &[
            Add("foo", "10"),
            Add("bar", "1"),
            Update("foo", "11"),
            Pop("foo: Added(foo@10) Updated(foo@11)"),
            Pop("bar: Added(bar@1)"),
        ],
    },
    Scenario {
        name: "in-order: arrival order, a batch stops at a repeated key",
        mode: Mode::InOrder,
        batch: 64,
        known: &[],
        ops: &[
            Add("foo", "10"),
            Add("bar", "1"),
            Update("foo", "11"),
            Pop("batch: Added(foo@10), Added(bar@1)"),
            Pop("batch: Updated(foo@11)"),
        ],
    },
    Scenario {
        name: "in-order: a batch stops at the batch size",
        mode: Mode::InOrder,
        batch: 2,
        known: &[],
        ops: &[
            Add("a", "1"),
            Add("b", "2"),
            Add("c", "3"),
            Pop("batch: Added(a@1), Added(b@2)"),
            Pop("batch: Added(c@3)"),
        ],
    },
    // --- relist -----------------------------------------------------------------------------
    Scenario {
        name: "classic: relist after a queued delete (the issue's example)",
        mode: Mode::Classic,
        batch: 64,
        known: &[("foo", "5"), ("bar", "6"), ("baz", "7")],
        ops: &[
            Delete("baz", "10"),
            Replace(&[("foo", "5")], "11"),
            Pop("baz: Deleted(baz@10)"),
            Pop("foo: Replaced(foo@5)"),
            Pop("bar: Tombstone(bar@6)"),
            StoreIs(&["foo@5"]),
        ],
    },
    Scenario {
        name: "in-order: relist after a queued delete (the issue's example)",
        mode: Mode::InOrder,
        batch: 64,
        known: &[("foo", "5"), ("bar", "6"), ("baz", "7")],
        ops: &[
            Delete("baz", "10"),
            Replace(&[("foo", "5")], "11"),
            Pop("batch: Deleted(baz@10)"),
            Pop("replace@11 [foo@5] tombstones [bar@6]"),
            StoreIs(&["foo@5"]),
        ],
    },
    Scenario {
        name: "classic: a tombstone carries the queued newer object, not the stored one",
        mode: Mode::Classic,
        batch: 64,
        known: &[("bar", "6")],
        ops: &[
            Update("bar", "8"),
            Replace(&[], "9"),
            Pop("bar: Updated(bar@8) Tombstone(bar@8)"),
            StoreIs(&[]),
        ],
    },
    Scenario {
        name: "in-order: a tombstone carries the queued newer object, not the stored one",
        mode: Mode::InOrder,
        batch: 64,
        known: &[("bar", "6")],
        ops: &[
            Update("bar", "8"),
            Replace(&[], "9"),
            Pop("batch: Updated(bar@8)"),
            Pop("replace@9 [] tombstones [bar@8]"),
            StoreIs(&[]),
        ],
    },
    Scenario {
        name: "in-order: a relist behind a queued relist takes its tombstones from the queued list",
        mode: Mode::InOrder,
        batch: 64,
        known: &[("old", "1")],
        ops: &[
            Replace(&[("a", "2")], "2"),
            Replace(&[("b", "3")], "3"),
            Pop("replace@2* [a@2] tombstones [old@1]"),
            Pop("replace@3 [b@3] tombstones [a@2]"),
            StoreIs(&["b@3"]),
        ],
    },
    Scenario {
        name: "classic: a listed key with queued deltas gets Replaced appended in its place",
        mode: Mode::Classic,
        batch: 64,
        known: &[],
        ops: &[
            Add("a", "1"),
            Add("b", "2"),
            Replace(&[("b", "3"), ("c", "4")], "5"),
            Pop("a: Added(a@1) Tombstone(a@1)"),
            Pop("b: Added(b@2) Replaced(b@3)"),
            Pop("c: Replaced(c@4)"),
            StoreIs(&["b@3", "c@4"]),
        ],
    },
    // --- delete ---------------------------------------------------------------------------
    Scenario {
        name: "classic: two deletes collapse to the older",
        mode: Mode::Classic,
        batch: 64,
        known: &[("a", "1")],
        ops: &[
            Delete("a", "2"),
            Delete("a", "3"),
            Pop("a: Deleted(a@2)"),
            StoreIs(&[]),
        ],
    },
    Scenario {
        name: "in-order: a second delete of a key is ignored, as classic mode collapses it",
        mode: Mode::InOrder,
        batch: 64,
        known: &[("a", "1")],
        ops: &[
            Delete("a", "2"),
            Delete("a", "3"),
            Pop("batch: Deleted(a@2)"),
            StoreIs(&[]),
        ],
    },
    Scenario {
        name: "classic: a tombstone followed by a delete collapses to the delete",
        mode: Mode::Classic,
        batch: 64,
        known: &[("a", "1")],
        ops: &[
            Add("b", "1"),
            Replace(&[("b", "1")], "2"),
            Delete("a", "3"),
            Pop("b: Added(b@1) Replaced(b@1)"),
            Pop("a: Deleted(a@3)"),
            StoreIs(&["b@1"]),
        ],
    },
    Scenario {
        name: "classic: a delete followed by a tombstone keeps the delete",
        mode: Mode::Classic,
        batch: 64,
        known: &[("a", "1")],
        ops: &[Delete("a", "2"), Replace(&[], "3"), Pop("a: Deleted(a@2)")],
    },
    Scenario {
        name: "classic: deletes of unknown keys are ignored, of queued or known keys kept",
        mode: Mode::Classic,
        batch: 64,
        known: &[("k", "1")],
        ops: &[
            Delete("x", "1"),
            Add("q", "2"),
            Delete("q", "3"),
            Delete("k", "4"),
            Pop("q: Added(q@2) Deleted(q@3)"),
            Pop("k: Deleted(k@4)"),
            StoreIs(&[]),
        ],
    },
    Scenario {
        name: "in-order: deletes of unknown keys are ignored, of queued or known keys kept",
        mode: Mode::InOrder,
        batch: 64,
        known: &[("k", "1")],
        ops: &[
            Delete("x", "1"),
            Add("q", "2"),
            Delete("q", "3"),
            Delete("k", "4"),
            Pop("batch: Added(q@2)"),
            Pop("batch: Deleted(q@3), Deleted(k@4)"),
            StoreIs(&[]),
        ],
    },
    Scenario {
        name: "in-order: a delete behind a queued relist that drops the key is ignored",
        mode: Mode::InOrder,
        batch: 64,
        known: &[("k", "1")],
        ops: &[
            Add("a", "1"),
            Replace(&[("a", "1")], "2"),
            Delete("k", "3"),
            Pop("batch: Added(a@1)"),
            Pop("replace@2 [a@1] tombstones [k@1]"),
            StoreIs(&["a@1"]),
        ],
    },
    // --- resync -----------------------------------------------------------------------------
    Scenario {
        name: "classic: resync skips queued keys",
        mode: Mode::Classic,
        batch: 64,
        known: &[("a", "1"), ("b", "2")],
        ops: &[
            Update("a", "3"),
            Resync,
            Pop("a: Updated(a@3)"),
            Pop("b: Sync(b@2)"),
        ],
    },
    Scenario {
        name: "in-order: a resync is one step that re-delivers what the store holds then",
        mode: Mode::InOrder,
        batch: 64,
        known: &[("a", "1"), ("b", "2")],
        ops: &[
            Update("a", "3"),
            Resync,
            Resync,
            Pop("batch: Updated(a@3)"),
            Heard(&["~a@1>a@3"]),
            Pop("resync"),
            Heard(&["~a@3>a@3", "~b@2>b@2"]),
        ],
    },
    Scenario {
        name: "in-order: a resync behind a queued relist re-delivers the relisted state",
        mode: Mode::InOrder,
        batch: 64,
        known: &[("a", "1"), ("b", "2")],
        ops: &[
            Replace(&[("a", "1")], "3"),
            Resync,
            Pop("replace@3* [a@1] tombstones [b@2]"),
            Heard(&["-?b@2", "~a@1>a@1"]),
            Pop("resync"),
            Heard(&["~a@1>a@1"]),
        ],
    },
    Scenario {
        name: "in-order: with no known objects a delete is queued and the store decides",
        mode: Mode::InOrder,
        batch: 64,
        known: &[],
        ops: &[
            Delete("x", "1"),
            Pop("batch: Deleted(x@1)"),
            Heard(&[]),
            Add("a", "2"),
            Pop("batch: Added(a@2)"),
            Heard(&["+a@2"]),
            Replace(&[], "3"),
            // The queue knows of no store, so the step names no tombstone; the store's own
            // contents say what the relist deletes.
            Pop("replace@3 [] tombstones []"),
            Heard(&["-?a@2"]),
            StoreIs(&[]),
        ],
    },
    // --- has_synced -------------------------------------------------------------------------
    Scenario {
        name: "classic: has_synced counts the first relist's keys",
        mode: Mode::Classic,
        batch: 64,
        known: &[],
        ops: &[
            Synced(false),
            Replace(&[("a", "1"), ("b", "2")], "5"),
            Synced(false),
            Add("c", "3"),
            Pop("a: Replaced(a@1)*"),
            Synced(false),
            Pop("b: Replaced(b@2)*"),
            Synced(true),
            Replace(&[("a", "1")], "6"),
            Synced(true),
            Pop("c: Added(c@3) Tombstone(c@3)"),
            Pop("a: Replaced(a@1)"),
            Pop("b: Tombstone(b@2)"),
        ],
    },
    Scenario {
        name: "in-order: has_synced turns true when the first relist step is popped",
        mode: Mode::InOrder,
        batch: 64,
        known: &[],
        ops: &[
            Synced(false),
            Replace(&[("a", "1"), ("b", "2")], "5"),
            Add("c", "3"),
            Synced(false),
            Pop("replace@5* [a@1, b@2] tombstones []"),
            Synced(true),
            Pop("batch: Added(c@3)"),
        ],
    },
    Scenario {
        name: "classic: an empty first relist syncs at once",
        mode: Mode::Classic,
        batch: 64,
        known: &[],
        ops: &[Synced(false), Replace(&[], "1"), Synced(true)],
    },
    Scenario {
        name: "in-order: an empty first relist syncs once its step is popped",
        mode: Mode::InOrder,
        batch: 64,
        known: &[],
        ops: &[
            Synced(false),
            Replace(&[], "1"),
            Synced(false),
            Pop("replace@1* [] tombstones []"),
            Synced(true),
        ],
    },
    Scenario {
        name: "classic: a first write that is not a relist syncs at once",
        mode: Mode::Classic,
        batch: 64,
        known: &[],
        ops: &[
            Synced(false),
            Resync,
            Synced(false),
            Add("a", "1"),
            Synced(true),
            Pop("a: Added(a@1)"),
        ],
    },
    Scenario {
        name: "classic: the initial relist's tombstones count too",
        mode: Mode::Classic,
        batch: 64,
        known: &[("gone", "1")],
        ops: &[
            Replace(&[("a", "2")], "3"),
            Pop("a: Replaced(a@2)*"),
            Synced(false),
            Pop("gone: Tombstone(gone@1)*"),
            Synced(true),
        ],
    },
    // --- requeue ------------------------------------------------------------------------------
    Scenario {
        name: "classic: a failed key goes back when nothing newer is queued",
        mode: Mode::Classic,
        batch: 64,
        known: &[],
        ops: &[
            Add("a", "1"),
            Add("b", "2"),
            PopHold("a: Added(a@1)"),
            Requeue(true),
            Pop("b: Added(b@2)"),
            Pop("a: Added(a@1)"),
        ],
    },
    Scenario {
        name: "classic: a failed key does not go back over newer deltas",
        mode: Mode::Classic,
        batch: 64,
        known: &[],
        ops: &[
            Add("a", "1"),
            PopHold("a: Added(a@1)"),
            Update("a", "2"),
            Requeue(false),
            Pop("a: Updated(a@2)"),
        ],
    },
    Scenario {
        name: "classic: requeued deltas do not count again towards has_synced",
        mode: Mode::Classic,
        batch: 64,
        known: &[],
        ops: &[
            Replace(&[("a", "1"), ("b", "2")], "3"),
            PopHold("a: Replaced(a@1)*"),
            Requeue(true),
            Synced(false),
            Pop("b: Replaced(b@2)*"),
            Synced(true),
            Pop("a: Replaced(a@1)*"),
            Synced(true),
        ],
    },
    Scenario {
        name: "in-order: a failed delta goes back unless something newer is queued",
        mode: Mode::InOrder,
        batch: 1,
        known: &[],
        ops: &[
            Add("a", "1"),
            Add("b", "2"),
            PopHold("batch: Added(a@1)"),
            Requeue(true),
            PopHold("batch: Added(b@2)"),
            Update("b", "3"),
            Requeue(false),
            Pop("batch: Added(a@1)"),
            Pop("batch: Updated(b@3)"),
        ],
    },
    Scenario {
        name: "in-order: nothing goes back over a queued relist",
        mode: Mode::InOrder,
        batch: 64,
        known: &[],
        ops: &[
            Add("a", "1"),
            PopHold("batch: Added(a@1)"),
            Replace(&[("b", "2")], "3"),
            Requeue(false),
            Pop("replace@3 [b@2] tombstones [a@1]"),
        ],
    },
];

fn run(s: &Scenario) {
    let store = Store::with(s.known);
    let mut builder = DeltaFifo::builder().mode(s.mode).batch_size(s.batch);
    if !s.name.contains("no known objects") {
        builder = builder.known_objects(Arc::new(store.clone()));
    }
    let fifo = builder.build().unwrap();
    let mut held: Vec<Delta<DynamicObject>> = Vec::new();
    let mut heard: Vec<String> = Vec::new();
    for (i, op) in s.ops.iter().enumerate() {
        let at = format!("{}: step {i} {op:?}", s.name);
        match *op {
            Add(n, rv) => fifo.add(obj(n, rv)).unwrap(),
            Update(n, rv) => fifo.update(obj(n, rv)).unwrap(),
            Delete(n, rv) => fifo.delete(obj(n, rv)).unwrap(),
            Replace(list, rv) => fifo
                .replace(list.iter().map(|(n, v)| obj(n, v)).collect(), rv.into())
                .unwrap(),
            Resync => fifo.resync().unwrap(),
            Bookmark(rv) => fifo.bookmark(rv.into()).unwrap(),
            RelistBegin => fifo.begin_relist().unwrap(),
            RelistPage(list) => fifo
                .relist_page(list.iter().map(|(n, v)| obj(n, v)).collect())
                .unwrap(),
            RelistEnd(rv) => fifo.end_relist(rv.into()).unwrap(),
            Pop(want) | PopHold(want) => {
                let item = fifo
                    .try_pop_into(&*store.0)
                    .unwrap_or_else(|| panic!("{at}: the queue is empty"));
                assert_eq!(render(&item.popped), want, "{at}");
                assert!(item.applied.errors.is_empty(), "{at}");
                heard = item
                    .applied
                    .notifications
                    .iter()
                    .map(render_notification)
                    .collect();
                if let PopHold(_) = op {
                    held = match item.popped {
                        Popped::Key(d) | Popped::Batch(d) => d,
                        Popped::Replace(_) | Popped::Resync | Popped::Bookmark(_) => {
                            panic!("{at}: cannot hold a step")
                        }
                    };
                }
            }
            Requeue(want) => assert_eq!(fifo.requeue(std::mem::take(&mut held)), want, "{at}"),
            Synced(want) => assert_eq!(fifo.has_synced(), want, "{at}"),
            StoreIs(want) => assert_eq!(store.render(), want, "{at}"),
            Heard(want) => assert_eq!(heard, want, "{at}"),
        }
    }
    let rest: Vec<String> = std::iter::from_fn(|| fifo.try_pop())
        .map(|p| render(&p))
        .collect();
    assert!(rest.is_empty(), "{}: left in the queue: {rest:?}", s.name);
    assert_eq!(fifo.depth(), 0);
}

#[test]
fn scenarios() {
    for s in SCENARIOS {
        run(s);
    }
}
