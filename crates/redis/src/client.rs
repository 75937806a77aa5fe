//! The connection to Redis ([`Redis`]): one handle per node, stand-alone or cluster, with a
//! deadline on every call, a circuit breaker, background reconnection, heartbeats and a
//! count of the commands sent.

use crate::error::Error;
use crate::scripts::{scripts, Script};
use crate::telemetry::ClientMetrics;
use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, Pipeline, ServerErrorKind, Value};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How a [`Redis`] handle behaves when the server is slow or gone.
///
/// # Examples
///
/// ```
/// use limitcore_redis::RedisConfig;
/// use std::time::Duration;
///
/// let config = RedisConfig::default()
///     .deadline(Duration::from_millis(5))
///     .breaker(3, Duration::from_millis(250))
///     .node_id("edge-7");
/// assert_eq!(config.get_deadline(), Duration::from_millis(5));
/// ```
#[derive(Debug, Clone)]
pub struct RedisConfig {
    deadline: Duration,
    failures: u32,
    cooldown: Duration,
    heartbeat: Duration,
    node_id: String,
    nodes_key: String,
}

impl Default for RedisConfig {
    /// Deadline 20 ms; the breaker opens after 3 consecutive failures and is probed every
    /// 250 ms; heartbeats every 500 ms under the key `lc:nodes`; a random node id.
    fn default() -> Self {
        RedisConfig {
            deadline: Duration::from_millis(20),
            failures: 3,
            cooldown: Duration::from_millis(250),
            heartbeat: Duration::from_millis(500),
            node_id: format!("node-{:016x}", random_u64()),
            nodes_key: "lc:nodes".to_owned(),
        }
    }
}

/// A process-unique pseudo-random number (for node ids): the hash of the time, the process
/// id and a counter, through std's randomly keyed SipHash.
fn random_u64() -> u64 {
    use std::hash::BuildHasher;
    static SEQ: AtomicU64 = AtomicU64::new(0);
    std::collections::hash_map::RandomState::new().hash_one((
        std::time::SystemTime::now(),
        std::process::id(),
        // Relaxed: only the value's uniqueness matters (the read-modify-write gives it);
        // no other memory is published through it.
        SEQ.fetch_add(1, Ordering::Relaxed),
    ))
}

impl RedisConfig {
    /// The most a call may take, end to end (the script's reload included), before it is
    /// abandoned as [`Error::Timeout`] and the outage policy decides instead.
    ///
    /// # Panics
    ///
    /// If `deadline` is zero.
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        assert!(!deadline.is_zero(), "a zero deadline decides nothing");
        self.deadline = deadline;
        self
    }

    /// The circuit breaker: open after `failures` consecutive failed calls, then fail fast
    /// (no latency per request) while a background task probes the server every
    /// `cooldown`; the first successful probe closes it. A failure is a timeout, a
    /// connection error, or a server that answers it cannot serve now (`LOADING`, `BUSY`,
    /// `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`, `READONLY`). An answer about the call itself
    /// (`NOSCRIPT` after a restart, `WRONGTYPE`, a script's error) is not: like any answer,
    /// it restarts the count.
    ///
    /// # Panics
    ///
    /// If `failures` is 0 or `cooldown` is zero.
    #[must_use]
    pub fn breaker(mut self, failures: u32, cooldown: Duration) -> Self {
        assert!(
            failures > 0 && !cooldown.is_zero(),
            "breaker needs failures ≥ 1 and a cooldown"
        );
        self.failures = failures;
        self.cooldown = cooldown;
        self
    }

    /// How often this node announces itself (the announcement lives 3 intervals); the
    /// count of live nodes is what the [`Policy::FailLocal`](crate::Policy::FailLocal)
    /// policy divides the rate by.
    ///
    /// # Panics
    ///
    /// If `every` is zero.
    #[must_use]
    pub fn heartbeat(mut self, every: Duration) -> Self {
        assert!(!every.is_zero(), "a zero heartbeat interval");
        self.heartbeat = every;
        self
    }

    /// This node's id in the heartbeat set and in the fair-share reports of its lease
    /// requests (default: random). Every node of a fleet needs its own: two nodes with one
    /// id are one node to the fair shares ([`fair`](crate::fair)).
    #[must_use]
    pub fn node_id(mut self, id: impl Into<String>) -> Self {
        self.node_id = id.into();
        self
    }

    /// The sorted set nodes announce themselves in (default `lc:nodes`; on a cluster any
    /// one slot).
    #[must_use]
    pub fn nodes_key(mut self, key: impl Into<String>) -> Self {
        self.nodes_key = key.into();
        self
    }

    /// The per-call deadline.
    pub fn get_deadline(&self) -> Duration {
        self.deadline
    }

    /// The breaker's cooldown (also how often an open breaker is probed).
    pub fn get_cooldown(&self) -> Duration {
        self.cooldown
    }

    /// This node's id: in the heartbeat set, and in the fair-share reports of its lease
    /// requests ([`fair`](crate::fair)).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore_redis::RedisConfig;
    /// assert_eq!(RedisConfig::default().node_id("edge-7").get_node_id(), "edge-7");
    /// ```
    pub fn get_node_id(&self) -> &str {
        &self.node_id
    }
}

/// A connection: stand-alone (redis-rs's `ConnectionManager`, one multiplexed connection
/// that reconnects itself) or cluster (redis-rs's `ClusterConnection`, which follows
/// `MOVED`/`ASK` and refreshes its slot map).
#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

/// The circuit breaker's state, lock-free: consecutive failures and whether it is open.
#[derive(Debug)]
struct Breaker {
    failures: AtomicU32,
    opened: AtomicBool,
    threshold: u32,
}

/// Orderings: every field is an independent flag or counter that publishes no other memory
/// (a call reads the breaker, then talks to Redis through its own connection), so `Relaxed`
/// throughout; a stale read only delays opening or closing the breaker by one call, which
/// the policy's bound does not depend on.
impl Breaker {
    fn is_open(&self) -> bool {
        // Relaxed: see the impl's note (partner: the stores in `success` and `failure`).
        self.opened.load(Ordering::Relaxed)
    }

    fn success(&self) {
        // Relaxed: see the impl's note; loads first so that the common case writes nothing.
        if self.failures.load(Ordering::Relaxed) != 0 {
            self.failures.store(0, Ordering::Relaxed);
        }
        // Relaxed: as above.
        if self.opened.load(Ordering::Relaxed) {
            self.opened.store(false, Ordering::Relaxed);
        }
    }

    fn failure(&self) {
        // Relaxed: a count of failures only; partner: `success`'s reset.
        let failures = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures >= self.threshold {
            // Relaxed: see the impl's note (partner: `is_open`'s load).
            self.opened.store(true, Ordering::Relaxed);
        }
    }
}

struct Inner {
    conn: Conn,
    config: RedisConfig,
    breaker: Breaker,
    commands: AtomicU64,
    nodes: AtomicU32,
    /// The failed calls through the `metrics` facade (feature `metrics`; empty without it).
    metrics: ClientMetrics,
}

/// One node's handle on Redis (stand-alone or cluster): cheap to clone, shared by every
/// limiter of the node.
///
/// Every call has a deadline ([`RedisConfig::deadline`]); consecutive failures open a
/// circuit breaker, after which calls fail at once with [`Error::CircuitOpen`] (a dead
/// Redis costs no latency per request) while a background task probes the server and
/// closes the breaker when it answers. The same task sends this node's heartbeat, from
/// which [`Redis::nodes`] (the fleet's size, as last seen) is read. The connection itself
/// reconnects in the background (redis-rs's connection manager, or the cluster
/// connection's slot refresh).
///
/// # Examples
///
/// ```no_run
/// use limitcore_redis::{Redis, RedisConfig};
///
/// # async fn run() -> Result<(), limitcore_redis::Error> {
/// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
/// let cluster = Redis::connect_cluster(
///     &["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"],
///     RedisConfig::default(),
/// ).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Redis {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis")
            .field(
                "mode",
                &match self.inner.conn {
                    Conn::Single(_) => "stand-alone",
                    Conn::Cluster(_) => "cluster",
                },
            )
            .field("config", &self.inner.config)
            .field("breaker_open", &self.inner.breaker.is_open())
            .field("commands", &self.commands())
            .field("nodes", &self.nodes())
            .finish()
    }
}

impl Redis {
    /// Connect to a stand-alone server (`redis://host:port[/db]`). The connection is made
    /// lazily, so a node can start while Redis is down (its calls then fail over to the
    /// outage policy until Redis answers). Must be called inside a tokio runtime: the
    /// heartbeat and probe task is spawned on it.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`] for an invalid URL.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (it spawns the heartbeat task and times calls with tokio's
    /// timer).
    pub async fn connect(url: &str, config: RedisConfig) -> Result<Redis, Error> {
        let client = redis::Client::open(url)?;
        let manager_config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.deadline))
            .set_response_timeout(Some(config.deadline))
            .set_min_delay(Duration::from_millis(5))
            .set_max_delay(config.cooldown)
            .set_number_of_retries(usize::MAX);
        let manager = ConnectionManager::new_lazy_with_config(client, manager_config)?;
        Ok(Redis::start(Conn::Single(manager), config).await)
    }

    /// Connect to a Redis Cluster through any of its nodes' URLs (the slot map is read from
    /// them). The same API as [`Redis::connect`]; every script touches keys of one hash
    /// slot only. Must be called inside a tokio runtime.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`] if no node can be reached or the URLs are invalid.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, as [`Redis::connect`].
    pub async fn connect_cluster(urls: &[&str], config: RedisConfig) -> Result<Redis, Error> {
        let client = redis::cluster::ClusterClient::builder(urls.iter().copied())
            .connection_timeout(config.deadline)
            .response_timeout(config.deadline)
            .retries(2)
            .build()?;
        let conn = client.get_async_connection().await?;
        Ok(Redis::start(Conn::Cluster(conn), config).await)
    }

    async fn start(conn: Conn, config: RedisConfig) -> Redis {
        let redis = Redis {
            inner: Arc::new(Inner {
                conn,
                breaker: Breaker {
                    failures: AtomicU32::new(0),
                    opened: AtomicBool::new(false),
                    threshold: config.failures,
                },
                config,
                commands: AtomicU64::new(0),
                nodes: AtomicU32::new(1),
                metrics: ClientMetrics::register(),
            }),
        };
        // The first heartbeat now, so that the node count is known early; a failure only
        // counts towards the breaker.
        let _ = redis.beat().await;
        tokio::spawn(maintain(Arc::downgrade(&redis.inner)));
        redis
    }

    /// The configuration this handle was made with.
    pub fn config(&self) -> &RedisConfig {
        &self.inner.config
    }

    /// Commands sent to Redis so far by this handle (decisions, leases, reloads,
    /// heartbeats and probes; a pipeline counts each command in it).
    pub fn commands(&self) -> u64 {
        // Relaxed: a statistics counter (partner: the `fetch_add`s of the calls).
        self.inner.commands.load(Ordering::Relaxed)
    }

    /// The live nodes announced in the heartbeat set, as last read (at least 1: this one).
    pub fn nodes(&self) -> u32 {
        // Relaxed: a value on its own (partner: the store after each heartbeat); a stale
        // count only moves `FailLocal`'s divisor by one heartbeat.
        self.inner.nodes.load(Ordering::Relaxed).max(1)
    }

    /// Whether the circuit breaker is open (calls fail fast with [`Error::CircuitOpen`]).
    pub fn is_open(&self) -> bool {
        self.inner.breaker.is_open()
    }

    /// Send this node's heartbeat now and return the number of live nodes.
    ///
    /// # Errors
    ///
    /// As any call: [`Error::Timeout`], [`Error::Redis`].
    pub async fn beat(&self) -> Result<u32, Error> {
        let c = &self.inner.config;
        let ttl_ms = (c.heartbeat.as_millis() as u64).saturating_mul(3).max(1);
        let reply = self
            .eval_unguarded(
                &scripts().heartbeat,
                &[c.nodes_key.as_str()],
                &[c.node_id.clone(), ttl_ms.to_string()],
            )
            .await?;
        let count = match reply {
            Value::Int(i) => i.clamp(1, i64::from(u32::MAX)) as u32,
            other => return Err(Error::Reply(format!("heartbeat: {other:?}"))),
        };
        // Relaxed: the last node count heard, read by the fallback policy; nothing else is
        // published with it.
        self.inner.nodes.store(count, Ordering::Relaxed);
        Ok(count)
    }

    /// Run `script` on `keys` with `args`: `EVALSHA` by its hash, and on `NOSCRIPT` (a
    /// restarted or flushed server) `EVAL` with its body, which loads it again. One round
    /// trip in the common case, two after a restart; both within one deadline
    /// ([`RedisConfig::deadline`]). Fails fast while the breaker is open. On Redis
    /// Cluster every key must hash to one slot (a hash tag: `{tenant}:a`, `{tenant}:b`).
    ///
    /// # Errors
    ///
    /// As [`Redis::command`]: [`Error::CircuitOpen`], [`Error::Timeout`], or the server's
    /// error ([`Error::Redis`]: the script's own error, a `WRONGTYPE`...).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use limitcore_redis::{scripts::Script, Redis, RedisConfig};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let redis = Redis::connect("redis://127.0.0.1:6379", RedisConfig::default()).await?;
    /// let incr = Script::new("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    /// let value = redis.eval(&incr, &["hits"], &["2".to_owned()]).await?;
    /// assert_eq!(value, redis::Value::Int(2));
    /// # Ok(()) }
    /// ```
    pub async fn eval(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[String],
    ) -> Result<Value, Error> {
        let answer = if self.inner.breaker.is_open() {
            Err(Error::CircuitOpen)
        } else {
            self.eval_unguarded(script, keys, args).await
        };
        self.counted(answer)
    }

    /// `answer`, its error counted (`limitcore_redis_errors_total`): the calls a limiter or
    /// a user makes, not the heartbeats and probes of the background task.
    #[inline]
    fn counted<T>(&self, answer: Result<T, Error>) -> Result<T, Error> {
        if let Err(e) = &answer {
            self.inner.metrics.error(e);
        }
        answer
    }

    /// [`Redis::eval`] without the breaker's check (the probe itself).
    async fn eval_unguarded(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[String],
    ) -> Result<Value, Error> {
        let call = async {
            let by_sha = invocation(script, true, keys, args);
            match self.query(&by_sha).await {
                Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                    self.query(&invocation(script, false, keys, args)).await
                }
                other => other,
            }
        };
        self.guard(call).await
    }

    /// Several invocations of `script` in one pipeline (one round trip for all): each
    /// answer in order, `NOSCRIPT` ones run again with `EVAL`.
    pub(crate) async fn eval_pipeline(
        &self,
        script: &Script,
        calls: &[(Vec<&str>, Vec<String>)],
    ) -> Result<Vec<Value>, Error> {
        if self.inner.breaker.is_open() {
            return self.counted(Err(Error::CircuitOpen));
        }
        let call = async {
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for (keys, args) in calls {
                pipe.add_command(invocation(script, true, keys, args));
            }
            // Relaxed: a statistics counter.
            self.inner
                .commands
                .fetch_add(calls.len() as u64, Ordering::Relaxed);
            let answers: Vec<redis::RedisResult<Value>> = self.query_pipeline(&pipe).await?;
            let mut out = Vec::with_capacity(answers.len());
            for (answer, (keys, args)) in answers.into_iter().zip(calls) {
                out.push(match answer {
                    Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                        self.query(&invocation(script, false, keys, args)).await?
                    }
                    other => other?,
                });
            }
            Ok(out)
        };
        let answer = self.guard(call).await;
        self.counted(answer)
    }

    /// Apply the deadline and record the outcome in the breaker.
    async fn guard<T>(
        &self,
        call: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, Error> {
        let breaker = &self.inner.breaker;
        match tokio::time::timeout(self.inner.config.deadline, call).await {
            Ok(Ok(value)) => {
                breaker.success();
                Ok(value)
            }
            Ok(Err(e)) => {
                if is_outage(&e) {
                    breaker.failure();
                } else {
                    // The server answered: it is alive, whatever it said.
                    breaker.success();
                }
                Err(Error::Redis(e))
            }
            Err(_) => {
                breaker.failure();
                Err(Error::Timeout(self.inner.config.deadline))
            }
        }
    }

    async fn query(&self, cmd: &Cmd) -> redis::RedisResult<Value> {
        // Relaxed: a statistics counter.
        self.inner.commands.fetch_add(1, Ordering::Relaxed);
        match self.inner.conn.clone() {
            Conn::Single(mut c) => cmd.query_async(&mut c).await,
            Conn::Cluster(mut c) => cmd.query_async(&mut c).await,
        }
    }

    /// `pipe` in one round trip on this handle's connection, its replies as `T`.
    async fn query_pipeline<T: redis::FromRedisValue>(
        &self,
        pipe: &Pipeline,
    ) -> redis::RedisResult<T> {
        match self.inner.conn.clone() {
            Conn::Single(mut c) => pipe.query_async(&mut c).await,
            Conn::Cluster(mut c) => pipe.query_async(&mut c).await,
        }
    }

    /// Run a plain pipeline (one round trip; with the deadline and the breaker), for tools
    /// and benchmarks: the replies in order (commands marked `ignore` left out).
    ///
    /// # Errors
    ///
    /// As [`Redis::command`]; the first server error in the pipeline.
    pub async fn pipeline(&self, pipe: &Pipeline) -> Result<Vec<Value>, Error> {
        if self.inner.breaker.is_open() {
            return self.counted(Err(Error::CircuitOpen));
        }
        // Relaxed: a statistics counter.
        self.inner
            .commands
            .fetch_add(pipe.cmd_iter().count() as u64, Ordering::Relaxed);
        let answer = self.guard(self.query_pipeline(pipe)).await;
        self.counted(answer)
    }

    /// Run a plain command (with the deadline and the breaker), for tests and tools:
    /// `PING`, `FLUSHALL`, `SCRIPT FLUSH`, `GET`, `PTTL`...
    ///
    /// # Errors
    ///
    /// As any call: [`Error::CircuitOpen`], [`Error::Timeout`], [`Error::Redis`].
    pub async fn command(&self, cmd: &Cmd) -> Result<Value, Error> {
        if self.inner.breaker.is_open() {
            return self.counted(Err(Error::CircuitOpen));
        }
        let answer = self.guard(self.query(cmd)).await;
        self.counted(answer)
    }
}

/// Whether a failed call is a sign that Redis cannot serve (counted by the breaker): the
/// connection failed or broke, or the server answered that it cannot serve now (`LOADING`,
/// `BUSY`, `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`, and `READONLY` from a master demoted
/// in a fail-over). An answer about the call itself comes from a live server and is not
/// an outage: `ERR` and a script's error, `NOSCRIPT` (after a restart or a `SCRIPT FLUSH`:
/// several callers meet it at once before the first has loaded the script again, and must
/// not open the breaker), a redirection, a missing permission, a reply of another type
/// than asked, another server error this client does not name (`WRONGTYPE`...).
fn is_outage(e: &redis::RedisError) -> bool {
    match e.kind() {
        ErrorKind::Server(kind) => matches!(
            kind,
            ServerErrorKind::BusyLoading
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::MasterDown
                | ServerErrorKind::ReadOnly
        ),
        ErrorKind::Extension => e.code() == Some("BUSY"),
        ErrorKind::UnexpectedReturnType => false,
        // The connection, the parser, the cluster's routing, authentication.
        _ => true,
    }
}

/// `EVALSHA sha` or `EVAL body`, with the keys and arguments.
fn invocation(script: &Script, by_sha: bool, keys: &[&str], args: &[String]) -> Cmd {
    let mut cmd = if by_sha {
        let mut c = redis::cmd("EVALSHA");
        c.arg(script.sha());
        c
    } else {
        let mut c = redis::cmd("EVAL");
        c.arg(script.body());
        c
    };
    cmd.arg(keys.len()).arg(keys).arg(args);
    cmd
}

/// The background task of a handle: heartbeats while the breaker is closed, probes every
/// cooldown while it is open (a successful heartbeat closes it). Ends with the handle.
async fn maintain(inner: Weak<Inner>) {
    loop {
        let pause = match inner.upgrade() {
            Some(inner) if inner.breaker.is_open() => inner.config.cooldown,
            Some(inner) => inner.config.heartbeat,
            None => return,
        };
        tokio::time::sleep(pause).await;
        let Some(inner) = inner.upgrade() else { return };
        let redis = Redis { inner };
        let _ = redis.beat().await;
    }
}
