//! Everything that talks to the host kernel or the CPU directly.
//!
//! This is one of the two places where nomu uses `unsafe` (the other is
//! `entry`, the guest entry paths). Each function here exposes a safe API:
//! guest memory is only ever handed to the host as a [`physmem::GuestRange`],
//! which is checked to lie inside nomu's physical memory, so a guest pointer
//! can never make the host write into nomu's own memory.

/// Asm that refills the return-stack predictor with harmless entries: 32
/// calls, each over an `int3` (the fill Linux uses for its own return-stack
/// mitigations), then the stack pointer put back. A `ret` whose entry was
/// overwritten is then mispredicted onto an `int3`, where speculation
/// stops, instead of into whatever filled the predictor last: nomu's code
/// after a way back to guest code, or the host kernel's after a host call.
/// Only where [`FILL_AFTER_HOST_CALLS`] (`$flag`) says so (see there).
/// Clobbers r11, the arithmetic flags and the 256 bytes below the stack
/// pointer.
macro_rules! fill_return_stack {
    ($flag:literal) => {
        concat!(
            "    cmp byte ptr [rip + ",
            $flag,
            "], 0\n",
            "    je 93f\n",
            "    mov r11d, 16\n",
            "90: call 91f\n",
            "    int3\n",
            "91: call 92f\n",
            "    int3\n",
            "92: dec r11d\n",
            "    jnz 90b\n",
            "    add rsp, 256\n",
            "93:\n",
        )
    };
}
pub(crate) use fill_return_stack;

/// Whether the return-stack refill runs after host calls on a guest's
/// path (`nomu_fill_after_host_call`: host::syscall, host::blocking) and
/// on the seccomp way back to guest code (`nomu_fill_before_guest`): 1 or
/// 0, read by the asm of [`fill_return_stack`], set by
/// [`init_return_stack_fill`] before any guest runs.
#[no_mangle]
static nomu_fill_after_host_call: AtomicU8 = AtomicU8::new(1);
#[no_mangle]
static nomu_fill_before_guest: AtomicU8 = AtomicU8::new(1);

/// Whether host calls go through the stub that refills the return-stack
/// predictor after them ([`fill_return_stack`]); else they are made inline
/// (host::syscall), which saves a `ret`: see there.
#[inline]
pub fn return_stack_fill_after_host_call() -> bool {
    nomu_fill_after_host_call.load(Ordering::Relaxed) != 0
}

/// The refills pay only against AMD's Speculative Return Stack Overflow
/// mitigation "Safe RET" on families 17h to 19h (Zen 1 to 4; Hygon's 18h
/// is Zen 1's core), so they run only there: not on Zen 5 (1Ah), where it
/// was measured to cost, nor on Intel.
///
/// On the AMD EPYC VM with host mitigations "Retpolines + RSB filling" and
/// SRSO "Safe RET", a `ret` after a host call, predicted from what the
/// host kernel left, cost about 300 ns: the refill made a guest fstat of a
/// regular file 310 ns faster and open + close 990 ns (host::syscall), and
/// a trapped syscall's way back 280 ns (host_signals). On the Intel Xeon VM
/// (Retpolines, RSB filling on context switch only, no SRSO) the kernel's
/// returns are balanced and leave nomu's entries in place, so the refill
/// only turned correctly predicted returns into mispredictions: without
/// it, same binary, same run, zpoline fstat 307 -> 250 ns, open + close 996
/// -> 830, pipe round trip 2646 -> 2449, and on the seccomp path (way back
/// too) signal delivery 2166 -> 2038, open + close 2369 -> 2094. The same
/// AMD VM on a later kernel (retbleed "untrained return thunk", SRSO
/// "SMT disabled", no Safe RET) is like the Intel one: without the refill
/// zpoline fstat 752 -> 632 ns, stat 1842 -> 1731, open + close 3099 ->
/// 2763, pipe round trip 7147 -> 6706; seccomp fstat 2570 -> 2380. An AMD
/// EPYC VM of family 1Ah (Zen 5) whose host reports "Safe RET, no
/// microcode" loses by it too: without the refill, alternating runs,
/// rewrite fstat 498-511 -> 482-484 ns, stat 1198-1209 -> 1154-1169,
/// open and close 2393-2414 -> 2319-2327; seccomp fstat 1978-1998 ->
/// 1893-1923, open and close 5377-5403 -> 5252-5298. An AMD EPYC VM of
/// family 19h model 11h (Zen 4) reporting "Safe RET, no microcode" gains
/// by it, as family 17h did: with the refill, alternating runs, rewrite
/// fstat 562-587 -> 476-479 ns, stat 1311-1321 -> 1111-1116, open + close
/// 2746-2774 -> 2219-2226, pipe round trip 6294-6759 -> 5413-5455; seccomp
/// (one bench run each) fstat 2425 -> 1962, open + close 6707 -> 5369.
pub fn init_return_stack_fill() {
    let fill = cpu::is_amd() && matches!(cpu::family(), 0x17..=0x19) && srso_safe_ret();
    nomu_fill_after_host_call.store(fill as u8, Ordering::Relaxed);
    nomu_fill_before_guest.store(fill as u8, Ordering::Relaxed);
}

/// Whether the host mitigates SRSO with "Safe RET" (its every `ret` goes
/// through a thunk that leaves the return-stack predictor to be refilled).
fn srso_safe_ret() -> bool {
    std::fs::read_to_string("/sys/devices/system/cpu/vulnerabilities/spec_rstack_overflow")
        .is_ok_and(|s| s.contains("Safe RET"))
}

pub mod blocking;
pub mod cpu;
pub mod events;
pub mod front;
pub mod fs;
pub mod mermap;
pub mod net;
pub mod physmem;
pub mod pod;
pub mod safecopy;
pub mod sys;
pub mod syscall;
pub mod terminal_agent;

use crate::abi::errno::Errno;
use std::sync::atomic::{AtomicU8, Ordering};

/// The errno of the last failed libc call on this thread.
pub fn last_errno() -> Errno {
    Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
}

/// Turns a libc-style return value (-1 and errno on failure) into a Result.
pub fn check(ret: libc::c_long) -> Result<usize, Errno> {
    if ret < 0 {
        Err(last_errno())
    } else {
        Ok(ret as usize)
    }
}
