//! [`Compressed`]: an object kept as zstd-compressed JSON plus its decoded metadata, and the
//! [`Codec`] that trains a dictionary per object type.

use std::any::{TypeId, type_name};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use serde::de::{DeserializeOwned, Error as _};
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use zstd::zstd_safe::{self, CCtx, CDict, DCtx, DDict};

use crate::Error;
use crate::meta::{Meta, object_from_meta};

/// An object of type `K` kept as compressed JSON, with its metadata decoded: about 1.4 KB for a
/// 5 KB pod once the type's dictionary is trained (see [`Codec`]).
///
/// Like [`Compact`](crate::Compact) it implements [`Object`](kinformer_core::Object) from the
/// decoded metadata, so every layer takes it as it takes `K`; [`typed`](Self::typed)
/// decompresses and decodes. It decodes with serde from a JSON object (through `serde_json`:
/// bytes, a reader or a `serde_json::Value`), and serializes back to the JSON it came in. A
/// clone shares the bytes.
///
/// Decoding compresses with the [shared codec of `K`](Codec::of): without a dictionary for the
/// first objects, then with a dictionary trained on them. Each object keeps the dictionary it was
/// compressed with.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_compact::Compressed;
/// use kinformer_core::Object;
///
/// let json = br#"{"metadata":{"name":"web-0","namespace":"shop","labels":{"app":"web"}},
///     "spec":{"nodeName":"node-1","containers":[{"name":"web","image":"nginx"}]}}"#;
/// let pod: Compressed<Pod> = serde_json::from_slice(json).unwrap();
/// assert_eq!(pod.namespace(), Some("shop"));
/// let typed: Pod = pod.typed().unwrap();
/// assert_eq!(typed.spec.unwrap().node_name.as_deref(), Some("node-1"));
/// assert_eq!(pod.json().unwrap().as_bytes(), json);
/// ```
pub struct Compressed<K> {
    inner: Arc<Inner>,
    _kind: PhantomData<fn() -> K>,
}

struct Inner {
    meta: Meta,
    /// One zstd frame.
    frame: Box<[u8]>,
    /// The length of the JSON.
    len: u32,
    dictionary: Option<Arc<Dictionary>>,
}

impl<K: 'static> Compressed<K> {
    /// Decodes the metadata of the JSON object `json` and compresses the bytes with the shared
    /// codec of `K` ([`Codec::of`]).
    ///
    /// Fails with [`Error::Decode`] when `json` is not one JSON object or its `metadata` has
    /// the wrong shape; the rest is only checked when [`typed`](Self::typed) is called.
    pub fn from_json(json: &[u8]) -> Result<Self, Error> {
        Self::from_json_with(&Codec::of::<K>(), json)
    }
}

impl<K> Compressed<K> {
    /// Like [`from_json`](Self::from_json), with a codec of your own.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_compact::{Codec, CodecConfig, Compressed};
    ///
    /// let codec = Codec::new(CodecConfig { train_after: 0, ..CodecConfig::default() });
    /// let pod = Compressed::<Pod>::from_json_with(&codec, br#"{"metadata":{"name":"a"}}"#).unwrap();
    /// assert!(!pod.has_dictionary());
    /// ```
    pub fn from_json_with(codec: &Codec, json: &[u8]) -> Result<Self, Error> {
        let raw: Box<RawValue> =
            serde_json::from_slice(json).map_err(|source| Error::Decode { source })?;
        Self::from_raw(codec, &raw)
    }

    fn from_raw(codec: &Codec, json: &RawValue) -> Result<Self, Error> {
        let json = json.get();
        let meta = Meta::decode(json)?;
        let len = u32::try_from(json.len()).map_err(|_| Error::TooLarge { len: json.len() })?;
        let (frame, dictionary) = codec.compress(json.as_bytes())?;
        Ok(Self {
            inner: Arc::new(Inner {
                meta,
                frame,
                len,
                dictionary,
            }),
            _kind: PhantomData,
        })
    }

    /// The object's JSON, decompressed: exactly the bytes it was built from.
    pub fn json(&self) -> Result<String, Error> {
        let mut out = Vec::with_capacity(self.inner.len as usize);
        self.decompress_into(&mut out)?;
        String::from_utf8(out).map_err(|_| Error::Codec {
            message: "decompressed bytes are not UTF-8".into(),
        })
    }

    fn decompress_into(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        out.clear();
        out.reserve(self.inner.len as usize);
        DCTX.with_borrow_mut(|d| match &self.inner.dictionary {
            Some(dict) => d.decompress_using_ddict(out, &self.inner.frame, &dict.ddict),
            None => d.decompress(out, &self.inner.frame),
        })
        .map_err(codec_error)?;
        if out.len() != self.inner.len as usize {
            return Err(Error::Codec {
                message: format!(
                    "decompressed {} bytes where {} were compressed",
                    out.len(),
                    self.inner.len
                ),
            });
        }
        Ok(())
    }

    /// Decompresses and decodes the whole object into `K`. Each call decodes anew; see
    /// [`DecodedCache`](crate::DecodedCache) to keep some decoded.
    pub fn typed(&self) -> Result<K, Error>
    where
        K: DeserializeOwned,
    {
        SCRATCH.with_borrow_mut(|buf| {
            self.decompress_into(buf)?;
            // One UTF-8 check of the whole, then a parse that checks no string again.
            let typed = match std::str::from_utf8(buf) {
                Ok(json) => serde_json::from_str(json).map_err(|source| Error::Typed { source }),
                Err(_) => Err(Error::Codec {
                    message: "decompressed bytes are not UTF-8".into(),
                }),
            };
            if buf.capacity() > SCRATCH_KEEP {
                *buf = Vec::new();
            }
            typed
        })
    }

    /// Whether this object was compressed with a trained dictionary.
    pub fn has_dictionary(&self) -> bool {
        self.inner.dictionary.is_some()
    }

    /// The size of the compressed JSON.
    pub fn compressed_len(&self) -> usize {
        self.inner.frame.len()
    }

    pub(crate) fn meta(&self) -> &Meta {
        &self.inner.meta
    }
}

object_from_meta!(Compressed);

impl<K> fmt::Debug for Compressed<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.meta();
        f.debug_struct("Compressed")
            .field("namespace", &m.namespace)
            .field("name", &m.name)
            .field("resource_version", &m.resource_version)
            .field("json_bytes", &self.inner.len)
            .field("compressed_bytes", &self.inner.frame.len())
            .field("dictionary", &self.inner.dictionary.as_ref().map(|d| d.id))
            .finish()
    }
}

impl<'de, K: 'static> Deserialize<'de> for Compressed<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        Self::from_raw(&Codec::of::<K>(), &raw).map_err(D::Error::custom)
    }
}

impl<K> Serialize for Compressed<K> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let json = self.json().map_err(S::Error::custom)?;
        let raw = RawValue::from_string(json).map_err(S::Error::custom)?;
        raw.serialize(s)
    }
}

// `Compressed<K>` is a resource of the same kind as `K`, so that
// `Api::<Compressed<Pod>>::all(client)` names pods.
kinformer_core::resource_of_kind!(Compressed);

/// A decompression buffer above this size is not kept between calls.
const SCRATCH_KEEP: usize = 256 * 1024;

thread_local! {
    static CCTX: RefCell<CCtx<'static>> = RefCell::new(CCtx::create());
    static DCTX: RefCell<DCtx<'static>> = RefCell::new(DCtx::create());
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

fn codec_error(code: zstd_safe::ErrorCode) -> Error {
    Error::Codec {
        message: zstd_safe::get_error_name(code).to_owned(),
    }
}

/// How a [`Codec`] compresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodecConfig {
    /// The zstd compression level (1 to 19; 3 is zstd's default).
    pub level: i32,
    /// How many objects to sample before training the dictionary; 0 never trains one.
    pub train_after: usize,
    /// The largest dictionary to train, in bytes.
    pub dictionary_size: usize,
}

impl Default for CodecConfig {
    /// Level 3, a dictionary of up to 32 KiB trained on the first 256 objects.
    fn default() -> Self {
        Self {
            level: 3,
            train_after: 256,
            dictionary_size: 32 * 1024,
        }
    }
}

/// A trained zstd dictionary, prepared for compressing and decompressing. Objects compressed
/// with it hold an `Arc` to it.
pub struct Dictionary {
    id: u32,
    size: usize,
    cdict: CDict<'static>,
    ddict: DDict<'static>,
}

impl Dictionary {
    /// A dictionary from its bytes (as zstd's dictionary trainer makes them).
    pub fn new(bytes: &[u8], level: i32) -> Result<Self, Error> {
        let id = zstd_safe::get_dict_id(bytes).map_or(0, |id| id.get());
        let cdict = CDict::try_create(bytes, level).ok_or_else(|| Error::Codec {
            message: "cannot load the compression dictionary".into(),
        })?;
        let ddict = DDict::try_create(bytes).ok_or_else(|| Error::Codec {
            message: "cannot load the decompression dictionary".into(),
        })?;
        Ok(Self {
            id,
            size: bytes.len(),
            cdict,
            ddict,
        })
    }

    /// The dictionary's id, as written in each frame compressed with it.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The size of the dictionary's bytes.
    pub fn size(&self) -> usize {
        self.size
    }
}

impl fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dictionary")
            .field("id", &self.id)
            .field("size", &self.size)
            .finish()
    }
}

/// The compressor of one object type: compresses without a dictionary until it has seen
/// [`train_after`](CodecConfig::train_after) objects, then trains a dictionary on them (once, on
/// the thread that decodes that object) and compresses every later object with it.
///
/// `Compressed<K>` decodes through [`Codec::of::<K>()`](Codec::of), one codec per type shared by
/// the whole process, since serde gives a decoder no context; [`Codec::set`] replaces it (with
/// other settings, or a dictionary trained beforehand).
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kinformer_compact::{Codec, CodecConfig, Compressed};
///
/// Codec::set::<ConfigMap>(Codec::new(CodecConfig { train_after: 8, ..CodecConfig::default() }));
/// let maps: Vec<Compressed<ConfigMap>> = (0..9)
///     .map(|i| {
///         let json = format!(r#"{{"metadata":{{"name":"cm-{i}","namespace":"default"}},"data":{{"settings.yaml":"replicas: {i}\nimage: registry.example.com/app:1.{i}\n"}}}}"#);
///         serde_json::from_str(&json).unwrap()
///     })
///     .collect();
/// // The dictionary may be refused on so few samples; either way every object round-trips.
/// let trained = Codec::of::<ConfigMap>().dictionary().is_some();
/// assert_eq!(maps[8].has_dictionary(), trained);
/// assert!(maps.iter().all(|m| m.typed().is_ok()));
/// ```
pub struct Codec {
    config: CodecConfig,
    dictionary: OnceLock<Arc<Dictionary>>,
    samples: Mutex<Samples>,
}

#[derive(Default)]
struct Samples {
    data: Vec<u8>,
    sizes: Vec<usize>,
    done: bool,
}

impl Codec {
    /// A codec that trains its own dictionary as configured.
    pub fn new(config: CodecConfig) -> Self {
        Self {
            config,
            dictionary: OnceLock::new(),
            samples: Mutex::new(Samples {
                done: config.train_after == 0,
                ..Samples::default()
            }),
        }
    }

    /// A codec that uses `dictionary` from the first object on.
    pub fn with_dictionary(config: CodecConfig, dictionary: Arc<Dictionary>) -> Self {
        let codec = Self::new(CodecConfig {
            train_after: 0,
            ..config
        });
        let _ = codec.dictionary.set(dictionary);
        codec
    }

    /// The shared codec of type `K`, made with [`CodecConfig::default`] on first use.
    pub fn of<K: 'static>() -> Arc<Codec> {
        let mut codecs = registry().lock();
        Arc::clone(
            codecs
                .entry(TypeId::of::<K>())
                .or_insert_with(|| Arc::new(Codec::new(CodecConfig::default()))),
        )
    }

    /// Makes `codec` the shared codec of type `K`, for the objects decoded from now on.
    pub fn set<K: 'static>(codec: Codec) {
        tracing::debug!(kind = type_name::<K>(), config = ?codec.config, "compression codec set");
        registry().lock().insert(TypeId::of::<K>(), Arc::new(codec));
    }

    /// Its settings.
    pub fn config(&self) -> CodecConfig {
        self.config
    }

    /// The dictionary, once trained (or given).
    pub fn dictionary(&self) -> Option<&Arc<Dictionary>> {
        self.dictionary.get()
    }

    /// Compresses `json` (one zstd frame), with the dictionary if there is one.
    fn compress(&self, json: &[u8]) -> Result<Frame, Error> {
        let dictionary = match self.dictionary.get() {
            Some(d) => Some(Arc::clone(d)),
            None => self.sample(json),
        };
        let frame = SCRATCH.with_borrow_mut(|buf| {
            buf.clear();
            buf.reserve(zstd_safe::compress_bound(json.len()));
            CCTX.with_borrow_mut(|c| match &dictionary {
                Some(d) => c.compress_using_cdict(buf, json, &d.cdict),
                None => c.compress(buf, json, self.config.level),
            })
            .map_err(codec_error)?;
            let frame = Box::<[u8]>::from(&buf[..]);
            if buf.capacity() > SCRATCH_KEEP {
                *buf = Vec::new();
            }
            Ok::<_, Error>(frame)
        })?;
        Ok((frame, dictionary))
    }

    /// Keeps `json` as a training sample; trains the dictionary when there are enough. Returns
    /// the dictionary if it exists now.
    fn sample(&self, json: &[u8]) -> Option<Arc<Dictionary>> {
        let mut samples = self.samples.lock();
        if samples.done {
            return self.dictionary.get().cloned();
        }
        samples.data.extend_from_slice(json);
        samples.sizes.push(json.len());
        if samples.sizes.len() < self.config.train_after {
            return None;
        }
        samples.done = true;
        let Samples { data, sizes, .. } = std::mem::take(&mut *samples);
        samples.done = true;
        let trained = zstd::dict::from_continuous(&data, &sizes, self.config.dictionary_size)
            .map_err(|e| Error::Codec {
                message: e.to_string(),
            })
            .and_then(|bytes| Dictionary::new(&bytes, self.config.level));
        match trained {
            Ok(d) => {
                tracing::debug!(
                    samples = sizes.len(),
                    sample_bytes = data.len(),
                    dictionary_bytes = d.size,
                    id = d.id,
                    "compression dictionary trained"
                );
                let d = Arc::new(d);
                let _ = self.dictionary.set(Arc::clone(&d));
                Some(d)
            }
            Err(e) => {
                tracing::warn!(
                    samples = sizes.len(),
                    error = %e,
                    "cannot train a compression dictionary; compressing without one"
                );
                None
            }
        }
    }
}

impl fmt::Debug for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Codec")
            .field("config", &self.config)
            .field("dictionary", &self.dictionary.get())
            .finish_non_exhaustive()
    }
}

/// A zstd frame, and the dictionary it was compressed with.
type Frame = (Box<[u8]>, Option<Arc<Dictionary>>);

fn registry() -> &'static Mutex<HashMap<TypeId, Arc<Codec>>> {
    static CODECS: OnceLock<Mutex<HashMap<TypeId, Arc<Codec>>>> = OnceLock::new();
    CODECS.get_or_init(Default::default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use kinformer_core::Object;

    fn pod_json(i: usize) -> Vec<u8> {
        serde_json::to_vec(&kinformer_sim::generate_pod(i, 1)).unwrap()
    }

    #[test]
    fn trains_after_the_configured_number_and_every_object_round_trips() {
        let codec = Codec::new(CodecConfig {
            train_after: 64,
            ..CodecConfig::default()
        });
        let pods: Vec<Compressed<Pod>> = (0..100)
            .map(|i| Compressed::from_json_with(&codec, &pod_json(i)).unwrap())
            .collect();
        assert!(pods[..63].iter().all(|p| !p.has_dictionary()));
        assert!(pods[63..].iter().all(Compressed::has_dictionary));
        for (i, p) in pods.iter().enumerate() {
            assert_eq!(p.json().unwrap().as_bytes(), pod_json(i));
            let direct: Pod = serde_json::from_slice(&pod_json(i)).unwrap();
            assert_eq!(p.typed().unwrap(), direct);
            assert_eq!(p.key(), direct.key());
        }
        let plain = pods[..63]
            .iter()
            .map(Compressed::compressed_len)
            .sum::<usize>()
            / 63;
        let dict = pods[63..]
            .iter()
            .map(Compressed::compressed_len)
            .sum::<usize>()
            / 37;
        assert!(
            dict * 2 < plain,
            "with a dictionary {dict} B, without {plain} B"
        );
    }

    #[test]
    fn a_corrupt_frame_is_a_codec_error_not_a_panic() {
        let codec = Codec::new(CodecConfig::default());
        let p = Compressed::<Pod>::from_json_with(&codec, &pod_json(0)).unwrap();
        let mut inner = Inner {
            meta: p.meta().clone(),
            frame: p.inner.frame.clone(),
            len: p.inner.len,
            dictionary: None,
        };
        let n = inner.frame.len();
        inner.frame[n / 2] ^= 0xff;
        inner.frame[n - 1] ^= 0xff;
        let broken = Compressed::<Pod> {
            inner: Arc::new(inner),
            _kind: PhantomData,
        };
        assert!(broken.typed().is_err());
        let truncated = Compressed::<Pod> {
            inner: Arc::new(Inner {
                meta: Meta::default(),
                frame: p.inner.frame[..n / 2].into(),
                len: p.inner.len,
                dictionary: None,
            }),
            _kind: PhantomData,
        };
        assert!(matches!(truncated.typed(), Err(Error::Codec { .. })));
    }

    #[test]
    fn the_shared_codec_is_per_type() {
        struct A;
        struct B;
        Codec::set::<A>(Codec::new(CodecConfig {
            level: 7,
            ..CodecConfig::default()
        }));
        assert_eq!(Codec::of::<A>().config().level, 7);
        assert_eq!(Codec::of::<B>().config().level, 3);
        assert!(Arc::ptr_eq(&Codec::of::<A>(), &Codec::of::<A>()));
    }
}
