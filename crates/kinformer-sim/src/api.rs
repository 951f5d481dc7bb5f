//! The REST API: routing, parameters, reads, writes and lists.

use std::borrow::Cow;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use futures_util::stream;
use http::{HeaderValue, Method, StatusCode, header};
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::Response;
use hyper::body::Frame;
use kinformer_core::{FieldSelector, LabelSelector, Scope, Status, StatusDetails};
use serde_json::Value;

use crate::faults::{FaultState, RequestKind};
use crate::render;
use crate::render::{
    GZIP_THRESHOLD, GzipChunks, ListChunks, ListMeta, status_json, status_json_with_continue,
};
use crate::server::{Body, Shared};
use crate::store::{DeleteOptions, ResourceInfo, Stored, invalid, not_found, status, too_large};
use crate::table::{Form, IncludeObject, Read, negotiate};
use crate::{admin, admission, discovery, table, watch};

/// The largest request body accepted, as the real server's default.
const MAX_BODY: usize = 3 * 1024 * 1024;

/// A decoded URL query.
#[derive(Debug, Default)]
pub(crate) struct Query(pub(crate) Vec<(String, String)>);

impl Query {
    pub(crate) fn parse(q: &str) -> Self {
        Self(
            q.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (decode(k), decode(v))
                })
                .collect(),
        )
    }

    /// The first value of a parameter; empty values count as absent.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    pub(crate) fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
                {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn json_response(code: StatusCode, body: Bytes) -> Response<Body> {
    let mut r = Response::new(Full::new(body).map_err(|never| match never {}).boxed());
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// A `Status` error response with the status's code.
pub(crate) fn status_response(s: &Status) -> Response<Body> {
    let code = StatusCode::from_u16(s.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = json_response(code, status_json(s));
    if let Some(secs) = s
        .details
        .as_ref()
        .map(|d| d.retry_after_seconds)
        .filter(|s| *s > 0)
    {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    r
}

/// Whether the client accepts gzip (`Accept-Encoding: gzip`, not with `q=0`).
fn accepts_gzip(parts: &http::request::Parts) -> bool {
    parts
        .headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut params = coding.split(';').map(str::trim);
            params
                .next()
                .is_some_and(|c| c.eq_ignore_ascii_case("gzip"))
                && !params.any(|p| {
                    p.strip_prefix("q=")
                        .and_then(|q| q.parse::<f32>().ok())
                        .is_some_and(|q| q == 0.0)
                })
        })
}

/// Marks a response as gzip-compressed.
fn set_gzip_headers(r: &mut Response<Body>) {
    r.headers_mut()
        .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    r.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
}

/// A whole JSON body, gzip-compressed when it is large and the client accepts it.
fn maybe_gzip_response(code: StatusCode, body: Bytes, gzip: bool) -> Response<Body> {
    if gzip && body.len() > GZIP_THRESHOLD {
        let mut r = json_response(code, render::gzip(&body));
        set_gzip_headers(&mut r);
        r
    } else {
        json_response(code, body)
    }
}

/// A streamed response from pre-rendered chunks, paced by the slow-chunks fault, and
/// gzip-compressed chunk by chunk when `gzip` is set.
fn chunked_response(
    shared: &Arc<Shared>,
    chunks: impl Iterator<Item = Bytes> + Send + Sync + 'static,
    gzip: bool,
) -> Response<Body> {
    let chunks: Box<dyn Iterator<Item = Bytes> + Send + Sync> = if gzip {
        Box::new(GzipChunks::new(chunks))
    } else {
        Box::new(chunks)
    };
    let faults = Arc::clone(&shared.faults);
    let body = stream::unfold(
        (chunks.into_iter(), faults, true),
        |(mut it, faults, first)| async move {
            let chunk = it.next()?;
            if !first && let Some(d) = faults.slow_chunks() {
                tokio::time::sleep(d).await;
            }
            Some((
                Ok::<_, std::io::Error>(Frame::data(chunk)),
                (it, faults, false),
            ))
        },
    );
    let mut r = Response::new(StreamBody::new(body).boxed());
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if gzip {
        set_gzip_headers(&mut r);
    }
    r
}

fn reason_of(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        410 => "Expired",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

/// The response to an injected failure.
fn injected(code: u16, retry_after: Option<u32>) -> Response<Body> {
    let message = match code {
        429 => "Too many requests, please try again later.".to_owned(),
        500 => "Internal error occurred: injected fault".to_owned(),
        503 => "the server is currently unable to handle the request".to_owned(),
        c => format!("injected fault with code {c}"),
    };
    let mut s = status(code, reason_of(code), message);
    if let Some(secs) = retry_after {
        s.details = Some(StatusDetails {
            retry_after_seconds: secs,
            ..StatusDetails::default()
        });
    }
    let mut r = status_response(&s);
    if let Some(secs) = retry_after {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    r
}

/// Which object or collection a resource path names.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) info: ResourceInfo,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) watch_path: bool,
}

fn not_served() -> Status {
    status(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

fn parse_target(
    shared: &Shared,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Target, Status> {
    let (watch_path, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let store = &shared.store;
    let lookup = |plural: &str| {
        store
            .resource(group, plural)
            .filter(|i| i.api.version == version)
    };
    let (info, namespace, tail) = match rest {
        ["namespaces", ns, plural, tail @ ..] if !matches!(*plural, "status" | "finalize") => {
            let info = lookup(plural).ok_or_else(not_served)?;
            if info.api.scope == Scope::Cluster {
                return Err(not_served());
            }
            (info, Some((*ns).to_owned()), tail)
        }
        [plural, tail @ ..] => (lookup(plural).ok_or_else(not_served)?, None, tail),
        [] => return Err(not_served()),
    };
    let name = match tail {
        [] => None,
        [name] | [name, "status"] => Some((*name).to_owned()),
        _ => return Err(not_served()),
    };
    Ok(Target {
        info,
        namespace,
        name,
        watch_path,
    })
}

/// The `Accept` header, all of its values joined.
fn accept_header(parts: &http::request::Parts) -> Option<String> {
    let values: Vec<&str> = parts
        .headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!values.is_empty()).then(|| values.join(","))
}

pub(crate) async fn route(
    shared: &Arc<Shared>,
    parts: http::request::Parts,
    body: Body,
) -> Response<Body> {
    let path = parts.uri.path().to_owned();
    let query = Query::parse(parts.uri.query().unwrap_or_default());
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    tracing::trace!(method = %parts.method, %path, "request");
    let (group, version, rest): (&str, &str, &[&str]) = match segs.as_slice() {
        ["api", "v1", rest @ ..] if !rest.is_empty() => ("", "v1", rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (g, v, rest),
        [admin::PREFIX, "admin", action] if shared.config.admin => {
            return admin::route(shared, &parts.method, action, &query);
        }
        _ => {
            if let Some((code, retry)) = shared.faults.take_failure(RequestKind::Any) {
                return injected(code, retry);
            }
            return discovery::route(shared, &segs, &parts);
        }
    };
    let target = match parse_target(shared, group, version, rest) {
        Ok(t) => t,
        Err(s) => return status_response(&s),
    };
    let is_watch = target.watch_path || query.flag("watch");
    let kind = match (&parts.method, &target.name, is_watch) {
        (&Method::GET, _, true) => RequestKind::Watch,
        (&Method::GET, None, false) => RequestKind::List,
        _ => RequestKind::Any,
    };
    if let Some((code, retry)) = shared.faults.take_failure(kind) {
        return injected(code, retry);
    }
    let gzip = shared.config.compression && accepts_gzip(&parts);
    let read = match (&parts.method, target.name.is_some(), is_watch) {
        (&Method::GET, _, true) => Some(Read::Watch),
        (&Method::GET, false, false) => Some(Read::List),
        (&Method::GET, true, false) => Some(Read::Get),
        _ => None,
    };
    let form = match read.map(|r| negotiate(accept_header(&parts).as_deref(), r)) {
        Some(Err(s)) => return status_response(&s),
        Some(Ok(f)) => f,
        None => Form::Full,
    };
    let result = match (&parts.method, target.name.is_some(), is_watch) {
        (&Method::GET, _, true) => watch::handle(shared, target, &query, form).await,
        (&Method::GET, false, false) => list(shared, &target, &query, form, gzip).await,
        (&Method::GET, true, false) => get(shared, &target, &query, form, gzip),
        (&Method::POST | &Method::PUT, _, _) if let Err(s) = check_body_type(&parts) => Err(s),
        (&Method::POST, false, _) => create(shared, &target, &query, body).await,
        (&Method::PUT, true, _) => update(shared, &target, &query, body).await,
        (&Method::PATCH, true, _) => patch(shared, &target, &query, &parts, body).await,
        (&Method::DELETE, true, _) => delete(shared, &target, &query, body).await,
        (&Method::DELETE, false, _) => delete_collection(shared, &target, &query, body).await,
        _ => Err(status(
            405,
            "MethodNotAllowed",
            format!(
                "the server does not allow this method on the requested resource ({})",
                parts.method
            ),
        )),
    };
    result.unwrap_or_else(|s| status_response(&s))
}

fn get(
    shared: &Shared,
    t: &Target,
    q: &Query,
    form: Form,
    gzip: bool,
) -> Result<Response<Body>, Status> {
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
    };
    Ok(maybe_gzip_response(StatusCode::OK, body, gzip))
}

/// An object or a list as YAML.
fn yaml_response(v: &Value, gzip: bool) -> Response<Body> {
    let body = Bytes::from(serde_yaml_ng::to_string(v).unwrap_or_default());
    let mut r = maybe_gzip_response(StatusCode::OK, body, gzip);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/yaml"),
    );
    r
}

/// Refuses a request body in a media type the sim cannot decode (protobuf, CBOR), with the 415 a
/// server without that serializer answers.
fn check_body_type(parts: &http::request::Parts) -> Result<(), Status> {
    let ct = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let media = ct.split(';').next().unwrap_or_default().trim();
    if media.is_empty() || media == "application/json" || media.ends_with("+json") {
        return Ok(());
    }
    Err(status(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: application/json (got {ct:?})"
        ),
    ))
}

async fn read_json(body: Body) -> Result<Value, Status> {
    let bytes = http_body_util::Limited::new(body, MAX_BODY)
        .collect()
        .await
        .map_err(|e| {
            status(
                413,
                "RequestEntityTooLarge",
                format!("cannot read the request body: {e}"),
            )
        })?
        .to_bytes();
    serde_json::from_slice(&bytes).map_err(|e| {
        status(
            400,
            "BadRequest",
            format!("the body of the request was in an unknown format: {e}"),
        )
    })
}

fn object_response(code: StatusCode, v: &Value) -> Response<Body> {
    json_response(code, Bytes::from(serde_json::to_vec(v).unwrap_or_default()))
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

async fn create(
    shared: &Shared,
    t: &Target,
    q: &Query,
    body: Body,
) -> Result<Response<Body>, Status> {
    let dry = dry_run(q)?;
    let mut v = read_json(body).await?;
    admission::admit_create(&shared.store, &t.info, &mut v, t.namespace.as_deref())?;
    let out = shared
        .store
        .write_create(&t.info.api, v, t.namespace.as_deref(), dry)?;
    Ok(object_response(StatusCode::CREATED, &out))
}

async fn update(
    shared: &Shared,
    t: &Target,
    q: &Query,
    body: Body,
) -> Result<Response<Body>, Status> {
    let dry = dry_run(q)?;
    let v = read_json(body).await?;
    let name = t.name.as_deref().unwrap_or_default();
    let out =
        shared
            .store
            .write_update(&t.info.api, v, Some((t.namespace.as_deref(), name)), dry)?;
    Ok(object_response(StatusCode::OK, &out))
}

async fn patch(
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
    let p = read_json(body).await?;
    let name = t.name.as_deref().unwrap_or_default();
    let out =
        shared
            .store
            .write_patch(&t.info.api, t.namespace.as_deref(), name, p, strategic, dry)?;
    Ok(object_response(StatusCode::OK, &out))
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

async fn delete(
    shared: &Shared,
    t: &Target,
    q: &Query,
    body: Body,
) -> Result<Response<Body>, Status> {
    let opts = delete_options(q, body).await?;
    let name = t.name.as_deref().unwrap_or_default();
    let (out, _) = shared
        .store
        .delete_with(&t.info.api, t.namespace.as_deref(), name, &opts)?;
    Ok(object_response(StatusCode::OK, &out))
}

async fn delete_collection(
    shared: &Shared,
    t: &Target,
    q: &Query,
    body: Body,
) -> Result<Response<Body>, Status> {
    let opts = delete_options(q, body).await?;
    let filter = Filter::from_query(&t.info, t.namespace.clone(), q)?;
    let (rv, _) = shared.store.versions();
    let snap = shared.store.snapshot(&t.info.key, rv)?;
    for o in snap.iter().filter(|o| filter.matches(o)) {
        // Objects deleted concurrently are simply gone already.
        let _ = shared
            .store
            .delete_with(&t.info.api, Some(&o.namespace), &o.name, &opts);
    }
    let mut s = Status::failure(200, "", "");
    s.status = "Success".to_owned();
    Ok(json_response(StatusCode::OK, status_json(&s)))
}

/// Which objects a list or watch selects: a namespace, a label selector, a field selector.
#[derive(Debug)]
pub(crate) struct Filter {
    pub(crate) namespace: Option<String>,
    pub(crate) label: LabelSelector,
    pub(crate) field: FieldSelector,
}

impl Filter {
    pub(crate) fn from_query(
        info: &ResourceInfo,
        namespace: Option<String>,
        q: &Query,
    ) -> Result<Self, Status> {
        let label: LabelSelector =
            q.get("labelSelector")
                .unwrap_or_default()
                .parse()
                .map_err(|e| {
                    status(
                        400,
                        "BadRequest",
                        format!("unable to parse requirement: {e}"),
                    )
                })?;
        let field: FieldSelector = q
            .get("fieldSelector")
            .unwrap_or_default()
            .parse()
            .map_err(|e| status(400, "BadRequest", format!("invalid field selector: {e}")))?;
        if let Some(r) = field
            .requirements()
            .iter()
            .find(|r| !info.supports_field(&r.field))
        {
            return Err(status(
                400,
                "BadRequest",
                format!("field label not supported: {}", r.field),
            ));
        }
        Ok(Self {
            namespace,
            label,
            field,
        })
    }

    /// Label and field selectors only (the namespace is checked apart).
    pub(crate) fn selects(&self, o: &Stored) -> bool {
        self.label.matches(&o.labels) && self.field.matches(|f| o.field(f).map(Cow::Borrowed))
    }

    pub(crate) fn in_namespace(&self, o: &Stored) -> bool {
        self.namespace.as_deref().is_none_or(|ns| o.namespace == ns)
    }

    pub(crate) fn matches(&self, o: &Stored) -> bool {
        self.in_namespace(o) && self.selects(o)
    }

    fn is_everything(&self) -> bool {
        self.label.is_everything() && self.field.is_everything()
    }
}

/// Waits (bounded by the configured wait) for the store to reach `rv`.
pub(crate) async fn wait_for_version(shared: &Shared, rv: u64) -> bool {
    let mut rx = shared.store.subscribe();
    tokio::time::timeout(shared.config.too_large_wait, rx.wait_for(|cur| *cur >= rv))
        .await
        .is_ok_and(|r| r.is_ok())
}

pub(crate) fn parse_rv(s: &str) -> Result<u64, Status> {
    s.parse().map_err(|_| {
        status(
            400,
            "BadRequest",
            format!("invalid resource version: {s:?}"),
        )
    })
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
/// clients that accept an inconsistent list.
fn expired_continue(start: &(String, String)) -> Response<Body> {
    let s = status(
        410,
        "Expired",
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
    );
    let token = encode_continue_after(-1, start);
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

fn list_invalid(t: &Target, message: &str) -> Status {
    let mut s = invalid(&t.info.api, "", "resourceVersionMatch", message);
    s.message = format!(
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: {message}"
    );
    s
}

async fn list(
    shared: &Arc<Shared>,
    t: &Target,
    q: &Query,
    form: Form,
    gzip: bool,
) -> Result<Response<Body>, Status> {
    let include = IncludeObject::parse(q.get("includeObject"))?;
    let filter = Filter::from_query(&t.info, t.namespace.clone(), q)?;
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
                t,
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        (_, Some(_), Some(_)) => {
            return Err(list_invalid(
                t,
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        (Some("0"), Some("Exact"), _) => {
            return Err(list_invalid(
                t,
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
        (_, Some(m), _) if m != "Exact" && m != "NotOlderThan" => {
            return Err(list_invalid(
                t,
                &format!("resourceVersionMatch {m:?} is not supported"),
            ));
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
            return Ok(expired_continue(&start));
        }
        (at, Some(start))
    } else {
        let at = match rv {
            None => current,
            Some("0") => {
                // Served from the watch cache, which ignores `limit` before 1.34's snapshots.
                if !shared.config.version.pages_rv0_lists() {
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
    };
    let items: Vec<Arc<Stored>> = items.into_iter().cloned().collect();
    if matches!(form, Form::Table | Form::Yaml) {
        let mut list_meta = serde_json::json!({"resourceVersion": at.to_string()});
        if let Some(c) = &meta.continue_token {
            list_meta["continue"] = Value::from(*c);
        }
        if let Some(r) = meta.remaining {
            list_meta["remainingItemCount"] = Value::from(r);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_decode() {
        let q = Query::parse("labelSelector=app%3Dweb%2Ctier+in+%28a%2Cb%29&watch=1&limit=&x=%zz");
        assert_eq!(q.get("labelSelector"), Some("app=web,tier in (a,b)"));
        assert!(q.flag("watch"));
        assert_eq!(q.get("limit"), None);
        assert_eq!(q.get("x"), Some("%zz"));
    }

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

    use crate::store::Store;
}
