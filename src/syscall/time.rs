//! Clocks and sleeping (no vDSO is given to guests, so these all trap).

use super::{int, Args, Ctx, SysResult};
use crate::host::sys as hostsys;
use crate::kernel::errno::Errno;

fn read_timespec(ctx: &Ctx, ptr: u64) -> Result<libc::timespec, Errno> {
    let ts: libc::timespec = ctx.mem().read(ptr)?;
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(Errno::EINVAL);
    }
    Ok(ts)
}

pub fn sys_clock_gettime(ctx: &mut Ctx, a: &Args) -> SysResult {
    let ts = hostsys::clock_gettime(int(a[0]))?;
    ctx.mem().write(a[1], &ts)?;
    Ok(0)
}

pub fn sys_clock_getres(ctx: &mut Ctx, a: &Args) -> SysResult {
    let ts = hostsys::clock_getres(int(a[0]))?;
    if a[1] != 0 {
        ctx.mem().write(a[1], &ts)?;
    }
    Ok(0)
}

pub fn sys_gettimeofday(ctx: &mut Ctx, a: &Args) -> SysResult {
    let ts = hostsys::clock_gettime(libc::CLOCK_REALTIME)?;
    if a[0] != 0 {
        let tv = libc::timeval { tv_sec: ts.tv_sec, tv_usec: ts.tv_nsec / 1000 };
        ctx.mem().write(a[0], &tv)?;
    }
    if a[1] != 0 {
        ctx.mem().write(a[1], &[0i32; 2])?; // struct timezone: UTC
    }
    Ok(0)
}

pub fn sys_time(ctx: &mut Ctx, a: &Args) -> SysResult {
    let now = hostsys::clock_gettime(libc::CLOCK_REALTIME)?.tv_sec;
    if a[0] != 0 {
        ctx.mem().write(a[0], &now)?;
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

pub fn ts_le(a: &libc::timespec, b: &libc::timespec) -> bool {
    (a.tv_sec, a.tv_nsec) <= (b.tv_sec, b.tv_nsec)
}

/// Sleeps until the deadline in slices, so a signal interrupts it: EINTR,
/// with the time left written to `rem` for a relative sleep.
fn sleep(ctx: &Ctx, clock: i32, flags: i32, req: &libc::timespec, rem: u64) -> SysResult {
    let absolute = flags & libc::TIMER_ABSTIME != 0;
    let deadline = if absolute { *req } else { ts_add(hostsys::clock_gettime(clock)?, *req) };
    let slice = libc::timespec { tv_sec: 0, tv_nsec: crate::kernel::trap::WAIT_SLICE.as_nanos() as i64 };
    loop {
        let now = hostsys::clock_gettime(clock)?;
        if ts_le(&deadline, &now) {
            return Ok(0);
        }
        if ctx.t.signal_pending() {
            if !absolute && rem != 0 {
                ctx.mem().write(rem, &ts_sub(deadline, now))?;
            }
            return Err(Errno::EINTR);
        }
        let next = ts_add(now, slice);
        hostsys::sleep_until(clock, if ts_le(&next, &deadline) { &next } else { &deadline });
    }
}

pub fn sys_nanosleep(ctx: &mut Ctx, a: &Args) -> SysResult {
    let req = read_timespec(ctx, a[0])?;
    sleep(ctx, libc::CLOCK_MONOTONIC, 0, &req, a[1])
}

pub fn sys_clock_nanosleep(ctx: &mut Ctx, a: &Args) -> SysResult {
    let (clock, flags) = (int(a[0]), int(a[1]));
    match clock {
        libc::CLOCK_REALTIME | libc::CLOCK_MONOTONIC | libc::CLOCK_BOOTTIME | libc::CLOCK_TAI => {}
        libc::CLOCK_PROCESS_CPUTIME_ID => return Err(Errno::ENOTSUP),
        libc::CLOCK_THREAD_CPUTIME_ID => return Err(Errno::EINVAL),
        _ => return Err(Errno::EINVAL),
    }
    let req = read_timespec(ctx, a[2])?;
    sleep(ctx, clock, flags & libc::TIMER_ABSTIME, &req, a[3])
}
