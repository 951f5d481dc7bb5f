//! Every public type of kinformer-core crosses threads: objects are shared between the reflector,
//! the queue, the cache and handler tasks. These assertions fail to compile if one stops being
//! `Send + Sync`.

use k8s_openapi::api::core::v1::Pod;
use kinformer_core::*;

fn send_sync<T: Send + Sync>() {}

#[test]
fn public_types_are_send_and_sync() {
    send_sync::<ObjectKey>();
    send_sync::<ResourceVersion>();
    send_sync::<ApiResource>();
    send_sync::<DynamicObject>();
    send_sync::<PartialObjectMetadata>();
    send_sync::<WatchEvent<Pod>>();
    send_sync::<WatchEvent<DynamicObject>>();
    send_sync::<Bookmark>();
    send_sync::<ObjectList<Pod>>();
    send_sync::<Delta<Pod>>();
    send_sync::<DeltaObject<Pod>>();
    send_sync::<DeletedFinalStateUnknown<Pod>>();
    send_sync::<LabelSelector>();
    send_sync::<FieldSelector>();
    send_sync::<Status>();
    send_sync::<Error>();
    send_sync::<ListParams>();
    send_sync::<WatchParams>();
    send_sync::<Box<dyn ReflectorStore<Pod>>>();
    send_sync::<Box<dyn CacheRead<Pod>>>();
    send_sync::<Box<dyn IndexRead<Pod>>>();
    send_sync::<Box<dyn CacheWrite<Pod>>>();
    send_sync::<Box<dyn DeltaQueue<Pod>>>();
    send_sync::<Box<dyn ListWatch<Pod>>>();
    send_sync::<BoxListWatch<Pod>>();
    send_sync::<list_watch::Error>();
    send_sync::<StoreError>();
    send_sync::<Popped<Pod>>();
    send_sync::<Notification<Pod>>();
    send_sync::<Applied<Pod>>();
    send_sync::<CacheOp<Pod>>();
    send_sync::<Replaced<Pod>>();
}

#[test]
fn public_futures_are_send() {
    fn send<T: Send>(_: T) {}
    let queue: Box<dyn DeltaQueue<Pod>> = Box::new(Closed);
    let cache =
        std::sync::Mutex::new(std::collections::BTreeMap::<ObjectKey, std::sync::Arc<Pod>>::new());
    send(PopFuture::new(&*queue));
    send(PopIntoFuture::new(&*queue, &cache));
    send(Closed.pop());
    send(Closed.pop_into(&cache));
}

/// An empty, closed queue.
struct Closed;

impl DeltaQueue<Pod> for Closed {
    fn poll_pop(
        &self,
        _: &mut std::task::Context<'_>,
        _: &mut dyn FnMut(Popped<Pod>),
    ) -> std::task::Poll<bool> {
        std::task::Poll::Ready(false)
    }
    fn requeue(&self, _: Vec<Delta<Pod>>) -> bool {
        false
    }
    fn has_synced(&self) -> bool {
        true
    }
    fn close(&self) {}
    fn depth(&self) -> usize {
        0
    }
}
