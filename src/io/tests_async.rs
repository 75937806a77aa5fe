//! Tests of the async adapter ([`AsyncPaced`]) on tokio: real files, cancellation, the
//! strategies' accounting on a [`ManualClock`].

use super::tests::{max_in_window, since};
use super::{AsyncPaced, Refused};
use crate::budget::{Budget, BudgetConfig};
use crate::clock::ManualClock;
use crate::decision::Denied;
use crate::limiter::RateLimiter;
use crate::limiters::Gcra;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::timeout;

fn manual_budget(quota: &str, debt_ms: u64) -> Budget<ManualClock> {
    let config = BudgetConfig::new(quota.parse().unwrap()).max_debt(Duration::from_millis(debt_ms));
    Budget::with_config(&config, ManualClock::new()).unwrap()
}

/// A writer that is never ready.
struct Stuck;

impl AsyncWrite for Stuck {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, _: &[u8]) -> Poll<io::Result<usize>> {
        Poll::Pending
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A reader that fails.
struct Broken;

impl AsyncRead for Broken {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::ConnectionReset,
            "reset by peer",
        )))
    }
}

#[tokio::test]
async fn bytes_written_equal_bytes_read_through_files() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..(3u32 << 20))
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    let source = dir.path().join("source");
    tokio::fs::write(&source, &data).await.unwrap();
    let budget = Arc::new(Budget::new("1GiB/s burst 64KiB".parse().unwrap()).unwrap());
    for (name, charge_after) in [("before", false), ("after", true)] {
        let target = dir.path().join(name);
        let file = tokio::fs::File::open(&source).await.unwrap();
        let mut reader = AsyncPaced::new(file, budget.clone());
        let file = tokio::fs::File::create(&target).await.unwrap();
        let mut writer = if charge_after {
            AsyncPaced::charge_after(file, budget.clone())
        } else {
            AsyncPaced::new(file, budget.clone())
        };
        let copied = tokio::io::copy(&mut reader, &mut writer).await.unwrap();
        writer.shutdown().await.unwrap();
        drop(writer);
        assert_eq!(copied, data.len() as u64, "{name}");
        assert_eq!(tokio::fs::read(&target).await.unwrap(), data, "{name}");
    }
}

/// On a manual clock: the budget's backlog is exact at every step, and a wait lasts until
/// the test gives up on it (the clock never reaches its place), however slow the machine.
#[tokio::test]
async fn a_dropped_write_future_gives_its_place_back() {
    // 1 KiB/s, 1 KiB at once: the second KiB waits a second.
    let budget = Arc::new(manual_budget("1KiB/s burst 1KiB", 0));
    let mut out = AsyncPaced::new(Vec::new(), budget.clone());
    out.write_all(&[1; 1024]).await.unwrap();
    let full = || budget.snapshot().full_after;
    assert_eq!(full(), Duration::from_secs(1));
    // The future owns the adapter: dropped mid-wait, both give the reserved KiB back.
    let waiting = timeout(Duration::from_millis(50), async move {
        out.write_all(&[2; 1024]).await.unwrap();
        out
    });
    assert!(waiting.await.is_err());
    assert_eq!(full(), Duration::from_secs(1));
    // A future that borrows the adapter: its place stays with the adapter for the next
    // write (so the KiB is not charged twice), and the adapter's drop gives it back.
    let mut out = AsyncPaced::new(Vec::new(), budget.clone());
    assert!(
        timeout(Duration::from_millis(50), out.write_all(&[3; 1024]))
            .await
            .is_err()
    );
    assert_eq!(full(), Duration::from_secs(2));
    drop(out);
    assert_eq!(full(), Duration::from_secs(1));
    // Or the caller releases it without dropping the adapter.
    let mut out = AsyncPaced::new(Vec::new(), budget.clone());
    assert!(
        timeout(Duration::from_millis(50), out.write_all(&[4; 1024]))
            .await
            .is_err()
    );
    assert_eq!(full(), Duration::from_secs(2));
    Pin::new(&mut out).release();
    assert_eq!(full(), Duration::from_secs(1));
}

/// On a manual clock: the second write takes a place at 100 ms and is given up; the third
/// finds that place kept and goes when the clock reaches it, with no second place taken
/// (one would be at 200 ms, which the clock never reaches: the wait would not end).
#[tokio::test]
async fn a_kept_place_serves_the_next_write() {
    let budget = Arc::new(manual_budget("10KiB/s burst 1KiB", 0));
    let mut out = AsyncPaced::new(Vec::new(), budget.clone());
    out.write_all(&[1; 1024]).await.unwrap();
    assert!(timeout(Duration::from_millis(5), out.write_all(&[2; 1024]))
        .await
        .is_err());
    budget.clock().advance(Duration::from_millis(100));
    // Within the first wait's 100 ms, on the place already taken: not 200 ms. (The 10 s
    // bound is for a loaded machine: the write is due at once.)
    timeout(Duration::from_secs(10), out.write_all(&[3; 1024]))
        .await
        .expect("the kept place serves the write at 100 ms")
        .unwrap();
    assert_eq!(out.get_ref().len(), 2048);
    assert_eq!(budget.snapshot().full_after, Duration::from_millis(100));
}

#[tokio::test]
async fn granted_permits_of_an_unready_write_are_given_back_on_drop() {
    let budget = manual_budget("1kB/s burst 100", 0);
    let mut out = AsyncPaced::new(Stuck, &budget);
    assert!(timeout(Duration::from_millis(5), out.write(&[0; 60]))
        .await
        .is_err());
    assert_eq!(budget.snapshot().remaining, 40); // granted, held for the next write
    drop(out);
    assert_eq!(budget.snapshot().remaining, 100);
}

#[tokio::test]
async fn charge_after_runs_on_debt() {
    let budget = manual_budget("1kB/s burst 100", 1_000);
    let mut out = AsyncPaced::charge_after(Vec::new(), &budget);
    assert_eq!(out.write(&[1; 250]).await.unwrap(), 100);
    budget.clock().advance(Duration::from_millis(1));
    assert_eq!(out.write(&[2; 250]).await.unwrap(), 100);
    // 99 bytes of debt: 199 ms of backlog, 100 ms until the next byte conforms.
    assert_eq!(budget.snapshot().full_after, Duration::from_millis(199));
    let wait = budget.try_acquire().unwrap_err().retry_after();
    assert_eq!(wait, Some(Duration::from_millis(100)));
}

#[tokio::test]
async fn a_short_read_charges_only_what_was_read() {
    let budget = manual_budget("1kB/s burst 100", 0);
    let data = [7u8; 30];
    let mut reader = AsyncPaced::new(&data[..], &budget);
    let mut buf = [0u8; 100];
    assert_eq!(reader.read(&mut buf).await.unwrap(), 30);
    assert_eq!(budget.snapshot().remaining, 70);
    assert_eq!(reader.read(&mut buf[..50]).await.unwrap(), 0);
    assert_eq!(budget.snapshot().remaining, 70);
}

#[tokio::test]
async fn errors_pass_through_and_a_final_refusal_is_an_io_error() {
    let budget = manual_budget("1kB/s burst 100", 0);
    let mut buf = [0u8; 10];
    let error = AsyncPaced::new(Broken, &budget)
        .read(&mut buf)
        .await
        .unwrap_err();
    assert_eq!(
        (error.kind(), error.to_string()),
        (io::ErrorKind::ConnectionReset, "reset by peer".into())
    );
    assert_eq!(budget.snapshot().remaining, 100);

    let gcra = Gcra::with_clock(
        "1kB/s".parse().unwrap(),
        ManualClock::starting_at(u64::MAX - 5),
    )
    .unwrap();
    let mut out = AsyncPaced::new(Vec::new(), &gcra);
    let error = out.write(b"never").await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::Other);
    let refused = error.get_ref().unwrap().downcast_ref::<Refused>().unwrap();
    assert_eq!(
        (refused.denied(), refused.bytes()),
        (Denied::BeyondHorizon, 5)
    );
    assert!(out.get_ref().is_empty());
}

#[tokio::test]
async fn async_writes_keep_the_rate() {
    // 64 KiB/s, 4 KiB at once: 48 KiB take 0.69 s after the first burst.
    let (rate, burst, total) = (64usize << 10, 4usize << 10, 48usize << 10);
    let budget = Budget::new(format!("{rate}/s burst {burst}").parse().unwrap()).unwrap();
    let mut out = AsyncPaced::new(tokio::io::sink(), &budget);
    let data = vec![0u8; total];
    // Timed on the budget's own clock (see `rate_bound_holds_over_one_second_windows`).
    let t0 = budget.now();
    let mut events = Vec::new();
    let mut rest = &data[..];
    while !rest.is_empty() {
        let n = out.write(rest).await.unwrap();
        events.push((since(&budget, t0), n));
        rest = &rest[n..];
    }
    // Never faster than the rate after the first burst; the ceiling, a sanity bound for a
    // pacer that sleeps far too long, leaves three times the 0.69 s the rate needs (2 s over
    // 11 waits) for a loaded machine's late wake-ups of tokio's timer.
    let least = Duration::from_secs_f64((total - burst) as f64 / rate as f64);
    assert!(since(&budget, t0) >= least, "{:?}", since(&budget, t0));
    assert!(since(&budget, t0) < least * 4, "{:?}", since(&budget, t0));
    let most = max_in_window(&events, Duration::from_millis(500));
    assert!(most <= rate / 2 + burst, "{most} bytes in 0.5 s");
}
