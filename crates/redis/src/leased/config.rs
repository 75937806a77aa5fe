//! The leased mode's settings ([`LeaseConfig`]).

use std::time::Duration;

/// The leased mode's settings.
///
/// # Examples
///
/// ```
/// use limitcore_redis::LeaseConfig;
/// use std::time::Duration;
///
/// let config = LeaseConfig::new(16).target(Duration::from_millis(20));
/// assert_eq!(config.get_max_lease(), 16);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    pub(super) max_lease: u32,
    pub(super) max_debt: Duration,
    pub(super) target: Duration,
    pub(super) ttl: Duration,
    pub(super) prefix: String,
    pub(super) fair: bool,
}

impl LeaseConfig {
    /// Leases of at most `max_lease` cells (`L` of the bound; clamped to the burst and
    /// [`MAX_CELLS`](super::MAX_CELLS), at least 1), lasting about 50 ms each, expiring 1 s
    /// after they arrive, granted by fair shares ([`LeaseConfig::fair`]); no debt.
    pub fn new(max_lease: u32) -> Self {
        LeaseConfig {
            max_lease: max_lease.max(1),
            max_debt: Duration::ZERO,
            target: Duration::from_millis(50),
            ttl: Duration::from_secs(1),
            prefix: "lc:gcra:".to_owned(),
            fair: true,
        }
    }

    /// Store keys on Redis as `prefix` + key (default `lc:gcra:`,
    /// [`RedisGcra`](crate::RedisGcra)'s: a leased and an exact limiter of the same quota
    /// on the same key share one limit).
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The largest lease, `L` in the bound `GCRA + N·L`, in cells (permits).
    #[must_use]
    pub fn max_lease(mut self, max_lease: u32) -> Self {
        self.max_lease = max_lease.max(1);
        self
    }

    /// The debt policy of the key's limit on Redis
    /// ([`RedisGcra::with_max_debt`](crate::RedisGcra::with_max_debt)): up to `max_debt` of
    /// backlog beyond the burst (whole µs, rounded down). A request above the largest lease
    /// is then decided on Redis up to `⌊(burst·T + D)/T⌋` permits
    /// ([`LeasedLimiter::acquire`](super::LeasedLimiter::acquire)), and forced charges
    /// ([`LeasedLimiter::charge`](super::LeasedLimiter::charge)) may run the key's backlog
    /// that far. A lease itself never runs into debt, and never holds more than `L` cells.
    /// Zero (the default): no debt. `D` of the bound `B + ⌈(Δ + D)/T⌉ − 1 + N·L`.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_redis::LeaseConfig;
    /// use std::time::Duration;
    ///
    /// let config = LeaseConfig::new(16).max_debt(Duration::from_secs(2));
    /// assert_eq!(config.get_max_debt(), Duration::from_secs(2));
    /// ```
    #[must_use]
    pub fn max_debt(mut self, max_debt: Duration) -> Self {
        self.max_debt = max_debt;
        self
    }

    /// How long a lease should last at the node's own rate (its size is `rate × target`).
    #[must_use]
    pub fn target(mut self, target: Duration) -> Self {
        self.target = target;
        self
    }

    /// How long a lease's cells stay valid after it arrives; also how long a node's demand
    /// report counts it as live on the key for the fair shares ([`LeaseConfig::fair`]).
    ///
    /// # Panics
    ///
    /// If `ttl` is below 1 ms (the word's resolution).
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        assert!(
            ttl >= Duration::from_millis(1),
            "a lease must live at least 1 ms"
        );
        self.ttl = ttl;
        self
    }

    /// Whether leases are granted by max-min fair shares of the key's rate between the
    /// nodes that ask for it ([`fair`](crate::fair): each node reports its offered load
    /// with its requests, and gets no more than its share, lent what others leave), or
    /// first come, first served (`false`: a lease takes whatever conforms when it
    /// arrives, which under saturation starves some nodes). Either way every grant is
    /// charged to the key's GCRA and the fleet's bound `B + ⌈(Δ + D)/T⌉ − 1 + N·L` holds.
    /// Default: fair. Every node on a key should use the same setting: a node that asks
    /// first come, first served takes cells outside the shares.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_redis::LeaseConfig;
    ///
    /// assert!(LeaseConfig::new(16).get_fair());
    /// assert!(!LeaseConfig::new(16).fair(false).get_fair());
    /// ```
    #[must_use]
    pub fn fair(mut self, fair: bool) -> Self {
        self.fair = fair;
        self
    }

    /// Whether leases are granted by fair shares ([`LeaseConfig::fair`]).
    pub fn get_fair(&self) -> bool {
        self.fair
    }

    /// `L`, the largest lease, in cells (permits).
    pub fn get_max_lease(&self) -> u32 {
        self.max_lease
    }

    /// `D`, the maximum debt as given (zero: none).
    pub fn get_max_debt(&self) -> Duration {
        self.max_debt
    }
}

impl Default for LeaseConfig {
    /// `L = 16` (clamped to the burst), 50 ms leases, 1 s expiry, no debt.
    fn default() -> Self {
        LeaseConfig::new(16)
    }
}
