//! The split entry path: each guest thread runs in a host process of its
//! own that shares nomu's memory (clone with CLONE_VM but neither
//! CLONE_THREAD nor CLONE_SIGHAND), and its syscalls and faults are handed
//! to the nomu thread that runs it, through shared memory and a futex. This
//! is the design the reviewers of nommu UML proposed: the guest never runs
//! on a thread that runs the kernel, and the kernel never runs on a stack or
//! with a TLS pointer the guest controls.
//!
//! # The child
//! A nomu host thread that runs guest threads creates one child (once; the
//! child stays with the host thread across the guest threads nomu's thread
//! pool gives it). The child lives in a [`AREA_SIZE`] block aligned to its
//! size: a guard page, the child's signal stack, a small start stack and,
//! at the top, the [`Mailbox`]. The child's code is the asm below and
//! nothing else: it must never touch TLS (its fs base is the guest's) nor
//! call nomu's Rust code. At start it asks for SIGKILL when its creating
//! thread dies (PR_SET_PDEATHSIG), installs its signal stack and its own
//! handlers (its signal table is its own: SIGSYS, the fault signals and
//! [`CHILD_KICK`] go to [`nomu_split_handler`], the signals nomu forwards
//! to guests are ignored, as a terminal sends them to the child's process
//! group too), then raises the kick signal on itself to *park*.
//!
//! # A trap
//! The seccomp filter [`super::seccomp`] installs process-wide (inherited
//! by every child), or syscall user dispatch, which the child turns on in
//! its start code ([`super::dispatch`]), turns each guest syscall into
//! SIGSYS in the child. Its
//! handler, on the child's signal stack, finds the mailbox by masking its
//! stack pointer, stores the signal number, the siginfo and ucontext
//! addresses and the current fs base, sets `state` to REQUEST, wakes the
//! nomu thread and futex-waits until `state` is RUN. The nomu thread builds
//! the [`TrapFrame`] straight from the child's ucontext (registers) and the
//! xsave image the host saved next to it, calls the kernel, and sets `state`
//! to RUN. The child installs the fs/gs base the mailbox asks for and
//! returns from its handler: the host's `rt_sigreturn` restores the whole
//! guest state (registers, flags, extended state) at once.
//!
//! Parking is the same wait: a child that raised its own kick at start, or
//! whose guest thread left guest mode for good ([`Resume::Exit`]), waits in
//! its handler with state REQUEST; the next [`EntryPath::run`] writes the
//! new guest thread's registers, a clean FPU (no xsave image) and the
//! guest's host signal mask into that ucontext and releases it.
//!
//! # Interrupts, death
//! `interrupt(tid)` names the nomu thread; a table maps it to its child,
//! which gets the kick signal. The child's handlers block every signal, so
//! a kick that comes while the kernel handles a trap (or while the child is
//! parked) waits until the child is back in guest code and then traps at
//! once: harmless, and no kick is lost. The child's `state` word is also
//! its CLONE_CHILD_CLEARTID word: if it dies (killed from outside, or a
//! fault in its own code, which its blocked signals turn into death), the
//! host zeroes the word and wakes the nomu thread, which gives the guest
//! thread a SIGKILL. The nomu thread kills and reaps its child when it
//! exits; if nomu dies, PR_SET_PDEATHSIG kills every child. A guest with a
//! corrupt stack pointer or registers only harms itself: every handler runs
//! on the child's own signal stack, and a host-level fault there kills only
//! the child.
//!
//! The nomu thread keeps its [`ThreadKernelStack`] while it runs a guest
//! thread: nomu's fault-safe copies rely on the host signal
//! handlers (host_signals), which find their Tcb on it.
//!
//! # Local answers
//! A forked child's host process answers three syscalls in its handler,
//! without the round trip below (~9 us, against ~2.4 us for the SIGSYS
//! and sigreturn alone): gettid and getpid from the ids its nomu thread
//! left in the mailbox, and a valid set_robust_list (length 24) by
//! storing the head there; the kernel takes that head at the child's next
//! trap, before it looks at it, and when the guest thread leaves
//! ([`take_local_robust_list`]; only the thread itself may read its robust
//! list). Not under --trace (every syscall shows there), and not in a
//! CLONE_VM child of the split path (its bench numbers are the trap's).
//! glibc's forked child makes set_robust_list its first syscall, musl's
//! gettid, and both then set their signal mask twice.
//!
//! rt_sigprocmask too, while the process has one guest thread: at each
//! release the nomu thread leaves the guest's mask and the signals pending
//! for it or its process in the mailbox, and sets the thread's
//! `sigmask_local`. Meanwhile senders neither drop a signal as ignored nor
//! pass the thread over as blocking it, and kick it; at the kick's trap
//! the kernel takes the mask back first. A change that would unblock a
//! pending signal goes to the kernel, which delivers it. The handler reads
//! `set` and writes `oldset` with faults unblocked: a fault there (or a
//! pointer into the host process's own mappings) sends the call to the
//! kernel, which answers EFAULT as Linux does.
//!
//! Under zpoline a forked child's rewritten sites call its page 0; such a
//! call is answered locally when the site is marked at its own address in
//! zpoline's bitmap (shared, read-only in the child); the handler then
//! does the page's `ret`. Other calls go to the kernel, which checks more.
//! Under the rewrite path a trampoline's syscall traps at the child's stub
//! page (an int3, see rewrite.rs's "Forked children"); the handler answers
//! it as it would the site's `syscall` and goes on where the trampoline's
//! r11 says.
//!
//! # The stub
//! Under the rewrite path a forked child's patched sites jump, through
//! their trampolines, to the rewrite stub's address, where its host
//! process has a page of its own ([`super::rewrite::forked_stub_page`]):
//! a jump to [`forked_stub`]'s code, in the child code. That code does what
//! the host would for an int3 there, without the host's signal delivery
//! (~1.4 us of the ~2.4): with %gs pointing at the mailbox (the child's gs
//! base while stub frames are in use; rewrite-path guests cannot set their
//! own), it saves the registers and flags into a frame laid out as the
//! host's (kept between the signal stack and the start stack, its
//! constant parts written once), blocks signals as the handler's sa_mask
//! does (rt_sigprocmask, which stores the guest's mask in the frame),
//! saves the extended state with xsave (in the layout and with the
//! components the host's own frames state), calls the handler as the host
//! would with SIGTRAP, and returns with rt_sigreturn on the frame: the
//! guest state and its mask back at once, as after any trap. The guest's
//! stack is never touched. A kick that arrives before the handler is
//! called is dropped by the handler (the syscall being made reaches the
//! kernel, which looks at what the kick announced); after that every
//! signal is blocked. A forked child's SIGSYS at a site of its own copy of
//! code, or of code the page cache shares with an area of trampolines,
//! gets that site patched, so the next call takes the stub (its copies of
//! its parent's code keep the parent's patches, see rewrite.rs's "Forked
//! children"). NOMU_FORKED_TRAP=1 keeps the int3 page.
//!
//! # Cost
//! A trap costs the seccomp path's SIGSYS round trip plus two futex
//! handoffs (a wake-up and a context switch each way). Each side wakes the
//! other only if it sleeps (a flag per side, set before sleeping). While a
//! guest thread runs, its nomu thread and child are kept on one CPU
//! ([`Affinity`]): cross-CPU wake-ups of an idle vCPU cost far more than the
//! switch. Spinning instead of sleeping only helps when each side has a CPU
//! to itself, so it is off unless NOMU_SPLIT_SPIN is set.

mod shown;

use super::children::Children;
use super::host_signals::{xstate_of, Ucontext, GUEST_HOST_MASK, RFLAGS_IF};
use super::kstack::{self, ThreadKernelStack};
use super::FAULT_SIGNALS;
use super::{EntryPath, Fault, GuestKernel, GuestRegs, Resume, StartState, Trap, TrapFrame};
use crate::host::physmem::{PhysMem, PAGE_SIZE};
use crate::mm::space::HostOp;
use shown::Shown;
use std::arch::global_asm;
use std::cell::RefCell;
use std::mem::offset_of;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Size and alignment of a child's block (signal stack, start stack, mailbox).
const AREA_SIZE: usize = 64 << 10;
/// Bytes reserved at the top of the block for the mailbox.
const MBOX_RESERVED: usize = 1024;
const MBOX_OFFSET: usize = AREA_SIZE - MBOX_RESERVED;
/// The child's start code runs on this many bytes below the mailbox; its
/// signal stack lies below that, above the guard page.
const START_STACK: usize = 4096;
/// Below the start stack, outside the signal stack: where a forked child's
/// stub builds its signal frames (see "The stub" in the module doc).
const STUB_FRAME_SPACE: usize = 16 << 10;
/// The stub's frame: the restorer's slot, the kernel's ucontext, a siginfo.
const STUB_FRAME_LEN: usize = 8 + std::mem::size_of::<Ucontext>() + 128;
/// Room the handler may use below the stub's frame.
const STUB_HANDLER_STACK: usize = 2048;

/// The host signal that kicks a child out of guest code. The child's signal
/// table is its own, so any signal will do: a standard one (as nomu's own
/// kick), so that kicks sent while the child waits in its handler coalesce
/// into one spurious trap instead of queueing one each.
const CHILD_KICK: i32 = libc::SIGUSR2;

/// `Mailbox::state`: the child is gone (the host cleared its tid word).
const DEAD: u32 = 0;
/// The child waits in its handler for the nomu thread.
const REQUEST: u32 = 1;
/// The child runs (guest code, or its handler on the way in or out).
const RUN: u32 = 2;

/// What a child and its nomu thread share. Every field is an atomic only so
/// both sides may access it through shared references; the `state`
/// handshake orders the accesses.
#[repr(C)]
struct Mailbox {
    /// DEAD, REQUEST or RUN; also the child's CLONE_CHILD_CLEARTID word.
    state: AtomicU32,
    /// The host signal the child is handling.
    signo: AtomicI32,
    /// Its siginfo and ucontext, on the child's signal stack.
    info: AtomicU64,
    uc: AtomicU64,
    /// The guest's fs base: the child stores it at a trap, the nomu thread
    /// may change it, the child installs it on return.
    fs_base: AtomicU64,
    /// The guest's gs base, installed by the child when `gs_dirty` is set.
    gs_base: AtomicU64,
    gs_dirty: AtomicU64,
    /// 1 when rdfsbase/wrfsbase and friends may be used, else arch_prctl.
    fsgsbase: AtomicU64,
    /// Set while the nomu thread (the child) sleeps or is about to sleep on
    /// `state`: the other side skips the futex wake-up when it is clear.
    nomu_sleeps: AtomicU32,
    child_sleeps: AtomicU32,
    /// How long the child spins for the answer before it sleeps, in TSC
    /// cycles (0: it sleeps at once).
    spin: AtomicU64,
    // Set up by the nomu thread before the child starts:
    /// The child's sigaltstack (a `stack_t`).
    altstack: [u64; 3],
    /// The kernel `struct sigaction` for the handled signals, and for the
    /// ignored ones.
    act: [u64; 4],
    ign: [u64; 4],
    /// Zero-terminated signal lists.
    handled: [u8; 16],
    ignored: [u8; 64],
    /// The mask the start code runs with: everything but the kick blocked.
    start_mask: u64,
    /// The futex operation the child waits with: private for a CLONE_VM
    /// child, shared for a forked one (another memory map).
    wait_op: AtomicU64,
    /// Syscall user dispatch for the child, turned on in its start code:
    /// the allowed range's start and length and the selector's address (a
    /// zero length: nomu catches guest syscalls with its seccomp filter).
    dispatch: [u64; 3],
    /// Host syscalls the child makes before it resumes guest code (a
    /// forked child's memory map changes, see [`HostOp`]): `nops` entries
    /// of [`OP_WORDS`] words (number, six arguments) at `ops`.
    ops: AtomicU64,
    nops: AtomicU64,
    /// Set by the nomu thread: after the queued host syscalls, the child
    /// hands back control (state REQUEST, same trap) instead of resuming
    /// guest code.
    ops_only: AtomicU64,
    /// The result of the last queued host syscall made.
    op_result: AtomicU64,
    /// A forked child's name for the host (its comm, `ps` shows it), set
    /// by its first queued host calls: it would show its zygote's.
    name: [u8; 16],
    /// Set by a forked child's nomu thread: the child answers gettid,
    /// getpid and set_robust_list itself (see "Local answers").
    local: AtomicU64,
    local_tid: AtomicU64,
    local_pid: AtomicU64,
    /// A set_robust_list the child answered: its head, and 1 in
    /// `robust_set` until the kernel has taken it.
    robust_head: AtomicU64,
    robust_set: AtomicU64,
    /// Set by the nomu thread at each release while the guest's signal
    /// mask may be the child's to change (one guest thread in the
    /// process): the child answers rt_sigprocmask too.
    sigmask_local: AtomicU64,
    /// The guest thread's signal mask: the kernel's at the release, the
    /// child's after a local rt_sigprocmask (and 1 in `sigmask_set` until
    /// the kernel has taken it).
    sigmask: AtomicU64,
    sigmask_set: AtomicU64,
    /// The signals pending for the thread or its process at the release:
    /// a local change must not unblock one (the kernel delivers it).
    sigmask_pending: AtomicU64,
    /// zpoline's site marks as (bitmap, physical memory's base, size), for
    /// local answers to calls through a forked child's page 0; 0s when
    /// another path is in use.
    sites: u64,
    sites_base: u64,
    sites_len: u64,
    /// A forked child's mappings that are not its guest's (page 0, the
    /// child code, its blocks...), as [start, end): a local answer does
    /// not read or write guest pointers into them.
    not_guest: [[u64; 2]; NOT_GUEST_RANGES],
    /// Where a trap at the rewrite path's stub page leaves rip (the
    /// stub's address + 1: its int3), for local answers to a trampoline's
    /// syscall; 0 when that path is not in use.
    rewrite_stub: u64,
    /// A forked child's stub ("The stub"): its frame (0: the stub page is
    /// int3, every syscall is a host signal), the frame's xsave image, and
    /// the guest's rsp while the stub saves it. `stub_gs` is 1 when the
    /// child's gs base is its mailbox, where the stub finds it.
    stub_frame: u64,
    stub_xsave: u64,
    stub_guest_rsp: u64,
    stub_gs: u64,
    /// The components the stub saves (its xsave's mask), as the host's own
    /// frames state them (see `Child::adopt_host_xstate_format`).
    stub_features: AtomicU64,
}

/// Page 0, the rewrite path's stub page and what zygote::kept_ranges
/// keeps.
const NOT_GUEST_RANGES: usize = 9;

const _: () = assert!(std::mem::size_of::<Mailbox>() <= MBOX_RESERVED);

/// Words per queued host syscall: its number and six arguments.
const OP_WORDS: usize = 7;
/// Room for queued host syscalls in a forked child's ops block.
const OPS_SIZE: usize = 1 << 20;
const MAX_OPS: usize = OPS_SIZE / (OP_WORDS * 8);

const FUTEX_WAIT: i32 = 0;
const FUTEX_WAKE: i32 = 1;
const FUTEX_PRIVATE: i32 = 128;

global_asm!(
    ".text",
    ".globl nomu_split_code_start",
    "nomu_split_code_start:",
    // nomu_split_clone(flags: rdi, stack: rsi, ptid: rdx, ctid: rcx) -> tid
    // or -errno. The child continues at .Lsplit_child on `stack`.
    ".globl nomu_split_clone",
    ".type nomu_split_clone,@function",
    "nomu_split_clone:",
    "    mov r10, rcx",
    "    xor r8d, r8d",
    "    mov eax, 56", // clone
    "    syscall",
    "    test rax, rax",
    "    jz .Lsplit_child",
    "    ret",
    // The child: rsp lies in its block, just below the mailbox.
    ".Lsplit_child:",
    "    xor ebp, ebp",
    "    mov rbx, rsp",
    "    and rbx, {area_mask}",
    "    add rbx, {mbox}",
    "    mov edi, 1", // PR_SET_PDEATHSIG
    "    mov esi, 9", // SIGKILL
    "    mov eax, 157", // prctl
    "    syscall",
    "    test rax, rax",
    "    jnz .Lsplit_die",
    // Guest syscalls trap by syscall user dispatch, when nomu uses it (it
    // is not inherited from the creating thread).
    "    mov r10, [rbx + {dispatch} + 8]",
    "    test r10, r10",
    "    jz .Lsplit_dispatch_done",
    "    mov edi, 59", // PR_SET_SYSCALL_USER_DISPATCH
    "    mov esi, 1", // PR_SYS_DISPATCH_ON
    "    mov rdx, [rbx + {dispatch}]",
    "    mov r8, [rbx + {dispatch} + 16]",
    "    mov eax, 157", // prctl
    "    syscall",
    "    test rax, rax",
    "    jnz .Lsplit_die",
    ".Lsplit_dispatch_done:",
    "    lea rdi, [rbx + {altstack}]",
    "    xor esi, esi",
    "    mov eax, 131", // sigaltstack
    "    syscall",
    "    test rax, rax",
    "    jnz .Lsplit_die",
    "    lea r12, [rbx + {handled}]",
    "    lea r13, [rbx + {act}]",
    "    call .Lsplit_sigactions",
    "    lea r12, [rbx + {ignored}]",
    "    lea r13, [rbx + {ign}]",
    "    call .Lsplit_sigactions",
    "    mov edi, 2", // SIG_SETMASK
    "    lea rsi, [rbx + {start_mask}]",
    "    xor edx, edx",
    "    mov r10d, 8",
    "    mov eax, 14", // rt_sigprocmask
    "    syscall",
    "    test rax, rax",
    "    jnz .Lsplit_die",
    // Park: kick ourselves; the handler waits for the first guest thread,
    // and its sigreturn enters guest code (never coming back here).
    "    mov eax, 186", // gettid
    "    syscall",
    "    mov edi, eax",
    "    mov esi, eax",
    "    mov edx, {kick}",
    "    mov eax, 234", // tgkill
    "    syscall",
    // Dying: state DEAD first, and its nomu thread woken (the host clears
    // the tid word only while another process uses this memory map).
    ".Lsplit_die:",
    "    mov dword ptr [rbx + {state}], {dead}",
    "    lea rdi, [rbx + {state}]",
    "    mov esi, {futex_wake}",
    "    mov edx, 0x7fffffff",
    "    mov eax, 202", // futex
    "    syscall",
    "    mov edi, 127",
    "    mov eax, 60", // exit: the child is a single-thread process
    "    syscall",
    "    ud2",
    // rt_sigaction(sig, r13, NULL, 8) for each sig of the zero-terminated
    // byte list at r12; dies on failure.
    ".Lsplit_sigactions:",
    "    movzx edi, byte ptr [r12]",
    "    test edi, edi",
    "    jz .Lsplit_sigactions_done",
    "    mov rsi, r13",
    "    xor edx, edx",
    "    mov r10d, 8",
    "    mov eax, 13", // rt_sigaction
    "    syscall",
    "    test rax, rax",
    "    jnz .Lsplit_die",
    "    inc r12",
    "    jmp .Lsplit_sigactions",
    ".Lsplit_sigactions_done:",
    "    ret",
    // The child's handler for SIGSYS, faults and kicks, on its signal stack
    // with every signal blocked. Any register may be clobbered: sigreturn
    // restores them all.
    ".globl nomu_split_handler",
    ".type nomu_split_handler,@function",
    "nomu_split_handler:",
    // Guest flags must not reach this code (EFLAGS.AC: alignment checks).
    "    cld",
    "    pushfq",
    "    and qword ptr [rsp], -262145", // ~(1 << 18)
    "    popfq",
    "    mov rbx, rsp",
    "    and rbx, {area_mask}",
    "    add rbx, {mbox}",
    // A kick while a forked child's stub saves the guest's state, before
    // it blocks signals and hands the syscall over: the kernel looks at
    // what the kick announced when it handles that syscall.
    "    cmp edi, {kick}",
    "    jne .Lsplit_kick_seen",
    "    mov rax, [rdx + {uc_rip}]",
    "    lea rcx, [rip + nomu_forked_stub]",
    "    cmp rax, rcx",
    "    jb .Lsplit_kick_seen",
    "    lea rcx, [rip + .Lforked_stub_call]",
    "    cmp rax, rcx",
    "    ja .Lsplit_kick_seen",
    "    ret",
    ".Lsplit_kick_seen:",
    // A fault here of the handler's own (faults are not blocked in it):
    // a local rt_sigprocmask's access to guest memory gives the call to
    // the kernel instead, which reports EFAULT; any other kills the child,
    // as a blocked fault would.
    "    cmp edi, 11", // SIGSEGV
    "    je .Lsplit_fault",
    "    cmp edi, 7", // SIGBUS
    "    jne .Lsplit_not_mine",
    ".Lsplit_fault:",
    "    mov rax, [rdx + {uc_rip}]",
    "    lea rcx, [rip + .Lsplit_sigmask_read]",
    "    cmp rax, rcx",
    "    je .Lsplit_fault_retreat",
    "    lea rcx, [rip + .Lsplit_sigmask_write]",
    "    cmp rax, rcx",
    "    je .Lsplit_fault_retreat",
    "    lea rcx, [rip + .Lsplit_site_read]",
    "    cmp rax, rcx",
    "    je .Lsplit_fault_retreat",
    "    lea rcx, [rip + nomu_split_code_start]",
    "    cmp rax, rcx",
    "    jb .Lsplit_not_mine",
    "    lea rcx, [rip + nomu_split_code_end]",
    "    cmp rax, rcx",
    "    jae .Lsplit_not_mine",
    "    ud2", // SIGILL is blocked here: the host kills the child
    ".Lsplit_fault_retreat:",
    "    lea rcx, [rip + .Lsplit_trap]",
    "    mov [rdx + {uc_rip}], rcx",
    "    ret",
    ".Lsplit_not_mine:",
    // Local answers: a guest syscall whose answer the mailbox holds is
    // answered here. r14: where the guest goes on when the syscall came
    // through code of an entry path (0: after the syscall, as it is);
    // r15 then its rcx, r13 what its rsp grows by.
    "    cmp qword ptr [rbx + {local}], 0",
    "    je .Lsplit_trap",
    "    xor r14d, r14d",
    "    cmp edi, 5", // SIGTRAP
    "    je .Lsplit_local_stub",
    "    cmp edi, 31", // SIGSYS
    "    jne .Lsplit_trap",
    "    cmp qword ptr [rsi + {si_call_addr}], 4096",
    "    jae .Lsplit_local_call",
    // zpoline's page 0, called from a site marked at its address (the
    // kernel looks further, see forked_site_marks): answered as from the
    // site, the page's `ret` done here.
    "    cmp qword ptr [rdx + {uc_rip}], {page0_return}",
    "    jne .Lsplit_trap",
    "    mov rcx, [rbx + {sites}]",
    "    test rcx, rcx",
    "    jz .Lsplit_trap",
    "    mov rcx, [rdx + {uc_rsp}]",
    "    call .Lsplit_not_guest",
    "    jnz .Lsplit_trap",
    "    mov rcx, [rbx + {sites}]",
    "    mov rax, [rdx + {uc_rsp}]",
    ".Lsplit_site_read:",
    "    mov r14, [rax]",
    "    lea rax, [r14 - 2]",
    "    sub rax, [rbx + {sites_base}]",
    "    jb .Lsplit_trap",
    "    mov r8, [rbx + {sites_len}]",
    "    sub r8, 2",
    "    cmp rax, r8",
    "    ja .Lsplit_trap",
    "    bt qword ptr [rcx], rax",
    "    jnc .Lsplit_trap",
    "    mov r15, r14", // the page's `ret` popped, rcx as the site leaves it
    "    mov r13d, 8",
    ".Lsplit_local_call:",
    "    mov eax, dword ptr [rsi + {si_syscall}]",
    "    jmp .Lsplit_local_nr",
    // The rewrite path's stub page (rewrite::forked_stub_page): a
    // trampoline's syscall, rcx the address after the site as `syscall`
    // leaves it, r11 where to go on (rewrite::forked_stub_trap); numbers
    // above 32 bits are the kernel's to refuse.
    ".Lsplit_local_stub:",
    "    mov rax, [rbx + {rewrite_stub}]",
    "    test rax, rax",
    "    jz .Lsplit_trap",
    "    cmp rax, [rdx + {uc_rip}]",
    "    jne .Lsplit_trap",
    "    mov r14, [rdx + {uc_r11}]",
    "    mov r15, [rdx + {uc_rcx}]",
    "    xor r13d, r13d",
    "    mov rax, [rdx + {uc_rax}]",
    "    mov rcx, rax",
    "    shr rcx, 32",
    "    jnz .Lsplit_trap",
    ".Lsplit_local_nr:",
    "    cmp eax, 186", // gettid
    "    je .Lsplit_local_tid",
    "    cmp eax, 39", // getpid
    "    je .Lsplit_local_pid",
    "    cmp eax, 14", // rt_sigprocmask
    "    je .Lsplit_local_sigmask",
    "    cmp eax, 273", // set_robust_list(head, len): only a valid one
    "    jne .Lsplit_trap",
    "    cmp qword ptr [rdx + {uc_rsi}], 24",
    "    jne .Lsplit_trap",
    "    mov rax, [rdx + {uc_rdi}]",
    "    mov [rbx + {robust_head}], rax",
    "    mov qword ptr [rbx + {robust_set}], 1", // after the head (x86 store order)
    "    xor eax, eax",
    "    jmp .Lsplit_local_done",
    // rt_sigprocmask(how, set, oldset, 8) while the mask is the child's:
    // the two accesses to guest memory retreat to .Lsplit_trap on a fault
    // (above), and a change that unblocks a pending signal is the
    // kernel's to make (it delivers the signal).
    ".Lsplit_local_sigmask:",
    "    cmp qword ptr [rbx + {sigmask_local}], 0",
    "    je .Lsplit_trap",
    "    cmp qword ptr [rdx + {uc_r10}], 8",
    "    jne .Lsplit_trap",
    "    mov r8, [rbx + {sigmask}]",
    "    mov r9, r8",
    "    mov rcx, [rdx + {uc_rsi}]",
    "    test rcx, rcx",
    "    jz .Lsplit_sigmask_old",
    "    call .Lsplit_not_guest",
    "    jnz .Lsplit_trap",
    ".Lsplit_sigmask_read:",
    "    mov rcx, [rcx]",
    "    mov eax, dword ptr [rdx + {uc_rdi}]",
    "    cmp eax, 2", // SIG_SETMASK
    "    je .Lsplit_sigmask_setmask",
    "    cmp eax, 1", // SIG_UNBLOCK
    "    je .Lsplit_sigmask_unblock",
    "    test eax, eax", // SIG_BLOCK; anything else: EINVAL, from the kernel
    "    jnz .Lsplit_trap",
    "    or r9, rcx",
    "    jmp .Lsplit_sigmask_new",
    ".Lsplit_sigmask_unblock:",
    "    not rcx",
    "    and r9, rcx",
    "    jmp .Lsplit_sigmask_new",
    ".Lsplit_sigmask_setmask:",
    "    mov r9, rcx",
    ".Lsplit_sigmask_new:",
    "    and r9, {blockable}",
    "    mov rax, r9",
    "    not rax",
    "    test rax, [rbx + {sigmask_pending}]",
    "    jnz .Lsplit_trap",
    ".Lsplit_sigmask_old:",
    "    mov rcx, [rdx + {uc_rdx}]",
    "    test rcx, rcx",
    "    jz .Lsplit_sigmask_keep",
    "    call .Lsplit_not_guest",
    "    jnz .Lsplit_trap",
    ".Lsplit_sigmask_write:",
    "    mov [rcx], r8",
    ".Lsplit_sigmask_keep:",
    "    mov [rbx + {sigmask}], r9",
    "    mov qword ptr [rbx + {sigmask_set}], 1", // after the mask (x86 store order)
    "    xor eax, eax",
    "    jmp .Lsplit_local_done",
    // Whether the 8 bytes at rcx touch memory of the host process's own
    // (not the guest's: natively nothing is mapped there, and the kernel
    // answers EFAULT): ZF clear if so. Clobbers rax, r10 and r11.
    ".Lsplit_not_guest:",
    "    lea r11, [rbx + {not_guest}]",
    "    mov r10d, {not_guest_count}",
    ".Lsplit_not_guest_next:",
    "    cmp rcx, [r11 + 8]",
    "    jae .Lsplit_not_guest_past",
    "    lea rax, [rcx + 8]",
    "    cmp rax, [r11]",
    "    ja .Lsplit_not_guest_hit",
    ".Lsplit_not_guest_past:",
    "    add r11, 16",
    "    dec r10d",
    "    jnz .Lsplit_not_guest_next",
    "    cmp rcx, -8", // wrapping around: not the guest's either
    "    ja .Lsplit_not_guest_hit",
    "    xor eax, eax", // ZF set
    "    ret",
    ".Lsplit_not_guest_hit:",
    "    or eax, 1", // ZF clear
    "    ret",
    ".Lsplit_local_tid:",
    "    mov rax, [rbx + {local_tid}]",
    "    jmp .Lsplit_local_done",
    ".Lsplit_local_pid:",
    "    mov rax, [rbx + {local_pid}]",
    ".Lsplit_local_done:",
    "    mov [rdx + {uc_rax}], rax",
    "    test r14, r14",
    "    jz .Lsplit_local_ret",
    // As the entry path's code and the site's own `syscall` would leave them.
    "    mov [rdx + {uc_rip}], r14",
    "    add [rdx + {uc_rsp}], r13",
    "    mov [rdx + {uc_rcx}], r15",
    "    mov rax, [rdx + {uc_rflags}]",
    "    mov [rdx + {uc_r11}], rax",
    ".Lsplit_local_ret:",
    "    ret",
    ".Lsplit_trap:",
    "    mov [rbx + {signo}], edi",
    "    mov [rbx + {info}], rsi",
    "    mov [rbx + {uc}], rdx",
    "    cmp byte ptr [rbx + {fsgsbase}], 0",
    "    je .Lsplit_getfs",
    "    rdfsbase r12",
    "    jmp .Lsplit_gotfs",
    ".Lsplit_getfs:",
    "    mov edi, 0x1003", // ARCH_GET_FS
    "    lea rsi, [rbx + {fs}]",
    "    mov eax, 158", // arch_prctl
    "    syscall",
    "    mov r12, [rbx + {fs}]",
    ".Lsplit_gotfs:",
    "    mov [rbx + {fs}], r12",
    // Post the request (xchg: a full barrier before reading the flag; the
    // nomu thread sets its flag, then reads state) and wake the nomu thread
    // only if it sleeps.
    ".Lsplit_post:",
    "    mov eax, {request}",
    "    xchg dword ptr [rbx + {state}], eax",
    "    cmp dword ptr [rbx + {nomu_sleeps}], 0",
    "    je .Lsplit_posted",
    "    lea rdi, [rbx + {state}]",
    "    mov esi, {futex_wake}", // shared: the nomu thread waits shared
    "    mov edx, 1",
    "    mov eax, 202", // futex
    "    syscall",
    ".Lsplit_posted:",
    // Spin for a short while (TSC cycles, 0 on one CPU) before sleeping:
    // most syscalls are answered within it.
    "    mov r13, [rbx + {spin}]",
    "    test r13, r13",
    "    jz .Lsplit_wait",
    "    rdtsc",
    "    shl rdx, 32",
    "    or rax, rdx",
    "    add r13, rax",
    ".Lsplit_spin:",
    "    cmp dword ptr [rbx + {state}], {run}",
    "    je .Lsplit_resume",
    "    pause",
    "    rdtsc",
    "    shl rdx, 32",
    "    or rax, rdx",
    "    cmp rax, r13",
    "    jb .Lsplit_spin",
    ".Lsplit_wait:",
    "    mov eax, 1",
    "    xchg dword ptr [rbx + {child_sleeps}], eax",
    "    cmp dword ptr [rbx + {state}], {run}",
    "    je .Lsplit_woken",
    "    lea rdi, [rbx + {state}]",
    "    mov esi, dword ptr [rbx + {wait_op}]",
    "    mov edx, {request}",
    "    xor r10d, r10d",
    "    mov eax, 202",
    "    syscall",
    "    jmp .Lsplit_wait",
    ".Lsplit_woken:",
    "    mov dword ptr [rbx + {child_sleeps}], 0",
    ".Lsplit_resume:",
    // Queued host syscalls (a forked child's memory map, a host thread
    // for a new guest thread), in order; one that fails kills the child
    // (its guest then dies as if by SIGKILL), but a clone's failure is
    // only reported. A clone's new host thread runs the start code on
    // its own block.
    "    mov r15, [rbx + {nops}]",
    "    test r15, r15",
    "    jz .Lsplit_ops_done",
    "    mov r14, [rbx + {ops}]",
    ".Lsplit_op:",
    "    mov rax, [r14]",
    "    mov rdi, [r14 + 8]",
    "    mov rsi, [r14 + 16]",
    "    mov rdx, [r14 + 24]",
    "    mov r10, [r14 + 32]",
    "    mov r8, [r14 + 40]",
    "    mov r9, [r14 + 48]",
    // The number stays in a register: a clone's new host thread or
    // process must not read the ops block again (shared with nomu, which
    // may be writing the next batch once the creator has posted).
    "    mov r13, rax",
    "    syscall",
    "    cmp r13, 56", // clone
    "    jne .Lsplit_op_check",
    "    test rax, rax",
    "    jz .Lsplit_child",
    "    jmp .Lsplit_op_next",
    ".Lsplit_op_check:",
    "    cmp rax, -4095",
    "    jae .Lsplit_die",
    ".Lsplit_op_next:",
    "    mov [rbx + {op_result}], rax",
    "    add r14, {op_size}",
    "    dec r15",
    "    jnz .Lsplit_op",
    "    mov qword ptr [rbx + {nops}], 0",
    ".Lsplit_ops_done:",
    "    cmp qword ptr [rbx + {ops_only}], 0",
    "    je .Lsplit_ops_resume",
    "    mov qword ptr [rbx + {ops_only}], 0",
    "    jmp .Lsplit_post",
    ".Lsplit_ops_resume:",
    "    mov rsi, [rbx + {fs}]",
    "    cmp rsi, r12",
    "    je .Lsplit_fs_done",
    "    cmp byte ptr [rbx + {fsgsbase}], 0",
    "    je .Lsplit_setfs",
    "    wrfsbase rsi",
    "    jmp .Lsplit_fs_done",
    ".Lsplit_setfs:",
    "    mov edi, 0x1002", // ARCH_SET_FS
    "    mov eax, 158",
    "    syscall",
    ".Lsplit_fs_done:",
    "    cmp qword ptr [rbx + {gs_dirty}], 0",
    "    je .Lsplit_gs_done",
    "    mov qword ptr [rbx + {gs_dirty}], 0",
    "    mov rsi, [rbx + {gs}]",
    "    cmp qword ptr [rbx + {stub_gs}], 0", // the stub's way to the mailbox
    "    cmovne rsi, rbx",
    "    cmp byte ptr [rbx + {fsgsbase}], 0",
    "    je .Lsplit_setgs",
    "    wrgsbase rsi",
    "    jmp .Lsplit_gs_done",
    ".Lsplit_setgs:",
    "    mov edi, 0x1001", // ARCH_SET_GS
    "    mov eax, 158",
    "    syscall",
    ".Lsplit_gs_done:",
    "    ret",
    // A forked child's stub (rewrite::forked_stub_page jumps here from the
    // stub's address): a trampoline's syscall, with the guest's registers
    // and flags, rcx and r11 as the trampoline set them, %gs the mailbox.
    // Builds the frame a host signal delivery would for an int3 at the
    // stub (the registers, the xsave image, the mask), blocks signals as
    // the handler's sa_mask does, runs the handler on it and returns
    // through rt_sigreturn as the handler would: the same answer, without
    // the host's delivery. The guest's stack is never touched.
    ".globl nomu_forked_stub",
    "nomu_forked_stub:",
    "    mov gs:[{stub_guest_rsp}], rsp",
    "    mov rsp, gs:[{stub_frame}]",
    "    mov [rsp + {f_regs} + {r_rax}], rax",
    "    pushfq",
    "    pop rax",
    "    mov [rsp + {f_regs} + {r_rflags}], rax",
    "    mov [rsp + {f_regs} + {r_rbx}], rbx",
    "    mov [rsp + {f_regs} + {r_rcx}], rcx",
    "    mov [rsp + {f_regs} + {r_rdx}], rdx",
    "    mov [rsp + {f_regs} + {r_rsi}], rsi",
    "    mov [rsp + {f_regs} + {r_rdi}], rdi",
    "    mov [rsp + {f_regs} + {r_rbp}], rbp",
    "    mov [rsp + {f_regs} + {r_r8}], r8",
    "    mov [rsp + {f_regs} + {r_r9}], r9",
    "    mov [rsp + {f_regs} + {r_r10}], r10",
    "    mov [rsp + {f_regs} + {r_r11}], r11",
    "    mov [rsp + {f_regs} + {r_r12}], r12",
    "    mov [rsp + {f_regs} + {r_r13}], r13",
    "    mov [rsp + {f_regs} + {r_r14}], r14",
    "    mov [rsp + {f_regs} + {r_r15}], r15",
    "    mov rax, gs:[{stub_guest_rsp}]",
    "    mov [rsp + {f_regs} + {r_rsp}], rax",
    "    mov rax, gs:[{rewrite_stub}]", // where an int3 at the stub leaves rip
    "    mov [rsp + {f_regs} + {r_rip}], rax",
    "    rdgsbase rbx",
    "    mov edi, 2", // SIG_SETMASK: the handler's mask; the guest's into the frame
    "    lea rsi, [rbx + {act} + 24]",
    "    lea rdx, [rsp + {f_sigmask}]",
    "    mov r10d, 8",
    "    mov eax, 14", // rt_sigprocmask
    "    syscall",
    "    mov rdi, [rbx + {stub_xsave}]",
    "    mov [rsp + {f_fpstate}], rdi",
    "    mov eax, dword ptr [rbx + {stub_features}]",
    "    mov edx, dword ptr [rbx + {stub_features} + 4]",
    "    xsave64 [rdi]",
    "    mov edi, 5", // SIGTRAP
    "    lea rsi, [rsp + {f_info}]",
    "    lea rdx, [rsp + 8]",
    ".Lforked_stub_call:",
    "    call nomu_split_handler",
    "    add rsp, 8", // the frame, as after the handler's ret
    "    mov eax, 15", // rt_sigreturn
    "    syscall",
    "    ud2",
    // The handlers' sa_restorer.
    ".globl nomu_split_restorer",
    ".type nomu_split_restorer,@function",
    "nomu_split_restorer:",
    "    mov eax, 15", // rt_sigreturn
    "    syscall",
    "    ud2",
    ".globl nomu_split_code_end",
    "nomu_split_code_end:",
    area_mask = const !(AREA_SIZE - 1),
    mbox = const MBOX_OFFSET,
    state = const offset_of!(Mailbox, state),
    signo = const offset_of!(Mailbox, signo),
    info = const offset_of!(Mailbox, info),
    uc = const offset_of!(Mailbox, uc),
    fs = const offset_of!(Mailbox, fs_base),
    gs = const offset_of!(Mailbox, gs_base),
    gs_dirty = const offset_of!(Mailbox, gs_dirty),
    fsgsbase = const offset_of!(Mailbox, fsgsbase),
    nomu_sleeps = const offset_of!(Mailbox, nomu_sleeps),
    child_sleeps = const offset_of!(Mailbox, child_sleeps),
    spin = const offset_of!(Mailbox, spin),
    altstack = const offset_of!(Mailbox, altstack),
    act = const offset_of!(Mailbox, act),
    ign = const offset_of!(Mailbox, ign),
    handled = const offset_of!(Mailbox, handled),
    ignored = const offset_of!(Mailbox, ignored),
    start_mask = const offset_of!(Mailbox, start_mask),
    kick = const CHILD_KICK,
    request = const REQUEST,
    dead = const DEAD,
    run = const RUN,
    futex_wake = const FUTEX_WAKE,
    wait_op = const offset_of!(Mailbox, wait_op),
    dispatch = const offset_of!(Mailbox, dispatch),
    ops = const offset_of!(Mailbox, ops),
    nops = const offset_of!(Mailbox, nops),
    ops_only = const offset_of!(Mailbox, ops_only),
    op_result = const offset_of!(Mailbox, op_result),
    op_size = const OP_WORDS * 8,
    local = const offset_of!(Mailbox, local),
    local_tid = const offset_of!(Mailbox, local_tid),
    local_pid = const offset_of!(Mailbox, local_pid),
    robust_head = const offset_of!(Mailbox, robust_head),
    robust_set = const offset_of!(Mailbox, robust_set),
    sigmask_local = const offset_of!(Mailbox, sigmask_local),
    sigmask = const offset_of!(Mailbox, sigmask),
    sigmask_set = const offset_of!(Mailbox, sigmask_set),
    sigmask_pending = const offset_of!(Mailbox, sigmask_pending),
    blockable = const !crate::kernel::signal::UNBLOCKABLE as i64,
    si_call_addr = const SI_CALL_ADDR,
    si_syscall = const SI_SYSCALL,
    uc_rax = const UC_REGS + offset_of!(GuestRegs, rax),
    uc_rdi = const UC_REGS + offset_of!(GuestRegs, rdi),
    uc_rsi = const UC_REGS + offset_of!(GuestRegs, rsi),
    uc_rdx = const UC_REGS + offset_of!(GuestRegs, rdx),
    uc_r10 = const UC_REGS + offset_of!(GuestRegs, r10),
    uc_rip = const UC_REGS + offset_of!(GuestRegs, rip),
    uc_rsp = const UC_REGS + offset_of!(GuestRegs, rsp),
    uc_rcx = const UC_REGS + offset_of!(GuestRegs, rcx),
    uc_r11 = const UC_REGS + offset_of!(GuestRegs, r11),
    uc_rflags = const UC_REGS + offset_of!(GuestRegs, rflags),
    sites = const offset_of!(Mailbox, sites),
    rewrite_stub = const offset_of!(Mailbox, rewrite_stub),
    not_guest = const offset_of!(Mailbox, not_guest),
    not_guest_count = const NOT_GUEST_RANGES,
    sites_base = const offset_of!(Mailbox, sites_base),
    sites_len = const offset_of!(Mailbox, sites_len),
    page0_return = const super::zpoline::FORKED_SYSCALL_AT + 2,
    stub_frame = const offset_of!(Mailbox, stub_frame),
    stub_xsave = const offset_of!(Mailbox, stub_xsave),
    stub_guest_rsp = const offset_of!(Mailbox, stub_guest_rsp),
    stub_gs = const offset_of!(Mailbox, stub_gs),
    stub_features = const offset_of!(Mailbox, stub_features),
    f_regs = const 8 + UC_REGS,
    f_sigmask = const 8 + offset_of!(Ucontext, sigmask),
    f_fpstate = const 8 + offset_of!(Ucontext, mcontext) + offset_of!(super::host_signals::Sigcontext, fpstate),
    f_info = const 8 + std::mem::size_of::<Ucontext>(),
    r_rax = const offset_of!(GuestRegs, rax),
    r_rbx = const offset_of!(GuestRegs, rbx),
    r_rcx = const offset_of!(GuestRegs, rcx),
    r_rdx = const offset_of!(GuestRegs, rdx),
    r_rsi = const offset_of!(GuestRegs, rsi),
    r_rdi = const offset_of!(GuestRegs, rdi),
    r_rbp = const offset_of!(GuestRegs, rbp),
    r_rsp = const offset_of!(GuestRegs, rsp),
    r_rip = const offset_of!(GuestRegs, rip),
    r_rflags = const offset_of!(GuestRegs, rflags),
    r_r8 = const offset_of!(GuestRegs, r8),
    r_r9 = const offset_of!(GuestRegs, r9),
    r_r10 = const offset_of!(GuestRegs, r10),
    r_r11 = const offset_of!(GuestRegs, r11),
    r_r12 = const offset_of!(GuestRegs, r12),
    r_r13 = const offset_of!(GuestRegs, r13),
    r_r14 = const offset_of!(GuestRegs, r14),
    r_r15 = const offset_of!(GuestRegs, r15),
);

/// A SIGSYS siginfo's si_call_addr and si_syscall.
const SI_CALL_ADDR: usize = 16;
const SI_SYSCALL: usize = 24;
/// The guest registers in the kernel's ucontext.
const UC_REGS: usize = offset_of!(Ucontext, mcontext) + offset_of!(super::host_signals::Sigcontext, regs);

extern "C" {
    static nomu_split_code_start: u8;
    static nomu_split_code_end: u8;
    fn nomu_split_clone(flags: u64, stack: u64, ptid: u64, ctid: u64) -> i64;
    fn nomu_split_handler(signo: i32, info: *mut libc::siginfo_t, uc: *mut libc::c_void);
    fn nomu_split_restorer();
    fn nomu_forked_stub();
}

/// How long the child spins for an answer before it sleeps (TSC cycles,
/// a few microseconds), and how long the nomu thread spins for the next
/// request: a guest that makes syscalls back to back then never sleeps.
const CHILD_SPIN_CYCLES: u64 = 20_000;
const NOMU_SPIN: std::time::Duration = std::time::Duration::from_micros(8);

/// Spinning only pays when the child and its nomu thread each have a CPU
/// of their own; on a shared or busy host the spinner only steals the CPU
/// the other side needs (measured: 3x slower on a loaded 2-vCPU VM). So it
/// is off unless NOMU_SPLIT_SPIN is set (and more than one CPU is usable).
fn may_spin() -> bool {
    static MAY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *MAY.get_or_init(|| {
        std::env::var_os("NOMU_SPLIT_SPIN").is_some() && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1)
    })
}

/// Each nomu host thread's child, for `interrupt` and nomu's exit.
static CHILDREN: Children = Children::new();

/// The forked children's host processes (see [`run_own_process`]), by
/// the nomu thread that runs each.
static FORKED: Children = Children::new();

/// A child process and its block, owned by the nomu thread that made it.
struct Child {
    area: usize,
    tid: i32,
    /// A forked child's ops block (MAP_SHARED; 0 for a CLONE_VM child).
    ops: usize,
    /// A forked child's host process, which its host threads share.
    host: Option<Arc<HostProcess>>,
    /// The memfd of a zygote clone's block and ops block: they are kept
    /// for the next clone once its host process is gone (see
    /// [`SharedBlock::take`]).
    block_fd: Option<std::os::fd::OwnedFd>,
}

/// What the host threads of a forked child's host process (one per guest
/// thread, see [`new_forked_thread`]) share.
struct HostProcess {
    /// Held by a nomu thread while it takes its space's changes to the
    /// memory map and has them made, so that they are made in order; what
    /// they leave the process showing.
    apply: Mutex<Shown>,
    /// Its host threads: with more than one, a change is made before the
    /// thread that asked for it goes on, and the pages it unmapped are
    /// freed only then (another thread may be running guest code).
    threads: AtomicUsize,
    /// The nomu thread that made its first host thread: the parent of all
    /// of them (the others are made with CLONE_PARENT).
    maker: i32,
}

thread_local! {
    /// This host thread's child, kept between the guest threads it runs.
    /// Dropped (killed and reaped) when the host thread exits.
    static CHILD: RefCell<Option<Child>> = const { RefCell::new(None) };
}

fn futex(word: &AtomicU32, op: i32, val: u32) -> i64 {
    // SAFETY: a futex call on a live atomic word, with no timeout and no
    // second word.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), op, val, 0usize, 0usize, 0u32) }
}

impl Child {
    /// Maps a block, starts the child in it and waits until it is parked.
    fn spawn() -> Result<Child, String> {
        Child::spawn_kind(false, None)
    }

    /// The table of such children.
    fn table(&self) -> &'static Children {
        if self.ops != 0 {
            &FORKED
        } else {
            &CHILDREN
        }
    }

    /// `forked`: a host process of its own (clone without CLONE_VM), its
    /// block and ops block shared memory, watched for its own death
    /// (`on_lost` then ends its guest); else a CLONE_VM child.
    fn spawn_kind(forked: bool, on_lost: Option<Arc<dyn Fn() + Send + Sync>>) -> Result<Child, String> {
        let sharing = if forked { libc::MAP_SHARED } else { libc::MAP_PRIVATE };
        let area = kstack::map_aligned_guarded(AREA_SIZE, sharing)?;
        let ops = if forked {
            match map_shared(OPS_SIZE) {
                Ok(o) => o,
                Err(e) => {
                    unmap_area(area);
                    return Err(e);
                }
            }
        } else {
            0
        };
        let mb = write_mailbox(area, ops, forked, None);
        // A forked child shares nomu's descriptor table (it maps the memfd
        // by number, and holds no second reference to any file: a pipe's
        // reader still sees its end) but not its memory.
        let vm = if forked { 0 } else { libc::CLONE_VM };
        let flags = (vm | libc::CLONE_FS | libc::CLONE_FILES | libc::CLONE_CHILD_CLEARTID) as u64;
        // SAFETY: the child starts on its own stack in our block and runs
        // only the asm above, which never returns into Rust code; the tid
        // word it clears on exit is the mailbox's state, which lives as long
        // as the block (unmapped only after the child is reaped).
        //
        // The child starts with every signal blocked: until its start code
        // has its own handlers, a signal (a kick sent as soon as it is in
        // the table) would find nomu's dispositions, and SIGUSR2's default
        // kills it. A forked child's death is not seen through its tid
        // word (the host clears it only for a memory map still in use), so
        // such a death would leave its nomu thread waiting for good.
        let creator_mask = crate::host::sys::block_mask(!0);
        let tid = unsafe { nomu_split_clone(flags, (area + MBOX_OFFSET) as u64, 0, mb as u64) };
        crate::host::sys::swap_sigmask(creator_mask);
        if tid < 0 {
            unmap_area(area);
            unmap_shared(ops, OPS_SIZE);
            return Err(format!("clone: {}", crate::abi::errno::Errno(-tid as i32)));
        }
        let host = forked.then(|| {
            Arc::new(HostProcess {
                apply: Mutex::new(Shown::default()),
                threads: AtomicUsize::new(1),
                maker: crate::host::sys::gettid(),
            })
        });
        let child = Child { area, tid: tid as i32, ops, host, block_fd: None };
        child.table().register(child.tid);
        if forked {
            watch(child.tid, &child.mailbox().state, on_lost);
        }
        if !child.wait_request() {
            return Err("the child died while starting".into());
        }
        Ok(child)
    }

    fn mailbox(&self) -> &Mailbox {
        // SAFETY: the mailbox was written by `spawn` and lives as long as
        // the block, which lives as long as self.
        unsafe { &*((self.area + MBOX_OFFSET) as *const Mailbox) }
    }

    /// Waits until the child hands over a trap (true) or dies (false).
    fn wait_request(&self) -> bool {
        let mb = self.mailbox();
        let state = &mb.state;
        if may_spin() {
            let deadline = std::time::Instant::now() + NOMU_SPIN;
            while state.load(Ordering::Acquire) == RUN && std::time::Instant::now() < deadline {
                for _ in 0..64 {
                    std::hint::spin_loop();
                }
            }
        }
        loop {
            // The flag first, then state (swap is a full barrier): either
            // the child sees the flag and wakes us, or we see its request.
            mb.nomu_sleeps.swap(1, Ordering::SeqCst);
            match state.load(Ordering::SeqCst) {
                REQUEST => break,
                DEAD => break,
                // Shared (not private): the host's wake-up when the child
                // dies, for its CLONE_CHILD_CLEARTID word, is shared.
                _ => futex(state, FUTEX_WAIT, RUN),
            };
        }
        mb.nomu_sleeps.store(0, Ordering::Relaxed);
        state.load(Ordering::Acquire) == REQUEST
    }

    /// Has the parked child make its queued host syscalls now and park
    /// again in the same trap; false if it died.
    fn run_ops(&self) -> bool {
        self.mailbox().ops_only.store(1, Ordering::Relaxed);
        self.release();
        self.wait_request()
    }

    /// Lets the parked child run with its (edited) ucontext.
    fn release(&self) {
        let mb = self.mailbox();
        // As in wait_request: state first, then the child's flag. A child
        // found dead meanwhile stays DEAD.
        if mb.state.compare_exchange(REQUEST, RUN, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            return;
        }
        if mb.child_sleeps.load(Ordering::SeqCst) != 0 {
            let private = if self.ops != 0 { 0 } else { FUTEX_PRIVATE };
            futex(&mb.state, FUTEX_WAKE | private, 1);
        }
    }

    /// The parked child's saved context.
    ///
    /// # Safety
    /// Only while the child is parked (state REQUEST), and no other
    /// reference to the context is alive.
    #[allow(clippy::mut_from_ref)]
    unsafe fn ucontext(&self) -> &mut Ucontext {
        // SAFETY: the caller guarantees the child waits in its handler, so
        // the ucontext the host built on its signal stack stays put and
        // nobody else touches it.
        unsafe { &mut *(self.mailbox().uc.load(Ordering::Relaxed) as *mut Ucontext) }
    }

    /// Sets up the parked child to start a guest thread at `start`.
    /// Lets the child answer gettid and getpid with `ids` (tid, pid), and
    /// set_robust_list, itself; None stops it. True if it does.
    fn answer_locally(&self, ids: Option<(u32, u32)>) -> bool {
        let mb = self.mailbox();
        let Some((tid, pid)) = ids else {
            mb.local.store(0, Ordering::Relaxed);
            return false;
        };
        mb.local_tid.store(tid as u64, Ordering::Relaxed);
        mb.local_pid.store(pid as u64, Ordering::Relaxed);
        mb.robust_set.store(0, Ordering::Relaxed);
        mb.local.store(1, Ordering::Relaxed);
        true
    }

    /// Lets the parked child answer rt_sigprocmask too, with the guest's
    /// `(mask, pending signals)`; None stops it.
    fn keep_sigmask_locally(&self, sigmask: Option<(u64, u64)>) {
        let mb = self.mailbox();
        let Some((mask, pending)) = sigmask else {
            mb.sigmask_local.store(0, Ordering::Relaxed);
            return;
        };
        mb.sigmask.store(mask, Ordering::Relaxed);
        mb.sigmask_pending.store(pending, Ordering::Relaxed);
        mb.sigmask_set.store(0, Ordering::Relaxed);
        mb.sigmask_local.store(1, Ordering::Relaxed);
    }

    /// Gives the stub's frame the xsave layout the host's own signal
    /// frames state (size and components, in their software-reserved
    /// bytes), from the frame the child is parked in when the host made
    /// it: rt_sigreturn restores only the legacy area of an image that
    /// claims more than the host allows the process (dynamic components:
    /// AMX's tile data, whose room CPUID counts).
    fn adopt_host_xstate_format(&self) {
        use crate::abi::xsave::{FP_XSTATE_MAGIC1, FP_XSTATE_MAGIC2, HEADER, SW_RESERVED};
        let mb = self.mailbox();
        let (frame, image) = (mb.stub_frame as usize, mb.stub_xsave as usize);
        let uc = mb.uc.load(Ordering::Relaxed) as usize;
        if frame == 0 || uc == frame + 8 {
            return;
        }
        // SAFETY: the child is parked in its handler on a frame the host
        // made; nothing else reads or writes it meanwhile.
        let Some(host) = xstate_of(unsafe { (*(uc as *const Ucontext)).mcontext.fpstate }) else { return };
        let word = |at: usize| u32::from_le_bytes(host[at..at + 4].try_into().expect("4 bytes"));
        let size = word(SW_RESERVED + 16) as usize; // xstate_size
        let top = self.area + MBOX_OFFSET - START_STACK;
        if word(SW_RESERVED) != FP_XSTATE_MAGIC1 || size < HEADER + 64 || image + size + 4 > top {
            return;
        }
        let features = u64::from_le_bytes(host[SW_RESERVED + 8..SW_RESERVED + 16].try_into().expect("8 bytes"));
        // SAFETY: the stub's image lies in the child's block, [image,
        // top), which only the parked child's stub uses.
        unsafe {
            std::ptr::copy_nonoverlapping(
                host[SW_RESERVED..HEADER].as_ptr(),
                (image + SW_RESERVED) as *mut u8,
                HEADER - SW_RESERVED,
            );
            ((image + size) as *mut u32).write_unaligned(FP_XSTATE_MAGIC2);
        }
        mb.stub_features.store(features, Ordering::Relaxed);
    }

    fn load(&self, start: &StartState) {
        self.adopt_host_xstate_format();
        // SAFETY: the child is parked; the reference ends with this call.
        let uc = unsafe { self.ucontext() };
        uc.mcontext.regs = GuestRegs { rflags: start.regs.rflags | RFLAGS_IF, ..start.regs };
        // Its creator's extended state over the one the host saved when
        // the child parked; none: sigreturn gives the initial FPU state.
        match (&start.xstate, xstate_of(uc.mcontext.fpstate)) {
            (Some(from), Some(into)) => super::copy_guest_xstate(into, from),
            _ => uc.mcontext.fpstate = 0,
        }
        uc.sigmask = GUEST_HOST_MASK.load(Ordering::Relaxed);
        let mb = self.mailbox();
        mb.fs_base.store(start.fs_base, Ordering::Relaxed);
        mb.gs_base.store(start.gs_base, Ordering::Relaxed);
        mb.gs_dirty.store(1, Ordering::Relaxed);
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // Killed and reaped (unless nomu's exit did that already) before its
        // block goes; no longer watched before it is killed.
        if self.ops != 0 {
            unwatch(self.tid);
        }
        self.table().kill_and_reap(self.tid);
        let last = self.host.as_ref().is_some_and(|host| host.threads.fetch_sub(1, Ordering::SeqCst) == 1);
        // The last host thread of its process is gone: only nomu (and the
        // zygote, until its next batch) maps the block now.
        if let Some(fd) = self.block_fd.take().filter(|_| last) {
            let block = SharedBlock { fd, area: self.area, ops: self.ops, mailbox: self.area + MBOX_OFFSET };
            if let Err(block) = SharedBlock::keep(block) {
                block.unmap();
            }
            return;
        }
        unmap_area(self.area);
        unmap_shared(self.ops, OPS_SIZE);
    }
}

/// Writes a fresh mailbox at the top of block `area` (`ops`: a forked
/// child's ops block, else 0).
fn write_mailbox(area: usize, ops: usize, forked: bool, creator: Option<&Mailbox>) -> *mut Mailbox {
    let mb = (area + MBOX_OFFSET) as *mut Mailbox;
    let mut handled = [0u8; 16];
    for (slot, sig) in handled.iter_mut().zip(FAULT_SIGNALS.iter().copied().chain([libc::SIGSYS, CHILD_KICK])) {
        *slot = sig as u8;
    }
    // The signals nomu keeps blocked in guest code are the ones it
    // forwards to guests: the child ignores them.
    let guest_mask = GUEST_HOST_MASK.load(Ordering::Relaxed);
    let mut ignored = [0u8; 64];
    for (slot, sig) in ignored.iter_mut().zip((1..64).filter(|s| guest_mask & (1 << (s - 1)) != 0)) {
        *slot = sig as u8;
    }
    // Inherited as they are: nothing to install.
    if creator.is_some_and(|c| c.handled == handled && c.ignored == ignored) {
        handled[0] = 0;
        ignored[0] = 0;
    }
    let restorer = nomu_split_restorer as *const () as u64;
    let alt_lo = area + PAGE_SIZE;
    let alt_size = MBOX_OFFSET - START_STACK - STUB_FRAME_SPACE - PAGE_SIZE;
    let rewrite_stub =
        if forked { super::rewrite::forked_stub_page().map_or(0, |_| super::rewrite::stub() + 1) } else { 0 };
    let stub = if rewrite_stub != 0 { stub_frame(area, alt_lo as u64, alt_size as u64) } else { None };
    let site_marks = if forked { super::zpoline::forked_site_marks() } else { None }.unwrap_or_default();
    let mailbox = Mailbox {
        state: AtomicU32::new(RUN),
        signo: AtomicI32::new(0),
        info: AtomicU64::new(0),
        uc: AtomicU64::new(0),
        fs_base: AtomicU64::new(0),
        gs_base: AtomicU64::new(0),
        gs_dirty: AtomicU64::new(0),
        fsgsbase: AtomicU64::new(crate::host::cpu::has_fsgsbase() as u64),
        nomu_sleeps: AtomicU32::new(0),
        child_sleeps: AtomicU32::new(0),
        spin: AtomicU64::new(if may_spin() { CHILD_SPIN_CYCLES } else { 0 }),
        altstack: [alt_lo as u64, 0, alt_size as u64],
        act: [
            nomu_split_handler as *const () as u64,
            (libc::SA_SIGINFO | libc::SA_ONSTACK) as u64 | crate::abi::SA_RESTORER,
            restorer,
            // Every signal blocked in the handler but the faults, which
            // it catches in its own local answers (see the handler).
            !(crate::kernel::signal::bit(libc::SIGSEGV) | crate::kernel::signal::bit(libc::SIGBUS)),
        ],
        ign: [libc::SIG_IGN as u64, crate::abi::SA_RESTORER, restorer, 0],
        handled,
        ignored,
        start_mask: !(1u64 << (CHILD_KICK - 1)),
        dispatch: if forked {
            let (start, end) = (&raw const nomu_split_code_start as u64, &raw const nomu_split_code_end as u64);
            super::dispatch::forked_child_args(start, end)
        } else {
            super::dispatch::child_args()
        },
        wait_op: AtomicU64::new(if forked { FUTEX_WAIT } else { FUTEX_WAIT | FUTEX_PRIVATE } as u64),
        ops: AtomicU64::new(ops as u64),
        nops: AtomicU64::new(0),
        ops_only: AtomicU64::new(0),
        op_result: AtomicU64::new(0),
        name: *b"nomu-forked\0\0\0\0\0",
        local: AtomicU64::new(0),
        local_tid: AtomicU64::new(0),
        local_pid: AtomicU64::new(0),
        robust_head: AtomicU64::new(0),
        robust_set: AtomicU64::new(0),
        sigmask_local: AtomicU64::new(0),
        sigmask: AtomicU64::new(0),
        sigmask_set: AtomicU64::new(0),
        sigmask_pending: AtomicU64::new(0),
        sites: site_marks.0,
        sites_base: site_marks.1,
        sites_len: site_marks.2,
        rewrite_stub,
        stub_frame: stub.map_or(0, |(frame, _)| frame),
        stub_xsave: stub.map_or(0, |(_, xsave)| xsave),
        stub_guest_rsp: 0,
        stub_gs: stub.is_some() as u64,
        stub_features: AtomicU64::new(crate::host::cpu::xcr0()),
        not_guest: {
            let mut r = [[0u64; 2]; NOT_GUEST_RANGES];
            let kept = zygote::kept_ranges(area, ops);
            let stub = super::rewrite::forked_stub_page().map_or((0, 0), |(at, _)| (at, at + PAGE_SIZE));
            for (slot, (s, e)) in r.iter_mut().zip([(0, PAGE_SIZE), stub].into_iter().chain(kept)) {
                *slot = [s as u64, e as u64];
            }
            r
        },
    };
    // SAFETY: the mailbox slot lies at the top of our fresh mapping,
    // suitably aligned, and nobody else uses it yet.
    unsafe { mb.write(mailbox) };
    mb
}

/// The entry of a forked child's stub, if forked children take it (see
/// "The stub"): it needs rdgsbase, and room for the host's xsave image.
/// NOMU_FORKED_TRAP=1 keeps the stub page all int3 instead (every syscall
/// a host signal, as before), for comparison.
pub fn forked_stub() -> Option<u64> {
    static ON: OnceLock<bool> = OnceLock::new();
    let on = *ON.get_or_init(|| {
        crate::host::cpu::has_fsgsbase()
            && crate::host::cpu::has_xsave()
            && crate::host::cpu::xsave_size() + 4 + 64 + STUB_FRAME_LEN + STUB_HANDLER_STACK <= STUB_FRAME_SPACE
            && std::env::var_os("NOMU_FORKED_TRAP").is_none()
    });
    on.then_some(nomu_forked_stub as *const () as u64)
}

/// Lays out the stub's frame in block `area`, between the signal stack
/// (at `alt_sp`, `alt_size` bytes) and the start stack, with what stays
/// the same from one syscall to the next (what an int3's frame holds
/// besides the registers, the mask and the xsave image). Returns the
/// frame's and its xsave image's addresses.
fn stub_frame(area: usize, alt_sp: u64, alt_size: u64) -> Option<(u64, u64)> {
    forked_stub()?;
    let top = area + MBOX_OFFSET - START_STACK;
    let size = crate::host::cpu::xsave_size() + 4;
    let xsave = (top - size) & !63;
    let frame = (xsave - STUB_FRAME_LEN) & !63;
    debug_assert!(frame - STUB_HANDLER_STACK >= (alt_sp + alt_size) as usize);
    const UC_FP_XSTATE: u64 = 1;
    const UC_SIGCONTEXT_SS: u64 = 2;
    const UC_STRICT_RESTORE_SS: u64 = 4;
    // SAFETY: [frame, top) lies in the block's fresh mapping, outside the
    // signal stack and the start stack; nothing else uses it yet.
    unsafe {
        let image = std::slice::from_raw_parts_mut(xsave as *mut u8, size);
        image.fill(0);
        super::write_frame_sw_bytes(image, crate::host::cpu::xcr0());
        std::ptr::write_bytes(frame as *mut u8, 0, STUB_FRAME_LEN);
        let uc = &mut *((frame + 8) as *mut Ucontext);
        uc.flags = UC_FP_XSTATE | UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS;
        uc.ss_sp = alt_sp;
        uc.ss_size = alt_size;
        uc.mcontext.cs_gs_fs_ss = super::USER_CS as u64 | (super::USER_DS as u64) << 48;
        uc.mcontext.trapno = 3; // #BP
        let info = (frame + 8 + std::mem::size_of::<Ucontext>()) as *mut i32;
        info.write(libc::SIGTRAP); // si_signo
        info.add(2).write(crate::abi::SI_KERNEL); // si_code
    }
    Some((frame as u64, xsave as u64))
}

fn map_shared(len: usize) -> Result<usize, String> {
    // SAFETY: a fresh shared anonymous mapping at an address of the host's choice.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(format!("mmap: {}", crate::host::last_errno()));
    }
    Ok(p as usize)
}

fn unmap_shared(at: usize, len: usize) {
    if at != 0 {
        // SAFETY: our own ops block, whose child is gone.
        unsafe { libc::munmap(at as *mut libc::c_void, len) };
    }
}

/// At nomu's exit, kills and reaps every child, so none is left behind as
/// a zombie (children do not signal their death, so a reaper that waits
/// only for SIGCHLD children could not reap them). PR_SET_PDEATHSIG covers
/// the deaths that skip atexit.
extern "C" fn reap_children_at_exit() {
    CHILDREN.reap_all();
}

fn unmap_area(area: usize) {
    // SAFETY: the block is ours and its child (if any) is gone.
    unsafe { libc::munmap(area as *mut libc::c_void, AREA_SIZE) };
}

pub struct SplitEntry;

/// Whether this host can run the split path: it needs the seccomp filter
/// (inherited by each child) and processes that share nomu's memory.
pub fn available() -> Result<(), String> {
    super::seccomp::available().map_err(|why| format!("needs seccomp's trap filter: {why}"))?;
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into our struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut lim) } == 0 && lim.rlim_cur < 2 {
        return Err("RLIMIT_NPROC forbids one more host process per guest thread".into());
    }
    Ok(())
}

impl SplitEntry {
    /// The host signal handlers and the seccomp filter must be installed already.
    pub fn install() -> Result<SplitEntry, String> {
        available()?;
        // SAFETY: registering a plain extern "C" function.
        if unsafe { libc::atexit(reap_children_at_exit) } != 0 {
            return Err("atexit failed".into());
        }
        Ok(SplitEntry)
    }
}

/// The trap the parked child hands over.
fn trap_of(mb: &Mailbox, uc: &mut Ucontext) -> Trap {
    let signo = mb.signo.load(Ordering::Relaxed);
    let info = mb.info.load(Ordering::Relaxed) as *const libc::siginfo_t;
    if signo == libc::SIGSYS {
        // SAFETY: the host wrote this SIGSYS's siginfo on the parked
        // child's signal stack.
        if !unsafe { super::sigsys_is_64bit(info) } {
            let cs = uc.mcontext.cs();
            // The child resumes from this context with rt_sigreturn.
            uc.mcontext.set_64bit_segments();
            return super::i386_syscall_fault(&mut uc.mcontext.regs, cs);
        }
        return Trap::Syscall;
    }
    if signo == CHILD_KICK {
        return Trap::Interrupt;
    }
    // SAFETY: the host wrote the siginfo of this fault signal on the parked
    // child's signal stack; si_addr is valid for fault signals.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as u64) };
    Trap::Fault(Fault { signo, code, addr, trapno: uc.mcontext.trapno, err: uc.mcontext.err })
}

/// A guest thread whose child is gone dies as if by SIGKILL. Returns the
/// state to restart from if the kernel (against expectation) resumes it.
fn child_lost(kernel: &mut dyn GuestKernel, why: &str) -> Option<StartState> {
    if !CHILDREN.exiting() {
        crate::host::sys::write_all(2, format!("nomu: split entry: {why}\n").as_bytes());
    }
    let mut regs = GuestRegs::default();
    let mut xstate: Option<&mut [u8]> = None;
    let mut frame =
        TrapFrame { regs: &mut regs, fs_base: 0, gs_base: 0, reset_xstate: true, xstate: &mut xstate, new_site: None };
    let kill = Fault { signo: libc::SIGKILL, code: crate::abi::SI_KERNEL, addr: 0, trapno: 0, err: 0 };
    match kernel.on_trap(Trap::Fault(kill), &mut frame) {
        Resume::Exit => None,
        Resume::Guest => Some(StartState {
            regs: *frame.regs,
            fs_base: frame.fs_base,
            gs_base: frame.gs_base,
            xstate: None,
            host_thread: None,
        }),
    }
}

impl EntryPath for SplitEntry {
    fn name(&self) -> &'static str {
        "split"
    }

    fn interrupt_kernel_side(&self, host_tid: i32) {
        super::host_signals::kick(host_tid);
    }

    fn interrupt(&self, host_tid: i32) {
        CHILDREN.signal(host_tid, CHILD_KICK);
    }

    fn run(&self, start: StartState, kernel: &mut dyn GuestKernel) {
        let _kstack = ThreadKernelStack::enter();
        // Kicks end host calls the kernel waits in for this guest thread.
        let _kicks = super::host_signals::KicksLetThrough::new();
        let mut child = CHILD.with(|c| c.borrow_mut().take());
        let mut next = Some(start);
        let mut failures = 0;
        let mut affinity = Affinity::new();
        loop {
            if child.as_ref().is_some_and(|c| c.mailbox().state.load(Ordering::Acquire) == DEAD) {
                child = None;
            }
            let c = match child {
                Some(ref c) => c,
                None => match Child::spawn() {
                    Ok(c) => {
                        // Its CPU time is the guest's (getrusage, times, wait4).
                        crate::host::sys::set_guest_process(c.tid);
                        &*child.insert(c)
                    }
                    Err(e) => {
                        failures += 1;
                        match child_lost(kernel, &format!("cannot start a guest process: {e}")) {
                            Some(s) if failures < 3 => {
                                next = Some(s);
                                continue;
                            }
                            _ => break,
                        }
                    }
                },
            };
            if let Some(s) = next.take() {
                c.load(&s);
            }
            affinity.before_release(c.tid);
            c.release();
            if !c.wait_request() {
                child = None;
                match child_lost(kernel, "a guest process died") {
                    Some(s) => {
                        next = Some(s);
                        continue;
                    }
                    None => break,
                }
            }
            let mb = c.mailbox();
            // SAFETY: the child is parked until we release it; this is the
            // only reference to its context.
            let uc = unsafe { c.ucontext() };
            let trap = trap_of(mb, uc);
            let mut xstate = xstate_of(uc.mcontext.fpstate);
            let gs = mb.gs_base.load(Ordering::Relaxed);
            let mut frame = TrapFrame {
                regs: &mut uc.mcontext.regs,
                fs_base: mb.fs_base.load(Ordering::Relaxed),
                gs_base: gs,
                reset_xstate: false,
                xstate: &mut xstate,
                new_site: None,
            };
            let resume = kernel.on_trap(trap, &mut frame);
            let (fs_base, gs_base, reset) = (frame.fs_base, frame.gs_base, frame.reset_xstate);
            if resume == Resume::Exit {
                // The child stays parked for the next guest thread.
                break;
            }
            mb.fs_base.store(fs_base, Ordering::Relaxed);
            if gs_base != gs {
                mb.gs_base.store(gs_base, Ordering::Relaxed);
                mb.gs_dirty.store(1, Ordering::Relaxed);
            }
            if reset {
                uc.mcontext.fpstate = 0;
            }
        }
        affinity.unpin();
        CHILD.with(|c| *c.borrow_mut() = child);
    }
}

/// Keeps a child and its nomu thread on one CPU.
///
/// Each handoff wakes the other side; left alone, the host scheduler puts
/// the woken side on an idle CPU (the waker still runs), so every trap
/// costs two cross-CPU wake-ups, which on a VM means waking a halted vCPU:
/// measured on the 2-vCPU test VM, a shell loop ran 6x slower than with
/// both pinned to one CPU. So while it runs a guest thread, the nomu thread
/// and its child share one CPU, as the guest thread and kernel share one
/// on the in-process paths. To keep balancing load, every
/// [`REBALANCE`] the nomu thread is let loose for one wake-up and the pair
/// is then pinned to whatever CPU the scheduler chose for it.
struct Affinity {
    /// Whether pinning pays (not when the two sides spin on two CPUs).
    may_pin: bool,
    pinned_to: Option<usize>,
    since: std::time::Instant,
}

const REBALANCE: std::time::Duration = std::time::Duration::from_millis(50);

impl Affinity {
    fn new() -> Affinity {
        Affinity { may_pin: !may_spin(), pinned_to: None, since: std::time::Instant::now() }
    }

    fn before_release(&mut self, child: i32) {
        if !self.may_pin || (self.pinned_to.is_some() && self.since.elapsed() < REBALANCE) {
            return;
        }
        self.since = std::time::Instant::now();
        // The CPUs the guest thread may use (nomu's, or the mask it set):
        // asked each time, since the guest may set one while pinned, and
        // a rebalance must never widen it (getcpu stays inside it).
        let allowed = crate::host::sys::guest_affinity();
        if self.pinned_to.take().is_some() {
            // Loose for the next wake-up.
            set_affinity_mask(0, &allowed);
            return;
        }
        // SAFETY: sched_getcpu only reads.
        let Ok(cpu) = usize::try_from(unsafe { libc::sched_getcpu() }) else { return };
        let cpus: u32 = allowed.iter().map(|b| b.count_ones()).sum();
        if cpus < 2 || allowed.get(cpu / 8).is_none_or(|b| b & (1 << (cpu % 8)) == 0) {
            return; // one CPU (already the thread's), or not ours to pick
        }
        // SAFETY: an all-zero cpu_set_t is empty; we add one CPU we may use.
        let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: cpu < CPU_SETSIZE (the host just ran us on it).
        unsafe { libc::CPU_SET(cpu, &mut one) };
        set_affinity(0, &one);
        set_affinity(child, &one);
        self.pinned_to = Some(cpu);
    }

    /// Gives the nomu thread all its CPUs back.
    fn unpin(&mut self) {
        if self.pinned_to.take().is_some() {
            set_affinity_mask(0, &crate::host::sys::guest_affinity());
        }
    }
}

fn set_affinity_mask(tid: i32, mask: &[u8]) {
    // SAFETY: the host reads mask.len() bytes of `mask`, for this thread
    // (0) or our own child.
    unsafe { libc::sched_setaffinity(tid, mask.len(), mask.as_ptr().cast()) };
}

fn set_affinity(tid: i32, set: &libc::cpu_set_t) {
    // SAFETY: a valid CPU set for this thread (0) or our own child.
    unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), set) };
}

/// What a forked child's host process does with a change to its memory map.
fn op_words(op: &HostOp, pm: &PhysMem) -> [u64; OP_WORDS] {
    let shared_fixed = (libc::MAP_SHARED | libc::MAP_FIXED) as u64;
    match *op {
        HostOp::Map { addr, len, prot, frame } => [
            libc::SYS_mmap as u64,
            addr as u64,
            len as u64,
            prot as u64,
            shared_fixed,
            pm.memfd_raw() as u64,
            (frame - pm.base()) as u64,
        ],
        HostOp::Unmap { addr, len } => [libc::SYS_munmap as u64, addr as u64, len as u64, 0, 0, 0, 0],
        HostOp::Protect { addr, len, prot } => {
            [libc::SYS_mprotect as u64, addr as u64, len as u64, prot as u64, 0, 0, 0]
        }
    }
}

impl Child {
    /// Queues host syscalls for the parked child to make before it
    /// resumes guest code; false when they do not fit.
    fn queue(&self, ops: &[[u64; OP_WORDS]]) -> bool {
        let mb = self.mailbox();
        let n = mb.nops.load(Ordering::Relaxed) as usize;
        if n + ops.len() > MAX_OPS {
            return false;
        }
        for (i, words) in ops.iter().enumerate() {
            let at = self.ops + (n + i) * OP_WORDS * 8;
            // SAFETY: inside our ops block (checked against MAX_OPS); the
            // child is parked and reads it only after `release`.
            unsafe { std::ptr::copy_nonoverlapping(words.as_ptr(), at as *mut u64, OP_WORDS) };
        }
        mb.nops.store((n + ops.len()) as u64, Ordering::Relaxed);
        true
    }
}

/// Runs a guest thread of a process whose memory is its own (a forked
/// child: see src/mm/space/forked.rs) in a host process of its own,
/// whatever entry path the other guests use: a clone of nomu without
/// CLONE_VM running the same child code as this path's (its block and
/// ops block shared memory, its futex waits shared), which first drops
/// nomu's direct map and writable alias of physical memory and maps its
/// own frames at its addresses, and then hands every syscall and fault
/// over as a split child does. Changes to its memory map are queued by its
/// address space ([`GuestKernel::take_host_ops`]) and made by the child
/// before it resumes. Returns when the kernel answers Exit (exit, or
/// execve, which brings the thread back to the normal entry path); the
/// host process is then killed and reaped.
pub fn run_own_process(start: StartState, kernel: &mut dyn GuestKernel) {
    static AT_EXIT: std::sync::Once = std::sync::Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: registering a plain extern "C" function.
        unsafe { libc::atexit(reap_forked_at_exit) };
    });
    let _kstack = ThreadKernelStack::enter();
    let _kicks = super::host_signals::KicksLetThrough::new();
    let before = crate::host::sys::guest_process();
    let pm = PhysMem::get();
    let prepared = start.host_thread.as_ref().and_then(|t| t.0.lock().unwrap_or_else(|e| e.into_inner()).take());
    let (child, mut pending) = match prepared {
        // A new thread's host thread, made in its process's host process:
        // the map is that process's already. Its first trap comes at once
        // (a kick to itself), so that a signal or an exit_group sent
        // before this nomu thread took it over is seen.
        Some(c) => {
            FORKED.reassign(c.tid);
            FORKED.signal(crate::host::sys::gettid(), CHILD_KICK);
            (c, Vec::new())
        }
        None => match zygote::spawn(kernel.on_host_process_lost()) {
            Ok(started) => started,
            Err(e) => {
                child_lost(kernel, &format!("cannot start a forked guest's process: {e}"));
                return;
            }
        },
    };
    crate::host::sys::set_guest_process(child.tid);
    child.load(&start);
    drop(start);
    let local = child.answer_locally(kernel.local_answers());
    let host = child.host.clone().expect("a forked child's host process");
    let previous = OWN_CHILD.with(|c| c.replace(&child as *const Child));
    let mut affinity = Affinity::new();
    let mut exited = false;
    loop {
        let mut order = host.apply.lock().unwrap_or_else(|e| e.into_inner());
        let (mut ops, frees) = kernel.take_host_ops();
        // A kept host process's first changes for this guest: what the
        // last one showed goes but what this one maps alike (shown.rs).
        if let Some(alike) = order.take_over(&mut ops) {
            pending.extend(zygote::unmap_all_but_guest(child.area, child.ops, &alike));
        }
        for op in &ops {
            order.record(op);
        }
        pending.extend(ops.iter().map(|op| op_words(op, pm)));
        if !child.queue(&pending) {
            drop(order);
            child_lost(kernel, "too many memory map changes at once");
            break;
        }
        pending.clear();
        // With other host threads running guest code on this map, the
        // changes are made before this one goes on, and only then are the
        // pages they unmapped freed (to another process, maybe). Alone, it
        // makes them before it resumes: nothing runs on the map meanwhile.
        let others = host.threads.load(Ordering::SeqCst) > 1;
        if others && child.mailbox().nops.load(Ordering::Relaxed) > 0 && !child.run_ops() {
            drop(order);
            // Whether the map still shows them is not known: the pages leak.
            std::mem::forget(frees);
            child_lost(kernel, "a forked guest's process died");
            break;
        }
        kernel.free_after_host_ops(frees);
        drop(order);
        if local {
            child.keep_sigmask_locally(kernel.local_sigmask());
        }
        affinity.before_release(child.tid);
        child.release();
        if !child.wait_request() {
            // Its memory is in physical memory, but its registers are gone.
            child_lost(kernel, "a forked guest's process died");
            break;
        }
        if local {
            kernel.take_local_answers();
        }
        let mb = child.mailbox();
        // SAFETY: the child is parked until we release it; this is the
        // only reference to its context.
        let uc = unsafe { child.ucontext() };
        let mut trap = trap_of(mb, uc);
        // Where a trampoline's syscall goes on if the kernel leaves rip
        // after the site (the rewrite path's stub page), and that rip.
        let mut go_on = None;
        match trap {
            // A rewritten site's call through the child's page 0 (zpoline).
            Trap::Syscall => {
                if let Some(t) = super::zpoline::forked_trampoline_trap(&mut uc.mcontext.regs, kernel) {
                    trap = t;
                }
            }
            // A trampoline's syscall, or a patch's int3 (the rewrite path).
            Trap::Fault(f) if f.signo == libc::SIGTRAP && f.trapno == 3 => {
                let regs = &mut uc.mcontext.regs;
                if let Some(at) = super::rewrite::forked_stub_trap(regs, f.signo, f.trapno) {
                    go_on = Some((regs.rip, at));
                    trap = Trap::Syscall;
                } else {
                    match super::rewrite::forked_int3(regs, kernel) {
                        Some(super::rewrite::Int3::Syscall) => trap = Trap::Syscall,
                        Some(super::rewrite::Int3::Resume) => trap = Trap::Interrupt,
                        None => super::rewrite::forked_map_back(regs, kernel),
                    }
                }
            }
            // A syscall site nomu's process is rewriting in two steps.
            Trap::Fault(f)
                if super::zpoline::forked_half_rewritten_trap(&mut uc.mcontext.regs, f.signo, f.trapno, kernel) =>
            {
                trap = Trap::Syscall;
            }
            // Stopped inside a trampoline (a fault of a displaced
            // instruction, a kick): seen at the original instruction.
            Trap::Fault(_) | Trap::Interrupt => super::rewrite::forked_map_back(&mut uc.mcontext.regs, kernel),
        }
        // A syscall instruction's own SIGSYS: if it is in the child's own
        // copy of code, or in code the page cache shares with an area of
        // trampolines, it is patched after the call, as its first trap in
        // nomu's process would have it, and the next call takes the stub.
        let sigsys_site = (matches!(trap, Trap::Syscall)
            && go_on.is_none()
            && mb.signo.load(Ordering::Relaxed) == libc::SIGSYS
            && mb.stub_frame != 0)
            .then(|| uc.mcontext.regs.rip.wrapping_sub(2));
        let mut xstate = xstate_of(uc.mcontext.fpstate);
        let gs = mb.gs_base.load(Ordering::Relaxed);
        let mut frame = TrapFrame {
            regs: &mut uc.mcontext.regs,
            fs_base: mb.fs_base.load(Ordering::Relaxed),
            gs_base: gs,
            reset_xstate: false,
            xstate: &mut xstate,
            new_site: None,
        };
        let resume = kernel.on_trap(trap, &mut frame);
        if let Some((_, at)) = go_on.filter(|&(after_site, _)| frame.regs.rip == after_site) {
            frame.regs.rip = at;
        }
        if let Some(site) = sigsys_site {
            if let Some(phys) = kernel.own_code_copy(site) {
                super::rewrite::patch_own_copy(site, phys);
            } else if let Some(phys) = kernel.guest_physical(site) {
                super::rewrite::patch_shared(phys);
            }
        }
        let (fs_base, gs_base, reset) = (frame.fs_base, frame.gs_base, frame.reset_xstate);
        if resume == Resume::Exit {
            exited = true;
            break;
        }
        mb.fs_base.store(fs_base, Ordering::Relaxed);
        if gs_base != gs {
            mb.gs_base.store(gs_base, Ordering::Relaxed);
            mb.gs_dirty.store(1, Ordering::Relaxed);
        }
        if reset {
            uc.mcontext.fpstate = 0;
        }
    }
    if local {
        // Whatever it answered is the kernel's before its mailbox goes.
        kernel.take_local_answers();
        child.answer_locally(None);
    }
    OWN_CHILD.with(|c| c.set(previous));
    affinity.unpin();
    drop(host);
    // The time its host thread ran the guest stays this nomu thread's (the
    // guest thread's), counted now: a thread's host thread may be gone next.
    crate::host::sys::set_guest_process(before);
    if exited {
        // Its guest is gone (exit, or execve back to the normal path) and
        // it waits in its handler: the next fork may take it.
        zygote::keep(child);
    } else {
        drop(child);
    }
}

thread_local! {
    /// The forked child whose trap this nomu thread handles (in
    /// [`run_own_process`]), for [`new_forked_thread`].
    static OWN_CHILD: std::cell::Cell<*const Child> = const { std::cell::Cell::new(std::ptr::null()) };
}

/// The nomu threads that made a forked child's first host thread, once
/// it has more: the others are their children too (CLONE_PARENT) and die
/// with them (PR_SET_PDEATHSIG), so these must never end.
static PARENTS_OF_FORKED_THREADS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Whether this nomu host thread must not end (see PARENTS_OF_FORKED_THREADS).
pub fn parent_of_forked_threads() -> bool {
    let me = crate::host::sys::gettid();
    PARENTS_OF_FORKED_THREADS.lock().unwrap_or_else(|e| e.into_inner()).contains(&me)
}

/// A host thread made for a new guest thread of a forked child, in that
/// child's host process, parked until the guest thread's nomu thread takes
/// it ([`run_own_process`]); killed and reaped if it never does.
pub struct ForkedThread(Mutex<Option<Child>>);

impl std::fmt::Debug for ForkedThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ForkedThread")
    }
}

/// Where forked children's host processes come from: clones of a small
/// host process that holds nothing but the child code's pages, its block
/// and its ops block (the zygote). A clone of nomu itself, as the zygote
/// is made once, copies nomu's whole memory map (its VMAs, the page tables
/// of its heap and stacks, which the host then write-protects in nomu and
/// copies again at nomu's next writes): about 40% of a fork + exit + wait.
mod zygote {
    use super::*;

    /// The zygote, and blocks it still maps for children already made
    /// (unmapped there before its next clone, in the same batch).
    struct Zygote {
        child: Child,
        leftover: Vec<[u64; OP_WORDS]>,
    }

    static ZYGOTE: Mutex<Option<Zygote>> = Mutex::new(None);

    /// Host processes of forked children whose guests are gone, parked in
    /// their handlers, for the next forks: a clone and a kill and reap
    /// less per fork (each about a third of a fork + exit + wait).
    static READY: Mutex<Vec<Child>> = Mutex::new(Vec::new());
    const MAX_READY: usize = 2;

    /// Keeps `child`, whose guest is gone, for [`spawn`] when it is a
    /// zygote's clone with no other host thread, parked. It stays parked
    /// in its handler, running nothing, and keeps showing its guest's
    /// mappings until a fork takes it: the new guest's first changes then
    /// unmap everything but the child code, syscall user dispatch's
    /// selector, its blocks, zpoline's page 0 and what the new guest maps
    /// exactly alike (shown.rs), before it runs guest code. The pages the
    /// last guest's exit freed may meanwhile go to another process and
    /// still be shown here, as they are in a parked process until it runs
    /// its unmapping; nothing runs here that could touch them. Else, or
    /// when enough are kept, it is killed and reaped. While kept nothing
    /// kicks it and its death ends no guest.
    pub(super) fn keep(child: Child) {
        let alone =
            child.host.as_ref().is_some_and(|h| Arc::strong_count(h) == 1 && h.threads.load(Ordering::SeqCst) == 1);
        let parked = child.mailbox().state.load(Ordering::Acquire) == REQUEST;
        if !alone
            || !parked
            || child.block_fd.is_none()
            || READY.lock().unwrap_or_else(|e| e.into_inner()).len() >= MAX_READY
        {
            return drop(child);
        }
        if let Some(host) = &child.host {
            host.apply.lock().unwrap_or_else(|e| e.into_inner()).leave();
        }
        FORKED.disown(child.tid);
        set_on_lost(child.tid, None);
        let mut ready = READY.lock().unwrap_or_else(|e| e.into_inner());
        if ready.len() < MAX_READY {
            ready.push(child);
        } else {
            drop(ready);
            drop(child);
        }
    }

    /// A kept host process, alive (see [`keep`]).
    fn reuse(on_lost: &Option<Arc<dyn Fn() + Send + Sync>>) -> Option<Child> {
        loop {
            let child = READY.lock().unwrap_or_else(|e| e.into_inner()).pop()?;
            if !child.wait_request() {
                drop(child); // died while kept
                continue;
            }
            FORKED.reassign(child.tid);
            set_on_lost(child.tid, on_lost.clone());
            return Some(child);
        }
    }

    /// The zygote's parent: a host thread that lives as long as nomu. The
    /// zygote's clones are its children too (CLONE_PARENT), and each of
    /// them asks for SIGKILL when that thread dies (PR_SET_PDEATHSIG).
    fn make() -> Result<Zygote, String> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("nomu-zygote".into())
            .spawn(move || {
                crate::host::sys::unregister_rseq();
                let made = Child::spawn_kind(true, None).and_then(|z| {
                    // Nothing of nomu's memory stays but what the child
                    // code uses (its code, syscall user dispatch's
                    // selector byte, read-only): the clones copy only that.
                    let mut gaps = unmap_all_but(&kept_ranges(z.area, z.ops), false);
                    let (marks, marks_end) = site_marks_range();
                    if marks_end > marks {
                        let (len, ro) = ((marks_end - marks) as u64, libc::PROT_READ as u64);
                        gaps.push([libc::SYS_mprotect as u64, marks as u64, len, ro, 0, 0, 0]);
                    }
                    // zpoline's page 0 for forked children, whose clones
                    // inherit it (see zpoline::forked_trampoline_trap).
                    let (rx, fixed) = (libc::PROT_READ | libc::PROT_EXEC, libc::MAP_PRIVATE | libc::MAP_FIXED);
                    if let Some(fd) = super::super::zpoline::forked_child_trampoline() {
                        gaps.push([libc::SYS_mmap as u64, 0, PAGE_SIZE as u64, rx as u64, fixed as u64, fd as u64, 0]);
                    }
                    // The rewrite path's: int3 where its stub is in nomu.
                    if let Some((at, fd)) = super::super::rewrite::forked_stub_page() {
                        let at = at as u64;
                        gaps.push([libc::SYS_mmap as u64, at, PAGE_SIZE as u64, rx as u64, fixed as u64, fd as u64, 0]);
                    }
                    if !z.queue(&gaps) || !z.run_ops() {
                        return Err("the zygote died while starting".into());
                    }
                    Ok(z)
                });
                let _ = tx.send(made);
                loop {
                    std::thread::park();
                }
            })
            .map_err(|e| format!("a thread for the zygote: {e}"))?;
        let child = rx.recv().map_err(|_| "the zygote's thread died".to_string())??;
        Ok(Zygote { child, leftover: Vec::new() })
    }

    /// What a forked child's host process keeps of nomu's memory: the
    /// pages of [`nomu_ranges`], and its block and ops block at `area` and
    /// `ops`.
    pub(super) fn kept_ranges(area: usize, ops: usize) -> [(usize, usize); 7] {
        let [code, selector, marks, below, above] = nomu_ranges();
        [code, selector, marks, below, above, (area, area + AREA_SIZE), (ops, ops + OPS_SIZE)]
    }

    /// The pages of nomu that every forked child's host process keeps: the
    /// child code's, the page of syscall user dispatch's selector byte
    /// (read-only), zpoline's site marks (read-only, see
    /// [`site_marks_range`]), the rewrite path's trampoline regions beside
    /// physical memory (shared with nomu, read+execute: the patches the
    /// child's copies of code keep jump there).
    pub(super) fn nomu_ranges() -> [(usize, usize); 5] {
        let code = &raw const nomu_split_code_start as usize & !(PAGE_SIZE - 1);
        let code_end = (&raw const nomu_split_code_end as usize).next_multiple_of(PAGE_SIZE);
        let selector = super::super::dispatch::selector_page();
        let [below, above] = super::super::rewrite::kept_regions();
        [(code, code_end), (selector, selector + PAGE_SIZE), site_marks_range(), below, above]
    }

    /// zpoline's site bitmap, which a forked child's handler reads for its
    /// local answers to calls through page 0; empty when not in use.
    fn site_marks_range() -> (usize, usize) {
        super::super::zpoline::forked_site_marks().map_or((0, 0), |(bitmap, _, size)| {
            let bitmap = bitmap as usize;
            (bitmap, (bitmap + (size as usize).div_ceil(64) * 8).next_multiple_of(PAGE_SIZE))
        })
    }

    /// The host calls that unmap everything of a kept host process (block
    /// `area`, ops block `ops`) that the next guest does not show, but the
    /// ranges in `alike` (see [`keep`]).
    pub(super) fn unmap_all_but_guest(area: usize, ops: usize, alike: &[(usize, usize)]) -> Vec<[u64; OP_WORDS]> {
        let page0 = super::super::zpoline::forked_child_trampoline().is_some();
        let mut keep = kept_ranges(area, ops).to_vec();
        keep.extend_from_slice(alike);
        unmap_all_but(&keep, page0)
    }

    /// The host calls that unmap everything below the top of user memory
    /// but `keep` (and page 0 when `page0`, and the rewrite path's stub
    /// page).
    fn unmap_all_but(keep: &[(usize, usize)], page0: bool) -> Vec<[u64; OP_WORDS]> {
        let mut keep = keep.to_vec();
        if page0 {
            keep.push((0, PAGE_SIZE));
        }
        // The rewrite path's stub page (the zygote maps its own there
        // after this, and the processes it makes keep it).
        if let Some((at, _)) = super::super::rewrite::forked_stub_page() {
            keep.push((at, at + PAGE_SIZE));
        }
        keep.sort_unstable();
        let mut at = 0;
        let mut gaps = Vec::new();
        for (s, e) in keep.into_iter().chain([(crate::mm::uaccess::TASK_SIZE_MAX as usize, 0)]) {
            if s > at {
                gaps.push([libc::SYS_munmap as u64, at as u64, (s - at) as u64, 0, 0, 0, 0]);
            }
            at = at.max(e);
        }
        gaps
    }

    /// A new forked child's host process, started and parked, and the
    /// host calls it makes before it first runs (it unmaps the zygote's
    /// block and ops block, which it shares until then).
    pub(super) fn spawn(on_lost: Option<Arc<dyn Fn() + Send + Sync>>) -> Result<(Child, Vec<[u64; OP_WORDS]>), String> {
        if let Some(child) = reuse(&on_lost) {
            return Ok((child, Vec::new()));
        }
        let mut guard = ZYGOTE.lock().unwrap_or_else(|e| e.into_inner());
        if guard.as_ref().is_none_or(|z| z.child.mailbox().state.load(Ordering::Acquire) == DEAD) {
            *guard = None;
            *guard = Some(make()?);
        }
        let z = guard.as_mut().unwrap();
        let block = SharedBlock::take(Some(z.child.mailbox()))?;
        let flags = (libc::CLONE_FS | libc::CLONE_FILES | libc::CLONE_PARENT | libc::CLONE_CHILD_CLEARTID) as u64;
        let mut batch = std::mem::take(&mut z.leftover);
        // The clone comes last: its result is the one reported.
        batch.extend(block.map_and_clone(flags));
        if !z.child.queue(&batch) || !z.child.run_ops() {
            block.unmap();
            *guard = None;
            return Err("the zygote died".into());
        }
        let tid = z.child.mailbox().op_result.load(Ordering::Relaxed) as i64;
        if tid < 0 {
            block.unmap();
            return Err(format!("clone: {}", crate::abi::errno::Errno(-tid as i32)));
        }
        let (area, ops) = (block.area, block.ops);
        z.leftover = unmap_block_ops(area, ops).to_vec();
        let block_fd = Some(block.fd);
        let name = (area + MBOX_OFFSET + offset_of!(Mailbox, name)) as u64;
        let mut first_ops = unmap_block_ops(z.child.area, z.child.ops).to_vec();
        first_ops.push([libc::SYS_prctl as u64, libc::PR_SET_NAME as u64, name, 0, 0, 0, 0]);
        let maker = z.child.host.as_ref().map_or(0, |h| h.maker);
        drop(guard);
        let host = Arc::new(HostProcess { apply: Mutex::new(Shown::default()), threads: AtomicUsize::new(1), maker });
        let child = Child { area, tid: tid as i32, ops, host: Some(host), block_fd };
        FORKED.register(child.tid);
        watch(child.tid, &child.mailbox().state, on_lost);
        if !child.wait_request() {
            return Err("the child died while starting".into());
        }
        Ok((child, first_ops))
    }
}

/// clone(CLONE_THREAD) in a forked child, from inside its trap: a new host
/// thread in its host process (sharing its memory map), with a block and
/// ops block of its own shared with nomu (a memfd both map at the same
/// address), made by the trapping thread's host thread: a clone with
/// CLONE_VM (and CLONE_PARENT, so that nomu reaps it) that runs the start
/// code, as a forked child's first thread does, and parks.
pub fn new_forked_thread() -> Result<Arc<ForkedThread>, String> {
    let creator = OWN_CHILD.with(|c| c.get());
    if creator.is_null() {
        return Err("not in a forked child's trap".into());
    }
    // SAFETY: set by run_own_process on this thread, which is below us on
    // the stack (this runs inside its on_trap) with the child parked.
    let creator = unsafe { &*creator };
    let host = creator.host.clone().ok_or("not a forked child")?;
    let block = SharedBlock::new(None)?;
    let flags =
        (libc::CLONE_VM | libc::CLONE_FS | libc::CLONE_FILES | libc::CLONE_PARENT | libc::CLONE_CHILD_CLEARTID) as u64;
    if !creator.queue(&block.map_and_clone(flags)) {
        block.unmap();
        return Err("no room for the host calls".into());
    }
    // The child blocks every signal in its handler, so the new host thread
    // starts with all blocked, as spawn_kind's children do.
    if !creator.run_ops() {
        block.unmap();
        return Err("the forked guest's process died".into());
    }
    let tid = creator.mailbox().op_result.load(Ordering::Relaxed) as i64;
    if tid < 0 {
        block.unmap();
        return Err(format!("clone: {}", crate::abi::errno::Errno(-tid as i32)));
    }
    let (area, ops) = (block.area, block.ops);
    host.threads.fetch_add(1, Ordering::SeqCst);
    let child_maker = host.maker;
    let child = Child { area, tid: tid as i32, ops, host: Some(host), block_fd: None };
    FORKED.register(child.tid);
    let mut parents = PARENTS_OF_FORKED_THREADS.lock().unwrap_or_else(|e| e.into_inner());
    if !parents.contains(&child_maker) {
        parents.push(child_maker);
    }
    drop(parents);
    if !child.wait_request() {
        return Err("the new host thread died while starting".into());
    }
    Ok(Arc::new(ForkedThread(Mutex::new(Some(child)))))
}

/// A block and an ops block on a memfd of their own, mapped here with a
/// fresh forked child's mailbox, for another host process (a forked
/// child's, or the zygote) to map at the same addresses and clone onto.
struct SharedBlock {
    fd: std::os::fd::OwnedFd,
    area: usize,
    ops: usize,
    mailbox: usize,
}

/// Blocks of zygote clones whose host processes are gone, for the next
/// ones: a fork then makes no memfd and maps nothing new in nomu.
static SPARE_BLOCKS: Mutex<Vec<SharedBlock>> = Mutex::new(Vec::new());
const MAX_SPARE_BLOCKS: usize = 4;

impl SharedBlock {
    /// `creator`: the mailbox of the process that clones onto it, when
    /// the new child inherits its signal dispositions (a clone copies
    /// them): the child then installs none of its own when they are the
    /// ones it would.
    fn new(creator: Option<&Mailbox>) -> Result<SharedBlock, String> {
        let fd = memfd_block()?;
        let (area, ops) = map_block_fd(fd.as_raw_fd())?;
        let mailbox = write_mailbox(area, ops, true, creator) as usize;
        Ok(SharedBlock { fd, area, ops, mailbox })
    }

    /// A spare block with a fresh mailbox, else a new one.
    fn take(creator: Option<&Mailbox>) -> Result<SharedBlock, String> {
        let spare = SPARE_BLOCKS.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match spare {
            Some(block) => {
                write_mailbox(block.area, block.ops, true, creator);
                Ok(block)
            }
            None => SharedBlock::new(creator),
        }
    }

    /// Keeps a block no host process but nomu's (and the zygote's) maps,
    /// for [`take`](Self::take); handed back when enough are kept.
    fn keep(block: SharedBlock) -> Result<(), SharedBlock> {
        let mut spare = SPARE_BLOCKS.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() >= MAX_SPARE_BLOCKS {
            return Err(block);
        }
        spare.push(block);
        Ok(())
    }

    /// The host calls that map the block there (its guard page too) and
    /// clone (`flags`) a host thread or process that starts on it.
    fn map_and_clone(&self, flags: u64) -> [[u64; OP_WORDS]; 4] {
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        let shared_fixed = (libc::MAP_SHARED | libc::MAP_FIXED) as u64;
        let (area, ops, fd) = (self.area as u64, self.ops as u64, self.fd.as_raw_fd() as u64);
        [
            [libc::SYS_mmap as u64, area, AREA_SIZE as u64, rw, shared_fixed, fd, 0],
            [libc::SYS_mprotect as u64, area, PAGE_SIZE as u64, libc::PROT_NONE as u64, 0, 0, 0],
            [libc::SYS_mmap as u64, ops, OPS_SIZE as u64, rw, shared_fixed, fd, AREA_SIZE as u64],
            [libc::SYS_clone as u64, flags, area + MBOX_OFFSET as u64, 0, self.mailbox as u64, 0, 0],
        ]
    }

    /// Unmaps it here (no clone was made on it).
    fn unmap(&self) {
        unmap_area(self.area);
        unmap_shared(self.ops, OPS_SIZE);
    }
}

/// The host calls that unmap a block and an ops block in another process.
fn unmap_block_ops(area: usize, ops: usize) -> [[u64; OP_WORDS]; 2] {
    [
        [libc::SYS_munmap as u64, area as u64, AREA_SIZE as u64, 0, 0, 0, 0],
        [libc::SYS_munmap as u64, ops as u64, OPS_SIZE as u64, 0, 0, 0, 0],
    ]
}

/// A memfd for a block and an ops block ([`map_block_fd`]).
fn memfd_block() -> Result<std::os::fd::OwnedFd, String> {
    use std::os::fd::FromRawFd;
    // SAFETY: memfd_create with a NUL-terminated name; the result, if a
    // descriptor, is ours alone.
    let fd = unsafe { libc::syscall(libc::SYS_memfd_create, c"nomu-thread".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(format!("memfd_create: {}", crate::host::last_errno()));
    }
    // SAFETY: a fresh descriptor nobody else owns.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: ftruncate on our own descriptor.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), (AREA_SIZE + OPS_SIZE) as i64) } != 0 {
        return Err(format!("ftruncate: {}", crate::host::last_errno()));
    }
    Ok(fd)
}

/// Maps the memfd `fd`: a block aligned to its size (from offset 0, its
/// first page a guard) and an ops block (after it).
fn map_block_fd(fd: i32) -> Result<(usize, usize), String> {
    let area = kstack::map_aligned_guarded(AREA_SIZE, libc::MAP_PRIVATE)?;
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: over our own fresh aligned reservation; then a fresh shared
    // mapping at an address of the host's choice.
    unsafe {
        let at = libc::mmap(area as *mut libc::c_void, AREA_SIZE, rw, libc::MAP_SHARED | libc::MAP_FIXED, fd, 0);
        if at == libc::MAP_FAILED {
            unmap_area(area);
            return Err(format!("mmap: {}", crate::host::last_errno()));
        }
        libc::mprotect(area as *mut libc::c_void, PAGE_SIZE, libc::PROT_NONE);
        let ops = libc::mmap(std::ptr::null_mut(), OPS_SIZE, rw, libc::MAP_SHARED, fd, AREA_SIZE as i64);
        if ops == libc::MAP_FAILED {
            unmap_area(area);
            return Err(format!("mmap: {}", crate::host::last_errno()));
        }
        Ok((area, ops as usize))
    }
}

/// Whether a forked child's host process keeps nomu's page at `page` (the
/// child code's, the selector's, the site marks'): no page of its own may
/// be mapped there.
pub fn keeps_page(page: usize) -> bool {
    zygote::nomu_ranges().iter().any(|&(s, e)| s <= page && page < e)
}

/// Kicks the forked child run by nomu thread `host_tid`, if it runs one.
pub fn interrupt_own_process(host_tid: i32) -> bool {
    FORKED.signal(host_tid, CHILD_KICK)
}

/// The head of a set_robust_list that the forked child this nomu thread
/// runs answered itself since the last call, if any (see "Local answers").
pub fn take_local_robust_list() -> Option<u64> {
    take_local(|mb| (&mb.robust_set, &mb.robust_head))
}

/// The signal mask that the forked child this nomu thread runs set
/// itself since the last call, if any (see "Local answers").
pub fn take_local_sigmask() -> Option<u64> {
    take_local(|mb| (&mb.sigmask_set, &mb.sigmask))
}

/// A value the child left in its mailbox (`field` gives its flag, 1 until
/// taken, and the value), if it left one since the last take.
fn take_local(field: impl Fn(&Mailbox) -> (&AtomicU64, &AtomicU64)) -> Option<u64> {
    let child = OWN_CHILD.with(std::cell::Cell::get);
    if child.is_null() {
        return None;
    }
    // SAFETY: OWN_CHILD points at run_own_process's child while it runs.
    let (set, value) = field(unsafe { &*child }.mailbox());
    (set.swap(0, Ordering::AcqRel) == 1).then(|| value.load(Ordering::Acquire))
}

extern "C" fn reap_forked_at_exit() {
    FORKED.reap_all();
}

/// A forked child's host process, watched for a death of its own: the
/// host clears no CLONE_CHILD_CLEARTID word for a process whose memory map
/// is its own, so its nomu thread would wait for good.
struct Watched {
    pid: i32,
    pidfd: i32,
    /// Its mailbox's `state` word (the block lives until it is unwatched).
    state: usize,
    on_lost: Option<Arc<dyn Fn() + Send + Sync>>,
}

static WATCHED: Mutex<Vec<Watched>> = Mutex::new(Vec::new());

fn watched() -> std::sync::MutexGuard<'static, Vec<Watched>> {
    WATCHED.lock().unwrap_or_else(|e| e.into_inner())
}

/// The epoll set of the watched pidfds, and its thread (started with the
/// first forked child); None where the host has no pidfd_open.
fn watch_set() -> Option<i32> {
    static SET: OnceLock<Option<i32>> = OnceLock::new();
    *SET.get_or_init(|| {
        // SAFETY: a new epoll descriptor, ours for good.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return None;
        }
        // The watcher takes no signal (kicks, forwarded ones): each would
        // only end its wait.
        let creator_mask = crate::host::sys::block_mask(!0);
        let spawned = std::thread::Builder::new().name("nomu-forkwatch".into()).spawn(move || watch_deaths(ep));
        crate::host::sys::swap_sigmask(creator_mask);
        spawned.ok().map(|_| ep)
    })
}

/// Watches forked child `pid` until [`unwatch`]: if it dies first, its
/// mailbox's `state` becomes DEAD (its nomu thread, waiting there, sees
/// the guest thread lost) and `on_lost` runs (ending a guest blocked in a
/// syscall meanwhile).
fn watch(pid: i32, state: &AtomicU32, on_lost: Option<Arc<dyn Fn() + Send + Sync>>) {
    let Some(set) = watch_set() else { return };
    // SAFETY: pidfd_open of our own child, not yet reaped (its nomu thread
    // reaps it only after unwatch).
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    if pidfd < 0 {
        return;
    }
    let mut list = watched();
    // One-shot: a dead child's pidfd stays readable until it is unwatched.
    let mut ev = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLONESHOT) as u32, u64: pid as u64 };
    // SAFETY: adding our own pidfd to our own epoll set.
    if unsafe { libc::epoll_ctl(set, libc::EPOLL_CTL_ADD, pidfd, &mut ev) } != 0 {
        // SAFETY: our own descriptor, used nowhere else.
        unsafe { libc::close(pidfd) };
        return;
    }
    list.push(Watched { pid, pidfd, state: state.as_ptr() as usize, on_lost });
}

/// What the watcher does when watched `pid` dies: end this guest.
fn set_on_lost(pid: i32, on_lost: Option<Arc<dyn Fn() + Send + Sync>>) {
    if let Some(w) = watched().iter_mut().find(|w| w.pid == pid) {
        w.on_lost = on_lost;
    }
}

/// Stops watching `pid` (before it is killed and reaped, and its block
/// unmapped).
fn unwatch(pid: i32) {
    let mut list = watched();
    if let Some(i) = list.iter().position(|w| w.pid == pid) {
        let w = list.swap_remove(i);
        // SAFETY: our own pidfd; closing it takes it out of the epoll set.
        unsafe { libc::close(w.pidfd) };
    }
}

/// The watcher thread: each watched child that dies while watched is
/// marked DEAD and its guest ended.
fn watch_deaths(set: i32) {
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; 16];
    loop {
        // SAFETY: epoll_wait into our own array, its length given.
        let n = unsafe { libc::epoll_wait(set, events.as_mut_ptr(), events.len() as i32, -1) };
        for ev in events.iter().take(n.max(0) as usize) {
            let pid = ev.u64 as i32;
            let lost = {
                let list = watched();
                let Some(w) = list.iter().find(|w| w.pid == pid) else { continue };
                if FORKED.exiting() {
                    continue;
                }
                // SAFETY: the mailbox lives until its Child is dropped,
                // which unwatches it first, under the lock held here.
                let state = unsafe { &*(w.state as *const AtomicU32) };
                state.store(DEAD, Ordering::SeqCst);
                futex(state, FUTEX_WAKE, i32::MAX as u32);
                w.on_lost.clone()
            };
            if let Some(end_guest) = lost {
                end_guest();
            }
        }
    }
}
