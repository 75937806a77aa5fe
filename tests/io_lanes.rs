//! The I/O adapters in a lane (`io::InLane`) on real files in a temporary directory: a
//! saturating background writer in the lowest lane and user reads in the top lane share one
//! byte budget. Every byte arrives intact, each lane is charged what its operations asked
//! for, the budget's rate bounds both lanes together, and the user reads are not held
//! behind the writer's backlog. The async adapter's dropped operation keeps its place and a
//! release takes it out of the queue.

use limitcore::clock::{Clock, ManualClock, MonotonicClock};
use limitcore::io::{InLane, Paced};
use limitcore::{Lane, LaneError, Lanes, LanesConfig};
use std::fs::File;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KIB: usize = 1 << 10;

#[test]
fn a_user_read_is_not_held_behind_a_saturating_writer() {
    let dir = tempfile::tempdir().unwrap();
    // 4 MiB/s, 64 KiB at once: the writer's 2 MiB alone need about 500 ms.
    // The lanes' own clock, read once before they exist: the rate bound below is measured
    // in the time the budget reads.
    let clock = MonotonicClock::new();
    let born = clock.now();
    let config = LanesConfig::new("4MiB/s burst 64KiB".parse().unwrap());
    let lanes = Arc::new(Lanes::with_clock(config, clock.clone()).unwrap());
    let user_data: Vec<u8> = (0..128 * KIB).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("user"), &user_data).unwrap();

    let start = Instant::now();
    let writer = {
        let lane = InLane::new(Arc::clone(&lanes), Lane::LOW).unwrap();
        let path = dir.path().join("compaction");
        let clock = clock.clone();
        std::thread::spawn(move || {
            let mut out = Paced::new(File::create(&path).unwrap(), lane);
            for _ in 0..32 {
                out.write_all(&[0xAB; 64 * KIB]).unwrap();
            }
            out.flush().unwrap();
            (start.elapsed(), clock.now())
        })
    };
    // Let the writer build its backlog first: its second chunk waits.
    let t0 = Instant::now();
    while lanes.counts(Lane::LOW).unwrap().delayed == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the writer never waited"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let user = InLane::new(Arc::clone(&lanes), Lane::USER).unwrap();
    let mut input = Paced::new(File::open(dir.path().join("user")).unwrap(), user);
    let mut read = Vec::new();
    input.read_to_end(&mut read).unwrap();
    let user_done = clock.now();
    let (writer_took, writer_done) = writer.join().unwrap();
    // Both lanes' last grants are behind us.
    let ended = clock.now();

    assert_eq!(read, user_data);
    let written = std::fs::read(dir.path().join("compaction")).unwrap();
    assert_eq!(written.len(), 2 << 20);
    assert!(written.iter().all(|&b| b == 0xAB));

    let low = lanes.counts(Lane::LOW).unwrap();
    let top = lanes.counts(Lane::USER).unwrap();
    // Whole chunks: the writer's lane is charged exactly what it wrote.
    assert_eq!(low.granted, 2 << 20);
    // Reads ask for a chunk each; the last, at the end of the file, moves nothing and keeps
    // its grant (the lanes never refund): at least the file, at most one chunk more per
    // read beyond it.
    assert!(top.granted >= user_data.len() as u64, "{top:?}");
    assert!(
        top.granted <= user_data.len() as u64 + (64 * KIB) as u64 * 2,
        "{top:?}"
    );
    assert_eq!((low.pending, top.pending), (0, 0));

    // The budget bounds both lanes together: burst + rate × time, the time on the lanes'
    // clock from before their first reading to after their last grant (no slack).
    let total = low.granted + top.granted;
    let elapsed = Duration::from_nanos(ended - born).as_secs_f64();
    let allowed = (64 * KIB) as f64 + 4.0 * (1 << 20) as f64 * elapsed;
    assert!(
        total as f64 <= allowed,
        "{total} bytes in {elapsed} s: more than {allowed}"
    );
    // The user's bytes at the rate take about 32 ms (the top lane goes first); held behind
    // the writer's backlog they would come after it, 480 ms of it at least. So the reads end
    // before the writer does, with the difference (over 400 ms) for a loaded machine that
    // holds the reading thread off its CPU (a fixed bound on the read's own time would be
    // at its mercy).
    assert!(
        user_done < writer_done,
        "the user read ended {} µs after the writer",
        (user_done - writer_done) / 1_000
    );
    assert!(
        writer_took >= Duration::from_millis(450),
        "the writer finished in {writer_took:?}: faster than the rate"
    );
}

#[test]
fn a_lane_must_exist() {
    let lanes =
        Arc::new(Lanes::new(LanesConfig::new("1MiB/s".parse().unwrap()).weights(&[1])).unwrap());
    assert!(InLane::new(Arc::clone(&lanes), Lane::new(1)).is_ok());
    assert_eq!(
        InLane::new(Arc::clone(&lanes), Lane::new(3)).unwrap_err(),
        LaneError::NoSuchLane {
            lane: Lane::new(3),
            lanes: 2
        }
    );
}

/// The lanes' own waits refuse a lane the limiter does not have, blocking and async alike,
/// at once and with nothing taken.
#[test]
fn the_waits_refuse_a_lane_that_does_not_exist() {
    let lanes = Lanes::new(LanesConfig::new("1MiB/s".parse().unwrap()).weights(&[1])).unwrap();
    let missing = LaneError::NoSuchLane {
        lane: Lane::new(3),
        lanes: 2,
    };
    assert_eq!(lanes.acquire_blocking(Lane::new(3), 1), Err(missing));
    assert_eq!(
        lanes.acquire_blocking_within(Lane::new(3), 1, Duration::from_secs(1)),
        Err(missing)
    );
    #[cfg(feature = "tokio")]
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        assert_eq!(
            runtime.block_on(lanes.acquire(Lane::new(3), 1)),
            Err(missing)
        );
    }
    assert_eq!(lanes.counts(Lane::new(1)).unwrap().granted, 0);
}

#[cfg(feature = "tokio")]
mod asynchronous {
    use super::*;
    use limitcore::io::AsyncPaced;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// On a manual clock, so that the budget is where the test says it is: the first
    /// writes take all of it and it stays empty while the clock stands still (on the real
    /// clock, a loaded machine could refill it before the write that must wait).
    #[tokio::test]
    async fn async_lanes_move_the_bytes_and_a_release_leaves_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new();
        let lanes = Arc::new(
            Lanes::with_clock(
                LanesConfig::new("4MiB/s burst 256KiB".parse().unwrap()),
                clock.clone(),
            )
            .unwrap(),
        );
        let path = dir.path().join("out");
        let mut out = Box::pin(AsyncPaced::new(
            tokio::fs::File::create(&path).await.unwrap(),
            InLane::new(Arc::clone(&lanes), Lane::MID).unwrap(),
        ));
        out.write_all(&[1; 200 * KIB]).await.unwrap();
        out.flush().await.unwrap();
        assert_eq!(tokio::fs::read(&path).await.unwrap(), vec![1; 200 * KIB]);
        assert_eq!(lanes.counts(Lane::MID).unwrap().granted, (200 * KIB) as u64);

        // The budget holds 56 KiB now, and the clock stands still: a write of 64 KiB waits.
        // Its future dropped, the request keeps its place in the queue...
        let write = out.write_all(&[2; 64 * KIB]);
        assert!(tokio::time::timeout(Duration::from_millis(1), write)
            .await
            .is_err());
        assert_eq!(lanes.counts(Lane::MID).unwrap().pending, 1);
        // ...until the adapter releases it.
        out.as_mut().release();
        let counts = lanes.counts(Lane::MID).unwrap();
        assert_eq!((counts.pending, counts.cancelled), (0, 1));

        // A user read of the file in the top lane. Its reads ask for more than a burst in
        // all, so the clock moves on, 10 ms a step, while it runs.
        let ticker = tokio::spawn({
            let clock = clock.clone();
            async move {
                loop {
                    clock.advance(Duration::from_millis(10));
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        });
        let mut input = AsyncPaced::new(
            tokio::fs::File::open(&path).await.unwrap(),
            InLane::new(Arc::clone(&lanes), Lane::USER).unwrap(),
        );
        let mut read = Vec::new();
        input.read_to_end(&mut read).await.unwrap();
        ticker.abort();
        assert_eq!(read.len(), 200 * KIB);
        assert!(lanes.counts(Lane::USER).unwrap().granted >= (200 * KIB) as u64);
    }
}
