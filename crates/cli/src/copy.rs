//! `limitcore copy SRC DST --rate R [--burst B]`: a file copied through limitcore's paced
//! writer ([`limitcore::io::Paced`], acquiring before each write) on a [`Budget`], and what
//! the copy achieved: bytes, seconds, the rate, and the most bytes written in any 1 s window
//! beside its bound.
//!
//! ```
//! use limitcore_cli::copy::{self, Settings};
//!
//! let dir = std::env::temp_dir().join(format!("copy-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let (source, destination) = (dir.join("in"), dir.join("out"));
//! std::fs::write(&source, vec![5u8; 300_000]).unwrap();
//! let settings = Settings::new(&source, &destination, "64MiB/s", None)?;
//! assert_eq!(settings.quota.burst(), 1 << 20); // 1/64 s of 64 MiB/s
//! let report = copy::run(&settings, &mut |_bytes| {}).unwrap();
//! assert!(report.complete && report.within_bound);
//! assert_eq!(report.bytes, 300_000);
//! assert_eq!(std::fs::read(&destination).unwrap(), vec![5u8; 300_000]);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), String>(())
//! ```
//!
//! # Rate and burst
//!
//! `--rate` takes the quota text form (`64MiB/s`, `2GB/s`, `500k/100ms`, with an optional
//! ` burst B`); `--burst` (a byte amount, `1MiB`) overrides its burst. Without either, the
//! burst is 1/64 s of the rate or 1 MiB, whichever is smaller (at least 1 byte): 1 MiB at
//! 64 MiB/s and above, 16 KiB at 1 MiB/s. A burst that is a small slice of a second keeps
//! the bound below (the rate plus one burst) within 1/64 of the rate and the progress smooth,
//! and 1 MiB writes keep the system calls' cost out of sight at fast rates.
//!
//! # The copy
//!
//! The source is read into a buffer of a whole number of bursts (up to 1 MiB, or one burst
//! if larger, at most 8 MiB) and written through [`Paced`] on a [`Budget`] of the quota, so
//! each write moves one burst after taking its permits, waiting first come, first served.
//! The command records when each write returns.
//!
//! # The figures ([`Report`])
//!
//! - `seconds`: from the start of the copy to the return of its last write; `achieved` is
//!   `bytes / seconds` (above the rate by about `burst / seconds`, since the first burst
//!   goes at once).
//! - `max_window_bytes`: the most bytes whose writes returned within any half-open window of
//!   1 s, exactly (for each write, the writes that returned less than 1 s before it).
//!   `window_bound_bytes` is the rate's bound, `⌊rate × 1 s⌋ + burst`. A write of a whole
//!   burst conforms only from a full budget, so writes start at least a burst's time apart,
//!   and counting the one that started before a window, at most `⌈1 s / burst's time⌉ + 1`
//!   of them return within it (see [`limitcore::io`]): exactly the bound when a burst's time
//!   divides the second (1 MiB at 64 MiB/s, and every default burst that is 1/64 s of its
//!   rate in whole bytes), so `within_bound` holds by construction there; otherwise a window
//!   may hold up to one burst more, and `within_bound` may be false by that much.
//!
//! A copy that fails part of the way is never reported as done: the report says
//! `complete: false` with the error, and the command exits with 1.

use limitcore::io::Paced;
use limitcore::{Budget, Quota, RateLimiter};
use serde::Serialize;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The window of the sliding maximum.
pub const WINDOW: Duration = Duration::from_secs(1);

/// The largest default burst: 1 MiB.
pub const MAX_DEFAULT_BURST: u32 = 1 << 20;

/// The largest copy buffer: 8 MiB.
const MAX_BUFFER: usize = 8 << 20;

/// What to copy, at what pace.
///
/// # Examples
///
/// ```
/// use limitcore_cli::copy::Settings;
///
/// let s = Settings::new("a".as_ref(), "b".as_ref(), "1MiB/s", None)?;
/// assert_eq!(s.quota.burst(), 16 << 10);
/// let s = Settings::new("a".as_ref(), "b".as_ref(), "1MiB/s burst 1KiB", None)?;
/// assert_eq!(s.quota.burst(), 1 << 10);
/// let s = Settings::new("a".as_ref(), "b".as_ref(), "1MiB/s burst 1KiB", Some("4KiB"))?;
/// assert_eq!(s.quota.burst(), 4 << 10);
/// assert!(Settings::new("a".as_ref(), "b".as_ref(), "0/s", None).is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone)]
pub struct Settings {
    /// The file to read.
    pub source: PathBuf,
    /// The file to create or truncate, and write.
    pub destination: PathBuf,
    /// The rate and burst, in bytes.
    pub quota: Quota,
}

impl Settings {
    /// The settings of `--rate rate [--burst burst]`.
    ///
    /// # Errors
    ///
    /// A rate or burst that does not parse, or that [`Quota`] or [`Budget`] refuses, with
    /// the option it came from.
    pub fn new(
        source: &Path,
        destination: &Path,
        rate: &str,
        burst: Option<&str>,
    ) -> Result<Settings, String> {
        let quota: Quota = rate.parse().map_err(|e| format!("--rate {rate}: {e}"))?;
        let burst = match burst {
            Some(text) => parse_burst(text)?,
            None if rate.contains("burst") => quota.burst(),
            None => default_burst(&quota),
        };
        let quota = quota
            .with_burst(burst)
            .map_err(|e| format!("--rate {rate} with a burst of {burst} bytes: {e}"))?;
        // Whatever the budget itself refuses, before any file is touched.
        Budget::new(quota).map_err(|e| format!("--rate {rate}: {e}"))?;
        Ok(Settings {
            source: source.to_path_buf(),
            destination: destination.to_path_buf(),
            quota,
        })
    }

    /// The rate in bytes a second.
    pub fn rate(&self) -> f64 {
        self.quota.count_as_written() as f64 * 1e9 / self.quota.period_as_written_ns() as f64
    }

    /// `⌊rate × 1 s⌋ + burst`: the most bytes any window of [`WINDOW`] may hold.
    pub fn window_bound(&self) -> u64 {
        let per_window = u128::from(self.quota.count_as_written()) * WINDOW.as_nanos()
            / u128::from(self.quota.period_as_written_ns());
        u64::try_from(per_window)
            .unwrap_or(u64::MAX)
            .saturating_add(u64::from(self.quota.burst()))
    }
}

/// `--burst`: a byte amount of the quota's text form (`1MiB`, `64k`, `4096`).
fn parse_burst(text: &str) -> Result<u32, String> {
    if text.contains('/') || text.contains("burst") {
        return Err(format!(
            "--burst {text}: expected a byte amount such as 1MiB"
        ));
    }
    format!("1/s burst {text}")
        .parse::<Quota>()
        .map(|q| q.burst())
        .map_err(|e| format!("--burst {text}: {e}"))
}

/// The default burst of `quota`: 1/64 s of its rate or [`MAX_DEFAULT_BURST`], whichever is
/// smaller, and at least 1.
///
/// # Examples
///
/// ```
/// use limitcore_cli::copy::default_burst;
///
/// assert_eq!(default_burst(&"64MiB/s".parse()?), 1 << 20);
/// assert_eq!(default_burst(&"1GB/s".parse()?), 1 << 20);
/// assert_eq!(default_burst(&"1MiB/s".parse()?), 16 << 10);
/// assert_eq!(default_burst(&"10/s".parse()?), 1);
/// # Ok::<(), limitcore::QuotaError>(())
/// ```
pub fn default_burst(quota: &Quota) -> u32 {
    let slice = u128::from(quota.count_as_written()) * 1_000_000_000
        / (64 * u128::from(quota.period_as_written_ns()));
    u32::try_from(slice.min(u128::from(MAX_DEFAULT_BURST)))
        .unwrap_or(MAX_DEFAULT_BURST)
        .max(1)
}

/// The copy buffer for `burst`: a whole number of bursts up to 1 MiB, or one burst if
/// larger, at most [`MAX_BUFFER`].
fn buffer_len(burst: u32) -> usize {
    let burst = burst as usize;
    if burst >= 1 << 20 {
        burst.min(MAX_BUFFER)
    } else {
        burst * ((1 << 20) / burst)
    }
}

/// The most bytes in any half-open window, over events recorded in time order.
///
/// # Examples
///
/// ```
/// use limitcore_cli::copy::SlidingMax;
/// use std::time::Duration;
///
/// let mut max = SlidingMax::new(Duration::from_secs(1));
/// for (ms, bytes) in [(0, 5), (400, 5), (999, 5), (1_000, 7), (1_998, 1)] {
///     max.record(Duration::from_millis(ms), bytes);
/// }
/// assert_eq!(max.most(), 17); // [400 ms, 1400 ms)
/// ```
#[derive(Debug, Clone)]
pub struct SlidingMax {
    window: Duration,
    events: VecDeque<(Duration, u64)>,
    sum: u64,
    most: u64,
}

impl SlidingMax {
    /// No events yet, over windows of `window`.
    pub fn new(window: Duration) -> SlidingMax {
        SlidingMax {
            window,
            events: VecDeque::new(),
            sum: 0,
            most: 0,
        }
    }

    /// `bytes` moved at `at` (since any fixed origin, no earlier than the last event).
    pub fn record(&mut self, at: Duration, bytes: u64) {
        self.events.push_back((at, bytes));
        self.sum += bytes;
        while let Some(&(first, bytes)) = self.events.front() {
            if at.saturating_sub(first) < self.window {
                break;
            }
            self.sum -= bytes;
            self.events.pop_front();
        }
        self.most = self.most.max(self.sum);
    }

    /// The most bytes in any window so far.
    pub fn most(&self) -> u64 {
        self.most
    }
}

/// A copy's figures (see the [module](self)); `complete` is false, with `error`, when it
/// failed part of the way.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The source path.
    pub source: String,
    /// The destination path.
    pub destination: String,
    /// The quota, in its text form (bytes).
    pub quota: String,
    /// The rate, bytes a second.
    pub rate_bytes_per_second: f64,
    /// The burst, bytes.
    pub burst_bytes: u32,
    /// Bytes written to the destination.
    pub bytes: u64,
    /// The source's size when it was opened, if known.
    pub source_bytes: Option<u64>,
    /// Seconds from the start to the return of the last write.
    pub seconds: f64,
    /// `bytes / seconds`.
    pub achieved_bytes_per_second: f64,
    /// The achieved rate over the rate.
    pub achieved_ratio: f64,
    /// The most bytes written in any window of `window_seconds`.
    pub max_window_bytes: u64,
    /// The window, seconds.
    pub window_seconds: f64,
    /// `⌊rate × window⌋ + burst`.
    pub window_bound_bytes: u64,
    /// Whether `max_window_bytes ≤ window_bound_bytes`.
    pub within_bound: bool,
    /// Writes made (each at most a burst).
    pub writes: u64,
    /// Whether the whole source was copied.
    pub complete: bool,
    /// The error that stopped an incomplete copy.
    pub error: Option<String>,
}

impl Report {
    /// The report as pretty JSON.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// The report as text, a line per figure.
    pub fn text(&self) -> String {
        let mib = |bytes: f64| bytes / f64::from(1u32 << 20);
        let mut s = String::new();
        let _ = writeln!(s, "copy: {} -> {}", self.source, self.destination);
        let _ = writeln!(
            s,
            "rate: {:.0} B/s ({:.2} MiB/s), burst {} B ({})",
            self.rate_bytes_per_second,
            mib(self.rate_bytes_per_second),
            self.burst_bytes,
            self.quota
        );
        let _ = writeln!(
            s,
            "copied: {} B in {:.3} s, {} writes{}",
            self.bytes,
            self.seconds,
            self.writes,
            if self.complete { "" } else { " (INCOMPLETE)" }
        );
        let _ = writeln!(
            s,
            "achieved: {:.0} B/s ({:.2} MiB/s, {:+.3} % of the rate)",
            self.achieved_bytes_per_second,
            mib(self.achieved_bytes_per_second),
            (self.achieved_ratio - 1.0) * 100.0
        );
        let _ = writeln!(
            s,
            "most in any {} s: {} B; bound {} B (rate x {} s + burst): {}",
            self.window_seconds,
            self.max_window_bytes,
            self.window_bound_bytes,
            self.window_seconds,
            if self.within_bound {
                "within"
            } else {
                "EXCEEDED"
            }
        );
        if let Some(error) = &self.error {
            let _ = writeln!(s, "error: {error}");
        }
        s
    }
}

/// Why a copy did not run or did not finish.
#[derive(Debug)]
pub enum Failure {
    /// Nothing was copied: a bad rate, an unreadable source, an unwritable destination
    /// (exit status 2).
    Setup(String),
    /// The copy stopped part of the way (exit status 1): what it did, with the error.
    Partial(Box<Report>),
}

/// Open the source and create the destination (not the source itself), and the source's
/// size if it is a regular file.
fn open(settings: &Settings) -> Result<(File, File, Option<u64>), String> {
    let (source, destination) = (&settings.source, &settings.destination);
    let input = File::open(source).map_err(|e| format!("cannot read {}: {e}", source.display()))?;
    let meta = input
        .metadata()
        .map_err(|e| format!("cannot read {}: {e}", source.display()))?;
    if meta.is_dir() {
        return Err(format!(
            "cannot read {}: it is a directory",
            source.display()
        ));
    }
    #[cfg(unix)]
    if let Ok(existing) = std::fs::metadata(destination) {
        use std::os::unix::fs::MetadataExt;
        if (existing.dev(), existing.ino()) == (meta.dev(), meta.ino()) {
            return Err(format!(
                "{} and {} are the same file",
                source.display(),
                destination.display()
            ));
        }
    }
    let output = File::create(destination)
        .map_err(|e| format!("cannot write {}: {e}", destination.display()))?;
    Ok((input, output, meta.is_file().then_some(meta.len())))
}

/// Fill `buf` from `input` (fewer bytes only at its end); `Interrupted` is retried.
fn fill(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// What the writes did so far.
struct Tally {
    t0: Instant,
    /// When the last write returned, since `t0`.
    last: Duration,
    window: SlidingMax,
    bytes: u64,
    writes: u64,
}

/// Read `input` to its end in `buf`-sized pieces and write each through `output`, counting
/// every write in `tally`; the error (with the file it came from) that stopped it, if any.
fn pump<W: Write>(
    settings: &Settings,
    input: &mut File,
    output: &mut W,
    buf: &mut [u8],
    tally: &mut Tally,
    progress: &mut dyn FnMut(u64),
) -> Result<(), String> {
    let writing = |e: io::Error| format!("writing {}: {e}", settings.destination.display());
    loop {
        let n =
            fill(input, buf).map_err(|e| format!("reading {}: {e}", settings.source.display()))?;
        if n == 0 {
            return output.flush().map_err(writing);
        }
        let mut rest = &buf[..n];
        while !rest.is_empty() {
            let written = match output.write(rest) {
                Ok(0) => return Err(writing(io::ErrorKind::WriteZero.into())),
                Ok(written) => written,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(writing(e)),
            };
            tally.last = tally.t0.elapsed();
            tally.window.record(tally.last, written as u64);
            tally.bytes += written as u64;
            tally.writes += 1;
            progress(written as u64);
            rest = &rest[written..];
        }
    }
}

/// Copy `settings.source` to `settings.destination` through a paced writer, calling
/// `progress` with the bytes of each write.
///
/// # Errors
///
/// [`Failure::Setup`] if nothing could be copied (the settings' files cannot be opened),
/// [`Failure::Partial`] with the report so far if reading or writing failed on the way.
pub fn run(settings: &Settings, progress: &mut dyn FnMut(u64)) -> Result<Report, Failure> {
    let budget = Budget::new(settings.quota).map_err(|e| Failure::Setup(e.to_string()))?;
    let (mut input, output, source_bytes) = open(settings).map_err(Failure::Setup)?;
    let mut output = Paced::new(output, &budget);
    let mut buf = vec![0u8; buffer_len(budget.quota().burst())];
    let mut tally = Tally {
        t0: Instant::now(),
        last: Duration::ZERO,
        window: SlidingMax::new(WINDOW),
        bytes: 0,
        writes: 0,
    };
    let outcome = pump(
        settings,
        &mut input,
        &mut output,
        &mut buf,
        &mut tally,
        progress,
    );
    let seconds = tally.last.as_secs_f64();
    let rate = settings.rate();
    let achieved = if seconds > 0.0 {
        tally.bytes as f64 / seconds
    } else {
        0.0
    };
    let most = tally.window.most();
    let report = Report {
        source: settings.source.display().to_string(),
        destination: settings.destination.display().to_string(),
        quota: settings.quota.to_string(),
        rate_bytes_per_second: rate,
        burst_bytes: settings.quota.burst(),
        bytes: tally.bytes,
        source_bytes,
        seconds,
        achieved_bytes_per_second: achieved,
        achieved_ratio: achieved / rate,
        max_window_bytes: most,
        window_seconds: WINDOW.as_secs_f64(),
        window_bound_bytes: settings.window_bound(),
        within_bound: most <= settings.window_bound(),
        writes: tally.writes,
        complete: outcome.is_ok(),
        error: outcome.err(),
    };
    if report.complete {
        Ok(report)
    } else {
        Err(Failure::Partial(Box::new(report)))
    }
}
