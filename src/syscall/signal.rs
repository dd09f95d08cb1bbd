//! Signal dispositions, masks, sending (kill, tkill, tgkill), the signal
//! stack and rt_sigreturn. Delivery itself happens in kernel::trap.

use super::args::{Fd, Hex, Signal, UserPtr};
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::abi::KernelSigaction;
use crate::fs::pidfd::{PidFd, Presence};
use crate::fs::procfs::{Node, PidEntry};
use crate::kernel::cred::CAP_KILL;
use crate::kernel::process::{ExitStatus, Process, Thread};
use crate::kernel::sigframe;
use crate::kernel::signal::{self, AltStack, SigInfo, NSIG, SS_AUTODISARM, SS_DISABLE, SS_ONSTACK, UNBLOCKABLE};
use crate::mm::uaccess::UserMem;
use std::sync::Arc;

const SIGSET_SIZE: usize = 8;

fn valid_signal(sig: i32) -> bool {
    (1..=NSIG as i32).contains(&sig)
}

pub fn sys_rt_sigaction(
    ctx: &mut Ctx,
    Signal(sig): Signal,
    UserPtr(act): UserPtr,
    UserPtr(oact): UserPtr,
    sigsetsize: usize,
) -> SysResult {
    if sigsetsize != SIGSET_SIZE {
        return Err(Errno::EINVAL);
    }
    // Linux reads the new action before it judges the signal, and writes
    // the old one once the new one is in place (rt_sigaction).
    let new = if act != 0 { Some(ctx.mem().read::<KernelSigaction>(act)?) } else { None };
    if !valid_signal(sig) || (new.is_some() && (sig == libc::SIGKILL || sig == libc::SIGSTOP)) {
        return Err(Errno::EINVAL);
    }
    let old = {
        // The thread list before the actions, in the locks' order.
        let threads = ctx.process().threads.lock().unwrap();
        let mut signals = ctx.process().signals.lock().unwrap();
        let old = signals.get(sig);
        if let Some(mut new) = new {
            new.mask &= !UNBLOCKABLE;
            signals.set(sig, new);
            // An action that ignores the signal drops its pending
            // instances, blocked or not, in every thread and in the
            // process's shared set (do_sigaction).
            let default_ignored =
                matches!(signal::default_action(sig), signal::DefaultAction::Ignore) || sig == libc::SIGCONT;
            if new.handler == signal::SIG_IGN || (new.handler == signal::SIG_DFL && default_ignored) {
                for t in threads.iter() {
                    t.state.lock().unwrap().pending.discard(sig);
                }
                ctx.process().shared_pending.with(|p| p.discard(sig));
            }
        }
        old
    };
    if oact != 0 {
        ctx.mem().write(oact, &old)?;
    }
    Ok(0)
}

pub fn sys_rt_sigprocmask(
    ctx: &mut Ctx,
    how: i32,
    UserPtr(set): UserPtr,
    UserPtr(oset): UserPtr,
    sigsetsize: usize,
) -> SysResult {
    if sigsetsize != SIGSET_SIZE {
        return Err(Errno::EINVAL);
    }
    // Linux reads the new set before it judges `how`, and writes the old
    // one once the new one is in place.
    let new = if set != 0 { Some(ctx.mem().read::<u64>(set)?) } else { None };
    if new.is_some() && !matches!(how, libc::SIG_BLOCK | libc::SIG_UNBLOCK | libc::SIG_SETMASK) {
        return Err(Errno::EINVAL);
    }
    // Only this thread changes its mask: read, then set.
    let old = ctx.t.thread.state.lock().unwrap().sigmask;
    if let Some(set) = new {
        let mask = match how {
            libc::SIG_BLOCK => old | set,
            libc::SIG_UNBLOCK => old & !set,
            _ => set,
        };
        ctx.t.set_sigmask(mask);
    }
    if oset != 0 {
        ctx.mem().write(oset, &old)?;
    }
    Ok(0)
}

fn sender_info(ctx: &Ctx, sig: i32, code: i32) -> SigInfo {
    SigInfo::from_process(sig, code, ctx.process().pid, ctx.t.thread.cred.lock().unwrap().uid)
}

/// check_kill_permission: a signal from a guest to another process needs
/// the sender's real or effective uid to be the target's real or saved
/// one, or CAP_KILL; SIGCONT within a session is always allowed. `target`
/// is the thread the signal is aimed at (a process's first thread for a
/// process).
fn may_signal(ctx: &Ctx, target: &Thread, sig: i32) -> Result<(), Errno> {
    if Arc::ptr_eq(&target.process, ctx.process()) {
        return Ok(());
    }
    let (me, them) = (ctx.cred(), target.cred());
    let by_cred = [me.euid, me.uid].iter().any(|u| *u == them.suid || *u == them.uid);
    if by_cred || me.capable(CAP_KILL) {
        return Ok(());
    }
    let tasks = &ctx.kernel().tasks;
    let session = |pid| tasks.ids(pid).map(|(_, sid)| sid);
    if sig == libc::SIGCONT && session(target.process.pid) == session(ctx.process().pid) {
        return Ok(());
    }
    Err(Errno::EPERM)
}

/// A process's signals are checked against its first thread.
fn may_signal_process(ctx: &Ctx, p: &Arc<Process>, sig: i32) -> Result<(), Errno> {
    let first = p.threads.lock().unwrap().first().cloned();
    match first {
        Some(t) => may_signal(ctx, &t, sig),
        None => Ok(()),
    }
}

pub fn sys_kill(ctx: &mut Ctx, pid: i32, Signal(sig): Signal) -> SysResult {
    let tasks = &ctx.kernel().tasks;
    let me = ctx.process().pid;
    let targets = match pid {
        p if p > 0 => tasks.process(p as u32).into_iter().collect(),
        0 => tasks.group_members(tasks.ids(me).map_or(me, |(pgid, _)| pgid)),
        -1 => tasks.all_live().into_iter().filter(|p| p.pid != 1 && p.pid != me).collect(),
        p => tasks.group_members(p.unsigned_abs()),
    };
    // A zombie can still be signalled (to no effect).
    if targets.is_empty() && !(pid > 0 && tasks.exists(pid as u32)) {
        return Err(Errno::ESRCH);
    }
    // The target is found before the signal is judged, and the signal
    // before the sender's right to send it (check_kill_permission).
    if sig != 0 && !valid_signal(sig) {
        return Err(Errno::EINVAL);
    }
    // Linux's answer for several targets: kill(-1) fails only for errors
    // other than EPERM, a group when no member could be signalled.
    let mut sent = false;
    let mut last = Ok(());
    for p in &targets {
        let r = may_signal_process(ctx, p, sig);
        if r.is_ok() && sig != 0 {
            // The first program has no init protection: it gets signals as
            // it does when run directly (docker run --init gives it the same).
            ctx.kernel().signal_process(p, sender_info(ctx, sig, signal::SI_USER));
        }
        sent |= r.is_ok();
        last = r;
    }
    match pid {
        -1 => Ok(0),
        _ if sent || targets.is_empty() => Ok(0),
        _ => last.map(|()| 0),
    }
}

/// tkill/tgkill: one thread.
fn signal_tid(ctx: &Ctx, tgid: Option<i32>, tid: i32, sig: i32) -> SysResult {
    if tid <= 0 || tgid.is_some_and(|g| g <= 0) {
        return Err(Errno::EINVAL);
    }
    let thread = if tid as u32 == ctx.tid() {
        ctx.t.thread.clone()
    } else {
        ctx.kernel().find_thread(tid as u32).ok_or(Errno::ESRCH)?
    };
    if tgid.is_some_and(|g| g as u32 != thread.process.pid) {
        return Err(Errno::ESRCH);
    }
    // The thread is found before the signal is judged (do_send_specific).
    if sig != 0 && !valid_signal(sig) {
        return Err(Errno::EINVAL);
    }
    may_signal(ctx, &thread, sig)?;
    if sig != 0 {
        ctx.kernel().signal_thread(&thread, sender_info(ctx, sig, signal::SI_TKILL));
    }
    Ok(0)
}

/// The siginfo a guest gave rt_sigqueueinfo/rt_tgsigqueueinfo, with
/// Linux's rule: only to itself may a process send one that claims to come
/// from the kernel (si_code >= 0) or from tkill; `target` is the pid (or
/// tid) the caller named, `me` its own.
fn queued_info(mut info: SigInfo, sig: i32, target: i32, me: u32) -> Result<SigInfo, Errno> {
    let code = info.code();
    if (code >= 0 || code == signal::SI_TKILL) && target as u32 != me {
        return Err(Errno::EPERM);
    }
    info.0[0..4].copy_from_slice(&sig.to_le_bytes());
    Ok(info)
}

/// rt_sigqueueinfo (sigqueue): a signal with the caller's siginfo (si_code
/// SI_QUEUE and a value for the handler) to a process.
pub fn sys_rt_sigqueueinfo(ctx: &mut Ctx, pid: i32, Signal(sig): Signal, UserPtr(uinfo): UserPtr) -> SysResult {
    let info = queued_info(SigInfo(ctx.mem().read(uinfo)?), sig, pid, ctx.process().pid)?;
    let tasks = &ctx.kernel().tasks;
    // A zombie exists for it (the signal then does nothing).
    if pid <= 0 || !tasks.exists(pid as u32) {
        return Err(Errno::ESRCH);
    }
    if sig != 0 && !valid_signal(sig) {
        return Err(Errno::EINVAL);
    }
    if let Some(target) = tasks.process(pid as u32) {
        may_signal_process(ctx, &target, sig)?;
        if sig != 0 {
            ctx.kernel().signal_process(&target, info);
        }
    }
    Ok(0)
}

/// rt_tgsigqueueinfo: the same, to one thread of a thread group.
pub fn sys_rt_tgsigqueueinfo(
    ctx: &mut Ctx,
    tgid: i32,
    tid: i32,
    Signal(sig): Signal,
    UserPtr(uinfo): UserPtr,
) -> SysResult {
    // Linux reads the siginfo before it judges the ids.
    let info = SigInfo(ctx.mem().read(uinfo)?);
    if tgid <= 0 || tid <= 0 {
        return Err(Errno::EINVAL);
    }
    let info = queued_info(info, sig, tid, ctx.tid())?;
    let thread = if tid as u32 == ctx.tid() {
        ctx.t.thread.clone()
    } else {
        ctx.kernel().find_thread(tid as u32).ok_or(Errno::ESRCH)?
    };
    if thread.process.pid != tgid as u32 {
        return Err(Errno::ESRCH);
    }
    if sig != 0 && !valid_signal(sig) {
        return Err(Errno::EINVAL);
    }
    may_signal(ctx, &thread, sig)?;
    if sig != 0 {
        ctx.kernel().signal_thread(&thread, info);
    }
    Ok(0)
}

const PIDFD_SIGNAL_THREAD: u32 = 1;
const PIDFD_SIGNAL_THREAD_GROUP: u32 = 2;
const PIDFD_SIGNAL_PROCESS_GROUP: u32 = 4;
/// pidfd_send_signal's names for the caller itself (Linux 6.15).
const PIDFD_SELF_THREAD: i32 = -10000;
const PIDFD_SELF_THREAD_GROUP: i32 = -10001;

/// Who a pidfd_send_signal reaches: Linux's PIDTYPE_PID, _TGID, _PGID.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Scope {
    Thread,
    ThreadGroup,
    ProcessGroup,
}

/// pidfd_send_signal: kill, or a queued signal, to what a pidfd names:
/// its thread group, or its thread (a PIDFD_THREAD pidfd), or by `flags`
/// the named process's thread, thread group or process group.
pub fn sys_pidfd_send_signal(
    ctx: &mut Ctx,
    pidfd: i32,
    Signal(sig): Signal,
    UserPtr(uinfo): UserPtr,
    Hex(flags): Hex<u32>,
) -> SysResult {
    let all = PIDFD_SIGNAL_THREAD | PIDFD_SIGNAL_THREAD_GROUP | PIDFD_SIGNAL_PROCESS_GROUP;
    if flags & !all != 0 || (flags & all).count_ones() > 1 {
        return Err(Errno::EINVAL);
    }
    // The target thread (or the process's, for a thread group) and the
    // scope its pidfd implies.
    let (thread, process, scope) = match pidfd {
        PIDFD_SELF_THREAD => (Some(ctx.t.thread.clone()), ctx.process().clone(), Scope::Thread),
        PIDFD_SELF_THREAD_GROUP => (None, ctx.process().clone(), Scope::ThreadGroup),
        fd => {
            let file = ctx.file(Fd(fd))?;
            match (file.pidfd(), file.proc.as_ref().map(|p| p.node)) {
                (Some(PidFd::Thread(t)), _) => (Some(t.clone()), t.process.clone(), Scope::Thread),
                (Some(PidFd::Process(p)), _) => (None, p.clone(), Scope::ThreadGroup),
                // A /proc/PID directory names its process too (Linux's
                // tgid_pidfd_to_pid), here only.
                (None, Some(Node::Pid(pid, PidEntry::Dir))) => {
                    let tasks = &ctx.kernel().tasks;
                    let p = tasks.process(pid).or_else(|| tasks.zombie_process(pid)).ok_or(Errno::ESRCH)?;
                    (None, p, Scope::ThreadGroup)
                }
                _ => return Err(Errno::EBADF),
            }
        }
    };
    let scope = match flags {
        PIDFD_SIGNAL_THREAD => Scope::Thread,
        PIDFD_SIGNAL_THREAD_GROUP => Scope::ThreadGroup,
        PIDFD_SIGNAL_PROCESS_GROUP => Scope::ProcessGroup,
        _ => scope,
    };
    let id = thread.as_ref().map_or(process.pid, |t| t.tid());
    let info = if uinfo != 0 {
        let info = SigInfo(ctx.mem().read(uinfo)?);
        if info.signo() != sig {
            return Err(Errno::EINVAL);
        }
        // Only to itself may a process send a signal that claims to come
        // from the kernel or from tkill.
        let code = info.code();
        let to_self = id == ctx.process().pid && scope != Scope::ProcessGroup;
        if !to_self && (code >= 0 || code == signal::SI_TKILL) {
            return Err(Errno::EPERM);
        }
        info
    } else {
        sender_info(ctx, sig, if scope == Scope::Thread { signal::SI_TKILL } else { signal::SI_USER })
    };
    let kernel = ctx.kernel();
    match scope {
        Scope::ProcessGroup => {
            let members = kernel.tasks.group_members(id);
            if members.is_empty() {
                return Err(Errno::ESRCH);
            }
            if sig != 0 && !valid_signal(sig) {
                return Err(Errno::EINVAL);
            }
            let mut last = Err(Errno::EPERM);
            for p in &members {
                let r = may_signal_process(ctx, p, sig);
                if r.is_ok() && sig != 0 {
                    kernel.signal_process(p, info);
                }
                if r.is_ok() || last.is_err() {
                    last = r;
                }
            }
            last.map(|()| 0)
        }
        Scope::Thread => {
            // A process pidfd with PIDFD_SIGNAL_THREAD names the thread
            // whose tid is the pid.
            let thread = thread
                .or_else(|| process.threads.lock().unwrap().iter().find(|t| t.tid() == process.pid).cloned())
                .filter(|t| !t.left.load(std::sync::atomic::Ordering::Acquire))
                .ok_or(Errno::ESRCH)?;
            if sig != 0 && !valid_signal(sig) {
                return Err(Errno::EINVAL);
            }
            may_signal(ctx, &thread, sig)?;
            if sig != 0 {
                kernel.signal_thread(&thread, info);
            }
            Ok(0)
        }
        Scope::ThreadGroup => {
            let presence = kernel.tasks.presence(&process);
            if presence == Presence::Reaped {
                return Err(Errno::ESRCH);
            }
            if sig != 0 && !valid_signal(sig) {
                return Err(Errno::EINVAL);
            }
            // A zombie takes the signal to no effect.
            if presence == Presence::Alive {
                may_signal_process(ctx, &process, sig)?;
                if sig != 0 {
                    kernel.signal_process(&process, info);
                }
            }
            Ok(0)
        }
    }
}

pub fn sys_tkill(ctx: &mut Ctx, tid: i32, Signal(sig): Signal) -> SysResult {
    signal_tid(ctx, None, tid, sig)
}

pub fn sys_tgkill(ctx: &mut Ctx, tgid: i32, tid: i32, Signal(sig): Signal) -> SysResult {
    signal_tid(ctx, Some(tgid), tid, sig)
}

pub fn sys_rt_sigreturn(ctx: &mut Ctx) -> SysResult {
    let mem = UserMem::new(&ctx.t.mm);
    match sigframe::pop(&mem, ctx.frame) {
        Ok((mask, alt)) => {
            ctx.t.set_sigmask(mask);
            if let Some(alt) = alt.filter(|a| a.flags & SS_DISABLE != 0 || a.size >= MINSIGSTKSZ) {
                ctx.t.thread.state.lock().unwrap().altstack = alt;
            }
            // rax is the interrupted code's, restored with the rest.
            Ok(ctx.frame.regs.rax)
        }
        Err(_) => {
            // A corrupt frame: Linux kills the process with SIGSEGV.
            ctx.t.exit_group(ExitStatus::killed(libc::SIGSEGV));
            Ok(0)
        }
    }
}

const MINSIGSTKSZ: u64 = 2048;

pub fn sys_sigaltstack(ctx: &mut Ctx, UserPtr(ss): UserPtr, UserPtr(old): UserPtr) -> SysResult {
    let rsp = ctx.frame.regs.rsp;
    let cur = ctx.t.thread.state.lock().unwrap().altstack;
    let on_alt = cur.contains(rsp);
    let new = if ss != 0 {
        let raw: [u64; 3] = ctx.mem().read(ss)?;
        let flags = raw[1] as u32 as i32;
        // On the alternate stack, any change is EPERM before its flags
        // are judged (do_sigaltstack).
        if on_alt {
            return Err(Errno::EPERM);
        }
        let mode = flags & !SS_AUTODISARM;
        Some(if mode == SS_DISABLE {
            AltStack::disabled()
        } else if mode != 0 && mode != SS_ONSTACK {
            return Err(Errno::EINVAL);
        } else if raw[2] < MINSIGSTKSZ {
            return Err(Errno::ENOMEM);
        } else {
            AltStack { sp: raw[0], size: raw[2], flags: flags & SS_AUTODISARM }
        })
    } else {
        None
    };
    // The old stack is written once the new one is in place.
    if let Some(n) = new {
        ctx.t.thread.state.lock().unwrap().altstack = n;
    }
    if old != 0 {
        let flags = if on_alt {
            SS_ONSTACK
        } else if cur.enabled() {
            0
        } else {
            SS_DISABLE
        } | (cur.flags & SS_AUTODISARM);
        ctx.mem().write(old, &[cur.sp, flags as u32 as u64, cur.size])?;
    }
    Ok(0)
}

pub fn sys_rt_sigpending(ctx: &mut Ctx, UserPtr(uset): UserPtr, sigsetsize: usize) -> SysResult {
    if sigsetsize > SIGSET_SIZE {
        return Err(Errno::EINVAL);
    }
    // The blocked signals pending for the thread or its process (Linux's
    // do_sigpending).
    let set = {
        let st = ctx.t.thread.state.lock().unwrap();
        (st.pending.set | ctx.process().shared_pending.set()) & st.sigmask
    };
    ctx.mem().write_bytes(uset, &set.to_le_bytes()[..sigsetsize])?;
    Ok(0)
}
