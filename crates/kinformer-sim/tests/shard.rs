//! KEP-5866's sharded list and watch over HTTP: `shardSelector` filters lists (every page),
//! watches and streaming lists and is echoed in `metadata.shardInfo` where the server honours
//! it (1.36 and later, with the `ShardedListAndWatch` gate on), is refused with 422 when
//! malformed, and is ignored, filtering nothing, everywhere else.

use std::collections::BTreeSet;
use std::time::Duration;

use kinformer_core::{ApiResource, Scope};
use kinformer_sim::{KubeVersion, SimConfig, SimServer, shard_hash};
use serde_json::{Value, json};

mod common;
use common::{Lines, WAIT, ev, pair};

/// The two halves of the hash space.
const LOW: (&str, &str) = ("0x0", "0x8000000000000000");
const HIGH: (&str, &str) = ("0x8000000000000000", "0x10000000000000000");

/// Namespaces whose hashes fall in both halves (`ns-*` and `shop` low, the others high).
const NAMESPACES: [&str; 6] = ["ns-0", "ns-1", "shop", "a", "b", "default"];

fn pods() -> ApiResource {
    ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced)
}

fn configmaps() -> ApiResource {
    ApiResource::new("", "v1", "ConfigMap", "configmaps", Scope::Namespaced)
}

fn nodes() -> ApiResource {
    ApiResource::new("", "v1", "Node", "nodes", Scope::Cluster)
}

/// A server that honours shard selectors.
fn sharded() -> SimConfig {
    SimConfig {
        version: KubeVersion::V1_36,
        sharded_list_and_watch: true,
        ..SimConfig::default()
    }
}

async fn start(config: SimConfig) -> SimServer {
    let sim = SimServer::start(config).await.unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    sim
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

/// `shardRange(object.metadata.<field>, '<start>', '<end>')`.
fn range(field: &str, (start, end): (&str, &str)) -> String {
    format!("shardRange(object.metadata.{field}, '{start}', '{end}')")
}

/// Percent-encodes a query parameter's value.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

async fn get_json(c: &reqwest::Client, url: &str) -> (u16, Value) {
    get_json_as(c, url, "application/json").await
}

async fn get_json_as(c: &reqwest::Client, url: &str, accept: &str) -> (u16, Value) {
    let r = c.get(url).header("accept", accept).send().await.unwrap();
    let code = r.status().as_u16();
    let body = r.bytes().await.unwrap();
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// A list that must succeed.
async fn list(c: &reqwest::Client, url: &str) -> Value {
    let (code, v) = get_json(c, url).await;
    assert_eq!(code, 200, "{url}: {v}");
    v
}

fn names(list: &Value) -> BTreeSet<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The hash of the field a selector names, for one listed object.
fn field_hash(o: &Value, field: &str) -> u64 {
    shard_hash(o["metadata"][field].as_str().unwrap_or_default())
}

/// The names of the listed objects whose `field` hashes into `[start, end)`.
fn in_range(list: &Value, field: &str, (start, end): (&str, &str)) -> BTreeSet<String> {
    let parse = |h: &str| u128::from_str_radix(h.trim_start_matches("0x"), 16).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| (parse(start)..parse(end)).contains(&u128::from(field_hash(o, field))))
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Pods spread over [`NAMESPACES`], `per` in each.
fn seed(sim: &SimServer, per: usize) {
    for ns in NAMESPACES {
        for i in 0..per {
            sim.store()
                .create(
                    &pods(),
                    json!({"metadata": {"name": format!("{ns}-p{i}"), "namespace": ns}}),
                )
                .unwrap();
        }
    }
}

#[tokio::test]
async fn the_hash_is_fnv1a_64_of_the_field_s_bytes() {
    // The FNV-1a 64-bit reference vectors.
    assert_eq!(shard_hash(""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(shard_hash("a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(shard_hash("foobar"), 0x8594_4171_f739_67e8);

    // Over HTTP: ranges one hash wide select exactly the namespaces with those hashes.
    let sim = start(sharded()).await;
    seed(&sim, 1);
    sim.store()
        .create(
            &pods(),
            json!({"metadata": {"name": "x", "namespace": "foobar"}}),
        )
        .unwrap();
    for n in ["n1", "n2"] {
        sim.store()
            .create(&nodes(), json!({"metadata": {"name": n}}))
            .unwrap();
    }
    let c = client();
    let one = |hash: &str, next: &str| range("namespace", (hash, next));
    let selector = format!(
        "{} || {}",
        one("0xaf63dc4c8601ec8c", "0xaf63dc4c8601ec8d"),
        one("0x85944171f73967e8", "0x85944171f73967e9"),
    );
    let l = list(
        &c,
        &format!("{}/api/v1/pods?shardSelector={}", sim.url(), enc(&selector)),
    )
    .await;
    assert_eq!(names(&l), BTreeSet::from(["a-p0".into(), "x".into()]));
    // Cluster-scoped objects hash the empty namespace: the offset basis.
    let nodes_url = |s: &str| format!("{}/api/v1/nodes?shardSelector={}", sim.url(), enc(s));
    let basis = one("0xcbf29ce484222325", "0xcbf29ce484222326");
    assert_eq!(names(&list(&c, &nodes_url(&basis)).await).len(), 2);
    let beside = one("0xcbf29ce484222326", "0xcbf29ce484222327");
    assert!(names(&list(&c, &nodes_url(&beside)).await).is_empty());
}

#[tokio::test]
async fn two_halves_list_disjoint_shards_that_cover_the_list() {
    let sim = start(sharded()).await;
    seed(&sim, 4);
    let c = client();
    let base = format!("{}/api/v1/pods", sim.url());
    let all = list(&c, &base).await;
    assert!(all["metadata"].get("shardInfo").is_none(), "{all}");
    let everything = names(&all);
    assert_eq!(everything.len(), 24);
    for field in ["uid", "namespace"] {
        let mut union = BTreeSet::new();
        for half in [LOW, HIGH] {
            let selector = range(field, half);
            let l = list(&c, &format!("{base}?shardSelector={}", enc(&selector))).await;
            assert_eq!(l["metadata"]["shardInfo"], json!({"selector": selector}));
            let got = names(&l);
            assert_eq!(got, in_range(&all, field, half), "{selector}");
            assert!(
                !got.is_empty(),
                "{selector} selects nothing: pick other names"
            );
            assert!(union.is_disjoint(&got), "{field}: the halves overlap");
            union.extend(got);
        }
        assert_eq!(union, everything, "{field}: the halves miss objects");
        // Both halves in one selector are the whole space.
        let both = format!("{} || {}", range(field, LOW), range(field, HIGH));
        let l = list(&c, &format!("{base}?shardSelector={}", enc(&both))).await;
        assert_eq!(names(&l), everything);
        assert_eq!(l["metadata"]["shardInfo"]["selector"], both.as_str());
    }

    // A namespaced list and the metadata-only form are filtered and echo the selector too.
    let selector = range("uid", LOW);
    let ns = format!(
        "{}/api/v1/namespaces/a/pods?shardSelector={}",
        sim.url(),
        enc(&selector)
    );
    let in_a = list(&c, &format!("{}/api/v1/namespaces/a/pods", sim.url())).await;
    let l = list(&c, &ns).await;
    assert_eq!(names(&l), in_range(&in_a, "uid", LOW));
    assert_eq!(l["metadata"]["shardInfo"]["selector"], selector.as_str());
    let accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    let (code, meta) = get_json_as(&c, &ns, accept).await;
    assert_eq!(code, 200);
    assert_eq!(meta["kind"], "PartialObjectMetadataList");
    assert_eq!(names(&meta), names(&l));
    assert_eq!(meta["metadata"]["shardInfo"]["selector"], selector.as_str());
    let (code, table) = get_json_as(&c, &ns, "application/json;as=Table;g=meta.k8s.io;v=v1").await;
    assert_eq!((code, table["kind"].as_str()), (200, Some("Table")));
    assert_eq!(table["rows"].as_array().unwrap().len(), names(&l).len());
    assert_eq!(
        table["metadata"]["shardInfo"]["selector"],
        selector.as_str()
    );
}

#[tokio::test]
async fn pages_under_a_selector_hold_each_selected_object_once() {
    let sim = start(sharded()).await;
    seed(&sim, 3);
    let c = client();
    let base = format!("{}/api/v1/pods", sim.url());
    let mut late = 0;
    for (field, half) in [("uid", LOW), ("uid", HIGH), ("namespace", HIGH)] {
        let all = list(&c, &base).await;
        let selector = range(field, half);
        let want = in_range(&all, field, half);
        let first = format!("{base}?limit=1&shardSelector={}", enc(&selector));
        let mut url = first.clone();
        let mut seen = Vec::new();
        let mut rv = None;
        for _ in 0..=want.len() {
            let page = list(&c, &url).await;
            assert_eq!(page["metadata"]["shardInfo"]["selector"], selector.as_str());
            // A filtered list cannot count what it did not return, as with label selectors.
            assert!(
                page["metadata"].get("remainingItemCount").is_none(),
                "{page}"
            );
            let page_rv = page["metadata"]["resourceVersion"].clone();
            assert_eq!(*rv.get_or_insert(page_rv.clone()), page_rv);
            seen.extend(names(&page));
            match page["metadata"]["continue"].as_str() {
                Some(token) => url = format!("{first}&continue={token}"),
                None => break,
            }
            // Writes between pages change nothing: every page is cut from one snapshot.
            sim.store()
                .create(
                    &pods(),
                    json!({"metadata": {"name": format!("late-{late}"), "namespace": "a"}}),
                )
                .unwrap();
            late += 1;
        }
        let unique: BTreeSet<String> = seen.iter().cloned().collect();
        assert_eq!(unique.len(), seen.len(), "{selector}: repeated: {seen:?}");
        assert_eq!(unique, want, "{selector}");
    }
}

#[tokio::test]
async fn a_watch_under_a_selector_is_sent_its_range_s_events_and_bookmarks() {
    let sim = start(SimConfig {
        bookmark_interval: Duration::from_millis(20),
        ..sharded()
    })
    .await;
    let c = client();
    let store = sim.store();
    let from = store.resource_version();
    let selector = range("namespace", LOW);
    let low: Vec<&str> = NAMESPACES
        .into_iter()
        .filter(|ns| shard_hash(ns) < 1 << 63)
        .collect();
    assert!(!low.is_empty() && low.len() < NAMESPACES.len());
    let mut w = Lines::open(
        &c,
        &format!(
            "{}/api/v1/pods?watch=true&allowWatchBookmarks=true&resourceVersion={from}&shardSelector={}",
            sim.url(),
            enc(&selector)
        ),
    )
    .await;
    // A watch that selects nothing at all.
    let mut none = Lines::open(
        &c,
        &format!(
            "{}/api/v1/pods?watch=true&allowWatchBookmarks=true&resourceVersion={from}&shardSelector={}",
            sim.url(),
            enc(&range("namespace", ("0x0", "0x1")))
        ),
    )
    .await;
    let mut want = Vec::new();
    for ns in NAMESPACES {
        let name = format!("{ns}-w");
        store
            .create(
                &pods(),
                json!({"metadata": {"name": name, "namespace": ns}}),
            )
            .unwrap();
        store
            .patch(
                &pods(),
                Some(ns),
                &name,
                json!({"metadata": {"labels": {"v": "2"}}}),
            )
            .unwrap();
        store.delete(&pods(), Some(ns), &name).unwrap();
        if low.contains(&ns) {
            want.extend([
                pair("ADDED", &name),
                pair("MODIFIED", &name),
                pair("DELETED", &name),
            ]);
        }
    }
    // The last event of the range ends the read: anything outside it sent before would show.
    store
        .create(
            &pods(),
            json!({"metadata": {"name": "last", "namespace": low[0]}}),
        )
        .unwrap();
    want.push(pair("ADDED", "last"));
    assert_eq!(w.until("ADDED", "last").await, want);

    // Both watches have been handed every event; the empty one got none, only bookmarks, up
    // to the last write.
    let rv = store.resource_version().to_string();
    sim.wait_until_watches_reach(store.resource_version(), WAIT)
        .await
        .unwrap();
    for _ in 0..10_000 {
        let b = none.event().await;
        assert_eq!(b["type"], "BOOKMARK", "{b}");
        if b["object"]["metadata"]["resourceVersion"] == rv.as_str() {
            return;
        }
    }
    panic!("no bookmark at {rv}");
}

#[tokio::test]
async fn a_streaming_list_under_a_selector_sends_its_range_only() {
    let sim = start(sharded()).await;
    seed(&sim, 3);
    let c = client();
    let store = sim.store();
    let all = list(&c, &format!("{}/api/v1/pods", sim.url())).await;
    let selector = range("uid", HIGH);
    let want = in_range(&all, "uid", HIGH);
    let mut w = Lines::open(
        &c,
        &format!(
            "{}/api/v1/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&shardSelector={}",
            sim.url(),
            enc(&selector)
        ),
    )
    .await;
    let mut initial = BTreeSet::new();
    // Bounded: one event per object, then the bookmark.
    for _ in 0..=all["items"].as_array().unwrap().len() {
        let e = w.event().await;
        if e["type"] == "BOOKMARK" {
            assert_eq!(
                e["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
                "true"
            );
            break;
        }
        assert_eq!(e["type"], "ADDED");
        assert!(initial.insert(ev(&e).1));
    }
    assert_eq!(initial, want);

    // Live events after the initial ones: only the range's.
    let mut sent = Vec::new();
    for i in 0..8 {
        let p = store
            .create(
                &pods(),
                json!({"metadata": {"name": format!("live-{i}"), "namespace": "shop"}}),
            )
            .unwrap();
        if field_hash(&p, "uid") >= 1 << 63 {
            sent.push(format!("live-{i}"));
        }
    }
    let last = sent.last().expect("no live pod in the upper half").clone();
    store.delete(&pods(), Some("shop"), &last).unwrap();
    let mut want: Vec<_> = sent.iter().map(|n| pair("ADDED", n)).collect();
    want.push(pair("DELETED", &last));
    assert_eq!(w.until("DELETED", &last).await, want);
}

#[tokio::test]
async fn a_delete_collection_under_a_selector_deletes_its_range_only() {
    let sim = start(sharded()).await;
    for ns in NAMESPACES {
        sim.store()
            .create(
                &configmaps(),
                json!({"metadata": {"name": "cm", "namespace": ns}}),
            )
            .unwrap();
    }
    let c = client();
    let before = list(&c, &format!("{}/api/v1/configmaps", sim.url())).await;
    let selector = range("namespace", LOW);
    let r = c
        .delete(format!(
            "{}/api/v1/configmaps?shardSelector={}",
            sim.url(),
            enc(&selector)
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let after = list(&c, &format!("{}/api/v1/configmaps", sim.url())).await;
    let namespaces = |l: &Value| -> BTreeSet<String> {
        l["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["metadata"]["namespace"].as_str().unwrap().to_owned())
            .collect()
    };
    let kept: BTreeSet<String> = namespaces(&before)
        .into_iter()
        .filter(|ns| shard_hash(ns) >= 1 << 63)
        .collect();
    assert_eq!(namespaces(&after), kept);
}

#[tokio::test]
async fn servers_without_the_feature_ignore_the_selector() {
    for (version, gate) in [
        (KubeVersion::V1_36, false),
        (KubeVersion::V1_35, true),
        (KubeVersion::V1_34, true),
        (KubeVersion::V1_32, true),
    ] {
        let sim = start(SimConfig {
            version,
            sharded_list_and_watch: gate,
            ..SimConfig::default()
        })
        .await;
        seed(&sim, 2);
        let c = client();
        let base = format!("{}/api/v1/pods", sim.url());
        let everything = names(&list(&c, &base).await);
        let what = format!("{version:?}, gate {gate}");
        for selector in [
            range("uid", LOW),
            range("namespace", ("0x0", "0x1")),
            "not a selector".to_owned(),
        ] {
            let q = format!("shardSelector={}", enc(&selector));
            let l = list(&c, &format!("{base}?{q}")).await;
            assert_eq!(names(&l), everything, "{what}: {selector}");
            assert!(l["metadata"].get("shardInfo").is_none(), "{what}: {l}");
            // Paged, the pages hold everything, and count what is left, as with no selector.
            let page = list(&c, &format!("{base}?limit=1&{q}")).await;
            assert!(page["metadata"].get("shardInfo").is_none(), "{what}");
            assert_eq!(
                page["metadata"]["remainingItemCount"],
                everything.len() - 1,
                "{what}"
            );
            // A watch from the start is sent every object.
            let mut w = Lines::open(&c, &format!("{base}?watch=true&{q}")).await;
            let mut sent = BTreeSet::new();
            for _ in 0..everything.len() {
                sent.insert(ev(&w.event().await).1);
            }
            assert_eq!(sent, everything, "{what}: {selector}");
        }
    }
}

#[tokio::test]
async fn invalid_selectors_answer_422_on_lists_and_watches() {
    let sim = start(sharded()).await;
    let c = client();
    let uid = "object.metadata.uid";
    let ok = range("uid", LOW);
    let cases = [
        ("   ", "no shardRange() term"),
        (&format!("{ok} ||"), "must follow ||"),
        (&format!("|| {ok}"), "must come before ||"),
        (&format!("{ok} || || {ok}"), "must follow ||"),
        (&format!("{ok} && {ok}"), "unexpected '&'"),
        (&format!("{ok} {ok}"), "expected || or the end"),
        (
            &format!("hashRange({uid}, '0x0', '0x1')"),
            "unknown function",
        ),
        (
            "shardRange(metadata.uid, '0x0', '0x1')",
            "unsupported field path",
        ),
        (
            "shardRange(object.metadata.name, '0x0', '0x1')",
            "unsupported field path",
        ),
        (
            &format!("{ok} || {}", range("namespace", HIGH)),
            "must hash the same field",
        ),
        (
            &format!("shardRange({uid}, \"0x0\", \"0x1\")"),
            "single-quoted",
        ),
        (&format!("shardRange({uid}, 0x0, '0x1')"), "single-quoted"),
        (
            &format!("shardRange({uid}, '0', '0x1')"),
            "must start with 0x",
        ),
        (
            &format!("shardRange({uid}, '0x', '0x1')"),
            "1 to 17 hex digits",
        ),
        (
            &format!("shardRange({uid}, '0x0', '0xfg')"),
            "1 to 17 hex digits",
        ),
        (
            &format!("shardRange({uid}, '0x0', '0x000000000000000001')"),
            "1 to 17 hex digits",
        ),
        (
            &format!("shardRange({uid}, '0x0', '0x10000000000000001')"),
            "beyond the end of the hash space",
        ),
        (
            &format!("shardRange({uid}, '0x8', '0x8')"),
            "less than hexEnd",
        ),
        (
            &format!("shardRange({uid}, '0x9', '0x8')"),
            "less than hexEnd",
        ),
        (
            &format!("shardRange({uid}, '0x0', '0x1', '0x2')"),
            "3 arguments",
        ),
        (&format!("shardRange({uid}, '0x0')"), "after hexStart"),
    ];
    for (selector, why) in cases {
        let q = format!("shardSelector={}", enc(selector));
        for url in [
            format!("{}/api/v1/pods?{q}", sim.url()),
            format!("{}/api/v1/namespaces/a/pods?limit=1&{q}", sim.url()),
            format!("{}/api/v1/pods?watch=true&{q}", sim.url()),
            format!(
                "{}/api/v1/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&{q}",
                sim.url()
            ),
        ] {
            let (code, s) = get_json(&c, &url).await;
            assert_eq!(
                (code, s["reason"].as_str()),
                (422, Some("Invalid")),
                "{url}"
            );
            assert_eq!(s["kind"], "Status");
            assert_eq!(
                s["details"],
                json!({
                    "group": "meta.k8s.io",
                    "kind": "ListOptions",
                    "causes": [{
                        "reason": "FieldValueInvalid",
                        "message": s["details"]["causes"][0]["message"],
                        "field": "shardSelector",
                    }],
                }),
                "{url}"
            );
            let message = s["message"].as_str().unwrap();
            let prefix = format!(
                "ListOptions.meta.k8s.io \"\" is invalid: shardSelector: Invalid value: {selector:?}: "
            );
            assert!(message.starts_with(&prefix), "{url}: {message}");
            assert!(message.contains(why), "{selector:?}: {message}");
            assert_eq!(
                s["details"]["causes"][0]["message"].as_str(),
                message.strip_prefix("ListOptions.meta.k8s.io \"\" is invalid: shardSelector: "),
            );
        }
    }
    // A delete-collection validates it too, and deletes nothing.
    sim.store()
        .create(
            &configmaps(),
            json!({"metadata": {"name": "cm", "namespace": "a"}}),
        )
        .unwrap();
    let r = c
        .delete(format!(
            "{}/api/v1/configmaps?shardSelector={}",
            sim.url(),
            enc("shardRange(metadata.uid, '0x0', '0x1')")
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let s: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    assert_eq!(s["details"]["causes"][0]["field"], "shardSelector");
    assert_eq!(sim.store().list(&configmaps(), None).len(), 1);
    // An empty parameter is no selector at all.
    let l = list(&c, &format!("{}/api/v1/pods?shardSelector=", sim.url())).await;
    assert!(l["metadata"].get("shardInfo").is_none());
}
