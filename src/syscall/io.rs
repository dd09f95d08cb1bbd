//! Descriptor I/O: read/write and friends, ioctl, fcntl, dup, pipe, close.

use super::args::{Fd, Hex, InBuf, OpenFlags, OutBuf, UserPtr};
use super::file_ops::{self, FIONREAD};
use super::{coherent, Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::abi::GuestIovec;
use crate::fs::file::{FileKind, FileType, OpenFile};
use crate::fs::sigio::{Owner, OwnerKind};
use crate::host::fs as hostfs;
use crate::host::physmem::GuestRange;
use crate::host::sys as hostsys;
use crate::mm::uaccess::{access_ok, Pinned};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Linux caps one read or write at this many bytes.
pub const MAX_RW_COUNT: usize = 0x7fff_f000;
pub(super) const UIO_MAXIOV: usize = 1024;

impl Ctx<'_, '_> {
    pub fn file(&self, fd: Fd) -> Result<Arc<OpenFile>, Errno> {
        self.process().files.lock().unwrap().file(fd.0)
    }

    /// A descriptor that allows I/O (not an O_PATH handle).
    pub fn io_file(&self, fd: Fd) -> Result<Arc<OpenFile>, Errno> {
        let f = self.file(fd)?;
        if f.path_only {
            return Err(Errno::EBADF);
        }
        Ok(f)
    }

    /// Whether no descriptor is free below RLIMIT_NOFILE.
    pub fn fd_table_full(&self) -> bool {
        let limit = self.process().nofile_limit();
        self.process().files.lock().unwrap().lowest_free(0, limit).is_none()
    }

    pub fn install_fd(&self, file: Arc<OpenFile>, cloexec: bool) -> SysResult {
        let limit = self.process().nofile_limit();
        let fd = self.process().files.lock().unwrap().install(file, cloexec, 0, limit)?;
        Ok(fd as u64)
    }
}

/// Waits until `f` can do I/O without blocking (pipes, sockets, terminals),
/// so that a signal interrupts the wait (ERESTARTSYS: restarted under
/// SA_RESTART, else EINTR). Regular files never block.
pub fn wait_ready(ctx: &Ctx, f: &OpenFile, events: i16) -> Result<(), Errno> {
    if !file_ops::of(f).may_block() {
        return Ok(());
    }
    let mut pfd = [libc::pollfd { fd: f.fd().as_raw_fd(), events, revents: 0 }];
    if hostsys::poll(&mut pfd, Some(Duration::ZERO))? > 0 {
        return Ok(());
    }
    // Non-blocking descriptors, and ones not open for this direction (the
    // host call then fails at once with EBADF), do not wait.
    let wrong_way = if events == libc::POLLOUT { !f.writable() } else { !f.readable() };
    if wrong_way || hostfs::getfl(f.fd())? & libc::O_NONBLOCK != 0 {
        return Ok(());
    }
    ctx.t
        .block_in_host(|| {
            pfd[0].revents = 0;
            hostsys::poll(&mut pfd, None)
        })
        .map(drop)
}

fn count(len: usize) -> usize {
    len.min(MAX_RW_COUNT)
}

/// Whether pread, pwrite and a sendfile offset apply to `f`: Linux's
/// FMODE_PREAD, which pipes, sockets and terminals lack.
fn positional(f: &OpenFile) -> bool {
    !matches!(f.kind(), FileKind::Fifo | FileKind::Socket) && f.file_type() != FileType::Terminal
}

/// A read or write of `len` bytes at `buf` in Linux's order (vfs_read,
/// vfs_write): for pread/pwrite whether the file has offsets (ESPIPE),
/// then the descriptor's mode (EBADF), the whole buffer's place in user
/// space (access_ok, EFAULT), and a directory's read (EISDIR) before its
/// buffer is touched. Only an EFAULT asks: the fast path pays nothing.
fn rw_in_order(
    f: &OpenFile,
    write: bool,
    positioned: bool,
    buf: u64,
    len: usize,
    io: impl FnOnce() -> SysResult,
) -> SysResult {
    let in_user = access_ok(buf, len as u64);
    match if in_user { io() } else { Err(Errno::EFAULT) } {
        Err(Errno::EFAULT) if positioned && !positional(f) => Err(Errno::ESPIPE),
        Err(Errno::EFAULT) if !(if write { f.writable() } else { f.readable() }) => Err(Errno::EBADF),
        Err(Errno::EFAULT) if in_user && !write && f.kind() == FileKind::Directory => Err(Errno::EISDIR),
        r => r,
    }
}

pub fn sys_read(ctx: &mut Ctx, fd: Fd, OutBuf(buf): OutBuf, len: usize) -> SysResult {
    let f = ctx.io_file(fd)?;
    rw_in_order(&f, false, false, buf, len, || file_ops::of(&f).read(ctx, &f, buf, count(len)))
}

pub fn sys_write(ctx: &mut Ctx, fd: Fd, InBuf(buf): InBuf<2>, len: usize) -> SysResult {
    let f = ctx.io_file(fd)?;
    rw_in_order(&f, true, false, buf, len, || {
        let len = fsize_allowed(ctx, &f, None, false, count(len))?;
        file_ops::of(&f).write(ctx, &f, buf, len)
    })
}

/// RLIMIT_FSIZE on a write of `len` bytes to `f` (Linux's
/// generic_write_check_limits): the bytes it may write, cut to end at the
/// limit; EFBIG, with SIGXFSZ to the caller, for one that would start at
/// or past it. It writes at `pos` (None: at the description's offset), or
/// at the file's end with O_APPEND or `append` (RWF_APPEND). Only writes
/// of something to regular files are limited, and only when the limit is
/// set does it cost a host call (the offset or the size).
pub(super) fn fsize_allowed(
    ctx: &Ctx,
    f: &OpenFile,
    pos: Option<i64>,
    append: bool,
    len: usize,
) -> Result<usize, Errno> {
    if len == 0 || f.kind() != FileKind::Regular || !f.writable() {
        return Ok(len);
    }
    let limit = ctx.process().rlimit(libc::RLIMIT_FSIZE).rlim_cur;
    if limit == libc::RLIM_INFINITY {
        return Ok(len);
    }
    let pos = if append || hostfs::getfl(f.fd())? & libc::O_APPEND != 0 {
        hostfs::fstat(f.fd())?.st_size as u64
    } else {
        match pos {
            Some(p) => p as u64,
            None => hostfs::lseek(f.fd(), 0, libc::SEEK_CUR)?,
        }
    };
    if pos >= limit {
        file_too_large(ctx);
        return Err(Errno::EFBIG);
    }
    Ok(len.min((limit - pos).min(usize::MAX as u64) as usize))
}

/// RLIMIT_FSIZE on a regular file `fd` growing to `size` (truncate,
/// fallocate: Linux's inode_newsize_ok): EFBIG, with SIGXFSZ, past it.
pub(super) fn fsize_allows_size(ctx: &Ctx, fd: std::os::fd::BorrowedFd, size: u64) -> Result<(), Errno> {
    let limit = ctx.process().rlimit(libc::RLIMIT_FSIZE).rlim_cur;
    if limit == libc::RLIM_INFINITY || size <= limit {
        return Ok(());
    }
    let st = hostfs::fstat(fd)?;
    if FileKind::from_mode(st.st_mode) != FileKind::Regular || size <= st.st_size as u64 {
        return Ok(());
    }
    file_too_large(ctx);
    Err(Errno::EFBIG)
}

/// SIGXFSZ to the calling thread, as Linux's send_sig(SIGXFSZ, current, 0)
/// sends it: SI_USER, from the process itself.
fn file_too_large(ctx: &Ctx) {
    let (pid, uid) = (ctx.process().pid, ctx.cred().uid);
    let info = crate::kernel::signal::SigInfo::from_process(libc::SIGXFSZ, crate::kernel::signal::SI_USER, pid, uid);
    ctx.kernel().signal_thread(&ctx.t.thread, info);
}

/// The first `n` bytes of `ranges`.
pub(super) fn first_bytes(ranges: &[GuestRange], mut n: usize) -> Vec<GuestRange> {
    let mut out = Vec::with_capacity(ranges.len());
    for r in ranges {
        if n == 0 {
            break;
        }
        out.push(r.take(n));
        n -= r.len().min(n);
    }
    out
}

pub fn sys_pread64(ctx: &mut Ctx, fd: Fd, OutBuf(buf): OutBuf, len: usize, pos: i64) -> SysResult {
    // Linux checks pos before the descriptor (ksys_pread64).
    if pos < 0 {
        return Err(Errno::EINVAL);
    }
    let f = ctx.io_file(fd)?;
    rw_in_order(&f, false, true, buf, len, || {
        let runs = ctx.mem().runs(buf, count(len), true)?;
        runs.with_ranges(|r| {
            coherent::read(ctx, &f, Some(pos), r, || match r {
                [one] => hostfs::pread(f.fd(), *one, pos),
                _ => hostfs::preadv2(f.fd(), r, pos, 0),
            })
        })
        .map(|n| n as u64)
    })
}

pub fn sys_pwrite64(ctx: &mut Ctx, fd: Fd, InBuf(buf): InBuf<2>, len: usize, pos: i64) -> SysResult {
    // Linux checks pos before the descriptor (ksys_pwrite64).
    if pos < 0 {
        return Err(Errno::EINVAL);
    }
    let f = ctx.io_file(fd)?;
    rw_in_order(&f, true, true, buf, len, || {
        let len = fsize_allowed(ctx, &f, Some(pos), false, count(len))?;
        let runs = ctx.mem().runs(buf, len, false)?;
        runs.with_ranges(|r| {
            coherent::write(ctx, &f, Some(pos), false, || match r {
                [one] => hostfs::pwrite(f.fd(), *one, pos),
                _ => hostfs::pwritev2(f.fd(), r, pos, 0),
            })
        })
        .map(|n| n as u64)
    })
}

/// A guest iovec array's buffers, pinned while the call uses them.
pub(super) struct IoRanges {
    _pins: Vec<Pinned>,
    ranges: Vec<GuestRange>,
}

impl std::ops::Deref for IoRanges {
    type Target = [GuestRange];
    fn deref(&self) -> &[GuestRange] {
        &self.ranges
    }
}

/// The guest's iovec array as checked ranges, stopping at the first buffer
/// that is not fully accessible (so the host returns a partial count).
pub(super) fn iov_ranges(ctx: &Ctx, iov: u64, cnt: u32, write: bool) -> Result<IoRanges, Errno> {
    let cnt = cnt as usize;
    if cnt > UIO_MAXIOV {
        return Err(Errno::EINVAL);
    }
    let mem = ctx.mem();
    // Linux's import_iovec: the whole array is read, each length judged,
    // before any buffer; several buffers must each lie in user space whole,
    // one alone is cut to MAX_RW_COUNT first (import_ubuf).
    let mut iovs = Vec::with_capacity(cnt);
    for i in 0..cnt {
        let v: GuestIovec = mem.read(iov + (i * 16) as u64)?;
        if (v.len as i64) < 0 {
            return Err(Errno::EINVAL);
        }
        iovs.push(v);
    }
    if iovs.iter().any(|v| !access_ok(v.base, if cnt == 1 { count(v.len as usize) as u64 } else { v.len })) {
        return Err(Errno::EFAULT);
    }
    let mut ranges = Vec::with_capacity(cnt);
    let mut short = false;
    for v in iovs {
        if short || v.len == 0 {
            continue;
        }
        match mem.runs(v.base, count(v.len as usize), write) {
            Ok(r) => {
                short = r.len() < v.len as usize;
                ranges.extend(r.into_pins());
            }
            Err(e) if ranges.is_empty() => return Err(e),
            Err(_) => short = true,
        }
    }
    Ok(IoRanges { ranges: ranges.iter().map(|r| **r).collect(), _pins: ranges })
}

pub fn sys_readv(ctx: &mut Ctx, fd: Fd, UserPtr(iov): UserPtr, vlen: u32) -> SysResult {
    let f = ctx.io_file(fd)?;
    // The mode before the iovec (vfs_readv).
    if !f.readable() {
        return Err(Errno::EBADF);
    }
    let ranges = iov_ranges(ctx, iov, vlen, true)?;
    file_ops::of(&f).readv(ctx, &f, &ranges)
}

pub fn sys_writev(ctx: &mut Ctx, fd: Fd, UserPtr(iov): UserPtr, vlen: u32) -> SysResult {
    let f = ctx.io_file(fd)?;
    // The mode before the iovec (vfs_writev).
    if !f.writable() {
        return Err(Errno::EBADF);
    }
    let ops = file_ops::of(&f);
    ops.writev_ignores_buffers(&f)?;
    let ranges = limited_ranges(ctx, &f, iov_ranges(ctx, iov, vlen, false)?, None, false)?;
    ops.writev(ctx, &f, &ranges)
}

/// A write's checked ranges, cut at RLIMIT_FSIZE ([`fsize_allowed`]).
fn limited_ranges(
    ctx: &Ctx,
    f: &OpenFile,
    ranges: IoRanges,
    pos: Option<i64>,
    append: bool,
) -> Result<IoRanges, Errno> {
    let len: usize = ranges.iter().map(|r| r.len()).sum();
    let allowed = fsize_allowed(ctx, f, pos, append, len)?;
    if allowed == len {
        return Ok(ranges);
    }
    Ok(IoRanges { ranges: first_bytes(&ranges.ranges, allowed), _pins: ranges._pins })
}

pub fn sys_sendfile(ctx: &mut Ctx, out_fd: Fd, in_fd: Fd, UserPtr(offset): UserPtr, len: usize) -> SysResult {
    // Linux's order (sendfile64, do_sendfile): the offset is read, the
    // input judged (its mode, whether it has offsets, the offset), then
    // the output.
    let mut off: Option<i64> = if offset != 0 { Some(ctx.mem().read(offset)?) } else { None };
    let input = ctx.io_file(in_fd)?;
    if !input.readable() {
        return Err(Errno::EBADF);
    }
    if off.is_some() && !positional(&input) {
        return Err(Errno::ESPIPE);
    }
    if off.is_some_and(|o| o < 0) {
        return Err(Errno::EINVAL);
    }
    let out = ctx.io_file(out_fd)?;
    if !out.writable() {
        return Err(Errno::EBADF);
    }
    wait_ready(ctx, &input, libc::POLLIN)?;
    wait_ready(ctx, &out, libc::POLLOUT)?;
    let len = fsize_allowed(ctx, &out, None, false, count(len))?;
    coherent::copy_from(ctx, &input, off, len)?;
    let n = hostfs::sendfile(out.fd(), input.fd(), off.as_mut(), len)?;
    coherent::copied_into(ctx, &out, None, n)?;
    if let Some(o) = off {
        ctx.mem().write(offset, &o)?;
    }
    Ok(n as u64)
}

pub fn sys_lseek(ctx: &mut Ctx, fd: Fd, offset: i64, whence: u32) -> SysResult {
    let f = ctx.io_file(fd)?;
    file_ops::of(&f).lseek(ctx, &f, offset, whence)
}

pub fn sys_close(ctx: &mut Ctx, fd: Fd) -> SysResult {
    let closed = ctx.process().files.lock().unwrap().close(fd.0)?;
    crate::fs::locks::closed(ctx.process().pid, [&closed.file]);
    Ok(0)
}

pub fn sys_fsync(ctx: &mut Ctx, fd: Fd) -> SysResult {
    hostfs::fsync(ctx.io_file(fd)?.fd(), false).map(|_| 0)
}

pub fn sys_fdatasync(ctx: &mut Ctx, fd: Fd) -> SysResult {
    hostfs::fsync(ctx.io_file(fd)?.fd(), true).map(|_| 0)
}

pub fn sys_ftruncate(ctx: &mut Ctx, fd: Fd, length: i64) -> SysResult {
    // Linux checks the length before the descriptor (do_sys_ftruncate).
    if length < 0 {
        return Err(Errno::EINVAL);
    }
    let f = ctx.io_file(fd)?;
    file_ops::of(&f).ftruncate(ctx, &f, length)
}

pub fn sys_getdents64(ctx: &mut Ctx, fd: Fd, UserPtr(dirent): UserPtr, len: u32) -> SysResult {
    let f = ctx.io_file(fd)?;
    file_ops::of(&f).getdents(ctx, &f, dirent, count(len as usize))
}

const FIONBIO: u64 = 0x5421;
const FIOASYNC: u64 = 0x5452;
const FIONCLEX: u64 = 0x5450;
const FIOCLEX: u64 = 0x5451;

pub fn sys_ioctl(ctx: &mut Ctx, fd: Fd, Hex(cmd): Hex<u32>, UserPtr(arg): UserPtr) -> SysResult {
    let f = ctx.io_file(fd)?;
    let req = u64::from(cmd);
    let mem = ctx.mem();
    match req {
        FIOCLEX | FIONCLEX => {
            ctx.process().files.lock().unwrap().set_cloexec(fd.0, req == FIOCLEX)?;
            Ok(0)
        }
        FIONBIO => {
            let on: i32 = mem.read(arg)?;
            let fl = hostfs::getfl(f.fd())?;
            hostfs::setfl(f.fd(), if on != 0 { fl | libc::O_NONBLOCK } else { fl & !libc::O_NONBLOCK })?;
            Ok(0)
        }
        // O_ASYNC, as F_SETFL sets it (Linux's ioctl_fioasync).
        FIOASYNC => {
            let on: i32 = mem.read(arg)?;
            set_async(ctx, fd, &f, on != 0).map(|_| 0)
        }
        FIONREAD => {
            let mut n = [0u8; 4];
            hostfs::ioctl(f.fd(), req, Some(&mut n), 0)?;
            mem.write_bytes(arg, &n)?;
            Ok(0)
        }
        _ => file_ops::of(&f).ioctl(ctx, &f, req, arg),
    }
}

const F_DUPFD: i32 = 0;
const F_GETFD: i32 = 1;
const F_SETFD: i32 = 2;
const F_GETFL: i32 = 3;
const F_SETFL: i32 = 4;
const F_SETOWN: i32 = 8;
const F_GETOWN: i32 = 9;
const F_SETSIG: i32 = 10;
const F_GETSIG: i32 = 11;
const F_SETOWN_EX: i32 = 15;
const F_GETOWN_EX: i32 = 16;
const F_OWNER_TID: i32 = 0;
const F_OWNER_PID: i32 = 1;
const F_OWNER_PGRP: i32 = 2;
const F_DUPFD_CLOEXEC: i32 = 1030;
const F_SETPIPE_SZ: i32 = 1031;
const F_GETPIPE_SZ: i32 = 1032;
const F_ADD_SEALS: i32 = 1033;
const F_GET_SEALS: i32 = 1034;
const F_SEAL_WRITE: i32 = 0x08;
const F_SEAL_FUTURE_WRITE: i32 = 0x10;

/// Turns O_ASYNC on or off for description `f` (guest descriptor `fd`):
/// the host signals nomu when its host descriptor becomes ready, and nomu
/// its owner (fs::sigio). Linux calls the file's fasync only on a change.
fn set_async(ctx: &Ctx, fd: Fd, f: &Arc<OpenFile>, on: bool) -> Result<(), Errno> {
    let mut io = f.async_io.lock().unwrap();
    if io.enabled == on {
        return Ok(());
    }
    hostfs::signal_readiness(f.fd(), on)?;
    if on {
        ctx.kernel().async_files.add(f.fd().as_raw_fd(), f);
        io.fd = fd.0;
    }
    io.enabled = on;
    Ok(())
}

/// F_SETOWN and F_SETOWN_EX: who gets `f`'s I/O signals (id 0: nobody),
/// with the caller's ids for the permission check at sending. An id that
/// names nothing (no thread, process or group) is ESRCH, as Linux's
/// find_vpid finds none.
fn set_owner(ctx: &Ctx, f: &OpenFile, owner: Owner) -> Result<(), Errno> {
    let kernel = ctx.kernel();
    let id = owner.id;
    let exists = id == 0
        || kernel.tasks.exists(id)
        || kernel.find_thread(id).is_some()
        || !kernel.tasks.group_members(id).is_empty();
    if !exists {
        return Err(Errno::ESRCH);
    }
    let cred = ctx.cred();
    let mut io = f.async_io.lock().unwrap();
    io.owner = owner;
    io.setter = (cred.euid, cred.uid);
    Ok(())
}

/// Whether any guest maps the file of `f` shared and writable.
fn writably_mapped(ctx: &Ctx, f: &OpenFile) -> bool {
    let Some(id) = f.identity() else { return false };
    ctx.kernel().tasks.all_live().iter().any(|p| {
        p.mm().lock().unwrap().vmas().any(|(_, v)| {
            v.shared
                && v.prot & libc::PROT_WRITE != 0
                && v.backing
                    .as_ref()
                    .and_then(|b| b.file.identity())
                    .is_some_and(|b| (b.dev, b.ino) == (id.dev, id.ino))
        })
    })
}

/// Whether the host file behind `f` is a memfd sealed against writing
/// (F_SEAL_WRITE or F_SEAL_FUTURE_WRITE): no shared writable mapping then.
pub fn write_sealed(f: &OpenFile) -> bool {
    hostfs::fcntl_int(f.fd(), F_GET_SEALS, 0).is_ok_and(|s| s & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE) != 0)
}

const MFD_CLOEXEC: u32 = 1;
const MFD_ALL_FLAGS: u32 = 0x1f;
const MFD_HUGETLB: u32 = 4;
const MFD_HUGE_MASK: u32 = 0x3f << 26;
/// The longest name, without "memfd:" and the NUL (Linux's MFD_NAME_MAX_LEN).
const MFD_NAME_MAX_LEN: usize = 249;

/// memfd_create(2): the host's, behind a guest descriptor. Its name shows
/// in /proc/PID/fd as the host names it ("/memfd:NAME (deleted)"), and a
/// MAP_SHARED mapping of it is a shared file mapping like any other.
pub fn sys_memfd_create(ctx: &mut Ctx, UserPtr(name): UserPtr, Hex(flags): Hex<u32>) -> SysResult {
    let known = if flags & MFD_HUGETLB != 0 { MFD_ALL_FLAGS | MFD_HUGE_MASK } else { MFD_ALL_FLAGS };
    if flags & !known != 0 {
        return Err(Errno::EINVAL);
    }
    let name = match ctx.mem().read_cstring(name, MFD_NAME_MAX_LEN) {
        Err(Errno::ENAMETOOLONG) => return Err(Errno::EINVAL),
        r => r?,
    };
    let name = std::ffi::CString::new(name).expect("no NUL inside");
    let host = hostfs::memfd_create(&name, flags & !MFD_CLOEXEC)?;
    let path = [b"/memfd:", name.as_bytes()].concat();
    ctx.install_fd(Arc::new(OpenFile::new(host, path, false)), flags & MFD_CLOEXEC != 0)
}

/// memfd_secret(2): a file of secret memory (fs::secretmem).
pub fn sys_memfd_secret(ctx: &mut Ctx, Hex(flags): Hex<u32>) -> SysResult {
    if flags & !(libc::O_CLOEXEC as u32) != 0 {
        return Err(Errno::EINVAL);
    }
    let host = crate::host::events::memfd_secret()?;
    let state = crate::fs::secretmem::SecretMem::new(ctx.kernel().phys);
    let file = OpenFile::new_special(
        host,
        "/secretmem (deleted)",
        FileType::SecretMem,
        Some(crate::fs::file::FileObject::SecretMem(state)),
    );
    ctx.install_fd(Arc::new(file), flags & libc::O_CLOEXEC as u32 != 0)
}

fn dup_from(ctx: &Ctx, fd: Fd, min: u32, cloexec: bool) -> SysResult {
    let limit = ctx.process().nofile_limit();
    let mut files = ctx.process().files.lock().unwrap();
    let file = files.file(fd.0)?;
    // fcntl finds the descriptor before f_dupfd judges the lowest number.
    if min as usize >= limit {
        return Err(Errno::EINVAL);
    }
    files.install(file, cloexec, min as usize, limit).map(|fd| fd as u64)
}

pub fn sys_fcntl(ctx: &mut Ctx, fd: Fd, cmd: u32, Hex(arg): Hex) -> SysResult {
    let cmd = cmd as i32;
    match cmd {
        F_DUPFD | F_DUPFD_CLOEXEC => dup_from(ctx, fd, arg as u32, cmd == F_DUPFD_CLOEXEC),
        F_GETFD => Ok(ctx.process().files.lock().unwrap().get(fd.0)?.cloexec as u64),
        F_SETFD => {
            ctx.process().files.lock().unwrap().set_cloexec(fd.0, arg & 1 != 0)?;
            Ok(0)
        }
        F_GETFL => {
            let f = ctx.file(fd)?;
            // The host descriptor is always O_CLOEXEC; that is a descriptor
            // flag, not a status flag, and the guest never sees it here.
            Ok((hostfs::getfl(f.fd())? & !libc::O_CLOEXEC) as u64)
        }
        F_SETFL => {
            // An O_PATH descriptor takes only F_DUPFD*, F_GETFD, F_SETFD and
            // F_GETFL: EBADF for the rest, unknown ones too (check_fcntl_cmd).
            let f = ctx.io_file(fd)?;
            let changeable = libc::O_APPEND | libc::O_NONBLOCK | libc::O_DIRECT | libc::O_NOATIME;
            let old = hostfs::getfl(f.fd())?;
            hostfs::setfl(f.fd(), (old & !changeable) | (arg as i32 & changeable))?;
            set_async(ctx, fd, &f, arg as i32 & libc::O_ASYNC != 0).map(|_| 0)
        }
        F_SETOWN => {
            let f = ctx.io_file(fd)?;
            let who = arg as i32;
            let owner = match who {
                i32::MIN => return Err(Errno::EINVAL),
                w if w < 0 => Owner { kind: OwnerKind::Group, id: w.unsigned_abs() },
                w => Owner { kind: OwnerKind::Process, id: w as u32 },
            };
            set_owner(ctx, &f, owner).map(|_| 0)
        }
        F_GETOWN => {
            let f = ctx.io_file(fd)?;
            let owner = f.async_io.lock().unwrap().owner;
            Ok(match owner.kind {
                OwnerKind::Group => -(owner.id as i64) as u64,
                _ => owner.id as u64,
            })
        }
        F_SETOWN_EX => {
            let f = ctx.io_file(fd)?;
            let [kind, pid]: [i32; 2] = ctx.mem().read(arg)?;
            let kind = match kind {
                F_OWNER_TID => OwnerKind::Thread,
                F_OWNER_PID => OwnerKind::Process,
                F_OWNER_PGRP => OwnerKind::Group,
                _ => return Err(Errno::EINVAL),
            };
            // No such id, a negative one too: ESRCH.
            let id = u32::try_from(pid).map_err(|_| Errno::ESRCH)?;
            set_owner(ctx, &f, Owner { kind, id }).map(|_| 0)
        }
        F_GETOWN_EX => {
            let f = ctx.io_file(fd)?;
            let owner = f.async_io.lock().unwrap().owner;
            let kind = match owner.kind {
                OwnerKind::Thread => F_OWNER_TID,
                OwnerKind::Process => F_OWNER_PID,
                OwnerKind::Group => F_OWNER_PGRP,
            };
            let ex: [i32; 2] = [kind, owner.id as i32];
            ctx.mem().write(arg, &ex)?;
            Ok(0)
        }
        F_SETSIG => {
            let f = ctx.io_file(fd)?;
            if arg > 64 {
                return Err(Errno::EINVAL);
            }
            f.async_io.lock().unwrap().signal = arg as i32;
            Ok(0)
        }
        F_GETSIG => Ok(ctx.io_file(fd)?.async_io.lock().unwrap().signal as u64),
        super::locks::F_GETLK
        | super::locks::F_SETLK
        | super::locks::F_SETLKW
        | super::locks::F_OFD_GETLK
        | super::locks::F_OFD_SETLK
        | super::locks::F_OFD_SETLKW => super::locks::record_lock(ctx, fd, cmd, arg),
        F_GET_SEALS => crate::host::fs::fcntl_int(ctx.io_file(fd)?.fd(), F_GET_SEALS, 0).map(|v| v as u64),
        F_ADD_SEALS => {
            let f = ctx.io_file(fd)?;
            // nomu's shared mappings are copies the host does not know of:
            // Linux's EBUSY for a writable one (mapping_deny_writable) is
            // nomu's to give, once the host has made its own checks.
            // (Not a memfd: the host's error, as its checks come first.)
            let seals = hostfs::fcntl_int(f.fd(), F_GET_SEALS, 0).unwrap_or(libc::F_SEAL_SEAL);
            let write_seal = arg as i32 & F_SEAL_WRITE != 0 && seals & F_SEAL_WRITE == 0;
            let valid = arg & !0x3f == 0 && seals & libc::F_SEAL_SEAL == 0 && f.writable();
            if write_seal && valid && writably_mapped(ctx, &f) {
                return Err(Errno::EBUSY);
            }
            hostfs::fcntl_int(f.fd(), F_ADD_SEALS, arg as i32).map(|v| v as u64)
        }
        F_GETPIPE_SZ | F_SETPIPE_SZ => {
            let f = ctx.io_file(fd)?;
            crate::host::fs::fcntl_int(f.fd(), cmd, arg as i32).map(|v| v as u64)
        }
        _ => {
            ctx.io_file(fd)?;
            Err(Errno::EINVAL)
        }
    }
}

pub fn sys_dup(ctx: &mut Ctx, fd: Fd) -> SysResult {
    let limit = ctx.process().nofile_limit();
    let mut files = ctx.process().files.lock().unwrap();
    let file = files.file(fd.0)?;
    files.install(file, false, 0, limit).map(|fd| fd as u64)
}

fn dup_to(ctx: &Ctx, old: Fd, new: Fd, cloexec: bool) -> SysResult {
    // Linux's newfd is an unsigned int: a negative one is just too big.
    let new = new.0 as u32;
    let limit = ctx.process().nofile_limit();
    if new as usize >= limit {
        return Err(Errno::EBADF);
    }
    let mut files = ctx.process().files.lock().unwrap();
    let file = files.file(old.0)?;
    // The old file at `new` (if any) is closed when its last reference goes,
    // after the lock is released.
    let replaced = files.install_at(new as usize, file, cloexec);
    drop(files);
    if let Some(old) = replaced {
        crate::fs::locks::closed(ctx.process().pid, [&old.file]);
    }
    Ok(new as u64)
}

pub fn sys_dup2(ctx: &mut Ctx, old: Fd, new: Fd) -> SysResult {
    if old == new {
        ctx.file(old)?;
        return Ok(new.0 as u32 as u64);
    }
    dup_to(ctx, old, new, false)
}

pub fn sys_dup3(ctx: &mut Ctx, old: Fd, new: Fd, OpenFlags(flags): OpenFlags) -> SysResult {
    if flags & !libc::O_CLOEXEC != 0 || old == new {
        return Err(Errno::EINVAL);
    }
    dup_to(ctx, old, new, flags & libc::O_CLOEXEC != 0)
}

pub fn sys_pipe2(ctx: &mut Ctx, UserPtr(fildes): UserPtr, OpenFlags(flags): OpenFlags) -> SysResult {
    if flags & !(libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_DIRECT) != 0 {
        return Err(Errno::EINVAL);
    }
    let (r, w) = hostfs::pipe2(flags & !libc::O_CLOEXEC)?;
    let cloexec = flags & libc::O_CLOEXEC != 0;
    let r = ctx.install_fd(Arc::new(OpenFile::new(r, b"pipe:[r]".to_vec(), false)), cloexec)?;
    let w = match ctx.install_fd(Arc::new(OpenFile::new(w, b"pipe:[w]".to_vec(), false)), cloexec) {
        Ok(w) => w,
        Err(e) => {
            let _ = ctx.process().files.lock().unwrap().close(r as i32);
            return Err(e);
        }
    };
    if let Err(e) = ctx.mem().write(fildes, &[r as i32, w as i32]) {
        let mut files = ctx.process().files.lock().unwrap();
        let _ = files.close(r as i32);
        let _ = files.close(w as i32);
        return Err(e);
    }
    Ok(0)
}

pub fn sys_pipe(ctx: &mut Ctx, fildes: UserPtr) -> SysResult {
    sys_pipe2(ctx, fildes, OpenFlags(0))
}

/// With RWF_* flags the host's call judges them (EOPNOTSUPP for those it
/// does not know): they are its kernel's.
pub(super) const RWF_NOWAIT: i32 = 0x8;
const RWF_APPEND: i32 = 0x10;
/// RWF_HIPRI, DSYNC, SYNC, NOWAIT, APPEND, NOAPPEND, ATOMIC, DONTCACHE.
const RWF_KNOWN: i32 = 0xff;

/// preadv/preadv2 at `pos` (-1: preadv2 at the file position, as readv).
fn do_preadv(ctx: &Ctx, fd: Fd, iov: u64, vlen: u32, pos: i64, flags: i32, at_position: bool) -> SysResult {
    // A bad offset comes before a bad descriptor.
    if !at_position && pos < 0 {
        return Err(Errno::EINVAL);
    }
    let f = ctx.io_file(fd)?;
    if at_position && flags == 0 {
        let ranges = iov_ranges(ctx, iov, vlen, true)?;
        return file_ops::of(&f).readv(ctx, &f, &ranges);
    }
    let ranges = iov_ranges(ctx, iov, vlen, true)?;
    if at_position && flags & RWF_NOWAIT == 0 {
        wait_ready(ctx, &f, libc::POLLIN)?;
    }
    let at = (!at_position).then_some(pos);
    coherent::read(ctx, &f, at, &ranges, || hostfs::preadv2(f.fd(), &ranges, at.unwrap_or(-1), flags)).map(|n| n as u64)
}

fn do_pwritev(ctx: &Ctx, fd: Fd, iov: u64, vlen: u32, pos: i64, flags: i32, at_position: bool) -> SysResult {
    if !at_position && pos < 0 {
        return Err(Errno::EINVAL);
    }
    let f = ctx.io_file(fd)?;
    if at_position && flags == 0 {
        let ops = file_ops::of(&f);
        ops.writev_ignores_buffers(&f)?;
        let ranges = limited_ranges(ctx, &f, iov_ranges(ctx, iov, vlen, false)?, None, false)?;
        return ops.writev(ctx, &f, &ranges);
    }
    let append = flags & RWF_APPEND != 0;
    let mut ranges = iov_ranges(ctx, iov, vlen, false)?;
    // Flags the host would refuse come first (EOPNOTSUPP).
    if flags & !RWF_KNOWN == 0 {
        ranges = limited_ranges(ctx, &f, ranges, (!at_position).then_some(pos), append)?;
    }
    if at_position && flags & RWF_NOWAIT == 0 {
        wait_ready(ctx, &f, libc::POLLOUT)?;
    }
    let at = (!at_position).then_some(pos);
    coherent::write(ctx, &f, at, append, || hostfs::pwritev2(f.fd(), &ranges, at.unwrap_or(-1), flags))
        .map(|n| n as u64)
}

/// On x86-64 the offset is all of pos_l (pos_h is shifted out).
pub fn sys_preadv(ctx: &mut Ctx, fd: Fd, UserPtr(iov): UserPtr, vlen: u32, pos_l: i64, _pos_h: u64) -> SysResult {
    do_preadv(ctx, fd, iov, vlen, pos_l, 0, false)
}

pub fn sys_pwritev(ctx: &mut Ctx, fd: Fd, UserPtr(iov): UserPtr, vlen: u32, pos_l: i64, _pos_h: u64) -> SysResult {
    do_pwritev(ctx, fd, iov, vlen, pos_l, 0, false)
}

pub fn sys_preadv2(
    ctx: &mut Ctx,
    fd: Fd,
    UserPtr(iov): UserPtr,
    vlen: u32,
    pos_l: i64,
    _pos_h: u64,
    Hex(flags): Hex<i32>,
) -> SysResult {
    do_preadv(ctx, fd, iov, vlen, pos_l, flags, pos_l == -1)
}

pub fn sys_pwritev2(
    ctx: &mut Ctx,
    fd: Fd,
    UserPtr(iov): UserPtr,
    vlen: u32,
    pos_l: i64,
    _pos_h: u64,
    Hex(flags): Hex<i32>,
) -> SysResult {
    do_pwritev(ctx, fd, iov, vlen, pos_l, flags, pos_l == -1)
}

const CLOSE_RANGE_UNSHARE: u32 = 2;
const CLOSE_RANGE_CLOEXEC: u32 = 4;

pub fn sys_close_range(ctx: &mut Ctx, first: u32, last: u32, Hex(flags): Hex<u32>) -> SysResult {
    if flags & !(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC) != 0 || first > last {
        return Err(Errno::EINVAL);
    }
    // A table shared with other threads would become the caller's own
    // (threads already on their way out share nothing any more).
    let sharers = || ctx.process().threads.lock().unwrap().iter().filter(|t| !t.left.load(Ordering::Acquire)).count();
    if flags & CLOSE_RANGE_UNSHARE != 0 && sharers() > 1 {
        ctx.note("CLOSE_RANGE_UNSHARE: threads share one descriptor table in nomu");
        return Err(Errno::EINVAL);
    }
    let cloexec = flags & CLOSE_RANGE_CLOEXEC != 0;
    // Closed once the table is unlocked (the last reference closes the host's).
    let closed = ctx.process().files.lock().unwrap().close_range(first as usize, last as usize, cloexec);
    crate::fs::locks::closed(ctx.process().pid, closed.iter().map(|e| &e.file));
    Ok(0)
}

pub fn sys_fallocate(ctx: &mut Ctx, fd: Fd, mode: i32, offset: i64, len: i64) -> SysResult {
    let f = ctx.io_file(fd)?;
    // A file growing (not FALLOC_FL_KEEP_SIZE) past RLIMIT_FSIZE; bad
    // arguments are the host's to judge first.
    if mode & libc::FALLOC_FL_KEEP_SIZE == 0 && offset >= 0 && len > 0 && f.writable() {
        if let Some(end) = offset.checked_add(len) {
            fsize_allows_size(ctx, f.fd(), end as u64)?;
        }
    }
    coherent::fallocate(ctx, &f, mode, offset, len, || hostfs::fallocate(f.fd(), mode, offset, len).map(drop))
        .map(|()| 0)
}

pub fn sys_fadvise64(ctx: &mut Ctx, fd: Fd, offset: i64, len: i64, advice: i32) -> SysResult {
    let f = ctx.io_file(fd)?;
    hostfs::fadvise64(f.fd(), offset, len, advice).map(|_| 0)
}

pub fn sys_readahead(ctx: &mut Ctx, fd: Fd, offset: i64, count: usize) -> SysResult {
    let f = ctx.io_file(fd)?;
    hostfs::readahead(f.fd(), offset, count).map(|_| 0)
}

pub fn sys_sync(_: &mut Ctx) -> SysResult {
    hostfs::sync();
    Ok(0)
}

pub fn sys_syncfs(ctx: &mut Ctx, fd: Fd) -> SysResult {
    hostfs::syncfs(ctx.io_file(fd)?.fd()).map(|_| 0)
}

pub fn sys_sync_file_range(ctx: &mut Ctx, fd: Fd, offset: i64, nbytes: i64, Hex(flags): Hex<u32>) -> SysResult {
    let f = ctx.io_file(fd)?;
    hostfs::sync_file_range(f.fd(), offset, nbytes, flags).map(|_| 0)
}
