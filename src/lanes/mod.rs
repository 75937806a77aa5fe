//! Priority lanes over one budget (feature `std`): [`Lanes`], a limiter that shares one
//! byte rate (or any unit's) between lanes of requests, the top lane strictly first and the
//! others by weight, with no refill quantum.
//!
//! A storage engine runs user reads, flushes, compactions and backups against one disk
//! budget. RocksDB's `GenericRateLimiter` does it with a mutex, a 100 ms refill and four
//! priority queues (`IO_USER` always first; for the others each refill flips two coins of
//! 1/`fairness` to pick an order), so a user read waits about one refill period behind a
//! compaction (its PR #12379 measured 100.2 ms at 100 ms). TiKV's `IoRateLimiter` has three
//! levels, a `fetch_add` fast path and 50 ms epochs that reserve budget for the higher
//! levels from their recent use. Netflix's partitioned limiter gives each class a share of
//! one limit and lets it borrow what the others leave. Here:
//!
//! - **One budget, exact times.** The lanes share one [`Budget`](crate::Budget): GCRA on its
//!   exact unit clock (`"64MiB/s burst 1MiB"` exactly). Every grant happens at the first
//!   time its units fit the budget (the GCRA time), not at a refill: there is no quantum.
//! - **Lock-free when nobody waits.** A request whose lane has nobody ahead of it takes
//!   what fits with one compare-and-swap on the budget word ([`Lanes::try_acquire`],
//!   [`Lanes::take_up_to`], the first step of every wait). Only what does not fit joins a
//!   queue, one per lane, behind a mutex.
//! - **Lanes.** Lane 0 ([`Lane::TOP`]) is served strictly first; its requests never wait
//!   behind another lane's waiting requests (its fast path ignores them). Lanes `1..` share
//!   the rest by weight ([`LanesConfig::weights`]; RocksDB's `fairness = 10` shares, 90 : 9 :
//!   1, by default), by start-time fair queuing on the units granted (see "Weighted lanes").
//! - **Pieces.** A waiting request is granted in pieces of at most [`LanesConfig::piece`]
//!   units (a sixteenth of the burst, at most 64 KiB, by default), each when it fits whole,
//!   so requests of any size are granted (RocksDB's and TiKV's partial grants), and a
//!   large request of a low lane never holds the budget for long.
//! - **Waits**: [`Lanes::acquire`] and [`Lanes::acquire_owned`] (futures with feature
//!   `tokio`), [`Lanes::acquire_blocking`] (the same wait on the blocking driver), or at
//!   explicit times ([`Lanes::submit_at`], [`Ticket`]). Cancellation-safe: a wait dropped
//!   before it ends leaves its lane's queue at once (see [`Ticket`]'s "Cancellation").
//! - **Live reconfiguration** ([`Lanes::reconfigure`]) of the rate, burst, mode, weights and
//!   piece; every waiting request is decided again at once.
//! - **Auto-tuning** ([`AutoTune`]): RocksDB's rule, on the exact share of time requests
//!   waited.
//! - **Counters** per lane ([`LaneCounts`]): units granted, requests, pending, delayed,
//!   cancelled, total wait.
//!
//! # Layers
//!
//! 1. The rules, pure and testable at explicit times: the schedule (which waiting request
//!    gets the next piece: `schedule.rs`) and the auto-tuning rule (`tune.rs`).
//! 2. The shared state ([`Lanes`], `shared.rs`): the budget word, the lanes' waiting flags
//!    (one `AtomicU64`), the schedule behind a mutex, the counters; the lock-free fast path
//!    there, the queue's steps under the lock in `queue.rs`.
//! 3. The waits (`wait.rs`): [`Ticket`] at explicit times, [`Acquire`] and [`AcquireOwned`]
//!    (run blocking or async).
//!
//! # Notation
//!
//! `τ`: the budget's time per unit (ns; `1/rate`, exact); `B`: the burst (units); `P`: the
//! piece; `b(t)`: the backlog, how far the budget's TAT lies ahead of `t` (0 when full). A
//! request of `p` units *fits* at `t` iff `b(t) + p·τ ≤ B·τ`. The bounds below are for the
//! schedule served at the exact times it asks for (as [`Ticket::poll_at`] at each
//! [`Progress::Waiting`]'s `next`, and as the tests check); a real waiter adds its own
//! wake-up latency (the OS timer's, the thread's scheduling). Times are whole ns: a piece
//! of the whole burst (`P = B`) fits only when the budget is full, and a full budget
//! restarts from the reading rounded up to its unit, so each such piece may add up to 1 ns
//! to the bounds below (pieces smaller than the burst, the default for bursts above 1,
//! never find the budget full while anything waits).
//!
//! **(I) `b(t) ≤ B·τ` at every `t`**, between reconfigurations (a cut of the burst keeps the
//! backlog): every grant, on the fast path or a piece, is made only when it fits, and there
//! is no debt.
//!
//! # Top lane
//!
//! **A top-lane request of `n` units made at `t₀`, with `Q` units of earlier top-lane
//! requests still to grant, is granted in full by `t₀ + max(0, b(t₀) + (Q + n)·τ − B·τ)`,
//! so it waits at most `(Q + n)·τ`**: what is already granted ahead of it (`b(t₀)`, at most
//! the burst) drains while it waits, and only the top lane's own queue is ahead of it. At
//! 64 MiB/s a 64 KiB read with no other top-lane request ahead waits at most 0.977 ms.
//!
//! *Proof.* From `t₀` until it is granted the top lane's queue is not empty, so its flag is
//! set: no request of another lane takes on the fast path (their fast path yields to any
//! flag), no serve grants another lane a piece (the top lane is picked first), and later
//! top-lane requests queue behind it. So the units granted in `(t₀, f]` are exactly the
//! `Q + n` of the top lane ahead of and including it. While a piece waits it does not fit:
//! `b > B·τ − p·τ ≥ 0`, so the budget never idles (but for `p = B`, above) and its TAT
//! grows by exactly the units
//! granted: `TAT(f⁻) = TAT(t₀) + (Q + n − p)·τ` before the last piece `p`, which is granted
//! at the first `f` where it fits: `TAT(f⁻) − f + p·τ = B·τ`. So
//! `f = t₀ + b(t₀) + (Q + n)·τ − B·τ` when that is after `t₀`, and everything is granted
//! at `t₀` otherwise; with (I), `f − t₀ ≤ (Q + n)·τ`. ∎ A grant of another lane that raced
//! the request's arrival (it read the flag before the request set it) is ordered before
//! the arrival and counted in `b(t₀)`.
//!
//! # Weighted lanes
//!
//! Each weighted lane `i` has a weight `wᵢ` and a tag `vᵢ` (its units served divided by its
//! weight, in 2^-64 units, rounded up per piece); the next piece goes to the waiting lane
//! with the least tag, and a lane that starts waiting takes the tag `max(vᵢ, V)`, where `V`
//! is the tag the last weighted piece was served at (start-time fair queuing, Goyal, Vin and
//! Cheng, 1996).
//!
//! **Floor.** Let lane `i` have a waiting request throughout a window of length `Δ` with no
//! reconfiguration; `W` the sum of the weighted lanes' weights, `m` their number, `U₀` the
//! units granted to the top lane in the window, `r = 1/τ` the rate. Then lane `i` is granted
//! at least
//!
//! ```text
//! Gᵢ ≥ (wᵢ / W) · (r·Δ − P − U₀) − m·P − 1
//! ```
//!
//! units in the window: its weight's share of what the top lane leaves, less a few pieces.
//! A lane with demand is never starved unless the top lane takes the whole rate (the top
//! lane is strictly first, as RocksDB's `IO_USER` and TiKV's high priority are).
//!
//! *Proof.* (a) *The window's grants.* `b ≤ B·τ` at its start (I) and `b > (B − P)·τ` at
//! its end (lane `i`'s next piece does not fit), and the budget never idles while a piece
//! waits, so the units granted satisfy `G·τ = Δ + b(end) − b(start) > Δ − P·τ`:
//! `G > r·Δ − P`, of which `G − U₀` go to weighted lanes (no weighted request takes on the
//! fast path while `i` waits: its flag is set). (b) *Tags.* `V` never decreases (it is the
//! least tag of a waiting lane, and every waiting lane's tag is at least `V`); every tag is
//! at most `V + P/wₗ + 2^-64` (a lane is served only at the least tag, `V`, and then grows
//! by at most a piece; a lane that starts waiting takes at most that). While `i` waits its
//! tag grows by its pieces exactly, from at most `V(start) + P/wᵢ + 2^-64` to at least
//! `V(end)`; another lane `j`'s pieces in the window raise its tag from at least `V(start)`
//! to at most `V(end) + P/wⱼ + 2^-64`. So `Gⱼ/wⱼ ≤ Gᵢ/wᵢ + P/wᵢ + P/wⱼ + (kᵢ + 2)·2^-64`
//! (`kᵢ` pieces). Multiplying by `wⱼ` and summing over `j ≠ i`:
//! `Gᵢ ≥ (wᵢ/W)·(G − U₀) − P·(W + (m − 2)·wᵢ)/W − wᵢ·(kᵢ + 2)·2^-64`, and the last two
//! terms are at most `m·P` and 1. With (a): the floor. ∎
//!
//! Between two lanes that both wait throughout a window, the shares differ by at most
//! `P/wᵢ + P/wⱼ` in units per weight (SFQ's fairness bound), and over any window the budget
//! grants at most `r·Δ + B` in all (GCRA), at least `r·Δ − P` while anything waits.
//!
//! # No lost wake-up
//!
//! The queue, the flags and the timer change only with the queue's lock held. Every step
//! that can make a waiting piece fit sooner — time passing, a reconfiguration, a
//! cancellation (a new head, or units passed on) — serves the queue under the lock, and a
//! fast-path grant only makes pieces fit later. Each serve ends by keeping one waiting
//! request as the *timer*, whose deadline is at most the time the next piece fits: the
//! serving waiter itself (it then sleeps at most until that time, on the clock's
//! [`sleep_hint`](crate::clock::Clock::sleep_hint)), or another waiter, woken after the lock
//! is released to learn it. A timer that is granted in full or gives up is replaced in the
//! same critical section. A request granted in full is woken after the lock is released; a
//! blocking waiter looks at its entry under the lock before it sleeps, and a wake-up between
//! the look and the sleep leaves its token set (a flag behind a mutex with a condition
//! variable, which loom models whole); an async waiter's waker is replaced
//! under the lock at each poll. RocksDB's hang (#11742: a request that joined the queue
//! while the only waiter sleeping on the refill was elsewhere in `TimedWait` never woke) has
//! no counterpart: the serve that queues a request keeps a timer. The loom models in
//! `loom-tests/tests/lanes.rs` check the fast path against the queue: no unit granted twice,
//! no waiter left asleep, reconfiguration during a wait.
//!
//! # Cancellation
//!
//! A waiting request that gives up (its deadline; a dropped future or [`Ticket`]) leaves its
//! queue under the lock; the units it was granted in pieces pass to the next waiting
//! requests of its lane, in order, and those nobody in its lane waits for stay charged (a
//! cancellation never refunds the budget, so it can never make it more permissive than its
//! rate: a refund of units granted earlier could be spent again in a window that already
//! had them).
//!
//! # Sources
//!
//! RocksDB `util/rate_limiter.cc` (`GenericRateLimiter`: priorities, `fairness`, partial
//! grants of the front request, `SetBytesPerSecond`, `SetSingleBurstBytes`, `auto_tuned`,
//! per-priority counters) and its tests; TiKV `components/file_system/src/rate_limiter.rs`
//! (`IoRateLimiter`: levels, the `fetch_add` fast path, partial grants); Netflix
//! concurrency-limits' `AbstractPartitionedLimiter` (shares of one limit); Goyal, Vin and
//! Cheng, "Start-time Fair Queuing", SIGCOMM 1996.

mod config;
mod counts;
mod queue;
mod schedule;
mod shared;
mod tune;
mod wait;

pub use config::{
    Lane, LaneError, LanesConfig, LanesConfigError, DEFAULT_MAX_PIECE, MAX_LANES, MAX_WEIGHT,
};
pub use counts::LaneCounts;
pub use shared::Lanes;
pub use tune::AutoTune;
#[cfg(feature = "io")]
pub(crate) use wait::Entry;
#[allow(deprecated)]
pub use wait::Waiter;
pub use wait::{Acquire, AcquireOwned, Progress, Ticket};
