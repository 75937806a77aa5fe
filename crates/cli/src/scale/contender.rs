//! The contenders of `limitcore bench`: limitcore's limiters, their peers from other crates,
//! and the floor (a bare atomic add), each with the peer its ratio is taken against.

use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// One contender: the operation a point of `limitcore bench` repeats on every thread, on
/// one limiter (or word) shared by the point's threads.
///
/// Its command-line name is [`Contender::name`] (`"gcra"`, `"keyed-hot"`, …), parsed back by
/// [`FromStr`].
///
/// # Examples
///
/// ```
/// use limitcore_cli::scale::{Contender, Role};
///
/// let keyed: Contender = "keyed-hot".parse()?;
/// assert_eq!(keyed, Contender::KeyedHot);
/// assert_eq!(keyed.role(), Role::Limitcore);
/// assert_eq!(keyed.peer(), Some(Contender::GovernorKeyedHot));
/// assert!("gcr".parse::<Contender>().unwrap_err().to_string().contains("gcra, token-bucket"));
/// # Ok::<(), limitcore_cli::scale::UnknownContender>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Contender {
    /// `limitcore::Gcra::try_acquire`.
    Gcra,
    /// `limitcore::TokenBucket::try_acquire`.
    TokenBucket,
    /// `limitcore::FixedWindow::try_acquire`.
    FixedWindow,
    /// `limitcore::SlidingWindow::try_acquire` (per-CPU shards).
    SlidingWindow,
    /// `limitcore::Budget::try_acquire_n(1)`.
    Budget,
    /// `limitcore::Counted<Gcra>::try_acquire` (the core's per-CPU counters around GCRA).
    CountedGcra,
    /// `limitcore::Keyed<u64, GcraRule>::try_acquire`, every thread on one key.
    KeyedHot,
    /// `limitcore::Keyed<u64, GcraRule>::try_acquire`, keys drawn uniformly from
    /// [`SPREAD_KEYS`], all present before the point.
    KeyedSpread,
    /// `limitcore::Keyed<u64, GcraRule, _, PapayaStore<u64>>::try_acquire`, every thread on
    /// one key: [`Contender::KeyedHot`] on papaya's map instead of the default
    /// `DashMapStore`.
    KeyedHotPapaya,
    /// `limitcore::Keyed<u64, GcraRule, _, PapayaStore<u64>>::try_acquire`, keys as in
    /// [`Contender::KeyedSpread`]: that contender on papaya's map instead of the default
    /// `DashMapStore`.
    KeyedSpreadPapaya,
    /// `limitcore::concurrency::Permits::try_acquire(1)` and the permit's drop (its release).
    Permits,
    /// governor's direct limiter, `check`.
    Governor,
    /// governor's keyed limiter, `check_key`, every thread on one key (the peer of
    /// [`Contender::KeyedHot`] and [`Contender::KeyedHotPapaya`]).
    GovernorKeyedHot,
    /// governor's keyed limiter, `check_key`, keys as in [`Contender::KeyedSpread`] (the peer
    /// of [`Contender::KeyedSpread`] and [`Contender::KeyedSpreadPapaya`]).
    GovernorKeyedSpread,
    /// tokio's `Semaphore::try_acquire` and the permit's drop.
    TokioSemaphore,
    /// leaky-bucket's `RateLimiter::try_acquire(1)`.
    LeakyBucket,
    /// `AtomicU64::fetch_add(1, Relaxed)` on one word shared by every thread: the floor of a
    /// one-word limiter (called the way every contender is: the harness's floor).
    FetchAddShared,
    /// `AtomicU64::fetch_add(1, Relaxed)` on the thread's own cache-padded word: the floor of
    /// a per-CPU one.
    FetchAddPerThread,
}

/// How many keys [`Contender::KeyedSpread`], [`Contender::KeyedSpreadPapaya`] and
/// [`Contender::GovernorKeyedSpread`] spread over: 10^5.
pub const SPREAD_KEYS: u64 = 100_000;

/// What a contender is in the report: one of limitcore's, a peer it is compared with, or
/// the floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// One of limitcore's limiters; its ratio is taken against [`Contender::peer`].
    Limitcore,
    /// Another crate's limiter, the reference of a limitcore contender's ratio.
    Peer,
    /// A bare atomic add, no limiter: what the hardware does on one word (or one per thread).
    Floor,
}

/// The quota a point runs under: every decision admitted, every decision refused, or no
/// quota at all (the floor).
///
/// Serialised as `"admitting"`, `"refusing"` and `"none"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QuotaKind {
    /// A quota far above what any machine can ask of one limiter: 10^9 a second with a
    /// burst of 10^6 (or the limiter's nearest valid one; see [`QuotaKind::describe`]).
    Admitting,
    /// One permit an hour, taken before the point: every decision of the point is refused.
    Refusing,
    /// The floor's: no limiter, no decision.
    None,
}

impl QuotaKind {
    /// The name in the report: `"admitting"`, `"refusing"` or `"none"`.
    pub fn name(self) -> &'static str {
        match self {
            QuotaKind::Admitting => "admitting",
            QuotaKind::Refusing => "refusing",
            QuotaKind::None => "none",
        }
    }

    /// What the quota is for each contender, in a sentence.
    pub fn describe(self) -> &'static str {
        match self {
            QuotaKind::Admitting => {
                "10^9/s burst 10^6 (fixed-window 5*10^8/s; sliding-window 16*10^6 per 20 ms, \
                 its largest count; leaky-bucket 10^6 per ms, max 10^6; permits and \
                 tokio-semaphore 2^20 permits, never full): every decision admitted"
            }
            QuotaKind::Refusing => {
                "1/hour, its permit taken before the point (permits and tokio-semaphore: a \
                 limit of 1, held through the point): every decision refused"
            }
            QuotaKind::None => "no limiter: a bare atomic add",
        }
    }
}

impl fmt::Display for QuotaKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A contender name that `limitcore bench` does not know; its message lists the names it
/// does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownContender(pub String);

impl fmt::Display for UnknownContender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Contender::ALL.iter().map(|c| c.name()).collect();
        write!(
            f,
            "unknown contender {:?}; the contenders are: {}",
            self.0,
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownContender {}

impl Contender {
    /// Every contender, in the report's order: limitcore's, the peers, the floor.
    pub const ALL: [Contender; 18] = [
        Contender::Gcra,
        Contender::TokenBucket,
        Contender::FixedWindow,
        Contender::SlidingWindow,
        Contender::Budget,
        Contender::CountedGcra,
        Contender::KeyedHot,
        Contender::KeyedSpread,
        Contender::KeyedHotPapaya,
        Contender::KeyedSpreadPapaya,
        Contender::Permits,
        Contender::Governor,
        Contender::GovernorKeyedHot,
        Contender::GovernorKeyedSpread,
        Contender::TokioSemaphore,
        Contender::LeakyBucket,
        Contender::FetchAddShared,
        Contender::FetchAddPerThread,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Contender::Gcra => "gcra",
            Contender::TokenBucket => "token-bucket",
            Contender::FixedWindow => "fixed-window",
            Contender::SlidingWindow => "sliding-window",
            Contender::Budget => "budget",
            Contender::CountedGcra => "counted-gcra",
            Contender::KeyedHot => "keyed-hot",
            Contender::KeyedSpread => "keyed-spread",
            Contender::KeyedHotPapaya => "keyed-hot-papaya",
            Contender::KeyedSpreadPapaya => "keyed-spread-papaya",
            Contender::Permits => "permits",
            Contender::Governor => "governor",
            Contender::GovernorKeyedHot => "governor-keyed-hot",
            Contender::GovernorKeyedSpread => "governor-keyed-spread",
            Contender::TokioSemaphore => "tokio-semaphore",
            Contender::LeakyBucket => "leaky-bucket",
            Contender::FetchAddShared => "fetch-add-shared",
            Contender::FetchAddPerThread => "fetch-add-per-thread",
        }
    }

    /// The call each thread repeats, as the report states it.
    pub fn operation(self) -> &'static str {
        match self {
            Contender::Gcra => "limitcore::Gcra::try_acquire()",
            Contender::TokenBucket => "limitcore::TokenBucket::try_acquire()",
            Contender::FixedWindow => "limitcore::FixedWindow::try_acquire()",
            Contender::SlidingWindow => "limitcore::SlidingWindow::try_acquire() (per-CPU)",
            Contender::Budget => "limitcore::Budget::try_acquire_n(1)",
            Contender::CountedGcra => "limitcore::Counted<Gcra>::try_acquire()",
            Contender::KeyedHot => "limitcore::Keyed<u64, GcraRule>::try_acquire(&7): one key",
            Contender::KeyedSpread => {
                "limitcore::Keyed<u64, GcraRule>::try_acquire(&k): k uniform over 10^5 keys"
            }
            Contender::KeyedHotPapaya => {
                "limitcore::Keyed<u64, GcraRule, _, PapayaStore>::try_acquire(&7): one key"
            }
            Contender::KeyedSpreadPapaya => {
                "limitcore::Keyed<u64, GcraRule, _, PapayaStore>::try_acquire(&k): k as \
                 keyed-spread"
            }
            Contender::Permits => "limitcore::concurrency::Permits::try_acquire(1) + drop",
            Contender::Governor => "governor 0.10 RateLimiter::direct(..).check()",
            Contender::GovernorKeyedHot => "governor 0.10 RateLimiter::keyed(..).check_key(&7)",
            Contender::GovernorKeyedSpread => {
                "governor 0.10 RateLimiter::keyed(..).check_key(&k): k as keyed-spread"
            }
            Contender::TokioSemaphore => "tokio::sync::Semaphore::try_acquire() + drop",
            Contender::LeakyBucket => "leaky-bucket 1.1 RateLimiter::try_acquire(1)",
            Contender::FetchAddShared => "AtomicU64::fetch_add(1, Relaxed), one shared word",
            Contender::FetchAddPerThread => {
                "AtomicU64::fetch_add(1, Relaxed), each thread its own cache-padded word"
            }
        }
    }

    /// Whether it is limitcore's, a peer or the floor.
    pub fn role(self) -> Role {
        match self {
            Contender::Gcra
            | Contender::TokenBucket
            | Contender::FixedWindow
            | Contender::SlidingWindow
            | Contender::Budget
            | Contender::CountedGcra
            | Contender::KeyedHot
            | Contender::KeyedSpread
            | Contender::KeyedHotPapaya
            | Contender::KeyedSpreadPapaya
            | Contender::Permits => Role::Limitcore,
            Contender::Governor
            | Contender::GovernorKeyedHot
            | Contender::GovernorKeyedSpread
            | Contender::TokioSemaphore
            | Contender::LeakyBucket => Role::Peer,
            Contender::FetchAddShared | Contender::FetchAddPerThread => Role::Floor,
        }
    }

    /// The peer a limitcore contender's ratio is taken against (in the same run, at the same
    /// thread count and quota kind); `None` for the peers and the floor.
    ///
    /// The unkeyed limiters and `Counted<Gcra>` against governor's direct limiter; the keyed
    /// ones (on either store) against governor's keyed limiter on the same keys; `Budget`
    /// against leaky-bucket (the budgets' peer in the storage engines' world, as in
    /// `benches/budget.rs`); `Permits` against tokio's `Semaphore`.
    pub fn peer(self) -> Option<Contender> {
        match self {
            Contender::Gcra
            | Contender::TokenBucket
            | Contender::FixedWindow
            | Contender::SlidingWindow
            | Contender::CountedGcra => Some(Contender::Governor),
            Contender::Budget => Some(Contender::LeakyBucket),
            Contender::KeyedHot | Contender::KeyedHotPapaya => Some(Contender::GovernorKeyedHot),
            Contender::KeyedSpread | Contender::KeyedSpreadPapaya => {
                Some(Contender::GovernorKeyedSpread)
            }
            Contender::Permits => Some(Contender::TokioSemaphore),
            _ => None,
        }
    }

    /// The quota kinds it runs under: admitting and refusing, or none for the floor.
    pub fn quota_kinds(self) -> &'static [QuotaKind] {
        match self.role() {
            Role::Floor => &[QuotaKind::None],
            Role::Limitcore | Role::Peer => &[QuotaKind::Admitting, QuotaKind::Refusing],
        }
    }
}

impl fmt::Display for Contender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Contender {
    type Err = UnknownContender;

    /// A contender by its [`Contender::name`] (surrounding blanks ignored).
    ///
    /// # Errors
    ///
    /// [`UnknownContender`] for any other text; its message lists every name.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        Contender::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| UnknownContender(s.to_owned()))
    }
}

impl Serialize for Contender {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_every_limitcore_contender_has_a_peer() {
        for c in Contender::ALL {
            assert_eq!(c.name().parse::<Contender>(), Ok(c));
            assert_eq!(c.peer().is_some(), c.role() == Role::Limitcore, "{c}");
            if let Some(peer) = c.peer() {
                assert_eq!(peer.role(), Role::Peer);
            }
        }
        let err = "nope".parse::<Contender>().unwrap_err().to_string();
        for c in Contender::ALL {
            assert!(err.contains(c.name()), "{err}");
        }
    }

    #[test]
    fn the_papaya_keyed_contenders_parse_and_share_the_default_stores_peers() {
        for (name, contender, sibling, peer) in [
            (
                "keyed-hot-papaya",
                Contender::KeyedHotPapaya,
                Contender::KeyedHot,
                Contender::GovernorKeyedHot,
            ),
            (
                "keyed-spread-papaya",
                Contender::KeyedSpreadPapaya,
                Contender::KeyedSpread,
                Contender::GovernorKeyedSpread,
            ),
        ] {
            let parsed: Contender = name.parse().unwrap();
            assert_eq!(parsed, contender);
            assert_eq!(parsed.name(), name);
            assert_eq!(parsed.role(), Role::Limitcore);
            assert_eq!(parsed.peer(), Some(peer));
            assert_eq!(parsed.peer(), sibling.peer());
            assert_eq!(parsed.quota_kinds(), sibling.quota_kinds());
            assert!(parsed.operation().contains("PapayaStore"), "{parsed}");
            // Right after their default-store siblings' pair, in the report's order.
            let at = |c| Contender::ALL.iter().position(|&x| x == c).unwrap();
            assert_eq!(at(contender), at(sibling) + 2);
        }
        assert_eq!(
            " keyed-spread-papaya ".parse::<Contender>(),
            Ok(Contender::KeyedSpreadPapaya)
        );
        assert!("keyed-papaya".parse::<Contender>().is_err());
    }
}
