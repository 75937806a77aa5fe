//! [`XdsTls`]: TLS toward the management server, as envoyproxy/ratelimit's
//! `CONFIG_GRPC_XDS_SERVER_USE_TLS` and its certificate files set it up: the CA that
//! verifies the server's certificate, the client certificate and key presented for mutual
//! TLS (Envoy Gateway's controller requires them), and the name the server's certificate
//! must be valid for. The files are read and checked with rustls, each error naming the
//! setting and the file; the connection itself is tonic's (rustls on ring).

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::RootCertStore;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use tonic::transport::{ClientTlsConfig, Identity};

/// A PEM file of the TLS settings and the setting that names it (a flag, such as
/// `--config-xds-tls-ca`, or an environment variable, such as
/// `CONFIG_GRPC_XDS_SERVER_TLS_CACERT`), so that an error about the file can say where it
/// came from.
///
/// # Examples
///
/// ```
/// use limitcore_rls::xds::TlsFile;
///
/// let ca = TlsFile::new("--config-xds-tls-ca", "/certs/ca.crt");
/// assert_eq!(ca.to_string(), "--config-xds-tls-ca /certs/ca.crt");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFile {
    /// The flag or environment variable that named the file.
    pub setting: String,
    /// The file.
    pub path: PathBuf,
}

impl TlsFile {
    /// The file at `path`, named by `setting`.
    pub fn new(setting: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        TlsFile {
            setting: setting.into(),
            path: path.into(),
        }
    }

    /// The file's bytes.
    fn read(&self) -> Result<Vec<u8>, String> {
        std::fs::read(&self.path).map_err(|e| format!("{self}: cannot read it: {e}"))
    }

    /// The certificates of the file, in order: at least one.
    fn certificates(&self) -> Result<(Vec<u8>, Vec<CertificateDer<'static>>), String> {
        let pem = self.read()?;
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{self}: not a PEM file: {e}"))?;
        if certs.is_empty() {
            return Err(format!(
                "{self}: no certificate in it (expected a PEM `BEGIN CERTIFICATE` section)"
            ));
        }
        Ok((pem, certs))
    }
}

impl fmt::Display for TlsFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.setting, self.path.display())
    }
}

/// TLS toward the management server: how its certificate is verified and what the
/// service presents. Its files are read on every connection, so that a certificate
/// rotated in place (a Kubernetes secret's mount) is used from the next connection on;
/// [`XdsArgs::resolve`](super::XdsArgs::resolve) reads them once at start, so that a bad
/// one stops the service there.
///
/// The server's certificate is verified against `ca` alone when it is given
/// (envoyproxy/ratelimit adds the system's roots to it: a CA file here is the only trust),
/// and against the system's roots otherwise; its name must be `server_name`, or the URL's
/// host.
///
/// # Examples
///
/// ```
/// use limitcore_rls::xds::{TlsFile, XdsConfig, XdsTls};
///
/// // Envoy Gateway's mounts: the files are read when the subscription connects.
/// let tls = XdsTls {
///     ca: Some(TlsFile::new("--config-xds-tls-ca", "/certs/ca.crt")),
///     cert: Some(TlsFile::new("--config-xds-tls-cert", "/certs/tls.crt")),
///     key: Some(TlsFile::new("--config-xds-tls-key", "/certs/tls.key")),
///     server_name: None,
/// };
/// let mut config = XdsConfig::new("https://envoy-gateway:18001", "envoy-ratelimit");
/// config.tls = Some(tls);
///
/// // A key without its certificate is refused, naming the setting and the file.
/// let key_only = XdsTls {
///     key: Some(TlsFile::new("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "/certs/tls.key")),
///     ..XdsTls::default()
/// };
/// let err = key_only.check().unwrap_err();
/// assert!(err.starts_with("CONFIG_GRPC_XDS_CLIENT_TLS_KEY /certs/tls.key"), "{err}");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XdsTls {
    /// The CA certificates (PEM) that verify the server's certificate; `None`: the
    /// system's roots.
    pub ca: Option<TlsFile>,
    /// The client certificate (PEM; its chain, the service's own first) presented to the
    /// server for mutual TLS; `None`: none presented. It needs `key`.
    pub cert: Option<TlsFile>,
    /// The client certificate's private key (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC).
    pub key: Option<TlsFile>,
    /// The name the server's certificate must be valid for (a DNS name or an IP address),
    /// if not the URL's host; also sent as the server name (SNI).
    pub server_name: Option<String>,
}

impl XdsTls {
    /// Read and check the files: the configuration a connection uses.
    ///
    /// # Errors
    ///
    /// A message naming the setting and the file: a file that cannot be read, one with no
    /// PEM certificate (or key) in it or a malformed one, a CA certificate that cannot be
    /// a trust anchor, a key without its certificate or a certificate without its key, a
    /// key that is not the certificate's or of a kind rustls cannot sign with, a server
    /// name that is no DNS name or IP address. (With no CA given, the system's roots are
    /// loaded when the configuration is applied to an endpoint:
    /// [`XdsConfig::endpoint`](super::XdsConfig::endpoint) reports their absence.)
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_rls::xds::{TlsFile, XdsTls};
    ///
    /// let dir = std::env::temp_dir().join(format!("limitcore-rls-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let ca = dir.join("ca.crt");
    /// std::fs::write(&ca, "not a certificate").unwrap();
    /// let tls = XdsTls {
    ///     ca: Some(TlsFile::new("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", &ca)),
    ///     ..XdsTls::default()
    /// };
    /// let err = tls.client_config().unwrap_err();
    /// assert!(err.ends_with("no certificate in it (expected a PEM `BEGIN CERTIFICATE` section)"), "{err}");
    /// std::fs::remove_dir_all(&dir).unwrap();
    ///
    /// // No file at all: the system's roots verify the server, no client certificate.
    /// assert!(XdsTls::default().client_config().is_ok());
    /// ```
    pub fn client_config(&self) -> Result<ClientTlsConfig, String> {
        // A half of a key pair is refused before any file is read: it is a mistake in
        // the settings, whatever the files hold.
        match (&self.cert, &self.key) {
            (None, Some(key)) => {
                return Err(format!(
                    "{key}: a client key without its certificate; set the certificate too \
                     (--config-xds-tls-cert, CONFIG_GRPC_XDS_CLIENT_TLS_CERT)"
                ))
            }
            (Some(cert), None) => {
                return Err(format!(
                    "{cert}: a client certificate without its key; set the key too \
                     (--config-xds-tls-key, CONFIG_GRPC_XDS_CLIENT_TLS_KEY)"
                ))
            }
            _ => {}
        }
        let mut config = ClientTlsConfig::new();
        if let Some(name) = &self.server_name {
            ServerName::try_from(name.as_str()).map_err(|e| {
                format!(
                    "the TLS server name (--config-xds-tls-san, CONFIG_GRPC_XDS_SERVER_TLS_SAN) \
                     {name:?}: not a DNS name or an IP address ({e})"
                )
            })?;
            config = config.domain_name(name.clone());
        }
        let roots = match &self.ca {
            Some(ca) => {
                let (_, certs) = ca.certificates()?;
                let mut roots = RootCertStore::empty();
                for (i, cert) in certs.into_iter().enumerate() {
                    roots.add(cert).map_err(|e| {
                        format!("{ca}: certificate {}: not usable as a CA: {e}", i + 1)
                    })?;
                }
                config = config.trust_anchors(roots.roots.iter().cloned());
                Some(roots)
            }
            None => {
                config = config.with_native_roots();
                None
            }
        };
        if let (Some(cert), Some(key)) = (&self.cert, &self.key) {
            let (cert_pem, chain) = cert.certificates()?;
            let key_pem = key.read()?;
            let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| match e {
                rustls::pki_types::pem::Error::NoItemsFound => format!(
                    "{key}: no private key in it (expected a PEM `BEGIN PRIVATE KEY`, \
                     `BEGIN RSA PRIVATE KEY` or `BEGIN EC PRIVATE KEY` section)"
                ),
                e => format!("{key}: not a PEM file: {e}"),
            })?;
            // rustls checks here what a handshake would find late: that the key is one
            // it can sign with and that it is the certificate's own.
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("TLS: {e}"))?
                .with_root_certificates(roots.unwrap_or_else(RootCertStore::empty))
                .with_client_auth_cert(chain, private)
                .map_err(|e| format!("{key} cannot be used with {cert}: {e}"))?;
            config = config.identity(Identity::from_pem(cert_pem, key_pem));
        }
        Ok(config)
    }

    /// Read and check the files, as a connection will ([`XdsTls::client_config`]).
    ///
    /// # Errors
    ///
    /// As [`XdsTls::client_config`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_rls::xds::{TlsFile, XdsTls};
    ///
    /// let tls = XdsTls {
    ///     cert: Some(TlsFile::new("--config-xds-tls-cert", "/certs/tls.crt")),
    ///     ..XdsTls::default()
    /// };
    /// let err = tls.check().unwrap_err();
    /// assert!(err.contains("a client certificate without its key"), "{err}");
    /// ```
    pub fn check(&self) -> Result<(), String> {
        self.client_config().map(drop)
    }
}
