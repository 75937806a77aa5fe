//! [`Paced`]: a blocking reader and writer paced through a limiter.

use super::pace::sealed::{Grant, Pacing};
use super::pace::{Charge, Pace, Take};
use super::{first_ask, refused, settle, Strategy};
use crate::decision::Denied;
use crate::notify::driver::{block_on, poll_fn};
use std::io::{self, Read, Write};

/// `n` permits from `pacer`, the thread blocked until they are granted: the pacer's owned
/// wait on the waiting layer's blocking driver (dropped unfinished by a panic, it gives its
/// place back).
fn take_blocking<P: Pacing + ?Sized>(pacer: &P, n: u32) -> Result<Grant, Denied> {
    let mut take = Take::new(pacer);
    block_on(poll_fn(|cx, nap| take.poll_take(n, cx, nap)))
}

/// A [`Read`] and [`Write`] wrapper whose bytes go through a limiter `P`, one permit a
/// byte, by one of the [module](super)'s strategies: at most the limiter's burst an
/// operation, sleeping (never spinning) until the permits conform.
///
/// Reads and writes share the limiter (a duplex stream is paced in both directions
/// together; wrap each half separately to pace them apart). The inner reader's or writer's
/// errors are returned unchanged; a refusal no wait cures is an [`io::Error`] holding a
/// [`Refused`](super::Refused).
///
/// # Examples
///
/// Copy through a budget of 64 MiB/s, 1 MiB at once:
///
/// ```
/// use limitcore::io::Paced;
/// use limitcore::Budget;
/// use std::io::{copy, Write};
///
/// let budget = Budget::new("64MiB/s burst 1MiB".parse()?)?;
/// let source = vec![1u8; 2 << 20];
/// let mut out = Paced::new(Vec::new(), &budget);
/// let t0 = std::time::Instant::now();
/// copy(&mut &source[..], &mut out)?; // 1 MiB at once, the 2nd MiB 1/64 s later
/// assert!(t0.elapsed() >= std::time::Duration::from_millis(15));
/// assert_eq!(out.into_inner(), source);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Paced<T, P> {
    inner: T,
    pacer: P,
    strategy: Strategy,
    /// Bytes moved but not charged yet (charge after: a charge that fell short and could not
    /// be taken at once); taken before the next operation.
    owed: u32,
}

impl<T, P: Pace> Paced<T, P> {
    /// `inner` paced through `pacer`, acquiring before each operation
    /// ([`Strategy::AcquireBefore`]).
    pub fn new(inner: T, pacer: P) -> Self {
        Paced {
            inner,
            pacer,
            strategy: Strategy::AcquireBefore,
            owed: 0,
        }
    }

    /// `inner` paced through the budget `pacer`, charging after each operation
    /// ([`Strategy::ChargeAfter`]): give the budget at least `(burst − 1)` bytes' time of
    /// [`max_debt`](crate::BudgetConfig::max_debt) so that every charge fits.
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::io::Paced;
    /// use limitcore::{Budget, BudgetConfig, RateLimiter};
    /// use limitcore::clock::ManualClock;
    /// use std::io::Write;
    /// use std::time::Duration;
    ///
    /// // 1000 bytes a second, 100 at once, up to 1 s of debt.
    /// let config = BudgetConfig::new("1kB/s burst 100".parse()?).max_debt(Duration::from_secs(1));
    /// let budget = Budget::with_config(&config, ManualClock::new())?;
    /// let mut out = Paced::charge_after(Vec::new(), &budget);
    /// assert_eq!(out.write(&[0; 100])?, 100); // from a full budget: empties it
    /// budget.clock().advance(Duration::from_millis(1)); // one byte conforms again
    /// assert_eq!(out.write(&[0; 100])?, 100); // goes at once, into 99 bytes of debt
    /// assert_eq!(budget.snapshot().full_after, Duration::from_millis(199));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn charge_after(inner: T, pacer: P) -> Self
    where
        P: Charge,
    {
        Paced {
            strategy: Strategy::ChargeAfter,
            ..Paced::new(inner, pacer)
        }
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

    /// The limiter.
    pub fn pacer(&self) -> &P {
        &self.pacer
    }

    /// The inner reader or writer; bytes still owed (charge after) are charged first.
    pub fn into_inner(self) -> T {
        if self.owed > 0 {
            let _ = self.pacer.charge(self.owed);
        }
        self.inner
    }

    /// One paced operation over a buffer of `len > 0` bytes: `io` moves at most the bytes
    /// it is given.
    fn operate(
        &mut self,
        len: usize,
        io: impl FnOnce(&mut T, usize) -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.pay_owed()?;
        let (most, ask) = first_ask(self.strategy, len, self.pacer.chunk());
        let grant = take_blocking(&self.pacer, ask).map_err(|denied| refused(denied, ask))?;
        let limit = match self.strategy {
            Strategy::AcquireBefore => grant.n,
            Strategy::ChargeAfter => most,
        };
        let limit = (limit as usize).min(len);
        let result = io(&mut self.inner, limit);
        let moved = result.as_ref().map_or(0, |&moved| moved.min(limit));
        self.owed = self
            .owed
            .saturating_add(settle(&self.pacer, self.strategy, grant, moved));
        // Charging after, a shortfall is taken now, so that the bound holds at once; if the
        // limiter refuses it for good, it stays owed and the next operation reports it.
        let _ = self.pay_owed();
        result
    }

    /// Take the bytes owed, waiting.
    fn pay_owed(&mut self) -> io::Result<()> {
        while self.owed > 0 {
            let ask = self.owed.min(self.pacer.chunk());
            let grant = take_blocking(&self.pacer, ask).map_err(|denied| refused(denied, ask))?;
            self.owed -= grant.n.min(self.owed);
        }
        Ok(())
    }
}

impl<R: Read, P: Pace> Read for Paced<R, P> {
    /// Read at most one chunk (the limiter's burst), after taking its permits (acquire
    /// before) or one permit (charge after); see the [module](super).
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return self.inner.read(buf);
        }
        self.operate(buf.len(), |inner, limit| inner.read(&mut buf[..limit]))
    }
}

impl<W: Write, P: Pace> Write for Paced<W, P> {
    /// Write at most one chunk (the limiter's burst), after taking its permits (acquire
    /// before) or one permit (charge after); see the [module](super).
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return self.inner.write(buf);
        }
        self.operate(buf.len(), |inner, limit| inner.write(&buf[..limit]))
    }

    /// Flush the inner writer (not paced).
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
