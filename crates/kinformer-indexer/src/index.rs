//! Built-in index functions: namespace, a label's value, owner UIDs, and a pod's node.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kinformer_core::Object;

use crate::IndexFunc;

/// The conventional name of the namespace index (client-go's `cache.NamespaceIndex`), the same as
/// [`kinformer_core::NAMESPACE_INDEX`]: [`IndexRead::namespace_index`](kinformer_core::IndexRead::namespace_index)
/// finds an index of this name, and the lister uses it when there is one.
pub const NAMESPACE: &str = kinformer_core::NAMESPACE_INDEX;

/// The conventional name of the owner-UID index.
pub const OWNER_UID: &str = "ownerReferences.uid";

/// The conventional name of the pod node index.
pub const POD_NODE_NAME: &str = "spec.nodeName";

/// Wraps a closure as an [`IndexFunc`].
///
/// ```
/// use kinformer_core::{DynamicObject, Object};
/// use kinformer_indexer::index;
///
/// let by_first_letter = index::func(|o: &DynamicObject| {
///     o.name().chars().next().map(|c| vec![c.to_string()]).ok_or_else(|| "no name".to_string())
/// });
/// assert!(by_first_letter(&DynamicObject::default()).is_err());
/// ```
pub fn func<K, F>(f: F) -> IndexFunc<K>
where
    F: Fn(&K) -> Result<Vec<String>, String> + Send + Sync + 'static,
{
    Arc::new(f)
}

/// The object's namespace (client-go's `MetaNamespaceIndexFunc`). Cluster-scoped objects produce
/// no value, so they are not in the index (client-go files them under `""`).
pub fn namespace<K: Object>() -> IndexFunc<K> {
    func(|o: &K| {
        Ok(o.namespace()
            .filter(|ns| !ns.is_empty())
            .map(str::to_owned)
            .into_iter()
            .collect())
    })
}

/// The value of label `key`, if the object has it.
pub fn label<K: Object>(key: &str) -> IndexFunc<K> {
    let key = key.to_owned();
    func(move |o: &K| Ok(o.labels().get(&key).cloned().into_iter().collect()))
}

/// The UID of every owner reference (several values when there are several owners).
pub fn owner_uid<K: Object>() -> IndexFunc<K> {
    func(|o: &K| {
        Ok(o.owner_references()
            .iter()
            .map(|r| r.uid.to_owned())
            .collect())
    })
}

/// A pod's `spec.nodeName`, if it is scheduled.
pub fn pod_node_name() -> IndexFunc<Pod> {
    func(|p: &Pod| {
        Ok(p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .into_iter()
            .collect())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    use std::collections::BTreeMap;

    fn pod(ns: Option<&str>, node: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: ns.map(Into::into),
                labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                owner_references: Some(vec![
                    OwnerReference {
                        uid: "u1".into(),
                        ..OwnerReference::default()
                    },
                    OwnerReference {
                        uid: "u2".into(),
                        ..OwnerReference::default()
                    },
                ]),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: node.map(Into::into),
                ..PodSpec::default()
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn built_in_functions_read_the_right_fields() {
        let p = pod(Some("shop"), Some("node-1"));
        assert_eq!(namespace::<Pod>()(&p).unwrap(), ["shop"]);
        assert_eq!(
            namespace::<Pod>()(&pod(None, None)).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(label::<Pod>("app")(&p).unwrap(), ["web"]);
        assert_eq!(label::<Pod>("tier")(&p).unwrap(), Vec::<String>::new());
        assert_eq!(owner_uid::<Pod>()(&p).unwrap(), ["u1", "u2"]);
        assert_eq!(pod_node_name()(&p).unwrap(), ["node-1"]);
        assert_eq!(
            pod_node_name()(&pod(Some("shop"), None)).unwrap(),
            Vec::<String>::new()
        );
    }
}
