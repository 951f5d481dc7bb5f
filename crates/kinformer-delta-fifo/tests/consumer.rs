//! The consumer contract where the FIFO meets its consumer's store: every interleaving of writer
//! and consumer ends with the store equal to the writer's last word, and a delete delivered for
//! every object that left it.
//!
//! Writes and pops (with the apply the pop runs under the queue's lock) are the atomic steps, so
//! every order of them is tried exhaustively for short scripts; a stress run on real threads then
//! checks the state at quiescence.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kinformer_core::{
    CacheRead, CacheWrite, DeltaQueue, DynamicObject, Notification, Object, ObjectKey,
    ReflectorStoreExt, Replaced, StoreError,
};
use kinformer_delta_fifo::{DeltaFifo, Mode};
use kinformer_test_support::{GatedCache, Pause};
use support::obj;

type Map = BTreeMap<ObjectKey, Arc<DynamicObject>>;

/// One write of the reflector.
#[derive(Debug, Clone)]
enum Write {
    Add(&'static str, u32),
    Update(&'static str, u32),
    Delete(&'static str, u32),
    /// The complete list, at the given resourceVersion.
    Relist(Vec<(&'static str, u32)>, u32),
    Resync,
}

use Write::*;

impl Write {
    fn apply_to(&self, fifo: &DeltaFifo<DynamicObject>, truth: &mut Map) {
        match self {
            Add(n, rv) | Update(n, rv) => {
                let o = obj(n, &rv.to_string());
                truth.insert(o.key(), Arc::clone(&o));
                if matches!(self, Add(..)) {
                    fifo.add(o).unwrap()
                } else {
                    fifo.update(o).unwrap()
                }
            }
            Delete(n, rv) => {
                let o = obj(n, &rv.to_string());
                truth.remove(&o.key());
                fifo.delete(o).unwrap();
            }
            Relist(list, rv) => {
                let objects: Vec<_> = list.iter().map(|(n, v)| obj(n, &v.to_string())).collect();
                *truth = objects.iter().map(|o| (o.key(), Arc::clone(o))).collect();
                fifo.replace(objects, rv.to_string().into()).unwrap();
            }
            Resync => fifo.resync().unwrap(),
        }
    }
}

/// What the handlers heard, per key, checked as it arrives: no update before an add, nothing but
/// an add after a delete, resource versions never going backwards.
#[derive(Default, Debug)]
struct Handlers {
    /// Per key: the last notification's kind and resourceVersion.
    last: BTreeMap<ObjectKey, (char, u64)>,
    log: Vec<String>,
}

fn rv_of(o: &DynamicObject) -> u64 {
    o.resource_version().unwrap_or("0").parse().unwrap()
}

impl Handlers {
    fn hear(&mut self, n: &Notification<DynamicObject>) {
        let (key, kind, rv) = match n {
            Notification::Added { object, .. } => (object.key(), '+', rv_of(object)),
            // A resync (or a relist of an unchanged object): an update from a version to itself.
            Notification::Updated { old, new } if rv_of(old) == rv_of(new) => {
                assert_eq!(old.key(), new.key());
                (new.key(), '=', rv_of(new))
            }
            Notification::Updated { old, new } => {
                assert_eq!(old.key(), new.key());
                (new.key(), '~', rv_of(new))
            }
            Notification::Deleted { object } => {
                (object.object().key(), '-', rv_of(object.object()))
            }
        };
        let before = self.last.get(&key).copied();
        match (before, kind) {
            (None | Some(('-', _)), '+') => {}
            (Some(('+' | '~' | '=', _)), '~' | '=' | '-') => {}
            _ => panic!("{key}: {kind} after {before:?}; heard {:?}", self.log),
        }
        if let Some((_, old_rv)) = before {
            assert!(
                rv >= old_rv,
                "{key}: resourceVersion went back from {old_rv} to {rv}"
            );
        }
        self.last.insert(key.clone(), (kind, rv));
        self.log.push(format!("{kind}{key}@{rv}"));
    }

    /// The keys the handlers believe exist, with their versions.
    fn believed(&self) -> BTreeMap<ObjectKey, u64> {
        self.last
            .iter()
            .filter(|(_, (k, _))| *k != '-')
            .map(|(key, (_, rv))| (key.clone(), *rv))
            .collect()
    }
}

fn versions(map: &Map) -> BTreeMap<ObjectKey, u64> {
    map.iter().map(|(k, o)| (k.clone(), rv_of(o))).collect()
}

/// Runs `writes` and `pops` pops in the order `schedule` gives (true: the next write), drains the
/// queue, and checks the end state.
fn run(mode: Mode, known: bool, writes: &[Write], schedule: &[bool]) {
    let cache: Arc<Mutex<Map>> = Arc::default();
    let mut builder = DeltaFifo::builder().mode(mode).batch_size(2);
    if known {
        builder = builder.known_objects(cache.clone());
    }
    let fifo = builder.build().unwrap();
    let mut truth = Map::new();
    let mut handlers = Handlers::default();
    let mut next = writes.iter();
    let pop = |handlers: &mut Handlers| match fifo.try_pop_into(&*cache) {
        Some(item) => {
            assert!(item.applied.errors.is_empty());
            item.applied
                .notifications
                .iter()
                .for_each(|n| handlers.hear(n));
            true
        }
        None => false,
    };
    for &write in schedule {
        if write {
            next.next().unwrap().apply_to(&fifo, &mut truth);
        } else {
            pop(&mut handlers);
        }
    }
    for _ in 0..100 {
        if !pop(&mut handlers) {
            break;
        }
    }
    let what = format!("{mode:?} known={known} {writes:?} {schedule:?}");
    assert_eq!(fifo.depth(), 0, "{what}");
    assert_eq!(
        versions(&cache.lock().unwrap()),
        versions(&truth),
        "{what}: the store equals the writer's last word; heard {:?}",
        handlers.log
    );
    assert_eq!(
        handlers.believed(),
        versions(&truth),
        "{what}: every object that left got a delete; heard {:?}",
        handlers.log
    );
}

/// Every way to interleave `writes` with `pops` pops.
fn schedules(writes: usize, pops: usize) -> Vec<Vec<bool>> {
    if writes == 0 {
        return vec![vec![false; pops]];
    }
    if pops == 0 {
        return vec![vec![true; writes]];
    }
    let mut out = Vec::new();
    for mut rest in schedules(writes - 1, pops) {
        rest.insert(0, true);
        out.push(rest);
    }
    for mut rest in schedules(writes, pops - 1) {
        rest.insert(0, false);
        out.push(rest);
    }
    out
}

#[test]
fn every_interleaving_of_writer_and_consumer_converges_and_delivers_every_delete() {
    let scripts: Vec<Vec<Write>> = vec![
        // The lost delete: added, popped, then deleted before or after the apply.
        vec![Add("a", 1), Delete("a", 2)],
        // A relist that lacks a popped key.
        vec![Add("a", 1), Relist(vec![], 2)],
        vec![Add("a", 1), Update("a", 2), Delete("a", 3)],
        vec![
            Relist(vec![("a", 1), ("b", 1)], 1),
            Delete("a", 2),
            Relist(vec![("b", 3)], 3),
        ],
        vec![Add("a", 1), Delete("a", 2), Add("a", 3), Relist(vec![], 4)],
        vec![
            Relist(vec![("a", 1)], 1),
            Resync,
            Update("a", 2),
            Relist(vec![("a", 2)], 3),
        ],
        vec![
            Add("a", 1),
            Add("b", 1),
            Relist(vec![("b", 2)], 2),
            Delete("b", 3),
        ],
    ];
    let mut runs = 0;
    for writes in &scripts {
        for pops in 1..=writes.len() + 1 {
            for schedule in schedules(writes.len(), pops) {
                for (mode, known) in [
                    (Mode::InOrder, true),
                    (Mode::InOrder, false),
                    (Mode::Classic, true),
                ] {
                    run(mode, known, writes, &schedule);
                    runs += 1;
                }
            }
        }
    }
    assert!(runs > 1000, "{runs} runs");
}

/// A cache whose first write stops before it is made, until released: the consumer is then
/// inside its apply, with the queue locked.
type Gated = GatedCache<Mutex<Map>>;

#[test]
fn a_delete_sent_while_the_consumer_applies_a_pop_waits_for_it_and_is_not_lost() {
    for mode in [Mode::InOrder, Mode::Classic] {
        let cache = Arc::new(Gated::default());
        cache.pause_next_write(Pause::Before);
        let fifo = Arc::new(
            DeltaFifo::builder()
                .mode(mode)
                .known_objects(cache.clone())
                .build()
                .unwrap(),
        );
        fifo.add(obj("a", "1")).unwrap();
        std::thread::scope(|s| {
            let consumer = s.spawn(|| fifo.try_pop_into(&*cache).unwrap());
            // The consumer has popped `a@1` and is applying it, the queue locked.
            assert!(
                cache.wait_paused(Duration::from_secs(20)),
                "the consumer never applied"
            );
            let writer = s.spawn(|| fifo.delete(obj("a", "2")).unwrap());
            cache.release();
            let first = consumer.join().unwrap();
            writer.join().unwrap();
            assert!(matches!(
                &first.applied.notifications[..],
                [Notification::Added { .. }]
            ));
        });
        // Whenever the delete reached the queue, it was judged against a store holding `a`.
        let second = fifo.try_pop_into(&*cache).expect("the delete was queued");
        let heard: Vec<String> = second
            .applied
            .notifications
            .iter()
            .map(support::render_notification)
            .collect();
        assert_eq!(heard, ["-a@2"], "{mode:?}");
        assert!(cache.inner().lock().unwrap().is_empty(), "{mode:?}");
    }
}

/// splitmix64: a fixed-seed generator, so the stress run is the same every time it is seeded
/// the same way (the thread interleaving is not, which is the point).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const NAMES: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];

/// A consumer's store that gives up its thread before each write, so that a writer gets every
/// chance to run in the middle of a pop.
#[derive(Default)]
struct Slow(Mutex<Map>);

impl CacheRead<DynamicObject> for Slow {
    fn get_by_key(&self, key: &str) -> Option<Arc<DynamicObject>> {
        self.0.get_by_key(key)
    }
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.0.list_keys()
    }
    fn for_each(&self, f: &mut dyn FnMut(&Arc<DynamicObject>)) {
        self.0.for_each(f)
    }
}

impl CacheWrite<DynamicObject> for Slow {
    fn upsert(&self, object: Arc<DynamicObject>) -> Result<Option<Arc<DynamicObject>>, StoreError> {
        std::thread::yield_now();
        self.0.upsert(object)
    }
    fn remove(&self, key: &str) -> Option<Arc<DynamicObject>> {
        std::thread::yield_now();
        self.0.remove(key)
    }
    fn replace_all(&self, objects: Vec<Arc<DynamicObject>>) -> Replaced<DynamicObject> {
        std::thread::yield_now();
        self.0.replace_all(objects)
    }
}

#[test]
fn stress_writer_and_consumer_on_two_threads_converge_at_quiescence() {
    for (mode, known, seed) in [
        (Mode::InOrder, true, 1),
        (Mode::InOrder, false, 2),
        (Mode::Classic, true, 3),
    ] {
        let cache: Arc<Slow> = Arc::default();
        let mut builder = DeltaFifo::builder().mode(mode).batch_size(4).capacity(64);
        if known {
            builder = builder.known_objects(cache.clone());
        }
        let fifo = builder.build().unwrap();
        let ((truth, created), handlers) = std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let mut rng = Rng(seed);
                let mut truth = Map::new();
                // The versions at which an object was created: a handler must hear each as an
                // add, never as an update (that would mean the delete before it was lost).
                let mut created = BTreeSet::new();
                for rv in 1..=20_000u32 {
                    let name = NAMES[rng.below(NAMES.len() as u64) as usize];
                    let write = match rng.below(100) {
                        0..=34 => Add(name, rv),
                        35..=64 => Update(name, rv),
                        65..=94 => Delete(name, rv),
                        95..=97 => {
                            let list = NAMES
                                .iter()
                                .filter(|_| rng.below(2) == 0)
                                .map(|n| (*n, rv))
                                .collect();
                            Relist(list, rv)
                        }
                        _ => Resync,
                    };
                    // Writes of a key only the server could make: an update of an absent key is
                    // an add, an add of a present one an update.
                    let write = match write {
                        Add(n, v) | Update(n, v) => {
                            if truth.contains_key(&ObjectKey::new(None, n)) {
                                Update(n, v)
                            } else {
                                Add(n, v)
                            }
                        }
                        Delete(n, v) if !truth.contains_key(&ObjectKey::new(None, n)) => Add(n, v),
                        other => other,
                    };
                    if let Add(_, v) = write {
                        created.insert(u64::from(v));
                    }
                    // Honour backpressure, as the reflector does.
                    while fifo.depth() >= 64 {
                        std::thread::yield_now();
                    }
                    write.apply_to(&fifo, &mut truth);
                }
                fifo.close();
                (truth, created)
            });
            let consumer = s.spawn(|| {
                let mut handlers = Handlers::default();
                let mut idle = 0u64;
                loop {
                    match fifo.try_pop_into(&*cache) {
                        Some(item) => {
                            idle = 0;
                            assert!(item.applied.errors.is_empty());
                            item.applied
                                .notifications
                                .iter()
                                .for_each(|n| handlers.hear(n));
                        }
                        None if fifo.is_closed() && fifo.depth() == 0 => break,
                        None => {
                            idle += 1;
                            assert!(idle < 100_000_000, "the consumer spun with nothing to do");
                            std::thread::yield_now();
                        }
                    }
                }
                handlers
            });
            (writer.join().unwrap(), consumer.join().unwrap())
        });
        let what = format!("{mode:?} known={known} seed={seed}");
        assert_eq!(
            versions(&cache.0.lock().unwrap()),
            versions(&truth),
            "{what}"
        );
        assert_eq!(handlers.believed(), versions(&truth), "{what}");
        let keys: BTreeSet<&str> = handlers.log.iter().map(|l| &l[1..2]).collect();
        assert!(keys.len() > 1, "{what}: the run touched several keys");
        for line in handlers.log.iter().filter(|l| l.starts_with('~')) {
            let rv: u64 = line.rsplit('@').next().unwrap().parse().unwrap();
            assert!(
                !created.contains(&rv),
                "{what}: {line} was created after a delete, yet heard as an update: the delete was lost"
            );
        }
    }
}
