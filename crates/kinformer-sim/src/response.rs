//! How answers are written: the response body type, JSON and `Status` responses, YAML, gzip
//! for large bodies, and streamed list bodies paced by the slow-chunks fault.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream;
use http::{HeaderValue, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::Response;
use hyper::body::Frame;
use kinformer_core::Status;
use serde_json::Value;

use crate::render;
use crate::render::{GZIP_THRESHOLD, GzipChunks, status_json};
use crate::state::Shared;

/// The body of every response.
pub(crate) type Body = BoxBody<Bytes, std::io::Error>;

/// A JSON response with `body` as it is.
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

/// A `Status` error response in protobuf, for a request that negotiated it: the API server
/// writes errors in the response's negotiated encoding.
pub(crate) fn protobuf_status_response(s: &Status) -> Response<Body> {
    protobuf_status_response_with_continue(s, None)
}

/// [`protobuf_status_response`] whose status carries a continue token in its `metadata`.
pub(crate) fn protobuf_status_response_with_continue(
    s: &Status,
    continue_token: Option<&str>,
) -> Response<Body> {
    let mut r = status_response(s);
    *r.body_mut() = Full::new(crate::protobuf::status_body_with_continue(
        s,
        continue_token,
    ))
    .map_err(|never| match never {})
    .boxed();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(kinformer_protobuf::wire::CONTENT_TYPE),
    );
    r
}

/// A protobuf body (an object or a list), streamed in chunks paced by the slow-chunks fault
/// and gzip-compressed when it is large and the client accepts it, as JSON bodies are.
pub(crate) fn protobuf_response(shared: &Shared, body: Bytes, gzip: bool) -> Response<Body> {
    let gzip = gzip && body.len() > GZIP_THRESHOLD;
    let chunks: Vec<Bytes> = (0..body.len())
        .step_by(render::CHUNK)
        .map(|at| body.slice(at..(at + render::CHUNK).min(body.len())))
        .collect();
    let mut r = chunked_response(shared, chunks.into_iter(), gzip);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(kinformer_protobuf::wire::CONTENT_TYPE),
    );
    r
}

pub(crate) fn object_response(code: StatusCode, v: &Value) -> Response<Body> {
    json_response(code, Bytes::from(serde_json::to_vec(v).unwrap_or_default()))
}

/// An object or a list as YAML.
pub(crate) fn yaml_response(v: &Value, gzip: bool) -> Response<Body> {
    let body = Bytes::from(serde_yaml_ng::to_string(v).unwrap_or_default());
    let mut r = maybe_gzip_response(StatusCode::OK, body, gzip);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/yaml"),
    );
    r
}

/// Marks a response as gzip-compressed.
fn set_gzip_headers(r: &mut Response<Body>) {
    r.headers_mut()
        .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    r.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
}

/// A whole JSON body, gzip-compressed when it is large and the client accepts it.
pub(crate) fn maybe_gzip_response(code: StatusCode, body: Bytes, gzip: bool) -> Response<Body> {
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
pub(crate) fn chunked_response(
    shared: &Shared,
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
