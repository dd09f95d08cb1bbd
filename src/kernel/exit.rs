//! The one way a guest thread and its process end, in Linux's order
//! (do_exit: exit_mm_release, leaving the thread group, exit_mm,
//! exit_files, exit_notify; gVisor's Task exit runs the same stages).
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
//! Released::leave_group    -> Ended::Thread, or LastThread
//! LastThread::exit_mm      -> MmReleased    the address space (and with it its
//!                                           shared memory attachments), then its
//!                                           SEM_UNDO adjustments; the space in this order:
//!                                           no thread of the process runs in it
//!                                           (this is the last); shared file
//!                                           mappings written back; its pages
//!                                           freed; its program file released
//!                                           (writable again: ETXTBSY ends)
//! MmReleased::exit_files   -> FilesClosed   the descriptor table
//! FilesClosed::notify      -> Exited        children reparented, zombie kept
//!                                           (or reaped), SIGCHLD to the parent
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
                super::futex::exit_robust_list(&mem, robust, thread.tid);
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
        let last = {
            let mut threads = process.threads.lock().unwrap();
            threads.retain(|t| !Arc::ptr_eq(t, thread));
            threads.is_empty()
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
                kernel.log(&format!("[{}] +++ thread exited +++", thread.tid));
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
            kernel.log(&format!("[{}] +++ {what} +++", thread.tid));
        }
        Some(LastThread { kernel, thread, status, rusage: thread.rusage() })
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
        release_mm(self.kernel, &self.thread.process);
        // exit_sem: its SEM_UNDO adjustments (its shared memory went with
        // the address space).
        self.kernel.ipc.exit_process(self.thread.process.pid);
        MmReleased { last: self }
    }
}

/// The process's address space, torn down in the order the module comment
/// states; a CLONE_VM sharer still using it keeps it (the last user frees
/// it the same way, in AddressSpace's drop).
fn release_mm(kernel: &'static Kernel, process: &Process) {
    let mm = process.set_mm(crate::mm::space::new_shared(kernel.phys));
    if let Ok(space) = Arc::try_unwrap(mm) {
        let Ok(mut space) = space.into_inner();
        space.release_all();
    }
    drop(process.program.lock().unwrap().take());
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
        kernel.tasks.exit(process.pid, zombie, |parent| {
            kernel.signal_process(parent, info);
        });
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
