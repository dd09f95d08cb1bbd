//! Scheduling: nice values, policies and priorities (recorded per guest
//! thread, not applied to the host), CPU affinity (applied to the host
//! thread that runs the guest thread), getcpu.

use super::args::UserPtr;
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::host::sys as hostsys;
use crate::kernel::process::Thread;
use crate::kernel::sched::{self as ksched, Asker, MAX_NICE, MIN_NICE};
use std::sync::Arc;

const PRIO_PROCESS: i32 = 0;
const PRIO_PGRP: i32 = 1;
const PRIO_USER: i32 = 2;

impl Ctx<'_, '_> {
    /// Linux's find_process_by_pid: 0 is the caller, else any thread by tid.
    fn sched_target(&self, pid: i32) -> Result<Arc<Thread>, Errno> {
        if pid == 0 || pid as u32 == self.tid() {
            return Ok(self.t.thread.clone());
        }
        self.kernel().find_thread(pid as u32).ok_or(Errno::ESRCH)
    }
}

/// Runs `f` with the caller's credentials as an [`Asker`] about `target`.
fn with_asker<T>(ctx: &Ctx, target: &Thread, f: impl FnOnce(&Asker) -> T) -> T {
    let cred = ctx.cred();
    let asker = Asker {
        cred: &cred,
        rlimit_nice: target.process.rlimit(libc::RLIMIT_NICE).rlim_cur,
        rlimit_rtprio: target.process.rlimit(libc::RLIMIT_RTPRIO).rlim_cur,
    };
    f(&asker)
}

pub fn sys_getpriority(ctx: &mut Ctx, which: i32, who: i32) -> SysResult {
    let threads = priority_targets(ctx, which, who)?;
    // 20 - nice, the highest of them (Linux's way to avoid negative results).
    let best = threads.iter().map(|t| ksched::nice_to_rlimit(t.sched.lock().unwrap().nice)).max();
    best.ok_or(Errno::ESRCH)
}

pub fn sys_setpriority(ctx: &mut Ctx, which: i32, who: i32, niceval: i32) -> SysResult {
    let threads = priority_targets(ctx, which, who)?;
    let nice = niceval.clamp(MIN_NICE, MAX_NICE);
    let mut result = Err(Errno::ESRCH);
    for t in threads {
        let target = t.cred();
        let r = with_asker(ctx, &t, |asker| t.sched.lock().unwrap().set_nice(nice, asker, &target));
        // set_one_prio: an error sticks; success only replaces "none found".
        result = match (result, r) {
            (_, Err(e)) => Err(e),
            (Err(Errno::ESRCH), Ok(())) => Ok(0),
            (prev, Ok(())) => prev,
        };
    }
    result
}

/// IOPRIO_WHO_PROCESS, _PGRP and _USER (1, 2, 3) as PRIO_PROCESS, _PGRP
/// and _USER (0, 1, 2).
fn ioprio_which(which: i32) -> Result<i32, Errno> {
    match which {
        1..=3 => Ok(which - 1),
        _ => Err(Errno::EINVAL),
    }
}

/// ioprio_set: the I/O priority of the threads `which` (a thread, a
/// process group, a user's) and `who` name; the first refusal ends it
/// (Linux's sys_ioprio_set).
pub fn sys_ioprio_set(ctx: &mut Ctx, which: i32, who: i32, ioprio: i32) -> SysResult {
    let cred = ctx.cred();
    let ioprio = ksched::check_ioprio(ioprio, &cred)?;
    let threads = priority_targets(ctx, ioprio_which(which)?, who)?;
    if threads.is_empty() {
        return Err(Errno::ESRCH);
    }
    for t in threads {
        if !ksched::may_set_ioprio(&cred, &t.cred()) {
            return Err(Errno::EPERM);
        }
        t.sched.lock().unwrap().ioprio = ioprio;
    }
    Ok(0)
}

/// ioprio_get: the I/O priority of the thread named, or the best (lowest
/// value) of the group's or user's threads.
pub fn sys_ioprio_get(ctx: &mut Ctx, which: i32, who: i32) -> SysResult {
    let threads = priority_targets(ctx, ioprio_which(which)?, who)?;
    let best = threads.iter().map(|t| t.sched.lock().unwrap().ioprio).min();
    best.map(u64::from).ok_or(Errno::ESRCH)
}

/// The threads a getpriority/setpriority (or ioprio) `which`/`who` names.
fn priority_targets(ctx: &Ctx, which: i32, who: i32) -> Result<Vec<Arc<Thread>>, Errno> {
    let tasks = &ctx.kernel().tasks;
    let threads_of = |p: &Arc<crate::kernel::process::Process>| p.threads.lock().unwrap().clone();
    match which {
        PRIO_PROCESS => Ok(ctx.sched_target(who).map(|t| vec![t]).unwrap_or_default()),
        PRIO_PGRP => {
            let me = ctx.process().pid;
            let pgid = if who == 0 { tasks.ids(me).map_or(me, |(g, _)| g) } else { who as u32 };
            Ok(tasks.group_members(pgid).iter().flat_map(threads_of).collect())
        }
        PRIO_USER => {
            let uid = if who == 0 { ctx.cred().uid } else { who as u32 };
            let all = tasks.all_live().iter().flat_map(threads_of).collect::<Vec<_>>();
            Ok(all.into_iter().filter(|t| t.cred.lock().unwrap().uid == uid).collect())
        }
        _ => Err(Errno::EINVAL),
    }
}

pub fn sys_sched_getscheduler(ctx: &mut Ctx, pid: i32) -> SysResult {
    if pid < 0 {
        return Err(Errno::EINVAL);
    }
    let t = ctx.sched_target(pid)?;
    let policy = t.sched.lock().unwrap().policy_word();
    Ok(policy as u64)
}

/// Linux's sched_rr_get_interval: the class's get_rr_interval. A fair
/// thread's is its slice, as the host gives it for nomu's own (fair) thread;
/// SCHED_RR's is sched_rr_timeslice (RR_TIMESLICE, 100 ms); SCHED_FIFO's
/// and SCHED_DEADLINE's 0.
pub fn sys_sched_rr_get_interval(ctx: &mut Ctx, pid: i32, UserPtr(interval): UserPtr) -> SysResult {
    if pid < 0 {
        return Err(Errno::EINVAL);
    }
    let t = ctx.sched_target(pid)?;
    let policy = t.sched.lock().unwrap().policy;
    let ts = match policy {
        ksched::SCHED_RR => libc::timespec { tv_sec: 0, tv_nsec: 100_000_000 },
        ksched::SCHED_FIFO | ksched::SCHED_DEADLINE => libc::timespec { tv_sec: 0, tv_nsec: 0 },
        _ => hostsys::sched_rr_get_interval()?,
    };
    ctx.mem().write(interval, &[ts.tv_sec, ts.tv_nsec])?;
    Ok(0)
}

pub fn sys_sched_getparam(ctx: &mut Ctx, pid: i32, UserPtr(param): UserPtr) -> SysResult {
    if param == 0 || pid < 0 {
        return Err(Errno::EINVAL);
    }
    let t = ctx.sched_target(pid)?;
    let priority = t.sched.lock().unwrap().param();
    ctx.mem().write(param, &priority)?;
    Ok(0)
}

fn set_scheduler(ctx: &Ctx, pid: i32, policy: Option<i32>, param: u64) -> SysResult {
    if param == 0 || pid < 0 {
        return Err(Errno::EINVAL);
    }
    let priority: i32 = ctx.mem().read(param)?;
    let t = ctx.sched_target(pid)?;
    let target = t.cred();
    with_asker(ctx, &t, |asker| t.sched.lock().unwrap().set_scheduler(policy, priority, asker, &target))?;
    Ok(0)
}

pub fn sys_sched_setscheduler(ctx: &mut Ctx, pid: i32, policy: i32, UserPtr(param): UserPtr) -> SysResult {
    if policy < 0 {
        return Err(Errno::EINVAL);
    }
    set_scheduler(ctx, pid, Some(policy), param)
}

pub fn sys_sched_setparam(ctx: &mut Ctx, pid: i32, UserPtr(param): UserPtr) -> SysResult {
    set_scheduler(ctx, pid, None, param)
}

pub fn sys_sched_get_priority_max(_: &mut Ctx, policy: i32) -> SysResult {
    ksched::priority_range(policy).map(|(_, max)| max as u64)
}

pub fn sys_sched_get_priority_min(_: &mut Ctx, policy: i32) -> SysResult {
    ksched::priority_range(policy).map(|(min, _)| min as u64)
}

/// A mask as long as the host's (cpumask_size()), nomu's CPUs.
fn full_mask_len() -> usize {
    hostsys::nomu_affinity().len()
}

pub fn sys_sched_getaffinity(ctx: &mut Ctx, pid: i32, len: u32, UserPtr(mask): UserPtr) -> SysResult {
    if len & 7 != 0 {
        return Err(Errno::EINVAL);
    }
    // The host judges the length as Linux does (too short for its CPUs:
    // EINVAL) and says how many bytes a mask has.
    let mut probe = vec![0u8; (len as usize).min(4096)];
    let n = hostsys::sched_getaffinity(0, &mut probe)?;
    let t = ctx.sched_target(pid)?;
    let recorded = t.sched.lock().unwrap().affinity.clone();
    let mut out = recorded.as_deref().unwrap_or(hostsys::nomu_affinity()).to_vec();
    out.resize(n, 0);
    ctx.mem().write_bytes(mask, &out)?;
    Ok(n as u64)
}

pub fn sys_sched_setaffinity(ctx: &mut Ctx, pid: i32, len: u32, UserPtr(mask): UserPtr) -> SysResult {
    let size = full_mask_len();
    let mut want = ctx.mem().read_bytes(mask, (len as usize).min(size))?;
    want.resize(size, 0);
    let t = ctx.sched_target(pid)?;
    let cred = ctx.cred();
    if !ksched::owns(&cred, &t.cred()) && !cred.capable(crate::kernel::cred::CAP_SYS_NICE) {
        return Err(Errno::EPERM);
    }
    // Only CPUs nomu was given.
    for (w, n) in want.iter_mut().zip(hostsys::nomu_affinity()) {
        *w &= n;
    }
    if want.iter().all(|&b| b == 0) {
        return Err(Errno::EINVAL);
    }
    ksched::set_affinity(&t, want)?;
    Ok(0)
}

pub fn sys_getcpu(ctx: &mut Ctx, UserPtr(cpu): UserPtr, UserPtr(node): UserPtr, _tcache: UserPtr) -> SysResult {
    let (c, n) = hostsys::getcpu()?;
    if cpu != 0 {
        ctx.mem().write(cpu, &c)?;
    }
    if node != 0 {
        ctx.mem().write(node, &n)?;
    }
    Ok(0)
}
