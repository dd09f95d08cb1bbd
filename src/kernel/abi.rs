//! Linux x86-64 ABI structures that cross the guest boundary.

/// The kernel's `struct termios` (TCGETS/TCSETS), 36 bytes.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Termios {
    pub iflag: u32,
    pub oflag: u32,
    pub cflag: u32,
    pub lflag: u32,
    pub line: u8,
    pub cc: [u8; 19],
}

/// The kernel's `struct sigaction` as rt_sigaction takes it.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct KernelSigaction {
    pub handler: u64,
    pub flags: u64,
    pub restorer: u64,
    pub mask: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct GuestIovec {
    pub base: u64,
    pub len: u64,
}
