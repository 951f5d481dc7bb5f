//! Discovery as `kinformer get` uses it, against a server written here on 127.0.0.1 that has no
//! aggregated discovery and one group version that never answers: the others still resolve,
//! the failed one is reported in kubectl's words, and the result is cached on disk where
//! kubectl caches it.

mod support;

use kinformer_test_support::read_request_head;
use std::sync::Arc;

use parking_lot::Mutex;
use support::{bare, run};
use tokio::io::AsyncWriteExt;

/// Serves plain discovery (`example.com/v1` with widgets, `hung.example.com/v1` never
/// answered), an empty widget list, and watches that never send anything. Records each
/// request's path.
async fn server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                loop {
                    let Some(head) = read_request_head(&mut conn).await else {
                        return;
                    };
                    let target = head.target().to_owned();
                    let path = head.path().to_owned();
                    log.lock().push(path.clone());
                    let body = match path.as_str() {
                        "/api" => r#"{"kind":"APIVersions","versions":["v1"]}"#,
                        "/apis" => {
                            r#"{"kind":"APIGroupList","groups":[
                            {"name":"example.com","versions":[{"groupVersion":"example.com/v1","version":"v1"}]},
                            {"name":"hung.example.com","versions":[{"groupVersion":"hung.example.com/v1","version":"v1"}]}]}"#
                        }
                        "/api/v1" => {
                            r#"{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["list","watch"]}]}"#
                        }
                        "/apis/example.com/v1" => {
                            r#"{"kind":"APIResourceList","groupVersion":"example.com/v1","resources":[{"name":"widgets","singularName":"widget","namespaced":true,"kind":"Widget","verbs":["list","watch"],"shortNames":["wd"]}]}"#
                        }
                        p if p.ends_with("/widgets") && !target.contains("watch=") => {
                            r#"{"kind":"WidgetList","apiVersion":"example.com/v1","metadata":{"resourceVersion":"1"},"items":[]}"#
                        }
                        _ => {
                            // The hung group version, and watches: never answered.
                            std::future::pending::<()>().await;
                            return;
                        }
                    };
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if conn.write_all(response.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_group_fails_alone_and_discovery_is_cached() {
    let (port, seen) = server().await;
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    let get = |name: &'static str| {
        let mut cmd = bare(home.path());
        cmd.args(["get", name, "--request-timeout", "1s", "--kubeconfig"])
            .arg(&path);
        tokio::task::spawn_blocking(move || run(cmd))
    };
    let (status, out, err) = get("widgets").await.unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(out.is_empty(), "{out}");
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].starts_with("kinformer: couldn't get resource list for hung.example.com/v1: ")
            && lines[0].contains("timed out after 1s"),
        "{err}"
    );
    assert_eq!(
        lines[1..],
        ["No resources found in default namespace."],
        "{err}"
    );

    // kubectl's cache, under $HOME/.kube/cache.
    let dir = home
        .path()
        .join(".kube/cache/discovery")
        .join(format!("127.0.0.1_{port}"));
    for file in [
        "servergroups.json",
        "v1/serverresources.json",
        "example.com/v1/serverresources.json",
    ] {
        assert!(dir.join(file).is_file(), "{file}");
    }
    // Fresh: no /api or /apis, only the group version that failed is asked for again.
    seen.lock().clear();
    let (status, _, err) = get("wd").await.unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    let asked: Vec<String> = seen
        .lock()
        .iter()
        .filter(|p| !p.ends_with("/widgets"))
        .cloned()
        .collect();
    assert_eq!(asked, ["/apis/hung.example.com/v1"]);
    // A name the cache does not know is looked up on the server again before it is refused.
    seen.lock().clear();
    let (status, _, err) = get("gadgets").await.unwrap();
    assert_eq!(status.code(), Some(6), "{err}");
    assert!(
        err.ends_with("error: the server doesn't have a resource type \"gadgets\"\n"),
        "{err}"
    );
    assert!(seen.lock().contains(&"/apis".to_owned()));
}
