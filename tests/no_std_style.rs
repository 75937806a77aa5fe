//! A `no_std`-style use of the core: an explicit clock, no default clock, no keyed map. This
//! file uses nothing that needs the `std` or `keyed` features, and CI runs it with
//! `--no-default-features` as well as with every feature, so it checks that turning `std`
//! on never changes what such code means (features are additive).

use limitcore::clock::ManualClock;
use limitcore::{Gcra, Quota, RateLimiter};
use std::time::Duration;

#[test]
fn gcra_on_a_manual_clock_compiles_and_decides_with_and_without_std() {
    let clock = ManualClock::new();
    let limiter = Gcra::with_clock(Quota::per_second(10).unwrap(), clock.clone()).unwrap();
    assert!(limiter.try_acquire_n(10).is_ok());
    assert!(limiter.try_acquire().is_err());
    clock.advance(Duration::from_millis(100));
    assert!(limiter.try_acquire().is_ok());
}

#[test]
fn the_default_clock_is_the_same_type_with_and_without_std() {
    // Without `std` this type has no values; with it, it is the TSC clock. Either way the
    // name means `MonotonicClock`, never `ManualClock`.
    fn same<T>(_: Option<T>, _: Option<T>) {}
    same(
        None::<limitcore::DefaultClock>,
        None::<limitcore::clock::MonotonicClock>,
    );
    assert_eq!(
        core::any::type_name::<limitcore::DefaultClock>(),
        core::any::type_name::<limitcore::clock::MonotonicClock>()
    );
}
