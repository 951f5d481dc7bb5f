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

impl JsonDecoder {
    /// Decodes `bytes` into `T` with this parser. [`Tape`](JsonDecoder::Tape) falls back to
    /// `serde_json` for whatever it refuses, so an error is always `serde_json`'s; JSON nested
    /// more than 127 arrays or objects deep is refused by both (the tape parser builds values
    /// recursively, so it is never handed such a document), never a stack overflow.
    ///
    /// ```
    /// use kinformer_core::JsonDecoder;
    ///
    /// let value: serde_json::Value = JsonDecoder::Tape.decode(br#"{"f:spec":{"f:replicas":{}}}"#)?;
    /// assert_eq!(value["f:spec"]["f:replicas"], serde_json::json!({}));
    /// let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    /// assert!(JsonDecoder::Tape.decode::<serde_json::Value>(deep.as_bytes()).is_err());
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn decode<T: DeserializeOwned>(self, bytes: &[u8]) -> Result<T, serde_json::Error> {
        if self == JsonDecoder::Tape
            && let Some(value) = tape(bytes)
        {
            return Ok(value);
        }
        text_first(bytes)
    }
}

/// How deep arrays and objects may nest for the tape parser: `serde_json`'s own limit. Its
/// recursion budget is 128, spent on entering each array or object and refused when it reaches
/// zero, so it takes 127 open at once and refuses the 128th.
const MAX_DEPTH: usize = 127;

/// Whether arrays and objects on a tape nest deeper than [`MAX_DEPTH`]. A container's node
/// counts the nodes inside it, so the containers open at a node are those whose range covers it.
fn too_deep(tape: &[simd_json::Node<'_>]) -> bool {
    let mut ends = [0usize; MAX_DEPTH + 1];
    let mut open = 0;
    for (i, node) in tape.iter().enumerate() {
        while open > 0 && ends[open - 1] < i {
            open -= 1;
        }
        if let simd_json::Node::Object { count, .. } | simd_json::Node::Array { count, .. } = node {
            if open == MAX_DEPTH {
                return true;
            }
            ends[open] = i + count;
            open += 1;
        }
    }
    false
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
        // The tape first, then the value: a value is built recursively, so a document nested
        // too deep goes to serde_json, which refuses it, instead of overflowing the stack.
        let decoded = simd_json::to_tape_with_buffers(copy, buffers)
            .ok()
            .filter(|tape| !too_deep(&tape.0))
            .and_then(|tape| tape.deserialize().ok());
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
    K::JSON_DECODER.decode(bytes)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    /// A pod whose managed fields nest `depth` arrays deep.
    fn nested_pod(depth: usize) -> String {
        format!(
            r#"{{"metadata":{{"name":"a","managedFields":[{{"fieldsV1":{}{}}}]}}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        )
    }

    #[test]
    fn nesting_past_the_limit_is_an_error_not_a_stack_overflow() {
        // Each level of the tape parser's recursion takes more stack than serde_json's: a
        // document this deep overflowed a test thread's stack before the depth was checked.
        let e = object::<Pod>(nested_pod(200_000).as_bytes()).unwrap_err();
        assert!(e.to_string().contains("recursion limit"), "{e}");
        // Within the limit (the pod, its metadata, the list, the entry and 120 arrays), both
        // parsers decode it, to the same.
        let fine = nested_pod(120);
        let by_tape = tape::<Pod>(fine.as_bytes()).expect("the tape parser takes it");
        assert_eq!(by_tape, text_first::<Pod>(fine.as_bytes()).unwrap());
    }

    #[test]
    fn the_tape_parser_takes_exactly_the_depths_serde_json_takes() {
        // Around the limit, arrays alone and arrays in objects: what one parser accepts the
        // other accepts, to the same value, so no document decodes only because of the parser
        // its type asked for.
        for depth in 124..=132 {
            for doc in [
                format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
                format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth)),
            ] {
                let by_tape = tape::<serde_json::Value>(doc.as_bytes());
                let by_serde = text_first::<serde_json::Value>(doc.as_bytes()).ok();
                assert_eq!(by_tape, by_serde, "depth {depth}: {doc}");
            }
        }
    }

    #[test]
    fn depth_counts_open_containers_only() {
        let mut copy = br#"[[1],[2],{"a":[3]},[[[4]]]]"#.to_vec();
        let tape = simd_json::to_tape(&mut copy).unwrap();
        assert!(!too_deep(&tape.0));
        // Siblings do not add up: 200 arrays side by side are one level.
        let mut wide = format!("[{}[]]", "[],".repeat(199)).into_bytes();
        assert!(!too_deep(&simd_json::to_tape(&mut wide).unwrap().0));
        let mut deep = format!("{}{}", "[".repeat(128), "]".repeat(128)).into_bytes();
        assert!(too_deep(&simd_json::to_tape(&mut deep).unwrap().0));
        let mut limit = format!("{}{}", "[".repeat(127), "]".repeat(127)).into_bytes();
        assert!(!too_deep(&simd_json::to_tape(&mut limit).unwrap().0));
    }
}
