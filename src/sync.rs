//! The kernel's locks and the one order they are taken in.
//!
//! A thread that holds one of these locks may take only a lock of a higher
//! level, never one of its own level or lower:
//!
//! | level | lock | why it comes there |
//! |---|---|---|
//! | 10 `TASKS` | the process table (`Tasks`) | exit notifies the parent (SIGCHLD) and asks its signal actions under it, as Linux under tasklist_lock |
//! | 20 `THREADS` | a process's thread list | a process-directed signal picks its thread from it |
//! | 30 `SIGNALS` | a process's signal actions | a fault resets its action, then the thread's mask |
//! | 40 `STATE` | a thread's state (mask, pending signals) | |
//! | 45 `SHARED_PENDING` | a process's shared pending signals | a thread takes its own pending signals, then the process's, under its state (Linux's dequeue_signal) |
//! | 50 `FILES` | a process's descriptor table | |
//! | 60 `MM` | an address space | guest copies hold it; mapping takes pages from physical memory under it |
//! | 65 `SHM` | System V shared memory segments | a VMA dropped under `MM` detaches its segment, which may free its pages |
//! | 70 `PHYS` | physical memory's allocator | the innermost |
//!
//! Every other lock in nomu is a leaf: nothing is taken while it is held,
//! but for the PI futex table (kernel/futex.rs), under which a lock's
//! word is read and written (`MM`) and its owner looked up (`TASKS`,
//! `THREADS`); for a process's POSIX timers (kernel/timer.rs), under
//! which the timer thread's queue is locked, and which a signal's
//! delivery takes under `STATE`; and for the wait queues of nomu's own files and epoll's (plain mutexes,
//! unchecked): an epoll's scan and items locks come before a file's own
//! state (an eventfd's counter, or `STATE` for a signalfd's poll); a wait
//! queue's watchers and an epoll's ready list come after it, as a signal
//! queued under `STATE` notifies them (kernel/poll.rs, fs/epoll.rs).
//! Debug builds (`make test` among them) check the order on every lock
//! taken and panic at the first lock taken out of order, naming both.

#[cfg(debug_assertions)]
use std::cell::RefCell;
use std::convert::Infallible;
use std::sync::{Condvar, Mutex, MutexGuard};

pub const TASKS: u8 = 10;
pub const THREADS: u8 = 20;
pub const SIGNALS: u8 = 30;
pub const STATE: u8 = 40;
pub const SHARED_PENDING: u8 = 45;
pub const FILES: u8 = 50;
pub const MM: u8 = 60;
pub const SHM: u8 = 65;
pub const CACHE: u8 = 67;
pub const PHYS: u8 = 70;

#[cfg(debug_assertions)]
thread_local! {
    /// The levels this thread holds, in the order it took them.
    static HELD: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A mutex at level `LEVEL` of the order above. `lock()` returns a Result
/// (that never fails: a panic aborts nomu, so no lock is ever poisoned) so
/// that call sites read as they do for std's Mutex.
#[derive(Default)]
pub struct OrderedMutex<T, const LEVEL: u8> {
    inner: Mutex<T>,
}

pub struct OrderedGuard<'a, T, const LEVEL: u8> {
    guard: Option<MutexGuard<'a, T>>,
}

impl<T, const LEVEL: u8> OrderedMutex<T, LEVEL> {
    pub const fn new(value: T) -> Self {
        OrderedMutex { inner: Mutex::new(value) }
    }

    pub fn lock(&self) -> Result<OrderedGuard<'_, T, LEVEL>, Infallible> {
        taking(LEVEL);
        let guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        Ok(OrderedGuard { guard: Some(guard) })
    }
}

impl<'a, T, const LEVEL: u8> OrderedGuard<'a, T, LEVEL> {
    /// Condvar::wait for an ordered lock: the lock is released while
    /// waiting, and taken again (at its level) before this returns.
    pub fn wait(mut self, cv: &Condvar) -> Self {
        let guard = self.guard.take().expect("a held guard");
        released(LEVEL);
        let guard = cv.wait(guard).unwrap_or_else(|e| e.into_inner());
        taking(LEVEL);
        OrderedGuard { guard: Some(guard) }
    }
}

impl<T, const LEVEL: u8> std::ops::Deref for OrderedGuard<'_, T, LEVEL> {
    type Target = T;
    fn deref(&self) -> &T {
        self.guard.as_ref().expect("a held guard")
    }
}

impl<T, const LEVEL: u8> std::ops::DerefMut for OrderedGuard<'_, T, LEVEL> {
    fn deref_mut(&mut self) -> &mut T {
        self.guard.as_mut().expect("a held guard")
    }
}

impl<T, const LEVEL: u8> Drop for OrderedGuard<'_, T, LEVEL> {
    fn drop(&mut self) {
        if self.guard.take().is_some() {
            released(LEVEL);
        }
    }
}

#[cfg(debug_assertions)]
fn taking(level: u8) {
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        if let Some(&top) = held.iter().max() {
            assert!(level > top, "lock order: taking a level-{level} lock while holding level {top} (see src/sync.rs)");
        }
        held.push(level);
    });
}

#[cfg(debug_assertions)]
fn released(level: u8) {
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        // Guards may go in any order: forget the latest of this level.
        if let Some(i) = held.iter().rposition(|&l| l == level) {
            held.remove(i);
        }
    });
}

#[cfg(not(debug_assertions))]
#[inline(always)]
fn taking(_level: u8) {}

#[cfg(not(debug_assertions))]
#[inline(always)]
fn released(_level: u8) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_in_order_pass_and_out_of_order_panic() {
        let outer: OrderedMutex<u32, TASKS> = OrderedMutex::new(1);
        let inner: OrderedMutex<u32, STATE> = OrderedMutex::new(2);
        {
            let a = outer.lock().unwrap();
            let b = inner.lock().unwrap();
            assert_eq!(*a + *b, 3);
            // Released out of order, then taken again: fine.
            drop(a);
            drop(b);
        }
        let _b = inner.lock().unwrap();
        let wrong = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(outer.lock())));
        assert!(wrong.is_err() == cfg!(debug_assertions), "taking TASKS under STATE must panic in debug builds");
    }
}
