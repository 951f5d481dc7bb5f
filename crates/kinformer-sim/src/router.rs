//! The router: which handler answers a request. Resource paths go to the resource handlers
//! (`api`) or, for watches, to `watch`; the admin endpoints to `admin`; everything else to
//! `discovery`. Injected failures and content negotiation are decided here, before a handler
//! runs.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper::Response;
use kinformer_core::StatusDetails;

use crate::faults::RequestKind;
use crate::request::{Query, accept_header, accepts_gzip, check_body_type, parse_target};
use crate::response::{Body, protobuf_status_response, status_response};
use crate::state::Shared;
use crate::store::status;
use crate::table::{Form, Read, negotiate, negotiate_write};
use crate::{admin, api, discovery, watch};

/// Answers one authenticated request.
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
                return injected(code, retry, Encoding::Json);
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
    let gzip = shared.config.compression && accepts_gzip(&parts);
    let read = match (&parts.method, target.name.is_some(), is_watch) {
        (&Method::GET, _, true) => Some(Read::Watch),
        (&Method::GET, false, false) => Some(Read::List),
        (&Method::GET, true, false) => Some(Read::Get),
        _ => None,
    };
    let protobuf = !target.info.custom && crate::protobuf::codec(&target.info.api).is_some();
    let negotiated = read.map(|r| negotiate(accept_header(&parts).as_deref(), r, protobuf));
    // The API server's filters (priority and fairness, max-in-flight) answer before the
    // handler negotiates, so an injected failure wins over a 406; its Status is still written
    // in the encoding the request would have got.
    if let Some((code, retry)) = shared.faults.take_failure(kind) {
        let encoding = match negotiated {
            Some(Ok(Form::Protobuf)) => Encoding::Protobuf,
            _ => Encoding::Json,
        };
        return injected(code, retry, encoding);
    }
    let form = match negotiated {
        Some(Err(s)) => return status_response(&s),
        Some(Ok(f)) => f,
        None => Form::Full,
    };
    let status_target = target.status;
    let finalize_target = target.finalize;
    let result = match (&parts.method, target.name.is_some(), is_watch) {
        // A namespace's `/finalize` can only be replaced (`FinalizeREST` is an updater alone).
        (m, _, w) if finalize_target && (w || *m != Method::PUT) => Err(status(
            405,
            "MethodNotAllowed",
            format!(
                "the server does not allow this method on the requested resource ({})",
                parts.method
            ),
        )),
        // A `/status` subresource can be read, replaced and patched, nothing else.
        (m, _, w)
            if status_target && (w || !matches!(*m, Method::GET | Method::PUT | Method::PATCH)) =>
        {
            Err(status(
                405,
                "MethodNotAllowed",
                format!(
                    "the server does not allow this method on the requested resource ({})",
                    parts.method
                ),
            ))
        }
        (&Method::GET, _, true) => watch::handle(shared, target, &query, form).await,
        (&Method::GET, false, false) => api::list(shared, &target, &query, form, gzip).await,
        (&Method::GET, true, false) => api::get(shared, &target, &query, form, gzip).await,
        // A write negotiates its answer before it reads its body.
        (m, _, _)
            if *m != Method::GET
                && let Err(s) = negotiate_write(accept_header(&parts).as_deref()) =>
        {
            Err(s)
        }
        (&Method::POST | &Method::PUT, _, _) if let Err(s) = check_body_type(&parts) => Err(s),
        (&Method::POST, false, _) => api::create(shared, &target, &query, &parts, body).await,
        (&Method::PUT, true, _) => api::update(shared, &target, &query, &parts, body).await,
        (&Method::PATCH, true, _) => api::patch(shared, &target, &query, &parts, body).await,
        (&Method::DELETE, true, _) => api::delete(shared, &target, &query, body).await,
        (&Method::DELETE, false, _) => api::delete_collection(shared, &target, &query, body).await,
        _ => Err(status(
            405,
            "MethodNotAllowed",
            format!(
                "the server does not allow this method on the requested resource ({})",
                parts.method
            ),
        )),
    };
    result.unwrap_or_else(|s| {
        if form == Form::Protobuf {
            protobuf_status_response(&s)
        } else {
            status_response(&s)
        }
    })
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

/// How an injected failure's `Status` is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Json,
    Protobuf,
}

/// The body of the API server's own 429, written by its priority-and-fairness and
/// max-in-flight filters with Go's `http.Error`: plain text, not a `Status`.
const TOO_MANY_REQUESTS: &str = "Too many requests, please try again later.\n";

/// The response to an injected failure, as the API server writes that code. A 429 comes from
/// the server's request filters, which answer in plain text with a `Retry-After` header; every
/// other code is a `Status` in the request's negotiated encoding, as the handlers' errors are.
fn injected(code: u16, retry_after: Option<u32>, encoding: Encoding) -> Response<Body> {
    let mut r = if code == 429 {
        let mut r = Response::new(
            Full::new(Bytes::from_static(TOO_MANY_REQUESTS.as_bytes()))
                .map_err(|never| match never {})
                .boxed(),
        );
        *r.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        r.headers_mut().insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        r
    } else {
        let message = match code {
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
        match encoding {
            Encoding::Json => status_response(&s),
            Encoding::Protobuf => protobuf_status_response(&s),
        }
    };
    if let Some(secs) = retry_after {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    r
}
