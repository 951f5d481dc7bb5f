//! The properties every parser of kinformer must keep on any input, checked by the fuzz targets
//! (`fuzz_targets/`) on the bytes libFuzzer makes, and by `cargo test` on proptest's inputs
//! (`crates/kinformer-client/tests/properties.rs` includes this file).
//!
//! Each check takes raw bytes, runs one parser on them, and panics when a property fails: the
//! parser panicked, accepted something it must refuse, or refused with an error that is not the
//! typed one its documentation promises. Unbounded allocation is caught by the fuzzer's malloc
//! and RSS limits (`cargo xtask fuzz` sets them).

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use kinformer_client::{Error, Kubeconfig, KubeconfigOptions, WatchDecoder};
use kinformer_core::selector::{FieldSelector, LabelSelector};
use kinformer_core::{
    DynamicObject, ListParams, Object, ObjectList, PartialObjectMetadata, Scope, WatchEvent,
};
use serde::de::DeserializeOwned;

/// Splits fuzz input into a small header and the rest, never failing: a short input gives zeros.
fn take<const N: usize>(data: &[u8]) -> ([u8; N], &[u8]) {
    let mut head = [0u8; N];
    let n = data.len().min(N);
    head[..n].copy_from_slice(&data[..n]);
    (head, &data[n..])
}

/// What a watch decoder yielded, in a form two runs can be compared by.
fn summary<K: Object>(r: &Result<WatchEvent<K>, Error>) -> String {
    match r {
        Ok(WatchEvent::Added(o)) => format!("added {} {:?}", o.key(), o.resource_version()),
        Ok(WatchEvent::Modified(o)) => format!("modified {} {:?}", o.key(), o.resource_version()),
        Ok(WatchEvent::Deleted(o)) => format!("deleted {} {:?}", o.key(), o.resource_version()),
        Ok(WatchEvent::Bookmark(b)) => format!("bookmark {:?}", b.resource_version.as_str()),
        Ok(WatchEvent::Error(s)) => format!("error {} {:?}", s.code, s.reason),
        Err(e) => format!("err {e}"),
    }
}

/// Feeds `body` to a decoder in chunks cut at `cuts` (cycled; each at least one byte) and
/// returns what it yielded, checking each item on the way.
fn decode_in_chunks<K: Object + DeserializeOwned>(
    body: &[u8],
    cuts: &[usize],
    max_line: usize,
    require_namespace: bool,
) -> (Vec<String>, Option<u64>, Option<u64>) {
    let mut decoder = WatchDecoder::new(max_line).require_namespace(require_namespace);
    let mut out = Vec::new();
    let mut failed = false;
    let (mut too_long_at, mut decode_at) = (None, None);
    let mut check = |r: Result<WatchEvent<K>, Error>, out: &mut Vec<String>| {
        assert!(
            !failed,
            "the decoder yielded {} after an error",
            summary(&r)
        );
        match &r {
            Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)) => {
                assert!(!o.name().is_empty(), "an object without a name got through");
                if require_namespace {
                    assert!(o.namespace().is_some_and(|n| !n.is_empty()));
                }
            }
            Ok(_) => {}
            Err(Error::LineTooLong { limit, line }) => {
                assert_eq!(*limit, max_line);
                too_long_at = Some(*line);
                failed = true;
            }
            Err(Error::Decode {
                what: "watch event",
                line: Some(line),
                offset: Some(offset),
                ..
            }) => {
                assert!(*offset <= body.len() as u64);
                decode_at = Some(*line);
                failed = true;
            }
            Err(e @ Error::Interrupted { .. }) => {
                assert!(e.is_resumable());
                failed = true;
            }
            Err(other) => panic!("an untyped refusal: {other:?}"),
        }
        out.push(summary(&r));
    };
    let mut rest = body;
    let mut i = 0;
    while !rest.is_empty() {
        let size = cuts
            .get(i % cuts.len().max(1))
            .copied()
            .unwrap_or(rest.len())
            .clamp(1, rest.len());
        i += 1;
        decoder.push(Bytes::copy_from_slice(&rest[..size]));
        rest = &rest[size..];
        while let Some(r) = decoder.next_event::<K>() {
            check(r, &mut out);
        }
    }
    if let Some(r) = decoder.finish::<K>() {
        check(r, &mut out);
    }
    assert!(decoder.next_event::<K>().is_none(), "events after finish");
    let ok = out.iter().filter(|s| !s.starts_with("err ")).count() as u64;
    assert_eq!(decoder.events(), ok, "the event count");
    // The line limit, judged from the bytes: the first line longer than the limit is refused,
    // unless an earlier line was refused for its content.
    let first_long = body
        .split(|&b| b == b'\n')
        .position(|line| line.len() > max_line)
        .map(|i| i as u64 + 1);
    match (first_long, too_long_at, decode_at) {
        (None, None, _) => {}
        (Some(k), Some(at), _) => assert_eq!(at, k, "the line refused as too long"),
        (Some(k), None, Some(d)) => assert!(d < k, "line {k} is too long, line {d} failed"),
        other => panic!("the line limit {max_line} misjudged: {other:?}"),
    }
    (out, too_long_at, decode_at)
}

/// The watch-stream decoder on arbitrary bytes cut at arbitrary chunk boundaries: it never
/// panics; every refusal is `LineTooLong`, `Decode` (naming line and offset) or `Interrupted`;
/// nothing comes after an error; nameless objects never get through; and the chunk boundaries
/// change nothing: the same bytes in one chunk give the same events and the same error.
///
/// Input: two bytes choosing the line limit (1 to 32768 bytes) and whether a namespace is
/// required (the top bit), one byte `n`, then `n % 16` chunk sizes (one byte each), then the
/// body.
pub fn watch_stream(data: &[u8]) {
    let ([hi, lo, n], rest) = take::<3>(data);
    let n = usize::from(n % 16).min(rest.len());
    let (cuts, body) = rest.split_at(n);
    let cuts: Vec<usize> = cuts.iter().map(|&c| usize::from(c) + 1).collect();
    let max_line = 1 + usize::from(u16::from_be_bytes([hi & 0x7f, lo]));
    let require_namespace = hi & 0x80 != 0;
    let whole = decode_in_chunks::<DynamicObject>(body, &[], max_line, require_namespace);
    let cut = decode_in_chunks::<DynamicObject>(body, &cuts, max_line, require_namespace);
    assert_eq!(whole.0, cut.0, "chunk boundaries changed the outcome");
    let whole = decode_in_chunks::<Pod>(body, &[], max_line, require_namespace);
    let cut = decode_in_chunks::<Pod>(body, &cuts, max_line, require_namespace);
    assert_eq!(
        whole.0, cut.0,
        "chunk boundaries changed the outcome (typed)"
    );
}

/// A list's outcome, in a form two decodes can be compared by.
fn list_summary<K: Object>(list: &Result<ObjectList<K>, kinformer_core::Error>) -> String {
    match list {
        Ok(list) => {
            let keys: Vec<String> = list.items.iter().map(|o| o.key().to_string()).collect();
            format!(
                "{keys:?} at {:?} continue {:?} remaining {:?} shard {:?}",
                list.resource_version.as_str(),
                list.continue_token,
                list.remaining_item_count,
                list.shard_selector
            )
        }
        Err(_) => "refused".to_owned(),
    }
}

/// `body` through a [`JsonListSplitter`](kinformer_core::JsonListSplitter) in chunks of
/// `chunk` bytes, each run decoded as it is taken.
fn split_list<K: Object + DeserializeOwned>(
    body: &[u8],
    chunk: usize,
    scope: Option<Scope>,
) -> Result<ObjectList<K>, kinformer_core::Error> {
    let mut splitter = kinformer_core::JsonListSplitter::new();
    let mut items = Vec::new();
    for piece in body.chunks(chunk) {
        splitter.push(piece)?;
        if let Some(run) = splitter.take_items() {
            items.extend(run.decode::<K>(scope)?);
        }
    }
    splitter.finish(items)
}

fn list_as<K: Object + DeserializeOwned>(body: &[u8]) {
    for scope in [None, Some(Scope::Cluster), Some(Scope::Namespaced)] {
        let result = match scope {
            None => ObjectList::<K>::from_json(body),
            Some(scope) => ObjectList::<K>::from_json_scoped(body, scope),
        };
        // Split as it arrives, in any chunks, the list is the list decoded whole.
        let whole = list_summary(&result);
        for chunk in [1, 7, 64, body.len().max(1)] {
            let split = split_list::<K>(body, chunk, scope);
            if let Err(e) = &split {
                assert!(
                    matches!(e, kinformer_core::Error::Decode { what: "list", .. }),
                    "an untyped refusal: {e:?}"
                );
            }
            assert_eq!(
                list_summary(&split),
                whole,
                "split in chunks of {chunk}: {:?}",
                split.as_ref().err()
            );
        }
        match result {
            Ok(list) => {
                for item in &list.items {
                    assert!(!item.name().is_empty(), "a nameless item got through");
                    if scope == Some(Scope::Namespaced) {
                        assert!(item.namespace().is_some_and(|n| !n.is_empty()));
                    }
                }
                assert_ne!(list.continue_token.as_deref(), Some(""));
            }
            Err(kinformer_core::Error::Decode { what: "list", .. }) => {}
            Err(other) => panic!("an untyped refusal: {other:?}"),
        }
    }
}

/// List decoding (dynamic, metadata-only and typed pods, unscoped, cluster and namespaced):
/// never a panic; a success holds only named items (and namespaced ones for a namespaced
/// resource) and no empty continue token; a refusal is `Decode { what: "list" }`; split as it
/// arrives (`JsonListSplitter`), in chunks of any size, the body gives the same list or a
/// refusal as it does decoded whole.
pub fn list(data: &[u8]) {
    list_as::<DynamicObject>(data);
    list_as::<PartialObjectMetadata>(data);
    list_as::<Pod>(data);
}

/// Label selector parsing: never a panic; a refusal is `InvalidSelector` with a position inside
/// the input; a selector that parses renders to text that parses back to the same selector and
/// renders the same again, and converts to and from `metav1.LabelSelector` when it can.
pub fn label_selector(data: &[u8]) {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    match input.parse::<LabelSelector>() {
        Ok(s) => {
            let rendered = s.to_string();
            let again: LabelSelector = rendered
                .parse()
                .unwrap_or_else(|e| panic!("{input:?} rendered as {rendered:?}: {e}"));
            assert_eq!(again, s, "{input:?} rendered as {rendered:?}");
            assert_eq!(again.to_string(), rendered);
            // Through `metav1.LabelSelector` (where `!=` becomes `NotIn`): the same meaning.
            let back = s.to_label_selector().ok().map(|meta| {
                let back = LabelSelector::from_label_selector(Some(&meta))
                    .unwrap_or_else(|e| panic!("{rendered:?} as metav1: {e}"));
                assert_eq!(back.to_label_selector().ok(), Some(meta), "{rendered:?}");
                back
            });
            let mut label_sets = vec![std::collections::BTreeMap::new()];
            for r in s.requirements() {
                for v in r.values().iter().map(String::as_str).chain(["", "1"]) {
                    label_sets.push([(r.key().to_owned(), v.to_owned())].into());
                    let mut all = label_sets[0].clone();
                    all.insert(r.key().to_owned(), v.to_owned());
                    label_sets[0] = all;
                }
            }
            for labels in &label_sets {
                let matched = s.matches(labels);
                assert_eq!(again.matches(labels), matched, "{rendered:?} on {labels:?}");
                if let Some(back) = &back {
                    assert_eq!(
                        back.matches(labels),
                        matched,
                        "{rendered:?} via metav1 on {labels:?}"
                    );
                }
            }
        }
        Err(kinformer_core::Error::InvalidSelector { position, .. }) => {
            assert!(position <= input.len(), "{input:?}: position {position}");
        }
        Err(other) => panic!("an untyped refusal: {other:?}"),
    }
}

/// Field selector parsing: never a panic; a refusal is `InvalidSelector` with a position inside
/// the input; a selector that parses renders to text that parses back to the same selector.
pub fn field_selector(data: &[u8]) {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    match input.parse::<FieldSelector>() {
        Ok(s) => {
            let rendered = s.to_string();
            let again: FieldSelector = rendered
                .parse()
                .unwrap_or_else(|e| panic!("{input:?} rendered as {rendered:?}: {e}"));
            assert_eq!(again, s, "{input:?} rendered as {rendered:?}");
            assert_eq!(again.to_string(), rendered);
            let _ = s.matches(|f| (f == "metadata.name").then(|| "a".into()));
        }
        Err(kinformer_core::Error::InvalidSelector { position, .. }) => {
            assert!(position <= input.len(), "{input:?}: position {position}");
        }
        Err(other) => panic!("an untyped refusal: {other:?}"),
    }
}

/// Kubeconfig parsing, then resolving its context into a client configuration: never a panic;
/// a refusal to parse is `Config`; resolving refuses with `Config`, `Tls` or `Auth` only. File
/// paths are dropped before resolving, so that the input cannot make it read any file; the
/// inline `-data` fields are decoded and checked.
pub fn kubeconfig(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let origin = std::path::Path::new("/nonexistent/kubeconfig");
    let parsed = Kubeconfig::from_yaml(text, Some(origin));
    let mut kc = match parsed {
        Ok(kc) => kc,
        Err(Error::Config { .. }) => return,
        Err(other) => panic!("an untyped refusal: {other:?}"),
    };
    for c in &mut kc.clusters {
        c.cluster.certificate_authority = None;
    }
    for u in &mut kc.users {
        u.user.token_file = None;
        u.user.client_certificate = None;
        u.user.client_key = None;
    }
    let kc = kc.clone().merge(kc);
    match kinformer_client::Config::from_kubeconfig(&kc, &KubeconfigOptions::default()) {
        Ok(config) => {
            let _ = format!("{config:?}");
        }
        Err(Error::Config { .. } | Error::Tls { .. } | Error::Auth { .. }) => {}
        Err(other) => panic!("an untyped refusal: {other:?}"),
    }
}

/// Continue tokens, which come from the server and go back to it: the simulated server reads any
/// token without panicking and refuses one it could not have made with a 400; a token it makes
/// reads back to what it was made from; the client carries any token in a list body to the
/// next request's query unchanged, as exactly one `continue` parameter.
///
/// Input: the token (lossy UTF-8).
pub fn continue_token(data: &[u8]) {
    let token = String::from_utf8_lossy(data);
    match kinformer_sim::decode_continue_token(&token) {
        Ok((rv, namespace, name)) => {
            assert!(rv == -1 || rv > 0, "{token:?} gave version {rv}");
            if !namespace.contains('/') && !name.ends_with('\0') {
                let again = kinformer_sim::encode_continue_token(rv, &namespace, &name);
                assert_eq!(
                    kinformer_sim::decode_continue_token(&again),
                    Ok((rv, namespace, name))
                );
            }
        }
        Err(status) => assert_eq!(status.code, 400, "{token:?}: {status:?}"),
    }
    // Made by the server from any key: reads back.
    let (namespace, name) = token.split_once('/').unwrap_or(("", &token));
    if !name.ends_with('\0') {
        let made = kinformer_sim::encode_continue_token(7, namespace, name);
        assert_eq!(
            kinformer_sim::decode_continue_token(&made),
            Ok((7, namespace.to_owned(), name.to_owned()))
        );
    }
    // Through the client: from a list body to the next request's query.
    let body = serde_json::json!({
        "metadata": {"resourceVersion": "5", "continue": &*token},
        "items": [],
    });
    let list = ObjectList::<DynamicObject>::from_json(body.to_string().as_bytes())
        .expect("a list with any continue token decodes");
    let carried = list.continue_token.clone();
    assert_eq!(carried.as_deref(), (!token.is_empty()).then_some(&*token));
    let query = ListParams {
        continue_token: carried,
        ..ListParams::default()
    }
    .to_query();
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    let want: Vec<(String, String)> = if token.is_empty() {
        Vec::new()
    } else {
        vec![("continue".to_owned(), token.into_owned())]
    };
    assert_eq!(pairs, want, "{query}");
}

/// Error answers (`Status` bodies, or anything a proxy puts there): whatever the code, the
/// `Retry-After` header and the body, the client maps them to an error without panicking; a 410
/// is `Gone`, 429 `Throttled`, a 5xx `ServerError` (unless the body is a `Status` with its own
/// code); the message taken from a body that is not a `Status` is at most 512 characters; and
/// the same body as the object of a watch `ERROR` event decodes or is a typed refusal.
///
/// Input: two bytes of status code, one byte `n`, `n % 24` bytes of `Retry-After`, the body.
pub fn status_body(data: &[u8]) {
    let ([hi, lo, n], rest) = take::<3>(data);
    let code = u16::from_be_bytes([hi, lo]) % 1000;
    let n = usize::from(n % 24).min(rest.len());
    let (retry_after, body) = rest.split_at(n);
    let retry_after = std::str::from_utf8(retry_after).ok();
    let error = Error::from_response(code, retry_after, body);
    let _ = (error.is_retryable(), error.is_gone(), error.retry_after());
    let _ = format!("{error} {error:?}");
    let is_status = serde_json::from_slice::<kinformer_core::Status>(body)
        .is_ok_and(|s| s.code != 0 || !s.reason.is_empty() || !s.message.is_empty());
    if !is_status {
        match code {
            410 => assert!(matches!(error, Error::Gone { .. }), "{error:?}"),
            429 => assert!(matches!(error, Error::Throttled { .. }), "{error:?}"),
            500..=503 | 505..=599 => {
                assert!(matches!(error, Error::ServerError { .. }), "{error:?}")
            }
            _ => {}
        }
        if let Error::Gone { message } | Error::Throttled { message, .. } = &error {
            assert!(message.chars().count() <= 512);
        }
    }
    if let Some(Ok(wait)) = retry_after.map(|r| r.trim().parse::<u64>())
        && matches!(error, Error::Throttled { .. } | Error::ServerError { .. })
    {
        assert_eq!(
            error.retry_after(),
            Some(std::time::Duration::from_secs(wait))
        );
    }
    let Ok(object) = std::str::from_utf8(body) else {
        return;
    };
    let line = format!(r#"{{"type":"ERROR","object":{object}}}"#);
    match WatchEvent::<DynamicObject>::from_json(line.as_bytes()) {
        Ok(WatchEvent::Error(status)) => {
            let _ = (status.is_gone(), status.is_too_large_resource_version());
        }
        Ok(other) => panic!(
            "an ERROR line decoded as {:?}",
            summary(&Ok::<_, Error>(other))
        ),
        Err(kinformer_core::Error::Decode { .. }) => {}
        Err(other) => panic!("an untyped refusal: {other:?}"),
    }
}
