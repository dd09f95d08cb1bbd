//! Everything that talks to the host kernel or the CPU directly.
//!
//! This is one of the two places where nomu uses `unsafe` (the other is
//! `entry`, the guest entry paths). Each function here exposes a safe API:
//! guest memory is only ever handed to the host as a [`physmem::GuestRange`],
//! which is checked to lie inside nomu's physical memory, so a guest pointer
//! can never make the host write into nomu's own memory.

pub mod blocking;
pub mod cpu;
pub mod fs;
pub mod physmem;
pub mod pod;
pub mod safecopy;
pub mod sys;

use crate::kernel::errno::Errno;

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

/// Like [`check`], retrying while the host call is interrupted by a signal.
pub fn check_retry(mut f: impl FnMut() -> libc::c_long) -> Result<usize, Errno> {
    loop {
        match check(f()) {
            Err(Errno::EINTR) => continue,
            other => return other,
        }
    }
}
