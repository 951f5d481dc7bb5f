//! The resource handlers: get, list (pages, continue tokens, every resourceVersion mode), create,
//! update, patch and delete of the objects of one resource, as the router hands them a parsed
//! request.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http::{StatusCode, header};
use http_body_util::BodyExt as _;
use hyper::Response;
use kinformer_core::Status;
use serde_json::Value;

use crate::admission;
use crate::faults::FaultState;
use crate::fieldmanager::{self, Manager};
use crate::render::{GZIP_THRESHOLD, ListChunks, ListMeta, status_json_with_continue};
use crate::request::{Filter, Query, Target, parse_rv, timeout_seconds, wait_for_version};
use crate::response::{
    Body, chunked_response, json_response, maybe_gzip_response, object_response, protobuf_response,
    protobuf_status_response_with_continue, yaml_response,
};
use crate::schema;
use crate::state::Shared;
use crate::store::{DeleteOptions, Deletion, Stored, not_found, status, too_large};
use crate::table::{self, Form, IncludeObject};
use crate::validation;

/// The largest request body accepted, as the real server's default.
const MAX_BODY: usize = 3 * 1024 * 1024;

pub(crate) async fn get(
    shared: &Shared,
    t: &Target,
    q: &Query,
    form: Form,
    gzip: bool,
) -> Result<Response<Body>, Status> {
    // "" reads the latest, "0" any version; a number reads the cache once it has reached that
    // version, waiting for it and answering 504 "Too large resource version" if it does not come
    // (the cacher's `Get`, `storage/cacher/cacher.go`).
    if let Some(r) = q
        .get("resourceVersion")
        .filter(|r| !r.is_empty() && *r != "0")
    {
        let r = parse_rv(r)?;
        if r > shared.store.resource_version() && !wait_for_version(shared, r).await {
            return Err(too_large(r, shared.store.resource_version()));
        }
    }
    let name = t.name.as_deref().unwrap_or_default();
    let o = shared
        .store
        .get_stored(&t.info.api, t.namespace.as_deref(), name)
        .ok_or_else(|| not_found(&t.info.api, name))?;
    let body = match form {
        Form::Metadata => o.meta_json().clone(),
        Form::Full => o.json.clone(),
        Form::Table => {
            let include = IncludeObject::parse(q.get("includeObject"))?;
            let meta = serde_json::json!({"resourceVersion": o.rv.to_string()});
            let t = table::table(&t.info, &[o.value()], meta, include);
            Bytes::from(serde_json::to_vec(&t).unwrap_or_default())
        }
        Form::Yaml => return Ok(yaml_response(&o.value(), gzip)),
        Form::Protobuf => {
            let codec = protobuf_codec(&t.info)?;
            let body = o.protobuf(codec).map_err(internal)?.clone();
            return Ok(protobuf_response(shared, body, gzip));
        }
    };
    Ok(maybe_gzip_response(StatusCode::OK, body, gzip))
}

/// A create's or an update's body as the decoder leaves it: duplicate fields resolved to their
/// last value and fields the kind does not have dropped, with the warnings they earn under the
/// request's `fieldValidation` (400 under `Strict`).
async fn read_checked_json(
    body: Body,
    q: &Query,
    t: &Target,
) -> Result<(Value, Vec<String>), Status> {
    let directive = validation::FieldValidation::parse(q.get("fieldValidation"))?;
    let bytes = read_body(body).await?;
    let (mut v, duplicates) = validation::parse_body(&bytes).map_err(unknown_format)?;
    validation::check_kind_and_version(&t.info.api, &v)?;
    let unknown = schema::prune_unknown(&t.info.api, &mut v)?;
    let warnings = validation::field_errors(directive, &duplicates, &unknown)?;
    Ok((v, warnings))
}

/// Who writes: the request's `fieldManager`, else its `User-Agent`.
fn manager(
    q: &Query,
    parts: &http::request::Parts,
    t: &Target,
    options: &str,
) -> Result<Manager, Status> {
    let agent = parts
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    Manager::of_request(q.get("fieldManager"), agent, t.status, options)
}

/// Adds a `Warning` header for each warning, as the API server's warning recorder writes them.
fn with_warnings(mut r: Response<Body>, warnings: &[String]) -> Response<Body> {
    for w in warnings {
        let text = format!("299 - {:?}", w);
        if let Ok(v) = http::HeaderValue::from_str(&text) {
            r.headers_mut().append(header::WARNING, v);
        }
    }
    r
}

fn unknown_format(e: serde_json::Error) -> Status {
    status(
        400,
        "BadRequest",
        format!("the body of the request was in an unknown format: {e}"),
    )
}

async fn read_body(body: Body) -> Result<Bytes, Status> {
    Ok(http_body_util::Limited::new(body, MAX_BODY)
        .collect()
        .await
        .map_err(|e| {
            status(
                413,
                "RequestEntityTooLarge",
                format!("cannot read the request body: {e}"),
            )
        })?
        .to_bytes())
}

/// `dryRun=All` (the only value the API accepts): validate, answer, store nothing.
fn dry_run(q: &Query) -> Result<bool, Status> {
    let values: Vec<&str> =
        q.0.iter()
            .filter(|(k, _)| k == "dryRun")
            .map(|(_, v)| v.as_str())
            .collect();
    match values.as_slice() {
        [] => Ok(false),
        vs if vs.iter().all(|v| *v == "All") => Ok(true),
        vs => Err(status(
            400,
            "BadRequest",
            format!("Invalid dry run value: {vs:?}: the only supported value is All"),
        )),
    }
}

pub(crate) async fn create(
    shared: &Shared,
    t: &Target,
    q: &Query,
    parts: &http::request::Parts,
    body: Body,
) -> Result<Response<Body>, Status> {
    let dry = dry_run(q)?;
    let manager = manager(q, parts, t, "CreateOptions")?;
    let (mut v, warnings) = read_checked_json(body, q, t).await?;
    validation::check_no_version_on_create(&v)?;
    admission::admit_create(&shared.store, &t.info, &mut v, t.namespace.as_deref())?;
    validation::check_create(&t.info, &v)?;
    fieldmanager::on_create(&t.info, &manager, &mut v);
    let out = shared
        .store
        .write_create(&t.info.api, v, t.namespace.as_deref(), dry)?;
    Ok(with_warnings(
        object_response(StatusCode::CREATED, &out),
        &warnings,
    ))
}

pub(crate) async fn update(
    shared: &Shared,
    t: &Target,
    q: &Query,
    parts: &http::request::Parts,
    body: Body,
) -> Result<Response<Body>, Status> {
    let dry = dry_run(q)?;
    let manager = manager(q, parts, t, "UpdateOptions")?;
    let (v, warnings) = read_checked_json(body, q, t).await?;
    let name = t.name.as_deref().unwrap_or_default();
    let out = shared.store.write_update(
        &t.info.api,
        v,
        Some((t.namespace.as_deref(), name)),
        t.write(),
        &|old, new| {
            default_and_check_update(t, old, new)?;
            fieldmanager::on_update(&t.info, &manager, old, new);
            Ok(())
        },
        dry,
    )?;
    Ok(with_warnings(
        object_response(StatusCode::OK, &out),
        &warnings,
    ))
}

pub(crate) async fn patch(
    shared: &Shared,
    t: &Target,
    q: &Query,
    parts: &http::request::Parts,
    body: Body,
) -> Result<Response<Body>, Status> {
    let ct = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let media = ct.split(';').next().unwrap_or_default().trim();
    // Custom resources have no strategic merge patch on a real server either.
    let builtin = matches!(t.info.api.group.as_str(), "" | "apps");
    let strategic = match media {
        "application/merge-patch+json" => false,
        "application/strategic-merge-patch+json" if builtin => true,
        _ => {
            let accepted = if builtin {
                "application/merge-patch+json, application/strategic-merge-patch+json"
            } else {
                "application/merge-patch+json"
            };
            return Err(status(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types include: {accepted} (got {ct:?})"
                ),
            ));
        }
    };
    let dry = dry_run(q)?;
    let manager = manager(q, parts, t, "PatchOptions")?;
    let directive = validation::FieldValidation::parse(q.get("fieldValidation"))?;
    let bytes = read_body(body).await?;
    let (p, duplicates) = validation::parse_body(&bytes).map_err(unknown_format)?;
    let mut warnings = validation::field_errors(directive, &duplicates, &[])?;
    let name = t.name.as_deref().unwrap_or_default();
    // The patched object is decoded as a body is: its unknown fields (which only the patch can
    // have brought) are reported and dropped.
    let unknown_warnings = parking_lot::Mutex::new(Vec::new());
    let out = shared.store.write_patch(
        &t.info.api,
        t.namespace.as_deref(),
        name,
        p,
        strategic,
        t.write(),
        &|old, new| {
            let unknown = schema::prune_unknown(&t.info.api, new)?;
            *unknown_warnings.lock() = validation::field_errors(directive, &[], &unknown)?;
            default_and_check_update(t, old, new)?;
            fieldmanager::on_update(&t.info, &manager, old, new);
            Ok(())
        },
        dry,
    )?;
    warnings.extend(unknown_warnings.into_inner());
    Ok(with_warnings(
        object_response(StatusCode::OK, &out),
        &warnings,
    ))
}

/// What an update or patch over HTTP goes through before it is stored: the defaults every decode
/// applies, then the update's validation. The stored object is compared as defaulted too, so an
/// object written in-process without the defaults is not taken for a changed one.
fn default_and_check_update(t: &Target, old: &Value, new: &mut Value) -> Result<(), Status> {
    admission::default_update(&t.info, new);
    let mut old = old.clone();
    admission::default_update(&t.info, &mut old);
    validation::check_update(&t.info, &old, new)
}

/// `DeleteOptions` from a DELETE's body (if any) and query.
async fn delete_options(q: &Query, body: Body) -> Result<DeleteOptions, Status> {
    let bytes = http_body_util::Limited::new(body, MAX_BODY)
        .collect()
        .await
        .map_err(|e| {
            status(
                400,
                "BadRequest",
                format!("cannot read the request body: {e}"),
            )
        })?
        .to_bytes();
    let v: Value = if bytes.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).map_err(|e| {
            status(
                400,
                "BadRequest",
                format!("the body of the request was in an unknown format: {e}"),
            )
        })?
    };
    let mut opts = DeleteOptions {
        precondition_uid: v["preconditions"]["uid"].as_str().map(str::to_owned),
        precondition_resource_version: v["preconditions"]["resourceVersion"]
            .as_str()
            .map(str::to_owned),
        grace_period_seconds: v["gracePeriodSeconds"].as_i64(),
        dry_run: v["dryRun"]
            .as_array()
            .is_some_and(|d| d.iter().any(|x| x == "All")),
    };
    if let Some(g) = q.get("gracePeriodSeconds") {
        opts.grace_period_seconds = Some(g.parse().map_err(|_| {
            status(
                400,
                "BadRequest",
                format!("invalid gracePeriodSeconds: {g:?}"),
            )
        })?);
    }
    opts.dry_run |= dry_run(q)?;
    Ok(opts)
}

pub(crate) async fn delete(
    shared: &Shared,
    t: &Target,
    q: &Query,
    body: Body,
) -> Result<Response<Body>, Status> {
    let opts = delete_options(q, body).await?;
    let name = t.name.as_deref().unwrap_or_default();
    let (out, deletion) =
        shared
            .store
            .delete_with(&t.info.api, t.namespace.as_deref(), name, &opts)?;
    // An object still marked for deletion, and a deleted object of a kind whose storage sets
    // `ReturnDeletedObject` (pods, namespaces and service accounts among those served here:
    // `pkg/registry/core/{pod,namespace,serviceaccount}/storage/storage.go`), answer the
    // object; any other deleted object a `Status` naming it
    // (`registry/generic/registry/store.go`, `finalizeDelete`).
    let returns_deleted = t.info.api.group.is_empty()
        && !t.info.custom
        && matches!(
            t.info.api.plural.as_str(),
            "pods" | "namespaces" | "serviceaccounts"
        );
    if deletion == Deletion::Gone && !returns_deleted {
        let deleted = serde_json::json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {
                "name": name,
                "group": t.info.api.group,
                "kind": t.info.api.plural,
                "uid": out["metadata"]["uid"],
            },
        });
        return Ok(object_response(StatusCode::OK, &deleted));
    }
    Ok(object_response(StatusCode::OK, &out))
}

pub(crate) async fn delete_collection(
    shared: &Shared,
    t: &Target,
    q: &Query,
    body: Body,
) -> Result<Response<Body>, Status> {
    let opts = delete_options(q, body).await?;
    let filter = Filter::from_query(
        &t.info,
        t.namespace.clone(),
        q,
        shared.config.honours_shard_selector(),
    )?;
    let (rv, _) = shared.store.versions();
    let snap = shared.store.snapshot(&t.info.key, rv)?;
    let mut items = Vec::new();
    for o in snap.iter().filter(|o| filter.matches(o)) {
        // Objects deleted concurrently are simply gone already.
        if let Ok((out, _)) =
            shared
                .store
                .delete_with(&t.info.api, Some(&o.namespace), &o.name, &opts)
        {
            items.push(out);
        }
    }
    // The list of what was deleted (`registry/generic/registry/store.go`, `DeleteCollection`).
    let list = serde_json::json!({
        "kind": format!("{}List", t.info.api.kind),
        "apiVersion": t.info.api.api_version,
        "metadata": {"resourceVersion": shared.store.resource_version().to_string()},
        "items": items,
    });
    Ok(object_response(StatusCode::OK, &list))
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    v: String,
    rv: i64,
    start: String,
}

/// A continue token that goes on after `(namespace, name)` at version `rv` (-1: the latest).
fn encode_continue_after(rv: i64, (namespace, name): &(String, String)) -> String {
    let t = ContinueToken {
        v: "meta.k8s.io/v1".to_owned(),
        rv,
        start: format!("{namespace}/{name}\u{0}"),
    };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&t).unwrap_or_default())
}

fn encode_continue(rv: u64, last: &Stored) -> String {
    encode_continue_after(
        i64::try_from(rv).unwrap_or(i64::MAX),
        &(last.namespace.clone(), last.name.clone()),
    )
}

/// The 410 for a continue token whose version is compacted. As the real server does, it carries
/// in `metadata.continue` a token that goes on from the same place at the latest version, for
/// clients that accept an inconsistent list, and is written in the encoding the request
/// negotiated (protobuf included), as every error is.
fn expired_continue(start: &(String, String), form: Form) -> Response<Body> {
    let s = status(
        410,
        "Expired",
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
    );
    let token = encode_continue_after(-1, start);
    if form == Form::Protobuf {
        return protobuf_status_response_with_continue(&s, Some(&token));
    }
    json_response(
        StatusCode::GONE,
        status_json_with_continue(&s, Some(&token)),
    )
}

fn decode_continue(s: &str) -> Result<(i64, (String, String)), Status> {
    let bad = || {
        status(
            400,
            "BadRequest",
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let raw = URL_SAFE_NO_PAD
        .decode(s.trim_end_matches('='))
        .map_err(|_| bad())?;
    let t: ContinueToken = serde_json::from_slice(&raw).map_err(|_| bad())?;
    if t.rv == 0 || t.rv < -1 {
        return Err(bad());
    }
    let start = t.start.trim_end_matches('\u{0}');
    let (ns, name) = start.split_once('/').ok_or_else(bad)?;
    Ok((t.rv, (ns.to_owned(), name.to_owned())))
}

/// A continue token as this server hands it out in `metadata.continue`: the list goes on after
/// the object `namespace/name` (`namespace` empty for a cluster-scoped resource) at
/// `resource_version`, or at the latest version when it is -1.
///
/// ```
/// use kinformer_sim::{decode_continue_token, encode_continue_token};
///
/// let token = encode_continue_token(42, "shop", "web-0");
/// assert_eq!(decode_continue_token(&token).unwrap(), (42, "shop".to_owned(), "web-0".to_owned()));
/// assert_eq!(decode_continue_token("not a token").unwrap_err().code, 400);
/// ```
pub fn encode_continue_token(resource_version: i64, namespace: &str, name: &str) -> String {
    encode_continue_after(resource_version, &(namespace.to_owned(), name.to_owned()))
}

/// Reads a continue token the way the list handler does: the version and the object the list
/// goes on after. Any token this server could not have made is the 400 `Status` the list
/// request is answered with.
pub fn decode_continue_token(token: &str) -> Result<(i64, String, String), Status> {
    decode_continue(token).map(|(rv, (namespace, name))| (rv, namespace, name))
}

/// The 422 for a `resourceVersionMatch` the list options' validation forbids.
fn list_invalid(message: &str) -> Status {
    validation::invalid_list_options(&[validation::FieldError::forbidden(
        "resourceVersionMatch",
        message,
    )])
}

pub(crate) async fn list(
    shared: &Arc<Shared>,
    t: &Target,
    q: &Query,
    form: Form,
    gzip: bool,
) -> Result<Response<Body>, Status> {
    let include = IncludeObject::parse(q.get("includeObject"))?;
    let filter = Filter::from_query(
        &t.info,
        t.namespace.clone(),
        q,
        shared.config.honours_shard_selector(),
    )?;
    // Decoded with the rest of the list options, so malformed even where it means nothing.
    timeout_seconds(q)?;
    let rv = q.get("resourceVersion");
    let rv_match = q.get("resourceVersionMatch");
    let continue_token = q.get("continue");
    let limit = q
        .get("limit")
        .map(|l| {
            l.parse::<i64>()
                .map_err(|_| status(400, "BadRequest", format!("invalid limit: {l:?}")))
        })
        .transpose()?
        .filter(|l| *l > 0)
        .map(|l| l as usize);
    match (rv, rv_match, continue_token) {
        (None, Some(_), _) => {
            return Err(list_invalid(
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        (_, Some(_), Some(_)) => {
            return Err(list_invalid(
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        (Some("0"), Some("Exact"), _) => {
            return Err(list_invalid(
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
        (_, Some(m), _) if m != "Exact" && m != "NotOlderThan" => {
            return Err(list_invalid(&format!(
                "resourceVersionMatch {m:?} is not supported"
            )));
        }
        (Some(r), _, Some(_)) if r != "0" => {
            return Err(status(
                400,
                "BadRequest",
                "specifying resource version is not allowed when using continue",
            ));
        }
        _ => {}
    }
    let (current, compacted) = shared.store.versions();
    let mut limit = limit;
    let (at, start) = if let Some(c) = continue_token {
        let (token_rv, start) = decode_continue(c)?;
        // A token at -1 (handed out with a 410 for an expired token) goes on at the latest version.
        let at = u64::try_from(token_rv).unwrap_or(current);
        if token_rv > 0 && (at < compacted || FaultState::take(&shared.faults.gone_next_continue)) {
            return Ok(expired_continue(&start, form));
        }
        (at, Some(start))
    } else {
        let at = match rv {
            None => current,
            Some("0") => {
                // Served whole from the watch cache, which ignores `limit` at "0" on every
                // release (cacher.go, `computeListLimit`); storage pages it.
                if shared.config.watch_cache {
                    limit = None;
                }
                current
            }
            Some(r) => {
                let r = parse_rv(r)?;
                if r > current && !wait_for_version(shared, r).await {
                    return Err(too_large(r, shared.store.resource_version()));
                }
                // `Exact`, or the legacy form with a limit (KEP-2523): an exact read at `r`,
                // served by storage, which answers 410 once `r` is compacted.
                if rv_match == Some("Exact") || (rv_match.is_none() && limit.is_some()) {
                    let (_, compacted) = shared.store.versions();
                    if r < compacted {
                        return Err(status(
                            410,
                            "Expired",
                            format!(
                                "The resourceVersion for the provided list is too old. ({r} < {compacted})"
                            ),
                        ));
                    }
                    r
                } else {
                    shared.store.resource_version()
                }
            }
        };
        (at, None)
    };
    let snap = shared.store.snapshot(&t.info.key, at)?;
    // The namespace's objects are contiguous in the snapshot (sorted by namespace, then name).
    let (mut lo, hi) = match &filter.namespace {
        Some(ns) => (
            snap.partition_point(|o| o.namespace.as_str() < ns.as_str()),
            snap.partition_point(|o| o.namespace.as_str() <= ns.as_str()),
        ),
        None => (0, snap.len()),
    };
    if let Some((ns, name)) = &start {
        lo = lo.max(snap.partition_point(|o| {
            (o.namespace.as_str(), o.name.as_str()) <= (ns.as_str(), name.as_str())
        }));
    }
    let range = &snap[lo..hi.max(lo)];
    let mut items: Vec<&Arc<Stored>> =
        Vec::with_capacity(limit.unwrap_or(range.len()).min(range.len()));
    let mut next = None;
    for (i, o) in range.iter().enumerate() {
        if !filter.selects(o) {
            continue;
        }
        if limit.is_some_and(|l| items.len() == l) {
            next = Some(i);
            break;
        }
        items.push(o);
    }
    let continue_out = next
        .and_then(|_| items.last())
        .map(|last| encode_continue(at, last));
    let remaining = match (next, filter.is_everything()) {
        (Some(i), true) => Some((range.len() - i) as u64),
        _ => None,
    };
    let meta = ListMeta {
        resource_version: at,
        continue_token: continue_out.as_deref(),
        remaining,
        shard_selector: filter.shard_selector(),
    };
    let items: Vec<Arc<Stored>> = items.into_iter().cloned().collect();
    if matches!(form, Form::Table | Form::Yaml) {
        let list_meta = meta.to_json();
        let mut values: Vec<Value> = items.iter().map(|o| o.value()).collect();
        if form == Form::Yaml {
            for v in &mut values {
                if let Some(m) = v.as_object_mut() {
                    m.remove("kind");
                    m.remove("apiVersion");
                }
            }
            let list = serde_json::json!({
                "kind": format!("{}List", t.info.api.kind),
                "apiVersion": t.info.api.api_version,
                "metadata": list_meta,
                "items": values,
            });
            return Ok(yaml_response(&list, gzip));
        }
        let t = table::table(&t.info, &values, list_meta, include);
        let body = Bytes::from(serde_json::to_vec(&t).unwrap_or_default());
        return Ok(maybe_gzip_response(StatusCode::OK, body, gzip));
    }
    if form == Form::Protobuf {
        let codec = protobuf_codec(&t.info)?;
        let body = crate::protobuf::list_body(codec, &meta, &items).map_err(internal)?;
        return Ok(protobuf_response(shared, body, gzip));
    }
    let meta_only = form == Form::Metadata;
    let chunks = if meta_only {
        ListChunks::new(
            "PartialObjectMetadataList",
            "meta.k8s.io/v1",
            &meta,
            items,
            true,
        )
    } else {
        let kind = format!("{}List", t.info.api.kind);
        ListChunks::new(&kind, &t.info.api.api_version, &meta, items, false)
    };
    let gzip = gzip && chunks.total_len() > GZIP_THRESHOLD;
    Ok(chunked_response(shared, chunks, gzip))
}

/// The protobuf codec of a resource negotiation picked protobuf for.
pub(crate) fn protobuf_codec(
    info: &crate::store::ResourceInfo,
) -> Result<&'static crate::protobuf::Codec, Status> {
    crate::protobuf::codec(&info.api).ok_or_else(|| {
        status(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, application/yaml",
        )
    })
}

/// A 500 for an object the server cannot render in the negotiated form.
fn internal(message: String) -> Status {
    status(500, "InternalError", message)
}

#[cfg(test)]
mod tests {
    use kinformer_core::Scope;

    use super::*;
    use crate::store::Store;

    #[test]
    fn continue_tokens_round_trip() {
        let s = Store::new(10);
        let pods = kinformer_core::ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced);
        s.create(
            &pods,
            serde_json::json!({"metadata": {"name": "a/b", "namespace": "ns"}}),
        )
        .ok();
        let o = s.get_stored(&pods, Some("ns"), "a/b").unwrap();
        let tok = encode_continue(9, &o);
        assert_eq!(
            decode_continue(&tok).unwrap(),
            (9, ("ns".to_owned(), "a/b".to_owned()))
        );
        assert_eq!(decode_continue("!!").unwrap_err().code, 400);
    }
}
