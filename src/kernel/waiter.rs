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

use super::trap::ThreadCtx;
use crate::abi::errno::Errno;
use crate::host::sys as hostsys;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

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
struct Waiting<'a>(&'a AtomicU32);

impl<'a> Waiting<'a> {
    fn new(waiters: &'a AtomicU32) -> Waiting<'a> {
        waiters.fetch_add(1, Ordering::SeqCst);
        Waiting(waiters)
    }
}

impl Drop for Waiting<'_> {
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
        // A word no one changes: without an event only a kick or the
        // deadline ends the host wait.
        let quiet = AtomicU32::new(0);
        let word = event.map_or(&quiet, |e| &e.count);
        let _counted = event.map(|e| Waiting::new(&e.waiters));
        self.in_host_wait(|| loop {
            // Kicks from before this look are accounted for by it.
            crate::host::blocking::forget_kicks();
            let seen = word.load(Ordering::SeqCst);
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
            match hostsys::wait_word(word, seen, timeout) {
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
        self.in_host_wait(|| loop {
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

    /// Runs `wait` with the thread marked as waiting in a host call, so
    /// Kernel::interrupt kicks the host thread that runs its kernel side.
    fn in_host_wait<T>(&self, wait: impl FnOnce() -> T) -> T {
        // SeqCst, against Kernel::interrupt's look: either the waiter sees
        // what was queued, or the interrupter sees it waiting.
        self.thread.blocked_in_host.store(true, Ordering::SeqCst);
        let r = wait();
        self.thread.blocked_in_host.store(false, Ordering::Relaxed);
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
        let counted = Waiting::new(&event.waiters);
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
