//! Fault-safe copies between nomu's memory and guest memory.
//!
//! The copy is one `rep movsb` at a known address. If it faults (the guest
//! handed us an unmapped or protected pointer), the trap handler in `entry`
//! sees the faulting instruction is [`fault_fixup`]'s and resumes at the
//! fixup label with the count of bytes not copied, instead of crashing nomu
//! (the technique of gVisor's safecopy and Asterinas's exception table).

use super::physmem::PhysMem;
use std::arch::global_asm;

global_asm!(
    ".text",
    ".globl nomu_safecopy",
    ".type nomu_safecopy,@function",
    "nomu_safecopy:",
    "    mov rcx, rdx",
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
    static nomu_safecopy_insn: u8;
    static nomu_safecopy_fixup: u8;
}

/// If `rip` is the faulting safecopy instruction, returns where to resume.
pub fn fault_fixup(rip: usize) -> Option<usize> {
    let (insn, fixup) =
        (std::ptr::addr_of!(nomu_safecopy_insn) as usize, std::ptr::addr_of!(nomu_safecopy_fixup) as usize);
    (rip == insn).then_some(fixup)
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
