//! Strategic merge patch for the built-in kinds the sim serves: maps merge as in a JSON merge
//! patch, lists with a merge key (`containers` by `name`, `ports` by `containerPort`, ...) merge
//! item by item, primitive lists with the merge strategy (`metadata.finalizers`) take the union,
//! and the `$patch`, `$retainKeys`, `$setElementOrder/` and `$deleteFromPrimitiveList/`
//! directives apply. Directives are never stored.

use serde_json::{Map, Value};

/// How a list field merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListMerge {
    /// Items are objects merged by this key.
    ByKey(&'static str),
    /// A list of scalars whose patch values are added to the original's.
    Union,
    /// The patch's list replaces the original.
    Replace,
}

/// The merge strategy of `field` (inside `parent`, the field holding the map that holds it), as
/// the built-in types' `patchStrategy`/`patchMergeKey` tags declare it.
fn list_merge(parent: &str, field: &str, items: &[Value]) -> ListMerge {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "imagePullSecrets"
        | "env"
        | "schedulingGates"
        | "resourceClaims" => ListMerge::ByKey("name"),
        "ports" => {
            // Container ports merge by containerPort, a service's by port.
            if parent == "spec" && !items.iter().any(|i| i.get("containerPort").is_some()) {
                ListMerge::ByKey("port")
            } else {
                ListMerge::ByKey("containerPort")
            }
        }
        "volumeMounts" => ListMerge::ByKey("mountPath"),
        "volumeDevices" => ListMerge::ByKey("devicePath"),
        "ownerReferences" => ListMerge::ByKey("uid"),
        "conditions" | "addresses" => ListMerge::ByKey("type"),
        "podIPs" | "hostIPs" | "hostAliases" => ListMerge::ByKey("ip"),
        "topologySpreadConstraints" => ListMerge::ByKey("topologyKey"),
        "finalizers" if parent == "metadata" => ListMerge::Union,
        "podCIDRs" => ListMerge::Union,
        _ => ListMerge::Replace,
    }
}

/// A patch value without its directives, for storing where there is nothing to merge into.
fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .map(strip)
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Applies a strategic merge patch to an object.
pub(crate) fn apply(target: &mut Value, patch: &Value) {
    merge_map(target, patch, "");
}

fn merge_map(target: &mut Value, patch: &Value, parent: &str) {
    let Value::Object(p) = patch else {
        *target = strip(patch);
        return;
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *target = strip(patch);
            return;
        }
        Some("delete") => {
            *target = Value::Null;
            return;
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else {
        return;
    };
    if let Some(keep) = p.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        t.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in p {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(gone)) = (t.get_mut(field), v) {
                list.retain(|x| !gone.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        match v {
            Value::Object(_) => {
                let slot = t.entry(k.clone()).or_insert(Value::Null);
                merge_map(slot, v, k);
                if slot.is_null() {
                    t.remove(k);
                }
            }
            Value::Array(items) => {
                let merged = merge_list(t.get(k), items, parent, k);
                t.insert(k.clone(), merged);
            }
            scalar => {
                t.insert(k.clone(), scalar.clone());
            }
        }
    }
    for (k, order) in p {
        if let Some(field) = k.strip_prefix("$setElementOrder/")
            && let (Some(Value::Array(list)), Value::Array(order)) = (t.get_mut(field), order)
        {
            reorder(list, order, list_merge(parent, field, order));
        }
    }
}

fn merge_list(original: Option<&Value>, items: &[Value], parent: &str, field: &str) -> Value {
    // `{"$patch": "replace"}` among the items replaces the whole list with the others.
    if items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return strip(&Value::Array(items.to_vec()));
    }
    let mut list: Vec<Value> = original
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    match list_merge(parent, field, items) {
        ListMerge::Replace => return strip(&Value::Array(items.to_vec())),
        ListMerge::Union => {
            for i in items {
                if !list.contains(i) {
                    list.push(i.clone());
                }
            }
        }
        ListMerge::ByKey(key) => {
            for item in items {
                let Some(id) = item.get(key) else {
                    list.push(strip(item));
                    continue;
                };
                let at = list.iter().position(|o| o.get(key) == Some(id));
                let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                match (at, delete) {
                    (Some(i), true) => {
                        list.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => merge_map(&mut list[i], item, field),
                    (None, false) => list.push(strip(item)),
                }
            }
        }
    }
    Value::Array(list)
}

/// Orders `list` as `order` lists its items; items `order` does not name keep their relative
/// order after them.
fn reorder(list: &mut Vec<Value>, order: &[Value], merge: ListMerge) {
    let same = |a: &Value, b: &Value| match merge {
        ListMerge::ByKey(key) => a.get(key).is_some() && a.get(key) == b.get(key),
        _ => a == b,
    };
    let mut ordered = Vec::with_capacity(list.len());
    for o in order {
        if let Some(i) = list.iter().position(|x| same(x, o)) {
            ordered.push(list.remove(i));
        }
    }
    ordered.append(list);
    *list = ordered;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({
            "metadata": {"name": "p", "finalizers": ["a"], "labels": {"x": "1", "y": "2"}},
            "spec": {
                "containers": [
                    {"name": "app", "image": "app:1", "ports": [{"containerPort": 80}, {"containerPort": 81}], "env": [{"name": "A", "value": "1"}]},
                    {"name": "side", "image": "side:1"},
                ],
                "tolerations": [{"key": "t1"}],
            },
        })
    }

    /// A check of a patched object.
    type Check = Box<dyn Fn(&Value)>;

    /// Each case: a patch, and what it must change.
    #[test]
    fn strategic_merge_patch_cases() {
        let cases: Vec<(Value, Check)> = vec![
            (
                // kubectl apply changing one image: the other container and the ports stay.
                json!({"spec": {"$setElementOrder/containers": [{"name": "app"}, {"name": "side"}], "containers": [{"name": "app", "image": "app:2"}]}}),
                Box::new(|v| {
                    assert_eq!(v["spec"]["containers"][0]["image"], "app:2");
                    assert_eq!(v["spec"]["containers"][0]["ports"][1]["containerPort"], 81);
                    assert_eq!(v["spec"]["containers"][1]["name"], "side");
                    assert!(!v.to_string().contains('$'));
                }),
            ),
            (
                json!({"spec": {"containers": [{"name": "side", "$patch": "delete"}, {"name": "new", "image": "n:1"}]}}),
                Box::new(|v| {
                    let names: Vec<&str> = v["spec"]["containers"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|c| c["name"].as_str().unwrap())
                        .collect();
                    assert_eq!(names, ["app", "new"]);
                }),
            ),
            (
                json!({"spec": {"containers": [{"name": "app", "env": [{"name": "B", "value": "2"}], "ports": [{"containerPort": 80, "$patch": "delete"}]}]}}),
                Box::new(|v| {
                    let c = &v["spec"]["containers"][0];
                    assert_eq!(c["env"].as_array().unwrap().len(), 2);
                    assert_eq!(c["ports"], json!([{"containerPort": 81}]));
                }),
            ),
            (
                // Lists without a merge key are replaced; finalizers are a union.
                json!({"metadata": {"finalizers": ["b"]}, "spec": {"tolerations": [{"key": "t2"}]}}),
                Box::new(|v| {
                    assert_eq!(v["metadata"]["finalizers"], json!(["a", "b"]));
                    assert_eq!(v["spec"]["tolerations"], json!([{"key": "t2"}]));
                }),
            ),
            (
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "labels": {"$patch": "replace", "z": "3"}}}),
                Box::new(|v| {
                    assert_eq!(v["metadata"]["finalizers"], json!([]));
                    assert_eq!(v["metadata"]["labels"], json!({"z": "3"}));
                }),
            ),
            (
                json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "o:1"}]}}),
                Box::new(|v| {
                    assert_eq!(
                        v["spec"]["containers"],
                        json!([{"name": "only", "image": "o:1"}])
                    )
                }),
            ),
            (
                json!({"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "app"}]}, "metadata": {"labels": {"x": null}}}),
                Box::new(|v| {
                    assert_eq!(v["spec"]["containers"][0]["name"], "side");
                    assert_eq!(v["metadata"]["labels"], json!({"y": "2"}));
                }),
            ),
            (
                json!({"spec": {"$retainKeys": ["containers"], "containers": [{"name": "app", "image": "app:3"}]}}),
                Box::new(|v| {
                    assert!(v["spec"].get("tolerations").is_none());
                    assert_eq!(v["spec"]["containers"][1]["name"], "side");
                }),
            ),
        ];
        for (patch, check) in cases {
            let mut v = pod();
            apply(&mut v, &patch);
            check(&v);
        }
    }
}
