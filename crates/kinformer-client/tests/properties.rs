//! The fuzz targets' properties, checked by `cargo test` on inputs proptest builds (fixed seed,
//! from `.cargo/config.toml`): the watch-stream decoder over arbitrary chunk boundaries, list
//! bodies, label and field selectors, kubeconfigs, continue tokens and error bodies. The checks
//! are the fuzz crate's own (`fuzz/src/lib.rs`, included here), so the two never drift apart;
//! the generators here aim at the shapes the parsers expect (valid lines and bodies, then cut,
//! mixed and corrupted), where the fuzzer starts from seeds and finds its own way.

#[allow(unreachable_pub, dead_code)]
#[path = "../../../fuzz/src/lib.rs"]
mod properties;

use proptest::prelude::*;

/// One watch line: valid events of every type (with and without names, namespaces and
/// versions), blank lines and CRLF, garbage, and lines cut short.
fn watch_line() -> impl Strategy<Value = String> {
    let name = proptest::option::of("[a-z]{1,3}");
    let namespace = proptest::option::of("[a-z]{0,2}");
    let rv = proptest::option::of("[0-9]{0,3}");
    let event = (
        prop_oneof![
            Just("ADDED"),
            Just("MODIFIED"),
            Just("DELETED"),
            Just("BOOKMARK"),
            Just("ERROR"),
            Just("EXPLODED"),
        ],
        name,
        namespace,
        rv,
        any::<bool>(),
    )
        .prop_map(|(kind, name, namespace, rv, object_first)| {
            let mut meta = Vec::new();
            if let Some(n) = name {
                meta.push(format!(r#""name":"{n}""#));
            }
            if let Some(ns) = namespace {
                meta.push(format!(r#""namespace":"{ns}""#));
            }
            if let Some(rv) = rv {
                meta.push(format!(r#""resourceVersion":"{rv}""#));
            }
            let object = if kind == "ERROR" {
                r#"{"kind":"Status","code":410,"reason":"Expired"}"#.to_owned()
            } else {
                format!(r#"{{"metadata":{{{}}}}}"#, meta.join(","))
            };
            if object_first {
                format!(r#"{{"object":{object},"type":"{kind}"}}"#)
            } else {
                format!(r#"{{"type":"{kind}","object":{object}}}"#)
            }
        });
    prop_oneof![
        6 => event.clone(),
        1 => Just(String::new()),
        1 => Just("\r".to_owned()),
        1 => "[ -~]{0,20}",
        1 => (event, 0usize..40).prop_map(|(line, n)| line.chars().take(n).collect()),
    ]
}

/// A watch body, the chunk sizes to cut it at, and the header (line limit, namespace rule). The
/// limit is often set at one line's length, one less or one more, where an off-by-one would show.
fn watch_input() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<bool>(),
        prop_oneof![Just(None), (0usize..8, -1isize..=1).prop_map(Some)],
        any::<u16>(),
        proptest::collection::vec(any::<u8>(), 0..15),
        proptest::collection::vec(watch_line(), 0..8),
        any::<bool>(),
    )
        .prop_map(
            |(namespace, at_line, limit, cuts, lines, trailing_newline)| {
                let max_line = match at_line {
                    Some((i, delta)) if !lines.is_empty() => {
                        (lines[i % lines.len()].len() as isize + delta).clamp(1, 32768) as usize
                    }
                    _ => 1 + usize::from(limit % 32768),
                };
                let [hi, lo] = ((max_line - 1) as u16).to_be_bytes();
                let mut data = vec![hi | if namespace { 0x80 } else { 0 }, lo, cuts.len() as u8];
                data.extend_from_slice(&cuts);
                data.extend_from_slice(lines.join("\n").as_bytes());
                if trailing_newline {
                    data.push(b'\n');
                }
                data
            },
        )
}

/// A list body: items with and without names and namespaces, odd metadata, then maybe cut or
/// with one byte changed.
fn list_body() -> impl Strategy<Value = Vec<u8>> {
    let item = (
        proptest::option::of("[a-z]{0,3}"),
        proptest::option::of("[a-z]{0,3}"),
    )
        .prop_map(|(name, namespace)| {
            let mut meta = Vec::new();
            if let Some(n) = name {
                meta.push(format!(r#""name":"{n}""#));
            }
            if let Some(ns) = namespace {
                meta.push(format!(r#""namespace":"{ns}""#));
            }
            format!(
                r#"{{"metadata":{{{}}},"spec":{{"containers":[]}}}}"#,
                meta.join(",")
            )
        });
    (
        proptest::collection::vec(item, 0..4),
        prop_oneof![
            Just(r#""resourceVersion":"5""#.to_owned()),
            Just(r#""continue":"","remainingItemCount":-1"#.to_owned()),
            Just(r#""resourceVersion":5"#.to_owned()),
            "[ -~]{0,12}".prop_map(|t| format!(r#""continue":{:?}"#, t)),
        ],
        any::<bool>(),
        proptest::option::of((any::<prop::sample::Index>(), any::<u8>())),
        proptest::option::of(any::<prop::sample::Index>()),
    )
        .prop_map(|(items, meta, null_items, flip, cut)| {
            let items = if null_items && items.is_empty() {
                "null".to_owned()
            } else {
                format!("[{}]", items.join(","))
            };
            let mut body = format!(r#"{{"kind":"PodList","metadata":{{{meta}}},"items":{items}}}"#)
                .into_bytes();
            if let Some((at, byte)) = flip {
                let i = at.index(body.len());
                body[i] = byte;
            }
            if let Some(at) = cut {
                body.truncate(at.index(body.len() + 1));
            }
            body
        })
}

/// A label selector: terms of every operator, mostly well formed, sometimes not.
fn label_selector_text() -> impl Strategy<Value = String> {
    let key = "[a-z]{1,3}(\\.[a-z]{1,2}/[a-z]{1,2})?|[A-Z_.-]{0,2}";
    let value = "[a-z0-9]{0,3}|[a-z.-]{1,3}";
    let term = (
        key,
        prop_oneof![
            Just("="),
            Just("=="),
            Just("!="),
            Just(" in "),
            Just(" notin "),
            Just(""),
            Just("!"),
            Just(">"),
            Just("<"),
            Just(" "),
        ],
        proptest::collection::vec(value, 0..3),
    )
        .prop_map(|(key, op, values)| match op {
            " in " | " notin " => format!("{key}{op}({})", values.join(",")),
            "!" => format!("!{key}"),
            "" => key,
            _ => format!("{key}{op}{}", values.first().map_or("", String::as_str)),
        });
    proptest::collection::vec(term, 0..4).prop_map(|t| t.join(","))
}

/// A kubeconfig assembled from real fields, some with bad values, plus free text.
fn kubeconfig_text() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        Just("apiVersion: v1\nkind: Config\n".to_owned()),
        Just("current-context: x\n".to_owned()),
        Just("contexts: [{name: x, context: {cluster: c, user: u, namespace: ns}}]\n".to_owned()),
        Just("clusters: [{name: c, cluster: {server: 'https://10.0.0.1'}}]\n".to_owned()),
        Just("clusters: [{name: c, cluster: {server: 'https://h', certificate-authority-data: '!!'}}]\n".to_owned()),
        Just("clusters: [{name: c, cluster: {server: ':::', proxy-url: 'socks9://x'}}]\n".to_owned()),
        Just("users: [{name: u, user: {token: t}}]\n".to_owned()),
        Just("users: [{name: u, user: {client-certificate-data: bm9wZQ==, client-key-data: bm9wZQ==}}]\n".to_owned()),
        Just("users: [{name: u, user: {exec: {command: x, apiVersion: v9}}}]\n".to_owned()),
        Just("users: [{name: u, user: {auth-provider: {name: gcp}}}]\n".to_owned()),
        Just("users: null\nclusters: ~\n".to_owned()),
        Just("a: &a [1,2]\nb: [*a, *a, *a]\n".to_owned()),
        "[ -~\n]{0,20}",
    ];
    proptest::collection::vec(fragment, 0..6).prop_map(|f| f.concat())
}

/// A continue token: one the simulated server makes, a real-looking one cut or changed, or
/// anything.
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        (-2i64..5, "[a-z/]{0,6}", "[a-z/.]{0,6}")
            .prop_map(|(rv, ns, name)| { kinformer_sim::encode_continue_token(rv, &ns, &name) }),
        (any::<prop::sample::Index>(), "[ -~]{0,3}").prop_map(|(at, junk)| {
            let t = kinformer_sim::encode_continue_token(9, "ns", "a");
            let cut = at.index(t.len() + 1);
            format!("{}{junk}", &t[..cut])
        }),
        ".{0,24}",
        "[&=%+ #?a-z0-9]{0,16}",
    ]
}

/// An error answer: code, `Retry-After` and a body that is a `Status` (in pieces) or not.
fn status_input() -> impl Strategy<Value = Vec<u8>> {
    let body = prop_oneof![
        (0u16..700, "[A-Za-z]{0,8}", "[ -~]{0,30}", any::<bool>(), 0u32..100).prop_map(
            |(code, reason, message, too_large, retry)| {
                let details = if too_large {
                    format!(r#","details":{{"causes":[{{"reason":"ResourceVersionTooLarge"}}],"retryAfterSeconds":{retry}}}"#)
                } else {
                    String::new()
                };
                format!(r#"{{"kind":"Status","code":{code},"reason":"{reason}","message":{message:?}{details}}}"#)
            }
        ),
        Just("<html><body>bad gateway</body></html>".to_owned()),
        Just(r#"{"code":-1}"#.to_owned()),
        Just(r#"{"code":70000}"#.to_owned()),
        ".{0,600}",
    ];
    (
        prop_oneof![
            Just(410u16),
            Just(429),
            Just(500),
            Just(503),
            Just(504),
            0u16..1000
        ],
        "[0-9 a-z]{0,6}",
        body,
    )
        .prop_map(|(code, retry, body)| {
            let mut data = code.to_be_bytes().to_vec();
            data.push(retry.len() as u8);
            data.extend_from_slice(retry.as_bytes());
            data.extend_from_slice(body.as_bytes());
            data
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn watch_stream_any_bytes_any_chunks(data in watch_input()) {
        properties::watch_stream(&data);
    }

    #[test]
    fn watch_stream_raw_bytes(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        properties::watch_stream(&data);
    }

    #[test]
    fn list_bodies(body in list_body()) {
        properties::list(&body);
    }

    #[test]
    fn label_selectors(input in label_selector_text()) {
        properties::label_selector(input.as_bytes());
    }

    #[test]
    fn label_selectors_any_text(input in "[a-z0-9A-Z!=(),<>_ .\\-/]{0,30}") {
        properties::label_selector(input.as_bytes());
    }

    #[test]
    fn field_selectors(input in "[a-z.=!,\\\\ ]{0,30}|.{0,20}") {
        properties::field_selector(input.as_bytes());
    }

    #[test]
    fn kubeconfigs(text in kubeconfig_text()) {
        properties::kubeconfig(text.as_bytes());
    }

    #[test]
    fn continue_tokens(token in token()) {
        properties::continue_token(token.as_bytes());
    }

    #[test]
    fn error_bodies(data in status_input()) {
        properties::status_body(&data);
    }
}

/// The fuzz seeds pass the same checks (each file as its target reads it).
#[test]
fn the_fuzz_seeds_pass() {
    let seeds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    type Check = fn(&[u8]);
    let checks: [(&str, Check); 7] = [
        ("watch_stream", properties::watch_stream),
        ("list", properties::list),
        ("label_selector", properties::label_selector),
        ("field_selector", properties::field_selector),
        ("kubeconfig", properties::kubeconfig),
        ("continue_token", properties::continue_token),
        ("status_body", properties::status_body),
    ];
    let mut checked = 0;
    for (target, check) in checks {
        for entry in std::fs::read_dir(seeds.join(target)).unwrap() {
            check(&std::fs::read(entry.unwrap().path()).unwrap());
            checked += 1;
        }
    }
    assert!(checked >= 14, "{checked}");
}
