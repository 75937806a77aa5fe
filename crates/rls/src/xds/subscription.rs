//! [`Subscription`]: the service's ADS client, state of the world. It subscribes to
//! every `RateLimitConfig` resource ([`TYPE_URL`]) at the management server as its node,
//! applies each response's resources as one whole configuration or refuses it, answers
//! every response with an ACK or a NACK, and reconnects with [`Backoff`] when the stream
//! ends, the configuration in force staying meanwhile.

use super::backoff::Backoff;
use super::tls::XdsTls;
use crate::config::{Config, ConfigStatus, Settings, SourceKind};
use crate::pb::ratelimit::config::ratelimit::v3::RateLimitConfig;
use crate::service::Service;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{
    DiscoveryRequest, DiscoveryResponse, Resource,
};
use envoy_types::pb::google::protobuf::{value, Any, Struct, Value};
use envoy_types::pb::google::rpc::Status;
use prost::Message;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tonic::codegen::tokio_stream::Stream;
use tonic::transport::Endpoint;

/// The type URL of the resources the service subscribes to: envoyproxy/ratelimit's
/// `RateLimitConfig`.
pub const TYPE_URL: &str = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";
/// The type URL of xDS's resource wrapper, which a management server may put a resource in.
const RESOURCE_WRAPPER: &str = "type.googleapis.com/envoy.service.discovery.v3.Resource";
/// How long a connection to the management server may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// HTTP/2 pings on the stream, so that a management server gone without closing it (a
/// host lost, a network cut) is noticed within these two and reconnected.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest response read: a fleet's whole configuration comes in one (tonic's default
/// is 4 MiB).
const MAX_RESPONSE: usize = 64 << 20;
/// `google.rpc.Code.INVALID_ARGUMENT`, the code of a NACK's `error_detail`.
const INVALID_ARGUMENT: i32 = 3;

/// Where and as whom the service subscribes, and how it reconnects
/// ([`XdsArgs::resolve`](super::XdsArgs::resolve) makes one from the flags).
///
/// # Examples
///
/// ```
/// use limitcore_rls::xds::{XdsConfig, XdsTls};
/// use std::time::Duration;
///
/// let c = XdsConfig::new("http://127.0.0.1:18000", "ratelimit");
/// assert_eq!(c.backoff_max, Duration::from_secs(30));
/// assert_eq!(c.tls, None);
///
/// // Over TLS: the server's certificate verified by the system's roots, no client
/// // certificate (`XdsTls`'s files set the CA and the client's key pair).
/// let mut c = XdsConfig::new("https://xds.example:18001", "ratelimit");
/// c.tls = Some(XdsTls::default());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdsConfig {
    /// The management server: `http://host:port`, or `https://host:port` over TLS.
    pub server: String,
    /// The node id sent in every request (`Node.id`).
    pub node_id: String,
    /// The node's metadata (`Node.metadata`, string values), if any.
    pub node_metadata: Vec<(String, String)>,
    /// The first delay before reconnecting; it doubles with each failure in a row.
    pub backoff: Duration,
    /// The longest delay before reconnecting.
    pub backoff_max: Duration,
    /// TLS toward the server, with an `https://` address (`None` there: the server's
    /// certificate verified by the system's roots, no client certificate).
    pub tls: Option<XdsTls>,
}

impl XdsConfig {
    /// Subscribe to `server` as `node_id`, without metadata, reconnecting after 500 ms
    /// doubling up to 30 s.
    pub fn new(server: impl Into<String>, node_id: impl Into<String>) -> Self {
        XdsConfig {
            server: server.into(),
            node_id: node_id.into(),
            node_metadata: Vec::new(),
            backoff: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            tls: None,
        }
    }

    /// The endpoint a connection opens: the address, the timeouts and pings, and over
    /// `https://` the TLS configuration, its files read now.
    ///
    /// # Errors
    ///
    /// An address that is no URI, TLS settings with an `http://` address, and
    /// [`XdsTls::client_config`]'s errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_rls::xds::{TlsFile, XdsConfig, XdsTls};
    ///
    /// let c = XdsConfig::new("http://127.0.0.1:18000", "ratelimit");
    /// assert_eq!(c.endpoint()?.uri().port_u16(), Some(18000));
    ///
    /// let mut c = XdsConfig::new("https://127.0.0.1:18001", "ratelimit");
    /// c.tls = Some(XdsTls {
    ///     ca: Some(TlsFile::new("--config-xds-tls-ca", "/no/such/ca.crt")),
    ///     ..XdsTls::default()
    /// });
    /// assert!(c.endpoint().unwrap_err().starts_with("--config-xds-tls-ca /no/such/ca.crt: cannot read it"));
    /// # Ok::<(), String>(())
    /// ```
    pub fn endpoint(&self) -> Result<Endpoint, String> {
        let endpoint = Endpoint::from_shared(self.server.clone())
            .map_err(|e| format!("{:?}: not a management server address: {e}", self.server))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true);
        let https = endpoint.uri().scheme_str() == Some("https");
        match (&self.tls, https) {
            (None, false) => Ok(endpoint),
            (Some(_), false) => Err(format!(
                "{:?}: TLS settings with a plain-text (http://) address; use https://",
                self.server
            )),
            (tls, true) => {
                let tls = tls.clone().unwrap_or_default();
                let config = tls.client_config()?.timeout(CONNECT_TIMEOUT);
                endpoint.tls_config(config).map_err(|e| {
                    let mut why = format!("TLS toward {}: {}", self.server, chain(&e));
                    if tls.ca.is_none() {
                        why.push_str(
                            " (no CA given, so the system's roots verify the server: \
                             --config-xds-tls-ca or CONFIG_GRPC_XDS_SERVER_TLS_CACERT names one)",
                        );
                    }
                    why
                })
            }
        }
    }

    /// The node the requests name.
    fn node(&self) -> Node {
        let metadata = (!self.node_metadata.is_empty()).then(|| Struct {
            fields: self
                .node_metadata
                .iter()
                .map(|(k, v)| {
                    let v = Value {
                        kind: Some(value::Kind::StringValue(v.clone())),
                    };
                    (k.clone(), v)
                })
                .collect(),
        });
        Node {
            id: self.node_id.clone(),
            metadata,
            user_agent_name: "limitcore-rls".to_owned(),
            ..Node::default()
        }
    }
}

/// The requests of one stream, as tonic reads them: what the subscription queues.
struct Requests(mpsc::Receiver<DiscoveryRequest>);

impl Stream for Requests {
    type Item = DiscoveryRequest;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

/// The service's subscription to its configuration over xDS (ADS, state of the world).
///
/// Each response carries the whole configuration: its resources are decoded, read as a
/// set of configuration files would be ([`Config::from_resources`]) and applied to the
/// service in one step, keeping each key's usage as a reload of the files does. The
/// request that answers it is an ACK (`version_info` the response's, its nonce) or, when
/// any resource is refused, a NACK (`version_info` the version still in force, its nonce,
/// `error_detail` with the error's message; the configuration in force stays). When the
/// stream ends or cannot open, the subscription reconnects after a [`Backoff`] delay and
/// asks again, naming the version in force; meanwhile that version keeps deciding. Until
/// the first version arrives the service has no rule (every descriptor is answered `OK`),
/// as envoyproxy/ratelimit with `FORCE_START_WITHOUT_INITIAL_CONFIG`.
///
/// # Examples
///
/// ```
/// use limitcore_rls::xds::{Subscription, XdsConfig};
/// use limitcore_rls::{Memory, Options, Service, Settings, UnixClock};
/// use std::sync::Arc;
///
/// let service = Arc::new(Service::new(Memory::new(UnixClock::shared(), 1000), Options::default()));
/// let subscription = Arc::new(Subscription::new(
///     XdsConfig::new("http://127.0.0.1:18000", "ratelimit"),
///     Settings::default(),
///     service,
/// ));
/// assert_eq!(subscription.status().report().version, None);
/// // `tokio::spawn(subscription.run(stop))` subscribes until `stop` turns true.
/// ```
#[derive(Debug)]
pub struct Subscription {
    config: XdsConfig,
    settings: Settings,
    service: Arc<Service>,
    status: Arc<ConfigStatus>,
}

impl Subscription {
    /// A subscription of `service` to `config`'s management server, reading the resources
    /// under `settings`; nothing is sent before [`Subscription::run`].
    pub fn new(config: XdsConfig, settings: Settings, service: Arc<Service>) -> Self {
        let status = Arc::new(ConfigStatus::new(SourceKind::Xds, config.server.clone()));
        Subscription {
            config,
            settings,
            service,
            status,
        }
    }

    /// The version in force, the latest refusal, whether the stream is up.
    pub fn status(&self) -> &Arc<ConfigStatus> {
        &self.status
    }

    /// Why the latest version was refused, while no later one was accepted.
    pub fn last_error(&self) -> Option<String> {
        self.status.report().refused.map(|(_, why)| why)
    }

    /// Subscribe until `stop` turns true (or its sender is dropped): one stream at a time,
    /// reconnecting with backoff, each outcome logged to stderr.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut backoff = Backoff::new(self.config.backoff, self.config.backoff_max);
        loop {
            let (why, responded) = tokio::select! {
                ended = self.stream() => ended,
                _ = stop.changed() => return,
            };
            self.status.disconnected(&why);
            if responded {
                backoff.reset();
            }
            let delay = backoff.next_delay();
            eprintln!(
                "limitcore-rls: xDS: {why}; reconnecting to {} in {delay:?} (the configuration in force stays)",
                self.config.server
            );
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = stop.changed() => return,
            }
        }
    }

    /// One stream, until it ends: why it ended, and whether it delivered a response.
    async fn stream(&self) -> (String, bool) {
        // The TLS files are read again for each connection: a certificate rotated in
        // place is used from the next one, and a file gone bad is retried with backoff.
        let endpoint = match self.config.endpoint() {
            Ok(e) => e,
            Err(e) => return (e, false),
        };
        let channel = match endpoint.connect().await {
            Ok(c) => c,
            Err(e) => return (format!("cannot connect: {}", chain(&e)), false),
        };
        let mut client =
            AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(MAX_RESPONSE);
        // The first request names the version in force, so that a management server
        // restarted, or a reconnection, does not resend what is applied already.
        let (queue, requests) = mpsc::channel(4);
        let first = self.request(self.version_in_force(), String::new(), None);
        if queue.send(first).await.is_err() {
            return ("the request stream closed".to_owned(), false);
        }
        let mut responses = match client.stream_aggregated_resources(Requests(requests)).await {
            Ok(r) => r.into_inner(),
            Err(status) => {
                return (
                    format!("the stream was refused: {}", status_text(&status)),
                    false,
                )
            }
        };
        self.status.connected(true);
        let mut responded = false;
        loop {
            let response = match responses.message().await {
                Ok(Some(r)) => r,
                Ok(None) => return ("the management server ended the stream".into(), responded),
                Err(status) => {
                    return (
                        format!("the stream failed: {}", status_text(&status)),
                        responded,
                    )
                }
            };
            responded = true;
            let answer = self.answer(&response);
            if queue.send(answer).await.is_err() {
                return ("the request stream closed".into(), responded);
            }
        }
    }

    /// The version in force ("" before the first).
    fn version_in_force(&self) -> String {
        self.status.report().version.unwrap_or_default()
    }

    /// A request for the resources: `version` the version in force (or accepted now),
    /// `nonce` the response answered (empty for the first request), `error` a NACK's.
    fn request(&self, version: String, nonce: String, error: Option<String>) -> DiscoveryRequest {
        DiscoveryRequest {
            version_info: version,
            node: Some(self.config.node()),
            // None named: every resource of the type (a wildcard subscription).
            resource_names: Vec::new(),
            type_url: TYPE_URL.to_owned(),
            response_nonce: nonce,
            error_detail: error.map(|message| Status {
                code: INVALID_ARGUMENT,
                message,
                details: Vec::new(),
            }),
            ..DiscoveryRequest::default()
        }
    }

    /// Apply `response` or refuse it, and the request that says which: an ACK or a NACK.
    fn answer(&self, response: &DiscoveryResponse) -> DiscoveryRequest {
        let version = &response.version_info;
        match self.apply(response) {
            Ok(rules) => {
                self.status.accepted(version);
                eprintln!(
                    "limitcore-rls: xDS: version {version:?} applied ({} resources, {rules} rules)",
                    response.resources.len()
                );
                self.request(version.clone(), response.nonce.clone(), None)
            }
            Err(why) => {
                self.status.rejected(Some(version), &why);
                eprintln!(
                    "limitcore-rls: xDS: version {version:?} refused, the version in force stays: {why}"
                );
                let mut nack = self.request(
                    self.version_in_force(),
                    response.nonce.clone(),
                    Some(format!("version {version:?} refused: {why}")),
                );
                // A response of another type (none is asked for) is answered in its type.
                if response.type_url != TYPE_URL {
                    nack.type_url = response.type_url.clone();
                }
                nack
            }
        }
    }

    /// Decode `response`'s resources, read them as one configuration and put it in force:
    /// the number of rules, or why it was refused.
    fn apply(&self, response: &DiscoveryResponse) -> Result<usize, String> {
        if response.type_url != TYPE_URL {
            return Err(format!(
                "type {:?} was not asked for (only {TYPE_URL})",
                response.type_url
            ));
        }
        let resources = response
            .resources
            .iter()
            .enumerate()
            .map(|(i, any)| decode(any).map_err(|e| format!("resource {i}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let config =
            Config::from_resources(&resources, &self.settings).map_err(|e| e.to_string())?;
        let rules = config.rules().len();
        self.service.apply(config).map_err(|e| e.to_string())?;
        Ok(rules)
    }
}

/// A `RateLimitConfig` from its `Any` (or from xDS's `Resource` wrapper around one).
fn decode(any: &Any) -> Result<RateLimitConfig, String> {
    let any = if any.type_url == RESOURCE_WRAPPER {
        let wrapper = Resource::decode(any.value.as_slice())
            .map_err(|e| format!("cannot decode a Resource wrapper: {e}"))?;
        match wrapper.resource {
            Some(inner) => return decode(&inner),
            None => return Err(format!("the Resource wrapper {:?} is empty", wrapper.name)),
        }
    } else {
        any
    };
    if any.type_url != TYPE_URL {
        return Err(format!("type {:?}, expected {TYPE_URL}", any.type_url));
    }
    RateLimitConfig::decode(any.value.as_slice())
        .map_err(|e| format!("cannot decode a RateLimitConfig: {e}"))
}

/// An error with its sources (tonic's transport errors say little at the top), each
/// source written once: one whose text its parent already shows is not repeated.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    append_sources(&mut text, e.source());
    text
}

/// A gRPC status as a reason: its message and its sources (a TLS alert, a connection
/// closed), then its code.
fn status_text(status: &tonic::Status) -> String {
    let mut text = status.message().to_owned();
    append_sources(&mut text, std::error::Error::source(status));
    text.push_str(&format!(" ({:?})", status.code()));
    text
}

fn append_sources(text: &mut String, mut source: Option<&(dyn std::error::Error + 'static)>) {
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
}
