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
}

const _: () = assert!(std::mem::size_of::<Tcb>() <= TCB_RESERVED);

/// Maps `size` bytes (a power of two) aligned to their size, so code can
/// find the block's top by masking its stack pointer, with a guard page at
/// the bottom. Returns the block's base.
pub fn map_aligned_with_guard(size: usize) -> Result<usize, String> {
    // Over-allocate so an aligned block fits, then trim.
    let len = 2 * size;
    // SAFETY: a fresh anonymous mapping at an address of the host's choice.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
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
            });
        }
        Ok(ks)
    }

    pub fn tcb_ptr(&self) -> *mut Tcb {
        (self.base + TCB_OFFSET) as *mut Tcb
    }

    /// The usable stack (above the guard page, below the xsave area and the
    /// Tcb), for sigaltstack.
    pub fn stack_range(&self) -> (usize, usize) {
        (self.base + PAGE_SIZE, XSAVE_OFFSET - PAGE_SIZE)
    }
}

impl Drop for KernelStack {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and no longer in use (the thread left
        // guest mode and disabled its signal stack).
        unsafe { libc::munmap(self.base as *mut libc::c_void, KSTACK_SIZE) };
    }
}

thread_local! {
    /// This host thread's kernel stack, kept between the guest threads it runs.
    static CACHED: std::cell::RefCell<Option<KernelStack>> = const { std::cell::RefCell::new(None) };
}

/// This host thread's kernel stack, installed as its signal stack with the
/// Tcb's host fs base set (and left installed after the guard goes). Every
/// entry path needs it while it runs a guest thread: host signals (a trap,
/// a fault in one of nomu's fault-safe copies, a kick) arrive on it and
/// find the Tcb.
pub struct ThreadKernelStack {
    stack: Option<KernelStack>,
    /// True the first time this host thread got a kernel stack.
    pub fresh: bool,
}

impl ThreadKernelStack {
    pub fn enter() -> ThreadKernelStack {
        let cached = CACHED.with(|k| k.borrow_mut().take());
        let fresh = cached.is_none();
        let stack = cached.unwrap_or_else(|| KernelStack::new().unwrap_or_else(|e| panic!("{e}")));
        let (ss_sp, ss_size) = stack.stack_range();
        let new = libc::stack_t { ss_sp: ss_sp as *mut libc::c_void, ss_flags: 0, ss_size };
        // SAFETY: installing our own kernel stack mapping as this thread's
        // signal stack; it stays installed as long as the thread lives.
        if unsafe { libc::sigaltstack(&new, std::ptr::null_mut()) } < 0 {
            panic!("sigaltstack: {}", crate::host::last_errno());
        }
        // SAFETY: the Tcb lives at the top of our mapping, which stays
        // mapped as long as this thread lives (see Drop below); the kick
        // note is a u64 that only this thread and its signal handlers use,
        // and AtomicU64 has its layout.
        unsafe {
            let tcb = stack.tcb_ptr();
            (*tcb).host_fs = crate::host::sys::fs_base();
            crate::host::blocking::set_kick_note(&*(std::ptr::addr_of!((*tcb).kick_note) as *const AtomicU64));
        }
        ThreadKernelStack { stack: Some(stack), fresh }
    }

    pub fn tcb(&self) -> *mut Tcb {
        self.stack.as_ref().unwrap().tcb_ptr()
    }
}

impl Drop for ThreadKernelStack {
    fn drop(&mut self) {
        // The kernel stack stays this thread's signal stack (the one it had
        // before, Rust's small overflow stack, is not put back): nomu code on
        // this thread between guest threads can still take a fault in a
        // fault-safe copy, and its handler must find a Tcb. The stack is
        // unmapped only with the thread.
        let stack = self.stack.take();
        CACHED.with(|k| *k.borrow_mut() = stack);
    }
}
