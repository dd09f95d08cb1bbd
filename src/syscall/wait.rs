//! Waiting for descriptors and signals: poll, ppoll, select, pselect6,
//! pause, rt_sigsuspend, rt_sigtimedwait. Every wait goes through
//! kernel::waiter (an event, or a host call a kick ends), so signals
//! interrupt it.

use super::args::UserPtr;
use super::file_ops::{self, Readiness};
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::fs::file::FileType;
use crate::host::sys as hostsys;
use crate::kernel::poll::PollWaker;
use crate::kernel::signal::UNBLOCKABLE;
use crate::kernel::waiter::Wake;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A guest `struct pollfd`.
#[derive(Clone, Copy)]
struct GuestPollfd {
    fd: i32,
    events: i16,
}

/// What Linux's poll reports for a file without a poll method.
const DEFAULT_POLLMASK: i16 = libc::POLLIN | libc::POLLOUT | libc::POLLRDNORM | libc::POLLWRNORM;

/// Polls guest descriptors. Returns revents per entry; a closed descriptor
/// reports POLLNVAL, as Linux does. Files that are always ready are
/// answered here, nomu's own files (eventfd, signalfd) by nomu, the rest
/// by one host poll. A wait on nomu's files is a wait on their wait
/// queues (kernel::poll::PollWaker); with host descriptors too, it is the
/// host poll, with the waker's doorbell among them.
fn poll_guest(ctx: &Ctx, fds: &[GuestPollfd], deadline: Option<Instant>) -> Result<Vec<i16>, Errno> {
    let mut revents = vec![0i16; fds.len()];
    // The descriptors only the host can answer for: (index, file).
    let mut to_host = Vec::new();
    // nomu's own files: (index, file).
    let mut own = Vec::new();
    {
        // One look at the table, no reference taken on ready files: select
        // over many files is a hot path (lmbench's lat_select).
        let table = ctx.process().files.lock().unwrap();
        for (i, p) in fds.iter().enumerate().filter(|(_, p)| p.fd >= 0) {
            match table.get(p.fd) {
                Err(_) => revents[i] = libc::POLLNVAL,
                Ok(e) if file_ops::ready_at_once(&e.file) => revents[i] = DEFAULT_POLLMASK & p.events,
                Ok(e) if file_ops::of(&e.file).readiness(&e.file) == Readiness::Nomu => own.push((i, e.file.clone())),
                Ok(e) => to_host.push((i, e.file.clone())),
            }
        }
    }
    let at_once = revents.iter().any(|&r| r != 0);
    if at_once && own.is_empty() && to_host.is_empty() {
        return Ok(revents);
    }
    let mut host: Vec<libc::pollfd> = to_host
        .iter()
        .map(|(i, f)| libc::pollfd {
            fd: f.fd().as_raw_fd(),
            events: fds[*i].events | libc::POLLERR | libc::POLLHUP,
            revents: 0,
        })
        .collect();
    let look_at_own = |revents: &mut [i16]| {
        let mut any = false;
        for (i, f) in &own {
            let r = file_ops::of(f).poll(ctx, f) as i16 & (fds[*i].events | libc::POLLERR | libc::POLLHUP);
            revents[*i] = r;
            any |= r != 0;
        }
        any
    };
    let mut waker: Option<Arc<PollWaker>> = None;
    loop {
        let ready_here = look_at_own(&mut revents) || at_once;
        for (_, f) in to_host.iter().filter(|(_, f)| f.file_type() == FileType::Epoll) {
            file_ops::of(f).before_host_poll(ctx, f);
        }
        let expired = !ready_here && deadline.is_some_and(|d| Instant::now() >= d);
        if !ready_here && !expired && !own.is_empty() && waker.is_none() {
            // It will wait: nomu's files are watched first, then looked at
            // again, so a change after that look wakes the wait.
            let w = PollWaker::new(!host.is_empty())?;
            for (_, f) in &own {
                if let Some(head) = file_ops::of(f).poll_head(ctx, f) {
                    w.watch(&head);
                }
            }
            if let Some(bell) = w.doorbell() {
                host.push(libc::pollfd { fd: bell.as_raw_fd(), events: libc::POLLIN, revents: 0 });
            }
            waker = Some(w);
            continue;
        }
        if host.is_empty() && (ready_here || (expired && !own.is_empty())) {
            return Ok(revents);
        }
        if let (true, Some(waker)) = (host.is_empty(), waker.as_ref()) {
            let woke = ctx
                .t
                .wait_for(Some(&waker.event), deadline, Wake::OnSignal, || Ok(look_at_own(&mut revents).then_some(())));
            return match woke {
                Ok(_) => Ok(revents),
                Err(Errno::ERESTARTSYS) => Err(Errno::ERESTARTNOHAND),
                Err(e) => Err(e),
            };
        }
        let ready = if ready_here {
            hostsys::poll(&mut host, Some(Duration::ZERO)).map(drop)
        } else {
            ctx.t
                .block_in_host(|| {
                    let timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                    for p in host.iter_mut() {
                        p.revents = 0;
                    }
                    hostsys::poll(&mut host, timeout)
                })
                .map(drop)
        };
        match ready {
            Ok(_) => {}
            Err(Errno::ERESTARTSYS) => return Err(Errno::ERESTARTNOHAND),
            Err(e) => return Err(e),
        }
        // The doorbell: one of nomu's files changed. Look again, unless a
        // host descriptor is ready too.
        if let Some(waker) = waker.as_ref().filter(|w| w.doorbell().is_some()) {
            let (bell, theirs) = host.split_last().unwrap();
            if bell.revents != 0 {
                waker.drain();
                let expired = deadline.is_some_and(|d| Instant::now() >= d);
                if !ready_here && !expired && theirs.iter().all(|p| p.revents == 0) {
                    continue;
                }
            }
        }
        break;
    }
    for ((i, _), h) in to_host.iter().zip(&host) {
        revents[*i] = h.revents & (fds[*i].events | libc::POLLERR | libc::POLLHUP | libc::POLLNVAL);
    }
    Ok(revents)
}

fn read_pollfds(ctx: &Ctx, ptr: u64, n: u32) -> Result<Vec<GuestPollfd>, Errno> {
    if n as usize > ctx.process().nofile_limit() {
        return Err(Errno::EINVAL);
    }
    let raw = ctx.mem().read_bytes(ptr, n as usize * 8)?;
    Ok(raw
        .chunks(8)
        .map(|c| GuestPollfd {
            fd: i32::from_le_bytes(c[0..4].try_into().unwrap()),
            events: i16::from_le_bytes(c[4..6].try_into().unwrap()),
        })
        .collect())
}

fn write_revents(ctx: &Ctx, ptr: u64, revents: &[i16]) -> SysResult {
    for (i, r) in revents.iter().enumerate() {
        ctx.mem().write(ptr + i as u64 * 8 + 6, &(*r as u16))?;
    }
    Ok(revents.iter().filter(|&&r| r != 0).count() as u64)
}

pub(super) fn deadline_in(d: Duration) -> Instant {
    Instant::now().checked_add(d).unwrap_or_else(|| Instant::now() + Duration::from_secs(1 << 32))
}

pub fn sys_poll(ctx: &mut Ctx, UserPtr(ufds): UserPtr, nfds: u32, timeout: i32) -> SysResult {
    let fds = read_pollfds(ctx, ufds, nfds)?;
    let deadline = (timeout >= 0).then(|| deadline_in(Duration::from_millis(timeout as u64)));
    let revents = poll_guest(ctx, &fds, deadline)?;
    write_revents(ctx, ufds, &revents)
}

pub(super) fn read_timespec_deadline(ctx: &Ctx, ptr: u64) -> Result<Option<Instant>, Errno> {
    if ptr == 0 {
        return Ok(None);
    }
    let ts: libc::timespec = ctx.mem().read(ptr)?;
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(Errno::EINVAL);
    }
    Ok(Some(deadline_in(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))))
}

/// Installs a temporary signal mask for the duration of a p* call; the old
/// one comes back after the call (or after a handler it let in).
pub(super) fn swap_mask(ctx: &mut Ctx, ptr: u64, size: u64) -> Result<(), Errno> {
    if ptr == 0 {
        return Ok(());
    }
    if size != 8 {
        return Err(Errno::EINVAL);
    }
    let mask: u64 = ctx.mem().read(ptr)?;
    ctx.t.saved_mask = Some(ctx.t.set_sigmask(mask));
    Ok(())
}

pub fn sys_ppoll(
    ctx: &mut Ctx,
    UserPtr(ufds): UserPtr,
    nfds: u32,
    UserPtr(tsp): UserPtr,
    UserPtr(sigmask): UserPtr,
    sigsetsize: usize,
) -> SysResult {
    // Linux's order: the timeout, the signal mask, then the descriptors.
    let (deadline, written_back) = read_p_timeout(ctx, tsp)?;
    swap_mask(ctx, sigmask, sigsetsize as u64)?;
    let fds = read_pollfds(ctx, ufds, nfds)?;
    let r = poll_guest(ctx, &fds, deadline).and_then(|revents| write_revents(ctx, ufds, &revents));
    write_back_time_left(ctx, tsp, written_back, r, timespec_of)
}

/// Words of a descriptor set select keeps on the stack: FD_SETSIZE (1024)
/// descriptors, what every libc's fd_set holds. Larger sets (a raised
/// RLIMIT_NOFILE) go to the heap.
const STACK_SET_WORDS: usize = 16;

/// select's six sets (the three the guest gave, the three it gets back),
/// `words` words each, on the stack unless they are larger than an fd_set.
struct SelectSets {
    words: usize,
    stack: [u64; 6 * STACK_SET_WORDS],
    heap: Vec<u64>,
}

impl SelectSets {
    fn new(words: usize) -> SelectSets {
        let heap = if words > STACK_SET_WORDS { vec![0; 6 * words] } else { Vec::new() };
        SelectSets { words, stack: [0; 6 * STACK_SET_WORDS], heap }
    }

    /// Set `k`: 0-2 the guest's (in, out, ex), 3-5 the answers.
    fn set(&mut self, k: usize) -> &mut [u64] {
        let w = self.words;
        let all = if w > STACK_SET_WORDS { &mut self.heap[..] } else { &mut self.stack[..] };
        &mut all[k * w..(k + 1) * w]
    }
}

/// Copies a guest fd_set of `set.len()` words in or out, 16 words at a
/// time through a byte buffer on the stack.
fn read_set(ctx: &Ctx, ptr: u64, set: &mut [u64]) -> Result<(), Errno> {
    let mut bytes = [0u8; STACK_SET_WORDS * 8];
    for (n, chunk) in set.chunks_mut(STACK_SET_WORDS).enumerate() {
        let buf = &mut bytes[..chunk.len() * 8];
        ctx.mem().read_into(ptr + (n * STACK_SET_WORDS * 8) as u64, buf)?;
        for (w, c) in chunk.iter_mut().zip(buf.chunks(8)) {
            *w = u64::from_le_bytes(c.try_into().unwrap());
        }
    }
    Ok(())
}

fn write_set(ctx: &Ctx, ptr: u64, set: &[u64]) -> Result<(), Errno> {
    let mut bytes = [0u8; STACK_SET_WORDS * 8];
    for (n, chunk) in set.chunks(STACK_SET_WORDS).enumerate() {
        let buf = &mut bytes[..chunk.len() * 8];
        for (w, c) in chunk.iter().zip(buf.chunks_mut(8)) {
            c.copy_from_slice(&w.to_le_bytes());
        }
        ctx.mem().write_bytes(ptr + (n * STACK_SET_WORDS * 8) as u64, buf)?;
    }
    Ok(())
}

/// select's work, for select and pselect6. Allocates only the poll list
/// and its answers for sets of up to FD_SETSIZE descriptors (lmbench's
/// lat_select is a hot path: a dozen small allocations per call made
/// select on 10 regular files 2.5x native on the Intel test VM).
fn do_select(ctx: &mut Ctx, nfds: i32, sets: [u64; 3], deadline: Option<Instant>) -> SysResult {
    // A count above the table's size is cut to it, never refused.
    if nfds < 0 {
        return Err(Errno::EINVAL);
    }
    let nfds = (nfds as usize).min(ctx.process().nofile_limit());
    let words = nfds.div_ceil(64);
    let mut bits = SelectSets::new(words);
    for (k, &ptr) in sets.iter().enumerate() {
        if ptr != 0 && words > 0 {
            read_set(ctx, ptr, bits.set(k))?;
        }
    }
    // The descriptors asked about, in order (each pollfd's fd is its
    // place in the sets).
    let mut list = Vec::new();
    for w in 0..words {
        let (r, wr, ex) = (bits.set(0)[w], bits.set(1)[w], bits.set(2)[w]);
        let mut any = r | wr | ex;
        while any != 0 {
            let b = any.trailing_zeros() as usize;
            any &= any - 1;
            let fd = w * 64 + b;
            if fd >= nfds {
                break;
            }
            let bit = 1u64 << b;
            let mut events = 0;
            if r & bit != 0 {
                events |= libc::POLLIN;
            }
            if wr & bit != 0 {
                events |= libc::POLLOUT;
            }
            if ex & bit != 0 {
                events |= libc::POLLPRI;
            }
            list.push(GuestPollfd { fd: fd as i32, events });
        }
    }
    let revents = poll_guest(ctx, &list, deadline)?;
    // A closed descriptor in a set (poll would say POLLNVAL).
    if revents.contains(&libc::POLLNVAL) {
        return Err(Errno::EBADF);
    }
    let mut count = 0;
    for (p, r) in list.iter().zip(&revents) {
        let fd = p.fd as usize;
        let (w, b) = (fd / 64, 1u64 << (fd % 64));
        let checks = [
            (3, libc::POLLIN, libc::POLLIN | libc::POLLHUP | libc::POLLERR),
            (4, libc::POLLOUT, libc::POLLOUT | libc::POLLERR),
            (5, libc::POLLPRI, libc::POLLPRI),
        ];
        for (k, asked, hit) in checks {
            if p.events & asked != 0 && r & hit != 0 {
                bits.set(k)[w] |= b;
                count += 1;
            }
        }
    }
    for (k, &ptr) in sets.iter().enumerate() {
        if ptr != 0 && words > 0 {
            write_set(ctx, ptr, bits.set(3 + k))?;
        }
    }
    Ok(count)
}

pub fn sys_select(
    ctx: &mut Ctx,
    n: i32,
    UserPtr(inp): UserPtr,
    UserPtr(outp): UserPtr,
    UserPtr(exp): UserPtr,
    UserPtr(tvp): UserPtr,
) -> SysResult {
    let mut zero = false;
    let deadline = if tvp != 0 {
        let tv: libc::timeval = ctx.mem().read(tvp)?;
        // Linux carries whole seconds of tv_usec into tv_sec before it
        // judges the timeout (kern_select): {-1, 1000000} is zero.
        let (sec, nsec) = (tv.tv_sec.wrapping_add(tv.tv_usec / 1_000_000), (tv.tv_usec % 1_000_000) * 1000);
        if sec < 0 || nsec < 0 {
            return Err(Errno::EINVAL);
        }
        zero = sec == 0 && nsec == 0;
        Some(deadline_in(Duration::new(sec as u64, nsec as u32)))
    } else {
        None
    };
    let r = do_select(ctx, n, [inp, outp, exp], deadline);
    let left = |left: Duration| libc::timeval { tv_sec: left.as_secs() as i64, tv_usec: left.subsec_micros() as i64 };
    write_back_time_left(ctx, tvp, deadline.filter(|_| !zero), r, left)
}

/// What select, pselect6 and ppoll do after the wait (poll_select_finish):
/// the time left goes back into the caller's timeout, unless there was
/// none or it was zero; a timeout Linux cannot write back changes nothing
/// but a restart, which would start the whole timeout again: EINTR then.
fn write_back_time_left<T: crate::host::pod::Pod>(
    ctx: &Ctx,
    ptr: u64,
    deadline: Option<Instant>,
    r: SysResult,
    as_user: impl Fn(Duration) -> T,
) -> SysResult {
    let Some(deadline) = deadline.filter(|_| ptr != 0) else {
        return r;
    };
    let left = deadline.saturating_duration_since(Instant::now());
    if ctx.mem().write(ptr, &as_user(left)).is_err() && r == Err(Errno::ERESTARTNOHAND) {
        return Err(Errno::EINTR);
    }
    r
}

fn timespec_of(left: Duration) -> libc::timespec {
    libc::timespec { tv_sec: left.as_secs() as i64, tv_nsec: left.subsec_nanos() as i64 }
}

/// A p* call's timeout: its deadline, and the deadline whose time left is
/// written back (none for a zero timeout).
fn read_p_timeout(ctx: &Ctx, ptr: u64) -> Result<(Option<Instant>, Option<Instant>), Errno> {
    let deadline = read_timespec_deadline(ctx, ptr)?;
    if deadline.is_none() {
        return Ok((None, None));
    }
    let ts: libc::timespec = ctx.mem().read(ptr)?;
    Ok((deadline, deadline.filter(|_| ts.tv_sec != 0 || ts.tv_nsec != 0)))
}

pub fn sys_pselect6(
    ctx: &mut Ctx,
    n: i32,
    UserPtr(inp): UserPtr,
    UserPtr(outp): UserPtr,
    UserPtr(exp): UserPtr,
    UserPtr(tsp): UserPtr,
    UserPtr(sig): UserPtr,
) -> SysResult {
    // Linux reads the sigset argument pack first, then the timeout, then
    // the mask (pselect6, do_pselect).
    let sig: Option<[u64; 2]> = if sig != 0 { Some(ctx.mem().read(sig)?) } else { None };
    let (deadline, written_back) = read_p_timeout(ctx, tsp)?;
    if let Some(sig) = sig {
        swap_mask(ctx, sig[0], sig[1])?;
    }
    let r = do_select(ctx, n, [inp, outp, exp], deadline);
    write_back_time_left(ctx, tsp, written_back, r, timespec_of)
}

/// Blocks until a signal is delivered (pause, rt_sigsuspend).
fn wait_for_signal(ctx: &Ctx) -> SysResult {
    let r: Result<Option<()>, Errno> = ctx.t.wait_for(None, None, Wake::OnSignal, || Ok(None));
    r.and(Err(Errno::ERESTARTNOHAND)).or(Err(Errno::ERESTARTNOHAND))
}

pub fn sys_pause(ctx: &mut Ctx) -> SysResult {
    wait_for_signal(ctx)
}

pub fn sys_rt_sigsuspend(ctx: &mut Ctx, UserPtr(unewset): UserPtr, sigsetsize: usize) -> SysResult {
    if sigsetsize != 8 {
        return Err(Errno::EINVAL);
    }
    swap_mask(ctx, unewset, sigsetsize as u64)?;
    wait_for_signal(ctx)
}

pub fn sys_rt_sigtimedwait(
    ctx: &mut Ctx,
    UserPtr(uthese): UserPtr,
    UserPtr(uinfo): UserPtr,
    UserPtr(uts): UserPtr,
    sigsetsize: usize,
) -> SysResult {
    if sigsetsize != 8 {
        return Err(Errno::EINVAL);
    }
    let set: u64 = ctx.mem().read(uthese)?;
    let set = set & !UNBLOCKABLE;
    let deadline = read_timespec_deadline(ctx, uts)?;
    let process = &ctx.t.thread.process;
    // While it waits, a signal sent to the process may pick this thread
    // for the signals it waits for, as if it did not block them (Linux
    // unblocks them for the wait); it is woken by the kick that comes with
    // every signal queued for it.
    ctx.t.thread.state.lock().unwrap().sigwait = set;
    let got = ctx.t.wait_for(None, deadline, Wake::OnSignal, || {
        let mut st = ctx.t.thread.state.lock().unwrap();
        // A waited-for signal, though it is blocked: its own first, then
        // its process's (never SIGKILL or SIGSTOP: those are not in `set`).
        let take = || st.pending.take_from(set).or_else(|| process.shared_pending.take_from(set));
        Ok(crate::kernel::timer::take_signal(process, take))
    });
    ctx.t.thread.state.lock().unwrap().sigwait = 0;
    // One sent meanwhile that it did not take goes to another thread.
    ctx.kernel().retarget_shared(&ctx.t.thread, set);
    match got {
        Ok(Some(info)) => {
            if uinfo != 0 {
                ctx.mem().write_bytes(uinfo, &info.0)?;
            }
            Ok(info.signo() as u64)
        }
        Ok(None) => Err(Errno::EAGAIN),
        Err(Errno::ERESTARTSYS) => Err(Errno::EINTR),
        Err(e) => Err(e),
    }
}
