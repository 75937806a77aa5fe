//! Configuration over xDS: the service subscribed to a small ADS management server in the
//! test (state of the world, on loopback), on a manual clock so that no window passes
//! under a test's feet. Versions are followed in order, a key's usage is kept across
//! them, a bad version is NACKed with its error while the version in force stays, and a
//! management server killed and restarted on the same port is survived. Every wait polls
//! for a condition with a generous deadline: no verdict depends on the machine's speed.

mod common;

use clap::Parser as _;
use common::ads::{http_get, resource, serve_xds, until, Management, ServerTls, Shared};
use common::pki::{self, Ca};
use common::*;
use limitcore::clock::ManualClock;
use limitcore_rls::pb::ratelimit::config::ratelimit::v3::{
    RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RateLimitReplace, RateLimitUnit,
};
use limitcore_rls::{Config, ServerConfig, Settings};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How long any one condition may take to hold: far more than it ever needs.
const PATIENCE: Duration = Duration::from_secs(30);

const HOUR: i32 = RateLimitUnit::Hour as i32;
const MINUTE: i32 = RateLimitUnit::Minute as i32;

/// The process's Prometheus recorder, installed once (every series of every test of this
/// binary goes to it, so each test's versions have names of their own).
fn recorder() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            PrometheusBuilder::new()
                .install_recorder()
                .expect("the recorder installs")
        })
        .clone()
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn clock() -> limitcore_rls::SharedClock {
    Arc::new(ManualClock::starting_at(unix(10.0)))
}

/// `n` hits of `user` in domain `edge`: the statuses' (code, limit, remaining).
async fn hits_of(
    c: &mut envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient<tonic::transport::Channel>,
    user: &str,
    n: usize,
) -> Vec<(i32, u32, u32)> {
    let mut out = Vec::new();
    for _ in 0..n {
        let r = ask(c, req("edge", vec![desc(&[("user", user)])], 1)).await;
        let s = &r.statuses[0];
        let limit = s.current_limit.as_ref().map_or(0, |l| l.requests_per_unit);
        out.push((s.code, limit, s.limit_remaining));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_apply_in_order_keep_usage_and_a_bad_one_is_nacked() {
    let metrics = recorder();
    let shared = Shared::new(
        "nack-1",
        vec![resource("edge-rules", "edge", "user", 5, HOUR)],
    );
    let server = Management::start(loopback(), Arc::clone(&shared));
    let rls = serve_xds(
        &server.url(),
        clock(),
        &[
            "--config-xds-node-id",
            "rls-1",
            "--config-xds-node-metadata",
            "cluster=edge, zone=a",
        ],
        Some(metrics),
    )
    .await;
    let status = Arc::clone(&rls.config);
    until(PATIENCE, "version nack-1 in force", || {
        status.report().version.as_deref() == Some("nack-1")
    })
    .await;

    // The subscription: the node, the type, a wildcard; then the ACK of version 1.
    let first = shared.requests()[0].clone();
    let node = first.node.clone().expect("the node is sent");
    assert_eq!(node.id, "rls-1");
    let fields = &node.metadata.expect("the metadata is sent").fields;
    let text = |k: &str| match fields.get(k).and_then(|v| v.kind.clone()) {
        Some(envoy_types::pb::google::protobuf::value::Kind::StringValue(s)) => s,
        other => panic!("{k}: {other:?}"),
    };
    assert_eq!((text("cluster"), text("zone")), ("edge".into(), "a".into()));
    assert_eq!(first.type_url, limitcore_rls::xds::TYPE_URL);
    assert_eq!(
        (first.version_info.as_str(), first.response_nonce.as_str()),
        ("", "")
    );
    assert!(first.resource_names.is_empty());
    until(PATIENCE, "the ACK of nack-1", || {
        shared.answer_to("nack-1").is_some()
    })
    .await;
    let ack = shared.answer_to("nack-1").unwrap();
    assert_eq!(ack.version_info, "nack-1");
    assert_eq!(ack.error_detail, None);

    // Version 1: 3 of alice's 5 used.
    let mut c = client(&rls).await;
    let used = hits_of(&mut c, "alice", 3).await;
    assert_eq!(used, vec![(OK, 5, 4), (OK, 5, 3), (OK, 5, 2)]);

    // Version 2 raises the limit to 10: alice keeps her 3, so 7 more pass and the 8th is
    // refused.
    shared.set(
        "nack-2",
        vec![resource("edge-rules", "edge", "user", 10, HOUR)],
    );
    until(PATIENCE, "version nack-2 in force", || {
        status.report().version.as_deref() == Some("nack-2")
    })
    .await;
    let after = hits_of(&mut c, "alice", 8).await;
    let expected: Vec<(i32, u32, u32)> = (0..7)
        .map(|i| (OK, 10, 6 - i))
        .chain([(OVER, 10, 0)])
        .collect();
    assert_eq!(after, expected);
    until(PATIENCE, "the ACK of nack-2", || {
        shared.answer_to("nack-2").is_some()
    })
    .await;
    assert_eq!(shared.answer_to("nack-2").unwrap().version_info, "nack-2");

    // Version 3 is invalid (a limit without a unit): NACKed with the error, naming the
    // resource and the field, and the version in force (2) in `version_info`.
    let mut bad = resource("edge-rules", "edge", "user", 20, HOUR);
    bad.descriptors[0].rate_limit.as_mut().unwrap().unit = RateLimitUnit::Unknown as i32;
    shared.set("nack-3", vec![bad]);
    until(PATIENCE, "the NACK of nack-3", || {
        shared.answer_to("nack-3").is_some()
    })
    .await;
    let nack = shared.answer_to("nack-3").unwrap();
    assert_eq!(
        nack.version_info, "nack-2",
        "a NACK names the version in force"
    );
    let detail = nack.error_detail.expect("a NACK carries error_detail");
    assert_eq!(detail.code, 3, "INVALID_ARGUMENT");
    assert!(
        detail
            .message
            .contains("edge-rules: descriptors[0].rate_limit.unit: invalid rate limit unit"),
        "{}",
        detail.message
    );
    let report = status.report();
    assert_eq!(report.version.as_deref(), Some("nack-2"));
    let (refused_version, why) = report.refused.clone().expect("the refusal is reported");
    assert_eq!(refused_version.as_deref(), Some("nack-3"));
    assert!(why.contains("invalid rate limit unit"), "{why}");
    // Version 2 still decides: alice stays refused, bob has 10.
    assert_eq!(hits_of(&mut c, "alice", 1).await, vec![(OVER, 10, 0)]);
    assert_eq!(hits_of(&mut c, "bob", 1).await, vec![(OK, 10, 9)]);

    // GET /json and /metrics report the version in force and the refusal.
    let (code, body) = http_get(rls.http_addr, "/json").await;
    assert_eq!(code, 200);
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(json["source"], "xds");
    assert_eq!(json["location"], server.url());
    assert_eq!(json["version"], "nack-2");
    assert_eq!(json["connected"], true);
    assert_eq!(json["refused"]["version"], "nack-3");
    assert!(json["refused"]["error"]
        .as_str()
        .unwrap()
        .contains("invalid rate limit unit"));
    let (code, text) = http_get(rls.http_addr, "/metrics").await;
    assert_eq!(code, 200);
    let value = |name: &str, labels: &[&str]| -> Option<f64> {
        text.lines()
            .find(|l| l.starts_with(&format!("{name}{{")) && labels.iter().all(|x| l.contains(x)))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    };
    assert_eq!(
        value(
            "ratelimit_config_info",
            &["source=\"xds\"", "version=\"nack-2\""]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(
            "ratelimit_config_info",
            &["source=\"xds\"", "version=\"nack-1\""]
        ),
        Some(0.0),
        "{text}"
    );
    let rejected = value(
        "ratelimit_config_updates_total",
        &["source=\"xds\"", "result=\"rejected\""],
    );
    assert!(rejected.is_some_and(|n| n >= 1.0), "{text}");
    let accepted = value(
        "ratelimit_config_updates_total",
        &["source=\"xds\"", "result=\"accepted\""],
    );
    assert!(accepted.is_some_and(|n| n >= 2.0), "{text}");

    // A good version after the bad one applies, and the refusal no longer stands.
    shared.set(
        "nack-4",
        vec![resource("edge-rules", "edge", "user", 12, HOUR)],
    );
    until(PATIENCE, "version nack-4 in force", || {
        status.report().version.as_deref() == Some("nack-4")
    })
    .await;
    assert_eq!(status.report().refused, None);
    // Alice's 10, and her two refused hits recorded past the limit (a debt): the fixed
    // window carries at least one permit of a debt to the new limit, so 11 of 12 are used.
    assert_eq!(hits_of(&mut c, "alice", 1).await, vec![(OK, 12, 0)]);
    rls.stop().await;
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_management_server_killed_and_restarted_on_its_port_is_survived() {
    let shared = Shared::new(
        "restart-1",
        vec![resource("api", "edge", "user", 4, MINUTE)],
    );
    let server = Management::start(loopback(), Arc::clone(&shared));
    let rls = serve_xds(
        &server.url(),
        clock(),
        &[
            "--config-xds-backoff",
            "20ms",
            "--config-xds-backoff-max",
            "200ms",
        ],
        None,
    )
    .await;
    let status = Arc::clone(&rls.config);
    until(PATIENCE, "version restart-1 in force", || {
        status.report().version.as_deref() == Some("restart-1")
    })
    .await;
    let mut c = client(&rls).await;
    assert_eq!(
        hits_of(&mut c, "carol", 2).await,
        vec![(OK, 4, 3), (OK, 4, 2)]
    );

    // Killed: the stream breaks, the configuration in force keeps deciding.
    let (addr, shared) = server.kill();
    until(PATIENCE, "the stream seen down", || {
        !status.report().connected
    })
    .await;
    assert_eq!(hits_of(&mut c, "carol", 1).await, vec![(OK, 4, 1)]);
    assert_eq!(status.report().version.as_deref(), Some("restart-1"));
    let before = shared.requests().len();

    // Restarted on the same port with a new version: the service reconnects (several
    // attempts may have failed meanwhile, each after a capped delay), names the version
    // in force in its first request, and applies the new one keeping carol's usage.
    shared.set(
        "restart-2",
        vec![resource("api", "edge", "user", 6, MINUTE)],
    );
    let server = Management::start(addr, Arc::clone(&shared));
    until(PATIENCE, "version restart-2 in force", || {
        status.report().version.as_deref() == Some("restart-2")
    })
    .await;
    assert!(status.report().connected);
    // The new stream's opening request (no nonce: it answers no response).
    let reconnect = shared.requests()[before..]
        .iter()
        .find(|r| r.response_nonce.is_empty())
        .cloned()
        .expect("the new stream's first request");
    assert_eq!(reconnect.version_info, "restart-1");
    assert_eq!(
        hits_of(&mut c, "carol", 4).await,
        vec![(OK, 6, 2), (OK, 6, 1), (OK, 6, 0), (OVER, 6, 0)]
    );
    rls.stop().await;
    drop(server);
}

/// The binary with `envs` (and loopback listeners): the process, its startup line and
/// its HTTP address.
async fn binary(envs: &[(&str, &str)]) -> (std::process::Child, String, SocketAddr) {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_limitcore-rls"))
        .args(["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
        .envs(envs.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let stderr = child.stderr.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stderr)
            .lines()
            .map(|l| l.expect("stderr reads"));
        let line = lines.find(|l| l.contains("runtime workers"));
        // Keep reading, so that the service never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        line
    })
    .await
    .unwrap();
    let line = line.unwrap_or_else(|| {
        let _ = child.kill();
        panic!("no startup line")
    });
    let Some(http) = line
        .split("HTTP on ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|a| a.parse().ok())
    else {
        let _ = child.kill();
        panic!("no HTTP address in {line:?}")
    };
    (child, line, http)
}

/// Poll the binary's `GET /json` until `version` is in force.
async fn until_version(http: SocketAddr, version: &str) {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let (_, body) = http_get(http, "/json").await;
        let json: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        if json["version"] == version {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{version} never applied: {body}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoyproxy_ratelimit_environment_variables_configure_the_binary_over_xds() {
    let shared = Shared::new("env-1", vec![resource("api", "edge", "user", 2, MINUTE)]);
    let server = Management::start(loopback(), Arc::clone(&shared));
    let addr = server.addr.to_string();
    let (mut child, line, http) = binary(&[
        ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
        ("CONFIG_GRPC_XDS_SERVER_URL", &addr),
        ("CONFIG_GRPC_XDS_NODE_ID", "from-env"),
        ("CONFIG_GRPC_XDS_NODE_METADATA", "zone=b"),
        ("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "100ms"),
    ])
    .await;
    assert!(
        line.contains(&format!("configuration from xds http://{}", server.addr)),
        "{line}"
    );
    until_version(http, "env-1").await;
    let node = shared.requests()[0].node.clone().unwrap();
    assert_eq!(node.id, "from-env");
    assert!(node.metadata.unwrap().fields.contains_key("zone"));
    let _ = child.kill();
    let _ = child.wait();
}

/// A PKI as Envoy Gateway's certgen makes it, in a directory: a CA; the management
/// server's certificate for the controller's service names (`envoy-gateway`, ...); the
/// service's client certificate (Envoy Gateway's `*` certificate).
struct Pki {
    dir: tempfile::TempDir,
    ca: std::path::PathBuf,
    cert: std::path::PathBuf,
    key: std::path::PathBuf,
    server: ServerTls,
}

impl Pki {
    fn new() -> Pki {
        let ca = Ca::new("envoy-gateway");
        let (server_cert, server_key) = ca.issue(
            "envoy-gateway",
            &[
                "envoy-gateway",
                "envoy-gateway.envoy-gateway-system",
                "envoy-gateway.envoy-gateway-system.svc",
                "envoy-gateway.envoy-gateway-system.svc.cluster.local",
            ],
        );
        let (client_cert, client_key) = ca.issue("*", &["*.envoy-gateway-system"]);
        let dir = tempfile::tempdir().expect("a temporary directory");
        Pki {
            ca: pki::write(dir.path(), "ca.crt", ca.pem()),
            cert: pki::write(dir.path(), "tls.crt", &client_cert),
            key: pki::write(dir.path(), "tls.key", &client_key),
            server: ServerTls {
                cert: server_cert,
                key: server_key,
                client_ca: ca.pem().to_owned(),
            },
            dir,
        }
    }

    /// A file of this PKI's directory.
    fn file(&self, name: &str, text: &str) -> String {
        path(&pki::write(self.dir.path(), name, text))
    }
}

fn path(p: &std::path::Path) -> String {
    p.display().to_string()
}

/// The service keeps trying a management server that its TLS refuses or that refuses its
/// TLS: `server` sees at least three connections, and meanwhile no request (the handshake
/// never completed), the service reports the stream down with `why`, has no version and
/// no rule (a descriptor is answered OK with no limit). Returns the reason it reports.
async fn refused(server: &Management, rls: &limitcore_rls::Running) -> String {
    until(PATIENCE, "three connection attempts", || {
        server.shared.connections() >= 3
    })
    .await;
    let report = rls.config.report();
    assert!(!report.connected, "{report:?}");
    assert_eq!(
        (report.version.as_deref(), report.accepted),
        (None, 0),
        "{report:?}"
    );
    assert!(
        server.shared.requests().is_empty(),
        "no request passes the handshake"
    );
    let mut c = client(rls).await;
    let r = ask(&mut c, req("edge", vec![desc(&[("user", "erin")])], 1)).await;
    assert_eq!(codes(&r), (OK, vec![OK]));
    assert_eq!(r.statuses[0].current_limit, None, "no rule applied");
    let (_, body) = http_get(rls.http_addr, "/json").await;
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(json["connected"], false, "{body}");
    // Each attempt reports its own reason, so /json (read later) may show a later one.
    assert!(
        json["disconnected"].as_str().is_some_and(|s| !s.is_empty()),
        "{body}"
    );
    report.disconnected.expect("the reason is reported")
}

/// The reconnection delays of the refusal tests: short, so that attempts come quickly.
const QUICK: [&str; 4] = [
    "--config-xds-backoff",
    "20ms",
    "--config-xds-backoff-max",
    "100ms",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_mutual_tls_the_service_gets_version_1_and_decides_by_it() {
    let pki = Pki::new();
    let shared = Shared::new("tls-1", vec![resource("api", "edge", "user", 2, MINUTE)]);
    let server = Management::start_tls(loopback(), Arc::clone(&shared), &pki.server);
    let (ca, cert, key) = (path(&pki.ca), path(&pki.cert), path(&pki.key));
    // The URL's host is an address the certificate does not name: the name to verify is
    // given, as in Envoy Gateway's deployment the URL's host (`envoy-gateway`) is.
    let rls = serve_xds(
        &server.url(),
        clock(),
        &[
            "--config-xds-node-id",
            "envoy-ratelimit",
            "--config-xds-tls-ca",
            &ca,
            "--config-xds-tls-cert",
            &cert,
            "--config-xds-tls-key",
            &key,
            "--config-xds-tls-san",
            "envoy-gateway",
        ],
        None,
    )
    .await;
    let status = Arc::clone(&rls.config);
    until(PATIENCE, "version tls-1 in force", || {
        status.report().version.as_deref() == Some("tls-1")
    })
    .await;
    let report = status.report();
    assert!(report.connected);
    assert_eq!(report.disconnected, None);
    assert_eq!(report.location, format!("https://{}", server.addr));
    assert_eq!(
        shared.requests()[0].node.as_ref().map(|n| n.id.as_str()),
        Some("envoy-ratelimit")
    );
    until(PATIENCE, "the ACK of tls-1", || {
        shared.answer_to("tls-1").is_some()
    })
    .await;
    assert_eq!(shared.answer_to("tls-1").unwrap().error_detail, None);
    let mut c = client(&rls).await;
    assert_eq!(
        hits_of(&mut c, "dave", 3).await,
        vec![(OK, 2, 1), (OK, 2, 0), (OVER, 2, 0)]
    );
    rls.stop().await;
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_gateway_s_variables_configure_the_binary_over_mutual_tls() {
    let pki = Pki::new();
    let shared = Shared::new("eg-1", vec![resource("api", "edge", "user", 2, MINUTE)]);
    let server = Management::start_tls(loopback(), Arc::clone(&shared), &pki.server);
    let addr = server.addr.to_string();
    let (ca, cert, key) = (path(&pki.ca), path(&pki.cert), path(&pki.key));
    // Envoy Gateway's rate-limit deployment's variables (its URL, `envoy-gateway:18001`,
    // names the host its certificate is for; here the name is given).
    let (mut child, line, http) = binary(&[
        ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
        ("CONFIG_GRPC_XDS_SERVER_URL", &addr),
        ("CONFIG_GRPC_XDS_NODE_ID", "envoy-ratelimit"),
        ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
        ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", &cert),
        ("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", &key),
        ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", &ca),
        ("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "envoy-gateway"),
    ])
    .await;
    assert!(
        line.contains(&format!("configuration from xds https://{}", server.addr)),
        "{line}"
    );
    until_version(http, "eg-1").await;
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_client_certificate_of_the_server_s_ca_the_server_refuses_and_the_service_keeps_trying(
) {
    let pki = Pki::new();
    let stranger = Ca::new("stranger");
    let (cert, key) = stranger.issue("*", &["*.envoy-gateway-system"]);
    let stranger_cert = pki.file("stranger.crt", &cert);
    let stranger_key = pki.file("stranger.key", &key);
    let ca = path(&pki.ca);
    let cases: [(&str, Vec<&str>); 2] = [
        ("no client certificate", vec![]),
        (
            "a client certificate of another CA",
            vec![
                "--config-xds-tls-cert",
                &stranger_cert,
                "--config-xds-tls-key",
                &stranger_key,
            ],
        ),
    ];
    for (what, flags) in cases {
        let shared = Shared::new("never", vec![resource("api", "edge", "user", 2, MINUTE)]);
        let server = Management::start_tls(loopback(), Arc::clone(&shared), &pki.server);
        let mut all = vec![
            "--config-xds-tls-ca",
            &ca,
            "--config-xds-tls-san",
            "envoy-gateway",
        ];
        all.extend(QUICK);
        all.extend(flags);
        let rls = serve_xds(&server.url(), clock(), &all, None).await;
        let why = refused(&server, &rls).await;
        // What the client sees of the server's refusal depends on when the alert is
        // read (an alert, or the connection closed): not asserted.
        assert!(!why.is_empty(), "{what}");
        rls.stop().await;
        drop(server);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_certificate_not_for_the_name_or_not_of_the_ca_is_refused() {
    let pki = Pki::new();
    let other = Ca::new("stranger");
    let other_ca = pki.file("stranger-ca.crt", other.pem());
    let (ca, cert, key) = (path(&pki.ca), path(&pki.cert), path(&pki.key));
    let identity = ["--config-xds-tls-cert", &cert, "--config-xds-tls-key", &key];
    let cases: [(&str, Vec<&str>, &str); 4] = [
        (
            "a name the certificate does not have",
            vec![
                "--config-xds-tls-ca",
                &ca,
                "--config-xds-tls-san",
                "other.test",
            ],
            "certificate not valid for name \"other.test\"",
        ),
        (
            "the URL's host, an address the certificate does not name",
            vec!["--config-xds-tls-ca", &ca],
            "certificate not valid for name \"127.0.0.1\"",
        ),
        (
            "another CA",
            vec![
                "--config-xds-tls-ca",
                &other_ca,
                "--config-xds-tls-san",
                "envoy-gateway",
            ],
            "UnknownIssuer",
        ),
        (
            "no CA: the system's roots, which do not have the test's",
            vec!["--config-xds-tls-san", "envoy-gateway"],
            "UnknownIssuer",
        ),
    ];
    for (what, flags, error) in cases {
        let shared = Shared::new("never", vec![resource("api", "edge", "user", 2, MINUTE)]);
        let server = Management::start_tls(loopback(), Arc::clone(&shared), &pki.server);
        let mut all: Vec<&str> = identity.to_vec();
        all.extend(QUICK);
        all.extend(flags);
        let rls = serve_xds(&server.url(), clock(), &all, None).await;
        let why = refused(&server, &rls).await;
        assert!(
            why.contains("invalid peer certificate") && why.contains(error),
            "{what}: {why}"
        );
        rls.stop().await;
        drop(server);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tls_settings_stop_the_service_at_start_naming_the_setting_and_the_file() {
    let pki = Pki::new();
    let (ca, cert, key) = (path(&pki.ca), path(&pki.cert), path(&pki.key));
    let missing = path(&pki.dir.path().join("missing.crt"));
    let directory = path(pki.dir.path());
    let garbage = pki.file("garbage.pem", "not a certificate\n");
    let bad_base64 = pki.file(
        "bad-base64.pem",
        "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
    );
    let not_der = pki.file(
        "not-der.pem",
        "-----BEGIN CERTIFICATE-----\nAAECAw==\n-----END CERTIFICATE-----\n",
    );
    let bad_key = pki.file(
        "bad.key",
        "-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n",
    );
    let (_, other_key) = Ca::new("other").issue("other", &["other.test"]);
    let other_key = pki.file("other.key", &other_key);
    let ours = |more: &[&str]| -> Vec<String> {
        ["--config-xds", "xds.test:18001", "--config-xds-tls"]
            .iter()
            .chain(more)
            .map(|s| (*s).to_owned())
            .collect()
    };
    let theirs = |more: &[&str]| -> Vec<String> {
        [
            "--config-type",
            "GRPC_XDS_SOTW",
            "--config-grpc-xds-server-url",
            "xds.test:18001",
            "--config-grpc-xds-server-use-tls=true",
        ]
        .iter()
        .chain(more)
        .map(|s| (*s).to_owned())
        .collect()
    };
    let cases: Vec<(&str, Vec<String>, String)> = vec![
        (
            "a missing CA file",
            ours(&["--config-xds-tls-ca", &missing]),
            format!("--config-xds-tls-ca {missing}: cannot read it: "),
        ),
        (
            "a directory for a CA file",
            theirs(&["--config-grpc-xds-server-tls-cacert", &directory]),
            format!("CONFIG_GRPC_XDS_SERVER_TLS_CACERT {directory}: cannot read it: "),
        ),
        (
            "a CA file with no certificate",
            ours(&["--config-xds-tls-ca", &garbage]),
            format!("--config-xds-tls-ca {garbage}: no certificate in it"),
        ),
        (
            "a CA file of bad PEM",
            ours(&["--config-xds-tls-ca", &bad_base64]),
            format!("--config-xds-tls-ca {bad_base64}: not a PEM file: "),
        ),
        (
            "a CA file of PEM that is no certificate",
            ours(&["--config-xds-tls-ca", &not_der]),
            format!("--config-xds-tls-ca {not_der}: certificate 1: not usable as a CA: "),
        ),
        (
            "a client certificate file with no certificate",
            theirs(&[
                "--config-grpc-xds-server-tls-cacert",
                &ca,
                "--config-grpc-xds-client-tls-cert",
                &garbage,
                "--config-grpc-xds-client-tls-key",
                &key,
            ]),
            format!("CONFIG_GRPC_XDS_CLIENT_TLS_CERT {garbage}: no certificate in it"),
        ),
        (
            "a missing client key",
            ours(&[
                "--config-xds-tls-ca",
                &ca,
                "--config-xds-tls-cert",
                &cert,
                "--config-xds-tls-key",
                &missing,
            ]),
            format!("--config-xds-tls-key {missing}: cannot read it: "),
        ),
        (
            "a key file that holds a certificate",
            ours(&[
                "--config-xds-tls-ca",
                &ca,
                "--config-xds-tls-cert",
                &cert,
                "--config-xds-tls-key",
                &cert,
            ]),
            format!("--config-xds-tls-key {cert}: no private key in it"),
        ),
        (
            "a key file of bad PEM",
            ours(&[
                "--config-xds-tls-ca",
                &ca,
                "--config-xds-tls-cert",
                &cert,
                "--config-xds-tls-key",
                &bad_key,
            ]),
            format!("--config-xds-tls-key {bad_key}: not a PEM file: "),
        ),
        (
            "the key of another certificate",
            ours(&[
                "--config-xds-tls-ca",
                &ca,
                "--config-xds-tls-cert",
                &cert,
                "--config-xds-tls-key",
                &other_key,
            ]),
            format!("--config-xds-tls-key {other_key} cannot be used with --config-xds-tls-cert {cert}: "),
        ),
        (
            "a key without a certificate",
            ours(&["--config-xds-tls-ca", &ca, "--config-xds-tls-key", &key]),
            format!("--config-xds-tls-key {key}: a client key without its certificate"),
        ),
        (
            "a certificate without a key",
            theirs(&["--config-grpc-xds-client-tls-cert", &cert]),
            format!("CONFIG_GRPC_XDS_CLIENT_TLS_CERT {cert}: a client certificate without its key"),
        ),
        (
            "TLS asked for with an http:// URL",
            vec!["--config-xds".into(), "http://xds.test:18001".into(), "--config-xds-tls".into()],
            "--config-xds \"http://xds.test:18001\": a plain-text (http://) address, but --config-xds-tls asks for TLS".into(),
        ),
        (
            "TLS turned off with an https:// URL",
            vec![
                "--config-xds".into(),
                "https://xds.test:18001".into(),
                "--config-grpc-xds-server-use-tls=false".into(),
            ],
            "--config-xds \"https://xds.test:18001\": a TLS (https://) address, but CONFIG_GRPC_XDS_SERVER_USE_TLS turns TLS off".into(),
        ),
        (
            "TLS files without TLS",
            vec![
                "--config-xds".into(),
                "xds.test:18001".into(),
                "--config-xds-tls-ca".into(),
                ca.clone(),
                "--config-grpc-xds-server-tls-san".into(),
                "xds.test".into(),
            ],
            "--config-xds-tls-ca, CONFIG_GRPC_XDS_SERVER_TLS_SAN set, but the management server http://xds.test:18001 is reached in plain text".into(),
        ),
        (
            "a server name that is no name",
            ours(&["--config-xds-tls-ca", &ca, "--config-xds-tls-san", "not a name!"]),
            "the TLS server name (--config-xds-tls-san, CONFIG_GRPC_XDS_SERVER_TLS_SAN) \"not a name!\": not a DNS name or an IP address".into(),
        ),
    ];
    for (what, args, expected) in cases {
        let config =
            ServerConfig::try_parse_from(["limitcore-rls".to_owned()].into_iter().chain(args))
                .unwrap_or_else(|e| panic!("{what}: the flags parse: {e}"));
        let err = config.xds.resolve().expect_err(what);
        assert!(
            err.starts_with(&expected),
            "{what}:\n{err}\nexpected:\n{expected}"
        );
    }

    // The service itself refuses to start, with the message.
    let config = ServerConfig::try_parse_from(
        ["limitcore-rls".to_owned()]
            .into_iter()
            .chain(ours(&["--config-xds-tls-ca", &missing])),
    )
    .unwrap();
    let err = limitcore_rls::start(&config, clock(), None)
        .await
        .expect_err("a missing file stops the start");
    assert!(
        err.starts_with(&format!("--config-xds-tls-ca {missing}: cannot read it")),
        "{err}"
    );

    // A value that is no boolean is refused by the flags' parser.
    assert!(ServerConfig::try_parse_from([
        "limitcore-rls",
        "--config-xds",
        "x:1",
        "--config-xds-tls=maybe"
    ])
    .is_err());

    // This service's names win over envoyproxy/ratelimit's: a good CA over a missing one,
    // plain text over CONFIG_GRPC_XDS_SERVER_USE_TLS=true.
    let config =
        ServerConfig::try_parse_from(["limitcore-rls".to_owned()].into_iter().chain(theirs(&[
            "--config-grpc-xds-server-tls-cacert",
            &missing,
            "--config-xds-tls-ca",
            &ca,
        ])))
        .unwrap();
    let xds = config.xds.resolve().expect("valid").expect("over xDS");
    assert_eq!(xds.server, "https://xds.test:18001");
    let tls = xds.tls.expect("over TLS");
    assert_eq!(tls.ca.expect("a CA").setting, "--config-xds-tls-ca");
    let config = ServerConfig::try_parse_from(
        ["limitcore-rls".to_owned()]
            .into_iter()
            .chain(theirs(&["--config-xds-tls=false"])),
    )
    .unwrap();
    let xds = config.xds.resolve().expect("valid").expect("over xDS");
    assert_eq!(
        (xds.server.as_str(), xds.tls),
        ("http://xds.test:18001", None)
    );
}

/// An invalid resource: what it shows, the resource, the error's file, key and message.
type Invalid = (
    &'static str,
    Vec<RateLimitConfig>,
    &'static str,
    &'static str,
    &'static str,
);

fn descriptor(key: &str, value: &str, policy: Option<RateLimitPolicy>) -> RateLimitDescriptor {
    RateLimitDescriptor {
        key: key.into(),
        value: value.into(),
        rate_limit: policy,
        ..Default::default()
    }
}

fn policy(unit: i32, count: u32) -> RateLimitPolicy {
    RateLimitPolicy {
        unit,
        requests_per_unit: count,
        ..Default::default()
    }
}

fn one(domain: &str, descriptors: Vec<RateLimitDescriptor>) -> Vec<RateLimitConfig> {
    vec![RateLimitConfig {
        name: "r".into(),
        domain: domain.into(),
        descriptors,
    }]
}

#[test]
fn every_invalid_resource_is_refused_naming_the_resource_and_the_field() {
    let mut nested = descriptor("a", "", None);
    nested.descriptors = vec![descriptor("b", "", None), descriptor("b", "", None)];
    let unlimited_with_unit = RateLimitPolicy {
        unlimited: true,
        unit: MINUTE,
        ..Default::default()
    };
    let replaces_itself = RateLimitPolicy {
        name: "me".into(),
        replaces: vec![RateLimitReplace { name: "me".into() }],
        ..policy(MINUTE, 1)
    };
    let empty_replace = RateLimitPolicy {
        replaces: vec![RateLimitReplace::default()],
        ..policy(MINUTE, 1)
    };
    let cases: Vec<Invalid> = vec![
        (
            "empty domain",
            one("", vec![]),
            "r",
            "domain",
            "domain must not be empty",
        ),
        (
            "empty key",
            one(
                "d",
                vec![descriptor("a", "", None), descriptor("", "x", None)],
            ),
            "r",
            "descriptors[1].key",
            "descriptor has empty key",
        ),
        (
            "duplicate nested key",
            one("d", vec![nested]),
            "r",
            "descriptors[0].descriptors[1].key",
            "duplicate descriptor composite key 'd.a.b'",
        ),
        (
            "no unit",
            one("d", vec![descriptor("a", "", Some(policy(0, 5)))]),
            "r",
            "descriptors[0].rate_limit.unit",
            "invalid rate limit unit \"\"",
        ),
        (
            "a unit no proto has",
            one("d", vec![descriptor("a", "", Some(policy(42, 5)))]),
            "r",
            "descriptors[0].rate_limit.unit",
            "invalid rate limit unit \"42\"",
        ),
        (
            "unlimited with a unit",
            one("d", vec![descriptor("a", "", Some(unlimited_with_unit))]),
            "r",
            "descriptors[0].rate_limit.unit",
            "should not specify rate limit unit when unlimited",
        ),
        (
            "replacing itself",
            one("d", vec![descriptor("a", "", Some(replaces_itself))]),
            "r",
            "descriptors[0].rate_limit.replaces[0]",
            "replaces should not contain name of same descriptor",
        ),
        (
            "empty replaces entry",
            one("d", vec![descriptor("a", "", Some(empty_replace))]),
            "r",
            "descriptors[0].rate_limit.replaces[0]",
            "should not have an empty replaces entry",
        ),
        (
            "a domain in two resources",
            vec![
                RateLimitConfig {
                    name: "first".into(),
                    domain: "d".into(),
                    descriptors: vec![],
                },
                RateLimitConfig {
                    name: "second".into(),
                    domain: "d".into(),
                    descriptors: vec![],
                },
            ],
            "second",
            "domain",
            "duplicate domain 'd'",
        ),
        (
            "an unnamed resource is named by its position",
            vec![
                RateLimitConfig {
                    name: "ok".into(),
                    domain: "d".into(),
                    descriptors: vec![],
                },
                RateLimitConfig {
                    domain: "".into(),
                    ..Default::default()
                },
            ],
            "resource 1",
            "domain",
            "domain must not be empty",
        ),
    ];
    for (what, resources, file, key, fragment) in cases {
        let err = Config::from_resources(&resources, &Settings::default()).expect_err(what);
        assert_eq!(err.file.to_str(), Some(file), "{what}: {err}");
        assert_eq!(err.line, 0, "{what}: {err}");
        assert_eq!(err.key.as_deref(), Some(key), "{what}: {err}");
        assert!(err.message.contains(fragment), "{what}: {err}");
    }
}

#[test]
fn a_resource_reads_as_the_file_with_its_content() {
    use envoy_types::pb::google::protobuf::{value::Kind, Struct, Value};
    let yaml = r#"
domain: api
descriptors:
  - key: path
    value: "/login"
    shadow_mode: true
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 3, name: login}
  - key: path
    value: "/v1/*"
    quota_mode: true
    metadata: {team: core, tier: 2}
    rate_limit: {unit: week, requests_per_unit: 100, replaces: [{name: login}]}
  - key: internal
    rate_limit: {unlimited: true}
  - key: tenant
    value: "10"
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 0}
"#;
    let metadata = Struct {
        fields: [
            (
                "team".to_owned(),
                Value {
                    kind: Some(Kind::StringValue("core".into())),
                },
            ),
            (
                "tier".to_owned(),
                Value {
                    kind: Some(Kind::NumberValue(2.0)),
                },
            ),
        ]
        .into_iter()
        .collect(),
    };
    let mut tenant = descriptor("tenant", "10", None);
    tenant.descriptors = vec![descriptor(
        "user",
        "",
        Some(policy(RateLimitUnit::Second as i32, 0)),
    )];
    let resource = RateLimitConfig {
        name: "api-rules".into(),
        domain: "api".into(),
        descriptors: vec![
            RateLimitDescriptor {
                shadow_mode: true,
                detailed_metric: true,
                ..descriptor(
                    "path",
                    "/login",
                    Some(RateLimitPolicy {
                        name: "login".into(),
                        ..policy(MINUTE, 3)
                    }),
                )
            },
            RateLimitDescriptor {
                quota_mode: true,
                metadata: Some(metadata),
                ..descriptor(
                    "path",
                    "/v1/*",
                    Some(RateLimitPolicy {
                        replaces: vec![RateLimitReplace {
                            name: "login".into(),
                        }],
                        ..policy(RateLimitUnit::Week as i32, 100)
                    }),
                )
            },
            descriptor(
                "internal",
                "",
                Some(RateLimitPolicy {
                    unlimited: true,
                    ..Default::default()
                }),
            ),
            tenant,
        ],
    };
    let from_xds = Config::from_resources(&[resource], &Settings::default()).expect("valid");
    let from_file = Config::from_str_named("api.yaml", yaml, &Settings::default()).expect("valid");
    // The same rules but for where they come from (a file's line, a resource's name).
    let strip = |c: &Config| {
        c.rules()
            .iter()
            .map(|r| {
                let mut r = (**r).clone();
                r.file = Default::default();
                r.line = 0;
                r
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&from_xds), strip(&from_file));
    assert_eq!(from_xds.rules()[0].file.to_str(), Some("api-rules"));
    // And the same tree: every descriptor finds the same rule.
    let (a, b) = (
        from_xds.domain("api").unwrap(),
        from_file.domain("api").unwrap(),
    );
    for entries in [
        vec![("path", "/login")],
        vec![("path", "/v1/users")],
        vec![("internal", "x")],
        vec![("tenant", "10"), ("user", "u")],
        vec![("tenant", "11"), ("user", "u")],
    ] {
        let found = |d| {
            limitcore_rls::matching::find(d, &entries).map(|m| (m.rule.path.clone(), m.rule.limit))
        };
        assert_eq!(found(a), found(b), "{entries:?}");
    }
}
