//! `leaky_bucket_differential`: the pacer against the queue of reserved slots, for
//! `try_acquire_n_at` and `reserve_n_at`, at explicit times.

use super::decode::{
    arbitrary_delta, arbitrary_n, arbitrary_quota, arbitrary_start, arbitrary_time,
};
use super::timed::{TimedOp, TimedOutcome, Trace};
use super::{probe_retry_after, saturating_nanos, ArbResult, NoClock, MAX_OPS};
use arbitrary::Unstructured;
use core::time::Duration;
use limitcore::clock::ManualClock;
use limitcore::reference::{LeakyBucketModel, Model};
use limitcore::{Denied, LeakyBucket, RateLimiter, Reserve};

/// `LeakyBucket` against `LeakyBucketModel` (the queue of reserved slots): a quota from
/// arbitrary `(count, period, burst)` (skipped if refused), an explicit `now` starting
/// anywhere (near `u64::MAX` included), then up to 400 operations at any time in any
/// order: `try_acquire_n_at` against the model's `acquire`, `reserve_n_at(n, now,
/// max_wait)` against its `reserve` (same delay, same denial, `start = now + delay`),
/// every finite `retry_after` exact at its inclusive boundary (for both, on copies of the
/// model), and snapshots that mean what they say in the queue reading: `full_after` is
/// when the queue drains, `remaining` how many more slots fit its capacity now.
///
/// # Panics
///
/// On any disagreement, with the run's history in the message.
pub fn leaky_bucket_differential(data: &[u8]) {
    let _ = run_leaky_bucket(&mut Unstructured::new(data));
}

struct PacerDiff<'a> {
    trace: Trace,
    limiter: &'a LeakyBucket<NoClock>,
    /// The queue model: `try_acquire` through `reference::Model`, `reserve` on its own.
    model: LeakyBucketModel,
    now: u64,
    interval: u64,
    burst: u32,
    /// The last denial with a finite wait: `(n, max_wait, retry_after in ns)`
    /// (`max_wait = None` for `try_acquire`).
    last_denied: Option<(u32, Option<Duration>, u64)>,
}

impl PacerDiff<'_> {
    fn move_to(&mut self, op: TimedOp, to: u64) {
        self.now = to;
        self.trace.record(op, to, TimedOutcome::Time);
    }

    fn acquire(&mut self, op: TimedOp, n: u32) {
        let now = self.now;
        let got = self.limiter.try_acquire_n_at(n, now);
        let want = Model::acquire(&mut self.model, n, now);
        if got != want {
            self.trace.fail(
                "try_acquire decision",
                op,
                now,
                &format!("  LeakyBucket: {got:?}\n  LeakyBucketModel::acquire: {want:?}"),
            );
        }
        self.trace.record(op, now, TimedOutcome::Decision(got));
        if let Err(denied) = got {
            self.check_retry_after(op, n, None, now, denied);
            // Denied now: the queue drains exactly `retry_after` from now, which the
            // limiter's own snapshot must say too (for a request for no permits, refused
            // while the queue runs past its capacity, `retry_after` less the capacity).
            if let Denied::RateLimited { retry_after } = denied {
                let s = self.limiter.snapshot_at(now);
                let capacity = if n == 0 {
                    Duration::from_nanos(self.limiter.quota().burst_span_ns())
                } else {
                    Duration::ZERO
                };
                if s.full_after != retry_after + capacity {
                    self.trace.fail(
                        "snapshot disagrees with try_acquire's retry_after",
                        op,
                        now,
                        &format!("  denied {denied:?}, but snapshot_at(now) = {s:?}"),
                    );
                }
            }
        }
    }

    fn reserve(&mut self, op: TimedOp, n: u32, max_wait: Duration) {
        let now = self.now;
        let got = self.limiter.reserve_n_at(n, now, max_wait);
        let delay = got.map(|r| r.delay());
        let want = self
            .model
            .reserve(n, now, saturating_nanos(max_wait))
            .map(Duration::from_nanos);
        if delay != want {
            self.trace.fail(
                "reservation",
                op,
                now,
                &format!("  LeakyBucket: {got:?}\n  LeakyBucketModel::reserve: {want:?} (delay)"),
            );
        }
        self.trace.record(op, now, TimedOutcome::Reserved(delay));
        match got {
            Ok(r) => {
                let d = saturating_nanos(r.delay());
                if now.checked_add(d) != Some(r.start()) || r.delay() > max_wait {
                    self.trace.fail(
                        "reservation",
                        op,
                        now,
                        &format!("  {r:?}: start is not now + delay, or delay > max_wait"),
                    );
                }
            }
            Err(denied) => self.check_retry_after(op, n, Some(max_wait), now, denied),
        }
    }

    /// On copies of the model (which the limiter has just been shown to equal): asking
    /// again exactly `retry_after` later succeeds, 1 ns earlier is refused by 1 ns;
    /// `BeyondHorizon` is still refused at the end of the clock.
    fn check_retry_after(
        &mut self,
        op: TimedOp,
        n: u32,
        max_wait: Option<Duration>,
        now: u64,
        denied: Denied,
    ) {
        let mw = max_wait.map_or(0, saturating_nanos);
        // A request for no permits (`try_acquire_n_at(0)`: refused only past the capacity) is
        // the model's `acquire`, not a reservation of nothing.
        let ask = |t| match (n, max_wait) {
            (0, None) => self.model.clone().acquire(0, t).map(|()| 0),
            _ => self.model.clone().reserve(n, t, mw),
        };
        match probe_retry_after(denied, now, ask) {
            Ok(Some(then)) => self.last_denied = Some((n, max_wait, then - now)),
            Ok(None) => {}
            Err((what, detail)) => self.trace.fail(what, op, now, &detail),
        }
    }

    /// The snapshot in the queue reading, on copies of the model: the queue has drained
    /// exactly `full_after` from `at`; `remaining` more slots fit the capacity now, one more
    /// does not (a reservation refused only by the end of the clock counts as fitting).
    fn snapshot(&mut self, op: TimedOp, at: u64) {
        let got = self.limiter.snapshot_at(at);
        let t = &self.trace;
        let never = Denied::BeyondHorizon;
        if got.remaining > self.burst {
            t.fail(
                "snapshot.remaining above the capacity",
                op,
                at,
                &format!("  {got:?}"),
            );
        }
        let take = self.model.clone().reserve(got.remaining, at, u64::MAX);
        // `remaining = 0`: nothing to take (see the GCRA harness).
        if got.remaining > 0 && take.is_err() && take != Err(never) {
            t.fail(
                "snapshot.remaining too high",
                op,
                at,
                &format!("  {got:?}, but reserving {} gives {take:?}", got.remaining),
            );
        }
        if got.remaining < self.burst {
            let more = self.model.clone().reserve(got.remaining + 1, at, u64::MAX);
            if more.is_ok() {
                t.fail(
                    "snapshot.remaining too low",
                    op,
                    at,
                    &format!("  {got:?}, but reserving {} fits", got.remaining + 1),
                );
            }
        }
        let full_after = saturating_nanos(got.full_after);
        let Some(drained) = at.checked_add(full_after) else {
            t.fail(
                "snapshot.full_after",
                op,
                at,
                &format!("  {got:?} drains after the end of the clock"),
            );
        };
        // One slot that must start at once: admitted at the drain time, refused by exactly
        // 1 ns just before it (either refused for ever if its slot would end past the clock).
        let end_of_clock = drained.checked_add(self.interval).is_none();
        let then = Model::acquire(&mut self.model.clone(), 1, drained);
        if then.is_err() && !(end_of_clock && then == Err(never)) {
            t.fail(
                "snapshot.full_after too short",
                op,
                at,
                &format!("  {got:?}, but acquiring 1 at at + full_after gives {then:?}"),
            );
        }
        if full_after > 0 {
            let before = Model::acquire(&mut self.model.clone(), 1, drained - 1);
            let by_one = Err(Denied::RateLimited {
                retry_after: Duration::from_nanos(1),
            });
            if before != by_one && !(end_of_clock && before == Err(never)) {
                t.fail(
                    "snapshot.full_after too long",
                    op,
                    at,
                    &format!(
                        "  {got:?}, but acquiring 1 at 1 ns before at + full_after gives {before:?}"
                    ),
                );
            }
        }
        self.trace.record(op, at, TimedOutcome::Snapshot(got));
    }
}

/// A `max_wait`: none, tiny, a number of slots (± 1), any [`biased_u64`] ns, more than
/// `u64::MAX` ns, or `Duration::MAX`.
fn arbitrary_max_wait(u: &mut Unstructured<'_>, interval: u64, burst: u32) -> ArbResult<Duration> {
    Ok(match u.int_in_range(0u8..=4)? {
        0 => Duration::ZERO,
        1 | 2 => Duration::from_nanos(arbitrary_delta(u, interval, burst)?),
        3 => Duration::new(
            u64::MAX / 1_000_000_000 + u.int_in_range(0..=1)?,
            999_999_999,
        ),
        _ => Duration::MAX,
    })
}

fn run_leaky_bucket(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let (_, _, _, quota) = arbitrary_quota(u)?;
    let Ok(quota) = quota else {
        return Ok(());
    };
    if quota.is_sub_nanosecond() {
        // A schedule of whole nanoseconds cannot keep it: refused, never rounded.
        assert!(LeakyBucket::with_clock(quota, ManualClock::new()).is_err());
        return Ok(());
    }
    let limiter =
        LeakyBucket::with_clock(quota, NoClock).expect("LeakyBucket takes every valid quota");
    let start = arbitrary_start(u, &quota)?;
    let (t, burst) = (quota.emission_interval_ns(), quota.burst());
    let mut d = PacerDiff {
        trace: Trace::new(
            "leaky_bucket_differential",
            "LeakyBucket",
            "LeakyBucketModel",
            quota,
            start,
        ),
        limiter: &limiter,
        model: LeakyBucketModel::new(quota),
        now: start,
        interval: t,
        burst,
        last_denied: None,
    };
    let all = (0, u64::MAX);
    for _ in 0..MAX_OPS {
        if u.is_empty() {
            break;
        }
        let now = d.now;
        match u.int_in_range(0u8..=7)? {
            0 => {
                let by = arbitrary_delta(u, t, burst)?;
                d.move_to(TimedOp::Advance(by), now.saturating_add(by));
            }
            1 => {
                let to = arbitrary_time(u, now, all, t, burst)?;
                d.move_to(TimedOp::SetTime(to), to);
            }
            2 => {
                let n = arbitrary_n(u, burst)?;
                d.acquire(TimedOp::Acquire(n), n);
            }
            3 | 4 => {
                let n = arbitrary_n(u, burst)?;
                let max_wait = arbitrary_max_wait(u, t, burst)?;
                d.reserve(TimedOp::Reserve(n, max_wait), n, max_wait);
            }
            5 => {
                let Some((n, max_wait, wait)) = d.last_denied else {
                    continue;
                };
                let by = wait - u64::from(u.arbitrary::<bool>()?);
                d.move_to(TimedOp::WaitRetry(by), now.saturating_add(by));
                match max_wait {
                    None => d.acquire(TimedOp::Acquire(n), n),
                    Some(mw) => d.reserve(TimedOp::Reserve(n, mw), n, mw),
                }
            }
            6 => {
                let at = arbitrary_time(u, now, all, t, burst)?;
                d.snapshot(TimedOp::SnapshotAt(at), at);
            }
            _ => d.snapshot(TimedOp::SnapshotAt(now), now),
        }
    }
    Ok(())
}
