//! [`Recorder`], a [`ResourceEventHandler`] that writes down every call it hears, one line each,
//! for tests that check what a handler was told and in which order.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kinformer_core::{DeltaObject, Object, ObjectKey};
use kinformer_shared_informer::ResourceEventHandler;

/// One call a handler heard, as [`Recorder`] hands it to a line format.
///
/// Its `Display` is the default line: `add <key> <rv> <initial>`, `update <key> <old rv>><new rv>`,
/// `delete <key> <rv>` and, for a tombstone, `tombstone <key> <last known rv>`; an object with no
/// resourceVersion shows an empty one.
///
/// ```
/// use std::sync::Arc;
/// use kinformer_core::DynamicObject;
/// use kinformer_test_support::Heard;
///
/// let mut pod = DynamicObject::default();
/// pod.metadata.name = Some("a".into());
/// pod.metadata.namespace = Some("ns".into());
/// pod.metadata.resource_version = Some("7".into());
/// let pod = Arc::new(pod);
/// let heard = Heard::Add { object: &pod, initial: true };
/// assert_eq!((heard.verb(), heard.key().as_str()), ("add", "ns/a"));
/// assert_eq!(heard.to_string(), "add ns/a 7 true");
/// ```
pub enum Heard<'a, K> {
    /// `on_add`.
    Add {
        /// The object that appeared.
        object: &'a Arc<K>,
        /// Whether it came with the informer's first list (or a late handler's replay).
        initial: bool,
    },
    /// `on_update`.
    Update {
        /// What the handler heard last for this key.
        old: &'a Arc<K>,
        /// The object now.
        new: &'a Arc<K>,
    },
    /// `on_delete`: the object's last state, or a tombstone.
    Delete(&'a DeltaObject<K>),
}

impl<K: Object> Heard<'_, K> {
    /// The key the call is about.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use kinformer_core::DynamicObject;
    /// # use kinformer_test_support::Heard;
    /// let (mut old, mut new) = (DynamicObject::default(), DynamicObject::default());
    /// old.metadata.name = Some("a".into());
    /// new.metadata.name = Some("a".into());
    /// let (old, new) = (Arc::new(old), Arc::new(new));
    /// assert_eq!(Heard::Update { old: &old, new: &new }.key().as_str(), "a");
    /// ```
    pub fn key(&self) -> ObjectKey {
        match self {
            Self::Add { object, .. } => object.key(),
            Self::Update { new, .. } => new.key(),
            Self::Delete(o) => o.key(),
        }
    }

    /// `add`, `update`, `delete`, or `tombstone` for a delete known only through a relist.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use kinformer_core::{DeltaObject, DynamicObject};
    /// # use kinformer_test_support::Heard;
    /// let gone = DeltaObject::Object(Arc::new(DynamicObject::default()));
    /// assert_eq!(Heard::Delete(&gone).verb(), "delete");
    /// ```
    pub fn verb(&self) -> &'static str {
        match self {
            Self::Add { .. } => "add",
            Self::Update { .. } => "update",
            Self::Delete(o) if o.is_tombstone() => "tombstone",
            Self::Delete(_) => "delete",
        }
    }
}

fn rv<K: Object>(o: &K) -> &str {
    o.resource_version().unwrap_or("")
}

impl<K: Object> fmt::Display for Heard<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Add { object, initial } => {
                write!(f, "add {} {} {initial}", object.key(), rv(&***object))
            }
            Self::Update { old, new } => {
                write!(f, "update {} {}>{}", new.key(), rv(&***old), rv(&***new))
            }
            Self::Delete(o) => write!(f, "{} {} {}", self.verb(), o.key(), rv(&**o.object())),
        }
    }
}

impl<K: Object> fmt::Debug for Heard<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Heard({self})")
    }
}

type Format<K> = dyn Fn(&Heard<'_, K>) -> String + Send + Sync;

/// One call, as written down: its line, and what [`Recorder::replay`] checks.
struct Entry {
    line: String,
    key: String,
    verb: &'static str,
    /// An update's old resourceVersion.
    old: Option<String>,
    /// The object's resourceVersion: the new one of an update, the last one of a delete.
    version: Option<String>,
}

struct Inner<K> {
    entries: Mutex<Vec<Entry>>,
    format: Box<Format<K>>,
}

/// A [`ResourceEventHandler`] that writes down every call it hears, one line each, in a format
/// of the test's choosing ([`Heard`]'s `Display` unless told otherwise). Clones share one
/// record: keep one, give the other to the informer.
///
/// Besides the lines, it keeps each call's key and resourceVersions, so
/// [`replay`](Self::replay) can check that the calls form a valid history per key.
///
/// ```
/// use std::sync::Arc;
/// use kinformer_core::{DeltaObject, DynamicObject};
/// use kinformer_shared_informer::ResourceEventHandler;
/// use kinformer_test_support::Recorder;
///
/// fn pod(name: &str, rv: &str) -> Arc<DynamicObject> {
///     let mut p = DynamicObject::default();
///     p.metadata.name = Some(name.into());
///     p.metadata.namespace = Some("ns".into());
///     p.metadata.resource_version = Some(rv.into());
///     Arc::new(p)
/// }
///
/// let record = Recorder::<DynamicObject>::new();
/// let handler = record.clone();
/// handler.on_add(&pod("a", "1"), true);
/// handler.on_update(&pod("a", "1"), &pod("a", "2"));
/// handler.on_add(&pod("b", "3"), false);
/// handler.on_delete(&DeltaObject::Object(pod("b", "4")));
/// assert_eq!(
///     record.lines(),
///     ["add ns/a 1 true", "update ns/a 1>2", "add ns/b 3 false", "delete ns/b 4"]
/// );
/// assert_eq!(record.per_key()["ns/b"].len(), 2);
/// assert_eq!(record.replay().unwrap().into_iter().collect::<Vec<_>>(), [("ns/a".into(), "2".into())]);
///
/// // A format of one's own: only what the test looks at.
/// let keys = Recorder::<DynamicObject>::with_format(|h| format!("{} {}", h.verb(), h.key()));
/// keys.on_add(&pod("c", "5"), false);
/// assert_eq!(keys.lines(), ["add ns/c"]);
/// ```
pub struct Recorder<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for Recorder<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> fmt::Debug for Recorder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("calls", &self.entries().len())
            .finish()
    }
}

impl<K: Object> Default for Recorder<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Object> Recorder<K> {
    /// A recorder writing the default lines ([`Heard`]'s `Display`).
    ///
    /// ```
    /// let record = kinformer_test_support::Recorder::<kinformer_core::DynamicObject>::new();
    /// assert!(record.is_empty());
    /// ```
    pub fn new() -> Self {
        Self::with_format(|heard| heard.to_string())
    }
}

impl<K> Recorder<K> {
    /// A recorder writing `format(call)` for each call. The format runs inside the handler's
    /// call, so what it reads of the object is read when the handler would read it.
    ///
    /// ```
    /// use kinformer_core::{DynamicObject, Object};
    /// use kinformer_test_support::{Heard, Recorder};
    ///
    /// let names = Recorder::<DynamicObject>::with_format(|h| match h {
    ///     Heard::Add { object, .. } => format!("add {}", object.name()),
    ///     other => other.verb().to_owned(),
    /// });
    /// assert!(names.lines().is_empty());
    /// ```
    pub fn with_format(format: impl Fn(&Heard<'_, K>) -> String + Send + Sync + 'static) -> Self {
        Self {
            inner: Arc::new(Inner {
                entries: Mutex::new(Vec::new()),
                format: Box::new(format),
            }),
        }
    }

    fn entries(&self) -> MutexGuard<'_, Vec<Entry>> {
        self.inner
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Every line so far, in the order of the calls.
    ///
    /// ```
    /// let record = kinformer_test_support::Recorder::<kinformer_core::DynamicObject>::new();
    /// assert_eq!(record.lines(), Vec::<String>::new());
    /// ```
    pub fn lines(&self) -> Vec<String> {
        self.entries().iter().map(|e| e.line.clone()).collect()
    }

    /// How many calls so far.
    ///
    /// ```
    /// let record = kinformer_test_support::Recorder::<kinformer_core::DynamicObject>::new();
    /// assert_eq!(record.len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// Whether no call came yet.
    ///
    /// ```
    /// let record = kinformer_test_support::Recorder::<kinformer_core::DynamicObject>::new();
    /// assert!(record.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.entries().is_empty()
    }

    /// The lines per key, each key's in the order of its calls: what handlers that may
    /// interleave keys differently still agree on.
    ///
    /// ```
    /// let record = kinformer_test_support::Recorder::<kinformer_core::DynamicObject>::new();
    /// assert!(record.per_key().is_empty());
    /// ```
    pub fn per_key(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for e in self.entries().iter() {
            out.entry(e.key.clone()).or_default().push(e.line.clone());
        }
        out
    }

    /// Checks that the calls form a valid history per key, and returns the state they lead to
    /// (key to resourceVersion). Valid: an add only for a key not held, an update whose old
    /// object is what was last heard, a delete whose object is at or after what was last heard
    /// (the server's final state, or a tombstone's last known state); an add or update never
    /// goes back to or repeats a version the key had. resourceVersions must be numbers, as the
    /// test servers write them.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kinformer_core::DynamicObject;
    /// use kinformer_shared_informer::ResourceEventHandler;
    /// use kinformer_test_support::Recorder;
    ///
    /// let mut p = DynamicObject::default();
    /// p.metadata.name = Some("a".into());
    /// p.metadata.resource_version = Some("3".into());
    /// let p = Arc::new(p);
    /// let record = Recorder::<DynamicObject>::new();
    /// record.on_add(&p, false);
    /// record.on_add(&p, false);
    /// assert_eq!(record.replay().unwrap_err(), "add a (0->3) while holding Some(3)");
    /// ```
    pub fn replay(&self) -> Result<BTreeMap<String, String>, String> {
        let version = |v: &Option<String>| -> Result<u64, String> {
            let v = v.as_deref().unwrap_or("");
            v.parse()
                .map_err(|_| format!("resourceVersion {v:?} is not a number"))
        };
        let mut state: BTreeMap<String, u64> = BTreeMap::new();
        let mut last_version: BTreeMap<String, u64> = BTreeMap::new();
        for e in self.entries().iter() {
            let key = &e.key;
            let held = state.get(key).copied();
            let what = if e.verb == "tombstone" {
                "delete"
            } else {
                e.verb
            };
            // The deleted object's version is checked as the "old" one; an add has none.
            let (old, new) = match what {
                "add" => (0, version(&e.version)?),
                "update" => (version(&e.old)?, version(&e.version)?),
                _ => (version(&e.version)?, 0),
            };
            match (what, held) {
                ("add", None) => {}
                // An update's old object is what the handler last heard.
                ("update", Some(h)) if h == old => {}
                // A delete carries the server's final state (a version at or after the last
                // heard), or a tombstone with the last state the informer knew.
                ("delete", Some(h)) if h <= old => {}
                _ => {
                    return Err(format!(
                        "{what} {key} ({old}->{new}) while holding {held:?}"
                    ));
                }
            }
            if what != "delete" {
                if last_version.get(key).is_some_and(|l| *l >= new) {
                    return Err(format!("{what} {key} went back or repeated to {new}"));
                }
                last_version.insert(key.clone(), new);
                state.insert(key.clone(), new);
            } else {
                state.remove(key);
            }
        }
        Ok(state.into_iter().map(|(k, v)| (k, v.to_string())).collect())
    }
}

impl<K: Object> Recorder<K> {
    fn push(&self, heard: Heard<'_, K>) {
        let (old, version) = match &heard {
            Heard::Add { object, .. } => (None, object.resource_version()),
            Heard::Update { old, new } => (old.resource_version(), new.resource_version()),
            Heard::Delete(o) => (None, o.object().resource_version()),
        };
        let entry = Entry {
            line: (self.inner.format)(&heard),
            key: heard.key().to_string(),
            verb: heard.verb(),
            old: old.map(str::to_owned),
            version: version.map(str::to_owned),
        };
        self.entries().push(entry);
    }
}

impl<K: Object + Send + Sync + 'static> ResourceEventHandler<K> for Recorder<K> {
    fn on_add(&self, object: &Arc<K>, initial: bool) {
        self.push(Heard::Add { object, initial });
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        self.push(Heard::Update { old, new });
    }
    fn on_delete(&self, object: &DeltaObject<K>) {
        self.push(Heard::Delete(object));
    }
}
