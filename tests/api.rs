//! The public API's surprises, one test each: nothing of a quota is silently ignored, the
//! wait traits can be imported together, keyed lookups take borrowed keys, and `All` over a
//! keyed and a global limit charges neither when either refuses.

use limitcore::clock::ManualClock;
use limitcore::rules::{GcraRule, Rule, SlidingLogRule, SlidingWindowRule};
use limitcore::{
    Algorithm, All, Denied, FixedWindow, Gcra, Global, Keyed, KeyedRateLimiter, KeyedRefund,
    KeyedSketch, Quota, QuotaError, RateLimiter, SlidingLog, SlidingWindow, TokenBucket,
};
use std::time::Duration;

/// "100/s burst 10" on a window limiter admitted 100 at once; now it is refused, never
/// silently ignored, and the refusal names the algorithm.
#[test]
fn a_burst_a_window_cannot_honour_is_refused() {
    let bursty: Quota = "100/s burst 10".parse().unwrap();
    let clock = ManualClock::new;
    let refusal = |algorithm: &'static str| QuotaError::BurstNotSupported {
        algorithm,
        count: 100,
        burst: 10,
    };
    assert_eq!(
        FixedWindow::with_clock(bursty, clock()).unwrap_err(),
        refusal("fixed-window")
    );
    assert_eq!(
        SlidingWindow::with_clock(bursty, clock()).unwrap_err(),
        refusal("sliding-window")
    );
    assert_eq!(
        SlidingLog::with_clock(bursty, clock()).unwrap_err(),
        refusal("sliding-log")
    );
    assert_eq!(
        KeyedSketch::<u64, ManualClock>::with_clock(bursty, 64, 2, clock()).unwrap_err(),
        refusal("keyed-sketch")
    );
    assert_eq!(
        SlidingWindowRule::new(&bursty).unwrap_err(),
        refusal("sliding-window")
    );
    assert!(refusal("fixed-window").to_string().contains("no burst"));
    // The same quota is a burst of 10 for the algorithms that have one ...
    let gcra = Gcra::with_clock(bursty, clock()).unwrap();
    assert_eq!(gcra.capacity(), 10);
    assert_eq!(
        gcra.try_acquire_n(11),
        Err(Denied::ExceedsCapacity { capacity: 10 })
    );
    assert!(gcra.try_acquire_n(10).is_ok());
    // ... and without a burst every limiter's capacity is its count: `n > capacity()` is
    // `ExceedsCapacity`, as the trait's contract says.
    let plain: Quota = "100/s".parse().unwrap();
    for algorithm in Algorithm::ALL {
        let limiter = algorithm.limiter(plain, clock()).unwrap();
        assert_eq!(limiter.capacity(), 100, "{algorithm}");
        assert_eq!(
            limiter.try_acquire_n(101),
            Err(Denied::ExceedsCapacity { capacity: 100 }),
            "{algorithm}"
        );
        assert!(limiter.try_acquire_n(100).is_ok(), "{algorithm}");
    }
}

/// Every constructor has one shape: `Result<Self, QuotaError>`.
#[test]
fn every_constructor_returns_a_result() {
    let q = Quota::per_second(5).unwrap();
    let c = ManualClock::new;
    let _: Result<Gcra<ManualClock>, QuotaError> = Gcra::with_clock(q, c());
    let _: Result<TokenBucket<ManualClock>, QuotaError> = TokenBucket::with_clock(q, c());
    let _: Result<limitcore::LeakyBucket<ManualClock>, QuotaError> =
        limitcore::LeakyBucket::with_clock(q, c());
    let _: Result<FixedWindow<ManualClock>, QuotaError> = FixedWindow::with_clock(q, c());
    let _: Result<SlidingLog<ManualClock>, QuotaError> = SlidingLog::with_clock(q, c());
    let _: Result<SlidingWindow<ManualClock>, QuotaError> = SlidingWindow::with_clock(q, c());
    let _: Result<Keyed<u8, GcraRule, ManualClock>, QuotaError> = Keyed::with_clock(q, c());
    assert!(Gcra::new(q).is_ok());
}

/// Importing both wait traits used to make `acquire_n` ambiguous; the names now differ.
#[cfg(feature = "tokio")]
#[tokio::test(flavor = "current_thread")]
async fn both_wait_traits_can_be_imported_together() {
    use limitcore::wait::{Async, Blocking};
    let limiter = Gcra::new(Quota::per_second(1_000).unwrap()).unwrap();
    limiter.retry_acquire_n_blocking(1).unwrap();
    limiter.retry_acquire_blocking().unwrap();
    limiter.retry_acquire_n(1).await.unwrap();
    limiter.retry_acquire().await.unwrap();
    assert!(limiter
        .retry_acquire_n_blocking_within(5_000, Duration::ZERO)
        .is_err());
    assert!(limiter
        .retry_acquire_n_within(5_000, Duration::ZERO)
        .await
        .is_err());
}

/// `Keyed<String>` is queried with a `&str`, directly and through the keyed trait, and a
/// borrowed lookup finds the state an owned one made.
#[test]
fn keyed_string_is_queried_with_str() {
    let clock = ManualClock::new();
    let keyed: Keyed<String, GcraRule, ManualClock> =
        Keyed::with_clock(Quota::per_second(2).unwrap(), clock.clone()).unwrap();
    let tenant = String::from("tenant-7");
    assert!(keyed.try_acquire(&tenant).is_ok()); // by &String
    assert!(keyed.try_acquire("tenant-7").is_ok()); // by &str: the same state
    assert!(keyed.try_acquire("tenant-7").is_err());
    assert_eq!(keyed.snapshot("tenant-7").remaining, 0);
    assert_eq!(keyed.len(), 1);
    let by_trait: &dyn KeyedRateLimiter<str> = &keyed;
    assert!(by_trait.try_acquire("tenant-8").is_ok());
    assert_eq!(
        by_trait.quota_for("tenant-8"),
        Quota::per_second(2).unwrap()
    );
    let d = by_trait.decide_n("tenant-8", 1);
    assert!(d.is_admitted());
    assert_eq!(d.state.remaining, 0);
    // Sliding logs per key, by the same lookups.
    let logs: Keyed<String, SlidingLogRule, ManualClock> =
        Keyed::with_clock(Quota::per_second(1).unwrap(), clock).unwrap();
    assert!(logs.try_acquire("a").is_ok());
    assert!(logs.try_acquire("a").is_err());
}

/// `All` of a per-client (keyed) limit and a global one: whichever refuses, the other keeps
/// no charge.
#[test]
fn all_of_a_keyed_and_a_global_limit_charges_neither_on_a_refusal() {
    let clock = ManualClock::new();
    let per_client: Keyed<String, GcraRule, ManualClock> =
        Keyed::with_clock(Quota::per_second(2).unwrap(), clock.clone()).unwrap();
    let per_client = std::sync::Arc::new(per_client);
    let global = std::sync::Arc::new(
        Gcra::with_clock(Quota::per_second(3).unwrap(), clock.clone()).unwrap(),
    );
    let both: All<Box<dyn KeyedRefund<str>>> = All::new(vec![
        Box::new(per_client.clone()),
        Box::new(Global::new(global.clone())),
    ]);
    // The keyed limit refuses: the global one keeps no charge.
    assert!(both.try_acquire_n("a", 2).is_ok());
    assert_eq!(global.snapshot().remaining, 1);
    let refused = both.try_acquire("a").unwrap_err();
    assert!(refused.retry_after().is_some());
    assert_eq!(
        global.snapshot().remaining,
        1,
        "the global limit was refunded"
    );
    // The global limit refuses: the keyed one keeps no charge.
    assert!(both.try_acquire("b").is_ok());
    assert_eq!(global.snapshot().remaining, 0);
    assert_eq!(per_client.snapshot("c").remaining, 2);
    assert!(both.try_acquire("c").is_err());
    assert_eq!(per_client.snapshot("c").remaining, 2, "c was refunded");
    assert_eq!(per_client.snapshot("b").remaining, 1);
    // Same in the other order of the limits, and with the decision's state.
    let reversed: All<Box<dyn KeyedRefund<str>>> = All::new(vec![
        Box::new(Global::new(global.clone())),
        Box::new(per_client.clone()),
    ]);
    let d = reversed.decide_n("d", 1);
    assert!(!d.is_admitted());
    assert_eq!(per_client.snapshot("d").remaining, 2);
    clock.advance(Duration::from_millis(334));
    let d = reversed.decide_n("d", 1);
    assert!(d.is_admitted());
    assert_eq!(d.state.remaining, 0, "the tighter of the two states");
    // A refusal's retry_after satisfies both limits.
    assert!(both.try_acquire_n("a", 2).is_err());
}

/// The README's "per client and global" example, as written there.
#[test]
fn the_readmes_all_or_nothing_example() -> Result<(), limitcore::QuotaError> {
    let per_client: Keyed<String> = Keyed::new("10/s".parse()?)?.with_max_keys(1_000_000);
    let everyone = Global::new(Gcra::new("5000/s".parse()?)?);
    let limit: All<Box<dyn KeyedRefund<str>>> =
        All::new(vec![Box::new(per_client), Box::new(everyone)]);
    let decision = limit.decide_n("203.0.113.7", 1); // a refusal by one charges neither
    assert!(decision.is_admitted());
    assert_eq!(decision.state.remaining, 9);
    // An algorithm from text, per key.
    let algorithm: Algorithm = "sliding-log".parse().unwrap();
    let keyed = algorithm.keyed::<str, _>("2/s".parse()?, ManualClock::new(), Some(10))?;
    assert!(keyed.try_acquire_n("a", 2).is_ok());
    assert!(keyed.try_acquire("a").is_err());
    Ok(())
}
