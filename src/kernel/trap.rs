//! A guest thread as the entry path sees it: traps in, resume decisions out.

use super::process::{ExitStatus, Mm, Thread};
use super::signal;
use super::Kernel;
use crate::entry::{GuestKernel, Resume, StartState, Trap, TrapFrame};
use std::sync::Arc;

pub struct ThreadCtx {
    pub kernel: &'static Kernel,
    pub thread: Arc<Thread>,
    /// The process's address space (cached here; execve replaces it).
    pub mm: Mm,
    /// Set when the thread must leave guest mode for good.
    pub exit: Option<ExitStatus>,
}

/// Body of a guest thread's host thread: run guest code, then end the
/// process in this same context.
pub fn run_thread(kernel: &'static Kernel, thread: Arc<Thread>, start: StartState) {
    let mut ctx = ThreadCtx { kernel, thread: thread.clone(), mm: thread.process.mm(), exit: None };
    kernel.entry.run(start, &mut ctx);
    let status = ctx.exit.unwrap_or(ExitStatus::Code(0));
    let rusage = crate::host::sys::thread_rusage();
    drop(ctx);
    if kernel.trace {
        let what = match status {
            ExitStatus::Code(c) => format!("exited with {c}"),
            ExitStatus::Signal { signo, core } => {
                format!("killed by {}{}", signal::name(signo), if core { " (core dumped)" } else { "" })
            }
        };
        kernel.log(&format!("[{}] +++ {what} +++", thread.tid));
    }
    kernel.exit_process(&thread.process, status, rusage);
}

impl ThreadCtx {
    /// A signal raised against this thread by the kernel itself (SIGPIPE on
    /// EPIPE, a guest fault). Until guest handlers exist, a signal left at
    /// its default action ends the process as Linux would; an ignored one
    /// does nothing.
    pub fn raise(&mut self, signo: i32) {
        let act = self.thread.process.signals.lock().unwrap().get(signo);
        let fatal_fault = matches!(signo, libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP);
        let default = act.handler == signal::SIG_DFL || (fatal_fault && act.handler == signal::SIG_IGN);
        if default && !signal::default_ignores(signo) {
            self.exit = Some(ExitStatus::Signal { signo, core: signal::default_dumps_core(signo) });
        }
    }
}

impl GuestKernel for ThreadCtx {
    fn on_trap(&mut self, trap: Trap, frame: &mut TrapFrame) -> Resume {
        match trap {
            Trap::Syscall => crate::syscall::handle(self, frame),
            Trap::Fault(f) => {
                if self.kernel.trace {
                    self.kernel.log(&format!(
                        "[{}] --- {} {{si_code={}, si_addr={:#x}}} at rip {:#x} ---",
                        self.thread.tid,
                        signal::name(f.signo),
                        f.code,
                        f.addr,
                        frame.regs.rip
                    ));
                }
                // A fault cannot be ignored or blocked: with no handler to
                // run, the process dies of it.
                self.exit = Some(ExitStatus::Signal { signo: f.signo, core: signal::default_dumps_core(f.signo) });
            }
        }
        if self.exit.is_some() {
            Resume::Exit
        } else {
            Resume::Guest
        }
    }
}
