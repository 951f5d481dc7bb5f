//! The command line: `kinformer <watch|get> <resource> [flags]`.

use std::path::PathBuf;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Secret, Service};
use kinformer_core::{ApiResource, FieldSelector, LabelSelector, ListParams};

use crate::Error;

pub(crate) const USAGE: &str = "\
usage: kinformer <watch|get> <resource> [flags]

resources: pods, services, configmaps, secrets, namespaces, nodes, deployments, replicasets,
           statefulsets, daemonsets (and their kubectl short names)

flags:
  -n, --namespace NS       only this namespace (default: all namespaces)
  -A, --all-namespaces     all namespaces (the default)
  -l, --selector S         label selector, e.g. app=web,tier!=db
      --field-selector S   field selector, e.g. spec.nodeName=node-1
      --kubeconfig PATH    use this kubeconfig
      --context NAME       use this context of the kubeconfig
      --max-events N       watch: stop after N events (initial objects included)
      --sim                use an embedded simulated cluster even if a kubeconfig exists
      --sim-pods N         pods the simulated cluster starts with (default 200)
      --sim-churn RATE     writes per second in the simulated cluster (default 20/s)
      --seed N             seed of the simulated cluster's pods and writes (default 1)";

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    /// List, then watch, printing every change.
    Watch,
    /// List once.
    Get,
}

/// The parsed command line.
#[derive(Debug)]
pub(crate) struct Args {
    pub(crate) command: Command,
    pub(crate) resource: ApiResource,
    pub(crate) namespace: Option<String>,
    pub(crate) label_selector: Option<String>,
    pub(crate) field_selector: Option<String>,
    pub(crate) kubeconfig: Option<PathBuf>,
    pub(crate) context: Option<String>,
    pub(crate) max_events: Option<u64>,
    pub(crate) sim: bool,
    pub(crate) sim_pods: usize,
    pub(crate) sim_churn: f64,
    pub(crate) seed: u64,
}

impl Args {
    /// The list options the selectors make.
    pub(crate) fn selectors(&self) -> ListParams {
        ListParams {
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            ..ListParams::default()
        }
    }
}

/// The resource a name or kubectl short name stands for.
fn resource(name: &str) -> Option<ApiResource> {
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

/// Parses the arguments after the program name.
pub(crate) fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, Error> {
    let usage = |what: String| Error::Usage(format!("kinformer: {what}\n\n{USAGE}"));
    let command = match it.next().as_deref() {
        Some("watch") => Command::Watch,
        Some("get") => Command::Get,
        None => return Err(Error::Usage(USAGE.to_owned())),
        Some(other) => return Err(usage(format!("unknown command {other:?}"))),
    };
    let name = it
        .next()
        .ok_or_else(|| usage("which resource? (for example: pods)".to_owned()))?;
    let resource = resource(&name).ok_or_else(|| usage(format!("unknown resource {name:?}")))?;
    let mut a = Args {
        command,
        resource,
        namespace: None,
        label_selector: None,
        field_selector: None,
        kubeconfig: None,
        context: None,
        max_events: None,
        sim: false,
        sim_pods: 200,
        sim_churn: 20.0,
        seed: 1,
    };
    while let Some(flag) = it.next() {
        let (flag, inline) = match flag.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (flag, None),
        };
        match flag.as_str() {
            "-A" | "--all-namespaces" => {
                a.namespace = None;
                continue;
            }
            "--sim" => {
                a.sim = true;
                continue;
            }
            "-n" | "--namespace" | "-l" | "--selector" | "--field-selector" | "--kubeconfig"
            | "--context" | "--max-events" | "--sim-pods" | "--sim-churn" | "--seed" => {}
            other => return Err(usage(format!("unknown flag {other}"))),
        }
        let value = inline
            .or_else(|| it.next())
            .ok_or_else(|| usage(format!("{flag} needs a value")))?;
        let number = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| usage(format!("{flag}: {v:?} is not a whole number")))
        };
        match flag.as_str() {
            "-n" | "--namespace" => a.namespace = Some(value),
            "-l" | "--selector" => {
                value
                    .parse::<LabelSelector>()
                    .map_err(|e| usage(e.to_string()))?;
                a.label_selector = Some(value);
            }
            "--field-selector" => {
                value
                    .parse::<FieldSelector>()
                    .map_err(|e| usage(e.to_string()))?;
                a.field_selector = Some(value);
            }
            "--kubeconfig" => a.kubeconfig = Some(PathBuf::from(value)),
            "--context" => a.context = Some(value),
            "--max-events" => a.max_events = Some(number(&value)?),
            "--sim-pods" => {
                a.sim_pods = usize::try_from(number(&value)?)
                    .map_err(|_| usage("--sim-pods is too large".to_owned()))?;
            }
            "--sim-churn" => {
                a.sim_churn = kinformer_sim::ChurnConfig::parse_rate(&value)
                    .map_err(|e| usage(format!("--sim-churn: {e}")))?;
            }
            _ => a.seed = number(&value)?,
        }
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<Args, Error> {
        parse(s.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn parses_commands_resources_and_flags() {
        let a = parse_str("watch po -n shop -l app=web --field-selector=spec.nodeName=n1 --max-events 10 --sim --sim-pods 5 --sim-churn 100/s --seed 7").unwrap();
        assert_eq!(a.command, Command::Watch);
        assert_eq!(a.resource.plural, "pods");
        assert_eq!(a.namespace.as_deref(), Some("shop"));
        assert_eq!(a.selectors().label_selector.as_deref(), Some("app=web"));
        assert_eq!(
            a.selectors().field_selector.as_deref(),
            Some("spec.nodeName=n1")
        );
        assert_eq!(a.max_events, Some(10));
        assert!(a.sim);
        assert_eq!((a.sim_pods, a.sim_churn, a.seed), (5, 100.0, 7));

        let a = parse_str("get deploy -n x -A --kubeconfig /k --context c").unwrap();
        assert_eq!(a.command, Command::Get);
        assert_eq!(a.resource.group, "apps");
        assert_eq!(a.namespace, None);
        assert_eq!(a.kubeconfig, Some(PathBuf::from("/k")));
        assert_eq!(a.context.as_deref(), Some("c"));
    }

    #[test]
    fn rejects_bad_command_lines_with_the_usage() {
        for (line, says) in [
            ("", "usage:"),
            ("frob pods", "unknown command \"frob\""),
            ("watch", "which resource?"),
            ("watch widgets", "unknown resource \"widgets\""),
            ("watch pods -n", "-n needs a value"),
            ("watch pods --max-events ten", "not a whole number"),
            ("watch pods -l a==b==c", "invalid selector"),
            ("watch pods --field-selector nope", "invalid selector"),
            ("watch pods --colour", "unknown flag --colour"),
        ] {
            let err = parse_str(line).unwrap_err().to_string();
            assert!(err.contains(says), "{line:?}: {err}");
            assert!(err.contains("usage:"), "{line:?}: {err}");
        }
    }
}
