//! Keys: which bucket a request is charged to.
//!
//! A [`KeyExtractor`] reads a request's head (a [`RequestHead`], borrowed from the request
//! as it is) and returns its key, or `None` when the request has no usable key (no peer address, a forwarding header that does not name a
//! client, a missing API-key header). What happens then is the layer's
//! [`MissingKey`] answer: by default the extractor's own shared bucket
//! ([`KeyExtractor::shared_key`]), else a refusal with a status of your choice. A missing
//! key is never a panic and never a 500.
//!
//! | extractor | key | no usable key when | default answer |
//! |---|---|---|---|
//! | [`GlobalKey`] | `()` | never | — |
//! | [`PeerIp`] | the peer's [`IpAddr`](std::net::IpAddr), by prefix | no peer address in the request's extensions | the shared bucket `0.0.0.0` |
//! | [`ForwardedIp`] | the client's [`IpAddr`](std::net::IpAddr) behind trusted proxies, by prefix | see [`ForwardedIp`] | the shared bucket `0.0.0.0` |
//! | [`HeaderKey`] | the header's [`HeaderValue`] | header absent, repeated, empty or too long | the shared bucket of the empty value |
//! | [`FnKey`] | yours | your closure returns `None` | refusal, 400 Bad Request |

use http::header::HeaderName;
use http::request::Parts;
use http::{Extensions, HeaderMap, HeaderValue, Method, Request, StatusCode, Uri, Version};
use std::fmt;

mod ip;

pub use ip::{
    ForwardHeader, ForwardedIp, InvalidPrefix, IpPrefix, PeerIp, SHARED_IP_KEY, Trust, peer_addr,
};

/// A request's head, borrowed: its method, URI, version, headers and extensions. What a
/// [`KeyExtractor`] reads; the layer makes it from the `&Request` it is given, without
/// taking the request apart.
///
/// Made from a `&Request<B>` (any body) or from a `&Parts` with `From`.
///
/// # Examples
///
/// ```
/// use limitcore_tower::RequestHead;
///
/// let req = http::Request::post("/items?page=2").header("x-api-key", "k-1").body(()).unwrap();
/// let head = RequestHead::from(&req);
/// assert_eq!(head.method(), http::Method::POST);
/// assert_eq!(head.uri().path(), "/items");
/// assert_eq!(head.headers()["x-api-key"], "k-1");
///
/// let (parts, ()) = req.into_parts();
/// assert_eq!(RequestHead::from(&parts).uri().query(), Some("page=2"));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'a> {
    method: &'a Method,
    uri: &'a Uri,
    version: Version,
    headers: &'a HeaderMap<HeaderValue>,
    extensions: &'a Extensions,
}

impl<'a> RequestHead<'a> {
    /// The request's method.
    #[inline]
    pub fn method(&self) -> &'a Method {
        self.method
    }

    /// The request's URI.
    #[inline]
    pub fn uri(&self) -> &'a Uri {
        self.uri
    }

    /// The request's HTTP version.
    #[inline]
    pub fn version(&self) -> Version {
        self.version
    }

    /// The request's header fields.
    #[inline]
    pub fn headers(&self) -> &'a HeaderMap<HeaderValue> {
        self.headers
    }

    /// The request's extensions (the peer address a server put there, among others).
    #[inline]
    pub fn extensions(&self) -> &'a Extensions {
        self.extensions
    }
}

impl<'a, B> From<&'a Request<B>> for RequestHead<'a> {
    #[inline]
    fn from(req: &'a Request<B>) -> Self {
        RequestHead {
            method: req.method(),
            uri: req.uri(),
            version: req.version(),
            headers: req.headers(),
            extensions: req.extensions(),
        }
    }
}

impl<'a> From<&'a Parts> for RequestHead<'a> {
    #[inline]
    fn from(parts: &'a Parts) -> Self {
        RequestHead {
            method: &parts.method,
            uri: &parts.uri,
            version: parts.version,
            headers: &parts.headers,
            extensions: &parts.extensions,
        }
    }
}

/// Reads the key a request is limited by from its head (method, URI, headers,
/// extensions), borrowed as a [`RequestHead`].
///
/// Implemented by the extractors of this module and by your own types; [`FnKey`] wraps a
/// closure.
///
/// # Examples
///
/// ```
/// use limitcore_tower::{KeyExtractor, RequestHead};
///
/// /// Limits by the first path segment (`/tenant-a/...`).
/// #[derive(Debug)]
/// struct Tenant;
///
/// impl KeyExtractor for Tenant {
///     type Key = String;
///     fn extract(&self, head: RequestHead<'_>) -> Option<String> {
///         let segment = head.uri().path().split('/').nth(1)?;
///         (!segment.is_empty() && segment.len() <= 64).then(|| segment.to_owned())
///     }
/// }
///
/// let req = http::Request::get("/acme/items").body(()).unwrap();
/// assert_eq!(Tenant.extract(RequestHead::from(&req)).as_deref(), Some("acme"));
/// ```
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key type, as the limiter looks it up (`KeyedRateLimiter<Self::Key>`).
    type Key: Send + Sync + 'static;

    /// The request's key, or `None` if it has no usable one.
    fn extract(&self, head: RequestHead<'_>) -> Option<Self::Key>;

    /// The key of the bucket that requests with no usable key share, when the layer is not
    /// told otherwise ([`MissingKey`]); `None` (the default) makes such requests refused
    /// with 400 Bad Request.
    fn shared_key(&self) -> Option<Self::Key> {
        None
    }
}

/// What the layer does with a request whose key cannot be extracted.
///
/// # Examples
///
/// ```
/// use http::StatusCode;
/// use limitcore_tower::MissingKey;
/// use std::net::IpAddr;
///
/// let refuse: MissingKey<IpAddr> = MissingKey::Reject(StatusCode::FORBIDDEN);
/// let share = MissingKey::Shared("0.0.0.0".parse::<IpAddr>().unwrap());
/// assert_ne!(refuse, share);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MissingKey<K> {
    /// Charge the request to this key: every request without a key shares its bucket.
    Shared(K),
    /// Refuse the request with this status (no `Retry-After`: waiting does not help).
    Reject(StatusCode),
}

/// One key for every request: the limit is global. Never missing.
///
/// # Examples
///
/// ```
/// use limitcore_tower::{GlobalKey, KeyExtractor, RequestHead};
/// let req = http::Request::new(());
/// assert_eq!(GlobalKey.extract(RequestHead::from(&req)), Some(()));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct GlobalKey;

impl KeyExtractor for GlobalKey {
    type Key = ();

    #[inline]
    fn extract(&self, _head: RequestHead<'_>) -> Option<()> {
        Some(())
    }

    fn shared_key(&self) -> Option<()> {
        Some(())
    }
}

/// The value of a request header (an API key, a tenant id) as the key, compared byte for
/// byte. The value is kept as a [`HeaderValue`] (a reference-counted copy, no allocation
/// per request).
///
/// No usable key when the header is absent, appears more than once (which one would be
/// the client's?), is empty, or is longer than the maximum length (default 256 bytes, so
/// that keys cannot grow the limiter's memory by more than that each). The default answer
/// is the shared bucket of the empty value.
///
/// # Examples
///
/// ```
/// use limitcore_tower::{HeaderKey, KeyExtractor, RequestHead};
///
/// let by_api_key = HeaderKey::new(http::HeaderName::from_static("x-api-key"));
/// let req = http::Request::get("/").header("x-api-key", "k-123").body(()).unwrap();
/// assert_eq!(by_api_key.extract(RequestHead::from(&req)).unwrap(), "k-123");
/// ```
#[derive(Debug, Clone)]
pub struct HeaderKey {
    name: HeaderName,
    max_len: usize,
}

impl HeaderKey {
    /// Keys by the header `name`, values of at most 256 bytes.
    pub fn new(name: HeaderName) -> Self {
        HeaderKey { name, max_len: 256 }
    }

    /// The same with values of at most `max_len` bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::{HeaderKey, KeyExtractor, RequestHead};
    ///
    /// let short = HeaderKey::new(http::HeaderName::from_static("x-api-key")).with_max_len(8);
    /// let req = http::Request::get("/").header("x-api-key", "a-very-long-key").body(()).unwrap();
    /// assert_eq!(short.extract(RequestHead::from(&req)), None); // too long: the missing-key answer
    /// ```
    pub fn with_max_len(mut self, max_len: usize) -> Self {
        self.max_len = max_len;
        self
    }
}

impl KeyExtractor for HeaderKey {
    type Key = HeaderValue;

    #[inline]
    fn extract(&self, head: RequestHead<'_>) -> Option<HeaderValue> {
        let mut values = head.headers().get_all(&self.name).into_iter();
        let value = values.next()?;
        if values.next().is_some() || value.is_empty() || value.len() > self.max_len {
            return None;
        }
        Some(value.clone())
    }

    fn shared_key(&self) -> Option<HeaderValue> {
        Some(HeaderValue::from_static(""))
    }
}

/// A closure as the extractor: `Fn(RequestHead<'_>) -> Option<K>`. No shared key: requests
/// for which it returns `None` are refused with 400 Bad Request unless the layer is given a
/// [`MissingKey::Shared`] key.
///
/// # Examples
///
/// ```
/// use limitcore_tower::{FnKey, KeyExtractor, RequestHead};
///
/// let by_method = FnKey::new(|head: RequestHead<'_>| Some(head.method().clone()));
/// let req = http::Request::post("/").body(()).unwrap();
/// assert_eq!(by_method.extract(RequestHead::from(&req)), Some(http::Method::POST));
/// ```
#[derive(Clone)]
pub struct FnKey<F> {
    f: F,
}

impl<F> FnKey<F> {
    /// Keys by `f`.
    pub fn new(f: F) -> Self {
        FnKey { f }
    }
}

impl<F> fmt::Debug for FnKey<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnKey").finish_non_exhaustive()
    }
}

impl<F, K> KeyExtractor for FnKey<F>
where
    F: Fn(RequestHead<'_>) -> Option<K> + Send + Sync + 'static,
    K: Send + Sync + 'static,
{
    type Key = K;

    #[inline]
    fn extract(&self, head: RequestHead<'_>) -> Option<K> {
        (self.f)(head)
    }
}
