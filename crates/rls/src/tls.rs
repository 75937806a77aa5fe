//! [`TlsFile`]: a PEM file of the TLS settings, named by the setting it came from, and what
//! the service reads from such files: certificates, a CA's trust anchors, a key pair
//! checked to be one. Shared by the xDS client's TLS toward its management server
//! ([`xds`](crate::xds)) and the gRPC port's own ([`server`](crate::server)), so that both
//! read the files alike and name a bad one alike. Checked with rustls on ring, the
//! provider of tonic's TLS here.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use rustls::RootCertStore;
use std::fmt;
use std::path::PathBuf;
use tonic::transport::Identity;

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
    pub(crate) fn read(&self) -> Result<Vec<u8>, String> {
        std::fs::read(&self.path).map_err(|e| format!("{self}: cannot read it: {e}"))
    }

    /// The file's bytes and its certificates, in order: at least one.
    pub(crate) fn certificates(&self) -> Result<(Vec<u8>, Vec<CertificateDer<'static>>), String> {
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

    /// The file's bytes and its certificates as trust anchors (a CA file): each one usable
    /// as a CA, at least one.
    pub(crate) fn trust_anchors(&self) -> Result<(Vec<u8>, RootCertStore), String> {
        let (pem, certs) = self.certificates()?;
        let mut roots = RootCertStore::empty();
        for (i, cert) in certs.into_iter().enumerate() {
            roots
                .add(cert)
                .map_err(|e| format!("{self}: certificate {}: not usable as a CA: {e}", i + 1))?;
        }
        Ok((pem, roots))
    }

    /// The file's bytes and its private key (the first in it).
    fn private_key(&self) -> Result<(Vec<u8>, PrivateKeyDer<'static>), String> {
        let pem = self.read()?;
        let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
            rustls::pki_types::pem::Error::NoItemsFound => format!(
                "{self}: no private key in it (expected a PEM `BEGIN PRIVATE KEY`, \
                 `BEGIN RSA PRIVATE KEY` or `BEGIN EC PRIVATE KEY` section)"
            ),
            e => format!("{self}: not a PEM file: {e}"),
        })?;
        Ok((pem, key))
    }
}

impl fmt::Display for TlsFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.setting, self.path.display())
    }
}

/// The crypto provider of the checks: rustls on ring, as tonic's TLS here
/// (`tls-ring`).
pub(crate) fn provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// The identity of `cert` (a certificate chain, the presenter's own first) and `key`
/// (its private key), read and checked as a handshake would find them late: at least
/// one certificate, a key rustls can sign with, and the certificate's own.
pub(crate) fn identity(cert: &TlsFile, key: &TlsFile) -> Result<Identity, String> {
    let (cert_pem, chain) = cert.certificates()?;
    let (key_pem, private) = key.private_key()?;
    CertifiedKey::from_der(chain, private, &provider())
        .map_err(|e| format!("{key} cannot be used with {cert}: {e}"))?;
    Ok(Identity::from_pem(cert_pem, key_pem))
}
