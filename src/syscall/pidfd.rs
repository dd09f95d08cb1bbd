//! pidfd_open and pidfd_getfd (pidfd_send_signal is with the other
//! signal senders, waitid's P_PIDFD with the other waits): descriptors
//! that name a process or a thread (fs::pidfd).

use super::args::{Fd, Hex};
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::fs::file::{FileObject, FileType, OpenFile};
use crate::fs::pidfd::{PidFd, Presence};
use crate::host::events as hostev;
use crate::kernel::cred::Cred;
use std::sync::Arc;

/// PIDFD_NONBLOCK is O_NONBLOCK; PIDFD_THREAD is O_EXCL.
pub const PIDFD_NONBLOCK: u32 = libc::O_NONBLOCK as u32;
pub const PIDFD_THREAD: u32 = libc::O_EXCL as u32;
const CAP_SYS_PTRACE: u32 = 19;

/// A new pidfd for `target` in the caller's table (always close-on-exec).
fn install(ctx: &Ctx, target: PidFd, flags: u32) -> SysResult {
    // The host eventfd stays idle: it holds the status flags (O_NONBLOCK,
    // which waitid's P_PIDFD heeds) and answers fstat as an anonymous inode.
    let host = hostev::eventfd(0, (flags & PIDFD_NONBLOCK) as i32)?;
    let file = OpenFile::new_special(host, "anon_inode:[pidfd]", FileType::PidFd, Some(FileObject::PidFd(target)));
    ctx.install_fd(Arc::new(file), true)
}

/// CLONE_PIDFD: the new child's (or thread's) pidfd, its number written
/// to `out` before the child runs; a bad `out` fails the clone (EFAULT)
/// and leaves no descriptor. [`undo_for_clone`] takes it back if the
/// clone fails later.
pub fn install_for_clone(ctx: &Ctx, target: PidFd, out: u64) -> Result<i32, Errno> {
    let fd = install(ctx, target, 0)? as i32;
    ctx.mem().write(out, &fd).inspect_err(|_| undo_for_clone(ctx, Some(fd)))?;
    Ok(fd)
}

pub fn undo_for_clone(ctx: &Ctx, fd: Option<i32>) {
    if let Some(fd) = fd {
        let closed = ctx.process().files.lock().unwrap().close(fd);
        drop(closed);
    }
}

pub fn sys_pidfd_open(ctx: &mut Ctx, pid: i32, Hex(flags): Hex<u32>) -> SysResult {
    if flags & !(PIDFD_NONBLOCK | PIDFD_THREAD) != 0 || pid <= 0 {
        return Err(Errno::EINVAL);
    }
    let pid = pid as u32;
    let kernel = ctx.kernel();
    let target = if flags & PIDFD_THREAD != 0 {
        let thread = if pid == ctx.tid() { Some(ctx.t.thread.clone()) } else { kernel.find_thread(pid) };
        match thread {
            Some(t) => PidFd::Thread(t),
            // A zombie's pid names its thread-group leader still.
            None => PidFd::Process(zombie(ctx, pid)?),
        }
    } else if let Some(p) = kernel.tasks.process(pid) {
        PidFd::Process(p)
    } else if kernel.find_thread(pid).is_some() {
        // A thread's id names no thread group (pidfd_prepare).
        return Err(Errno::ENOENT);
    } else {
        PidFd::Process(zombie(ctx, pid)?)
    };
    install(ctx, target, flags)
}

/// The process `pid` names while it is a zombie (pidfd_open finds the
/// pid until it is reaped), or ESRCH.
fn zombie(ctx: &Ctx, pid: u32) -> Result<Arc<crate::kernel::process::Process>, Errno> {
    ctx.kernel().tasks.zombie_process(pid).ok_or(Errno::ESRCH)
}

/// The pidfd behind `fd`: EBADF when it is none.
pub fn pidfd_of(ctx: &Ctx, fd: Fd) -> Result<Arc<OpenFile>, Errno> {
    let file = ctx.file(fd)?;
    if file.pidfd().is_none() {
        return Err(Errno::EBADF);
    }
    Ok(file)
}

/// ptrace_may_access with PTRACE_MODE_ATTACH_REALCREDS: the caller's real
/// ids are every one of the target's, or it has CAP_SYS_PTRACE.
fn may_attach(me: &Cred, them: &Cred) -> bool {
    let same_user = [them.uid, them.euid, them.suid].iter().all(|&u| u == me.uid);
    let same_group = [them.gid, them.egid, them.sgid].iter().all(|&g| g == me.gid);
    (same_user && same_group) || me.capable(CAP_SYS_PTRACE)
}

pub fn sys_pidfd_getfd(ctx: &mut Ctx, pidfd: Fd, targetfd: i32, Hex(flags): Hex<u32>) -> SysResult {
    if flags != 0 {
        return Err(Errno::EINVAL);
    }
    let file = pidfd_of(ctx, pidfd)?;
    let target = file.pidfd().unwrap();
    let process = target.process();
    // An ended process (a zombie too) has no descriptors to give.
    let first = process.threads.lock().unwrap().first().cloned();
    let Some(first) = first.filter(|_| target.presence(ctx.kernel()) == Presence::Alive) else {
        return Err(Errno::ESRCH);
    };
    if !Arc::ptr_eq(process, ctx.process()) && !may_attach(&ctx.cred(), &first.cred()) {
        return Err(Errno::EPERM);
    }
    let got = process.files.lock().unwrap().file(targetfd).map_err(|_| Errno::EBADF)?;
    ctx.install_fd(got, true)
}
