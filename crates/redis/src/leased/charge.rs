//! Forced charges ([`LeasedLimiter::charge`]), charges recorded as debt in the fleet
//! ([`LeasedLimiter::record`]), reservations settled to their actual cost
//! ([`LeasedLimiter::reserve`], [`LeasedLimiter::settle`]) and requests above the largest
//! lease ([`LeasedLimiter::acquire`] of `n > L`) on the leased path.

use super::{Entry, LeasedKey, LeasedLimiter};
use crate::policy::{ChargeVerdict, Source, Verdict};
use limitcore::clock::{Clock, Nanos};
use limitcore::{Charged, Decision, Denied, KeyedRateLimiter};
use std::sync::Arc;
use std::time::Duration;

impl<C: Clock + Clone + 'static> LeasedLimiter<C> {
    /// Charge `n` permits to `key`, never refused by the limit (usage measured after the
    /// work): the cells the node holds for the key are spent first (Redis charged them when
    /// it leased them), and the rest, if any, is charged on Redis in one script call
    /// ([`RedisGcra::charge`](crate::RedisGcra::charge): up to `burst·T + D` of backlog,
    /// the remainder reported as the shortfall).
    ///
    /// The verdict's source is [`Source::Lease`] when the held cells covered it,
    /// [`Source::Redis`] when Redis charged the rest, [`Source::Fallback`] when Redis could
    /// not and the outage policy decided what became of the rest ([`Policy`](crate::Policy),
    /// "Charges"). Its wait is the wait of a request for one permit: zero while cells are
    /// left; Redis's exact wait after a Redis charge (the node then blocks the key until
    /// that wait has passed, counted from the reply's arrival, as after a refused lease,
    /// and sends nothing meanwhile); the time left of a local block; and, when the charge
    /// spent the node's last cells and nothing blocks the key, the round-trip *estimate*
    /// ([`LeasedLimiter::rtt`]): the next lease is fetched at once, and its answer is not
    /// known yet.
    ///
    /// A charge adds nothing to the fleet's bound beyond what the debt does: the local part
    /// spends cells already counted, the Redis part is one of Redis's calls (the module's
    /// "The bound").
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{LeaseConfig, LeasedLimiter, Policy, Redis, RedisConfig};
    /// use std::time::Duration;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// // 1000 read units a second per tenant, 100 at once, 1 s of debt.
    /// let config = LeaseConfig::new(16).max_debt(Duration::from_secs(1));
    /// let reads = LeasedLimiter::new(redis, "1000/s burst 100".parse()?, config, Policy::FailLocal)?;
    /// let charge = reads.charge("tenant-7", 40).await; // units read, measured afterwards
    /// assert_eq!(charge.charged.charged + charge.charged.shortfall, 40);
    /// # Ok(()) }
    /// ```
    pub async fn charge(&self, key: &str, n: u32) -> ChargeVerdict {
        let entry = {
            let guard = self.inner.keys.pin();
            Arc::clone(self.entry(&guard, key))
        };
        self.charge_entry(&entry, key, n, Kind::Budget).await
    }

    /// Record `n` permits of usage known after the work (an LLM response's tokens) to
    /// `key` as debt in the fleet, never refused and never lost: the cells the node holds
    /// for the key are spent first (Redis charged them when it leased them), and the rest,
    /// if any, is recorded on Redis in one script call as [`RedisGcra::record`](crate::RedisGcra::record)
    /// records it (whole, past the burst and the maximum debt: only a backlog past 2^52 µs
    /// is short, and reported). When Redis cannot answer, the rest goes to the outage
    /// policy as a charge ([`Policy`](crate::Policy), "Charges"), its source says so.
    ///
    /// The verdict's wait, and the local block after a Redis record, are as
    /// [`LeasedLimiter::charge`]'s: once Redis says a request must wait, this node refuses
    /// the key locally until then, and sends nothing meanwhile. Other nodes learn of the
    /// debt when their next lease is refused; until then they spend the cells they hold,
    /// which the fleet's bound already counts (`N·L`, the module's "Charges recorded past
    /// the limit"). A request for no permits on the leased path is local and sees only
    /// this node's block, not the debt itself: the exact limiter
    /// ([`RedisGcra`](crate::RedisGcra)) answers a check of no cost by the debt.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{LeaseConfig, LeasedLimiter, Policy, Redis, RedisConfig};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let tokens = LeasedLimiter::new(redis, "10000/min".parse()?, LeaseConfig::new(500), Policy::FailLocal)?;
    /// let charge = tokens.record("tenant-7", 12_000).await; // past the whole burst
    /// assert_eq!(charge.charged.charged, 12_000);          // all of it, the rest as debt
    /// # Ok(()) }
    /// ```
    pub async fn record(&self, key: &str, n: u32) -> ChargeVerdict {
        let entry = {
            let guard = self.inner.keys.pin();
            Arc::clone(self.entry(&guard, key))
        };
        self.charge_entry(&entry, key, n, Kind::Record).await
    }

    /// Reserve `n` permits for `key` (an estimate of a cost known after the work), decided
    /// as [`LeasedLimiter::acquire`] decides `n` (waiting for a lease when the node holds
    /// none; a request above `L` on Redis), with the receipt that
    /// [`LeasedLimiter::settle`] settles on admission.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{LeaseConfig, LeasedLimiter, Policy, Redis, RedisConfig};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let tokens = LeasedLimiter::new(redis, "10000/min".parse()?, LeaseConfig::new(500), Policy::FailLocal)?;
    /// let (verdict, receipt) = tokens.reserve("tenant-7", 100).await;
    /// if let Some(receipt) = receipt {
    ///     let settled = tokens.settle("tenant-7", receipt, 140).await; // 40 past it
    ///     assert_eq!(settled.charged.charged + settled.charged.shortfall, 40);
    /// } else {
    ///     println!("429: {:?}", verdict.decision.retry_after());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn reserve(&self, key: &str, n: u32) -> (Verdict, Option<LeasedReceipt>) {
        let verdict = self.acquire(key, n).await;
        let receipt = verdict
            .decision
            .is_admitted()
            .then_some(LeasedReceipt { n });
        (verdict, receipt)
    }

    /// Settle the reservation `receipt` on `key` to its actual cost `actual`: above the
    /// estimate the excess is recorded as [`LeasedLimiter::record`] records it (the node's
    /// cells first, the rest on Redis as debt, never refused, never lost); at or below it
    /// nothing is given back: the reserved cells were charged on Redis when they were
    /// leased and, like every leased cell, are never refunded (a refund could create a
    /// permit under a race; letting them go cannot). The leased settle is so stricter than
    /// the exact one ([`RedisGcra::try_settle`](crate::RedisGcra::try_settle)) by at most
    /// the unused part of the estimate, never looser.
    ///
    /// The verdict is the excess charge's ([`ChargeVerdict`]; `charged` 0 with
    /// [`Source::Lease`] at or below the estimate, with the local wait of a request for one
    /// permit).
    pub async fn settle(&self, key: &str, receipt: LeasedReceipt, actual: u32) -> ChargeVerdict {
        let excess = actual.saturating_sub(receipt.n);
        if excess > 0 {
            return self.record(key, excess).await;
        }
        let now = self.inner.clock.now();
        let word = {
            let guard = self.inner.keys.pin();
            self.entry(&guard, key).word.load()
        };
        ChargeVerdict {
            charged: Charged {
                charged: 0,
                shortfall: 0,
                wait: self.local_wait(&word, now),
            },
            from_lease: 0,
            source: Source::Lease,
        }
    }

    /// [`LeasedLimiter::charge`] (a budget's charge) or [`LeasedLimiter::record`] (debt)
    /// on `key`'s `entry` (looked up, or pinned by a [`LeasedKey`]).
    pub(super) async fn charge_entry(
        &self,
        entry: &Arc<Entry>,
        key: &str,
        n: u32,
        kind: Kind,
    ) -> ChargeVerdict {
        let inner = &self.inner;
        let rule = inner.rule;
        let now = inner.clock.now();
        // The held cells first, in the core's compare-and-swap loop (nothing written when
        // none is held): the same word, and the same loop, as a decision's.
        let (local, word) = entry
            .word
            .update(|w| match rule.spend_up_to(w, now, n) {
                0 => Err((0, *w)),
                spent => Ok((spent, *w)),
            })
            .unwrap_or_else(|none| none);
        let rest = n - local;
        if rest == 0 {
            self.after_admission(entry, key, local, &word, now);
            let charged = Charged {
                charged: n,
                shortfall: 0,
                wait: self.local_wait(&word, now),
            };
            return ChargeVerdict {
                charged,
                from_lease: n,
                source: Source::Lease,
            };
        }
        let answer = match kind {
            Kind::Budget => inner.gcra.try_charge(key, rest).await,
            Kind::Record => inner.gcra.try_record(key, rest).await,
        };
        let remote = match answer {
            Ok(answer) => {
                let arrived = inner.clock.now();
                let wait = answer.charged.wait;
                if wait.is_zero() {
                    // Room left on Redis: the next decision needs a lease (this charge spent
                    // the cells held), so fetch it now.
                    self.refill(entry, key, arrived, true);
                } else {
                    // Redis refuses every lease until `wait` has passed (later calls only
                    // add to its backlog): block the key locally until then, counted from
                    // the reply's arrival, as after a refused lease.
                    let until = arrived.saturating_add(super::nanos(wait));
                    entry.block(&rule, arrived, until);
                }
                ChargeVerdict {
                    charged: answer.charged,
                    from_lease: 0,
                    source: Source::Redis {
                        server_time: answer.server_time,
                    },
                }
            }
            Err(_) => inner.gcra.charge_fallback(key, rest),
        };
        ChargeVerdict {
            charged: Charged {
                charged: local + remote.charged.charged,
                ..remote.charged
            },
            from_lease: local,
            source: remote.source,
        }
    }

    /// The wait of a request for one permit on `word` at `now`, as the charge reports it
    /// (see [`LeasedLimiter::charge`]).
    fn local_wait(&self, word: &u64, now: Nanos) -> Duration {
        let rule = &self.inner.rule;
        if rule.cells(word, now) > 0 {
            Duration::ZERO
        } else if let Some(until) = rule.blocked_until(word, now) {
            Duration::from_nanos(until - now)
        } else {
            self.rtt().max(Duration::from_micros(1))
        }
    }

    /// A request above the largest lease: decided on Redis by the exact script (one call,
    /// with the outage policy when Redis cannot answer), or refused here above the
    /// capacity.
    pub(super) async fn oversized(&self, key: &str, n: u32) -> Verdict {
        let gcra = &self.inner.gcra;
        let capacity = gcra.capacity();
        if n > capacity {
            let now = self.inner.clock.now();
            return Verdict {
                decision: Decision {
                    result: Err(Denied::ExceedsCapacity { capacity }),
                    state: KeyedRateLimiter::<str>::snapshot_at(self, key, now),
                },
                source: Source::Lease,
            };
        }
        gcra.decide(key, n).await
    }
}

impl<C: Clock + Clone + 'static> LeasedKey<C> {
    /// Charge `n` permits to the key: as [`LeasedLimiter::charge`] (the cells the node
    /// holds for the key first, then Redis), with no lookup.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{LeaseConfig, LeasedLimiter, Policy, Redis, RedisConfig, Source};
    /// use std::time::Duration;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// // An upstream's quota in bytes/ms of egress, shared by the fleet, 500 ms of debt.
    /// let config = LeaseConfig::new(64).max_debt(Duration::from_millis(500));
    /// let egress = LeasedLimiter::new(redis, "1000/s burst 200".parse()?, config, Policy::FailLocal)?;
    /// let upstream = egress.key("upstream");
    /// let charge = upstream.charge(120).await; // measured after the response was sent
    /// if charge.source == Source::Lease {
    ///     assert_eq!(charge.from_lease, 120); // the node's own cells: no round trip
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn charge(&self, n: u32) -> ChargeVerdict {
        self.limiter()
            .charge_entry(self.entry(), self.key(), n, Kind::Budget)
            .await
    }

    /// Record `n` permits to the key as debt in the fleet: as [`LeasedLimiter::record`]
    /// (the cells the node holds for the key first, then Redis, never refused, never lost),
    /// with no lookup.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{LeaseConfig, LeasedLimiter, Policy, Redis, RedisConfig};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let tokens = LeasedLimiter::new(redis, "10000/min".parse()?, LeaseConfig::new(500), Policy::FailLocal)?;
    /// let model = tokens.key("model-a");
    /// let charge = model.record(700).await; // the response's tokens
    /// assert_eq!(charge.charged.charged, 700);
    /// # Ok(()) }
    /// ```
    pub async fn record(&self, n: u32) -> ChargeVerdict {
        self.limiter()
            .charge_entry(self.entry(), self.key(), n, Kind::Record)
            .await
    }
}

/// Which charge a leased charge sends Redis for the part the held cells do not cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A budget's charge, saturating at `burst·T + D` ([`RedisGcra::try_charge`](crate::RedisGcra::try_charge)).
    Budget,
    /// Recorded whole as debt ([`RedisGcra::try_record`](crate::RedisGcra::try_record)).
    Record,
}

/// A reservation on a [`LeasedLimiter`] key: `n` permits admitted by
/// [`LeasedLimiter::reserve`], settled exactly once by [`LeasedLimiter::settle`] (which
/// consumes it; it is neither `Clone` nor `Copy`). It names no key: settle it on the key
/// it was reserved on.
///
/// # Examples
///
/// ```no_run
/// use limitcore_redis::{LeaseConfig, LeasedLimiter, Policy, Redis, RedisConfig};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
/// let tokens = LeasedLimiter::new(redis, "10000/min".parse()?, LeaseConfig::new(500), Policy::FailLocal)?;
/// if let (_, Some(receipt)) = tokens.reserve("tenant", 100).await {
///     assert_eq!(receipt.n(), 100);
///     tokens.settle("tenant", receipt, 60).await;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, PartialEq, Eq, Hash)]
#[must_use = "a reservation holds its permits until it is settled"]
pub struct LeasedReceipt {
    n: u32,
}

impl LeasedReceipt {
    /// Permits reserved.
    pub fn n(&self) -> u32 {
        self.n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exact::RedisGcra;

    /// Compiled, never run: the charge and acquire futures can be spawned or awaited in an
    /// HTTP handler (they are `Send`: no map guard is held across a round trip).
    fn futures_are_send(limiter: &LeasedLimiter, key: &LeasedKey, exact: &RedisGcra) {
        fn send<T: Send>(_: T) {}
        send(limiter.charge("k", 1));
        send(limiter.acquire("k", 100));
        send(key.charge(1));
        send(key.record(1));
        send(limiter.record("k", 1));
        send(limiter.reserve("k", 1));
        send(key.acquire(100));
        send(exact.charge("k", 1));
    }

    #[test]
    fn the_charge_and_acquire_futures_are_send() {
        let _ = futures_are_send;
    }
}
