//! The exact Redis backend: one script call decides every descriptor of a request, all
//! or nothing, atomically on Redis's clock.
//!
//! # The script
//!
//! `KEYS`: one per descriptor, `{prefix}{domain}:rule:counter` (the hash tag `{domain}`
//! keeps a domain's keys in one slot, as a script on Redis Cluster requires). `ARGV`: the
//! mode (`a` all or nothing, `e` charge each), then six per descriptor: the algorithm
//! (`g` GCRA with `T` µs and `burst`; `f` fixed window with its period in µs and count),
//! its two numbers, the operation (`t` take, `c` check, `r` refund), `n`, and `1` if a
//! refusal of it is soft (shadow or quota mode). It reads Redis's `TIME` once, decides every
//! descriptor in order on a local copy of each key's state (a key named twice sees its
//! first charge), and writes only if the request is admitted (all or nothing) — or, for
//! `e`, every admitted descriptor and, for a refused fixed window, the window closed, as
//! envoyproxy/ratelimit's counter would be. Refunds always apply. It returns three integers
//! per descriptor: admitted (1/0), permits remaining, and the reset in µs (admitted: until
//! full; refused: until the same request would be admitted).
//!
//! GCRA here is the core's: a TAT in µs, admitted iff `max(TAT, now) + n·T − now ≤ burst·T`;
//! the fixed window is envoyproxy/ratelimit's: window `⌊now / period⌋` of the Unix epoch on
//! Redis's clock, at most `count` per window. Each key expires when its state is fresh
//! again. Every number stays below 2^53 (µs times of today are about 2^50.6; a period is at
//! most a year, 2^45 µs).

use super::memory::rule::RuleLimiter;
use super::memory::Memory;
use super::{Backend, BackendError, Item, Mode, Op, Outcome};
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
local mode = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local state, alg, p1, p2, ops, ns, soft = {}, {}, {}, {}, {}, {}, {}
local function load(i)
  local k = KEYS[i]
  if state[k] ~= nil then return end
  local raw = redis.call('GET', k)
  local s = {dirty = false, tat = 0, w = -1, c = 0}
  if raw then
    local w, c = string.match(raw, '^(%d+):(%d+)$')
    if w then s.w, s.c = tonumber(w), tonumber(c) else s.tat = tonumber(raw) or 0 end
  end
  state[k] = s
end
for i = 1, #KEYS do
  local b = 1 + (i - 1) * 6
  alg[i], p1[i], p2[i], ops[i], ns[i], soft[i] = ARGV[b + 1], tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), ARGV[b + 4], tonumber(ARGV[b + 5]), ARGV[b + 6] == '1'
  load(i)
end
-- One descriptor against state s: admitted, remaining, reset; charges s when told to.
local function decide(i, s, charge)
  local n, op = ns[i], ops[i]
  if alg[i] == 'g' then
    local tt, burst = p1[i], p2[i]
    local span = tt * burst
    local backlog = s.tat - now
    if backlog < 0 then backlog = 0 end
    if op == 'r' then
      backlog = backlog - n * tt
      if backlog < 0 then backlog = 0 end
      s.tat, s.dirty = now + backlog, true
      op = 'c'
    end
    local free = math.floor((span - backlog) / tt)
    if free < 0 then free = 0 end
    if op == 'c' then return 1, free, backlog end
    if n > burst then return 0, free, backlog end
    if backlog + n * tt <= span then
      if not charge then return 1, free, backlog end
      s.tat, s.dirty = now + backlog + n * tt, true
      local left = math.floor((span - backlog - n * tt) / tt)
      return 1, left, backlog + n * tt
    end
    return 0, free, backlog + n * tt - span
  else
    local period, count = p1[i], p2[i]
    local w = math.floor(now / period)
    if s.w ~= w then s.w, s.c = w, 0 end
    local reset = (w + 1) * period - now
    if op == 'r' then
      s.c = s.c - n
      if s.c < 0 then s.c = 0 end
      s.dirty = true
      op = 'c'
    end
    local left = count - s.c
    if left < 0 then left = 0 end
    local full = 0
    if s.c > 0 then full = reset end
    if op == 'c' then return 1, left, full end
    if n <= left then
      if not charge then return 1, left, full end
      s.c, s.dirty = s.c + n, true
      return 1, left - n, reset
    end
    if charge and mode == 'e' and n <= count then s.c, s.dirty = count, true end
    return 0, left, reset
  end
end
local out = {}
local refused = false
for i = 1, #KEYS do
  local a, left, reset = decide(i, state[KEYS[i]], true)
  if a == 0 and not soft[i] and mode == 'a' then refused = true end
  out[#out + 1], out[#out + 2], out[#out + 3] = a, left, reset
end
if refused then
  -- Nothing charged: every descriptor answered from the state as it was (refunds kept).
  state = {}
  for i = 1, #KEYS do load(i) end
  for i = 1, #KEYS do
    if ops[i] == 'r' then decide(i, state[KEYS[i]], true) end
  end
  out = {}
  for i = 1, #KEYS do
    local s = state[KEYS[i]]
    local a, left, reset
    if ops[i] == 'r' then
      local saved = ops[i]
      ops[i] = 'c'
      a, left, reset = decide(i, s, false)
      ops[i] = saved
    else
      a, left, reset = decide(i, s, false)
    end
    out[#out + 1], out[#out + 2], out[#out + 3] = a, left, reset
  end
end
for i = 1, #KEYS do
  local k = KEYS[i]
  local s = state[k]
  if s.dirty then
    s.dirty = false
    if alg[i] == 'g' then
      local ttl = s.tat - now
      if ttl > 0 then
        redis.call('SET', k, string.format('%.0f', s.tat), 'PX', math.ceil(ttl / 1000) + 1)
      else
        redis.call('DEL', k)
      end
    else
      local ttl = (s.w + 1) * p1[i] - now
      redis.call('SET', k, string.format('%.0f', s.w) .. ':' .. string.format('%.0f', s.c), 'PX', math.ceil(ttl / 1000) + 1)
    end
  end
end
return out
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
        }
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
        items: &[Item<RuleParams>],
        params: &[&RuleParams],
        mode: Mode,
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
                self.local.decide_on(items, &limiters, mode)
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
                let (t, burst) = gcra_micros(&quota).map_err(|e| BackendError(format!("{scope}: {e}")))?;
                ("g", t, u64::from(burst))
            }
            Algorithm::FixedWindow => ("f", limit.unit.seconds() * 1_000_000, u64::from(limit.requests_per_unit)),
            other => {
                return Err(BackendError(format!(
                    "{scope}: {other} rules are not available on the redis-exact backend (gcra, token-bucket and fixed-window are)"
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
        items: &[Item<RuleParams>],
        mode: Mode,
    ) -> impl Future<Output = Result<Vec<Outcome>, BackendError>> + Send {
        async move {
            let params: Vec<&RuleParams> = items.iter().map(|i| &*i.rule).collect();
            let keys: Vec<String> = items
                .iter()
                .zip(&params)
                .map(|(i, p)| format!("{}{}", p.key_prefix, i.key))
                .collect();
            let mut args: Vec<String> = Vec::with_capacity(1 + items.len() * 6);
            args.push(if mode == Mode::AllOrNothing { "a" } else { "e" }.to_owned());
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
                Err(e) => self.fallback(items, &params, mode, e),
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
