//! The Linux x86-64 ABI in one place, for host/, entry/, mm/ and kernel/
//! alike: errno (errno.rs), the structures that cross the guest boundary,
//! signal codes, RFLAGS bits and the xsave image's layout.

pub mod errno;

/// RFLAGS bits nomu reads or changes.
pub mod rflags {
    /// Trap flag (single-step).
    pub const TF: u64 = 1 << 8;
    /// Interrupt enable: always set in user mode.
    pub const IF: u64 = 1 << 9;
    /// Direction flag.
    pub const DF: u64 = 1 << 10;
    /// Nested task: iretq faults with it set.
    pub const NT: u64 = 1 << 14;
    /// Resume flag.
    pub const RF: u64 = 1 << 16;
    /// Alignment check (any program may set it).
    pub const AC: u64 = 1 << 18;
    /// CPUID available.
    pub const ID: u64 = 1 << 21;
}

/// The xsave image as the host saves it in a signal frame: the 512-byte
/// legacy (fxsave) area, whose software-reserved bytes say how big the
/// whole image is, then the 64-byte xsave header, then the components.
pub mod xsave {
    /// MXCSR and its mask, in the legacy area.
    pub const MXCSR: usize = 24;
    pub const MXCSR_MASK: usize = 28;
    /// The software-reserved bytes (struct _fpx_sw_bytes) of the legacy area.
    pub const SW_RESERVED: usize = 464;
    /// The xsave header; its first 8 bytes are XSTATE_BV.
    pub const HEADER: usize = 512;
    pub const XSTATE_BV: usize = HEADER;
    /// The first byte after the header.
    pub const COMPONENTS: usize = HEADER + 64;
    /// In the software-reserved bytes: an extended (xsave) image follows.
    pub const FP_XSTATE_MAGIC1: u32 = 0x4650_5853;
    /// The image's last 4 bytes.
    pub const FP_XSTATE_MAGIC2: u32 = 0x4650_5845;
}

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

/// sa_flags: `restorer` is the handler's return address (rt_sigreturn).
pub const SA_RESTORER: u64 = 0x0400_0000;

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

/// struct flock (the same as flock64 on x86-64): a record lock's
/// description for fcntl's F_GETLK/F_SETLK(W) and the OFD commands.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct Flock {
    pub l_type: i16,
    pub l_whence: i16,
    pub pad: u32,
    pub l_start: i64,
    pub l_len: i64,
    pub l_pid: i32,
    pub pad2: u32,
}

/// si_code of a signal the kernel itself sends.
pub const SI_KERNEL: i32 = 0x80;

/// SIGCHLD's si_code (and waitid's): how the child changed.
pub const CLD_EXITED: i32 = 1;
pub const CLD_KILLED: i32 = 2;
pub const CLD_DUMPED: i32 = 3;
pub const CLD_STOPPED: i32 = 5;
pub const CLD_CONTINUED: i32 = 6;
