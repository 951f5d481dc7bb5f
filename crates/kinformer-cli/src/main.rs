//! The `kinformer` command-line tool: lists and watches a resource and prints what it sees, or runs
//! the simulated API server.
//!
//! ```text
//! kinformer watch pods                 # against your kubeconfig, or an embedded simulated cluster
//! kinformer get nodes --kubeconfig k   # list once
//! kinformer sim --pods 1000 --churn 50/s   # serve a simulated cluster for kubectl and friends
//! kinformer completions bash           # a shell completion script
//! ```
//!
//! Configuration is found where kubectl finds it (`--kubeconfig`, `KUBECONFIG`, `~/.kube/config`,
//! the in-cluster service account). When there is none at all, or with `--sim`, the tool starts an
//! embedded simulated API server with seeded pods and a steady churn of writes, so the command
//! works on any machine. A configuration that exists but is broken is reported, never replaced.
//!
//! `watch` and `get` run kinformer's own informer (the facade's default pipeline) on dynamic
//! objects: `watch` prints one line per notification (`ADDED`, `MODIFIED`, `DELETED`, the key,
//! the resourceVersion and a summary; tombstones marked), `get` waits for the cache to sync and
//! prints it as a table like `kubectl get`. `-o json|yaml|name|wide` and `--show-labels` change
//! the output; stdout carries only the data. Resource names resolve as kubectl resolves them:
//! the built-in types from a table, anything else (custom resources) through the server's
//! discovery. Ctrl-C (or SIGTERM) stops the informer and exits 130 (143), or with the code of
//! the failure that was being retried (the failure is reported).
//!
//! It behaves as a Unix tool: a closed stdout (`kinformer get pods | head -1`) or stderr ends it
//! quietly with exit 0; text from the server is escaped before it reaches a terminal
//! (`terminal`); log lines on stderr are coloured only on a terminal and never with `NO_COLOR` set;
//! usage errors exit 2 with the message and a `--help` hint; other failures print one line and
//! exit with their class's code ([`Class`]: unreachable 3, credentials 4, kubeconfig 5, unknown
//! resource 6, anything else 1).

#![forbid(unsafe_code)]

mod args;
mod exporter;
mod informer;
mod jsonpath;
mod print;
mod sim;
mod stats;
mod terminal;

use std::borrow::Cow;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::CommandFactory;
use kinformer_client::{Api, Client, Config, Discovery, DiscoveryOptions, KubeconfigOptions};
use kinformer_core::list_watch::{ErrorKind, ListWatch as _};
use kinformer_core::{ListParams, Scope};

use crate::args::{Cli, Command, Query};

/// The unit tests count the heap they hold.
#[cfg(test)]
#[global_allocator]
static HEAP: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

/// Everything that can stop the tool.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// The API server, the connection or the configuration failed.
    #[error(transparent)]
    Client(#[from] kinformer_client::Error),
    /// Listing or watching failed in a way retrying cannot fix.
    #[error(transparent)]
    ListWatch(#[from] kinformer_core::list_watch::Error),
    /// The simulated API server could not start.
    #[error("simulated API server: {0}")]
    Sim(#[from] kinformer_sim::Error),
    /// `kinformer sim --kubeconfig PATH` named a file that exists; it is never overwritten.
    #[error(
        "{}: already exists; kinformer sim never overwrites a file (name a new one with --kubeconfig)",
        .0.display()
    )]
    KubeconfigExists(PathBuf),
    /// The simulated server's kubeconfig could not be written.
    #[error("cannot write the kubeconfig {}: {source}", path.display())]
    KubeconfigWrite {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for Ctrl-C (or SIGTERM) could not be set up.
    #[error("cannot listen for Ctrl-C and SIGTERM: {0}")]
    Signal(std::io::Error),
    /// Ctrl-C or SIGTERM arrived while the watch was retrying a failure; the failure is what is
    /// reported, with its class's exit code.
    #[error("interrupted while retrying after: {cause}")]
    InterruptedWhileRetrying {
        /// The failure being retried.
        cause: String,
        /// Its class.
        class: Class,
    },
    /// A failure the informer's reflector reported (already a line: `list: ...`).
    #[error("{cause}")]
    Failed {
        /// What failed.
        cause: String,
        /// Its class.
        class: Class,
    },
    /// The name is neither a built-in type nor anything the server's discovery lists. The
    /// message is kubectl's, which names the resource without its group or version
    /// (`widgets.example.com` is reported as `"widgets"`).
    #[error(
        "the server doesn't have a resource type \"{}\"",
        .0.split('.').next().unwrap_or_default()
    )]
    UnknownResource(String),
    /// A command line clap accepts but the command cannot run: exit 2.
    #[error("{0}")]
    Usage(String),
    /// Ctrl-C (SIGINT) or SIGTERM arrived while all was well: exit 130 or 143, as other tools do.
    #[error("interrupted")]
    Interrupted(Signal),
    /// No kubeconfig and no in-cluster configuration, and the fallback is forbidden.
    #[error(
        "no kubeconfig found (looked at --kubeconfig, KUBECONFIG, ~/.kube/config and the \
         in-cluster service account), and --no-sim or {NO_SIM_ENV} forbids the embedded \
         simulated cluster: name a kubeconfig with --kubeconfig"
    )]
    NoConfig,
    /// `get RESOURCE NAME` named an object the cache does not hold.
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        /// The resource's plural.
        resource: String,
        /// The name asked for.
        name: String,
    },
    /// The informer refused its settings.
    #[error(transparent)]
    Informer(#[from] kinformer::Error),
    /// Writing the output failed. A closed pipe is not reported: the tool stops quietly.
    #[error("writing output: {0}")]
    Output(std::io::Error),
    /// A cached object did not decode when it was printed (`cannot decode NS/NAME: ...`).
    #[error("{0}")]
    Undecodable(String),
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        match e.get_ref() {
            Some(inner) if inner.is::<print::Undecodable>() => Self::Undecodable(e.to_string()),
            _ => Self::Output(e),
        }
    }
}

/// What kind of failure ended a command. Each has its own exit code, so that a script can tell
/// them apart; `kinformer --help` and docs/cli.md list them ([`args::EXIT_CODES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// Anything else: a server error, a NAME `get` did not find, output that cannot be written.
    Other,
    /// A command line that cannot run: an unknown flag, a bad selector or value (also when the
    /// server rejects the request as malformed, 400).
    Usage,
    /// The API server cannot be reached: a refused connection, DNS, TLS, no answer in time.
    Unreachable,
    /// The credentials were refused (401), the identity may not list (403), or they could not
    /// be obtained (a credential plugin failed).
    Credentials,
    /// The kubeconfig is broken, or missing where one is required (`--no-sim`).
    Kubeconfig,
    /// The server serves no resource type by that name.
    UnknownResource,
}

impl Class {
    /// The process's exit code for this class.
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            Self::Other => 1,
            Self::Usage => 2,
            Self::Unreachable => 3,
            Self::Credentials => 4,
            Self::Kubeconfig => 5,
            Self::UnknownResource => 6,
        }
    }

    /// The class of a client error.
    pub(crate) fn of_client(e: &kinformer_client::Error) -> Self {
        use kinformer_client::Error as E;
        match e {
            E::Connect { .. } | E::Timeout { .. } | E::Request { .. } | E::Tls { .. } => {
                Self::Unreachable
            }
            E::Unauthorized { .. }
            | E::Forbidden { .. }
            | E::Auth { .. }
            | E::ExecTimeout { .. } => Self::Credentials,
            // A token file the kubeconfig names that does not exist: credentials, as documented.
            E::Config { .. } if e.is_missing_credentials() => Self::Credentials,
            E::Config { .. } | E::InvalidRequest { .. } => Self::Kubeconfig,
            E::NotFound { .. } => Self::UnknownResource,
            E::InvalidName { .. } => Self::Usage,
            E::Api { status } if status.code == 400 => Self::Usage,
            _ => Self::Other,
        }
    }

    /// The class of a list or watch error: its client error's, when it carries one.
    pub(crate) fn of_list_watch(e: &kinformer_core::list_watch::Error) -> Self {
        kinformer_client::Error::from_list_watch(e).map_or(Self::Other, Self::of_client)
    }

    /// What to check, appended to the message of a client error of this class.
    fn hint(self, e: Option<&kinformer_client::Error>) -> Option<&'static str> {
        use kinformer_client::Error as E;
        match (self, e) {
            (Self::Unreachable, Some(E::Tls { .. })) => Some(
                "check the kubeconfig's certificate-authority and that the server address names \
                 the server's certificate",
            ),
            (Self::Unreachable, _) => {
                Some("is the API server up, and is the kubeconfig's server address right?")
            }
            (Self::Credentials, Some(E::Forbidden { .. })) => {
                Some("the kubeconfig's user may not do this: check its RBAC permissions")
            }
            (Self::Credentials, _) => Some("check the credentials of the kubeconfig's user"),
            _ => None,
        }
    }
}

impl Error {
    /// The class of this failure, which decides the exit code.
    fn class(&self) -> Class {
        match self {
            Self::Client(e) => Class::of_client(e),
            Self::ListWatch(e) => Class::of_list_watch(e),
            Self::InterruptedWhileRetrying { class, .. } | Self::Failed { class, .. } => *class,
            Self::Usage(_) => Class::Usage,
            Self::UnknownResource(_) => Class::UnknownResource,
            Self::NoConfig => Class::Kubeconfig,
            _ => Class::Other,
        }
    }
}

/// The signal that stopped the tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// SIGINT (Ctrl-C): exit 130.
    Interrupt,
    /// SIGTERM: exit 143 (128 + 15, what a shell reports for a process SIGTERM ended).
    Terminate,
    /// Not a signal: stderr was found closed (`kinformer watch pods 2>&1 | head`). Nobody reads
    /// what the command says any more, so it ends quietly with exit 0, as for a closed stdout.
    OutputClosed,
}

impl Signal {
    fn exit_code(self) -> u8 {
        match self {
            Self::Interrupt => 130,
            Self::Terminate => 143,
            Self::OutputClosed => 0,
        }
    }
}

/// Ctrl-C and SIGTERM, listened for from the moment this is made: either stops the command the
/// same way (the informer stopped, whole lines only). A closed stderr stops it too.
struct Signals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// The next signal.
    async fn recv(&mut self) -> Signal {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => Signal::Interrupt,
                _ = self.terminate.recv() => Signal::Terminate,
                () = terminal::stderr_closed() => Signal::OutputClosed,
            }
        }
        #[cfg(not(unix))]
        {
            tokio::select! {
                interrupted = tokio::signal::ctrl_c() => match interrupted {
                    Ok(()) => Signal::Interrupt,
                    Err(_) => std::future::pending().await,
                },
                () = terminal::stderr_closed() => Signal::OutputClosed,
            }
        }
    }
}

/// How long the first requests (discovery, and the one-object list before the informer starts)
/// may take without `--request-timeout`: far more than a healthy server needs for them, and far
/// less than the client's own 60 s bound on response headers, so that a server that accepts
/// connections and never answers is reported promptly.
const FIRST_ANSWER_BOUND: Duration = Duration::from_secs(10);

/// How many times `get` asks again when the server answers 429 (or a 5xx) with `Retry-After`,
/// as kubectl's requests do.
pub(crate) const MAX_THROTTLED_RETRIES: u32 = 10;

/// The longest `Retry-After` that `get` waits for; a server asking for more ends the command at
/// once with its answer, so that `get` is bounded (at most 10 waits of 60 s).
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// A wait as log lines show it: `1s`, `1.5s`.
pub(crate) fn seconds(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

/// The environment variable that forbids the fallback to an embedded simulated cluster.
const NO_SIM_ENV: &str = "KINFORMER_NO_SIM";

/// The longest line an error message prints; longer ones (a 100 KB argument echoed back) are cut
/// in the middle.
const MAX_MESSAGE_LINE: usize = 300;

fn main() -> ExitCode {
    let cli = match args::parse(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    let default_level = match cli.command {
        Command::Sim(_) => "info",
        _ => "warn",
    };
    // `-v N` sets the level as kubectl's verbosity does; otherwise `RUST_LOG`, else warnings.
    let filter = match cli.verbosity() {
        Some(v) => tracing_subscriber::EnvFilter::new(verbosity_filter(v, default_level)),
        None => tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| default_level.into()),
    };
    {
        use tracing_subscriber::Layer as _;
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        let log = tracing_subscriber::fmt::layer()
            .with_ansi(colour_on_stderr(
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR"),
            ))
            // Log lines carry the server's words: every field is made safe for a terminal.
            .fmt_fields(terminal::log_fields())
            // A closed stderr ends the command quietly (`terminal::stderr_closed`), never a panic.
            .with_writer(terminal::LogWriter)
            .log_internal_errors(false)
            .with_filter(filter)
            // The tool says itself which failures it retries (`informer::Retried`).
            .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
                !informer::reflector_warning(meta)
            }));
        tracing_subscriber::registry().with(log).init();
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            terminal::to_stderr(format_args!(
                "kinformer: cannot start the async runtime: {e}\n"
            ));
            return ExitCode::FAILURE;
        }
    };
    // The metrics recorder, before any handle is made (handles bind to the recorder installed
    // when they are made), inside the runtime that serves `--metrics-addr`.
    let installed = match &cli.command {
        Command::Watch(q) | Command::Get(q) => {
            let _runtime = runtime.enter();
            exporter::install(q.metrics_addr, false)
        }
        Command::Stats(a) => {
            let _runtime = runtime.enter();
            exporter::install(a.query.metrics_addr, true)
        }
        Command::Sim(_) | Command::Completions { .. } => Ok(exporter::Installed::default()),
    };
    let result = match installed {
        Err(e) => Err(e),
        Ok(installed) => {
            if let Some(addr) = installed.serving {
                terminal::to_stderr(format_args!(
                    "kinformer: serving metrics at http://{addr}/metrics\n"
                ));
            }
            match cli.command {
                Command::Completions { shell } => completions(shell),
                Command::Sim(args) => runtime.block_on(sim::run(args)),
                Command::Watch(q) => runtime.block_on(run(q, Mode::Watch)),
                Command::Get(q) => runtime.block_on(run(q, Mode::Get)),
                Command::Stats(a) => {
                    let mode = Mode::Stats {
                        recorder: installed.stats,
                        interval: a.interval,
                        count: a.count,
                    };
                    runtime.block_on(run(a.query, mode))
                }
            }
        }
    };
    // A task that does not yield (a busy simulated churn) must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_secs(1));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Error::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(Error::Interrupted(signal)) => ExitCode::from(signal.exit_code()),
        Err(e @ (Error::Usage(_) | Error::UnknownResource(_))) => {
            // kubectl's form for these: `error: the server doesn't have a resource type "foo"`.
            let message = e.to_string();
            terminal::to_stderr(format_args!(
                "error: {}\n",
                shorten_lines(&terminal::safe(&message))
            ));
            ExitCode::from(e.class().exit_code())
        }
        Err(e) => {
            let class = e.class();
            let message = e.to_string();
            let client = match &e {
                Error::Client(c) => Some(c),
                Error::ListWatch(l) => kinformer_client::Error::from_list_watch(l),
                _ => None,
            };
            let line = match class.hint(client) {
                Some(hint) if !matches!(e, Error::InterruptedWhileRetrying { .. }) => {
                    format!("{message} ({hint})")
                }
                _ => message,
            };
            // The line quotes the server (a Status message, an error's text): made safe first.
            terminal::to_stderr(format_args!(
                "kinformer: {}\n",
                shorten_lines(&terminal::safe(&line))
            ));
            ExitCode::from(class.exit_code())
        }
    }
}

/// The log filter `-v=N` stands for, as kubectl's verbosity: 0 keeps the command's default
/// level, 1-3 show kinformer's info lines, 4-6 its debug lines (each request), 7 and more its
/// trace lines. Other crates stay at warnings.
fn verbosity_filter(v: u8, default_level: &str) -> String {
    let level = match v {
        0 => return default_level.to_owned(),
        1..=3 => "info",
        4..=6 => "debug",
        _ => "trace",
    };
    format!("warn,kinformer={level}")
}

/// Whether log lines get ANSI colours: only on a terminal, and never when `NO_COLOR` is set to a
/// non-empty value (<https://no-color.org>).
fn colour_on_stderr(is_terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Prints clap's answer: help and version on stdout (exit 0); a usage error as its message and a
/// `--help` hint on stderr (exit 2), without the usage block.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(2)
        }
        _ => {
            let text = e.render().to_string();
            let _ = write!(
                std::io::stderr(),
                "{}",
                without_usage(&shorten_lines(&text))
            );
            ExitCode::from(2)
        }
    }
}

/// Drops the `Usage:` block from a clap error, keeping the message and the hint.
fn without_usage(text: &str) -> String {
    let mut out = String::new();
    let mut in_usage = false;
    for line in text.lines() {
        if line.starts_with("Usage:") {
            in_usage = true;
            continue;
        }
        if in_usage {
            if line.trim().is_empty() {
                in_usage = false;
            }
            continue;
        }
        if line.trim().is_empty() && (out.is_empty() || out.ends_with("\n\n")) {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Cuts every line longer than [`MAX_MESSAGE_LINE`] characters in the middle, marking the cut
/// with `…`.
fn shorten_lines(text: &str) -> Cow<'_, str> {
    if text.lines().all(|l| l.chars().count() <= MAX_MESSAGE_LINE) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(MAX_MESSAGE_LINE * 2);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let n = line.chars().count();
        if n <= MAX_MESSAGE_LINE {
            out.push_str(line);
        } else {
            let head = MAX_MESSAGE_LINE * 2 / 3;
            let tail = MAX_MESSAGE_LINE - head - 1;
            out.extend(line.chars().take(head));
            out.push('…');
            out.extend(line.chars().skip(n - tail));
        }
    }
    Cow::Owned(out)
}

/// Prints a completion script for `shell`.
fn completions(shell: clap_complete::Shell) -> Result<(), Error> {
    // Generated into memory first: the generator panics on a failed write, and a closed pipe
    // must end the tool quietly instead.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "kinformer", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(())
}

/// Whether the environment forbids the embedded simulated cluster (`KINFORMER_NO_SIM` set to
/// anything but empty or `0`).
fn no_sim_from_env(value: Option<std::ffi::OsString>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0")
}

/// Which command runs the informer.
#[derive(Debug)]
enum Mode {
    /// Print every event.
    Watch,
    /// Print the synced cache.
    Get,
    /// `get -w`: print the list, then every change, as rows of the table.
    GetWatch,
    /// Print counters every `interval`.
    Stats {
        /// Where the reflector's counters are read.
        recorder: Option<&'static stats::AtomicRecorder>,
        /// How often.
        interval: Duration,
        /// How many reports.
        count: Option<u64>,
    },
}

impl Mode {
    fn verb(&self) -> &'static str {
        match self {
            Self::Watch => "watch",
            Self::Get | Self::GetWatch => "get",
            Self::Stats { .. } => "stats",
        }
    }
}

/// `watch`, `get` or `stats`.
async fn run(q: Query, mode: Mode) -> Result<(), Error> {
    let mode = match mode {
        Mode::Get if q.watch => Mode::GetWatch,
        other => other,
    };
    let watch = !matches!(mode, Mode::Get);
    if watch && q.targets.len() > 1 {
        return Err(Error::Usage(format!(
            "{} takes one resource type; run one {} per type",
            mode.verb(),
            mode.verb()
        )));
    }
    if watch && q.targets.iter().any(|t| t.names.len() > 1) {
        return Err(Error::Usage(format!(
            "{} takes at most one NAME; run one {} per name",
            mode.verb(),
            mode.verb()
        )));
    }
    let options = KubeconfigOptions {
        context: q.context.clone(),
        ..KubeconfigOptions::default()
    };
    let config = if q.sim {
        None
    } else if let Some(path) = &q.kubeconfig {
        Some(Config::from_path(path, &options)?)
    } else {
        Config::find(&options)?
    };
    if config.is_none() && (q.no_sim || no_sim_from_env(std::env::var_os(NO_SIM_ENV))) {
        return Err(Error::NoConfig);
    }
    // Keep the embedded server and its churn alive for as long as the command runs.
    let mut embedded = None;
    let mut config = match config {
        Some(c) => c,
        None => {
            let (sim, churn) = sim::embedded(q.sim_pods, q.sim_churn, q.seed).await?;
            terminal::to_stderr(format_args!(
                "kinformer: {}: using an embedded simulated cluster at {} ({} pods, {} writes/s)\n",
                if q.sim {
                    "--sim"
                } else {
                    "no kubeconfig found"
                },
                sim.url(),
                q.sim_pods,
                q.sim_churn,
            ));
            let config = Config::new(sim.url());
            embedded = Some((sim, churn));
            config
        }
    };
    let first_bound = match q.request_timeout {
        Some(args::RequestTimeout(timeout)) => {
            config.request_timeout = timeout;
            // A credential plugin's run is bounded alike.
            if let Some(timeout) = timeout {
                config.exec_timeout = timeout;
            }
            timeout
        }
        None => Some(FIRST_ANSWER_BOUND),
    };
    let client = Client::new(config)?;
    // kubectl's discovery cache; none for the embedded cluster, whose address is new each run.
    let cache_root = match (&embedded, &q.cache_dir) {
        (Some(_), _) => None,
        (None, Some(dir)) => Some(dir.clone()),
        (None, None) => DiscoveryOptions::default_cache_root(),
    };
    // Listening for Ctrl-C and SIGTERM from here on: the first request is already cancellable.
    let mut signals = Signals::new().map_err(Error::Signal)?;
    let mut interrupt = std::pin::pin!(signals.recv());
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    // The credentials first, under their own bound (the exec plugin's), so that a plugin that
    // hangs or fails, or a token file that is missing, is reported as a credentials problem
    // rather than as a server that does not answer.
    let mut result = tokio::select! {
        signal = &mut interrupt => Err(Error::Interrupted(signal)),
        resolved = async {
            client.authenticate().await?;
            resolve(&client, &q.targets, first_bound, cache_root.as_deref()).await
        } => resolved,
    };
    // Whether a table was printed: the next one comes after a blank line, as in kubectl.
    let mut printed = false;
    // A document format prints every type's objects as one document, once all are listed.
    let mut documents = Vec::new();
    if let Ok(resources) = &result {
        // Whether every type asked for lives in a namespace (for the "nothing found" line).
        let all_namespaced = resources.iter().all(|r| r.scope == Scope::Namespaced);
        for (resource, target) in resources.iter().zip(&q.targets) {
            let one = One {
                client: &client,
                q: &q,
                resource,
                names: &target.names,
                several: resources.len() > 1,
                first_bound,
            };
            match one
                .run(&mode, printed, &mut documents, &mut out, interrupt.as_mut())
                .await
            {
                Ok(p) => printed |= p,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if result.is_ok()
            && matches!(mode, Mode::Get)
            && q.output.is_document()
            && let Err(e) = print::document(&mut out, &q.output, &documents, q.single_object())
        {
            result = Err(e.into());
        }
        // As kubectl: when nothing at all was printed, one line naming the namespace when
        // every type asked for lives in one.
        if result.is_ok() && matches!(mode, Mode::Get) && !q.output.is_document() && !printed {
            let namespace = match q.namespace() {
                Some("") => Some(client.default_namespace().to_owned()),
                other => other.map(str::to_owned),
            };
            match namespace.filter(|_| all_namespaced) {
                Some(ns) => terminal::to_stderr(format_args!(
                    "No resources found in {} namespace.\n",
                    terminal::safe(&ns)
                )),
                None => terminal::to_stderr(format_args!("No resources found\n")),
            }
        }
    }
    let flushed = out.flush();
    if let Some((sim, churn)) = embedded {
        drop(churn);
        let _ = tokio::time::timeout(Duration::from_secs(5), sim.shutdown()).await;
    }
    result?;
    flushed?;
    Ok(())
}

/// The resources the names stand for: built-in names at once ([`args::builtin`]), the others
/// through the server's discovery, fetched once, as kubectl fetches it: from the disk cache
/// (`cache_root/discovery/HOST_PORT`) while it is fresh, else aggregated discovery or each
/// group version's list, `/api` and `/apis` bounded by `bound` and each group version by
/// `bound` of its own. A group version that fails is reported on stderr in kubectl's words
/// and the others still resolve; a name not found in a cached discovery is looked up again
/// on the server.
async fn resolve(
    client: &Client,
    targets: &[args::Target],
    bound: Option<Duration>,
    cache_root: Option<&std::path::Path>,
) -> Result<Vec<kinformer_core::ApiResource>, Error> {
    let mut discovery: Option<Discovery> = None;
    let mut resources = Vec::with_capacity(targets.len());
    let mut options = DiscoveryOptions {
        timeout: bound,
        group_timeout: bound,
        cache_dir: cache_root.map(|root| DiscoveryOptions::cache_dir_for(root, client.url())),
        ..DiscoveryOptions::default()
    };
    for name in targets.iter().map(|t| &t.resource) {
        if let Some(r) = args::builtin(name) {
            resources.push(r);
            continue;
        }
        let mut found = None;
        for attempt in 0..2 {
            if discovery.is_none() {
                let d = Discovery::fetch_with(client, &options).await?;
                for failed in d.failures() {
                    // A failed group's words come from the server.
                    terminal::to_stderr(format_args!(
                        "kinformer: {}\n",
                        terminal::safe(&failed.to_string())
                    ));
                }
                discovery = Some(d);
            }
            let Some(d) = &discovery else { break };
            found = d.resolve(name).map(|f| f.resource.clone());
            if found.is_some() || attempt > 0 || !d.from_cache() {
                break;
            }
            // The cache may be older than the resource: ask the server, as kubectl does.
            tracing::debug!(name, "not in the cached discovery; fetching it again");
            options.refresh = true;
            discovery = None;
        }
        let found = found.ok_or_else(|| Error::UnknownResource(name.clone()))?;
        tracing::debug!(name, resource = ?found, "resolved through discovery");
        resources.push(found);
    }
    Ok(resources)
}

/// One resource type of a command.
struct One<'a> {
    client: &'a Client,
    q: &'a Query,
    resource: &'a kinformer_core::ApiResource,
    /// The names asked for of this type.
    names: &'a [String],
    /// Whether the command names several types (`get pods,nodes`): names then carry their type.
    several: bool,
    /// The bound on the first request, when there is one.
    first_bound: Option<Duration>,
}

impl One<'_> {
    /// Runs the command for this type; `Ok(true)` when `get` printed a table. `separate`: a
    /// table was printed before. In a document format `get` adds its objects to `documents`
    /// instead of printing them.
    async fn run(
        &self,
        mode: &Mode,
        separate: bool,
        documents: &mut Vec<print::Item>,
        out: &mut impl Write,
        mut interrupt: std::pin::Pin<&mut impl Future<Output = Signal>>,
    ) -> Result<bool, Error> {
        let (q, resource) = (self.q, self.resource);
        let watch = !matches!(mode, Mode::Get);
        // An informer watches every namespace unless told otherwise; an empty namespace is the
        // context's, as in kubectl.
        let namespace = match q.namespace() {
            Some("") => Some(self.client.default_namespace().to_owned()),
            other => other.map(str::to_owned),
        };
        let namespace = namespace.filter(|_| resource.scope == Scope::Namespaced);
        let api: Api<print::Cached> =
            Api::with_resource(self.client.clone(), resource.clone(), namespace.as_deref());
        let selectors = q.selectors();
        // One small request first: a failure retrying cannot fix (bad credentials, a forbidden
        // or unknown resource, a bad selector) ends the command at once with one line, before
        // an informer starts retrying; `get` gives up on any failure, as kubectl does.
        let probe = ListParams {
            limit: Some(1),
            ..selectors.clone()
        };
        let bounded = || async {
            match self.first_bound {
                Some(limit) => tokio::time::timeout(limit, api.list(&probe))
                    .await
                    .unwrap_or_else(|_| {
                        Err(kinformer_client::Error::Timeout {
                            waiting_for: "an answer to the first request",
                            limit,
                        }
                        .into())
                    }),
                None => api.list(&probe).await,
            }
        };
        let mut throttled = 0;
        let probed = loop {
            let probed = tokio::select! {
                signal = &mut interrupt => return Err(Error::Interrupted(signal)),
                probed = bounded() => probed,
            };
            // `get` asks a server that asks to be asked again later (429, or a 5xx with
            // Retry-After) again, after the wait it asks for, a bounded number of times, as
            // kubectl does; `watch` leaves that to the informer.
            let wait = match &probed {
                Err(e) if !watch && throttled < MAX_THROTTLED_RETRIES => e
                    .retry_after()
                    .filter(|wait| *wait <= MAX_RETRY_AFTER && e.kind() != ErrorKind::Fatal),
                _ => None,
            };
            let (Some(wait), Err(e)) = (wait, &probed) else {
                break probed;
            };
            throttled += 1;
            tracing::warn!(
                "list: {e}; retrying in {} as the server asks ({throttled} of \
                 {MAX_THROTTLED_RETRIES})",
                seconds(wait)
            );
            tokio::select! {
                signal = &mut interrupt => return Err(Error::Interrupted(signal)),
                () = tokio::time::sleep(wait) => {}
            }
        };
        // The failure `watch` goes on to retry, if any: what Ctrl-C then reports. The informer
        // logs it.
        let mut retrying = None;
        if let Err(e) = probed {
            let class = Class::of_list_watch(&e);
            if !watch || e.kind() == ErrorKind::Fatal {
                return Err(e.into());
            }
            retrying = Some(informer::Failure::new(format!("list: {e}"), false, class));
        }
        let kind = resource.kind.to_lowercase();
        let style = print::Style {
            format: q.output.clone(),
            show_labels: q.show_labels,
            name_prefix: if resource.group.is_empty() {
                kind
            } else {
                format!("{kind}.{}", resource.group)
            },
            plural: resource.plural.clone(),
            namespace_column: namespace.is_none() && resource.scope == Scope::Namespaced,
            prefix_names: self.several || q.show_kind,
            no_headers: q.no_headers,
            label_columns: q.label_columns.clone(),
        };
        let job = informer::Run {
            api,
            name: if resource.group.is_empty() {
                resource.plural.clone()
            } else {
                format!("{}.{}", resource.plural, resource.group)
            },
            label_selector: selectors.label_selector,
            field_selector: with_names(selectors.field_selector, self.names, watch),
            style,
            listed: std::sync::Arc::default(),
            throttled,
        };
        match *mode {
            Mode::Watch => informer::watch(job, retrying, q.max_events, false, out, interrupt)
                .await
                .map(|()| false),
            Mode::GetWatch => informer::watch(job, retrying, q.max_events, true, out, interrupt)
                .await
                .map(|()| true),
            Mode::Get => {
                let style = job.style.clone();
                let mut objects = informer::get(job, self.names, interrupt).await?;
                if let Some(by) = &q.sort_by {
                    sort_by(&mut objects, by)?;
                }
                if style.format.is_document() {
                    documents.extend(objects);
                    return Ok(false);
                }
                if objects.is_empty() {
                    // Said once for the whole command, when no type printed anything.
                    return Ok(false);
                }
                // A blank line between tables, as kubectl; none without headers.
                if separate && style.format.is_table() && !q.no_headers {
                    writeln!(out)?;
                }
                print::objects(out, &style, &objects, k8s_openapi::jiff::Timestamp::now())?;
                Ok(true)
            }
            Mode::Stats {
                recorder,
                interval,
                count,
            } => stats::stats(job, recorder, interval, count, out, interrupt)
                .await
                .map(|()| false),
        }
    }
}

/// `watch pods NAME` watches one object: a `metadata.name` field selector, as kubectl does,
/// with the name escaped as a field selector's value (`\\`, `\,`, `\=`). `get` filters its
/// cache instead, so that several names work.
fn with_names(field_selector: Option<String>, names: &[String], watch: bool) -> Option<String> {
    match (watch, names) {
        (true, [name]) => {
            let mut escaped = String::with_capacity(name.len());
            for c in name.chars() {
                if matches!(c, '\\' | ',' | '=') {
                    escaped.push('\\');
                }
                escaped.push(c);
            }
            Some(match field_selector {
                Some(s) if !s.is_empty() => format!("{s},metadata.name={escaped}"),
                _ => format!("metadata.name={escaped}"),
            })
        }
        _ => field_selector,
    }
}

/// `--sort-by`: orders objects by the first value the path finds in each, as kubectl does:
/// numbers by value, strings and timestamps as text; objects where it finds nothing first.
/// Values of different kinds (a number and a string) are a usage error.
fn sort_by(objects: &mut [print::Item], by: &jsonpath::Template) -> Result<(), Error> {
    use print::Printable as _;
    // Each object is decoded for its key alone; only the keys are kept.
    let mut keyed = Vec::with_capacity(objects.len());
    for o in objects.iter() {
        let doc = print::to_value(&*o.decoded()?)?;
        let key = by.values(&doc).first().map(|v| (*v).clone());
        keyed.push((key, o.clone()));
    }
    let mut mixed = false;
    keyed.sort_by(|(a, _), (b, _)| match (a, b) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, Some(_)) => std::cmp::Ordering::Less,
        (Some(_), None) => std::cmp::Ordering::Greater,
        (Some(a), Some(b)) => jsonpath::compare(a, b).unwrap_or_else(|| {
            mixed = true;
            std::cmp::Ordering::Equal
        }),
    });
    if mixed {
        return Err(Error::Usage(
            "--sort-by: the path finds values of different types (numbers and strings) to \
             compare"
                .to_owned(),
        ));
    }
    for (slot, (_, o)) in objects.iter_mut().zip(keyed) {
        *slot = o;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_in_the_middle() {
        let long = format!(
            "error: invalid value '{}' for '<RESOURCE>'",
            "x".repeat(130_000)
        );
        let short = shorten_lines(&long);
        assert!(short.chars().count() <= MAX_MESSAGE_LINE, "{short}");
        assert!(short.starts_with("error: invalid value 'xxx"));
        assert!(short.ends_with("' for '<RESOURCE>'"));
        assert!(short.contains('…'));
        assert_eq!(shorten_lines("short\nlines"), "short\nlines");
    }

    #[test]
    fn usage_errors_keep_the_message_and_the_hint() {
        let e = args::parse(["kinformer", "watch", "pods,"].map(Into::into)).unwrap_err();
        let text = without_usage(&e.render().to_string());
        assert!(text.starts_with("error: invalid value 'pods,'"), "{text}");
        assert!(text.contains("--help"), "{text}");
        assert!(!text.contains("Usage:"), "{text}");
        assert!(text.lines().count() <= 3, "{text}");
    }

    #[test]
    fn each_client_error_has_its_class_and_exit_code() {
        use kinformer_client::Error as E;
        let message = || "m".to_owned();
        let cases = [
            (
                E::Connect {
                    source: "refused".into(),
                },
                3,
            ),
            (
                E::Request {
                    source: "reset".into(),
                },
                3,
            ),
            (
                E::Timeout {
                    waiting_for: "x",
                    limit: Duration::from_secs(1),
                },
                3,
            ),
            (E::Tls { message: message() }, 3),
            (E::Unauthorized { message: message() }, 4),
            (E::Forbidden { message: message() }, 4),
            (E::Auth { message: message() }, 4),
            (
                E::ExecTimeout {
                    command: "c".into(),
                    timeout: Duration::from_secs(1),
                },
                4,
            ),
            (
                E::Config {
                    path: None,
                    field: "f".into(),
                    message: message(),
                },
                5,
            ),
            (E::InvalidRequest { message: message() }, 5),
            (
                E::Config {
                    path: None,
                    field: "users[u].user.tokenFile".into(),
                    message: message(),
                },
                4,
            ),
            (E::NotFound { message: message() }, 6),
            (
                E::InvalidName {
                    what: "namespace",
                    value: "A".into(),
                    problems: message(),
                },
                2,
            ),
            (
                E::Api {
                    status: Box::new(kinformer_core::Status::failure(400, "BadRequest", "m")),
                },
                2,
            ),
            (
                E::Api {
                    status: Box::new(kinformer_core::Status::failure(422, "Invalid", "m")),
                },
                1,
            ),
            (
                E::ServerError {
                    code: 500,
                    retry_after: None,
                    message: message(),
                },
                1,
            ),
            (E::Gone { message: message() }, 1),
        ];
        for (e, code) in cases {
            assert_eq!(Class::of_client(&e).exit_code(), code, "{e:?}");
            // The same through the seam the informer speaks.
            let neutral = kinformer_core::list_watch::Error::from(e);
            assert_eq!(
                Class::of_list_watch(&neutral).exit_code(),
                code,
                "{neutral}"
            );
        }
        assert_eq!(
            Error::UnknownResource("widgets.example.com".into()).to_string(),
            "the server doesn't have a resource type \"widgets\""
        );
        assert_eq!(Error::UnknownResource("x".into()).class().exit_code(), 6);
        assert_eq!(Error::NoConfig.class().exit_code(), 5);
        assert_eq!(Error::Usage("u".into()).class().exit_code(), 2);
        assert_eq!(
            (Signal::Interrupt.exit_code(), Signal::Terminate.exit_code()),
            (130, 143)
        );
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour_on_stderr(true, None));
        assert!(colour_on_stderr(true, Some("".into())));
        assert!(!colour_on_stderr(true, Some("1".into())));
        assert!(!colour_on_stderr(false, None));
    }
}
