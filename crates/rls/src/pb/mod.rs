//! The xDS resource types of the rate-limit configuration, generated from this crate's
//! `proto/ratelimit/config/ratelimit/v3/rls_conf.proto` (the wire interface of
//! envoyproxy/ratelimit's `api/`, Apache-2.0; the `.proto` says what is the same and what
//! is this project's) by prost-build on protox, without protoc. The generated file is
//! committed; `tests/proto_generated.rs` regenerates it and fails if it differs.
//!
//! The module path is the proto package's, as envoy-types lays out Envoy's:
//! `ratelimit.config.ratelimit.v3.RateLimitConfig` is
//! [`ratelimit::config::ratelimit::v3::RateLimitConfig`]. Its `metadata` is envoy-types'
//! `google.protobuf.Struct`.
//!
//! # Examples
//!
//! ```
//! use limitcore_rls::pb::ratelimit::config::ratelimit::v3::{
//!     RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RateLimitUnit,
//! };
//! use prost::Message;
//!
//! let config = RateLimitConfig {
//!     name: "edge".into(),
//!     domain: "edge".into(),
//!     descriptors: vec![RateLimitDescriptor {
//!         key: "user".into(),
//!         rate_limit: Some(RateLimitPolicy {
//!             unit: RateLimitUnit::Minute as i32,
//!             requests_per_unit: 5,
//!             ..Default::default()
//!         }),
//!         ..Default::default()
//!     }],
//! };
//! let bytes = config.encode_to_vec();
//! assert_eq!(RateLimitConfig::decode(bytes.as_slice())?, config);
//! # Ok::<(), prost::DecodeError>(())
//! ```

/// The proto package `ratelimit`.
pub mod ratelimit {
    /// The proto package `ratelimit.config`.
    pub mod config {
        /// The proto package `ratelimit.config.ratelimit`.
        pub mod ratelimit {
            /// The proto package `ratelimit.config.ratelimit.v3`: the rate-limit
            /// configuration resource and its parts.
            pub mod v3 {
                // Generated code is not held to the crate's lints: its shape is
                // prost-build's, and it is checked against the `.proto` instead.
                #![allow(clippy::all, clippy::pedantic)]
                include!("ratelimit.config.ratelimit.v3.rs");
            }
        }
    }
}
