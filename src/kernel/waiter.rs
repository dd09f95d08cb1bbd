//! One way to wait. Every blocking call of a guest thread (wait4, pause,
//! sigsuspend, sigtimedwait, sleeps, poll, a stopped process, a vfork
//! parent, execve's de_thread) waits here: on an `Event` someone notifies
//! when its condition may have changed, or in a host call (poll, a futex,
//! a sleep), always through host::blocking, so a kick (a signal for the
//! thread, exit_group, another thread's execve) ends the wait at once. No
//! wait sleeps in slices and looks again: a wake-up is a notify or a kick.
//!
//! The event is an eventcount: a waiter reads the count, checks its
//! condition, and sleeps only while the count is unchanged, so a notify
//! between the check and the sleep is never lost.
//!
//! A thread in wait_for also sleeps on a word of its own (one host futex
//! wait on both words), and a signal for it (Kernel::interrupt) moves and
//! wakes that word: no host signal, and on the split and sysemu paths no
//! kick of the guest's host process either, which is parked in its syscall
//! anyway. Only a wait inside a host call (block_in_host) needs a kick.

use super::process::Thread;
use super::trap::ThreadCtx;
use crate::abi::errno::Errno;
use crate::host::sys as hostsys;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::Instant;

/// Where a thread waits (Thread::waiting), which says how to end the wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Waiting {
    /// Not in a wait: it runs guest code or nomu's, and a kick reaches it.
    No,
    /// In wait_for: its own wake word ends the wait.
    OnWords,
    /// In a host call made through host::blocking: a kick ends it.
    InHostCall,
}

impl Waiting {
    pub fn of(thread: &Thread) -> Waiting {
        match thread.waiting.load(Ordering::SeqCst) {
            1 => Waiting::OnWords,
            2 => Waiting::InHostCall,
            _ => Waiting::No,
        }
    }
}

/// Something waiters wait for: a child changed state, a vfork child let
/// its parent go, a stopped process continued, a thread left.
#[derive(Default, Debug)]
pub struct Event {
    count: AtomicU32,
    /// Threads in wait_for on this event: a notify with none (most exits,
    /// every vfork release nobody waits for) makes no host call.
    waiters: AtomicU32,
}

impl Event {
    pub const fn new() -> Event {
        Event { count: AtomicU32::new(0), waiters: AtomicU32::new(0) }
    }

    /// Wakes every waiter: each looks at its condition again.
    pub fn notify(&self) {
        // SeqCst on both sides (here: count, then waiters; a waiter:
        // waiters, then count): either the waiter sees the new count, or
        // this sees the waiter and wakes it.
        self.count.fetch_add(1, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) != 0 {
            hostsys::wake_word(&self.count);
        }
    }
}

/// One thread counted in an event's waiters while it waits.
struct Counted<'a>(&'a AtomicU32);

impl<'a> Counted<'a> {
    fn new(waiters: &'a AtomicU32) -> Counted<'a> {
        waiters.fetch_add(1, Ordering::SeqCst);
        Counted(waiters)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What ends a wait besides its condition and its deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// A signal the thread must handle, or its death, ends it: ERESTARTSYS,
    /// which the caller maps to what its syscall returns.
    OnSignal,
    /// Only the condition ends it (the caller puts the thread's death in
    /// the condition: a stopped thread, a vfork parent).
    OnCondition,
}

impl ThreadCtx {
    /// Waits until `ready` reports something (Ok(Some)), `deadline` passes
    /// (Ok(None)), or, with Wake::OnSignal, a signal is pending
    /// (ERESTARTSYS). `ready` runs first, then again after every notify of
    /// `event` and every kick.
    pub fn wait_for<T>(
        &self,
        event: Option<&Event>,
        deadline: Option<Instant>,
        wake: Wake,
        mut ready: impl FnMut() -> Result<Option<T>, Errno>,
    ) -> Result<Option<T>, Errno> {
        let own = &self.thread.wake_word;
        let _counted = event.map(|e| Counted::new(&e.waiters));
        self.waiting_in(Waiting::OnWords, || loop {
            // Kicks from before this look are accounted for by it.
            crate::host::blocking::forget_kicks();
            let seen = event.map(|e| e.count.load(Ordering::SeqCst));
            let seen_own = own.load(Ordering::SeqCst);
            if let Some(v) = ready()? {
                return Ok(Some(v));
            }
            if wake == Wake::OnSignal && self.signal_pending() {
                return Err(Errno::ERESTARTSYS);
            }
            let timeout = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Ok(None),
                },
                None => None,
            };
            let slept = match (event, seen) {
                (Some(e), Some(seen)) => hostsys::wait_words(&[(&e.count, seen), (own, seen_own)], deadline),
                _ => hostsys::wait_word(own, seen_own, timeout),
            };
            match slept {
                Ok(()) | Err(Errno::EAGAIN) | Err(Errno::EINTR) | Err(Errno::ETIMEDOUT) => continue,
                Err(e) => return Err(e),
            }
        })
    }

    /// Runs `call`, a host call that may block for as long as it needs
    /// (made through host::blocking), until it completes, or until a signal
    /// this thread must stop for is pending (ERESTARTSYS), or it must leave.
    /// A kick ends the call with EINTR; one that announced nothing this
    /// thread acts on (a signal it blocks) just calls again.
    pub fn block_in_host<T>(&self, mut call: impl FnMut() -> Result<T, Errno>) -> Result<T, Errno> {
        self.waiting_in(Waiting::InHostCall, || loop {
            crate::host::blocking::forget_kicks();
            if self.signal_pending() {
                return Err(Errno::ERESTARTSYS);
            }
            match call() {
                Err(Errno::EINTR) => continue,
                r => return r,
            }
        })
    }

    /// Runs `call`, a host call through host::blocking that the caller
    /// knows can complete without waiting (its descriptor polled ready),
    /// even with a signal pending: Linux looks for signals only where a
    /// call waits. Should it wait after all, a later kick still ends it.
    pub fn run_in_host_now<T>(&self, call: impl FnOnce() -> Result<T, Errno>) -> Result<T, Errno> {
        self.waiting_in(Waiting::InHostCall, || {
            crate::host::blocking::forget_kicks();
            call()
        })
    }

    /// Runs `wait` with the thread marked as waiting `how`, so
    /// Kernel::interrupt knows how to end it.
    fn waiting_in<T>(&self, how: Waiting, wait: impl FnOnce() -> T) -> T {
        // SeqCst and a fence, against Kernel::interrupt's queueing and
        // look: either the waiter's look sees what was queued, or the
        // interrupter sees it waiting; and once it has left, the signal
        // check on its way back to guest code sees what was queued while
        // the interrupter still saw it waiting.
        self.thread.waiting.store(how as u8, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let r = wait();
        self.thread.waiting.store(Waiting::No as u8, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn notify_with_no_waiter_moves_the_count_only() {
        let event = Event::new();
        event.notify();
        assert_eq!(event.count.load(Ordering::SeqCst), 1);
        assert_eq!(event.waiters.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn notify_wakes_a_waiter_on_the_count_it_read() {
        let event = Arc::new(Event::new());
        let counted = Counted::new(&event.waiters);
        let seen = event.count.load(Ordering::SeqCst);
        let e = event.clone();
        let waker = std::thread::spawn(move || e.notify());
        // Ends on the notify (or finds it made already), long before the
        // 10 s timeout.
        let start = Instant::now();
        let r = hostsys::wait_word(&event.count, seen, Some(std::time::Duration::from_secs(10)));
        assert!(matches!(r, Ok(()) | Err(Errno::EAGAIN)), "{r:?}");
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
        waker.join().unwrap();
        drop(counted);
        // A count that moved on is never slept on.
        assert_eq!(hostsys::wait_word(&event.count, seen, None), Err(Errno::EAGAIN));
    }
}
