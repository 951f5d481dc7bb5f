//! Accepted credentials, TLS material (a CA, a server certificate, a client CA) and kubeconfigs.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::error::Error;

/// The credentials the server accepts; a request must present one of them.
///
/// Wrong or missing credentials answer 401 `Unauthorized` with a `Status` body.
///
/// ```
/// use kinformer_sim::Auth;
///
/// let auth = Auth::Any(vec![
///     Auth::BearerToken("old-token".into()),
///     Auth::BearerToken("new-token".into()),
/// ]);
/// # let _ = auth;
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Auth {
    /// Every request is accepted.
    #[default]
    None,
    /// `Authorization: Bearer <token>` with this token.
    BearerToken(String),
    /// `Authorization: Basic ...` with this user name and password.
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: String,
    },
    /// A TLS client certificate signed by the server's client CA (see
    /// [`SimServer::issue_client_cert`](crate::SimServer::issue_client_cert)); TLS mode only.
    ClientCert,
    /// Any one of these.
    Any(Vec<Auth>),
}

/// What a request presented.
#[derive(Debug, Default)]
pub(crate) struct Presented<'a> {
    pub(crate) authorization: Option<&'a str>,
    pub(crate) client_cert: bool,
}

impl Auth {
    pub(crate) fn accepts(&self, p: &Presented<'_>) -> bool {
        match self {
            Self::None => true,
            Self::BearerToken(t) => p
                .authorization
                .and_then(|a| strip_scheme(a, "bearer"))
                .is_some_and(|got| got == t),
            Self::Basic { username, password } => p
                .authorization
                .and_then(|a| strip_scheme(a, "basic"))
                .and_then(|b| STANDARD.decode(b).ok())
                .is_some_and(|raw| raw == format!("{username}:{password}").as_bytes()),
            Self::ClientCert => p.client_cert,
            Self::Any(all) => all.iter().any(|a| a.accepts(p)),
        }
    }

    /// The kubeconfig `user` fields for the first credential that can be written down.
    fn kubeconfig_user(&self, tls: Option<&TlsMaterial>) -> Option<String> {
        match self {
            Self::None => None,
            Self::BearerToken(t) => Some(format!("    token: {}\n", yaml_str(t))),
            Self::Basic { username, password } => Some(format!(
                "    username: {}\n    password: {}\n",
                yaml_str(username),
                yaml_str(password)
            )),
            Self::ClientCert => {
                let (cert, key) = tls?.issue_client_cert("kinformer-admin").ok()?;
                Some(format!(
                    "    client-certificate-data: {}\n    client-key-data: {}\n",
                    STANDARD.encode(cert),
                    STANDARD.encode(key)
                ))
            }
            Self::Any(all) => all.iter().find_map(|a| a.kubeconfig_user(tls)),
        }
    }
}

fn strip_scheme<'a>(header: &'a str, scheme: &str) -> Option<&'a str> {
    let (s, rest) = header.trim().split_once(' ')?;
    s.eq_ignore_ascii_case(scheme).then(|| rest.trim())
}

/// A YAML double-quoted scalar.
fn yaml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// The server's TLS material, generated at start.
pub(crate) struct TlsMaterial {
    pub(crate) ca_pem: String,
    pub(crate) server_config: Arc<rustls::ServerConfig>,
    client_ca: CertifiedIssuer<'static, KeyPair>,
}

impl std::fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial").finish_non_exhaustive()
    }
}

fn cert_err(e: rcgen::Error) -> Error {
    Error::Certificate(e.to_string())
}

fn ca(common_name: &str) -> Result<CertifiedIssuer<'static, KeyPair>, Error> {
    let mut params = CertificateParams::default();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    params.distinguished_name = dn;
    CertifiedIssuer::self_signed(params, KeyPair::generate().map_err(cert_err)?).map_err(cert_err)
}

impl TlsMaterial {
    pub(crate) fn generate() -> Result<Self, Error> {
        let server_ca = ca("kinformer-sim-ca")?;
        let client_ca = ca("kinformer-sim-client-ca")?;

        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .map_err(cert_err)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "kinformer-sim");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate().map_err(cert_err)?;
        let cert = params.signed_by(&key, &server_ca).map_err(cert_err)?;

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(client_ca.der().clone())?;
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                .allow_unauthenticated()
                .build()
                .map_err(|e| Error::Certificate(e.to_string()))?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                vec![cert.der().clone(), server_ca.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Self {
            ca_pem: server_ca.pem(),
            server_config: Arc::new(config),
            client_ca,
        })
    }

    /// A client certificate and its PKCS#8 key, both PEM, signed by the client CA.
    pub(crate) fn issue_client_cert(&self, common_name: &str) -> Result<(String, String), Error> {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params
            .distinguished_name
            .push(DnType::OrganizationName, "system:masters");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate().map_err(cert_err)?;
        let cert = params.signed_by(&key, &self.client_ca).map_err(cert_err)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// A kubeconfig for this server with the credentials `auth` accepts.
pub(crate) fn kubeconfig(url: &str, tls: Option<&TlsMaterial>, auth: &Auth) -> String {
    let mut cluster = format!("    server: {url}\n");
    if let Some(t) = tls {
        cluster.push_str(&format!(
            "    certificate-authority-data: {}\n",
            STANDARD.encode(&t.ca_pem)
        ));
    }
    let user = auth
        .kubeconfig_user(tls)
        .unwrap_or_else(|| "    {}\n".to_owned());
    let user = if user.trim() == "{}" {
        "  user: {}\n".to_owned()
    } else {
        format!("  user:\n{user}")
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kinformer-sim\n  cluster:\n{cluster}users:\n- name: kinformer-sim\n{user}contexts:\n- name: kinformer-sim\n  context:\n    cluster: kinformer-sim\n    user: kinformer-sim\n    namespace: default\ncurrent-context: kinformer-sim\npreferences: {{}}\n"
    )
}

/// The DER of a PEM certificate's first block (for tests and clients building trust roots).
#[cfg(test)]
fn first_der(pem: &str) -> Vec<u8> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    STANDARD.decode(body).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_checked() {
        let basic = format!("Basic {}", STANDARD.encode("u:p"));
        let cases: &[(Auth, Option<&str>, bool, bool)] = &[
            (Auth::None, None, false, true),
            (Auth::BearerToken("t".into()), Some("Bearer t"), false, true),
            (
                Auth::BearerToken("t".into()),
                Some("bearer  t "),
                false,
                true,
            ),
            (
                Auth::BearerToken("t".into()),
                Some("Bearer x"),
                false,
                false,
            ),
            (Auth::BearerToken("t".into()), None, true, false),
            (
                Auth::Basic {
                    username: "u".into(),
                    password: "p".into(),
                },
                Some(&basic),
                false,
                true,
            ),
            (
                Auth::Basic {
                    username: "u".into(),
                    password: "q".into(),
                },
                Some(&basic),
                false,
                false,
            ),
            (Auth::ClientCert, None, true, true),
            (Auth::ClientCert, Some("Bearer t"), false, false),
            (
                Auth::Any(vec![Auth::ClientCert, Auth::BearerToken("t".into())]),
                Some("Bearer t"),
                false,
                true,
            ),
            (Auth::Any(vec![]), None, false, false),
        ];
        for (auth, header, cert, want) in cases {
            let p = Presented {
                authorization: *header,
                client_cert: *cert,
            };
            assert_eq!(auth.accepts(&p), *want, "{auth:?} {header:?} {cert}");
        }
    }

    #[test]
    fn tls_material_issues_client_certs() {
        let tls = TlsMaterial::generate().unwrap();
        assert!(tls.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(!first_der(&tls.ca_pem).is_empty());
        let (cert, key) = tls.issue_client_cert("alice").unwrap();
        assert!(cert.contains("BEGIN CERTIFICATE"));
        assert!(key.contains("BEGIN PRIVATE KEY"));
        let kc = kubeconfig("https://127.0.0.1:1", Some(&tls), &Auth::ClientCert);
        assert!(kc.contains("client-certificate-data: "), "{kc}");
        let kc = kubeconfig(
            "http://127.0.0.1:1",
            None,
            &Auth::BearerToken("t\"x".into()),
        );
        assert!(kc.contains("token: \"t\\\"x\""), "{kc}");
    }
}
