//! What one held object costs in memory, measured on the soak's own pods, so that the memory
//! bound follows the objects the server really sends rather than a guess.
//!
//! Pods as a real API server writes them carry `managedFields`; decoded into k8s-openapi's
//! `Pod` they take 33-76 KB each, where a sparse pod took a few. A fixed share per object was
//! either too tight for those or too loose for small ones: the soak weighs each form once, on
//! the pods the server holds when the informers start.

use k8s_openapi::api::core::v1::Pod;
use kinformer::core::{Object, ObjectList, PartialObjectMetadata};
use kinformer_compact::Compact;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The process's live heap, in bytes, read from a counting allocator (the `chaos` binary
/// installs one). Without it the soak falls back to a fixed share per object.
#[derive(Debug, Clone, Copy)]
pub struct HeapMeter {
    /// Bytes allocated and not yet freed, now.
    pub current: fn() -> usize,
    /// The most bytes ever live at once.
    pub peak: fn() -> usize,
}

/// Heap bytes per object of each cached form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Weights {
    /// A typed `Pod`.
    pub(crate) typed: u64,
    /// `Compact<Pod>`.
    pub(crate) compact: u64,
    /// `PartialObjectMetadata`, decoded from what a metadata-only list sends (all of
    /// `metadata`, `managedFields` included).
    pub(crate) metadata: u64,
    /// Whether the figures were measured (or are the fixed fallback).
    pub(crate) measured: bool,
}

impl Weights {
    /// The fallback: one share for every form.
    pub(crate) fn fixed(per_object: u64) -> Self {
        Self {
            typed: per_object,
            compact: per_object,
            metadata: per_object,
            measured: false,
        }
    }

    /// Decodes the pods, as one list, into each form (as the informers decode them: shared
    /// `Arc`s, each form's own JSON decoder) and divides the heap they took by their number.
    /// Other tasks may allocate meanwhile (the server is idle but for its timers): the figure
    /// is the smallest of three rounds.
    pub(crate) fn measure(meter: HeapMeter, pods: &[Value]) -> Option<Self> {
        if pods.is_empty() {
            return None;
        }
        let list = serde_json::to_vec(&serde_json::json!({
            "apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "1"}, "items": pods,
        }))
        .ok()?;
        Some(Self {
            typed: weigh::<Pod>(meter, &list)?,
            compact: weigh::<Compact<Pod>>(meter, &list)?,
            metadata: weigh::<PartialObjectMetadata>(meter, &list)?,
            measured: true,
        })
    }
}

/// Heap bytes per decoded `K` held in an `Arc`, the smallest of three rounds.
fn weigh<K: Object + DeserializeOwned>(meter: HeapMeter, list: &[u8]) -> Option<u64> {
    (0..3)
        .filter_map(|_| {
            let before = (meter.current)();
            let held = ObjectList::<K>::from_json(list).ok()?;
            let after = (meter.current)();
            // The list's own vector is not part of an object's cost.
            let buffer = held.items.capacity() * std::mem::size_of::<usize>();
            let n = held.items.len() as u64;
            drop(held);
            (n > 0).then(|| (after.saturating_sub(before).saturating_sub(buffer) as u64) / n)
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_counting_allocator_nothing_is_measured() {
        // The test binary counts nothing: every reading is 0, and so is every weight.
        let meter = HeapMeter {
            current: || 0,
            peak: || 0,
        };
        let pods = [serde_json::json!({"metadata": {"name": "a", "namespace": "n"}})];
        let w = Weights::measure(meter, &pods).unwrap();
        assert_eq!((w.typed, w.compact, w.metadata), (0, 0, 0));
        assert!(Weights::measure(meter, &[]).is_none());
        assert!(!Weights::fixed(7).measured);
    }
}
