//! [`SeqLock`]: `N` words published together under a version, read without waiting for the
//! writer (crossbeam-utils' `SeqLock`, with the version chosen by the writer: a budget's
//! generation).
//!
//! # Protocol
//!
//! The writer (alone: the budget's writers are serialised by its lock) stores `EMPTY` as the
//! version, a release fence, the words, then the new version with release: the last step
//! is the drop of its [`WriteGuard`]. A reader loads the version with acquire, the words
//! (relaxed), an acquire fence, and the version again (relaxed), and takes the words only
//! if both loads gave the version it wants (Boehm, "Can seqlocks get along with programming
//! language memory models?", 2012). If a word it read came from a later writer, that
//! writer's `EMPTY` store (ordered before its word stores by its release fence) is seen by
//! the second load, which then fails; a reader never waits.

use crate::sync::{fence, AtomicU64, Ordering};

/// The version of a lock being written (never a version a reader asks for).
pub(crate) const EMPTY: u64 = u64::MAX;

/// `N` words and the version they were published under (see the module). `repr(C)`: the
/// version first, then the words in order, so that a lock aligned to a cache line keeps its
/// version and first seven words on that line.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct SeqLock<const N: usize> {
    version: AtomicU64,
    words: [AtomicU64; N],
}

impl<const N: usize> SeqLock<N> {
    /// A lock that holds no version yet (`EMPTY`): every read fails until the first write.
    pub(crate) fn new() -> Self {
        SeqLock {
            version: AtomicU64::new(EMPTY),
            words: core::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Begin a read of `version`: whether the lock holds it. The words read next (with
    /// [`SeqLock::word`]) are its words only if [`SeqLock::validate_read`] says so.
    #[inline(always)]
    pub(crate) fn optimistic_read(&self, version: u64) -> bool {
        // Acquire: partner of the write guard's release store of the version (its drop):
        // the words stored before it are visible to the loads that follow.
        self.version.load(Ordering::Acquire) == version
    }

    /// Word `i` of a read under way (or alone, a value that may belong to any version).
    #[inline(always)]
    pub(crate) fn word(&self, i: usize) -> u64 {
        // Relaxed: validated by `validate_read` (after its fence), or read as a lone word
        // whose version does not matter (the budget's capacity check).
        self.words[i].load(Ordering::Relaxed)
    }

    /// End a read begun with [`SeqLock::optimistic_read`]: whether no writer changed the
    /// words since, so that those read are all of `version`.
    #[inline(always)]
    pub(crate) fn validate_read(&self, version: u64) -> bool {
        // Acquire fence: orders the word loads before the second load of the version; its
        // partner is the writer's release fence after its `EMPTY` store (see the module).
        fence(Ordering::Acquire);
        // Relaxed: ordered after the word loads by the fence above.
        self.version.load(Ordering::Relaxed) == version
    }

    /// Begin writing `version` (the writer, alone): readers of the old version fail from
    /// now on; the guard's drop publishes the words stored through it under `version`.
    #[inline]
    pub(crate) fn write(&self, version: u64) -> WriteGuard<'_, N> {
        // Relaxed, then the release fence: no reader that sees a word stored through the
        // guard can see the old version afterwards (the fence orders this store before
        // them; the reader's acquire fence is its partner).
        self.version.store(EMPTY, Ordering::Relaxed);
        fence(Ordering::Release);
        WriteGuard {
            lock: self,
            version,
        }
    }
}

/// A write under way (see [`SeqLock::write`]): its drop publishes the version.
#[must_use = "the write is published when the guard is dropped"]
pub(crate) struct WriteGuard<'a, const N: usize> {
    lock: &'a SeqLock<N>,
    version: u64,
}

impl<const N: usize> WriteGuard<'_, N> {
    /// Store `words` from word 0 on (as many as both hold).
    #[inline]
    pub(crate) fn store(&self, words: &[u64]) {
        for (slot, &word) in self.lock.words.iter().zip(words) {
            // Relaxed: published by the guard's release store of the version.
            slot.store(word, Ordering::Relaxed);
        }
    }
}

impl<const N: usize> Drop for WriteGuard<'_, N> {
    fn drop(&mut self) {
        // Release: partner of the readers' acquire load in `optimistic_read`.
        self.lock.version.store(self.version, Ordering::Release);
    }
}
