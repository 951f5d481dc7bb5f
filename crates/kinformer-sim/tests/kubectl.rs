//! The real `kubectl` against the simulated server. These tests need `kubectl` on `PATH` and fail
//! (they do not skip) without it; on Debian and Ubuntu it comes with the `kubernetes-client`
//! package, which CI installs. (`kinformer sim` is tested with kubectl in kinformer-cli.)

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use kinformer_core::{ApiResource, Scope};
use kinformer_sim::{Auth, SimConfig, SimServer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::{Child, Command};

/// The bound of every wait on kubectl.
const WAIT: Duration = Duration::from_secs(30);

fn pods() -> ApiResource {
    ApiResource::new("", "v1", "Pod", "pods", Scope::Namespaced)
}

/// A kubeconfig file and a cache directory for one server, removed on drop.
struct Kubectl {
    dir: PathBuf,
}

impl Kubectl {
    fn new(sim: &SimServer) -> Self {
        let k = Self::in_dir(&format!("{}", sim.addr().port()));
        std::fs::write(k.dir.join("kubeconfig"), sim.kubeconfig_yaml()).unwrap();
        k
    }

    /// A directory of its own; the kubeconfig is to be written to `dir/kubeconfig`.
    fn in_dir(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "kinformer-sim-kubectl-{}-{tag}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self { dir }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig")
            .arg(self.dir.join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        c
    }

    fn spawn(&self, args: &[&str], stdin: bool) -> Child {
        let mut c = self.command(args);
        if stdin {
            c.stdin(Stdio::piped());
        }
        c.spawn().expect(
            "kubectl must be on PATH for these tests: install it, for example with \
             `apt-get install kubernetes-client` on Debian or Ubuntu, as .ci/run does",
        )
    }

    /// Runs kubectl to completion; panics unless it succeeds. Returns stdout.
    async fn run(&self, args: &[&str]) -> String {
        self.run_with_stdin(args, None).await
    }

    async fn run_with_stdin(&self, args: &[&str], input: Option<&str>) -> String {
        let mut child = self.spawn(args, input.is_some());
        if let Some(input) = input {
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(input.as_bytes()).await.unwrap();
            drop(stdin);
        }
        let out = tokio::time::timeout(WAIT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish"))
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {stderr}\n{stdout}"
        );
        stdout
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Reads a running kubectl's stdout until `done` holds for the text so far, bounded by [`WAIT`].
async fn read_until(child: &mut Child, out: &mut String, done: impl Fn(&str) -> bool) {
    let stdout = child.stdout.as_mut().unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut buf = [0u8; 8192];
    while !done(out) {
        let n = tokio::time::timeout_at(deadline, stdout.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("kubectl output so far:\n{out}"))
            .unwrap();
        assert!(n > 0, "kubectl exited early; output:\n{out}");
        out.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

/// The watch events in kubectl's `-o json --output-watch-events` output: `(type, name)`.
fn json_events(out: &str) -> Vec<(String, String)> {
    serde_json::Deserializer::from_str(out)
        .into_iter::<Value>()
        .map_while(Result::ok)
        .map(|e| {
            (
                e["type"].as_str().unwrap_or_default().to_owned(),
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

fn has(events: &[(String, String)], t: &str, name: &str) -> bool {
    events.iter().any(|(a, b)| a == t && b == name)
}

/// A pod as a create over HTTP stores it, `Pending` (in-process writes are stored as sent, and the
/// pod printer prints a pod without a phase with an empty STATUS).
fn pod(name: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "default", "labels": {"app": "kubectl-test"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}, "status": {"phase": "Pending"}})
}

#[tokio::test]
async fn get_pods_all_namespaces_json_matches_the_store() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(25, 7);
    let k = Kubectl::new(&sim);
    let out = k.run(&["get", "pods", "-A", "-o", "json"]).await;
    let list: Value = serde_json::from_str(&out).unwrap();
    let items = list["items"].as_array().unwrap();
    let stored = sim.store().list(&pods(), None);
    assert_eq!(items.len(), 25);
    assert_eq!(stored.len(), 25);
    // kubectl (since 1.21) hides managedFields; everything else must be exactly as stored.
    let without_managed_fields = |o: &Value| {
        let mut o = o.clone();
        o["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        o
    };
    for (got, want) in items.iter().zip(&stored) {
        assert!(want["metadata"]["managedFields"].is_array());
        assert!(
            without_managed_fields(got) == without_managed_fields(want),
            "kubectl showed {} differently",
            want["metadata"]["name"]
        );
    }
}

#[tokio::test]
async fn get_with_selectors_single_objects_and_other_groups() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let store = sim.store();
    store.create(&pods(), pod("a")).unwrap();
    store
        .create(
            &pods(),
            json!({"metadata": {"name": "b", "namespace": "default", "labels": {"app": "other"}}}),
        )
        .unwrap();
    let deployments =
        ApiResource::new("apps", "v1", "Deployment", "deployments", Scope::Namespaced);
    store
        .create(
            &deployments,
            json!({"metadata": {"name": "d", "namespace": "default"}, "spec": {"replicas": 1}}),
        )
        .unwrap();
    let widgets = ApiResource::new("example.com", "v1", "Widget", "widgets", Scope::Cluster);
    store.register_crd(widgets.clone());
    store
        .create(&widgets, json!({"metadata": {"name": "w"}}))
        .unwrap();
    let k = Kubectl::new(&sim);
    assert_eq!(
        k.run(&["get", "pods", "-l", "app=kubectl-test", "-o", "name"])
            .await,
        "pod/a\n"
    );
    assert_eq!(
        k.run(&[
            "get",
            "pods",
            "--field-selector",
            "metadata.name=b",
            "-o",
            "name"
        ])
        .await,
        "pod/b\n"
    );
    let one: Value =
        serde_json::from_str(&k.run(&["get", "pod", "a", "-o", "json"]).await).unwrap();
    assert_eq!(one, store.get(&pods(), Some("default"), "a").unwrap());
    assert_eq!(
        k.run(&["get", "deployments", "-o", "name"]).await,
        "deployment.apps/d\n"
    );
    assert_eq!(
        k.run(&["get", "widgets", "-o", "name"]).await,
        "widget.example.com/w\n"
    );
    // The default (human-readable) output works too.
    let table = k.run(&["get", "pods"]).await;
    assert!(
        table.starts_with("NAME") && table.contains("\na ") && table.contains("\nb "),
        "{table}"
    );
}

#[tokio::test]
async fn watch_output_watch_events_sees_added_modified_deleted() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let store = sim.store();
    store.create(&pods(), pod("before")).unwrap();
    let k = Kubectl::new(&sim);

    // Default output, exactly as a person types it.
    let mut table = k.spawn(&["get", "pods", "-w", "--output-watch-events"], false);
    let mut text = String::new();
    read_until(&mut table, &mut text, |o| o.contains("before")).await;
    // And JSON output, for exact checks.
    let mut json_watch = k.spawn(
        &["get", "pods", "-w", "--output-watch-events", "-o", "json"],
        false,
    );
    let mut json_text = String::new();
    read_until(&mut json_watch, &mut json_text, |o| {
        has(&json_events(o), "ADDED", "before")
    })
    .await;

    store.create(&pods(), pod("live")).unwrap();
    store
        .patch(
            &pods(),
            Some("default"),
            "live",
            json!({"metadata": {"labels": {"step": "2"}}}),
        )
        .unwrap();
    store.delete(&pods(), Some("default"), "live").unwrap();

    read_until(&mut json_watch, &mut json_text, |o| {
        has(&json_events(o), "DELETED", "live")
    })
    .await;
    let events: Vec<_> = json_events(&json_text)
        .into_iter()
        .filter(|(_, n)| n == "live")
        .collect();
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, ["ADDED", "MODIFIED", "DELETED"]);

    // kubectl may write a row in more than one piece: only rows it has ended count.
    let lines = |o: &str| -> Vec<String> {
        o[..o.rfind('\n').map_or(0, |end| end + 1)]
            .lines()
            .filter(|l| l.split_whitespace().nth(1) == Some("live"))
            .map(|l| l.split_whitespace().next().unwrap_or_default().to_owned())
            .collect()
    };
    read_until(&mut table, &mut text, |o| lines(o).len() >= 3).await;
    assert_eq!(lines(&text), ["ADDED", "MODIFIED", "DELETED"], "{text}");
    assert!(text.starts_with("EVENT"), "{text}");
    // The server's table columns, for the initial list and every event alike (one header).
    let header: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["EVENT", "NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{text}"
    );
    assert_eq!(text.matches("EVENT").count(), 1, "{text}");
    for line in text.lines().skip(1) {
        assert_eq!(line.split_whitespace().count(), 6, "{text}");
    }
}

#[tokio::test]
async fn create_from_a_file_and_delete() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let k = Kubectl::new(&sim);
    let manifest = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: from-file\n  labels:\n    app: demo\nspec:\n  containers:\n  - name: c\n    image: nginx:1.27\n";
    let file = k.dir.join("pod.yaml");
    std::fs::write(&file, manifest).unwrap();
    // A server-side dry run answers as a create would and stores nothing.
    let out = k
        .run(&["create", "--dry-run=server", "-f", file.to_str().unwrap()])
        .await;
    assert_eq!(out.trim(), "pod/from-file created (server dry run)");
    assert!(
        sim.store()
            .get(&pods(), Some("default"), "from-file")
            .is_none()
    );
    let out = k.run(&["create", "-f", file.to_str().unwrap()]).await;
    assert_eq!(out.trim(), "pod/from-file created");
    let stored = sim
        .store()
        .get(&pods(), Some("default"), "from-file")
        .unwrap();
    assert_eq!(stored["spec"]["containers"][0]["image"], "nginx:1.27");
    assert!(stored["metadata"]["uid"].is_string());
    // With the defaults and status a real server gives a new pod.
    assert_eq!(stored["status"]["phase"], "Pending");
    assert_eq!(stored["spec"]["restartPolicy"], "Always");
    assert_eq!(stored["spec"]["dnsPolicy"], "ClusterFirst");
    assert_eq!(
        stored["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );

    // Creating in a namespace that does not exist fails as on a real server.
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-stdin\n  namespace: team\ndata:\n  k: v\n";
    let mut child = k.spawn(&["create", "-f", "-"], true);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(cm.as_bytes()).await.unwrap();
    drop(stdin);
    let failed = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(!failed.status.success());
    assert!(
        String::from_utf8_lossy(&failed.stderr).contains("namespaces \"team\" not found"),
        "{}",
        String::from_utf8_lossy(&failed.stderr)
    );
    let ns = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n";
    let out = k.run_with_stdin(&["create", "-f", "-"], Some(ns)).await;
    assert_eq!(out.trim(), "namespace/team created");
    let out = k.run_with_stdin(&["create", "-f", "-"], Some(cm)).await;
    assert_eq!(out.trim(), "configmap/from-stdin created");

    let out = k
        .run(&["delete", "--dry-run=server", "pod", "from-file"])
        .await;
    assert_eq!(out.trim(), "pod \"from-file\" deleted (server dry run)");
    assert!(
        sim.store()
            .get(&pods(), Some("default"), "from-file")
            .is_some()
    );
    let out = k.run(&["delete", "pod", "from-file"]).await;
    assert_eq!(out.trim(), "pod \"from-file\" deleted");
    assert!(
        sim.store()
            .get(&pods(), Some("default"), "from-file")
            .is_none()
    );
    let out = k
        .run(&["delete", "-n", "team", "configmap", "from-stdin"])
        .await;
    assert_eq!(out.trim(), "configmap \"from-stdin\" deleted");
}

#[tokio::test]
async fn kubectl_over_tls_with_a_token_and_with_a_client_certificate() {
    for auth in [Auth::BearerToken("s3cret".into()), Auth::ClientCert] {
        let sim = SimServer::start(SimConfig {
            tls: true,
            auth: auth.clone(),
            ..SimConfig::default()
        })
        .await
        .unwrap();
        sim.store().create(&pods(), pod("secure")).unwrap();
        let k = Kubectl::new(&sim);
        assert_eq!(
            k.run(&["get", "pods", "-o", "name"]).await,
            "pod/secure\n",
            "{auth:?}"
        );
    }
}

#[tokio::test]
async fn apply_creates_and_configures_as_a_real_server_stores_it() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let k = Kubectl::new(&sim);
    let manifest = |image: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: applied\nspec:\n  containers:\n  - name: c\n    image: {image}\n    ports:\n    - containerPort: 80\n  - name: d\n    image: busybox:1\n"
        )
    };
    let out = k
        .run_with_stdin(&["apply", "-f", "-"], Some(&manifest("nginx:1.27")))
        .await;
    assert_eq!(out.trim(), "pod/applied created");
    // Changing one image is a strategic merge patch: the container is merged by name, its ports
    // kept, and no directive is stored.
    let out = k
        .run_with_stdin(&["apply", "-f", "-"], Some(&manifest("nginx:1.28")))
        .await;
    assert_eq!(out.trim(), "pod/applied configured");
    let stored = sim
        .store()
        .get(&pods(), Some("default"), "applied")
        .unwrap();
    let containers = &stored["spec"]["containers"];
    assert_eq!(containers[0]["image"], "nginx:1.28");
    assert_eq!(containers[0]["ports"][0]["containerPort"], 80);
    assert_eq!(containers[1]["name"], "d");
    assert!(!stored.to_string().contains("$setElementOrder"), "{stored}");
    // Applying the same manifest again changes nothing.
    let out = k
        .run_with_stdin(&["apply", "-f", "-"], Some(&manifest("nginx:1.28")))
        .await;
    assert_eq!(out.trim(), "pod/applied unchanged");
}

#[tokio::test]
async fn apply_of_a_changed_pod_env_answers_the_real_422() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    let k = Kubectl::new(&sim);
    let manifest = |value: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: envy\nspec:\n  containers:\n  - name: c\n    image: nginx:1.27\n    env:\n    - name: MODE\n      value: {value}\n"
        )
    };
    k.run_with_stdin(&["apply", "-f", "-"], Some(&manifest("a")))
        .await;
    let mut child = k.spawn(&["apply", "-f", "-"], true);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(manifest("b").as_bytes()).await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .expect("kubectl apply finished")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("The Pod \"envy\" is invalid: spec: Forbidden: pod updates may not change fields other than"),
        "{stderr}"
    );
    let stored = sim.store().get(&pods(), Some("default"), "envy").unwrap();
    assert_eq!(stored["spec"]["containers"][0]["env"][0]["value"], "a");
}

#[tokio::test]
async fn get_pods_prints_the_server_side_columns() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(10, 4);
    let k = Kubectl::new(&sim);
    let out = k.run(&["get", "pods", "-n", "default"]).await;
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{out}"
    );
    let stored = sim.store().list(&pods(), Some("default"));
    assert_eq!(out.lines().count(), stored.len() + 1, "{out}");
    let first: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(first[0], stored[0]["metadata"]["name"].as_str().unwrap());
    assert!(first[1].contains('/'), "{out}");
    assert_eq!(
        first[2],
        stored[0]["status"]["phase"].as_str().unwrap(),
        "{out}"
    );
    let wide = k.run(&["get", "pods", "-A", "-o", "wide"]).await;
    let header = wide.lines().next().unwrap();
    for col in [
        "NAMESPACE",
        "IP",
        "NODE",
        "NOMINATED NODE",
        "READINESS GATES",
    ] {
        assert!(header.contains(col), "{col}: {header}");
    }
}

/// kubectl's typed clients ask for protobuf (`describe` reads the pod and its events through
/// them): the sim answers in protobuf and kubectl, a decoder nobody here wrote, reads it.
#[tokio::test]
async fn kubectl_describe_reads_the_pod_in_protobuf() {
    let sim = SimServer::start(SimConfig::default()).await.unwrap();
    sim.store().seed_pods(3, 5);
    let stored = sim.store().list(&pods(), None);
    let name = stored[0]["metadata"]["name"].as_str().unwrap().to_owned();
    let ns = stored[0]["metadata"]["namespace"]
        .as_str()
        .unwrap()
        .to_owned();
    let k = Kubectl::new(&sim);
    let out = k
        .command(&["describe", "pod", &name, "-n", &ns, "-v=8"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // What kubectl decoded from the protobuf: the name, the image, the node, the labels.
    let pod = &stored[0];
    for want in [
        name.as_str(),
        pod["spec"]["containers"][0]["image"].as_str().unwrap(),
        pod["spec"]["nodeName"].as_str().unwrap(),
        pod["status"]["podIP"].as_str().unwrap(),
    ] {
        assert!(stdout.contains(want), "{want} missing from:\n{stdout}");
    }
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("protobuf")).collect();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("Accept: application/vnd.kubernetes.protobuf")),
        "{stderr}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("Content-Type: application/vnd.kubernetes.protobuf")),
        "{stderr}"
    );
}
