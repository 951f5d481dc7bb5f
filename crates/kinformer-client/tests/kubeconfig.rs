//! Kubeconfig loading: merging several files, contexts, relative paths, inline `-data` fields, and
//! an error naming the file and the field for every malformed case.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use kinformer_client::{AuthConfig, Client, Config, Error, Kubeconfig, KubeconfigOptions};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(name)).unwrap()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn opts(context: &str) -> KubeconfigOptions {
    KubeconfigOptions {
        context: Some(context.to_owned()),
        ..KubeconfigOptions::default()
    }
}

#[test]
fn relative_paths_resolve_against_the_kubeconfig_folder() {
    let path = fixtures().join("relative.yaml");
    let kc = Kubeconfig::read_from(&path).unwrap();
    assert_eq!(
        kc.clusters[0].cluster.certificate_authority.as_deref(),
        Some(fixtures().join("ca.crt").as_path())
    );
    assert_eq!(kc.clusters[0].source.as_deref(), Some(path.as_path()));

    // RSA (PKCS#1) client key, from the current context.
    let rsa = Config::from_kubeconfig(&kc, &KubeconfigOptions::default()).unwrap();
    assert_eq!(rsa.cluster_url, "https://127.0.0.1:6443");
    assert_eq!(rsa.default_namespace, "team-a");
    assert_eq!(
        rsa.tls_server_name.as_deref(),
        Some("kubernetes.default.svc")
    );
    assert_eq!(
        rsa.root_certs_pem.as_deref(),
        Some(fixture("ca.crt").as_slice())
    );
    let id = rsa.client_identity.as_ref().unwrap();
    assert_eq!(id.cert_pem, fixture("rsa.crt"));
    Client::new(rsa.clone()).expect("an RSA PKCS#1 key loads");

    // EC (SEC1) client key, `./` path, no namespace: `default`.
    let ec = Config::from_kubeconfig(&kc, &opts("ec")).unwrap();
    assert_eq!(ec.default_namespace, "default");
    assert_eq!(
        ec.client_identity.as_ref().unwrap().cert_pem,
        fixture("ec.crt")
    );
    Client::new(ec).expect("an EC SEC1 key loads");

    let tf = Config::from_kubeconfig(&kc, &opts("tokenfile")).unwrap();
    assert!(matches!(&tf.auth, AuthConfig::TokenFile(p) if p == &fixtures().join("token")));
    assert_eq!(tf.default_namespace, "team-b");
}

#[test]
fn data_fields_are_decoded_and_checked() {
    for (cert, key) in [
        ("rsa.crt", "rsa-pkcs1.key"),
        ("ec.crt", "ec-sec1.key"),
        ("ec.crt", "ec-pkcs8.key"),
    ] {
        let yaml = format!(
            "current-context: c\ncontexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n\
             clusters: [{{name: k, cluster: {{server: 'https://k:443', certificate-authority-data: {}}}}}]\n\
             users: [{{name: u, user: {{client-certificate-data: {}, client-key-data: {}}}}}]\n",
            b64(&fixture("ca.crt")),
            b64(&fixture(cert)),
            b64(&fixture(key)),
        );
        let kc = Kubeconfig::from_yaml(&yaml, None).unwrap();
        let config = Config::from_kubeconfig(&kc, &KubeconfigOptions::default()).unwrap();
        assert_eq!(
            config.root_certs_pem.as_deref(),
            Some(fixture("ca.crt").as_slice())
        );
        let id = config.client_identity.as_ref().unwrap();
        assert_eq!(id.key_pem.expose().as_bytes(), fixture(key));
        // Key material never shows in Debug output.
        let key_line = String::from_utf8(fixture(key))
            .unwrap()
            .lines()
            .nth(1)
            .unwrap()
            .to_owned();
        assert!(!format!("{config:?}").contains(&key_line), "{key}");
        assert!(
            !format!("{kc:?}").contains(&b64(&fixture(key))[..40]),
            "{key}"
        );
        Client::new(config).unwrap_or_else(|e| panic!("{key}: {e}"));
    }
}

#[test]
fn several_files_merge_first_to_set_a_value_wins() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    std::fs::create_dir(dir.path().join("second")).unwrap();
    std::fs::write(dir.path().join("second/ca.crt"), fixture("ca.crt")).unwrap();
    let first = write(
        "first",
        "contexts: [{name: dev, context: {cluster: dev, user: dev, namespace: from-first}}]\n\
         clusters: [{name: dev, cluster: {server: 'https://first:443'}}]\n\
         users: [{name: dev, user: {token: first-token}}]\n",
    );
    let second = write(
        "second/config",
        "current-context: dev\n\
         contexts: [{name: dev, context: {cluster: other, user: other}}, {name: prod, context: {cluster: prod, user: dev}}]\n\
         clusters: [{name: dev, cluster: {server: 'https://second:443'}}, {name: prod, cluster: {server: 'https://prod:443', certificate-authority: ca.crt}}]\n\
         users: [{name: dev, user: {token: second-token}}]\n",
    );
    let third = write("third", "current-context: prod\n");
    let missing = dir.path().join("missing");
    let kc = Kubeconfig::read_all(&[first, missing, second, third]).unwrap();

    // current-context from the first file that sets it (the second), entries from the first file
    // that names them.
    assert_eq!(kc.current_context.as_deref(), Some("dev"));
    let dev = Config::from_kubeconfig(&kc, &KubeconfigOptions::default()).unwrap();
    assert_eq!(dev.cluster_url, "https://first:443");
    assert_eq!(dev.default_namespace, "from-first");
    assert!(matches!(&dev.auth, AuthConfig::Token(t) if t.expose() == "first-token"));

    // A context that only a later file has, whose relative CA path resolves against that file.
    let prod = Config::from_kubeconfig(&kc, &opts("prod")).unwrap();
    assert_eq!(prod.cluster_url, "https://prod:443");
    assert_eq!(
        prod.root_certs_pem.as_deref(),
        Some(fixture("ca.crt").as_slice())
    );

    // Cluster and user chosen explicitly, overriding the context.
    let mixed = Config::from_kubeconfig(
        &kc,
        &KubeconfigOptions {
            context: Some("dev".into()),
            cluster: Some("prod".into()),
            user: None,
        },
    )
    .unwrap();
    assert_eq!(mixed.cluster_url, "https://prod:443");
    assert_eq!(mixed.default_namespace, "from-first");
}

/// One malformed case: the kubeconfig text (written to a file `config` in a fresh folder), the
/// context to select, and the field the error must name.
struct Case {
    yaml: String,
    context: Option<&'static str>,
    field: &'static str,
    message: &'static str,
}

fn case(yaml: impl Into<String>, field: &'static str, message: &'static str) -> Case {
    Case {
        yaml: yaml.into(),
        context: None,
        field,
        message,
    }
}

/// A kubeconfig with one context `c` -> cluster `k` (with these settings) and user `u` (with
/// these settings).
fn with(cluster: &str, user: &str) -> String {
    format!(
        "current-context: c\ncontexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n\
         clusters: [{{name: k, cluster: {{server: 'https://k:443'{cluster}}}}}]\n\
         users: [{{name: u, user: {{{user}}}}}]\n"
    )
}

#[test]
fn every_malformed_case_names_the_file_and_the_field() {
    let ca = b64(&fixture("ca.crt"));
    let key = b64(&fixture("ec-sec1.key"));
    let cases = vec![
        case("clusters: {k: 1}", "clusters", "invalid type"),
        case("current-context: [", "current-context", "invalid type"),
        case("clusters: [ {", "kubeconfig", "at line 2"),
        case(
            "users: [{name: u, user: {token: 42}}]",
            "users[0].user.token",
            "value hidden",
        ),
        case(
            "contexts: [{name: c, context: {cluster: k}}]",
            "current-context",
            "no context is selected",
        ),
        case(
            "current-context: nope\ncontexts: []",
            "current-context",
            "\"nope\" not found",
        ),
        case(
            "current-context: c\ncontexts: [{name: c, context: {cluster: gone}}]",
            "contexts[c].context.cluster",
            "\"gone\" not found",
        ),
        case(
            "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: ghost}}]\nclusters: [{name: k, cluster: {server: 'https://k'}}]",
            "contexts[c].context.user",
            "\"ghost\" not found",
        ),
        case(
            "current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\nclusters: [{name: k, cluster: {}}]",
            "clusters[k].cluster.server",
            "missing",
        ),
        case(
            "current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\nclusters: [{name: k, cluster: {server: 'ftp://k'}}]",
            "clusters[k].cluster.server",
            "not an http(s) URL",
        ),
        case(
            with(", certificate-authority: missing-ca.crt", ""),
            "clusters[k].cluster.certificate-authority",
            "missing-ca.crt",
        ),
        case(
            with(", certificate-authority-data: '%%%'", ""),
            "clusters[k].cluster.certificate-authority-data",
            "invalid base64",
        ),
        case(
            with(
                &format!(", certificate-authority-data: {}", b64(b"not a pem")),
                "",
            ),
            "clusters[k].cluster.certificate-authority-data",
            "no PEM certificate",
        ),
        case(
            with(", proxy-url: '::bad'", ""),
            "clusters[k].cluster.proxy-url",
            "::bad",
        ),
        case(
            with("", &format!("client-certificate-data: {ca}")),
            "users[u].user.client-key",
            "needs a key",
        ),
        case(
            with("", &format!("client-key-data: {key}")),
            "users[u].user.client-certificate",
            "needs a certificate",
        ),
        case(
            with(
                "",
                &format!(
                    "client-certificate-data: {ca}, client-key-data: {}",
                    b64(b"junk")
                ),
            ),
            "users[u].user.client-key-data",
            "no usable PEM private key",
        ),
        case(
            with("", "client-certificate: nope.crt, client-key: nope.key"),
            "users[u].user.client-certificate",
            "nope.crt",
        ),
        case(
            with("", "client-certificate-data: '!!', client-key-data: x"),
            "users[u].user.client-certificate-data",
            "invalid base64",
        ),
        case(
            with("", "tokenFile: no-such-token"),
            "users[u].user.tokenFile",
            "does not exist",
        ),
        case(
            with("", "username: ann"),
            "users[u].user.password",
            "without password",
        ),
        case(
            with("", "auth-provider: {name: gcp}"),
            "users[u].user.auth-provider",
            "exec credential plugin",
        ),
        case(
            with("", "exec: {apiVersion: client.authentication.k8s.io/v1}"),
            "users[u].user.exec.command",
            "missing",
        ),
        case(
            with(
                "",
                "exec: {command: x, apiVersion: client.authentication.k8s.io/v1alpha1}",
            ),
            "users[u].user.exec.apiVersion",
            "not supported",
        ),
        case(
            with(
                "",
                "exec: {command: x, apiVersion: client.authentication.k8s.io/v1, interactiveMode: Always}",
            ),
            "users[u].user.exec.interactiveMode",
            "non-interactively",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config");
    for c in cases {
        std::fs::write(&path, &c.yaml).unwrap();
        let options = KubeconfigOptions {
            context: c.context.map(str::to_owned),
            ..KubeconfigOptions::default()
        };
        let err = Config::from_path(&path, &options).expect_err(&c.yaml);
        let text = err.to_string();
        match &err {
            Error::Config {
                path: p,
                field,
                message,
            } => {
                assert_eq!(p.as_deref(), Some(path.as_path()), "{}: {text}", c.yaml);
                assert_eq!(field, c.field, "{}: {text}", c.yaml);
                assert!(message.contains(c.message), "{}: {text}", c.yaml);
            }
            other => panic!("{}: {other}", c.yaml),
        }
        assert!(text.starts_with(&path.display().to_string()), "{text}");
        assert!(!text.contains("42"), "a credential leaked: {text}");
    }
}

#[test]
fn a_missing_kubeconfig_is_an_error_naming_it() {
    let path = fixtures().join("no-such-config");
    let err = Config::from_path(&path, &KubeconfigOptions::default()).unwrap_err();
    match &err {
        Error::Config { path: p, field, .. } => {
            assert_eq!(p.as_deref(), Some(path.as_path()));
            assert_eq!(field, "kubeconfig");
        }
        other => panic!("{other}"),
    }
}
