//! The exact Redis backend: one script call decides every descriptor of a request, all
//! or nothing, atomically on Redis's clock, for every algorithm.
//!
//! # The script
//!
//! `KEYS`: one per descriptor, `{prefix}{domain}:rule:counter` (the hash tag `{domain}`
//! keeps a domain's keys in one slot, as a script on Redis Cluster requires). `ARGV`: the
//! mode (`a` all or nothing, `e` charge each), what becomes of a refused descriptor's hits
//! (`r` recorded, `d` dropped), the time in µs (empty: Redis's `TIME`; a number: an
//! explicit time, for tests and replays, and then no key gets an expiry), then six per
//! descriptor: the algorithm (`g` GCRA and token bucket with `T` µs and the burst; `f`
//! fixed window, `w` sliding window, `l` sliding log, each with its period in µs and its
//! count), its two numbers, the operation (`t` take, `c` check, `r` negative hits), `n`,
//! and `1` if a refusal of it is soft (shadow or quota mode). It reads the time once,
//! gives every negative hit back first, then decides every descriptor in order on a local
//! copy of each key's state (a key named twice sees its first charge), exactly as the
//! in-process backend decides the same request (the core's `Batch` for all or nothing):
//! all or nothing, a refusal puts every state back as the negative hits left it, and the
//! descriptors are answered as the batch answers them (those before the refusal alone, the
//! later ones only checked); charge each, every descriptor on its own. Then, with `r`,
//! every refused take is recorded on its descriptor past the limit (the core's
//! `charge_at`), and only the states that changed are written. It returns three integers
//! per descriptor: admitted (1/0), permits remaining, and the reset in µs (admitted: until
//! full; refused: until the same request would be admitted, or until full when none
//! would).
//!
//! # The algorithms
//!
//! Each is the core's rule (`limitcore::rules`), in µs on Redis's clock, so that a
//! request decided here and in process at the same whole-µs time gets the same answer:
//!
//! - **GCRA** (and the token bucket, which decides as GCRA): a TAT, admitted iff
//!   `max(TAT, now) + n·T − now ≤ burst·T`; a check refused while `TAT − now > burst·T` (in
//!   debt); a charge moves the TAT by `n·T` whatever it was, up to a backlog of 2^51 µs (71
//!   years; the rest is not recorded, where the core's ns word holds up to its 584-year
//!   clock); a negative hit moves it back by `n·T`, never before `now`.
//! - **Fixed window**: `"k:count"`, window `⌊now / period⌋` of the Unix epoch (as
//!   envoyproxy/ratelimit's), at most `count` in it; a check refused while the count is
//!   past the limit. As in the core, a count is held up to `2^b − 1` (`b` the bit length
//!   of `count + 1`): a charge past it leaves it there, *saturated*, and a saturated count
//!   gives nothing back to a negative hit (its true count is unknown; the window is closed
//!   to its end either way).
//! - **Sliding window**: `"k:prev:curr"`, Cloudflare's estimate
//!   `⌈prev·(P − e)/P⌉ + curr + n ≤ count` with the core's rounding and exact waits, the
//!   counts held and saturated as the core holds them (a saturated count weighs as the
//!   whole limit while it counts); a reading from a window before the stored one decides
//!   against the stored one at its start.
//! - **Sliding log**: `"L"` and a MessagePack array of runs `t, n` (n entries at time `t`
//!   µs), oldest first: exact "at most `count` in any window `(t − P, t]`" (the
//!   `(count − n + 1)`-th newest entry must have left the window); a charge records its
//!   entries however many the window holds, and the log is over its limit (every request
//!   refused, a check too, and a negative hit gives nothing back) until its `(count +
//!   1)`-th newest entry has left the window, as the core's ring with its `over_until`.
//!   Runs that left the window, and those older than the newest `count + 1` entries, are
//!   dropped: a call reads and writes at most `count + 1` runs.
//!
//! Each key expires when its state is fresh again. Every number stays below 2^53: µs times
//! of today are about 2^50.6, a period is at most a year (2^45 µs), a count at most 2^25,
//! and the sliding window's products (`prev·e`, `a·P`) are formed in 6-bit limbs
//! (`muldiv`), every partial sum below 2^52.

use super::memory::rule::RuleLimiter;
use super::memory::Memory;
use super::{Backend, BackendError, Item, Mode, Op, Outcome, RefusedHits};
use crate::clock::SharedClock;
use crate::config::Limit;
use limitcore::Algorithm;
use limitcore_redis::scripts::Script;
use limitcore_redis::{gcra_micros, Policy, Redis};
use redis::Value;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The decision script (see the module docs).
pub(crate) const SCRIPT: &str = r#"
local mode, record = ARGV[1], ARGV[2] == 'r'
local now, explicit = tonumber(ARGV[3]), true
if now == nil then
  local t = redis.call('TIME')
  now, explicit = tonumber(t[1]) * 1000000 + tonumber(t[2]), false
end
-- The most backlog a charge records on a GCRA key, µs (2^51: 71 years).
local MAXB = 2251799813685248
local function fdiv(x, y) return (x - x % y) / y end
-- floor(a·b/c) for integers 0 <= a < 2^53, 0 <= b <= 2^45, 0 < c <= 2^45 whose quotient is
-- below 2^53: a in 6-bit limbs, every partial sum below 2^52, exact in doubles.
local function muldiv(a, b, c)
  local limbs, q, r = {}, 0, 0
  while a > 0 do
    local l = a % 64
    limbs[#limbs + 1] = l
    a = (a - l) / 64
  end
  for j = #limbs, 1, -1 do
    local x = r * 64 + limbs[j] * b
    local d = fdiv(x, c)
    q, r = q * 64 + d, x - d * c
  end
  return q
end
-- The largest count a window's field holds, 2^b - 1 (b the bit length of count + 1): a
-- count there is saturated, as in the core.
local function ceiling(count)
  local p = 1
  while p <= count + 1 do p = p * 2 end
  return p - 1
end
local function ttl(k, us)
  if us <= 0 then
    redis.call('DEL', k)
  end
  return us > 0
end
local function put(k, value, us)
  if explicit then
    redis.call('SET', k, value)
  else
    redis.call('SET', k, value, 'PX', math.ceil(us / 1000) + 1)
  end
end
local alg, p1, p2, ops, ns, soft = {}, {}, {}, {}, {}, {}
for i = 1, #KEYS do
  local b = 3 + (i - 1) * 6
  alg[i], p1[i], p2[i], ops[i], ns[i], soft[i] = ARGV[b + 1], tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), ARGV[b + 4], tonumber(ARGV[b + 5]), ARGV[b + 6] == '1'
  if ops[i] == 'c' then ns[i] = 0 end
end
-- Each algorithm: load (the state as seen at now), check (ok, or the wait in µs, -1 when
-- no wait admits n), take, charge, credit, snap (remaining, full after), store.
local A = {}
-- GCRA: the TAT in µs.
local G = {}
A.g = G
function G.load(raw)
  local tat = tonumber(raw)
  if tat == nil or tat < 0 or tat % 1 ~= 0 then tat = 0 end
  return {tat = tat}
end
local function backlog(s)
  if s.tat > now then return s.tat - now end
  return 0
end
function G.check(s, i, n)
  local t, burst = p1[i], p2[i]
  local span, b = t * burst, backlog(s)
  if n == 0 then
    if b > span then return false, b - span end
    return true, 0
  end
  if n > burst then return false, -1 end
  local ahead = b + n * t
  if ahead > span then return false, ahead - span end
  return true, 0
end
function G.take(s, i, n) s.tat = now + backlog(s) + n * p1[i] end
function G.charge(s, i, n)
  local t, b = p1[i], backlog(s)
  local room = MAXB - b
  if room < 0 then room = 0 end
  room = fdiv(room, t)
  if n > room then n = room end
  s.tat = now + b + n * t
end
function G.credit(s, i, n)
  if s.tat <= now then return end
  local t = p1[i]
  if n > fdiv(s.tat - now, t) then s.tat = now else s.tat = s.tat - n * t end
end
function G.snap(s, i)
  local t, b = p1[i], backlog(s)
  local free = t * p2[i] - b
  if free < 0 then free = 0 end
  return fdiv(free, t), b
end
function G.store(k, s, i)
  if ttl(k, s.tat - now) then put(k, string.format('%.0f', s.tat), s.tat - now) end
end
-- Fixed window: the window number and its count.
local F = {}
A.f = F
function F.load(raw, i)
  local k = fdiv(now, p1[i])
  local s = {w = k, c = 0}
  local w, c = string.match(raw or '', '^(%d+):(%d+)$')
  w, c = tonumber(w), tonumber(c)
  -- A later window starts from zero; an earlier reading counts against the stored one.
  if w and w >= k then s.w, s.c = w, c end
  return s
end
local function until_end(s, i) return (s.w + 1) * p1[i] - now end
function F.check(s, i, n)
  local count = p2[i]
  if n == 0 then
    if s.c > count then return false, until_end(s, i) end
    return true, 0
  end
  if n > count then return false, -1 end
  if s.c + n > count then return false, until_end(s, i) end
  return true, 0
end
function F.take(s, i, n) s.c = s.c + n end
function F.charge(s, i, n) s.c = math.min(s.c + n, ceiling(p2[i])) end
function F.credit(s, i, n)
  if s.c == 0 or s.c == ceiling(p2[i]) then return end
  s.c = s.c - math.min(s.c, n)
end
function F.snap(s, i)
  if s.c == 0 then return p2[i], 0 end
  return math.max(p2[i] - s.c, 0), until_end(s, i)
end
function F.store(k, s, i)
  put(k, string.format('%.0f', s.w) .. ':' .. string.format('%.0f', s.c), until_end(s, i))
end
-- Sliding window: the stored window number and the counts of it and the one before, seen
-- from now (the core's `Counter::window`): `at` is the time decided at.
local W = {}
A.w = W
function W.load(raw, i)
  local period = p1[i]
  local kn = fdiv(now, period)
  local s = {k = kn, prev = 0, curr = 0, at = now}
  local k, p, c = string.match(raw or '', '^(%d+):(%d+):(%d+)$')
  k, p, c = tonumber(k), tonumber(p), tonumber(c)
  if not k or (p == 0 and c == 0) then return s end
  if k == kn then
    s.prev, s.curr = p, c
  elseif k == kn - 1 then
    s.prev = c
  elseif k > kn then
    -- A reading from before the stored window: decided against it, at its start.
    s.k, s.prev, s.curr, s.at = k, p, c, k * period
  end
  return s
end
local function weighted(s, i)
  -- ceil(prev·(P − e)/P) = prev − floor(prev·e/P).
  return s.prev - muldiv(s.prev, s.at - s.k * p1[i], p1[i])
end
local function available(s, i)
  return math.max(p2[i] - s.curr - weighted(s, i), 0)
end
local function saturated(s, i)
  local top = ceiling(p2[i])
  return s.prev == top or s.curr == top
end
-- The core's `Counter::retry_after`: the wait until n fit (available < n, n <= count).
local function retry_after(s, i, n)
  local period, count = p1[i], p2[i]
  local start = s.k * period
  local at
  if count >= s.curr + n and s.prev > 0 then
    local a = count - s.curr - n
    local f = period
    if a < s.prev then f = muldiv(a, period, s.prev) end
    if f > 0 then at = start + period - f end
  end
  if at == nil then
    if s.curr == 0 then
      at = start + period
    else
      local a = count - n
      local f = period
      if a < s.curr then f = muldiv(a, period, s.curr) end
      at = start + 2 * period - f
    end
  end
  return at - now
end
-- The core's `Counter::wait`: a saturated count weighs as the whole limit while it counts.
local function wait(s, i, n)
  if not saturated(s, i) then return retry_after(s, i, n) end
  local period = p1[i]
  if s.curr == ceiling(p2[i]) then return (s.k + 2) * period - now end
  local nxt = {k = s.k + 1, prev = s.curr, curr = 0, at = (s.k + 1) * period}
  if available(nxt, i) >= n then return nxt.at - now end
  return retry_after(nxt, i, n)
end
function W.check(s, i, n)
  local count = p2[i]
  if n == 0 then
    if saturated(s, i) or s.curr + weighted(s, i) > count then return false, wait(s, i, 0) end
    return true, 0
  end
  if n > count then return false, -1 end
  local room = 0
  if not saturated(s, i) then room = available(s, i) end
  if room < n then return false, wait(s, i, n) end
  return true, 0
end
function W.take(s, i, n) s.curr = s.curr + n end
function W.charge(s, i, n) s.curr = math.min(s.curr + n, ceiling(p2[i])) end
function W.credit(s, i, n)
  if s.curr == 0 or s.curr == ceiling(p2[i]) then return end
  s.curr = s.curr - math.min(s.curr, n)
end
local function full_after(s, i)
  local left = 0
  if s.curr > 0 then left = 2 elseif s.prev > 0 then left = 1 end
  if left == 0 then return 0 end
  return math.max((s.k + left) * p1[i] - now, 0)
end
function W.snap(s, i)
  local room = 0
  if not saturated(s, i) then room = available(s, i) end
  return room, full_after(s, i)
end
function W.store(k, s, i)
  local us = full_after(s, i)
  if ttl(k, us) then
    put(k, string.format('%.0f', s.k) .. ':' .. string.format('%.0f', s.prev) .. ':' .. string.format('%.0f', s.curr), us)
  end
end
-- Sliding log: runs {t1, n1, t2, n2, ...} of entry times (µs), oldest first.
local L = {}
A.l = L
function L.load(raw)
  local runs = {}
  if raw and string.sub(raw, 1, 1) == 'L' then
    local ok, v = pcall(cmsgpack.unpack, string.sub(raw, 2))
    if ok and type(v) == 'table' and #v % 2 == 0 then runs = v end
  end
  return {runs = runs}
end
-- The time an entry is recorded at: never before the newest (the log stays sorted).
local function tlog(s)
  local r = s.runs
  if #r > 0 and r[#r - 1] > now then return r[#r - 1] end
  return now
end
-- The k-th newest entry's time (k >= 1), or nil when the log holds fewer.
local function newest(s, k)
  local r, acc = s.runs, 0
  for j = #r - 1, 1, -2 do
    acc = acc + r[j + 1]
    if acc >= k then return r[j] end
  end
  return nil
end
-- The wait until entry e has left the window, or nil if it has.
local function inside(s, i, e)
  if e ~= nil and e + p1[i] > tlog(s) then return e + p1[i] - now end
  return nil
end
function L.check(s, i, n)
  local count = p2[i]
  if n > count then return false, -1 end
  local w = inside(s, i, newest(s, count - n + 1))
  if w then return false, w end
  return true, 0
end
function L.take(s, i, n)
  local r, t = s.runs, tlog(s)
  if #r > 0 and r[#r - 1] == t then
    r[#r] = r[#r] + n
  else
    r[#r + 1], r[#r + 2] = t, n
  end
end
L.charge = L.take
function L.credit(s, i, n)
  if not L.check(s, i, 0) then return end
  local r, t, period = s.runs, tlog(s), p1[i]
  while n > 0 and #r > 0 and r[#r - 1] + period > t do
    local gone = math.min(n, r[#r])
    n, r[#r] = n - gone, r[#r] - gone
    if r[#r] == 0 then
      r[#r] = nil
      r[#r] = nil
    end
  end
end
function L.snap(s, i)
  local r, t, period = s.runs, tlog(s), p1[i]
  local count, within = p2[i], 0
  for j = #r - 1, 1, -2 do
    if r[j] + period <= t then break end
    within = within + r[j + 1]
  end
  local full = 0
  if within > 0 then full = math.max(r[#r - 1] + period - now, 0) end
  if not L.check(s, i, 0) then return 0, full end
  return math.max(count - within, 0), full
end
function L.store(k, s, i)
  local r, period, keep = s.runs, p1[i], p2[i] + 1
  -- Runs that left the window never count again, and only the newest count + 1 entries
  -- decide anything: drop the rest from the oldest end.
  local total = 0
  for j = 2, #r, 2 do total = total + r[j] end
  local first = 1
  while first <= #r and (r[first] + period <= now or total - r[first + 1] >= keep) do
    total = total - r[first + 1]
    first = first + 2
  end
  local kept = {}
  for j = first, #r do kept[#kept + 1] = r[j] end
  if #kept == 0 then
    redis.call('DEL', k)
    return
  end
  put(k, 'L' .. cmsgpack.pack(kept), kept[#kept - 1] + period - now)
end
local function copy(s)
  local c = {}
  for f, v in pairs(s) do
    if type(v) == 'table' then
      local t = {}
      for j = 1, #v do t[j] = v[j] end
      c[f] = t
    else
      c[f] = v
    end
  end
  return c
end
local state = {}
for i = 1, #KEYS do
  local k = KEYS[i]
  if state[k] == nil then state[k] = A[alg[i]].load(redis.call('GET', k), i) end
end
-- Negative hits first: never refused, kept whatever the decision.
for i = 1, #KEYS do
  if ops[i] == 'r' then
    local s = state[KEYS[i]]
    A[alg[i]].credit(s, i, ns[i])
    s.dirty = true
  end
end
local out = {}
local function answer(i, ok, wait)
  local left, full = A[alg[i]].snap(state[KEYS[i]], i)
  if ok then return {1, left, full} end
  if wait < 0 then wait = full end
  return {0, left, wait}
end
local saved = {}
for k, s in pairs(state) do saved[k] = copy(s) end
local decided, refusal = {}, nil
for i = 1, #KEYS do
  if ops[i] ~= 'r' then
    local s = state[KEYS[i]]
    local ok, wait = A[alg[i]].check(s, i, ns[i])
    if ok and ns[i] > 0 then
      A[alg[i]].take(s, i, ns[i])
      s.dirty = true
    end
    decided[i] = {ok, wait}
    if not ok and not soft[i] and mode == 'a' then
      refusal = i
      break
    end
    out[i] = answer(i, ok, wait)
  end
end
if refusal then
  -- All or nothing: every state as the negative hits left it; the descriptors before the
  -- refusal answered alone, the later ones only checked.
  state = {}
  for k, s in pairs(saved) do state[k] = copy(s) end
  for i = 1, #KEYS do
    if ops[i] ~= 'r' then
      if i <= refusal then
        out[i] = answer(i, decided[i][1], decided[i][2])
      else
        local ok, wait = A[alg[i]].check(state[KEYS[i]], i, ns[i])
        out[i] = answer(i, ok, wait)
      end
    end
  end
end
if record then
  -- A refused take is recorded on its descriptor past the limit (a charge after the
  -- response must never be lost), and answered on the state it left.
  for i = 1, #KEYS do
    if ops[i] == 't' and out[i][1] == 0 then
      local s = state[KEYS[i]]
      A[alg[i]].charge(s, i, ns[i])
      s.dirty = true
      local ok, wait = A[alg[i]].check(s, i, ns[i])
      if ok then wait = -1 end
      out[i] = answer(i, false, wait)
    end
  end
end
local reply = {}
for i = 1, #KEYS do
  local o = out[i]
  if ops[i] == 'r' then
    local left, full = A[alg[i]].snap(state[KEYS[i]], i)
    o = {1, left, full}
  end
  reply[#reply + 1], reply[#reply + 2], reply[#reply + 3] = o[1], o[2], o[3]
end
for i = 1, #KEYS do
  local k = KEYS[i]
  local s = state[k]
  if s.dirty then
    s.dirty = false
    A[alg[i]].store(k, s, i)
  end
end
return reply
"#;

/// [`SCRIPT`] with its SHA1, hashed once per process.
fn script() -> &'static Script {
    static HASHED: std::sync::OnceLock<Script> = std::sync::OnceLock::new();
    HASHED.get_or_init(|| Script::new(SCRIPT))
}

/// One rule's state in the exact Redis backend ([`RedisExact`]'s
/// [`Backend::Rule`]): its key prefix and numbers on Redis, and its local limit for the
/// `fail-local` policy. Built by [`Backend::rule`].
#[derive(Debug)]
pub struct RuleParams {
    pub(crate) limit: Limit,
    /// `{prefix}{domain}:path:` — a descriptor's counter key follows.
    key_prefix: String,
    alg: &'static str,
    p1: u64,
    p2: u64,
    /// The local limiter the `fail-local` policy decides on (the rate divided by the node
    /// count Redis's heartbeats last reported, at the time the rule was loaded).
    local: Option<Arc<RuleLimiter>>,
}

/// The exact Redis backend: one script call decides every descriptor of a request, all or
/// nothing (or each on its own), atomically on Redis's clock; the outage policy decides
/// while Redis cannot (`fail-local`: in process, on [`Memory`], at the rate divided by the
/// node count).
///
/// # Examples
///
/// ```no_run
/// use limitcore_redis::{Policy, Redis, RedisConfig};
/// use limitcore_rls::{Memory, Options, RedisExact, Service, UnixClock};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
/// let local = Memory::new(UnixClock::shared(), 100_000);
/// let exact = RedisExact::new(redis, Policy::FailLocal, "lcrls:", local);
/// exact.load_script().await?;
/// let service = Service::new(exact, Options::default());
/// # let _ = service;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisExact {
    redis: Redis,
    policy: Policy,
    prefix: String,
    local: Memory,
    /// Decide at this clock's time instead of Redis's `TIME` (tests and replays).
    clock: Option<SharedClock>,
}

impl std::fmt::Debug for RedisExact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisExact")
            .field("policy", &self.policy)
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl RedisExact {
    /// The backend on `redis`, deciding by `policy` when Redis cannot answer, with keys
    /// under `prefix`; `local` is the in-process backend the `fail-local` policy uses.
    pub fn new(redis: Redis, policy: Policy, prefix: impl Into<String>, local: Memory) -> Self {
        RedisExact {
            redis,
            policy,
            prefix: prefix.into(),
            local,
            clock: None,
        }
    }

    /// The same backend deciding at `clock`'s time (ns since the Unix epoch, rounded down
    /// to the µs) instead of Redis's `TIME`: for tests and replays, which then decide at
    /// explicit times, exactly as the in-process backend does on the same clock. Keys get
    /// no expiry then (an expiry runs on the server's clock, which this time is not): do
    /// not mix such decisions with clock-time ones on one server.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore::clock::ManualClock;
    /// use limitcore_redis::{Policy, Redis, RedisConfig};
    /// use limitcore_rls::{Memory, RedisExact, UnixClock};
    /// use std::sync::Arc;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let clock = Arc::new(ManualClock::starting_at(1_767_225_600_000_000_000));
    /// let exact = RedisExact::new(redis, Policy::Propagate, "replay:", Memory::new(clock.clone(), 1000))
    ///     .with_clock(clock);
    /// # let _ = exact;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Load the script (`SCRIPT LOAD`), so that every decision is one `EVALSHA` from the
    /// first on (a server restarted or flushed since is answered `NOSCRIPT` once, and the
    /// call repeated with `EVAL`).
    ///
    /// # Errors
    ///
    /// Redis's error.
    pub async fn load_script(&self) -> Result<(), limitcore_redis::Error> {
        let mut cmd = redis::cmd("SCRIPT");
        cmd.arg("LOAD").arg(script().body());
        self.redis.command(&cmd).await.map(|_| ())
    }

    /// The Redis handle.
    pub fn redis(&self) -> &Redis {
        &self.redis
    }

    /// The outage policy's decision.
    fn fallback(
        &self,
        items: &[Item<'_, RuleParams>],
        params: &[&RuleParams],
        mode: Mode,
        refused: RefusedHits,
        error: limitcore_redis::Error,
    ) -> Result<Vec<Outcome>, BackendError> {
        match self.policy {
            Policy::FailOpen => Ok(items
                .iter()
                .zip(params)
                .map(|(_, p)| Outcome::admitted(p.limit.requests_per_unit, Duration::ZERO))
                .collect()),
            Policy::FailClosed => Ok(items
                .iter()
                .map(|i| match i.op {
                    Op::Take(_) => Outcome::refused(0, self.redis.config().get_cooldown()),
                    _ => Outcome::admitted(0, Duration::ZERO),
                })
                .collect()),
            Policy::FailLocal => {
                let limiters: Vec<&RuleLimiter> = params
                    .iter()
                    .map(|p| {
                        p.local
                            .as_deref()
                            .ok_or_else(|| BackendError(error.to_string()))
                    })
                    .collect::<Result<_, _>>()?;
                self.local.decide_on(items, |i| limiters[i], mode, refused)
            }
            _ => Err(BackendError(format!("redis: {error}"))),
        }
    }
}

impl Backend for RedisExact {
    type Rule = RuleParams;

    /// A rule's numbers.
    fn rule(
        &self,
        scope: &str,
        limit: Limit,
        _previous: Option<&Arc<RuleParams>>,
    ) -> Result<Arc<RuleParams>, BackendError> {
        let quota = limit
            .quota()
            .map_err(|e| BackendError(format!("{scope}: {e}")))?;
        let (alg, p1, p2) = match limit.algorithm {
            Algorithm::Gcra | Algorithm::TokenBucket => {
                let (t, burst) =
                    gcra_micros(&quota).map_err(|e| BackendError(format!("{scope}: {e}")))?;
                ("g", t, u64::from(burst))
            }
            // The windows and the log in µs: a period is at most a year (2^45 µs), and the
            // quota's own checks bound the counts (2^24 for the sliding ones).
            Algorithm::FixedWindow => (
                "f",
                limit.unit.seconds() * 1_000_000,
                u64::from(limit.requests_per_unit),
            ),
            Algorithm::SlidingWindow => (
                "w",
                limit.unit.seconds() * 1_000_000,
                u64::from(limit.requests_per_unit),
            ),
            Algorithm::SlidingLog => (
                "l",
                limit.unit.seconds() * 1_000_000,
                u64::from(limit.requests_per_unit),
            ),
            other => {
                return Err(BackendError(format!(
                    "{scope}: {other} rules are not available on the redis-exact backend"
                )))
            }
        };
        let (domain, path) = scope.split_once(' ').unwrap_or((scope, ""));
        let local = if self.policy == Policy::FailLocal {
            let nodes = self.redis.nodes().max(1);
            let share = Limit {
                requests_per_unit: (limit.requests_per_unit / nodes).max(1),
                burst: limit.burst.map(|b| (b / nodes).max(1)),
                ..limit
            };
            Some(self.local.rule(scope, share, None)?)
        } else {
            None
        };
        Ok(Arc::new(RuleParams {
            limit,
            key_prefix: format!("{}{{{domain}}}:{path}:", self.prefix),
            alg,
            p1,
            p2,
            local,
        }))
    }

    /// Decide `items` in one script call; when Redis cannot answer, by the policy.
    #[allow(clippy::manual_async_fn)] // The trait's future must be `Send`.
    fn decide(
        &self,
        _domain: &str,
        items: &[Item<'_, RuleParams>],
        mode: Mode,
        refused: RefusedHits,
    ) -> impl Future<Output = Result<Vec<Outcome>, BackendError>> + Send {
        async move {
            let params: Vec<&RuleParams> = items.iter().map(|i| i.rule).collect();
            let keys: Vec<String> = items
                .iter()
                .zip(&params)
                .map(|(i, p)| format!("{}{}", p.key_prefix, i.key))
                .collect();
            let mut args: Vec<String> = Vec::with_capacity(3 + items.len() * 6);
            args.push(if mode == Mode::AllOrNothing { "a" } else { "e" }.to_owned());
            args.push(
                if refused == RefusedHits::Record {
                    "r"
                } else {
                    "d"
                }
                .to_owned(),
            );
            args.push(match &self.clock {
                Some(clock) => (clock.now() / 1_000).to_string(),
                None => String::new(),
            });
            for (item, p) in items.iter().zip(&params) {
                let (op, n) = match item.op {
                    Op::Take(n) => ("t", n),
                    Op::Check => ("c", 0),
                    Op::Refund(n) => ("r", n),
                };
                args.push(p.alg.to_owned());
                args.push(p.p1.to_string());
                args.push(p.p2.to_string());
                args.push(op.to_owned());
                args.push(n.to_string());
                args.push(if item.soft { "1" } else { "0" }.to_owned());
            }
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            match self.redis.eval(script(), &keys, &args).await {
                Ok(value) => parse(&value, items.len()),
                Err(e) => self.fallback(items, &params, mode, refused, e),
            }
        }
    }
}

/// The script's reply: three integers per descriptor.
fn parse(value: &Value, n: usize) -> Result<Vec<Outcome>, BackendError> {
    let bad = || BackendError(format!("unexpected script reply {value:?}"));
    let Value::Array(items) = value else {
        return Err(bad());
    };
    if items.len() != n * 3 {
        return Err(bad());
    }
    let int = |v: &Value| match v {
        Value::Int(i) => Some(*i),
        _ => None,
    };
    items
        .chunks(3)
        .map(|c| {
            let (a, left, reset) = (
                int(&c[0]).ok_or_else(bad)?,
                int(&c[1]).ok_or_else(bad)?,
                int(&c[2]).ok_or_else(bad)?,
            );
            let remaining = left.clamp(0, i64::from(u32::MAX)) as u32;
            let reset = Duration::from_micros(reset.max(0) as u64);
            Ok(if a == 1 {
                Outcome::admitted(remaining, reset)
            } else {
                Outcome::refused(remaining, reset)
            })
        })
        .collect()
}
