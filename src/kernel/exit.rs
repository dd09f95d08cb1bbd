//! The one way a guest thread and its process end, in Linux's order
//! (do_exit: exit_mm_release, leaving the thread group, exit_mm,
//! exit_files, exit_notify; gVisor's Task exit runs the same stages).
//!
//! # A process's end, in this order, with no reaper
//!
//! A process is torn down by its own last thread, on its own host thread,
//! before anything is reported to its parent; no other thread (no reaper,
//! no parent, no /proc reader that happened to hold a reference) does any
//! of it, and nothing is left for later. This is seed 004's order
//! (OpenBSD's "R.I.P the reaper": every thread off the user page tables,
//! flush the TLB, tear down the pmap, then the vmspace), in nomu's terms:
//!
//! 1. **Every other thread of the process has left guest code and is
//!    parked.** exit_group, a fatal signal and another thread's execve set
//!    the process's (or the thread's) death and kick every other thread
//!    (`Kernel::interrupt`): one in guest code traps at once (the kick is a
//!    host signal, or its CLONE_VM host process's on split and sysemu), one
//!    blocked in a host call has that call ended (host::blocking), one in
//!    `wait_for` has its wake word moved, one faulting traps anyway; each
//!    then leaves at its trap (`on_trap` answers Resume::Exit: its guest
//!    context stays parked in the entry path, which never resumes it) and
//!    ends here, out of the thread group. The thread that leaves the group
//!    last runs the rest: no thread can touch the process's pages any more
//!    (a syscall that pinned guest memory finished before its thread left).
//! 2. **The host's view of its memory is put back**: the host protections
//!    are back to read-write (what free pages have), one host call per run
//!    of pages: the host side of "flush the TLB". Where a VMA showed frames
//!    held elsewhere (a page cache's pages, mm::mapping), the direct map's
//!    view of them is released, and is the process's no more: no VMA
//!    holds it, nothing translates through it, the range's own pages are
//!    free after step 4 and charged to nobody. What the host still shows
//!    there is the page cache's read-only file pages, which the cache
//!    keeps anyway; the view goes with them (reclaim, drop_caches, a
//!    changed file) or when the allocator hands the range out for
//!    anything else, which makes the pages fresh then as it zeroes a
//!    dirty free page. Nothing of the process is deferred: no record of
//!    it is left and no thread works on its behalf after the wait. And a
//!    program exec'd again at the same place takes the same frames up
//!    with no host call: putting the view back here instead (an mmap per
//!    run, then an mprotect and an mmap per run at the next exec, and the
//!    page faults that fill the host's tables again) took a vfork +
//!    execve + wait from 0.47x to 0.91x native and an exit + wait of a
//!    child that touched nothing from 0.63x to 1.35x (zpoline, AMD EPYC
//!    VM, same runs).
//! 3. **Per-page entry-path state is cleared**: zpoline's and rewrite's
//!    syscall-site marks in the pages that were ever executable, so a
//!    program loaded there next is not taken for the old one.
//! 4. **Its mappings and pages go back to the allocator** (a shared file
//!    mapping written back to its file first; a System V segment's pages
//!    stay the segment's, only the attachment goes; a page cache's pages
//!    go back by reference, kept for the next user), then its SEM_UNDO
//!    adjustments are applied and its program file is released (writable
//!    again: ETXTBSY ends). Steps 2 to 4 are mm::space's `tear_down`, run
//!    by the last process that uses the address space (a CLONE_VM child
//!    shares its parent's until it execs).
//! 5. **Its descriptors are closed** (a pipe's reader sees EOF from here
//!    on; its record locks go with them).
//! 6. **Only then is it a zombie**: its children reparented, SIGCHLD sent,
//!    the parent's wait woken. Whatever the parent sees after its wait
//!    returns (`/proc/meminfo`, a pipe's EOF, a writable program file) is
//!    the child's end, complete.
//!
//! Why this order: pages are freed only when no thread can touch them (1
//! before 4), and with no host protection or entry-path state left that a
//! new owner could trip on (2 and 3 before 4); data written through a
//! shared mapping reaches its file before its descriptor could be the
//! last reference (4 before 5); and a parent woken by the exit finds the
//! memory and descriptors free, as Linux's do_exit promises (everything
//! before 6). Its cost is that of what the process touched, not of what it
//! mapped: every step works on runs of pages (mm::space, mm::phys).
//!
//! # The stages as types
//!
//! Each stage is a type that only the stage before it can make, and each
//! step consumes its stage, so from outside this module a step can be
//! neither skipped, repeated nor run out of order:
//!
//! ```text
//! begin(thread)            -> Exiting       a thread ends once (a dying vfork
//!                                           parent may be ended on its behalf)
//! Exiting::release_user    -> Released      robust list, clear_child_tid (its
//!                                           memory still there)
//! Released::leave_group    -> Ended::Thread, or LastThread (step 1: every
//!                                           other thread has left)
//! LastThread::exit_mm      -> MmReleased    steps 2-4: the address space (and
//!                                           with it its shared memory
//!                                           attachments), its SEM_UNDO
//!                                           adjustments, its program file
//! MmReleased::exit_files   -> FilesClosed   step 5: the descriptor table
//! FilesClosed::notify      -> Exited        step 6: children reparented,
//!                                           zombie kept (or reaped), SIGCHLD
//!                                           to the parent
//! Exited::release_vfork_parent              the vfork parent goes on (last, by
//!                                           the host thread that ran it, once
//!                                           that thread is free again)
//! ```
//!
//! A process that never ran (its first thread could not start) has no exit
//! to report: [`discard_unborn`] frees what it had and sends no SIGCHLD.

use super::process::{ExitStatus, Process, Thread};
use super::signal::{self, SigInfo};
use super::Kernel;
use crate::abi::{CLD_DUMPED, CLD_EXITED, CLD_KILLED};
use crate::mm::uaccess::UserMem;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// How a guest thread's end came out.
pub enum Ended {
    /// The thread left; its process goes on.
    Thread,
    /// The process ended with this thread; its vfork parent, if any, still
    /// waits for [`Exited::release_vfork_parent`].
    Process(Exited),
}

/// Ends `thread` with `status` (its process's group exit status wins when
/// there is one), and its process with it if it was the last thread.
pub fn exit_thread(kernel: &'static Kernel, thread: &Arc<Thread>, status: ExitStatus) -> Ended {
    let Some(exiting) = begin(kernel, thread, status) else {
        return Ended::Thread; // ended already, on its behalf
    };
    match exiting.release_user().leave_group() {
        None => Ended::Thread,
        Some(last) => Ended::Process(last.exit_mm().exit_files().notify()),
    }
}

/// Frees what a process whose first thread never ran had, and forgets it:
/// no exit status, no SIGCHLD.
pub fn discard_unborn(kernel: &'static Kernel, process: &Process) {
    release_mm(kernel, process);
    drop(std::mem::take(&mut *process.files.lock().unwrap()));
    kernel.tasks.forget_unborn(process.pid);
}

/// A thread that has begun to end.
struct Exiting<'a> {
    kernel: &'static Kernel,
    thread: &'a Arc<Thread>,
    status: ExitStatus,
}

fn begin<'a>(kernel: &'static Kernel, thread: &'a Arc<Thread>, status: ExitStatus) -> Option<Exiting<'a>> {
    if thread.left.swap(true, Ordering::AcqRel) {
        return None;
    }
    Some(Exiting { kernel, thread, status })
}

impl<'a> Exiting<'a> {
    /// Linux's exit_mm_release, for every thread, the last one too, while
    /// the memory is still there: a process-shared robust mutex the thread
    /// held reports EOWNERDEAD to the next owner, and a CLONE_VM sharer
    /// waiting on clear_child_tid wakes.
    fn release_user(self) -> Released<'a> {
        let thread = self.thread;
        let (ctid, robust) = {
            let st = thread.state.lock().unwrap();
            (st.clear_child_tid, st.robust_list)
        };
        if ctid != 0 || robust != 0 {
            let mm = thread.process.mm();
            let mem = UserMem::new(&mm);
            if robust != 0 {
                super::futex::exit_robust_list(&mem, robust, thread.tid());
            }
            if ctid != 0 && mem.write(ctid, &0u32).is_ok() {
                if let Ok(w) = mem.checked_range(ctid, 4, true) {
                    let _ = crate::host::sys::futex_wake(w, 1, u32::MAX);
                }
            }
        }
        self.kernel.pi_futexes.owner_exited(thread, true);
        Released { exiting: self }
    }
}

/// A thread whose user-visible state is released.
struct Released<'a> {
    exiting: Exiting<'a>,
}

impl<'a> Released<'a> {
    /// Leaves the thread group; the last thread to leave ends the process.
    fn leave_group(self) -> Option<LastThread<'a>> {
        let Exiting { kernel, thread, status } = self.exiting;
        let process = &thread.process;
        let mut rusage = thread.rusage();
        let (user, system) = thread.cpu_time_in(&rusage);
        let last = {
            let mut threads = process.threads.lock().unwrap();
            threads.retain(|t| !Arc::ptr_eq(t, thread));
            threads.is_empty()
        };
        // Its CPU time stays its process's (Linux's __exit_signal).
        let (ended_user, ended_system) = {
            let mut ended = process.ended_threads_cpu.lock().unwrap();
            ended.0 += user;
            ended.1 += system;
            *ended
        };
        process.thread_left.notify();
        process.pidfd_wait.notify();
        if !last && process.group_exit.get().is_none() {
            // The process's pending signals it would have taken go to
            // another thread (Linux's exit_signals).
            let blocked = thread.state.lock().unwrap().sigmask;
            kernel.retarget_shared(thread, !blocked);
        }
        if !last {
            if kernel.trace {
                kernel.log(&format!("[{}] +++ thread exited +++", thread.tid()));
            }
            return None;
        }
        // The process's POSIX timers go with it (Linux's exit_itimers).
        process.posix_timers.lock().unwrap().clear();
        let status = process.group_exit.get().unwrap_or(status);
        if kernel.trace {
            let what = match status {
                ExitStatus::Code(c) => format!("exited with {c}"),
                ExitStatus::Signal { signo, core } => {
                    format!("killed by {}{}", signal::name(signo), if core { " (core dumped)" } else { "" })
                }
            };
            kernel.log(&format!("[{}] +++ {what} +++", thread.tid()));
        }
        // The zombie's usage is its process's: every thread's CPU time.
        rusage.ru_utime = super::process::duration_timeval(ended_user);
        rusage.ru_stime = super::process::duration_timeval(ended_system);
        Some(LastThread { kernel, thread, status, rusage })
    }
}

/// The last thread of a process, out of its thread group.
struct LastThread<'a> {
    kernel: &'static Kernel,
    thread: &'a Arc<Thread>,
    status: ExitStatus,
    rusage: libc::rusage,
}

impl<'a> LastThread<'a> {
    fn exit_mm(self) -> MmReleased<'a> {
        // Step 1 holds: this thread left the group last.
        debug_assert!(self.thread.process.threads.lock().unwrap().is_empty());
        release_mm(self.kernel, &self.thread.process);
        // exit_sem: its SEM_UNDO adjustments (its shared memory went with
        // the address space).
        self.kernel.ipc.exit_process(self.thread.process.pid);
        MmReleased { last: self }
    }
}

/// Steps 2 to 4 of the module comment: the process leaves its address
/// space, which is torn down here if no other process uses it (a CLONE_VM
/// sharer still running keeps it, and tears it down the same way when it
/// leaves it in turn); then its program file is released.
fn release_mm(kernel: &'static Kernel, process: &Process) {
    process.replace_mm(crate::mm::space::new_shared(kernel.phys));
    drop(process.program.lock().unwrap().take());
    // Its program file's last reference may be here (closed now, not when
    // it is reaped).
    drop(std::mem::replace(&mut *process.exe_file.lock().unwrap(), crate::kernel::process::ExeFile::Gone));
}

struct MmReleased<'a> {
    last: LastThread<'a>,
}

impl<'a> MmReleased<'a> {
    /// Closes every descriptor (a pipe's reader sees EOF from here on).
    fn exit_files(self) -> FilesClosed<'a> {
        drop(std::mem::take(&mut *self.last.thread.process.files.lock().unwrap()));
        // Its record locks go with its descriptors (Linux's close_files).
        crate::fs::locks::exited(self.last.thread.process.pid);
        FilesClosed { last: self.last }
    }
}

struct FilesClosed<'a> {
    last: LastThread<'a>,
}

impl FilesClosed<'_> {
    /// Linux's exit_notify: the children go to their new parent, and the
    /// process becomes a zombie for its parent's wait (or is reaped at once
    /// when its parent ignores SIGCHLD), which gets SIGCHLD.
    fn notify(self) -> Exited {
        let LastThread { kernel, thread, status, rusage } = self.last;
        let process = &thread.process;
        let (code, value) = match status {
            ExitStatus::Code(c) => (CLD_EXITED, c),
            ExitStatus::Signal { signo, core: false } => (CLD_KILLED, signo),
            ExitStatus::Signal { signo, core: true } => (CLD_DUMPED, signo),
        };
        let uid = thread.cred.lock().unwrap().uid;
        let info = SigInfo::child(code, process.pid, uid, value);
        let zombie = crate::kernel::task::Zombie { status, rusage, uid };
        // A session leader's terminal is its session's no more (Linux's
        // disassociate_ctty at a leader's exit): another may take it, from
        // before the parent's wait returns; its foreground group gets
        // SIGHUP (as a pty's does; guests' terminals are ptys).
        if let Some(tty) = kernel.terminals.release(process.pid) {
            for p in kernel.tasks.group_members(tty.foreground) {
                if p.pid != process.pid {
                    kernel.signal_process(&p, SigInfo::kernel(libc::SIGHUP));
                }
            }
        }
        let orphaned = kernel.tasks.exit(process.pid, zombie, |parent| {
            kernel.signal_process(parent, info);
        });
        for pgid in orphaned {
            for sig in [libc::SIGHUP, libc::SIGCONT] {
                for p in kernel.tasks.group_members(pgid) {
                    kernel.signal_process(&p, SigInfo::kernel(sig));
                }
            }
        }
        Exited { process: process.clone() }
    }
}

/// A process that has ended and been reported to its parent.
#[must_use = "its vfork parent waits until release_vfork_parent"]
pub struct Exited {
    process: Arc<Process>,
}

impl Exited {
    /// The last step: a vfork parent waiting for this child goes on.
    pub fn release_vfork_parent(self) {
        self.process.release_vfork_parent();
    }
}
