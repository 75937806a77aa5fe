//! The gRPC port over TLS and mutual TLS: the `limitcore-rls` binary on loopback (ports
//! chosen by the system), configured by envoyproxy/ratelimit's variables as Envoy Gateway
//! sets them or by this service's flags, with certificates made in the test (rcgen) and
//! shaped as Envoy Gateway's certgen makes them; tonic clients over TLS, with and without
//! a client certificate, and in plain text; a rustls client to see where a refusal
//! happens. The rule is GCRA at 2 a day, so that no window passes between two calls.
//! Every wait reads the binary's startup line or polls with a generous deadline: no
//! verdict depends on the machine's speed.

mod common;

use common::pki::{self, Ca};
use common::{config_dir, desc, req, OK, OVER};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

const BIN: &str = env!("CARGO_BIN_EXE_limitcore-rls");

/// How long any one step may take: far more than it ever needs.
const PATIENCE: Duration = Duration::from_secs(30);

/// The name the clients verify the service's certificate for: the address Envoy Gateway's
/// proxies reach the service at. (Certgen's certificate names only `*.envoy-gateway-system`,
/// a wildcard over one label that rustls matches to no name, and the proxies check no
/// name; a tonic client always does, so the test's certificate has this name too.)
const SERVER_NAME: &str = "envoy-ratelimit.envoy-gateway-system.svc.cluster.local";

/// 2 a day for each user, GCRA: two calls admitted, the third refused for hours.
const CONFIG: &str = "domain: edge
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: day, requests_per_unit: 2, algorithm: gcra}
";

/// The variables this test sets, removed from what the binary inherits so that the
/// test's own environment cannot change what it checks.
const VARIABLES: [&str; 7] = [
    "LIMITCORE_RLS_GRPC_TLS",
    "GRPC_SERVER_USE_TLS",
    "GRPC_SERVER_TLS_CERT",
    "GRPC_SERVER_TLS_KEY",
    "GRPC_CLIENT_TLS_CACERT",
    "GRPC_CLIENT_TLS_SAN",
    "GRPC_SERVER_TLS_CA_CERT",
];

/// A PKI as Envoy Gateway's certgen makes it, in a directory: a CA (`ca.crt`); the rate-limit
/// service's certificate and key (`tls.crt`, `tls.key`: the secret `envoy-rate-limit`); the
/// proxies' client certificate (the secret `envoy`), both named `envoy` for
/// `*.envoy-gateway-system` (the service's also for [`SERVER_NAME`]), with no extended key
/// usage.
struct Pki {
    dir: tempfile::TempDir,
    ca_pem: String,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    /// The proxies' certificate and key (PEM).
    client: (String, String),
}

impl Pki {
    fn new() -> Pki {
        let ca = Ca::new("envoy-gateway");
        let (cert, key) = ca.issue("envoy", &["*.envoy-gateway-system", SERVER_NAME]);
        let client = ca.issue("envoy", &["*.envoy-gateway-system"]);
        let dir = tempfile::tempdir().expect("a temporary directory");
        Pki {
            ca_pem: ca.pem().to_owned(),
            ca: pki::write(dir.path(), "ca.crt", ca.pem()),
            cert: pki::write(dir.path(), "tls.crt", &cert),
            key: pki::write(dir.path(), "tls.key", &key),
            client,
            dir,
        }
    }

    /// A file of this PKI's directory.
    fn file(&self, name: &str, text: &str) -> String {
        path(&pki::write(self.dir.path(), name, text))
    }
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// The running binary, killed when dropped (so that a failed assertion does not leave it
/// running).
struct Service {
    child: Child,
    /// Its startup line.
    line: String,
    grpc: SocketAddr,
    http: SocketAddr,
    /// Its configuration directory, kept while it runs.
    _config: tempfile::TempDir,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The binary's command: loopback listeners, the in-process backend, [`CONFIG`] in
/// `config`, `flags` and `envs`.
fn command(config: &Path, flags: &[&str], envs: &[(&str, &str)]) -> Command {
    let mut command = Command::new(BIN);
    for variable in VARIABLES {
        command.env_remove(variable);
    }
    command
        .args([
            "--grpc-addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
            "--backend",
            "memory",
            "--config-dir",
        ])
        .arg(config)
        .args(flags)
        .envs(envs.iter().copied());
    command
}

/// The binary started with `flags` and `envs`, once it listens: its startup line is
/// printed after both ports are bound (waited for [`PATIENCE`] at most).
fn spawn(flags: &[&str], envs: &[(&str, &str)]) -> Service {
    let config = config_dir(&[("edge.yaml", CONFIG)]);
    let mut child = command(config.path(), flags, envs)
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let stderr = child.stderr.take().expect("stderr is piped");
    let (sender, startup) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stderr).lines().map_while(Result::ok);
        let _ = sender.send(lines.find(|l| l.contains("runtime workers")));
        // Keep reading, so that the service never blocks on a full pipe.
        lines.for_each(drop);
    });
    let line = match startup.recv_timeout(PATIENCE) {
        Ok(Some(line)) => line,
        outcome => {
            let _ = child.kill();
            let status = child.wait();
            panic!("no startup line ({outcome:?}); the binary: {status:?}")
        }
    };
    let address = |after: &str, end: char| -> SocketAddr {
        line.split(after)
            .nth(1)
            .and_then(|rest| rest.split(end).next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address after {after:?} in {line:?}"))
    };
    let (grpc, http) = (address("gRPC on ", ' '), address("HTTP on ", ','));
    Service {
        child,
        line,
        grpc,
        http,
        _config: config,
    }
}

/// A tonic client of `service` over TLS, verifying the service's certificate against
/// `ca` for [`SERVER_NAME`], presenting `identity` if given (certificate and key, PEM).
async fn tls_client(
    service: &Service,
    ca: &str,
    identity: Option<&(String, String)>,
) -> Result<RateLimitServiceClient<Channel>, tonic::transport::Error> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name(SERVER_NAME);
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    let channel = Endpoint::from_shared(format!("https://{}", service.grpc))
        .expect("an endpoint")
        .tls_config(tls)?
        .connect_timeout(PATIENCE)
        .timeout(PATIENCE)
        .connect()
        .await?;
    Ok(RateLimitServiceClient::new(channel))
}

/// Three calls for `user`: each status's (code, remaining).
async fn three_calls(client: &mut RateLimitServiceClient<Channel>, user: &str) -> Vec<(i32, u32)> {
    let mut out = Vec::new();
    for _ in 0..3 {
        let r = client
            .should_rate_limit(req("edge", vec![desc(&[("user", user)])], 1))
            .await
            .expect("an answer")
            .into_inner();
        assert_eq!(r.statuses.len(), 1, "{r:?}");
        assert_eq!(r.overall_code, r.statuses[0].code, "{r:?}");
        out.push((r.statuses[0].code, r.statuses[0].limit_remaining));
    }
    out
}

/// `GET /healthcheck` in plain text: the status line.
fn healthcheck(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).expect("the HTTP port accepts");
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(
        stream,
        "GET /healthcheck HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )
    .expect("the request is sent");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("the response reads");
    response.lines().next().unwrap_or_default().to_owned()
}

/// A TLS handshake with the gRPC port by rustls itself, trusting `ca`, presenting
/// `identity` if given, offering no ALPN protocol (as Envoy Gateway's proxies, whose
/// rate-limit cluster's TLS context names none); then, if `preface`, the HTTP/2 preface
/// sent; then the header of the server's first HTTP/2 frame read: the error of the first
/// step that fails (the server's alert), or `Ok` with the header. (With TLS 1.3 the
/// client's handshake ends when it has sent its Finished: the server's refusal of its
/// certificate is the alert read next. No preface is sent then, so that the server closes
/// a connection it has read to the end.)
fn handshake(
    addr: SocketAddr,
    ca: &str,
    identity: Option<&(String, String)>,
    preface: bool,
) -> Result<[u8; 9], std::io::Error> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let config = match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<Result<_, _>>()
                    .unwrap(),
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let name = ServerName::try_from(SERVER_NAME).unwrap();
    let mut connection = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut socket = TcpStream::connect(addr)?;
    socket.set_read_timeout(Some(PATIENCE))?;
    while connection.is_handshaking() {
        connection.complete_io(&mut socket)?;
    }
    let mut tls = rustls::Stream::new(&mut connection, &mut socket);
    if preface {
        tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")?;
        tls.flush()?;
    }
    let mut header = [0u8; 9];
    tls.read_exact(&mut header)?;
    Ok(header)
}

/// The rustls error inside an I/O error, if any.
fn rustls_error(e: &std::io::Error) -> Option<&rustls::Error> {
    e.get_ref().and_then(|inner| inner.downcast_ref())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_gateway_s_variables_serve_grpc_over_tls_and_a_client_verifying_the_ca_is_answered() {
    let pki = Pki::new();
    let (ca, cert, key) = (path(&pki.ca), path(&pki.cert), path(&pki.key));
    // Envoy Gateway's rate-limit deployment's variables for the gRPC port, as it sets
    // them: GRPC_SERVER_TLS_CA_CERT is a name envoyproxy/ratelimit does not read, nor
    // does this service (no client certificate is asked for).
    let service = spawn(
        &[],
        &[
            ("GRPC_SERVER_USE_TLS", "true"),
            ("GRPC_SERVER_TLS_CERT", &cert),
            ("GRPC_SERVER_TLS_KEY", &key),
            ("GRPC_SERVER_TLS_CA_CERT", &ca),
        ],
    );
    assert!(
        service
            .line
            .contains(&format!("gRPC on {} (TLS),", service.grpc)),
        "{}",
        service.line
    );
    let mut client = tls_client(&service, &pki.ca_pem, None)
        .await
        .expect("the TLS client connects");
    assert_eq!(
        three_calls(&mut client, "alice").await,
        [(OK, 1), (OK, 0), (OVER, 0)]
    );
    // The HTTP port stays plain text.
    let http = service.http;
    let status = tokio::task::spawn_blocking(move || healthcheck(http))
        .await
        .unwrap();
    assert!(status.contains("200"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_client_ca_a_client_without_a_certificate_of_it_is_refused_at_the_handshake() {
    let pki = Pki::new();
    let (ca, cert, key) = (path(&pki.ca), path(&pki.cert), path(&pki.key));
    let service = spawn(
        &[
            "--grpc-tls",
            "--grpc-tls-cert",
            &cert,
            "--grpc-tls-key",
            &key,
            "--grpc-tls-client-ca",
            &ca,
        ],
        &[],
    );
    assert!(
        service
            .line
            .contains(&format!("gRPC on {} (mutual TLS),", service.grpc)),
        "{}",
        service.line
    );

    // No client certificate: the server's alert ends the handshake (TLS 1.3: the client
    // has sent its Finished, and reads the alert in place of an answer).
    let (addr, ca_pem) = (service.grpc, pki.ca_pem.clone());
    let refused = tokio::task::spawn_blocking(move || handshake(addr, &ca_pem, None, false))
        .await
        .unwrap()
        .expect_err("no answer without a client certificate");
    assert_eq!(
        rustls_error(&refused),
        Some(&rustls::Error::AlertReceived(
            rustls::AlertDescription::CertificateRequired
        )),
        "{refused}"
    );

    // A client certificate of another CA: refused alike (its issuer unknown).
    let stranger = Ca::new("stranger").issue("envoy", &["*.envoy-gateway-system"]);
    let (addr, ca_pem) = (service.grpc, pki.ca_pem.clone());
    let refused =
        tokio::task::spawn_blocking(move || handshake(addr, &ca_pem, Some(&stranger), false))
            .await
            .unwrap()
            .expect_err("no answer with a certificate of another CA");
    assert_eq!(
        rustls_error(&refused),
        Some(&rustls::Error::AlertReceived(
            rustls::AlertDescription::UnknownCA
        )),
        "{refused}"
    );

    // The same handshake with the proxies' certificate passes, with no ALPN: the server
    // answers the HTTP/2 preface with its SETTINGS frame (type 4).
    let (addr, ca_pem, identity) = (service.grpc, pki.ca_pem.clone(), pki.client.clone());
    let header =
        tokio::task::spawn_blocking(move || handshake(addr, &ca_pem, Some(&identity), true))
            .await
            .unwrap()
            .expect("the handshake passes with a certificate of the CA");
    assert_eq!(header[3], 4, "a SETTINGS frame: {header:?}");

    // A tonic client without a certificate gets no answer, whichever step sees the refusal.
    let outcome = match tls_client(&service, &pki.ca_pem, None).await {
        Err(e) => Err(e.to_string()),
        Ok(mut client) => client
            .should_rate_limit(req("edge", vec![desc(&[("user", "mallory")])], 1))
            .await
            .map_err(|status| status.to_string()),
    };
    assert!(outcome.is_err(), "{outcome:?}");

    // With the proxies' certificate, signed by the CA: answered.
    let mut client = tls_client(&service, &pki.ca_pem, Some(&pki.client))
        .await
        .expect("the client with a certificate connects");
    assert_eq!(
        three_calls(&mut client, "bob").await,
        [(OK, 1), (OK, 0), (OVER, 0)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_text_client_of_the_tls_port_gets_no_answer() {
    let pki = Pki::new();
    let (cert, key) = (path(&pki.cert), path(&pki.key));
    let service = spawn(
        &["--grpc-tls-cert", &cert, "--grpc-tls-key", &key],
        &[("LIMITCORE_RLS_GRPC_TLS", "true")],
    );
    // HTTP/2 in plain text: the server reads the preface as a TLS record and closes the
    // connection; whichever step sees it fails.
    let outcome = async {
        let channel = Endpoint::from_shared(format!("http://{}", service.grpc))
            .expect("an endpoint")
            .connect_timeout(PATIENCE)
            .timeout(PATIENCE)
            .connect()
            .await
            .map_err(|e| e.to_string())?;
        RateLimitServiceClient::new(channel)
            .should_rate_limit(req("edge", vec![desc(&[("user", "carol")])], 1))
            .await
            .map_err(|status| status.to_string())
    }
    .await;
    assert!(outcome.is_err(), "{outcome:?}");

    // The port still serves TLS to a TLS client.
    let mut client = tls_client(&service, &pki.ca_pem, None)
        .await
        .expect("the TLS client connects");
    assert_eq!(
        three_calls(&mut client, "carol").await,
        [(OK, 1), (OK, 0), (OVER, 0)]
    );
}

/// A bad setting: what it shows, the binary's environment, the start of its error.
type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, String);

#[test]
fn bad_tls_settings_stop_the_binary_with_a_clear_error() {
    let pki = Pki::new();
    let (ca, cert, key) = (path(&pki.ca), path(&pki.cert), path(&pki.key));
    let missing = path(&pki.dir.path().join("missing.crt"));
    let directory = path(pki.dir.path());
    let garbage = pki.file("garbage.pem", "not a certificate\n");
    let bad_key = pki.file(
        "bad.key",
        "-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n",
    );
    let not_der = pki.file(
        "not-der.pem",
        "-----BEGIN CERTIFICATE-----\nAAECAw==\n-----END CERTIFICATE-----\n",
    );
    let (_, other_key) = Ca::new("other").issue("other", &["other.test"]);
    let other_key = pki.file("other.key", &other_key);
    let tls_on = ("GRPC_SERVER_USE_TLS", "true");
    let cases: Vec<Case<'_>> = vec![
        (
            "TLS on without a certificate",
            vec![tls_on],
            "GRPC_SERVER_USE_TLS turns TLS on, but no certificate is given: set \
             --grpc-tls-cert (GRPC_SERVER_TLS_CERT) and --grpc-tls-key (GRPC_SERVER_TLS_KEY)"
                .into(),
        ),
        (
            "TLS on by this service's variable",
            vec![("LIMITCORE_RLS_GRPC_TLS", "true")],
            "--grpc-tls turns TLS on, but no certificate is given".into(),
        ),
        (
            "a missing certificate file",
            vec![
                tls_on,
                ("GRPC_SERVER_TLS_CERT", &missing),
                ("GRPC_SERVER_TLS_KEY", &key),
            ],
            format!("--grpc-tls-cert (GRPC_SERVER_TLS_CERT) {missing}: cannot read it: "),
        ),
        (
            "a directory for a certificate file",
            vec![
                tls_on,
                ("GRPC_SERVER_TLS_CERT", &directory),
                ("GRPC_SERVER_TLS_KEY", &key),
            ],
            format!("--grpc-tls-cert (GRPC_SERVER_TLS_CERT) {directory}: cannot read it: "),
        ),
        (
            "a certificate file with no certificate",
            vec![
                tls_on,
                ("GRPC_SERVER_TLS_CERT", &garbage),
                ("GRPC_SERVER_TLS_KEY", &key),
            ],
            format!("--grpc-tls-cert (GRPC_SERVER_TLS_CERT) {garbage}: no certificate in it"),
        ),
        (
            "a missing key file",
            vec![
                tls_on,
                ("GRPC_SERVER_TLS_CERT", &cert),
                ("GRPC_SERVER_TLS_KEY", &missing),
            ],
            format!("--grpc-tls-key (GRPC_SERVER_TLS_KEY) {missing}: cannot read it: "),
        ),
        (
            "a key file that holds a certificate",
            vec![
                tls_on,
                ("GRPC_SERVER_TLS_CERT", &cert),
                ("GRPC_SERVER_TLS_KEY", &cert),
            ],
            format!("--grpc-tls-key (GRPC_SERVER_TLS_KEY) {cert}: no private key in it"),
        ),
        (
            "a key file of bad PEM",
            vec![
                tls_on,
                ("GRPC_SERVER_TLS_CERT", &cert),
                ("GRPC_SERVER_TLS_KEY", &bad_key),
            ],
            format!("--grpc-tls-key (GRPC_SERVER_TLS_KEY) {bad_key}: not a PEM file: "),
        ),
        (
            "the key of another certificate",
            vec![
                tls_on,
                ("GRPC_SERVER_TLS_CERT", &cert),
                ("GRPC_SERVER_TLS_KEY", &other_key),
            ],
            format!(
                "--grpc-tls-key (GRPC_SERVER_TLS_KEY) {other_key} cannot be used with \
                 --grpc-tls-cert (GRPC_SERVER_TLS_CERT) {cert}: "
            ),
        ),
        (
            "a certificate without its key",
            vec![tls_on, ("GRPC_SERVER_TLS_CERT", &cert)],
            format!(
                "--grpc-tls-cert (GRPC_SERVER_TLS_CERT) {cert}: a server certificate without \
                 its key"
            ),
        ),
        (
            "a key without its certificate",
            vec![tls_on, ("GRPC_SERVER_TLS_KEY", &key)],
            format!(
                "--grpc-tls-key (GRPC_SERVER_TLS_KEY) {key}: a server key without its \
                 certificate"
            ),
        ),
        (
            "a missing client CA file",
            vec![
                tls_on,
                ("GRPC_SERVER_TLS_CERT", &cert),
                ("GRPC_SERVER_TLS_KEY", &key),
                ("GRPC_CLIENT_TLS_CACERT", &missing),
            ],
            format!("--grpc-tls-client-ca (GRPC_CLIENT_TLS_CACERT) {missing}: cannot read it: "),
        ),
        (
            "a client CA file with no certificate",
            vec![
                tls_on,
                ("GRPC_SERVER_TLS_CERT", &cert),
                ("GRPC_SERVER_TLS_KEY", &key),
                ("GRPC_CLIENT_TLS_CACERT", &garbage),
            ],
            format!(
                "--grpc-tls-client-ca (GRPC_CLIENT_TLS_CACERT) {garbage}: no certificate in it"
            ),
        ),
        (
            "a client CA file of PEM that is no certificate",
            vec![
                tls_on,
                ("GRPC_SERVER_TLS_CERT", &cert),
                ("GRPC_SERVER_TLS_KEY", &key),
                ("GRPC_CLIENT_TLS_CACERT", &not_der),
            ],
            format!(
                "--grpc-tls-client-ca (GRPC_CLIENT_TLS_CACERT) {not_der}: certificate 1: not \
                 usable as a CA: "
            ),
        ),
        (
            "TLS files for a plain-text port",
            vec![
                ("GRPC_SERVER_TLS_CERT", &cert),
                ("GRPC_SERVER_TLS_KEY", &key),
                ("GRPC_CLIENT_TLS_CACERT", &ca),
            ],
            "--grpc-tls-cert (GRPC_SERVER_TLS_CERT), --grpc-tls-key (GRPC_SERVER_TLS_KEY), \
             --grpc-tls-client-ca (GRPC_CLIENT_TLS_CACERT) set, but the gRPC port serves \
             plain text: turn TLS on (--grpc-tls, GRPC_SERVER_USE_TLS=true)"
                .into(),
        ),
        (
            "TLS turned off by this service's variable over GRPC_SERVER_USE_TLS",
            vec![
                tls_on,
                ("LIMITCORE_RLS_GRPC_TLS", "false"),
                ("GRPC_SERVER_TLS_CERT", &cert),
                ("GRPC_SERVER_TLS_KEY", &key),
            ],
            "--grpc-tls-cert (GRPC_SERVER_TLS_CERT), --grpc-tls-key (GRPC_SERVER_TLS_KEY) set, \
             but the gRPC port serves plain text"
                .into(),
        ),
        (
            "envoyproxy/ratelimit's client SAN, not supported",
            vec![
                tls_on,
                ("GRPC_SERVER_TLS_CERT", &cert),
                ("GRPC_SERVER_TLS_KEY", &key),
                ("GRPC_CLIENT_TLS_CACERT", &ca),
                ("GRPC_CLIENT_TLS_SAN", "envoy.test"),
            ],
            "GRPC_CLIENT_TLS_SAN (--grpc-client-tls-san) \"envoy.test\": not supported".into(),
        ),
    ];
    for (what, envs, expected) in cases {
        let config = config_dir(&[("edge.yaml", CONFIG)]);
        let out = command(config.path(), &[], &envs)
            .output()
            .expect("the binary runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
        let expected = format!("limitcore-rls: {expected}");
        assert!(
            stderr.starts_with(&expected),
            "{what}:\n{stderr}\nexpected:\n{expected}"
        );
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    }

    // A value that is no boolean is refused by the flags' parser (a usage error).
    let config = config_dir(&[("edge.yaml", CONFIG)]);
    let out = command(config.path(), &[], &[("GRPC_SERVER_USE_TLS", "maybe")])
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--grpc-server-use-tls"), "{stderr}");
}
