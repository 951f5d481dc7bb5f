//! Property tests: random write/pop sequences against a plain model of each mode.
//!
//! After every step the FIFO's pop (rendered: keys, delta types, objects, tombstones, initial-list
//! flags), depth and `has_synced` must equal the model's. At the end the queue is drained and the
//! consumer's store must equal the writer's view of the world: no event was lost.

mod support;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use kinformer_core::{
    DeletedFinalStateUnknown, Delta, DeltaObject, DeltaQueue, DeltaType, DynamicObject, Object,
    ObjectKey, Popped, ReflectorStoreExt, ReplaceStep,
};
use kinformer_delta_fifo::{DeltaFifo, Mode};
use proptest::prelude::*;
use support::{Store, obj, render};

const NAMES: &[&str] = &["a", "b", "c", "d"];

#[derive(Debug, Clone)]
enum Op {
    Add(usize),
    Update(usize),
    Delete(usize),
    Replace(Vec<usize>),
    Resync,
    Pop,
    /// Pop, apply, then hand the deltas back as a failed key.
    PopRequeue,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..NAMES.len()).prop_map(Op::Add),
        3 => (0..NAMES.len()).prop_map(Op::Update),
        3 => (0..NAMES.len()).prop_map(Op::Delete),
        1 => proptest::sample::subsequence((0..NAMES.len()).collect::<Vec<_>>(), 0..=NAMES.len()).prop_map(Op::Replace),
        1 => Just(Op::Resync),
        4 => Just(Op::Pop),
        1 => Just(Op::PopRequeue),
    ]
}

type Known = BTreeMap<ObjectKey, Arc<DynamicObject>>;

/// The rules of the issue, written the plain way: vectors and linear scans.
struct Model {
    mode: Mode,
    batch: usize,
    /// Classic mode: one entry per key.
    keys: Vec<(ObjectKey, Vec<Delta<DynamicObject>>)>,
    /// In-order mode: single deltas and relist steps.
    flat: Vec<Item>,
    populated: bool,
    initial_remaining: usize,
}

enum Item {
    Delta(Delta<DynamicObject>),
    Replace(ReplaceStep<DynamicObject>),
    Resync,
}

fn is_delete(d: &Delta<DynamicObject>) -> bool {
    d.kind == DeltaType::Deleted
}

impl Model {
    fn new(mode: Mode, batch: usize) -> Self {
        Self {
            mode,
            batch,
            keys: Vec::new(),
            flat: Vec::new(),
            populated: false,
            initial_remaining: 0,
        }
    }

    fn depth(&self) -> usize {
        match self.mode {
            Mode::Classic => self.keys.len(),
            _ => self.flat.len(),
        }
    }

    fn queued(&self, key: &ObjectKey) -> bool {
        match self.mode {
            Mode::Classic => self.keys.iter().any(|(k, _)| k == key),
            _ => self.flat.iter().any(|i| match i {
                Item::Delta(d) => &d.key() == key,
                Item::Replace(s) => s.objects.iter().any(|o| &o.key() == key),
                Item::Resync => false,
            }),
        }
    }

    /// In-order: what the consumer's store will hold after applying everything queued.
    fn predicted(&self, known: &Known) -> Known {
        let mut store = known.clone();
        for item in &self.flat {
            match item {
                Item::Delta(d) if is_delete(d) => {
                    store.remove(&d.key());
                }
                Item::Delta(d) => {
                    store.insert(d.key(), Arc::clone(d.object.object()));
                }
                Item::Replace(s) => {
                    store = s.objects.iter().map(|o| (o.key(), Arc::clone(o))).collect()
                }
                Item::Resync => {}
            }
        }
        store
    }

    fn push_classic(&mut self, delta: Delta<DynamicObject>) {
        let key = delta.key();
        match self.keys.iter_mut().find(|(k, _)| *k == key) {
            Some((_, deltas)) => {
                let last = deltas.last().expect("entries are never empty");
                if is_delete(last) && is_delete(&delta) {
                    if last.object.is_tombstone() {
                        *deltas.last_mut().unwrap() = delta;
                    }
                } else {
                    deltas.push(delta);
                }
            }
            None => self.keys.push((key, vec![delta])),
        }
    }

    fn write(&mut self, kind: DeltaType, o: Arc<DynamicObject>, known: &Known) {
        self.populated = true;
        let key = o.key();
        let d = Delta::of(kind, o);
        match self.mode {
            Mode::Classic => {
                if kind == DeltaType::Deleted && !self.queued(&key) && !known.contains_key(&key) {
                    return;
                }
                self.push_classic(d);
            }
            _ => {
                if kind == DeltaType::Deleted && !self.predicted(known).contains_key(&key) {
                    return;
                }
                self.flat.push(Item::Delta(d));
            }
        }
    }

    fn replace(&mut self, list: Vec<Arc<DynamicObject>>, rv: &str, known: &Known) {
        let initial = !self.populated;
        self.populated = true;
        let listed: HashSet<ObjectKey> = list.iter().map(|o| o.key()).collect();
        let tomb = |key: ObjectKey, last_known| {
            let mut d = Delta::new(
                DeltaType::Deleted,
                DeltaObject::DeletedFinalStateUnknown(DeletedFinalStateUnknown { key, last_known }),
            );
            d.is_initial_list = initial;
            d
        };
        match self.mode {
            Mode::Classic => {
                for o in &list {
                    let mut d = Delta::of(DeltaType::Replaced, Arc::clone(o));
                    d.is_initial_list = initial;
                    self.push_classic(d);
                }
                let queued: Vec<(ObjectKey, Arc<DynamicObject>)> = self
                    .keys
                    .iter()
                    .filter(|(k, _)| !listed.contains(k))
                    .map(|(k, ds)| (k.clone(), Arc::clone(ds.last().unwrap().object.object())))
                    .collect();
                for (k, newest) in queued {
                    self.push_classic(tomb(k, newest));
                }
                for (k, stored) in known {
                    if !listed.contains(k) && !self.queued(k) {
                        self.push_classic(tomb(k.clone(), Arc::clone(stored)));
                    }
                }
            }
            _ => {
                // The tombstones are what the store holds when the step is popped.
                self.flat.push(Item::Replace(ReplaceStep {
                    objects: list,
                    resource_version: rv.into(),
                    tombstones: Vec::new(),
                    is_initial_list: initial,
                }));
            }
        }
        if initial {
            self.initial_remaining = self.depth();
        }
    }

    fn resync(&mut self, known: &Known) {
        if self.mode == Mode::InOrder {
            if !matches!(self.flat.last(), Some(Item::Resync)) {
                self.flat.push(Item::Resync);
            }
            return;
        }
        for (k, stored) in known {
            if !self.queued(k) {
                let d = Delta::of(DeltaType::Sync, Arc::clone(stored));
                match self.mode {
                    Mode::Classic => self.push_classic(d),
                    _ => self.flat.push(Item::Delta(d)),
                }
            }
        }
    }

    /// The next item; `store` is what the consumer holds now.
    fn pop(&mut self, store: &Known) -> Option<Popped<DynamicObject>> {
        let (popped, n) = match self.mode {
            Mode::Classic => {
                if self.keys.is_empty() {
                    return None;
                }
                (Popped::Key(self.keys.remove(0).1), 1)
            }
            _ => match self.flat.first()? {
                Item::Resync => {
                    self.flat.remove(0);
                    (Popped::Resync, 1)
                }
                Item::Replace(_) => {
                    let Item::Replace(mut s) = self.flat.remove(0) else {
                        unreachable!()
                    };
                    let listed: HashSet<ObjectKey> = s.objects.iter().map(|o| o.key()).collect();
                    s.tombstones = store
                        .iter()
                        .filter(|(k, _)| !listed.contains(*k))
                        .map(|(key, last_known)| DeletedFinalStateUnknown {
                            key: key.clone(),
                            last_known: Arc::clone(last_known),
                        })
                        .collect();
                    (Popped::Replace(s), 1)
                }
                Item::Delta(_) => {
                    let mut batch: Vec<Delta<DynamicObject>> = Vec::new();
                    while batch.len() < self.batch {
                        match self.flat.first() {
                            Some(Item::Delta(d)) if !batch.iter().any(|b| b.key() == d.key()) => {
                                let Item::Delta(d) = self.flat.remove(0) else {
                                    unreachable!()
                                };
                                batch.push(d);
                            }
                            _ => break,
                        }
                    }
                    let n = batch.len();
                    (Popped::Batch(batch), n)
                }
            },
        };
        self.initial_remaining = self.initial_remaining.saturating_sub(n);
        Some(popped)
    }

    fn requeue(&mut self, deltas: Vec<Delta<DynamicObject>>) -> bool {
        let key = deltas[0].key();
        if self.queued(&key) {
            return false;
        }
        self.populated = true;
        match self.mode {
            Mode::Classic => self.keys.push((key, deltas)),
            _ => {
                if self.flat.iter().any(|i| matches!(i, Item::Replace(_))) {
                    return false;
                }
                self.flat.extend(deltas.into_iter().map(Item::Delta));
            }
        }
        true
    }

    fn has_synced(&self) -> bool {
        self.populated && self.initial_remaining == 0
    }
}

fn check(mode: Mode, batch: usize, initial: Vec<usize>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let store = Store::default();
    for &i in &initial {
        store
            .0
            .lock()
            .unwrap()
            .insert(ObjectKey::new(None, NAMES[i]), obj(NAMES[i], "0"));
    }
    // What the writer has told the queue: the state the consumer must end up with.
    let mut truth: Known = store.0.lock().unwrap().clone();
    let fifo = DeltaFifo::builder()
        .mode(mode)
        .batch_size(batch)
        .known_objects(Arc::new(store.clone()))
        .build()
        .unwrap();
    let mut model = Model::new(mode, batch);
    for (step, op) in ops.into_iter().enumerate() {
        let rv = (step + 1).to_string();
        let known = store.0.lock().unwrap().clone();
        match op {
            Op::Add(i) | Op::Update(i) | Op::Delete(i) => {
                let o = obj(NAMES[i], &rv);
                let kind = match op {
                    Op::Add(_) => DeltaType::Added,
                    Op::Update(_) => DeltaType::Updated,
                    _ => DeltaType::Deleted,
                };
                if kind == DeltaType::Deleted {
                    truth.remove(&o.key());
                    fifo.delete(Arc::clone(&o)).unwrap();
                } else {
                    truth.insert(o.key(), Arc::clone(&o));
                    if kind == DeltaType::Added {
                        fifo.add(Arc::clone(&o)).unwrap()
                    } else {
                        fifo.update(Arc::clone(&o)).unwrap()
                    }
                }
                model.write(kind, o, &known);
            }
            Op::Replace(idx) => {
                let list: Vec<Arc<DynamicObject>> =
                    idx.iter().map(|&i| obj(NAMES[i], &rv)).collect();
                truth = list.iter().map(|o| (o.key(), Arc::clone(o))).collect();
                fifo.replace(list.clone(), rv.as_str().into()).unwrap();
                model.replace(list, &rv, &known);
            }
            Op::Resync => {
                fifo.resync().unwrap();
                model.resync(&known);
            }
            Op::Pop | Op::PopRequeue => {
                let want = model.pop(&store.0.lock().unwrap().clone());
                let got = fifo.try_pop_into(&*store.0).map(|item| item.popped);
                prop_assert_eq!(
                    got.as_ref().map(render),
                    want.as_ref().map(render),
                    "step {}",
                    step
                );
                if let (Op::PopRequeue, Some(Popped::Key(d) | Popped::Batch(d))) = (&op, &got) {
                    // Hand back the deltas of the batch's first key.
                    let key = d[0].key();
                    let mine: Vec<_> = d.iter().filter(|x| x.key() == key).cloned().collect();
                    prop_assert_eq!(
                        fifo.requeue(mine.clone()),
                        model.requeue(mine),
                        "requeue at step {}",
                        step
                    );
                }
            }
        }
        prop_assert_eq!(fifo.depth(), model.depth(), "depth after step {}", step);
        prop_assert_eq!(
            fifo.has_synced(),
            model.has_synced(),
            "has_synced after step {}",
            step
        );
    }
    // Drain: nothing may be lost.
    for _ in 0..1000 {
        let want = model.pop(&store.0.lock().unwrap().clone());
        let got = fifo.try_pop_into(&*store.0).map(|item| item.popped);
        prop_assert_eq!(
            got.as_ref().map(render),
            want.as_ref().map(render),
            "draining"
        );
        if got.is_none() {
            break;
        }
    }
    prop_assert_eq!(fifo.depth(), 0);
    let got: Vec<String> = store.render();
    let want: Vec<String> = truth.values().map(|o| support::at(o)).collect();
    prop_assert_eq!(
        got,
        want,
        "the consumer's store equals what the writer said"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn classic_matches_the_model(
        initial in proptest::sample::subsequence((0..NAMES.len()).collect::<Vec<_>>(), 0..=NAMES.len()),
        ops in proptest::collection::vec(op(), 0..60),
    ) {
        check(Mode::Classic, 64, initial, ops)?;
    }

    #[test]
    fn in_order_matches_the_model(
        batch in 1usize..4,
        initial in proptest::sample::subsequence((0..NAMES.len()).collect::<Vec<_>>(), 0..=NAMES.len()),
        ops in proptest::collection::vec(op(), 0..60),
    ) {
        check(Mode::InOrder, batch, initial, ops)?;
    }
}
