//! Per-thread kernel stacks for in-process entry paths.
//!
//! A trap arrives as a host signal on the guest thread, while `%fs` still
//! holds the guest's TLS pointer, so the handler cannot use thread-locals to
//! find its state. Instead every kernel stack is KSTACK_SIZE bytes, aligned to
//! its size, with the thread's [`Tcb`] at its top: the handler masks its own
//! stack pointer to find it (as Linux once found `thread_info`). This leaves
//! `%gs` free for guests that use it.

use crate::entry::GuestKernel;
use crate::host::physmem::PAGE_SIZE;
use std::sync::atomic::AtomicU64;

pub const KSTACK_SIZE: usize = 1 << 20;
/// Bytes reserved at the top of every kernel stack for the Tcb.
pub const TCB_RESERVED: usize = 256;
pub const TCB_OFFSET: usize = KSTACK_SIZE - TCB_RESERVED;
/// Below the Tcb: the zpoline path's save area for the guest's extended
/// state (xsave, standard format, 64-byte aligned). The stack proper ends
/// below it.
pub const XSAVE_RESERVED: usize = 16 << 10;
pub const XSAVE_OFFSET: usize = TCB_OFFSET - XSAVE_RESERVED;

/// Thread control block. The asm stubs use the first fields by offset.
#[repr(C)]
pub struct Tcb {
    /// nomu's own fs base for this host thread (offset 0).
    pub host_fs: u64,
    /// Host stack pointer saved when the thread entered guest mode (offset 8).
    pub host_rsp: u64,
    /// The host signal mask of the thread before it entered guest mode,
    /// restored when it leaves.
    pub host_mask: u64,
    /// The kernel side of the guest thread running on this host thread.
    pub kernel: Option<*mut (dyn GuestKernel + 'static)>,
    /// The guest's gs base (the seccomp path keeps it in the host thread's).
    pub guest_gs: u64,
    /// Set when a kick arrived while this thread ran nomu's code in guest
    /// mode (the kernel, a stub): the way back to guest code checks it and
    /// handles the kick first, so a signal queued after the kernel looked
    /// is not left waiting until the guest's next syscall.
    pub kick_note: u64,
    /// The zpoline path's scratch: the guest's rip and rsp across its stub,
    /// why the stub was entered (0 syscall, 1 kick), where the stub's stack
    /// starts, the xsave area, the guest's fs base while in the kernel, and
    /// the Tcb's own address (the stub reaches all of them through %gs).
    pub z_rip: u64,
    pub z_rsp: u64,
    pub z_reason: u64,
    pub z_stack_top: u64,
    pub z_xsave: u64,
    pub z_guest_fs: u64,
    pub z_self: u64,
    /// 1 when the xsave area holds the guest's whole extended state (the
    /// stub restores it with xrstor), 0 when only xmm0-15 were saved.
    pub z_full: u64,
    /// Where the zpoline stub's fast answers return to: the address after
    /// the site, or a rewrite-mode trampoline's after-part.
    pub z_back: u64,
    /// What the zpoline stub answers getpid and gettid with without
    /// entering the kernel (zpoline.rs, "Answers in the stub"); 0 when
    /// every call must reach the kernel.
    pub fast_pid: u64,
    pub fast_tid: u64,
}

impl Tcb {
    /// Sets (or, with None, turns off) the stub's answers to getpid and
    /// gettid: the kernel's `local_answers` after each trap.
    pub fn set_fast_answers(&mut self, ids: Option<(u32, u32)>) {
        let (tid, pid) = ids.unwrap_or((0, 0));
        (self.fast_tid, self.fast_pid) = (tid.into(), pid.into());
    }
}

const _: () = assert!(std::mem::size_of::<Tcb>() <= TCB_RESERVED);

/// Maps `size` bytes (a power of two) aligned to their size, so code can
/// find the block's top by masking its stack pointer, with a guard page at
/// the bottom. Returns the block's base.
pub fn map_aligned_with_guard(size: usize) -> Result<usize, String> {
    map_aligned_guarded(size, libc::MAP_PRIVATE)
}

/// [`map_aligned_with_guard`], MAP_SHARED (`sharing`) or MAP_PRIVATE: a
/// shared block stays one memory in a host process made without CLONE_VM.
pub fn map_aligned_guarded(size: usize, sharing: i32) -> Result<usize, String> {
    // Over-allocate so an aligned block fits, then trim.
    let len = 2 * size;
    // SAFETY: a fresh anonymous mapping at an address of the host's choice.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            sharing | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return Err(format!("mmap: {}", crate::host::last_errno()));
    }
    let raw = raw as usize;
    let base = (raw + size - 1) & !(size - 1);
    // SAFETY: unmapping the unaligned head and tail of our own mapping,
    // then turning our own first page into a guard page.
    unsafe {
        if base > raw {
            libc::munmap(raw as *mut libc::c_void, base - raw);
        }
        let tail = raw + len - (base + size);
        if tail > 0 {
            libc::munmap((base + size) as *mut libc::c_void, tail);
        }
        libc::mprotect(base as *mut libc::c_void, PAGE_SIZE, libc::PROT_NONE);
    }
    Ok(base)
}

/// A kernel stack with a guard page at its bottom and the Tcb at its top.
pub struct KernelStack {
    base: usize,
}

impl KernelStack {
    pub fn new() -> Result<KernelStack, String> {
        let base = map_aligned_with_guard(KSTACK_SIZE).map_err(|e| format!("kernel stack: {e}"))?;
        let ks = KernelStack { base };
        // SAFETY: the Tcb slot lies inside our mapping, suitably aligned.
        unsafe {
            let tcb = ks.tcb_ptr();
            tcb.write(Tcb {
                host_fs: 0,
                host_rsp: 0,
                host_mask: 0,
                kernel: None,
                guest_gs: 0,
                kick_note: 0,
                z_rip: 0,
                z_rsp: 0,
                z_reason: 0,
                z_stack_top: (base + XSAVE_OFFSET) as u64,
                z_xsave: (base + XSAVE_OFFSET) as u64,
                z_guest_fs: 0,
                z_self: tcb as u64,
                z_full: 0,
                z_back: 0,
                fast_pid: 0,
                fast_tid: 0,
            });
        }
        Ok(ks)
    }

    pub fn tcb_ptr(&self) -> *mut Tcb {
        tcb_at(self.base)
    }
}

/// The Tcb of the kernel stack at `base`.
fn tcb_at(base: usize) -> *mut Tcb {
    (base + TCB_OFFSET) as *mut Tcb
}

/// The size of a kernel stack as a signal stack: no other signal stack of
/// nomu's has it (the trap stub checks it before it trusts a Tcb).
pub const KSTACK_SIGNAL_STACK_SIZE: usize = XSAVE_OFFSET - PAGE_SIZE;

/// The usable part of the kernel stack at `base` (above the guard page,
/// below the xsave area and the Tcb), as sigaltstack takes it.
fn signal_stack_at(base: usize) -> libc::stack_t {
    libc::stack_t { ss_sp: (base + PAGE_SIZE) as *mut libc::c_void, ss_flags: 0, ss_size: KSTACK_SIGNAL_STACK_SIZE }
}

impl Drop for KernelStack {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and no longer in use (the thread left
        // guest mode and disabled its signal stack).
        unsafe { libc::munmap(self.base as *mut libc::c_void, KSTACK_SIZE) };
    }
}

thread_local! {
    /// Kernel stacks this host thread has and is not using, kept between
    /// the guest threads it runs.
    static SPARE: std::cell::RefCell<Vec<KernelStack>> = const { std::cell::RefCell::new(Vec::new()) };
    /// The kernel stacks in use, outermost first (more than one while a
    /// guest thread runs inside another's trap: a vfork child on its
    /// parent's host thread).
    static IN_USE: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Whether this host thread ever had a kernel stack.
    static HAD_ONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The kernel stack the host has as this thread's signal stack (0:
    /// none of ours): a pooled host thread running guest thread after
    /// guest thread on the same one sets it once.
    static INSTALLED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

std::arch::global_asm!(
    ".text",
    // nomu_sigaltstack_from(ss: rdi, scratch_top: rsi) -> rax: sigaltstack
    // (ss, NULL) issued with rsp at scratch_top.
    ".globl nomu_sigaltstack_from",
    "nomu_sigaltstack_from:",
    "    mov r8, rsp",
    "    mov rsp, rsi",
    "    xor esi, esi",
    "    mov eax, 131", // sigaltstack
    "    syscall",
    "    mov rsp, r8",
    "    ret",
);

extern "C" {
    fn nomu_sigaltstack_from(ss: *const libc::stack_t, scratch_top: usize) -> i64;
}

/// This host thread's kernel stack while it runs a guest thread, installed
/// as its signal stack, with the Tcb's host fs base and the kick note for
/// host::blocking set. Every entry path needs it while it runs a guest
/// thread: host signals (a trap, a fault in one of nomu's fault-safe
/// copies, a kick) arrive on it and find the Tcb. Nested use (a guest
/// thread run from inside another's trap, on that trap's kernel stack)
/// takes another kernel stack and gives the outer one back when it ends.
pub struct ThreadKernelStack {
    stack: Option<KernelStack>,
    /// True the first time this host thread got a kernel stack.
    pub fresh: bool,
}

impl ThreadKernelStack {
    pub fn enter() -> ThreadKernelStack {
        let fresh = !HAD_ONE.with(|h| h.replace(true));
        let spare = SPARE.with(|s| s.borrow_mut().pop());
        let stack = spare.unwrap_or_else(|| KernelStack::new().unwrap_or_else(|e| panic!("{e}")));
        let nested = IN_USE.with(|u| !u.borrow().is_empty());
        if nested {
            install_from_outer(stack.base);
        } else {
            install(stack.base);
        }
        IN_USE.with(|u| u.borrow_mut().push(stack.base));
        ThreadKernelStack { stack: Some(stack), fresh }
    }

    pub fn tcb(&self) -> *mut Tcb {
        self.stack.as_ref().unwrap().tcb_ptr()
    }

    /// Whether this guest thread runs inside another's trap.
    pub fn nested(&self) -> bool {
        self.outer_tcb().is_some()
    }

    /// The Tcb of the guest thread whose trap this one runs inside.
    pub fn outer_tcb(&self) -> Option<*mut Tcb> {
        IN_USE.with(|u| {
            let u = u.borrow();
            (u.len() > 1).then(|| tcb_at(u[u.len() - 2]))
        })
    }
}

/// Makes the kernel stack at `base` the signal stack, from code not
/// running on the current one.
fn install(base: usize) {
    if INSTALLED.with(|i| i.replace(base)) != base {
        let ss = signal_stack_at(base);
        // SAFETY: installing our own kernel stack mapping as this thread's
        // signal stack; it stays mapped as long as the thread lives.
        if unsafe { libc::sigaltstack(&ss, std::ptr::null_mut()) } < 0 {
            panic!("sigaltstack: {}", crate::host::last_errno());
        }
    }
    note_tcb(base);
}

/// Makes the kernel stack at `base` the signal stack while this thread runs
/// on the current one (inside a trap), which the host refuses to change
/// from there: the call is issued with rsp on the new stack. Until it is in force, a signal
/// would be delivered at the top of the current signal stack, over the
/// live frames of the trap being handled: none may come meanwhile.
fn install_from_outer(base: usize) {
    let ss = signal_stack_at(base);
    let old = crate::host::sys::swap_sigmask(!FAULT_SIGNAL_BITS);
    // SAFETY: the scratch top lies in the new stack's mapping, which no
    // one uses yet; the asm switches rsp there only around the syscall.
    let r = unsafe { nomu_sigaltstack_from(&ss, (ss.ss_sp as usize + ss.ss_size) & !15) };
    crate::host::sys::swap_sigmask(old);
    if r < 0 {
        panic!("sigaltstack: {}", crate::abi::errno::Errno(-r as i32).description());
    }
    INSTALLED.with(|i| i.set(base));
    note_tcb(base);
}

/// Signals that only nomu's own faults raise (never blocked: a fault with
/// its signal blocked kills the process).
const FAULT_SIGNAL_BITS: u64 = {
    let mut bits = 0u64;
    let mut i = 0;
    while i < super::FAULT_SIGNALS.len() {
        bits |= 1 << (super::FAULT_SIGNALS[i] - 1);
        i += 1;
    }
    bits
};

fn note_tcb(base: usize) {
    // SAFETY: the Tcb lives at the top of the stack's mapping, which stays
    // mapped as long as this thread lives (spare stacks are unmapped only
    // with the thread); the kick note is a u64 that only this thread and
    // its signal handlers use, and AtomicU64 has its layout.
    unsafe {
        let tcb = tcb_at(base);
        (*tcb).host_fs = crate::host::sys::fs_base();
        crate::host::blocking::set_kick_note(&*(std::ptr::addr_of!((*tcb).kick_note) as *const AtomicU64));
    }
}

impl Drop for ThreadKernelStack {
    fn drop(&mut self) {
        let stack = self.stack.take().unwrap();
        let outer = IN_USE.with(|u| {
            let mut u = u.borrow_mut();
            u.pop();
            u.last().copied()
        });
        // The outermost kernel stack stays this thread's signal stack (the
        // one it had before, Rust's small overflow stack, is not put back):
        // nomu code on this thread between guest threads can still take a
        // fault in a fault-safe copy, and its handler must find a Tcb. A
        // nested one gives way to the outer stack again; this thread runs
        // on that one, not on the signal stack it replaces, so the host
        // lets it.
        if let Some(base) = outer {
            install(base);
        }
        SPARE.with(|s| s.borrow_mut().push(stack));
    }
}
