//! Configuration over xDS, as envoyproxy/ratelimit's `GRPC_XDS_SOTW` provider: the
//! service subscribes (ADS, state of the world) to the `RateLimitConfig` resources of a
//! management server ([`TYPE_URL`]; Envoy Gateway serves them), applies each version
//! whole or refuses it with a NACK naming the error, and reconnects with backoff
//! ([`Subscription`]). The resources are read as configuration files are
//! ([`Config::from_resources`](crate::Config::from_resources)): one model, one validation.
//! The flags, this service's and envoyproxy/ratelimit's names, are [`XdsArgs`]. The
//! management server may be reached over TLS, mutual TLS included, as Envoy Gateway's
//! controller requires ([`XdsTls`]).

mod args;
mod backoff;
mod subscription;
mod tls;

pub use crate::tls::TlsFile;
pub use args::{parse_duration, ConfigType, XdsArgs};
pub use backoff::Backoff;
pub use subscription::{Subscription, XdsConfig, TYPE_URL};
pub use tls::XdsTls;
