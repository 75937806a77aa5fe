//! The service of a [`Remote`](crate::Remote) layer: its decision awaited, from any
//! `AsyncKeyedRateLimiter`, in a [`RemoteFuture`].

mod future;
mod service;

pub use future::RemoteFuture;
