//! [`Algorithm`]: the algorithms by name, to pick one from text (a command line, a
//! configuration file) and build it.

use crate::quota::Quota;
use crate::rules::{
    FixedWindowRule, GcraRule, LeakyBucketRule, QuotaRule, SlidingWindowRule, TokenBucketRule,
};
use alloc::string::String;
#[cfg(feature = "keyed")]
use core::borrow::Borrow;
use core::fmt;
#[cfg(feature = "keyed")]
use core::hash::Hash;
use core::str::FromStr;
#[cfg(feature = "std")]
use {
    crate::clock::Clock,
    crate::limiter::Refund,
    crate::limiters::{Limiter, SlidingWindow},
    crate::quota::QuotaError,
    crate::rules::SlidingLogRule,
    alloc::boxed::Box,
};
#[cfg(feature = "keyed")]
use {crate::keyed::Keyed, crate::limiter::KeyedRefund};

/// The rate-limiting algorithms of the crate, by name: parse one from text (`"gcra"`,
/// `"token-bucket"`, `"fixed-window"`, `"sliding-window"`, `"sliding-log"`,
/// `"leaky-bucket"`), build it for a [`Quota`] as a limiter ([`Algorithm::limiter`]) or one
/// per key ([`Algorithm::keyed`]), and read the bound it promises ([`Algorithm::bound`]).
///
/// # Examples
///
/// ```
/// use limitcore::{Algorithm, Quota, RateLimiter};
/// use limitcore::clock::ManualClock;
///
/// let algorithm: Algorithm = "sliding-log".parse()?;
/// let quota: Quota = "3/s".parse()?;
/// let limiter = algorithm.limiter(quota, ManualClock::new())?;
/// assert!(limiter.try_acquire_n(3).is_ok());
/// assert!(limiter.try_acquire().is_err());
/// assert_eq!(algorithm.bound(&quota).permits, 3); // at most 3 in any window of 1 s
/// assert!("gcra2".parse::<Algorithm>().is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Algorithm {
    /// [`Gcra`](crate::Gcra) ([`GcraRule`]).
    Gcra,
    /// [`TokenBucket`](crate::TokenBucket) ([`TokenBucketRule`]).
    TokenBucket,
    /// [`FixedWindow`](crate::FixedWindow) ([`FixedWindowRule`]).
    FixedWindow,
    /// [`SlidingWindow`](crate::SlidingWindow) (per-CPU) as a limiter, [`SlidingWindowRule`] per key.
    SlidingWindow,
    /// [`SlidingLog`][crate::SlidingLog] ([`SlidingLogRule`]).
    SlidingLog,
    /// [`LeakyBucket`](crate::LeakyBucket) ([`LeakyBucketRule`]): a request must be able to
    /// start at once.
    LeakyBucket,
}

/// What an algorithm promises about one limiter (or one key): at most `permits` admitted
/// in any window of the quota's period (`aligned == false`), or in each aligned window
/// `[k·period, (k+1)·period)` (`aligned == true`).
///
/// # Examples
///
/// ```
/// use limitcore::{Algorithm, Quota};
///
/// let q: Quota = "10/s burst 5".parse()?;
/// let b = Algorithm::Gcra.bound(&q);
/// assert_eq!((b.permits, b.aligned), (14, false)); // count + burst − 1
/// assert_eq!(b.statement, "count + burst - 1 in any window");
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Bound {
    /// The most permits admitted per window.
    pub permits: u64,
    /// Aligned windows (`true`) or any window (`false`) of the quota's period.
    pub aligned: bool,
    /// The rule, in words.
    pub statement: &'static str,
}

/// A name that is not an [`Algorithm`]'s.
///
/// # Examples
///
/// ```
/// use limitcore::Algorithm;
/// let err = "leaky".parse::<Algorithm>().unwrap_err();
/// assert!(err.to_string().contains("leaky-bucket"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownAlgorithm(pub String);

impl fmt::Display for UnknownAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown algorithm {:?}; expected one of ", self.0)?;
        for (i, a) in Algorithm::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(a.name())?;
        }
        Ok(())
    }
}

#[cfg(feature = "std")]
impl std::error::Error for UnknownAlgorithm {}

impl Algorithm {
    /// Every algorithm, in the order of the crate's reports.
    pub const ALL: [Algorithm; 6] = [
        Algorithm::Gcra,
        Algorithm::TokenBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
        Algorithm::LeakyBucket,
    ];

    /// The name in text form (`"gcra"`, `"token-bucket"`, …); [`FromStr`] reads it back.
    pub const fn name(self) -> &'static str {
        match self {
            Algorithm::Gcra => "gcra",
            Algorithm::TokenBucket => "token-bucket",
            Algorithm::FixedWindow => "fixed-window",
            Algorithm::SlidingWindow => "sliding-window",
            Algorithm::SlidingLog => "sliding-log",
            Algorithm::LeakyBucket => "leaky-bucket",
        }
    }

    /// What the algorithm promises for one limiter (or key) under `quota`.
    pub fn bound(self, quota: &Quota) -> Bound {
        let (count, burst) = (u64::from(quota.count()), u64::from(quota.burst()));
        let (permits, aligned, statement) = match self {
            // τ = (burst − 1)·T of slack on top of one permit per T.
            Algorithm::Gcra | Algorithm::TokenBucket => {
                (count + burst - 1, false, "count + burst - 1 in any window")
            }
            Algorithm::FixedWindow => (count, true, "count per aligned window"),
            // Any window of length period meets at most two aligned windows; the formula
            // admits at most count in the later one minus what it still counts of the earlier.
            Algorithm::SlidingWindow => (
                2 * count - 1,
                false,
                "2 count - 1 in any window (the formula's error budget)",
            ),
            Algorithm::SlidingLog => (count, false, "count in any window (exact)"),
            // A request that must start at once is admitted only when the queue has drained:
            // admissions are at least one emission interval apart.
            Algorithm::LeakyBucket => (
                count,
                false,
                "count in any window (one per emission interval)",
            ),
        };
        Bound {
            permits,
            aligned,
            statement,
        }
    }

    /// Run `code` for this algorithm's rule: [`GcraRule`], [`TokenBucketRule`],
    /// [`FixedWindowRule`], [`SlidingWindowRule`] (the exact formula on one word, as
    /// `Keyed` runs it per key), [`SlidingLogRule`] (with `std`), [`LeakyBucketRule`].
    /// [`WithRule`] has an example.
    ///
    /// # Panics
    ///
    /// For [`Algorithm::SlidingLog`] without the `std` feature (its state needs a lock).
    pub fn with_rule<W: WithRule>(self, code: W) -> W::Output {
        match self {
            Algorithm::Gcra => code.run::<GcraRule>(),
            Algorithm::TokenBucket => code.run::<TokenBucketRule>(),
            Algorithm::FixedWindow => code.run::<FixedWindowRule>(),
            Algorithm::SlidingWindow => code.run::<SlidingWindowRule>(),
            #[cfg(feature = "std")]
            Algorithm::SlidingLog => code.run::<SlidingLogRule>(),
            #[cfg(not(feature = "std"))]
            Algorithm::SlidingLog => panic!("the sliding log needs the `std` feature"),
            Algorithm::LeakyBucket => code.run::<LeakyBucketRule>(),
        }
    }

    /// A fresh limiter of this algorithm for `quota`, reading time from `clock`: for
    /// [`Algorithm::SlidingWindow`] the per-CPU [`SlidingWindow`], for the others the
    /// [`Limiter`] of their rule.
    ///
    /// # Errors
    ///
    /// The algorithm's [`QuotaError`] for this quota (see each rule's `new`); the window
    /// algorithms refuse a burst other than the count ([`QuotaError::BurstNotSupported`]).
    #[cfg(feature = "std")]
    #[cfg_attr(docsrs, doc(cfg(feature = "std")))]
    pub fn limiter<C: Clock + 'static>(
        self,
        quota: Quota,
        clock: C,
    ) -> Result<Box<dyn Refund>, QuotaError> {
        Ok(match self {
            Algorithm::Gcra => Box::new(Limiter::<GcraRule, C>::with_clock(quota, clock)?),
            Algorithm::TokenBucket => {
                Box::new(Limiter::<TokenBucketRule, C>::with_clock(quota, clock)?)
            }
            Algorithm::FixedWindow => {
                Box::new(Limiter::<FixedWindowRule, C>::with_clock(quota, clock)?)
            }
            Algorithm::SlidingWindow => Box::new(SlidingWindow::with_clock(quota, clock)?),
            Algorithm::SlidingLog => {
                Box::new(Limiter::<SlidingLogRule, C>::with_clock(quota, clock)?)
            }
            Algorithm::LeakyBucket => {
                Box::new(Limiter::<LeakyBucketRule, C>::with_clock(quota, clock)?)
            }
        })
    }

    /// One limiter of this algorithm per key ([`Keyed`] with the algorithm's rule), looked
    /// up by `&Q` and stored under `Q`'s owned form (`keyed::<str, _>` keeps `String`s).
    ///
    /// # Errors
    ///
    /// As [`Algorithm::limiter`].
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::{Algorithm, KeyedRateLimiter, Quota};
    /// use limitcore::clock::ManualClock;
    ///
    /// let per_client = Algorithm::TokenBucket.keyed::<str, _>("2/s".parse()?, ManualClock::new(), None)?;
    /// assert!(per_client.try_acquire_n("10.0.0.1", 2).is_ok());
    /// assert!(per_client.try_acquire("10.0.0.1").is_err());
    /// assert!(per_client.try_acquire("10.0.0.2").is_ok());
    /// # Ok::<(), limitcore::QuotaError>(())
    /// ```
    #[cfg(feature = "keyed")]
    #[cfg_attr(docsrs, doc(cfg(feature = "keyed")))]
    pub fn keyed<Q, C>(
        self,
        quota: Quota,
        clock: C,
        max_keys: Option<usize>,
    ) -> Result<Box<dyn KeyedRefund<Q>>, QuotaError>
    where
        Q: Hash + Eq + ToOwned + ?Sized + 'static,
        Q::Owned: Borrow<Q> + Hash + Eq + Send + Sync + 'static,
        C: Clock + 'static,
    {
        struct Build<Q: ?Sized, C> {
            quota: Quota,
            clock: C,
            max_keys: Option<usize>,
            _key: core::marker::PhantomData<fn(&Q)>,
        }
        impl<Q, C> WithRule for Build<Q, C>
        where
            Q: Hash + Eq + ToOwned + ?Sized + 'static,
            Q::Owned: Borrow<Q> + Hash + Eq + Send + Sync + 'static,
            C: Clock + 'static,
        {
            type Output = Result<Box<dyn KeyedRefund<Q>>, QuotaError>;
            fn run<R: QuotaRule>(self) -> Self::Output {
                let keyed = Keyed::<Q::Owned, R, C>::with_clock(self.quota, self.clock)?;
                Ok(Box::new(match self.max_keys {
                    Some(max) => keyed.with_max_keys(max),
                    None => keyed,
                }))
            }
        }
        self.with_rule(Build::<Q, C> {
            quota,
            clock,
            max_keys,
            _key: core::marker::PhantomData,
        })
    }
}

/// Code generic over the rule, run for the rule an [`Algorithm`] names
/// ([`Algorithm::with_rule`]): dispatch on the algorithm once, then monomorphic code.
///
/// # Examples
///
/// ```
/// use limitcore::{Algorithm, Quota, QuotaError, WithRule};
/// use limitcore::rules::Rule;
///
/// /// The capacity the algorithm's rule gives a quota.
/// struct Capacity(Quota);
/// impl WithRule for Capacity {
///     type Output = Result<u32, QuotaError>;
///     fn run<R: Rule>(self) -> Self::Output {
///         Ok(R::new(&self.0)?.capacity())
///     }
/// }
/// let q: Quota = "10/s burst 4".parse()?;
/// assert_eq!(Algorithm::Gcra.with_rule(Capacity(q))?, 4);
/// assert!(Algorithm::FixedWindow.with_rule(Capacity(q)).is_err()); // a window has no burst
/// # Ok::<(), QuotaError>(())
/// ```
pub trait WithRule {
    /// What the generic code returns.
    type Output;

    /// The code, for the rule `R` (every algorithm's rule is a [`QuotaRule`]: an
    /// implementation may ask for [`Rule`](crate::rules::Rule) only).
    fn run<R: QuotaRule>(self) -> Self::Output;
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = UnknownAlgorithm;

    /// The algorithm named `s` (surrounding spaces and ASCII case ignored).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim();
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| UnknownAlgorithm(String::from(name)))
    }
}
