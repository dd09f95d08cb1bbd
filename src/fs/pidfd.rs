//! pidfds (pidfd_open, PIDFD_THREAD): a descriptor that names one process,
//! or one thread, for as long as the descriptor lives, whatever pid number
//! is reused meanwhile (Linux's struct pid behind a pidfs file).
//!
//! It holds the process (or thread) itself, so "is it still there" is
//! asked of that very process, never of a pid number: alive, exited (a
//! zombie, or a thread that left its group) or reaped. A poll of it is
//! readable once it has exited, and also hung up once it is reaped (Linux
//! 6.9's pidfd_poll); the wait queue is its process's `pidfd_wait`,
//! notified when a thread leaves, when the process exits and when it is
//! reaped.

use crate::kernel::process::{Process, Thread};
use crate::kernel::Kernel;
use std::sync::atomic::Ordering;
use std::sync::Arc;

const EPOLLIN: u32 = 0x001;
const EPOLLHUP: u32 = 0x010;
const EPOLLRDNORM: u32 = 0x040;

/// What a pidfd names.
pub enum PidFd {
    /// A thread group, by its process (pidfd_open without PIDFD_THREAD).
    Process(Arc<Process>),
    /// One thread (PIDFD_THREAD).
    Thread(Arc<Thread>),
}

/// Where what a pidfd names is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Presence {
    Alive,
    /// Ended, not yet reaped: signals to it do nothing, waits report it.
    Exited,
    /// Gone from the process table.
    Reaped,
}

impl PidFd {
    pub fn process(&self) -> &Arc<Process> {
        match self {
            PidFd::Process(p) => p,
            PidFd::Thread(t) => &t.process,
        }
    }

    /// The pid (or tid) it was opened for.
    pub fn id(&self) -> u32 {
        match self {
            PidFd::Process(p) => p.pid,
            PidFd::Thread(t) => t.tid(),
        }
    }

    pub fn presence(&self, kernel: &Kernel) -> Presence {
        let process = kernel.tasks.presence(self.process());
        match self {
            PidFd::Thread(t) if process == Presence::Alive && t.left.load(Ordering::Acquire) => Presence::Exited,
            _ => process,
        }
    }

    /// pidfd_poll's answer.
    pub fn poll(&self, kernel: &Kernel) -> u32 {
        match self.presence(kernel) {
            Presence::Alive => 0,
            Presence::Exited => EPOLLIN | EPOLLRDNORM,
            Presence::Reaped => EPOLLIN | EPOLLRDNORM | EPOLLHUP,
        }
    }
}
