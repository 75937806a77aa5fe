//! Bytes per key at 10^6 keys: `Keyed<K, GcraRule>` against governor's keyed limiter, for
//! `u64` keys and for IPv6 addresses (`Ipv6Addr`, 16 bytes, alignment 1, and `u128`, 16
//! bytes, alignment 16), measured by counting the heap bytes each allocates (through
//! `stats_alloc`: the bytes asked of the allocator, not its own overhead), and the
//! fixed-memory `KeyedSketch` (count-min sketch, 2^16 × 4 cells) for comparison.
//!
//! ```text
//! cargo run --release --example keyed_memory
//! ```
//!
//! `Keyed` runs on its default store (`DashMapStore` with `KeyHasher`) and on
//! `PapayaStore`; governor's keyed limiter is `DashMap<K, AtomicU64 state>` with SipHash.

use limitcore::rules::GcraRule;
use limitcore::{DefaultClock, Keyed, KeyedSketch, PapayaStore, Quota};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::hash::Hash;
use std::net::Ipv6Addr;
use std::num::NonZeroU32;
use std::time::Duration;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const KEYS: u64 = 1_000_000;

/// Live heap bytes held after `build` has run (allocated minus freed).
fn live_bytes<T>(build: impl FnOnce() -> T) -> (T, i64) {
    let region = Region::new(GLOBAL);
    let value = build();
    let stats = region.change();
    (
        value,
        stats.bytes_allocated as i64 - stats.bytes_deallocated as i64
            + stats.bytes_reallocated as i64,
    )
}

/// An address for `k`, spread over the whole space (a multiplicative hash of the counter in
/// the high half), as clients' addresses are.
fn spread(k: u64) -> u128 {
    u128::from(k.wrapping_mul(0x9E37_79B9_7F4A_7C15)) << 64 | u128::from(k)
}

/// Bytes per key of the default `Keyed`, of `Keyed` on papaya, and of governor, for 10^6
/// keys `key(0..10^6)`; prints one line each.
fn compare<K>(what: &str, key: fn(u64) -> K)
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
{
    let quota = Quota::per_second(10).unwrap();
    // No automatic sweep: the keys would go idle (and be evicted) while we insert them.
    let (ours, ours_bytes) = live_bytes(|| {
        let keyed: Keyed<K, GcraRule> = Keyed::new(quota)
            .unwrap()
            .with_sweep_interval(Duration::ZERO);
        for k in 0..KEYS {
            let _ = keyed.try_acquire(&key(k));
        }
        keyed
    });
    let (papaya, papaya_bytes) = live_bytes(|| {
        let keyed: Keyed<K, GcraRule, DefaultClock, PapayaStore<K>> =
            Keyed::with_store(quota, DefaultClock::new(), PapayaStore::new())
                .unwrap()
                .with_sweep_interval(Duration::ZERO);
        for k in 0..KEYS {
            let _ = keyed.try_acquire(&key(k));
        }
        keyed
    });
    let (gov, gov_bytes) = live_bytes(|| {
        let gov =
            governor::RateLimiter::keyed(governor::Quota::per_second(NonZeroU32::new(10).unwrap()));
        for k in 0..KEYS {
            let _ = gov.check_key(&key(k));
        }
        gov
    });
    assert_eq!(ours.len() as u64, KEYS);
    assert_eq!(papaya.len() as u64, KEYS);
    assert_eq!(gov.len() as u64, KEYS);
    let per_key = |bytes: i64| bytes as f64 / KEYS as f64;
    println!("{what} keys ({KEYS}), GCRA state:");
    println!(
        "  limitcore Keyed (default: DashMapStore): {:.1} bytes/key",
        per_key(ours_bytes)
    );
    println!(
        "  limitcore Keyed on PapayaStore:          {:.1} bytes/key",
        per_key(papaya_bytes)
    );
    println!(
        "  governor keyed (dashmap):                {:.1} bytes/key",
        per_key(gov_bytes)
    );
    println!(
        "  default − governor, in all:              {} bytes (ratio {:.6})",
        ours_bytes - gov_bytes,
        ours_bytes as f64 / gov_bytes as f64
    );
}

fn main() {
    // One-time global set-ups (the clock's calibration, the hashers' process-wide random
    // seeds), so that the first measurement does not carry them.
    {
        let keyed: Keyed<u64, GcraRule> = Keyed::new(Quota::per_second(10).unwrap()).unwrap();
        let _ = keyed.try_acquire(&1);
        let gov =
            governor::RateLimiter::keyed(governor::Quota::per_second(NonZeroU32::new(10).unwrap()));
        let _ = gov.check_key(&1u64);
    }
    compare("u64", |k| k);
    compare("Ipv6Addr", |k| Ipv6Addr::from(spread(k)));
    compare("u128 (an IPv6 address as a number)", spread);

    let quota = Quota::per_second(10).unwrap();
    let (sketch, sketch_bytes) = live_bytes(|| {
        let sketch: KeyedSketch<u64> = KeyedSketch::new(quota, 1 << 16, 4).unwrap();
        for k in 0..KEYS {
            let _ = sketch.try_acquire(&k);
        }
        sketch
    });
    // The heap part of the sketch (its cells and row parameters); `memory_bytes` adds the
    // struct itself. Fixed at construction: the same for 10 keys or 10^9.
    println!(
        "limitcore KeyedSketch<u64> 2^16 x 4: {:.1} bytes/key ({} bytes in all, eps {:.1e}, delta {:.3})",
        sketch_bytes as f64 / KEYS as f64,
        sketch.memory_bytes(),
        sketch.epsilon(),
        sketch.delta()
    );
}
