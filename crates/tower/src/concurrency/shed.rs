//! [`Shed`]: the answer to a request the limit did not admit.

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};
use limitcore::concurrency::AcquireError;

/// Why the layer shed a request, in the extensions of its response (the layer's own, with
/// the shed status): for logs and metrics, and to tell the layer's refusals from the inner
/// service's own 503s.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use http::{Request, Response, StatusCode};
/// use limitcore::concurrency::AcquireError;
/// use limitcore_tower::ConcurrencyLimitLayer;
/// use limitcore_tower::concurrency::Shed;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// let layer = ConcurrencyLimitLayer::new(1)?;
/// let svc = layer.layer(service_fn(|_: Request<()>| async {
///     Ok::<_, std::convert::Infallible>(Response::new(String::from("ok")))
/// }));
/// let first = svc.clone().oneshot(Request::new(())).await?; // its body holds the permit
/// let second = svc.oneshot(Request::new(())).await?;
/// assert_eq!(second.status(), StatusCode::SERVICE_UNAVAILABLE);
/// let shed = second.extensions().get::<Shed>().unwrap();
/// assert_eq!(shed.error(), AcquireError::Full { limit: 1, in_flight: 1 });
/// drop(first);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shed {
    error: AcquireError,
}

impl Shed {
    /// Why no permit was granted: [`AcquireError::Full`] (shed at once: the limit was
    /// full, or others were queued), [`AcquireError::BacklogFull`] (the queue was full),
    /// [`AcquireError::TimedOut`] (the queue's wait passed), [`AcquireError::ExceedsLimit`]
    /// (never for one permit).
    ///
    /// # Examples
    ///
    /// See the type's.
    pub fn error(&self) -> AcquireError {
        self.error
    }
}

/// The response to a request shed for `error`: `status`, a one-line `text/plain` body, the
/// [`Shed`] extension.
#[cold]
pub(crate) fn shed(status: StatusCode, error: AcquireError) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from_static(
        b"overloaded: too many requests in flight\n",
    ));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response.extensions_mut().insert(Shed { error });
    response
}
