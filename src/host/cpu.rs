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

/// Where each XSAVE component lies in the standard (signal frame) layout:
/// `(offset, size)` for component i (size 0 when the CPU has none; x87 and
/// SSE live in the 512-byte legacy area).
pub fn xstate_components() -> &'static [(usize, usize); 64] {
    static COMPONENTS: std::sync::OnceLock<[(usize, usize); 64]> = std::sync::OnceLock::new();
    COMPONENTS.get_or_init(|| {
        let mut c = [(0usize, 0usize); 64];
        c[0] = (0, 512);
        c[1] = (0, 512);
        if __cpuid(1).ecx & (1 << 26) != 0 {
            for (i, comp) in c.iter_mut().enumerate().skip(2) {
                let leaf = std::arch::x86_64::__cpuid_count(0xd, i as u32);
                *comp = (leaf.ebx as usize, leaf.eax as usize);
            }
        }
        c
    })
}

/// Whether the OS enabled XSAVE (so signal frames hold xsave images and
/// xsave/xrstor may be used).
pub fn has_xsave() -> bool {
    __cpuid(1).ecx & (1 << 27) != 0
}

/// Whether the CPU has XSAVEOPT (and the OS enabled XSAVE).
pub fn has_xsaveopt() -> bool {
    has_xsave() && std::arch::x86_64::__cpuid_count(0xd, 1).eax & 1 != 0
}

/// Bytes of an xsave image (standard format) for the features the OS
/// enabled in XCR0.
pub fn xsave_size() -> usize {
    std::arch::x86_64::__cpuid_count(0xd, 0).ebx as usize
}

/// The OS-enabled xsave features (XCR0).
pub fn xcr0() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: xgetbv with ecx=0 reads XCR0; callers check OSXSAVE first.
    unsafe { std::arch::asm!("xgetbv", in("ecx") 0, out("eax") lo, out("edx") hi, options(nomem, nostack)) };
    (hi as u64) << 32 | lo as u64
}

/// The CPU's family (CPUID leaf 1, with the extended family added when
/// the base one is 0xf, as the SDM and AMD's APM define it).
pub fn family() -> u32 {
    let eax = __cpuid(1).eax;
    let base = (eax >> 8) & 0xf;
    if base == 0xf {
        base + ((eax >> 20) & 0xff)
    } else {
        base
    }
}

/// Whether the CPU is AMD's (or Hygon's, the same design).
pub fn is_amd() -> bool {
    let v = __cpuid(0);
    let vendor: Vec<u8> = [v.ebx, v.edx, v.ecx].iter().flat_map(|r| r.to_le_bytes()).collect();
    vendor == b"AuthenticAMD" || vendor == b"HygonGenuine"
}
