//! The built-in kinds' schemas, as the API server's decoder applies them to a write's body: a
//! value of the wrong type is a 400, and a field the kind does not have is an unknown field,
//! reported under `fieldValidation` and never stored (`endpoints/handlers/create.go`,
//! `update.go` and `patch.go`, the strict decoding error).
//!
//! The schemas are the Kubernetes types of `k8s-openapi`: a body is decoded into its kind's
//! type and encoded back, and every field of the body the type did not keep is unknown. Custom
//! resources have no schema here and keep every field, as a definition with
//! `x-kubernetes-preserve-unknown-fields` would.

use k8s_openapi::api::{apps, coordination, core, discovery};
use kinformer_core::{ApiResource, Status};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::store::status;
use crate::validation::group_version;

/// Removes the fields of `object` that its kind does not have and returns their paths (as the
/// decoder names them: `spec.containers[0].x`). 400 when a field has a value of the wrong type.
/// Kinds without a schema here keep everything.
pub(crate) fn prune_unknown(api: &ApiResource, object: &mut Value) -> Result<Vec<String>, Status> {
    let known = match (api.group.as_str(), api.plural.as_str()) {
        ("", "pods") => round_trip::<core::v1::Pod>(api, object)?,
        ("", "services") => round_trip::<core::v1::Service>(api, object)?,
        ("", "configmaps") => round_trip::<core::v1::ConfigMap>(api, object)?,
        ("", "secrets") => round_trip::<core::v1::Secret>(api, object)?,
        ("", "serviceaccounts") => round_trip::<core::v1::ServiceAccount>(api, object)?,
        ("", "endpoints") => round_trip::<core::v1::Endpoints>(api, object)?,
        ("", "events") => round_trip::<core::v1::Event>(api, object)?,
        ("", "namespaces") => round_trip::<core::v1::Namespace>(api, object)?,
        ("", "nodes") => round_trip::<core::v1::Node>(api, object)?,
        ("apps", "deployments") => round_trip::<apps::v1::Deployment>(api, object)?,
        ("apps", "replicasets") => round_trip::<apps::v1::ReplicaSet>(api, object)?,
        ("apps", "statefulsets") => round_trip::<apps::v1::StatefulSet>(api, object)?,
        ("apps", "daemonsets") => round_trip::<apps::v1::DaemonSet>(api, object)?,
        ("discovery.k8s.io", "endpointslices") => {
            round_trip::<discovery::v1::EndpointSlice>(api, object)?
        }
        ("coordination.k8s.io", "leases") => round_trip::<coordination::v1::Lease>(api, object)?,
        _ => return Ok(Vec::new()),
    };
    let mut unknown = Vec::new();
    prune(object, &known, &mut String::new(), &mut unknown);
    Ok(unknown)
}

/// The body as its kind's type keeps it.
fn round_trip<T: DeserializeOwned + Serialize>(
    api: &ApiResource,
    object: &Value,
) -> Result<Value, Status> {
    let mut typed = object.clone();
    if let Some(map) = typed.as_object_mut() {
        // The type checks these; the handler checked them against the path already.
        map.insert("apiVersion".into(), Value::String(group_version(api)));
        map.insert("kind".into(), Value::String(api.kind.clone()));
    }
    let decoded: T = serde_json::from_value(typed).map_err(|e| {
        status(
            400,
            "BadRequest",
            format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: {e}",
                kind = api.kind,
                version = api.version
            ),
        )
    })?;
    serde_json::to_value(decoded).map_err(|e| {
        status(
            500,
            "InternalError",
            format!("Internal error occurred: {e}"),
        )
    })
}

/// Removes what `known` lacks from `body`, noting each path. A `null` is kept wherever its key
/// is, as the decoder reads it as "unset" for any field.
fn prune(body: &mut Value, known: &Value, path: &mut String, unknown: &mut Vec<String>) {
    match (body, known) {
        (Value::Object(b), Value::Object(k)) => {
            b.retain(|key, value| {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                let keep = match k.get(key) {
                    Some(kv) => {
                        prune(value, kv, path, unknown);
                        true
                    }
                    None if value.is_null() => true,
                    None => {
                        unknown.push(path.clone());
                        false
                    }
                };
                path.truncate(len);
                keep
            });
        }
        (Value::Array(b), Value::Array(k)) if b.len() == k.len() => {
            for (i, (bv, kv)) in b.iter_mut().zip(k).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                prune(bv, kv, path, unknown);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinformer_core::Scope;
    use serde_json::json;

    fn pods() -> ApiResource {
        ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced)
    }

    #[test]
    fn unknown_fields_are_named_by_path_and_removed() {
        let mut pod = json!({
            "metadata": {"name": "p", "labels": {"any": "x"}, "bogus": 1},
            "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicyy": "Always"}], "nodeName": null},
            "extra": {"a": 1}
        });
        let unknown = prune_unknown(&pods(), &mut pod).unwrap();
        assert_eq!(
            unknown,
            [
                "extra",
                "metadata.bogus",
                "spec.containers[0].imagePullPolicyy"
            ]
        );
        assert_eq!(
            pod,
            json!({
                "metadata": {"name": "p", "labels": {"any": "x"}},
                "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": null}
            })
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_is_a_bad_request_and_custom_kinds_keep_everything() {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": "no"}});
        let err = prune_unknown(&pods(), &mut pod).unwrap_err();
        assert_eq!(err.code, 400);
        assert!(
            err.message
                .starts_with("Pod in version \"v1\" cannot be handled as a Pod: "),
            "{}",
            err.message
        );
        let crd = ApiResource::new("example.com", "v1", "Widget", "widgets", Scope::Namespaced);
        let mut w = json!({"metadata": {"name": "w"}, "anything": 1});
        assert!(prune_unknown(&crd, &mut w).unwrap().is_empty());
        assert_eq!(w["anything"], 1);
    }
}
