//! [`AsyncPaced`]: a tokio reader and writer paced through a limiter (feature `tokio`).

use super::pace::sealed::{Grant, Pacing};
use super::pace::{Charge, Pace, Take};
use super::{first_ask, refused, settle, Strategy};
use crate::notify::driver::Naps;
use alloc::sync::Arc;
use core::fmt;
use core::pin::Pin;
use core::task::{ready, Context, Poll};
use pin_project_lite::pin_project;
use std::io;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// One direction's pacing, kept between polls: its own owned wait on the pacer (tokio-util's
/// `PollSemaphore` shape), so that dropping it (with the adapter) gives back all it holds.
#[derive(Debug)]
struct Side<P: Pacing> {
    /// The wait of the operation under way (it owns a handle on the pacer).
    take: Take<Arc<P>>,
    /// Its naps on the OS timer.
    naps: Naps,
    /// Permits granted to an operation whose inner I/O was not ready, and the bytes it may
    /// move: the next poll of this direction uses them.
    granted: Option<(Grant, usize)>,
    /// Bytes moved but not charged yet (charge after: a charge that fell short), taken
    /// before the next operation.
    owed: u32,
}

impl<P: Pacing> Side<P> {
    fn new(pacer: Arc<P>) -> Self {
        Side {
            take: Take::new(pacer),
            naps: Naps::default(),
            granted: None,
            owed: 0,
        }
    }

    /// Poll for the permits of an operation over a buffer of `len > 0` bytes: the grant and
    /// the bytes it may move.
    fn poll_grant(
        &mut self,
        strategy: Strategy,
        len: usize,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<(Grant, usize)>> {
        if let Some(granted) = self.granted.take() {
            return Poll::Ready(Ok(granted));
        }
        let Side {
            take, naps, owed, ..
        } = self;
        let chunk = take.pacer.chunk();
        let mut take =
            |ask: u32, cx: &mut Context<'_>| naps.poll(cx, |cx, nap| take.poll_take(ask, cx, nap));
        while *owed > 0 {
            let ask = (*owed).min(chunk);
            let grant = ready!(take(ask, cx)).map_err(|denied| refused(denied, ask))?;
            *owed -= grant.n.min(*owed);
        }
        let (most, ask) = first_ask(strategy, len, chunk);
        let grant = ready!(take(ask, cx)).map_err(|denied| refused(denied, ask))?;
        let limit = match strategy {
            Strategy::AcquireBefore => grant.n,
            Strategy::ChargeAfter => most,
        };
        Poll::Ready(Ok((grant, limit as usize)))
    }

    /// After the inner I/O of an operation on `grant`: `Pending` keeps the grant for the
    /// next poll; a result settles it (an error moved nothing).
    fn finish(
        &mut self,
        strategy: Strategy,
        granted: (Grant, usize),
        result: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match &result {
            Poll::Pending => self.granted = Some(granted),
            Poll::Ready(outcome) => {
                let moved = outcome.as_ref().map_or(0, |&moved| moved.min(granted.1));
                let owed = settle(&*self.take.pacer, strategy, granted.0, moved);
                self.owed = self.owed.saturating_add(owed);
            }
        }
        result
    }

    /// Give back what this direction holds and charge what it owes.
    fn release(&mut self) {
        self.take.abandon();
        self.naps.cancel();
        let pacer = &*self.take.pacer;
        if let Some((grant, _)) = self.granted.take() {
            pacer.keep(grant, 0);
        }
        if self.owed > 0 {
            let _ = pacer.charge(core::mem::take(&mut self.owed));
        }
    }
}

impl<P: Pacing> Drop for Side<P> {
    fn drop(&mut self) {
        // The wait gives its place back in its own `Drop`; the grant and the debt are this
        // direction's to settle.
        self.release();
    }
}

pin_project! {
    /// An [`AsyncRead`] and [`AsyncWrite`] wrapper whose bytes go through a limiter `P`, one
    /// permit a byte, by one of the [module](super)'s strategies (feature `tokio`): at most
    /// the limiter's burst an operation, sleeping on tokio's timer until the permits
    /// conform.
    ///
    /// Each direction keeps its own owned wait on the pacer (the adapter shares the pacer
    /// between them in an `Arc`, as tokio-util's `PollSemaphore` keeps its semaphore): an
    /// operation whose wait, or inner I/O, is not finished when its future is dropped
    /// leaves its place (and any permits granted) to the next operation of that direction,
    /// and dropping the adapter drops both waits, which gives back all they hold and
    /// charges what is owed (see the module's "Waits and cancellation"). The inner reader's
    /// or writer's errors are returned unchanged; a refusal no wait cures is an
    /// [`io::Error`] holding a [`Refused`](super::Refused).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::io::AsyncPaced;
    /// use limitcore::Budget;
    /// use std::sync::Arc;
    /// use tokio::io::AsyncWriteExt;
    ///
    /// let budget = Arc::new(Budget::new("64MiB/s burst 64KiB".parse()?)?);
    /// let mut out = AsyncPaced::new(Vec::new(), budget.clone());
    /// out.write_all(&[7; 100_000]).await?; // 64 KiB at once, the rest about 0.5 ms later
    /// assert_eq!(out.get_ref().len(), 100_000);
    /// # Ok(())
    /// # }
    /// ```
    pub struct AsyncPaced<T, P: Pace> {
        #[pin]
        inner: T,
        pacer: Arc<P>,
        strategy: Strategy,
        read: Side<P>,
        write: Side<P>,
    }
}

impl<T: fmt::Debug, P: Pace + fmt::Debug> fmt::Debug for AsyncPaced<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncPaced")
            .field("inner", &self.inner)
            .field("pacer", &self.pacer)
            .field("strategy", &self.strategy)
            .field("read", &self.read)
            .field("write", &self.write)
            .finish()
    }
}

impl<T, P: Pace> AsyncPaced<T, P> {
    /// `inner` paced through `pacer`, acquiring before each operation
    /// ([`Strategy::AcquireBefore`]).
    pub fn new(inner: T, pacer: P) -> Self {
        AsyncPaced::with_strategy(inner, pacer, Strategy::AcquireBefore)
    }

    fn with_strategy(inner: T, pacer: P, strategy: Strategy) -> Self {
        let pacer = Arc::new(pacer);
        AsyncPaced {
            inner,
            read: Side::new(Arc::clone(&pacer)),
            write: Side::new(Arc::clone(&pacer)),
            pacer,
            strategy,
        }
    }

    /// `inner` paced through the budget `pacer`, charging after each operation
    /// ([`Strategy::ChargeAfter`]; see [`Paced::charge_after`](super::Paced::charge_after)).
    pub fn charge_after(inner: T, pacer: P) -> Self
    where
        P: Charge,
    {
        AsyncPaced::with_strategy(inner, pacer, Strategy::ChargeAfter)
    }

    /// The strategy.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The inner reader or writer.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The inner reader or writer, mutably (bytes moved through it directly are not paced).
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// The inner reader or writer, pinned.
    pub fn get_pin_mut(self: Pin<&mut Self>) -> Pin<&mut T> {
        self.project().inner
    }

    /// The limiter.
    pub fn pacer(&self) -> &P {
        &self.pacer
    }

    /// Give back what the adapter holds for operations that did not finish (a budget's
    /// place in the schedule, permits granted to an operation whose inner I/O was not
    /// ready), and charge the bytes it owes: for a caller that dropped an operation's future
    /// and will not try it again. Dropping the adapter does the same.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use limitcore::io::AsyncPaced;
    /// use limitcore::{Budget, RateLimiter};
    /// use std::pin::Pin;
    /// use std::time::Duration;
    /// use tokio::io::AsyncWriteExt;
    ///
    /// let budget = Budget::new("1KiB/s burst 1KiB".parse()?)?;
    /// let mut out = AsyncPaced::new(Vec::new(), &budget);
    /// out.write_all(&[0; 1024]).await?;
    /// // The next KiB waits about 1 s; give up after 10 ms.
    /// let gave_up = tokio::time::timeout(Duration::from_millis(10), out.write_all(&[1; 1024]));
    /// assert!(gave_up.await.is_err());
    /// assert!(budget.snapshot().full_after > Duration::from_millis(1500)); // still queued
    /// Pin::new(&mut out).release();
    /// assert!(budget.snapshot().full_after <= Duration::from_secs(1));
    /// # Ok(())
    /// # }
    /// ```
    pub fn release(self: Pin<&mut Self>) {
        let this = self.project();
        this.read.release();
        this.write.release();
    }
}

impl<R: AsyncRead, P: Pace> AsyncRead for AsyncPaced<R, P> {
    /// Read at most one chunk (the limiter's burst) into `buf`, after its permits (acquire
    /// before) or one permit (charge after); see the [module](super).
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        let len = buf.remaining();
        if len == 0 {
            return this.inner.poll_read(cx, buf);
        }
        let granted = ready!(this.read.poll_grant(*this.strategy, len, cx))?;
        // A safe sub-buffer of at most `limit` bytes (initialised first, so that `advance`
        // may count what the inner reader fills).
        let limit = granted.1.min(len);
        let mut part = ReadBuf::new(buf.initialize_unfilled_to(limit));
        let result = this.inner.poll_read(cx, &mut part);
        let result = result.map_ok(|()| part.filled().len());
        let moved = match this.read.finish(*this.strategy, granted, result) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(outcome) => outcome?,
        };
        buf.advance(moved);
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite, P: Pace> AsyncWrite for AsyncPaced<W, P> {
    /// Write at most one chunk (the limiter's burst) of `buf`, after its permits (acquire
    /// before) or one permit (charge after); see the [module](super).
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        if buf.is_empty() {
            return this.inner.poll_write(cx, buf);
        }
        let granted = ready!(this.write.poll_grant(*this.strategy, buf.len(), cx))?;
        let limit = granted.1.min(buf.len());
        let result = this.inner.poll_write(cx, &buf[..limit]);
        this.write.finish(*this.strategy, granted, result)
    }

    /// Flush the inner writer (not paced).
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }

    /// Shut the inner writer down (not paced).
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_shutdown(cx)
    }
}
