//! Helpers shared by the indexer's integration tests.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::Arc;

use kinformer_core::DynamicObject;
use kinformer_indexer::{IndexFunc, IndexerReader, index};

/// An object in namespace `ns` (none if empty) with a comma-separated `tags` label.
pub fn obj(ns: &str, name: &str, tags: &str) -> Arc<DynamicObject> {
    let mut o = DynamicObject::default();
    o.metadata.namespace = (!ns.is_empty()).then(|| ns.to_string());
    o.metadata.name = Some(name.into());
    o.metadata.labels = Some(BTreeMap::from([("tags".to_string(), tags.to_string())]));
    Arc::new(o)
}

/// A multi-value index: one value per tag; the tag `bad` makes it fail.
pub fn tags() -> IndexFunc<DynamicObject> {
    index::func(|o: &DynamicObject| {
        let tags = o
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("tags"))
            .cloned()
            .unwrap_or_default();
        let tags: Vec<String> = tags
            .split(',')
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect();
        if tags.iter().any(|t| t == "bad") {
            Err("the tag `bad` cannot be indexed".to_string())
        } else {
            Ok(tags)
        }
    })
}

/// Index `name` as `value -> sorted keys`, read through the public API only.
pub fn dump(reader: &IndexerReader<DynamicObject>, name: &str) -> BTreeMap<String, Vec<String>> {
    reader
        .list_index_func_values(name)
        .unwrap()
        .into_iter()
        .map(|v| {
            let keys = reader
                .index_keys(name, &v)
                .unwrap()
                .iter()
                .map(|k| k.to_string())
                .collect();
            (v, keys)
        })
        .collect()
}
