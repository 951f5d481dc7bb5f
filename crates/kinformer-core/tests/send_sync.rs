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
    send_sync::<Box<dyn KnownObjects<Pod>>>();
}
