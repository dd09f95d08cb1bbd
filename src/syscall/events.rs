//! Event descriptors: eventfd, epoll, timerfd, signalfd. Their state is in
//! fs::eventfd and fs::epoll, their file operations in file_ops; how an
//! epoll waits on nomu's own files and host descriptors at once is told
//! in fs::epoll.

use super::args::{Fd, Hex, UserPtr};
use super::file_ops::{self, poll_own, Readiness};
use super::wait::{deadline_in, read_timespec_deadline, swap_mask};
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::fs::epoll::{self, Epoll, Reported, Target, EPOLLEXCLUSIVE, EXCLUSIVE_OK_BITS};
use crate::fs::eventfd::{EventFd, SignalFd};
use crate::fs::file::{FileObject, FileType, OpenFile};
use crate::host::events as hostev;
use crate::kernel::signal::UNBLOCKABLE;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

const EFD_SEMAPHORE: i32 = 1;

fn eventfd(ctx: &Ctx, count: u32, flags: i32) -> SysResult {
    if flags & !(libc::EFD_CLOEXEC | libc::EFD_NONBLOCK | EFD_SEMAPHORE) != 0 {
        return Err(Errno::EINVAL);
    }
    // The host eventfd stays idle: it holds the status flags and answers
    // fstat as an eventfd does.
    let host = hostev::eventfd(0, flags & libc::EFD_NONBLOCK)?;
    let state = EventFd::new(count, flags & EFD_SEMAPHORE != 0);
    let file = OpenFile::new_special(host, "anon_inode:[eventfd]", FileType::EventFd, Some(FileObject::EventFd(state)));
    ctx.install_fd(Arc::new(file), flags & libc::EFD_CLOEXEC != 0)
}

pub fn sys_eventfd(ctx: &mut Ctx, count: u32) -> SysResult {
    eventfd(ctx, count, 0)
}

pub fn sys_eventfd2(ctx: &mut Ctx, count: u32, Hex(flags): Hex<i32>) -> SysResult {
    eventfd(ctx, count, flags)
}

fn epoll_create(ctx: &Ctx, cloexec: bool) -> SysResult {
    let (ep, host) = Epoll::new()?;
    let file = OpenFile::new_special(host, "anon_inode:[eventpoll]", FileType::Epoll, Some(FileObject::Epoll(ep)));
    ctx.install_fd(Arc::new(file), cloexec)
}

pub fn sys_epoll_create(ctx: &mut Ctx, size: i32) -> SysResult {
    if size <= 0 {
        return Err(Errno::EINVAL);
    }
    epoll_create(ctx, false)
}

pub fn sys_epoll_create1(ctx: &mut Ctx, Hex(flags): Hex<i32>) -> SysResult {
    if flags & !libc::EPOLL_CLOEXEC != 0 {
        return Err(Errno::EINVAL);
    }
    epoll_create(ctx, flags & libc::EPOLL_CLOEXEC != 0)
}

/// A guest `struct epoll_event` (packed: 12 bytes).
fn read_event(ctx: &Ctx, ptr: u64) -> Result<(u32, u64), Errno> {
    let mut b = [0u8; 12];
    ctx.mem().read_into(ptr, &mut b)?;
    Ok((u32::from_le_bytes(b[0..4].try_into().unwrap()), u64::from_le_bytes(b[4..12].try_into().unwrap())))
}

/// epoll_ctl, its checks in Linux's order (do_epoll_ctl).
pub fn sys_epoll_ctl(ctx: &mut Ctx, epfd: Fd, op: i32, fd: Fd, UserPtr(event): UserPtr) -> SysResult {
    let ev = if op != epoll::EPOLL_CTL_DEL { Some(read_event(ctx, event)?) } else { None };
    let epf = ctx.io_file(epfd)?;
    let target = ctx.io_file(fd)?;
    let ops = file_ops::of(&target);
    let readiness = ops.readiness(&target);
    if readiness == Readiness::Never {
        return Err(Errno::EPERM);
    }
    let ep = match epf.epoll() {
        Some(ep) if !Arc::ptr_eq(&epf, &target) => ep,
        _ => return Err(Errno::EINVAL),
    };
    let (events, data) = ev.unwrap_or((0, 0));
    if ev.is_some() && events & EPOLLEXCLUSIVE != 0 {
        let exclusive_ok = events & !EXCLUSIVE_OK_BITS == 0 && target.epoll().is_none();
        if op == epoll::EPOLL_CTL_MOD || (op == epoll::EPOLL_CTL_ADD && !exclusive_ok) {
            return Err(Errno::EINVAL);
        }
    }
    let ctx = &*ctx;
    let poll = || poll_own(ctx, &target);
    match op {
        epoll::EPOLL_CTL_ADD => {
            let on = match readiness {
                Readiness::Nomu => Target::Nomu(ops.poll_head(ctx, &target).ok_or(Errno::EPERM)?),
                _ => Target::Host(target.fd()),
            };
            ep.add(fd.0, &target, on, events, data, poll)?;
        }
        epoll::EPOLL_CTL_MOD => ep.modify(fd.0, &target, events, data, poll)?,
        epoll::EPOLL_CTL_DEL => ep.delete(fd.0, &target)?,
        _ => return Err(Errno::EINVAL),
    }
    Ok(0)
}

/// INT_MAX / sizeof(struct epoll_event).
const EP_MAX_EVENTS: i32 = i32::MAX / 12;
/// Host events fetched per host call (more stay ready for the next call).
const HOST_BATCH: usize = 256;

/// The guest's event array, filled in order.
struct Out {
    base: u64,
    n: usize,
    faulted: bool,
}

impl Out {
    fn emit(&mut self, ctx: &Ctx, events: u32, data: u64) -> bool {
        let mut b = [0u8; 12];
        b[0..4].copy_from_slice(&events.to_le_bytes());
        b[4..12].copy_from_slice(&data.to_le_bytes());
        if ctx.mem().write_bytes(self.base + self.n as u64 * 12, &b).is_err() {
            self.faulted = true;
            return false;
        }
        self.n += 1;
        true
    }
}

/// Whether `file`, an epoll the host reported readable from an outer one,
/// is still ready once its ready list is settled (as Linux's poll of an
/// epoll file looks at its items).
fn inner_epoll_ready(ctx: &Ctx, file: &OpenFile) -> bool {
    file_ops::of(file).before_host_poll(ctx, file);
    hostev::poll_now(file.fd(), libc::POLLIN).is_ok_and(|r| r & libc::POLLIN != 0)
}

/// Passes one host event of `ep` on to the guest's array.
fn host_event(ctx: &Ctx, ep: &Epoll, out: &mut Out, events: u32, data: u64, layer_buf: &mut [libc::epoll_event]) {
    match ep.reported(data) {
        Reported::Doorbell | Reported::Gone => {}
        Reported::Layer(k) => {
            let n = ep.layer_events(k, layer_buf);
            for e in layer_buf[..n].iter().copied() {
                let (events, data) = (e.events, e.u64);
                host_event(ctx, ep, out, events, data, &mut []);
            }
        }
        Reported::Item(item) => {
            if let Some(file) = item.file() {
                if file.epoll().is_some() && !inner_epoll_ready(ctx, &file) {
                    return;
                }
            }
            out.emit(ctx, events, item.data());
        }
    }
}

/// epoll_wait and its variants (do_epoll_wait, ep_poll): ready events are
/// returned even when a signal is pending; a wait a signal ends is EINTR,
/// never restarted.
fn epoll_wait(ctx: &Ctx, epfd: Fd, events: u64, maxevents: i32, deadline: Option<Instant>) -> SysResult {
    if maxevents <= 0 || maxevents > EP_MAX_EVENTS {
        return Err(Errno::EINVAL);
    }
    if !crate::mm::uaccess::access_ok(events, maxevents as u64 * 12) {
        return Err(Errno::EFAULT);
    }
    let epf = ctx.io_file(epfd)?;
    let ep = epf.epoll().ok_or(Errno::EINVAL)?;
    let max = maxevents as usize;
    let mut out = Out { base: events, n: 0, faulted: false };
    let mut host_buf = vec![libc::epoll_event { events: 0, u64: 0 }; max.min(HOST_BATCH)];
    let mut layer_buf = host_buf.clone();
    let mut interrupted = false;
    loop {
        ep.harvest(max - out.n, &mut |file| poll_own(ctx, file), &mut |e, d| out.emit(ctx, e, d));
        let expired = deadline.is_some_and(|d| Instant::now() >= d);
        if out.n < max && !out.faulted {
            let room = (max - out.n).min(host_buf.len());
            let got = if out.n > 0 || expired || interrupted {
                hostev::epoll_wait_now(ep.host(), &mut host_buf[..room])?
            } else {
                let wait = ctx.t.block_in_host(|| {
                    let timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                    hostev::epoll_wait(ep.host(), &mut host_buf[..room], timeout)
                });
                match wait {
                    Ok(n) => n,
                    // One more look without waiting: what is ready goes
                    // out before the signal is seen.
                    Err(Errno::ERESTARTSYS) => {
                        interrupted = true;
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            };
            let mut passed: Option<std::collections::HashSet<u64>> = None;
            let mut got = got;
            loop {
                let batch = &host_buf[..got];
                for e in batch.iter().copied() {
                    let key = e.u64;
                    if passed.as_ref().is_some_and(|p| p.contains(&key)) {
                        continue;
                    }
                    let room = (max - out.n).min(layer_buf.len());
                    host_event(ctx, ep, &mut out, e.events, e.u64, &mut layer_buf[..room]);
                }
                // A full batch: more may be ready, and Linux hands them all
                // out in one call, each once (Python's selectors ask for
                // as many as they watch). The host puts a level-triggered
                // item back behind the rest of its ready list, so one seen
                // again means every ready one was fetched.
                let wrapped = passed.as_ref().is_some_and(|p| batch.iter().any(|e| p.contains(&{ e.u64 })));
                if got < host_buf.len() || wrapped || out.n >= max || out.faulted {
                    break;
                }
                passed.get_or_insert_with(Default::default).extend(batch.iter().map(|e| e.u64));
                let room = (max - out.n).min(host_buf.len());
                // What was passed on already goes out whatever this says.
                match hostev::epoll_wait_now(ep.host(), &mut host_buf[..room]) {
                    Ok(n) => got = n,
                    Err(_) => break,
                }
            }
        }
        if out.n > 0 {
            return Ok(out.n as u64);
        }
        if out.faulted {
            return Err(Errno::EFAULT);
        }
        if interrupted {
            return Err(Errno::EINTR);
        }
        if expired || deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(0);
        }
    }
}

pub fn sys_epoll_wait(ctx: &mut Ctx, epfd: Fd, UserPtr(events): UserPtr, maxevents: i32, timeout: i32) -> SysResult {
    let deadline = (timeout >= 0).then(|| deadline_in(Duration::from_millis(timeout as u64)));
    epoll_wait(ctx, epfd, events, maxevents, deadline)
}

/// epoll_pwait and epoll_pwait2: the mask is the thread's for the wait; it
/// stays until the handler of the signal that ended the wait runs (EINTR),
/// and is put back at once otherwise, as restore_saved_sigmask_unless.
fn epoll_pwait(
    ctx: &mut Ctx,
    epfd: Fd,
    events: u64,
    maxevents: i32,
    deadline: Option<Instant>,
    sigmask: u64,
    sigsetsize: usize,
) -> SysResult {
    swap_mask(ctx, sigmask, sigsetsize as u64)?;
    let r = epoll_wait(ctx, epfd, events, maxevents, deadline);
    if r != Err(Errno::EINTR) {
        if let Some(mask) = ctx.t.saved_mask.take() {
            ctx.t.set_sigmask(mask);
        }
    }
    r
}

pub fn sys_epoll_pwait(
    ctx: &mut Ctx,
    epfd: Fd,
    UserPtr(events): UserPtr,
    maxevents: i32,
    timeout: i32,
    UserPtr(sigmask): UserPtr,
    sigsetsize: usize,
) -> SysResult {
    let deadline = (timeout >= 0).then(|| deadline_in(Duration::from_millis(timeout as u64)));
    epoll_pwait(ctx, epfd, events, maxevents, deadline, sigmask, sigsetsize)
}

pub fn sys_epoll_pwait2(
    ctx: &mut Ctx,
    epfd: Fd,
    UserPtr(events): UserPtr,
    maxevents: i32,
    UserPtr(timeout): UserPtr,
    UserPtr(sigmask): UserPtr,
    sigsetsize: usize,
) -> SysResult {
    let deadline = read_timespec_deadline(ctx, timeout)?;
    epoll_pwait(ctx, epfd, events, maxevents, deadline, sigmask, sigsetsize)
}

/// The host descriptor number behind guest descriptor `fd`, or -1: the
/// timerfd calls go to the host with it, which then checks flags, values
/// and the descriptor (EBADF, EINVAL for one that is not a timerfd) in
/// Linux's order. The file is returned to keep the number open.
fn timerfd_host(ctx: &Ctx, fd: Fd) -> (Option<Arc<OpenFile>>, i32) {
    match ctx.io_file(fd) {
        Ok(f) => {
            let raw = f.fd().as_raw_fd();
            (Some(f), raw)
        }
        Err(_) => (None, -1),
    }
}

pub fn sys_timerfd_create(ctx: &mut Ctx, clockid: i32, Hex(flags): Hex<i32>) -> SysResult {
    let host = hostev::timerfd_create(clockid, flags | libc::TFD_CLOEXEC)?;
    let file = OpenFile::new_special(host, "anon_inode:[timerfd]", FileType::TimerFd, None);
    ctx.install_fd(Arc::new(file), flags & libc::TFD_CLOEXEC != 0)
}

pub fn sys_timerfd_settime(
    ctx: &mut Ctx,
    fd: Fd,
    Hex(flags): Hex<i32>,
    UserPtr(new): UserPtr,
    UserPtr(old): UserPtr,
) -> SysResult {
    // struct itimerspec: it_interval, it_value.
    let [it_interval, it_value]: [libc::timespec; 2] = ctx.mem().read(new)?;
    let (_file, raw) = timerfd_host(ctx, fd);
    let was = hostev::timerfd_settime(raw, flags, &libc::itimerspec { it_interval, it_value })?;
    if old != 0 {
        ctx.mem().write(old, &[was.it_interval, was.it_value])?;
    }
    Ok(0)
}

pub fn sys_timerfd_gettime(ctx: &mut Ctx, fd: Fd, UserPtr(cur): UserPtr) -> SysResult {
    let (_file, raw) = timerfd_host(ctx, fd);
    let value = hostev::timerfd_gettime(raw)?;
    ctx.mem().write(cur, &[value.it_interval, value.it_value])?;
    Ok(0)
}

pub fn sys_signalfd4(
    ctx: &mut Ctx,
    ufd: i32,
    UserPtr(user_mask): UserPtr,
    sizemask: usize,
    Hex(flags): Hex<i32>,
) -> SysResult {
    if sizemask != 8 {
        return Err(Errno::EINVAL);
    }
    let mask: u64 = ctx.mem().read(user_mask)?;
    if flags & !(libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) != 0 {
        return Err(Errno::EINVAL);
    }
    let mask = mask & !UNBLOCKABLE;
    if ufd == -1 {
        let host = hostev::empty_signalfd(flags & libc::SFD_NONBLOCK)?;
        let state = FileObject::SignalFd(SignalFd::new(mask));
        let file = OpenFile::new_special(host, "anon_inode:[signalfd]", FileType::SignalFd, Some(state));
        return ctx.install_fd(Arc::new(file), flags & libc::SFD_CLOEXEC != 0);
    }
    let f = ctx.io_file(Fd(ufd))?;
    let sfd = f.signalfd().ok_or(Errno::EINVAL)?;
    sfd.mask.store(mask, std::sync::atomic::Ordering::SeqCst);
    // Readers and pollers look again with the new mask.
    ctx.process().signal_queued.notify();
    Ok(ufd as u64)
}

pub fn sys_signalfd(ctx: &mut Ctx, ufd: i32, user_mask: UserPtr, sizemask: usize) -> SysResult {
    sys_signalfd4(ctx, ufd, user_mask, sizemask, Hex(0))
}
