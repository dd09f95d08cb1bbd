//! The state of eventfds and signalfds, which nomu serves itself.
//!
//! An eventfd is a counter and a wait queue (Linux's eventfd_ctx): shared
//! by every descriptor and process that holds the description, read and
//! written without a host call, and waited on through kernel::waiter like
//! every other wait.
//!
//! A signalfd is only a mask: what it reads are the reader's pending
//! signals, its own and then its process's shared ones (as Linux's
//! dequeue_signal), and what it waits on is its process's `signal_queued`
//! wait queue, notified whenever a signal becomes pending for one of its
//! threads or for the process (Linux's sighand->signalfd_wqh).

use crate::kernel::poll::PollHead;
use crate::kernel::signal::SigInfo;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const EPOLLIN: u32 = 0x001;
const EPOLLOUT: u32 = 0x004;
const EPOLLERR: u32 = 0x008;

pub struct EventFd {
    count: Mutex<u64>,
    semaphore: bool,
    pub head: Arc<PollHead>,
}

impl EventFd {
    pub fn new(initval: u32, semaphore: bool) -> EventFd {
        EventFd { count: Mutex::new(initval as u64), semaphore, head: PollHead::new() }
    }

    /// A read: the counter (or 1, for a semaphore) taken, or None when it
    /// is zero. The caller notifies the head once it took something.
    pub fn try_read(&self) -> Option<u64> {
        let mut count = self.count.lock().unwrap();
        if *count == 0 {
            return None;
        }
        let v = if self.semaphore { 1 } else { *count };
        *count -= v;
        Some(v)
    }

    /// A write of `v` (never u64::MAX): false when the counter would reach
    /// u64::MAX. The caller notifies the head once it added.
    pub fn try_write(&self, v: u64) -> bool {
        let mut count = self.count.lock().unwrap();
        if u64::MAX - *count > v {
            *count += v;
            true
        } else {
            false
        }
    }

    /// eventfd_poll's answer.
    pub fn poll(&self) -> u32 {
        let count = *self.count.lock().unwrap();
        let mut events = 0;
        if count > 0 {
            events |= EPOLLIN;
        }
        if count == u64::MAX {
            events |= EPOLLERR;
        }
        if u64::MAX - 1 > count {
            events |= EPOLLOUT;
        }
        events
    }
}

pub struct SignalFd {
    /// The signals it reads (never SIGKILL or SIGSTOP).
    pub mask: AtomicU64,
}

impl SignalFd {
    pub fn new(mask: u64) -> SignalFd {
        SignalFd { mask: AtomicU64::new(mask) }
    }

    pub fn mask(&self) -> u64 {
        self.mask.load(Ordering::SeqCst)
    }
}

/// Linux's siginfo_layout: which union member of a siginfo is filled.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Layout {
    Kill,
    Timer,
    Poll,
    Fault,
    Chld,
    Rt,
    Sys,
}

fn layout(sig: i32, code: i32) -> Layout {
    const SI_USER: i32 = 0;
    const SI_KERNEL: i32 = 0x80;
    const SI_TIMER: i32 = -2;
    const SI_SIGIO: i32 = -5;
    if code > SI_USER && code < SI_KERNEL {
        // (signal, highest code it defines, layout): sig_sicodes.
        let known = match sig {
            libc::SIGILL => Some((11, Layout::Fault)),
            libc::SIGFPE => Some((15, Layout::Fault)),
            libc::SIGSEGV => Some((10, Layout::Fault)),
            libc::SIGBUS => Some((5, Layout::Fault)),
            libc::SIGTRAP => Some((6, Layout::Fault)),
            libc::SIGCHLD => Some((6, Layout::Chld)),
            libc::SIGPOLL => Some((6, Layout::Poll)),
            libc::SIGSYS => Some((2, Layout::Sys)),
            _ => None,
        };
        match known {
            Some((limit, l)) if code <= limit => l,
            // NSIGPOLL
            _ if code <= 6 => Layout::Poll,
            _ => Layout::Kill,
        }
    } else if code == SI_TIMER {
        Layout::Timer
    } else if code == SI_SIGIO {
        Layout::Poll
    } else if code < 0 {
        Layout::Rt
    } else {
        Layout::Kill
    }
}

/// A `struct signalfd_siginfo` (128 bytes) for `info`, as Linux's
/// signalfd_copyinfo fills it.
pub fn signalfd_siginfo(info: &SigInfo) -> [u8; 128] {
    let i32_at = |off: usize| i32::from_le_bytes(info.0[off..off + 4].try_into().unwrap());
    let u64_at = |off: usize| u64::from_le_bytes(info.0[off..off + 8].try_into().unwrap());
    let mut out = [0u8; 128];
    let put32 = |out: &mut [u8; 128], off: usize, v: i32| out[off..off + 4].copy_from_slice(&v.to_le_bytes());
    let put64 = |out: &mut [u8; 128], off: usize, v: u64| out[off..off + 8].copy_from_slice(&v.to_le_bytes());
    // ssi_signo, ssi_errno, ssi_code: si_signo, si_errno, si_code.
    put32(&mut out, 0, i32_at(0));
    put32(&mut out, 4, i32_at(4));
    put32(&mut out, 8, i32_at(8));
    // The union of a siginfo starts at 16; the fields of a
    // signalfd_siginfo: pid 12, uid 16, fd 20, tid 24, band 28,
    // overrun 32, trapno 36, status 40, int 44, ptr 48, utime 56,
    // stime 64, addr 72, addr_lsb 80, syscall 84, call_addr 88, arch 96.
    match layout(info.signo(), info.code()) {
        Layout::Kill => {
            put32(&mut out, 12, i32_at(16));
            put32(&mut out, 16, i32_at(20));
        }
        Layout::Timer => {
            put32(&mut out, 24, i32_at(16));
            put32(&mut out, 32, i32_at(20));
            put64(&mut out, 48, u64_at(24));
            put32(&mut out, 44, i32_at(24));
        }
        Layout::Poll => {
            put32(&mut out, 28, u64_at(16) as i32);
            put32(&mut out, 20, i32_at(24));
        }
        Layout::Fault => put64(&mut out, 72, u64_at(16)),
        Layout::Chld => {
            put32(&mut out, 12, i32_at(16));
            put32(&mut out, 16, i32_at(20));
            put32(&mut out, 40, i32_at(24));
            put64(&mut out, 56, u64_at(32));
            put64(&mut out, 64, u64_at(40));
        }
        Layout::Rt => {
            put32(&mut out, 12, i32_at(16));
            put32(&mut out, 16, i32_at(20));
            put64(&mut out, 48, u64_at(24));
            put32(&mut out, 44, i32_at(24));
        }
        Layout::Sys => {
            put64(&mut out, 88, u64_at(16));
            put32(&mut out, 84, i32_at(24));
            put32(&mut out, 96, i32_at(28));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_reads_whole_or_one_at_a_time() {
        let e = EventFd::new(3, false);
        assert_eq!(e.poll(), EPOLLIN | EPOLLOUT);
        assert_eq!(e.try_read(), Some(3));
        assert_eq!(e.try_read(), None);
        assert_eq!(e.poll(), EPOLLOUT);
        let s = EventFd::new(2, true);
        assert_eq!((s.try_read(), s.try_read(), s.try_read()), (Some(1), Some(1), None));
        assert!(s.try_write(u64::MAX - 1));
        assert_eq!(s.poll(), EPOLLIN);
        assert!(!s.try_write(1));
        assert!(s.try_write(0));
    }

    #[test]
    fn siginfo_layouts_as_linux_picks_them() {
        assert_eq!(layout(libc::SIGUSR1, 0), Layout::Kill);
        assert_eq!(layout(libc::SIGUSR1, -1), Layout::Rt);
        assert_eq!(layout(libc::SIGUSR1, -6), Layout::Rt);
        assert_eq!(layout(libc::SIGALRM, 0x80), Layout::Kill);
        assert_eq!(layout(libc::SIGALRM, -2), Layout::Timer);
        assert_eq!(layout(libc::SIGCHLD, 1), Layout::Chld);
        assert_eq!(layout(libc::SIGSEGV, 1), Layout::Fault);
        assert_eq!(layout(libc::SIGUSR1, 3), Layout::Poll);
        assert_eq!(layout(libc::SIGUSR1, 7), Layout::Kill);
        let chld = SigInfo::child(1, 42, 7, 3);
        let s = signalfd_siginfo(&chld);
        assert_eq!(&s[0..4], &libc::SIGCHLD.to_le_bytes());
        assert_eq!(&s[12..16], &42i32.to_le_bytes());
        assert_eq!(&s[16..20], &7i32.to_le_bytes());
        assert_eq!(&s[40..44], &3i32.to_le_bytes());
    }
}
