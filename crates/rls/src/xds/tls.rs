//! [`XdsTls`]: TLS toward the management server, as envoyproxy/ratelimit's
//! `CONFIG_GRPC_XDS_SERVER_USE_TLS` and its certificate files set it up: the CA that
//! verifies the server's certificate, the client certificate and key presented for mutual
//! TLS (Envoy Gateway's controller requires them), and the name the server's certificate
//! must be valid for. The files are read and checked with rustls as the gRPC port's own
//! are (the crate's `tls` module), each error naming the setting and the file; the
//! connection itself is tonic's (rustls on ring).

use crate::tls::{identity, TlsFile};
use rustls::pki_types::ServerName;
use tonic::transport::ClientTlsConfig;

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
        config = match &self.ca {
            Some(ca) => {
                let (_, roots) = ca.trust_anchors()?;
                config.trust_anchors(roots.roots)
            }
            None => config.with_native_roots(),
        };
        if let (Some(cert), Some(key)) = (&self.cert, &self.key) {
            config = config.identity(identity(cert, key)?);
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
