//! Running the built `kinformer` binary in tests: bounded waits, and children that never outlive
//! their test.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_kinformer");
/// No step of these tests should take this long; it only bounds a hung child.
pub const BOUND: Duration = Duration::from_secs(60);

/// Runs `kinformer ARGS --kubeconfig PATH` (a [`bare`] command in `home`) to completion off
/// the async threads: its exit code, stdout and stderr.
pub async fn kinformer(
    home: &std::path::Path,
    kubeconfig: &std::path::Path,
    args: &[&str],
) -> (Option<i32>, String, String) {
    let mut cmd = bare(home);
    cmd.args(args).arg("--kubeconfig").arg(kubeconfig);
    let (status, out, err) = tokio::task::spawn_blocking(move || run(cmd))
        .await
        .expect("the command's thread");
    (status.code(), out, err)
}

/// A command with no kubeconfig, no home kubeconfig and no in-cluster environment.
pub fn bare(home: &std::path::Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env("HOME", home)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("NO_COLOR")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    cmd
}

/// A child that is killed if the test ends early (a failed assertion), so none outlives its test.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits for a child to exit, killing it past the bound.
pub fn wait_bounded(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + BOUND;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("kinformer did not exit within {BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads a pipe to its end on a thread of its own.
pub fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Runs to completion; returns (exit status, stdout, stderr).
pub fn run(mut cmd: Command) -> (ExitStatus, String, String) {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let out = drain(child.0.stdout.take().unwrap());
    let err = drain(child.0.stderr.take().unwrap());
    let status = wait_bounded(&mut child.0);
    (status, out.join().unwrap(), err.join().unwrap())
}

/// The lines of a child's stdout or stderr, delivered through a channel so each wait is bounded.
pub struct Lines(mpsc::Receiver<String>);

impl Lines {
    /// Starts reading `pipe` line by line on a thread of its own.
    pub fn new(pipe: impl Read + Send + 'static) -> Self {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self(rx)
    }

    /// The next line, within the bound; panics if the child closed its stdout first.
    pub fn next(&self) -> String {
        self.0
            .recv_timeout(BOUND)
            .expect("a line from kinformer within the bound")
    }

    /// The lines until the pipe closes (the child exited), within the bound.
    pub fn rest(&self) -> Vec<String> {
        let deadline = Instant::now() + BOUND;
        let mut lines = Vec::new();
        while let Ok(line) = self
            .0
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            lines.push(line);
        }
        lines
    }
}

/// Sends a signal (`INT`, `TERM`) to a child.
pub fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} failed");
}

/// Runs `watch pods` on an embedded cluster with churn, sends the signal `name` (`INT`, `TERM`)
/// once the watch is up, and checks that the tool stopped itself with exit `code`, having printed
/// only whole lines, and nothing on stderr but the fallback line.
pub fn signal_stops_a_healthy_watch(name: &str, code: i32) {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = bare(home.path());
    cmd.args([
        "watch",
        "pods",
        "-A",
        "--sim",
        "--sim-pods",
        "3",
        "--sim-churn",
        "200/s",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = KillOnDrop(cmd.spawn().unwrap());
    let out = Lines::new(child.0.stdout.take().unwrap());
    let err = drain(child.0.stderr.take().unwrap());
    // The initial list and some churn have been printed: the watch is up.
    for _ in 0..6 {
        let line = out.next();
        assert!(line.contains("\trv="), "{line}");
    }
    signal(&child.0, name);
    let status = wait_bounded(&mut child.0);
    // Ended by the tool itself (an exit code), not by the signal's default action.
    assert_eq!(status.code(), Some(code), "{status:?}");
    for line in out.rest() {
        assert!(
            line.contains("\trv=") && line.contains("restarts="),
            "half a line: {line:?}"
        );
    }
    let err = err.join().unwrap();
    assert_eq!(err.lines().count(), 1, "only the fallback line: {err}");
    assert!(
        err.starts_with("kinformer: --sim: using an embedded simulated cluster"),
        "{err}"
    );
}

/// Waits for the first warning of a `watch` that keeps retrying a failure (it must contain
/// `warning_has`), sends Ctrl-C, and checks that the tool exits with the failure's `code` and a
/// last line naming the failure it was retrying (`kinformer: interrupted while retrying after:
/// list: {failure}...`).
pub async fn ctrl_c_while_retrying(
    mut child: KillOnDrop,
    warning_has: &str,
    code: i32,
    failure: &str,
) {
    let stderr = Lines::new(child.0.stderr.take().unwrap());
    let (warning, stderr) = tokio::task::spawn_blocking(move || (stderr.next(), stderr))
        .await
        .unwrap();
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains(warning_has), "{warning}");
    signal(&child.0, "INT");
    let (status, rest) = tokio::task::spawn_blocking(move || {
        let status = wait_bounded(&mut child.0);
        (status, stderr.rest())
    })
    .await
    .unwrap();
    assert_eq!(status.code(), Some(code), "{rest:?}");
    let last = rest.last().cloned().unwrap_or_default();
    let expected = format!("kinformer: interrupted while retrying after: list: {failure}");
    assert!(last.starts_with(&expected), "{rest:?}");
}
