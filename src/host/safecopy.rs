//! Fault-safe copies between nomu's memory and guest memory.
//!
//! The copy runs at known addresses. If it faults (the guest handed us an
//! unmapped or protected pointer), the trap handler in `entry` sees the
//! faulting instruction is one of [`fault_fixup`]'s and resumes at a fixup
//! that reports the count of bytes not copied, instead of crashing nomu
//! (the technique of gVisor's safecopy and Asterinas's exception table).
//!
//! Most of a copy moves 32, 8 and 1 bytes at a time: `rep movsb` alone is
//! slow where the CPU lacks ERMS (on an AMD EPYC Zen 1 VM: 2.5 us for a
//! page whose source and destination are not equally aligned, where
//! memcpy takes 0.12 us). A fault there resumes at one `rep movsb` of what
//! is left, from the start of the unit that faulted (nothing after it was
//! stored yet; bytes of the unit stored before the fault are stored again,
//! the same bytes), so the count it reports is exact to the byte.

use super::physmem::PhysMem;
use std::arch::global_asm;

global_asm!(
    ".text",
    ".globl nomu_safecopy",
    ".type nomu_safecopy,@function",
    "nomu_safecopy:",
    "    mov rcx, rdx",
    // [nomu_safecopy_fast, nomu_safecopy_exact): at every instruction that
    // touches memory, rdi, rsi and rcx are those of the unit being copied.
    ".globl nomu_safecopy_fast",
    "nomu_safecopy_fast:",
    "    cmp rcx, 32",
    "    jb 2f",
    "1:  movdqu xmm0, [rsi]",
    "    movdqu xmm1, [rsi + 16]",
    "    movdqu [rdi], xmm0",
    "    movdqu [rdi + 16], xmm1",
    "    add rsi, 32",
    "    add rdi, 32",
    "    sub rcx, 32",
    "    cmp rcx, 32",
    "    jae 1b",
    "2:  cmp rcx, 8",
    "    jb 3f",
    "    mov r8, [rsi]",
    "    mov [rdi], r8",
    "    add rsi, 8",
    "    add rdi, 8",
    "    sub rcx, 8",
    "    jmp 2b",
    "3:  test rcx, rcx",
    "    jz 4f",
    "    mov r8b, [rsi]",
    "    mov [rdi], r8b",
    "    inc rsi",
    "    inc rdi",
    "    dec rcx",
    "    jmp 3b",
    "4:  xor eax, eax",
    "    ret",
    // A fault in the fast copy resumes here: the rest, byte-exact.
    ".globl nomu_safecopy_exact",
    "nomu_safecopy_exact:",
    ".globl nomu_safecopy_insn",
    "nomu_safecopy_insn:",
    "    rep movsb",
    "    xor eax, eax",
    "    ret",
    ".globl nomu_safecopy_fixup",
    "nomu_safecopy_fixup:",
    // rcx holds the bytes `rep movsb` had still to copy when it faulted.
    "    mov rax, rcx",
    "    ret",
    ".size nomu_safecopy, . - nomu_safecopy",
);

extern "C" {
    fn nomu_safecopy(dst: *mut u8, src: *const u8, len: usize) -> usize;
    static nomu_safecopy_fast: u8;
    static nomu_safecopy_exact: u8;
    static nomu_safecopy_insn: u8;
    static nomu_safecopy_fixup: u8;
}

/// If `rip` is a faulting safecopy instruction, returns where to resume.
pub fn fault_fixup(rip: usize) -> Option<usize> {
    let [fast, exact, insn, fixup] = [
        &raw const nomu_safecopy_fast,
        &raw const nomu_safecopy_exact,
        &raw const nomu_safecopy_insn,
        &raw const nomu_safecopy_fixup,
    ]
    .map(|label| label as usize);
    if (fast..exact).contains(&rip) {
        Some(exact)
    } else {
        (rip == insn).then_some(fixup)
    }
}

/// Copies `dst.len()` bytes from guest address `src`. Returns how many bytes
/// were copied before a fault (all of them when none occurred).
pub fn copy_from_guest(dst: &mut [u8], src: usize) -> usize {
    if !PhysMem::get().contains(src, dst.len()) {
        return 0;
    }
    // SAFETY: dst is a valid nomu buffer; src lies inside the direct map and
    // any fault reading it is caught and turned into a short count.
    let left = unsafe { nomu_safecopy(dst.as_mut_ptr(), src as *const u8, dst.len()) };
    dst.len() - left
}

/// Copies `dst.len()` bytes of physical memory from `src` (one page's
/// worth at most: where the direct map shows it unmoved), read through the
/// writable alias, whatever the direct map's protection there. Returns how
/// many bytes were copied before a fault (a page missing from the alias,
/// secret memory's).
pub fn copy_from_physical(dst: &mut [u8], src: usize) -> usize {
    let pm = PhysMem::get();
    if !pm.contains(src, dst.len()) {
        return 0;
    }
    let from = pm.alias_addr(src);
    // SAFETY: dst is a valid nomu buffer; `from` lies inside the alias of
    // physical memory and any fault reading it is caught and turned into a
    // short count.
    let left = unsafe { nomu_safecopy(dst.as_mut_ptr(), from as *const u8, dst.len()) };
    dst.len() - left
}

/// Copies `src` to guest address `dst`. Returns how many bytes were copied
/// before a fault. `dst` must lie inside physical memory, or nothing is copied.
pub fn copy_to_guest(dst: usize, src: &[u8]) -> usize {
    if !PhysMem::get().contains(dst, src.len()) {
        return 0;
    }
    // SAFETY: dst lies inside the direct map, never in nomu's own memory; a
    // fault writing it (a read-only or PROT_NONE page) gives a short count.
    let left = unsafe { nomu_safecopy(dst as *mut u8, src.as_ptr(), src.len()) };
    src.len() - left
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resumes a fault of the copy as nomu's trap handlers do; any other
    /// fault gets the default action back and happens again.
    extern "C" fn on_fault(signo: i32, _info: *mut libc::siginfo_t, uc: *mut libc::c_void) {
        // SAFETY: the host passes the interrupted context.
        let uc = unsafe { &mut *(uc as *mut libc::ucontext_t) };
        let rip = &mut uc.uc_mcontext.gregs[libc::REG_RIP as usize];
        match fault_fixup(*rip as usize) {
            Some(resume_at) => *rip = resume_at as i64,
            // SAFETY: the default action for the signal being handled.
            None => unsafe {
                libc::signal(signo, libc::SIG_DFL);
            },
        }
    }

    /// Every length and alignment around an inaccessible page, both ways:
    /// the bytes before it are copied and the count of those not copied
    /// is exact.
    #[test]
    fn copies_up_to_a_fault_exactly() {
        const PG: usize = 4096;
        // SAFETY: a fresh anonymous mapping of our own, its second page
        // made inaccessible; the handler only resumes faults of the copy.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_fault as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
            assert_eq!(libc::sigaction(libc::SIGSEGV, &act, std::ptr::null_mut()), 0);
            let m = libc::mmap(
                std::ptr::null_mut(),
                2 * PG,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            ) as *mut u8;
            assert_ne!(m as *mut libc::c_void, libc::MAP_FAILED);
            assert_eq!(libc::mprotect(m.add(PG) as *mut libc::c_void, PG, libc::PROT_NONE), 0);
            let mut other = vec![0u8; 600];
            for (i, b) in other.iter_mut().enumerate() {
                *b = (i * 13 + 1) as u8;
            }
            for k in 0..=100 {
                for extra in [0, 1, 7, 8, 9, 31, 33, 400] {
                    let len = k + extra;
                    let at = m.add(PG - k);
                    // Into the edge: k bytes arrive, `extra` are left.
                    std::ptr::write_bytes(m, 0, PG);
                    let left = nomu_safecopy(at, other.as_ptr(), len);
                    assert_eq!(left, extra, "writing {len} bytes {k} before the edge");
                    assert_eq!(std::slice::from_raw_parts(at, k), &other[..k]);
                    // Out of it: k bytes arrive, the rest of dst untouched.
                    let mut dst = vec![0xEEu8; len + 1];
                    let left = nomu_safecopy(dst.as_mut_ptr(), at, len);
                    assert_eq!(left, extra, "reading {len} bytes {k} before the edge");
                    assert_eq!(&dst[..k], &other[..k]);
                    assert!(dst[k..].iter().all(|&b| b == 0xEE));
                }
            }
            // No fault: every length at every relative alignment.
            for len in 0..300 {
                for (a, b) in [(0, 0), (1, 0), (0, 3), (5, 9)] {
                    let mut dst = vec![0u8; len + 16];
                    assert_eq!(nomu_safecopy(dst.as_mut_ptr().add(b), other.as_ptr().add(a), len), 0);
                    assert_eq!(&dst[b..b + len], &other[a..a + len]);
                    assert!(dst[..b].iter().chain(&dst[b + len..]).all(|&x| x == 0));
                }
            }
            libc::signal(libc::SIGSEGV, libc::SIG_DFL);
            libc::munmap(m as *mut libc::c_void, 2 * PG);
        }
    }
}
