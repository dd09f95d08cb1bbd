//! Host syscalls on a guest syscall's path, made inline (or from one asm
//! stub, where it refills the return-stack predictor) rather than through
//! libc's wrappers.
//!
//! After a host syscall returns, the return-stack predictor holds what the
//! host kernel left there, not nomu's return addresses. Every `ret` after
//! it whose `call` came before it (the wrapper's, then each Rust frame's up
//! to the trap handler) is predicted from those entries and speculates into
//! them. On the test VM (AMD EPYC, host mitigations "Retpolines + RSB
//! filling" and SRSO "Safe RET") that made each host call made in a SIGSYS
//! handler cost about 300 ns more than the same call with no `ret` after
//! it: a C handler's getpid trap went from 1.59 to 2.08 us when its host
//! call moved into a called function. So the stub refills the predictor
//! with harmless entries before its own `ret` (see [`fill_return_stack`]),
//! and the returns that follow become ordinary mispredictions: 1.78 us
//! there; under nomu's seccomp path 310 ns less per guest fstat of a
//! regular file, 990 ns less per open + close (README, "Performance").
//! On Intel, and on AMD without the "Safe RET" SRSO mitigation, the refill
//! costs instead of paying, so it runs only on AMD of family 17h with
//! Safe RET (see [`init_return_stack_fill`]).
//!
//! Everywhere else the call is made inline, in the caller's frame: each
//! `ret` between a host call and guest code is a misprediction even so,
//! ~6 ns apiece on the Zen 5 VM (measured natively: fstat then 12 nested
//! returns costs 70 ns more than fstat alone), so every frame saved counts.
//! The stub's own `ret` and its argument array cost 10-17 ns per guest
//! fstat there (rewrite path, alternating runs: 447-460 -> 435-450 ns).
//!
//! [`init_return_stack_fill`]: crate::host::init_return_stack_fill
//!
//! [`fill_return_stack`]: crate::host::fill_return_stack

use crate::abi::errno::Errno;
use std::arch::global_asm;

global_asm!(
    ".text",
    // nomu_host_syscall(nr: rdi, args: rsi -> [u64; 6]) -> rax: the raw
    // result (-errno on failure).
    ".p2align 4",
    ".globl nomu_host_syscall",
    ".type nomu_host_syscall,@function",
    "nomu_host_syscall:",
    "    mov rax, rdi",
    "    mov rdi, [rsi]",
    "    mov rdx, [rsi + 16]",
    "    mov r10, [rsi + 24]",
    "    mov r8, [rsi + 32]",
    "    mov r9, [rsi + 40]",
    "    mov rsi, [rsi + 8]",
    "    syscall",
    crate::host::fill_return_stack!("nomu_fill_after_host_call"),
    "    ret",
);

extern "C" {
    fn nomu_host_syscall(nr: libc::c_long, args: *const [u64; 6]) -> i64;
}

/// Host syscall `nr`: Ok(result) or the host's errno.
///
/// # Safety
/// As for the raw syscall: the arguments must be valid for `nr`.
#[inline]
pub unsafe fn syscall(nr: libc::c_long, args: [u64; 6]) -> Result<usize, Errno> {
    // SAFETY: the caller's contract.
    result(unsafe {
        if crate::host::return_stack_fill_after_host_call() {
            through_stub(nr, &args)
        } else {
            inline(nr, &args)
        }
    })
}

/// The raw result of host syscall `nr`, made by the refilling stub.
///
/// # Safety
/// As for [`syscall`].
unsafe fn through_stub(nr: libc::c_long, args: &[u64; 6]) -> i64 {
    // SAFETY: the caller's contract; the stub reads the six arguments.
    unsafe { nomu_host_syscall(nr, args) }
}

/// The raw result of host syscall `nr`, made in the caller's frame.
///
/// # Safety
/// As for [`syscall`].
#[inline(always)]
unsafe fn inline(nr: libc::c_long, args: &[u64; 6]) -> i64 {
    let raw: i64;
    // SAFETY: the caller's contract. `syscall` clobbers rcx and r11 besides
    // rax and touches no stack (the red zone stays intact).
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr => raw,
            in("rdi") args[0], in("rsi") args[1], in("rdx") args[2],
            in("r10") args[3], in("r8") args[4], in("r9") args[5],
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    raw
}

/// A raw syscall result (-errno on failure) as a Result.
pub fn result(raw: i64) -> Result<usize, Errno> {
    if (-4095..0).contains(&raw) {
        Err(Errno(-raw as i32))
    } else {
        Ok(raw as usize)
    }
}

/// Like [`syscall`], again while the call is interrupted by a signal.
///
/// # Safety
/// As for [`syscall`].
#[inline]
pub unsafe fn syscall_retry(nr: libc::c_long, args: [u64; 6]) -> Result<usize, Errno> {
    loop {
        // SAFETY: the caller's contract.
        match unsafe { syscall(nr, args) } {
            Err(Errno::EINTR) => continue,
            other => return other,
        }
    }
}

/// The six argument words of a host syscall, from fewer.
#[inline]
pub fn args<const N: usize>(a: [u64; N]) -> [u64; 6] {
    let mut all = [0; 6];
    all[..N].copy_from_slice(&a);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    type Way = unsafe fn(libc::c_long, &[u64; 6]) -> i64;
    /// Both ways a host call can be made: every test runs on each.
    const WAYS: [Way; 2] = [through_stub, inline_way];

    /// [`inline`], as a function the tests can take the address of.
    unsafe fn inline_way(nr: libc::c_long, args: &[u64; 6]) -> i64 {
        // SAFETY: the caller's contract.
        unsafe { inline(nr, args) }
    }

    #[test]
    fn results_and_errors_come_back() {
        for way in WAYS {
            // SAFETY: getpid takes no arguments; close of a descriptor that
            // is not open only fails.
            unsafe {
                assert_eq!(result(way(libc::SYS_getpid, &args([]))), Ok(std::process::id() as usize));
                assert_eq!(result(way(libc::SYS_close, &args([u32::MAX as u64]))), Err(Errno::EBADF));
            }
        }
    }

    #[test]
    fn all_six_arguments_reach_the_host() {
        // mmap uses all six: a file mapped at an offset must show the
        // bytes pread64 (four arguments) finds there.
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(std::env::current_exe().unwrap()).unwrap();
        let fd = file.as_raw_fd() as u64;
        for way in WAYS {
            let mut expected = [0u8; 64];
            // SAFETY: pread64 into a buffer we own, of the size given.
            let n = unsafe { way(libc::SYS_pread64, &args([fd, expected.as_mut_ptr() as u64, 64, 4096])) };
            assert_eq!(n, 64);
            let (prot, flags) = (libc::PROT_READ as u64, libc::MAP_PRIVATE as u64);
            // SAFETY: a fresh private read-only mapping of our own executable.
            let addr = result(unsafe { way(libc::SYS_mmap, &[0, 4096, prot, flags, fd, 4096]) }).unwrap();
            // SAFETY: the mapping just made is 4096 readable bytes.
            let mapped = unsafe { std::slice::from_raw_parts(addr as *const u8, 64) };
            assert_eq!(mapped, &expected[..]);
            // SAFETY: unmapping what we mapped.
            assert_eq!(unsafe { way(libc::SYS_munmap, &args([addr as u64, 4096])) }, 0);
        }
    }
}
