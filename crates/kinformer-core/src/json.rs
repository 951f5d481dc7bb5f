//! The JSON parsers behind kinformer's decoders, and which one a type gets
//! ([`Object::JSON_DECODER`]).

use std::cell::RefCell;

use serde::de::DeserializeOwned;

use crate::Object;

/// Which parser kinformer's decoders use for a type's JSON: [`Object::JSON_DECODER`].
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_core::{DynamicObject, JsonDecoder, Object};
///
/// assert_eq!(Pod::JSON_DECODER, JsonDecoder::Tape);
/// assert_eq!(DynamicObject::JSON_DECODER, JsonDecoder::SerdeJson);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum JsonDecoder {
    /// `serde_json`, for any `Deserialize` type, those that keep a `serde_json::value::RawValue`
    /// among them. The default.
    SerdeJson,
    /// `simd-json`, which parses the whole document into a tape before any value is built, so
    /// that every array's length is known before its `Vec` is: each `Vec` gets exactly its
    /// length as capacity, where `serde_json` grows it by doubling. A k8s-openapi pod decoded
    /// this way holds about a seventh less heap (as little as a clone), and decodes no slower.
    /// A type that keeps a `RawValue` cannot use it; whatever it refuses is decoded again with
    /// `serde_json`, so the error, or the value, is `serde_json`'s.
    Tape,
}

/// The scratch space of the tape parser, per thread: it parses in place, so it needs a copy of
/// the bytes, and it keeps its tape and string buffers between documents.
struct Scratch {
    copy: Vec<u8>,
    buffers: simd_json::Buffers,
}

/// Scratch larger than this is given back after use, so that one large object does not keep a
/// thread's memory.
const KEEP_SCRATCH: usize = 1 << 20;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch {
        copy: Vec::new(),
        buffers: simd_json::Buffers::new(0),
    });
}

/// Decodes `bytes` with the tape parser; `None` if it refuses them.
pub(crate) fn tape<T: DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    SCRATCH.with(|cell| {
        let Ok(mut scratch) = cell.try_borrow_mut() else {
            // Reentered from inside a decode: no scratch to lend.
            return None;
        };
        let Scratch { copy, buffers } = &mut *scratch;
        copy.clear();
        copy.extend_from_slice(bytes);
        let decoded = simd_json::serde::from_slice_with_buffers(copy, buffers).ok();
        if copy.capacity() > KEEP_SCRATCH {
            *scratch = Scratch {
                copy: Vec::new(),
                buffers: simd_json::Buffers::new(0),
            };
        }
        decoded
    })
}

/// Decodes `bytes` as text when they are UTF-8 (checked once, as a whole, rather than string by
/// string as a parse of bytes does) and as bytes otherwise, so that the error names the place.
pub(crate) fn text_first<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, serde_json::Error> {
    match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(bytes),
    }
}

/// Decodes one object with the parser its type asks for.
pub(crate) fn object<K: Object + DeserializeOwned>(bytes: &[u8]) -> Result<K, serde_json::Error> {
    if K::JSON_DECODER == JsonDecoder::Tape
        && let Some(object) = tape(bytes)
    {
        return Ok(object);
    }
    text_first(bytes)
}
