//! [`Backoff`]: the delays between reconnections to the management server, doubling from
//! a first delay up to a cap, each jittered so that a fleet restarted together does not
//! reconnect in step.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// Capped exponential backoff with jitter: the `n`-th delay in a row is drawn uniformly
/// from `[d/2, d]`, where `d = min(first · 2ⁿ, cap)`; [`Backoff::reset`] (after a stream
/// that delivered a response) starts again from `first`.
///
/// # Examples
///
/// ```
/// use limitcore_rls::xds::Backoff;
/// use std::time::Duration;
///
/// let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(300));
/// let delays: Vec<Duration> = (0..4).map(|_| b.next_delay()).collect();
/// assert!(delays[0] >= Duration::from_millis(50) && delays[0] <= Duration::from_millis(100));
/// assert!(delays[1] >= Duration::from_millis(100) && delays[1] <= Duration::from_millis(200));
/// // Capped: never above 300 ms.
/// assert!(delays[2..].iter().all(|d| *d >= Duration::from_millis(150) && *d <= Duration::from_millis(300)));
/// b.reset();
/// assert!(b.next_delay() <= Duration::from_millis(100));
/// ```
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    cap: Duration,
    next: Duration,
    /// The jitter's pseudo-random state (xorshift64), seeded from the process's random
    /// hash keys: jitter needs spread between processes, not cryptographic quality.
    seed: u64,
}

impl Backoff {
    /// Delays from `first` (at least 1 ms) doubling up to `cap` (at least `first`).
    pub fn new(first: Duration, cap: Duration) -> Self {
        let first = first.max(Duration::from_millis(1));
        let seed = RandomState::new().build_hasher().finish() | 1;
        Backoff {
            first,
            cap: cap.max(first),
            next: first,
            seed,
        }
    }

    /// The delay before the next attempt; the one after it doubles, up to the cap.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.cap);
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        // A fraction of d/2 in 1/1024ths, added to d/2: uniform enough over [d/2, d].
        let half = d / 2;
        half + (d - half) * (self.seed % 1025) as u32 / 1024
    }

    /// Start again from the first delay (the connection worked).
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}
