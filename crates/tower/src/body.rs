//! [`RefusalBody`]: the response body types the layer answers in.

use bytes::Bytes;
use http_body_util::combinators::{BoxBody, UnsyncBoxBody};
use http_body_util::{BodyExt, Either, Full};

/// A response body type that [`RateLimit`](crate::RateLimit) can write its own responses
/// in (a refusal, the answer to a request with no usable key): the layer's response type is
/// the inner service's, `Response<B>`, so a passed response goes out as the inner service
/// made it, with no conversion and no allocation.
///
/// Implemented for axum's `Body` (the response body of every axum handler and router),
/// `Full<Bytes>`, `String`, the boxed bodies of `http_body_util`, and `Either<B, Full<Bytes>>`:
/// an inner service with any other body (hyper's `Incoming` in a proxy, a stream) has its
/// responses mapped to `Either::Left` (`ServiceBuilder::map_response(|r| r.map(Either::Left))`
/// inside the layer, or tower-http's `MapResponseBodyLayer`), and the layer's own responses
/// are then the `Either::Right` side. Implement it for your own body type to
/// answer in it.
///
/// # Examples
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::{Either, Full};
/// use limitcore_tower::RefusalBody;
///
/// let body = <Either<String, Full<Bytes>>>::refusal(Bytes::from_static(b"slow down"));
/// assert!(matches!(body, Either::Right(_)));
/// ```
pub trait RefusalBody: Sized {
    /// A body holding `bytes`, the whole content of one of the layer's responses.
    fn refusal(bytes: Bytes) -> Self;
}

impl RefusalBody for Full<Bytes> {
    #[inline]
    fn refusal(bytes: Bytes) -> Self {
        Full::new(bytes)
    }
}

impl RefusalBody for String {
    /// The layer's bodies are UTF-8 (plain text or JSON); bytes that were not would be
    /// replaced with U+FFFD, never a panic.
    #[inline]
    fn refusal(bytes: Bytes) -> Self {
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl<B> RefusalBody for Either<B, Full<Bytes>> {
    #[inline]
    fn refusal(bytes: Bytes) -> Self {
        Either::Right(Full::new(bytes))
    }
}

impl<E> RefusalBody for BoxBody<Bytes, E> {
    #[inline]
    fn refusal(bytes: Bytes) -> Self {
        Full::new(bytes).map_err(|never| match never {}).boxed()
    }
}

impl<E> RefusalBody for UnsyncBoxBody<Bytes, E> {
    #[inline]
    fn refusal(bytes: Bytes) -> Self {
        Full::new(bytes)
            .map_err(|never| match never {})
            .boxed_unsync()
    }
}

impl RefusalBody for axum_core::body::Body {
    #[inline]
    fn refusal(bytes: Bytes) -> Self {
        axum_core::body::Body::from(bytes)
    }
}
