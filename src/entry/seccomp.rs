//! The seccomp entry path: guest code runs directly on the host thread, and
//! a seccomp filter turns every syscall whose instruction pointer lies in
//! guest memory into SIGSYS, handled in the same host process.
//!
//! Control reaches guest code only through `rt_sigreturn` of a frame nomu
//! controls: the host saved the guest's registers, RFLAGS and full extended
//! state in the SIGSYS frame, the kernel edits the general registers there,
//! and sigreturn restores everything at once. The first entry builds such a
//! frame by hand; leaving guest mode for good edits the frame to "return"
//! into [`nomu_enter_guest`]'s caller.

use super::kstack::{Tcb, ThreadKernelStack, KSTACK_SIZE, TCB_OFFSET};
use super::{zpoline, EntryPath, Fault, GuestKernel, GuestRegs, Resume, StartState, Trap, TrapFrame};
use crate::host::physmem::PhysMem;
use crate::host::{last_errno, safecopy};
use std::arch::global_asm;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// Read by the asm stubs: 1 when rdfsbase/wrfsbase may be used, else they
/// fall back to arch_prctl.
#[no_mangle]
static NOMU_HAVE_FSGSBASE: AtomicU8 = AtomicU8::new(0);

/// The host signal mask while guest code runs.
pub(super) static GUEST_HOST_MASK: AtomicU64 = AtomicU64::new(0);

global_asm!(
    ".text",
    // nomu_rdfs: rax = current fs base. Clobbers rcx, r11 only.
    ".type nomu_rdfs,@function",
    "nomu_rdfs:",
    "    cmp byte ptr [rip + {fsgs}], 0",
    "    je 2f",
    "    rdfsbase rax",
    "    ret",
    "2:  push rdi",
    "    push rsi",
    "    push rdx",
    "    sub rsp, 8",
    "    mov edi, 0x1003", // ARCH_GET_FS
    "    mov rsi, rsp",
    "    mov eax, 158", // arch_prctl
    "    syscall",
    "    mov rax, [rsp]",
    "    add rsp, 8",
    "    pop rdx",
    "    pop rsi",
    "    pop rdi",
    "    ret",
    // nomu_wrfs: fs base = rax. Clobbers rcx, r11 (and rax) only.
    ".type nomu_wrfs,@function",
    "nomu_wrfs:",
    "    cmp byte ptr [rip + {fsgs}], 0",
    "    je 2f",
    "    wrfsbase rax",
    "    ret",
    "2:  push rdi",
    "    push rsi",
    "    push rdx",
    "    mov rsi, rax",
    "    mov edi, 0x1002", // ARCH_SET_FS
    "    mov eax, 158",
    "    syscall",
    "    pop rdx",
    "    pop rsi",
    "    pop rdi",
    "    ret",
    // Host signal handler for SIGSYS and guest faults, on the kernel stack.
    // Until fs holds nomu's own base again, no code may touch TLS.
    ".globl nomu_trap_entry",
    ".type nomu_trap_entry,@function",
    "nomu_trap_entry:",
    // The guest's DF and AC flags must not reach nomu's code: with AC set
    // (alignment checking, settable by any program) a misaligned access in
    // nomu would raise SIGBUS. The kernel clears DF on signal entry, not AC.
    "    cld",
    "    pushfq",
    "    and qword ptr [rsp], -262145", // ~(1 << 18): EFLAGS.AC
    "    popfq",
    "    push rbx",
    "    mov rbx, rsp",
    "    and rbx, {kstack_mask}",
    "    add rbx, {tcb_offset}", // rbx = this thread's Tcb
    "    call nomu_rdfs",
    "    push rax",              // [rsp+8] = interrupted fs base (the fs slot)
    "    sub rsp, 8",
    "    mov rax, [rbx]",        // Tcb.host_fs
    "    call nomu_wrfs",
    "    mov rcx, rbx",
    "    lea r8, [rsp + 8]",
    "    call {handler}",
    "    mov rax, [rsp + 8]",
    "    call nomu_wrfs",
    "    add rsp, 16",
    "    pop rbx",
    "    ret",
    // nomu_enter_guest(frame: rdi, tcb: rsi): saves nomu's callee-saved
    // registers, installs the guest fs base and rt_sigreturns into the frame.
    ".globl nomu_enter_guest",
    ".type nomu_enter_guest,@function",
    "nomu_enter_guest:",
    "    push rbp",
    "    push rbx",
    "    push r12",
    "    push r13",
    "    push r14",
    "    push r15",
    "    mov [rsi + 8], rsp",    // Tcb.host_rsp
    "    mov rax, [rsi + 16]",   // Tcb.entry_fs
    "    call nomu_wrfs",
    "    lea rsp, [rdi + 8]",    // as if a handler had returned through pretcode
    "    mov eax, 15",           // rt_sigreturn
    "    syscall",
    "    ud2",
    // Where a thread leaving guest mode resumes, with rsp = Tcb.host_rsp.
    ".globl nomu_guest_exit_landing",
    "nomu_guest_exit_landing:",
    "    pop r15",
    "    pop r14",
    "    pop r13",
    "    pop r12",
    "    pop rbx",
    "    pop rbp",
    "    ret",
    fsgs = sym NOMU_HAVE_FSGSBASE,
    kstack_mask = const !(KSTACK_SIZE - 1),
    tcb_offset = const TCB_OFFSET,
    handler = sym nomu_handle_trap,
);

extern "C" {
    fn nomu_trap_entry(signo: i32, info: *mut libc::siginfo_t, uc: *mut libc::c_void);
    fn nomu_enter_guest(frame: *mut RtSigframe, tcb: *mut libc::c_void);
    static nomu_guest_exit_landing: u8;
}

/// The Linux x86-64 `struct sigcontext`.
#[repr(C)]
pub(super) struct Sigcontext {
    pub(super) regs: GuestRegs,
    cs_gs_fs_ss: u64,
    pub(super) err: u64,
    pub(super) trapno: u64,
    oldmask: u64,
    cr2: u64,
    pub(super) fpstate: u64,
    reserved: [u64; 8],
}

/// The kernel's `struct ucontext` (its sigset is 8 bytes, unlike libc's).
#[repr(C)]
pub(super) struct Ucontext {
    flags: u64,
    link: u64,
    ss_sp: u64,
    ss_flags: i32,
    ss_pad: i32,
    ss_size: u64,
    pub(super) mcontext: Sigcontext,
    pub(super) sigmask: u64,
}

/// The frame `rt_sigreturn` reads: the return address slot, then ucontext.
#[repr(C)]
struct RtSigframe {
    pretcode: u64,
    uc: Ucontext,
    info: [u64; 16],
}

const USER_CS: u64 = 0x33;
const USER_DS: u64 = 0x2b;
pub(super) const RFLAGS_IF: u64 = 0x200;
const UC_SIGCONTEXT_SS: u64 = 0x2;
const UC_STRICT_RESTORE_SS: u64 = 0x4;

pub(super) const FAULT_SIGNALS: [i32; 5] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE, libc::SIGTRAP];

/// The host signal that kicks a guest thread out of guest code so the
/// kernel can deliver a guest signal to it (see [`kick`]).
pub const KICK_SIGNAL: i32 = 62;

/// Makes the host thread `host_tid` trap into the kernel soon: at once if it
/// runs guest code, else when it next returns to guest code.
pub fn kick(host_tid: i32) {
    if host_tid > 0 {
        // SAFETY: tgkill to one of our own threads with our kick signal,
        // whose handler is installed before any guest runs.
        unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), host_tid, KICK_SIGNAL) };
    }
}

pub struct SeccompEntry;

/// Whether this host lets a process install a seccomp filter that traps.
pub fn available() -> Result<(), String> {
    let actions = std::fs::read_to_string("/proc/sys/kernel/seccomp/actions_avail")
        .map_err(|e| format!("no seccomp filters in this kernel ({e})"))?;
    if !actions.split_whitespace().any(|a| a == "trap") {
        return Err("the kernel's seccomp has no SECCOMP_RET_TRAP".into());
    }
    Ok(())
}

impl SeccompEntry {
    /// Installs the trap handlers and the process-wide filter. Must run once,
    /// before any guest thread starts; the filter cannot be removed.
    /// `guest_mask` is the host signal mask guest code runs with (nomu's
    /// own forwarded signals stay blocked there).
    pub fn install(physmem: &PhysMem, guest_mask: u64) -> Result<SeccompEntry, String> {
        GUEST_HOST_MASK.store(guest_mask, Ordering::Relaxed);
        // Outside guest code a kick must wait: nomu's threads block it (and
        // every thread made from now on inherits that); guest code runs with
        // GUEST_HOST_MASK, which lets it through. A kick delivered while a
        // thread has no kernel stack installed could not find its Tcb.
        crate::host::sys::block_signals(&[KICK_SIGNAL]);
        NOMU_HAVE_FSGSBASE.store(crate::host::cpu::has_fsgsbase() as u8, Ordering::Relaxed);
        for sig in FAULT_SIGNALS.iter().copied().chain([libc::SIGSYS, KICK_SIGNAL]) {
            install_handler(sig)?;
        }
        install_filter(physmem.base() as u64, physmem.end() as u64)
            .map_err(|e| format!("installing the seccomp filter: {e}"))?;
        Ok(SeccompEntry)
    }
}

fn install_handler(sig: i32) -> Result<(), String> {
    // SAFETY: an all-zero sigaction is valid; we fill in the fields we use.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = nomu_trap_entry as *const () as usize;
    // SA_RESTART: on the zpoline path kernel code runs with the kick
    // unblocked, and a kick must not fail nomu's own host syscalls.
    sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
    // SAFETY: building a signal set in our own sigaction struct.
    unsafe {
        libc::sigfillset(&mut sa.sa_mask);
        for s in FAULT_SIGNALS {
            libc::sigdelset(&mut sa.sa_mask, s);
        }
    }
    // SAFETY: installing a handler whose entry is the asm stub above, which
    // follows the SA_SIGINFO calling convention.
    if unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) } < 0 {
        return Err(format!("sigaction({sig}): {}", last_errno()));
    }
    Ok(())
}

#[repr(C)]
struct SockFilter {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

#[repr(C)]
struct SockFprog {
    len: u16,
    filter: *const SockFilter,
}

/// Traps every syscall whose instruction pointer lies in [lo, hi) — guest
/// memory — and allows the rest (nomu's own code).
fn install_filter(lo: u64, hi: u64) -> Result<(), crate::kernel::errno::Errno> {
    const LD_ABS: u16 = 0x20;
    const JEQ: u16 = 0x15;
    const JGT: u16 = 0x25;
    const JGE: u16 = 0x35;
    const RET: u16 = 0x06;
    const RET_TRAP: u32 = 0x0003_0000;
    const RET_ALLOW: u32 = 0x7fff_0000;
    const IP_LO: u32 = 8; // offsetof(struct seccomp_data, instruction_pointer)
    const IP_HI: u32 = 12;
    let f = |code, jt, jf, k| SockFilter { code, jt, jf, k };
    let (lo_hi, lo_lo) = ((lo >> 32) as u32, lo as u32);
    let (hi_hi, hi_lo) = ((hi >> 32) as u32, hi as u32);
    // Jump offsets count from the next instruction; see the labels at right.
    let prog = [
        f(LD_ABS, 0, 0, IP_HI),  // 0
        f(JGT, 3, 0, lo_hi),     // 1: ip_hi > lo_hi -> 5
        f(JEQ, 0, 8, lo_hi),     // 2: else unless equal -> ALLOW
        f(LD_ABS, 0, 0, IP_LO),  // 3
        f(JGE, 0, 6, lo_lo),     // 4: ip_lo < lo_lo -> ALLOW
        f(LD_ABS, 0, 0, IP_HI),  // 5: ip >= lo
        f(JGT, 4, 0, hi_hi),     // 6: ip_hi > hi_hi -> ALLOW
        f(JEQ, 0, 2, hi_hi),     // 7: ip_hi < hi_hi -> TRAP
        f(LD_ABS, 0, 0, IP_LO),  // 8
        f(JGE, 1, 0, hi_lo),     // 9: ip_lo >= hi_lo -> ALLOW
        f(RET, 0, 0, RET_TRAP),  // 10
        f(RET, 0, 0, RET_ALLOW), // 11
    ];
    let fprog = SockFprog { len: prog.len() as u16, filter: prog.as_ptr() };
    // SAFETY: prctl and seccomp with valid arguments; fprog outlives the call.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 {
            return Err(last_errno());
        }
        let tsync = 1u32; // SECCOMP_FILTER_FLAG_TSYNC
        if libc::syscall(libc::SYS_seccomp, 1 /* SET_MODE_FILTER */, tsync, &fprog as *const SockFprog) < 0 {
            return Err(last_errno());
        }
    }
    Ok(())
}

/// glibc registers every thread for restartable sequences; the host then
/// does rseq bookkeeping on each signal delivery and return. A guest thread
/// never runs nomu code in an rseq critical section, so it unregisters.
fn unregister_rseq(thread_pointer: usize) {
    // SAFETY: dlsym only looks up symbols; the values are glibc's exported
    // __rseq_offset (ptrdiff_t) and __rseq_size (unsigned int).
    let (offset, size) = unsafe {
        let off = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr()) as *const isize;
        let size = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr()) as *const u32;
        if off.is_null() || size.is_null() {
            return;
        }
        (*off, *size)
    };
    if size == 0 {
        return;
    }
    const RSEQ_FLAG_UNREGISTER: i32 = 1;
    const RSEQ_SIG: u32 = 0x5305_3053;
    let area = thread_pointer.wrapping_add_signed(offset);
    // SAFETY: unregistering this thread's own rseq area, registered by glibc
    // with exactly this address, size and signature.
    unsafe { libc::syscall(libc::SYS_rseq, area, size.max(32), RSEQ_FLAG_UNREGISTER, RSEQ_SIG) };
}

fn current_sigmask() -> u64 {
    let mut old = 0u64;
    // SAFETY: rt_sigprocmask with a NULL new set only reads the mask.
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_BLOCK, 0usize, &mut old as *mut u64, 8) };
    old
}

impl EntryPath for SeccompEntry {
    fn name(&self) -> &'static str {
        "seccomp"
    }

    fn interrupt(&self, host_tid: i32) {
        kick(host_tid);
    }

    fn run(&self, start: StartState, kernel: &mut dyn GuestKernel) {
        let kstack = ThreadKernelStack::enter();
        // The guest owns this host thread's gs base (nomu never uses %gs).
        let _ = crate::host::sys::set_gs_base(start.gs_base);
        run_in_process(&kstack, start, kernel);
    }
}

/// Runs guest code on this host thread until a trap answers Resume::Exit:
/// the seccomp path, and the zpoline path (which enters the same way).
pub(super) fn run_in_process(kstack: &ThreadKernelStack, start: StartState, kernel: &mut dyn GuestKernel) {
    if kstack.fresh {
        unregister_rseq(crate::host::sys::fs_base() as usize);
    }
    let (ss_sp, ss_size) = kstack.stack_range();
    let tcb = kstack.tcb();
    // SAFETY: the Tcb lives in our kernel stack mapping, which outlives
    // this call; the kernel pointer is only used by traps that happen
    // while we are executing (inside nomu_enter_guest).
    unsafe {
        (*tcb).entry_fs = start.fs_base;
        (*tcb).guest_gs = start.gs_base;
        let kernel: *mut (dyn GuestKernel + '_) = kernel;
        (*tcb).kernel =
            Some(std::mem::transmute::<*mut (dyn GuestKernel + '_), *mut (dyn GuestKernel + 'static)>(kernel));
    }
    let host_mask = current_sigmask();
    let mut frame = RtSigframe {
        pretcode: 0,
        uc: Ucontext {
            flags: UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS,
            link: 0,
            ss_sp: ss_sp as u64,
            ss_flags: 0,
            ss_pad: 0,
            ss_size: ss_size as u64,
            mcontext: Sigcontext {
                regs: GuestRegs { rflags: start.regs.rflags | RFLAGS_IF, ..start.regs },
                cs_gs_fs_ss: USER_CS | (USER_DS << 48),
                err: 0,
                trapno: 0,
                oldmask: 0,
                cr2: 0,
                fpstate: 0, // no saved state: the guest starts with a clean FPU
                reserved: [0; 8],
            },
            sigmask: GUEST_HOST_MASK.load(Ordering::Relaxed),
        },
        info: [0; 16],
    };
    // SAFETY: we stay in this call until a trap answers Resume::Exit,
    // which returns here through nomu_guest_exit_landing with nomu's
    // callee-saved registers and fs base restored.
    unsafe {
        (*tcb).host_mask = host_mask;
        nomu_enter_guest(&mut frame, tcb.cast());
        (*tcb).kernel = None;
    }
    if zpoline::active() {
        // The zpoline stub leaves guest mode without a sigreturn: put back
        // nomu's own mask (kick blocked) while the kernel stack is still in
        // place for a kick that slips in first.
        set_sigmask(host_mask);
    }
}

fn set_sigmask(mask: u64) {
    // SAFETY: rt_sigprocmask with a valid 8-byte set.
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_SETMASK, &mask as *const u64, 0usize, 8) };
}

/// Called by `nomu_trap_entry` with nomu's fs base installed. `fs_slot`
/// holds the interrupted fs base, which the stub restores on return.
///
/// # Safety
/// Only the asm stub calls it, with the host's siginfo and ucontext of the
/// signal being handled, and pointers into this thread's kernel stack.
unsafe extern "C" fn nomu_handle_trap(
    signo: i32,
    info: *mut libc::siginfo_t,
    uc: *mut Ucontext,
    tcb: *mut Tcb,
    fs_slot: *mut u64,
) {
    // SAFETY: the host passed valid siginfo and ucontext pointers for this
    // signal; tcb and fs_slot were computed by the stub on our kernel stack.
    let (uc, tcb, fs_slot) = unsafe { (&mut *uc, &mut *tcb, &mut *fs_slot) };
    let from_guest = *fs_slot != tcb.host_fs;
    let rip = uc.mcontext.regs.rip;
    let zpoline = zpoline::active();
    let mut new_site = None;
    let trap = if signo == libc::SIGSYS {
        if zpoline {
            // First use of this syscall instruction: next time it calls the
            // trampoline.
            let site = rip.wrapping_sub(2);
            if zpoline::rewrite(site) {
                new_site = Some(site);
            }
        }
        Trap::Syscall
    } else if signo == KICK_SIGNAL {
        if zpoline && (!from_guest || zpoline::in_stub(rip)) {
            // Not in guest code; unless the stub was about to jump back into
            // it, it checks a note before it does.
            if !zpoline::finish_exit_tail(&mut uc.mcontext.regs, tcb) {
                return;
            }
        } else if !from_guest {
            // Kernel code was interrupted: the kernel checks for signals
            // before it returns to the guest anyway.
            return;
        }
        Trap::Interrupt
    } else {
        if let Some(resume_at) = safecopy::fault_fixup(rip as usize) {
            uc.mcontext.regs.rip = resume_at as u64;
            return;
        }
        // SAFETY: si_addr is valid for the fault signals we registered.
        let addr = unsafe { (*info).si_addr() } as u64;
        // SAFETY: si_code is always valid.
        let code = unsafe { (*info).si_code };
        if !from_guest || tcb.kernel.is_none() {
            internal_fault(signo, rip, addr);
            return;
        }
        if zpoline && zpoline::fault_was_syscall(&mut uc.mcontext.regs, signo, addr) {
            Trap::Syscall
        } else if zpoline && zpoline::in_trampoline(rip) {
            // The guest jumped into the trampoline (to NULL, say) and faulted
            // there (single-stepping, or off the sled's end): as natively,
            // a fault fetching from address 0.
            uc.mcontext.regs.rip = 0;
            Trap::Fault(zpoline::NULL_FETCH_FAULT)
        } else {
            Trap::Fault(Fault { signo, code, addr, trapno: uc.mcontext.trapno, err: uc.mcontext.err })
        }
    };
    let Some(kernel) = tcb.kernel else {
        internal_fault(signo, rip, 0);
        return;
    };
    let mut xstate = xstate_of(uc.mcontext.fpstate);
    let mut frame = TrapFrame {
        regs: &mut uc.mcontext.regs,
        fs_base: *fs_slot,
        gs_base: tcb.guest_gs,
        reset_xstate: false,
        xstate: &mut xstate,
        new_site,
    };
    // SAFETY: the pointer was set by `run`, which is still executing below us
    // on this thread, and nothing else uses it meanwhile.
    let resume = unsafe { (*kernel).on_trap(trap, &mut frame) };
    let (fs_base, gs_base, reset) = (frame.fs_base, frame.gs_base, frame.reset_xstate);
    if gs_base != tcb.guest_gs && !zpoline {
        tcb.guest_gs = gs_base;
        let _ = crate::host::sys::set_gs_base(gs_base);
    }
    match resume {
        Resume::Guest => {
            *fs_slot = fs_base;
            if reset {
                // No saved state: sigreturn gives the initial FPU state.
                uc.mcontext.fpstate = 0;
            }
        }
        Resume::Exit => {
            // "Return" from nomu_enter_guest: nomu's stack, its fs base, its
            // signal mask and a clean FPU state (fpstate 0 means init state).
            let regs = &mut uc.mcontext.regs;
            regs.rip = std::ptr::addr_of!(nomu_guest_exit_landing) as u64;
            regs.rsp = tcb.host_rsp;
            regs.rax = 0;
            // Not the guest's flags (a trap flag would single-step nomu).
            regs.rflags = RFLAGS_IF;
            uc.mcontext.fpstate = 0;
            uc.sigmask = tcb.host_mask;
            *fs_slot = tcb.host_fs;
        }
    }
}

/// The xsave image the host saved in a signal frame, as a byte slice of
/// the size its software-reserved bytes state.
pub(super) fn xstate_of<'a>(fpstate: u64) -> Option<&'a mut [u8]> {
    if fpstate == 0 {
        return None;
    }
    // SAFETY: the host wrote at least the 512-byte legacy area there.
    let legacy = unsafe { std::slice::from_raw_parts(fpstate as *const u8, 512) };
    let magic = u32::from_le_bytes(legacy[464..468].try_into().unwrap());
    let size = if magic == 0x4650_5853 {
        // extended_size: the whole image including the trailing magic.
        u32::from_le_bytes(legacy[468..472].try_into().unwrap()) as usize
    } else {
        512
    };
    // SAFETY: the host laid out `size` bytes of xstate in the signal frame
    // (on our kernel stack, or on a split child's signal stack), which stays
    // valid (and unaliased) for this trap.
    Some(unsafe { std::slice::from_raw_parts_mut(fpstate as *mut u8, size) })
}

/// A fault in nomu itself: report it and let the host kill us with the
/// signal's default action (a core dump to debug from).
fn internal_fault(signo: i32, rip: u64, addr: u64) {
    let msg = format!("nomu: internal error: signal {signo} at rip {rip:#x} (address {addr:#x})\n");
    crate::host::sys::write_all(2, msg.as_bytes());
    // SAFETY: restoring the default action; returning re-raises the fault.
    unsafe { libc::signal(signo, libc::SIG_DFL) };
}
