//! Clocks and sleeping (no vDSO is given to guests, so these all trap).

use super::args::UserPtr;
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::host::sys as hostsys;
use crate::kernel::process::duration_timeval;
use crate::kernel::timer::{wall_now, wall_time, CpuClock, RealTimer};
use std::time::{Duration, Instant};

fn read_timespec(ctx: &Ctx, ptr: u64) -> Result<libc::timespec, Errno> {
    let ts: libc::timespec = ctx.mem().read(ptr)?;
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(Errno::EINVAL);
    }
    Ok(ts)
}

pub fn sys_clock_gettime(ctx: &mut Ctx, clock: i32, UserPtr(tp): UserPtr) -> SysResult {
    let ts = match clock {
        libc::CLOCK_THREAD_CPUTIME_ID => {
            let mut ts = hostsys::clock_gettime(clock)?;
            // The host thread's time and its guest processes' (sysemu's
            // tracee, split's child), less what it ran before this guest
            // thread (an idle worker is reused: a new thread started at
            // another's total), as getrusage(RUSAGE_THREAD) counts.
            let (u, s) = ctx.t.thread.state.lock().unwrap().cpu_base;
            let base = (u.tv_sec + s.tv_sec) as i128 * 1_000_000_000 + (u.tv_usec + s.tv_usec) as i128 * 1000;
            let guest = hostsys::own_guest_time().as_nanos() as i128;
            let ns = (ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128 + guest - base).max(0);
            ts = libc::timespec { tv_sec: (ns / 1_000_000_000) as i64, tv_nsec: (ns % 1_000_000_000) as i64 };
            ts
        }
        // The guest process's, not nomu's (every guest's and nomu's own).
        libc::CLOCK_PROCESS_CPUTIME_ID => {
            let (u, s) = ctx.process().cpu_time();
            dur_to_ts(u + s)
        }
        c if c < 0 => dur_to_ts(cpu_clock(ctx, c)?),
        c => hostsys::clock_gettime(c)?,
    };
    ctx.mem().write(tp, &ts)?;
    Ok(0)
}

pub fn sys_clock_getres(ctx: &mut Ctx, clock: i32, UserPtr(tp): UserPtr) -> SysResult {
    let ts = if clock < 0 {
        // Linux's posix_cpu_clock_getres: a nanosecond for the run time
        // (SCHED), a tick for the sampled user and system time.
        cpu_clock(ctx, clock)?;
        if clock & 3 == CPUCLOCK_SCHED {
            libc::timespec { tv_sec: 0, tv_nsec: 1 }
        } else {
            hostsys::clock_getres(!0 << 3)? // nomu's own process's PROF clock: the host's tick
        }
    } else {
        hostsys::clock_getres(clock)?
    };
    if tp != 0 {
        ctx.mem().write(tp, &ts)?;
    }
    Ok(0)
}

/// A negative clock id whose low three bits are these names a descriptor
/// (`(~fd << 3) | 3`: PTP devices), not a CPU clock.
const CLOCKFD: i32 = 3;

// Which time a CPU clock reads (its low two bits): 0 PROF (user and
// system), 1 VIRT (user), 2 SCHED (run time: nomu's user and system).
const CPUCLOCK_VIRT: i32 = 1;
const CPUCLOCK_SCHED: i32 = 2;

/// A CPU clock named by a process or thread id (clock_getcpuclockid,
/// pthread_getcpuclockid: `(~id << 3) | perthread | which`), read as
/// Linux's posix_cpu_clock_get does. The guest's ids, never the host's
/// (passed through, the host read a host process's clock).
fn cpu_clock(ctx: &Ctx, clock: i32) -> Result<Duration, Errno> {
    let c = cpu_clock_of(ctx, clock, true)?.ok_or(Errno::EINVAL)?;
    c.now(ctx.kernel(), ctx.process()).ok_or(Errno::EINVAL)
}

/// The CPU-time clock `clock` names (None: not a CPU clock), as Linux's
/// pid_for_clock finds it: id 0 is the caller's thread or process; a
/// thread's clock only from its own process; a process's by its pid, or
/// for reading (`gettime`) by the caller's own thread id too. EINVAL for
/// any other, and for descriptor clocks (`& 7 == 3`, PTP devices: not
/// provided).
fn cpu_clock_of(ctx: &Ctx, clock: i32, gettime: bool) -> Result<Option<CpuClock>, Errno> {
    let (id, thread, which) = match clock {
        libc::CLOCK_PROCESS_CPUTIME_ID => (0, false, CPUCLOCK_SCHED),
        libc::CLOCK_THREAD_CPUTIME_ID => (0, true, CPUCLOCK_SCHED),
        c if c < 0 => (!(c >> 3) as u32, c & 4 != 0, c & 3),
        _ => return Ok(None),
    };
    if which == 3 {
        return Err(Errno::EINVAL);
    }
    let p = ctx.process();
    let own_tid = ctx.t.thread.tid();
    let id = match (id, thread) {
        (0, true) => own_tid,
        (0, false) => p.pid,
        (id, true) if p.threads.lock().unwrap().iter().any(|t| t.tid() == id) => id,
        (id, false) if id == p.pid || (gettime && id == own_tid) => p.pid,
        (id, false) if ctx.kernel().tasks.process(id).is_some() => id,
        _ => return Err(Errno::EINVAL),
    };
    Ok(Some(CpuClock { id, thread, user_only: which == CPUCLOCK_VIRT }))
}

/// The host's clock is never a guest's to set: after Linux's own checks,
/// EPERM, as for a process without CAP_SYS_TIME (a root guest too).
const CLOCK_NOT_GUESTS: Errno = Errno::EPERM;

/// clock_settime: Linux's clock_set of each clock. CLOCK_REALTIME's reads
/// and judges the time (do_sys_settimeofday64) before the permission; a
/// process's or thread's CPU clock is never settable (EPERM once the time
/// is read); the others have no clock_set (EINVAL before anything is read).
pub fn sys_clock_settime(ctx: &mut Ctx, clock: i32, UserPtr(tp): UserPtr) -> SysResult {
    match clock {
        libc::CLOCK_REALTIME => {
            read_timespec(ctx, tp)?;
            Err(CLOCK_NOT_GUESTS)
        }
        // A CPU clock named by its process or thread (clock_posix_cpu):
        // posix_cpu_clock_set, "you can never reset a CPU clock" (EPERM;
        // EINVAL for a clock of no thread or process nomu knows). The
        // CLOCK_*_CPUTIME_ID names have no clock_set (EINVAL).
        c if c < 0 && c & 7 != CLOCKFD => {
            ctx.mem().read::<libc::timespec>(tp)?;
            Err(cpu_clock(ctx, c).map_or(Errno::EINVAL, |_| Errno::EPERM))
        }
        _ => Err(Errno::EINVAL),
    }
}

/// settimeofday: the time read and judged (a microsecond count of exactly
/// 1000000 passes the first check, not the second), the time zone read,
/// then the permission.
pub fn sys_settimeofday(ctx: &mut Ctx, UserPtr(tvp): UserPtr, UserPtr(tzp): UserPtr) -> SysResult {
    let tv: Option<libc::timeval> = if tvp != 0 { Some(ctx.mem().read(tvp)?) } else { None };
    if tv.is_some_and(|tv| !(0..=1_000_000).contains(&tv.tv_usec)) {
        return Err(Errno::EINVAL);
    }
    if tzp != 0 {
        ctx.mem().read::<[i32; 2]>(tzp)?;
    }
    // do_sys_settimeofday64: timespec64_valid_settod, then the permission.
    if tv.is_some_and(|tv| tv.tv_sec < 0 || tv.tv_usec == 1_000_000) {
        return Err(Errno::EINVAL);
    }
    Err(CLOCK_NOT_GUESTS)
}

pub fn sys_gettimeofday(ctx: &mut Ctx, UserPtr(tvp): UserPtr, UserPtr(tzp): UserPtr) -> SysResult {
    let ts = hostsys::clock_gettime(libc::CLOCK_REALTIME)?;
    if tvp != 0 {
        let tv = libc::timeval { tv_sec: ts.tv_sec, tv_usec: ts.tv_nsec / 1000 };
        ctx.mem().write(tvp, &tv)?;
    }
    if tzp != 0 {
        ctx.mem().write(tzp, &[0i32; 2])?; // struct timezone: UTC
    }
    Ok(0)
}

pub fn sys_time(ctx: &mut Ctx, UserPtr(tloc): UserPtr) -> SysResult {
    let now = hostsys::clock_gettime(libc::CLOCK_REALTIME)?.tv_sec;
    if tloc != 0 {
        ctx.mem().write(tloc, &now)?;
    }
    Ok(now as u64)
}

pub fn ts_add(a: libc::timespec, b: libc::timespec) -> libc::timespec {
    let mut ns = a.tv_nsec + b.tv_nsec;
    let mut s = a.tv_sec.saturating_add(b.tv_sec);
    if ns >= 1_000_000_000 {
        ns -= 1_000_000_000;
        s = s.saturating_add(1);
    }
    libc::timespec { tv_sec: s, tv_nsec: ns }
}

/// a - b, or zero when b is later.
pub fn ts_sub(a: libc::timespec, b: libc::timespec) -> libc::timespec {
    let ns =
        (a.tv_sec as i128 * 1_000_000_000 + a.tv_nsec as i128) - (b.tv_sec as i128 * 1_000_000_000 + b.tv_nsec as i128);
    let ns = ns.max(0);
    libc::timespec { tv_sec: (ns / 1_000_000_000) as i64, tv_nsec: (ns % 1_000_000_000) as i64 }
}

/// The Instant at which `clock` reads `abs` (an absolute time on it).
pub fn instant_of(clock: i32, abs: &libc::timespec) -> Result<Instant, Errno> {
    let now = hostsys::clock_gettime(clock)?;
    let left = ts_sub(*abs, now);
    Ok(Instant::now() + Duration::new(left.tv_sec as u64, left.tv_nsec as u32))
}

pub fn ts_le(a: &libc::timespec, b: &libc::timespec) -> bool {
    (a.tv_sec, a.tv_nsec) <= (b.tv_sec, b.tv_nsec)
}

/// Sleeps until the deadline; a signal interrupts it: EINTR, with the time
/// left written to `rem` for a relative sleep.
fn sleep(ctx: &Ctx, clock: i32, flags: i32, req: &libc::timespec, rem: u64) -> SysResult {
    let absolute = flags & libc::TIMER_ABSTIME != 0;
    let deadline = if absolute { *req } else { ts_add(hostsys::clock_gettime(clock)?, *req) };
    match ctx.t.block_in_host(|| hostsys::sleep_until(clock, &deadline)) {
        Ok(()) => Ok(0),
        Err(Errno::ERESTARTSYS) => {
            if !absolute && rem != 0 {
                let now = hostsys::clock_gettime(clock)?;
                let left = if ts_le(&deadline, &now) {
                    libc::timespec { tv_sec: 0, tv_nsec: 0 }
                } else {
                    ts_sub(deadline, now)
                };
                ctx.mem().write(rem, &left)?;
            }
            Err(Errno::EINTR)
        }
        Err(e) => Err(e),
    }
}

pub fn sys_nanosleep(ctx: &mut Ctx, UserPtr(rqtp): UserPtr, UserPtr(rmtp): UserPtr) -> SysResult {
    let req = read_timespec(ctx, rqtp)?;
    sleep(ctx, libc::CLOCK_MONOTONIC, 0, &req, rmtp)
}

pub fn sys_clock_nanosleep(
    ctx: &mut Ctx,
    clock: i32,
    flags: i32,
    UserPtr(rqtp): UserPtr,
    UserPtr(rmtp): UserPtr,
) -> SysResult {
    match clock {
        libc::CLOCK_REALTIME | libc::CLOCK_MONOTONIC | libc::CLOCK_BOOTTIME | libc::CLOCK_TAI => {}
        // Linux's clock_thread and descriptor clocks have no nsleep; the
        // alarm clocks none without a real-time clock device (timer_create).
        libc::CLOCK_THREAD_CPUTIME_ID | libc::CLOCK_REALTIME_ALARM | libc::CLOCK_BOOTTIME_ALARM => {
            return Err(Errno::ENOTSUP)
        }
        c if c < 0 && c & 7 == CLOCKFD => return Err(Errno::ENOTSUP),
        // A process's CPU clock, or another thread's (posix_cpu_nsleep):
        // the request is read and judged first.
        c if c == libc::CLOCK_PROCESS_CPUTIME_ID || c < 0 => {
            let req = read_timespec(ctx, rqtp)?;
            // Not on the caller's own thread's clock (it would never run).
            let id = !(c >> 3) as u32;
            if c < 0 && c & 4 != 0 && (id == 0 || id == ctx.t.thread.tid()) {
                return Err(Errno::EINVAL);
            }
            let cpu = cpu_clock_of(ctx, c, false)?.ok_or(Errno::EINVAL)?;
            return cpu_sleep(ctx, cpu, flags & libc::TIMER_ABSTIME != 0, &req, rmtp);
        }
        _ => return Err(Errno::EINVAL),
    }
    let req = read_timespec(ctx, rqtp)?;
    sleep(ctx, clock, flags & libc::TIMER_ABSTIME, &req, rmtp)
}

/// Sleeps until CPU clock `cpu` reads `req` (`absolute`) or has gone `req`
/// on; a signal interrupts it (EINTR, the CPU time left written to `rem`
/// for a relative sleep). nomu has no tick to wake it: it looks at the
/// clock when the deadline could be reached at the earliest, as the timer
/// thread does for CPU-time timers. A clock whose thread or process ends
/// ends the sleep.
fn cpu_sleep(ctx: &Ctx, cpu: CpuClock, absolute: bool, req: &libc::timespec, rem: u64) -> SysResult {
    let (kernel, p) = (ctx.kernel(), ctx.process());
    let Some(start) = cpu.now(kernel, p) else { return Ok(0) };
    let deadline = if absolute { ts_to_dur(req) } else { start + ts_to_dur(req) };
    loop {
        let Some(now) = cpu.now(kernel, p) else { return Ok(0) };
        if now >= deadline {
            return Ok(0);
        }
        let wait = crate::kernel::timer::cpu_look_interval(deadline - now);
        let until = ts_add(hostsys::clock_gettime(libc::CLOCK_MONOTONIC)?, dur_to_ts(wait));
        match ctx.t.block_in_host(|| hostsys::sleep_until(libc::CLOCK_MONOTONIC, &until)) {
            Ok(()) => {}
            Err(Errno::ERESTARTSYS) => {
                if !absolute && rem != 0 {
                    let left = cpu.now(kernel, p).map_or(Duration::ZERO, |n| deadline.saturating_sub(n));
                    ctx.mem().write(rem, &dur_to_ts(left))?;
                }
                return Err(Errno::EINTR);
            }
            Err(e) => return Err(e),
        }
    }
}

const ITIMER_REAL: i32 = 0;
const ITIMER_VIRTUAL: i32 = 1;
const ITIMER_PROF: i32 = 2;

fn tv_to_dur(tv: &libc::timeval) -> Result<Duration, Errno> {
    if tv.tv_sec < 0 || !(0..1_000_000).contains(&tv.tv_usec) {
        return Err(Errno::EINVAL);
    }
    Ok(Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000))
}

/// The current setting as `struct itimerval` (interval, time left).
fn itimer_value(t: &RealTimer) -> [libc::timeval; 2] {
    let left = t.deadline.map_or(Duration::ZERO, |d| d.saturating_duration_since(Instant::now()));
    // A timer about to fire still reads as running, as on Linux.
    let left = if t.deadline.is_some() && left.is_zero() { Duration::from_micros(1) } else { left };
    [duration_timeval(t.interval), duration_timeval(left)]
}

/// ITIMER_VIRTUAL's or ITIMER_PROF's setting as `struct itimerval`.
fn cpu_itimer_value(ctx: &Ctx, virt: bool) -> [libc::timeval; 2] {
    let p = ctx.process();
    let (user, system) = p.cpu_time();
    let timers = p.cpu_timers.lock().unwrap();
    let (interval, left) = if virt { timers.virt.setting(user) } else { timers.prof.setting(user + system) };
    [duration_timeval(interval), duration_timeval(left)]
}

pub fn sys_getitimer(ctx: &mut Ctx, which: i32, UserPtr(value): UserPtr) -> SysResult {
    let v = match which {
        ITIMER_REAL => itimer_value(&ctx.process().real_timer.lock().unwrap()),
        ITIMER_VIRTUAL | ITIMER_PROF => cpu_itimer_value(ctx, which == ITIMER_VIRTUAL),
        _ => return Err(Errno::EINVAL),
    };
    ctx.mem().write(value, &v)?;
    Ok(0)
}

pub fn sys_setitimer(ctx: &mut Ctx, which: i32, UserPtr(value): UserPtr, UserPtr(ovalue): UserPtr) -> SysResult {
    // Linux reads and judges the new value before `which` (do_setitimer).
    let new = if value != 0 { Some(ctx.mem().read::<[libc::timeval; 2]>(value)?) } else { None };
    let (interval, value) = match &new {
        Some(v) => (tv_to_dur(&v[0])?, tv_to_dur(&v[1])?),
        None => (Duration::ZERO, Duration::ZERO),
    };
    let p = ctx.process().clone();
    let old = match which {
        ITIMER_REAL => {
            let deadline = (!value.is_zero()).then(|| Instant::now() + value);
            itimer_value(&ctx.kernel().timers.set(&p.real_timer, p.pid, deadline, interval))
        }
        ITIMER_VIRTUAL | ITIMER_PROF => {
            let (interval, left) = ctx.kernel().timers.set_cpu(&p, which == ITIMER_VIRTUAL, value, interval);
            [duration_timeval(interval), duration_timeval(left)]
        }
        _ => return Err(Errno::EINVAL),
    };
    if ovalue != 0 {
        ctx.mem().write(ovalue, &old)?;
    }
    Ok(0)
}

pub fn sys_alarm(ctx: &mut Ctx, secs: u32) -> SysResult {
    let deadline = (secs != 0).then(|| Instant::now() + Duration::from_secs(secs as u64));
    let p = ctx.process().clone();
    let old = ctx.kernel().timers.set(&p.real_timer, p.pid, deadline, Duration::ZERO);
    // Seconds left of the old alarm, rounded to nearest (at least 1 if armed).
    Ok(old.deadline.map_or(0, |d| {
        let left = d.saturating_duration_since(Instant::now());
        (left.as_secs() + u64::from(left.subsec_millis() >= 500)).max(1)
    }))
}

fn usage_times(ctx: &Ctx, who: i32) -> Result<(Duration, Duration), Errno> {
    match who {
        libc::RUSAGE_SELF => Ok(ctx.process().cpu_time()),
        libc::RUSAGE_THREAD => Ok(ctx.t.thread.cpu_time()),
        libc::RUSAGE_CHILDREN => Ok(*ctx.process().children_usage.lock().unwrap()),
        _ => Err(Errno::EINVAL),
    }
}

pub fn sys_getrusage(ctx: &mut Ctx, who: i32, UserPtr(ru): UserPtr) -> SysResult {
    let (u, s) = usage_times(ctx, who)?;
    let mut r = if who == libc::RUSAGE_CHILDREN { crate::host::pod::zeroed() } else { ctx.t.thread.rusage() };
    r.ru_utime = duration_timeval(u);
    r.ru_stime = duration_timeval(s);
    ctx.mem().write(ru, &r)?;
    Ok(0)
}

pub fn sys_times(ctx: &mut Ctx, UserPtr(tbuf): UserPtr) -> SysResult {
    let ticks = |d: Duration| (d.as_millis() / 10) as i64; // USER_HZ = 100
    let (u, s) = usage_times(ctx, libc::RUSAGE_SELF)?;
    let (cu, cs) = usage_times(ctx, libc::RUSAGE_CHILDREN)?;
    if tbuf != 0 {
        let tms = libc::tms { tms_utime: ticks(u), tms_stime: ticks(s), tms_cutime: ticks(cu), tms_cstime: ticks(cs) };
        ctx.mem().write(tbuf, &tms)?;
    }
    Ok(ticks(ctx.kernel().boot_time.elapsed()) as u64)
}

const SIGEV_SIGNAL: i32 = 0;
const SIGEV_NONE: i32 = 1;
const SIGEV_THREAD: i32 = 2;
const SIGEV_THREAD_ID: i32 = 4;

/// timer_create: the clocks nomu's timer thread can keep (not the CPU-time
/// clocks, which it cannot measure for another thread); the notification
/// checked as Linux's good_sigevent. The timer starts disarmed.
pub fn sys_timer_create(ctx: &mut Ctx, clock: i32, UserPtr(sevp): UserPtr, UserPtr(idp): UserPtr) -> SysResult {
    use crate::kernel::timer::Notify;
    // Linux's order (timer_create, do_timer_create): the sigevent is
    // copied, the clock judged, the timer allocated, then the sigevent
    // judged. struct sigevent: sigev_value, sigev_signo, sigev_notify,
    // then the thread id of SIGEV_THREAD_ID.
    let event = if sevp != 0 {
        let e: [u8; 64] = ctx.mem().read(sevp)?;
        let i32_at = |off: usize| i32::from_le_bytes(e[off..off + 4].try_into().unwrap());
        Some((u64::from_le_bytes(e[0..8].try_into().unwrap()), i32_at(8), i32_at(12), i32_at(16)))
    } else {
        None
    };
    match clock {
        libc::CLOCK_REALTIME | libc::CLOCK_MONOTONIC | libc::CLOCK_BOOTTIME | libc::CLOCK_TAI => {}
        // Clocks Linux knows but keeps no timers on, and the alarm clocks,
        // which need a real-time clock device to wake the machine: none
        // for guests, so as on a Linux without one.
        libc::CLOCK_MONOTONIC_RAW
        | libc::CLOCK_REALTIME_COARSE
        | libc::CLOCK_MONOTONIC_COARSE
        | libc::CLOCK_REALTIME_ALARM
        | libc::CLOCK_BOOTTIME_ALARM => return Err(Errno::EOPNOTSUPP),
        // Descriptor clocks (PTP devices, not provided) keep no timers.
        c if c < 0 && c & 7 == CLOCKFD => return Err(Errno::EOPNOTSUPP),
        // CPU-time clocks; which thread or process is judged last.
        c if c == libc::CLOCK_PROCESS_CPUTIME_ID || c == libc::CLOCK_THREAD_CPUTIME_ID || c < 0 => {}
        _ => return Err(Errno::EINVAL),
    }
    let p = ctx.process().clone();
    // Each timer's signal is preallocated against RLIMIT_SIGPENDING, on
    // Linux counted per user with the signals pending; here per process.
    if p.posix_timers.lock().unwrap().len() as u64 >= p.rlimit(libc::RLIMIT_SIGPENDING).rlim_cur {
        return Err(Errno::EAGAIN);
    }
    let notify = match event {
        None => None,
        Some((_, _, SIGEV_NONE, _)) => Some(Notify::None),
        Some((value, signo, how @ (SIGEV_SIGNAL | SIGEV_THREAD | SIGEV_THREAD_ID), tid)) => {
            let thread = if how == SIGEV_THREAD_ID {
                let same_group = p.threads.lock().unwrap().iter().any(|t| t.tid() == tid as u32);
                if !same_group {
                    return Err(Errno::EINVAL);
                }
                Some(tid as u32)
            } else {
                None
            };
            if !(1..=64).contains(&signo) {
                return Err(Errno::EINVAL);
            }
            Some(Notify::Signal { signo, value, thread })
        }
        Some(_) => return Err(Errno::EINVAL),
    };
    // Linux's posix_cpu_timer_create finds the clock's thread or process.
    let cpu = cpu_clock_of(ctx, clock, false)?;
    let id = p.posix_timers.lock().unwrap().create(clock, cpu, |id| {
        // No sigevent: SIGALRM to the process, with the timer's id as value.
        notify.unwrap_or(Notify::Signal { signo: libc::SIGALRM, value: id as u64, thread: None })
    });
    if let Err(e) = ctx.mem().write(idp, &id) {
        p.posix_timers.lock().unwrap().delete(id);
        return Err(e);
    }
    Ok(0)
}

fn ts_to_dur(ts: &libc::timespec) -> Duration {
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn dur_to_ts(d: Duration) -> libc::timespec {
    libc::timespec { tv_sec: d.as_secs().min(i64::MAX as u64) as i64, tv_nsec: d.subsec_nanos() as i64 }
}

/// A timer's setting as `struct itimerspec` (interval, time left), where
/// it is `now` on its time line: an armed timer whose expiry is being
/// handled reads as 1 ns left.
fn itimerspec(deadline: Option<Duration>, interval: Duration, now: Duration) -> [libc::timespec; 2] {
    let left = match deadline {
        None => Duration::ZERO,
        Some(d) => d.saturating_sub(now).max(Duration::from_nanos(1)),
    };
    [dur_to_ts(interval), dur_to_ts(left)]
}

pub fn sys_timer_settime(
    ctx: &mut Ctx,
    id: i32,
    flags: i32,
    UserPtr(new): UserPtr,
    UserPtr(old): UserPtr,
) -> SysResult {
    if new == 0 {
        return Err(Errno::EINVAL);
    }
    let spec: [libc::timespec; 2] = ctx.mem().read(new)?;
    let p = ctx.process().clone();
    let (clock, cpu) = p.posix_timers.lock().unwrap().get(id).map(|t| (t.clock, t.cpu)).ok_or(Errno::EINVAL)?;
    let valid = |t: &libc::timespec| t.tv_sec >= 0 && (0..1_000_000_000).contains(&t.tv_nsec);
    if !valid(&spec[0]) || !valid(&spec[1]) {
        return Err(Errno::EINVAL);
    }
    let [interval, value] = spec;
    // Now on the timer's time line; a CPU clock's thread or process gone:
    // ESRCH (posix_cpu_timer_set).
    let now = match cpu {
        Some(c) => c.now(ctx.kernel(), &p).ok_or(Errno::ESRCH)?,
        None => wall_now(),
    };
    let deadline = if value.tv_sec == 0 && value.tv_nsec == 0 {
        None
    } else if flags & libc::TIMER_ABSTIME != 0 {
        Some(if cpu.is_some() { ts_to_dur(&value) } else { wall_time(instant_of(clock, &value)?) })
    } else {
        Some(now + ts_to_dur(&value))
    };
    let (old_deadline, old_interval) = ctx.kernel().timers.set_posix(&p, id, deadline, ts_to_dur(&interval), now)?;
    if old != 0 {
        ctx.mem().write(old, &itimerspec(old_deadline, old_interval, now))?;
    }
    Ok(0)
}

pub fn sys_timer_gettime(ctx: &mut Ctx, id: i32, UserPtr(cur): UserPtr) -> SysResult {
    let p = ctx.process();
    let cpu = p.posix_timers.lock().unwrap().get(id).map(|t| t.cpu).ok_or(Errno::EINVAL)?;
    // A CPU clock's thread or process gone: nothing left to run.
    let now = cpu.map_or(Some(wall_now()), |c| c.now(ctx.kernel(), p));
    let spec = {
        let timers = p.posix_timers.lock().unwrap();
        let t = timers.get(id).ok_or(Errno::EINVAL)?;
        match now {
            Some(now) => itimerspec(t.deadline, t.interval, now),
            None => itimerspec(None, t.interval, Duration::ZERO),
        }
    };
    ctx.mem().write(cur, &spec)?;
    Ok(0)
}

/// The overruns of the timer's last signal taken.
pub fn sys_timer_getoverrun(ctx: &mut Ctx, id: i32) -> SysResult {
    let timers = ctx.process().posix_timers.lock().unwrap();
    Ok(timers.get(id).ok_or(Errno::EINVAL)?.overrun_last as u64)
}

pub fn sys_timer_delete(ctx: &mut Ctx, id: i32) -> SysResult {
    if ctx.process().posix_timers.lock().unwrap().delete(id) {
        Ok(0)
    } else {
        Err(Errno::EINVAL)
    }
}
