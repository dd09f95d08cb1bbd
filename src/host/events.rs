//! Host event descriptors, wrapped safe: eventfds (nomu's doorbells, and
//! the host objects behind a guest's eventfd and signalfd, which give them
//! Linux's fstat, F_GETFL and /proc/self/fd answers), epoll instances
//! (behind a guest's epoll: its host descriptors' readiness), timerfds
//! (a guest's timerfd is one) and an empty signalfd.
//!
//! Every call goes through [`super::syscall`], as every host call on a
//! guest syscall's path should; the waits through [`super::blocking`], so a
//! kick ends them.

use super::syscall::{args, syscall, syscall_retry};
use crate::abi::errno::Errno;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

type R<T> = Result<T, Errno>;

fn owned(fd: usize) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful host call that creates a
    // new descriptor, which nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

fn raw(fd: BorrowedFd) -> u64 {
    fd.as_raw_fd() as u64
}

/// A host memfd_secret descriptor (close-on-exec on the host), never
/// mapped: the idle host object behind a guest's memfd_secret, which gives
/// it Linux's fstat, F_GETFL, /proc/self/fd, read/write/lseek answers and
/// size rules (nomu's pages hold the memory, see fs::secretmem). ENOSYS
/// where the host has no secretmem, as a Linux built without it.
pub fn memfd_secret() -> R<OwnedFd> {
    // SAFETY: one integer argument.
    let fd = unsafe { syscall(447, args([libc::O_CLOEXEC as u64])) }?;
    Ok(owned(fd))
}

/// A host eventfd (always close-on-exec on the host); `flags` may add
/// EFD_NONBLOCK and EFD_SEMAPHORE.
pub fn eventfd(initval: u32, flags: i32) -> R<OwnedFd> {
    // SAFETY: plain integer arguments.
    let fd = unsafe { syscall(libc::SYS_eventfd2, args([initval as u64, (flags | libc::EFD_CLOEXEC) as u64])) }?;
    Ok(owned(fd))
}

/// Adds `value` to a host eventfd's counter.
pub fn eventfd_add(fd: BorrowedFd, value: u64) -> R<()> {
    let v = value;
    // SAFETY: writes 8 bytes from a live u64.
    unsafe { syscall_retry(libc::SYS_write, args([raw(fd), &v as *const u64 as u64, 8])) }.map(drop)
}

/// Takes a host eventfd's counter (EAGAIN when it is zero and the
/// descriptor is non-blocking).
pub fn eventfd_take(fd: BorrowedFd) -> R<u64> {
    let mut v = 0u64;
    // SAFETY: reads 8 bytes into a live u64.
    unsafe { syscall_retry(libc::SYS_read, args([raw(fd), &mut v as *mut u64 as u64, 8])) }?;
    Ok(v)
}

/// A host epoll instance (close-on-exec on the host).
pub fn epoll_create() -> R<OwnedFd> {
    // SAFETY: a plain flag argument.
    let fd = unsafe { syscall(libc::SYS_epoll_create1, args([libc::EPOLL_CLOEXEC as u64])) }?;
    Ok(owned(fd))
}

/// epoll_ctl on the host: `event` is the interest (events, data); None for
/// EPOLL_CTL_DEL.
pub fn epoll_ctl(ep: BorrowedFd, op: i32, fd: BorrowedFd, event: Option<(u32, u64)>) -> R<()> {
    let ev = event.map(|(events, u64)| libc::epoll_event { events, u64 });
    let evp = ev.as_ref().map_or(0, |e| e as *const libc::epoll_event as u64);
    // SAFETY: ev is null or a live epoll_event the host only reads.
    unsafe { syscall(libc::SYS_epoll_ctl, args([raw(ep), op as u64, raw(fd), evp])) }.map(drop)
}

/// epoll_wait on the host, at most `timeout` (None: forever), into
/// `events`; through host::blocking, so a kick ends it (EINTR). A zero
/// timeout never waits.
pub fn epoll_wait(ep: BorrowedFd, events: &mut [libc::epoll_event], timeout: Option<std::time::Duration>) -> R<usize> {
    let ts = timeout
        .map(|d| libc::timespec { tv_sec: d.as_secs().min(i64::MAX as u64) as i64, tv_nsec: d.subsec_nanos() as i64 });
    let ts_ptr = ts.as_ref().map_or(0, |t| t as *const libc::timespec as u64);
    let call = [raw(ep), events.as_mut_ptr() as u64, events.len() as u64, ts_ptr, 0, 8];
    // SAFETY: events is a live array of events.len() epoll_events the host
    // fills; ts is null or valid; no signal mask is passed. epoll_pwait2
    // takes a timespec (Linux 5.11; nomu needs 5.16).
    unsafe { super::blocking::syscall(libc::SYS_epoll_pwait2, call) }
}

/// A host timerfd on `clock`; `flags` may add TFD_NONBLOCK (close-on-exec
/// on the host always). The host checks both as Linux does for the guest.
pub fn timerfd_create(clock: i32, flags: i32) -> R<OwnedFd> {
    // SAFETY: plain integer arguments.
    let fd = unsafe { syscall(libc::SYS_timerfd_create, args([clock as u32 as u64, flags as u32 as u64])) }?;
    Ok(owned(fd))
}

/// timerfd_settime on host descriptor `fd` (a raw number: -1 or one that
/// is not a timerfd get the host's own errors, in Linux's order).
pub fn timerfd_settime(fd: RawFd, flags: i32, new: &libc::itimerspec) -> R<libc::itimerspec> {
    let mut old = libc::itimerspec {
        it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: libc::timespec { tv_sec: 0, tv_nsec: 0 },
    };
    let call = args([
        fd as u32 as u64,
        flags as u32 as u64,
        new as *const libc::itimerspec as u64,
        &mut old as *mut libc::itimerspec as u64,
    ]);
    // SAFETY: new and old are live itimerspecs; the host reads one and
    // writes the other; a bad descriptor number only fails.
    unsafe { syscall(libc::SYS_timerfd_settime, call) }?;
    Ok(old)
}

/// timerfd_gettime on host descriptor `fd` (as for timerfd_settime).
pub fn timerfd_gettime(fd: RawFd) -> R<libc::itimerspec> {
    let mut cur = libc::itimerspec {
        it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: libc::timespec { tv_sec: 0, tv_nsec: 0 },
    };
    // SAFETY: cur is a live itimerspec the host writes.
    unsafe { syscall(libc::SYS_timerfd_gettime, args([fd as u32 as u64, &mut cur as *mut libc::itimerspec as u64])) }?;
    Ok(cur)
}

/// A host signalfd that reads no signal (an empty mask): what a guest's
/// signalfd is on the host, for fstat and the status flags.
pub fn empty_signalfd(flags: i32) -> R<OwnedFd> {
    let mask = 0u64;
    let call = args([u64::MAX, &mask as *const u64 as u64, 8, (flags | libc::SFD_CLOEXEC) as u64]);
    // SAFETY: the mask is a live 8-byte sigset the host reads.
    let fd = unsafe { syscall(libc::SYS_signalfd4, call) }?;
    Ok(owned(fd))
}

/// epoll_wait on the host that never waits (and no kick ends early).
pub fn epoll_wait_now(ep: BorrowedFd, events: &mut [libc::epoll_event]) -> R<usize> {
    let ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    let call = [raw(ep), events.as_mut_ptr() as u64, events.len() as u64, &ts as *const libc::timespec as u64, 0, 8];
    // SAFETY: as for epoll_wait; a zero timeout.
    unsafe { syscall_retry(libc::SYS_epoll_pwait2, call) }
}

/// The readiness of one host descriptor now (poll with a zero timeout;
/// no kick ends it early).
pub fn poll_now(fd: BorrowedFd, events: i16) -> R<i16> {
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events, revents: 0 };
    let ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    let call = args([&mut p as *mut libc::pollfd as u64, 1, &ts as *const libc::timespec as u64, 0, 8]);
    // SAFETY: one live pollfd; a zero timeout; no signal mask.
    unsafe { syscall_retry(libc::SYS_ppoll, call) }?;
    Ok(p.revents)
}

/// inotify_init1 (close-on-exec on the host whatever `flags` say).
pub fn inotify_init1(flags: i32) -> R<OwnedFd> {
    // SAFETY: a plain integer argument.
    let fd = unsafe { syscall(libc::SYS_inotify_init1, args([(flags | libc::IN_CLOEXEC) as u64])) }?;
    Ok(owned(fd))
}

/// inotify_add_watch on host descriptor `fd` for host path `path`.
pub fn inotify_add_watch(fd: BorrowedFd, path: &std::ffi::CStr, mask: u32) -> R<usize> {
    // SAFETY: a NUL-terminated path.
    unsafe {
        syscall_retry(libc::SYS_inotify_add_watch, args([fd.as_raw_fd() as u64, path.as_ptr() as u64, mask as u64]))
    }
}

pub fn inotify_rm_watch(fd: BorrowedFd, wd: i32) -> R<usize> {
    // SAFETY: plain integer arguments.
    unsafe { syscall(libc::SYS_inotify_rm_watch, args([fd.as_raw_fd() as u64, wd as u32 as u64])) }
}
