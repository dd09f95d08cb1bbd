//! Entry paths: how a guest thread's syscalls and faults reach the kernel.
//!
//! An entry path runs guest code on the current host thread and turns every
//! guest syscall or fault into a call of [`GuestKernel::on_trap`] with the
//! guest's registers. The kernel never learns which path is in use; each path
//! is one implementation of [`EntryPath`]. Today there is `seccomp` (SIGSYS
//! in the same host process); zpoline rewriting, ptrace SYSEMU and a split
//! CLONE_VM process are further implementations of the same interface.
//!
//! This module and `host` are the only places with `unsafe` code.

pub mod kstack;
pub mod seccomp;

/// A guest thread's general-purpose registers, in the order of the Linux
/// x86-64 `struct sigcontext` (so the seccomp path can hand the kernel the
/// registers the host saved, without copying).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct GuestRegs {
    pub r8: u64,
    pub r9: u64,
    pub r10: u64,
    pub r11: u64,
    pub r12: u64,
    pub r13: u64,
    pub r14: u64,
    pub r15: u64,
    pub rdi: u64,
    pub rsi: u64,
    pub rbp: u64,
    pub rbx: u64,
    pub rdx: u64,
    pub rax: u64,
    pub rcx: u64,
    pub rsp: u64,
    pub rip: u64,
    pub rflags: u64,
}

impl GuestRegs {
    /// Syscall number and arguments, as the x86-64 syscall ABI passes them.
    pub fn syscall_nr(&self) -> u64 {
        self.rax
    }

    pub fn syscall_args(&self) -> [u64; 6] {
        [self.rdi, self.rsi, self.rdx, self.r10, self.r8, self.r9]
    }
}

/// A fault raised by guest code (the host signal it caused).
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    pub signo: i32,
    pub code: i32,
    pub addr: u64,
    /// The CPU's trap number and error code, for the guest's sigcontext.
    pub trapno: u64,
    pub err: u64,
}

#[derive(Clone, Copy, Debug)]
pub enum Trap {
    Syscall,
    Fault(Fault),
    /// The thread was kicked out of guest code (a signal is waiting for it).
    Interrupt,
}

/// The guest state a trap exposes to the kernel. Changes made here take
/// effect when the guest resumes.
pub struct TrapFrame<'a> {
    pub regs: &'a mut GuestRegs,
    pub fs_base: u64,
    /// Resume with the FPU and vector registers in their initial state
    /// (execve, entering a signal handler).
    pub reset_xstate: bool,
    /// The guest's saved extended state, in the xsave layout of a Linux
    /// signal frame (legacy area, software-reserved bytes, xsave header and
    /// components), when the entry path has one.
    pub xstate: Option<&'a mut [u8]>,
}

/// What the guest thread does after a trap.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Resume {
    /// Continue guest code with the (possibly edited) frame.
    Guest,
    /// Leave guest mode for good: `EntryPath::run` returns.
    Exit,
}

/// The kernel side of a guest thread, as an entry path sees it.
pub trait GuestKernel {
    fn on_trap(&mut self, trap: Trap, frame: &mut TrapFrame) -> Resume;
}

/// The initial state of a guest thread (after execve, or for a new thread).
#[derive(Clone, Copy, Default, Debug)]
pub struct StartState {
    pub regs: GuestRegs,
    pub fs_base: u64,
}

pub trait EntryPath: Send + Sync {
    fn name(&self) -> &'static str;
    /// Runs guest code on this host thread from `start` until the kernel
    /// answers a trap with [`Resume::Exit`].
    fn run(&self, start: StartState, kernel: &mut dyn GuestKernel);
    /// Makes the guest thread on host thread `host_tid` trap with
    /// [`Trap::Interrupt`] as soon as it runs guest code.
    fn interrupt(&self, host_tid: i32);
}
