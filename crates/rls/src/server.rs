//! [`ServerConfig`] (the command line and environment) and [`start`]: the gRPC and HTTP
//! listeners (gRPC in plain text or over TLS: [`GrpcTlsArgs`]), the configuration's source
//! (the directory watched, or the xDS subscription), the backend, graceful shutdown.

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
use crate::tls::{identity, provider, TlsFile};
use crate::xds::{Subscription, XdsArgs};
use clap::builder::BoolishValueParser;
use hyper_util::rt::TokioIo;
use limitcore::Algorithm;
use limitcore_redis::{Policy, Redis, RedisConfig};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::transport::{Certificate, ServerTlsConfig};

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
/// upper case with `LIMITCORE_RLS_` in front (`--grpc-addr` is `LIMITCORE_RLS_GRPC_ADDR`),
/// but for envoyproxy/ratelimit's names where this service reads them (the gRPC port's
/// TLS files, [`GrpcTlsArgs`], and the configuration over xDS, [`XdsArgs`]).
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
    /// The gRPC port over TLS or mutual TLS (`--grpc-tls`, or envoyproxy/ratelimit's
    /// `GRPC_SERVER_USE_TLS=true`); plain text by default.
    #[command(flatten)]
    pub grpc_tls: GrpcTlsArgs,
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

/// How long a client has to complete its TLS handshake with the gRPC port: a connection
/// that opens and says nothing is closed after it.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The flags of the gRPC port's TLS (a part of [`ServerConfig`]), this service's and
/// envoyproxy/ratelimit's names (`GRPC_SERVER_USE_TLS`, `GRPC_SERVER_TLS_CERT`,
/// `GRPC_SERVER_TLS_KEY`, `GRPC_CLIENT_TLS_CACERT`), resolved into tonic's
/// [`ServerTlsConfig`]. The HTTP port (`/json`, `/metrics`, `/healthcheck`) stays plain
/// text.
///
/// With a client CA, a client certificate signed by it is required (mutual TLS), as
/// envoyproxy/ratelimit requires one when `GRPC_CLIENT_TLS_CACERT` is set; it is verified
/// against the CA file alone (envoyproxy/ratelimit adds the system's roots to it).
///
/// # Examples
///
/// ```
/// use clap::Parser;
/// use limitcore_rls::server::GrpcSecurity;
/// use limitcore_rls::ServerConfig;
///
/// // Plain text by default.
/// let c = ServerConfig::parse_from(["limitcore-rls"]);
/// assert!(c.grpc_tls.resolve()?.is_none());
/// assert_eq!(c.grpc_tls.security(), GrpcSecurity::PlainText);
///
/// // The files are read and checked here: a bad one is named, with its setting.
/// let c = ServerConfig::parse_from([
///     "limitcore-rls",
///     "--grpc-tls",
///     "--grpc-tls-cert", "/no/such/tls.crt",
///     "--grpc-tls-key", "/no/such/tls.key",
///     "--grpc-tls-client-ca", "/no/such/ca.crt",
/// ]);
/// assert_eq!(c.grpc_tls.security(), GrpcSecurity::MutualTls);
/// let err = c.grpc_tls.resolve().unwrap_err();
/// assert!(err.starts_with("--grpc-tls-cert (GRPC_SERVER_TLS_CERT) /no/such/tls.crt: cannot read it"), "{err}");
///
/// // TLS on without a certificate; a certificate for a plain-text port.
/// let c = ServerConfig::parse_from(["limitcore-rls", "--grpc-server-use-tls=true"]);
/// let err = c.grpc_tls.resolve().unwrap_err();
/// assert!(err.starts_with("GRPC_SERVER_USE_TLS turns TLS on, but no certificate is given"), "{err}");
/// let c = ServerConfig::parse_from(["limitcore-rls", "--grpc-tls-cert", "/certs/tls.crt"]);
/// let err = c.grpc_tls.resolve().unwrap_err();
/// assert!(err.contains("set, but the gRPC port serves plain text"), "{err}");
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "gRPC over TLS")]
pub struct GrpcTlsArgs {
    /// Serve gRPC over TLS (with --grpc-tls-cert and --grpc-tls-key; the HTTP port stays
    /// plain text); `=false` serves plain text whatever GRPC_SERVER_USE_TLS says.
    #[arg(
        long = "grpc-tls",
        env = "LIMITCORE_RLS_GRPC_TLS",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = BoolishValueParser::new()
    )]
    pub grpc_tls: Option<bool>,
    /// The gRPC server's certificate (PEM: its chain, the server's own first).
    #[arg(
        long = "grpc-tls-cert",
        env = "GRPC_SERVER_TLS_CERT",
        value_name = "FILE"
    )]
    pub cert: Option<PathBuf>,
    /// The gRPC server certificate's private key (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC).
    #[arg(
        long = "grpc-tls-key",
        env = "GRPC_SERVER_TLS_KEY",
        value_name = "FILE"
    )]
    pub key: Option<PathBuf>,
    /// The CA certificates (PEM) of the clients: with it, a client certificate signed by
    /// them is required (mutual TLS), and verified against them alone.
    #[arg(
        long = "grpc-tls-client-ca",
        env = "GRPC_CLIENT_TLS_CACERT",
        value_name = "FILE"
    )]
    pub client_ca: Option<PathBuf>,
    /// envoyproxy/ratelimit's GRPC_SERVER_USE_TLS (true, false): --grpc-tls.
    #[arg(
        long = "grpc-server-use-tls",
        env = "GRPC_SERVER_USE_TLS",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = BoolishValueParser::new()
    )]
    pub grpc_server_use_tls: Option<bool>,
    /// envoyproxy/ratelimit's GRPC_CLIENT_TLS_SAN (the name a client certificate must
    /// have): not supported, so refused at start rather than ignored.
    #[arg(
        long = "grpc-client-tls-san",
        env = "GRPC_CLIENT_TLS_SAN",
        value_name = "NAME"
    )]
    pub grpc_client_tls_san: Option<String>,
}

/// What the gRPC port serves: the startup line says it.
///
/// # Examples
///
/// ```
/// use limitcore_rls::server::GrpcSecurity;
///
/// assert_eq!(GrpcSecurity::MutualTls.to_string(), "mutual TLS");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrpcSecurity {
    /// Plain text (HTTP/2 over cleartext).
    PlainText,
    /// TLS: the server's certificate presented, none asked of the client.
    Tls,
    /// Mutual TLS: a client certificate of the client CA required.
    MutualTls,
}

impl fmt::Display for GrpcSecurity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GrpcSecurity::PlainText => "plain text",
            GrpcSecurity::Tls => "TLS",
            GrpcSecurity::MutualTls => "mutual TLS",
        })
    }
}

/// The settings of the server's certificate, its key and the client CA, as errors name
/// them: the flag and envoyproxy/ratelimit's variable.
const CERT_SETTING: &str = "--grpc-tls-cert (GRPC_SERVER_TLS_CERT)";
const KEY_SETTING: &str = "--grpc-tls-key (GRPC_SERVER_TLS_KEY)";
const CLIENT_CA_SETTING: &str = "--grpc-tls-client-ca (GRPC_CLIENT_TLS_CACERT)";

impl GrpcTlsArgs {
    /// Whether TLS is on, and the setting that says so: this service's flag, else
    /// envoyproxy/ratelimit's variable; off by default.
    fn tls_on(&self) -> (bool, &'static str) {
        match (self.grpc_tls, self.grpc_server_use_tls) {
            (Some(on), _) => (on, "--grpc-tls"),
            (None, Some(on)) => (on, "GRPC_SERVER_USE_TLS"),
            (None, None) => (false, "--grpc-tls"),
        }
    }

    /// A file setting, if given (an empty value is none, as envoyproxy/ratelimit's
    /// defaults are).
    fn file(path: &Option<PathBuf>, setting: &str) -> Option<TlsFile> {
        path.as_ref()
            .filter(|p| !p.as_os_str().is_empty())
            .map(|p| TlsFile::new(setting, p))
    }

    /// What the gRPC port serves by these flags (before any file is read).
    pub fn security(&self) -> GrpcSecurity {
        match (
            self.tls_on().0,
            Self::file(&self.client_ca, CLIENT_CA_SETTING),
        ) {
            (false, _) => GrpcSecurity::PlainText,
            (true, None) => GrpcSecurity::Tls,
            (true, Some(_)) => GrpcSecurity::MutualTls,
        }
    }

    /// The gRPC port's TLS: `None` for plain text. The files are read and checked here
    /// (tonic's configuration holds their bytes), so that a bad one stops the service at
    /// start.
    ///
    /// # Errors
    ///
    /// A message naming the setting, and the file if any: TLS on without a certificate
    /// and key, a certificate without its key or a key without its certificate, TLS files
    /// given for a plain-text port, `GRPC_CLIENT_TLS_SAN` (not supported); a file that
    /// cannot be read, with no PEM certificate (or key) in it or malformed, a key that is
    /// not the certificate's or of a kind rustls cannot sign with, a client CA certificate
    /// that cannot be a trust anchor.
    pub fn resolve(&self) -> Result<Option<ServerTlsConfig>, String> {
        if let Some(san) = self
            .grpc_client_tls_san
            .as_deref()
            .filter(|s| !s.trim().is_empty())
        {
            return Err(format!(
                "GRPC_CLIENT_TLS_SAN (--grpc-client-tls-san) {san:?}: not supported: this \
                 service does not check the name of a client certificate; unset it (with \
                 --grpc-tls-client-ca, GRPC_CLIENT_TLS_CACERT, any client certificate of the \
                 CA is accepted)"
            ));
        }
        let cert = Self::file(&self.cert, CERT_SETTING);
        let key = Self::file(&self.key, KEY_SETTING);
        let client_ca = Self::file(&self.client_ca, CLIENT_CA_SETTING);
        let (on, setting) = self.tls_on();
        if !on {
            // TLS files with a plain-text port: a port that the clients meant to reach
            // over TLS (or the files meant to protect), refused at start instead.
            let named: Vec<&str> = [&cert, &key, &client_ca]
                .into_iter()
                .flatten()
                .map(|f| f.setting.as_str())
                .collect();
            if !named.is_empty() {
                return Err(format!(
                    "{} set, but the gRPC port serves plain text: turn TLS on (--grpc-tls, \
                     GRPC_SERVER_USE_TLS=true)",
                    named.join(", ")
                ));
            }
            return Ok(None);
        }
        let (cert, key) = match (cert, key) {
            (Some(cert), Some(key)) => (cert, key),
            (None, None) => {
                return Err(format!(
                    "{setting} turns TLS on, but no certificate is given: set {CERT_SETTING} \
                     and {KEY_SETTING}"
                ))
            }
            (None, Some(key)) => {
                return Err(format!(
                    "{key}: a server key without its certificate; set the certificate too \
                     ({CERT_SETTING})"
                ))
            }
            (Some(cert), None) => {
                return Err(format!(
                    "{cert}: a server certificate without its key; set the key too \
                     ({KEY_SETTING})"
                ))
            }
        };
        let mut config = ServerTlsConfig::new()
            .identity(identity(&cert, &key)?)
            .timeout(HANDSHAKE_TIMEOUT);
        if let Some(ca) = client_ca {
            let (pem, roots) = ca.trust_anchors()?;
            // The verifier tonic will build, built once here: what it refuses is named.
            rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                Arc::new(provider()),
            )
            .build()
            .map_err(|e| format!("{ca}: cannot verify clients by it: {e}"))?;
            config = config
                .client_ca_root(Certificate::from_pem(pem))
                .client_auth_optional(false);
        }
        Ok(Some(config))
    }
}

/// A running service: its bound addresses, and how to stop it.
#[derive(Debug)]
pub struct Running {
    /// The gRPC address it listens on.
    pub grpc_addr: SocketAddr,
    /// What the gRPC port serves: plain text, TLS or mutual TLS.
    pub grpc_security: GrpcSecurity,
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
/// listeners, the gRPC one over TLS if asked ([`GrpcTlsArgs`]).
///
/// # Errors
///
/// A configuration that does not load (file, line and key), bad xDS flags, bad gRPC TLS
/// settings or files ([`GrpcTlsArgs::resolve`]), a backend that cannot start, an address
/// that cannot be bound.
pub async fn start(
    config: &ServerConfig,
    clock: SharedClock,
    metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
) -> Result<Running, String> {
    let xds_config = config.xds.resolve()?;
    let mut grpc_server = tonic::transport::Server::builder();
    if let Some(tls) = config.grpc_tls.resolve()? {
        grpc_server = grpc_server
            .tls_config(tls)
            .map_err(|e| format!("the gRPC port's TLS: {e}"))?;
    }
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
        if let Err(e) = grpc_server
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
        grpc_security: config.grpc_tls.security(),
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
