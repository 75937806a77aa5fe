//! [`Event`]: "something changed, look again", with no lost wake-up.
//!
//! # Word
//!
//! One `AtomicU64`: bit 0 is set while the list may hold wakers (set and cleared only with
//! the list locked); bits 1..64 count notifications (the version; it would wrap after 2^63
//! notifications, which no program reaches).
//!
//! # No lost wake-up
//!
//! A listener remembers the version when it is made ([`Event::listen`]), then its owner
//! checks its condition. To sleep it registers its waker: with the list locked it inserts
//! the waker, with the version it listened at, and sets the bit with one read-modify-write
//! of the word, which also reads the version. A notification increments the version with
//! one read-modify-write and, only if the bit was set, takes from the list the wakers that
//! listened before it (a listener that listened after the increment, while the
//! notification waited for the lock, waits for the next one). Both are read-modify-writes of one word, so one comes
//! first in its modification order:
//!
//! - the registration first: the notification reads the bit set (or a later value; the bit
//!   is cleared only by a notification that took the list, and with it the waker) and takes
//!   the list, after the registration's unlock, so the waker is in it and is woken;
//! - the notification first: the registration reads the new version and does not sleep.
//!
//! The orderings: the notification is a release, the registration's read-modify-write and
//! the listener's first load are acquires; a listener that reads a version at or after a
//! notification therefore sees everything the notifier wrote before notifying (the change
//! it announces). Modelled in `notify/loom.rs`.

use crate::notify::driver::{self, Nap, Wait};
use crate::notify::wake::WakeList;
use crate::sync::{lock, AtomicU64, Mutex, Ordering};
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use slab::Slab;

/// The word's bit for "the list may hold wakers".
const WAITING: u64 = 1;

/// What one notification adds to the word.
const STEP: u64 = 2;

/// An event: listeners made before a [`notify`](Event::notify) complete, those made after
/// it wait for the next one.
///
/// The pattern is listen, check, sleep: make a [`Listener`], check the condition it waits
/// for, and await (or [`wait`](Listener::wait) on) the listener only if the condition
/// still fails. A change made before a notification is seen by a check made after the
/// listener completes, so no wake-up is lost between the check and the sleep.
///
/// A notification with nobody listening is one read-modify-write; with listeners it takes
/// a lock, wakes each once, and allocates nothing. Each listener that sleeps keeps one
/// waker in the event until it completes or is dropped.
///
/// # Examples
///
/// ```
/// use limitcore::notify::Event;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
///
/// let ready = Arc::new((AtomicBool::new(false), Event::new()));
/// let waiter = {
///     let ready = ready.clone();
///     std::thread::spawn(move || loop {
///         let listener = ready.1.listen();
///         if ready.0.load(Ordering::Acquire) {
///             return;
///         }
///         listener.wait();
///     })
/// };
/// ready.0.store(true, Ordering::Release);
/// ready.1.notify();
/// waiter.join().unwrap();
/// ```
pub struct Event {
    word: AtomicU64,
    /// The sleeping listeners' wakers, each with the version it listened at.
    list: Mutex<Slab<(u64, Waker)>>,
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("version", &self.version())
            .finish_non_exhaustive()
    }
}

impl Default for Event {
    fn default() -> Self {
        Self::new()
    }
}

impl Event {
    /// An event nobody listens to yet.
    pub fn new() -> Self {
        Event {
            word: AtomicU64::new(0),
            list: Mutex::new(Slab::new()),
        }
    }

    /// Notifications so far.
    #[inline]
    pub(crate) fn version(&self) -> u64 {
        // Acquire: partner of the release increment in `notify`; whoever sees a version sees
        // what was written before it was announced.
        self.word.load(Ordering::Acquire) >> 1
    }

    /// A listener for the next notification after this call.
    #[inline]
    pub fn listen(&self) -> Listener<'_> {
        Listener {
            event: self,
            seen: self.version(),
            key: None,
        }
    }

    /// Wake every listener made before this call; later ones wait for the next.
    pub fn notify(&self) {
        // AcqRel: the release publishes what the caller changed before notifying (partner of
        // the listeners' acquires); the read-modify-write is ordered against the
        // registrations' own (see the module).
        let before = self.word.fetch_add(STEP, Ordering::AcqRel);
        if before & WAITING == 0 {
            return;
        }
        let version = (before >> 1) + 1;
        let mut wakes = WakeList::new();
        {
            let mut list = lock(&self.list);
            // Only the listeners that listened before this notification: one that listened
            // after it (at `version` or later, while this call waited for the lock) waits
            // for the next, and keeps its entry.
            list.retain(|_, (seen, waker)| {
                if *seen < version {
                    wakes.push(waker.clone());
                    false
                } else {
                    true
                }
            });
            if list.is_empty() {
                // Relaxed: with the list locked, as every change of the bit.
                self.word.fetch_and(!WAITING, Ordering::Relaxed);
            }
        }
        // Outside the lock: a waker may run code that listens again.
        wakes.wake_all();
    }

    /// Register `waker` for the next notification after version `seen` unless one came
    /// already: `true` if it was registered (sleep), `false` if the version moved (look
    /// again). The waker stays until that notification; one that
    /// [`will_wake`](Waker::will_wake) the same task as a registered one is not added twice.
    /// For a clock's [`sleep_hint`](crate::clock::Clock::sleep_hint), where the waiter keeps
    /// no listener.
    pub(crate) fn register(&self, seen: u64, waker: &Waker) -> bool {
        let mut list = lock(&self.list);
        if !list
            .iter()
            .any(|(_, (at, w))| *at == seen && w.will_wake(waker))
        {
            list.insert((seen, waker.clone()));
        }
        self.arm(seen)
    }

    /// With the list locked and a waker in it: set the bit and read the version in one
    /// read-modify-write (see the module); whether it is still `seen`.
    fn arm(&self, seen: u64) -> bool {
        // AcqRel: acquire, so that a notification read here is seen with what preceded it;
        // the read-modify-write orders this registration against every notification.
        let word = self.word.fetch_or(WAITING, Ordering::AcqRel);
        word >> 1 == seen
    }

    /// One poll of the listener whose version is `seen` and whose waker is kept under `key`.
    fn poll_listener(&self, seen: u64, key: &mut Option<usize>, waker: &Waker) -> Poll<()> {
        if self.version() != seen {
            // Notified: a notification took (or is taking) the entry.
            *key = None;
            return Poll::Ready(());
        }
        let mut list = lock(&self.list);
        // Again with the list locked: a notification that took the entry moved the version
        // past `seen` before, and released the lock after, so it is seen here. If the
        // version is still `seen`, the entry under `key` is ours (and stays so while we hold
        // the lock).
        if self.version() != seen {
            *key = None;
            return Poll::Ready(());
        }
        let k = match *key {
            Some(k) => {
                if let Some((_, kept)) = list.get_mut(k) {
                    if !kept.will_wake(waker) {
                        *kept = waker.clone();
                    }
                }
                k
            }
            None => list.insert((seen, waker.clone())),
        };
        if self.arm(seen) {
            *key = Some(k);
            return Poll::Pending;
        }
        // A notification came since the check above: it has not taken the list yet (we hold
        // it), so the entry is still ours to remove.
        list.remove(k);
        *key = None;
        Poll::Ready(())
    }

    /// A listener that stops listening: its waker leaves the list, unless a notification
    /// took it already.
    fn forget(&self, seen: u64, key: usize) {
        let mut list = lock(&self.list);
        // Acquire (in `version`), with the list locked: a notification that moved the
        // version takes the list after it; if the version is unchanged, the entry is ours.
        if self.version() == seen {
            list.try_remove(key);
        }
    }
}

/// A listener of an [`Event`]: completes at the first [`notify`](Event::notify) after the
/// [`listen`](Event::listen) that made it. A future (`Output = ()`), or a blocking wait
/// ([`Listener::wait`]); dropping it before it completes takes its waker out of the event.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use limitcore::notify::Event;
///
/// let event = Event::new();
/// let listener = event.listen();
/// event.notify();                 // made before: it completes
/// listener.await;
/// # }
/// ```
#[must_use = "a listener does nothing unless awaited or waited on"]
pub struct Listener<'a> {
    event: &'a Event,
    seen: u64,
    key: Option<usize>,
}

impl fmt::Debug for Listener<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listener")
            .field("seen", &self.seen)
            .field("registered", &self.key.is_some())
            .finish()
    }
}

impl Listener<'_> {
    /// Whether the event was notified since this listener was made (it would complete).
    pub fn is_notified(&self) -> bool {
        self.event.version() != self.seen
    }

    /// Block the thread until the event is notified (at once if it was since `listen`).
    pub fn wait(self) {
        driver::block_on(self);
    }
}

impl Future for Listener<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.event
            .poll_listener(this.seen, &mut this.key, cx.waker())
    }
}

impl Wait for Listener<'_> {
    type Output = ();

    fn poll_wait(&mut self, cx: &mut Context<'_>, _nap: &mut Nap) -> Poll<()> {
        self.event
            .poll_listener(self.seen, &mut self.key, cx.waker())
    }
}

impl Drop for Listener<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.event.forget(self.seen, key);
        }
    }
}
