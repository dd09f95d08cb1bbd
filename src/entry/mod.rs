//! Entry paths: how a guest thread's syscalls and faults reach the kernel.
//!
//! An entry path runs guest code on the current host thread and turns every
//! guest syscall or fault into a call of [`GuestKernel::on_trap`] with the
//! guest's registers. The kernel never learns which path is in use; each path
//! is one implementation of [`EntryPath`]:
//! - `rewrite`: zpoline's second mode without page 0: each site patched
//!   into a jump to a trampoline of its own beside guest memory;
//! - `seccomp`: SIGSYS in the same host process, on the guest's host thread;
//! - `zpoline`: `syscall` instructions rewritten into calls to a trampoline
//!   at address 0, on the guest's host thread (seccomp catches first uses);
//! - `sysemu`: the guest thread runs in a CLONE_VM host process traced with
//!   PTRACE_SYSEMU by its nomu thread (classic UML);
//! - `split`: the guest thread runs in a CLONE_VM host process whose own
//!   SIGSYS handler passes each syscall to its nomu thread through shared
//!   memory and a futex.
//!
//! This module and `host` are the only places with `unsafe` code.

mod children;
pub mod dispatch;
pub mod host_signals;
pub mod kstack;
pub mod rewrite;
pub mod seccomp;
pub mod split;
pub mod sysemu;
pub mod zpoline;

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
    /// Linux takes the number as an `int`: the upper 32 bits of rax are
    /// ignored (do_syscall_64).
    pub fn syscall_nr(&self) -> u64 {
        self.rax as u32 as u64
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

/// The syscall ABI a SIGSYS reports for the 64-bit `syscall` instruction
/// (seccomp's si_arch); `int $0x80` and `sysenter` enter the i386 one.
pub(super) const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;

/// Whether the SIGSYS described by `info` is a 64-bit syscall.
///
/// # Safety
/// `info` must be the siginfo the host delivered with a SIGSYS.
pub unsafe fn sigsys_is_64bit(info: *const libc::siginfo_t) -> bool {
    // si_arch: after si_call_addr (8 bytes at 16) and si_syscall (4 at 24).
    // SAFETY: the caller's contract; the siginfo is 128 bytes.
    unsafe { (info as *const u8).add(28).cast::<u32>().read_unaligned() == AUDIT_ARCH_X86_64 }
}

/// The host's user code and stack segments for 64-bit code, and the code
/// segment of compat mode (__USER32_CS). A host frame shows USER32_CS after
/// an Intel CPU's `sysenter`: the host's entry for it switches the thread to
/// compat mode, takes the stack pointer from rbp and the return address from
/// its own landing pad, so the instruction's address is lost.
pub const USER_CS: u16 = 0x33;
pub const USER_DS: u16 = 0x2b;
pub const USER32_CS: u16 = 0x23;

/// What a guest's i386 syscall (`int $0x80`; `sysenter` on CPUs where it
/// reaches the kernel) raises: nomu has no i386 ABI, so it is Linux with
/// IA32 emulation off, a general protection fault on the instruction
/// (SIGSEGV, SI_KERNEL, address 0). After `int $0x80`, `regs.rip` (after
/// the 2-byte instruction) moves back onto it. After `sysenter` (`cs` is
/// USER32_CS) the CPU kept neither rip nor rsp: the fault is taken where
/// the host would have returned, on the stack at rbp, as natively (where
/// only a handler on an alternate stack can run); the caller puts the
/// 64-bit segments back.
pub fn i386_syscall_fault(regs: &mut GuestRegs, cs: u16) -> Trap {
    if cs != USER32_CS {
        regs.rip = regs.rip.wrapping_sub(2);
    }
    Trap::Fault(I386_SYSCALL_FAULT)
}

/// The host signals a CPU exception raises in guest code.
pub const FAULT_SIGNALS: [i32; 5] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE, libc::SIGTRAP];

/// What a native bad return to user mode raises (Linux turns a faulting
/// IRET into the user's own #GP): a guest whose sigreturn frame held a
/// non-canonical rip takes it at the way back's last instruction (an
/// iretq, or zpoline's jump), as if at that rip.
pub const BAD_RETURN_FAULT: Fault =
    Fault { signo: libc::SIGSEGV, code: crate::abi::SI_KERNEL, addr: 0, trapno: 13, err: 0 };

/// The fault of i386_syscall_fault; its #GP error code names IDT vector 0x80.
const I386_SYSCALL_FAULT: Fault =
    Fault { signo: libc::SIGSEGV, code: crate::abi::SI_KERNEL, addr: 0, trapno: 13, err: (0x80 << 3) | 2 };

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
    pub gs_base: u64,
    /// Resume with the FPU and vector registers in their initial state
    /// (execve, entering a signal handler).
    pub reset_xstate: bool,
    /// The guest's saved extended state. Only signal delivery and sigreturn
    /// look at it, so an entry path for which fetching it costs (sysemu)
    /// fetches it on first use.
    pub xstate: &'a mut dyn ExtendedState,
    /// A syscall instruction this trap was the first use of, which the
    /// entry path has now prepared (see [`EntryPath::prepare_syscall_site`]).
    pub new_site: Option<u64>,
}

/// The xsave components a program owns and rt_sigreturn restores from its
/// frame: x87, SSE, AVX and AVX-512 (opmask, ZMM_Hi256, Hi16_ZMM). Others
/// (PKRU, CET, AMX...) stay as the host has them.
pub const GUEST_XSTATE_COMPONENTS: u64 = 0b1110_0111;

/// Access to a trapped guest thread's extended (FPU, SSE, AVX...) state.
pub trait ExtendedState {
    /// The state in the xsave layout of a Linux signal frame (legacy area,
    /// software-reserved bytes, xsave header and components); edits take
    /// effect when the guest resumes. None when the path has no saved state
    /// (the guest's is in its initial state).
    fn image(&mut self) -> Option<&mut [u8]>;

    /// Like `image`, for a caller that replaces every component in
    /// [`GUEST_XSTATE_COMPONENTS`] (rt_sigreturn): a path for which
    /// fetching costs may hand back an older image of this thread when its
    /// state has no other components.
    fn image_to_overwrite(&mut self) -> Option<&mut [u8]> {
        self.image()
    }
}

/// Writes the software-reserved bytes (FP_XSTATE_MAGIC1, the size of the
/// whole image, the features, the xsave size) and the trailing
/// FP_XSTATE_MAGIC2 that a Linux signal frame's xsave image carries, into
/// `image` (an xsave area plus 4 bytes), so sigframe.rs can treat an image
/// an entry path made itself as one the host saved.
pub fn write_frame_sw_bytes(image: &mut [u8], features: u64) {
    use crate::abi::xsave;
    let size = image.len() - 4;
    let sw = &mut image[xsave::SW_RESERVED..xsave::HEADER];
    sw.fill(0);
    sw[0..4].copy_from_slice(&xsave::FP_XSTATE_MAGIC1.to_le_bytes());
    sw[4..8].copy_from_slice(&((size + 4) as u32).to_le_bytes()); // extended_size
    sw[8..16].copy_from_slice(&features.to_le_bytes());
    sw[16..20].copy_from_slice(&(size as u32).to_le_bytes());
    image[size..].copy_from_slice(&xsave::FP_XSTATE_MAGIC2.to_le_bytes());
}

/// An image already in memory (the seccomp path's signal frame).
impl ExtendedState for Option<&mut [u8]> {
    fn image(&mut self) -> Option<&mut [u8]> {
        self.as_deref_mut()
    }
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
    /// Changes to the memory map of a guest running in a host process of
    /// its own (split::run_own_process), for it to make before it resumes.
    /// The pages to free go along: see [`free_after_host_ops`](Self::free_after_host_ops).
    fn take_host_ops(&mut self) -> (Vec<crate::mm::space::HostOp>, crate::mm::space::HostFrees) {
        Default::default()
    }
    /// The host process has made the changes [`take_host_ops`](Self::take_host_ops)
    /// gave (or runs no guest code until it has): their pages may go.
    fn free_after_host_ops(&mut self, _frees: crate::mm::space::HostFrees) {}
    /// What ends the guest, as SIGKILL does, when the host process of its
    /// own that it runs in dies by itself (killed from the host, or by the
    /// host's OOM killer); called from another host thread.
    fn on_host_process_lost(&self) -> Option<std::sync::Arc<dyn Fn() + Send + Sync>> {
        None
    }
    /// The guest's 8 bytes at `addr`, if it may read them.
    fn read_guest_u64(&mut self, _addr: u64) -> Option<u64> {
        None
    }
    /// The physical address of the guest's byte at `addr` (the address
    /// itself in nomu's own process; a forked child's frame elsewhere).
    fn guest_physical(&mut self, _addr: u64) -> Option<u64> {
        None
    }
    /// The physical address of a forked child's code at `addr` when that
    /// code is a copy made for it alone, executable and not writable (see
    /// `AddressSpace::own_code_copy`): an entry path may patch it there.
    fn own_code_copy(&mut self, _addr: u64) -> Option<u64> {
        None
    }
    /// What gettid and getpid may be answered with before the kernel: by
    /// a forked child's host process, without handing the syscall over
    /// (split's "Local answers"), and by zpoline's stub ("Answers in the
    /// stub"). The guest thread's tid and its process's pid; None when
    /// every syscall must reach the kernel (--trace shows each one).
    fn local_answers(&self) -> Option<(u32, u32)> {
        None
    }
    /// Lets the forked child's host process also answer rt_sigprocmask
    /// until its next trap (split's "Local answers"): the guest thread's
    /// signal mask and the signals pending for it or its process, which a
    /// local change may not unblock. None when the mask stays the
    /// kernel's (--trace, or more than one thread in the process).
    fn local_sigmask(&self) -> Option<(u64, u64)> {
        None
    }
    /// The kernel takes what the host process answered meanwhile (see
    /// `split::take_local_robust_list` and `split::take_local_sigmask`),
    /// before it looks at a trap.
    fn take_local_answers(&mut self) {}
}

/// The initial state of a guest thread (after execve, or for a new thread).
#[derive(Clone, Default, Debug)]
pub struct StartState {
    pub regs: GuestRegs,
    pub fs_base: u64,
    pub gs_base: u64,
    /// The extended state it starts with, in the layout of a Linux signal
    /// frame's xsave image: its creator's at the clone (Linux's fork and
    /// clone copy the whole FPU state). None: the initial state (execve).
    pub xstate: Option<std::sync::Arc<[u8]>>,
    /// A new thread of a forked child: the host thread made for it in its
    /// process's host process (split::new_forked_thread).
    pub host_thread: Option<std::sync::Arc<split::ForkedThread>>,
}

/// Copies the state a program owns ([`GUEST_XSTATE_COMPONENTS`]) from
/// `from` into `into`, both xsave images in the layout of a Linux signal
/// frame on this host (`into` the host's own, whose software-reserved
/// bytes and other components stay): a new thread starting with its
/// creator's extended state.
pub fn copy_guest_xstate(into: &mut [u8], from: &[u8]) {
    use crate::abi::xsave::{HEADER, SW_RESERVED};
    into[..SW_RESERVED].copy_from_slice(&from[..SW_RESERVED]);
    if into.len() < HEADER + 64 || from.len() < HEADER + 64 {
        return;
    }
    let word = |b: &[u8]| u64::from_le_bytes(b[HEADER..HEADER + 8].try_into().expect("8 bytes"));
    let bv = (word(into) & !GUEST_XSTATE_COMPONENTS) | (word(from) & GUEST_XSTATE_COMPONENTS);
    into[HEADER..HEADER + 8].copy_from_slice(&bv.to_le_bytes());
    let comps = crate::host::cpu::xstate_components();
    // The trailing FP_XSTATE_MAGIC2 stays `into`'s.
    let end = (into.len() - 4).min(from.len() - 4);
    for i in (2..64).filter(|&i| GUEST_XSTATE_COMPONENTS & (1 << i) != 0) {
        let (off, size) = comps[i];
        let stop = (off + size).min(end);
        if size > 0 && off >= HEADER + 64 && stop > off {
            into[off..stop].copy_from_slice(&from[off..stop]);
        }
    }
}

pub trait EntryPath: Send + Sync {
    fn name(&self) -> &'static str;
    /// Runs guest code on this host thread from `start` until the kernel
    /// answers a trap with [`Resume::Exit`].
    fn run(&self, start: StartState, kernel: &mut dyn GuestKernel);
    /// Makes the guest thread on host thread `host_tid` trap with
    /// [`Trap::Interrupt`] as soon as it runs guest code.
    fn interrupt(&self, host_tid: i32);
    /// Ends the host call (see host::blocking) that host thread `host_tid`
    /// waits in for its guest thread. On the in-process paths `interrupt`
    /// does that too: the guest thread and its kernel side are one host
    /// thread.
    fn interrupt_kernel_side(&self, _host_tid: i32) {}
    /// Whether guests may set their own %gs base (zpoline keeps its
    /// per-thread block there).
    fn supports_guest_gs(&self) -> bool {
        true
    }
    /// Gets the syscall instruction at `addr`, in code just loaded, ready
    /// as if it had trapped before (zpoline rewrites it; the others have
    /// nothing to do). A guess that is no `syscall` is left alone.
    fn prepare_syscall_site(&self, _addr: u64) {}
    /// The syscall instruction at `addr` just trapped for the first time,
    /// in a mapping that is not writable, and the path said it wants it
    /// ([`TrapFrame::new_site`]): patch it now, while other threads may run
    /// it (the rewrite path; zpoline rewrote it in the trap already).
    fn patch_syscall_site(&self, _addr: u64) {}
    /// Guest pages [addr, addr+len) were copied to the physical pages at
    /// `frame` for a forked child: the copy gets back the original bytes
    /// of whatever the path rewrote there (the child's syscalls trap).
    fn restore_copy(&self, _addr: usize, _frame: usize, _len: usize) {}
    /// A forked child's code at physical [src, src+len) was copied to
    /// `frame` for a forked child of its own: what the path noted about
    /// the first copy holds for this one (the rewrite path's kept patches).
    fn forked_copy(&self, _src: usize, _frame: usize, _len: usize) {}
    /// A forked child's frames [frame, frame+len) were made writable (its
    /// mprotect): as [`code_made_writable`](Self::code_made_writable) for
    /// the code in them.
    fn forked_code_made_writable(&self, _frame: usize, _len: usize) {}
    /// Physical pages [addr, addr+len) were freed or wiped: whatever the
    /// path noted about code in them (zpoline's rewritten sites) is void.
    fn memory_freed(&self, _addr: usize, _len: usize) {}
    /// Code at physical [src, src+len) was copied to [dst, dst+len) (a
    /// shared page's private copy, mm::mapping): what the path noted about
    /// the code there holds for the copy too (zpoline's marks).
    fn code_copied(&self, _dst: usize, _src: usize, _len: usize) {}
    /// Whether one page of code may run at several addresses (the page
    /// cache's text, mm::cache): not where the path patches code with
    /// jumps to code of its own at a fixed distance (the rewrite path).
    fn shares_code(&self) -> bool {
        true
    }
    /// For a path that cannot share code as it is ([`shares_code`] false):
    /// how far before an image's code the trampolines of its patches may
    /// need to be, for the image's code to be shared between processes
    /// with an area of them before the image (the rewrite path; see
    /// [`code_area`](Self::code_area)), and how far from the image's start
    /// such code may end; None when it cannot.
    ///
    /// [`shares_code`]: Self::shares_code
    fn trampoline_reach(&self) -> Option<(usize, usize)> {
        None
    }
    /// The page cache's physical pages [area, area+area_len) are the area
    /// of trampolines of the code at [text, text+text_len), which every
    /// process showing that code shows at the same distance before it.
    fn code_area(&self, _area: usize, _area_len: usize, _text: usize, _text_len: usize) {}
    /// Whether the path patches code in place in pages several processes
    /// show (zpoline rewrites a `syscall` in the page cache's page it runs
    /// from, at any time) in a way a forked child's host process cannot
    /// run: such pages are then copied for it, with their original bytes.
    fn patches_shared_code(&self) -> bool {
        false
    }
    /// Guest pages [addr, addr+len) were made writable (mprotect): code
    /// the path patched there gets its own bytes back, as the guest may
    /// rewrite it (the rewrite path).
    fn code_made_writable(&self, _addr: usize, _len: usize) {}
    /// How the path may claim pages of physical memory for code of its own
    /// near guest code (the rewrite path's trampolines): `claim(addr, len)`
    /// takes those pages for good, read+execute, if they are free.
    fn set_page_source(&self, _claim: Box<dyn Fn(usize, usize) -> bool + Send + Sync>) {}
    /// Whether `run` may be called from inside another guest thread's trap
    /// on the same host thread (it then returns to that trap when done):
    /// the in-process paths, where a vfork child runs on its parent's host
    /// thread while the parent waits.
    fn runs_nested(&self) -> bool {
        false
    }
}

/// The entry paths nomu knows, in the order nomu prefers them: the first
/// this host can run is the default. rewrite comes before zpoline, which is
/// no slower per syscall: zpoline's sled at page 0 must be executable, and
/// x86 without protection keys has no execute-only pages, so a read through
/// NULL does not fault there (the JVM's implicit null checks and Go's nil
/// checks rely on it; tests/guest/null_reads.c).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum EntryKind {
    Rewrite,
    Zpoline,
    Seccomp,
    Split,
    Sysemu,
}

impl EntryKind {
    pub const ALL: [EntryKind; 5] =
        [EntryKind::Rewrite, EntryKind::Zpoline, EntryKind::Seccomp, EntryKind::Split, EntryKind::Sysemu];

    pub fn name(self) -> &'static str {
        match self {
            EntryKind::Zpoline => "zpoline",
            EntryKind::Rewrite => "rewrite",
            EntryKind::Seccomp => "seccomp",
            EntryKind::Split => "split",
            EntryKind::Sysemu => "sysemu",
        }
    }

    pub fn parse(s: &str) -> Option<EntryKind> {
        EntryKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// How the path catches syscalls, for `nomu info`.
    pub fn summary(self) -> &'static str {
        match self {
            EntryKind::Zpoline => {
                "syscall rewritten to call *%rax into a trampoline at address 0 (reads through NULL do not fault)"
            }
            EntryKind::Rewrite => "each syscall site patched into a jump to its own trampoline (no root needed)",
            EntryKind::Seccomp => "seccomp SIGSYS handled on the guest's own host thread",
            EntryKind::Split => "guest in a CLONE_VM host process; its SIGSYS handler hands off to nomu by futex",
            EntryKind::Sysemu => "guest in a CLONE_VM host process traced with PTRACE_SYSEMU",
        }
    }

    /// Ok when this host can run the path, else why not.
    pub fn availability(self) -> Result<(), String> {
        match self {
            EntryKind::Seccomp => seccomp::available(),
            EntryKind::Zpoline => zpoline::available(),
            EntryKind::Rewrite => zpoline::rewrite_available(),
            EntryKind::Split => split::available(),
            EntryKind::Sysemu => sysemu::available(),
        }
    }
}

/// Installs the entry path `kind`, or the first available one of `ALL`. The host
/// signal handlers and the seccomp filter are installed in every case: the
/// handlers also catch faults in nomu's own fault-safe copies, and the
/// filter is how zpoline and split see guest syscalls (see
/// [`seccomp::SeccompEntry::install`]).
pub fn install(
    kind: Option<EntryKind>,
    physmem: &crate::host::physmem::PhysMem,
    guest_mask: u64,
) -> Result<Box<dyn EntryPath>, String> {
    let kind = match kind {
        Some(k) => {
            k.availability().map_err(|why| format!("entry path {} is not available here: {why}", k.name()))?;
            k
        }
        None => EntryKind::ALL.into_iter().find(|k| k.availability().is_ok()).ok_or("no entry path works here")?,
    };
    // Every path's waits sleep on two words at once (kernel/waiter.rs).
    if !crate::host::sys::has_futex_waitv() {
        return Err("nomu needs Linux 5.16 or later (FUTEX_WAITV)".into());
    }
    host_signals::install(guest_mask)?;
    let seccomp = seccomp::SeccompEntry::install(physmem)?;
    Ok(match kind {
        EntryKind::Seccomp => Box::new(seccomp),
        EntryKind::Zpoline => Box::new(zpoline::ZpolineEntry::install(physmem)?),
        EntryKind::Rewrite => Box::new(zpoline::ZpolineEntry::install_rewrite(physmem)?),
        EntryKind::Sysemu => Box::new(sysemu::SysemuEntry::install()?),
        EntryKind::Split => Box::new(split::SplitEntry::install()?),
    })
}
