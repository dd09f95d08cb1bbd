//! Identity, exit, thread bookkeeping, arch_prctl and futex.

use super::{int, Args, Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::host::sys as hostsys;
use crate::kernel::process::ExitStatus;

/// exit(2) ends the calling thread; the process ends with its last thread.
pub fn sys_exit(ctx: &mut Ctx, a: &Args) -> SysResult {
    ctx.t.exit = Some(ExitStatus::Code(int(a[0]) & 0xff));
    Ok(0)
}

pub fn sys_exit_group(ctx: &mut Ctx, a: &Args) -> SysResult {
    ctx.t.exit_group(ExitStatus::Code(int(a[0]) & 0xff));
    Ok(0)
}

pub fn sys_getpid(ctx: &mut Ctx, _: &Args) -> SysResult {
    Ok(ctx.process().pid as u64)
}

pub fn sys_gettid(ctx: &mut Ctx, _: &Args) -> SysResult {
    Ok(ctx.tid() as u64)
}

pub fn sys_getppid(ctx: &mut Ctx, _: &Args) -> SysResult {
    Ok(ctx.kernel().tasks.ppid(ctx.process().pid) as u64)
}

pub fn sys_getuid(_: &mut Ctx, _: &Args) -> SysResult {
    Ok(hostsys::ids().uid as u64)
}

pub fn sys_geteuid(_: &mut Ctx, _: &Args) -> SysResult {
    Ok(hostsys::ids().euid as u64)
}

pub fn sys_getgid(_: &mut Ctx, _: &Args) -> SysResult {
    Ok(hostsys::ids().gid as u64)
}

pub fn sys_getegid(_: &mut Ctx, _: &Args) -> SysResult {
    Ok(hostsys::ids().egid as u64)
}

pub fn sys_set_tid_address(ctx: &mut Ctx, a: &Args) -> SysResult {
    ctx.t.thread.state.lock().unwrap().clear_child_tid = a[0];
    Ok(ctx.tid() as u64)
}

pub fn sys_set_robust_list(ctx: &mut Ctx, a: &Args) -> SysResult {
    if a[1] != 24 {
        return Err(Errno::EINVAL);
    }
    ctx.t.thread.state.lock().unwrap().robust_list = a[0];
    Ok(0)
}

pub fn sys_get_robust_list(ctx: &mut Ctx, a: &Args) -> SysResult {
    if int(a[0]) != 0 && int(a[0]) as u32 != ctx.tid() {
        return Err(Errno::ESRCH);
    }
    let head = ctx.t.thread.state.lock().unwrap().robust_list;
    // The length is written before the head.
    ctx.mem().write(a[2], &24u64)?;
    ctx.mem().write(a[1], &head)?;
    Ok(0)
}

const ARCH_SET_GS: u64 = 0x1001;
const ARCH_SET_FS: u64 = 0x1002;
const ARCH_GET_FS: u64 = 0x1003;
const ARCH_GET_GS: u64 = 0x1004;
use crate::mm::uaccess::TASK_SIZE_MAX;

pub fn sys_arch_prctl(ctx: &mut Ctx, a: &Args) -> SysResult {
    match a[0] {
        ARCH_SET_FS => {
            if a[1] >= TASK_SIZE_MAX {
                return Err(Errno::EPERM);
            }
            ctx.frame.fs_base = a[1];
            Ok(0)
        }
        ARCH_GET_FS => {
            ctx.mem().write(a[1], &ctx.frame.fs_base)?;
            Ok(0)
        }
        ARCH_SET_GS => {
            if a[1] >= TASK_SIZE_MAX {
                return Err(Errno::EPERM);
            }
            if !ctx.kernel().entry.supports_guest_gs() {
                ctx.note("this entry path keeps its per-thread block in %gs");
                return Err(Errno::EINVAL);
            }
            ctx.frame.gs_base = a[1];
            Ok(0)
        }
        ARCH_GET_GS => {
            ctx.mem().write(a[1], &ctx.frame.gs_base)?;
            Ok(0)
        }
        _ => Err(Errno::EINVAL),
    }
}

const PR_SET_PDEATHSIG: u64 = 1;
const PR_GET_PDEATHSIG: u64 = 2;
const PR_GET_DUMPABLE: u64 = 3;
const PR_SET_DUMPABLE: u64 = 4;
const PR_SET_NAME: u64 = 15;
const PR_GET_NAME: u64 = 16;
const PR_SET_NO_NEW_PRIVS: u64 = 38;
const PR_GET_NO_NEW_PRIVS: u64 = 39;

pub fn sys_prctl(ctx: &mut Ctx, a: &Args) -> SysResult {
    match a[0] {
        PR_SET_NAME => {
            // Linux takes at most 15 bytes, NUL-terminated or not.
            let mut name = [0u8; 16];
            let n = match ctx.mem().read_cstring(a[1], 15) {
                Err(Errno::ENAMETOOLONG) => ctx.mem().read_bytes(a[1], 15)?,
                r => r?,
            };
            let len = n.len().min(15);
            name[..len].copy_from_slice(&n[..len]);
            ctx.t.thread.state.lock().unwrap().comm = name;
            Ok(0)
        }
        PR_GET_NAME => {
            let name = ctx.t.thread.state.lock().unwrap().comm;
            ctx.mem().write(a[1], &name)?;
            Ok(0)
        }
        PR_SET_PDEATHSIG => {
            if a[1] > 64 {
                return Err(Errno::EINVAL);
            }
            ctx.t.thread.state.lock().unwrap().pdeathsig = a[1] as i32;
            Ok(0)
        }
        PR_GET_PDEATHSIG => {
            let s = ctx.t.thread.state.lock().unwrap().pdeathsig;
            ctx.mem().write(a[1], &s)?;
            Ok(0)
        }
        PR_GET_DUMPABLE => Ok(1),
        PR_SET_DUMPABLE if a[1] <= 1 => Ok(0),
        // Already in force: nomu runs guests with no_new_privs.
        PR_SET_NO_NEW_PRIVS if a[1] == 1 && a[2..5] == [0; 3] => Ok(0),
        PR_GET_NO_NEW_PRIVS if a[1..5] == [0; 4] => Ok(1),
        _ => Err(Errno::EINVAL),
    }
}

pub fn sys_sched_yield(_: &mut Ctx, _: &Args) -> SysResult {
    hostsys::sched_yield();
    Ok(0)
}

const FUTEX_WAIT: i32 = 0;
const FUTEX_WAKE: i32 = 1;
const FUTEX_REQUEUE: i32 = 3;
const FUTEX_CMP_REQUEUE: i32 = 4;
const FUTEX_WAKE_OP: i32 = 5;
const FUTEX_WAIT_BITSET: i32 = 9;
const FUTEX_WAKE_BITSET: i32 = 10;
const FUTEX_PRIVATE: i32 = 128;
const FUTEX_CLOCK_REALTIME: i32 = 256;
const BITSET_ALL: u32 = u32::MAX;

fn read_timeout(ctx: &Ctx, ptr: u64) -> Result<Option<libc::timespec>, Errno> {
    if ptr == 0 {
        return Ok(None);
    }
    let ts: libc::timespec = ctx.mem().read(ptr)?;
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(Errno::EINVAL);
    }
    Ok(Some(ts))
}

/// Guest futexes are host futexes on the same addresses: every guest
/// process lives in nomu's one host address space (see host::sys).
pub fn sys_futex(ctx: &mut Ctx, a: &Args) -> SysResult {
    let (uaddr, op, val) = (a[0], int(a[1]), a[2] as u32);
    let cmd = op & !(FUTEX_PRIVATE | FUTEX_CLOCK_REALTIME);
    let realtime = op & FUTEX_CLOCK_REALTIME != 0;
    // Linux's order (sys_futex, do_futex): a wait's timeout is read and
    // judged, then FUTEX_CLOCK_REALTIME (of the commands here, for
    // FUTEX_WAIT_BITSET only), the command, and the address.
    let timeout = if matches!(cmd, FUTEX_WAIT | FUTEX_WAIT_BITSET) { read_timeout(ctx, a[3])? } else { None };
    if realtime && cmd != FUTEX_WAIT_BITSET {
        return Err(Errno::ENOSYS);
    }
    let known =
        [FUTEX_WAIT, FUTEX_WAKE, FUTEX_REQUEUE, FUTEX_CMP_REQUEUE, FUTEX_WAKE_OP, FUTEX_WAIT_BITSET, FUTEX_WAKE_BITSET];
    if !known.contains(&cmd) {
        return Err(Errno::ENOSYS);
    }
    if !uaddr.is_multiple_of(4) {
        return Err(Errno::EINVAL);
    }
    let word = || ctx.mem().checked_range(uaddr, 4, false);
    match cmd {
        FUTEX_WAIT | FUTEX_WAIT_BITSET => {
            let bitset = if cmd == FUTEX_WAIT { BITSET_ALL } else { a[5] as u32 };
            if bitset == 0 {
                return Err(Errno::EINVAL);
            }
            // FUTEX_WAIT's timeout is relative (to CLOCK_MONOTONIC); the
            // host call takes an absolute one.
            let deadline = match (cmd, timeout) {
                (FUTEX_WAIT, Some(t)) => Some(super::time::ts_add(hostsys::clock_gettime(libc::CLOCK_MONOTONIC)?, t)),
                (_, t) => t,
            };
            let w = word()?;
            // Linux compares the word once, then sleeps until a wake, a
            // signal or the timeout. A kick that announced nothing this
            // thread acts on ends the sleep early: a spurious wake-up (0),
            // which every futex user allows, never a second comparison
            // (that would report EAGAIN for a word changed without a wake).
            let mut slept = false;
            let r = ctx.t.block_in_host(|| {
                if std::mem::replace(&mut slept, true) {
                    return Ok(());
                }
                hostsys::futex_wait(w, val, deadline.as_ref(), realtime, bitset)
            });
            match r {
                Ok(()) => Ok(0),
                Err(Errno::ERESTARTSYS) if deadline.is_some() => Err(Errno::EINTR),
                Err(e) => Err(e),
            }
        }
        FUTEX_WAKE | FUTEX_WAKE_BITSET => {
            let bitset = if cmd == FUTEX_WAKE { BITSET_ALL } else { a[5] as u32 };
            if bitset == 0 {
                return Err(Errno::EINVAL);
            }
            hostsys::futex_wake(word()?, val, bitset).map(|n| n as u64)
        }
        FUTEX_REQUEUE | FUTEX_CMP_REQUEUE | FUTEX_WAKE_OP => {
            if !a[4].is_multiple_of(4) {
                return Err(Errno::EINVAL);
            }
            let w1 = word()?;
            // FUTEX_WAKE_OP writes the second word: pinned, so the write
            // cannot land in a page a racing munmap gave away.
            let w2 = ctx.mem().full_range(a[4], 4, cmd == FUTEX_WAKE_OP)?;
            hostsys::futex_raw(w1, cmd, val, a[3], *w2, a[5] as u32).map(|n| n as u64)
        }
        _ => Err(Errno::ENOSYS),
    }
}
