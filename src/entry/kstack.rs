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

pub const KSTACK_SIZE: usize = 1 << 20;
/// Bytes reserved at the top of every kernel stack for the Tcb.
pub const TCB_RESERVED: usize = 256;
pub const TCB_OFFSET: usize = KSTACK_SIZE - TCB_RESERVED;

/// Thread control block. The asm stubs use the first fields by offset.
#[repr(C)]
pub struct Tcb {
    /// nomu's own fs base for this host thread (offset 0).
    pub host_fs: u64,
    /// Host stack pointer saved when the thread entered guest mode (offset 8).
    pub host_rsp: u64,
    /// fs base to install just before entering the guest (offset 16).
    pub entry_fs: u64,
    /// The host signal mask of the thread before it entered guest mode,
    /// restored when it leaves.
    pub host_mask: u64,
    /// The kernel side of the guest thread running on this host thread.
    pub kernel: Option<*mut (dyn GuestKernel + 'static)>,
}

const _: () = assert!(std::mem::size_of::<Tcb>() <= TCB_RESERVED);

/// A kernel stack with a guard page at its bottom and the Tcb at its top.
pub struct KernelStack {
    base: usize,
}

impl KernelStack {
    pub fn new() -> Result<KernelStack, String> {
        // Over-allocate so an aligned KSTACK_SIZE block fits, then trim.
        let len = 2 * KSTACK_SIZE;
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
            return Err(format!("kernel stack: {}", crate::host::last_errno()));
        }
        let raw = raw as usize;
        let base = (raw + KSTACK_SIZE - 1) & !(KSTACK_SIZE - 1);
        // SAFETY: unmapping the unaligned head and tail of our own mapping,
        // then turning our own first page into a guard page.
        unsafe {
            if base > raw {
                libc::munmap(raw as *mut libc::c_void, base - raw);
            }
            let tail = raw + len - (base + KSTACK_SIZE);
            if tail > 0 {
                libc::munmap((base + KSTACK_SIZE) as *mut libc::c_void, tail);
            }
            libc::mprotect(base as *mut libc::c_void, PAGE_SIZE, libc::PROT_NONE);
        }
        let ks = KernelStack { base };
        // SAFETY: the Tcb slot lies inside our mapping, suitably aligned.
        unsafe {
            ks.tcb_ptr().write(Tcb { host_fs: 0, host_rsp: 0, entry_fs: 0, host_mask: 0, kernel: None });
        }
        Ok(ks)
    }

    pub fn tcb_ptr(&self) -> *mut Tcb {
        (self.base + TCB_OFFSET) as *mut Tcb
    }

    /// The usable stack (above the guard page, below the Tcb), for sigaltstack.
    pub fn stack_range(&self) -> (usize, usize) {
        (self.base + PAGE_SIZE, TCB_OFFSET - PAGE_SIZE)
    }
}

impl Drop for KernelStack {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and no longer in use (the thread left
        // guest mode and disabled its signal stack).
        unsafe { libc::munmap(self.base as *mut libc::c_void, KSTACK_SIZE) };
    }
}
