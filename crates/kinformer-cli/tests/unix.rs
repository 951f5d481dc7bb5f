//! The `kinformer` binary as a Unix tool, and `kinformer sim`: help and usage errors from clap,
//! exit codes, a closed stdout, colour only on a terminal, non-UTF-8 and huge arguments, and the
//! simulated server's kubeconfig safety, errors and signals. Every test runs the built binary.

mod support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;

use support::{BOUND, KillOnDrop, Lines, bare, drain, run, signal, wait_bounded};

#[test]
fn help_and_version_come_from_clap() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = bare(home.path());
    cmd.arg("--help");
    let (status, out, _) = run(cmd);
    assert!(status.success());
    assert!(out.contains("Usage: kinformer <COMMAND>"), "{out}");
    for sub in ["watch", "get", "sim", "completions"] {
        assert!(out.contains(sub), "{sub}: {out}");
    }

    let mut cmd = bare(home.path());
    cmd.args(["sim", "--help"]);
    let (status, out, _) = run(cmd);
    assert!(status.success());
    for flag in [
        "--port",
        "--pods",
        "--churn",
        "--seed",
        "--tls",
        "--token",
        "--kubeconfig",
        "--kube-version",
        "--admin",
    ] {
        assert!(out.contains(flag), "{flag}: {out}");
    }

    let mut cmd = bare(home.path());
    cmd.arg("--version");
    let (status, out, _) = run(cmd);
    assert!(status.success());
    assert_eq!(
        out.trim(),
        format!("kinformer {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn usage_errors_print_the_message_and_a_help_hint_only() {
    let home = tempfile::tempdir().unwrap();
    for args in [
        &["watch", "pods,,nodes"][..],
        &["watch", "pods", "--colour"],
        &["get", "pods", "--max-events", "ten"],
        &["frob"],
    ] {
        let mut cmd = bare(home.path());
        cmd.args(args);
        let (status, out, err) = run(cmd);
        assert_eq!(status.code(), Some(2), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(err.contains("--help"), "{args:?}: {err}");
        assert!(!err.contains("Usage:"), "{args:?}: {err}");
        // The message, perhaps a tip, and the hint.
        assert!(err.lines().count() <= 5, "{args:?}: {err}");
    }
}

#[test]
fn a_huge_argument_is_cut_short_in_the_error() {
    let home = tempfile::tempdir().unwrap();
    // Linux caps one argument at 128 KiB.
    let huge = "w".repeat(120 * 1024);
    // A usage error (a bad output format), and a resource type the server does not have (6).
    for (args, code) in [
        (&["get", "pods", "-o", &huge][..], 2),
        (&["get", &huge, "--sim", "--sim-pods", "0"][..], 6),
    ] {
        let mut cmd = bare(home.path());
        cmd.args(args);
        let (status, _, err) = run(cmd);
        assert_eq!(status.code(), Some(code), "{err}");
        assert!(err.len() < 1_000, "{} bytes of error", err.len());
        assert!(err.contains('…'), "{err}");
        if code == 2 {
            assert!(err.contains("--help"), "{err}");
        }
    }
}

#[cfg(unix)]
#[test]
fn non_utf8_arguments_are_errors_not_panics() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    let home = tempfile::tempdir().unwrap();
    let bad = OsStr::from_bytes(b"sh\xffop");
    let mut cmd = bare(home.path());
    cmd.args(["get", "pods", "-n"]).arg(bad);
    let (status, _, err) = run(cmd);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("invalid UTF-8"), "{err}");

    // A path need not be UTF-8: this one is simply missing.
    let path = home.path().join(OsStr::from_bytes(b"k\xffubeconfig"));
    let mut cmd = bare(home.path());
    cmd.args(["get", "pods", "--kubeconfig"]).arg(&path);
    let (status, out, err) = run(cmd);
    // Exit 5: the kubeconfig named is missing.
    assert_eq!(status.code(), Some(5), "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("ubeconfig"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// Runs `kinformer` with stdout piped, reads its first line, then closes the pipe.
fn first_line_then_close(
    mut cmd: std::process::Command,
) -> (std::process::ExitStatus, String, String) {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let stdout = child.0.stdout.take().unwrap();
    let err = drain(child.0.stderr.take().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
        // The reader, and with it the pipe, is dropped here.
    });
    let line = rx.recv_timeout(BOUND).expect("a first line");
    let status = wait_bounded(&mut child.0);
    (status, line, err.join().unwrap())
}

#[test]
fn a_closed_stdout_ends_get_quietly_with_exit_0() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = bare(home.path());
    // Far more output than a pipe buffers, so writing surely meets the closed pipe.
    cmd.args([
        "get",
        "pods",
        "-A",
        "--sim",
        "--sim-pods",
        "4000",
        "--sim-churn",
        "0",
    ]);
    let (status, line, err) = first_line_then_close(cmd);
    // The first line of the table is its header.
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>(),
        ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{line}"
    );
    assert!(status.success(), "{status}: {err}");
    assert!(!err.contains("pipe") && !err.contains("panicked"), "{err}");
}

#[test]
fn a_closed_stdout_ends_watch_quietly_with_exit_0() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = bare(home.path());
    // The churn keeps printing until a write meets the closed pipe.
    cmd.args([
        "watch",
        "pods",
        "--sim",
        "--sim-pods",
        "5",
        "--sim-churn",
        "500/s",
    ]);
    let (status, line, err) = first_line_then_close(cmd);
    assert!(line.starts_with("ADDED"), "{line}");
    assert!(status.success(), "{status}: {err}");
    assert!(!err.contains("pipe") && !err.contains("panicked"), "{err}");
}

#[test]
fn log_lines_carry_no_colour_into_a_pipe() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = bare(home.path());
    cmd.env("RUST_LOG", "debug").args([
        "get",
        "pods",
        "--sim",
        "--sim-pods",
        "1",
        "--sim-churn",
        "0",
    ]);
    let (status, _, err) = run(cmd);
    assert!(status.success(), "{err}");
    assert!(err.contains("DEBUG"), "expected debug log lines: {err}");
    assert!(!err.contains('\x1b'), "colour codes in a pipe: {err:?}");
}

#[test]
fn churn_above_the_maximum_is_refused() {
    let home = tempfile::tempdir().unwrap();
    for args in [
        &["sim", "--churn", "1e12/s"][..],
        &["watch", "pods", "--sim", "--sim-churn", "100001"],
    ] {
        let mut cmd = bare(home.path());
        cmd.args(args);
        let (status, _, err) = run(cmd);
        assert_eq!(status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("maximum of 100000/s"), "{args:?}: {err}");
    }
}

#[test]
fn pod_counts_above_the_maximum_are_refused() {
    let home = tempfile::tempdir().unwrap();
    for args in [
        &["watch", "pods", "--sim", "--sim-pods", "999999999999"][..],
        &["get", "pods", "--sim-pods", "1000001"],
        &["sim", "--pods", "99999999"],
        &["sim", "--pods", "99999999999999999999999"],
    ] {
        let mut cmd = bare(home.path());
        cmd.args(args);
        let (status, out, err) = run(cmd);
        assert_eq!(status.code(), Some(2), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(
            err.contains("more than the maximum of 1000000 pods"),
            "{args:?}: {err}"
        );
    }
}

#[cfg(unix)]
#[test]
fn ctrl_c_and_sigterm_stop_a_sim_while_it_seeds_and_remove_its_kubeconfig() {
    for (sig, code) in [("INT", 130), ("TERM", 143)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        let mut cmd = bare(dir.path());
        // The most pods: seeding takes far longer than the signal takes to come.
        cmd.args(["sim", "--pods", "1000000", "--kubeconfig"])
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = KillOnDrop(cmd.spawn().unwrap());
        let out = drain(child.0.stdout.take().unwrap());
        // The kubeconfig is written before the seeding starts.
        let deadline = std::time::Instant::now() + BOUND;
        while !path.exists() {
            assert!(std::time::Instant::now() < deadline, "no kubeconfig");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        signal(&child.0, sig);
        let status = wait_bounded(&mut child.0);
        assert_eq!(status.code(), Some(code), "SIG{sig}: {status}");
        assert!(!path.exists(), "SIG{sig}: the kubeconfig is left behind");
        // Stopped while seeding: it never said it was listening.
        let out = out.join().unwrap();
        assert!(!out.contains("listening"), "SIG{sig}: {out}");
    }
}

#[test]
fn completions_are_generated() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = bare(home.path());
    cmd.args(["completions", "bash"]);
    let (status, out, err) = run(cmd);
    assert!(status.success(), "{err}");
    assert!(
        out.contains("complete") && out.contains("kinformer"),
        "{out}"
    );
}

/// Starts `kinformer sim` with `args`; returns the child and its three printed lines.
fn start_sim(
    home: &std::path::Path,
    args: &[&str],
    kubeconfig: &std::path::Path,
) -> (KillOnDrop, [String; 3]) {
    let mut cmd = bare(home);
    cmd.arg("sim")
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = KillOnDrop(cmd.spawn().unwrap());
    let lines = Lines::new(child.0.stdout.take().unwrap());
    let printed = [lines.next(), lines.next(), lines.next()];
    (child, printed)
}

#[test]
fn sim_refuses_to_overwrite_an_existing_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config");
    std::fs::write(&path, "precious: true\n").unwrap();
    let mut cmd = bare(dir.path());
    cmd.args(["sim", "--kubeconfig"]).arg(&path);
    let (status, out, err) = run(cmd);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&*path.to_string_lossy()), "{err}");
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious: true\n");
}

#[cfg(unix)]
#[test]
fn sim_kubeconfig_is_private_and_removed_on_ctrl_c_and_on_sigterm() {
    use std::os::unix::fs::PermissionsExt;

    for sig in ["INT", "TERM"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        let (mut child, printed) =
            start_sim(dir.path(), &["--pods", "3", "--token", "s3cret"], &path);
        assert!(
            printed[0].starts_with("kinformer sim listening on http://127.0.0.1:"),
            "{printed:?}"
        );
        assert_eq!(printed[1], format!("kubeconfig: {}", path.display()));
        assert!(
            printed[2].starts_with("try: kubectl --kubeconfig "),
            "{printed:?}"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "mode {mode:o}");
        assert!(std::fs::read_to_string(&path).unwrap().contains("s3cret"));
        signal(&child.0, sig);
        let status = wait_bounded(&mut child.0);
        assert!(status.success(), "SIG{sig}: {status}");
        assert!(!path.exists(), "SIG{sig}: the kubeconfig is left behind");
    }
}

#[cfg(unix)]
#[test]
fn sim_leaves_a_file_put_in_place_of_its_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    let (mut child, _) = start_sim(dir.path(), &[], &path);
    // Someone replaces the file while the server runs: it is theirs now.
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, "theirs\n").unwrap();
    signal(&child.0, "INT");
    assert!(wait_bounded(&mut child.0).success());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "theirs\n");
}

#[cfg(unix)]
#[test]
fn ctrl_c_stops_a_sim_at_the_maximum_churn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    let (mut child, _) = start_sim(dir.path(), &["--pods", "50", "--churn", "100000/s"], &path);
    signal(&child.0, "INT");
    assert!(wait_bounded(&mut child.0).success());
    assert!(!path.exists());
}

#[test]
fn sim_errors_are_one_line_with_the_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    let mut cmd = bare(dir.path());
    cmd.args(["sim", "--port", &port.to_string(), "--kubeconfig"])
        .arg(&path);
    let (status, out, err) = run(cmd);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(!err.contains("Bind {") && !err.contains("Os {"), "{err}");
    assert!(
        !path.exists(),
        "the kubeconfig of a server that never ran is left behind"
    );
}

/// A plain HTTP/1.0 GET (the server ends the body by closing the connection): the body.
fn http_get(base: &str, path: &str) -> String {
    use std::io::{Read as _, Write as _};
    let addr = base.trim_start_matches("http://");
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(BOUND)).unwrap();
    write!(tcp, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    tcp.read_to_string(&mut out).unwrap();
    out.split_once("\r\n\r\n").unwrap().1.to_owned()
}

#[cfg(unix)]
#[test]
fn sim_kube_version_is_reported_and_only_no_watch_cache_pages_resource_version_zero_lists() {
    for (version, cache, items) in [("1.33", true, 10), ("1.34", true, 10), ("1.34", false, 3)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        let mut args = vec!["--pods", "10", "--kube-version", version];
        if !cache {
            args.push("--no-watch-cache");
        }
        let (mut child, printed) = start_sim(dir.path(), &args, &path);
        let url = printed[0]
            .strip_prefix("kinformer sim listening on ")
            .unwrap()
            .to_owned();
        let v: serde_json::Value = serde_json::from_str(&http_get(&url, "/version")).unwrap();
        assert_eq!(v["minor"], &version[2..]);
        let l: serde_json::Value =
            serde_json::from_str(&http_get(&url, "/api/v1/pods?resourceVersion=0&limit=3"))
                .unwrap();
        assert_eq!(
            l["items"].as_array().unwrap().len(),
            items,
            "{version}, watch cache {cache}"
        );
        signal(&child.0, "INT");
        assert!(wait_bounded(&mut child.0).success());
    }
}

/// A plain HTTP/1.0 request: the status code and the body.
fn http_request(base: &str, method: &str, path: &str) -> (u16, String) {
    use std::io::{Read as _, Write as _};
    let addr = base.trim_start_matches("http://");
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(BOUND)).unwrap();
    write!(
        tcp,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    tcp.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (code, body.to_owned())
}

#[cfg(unix)]
#[test]
fn sim_admin_endpoints_inject_faults_only_when_enabled() {
    for admin in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        let args: &[&str] = if admin { &["--admin"] } else { &[] };
        let (mut child, printed) = start_sim(dir.path(), args, &path);
        let url = printed[0]
            .strip_prefix("kinformer sim listening on ")
            .unwrap()
            .to_owned();
        let (code, _) = http_request(
            &url,
            "POST",
            "/kinformer-sim/admin/fail?kind=list&code=503&count=1",
        );
        if admin {
            assert_eq!(code, 200);
            assert_eq!(http_request(&url, "GET", "/api/v1/pods").0, 503);
        } else {
            assert_eq!(code, 404);
        }
        assert_eq!(http_request(&url, "GET", "/api/v1/pods").0, 200);
        signal(&child.0, "INT");
        assert!(wait_bounded(&mut child.0).success());
    }
}
