//! Tests of the blocking adapter ([`Paced`]): real files in a temporary directory, a
//! [`ManualClock`] where the permits must be counted exactly, the real clock (with generous
//! bounds) where the pace itself is measured.

use super::{Pace, Paced, Refused, Retry};
use crate::budget::{Budget, BudgetConfig, Mode};
use crate::clock::{Clock, ManualClock};
use crate::decision::Denied;
use crate::limiter::{RateLimiter, Refund};
use crate::limiters::{Gcra, TokenBucket};
use std::io::{self, Read, Write};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// A budget of `quota` with `debt_ms` of debt on a manual clock at 0.
fn manual_budget(quota: &str, debt_ms: u64) -> Budget<ManualClock> {
    let config = BudgetConfig::new(quota.parse().unwrap()).max_debt(Duration::from_millis(debt_ms));
    Budget::with_config(&config, ManualClock::new()).unwrap()
}

/// `len` bytes of a pattern that no shift of itself repeats within a few MiB.
fn pattern(len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// The most bytes in any half-open window of `window` among `(completion, bytes)` events in
/// time order: for each event, the events that completed less than `window` before it.
pub(super) fn max_in_window(events: &[(Duration, usize)], window: Duration) -> usize {
    let (mut start, mut sum, mut most) = (0, 0, 0);
    for (end, &(at, bytes)) in events.iter().enumerate() {
        sum += bytes;
        while at - events[start].0 >= window {
            sum -= events[start].1;
            start += 1;
        }
        debug_assert!(start <= end);
        most = most.max(sum);
    }
    most
}

/// A writer that records the size of every write it is given, and fails with `fail` once
/// it has taken `fail_after` bytes.
struct Recorder {
    sizes: Vec<usize>,
    fail_after: usize,
    written: usize,
}

impl Recorder {
    fn new() -> Recorder {
        Recorder {
            sizes: Vec::new(),
            fail_after: usize::MAX,
            written: 0,
        }
    }
}

impl Write for Recorder {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.written >= self.fail_after {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the pipe is gone",
            ));
        }
        self.sizes.push(buf.len());
        self.written += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A reader that returns at most `most` bytes a read.
struct Trickle<'a> {
    data: &'a [u8],
    most: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.most).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

#[test]
fn bytes_written_equal_bytes_read_through_files() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(3 << 20);
    let source = dir.path().join("source");
    std::fs::write(&source, &data).unwrap();
    let budget = Budget::new("1GiB/s burst 64KiB".parse().unwrap()).unwrap();
    let gcra = Gcra::new("1GB/s burst 100000".parse().unwrap()).unwrap();
    for (name, charge_after) in [("before", false), ("after", true)] {
        let target = dir.path().join(name);
        let mut reader = Paced::new(std::fs::File::open(&source).unwrap(), &gcra);
        let file = std::fs::File::create(&target).unwrap();
        let mut writer = if charge_after {
            Paced::charge_after(file, &budget)
        } else {
            Paced::new(file, &budget)
        };
        let copied = io::copy(&mut reader, &mut writer).unwrap();
        writer.flush().unwrap();
        drop(writer);
        assert_eq!(copied, data.len() as u64, "{name}");
        assert_eq!(std::fs::read(&target).unwrap(), data, "{name}");
    }
}

#[test]
fn operations_are_chunked_by_the_burst() {
    let budget = Budget::new("1GiB/s burst 1000".parse().unwrap()).unwrap();
    for charge_after in [false, true] {
        let mut out = if charge_after {
            Paced::charge_after(Recorder::new(), &budget)
        } else {
            Paced::new(Recorder::new(), &budget)
        };
        out.write_all(&pattern(10_500)).unwrap();
        let mut expected = vec![1000; 10];
        expected.push(500);
        assert_eq!(
            out.get_ref().sizes,
            expected,
            "charge after: {charge_after}"
        );
    }
}

#[test]
fn rate_bound_holds_over_one_second_windows() {
    // 128 KiB/s, 8 KiB at once: 192 KiB take 1.44 s after the first burst.
    let (rate, burst, total) = (128usize << 10, 8usize << 10, 192usize << 10);
    let budget = Budget::new(format!("{rate}/s burst {burst}").parse().unwrap()).unwrap();
    let mut out = Paced::new(io::sink(), &budget);
    let data = pattern(total);
    // Timed on the budget's own clock: the bound is on its timeline (the TSC's ns and the
    // OS clock's may differ by parts in 10^4).
    let t0 = budget.now();
    let mut events = Vec::new();
    let mut rest = &data[..];
    while !rest.is_empty() {
        let n = out.write(rest).unwrap();
        events.push((since(&budget, t0), n));
        rest = &rest[n..];
    }
    let elapsed = since(&budget, t0);
    assert!(events.iter().all(|&(_, n)| n == burst));
    // Never faster than the rate after the first burst. The ceiling is a sanity bound for
    // a pacer that sleeps far too long: three times the 1.44 s the rate needs leaves 2.9 s
    // over the 23 waits for a loaded machine's late wake-ups (each wait is an OS timer's
    // sleep, late by milliseconds when the machine is busy).
    let least = Duration::from_secs_f64((total - burst) as f64 / rate as f64);
    assert!(elapsed >= least, "{elapsed:?} < {least:?}");
    assert!(elapsed < least * 3, "{elapsed:?}");
    let most = max_in_window(&events, Duration::from_secs(1));
    assert!(most <= rate + burst, "{most} bytes in 1 s");
    assert!(
        most >= rate / 2,
        "{most} bytes in 1 s: the window is not measured"
    );
}

#[test]
fn charge_after_runs_on_debt() {
    // 1000 B/s (1 ms a byte), 100 at once, 1 s of debt.
    let budget = manual_budget("1kB/s burst 100", 1_000);
    let clock = budget.clock().clone();
    let mut out = Paced::charge_after(Vec::new(), &budget);
    assert_eq!(out.write(&[1; 250]).unwrap(), 100);
    // Empty, not in debt: the next byte conforms 1 ms later.
    assert_eq!(budget.snapshot().full_after, Duration::from_millis(100));
    clock.advance(Duration::from_millis(1));
    // Goes at once, leaving 99 bytes of debt (199 ms of backlog)...
    assert_eq!(out.write(&[2; 250]).unwrap(), 100);
    assert_eq!(budget.snapshot().full_after, Duration::from_millis(199));
    // ...which the next byte waits out: 100 ms until one conforms.
    let wait = budget.try_acquire().unwrap_err().retry_after();
    assert_eq!(wait, Some(Duration::from_millis(100)));
    // Acquiring before, the same budget state lets nothing through until then.
    assert_eq!(
        budget.check_at(1, clock.now()),
        Err(Denied::RateLimited {
            retry_after: Duration::from_millis(100)
        })
    );
    assert_eq!(out.get_ref().len(), 200);
}

#[test]
fn charge_after_takes_a_shortfall_before_going_on() {
    // No debt: the second write's charge falls 99 bytes short, taken by waiting.
    let budget = manual_budget("1kB/s burst 100", 0);
    let clock = budget.clock().clone();
    let mut out = Paced::charge_after(Vec::new(), &budget);
    assert_eq!(out.write(&[1; 100]).unwrap(), 100);
    clock.advance(Duration::from_millis(1));
    let (stop, stopped) = mpsc::channel::<()>();
    let ticker = {
        let clock = clock.clone();
        std::thread::spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(Duration::from_millis(1))
            {
                clock.advance(Duration::from_millis(1));
            }
        })
    };
    assert_eq!(out.write(&[2; 100]).unwrap(), 100);
    stop.send(()).unwrap();
    ticker.join().unwrap();
    // The shortfall's 99 bytes were queued behind the full budget: taken at 100 ms.
    assert!(clock.now() >= 100_000_000, "returned at {} ns", clock.now());
    // Every byte charged once: 200 bytes from 0, the schedule at 200 ms.
    assert_eq!(
        budget.snapshot_at(100_000_000).full_after,
        Duration::from_millis(100)
    );
}

/// One read of up to `len` bytes of the file at `path` through `pacer`.
fn read_once<P: Pace>(path: &std::path::Path, pacer: P, len: usize) -> usize {
    let mut buf = vec![0u8; len];
    Paced::new(std::fs::File::open(path).unwrap(), pacer)
        .read(&mut buf)
        .unwrap()
}

#[test]
fn a_short_read_charges_only_what_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("thirty");
    std::fs::write(&path, pattern(30)).unwrap();
    let quota = "1kB/s burst 100";
    let budget = manual_budget(quota, 0);
    let gcra = Gcra::with_clock(quota.parse().unwrap(), ManualClock::new()).unwrap();
    let bucket = TokenBucket::with_clock(quota.parse().unwrap(), ManualClock::new()).unwrap();
    assert_eq!(read_once(&path, &budget, 100), 30);
    assert_eq!(read_once(&path, &gcra, 100), 30);
    assert_eq!(read_once(&path, &bucket, 100), 30);
    for (name, limiter) in [
        ("budget", &budget as &dyn RateLimiter),
        ("gcra", &gcra),
        ("bucket", &bucket),
    ] {
        assert_eq!(limiter.snapshot().remaining, 70, "{name}");
    }
    // A reader that trickles, and the end of a file: exactly what arrived.
    let budget = manual_budget(quota, 0);
    let data = pattern(20);
    let mut trickle = Paced::new(
        Trickle {
            data: &data,
            most: 7,
        },
        &budget,
    );
    let mut buf = [0u8; 100];
    assert_eq!(trickle.read(&mut buf).unwrap(), 7);
    assert_eq!(budget.snapshot().remaining, 93);
    let mut file = Paced::new(std::fs::File::open(&path).unwrap(), &budget);
    assert_eq!(file.read(&mut buf[..50]).unwrap(), 30);
    assert_eq!(file.read(&mut buf[..50]).unwrap(), 0);
    assert_eq!(budget.snapshot().remaining, 63);
}

#[test]
fn through_retry_a_short_read_keeps_its_grant_and_an_empty_one_nothing() {
    let limiter = |_| {
        let gcra = Gcra::with_clock("1kB/s burst 100".parse().unwrap(), ManualClock::new());
        Retry(Box::new(gcra.unwrap()) as Box<dyn Refund>)
    };
    let (short, empty) = (limiter(()), limiter(()));
    let data = pattern(30);
    let mut buf = [0u8; 100];
    assert_eq!(Paced::new(&data[..], &short).read(&mut buf).unwrap(), 30);
    assert_eq!(short.0.snapshot().remaining, 0); // stricter: the whole grant
    assert_eq!(Paced::new(&[][..], &empty).read(&mut buf).unwrap(), 0);
    assert_eq!(empty.0.snapshot().remaining, 100);
}

#[test]
fn inner_errors_pass_through_unchanged_and_take_nothing() {
    let budget = manual_budget("1kB/s burst 100", 0);
    let mut out = Paced::new(
        Recorder {
            fail_after: 40,
            ..Recorder::new()
        },
        &budget,
    );
    assert_eq!(out.write(&[0; 40]).unwrap(), 40);
    let error = out.write(&[0; 40]).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::BrokenPipe);
    assert_eq!(error.to_string(), "the pipe is gone");
    assert_eq!(budget.snapshot().remaining, 60);
    #[cfg(target_os = "linux")]
    {
        let full = || {
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap()
        };
        let direct = full().write(b"x").unwrap_err();
        let paced = Paced::new(full(), &budget).write(b"x").unwrap_err();
        assert_eq!(paced.raw_os_error(), direct.raw_os_error());
        assert_eq!(paced.kind(), direct.kind());
        assert_eq!(budget.snapshot().remaining, 60);
    }
}

#[test]
fn a_final_refusal_is_an_io_error() {
    let clock = ManualClock::starting_at(u64::MAX - 5);
    let gcra = Gcra::with_clock("1kB/s".parse().unwrap(), clock).unwrap();
    let data = pattern(10);
    let mut reader = Paced::new(&data[..], &gcra);
    let mut buf = [0u8; 10];
    let error = reader.read(&mut buf).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::Other);
    let refused = error.get_ref().unwrap().downcast_ref::<Refused>().unwrap();
    assert_eq!(
        (refused.denied(), refused.bytes()),
        (Denied::BeyondHorizon, 10)
    );
    assert!(
        error.to_string().contains("refused 10 bytes for good"),
        "{error}"
    );
    // Nothing was read from the inner reader.
    assert_eq!(reader.get_ref().len(), 10);
}

#[test]
fn a_paused_budget_holds_writes_until_it_resumes() {
    let budget = Arc::new(Budget::new("1MB/s burst 1000".parse().unwrap()).unwrap());
    budget.set_mode(Mode::Paused).unwrap();
    let written = Arc::new(Mutex::new(0usize));
    let writer = {
        let (budget, written) = (budget.clone(), written.clone());
        std::thread::spawn(move || {
            let mut out = Paced::new(Vec::new(), budget);
            out.write_all(&[0; 10]).unwrap();
            *written.lock().unwrap() = out.get_ref().len();
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(*written.lock().unwrap(), 0);
    budget.set_mode(Mode::Enabled).unwrap();
    writer.join().unwrap();
    assert_eq!(*written.lock().unwrap(), 10);
}

#[test]
fn sliding_window_maximum_is_exact() {
    let ms = Duration::from_millis;
    let events = [
        (ms(0), 5),
        (ms(400), 5),
        (ms(999), 5),
        (ms(1000), 7),
        (ms(1998), 1),
    ];
    // [0, 1000): 15; [400, 1400): 17; [999, 1999): 13.
    assert_eq!(max_in_window(&events, ms(1000)), 17);
    assert_eq!(max_in_window(&events, ms(1)), 7);
    assert_eq!(max_in_window(&[], ms(1000)), 0);
}

/// The time on `limiter`'s clock since `t0` (ns on that clock).
pub(super) fn since(limiter: &impl RateLimiter, t0: u64) -> Duration {
    Duration::from_nanos(limiter.now().saturating_sub(t0))
}
