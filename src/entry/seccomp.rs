//! The seccomp entry path: guest code runs directly on the host thread, and
//! a seccomp filter turns every syscall whose instruction pointer lies in
//! guest memory into SIGSYS, handled in the same host process by the host
//! signal handler every path installs ([`host_signals`]), which also
//! enters, resumes and leaves guest code for this path and for zpoline.
//!
//! What is this path's own: the filter (a range check on the instruction
//! pointer: guest memory traps, nomu's own code is allowed; any syscall of
//! another ABI traps), and running a guest thread with the guest's own gs
//! base. Where the host has syscall user dispatch ([`super::dispatch`]),
//! dispatch does the range check instead, on each host thread that runs
//! guest code, and the filter keeps only the ABI check, which the host
//! caches: nomu's own host calls then pay almost nothing for it.

use super::kstack::ThreadKernelStack;
use super::{host_signals, EntryPath, GuestKernel, StartState};
use crate::host::last_errno;
use crate::host::physmem::{PhysMem, PAGE_SIZE};

pub struct SeccompEntry;

/// Whether this host lets a process install a seccomp filter that traps.
pub fn available() -> Result<(), String> {
    let actions = std::fs::read_to_string("/proc/sys/kernel/seccomp/actions_avail")
        .map_err(|e| format!("no seccomp filters in this kernel ({e})"))?;
    if !actions.split_whitespace().any(|a| a == "trap") {
        return Err("the kernel's seccomp has no SECCOMP_RET_TRAP".into());
    }
    if !crate::host::cpu::has_xsave() {
        return Err("it returns to guest code with xrstor, and this CPU or kernel has no XSAVE".into());
    }
    Ok(())
}

impl SeccompEntry {
    /// Installs the process-wide filter. Must run once, after
    /// [`host_signals::install`] and before any guest thread starts; the
    /// filter cannot be removed. Every path installs it: zpoline finds the
    /// sites it rewrites through it, and the split path's guest processes
    /// (CLONE_VM children, which inherit it) hand their syscalls over from
    /// its SIGSYS. A sysemu tracee never reaches it: PTRACE_SYSEMU skips the
    /// call before seccomp runs.
    pub fn install(physmem: &PhysMem) -> Result<SeccompEntry, String> {
        let (lo, hi) = (physmem.base() as u64, physmem.end() as u64);
        let dispatch = uses_dispatch(hi);
        install_filter(&filter_program(lo, hi, dispatch)).map_err(|e| format!("installing the seccomp filter: {e}"))?;
        if dispatch {
            super::dispatch::use_from(hi);
        }
        Ok(SeccompEntry)
    }
}

#[repr(C)]
struct SockFilter {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

#[repr(C)]
struct SockFprog {
    len: u16,
    filter: *const SockFilter,
}

/// Whether guest syscalls are caught with syscall user dispatch (each host
/// thread's, [`super::dispatch`]) when guest memory ends at `hi`: the host
/// has it and all of nomu's code lies above guest memory.
fn uses_dispatch(hi: u64) -> bool {
    super::dispatch::available() && super::dispatch::code_above(hi)
}

/// The filter: traps every syscall of another ABI than x86-64's, wherever
/// it comes from, and, unless syscall user dispatch catches them
/// (`dispatch`), every syscall whose instruction pointer lies in [lo, hi),
/// guest memory, or in page 0 (a forked child's zpoline page 0, whose
/// `syscall` is a guest's: zpoline::forked_trampoline_trap); allows the
/// rest (nomu's own code). The ABI check is not
/// redundant: an Intel CPU's `sysenter` enters the host's i386 syscall path
/// with the instruction pointer already set to a landing pad outside guest
/// memory, so the range check alone (or dispatch) would let a guest's i386
/// syscall run on the host, past nomu's root (tests/nomu/i386_entry.c).
/// nomu itself makes none. The ABI check alone is a filter the host caches:
/// it never runs for x86-64 syscalls (see dispatch.rs for what each costs).
fn filter_program(lo: u64, hi: u64, dispatch: bool) -> Vec<SockFilter> {
    const LD_ABS: u16 = 0x20;
    const JEQ: u16 = 0x15;
    const JGT: u16 = 0x25;
    const JGE: u16 = 0x35;
    const RET: u16 = 0x06;
    const RET_TRAP: u32 = 0x0003_0000;
    const RET_ALLOW: u32 = 0x7fff_0000;
    const ARCH: u32 = 4; // offsetof(struct seccomp_data, arch)
    const IP_LO: u32 = 8; // offsetof(struct seccomp_data, instruction_pointer)
    const IP_HI: u32 = 12;
    let f = |code, jt, jf, k| SockFilter { code, jt, jf, k };
    let (lo_hi, lo_lo) = ((lo >> 32) as u32, lo as u32);
    let (hi_hi, hi_lo) = ((hi >> 32) as u32, hi as u32);
    if dispatch {
        return vec![
            f(LD_ABS, 0, 0, ARCH),
            f(JEQ, 1, 0, super::AUDIT_ARCH_X86_64), // x86-64 -> ALLOW
            f(RET, 0, 0, RET_TRAP),
            f(RET, 0, 0, RET_ALLOW),
        ];
    }
    // Jump offsets count from the next instruction; see the labels at right.
    vec![
        f(LD_ABS, 0, 0, ARCH),                   // 0
        f(JEQ, 0, 14, super::AUDIT_ARCH_X86_64), // 1: another ABI -> TRAP
        f(LD_ABS, 0, 0, IP_HI),                  // 2
        f(JEQ, 0, 2, 0),                         // 3: ip_hi != 0 -> 6
        f(LD_ABS, 0, 0, IP_LO),                  // 4
        f(JGE, 0, 10, PAGE_SIZE as u32),         // 5: ip in page 0 -> TRAP
        f(LD_ABS, 0, 0, IP_HI),                  // 6
        f(JGT, 3, 0, lo_hi),                     // 7: ip_hi > lo_hi -> 11
        f(JEQ, 0, 8, lo_hi),                     // 8: else unless equal -> ALLOW
        f(LD_ABS, 0, 0, IP_LO),                  // 9
        f(JGE, 0, 6, lo_lo),                     // 10: ip_lo < lo_lo -> ALLOW
        f(LD_ABS, 0, 0, IP_HI),                  // 11: ip >= lo
        f(JGT, 4, 0, hi_hi),                     // 12: ip_hi > hi_hi -> ALLOW
        f(JEQ, 0, 2, hi_hi),                     // 13: ip_hi < hi_hi -> TRAP
        f(LD_ABS, 0, 0, IP_LO),                  // 14
        f(JGE, 1, 0, hi_lo),                     // 15: ip_lo >= hi_lo -> ALLOW
        f(RET, 0, 0, RET_TRAP),                  // 16
        f(RET, 0, 0, RET_ALLOW),                 // 17
    ]
}

/// What nomu installs when its guest memory is [lo, hi): its filter as hex
/// (struct sock_filter's bytes, 16 digits an instruction) and, when it
/// catches guest syscalls with syscall user dispatch, where the allowed
/// range starts: what `nomu bench` hands the benchmark, which measures
/// host-backed operations natively under both (the floor of nomu's
/// in-process paths).
pub fn interception_for_bench(lo: u64, hi: u64) -> (String, Option<u64>) {
    let dispatch = uses_dispatch(hi);
    (filter_hex(&filter_program(lo, hi, dispatch)), dispatch.then_some(hi))
}

fn filter_hex(prog: &[SockFilter]) -> String {
    prog.iter()
        .flat_map(|i| {
            let mut b = [0u8; 8];
            b[0..2].copy_from_slice(&i.code.to_ne_bytes());
            b[2] = i.jt;
            b[3] = i.jf;
            b[4..8].copy_from_slice(&i.k.to_ne_bytes());
            b
        })
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Installs `prog` on every thread.
fn install_filter(prog: &[SockFilter]) -> Result<(), crate::abi::errno::Errno> {
    let fprog = SockFprog { len: prog.len() as u16, filter: prog.as_ptr() };
    // SAFETY: prctl and seccomp with valid arguments; fprog outlives the call.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 {
            return Err(last_errno());
        }
        let tsync = 1u32; // SECCOMP_FILTER_FLAG_TSYNC
        if libc::syscall(libc::SYS_seccomp, 1 /* SET_MODE_FILTER */, tsync, &fprog as *const SockFprog) < 0 {
            return Err(last_errno());
        }
    }
    Ok(())
}

impl EntryPath for SeccompEntry {
    fn name(&self) -> &'static str {
        "seccomp"
    }

    fn interrupt(&self, host_tid: i32) {
        host_signals::kick(host_tid);
    }

    fn runs_nested(&self) -> bool {
        true
    }

    fn run(&self, start: StartState, kernel: &mut dyn GuestKernel) {
        super::dispatch::ensure_on();
        let kstack = ThreadKernelStack::enter();
        // The guest owns this host thread's gs base (nomu never uses %gs).
        let _ = crate::host::sys::set_gs_base(start.gs_base);
        host_signals::run_in_process(&kstack, start, kernel);
        if let Some(outer) = kstack.outer_tcb() {
            // SAFETY: the outer guest thread's Tcb, in a kernel stack still in use.
            let _ = crate::host::sys::set_gs_base(unsafe { (*outer).guest_gs });
        }
    }
}
