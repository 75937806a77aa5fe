//! What a [`Permits`](super::Permits) does with its permits' outcomes: nothing
//! ([`Fixed`]), or feed them to an adaptive rule that sets the limit ([`Adaptive`]).

use super::adaptive::AdaptiveRule;
use super::window::{Collector, Observation, Window};
use crate::clock::{Clock, DefaultClock, Nanos};
use crate::sync::{lock, Mutex};
use core::fmt;

/// What a concurrency limit learns from its permits' outcomes: [`Fixed`] (nothing; the
/// limit only changes by [`Permits::reconfigure`](super::Permits::reconfigure)) or [`Adaptive`] (a
/// rule sets it). Sealed.
///
/// # Examples
///
/// Code that takes any limit, fixed or adaptive:
///
/// ```
/// use limitcore::concurrency::{Aimd, Feedback, Permits};
///
/// fn busy<F: Feedback>(permits: &Permits<F>) -> bool {
///     permits.available() == 0
/// }
///
/// assert!(!busy(&Permits::new(4)?));
/// assert!(!busy(&Permits::adaptive(Aimd::new())?));
/// # Ok::<(), limitcore::concurrency::LimitError>(())
/// ```
pub trait Feedback: sealed::Feedback {}

impl<T: sealed::Feedback> Feedback for T {}

pub(crate) mod sealed {
    use crate::clock::Nanos;
    use crate::concurrency::window::Observation;
    use core::fmt;

    /// The crate's side of [`Feedback`](super::Feedback); not callable outside the crate.
    pub trait Feedback: fmt::Debug + Send + Sync + 'static {
        /// Whether a grant reads the clock (to time the work it covers).
        const TIMED: bool;
        /// The time, ns (0 for a limit that reads no clock).
        fn now(&self) -> Nanos;
        /// The limit to start from (`None`: the caller's).
        fn initial_limit(&self) -> Option<u32>;
        /// Learn from one request's outcome; `resize` sets the limit (called under the
        /// feedback's own lock, so limits are applied in the order they were decided; it
        /// wakes nobody itself: the caller wakes after `record` returns).
        fn record(&self, observation: Observation, resize: &mut dyn FnMut(u32));
    }
}

/// A fixed limit: outcomes are not looked at and no clock is read; the limit changes only
/// when [`Permits::reconfigure`](super::Permits::reconfigure) changes it.
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::{Fixed, Permits};
///
/// let permits: Permits<Fixed> = Permits::new(16)?;
/// permits.try_acquire(1)?.success();          // no sample, no clock read
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fixed;

impl sealed::Feedback for Fixed {
    const TIMED: bool = false;

    #[inline(always)]
    fn now(&self) -> Nanos {
        0
    }

    fn initial_limit(&self) -> Option<u32> {
        None
    }

    #[inline(always)]
    fn record(&self, _: Observation, _: &mut dyn FnMut(u32)) {}
}

/// An adaptive limit's controller: the rule `R` fed the outcomes of the permits it gave
/// out, windowed as the rule asks ([`AdaptiveRule::window`]), timed on the clock `C`.
/// Build the limit with [`Permits::adaptive`](super::Permits::adaptive) (or
/// [`Permits::adaptive_with_clock`](super::Permits::adaptive_with_clock)); read the rule's
/// state with [`Adaptive::state`].
///
/// Each outcome costs a clock read and one critical section on the controller's lock (the
/// sample's accumulation; at a window's close the rule's update and the resize too).
/// Outcomes that are not samples ([`Completion::Ignored`](super::Completion::Ignored)) cost
/// neither. Sources: Netflix concurrency-limits' `AbstractLimiter` (a sample per outcome:
/// latency since the grant, in flight at the grant, dropped or not) and `WindowedLimit`.
///
/// # Examples
///
/// ```
/// use limitcore::concurrency::{Aimd, Permits};
/// use limitcore::clock::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let rule = Aimd::new().with_limits(1, 100)?.with_initial(4)?;
/// let permits = Permits::adaptive_with_clock(rule, clock.clone())?;
/// let held: Vec<_> = (0..4).map(|_| permits.try_acquire(1).unwrap()).collect();
/// clock.advance(Duration::from_millis(5));
/// for permit in held {
///     permit.success();
/// }
/// // Granted with 1, 2, 3 and 4 in flight: the first used less than half the limit, each
/// // of the others at least half, so 4 → 5 → 6 → 7.
/// assert_eq!(permits.limit(), 7);
/// assert_eq!(permits.feedback().state(), 7);
/// # Ok::<(), limitcore::concurrency::LimitError>(())
/// ```
pub struct Adaptive<R: AdaptiveRule, C = DefaultClock> {
    rule: R,
    clock: C,
    controller: Mutex<Controller<R::State>>,
}

/// The rule's state and the open window, changed together under one lock.
#[derive(Debug)]
struct Controller<S> {
    state: S,
    window: Window,
    collector: Collector,
}

impl<R: AdaptiveRule, C: fmt::Debug> fmt::Debug for Adaptive<R, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Adaptive")
            .field("rule", &self.rule)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl<R: AdaptiveRule, C: Clock> Adaptive<R, C> {
    /// The controller of `rule` on `clock`, from the rule's initial state.
    pub(crate) fn new(rule: R, clock: C) -> Self {
        let state = rule.initial();
        Adaptive {
            controller: Mutex::new(Controller {
                window: rule.window(&state),
                state,
                collector: Collector::default(),
            }),
            rule,
            clock,
        }
    }

    /// The rule.
    pub fn rule(&self) -> &R {
        &self.rule
    }

    /// The clock outcomes are timed on.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// A copy of the rule's current state.
    pub fn state(&self) -> R::State {
        lock(&self.controller).state.clone()
    }
}

impl<R, C> sealed::Feedback for Adaptive<R, C>
where
    R: AdaptiveRule,
    C: Clock + fmt::Debug + 'static,
{
    const TIMED: bool = true;

    #[inline]
    fn now(&self) -> Nanos {
        self.clock.now()
    }

    fn initial_limit(&self) -> Option<u32> {
        Some(self.rule.limit(&lock(&self.controller).state))
    }

    fn record(&self, observation: Observation, resize: &mut dyn FnMut(u32)) {
        let mut guard = lock(&self.controller);
        let c = &mut *guard;
        let Some(closed) = c.collector.add(&c.window, observation) else {
            return;
        };
        if closed.ready {
            let limit = self.rule.update(&mut c.state, &closed.sample);
            c.window = self.rule.window(&c.state);
            // Under the lock: two windows closing on two threads resize in their order.
            resize(limit);
        }
        c.collector
            .reopen(&c.window, closed.sample.at, closed.sample.min_rtt);
    }
}
