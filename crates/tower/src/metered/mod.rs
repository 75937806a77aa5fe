//! The service of a [`Metered`](crate::Metered) layer: its reservation on its way to the
//! response's cost (`Bill`), the body that records it ([`MeteredBody`]), the
//! response future ([`MeteredFuture`]), and the admission (`service`).

mod bill;
mod body;
mod future;
mod service;

pub use body::MeteredBody;
pub use future::MeteredFuture;
