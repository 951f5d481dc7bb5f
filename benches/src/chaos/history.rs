//! The recording handler: checks, call by call, that what a handler hears forms a valid history
//! per key, and keeps the state that history leads to.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kinformer::core::{DeltaObject, Object};
use kinformer::shared_informer::ResourceEventHandler;
use parking_lot::Mutex;

use super::Violations;

/// What a handler believes about one key: the incarnation (uid) and resourceVersion last heard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Held {
    pub(crate) uid: String,
    pub(crate) version: u64,
}

/// Counts of what one handler heard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Heard {
    /// `on_add` calls.
    pub adds: u64,
    /// `on_update` calls.
    pub updates: u64,
    /// `on_delete` calls with the object's final state.
    pub deletes: u64,
    /// `on_delete` calls with a tombstone (a delete seen only through a relist).
    pub tombstones: u64,
}

#[derive(Default)]
struct State {
    held: HashMap<String, Held>,
    last_version: HashMap<String, u64>,
    heard: Heard,
}

/// How the recorder misbehaves after recording, as the soak's slow and panicking handlers do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Behaviour {
    /// Returns at once.
    Fast,
    /// Sleeps `per_call` on every call and `stall` on every `every`-th call.
    Slow {
        per_call: Duration,
        stall: Duration,
        every: u64,
    },
    /// Panics on every `every`-th call.
    Panics { every: u64 },
}

/// The message of the panicking handler's panics; the soak's panic hook knows it.
pub(crate) const DELIBERATE_PANIC: &str = "chaos: deliberate handler panic";

/// A handler that writes down what it hears and checks it on every call.
#[derive(Clone)]
pub(crate) struct Recorder {
    name: Arc<str>,
    state: Arc<Mutex<State>>,
    violations: Violations,
    behaviour: Behaviour,
    calls: Arc<std::sync::atomic::AtomicU64>,
    deliberate_panics: Arc<std::sync::atomic::AtomicU64>,
}

fn version<K: Object>(o: &K) -> u64 {
    o.resource_version()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn uid<K: Object>(o: &K) -> String {
    o.uid().unwrap_or_default().to_owned()
}

impl Recorder {
    pub(crate) fn new(name: &str, behaviour: Behaviour, violations: Violations) -> Self {
        Self {
            name: name.into(),
            state: Arc::default(),
            violations,
            behaviour,
            calls: Arc::default(),
            deliberate_panics: Arc::default(),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Every key the handler believes exists, with its incarnation and version.
    pub(crate) fn state(&self) -> BTreeMap<String, Held> {
        self.state
            .lock()
            .held
            .iter()
            .map(|(k, h)| (k.clone(), h.clone()))
            .collect()
    }

    pub(crate) fn heard(&self) -> Heard {
        self.state.lock().heard
    }

    pub(crate) fn deliberate_panics(&self) -> u64 {
        self.deliberate_panics
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn violation(&self, what: String) {
        self.violations
            .report(format!("handler {}: {what}", self.name));
    }

    fn saw(&self, state: &mut State, key: &str, what: &str, new: u64) {
        if let Some(last) = state.last_version.get(key)
            && *last >= new
        {
            self.violation(format!(
                "{what} {key} at version {new} after version {last}: went back or repeated"
            ));
        }
        state.last_version.insert(key.to_owned(), new);
    }

    /// Runs after each call: the slow handler's sleeps, the panicking handler's panics.
    fn behave(&self) {
        let n = self
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        match self.behaviour {
            Behaviour::Fast => {}
            Behaviour::Slow {
                per_call,
                stall,
                every,
            } => std::thread::sleep(if n.is_multiple_of(every) {
                stall
            } else {
                per_call
            }),
            Behaviour::Panics { every } => {
                if n.is_multiple_of(every) {
                    self.deliberate_panics
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    panic!("{DELIBERATE_PANIC}");
                }
            }
        }
    }
}

impl<K: Object + Send + Sync + 'static> ResourceEventHandler<K> for Recorder {
    fn on_add(&self, object: &Arc<K>, _: bool) {
        let key = object.key().to_string();
        let (v, u) = (version(&**object), uid(&**object));
        {
            let mut s = self.state.lock();
            s.heard.adds += 1;
            if let Some(h) = s.held.get(&key) {
                self.violation(format!(
                    "add {key} ({u} at {v}) while holding {} at {}: a delete was lost",
                    h.uid, h.version
                ));
            }
            self.saw(&mut s, &key, "add", v);
            s.held.insert(key, Held { uid: u, version: v });
        }
        self.behave();
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let key = new.key().to_string();
        let (old_v, new_v) = (version(&**old), version(&**new));
        let (old_u, new_u) = (uid(&**old), uid(&**new));
        {
            let mut s = self.state.lock();
            s.heard.updates += 1;
            match s.held.get(&key) {
                None => self.violation(format!("update {key} to {new_v} while holding nothing")),
                Some(h) if h.version != old_v || h.uid != old_u => self.violation(format!(
                    "update {key} from {old_u} at {old_v} while holding {} at {}",
                    h.uid, h.version
                )),
                Some(_) => {}
            }
            if old_u != new_u {
                self.violation(format!(
                    "update {key} from incarnation {old_u} to {new_u}: the delete of {old_u} never arrived"
                ));
            }
            if new_v <= old_v {
                self.violation(format!(
                    "update {key} from {old_v} to {new_v}: no resync is configured, so versions must grow"
                ));
            }
            self.saw(&mut s, &key, "update", new_v);
            s.held.insert(
                key,
                Held {
                    uid: new_u,
                    version: new_v,
                },
            );
        }
        self.behave();
    }

    fn on_delete(&self, object: &DeltaObject<K>) {
        let key = object.key().to_string();
        let last = object.object();
        let (v, u) = (version(&**last), uid(&**last));
        {
            let mut s = self.state.lock();
            if object.is_tombstone() {
                s.heard.tombstones += 1;
            } else {
                s.heard.deletes += 1;
            }
            match s.held.remove(&key) {
                None => self.violation(format!("delete {key} while holding nothing")),
                Some(h) if h.uid != u || h.version > v => self.violation(format!(
                    "delete {key} carrying {u} at {v} while holding {} at {}",
                    h.uid, h.version
                )),
                Some(_) => {}
            }
        }
        self.behave();
    }
}
