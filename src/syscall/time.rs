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

/// Sleeps the whole time: host signals are nomu's, never the guest's, so
/// an interrupted host sleep simply continues (`rem` is only written on
/// EINTR, which the guest cannot get yet).
fn sleep(clock: i32, flags: i32, req: &libc::timespec) -> SysResult {
    let mut req = *req;
    loop {
        match hostsys::clock_nanosleep(clock, flags, &req) {
            Ok(()) => return Ok(0),
            Err((Errno::EINTR, left)) if flags & libc::TIMER_ABSTIME == 0 => req = left,
            Err((Errno::EINTR, _)) => {}
            Err((e, _)) => return Err(e),
        }
    }
}

pub fn sys_nanosleep(ctx: &mut Ctx, a: &Args) -> SysResult {
    let req = read_timespec(ctx, a[0])?;
    sleep(libc::CLOCK_MONOTONIC, 0, &req)
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
    sleep(clock, flags & libc::TIMER_ABSTIME, &req)
}
