//! [`Classify`]: what a response tells an adaptive limit ([`DefaultClassifier`], closures of
//! the status, or your own), and [`Latency`]: which span a success's latency covers.

use http::{Response, StatusCode};
use limitcore::concurrency::Completion;

/// Reads a response's head (status, headers, extensions) and an inner service's errors as
/// the [`Completion`] its permit is completed with: the feedback an adaptive limit learns from
/// (a fixed limit only counts the permit back).
///
/// The outcome of a response is decided at its head but reported when its body ends (see
/// the [module's "Behaviour"](crate::concurrency)): [`Completion::Success`] becomes a latency
/// sample from the permit's grant to the body's end (or to the head: [`Latency::Head`]);
/// [`Completion::Dropped`] tells the rule to back off; [`Completion::Ignored`] is no sample;
/// [`Completion::SuccessAfter`] reports your own latency.
///
/// A classifier is cloned into each request's future: keep it cheap to clone (a unit
/// struct, a closure, or its state behind an `Arc`).
///
/// Implemented by [`DefaultClassifier`] and by every `Fn(StatusCode) -> Completion + Clone +
/// Send + Sync + 'static` closure (inner-service errors then count as
/// [`Completion::Dropped`]).
///
/// # Examples
///
/// ```
/// use http::{Response, StatusCode};
/// use limitcore_tower::concurrency::{Classify, Completion};
///
/// /// 5xx and 429 from the backend are overload; a response marked `x-cache: hit` says
/// /// nothing about the backend's latency.
/// #[derive(Clone)]
/// struct Backend;
///
/// impl Classify for Backend {
///     fn classify_response<B>(&self, response: &Response<B>) -> Completion {
///         let status = response.status();
///         if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
///             Completion::Dropped
///         } else if response.headers().get("x-cache").is_some_and(|v| v == "hit") {
///             Completion::Ignored
///         } else {
///             Completion::Success
///         }
///     }
/// }
///
/// let busy = Response::builder().status(429).body(()).unwrap();
/// assert_eq!(Backend.classify_response(&busy), Completion::Dropped);
/// assert_eq!(Backend.classify_error(&std::fmt::Error), Completion::Dropped); // the default
/// ```
pub trait Classify: Clone + Send + Sync + 'static {
    /// The outcome of `response`, from its head (called once, when the inner service's
    /// response arrives; its body is not read).
    fn classify_response<B>(&self, response: &Response<B>) -> Completion;

    /// The outcome of a request whose inner service failed with `error` (its permit is
    /// completed at once). Default: [`Completion::Dropped`].
    fn classify_error<E>(&self, error: &E) -> Completion {
        let _ = error;
        Completion::Dropped
    }
}

/// The default classifier: a 5xx is [`Completion::Dropped`] (the server failed or shed the
/// request: back off), `101 Switching Protocols` is [`Completion::Ignored`] (the handshake's
/// latency is not the tunnel's work), anything else (2xx to 4xx: the server answered, a
/// client error included) is [`Completion::Success`]; an inner-service error is
/// [`Completion::Dropped`].
///
/// # Examples
///
/// ```
/// use http::Response;
/// use limitcore_tower::concurrency::{Classify, DefaultClassifier, Completion};
///
/// let with = |status: u16| Response::builder().status(status).body(()).unwrap();
/// assert_eq!(DefaultClassifier.classify_response(&with(200)), Completion::Success);
/// assert_eq!(DefaultClassifier.classify_response(&with(404)), Completion::Success);
/// assert_eq!(DefaultClassifier.classify_response(&with(503)), Completion::Dropped);
/// assert_eq!(DefaultClassifier.classify_response(&with(101)), Completion::Ignored);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DefaultClassifier;

impl Classify for DefaultClassifier {
    #[inline]
    fn classify_response<B>(&self, response: &Response<B>) -> Completion {
        let status = response.status();
        if status.is_server_error() {
            Completion::Dropped
        } else if status == StatusCode::SWITCHING_PROTOCOLS {
            Completion::Ignored
        } else {
            Completion::Success
        }
    }
}

/// A closure of the response's status; inner-service errors are [`Completion::Dropped`].
///
/// ```
/// use http::{Response, StatusCode};
/// use limitcore_tower::concurrency::{Classify, Completion};
///
/// // Only 503 and 504 are overload; other 5xx are bugs, not load.
/// let classify = |status: StatusCode| match status.as_u16() {
///     503 | 504 => Completion::Dropped,
///     500..=599 => Completion::Ignored,
///     _ => Completion::Success,
/// };
/// let r = Response::builder().status(500).body(()).unwrap();
/// assert_eq!(classify.classify_response(&r), Completion::Ignored);
/// ```
impl<F> Classify for F
where
    F: Fn(StatusCode) -> Completion + Clone + Send + Sync + 'static,
{
    #[inline]
    fn classify_response<B>(&self, response: &Response<B>) -> Completion {
        self(response.status())
    }
}

/// Which span the latency of a successful response covers ([`Completion::Success`]; the
/// permit itself is held until the body ends either way).
///
/// # Examples
///
/// ```
/// use limitcore_tower::concurrency::{ConcurrencyLimitLayer, Latency};
///
/// // A download service: the body's time is the client's link, not the server's work.
/// let layer = ConcurrencyLimitLayer::fixed(64)?.latency(Latency::Head).build();
/// assert_eq!(layer.latency(), Latency::Head);
/// # Ok::<(), limitcore::concurrency::LimitError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Latency {
    /// From the permit's grant to the body's end (the default): the same span the permit
    /// is held over, so the in-flight count an adaptive rule relates latency to and the
    /// latency describe the same work (Little's law: in flight = throughput × time in
    /// flight, over one span). Envoy's adaptive concurrency filter samples at the end of
    /// the response's encoding likewise.
    #[default]
    BodyEnd,
    /// From the permit's grant to the response's head: the handler's time, leaving out
    /// how fast the client reads the body (long downloads, server-sent events).
    Head,
}
