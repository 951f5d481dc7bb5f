//! Compact and compressed cache forms of Kubernetes objects: the raw JSON (plain or compressed)
//! plus the decoded metadata every layer needs, with the typed object decoded on demand.
//!
//! A typed k8s-openapi `Pod` of about 5 KB of JSON takes some 36 KB of heap once decoded, and
//! its decode costs far more than its metadata's. Most controllers' handlers only enqueue a key.
//! The forms here are object types like any other: they implement
//! [`Object`] and serde's `Deserialize`, so the client decodes them from
//! lists and watch events, and the reflector, delta FIFO, indexer, lister and shared informer
//! hold them as they hold `Pod`.
//!
//! - [`Compact<K>`]: the JSON as received, plus the decoded metadata. [`Compact::typed`] decodes
//!   the JSON into `K`.
//! - [`Compressed<K>`]: the JSON compressed with zstd and a dictionary trained on the first
//!   objects of the type ([`Codec`]), plus the decoded metadata. [`Compressed::typed`]
//!   decompresses and decodes.
//! - [`CompactMessage<K>`]: the protobuf message as received (from a client that lists and
//!   watches in protobuf), plus the decoded metadata; [`CompactMessage::typed`] decodes the
//!   message into `K`. Built-in kinds only: custom resources have no protobuf.
//! - [`DecodedCache`]: a small LRU of typed objects, shared by the handlers that want one, for
//!   when the same objects are decoded again and again. None is kept unless you make one.
//! - [`Form`]: what the forms (and `K` itself) have in common, to write code generic over them.
//!
//! What it does not do: decode anything but JSON (and, for [`CompactMessage`], protobuf), or
//! check that the object beyond `metadata` fits `K` before [`typed`](Form::typed) is called (a
//! field of the wrong type is found then, as an [`Error::Typed`] or [`Error::Protobuf`]).
//!
//! # Cost
//! Measured by this crate's `forms` bench on the simulated server's realistic pods:
//!
//! | form | heap per object | CPU to decode from JSON | CPU of `.typed()` |
//! |---|---|---|---|
//! | `Pod` (typed) | 36.2 KB | 42-47 µs | - |
//! | `Compact<Pod>` | 6.1 KB | 11-12 µs | 31-47 µs |
//! | `Compressed<Pod>` | 1.4 KB, plus one 32 KB dictionary per type | 21-34 µs | 40 µs (one run; 2.5 µs of it decompressing) |
//! | `CompactMessage<Pod>` | 3.6 KB (from 2.6 KB of protobuf) | 2.9 µs, from protobuf (a typed `Pod` from protobuf: 39.2 µs) | 29.4 µs |
//!
//! Heap is what the allocator counts live per object held in an `Arc` over 5,000 pods of 5.1 KB of
//! JSON on average (requested sizes, without the allocator's own overhead). CPU is the calling
//! thread's, two runs on a 2-core machine shared with other builds, with this crate and
//! kinformer-protobuf optimised and their dependencies at the workspace's test opt-level 1
//! (`cargo bench -p kinformer-compact --bench forms --profile dev --config
//! 'profile.dev.package.kinformer-compact.opt-level=3' --config
//! 'profile.dev.package.kinformer-protobuf.opt-level=3'`); a release build will be faster across
//! the board, and the ratios are what to read. `CompactMessage<Pod>`'s row is one run of a later
//! session, on a machine slower than for the rows above: in that run `Compact<Pod>` decoded in
//! 22.2 µs and its `.typed()` took 50.0 µs, and a typed `Pod` from JSON (serde_json) in 78.5 µs.
//!
//! # Example
//! With the HTTP client, `Compact<Pod>` names the same resource as `Pod`, so an `Api` (or an
//! informer) of compact pods is built as one of pods:
//! ```no_run
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_client::{Api, Client};
//! use kinformer_compact::Compact;
//! use kinformer_core::{ListParams, ListWatch, Object};
//!
//! # async fn run(client: Client) -> Result<(), Box<dyn std::error::Error>> {
//! let pods = Api::<Compact<Pod>>::all(client);
//! for pod in pods.list(&ListParams::default()).await?.items {
//!     // The key, labels and owners come without a decode...
//!     let key = pod.key();
//!     // ...the rest when asked for.
//!     let phase = pod.typed()?.status.and_then(|s| s.phase);
//!     println!("{key}: {phase:?}");
//! }
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use kinformer_core::{Object, ObjectKey};
use parking_lot::Mutex;

mod compact;
mod compressed;
mod meta;

pub use compact::Compact;
pub use compressed::{Codec, CodecConfig, Compressed, Dictionary};
/// The compact form over protobuf: the object's protobuf message plus its decoded metadata, for
/// built-in kinds listed and watched in protobuf. Defined beside the protobuf codec (which
/// decodes it), and a [`Form`] like the others.
pub use kinformer_protobuf::CompactMessage;

/// What can go wrong in `kinformer-compact`. Each variant says what a caller can do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The bytes are not a JSON object, or its `metadata` has the wrong shape. Not retryable
    /// for this payload: the server sent something that is not a Kubernetes object.
    #[error("cannot decode the object's JSON or metadata: {source}")]
    Decode {
        /// The JSON error, with line and column.
        #[source]
        source: serde_json::Error,
    },

    /// The JSON does not decode into the typed object. Not retryable for this object: the
    /// object does not fit the type (a field of the wrong type, an unexpected kind).
    #[error("cannot decode the typed object: {source}")]
    Typed {
        /// The JSON error, with line and column.
        #[source]
        source: serde_json::Error,
    },

    /// Compressing, decompressing or training a dictionary failed. Not retryable for this
    /// object; a dictionary that failed to train is not retried, objects go uncompressed by one.
    #[error("compression failed: {message}")]
    Codec {
        /// What zstd said.
        message: String,
    },

    /// The protobuf message does not decode into the typed object
    /// ([`CompactMessage::typed`]). Not retryable for this object.
    #[error("cannot decode the typed object from its protobuf message: {source}")]
    Protobuf {
        /// What the protobuf decoder found.
        #[source]
        source: kinformer_protobuf::Error,
    },

    /// The object's JSON is too large for the compressed form (4 GiB or more). Keep it in the
    /// compact or typed form.
    #[error("object of {len} bytes is too large to compress")]
    TooLarge {
        /// The JSON's length.
        len: usize,
    },
}

/// A cache form of objects of type `K`: an [`Object`] that decodes into a `K` on demand.
/// Implemented by [`Compact<K>`], [`Compressed<K>`], [`CompactMessage<K>`] and, as a clone, by
/// every `K: Clone` that is an `Object`, so code generic over the form can read typed fields.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_compact::{Compact, Form};
///
/// fn node_of<F: Form<Pod>>(pod: &F) -> Option<String> {
///     pod.typed().ok()?.spec?.node_name
/// }
/// let json = br#"{"metadata":{"name":"a"},"spec":{"nodeName":"n1","containers":[]}}"#;
/// let pod: Pod = serde_json::from_slice(json).unwrap();
/// assert_eq!(node_of(&pod), Some("n1".into()));
/// assert_eq!(node_of(&Compact::<Pod>::from_json(json).unwrap()), Some("n1".into()));
/// ```
pub trait Form<K>: Object {
    /// The typed object.
    fn typed(&self) -> Result<K, Error>;
}

impl<K: Object + Clone> Form<K> for K {
    fn typed(&self) -> Result<K, Error> {
        Ok(self.clone())
    }
}

impl<K: kinformer_protobuf::convert::Protobuf> Form<K> for CompactMessage<K> {
    fn typed(&self) -> Result<K, Error> {
        CompactMessage::typed(self).map_err(|source| Error::Protobuf { source })
    }
}

/// A bounded cache of decoded objects, least recently used out first, keyed by object key and
/// resourceVersion (objects without a resourceVersion are decoded every time). Share it (in an
/// `Arc`) between the handlers that decode the same objects.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_compact::{Compact, DecodedCache};
///
/// let cache = DecodedCache::<Pod>::new(100);
/// let pod = Compact::<Pod>::from_json(br#"{"metadata":{"name":"a","resourceVersion":"5"}}"#).unwrap();
/// let first = cache.get(&pod).unwrap();
/// let again = cache.get(&pod).unwrap();
/// assert!(std::sync::Arc::ptr_eq(&first, &again));
/// assert_eq!((cache.hits(), cache.misses()), (1, 1));
/// ```
pub struct DecodedCache<K> {
    capacity: usize,
    inner: Mutex<Lru<K>>,
}

struct Lru<K> {
    entries: HashMap<(ObjectKey, Box<str>), (Arc<K>, u64)>,
    order: BTreeMap<u64, (ObjectKey, Box<str>)>,
    tick: u64,
    hits: u64,
    misses: u64,
}

impl<K> DecodedCache<K> {
    /// A cache of at most `capacity` decoded objects (0 keeps none).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::new(Lru {
                entries: HashMap::new(),
                order: BTreeMap::new(),
                tick: 0,
                hits: 0,
                misses: 0,
            }),
        }
    }

    /// The typed form of `object`: from the cache if it holds this key at this
    /// resourceVersion, decoded (outside the lock) and kept otherwise.
    pub fn get<F: Form<K> + ?Sized>(&self, object: &F) -> Result<Arc<K>, Error> {
        let Some(version) = object.resource_version() else {
            self.inner.lock().misses += 1;
            return object.typed().map(Arc::new);
        };
        let id = (object.key(), Box::<str>::from(version));
        {
            let mut lru = self.inner.lock();
            lru.tick += 1;
            let tick = lru.tick;
            if let Some((typed, used)) = lru.entries.get_mut(&id) {
                let typed = Arc::clone(typed);
                let old = std::mem::replace(used, tick);
                lru.order.remove(&old);
                lru.order.insert(tick, id);
                lru.hits += 1;
                return Ok(typed);
            }
            lru.misses += 1;
        }
        let typed = Arc::new(object.typed()?);
        if self.capacity == 0 {
            return Ok(typed);
        }
        let mut lru = self.inner.lock();
        lru.tick += 1;
        let tick = lru.tick;
        if let Some((_, old)) = lru.entries.insert(id.clone(), (Arc::clone(&typed), tick)) {
            lru.order.remove(&old);
        }
        lru.order.insert(tick, id);
        while lru.entries.len() > self.capacity {
            let Some((_, oldest)) = lru.order.pop_first() else {
                break;
            };
            lru.entries.remove(&oldest);
        }
        Ok(typed)
    }

    /// How many objects it holds.
    pub fn len(&self) -> usize {
        self.inner.lock().entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many [`get`](Self::get)s found the object decoded.
    pub fn hits(&self) -> u64 {
        self.inner.lock().hits
    }

    /// How many [`get`](Self::get)s decoded.
    pub fn misses(&self) -> u64 {
        self.inner.lock().misses
    }
}

impl<K> fmt::Debug for DecodedCache<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lru = self.inner.lock();
        f.debug_struct("DecodedCache")
            .field("capacity", &self.capacity)
            .field("len", &lru.entries.len())
            .field("hits", &lru.hits)
            .field("misses", &lru.misses)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde::de::DeserializeOwned;

    fn pod(name: &str, rv: &str) -> Compact<Pod> {
        Compact::from_json(
            format!(
                r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}}}}"#
            )
            .as_bytes(),
        )
        .unwrap()
    }

    #[test]
    fn the_decoded_cache_keeps_the_most_recently_used() {
        let cache = DecodedCache::<Pod>::new(2);
        let (a, b, c) = (pod("a", "1"), pod("b", "1"), pod("c", "1"));
        let a1 = cache.get(&a).unwrap();
        cache.get(&b).unwrap();
        // `a` is used again, so `b` is the least recently used when `c` comes.
        assert!(Arc::ptr_eq(&a1, &cache.get(&a).unwrap()));
        cache.get(&c).unwrap();
        assert_eq!(cache.len(), 2);
        assert!(Arc::ptr_eq(&a1, &cache.get(&a).unwrap()));
        assert_eq!((cache.hits(), cache.misses()), (2, 3));
        cache.get(&b).unwrap();
        assert_eq!(cache.misses(), 4, "b was evicted");
        // A new resourceVersion is a new object.
        let a2 = cache.get(&pod("a", "2")).unwrap();
        assert_eq!(a2.metadata.resource_version.as_deref(), Some("2"));
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn public_types_are_send_and_sync() {
        fn is<T: Send + Sync>() {}
        is::<Compact<Pod>>();
        is::<Compressed<Pod>>();
        is::<CompactMessage<Pod>>();
        is::<Codec>();
        is::<Dictionary>();
        is::<DecodedCache<Pod>>();
        is::<Error>();
    }

    #[test]
    fn the_forms_decode_as_any_object_the_client_takes() {
        fn is<T: DeserializeOwned + Object + Clone + Send + Sync>() {}
        is::<Compact<Pod>>();
        is::<Compressed<Pod>>();
        is::<CompactMessage<Pod>>();
    }

    #[test]
    fn every_form_gives_the_same_typed_object_through_the_decoded_cache() {
        fn through<F: Form<Pod>>(form: &F) -> Pod {
            let cache = DecodedCache::<Pod>::new(4);
            let first = cache.get(form).unwrap();
            assert!(Arc::ptr_eq(&first, &cache.get(form).unwrap()));
            Pod::clone(&first)
        }
        let compact = pod("a", "3");
        let typed = compact.typed().unwrap();
        let message = CompactMessage::from_typed(&typed);
        assert_eq!(through(&message), typed);
        assert_eq!(through(&compact), typed);
        assert_eq!(through(&typed), typed);

        // A message that does not decode into the kind is a typed error naming protobuf.
        let broken = CompactMessage::<Pod>::from_message(&[0x12, 0x01, 0xff]).unwrap();
        assert!(matches!(
            Form::<Pod>::typed(&broken),
            Err(Error::Protobuf { .. })
        ));
    }

    #[test]
    fn a_zero_capacity_cache_keeps_nothing() {
        let cache = DecodedCache::<Pod>::new(0);
        cache.get(&pod("a", "1")).unwrap();
        cache.get(&pod("a", "1")).unwrap();
        assert!(cache.is_empty());
        assert_eq!(cache.misses(), 2);
    }
}
