//! Miscellaneous host calls: time, identity, limits, randomness, futexes.

use super::check;
use super::physmem::GuestRange;
use super::syscall::{args, syscall, syscall_retry};
use crate::abi::errno::Errno;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU32;

type R<T> = Result<T, Errno>;

pub fn clock_gettime(clock: i32) -> R<libc::timespec> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid output pointer. The host validates the clock id.
    unsafe { syscall(libc::SYS_clock_gettime, args([clock as u64, &mut ts as *mut libc::timespec as u64])) }?;
    Ok(ts)
}

pub fn clock_getres(clock: i32) -> R<libc::timespec> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid output pointer.
    unsafe { syscall(libc::SYS_clock_getres, args([clock as u64, &mut ts as *mut libc::timespec as u64])) }?;
    Ok(ts)
}

pub fn getrandom(buf: &mut [u8], flags: u32) -> R<usize> {
    // SAFETY: valid buffer of buf.len() bytes.
    unsafe { syscall_retry(libc::SYS_getrandom, args([buf.as_mut_ptr() as u64, buf.len() as u64, flags as u64])) }
}

/// 16 bytes from the host's random generator (a program's AT_RANDOM),
/// taken from a page of them read at once: one host call per 256 execs,
/// not one each. Each is handed out once.
pub fn random16() -> R<[u8; 16]> {
    static POOL: std::sync::Mutex<([u8; 4096], usize)> = std::sync::Mutex::new(([0; 4096], 4096));
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let (bytes, used) = &mut *pool;
    if *used == bytes.len() {
        // Up to 256 bytes always come whole (getrandom(2)); ask in those.
        for chunk in bytes.chunks_mut(256) {
            if getrandom(chunk, 0)? != chunk.len() {
                return Err(Errno::EAGAIN);
            }
        }
        *used = 0;
    }
    let mut out = [0u8; 16];
    out.copy_from_slice(&bytes[*used..*used + 16]);
    // Not left behind for anyone to find.
    bytes[*used..*used + 16].fill(0);
    *used += 16;
    Ok(out)
}

pub fn uname() -> libc::utsname {
    // SAFETY: zeroed utsname is valid; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: valid output pointer.
    unsafe { libc::uname(&mut u) };
    u
}

pub fn sysinfo() -> libc::sysinfo {
    // SAFETY: zeroed sysinfo is valid; sysinfo fills it.
    let mut s: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: valid output pointer.
    unsafe { libc::sysinfo(&mut s) };
    s
}

pub fn getrlimit(resource: u32) -> libc::rlimit {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: valid output pointer.
    unsafe { libc::getrlimit(resource as _, &mut r) };
    r
}

/// The limits the first guest gets: those nomu was started with, taken
/// at the first call, but for RLIMIT_NOFILE once [`raise_own_nofile`] has
/// run (a hard limit that leaves nomu room for its own descriptors).
pub fn guest_rlimit(resource: u32) -> libc::rlimit {
    if resource == libc::RLIMIT_NOFILE {
        if let Some(&r) = GUEST_NOFILE.get() {
            return r;
        }
    }
    started_with(resource)
}

fn started_with(resource: u32) -> libc::rlimit {
    static LIMITS: std::sync::OnceLock<[libc::rlimit; 16]> = std::sync::OnceLock::new();
    let limits = LIMITS.get_or_init(|| std::array::from_fn(|r| getrlimit(r as u32)));
    limits.get(resource as usize).copied().unwrap_or_else(|| getrlimit(resource))
}

static GUEST_NOFILE: std::sync::OnceLock<libc::rlimit> = std::sync::OnceLock::new();

/// Descriptors of nomu's own a guest's RLIMIT_NOFILE leaves room for when
/// nomu cannot raise its hard limit above the guest's: physical memory,
/// the root, event and signal descriptors, the files behind mappings
/// (about 50 with a python running).
const OWN_DESCRIPTORS: libc::rlim_t = 256;

/// Raises nomu's own RLIMIT_NOFILE as far as the host lets it: to fs.nr_open
/// with the right to (CAP_SYS_RESOURCE), else to its hard limit. Every
/// guest's descriptors are host descriptors of nomu's one process, so under
/// the soft limit nomu was started with (1024 on Debian) all guests
/// together got EMFILE after about that many, however high each had set
/// its own; each guest's own limit is nomu's to enforce (its descriptor
/// table). Where the hard limit stays, the guests' is lowered by
/// [`OWN_DESCRIPTORS`], so one that raises its soft limit to the hard one
/// and fills it does not run into nomu's own (CPython's
/// test_selectors.test_above_fd_setsize).
pub fn raise_own_nofile() {
    let start = started_with(libc::RLIMIT_NOFILE);
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<libc::rlim_t>().ok())
        .unwrap_or(1 << 20);
    for max in [nr_open.max(start.rlim_max), start.rlim_max] {
        let r = libc::rlimit { rlim_cur: max, rlim_max: max };
        // SAFETY: setrlimit reads a valid struct; a refusal changes nothing.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } == 0 {
            break;
        }
    }
    let own = getrlimit(libc::RLIMIT_NOFILE).rlim_cur;
    let hard = start.rlim_max.min(own.saturating_sub(OWN_DESCRIPTORS).max(own / 2));
    let _ = GUEST_NOFILE.set(libc::rlimit { rlim_cur: start.rlim_cur.min(hard), rlim_max: hard });
}

/// nomu's own credentials when it started: the first guest's.
#[derive(Clone, Debug)]
pub struct HostCred {
    /// Real, effective, saved.
    pub uids: [u32; 3],
    pub gids: [u32; 3],
    pub groups: Vec<u32>,
    /// Effective, permitted, inheritable capabilities, and the bounding set.
    pub caps: [u64; 3],
    pub bset: u64,
    pub ambient: u64,
}

/// Asked of the host once: nomu never changes its own credentials.
pub fn host_cred() -> &'static HostCred {
    static CRED: std::sync::OnceLock<HostCred> = std::sync::OnceLock::new();
    CRED.get_or_init(|| {
        let (mut u, mut g) = ([0u32; 3], [0u32; 3]);
        // SAFETY: valid output pointers; these calls cannot fail so.
        unsafe {
            libc::getresuid(&mut u[0], &mut u[1], &mut u[2]);
            libc::getresgid(&mut g[0], &mut g[1], &mut g[2]);
        }
        // SAFETY: a count query (no buffer), then a buffer of that many.
        let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) }.max(0) as usize;
        let mut groups = vec![0u32; n];
        // SAFETY: `groups` has room for n ids.
        let got = unsafe { libc::getgroups(n as i32, groups.as_mut_ptr()) }.max(0) as usize;
        groups.truncate(got);
        // struct __user_cap_header_struct (version 3, this thread) and two
        // struct __user_cap_data_struct (effective, permitted, inheritable).
        let header = [0x2008_0522u32, 0];
        let mut data = [0u32; 6];
        // SAFETY: header and data are what capget reads and writes.
        let ok = unsafe { libc::syscall(libc::SYS_capget, header.as_ptr(), data.as_mut_ptr()) } == 0;
        let cap = |i: usize| if ok { u64::from(data[i]) | u64::from(data[i + 3]) << 32 } else { 0 };
        let (mut bset, mut ambient) = (0, 0);
        for c in 0..64 {
            // SAFETY: these prctls only read; unknown capabilities are EINVAL.
            if unsafe { libc::prctl(libc::PR_CAPBSET_READ, c as libc::c_ulong, 0, 0, 0) } == 1 {
                bset |= 1 << c;
            }
            // SAFETY: as above.
            let set =
                unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_IS_SET, c as libc::c_ulong, 0, 0) };
            if set == 1 {
                ambient |= 1 << c;
            }
        }
        HostCred { uids: u, gids: g, groups, caps: [cap(0), cap(1), cap(2)], bset, ambient }
    })
}

/// The calling host thread's round-robin interval (its fair slice).
pub fn sched_rr_get_interval() -> R<libc::timespec> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid output pointer.
    unsafe { syscall(libc::SYS_sched_rr_get_interval, args([0, &mut ts as *mut libc::timespec as u64])) }?;
    Ok(ts)
}

pub fn sched_yield() {
    // SAFETY: cannot fail.
    let _ = unsafe { syscall(libc::SYS_sched_yield, args([])) };
}

/// Blocks while the guest word at `word` holds `val` (FUTEX_WAIT_BITSET).
/// All guest threads live in nomu's one host address space, so a private
/// host futex keyed by address serves private and shared guest futexes.
pub fn futex_wait(word: GuestRange, val: u32, deadline: Option<&libc::timespec>, realtime: bool, bitset: u32) -> R<()> {
    let mut op = libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG;
    if realtime {
        op |= libc::FUTEX_CLOCK_REALTIME;
    }
    let ts = deadline.map_or(std::ptr::null(), |t| t as *const libc::timespec);
    let call = [word.addr() as u64, op as u64, val as u64, ts as u64, 0, bitset as u64];
    // SAFETY: word is a 4-byte range inside physical memory; ts is null or
    // valid. Through host::blocking: a kick ends the wait (EINTR).
    unsafe { super::blocking::syscall(libc::SYS_futex, call) }.map(drop)
}

/// A relative timeout as the host's timespec (None: forever).
fn host_timeout(timeout: Option<std::time::Duration>) -> Option<libc::timespec> {
    timeout
        .map(|d| libc::timespec { tv_sec: d.as_secs().min(i64::MAX as u64) as i64, tv_nsec: d.subsec_nanos() as i64 })
}

/// Waits while nomu's own `word` holds `val`, at most `timeout`, until
/// wake_word; through host::blocking, so a kick ends it (EINTR). EAGAIN:
/// the word had changed already.
pub fn wait_word(word: &AtomicU32, val: u32, timeout: Option<std::time::Duration>) -> R<()> {
    let ts = host_timeout(timeout);
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    let op = libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG;
    let call = [word.as_ptr() as u64, op as u64, val as u64, ts_ptr as u64, 0, 0];
    // SAFETY: word is a live 4-byte atomic; ts is null or valid.
    unsafe { super::blocking::syscall(libc::SYS_futex, call) }.map(drop)
}

/// Waits while every one of `words` holds its value, until `deadline`
/// (CLOCK_MONOTONIC, as Instant), until one is woken with wake_word; one
/// sleep on several words (FUTEX_WAITV, Linux 5.16). Through host::blocking,
/// so a kick ends it (EINTR). EAGAIN: a word had changed already.
pub fn wait_words(words: &[(&AtomicU32, u32)], deadline: Option<std::time::Instant>) -> R<()> {
    #[repr(C)]
    struct FutexWaitv {
        val: u64,
        uaddr: u64,
        flags: u32,
        reserved: u32,
    }
    const FUTEX2_SIZE_U32: u32 = 2;
    const FUTEX2_PRIVATE: u32 = 128;
    const MAX: usize = 4;
    assert!(words.len() <= MAX);
    let waiters: [FutexWaitv; MAX] = std::array::from_fn(|i| match words.get(i) {
        Some((w, v)) => FutexWaitv {
            val: *v as u64,
            uaddr: w.as_ptr() as u64,
            flags: FUTEX2_SIZE_U32 | FUTEX2_PRIVATE,
            reserved: 0,
        },
        None => FutexWaitv { val: 0, uaddr: 0, flags: 0, reserved: 0 },
    });
    // The timeout is absolute on the clock named: now plus what is left.
    let abs = deadline.map(|d| {
        let left = d.saturating_duration_since(std::time::Instant::now());
        let now = monotonic_now();
        let nanos = now.tv_nsec as u64 + left.subsec_nanos() as u64;
        libc::timespec {
            tv_sec: now
                .tv_sec
                .saturating_add(left.as_secs().min(i64::MAX as u64) as i64 + (nanos / 1_000_000_000) as i64),
            tv_nsec: (nanos % 1_000_000_000) as i64,
        }
    });
    let ts = abs.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    let call = [waiters.as_ptr() as u64, words.len() as u64, 0, ts as u64, libc::CLOCK_MONOTONIC as u64, 0];
    // SAFETY: the waiters name live 4-byte atomics; ts is null or valid.
    unsafe { super::blocking::syscall(libc::SYS_futex_waitv, call) }.map(drop)
}

/// Whether this host has FUTEX_WAITV (an empty list is EINVAL there).
pub fn has_futex_waitv() -> bool {
    // SAFETY: no waiters, no timeout: the host checks the count and returns.
    unsafe { libc::syscall(libc::SYS_futex_waitv, 0usize, 0u32, 0u32, 0usize, 0) };
    super::last_errno() != Errno::ENOSYS
}

fn monotonic_now() -> libc::timespec {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts
}

/// Wakes every thread waiting in wait_word or wait_words on `word`.
pub fn wake_word(word: &AtomicU32) {
    let op = libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG;
    // SAFETY: word is a live 4-byte atomic; FUTEX_WAKE does not write it.
    let _ = unsafe { syscall(libc::SYS_futex, [word.as_ptr() as u64, op as u64, i32::MAX as u64, 0, 0, 0]) };
}

/// Wakes up to `n` waiters on the guest word at `word` whose bitset matches.
pub fn futex_wake(word: GuestRange, n: u32, bitset: u32) -> R<usize> {
    let op = libc::FUTEX_WAKE_BITSET | libc::FUTEX_PRIVATE_FLAG;
    // SAFETY: word lies inside physical memory; FUTEX_WAKE does not write it.
    unsafe { syscall(libc::SYS_futex, [word.addr() as u64, op as u64, n as u64, 0, 0, bitset as u64]) }
}

/// Writes all of `buf` to a host descriptor of nomu's own (its log).
pub fn write_all(fd: i32, mut buf: &[u8]) {
    while !buf.is_empty() {
        // SAFETY: valid buffer.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n <= 0 {
            if n < 0 && super::last_errno() == Errno::EINTR {
                continue;
            }
            return;
        }
        buf = &buf[n as usize..];
    }
}

/// FUTEX_REQUEUE, FUTEX_CMP_REQUEUE and FUTEX_WAKE_OP on two guest words
/// (`val2` is the second count, passed in the timeout slot as Linux does).
pub fn futex_raw(w1: GuestRange, cmd: i32, val: u32, val2: u64, w2: GuestRange, val3: u32) -> R<usize> {
    let op = cmd | libc::FUTEX_PRIVATE_FLAG;
    let call = [w1.addr() as u64, op as u64, val as u64, val2, w2.addr() as u64, val3 as u64];
    // SAFETY: both words lie inside physical memory; these commands take a
    // count, not a pointer, in the timeout slot.
    unsafe { syscall(libc::SYS_futex, call) }
}

pub fn set_gs_base(v: u64) -> R<()> {
    if super::cpu::has_fsgsbase() {
        if v >= crate::mm::uaccess::TASK_SIZE_MAX {
            return Err(Errno::EPERM); // what ARCH_SET_GS answers (wrgsbase would fault)
        }
        // SAFETY: the kernel allows wrgsbase here (FSGSBASE); it only
        // changes this thread's gs base, which nomu never uses.
        unsafe { std::arch::asm!("wrgsbase {0}", in(reg) v, options(nostack, preserves_flags)) };
        return Ok(());
    }
    // SAFETY: ARCH_SET_GS only changes this thread's gs base, which nomu never uses.
    check(unsafe { libc::syscall(libc::SYS_arch_prctl, 0x1001, v) }).map(drop)
}

/// nomu's own fs base on this thread (its TLS block, fixed for its life).
pub fn fs_base() -> u64 {
    thread_local! {
        static FS_BASE: u64 = {
            let mut v = 0u64;
            // SAFETY: ARCH_GET_FS writes one u64.
            unsafe { libc::syscall(libc::SYS_arch_prctl, 0x1003, &mut v as *mut u64) };
            v
        };
    }
    FS_BASE.with(|v| *v)
}

/// The CPU time of the host processes that ran a host thread's guest code
/// (sysemu's tracee, split's child, a forked guest's own host process):
/// the guest's user time, counted for the host thread that drives them.
#[derive(Clone, Copy, Default)]
struct GuestAccount {
    /// The host process running its guest code now (0: none).
    pid: i32,
    /// That process's CPU time when it was set: a kept or pooled host
    /// process comes with the time of the guests it ran before.
    base: std::time::Duration,
    /// What the host processes it drove before that used meanwhile.
    earlier: std::time::Duration,
}

impl GuestAccount {
    fn used(&self) -> std::time::Duration {
        let now = if self.pid > 0 { task_run_time(self.pid).saturating_sub(self.base) } else { Default::default() };
        self.earlier + now
    }
}

/// Each host thread's [`GuestAccount`], by host thread id: read by the
/// thread itself ([`thread_rusage`]) and by others ([`thread_cpu_time_of`]).
static GUEST_ACCOUNTS: std::sync::Mutex<BTreeMap<i32, GuestAccount>> = std::sync::Mutex::new(BTreeMap::new());

/// Notes the host process running this host thread's guest code (0: none
/// now); what the last one used stays this host thread's.
pub fn set_guest_process(pid: i32) {
    // A kept host process's time since its last guest ended is the setting
    // up of this one: counted for it, and no read needed here.
    let base = if pid > 0 { last_known_run_time(pid) } else { Default::default() };
    let mut all = GUEST_ACCOUNTS.lock().unwrap();
    let account = all.entry(gettid()).or_default();
    *account = GuestAccount { pid, base, earlier: account.used() };
}

/// The host process set by [`set_guest_process`] (0: none).
pub fn guest_process() -> i32 {
    GUEST_ACCOUNTS.lock().unwrap().get(&gettid()).map_or(0, |a| a.pid)
}

/// The calling host thread's guest processes' time so far (see
/// [`set_guest_process`]).
pub fn own_guest_time() -> std::time::Duration {
    guest_time_of(gettid())
}

/// The guest time of host thread `tid`'s host processes so far.
fn guest_time_of(tid: i32) -> std::time::Duration {
    GUEST_ACCOUNTS.lock().unwrap().get(&tid).map_or(Default::default(), |a| a.used())
}

/// The run time of host task `tid` (a thread of any host process: a
/// forked guest's threads are threads of one) as its scheduler counted it
/// (`/proc/TID/schedstat`; 0 if it cannot be read). A process's CPU clock
/// would count all its threads, and another process's thread clocks
/// cannot be read. Each task's file stays open for the next read (one
/// pread: opening it cost a fork ~5 us), and its last value is kept:
/// `last_known` gives it without a read.
fn task_run_time(tid: i32) -> std::time::Duration {
    use std::os::unix::fs::FileExt;
    /// Open files kept at most (a task that ended is dropped when read).
    const KEPT: usize = 512;
    let mut files = TASK_FILES.lock().unwrap();
    let read = |f: &std::fs::File| {
        let mut buf = [0u8; 64];
        let n = f.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        text.split_whitespace().next()?.parse::<u64>().ok()
    };
    let known = files.get(&tid).and_then(|(f, _)| read(f));
    let ns = known.or_else(|| {
        files.remove(&tid);
        let f = std::fs::File::open(format!("/proc/{tid}/schedstat")).ok()?;
        let ns = read(&f)?;
        if files.len() >= KEPT {
            files.clear();
        }
        files.insert(tid, (f, ns));
        Some(ns)
    });
    match ns {
        Some(ns) => {
            if let Some(entry) = files.get_mut(&tid) {
                entry.1 = ns;
            }
            std::time::Duration::from_nanos(ns)
        }
        None => std::time::Duration::ZERO,
    }
}

/// [`task_run_time`]'s last reading of `tid`, else a new one.
fn last_known_run_time(tid: i32) -> std::time::Duration {
    let last = TASK_FILES.lock().unwrap().get(&tid).map(|&(_, ns)| ns);
    last.map_or_else(|| task_run_time(tid), std::time::Duration::from_nanos)
}

/// [`task_run_time`]'s open files and last readings, by task id.
static TASK_FILES: std::sync::Mutex<BTreeMap<i32, (std::fs::File, u64)>> = std::sync::Mutex::new(BTreeMap::new());

/// Resource usage of the calling host thread (a guest thread's whole life
/// runs on one), with the CPU time of the host processes that ran its
/// guest code (see [`set_guest_process`]) counted as user time.
pub fn thread_rusage() -> libc::rusage {
    // SAFETY: zeroed rusage is valid; getrusage fills it.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid output pointer.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut r) };
    let guest = guest_time_of(gettid());
    if !guest.is_zero() {
        let t = std::time::Duration::new(r.ru_utime.tv_sec as u64, r.ru_utime.tv_usec as u32 * 1000) + guest;
        r.ru_utime = libc::timeval { tv_sec: t.as_secs() as i64, tv_usec: t.subsec_micros() as i64 };
    }
    r
}

/// The user and system time of host thread `tid` of nomu's own process
/// (none for 0), counted as [`thread_rusage`] counts the calling thread's,
/// from any thread: its run time to the nanosecond, split in the ratio of
/// its sampled user and system time (Linux's cputime_adjust, which the
/// calling thread's getrusage gets), plus its guest processes' time as
/// user time.
pub fn thread_cpu_time_of(tid: i32) -> (std::time::Duration, std::time::Duration) {
    use std::time::Duration;
    if tid <= 0 {
        return (Duration::ZERO, Duration::ZERO);
    }
    // A host thread's CPU clock (Linux's CPUCLOCK_PERTHREAD): PROF is
    // user + system, VIRT user, SCHED the run time.
    let clock = |which: i32| {
        clock_gettime(((!tid) << 3) | 4 | which).map_or(0u128, |t| t.tv_sec as u128 * 1_000_000_000 + t.tv_nsec as u128)
    };
    let (prof, virt, run) = (clock(0), clock(1), clock(2));
    let user = if virt == 0 {
        0
    } else if virt >= prof {
        run
    } else {
        run * virt / prof
    };
    (Duration::from_nanos(user as u64) + guest_time_of(tid), Duration::from_nanos((run - user) as u64))
}

extern "C" {
    /// glibc's restartable-sequences area: its offset from the thread
    /// pointer and the size glibc gives for it (glibc 2.35 and later).
    static __rseq_offset: isize;
    static __rseq_size: u32;
}

/// Unregisters the calling thread's restartable-sequences area, which
/// glibc registers for every thread. A process forked from this thread
/// inherits the registration, and if that process then unmaps the area
/// (the fork zygote keeps almost nothing of nomu's memory) the host kills
/// it with SIGSEGV the next time it preempts it. Errors are ignored (no
/// rseq on this host or this glibc: nothing registered).
pub fn unregister_rseq() {
    const RSEQ_FLAG_UNREGISTER: u64 = 1;
    const RSEQ_SIG: u64 = 0x5305_3053;
    let tp: usize;
    // SAFETY: reads the thread pointer (the TCB's first word is itself).
    unsafe { std::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags)) };
    // SAFETY: plain reads of glibc's exported constants.
    let (offset, size) = unsafe { (__rseq_offset, __rseq_size) };
    if size == 0 {
        return;
    }
    let area = tp.wrapping_add_signed(offset);
    // glibc registers the whole area (32 bytes) whatever size it reports;
    // the host wants the registered length back.
    for len in [32, size as u64] {
        // SAFETY: unregistering this thread's own area; no memory is touched.
        if unsafe { libc::syscall(libc::SYS_rseq, area, len, RSEQ_FLAG_UNREGISTER, RSEQ_SIG) } == 0 {
            return;
        }
    }
}

/// The calling host thread's id (cached: glibc asks the host every time).
pub fn gettid() -> i32 {
    thread_local! {
        // SAFETY: gettid cannot fail.
        static TID: i32 = unsafe { libc::gettid() };
    }
    TID.with(|t| *t)
}

/// poll(2) on nomu's own descriptors (the host side of guest fds).
/// Polls host descriptors. A host signal ending the wait early (a kick on
/// the zpoline path) reads as a timeout: callers wait in slices and look
/// for guest signals between them anyway.
/// poll on host descriptors, at most `timeout` (None: forever); through
/// host::blocking, so a kick ends it (EINTR).
pub fn poll(fds: &mut [libc::pollfd], timeout: Option<std::time::Duration>) -> R<usize> {
    let ts = host_timeout(timeout);
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    let call = [fds.as_mut_ptr() as u64, fds.len() as u64, ts_ptr as u64, 0, 8, 0];
    // SAFETY: fds is a valid array of fds.len() pollfd structs; ts is null
    // or valid; no signal mask is passed.
    unsafe { super::blocking::syscall(libc::SYS_ppoll, call) }
}

/// Sleeps until `deadline` on `clock` (absolute); through host::blocking,
/// so a kick ends it (EINTR).
pub fn sleep_until(clock: i32, deadline: &libc::timespec) -> R<()> {
    let call = [clock as u64, libc::TIMER_ABSTIME as u64, deadline as *const libc::timespec as u64, 0, 0, 0];
    // SAFETY: valid timespec; with TIMER_ABSTIME no remainder is written.
    unsafe { super::blocking::syscall(libc::SYS_clock_nanosleep, call) }.map(drop)
}

pub fn sigset(sigs: &[i32]) -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill our own set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in sigs {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Blocks host signals in the calling thread (and the threads it starts).
pub fn block_signals(sigs: &[i32]) {
    let set = sigset(sigs);
    // SAFETY: valid signal set; only the calling thread's mask changes.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

/// Sets the calling thread's signal mask (as a bit set, signal n at bit
/// n-1); returns the old one.
pub fn swap_sigmask(mask: u64) -> u64 {
    let mut old = 0u64;
    // SAFETY: rt_sigprocmask with valid 8-byte sets; only this thread's mask.
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_SETMASK, &mask as *const u64, &mut old as *mut u64, 8) };
    old
}

/// Adds `mask` (a bit set as in [`swap_sigmask`]) to the calling thread's
/// blocked signals; returns the old mask.
pub fn block_mask(mask: u64) -> u64 {
    let mut old = 0u64;
    // SAFETY: rt_sigprocmask with valid 8-byte sets; only this thread's mask.
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_BLOCK, &mask as *const u64, &mut old as *mut u64, 8) };
    old
}

/// Unblocks host signals in the calling thread.
pub fn unblock_signals(sigs: &[i32]) {
    let set = sigset(sigs);
    // SAFETY: valid signal set; only the calling thread's mask changes.
    unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
}

/// What [`sigwaitinfo`] took.
pub struct TakenSignal {
    pub signo: i32,
    pub code: i32,
    /// A readiness signal's (F_SETSIG's) si_fd and si_band.
    pub fd: i32,
    pub band: i64,
    /// The sender's pid, for a signal someone sent (code <= 0: kill,
    /// sigqueue, tkill).
    pub sender: Option<i32>,
    /// sigqueue's value (an int).
    pub value: i32,
}

/// Waits for one of `sigs` (blocked) and takes it.
pub fn sigwaitinfo(sigs: &[i32]) -> TakenSignal {
    let set = sigset(sigs);
    let mut info = [0u8; 128];
    loop {
        // SAFETY: a valid set, and a 128-byte buffer for the siginfo_t.
        let sig = unsafe { libc::sigwaitinfo(&set, info.as_mut_ptr() as *mut libc::siginfo_t) };
        if sig > 0 {
            let i32_at = |o: usize| i32::from_le_bytes(info[o..o + 4].try_into().unwrap());
            let code = i32_at(8);
            return TakenSignal {
                signo: sig,
                code,
                fd: i32_at(24),
                band: i64::from_le_bytes(info[16..24].try_into().unwrap()),
                // si_pid shares its place with si_band, si_value with si_fd.
                sender: (code <= 0).then(|| i32_at(16)),
                value: i32_at(24),
            };
        }
    }
}

/// Restricts the calling thread (and what it starts) to one CPU.
pub fn pin_to_cpu(cpu: usize) -> R<()> {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET stays within it for cpu < 1024.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return Err(Errno::EINVAL);
        }
        libc::CPU_SET(cpu, &mut set);
        check(libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) as libc::c_long).map(drop)
    }
}

/// Sends `sig` to every process of host process group `pgid` (`nomu bench`
/// ending a comparison system that overran its time).
pub fn kill_group(pgid: i32, sig: i32) -> R<()> {
    if pgid <= 0 {
        return Err(Errno::EINVAL);
    }
    // SAFETY: kill has no memory arguments.
    check(unsafe { libc::kill(-pgid, sig) } as libc::c_long).map(drop)
}

/// execve(2) with an environment given in order (std's Command sorts the
/// environment it is asked to change). Returns only on failure.
pub fn execve(path: &std::ffi::CStr, argv: &[std::ffi::CString], envp: &[std::ffi::CString]) -> std::io::Error {
    let argv: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).chain([std::ptr::null()]).collect();
    let envp: Vec<*const libc::c_char> = envp.iter().map(|e| e.as_ptr()).chain([std::ptr::null()]).collect();
    // SAFETY: path and every argument are NUL-terminated strings, and both
    // arrays end with a null pointer; they outlive the call.
    unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    std::io::Error::last_os_error()
}

/// nomu's nice value when it started (the first guest's).
pub fn host_nice() -> i32 {
    static NICE: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    // SAFETY: getpriority of this process cannot fail; it returns 20 - nice.
    *NICE.get_or_init(|| 20 - unsafe { libc::syscall(libc::SYS_getpriority, libc::PRIO_PROCESS, 0) } as i32)
}

/// sched_setaffinity(2) of host thread `tid` (0: this one).
pub fn sched_setaffinity(tid: i32, mask: &[u8]) -> R<()> {
    let call = args([tid as u64, mask.len() as u64, mask.as_ptr() as u64]);
    // SAFETY: the host reads mask.len() bytes of `mask`.
    unsafe { syscall(libc::SYS_sched_setaffinity, call) }?;
    let tid = if tid == 0 { gettid() } else { tid };
    GUEST_MASKS.lock().unwrap().insert(tid, mask.to_vec());
    Ok(())
}

/// The mask last given to each host thread through [`sched_setaffinity`]:
/// the guest thread's it runs. The split path pins its threads to one CPU
/// for speed, inside this mask, and loosens them back to it.
static GUEST_MASKS: std::sync::Mutex<std::collections::BTreeMap<i32, Vec<u8>>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// The CPUs the guest thread this host thread runs may use: the mask set
/// for it, else nomu's.
pub fn guest_affinity() -> Vec<u8> {
    GUEST_MASKS.lock().unwrap().get(&gettid()).cloned().unwrap_or_else(|| nomu_affinity().to_vec())
}

/// sched_getaffinity(2) of host thread `tid` (0: this one): the bytes of
/// `mask` the host filled.
pub fn sched_getaffinity(tid: i32, mask: &mut [u8]) -> R<usize> {
    let call = args([tid as u64, mask.len() as u64, mask.as_mut_ptr() as u64]);
    // SAFETY: the host writes at most mask.len() bytes of `mask`.
    unsafe { syscall(libc::SYS_sched_getaffinity, call) }
}

/// The CPUs nomu may run on, as the host's mask when it started (kernel
/// boot reads it first, before any thread of nomu's is pinned).
pub fn nomu_affinity() -> &'static [u8] {
    static MASK: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    MASK.get_or_init(|| {
        let mut m = vec![0u8; 1024];
        let n = sched_getaffinity(0, &mut m).unwrap_or(0);
        m.truncate(n);
        m
    })
}

/// getcpu(2) of this host thread: (cpu, node).
pub fn getcpu() -> R<(u32, u32)> {
    let (mut cpu, mut node) = (0u32, 0u32);
    let call = args([&mut cpu as *mut u32 as u64, &mut node as *mut u32 as u64, 0]);
    // SAFETY: two valid u32 outputs; the cache argument is unused.
    unsafe { syscall(libc::SYS_getcpu, call) }?;
    Ok((cpu, node))
}

/// The umask nomu was started with, which the first guest inherits. The
/// host's own becomes 0 at the first call: nomu applies each guest's
/// umask itself, and the host's must not mask the result again (a guest's
/// umask 0 made files 0644 under nomu's 022).
pub fn guest_umask() -> u32 {
    static UMASK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    // SAFETY: umask cannot fail; nomu's kernel creates files only with
    // modes it already masked.
    *UMASK.get_or_init(|| unsafe { libc::umask(0) } as u32)
}

/// Keeps [addr, addr+len) of nomu's own address space from the host's
/// mmap for good (PROT_NONE, nothing committed): a fixed-address program
/// whose range lies outside physical memory is shown there in a host
/// process of its own, which starts as a copy of nomu's map, so nothing of
/// nomu's may be there then. Parts reserved before (another such program
/// at the same addresses) stay so; EEXIST when anything else is there,
/// ENOMEM past the top of user space.
pub fn reserve_far_range(addr: usize, len: usize) -> R<()> {
    /// x86-64's TASK_SIZE_MAX: user space ends below it.
    const USER_END: usize = 0x7fff_ffff_f000;
    static RESERVED: std::sync::Mutex<Vec<(usize, usize)>> = std::sync::Mutex::new(Vec::new());
    let end = addr.checked_add(len).filter(|&e| e <= USER_END && len > 0).ok_or(Errno::ENOMEM)?;
    let mut reserved = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
    // The parts of the range not reserved yet.
    let mut gaps = vec![(addr, end)];
    for &(s, e) in reserved.iter() {
        gaps = gaps.into_iter().flat_map(|(a, b)| [(a, b.min(s)), (a.max(e), b)]).filter(|&(a, b)| a < b).collect();
    }
    let mut made = Vec::new();
    for &(a, b) in &gaps {
        // SAFETY: a new inaccessible mapping where nothing is mapped
        // (MAP_FIXED_NOREPLACE never replaces a mapping).
        let p = unsafe {
            libc::mmap(
                a as *mut libc::c_void,
                b - a,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if p as usize != a {
            let err = if p == libc::MAP_FAILED { super::last_errno() } else { Errno::EEXIST };
            if p != libc::MAP_FAILED {
                // A host that ignores MAP_FIXED_NOREPLACE put it elsewhere.
                made.push((p as usize, b - a));
            }
            for (m, n) in made {
                // SAFETY: unmapping only what this call just mapped.
                unsafe { libc::munmap(m as *mut libc::c_void, n) };
            }
            return Err(err);
        }
        made.push((a, b - a));
    }
    reserved.extend(gaps);
    Ok(())
}
