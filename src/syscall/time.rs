//! Clocks and sleeping (no vDSO is given to guests, so these all trap).

use super::args::UserPtr;
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::host::sys as hostsys;
use crate::kernel::timer::RealTimer;
use std::time::{Duration, Instant};

fn read_timespec(ctx: &Ctx, ptr: u64) -> Result<libc::timespec, Errno> {
    let ts: libc::timespec = ctx.mem().read(ptr)?;
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(Errno::EINVAL);
    }
    Ok(ts)
}

pub fn sys_clock_gettime(ctx: &mut Ctx, clock: i32, UserPtr(tp): UserPtr) -> SysResult {
    let ts = hostsys::clock_gettime(clock)?;
    ctx.mem().write(tp, &ts)?;
    Ok(0)
}

pub fn sys_clock_getres(ctx: &mut Ctx, clock: i32, UserPtr(tp): UserPtr) -> SysResult {
    let ts = hostsys::clock_getres(clock)?;
    if tp != 0 {
        ctx.mem().write(tp, &ts)?;
    }
    Ok(0)
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
        // No sleeping on the thread's CPU time; on the process's, nomu
        // cannot, but reads and judges the request first, as Linux does.
        libc::CLOCK_PROCESS_CPUTIME_ID => {
            read_timespec(ctx, rqtp)?;
            return Err(Errno::ENOTSUP);
        }
        libc::CLOCK_THREAD_CPUTIME_ID => return Err(Errno::ENOTSUP),
        _ => return Err(Errno::EINVAL),
    }
    let req = read_timespec(ctx, rqtp)?;
    sleep(ctx, clock, flags & libc::TIMER_ABSTIME, &req, rmtp)
}

const ITIMER_REAL: i32 = 0;

fn tv_to_dur(tv: &libc::timeval) -> Result<Duration, Errno> {
    if tv.tv_sec < 0 || !(0..1_000_000).contains(&tv.tv_usec) {
        return Err(Errno::EINVAL);
    }
    Ok(Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000))
}

fn dur_to_tv(d: Duration) -> libc::timeval {
    libc::timeval { tv_sec: d.as_secs() as i64, tv_usec: d.subsec_micros() as i64 }
}

/// The current setting as `struct itimerval` (interval, time left).
fn itimer_value(t: &RealTimer) -> [libc::timeval; 2] {
    let left = t.deadline.map_or(Duration::ZERO, |d| d.saturating_duration_since(Instant::now()));
    // A timer about to fire still reads as running, as on Linux.
    let left = if t.deadline.is_some() && left.is_zero() { Duration::from_micros(1) } else { left };
    [dur_to_tv(t.interval), dur_to_tv(left)]
}

pub fn sys_getitimer(ctx: &mut Ctx, which: i32, UserPtr(value): UserPtr) -> SysResult {
    if which != ITIMER_REAL {
        return Err(Errno::EINVAL);
    }
    let t = *ctx.process().real_timer.lock().unwrap();
    ctx.mem().write(value, &itimer_value(&t))?;
    Ok(0)
}

pub fn sys_setitimer(ctx: &mut Ctx, which: i32, UserPtr(value): UserPtr, UserPtr(ovalue): UserPtr) -> SysResult {
    // Linux reads and judges the new value before `which` (do_setitimer).
    let new = if value != 0 { Some(ctx.mem().read::<[libc::timeval; 2]>(value)?) } else { None };
    let (interval, value) = match &new {
        Some(v) => (tv_to_dur(&v[0])?, tv_to_dur(&v[1])?),
        None => (Duration::ZERO, Duration::ZERO),
    };
    if which != ITIMER_REAL {
        return Err(Errno::EINVAL);
    }
    let deadline = (!value.is_zero()).then(|| Instant::now() + value);
    let p = ctx.process().clone();
    let old = ctx.kernel().timers.set(&p.real_timer, p.pid, deadline, interval);
    if ovalue != 0 {
        ctx.mem().write(ovalue, &itimer_value(&old))?;
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
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    match who {
        libc::RUSAGE_SELF | libc::RUSAGE_THREAD => {
            let r = ctx.t.thread.rusage();
            Ok((tv(r.ru_utime), tv(r.ru_stime)))
        }
        libc::RUSAGE_CHILDREN => Ok(*ctx.process().children_usage.lock().unwrap()),
        _ => Err(Errno::EINVAL),
    }
}

pub fn sys_getrusage(ctx: &mut Ctx, who: i32, UserPtr(ru): UserPtr) -> SysResult {
    let (u, s) = usage_times(ctx, who)?;
    let mut r = if who == libc::RUSAGE_CHILDREN { crate::host::pod::zeroed() } else { ctx.t.thread.rusage() };
    r.ru_utime = dur_to_tv(u);
    r.ru_stime = dur_to_tv(s);
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
