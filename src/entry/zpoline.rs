//! The zpoline entry path: a guest's `syscall` instruction (0f 05) becomes
//! `call *%rax` (ff d0), which lands in a trampoline at address 0 whose
//! byte at offset N leads to nomu's entry stub for syscall number N.
//!
//! Sites are rewritten lazily: the seccomp filter still traps every
//! `syscall` executed from guest memory, and the SIGSYS handler rewrites the
//! instruction it came from before handling it, so code the dynamic linker,
//! dlopen or a JIT brings in is covered without any disassembly. The 2-byte
//! rewrite is a locked compare-and-swap through a writable alias of guest
//! memory, so a thread executing the site meanwhile sees the old or the
//! new instruction. A site that straddles a cache line (no atomic 2-byte
//! store covers it) is rewritten in two steps, as rewrite.rs does its
//! patches: 05 -> d0 first, membarrier(PRIVATE_EXPEDITED_SYNC_CORE) (every
//! CPU running this process serializes), then 0f -> ff. The `0f d0` in
//! between is an invalid opcode: a thread meeting it takes #UD (SIGILL) at
//! the marked site, which is handled as the syscall. `ff 05` (a
//! `inc [rip+x]`) can never be seen: ff is written only once every CPU
//! fetches d0.
//!
//! The trampoline (page 0, read+execute):
//! - offsets 0..512 (every Linux x86-64 syscall number) hold pairs
//!   `eb d` (jmp +d) with d an even REX prefix byte: entered at the `eb` it
//!   jumps forward, entered at the d byte it is a REX-prefixed jmp, so any
//!   entry reaches the exit in a handful of jumps without touching a register
//!   or a flag;
//! - 512..576: one-byte nops;
//! - 576: `jmp [rip + 0x160e0e]` to the stub, through a pointer in a
//!   read-only page at 0x161000 (below guest memory);
//! - the rest of the page is zero bytes: `00 00` is `add [rax], al` with
//!   rax = the landing address, a write to this read-only page, which faults.
//!
//! Numbers landing anywhere but the sled fault (or, for non-canonical
//! numbers, raise #GP at the call site); the
//! fault handler sees that the guest called from a rewritten site and turns
//! the fault into the syscall, which the kernel answers with ENOSYS. Two
//! caveats, documented in the README: number 577 lands on the exit jump's
//! 0x25 byte, `and eax, 0xe0e`, so it returns ENOSYS with the arithmetic
//! flags changed; and a number equal to an address of guest memory (above
//! 0x200000, far beyond any syscall) jumps into guest memory, as on every
//! zpoline. Without protection keys page 0 cannot be execute-only, so
//! reads of addresses 0..4095 succeed instead of faulting.
//!
//! A jump to NULL (or anywhere in the sled) from anything but a rewritten
//! site also reaches the stub; the stub checks the return address against
//! the set of rewritten sites and, when it is not one, reports a SIGSEGV at
//! address 0 with the registers a native NULL jump would fault with.
//!
//! The red zone: `call` stores the return address (the address right after
//! the rewritten instruction) in the 8 bytes at rsp-8. Those 8 bytes are
//! lost, as on every zpoline; the stub itself never touches the guest's
//! stack otherwise (it runs on the thread's kernel stack), so rsp-128 up to
//! rsp-9 survive a syscall. tests/guest/fpu.c checks exactly that.
//!
//! Per-thread state lives in the Tcb, which the stub reaches through %gs
//! (as lazypoline does): the gs base of a thread running zpoline guest code
//! is its Tcb, so guests cannot set their own (ARCH_SET_GS fails with
//! EINVAL). The stub saves the guest's general registers and flags on the
//! kernel stack and xmm0-15 in the Tcb's xsave area (the rest of the
//! extended state, MXCSR included, is nothing nomu's code touches; a full
//! image in the layout of a Linux signal frame is made only when the
//! kernel needs one, so signal delivery works as on the seccomp path),
//! swaps fs base with rdfsbase/wrfsbase, and calls the kernel. On the way
//! back the guest's flags come back with sahf, or popfq when DF, AC, NT or
//! ID must. Host signals (faults, the kick) still arrive through the
//! handler every path installs (host_signals), which this path plugs into
//! as its [`SyscallRewriter`]; kicks that land while the thread is in the
//! stub or the kernel are remembered in the Tcb and turned into an
//! interrupt on the way back to guest code, and one in the stub's last
//! instructions finishes them from the saved registers.
//!
//! # Answers in the stub
//! getpid and gettid are answered by the stub itself, without saving
//! anything or swapping fs base (two wrfsbase are ~30 ns of a ~95 ns trap on
//! the AMD EPYC VM): after each trap the kernel leaves the thread's tid and
//! pid in its Tcb (`Tcb::set_fast_answers`, from `local_answers`: none
//! under --trace, where every call shows), and a thread entering guest
//! code, or a kernel stack taken by another guest thread, starts with none.
//! The ids a thread runs with only change inside the kernel (a non-leader
//! execve takes the pid as its tid), so they are never stale. Under
//! zpoline the site must be marked at its own address (what `is_site`
//! looks at first); from a rewrite trampoline nothing is checked (as for
//! its other calls). The stub picks the number with lea and jrcxz, which
//! leave the flags alone, saves the flags on the kernel stack, and puts
//! the arithmetic ones back with sahf as the tail does; rcx and r11 come
//! back as `syscall` leaves them. A kick noted before the stub looks at
//! the note sends it through the kernel as an interrupt at the syscall's
//! return; one after that finishes the way back from the registers
//! (`finish_exit_tail`). getppid, which every path takes through the
//! kernel, is the bench's null syscall.

use super::host_signals::{self, SyscallRewriter};
use super::kstack::{Tcb, ThreadKernelStack, XSAVE_RESERVED};
use super::{EntryPath, Fault, GuestKernel, GuestRegs, Resume, StartState, Trap, TrapFrame, BAD_RETURN_FAULT};
use crate::host::physmem::{PhysMem, PAGE_SIZE};
use crate::host::{last_errno, safecopy};
use std::arch::global_asm;
use std::mem::offset_of;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Syscall numbers with a fast path through the sled.
const SLED_NUMBERS: usize = 512;
const NOP_ZONE: usize = 64;
/// Where the sled's jumps end: the indirect jump to the stub.
const EXIT_AT: usize = SLED_NUMBERS + NOP_ZONE;
/// The exit jump's displacement: its bytes (0e 0e 16 00) each fault when
/// executed on their own (0e and 16 are invalid in 64-bit mode; a lone 00
/// before the zero fill is `add [rax], al` into this read-only page).
const POINTER_DISP: usize = 0x16_0e0e;
/// The stub's address lives in a read-only page of its own, below guest
/// memory (which starts at 0x200000).
const POINTER_AT: usize = EXIT_AT + 6 + POINTER_DISP;
const POINTER_PAGE: usize = POINTER_AT & !(PAGE_SIZE - 1);
const TRAMPOLINE_LEN: usize = PAGE_SIZE;
const _: () = assert!(POINTER_PAGE >= TRAMPOLINE_LEN && POINTER_AT + 8 <= POINTER_PAGE + PAGE_SIZE);

const REWRITTEN: [u8; 2] = [0xff, 0xd0]; // call *%rax
const SYSCALL: [u8; 2] = [0x0f, 0x05];
/// A straddling site between the two steps of its rewrite: no-prefix
/// `0f d0` is undefined (#UD).
const HALF_REWRITTEN: [u8; 2] = [0x0f, 0xd0];
/// Held while a straddling site is rewritten, and by forget_sites: a page
/// freed meanwhile must not get the second byte written into its next use.
static STRADDLE_PATCHING: std::sync::Mutex<()> = std::sync::Mutex::new(());
/// Whether membarrier(SYNC_CORE) is registered: straddling sites are
/// rewritten only then.
static SYNC_CORE: AtomicBool = AtomicBool::new(false);

static ACTIVE: AtomicBool = AtomicBool::new(false);
/// One bit per byte of guest memory: set where a `syscall` was rewritten.
static SITES: AtomicUsize = AtomicUsize::new(0);
/// Where SITES' first bit is (physical memory's base), and one less than
/// the bytes it covers (a site is 2 bytes): for the stub's own check, 0
/// (nothing passes) until SITES is made.
static SITES_BASE: AtomicUsize = AtomicUsize::new(0);
static SITES_LIMIT: AtomicUsize = AtomicUsize::new(0);
/// One bit per page of guest memory: some site in it is marked in SITES
/// (so freeing memory clears only the pages that need it).
static SITE_PAGES: AtomicUsize = AtomicUsize::new(0);
/// Size of the xsave image (XCR0's features, standard format).
static XSTATE_SIZE: AtomicUsize = AtomicUsize::new(0);
/// Where in the xsave area the stub keeps xmm0-15 (after the
/// largest xsave image, 64-byte aligned).
const SSE_SAVE_OFFSET: usize = XSAVE_RESERVED - 512;

global_asm!(
    ".text",
    ".globl nomu_zpoline_start",
    "nomu_zpoline_start:",
    // The entry's way to its answers in the stub (within jrcxz's reach;
    // stub code as the rest is, for in_stub).
    ".Lz_fast_pid:",
    "    mov ecx, {fast_pid}",
    "    jmp .Lz_fast",
    ".Lz_fast_tid:",
    "    mov ecx, {fast_tid}",
    "    jmp .Lz_fast",
    // On a cache line of its own: where it lands otherwise depends on code
    // elsewhere and moved fstat by 10% on the test VM.
    ".p2align 6",
    ".globl nomu_zpoline_entry",
    ".type nomu_zpoline_entry,@function",
    "nomu_zpoline_entry:",
    // From the trampoline: guest registers, the return address on top of
    // the guest stack, %gs = this thread's Tcb.
    "    pop qword ptr gs:[{z_rip}]",
    "    mov qword ptr gs:[{z_rsp}], rsp",
    "    mov qword ptr gs:[{z_reason}], 0",
    // getpid and gettid may be answered right here ("Answers in the
    // stub"). lea and jrcxz leave the flags alone; rcx is the syscall's to
    // clobber.
    "    lea rcx, [rax - {nr_getpid}]",
    "    jrcxz .Lz_fast_pid",
    "    lea rcx, [rax - {nr_gettid}]",
    "    jrcxz .Lz_fast_tid",
    "nomu_zpoline_switch:",
    "    mov rsp, qword ptr gs:[{z_stack_top}]",
    // A GuestRegs on the kernel stack, last field first.
    "    pushfq",
    "    push qword ptr gs:[{z_rip}]",
    "    push qword ptr gs:[{z_rsp}]",
    "    push rcx",
    "    push rax",
    "    push rdx",
    "    push rbx",
    "    push rbp",
    "    push rsi",
    "    push rdi",
    "    push r15",
    "    push r14",
    "    push r13",
    "    push r12",
    "    push r11",
    "    push r10",
    "    push r9",
    "    push r8",
    // A kick on the way out comes back here with the GuestRegs in place.
    "nomu_zpoline_saved:",
    // Neither the guest's DF, AC (alignment checks), NT nor ID may reach
    // nomu, so that the way back can restore the guest's flags with sahf
    // unless one of them is set. popfq is slow: only a guest with AC, NT
    // or ID set pays for clearing them here.
    "    cld",
    "    test dword ptr [rsp + 136], {entry_clear}", // GuestRegs.rflags
    "    jz 7f",
    "    pushfq",
    "    and qword ptr [rsp], ~{entry_clear}",
    "    popfq",
    "7:",
    // The vector state nomu's own code can touch: xmm0-15 (nomu is built
    // without AVX, and glibc's string functions are kept off AVX, see
    // `keep_glibc_off_avx`). MXCSR stays the guest's: nomu does no
    // floating-point arithmetic on guest threads (`make lint` checks), and
    // integer SSE ignores it. The full xsave image is made only when the
    // kernel asks for it (signal delivery, sigreturn, execve).
    "    mov rbx, qword ptr gs:[{z_xsave}]",
    "    add rbx, {sse_save}",
    "    movaps [rbx + 0], xmm0",
    "    movaps [rbx + 16], xmm1",
    "    movaps [rbx + 32], xmm2",
    "    movaps [rbx + 48], xmm3",
    "    movaps [rbx + 64], xmm4",
    "    movaps [rbx + 80], xmm5",
    "    movaps [rbx + 96], xmm6",
    "    movaps [rbx + 112], xmm7",
    "    movaps [rbx + 128], xmm8",
    "    movaps [rbx + 144], xmm9",
    "    movaps [rbx + 160], xmm10",
    "    movaps [rbx + 176], xmm11",
    "    movaps [rbx + 192], xmm12",
    "    movaps [rbx + 208], xmm13",
    "    movaps [rbx + 224], xmm14",
    "    movaps [rbx + 240], xmm15",
    "    rdfsbase rax",
    "    mov qword ptr gs:[{z_guest_fs}], rax",
    "    mov rax, qword ptr gs:[{host_fs}]",
    "    wrfsbase rax",
    "    mov rdi, rsp",
    "    mov rsi, qword ptr gs:[{z_self}]",
    "    call {handler}",
    "    test eax, eax",
    "    jnz 3f",
    "    mov rax, qword ptr gs:[{z_guest_fs}]",
    "    wrfsbase rax",
    // The kernel made (and maybe edited) a full image: it is the state.
    "    cmp qword ptr gs:[{z_full}], 0",
    "    jne 5f",
    "    movaps xmm0, [rbx + 0]",
    "    movaps xmm1, [rbx + 16]",
    "    movaps xmm2, [rbx + 32]",
    "    movaps xmm3, [rbx + 48]",
    "    movaps xmm4, [rbx + 64]",
    "    movaps xmm5, [rbx + 80]",
    "    movaps xmm6, [rbx + 96]",
    "    movaps xmm7, [rbx + 112]",
    "    movaps xmm8, [rbx + 128]",
    "    movaps xmm9, [rbx + 144]",
    "    movaps xmm10, [rbx + 160]",
    "    movaps xmm11, [rbx + 176]",
    "    movaps xmm12, [rbx + 192]",
    "    movaps xmm13, [rbx + 208]",
    "    movaps xmm14, [rbx + 224]",
    "    movaps xmm15, [rbx + 240]",
    "    jmp 6f",
    "5:  mov qword ptr gs:[{z_full}], 0",
    "    mov rbx, qword ptr gs:[{z_xsave}]",
    "    mov eax, -1",
    "    mov edx, -1",
    "    xrstor64 [rbx]",
    "6:",
    "    mov rax, [rsp + 120]", // GuestRegs.rsp
    "    mov qword ptr gs:[{z_rsp}], rax",
    "    mov rax, [rsp + 128]", // GuestRegs.rip
    "    mov qword ptr gs:[{z_rip}], rax",
    // A kick that came while this thread was in the stub or the kernel.
    // The tail starts once the note was read: from there on a kick is
    // handled by taking the guest's state from the GuestRegs, which stay in
    // place until rsp leaves them (see `finish_exit_tail`).
    "    cmp qword ptr gs:[{kick_note}], 0",
    ".globl nomu_zpoline_tail",
    "nomu_zpoline_tail:",
    "    jne 2f",
    "    mov r8, [rsp + 0]",
    "    mov r9, [rsp + 8]",
    "    mov r10, [rsp + 16]",
    "    mov r11, [rsp + 24]",
    "    mov r12, [rsp + 32]",
    "    mov r13, [rsp + 40]",
    "    mov r14, [rsp + 48]",
    "    mov r15, [rsp + 56]",
    "    mov rdi, [rsp + 64]",
    "    mov rsi, [rsp + 72]",
    "    mov rbp, [rsp + 80]",
    "    mov rbx, [rsp + 88]",
    "    mov rdx, [rsp + 96]",
    // Flags: the status flags with sahf and an add for OF, unless the
    // guest's DF, AC, NT or ID (or TF) must come back, which takes popfq.
    "    test dword ptr [rsp + 136], {exit_slow}",
    "    jnz 8f",
    "    movzx ecx, byte ptr [rsp + 137]",
    "    and ecx, 8", // OF, bit 11
    "    shl ecx, 4", // 0x80 or 0
    "    add cl, cl", // 0x80 + 0x80 overflows: OF as the guest had it
    "    mov ah, byte ptr [rsp + 136]",
    "    sahf", // SF ZF AF PF CF
    "9:  mov rax, [rsp + 104]",
    "    mov rcx, [rsp + 112]",
    "    mov rsp, qword ptr gs:[{z_rsp}]",
    ".globl nomu_zpoline_tail_jmp",
    "nomu_zpoline_tail_jmp:",
    "    jmp qword ptr gs:[{z_rip}]",
    "8:  push qword ptr [rsp + 136]",
    "    popfq",
    "    jmp 9b",
    ".globl nomu_zpoline_tail_end",
    "nomu_zpoline_tail_end:",
    "2:  mov qword ptr gs:[{kick_note}], 0",
    "    mov qword ptr gs:[{z_reason}], 1",
    "    jmp nomu_zpoline_saved",
    // Leave guest mode for good: back where nomu_enter_guest was called.
    "3:  mov rcx, qword ptr gs:[{z_self}]",
    "    jmp nomu_leave_guest",
    // The rewrite mode's entry, from a site's trampoline: guest registers
    // but rcx, which holds the address after the site (as `syscall` leaves
    // it), and r11, where to return; the guest's stack untouched.
    ".globl nomu_rewrite_entry",
    "nomu_rewrite_entry:",
    "    mov qword ptr gs:[{z_rip}], rcx",
    "    mov qword ptr gs:[{z_rsp}], rsp",
    "    mov qword ptr gs:[{z_reason}], 2",
    "    mov qword ptr gs:[{z_back}], r11",
    "    lea rcx, [rax - {nr_getpid}]",
    "    jrcxz .Lr_fast_pid",
    "    lea rcx, [rax - {nr_gettid}]",
    "    jrcxz .Lr_fast_tid",
    "    mov rcx, qword ptr gs:[{z_rip}]",
    "    jmp nomu_zpoline_switch",
    ".Lr_fast_pid:",
    "    mov ecx, {fast_pid}",
    "    jmp .Lz_fast",
    ".Lr_fast_tid:",
    "    mov ecx, {fast_tid}",
    // Answers in the stub: rax = the number, ecx the answer's offset in
    // the Tcb, z_rip and z_rsp the guest's (rip after the site), z_reason
    // 0 (zpoline) or 2 (rewrite, z_back set).
    ".Lz_fast:",
    "    mov rsp, qword ptr gs:[{z_stack_top}]",
    "    pushfq", // the guest's flags, at rsp + 16 below
    "    push rax",
    "    push rdx",
    "    mov rdx, qword ptr gs:[rcx]", // the answer: 0 when the kernel must see the call
    "    test rdx, rdx",
    "    jz .Lz_fast_no",
    "    cmp qword ptr gs:[{z_reason}], 2",
    "    je .Lz_fast_yes",
    // zpoline: only from a site marked at its own address, as is_site
    // checks first (the kernel marks the other kinds on their first call).
    "    mov rcx, qword ptr gs:[{z_rip}]",
    "    mov qword ptr gs:[{z_back}], rcx",
    "    sub rcx, 2",
    "    sub rcx, qword ptr [rip + {sites_base}]",
    "    cmp rcx, qword ptr [rip + {sites_limit}]",
    "    jae .Lz_fast_no",
    "    mov rax, rcx",
    "    shr rax, 3",
    "    add rax, qword ptr [rip + {sites}]",
    "    movzx eax, byte ptr [rax]",
    "    and ecx, 7",
    "    bt eax, ecx",
    "    jnc .Lz_fast_no",
    ".Lz_fast_yes:",
    // r11 = the flags, as `syscall` leaves it; the arithmetic flags back
    // as the tail puts them back (only they changed here).
    "    mov r11, qword ptr [rsp + 16]",
    "    mov ecx, r11d",
    "    and ecx, 0x800", // OF
    "    shr ecx, 4",
    "    add cl, cl",
    "    mov eax, r11d",
    "    mov ah, al",
    "    sahf",
    "    mov rax, rdx",
    "    pop rdx",
    // A kick noted so far is handled now, as one in the tail is. From
    // here on the kick handler finishes the way back itself
    // (finish_exit_tail); jrcxz leaves the flags alone.
    "    mov rcx, qword ptr gs:[{kick_note}]",
    ".globl nomu_zpoline_fast_tail",
    "nomu_zpoline_fast_tail:",
    "    jrcxz 1f",
    "    jmp .Lz_fast_kick",
    "1:  mov rcx, qword ptr gs:[{z_rip}]",
    "    mov rsp, qword ptr gs:[{z_rsp}]",
    ".globl nomu_zpoline_fast_jmp",
    "nomu_zpoline_fast_jmp:",
    "    jmp qword ptr gs:[{z_back}]",
    ".globl nomu_zpoline_fast_end",
    "nomu_zpoline_fast_end:",
    // The call is answered; the kick interrupts the guest where the
    // answer returns to, with the registers it returns with.
    ".Lz_fast_kick:",
    "    mov qword ptr gs:[{kick_note}], 0",
    "    mov rcx, qword ptr gs:[{z_rip}]",
    "    push qword ptr gs:[{z_back}]",
    "    pop qword ptr gs:[{z_rip}]",
    "    mov qword ptr gs:[{z_reason}], 1",
    "    jmp nomu_zpoline_switch",
    // Not answered here: the guest's registers and flags back, to the kernel.
    ".Lz_fast_no:",
    "    pop rdx",
    "    pop rax",
    "    popfq",
    "    mov rcx, qword ptr gs:[{z_rip}]",
    "    mov r11, qword ptr gs:[{z_back}]",
    "    jmp nomu_zpoline_switch",
    ".globl nomu_zpoline_end",
    "nomu_zpoline_end:",
    z_rip = const offset_of!(Tcb, z_rip),
    z_rsp = const offset_of!(Tcb, z_rsp),
    z_reason = const offset_of!(Tcb, z_reason),
    kick_note = const offset_of!(Tcb, kick_note),
    z_stack_top = const offset_of!(Tcb, z_stack_top),
    z_xsave = const offset_of!(Tcb, z_xsave),
    z_guest_fs = const offset_of!(Tcb, z_guest_fs),
    z_full = const offset_of!(Tcb, z_full),
    sse_save = const SSE_SAVE_OFFSET,
    z_self = const offset_of!(Tcb, z_self),
    host_fs = const offset_of!(Tcb, host_fs),
    entry_clear = const RFLAGS_AC | RFLAGS_NT | RFLAGS_ID,
    exit_slow = const RFLAGS_TF | RFLAGS_DF | RFLAGS_AC | RFLAGS_NT | RFLAGS_ID,
    handler = sym nomu_zpoline_trap,
    z_back = const offset_of!(Tcb, z_back),
    fast_pid = const offset_of!(Tcb, fast_pid),
    fast_tid = const offset_of!(Tcb, fast_tid),
    nr_getpid = const libc::SYS_getpid,
    nr_gettid = const libc::SYS_gettid,
    sites = sym SITES,
    sites_base = sym SITES_BASE,
    sites_limit = sym SITES_LIMIT,
);

extern "C" {
    static nomu_zpoline_start: u8;
    static nomu_zpoline_entry: u8;
    static nomu_zpoline_tail: u8;
    static nomu_zpoline_tail_jmp: u8;
    static nomu_zpoline_tail_end: u8;
    static nomu_zpoline_fast_tail: u8;
    static nomu_zpoline_fast_jmp: u8;
    static nomu_zpoline_fast_end: u8;
    static nomu_zpoline_end: u8;
    static nomu_rewrite_entry: u8;
}

/// The rewrite mode (entry path `rewrite`, see rewrite.rs): per-site
/// trampolines instead of page 0.
static REWRITE_MODE: AtomicBool = AtomicBool::new(false);

fn rewrite_mode() -> bool {
    REWRITE_MODE.load(Ordering::Relaxed)
}

fn addr_of(sym: &u8) -> u64 {
    sym as *const u8 as u64
}

/// Whether this host can run the zpoline path, and if not, why.
pub fn available() -> Result<(), String> {
    static AVAILABLE: OnceLock<Result<(), String>> = OnceLock::new();
    AVAILABLE.get_or_init(probe).clone()
}

/// Whether this host can run the rewrite mode (no page 0 needed).
pub fn rewrite_available() -> Result<(), String> {
    static AVAILABLE: OnceLock<Result<(), String>> = OnceLock::new();
    AVAILABLE.get_or_init(|| probe_stub().and_then(|_| super::rewrite::available())).clone()
}

/// What the stub needs of the host, in both modes.
fn probe_stub() -> Result<(), String> {
    super::seccomp::available().map_err(|e| format!("it catches first uses through seccomp: {e}"))?;
    if !crate::host::cpu::has_fsgsbase() {
        return Err("needs the FSGSBASE instructions (CPU or kernel lacks them)".into());
    }
    if !crate::host::cpu::has_xsaveopt() {
        return Err("needs the XSAVEOPT instruction".into());
    }
    if crate::host::cpu::xsave_size() + 64 > SSE_SAVE_OFFSET {
        return Err(format!("the CPU's xsave area ({} bytes) is too big", crate::host::cpu::xsave_size()));
    }
    Ok(())
}

fn probe() -> Result<(), String> {
    probe_stub()?;
    let min = std::fs::read_to_string("/proc/sys/vm/mmap_min_addr").unwrap_or_default();
    if min.trim() != "0" {
        return Err(format!(
            "its trampoline lives at address 0 and vm.mmap_min_addr is {} (as root: sysctl vm.mmap_min_addr=0)",
            min.trim()
        ));
    }
    // The sysctl can say 0 and an LSM still refuse: try.
    let page = map_at_zero(PAGE_SIZE)?;
    // SAFETY: unmapping the probe page we just mapped.
    unsafe { libc::munmap(page as *mut libc::c_void, PAGE_SIZE) };
    Ok(())
}

/// Maps `len` bytes of fresh memory at address 0.
fn map_at_zero(len: usize) -> Result<usize, String> {
    // SAFETY: MAP_FIXED_NOREPLACE at address 0 never replaces a mapping.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(format!("mapping address 0 failed: {}", last_errno()));
    }
    if !p.is_null() {
        // SAFETY: an old kernel ignored the flag and placed it elsewhere.
        unsafe { libc::munmap(p, len) };
        return Err("the host would not map address 0".into());
    }
    Ok(0)
}

/// The trampoline's two pages, built in ordinary memory.
fn trampoline_bytes() -> Vec<u8> {
    let mut t = vec![0u8; TRAMPOLINE_LEN];
    t[SLED_NUMBERS..EXIT_AT].fill(0x90);
    // cost[p]: instructions from offset p to the exit (pair starts and the
    // nop zone), filled from the end so every jump can pick the cheapest
    // target among the ones its REX-byte displacement can reach.
    let mut cost = vec![usize::MAX; EXIT_AT + 1];
    cost[EXIT_AT] = 0;
    for (p, c) in cost.iter_mut().enumerate().take(EXIT_AT).skip(SLED_NUMBERS) {
        *c = EXIT_AT - p;
    }
    for e in (0..SLED_NUMBERS).step_by(2).rev() {
        let best = (0x40u8..=0x4e)
            .step_by(2)
            .filter(|&d| e + 2 + d as usize <= EXIT_AT)
            .min_by_key(|&d| (cost[e + 2 + d as usize], std::cmp::Reverse(d)))
            .expect("a reachable target");
        t[e] = 0xeb;
        t[e + 1] = best;
        cost[e] = 1 + cost[e + 2 + best as usize];
    }
    let mut jmp = [0xff, 0x25, 0, 0, 0, 0];
    jmp[2..].copy_from_slice(&(POINTER_DISP as u32).to_le_bytes());
    t[EXIT_AT..EXIT_AT + 6].copy_from_slice(&jmp);
    t
}

fn install_trampoline() -> Result<(), String> {
    // The stub's address, in its read-only page.
    // SAFETY: MAP_FIXED_NOREPLACE below guest memory never replaces a mapping.
    let page = unsafe {
        libc::mmap(
            POINTER_PAGE as *mut libc::c_void,
            PAGE_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if page as usize != POINTER_PAGE {
        return Err(format!("mapping the trampoline's pointer page at {POINTER_PAGE:#x}: {}", last_errno()));
    }
    // SAFETY: taking the address of an asm label, never reading it.
    let stub = addr_of(unsafe { &nomu_zpoline_entry });
    // SAFETY: the 8 bytes lie inside the page we just mapped writable; then
    // it becomes read-only.
    unsafe {
        std::ptr::write_unaligned(POINTER_AT as *mut u64, stub);
        libc::mprotect(page, PAGE_SIZE, libc::PROT_READ);
    }
    let bytes = trampoline_bytes();
    // Build it in a scratch mapping and move that to address 0, so nomu
    // never writes through a null pointer.
    // SAFETY: a fresh anonymous mapping of our own.
    let scratch = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            TRAMPOLINE_LEN,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if scratch == libc::MAP_FAILED {
        return Err(format!("trampoline: {}", last_errno()));
    }
    // SAFETY: scratch is TRAMPOLINE_LEN writable bytes we own.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), scratch as *mut u8, TRAMPOLINE_LEN) };
    map_at_zero(TRAMPOLINE_LEN)?;
    // SAFETY: moving our scratch mapping over the placeholder we own at 0,
    // then setting its pages' protection.
    unsafe {
        let moved = libc::mremap(
            scratch,
            TRAMPOLINE_LEN,
            TRAMPOLINE_LEN,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            std::ptr::null_mut::<libc::c_void>(),
        );
        if moved == libc::MAP_FAILED || !moved.is_null() {
            return Err(format!("moving the trampoline to address 0: {}", last_errno()));
        }
        if libc::mprotect(std::ptr::null_mut(), PAGE_SIZE, libc::PROT_READ | libc::PROT_EXEC) < 0 {
            return Err(format!("protecting the trampoline: {}", last_errno()));
        }
    }
    Ok(())
}

pub struct ZpolineEntry {
    rewrite: bool,
}

impl ZpolineEntry {
    /// Maps the trampoline and the site bitmap, and plugs the path into the
    /// host signal handler. Runs after that handler and the seccomp filter
    /// are installed (they catch first uses).
    pub fn install(physmem: &PhysMem) -> Result<ZpolineEntry, String> {
        available()?;
        let map_bitmap = |bits: usize, share: i32| {
            // SAFETY: a fresh anonymous mapping, pages allocated on first touch.
            let m = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    bits.div_ceil(64) * 8,
                    libc::PROT_READ | libc::PROT_WRITE,
                    share | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if m == libc::MAP_FAILED {
                Err(format!("zpoline site map: {}", last_errno()))
            } else {
                Ok(m as usize)
            }
        };
        // Shared: forked children's host processes, made from nomu's, see
        // the marks as they are now (forked_site_marks).
        SITES.store(map_bitmap(physmem.size(), libc::MAP_SHARED)?, Ordering::Relaxed);
        SITES_BASE.store(physmem.base(), Ordering::Relaxed);
        SITES_LIMIT.store(physmem.size() - 1, Ordering::Relaxed);
        SITE_PAGES.store(map_bitmap(physmem.size() / PAGE_SIZE, libc::MAP_PRIVATE)?, Ordering::Relaxed);
        XSTATE_SIZE.store(crate::host::cpu::xsave_size(), Ordering::Relaxed);
        install_trampoline()?;
        SYNC_CORE.store(super::rewrite::available().is_ok(), Ordering::Relaxed);
        ACTIVE.store(true, Ordering::Release);
        host_signals::set_rewriter(&Rewriter);
        Ok(ZpolineEntry { rewrite: false })
    }

    /// The rewrite mode: trampolines beside physical memory, no page 0.
    pub fn install_rewrite(physmem: &PhysMem) -> Result<ZpolineEntry, String> {
        rewrite_available()?;
        XSTATE_SIZE.store(crate::host::cpu::xsave_size(), Ordering::Relaxed);
        // SAFETY: the address of an asm label, never read.
        super::rewrite::install(physmem, addr_of(unsafe { &nomu_rewrite_entry }))?;
        REWRITE_MODE.store(true, Ordering::Release);
        host_signals::set_rewriter(&Rewriter);
        Ok(ZpolineEntry { rewrite: true })
    }
}

/// Whether the zpoline path is the one in use.
fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

fn site_bit(site: u64) -> Option<(&'static AtomicU8, u8)> {
    let pm = PhysMem::get();
    let site = site as usize;
    if !pm.contains(site, 2) {
        return None;
    }
    let off = site - pm.base();
    let byte = SITES.load(Ordering::Relaxed) + off / 8;
    // SAFETY: the bitmap covers every byte of physical memory (one bit
    // each) and lives for the rest of the process; AtomicU8 has u8's layout.
    Some((unsafe { &*(byte as *const AtomicU8) }, 1 << (off % 8)))
}

/// The word and bit of SITE_PAGES for the page holding `addr` (inside
/// physical memory).
fn site_page_bit(addr: usize) -> (&'static AtomicU64, u64) {
    let page = (addr - PhysMem::get().base()) / PAGE_SIZE;
    let word = SITE_PAGES.load(Ordering::Relaxed) + page / 64 * 8;
    // SAFETY: the page bitmap covers every page of physical memory and lives
    // for the rest of the process; AtomicU64 has u64's layout and the
    // mapping is page-aligned, so every word is 8-aligned.
    (unsafe { &*(word as *const AtomicU64) }, 1 << (page % 64))
}

/// Code at [src, src+len) was copied to [dst, dst+len) (page-aligned, a
/// cached page's private copy): its rewritten sites are marked there too.
fn copy_sites(dst: usize, src: usize, len: usize) {
    let pm = PhysMem::get();
    if !active() || !pm.contains(src, len) || !pm.contains(dst, len) {
        return;
    }
    for i in 0..len / PAGE_SIZE {
        let (s, d) = (src + i * PAGE_SIZE, dst + i * PAGE_SIZE);
        let (word, bit) = site_page_bit(s);
        if word.load(Ordering::Acquire) & bit == 0 {
            continue;
        }
        let (dword, dbit) = site_page_bit(d);
        dword.fetch_or(dbit, Ordering::Release);
        for (from, to) in page_site_words(s).iter().zip(page_site_words(d)) {
            let v = from.load(Ordering::Acquire);
            if v != 0 {
                to.fetch_or(v, Ordering::Release);
            }
        }
    }
}

/// Pages of physical memory were freed: the sites marked in them are gone
/// with the code (a new program there may have `call *%rax` where a
/// rewritten `syscall` was, and must not be taken for one).
fn forget_sites(addr: usize, len: usize) {
    let pm = PhysMem::get();
    if !active() || !pm.contains(addr, len) {
        return;
    }
    // 64 pages per word of SITE_PAGES: a freed stack of megabytes costs a
    // few dozen loads.
    let (first_page, end_page) = ((addr - pm.base()) / PAGE_SIZE, (addr + len - pm.base()).div_ceil(PAGE_SIZE));
    let mut page = first_page;
    while page < end_page {
        let (word, _) = site_page_bit(pm.base() + page * PAGE_SIZE);
        let in_word = (64 - page % 64).min(end_page - page);
        let mask = if in_word == 64 { u64::MAX } else { ((1u64 << in_word) - 1) << (page % 64) };
        if word.load(Ordering::Relaxed) & mask != 0 {
            // Not while a straddling site there is half rewritten.
            let _patching = STRADDLE_PATCHING.lock().unwrap_or_else(|e| e.into_inner());
            let mut had = word.fetch_and(!mask, Ordering::AcqRel) & mask;
            while had != 0 {
                let p = page - page % 64 + had.trailing_zeros() as usize;
                had &= had - 1;
                for w in page_site_words(pm.base() + p * PAGE_SIZE) {
                    w.store(0, Ordering::Release);
                }
            }
        }
        page += in_word;
    }
}

/// Guest pages [addr, addr+len) were copied to `frame` (fork): the copy
/// gets `syscall` back at every rewritten site (a forked child runs in a
/// host process of its own, where page 0 would enter nomu's stub in its
/// copy of nomu; its syscalls trap instead).
fn restore_copy(addr: usize, frame: usize, len: usize) {
    let pm = PhysMem::get();
    if !active() || !pm.contains(addr, len) {
        return;
    }
    let page_marked = |page: usize| {
        let (word, bit) = site_page_bit(page);
        word.load(Ordering::Acquire) & bit != 0
    };
    // A page-cache page may have been rewritten by another process that
    // shows it: its marks are at its physical address then (is_site). One
    // lookup of where each run of pages is shown, and a page's marks read
    // a word (64 bytes' bits) at a time.
    let mut page = addr;
    for (phys, n) in pm.physical_runs(addr, len) {
        for shown in (phys..phys + n).step_by(PAGE_SIZE) {
            let (here, there) = (page_marked(page), shown != page && page_marked(shown));
            if here || there {
                for (w, (a, b)) in page_site_words(page).iter().zip(page_site_words(shown)).enumerate() {
                    let mut bits = if here { a.load(Ordering::Acquire) } else { 0 };
                    if there {
                        bits |= b.load(Ordering::Acquire);
                    }
                    while bits != 0 {
                        let off = w * 64 + bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        // A site's two bytes both lie in the copy.
                        if page + off + SYSCALL.len() <= addr + len {
                            pm.poke(frame + (page + off - addr), &SYSCALL);
                        }
                    }
                }
            }
            page += PAGE_SIZE;
        }
    }
}

/// The 4096 bits of SITES for the page at `page` (inside physical memory,
/// page-aligned): 64 words.
fn page_site_words(page: usize) -> &'static [AtomicU64] {
    let first = SITES.load(Ordering::Relaxed) + (page - PhysMem::get().base()) / 8;
    // SAFETY: the site bitmap has one bit per byte of physical memory and
    // lives for the rest of the process; it is page-aligned, so a page's
    // bits are 512 bytes at a multiple of 512, every word 8-aligned.
    unsafe { std::slice::from_raw_parts(first as *const AtomicU64, PAGE_SIZE / 64) }
}

/// Whether `site` is a `syscall` instruction this path rewrote. A page
/// shown at several addresses (the page cache's text, mm::mapping) keeps
/// its rewrites, and their marks, at its physical address: a site found
/// there is marked at this address too.
fn is_site(site: u64) -> bool {
    let marked = |s: u64| site_bit(s).is_some_and(|(byte, bit)| byte.load(Ordering::Acquire) & bit != 0);
    if marked(site) {
        return true;
    }
    let pm = PhysMem::get();
    if !pm.contains(site as usize, 2) {
        return false;
    }
    let phys = pm.translate(site as usize) as u64;
    if phys == site || !marked(phys) {
        return false;
    }
    mark(site);
    true
}

/// Marks `site` as a rewritten one (the page first, then the byte).
fn mark(site: u64) {
    let Some((byte, bit)) = site_bit(site) else { return };
    let (page_word, page_bit) = site_page_bit(site as usize);
    page_word.fetch_or(page_bit, Ordering::Release);
    byte.fetch_or(bit, Ordering::Release);
}

/// Rewrites the `syscall` instruction at `site` (called on its first trap,
/// or for a site known from an earlier run of the same file). Whether the
/// site is now a rewritten one.
fn rewrite(site: u64) -> bool {
    if site_bit(site).is_none() {
        return false;
    }
    let straddles = site % 64 == 63;
    let mut code = [0u8; 2];
    if safecopy::copy_from_guest(&mut code, site as usize) != 2
        || (code != SYSCALL && code != REWRITTEN && !(straddles && code == HALF_REWRITTEN))
    {
        return false;
    }
    if straddles && code == SYSCALL && !may_rewrite_straddling(site) {
        // Left to trap through SIGSYS, unmarked (as a site nomu never saw).
        return false;
    }
    // Marked first: once another thread can execute the call, its stub
    // must recognise the site; at the page's physical address too, when it
    // is shown elsewhere (a cached page: every address showing it then
    // finds the mark, see is_site).
    mark(site);
    let phys = PhysMem::get().translate(site as usize) as u64;
    if phys != site {
        mark(phys);
    }
    if code == SYSCALL {
        if straddles {
            rewrite_straddling(site);
        } else {
            PhysMem::get().patch_u16(site as usize, SYSCALL, REWRITTEN);
        }
    }
    true
}

/// Whether a `syscall` at `site` straddling a cache line may be rewritten
/// in two steps: with membarrier(SYNC_CORE), and not after a 66, f2 or f3
/// byte (maybe its prefix: `66 0f d0` and `f2 0f d0` are SSE3's addsub,
/// valid instructions, where `0f d0` must trap).
fn may_rewrite_straddling(site: u64) -> bool {
    let mut before = [0u8; 1];
    SYNC_CORE.load(Ordering::Relaxed)
        && safecopy::copy_from_guest(&mut before, site as usize - 1) == 1
        && !matches!(before[0], 0x66 | 0xf2 | 0xf3)
}

/// Rewrites the marked `syscall` at `site`, whose two bytes straddle a
/// cache line: 05 -> d0, every CPU serialized, 0f -> ff (see the module's
/// comment). Another thread that finds it half done leaves it to the first.
fn rewrite_straddling(site: u64) {
    let pm = PhysMem::get();
    let _patching = STRADDLE_PATCHING.lock().unwrap_or_else(|e| e.into_inner());
    // Still marked under the lock: its page was not freed meanwhile
    // (forget_sites clears the marks under it too).
    let marked = |s: u64| site_bit(s).is_some_and(|(byte, bit)| byte.load(Ordering::Acquire) & bit != 0);
    if !marked(site) || !pm.patch_u8(site as usize + 1, SYSCALL[1], HALF_REWRITTEN[1]) {
        return;
    }
    super::rewrite::sync_core();
    pm.patch_u8(site as usize, SYSCALL[0], REWRITTEN[0]);
}

/// A #UD (SIGILL) of a guest at `regs.rip`: when that is a straddling site
/// halfway through its rewrite (`0f d0`, or `ff d0` by now), makes `regs`
/// those after the syscall and returns true. `code` reads the two bytes
/// at rip, `marked` whether a site is marked.
fn half_rewritten_was_syscall(
    regs: &mut GuestRegs,
    signo: i32,
    trapno: u64,
    code: Option<[u8; 2]>,
    marked: bool,
) -> bool {
    const INVALID_OPCODE: u64 = 6;
    if signo != libc::SIGILL || trapno != INVALID_OPCODE || regs.rip % 64 != 63 || !marked {
        return false;
    }
    if !code.is_some_and(|c| c == HALF_REWRITTEN || c == REWRITTEN) {
        return false;
    }
    regs.rip += 2;
    regs.rcx = regs.rip;
    regs.r11 = regs.rflags;
    true
}

/// A forked child's SIGILL (its own host process, shown the page cache's
/// code as it is, which nomu's process may be rewriting): true, with
/// `regs` as after the syscall, when it came from a half-rewritten site.
pub fn forked_half_rewritten_trap(regs: &mut GuestRegs, signo: i32, trapno: u64, kernel: &mut dyn GuestKernel) -> bool {
    if !active() || rewrite_mode() || signo != libc::SIGILL || regs.rip % 64 != 63 {
        return false;
    }
    let marked = |s: u64| site_bit(s).is_some_and(|(byte, bit)| byte.load(Ordering::Acquire) & bit != 0);
    let site = regs.rip;
    let is_marked = marked(site) || kernel.guest_physical(site).is_some_and(marked);
    // Eight bytes at a line's last byte: the next line holds the second
    // byte, so the read stays in mapped memory.
    let code = kernel.read_guest_u64(site).map(|w| [w as u8, (w >> 8) as u8]);
    half_rewritten_was_syscall(regs, signo, trapno, code, is_marked)
}

/// A fault of a guest that called a rewritten site with a number the sled
/// does not cover: makes `regs` those of the syscall (rip after the site,
/// the return address popped) and returns true.
fn fault_was_syscall(regs: &mut GuestRegs, signo: i32, addr: u64) -> bool {
    let landed_in_trampoline = in_trampoline(regs.rip);
    let landed_at_number = signo == libc::SIGSEGV && regs.rip == regs.rax && addr == regs.rip;
    if landed_in_trampoline || landed_at_number {
        let mut ret = [0u8; 8];
        if safecopy::copy_from_guest(&mut ret, regs.rsp as usize) != 8 {
            return false;
        }
        let ret = u64::from_le_bytes(ret);
        if !is_site(ret.wrapping_sub(2)) {
            return false;
        }
        regs.rip = ret;
        regs.rsp += 8;
    } else if signo == libc::SIGSEGV && is_site(regs.rip) {
        // A non-canonical target raises #GP at the call itself.
        regs.rip += 2;
    } else {
        return false;
    }
    regs.rcx = regs.rip;
    regs.r11 = regs.rflags;
    true
}

/// A kick that interrupted the stub's tail: makes `regs` the guest state
/// the tail was installing and returns true (the kick is then an interrupt
/// of guest code). False anywhere else (the caller leaves a note that the
/// stub checks before its tail).
fn finish_exit_tail(regs: &mut GuestRegs, tcb: &Tcb) -> bool {
    // SAFETY: addresses of asm labels, never read.
    let (tail, tail_jmp, tail_end) =
        unsafe { (addr_of(&nomu_zpoline_tail), addr_of(&nomu_zpoline_tail_jmp), addr_of(&nomu_zpoline_tail_end)) };
    let rip = regs.rip;
    // SAFETY: addresses of asm labels, never read.
    let (fast_tail, fast_end) = unsafe { (addr_of(&nomu_zpoline_fast_tail), addr_of(&nomu_zpoline_fast_end)) };
    if (fast_tail..fast_end).contains(&rip) {
        // An answer in the stub on its way back: rax and r11 hold what it
        // returns, the flags are the guest's; what is left is rcx, the
        // stack and the jump.
        regs.rcx = tcb.z_rip;
        regs.rsp = tcb.z_rsp;
        regs.rip = tcb.z_back;
        return true;
    }
    if rip == tail_jmp {
        // Only the jump is left; the rest is the guest's already.
        regs.rip = tcb.z_rip;
        return true;
    }
    if (tail..tail_end).contains(&rip) {
        // rsp is still at the GuestRegs the stub restores from (this
        // handler's frame lies below it), and they are the whole answer.
        // SAFETY: the stub built them at the top of this thread's kernel
        // stack, and the kernel's edits are in them.
        *regs = unsafe { *((tcb.z_stack_top as usize - std::mem::size_of::<GuestRegs>()) as *const GuestRegs) };
        return true;
    }
    false
}

/// Whether `rip` lies in the trampoline's pages.
fn in_trampoline(rip: u64) -> bool {
    rip < TRAMPOLINE_LEN as u64
}

/// What a native jump to address 0 faults with.
/// A forked child's page 0. A forked child runs in a host process of its
/// own (entry/split.rs) and is shown the page cache's code as it is
/// (mm::space::forked), rewritten sites included, whoever rewrote them and
/// whenever (another process may rewrite a site the child runs). There a
/// site's `call *%rax` lands in this page and slides down its nops to a
/// `syscall`, which traps (syscall user dispatch) as every syscall of the
/// child does; nomu makes it the site's syscall ([`forked_trampoline_trap`])
/// and the child goes on at the `ret`, back after the site. Numbers from
/// 0 to 4092 slide; larger ones fault on the next page, and the guest dies
/// of that SIGSEGV (in nomu's process they are syscalls nomu answers with
/// ENOSYS): no syscall has such a number.
pub const FORKED_SYSCALL_AT: usize = PAGE_SIZE - 3;

/// The memfd holding a forked child's page 0 (made once), to map at 0 in
/// the zygote every forked child is a clone of; None when this path does
/// not rewrite sites in place (rewrite mode) or is not in use.
pub fn forked_child_trampoline() -> Option<i32> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    static PAGE: OnceLock<Option<OwnedFd>> = OnceLock::new();
    if !active() || rewrite_mode() {
        return None;
    }
    let made = PAGE.get_or_init(|| {
        let mut page = vec![0x90u8; PAGE_SIZE];
        page[FORKED_SYSCALL_AT..].copy_from_slice(&[0x0f, 0x05, 0xc3]); // syscall; ret
                                                                        // SAFETY: memfd_create with a NUL-terminated name; the result, if a
                                                                        // descriptor, is ours alone.
        let fd = unsafe { libc::syscall(libc::SYS_memfd_create, c"nomu-forked-page0".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        // SAFETY: pwrite from our own buffer into our own memfd.
        let n = unsafe { libc::pwrite(fd.as_raw_fd(), page.as_ptr().cast(), PAGE_SIZE, 0) };
        (n == PAGE_SIZE as isize).then_some(fd)
    });
    made.as_ref().map(|fd| fd.as_raw_fd())
}

/// A forked child's SIGSYS from its page 0's `syscall`: the syscall of the
/// rewritten site whose `call` got there (the return address on the stack
/// popped, as this path's stub does, and rcx and r11 as the `syscall` at
/// the site would have left them), or a fault fetching from 0 when the
/// guest got there otherwise (a call through a NULL pointer). None for a
/// syscall from anywhere else. `kernel` reads the child's memory (its
/// stack, and where its code page is).
pub fn forked_trampoline_trap(regs: &mut GuestRegs, kernel: &mut dyn GuestKernel) -> Option<Trap> {
    if !active() || rewrite_mode() || regs.rip != (FORKED_SYSCALL_AT + 2) as u64 {
        return None;
    }
    let marked = |s: u64| site_bit(s).is_some_and(|(byte, bit)| byte.load(Ordering::Acquire) & bit != 0);
    let ret = kernel.read_guest_u64(regs.rsp);
    let site = ret.map(|r| r.wrapping_sub(2));
    // The child's page is the page cache's: its marks are at its physical
    // address (and at the address of whoever rewrote it).
    if site.is_some_and(|s| marked(s) || kernel.guest_physical(s).is_some_and(marked)) {
        let ret = ret.unwrap();
        regs.rip = ret;
        regs.rsp += 8;
        regs.rcx = ret;
        regs.r11 = regs.rflags;
        return Some(Trap::Syscall);
    }
    // As natively: the call pushed its return address and fetching from 0
    // faults.
    regs.rip = 0;
    Some(Trap::Fault(NULL_FETCH_FAULT))
}

/// For a forked child's host process, which answers a few syscalls itself
/// (split's "Local answers"), including calls through its page 0 from a
/// site marked at its own address (the usual case: it runs where its parent
/// rewrote it; other calls go to [`forked_trampoline_trap`]): the site
/// bitmap, which it shares, and physical memory's base and size, as
/// (bitmap, base, size). None unless zpoline's page 0 is in use.
pub fn forked_site_marks() -> Option<(u64, u64, u64)> {
    if !active() || rewrite_mode() {
        return None;
    }
    let pm = PhysMem::get();
    Some((SITES.load(Ordering::Relaxed) as u64, pm.base() as u64, pm.size() as u64))
}

const NULL_FETCH_FAULT: Fault = Fault {
    signo: libc::SIGSEGV,
    code: 1, /* SEGV_MAPERR */
    addr: 0,
    trapno: 14,
    err: 0x14, /* user fetch */
};

/// zpoline as the host signal handler sees it.
struct Rewriter;

impl SyscallRewriter for Rewriter {
    fn rewrite(&self, site: u64) -> bool {
        if rewrite_mode() {
            // The kernel patches it (it knows whether the mapping is
            // writable); refused sites are not worth its look.
            let mut code = [0u8; 2];
            return safecopy::copy_from_guest(&mut code, site as usize) == 2
                && code == SYSCALL
                && super::rewrite::may_patch(site);
        }
        rewrite(site)
    }

    fn in_stub(&self, rip: u64) -> bool {
        // SAFETY: addresses of asm labels, never read.
        let (start, end) = unsafe { (addr_of(&nomu_zpoline_start), addr_of(&nomu_zpoline_end)) };
        (start..end).contains(&rip)
    }

    fn finish_exit_tail(&self, regs: &mut GuestRegs, tcb: &Tcb) -> bool {
        finish_exit_tail(regs, tcb)
    }

    fn fault_in_stub(&self, regs: &mut GuestRegs, tcb: &Tcb) -> Option<Fault> {
        // SAFETY: addresses of asm labels, never read.
        let (entry, tail_jmp, fast_jmp) =
            unsafe { (addr_of(&nomu_zpoline_entry), addr_of(&nomu_zpoline_tail_jmp), addr_of(&nomu_zpoline_fast_jmp)) };
        if regs.rip == tail_jmp || regs.rip == fast_jmp {
            // The stub's last instruction, the jump to the guest, faulted
            // on the guest's rip.
            finish_exit_tail(regs, tcb);
            Some(BAD_RETURN_FAULT)
        } else if regs.rip == entry {
            // The stub's first instruction pops the return address from the
            // guest's stack: the guest reached the sled other than through a
            // rewritten site, with a stack it cannot pop (a garbage
            // rt_sigreturn, a wild jump). Nothing is saved yet, every
            // register is the guest's. As natively, a fetch fault at 0
            // (regression: nomu died of it).
            regs.rip = 0;
            Some(NULL_FETCH_FAULT)
        } else {
            None
        }
    }

    fn fault_in_guest(&self, regs: &mut GuestRegs, signo: i32, addr: u64, trapno: u64) -> Option<Trap> {
        if rewrite_mode() {
            if signo == libc::SIGTRAP && trapno == 3 {
                match super::rewrite::int3(regs) {
                    Some(super::rewrite::Int3::Syscall) => return Some(Trap::Syscall),
                    Some(super::rewrite::Int3::Resume) => return Some(Trap::Interrupt),
                    None => {}
                }
            }
            super::rewrite::map_back(regs);
            return None;
        }
        let mut code = [0u8; 2];
        let code =
            (signo == libc::SIGILL && safecopy::copy_from_guest(&mut code, regs.rip as usize) == 2).then_some(code);
        let half_rewritten = |regs: &mut GuestRegs| {
            code.is_some() && half_rewritten_was_syscall(regs, signo, trapno, code, is_site(regs.rip))
        };
        if fault_was_syscall(regs, signo, addr) || half_rewritten(regs) {
            Some(Trap::Syscall)
        } else if in_trampoline(regs.rip) {
            // The guest jumped into the trampoline (to NULL, say) and
            // faulted there (single-stepping, or off the sled's end): as
            // natively, a fault fetching from address 0.
            regs.rip = 0;
            Some(Trap::Fault(NULL_FETCH_FAULT))
        } else {
            None
        }
    }

    fn owns_gs_base(&self) -> bool {
        true
    }

    fn guest_stopped(&self, regs: &mut GuestRegs) {
        if rewrite_mode() {
            super::rewrite::map_back(regs);
        }
    }
}

/// The guest's extended state on this path, made on first use: x87 and
/// the AVX/AVX-512 registers are still the guest's (nomu never touches
/// them, nor MXCSR), xmm0-15 are in the stub's save area.
struct LazyImage<'a> {
    tcb: &'a mut Tcb,
}

impl super::ExtendedState for LazyImage<'_> {
    fn image(&mut self) -> Option<&mut [u8]> {
        if self.tcb.z_full == 0 {
            materialize(self.tcb);
        }
        Some(xstate_image(self.tcb))
    }
}

/// Writes the guest's whole extended state into the xsave area, in the
/// layout of a Linux signal frame; from then on the stub restores from it.
fn materialize(tcb: &mut Tcb) {
    let image = xstate_image(tcb);
    let base = image.as_mut_ptr();
    // SAFETY: xsave64 writes at most xsave_size() bytes at a 64-byte aligned
    // buffer of that size (our area); RFBM all ones means XCR0's features.
    unsafe {
        std::arch::asm!("xsave64 [{0}]", in(reg) base, in("eax") -1i32, in("edx") -1i32, options(nostack));
    }
    // SAFETY: the save area lies in the same kernel stack mapping, past the image.
    let saved = unsafe { std::slice::from_raw_parts((tcb.z_xsave as usize + SSE_SAVE_OFFSET) as *const u8, 256) };
    const XMM: usize = 160;
    image[XMM..XMM + 256].copy_from_slice(saved);
    image[crate::abi::xsave::XSTATE_BV] |= 2; // SSE: restore the xmm registers from the image
    super::write_frame_sw_bytes(image, crate::host::cpu::xcr0());
    tcb.z_full = 1;
}

fn xstate_image(tcb: &Tcb) -> &'static mut [u8] {
    let size = XSTATE_SIZE.load(Ordering::Relaxed);
    // SAFETY: the xsave area is XSAVE_RESERVED bytes of this thread's kernel
    // stack mapping (size + 4 fits, checked at install), used only by this
    // thread, and nothing else refers to it during the trap.
    unsafe { std::slice::from_raw_parts_mut(tcb.z_xsave as *mut u8, size + 4) }
}

/// Puts the xsave image in the initial FPU state, with the software bytes
/// a Linux signal frame carries (so sigframe.rs can treat it as one).
fn reset_xstate(image: &mut [u8]) {
    image[..crate::abi::xsave::COMPONENTS].fill(0);
    image[0..2].copy_from_slice(&0x037fu16.to_le_bytes()); // FCW
    image[crate::abi::xsave::MXCSR..][..4].copy_from_slice(&0x1f80u32.to_le_bytes());
    super::write_frame_sw_bytes(image, crate::host::cpu::xcr0());
}

use crate::abi::rflags::{AC as RFLAGS_AC, DF as RFLAGS_DF, ID as RFLAGS_ID, NT as RFLAGS_NT, TF as RFLAGS_TF};

/// Called by the stub on the kernel stack, with nomu's fs base installed.
/// Returns 0 to resume the guest with `regs`, 1 to leave guest mode.
///
/// # Safety
/// Only the stub calls it, with the GuestRegs it built on this thread's
/// kernel stack and this thread's Tcb.
unsafe extern "C" fn nomu_zpoline_trap(regs: *mut GuestRegs, tcb: *mut Tcb) -> u64 {
    // SAFETY: both point into this thread's kernel stack (see above).
    let (regs, tcb) = unsafe { (&mut *regs, &mut *tcb) };
    let Some(kernel) = tcb.kernel else {
        crate::host::sys::write_all(2, b"nomu: internal error: zpoline trap without a guest thread\n");
        std::process::abort();
    };
    // Rewrite mode, a site whose trampoline runs the instructions after the
    // syscall: (the guest's address after it, the trampoline's).
    let mut way_back = None;
    let trap = if tcb.z_reason == 1 {
        Trap::Interrupt
    } else if tcb.z_reason == 2 {
        // From a rewrite-mode trampoline: rip = rcx = the address after
        // the site in the guest's code, what the kernel and the guest see
        // (rcx as `syscall` leaves it); r11 where the syscall returns to
        // (the trampoline's after-part, when it has one). A guest jumping
        // here otherwise gets no more than a syscall of its own would.
        let (after, back) = (regs.rip, regs.r11);
        if back != after {
            way_back = Some((after, back));
        }
        regs.rcx = after;
        regs.r11 = regs.rflags;
        Trap::Syscall
    } else if is_site(regs.rip.wrapping_sub(2)) {
        // What the syscall instruction would have left there.
        regs.rcx = regs.rip;
        regs.r11 = regs.rflags;
        Trap::Syscall
    } else {
        // A jump to NULL (or into the sled) from anything but a rewritten
        // site: the fault a native jump to 0 takes, with the stack as it was.
        regs.rsp = regs.rsp.wrapping_sub(8);
        regs.rip = 0;
        Trap::Fault(NULL_FETCH_FAULT)
    };
    let fs_base = tcb.z_guest_fs;
    let mut xstate = LazyImage { tcb: &mut *tcb };
    let mut frame = TrapFrame { regs, fs_base, gs_base: 0, reset_xstate: false, xstate: &mut xstate, new_site: None };
    // SAFETY: `run` set the pointer and is still executing below us.
    let resume = unsafe { (*kernel).on_trap(trap, &mut frame) };
    let (fs_base, reset) = (frame.fs_base, frame.reset_xstate);
    match resume {
        Resume::Guest => {
            tcb.z_guest_fs = fs_base;
            // SAFETY: as for on_trap above.
            tcb.set_fast_answers(unsafe { (*kernel).local_answers() });
            if reset {
                reset_xstate(xstate_image(tcb));
                tcb.z_full = 1;
            }
            // The stub returns with popfq: a trap flag would single-step
            // nomu's own last instructions. Not supported on this path.
            regs.rflags &= !RFLAGS_TF;
            if let Some((after, tramp)) = way_back {
                if regs.rip == after {
                    // The syscall returns where it was made: through the
                    // trampoline's copies of what followed it.
                    regs.rip = tramp;
                }
            }
            0
        }
        Resume::Exit => 1,
    }
}

impl EntryPath for ZpolineEntry {
    fn name(&self) -> &'static str {
        if self.rewrite {
            "rewrite"
        } else {
            "zpoline"
        }
    }

    fn interrupt(&self, host_tid: i32) {
        host_signals::kick(host_tid);
    }

    fn supports_guest_gs(&self) -> bool {
        false
    }

    fn runs_nested(&self) -> bool {
        true
    }

    fn prepare_syscall_site(&self, addr: u64) {
        if self.rewrite {
            super::rewrite::patch(addr, super::rewrite::Patching::Fresh);
        } else {
            rewrite(addr);
        }
    }

    fn patch_syscall_site(&self, addr: u64) {
        if self.rewrite {
            super::rewrite::patch(addr, super::rewrite::Patching::Live);
        }
    }

    fn patches_shared_code(&self) -> bool {
        // A forked child runs rewritten sites through its own page 0, and
        // the rewrite path's trampolines through its own stub page.
        if self.rewrite {
            super::rewrite::forked_stub_page().is_none()
        } else {
            forked_child_trampoline().is_none()
        }
    }

    fn shares_code(&self) -> bool {
        // A rewrite-path patch is a jump to a trampoline at a fixed
        // distance from the site: a page shown at another address would
        // jump to somebody else's code (unless an area of its trampolines
        // is shown beside it there: see trampoline_reach).
        !self.rewrite
    }

    fn trampoline_reach(&self) -> Option<(usize, usize)> {
        self.rewrite.then_some((super::rewrite::AREA_REACH, super::rewrite::AREA_CODE_SPAN))
    }

    fn code_area(&self, area: usize, area_len: usize, text: usize, text_len: usize) {
        if self.rewrite {
            super::rewrite::add_area(area, area_len, text, text_len);
        }
    }

    fn code_copied(&self, dst: usize, src: usize, len: usize) {
        if self.rewrite {
            super::rewrite::code_copied(dst, src, len);
        } else {
            copy_sites(dst, src, len);
        }
    }

    fn forked_copy(&self, src: usize, frame: usize, len: usize) {
        if self.rewrite {
            super::rewrite::forked_copy(src, frame, len);
        }
    }

    fn forked_code_made_writable(&self, frame: usize, len: usize) {
        if self.rewrite {
            super::rewrite::forked_code_made_writable(frame, len);
        }
    }

    fn restore_copy(&self, addr: usize, frame: usize, len: usize) {
        if self.rewrite {
            super::rewrite::restore_copy(addr, frame, len);
        } else {
            restore_copy(addr, frame, len);
        }
    }

    fn memory_freed(&self, addr: usize, len: usize) {
        if self.rewrite {
            super::rewrite::memory_freed(addr, len);
        } else {
            forget_sites(addr, len);
        }
    }

    fn set_page_source(&self, claim: Box<dyn Fn(usize, usize) -> bool + Send + Sync>) {
        if self.rewrite {
            super::rewrite::set_page_source(claim);
        }
    }

    fn code_made_writable(&self, addr: usize, len: usize) {
        if self.rewrite {
            super::rewrite::code_made_writable(addr, len);
        }
    }

    fn run(&self, start: StartState, kernel: &mut dyn GuestKernel) {
        // First uses of syscall sites trap through it.
        super::dispatch::ensure_on();
        let kstack = ThreadKernelStack::enter();
        let tcb = kstack.tcb();
        // The guest starts with a clean FPU (see run_in_process) and the
        // xsave area holds nothing of it until the kernel asks for an image.
        // SAFETY: the Tcb and its xsave area live in our kernel stack, which
        // outlives this call.
        unsafe {
            (*tcb).z_full = 0;
            (*tcb).z_guest_fs = start.fs_base;
        }
        // The stub finds the Tcb through %gs (an outer guest thread's Tcb
        // comes back when this one is done).
        if let Err(e) = crate::host::sys::set_gs_base(tcb as u64) {
            panic!("zpoline: setting the gs base: {e}");
        }
        let mut start = start;
        if self.rewrite {
            start.regs.rip = super::rewrite::start_at(start.regs.rip);
        }
        host_signals::run_in_process(&kstack, StartState { gs_base: 0, ..start }, kernel);
        if let Some(outer) = kstack.outer_tcb() {
            let _ = crate::host::sys::set_gs_base(outer as u64);
        }
    }
}
