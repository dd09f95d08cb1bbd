//! The syscall layer: one table of every syscall nomu knows, one module per
//! family of handlers, and the strace-like `--trace`.
//!
//! A handler takes its arguments typed as Linux reads them (args.rs; the
//! table decodes the registers) and returns `Ok(value)` or `Err(Errno)`;
//! the conversion to `-errno` in rax happens once, here.

mod args;
mod coherent;
mod cred;
mod events;
mod exec;
mod file_ops;
mod fs;
mod info;
mod io;
mod ipc;
mod locks;
mod memory;
pub mod names;
mod net;
mod pidfd;
mod process;
mod sched;
mod signal;
mod splice;
pub mod table;
mod time;
mod trace;
mod wait;
mod xattr;

use crate::abi::errno::Errno;
use crate::entry::TrapFrame;
use crate::kernel::process::Process;
use crate::kernel::trap::ThreadCtx;
use crate::kernel::Kernel;
use crate::mm::uaccess::UserMem;
use std::sync::Arc;

pub type SysResult = Result<u64, Errno>;
pub type Args = [u64; 6];

/// What a handler can reach: the calling thread and its trap frame.
pub struct Ctx<'a, 'f> {
    pub t: &'a mut ThreadCtx,
    pub frame: &'a mut TrapFrame<'f>,
}

impl Ctx<'_, '_> {
    pub fn kernel(&self) -> &'static Kernel {
        self.t.kernel
    }

    pub fn process(&self) -> &Arc<Process> {
        &self.t.thread.process
    }

    pub fn tid(&self) -> u32 {
        self.t.thread.tid()
    }

    /// The calling process's address space.
    pub fn space(&self) -> &crate::mm::space::SharedSpace {
        &self.t.mm
    }

    pub fn mem(&self) -> UserMem<'_> {
        UserMem::new(&self.t.mm)
    }
}

/// Handles the syscall the guest thread trapped on.
#[inline(always)]
pub fn handle(t: &mut ThreadCtx, frame: &mut TrapFrame) {
    let nr = frame.regs.syscall_nr();
    let args = frame.regs.syscall_args();
    let def = table::lookup(nr);
    t.syscall_nr = Some(nr);
    let mut ctx = Ctx { t, frame };
    let pre = ctx.kernel().trace.then(|| trace::before(&ctx, def, &args));
    let result = match def {
        Some(d) => (d.handler)(&mut ctx, &args),
        None => Err(Errno::ENOSYS),
    };
    // Nothing the mermap mapped outlives the call (host/mermap.rs).
    crate::host::mermap::check_empty();
    if def.is_some_and(|d| d.changes_inodes) {
        ctx.kernel().inode_changes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    let quiet_epipe = ctx.t.quiet_epipe.take();
    if result == Err(Errno::EPIPE) && def.is_some_and(|d| d.raises_sigpipe) && !quiet_epipe {
        ctx.t.raise(crate::kernel::signal::SigInfo::kernel(libc::SIGPIPE));
    }
    if let Some(pre) = pre {
        trace::after(&ctx, nr, def, &args, pre, &result);
    }
    ctx.frame.regs.rax = match result {
        Ok(v) => v,
        Err(e) => (-(e.0 as i64)) as u64,
    };
    // rt_sigreturn restored a whole context: nothing to restart.
    if nr == libc::SYS_rt_sigreturn as u64 {
        ctx.t.syscall_nr = None;
    }
}

impl Ctx<'_, '_> {
    /// Adds a reason to this call's --trace line (why it failed).
    pub fn note(&self, why: &str) {
        if self.kernel().trace {
            self.kernel().log(&format!("[{}] nomu: {why}", self.tid()));
        }
    }
}

/// Arguments arrive as u64 registers; Linux reads an `int` from the low 32 bits.
pub fn int(v: u64) -> i32 {
    v as u32 as i32
}
