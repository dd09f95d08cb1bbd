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

/// si_code of a signal the kernel itself sends.
pub const SI_KERNEL: i32 = 0x80;

/// SIGCHLD's si_code (and waitid's): how the child changed.
pub const CLD_EXITED: i32 = 1;
pub const CLD_KILLED: i32 = 2;
pub const CLD_DUMPED: i32 = 3;
pub const CLD_STOPPED: i32 = 5;
pub const CLD_CONTINUED: i32 = 6;
