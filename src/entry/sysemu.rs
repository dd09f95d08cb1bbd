//! The sysemu entry path (the classic UML design): every guest thread runs
//! in a host process of its own, created with CLONE_VM by the nomu host
//! thread that runs that guest thread, which traces it with PTRACE_SYSEMU.
//! Each guest syscall stops the tracee before the host runs it (and the host
//! then skips it); the nomu thread reads the registers, runs the kernel and
//! writes the result back. Guest faults arrive as signal-delivery-stops and
//! are suppressed; a kick is a host signal sent to the tracee.
//!
//! The tracee shares nomu's memory (guest addresses are host addresses), its
//! descriptor table (so it holds no extra references to nomu's files: a
//! pipe's write end closed by nomu really is closed) and its fs info, but
//! not its signal handlers. It never runs nomu code: its first instructions
//! are the asm stub below, and from its first stop on its registers are the
//! guest's. A tracee outlives the guest thread it runs: nomu pools its host
//! threads, and each keeps its tracee (stopped) for the next guest thread.
//!
//! The tracee dies with its tracer: PTRACE_O_EXITKILL kills it when the
//! tracer thread exits, PR_SET_PDEATHSIG when its parent (that same thread)
//! does, and a thread's [`Tracee`] kills and reaps it when the thread ends.

use super::children::Children;
use super::kstack::ThreadKernelStack;
use super::{
    EntryPath, ExtendedState, Fault, GuestKernel, GuestRegs, Resume, StartState, Trap, TrapFrame, FAULT_SIGNALS,
};
use crate::host::{last_errno, safecopy};
use std::arch::global_asm;
use std::cell::RefCell;
use std::sync::OnceLock;

const PTRACE_POKEUSER: i64 = 6;
const PTRACE_GETREGS: i64 = 12;
const PTRACE_SETREGS: i64 = 13;
const PTRACE_SETFPREGS: i64 = 15;
const PTRACE_SETOPTIONS: i64 = 0x4200;
const PTRACE_GETSIGINFO: i64 = 0x4202;
const PTRACE_GETREGSET: i64 = 0x4204;
const PTRACE_SETREGSET: i64 = 0x4205;
const PTRACE_SETSIGMASK: i64 = 0x420b;
const PTRACE_SYSEMU: i64 = 31;
const PTRACE_O_TRACESYSGOOD: i64 = 1;
const PTRACE_O_EXITKILL: i64 = 0x10_0000;
const NT_X86_XSTATE: i64 = 0x202;
const WALL: i32 = 0x4000_0000; // __WALL: our tracees have no exit signal

/// The host signal that kicks a tracee out of guest code. A standard signal
/// (not host_signals' real-time one), so kicks sent while the guest
/// thread is in the kernel coalesce into one spurious stop instead of
/// queueing one each. The tracee never runs a host handler: every signal it
/// gets stops it for its tracer, which suppresses it.
const TRACEE_KICK: i32 = libc::SIGUSR2;

use crate::abi::xsave::{HEADER as XSAVE_HEADER, SW_RESERVED};
const XFEATURE_FP_SSE: u64 = 0b11;
const XFEATURE_PKRU: u64 = 1 << 9;
/// Where rax sits in `struct user` (PTRACE_POKEUSER's offsets).
const USER_RAX: u64 = std::mem::offset_of!(libc::user_regs_struct, rax) as u64;

global_asm!(
    ".text",
    // nomu_sysemu_clone(flags: rdi, ppid: rsi) -> rax: the child's pid in
    // the parent, or -errno.
    //
    // The child runs this stub only, sharing nomu's memory and (until it
    // stops) nomu's fs base: it must not touch TLS, so it is no Rust code.
    // It touches no memory at all, not even its stack (it gets the
    // parent's stack pointer, and the parent keeps using that stack), and
    // all host signals are blocked in it (the parent blocks them around the
    // clone), so nothing can run on that stack either. It asks to die with
    // its parent thread, checks that parent is still nomu (the prctl came
    // too late otherwise), asks to be traced by it (PTRACE_TRACEME: the
    // tracer is the thread that called clone, the real parent; simpler than
    // PTRACE_SEIZE, which would need the child to wait for the attach) and
    // stops itself with SIGSTOP. The tracer replaces all its registers
    // before it runs again: the instructions after the kill only run if
    // something failed, and exit.
    ".globl nomu_sysemu_clone",
    ".type nomu_sysemu_clone,@function",
    "nomu_sysemu_clone:",
    "    mov r9, rsi",    // the expected parent pid, kept in a register
    "    xor esi, esi",   // same stack pointer (the child uses no stack)
    "    xor edx, edx",   // no parent_tid
    "    xor r10d, r10d", // no child_tid
    "    xor r8d, r8d",   // no tls
    "    mov eax, 56",    // clone
    "    syscall",
    "    test rax, rax",
    "    jnz 1f",
    // The child.
    "    mov edi, 1",   // PR_SET_PDEATHSIG
    "    mov esi, 9",   // SIGKILL
    "    mov eax, 157", // prctl
    "    syscall",
    "    mov eax, 110", // getppid
    "    syscall",
    "    cmp rax, r9",
    "    jne 2f",
    "    xor edi, edi", // PTRACE_TRACEME
    "    xor esi, esi",
    "    xor edx, edx",
    "    xor r10d, r10d",
    "    mov eax, 101", // ptrace
    "    syscall",
    "    test rax, rax",
    "    jnz 2f",
    "    mov eax, 39", // getpid
    "    syscall",
    "    mov rdi, rax",
    "    mov esi, 19", // SIGSTOP
    "    mov eax, 62", // kill
    "    syscall",
    "2:  mov edi, 127",
    "    mov eax, 60", // exit
    "    syscall",
    "    ud2",
    "1:  ret",
    ".size nomu_sysemu_clone, . - nomu_sysemu_clone",
);

extern "C" {
    fn nomu_sysemu_clone(flags: u64, ppid: u64) -> i64;
}

fn ptrace(req: i64, pid: i32, addr: u64, data: u64) -> Result<i64, crate::abi::errno::Errno> {
    // SAFETY: every caller passes a request on one of our own tracees with
    // addr/data that are values or pointers to buffers of the size the
    // request writes or reads.
    let r = unsafe { libc::syscall(libc::SYS_ptrace, req, pid, addr, data) };
    if r < 0 {
        Err(last_errno())
    } else {
        Ok(r)
    }
}

/// How a tracee stopped (or did not).
enum Stop {
    Syscall,
    /// A signal-delivery-stop: the signal and its siginfo.
    Signal(i32, libc::siginfo_t),
    /// It is gone (killed from outside): the wait status.
    Gone(i32),
}

/// The tracee of each nomu host thread, for [`EntryPath::interrupt`] and
/// nomu's exit (EXITKILL and PDEATHSIG kill them anyway when nomu dies
/// without exit(), a SIGKILL say).
static TRACEES: Children = Children::new();

extern "C" fn reap_all_tracees() {
    TRACEES.reap_all();
}

/// The clean extended state a guest thread starts with (and a signal handler
/// gets), in the layout PTRACE_SETREGSET takes: built once from a fresh
/// tracee's state.
static CLEAN_XSTATE: OnceLock<Vec<u8>> = OnceLock::new();

/// A traced host process that runs guest code for one nomu host thread.
struct Tracee {
    pid: i32,
    /// The xsave image buffer: the regset (`xsize` bytes) plus the trailing
    /// FP_XSTATE_MAGIC2 a signal frame has.
    xbuf: Vec<u8>,
    xsize: usize,
    /// XCR0 as the first fetch of the tracee's state reported it (0: not
    /// fetched yet, so `xbuf` holds nothing of the tracee's).
    xcr0: u64,
    /// The components in use (the header's xstate_bv) of the tracee's
    /// state as fetched at this stop; None when not fetched at this stop.
    live_components: Option<u64>,
}

impl Tracee {
    /// Creates a stopped tracee for the calling thread, which becomes its
    /// tracer.
    fn spawn() -> Result<Tracee, String> {
        // Shared memory and descriptor table (see the module doc), no exit
        // signal (nomu has no SIGCHLD to field: it reaps with __WALL), and
        // CLONE_UNTRACED: a debugger following nomu (strace -f) must not
        // take the tracee, whose tracer has to be this thread.
        let flags = (libc::CLONE_VM | libc::CLONE_FS | libc::CLONE_FILES | libc::CLONE_UNTRACED) as u64;
        // SAFETY: an all-zero sigset is valid; sigfillset fills it.
        let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above, for the saved mask.
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: blocking every signal on this thread around the clone (so
        // the child starts with all of them blocked; see the stub), then
        // restoring the mask. The child runs only the stub.
        let pid = unsafe {
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            let pid = nomu_sysemu_clone(flags, libc::getpid() as u64);
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            pid
        };
        if pid < 0 {
            return Err(format!("clone: {}", crate::abi::errno::Errno(-pid as i32)));
        }
        let pid = pid as i32;
        // Registered at once: Drop kills and reaps it whatever happens next.
        TRACEES.register(pid);
        let mut t = Tracee { pid, xbuf: Vec::new(), xsize: 0, xcr0: 0, live_components: None };
        match t.wait() {
            Stop::Signal(libc::SIGSTOP, _) => {}
            Stop::Gone(status) => return Err(format!("the traced process ended at once (wait status {status:#x})")),
            _ => return Err("the traced process did not stop as expected".into()),
        }
        ptrace(PTRACE_SETOPTIONS, pid, 0, (PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL) as u64)
            .map_err(|e| format!("PTRACE_SETOPTIONS: {e}"))?;
        // Only kicks and faults reach it; the rest (a terminal's signals to
        // nomu's process group, say) stay blocked and pending for ever.
        let unblocked = [TRACEE_KICK].iter().chain(FAULT_SIGNALS.iter()).fold(0u64, |m, &s| m | 1 << (s - 1));
        let mask = !unblocked;
        ptrace(PTRACE_SETSIGMASK, pid, 8, &mask as *const u64 as u64).map_err(|e| format!("PTRACE_SETSIGMASK: {e}"))?;
        // The size of the xstate regset: what a large buffer gets filled with.
        let mut probe = vec![0u8; 64 << 10];
        let mut iov = libc::iovec { iov_base: probe.as_mut_ptr().cast(), iov_len: probe.len() };
        ptrace(PTRACE_GETREGSET, pid, NT_X86_XSTATE as u64, &mut iov as *mut libc::iovec as u64)
            .map_err(|e| format!("PTRACE_GETREGSET(NT_X86_XSTATE): {e}"))?;
        let xsize = iov.iov_len;
        if xsize < XSAVE_HEADER + 64 {
            return Err(format!("the xstate regset is only {xsize} bytes"));
        }
        probe.truncate(xsize);
        CLEAN_XSTATE.get_or_init(|| clean_xstate(&probe));
        t.xsize = xsize;
        t.xbuf = vec![0u8; xsize + 4];
        Ok(t)
    }

    fn wait(&mut self) -> Stop {
        let mut status = 0;
        loop {
            // SAFETY: waiting for our own traced child, status is a valid int.
            let r = unsafe { libc::waitpid(self.pid, &mut status, WALL) };
            if r == self.pid {
                break;
            }
            if r < 0 && last_errno() == crate::abi::errno::Errno::EINTR {
                continue;
            }
            status = -1;
            break;
        }
        if status == -1 || !libc::WIFSTOPPED(status) {
            // Reaped: the pid must not be signalled any more.
            TRACEES.forget(self.pid);
            self.pid = 0;
            return Stop::Gone(status);
        }
        let sig = libc::WSTOPSIG(status);
        if sig == libc::SIGTRAP | 0x80 {
            return Stop::Syscall;
        }
        // SAFETY: an all-zero siginfo is valid; the host fills it in.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        if ptrace(PTRACE_GETSIGINFO, self.pid, 0, &mut info as *mut libc::siginfo_t as u64).is_err() {
            info.si_signo = sig;
        }
        Stop::Signal(sig, info)
    }

    fn get_regs(&self) -> Option<libc::user_regs_struct> {
        // SAFETY: user_regs_struct is plain integers; all-zero is valid.
        let mut r: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        ptrace(PTRACE_GETREGS, self.pid, 0, &mut r as *mut libc::user_regs_struct as u64).ok()?;
        Some(r)
    }

    /// Sets the registers (a failure means the tracee is gone: its next
    /// resume fails too).
    fn set_regs(&self, r: &libc::user_regs_struct) {
        let _ = ptrace(PTRACE_SETREGS, self.pid, 0, r as *const libc::user_regs_struct as u64);
    }

    /// Sets rax alone: a syscall's result. PTRACE_SETREGS reads each of
    /// the 27 registers with a get_user of its own and costs ~2.5x a
    /// POKEUSER on the test VM (1.65 vs 0.65 us).
    fn set_rax(&self, rax: u64) {
        let _ = ptrace(PTRACE_POKEUSER, self.pid, USER_RAX, rax);
    }

    /// Loads an xsave image (the regset part of it) into the tracee.
    /// Returns false when the host refuses it (a malformed image).
    fn set_xstate(&self, image: &[u8]) -> bool {
        let mut iov = libc::iovec { iov_base: image.as_ptr() as *mut libc::c_void, iov_len: self.xsize };
        debug_assert!(image.len() >= self.xsize);
        ptrace(PTRACE_SETREGSET, self.pid, NT_X86_XSTATE as u64, &mut iov as *mut libc::iovec as u64).is_ok()
    }

    /// Loads the (possibly edited) image fetched by [`LazyXstate`] back,
    /// its software-reserved bytes back in the regset's layout.
    fn store_xstate(&mut self) -> bool {
        let xcr0 = u64::from_le_bytes(self.xbuf[SW_RESERVED + 8..SW_RESERVED + 16].try_into().unwrap());
        let sw = &mut self.xbuf[SW_RESERVED..XSAVE_HEADER];
        sw.fill(0);
        sw[0..8].copy_from_slice(&xcr0.to_le_bytes());
        self.set_xstate(&self.xbuf)
    }

    fn reset_xstate(&self) {
        let clean = CLEAN_XSTATE.get().expect("clean xstate built with the first tracee");
        // A tracee whose state (fetched at this stop) uses no component
        // but x87 and SSE is reset by loading those two alone: the others
        // are in their initial state already. PTRACE_SETFPREGS takes the
        // 512-byte legacy area, a third of the cost of the whole regset
        // (0.7 vs 2.45 us on the test VM), once per signal delivered.
        if self.live_components.is_some_and(|bv| bv & !XFEATURE_FP_SSE == 0) {
            let mut legacy = [0u8; XSAVE_HEADER];
            legacy[..SW_RESERVED].copy_from_slice(&clean[..SW_RESERVED]);
            if ptrace(PTRACE_SETFPREGS, self.pid, 0, legacy.as_ptr() as u64).is_ok() {
                return;
            }
        }
        if !self.set_xstate(clean) && last_errno() != crate::abi::errno::Errno::ESRCH {
            fatal(&format!("PTRACE_SETREGSET of the clean xstate: {}", last_errno()));
        }
    }

    /// Sets up a new guest thread: its registers over what the tracee has
    /// (segment selectors), its creator's extended state (`xstate`, in a
    /// signal frame's layout) or a clean FPU. None if the tracee is gone.
    fn start(
        &mut self,
        regs: &GuestRegs,
        fs_base: u64,
        gs_base: u64,
        xstate: Option<&[u8]>,
    ) -> Option<libc::user_regs_struct> {
        self.live_components = None;
        let mut r = self.get_regs()?;
        from_guest(&mut r, regs);
        r.fs_base = fs_base;
        r.gs_base = gs_base;
        self.set_regs(&r);
        match xstate {
            Some(from) => {
                // Over the clean state, whose software bytes are the regset's.
                let clean = CLEAN_XSTATE.get().expect("clean xstate built with the first tracee");
                let mut image = clean.clone();
                image.resize(image.len().max(self.xsize + 4), 0);
                super::copy_guest_xstate(&mut image, from);
                if !self.set_xstate(&image) && last_errno() != crate::abi::errno::Errno::ESRCH {
                    fatal(&format!("PTRACE_SETREGSET of a new thread's xstate: {}", last_errno()));
                }
            }
            None => self.reset_xstate(),
        }
        Some(r)
    }

    /// Runs guest code until its next trap: the trap, the registers and
    /// what the kernel sees in rax. None when the tracee is gone (killed
    /// from outside), reaped by then.
    fn next_trap(&mut self) -> Option<(Trap, libc::user_regs_struct, u64)> {
        self.live_components = None;
        if ptrace(PTRACE_SYSEMU, self.pid, 0, 0).is_err() {
            self.reap();
            return None;
        }
        let stop = self.wait();
        let regs = match stop {
            Stop::Gone(_) => return None,
            _ => match self.get_regs() {
                Some(r) => r,
                None => {
                    self.reap();
                    return None;
                }
            },
        };
        Some(match stop {
            // As on the seccomp path: rax holds the syscall number, rip
            // points after the syscall instruction.
            Stop::Syscall => {
                let mut regs = regs;
                // PTRACE_SYSEMU stops for i386 syscalls too: after
                // `sysenter` the thread is in compat mode, after `int $0x80`
                // the instruction before rip tells (memory is shared).
                let mut insn = [0u8; 2];
                let cs = regs.cs as u16;
                let i386 = cs == super::USER32_CS
                    || safecopy::copy_from_guest(&mut insn, regs.rip.wrapping_sub(2) as usize) == 2
                        && insn == [0xcd, 0x80];
                let trap = if i386 {
                    let mut g = to_guest(&regs, regs.rax);
                    let trap = super::i386_syscall_fault(&mut g, cs);
                    regs.rip = g.rip;
                    regs.cs = super::USER_CS as u64;
                    regs.ss = super::USER_DS as u64;
                    trap
                } else {
                    Trap::Syscall
                };
                (trap, regs, regs.orig_rax)
            }
            Stop::Signal(sig, info) => {
                // Faults the CPU raised (si_code > 0) are the guest's;
                // anything else (a kick, a stray signal) only interrupts.
                let trap = if FAULT_SIGNALS.contains(&sig) && info.si_code > 0 {
                    // SAFETY: si_addr is valid for these fault signals.
                    let addr = unsafe { info.si_addr() } as u64;
                    let (trapno, err) = fault_regs(sig, info.si_code, addr, regs.rip);
                    Trap::Fault(Fault { signo: sig, code: info.si_code, addr, trapno, err })
                } else {
                    Trap::Interrupt
                };
                (trap, regs, regs.rax)
            }
            Stop::Gone(_) => unreachable!(),
        })
    }

    /// Waits for a tracee that is going away (a ptrace request failed on
    /// it) to end, and reaps it.
    fn reap(&mut self) {
        while self.pid > 0 {
            if let Stop::Gone(_) = self.wait() {
                break;
            }
        }
    }
}

/// A new tracee for this thread; nomu cannot go on without one.
fn spawn_or_die() -> Tracee {
    let t = Tracee::spawn().unwrap_or_else(|e| fatal(&format!("starting a traced process: {e}")));
    // Its CPU time is the guest's (getrusage, times, a parent's wait4).
    crate::host::sys::set_guest_process(t.pid);
    t
}

impl Drop for Tracee {
    fn drop(&mut self) {
        if self.pid > 0 {
            TRACEES.kill_and_reap(self.pid);
        }
    }
}

thread_local! {
    /// This nomu host thread's tracee, kept stopped between guest threads.
    static TRACEE: RefCell<Option<Tracee>> = const { RefCell::new(None) };
}

/// A fresh thread's FPU state in the regset layout: x87 and SSE in their
/// initial state (written out, so MXCSR really is reset), every other
/// component initial too except PKRU, which keeps the host's value.
fn clean_xstate(sample: &[u8]) -> Vec<u8> {
    let mut x = vec![0u8; sample.len()];
    x[0..2].copy_from_slice(&0x37fu16.to_le_bytes()); // FCW
    x[24..28].copy_from_slice(&0x1f80u32.to_le_bytes()); // MXCSR
    x[28..32].copy_from_slice(&sample[28..32]); // MXCSR_MASK
    x[SW_RESERVED..XSAVE_HEADER].copy_from_slice(&sample[SW_RESERVED..XSAVE_HEADER]);
    let bv = u64::from_le_bytes(sample[XSAVE_HEADER..XSAVE_HEADER + 8].try_into().unwrap());
    let keep = bv & XFEATURE_PKRU;
    if keep != 0 {
        let (off, size) = crate::host::cpu::xstate_components()[9];
        if off + size <= sample.len() {
            x[off..off + size].copy_from_slice(&sample[off..off + size]);
        }
    }
    x[XSAVE_HEADER..XSAVE_HEADER + 8].copy_from_slice(&(XFEATURE_FP_SSE | keep).to_le_bytes());
    x
}

/// The trapped tracee's extended state, fetched on first use.
struct LazyXstate<'a> {
    tracee: &'a mut Tracee,
    fetched: bool,
}

impl ExtendedState for LazyXstate<'_> {
    fn image(&mut self) -> Option<&mut [u8]> {
        if !self.fetched {
            let t = &mut *self.tracee;
            let mut iov = libc::iovec { iov_base: t.xbuf.as_mut_ptr().cast(), iov_len: t.xsize };
            ptrace(PTRACE_GETREGSET, t.pid, NT_X86_XSTATE as u64, &mut iov as *mut libc::iovec as u64).ok()?;
            // In the regset the software-reserved bytes hold only XCR0 (for
            // debuggers); a signal frame has magic1, the size of the whole
            // image (with the trailing magic2), the features and the size
            // of the xsave area there.
            let n = t.xsize;
            let xcr0 = u64::from_le_bytes(t.xbuf[SW_RESERVED..SW_RESERVED + 8].try_into().unwrap());
            super::write_frame_sw_bytes(&mut t.xbuf[..n + 4], xcr0);
            t.xcr0 = xcr0;
            t.live_components = Some(u64::from_le_bytes(t.xbuf[XSAVE_HEADER..XSAVE_HEADER + 8].try_into().unwrap()));
            self.fetched = true;
        }
        Some(&mut self.tracee.xbuf[..])
    }

    /// rt_sigreturn replaces every guest-owned component: when the tracee
    /// has no others, the image of its last fetch (the one the signal frame
    /// was built from) serves, and a GETREGSET per signal is saved.
    fn image_to_overwrite(&mut self) -> Option<&mut [u8]> {
        let xcr0 = self.tracee.xcr0;
        if self.fetched || xcr0 == 0 || xcr0 & !super::GUEST_XSTATE_COMPONENTS != 0 {
            return self.image();
        }
        // store_xstate left the regset's software bytes there.
        let t = &mut *self.tracee;
        let n = t.xsize;
        super::write_frame_sw_bytes(&mut t.xbuf[..n + 4], t.xcr0);
        self.fetched = true;
        Some(&mut t.xbuf[..])
    }
}

fn to_guest(r: &libc::user_regs_struct, rax: u64) -> GuestRegs {
    GuestRegs {
        r8: r.r8,
        r9: r.r9,
        r10: r.r10,
        r11: r.r11,
        r12: r.r12,
        r13: r.r13,
        r14: r.r14,
        r15: r.r15,
        rdi: r.rdi,
        rsi: r.rsi,
        rbp: r.rbp,
        rbx: r.rbx,
        rdx: r.rdx,
        rax,
        rcx: r.rcx,
        rsp: r.rsp,
        rip: r.rip,
        rflags: r.eflags,
    }
}

fn from_guest(r: &mut libc::user_regs_struct, g: &GuestRegs) {
    r.r8 = g.r8;
    r.r9 = g.r9;
    r.r10 = g.r10;
    r.r11 = g.r11;
    r.r12 = g.r12;
    r.r13 = g.r13;
    r.r14 = g.r14;
    r.r15 = g.r15;
    r.rdi = g.rdi;
    r.rsi = g.rsi;
    r.rbp = g.rbp;
    r.rbx = g.rbx;
    r.rdx = g.rdx;
    r.rax = g.rax;
    r.rcx = g.rcx;
    r.rsp = g.rsp;
    r.rip = g.rip;
    r.eflags = g.rflags;
    // Not a syscall any more: the host must not restart anything on the
    // way back to user mode, whatever rax holds.
    r.orig_rax = u64::MAX;
}

/// Whether the host, returning to a tracee stopped at a syscall with this
/// in rax and a signal pending for it (a kick), would restart the syscall
/// (-ERESTARTSYS, -ERESTARTNOINTR, -ERESTARTNOHAND, -ERESTART_RESTARTBLOCK)
/// unless orig_rax says it is no syscall any more.
fn host_would_restart(rax: u64) -> bool {
    (-516..=-512).contains(&(rax as i64))
}

fn same_regs(a: &GuestRegs, b: &GuestRegs) -> bool {
    let words = |r: &GuestRegs| {
        [
            r.r8, r.r9, r.r10, r.r11, r.r12, r.r13, r.r14, r.r15, r.rdi, r.rsi, r.rbp, r.rbx, r.rdx, r.rax, r.rcx,
            r.rsp, r.rip, r.rflags,
        ]
    };
    words(a) == words(b)
}

/// The trap number and error code of a fault, as well as a tracer can tell:
/// ptrace shows neither, so they are rebuilt from the siginfo. A page
/// fault's write bit is a guess: an access fault on a page nomu can read
/// was a write (or a fetch, when the address is the instruction pointer);
/// a fault on an unmapped page is reported as a read.
fn fault_regs(signo: i32, code: i32, addr: u64, rip: u64) -> (u64, u64) {
    use crate::abi::SI_KERNEL;
    const SEGV_ACCERR: i32 = 2;
    const BUS_ADRALN: i32 = 1;
    const FPE_INTDIV: i32 = 1;
    const FPE_INTOVF: i32 = 2;
    const TRAP_TRACE: i32 = 2;
    const TRAP_HWBKPT: i32 = 4;
    const PF_PROT: u64 = 1;
    const PF_WRITE: u64 = 2;
    const PF_USER: u64 = 4;
    const PF_INSTR: u64 = 0x10;
    match signo {
        libc::SIGSEGV if code == SI_KERNEL => (13, 0), // general protection
        libc::SIGSEGV => {
            let mut err = PF_USER;
            if addr.wrapping_sub(rip) < 16 {
                err |= PF_INSTR;
            } else if code == SEGV_ACCERR {
                let mut b = [0u8];
                if safecopy::copy_from_guest(&mut b, addr as usize) == 1 {
                    err |= PF_WRITE;
                }
            }
            if code == SEGV_ACCERR {
                err |= PF_PROT;
            }
            (14, err)
        }
        libc::SIGBUS if code == BUS_ADRALN => (17, 0), // alignment check
        libc::SIGBUS => (14, PF_USER),
        libc::SIGILL => (6, 0),                                               // invalid opcode
        libc::SIGFPE if code == FPE_INTDIV || code == FPE_INTOVF => (0, 0),   // divide error
        libc::SIGFPE => (19, 0),                                              // SIMD exception (or x87's 16)
        libc::SIGTRAP if code == TRAP_TRACE || code == TRAP_HWBKPT => (1, 0), // debug
        libc::SIGTRAP => (3, 0),                                              // breakpoint
        _ => (0, 0),
    }
}

/// Something that cannot go on: the tracee's state is unknown.
fn fatal(what: &str) -> ! {
    crate::host::sys::write_all(2, format!("nomu: sysemu entry: {what}\n").as_bytes());
    std::process::abort();
}

pub struct SysemuEntry;

impl SysemuEntry {
    pub fn install() -> Result<SysemuEntry, String> {
        available()?;
        // Every ptrace stop notifies the tracer's process with SIGCHLD
        // unless its SIGCHLD action says SA_NOCLDSTOP. nomu ignores SIGCHLD
        // (the default action, kept) and waits with waitpid, so the signal
        // is only work for the host on each guest syscall.
        // SAFETY: an all-zero sigaction is SIG_DFL with an empty mask.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = libc::SIG_DFL;
        sa.sa_flags = libc::SA_NOCLDSTOP;
        // SAFETY: SIGCHLD stays at its default action; only the flag changes.
        if unsafe { libc::sigaction(libc::SIGCHLD, &sa, std::ptr::null_mut()) } < 0 {
            return Err(format!("sigaction(SIGCHLD): {}", last_errno()));
        }
        // SAFETY: registering a function that only kills and reaps our own
        // children and takes a lock no exit path holds.
        if unsafe { libc::atexit(reap_all_tracees) } != 0 {
            return Err("atexit failed".into());
        }
        Ok(SysemuEntry)
    }
}

/// Whether this host lets nomu trace a CLONE_VM child with PTRACE_SYSEMU:
/// tried once for real (a child that stops, then a syscall stop).
pub fn available() -> Result<(), String> {
    static RESULT: OnceLock<Result<(), String>> = OnceLock::new();
    RESULT.get_or_init(probe).clone()
}

fn probe() -> Result<(), String> {
    if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope") {
        if s.trim() == "3" {
            return Err("ptrace is disabled on this host (kernel.yama.ptrace_scope = 3)".into());
        }
    }
    // The probe's tracee is traced by this thread; it ends before we return.
    let mut t = Tracee::spawn().map_err(|e| format!("cannot trace a CLONE_VM child: {e}"))?;
    // Resumed as it is, the stub's child goes on to its exit syscall,
    // which PTRACE_SYSEMU must stop before the host runs it.
    ptrace(PTRACE_SYSEMU, t.pid, 0, 0).map_err(|e| format!("PTRACE_SYSEMU: {e}"))?;
    let ok = matches!(t.wait(), Stop::Syscall) && t.get_regs().is_some_and(|r| r.orig_rax == libc::SYS_exit as u64);
    drop(t);
    if ok {
        Ok(())
    } else {
        Err("PTRACE_SYSEMU did not stop at the traced process's syscall".into())
    }
}

impl EntryPath for SysemuEntry {
    fn name(&self) -> &'static str {
        "sysemu"
    }

    fn interrupt_kernel_side(&self, host_tid: i32) {
        super::host_signals::kick(host_tid);
    }

    fn interrupt(&self, host_tid: i32) {
        // A tracee between guest threads keeps the kick pending: the next
        // guest thread then gets a spurious, harmless Interrupt.
        if host_tid > 0 {
            TRACEES.signal(host_tid, TRACEE_KICK);
        }
    }

    fn run(&self, start: StartState, kernel: &mut dyn GuestKernel) {
        // nomu's fault-safe copies find this thread's Tcb on its kernel
        // stack (see kstack.rs), so the kernel runs with it entered.
        let kstack = ThreadKernelStack::enter();
        // Kicks end host calls the kernel waits in for this guest thread.
        let kicks = super::host_signals::KicksLetThrough::new();
        let mut tracee = TRACEE.with(|t| t.borrow_mut().take()).filter(|t| t.pid > 0).unwrap_or_else(spawn_or_die);
        let mut hregs = loop {
            match tracee.start(&start.regs, start.fs_base, start.gs_base, start.xstate.as_deref()) {
                Some(r) => break r,
                None => {
                    // Killed from outside while idle.
                    tracee.reap();
                    tracee = spawn_or_die();
                }
            }
        };
        loop {
            let Some((trap, r, rax)) = tracee.next_trap() else {
                if TRACEES.exiting() {
                    // nomu is exiting and killed it: wait for the end.
                    loop {
                        std::thread::park();
                    }
                }
                // Killed from outside: the guest thread dies of SIGKILL,
                // with its last known registers; a new tracee takes over
                // if the kernel goes on.
                crate::host::sys::write_all(2, b"nomu: sysemu entry: a traced process was killed\n");
                let fault = Fault { signo: libc::SIGKILL, code: crate::abi::SI_KERNEL, addr: 0, trapno: 0, err: 0 };
                let mut regs = to_guest(&hregs, hregs.rax);
                let mut none: Option<&mut [u8]> = None;
                let mut frame = TrapFrame {
                    regs: &mut regs,
                    fs_base: hregs.fs_base,
                    gs_base: hregs.gs_base,
                    reset_xstate: true,
                    xstate: &mut none,
                    new_site: None,
                };
                if kernel.on_trap(Trap::Fault(fault), &mut frame) == Resume::Exit {
                    break;
                }
                let (fs_base, gs_base) = (frame.fs_base, frame.gs_base);
                tracee = spawn_or_die();
                hregs =
                    tracee.start(&regs, fs_base, gs_base, None).unwrap_or_else(|| fatal("a new traced process died"));
                continue;
            };
            hregs = r;
            let before = to_guest(&hregs, rax);
            let mut regs = before;
            let mut xstate = LazyXstate { tracee: &mut tracee, fetched: false };
            let mut frame = TrapFrame {
                regs: &mut regs,
                fs_base: hregs.fs_base,
                gs_base: hregs.gs_base,
                reset_xstate: false,
                xstate: &mut xstate,
                new_site: None,
            };
            let resume = kernel.on_trap(trap, &mut frame);
            if resume == Resume::Exit {
                // The tracee stays stopped here until the next guest thread.
                break;
            }
            let (fs_base, gs_base, reset) = (frame.fs_base, frame.gs_base, frame.reset_xstate);
            let fetched = xstate.fetched;
            let bases_kept = fs_base == hregs.fs_base && gs_base == hregs.gs_base;
            if matches!(trap, Trap::Syscall)
                && bases_kept
                && same_regs(&GuestRegs { rax: regs.rax, ..before }, &regs)
                && !host_would_restart(regs.rax)
            {
                // Only the result changed: the host's orig_rax can stay the
                // syscall's number, as its restart logic ignores this rax.
                tracee.set_rax(regs.rax);
                hregs.rax = regs.rax;
            } else if matches!(trap, Trap::Syscall) || !same_regs(&before, &regs) || !bases_kept {
                from_guest(&mut hregs, &regs);
                hregs.fs_base = fs_base;
                hregs.gs_base = gs_base;
                tracee.set_regs(&hregs);
            }
            if reset {
                tracee.reset_xstate();
            } else if fetched && !tracee.store_xstate() && last_errno() != crate::abi::errno::Errno::ESRCH {
                // The kernel only writes back images it checked; go on
                // with the state the tracee had.
                crate::host::sys::write_all(2, b"nomu: sysemu entry: the host refused an xstate image\n");
            }
        }
        TRACEE.with(|t| *t.borrow_mut() = Some(tracee));
        drop(kicks);
        drop(kstack);
    }
}
