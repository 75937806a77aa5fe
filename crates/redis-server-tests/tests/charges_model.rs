//! Costs known after the work on a real redis-server (issue 37): no charge lost.
//!
//! - `RedisGcra`: 10^4 random sequences of checks of no permits, takes, recorded charges,
//!   a budget's charges, reservations settled below and above their estimate and
//!   reservations refunded whole, at explicit Redis times (µs), against a plain
//!   GCRA-with-debt model in integers (the model the core's `tests/charges.rs` checks the
//!   core against, in µs): every answer, every exact wait and the stored TAT after every
//!   step must be the model's.
//! - `RedisSlidingLog`: random sequences of the same against a model that keeps every
//!   entry.
//! - `LeasedLimiter`: 10^4 random sequences on two nodes (local decisions, reservations,
//!   settles, recorded charges): every charge recorded whole, Redis's TAT holding at least
//!   everything the fleet consumed, and the fleet within its stated bound
//!   (`B + ⌈(t + max(D, R))/T⌉ − 1`, the leased module's "Charges recorded past the
//!   limit", on Redis's own clock).
//!
//! Verdicts never depend on the machine's speed: the exact limiters run at explicit times,
//! and the leased checks are inequalities on Redis's clock that hold however long a step
//! took.

use redis_server_tests as common;

use limitcore::Denied;
use limitcore_redis::{
    GcraReceipt, LeaseConfig, LeasedLimiter, LeasedReceipt, LogReceipt, Policy, Redis, RedisGcra,
    RedisMicros, RedisSlidingLog, Source,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;

/// Around now, in µs since the epoch.
const START_US: u64 = 1_750_000_000_000_000;

/// Sequences of each test that needs 10^4.
const SEQUENCES: u64 = 10_000;

/// Concurrent sequences (each on its own key): the round trips overlap on the multiplexed
/// connection, which the verdicts do not depend on.
const WORKERS: u64 = 8;

/// GCRA with debt in integer µs: the TAT, `T`, `S = burst·T`, the maximum debt `D` (for
/// oversized admissions and a budget's charges), the capacity.
#[derive(Debug, Clone)]
struct GcraWithDebt {
    tat: u64,
    t: u64,
    span: u64,
    debt: u64,
    burst: u32,
    cap: u32,
}

impl GcraWithDebt {
    fn new(limit: &RedisGcra) -> Self {
        let t = limit.interval_us();
        let burst = limit.quota().burst();
        GcraWithDebt {
            tat: 0,
            t,
            span: t * u64::from(burst),
            debt: limit.max_debt().as_micros() as u64,
            burst,
            cap: limit.capacity(),
        }
    }

    fn backlog(&self, now: u64) -> u64 {
        self.tat.saturating_sub(now)
    }

    /// A decision on `n` at `now`: where its schedule started on admission.
    fn take(&mut self, n: u32, now: u64) -> Result<u64, Denied> {
        let wait = |us: u64| Denied::RateLimited {
            retry_after: Duration::from_micros(us),
        };
        let backlog = self.backlog(now);
        if n == 0 {
            return match backlog.checked_sub(self.span) {
                Some(over) if over > 0 => Err(wait(over)),
                _ => Ok(now + backlog),
            };
        }
        if n > self.cap {
            return Err(Denied::ExceedsCapacity { capacity: self.cap });
        }
        if n > self.burst {
            if backlog > 0 {
                return Err(wait(backlog));
            }
            self.tat = now + u64::from(n) * self.t;
            return Ok(now);
        }
        let base = self.tat.max(now);
        let next = base + u64::from(n) * self.t;
        if next - now > self.span {
            return Err(wait(next - now - self.span));
        }
        self.tat = next;
        Ok(base)
    }

    /// A recorded charge: whole, however far past the burst.
    fn record(&mut self, n: u32, now: u64) {
        self.tat = self.tat.max(now) + u64::from(n) * self.t;
    }

    /// A budget's charge, saturating at `S + D` of backlog: (charged, shortfall).
    fn charge(&mut self, n: u32, now: u64) -> (u32, u32) {
        let room = (self.span + self.debt).saturating_sub(self.backlog(now)) / self.t;
        let k = u64::from(n).min(room) as u32;
        if k > 0 {
            self.tat = self.tat.max(now) + u64::from(k) * self.t;
        }
        (k, n - k)
    }

    /// The core's GCRA refund of `n` permits whose schedule started at `base`.
    fn refund(&mut self, base: u64, n: u32, at: u64) {
        let cost = u64::from(n) * self.t;
        let absorbed = cost.min(at.saturating_sub(base));
        self.tat = self.tat.saturating_sub(cost - absorbed);
    }

    fn settle(&mut self, (base, n): (u64, u32), actual: u32, at: u64) {
        if actual > n {
            self.record(actual - n, at);
        } else {
            self.refund(base + u64::from(actual) * self.t, n - actual, at);
        }
    }

    /// The wait of a request for one permit at `now`, as a charge reports it.
    fn next_wait(&self, now: u64) -> Duration {
        Duration::from_micros((self.backlog(now) + self.t).saturating_sub(self.span))
    }
}

/// A step of a sequence (sizes for a limit of burst `b`).
#[derive(Debug, Clone, Copy)]
enum Step {
    Wait(u64),
    Check,
    Take(u32),
    Record(u32),
    Charge(u32),
    /// Reserve `.0`, to be settled to `.1`.
    Reserve(u32, u32),
    Settle,
    Refund,
}

fn step(rng: &mut StdRng, burst: u32, cap: u32, t: u64) -> Step {
    match rng.gen_range(0..24) {
        0..=3 => Step::Wait(rng.gen_range(0..=3 * t)),
        4..=6 => Step::Check,
        7..=9 => Step::Take(match rng.gen_range(0..10) {
            0 => cap + 1,
            1 => rng.gen_range(burst..=cap),
            _ => rng.gen_range(1..=burst),
        }),
        10..=12 => Step::Record(match rng.gen_range(0..40) {
            0 => 1_000_000,
            1 => 0,
            _ => rng.gen_range(1..=2 * burst),
        }),
        13 => Step::Charge(rng.gen_range(0..=2 * burst)),
        14..=18 => Step::Reserve(rng.gen_range(1..=burst), rng.gen_range(0..=2 * burst)),
        19..=21 => Step::Settle,
        _ => Step::Refund,
    }
}

/// The stored TAT of `key` (µs), if any.
async fn stored(redis: &Redis, key: &str) -> Option<u64> {
    let value = redis.command(redis::cmd("GET").arg(key)).await.unwrap();
    match value {
        redis::Value::Nil => None,
        redis::Value::BulkString(bytes) => Some(String::from_utf8(bytes).unwrap().parse().unwrap()),
        other => panic!("a TAT: {other:?}"),
    }
}

/// Run sequence `seed` on `limit` (a fresh key) against the model; the steps it took.
async fn gcra_sequence(redis: &Redis, limit: &RedisGcra, seed: u64) -> [usize; 4] {
    let mut rng = StdRng::seed_from_u64(seed);
    let key = format!("gcra-{seed}");
    let redis_key = limit.redis_key(&key);
    let mut model = GcraWithDebt::new(limit);
    let (t, burst, cap) = (model.t, model.burst, model.cap);
    let mut now = START_US + rng.gen_range(0..1_000_000);
    let mut open: Vec<(GcraReceipt, (u64, u32), u32)> = Vec::new();
    // Checks of no permits refused, records past the burst, settles below and above.
    let mut seen = [0usize; 4];
    let len = rng.gen_range(1..=30);
    for _ in 0..len {
        let s = step(&mut rng, burst, cap, t);
        let at = RedisMicros::new(now);
        let ctx = format!("seed {seed}, {s:?} at {now}, model before {model:?}");
        match s {
            Step::Wait(d) => now += d,
            Step::Check | Step::Take(_) => {
                let n = if let Step::Take(n) = s { n } else { 0 };
                let got = limit.try_decide_at(&key, n, at).await.unwrap();
                let want = model.take(n, now).map(|_| ());
                assert_eq!(got.decision.result, want, "{}", ctx);
                if n == 0 && want.is_err() {
                    seen[0] += 1;
                }
            }
            Step::Record(n) => {
                let got = limit.try_record_at(&key, n, at).await.unwrap();
                model.record(n, now);
                assert_eq!(
                    (got.charged.charged, got.charged.shortfall),
                    (n, 0),
                    "{}",
                    ctx
                );
                assert_eq!(got.charged.wait, model.next_wait(now), "{}", ctx);
                if model.backlog(now) > model.span {
                    seen[1] += 1;
                }
            }
            Step::Charge(n) => {
                let got = limit.try_charge_at(&key, n, at).await.unwrap();
                let want = model.charge(n, now);
                assert_eq!(
                    (got.charged.charged, got.charged.shortfall),
                    want,
                    "{}",
                    ctx
                );
            }
            Step::Reserve(e, a) => {
                let got = limit.try_reserve_at(&key, e, at).await.unwrap();
                let want = model.take(e, now);
                assert_eq!(got.answer.decision.result, want.map(|_| ()), "{}", ctx);
                if let (Some(receipt), Ok(base)) = (got.receipt, want) {
                    assert_eq!((receipt.n(), receipt.mark()), (e, RedisMicros::new(base)));
                    open.push((receipt, (base, e), a));
                }
            }
            Step::Settle | Step::Refund => {
                if let Some((receipt, reserved, a)) = open.pop() {
                    let actual = if let Step::Refund = s { 0 } else { a };
                    let got = limit
                        .try_settle_at(&key, receipt, actual, at)
                        .await
                        .unwrap();
                    model.settle(reserved, actual, now);
                    let excess = actual.saturating_sub(reserved.1);
                    assert_eq!(
                        (got.charged.charged, got.charged.shortfall),
                        (excess, 0),
                        "{}",
                        ctx
                    );
                    assert_eq!(got.charged.wait, model.next_wait(now), "{}", ctx);
                    seen[if actual < reserved.1 { 2 } else { 3 }] += 1;
                }
            }
        }
        // The state itself: the TAT the model holds whenever it lies ahead, none that does
        // otherwise (an idle TAT is any time at or before now).
        let tat = stored(redis, &redis_key).await;
        if model.tat > now {
            assert_eq!(tat, Some(model.tat), "the TAT after {}", ctx);
        } else {
            assert!(tat.is_none_or(|t| t <= now), "{tat:?} after {}", ctx);
        }
    }
    // Whatever is still open is settled at its estimate: nothing changes.
    for (receipt, _, _) in open {
        let got = limit
            .try_settle_at(&key, receipt, 0, RedisMicros::new(now))
            .await;
        assert!(got.is_ok());
    }
    seen
}

/// Run `SEQUENCES` sequences `run(seed)` on `WORKERS` concurrent tasks; the sums of what they
/// saw.
async fn run_all<F, Fut>(run: F) -> [usize; 4]
where
    F: Fn(u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = [usize; 4]> + Send,
{
    let mut set = tokio::task::JoinSet::new();
    for w in 0..WORKERS {
        let run = run.clone();
        set.spawn(async move {
            let mut sum = [0usize; 4];
            for seed in (w..SEQUENCES).step_by(WORKERS as usize) {
                let seen = run(seed).await;
                for (s, x) in sum.iter_mut().zip(seen) {
                    *s += x;
                }
            }
            sum
        });
    }
    let mut total = [0usize; 4];
    while let Some(sum) = set.join_next().await {
        for (t, x) in total.iter_mut().zip(sum.unwrap()) {
            *t += x;
        }
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcra_charges_settles_and_refunds_equal_the_model_in_ten_thousand_sequences() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let limits: Vec<RedisGcra> = vec![
        // T = 100 ms, burst 3.
        common::gcra(&redis, "10/s burst 3"),
        // T = 1 ms, burst 20.
        common::gcra(&redis, "1000/s burst 20"),
        // T = 142,858 µs (1/7 s rounded up to the µs), burst 5, 350 ms of debt.
        common::gcra(&redis, "7/s burst 5")
            .with_max_debt(Duration::from_millis(350))
            .unwrap(),
        // T = 1 µs, burst 1: the resolution itself, a pure pacer.
        common::gcra(&redis, "1/us burst 1"),
    ];
    let limits = std::sync::Arc::new(limits);
    let seen = run_all(move |seed| {
        let (redis, limits) = (redis.clone(), limits.clone());
        async move {
            let limit = &limits[(seed % limits.len() as u64) as usize];
            gcra_sequence(&redis, limit, seed).await
        }
    })
    .await;
    println!(
        "10^4 GCRA sequences: {} checks of no permits refused in debt, {} records past the \
         burst, {} settles below the estimate, {} at or above it",
        seen[0], seen[1], seen[2], seen[3]
    );
    assert!(seen.iter().all(|&s| s > 1_000), "{seen:?}");
}

/// The sliding log keeping every entry: times of the entries, in order.
#[derive(Debug, Clone, Default)]
struct Log {
    entries: Vec<(u64, u64)>,
    next: u64,
    period: u64,
    count: u32,
}

impl Log {
    fn inside(&self, now: u64) -> (u64, usize) {
        let rec = self.entries.last().map_or(now, |e| e.0.max(now));
        let inside = self
            .entries
            .iter()
            .filter(|e| e.0 + self.period > rec)
            .count();
        (rec, inside)
    }

    /// The wait until `k` more entries fit at `now`.
    fn wait(&self, k: u32, now: u64) -> u64 {
        let (rec, inside) = self.inside(now);
        let _ = rec;
        if inside + k as usize <= self.count as usize {
            return 0;
        }
        let m = self.entries.len();
        let e = self.entries[m + k as usize - self.count as usize - 1].0;
        e + self.period - now
    }

    fn take(&mut self, n: u32, now: u64) -> Result<(u64, u64), Denied> {
        if n > self.count {
            return Err(Denied::ExceedsCapacity {
                capacity: self.count,
            });
        }
        let wait = self.wait(n, now);
        if wait > 0 {
            return Err(Denied::RateLimited {
                retry_after: Duration::from_micros(wait),
            });
        }
        let (rec, _) = self.inside(now);
        let first = self.next;
        self.add(rec, n);
        Ok((rec, first))
    }

    fn add(&mut self, rec: u64, n: u32) {
        for _ in 0..n {
            self.entries.push((rec, self.next));
            self.next += 1;
        }
    }

    fn record(&mut self, n: u32, now: u64) {
        let (rec, _) = self.inside(now);
        self.add(rec, n);
    }

    fn settle(&mut self, (first, n): (u64, u32), actual: u32, now: u64) {
        if actual > n {
            self.record(actual - n, now);
        } else {
            let gone = first + u64::from(actual)..first + u64::from(n);
            self.entries.retain(|e| !gone.contains(&e.1));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_log_charges_and_settles_equal_the_model() {
    let server = common::server();
    let redis = common::connect(&server).await;
    let log =
        RedisSlidingLog::new(redis.clone(), "5/s".parse().unwrap(), Policy::FailClosed).unwrap();
    let log = std::sync::Arc::new(log);
    let (mut refused_checks, mut settles) = (0, 0);
    let mut set = tokio::task::JoinSet::new();
    for w in 0..WORKERS {
        let log = log.clone();
        set.spawn(async move {
            let (mut refused_checks, mut settles) = (0, 0);
            for seed in (w..2_000).step_by(WORKERS as usize) {
                let mut rng = StdRng::seed_from_u64(0x106 + seed);
                let key = format!("log-{seed}");
                let mut model = Log {
                    period: 1_000_000,
                    count: 5,
                    ..Log::default()
                };
                let mut now = START_US;
                let mut open: Vec<(LogReceipt, (u64, u32), u32)> = Vec::new();
                for _ in 0..rng.gen_range(1..=25) {
                    let s = step(&mut rng, 5, 5, 200_000);
                    let at = RedisMicros::new(now);
                    let ctx = format!("seed {seed}, {s:?} at {now}");
                    match s {
                        Step::Wait(d) => now += d,
                        Step::Check | Step::Take(_) => {
                            let n = if let Step::Take(n) = s { n } else { 0 };
                            let got = log.try_decide_at(&key, n, at).await.unwrap();
                            let want = model.take(n, now).map(|_| ());
                            assert_eq!(got.decision.result, want, "{ctx}");
                            refused_checks += usize::from(n == 0 && want.is_err());
                        }
                        Step::Record(n) | Step::Charge(n) => {
                            // Anything past count + 1 (a thousand, twice the burst) is
                            // stored as count + 1 entries: as strict, as the model checks.
                            let n = n.min(1_000);
                            let got = log.try_record_at(&key, n, at).await.unwrap();
                            model.record(n, now);
                            assert_eq!((got.charged.charged, got.charged.shortfall), (n, 0));
                            let wait = Duration::from_micros(model.wait(1, now));
                            assert_eq!(got.charged.wait, wait, "{ctx}");
                        }
                        Step::Reserve(e, a) => {
                            let got = log.try_reserve_at(&key, e, at).await.unwrap();
                            let want = model.take(e, now);
                            assert_eq!(got.answer.decision.result, want.map(|_| ()), "{ctx}");
                            if let (Some(r), Ok((rec, first))) = (got.receipt, want) {
                                assert_eq!((r.n(), r.at()), (e, RedisMicros::new(rec)));
                                open.push((r, (first, e), a));
                            }
                        }
                        Step::Settle | Step::Refund => {
                            if let Some((r, reserved, a)) = open.pop() {
                                let actual = if let Step::Refund = s { 0 } else { a };
                                let got = log.try_settle_at(&key, r, actual, at).await.unwrap();
                                model.settle(reserved, actual, now);
                                let excess = actual.saturating_sub(reserved.1);
                                assert_eq!(got.charged.charged, excess, "{ctx}");
                                let wait = Duration::from_micros(model.wait(1, now));
                                assert_eq!(got.charged.wait, wait, "{ctx}");
                                settles += 1;
                            }
                        }
                    }
                    // After every step a check of no permits (which consumes nothing)
                    // gets the model's exact wait: the log's whole state as the limit sees
                    // it (when enough entries leave for it to be within its limit again).
                    let want = Duration::from_micros(model.wait(0, now));
                    let got = log
                        .try_decide_at(&key, 0, RedisMicros::new(now))
                        .await
                        .unwrap();
                    assert_eq!(
                        got.decision.retry_after().unwrap_or_default(),
                        want,
                        "check after {ctx}"
                    );
                }
            }
            (refused_checks, settles)
        });
    }
    while let Some(r) = set.join_next().await {
        let (a, b) = r.unwrap();
        refused_checks += a;
        settles += b;
    }
    println!("sliding log: {refused_checks} checks of no permits refused, {settles} settles");
    assert!(
        refused_checks > 100 && settles > 1_000,
        "{refused_checks} {settles}"
    );
}

/// Redis's `TIME`, µs.
async fn redis_time(redis: &Redis) -> u64 {
    let value = redis.command(&redis::cmd("TIME")).await.unwrap();
    let redis::Value::Array(parts) = value else {
        panic!("TIME: {value:?}")
    };
    let part = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8(b.clone())
            .unwrap()
            .parse::<u64>()
            .unwrap(),
        other => panic!("TIME: {other:?}"),
    };
    part(&parts[0]) * 1_000_000 + part(&parts[1])
}

/// One leased sequence on a fresh key, on two nodes, checked on Redis's clock; what it saw:
/// ended in debt, records that left a wait, settles at or below and above the estimate.
async fn leased_sequence(
    redis: &Redis,
    nodes: &[LeasedLimiter],
    check: &RedisGcra,
    seed: u64,
) -> [usize; 4] {
    let mut rng = StdRng::seed_from_u64(0x1ea5 + seed);
    let key = format!("leased-{seed}");
    let (t, burst) = (check.interval_us(), check.quota().burst());
    let start = redis_time(redis).await;
    let (mut admitted, mut recorded) = (0u64, 0u64);
    let mut open: Vec<(usize, LeasedReceipt, u32)> = Vec::new();
    let mut seen = [0usize; 4];
    for _ in 0..rng.gen_range(1..=12) {
        let node = rng.gen_range(0..nodes.len());
        let limiter = &nodes[node];
        match rng.gen_range(0..10) {
            0..=2 => {
                let n = rng.gen_range(1..=limiter.max_lease());
                if limiter.acquire(&key, n).await.is_admitted() {
                    admitted += u64::from(n);
                }
            }
            3..=5 => {
                let n = match rng.gen_range(0..20) {
                    0 => 10 * burst,
                    _ => rng.gen_range(0..=2 * burst),
                };
                let c = limiter.record(&key, n).await;
                assert_eq!(
                    (c.charged.charged, c.charged.shortfall),
                    (n, 0),
                    "seed {seed}: a record is never refused nor cut: {c:?}"
                );
                assert!(!matches!(c.source, Source::Fallback { .. }), "{c:?}");
                recorded += u64::from(n);
                seen[1] += usize::from(c.charged.wait > Duration::ZERO);
            }
            6..=7 => {
                let e = rng.gen_range(1..=limiter.max_lease());
                if let (verdict, Some(receipt)) = limiter.reserve(&key, e).await {
                    assert!(verdict.decision.is_admitted());
                    admitted += u64::from(e);
                    open.push((node, receipt, rng.gen_range(0..=2 * e)));
                }
            }
            _ => {
                if let Some((node, receipt, actual)) = open.pop() {
                    let excess = actual.saturating_sub(receipt.n());
                    let c = nodes[node].settle(&key, receipt, actual).await;
                    assert_eq!(
                        (c.charged.charged, c.charged.shortfall),
                        (excess, 0),
                        "{c:?}"
                    );
                    recorded += u64::from(excess);
                    seen[2 + usize::from(excess > 0)] += 1;
                }
            }
        }
    }
    for (node, receipt, _) in open {
        nodes[node].settle(&key, receipt, 0).await;
    }
    // Redis's state after the sequence, on its own clock: the TAT holds everything the
    // fleet consumed (every admission spent a cell Redis granted, every record's rest was
    // recorded there), so nothing was lost; and what the fleet consumed is within the bound
    // with the debt still owed.
    let end = redis_time(redis).await;
    let tat = stored(redis, &check.redis_key(&key)).await;
    // An expired key's TAT was at or before `end` (its TTL is its backlog, rounded up).
    let tat = tat.unwrap_or(end).max(start);
    let consumed = admitted + recorded;
    assert!(
        tat - start >= consumed * t,
        "seed {seed}: Redis holds {} µs of {consumed} permits",
        tat - start
    );
    // The bound on Redis's clock over the window `[start, end]` (Δ = end − start + 1 µs),
    // with the debt still owed at its end: the last call left the TAT at `tat`, so what
    // Redis consumed, which every admission and record of the fleet is part of, is below
    // `(Δ + S + max(D, owed))/T`.
    let span = t * u64::from(burst);
    let owed = tat.saturating_sub(end).saturating_sub(span);
    let debt = owed.max(check.max_debt().as_micros() as u64);
    let bound = u64::from(burst) + (end - start + 1 + debt).div_ceil(t) - 1;
    assert!(
        consumed <= bound,
        "seed {seed}: the fleet consumed {consumed} > B + ⌈(Δ + max(D, R))/T⌉ − 1 = {bound}"
    );
    seen[0] += usize::from(owed > 0);
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_records_and_settles_lose_nothing_and_stay_within_the_bound() {
    let server = common::server();
    let quota = "100/min burst 20";
    let config = LeaseConfig::new(4).ttl(Duration::from_secs(30));
    let mut nodes = Vec::new();
    let mut handles = Vec::new();
    for id in ["node-a", "node-b"] {
        let redis = common::connect_with(&server.url(), common::config().node_id(id)).await;
        nodes.push(
            LeasedLimiter::new(
                redis.clone(),
                quota.parse().unwrap(),
                config.clone(),
                Policy::FailClosed,
            )
            .unwrap(),
        );
        handles.push(redis);
    }
    let redis = handles[0].clone();
    let check = common::gcra(&redis, quota);
    let nodes = std::sync::Arc::new(nodes);
    let check = std::sync::Arc::new(check);
    let seen = run_all(move |seed| {
        let (redis, nodes, check) = (redis.clone(), nodes.clone(), check.clone());
        async move { leased_sequence(&redis, &nodes, &check, seed).await }
    })
    .await;
    println!(
        "10^4 leased sequences: {} ended in debt, {} records left a wait, {} settles below \
         or at the estimate, {} above",
        seen[0], seen[1], seen[2], seen[3]
    );
    assert!(seen.iter().all(|&s| s > 500), "{seen:?}");
}
