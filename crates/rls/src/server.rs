//! [`ServerConfig`] (the command line and environment) and [`start`]: the gRPC and HTTP
//! listeners, the configuration's source (the directory watched, or the xDS
//! subscription), the backend, graceful shutdown.

use crate::backend::memory::Memory;
use crate::backend::redis_exact::RedisExact;
use crate::backend::redis_leased::RedisLeased;
use crate::backend::{Mode, RefusedHits};
use crate::clock::SharedClock;
use crate::config::{ConfigStatus, Settings};
use crate::grpc::Grpc;
use crate::http::Endpoints;
use crate::reload::Reloader;
use crate::service::{HeaderNames, Options, Service};
use crate::xds::{Subscription, XdsArgs};
use hyper_util::rt::TokioIo;
use limitcore::Algorithm;
use limitcore_redis::{Policy, Redis, RedisConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Where decisions are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// In process (one node; nothing else needed).
    Memory,
    /// On Redis: one script call decides all of a request's descriptors.
    RedisExact,
    /// On Redis: local decisions on leased cells (gcra and token-bucket rules).
    RedisLeased,
}

/// What to do while Redis cannot answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutagePolicy {
    /// Answer gRPC `UNAVAILABLE`: the proxy's `failure_mode_deny` decides.
    Error,
    /// Admit.
    FailOpen,
    /// Refuse.
    FailClosed,
    /// Decide in process at the rate divided by the live node count.
    FailLocal,
}

impl OutagePolicy {
    fn policy(self) -> Policy {
        match self {
            OutagePolicy::Error => Policy::Propagate,
            OutagePolicy::FailOpen => Policy::FailOpen,
            OutagePolicy::FailClosed => Policy::FailClosed,
            OutagePolicy::FailLocal => Policy::FailLocal,
        }
    }
}

/// The service's settings: every flag has an environment variable of the same name in
/// upper case with `LIMITCORE_RLS_` in front (`--grpc-addr` is `LIMITCORE_RLS_GRPC_ADDR`).
///
/// # Examples
///
/// ```
/// use clap::Parser;
/// use limitcore_rls::ServerConfig;
///
/// let c = ServerConfig::parse_from(["limitcore-rls", "--config-dir", "examples/config", "--backend", "memory"]);
/// assert_eq!(c.grpc_addr.port(), 8081);
/// ```
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "limitcore-rls",
    version,
    about = "Envoy's rate-limit service (RLS v3) on limitcore"
)]
pub struct ServerConfig {
    /// The gRPC listen address (`envoy.service.ratelimit.v3.RateLimitService`, gRPC health).
    #[arg(long, env = "LIMITCORE_RLS_GRPC_ADDR", default_value = "0.0.0.0:8081")]
    pub grpc_addr: SocketAddr,
    /// The HTTP listen address (`/healthcheck`, `/json`, `/metrics`).
    #[arg(long, env = "LIMITCORE_RLS_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    pub http_addr: SocketAddr,
    /// The directory of envoyproxy/ratelimit YAML files (`*.yaml`, `*.yml`); not read when
    /// the configuration comes over xDS (--config-xds).
    #[arg(long, env = "LIMITCORE_RLS_CONFIG_DIR", default_value = "config")]
    pub config_dir: PathBuf,
    /// How often the directory is checked for changes, in milliseconds.
    #[arg(long, env = "LIMITCORE_RLS_RELOAD_MS", default_value_t = 1000)]
    pub reload_ms: u64,
    /// Merge a domain defined in several files (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG).
    #[arg(long, env = "LIMITCORE_RLS_MERGE_DOMAINS")]
    pub merge_domains: bool,
    /// The algorithm of rules that name none: fixed-window (envoyproxy/ratelimit's), gcra,
    /// token-bucket, sliding-window, sliding-log.
    #[arg(long, env = "LIMITCORE_RLS_ALGORITHM", default_value = "fixed-window")]
    pub algorithm: Algorithm,
    /// The burst of rules that set none (GCRA, token bucket).
    #[arg(long, env = "LIMITCORE_RLS_BURST")]
    pub burst: Option<u32>,
    /// all-or-nothing (a refused request charges no descriptor that admitted it) or charge-each
    /// (envoyproxy/ratelimit's counters: every descriptor charged on its own).
    #[arg(long, env = "LIMITCORE_RLS_MODE", default_value = "all-or-nothing")]
    pub mode: Mode,
    /// What becomes of a refused descriptor's hits: record (on the descriptors that refused,
    /// past the limit, so that a cost charged after the response is never lost: Envoy's
    /// `apply_on_stream_done`, Envoy Gateway's `cost.response`) or drop (a refused request
    /// changes nothing; for deployments that never charge after the response).
    #[arg(long, env = "LIMITCORE_RLS_REFUSED_HITS", default_value = "record")]
    pub refused_hits: RefusedHits,
    /// Global shadow mode: decide and count, never refuse.
    #[arg(long, env = "LIMITCORE_RLS_SHADOW_MODE")]
    pub shadow_mode: bool,
    /// Where decisions are made.
    #[arg(
        long,
        env = "LIMITCORE_RLS_BACKEND",
        value_enum,
        default_value = "memory"
    )]
    pub backend: BackendKind,
    /// The most keys per rule in process (beyond it, new keys share one state).
    #[arg(long, env = "LIMITCORE_RLS_MAX_KEYS", default_value_t = 1_000_000)]
    pub max_keys: usize,
    /// Redis URL, for the Redis backends.
    #[arg(
        long,
        env = "LIMITCORE_RLS_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    pub redis_url: String,
    /// Redis Cluster: connect to these nodes instead (comma-separated URLs).
    #[arg(long, env = "LIMITCORE_RLS_REDIS_CLUSTER", value_delimiter = ',')]
    pub redis_cluster: Vec<String>,
    /// The most a Redis call may take, in milliseconds (well inside Envoy's 20 ms).
    #[arg(long, env = "LIMITCORE_RLS_REDIS_DEADLINE_MS", default_value_t = 10)]
    pub redis_deadline_ms: u64,
    /// What to answer while Redis cannot.
    #[arg(
        long,
        env = "LIMITCORE_RLS_REDIS_POLICY",
        value_enum,
        default_value = "error"
    )]
    pub redis_policy: OutagePolicy,
    /// The prefix of every Redis key.
    #[arg(long, env = "LIMITCORE_RLS_REDIS_PREFIX", default_value = "lcrls:")]
    pub redis_prefix: String,
    /// The largest lease, in permits (redis-leased): `L` of the fleet bound
    /// `B + ⌈(Δ + D)/T⌉ − 1 + N·L`.
    #[arg(long, env = "LIMITCORE_RLS_MAX_LEASE", default_value_t = 16)]
    pub max_lease: u32,
    /// How long a lease should last at the node's rate, in milliseconds (redis-leased):
    /// longer leases, fewer Redis calls per decision (up to `--max-lease` cells).
    #[arg(long, env = "LIMITCORE_RLS_LEASE_TARGET_MS", default_value_t = 50)]
    pub lease_target_ms: u64,
    /// Add the RateLimit-* headers (IETF draft) of the most constrained descriptor.
    #[arg(long, env = "LIMITCORE_RLS_HEADERS")]
    pub headers: bool,
    /// The limit header's name.
    #[arg(
        long,
        env = "LIMITCORE_RLS_HEADER_LIMIT",
        default_value = "RateLimit-Limit"
    )]
    pub header_limit: String,
    /// The remaining header's name.
    #[arg(
        long,
        env = "LIMITCORE_RLS_HEADER_REMAINING",
        default_value = "RateLimit-Remaining"
    )]
    pub header_remaining: String,
    /// The reset header's name.
    #[arg(
        long,
        env = "LIMITCORE_RLS_HEADER_RESET",
        default_value = "RateLimit-Reset"
    )]
    pub header_reset: String,
    /// The body of a refusal (`raw_body`), if any.
    #[arg(long, env = "LIMITCORE_RLS_OVER_LIMIT_BODY")]
    pub over_limit_body: Option<String>,
    /// The refusal body's content type.
    #[arg(
        long,
        env = "LIMITCORE_RLS_OVER_LIMIT_CONTENT_TYPE",
        default_value = "text/plain"
    )]
    pub over_limit_content_type: String,
    /// Put the request's domain and descriptors in the response's dynamic metadata.
    #[arg(long, env = "LIMITCORE_RLS_DYNAMIC_METADATA")]
    pub dynamic_metadata: bool,
    /// The runtime's worker threads, at least 1 (default: one per core). Where the service
    /// shares its cores with the proxy or its clients, fewer workers keep the tail short:
    /// on 2 cores shared with the load generator, 1 worker answered as many decisions/s as
    /// 2 with half the p99 (2.2 against 4.8 ms at 64 in flight).
    //
    // Only the binary reads it (it builds the runtime; `start` runs on the caller's);
    // BENCHMARKS.md, "limitcore-rls", has the measurement.
    #[arg(long, env = "LIMITCORE_RLS_WORKERS")]
    pub workers: Option<core::num::NonZeroUsize>,
    /// The configuration over xDS instead of the directory (`--config-xds`, or
    /// envoyproxy/ratelimit's `CONFIG_TYPE=GRPC_XDS_SOTW`).
    #[command(flatten)]
    pub xds: XdsArgs,
}

impl ServerConfig {
    /// The configuration settings.
    pub fn settings(&self) -> Settings {
        Settings {
            merge_domains: self.merge_domains,
            algorithm: self.algorithm,
            burst: self.burst,
        }
    }

    /// The answering options.
    pub fn options(&self) -> Options {
        Options {
            mode: self.mode,
            refused_hits: self.refused_hits,
            shadow_mode: self.shadow_mode,
            headers: self.headers.then(|| HeaderNames {
                limit: self.header_limit.clone(),
                remaining: self.header_remaining.clone(),
                reset: self.header_reset.clone(),
            }),
            over_limit_body: self
                .over_limit_body
                .as_ref()
                .map(|b| (b.clone().into_bytes(), self.over_limit_content_type.clone())),
            dynamic_metadata: self.dynamic_metadata,
            ..Options::default()
        }
    }

    /// The service on the backend these settings name (connecting to Redis for the Redis
    /// backends), answering by [`ServerConfig::options`], with no configuration yet.
    ///
    /// # Errors
    ///
    /// Redis's connection error.
    pub async fn service(&self, clock: SharedClock) -> Result<Service, String> {
        let memory = Memory::new(clock, self.max_keys);
        if self.backend == BackendKind::Memory {
            return Ok(Service::new(memory, self.options()));
        }
        let config =
            RedisConfig::default().deadline(Duration::from_millis(self.redis_deadline_ms.max(1)));
        let redis = if self.redis_cluster.is_empty() {
            Redis::connect(&self.redis_url, config).await
        } else {
            let urls: Vec<&str> = self.redis_cluster.iter().map(String::as_str).collect();
            Redis::connect_cluster(&urls, config).await
        }
        .map_err(|e| format!("redis: {e}"))?;
        let policy = self.redis_policy.policy();
        let prefix = self.redis_prefix.clone();
        Ok(match self.backend {
            BackendKind::RedisExact => Service::new(
                RedisExact::new(redis, policy, prefix, memory),
                self.options(),
            ),
            _ => {
                let target = Duration::from_millis(self.lease_target_ms.max(1));
                let leased = RedisLeased::new(redis, policy, prefix, self.max_lease, target);
                Service::new(leased, self.options())
            }
        })
    }
}

/// A running service: its bound addresses, and how to stop it.
#[derive(Debug)]
pub struct Running {
    /// The gRPC address it listens on.
    pub grpc_addr: SocketAddr,
    /// The HTTP address it listens on.
    pub http_addr: SocketAddr,
    /// The service.
    pub service: Arc<Service>,
    /// The configuration directory's watcher (`None` when the configuration comes over
    /// xDS).
    pub reloader: Option<Arc<Reloader>>,
    /// The xDS subscription (`None` when the configuration comes from the directory).
    pub xds: Option<Arc<Subscription>>,
    /// The configuration in force: its source, version and latest refusal.
    pub config: Arc<ConfigStatus>,
    stop: watch::Sender<bool>,
    healthy: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    /// Stop gracefully: health checks turn to not serving, the listeners stop accepting,
    /// requests in flight finish.
    pub async fn stop(self) {
        // Relaxed: a flag read alone.
        self.healthy.store(false, Ordering::Relaxed);
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Start the service with `config` on `clock`: load the configuration directory (refusing
/// to start on a bad one) and watch it, or subscribe to the xDS management server (the
/// service starts without waiting for it: no rule until the first version); bind the
/// listeners.
///
/// # Errors
///
/// A configuration that does not load (file, line and key), bad xDS flags, a backend
/// that cannot start, an address that cannot be bound.
pub async fn start(
    config: &ServerConfig,
    clock: SharedClock,
    metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
) -> Result<Running, String> {
    let xds_config = config.xds.resolve()?;
    let service = Arc::new(config.service(clock).await?);
    let (reloader, xds, config_status) = match xds_config {
        Some(xds_config) => {
            let subscription =
                Subscription::new(xds_config, config.settings(), Arc::clone(&service));
            let status = Arc::clone(subscription.status());
            (None, Some(Arc::new(subscription)), status)
        }
        None => {
            let reloader = Reloader::new(
                config.config_dir.clone(),
                config.settings(),
                Arc::clone(&service),
            );
            reloader.reload()?;
            let status = Arc::clone(reloader.status());
            (Some(Arc::new(reloader)), None, status)
        }
    };
    let grpc_listener = TcpListener::bind(config.grpc_addr)
        .await
        .map_err(|e| format!("bind {}: {e}", config.grpc_addr))?;
    let http_listener = TcpListener::bind(config.http_addr)
        .await
        .map_err(|e| format!("bind {}: {e}", config.http_addr))?;
    let grpc_addr = grpc_listener.local_addr().map_err(|e| e.to_string())?;
    let http_addr = http_listener.local_addr().map_err(|e| e.to_string())?;
    let (stop, stop_rx) = watch::channel(false);
    let healthy = Arc::new(AtomicBool::new(true));
    let mut tasks = Vec::new();

    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_serving::<envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer<Grpc>>()
        .await;
    let grpc = Grpc::new(Arc::clone(&service)).server();
    let mut grpc_stop = stop_rx.clone();
    tasks.push(tokio::spawn(async move {
        let signal = async move {
            let _ = grpc_stop.changed().await;
            reporter
                .set_not_serving::<envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer<Grpc>>()
                .await;
        };
        let incoming = tonic::transport::server::TcpIncoming::from(grpc_listener).with_nodelay(Some(true));
        if let Err(e) = tonic::transport::Server::builder()
            .add_service(health)
            .add_service(grpc)
            .serve_with_incoming_shutdown(incoming, signal)
            .await
        {
            eprintln!("limitcore-rls: gRPC server: {e}");
        }
    }));

    let endpoints = Endpoints {
        service: Arc::clone(&service),
        metrics,
        healthy: Arc::clone(&healthy),
        config: Arc::clone(&config_status),
    };
    let mut http_stop = stop_rx.clone();
    tasks.push(tokio::spawn(async move {
        let builder = hyper::server::conn::http1::Builder::new();
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        loop {
            tokio::select! {
                accepted = http_listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let _ = stream.set_nodelay(true);
                    let endpoints = endpoints.clone();
                    let svc = hyper::service::service_fn(move |req| {
                        let endpoints = endpoints.clone();
                        async move { endpoints.handle(req).await }
                    });
                    let conn = builder.serve_connection(TokioIo::new(stream), svc);
                    let conn = graceful.watch(conn);
                    tokio::spawn(async move { let _ = conn.await; });
                }
                _ = http_stop.changed() => break,
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), graceful.shutdown()).await;
    }));

    if let Some(reloader) = &reloader {
        let every = Duration::from_millis(config.reload_ms.max(10));
        tasks.push(tokio::spawn(Arc::clone(reloader).watch(every, stop_rx)));
    } else if let Some(xds) = &xds {
        tasks.push(tokio::spawn(Arc::clone(xds).run(stop_rx)));
    }
    Ok(Running {
        grpc_addr,
        http_addr,
        service,
        reloader,
        xds,
        config: config_status,
        stop,
        healthy,
        tasks,
    })
}
