//! A small ADS management server (state of the world) for the tests, on its own runtime
//! so that killing it closes every connection at once, as a crashed server would, in
//! plain text or over mutual TLS (tonic's server TLS, a client certificate required); and
//! the service configured over xDS only.

use clap::Parser as _;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::protobuf::Any;
use limitcore_rls::pb::ratelimit::config::ratelimit::v3::{
    RateLimitConfig, RateLimitDescriptor, RateLimitPolicy,
};
use limitcore_rls::xds::TYPE_URL;
use limitcore_rls::{start, Running, ServerConfig, SharedClock};
use prost::Message;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tonic::codegen::tokio_stream::{Stream, StreamExt as _};
use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use tonic::{Request, Response, Status, Streaming};

/// What the management server serves and what it was told, kept across its restarts.
#[derive(Debug)]
pub struct Shared {
    /// The version and resources served now.
    snapshot: watch::Sender<(String, Vec<RateLimitConfig>)>,
    /// Every request received, in order.
    requests: Mutex<Vec<DiscoveryRequest>>,
    /// Every response sent: its nonce and version.
    sent: Mutex<Vec<(String, String)>>,
    /// The connections accepted (TCP, before any TLS handshake).
    connections: AtomicUsize,
}

impl Shared {
    /// Serving `version` of `resources`.
    pub fn new(version: &str, resources: Vec<RateLimitConfig>) -> Arc<Shared> {
        Arc::new(Shared {
            snapshot: watch::Sender::new((version.to_owned(), resources)),
            requests: Mutex::new(Vec::new()),
            sent: Mutex::new(Vec::new()),
            connections: AtomicUsize::new(0),
        })
    }

    /// How many connections were accepted so far (each attempt of a client, whether its
    /// TLS handshake then succeeds or not).
    pub fn connections(&self) -> usize {
        // Relaxed: a count read alone.
        self.connections.load(Ordering::Relaxed)
    }

    /// Serve `version` of `resources` from now on (pushed on every open stream).
    pub fn set(&self, version: &str, resources: Vec<RateLimitConfig>) {
        self.snapshot.send_replace((version.to_owned(), resources));
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<DiscoveryRequest> {
        self.requests.lock().unwrap().clone()
    }

    /// The nonces of the responses that carried `version`.
    pub fn nonces_of(&self, version: &str) -> Vec<String> {
        let sent = self.sent.lock().unwrap();
        sent.iter()
            .filter(|(_, v)| v == version)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// The request answering a response that carried `version`, once it came.
    pub fn answer_to(&self, version: &str) -> Option<DiscoveryRequest> {
        let nonces = self.nonces_of(version);
        self.requests()
            .into_iter()
            .find(|r| nonces.contains(&r.response_nonce))
    }

    /// The response for the snapshot in force, with a fresh nonce.
    fn response(&self) -> DiscoveryResponse {
        let (version, resources) = self.snapshot.borrow().clone();
        let mut sent = self.sent.lock().unwrap();
        let nonce = format!("n{}", sent.len() + 1);
        sent.push((nonce.clone(), version.clone()));
        DiscoveryResponse {
            version_info: version,
            resources: resources
                .iter()
                .map(|r| Any {
                    type_url: TYPE_URL.to_owned(),
                    value: r.encode_to_vec(),
                })
                .collect(),
            type_url: TYPE_URL.to_owned(),
            nonce,
            ..Default::default()
        }
    }
}

/// The responses of one stream.
pub struct Responses(mpsc::Receiver<Result<DiscoveryResponse, Status>>);

impl Stream for Responses {
    type Item = Result<DiscoveryResponse, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

/// The ADS service: on a stream's first request, the snapshot; then each new one.
struct Ads(Arc<Shared>);

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = Responses;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Responses>, Status> {
        let mut incoming = request.into_inner();
        let shared = Arc::clone(&self.0);
        let (tx, rx) = mpsc::channel(8);
        tokio::spawn(async move {
            let mut snapshots = shared.snapshot.subscribe();
            let mut opened = false;
            loop {
                tokio::select! {
                    message = incoming.message() => {
                        let Ok(Some(request)) = message else { return };
                        shared.requests.lock().unwrap().push(request);
                        if !opened {
                            opened = true;
                            snapshots.borrow_and_update();
                            if tx.send(Ok(shared.response())).await.is_err() {
                                return;
                            }
                        }
                    }
                    changed = snapshots.changed(), if opened => {
                        if changed.is_err() || tx.send(Ok(shared.response())).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Ok(Response::new(Responses(rx)))
    }

    type DeltaAggregatedResourcesStream =
        Pin<Box<dyn Stream<Item = Result<DeltaDiscoveryResponse, Status>> + Send>>;

    async fn delta_aggregated_resources(
        &self,
        _request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        Err(Status::unimplemented("state of the world only"))
    }
}

/// The management server's TLS: its certificate and key, and the CA whose client
/// certificates it requires (PEM).
pub struct ServerTls {
    pub cert: String,
    pub key: String,
    pub client_ca: String,
}

/// The management server, running until killed (or dropped).
pub struct Management {
    pub addr: SocketAddr,
    pub shared: Arc<Shared>,
    tls: bool,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Management {
    /// Serve `shared` on `addr` in plain text (port 0: one the system picks), binding
    /// again until the port is free (a killed server's socket may linger for a moment;
    /// 10 s).
    pub fn start(addr: SocketAddr, shared: Arc<Shared>) -> Management {
        Management::serve(addr, shared, None)
    }

    /// Serve `shared` on `addr` over mutual TLS: a client without a certificate signed by
    /// `tls.client_ca` is refused in the handshake.
    pub fn start_tls(addr: SocketAddr, shared: Arc<Shared>, tls: &ServerTls) -> Management {
        let config = ServerTlsConfig::new()
            .identity(Identity::from_pem(&tls.cert, &tls.key))
            .client_ca_root(Certificate::from_pem(&tls.client_ca))
            .client_auth_optional(false);
        Management::serve(addr, shared, Some(config))
    }

    fn serve(addr: SocketAddr, shared: Arc<Shared>, tls: Option<ServerTlsConfig>) -> Management {
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match std::net::TcpListener::bind(addr) {
                Ok(l) => break l,
                Err(e) => {
                    assert!(Instant::now() < deadline, "bind {addr}: {e}");
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        };
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let service = AggregatedDiscoveryServiceServer::new(Ads(Arc::clone(&shared)));
        let counted = Arc::clone(&shared);
        let secure = tls.is_some();
        let mut builder = tonic::transport::Server::builder();
        if let Some(config) = tls {
            builder = builder
                .tls_config(config)
                .expect("the server's TLS configuration");
        }
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let incoming =
                tonic::transport::server::TcpIncoming::from(listener).map(move |connection| {
                    counted.connections.fetch_add(1, Ordering::Relaxed);
                    connection
                });
            let _ = builder
                .add_service(service)
                .serve_with_incoming(incoming)
                .await;
        });
        Management {
            addr,
            shared,
            tls: secure,
            runtime: Some(runtime),
        }
    }

    /// The server's URL: `https://` over TLS.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Kill it: its tasks and connections dropped at once, nothing said to the clients.
    pub fn kill(mut self) -> (SocketAddr, Arc<Shared>) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
        (self.addr, Arc::clone(&self.shared))
    }
}

impl Drop for Management {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// The service on loopback configured over xDS only (no configuration directory), with
/// extra flags, its `/metrics` from `metrics` if given.
pub async fn serve_xds(
    server: &str,
    clock: SharedClock,
    flags: &[&str],
    metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
) -> Running {
    let mut args = vec![
        "limitcore-rls".to_owned(),
        "--grpc-addr".into(),
        "127.0.0.1:0".into(),
        "--http-addr".into(),
        "127.0.0.1:0".into(),
        "--config-xds".into(),
        server.to_owned(),
    ];
    args.extend(flags.iter().map(|s| (*s).to_owned()));
    let config = ServerConfig::try_parse_from(args).expect("flags parse");
    start(&config, clock, metrics)
        .await
        .expect("the service starts")
}

/// Poll `condition` every 10 ms until it holds; panic with `what` after `limit` (generous:
/// the verdict never depends on the machine's speed, only a hang fails).
pub async fn until(limit: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A resource of one domain: `key` limited to `count` per `unit` (a proto unit number).
pub fn resource(name: &str, domain: &str, key: &str, count: u32, unit: i32) -> RateLimitConfig {
    RateLimitConfig {
        name: name.into(),
        domain: domain.into(),
        descriptors: vec![RateLimitDescriptor {
            key: key.into(),
            rate_limit: Some(RateLimitPolicy {
                unit,
                requests_per_unit: count,
                name: format!("per-{key}"),
                ..Default::default()
            }),
            ..Default::default()
        }],
    }
}

/// `GET path` on `addr` (HTTP/1.1): the status and the body.
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).await.expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read");
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, body.to_owned())
}
