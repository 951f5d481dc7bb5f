//! Helpers shared by the delta FIFO's integration tests: objects, a consumer store, renderings.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kinformer_core::{
    Applied, CacheRead, Delta, DeltaType, DynamicObject, Notification, Object, ObjectKey, Popped,
    apply_popped,
};

/// A cluster-scoped object whose key is `name`, at resourceVersion `rv`.
pub fn obj(name: &str, rv: &str) -> Arc<DynamicObject> {
    let mut o = DynamicObject::default();
    o.metadata.name = Some(name.into());
    o.metadata.resource_version = Some(rv.into());
    Arc::new(o)
}

/// The consumer's store, shared with the FIFO as its known objects.
#[derive(Debug, Default, Clone)]
pub struct Store(pub Arc<Mutex<BTreeMap<ObjectKey, Arc<DynamicObject>>>>);

impl Store {
    pub fn with(objects: &[(&str, &str)]) -> Self {
        let s = Self::default();
        for (n, rv) in objects {
            s.0.lock()
                .unwrap()
                .insert(ObjectKey::new(None, n), obj(n, rv));
        }
        s
    }

    /// Applies what a pop handed out by the consumer contract, as an informer does to its
    /// indexer.
    pub fn apply(&self, popped: &Popped<DynamicObject>) -> Applied<DynamicObject> {
        apply_popped(popped, &*self.0)
    }

    /// `name@rv` of every stored object, in key order.
    pub fn render(&self) -> Vec<String> {
        self.0.lock().unwrap().values().map(|o| at(o)).collect()
    }
}

impl CacheRead<DynamicObject> for Store {
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

/// `name@rv`.
pub fn at(o: &DynamicObject) -> String {
    format!("{}@{}", o.name(), o.resource_version().unwrap_or("?"))
}

/// `Added(foo@10)`, `Tombstone(bar@6)`; a `*` marks a delta of the initial list.
pub fn render_delta(d: &Delta<DynamicObject>) -> String {
    let body = if d.object.is_tombstone() {
        assert_eq!(d.kind, DeltaType::Deleted, "a tombstone is always a delete");
        assert_eq!(
            d.key(),
            d.object.object().key(),
            "a tombstone's key is its object's"
        );
        format!("Tombstone({})", at(d.object.object()))
    } else {
        format!("{:?}({})", d.kind, at(d.object.object()))
    };
    if d.is_initial_list {
        format!("{body}*")
    } else {
        body
    }
}

/// `foo: Added(foo@10) Updated(foo@11)`, `batch: Added(a@1), Sync(b@2)`,
/// `replace@9* [a@1] tombstones [b@2]`.
pub fn render(popped: &Popped<DynamicObject>) -> String {
    match popped {
        Popped::Key(deltas) => {
            let key = deltas[0].key();
            assert!(
                deltas.iter().all(|d| d.key() == key),
                "one key per classic pop"
            );
            let ds: Vec<String> = deltas.iter().map(render_delta).collect();
            format!("{key}: {}", ds.join(" "))
        }
        Popped::Batch(deltas) => {
            let ds: Vec<String> = deltas.iter().map(render_delta).collect();
            format!("batch: {}", ds.join(", "))
        }
        Popped::Replace(step) => {
            let objects: Vec<String> = step.objects.iter().map(|o| at(o)).collect();
            let tombs: Vec<String> = step
                .tombstones
                .iter()
                .map(|t| {
                    assert_eq!(t.key, t.last_known.key());
                    at(&t.last_known)
                })
                .collect();
            format!(
                "replace@{}{} [{}] tombstones [{}]",
                step.resource_version,
                if step.is_initial_list { "*" } else { "" },
                objects.join(", "),
                tombs.join(", ")
            )
        }
        Popped::Resync => "resync".to_owned(),
        Popped::Bookmark(rv) => format!("bookmark@{rv}"),
    }
}

/// `+a@1*` (added, `*` in the initial list), `~a@1>a@2` (updated), `-a@2` (deleted),
/// `-?a@2` (deleted, inferred by a relist).
pub fn render_notification(n: &Notification<DynamicObject>) -> String {
    match n {
        Notification::Added {
            object,
            is_in_initial_list,
        } => format!(
            "+{}{}",
            at(object),
            if *is_in_initial_list { "*" } else { "" }
        ),
        Notification::Updated { old, new } => format!("~{}>{}", at(old), at(new)),
        Notification::Deleted { object } if object.is_tombstone() => {
            format!("-?{}", at(object.object()))
        }
        Notification::Deleted { object } => format!("-{}", at(object.object())),
    }
}
