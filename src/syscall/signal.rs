//! Signal dispositions and masks (recorded; delivery to guest handlers
//! arrives with the process issue), and kill aimed at the caller itself.

use super::{int, Args, Ctx, SysResult};
use crate::kernel::abi::KernelSigaction;
use crate::kernel::errno::Errno;
use crate::kernel::signal::{self, NSIG, UNBLOCKABLE};

const SIGSET_SIZE: u64 = 8;

fn valid_signal(sig: i32) -> bool {
    (1..=NSIG as i32).contains(&sig)
}

pub fn sys_rt_sigaction(ctx: &mut Ctx, a: &Args) -> SysResult {
    let (sig, act, oact) = (int(a[0]), a[1], a[2]);
    if a[3] != SIGSET_SIZE || !valid_signal(sig) {
        return Err(Errno::EINVAL);
    }
    if act != 0 && (sig == libc::SIGKILL || sig == libc::SIGSTOP) {
        return Err(Errno::EINVAL);
    }
    let new = if act != 0 { Some(ctx.mem().read::<KernelSigaction>(act)?) } else { None };
    let old = ctx.process().signals.lock().unwrap().get(sig);
    if oact != 0 {
        ctx.mem().write(oact, &old)?;
    }
    if let Some(mut new) = new {
        new.mask &= !UNBLOCKABLE;
        ctx.process().signals.lock().unwrap().set(sig, new);
    }
    Ok(0)
}

pub fn sys_rt_sigprocmask(ctx: &mut Ctx, a: &Args) -> SysResult {
    let (how, set, oset) = (int(a[0]), a[1], a[2]);
    if a[3] != SIGSET_SIZE {
        return Err(Errno::EINVAL);
    }
    let new = if set != 0 {
        if !matches!(how, libc::SIG_BLOCK | libc::SIG_UNBLOCK | libc::SIG_SETMASK) {
            return Err(Errno::EINVAL);
        }
        Some(ctx.mem().read::<u64>(set)?)
    } else {
        None
    };
    let old = ctx.t.thread.state.lock().unwrap().sigmask;
    if oset != 0 {
        ctx.mem().write(oset, &old)?;
    }
    if let Some(set) = new {
        let mask = match how {
            libc::SIG_BLOCK => old | set,
            libc::SIG_UNBLOCK => old & !set,
            _ => set,
        };
        ctx.t.thread.state.lock().unwrap().sigmask = mask & !UNBLOCKABLE;
    }
    Ok(0)
}

/// A signal sent by the guest to itself. Until delivery exists, only the
/// default action (or ignoring it) is carried out.
fn signal_self(ctx: &mut Ctx, sig: i32) -> SysResult {
    if sig == 0 {
        return Ok(0);
    }
    if !valid_signal(sig) {
        return Err(Errno::EINVAL);
    }
    let blocked = ctx.t.thread.state.lock().unwrap().sigmask & signal::bit(sig) != 0;
    if !blocked {
        ctx.t.raise(sig);
    }
    Ok(0)
}

fn is_self(ctx: &Ctx, pid: i32) -> bool {
    pid == 0 || pid == -1 || pid as u32 == ctx.process().pid || -pid as u32 == ctx.process().pid
}

pub fn sys_kill(ctx: &mut Ctx, a: &Args) -> SysResult {
    let (pid, sig) = (int(a[0]), int(a[1]));
    if !is_self(ctx, pid) {
        return Err(Errno::ESRCH);
    }
    signal_self(ctx, sig)
}

pub fn sys_tkill(ctx: &mut Ctx, a: &Args) -> SysResult {
    let (tid, sig) = (int(a[0]), int(a[1]));
    if tid <= 0 {
        return Err(Errno::EINVAL);
    }
    if tid as u32 != ctx.tid() {
        return Err(Errno::ESRCH);
    }
    signal_self(ctx, sig)
}

pub fn sys_tgkill(ctx: &mut Ctx, a: &Args) -> SysResult {
    let (tgid, tid, sig) = (int(a[0]), int(a[1]), int(a[2]));
    if tgid <= 0 || tid <= 0 {
        return Err(Errno::EINVAL);
    }
    if tgid as u32 != ctx.process().pid || tid as u32 != ctx.tid() {
        return Err(Errno::ESRCH);
    }
    signal_self(ctx, sig)
}
