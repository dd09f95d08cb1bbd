//! The host signal handling every entry path installs, and the way into
//! and out of guest code for the paths that run it on nomu's own host
//! threads (seccomp and zpoline).
//!
//! One handler (`nomu_trap_entry`) takes SIGSYS, the CPU's fault signals
//! and the kick, on the thread's kernel stack. On a guest thread it hands
//! the trap to the kernel; on any other thread (nomu's own, or a split or
//! sysemu thread waiting for its guest) a fault is a fault-safe copy's or
//! nomu's own, and a kick only ends a host call made to be ended by one.
//! A path that rewrites syscall sites (zpoline) plugs in through
//! [`SyscallRewriter`]: the handler asks it about first uses of a site and
//! about faults and kicks in its stub, and never names it.
//!
//! The host saves the guest's registers, RFLAGS and full extended state in
//! the signal frame; the kernel edits them there. The way back is not
//! `rt_sigreturn` (it cost ~800 ns per trap on the test VM) but
//! `nomu_resume_guest`: xrstor of the components the frame's xsave image
//! holds (fxrstor when those are exactly x87 and SSE), the guest's fs
//! base, a refill of the return-stack predictor, the registers, and
//! `iretq`, which restores rip, rsp and RFLAGS at once without touching
//! the guest's stack. That needs the signal mask to be
//! the same in the handler as in guest code: the handlers are SA_NODEFER
//! with an empty sa_mask, so nomu's kernel code on a guest thread runs with
//! the kick unblocked, as on the zpoline path. A kick that lands in nomu's
//! code leaves a note in the Tcb, which the way back checks before its
//! tail; one that lands in the tail itself is finished from the registers
//! the tail restores from (see [`finish_exit_tail`]). Entering guest code
//! for the first time goes through the same path.

use super::kstack::{Tcb, ThreadKernelStack, KSTACK_SIGNAL_STACK_SIZE, KSTACK_SIZE, TCB_OFFSET};
use super::{
    Fault, GuestKernel, GuestRegs, Resume, StartState, Trap, TrapFrame, BAD_RETURN_FAULT, FAULT_SIGNALS,
    GUEST_XSTATE_COMPONENTS,
};
use crate::host::physmem::PAGE_SIZE;
use crate::host::{last_errno, safecopy};
use std::arch::global_asm;
use std::mem::offset_of;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;

/// Read by the asm stubs: 1 when rdfsbase/wrfsbase may be used, else they
/// fall back to arch_prctl.
#[no_mangle]
static NOMU_HAVE_FSGSBASE: AtomicU8 = AtomicU8::new(0);

/// The host signal mask while guest code runs.
pub(super) static GUEST_HOST_MASK: AtomicU64 = AtomicU64::new(0);

/// An xsave image of the initial FPU state (every component's XSTATE_BV bit
/// clear, MXCSR at its default), for guests that resume with a clean FPU
/// and for nomu's own code after it leaves guest mode.
#[repr(C, align(64))]
struct XsaveImage([u8; 576]);

#[no_mangle]
static NOMU_INIT_XSTATE: XsaveImage = {
    let mut image = [0u8; 576];
    image[0] = 0x7f; // FCW 0x037f
    image[1] = 0x03;
    image[24] = 0x80; // MXCSR 0x1f80
    image[25] = 0x1f;
    XsaveImage(image)
};

/// How the handler continues, as the asm stub reads it.
const BACK_TO_NOMU: u64 = 0;
const RESUME_GUEST: u64 = 1;
const LEAVE_GUEST: u64 = 2;

use crate::abi::rflags::{AC as RFLAGS_AC, NT as RFLAGS_NT};

/// What a guest thread starts from: its registers, its xsave image (0: the
/// initial state) and fs base, laid out as [`nomu_resume_guest`] reads them.
#[repr(C)]
struct GuestEntry {
    regs: GuestRegs,
    fpstate: u64,
    fs_base: u64,
}

global_asm!(
    ".text",
    ".globl nomu_trap_stubs_start",
    "nomu_trap_stubs_start:",
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
    // Host signal handler for SIGSYS, guest faults and kicks, on the kernel
    // stack. Until fs holds nomu's own base again, no code may touch TLS.
    // (Each hot stretch on a cache line of its own, as zpoline's stub.)
    ".p2align 6",
    ".globl nomu_trap_entry",
    ".type nomu_trap_entry,@function",
    "nomu_trap_entry:",
    // The guest's DF, AC and NT flags must not reach nomu's code: with AC
    // set (alignment checking, settable by any program) a misaligned access
    // in nomu would raise SIGBUS, and iretq faults with NT set. The host
    // clears DF and TF on signal entry, not AC or NT.
    "    cld",
    "    pushfq",
    "    test dword ptr [rsp], {entry_clear_bits}",
    "    jz 8f",
    "    and qword ptr [rsp], {entry_clear}",
    "    popfq",
    "    jmp 9f",
    "8:  add rsp, 8", // popfq is slow: only a guest with AC or NT set pays it
    "9:  push rbx",
    "    push r12",
    "    push r13",
    "    mov r12, rdx", // r12 = the ucontext
    // A Tcb is found only on a kernel stack: the handler runs on one when
    // the signal stack it was delivered to (the ucontext says which) is a
    // kernel stack's and this is it. Else (a thread of nomu's own without
    // one, or one still making it) the signal interrupted nomu's code and
    // fs is nomu's already.
    "    mov rbx, rsp",
    "    and rbx, {kstack_mask}",
    "    cmp qword ptr [r12 + {uc_ss_size}], {kstack_signal_stack}",
    "    jne 14f",
    "    mov rax, [r12 + {uc_ss_sp}]",
    "    sub rax, {page_size}",
    "    cmp rax, rbx",
    "    jne 14f",
    "    add rbx, {tcb_offset}", // rbx = this thread's Tcb
    "    call nomu_rdfs",
    "    sub rsp, 16",
    "    mov [rsp], rax",        // the fs slot: the interrupted fs base
    "    mov rax, [rbx]",        // Tcb.host_fs
    "    call nomu_wrfs",
    "    mov rcx, rbx",
    "    mov r8, rsp",
    "    call {handler}",
    "    cmp eax, {resume_guest}",
    "    je 3f",
    "    ja 4f",
    // Back into nomu's own code (a fault fixed up, a kick noted): the
    // ordinary return through sigreturn.
    "    mov rax, [rsp]",
    "    call nomu_wrfs",
    "    add rsp, 16",
    "    pop r13",
    "    pop r12",
    "    pop rbx",
    "    ret",
    // Back into guest code, from the frame the host saved.
    "3:  lea rdi, [r12 + {uc_regs}]",
    "    lea rsi, [r12 + {uc_fpstate}]",
    "    mov rdx, rsp",
    "    mov rcx, rbx",
    "    jmp nomu_resume_guest",
    "4:  mov rcx, rbx",
    "    jmp nomu_leave_guest",
    "14: call {stray}", // rdi, rsi and rdx are still the host's arguments
    "    pop r13",
    "    pop r12",
    "    pop rbx",
    "    ret",
    // nomu_resume_guest(regs: rdi, &fpstate: rsi, &fs_base: rdx, tcb: rcx)
    // enters guest code with those registers, that xsave image (0: the
    // initial state) and fs base. Never returns.
    ".p2align 6",
    ".globl nomu_resume_guest",
    "nomu_resume_guest:",
    "    mov rbx, rdi",
    "    mov r12, rsi",
    "    mov r13, rdx",
    "    mov r14, rcx",
    "    and rsp, -16",
    "5:  mov rdi, [r12]",
    "    test rdi, rdi",
    "    jnz 10f",
    "    lea rdi, [rip + {init_xstate}]",
    // Only the components the image holds (and SSE, which nomu's code
    // uses): the host put every other one in its initial state for the
    // handler, and nomu's code touches no x87, AVX or AVX-512 state. The
    // initial-state image is restored whole (the note path below may have
    // loaded the guest's state before the kernel reset it).
    "    mov eax, {guest_components}",
    "    jmp 11f",
    "10: mov eax, [rdi + 512]", // XSTATE_BV
    // x87 and SSE in use and nothing else: fxrstor loads exactly those
    // (with MXCSR), in ~55 ns where xrstor takes 80-110 on the test VM.
    // Not when either is in its initial state: the image's bytes for it
    // are then whatever the buffer held.
    "    cmp eax, 3",
    "    jne 12f",
    "    cmp dword ptr [rdi + 516], 0",
    "    jne 12f",
    "    fxrstor64 [rdi]",
    "    jmp 13f",
    "12: or eax, 2",
    "    and eax, {guest_components}",
    "11: xor edx, edx",
    "    xrstor64 [rdi]",
    "13: mov rax, [r13]",
    "    call nomu_wrfs",
    // The return-stack predictor still holds what nomu's handler left:
    // the guest's next `ret` (the one out of its syscall wrapper) would be
    // predicted into nomu's code, which cost 280 ns per trapped syscall on
    // the AMD test VM. Refilled with harmless entries, a misprediction
    // costs a few cycles. Only on AMD hosts whose SRSO mitigation is
    // "Safe RET" (host::init_return_stack_fill).
    crate::host::fill_return_stack!("nomu_fill_before_guest"),
    // A kick that came while this thread ran nomu's code. The tail starts
    // once the note was read: from there on a kick is finished from the
    // GuestRegs at rbx (see finish_exit_tail).
    "    cmp qword ptr [r14 + {kick_note}], 0",
    ".globl nomu_resume_tail",
    "nomu_resume_tail:",
    "    jne 7f",
    // An iretq frame: rip, cs, rflags, rsp, ss.
    "    sub rsp, 40",
    "    mov rax, [rbx + 128]",
    "    mov [rsp], rax",
    "    mov qword ptr [rsp + 8], 0",
    "    mov word ptr [rsp + 8], cs",
    "    mov rax, [rbx + 136]",
    "    mov [rsp + 16], rax",
    "    mov rax, [rbx + 120]",
    "    mov [rsp + 24], rax",
    "    mov qword ptr [rsp + 32], 0",
    "    mov word ptr [rsp + 32], ss",
    "    mov r8, [rbx + 0]",
    "    mov r9, [rbx + 8]",
    "    mov r10, [rbx + 16]",
    "    mov r11, [rbx + 24]",
    "    mov r12, [rbx + 32]",
    "    mov r13, [rbx + 40]",
    "    mov r14, [rbx + 48]",
    "    mov r15, [rbx + 56]",
    "    mov rdi, [rbx + 64]",
    "    mov rsi, [rbx + 72]",
    "    mov rbp, [rbx + 80]",
    "    mov rdx, [rbx + 96]",
    "    mov rax, [rbx + 104]",
    "    mov rcx, [rbx + 112]",
    "    mov rbx, [rbx + 88]",
    ".globl nomu_resume_tail_iret",
    "nomu_resume_tail_iret:",
    "    iretq",
    ".globl nomu_resume_tail_end",
    "nomu_resume_tail_end:",
    // Handle the noted kick as an interrupt, then start the way back again.
    "7:  mov qword ptr [r14 + {kick_note}], 0",
    "    mov rax, [r14]", // Tcb.host_fs
    "    call nomu_wrfs",
    "    mov rdi, rbx",
    "    mov rsi, r12",
    "    mov rdx, r13",
    "    mov rcx, r14",
    "    call {interrupt}",
    "    cmp eax, {resume_guest}",
    "    je 5b",
    "    mov rcx, r14",
    // nomu_leave_guest(tcb: rcx), with nomu's fs base installed: back where
    // nomu_enter_guest was called, with a clean FPU.
    ".globl nomu_leave_guest",
    "nomu_leave_guest:",
    "    mov rsp, [rcx + {host_rsp}]",
    "    lea rdi, [rip + {init_xstate}]",
    "    mov eax, {guest_components}",
    "    xor edx, edx",
    "    xrstor64 [rdi]",
    "    pop r15",
    "    pop r14",
    "    pop r13",
    "    pop r12",
    "    pop rbx",
    "    pop rbp",
    "    ret",
    // nomu_enter_guest(entry: rdi, tcb: rsi): saves nomu's callee-saved
    // registers for nomu_leave_guest and enters guest code.
    ".globl nomu_enter_guest",
    ".type nomu_enter_guest,@function",
    "nomu_enter_guest:",
    "    push rbp",
    "    push rbx",
    "    push r12",
    "    push r13",
    "    push r14",
    "    push r15",
    "    mov [rsi + {host_rsp}], rsp",
    "    lea rdx, [rdi + {entry_fs}]",
    "    mov rcx, rsi",
    "    lea rsi, [rdi + {entry_fpstate}]",
    "    jmp nomu_resume_guest",
    // The handlers' sa_restorer, inside the stubs (libc's __restore_rt is
    // not): the way back to nomu's code may have put the guest's fs base
    // back, and a kick landing here must still be seen as one in nomu.
    ".globl nomu_trap_restorer",
    "nomu_trap_restorer:",
    "    mov eax, 15", // rt_sigreturn
    "    syscall",
    "    ud2",
    ".globl nomu_trap_stubs_end",
    "nomu_trap_stubs_end:",
    fsgs = sym NOMU_HAVE_FSGSBASE,
    entry_clear = const !(RFLAGS_AC | RFLAGS_NT) as i64 as i32,
    entry_clear_bits = const RFLAGS_AC | RFLAGS_NT,
    kstack_mask = const !(KSTACK_SIZE - 1),
    tcb_offset = const TCB_OFFSET,
    uc_ss_sp = const offset_of!(Ucontext, ss_sp),
    uc_ss_size = const offset_of!(Ucontext, ss_size),
    kstack_signal_stack = const KSTACK_SIGNAL_STACK_SIZE,
    page_size = const PAGE_SIZE,
    stray = sym nomu_handle_stray,
    handler = sym nomu_handle_trap,
    interrupt = sym nomu_handle_kick_note,
    resume_guest = const RESUME_GUEST,
    uc_regs = const offset_of!(Ucontext, mcontext) + offset_of!(Sigcontext, regs),
    uc_fpstate = const offset_of!(Ucontext, mcontext) + offset_of!(Sigcontext, fpstate),
    init_xstate = sym NOMU_INIT_XSTATE,
    guest_components = const GUEST_XSTATE_COMPONENTS,
    kick_note = const offset_of!(Tcb, kick_note),
    host_rsp = const offset_of!(Tcb, host_rsp),
    entry_fs = const offset_of!(GuestEntry, fs_base),
    entry_fpstate = const offset_of!(GuestEntry, fpstate),
);

extern "C" {
    fn nomu_trap_entry(signo: i32, info: *mut libc::siginfo_t, uc: *mut libc::c_void);
    fn nomu_enter_guest(entry: *mut GuestEntry, tcb: *mut libc::c_void);
    fn nomu_trap_restorer();
    static nomu_trap_stubs_start: u8;
    static nomu_resume_tail: u8;
    static nomu_resume_tail_iret: u8;
    static nomu_resume_tail_end: u8;
    static nomu_trap_stubs_end: u8;
}

fn addr_of(sym: &u8) -> u64 {
    sym as *const u8 as u64
}

/// The Linux x86-64 `struct sigcontext`.
#[repr(C)]
pub(super) struct Sigcontext {
    pub(super) regs: GuestRegs,
    pub(super) cs_gs_fs_ss: u64,
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
    pub(super) flags: u64,
    link: u64,
    pub(super) ss_sp: u64,
    ss_flags: i32,
    ss_pad: i32,
    pub(super) ss_size: u64,
    pub(super) mcontext: Sigcontext,
    pub(super) sigmask: u64,
}

impl Sigcontext {
    /// The code segment the thread ran in.
    pub(super) fn cs(&self) -> u16 {
        self.cs_gs_fs_ss as u16
    }

    /// Back to 64-bit code (after a `sysenter` left the thread in compat
    /// mode), for a path that resumes the guest from this context.
    pub(super) fn set_64bit_segments(&mut self) {
        let gs_fs = self.cs_gs_fs_ss & 0x0000_ffff_ffff_0000;
        self.cs_gs_fs_ss = gs_fs | super::USER_CS as u64 | (super::USER_DS as u64) << 48;
    }
}

pub(super) use crate::abi::rflags::IF as RFLAGS_IF;

/// The host signal that kicks a guest thread out of guest code so the
/// kernel can deliver a guest signal to it (see [`kick`]). A standard
/// signal, so kicks sent while one is pending coalesce into it: a
/// real-time one queues every kick, and a thread that came back from
/// being descheduled with hundreds queued had them all delivered at once
/// (SA_NODEFER), a frame each nested on its kernel stack, until nomu died
/// of SIGSEGV on the guard page (tests/nomu/io_signal_storm.c). SIGSTKFLT:
/// the host never raises it on x86, and nomu forwards none of its own.
pub const KICK_SIGNAL: i32 = libc::SIGSTKFLT;

/// Makes the host thread `host_tid` trap into the kernel soon: at once if it
/// runs guest code, else when it next returns to guest code.
pub fn kick(host_tid: i32) {
    if host_tid > 0 {
        // SAFETY: tgkill to one of our own threads with our kick signal,
        // whose handler is installed before any guest runs.
        unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), host_tid, KICK_SIGNAL) };
    }
}

/// While it lives, the calling thread lets kicks through: for the split and
/// sysemu paths, whose kernel side runs on a host thread of its own that
/// waits in host calls for its guest thread (see host::blocking). Its
/// handler, on the thread's kernel stack, only notes the kick (and ends
/// such a call).
pub struct KicksLetThrough(());

impl KicksLetThrough {
    pub fn new() -> KicksLetThrough {
        crate::host::sys::unblock_signals(&[KICK_SIGNAL]);
        KicksLetThrough(())
    }
}

impl Drop for KicksLetThrough {
    fn drop(&mut self) {
        crate::host::sys::block_signals(&[KICK_SIGNAL]);
    }
}

/// Installs the handler for SIGSYS, the fault signals and the kick. Must
/// run once, before any guest thread starts. `guest_mask` is the host
/// signal mask guest code runs with (nomu's own forwarded signals stay
/// blocked there).
pub fn install(guest_mask: u64) -> Result<(), String> {
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
    Ok(())
}

/// A path that rewrites guest syscall instructions into calls of a stub of
/// its own (zpoline), as the host signal handler sees it: the handler still
/// gets each site's first use (SIGSYS), kicks that land in the stub, and
/// the faults the stub or its trampoline take on the guest's behalf.
pub(super) trait SyscallRewriter: Sync {
    /// The `syscall` instruction at `site` trapped: rewrite it. Whether the
    /// site now is a rewritten one.
    fn rewrite(&self, site: u64) -> bool;
    /// Whether `rip` lies in the rewriter's stub (a thread there is in
    /// nomu's code, whatever its fs base says).
    fn in_stub(&self, rip: u64) -> bool;
    /// A kick interrupted the stub at `regs.rip`: if that is the way back's
    /// tail, makes `regs` the guest state it was installing and returns
    /// true (the kick then interrupts guest code); else false.
    fn finish_exit_tail(&self, regs: &mut GuestRegs, tcb: &Tcb) -> bool;
    /// A fault at `regs.rip` in the stub while a guest thread runs: the
    /// guest's fault it stands for (`regs` made the guest's), or None when
    /// it is nomu's own.
    fn fault_in_stub(&self, regs: &mut GuestRegs, tcb: &Tcb) -> Option<Fault>;
    /// A fault of guest code: the trap it stands for when the rewriting
    /// caused it (`regs` made that trap's), or None when it is the guest's
    /// own fault as it stands (`regs` may then be moved from the
    /// rewriter's code to the guest's own: see `guest_stopped`). `trapno`
    /// is the CPU's (3 for an int3).
    fn fault_in_guest(&self, regs: &mut GuestRegs, signo: i32, addr: u64, trapno: u64) -> Option<Trap>;
    /// A kick stopped guest code at `regs.rip`: where it runs code of the
    /// rewriter's on the guest's behalf (a trampoline), `regs` become the
    /// equivalent state in the guest's own code.
    fn guest_stopped(&self, _regs: &mut GuestRegs) {}
    /// Whether the rewriter keeps its per-thread block in the gs base (then
    /// the guest's never reaches the host).
    fn owns_gs_base(&self) -> bool;
}

static REWRITER: OnceLock<&'static dyn SyscallRewriter> = OnceLock::new();

/// Plugs in the syscall rewriter, once, before any guest thread runs.
pub(super) fn set_rewriter(rewriter: &'static dyn SyscallRewriter) {
    if REWRITER.set(rewriter).is_err() {
        panic!("a second syscall rewriter");
    }
}

fn rewriter() -> Option<&'static dyn SyscallRewriter> {
    // A load of an initialised OnceLock is an atomic read: fine in the handler.
    REWRITER.get().copied()
}

fn install_handler(sig: i32) -> Result<(), String> {
    // The mask stays what it was (SA_NODEFER, empty sa_mask): guest code
    // is resumed without a sigreturn to put a mask back. So kernel code
    // runs with the kick unblocked, and SA_RESTART keeps a kick from failing
    // nomu's own host syscalls. The restorer is nomu's own (libc's
    // sigaction would put its own there): a kick between the handler's
    // return and the end of its sigreturn lands in the stubs (in_stub),
    // where the thread may run on the guest's fs base. With libc's, such
    // a kick was taken for one in guest code, and the kernel delivered the
    // guest's signal onto nomu's kernel stack (io_signal_storm on seccomp).
    //
    // Not the kick's own handler: a kick is blocked while it runs. Each
    // kick delivered puts a frame with the whole extended state on the
    // kernel stack, and the host delivers a signal pending again before
    // the handler runs its first instruction; a sender kicking as fast as
    // it can (a forked child's kill loop aimed at this thread's process,
    // io_signal_storm) then stacked frame on frame at the handler's entry
    // until nomu died of SIGSEGV on the guard page (a Zen 5 VM, whose
    // AVX-512 state makes each frame ~3.5 KiB: 1 MiB in ~300 kicks).
    let nodefer = if sig == KICK_SIGNAL { 0 } else { libc::SA_NODEFER };
    let act = crate::abi::KernelSigaction {
        handler: nomu_trap_entry as *const () as u64,
        flags: (libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART | nodefer) as u64 | crate::abi::SA_RESTORER,
        restorer: nomu_trap_restorer as *const () as u64,
        mask: 0,
    };
    // SAFETY: installing a handler whose entry is the asm stub above, which
    // follows the SA_SIGINFO calling convention, with a restorer that
    // makes the rt_sigreturn call; act is a valid kernel sigaction.
    let r = unsafe { libc::syscall(libc::SYS_rt_sigaction, sig, &act as *const _, 0usize, 8usize) };
    if r < 0 {
        return Err(format!("sigaction({sig}): {}", last_errno()));
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

/// Runs guest code on this host thread until a trap answers Resume::Exit:
/// the seccomp path, and the zpoline path (which enters the same way).
pub(super) fn run_in_process(kstack: &ThreadKernelStack, start: StartState, kernel: &mut dyn GuestKernel) {
    if kstack.fresh {
        unregister_rseq(crate::host::sys::fs_base() as usize);
    }
    let tcb = kstack.tcb();
    // SAFETY: the Tcb lives in our kernel stack mapping, which outlives
    // this call; the kernel pointer is only used by traps that happen
    // while we are executing (inside nomu_enter_guest).
    unsafe {
        (*tcb).guest_gs = start.gs_base;
        // The first way into guest code looks for signals first: one sent
        // before this thread ran (its kick went nowhere) is not left
        // waiting for the guest's first syscall.
        (*tcb).kick_note = 1;
        // This kernel stack may have run another guest thread before.
        (*tcb).set_fast_answers(None);
        let kernel: *mut (dyn GuestKernel + '_) = kernel;
        (*tcb).kernel =
            Some(std::mem::transmute::<*mut (dyn GuestKernel + '_), *mut (dyn GuestKernel + 'static)>(kernel));
    }
    // The guest starts with its creator's extended state (a copy, 64-byte
    // aligned for xrstor, that lives until this thread leaves guest code),
    // or a clean FPU.
    let mut image = start.xstate.as_deref().map(AlignedXstate::of);
    let mut entry = GuestEntry {
        regs: GuestRegs { rflags: start.regs.rflags | RFLAGS_IF, ..start.regs },
        fpstate: image.as_mut().map_or(0, |i| i.as_mut_ptr() as u64),
        fs_base: start.fs_base,
    };
    // Guest code and the kernel run with the guest's mask (the kick let
    // through); a kick from here on is noted and handled before the guest
    // runs its first instruction. Inside another guest thread's trap that
    // mask is in force already.
    let nested = kstack.nested();
    if !nested {
        set_sigmask(GUEST_HOST_MASK.load(Ordering::Relaxed));
    }
    // SAFETY: we stay in this call until a trap answers Resume::Exit,
    // which returns here through nomu_leave_guest with nomu's callee-saved
    // registers and fs base restored.
    unsafe {
        nomu_enter_guest(&mut entry, tcb.cast());
        (*tcb).kernel = None;
    }
    // nomu's own mask (kick blocked) again, while the kernel stack is still
    // in place for a kick that slips in first.
    if !nested {
        set_sigmask(GUEST_HOST_MASK.load(Ordering::Relaxed) | 1 << (KICK_SIGNAL - 1));
    }
}

/// A copy of an xsave image (signal-frame layout) where xrstor can load it.
struct AlignedXstate(Vec<XsaveChunk>, usize);

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct XsaveChunk([u8; 64]);

impl AlignedXstate {
    fn of(image: &[u8]) -> AlignedXstate {
        let mut copy = AlignedXstate(vec![XsaveChunk([0; 64]); image.len().div_ceil(64)], image.len());
        copy.bytes().copy_from_slice(image);
        copy
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the chunks are plain bytes, at least self.1 of them.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast::<u8>(), self.1) }
    }

    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr().cast()
    }
}

fn set_sigmask(mask: u64) {
    // SAFETY: rt_sigprocmask with a valid 8-byte set.
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_SETMASK, &mask as *const u64, 0usize, 8) };
}

/// Whether `rip` lies in this path's asm (where a thread is in nomu's code
/// whatever its fs base says).
fn in_stub(rip: u64) -> bool {
    // SAFETY: addresses of asm labels, never read.
    let (start, end) = unsafe { (addr_of(&nomu_trap_stubs_start), addr_of(&nomu_trap_stubs_end)) };
    (start..end).contains(&rip)
}

/// A kick that interrupted [`nomu_resume_guest`]'s tail: makes `regs` the
/// guest state the tail was installing and returns true (the kick is then
/// an interrupt of guest code: the xsave image and fs base are the guest's
/// already). False when `regs.rip` is not in the tail.
fn finish_exit_tail(regs: &mut GuestRegs) -> bool {
    // SAFETY: addresses of asm labels, never read.
    let (tail, iret, end) =
        unsafe { (addr_of(&nomu_resume_tail), addr_of(&nomu_resume_tail_iret), addr_of(&nomu_resume_tail_end)) };
    if (tail..iret).contains(&regs.rip) {
        // rbx still points at the GuestRegs the tail loads from (in a frame
        // above this handler's on the kernel stack, or in run_in_process).
        // SAFETY: the tail only reads them, and they outlive the way back.
        *regs = unsafe { *(regs.rbx as *const GuestRegs) };
        true
    } else if (iret..end).contains(&regs.rip) {
        // Only the iretq is left: the registers are the guest's, rip,
        // RFLAGS and rsp are in the iretq frame at rsp.
        // SAFETY: the tail built that frame at rsp on the kernel stack.
        let f = unsafe { *(regs.rsp as *const [u64; 5]) };
        (regs.rip, regs.rflags, regs.rsp) = (f[0], f[2], f[3]);
        true
    } else {
        false
    }
}

/// Called by `nomu_trap_entry` for a host signal on a thread that has no
/// kernel stack in force (see there): one of nomu's own threads, or a guest
/// worker before its kernel stack is installed. No guest code runs there,
/// so a kick or a signal someone sent is nothing to act on; a fault is a
/// fault-safe copy's or nomu's own.
///
/// # Safety
/// Only the asm stub calls it, with the host's siginfo and ucontext.
unsafe extern "C" fn nomu_handle_stray(signo: i32, info: *mut libc::siginfo_t, uc: *mut Ucontext) {
    // SAFETY: the host passed valid siginfo and ucontext pointers.
    let (info, uc) = unsafe { (&*info, &mut *uc) };
    if !FAULT_SIGNALS.contains(&signo) || info.si_code <= 0 {
        return;
    }
    let rip = uc.mcontext.regs.rip;
    if let Some(resume_at) = safecopy::fault_fixup(rip as usize) {
        uc.mcontext.regs.rip = resume_at as u64;
        return;
    }
    // SAFETY: si_addr is valid for the fault signals we registered.
    internal_fault(signo, rip, unsafe { info.si_addr() } as u64);
}

/// Called by `nomu_trap_entry` with nomu's fs base installed. `fs_slot`
/// holds the interrupted fs base. Returns how the stub goes on:
/// BACK_TO_NOMU (the signal interrupted nomu's own code; sigreturn),
/// RESUME_GUEST (from the frame, through nomu_resume_guest) or LEAVE_GUEST.
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
) -> u64 {
    // SAFETY: the host passed valid siginfo and ucontext pointers for this
    // signal; tcb and fs_slot were computed by the stub on our kernel stack.
    let (uc, tcb, fs_slot) = unsafe { (&mut *uc, &mut *tcb, &mut *fs_slot) };
    let rip = uc.mcontext.regs.rip;
    let rewriter = rewriter();
    let in_nomu = *fs_slot == tcb.host_fs || in_stub(rip) || rewriter.is_some_and(|r| r.in_stub(rip));
    let mut new_site = None;
    // SAFETY: the host's siginfo for this SIGSYS.
    let trap = if signo == libc::SIGSYS && !unsafe { super::sigsys_is_64bit(info) } {
        // The way back (iretq) uses nomu's own 64-bit segments.
        let cs = uc.mcontext.cs();
        super::i386_syscall_fault(&mut uc.mcontext.regs, cs)
    } else if signo == libc::SIGSYS {
        // First use of this syscall instruction: next time it calls the
        // rewriter's stub.
        let site = rip.wrapping_sub(2);
        if rewriter.is_some_and(|r| r.rewrite(site)) {
            new_site = Some(site);
        }
        Trap::Syscall
    } else if signo == KICK_SIGNAL {
        if in_nomu {
            let regs = &mut uc.mcontext.regs;
            // In a way back's last instructions the thread is as good as in
            // guest code; anywhere else in nomu the way back checks a note.
            if !(finish_exit_tail(regs) || rewriter.is_some_and(|r| r.finish_exit_tail(regs, tcb))) {
                tcb.kick_note = 1;
                // A host call made to be ended by a kick ends now.
                if let Some(cancel) = crate::host::blocking::cancel_point(rip) {
                    regs.rip = cancel;
                }
                return BACK_TO_NOMU;
            }
        } else if let Some(r) = rewriter {
            r.guest_stopped(&mut uc.mcontext.regs);
        }
        Trap::Interrupt
    } else {
        if let Some(resume_at) = safecopy::fault_fixup(rip as usize) {
            uc.mcontext.regs.rip = resume_at as u64;
            return BACK_TO_NOMU;
        }
        // SAFETY: si_addr is valid for the fault signals we registered.
        let addr = unsafe { (*info).si_addr() } as u64;
        // SAFETY: si_code is always valid.
        let code = unsafe { (*info).si_code };
        let trapno = uc.mcontext.trapno;
        let regs = &mut uc.mcontext.regs;
        // SAFETY: the address of an asm label, never read.
        let guests_fault_in_nomu = if tcb.kernel.is_none() {
            None
        } else if rip == unsafe { addr_of(&nomu_resume_tail_iret) } {
            // The way back's last instruction faulted on the guest's rip.
            finish_exit_tail(regs);
            Some(BAD_RETURN_FAULT)
        } else {
            rewriter.and_then(|r| r.fault_in_stub(regs, tcb))
        };
        if let Some(fault) = guests_fault_in_nomu {
            Trap::Fault(fault)
        } else if in_nomu || tcb.kernel.is_none() {
            internal_fault(signo, rip, addr);
            return BACK_TO_NOMU;
        } else if let Some(trap) = rewriter.and_then(|r| r.fault_in_guest(regs, signo, addr, trapno)) {
            trap
        } else {
            Trap::Fault(Fault { signo, code, addr, trapno: uc.mcontext.trapno, err: uc.mcontext.err })
        }
    };
    let mask = uc.sigmask;
    let mcontext = &mut uc.mcontext;
    // SAFETY: the caller's contract, passed on.
    let to = unsafe { run_kernel(trap, &mut mcontext.regs, &mut mcontext.fpstate, fs_slot, tcb, new_site) };
    if signo == KICK_SIGNAL {
        // The kick was blocked while its handler ran (install_handler) and
        // no sigreturn unblocks it on these ways out: the mask it
        // interrupted again. A kick already pending comes now, over this
        // frame, and is noted for the way back.
        set_sigmask(mask);
    }
    to
}

/// Called by `nomu_resume_guest` when it finds a kick noted: the kick
/// interrupts the guest state it was about to resume. RESUME_GUEST or
/// LEAVE_GUEST.
///
/// # Safety
/// Only the asm stub calls it, with the pointers it was resuming from and
/// this thread's Tcb.
unsafe extern "C" fn nomu_handle_kick_note(
    regs: *mut GuestRegs,
    fpstate: *mut u64,
    fs_base: *mut u64,
    tcb: *mut Tcb,
) -> u64 {
    // SAFETY: all four point at live state of this thread (see above).
    unsafe { run_kernel(Trap::Interrupt, &mut *regs, &mut *fpstate, &mut *fs_base, &mut *tcb, None) }
}

/// Hands a trap to the kernel. `fpstate` is the guest's xsave image (0:
/// initial state), `fs_base` its fs base; both are updated for the resume.
///
/// # Safety
/// `fpstate`, when not 0, points at an xsave image in the layout of a
/// Linux signal frame that stays valid until the guest resumes.
unsafe fn run_kernel(
    trap: Trap,
    regs: &mut GuestRegs,
    fpstate: &mut u64,
    fs_base: &mut u64,
    tcb: &mut Tcb,
    new_site: Option<u64>,
) -> u64 {
    let Some(kernel) = tcb.kernel else {
        crate::host::sys::write_all(2, b"nomu: internal error: a guest trap without a guest thread\n");
        std::process::abort();
    };
    let mut xstate = xstate_of(*fpstate);
    let mut frame = TrapFrame {
        regs,
        fs_base: *fs_base,
        gs_base: tcb.guest_gs,
        reset_xstate: false,
        xstate: &mut xstate,
        new_site,
    };
    // SAFETY: the pointer was set by `run`, which is still executing below us
    // on this thread, and nothing else uses it meanwhile.
    let resume = unsafe { (*kernel).on_trap(trap, &mut frame) };
    let (new_fs, gs_base, reset) = (frame.fs_base, frame.gs_base, frame.reset_xstate);
    if gs_base != tcb.guest_gs && !rewriter().is_some_and(|r| r.owns_gs_base()) {
        tcb.guest_gs = gs_base;
        let _ = crate::host::sys::set_gs_base(gs_base);
    }
    match resume {
        Resume::Guest => {
            *fs_base = new_fs;
            if reset {
                *fpstate = 0; // resumed from the initial-state image
            }
            // SAFETY: as for on_trap above.
            tcb.set_fast_answers(unsafe { (*kernel).local_answers() });
            RESUME_GUEST
        }
        Resume::Exit => LEAVE_GUEST,
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
    // Formatted on the stack and written raw: the fault may have come with
    // nomu's code running on the guest's fs base (seen: a signal sent right
    // after a spawned child's exec), where malloc and libc cannot run.
    struct StackBuf([u8; 160], usize);
    impl std::fmt::Write for StackBuf {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let n = s.len().min(self.0.len() - self.1);
            self.0[self.1..self.1 + n].copy_from_slice(&s.as_bytes()[..n]);
            self.1 += n;
            Ok(())
        }
    }
    let mut msg = StackBuf([0; 160], 0);
    let _ = std::fmt::Write::write_fmt(
        &mut msg,
        format_args!("nomu: internal error: signal {signo} at rip {rip:#x} (address {addr:#x})\n"),
    );
    // A raw write: libc's touches thread-local state through fs too.
    let text = &msg.0[..msg.1];
    // SAFETY: writing our own stack buffer to stderr.
    let _ = unsafe {
        crate::host::syscall::syscall(
            libc::SYS_write,
            crate::host::syscall::args([2, text.as_ptr() as u64, text.len() as u64]),
        )
    };
    // SAFETY: restoring the default action; returning re-raises the fault.
    unsafe { libc::signal(signo, libc::SIG_DFL) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kick between a handler's return and the end of its sigreturn must
    /// be seen as one in nomu's code, whatever the fs base: the restorer
    /// lies in the stubs. (With libc's __restore_rt, such a kick under
    /// io_signal_storm was taken for one in guest code, and the guest's
    /// signal frame pushed at nomu's kernel stack.)
    #[test]
    fn handlers_return_through_a_restorer_inside_the_stubs() {
        install_handler(KICK_SIGNAL).unwrap(); // nobody sends it in these tests
        let mut act = crate::abi::KernelSigaction::default();
        // SAFETY: reads the action just installed into a valid struct.
        let r = unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                KICK_SIGNAL,
                0usize,
                &mut act as *mut crate::abi::KernelSigaction,
                8usize,
            )
        };
        assert_eq!(r, 0);
        assert_eq!(act.handler, nomu_trap_entry as *const () as u64);
        assert_ne!(act.flags & crate::abi::SA_RESTORER, 0);
        assert!(in_stub(act.restorer), "restorer {:#x} outside the stubs", act.restorer);
    }
}
