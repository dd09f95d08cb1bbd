//! CPU facts the loader and the entry paths need.

use std::arch::x86_64::__cpuid;

/// CPUID leaf 1 EDX, which Linux reports as AT_HWCAP on x86-64.
pub fn hwcap() -> u64 {
    // cpuid traps to the hypervisor on a VM: ask once.
    static HWCAP: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *HWCAP.get_or_init(|| __cpuid(1).edx as u64)
}

/// The host's AT_HWCAP2 (bit 1: the kernel allows FSGSBASE instructions).
pub fn hwcap2() -> u64 {
    // SAFETY: getauxval only reads the auxiliary vector.
    unsafe { libc::getauxval(libc::AT_HWCAP2) }
}

/// AT_MINSIGSTKSZ as the host reports it.
pub fn minsigstksz() -> u64 {
    // SAFETY: as above. 51 is AT_MINSIGSTKSZ.
    unsafe { libc::getauxval(51) }
}

/// Whether rdfsbase/wrfsbase may be used in user mode.
pub fn has_fsgsbase() -> bool {
    hwcap2() & 2 != 0
}

/// Where each XSAVE component ends in the standard (signal frame) layout:
/// `ends[i]` for component i (0 when the CPU has none).
pub fn xstate_component_ends() -> &'static [usize; 64] {
    static ENDS: std::sync::OnceLock<[usize; 64]> = std::sync::OnceLock::new();
    ENDS.get_or_init(|| {
        let mut ends = [0usize; 64];
        ends[0] = 512;
        ends[1] = 512;
        if __cpuid(1).ecx & (1 << 26) != 0 {
            for (i, end) in ends.iter_mut().enumerate().skip(2) {
                let leaf = std::arch::x86_64::__cpuid_count(0xd, i as u32);
                if leaf.eax != 0 {
                    *end = (leaf.ebx + leaf.eax) as usize; // offset + size
                }
            }
        }
        ends
    })
}
