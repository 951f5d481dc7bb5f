//! `--metrics-addr`: the informer's metrics scraped over HTTP in Prometheus text format while
//! `watch` and `stats` run against the embedded simulated cluster; and a bad address refused.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use support::{BOUND, KillOnDrop, Lines, bare, drain, run, signal, wait_bounded};

/// The body of `GET /metrics` at `addr`, over plain HTTP/1.1.
fn scrape(addr: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no header end: {response:?}")))?;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain"),
        "{head}"
    );
    Ok(body.to_owned())
}

/// The value of the sample `name{labels}` in a Prometheus text body, labels in the order the
/// exporter writes them.
fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// Scrapes until `ready` holds for the body, within the bound.
fn scrape_until(addr: &str, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + BOUND;
    loop {
        if let Ok(body) = scrape(addr)
            && ready(&body)
        {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "no such scrape of {addr} within {BOUND:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The address from the `serving metrics at http://ADDR/metrics` line of stderr.
fn served_at(stderr: &Lines) -> String {
    for _ in 0..10 {
        let line = stderr.next();
        if let Some(rest) = line.strip_prefix("kinformer: serving metrics at http://") {
            return rest
                .strip_suffix("/metrics")
                .expect("a /metrics URL")
                .to_owned();
        }
    }
    panic!("no `serving metrics at` line on stderr");
}

#[test]
fn watch_serves_every_layer_s_metrics_in_prometheus_text() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = bare(home.path());
    cmd.args([
        "watch",
        "pods",
        "-A",
        "--sim",
        "--sim-pods",
        "5",
        "--sim-churn",
        "0",
    ])
    .args(["--metrics-addr", "127.0.0.1:0"])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = KillOnDrop(cmd.spawn().unwrap());
    let _out = drain(child.0.stdout.take().unwrap());
    let err = Lines::new(child.0.stderr.take().unwrap());
    let addr = served_at(&err);
    assert!(
        addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"),
        "{addr}"
    );

    let pods = r#"informer="pods",resource="pods""#;
    let cached = format!("kinformer_informer_cache_objects{{{pods}}}");
    let body = scrape_until(&addr, |b| sample(b, &cached) == Some(5.0));
    let lists = format!(r#"kinformer_reflector_lists_total{{{pods},outcome="success"}}"#);
    assert_eq!(sample(&body, &lists), Some(1.0), "{body}");
    for name in [
        "kinformer_reflector_watches_total",
        "kinformer_reflector_relists_total",
        "kinformer_reflector_events_total",
        "kinformer_informer_cache_resource_version",
        "kinformer_informer_queue_depth",
        "kinformer_informer_queue_oldest_age_seconds",
        "kinformer_informer_time_to_first_sync_seconds",
        "kinformer_informer_handler_backlog",
        "kinformer_client_bytes_read_total",
        "kinformer_client_decode_seconds",
    ] {
        assert!(
            body.lines().any(|l| l.starts_with(name)),
            "no {name} in\n{body}"
        );
    }
    let rv = format!("kinformer_informer_cache_resource_version{{{pods}}}");
    assert!(sample(&body, &rv).is_some_and(|v| v > 0.0), "{body}");

    signal(&child.0, "INT");
    assert_eq!(wait_bounded(&mut child.0).code(), Some(130));
}

#[test]
fn stats_and_the_endpoint_read_the_same_metrics() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = bare(home.path());
    cmd.args(["--metrics-addr", "127.0.0.1:0"])
        .args([
            "stats",
            "pods",
            "-A",
            "--sim",
            "--sim-pods",
            "4",
            "--sim-churn",
            "0",
        ])
        .args(["--interval", "100ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = KillOnDrop(cmd.spawn().unwrap());
    let out = Lines::new(child.0.stdout.take().unwrap());
    let err = Lines::new(child.0.stderr.take().unwrap());
    let addr = served_at(&err);
    let line = loop {
        let line = out.next();
        if line.contains(" cache=4 ") && !line.contains(" rv=- ") {
            break line;
        }
    };
    assert!(line.ends_with(" informer=pods"), "{line}");
    let body = scrape(&addr).unwrap();
    assert_eq!(
        sample(
            &body,
            r#"kinformer_informer_cache_objects{informer="pods",resource="pods"}"#
        ),
        Some(4.0),
        "{body}"
    );
    signal(&child.0, "INT");
    assert_eq!(wait_bounded(&mut child.0).code(), Some(130));
}

#[test]
fn an_address_that_cannot_be_listened_on_is_refused() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = bare(home.path());
    cmd.args([
        "get",
        "pods",
        "--sim",
        "--sim-pods",
        "1",
        "--metrics-addr",
        &addr,
    ]);
    let (status, _, err) = run(cmd);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("--metrics-addr"), "{err}");
    let (status, _, err) = run({
        let mut cmd = bare(home.path());
        cmd.args(["get", "pods", "--metrics-addr", "not-an-address"]);
        cmd
    });
    assert_eq!(status.code(), Some(2), "{err}");
}
