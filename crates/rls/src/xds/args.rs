//! [`XdsArgs`]: the flags and environment variables of configuration over xDS, this
//! service's (`--config-xds`, `LIMITCORE_RLS_CONFIG_XDS_*`) and envoyproxy/ratelimit's
//! (`CONFIG_TYPE=GRPC_XDS_SOTW`, `CONFIG_GRPC_XDS_*`), resolved into an [`XdsConfig`].

use super::subscription::XdsConfig;
use std::time::Duration;

/// envoyproxy/ratelimit's `CONFIG_TYPE`: where its configuration comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ConfigType {
    /// The configuration directory (the default).
    #[value(name = "FILE")]
    File,
    /// xDS, state of the world, from `CONFIG_GRPC_XDS_SERVER_URL`.
    #[value(name = "GRPC_XDS_SOTW")]
    GrpcXdsSotw,
}

/// envoyproxy/ratelimit's default management server address.
const UPSTREAM_DEFAULT_SERVER: &str = "localhost:18000";
/// envoyproxy/ratelimit's default node id.
const DEFAULT_NODE_ID: &str = "default";
/// The first reconnection delay when none is set.
const DEFAULT_BACKOFF: Duration = Duration::from_millis(500);
/// The longest reconnection delay when none is set.
const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The flags of configuration over xDS (a part of
/// [`ServerConfig`](crate::server::ServerConfig)). This service's own names win over
/// envoyproxy/ratelimit's where both are set.
///
/// # Examples
///
/// ```
/// use clap::Parser;
/// use limitcore_rls::ServerConfig;
/// use std::time::Duration;
///
/// let c = ServerConfig::parse_from([
///     "limitcore-rls",
///     "--config-xds", "127.0.0.1:18000",
///     "--config-xds-node-id", "ratelimit",
///     "--config-xds-node-metadata", "cluster=edge,zone=a",
///     "--config-xds-backoff", "250ms",
/// ]);
/// let xds = c.xds.resolve()?.expect("configured over xDS");
/// assert_eq!(xds.server, "http://127.0.0.1:18000");
/// assert_eq!(xds.node_id, "ratelimit");
/// assert_eq!(xds.node_metadata, [("cluster".to_owned(), "edge".to_owned()), ("zone".to_owned(), "a".to_owned())]);
/// assert_eq!(xds.backoff, Duration::from_millis(250));
///
/// // envoyproxy/ratelimit's names (environment variables; flags of the same name too).
/// let c = ServerConfig::parse_from([
///     "limitcore-rls",
///     "--config-type", "GRPC_XDS_SOTW",
///     "--config-grpc-xds-server-url", "ratelimit-xds:18001",
///     "--config-grpc-xds-server-connect-retry-interval", "3s",
/// ]);
/// let xds = c.xds.resolve()?.expect("configured over xDS");
/// assert_eq!((xds.server.as_str(), xds.node_id.as_str()), ("http://ratelimit-xds:18001", "default"));
/// assert_eq!(xds.backoff, Duration::from_secs(3));
///
/// // TLS toward the management server is refused, not tried in plain text.
/// let c = ServerConfig::parse_from(["limitcore-rls", "--config-xds", "xds:18001", "--config-grpc-xds-server-use-tls"]);
/// assert!(c.xds.resolve().unwrap_err().contains("TLS"));
///
/// // Neither: the configuration directory.
/// assert!(ServerConfig::parse_from(["limitcore-rls"]).xds.resolve()?.is_none());
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Configuration over xDS")]
pub struct XdsArgs {
    /// Take the configuration from this xDS management server (ADS, state of the world,
    /// `ratelimit.config.ratelimit.v3.RateLimitConfig` resources) instead of --config-dir:
    /// `host:port` or `http://host:port` (no TLS).
    #[arg(
        long = "config-xds",
        env = "LIMITCORE_RLS_CONFIG_XDS",
        value_name = "URL"
    )]
    pub server: Option<String>,
    /// The node id the service subscribes as (the management server's key for its
    /// snapshot) [default: default].
    #[arg(
        long = "config-xds-node-id",
        env = "LIMITCORE_RLS_CONFIG_XDS_NODE_ID",
        value_name = "ID"
    )]
    pub node_id: Option<String>,
    /// The node's metadata: `key=value` pairs separated by commas.
    #[arg(
        long = "config-xds-node-metadata",
        env = "LIMITCORE_RLS_CONFIG_XDS_NODE_METADATA",
        value_name = "K=V,..."
    )]
    pub node_metadata: Option<String>,
    /// The first delay before reconnecting (`500ms`, `3s`); it doubles with each failure
    /// in a row, up to --config-xds-backoff-max [default: 500ms].
    #[arg(long = "config-xds-backoff", env = "LIMITCORE_RLS_CONFIG_XDS_BACKOFF", value_parser = parse_duration, value_name = "DURATION")]
    pub backoff: Option<Duration>,
    /// The longest delay before reconnecting [default: 30s].
    #[arg(long = "config-xds-backoff-max", env = "LIMITCORE_RLS_CONFIG_XDS_BACKOFF_MAX", value_parser = parse_duration, value_name = "DURATION")]
    pub backoff_max: Option<Duration>,

    /// envoyproxy/ratelimit's CONFIG_TYPE: GRPC_XDS_SOTW takes the configuration over xDS
    /// from CONFIG_GRPC_XDS_SERVER_URL; FILE (the default) from --config-dir.
    #[arg(
        long = "config-type",
        env = "CONFIG_TYPE",
        value_enum,
        ignore_case = true
    )]
    pub config_type: Option<ConfigType>,
    /// envoyproxy/ratelimit's CONFIG_GRPC_XDS_SERVER_URL (under CONFIG_TYPE=GRPC_XDS_SOTW;
    /// default localhost:18000): --config-xds.
    #[arg(
        long = "config-grpc-xds-server-url",
        env = "CONFIG_GRPC_XDS_SERVER_URL",
        value_name = "URL"
    )]
    pub upstream_server: Option<String>,
    /// envoyproxy/ratelimit's CONFIG_GRPC_XDS_NODE_ID: --config-xds-node-id.
    #[arg(
        long = "config-grpc-xds-node-id",
        env = "CONFIG_GRPC_XDS_NODE_ID",
        value_name = "ID"
    )]
    pub upstream_node_id: Option<String>,
    /// envoyproxy/ratelimit's CONFIG_GRPC_XDS_NODE_METADATA: --config-xds-node-metadata.
    #[arg(
        long = "config-grpc-xds-node-metadata",
        env = "CONFIG_GRPC_XDS_NODE_METADATA",
        value_name = "K=V,..."
    )]
    pub upstream_node_metadata: Option<String>,
    /// envoyproxy/ratelimit's CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL:
    /// --config-xds-backoff.
    #[arg(long = "config-grpc-xds-server-connect-retry-interval", env = "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", value_parser = parse_duration, value_name = "DURATION")]
    pub upstream_retry: Option<Duration>,
    /// envoyproxy/ratelimit's CONFIG_GRPC_XDS_SERVER_USE_TLS: refused when set, since TLS
    /// toward the management server is not supported (rather than a plain-text connection
    /// that would fail forever).
    #[arg(
        long = "config-grpc-xds-server-use-tls",
        env = "CONFIG_GRPC_XDS_SERVER_USE_TLS"
    )]
    pub upstream_use_tls: bool,
    /// envoyproxy/ratelimit's XDS_CLIENT_BACKOFF_MAX_INTERVAL: --config-xds-backoff-max.
    #[arg(long = "xds-client-backoff-max-interval", env = "XDS_CLIENT_BACKOFF_MAX_INTERVAL", value_parser = parse_duration, value_name = "DURATION")]
    pub upstream_backoff_max: Option<Duration>,
}

impl XdsArgs {
    /// The subscription these flags ask for: `None` for the configuration directory
    /// (neither `--config-xds` nor `CONFIG_TYPE=GRPC_XDS_SOTW`).
    ///
    /// # Errors
    ///
    /// A message naming the flag: a server address that is no `http://host:port` (an
    /// `https://` one included: TLS toward the management server is not supported), node
    /// metadata that is not `key=value` pairs, a maximum backoff below the first,
    /// `CONFIG_GRPC_XDS_SERVER_USE_TLS` set.
    pub fn resolve(&self) -> Result<Option<XdsConfig>, String> {
        let server = match (&self.server, self.config_type) {
            (Some(server), _) => server.clone(),
            (None, Some(ConfigType::GrpcXdsSotw)) => self
                .upstream_server
                .clone()
                .unwrap_or_else(|| UPSTREAM_DEFAULT_SERVER.to_owned()),
            (None, _) => return Ok(None),
        };
        if self.upstream_use_tls {
            return Err(
                "CONFIG_GRPC_XDS_SERVER_USE_TLS: TLS toward the management server is not \
                 supported; serve xDS in plain text to the service (a sidecar can carry it \
                 over TLS)"
                    .into(),
            );
        }
        let metadata = self
            .node_metadata
            .as_deref()
            .or(self.upstream_node_metadata.as_deref())
            .unwrap_or_default();
        let backoff = self
            .backoff
            .or(self.upstream_retry)
            .unwrap_or(DEFAULT_BACKOFF);
        let backoff_max = self
            .backoff_max
            .or(self.upstream_backoff_max)
            .unwrap_or(DEFAULT_BACKOFF_MAX.max(backoff));
        if backoff.is_zero() {
            return Err("--config-xds-backoff: must be more than 0".into());
        }
        if backoff_max < backoff {
            return Err(format!(
                "--config-xds-backoff-max: {backoff_max:?} is below the first delay, {backoff:?}"
            ));
        }
        Ok(Some(XdsConfig {
            server: server_url(&server)?,
            node_id: self
                .node_id
                .clone()
                .or_else(|| self.upstream_node_id.clone())
                .unwrap_or_else(|| DEFAULT_NODE_ID.to_owned()),
            node_metadata: node_metadata(metadata)?,
            backoff,
            backoff_max,
        }))
    }
}

/// A management server's address as a URL: `host:port` (envoyproxy/ratelimit's form, a
/// gRPC target) becomes `http://host:port`.
fn server_url(address: &str) -> Result<String, String> {
    let address = address.trim();
    let url = match address.split_once("://") {
        None => format!("http://{address}"),
        Some(("http", _)) => address.to_owned(),
        Some(("https", _)) => {
            return Err(format!(
                "--config-xds {address:?}: TLS toward the management server is not supported; \
                 serve xDS in plain text (a sidecar or a mesh can carry it over TLS)"
            ))
        }
        Some((scheme, _)) => {
            return Err(format!(
                "--config-xds {address:?}: unknown scheme {scheme:?}; expected host:port or http://host:port"
            ))
        }
    };
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| format!("--config-xds {address:?}: not an address: {e}"))?;
    if uri.host().is_none_or(str::is_empty) || uri.port().is_none() {
        return Err(format!(
            "--config-xds {address:?}: expected host:port or http://host:port"
        ));
    }
    Ok(url)
}

/// `key=value` pairs separated by commas (envoyproxy/ratelimit's form); blanks around
/// them ignored, an empty text none.
fn node_metadata(text: &str) -> Result<Vec<(String, String)>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| match entry.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
            _ => Err(format!(
                "--config-xds-node-metadata: {entry:?} is not key=value (pairs separated by commas)"
            )),
        })
        .collect()
}

/// A duration as Go writes it (envoyproxy/ratelimit's settings are Go durations): numbers
/// with units, `ns`, `us` (`µs`), `ms`, `s`, `m`, `h`, in sequence (`1m30s`, `1.5s`,
/// `250ms`); `0` alone is zero.
///
/// # Errors
///
/// A message naming what is not a duration.
///
/// # Examples
///
/// ```
/// use limitcore_rls::xds::parse_duration;
/// use std::time::Duration;
///
/// assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
/// assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
/// assert!(parse_duration("3").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a duration (such as 500ms, 3s, 1m30s)");
    let s = text.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(bad());
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..number_len].parse().map_err(|_| bad())?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += number * seconds;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}
