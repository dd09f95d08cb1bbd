//! System information, resource limits, randomness.

use super::args::{Hex, UserPtr};
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::host::sys as hostsys;
use crate::kernel::cred::CAP_SYS_RESOURCE;
use crate::kernel::process::{Process, RLIM_NLIMITS};
use std::sync::Arc;

pub fn sys_uname(ctx: &mut Ctx, UserPtr(name): UserPtr) -> SysResult {
    ctx.mem().write(name, &ctx.kernel().uname())?;
    Ok(0)
}

/// Linux's sethostname/setdomainname: CAP_SYS_ADMIN first, then the length
/// (at most __NEW_UTS_LEN, 64), then the name is read. The name is nomu's
/// (every guest's uname and /proc/sys/kernel/hostname), never the host's.
fn set_uts_name(ctx: &Ctx, which: crate::kernel::UtsName, name: u64, len: i32) -> SysResult {
    if !ctx.cred().capable(crate::kernel::cred::CAP_SYS_ADMIN) {
        return Err(Errno::EPERM);
    }
    if !(0..=64).contains(&len) {
        return Err(Errno::EINVAL);
    }
    let mut buf = vec![0u8; len as usize];
    ctx.mem().read_into(name, &mut buf)?;
    ctx.kernel().set_uts_name(which, buf);
    Ok(0)
}

pub fn sys_sethostname(ctx: &mut Ctx, UserPtr(name): UserPtr, len: i32) -> SysResult {
    set_uts_name(ctx, crate::kernel::UtsName::Host, name, len)
}

pub fn sys_setdomainname(ctx: &mut Ctx, UserPtr(name): UserPtr, len: i32) -> SysResult {
    set_uts_name(ctx, crate::kernel::UtsName::Domain, name, len)
}

pub fn sys_sysinfo(ctx: &mut Ctx, UserPtr(info): UserPtr) -> SysResult {
    let mut si = hostsys::sysinfo();
    let phys = ctx.kernel().phys;
    si.uptime = ctx.kernel().boot_time.elapsed().as_secs() as i64;
    si.totalram = phys.total_bytes() as u64;
    si.freeram = phys.free_bytes() as u64;
    si.sharedram = 0;
    si.bufferram = 0;
    si.totalswap = 0;
    si.freeswap = 0;
    si.procs = 1;
    si.totalhigh = 0;
    si.freehigh = 0;
    si.mem_unit = 1;
    ctx.mem().write(info, &si)?;
    Ok(0)
}

const GRND_NONBLOCK: u32 = 1;
const GRND_RANDOM: u32 = 2;
const GRND_INSECURE: u32 = 4;

pub fn sys_getrandom(ctx: &mut Ctx, UserPtr(ubuf): UserPtr, len: usize, Hex(flags): Hex<u32>) -> SysResult {
    if flags & !(GRND_NONBLOCK | GRND_RANDOM | GRND_INSECURE) != 0
        || flags & (GRND_RANDOM | GRND_INSECURE) == GRND_RANDOM | GRND_INSECURE
    {
        return Err(Errno::EINVAL);
    }
    let len = len.min(i32::MAX as usize);
    let mut done = 0;
    let mut chunk = [0u8; 256];
    while done < len {
        let n = (len - done).min(chunk.len());
        let got = hostsys::getrandom(&mut chunk[..n], flags)?;
        if ctx.mem().write_bytes(ubuf + done as u64, &chunk[..got]).is_err() {
            return if done == 0 { Err(Errno::EFAULT) } else { Ok(done as u64) };
        }
        done += got;
    }
    Ok(done as u64)
}

/// The new limit the caller gave, read first: Linux reads it before it
/// finds the process or judges the resource (prlimit64, setrlimit).
fn read_limit(ctx: &Ctx, ptr: u64) -> Result<Option<libc::rlimit>, Errno> {
    Ok(if ptr != 0 { Some(ctx.mem().read(ptr)?) } else { None })
}

/// Reads and sets a limit of `target` (Linux's do_prlimit): raising a hard
/// limit takes CAP_SYS_RESOURCE.
fn do_prlimit(ctx: &Ctx, target: &Arc<Process>, resource: u32, new: Option<libc::rlimit>, old: u64) -> SysResult {
    if resource as usize >= RLIM_NLIMITS {
        return Err(Errno::EINVAL);
    }
    if let Some(r) = new {
        if r.rlim_cur > r.rlim_max {
            return Err(Errno::EINVAL);
        }
        if resource == libc::RLIMIT_NOFILE && r.rlim_max > 1 << 20 {
            return Err(Errno::EPERM); // above fs.nr_open
        }
    }
    let prev = {
        let mut limits = target.rlimits.lock().unwrap();
        let prev = limits[resource as usize];
        if let Some(r) = new {
            if r.rlim_max > prev.rlim_max && !ctx.t.thread.cred.lock().unwrap().capable(CAP_SYS_RESOURCE) {
                return Err(Errno::EPERM);
            }
            limits[resource as usize] = r;
        }
        prev
    };
    if new.is_some() && resource == libc::RLIMIT_CPU {
        ctx.kernel().timers.watch_cpu(target);
    }
    // The old limit is written once the new one is in place.
    if old != 0 {
        ctx.mem().write(old, &prev)?;
    }
    Ok(0)
}

pub fn sys_prlimit64(
    ctx: &mut Ctx,
    pid: i32,
    resource: u32,
    UserPtr(new_rlim): UserPtr,
    UserPtr(old_rlim): UserPtr,
) -> SysResult {
    let new = read_limit(ctx, new_rlim)?;
    let target = prlimit_target(ctx, pid)?;
    do_prlimit(ctx, &target, resource, new, old_rlim)
}

/// The process whose limits prlimit64 reads or sets: the caller's (pid 0),
/// or the one with thread `pid`, if the caller's real ids are all of its
/// ids or it has CAP_SYS_RESOURCE (Linux's check_prlimit_permission).
fn prlimit_target(ctx: &Ctx, pid: i32) -> Result<Arc<Process>, Errno> {
    if pid < 0 {
        return Err(Errno::ESRCH);
    }
    if pid == 0 || pid as u32 == ctx.tid() {
        return Ok(ctx.process().clone());
    }
    let target = ctx.kernel().find_thread(pid as u32).ok_or(Errno::ESRCH)?.process.clone();
    if Arc::ptr_eq(&target, ctx.process()) {
        return Ok(target);
    }
    let (me, them) = (ctx.t.thread.cred(), target.cred());
    let same_ids = [them.uid, them.euid, them.suid].iter().all(|&u| u == me.uid)
        && [them.gid, them.egid, them.sgid].iter().all(|&g| g == me.gid);
    if !same_ids && !me.capable(CAP_SYS_RESOURCE) {
        return Err(Errno::EPERM);
    }
    Ok(target)
}

pub fn sys_getrlimit(ctx: &mut Ctx, resource: u32, UserPtr(rlim): UserPtr) -> SysResult {
    do_prlimit(ctx, ctx.process(), resource, None, rlim)
}

pub fn sys_setrlimit(ctx: &mut Ctx, resource: u32, UserPtr(rlim): UserPtr) -> SysResult {
    let new = read_limit(ctx, rlim)?;
    do_prlimit(ctx, ctx.process(), resource, new, 0)
}
