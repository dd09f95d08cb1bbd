//! Host file-system calls, wrapped safe. Paths are already resolved inside
//! the guest root by `fs::path`; guest buffers arrive as [`GuestRange`]s.

use super::physmem::GuestRange;
use super::{check, check_retry};
use crate::kernel::errno::Errno;
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

type R<T> = Result<T, Errno>;

fn owned(fd: usize) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful host call that creates a
    // new descriptor, which nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

pub const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
pub const RESOLVE_IN_ROOT: u64 = 0x10;

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// openat2(2): opens `path` relative to `dirfd` with `resolve` restrictions.
pub fn openat2(dirfd: BorrowedFd, path: &CStr, flags: i32, mode: u32, resolve: u64) -> R<OwnedFd> {
    // open(2) forces O_LARGEFILE on 64-bit hosts and drops the flags O_PATH
    // ignores; openat2 does neither, so do it here.
    // It also refuses flags it does not know and a mode without O_CREAT,
    // both of which open(2) ignores.
    const KNOWN: i32 = libc::O_ACCMODE
        | libc::O_CREAT
        | libc::O_EXCL
        | libc::O_NOCTTY
        | libc::O_TRUNC
        | libc::O_APPEND
        | libc::O_NONBLOCK
        | libc::O_DSYNC
        | libc::O_ASYNC
        | libc::O_DIRECT
        | libc::O_LARGEFILE
        | libc::O_DIRECTORY
        | libc::O_NOFOLLOW
        | libc::O_NOATIME
        | libc::O_CLOEXEC
        | libc::O_SYNC
        | libc::O_PATH
        | libc::O_TMPFILE;
    let flags = if flags & libc::O_PATH != 0 {
        flags & (libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
    } else {
        (flags & KNOWN) | libc::O_LARGEFILE
    };
    let mode = if flags & libc::O_CREAT != 0 || flags & libc::O_TMPFILE == libc::O_TMPFILE { mode } else { 0 };
    let how = OpenHow { flags: (flags | libc::O_CLOEXEC) as u32 as u64, mode: mode as u64, resolve };
    // SAFETY: path is NUL-terminated and `how` outlives the call.
    let fd = check_retry(|| unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd.as_raw_fd(),
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    })?;
    Ok(owned(fd))
}

/// Opens a host path directly (for nomu's own use: the root, host devices).
pub fn open_host(path: &CStr, flags: i32) -> R<OwnedFd> {
    // SAFETY: NUL-terminated path.
    let fd = check_retry(|| unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) } as libc::c_long)?;
    Ok(owned(fd))
}

/// Duplicates a descriptor to a new host descriptor (close-on-exec on the host).
pub fn dup(fd: BorrowedFd) -> R<OwnedFd> {
    // SAFETY: fcntl F_DUPFD_CLOEXEC on a valid descriptor.
    let fd = check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) } as libc::c_long)?;
    Ok(owned(fd))
}

pub fn fstatat(dirfd: BorrowedFd, path: &CStr, flags: i32) -> R<libc::stat> {
    // SAFETY: an all-zero stat is a valid value for the kernel to overwrite.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid path and output buffer.
    check(unsafe { libc::fstatat(dirfd.as_raw_fd(), path.as_ptr(), &mut st, flags) } as libc::c_long)?;
    Ok(st)
}

pub fn fstat(fd: BorrowedFd) -> R<libc::stat> {
    // SAFETY: an all-zero stat is a valid value for the kernel to overwrite.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid output buffer. (The raw call: glibc's fstat is fstatat
    // with an empty path, which costs the host a path lookup.)
    check(unsafe { libc::syscall(libc::SYS_fstat, fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

/// fstat(2) written straight into guest memory: a guest's struct stat is
/// the host's.
pub fn fstat_into(fd: BorrowedFd, out: GuestRange) -> R<()> {
    assert!(out.len() >= std::mem::size_of::<libc::stat>());
    // SAFETY: `out` lies inside physical memory and is large enough; the
    // host reports EFAULT itself for pages the guest protected.
    check(unsafe { libc::syscall(libc::SYS_fstat, fd.as_raw_fd(), out.ptr()) }).map(drop)
}

/// fstatat(2) straight into guest memory, as [`fstat_into`].
pub fn fstatat_into(dirfd: BorrowedFd, path: &CStr, flags: i32, out: GuestRange) -> R<()> {
    assert!(out.len() >= std::mem::size_of::<libc::stat>());
    // SAFETY: as for fstat_into; `path` is a valid C string.
    check(unsafe { libc::syscall(libc::SYS_newfstatat, dirfd.as_raw_fd(), path.as_ptr(), out.ptr(), flags) }).map(drop)
}

/// statx(2) into a raw 256-byte struct statx.
pub fn statx(dirfd: BorrowedFd, path: &CStr, flags: i32, mask: u32) -> R<[u8; 256]> {
    let mut buf = [0u8; 256];
    // SAFETY: valid path; buf is the size of struct statx.
    check(unsafe { libc::syscall(libc::SYS_statx, dirfd.as_raw_fd(), path.as_ptr(), flags, mask, buf.as_mut_ptr()) })?;
    Ok(buf)
}

pub fn mkdirat(dirfd: BorrowedFd, name: &CStr, mode: u32) -> R<()> {
    // SAFETY: valid path.
    check(unsafe { libc::mkdirat(dirfd.as_raw_fd(), name.as_ptr(), mode) } as libc::c_long).map(drop)
}

pub fn unlinkat(dirfd: BorrowedFd, name: &CStr, flags: i32) -> R<()> {
    // SAFETY: valid path.
    check(unsafe { libc::unlinkat(dirfd.as_raw_fd(), name.as_ptr(), flags) } as libc::c_long).map(drop)
}

pub fn renameat2(olddir: BorrowedFd, old: &CStr, newdir: BorrowedFd, new: &CStr, flags: u32) -> R<()> {
    // SAFETY: valid paths.
    check(unsafe {
        libc::syscall(libc::SYS_renameat2, olddir.as_raw_fd(), old.as_ptr(), newdir.as_raw_fd(), new.as_ptr(), flags)
    })
    .map(drop)
}

pub fn readlinkat(dirfd: BorrowedFd, name: &CStr) -> R<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: valid path and buffer of the stated size.
    let n = check(unsafe { libc::readlinkat(dirfd.as_raw_fd(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) }
        as libc::c_long)?;
    buf.truncate(n);
    Ok(buf)
}

pub fn symlinkat(target: &CStr, dirfd: BorrowedFd, name: &CStr) -> R<()> {
    // SAFETY: valid paths.
    check(unsafe { libc::symlinkat(target.as_ptr(), dirfd.as_raw_fd(), name.as_ptr()) } as libc::c_long).map(drop)
}

pub fn linkat(olddir: BorrowedFd, old: &CStr, newdir: BorrowedFd, new: &CStr, flags: i32) -> R<()> {
    // SAFETY: valid paths.
    check(unsafe { libc::linkat(olddir.as_raw_fd(), old.as_ptr(), newdir.as_raw_fd(), new.as_ptr(), flags) }
        as libc::c_long)
    .map(drop)
}

pub fn fchmodat(dirfd: BorrowedFd, name: &CStr, mode: u32) -> R<()> {
    // SAFETY: valid path.
    check(unsafe { libc::fchmodat(dirfd.as_raw_fd(), name.as_ptr(), mode, 0) } as libc::c_long).map(drop)
}

pub fn fchmod(fd: BorrowedFd, mode: u32) -> R<()> {
    // SAFETY: plain descriptor call.
    check(unsafe { libc::fchmod(fd.as_raw_fd(), mode) } as libc::c_long).map(drop)
}

pub fn faccessat(dirfd: BorrowedFd, name: &CStr, mode: i32, flags: i32) -> R<()> {
    // SAFETY: valid path; faccessat2 takes the flags the old call ignored.
    check(unsafe { libc::syscall(libc::SYS_faccessat2, dirfd.as_raw_fd(), name.as_ptr(), mode, flags) }).map(drop)
}

pub fn read(fd: BorrowedFd, buf: GuestRange) -> R<usize> {
    // SAFETY: buf lies inside physical memory; the host reports EFAULT itself
    // for pages the guest protected.
    check_retry(|| unsafe { libc::read(fd.as_raw_fd(), buf.ptr(), buf.len()) } as libc::c_long)
}

pub fn pread(fd: BorrowedFd, buf: GuestRange, off: i64) -> R<usize> {
    // SAFETY: as for read.
    check_retry(|| unsafe { libc::pread(fd.as_raw_fd(), buf.ptr(), buf.len(), off) } as libc::c_long)
}

pub fn pwrite(fd: BorrowedFd, buf: GuestRange, off: i64) -> R<usize> {
    // SAFETY: as for write.
    check_retry(|| unsafe { libc::pwrite(fd.as_raw_fd(), buf.ptr(), buf.len(), off) } as libc::c_long)
}

fn iovecs(bufs: &[GuestRange]) -> Vec<libc::iovec> {
    bufs.iter().map(|b| libc::iovec { iov_base: b.ptr(), iov_len: b.len() }).collect()
}

pub fn readv(fd: BorrowedFd, bufs: &[GuestRange]) -> R<usize> {
    let iov = iovecs(bufs);
    // SAFETY: every iovec is a checked range inside physical memory.
    check_retry(|| unsafe { libc::readv(fd.as_raw_fd(), iov.as_ptr(), iov.len() as i32) } as libc::c_long)
}

pub fn writev(fd: BorrowedFd, bufs: &[GuestRange]) -> R<usize> {
    let iov = iovecs(bufs);
    // SAFETY: as for readv; the host only reads.
    check_retry(|| unsafe { libc::writev(fd.as_raw_fd(), iov.as_ptr(), iov.len() as i32) } as libc::c_long)
}

/// read(v) that may block as long as it needs to, yet ends with EINTR once
/// this guest thread is kicked (see host::blocking).
pub fn readv_interruptible(fd: BorrowedFd, bufs: &[GuestRange]) -> R<usize> {
    rw_interruptible(libc::SYS_read, libc::SYS_readv, fd, bufs)
}

/// write(v) that may block, ended the same way; a kick after some bytes
/// went gives their count, as the host's own write does.
pub fn writev_interruptible(fd: BorrowedFd, bufs: &[GuestRange]) -> R<usize> {
    rw_interruptible(libc::SYS_write, libc::SYS_writev, fd, bufs)
}

fn rw_interruptible(one: libc::c_long, many: libc::c_long, fd: BorrowedFd, bufs: &[GuestRange]) -> R<usize> {
    let fd = fd.as_raw_fd() as u64;
    let ret = if let [b] = bufs {
        // SAFETY: a checked range inside physical memory.
        unsafe { super::blocking::syscall(one, [fd, b.ptr() as u64, b.len() as u64, 0, 0, 0]) }
    } else {
        let iov = iovecs(bufs);
        // SAFETY: every iovec is a checked range inside physical memory.
        unsafe { super::blocking::syscall(many, [fd, iov.as_ptr() as u64, iov.len() as u64, 0, 0, 0]) }
    };
    check(ret)
}

/// pread into a nomu buffer (the loader reads headers this way).
pub fn pread_local(fd: BorrowedFd, buf: &mut [u8], off: u64) -> R<usize> {
    // SAFETY: buf is a valid nomu buffer of buf.len() bytes.
    check_retry(
        || unsafe { libc::pread(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), off as i64) } as libc::c_long
    )
}

pub fn lseek(fd: BorrowedFd, off: i64, whence: i32) -> R<u64> {
    // SAFETY: plain descriptor call.
    check(unsafe { libc::lseek(fd.as_raw_fd(), off, whence) }).map(|v| v as u64)
}

pub fn ftruncate(fd: BorrowedFd, len: i64) -> R<()> {
    // SAFETY: plain descriptor call.
    check(unsafe { libc::ftruncate(fd.as_raw_fd(), len) } as libc::c_long).map(drop)
}

pub fn fsync(fd: BorrowedFd, data_only: bool) -> R<()> {
    // SAFETY: plain descriptor calls.
    let r = unsafe {
        if data_only {
            libc::fdatasync(fd.as_raw_fd())
        } else {
            libc::fsync(fd.as_raw_fd())
        }
    };
    check(r as libc::c_long).map(drop)
}

/// The type of the filesystem `fd` lives on (statfs's f_type).
pub fn fs_type(fd: BorrowedFd) -> R<i64> {
    // SAFETY: an all-zero statfs is a valid value for the kernel to overwrite.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid output buffer.
    check(unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) } as libc::c_long)?;
    Ok(st.f_type as i64)
}

pub fn getfl(fd: BorrowedFd) -> R<i32> {
    // SAFETY: plain descriptor call.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) } as libc::c_long).map(|v| v as i32)
}

pub fn setfl(fd: BorrowedFd, flags: i32) -> R<()> {
    // SAFETY: plain descriptor call.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) } as libc::c_long).map(drop)
}

pub fn getdents64(fd: BorrowedFd, buf: GuestRange) -> R<usize> {
    // SAFETY: buf lies inside physical memory.
    check_retry(|| unsafe { libc::syscall(libc::SYS_getdents64, fd.as_raw_fd(), buf.ptr(), buf.len()) })
}

/// A terminal ioctl whose argument is a plain struct of `arg.len()` bytes
/// (or an integer, when `arg` is None and `value` carries it).
pub fn ioctl(fd: BorrowedFd, request: u64, arg: Option<&mut [u8]>, value: u64) -> R<usize> {
    let argp = match arg {
        Some(buf) => buf.as_mut_ptr() as u64,
        None => value,
    };
    // SAFETY: callers pass only requests whose argument is `arg` (a nomu
    // buffer of the size the request uses) or a plain integer.
    check(unsafe { libc::syscall(libc::SYS_ioctl, fd.as_raw_fd(), request, argp) })
}

pub fn pipe2(flags: i32) -> R<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds has room for two descriptors.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), flags | libc::O_CLOEXEC) } as libc::c_long)?;
    Ok((owned(fds[0] as usize), owned(fds[1] as usize)))
}

/// The host path of an open descriptor (via /proc/self/fd).
pub fn fd_path(fd: BorrowedFd) -> R<Vec<u8>> {
    let link = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: valid path and buffer.
    let n = check(unsafe { libc::readlink(link.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) } as libc::c_long)?;
    buf.truncate(n);
    Ok(buf)
}

pub fn isatty(fd: BorrowedFd) -> bool {
    // SAFETY: plain descriptor call.
    unsafe { libc::isatty(fd.as_raw_fd()) == 1 }
}

/// Duplicates one of nomu's own inherited descriptors (0, 1, 2) by number.
pub fn dup_raw(fd: RawFd) -> R<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC only reads the descriptor number; if it is not
    // open the host says EBADF.
    let new = check(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) } as libc::c_long)?;
    Ok(owned(new))
}

/// fcntl with a plain integer argument.
pub fn fcntl_int(fd: BorrowedFd, cmd: i32, arg: i32) -> R<i32> {
    // SAFETY: callers pass only commands whose argument is an integer.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), cmd, arg) } as libc::c_long).map(|v| v as i32)
}

/// AT_FDCWD as a borrowed descriptor, for calls on /proc/self/fd paths.
pub fn cwd() -> BorrowedFd<'static> {
    // SAFETY: AT_FDCWD is a sentinel the host accepts wherever a directory
    // descriptor is expected; it is never closed.
    unsafe { BorrowedFd::borrow_raw(libc::AT_FDCWD) }
}

/// utimensat(2); `name` None acts on `dirfd` itself.
pub fn utimensat(dirfd: BorrowedFd, name: Option<&CStr>, times: Option<&[libc::timespec; 2]>, flags: i32) -> R<()> {
    let path = name.map_or(std::ptr::null(), |n| n.as_ptr());
    let times = times.map_or(std::ptr::null(), |t| t.as_ptr());
    // SAFETY: path is null or NUL-terminated; times is null or two timespecs.
    check(unsafe { libc::syscall(libc::SYS_utimensat, dirfd.as_raw_fd(), path, times, flags) }).map(drop)
}

/// sendfile(2) between two host descriptors; `offset` is read and updated
/// when given.
pub fn sendfile(out: BorrowedFd, input: BorrowedFd, offset: Option<&mut i64>, count: usize) -> R<usize> {
    let off = offset.map_or(std::ptr::null_mut(), |o| o as *mut i64);
    // SAFETY: off is null or a valid i64.
    check_retry(|| unsafe { libc::sendfile(out.as_raw_fd(), input.as_raw_fd(), off, count) } as libc::c_long)
}

/// A read-only-in-spirit anonymous file holding `content` (nomu's /proc
/// files), positioned at its start.
pub fn memfd_with(content: &[u8]) -> R<OwnedFd> {
    // SAFETY: a NUL-terminated name; the result is a new descriptor.
    let fd = owned(check(unsafe { libc::memfd_create(c"nomu-proc".as_ptr(), libc::MFD_CLOEXEC) } as libc::c_long)?);
    let mut done = 0;
    while done < content.len() {
        // SAFETY: writing from a valid buffer to our own memfd.
        done += check(unsafe { libc::write(fd.as_raw_fd(), content[done..].as_ptr().cast(), content.len() - done) }
            as libc::c_long)?;
    }
    lseek(fd.as_fd(), 0, libc::SEEK_SET)?;
    Ok(fd)
}
