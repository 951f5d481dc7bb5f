//! Discovery and the little OpenAPI that `kubectl` needs: `/version`, `/api`, `/apis`, resource
//! lists per group version, and `/openapi/v3` documents that declare server-side field validation.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;
use hyper::Response;
use kinformer_core::Scope;
use serde_json::{Value, json};

use crate::response::{Body, json_response, status_response};
use crate::state::Shared;
use crate::store::{ResourceInfo, status};

/// The Kubernetes version the OpenAPI documents name (`/version` follows `SimConfig::version`).
pub(crate) const SERVER_MINOR: &str = "34";

fn ok(v: &Value) -> Response<Body> {
    json_response(
        StatusCode::OK,
        Bytes::from(serde_json::to_vec(v).unwrap_or_default()),
    )
}

/// Group versions served, each with its resources.
fn group_versions(shared: &Shared) -> BTreeMap<(String, String), Vec<ResourceInfo>> {
    let mut map: BTreeMap<(String, String), Vec<ResourceInfo>> = BTreeMap::new();
    for r in shared.store.resources() {
        map.entry((r.api.group.clone(), r.api.version.clone()))
            .or_default()
            .push(r);
    }
    map
}

fn resource_entry(r: &ResourceInfo) -> Value {
    let mut v = json!({
        "name": r.api.plural,
        "singularName": r.singular,
        "namespaced": r.api.scope == Scope::Namespaced,
        "kind": r.api.kind,
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
    });
    if !r.short_names.is_empty() {
        v["shortNames"] = json!(r.short_names);
    }
    if matches!(
        (r.api.group.as_str(), r.api.plural.as_str()),
        ("", "pods" | "services")
            | (
                "apps",
                "deployments" | "replicasets" | "statefulsets" | "daemonsets"
            )
    ) {
        v["categories"] = json!(["all"]);
    }
    v
}

/// A resource's discovery entries: itself, and its `/status` subresource where it has one.
fn resource_entries(r: &ResourceInfo) -> Vec<Value> {
    let mut entries = vec![resource_entry(r)];
    if r.status_subresource {
        entries.push(json!({
            "name": format!("{}/status", r.api.plural),
            "singularName": "",
            "namespaced": r.api.scope == Scope::Namespaced,
            "kind": r.api.kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    entries
}

/// `/openapi/v3/...` path of a group version.
fn openapi_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// An OpenAPI v3 document for one group version: just enough for `kubectl` to see that PATCH and
/// POST take `fieldValidation` (so it validates on the server and needs no schemas).
fn openapi_doc(group: &str, version: &str, resources: &[ResourceInfo]) -> Value {
    let param = json!([
        {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
    ]);
    let mut paths = serde_json::Map::new();
    for r in resources {
        let gvk = json!({"group": group, "version": version, "kind": r.api.kind});
        let ns = match r.api.scope {
            Scope::Namespaced => Some("{namespace}"),
            Scope::Cluster => None,
        };
        let collection = r.api.list_path(ns);
        let op = |verb: &str| {
            json!({
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": param,
                "responses": {"200": {"description": "OK"}},
            })
        };
        paths.insert(
            collection.clone(),
            json!({"post": op("post"), "get": op("list")}),
        );
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({"patch": op("patch"), "put": op("put"), "get": op("get"), "delete": op("delete")}),
        );
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{SERVER_MINOR}.0")},
        "paths": paths,
        "components": {"schemas": {}},
    })
}

pub(crate) fn route(
    shared: &Arc<Shared>,
    segs: &[&str],
    parts: &http::request::Parts,
) -> Response<Body> {
    let gvs = group_versions(shared);
    let minor = shared.config.version.minor();
    match segs {
        ["version"] => ok(&json!({
            "major": "1",
            "minor": minor.to_string(),
            "gitVersion": format!("v1.{minor}.0-kinformer-sim"),
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.24.0",
            "compiler": "gc",
            "platform": "linux/amd64",
        })),
        ["healthz" | "livez" | "readyz"] => {
            let mut r = json_response(StatusCode::OK, Bytes::from_static(b"ok"));
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            r
        }
        ["api" | "apis"] if let Some(version) = aggregated_version(parts, shared) => {
            aggregated(&gvs, segs[0] == "api", version, parts)
        }
        ["api"] => ok(&json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": shared.addr.to_string()}],
        })),
        ["apis"] => {
            let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for (g, v) in gvs.keys().filter(|(g, _)| !g.is_empty()) {
                groups.entry(g).or_default().push(v);
            }
            let groups: Vec<Value> = groups
                .into_iter()
                .map(|(g, vs)| group_json(g, &vs))
                .collect();
            ok(&json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
        }
        ["apis", g] => {
            let vs: Vec<&str> = gvs
                .keys()
                .filter(|(gg, _)| gg == g)
                .map(|(_, v)| v.as_str())
                .collect();
            if vs.is_empty() {
                return status_response(&status(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                ));
            }
            let mut v = group_json(g, &vs);
            v["kind"] = "APIGroup".into();
            v["apiVersion"] = "v1".into();
            ok(&v)
        }
        ["api", v] | ["apis", _, v] => {
            let g = if segs[0] == "api" { "" } else { segs[1] };
            match gvs.get(&(g.to_owned(), (*v).to_owned())) {
                Some(rs) => ok(&json!({
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": if g.is_empty() { (*v).to_owned() } else { format!("{g}/{v}") },
                    "resources": rs.iter().flat_map(resource_entries).collect::<Vec<_>>(),
                })),
                None => status_response(&status(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                )),
            }
        }
        ["openapi", "v3"] => {
            let paths: serde_json::Map<String, Value> = gvs
                .keys()
                .map(|(g, v)| {
                    let p = openapi_path(g, v);
                    (
                        p.clone(),
                        json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=0")}),
                    )
                })
                .collect();
            ok(&json!({"paths": paths}))
        }
        ["openapi", "v2"] | ["swagger-2.0.0.pb-v1"] => openapi_v2(parts),
        ["openapi", "v3", "api", v] => openapi_gv(&gvs, "", v),
        ["openapi", "v3", "apis", g, v] => openapi_gv(&gvs, g, v),
        _ => status_response(&status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )),
    }
}

/// An OpenAPI v2 document with no definitions: older kubectl versions fetch it (as protobuf)
/// before validating a manifest on the client, and skip validation of kinds it does not describe.
fn openapi_v2(parts: &http::request::Parts) -> Response<Body> {
    let protobuf = parts
        .headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("protobuf"));
    if !protobuf {
        return ok(&json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": format!("v1.{SERVER_MINOR}.0")},
            "paths": {},
            "definitions": {},
        }));
    }
    // gnostic's openapi_v2.Document: swagger = 1 (string), info = 2 (Info: title = 1, version = 2).
    fn field(out: &mut Vec<u8>, number: u8, bytes: &[u8]) {
        out.push(number << 3 | 2);
        out.push(u8::try_from(bytes.len()).unwrap_or(u8::MAX));
        out.extend_from_slice(&bytes[..bytes.len().min(127)]);
    }
    let mut info = Vec::new();
    field(&mut info, 1, b"Kubernetes");
    field(&mut info, 2, format!("v1.{SERVER_MINOR}.0").as_bytes());
    let mut doc = Vec::new();
    field(&mut doc, 1, b"2.0");
    field(&mut doc, 2, &info);
    let mut r = json_response(StatusCode::OK, Bytes::from(doc));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        // Go's media type parser rejects the `@` of the requested type; the bytes are what count.
        http::HeaderValue::from_static("application/octet-stream"),
    );
    r
}

fn openapi_gv(
    gvs: &BTreeMap<(String, String), Vec<ResourceInfo>>,
    group: &str,
    version: &str,
) -> Response<Body> {
    match gvs.get(&(group.to_owned(), version.to_owned())) {
        Some(rs) => ok(&openapi_doc(group, version, rs)),
        None => status_response(&status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )),
    }
}

/// The aggregated discovery version the `Accept` header asks for and the modelled release
/// serves, as the apiserver negotiates it (`WrapAggregatedDiscoveryToHandler`): the media types
/// in order of preference (`q`, then order); the first the server can produce wins. A plain
/// JSON type (`application/json`, `*/*`) means the plain documents; an aggregated type of a
/// version this release does not serve, or in a serialization the sim does not produce
/// (protobuf), is passed over.
fn aggregated_version(parts: &http::request::Parts, shared: &Shared) -> Option<&'static str> {
    let accept = crate::request::accept_header(parts)?;
    let served = shared.config.version.aggregated_discovery();
    let mut clauses: Vec<(f32, usize, &str)> = accept
        .split(',')
        .enumerate()
        .map(|(i, clause)| {
            let q = clause
                .split(';')
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            (q, i, clause)
        })
        .filter(|(q, _, _)| *q > 0.0)
        .collect();
    clauses.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, _, clause) in clauses {
        let mut params = clause.split(';').map(str::trim);
        let media = params.next().unwrap_or_default().to_ascii_lowercase();
        let (mut g, mut v, mut kind) = (None, None, None);
        for p in params {
            match p.split_once('=') {
                Some(("g", x)) => g = Some(x),
                Some(("v", x)) => v = Some(x),
                Some(("as", x)) => kind = Some(x),
                _ => {}
            }
        }
        let json = matches!(media.as_str(), "application/json" | "application/*" | "*/*");
        match (g, v, kind) {
            (None, None, None) if json => return None,
            (Some("apidiscovery.k8s.io"), Some(version), Some("APIGroupDiscoveryList"))
                if media == "application/json" =>
            {
                if let Some(v) = served.iter().find(|s| **s == version) {
                    return Some(*v);
                }
            }
            _ => {}
        }
    }
    None
}

/// A resource as aggregated discovery describes it (`APIResourceDiscovery`).
fn aggregated_resource(r: &ResourceInfo) -> Value {
    let plain = resource_entry(r);
    let kind = json!({"group": "", "version": "", "kind": r.api.kind});
    let mut v = json!({
        "resource": r.api.plural,
        "responseKind": kind,
        "scope": if r.api.scope == Scope::Namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": plain["verbs"],
    });
    for (from, to) in [("shortNames", "shortNames"), ("categories", "categories")] {
        if let Some(x) = plain.get(from) {
            v[to] = x.clone();
        }
    }
    if r.status_subresource {
        v["subresources"] = json!([{
            "subresource": "status",
            "responseKind": kind,
            "verbs": ["get", "patch", "update"],
        }]);
    }
    v
}

/// `/api` or `/apis` as aggregated discovery (`APIGroupDiscoveryList`, apiserver's
/// `endpoints/discovery/aggregated`): every group with its versions, the preferred one first,
/// each with its resources; an `ETag` of the document, `304 Not Modified` to a request whose
/// `If-None-Match` names it.
fn aggregated(
    gvs: &BTreeMap<(String, String), Vec<ResourceInfo>>,
    core: bool,
    version: &str,
    parts: &http::request::Parts,
) -> Response<Body> {
    let mut groups: BTreeMap<&str, Vec<(&str, &[ResourceInfo])>> = BTreeMap::new();
    for ((g, v), rs) in gvs {
        if g.is_empty() == core {
            groups.entry(g).or_default().push((v, rs));
        }
    }
    let items: Vec<Value> = groups
        .into_iter()
        .map(|(g, mut versions)| {
            // The plain documents prefer the last version: the same one comes first here.
            versions.reverse();
            let mut metadata = json!({"creationTimestamp": null});
            if !g.is_empty() {
                metadata["name"] = g.into();
            }
            json!({
                "metadata": metadata,
                "versions": versions.iter().map(|(v, rs)| json!({
                    "version": v,
                    "resources": rs.iter().map(aggregated_resource).collect::<Vec<_>>(),
                    "freshness": "Current",
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let doc = json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    });
    let body = serde_json::to_vec(&doc).unwrap_or_default();
    let etag = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        body.hash(&mut h);
        format!("\"{:016X}\"", h.finish())
    };
    let matches = parts
        .headers
        .get(http::header::IF_NONE_MATCH)
        .is_some_and(|v| v.as_bytes() == etag.as_bytes());
    let mut r = if matches {
        let mut r = json_response(StatusCode::NOT_MODIFIED, Bytes::new());
        r.headers_mut().remove(http::header::CONTENT_TYPE);
        r
    } else {
        let mut r = json_response(StatusCode::OK, Bytes::from(body));
        if let Ok(ct) = http::HeaderValue::from_str(&format!(
            "application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
        )) {
            r.headers_mut().insert(http::header::CONTENT_TYPE, ct);
        }
        r
    };
    let headers = r.headers_mut();
    if let Ok(tag) = http::HeaderValue::from_str(&etag) {
        headers.insert(http::header::ETAG, tag);
    }
    headers.insert(http::header::VARY, http::HeaderValue::from_static("Accept"));
    headers.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("public"),
    );
    r
}

fn group_json(group: &str, versions: &[&str]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "name": group,
        "versions": vs,
        "preferredVersion": vs.last().cloned().unwrap_or(Value::Null),
    })
}
