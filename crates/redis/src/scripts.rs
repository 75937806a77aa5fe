//! The server-side Lua scripts: each decision is one script call (one round trip), run
//! atomically by Redis, reading Redis's own `TIME` as the only clock.
//!
//! # Numbers
//!
//! Redis's Lua sees every number as a double, exact for integers up to 2^53. Every time
//! and duration here is an integer number of **microseconds**, and the scripts check
//! their bounds before any arithmetic:
//!
//! - the emission interval `T ≥ 1` µs, and the burst span plus the maximum debt `burst·T +
//!   D ≤ 2^52` µs (142 years; Rust checks this before calling, the script checks it
//!   again);
//! - `now ≤ 2^52` µs (the Unix epoch plus 142 years; `TIME` gives about 2^50.6 today);
//! - a stored TAT is at most `now + 2^52 ≤ 2^53` (an admission leaves `max(TAT, now) + n·T
//!   ≤ now + burst·T`, an oversized one `now + n·T ≤ now + burst·T + D`, a charge at most
//!   `now + burst·T + D`, a recorded charge or a settle's excess at most `now + 2^52`, a
//!   refund only lowers it), a backlog `TAT − now` at most 2^53, and the TAT a call writes
//!   at most `now + 2^52`: every sum stays within 2^53, exact;
//! - `n·T ≤ burst·T + D` because `n` above the capacity `⌊(burst·T + D)/T⌋` is refused
//!   before it is multiplied, and a charge's `n` is cut to the room left,
//!   `⌊(burst·T + D − backlog)/T⌋`, before it is (a charge of `u32::MAX` permits of an
//!   interval of 2^52 µs never forms the product); a wait `backlog − (burst·T − n·T)` is a
//!   difference of two exact integers below 2^53, exact.
//! - A recorded charge (debt past the burst, "Debt and charges") is cut to the room below
//!   a backlog of 2^52 µs, `⌊(2^52 − backlog)/T⌋`, before it is multiplied, so the TAT it
//!   writes is at most `now + 2^52 ≤ 2^53`; a settle's estimate is at most the capacity
//!   (a reservation's), so its refund `(estimate − actual)·T` and the used part
//!   `actual·T` are at most `burst·T + D`, and the time since the reservation, `now −
//!   mark`, is a difference of two exact integers.
//!
//! Numbers are written back with `string.format('%.0f', x)` (Lua's default conversion,
//! `%.14g`, would round a 16-digit time) and returned to Redis as integers.
//!
//! # Replies
//!
//! The sliding-log and all-or-nothing scripts return `{code, granted, retry_us, remaining,
//! full_after_us, now_us}`: `code` 1 admitted, 0 rate limited, −1 exceeds capacity;
//! `granted` the cells taken; `retry_us` the exact wait for the same request (0 when
//! admitted); `remaining` and `full_after_us` the state the decision left; `now_us` the
//! time it was decided at.
//!
//! The GCRA script decides one or more requests on one key in one call (read once, written
//! once, at one instant) and returns `{now_us, granted, retry_us, backlog_us, …}`: the
//! time, then three integers per request, in order: the cells taken (the lease may take
//! fewer than asked; a charge takes what fits below `burst·T + D`), the exact wait (for a
//! decision: 0 when admitted, −1 when `n` exceeds the capacity; for a charge: the wait of
//! a request for one permit after it, 0 when it would be admitted) and the backlog
//! `TAT − now` it left in µs, which is its `full_after`; the permits remaining,
//! `⌊(burst·T − backlog)/T⌋` (0 in debt), follow from it.
//!
//! # Debt and charges
//!
//! With a maximum debt `D > 0` µs the capacity is `⌊(burst·T + D)/T⌋` permits: a request
//! of `burst < n ≤` capacity is admitted iff the key is full (`TAT ≤ now`), and then
//! leaves the backlog `n·T` (in debt: later requests wait until it is repaid); while the
//! key is not full it is refused with the exact wait `TAT − now`. A charge of `n` is never
//! refused: it takes `min(n, ⌊(burst·T + D − backlog)/T⌋)` permits (the rest is the
//! caller's shortfall). `D = 0` is the plain GCRA: `n > burst` is refused, and a charge
//! saturates at an empty bucket. These are the core's [`Budget`](limitcore::Budget)
//! decisions, in µs.
//!
//! A **recorded** charge (costs known after the work: an LLM response's tokens) is never
//! refused and never saturates at `D`: it adds `n·T` to the backlog however far past the
//! burst (the debt; only a backlog past 2^52 µs, 142 years, cannot be written, and what
//! does not fit is the caller's reported shortfall). A **settle** of a reservation of `e`
//! permits that started at schedule position `mark` (µs, `max(TAT, now)` at the
//! reservation) to its actual cost `a` charges `a − e` the same way when `a > e`, and when
//! `a < e` gives back the unused tail, `(e − a)·T` from position `mark + a·T`, less what a
//! reading since then may have absorbed, `min((e − a)·T, now − (mark + a·T))`: the
//! core's GCRA refund, never more permissive than charging `a` up front. A request for
//! **no permits** is refused while the backlog is past the burst's span (`backlog >
//! burst·T`: in debt), with the exact wait `backlog − burst·T`, and admitted otherwise
//! (Envoy's `hits_addend: 0`). Each integer returned costs Redis 7.0 about
//! 0.15 µs on this project's machine (`INFO commandstats`), so a request returns three,
//! not six; and its arguments are checked inline, with the prelude's `int` run only to
//! raise a failed check's error (a function call per argument was a fifth of its time).
//!
//! # Explicit time
//!
//! An optional argument (the GCRA script's fifth, the others' last) replaces `TIME` by an
//! explicit time in µs, for tests and replays (the differential tests drive the scripts
//! this way). Such a call sets **no expiry**: a key's TTL is measured on the server's
//! clock, which an explicit time is not.
//!
//! # A caller's own scripts
//!
//! [`Script`] and [`Redis::eval`](crate::Redis::eval) run any Lua script the way these are
//! run: by its SHA1 (`EVALSHA`), loaded again with `EVAL` when the server answers
//! `NOSCRIPT`, within the handle's deadline and behind its breaker. limitcore-rls's exact
//! backend runs its multi-descriptor script this way.

/// Helpers every script starts with (the number checks, the clock, the formatting).
const PRELUDE: &str = r#"
local P52 = 4503599627370496
local function int(v, name, lo, hi)
  local x = tonumber(v)
  if x == nil or x ~= math.floor(x) or x < lo or x > hi then
    error('limitcore: ' .. name .. ' must be an integer in [' .. string.format('%.0f', lo) .. ', ' .. string.format('%.0f', hi) .. '], got ' .. tostring(v))
  end
  return x
end
local function clock(arg)
  if arg ~= nil and arg ~= '' then
    return int(arg, 'now', 0, P52), true
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]), false
end
local function fmt(x) return string.format('%.0f', x) end
local function ms(us) return math.max(1, math.ceil(us / 1000)) end
"#;

/// GCRA (ATM Forum TM 4.0, virtual scheduling) on one key holding the TAT in µs, with a
/// debt policy and forced charges: one or more requests decided in order at one instant
/// (a batch reads and writes the key once).
///
/// `KEYS[1]` the TAT; `ARGV`: `T` µs, `burst`, `D` (the maximum debt, µs; 0: none), the
/// operation (`"0"` decide; `"1"` take up to `n`, at least 1: the lease; `"2"` charge
/// `n`, never refused, saturating at `burst·T + D`; `"3"` record `n` as debt, never
/// refused; `"4"` settle a reservation), `now` (µs, or `""` for `TIME`), then `n` of each
/// request, or for a settle its estimate, its mark (µs) and its actual cost. The reply is
/// described in the [module docs](self), "Replies" (a settle's `granted` is the excess
/// recorded).
const GCRA_BODY: &str = r#"
local t, burst, debt = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if not (t and t >= 1 and t <= P52 and t % 1 == 0) then int(ARGV[1], 'interval', 1, P52) end
if not (burst and burst >= 1 and burst <= P52 and burst % 1 == 0) then int(ARGV[2], 'burst', 1, P52) end
if not (debt and debt >= 0 and debt <= P52 and debt % 1 == 0) then int(ARGV[3], 'debt', 0, P52) end
local span = t * burst
if span > P52 then error('limitcore: burst * interval exceeds 2^52 us') end
local ceiling = span + debt
if ceiling > P52 then error('limitcore: burst * interval + debt exceeds 2^52 us') end
local cap = burst
if debt > 0 then cap = (ceiling - ceiling % t) / t end
local op = ARGV[4]
local upto, charge, record, settle = op == '1', op == '2', op == '3', op == '4'
if not (upto or charge or record or settle or op == '0') then error('limitcore: operation must be 0, 1, 2, 3 or 4, got ' .. tostring(op)) end
local now, explicit = clock(ARGV[5])
if #ARGV < 6 then error('limitcore: no request') end
local raw = redis.call('GET', KEYS[1])
local backlog = 0
if raw then
  local tat = tonumber(raw)
  if not (tat and tat >= 0 and tat <= 2 * P52 and tat % 1 == 0) then int(raw, 'state', 0, 2 * P52) end
  if tat > now then backlog = tat - now end
end
local out, o, wrote = {now}, 1, false
-- Records `k` permits as debt, however far past the burst, up to a backlog of 2^52 us
-- (142 years: the TAT then stays below 2^53); `k` is cut to that room before it is
-- multiplied. Returns the permits recorded.
local function debt(k)
  local room = P52 - backlog
  if room < 0 then room = 0 end
  room = (room - room % t) / t
  if k > room then k = room end
  if k > 0 then
    backlog = backlog + k * t
    wrote = true
  end
  return k
end
if settle then
  -- A reservation of `est` permits from schedule position `mark`, settled to `actual`.
  if #ARGV ~= 8 then error('limitcore: settle takes the estimate, the mark and the actual cost') end
  local est = int(ARGV[6], 'estimate', 0, cap)
  local mark = int(ARGV[7], 'mark', 0, 2 * P52)
  local actual = int(ARGV[8], 'actual', 0, P52)
  local granted = 0
  if actual > est then
    granted = debt(actual - est)
  elseif actual < est then
    -- The unused tail, (est - actual) permits from `mark + actual*T`, given back but for
    -- the part a reading since then may have absorbed: the core's GCRA refund. Every
    -- product is at most cap*T <= burst*T + D <= 2^52; `now - mark` is formed only as a
    -- difference of two exact integers.
    local cost = (est - actual) * t
    local kept = now - mark
    if kept > 0 then kept = kept - actual * t end
    if kept < 0 then kept = 0 end
    if kept > cost then kept = cost end
    local give = cost - kept
    if give > 0 and backlog > 0 then
      if give > backlog then backlog = 0 else backlog = backlog - give end
      wrote = true
    end
  end
  local retry = backlog - (span - t)
  if retry < 0 then retry = 0 end
  out[2], out[3], out[4] = granted, retry, backlog
  if wrote then
    if explicit then
      redis.call('SET', KEYS[1], fmt(now + backlog))
    elseif backlog > 0 then
      redis.call('SET', KEYS[1], fmt(now + backlog), 'PX', ms(backlog))
    else
      redis.call('DEL', KEYS[1])
    end
  end
  return out
end
for i = 6, #ARGV do
  local n = tonumber(ARGV[i])
  if not (n and n >= 0 and n <= P52 and n % 1 == 0) then int(ARGV[i], 'n', 0, P52) end
  local granted, retry = 0, 0
  if record then
    granted = debt(n)
    retry = backlog - (span - t)
    if retry < 0 then retry = 0 end
  elseif charge then
    local room = ceiling - backlog
    if room < 0 then room = 0 end
    room = (room - room % t) / t
    if n > room then n = room end
    if n > 0 then
      backlog = backlog + n * t
      granted, wrote = n, true
    end
    retry = backlog - (span - t)
    if retry < 0 then retry = 0 end
  else
    if upto and n > 0 then
      local free = span - backlog
      if free < 0 then free = 0 end
      free = (free - free % t) / t
      if n > free then n = free end
      if n == 0 then n = 1 end
    end
    if n > cap then
      retry = -1
    elseif n > burst then
      if backlog > 0 then
        retry = backlog
      else
        backlog = n * t
        granted, wrote = n, true
      end
    elseif n > 0 then
      local allowance = span - n * t
      if backlog > allowance then
        retry = backlog - allowance
      else
        backlog = backlog + n * t
        granted, wrote = n, true
      end
    elseif backlog > span then
      -- No permits: refused while in debt (a backlog past the burst's span), until paid.
      retry = backlog - span
    end
  end
  out[o + 1], out[o + 2], out[o + 3] = granted, retry, backlog
  o = o + 3
end
if wrote then
  if explicit then
    redis.call('SET', KEYS[1], fmt(now + backlog))
  else
    redis.call('SET', KEYS[1], fmt(now + backlog), 'PX', ms(backlog))
  end
end
return out
"#;

/// The fair lease: up to `n` cells of a key's GCRA (as the GCRA script's "take up to"),
/// and no more than the asking node's max-min fair share allows: a GCRA of its own per node,
/// at its share of the key's rate, beside the key's (see [`fair`](crate::fair) for the
/// design and its proofs).
///
/// `KEYS[1]` the key's TAT (the GCRA script's), `KEYS[2]` the key's fair-share hash (one
/// field per node: `"demand tat expires"`, demand in millionths of the key's rate, times in
/// µs); `ARGV`: `T` µs, `burst`, `now` (µs, or `""` for `TIME`), `n` (at least 1), the node's
/// id, its demand (`1 ..= 10^6`), the horizon its report lives (µs). Returns `{now,
/// granted, retry_us, backlog_us, share_ppm, nodes}`: the GCRA script's four for one
/// request, then the node's share (millionths of the key's rate) and the live nodes
/// counted (the asking one included).
const FAIR_BODY: &str = r#"
local M = 1000000
local t, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
if not (t and t >= 1 and t <= P52 and t % 1 == 0) then int(ARGV[1], 'interval', 1, P52) end
if not (burst and burst >= 1 and burst <= P52 and burst % 1 == 0) then int(ARGV[2], 'burst', 1, P52) end
local span = t * burst
if span > P52 then error('limitcore: burst * interval exceeds 2^52 us') end
local now, explicit = clock(ARGV[3])
local want = int(ARGV[4], 'n', 1, P52)
local node = ARGV[5]
if node == nil or node == '' then error('limitcore: no node id') end
local demand = int(ARGV[6], 'demand', 1, M)
local horizon = int(ARGV[7], 'horizon', 1, P52)
local function fdiv(x, y) return (x - x % y) / y end
local function cdiv(x, y) local s = x + y - 1; return (s - s % y) / y end
-- The key's GCRA.
local raw = redis.call('GET', KEYS[1])
local backlog = 0
if raw then
  local tat = tonumber(raw)
  if not (tat and tat >= 0 and tat <= 2 * P52 and tat % 1 == 0) then int(raw, 'state', 0, 2 * P52) end
  if tat > now then backlog = tat - now end
end
local free = span - backlog
if free < 0 then free = 0 end
free = fdiv(free, t)
-- The live nodes' demands (the asking node's from its request), their expired reports.
local fields = redis.call('HGETALL', KEYS[2])
local ds, dead, mine, last = {demand}, {}, 0, now + horizon
for i = 1, #fields, 2 do
  local f = fields[i]
  local d, tat, exp = string.match(fields[i + 1], '^(%d+) (%d+) (%d+)$')
  d, tat, exp = tonumber(d), tonumber(tat), tonumber(exp)
  if f == node then
    if tat and tat <= 2 * P52 then mine = tat end
  elseif d and exp and d >= 1 and d <= M and exp > now and exp <= 2 * P52 then
    ds[#ds + 1] = d
    if exp > last then last = exp end
  else
    dead[#dead + 1] = f
  end
end
-- Max-min fair shares of M by water-filling: the smallest demands are met while they fit
-- an equal split of what is left; the rest share it equally (rounded down).
table.sort(ds)
local rest, k, level = M, #ds, nil
for _, d in ipairs(ds) do
  if d * k <= rest then
    rest = rest - d
    k = k - 1
  else
    level = fdiv(rest, k)
    break
  end
end
local share
if level == nil then
  share = demand + fdiv(rest, #ds)
elseif demand < level then
  share = demand
else
  share = level
end
if share < 1 then share = 1 end
-- The node's GCRA: interval ceil(T * M / share) µs (at most 2^52 / burst), burst cells.
local q = fdiv(t, share)
local ti
if q > fdiv(P52, M) then ti = P52 else ti = q * M + cdiv((t % share) * M, share) end
local most = fdiv(P52, burst)
if ti > most then ti = most end
if ti < t then ti = t end
local nspan = ti * burst
local nback = 0
if mine > now then nback = mine - now end
if nback > nspan then nback = nspan end
local allow = fdiv(nspan - nback, ti)
-- Lending: cells above the reserve (half the burst, rounded up) go to any node.
local reserve = cdiv(burst, 2)
local lend = free - reserve
if lend < 0 then lend = 0 end
local g = want
if g > free then g = free end
local room = allow
if lend > room then room = lend end
if g > room then g = room end
local retry = 0
if g > 0 then
  backlog = backlog + g * t
  nback = nback + g * ti
  if nback > nspan then nback = nspan end
  if explicit then
    redis.call('SET', KEYS[1], fmt(now + backlog))
  else
    redis.call('SET', KEYS[1], fmt(now + backlog), 'PX', ms(backlog))
  end
else
  -- The exact wait for one cell: by the node's share and the key's, or by lending.
  local gw = backlog - (span - t)
  if gw < 0 then gw = 0 end
  local nw = nback - (nspan - ti)
  if nw < 0 then nw = 0 end
  retry = gw
  if nw > retry then retry = nw end
  if reserve < burst then
    local lw = backlog - (span - (reserve + 1) * t)
    if lw < retry then retry = lw end
  end
end
local expires = now + horizon + retry
if expires > 2 * P52 then expires = 2 * P52 end
if expires > last then last = expires end
redis.call('HSET', KEYS[2], node, fmt(demand) .. ' ' .. fmt(now + nback) .. ' ' .. fmt(expires))
if #dead > 0 then redis.call('HDEL', KEYS[2], unpack(dead)) end
if not explicit then redis.call('PEXPIRE', KEYS[2], ms(last - now)) end
return {now, g, retry, backlog, share, #ds}
"#;

/// The exact sliding log on a sorted set: at most `count` in any window of `period` µs,
/// with charges past the limit and reservations settled to their actual cost.
///
/// `KEYS[1]` the set (score: the entry's time in µs; member: `time:seq`, `seq` written
/// with 16 digits so that the members of one time sort by it); `ARGV`: `period` µs,
/// `count`, `n`, `now` (µs, or `""` for `TIME`), then optionally the operation (`""` or
/// `"0"` decide, `"1"` reserve: decide, and return where the entries went, `"2"` record
/// `n` entries, never refused, `"3"` settle a reservation of `n` entries) and, for a
/// settle, the reservation's time (µs), its first `seq` and the actual cost.
///
/// Every reply starts `{code, granted, retry_us, remaining, full_after_us, now_us}` (the
/// [module docs](self), "Replies"; for a record or a settle `granted` is the entries
/// charged and `retry_us` the wait of a request for one entry after it); a reservation's
/// adds its time and its first `seq`.
///
/// A request of `n` entries (0 included) is admitted iff the entries in the window plus
/// `n` are at most `count`: a log a charge took past its limit refuses everything until
/// enough entries have left. A record of more than `count + 1` entries stores `count + 1`
/// of them: they leave the window together, and `count + 1` alone refuse every request
/// until then, so every later answer is the one all of them would give (nothing of the
/// charge is lost; the set stays at most `2·count + 1` entries a window deep per charge).
const SLIDING_LOG_BODY: &str = r#"
local period = int(ARGV[1], 'period', 1, P52)
local count = int(ARGV[2], 'count', 1, 4294967295)
local n = int(ARGV[3], 'n', 0, 4294967295)
local now, explicit = clock(ARGV[4])
local op = ARGV[5]
if op == nil or op == '' then op = '0' end
if not (op == '0' or op == '1' or op == '2' or op == '3') then error('limitcore: operation must be 0, 1, 2 or 3, got ' .. tostring(op)) end
local key = KEYS[1]
local m, newest, last, rec, inside
-- The set as it stands: its size, its newest entry and time, the entries in the window
-- ending at `rec = max(now, newest)`.
local function look()
  m = redis.call('ZCARD', key)
  newest, last = -1, nil
  if m > 0 then
    local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    last, newest = top[1], tonumber(top[2])
  end
  rec = math.max(now, newest)
  inside = redis.call('ZCOUNT', key, '(' .. fmt(rec - period), '+inf')
end
local function full() if inside > 0 then return math.max(newest + period - now, 0) end return 0 end
-- The wait until `k` more entries fit: the (m - count + k)-th oldest entry must leave the
-- window (then at most count - k remain); 0 if they fit now.
local function wait(k)
  if inside + k <= count then return 0 end
  local i = m - count + k - 1
  local e = tonumber(redis.call('ZRANGE', key, i, i, 'WITHSCORES')[2])
  return e + period - now
end
local function member(time, seq) return fmt(time) .. ':' .. string.format('%016.0f', seq) end
-- Add `k` entries at `rec` after the window's old entries are dropped; returns the first
-- `seq`: one past every member at `rec` (the members of one time sort by `seq`; the count
-- at `rec` covers members written unpadded), so none is overwritten after a settle.
local function add(k)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(rec - period))
  local seq = 0
  if newest == rec and last then
    seq = tonumber(string.match(last, ':(%d+)$')) or 0
    local at = redis.call('ZCOUNT', key, fmt(rec), fmt(rec))
    if at > seq then seq = at end
  end
  local batch = {}
  for i = 1, k do
    batch[#batch + 1] = rec
    batch[#batch + 1] = member(rec, seq + i)
    if #batch >= 1000 or i == k then
      redis.call('ZADD', key, unpack(batch))
      batch = {}
    end
  end
  if not explicit then
    redis.call('PEXPIRE', key, ms(rec + period - now))
  end
  return seq + 1
end
-- A charge of `k` entries: never refused; more than count + 1 stored as count + 1.
local function record(k)
  local store = k
  if store > count + 1 then store = count + 1 end
  if store > 0 then add(store) end
  look()
end
look()
if op == '2' then
  record(n)
  return {1, n, wait(1), count - inside, full(), now}
end
if op == '3' then
  if #ARGV ~= 8 then error('limitcore: settle takes the time, the first seq and the actual cost') end
  if n > count then error('limitcore: a reservation holds at most count entries') end
  local at = int(ARGV[6], 'mark', 0, 2 * P52)
  local first = int(ARGV[7], 'seq', 1, P52)
  local actual = int(ARGV[8], 'actual', 0, 4294967295)
  local excess = 0
  if actual > n then
    excess = actual - n
    record(excess)
  elseif actual < n then
    -- The reservation's last n - actual entries: charging `actual` up front would have
    -- written only the first `actual`. Those already gone are given back by no one.
    local batch = {}
    for s = first + actual, first + n - 1 do
      batch[#batch + 1] = member(at, s)
      if #batch >= 1000 or s == first + n - 1 then
        redis.call('ZREM', key, unpack(batch))
        batch = {}
      end
    end
    look()
  end
  return {1, excess, wait(1), count - inside, full(), now}
end
if n > count then return {-1, 0, 0, count - inside, full(), now} end
if inside + n > count then
  return {0, 0, wait(n), count - inside, full(), now}
end
local first = 0
if n > 0 then
  first = add(n)
  inside = inside + n
  newest = rec
end
if op == '1' then return {1, n, 0, count - inside, full(), now, rec, first} end
return {1, n, 0, count - inside, full(), now}
"#;

/// Several GCRA limits of one tenant, all or nothing: every key is checked, and only if
/// all admit are all written.
///
/// `KEYS` the TATs (one hash slot: hash-tagged by the tenant); `ARGV`: `n`, `now`
/// (optional, µs, `""` for `TIME`), then `T` µs and `burst` for each key in order.
const ALL_BODY: &str = r#"
local n = int(ARGV[1], 'n', 0, P52)
local now, explicit = clock(ARGV[2])
local k = #KEYS
local ts, spans, backlogs = {}, {}, {}
local code, retry = 1, 0
for i = 1, k do
  local t = int(ARGV[1 + 2 * i], 'interval', 1, P52)
  local burst = int(ARGV[2 + 2 * i], 'burst', 1, P52)
  local span = t * burst
  if span > P52 then error('limitcore: burst * interval exceeds 2^52 us') end
  local raw = redis.call('GET', KEYS[i])
  local tat = 0
  if raw then tat = int(raw, 'state', 0, 2 * P52) end
  local backlog = math.max(tat - now, 0)
  ts[i], spans[i], backlogs[i] = t, span, backlog
  if n > burst then
    code = -1
  elseif n > 0 and backlog > span - n * t then
    if code == 1 then code = 0 end
    retry = math.max(retry, backlog - (span - n * t))
  end
end
if code == -1 then retry = 0 end
local admit = code == 1 and n > 0
local remaining, full = nil, 0
for i = 1, k do
  local after = backlogs[i]
  if admit then after = after + n * ts[i] end
  local left = math.floor(math.max(spans[i] - after, 0) / ts[i])
  if remaining == nil or left < remaining then remaining = left end
  full = math.max(full, after)
  if admit then
    if explicit then
      redis.call('SET', KEYS[i], fmt(now + after))
    else
      redis.call('SET', KEYS[i], fmt(now + after), 'PX', ms(after))
    end
  end
end
local granted = 0
if admit then granted = n end
return {code, granted, retry, remaining, full, now}
"#;

/// A node's heartbeat: one sorted set of node ids scored by when their announcement
/// expires. `KEYS[1]` the set; `ARGV`: node id, TTL ms. Returns the live node count.
const HEARTBEAT_BODY: &str = r#"
local ttl = int(ARGV[2], 'ttl', 1, 86400000)
local now = clock(nil)
local now_ms = math.floor(now / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', fmt(now_ms))
redis.call('ZADD', KEYS[1], fmt(now_ms + ttl), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
return redis.call('ZCARD', KEYS[1])
"#;

/// A Lua script as Redis runs it: its body, and the SHA1 of the body (40 lowercase hex
/// digits) by which `EVALSHA` names it. [`Redis::eval`](crate::Redis::eval) runs it by
/// the hash (one round trip) and, when the server answers `NOSCRIPT` (restarted, or
/// `SCRIPT FLUSH`ed), once more with `EVAL` and the body, which loads it again.
///
/// The crate's own scripts are built once per process with this crate's prelude (bounds
/// checks, number formatting; [`gcra_source`] shows one); a script made here runs as
/// given.
///
/// # Examples
///
/// ```
/// use limitcore_redis::scripts::Script;
///
/// let script = Script::new("return redis.call('INCR', KEYS[1])");
/// assert_eq!(script.body(), "return redis.call('INCR', KEYS[1])");
/// // SHA1 of the body, as `SCRIPT LOAD` would answer it.
/// assert_eq!(script.sha().len(), 40);
/// assert_eq!(script, Script::new(script.body().to_owned()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    body: String,
    sha: String,
}

impl Script {
    /// The script whose Lua source is `body`, hashed once here.
    pub fn new(body: impl Into<String>) -> Self {
        let body = body.into();
        let sha = sha1_smol::Sha1::from(body.as_bytes()).digest().to_string();
        Script { body, sha }
    }

    /// One of this crate's scripts: `body` after the prelude.
    fn with_prelude(body: &str) -> Self {
        Script::new(format!("{PRELUDE}{body}"))
    }

    /// The Lua source, as `EVAL` sends it.
    pub fn body(&self) -> &str {
        &self.body
    }

    /// The SHA1 of [`Script::body`], hex, as `EVALSHA` names the script.
    pub fn sha(&self) -> &str {
        &self.sha
    }
}

/// The crate's scripts, built (and hashed) once per process.
#[derive(Debug)]
pub(crate) struct Scripts {
    pub(crate) gcra: Script,
    pub(crate) fair: Script,
    pub(crate) sliding_log: Script,
    pub(crate) all: Script,
    pub(crate) heartbeat: Script,
}

pub(crate) fn scripts() -> &'static Scripts {
    static SCRIPTS: std::sync::OnceLock<Scripts> = std::sync::OnceLock::new();
    SCRIPTS.get_or_init(|| Scripts {
        gcra: Script::with_prelude(GCRA_BODY),
        fair: Script::with_prelude(FAIR_BODY),
        sliding_log: Script::with_prelude(SLIDING_LOG_BODY),
        all: Script::with_prelude(ALL_BODY),
        heartbeat: Script::with_prelude(HEARTBEAT_BODY),
    })
}

/// The Lua source of the GCRA script (prelude included), as sent to Redis: for review,
/// or for loading into a server by hand.
pub fn gcra_source() -> &'static str {
    &scripts().gcra.body
}

/// The SHA1 of [`gcra_source`], by which `EVALSHA` invokes it.
pub fn gcra_sha() -> &'static str {
    &scripts().gcra.sha
}

/// The Lua source of the fair lease script (prelude included), as sent to Redis: for review.
///
/// # Examples
///
/// ```
/// assert!(limitcore_redis::scripts::fair_source().contains("HGETALL"));
/// ```
pub fn fair_source() -> &'static str {
    &scripts().fair.body
}

/// The Lua source of the sliding-log script (prelude included), as sent to Redis.
pub fn sliding_log_source() -> &'static str {
    &scripts().sliding_log.body
}

/// The Lua source of the all-or-nothing multi-limit script (prelude included).
pub fn all_source() -> &'static str {
    &scripts().all.body
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash `EVALSHA` names a script by is SHA1 of its body, hex: FIPS 180-4's test
    /// vectors ("" and "abc").
    #[test]
    fn a_script_is_named_by_the_sha1_of_its_body() {
        assert_eq!(
            Script::new("").sha(),
            "da39a3ee5e6b4b0d3255bfef95601890afd80709"
        );
        assert_eq!(
            Script::new("abc").sha(),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        let gcra = &scripts().gcra;
        assert!(gcra.body().starts_with(PRELUDE) && gcra.body().ends_with(GCRA_BODY));
        assert_eq!(gcra.sha(), Script::new(gcra.body()).sha());
    }
}
