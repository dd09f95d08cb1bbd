//! Typed syscall arguments. Each type says which part of its register Linux
//! reads (an `int` or `unsigned int` parameter is the low 32 bits, whatever
//! the caller left in the upper half; a `long`, `size_t` or pointer is all
//! 64) and how `--trace` shows it. The table's `sys!` entries decode every
//! handler's arguments with these types, so the trace line and the handler
//! always read the same value.
//!
//! Each parameter's type is its C type in Linux's SYSCALL_DEFINE for that
//! call, or what Linux narrows it to before use (a descriptor is always an
//! `unsigned int` by the time a file is looked up).

use super::table::Arg;

/// One syscall parameter, as Linux reads it from its register.
pub trait SysArg: Sized {
    /// How `--trace` shows it.
    const TRACE: Arg;
    fn decode(raw: u64) -> Self;
}

/// A file descriptor: `int fd` or `unsigned int fd` alike, the low 32 bits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Fd(pub i32);

/// The directory a *at call resolves a relative path from: a descriptor,
/// or AT_FDCWD (`int dfd`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct DirFd(pub i32);

impl DirFd {
    pub const CWD: DirFd = DirFd(libc::AT_FDCWD);

    /// The descriptor itself (AT_EMPTY_PATH and futimens act on it).
    pub fn fd(self) -> Fd {
        Fd(self.0)
    }
}

/// A guest address the call reads or writes through (all 64 bits).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct UserPtr(pub u64);

/// A guest pointer to a NUL-terminated path.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Path(pub u64);

impl Path {
    pub fn is_null(self) -> bool {
        self.0 == 0
    }
}

/// A buffer the call fills: `--trace` shows what it got (as many bytes as
/// the call returns).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct OutBuf(pub u64);

/// A buffer the call reads, whose length is argument number `LEN`:
/// `--trace` shows its start.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct InBuf<const LEN: usize>(pub u64);

/// O_* flags (`int flags`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct OpenFlags(pub i32);

/// AT_* flags (`int flags`; statx's `unsigned flags`, the same bits).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AtFlags(pub i32);

/// A file mode: a `umode_t`, of which Linux keeps 16 bits (umask's `int`
/// keeps only its 0777 bits).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Mode(pub u32);

/// mmap's and mprotect's PROT_* bits: an `unsigned long`, so a bit in the
/// upper half is an unknown bit, not one to drop.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Prot(pub u64);

/// mmap's MAP_* flags (`unsigned long`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MapFlags(pub u64);

/// A signal number (`int sig`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Signal(pub i32);

/// A number shown in hex: flags, or a word whose meaning depends on another
/// argument (prctl's, fcntl's, clone's), which the handler interprets as
/// Linux does. `Hex` is an `unsigned long`; `Hex<u32>` and `Hex<i32>` an
/// `unsigned int` and an `int` (the low 32 bits).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Hex<T = u64>(pub T);

/// The low 32 bits: all of an `int` or `unsigned int` parameter.
fn low32(raw: u64) -> u32 {
    raw as u32
}

macro_rules! sys_args {
    ($($ty:ty => $trace:expr, |$raw:ident| $decode:expr;)*) => {
        $(
            impl SysArg for $ty {
                const TRACE: Arg = $trace;
                fn decode($raw: u64) -> Self {
                    $decode
                }
            }
        )*
    };
}

sys_args! {
    // int, pid_t, clockid_t
    i32 => Arg::Int, |raw| low32(raw) as i32;
    // unsigned int
    u32 => Arg::Uint, |raw| low32(raw);
    // long, off_t, loff_t
    i64 => Arg::Long, |raw| raw as i64;
    // unsigned long
    u64 => Arg::Ulong, |raw| raw;
    // size_t
    usize => Arg::Ulong, |raw| raw as usize;
    Fd => Arg::Fd, |raw| Fd(low32(raw) as i32);
    DirFd => Arg::DirFd, |raw| DirFd(low32(raw) as i32);
    UserPtr => Arg::Ptr, |raw| UserPtr(raw);
    Path => Arg::Path, |raw| Path(raw);
    OutBuf => Arg::OutBuf, |raw| OutBuf(raw);
    OpenFlags => Arg::OpenFlags, |raw| OpenFlags(low32(raw) as i32);
    AtFlags => Arg::AtFlags, |raw| AtFlags(low32(raw) as i32);
    Mode => Arg::Mode, |raw| Mode(u32::from(raw as u16));
    Prot => Arg::Prot, |raw| Prot(raw);
    MapFlags => Arg::MapFlags, |raw| MapFlags(raw);
    Signal => Arg::Signal, |raw| Signal(low32(raw) as i32);
    Hex => Arg::Hex, |raw| Hex(raw);
    Hex<u32> => Arg::Hex32, |raw| Hex(low32(raw));
    Hex<i32> => Arg::Hex32, |raw| Hex(low32(raw) as i32);
}

impl<const LEN: usize> SysArg for InBuf<LEN> {
    const TRACE: Arg = Arg::InBuf(LEN);
    fn decode(raw: u64) -> Self {
        InBuf(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a caller may leave in the upper half of an `int` argument's register.
    const GARBAGE: u64 = 0xdead_beef_0000_0000;

    #[test]
    fn an_int_is_the_low_half_of_its_register() {
        assert_eq!(i32::decode(GARBAGE | 7), 7);
        assert_eq!(i32::decode(GARBAGE | 0xffff_ffff), -1);
        assert_eq!(u32::decode(GARBAGE | 0xffff_ffff), u32::MAX);
        assert_eq!(Fd::decode(GARBAGE | 3), Fd(3));
        assert_eq!(DirFd::decode(GARBAGE | libc::AT_FDCWD as u32 as u64), DirFd::CWD);
        assert_eq!(Signal::decode(GARBAGE | 9), Signal(9));
        assert_eq!(OpenFlags::decode(GARBAGE | libc::O_CLOEXEC as u64), OpenFlags(libc::O_CLOEXEC));
        assert_eq!(AtFlags::decode(GARBAGE | 0x100), AtFlags(0x100));
        assert_eq!(Hex::<u32>::decode(GARBAGE | 0x5421), Hex(0x5421));
        assert_eq!(Hex::<i32>::decode(GARBAGE | 1), Hex(1));
        assert_eq!(Mode::decode(GARBAGE | 0x1_0000 | 0o755), Mode(0o755));
    }

    #[test]
    fn a_long_a_size_or_a_pointer_is_the_whole_register() {
        assert_eq!(i64::decode(u64::MAX), -1);
        assert_eq!(u64::decode(GARBAGE | 1), GARBAGE | 1);
        assert_eq!(usize::decode(GARBAGE | 1), (GARBAGE | 1) as usize);
        assert_eq!(UserPtr::decode(GARBAGE | 8), UserPtr(GARBAGE | 8));
        assert_eq!(Path::decode(GARBAGE), Path(GARBAGE));
        assert_eq!(Prot::decode(GARBAGE | 1), Prot(GARBAGE | 1));
        assert_eq!(MapFlags::decode(GARBAGE | 2), MapFlags(GARBAGE | 2));
        assert_eq!(Hex::<u64>::decode(GARBAGE), Hex(GARBAGE));
    }
}
