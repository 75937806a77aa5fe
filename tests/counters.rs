//! `Counted`: exact counts after scripted sequences (unkeyed, keyed, inside `All`), real
//! threads whose counted sums equal the admissions they saw, and a differential check that
//! wrapping a limiter changes none of its decisions while the counts follow their definition.

use limitcore::clock::{ManualClock, MonotonicClock, Nanos};
use limitcore::rules::{GcraRule, LeakyBucketRule};
use limitcore::{
    All, Counted, Counts, Denied, FixedWindow, Gcra, Keyed, KeyedRateLimiter, KeyedRefund,
    KeyedReserve, LeakyBucket, Quota, RateLimiter, Refund, Reservation, Reserve, SlidingLog,
    SlidingWindow, TokenBucket,
};
use proptest::prelude::*;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

const MS: Nanos = 1_000_000;

/// Every field of a [`Counts`], comparable as a whole (the type is `#[non_exhaustive]`, so a
/// test outside the crate cannot write one as a literal).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Expect {
    admitted: u64,
    permits: u64,
    rate_limited: u64,
    final_refusals: u64,
    delayed: u64,
    wait_ns: u64,
    refunds: u64,
    permits_refunded: u64,
    exhausted_ns: u64,
    exhausted_since: Option<Nanos>,
}

impl Expect {
    fn of(c: &Counts) -> Expect {
        Expect {
            admitted: c.admitted,
            permits: c.permits,
            rate_limited: c.rate_limited,
            final_refusals: c.final_refusals,
            delayed: c.delayed,
            wait_ns: c.wait_ns,
            refunds: c.refunds,
            permits_refunded: c.permits_refunded,
            exhausted_ns: c.exhausted_ns,
            exhausted_since: c.exhausted_since,
        }
    }
}

fn limited(ms: u64) -> Result<(), Denied> {
    Err(Denied::RateLimited {
        retry_after: Duration::from_millis(ms),
    })
}

fn delay_of(r: Result<Reservation, Denied>) -> Result<Duration, Denied> {
    r.map(|r| r.delay())
}

#[test]
fn unkeyed_script_counts_exactly() {
    // 10/s burst 2: T = 100 ms.
    let q = Quota::per_second(10).unwrap().with_burst(2).unwrap();
    let l = Counted::new(Gcra::with_clock(q, ManualClock::new()).unwrap());
    let second = Duration::from_secs(1);
    assert_eq!(l.try_acquire_n_at(2, 0), Ok(()));
    assert_eq!(l.try_acquire_n_at(1, 0), limited(100)); // opens an episode at 0
    assert_eq!(
        l.try_acquire_n_at(3, 0),
        Err(Denied::ExceedsCapacity { capacity: 2 })
    );
    assert_eq!(l.decide_n_at(1, 50 * MS).result, limited(50));
    assert_eq!(l.try_acquire_n_at(1, 100 * MS), Ok(())); // closes it: 100 ms
    let mid = l.counts();
    assert_eq!(
        Expect::of(&mid),
        Expect {
            admitted: 2,
            permits: 3,
            rate_limited: 2,
            final_refusals: 1,
            exhausted_ns: 100 * MS,
            ..Expect::default()
        }
    );
    // Reservations: the next slot is at 200 ms, then 300 ms.
    assert_eq!(
        delay_of(l.reserve_n_at(1, 100 * MS, second)),
        Ok(Duration::from_millis(100))
    );
    let too_long = l.reserve_n_at(1, 100 * MS, Duration::from_millis(150));
    assert_eq!(too_long.map(|_| ()), limited(50)); // opens an episode at 100 ms
                                                   // This one closes it: 0 ns.
    assert_eq!(
        delay_of(l.reserve_n_at(1, 100 * MS, second)),
        Ok(Duration::from_millis(200))
    );
    // Full again at 500 ms: a refundable admission of 2, given back exactly.
    let receipt = l.acquire_refundable_at(2, 500 * MS).unwrap();
    l.refund(receipt, 500 * MS);
    assert_eq!(l.try_acquire_n_at(2, 500 * MS), Ok(()));
    assert_eq!(l.try_acquire_n_at(0, 500 * MS), Ok(()));
    assert_eq!(
        l.try_acquire_n_at(1, u64::MAX - 1),
        Err(Denied::BeyondHorizon)
    );
    assert_eq!(l.counts().exhausted_since, None); // a final refusal opens no episode
    assert_eq!(l.try_acquire_n_at(1, 600 * MS), Ok(()));
    assert_eq!(l.try_acquire_n_at(1, 600 * MS), limited(100)); // opens at 600 ms
    let _ = (l.check_at(1, 600 * MS), l.snapshot_at(600 * MS)); // decide nothing
    let end = l.counts();
    assert_eq!(
        Expect::of(&end),
        Expect {
            admitted: 8,
            permits: 10,
            rate_limited: 4,
            final_refusals: 2,
            delayed: 2,
            wait_ns: 300 * MS,
            refunds: 1,
            permits_refunded: 2,
            exhausted_ns: 100 * MS,
            exhausted_since: Some(600 * MS),
        }
    );
    assert_eq!((end.refused(), end.decisions()), (6, 14));
    assert_eq!(end.exhausted_ns_at(700 * MS), 200 * MS);
    assert_eq!(
        end.to_string(),
        "admitted 8 (10 permits), refused 6 (4 rate-limited, 2 final), delayed 2 (wait 300ms), \
         refunded 1 (2 permits), exhausted 100ms, exhausted since 600000000 ns"
    );
    let delta = end.since(&mid);
    assert_eq!(
        Expect::of(&delta),
        Expect {
            admitted: 6,
            permits: 7,
            rate_limited: 2,
            final_refusals: 1,
            delayed: 2,
            wait_ns: 300 * MS,
            refunds: 1,
            permits_refunded: 2,
            exhausted_ns: 0,
            exhausted_since: Some(600 * MS),
        }
    );
}

#[test]
fn keyed_script_counts_exactly() {
    // A pacer per key: 10/s, at most 3 queued; T = 100 ms.
    let q = Quota::per_second(10).unwrap().with_burst(3).unwrap();
    let per_key: Keyed<&'static str, LeakyBucketRule, ManualClock> =
        Keyed::with_clock(q, ManualClock::new()).unwrap();
    let l = Counted::new(per_key);
    let second = Duration::from_secs(1);
    let delays: Vec<_> = (0..3)
        .map(|_| delay_of(l.reserve_n_at(&"a", 1, 0, second)).unwrap())
        .collect();
    assert_eq!(delays, [0, 100, 200].map(Duration::from_millis));
    // a's queue is full (opens an episode at 0); b has its own (closes it at 50 ms).
    assert_eq!(l.reserve_n_at(&"a", 1, 0, second).map(|_| ()), limited(100));
    assert_eq!(
        delay_of(l.reserve_n_at(&"b", 1, 50 * MS, second)),
        Ok(Duration::ZERO)
    );
    // Nothing of a's can start now (opens at 50 ms); 4 is more than any key's capacity.
    assert_eq!(l.try_acquire_n_at(&"a", 1, 50 * MS), limited(250));
    assert_eq!(
        KeyedRateLimiter::try_acquire_n_at(&l, &"b", 4, 50 * MS),
        Err(Denied::ExceedsCapacity { capacity: 3 })
    );
    // c: admitted (closes the episode at 100 ms), given back, checked: not a decision.
    let receipt = l.acquire_refundable_at(&"c", 2, 100 * MS).unwrap();
    l.refund(&"c", receipt, 100 * MS);
    assert_eq!(l.check_at(&"c", 3, 100 * MS), Ok(()));
    let _ = l.snapshot_at(&"a", 100 * MS);
    assert_eq!(
        Expect::of(&l.counts()),
        Expect {
            admitted: 5,
            permits: 6,
            rate_limited: 2,
            final_refusals: 1,
            delayed: 2,
            wait_ns: 300 * MS,
            refunds: 1,
            permits_refunded: 2,
            exhausted_ns: 100 * MS,
            exhausted_since: None,
        }
    );
}

#[test]
fn keyed_gcra_reservations_and_decisions() {
    let q = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    let per_key: Keyed<u32, GcraRule, ManualClock> =
        Keyed::with_clock(q, ManualClock::new()).unwrap();
    let l = Counted::new(per_key);
    let wait =
        |k: u32, max_ms: u64| delay_of(l.reserve_n_at(&k, 1, 0, Duration::from_millis(max_ms)));
    assert_eq!(wait(1, 0), Ok(Duration::ZERO));
    assert_eq!(wait(1, 1_000), Ok(Duration::from_millis(100)));
    assert_eq!(wait(1, 1_000), Ok(Duration::from_millis(200)));
    assert_eq!(wait(1, 250).map(|_| ()), limited(50));
    assert!(l.decide_n_at(&2, 1, 0).is_admitted());
    assert_eq!(l.decide_n_at(&2, 1, 0).result, limited(100));
    assert_eq!(
        Expect::of(&l.counts()),
        Expect {
            admitted: 4,
            permits: 4,
            rate_limited: 2,
            delayed: 2,
            wait_ns: 300 * MS,
            // Opened by key 1's refusal, closed by key 2's admission, opened again by key 2.
            exhausted_since: Some(0),
            ..Expect::default()
        }
    );
}

/// Inside `All`, a counted part that admitted a request another part refused counts the
/// admission and its refund; wrapping `All` itself counts the combined decisions.
#[test]
fn counted_parts_and_a_counted_whole_of_all() {
    let clock = ManualClock::new();
    let gcra = |per_second| {
        Arc::new(Counted::new(
            Gcra::with_clock(Quota::per_second(per_second).unwrap(), clock.clone()).unwrap(),
        ))
    };
    let (a, b) = (gcra(5), gcra(2));
    let both = Counted::new(All::new(vec![a.clone(), b.clone()]));
    assert_eq!(both.try_acquire_n_at(1, 0), Ok(()));
    assert_eq!(both.try_acquire_n_at(2, 0), limited(500)); // b refuses, a is refunded
    assert_eq!(a.inner().snapshot_at(0).remaining, 4);
    assert_eq!(
        both.try_acquire_n_at(3, 0),
        Err(Denied::ExceedsCapacity { capacity: 2 })
    );
    assert_eq!(
        Expect::of(&a.counts()),
        Expect {
            admitted: 3,
            permits: 6,
            refunds: 2,
            permits_refunded: 5,
            ..Expect::default()
        }
    );
    assert_eq!(
        Expect::of(&b.counts()),
        Expect {
            admitted: 1,
            permits: 1,
            rate_limited: 1,
            final_refusals: 1,
            exhausted_since: Some(0),
            ..Expect::default()
        }
    );
    assert_eq!(
        Expect::of(&both.counts()),
        Expect {
            admitted: 1,
            permits: 1,
            rate_limited: 1,
            final_refusals: 1,
            exhausted_since: Some(0),
            ..Expect::default()
        }
    );
}

/// A blocking wait through the wrapper counts its attempts: the refusal it slept on, then the
/// admission.
///
/// On a manual clock, so that the second call is refused whatever the machine's speed (on
/// the real clock a test thread preempted for a whole slot found it free): the wait sleeps
/// until the clock moves, and the episode it opens lasts exactly the 50 ms the clock is moved.
#[test]
fn a_wait_counts_each_attempt() {
    use limitcore::wait::Blocking;
    let q = Quota::per_second(20).unwrap().with_burst(1).unwrap();
    let clock = ManualClock::new();
    let l = Arc::new(Counted::new(Gcra::with_clock(q, clock.clone()).unwrap()));
    l.retry_acquire_blocking().unwrap();
    let second = {
        let l = Arc::clone(&l);
        thread::spawn(move || l.retry_acquire_blocking())
    };
    // Refused at first (the 50 ms slot is taken), then asleep until the clock moves.
    let t0 = std::time::Instant::now();
    while l.counts().rate_limited == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the second call was never refused"
        );
        thread::sleep(Duration::from_millis(1));
    }
    clock.advance(Duration::from_millis(50));
    second.join().unwrap().unwrap();
    let c = l.counts();
    assert_eq!(
        (c.admitted, c.permits, c.rate_limited, c.final_refusals),
        (2, 2, 1, 0)
    );
    // The refusal opened an episode at 0, the admission at 50 ms closed it: both read on
    // the limiter's own clock.
    assert_eq!(c.exhausted_since, None);
    assert_eq!(c.exhausted(), Duration::from_millis(50), "{c}");
}

/// `threads` threads each make `attempts` calls of `decide` on `limiter` after a common start;
/// the number of calls that returned `Ok`.
fn race<L: Sync>(
    limiter: &L,
    threads: usize,
    attempts: usize,
    decide: fn(&L, usize) -> bool,
) -> u64 {
    let start = Barrier::new(threads);
    thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    (0..attempts)
                        .filter(|&i| decide(limiter, t * attempts + i))
                        .count() as u64
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

#[test]
fn threads_on_a_frozen_clock_count_exactly_the_burst() {
    for threads in [2, 3, 4] {
        for burst in [1, 1_000] {
            let q = Quota::per_second(1).unwrap().with_burst(burst).unwrap();
            let l = Counted::new(Gcra::with_clock(q, ManualClock::new()).unwrap());
            let attempts = 2 * burst as usize;
            let admitted = race(&l, threads, attempts, |l, _| l.try_acquire().is_ok());
            assert_eq!(admitted, u64::from(burst));
            let c = l.counts();
            let total = (threads * attempts) as u64;
            assert_eq!(
                (c.admitted, c.permits, c.rate_limited, c.final_refusals),
                (admitted, admitted, total - admitted, 0),
                "{threads} threads, burst {burst}"
            );
            // Every thread's last call was a refusal, after its admissions: an episode is open
            // since the frozen time, and the ones closed lasted 0 ns.
            assert_eq!((c.exhausted_ns, c.exhausted_since), (0, Some(0)));
        }
    }
}

#[test]
fn threads_on_keys_and_on_leases_count_what_they_saw() {
    // Four keys of burst 100 each, every thread on every key: 400 admitted in all.
    let q = Quota::per_second(1).unwrap().with_burst(100).unwrap();
    let per_key: Keyed<u32, GcraRule, ManualClock> =
        Keyed::with_clock(q, ManualClock::new()).unwrap();
    let l = Counted::new(per_key);
    let admitted = race(&l, 4, 400, |l, i| {
        l.try_acquire_n(&((i % 4) as u32), 1).is_ok()
    });
    assert_eq!(admitted, 400);
    let c = l.counts();
    assert_eq!((c.admitted, c.rate_limited), (400, 1_600 - 400));

    // The sliding window's per-CPU leases may strand some permits: whatever was admitted,
    // the counts say the same.
    let window = Counted::new(
        SlidingWindow::with_clock(Quota::per_second(1_000).unwrap(), ManualClock::new()).unwrap(),
    );
    let admitted = race(&window, 3, 1_000, |l, _| l.try_acquire().is_ok());
    assert!((1..=1_000).contains(&admitted), "{admitted}");
    let c = window.counts();
    assert_eq!((c.admitted, c.refused()), (admitted, 3_000 - admitted));

    // A moving clock, requests of 2: the permits are twice the admissions counted.
    let live = Counted::new(
        Gcra::with_clock(Quota::per_second(100_000).unwrap(), MonotonicClock::new()).unwrap(),
    );
    let admitted = race(&live, 2, 50_000, |l, _| l.try_acquire_n(2).is_ok());
    let c = live.counts();
    assert_eq!(
        (c.admitted, c.permits, c.refused()),
        (admitted, 2 * admitted, 100_000 - admitted)
    );
}

#[test]
fn threads_reserving_slots_count_every_delay() {
    // 1000 slots of 1 ms at the frozen time 0: delays 0, 1, ..., 999 ms whoever gets which.
    let q = Quota::per_second(1_000).unwrap();
    let pacer = Counted::new(LeakyBucket::with_clock(q, ManualClock::new()).unwrap());
    let admitted = race(&pacer, 4, 500, |l, _| {
        l.reserve_n_at(1, 0, Duration::MAX).is_ok()
    });
    assert_eq!(admitted, 1_000);
    let c = pacer.counts();
    assert_eq!((c.admitted, c.delayed, c.rate_limited), (1_000, 999, 1_000));
    assert_eq!(c.wait_ns, MS * 999 * 1_000 / 2);
}

/// Wrapped and unwrapped limiters on one random script (in a module of its own, so that its
/// `Subject` trait's methods do not shadow the limiters' in the tests above).
mod differential {
    use super::*;

    /// One step of a script.
    #[derive(Debug, Clone, Copy)]
    enum Op {
        /// Move the time by this many ns (backwards allowed).
        Shift(i64),
        /// `try_acquire_n_at(n)` on key `k`.
        Acquire(u8, u32),
        /// `decide_n_at(n)` on key `k`.
        Decide(u8, u32),
        /// `reserve_n_at(n, max_wait ns)` on key `k` (limiters that reserve).
        Reserve(u8, u32, u64),
        /// `acquire_refundable_at(n)` on key `k`; the receipt is kept.
        Refundable(u8, u32),
        /// Give back the latest kept receipt.
        Refund,
    }

    fn ops(cap: u32, period: u64) -> impl Strategy<Value = Vec<Op>> {
        let n = move || prop_oneof![6 => 0..=cap.saturating_add(1), 1 => any::<u32>()];
        let p = period as i64;
        prop::collection::vec(
            prop_oneof![
                3 => (-p / 4..=2 * p).prop_map(Op::Shift),
                4 => (0u8..3, n()).prop_map(|(k, n)| Op::Acquire(k, n)),
                1 => (0u8..3, n()).prop_map(|(k, n)| Op::Decide(k, n)),
                2 => (0u8..3, n(), 0..=2 * period).prop_map(|(k, n, w)| Op::Reserve(k, n, w)),
                1 => (0u8..3, n()).prop_map(|(k, n)| Op::Refundable(k, n)),
                1 => Just(Op::Refund),
            ],
            1..150,
        )
    }

    /// The counts' definition, applied to one thread's decisions in order.
    #[derive(Debug, Default)]
    struct Tally {
        c: Expect,
        episode: Option<Nanos>,
    }

    impl Tally {
        fn decided<T>(&mut self, n: u32, now: Nanos, result: &Result<T, Denied>) {
            match result {
                Ok(_) => {
                    self.c.admitted += 1;
                    self.c.permits += u64::from(n);
                    if n > 0 {
                        if let Some(since) = self.episode.take() {
                            self.c.exhausted_ns += now.saturating_sub(since);
                        }
                    }
                }
                Err(d) if d.is_final() => self.c.final_refusals += 1,
                Err(_) => {
                    self.c.rate_limited += 1;
                    self.episode.get_or_insert(now.min(u64::MAX - 1));
                }
            }
        }

        fn reserved(&mut self, n: u32, now: Nanos, result: &Result<Reservation, Denied>) {
            self.decided(n, now, result);
            if let Ok(r) = result {
                let delay = r.delay().as_nanos() as u64;
                if delay > 0 {
                    self.c.delayed += 1;
                    self.c.wait_ns += delay;
                }
            }
        }

        fn expect(&self) -> Expect {
            Expect {
                exhausted_since: self.episode,
                ..self.c
            }
        }
    }

    /// The calls a script makes, keyed (`k` is the key) or not (`k` is ignored).
    trait Subject {
        fn acquire(&self, k: u8, n: u32, now: Nanos) -> Result<(), Denied>;
        fn decide(&self, k: u8, n: u32, now: Nanos) -> limitcore::Decision;
        /// `None` for a limiter that does not reserve.
        fn reserve(
            &self,
            k: u8,
            n: u32,
            now: Nanos,
            max_wait: Duration,
        ) -> Option<Result<Reservation, Denied>>;
        fn refundable(&self, k: u8, n: u32, now: Nanos) -> Result<limitcore::Receipt, Denied>;
        fn refund(&self, k: u8, receipt: limitcore::Receipt, at: Nanos);
        fn state(&self, k: u8, now: Nanos) -> limitcore::Snapshot;
    }

    macro_rules! unkeyed_subject {
    ($reserve:tt: $($t:ty),*) => {$(
        impl Subject for $t {
            fn acquire(&self, _: u8, n: u32, now: Nanos) -> Result<(), Denied> {
                self.try_acquire_n_at(n, now)
            }
            fn decide(&self, _: u8, n: u32, now: Nanos) -> limitcore::Decision {
                self.decide_n_at(n, now)
            }
            fn reserve(&self, _: u8, n: u32, now: Nanos, max_wait: Duration) -> Option<Result<Reservation, Denied>> {
                unkeyed_subject!(@reserve $reserve self, n, now, max_wait)
            }
            fn refundable(&self, _: u8, n: u32, now: Nanos) -> Result<limitcore::Receipt, Denied> {
                self.acquire_refundable_at(n, now)
            }
            fn refund(&self, _: u8, receipt: limitcore::Receipt, at: Nanos) {
                Refund::refund(self, receipt, at)
            }
            fn state(&self, _: u8, now: Nanos) -> limitcore::Snapshot {
                self.snapshot_at(now)
            }
        }
    )*};
    (@reserve reserves $l:ident, $n:ident, $now:ident, $w:ident) => { Some($l.reserve_n_at($n, $now, $w)) };
    (@reserve none $l:ident, $n:ident, $now:ident, $w:ident) => {{ let _ = ($l, $n, $now, $w); None }};
}

    type M = ManualClock;
    unkeyed_subject!(reserves: Gcra<M>, Counted<Gcra<M>>, LeakyBucket<M>, Counted<LeakyBucket<M>>);
    unkeyed_subject!(none: TokenBucket<M>, Counted<TokenBucket<M>>, FixedWindow<M>, Counted<FixedWindow<M>>,
    SlidingWindow<M>, Counted<SlidingWindow<M>>, SlidingLog<M>, Counted<SlidingLog<M>>);

    macro_rules! keyed_subject {
    ($($t:ty),*) => {$(
        impl Subject for $t {
            fn acquire(&self, k: u8, n: u32, now: Nanos) -> Result<(), Denied> {
                KeyedRateLimiter::try_acquire_n_at(self, &k, n, now)
            }
            fn decide(&self, k: u8, n: u32, now: Nanos) -> limitcore::Decision {
                KeyedRateLimiter::decide_n_at(self, &k, n, now)
            }
            fn reserve(&self, k: u8, n: u32, now: Nanos, max_wait: Duration) -> Option<Result<Reservation, Denied>> {
                Some(KeyedReserve::reserve_n_at(self, &k, n, now, max_wait))
            }
            fn refundable(&self, k: u8, n: u32, now: Nanos) -> Result<limitcore::Receipt, Denied> {
                KeyedRefund::acquire_refundable_at(self, &k, n, now)
            }
            fn refund(&self, k: u8, receipt: limitcore::Receipt, at: Nanos) {
                KeyedRefund::refund(self, &k, receipt, at)
            }
            fn state(&self, k: u8, now: Nanos) -> limitcore::Snapshot {
                KeyedRateLimiter::snapshot_at(self, &k, now)
            }
        }
    )*};
}

    type KeyedGcra = Keyed<u8, GcraRule, M>;
    keyed_subject!(KeyedGcra, Counted<KeyedGcra>);

    /// Run `script` on `plain` and on `counted` (a wrapper around a limiter built like `plain`)
    /// side by side: every result and state equal, and the counts equal the [`Tally`] of the
    /// results.
    fn differential<P: Subject, C: Subject>(
        plain: &P,
        counted: &C,
        counts: impl Fn(&C) -> Counts,
        script: &[Op],
    ) -> Result<(), TestCaseError> {
        let mut now: Nanos = 1_000;
        let mut tally = Tally::default();
        let mut receipts = Vec::new();
        for &op in script {
            match op {
                Op::Shift(d) => now = now.saturating_add_signed(d),
                Op::Acquire(k, n) => {
                    let r = plain.acquire(k, n, now);
                    prop_assert_eq!(r, counted.acquire(k, n, now), "{:?} at {}", op, now);
                    tally.decided(n, now, &r);
                }
                Op::Decide(k, n) => {
                    let d = plain.decide(k, n, now);
                    prop_assert_eq!(d, counted.decide(k, n, now), "{:?} at {}", op, now);
                    tally.decided(n, now, &d.result);
                }
                Op::Reserve(k, n, w) => {
                    let w = Duration::from_nanos(w);
                    let r = plain.reserve(k, n, now, w);
                    prop_assert_eq!(r, counted.reserve(k, n, now, w), "{:?} at {}", op, now);
                    if let Some(r) = r {
                        tally.reserved(n, now, &r);
                    }
                }
                Op::Refundable(k, n) => {
                    // Each limiter's own receipt (equal ones), each refunded once.
                    let r = plain.refundable(k, n, now);
                    let c = counted.refundable(k, n, now);
                    prop_assert_eq!(&r, &c, "{:?} at {}", op, now);
                    tally.decided(n, now, &r);
                    if let (Ok(receipt), Ok(counted_receipt)) = (r, c) {
                        receipts.push((k, receipt, counted_receipt, now));
                    }
                }
                Op::Refund => {
                    if let Some((k, receipt, counted_receipt, at)) = receipts.pop() {
                        let at = at.max(now);
                        let n = receipt.n();
                        plain.refund(k, receipt, at);
                        counted.refund(k, counted_receipt, at);
                        if n > 0 {
                            tally.c.refunds += 1;
                            tally.c.permits_refunded += u64::from(n);
                        }
                    }
                }
            }
            for k in 0..3 {
                prop_assert_eq!(plain.state(k, now), counted.state(k, now));
            }
            prop_assert_eq!(
                Expect::of(&counts(counted)),
                tally.expect(),
                "after {:?}",
                op
            );
        }
        Ok(())
    }

    /// A quota every limiter of the differential can take: 1..=200 per 1 ms..1 s, burst 1..=8
    /// or the count (the window limiters get the count).
    fn quotas() -> impl Strategy<Value = Quota> {
        (1u32..=200, 1u64..=1_000, prop_oneof![1u32..=8, Just(0)]).prop_map(|(count, ms, burst)| {
            let q = Quota::new(count, Duration::from_millis(ms)).unwrap();
            if burst == 0 {
                q
            } else {
                q.with_burst(burst).unwrap()
            }
        })
    }

    fn window(q: Quota) -> Quota {
        Quota::new(q.count(), q.period()).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: limitcore_testkit::cases(), ..ProptestConfig::default() })]

        #[test]
        fn wrapping_changes_no_decision((q, script) in quotas().prop_flat_map(|q| (Just(q), ops(q.burst(), q.period_ns())))) {
            let m = ManualClock::new;
            differential(&Gcra::with_clock(q, m()).unwrap(), &Counted::new(Gcra::with_clock(q, m()).unwrap()), Counted::counts, &script)?;
            differential(&LeakyBucket::with_clock(q, m()).unwrap(), &Counted::new(LeakyBucket::with_clock(q, m()).unwrap()), Counted::counts, &script)?;
            if let Ok(tb) = TokenBucket::with_clock(q, m()) {
                differential(&tb, &Counted::new(TokenBucket::with_clock(q, m()).unwrap()), Counted::counts, &script)?;
            }
            let w = window(q);
            differential(&FixedWindow::with_clock(w, m()).unwrap(), &Counted::new(FixedWindow::with_clock(w, m()).unwrap()), Counted::counts, &script)?;
            // No leases: every decision is the formula's, whichever CPU the thread is on. A refund
            // goes to the current CPU's lease, which a migration between the two limiters' calls
            // would make differ: none here.
            let no_refund: Vec<Op> = script.iter().copied().filter(|op| !matches!(op, Op::Refund)).collect();
            differential(&SlidingWindow::with_batch(w, m(), 0).unwrap(), &Counted::new(SlidingWindow::with_batch(w, m(), 0).unwrap()), Counted::counts, &no_refund)?;
            differential(&SlidingLog::with_clock(w, m()).unwrap(), &Counted::new(SlidingLog::with_clock(w, m()).unwrap()), Counted::counts, &script)?;
            let keyed = || KeyedGcra::with_clock(q, m()).unwrap();
            differential(&keyed(), &Counted::new(keyed()), Counted::counts, &script)?;
        }
    }
}
