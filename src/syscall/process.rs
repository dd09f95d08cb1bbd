//! Identity, exit, thread bookkeeping, arch_prctl and futex.

use super::args::{Hex, UserPtr};
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::host::sys as hostsys;
use crate::kernel::cred::{Cred, CAP_LAST_CAP};
use crate::kernel::process::ExitStatus;

/// exit(2) ends the calling thread; the process ends with its last thread.
pub fn sys_exit(ctx: &mut Ctx, status: i32) -> SysResult {
    ctx.t.exit = Some(ExitStatus::Code(status & 0xff));
    Ok(0)
}

pub fn sys_exit_group(ctx: &mut Ctx, status: i32) -> SysResult {
    ctx.t.exit_group(ExitStatus::Code(status & 0xff));
    Ok(0)
}

pub fn sys_getpid(ctx: &mut Ctx) -> SysResult {
    Ok(ctx.process().pid as u64)
}

pub fn sys_gettid(ctx: &mut Ctx) -> SysResult {
    Ok(ctx.tid() as u64)
}

pub fn sys_getppid(ctx: &mut Ctx) -> SysResult {
    Ok(ctx.kernel().tasks.ppid(ctx.process().pid) as u64)
}

pub fn sys_set_tid_address(ctx: &mut Ctx, UserPtr(tidptr): UserPtr) -> SysResult {
    ctx.t.thread.state.lock().unwrap().clear_child_tid = tidptr;
    Ok(ctx.tid() as u64)
}

pub fn sys_set_robust_list(ctx: &mut Ctx, UserPtr(head): UserPtr, len: usize) -> SysResult {
    if len != 24 {
        return Err(Errno::EINVAL);
    }
    ctx.t.thread.state.lock().unwrap().robust_list = head;
    Ok(0)
}

pub fn sys_get_robust_list(
    ctx: &mut Ctx,
    pid: i32,
    UserPtr(head_ptr): UserPtr,
    UserPtr(len_ptr): UserPtr,
) -> SysResult {
    if pid != 0 && pid as u32 != ctx.tid() {
        return Err(Errno::ESRCH);
    }
    let head = ctx.t.thread.state.lock().unwrap().robust_list;
    // The length is written before the head.
    ctx.mem().write(len_ptr, &24u64)?;
    ctx.mem().write(head_ptr, &head)?;
    Ok(0)
}

const ARCH_SET_GS: i32 = 0x1001;
const ARCH_SET_FS: i32 = 0x1002;
const ARCH_GET_FS: i32 = 0x1003;
const ARCH_GET_GS: i32 = 0x1004;
use crate::mm::uaccess::TASK_SIZE_MAX;

/// The option is an `int` (the upper half of its register is ignored);
/// what `addr` is depends on it: a base to set, or where to store one.
pub fn sys_arch_prctl(ctx: &mut Ctx, Hex(option): Hex<i32>, Hex(addr): Hex) -> SysResult {
    match option {
        ARCH_SET_FS => {
            if addr >= TASK_SIZE_MAX {
                return Err(Errno::EPERM);
            }
            ctx.frame.fs_base = addr;
            Ok(0)
        }
        ARCH_GET_FS => {
            ctx.mem().write(addr, &ctx.frame.fs_base)?;
            Ok(0)
        }
        ARCH_SET_GS => {
            if addr >= TASK_SIZE_MAX {
                return Err(Errno::EPERM);
            }
            if !ctx.kernel().entry.supports_guest_gs() {
                ctx.note("this entry path keeps its per-thread block in %gs");
                return Err(Errno::EINVAL);
            }
            ctx.frame.gs_base = addr;
            Ok(0)
        }
        ARCH_GET_GS => {
            ctx.mem().write(addr, &ctx.frame.gs_base)?;
            Ok(0)
        }
        _ => Err(Errno::EINVAL),
    }
}

const PR_SET_PDEATHSIG: i32 = 1;
const PR_GET_PDEATHSIG: i32 = 2;
const PR_GET_DUMPABLE: i32 = 3;
const PR_SET_DUMPABLE: i32 = 4;
const PR_GET_KEEPCAPS: i32 = 7;
const PR_SET_KEEPCAPS: i32 = 8;
const PR_SET_NAME: i32 = 15;
const PR_GET_NAME: i32 = 16;
const PR_CAPBSET_READ: i32 = 23;
const PR_CAPBSET_DROP: i32 = 24;
const PR_GET_SECUREBITS: i32 = 27;
const PR_SET_NO_NEW_PRIVS: i32 = 38;
const PR_GET_NO_NEW_PRIVS: i32 = 39;
const PR_CAP_AMBIENT: i32 = 47;
const PR_CAP_AMBIENT_IS_SET: u64 = 1;
const PR_CAP_AMBIENT_RAISE: u64 = 2;
const PR_CAP_AMBIENT_LOWER: u64 = 3;
const PR_CAP_AMBIENT_CLEAR_ALL: u64 = 4;
/// SECBIT_KEEP_CAPS, the one secure bit nomu keeps.
const SECBIT_KEEP_CAPS: u64 = 1 << 4;

/// The option is an `int` (the upper half of its register is ignored);
/// what the unsigned long arguments mean depends on it.
pub fn sys_prctl(
    ctx: &mut Ctx,
    option: i32,
    Hex(arg2): Hex,
    Hex(arg3): Hex,
    Hex(arg4): Hex,
    Hex(arg5): Hex,
) -> SysResult {
    match option {
        PR_SET_NAME => {
            // Linux takes at most 15 bytes, NUL-terminated or not.
            let mut name = [0u8; 16];
            let n = match ctx.mem().read_cstring(arg2, 15) {
                Err(Errno::ENAMETOOLONG) => ctx.mem().read_bytes(arg2, 15)?,
                r => r?,
            };
            let len = n.len().min(15);
            name[..len].copy_from_slice(&n[..len]);
            ctx.t.thread.state.lock().unwrap().comm = name;
            Ok(0)
        }
        PR_GET_NAME => {
            // The name in use: the program's file name until one is set.
            let mut name = [0u8; 16];
            let comm = ctx.t.thread.comm();
            name[..comm.len()].copy_from_slice(&comm);
            ctx.mem().write(arg2, &name)?;
            Ok(0)
        }
        PR_SET_PDEATHSIG => {
            if arg2 > 64 {
                return Err(Errno::EINVAL);
            }
            ctx.t.thread.state.lock().unwrap().pdeathsig = arg2 as i32;
            Ok(0)
        }
        PR_GET_PDEATHSIG => {
            let s = ctx.t.thread.state.lock().unwrap().pdeathsig;
            ctx.mem().write(arg2, &s)?;
            Ok(0)
        }
        PR_GET_KEEPCAPS => Ok(ctx.cred().keep_caps as u64),
        PR_SET_KEEPCAPS => {
            if arg2 > 1 {
                return Err(Errno::EINVAL);
            }
            ctx.t.thread.cred.lock().unwrap().keep_caps = arg2 == 1;
            Ok(0)
        }
        PR_CAPBSET_READ => {
            if arg2 > u64::from(CAP_LAST_CAP) {
                return Err(Errno::EINVAL);
            }
            Ok(ctx.cred().cap_bset >> arg2 & 1)
        }
        PR_CAPBSET_DROP => {
            let new = ctx.cred().drop_bset(arg2.min(u64::from(u32::MAX)) as u32)?;
            *ctx.t.thread.cred.lock().unwrap() = new;
            Ok(0)
        }
        PR_GET_SECUREBITS => Ok(if ctx.cred().keep_caps { SECBIT_KEEP_CAPS } else { 0 }),
        PR_CAP_AMBIENT => {
            let c = ctx.cred();
            let new = match arg2 {
                PR_CAP_AMBIENT_CLEAR_ALL if arg3 | arg4 | arg5 == 0 => Cred { cap_ambient: 0, ..c },
                _ if arg3 > u64::from(CAP_LAST_CAP) || arg4 | arg5 != 0 => return Err(Errno::EINVAL),
                PR_CAP_AMBIENT_IS_SET => return Ok(c.cap_ambient >> arg3 & 1),
                PR_CAP_AMBIENT_RAISE | PR_CAP_AMBIENT_LOWER => {
                    c.set_ambient(arg3 as u32, arg2 == PR_CAP_AMBIENT_RAISE)?
                }
                _ => return Err(Errno::EINVAL),
            };
            *ctx.t.thread.cred.lock().unwrap() = new;
            Ok(0)
        }
        PR_GET_DUMPABLE => Ok(1),
        PR_SET_DUMPABLE if arg2 <= 1 => Ok(0),
        // Already in force: nomu runs guests with no_new_privs.
        PR_SET_NO_NEW_PRIVS if arg2 == 1 && [arg3, arg4, arg5] == [0; 3] => Ok(0),
        PR_GET_NO_NEW_PRIVS if [arg2, arg3, arg4, arg5] == [0; 4] => Ok(1),
        _ => Err(Errno::EINVAL),
    }
}

pub fn sys_sched_yield(_: &mut Ctx) -> SysResult {
    hostsys::sched_yield();
    Ok(0)
}

const FUTEX_WAIT: i32 = 0;
const FUTEX_WAKE: i32 = 1;
const FUTEX_REQUEUE: i32 = 3;
const FUTEX_CMP_REQUEUE: i32 = 4;
const FUTEX_WAKE_OP: i32 = 5;
const FUTEX_LOCK_PI: i32 = 6;
const FUTEX_UNLOCK_PI: i32 = 7;
const FUTEX_TRYLOCK_PI: i32 = 8;
const FUTEX_WAIT_BITSET: i32 = 9;
const FUTEX_WAKE_BITSET: i32 = 10;
const FUTEX_WAIT_REQUEUE_PI: i32 = 11;
const FUTEX_CMP_REQUEUE_PI: i32 = 12;
const FUTEX_LOCK_PI2: i32 = 13;
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
/// process lives in nomu's one host address space (see host::sys). What
/// `utime`, `uaddr2` and `val3` are depends on the operation.
pub fn sys_futex(
    ctx: &mut Ctx,
    UserPtr(uaddr): UserPtr,
    op: i32,
    val: u32,
    UserPtr(utime): UserPtr,
    UserPtr(uaddr2): UserPtr,
    Hex(val3): Hex<u32>,
) -> SysResult {
    let cmd = op & !(FUTEX_PRIVATE | FUTEX_CLOCK_REALTIME);
    let realtime = op & FUTEX_CLOCK_REALTIME != 0;
    // Linux's order (sys_futex, do_futex): a wait's timeout is read and
    // judged, then FUTEX_CLOCK_REALTIME (of the commands here, for
    // FUTEX_WAIT_BITSET, FUTEX_WAIT_REQUEUE_PI and FUTEX_LOCK_PI2 only),
    // the command, and the address.
    let timed = matches!(cmd, FUTEX_WAIT | FUTEX_WAIT_BITSET | FUTEX_LOCK_PI | FUTEX_LOCK_PI2 | FUTEX_WAIT_REQUEUE_PI);
    let timeout = if timed { read_timeout(ctx, utime)? } else { None };
    if realtime && !matches!(cmd, FUTEX_WAIT_BITSET | FUTEX_LOCK_PI2 | FUTEX_WAIT_REQUEUE_PI) {
        return Err(Errno::ENOSYS);
    }
    let known = [
        FUTEX_WAIT,
        FUTEX_WAKE,
        FUTEX_REQUEUE,
        FUTEX_CMP_REQUEUE,
        FUTEX_WAKE_OP,
        FUTEX_LOCK_PI,
        FUTEX_UNLOCK_PI,
        FUTEX_TRYLOCK_PI,
        FUTEX_WAIT_BITSET,
        FUTEX_WAKE_BITSET,
        FUTEX_WAIT_REQUEUE_PI,
        FUTEX_CMP_REQUEUE_PI,
        FUTEX_LOCK_PI2,
    ];
    if !known.contains(&cmd) {
        return Err(Errno::ENOSYS);
    }
    if !uaddr.is_multiple_of(4) {
        return Err(Errno::EINVAL);
    }
    // A shared futex is keyed by its page (Linux pins it: get_user_pages),
    // which secret memory refuses; a private one by its address (its word
    // read as a copy): the host futex on the owner's mapping, the one
    // address all its threads name the word by.
    if op & FUTEX_PRIVATE == 0 && ctx.mem().is_secret(uaddr) {
        return Err(Errno::EFAULT);
    }
    let word = || ctx.mem().checked_range(uaddr, 4, false);
    match cmd {
        FUTEX_WAIT | FUTEX_WAIT_BITSET => {
            let bitset = if cmd == FUTEX_WAIT { BITSET_ALL } else { val3 };
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
            let bitset = if cmd == FUTEX_WAKE { BITSET_ALL } else { val3 };
            if bitset == 0 {
                return Err(Errno::EINVAL);
            }
            hostsys::futex_wake(word()?, val, bitset).map(|n| n as u64)
        }
        FUTEX_REQUEUE | FUTEX_CMP_REQUEUE | FUTEX_WAKE_OP => {
            if !uaddr2.is_multiple_of(4) {
                return Err(Errno::EINVAL);
            }
            let w1 = word()?;
            // FUTEX_WAKE_OP writes the second word: pinned, so the write
            // cannot land in a page a racing munmap gave away.
            let w2 = ctx.mem().full_range(uaddr2, 4, cmd == FUTEX_WAKE_OP)?;
            hostsys::futex_raw(w1, cmd, val, utime, *w2, val3).map(|n| n as u64)
        }
        FUTEX_LOCK_PI | FUTEX_LOCK_PI2 | FUTEX_TRYLOCK_PI => {
            // FUTEX_LOCK_PI's timeout is absolute on CLOCK_REALTIME;
            // FUTEX_LOCK_PI2's on CLOCK_MONOTONIC unless
            // FUTEX_CLOCK_REALTIME says otherwise.
            let clock = if cmd == FUTEX_LOCK_PI || realtime { libc::CLOCK_REALTIME } else { libc::CLOCK_MONOTONIC };
            let deadline = match timeout {
                Some(t) => Some(super::time::instant_of(clock, &t)?),
                None => None,
            };
            pi_lock(ctx, uaddr, cmd == FUTEX_TRYLOCK_PI, deadline)
        }
        FUTEX_UNLOCK_PI => {
            let tid = ctx.tid();
            ctx.kernel().pi_futexes.unlock(&ctx.mem(), uaddr, tid).map(|()| 0)
        }
        FUTEX_WAIT_REQUEUE_PI => {
            // The timeout is absolute, on CLOCK_MONOTONIC unless
            // FUTEX_CLOCK_REALTIME.
            let clock = if realtime { libc::CLOCK_REALTIME } else { libc::CLOCK_MONOTONIC };
            let deadline = match timeout {
                Some(t) => Some(super::time::instant_of(clock, &t)?),
                None => None,
            };
            wait_requeue_pi(ctx, uaddr, val, uaddr2, deadline)
        }
        FUTEX_CMP_REQUEUE_PI => {
            // `utime` is the count to requeue (an int, as Linux reads it).
            let (nr_wake, nr_requeue) = (val as i32, utime as u32 as i32);
            if nr_wake < 0 || nr_requeue < 0 || uaddr == uaddr2 || nr_wake != 1 {
                return Err(Errno::EINVAL);
            }
            if !uaddr2.is_multiple_of(4) {
                return Err(Errno::EINVAL);
            }
            ctx.mem().checked_range(uaddr2, 4, true)?;
            let kernel = ctx.kernel();
            kernel.pi_futexes.cmp_requeue(kernel, &ctx.mem(), uaddr, nr_requeue as u32, uaddr2, val3)
        }
        _ => Err(Errno::ENOSYS),
    }
}

/// FUTEX_LOCK_PI, FUTEX_LOCK_PI2 and FUTEX_TRYLOCK_PI (Linux's
/// futex_lock_pi): a signal ends the wait with ERESTARTNOINTR, so the call
/// starts again after the handler, whatever its SA_RESTART (the timeout is
/// absolute).
fn pi_lock(ctx: &mut Ctx, uaddr: u64, trylock: bool, deadline: Option<std::time::Instant>) -> SysResult {
    use crate::kernel::futex::Locked;
    use crate::kernel::waiter::Wake;
    let tid = ctx.tid();
    let kernel = ctx.kernel();
    let w = match kernel.pi_futexes.lock(kernel, &ctx.mem(), uaddr, tid, trylock)? {
        Locked::Now => return Ok(0),
        Locked::Queued(w) => w,
    };
    let r = ctx.t.wait_for(Some(&w.event), deadline, Wake::OnSignal, || Ok(w.granted().then_some(())));
    match kernel.pi_futexes.finish_wait(&ctx.mem(), uaddr, &w)? {
        crate::kernel::futex::WaitEnd::Owned => Ok(0),
        _ => match r {
            Ok(_) => Err(Errno::ETIMEDOUT),
            Err(Errno::ERESTARTSYS) => Err(Errno::ERESTARTNOINTR),
            Err(e) => Err(e),
        },
    }
}

/// FUTEX_WAIT_REQUEUE_PI (Linux's futex_wait_requeue_pi): waits on the
/// plain futex `uaddr` until FUTEX_CMP_REQUEUE_PI takes the PI futex
/// `uaddr2` for it or moves it there, then until it owns that lock. A
/// signal before the requeue restarts the call; after it, the call ends
/// with EAGAIN (user space looks at its condition again). `val3` is not
/// read: Linux matches any bitset.
fn wait_requeue_pi(
    ctx: &mut Ctx,
    uaddr: u64,
    val: u32,
    uaddr2: u64,
    deadline: Option<std::time::Instant>,
) -> SysResult {
    use crate::kernel::futex::WaitEnd;
    use crate::kernel::waiter::Wake;
    if uaddr == uaddr2 || !uaddr2.is_multiple_of(4) {
        return Err(Errno::EINVAL);
    }
    ctx.mem().checked_range(uaddr2, 4, true)?;
    let tid = ctx.tid();
    let kernel = ctx.kernel();
    let w = kernel.pi_futexes.wait_requeue(&ctx.mem(), uaddr, val, uaddr2, tid)?;
    let r = ctx.t.wait_for(Some(&w.event), deadline, Wake::OnSignal, || Ok(w.granted().then_some(())));
    match (kernel.pi_futexes.finish_wait(&ctx.mem(), uaddr, &w)?, r) {
        (WaitEnd::Owned, _) => Ok(0),
        (_, Ok(_)) => Err(Errno::ETIMEDOUT),
        (WaitEnd::LeftUnrequeued, Err(Errno::ERESTARTSYS)) => Err(Errno::ERESTARTNOINTR),
        (_, Err(Errno::ERESTARTSYS)) => Err(Errno::EAGAIN),
        (_, Err(e)) => Err(e),
    }
}
