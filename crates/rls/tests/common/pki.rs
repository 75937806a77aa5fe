//! Certificates for the tests' mutual TLS, made with rcgen in the test: a CA, and leaf
//! certificates it signs, shaped as Envoy Gateway's certgen makes its own (a common name,
//! DNS names, no extended key usage, so valid for a server and a client alike), with
//! ECDSA P-256 keys (rcgen on ring cannot make the RSA keys Envoy Gateway uses).

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use std::path::{Path, PathBuf};

/// A certificate authority of the test's own.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Ca {
    /// A self-signed CA named `name`.
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.distinguished_name = named(name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate().expect("a CA key");
        let cert = params.self_signed(&key).expect("the CA certificate");
        Ca {
            issuer: Issuer::new(params, key),
            pem: cert.pem(),
        }
    }

    /// The CA's certificate (PEM).
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A leaf certificate signed by this CA, named `common_name`, valid for `names` (DNS
    /// names or IP addresses): its certificate and key (PEM).
    pub fn issue(&self, common_name: &str, names: &[&str]) -> (String, String) {
        let names: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("leaf parameters");
        params.distinguished_name = named(common_name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::DataEncipherment,
            KeyUsagePurpose::KeyEncipherment,
            KeyUsagePurpose::ContentCommitment,
        ];
        let key = KeyPair::generate().expect("a leaf key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("the leaf certificate");
        (cert.pem(), key.serialize_pem())
    }
}

fn named(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}

/// Write `text` to `dir/name`: its path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write a PEM file");
    path
}
