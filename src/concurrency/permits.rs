//! [`Permits`]: the shell of a concurrency limit: its `PermitWord` in one `AtomicU64`,
//! changed only through the crate's compare-and-swap loop, and the queue of waiters behind
//! a mutex, used only when a request must wait.

use super::error::{AcquireError, LimitError, Refusal};
use super::feedback::{sealed::Feedback as _, Adaptive, Feedback, Fixed};
use super::permit::{sealed, Completion, Permit, Token};
use super::queue::Queue;
use super::window::Observation;
use super::word::{check_limit, PermitWord, MAX_LIMIT, RETIRED};
use super::AdaptiveRule;
use crate::cas;
use crate::clock::{duration_to_nanos, Clock, DefaultClock, Nanos};
use crate::sync::{lock, AtomicU64, Mutex, Ordering};
use alloc::sync::Arc;
use core::convert::Infallible;
use core::fmt;

/// The order in which waiters are served when permits come back.
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::{Order, Permits};
///
/// // Under overload, serve the newest request first; at most 100 wait.
/// let permits = Permits::new(32)?.with_order(Order::Lifo).with_backlog(100)?;
/// assert_eq!(permits.order(), Order::Lifo);
/// # Ok::<(), limitcore::concurrency::LimitError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Order {
    /// First come, first served (the default): no waiter is overtaken.
    #[default]
    Fifo,
    /// Last come, first served: under overload the newest request, the one most likely to
    /// still be wanted, is served first (Netflix concurrency-limits' `LifoBlockingLimiter`),
    /// and a new request takes free permits even while older ones wait.
    Lifo,
}

/// [`Permit`]s that own a reference to their limit (`'static` when the limit is): move one
/// into a task or a response body's future, and complete it when the work ends.
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::{Aimd, OwnedPermit, Adaptive, Permits};
/// use std::sync::Arc;
///
/// // What a response body could hold until its last byte.
/// struct Body {
///     permit: Option<OwnedPermit<Adaptive<Aimd>>>,
/// }
///
/// let permits = Arc::new(Permits::adaptive(Aimd::new())?);
/// let mut body = Body { permit: Some(permits.try_acquire_owned(1)?) };
/// assert_eq!(permits.in_flight(), 1);
/// if let Some(permit) = body.permit.take() {
///     permit.success();                      // the body ended: back, with its latency
/// }
/// assert_eq!(permits.in_flight(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type OwnedPermit<F = Fixed> = Permit<Arc<Permits<F>>>;

/// A concurrency limit: at most `limit` permits in flight, the count and the limit in one
/// `AtomicU64`, reconfigurable at any time, with a bounded queue of waiters.
///
/// `F` says what the limit learns from its permits' outcomes: nothing ([`Fixed`], the
/// default), or an adaptive rule that sets the limit ([`Adaptive`]; see
/// [`Permits::adaptive`]).
///
/// # Guarantees
///
/// - **In flight never above the limit**, except just after a cut: every grant is one
///   compare-and-swap that checks `in flight + n ≤ limit` on the word it replaces, so no
///   race creates a permit. [`Permits::reconfigure`] takes effect as permits come back; nothing
///   is revoked.
/// - **One CAS when nobody waits**: a grant or a release is one successful compare-and-swap
///   on the word; the queue's mutex is taken only when a request waits, or when a release,
///   a resize or a cancellation finds the word's waiting bit set.
/// - **No lost wake-up** (the module's "No lost wake-up"): a queued waiter whose permits fit
///   is granted by whoever made them fit, without being polled.
/// - **Waiters are served in order** ([`Order`]): FIFO never lets a request overtake a
///   waiter; LIFO serves the newest first. At most `backlog` wait (unbounded by default);
///   beyond that a request is refused with [`AcquireError::BacklogFull`].
/// - **Cancellation-safe**: a blocking wait that times out, or an async wait dropped before
///   it completes, takes nothing; if permits were granted to it in the meantime it gives
///   them back (or, for a blocking wait, keeps them and returns them).
/// - **Permits are never lost**: a [`Permit`] gives its permits back when dropped.
/// - A waiter asking for more than a new, smaller limit is refused with
///   [`AcquireError::ExceedsLimit`] when the cut is made (it could not be granted while the
///   cut lasts).
///
/// The limit publishes nothing: a grant is not a memory fence for the caller's data (see
/// the module's "Orderings").
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::{AcquireError, Permits};
/// use std::time::Duration;
///
/// let permits = Permits::new(2)?.with_backlog(8)?;
/// let a = permits.try_acquire(1)?;
/// let b = permits.acquire_blocking_within(1, Duration::from_millis(10))?;
/// assert_eq!(permits.in_flight(), 2);
/// // Full: a wait times out with nothing taken.
/// assert_eq!(
///     permits.acquire_blocking_within(1, Duration::from_millis(1)).unwrap_err(),
///     AcquireError::TimedOut
/// );
/// permits.reconfigure(1)?;        // a cut: both permits stay valid
/// drop((a, b));
/// assert_eq!((permits.in_flight(), permits.limit()), (0, 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Permits<F: Feedback = Fixed> {
    /// The limit's state, a `PermitWord`: in flight (bits 0–30), the queue is not empty
    /// (bit 31), the limit (bits 32–61), pinned (bit 62, keyed states); see its "Layout".
    pub(super) word: AtomicU64,
    pub(super) waiters: Mutex<Queue>,
    pub(super) backlog: Option<u32>,
    pub(super) order: Order,
    pub(super) feedback: F,
}

impl<F: Feedback> fmt::Debug for Permits<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permits")
            .field("word", &self.word())
            .field("backlog", &self.backlog)
            .field("order", &self.order)
            .field("feedback", &self.feedback)
            .finish()
    }
}

impl Permits<Fixed> {
    /// A limit of `limit` permits in flight, FIFO, with an unbounded queue.
    ///
    /// # Errors
    ///
    /// [`LimitError::ZeroLimit`] for 0, [`LimitError::LimitTooLarge`] above
    /// [`MAX_LIMIT`](super::MAX_LIMIT).
    pub fn new(limit: u32) -> Result<Self, LimitError> {
        Permits::build(limit, Fixed)
    }
}

#[cfg(feature = "keyed")]
impl Permits<Fixed> {
    /// A fresh state of a keyed limit: `word`'s limit, the keyed limit's queue settings.
    pub(crate) fn keyed_state(word: PermitWord, backlog: Option<u32>, order: Order) -> Self {
        Permits {
            word: AtomicU64::new(word.bits()),
            waiters: Mutex::new(Queue::new()),
            backlog,
            order,
            feedback: Fixed,
        }
    }
}

impl<R: AdaptiveRule> Permits<Adaptive<R>> {
    /// An adaptive limit: `rule` sets the limit from the outcomes of the permits, timed on
    /// the default clock ([`MonotonicClock`](crate::clock::MonotonicClock)). It starts at
    /// the rule's initial limit.
    ///
    /// # Errors
    ///
    /// The rule's [`AdaptiveRule::check`] (an initial limit outside its minimum and
    /// maximum); a [`LimitError`] if its initial limit is 0 or above
    /// [`MAX_LIMIT`](super::MAX_LIMIT).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::concurrency::{Permits, Vegas};
    ///
    /// let permits = Permits::adaptive(Vegas::new())?;
    /// assert_eq!(permits.limit(), 20);             // Vegas' initial limit
    /// permits.try_acquire(1)?.success();          // a latency sample
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn adaptive(rule: R) -> Result<Self, LimitError> {
        Permits::adaptive_with_clock(rule, DefaultClock::new())
    }
}

impl<R: AdaptiveRule, C: Clock + fmt::Debug + 'static> Permits<Adaptive<R, C>> {
    /// As [`Permits::adaptive`], timing outcomes on `clock` (a
    /// [`ManualClock`](crate::clock::ManualClock) for tests and simulations).
    ///
    /// # Errors
    ///
    /// As [`Permits::adaptive`].
    pub fn adaptive_with_clock(rule: R, clock: C) -> Result<Self, LimitError> {
        rule.check()?;
        let feedback = Adaptive::new(rule, clock);
        let limit = feedback.initial_limit().unwrap_or(1);
        Permits::build(limit, feedback)
    }
}

impl<F: Feedback> Permits<F> {
    fn build(limit: u32, feedback: F) -> Result<Self, LimitError> {
        Ok(Permits {
            word: AtomicU64::new(PermitWord::new(limit)?.bits()),
            waiters: Mutex::new(Queue::new()),
            backlog: None,
            order: Order::Fifo,
            feedback,
        })
    }

    /// Let at most `backlog` requests wait; the next one is refused with
    /// [`AcquireError::BacklogFull`].
    ///
    /// # Errors
    ///
    /// [`LimitError::ZeroBacklog`] for 0 (to never wait, use `try_acquire`).
    pub fn with_backlog(mut self, backlog: u32) -> Result<Self, LimitError> {
        if backlog == 0 {
            return Err(LimitError::ZeroBacklog);
        }
        self.backlog = Some(backlog);
        Ok(self)
    }

    /// Serve waiters in `order` (default FIFO).
    pub fn with_order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }

    /// The limit's word as it is now (it may change at once). Users read
    /// [`Permits::snapshot`].
    pub(crate) fn word(&self) -> PermitWord {
        // Relaxed: an observation of the one word, no decision rests on it (`cas`'s
        // "Orderings"); its partners are the RMWs of `cas::apply`.
        PermitWord::from_bits(self.word.load(Ordering::Relaxed))
    }

    /// The limit, in permits.
    pub fn limit(&self) -> u32 {
        self.word().limit()
    }

    /// Permits in flight.
    pub fn in_flight(&self) -> u32 {
        self.word().in_flight()
    }

    /// Permits a request could take now (0 while others wait or a cut is pending).
    pub fn available(&self) -> u32 {
        let word = self.word();
        if word.waiting() {
            0
        } else {
            word.available()
        }
    }

    /// Requests waiting now (takes the queue's lock).
    pub fn waiters(&self) -> u32 {
        lock(&self.waiters).len()
    }

    /// The most requests that may wait (`None`: no bound).
    pub fn backlog(&self) -> Option<u32> {
        self.backlog
    }

    /// The order waiters are served in.
    pub fn order(&self) -> Order {
        self.order
    }

    /// What the limit learns from outcomes (for an adaptive limit, its controller: the
    /// rule and its state).
    pub fn feedback(&self) -> &F {
        &self.feedback
    }

    /// Take `n` permits now if they fit and nobody waits; `n = 0` succeeds with nothing.
    ///
    /// # Errors
    ///
    /// [`AcquireError::Full`] if they do not fit now or others are queued;
    /// [`AcquireError::ExceedsLimit`] if `n` is above the limit.
    #[inline]
    pub fn try_acquire(&self, n: u32) -> Result<Permit<&Self>, AcquireError> {
        if n == 0 {
            return Ok(Permit::new(self, Token::EMPTY));
        }
        match self.take(n) {
            Ok(token) => Ok(Permit::new(self, token)),
            Err(refusal) => Err(refusal.into_error()),
        }
    }

    /// As [`Permits::try_acquire`], with a permit that owns a reference to the limit.
    ///
    /// # Errors
    ///
    /// As [`Permits::try_acquire`].
    #[inline]
    pub fn try_acquire_owned(self: &Arc<Self>, n: u32) -> Result<OwnedPermit<F>, AcquireError> {
        if n == 0 {
            return Ok(Permit::new(self.clone(), Token::EMPTY));
        }
        match self.take(n) {
            Ok(token) => Ok(Permit::new(self.clone(), token)),
            Err(refusal) => Err(refusal.into_error()),
        }
    }

    /// Change the limit. A larger limit serves waiters at once; a smaller one takes effect
    /// as permits come back (nothing is revoked), and refuses the waiters asking for more
    /// than it ([`AcquireError::ExceedsLimit`]). An adaptive limit's rule sets the limit
    /// again at its next sample.
    ///
    /// # Errors
    ///
    /// [`LimitError::ZeroLimit`] for 0, [`LimitError::LimitTooLarge`] above
    /// [`MAX_LIMIT`](super::MAX_LIMIT).
    ///
    /// # Examples
    ///
    /// ```
    /// use limitcore::concurrency::Permits;
    ///
    /// let permits = Permits::new(2)?;
    /// let held = permits.try_acquire(2)?;
    /// permits.reconfigure(1)?;                    // a cut: the 2 held stay valid
    /// assert_eq!((permits.limit(), permits.in_flight()), (1, 2));
    /// drop(held);
    /// assert!(permits.try_acquire(1).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reconfigure(&self, limit: u32) -> Result<(), LimitError> {
        let limit = check_limit(limit)?;
        // An unkeyed word is never retired; a keyed state's `Permits` is not reachable
        // from outside the crate.
        let _ = self.set_limit(limit, None);
        Ok(())
    }

    // ---- The protocol (see the module's "No lost wake-up"). ----

    /// The grant of a request that does not wait: one CAS, refused if anyone is queued.
    #[inline]
    pub(crate) fn take(&self, n: u32) -> Result<Token, Refusal> {
        let word = cas::apply(
            &self.word,
            #[inline(always)]
            move |w| match PermitWord::from_bits(w).acquire(n) {
                Ok(next) => Ok((next.bits(), next)),
                Err(e) => Err(refused(w, e)),
            },
        )?;
        Ok(self.token(n, word))
    }

    /// Take `n` permits whatever the limit (a partition's guaranteed share).
    pub(crate) fn force(&self, n: u32) -> Result<Token, AcquireError> {
        let word = cas::apply(&self.word, |w| {
            PermitWord::from_bits(w)
                .force(n)
                .map(|next| (next.bits(), next))
        })?;
        Ok(self.token(n, word))
    }

    /// The token of `n` permits granted by a CAS that left `word`.
    #[inline]
    pub(crate) fn token(&self, n: u32, word: PermitWord) -> Token {
        Token {
            n,
            class: 0,
            word,
            start: if F::TIMED { self.feedback.now() } else { 0 },
        }
    }

    /// Give back `n` permits: one `fetch_sub` on the in-flight field (no retry, however
    /// many threads release at once), then a load of the word; if its queue is not empty,
    /// serve it.
    ///
    /// The holder owns `n` of the in-flight count, the word's low field, so the subtraction
    /// never borrows into the fields above it (the limit, the waiting bit): it is exactly
    /// `PermitWord::release`, applied as one read-modify-write instead of a CAS loop. A
    /// keyed word with permits in flight is never retired (eviction retires idle words
    /// only), so the subtraction is on a live word; the load after it may find the word
    /// retired (the release left it idle), whose waiting bit sends it to a serve that finds
    /// an empty queue (a word is retired only with nobody queued, and a retired word takes
    /// no waiter).
    ///
    /// The waiting bit is read by a load after the subtraction rather than from the
    /// subtraction's result: an RMW whose result is not used (`lock sub` on x86-64) and a
    /// load took a grant and release from 1.16× to 1.10× the bare word's time on 1 thread,
    /// against one whose result is tested (issue 28); the module's "No lost wake-up" shows
    /// that the load is enough.
    #[inline]
    pub(crate) fn give_back(&self, n: u32) {
        debug_assert!(n <= PermitWord::from_bits(self.word.load(Ordering::Relaxed)).in_flight());
        // Relaxed: an RMW on the one word, ordered with every grant and release by its
        // modification order (the module's "Orderings").
        self.word.fetch_sub(u64::from(n), Ordering::Relaxed);
        // Relaxed: by coherence the load reads the subtraction's word or a later one, so a
        // waiting bit set before the subtraction is seen unless a serve or a cancellation
        // has emptied the queue since; a waiting bit there means a waiter may now fit, and
        // it is ours to serve (partner: the waiter's joining CAS, "No lost wake-up").
        let word = PermitWord::from_bits(self.word.load(Ordering::Relaxed));
        if word.waiting() {
            self.serve();
        }
    }

    /// Keyed eviction: retire the word if it is idle (one CAS; see `crate::cell`'s
    /// "Orderings of the retirement protocol"). Whether it is retired now.
    #[cfg(feature = "keyed")]
    pub(crate) fn retire_if_idle(&self) -> bool {
        cas::apply(&self.word, |w| {
            if w == RETIRED {
                Err(true)
            } else if PermitWord::from_bits(w).is_idle() {
                Ok((RETIRED, true))
            } else {
                Err(false)
            }
        })
        .unwrap_or_else(|retired| retired)
    }

    /// Whether the word was retired by eviction.
    #[cfg(feature = "keyed")]
    pub(crate) fn is_retired(&self) -> bool {
        // Relaxed: the retiring CAS is the word's last write; a stale read only leaves a
        // live entry for a later sweep (as `crate::cell`'s `is_retired`).
        self.word.load(Ordering::Relaxed) == RETIRED
    }

    /// What an outcome teaches the feedback (only for a limit that times its permits).
    fn learn(&self, token: &Token, outcome: Completion) {
        let (end, dropped) = match outcome {
            Completion::Success => (self.feedback.now(), false),
            Completion::SuccessAfter(latency) => (
                token.start.saturating_add(duration_to_nanos(latency)),
                false,
            ),
            Completion::Dropped => (self.feedback.now(), true),
            Completion::Ignored => return,
        };
        let observation = Observation {
            start: token.start,
            end,
            in_flight: token.word.in_flight(),
            dropped,
        };
        let mut wakes = crate::notify::wake::WakeList::new();
        self.feedback.record(observation, &mut |limit| {
            // A rule keeps to its bounds (`AdaptiveRule`'s contract); the clamp keeps a
            // rule of the caller's that does not within what the word holds.
            let _ = self.set_limit_then(limit.clamp(1, MAX_LIMIT), None, &mut wakes);
        });
        // Woken once the controller's lock is released.
        wakes.wake_all();
    }
}

impl<F: Feedback> sealed::Release for Permits<F> {
    #[inline]
    fn release(&self, token: &Token, outcome: Completion) {
        if token.n == 0 {
            return;
        }
        self.give_back(token.n);
        if F::TIMED {
            self.learn(token, outcome);
        }
    }

    fn now(&self) -> Nanos {
        self.feedback.now()
    }
}

/// Why a grant was refused: the rule's answer, or "this keyed state is retired".
#[cold]
fn refused(word: u64, e: AcquireError) -> Refusal {
    if word == RETIRED {
        Refusal::Gone
    } else {
        Refusal::Denied(e)
    }
}

/// The value of a transition that cannot fail.
#[inline(always)]
pub(super) fn infallible<T>(result: Result<T, Infallible>) -> T {
    match result {
        Ok(value) => value,
        Err(never) => match never {},
    }
}
