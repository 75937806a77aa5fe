//! Loom models of the waiting layer's two primitives, run by the blocking driver: no lost
//! wake-up under notify vs listen, resolve vs poll, cancel vs resolve and deadline vs
//! resolve.
//!
//! Run: `RUSTFLAGS="--cfg limitcore_loom" cargo test -p limitcore --lib --release notify::loom`.
//! A waiter that is never woken parks forever, which loom reports as a deadlock; so every
//! model that finishes proves its wake-ups arrive.

use super::driver::{block_on, Nap, Wait};
use super::list::WaitList;
use super::wake::WakeList;
use super::Event;
use crate::sync::{lock, AtomicBool, Mutex, Ordering};
use core::future::Future;
use core::task::{Context, Poll};
use loom::sync::Arc;
use loom::thread;

/// Every model: loom's default exploration, bounded to 3 preemptions (the protocols here
/// are a lock and one or two read-modify-writes a side).
fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

#[test]
fn notify_vs_listen_loses_no_wake_up() {
    model(|| {
        let shared = Arc::new((AtomicBool::new(false), Event::new()));
        let waiter = {
            let shared = shared.clone();
            thread::spawn(move || loop {
                let listener = shared.1.listen();
                // Acquire: partner of the setter's release store (the condition itself).
                if shared.0.load(Ordering::Acquire) {
                    return;
                }
                listener.wait();
            })
        };
        // Release: the condition, then the notification.
        shared.0.store(true, Ordering::Release);
        shared.1.notify();
        waiter.join().unwrap();
    });
}

#[test]
fn two_notifications_wake_two_listeners() {
    model(|| {
        let event = Arc::new(Event::new());
        let flags = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let waiters: Vec<_> = (0..2)
            .map(|i| {
                let (event, flags) = (event.clone(), flags.clone());
                thread::spawn(move || loop {
                    let listener = event.listen();
                    if flags[i].load(Ordering::Acquire) {
                        return;
                    }
                    listener.wait();
                })
            })
            .collect();
        for flag in flags.iter() {
            flag.store(true, Ordering::Release);
            event.notify();
        }
        for w in waiters {
            w.join().unwrap();
        }
    });
}

/// The sleep-hint registration (no listener kept) vs a notification.
#[test]
fn register_vs_notify_loses_no_wake_up() {
    struct ClockWait<'a>(&'a (AtomicBool, Event));
    impl Wait for ClockWait<'_> {
        type Output = ();
        fn poll_wait(&mut self, cx: &mut Context<'_>, _: &mut Nap) -> Poll<()> {
            loop {
                let seen = self.0 .1.version();
                if self.0 .0.load(Ordering::Acquire) {
                    return Poll::Ready(());
                }
                if self.0 .1.register(seen, cx.waker()) {
                    return Poll::Pending;
                }
            }
        }
    }
    model(|| {
        let shared = Arc::new((AtomicBool::new(false), Event::new()));
        let waiter = {
            let shared = shared.clone();
            thread::spawn(move || block_on(ClockWait(&shared)))
        };
        shared.0.store(true, Ordering::Release);
        shared.1.notify();
        waiter.join().unwrap();
    });
}

/// A waiter polling its entry through the driver, under the owner's lock.
struct Entry<'a> {
    list: &'a Mutex<WaitList<u32, u32>>,
    key: usize,
}

impl Wait for Entry<'_> {
    type Output = u32;
    fn poll_wait(&mut self, cx: &mut Context<'_>, _: &mut Nap) -> Poll<u32> {
        lock(self.list).poll(self.key, Some(cx.waker()))
    }
}

/// The resolver's step: resolve the head under the lock, wake after it.
fn resolve_head(list: &Mutex<WaitList<u32, u32>>, outcome: u32) -> bool {
    let mut wakes = WakeList::new();
    let resolved = {
        let mut list = lock(list);
        match list.head() {
            Some(key) => match list.resolve(key, outcome) {
                Some((_, waker)) => {
                    wakes.extend(waker);
                    true
                }
                None => false,
            },
            None => false,
        }
    };
    wakes.wake_all();
    resolved
}

#[test]
fn resolve_vs_poll_wakes_the_waiter() {
    model(|| {
        let list = Arc::new(Mutex::new(WaitList::new()));
        let key = lock(&list).push_back(7, None);
        let waiter = {
            let list = list.clone();
            thread::spawn(move || block_on(Entry { list: &list, key }))
        };
        assert!(resolve_head(&list, 42));
        assert_eq!(waiter.join().unwrap(), 42);
        assert!(lock(&list).is_empty());
    });
}

#[test]
fn cancel_vs_resolve_loses_no_outcome() {
    model(|| {
        let list = Arc::new(Mutex::new(WaitList::new()));
        let key = lock(&list).push_back(7, None);
        let resolver = {
            let list = list.clone();
            thread::spawn(move || resolve_head(&list, 42))
        };
        // The waiter gives up (its deadline): either it collects the outcome that came
        // first (and can give back what it granted), or the resolver finds nothing.
        let cancelled = lock(&list).cancel(key);
        let resolved = resolver.join().unwrap();
        match cancelled {
            Ok(outcome) => assert!(resolved && outcome == 42),
            Err(request) => assert!(!resolved && request == 7),
        }
    });
}

/// A waiter that sleeps on its entry, then gives up at its deadline (modelled as a second
/// thread's signal): the resolution and the give-up race.
#[test]
fn deadline_vs_resolve_ends_the_wait_exactly_once() {
    struct Deadline<'a> {
        list: &'a Mutex<WaitList<u32, u32>>,
        key: usize,
        expired: &'a (AtomicBool, Event),
        /// Kept between polls: dropping it would take its waker out of the event.
        listener: Option<super::Listener<'a>>,
    }
    impl Wait for Deadline<'_> {
        type Output = Result<u32, u32>;
        fn poll_wait(&mut self, cx: &mut Context<'_>, _: &mut Nap) -> Poll<Result<u32, u32>> {
            loop {
                let listener = self.listener.insert(self.expired.1.listen());
                let mut list = lock(self.list);
                if self.expired.0.load(Ordering::Acquire) {
                    return Poll::Ready(list.cancel(self.key));
                }
                if let Poll::Ready(outcome) = list.poll(self.key, Some(cx.waker())) {
                    return Poll::Ready(Ok(outcome));
                }
                drop(list);
                if core::pin::Pin::new(listener).poll(cx).is_pending() {
                    return Poll::Pending;
                }
            }
        }
    }
    model(|| {
        let list = Arc::new(Mutex::new(WaitList::new()));
        let expired = Arc::new((AtomicBool::new(false), Event::new()));
        let key = lock(&list).push_back(7, None);
        let waiter = {
            let (list, expired) = (list.clone(), expired.clone());
            thread::spawn(move || {
                block_on(Deadline {
                    list: &list,
                    key,
                    expired: &expired,
                    listener: None,
                })
            })
        };
        let timer = {
            let expired = expired.clone();
            thread::spawn(move || {
                expired.0.store(true, Ordering::Release);
                expired.1.notify();
            })
        };
        let resolved = resolve_head(&list, 42);
        timer.join().unwrap();
        match waiter.join().unwrap() {
            Ok(outcome) => assert!(resolved && outcome == 42),
            Err(request) => assert!(!resolved && request == 7),
        }
        assert!(lock(&list).is_empty());
    });
}
