//! The seam between the coordination and wherever Leases live: [`LeaseStore`], its HTTP
//! implementation over [`Api<Lease>`](kinformer_client::Api), and [`MemoryLeaseStore`].

use std::collections::BTreeMap;
use std::str::FromStr as _;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::Lease;
use kinformer_core::LabelSelector;
use kinformer_core::list_watch::{DEFAULT_PAGE_SIZE, list_all};
use kinformer_core::{ListParams, Object as _};
use parking_lot::Mutex;

use crate::Error;

/// What the coordination needs from the Leases of one namespace: read one, create one, update
/// one with optimistic concurrency, delete one, and list a group by label.
///
/// Implementations answer with [`Error::NotFound`] and [`Error::Conflict`] where those apply,
/// and [`Error::Store`] for any other failure; they do not retry. The HTTP implementation is
/// [`Api<Lease>`](kinformer_client::Api) itself (namespaced: its namespace is the store's);
/// [`MemoryLeaseStore`] keeps Leases in memory for tests and examples. Blanket implementations
/// for `&T`, `Box<T>` and `Arc<T>` let callers pass what they hold, `Arc<dyn LeaseStore>`
/// included.
///
/// ```
/// use k8s_openapi::api::coordination::v1::Lease;
/// use kinformer_coordination::{Error, LeaseStore, MemoryLeaseStore};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Error> {
/// let store = MemoryLeaseStore::new();
/// let mut lease = Lease::default();
/// lease.metadata.name = Some("leader".into());
/// let created = store.create(&lease).await?;
/// assert!(store.create(&lease).await.unwrap_err().is_conflict());
///
/// // An update at the version read succeeds, once.
/// let updated = store.update(&created).await?;
/// assert!(store.update(&created).await.unwrap_err().is_conflict());
///
/// store.delete("leader", updated.metadata.resource_version.as_deref()).await?;
/// assert!(store.get("leader").await.unwrap_err().is_not_found());
/// # Ok(()) }
/// ```
#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// The Lease named `name`; [`Error::NotFound`] when there is none.
    async fn get(&self, name: &str) -> Result<Lease, Error>;

    /// Creates `lease` (named by its `metadata.name`) and returns it as stored, with its
    /// resourceVersion; [`Error::Conflict`] when a Lease of that name exists.
    async fn create(&self, lease: &Lease) -> Result<Lease, Error>;

    /// Replaces the Lease named by `lease.metadata.name` with `lease`, if it is still at
    /// `lease.metadata.resourceVersion`, and returns it as stored; [`Error::Conflict`] when it
    /// has been written since, [`Error::NotFound`] when it is gone.
    async fn update(&self, lease: &Lease) -> Result<Lease, Error>;

    /// Deletes the Lease named `name`, only if it is still at `resource_version` when one is
    /// given; [`Error::Conflict`] when it is not, [`Error::NotFound`] when it is gone.
    async fn delete(&self, name: &str, resource_version: Option<&str>) -> Result<(), Error>;

    /// Every Lease whose labels match `label_selector` (Kubernetes label selector syntax, such
    /// as `kinformer.io/shard-group=workers`), read at the latest version.
    async fn list(&self, label_selector: &str) -> Result<Vec<Lease>, Error>;
}

macro_rules! forward_lease_store {
    ($($ty:ty),*) => {$(
        #[async_trait]
        impl<T: LeaseStore + ?Sized> LeaseStore for $ty {
            async fn get(&self, name: &str) -> Result<Lease, Error> {
                (**self).get(name).await
            }
            async fn create(&self, lease: &Lease) -> Result<Lease, Error> {
                (**self).create(lease).await
            }
            async fn update(&self, lease: &Lease) -> Result<Lease, Error> {
                (**self).update(lease).await
            }
            async fn delete(&self, name: &str, resource_version: Option<&str>) -> Result<(), Error> {
                (**self).delete(name, resource_version).await
            }
            async fn list(&self, label_selector: &str) -> Result<Vec<Lease>, Error> {
                (**self).list(label_selector).await
            }
        }
    )*};
}

forward_lease_store!(&T, Box<T>, Arc<T>);

/// The client's error as the store's: not found and conflicts (a stale version, or a create of
/// a Lease that exists) by kind, anything else as a failure with the client's error inside.
fn from_client(e: kinformer_client::Error, name: &str) -> Error {
    match e {
        kinformer_client::Error::NotFound { .. } => Error::NotFound {
            name: name.to_owned(),
        },
        kinformer_client::Error::Conflict { .. }
        | kinformer_client::Error::AlreadyExists { .. } => Error::Conflict {
            name: name.to_owned(),
        },
        other => Error::store(other),
    }
}

/// Leases over HTTP, in the [`Api`](kinformer_client::Api)'s namespace (make it with
/// [`Api::namespaced`](kinformer_client::Api::namespaced)). Lists are paged.
///
/// ```no_run
/// use k8s_openapi::api::coordination::v1::Lease;
/// use kinformer_client::{Api, Client};
/// use kinformer_coordination::LeaseStore;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let leases: Api<Lease> = Api::namespaced(Client::try_default()?, "kube-system");
/// let store: &dyn LeaseStore = &leases;
/// let lease = store.get("kube-controller-manager").await?;
/// # Ok(()) }
/// ```
#[async_trait]
impl LeaseStore for kinformer_client::Api<Lease> {
    async fn get(&self, name: &str) -> Result<Lease, Error> {
        kinformer_client::Api::get(self, name)
            .await
            .map_err(|e| from_client(e, name))
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, Error> {
        kinformer_client::Api::create(self, lease)
            .await
            .map_err(|e| from_client(e, lease.name()))
    }

    async fn update(&self, lease: &Lease) -> Result<Lease, Error> {
        kinformer_client::Api::replace(self, lease.name(), lease)
            .await
            .map_err(|e| from_client(e, lease.name()))
    }

    async fn delete(&self, name: &str, resource_version: Option<&str>) -> Result<(), Error> {
        kinformer_client::Api::delete(self, name, resource_version)
            .await
            .map_err(|e| from_client(e, name))
    }

    async fn list(&self, label_selector: &str) -> Result<Vec<Lease>, Error> {
        let params = ListParams {
            label_selector: Some(label_selector.to_owned()),
            ..ListParams::default()
        };
        let list = list_all(self, &params, DEFAULT_PAGE_SIZE)
            .await
            .map_err(Error::store)?;
        Ok(list.items.into_iter().map(Arc::unwrap_or_clone).collect())
    }
}

/// Leases kept in memory, with the API server's optimistic concurrency: every write gets a new
/// resourceVersion, and an update or delete at an older one is a conflict. Clones share the
/// same Leases, so candidates in one process (tests, examples) coordinate through it.
///
/// An update without a resourceVersion is unconditional, as the API server allows for Leases.
#[derive(Debug, Clone, Default)]
pub struct MemoryLeaseStore {
    inner: Arc<Mutex<Memory>>,
}

#[derive(Debug, Default)]
struct Memory {
    leases: BTreeMap<String, Lease>,
    version: u64,
}

impl Memory {
    /// Stores `lease` under `name` at the next resourceVersion.
    fn put(&mut self, name: &str, mut lease: Lease) -> Lease {
        self.version += 1;
        lease.metadata.resource_version = Some(self.version.to_string());
        self.leases.insert(name.to_owned(), lease.clone());
        lease
    }
}

impl MemoryLeaseStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl LeaseStore for MemoryLeaseStore {
    async fn get(&self, name: &str) -> Result<Lease, Error> {
        self.inner
            .lock()
            .leases
            .get(name)
            .cloned()
            .ok_or_else(|| Error::NotFound {
                name: name.to_owned(),
            })
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, Error> {
        let name = lease.name();
        if name.is_empty() {
            return Err(Error::store("a Lease needs a metadata.name"));
        }
        let mut memory = self.inner.lock();
        if memory.leases.contains_key(name) {
            return Err(Error::Conflict {
                name: name.to_owned(),
            });
        }
        let mut lease = lease.clone();
        lease.metadata.uid = Some(format!("memory-{}", memory.version + 1));
        Ok(memory.put(name, lease))
    }

    async fn update(&self, lease: &Lease) -> Result<Lease, Error> {
        let name = lease.name();
        let mut memory = self.inner.lock();
        let Some(stored) = memory.leases.get(name) else {
            return Err(Error::NotFound {
                name: name.to_owned(),
            });
        };
        if lease
            .resource_version()
            .is_some_and(|rv| Some(rv) != stored.resource_version())
        {
            return Err(Error::Conflict {
                name: name.to_owned(),
            });
        }
        let mut lease = lease.clone();
        lease.metadata.uid.clone_from(&stored.metadata.uid);
        Ok(memory.put(name, lease))
    }

    async fn delete(&self, name: &str, resource_version: Option<&str>) -> Result<(), Error> {
        let mut memory = self.inner.lock();
        let Some(stored) = memory.leases.get(name) else {
            return Err(Error::NotFound {
                name: name.to_owned(),
            });
        };
        if resource_version.is_some_and(|rv| Some(rv) != stored.resource_version()) {
            return Err(Error::Conflict {
                name: name.to_owned(),
            });
        }
        memory.leases.remove(name);
        memory.version += 1;
        Ok(())
    }

    async fn list(&self, label_selector: &str) -> Result<Vec<Lease>, Error> {
        let selector = LabelSelector::from_str(label_selector).map_err(Error::store)?;
        Ok(self
            .inner
            .lock()
            .leases
            .values()
            .filter(|l| selector.matches(l.labels()))
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(name: &str, labels: &[(&str, &str)]) -> Lease {
        let mut lease = Lease::default();
        lease.metadata.name = Some(name.into());
        lease.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        lease
    }

    #[tokio::test]
    async fn memory_store_keeps_optimistic_concurrency() {
        let store = MemoryLeaseStore::new();
        assert!(store.get("a").await.unwrap_err().is_not_found());
        assert!(
            store
                .update(&lease("a", &[]))
                .await
                .unwrap_err()
                .is_not_found()
        );
        assert!(store.delete("a", None).await.unwrap_err().is_not_found());

        let v1 = store.create(&lease("a", &[])).await.unwrap();
        assert!(v1.metadata.uid.is_some());
        assert!(
            store
                .create(&lease("a", &[]))
                .await
                .unwrap_err()
                .is_conflict()
        );
        let v2 = store.update(&v1).await.unwrap();
        assert_ne!(v1.resource_version(), v2.resource_version());
        assert_eq!(v1.metadata.uid, v2.metadata.uid);
        assert!(store.update(&v1).await.unwrap_err().is_conflict());
        // No version: unconditional.
        store.update(&lease("a", &[])).await.unwrap();
        assert!(
            store
                .delete("a", v2.resource_version())
                .await
                .unwrap_err()
                .is_conflict()
        );
        let now = store.get("a").await.unwrap();
        store.delete("a", now.resource_version()).await.unwrap();
        assert!(store.get("a").await.unwrap_err().is_not_found());
        assert!(
            matches!(
                store.create(&Lease::default()).await,
                Err(Error::Store { .. })
            ),
            "a Lease without a name"
        );
    }

    #[tokio::test]
    async fn memory_store_lists_by_label() {
        let store = MemoryLeaseStore::new();
        for (name, group) in [("a", "x"), ("b", "y"), ("c", "x")] {
            store
                .create(&lease(name, &[("group", group)]))
                .await
                .unwrap();
        }
        let names = |leases: Vec<Lease>| -> Vec<String> {
            leases.iter().map(|l| l.name().to_owned()).collect()
        };
        assert_eq!(names(store.list("group=x").await.unwrap()), ["a", "c"]);
        assert_eq!(names(store.list("").await.unwrap()), ["a", "b", "c"]);
        assert!(matches!(
            store.list("group in (").await,
            Err(Error::Store { .. })
        ));
    }

    #[test]
    fn client_errors_map_to_the_store_kinds() {
        let message = || "m".to_owned();
        let e = from_client(
            kinformer_client::Error::NotFound { message: message() },
            "a",
        );
        assert!(e.is_not_found());
        let e = from_client(
            kinformer_client::Error::Conflict { message: message() },
            "a",
        );
        assert!(e.is_conflict());
        let e = from_client(
            kinformer_client::Error::AlreadyExists { message: message() },
            "a",
        );
        assert!(e.is_conflict());
        let e = from_client(
            kinformer_client::Error::Forbidden { message: message() },
            "a",
        );
        assert!(matches!(e, Error::Store { .. }));
    }
}
