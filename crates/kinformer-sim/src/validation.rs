//! The validation a real API server does on writes over HTTP, for the rules an informer's or a
//! controller's tests can meet: the body's kind and version against the path, a
//! `resourceVersion` on a create, object names, a pod's containers, the fields of a pod's spec
//! an update may change, and finalizers added to an object being deleted. Each rule names the
//! apiserver or Kubernetes file it follows. `fieldValidation` covers duplicate fields; unknown
//! fields need schemas, which the sim does not have.

use kinformer_core::{ApiResource, Status, StatusCause, StatusDetails};
use serde_json::Value;

use crate::store::{ResourceInfo, object_status, status};

/// One field error, as `field.Error` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    field: String,
    kind: ErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ErrorKind {
    Invalid { value: String, detail: String },
    Required,
    Forbidden(String),
}

impl FieldError {
    /// `<field>: Invalid value: "<value>": <detail>`.
    pub(crate) fn invalid(field: &str, value: &str, detail: &str) -> Self {
        Self {
            field: field.to_owned(),
            kind: ErrorKind::Invalid {
                value: value.to_owned(),
                detail: detail.to_owned(),
            },
        }
    }

    /// `<field>: Forbidden: <detail>`.
    pub(crate) fn forbidden(field: &str, detail: &str) -> Self {
        Self {
            field: field.to_owned(),
            kind: ErrorKind::Forbidden(detail.to_owned()),
        }
    }

    /// The text after the field path: `Invalid value: "x": detail`, `Required value`,
    /// `Forbidden: detail` (apimachinery's `field.Error.ErrorBody`).
    fn body(&self) -> String {
        match &self.kind {
            ErrorKind::Invalid { value, detail } => format!("Invalid value: {value:?}: {detail}"),
            ErrorKind::Required => "Required value".to_owned(),
            ErrorKind::Forbidden(detail) => format!("Forbidden: {detail}"),
        }
    }

    fn reason(&self) -> &'static str {
        match self.kind {
            ErrorKind::Invalid { .. } => "FieldValueInvalid",
            ErrorKind::Required => "FieldValueRequired",
            ErrorKind::Forbidden(_) => "FieldValueForbidden",
        }
    }
}

/// A 422 `Invalid` naming every error, as `errors.NewInvalid` builds it: one error reads
/// `Pod "x" is invalid: spec.containers: Required value`, several are listed in brackets.
pub(crate) fn invalid_object(api: &ApiResource, name: &str, errors: &[FieldError]) -> Status {
    let mut s = object_status(422, "Invalid", String::new(), api, name);
    if let Some(d) = s.details.as_mut() {
        d.kind = api.kind.clone();
    }
    with_errors(s, &api.kind, name, errors)
}

/// The 422 `Invalid` of a list's or watch's options, as the handlers build it from
/// `ValidateListOptions`' errors: `errors.NewInvalid` of the kind `ListOptions` in `meta.k8s.io`,
/// unnamed (`endpoints/handlers/get.go`), so it reads
/// `ListOptions.meta.k8s.io "" is invalid: <field>: <error>`.
pub(crate) fn invalid_list_options(errors: &[FieldError]) -> Status {
    let mut s = status(422, "Invalid", String::new());
    s.details = Some(StatusDetails {
        group: "meta.k8s.io".to_owned(),
        kind: "ListOptions".to_owned(),
        ..StatusDetails::default()
    });
    with_errors(s, "ListOptions.meta.k8s.io", "", errors)
}

/// Fills in a 422's message and causes: `<kind> "<name>" is invalid: <errors>`.
fn with_errors(mut s: Status, kind: &str, name: &str, errors: &[FieldError]) -> Status {
    let listed: Vec<String> = errors
        .iter()
        .map(|e| format!("{}: {}", e.field, e.body()))
        .collect();
    let all = match listed.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    s.message = format!("{kind} \"{name}\" is invalid: {all}");
    if let Some(d) = s.details.as_mut() {
        d.causes = errors
            .iter()
            .map(|e| StatusCause {
                reason: e.reason().to_owned(),
                message: e.body(),
                field: e.field.clone(),
            })
            .collect();
    }
    s
}

/// The group/version a resource's objects carry in `apiVersion`.
pub(crate) fn group_version(api: &ApiResource) -> String {
    if api.group.is_empty() {
        api.version.clone()
    } else {
        format!("{}/{}", api.group, api.version)
    }
}

/// A body's `apiVersion` and `kind`, where given, must be the path's
/// (`endpoints/handlers/create.go` and `update.go`): 400 otherwise.
pub(crate) fn check_kind_and_version(api: &ApiResource, object: &Value) -> Result<(), Status> {
    let expected = group_version(api);
    if let Some(v) = object["apiVersion"].as_str().filter(|v| !v.is_empty())
        && v != expected
    {
        return Err(status(
            400,
            "BadRequest",
            format!(
                "the API version in the data ({v}) does not match the expected API version ({expected})"
            ),
        ));
    }
    if let Some(k) = object["kind"].as_str().filter(|k| !k.is_empty())
        && k != api.kind
    {
        return Err(status(
            400,
            "BadRequest",
            format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                api.kind
            ),
        ));
    }
    Ok(())
}

/// How a write's body is checked for fields the decoder would drop: the `fieldValidation`
/// query parameter (`Strict`, `Warn`, the default, or `Ignore`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldValidation {
    Strict,
    Warn,
    Ignore,
}

impl FieldValidation {
    /// The directive of a query value; 400 for anything else, as the handlers answer
    /// (`endpoints/handlers/rest.go`, `fieldValidation`).
    pub(crate) fn parse(value: Option<&str>) -> Result<Self, Status> {
        match value {
            None | Some("" | "Warn") => Ok(Self::Warn),
            Some("Strict") => Ok(Self::Strict),
            Some("Ignore") => Ok(Self::Ignore),
            Some(other) => Err(status(
                400,
                "BadRequest",
                format!(
                    "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
                ),
            )),
        }
    }
}

/// Parses a write's body, finding every field given twice in one object (by its dotted path),
/// which Go's decoder would silently resolve to the last value.
pub(crate) fn parse_body(bytes: &[u8]) -> Result<(Value, Vec<String>), serde_json::Error> {
    use serde::de::DeserializeSeed as _;
    let mut duplicates = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Seed {
        path: String::new(),
        duplicates: &mut duplicates,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok((value, duplicates))
}

/// A JSON value at `path`, recording duplicate keys below it.
struct Seed<'a> {
    path: String,
    duplicates: &'a mut Vec<String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        serde::de::DeserializeSeed::deserialize(self, d)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let seed = Seed {
                path: format!("{}[{}]", self.path, items.len()),
                duplicates: &mut *self.duplicates,
            };
            match seq.next_element_seed(seed)? {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            let value = map.next_value_seed(Seed {
                path: path.clone(),
                duplicates: &mut *self.duplicates,
            })?;
            if out.insert(key, value).is_some() {
                self.duplicates.push(path);
            }
        }
        Ok(Value::Object(out))
    }
}

/// What `fieldValidation` makes of a body's duplicate and unknown fields: 400 under `Strict`,
/// one warning each under `Warn`, nothing under `Ignore`. Either way a duplicate keeps its last
/// value, as Go's decoder does, and an unknown field is dropped (`endpoints/handlers/create.go`,
/// `update.go` and `patch.go`, the strict decoding error).
pub(crate) fn field_errors(
    directive: FieldValidation,
    duplicates: &[String],
    unknown: &[String],
) -> Result<Vec<String>, Status> {
    if directive == FieldValidation::Ignore {
        return Ok(Vec::new());
    }
    let each: Vec<String> = unknown
        .iter()
        .map(|u| format!("unknown field {u:?}"))
        .chain(duplicates.iter().map(|d| format!("duplicate field {d:?}")))
        .collect();
    match directive {
        FieldValidation::Strict if !each.is_empty() => Err(status(
            400,
            "BadRequest",
            format!("strict decoding error: {}", each.join(", ")),
        )),
        _ => Ok(each),
    }
}

/// A create may not carry a `resourceVersion`: storage refuses it, and the error reaches the
/// client as an internal error (`storage/etcd3/store.go`, `ErrResourceVersionSetOnCreate`).
pub(crate) fn check_no_version_on_create(object: &Value) -> Result<(), Status> {
    match object["metadata"]["resourceVersion"].as_str() {
        Some(v) if !v.is_empty() => Err(status(
            500,
            "InternalError",
            "Internal error occurred: resourceVersion should not be set on objects to be created",
        )),
        _ => Ok(()),
    }
}

const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_LABEL: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

fn is_label(s: &str, max: usize, first_alpha: bool) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= max
        && b.iter().all(|c| alnum(c) || *c == b'-')
        && b.first().is_some_and(|c| {
            if first_alpha {
                c.is_ascii_lowercase()
            } else {
                alnum(c)
            }
        })
        && b.last().is_some_and(alnum)
}

fn is_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(|l| is_label(l, 63, false))
}

/// The rule a kind's names follow (each kind's `Validate...Name` in
/// `pkg/apis/core/validation/validation.go`): namespaces are DNS-1123 labels, services DNS-1035
/// labels, every other kind served here (and custom resources) DNS-1123 subdomains.
fn name_errors(info: &ResourceInfo, name: &str) -> Option<FieldError> {
    let builtin = matches!(info.api.group.as_str(), "" | "apps") && !info.custom;
    let (ok, detail, max) = match info.api.plural.as_str() {
        "namespaces" if builtin => (is_label(name, 63, false), DNS1123_LABEL, 63),
        "services" if builtin => (is_label(name, 63, true), DNS1035_LABEL, 63),
        _ => (is_subdomain(name), DNS1123_SUBDOMAIN, 253),
    };
    if ok {
        return None;
    }
    let detail = if name.len() > max {
        format!("must be no more than {max} characters")
    } else {
        detail.to_owned()
    };
    Some(FieldError {
        field: "metadata.name".to_owned(),
        kind: ErrorKind::Invalid {
            value: name.to_owned(),
            detail,
        },
    })
}

/// What a create's object must satisfy once defaulted: a valid name (when it has one; a
/// generated name is checked by the store), and for a pod at least one container
/// (`ValidatePodSpec`).
pub(crate) fn check_create(info: &ResourceInfo, object: &Value) -> Result<(), Status> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let mut errors = Vec::new();
    if !name.is_empty()
        && let Some(e) = name_errors(info, name)
    {
        errors.push(e);
    }
    if is_pod(info)
        && object["spec"]["containers"]
            .as_array()
            .is_none_or(Vec::is_empty)
    {
        errors.push(FieldError {
            field: "spec.containers".to_owned(),
            kind: ErrorKind::Required,
        });
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(invalid_object(&info.api, name, &errors))
    }
}

fn is_pod(info: &ResourceInfo) -> bool {
    !info.custom && info.api.group.is_empty() && info.api.plural == "pods"
}

/// The message of a pod update that changes its spec beyond what may change
/// (`ValidatePodUpdate`); the real message goes on with a diff of the two specs, left out here.
const POD_SPEC_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// `new`'s spec with what an update may change taken from `old`: container and init container
/// images (when the containers are the same in number), `activeDeadlineSeconds`, tolerations
/// that only add to the old ones, a negative `terminationGracePeriodSeconds` set to 1, and
/// scheduling gates that are only removed.
fn pod_spec_with_mutable_fields_of(new: &Value, old: &Value) -> Value {
    let mut spec = new.clone();
    let Some(s) = spec.as_object_mut() else {
        return spec;
    };
    for list in ["containers", "initContainers"] {
        if let (Some(n), Some(o)) = (
            s.get_mut(list).and_then(Value::as_array_mut),
            old[list].as_array(),
        ) && n.len() == o.len()
        {
            for (nc, oc) in n.iter_mut().zip(o) {
                if let Some(c) = nc.as_object_mut() {
                    match oc.get("image") {
                        Some(i) => c.insert("image".into(), i.clone()),
                        None => c.remove("image"),
                    };
                }
            }
        }
    }
    let restore = |s: &mut serde_json::Map<String, Value>, field: &str| {
        match old.get(field) {
            Some(v) => s.insert(field.into(), v.clone()),
            None => s.remove(field),
        };
    };
    restore(s, "activeDeadlineSeconds");
    let old_tolerations = old["tolerations"].as_array().cloned().unwrap_or_default();
    let adds_only = s
        .get("tolerations")
        .and_then(Value::as_array)
        .is_some_and(|n| old_tolerations.iter().all(|t| n.contains(t)));
    if adds_only {
        restore(s, "tolerations");
    }
    if old["terminationGracePeriodSeconds"]
        .as_i64()
        .is_some_and(|g| g < 0)
        && s.get("terminationGracePeriodSeconds") == Some(&Value::from(1))
    {
        restore(s, "terminationGracePeriodSeconds");
    }
    let old_gates = old["schedulingGates"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let removes_only = s
        .get("schedulingGates")
        .and_then(Value::as_array)
        .is_none_or(|n| n.iter().all(|g| old_gates.contains(g)));
    if removes_only {
        restore(s, "schedulingGates");
    }
    spec
}

/// What an update over HTTP must satisfy against the stored object: no finalizer added to an
/// object being deleted (`ValidateObjectMetaUpdate`), and a pod's spec changed only where it may
/// be (`ValidatePodUpdate`).
pub(crate) fn check_update(info: &ResourceInfo, old: &Value, new: &Value) -> Result<(), Status> {
    let name = old["metadata"]["name"].as_str().unwrap_or_default();
    let mut errors = Vec::new();
    if old["metadata"].get("deletionTimestamp").is_some() {
        let had = old["metadata"]["finalizers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let added: Vec<&str> = new["metadata"]["finalizers"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter(|f| !had.contains(f))
            .filter_map(Value::as_str)
            .collect();
        if !added.is_empty() {
            errors.push(FieldError {
                field: "metadata.finalizers".to_owned(),
                kind: ErrorKind::Forbidden(format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    added
                        .iter()
                        .map(|f| format!("{f:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            });
        }
    }
    if is_pod(info) && pod_spec_with_mutable_fields_of(&new["spec"], &old["spec"]) != old["spec"] {
        errors.push(FieldError {
            field: "spec".to_owned(),
            kind: ErrorKind::Forbidden(POD_SPEC_FORBIDDEN.to_owned()),
        });
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(invalid_object(&info.api, name, &errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinformer_core::Scope;
    use serde_json::json;

    fn info(plural: &str, kind: &str) -> ResourceInfo {
        ResourceInfo::new(ApiResource::new("", "v1", kind, plural, Scope::Namespaced))
    }

    #[test]
    fn duplicate_fields_are_found_by_path_and_the_last_value_kept() {
        let (v, dups) = parse_body(
            br#"{"metadata": {"name": "a", "labels": {"x": "1", "x": "2"}}, "spec": {"c": [{"n": 1, "n": 2}]}, "kind": "Pod", "kind": "Pod"}"#,
        )
        .unwrap();
        assert_eq!(dups, ["metadata.labels.x", "spec.c[0].n", "kind"]);
        assert_eq!(v["metadata"]["labels"]["x"], "2");
        assert_eq!(v["spec"]["c"][0]["n"], 2);
        assert!(parse_body(b"{} x").is_err());
        let strict = field_errors(FieldValidation::Strict, &dups, &[]).unwrap_err();
        assert_eq!(strict.code, 400);
        assert!(
            strict
                .message
                .starts_with("strict decoding error: duplicate field \"metadata.labels.x\""),
            "{}",
            strict.message
        );
        assert_eq!(
            field_errors(FieldValidation::Warn, &dups, &[])
                .unwrap()
                .len(),
            3
        );
        assert!(
            field_errors(FieldValidation::Ignore, &dups, &[])
                .unwrap()
                .is_empty()
        );
        assert_eq!(FieldValidation::parse(None).unwrap(), FieldValidation::Warn);
        assert_eq!(FieldValidation::parse(Some("nope")).unwrap_err().code, 400);
    }

    #[test]
    fn names_follow_their_kind_s_rule() {
        let pods = info("pods", "Pod");
        let ns = info("namespaces", "Namespace");
        let svc = info("services", "Service");
        assert_eq!(name_errors(&pods, "web-1.example"), None);
        assert!(name_errors(&pods, "Web").is_some());
        assert!(name_errors(&pods, "-web").is_some());
        assert!(name_errors(&pods, &"a".repeat(254)).is_some());
        assert_eq!(name_errors(&ns, "team-a"), None);
        assert!(name_errors(&ns, "team.a").is_some(), "a label has no dots");
        assert_eq!(name_errors(&svc, "web"), None);
        assert!(
            name_errors(&svc, "1web").is_some(),
            "DNS-1035 starts with a letter"
        );
        assert_eq!(name_errors(&pods, "1web"), None);
    }

    #[test]
    fn a_pod_update_may_change_images_deadlines_and_added_tolerations_only() {
        let pods = info("pods", "Pod");
        let old = json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "c", "image": "a:1", "env": [{"name": "X", "value": "1"}]}],
            "tolerations": [{"key": "k"}],
        }});
        let with = |f: &dyn Fn(&mut Value)| {
            let mut n = old.clone();
            f(&mut n);
            check_update(&pods, &old, &n)
        };
        assert!(with(&|n| n["spec"]["containers"][0]["image"] = json!("a:2")).is_ok());
        assert!(with(&|n| n["spec"]["activeDeadlineSeconds"] = json!(30)).is_ok());
        assert!(with(&|n| n["spec"]["tolerations"] = json!([{"key": "k"}, {"key": "j"}])).is_ok());
        assert!(with(&|n| n["metadata"]["labels"] = json!({"a": "b"})).is_ok());
        let env =
            with(&|n| n["spec"]["containers"][0]["env"][0]["value"] = json!("2")).unwrap_err();
        assert_eq!(env.code, 422);
        assert!(env.message.starts_with("Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields other than"), "{}", env.message);
        assert_eq!(env.details.unwrap().causes[0].reason, "FieldValueForbidden");
        assert!(
            with(&|n| n["spec"]["tolerations"] = json!([])).is_err(),
            "removing a toleration"
        );
        assert!(with(&|n| n["spec"]["containers"][0]["name"] = json!("d")).is_err());
    }

    #[test]
    fn no_new_finalizers_on_an_object_being_deleted_and_several_errors_are_listed() {
        let pods = info("pods", "Pod");
        let old = json!({"metadata": {"name": "p", "deletionTimestamp": "t", "finalizers": ["a"]},
            "spec": {"containers": [{"name": "c"}]}});
        let mut new = old.clone();
        new["metadata"]["finalizers"] = json!(["a", "b"]);
        let s = check_update(&pods, &old, &new).unwrap_err();
        assert!(s.message.contains("metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"b\"}"), "{}", s.message);
        new["spec"]["nodeName"] = json!("n");
        let s = check_update(&pods, &old, &new).unwrap_err();
        assert!(
            s.message
                .starts_with("Pod \"p\" is invalid: [metadata.finalizers: "),
            "{}",
            s.message
        );
        assert_eq!(s.details.unwrap().causes.len(), 2);
        new["metadata"]["finalizers"] = json!([]);
        new["spec"]["nodeName"] = Value::Null;
        new["spec"].as_object_mut().unwrap().remove("nodeName");
        assert!(
            check_update(&pods, &old, &new).is_ok(),
            "removing finalizers is how deletion ends"
        );
    }
}
