//! Process creation the no-MMU way (vfork, clone with CLONE_VM|CLONE_VFORK),
//! execve, wait4/waitid, and process groups and sessions.

use super::args::{AtFlags, DirFd, Hex, Path, UserPtr};
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::entry::StartState;
use crate::fs::path::PATH_MAX;
use crate::fs::pidfd::PidFd;
use crate::kernel::nproc::NprocLimit;
use crate::kernel::process::{ExitStatus, Process, Thread};
use crate::kernel::task::{Task, WaitFor, WaitQuery, WaitResult, Zombie};
use crate::kernel::waiter::Wake;
use crate::loader::ArgStrings;
use crate::mm::PAGE_SIZE;
use std::sync::Arc;

const CLONE_VM: u64 = 0x100;
const CLONE_FS: u64 = 0x200;
const CLONE_FILES: u64 = 0x400;
const CLONE_SIGHAND: u64 = 0x800;
const CLONE_VFORK: u64 = 0x4000;
const CLONE_PARENT: u64 = 0x8000;
const CLONE_THREAD: u64 = 0x10000;
const CLONE_SETTLS: u64 = 0x80000;
const CLONE_PARENT_SETTID: u64 = 0x100000;
const CLONE_CHILD_CLEARTID: u64 = 0x200000;
const CLONE_CHILD_SETTID: u64 = 0x1000000;
const CSIGNAL: u64 = 0xff;
const CLONE_PIDFD: u64 = 0x1000;
const CLONE_DETACHED: u64 = 0x400000;
const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
/// struct clone_args: its first version's size, and the size this Linux
/// (6.18) knows, up to `cgroup`.
const CLONE_ARGS_SIZE_VER0: usize = 64;
const CLONE_ARGS_SIZE_VER2: usize = 88;
const MAX_PID_NS_LEVEL: u64 = 32;
/// x86-64's TASK_SIZE_MAX: where access_ok() stops.
const TASK_SIZE_MAX: u64 = 0x7fff_ffff_f000;

/// Linux's ARG_MAX as execve enforces it: a quarter of an 8 MiB stack.
const ARG_MAX: usize = 2 << 20;
const MAX_ARG_STRINGS: usize = 0x7fff_ffff;

/// vfork(2): a child that borrows this process's memory and stack until it
/// execs or exits; the caller waits until then.
pub fn sys_vfork(ctx: &mut Ctx) -> SysResult {
    clone(ctx, CLONE_VM | CLONE_VFORK | libc::SIGCHLD as u64, 0, 0, 0, 0, 0)
}

/// fork(2): the child runs in a host process of its own with a copy of
/// this process's memory (see fork_child); EINVAL under `--no-fork`, as
/// no-MMU Linux answers.
pub fn sys_fork(ctx: &mut Ctx) -> SysResult {
    clone(ctx, libc::SIGCHLD as u64, 0, 0, 0, 0, 0)
}

/// x86-64's order: flags, stack, parent_tid, child_tid, tls. Linux reads
/// the flags' low 32 bits (every flag nomu knows is there).
pub fn sys_clone(
    ctx: &mut Ctx,
    Hex(flags): Hex,
    UserPtr(stack): UserPtr,
    UserPtr(ptid): UserPtr,
    UserPtr(ctid): UserPtr,
    Hex(tls): Hex,
) -> SysResult {
    // clone(2) writes a CLONE_PIDFD's descriptor where CLONE_PARENT_SETTID
    // writes the pid, so the two cannot go together (nor with the
    // CLONE_DETACHED that clone3 reuses).
    if flags & CLONE_PIDFD != 0 && flags & (CLONE_PARENT_SETTID | CLONE_DETACHED) != 0 {
        return Err(Errno::EINVAL);
    }
    clone(ctx, flags, stack, ptid, ctid, tls, ptid)
}

/// clone3(2): clone's arguments in a versioned struct, checked as Linux's
/// copy_clone_args_from_user and clone3_args_valid do (kernel/fork.c),
/// then made what clone does: the exit signal joins the flags and the
/// stack is given as its lowest address and size.
pub fn sys_clone3(ctx: &mut Ctx, UserPtr(uargs): UserPtr, size: usize) -> SysResult {
    if size > 4096 {
        return Err(Errno::E2BIG);
    }
    if size < CLONE_ARGS_SIZE_VER0 {
        return Err(Errno::EINVAL);
    }
    // A newer program's longer struct is fine while the part this Linux
    // does not know is zero.
    let bytes = ctx.mem().read_bytes(uargs, size)?;
    if bytes.get(CLONE_ARGS_SIZE_VER2..).is_some_and(|rest| rest.iter().any(|&b| b != 0)) {
        return Err(Errno::E2BIG);
    }
    let field =
        |i: usize| bytes.get(i * 8..i * 8 + 8).map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    let (flags, pidfd, child_tid, parent_tid, exit_signal) = (field(0), field(1), field(2), field(3), field(4));
    let (stack, stack_size, tls, set_tid, set_tid_size, cgroup) =
        (field(5), field(6), field(7), field(8), field(9), field(10));
    if set_tid_size > MAX_PID_NS_LEVEL || (set_tid == 0) != (set_tid_size == 0) {
        return Err(Errno::EINVAL);
    }
    if exit_signal & !CSIGNAL != 0 || exit_signal > crate::kernel::signal::NSIG as u64 {
        return Err(Errno::EINVAL);
    }
    if flags & CLONE_INTO_CGROUP != 0 && (cgroup > i32::MAX as u64 || size < CLONE_ARGS_SIZE_VER2) {
        return Err(Errno::EINVAL);
    }
    if set_tid != 0 {
        ctx.mem().read_bytes(set_tid, set_tid_size as usize * 4)?;
    }
    // clone3_args_valid: no unknown flags, no CSIGNAL or CLONE_DETACHED
    // bits (clone3 reuses them), a consistent stack.
    if flags & !(0xffff_ffff | CLONE_CLEAR_SIGHAND | CLONE_INTO_CGROUP) != 0
        || flags & (CLONE_DETACHED | CSIGNAL) != 0
        || flags & (CLONE_SIGHAND | CLONE_CLEAR_SIGHAND) == CLONE_SIGHAND | CLONE_CLEAR_SIGHAND
        || (flags & (CLONE_THREAD | CLONE_PARENT) != 0 && exit_signal != 0)
    {
        return Err(Errno::EINVAL);
    }
    let top = match (stack, stack_size) {
        (0, 0) => 0,
        (0, _) | (_, 0) => return Err(Errno::EINVAL),
        (s, n) => s.checked_add(n).filter(|&t| t <= TASK_SIZE_MAX).ok_or(Errno::EINVAL)?,
    };
    if flags & (CLONE_CLEAR_SIGHAND | CLONE_INTO_CGROUP) != 0 || set_tid != 0 {
        ctx.note("clone3's CLONE_CLEAR_SIGHAND, CLONE_INTO_CGROUP and set_tid are not provided");
        return Err(Errno::EINVAL);
    }
    clone(ctx, flags | exit_signal, top, parent_tid, child_tid, tls, pidfd)
}

/// What clone and clone3 do with their (checked) arguments; `pidfd_out`
/// is where CLONE_PIDFD's descriptor goes.
fn clone(ctx: &mut Ctx, flags: u64, stack: u64, ptid: u64, ctid: u64, tls: u64, pidfd_out: u64) -> SysResult {
    let pidfd_out = (flags & CLONE_PIDFD != 0).then_some(pidfd_out);
    // RLIMIT_NPROC, before anything is copied (as copy_process checks it
    // before copy_mm); checked again as the new task is counted.
    let nproc = NprocLimit::for_new_task(&ctx.t.thread);
    if let Some(limit) = nproc {
        ctx.kernel().tasks.with_all(|all| limit.check(all))?;
    }
    if flags & CLONE_THREAD != 0 {
        // Linux: a thread shares signal handlers, which needs shared memory.
        if flags & CLONE_SIGHAND == 0 || flags & CLONE_VM == 0 {
            return Err(Errno::EINVAL);
        }
        // In a host process of its own, the new thread gets a host thread
        // there (made now, from this thread's trap).
        let host_thread = if ctx.t.mm.lock().unwrap().own_host() {
            match crate::entry::split::new_forked_thread() {
                Ok(t) => Some(t),
                Err(why) => {
                    ctx.note(&format!("no host thread for a forked child's new thread: {why}"));
                    return Err(Errno::EAGAIN);
                }
            }
        } else {
            None
        };
        return spawn_thread(ctx, flags, stack, ptid, ctid, tls, pidfd_out, nproc, host_thread);
    }
    if flags & CLONE_VM == 0 && !ctx.kernel().fork {
        ctx.note("fork needs an MMU (nomu run --no-fork); use vfork or posix_spawn");
        return Err(Errno::EINVAL);
    }
    if flags & (CLONE_SIGHAND | CLONE_FILES | CLONE_FS | CLONE_PARENT) != 0 {
        ctx.note("CLONE_SIGHAND, CLONE_FILES, CLONE_FS and CLONE_PARENT are not provided yet");
        return Err(Errno::EINVAL);
    }
    // A forked child's memory lives in its own host process: a CLONE_VM
    // child of it (vfork, posix_spawn) gets a copy too, which is what it
    // may rely on until it execs or exits.
    if flags & CLONE_VM == 0 || ctx.t.mm.lock().unwrap().own_host() {
        let mm = ctx.t.mm.clone();
        let entry = &ctx.kernel().entry;
        let sp = ctx.frame.regs.rsp as usize;
        let share_code = !entry.patches_shared_code();
        let copy = mm.lock().unwrap().fork_copy(sp, share_code, &|at, frame, len, forked| match forked {
            false => entry.restore_copy(at, frame, len),
            true => entry.forked_copy(at, frame, len),
        })?;
        return spawn_child(ctx, flags & !CLONE_VM, stack, ptid, ctid, tls, pidfd_out, nproc, Some(copy));
    }
    spawn_child(ctx, flags, stack, ptid, ctid, tls, pidfd_out, nproc, None)
}

/// A new process: sharing this one's memory (vfork, CLONE_VM), or, with
/// `copy`, with that copy of it (fork), in a host process of its own.
#[allow(clippy::too_many_arguments)] // clone's own arguments, and what clone made of them
fn spawn_child(
    ctx: &mut Ctx,
    flags: u64,
    stack: u64,
    ptid: u64,
    ctid: u64,
    tls: u64,
    pidfd_out: Option<u64>,
    nproc: Option<NprocLimit>,
    copy: Option<crate::mm::space::AddressSpace>,
) -> SysResult {
    let kernel = ctx.kernel();
    let parent = ctx.process().clone();
    let pid = kernel.pids.next(|id| kernel.id_in_use(id)).ok_or(Errno::EAGAIN)?;
    let child = Arc::new(Process::new_child(&parent, pid));
    let copy = copy.map(|space| Arc::new(crate::sync::OrderedMutex::new(space)));
    if let Some(mm) = &copy {
        child.replace_mm(mm.clone());
    }
    // Its thread is its user's task from the moment the process is in the
    // table (RLIMIT_NPROC counts threads).
    let thread = Arc::new(Thread::new(pid, child.clone(), &ctx.t.thread));
    child.threads.lock().unwrap().push(thread.clone());
    let (pgid, sid) = kernel.tasks.ids(parent.pid).unwrap_or((parent.pid, parent.pid));
    let task = Task { process: child.clone(), ppid: parent.pid, pgid, sid, zombie: None, stop_event: None };
    if let Err(e) = kernel.tasks.insert_unless(task, |all| nproc.map_or(Ok(()), |limit| limit.check(all))) {
        crate::kernel::exit::discard_unborn(kernel, &child);
        return Err(e);
    }
    // Its RLIMIT_CPU is its parent's; its CPU time starts at zero.
    if child.cpu_limited() {
        kernel.timers.watch_cpu(&child);
    }
    // copy_process: the child keeps PF_NPROC_EXCEEDED, the parent's goes.
    let exceeded = ctx.t.thread.nproc_exceeded.swap(false, std::sync::atomic::Ordering::Relaxed);
    thread.nproc_exceeded.store(exceeded, std::sync::atomic::Ordering::Relaxed);
    let mut pidfd = None;
    let written = (|| {
        if let Some(out) = pidfd_out {
            pidfd = Some(super::pidfd::install_for_clone(ctx, PidFd::Process(child.clone()), out)?);
        }
        if flags & CLONE_PARENT_SETTID != 0 {
            // The parent's memory only (a fork's copy is made already).
            ctx.mem().write(ptid, &(pid as i32))?;
        }
        if flags & CLONE_CHILD_SETTID != 0 {
            // The child's view of ctid: the parent's memory (vfork) or its own.
            match &copy {
                Some(mm) => crate::mm::uaccess::UserMem::new(mm).write(ctid, &(pid as i32))?,
                None => ctx.mem().write(ctid, &(pid as i32))?,
            }
        }
        Ok(())
    })();
    if let Err(e) = written {
        super::pidfd::undo_for_clone(ctx, pidfd);
        crate::kernel::exit::discard_unborn(kernel, &child);
        return Err(e);
    }
    if flags & CLONE_CHILD_CLEARTID != 0 {
        thread.state.lock().unwrap().clear_child_tid = ctid;
    }
    // One thread's state at a time (src/sync.rs).
    let sigmask = ctx.t.thread.state.lock().unwrap().sigmask;
    thread.state.lock().unwrap().sigmask = sigmask;
    // The child resumes right after the syscall with rax = 0, on its own
    // stack if it was given one, else on the parent's (vfork).
    let mut regs = *ctx.frame.regs;
    regs.rax = 0;
    if stack != 0 {
        regs.rsp = stack;
    }
    let fs_base = if flags & CLONE_SETTLS != 0 { tls } else { ctx.frame.fs_base };
    let _exit_signal = flags & CSIGNAL;
    let start =
        StartState { regs, fs_base, gs_base: ctx.frame.gs_base, xstate: creator_xstate(ctx), host_thread: None };
    // The parent waits until the child execs or exits: on an entry path
    // that can, the child runs on the parent's host thread meanwhile (not
    // from a child that itself runs so: its parent needs this thread back).
    if flags & CLONE_VFORK != 0 && copy.is_none() && kernel.entry.runs_nested() && ctx.t.vfork_parent.is_none() {
        crate::kernel::trap::run_vfork_child(kernel, thread, start, &ctx.t.thread);
        ctx.t.leave_if_gone();
        return Ok(pid as u64);
    }
    if let Err(e) = kernel.continue_thread(thread, start) {
        // It never ran: gone without a trace (no exit, no SIGCHLD).
        super::pidfd::undo_for_clone(ctx, pidfd);
        crate::kernel::exit::discard_unborn(kernel, &child);
        return Err(e);
    }
    if flags & CLONE_VFORK != 0 {
        loop {
            // Killable only, as Linux's vfork wait.
            let _ = ctx.t.wait_for(Some(&child.vfork_release), None, Wake::OnCondition, || {
                let done = child.vfork_parent_released() || ctx.t.fatal_signal_pending() || ctx.t.vfork_parent_dying();
                Ok(done.then_some(()))
            });
            if !ctx.t.vfork_parent_dying() {
                break;
            }
            // This thread is a vfork child on its own parent's host thread,
            // and that parent must die: it does, and this one waits on.
            ctx.t.release_dying_parent();
        }
    }
    Ok(pid as u64)
}

/// The extended state (FPU, SSE, AVX...) a new thread or process starts
/// with: its creator's at the clone, as Linux's copy_thread copies it.
fn creator_xstate(ctx: &mut Ctx) -> Option<std::sync::Arc<[u8]>> {
    ctx.frame.xstate.image().map(|image| std::sync::Arc::from(&*image))
}

/// clone(CLONE_THREAD): a new thread of this process on a host thread of
/// its own, starting after the syscall with rax = 0 on the given stack.
#[allow(clippy::too_many_arguments)] // clone's own arguments, and what clone made of them
fn spawn_thread(
    ctx: &mut Ctx,
    flags: u64,
    stack: u64,
    ptid: u64,
    ctid: u64,
    tls: u64,
    pidfd_out: Option<u64>,
    nproc: Option<NprocLimit>,
    host_thread: Option<std::sync::Arc<crate::entry::split::ForkedThread>>,
) -> SysResult {
    let kernel = ctx.kernel();
    let process = ctx.process().clone();
    let tid = kernel.pids.next(|id| kernel.id_in_use(id)).ok_or(Errno::EAGAIN)?;
    let thread = Arc::new(Thread::new(tid, process.clone(), &ctx.t.thread));
    // Linux 6.9 on: a thread's clone gives a PIDFD_THREAD pidfd.
    let pidfd = match pidfd_out {
        Some(out) => Some(super::pidfd::install_for_clone(ctx, PidFd::Thread(thread.clone()), out)?),
        None => None,
    };
    if flags & CLONE_PARENT_SETTID != 0 {
        ctx.mem().write(ptid, &(tid as i32))?;
    }
    if flags & CLONE_CHILD_SETTID != 0 {
        ctx.mem().write(ctid, &(tid as i32))?;
    }
    {
        let sigmask = ctx.t.thread.state.lock().unwrap().sigmask;
        let mut st = thread.state.lock().unwrap();
        if flags & CLONE_CHILD_CLEARTID != 0 {
            st.clear_child_tid = ctid;
        }
        st.sigmask = sigmask;
    }
    let mut regs = *ctx.frame.regs;
    regs.rax = 0;
    if stack != 0 {
        regs.rsp = stack;
    }
    let fs_base = if flags & CLONE_SETTLS != 0 { tls } else { ctx.frame.fs_base };
    // RLIMIT_NPROC counts threads: checked and counted in one step.
    let counted = kernel.tasks.with_all(|all| {
        nproc.map_or(Ok(()), |limit| limit.check(all))?;
        process.threads.lock().unwrap().push(thread.clone());
        Ok(())
    });
    if let Err(e) = counted {
        super::pidfd::undo_for_clone(ctx, pidfd);
        return Err(e);
    }
    let exceeded = ctx.t.thread.nproc_exceeded.swap(false, std::sync::atomic::Ordering::Relaxed);
    thread.nproc_exceeded.store(exceeded, std::sync::atomic::Ordering::Relaxed);
    kernel
        .start_registered_thread(
            thread,
            StartState { regs, fs_base, gs_base: ctx.frame.gs_base, xstate: creator_xstate(ctx), host_thread },
        )
        .inspect_err(|_| super::pidfd::undo_for_clone(ctx, pidfd))?;
    Ok(tid as u64)
}

/// Reads a NULL-terminated array of string pointers (argv, envp), the
/// rest of a guest page at a time (a page is all readable or not at all):
/// one checked copy for dozens of pointers, not one each.
fn read_pointers(ctx: &Ctx, mut ptr: u64) -> Result<Vec<u64>, Errno> {
    let mut out = Vec::new();
    if ptr == 0 {
        return Ok(out);
    }
    let mem = ctx.mem();
    let mut bytes = [0u8; PAGE_SIZE];
    loop {
        // The whole pointers left in this page, or (across a page
        // boundary) the one pointer alone.
        let n = ((PAGE_SIZE - ptr as usize % PAGE_SIZE) / 8 * 8).max(8);
        mem.read_into(ptr, &mut bytes[..n])?;
        for word in bytes[..n].chunks_exact(8) {
            let s = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            if s == 0 {
                return Ok(out);
            }
            if out.len() >= MAX_ARG_STRINGS {
                return Err(Errno::E2BIG);
            }
            out.push(s);
        }
        ptr += n as u64;
    }
}

/// Reads the strings `ptrs` point to. They mostly lie side by side (on
/// the caller's stack), so the rest of a guest page is copied once and
/// serves every string that starts and ends in it; any other string is
/// read alone (with the exact EFAULT or E2BIG that gives).
fn read_strings(ctx: &Ctx, ptrs: &[u64], total: &mut usize) -> Result<ArgStrings, Errno> {
    let mem = ctx.mem();
    let mut out = ArgStrings::with_capacity(ptrs.len());
    let mut page = [0u8; PAGE_SIZE];
    // The guest bytes held in `page`: [at, at + len).
    let (mut at, mut len) = (0u64, 0usize);
    for &s in ptrs {
        if !(at..at + len as u64).contains(&s) {
            len = PAGE_SIZE - s as usize % PAGE_SIZE;
            at = s;
            if mem.read_into(s, &mut page[..len]).is_err() {
                len = 0;
            }
        }
        let held = if (at..at + len as u64).contains(&s) { &page[(s - at) as usize..len] } else { &[][..] };
        // A SIMD search (core's was a byte loop for most strings, ~4% of an exec).
        let len = match memchr::memchr(0, held) {
            Some(n) => {
                out.push_with_nul(&held[..=n]);
                n
            }
            None => {
                let string = mem.read_cstring(s, 32 * 4096 - 1).map_err(|e| match e {
                    Errno::ENAMETOOLONG => Errno::E2BIG,
                    e => e,
                })?;
                out.push(&string);
                string.len()
            }
        };
        *total += len + 1 + 8;
        if *total > ARG_MAX {
            return Err(Errno::E2BIG);
        }
    }
    Ok(out)
}

/// argv and envp in Linux's order (do_execveat_common): both arrays are
/// counted before any string is read, and envp's strings are read first.
fn read_args(ctx: &Ctx, argv: u64, envp: u64) -> Result<[ArgStrings; 2], Errno> {
    let (argv, envp) = (read_pointers(ctx, argv)?, read_pointers(ctx, envp)?);
    let mut total = 0;
    let envp = read_strings(ctx, &envp, &mut total)?;
    Ok([read_strings(ctx, &argv, &mut total)?, envp])
}

pub fn sys_execve(ctx: &mut Ctx, filename: Path, UserPtr(argv): UserPtr, UserPtr(envp): UserPtr) -> SysResult {
    let path = ctx.mem().read_cstring(filename.0, PATH_MAX - 1)?;
    exec_path(ctx, path.clone(), &path, argv, envp)
}

/// execveat: the program named as openat names a file (relative to a
/// directory descriptor, or the descriptor itself with AT_EMPTY_PATH, as
/// fexecve does), and with AT_SYMLINK_NOFOLLOW never a symbolic link.
pub fn sys_execveat(
    ctx: &mut Ctx,
    dirfd: DirFd,
    filename: Path,
    UserPtr(argv): UserPtr,
    UserPtr(envp): UserPtr,
    AtFlags(flags): AtFlags,
) -> SysResult {
    if flags & !(libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW) != 0 {
        return Err(Errno::EINVAL);
    }
    let name = ctx.mem().read_cstring(filename.0, PATH_MAX - 1)?;
    if name.starts_with(b"/") || (dirfd == DirFd::CWD && !name.is_empty()) {
        if flags & libc::AT_SYMLINK_NOFOLLOW != 0 {
            let cwd = ctx.process().cwd.lock().unwrap().clone();
            if ctx.names_symlink(&crate::fs::path::join(&cwd, &name)) {
                return Err(Errno::ELOOP);
            }
        }
        return exec_path(ctx, name.clone(), &name, argv, envp);
    }
    if name.is_empty() && flags & libc::AT_EMPTY_PATH == 0 {
        return Err(Errno::ENOENT);
    }
    if dirfd == DirFd::CWD {
        // AT_EMPTY_PATH on the working directory: never a program.
        return Err(Errno::EACCES);
    }
    // Linux names the program /dev/fd/N or /dev/fd/N/name (AT_EXECFN, a
    // script's path for its interpreter), so a script whose descriptor
    // closes on exec could not be read by its interpreter: ENOENT.
    let cloexec = ctx.process().files.lock().unwrap().get(dirfd.0).map_err(|_| Errno::EBADF)?.cloexec;
    let (path, execfn) = if name.is_empty() {
        // The descriptor's own file, even one with no name left (a memfd,
        // an unlinked file): what /dev/fd/N opens.
        let own = format!("/dev/fd/{}", dirfd.0).into_bytes();
        (own.clone(), own)
    } else {
        let abs = crate::fs::path::join(&ctx.base_dir(dirfd)?, &name);
        if flags & libc::AT_SYMLINK_NOFOLLOW != 0 && ctx.names_symlink(&abs) {
            return Err(Errno::ELOOP);
        }
        let mut named = format!("/dev/fd/{}/", dirfd.0).into_bytes();
        named.extend_from_slice(&name);
        (abs, named)
    };
    if cloexec && is_script(ctx, &path) {
        return Err(Errno::ENOENT);
    }
    exec_path(ctx, path, &execfn, argv, envp)
}

/// Whether the file at `path` starts with `#!` (false when it cannot be
/// opened: exec then reports why).
fn is_script(ctx: &Ctx, path: &[u8]) -> bool {
    let cwd = ctx.process().cwd.lock().unwrap().clone();
    let Ok(opened) = crate::loader::open_exec(ctx.kernel(), ctx.process().pid, &cwd, path) else { return false };
    let mut head = [0u8; 2];
    crate::host::fs::pread_local(opened.file.fd(), &mut head, 0).is_ok_and(|n| n == 2 && head == *b"#!")
}

/// execve of `path`, the program named `execfn` for itself (AT_EXECFN).
fn exec_path(ctx: &mut Ctx, path: Vec<u8>, execfn: &[u8], argv: u64, envp: u64) -> SysResult {
    // A set*uid into a user over RLIMIT_NPROC fails here (before the file
    // is opened, as in do_execveat_common).
    crate::kernel::nproc::check_exec(&ctx.t.thread, &ctx.kernel().tasks)?;
    let [argv, envp] = read_args(ctx, argv, envp).map_err(|e| {
        // Linux opens the file before it reads argv and envp (alloc_bprm).
        let cwd = ctx.process().cwd.lock().unwrap().clone();
        crate::loader::open_exec(ctx.kernel(), ctx.process().pid, &cwd, &path).err().map_or(e, |open| open.errno)
    })?;
    let process = ctx.process().clone();
    let cred = ctx.t.thread.cred();
    // A forked child's new program runs on the normal entry path: its
    // host process of its own goes with its old memory.
    let was_forked = ctx.t.mm.lock().unwrap().own_host();
    let image = crate::loader::prepare_named(ctx.kernel(), &process, &path, execfn, argv, envp, cred.aux_ids())
        .map_err(|e| {
            if !e.message.is_empty() {
                ctx.note(&e.message);
            }
            e.errno
        })?;
    // Linux's de_thread: the other threads are gone before the new image
    // replaces the memory they run in.
    kill_other_threads(ctx);
    // A thread that did not lead its process takes the leader's place and
    // id, as in de_thread (its old tid is free again).
    ctx.t.thread.become_leader();
    // Set-id bits are ignored (as under no_new_privs): only the saved ids
    // and the capabilities change.
    *ctx.t.thread.cred.lock().unwrap() = cred.for_exec();
    // Linux's exec_mm_release: the robust list of the old image is walked
    // and forgotten, and the PI locks the thread holds are let go, while
    // the old memory is still there.
    let robust = std::mem::take(&mut ctx.t.thread.state.lock().unwrap().robust_list);
    if robust != 0 {
        crate::kernel::futex::exit_robust_list(&ctx.mem(), robust, ctx.tid());
    }
    ctx.kernel().pi_futexes.owner_exited(&ctx.t.thread, false);
    let start = image.install(&process);
    ctx.t.mm = process.mm();
    let closed = process.files.lock().unwrap().close_on_exec();
    crate::fs::locks::closed(process.pid, closed.iter().map(|e| &e.file));
    drop(closed);
    process.signals.lock().unwrap().reset_for_exec();
    // POSIX timers do not survive execve (ITIMER_REAL does).
    process.posix_timers.lock().unwrap().clear();
    // comm becomes the new program's name (procfs falls back to it).
    ctx.t.thread.state.lock().unwrap().comm = [0; 16];
    *ctx.frame.regs = start.regs;
    ctx.frame.fs_base = start.fs_base;
    ctx.frame.gs_base = start.gs_base;
    ctx.frame.reset_xstate = true;
    process.release_vfork_parent();
    let now_forked = ctx.t.mm.lock().unwrap().own_host();
    if ctx.t.vfork_parent.is_some() || was_forked || now_forked {
        // It ran on its parent's host thread: it goes on on its own.
        ctx.t.hand_off = Some(start);
    }
    Ok(0)
}

/// execve leaves only the calling thread (Linux's de_thread).
fn kill_other_threads(ctx: &Ctx) {
    let me = &ctx.t.thread;
    let others: Vec<Arc<Thread>> =
        ctx.process().threads.lock().unwrap().iter().filter(|t| !Arc::ptr_eq(t, me)).cloned().collect();
    for t in &others {
        t.kill_requested.store(true, std::sync::atomic::Ordering::SeqCst);
        ctx.kernel().interrupt(t);
    }
    let process = ctx.process();
    let _ = ctx.t.wait_for(Some(&process.thread_left), None, Wake::OnCondition, || {
        Ok((process.threads.lock().unwrap().len() == 1).then_some(()))
    });
}

const WNOHANG: i32 = 1;
const WUNTRACED: i32 = 2;
const WEXITED: i32 = 4;
const WCONTINUED: i32 = 8;
const WNOWAIT: i32 = 0x0100_0000;
const WNOTHREAD: i32 = 0x2000_0000;
const WALL: i32 = 0x4000_0000;
const WCLONE: i32 = 0x8000_0000u32 as i32;

/// The status word wait4 reports.
fn wait_status(s: ExitStatus) -> i32 {
    match s {
        ExitStatus::Code(c) => (c & 0xff) << 8,
        ExitStatus::Signal { signo, core } => signo | if core { 0x80 } else { 0 },
    }
}

/// A reaped child's CPU time counts for the parent's RUSAGE_CHILDREN.
fn add_child_usage(ctx: &Ctx, z: &Zombie) {
    let tv = |t: libc::timeval| std::time::Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let mut u = ctx.process().children_usage.lock().unwrap();
    u.0 += tv(z.rusage.ru_utime);
    u.1 += tv(z.rusage.ru_stime);
}

fn write_rusage(ctx: &Ctx, ptr: u64, z: Option<&Zombie>) -> Result<(), Errno> {
    if ptr != 0 {
        let r = z.map_or_else(crate::host::pod::zeroed::<libc::rusage>, |z| z.rusage);
        ctx.mem().write(ptr, &r)?;
    }
    Ok(())
}

/// Waits until one of the caller's children is what `q` looks for (not
/// with `nohang`: Ok(None) then), woken by every change in the task table;
/// a signal ends the wait (ERESTARTSYS).
fn wait_child(ctx: &Ctx, q: &WaitQuery, nohang: bool) -> Result<Option<(u32, WaitResult)>, Errno> {
    let tasks = &ctx.kernel().tasks;
    let found = ctx.t.wait_for(Some(&tasks.changed), None, Wake::OnSignal, || match tasks.find_waitable(q)? {
        None if nohang => Ok(Some(None)),
        None => Ok(None),
        found => Ok(Some(found)),
    })?;
    Ok(found.flatten())
}

pub fn sys_wait4(
    ctx: &mut Ctx,
    pid: i32,
    UserPtr(status): UserPtr,
    Hex(options): Hex<i32>,
    UserPtr(rusage): UserPtr,
) -> SysResult {
    if options & !(WNOHANG | WUNTRACED | WCONTINUED | WNOTHREAD | WALL | WCLONE) != 0 {
        return Err(Errno::EINVAL);
    }
    // -INT_MIN is no process group (kernel_wait4).
    if pid == i32::MIN {
        return Err(Errno::ESRCH);
    }
    let which = match pid {
        -1 => WaitFor::Any,
        0 => WaitFor::Group(0),
        p if p < -1 => WaitFor::Group(p.unsigned_abs()),
        p => WaitFor::Pid(p as u32),
    };
    let q = WaitQuery {
        parent: ctx.process().pid,
        which,
        reap: true,
        exited: true,
        stopped: options & WUNTRACED != 0,
        continued: options & WCONTINUED != 0,
    };
    let found = wait_child(ctx, &q, options & WNOHANG != 0)?;
    let Some((pid, r)) = found else { return Ok(0) };
    let word = match r {
        WaitResult::Exited(z) => {
            add_child_usage(ctx, &z);
            write_rusage(ctx, rusage, Some(&z))?;
            wait_status(z.status)
        }
        WaitResult::Stopped(sig) => {
            write_rusage(ctx, rusage, None)?;
            (sig << 8) | 0x7f
        }
        WaitResult::Continued => {
            write_rusage(ctx, rusage, None)?;
            0xffff
        }
    };
    if status != 0 {
        ctx.mem().write(status, &word)?;
    }
    Ok(pid as u64)
}

const P_ALL: i32 = 0;
const P_PID: i32 = 1;
const P_PGID: i32 = 2;
const P_PIDFD: i32 = 3;
use crate::abi::{CLD_CONTINUED, CLD_DUMPED, CLD_EXITED, CLD_KILLED, CLD_STOPPED};

pub fn sys_waitid(
    ctx: &mut Ctx,
    idtype: i32,
    id: i32,
    UserPtr(infop): UserPtr,
    Hex(options): Hex<i32>,
    UserPtr(rusage): UserPtr,
) -> SysResult {
    let found = waitid_find(ctx, idtype, id, options);
    // Linux writes the rusage of a child found, then the siginfo whatever
    // the outcome, an error's too (zeroed): a bad infop is EFAULT even then.
    if let Ok(Some((_, r))) = &found {
        write_rusage(ctx, rusage, if let WaitResult::Exited(z) = r { Some(z) } else { None })?;
    }
    write_siginfo(ctx, infop, found.as_ref().ok().and_then(Option::as_ref))?;
    found.map(|_| 0)
}

fn waitid_find(ctx: &Ctx, idtype: i32, id: i32, options: i32) -> Result<Option<(u32, WaitResult)>, Errno> {
    if options & !(WNOHANG | WUNTRACED | WEXITED | WCONTINUED | WNOWAIT | WNOTHREAD | WALL | WCLONE) != 0
        || options & (WEXITED | WUNTRACED | WCONTINUED) == 0
    {
        return Err(Errno::EINVAL);
    }
    let mut nohang = options & WNOHANG != 0;
    let mut pidfd_nonblocking = false;
    let which = match idtype {
        P_ALL => WaitFor::Any,
        P_PID if id > 0 => WaitFor::Pid(id as u32),
        P_PGID if id >= 0 => WaitFor::Group(id as u32),
        P_PIDFD if id >= 0 => {
            let file = super::pidfd::pidfd_of(ctx, super::args::Fd(id))?;
            // An O_NONBLOCK pidfd makes the wait WNOHANG, and a child
            // still running EAGAIN.
            pidfd_nonblocking = crate::host::fs::getfl(file.fd())? & libc::O_NONBLOCK != 0;
            nohang |= pidfd_nonblocking;
            WaitFor::Pid(file.pidfd().unwrap().id())
        }
        _ => return Err(Errno::EINVAL),
    };
    // waitid(WSTOPPED) is wait4's WUNTRACED; without WEXITED an exited
    // child is neither reported nor reaped (regression: it was reaped).
    let q = WaitQuery {
        parent: ctx.process().pid,
        which,
        reap: options & WNOWAIT == 0,
        exited: options & WEXITED != 0,
        stopped: options & WUNTRACED != 0,
        continued: options & WCONTINUED != 0,
    };
    match wait_child(ctx, &q, nohang)? {
        None if pidfd_nonblocking && options & WNOHANG == 0 => Err(Errno::EAGAIN),
        found => Ok(found),
    }
}

fn write_siginfo(ctx: &Ctx, infop: u64, found: Option<&(u32, WaitResult)>) -> Result<(), Errno> {
    if infop == 0 {
        return Ok(());
    }
    // Linux writes these fields only: si_signo, si_errno, si_code, then
    // si_pid, si_uid, si_status.
    let mut info = [0i32; 7];
    if let Some((pid, r)) = found {
        info[0] = libc::SIGCHLD;
        let (code, status, uid) = match *r {
            WaitResult::Exited(z) => match z.status {
                ExitStatus::Code(c) => (CLD_EXITED, c, z.uid),
                ExitStatus::Signal { signo, core: true } => (CLD_DUMPED, signo, z.uid),
                ExitStatus::Signal { signo, core: false } => (CLD_KILLED, signo, z.uid),
            },
            WaitResult::Stopped(sig) => (CLD_STOPPED, sig, ctx.kernel().process_uid(*pid)),
            WaitResult::Continued => (CLD_CONTINUED, libc::SIGCONT, ctx.kernel().process_uid(*pid)),
        };
        info[2] = code;
        info[4] = *pid as i32;
        info[5] = uid as i32;
        info[6] = status;
    }
    ctx.mem().write(infop, &<[i32; 3]>::try_from(&info[..3]).unwrap())?;
    ctx.mem().write(infop + 16, &<[i32; 3]>::try_from(&info[4..]).unwrap())
}

pub fn sys_setpgid(ctx: &mut Ctx, pid: i32, pgid: i32) -> SysResult {
    // Only the group is judged (pgid 0 meaning pid); a negative pid is
    // one no process has (ESRCH).
    if pgid < 0 || (pgid == 0 && pid < 0) {
        return Err(Errno::EINVAL);
    }
    if pid < 0 {
        return Err(Errno::ESRCH);
    }
    ctx.kernel().tasks.setpgid(ctx.process().pid, pid as u32, pgid as u32).map(|_| 0)
}

fn ids_of(ctx: &Ctx, pid: i32) -> Result<(u32, u32), Errno> {
    let pid = if pid == 0 { ctx.process().pid } else { pid as u32 };
    ctx.kernel().tasks.ids(pid).ok_or(Errno::ESRCH)
}

pub fn sys_getpgid(ctx: &mut Ctx, pid: i32) -> SysResult {
    ids_of(ctx, pid).map(|(pgid, _)| pgid as u64)
}

pub fn sys_getpgrp(ctx: &mut Ctx) -> SysResult {
    ids_of(ctx, 0).map(|(pgid, _)| pgid as u64)
}

pub fn sys_getsid(ctx: &mut Ctx, pid: i32) -> SysResult {
    ids_of(ctx, pid).map(|(_, sid)| sid as u64)
}

pub fn sys_setsid(ctx: &mut Ctx) -> SysResult {
    ctx.kernel().tasks.setsid(ctx.process().pid).map(|s| s as u64)
}
