//! The demo behind `limitcore lanes`: one byte budget shared by priority lanes
//! ([`limitcore::Lanes`]) on real files, the way a storage engine shares its disk budget.
//!
//! Three workers run for `--seconds` against one [`Lanes`] limiter of `--rate` (burst
//! `--burst`), each taking its bytes from its lane before it does the I/O, on files in a
//! temporary directory:
//!
//! - a **writer** in the lowest lane ([`Lane::LOW`], a compaction): 256 KiB writes to its
//!   own file, back to back, as fast as the budget lets it (it saturates);
//! - a **flusher** in a middle lane ([`Lane::MID`], a memtable flush): every `--flush-ms`
//!   (100 ms) it writes `--flush` bytes (2 MiB) in 256 KiB writes, then `fdatasync`s;
//! - **user reads** in the top lane ([`Lane::USER`]): Poisson arrivals, `--reads` a second
//!   (200) on average, each of 4–64 KiB (uniform) at a random offset of a 16 MiB file
//!   written before the run (not counted).
//!
//! It reports each lane's bytes, bytes a second and share of the total, and the top lane's
//! waits (the time a read spent in `acquire_blocking`, before its `pread`) at p50, p99 and
//! max, beside the stated bound: a top-lane request of `n` bytes with `Q` bytes of top-lane
//! requests ahead waits at most `(Q + n)/rate` (the reads come one at a time, so `Q = 0`:
//! `n/rate`, at most 64 KiB / rate), plus the waiter's own wake-up latency, which the
//! report measures as the most any read's wait passed its own `n/rate`.
//!
//! ```
//! use limitcore_cli::lanes::{run, Config};
//!
//! let report = run(&Config { seconds: 0.3, ..Config::new("16MiB/s".parse()?) })?;
//! assert_eq!(report.lanes.len(), 4);
//! assert!(report.total_bytes_per_sec <= 16.0 * 1048576.0 * 1.5); // the rate, and 1 MiB of burst
//! assert!(report.text().starts_with("lanes: 16777216 B/s"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use clap::Args as ClapArgs;
use limitcore::{Lane, LaneCounts, Lanes, LanesConfig, Quota};
use serde::Serialize;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Priority lanes on real files: a saturating background writer (lowest lane), a periodic
/// flusher (a middle lane) and user reads of 4-64 KiB (top lane, Poisson arrivals) share
/// one byte budget; prints each lane's bytes/s and share, and the top lane's p50/p99/max
/// wait beside its bound.
///
/// Exit status: 0 after the run, 2 on parameters out of range, 1 on an I/O error.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The budget's rate, e.g. "64MiB/s".
    #[arg(long, default_value = "64MiB/s")]
    pub rate: Quota,
    /// The budget's burst, in bytes (byte units allowed: "1MiB").
    #[arg(long, default_value = "1MiB")]
    pub burst: String,
    /// Seconds to run.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// User reads a second, on average (Poisson arrivals).
    #[arg(long, default_value_t = 200.0)]
    pub reads: f64,
    /// The flusher's bytes per flush (byte units allowed).
    #[arg(long, default_value = "2MiB")]
    pub flush: String,
    /// Milliseconds between flushes.
    #[arg(long, default_value_t = 100)]
    pub flush_ms: u64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// What to run (see the module).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The budget's rate and burst.
    pub quota: Quota,
    /// Seconds to run.
    pub seconds: f64,
    /// User reads a second, on average.
    pub reads: f64,
    /// Bytes per flush.
    pub flush: u32,
    /// Between flushes.
    pub flush_every: Duration,
}

impl Config {
    /// `quota` with a burst of 1 MiB, 10 s, 200 reads a second, 2 MiB every 100 ms.
    pub fn new(quota: Quota) -> Config {
        Config {
            quota: quota.with_burst(1 << 20).unwrap_or(quota),
            seconds: 10.0,
            reads: 200.0,
            flush: 2 << 20,
            flush_every: Duration::from_millis(100),
        }
    }

    /// Check the parameters.
    ///
    /// # Errors
    ///
    /// A message for a duration or a read rate that is not positive and finite, or a flush
    /// of 0 bytes.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.seconds.is_finite() && self.seconds > 0.0 && self.seconds <= 86_400.0) {
            return Err(format!("--seconds {}: between 0 and a day", self.seconds));
        }
        if !(self.reads.is_finite() && self.reads > 0.0) {
            return Err(format!("--reads {}: more than 0", self.reads));
        }
        if self.flush == 0 || self.flush_every.is_zero() {
            return Err("--flush and --flush-ms: more than 0".to_owned());
        }
        Ok(())
    }
}

/// A byte count in text ("1MiB", "4096"), through the quota parser's byte units.
fn bytes(text: &str) -> Result<u32, String> {
    let quota: Quota = format!("{text}/s")
        .parse()
        .map_err(|e| format!("{text}: {e}"))?;
    u32::try_from(quota.count_as_written()).map_err(|_| format!("{text}: at most 4 GiB"))
}

/// One lane's figures.
#[derive(Debug, Clone, Serialize)]
pub struct LaneReport {
    /// 0 (top) to 3.
    pub lane: usize,
    /// Who used it: "reads", "unused", "flusher", "writer".
    pub role: &'static str,
    /// Bytes granted.
    pub bytes: u64,
    /// Bytes a second over the run.
    pub bytes_per_sec: f64,
    /// Share of all bytes granted.
    pub share: f64,
    /// Requests made.
    pub requests: u64,
    /// Requests that waited.
    pub delayed: u64,
    /// Their mean wait, µs.
    pub mean_wait_us: f64,
}

/// The run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The rate, bytes a second.
    pub rate: f64,
    /// The burst, bytes.
    pub burst: u32,
    /// The piece a waiting request is granted at once, bytes.
    pub piece: u32,
    /// Seconds run.
    pub seconds: f64,
    /// Per lane, top first.
    pub lanes: Vec<LaneReport>,
    /// All lanes' bytes a second.
    pub total_bytes_per_sec: f64,
    /// User reads done.
    pub reads: usize,
    /// The top lane's waits, µs: p50, p99, max (nearest rank).
    pub top_wait_us: [f64; 3],
    /// The bound for the largest read: 64 KiB / rate, µs.
    pub bound_us: f64,
    /// The most any read's wait passed its own bound `n/rate`, µs (wake-up latency).
    pub most_past_bound_us: f64,
}

/// Percentile `p` of sorted `v` (nearest rank).
fn pct(v: &[Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A xorshift generator (the demo needs no seed source): uniform in `[0, 1)`.
struct Rng(u64);
impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

const CHUNK: usize = 256 << 10;
const READ_FILE: u64 = 16 << 20;
const WRITE_WRAP: u64 = 64 << 20;

/// Run the demo (see the module).
///
/// # Errors
///
/// Bad parameters, a quota the limiter refuses, or an I/O error, as a message.
pub fn run(config: &Config) -> Result<Report, String> {
    config.validate()?;
    let lanes = Lanes::new(LanesConfig::new(config.quota)).map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    // The file the reads come from, written before the run (not limited).
    let data = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.path().join("data.sst"))
        .map_err(|e| io("data.sst", e))?;
    let block = vec![0x5au8; CHUNK];
    for i in 0..READ_FILE / CHUNK as u64 {
        data.write_all_at(&block, i * CHUNK as u64)
            .map_err(|e| io("data.sst", e))?;
    }
    let writer =
        File::create(dir.path().join("compaction.sst")).map_err(|e| io("compaction.sst", e))?;
    let mut flushed =
        File::create(dir.path().join("memtable.sst")).map_err(|e| io("memtable.sst", e))?;
    // Every access Relaxed: a request to stop that publishes nothing else (the workers'
    // results come back through `join`, which orders them), read at each step.
    let stop = AtomicBool::new(false);
    let run_for = Duration::from_secs_f64(config.seconds);
    let t0 = Instant::now();
    let (waits, most_past, counts, seconds) = std::thread::scope(|s| -> Result<_, String> {
        let (lanes, stop, block) = (&lanes, &stop, &block);
        let w = s.spawn(move || -> Result<(), String> {
            let mut at = 0u64;
            while !stop.load(Ordering::Relaxed) {
                lanes
                    .acquire_blocking(Lane::LOW, CHUNK as u32)
                    .map_err(|e| e.to_string())?;
                writer
                    .write_all_at(block, at)
                    .map_err(|e| io("compaction.sst", e))?;
                at = (at + CHUNK as u64) % WRITE_WRAP;
            }
            Ok(())
        });
        let f = s.spawn(move || -> Result<(), String> {
            let mut next = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                next += config.flush_every;
                let mut left = config.flush as usize;
                while left > 0 && !stop.load(Ordering::Relaxed) {
                    let n = left.min(CHUNK);
                    lanes
                        .acquire_blocking(Lane::MID, n as u32)
                        .map_err(|e| e.to_string())?;
                    flushed
                        .write_all(&block[..n])
                        .map_err(|e| io("memtable.sst", e))?;
                    left -= n;
                }
                flushed.sync_data().map_err(|e| io("memtable.sst", e))?;
                flushed.set_len(0).map_err(|e| io("memtable.sst", e))?;
                std::io::Seek::rewind(&mut flushed).map_err(|e| io("memtable.sst", e))?;
                if let Some(d) = next.checked_duration_since(Instant::now()) {
                    std::thread::sleep(d);
                }
            }
            Ok(())
        });
        // The reads, on this thread: Poisson arrivals on a schedule fixed in advance.
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let (mut waits, mut most_past) = (Vec::new(), Duration::ZERO);
        let mut buf = vec![0u8; 64 << 10];
        let mut next = Instant::now();
        let rate = config.quota.count_as_written() as f64 * 1e9
            / config.quota.period_as_written_ns() as f64;
        while t0.elapsed() < run_for {
            next += Duration::from_secs_f64(-(1.0 - rng.uniform()).ln() / config.reads);
            if let Some(d) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
            let n = (4 << 10) + (rng.uniform() * f64::from(60 << 10)) as usize;
            let offset = (rng.uniform() * (READ_FILE - n as u64) as f64) as u64;
            let started = Instant::now();
            lanes
                .acquire_blocking(Lane::USER, n as u32)
                .map_err(|e| e.to_string())?;
            let waited = started.elapsed();
            most_past =
                most_past.max(waited.saturating_sub(Duration::from_secs_f64(n as f64 / rate)));
            waits.push(waited);
            data.read_exact_at(&mut buf[..n], offset)
                .map_err(|e| io("data.sst", e))?;
        }
        // The figures at the end of the run (the workers finish what they are doing).
        let counts = (0..4)
            .map(|l| lanes.counts(Lane::new(l)).unwrap_or_default())
            .collect::<Vec<_>>();
        let seconds = t0.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        w.join().map_err(|_| "the writer panicked".to_owned())??;
        f.join().map_err(|_| "the flusher panicked".to_owned())??;
        Ok((waits, most_past, counts, seconds))
    })?;
    Ok(Report::new(&counts, config, seconds, waits, most_past))
}

impl Report {
    fn new(
        counts: &[LaneCounts],
        config: &Config,
        seconds: f64,
        mut waits: Vec<Duration>,
        most_past: Duration,
    ) -> Report {
        let q = config.quota;
        let rate = q.count_as_written() as f64 * 1e9 / q.period_as_written_ns() as f64;
        let total: u64 = counts.iter().map(|c| c.granted).sum();
        let roles = ["reads", "unused", "flusher", "writer"];
        let lanes = counts
            .iter()
            .enumerate()
            .map(|(lane, c)| LaneReport {
                lane,
                role: roles[lane],
                bytes: c.granted,
                bytes_per_sec: c.granted as f64 / seconds,
                share: if total == 0 {
                    0.0
                } else {
                    c.granted as f64 / total as f64
                },
                requests: c.requests,
                delayed: c.delayed,
                mean_wait_us: if c.delayed == 0 {
                    0.0
                } else {
                    micros(c.wait) / c.delayed as f64
                },
            })
            .collect();
        waits.sort_unstable();
        Report {
            rate,
            burst: q.burst(),
            piece: LanesConfig::new(q).piece(),
            seconds,
            lanes,
            total_bytes_per_sec: total as f64 / seconds,
            reads: waits.len(),
            top_wait_us: [
                micros(pct(&waits, 0.5)),
                micros(pct(&waits, 0.99)),
                micros(pct(&waits, 1.0)),
            ],
            bound_us: f64::from(64 << 10) / rate * 1e6,
            most_past_bound_us: micros(most_past),
        }
    }

    /// The report as a table.
    pub fn text(&self) -> String {
        let mut out = format!(
            "lanes: {:.0} B/s (burst {} B, pieces of {} B) for {:.2} s on real files\n",
            self.rate, self.burst, self.piece, self.seconds
        );
        out += &format!(
            "{:<6} {:<8} {:>12} {:>12} {:>7} {:>9} {:>8} {:>11}\n",
            "lane", "role", "bytes", "bytes/s", "share", "requests", "delayed", "mean wait"
        );
        for l in &self.lanes {
            out += &format!(
                "{:<6} {:<8} {:>12} {:>12.0} {:>6.1}% {:>9} {:>8} {:>9.0}µs\n",
                l.lane,
                l.role,
                l.bytes,
                l.bytes_per_sec,
                l.share * 100.0,
                l.requests,
                l.delayed,
                l.mean_wait_us
            );
        }
        out += &format!(
            "total  {:<8} {:>12} {:>12.0} ({:.2}% of the rate)\n",
            "",
            "",
            self.total_bytes_per_sec,
            self.total_bytes_per_sec / self.rate * 100.0
        );
        out += &format!(
            "top lane: {} reads, wait p50 {:.0}µs p99 {:.0}µs max {:.0}µs; bound n/rate ≤ {:.0}µs (64 KiB, none ahead) + wake-up latency (at most {:.0}µs past a read's own n/rate here)\n",
            self.reads,
            self.top_wait_us[0],
            self.top_wait_us[1],
            self.top_wait_us[2],
            self.bound_us,
            self.most_past_bound_us
        );
        out
    }

    /// The report as JSON.
    ///
    /// # Errors
    ///
    /// Serialisation errors, as a message (none in practice).
    pub fn json(&self) -> Result<String, String> {
        serde_json::to_string_pretty(self).map_err(|e| e.to_string())
    }
}

/// `limitcore lanes`.
pub fn main(args: Args) -> ExitCode {
    let config = match bytes(&args.burst)
        .and_then(|burst| {
            args.rate
                .with_burst(burst)
                .map_err(|e| format!("--burst: {e}"))
        })
        .and_then(|quota| {
            Ok(Config {
                quota,
                seconds: args.seconds,
                reads: args.reads,
                flush: bytes(&args.flush)?,
                flush_every: Duration::from_millis(args.flush_ms),
            })
        })
        .and_then(|c| c.validate().map(|()| c))
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("limitcore lanes: {e}");
            return ExitCode::from(2);
        }
    };
    let report = match run(&config) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("limitcore lanes: {e}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        match report.json() {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("limitcore lanes: {e}");
                return ExitCode::from(1);
            }
        }
    } else {
        print!("{}", report.text());
    }
    ExitCode::SUCCESS
}
