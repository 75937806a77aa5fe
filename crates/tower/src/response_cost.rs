//! [`ResponseCost`]: what a response says it cost (the source of a
//! [`Metered`](crate::Metered) layer's charges), and the [`Meter`] that reads it.

use http::HeaderName;
use http::response::Parts;
use std::fmt;
use std::sync::Arc;

/// What a response cost, in permits, read from the response: the source of a
/// [`Metered`](crate::Metered) layer's charges, set with
/// [`Builder::response_cost`](crate::Builder::response_cost).
///
/// - [`ResponseCost::header`]: a decimal header field the inner service writes (an LLM
///   proxy's token count, a query's cost units).
/// - [`ResponseCost::body_bytes`]: the bytes of the response body, counted as its frames
///   pass the layer.
/// - [`ResponseCost::from_fn`]: a closure over the response's head (its status, headers,
///   extensions): charge only failures, a cost by route, a header with a fallback of yours.
///
/// The cost is read from the response **as the inner service made it** (before the layer
/// adds its own fields and its [`Outcome`](crate::Outcome)), and recorded once, when the
/// body ends or is dropped ([`Metered`](crate::Metered) says when and how). Clones share the
/// closure of [`ResponseCost::from_fn`].
///
/// # Examples
///
/// ```
/// use http::HeaderName;
/// use limitcore_tower::ResponseCost;
///
/// let tokens = ResponseCost::header(HeaderName::from_static("x-tokens"));
/// let bytes = ResponseCost::body_bytes();
/// let failures = ResponseCost::from_fn(|head| u32::from(head.status.is_server_error()));
/// assert_eq!(format!("{tokens:?}"), r#"ResponseCost::Header("x-tokens")"#);
/// # let _ = (bytes, failures);
/// ```
#[derive(Clone)]
pub struct ResponseCost {
    source: Source,
}

/// Where a [`ResponseCost`] reads the cost.
#[derive(Clone)]
enum Source {
    Header(HeaderName),
    BodyBytes,
    Fn(Arc<CostOfHead>),
}

/// A cost read from a response's head ([`ResponseCost::from_fn`]).
type CostOfHead = dyn Fn(&Parts) -> u32 + Send + Sync;

impl ResponseCost {
    /// The value of the response's header field `name`: exactly one field line holding a
    /// non-negative decimal integer (ASCII digits only, as an RFC 9651 Integer without a
    /// sign), in permits; a value above `u32::MAX` is `u32::MAX`.
    ///
    /// **Missing or malformed** (absent, repeated, empty, a sign, spaces inside, anything
    /// but digits): the response costs its request's estimate
    /// ([`Builder::cost`](crate::Builder::cost), 0 by default with a response cost), so
    /// the reservation stands as it was made: a response that does not say what it cost is
    /// charged what its request said it would cost, never a panic and never a guess. A
    /// fallback of your own is a [`ResponseCost::from_fn`] that reads the header.
    ///
    /// The header is left in the response (the client sees it too; remove it in a layer
    /// inside this one if it is internal).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::{HeaderName, Request, Response, StatusCode};
    /// use http_body_util::{BodyExt, Full};
    /// use limitcore::clock::ManualClock;
    /// use limitcore::{Gcra, Global};
    /// use limitcore_tower::{GlobalKey, RateLimitLayer, ResponseCost};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// // 1000 tokens a minute; the upstream says what each answer cost.
    /// let tokens = Global::new(Gcra::with_clock("1000/min".parse()?, ManualClock::new())?);
    /// let layer = RateLimitLayer::builder(tokens, GlobalKey)
    ///     .response_cost(ResponseCost::header(HeaderName::from_static("x-tokens")))
    ///     .build()?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     let answer = Response::builder().header("x-tokens", "600").body(Full::from("..."))?;
    ///     Ok::<_, http::Error>(answer)
    /// }));
    /// for expected in [StatusCode::OK, StatusCode::OK, StatusCode::TOO_MANY_REQUESTS] {
    ///     let response = svc.clone().oneshot(Request::new(())).await?;
    ///     assert_eq!(response.status(), expected);
    ///     response.into_body().collect().await?; // charged at the body's end
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn header(name: HeaderName) -> Self {
        ResponseCost {
            source: Source::Header(name),
        }
    }

    /// The bytes of the response body: the sum of its data frames' lengths as they pass
    /// the layer (trailers are not counted), whatever the `Content-Length` said. A body
    /// that ends early (an error, or dropped when the client goes away) is charged the bytes
    /// it yielded until then: bytes handed to the server, which may not all have reached
    /// the client. A count above `u32::MAX` (4 GiB) is charged as `u32::MAX`.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::{Request, Response};
    /// use http_body_util::{BodyExt, Full};
    /// use limitcore::clock::ManualClock;
    /// use limitcore::{Gcra, Global, KeyedRateLimiter};
    /// use limitcore_tower::{GlobalKey, RateLimitLayer, ResponseCost};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// // 1 MiB a second of response bytes.
    /// let bandwidth = Global::new(Gcra::with_clock("1048576/s".parse()?, ManualClock::new())?);
    /// let layer = RateLimitLayer::builder(bandwidth, GlobalKey)
    ///     .response_cost(ResponseCost::body_bytes())
    ///     .build()?;
    /// let svc = layer.layer(service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(Full::from(vec![0_u8; 4096])))
    /// }));
    /// let response = svc.oneshot(Request::new(())).await?;
    /// assert_eq!(layer.limiter().snapshot_at(&(), 0).remaining, 1_048_576); // not yet
    /// response.into_body().collect().await?;
    /// assert_eq!(layer.limiter().snapshot_at(&(), 0).remaining, 1_048_576 - 4096);
    /// # Ok(())
    /// # }
    /// ```
    pub fn body_bytes() -> Self {
        ResponseCost {
            source: Source::BodyBytes,
        }
    }

    /// What `cost` says of the response's head (its status, headers, extensions, as the
    /// inner service made them), in permits: charge only failures (tower_governor #34: a
    /// login limit that counts failed attempts), a cost by status, a header read with a
    /// fallback of your own. Called once per response, when its head arrives.
    ///
    /// # Examples
    ///
    /// Count only server errors, 3 a minute; every request reserves 1 (its estimate), which
    /// a success gives back, so that the fourth failure is never let through:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use http::{Request, Response, StatusCode};
    /// use http_body_util::{BodyExt, Full};
    /// use limitcore::clock::ManualClock;
    /// use limitcore::{Gcra, Global};
    /// use limitcore_tower::{GlobalKey, RateLimitLayer, ResponseCost};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let failures = Global::new(Gcra::with_clock("3/min".parse()?, ManualClock::new())?);
    /// let layer = RateLimitLayer::builder(failures, GlobalKey)
    ///     .response_cost(ResponseCost::from_fn(|head| u32::from(head.status.is_server_error())))
    ///     .cost(|_| 1)
    ///     .build()?;
    /// let svc = layer.layer(service_fn(|req: Request<()>| async move {
    ///     let status = if req.uri().path() == "/fail" { StatusCode::BAD_GATEWAY } else { StatusCode::OK };
    ///     Ok::<_, http::Error>(Response::builder().status(status).body(Full::from(""))?)
    /// }));
    /// let get = |path: &'static str| {
    ///     let svc = svc.clone();
    ///     async move {
    ///         let response = svc.oneshot(Request::get(path).body(())?).await?;
    ///         let status = response.status();
    ///         response.into_body().collect().await?;
    ///         Ok::<_, Box<dyn std::error::Error>>(status)
    ///     }
    /// };
    /// for _ in 0..10 {
    ///     assert_eq!(get("/").await?, StatusCode::OK);          // free
    /// }
    /// for _ in 0..3 {
    ///     assert_eq!(get("/fail").await?, StatusCode::BAD_GATEWAY);
    /// }
    /// assert_eq!(get("/").await?, StatusCode::TOO_MANY_REQUESTS);
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_fn(cost: impl Fn(&Parts) -> u32 + Send + Sync + 'static) -> Self {
        ResponseCost {
            source: Source::Fn(Arc::new(cost)),
        }
    }

    /// The meter of a response whose head is `head`, for a request whose estimate is
    /// `estimate`: the cost the head says, or a count of the body's bytes to come.
    pub(crate) fn meter(&self, head: &Parts, estimate: u32) -> Meter {
        match &self.source {
            Source::Header(name) => Meter::Known(header_cost(head, name).unwrap_or(estimate)),
            Source::BodyBytes => Meter::Bytes(0),
            Source::Fn(cost) => Meter::Known(cost(head)),
        }
    }
}

impl fmt::Debug for ResponseCost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Source::Header(name) => f.debug_tuple("ResponseCost::Header").field(name).finish(),
            Source::BodyBytes => f.write_str("ResponseCost::BodyBytes"),
            Source::Fn(_) => f.write_str("ResponseCost::Fn(..)"),
        }
    }
}

/// The cost the header `name` of `head` says: one field line of ASCII digits, saturated
/// at `u32::MAX`; `None` when it says nothing usable.
fn header_cost(head: &Parts, name: &HeaderName) -> Option<u32> {
    let mut lines = head.headers.get_all(name).iter();
    let value = lines.next()?;
    // Two field lines are two answers: which one the response meant is a guess.
    if lines.next().is_some() {
        return None;
    }
    let digits = value.as_bytes();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // The digits are checked: only the size can fail, and a cost too large to count is
    // charged as the largest one (never as less than it said).
    Some(digits.iter().fold(0_u32, |n, d| {
        n.saturating_mul(10).saturating_add(u32::from(d - b'0'))
    }))
}

/// What a response has cost so far: known at its head, or counted as its body passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Meter {
    /// A cost known in advance (the estimate, until a head says otherwise).
    Known(u32),
    /// Body bytes counted so far.
    Bytes(u64),
}

impl Meter {
    /// Counts a frame of `len` data bytes (a known cost ignores it).
    #[inline]
    pub(crate) fn count(&mut self, len: usize) {
        if let Meter::Bytes(total) = self {
            *total = total.saturating_add(len as u64);
        }
    }

    /// The cost, in permits (a byte count past `u32::MAX` is `u32::MAX`).
    pub(crate) fn cost(self) -> u32 {
        match self {
            Meter::Known(n) => n,
            Meter::Bytes(total) => u32::try_from(total).unwrap_or(u32::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(values: &[&str]) -> Parts {
        let mut builder = http::Response::builder();
        for value in values {
            builder = builder.header("x-tokens", *value);
        }
        builder.body(()).unwrap().into_parts().0
    }

    #[test]
    fn a_header_is_one_line_of_digits_or_the_estimate() {
        let name = HeaderName::from_static("x-tokens");
        let cost = ResponseCost::header(name);
        let read = |values: &[&str]| cost.meter(&head(values), 7).cost();
        assert_eq!(read(&["600"]), 600);
        assert_eq!(read(&["0"]), 0);
        assert_eq!(read(&["000042"]), 42);
        assert_eq!(read(&["4294967295"]), u32::MAX);
        assert_eq!(read(&["99999999999999999999999"]), u32::MAX);
        for malformed in [
            &[][..],
            &[""],
            &["+5"],
            &["-5"],
            &["5 "],
            &["1e3"],
            &["1.5"],
            &["six"],
            &["5", "6"],
        ] {
            assert_eq!(read(malformed), 7, "{malformed:?}");
        }
    }

    #[test]
    fn bytes_saturate_at_the_largest_cost() {
        let mut meter = Meter::Bytes(0);
        meter.count(3);
        meter.count(4);
        assert_eq!(meter.cost(), 7);
        meter.count(usize::MAX);
        assert_eq!(meter.cost(), u32::MAX);
        let mut known = Meter::Known(9);
        known.count(100);
        assert_eq!(known.cost(), 9);
    }
}
