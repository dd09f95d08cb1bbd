//! Host file-system calls, wrapped safe. Paths are already resolved inside
//! the guest root by `fs::path`; guest buffers arrive as [`GuestRange`]s.
//!
//! All of them go through [`super::syscall`], as every host call on a
//! guest syscall's path should.

use super::physmem::GuestRange;
use super::syscall::{args, syscall, syscall_retry};
use crate::abi::errno::Errno;
use std::ffi::{CStr, CString};
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};

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
        // O_NOCTTY always: a guest's terminal is never nomu's on the host
        // (kernel::terminal keeps whose it is).
        (flags & KNOWN) | libc::O_LARGEFILE | libc::O_NOCTTY
    };
    let mode = if flags & libc::O_CREAT != 0 || flags & libc::O_TMPFILE == libc::O_TMPFILE { mode } else { 0 };
    let how = OpenHow { flags: (flags | libc::O_CLOEXEC) as u32 as u64, mode: mode as u64, resolve };
    let call = args([raw(dirfd), path.as_ptr() as u64, &how as *const OpenHow as u64, size_of::<OpenHow>() as u64]);
    // SAFETY: path is NUL-terminated and `how` outlives the call.
    let fd = unsafe { syscall_retry(libc::SYS_openat2, call) }?;
    Ok(owned(fd))
}

/// Opens a host path directly (for nomu's own use: the root, host devices).
pub fn open_host(path: &CStr, flags: i32) -> R<OwnedFd> {
    let (dir, flags) = (libc::AT_FDCWD as u64, (flags | libc::O_CLOEXEC | libc::O_NOCTTY) as u64);
    // SAFETY: NUL-terminated path.
    let fd = unsafe { syscall_retry(libc::SYS_openat, args([dir, path.as_ptr() as u64, flags, 0])) }?;
    Ok(owned(fd))
}

/// Duplicates a descriptor to a new host descriptor (close-on-exec on the host).
pub fn dup(fd: BorrowedFd) -> R<OwnedFd> {
    dup_raw(fd.as_raw_fd())
}

/// Closes a descriptor nomu owns (the host's close, not retried: Linux
/// frees the descriptor even when it reports EINTR).
pub fn close(fd: OwnedFd) {
    // SAFETY: we own the descriptor and give it up here.
    let _ = unsafe { syscall(libc::SYS_close, args([fd.into_raw_fd() as u64])) };
}

fn raw(fd: BorrowedFd) -> u64 {
    fd.as_raw_fd() as u64
}

fn zeroed_stat() -> libc::stat {
    // SAFETY: an all-zero stat is a valid value for the kernel to overwrite.
    unsafe { std::mem::zeroed() }
}

pub fn fstatat(dirfd: BorrowedFd, path: &CStr, flags: i32) -> R<libc::stat> {
    let mut st = zeroed_stat();
    let call = args([raw(dirfd), path.as_ptr() as u64, &mut st as *mut libc::stat as u64, flags as u64]);
    // SAFETY: valid path and output buffer.
    unsafe { syscall(libc::SYS_newfstatat, call) }?;
    Ok(st)
}

pub fn fstat(fd: BorrowedFd) -> R<libc::stat> {
    let mut st = zeroed_stat();
    // SAFETY: valid output buffer. (fstat itself: glibc's fstat is fstatat
    // with an empty path, which costs the host a path lookup.)
    unsafe { syscall(libc::SYS_fstat, args([raw(fd), &mut st as *mut libc::stat as u64])) }?;
    Ok(st)
}

/// fstat(2) written straight into guest memory: a guest's struct stat is
/// the host's.
pub fn fstat_into(fd: BorrowedFd, out: GuestRange) -> R<()> {
    assert!(out.len() >= std::mem::size_of::<libc::stat>());
    // SAFETY: `out` lies inside physical memory and is large enough; the
    // host reports EFAULT itself for pages the guest protected.
    unsafe { syscall(libc::SYS_fstat, args([raw(fd), out.ptr() as u64])) }.map(drop)
}

/// fstatat(2) straight into guest memory, as [`fstat_into`].
pub fn fstatat_into(dirfd: BorrowedFd, path: &CStr, flags: i32, out: GuestRange) -> R<()> {
    assert!(out.len() >= std::mem::size_of::<libc::stat>());
    let call = args([raw(dirfd), path.as_ptr() as u64, out.ptr() as u64, flags as u64]);
    // SAFETY: as for fstat_into; `path` is a valid C string.
    unsafe { syscall(libc::SYS_newfstatat, call) }.map(drop)
}

/// statx(2) into a raw 256-byte struct statx.
pub fn statx(dirfd: BorrowedFd, path: &CStr, flags: i32, mask: u32) -> R<[u8; 256]> {
    let mut buf = [0u8; 256];
    let call = args([raw(dirfd), path.as_ptr() as u64, flags as u64, mask as u64, buf.as_mut_ptr() as u64]);
    // SAFETY: valid path; buf is the size of struct statx.
    unsafe { syscall(libc::SYS_statx, call) }?;
    Ok(buf)
}

pub fn mkdirat(dirfd: BorrowedFd, name: &CStr, mode: u32) -> R<()> {
    // SAFETY: valid path.
    unsafe { syscall(libc::SYS_mkdirat, args([raw(dirfd), name.as_ptr() as u64, mode as u64])) }.map(drop)
}

pub fn unlinkat(dirfd: BorrowedFd, name: &CStr, flags: i32) -> R<()> {
    // SAFETY: valid path.
    unsafe { syscall(libc::SYS_unlinkat, args([raw(dirfd), name.as_ptr() as u64, flags as u64])) }.map(drop)
}

pub fn renameat2(olddir: BorrowedFd, old: &CStr, newdir: BorrowedFd, new: &CStr, flags: u32) -> R<()> {
    let call = args([raw(olddir), old.as_ptr() as u64, raw(newdir), new.as_ptr() as u64, flags as u64]);
    // SAFETY: valid paths.
    unsafe { syscall(libc::SYS_renameat2, call) }.map(drop)
}

pub fn readlinkat(dirfd: BorrowedFd, name: &CStr) -> R<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    let call = args([raw(dirfd), name.as_ptr() as u64, buf.as_mut_ptr() as u64, buf.len() as u64]);
    // SAFETY: valid path and buffer of the stated size.
    let n = unsafe { syscall(libc::SYS_readlinkat, call) }?;
    buf.truncate(n);
    Ok(buf)
}

pub fn symlinkat(target: &CStr, dirfd: BorrowedFd, name: &CStr) -> R<()> {
    // SAFETY: valid paths.
    unsafe { syscall(libc::SYS_symlinkat, args([target.as_ptr() as u64, raw(dirfd), name.as_ptr() as u64])) }.map(drop)
}

pub fn linkat(olddir: BorrowedFd, old: &CStr, newdir: BorrowedFd, new: &CStr, flags: i32) -> R<()> {
    let call = args([raw(olddir), old.as_ptr() as u64, raw(newdir), new.as_ptr() as u64, flags as u64]);
    // SAFETY: valid paths.
    unsafe { syscall(libc::SYS_linkat, call) }.map(drop)
}

pub fn fchmodat(dirfd: BorrowedFd, name: &CStr, mode: u32) -> R<()> {
    // SAFETY: valid path.
    unsafe { syscall(libc::SYS_fchmodat, args([raw(dirfd), name.as_ptr() as u64, mode as u64])) }.map(drop)
}

pub fn fchmod(fd: BorrowedFd, mode: u32) -> R<()> {
    // SAFETY: plain descriptor call.
    unsafe { syscall(libc::SYS_fchmod, args([raw(fd), mode as u64])) }.map(drop)
}

pub fn faccessat(dirfd: BorrowedFd, name: &CStr, mode: i32, flags: i32) -> R<()> {
    let call = args([raw(dirfd), name.as_ptr() as u64, mode as u64, flags as u64]);
    // SAFETY: valid path; faccessat2 takes the flags the old call ignored.
    unsafe { syscall(libc::SYS_faccessat2, call) }.map(drop)
}

pub fn read(fd: BorrowedFd, buf: GuestRange) -> R<usize> {
    refuse_direct(fd, &[buf])?;
    // SAFETY: buf lies inside physical memory; the host reports EFAULT itself
    // for pages the guest protected.
    unsafe { syscall_retry(libc::SYS_read, args([raw(fd), buf.ptr() as u64, buf.len() as u64])) }
}

pub fn pread(fd: BorrowedFd, buf: GuestRange, off: i64) -> R<usize> {
    refuse_direct(fd, &[buf])?;
    // SAFETY: as for read.
    unsafe { syscall_retry(libc::SYS_pread64, args([raw(fd), buf.ptr() as u64, buf.len() as u64, off as u64])) }
}

pub fn pwrite(fd: BorrowedFd, buf: GuestRange, off: i64) -> R<usize> {
    refuse_direct(fd, &[buf])?;
    // SAFETY: as for write.
    unsafe { syscall_retry(libc::SYS_pwrite64, args([raw(fd), buf.ptr() as u64, buf.len() as u64, off as u64])) }
}

/// Reads from `off` until `buf` is full or the file ends; the bytes read.
pub fn pread_full(fd: BorrowedFd, buf: GuestRange, off: u64) -> R<usize> {
    let mut done = 0;
    while done < buf.len() {
        match pread(fd, buf.skip(done), (off + done as u64) as i64)? {
            0 => break,
            n => done += n,
        }
    }
    Ok(done)
}

/// Writes all of `buf` at `off`.
pub fn pwrite_full(fd: BorrowedFd, buf: GuestRange, off: u64) -> R<()> {
    let mut done = 0;
    while done < buf.len() {
        done += pwrite(fd, buf.skip(done), (off + done as u64) as i64)?;
    }
    Ok(())
}

/// EFAULT for secret memory (a mermap range) and a descriptor opened with
/// O_DIRECT: Linux's direct I/O pins the user's pages (get_user_pages),
/// which secretmem refuses, where the host would take the mermap's pages.
fn refuse_direct(fd: BorrowedFd, bufs: &[GuestRange]) -> R<()> {
    if bufs.iter().any(|b| b.in_mermap()) && getfl(fd)? & libc::O_DIRECT != 0 {
        return Err(Errno::EFAULT);
    }
    Ok(())
}

fn iovecs(fd: BorrowedFd, bufs: &[GuestRange]) -> R<Vec<libc::iovec>> {
    refuse_direct(fd, bufs)?;
    Ok(bufs.iter().map(|b| libc::iovec { iov_base: b.ptr(), iov_len: b.len() }).collect())
}

pub fn readv(fd: BorrowedFd, bufs: &[GuestRange]) -> R<usize> {
    let iov = iovecs(fd, bufs)?;
    // SAFETY: every iovec is a checked range inside physical memory.
    unsafe { syscall_retry(libc::SYS_readv, args([raw(fd), iov.as_ptr() as u64, iov.len() as u64])) }
}

pub fn writev(fd: BorrowedFd, bufs: &[GuestRange]) -> R<usize> {
    let iov = iovecs(fd, bufs)?;
    // SAFETY: as for readv; the host only reads.
    unsafe { syscall_retry(libc::SYS_writev, args([raw(fd), iov.as_ptr() as u64, iov.len() as u64])) }
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
    if let [b] = bufs {
        refuse_direct(fd, bufs)?;
        // SAFETY: a checked range inside physical memory.
        unsafe { super::blocking::syscall(one, args([raw(fd), b.ptr() as u64, b.len() as u64])) }
    } else {
        let (iov, fd) = (iovecs(fd, bufs)?, raw(fd));
        // SAFETY: every iovec is a checked range inside physical memory.
        unsafe { super::blocking::syscall(many, args([fd, iov.as_ptr() as u64, iov.len() as u64])) }
    }
}

/// pread into a nomu buffer (the loader reads headers this way).
pub fn pread_local(fd: BorrowedFd, buf: &mut [u8], off: u64) -> R<usize> {
    // SAFETY: buf is a valid nomu buffer of buf.len() bytes.
    unsafe { syscall_retry(libc::SYS_pread64, args([raw(fd), buf.as_mut_ptr() as u64, buf.len() as u64, off])) }
}

pub fn lseek(fd: BorrowedFd, off: i64, whence: i32) -> R<u64> {
    // SAFETY: plain descriptor call.
    unsafe { syscall(libc::SYS_lseek, args([raw(fd), off as u64, whence as u64])) }.map(|v| v as u64)
}

pub fn ftruncate(fd: BorrowedFd, len: i64) -> R<()> {
    // SAFETY: plain descriptor call.
    unsafe { syscall(libc::SYS_ftruncate, args([raw(fd), len as u64])) }.map(drop)
}

pub fn fsync(fd: BorrowedFd, data_only: bool) -> R<()> {
    let nr = if data_only { libc::SYS_fdatasync } else { libc::SYS_fsync };
    // SAFETY: plain descriptor calls.
    unsafe { syscall(nr, args([raw(fd)])) }.map(drop)
}

/// The type of the filesystem `fd` lives on (statfs's f_type).
pub fn fs_type(fd: BorrowedFd) -> R<i64> {
    Ok(fstatfs(fd)?.f_type as i64)
}

/// fstatfs(2).
pub fn fstatfs(fd: BorrowedFd) -> R<libc::statfs> {
    let mut st: libc::statfs = crate::host::pod::zeroed();
    // SAFETY: valid output buffer.
    unsafe { syscall(libc::SYS_fstatfs, args([raw(fd), &mut st as *mut libc::statfs as u64])) }?;
    Ok(st)
}

/// statfs(2) of a path (nomu's own: the host's /proc).
pub fn statfs(path: &CStr) -> R<libc::statfs> {
    let mut st: libc::statfs = crate::host::pod::zeroed();
    // SAFETY: a NUL-terminated path and a valid output buffer.
    unsafe { syscall(libc::SYS_statfs, args([path.as_ptr() as u64, &mut st as *mut libc::statfs as u64])) }?;
    Ok(st)
}

pub fn getfl(fd: BorrowedFd) -> R<i32> {
    fcntl_int(fd, libc::F_GETFL, 0)
}

pub fn setfl(fd: BorrowedFd, flags: i32) -> R<()> {
    fcntl_int(fd, libc::F_SETFL, flags).map(drop)
}

/// The host real-time signal that tells nomu a guest's O_ASYNC descriptor
/// became ready (fs::sigio): F_SETSIG's, so it carries the host
/// descriptor and the band. Blocked in every thread but the signal
/// forwarder, which waits for it.
pub const HOST_SIGIO: i32 = 62;

/// Has the host signal nomu's process with [`HOST_SIGIO`] whenever `fd`
/// becomes ready (`on`), or no more: O_ASYNC on the host descriptor, with
/// nomu as its owner.
pub fn signal_readiness(fd: BorrowedFd, on: bool) -> R<()> {
    const F_SETSIG: i32 = 10;
    const F_SETOWN_EX: i32 = 15;
    const F_OWNER_PID: i32 = 1;
    if on {
        // struct f_owner_ex { int type; pid_t pid; }
        let owner: [i32; 2] = [F_OWNER_PID, std::process::id() as i32];
        // SAFETY: F_SETOWN_EX reads a struct f_owner_ex, which `owner` is.
        unsafe { syscall(libc::SYS_fcntl, args([raw(fd), F_SETOWN_EX as u64, owner.as_ptr() as u64])) }?;
        fcntl_int(fd, F_SETSIG, HOST_SIGIO)?;
    }
    let fl = getfl(fd)?;
    setfl(fd, if on { fl | libc::O_ASYNC } else { fl & !libc::O_ASYNC })
}

pub fn getdents64(fd: BorrowedFd, buf: GuestRange) -> R<usize> {
    // SAFETY: buf lies inside physical memory.
    unsafe { syscall_retry(libc::SYS_getdents64, args([raw(fd), buf.ptr() as u64, buf.len() as u64])) }
}

/// getdents64 into a buffer of nomu's.
pub fn getdents64_local(fd: BorrowedFd, buf: &mut [u8]) -> R<usize> {
    // SAFETY: buf is a valid nomu buffer of buf.len() bytes.
    unsafe { syscall_retry(libc::SYS_getdents64, args([raw(fd), buf.as_mut_ptr() as u64, buf.len() as u64])) }
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
    unsafe { syscall(libc::SYS_ioctl, args([raw(fd), request, argp])) }
}

/// TIOCGPTPEER: the pseudo-terminal master `fd`'s peer, opened with
/// `flags` (always close-on-exec on the host).
pub fn open_pty_peer(fd: BorrowedFd, flags: i32) -> R<OwnedFd> {
    const TIOCGPTPEER: u64 = 0x5441;
    // SAFETY: TIOCGPTPEER takes its flags as a plain integer and returns a
    // new descriptor.
    let peer = unsafe { syscall(libc::SYS_ioctl, args([raw(fd), TIOCGPTPEER, (flags | libc::O_CLOEXEC) as u64])) }?;
    Ok(owned(peer))
}

/// SIOCGIFCONF into `buf` (empty: only the length needed): the length.
pub fn ifconf(fd: BorrowedFd, buf: &mut [u8]) -> R<usize> {
    #[repr(C)]
    struct IfConf {
        len: i32,
        buf: u64,
    }
    let ptr = if buf.is_empty() { 0 } else { buf.as_mut_ptr() as u64 };
    let mut conf = IfConf { len: buf.len() as i32, buf: ptr };
    const SIOCGIFCONF: u64 = 0x8912;
    // SAFETY: `conf` is a struct ifconf whose buffer is `buf` (or null).
    unsafe { syscall(libc::SYS_ioctl, args([raw(fd), SIOCGIFCONF, &mut conf as *mut IfConf as u64])) }?;
    Ok(conf.len as usize)
}

pub fn pipe2(flags: i32) -> R<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds has room for two descriptors.
    unsafe { syscall(libc::SYS_pipe2, args([fds.as_mut_ptr() as u64, (flags | libc::O_CLOEXEC) as u64])) }?;
    Ok((owned(fds[0] as usize), owned(fds[1] as usize)))
}

/// The host path of an open descriptor (via /proc/self/fd).
pub fn fd_path(fd: BorrowedFd) -> R<Vec<u8>> {
    readlinkat(cwd(), &proc_fd_path(fd))
}

pub fn isatty(fd: BorrowedFd) -> bool {
    // SAFETY: an all-zero termios is a valid value for the kernel to overwrite.
    let mut termios: libc::termios = unsafe { std::mem::zeroed() };
    let call = args([raw(fd), libc::TCGETS, &mut termios as *mut libc::termios as u64]);
    // SAFETY: TCGETS writes one termios (isatty's own test).
    unsafe { syscall(libc::SYS_ioctl, call) }.is_ok()
}

/// The device number of the terminal on nomu's own standard input, output
/// or error (the first of them that is one).
pub fn stdio_terminal() -> Option<u64> {
    (0..3).find_map(|n| {
        // SAFETY: only borrowed for the two calls below, which only read
        // the descriptor number: one that is not open fails them (EBADF).
        let fd = unsafe { BorrowedFd::borrow_raw(n) };
        if isatty(fd) {
            fstat(fd).ok().map(|st| st.st_rdev)
        } else {
            None
        }
    })
}

/// Duplicates one of nomu's own inherited descriptors (0, 1, 2) by number.
pub fn dup_raw(fd: RawFd) -> R<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC only reads the descriptor number; if it is not
    // open the host says EBADF.
    let new = unsafe { syscall(libc::SYS_fcntl, args([fd as u64, libc::F_DUPFD_CLOEXEC as u64, 3])) }?;
    Ok(owned(new))
}

/// fcntl with a plain integer argument.
pub fn fcntl_int(fd: BorrowedFd, cmd: i32, arg: i32) -> R<i32> {
    // SAFETY: callers pass only commands whose argument is an integer.
    unsafe { syscall(libc::SYS_fcntl, args([raw(fd), cmd as u64, arg as u64])) }.map(|v| v as i32)
}

/// A record-lock command of fcntl (F_OFD_GETLK, F_OFD_SETLK...) that does
/// not wait.
pub fn fcntl_lock(fd: BorrowedFd, cmd: i32, lock: &mut crate::abi::Flock) -> R<()> {
    // SAFETY: `lock` is a valid struct flock for the host to read and fill.
    unsafe { syscall(libc::SYS_fcntl, args([raw(fd), cmd as u64, lock as *mut crate::abi::Flock as u64])) }.map(drop)
}

/// A record-lock command that may wait (F_OFD_SETLKW): a kick ends it
/// with EINTR (host::blocking).
pub fn fcntl_lock_wait(fd: BorrowedFd, cmd: i32, lock: &mut crate::abi::Flock) -> R<()> {
    let call = args([raw(fd), cmd as u64, lock as *mut crate::abi::Flock as u64]);
    // SAFETY: as fcntl_lock.
    unsafe { super::blocking::syscall(libc::SYS_fcntl, call) }.map(drop)
}

/// flock(2); without LOCK_NB it may wait, and a kick ends it with EINTR.
pub fn flock(fd: BorrowedFd, op: i32) -> R<()> {
    // SAFETY: integer arguments only.
    unsafe { super::blocking::syscall(libc::SYS_flock, args([raw(fd), op as u64])) }.map(drop)
}

fn offset_ptr(off: Option<&mut i64>) -> u64 {
    off.map_or(0, |o| o as *mut i64 as u64)
}

/// splice(2) between host descriptors; it may wait (a pipe), and a kick
/// ends it with EINTR.
pub fn splice(
    input: BorrowedFd,
    off_in: Option<&mut i64>,
    out: BorrowedFd,
    off_out: Option<&mut i64>,
    len: usize,
    flags: u32,
) -> R<usize> {
    let call = args([raw(input), offset_ptr(off_in), raw(out), offset_ptr(off_out), len as u64, flags as u64]);
    // SAFETY: the offsets, when given, are valid i64s of the caller's.
    unsafe { super::blocking::syscall(libc::SYS_splice, call) }
}

/// tee(2) between host pipes; it may wait, and a kick ends it with EINTR.
pub fn tee(input: BorrowedFd, out: BorrowedFd, len: usize, flags: u32) -> R<usize> {
    // SAFETY: integer arguments only.
    unsafe { super::blocking::syscall(libc::SYS_tee, args([raw(input), raw(out), len as u64, flags as u64])) }
}

/// copy_file_range(2) between host descriptors.
pub fn copy_file_range(
    input: BorrowedFd,
    off_in: Option<&mut i64>,
    out: BorrowedFd,
    off_out: Option<&mut i64>,
    len: usize,
    flags: u32,
) -> R<usize> {
    let call = args([raw(input), offset_ptr(off_in), raw(out), offset_ptr(off_out), len as u64, flags as u64]);
    // SAFETY: the offsets, when given, are valid i64s of the caller's.
    unsafe { syscall_retry(libc::SYS_copy_file_range, call) }
}

/// A new host open file description of the file open at `fd`.
pub fn reopen(fd: BorrowedFd, flags: i32) -> R<OwnedFd> {
    open_host(&proc_fd_path(fd), flags)
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
    unsafe { syscall(libc::SYS_utimensat, args([raw(dirfd), path as u64, times as u64, flags as u64])) }.map(drop)
}

/// sendfile(2) between two host descriptors; `offset` is read and updated
/// when given.
pub fn sendfile(out: BorrowedFd, input: BorrowedFd, offset: Option<&mut i64>, count: usize) -> R<usize> {
    let off = offset.map_or(std::ptr::null_mut(), |o| o as *mut i64);
    // SAFETY: off is null or a valid i64.
    unsafe { syscall_retry(libc::SYS_sendfile, args([raw(out), raw(input), off as u64, count as u64])) }
}

/// An anonymous file holding `content` (nomu's /proc files), opened
/// again with `flags` (O_RDONLY and the guest's status flags), so the
/// guest's descriptor is as read-only as a /proc file's.
pub fn memfd_with(content: &[u8], flags: i32) -> R<OwnedFd> {
    let name = c"nomu-proc".as_ptr() as u64;
    // SAFETY: a NUL-terminated name; the result is a new descriptor.
    let fd = owned(unsafe { syscall(libc::SYS_memfd_create, args([name, libc::MFD_CLOEXEC as u64])) }?);
    write_all_at(fd.as_fd(), content)?;
    open_host(&proc_fd_path(fd.as_fd()), flags)
}

/// memfd_create(2) for a guest (close-on-exec on the host whatever
/// `flags` say: that is the guest descriptor's business).
pub fn memfd_create(name: &CStr, flags: u32) -> R<OwnedFd> {
    let call = args([name.as_ptr() as u64, (flags | libc::MFD_CLOEXEC) as u64]);
    // SAFETY: a NUL-terminated name; the result is a new descriptor.
    Ok(owned(unsafe { syscall(libc::SYS_memfd_create, call) }?))
}

/// Replaces the contents of a memfd made by [`memfd_with`] (through a
/// writable descriptor of its own; the guest's stays read-only).
pub fn memfd_refill(fd: BorrowedFd, content: &[u8]) -> R<()> {
    let rw = open_host(&proc_fd_path(fd), libc::O_RDWR)?;
    ftruncate(rw.as_fd(), 0)?;
    write_all_at(rw.as_fd(), content)?;
    close(rw);
    Ok(())
}

fn proc_fd_path(fd: BorrowedFd) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap()
}

fn write_all_at(fd: BorrowedFd, content: &[u8]) -> R<()> {
    let mut done = 0;
    while done < content.len() {
        let rest = &content[done..];
        let call = args([raw(fd), rest.as_ptr() as u64, rest.len() as u64, done as u64]);
        // SAFETY: writing from a valid buffer to our own file.
        done += unsafe { syscall_retry(libc::SYS_pwrite64, call) }?;
    }
    Ok(())
}

/// The whole of a host file nomu reads for itself (/proc/cpuinfo).
pub fn read_file(path: &CStr) -> R<Vec<u8>> {
    let fd = open_host(path, libc::O_RDONLY)?;
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = pread_local(fd.as_fd(), &mut chunk, out.len() as u64)?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&chunk[..n]);
    }
    close(fd);
    Ok(out)
}

/// fchownat(2); uid or gid u32::MAX leaves it as it is.
pub fn fchownat(dirfd: BorrowedFd, name: &CStr, uid: u32, gid: u32, flags: i32) -> R<()> {
    let call = args([raw(dirfd), name.as_ptr() as u64, uid as u64, gid as u64, flags as u64]);
    // SAFETY: valid path.
    unsafe { syscall(libc::SYS_fchownat, call) }.map(drop)
}

pub fn fchown(fd: BorrowedFd, uid: u32, gid: u32) -> R<()> {
    // SAFETY: plain descriptor call.
    unsafe { syscall(libc::SYS_fchown, args([raw(fd), uid as u64, gid as u64])) }.map(drop)
}

pub fn mknodat(dirfd: BorrowedFd, name: &CStr, mode: u32, dev: u32) -> R<()> {
    // SAFETY: valid path.
    unsafe { syscall(libc::SYS_mknodat, args([raw(dirfd), name.as_ptr() as u64, mode as u64, dev as u64])) }.map(drop)
}

pub fn fallocate(fd: BorrowedFd, mode: i32, offset: i64, len: i64) -> R<()> {
    // SAFETY: plain descriptor call.
    unsafe { syscall_retry(libc::SYS_fallocate, args([raw(fd), mode as u64, offset as u64, len as u64])) }.map(drop)
}

pub fn fadvise64(fd: BorrowedFd, offset: i64, len: i64, advice: i32) -> R<()> {
    // SAFETY: plain descriptor call.
    unsafe { syscall(libc::SYS_fadvise64, args([raw(fd), offset as u64, len as u64, advice as u64])) }.map(drop)
}

pub fn readahead(fd: BorrowedFd, offset: i64, count: usize) -> R<()> {
    // SAFETY: plain descriptor call.
    unsafe { syscall(libc::SYS_readahead, args([raw(fd), offset as u64, count as u64])) }.map(drop)
}

pub fn sync() {
    // SAFETY: no arguments; cannot fail.
    let _ = unsafe { syscall(libc::SYS_sync, args([])) };
}

pub fn syncfs(fd: BorrowedFd) -> R<()> {
    // SAFETY: plain descriptor call.
    unsafe { syscall(libc::SYS_syncfs, args([raw(fd)])) }.map(drop)
}

pub fn sync_file_range(fd: BorrowedFd, offset: i64, nbytes: i64, flags: u32) -> R<()> {
    let call = args([raw(fd), offset as u64, nbytes as u64, flags as u64]);
    // SAFETY: plain descriptor call.
    unsafe { syscall_retry(libc::SYS_sync_file_range, call) }.map(drop)
}

/// preadv2(2) into checked guest ranges; `offset` -1 is the file position.
pub fn preadv2(fd: BorrowedFd, bufs: &[GuestRange], offset: i64, flags: i32) -> R<usize> {
    let iov = iovecs(fd, bufs)?;
    let call = args([raw(fd), iov.as_ptr() as u64, iov.len() as u64, offset as u64, 0, flags as u64]);
    // SAFETY: every iovec is a checked range inside physical memory.
    unsafe { syscall_retry(libc::SYS_preadv2, call) }
}

/// pwritev2(2) from checked guest ranges.
pub fn pwritev2(fd: BorrowedFd, bufs: &[GuestRange], offset: i64, flags: i32) -> R<usize> {
    let iov = iovecs(fd, bufs)?;
    let call = args([raw(fd), iov.as_ptr() as u64, iov.len() as u64, offset as u64, 0, flags as u64]);
    // SAFETY: as for preadv2; the host only reads.
    unsafe { syscall_retry(libc::SYS_pwritev2, call) }
}

/// An extended-attribute call's target: a host path (followed or not), or
/// a descriptor.
pub enum XattrOn<'a> {
    Path(&'a CStr, bool),
    Fd(BorrowedFd<'a>),
}

impl XattrOn<'_> {
    /// The syscall number of the path, link and descriptor variants, and
    /// the first argument.
    fn pick(&self, path: libc::c_long, link: libc::c_long, fd: libc::c_long) -> (libc::c_long, u64) {
        match self {
            XattrOn::Path(p, true) => (path, p.as_ptr() as u64),
            XattrOn::Path(p, false) => (link, p.as_ptr() as u64),
            XattrOn::Fd(f) => (fd, raw(*f)),
        }
    }
}

/// getxattr(2) into a nomu buffer (empty: the size query).
pub fn getxattr(on: &XattrOn, name: &CStr, value: &mut [u8]) -> R<usize> {
    let (nr, target) = on.pick(libc::SYS_getxattr, libc::SYS_lgetxattr, libc::SYS_fgetxattr);
    let call = args([target, name.as_ptr() as u64, value.as_mut_ptr() as u64, value.len() as u64]);
    // SAFETY: valid path or descriptor and name; the host writes at most value.len() bytes.
    unsafe { syscall(nr, call) }
}

pub fn setxattr(on: &XattrOn, name: &CStr, value: &[u8], flags: i32) -> R<()> {
    let (nr, target) = on.pick(libc::SYS_setxattr, libc::SYS_lsetxattr, libc::SYS_fsetxattr);
    let call = args([target, name.as_ptr() as u64, value.as_ptr() as u64, value.len() as u64, flags as u64]);
    // SAFETY: valid path or descriptor and name; the host reads value.len() bytes.
    unsafe { syscall(nr, call) }.map(drop)
}

/// listxattr(2) into a nomu buffer (empty: the size query).
pub fn listxattr(on: &XattrOn, list: &mut [u8]) -> R<usize> {
    let (nr, target) = on.pick(libc::SYS_listxattr, libc::SYS_llistxattr, libc::SYS_flistxattr);
    // SAFETY: valid path or descriptor; the host writes at most list.len() bytes.
    unsafe { syscall(nr, args([target, list.as_mut_ptr() as u64, list.len() as u64])) }
}

pub fn removexattr(on: &XattrOn, name: &CStr) -> R<()> {
    let (nr, target) = on.pick(libc::SYS_removexattr, libc::SYS_lremovexattr, libc::SYS_fremovexattr);
    // SAFETY: valid path or descriptor and name.
    unsafe { syscall(nr, args([target, name.as_ptr() as u64])) }.map(drop)
}
