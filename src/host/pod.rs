//! Plain-old-data: types that may be copied to and from raw bytes (guest
//! memory, host structs). Implementing [`Pod`] is the unsafe promise that
//! every bit pattern is a valid value and there is no padding that matters.

/// # Safety
/// Implement only for `repr(C)` types made of integers (and arrays of them)
/// for which every bit pattern is valid.
pub unsafe trait Pod: Copy + 'static {}

macro_rules! pod {
    ($($t:ty),* $(,)?) => { $(
        // SAFETY: integer-only repr(C) types; every bit pattern is valid.
        unsafe impl Pod for $t {}
    )* };
}

pod!(u8, u16, u32, u64, i32, i64, usize, libc::stat, libc::timespec, libc::timeval, libc::utsname);
pod!(libc::sysinfo, libc::rlimit, libc::winsize, libc::tms, libc::rusage, libc::statfs);
pod!(crate::abi::Termios, crate::abi::KernelSigaction, crate::abi::GuestIovec, crate::abi::Flock);

// SAFETY: an array of Pod values is Pod.
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {}

pub fn as_bytes<T: Pod>(v: &T) -> &[u8] {
    // SAFETY: T is Pod, so viewing its bytes is sound.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

pub fn as_bytes_mut<T: Pod>(v: &mut T) -> &mut [u8] {
    // SAFETY: T is Pod, so any bytes written through the view form a valid T.
    unsafe { std::slice::from_raw_parts_mut((v as *mut T).cast::<u8>(), std::mem::size_of::<T>()) }
}

pub fn zeroed<T: Pod>() -> T {
    // SAFETY: T is Pod, so all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}
