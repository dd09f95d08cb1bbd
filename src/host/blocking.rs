//! Host calls that may block for as long as they like, yet end as soon as
//! the guest thread they serve is kicked (a signal for it, exit_group,
//! another thread's execve).
//!
//! The technique is musl's for cancellation points. The call runs from one
//! labelled stretch of asm: it checks this thread's kick note, then issues
//! the `syscall`. The kick's handler (entry::host_signals) notes every kick that
//! lands in nomu's code, and when the interrupted instruction lies in that
//! stretch (the note check, or the `syscall` itself: the host rewinds an
//! interrupted blocking call to its `syscall` instruction to restart it) it
//! moves the thread to an exit that returns EINTR. So a kick that comes
//! before the call is seen by the check, one that comes during it ends it,
//! and one that comes after the `syscall` returned leaves its result alone:
//! no kick is lost and no wait needs a timeout to notice one.

use crate::abi::errno::Errno;
use std::arch::global_asm;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

global_asm!(
    ".text",
    // nomu_interruptible_syscall(call: rdi -> [nr, a0..a5], note: rsi) -> rax
    ".globl nomu_interruptible_syscall",
    ".type nomu_interruptible_syscall,@function",
    "nomu_interruptible_syscall:",
    "    mov r11, rsi",
    "    mov rax, [rdi]",
    "    mov rsi, [rdi + 16]",
    "    mov rdx, [rdi + 24]",
    "    mov r10, [rdi + 32]",
    "    mov r8, [rdi + 40]",
    "    mov r9, [rdi + 48]",
    "    mov rdi, [rdi + 8]",
    ".globl nomu_interruptible_begin",
    "nomu_interruptible_begin:",
    "    cmp qword ptr [r11], 0",
    "    jne nomu_interruptible_cancel",
    "    syscall",
    ".globl nomu_interruptible_end",
    "nomu_interruptible_end:",
    // As every host call on a guest's path (see host::syscall).
    super::fill_return_stack!("nomu_fill_after_host_call"),
    "    ret",
    ".globl nomu_interruptible_cancel",
    "nomu_interruptible_cancel:",
    "    mov rax, -4", // -EINTR
    "    ret",
);

extern "C" {
    fn nomu_interruptible_syscall(call: *const [u64; 7], note: *const AtomicU64) -> i64;
    static nomu_interruptible_begin: u8;
    static nomu_interruptible_end: u8;
    static nomu_interruptible_cancel: u8;
}

thread_local! {
    /// This thread's kick note (in its Tcb), once it runs guest threads.
    static NOTE: Cell<*const AtomicU64> = const { Cell::new(std::ptr::null()) };
}

/// Makes `note` this thread's kick note: the word the kick handler sets
/// when a kick lands in nomu's code. It must live as long as the thread.
pub fn set_kick_note(note: &'static AtomicU64) {
    NOTE.with(|n| n.set(note));
}

/// Forgets kicks so far: a call after this ends early only for a kick that
/// comes later. The caller looks for what a kick may have announced after
/// this, before the call.
pub fn forget_kicks() {
    let note = NOTE.with(|n| n.get());
    if !note.is_null() {
        // SAFETY: set_kick_note's contract: the note outlives the thread.
        unsafe { &*note }.store(0, Ordering::Relaxed);
    }
}

/// Where the kick handler sends a thread interrupted at `rip`: Some(exit)
/// when `rip` lies in the interruptible stretch.
pub fn cancel_point(rip: u64) -> Option<u64> {
    // SAFETY: addresses of asm labels, never read.
    let (begin, end, cancel) = unsafe {
        (
            &nomu_interruptible_begin as *const u8 as u64,
            &nomu_interruptible_end as *const u8 as u64,
            &nomu_interruptible_cancel as *const u8 as u64,
        )
    };
    (begin..end).contains(&rip).then_some(cancel)
}

/// Issues host syscall `nr` so that a kick ends it with EINTR (see the
/// module comment). On a thread without a kick note it is a plain call.
///
/// # Safety
/// As for the raw syscall: the arguments must be valid for `nr`.
pub unsafe fn syscall(nr: libc::c_long, args: [u64; 6]) -> Result<usize, Errno> {
    let note = NOTE.with(|n| n.get());
    if note.is_null() {
        // SAFETY: the caller's contract.
        return unsafe { super::syscall::syscall(nr, args) };
    }
    let call = [nr as u64, args[0], args[1], args[2], args[3], args[4], args[5]];
    // SAFETY: the caller's contract; the note lives as long as this thread.
    super::syscall::result(unsafe { nomu_interruptible_syscall(&call, note) })
}
