//! Keys by client address: the peer's ([`PeerIp`]) or the client's behind trusted proxies
//! ([`ForwardedIp`]), each cut to its network prefix ([`IpPrefix`]).

use super::{KeyExtractor, RequestHead};
use crate::forwarded::{entries_from_right, forwarded_for, parse_node};
use http::Extensions;
use http::header::FORWARDED;
use http::header::HeaderName;
use ipnet::IpNet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// How client addresses become keys: IPv4-mapped IPv6 addresses (`::ffff:192.0.2.1`) are
/// read as IPv4, then each address is cut to its network prefix, so that one host holding
/// a whole IPv6 block (a /64 is the smallest block an ISP assigns to a site, RFC 6177)
/// cannot mint fresh keys by changing its low bits.
///
/// Default: IPv4 /32 (every address its own key), IPv6 /64.
///
/// # Examples
///
/// ```
/// use limitcore_tower::IpPrefix;
/// use std::net::IpAddr;
///
/// let p = IpPrefix::default();
/// let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
/// let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
/// assert_eq!(p.key(a), p.key(b)); // one /64, one key
/// assert_eq!(p.key("::ffff:192.0.2.7".parse().unwrap()), "192.0.2.7".parse::<IpAddr>().unwrap());
/// assert_eq!(IpPrefix::new(24, 48).unwrap().key("192.0.2.7".parse().unwrap()),
///            "192.0.2.0".parse::<IpAddr>().unwrap());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpPrefix {
    v4: u8,
    v6: u8,
}

impl Default for IpPrefix {
    fn default() -> Self {
        IpPrefix { v4: 32, v6: 64 }
    }
}

impl IpPrefix {
    /// Keys by the first `v4` bits of IPv4 addresses and the first `v6` bits of IPv6 ones.
    ///
    /// # Errors
    ///
    /// [`InvalidPrefix`] if `v4 > 32` or `v6 > 128`.
    pub fn new(v4: u8, v6: u8) -> Result<Self, InvalidPrefix> {
        if v4 > 32 || v6 > 128 {
            return Err(InvalidPrefix { v4, v6 });
        }
        Ok(IpPrefix { v4, v6 })
    }

    /// The key of `ip`: its canonical form (IPv4-mapped IPv6 as IPv4) with the bits past
    /// the prefix cleared.
    #[inline]
    pub fn key(&self, ip: IpAddr) -> IpAddr {
        self.key_of_canonical(ip.to_canonical())
    }

    /// [`IpPrefix::key`] of an address already in canonical form.
    #[inline]
    fn key_of_canonical(&self, ip: IpAddr) -> IpAddr {
        // The lengths are at most 32 and 128 (checked by `new`): a shift by the bits past
        // the prefix, none past the whole width (a /0 keeps no bit).
        match ip {
            IpAddr::V4(v4) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.v4)).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from_bits(v4.to_bits() & mask))
            }
            IpAddr::V6(v6) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.v6)).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & mask))
            }
        }
    }
}

/// A prefix length out of range: IPv4 allows 0 to 32 bits, IPv6 0 to 128.
///
/// # Examples
///
/// ```
/// use limitcore_tower::IpPrefix;
/// assert!(IpPrefix::new(33, 64).unwrap_err().to_string().contains("33"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidPrefix {
    v4: u8,
    v6: u8,
}

impl fmt::Display for InvalidPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid prefix lengths /{} (IPv4, at most 32) and /{} (IPv6, at most 128)",
            self.v4, self.v6
        )
    }
}

impl std::error::Error for InvalidPrefix {}

/// The key every IP extractor charges requests with no usable address to, by default:
/// `0.0.0.0`, which no peer has and no forwarding header is read as.
pub const SHARED_IP_KEY: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

/// The TCP peer's address of the request, from its extensions: axum's
/// `ConnectInfo<SocketAddr>` (feature `axum`; serve with
/// `into_make_service_with_connect_info::<SocketAddr>()`), or a plain [`SocketAddr`] that
/// a hyper server inserts itself (`req.extensions_mut().insert(peer)`), looked up in that
/// order. The address is keyed by [`IpPrefix`].
///
/// No usable key when neither extension is present (a server set up without them) or the
/// address is unspecified; the default answer is the shared bucket [`SHARED_IP_KEY`].
///
/// Behind a reverse proxy every request has the proxy's address: use [`ForwardedIp`].
///
/// # Examples
///
/// ```
/// use limitcore_tower::{KeyExtractor, PeerIp, RequestHead};
/// use std::net::{IpAddr, SocketAddr};
///
/// let mut req = http::Request::new(());
/// req.extensions_mut().insert("[2001:db8::5]:4000".parse::<SocketAddr>().unwrap());
/// let key = PeerIp::new().extract(RequestHead::from(&req));
/// assert_eq!(key, Some("2001:db8::".parse::<IpAddr>().unwrap()));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct PeerIp {
    prefix: IpPrefix,
}

impl PeerIp {
    /// The peer address, IPv6 by /64.
    pub fn new() -> Self {
        PeerIp::default()
    }

    /// The same with other prefix lengths.
    pub fn with_prefix(mut self, prefix: IpPrefix) -> Self {
        self.prefix = prefix;
        self
    }
}

/// The peer's address from a request's extensions (see [`PeerIp`]), as it is.
///
/// # Examples
///
/// ```
/// use std::net::SocketAddr;
///
/// let mut req = http::Request::new(());
/// let peer: SocketAddr = "192.0.2.1:5000".parse().unwrap();
/// req.extensions_mut().insert(peer);
/// assert_eq!(limitcore_tower::peer_addr(req.extensions()), Some(peer));
/// ```
#[inline]
pub fn peer_addr(extensions: &Extensions) -> Option<SocketAddr> {
    #[cfg(feature = "axum")]
    if let Some(axum::extract::ConnectInfo(addr)) =
        extensions.get::<axum::extract::ConnectInfo<SocketAddr>>()
    {
        return Some(*addr);
    }
    extensions.get::<SocketAddr>().copied()
}

impl KeyExtractor for PeerIp {
    type Key = IpAddr;

    #[inline]
    fn extract(&self, head: RequestHead<'_>) -> Option<IpAddr> {
        let ip = peer_addr(head.extensions())?.ip().to_canonical();
        (!ip.is_unspecified()).then(|| self.prefix.key_of_canonical(ip))
    }

    fn shared_key(&self) -> Option<IpAddr> {
        Some(SHARED_IP_KEY)
    }
}

/// Which forwarding header [`ForwardedIp`] reads.
///
/// # Examples
///
/// ```
/// use limitcore_tower::ForwardHeader;
/// assert_ne!(ForwardHeader::XForwardedFor, ForwardHeader::Forwarded);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (de facto standard): each proxy appends the
    /// address it received the request from.
    XForwardedFor,
    /// `Forwarded: for=client, for=proxy1` (RFC 7239): the `for` parameter of each element.
    Forwarded,
}

/// Which proxies [`ForwardedIp`] believes.
///
/// # Examples
///
/// ```
/// use limitcore_tower::Trust;
/// let hops = Trust::Hops(1);
/// let nets = Trust::networks(["10.0.0.0/8", "2001:db8::/32"]).unwrap();
/// assert_ne!(hops, nets);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// Exactly this many trusted proxies stand in front of the server, each appending one
    /// entry: the client is the `n`-th entry from the right (`Hops(1)`: the rightmost, the
    /// one the single proxy appended). `Hops(0)` reads no header: the peer address.
    Hops(usize),
    /// Proxies whose addresses lie in these networks are trusted: the peer address must be
    /// one of them (else the header is ignored and the peer is the client), then the
    /// entries are read from the right, skipping trusted addresses, and the first untrusted
    /// one is the client. If every entry is trusted, the leftmost is the client (as nginx's
    /// `real_ip_recursive`).
    Networks(Vec<IpNet>),
}

impl Trust {
    /// [`Trust::Networks`] from CIDR text (`"10.0.0.0/8"`; a bare address is a /32 or /128).
    ///
    /// # Errors
    ///
    /// The first text that is neither a network nor an address.
    pub fn networks<'a>(cidrs: impl IntoIterator<Item = &'a str>) -> Result<Trust, String> {
        cidrs
            .into_iter()
            .map(|c| {
                c.parse::<IpNet>()
                    .or_else(|_| c.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| format!("not a network or address: {c:?}"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Trust::Networks)
    }

    fn trusts(nets: &[IpNet], ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        nets.iter().any(|n| n.contains(&ip))
    }
}

/// The client's address behind trusted reverse proxies, read from `X-Forwarded-For` or
/// `Forwarded` (RFC 7239) **from the right**: the leftmost entries are whatever the client
/// sent, so trusting them would let any client pick its own key (and a fresh budget per
/// request). The address is keyed by [`IpPrefix`].
///
/// Several field lines of the header are one list, in order (RFC 9110 §5.3). Entries may
/// carry a port (`192.0.2.1:80`, `[2001:db8::1]:80`); a `Forwarded` element's `for`
/// parameter may be quoted.
///
/// # No usable key
///
/// - [`Trust::Hops(n)`](Trust::Hops): fewer than `n` entries (the request did not come
///   through the proxies: it reached the server directly, or a proxy is missing), or the
///   `n`-th entry from the right is not an address (`unknown`, an obfuscated name, garbage,
///   an unspecified address). The answer never moves to another entry: that one could be
///   the client's own.
/// - [`Trust::Networks`]: no peer address; or an entry met while walking from the right
///   that is not an address (the walk stops there: what lies left of it is not vouched for).
/// - A `Forwarded` element with no or a repeated `for` parameter counts as an entry that is
///   not an address.
///
/// The default answer is the shared bucket [`SHARED_IP_KEY`].
///
/// # Examples
///
/// ```
/// use limitcore_tower::{ForwardHeader, ForwardedIp, KeyExtractor, RequestHead, Trust};
/// use std::net::IpAddr;
///
/// let behind_one_proxy = ForwardedIp::new(ForwardHeader::XForwardedFor, Trust::Hops(1));
/// let req = http::Request::get("/")
///     // The client wrote "6.6.6.6"; the proxy appended the address it saw.
///     .header("x-forwarded-for", "6.6.6.6, 192.0.2.9")
///     .body(()).unwrap();
/// let key = behind_one_proxy.extract(RequestHead::from(&req));
/// assert_eq!(key, Some("192.0.2.9".parse::<IpAddr>().unwrap()));
/// ```
#[derive(Debug, Clone)]
pub struct ForwardedIp {
    header: ForwardHeader,
    trust: Trust,
    prefix: IpPrefix,
}

impl ForwardedIp {
    /// The client address from `header`, believing the proxies `trust` names; IPv6 by /64.
    pub fn new(header: ForwardHeader, trust: Trust) -> Self {
        ForwardedIp {
            header,
            trust,
            prefix: IpPrefix::default(),
        }
    }

    /// The same with other prefix lengths.
    pub fn with_prefix(mut self, prefix: IpPrefix) -> Self {
        self.prefix = prefix;
        self
    }

    /// The client address as it is (before [`IpPrefix`]), or `None` (see "No usable key").
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_tower::{ForwardHeader, ForwardedIp, RequestHead, Trust};
    /// use std::net::{IpAddr, SocketAddr};
    ///
    /// let proxies = Trust::networks(["10.0.0.0/8"]).unwrap();
    /// let fwd = ForwardedIp::new(ForwardHeader::Forwarded, proxies);
    /// let mut req = http::Request::get("/")
    ///     .header("forwarded", "for=203.0.113.1, for=\"[2001:db8::77]:5000\", for=10.1.2.3")
    ///     .body(()).unwrap();
    /// req.extensions_mut().insert("10.0.0.1:443".parse::<SocketAddr>().unwrap()); // a proxy
    /// // From the right: 10.1.2.3 is a proxy, 2001:db8::77 is not: the client.
    /// let client = fwd.client_ip(RequestHead::from(&req));
    /// assert_eq!(client, Some("2001:db8::77".parse::<IpAddr>().unwrap()));
    /// ```
    pub fn client_ip(&self, head: RequestHead<'_>) -> Option<IpAddr> {
        match &self.trust {
            Trust::Hops(0) => peer_addr(head.extensions()).map(|a| a.ip()),
            Trust::Hops(n) => self.nodes_from_right(head).nth(n - 1).flatten(),
            Trust::Networks(nets) => {
                let peer = peer_addr(head.extensions())?.ip();
                if !Trust::trusts(nets, peer) {
                    return Some(peer);
                }
                let mut leftmost = None;
                for node in self.nodes_from_right(head) {
                    let ip = node?;
                    if !Trust::trusts(nets, ip) {
                        return Some(ip);
                    }
                    leftmost = Some(ip);
                }
                // Every entry trusted (or none at all: the trusted peer is the client).
                leftmost.or(Some(peer))
            }
        }
        .filter(|ip| !ip.to_canonical().is_unspecified())
    }

    /// The entries of the header, from the right, each parsed as a node (`None`: not an
    /// address).
    fn nodes_from_right<'a>(
        &self,
        head: RequestHead<'a>,
    ) -> impl Iterator<Item = Option<IpAddr>> + 'a {
        let header = self.header;
        let name: &HeaderName = match header {
            ForwardHeader::XForwardedFor => &X_FORWARDED_FOR,
            ForwardHeader::Forwarded => &FORWARDED,
        };
        entries_from_right(head.headers().get_all(name)).map(move |entry| match header {
            ForwardHeader::XForwardedFor => parse_node(entry),
            ForwardHeader::Forwarded => forwarded_for(entry).and_then(parse_node),
        })
    }
}

/// `X-Forwarded-For`, which `http` does not name.
static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

impl KeyExtractor for ForwardedIp {
    type Key = IpAddr;

    #[inline]
    fn extract(&self, head: RequestHead<'_>) -> Option<IpAddr> {
        self.client_ip(head).map(|ip| self.prefix.key(ip))
    }

    fn shared_key(&self) -> Option<IpAddr> {
        Some(SHARED_IP_KEY)
    }
}
