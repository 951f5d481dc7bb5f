//! The command line, parsed by clap: `kinformer <watch|get> <resource> [flags]`,
//! `kinformer sim [flags]` and `kinformer completions <shell>`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args as ClapArgs, CommandFactory as _, FromArgMatches as _, Parser, Subcommand};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Secret, Service};
use kinformer_core::{ApiResource, FieldSelector, LabelSelector, ListParams};

use crate::jsonpath::Template;
use crate::print::{Column, Format};

/// The most writes per second `--churn` and `--sim-churn` accept. The simulated server applies
/// every write under one lock; far above this it spends all its time writing.
pub(crate) const MAX_CHURN_PER_SEC: f64 = 100_000.0;

/// The most pods `--sim-pods` and `sim --pods` accept. The simulated server keeps every object in
/// memory and seeds them before it serves; a million pods (with their nodes, workloads and
/// services) is already far more than the largest real clusters run.
pub(crate) const MAX_SIM_PODS: usize = 1_000_000;

/// The exit codes, as `kinformer --help` shows them (docs/cli.md has the same table).
pub(crate) const EXIT_CODES: &str = "\
Exit codes:
  0    done (also when stdout or stderr is closed early: kinformer get pods | head -1)
  1    any other failure (a server error, a NAME get did not find, ...)
  2    usage: an unknown flag or command, a bad selector or value, a request the server
       rejected as malformed (400)
  3    the API server cannot be reached: refused, DNS, TLS, or no answer in time
  4    bad credentials: refused (401), forbidden (403), or they cannot be obtained (a
       credential plugin failed or hung, a token file is missing, an oidc id-token expired)
  5    a broken or missing kubeconfig (missing with --no-sim)
  6    an unknown resource type
  130  interrupted by Ctrl-C (SIGINT)
  143  terminated by SIGTERM
  Ctrl-C or SIGTERM while a failure is being retried exits with that failure's code.";

/// Lists and watches Kubernetes resources through kinformer, or runs its simulated API server.
#[derive(Debug, Parser)]
#[command(
    name = "kinformer",
    version,
    propagate_version = true,
    after_help = EXIT_CODES,
    args = flags_before_the_verb()
)]
pub(crate) struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

impl Cli {
    /// `-v N`, wherever it was given.
    pub(crate) fn verbosity(&self) -> Option<u8> {
        match &self.command {
            Command::Watch(q) | Command::Get(q) => q.verbosity,
            Command::Stats(a) => a.query.verbosity,
            Command::Sim(a) => a.verbosity,
            Command::Completions { .. } => None,
        }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List, then watch, printing every change (ADDED, MODIFIED, DELETED) until Ctrl-C.
    Watch(Query),
    /// List once, one line per object, sorted by key.
    Get(Query),
    /// Run an informer and print its live metrics every interval: events/s by type, objects
    /// cached, handler lag, queue depth, the cache's resourceVersion, watch events, lists,
    /// relists, watch restarts, errors.
    Stats(StatsArgs),
    /// Run the simulated API server until Ctrl-C, and write a kubeconfig for it.
    Sim(SimArgs),
    /// Print a shell completion script (for example: `kinformer completions bash`).
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
}

/// What `watch` and `get` ask for, and from where.
#[derive(Debug, ClapArgs)]
pub(crate) struct Query {
    /// The resource, as kubectl takes it: plural, singular, short name or kind (pods, pod, po,
    /// Pod), optionally with its group (deployments.apps, widgets.example.com) or version and
    /// group (deployments.v1.apps); custom resources through the server's discovery
    /// (`get` takes several, comma-separated: pods,nodes); or TYPE/NAME (pod/web-1)
    #[arg(value_parser = parse_resources)]
    pub(crate) resource: Resources,
    /// Only the objects with these names (or more TYPE/NAME arguments after a TYPE/NAME)
    #[arg(value_name = "NAME")]
    pub(crate) names: Vec<String>,
    /// Output format: text (a summary per object), wide, json, yaml, name, jsonpath=TEMPLATE,
    /// custom-columns=HEADER:PATH,...
    #[arg(short = 'o', long, value_name = "FORMAT", default_value = "text", value_parser = parse_format)]
    pub(crate) output: Format,
    /// get: after the list, print every change as it happens (as kubectl get -w)
    #[arg(short = 'w', long)]
    pub(crate) watch: bool,
    /// Tables: leave out the header row
    #[arg(long)]
    pub(crate) no_headers: bool,
    /// Tables: a column with the value of each of these labels (-L app,tier or -L app -L tier)
    #[arg(short = 'L', long, value_name = "KEY", value_delimiter = ',')]
    pub(crate) label_columns: Vec<String>,
    /// get: sort by the value at this JSONPath ('{.metadata.name}' or .status.phase)
    #[arg(long, value_name = "JSONPATH", value_parser = parse_sort_by)]
    pub(crate) sort_by: Option<Template>,
    /// Tables: name each object with its kind (pod/web-1)
    #[arg(long)]
    pub(crate) show_kind: bool,
    /// Show every object's labels
    #[arg(long)]
    pub(crate) show_labels: bool,
    /// Only this namespace (default: the context's namespace, as kubectl; an empty value means
    /// the context's namespace too)
    #[arg(short = 'n', long, value_name = "NS")]
    pub(crate) namespace: Option<String>,
    /// All namespaces (overrides --namespace)
    #[arg(short = 'A', long)]
    pub(crate) all_namespaces: bool,
    /// Label selector, e.g. app=web,tier!=db
    #[arg(short = 'l', long, value_name = "S", value_parser = parse_label_selector)]
    pub(crate) selector: Option<String>,
    /// Field selector, e.g. spec.nodeName=node-1
    #[arg(long, value_name = "S", value_parser = parse_field_selector)]
    pub(crate) field_selector: Option<String>,
    /// Use this kubeconfig
    #[arg(long, value_name = "PATH")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// Use this context of the kubeconfig
    #[arg(long, value_name = "NAME")]
    pub(crate) context: Option<String>,
    /// Where discovery is cached, as kubectl's --cache-dir (default: KUBECACHEDIR, else
    /// ~/.kube/cache; the files are under DIR/discovery/HOST_PORT and used for 6 hours)
    #[arg(long, value_name = "DIR")]
    pub(crate) cache_dir: Option<PathBuf>,
    /// Give up on a request (a list page) after this long: 30s, 1m, or a number of seconds; 0 means
    /// no limit
    #[arg(long, value_name = "DURATION", value_parser = parse_request_timeout)]
    pub(crate) request_timeout: Option<RequestTimeout>,
    /// watch: stop after N events (initial objects included)
    #[arg(long, value_name = "N")]
    pub(crate) max_events: Option<u64>,
    /// Use an embedded simulated cluster even if a kubeconfig exists
    #[arg(long, conflicts_with = "no_sim")]
    pub(crate) sim: bool,
    /// Never fall back to the embedded simulated cluster (also: KINFORMER_NO_SIM=1)
    #[arg(long)]
    pub(crate) no_sim: bool,
    /// Pods the simulated cluster starts with (at most 1000000)
    #[arg(long, value_name = "N", default_value_t = 200, value_parser = parse_pods)]
    pub(crate) sim_pods: usize,
    /// Writes per second in the simulated cluster (5/s, 300/m, or a number per second)
    #[arg(long, value_name = "RATE", default_value = "5/s", value_parser = parse_churn)]
    pub(crate) sim_churn: f64,
    /// Seed of the simulated cluster's pods and writes
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) seed: u64,
    /// Serve the informer's metrics in Prometheus text format at http://ADDR/metrics while the
    /// command runs, e.g. 127.0.0.1:9090 (port 0 picks a free one; the address is printed on
    /// stderr)
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics_addr: Option<std::net::SocketAddr>,
    /// Log verbosity, as kubectl's -v: 0 warnings only (the default), 1-3 info, 4-6 debug (6
    /// shows each request), 7 and more trace; overrides RUST_LOG for kinformer's own logs
    #[arg(short = 'v', long = "v", value_name = "N")]
    pub(crate) verbosity: Option<u8>,
    /// The types and names asked for, from the positional arguments ([`parse`] fills it in).
    #[arg(skip)]
    pub(crate) targets: Vec<Target>,
}

/// One resource type of a command line and the names asked for of it (none: every object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// The type as typed (`pods`, `deploy.apps`).
    pub(crate) resource: String,
    /// The names, validated.
    pub(crate) names: Vec<String>,
}

impl Query {
    /// The namespace asked for: `None` for all namespaces, `Some("")` for the context's (the
    /// default, as in kubectl).
    pub(crate) fn namespace(&self) -> Option<&str> {
        if self.all_namespaces {
            None
        } else {
            Some(self.namespace.as_deref().unwrap_or(""))
        }
    }

    /// Turns the positional arguments into [`Target`]s, as kubectl reads them: `TYPE[,TYPE...]
    /// [NAME...]` (every type with every name), or `TYPE/NAME...` (each name with its type,
    /// the types in the order they first appear). Every name is checked.
    fn make_targets(&mut self) -> Result<(), String> {
        let mut targets: Vec<Target> = Vec::new();
        match &self.resource.named {
            None => {
                if let Some(bad) = self.names.iter().find(|n| n.contains('/')) {
                    return Err(format!(
                        "there is no need to specify a resource type as a separate argument when \
                         passing arguments in resource/name form (write get TYPE/NAME instead of \
                         get TYPE TYPE/NAME): {bad:?}"
                    ));
                }
                for name in &self.names {
                    check_name(name)?;
                }
                for r in &self.resource.types {
                    targets.push(Target {
                        resource: r.clone(),
                        names: self.names.clone(),
                    });
                }
            }
            Some(first) => {
                let mut pairs = vec![(self.resource.types[0].clone(), first.clone())];
                for arg in &self.names {
                    let Some((t, n)) = arg.split_once('/') else {
                        return Err(format!(
                            "arguments in resource/name form must have a single resource and \
                             name: {arg:?} (write TYPE/NAME for every argument)"
                        ));
                    };
                    let parsed = parse_resources(arg)?;
                    if parsed.types.len() != 1 {
                        return Err(format!("{t:?}: one type per TYPE/NAME argument"));
                    }
                    pairs.push((t.to_owned(), n.to_owned()));
                }
                for (t, n) in pairs {
                    check_name(&n)?;
                    match targets.iter_mut().find(|x| x.resource == t) {
                        Some(x) => x.names.push(n),
                        None => targets.push(Target {
                            resource: t,
                            names: vec![n],
                        }),
                    }
                }
            }
        }
        self.targets = targets;
        Ok(())
    }

    /// Whether the command names exactly one object of one type (`get ns default`,
    /// `get ns/default`): kubectl then prints the object itself, not a `List`.
    pub(crate) fn single_object(&self) -> bool {
        matches!(&self.targets[..], [t] if t.names.len() == 1)
    }

    /// The list options the selectors make.
    pub(crate) fn selectors(&self) -> ListParams {
        ListParams {
            label_selector: self.selector.clone(),
            field_selector: self.field_selector.clone(),
            ..ListParams::default()
        }
    }
}

/// kubectl's habit of flags before the verb (`kinformer -n shop get pods`): the flags of `watch`,
/// `get` and `stats`, taken before any verb too. They are `global`, so clap hands each to the
/// verb's own flag of the same id, and hidden, so that help shows each flag once, under its
/// verb. A verb that does not take a flag given before it refuses it ([`parse`]).
fn flags_before_the_verb() -> Vec<clap::Arg> {
    StatsArgs::augment_args(clap::Command::new("stats"))
        .get_arguments()
        .filter(|arg| !arg.is_positional())
        .map(|arg| arg.clone().global(true).hide(true))
        .collect()
}

/// Parses a command line: clap, plus what clap leaves to the caller for a flag given before the
/// verb. Clap hands such a flag to whichever verb follows, so one the verb does not take
/// (`kinformer -n shop sim`) is refused here, as clap refuses it after the verb; so is `--sim`
/// with `--no-sim` when they stand on either side of the verb.
pub(crate) fn parse(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Result<Cli, clap::Error> {
    use clap::error::ErrorKind;
    use clap::parser::ValueSource;
    let mut command = Cli::command();
    let matches = command.try_get_matches_from_mut(args)?;
    if let Some((verb, given)) = matches.subcommand() {
        // The verb's own flags, as declared: before clap added the global ones to it.
        let declared = Cli::command();
        let takes = |id: &str| {
            declared
                .find_subcommand(verb)
                .is_some_and(|c| c.get_arguments().any(|arg| arg.get_id() == id))
        };
        let refused = command.find_subcommand(verb).and_then(|sub| {
            let arg = sub.get_arguments().find(|arg| {
                let id = arg.get_id().as_str();
                given.value_source(id) == Some(ValueSource::CommandLine) && !takes(id)
            })?;
            Some(arg.get_long().unwrap_or(arg.get_id().as_str()).to_owned())
        });
        if let Some(flag) = refused {
            return Err(command.error(
                ErrorKind::UnknownArgument,
                format!("unexpected argument '--{flag}' found ({verb} does not take it)"),
            ));
        }
    }
    let mut cli = Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut command))?;
    let query = match &mut cli.command {
        Command::Watch(q) | Command::Get(q) => Some(q),
        Command::Stats(a) => Some(&mut a.query),
        Command::Sim(_) | Command::Completions { .. } => None,
    };
    if let Some(q) = query {
        q.make_targets()
            .map_err(|e| command.error(ErrorKind::InvalidValue, e))?;
    }
    let query = match &cli.command {
        Command::Watch(q) | Command::Get(q) => Some(q),
        Command::Stats(a) => Some(&a.query),
        Command::Sim(_) | Command::Completions { .. } => None,
    };
    if query.is_some_and(|q| q.sim && q.no_sim) {
        return Err(command.error(
            ErrorKind::ArgumentConflict,
            "the argument '--sim' cannot be used with '--no-sim'",
        ));
    }
    Ok(cli)
}

/// `kinformer stats`'s flags.
#[derive(Debug, ClapArgs)]
pub(crate) struct StatsArgs {
    /// What to watch, and from where.
    #[command(flatten)]
    pub(crate) query: Query,
    /// How often to report: 1s, 500ms, 1m
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_interval)]
    pub(crate) interval: Duration,
    /// Stop after N reports
    #[arg(long, value_name = "N")]
    pub(crate) count: Option<u64>,
}

/// `kinformer sim`'s flags.
#[derive(Debug, ClapArgs)]
pub(crate) struct SimArgs {
    /// The port to listen on, on 127.0.0.1 (0 picks a free one)
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) port: u16,
    /// Pods to start with (at most 1000000)
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = parse_pods)]
    pub(crate) pods: usize,
    /// Writes per second (50/s, 600/m, or a number per second)
    #[arg(long, value_name = "RATE", default_value = "0", value_parser = parse_churn)]
    pub(crate) churn: f64,
    /// Seed of the pods and of the writes
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) seed: u64,
    /// Serve HTTPS with a generated CA
    #[arg(long)]
    pub(crate) tls: bool,
    /// Require this bearer token
    #[arg(long, value_name = "T")]
    pub(crate) token: Option<String>,
    /// Write the kubeconfig here (it must not exist yet; it is removed on exit)
    #[arg(long, value_name = "PATH")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// The Kubernetes release /version reports: 1.32 to 1.36
    #[arg(long, value_name = "VERSION", default_value = "1.34", value_parser = parse_kube_version)]
    pub(crate) kube_version: kinformer_sim::KubeVersion,
    /// Behave like an API server started with --watch-cache=false: lists at
    /// resourceVersion=0 honour limit (paged), and watches get no periodic bookmarks
    #[arg(long)]
    pub(crate) no_watch_cache: bool,
    /// Log verbosity, as kubectl's -v: 0 the default (info), 1-3 info, 4-6 debug, 7 and more
    /// trace; overrides RUST_LOG for kinformer's own logs
    #[arg(short = 'v', long = "v", value_name = "N")]
    pub(crate) verbosity: Option<u8>,
    /// Serve fault-injection endpoints under /kinformer-sim/admin/ (POST compact,
    /// close-watches, drop-connections, gone-next-watch, fail?code=429&count=2&retryAfter=1,
    /// stall?ms=5000, churn?rate=50/s, clear)
    #[arg(long)]
    pub(crate) admin: bool,
}

/// A parsed `--request-timeout`: a bound, or none at all (`0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RequestTimeout(pub(crate) Option<Duration>);

/// The resource types a command line names, as typed: one, or several comma-separated
/// (`pods,nodes`), or one with a name (`pod/web-1`). They are resolved once the server is known
/// ([`builtin`], then discovery).
#[derive(Debug, Clone)]
pub(crate) struct Resources {
    /// The types.
    pub(crate) types: Vec<String>,
    /// The name of `TYPE/NAME`.
    pub(crate) named: Option<String>,
}

fn parse_resources(arg: &str) -> Result<Resources, String> {
    let (names, named) = match arg.split_once('/') {
        Some((t, n)) => (t, Some(n.to_owned())),
        None => (arg, None),
    };
    let types: Vec<String> = names.split(',').map(str::to_owned).collect();
    if types.iter().any(String::is_empty) {
        return Err("an empty resource name (write pods or pods,nodes)".to_owned());
    }
    if let Some(bad) = types
        .iter()
        .find(|n| n.contains(|c: char| c.is_whitespace() || c.is_control()))
    {
        return Err(format!("{bad:?} is not a resource name"));
    }
    if let Some(name) = &named {
        if types.len() > 1 {
            return Err("one type per TYPE/NAME argument (write pod/a deploy/b)".to_owned());
        }
        check_name(name)?;
    }
    Ok(Resources { types, named })
}

/// Checks an object name given on the command line: it becomes a path segment and a field
/// selector's value, so it must be one (not empty, `.` or `..`, no `/` or `%`) and hold no
/// control characters.
fn check_name(name: &str) -> Result<(), String> {
    let mut problems = kinformer_core::validation::is_valid_path_segment_name(name);
    if name.chars().any(char::is_control) {
        problems.push("may not contain control characters".to_owned());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "invalid resource name {name:?}: {}",
            problems.join("; ")
        ))
    }
}

/// `-o`: the named formats, `jsonpath=TEMPLATE` and `custom-columns=HEADER:PATH,...`.
fn parse_format(s: &str) -> Result<Format, String> {
    const ALLOWED: &str = "text, wide, json, yaml, name, jsonpath=TEMPLATE, \
                           custom-columns=HEADER:PATH,...";
    Ok(match s {
        "text" => Format::Text,
        "wide" => Format::Wide,
        "json" => Format::Json,
        "yaml" => Format::Yaml,
        "name" => Format::Name,
        _ => {
            if let Some(template) = s.strip_prefix("jsonpath=") {
                Format::JsonPath(Template::parse(template).map_err(|e| e.to_string())?)
            } else if let Some(spec) = s.strip_prefix("custom-columns=") {
                let mut columns = Vec::new();
                for part in spec.split(',') {
                    let Some((header, path)) = part.split_once(':') else {
                        return Err(format!(
                            "custom-columns: {part:?} is not HEADER:PATH (write \
                             NAME:.metadata.name,NODE:.spec.nodeName)"
                        ));
                    };
                    columns.push(Column {
                        header: header.to_owned(),
                        path: Template::parse_relaxed(path).map_err(|e| e.to_string())?,
                    });
                }
                Format::CustomColumns(columns)
            } else if matches!(s, "jsonpath" | "custom-columns") {
                return Err(format!("{s} needs a template: -o {s}=..."));
            } else {
                return Err(format!(
                    "unable to match a printer suitable for the output format {s:?}, allowed \
                     formats are: {ALLOWED}"
                ));
            }
        }
    })
}

fn parse_sort_by(s: &str) -> Result<Template, String> {
    Template::parse_relaxed(s).map_err(|e| e.to_string())
}

/// The resource a name stands for when it is one of the built-in types every Kubernetes API
/// server serves at the same path (core `v1` and `apps/v1`): by plural, singular or kubectl
/// short name, optionally with its group (`deployments.apps`, `pods.` for the core group).
///
/// This is the fast path: these names resolve without discovery's requests (one per group
/// version, dozens on a real cluster), and to what discovery would answer too, since kubectl
/// prefers the core group, then `apps`, to any custom resource claiming the same short name.
/// Any other name (`widgets`, `deployments.batch`, `Pod`) is left to discovery.
pub(crate) fn builtin(name: &str) -> Option<ApiResource> {
    if let Some((short, group)) = name.split_once('.') {
        return builtin(short).filter(|r| r.group == group);
    }
    Some(match name {
        "pods" | "pod" | "po" => ApiResource::of::<Pod>(),
        "services" | "service" | "svc" => ApiResource::of::<Service>(),
        "configmaps" | "configmap" | "cm" => ApiResource::of::<ConfigMap>(),
        "secrets" | "secret" => ApiResource::of::<Secret>(),
        "namespaces" | "namespace" | "ns" => ApiResource::of::<Namespace>(),
        "nodes" | "node" | "no" => ApiResource::of::<Node>(),
        "deployments" | "deployment" | "deploy" => ApiResource::of::<Deployment>(),
        "replicasets" | "replicaset" | "rs" => ApiResource::of::<ReplicaSet>(),
        "statefulsets" | "statefulset" | "sts" => ApiResource::of::<StatefulSet>(),
        "daemonsets" | "daemonset" | "ds" => ApiResource::of::<DaemonSet>(),
        _ => return None,
    })
}

fn parse_label_selector(s: &str) -> Result<String, String> {
    s.parse::<LabelSelector>().map_err(|e| e.to_string())?;
    Ok(s.to_owned())
}

fn parse_field_selector(s: &str) -> Result<String, String> {
    s.parse::<FieldSelector>().map_err(|e| e.to_string())?;
    Ok(s.to_owned())
}

/// A number of pods for the simulated cluster, at most [`MAX_SIM_PODS`].
fn parse_pods(s: &str) -> Result<usize, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err("not a number of pods: write a whole number, such as 1000".to_owned());
    }
    match s.parse::<usize>() {
        Ok(pods) if pods <= MAX_SIM_PODS => Ok(pods),
        // Too large for a number, or for the server.
        _ => Err(format!(
            "more than the maximum of {MAX_SIM_PODS} pods (the simulated server holds them all \
             in memory)"
        )),
    }
}

fn parse_kube_version(s: &str) -> Result<kinformer_sim::KubeVersion, String> {
    kinformer_sim::KubeVersion::parse(s)
        .ok_or_else(|| "not a modelled release: write one of 1.32 to 1.36".to_owned())
}

/// A churn rate (`50/s`, `600/m`, `3600/h`, or a bare number per second), at most
/// [`MAX_CHURN_PER_SEC`].
fn parse_churn(s: &str) -> Result<f64, String> {
    // The sim's own messages quote the value; clap already shows it, so keep only the reason.
    let rate = kinformer_sim::ChurnConfig::parse_rate(s).map_err(|_| {
        "not a rate: write a number of writes per second (50/s), minute (600/m) or hour (3600/h)"
            .to_owned()
    })?;
    if rate > MAX_CHURN_PER_SEC {
        return Err(format!(
            "more than the maximum of {MAX_CHURN_PER_SEC}/s writes"
        ));
    }
    Ok(rate)
}

/// A report interval: a duration as `--request-timeout` takes it, but never zero.
fn parse_interval(s: &str) -> Result<Duration, String> {
    match parse_request_timeout(s)? {
        RequestTimeout(Some(d)) => Ok(d),
        RequestTimeout(None) => Err("the interval must be longer than zero".to_owned()),
    }
}

/// A kubectl-style `--request-timeout`: `0` (no limit), a bare number of seconds, or a sequence
/// of numbers with units `ms`, `s`, `m`, `h` (`1m30s`).
fn parse_request_timeout(s: &str) -> Result<RequestTimeout, String> {
    const HINT: &str = "not a duration: write 30s, 1m, 1h, 500ms, 1m30s, or a number of seconds";
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(RequestTimeout(
            (secs > 0).then(|| Duration::from_secs(secs)),
        ));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    if rest.is_empty() {
        return Err(HINT.to_owned());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(HINT.to_owned());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| HINT.to_owned())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let part = match &rest[..unit_len] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            _ => return Err(HINT.to_owned()),
        };
        rest = &rest[unit_len..];
        total = total.saturating_add(part);
    }
    Ok(RequestTimeout((!total.is_zero()).then_some(total)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("kinformer").chain(line.split_whitespace()))
    }

    fn query(line: &str) -> Query {
        match parse(line).unwrap().command {
            Command::Watch(q) | Command::Get(q) => q,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parses_commands_resources_and_flags() {
        let cli = parse("watch po -n shop -l app=web --field-selector=spec.nodeName=n1 --max-events 10 --sim --sim-pods 5 --sim-churn 100/s --seed 7 --request-timeout 1m").unwrap();
        let Command::Watch(a) = cli.command else {
            panic!("not watch")
        };
        assert_eq!(a.resource.types, ["po"]);
        assert_eq!(a.namespace(), Some("shop"));
        assert_eq!(a.selectors().label_selector.as_deref(), Some("app=web"));
        assert_eq!(
            a.selectors().field_selector.as_deref(),
            Some("spec.nodeName=n1")
        );
        assert_eq!(a.max_events, Some(10));
        assert!(a.sim);
        assert_eq!((a.sim_pods, a.sim_churn, a.seed), (5, 100.0, 7));
        assert_eq!(
            a.request_timeout,
            Some(RequestTimeout(Some(Duration::from_secs(60))))
        );

        let cli = parse("get deploy -n x -A --kubeconfig /k --context c").unwrap();
        let Command::Get(a) = cli.command else {
            panic!("not get")
        };
        assert_eq!(a.resource.types, ["deploy"]);
        assert_eq!(a.namespace(), None);
        assert_eq!(a.kubeconfig, Some(PathBuf::from("/k")));
        assert_eq!(a.context.as_deref(), Some("c"));
        assert_eq!((a.sim_pods, a.sim_churn, a.seed), (200, 5.0, 1));

        // An empty namespace is kept as empty: the context's namespace, as in kubectl.
        assert_eq!(query("get pods --namespace=").namespace(), Some(""));
        assert_eq!(query("get pods --all-namespaces").namespace(), None);
    }

    #[test]
    fn every_short_name_is_known() {
        for (names, plural) in [
            ("pods pod po", "pods"),
            ("services service svc", "services"),
            ("configmaps configmap cm", "configmaps"),
            ("secrets secret", "secrets"),
            ("namespaces namespace ns", "namespaces"),
            ("nodes node no", "nodes"),
            ("deployments deployment deploy", "deployments"),
            ("replicasets replicaset rs", "replicasets"),
            ("statefulsets statefulset sts", "statefulsets"),
            ("daemonsets daemonset ds", "daemonsets"),
        ] {
            for name in names.split(' ') {
                assert_eq!(builtin(name).unwrap().plural, plural, "{name}");
            }
        }
    }

    #[test]
    fn several_types_are_comma_separated() {
        assert_eq!(
            query("get pods,no,deploy.apps,widgets.example.com")
                .resource
                .types,
            ["pods", "no", "deploy.apps", "widgets.example.com"]
        );
        for bad in ["get pods,", "get ,pods", "get pods/", "get pods,nodes/x"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_fast_path_knows_built_in_names_and_leaves_the_rest_to_discovery() {
        assert_eq!(builtin("deployments.apps").unwrap().plural, "deployments");
        assert_eq!(builtin("deploy.apps").unwrap().plural, "deployments");
        assert_eq!(builtin("pods.").unwrap().plural, "pods");
        assert_eq!(builtin("ns").unwrap().scope, kinformer_core::Scope::Cluster);
        for other in [
            "deployments.batch",
            "deployments.v1.apps",
            "widgets",
            "widgets.example.com",
            "Pod",
            "pods.apps",
        ] {
            assert!(builtin(other).is_none(), "{other}");
        }
    }

    #[test]
    fn parses_output_names_and_sim_choices() {
        let q = query("get pods web-1 web-2 -o wide --show-labels --no-sim");
        assert_eq!(q.names, ["web-1", "web-2"]);
        assert_eq!(q.output, Format::Wide);
        assert!(q.show_labels && q.no_sim && !q.sim);
        assert_eq!(query("watch pods -ojson").output, Format::Json);
        assert_eq!(query("watch pods").output, Format::Text);
        assert!(parse("watch pods --sim --no-sim").is_err());
        assert!(parse("watch pods -o toml").is_err());
    }

    #[test]
    fn parses_stats_flags() {
        let Command::Stats(a) = parse("stats po --interval 250ms --count 3 --sim")
            .unwrap()
            .command
        else {
            panic!("not stats")
        };
        assert_eq!(a.query.resource.types, ["po"]);
        assert_eq!(a.interval, Duration::from_millis(250));
        assert_eq!(a.count, Some(3));
        assert!(a.query.sim);
        assert!(parse("stats pods --interval 0").is_err());
    }

    #[test]
    fn flags_before_the_verb_are_the_verbs() {
        let args = |line: &str| -> Vec<std::ffi::OsString> {
            std::iter::once("kinformer")
                .chain(line.split_whitespace())
                .map(Into::into)
                .collect()
        };
        let query = |line: &str| match super::parse(args(line)).unwrap().command {
            Command::Watch(q) | Command::Get(q) => q,
            Command::Stats(a) => a.query,
            other => panic!("{other:?}"),
        };
        let q = query("-n shop get pods");
        assert_eq!(
            (q.namespace(), q.resource.types.as_slice()),
            (Some("shop"), &["pods".to_owned()][..])
        );
        let q = query("-nshop --sim watch po -A");
        assert!(q.sim && q.namespace().is_none());
        let q = query("--kubeconfig k -o json -l a=b get pods x");
        assert_eq!(q.kubeconfig, Some(PathBuf::from("k")));
        assert_eq!(
            (q.output, q.selector.as_deref()),
            (Format::Json, Some("a=b"))
        );
        assert_eq!(q.names, ["x"]);
        assert_eq!(
            query("--context=c stats pods").context.as_deref(),
            Some("c")
        );
        // Defaults stay defaults; a flag after the verb is taken as ever.
        let q = query("get pods -n shop --sim-pods 3");
        assert_eq!((q.namespace(), q.sim_pods, q.seed), (Some("shop"), 3, 1));
        let Command::Stats(a) = super::parse(args("--interval 250ms --count 2 stats pods"))
            .unwrap()
            .command
        else {
            panic!("not stats")
        };
        assert_eq!((a.interval, a.count), (Duration::from_millis(250), Some(2)));
        // A flag the verb does not take is refused wherever it stands, and so are flags that
        // conflict across the verb.
        for (line, says) in [
            ("-n shop sim", "'--namespace'"),
            ("sim -n shop", "'--namespace'"),
            ("--interval 1s get pods", "'--interval'"),
            ("get pods --interval 1s", "'--interval'"),
            ("--port 1 sim", "'--port'"),
            ("-o json completions bash", "'--output'"),
            ("-n get pods", "'pods'"),
            ("--sim get pods --no-sim", "cannot be used with"),
            ("get pods --sim --no-sim", "cannot be used with"),
        ] {
            let err = super::parse(args(line)).unwrap_err().to_string();
            assert!(err.contains(says), "{line:?}: {err}");
        }
        // Help and the usage line are as before: the flags before the verb are not shown twice.
        let help = Cli::command().render_help().to_string();
        assert!(help.contains("Usage: kinformer <COMMAND>"), "{help}");
        assert!(!help.contains("--namespace"), "{help}");
        let mut cli = Cli::command();
        cli.build();
        let get = cli
            .find_subcommand_mut("get")
            .unwrap()
            .render_help()
            .to_string();
        assert_eq!(get.matches("-n, --namespace <NS>").count(), 1, "{get}");
        let sim = cli
            .find_subcommand_mut("sim")
            .unwrap()
            .render_help()
            .to_string();
        assert!(!sim.contains("--namespace"), "{sim}");
    }

    fn full(line: &str) -> Result<Query, String> {
        let args = std::iter::once("kinformer")
            .chain(line.split_whitespace())
            .map(std::ffi::OsString::from);
        match super::parse(args).map_err(|e| e.to_string())?.command {
            Command::Watch(q) | Command::Get(q) => Ok(q),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn type_slash_name_arguments_and_names_are_checked() {
        let targets = |line: &str| -> Vec<(String, Vec<String>)> {
            full(line)
                .unwrap()
                .targets
                .into_iter()
                .map(|t| (t.resource, t.names))
                .collect()
        };
        let t = |r: &str, names: &[&str]| {
            (
                r.to_owned(),
                names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(targets("get pods"), [t("pods", &[])]);
        assert_eq!(
            targets("get pods,nodes a b"),
            [t("pods", &["a", "b"]), t("nodes", &["a", "b"])]
        );
        assert_eq!(
            targets("get pod/a deploy/b pod/c"),
            [t("pod", &["a", "c"]), t("deploy", &["b"])]
        );
        assert!(full("get ns default").unwrap().single_object());
        assert!(full("get ns/default").unwrap().single_object());
        assert!(!full("get ns default kube-system").unwrap().single_object());
        assert!(!full("get ns").unwrap().single_object());
        for (line, says) in [
            ("get pod/a b", "resource/name form"),
            ("get pods pod/a", "no need to specify a resource type"),
            ("get pods ..", "invalid resource name"),
            ("get pods a%2Fb", "invalid resource name"),
            ("get pod/..", "invalid resource name"),
            ("get pods,nodes/a", "one type per TYPE/NAME"),
        ] {
            let err = full(line).unwrap_err();
            assert!(err.contains(says), "{line}: {err}");
        }
    }

    #[test]
    fn parses_kubectls_output_and_table_flags() {
        let q = full("get pods -w --no-headers -L app,tier -L zone --sort-by {.metadata.name} --show-kind -o custom-columns=NAME:.metadata.name,NODE:{.spec.nodeName}").unwrap();
        assert!(q.watch && q.no_headers && q.show_kind);
        assert_eq!(q.label_columns, ["app", "tier", "zone"]);
        assert!(q.sort_by.is_some());
        let Format::CustomColumns(columns) = &q.output else {
            panic!("{:?}", q.output)
        };
        assert_eq!(columns.len(), 2);
        assert_eq!(columns[1].header, "NODE");
        assert!(matches!(
            full("get pods -o jsonpath={.items[*].metadata.name}")
                .unwrap()
                .output,
            Format::JsonPath(_)
        ));
        assert_eq!(
            full("get pods --sort-by .status.phase")
                .unwrap()
                .namespace(),
            Some("")
        );
        for (line, says) in [
            ("get pods -o jsonpath", "needs a template"),
            ("get pods -o jsonpath={.a", "unclosed action"),
            ("get pods -o custom-columns=NAME", "not HEADER:PATH"),
            ("get pods -o go-template={{.x}}", "allowed formats are"),
            ("get pods --sort-by {.a[}", "invalid JSONPath"),
        ] {
            let err = full(line).unwrap_err();
            assert!(err.contains(says), "{line}: {err}");
        }
    }

    #[test]
    fn verbosity_is_kubectls_v_anywhere() {
        for line in [
            "-v=6 get pods",
            "get pods -v=6",
            "get pods --v=6",
            "get pods -v 6",
        ] {
            let args = std::iter::once("kinformer")
                .chain(line.split_whitespace())
                .map(std::ffi::OsString::from);
            assert_eq!(super::parse(args).unwrap().verbosity(), Some(6), "{line}");
        }
        for line in ["sim -v=2", "-v 2 sim"] {
            let args = std::iter::once("kinformer")
                .chain(line.split_whitespace())
                .map(std::ffi::OsString::from);
            assert_eq!(super::parse(args).unwrap().verbosity(), Some(2), "{line}");
        }
    }

    #[test]
    fn parses_sim_flags() {
        let cli = parse("sim --port 0 --pods=1000 --churn 50/s --tls --token t --seed 9").unwrap();
        let Command::Sim(a) = cli.command else {
            panic!("not sim")
        };
        assert_eq!((a.port, a.pods, a.churn, a.tls), (0, 1000, 50.0, true));
        assert_eq!((a.token.as_deref(), a.seed), (Some("t"), 9));
        assert!(a.kubeconfig.is_none());
    }

    #[test]
    fn rejects_bad_command_lines() {
        for (line, says) in [
            ("", "Usage"),
            ("frob pods", "unrecognized subcommand 'frob'"),
            ("watch", "<RESOURCE>"),
            ("watch pods,", "empty resource name"),
            ("watch pods -n", "a value is required"),
            ("watch pods --max-events ten", "invalid digit"),
            ("watch pods -l a==b==c", "invalid selector"),
            ("watch pods --field-selector nope", "invalid selector"),
            ("watch pods --colour", "unexpected argument '--colour'"),
            ("watch pods --sim-churn 1e12/s", "maximum"),
            ("sim --churn 100001/s", "maximum"),
            ("sim --churn fast", "not a rate"),
            ("sim --port 70000", "70000"),
            ("get pods --request-timeout 5x", "not a duration"),
        ] {
            let err = parse(line).unwrap_err().to_string();
            assert!(err.contains(says), "{line:?}: {err}");
        }
    }

    #[test]
    fn parses_request_timeouts_like_kubectl() {
        let t = |s: &str| parse_request_timeout(s).map(|t| t.0);
        assert_eq!(t("0"), Ok(None));
        assert_eq!(t("0s"), Ok(None));
        assert_eq!(t("30"), Ok(Some(Duration::from_secs(30))));
        assert_eq!(t("30s"), Ok(Some(Duration::from_secs(30))));
        assert_eq!(t("1m"), Ok(Some(Duration::from_secs(60))));
        assert_eq!(t("1m30s"), Ok(Some(Duration::from_secs(90))));
        assert_eq!(t("2h"), Ok(Some(Duration::from_secs(7200))));
        assert_eq!(t("250ms"), Ok(Some(Duration::from_millis(250))));
        for bad in ["", "s", "1x", "-1", "1.5s", "m1"] {
            assert!(t(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_command_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
