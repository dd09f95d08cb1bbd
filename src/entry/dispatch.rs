//! Syscall User Dispatch (Linux 5.11+, `PR_SET_SYSCALL_USER_DISPATCH`):
//! how nomu's host threads catch guest syscalls when the host has it.
//!
//! A thread with dispatch on gets SIGSYS for every syscall made from outside
//! one allowed range of instruction pointers, and makes the others as usual.
//! nomu allows everything from the end of guest memory up (its own code, its
//! libraries and the vDSO all lie there; guest memory sits low, where nomu
//! asks the host to put it), so every syscall instruction in guest memory
//! traps, as with a seccomp filter that checks the instruction pointer. The
//! difference is what nomu's own host calls pay: measured on an Intel Xeon
//! VM, fstat natively 128-132 ns, under nomu's instruction-pointer filter
//! 152-157 ns, with dispatch on and the caller in the allowed range 132-142
//! ns, and with dispatch plus the x86-64-only filter below 138-142 ns: a
//! filter whose answer depends only on the ABI is cached by the host per
//! syscall number and never runs its program.
//!
//! Dispatch does not stop a guest's i386 syscall entered with `sysenter`
//! (its instruction pointer is the vDSO's, in the allowed range), so a
//! process-wide seccomp filter that traps every syscall of another ABI stays
//! ([`super::seccomp`]). Dispatch is not inherited by clone, fork or execve:
//! every host thread turns it on before it first runs guest code
//! ([`ensure_on`]), and split's children turn it on in their start code.
//!
//! The selector (the byte the host reads when a syscall comes from outside
//! the range) is a read-only constant that says "block": nomu never needs
//! to flip it, since its own calls come from inside the range, and a guest
//! cannot flip it either.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

const PR_SET_SYSCALL_USER_DISPATCH: i32 = 59;
const PR_SYS_DISPATCH_OFF: u64 = 0;
const PR_SYS_DISPATCH_ON: u64 = 1;
/// SYSCALL_DISPATCH_FILTER_BLOCK.
const BLOCK: u8 = 1;

/// The selector byte, read-only: always "block".
static SELECTOR: u8 = BLOCK;

/// Where the allowed range starts (the end of guest memory), or 0 when
/// nomu does not use dispatch.
static FROM: AtomicU64 = AtomicU64::new(0);

/// The allowed range ends here: far above any user address (also with
/// 5-level paging), without the host's overflow check tripping.
const TO: u64 = 1 << 63;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
}

fn prctl(mode: u64, from: u64, len: u64) -> Result<(), crate::abi::errno::Errno> {
    let selector = if mode == PR_SYS_DISPATCH_ON { &SELECTOR as *const u8 as u64 } else { 0 };
    // SAFETY: prctl with plain values and a pointer to a static byte the
    // host only reads.
    let r = unsafe { libc::prctl(PR_SET_SYSCALL_USER_DISPATCH, mode, from, len, selector) };
    if r < 0 {
        Err(crate::host::last_errno())
    } else {
        Ok(())
    }
}

/// Whether this host has dispatch: turned on and off again on the calling
/// thread (which runs no guest code yet).
pub fn available() -> bool {
    if std::env::var_os("NOMU_NO_DISPATCH").is_some() {
        return false;
    }
    // The whole address space but page 0 allowed: the calling thread's own
    // prctl to turn it off again must not trap.
    prctl(PR_SYS_DISPATCH_ON, 4096, TO - 4096).is_ok() && prctl(PR_SYS_DISPATCH_OFF, 0, 0).is_ok()
}

/// Whether nomu's code lies above `from` (the end of guest memory): its
/// own text, libc's and the vDSO's, whose syscalls must stay allowed.
pub fn code_above(from: u64) -> bool {
    let own = available as *const () as u64;
    let libc = libc::syscall as *const () as u64;
    // SAFETY: getauxval only reads the auxiliary vector.
    let vdso = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    [own, libc].iter().all(|&a| a >= from) && (vdso == 0 || vdso >= from)
}

/// From now on every guest thread runs with dispatch on, allowing syscalls
/// from `from` (the end of guest memory) up.
pub fn use_from(from: u64) {
    FROM.store(from, Ordering::Relaxed);
}

/// For a child that turns dispatch on itself (split's start code): the
/// allowed range's start and length, and the selector's address; a zero
/// length when dispatch is not in use.
pub fn child_args() -> [u64; 3] {
    let from = FROM.load(Ordering::Relaxed);
    if from == 0 {
        return [0; 3];
    }
    [from, TO - from, &SELECTOR as *const u8 as u64]
}

/// For a forked child's host process (split's start code): syscalls are
/// allowed from its own code, [code_start, code_end), alone, so that guest
/// code anywhere else traps, a fixed-address image above physical memory
/// too. All zero when dispatch is not in use.
pub fn forked_child_args(code_start: u64, code_end: u64) -> [u64; 3] {
    if FROM.load(Ordering::Relaxed) == 0 {
        return [0; 3];
    }
    [code_start, code_end - code_start, &SELECTOR as *const u8 as u64]
}

/// The page holding the selector byte (read-only, in nomu's image): what
/// a process that keeps little else of nomu's memory must keep mapped.
pub fn selector_page() -> usize {
    &SELECTOR as *const u8 as usize & !(crate::host::physmem::PAGE_SIZE - 1)
}

/// Whether guest syscalls are caught by dispatch (a forked child's host
/// process can then run guest code above physical memory).
pub fn in_use() -> bool {
    FROM.load(Ordering::Relaxed) != 0
}

/// Turns dispatch on for the calling host thread, once, if nomu uses it.
/// Every in-process entry path calls this before it runs guest code: a
/// thread without it would let the guest's syscalls reach the host.
pub fn ensure_on() {
    let from = FROM.load(Ordering::Relaxed);
    if from == 0 || ON.with(|on| on.get()) {
        return;
    }
    if let Err(e) = prctl(PR_SYS_DISPATCH_ON, from, TO - from) {
        panic!("turning syscall user dispatch on: {e}");
    }
    ON.with(|on| on.set(true));
}
