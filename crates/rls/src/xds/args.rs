//! [`XdsArgs`]: the flags and environment variables of configuration over xDS, this
//! service's (`--config-xds`, `LIMITCORE_RLS_CONFIG_XDS_*`) and envoyproxy/ratelimit's
//! (`CONFIG_TYPE=GRPC_XDS_SOTW`, `CONFIG_GRPC_XDS_*`), resolved into an [`XdsConfig`].

use super::subscription::XdsConfig;
use super::tls::XdsTls;
use crate::tls::TlsFile;
use clap::builder::BoolishValueParser;
use std::path::PathBuf;
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
/// // Over TLS (`--config-xds-tls`, CONFIG_GRPC_XDS_SERVER_USE_TLS=true, or an `https://`
/// // URL), the files are read and checked here: a bad one is named.
/// let c = ServerConfig::parse_from([
///     "limitcore-rls",
///     "--config-xds", "https://xds:18001",
///     "--config-xds-tls-ca", "/no/such/ca.crt",
/// ]);
/// let err = c.xds.resolve().unwrap_err();
/// assert!(err.starts_with("--config-xds-tls-ca /no/such/ca.crt: cannot read it"), "{err}");
/// let c = ServerConfig::parse_from([
///     "limitcore-rls",
///     "--config-xds", "xds:18001",
///     "--config-grpc-xds-server-use-tls=true",
///     "--config-grpc-xds-client-tls-cert", "/no/such/tls.crt",
///     "--config-grpc-xds-client-tls-key", "/no/such/tls.key",
/// ]);
/// let err = c.xds.resolve().unwrap_err();
/// assert!(err.starts_with("CONFIG_GRPC_XDS_CLIENT_TLS_CERT /no/such/tls.crt: cannot read it"), "{err}");
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
    /// `host:port`, `http://host:port`, or `https://host:port` (over TLS).
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
    /// Connect to the management server over TLS (as an `https://` URL does); `=false`
    /// connects in plain text whatever CONFIG_GRPC_XDS_SERVER_USE_TLS says.
    #[arg(
        long = "config-xds-tls",
        env = "LIMITCORE_RLS_CONFIG_XDS_TLS",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = BoolishValueParser::new()
    )]
    pub tls: Option<bool>,
    /// The CA certificates (PEM) that verify the management server's certificate, alone
    /// [default: the system's roots].
    #[arg(
        long = "config-xds-tls-ca",
        env = "LIMITCORE_RLS_CONFIG_XDS_TLS_CA",
        value_name = "FILE"
    )]
    pub tls_ca: Option<PathBuf>,
    /// The client certificate (PEM) presented to the management server, for mutual TLS;
    /// needs --config-xds-tls-key.
    #[arg(
        long = "config-xds-tls-cert",
        env = "LIMITCORE_RLS_CONFIG_XDS_TLS_CERT",
        value_name = "FILE"
    )]
    pub tls_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC).
    #[arg(
        long = "config-xds-tls-key",
        env = "LIMITCORE_RLS_CONFIG_XDS_TLS_KEY",
        value_name = "FILE"
    )]
    pub tls_key: Option<PathBuf>,
    /// The name the management server's certificate must be valid for (a DNS name or an
    /// IP address) [default: the URL's host].
    #[arg(
        long = "config-xds-tls-san",
        env = "LIMITCORE_RLS_CONFIG_XDS_TLS_SAN",
        value_name = "NAME"
    )]
    pub tls_san: Option<String>,

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
    /// envoyproxy/ratelimit's CONFIG_GRPC_XDS_SERVER_USE_TLS (true, false): --config-xds-tls.
    #[arg(
        long = "config-grpc-xds-server-use-tls",
        env = "CONFIG_GRPC_XDS_SERVER_USE_TLS",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = BoolishValueParser::new()
    )]
    pub upstream_use_tls: Option<bool>,
    /// envoyproxy/ratelimit's CONFIG_GRPC_XDS_SERVER_TLS_CACERT: --config-xds-tls-ca.
    #[arg(
        long = "config-grpc-xds-server-tls-cacert",
        env = "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
        value_name = "FILE"
    )]
    pub upstream_tls_ca: Option<PathBuf>,
    /// envoyproxy/ratelimit's CONFIG_GRPC_XDS_CLIENT_TLS_CERT: --config-xds-tls-cert.
    #[arg(
        long = "config-grpc-xds-client-tls-cert",
        env = "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
        value_name = "FILE"
    )]
    pub upstream_tls_cert: Option<PathBuf>,
    /// envoyproxy/ratelimit's CONFIG_GRPC_XDS_CLIENT_TLS_KEY: --config-xds-tls-key.
    #[arg(
        long = "config-grpc-xds-client-tls-key",
        env = "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
        value_name = "FILE"
    )]
    pub upstream_tls_key: Option<PathBuf>,
    /// envoyproxy/ratelimit's CONFIG_GRPC_XDS_SERVER_TLS_SAN: --config-xds-tls-san.
    #[arg(
        long = "config-grpc-xds-server-tls-san",
        env = "CONFIG_GRPC_XDS_SERVER_TLS_SAN",
        value_name = "NAME"
    )]
    pub upstream_tls_san: Option<String>,
    /// envoyproxy/ratelimit's XDS_CLIENT_BACKOFF_MAX_INTERVAL: --config-xds-backoff-max.
    #[arg(long = "xds-client-backoff-max-interval", env = "XDS_CLIENT_BACKOFF_MAX_INTERVAL", value_parser = parse_duration, value_name = "DURATION")]
    pub upstream_backoff_max: Option<Duration>,
}

impl XdsArgs {
    /// The subscription these flags ask for: `None` for the configuration directory
    /// (neither `--config-xds` nor `CONFIG_TYPE=GRPC_XDS_SOTW`).
    ///
    /// Over TLS, the files are read and checked here (as
    /// [`XdsConfig::endpoint`] reads them for each connection), so that a bad one stops
    /// the service at start.
    ///
    /// # Errors
    ///
    /// A message naming the flag or variable: a server address that is no `host:port`,
    /// `http://host:port` or `https://host:port`, node metadata that is not `key=value`
    /// pairs, a maximum backoff below the first; TLS asked for with an `http://` address
    /// or refused with an `https://` one, a TLS file or name set without TLS; and each
    /// error of [`XdsTls::client_config`], naming the setting and the file.
    pub fn resolve(&self) -> Result<Option<XdsConfig>, String> {
        let server = match (&self.server, self.config_type) {
            (Some(server), _) => server.clone(),
            (None, Some(ConfigType::GrpcXdsSotw)) => self
                .upstream_server
                .clone()
                .unwrap_or_else(|| UPSTREAM_DEFAULT_SERVER.to_owned()),
            (None, _) => return Ok(None),
        };
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
        let use_tls = match (self.tls, self.upstream_use_tls) {
            (Some(on), _) => Some((on, "--config-xds-tls")),
            (None, Some(on)) => Some((on, "CONFIG_GRPC_XDS_SERVER_USE_TLS")),
            (None, None) => None,
        };
        let (server, tls_on) = server_url(&server, use_tls)?;
        let tls = self.tls_settings();
        let tls = if tls_on {
            Some(tls)
        } else {
            // TLS files with a plain-text connection: a connection that would fail forever
            // (or one the files were meant to protect), refused at start instead.
            let named = tls
                .ca
                .iter()
                .chain(&tls.cert)
                .chain(&tls.key)
                .map(|f| f.setting.clone())
                .chain(
                    tls.server_name
                        .as_ref()
                        .map(|_| self.san_setting().to_owned()),
                )
                .collect::<Vec<_>>();
            if !named.is_empty() {
                return Err(format!(
                    "{} set, but the management server {server} is reached in plain text: \
                     turn TLS on (--config-xds-tls, CONFIG_GRPC_XDS_SERVER_USE_TLS=true, or \
                     an https:// address)",
                    named.join(", ")
                ));
            }
            None
        };
        let config = XdsConfig {
            server,
            node_id: self
                .node_id
                .clone()
                .or_else(|| self.upstream_node_id.clone())
                .unwrap_or_else(|| DEFAULT_NODE_ID.to_owned()),
            node_metadata: node_metadata(metadata)?,
            backoff,
            backoff_max,
            tls,
        };
        // Everything a connection will read and build, read and built once now: a bad
        // file, or no roots to verify the server by, stops the service here.
        config.endpoint()?;
        Ok(Some(config))
    }

    /// The TLS settings, each from this service's flag or else from envoyproxy/ratelimit's
    /// variable (an empty value is none, as envoyproxy/ratelimit's defaults are), named by
    /// the one it came from.
    fn tls_settings(&self) -> XdsTls {
        let file = |ours: &Option<PathBuf>,
                    ours_name: &str,
                    theirs: &Option<PathBuf>,
                    theirs_name: &str| {
            let given = |p: &&PathBuf| !p.as_os_str().is_empty();
            match (ours.as_ref().filter(given), theirs.as_ref().filter(given)) {
                (Some(path), _) => Some(TlsFile::new(ours_name, path)),
                (None, Some(path)) => Some(TlsFile::new(theirs_name, path)),
                (None, None) => None,
            }
        };
        XdsTls {
            ca: file(
                &self.tls_ca,
                "--config-xds-tls-ca",
                &self.upstream_tls_ca,
                "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
            ),
            cert: file(
                &self.tls_cert,
                "--config-xds-tls-cert",
                &self.upstream_tls_cert,
                "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
            ),
            key: file(
                &self.tls_key,
                "--config-xds-tls-key",
                &self.upstream_tls_key,
                "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
            ),
            server_name: self.san().map(str::to_owned),
        }
    }

    /// The server name to verify, if set (not empty).
    fn san(&self) -> Option<&str> {
        [&self.tls_san, &self.upstream_tls_san]
            .into_iter()
            .flatten()
            .map(|s| s.trim())
            .find(|s| !s.is_empty())
    }

    /// The setting the server name comes from.
    fn san_setting(&self) -> &'static str {
        if self
            .tls_san
            .as_deref()
            .is_some_and(|s| !s.trim().is_empty())
        {
            "--config-xds-tls-san"
        } else {
            "CONFIG_GRPC_XDS_SERVER_TLS_SAN"
        }
    }
}

/// A management server's address as a URL, and whether it is reached over TLS:
/// `host:port` (envoyproxy/ratelimit's form, a gRPC target) becomes `https://host:port`
/// when `tls` (the setting and the flag or variable it came from) says so, `http://host:port`
/// otherwise; a scheme that contradicts `tls` is refused.
fn server_url(address: &str, tls: Option<(bool, &str)>) -> Result<(String, bool), String> {
    let address = address.trim();
    let (url, on) = match (address.split_once("://"), tls) {
        (None, Some((true, _))) => (format!("https://{address}"), true),
        (None, _) => (format!("http://{address}"), false),
        (Some(("http", _)), Some((true, setting))) => {
            return Err(format!(
                "--config-xds {address:?}: a plain-text (http://) address, but {setting} asks \
                 for TLS; give host:port or https://host:port"
            ))
        }
        (Some(("http", _)), _) => (address.to_owned(), false),
        (Some(("https", _)), Some((false, setting))) => {
            return Err(format!(
                "--config-xds {address:?}: a TLS (https://) address, but {setting} turns TLS \
                 off; give host:port or http://host:port"
            ))
        }
        (Some(("https", _)), _) => (address.to_owned(), true),
        (Some((scheme, _)), _) => {
            return Err(format!(
                "--config-xds {address:?}: unknown scheme {scheme:?}; expected host:port, \
                 http://host:port or https://host:port"
            ))
        }
    };
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| format!("--config-xds {address:?}: not an address: {e}"))?;
    if uri.host().is_none_or(str::is_empty) || uri.port().is_none() {
        return Err(format!(
            "--config-xds {address:?}: expected host:port, http://host:port or https://host:port"
        ));
    }
    Ok((url, on))
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
