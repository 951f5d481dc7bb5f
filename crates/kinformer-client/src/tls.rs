//! The rustls client configuration: which server certificates to trust, and which client
//! certificate to present.

use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, WebPkiServerVerifier};
use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use crate::{Config, Error};

/// The client certificate presented in TLS handshakes. It can change at run time, when an exec
/// plugin hands out a new one.
pub(crate) struct ClientCert {
    provider: Arc<CryptoProvider>,
    current: RwLock<Option<Arc<CertifiedKey>>>,
}

impl fmt::Debug for ClientCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCert")
            .field("present", &self.current.read().is_some())
            .finish()
    }
}

impl ClientCert {
    /// Replaces the certificate and key presented from the next handshake on.
    pub(crate) fn set_pem(&self, cert_pem: &[u8], key_pem: &[u8]) -> Result<(), Error> {
        let certs = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Error::Tls {
                message: format!("client certificate: {e}"),
            })?;
        if certs.is_empty() {
            return Err(Error::Tls {
                message: "client certificate: no PEM certificate found".into(),
            });
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| Error::Tls {
            message: format!("client key: {e}"),
        })?;
        let key = self
            .provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| Error::Tls {
                message: format!("client key: {e}"),
            })?;
        *self.current.write() = Some(Arc::new(CertifiedKey::new(certs, key)));
        Ok(())
    }
}

impl ResolvesClientCert for ClientCert {
    fn resolve(&self, _hints: &[&[u8]], _schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        self.current.read().clone()
    }

    fn has_certs(&self) -> bool {
        self.current.read().is_some()
    }
}

/// Builds the rustls configuration for `config`, with the ring provider, offering HTTP/2 and
/// HTTP/1.1 by ALPN.
pub(crate) fn client_config(
    config: &Config,
) -> Result<(rustls::ClientConfig, Arc<ClientCert>), Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls_err = |e: rustls::Error| Error::Tls {
        message: e.to_string(),
    };
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(tls_err)?;

    let verifier: Arc<dyn ServerCertVerifier> = if config.insecure_skip_tls_verify {
        tracing::warn!(
            server = %crate::secret::redact_url(&config.cluster_url),
            "insecure-skip-tls-verify is set: the server's certificate is not verified"
        );
        Arc::new(NoVerification(Arc::clone(&provider)))
    } else if let Some(pem) = &config.root_certs_pem {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| Error::Tls {
                message: format!("certificate authority: {e}"),
            })?;
            roots.add(cert).map_err(tls_err)?;
        }
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
            .build()
            .map_err(|e| Error::Tls {
                message: format!("certificate authority: {e}"),
            })?
    } else {
        Arc::new(rustls_platform_verifier::Verifier::new(Arc::clone(&provider)).map_err(tls_err)?)
    };
    let verifier: Arc<dyn ServerCertVerifier> = match &config.tls_server_name {
        Some(name) if !config.insecure_skip_tls_verify => {
            let name = ServerName::try_from(name.clone()).map_err(|e| Error::Tls {
                message: format!("tls-server-name {name:?}: {e}"),
            })?;
            Arc::new(OverrideName {
                inner: verifier,
                name,
            })
        }
        _ => verifier,
    };

    let cert = Arc::new(ClientCert {
        provider,
        current: RwLock::new(None),
    });
    if let Some(id) = &config.client_identity {
        cert.set_pem(&id.cert_pem, id.key_pem.expose().as_bytes())?;
    }
    let mut tls = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_cert_resolver(Arc::clone(&cert) as Arc<dyn ResolvesClientCert>);
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((tls, cert))
}

/// Verifies the server's certificate against a configured name (`tls-server-name`) instead of
/// the URL's host.
#[derive(Debug)]
struct OverrideName {
    inner: Arc<dyn ServerCertVerifier>,
    name: ServerName<'static>,
}

impl ServerCertVerifier for OverrideName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, &self.name, ocsp, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// `insecure-skip-tls-verify`: accepts any certificate, but still checks the handshake signatures
/// so the connection is at least encrypted to whoever holds that certificate's key.
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate and its PKCS#8 key, PEM.
    fn self_signed() -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn builds_every_verification_mode() {
        let (cert, key) = self_signed();
        let mut config = Config::new("https://127.0.0.1:1");
        config.root_certs_pem = Some(cert.clone().into_bytes());
        config.tls_server_name = Some("kubernetes.default".into());
        config.client_identity = Some(crate::ClientIdentity {
            cert_pem: cert.into_bytes(),
            key_pem: key.into(),
        });
        let (tls, cert) = client_config(&config).unwrap();
        assert!(cert.has_certs());
        assert_eq!(tls.alpn_protocols[0], b"h2");

        config.insecure_skip_tls_verify = true;
        client_config(&config).unwrap();
        config.root_certs_pem = None;
        config.insecure_skip_tls_verify = false;
        client_config(&config).unwrap();
    }

    #[test]
    fn rejects_unusable_keys() {
        let (cert, _) = self_signed();
        let c = ClientCert {
            provider: Arc::new(rustls::crypto::ring::default_provider()),
            current: RwLock::new(None),
        };
        let err = c.set_pem(
            cert.as_bytes(),
            b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        );
        assert!(matches!(err, Err(Error::Tls { .. })));
        assert!(!c.has_certs());
    }
}
