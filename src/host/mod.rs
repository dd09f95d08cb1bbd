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
/// Clobbers r11 and the 256 bytes below the stack pointer.
macro_rules! fill_return_stack {
    () => {
        concat!(
            "    mov r11d, 16\n",
            "90: call 91f\n",
            "    int3\n",
            "91: call 92f\n",
            "    int3\n",
            "92: dec r11d\n",
            "    jnz 90b\n",
            "    add rsp, 256\n",
        )
    };
}
pub(crate) use fill_return_stack;

pub mod blocking;
pub mod cpu;
pub mod events;
pub mod fs;
pub mod mermap;
pub mod net;
pub mod physmem;
pub mod pod;
pub mod safecopy;
pub mod sys;
pub mod syscall;

use crate::abi::errno::Errno;

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
