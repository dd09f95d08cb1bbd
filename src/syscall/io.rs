//! Descriptor I/O: read/write and friends, ioctl, fcntl, dup, pipe, close.

use super::file_ops::{self, FIONREAD};
use super::{int, Args, Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::abi::GuestIovec;
use crate::fs::file::{FileKind, FileType, OpenFile};
use crate::host::fs as hostfs;
use crate::host::physmem::GuestRange;
use crate::host::sys as hostsys;
use crate::mm::uaccess::{access_ok, Pinned};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

/// Linux caps one read or write at this many bytes.
pub const MAX_RW_COUNT: usize = 0x7fff_f000;
const UIO_MAXIOV: usize = 1024;

impl Ctx<'_, '_> {
    pub fn file(&self, fd: u64) -> Result<Arc<OpenFile>, Errno> {
        self.process().files.lock().unwrap().file(int(fd))
    }

    /// A descriptor that allows I/O (not an O_PATH handle).
    pub fn io_file(&self, fd: u64) -> Result<Arc<OpenFile>, Errno> {
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

fn count(len: u64) -> usize {
    (len as usize).min(MAX_RW_COUNT)
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
    len: u64,
    io: impl FnOnce() -> SysResult,
) -> SysResult {
    let in_user = access_ok(buf, len);
    match if in_user { io() } else { Err(Errno::EFAULT) } {
        Err(Errno::EFAULT) if positioned && !positional(f) => Err(Errno::ESPIPE),
        Err(Errno::EFAULT) if !(if write { f.writable() } else { f.readable() }) => Err(Errno::EBADF),
        Err(Errno::EFAULT) if in_user && !write && f.kind() == FileKind::Directory => Err(Errno::EISDIR),
        r => r,
    }
}

pub fn sys_read(ctx: &mut Ctx, a: &Args) -> SysResult {
    let f = ctx.io_file(a[0])?;
    rw_in_order(&f, false, false, a[1], a[2], || file_ops::of(&f).read(ctx, &f, a[1], count(a[2])))
}

pub fn sys_write(ctx: &mut Ctx, a: &Args) -> SysResult {
    let f = ctx.io_file(a[0])?;
    rw_in_order(&f, true, false, a[1], a[2], || file_ops::of(&f).write(ctx, &f, a[1], count(a[2])))
}

pub fn sys_pread64(ctx: &mut Ctx, a: &Args) -> SysResult {
    // Linux checks pos before the descriptor (ksys_pread64).
    if (a[3] as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    let f = ctx.io_file(a[0])?;
    rw_in_order(&f, false, true, a[1], a[2], || {
        let buf = ctx.mem().range(a[1], count(a[2]), true)?;
        hostfs::pread(f.fd(), *buf, a[3] as i64).map(|n| n as u64)
    })
}

pub fn sys_pwrite64(ctx: &mut Ctx, a: &Args) -> SysResult {
    // Linux checks pos before the descriptor (ksys_pwrite64).
    if (a[3] as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    let f = ctx.io_file(a[0])?;
    rw_in_order(&f, true, true, a[1], a[2], || {
        let buf = ctx.mem().range(a[1], count(a[2]), false)?;
        hostfs::pwrite(f.fd(), *buf, a[3] as i64).map(|n| n as u64)
    })
}

/// A guest iovec array's buffers, pinned while the call uses them.
struct IoRanges {
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
fn iov_ranges(ctx: &Ctx, iov: u64, cnt: u64, write: bool) -> Result<IoRanges, Errno> {
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
    if iovs.iter().any(|v| !access_ok(v.base, if cnt == 1 { count(v.len) as u64 } else { v.len })) {
        return Err(Errno::EFAULT);
    }
    let mut ranges = Vec::with_capacity(cnt);
    let mut short = false;
    for v in iovs {
        if short || v.len == 0 {
            continue;
        }
        match mem.range(v.base, count(v.len), write) {
            Ok(r) => {
                short = r.len() < v.len as usize;
                ranges.push(r);
            }
            Err(e) if ranges.is_empty() => return Err(e),
            Err(_) => short = true,
        }
    }
    Ok(IoRanges { ranges: ranges.iter().map(|r| **r).collect(), _pins: ranges })
}

pub fn sys_readv(ctx: &mut Ctx, a: &Args) -> SysResult {
    let f = ctx.io_file(a[0])?;
    // The mode before the iovec (vfs_readv).
    if !f.readable() {
        return Err(Errno::EBADF);
    }
    let ranges = iov_ranges(ctx, a[1], a[2], true)?;
    file_ops::of(&f).readv(ctx, &f, &ranges)
}

pub fn sys_writev(ctx: &mut Ctx, a: &Args) -> SysResult {
    let f = ctx.io_file(a[0])?;
    // The mode before the iovec (vfs_writev).
    if !f.writable() {
        return Err(Errno::EBADF);
    }
    let ops = file_ops::of(&f);
    ops.writev_ignores_buffers(&f)?;
    let ranges = iov_ranges(ctx, a[1], a[2], false)?;
    ops.writev(ctx, &f, &ranges)
}

pub fn sys_sendfile(ctx: &mut Ctx, a: &Args) -> SysResult {
    // Linux's order (sendfile64, do_sendfile): the offset is read, the
    // input judged (its mode, whether it has offsets, the offset), then
    // the output.
    let mut off: Option<i64> = if a[2] != 0 { Some(ctx.mem().read(a[2])?) } else { None };
    let input = ctx.io_file(a[1])?;
    if !input.readable() {
        return Err(Errno::EBADF);
    }
    if off.is_some() && !positional(&input) {
        return Err(Errno::ESPIPE);
    }
    if off.is_some_and(|o| o < 0) {
        return Err(Errno::EINVAL);
    }
    let out = ctx.io_file(a[0])?;
    if !out.writable() {
        return Err(Errno::EBADF);
    }
    wait_ready(ctx, &input, libc::POLLIN)?;
    wait_ready(ctx, &out, libc::POLLOUT)?;
    let n = hostfs::sendfile(out.fd(), input.fd(), off.as_mut(), count(a[3]))?;
    if let Some(o) = off {
        ctx.mem().write(a[2], &o)?;
    }
    Ok(n as u64)
}

pub fn sys_lseek(ctx: &mut Ctx, a: &Args) -> SysResult {
    let f = ctx.io_file(a[0])?;
    hostfs::lseek(f.fd(), a[1] as i64, int(a[2]))
}

pub fn sys_close(ctx: &mut Ctx, a: &Args) -> SysResult {
    ctx.process().files.lock().unwrap().close(int(a[0]))?;
    Ok(0)
}

pub fn sys_fsync(ctx: &mut Ctx, a: &Args) -> SysResult {
    hostfs::fsync(ctx.io_file(a[0])?.fd(), false).map(|_| 0)
}

pub fn sys_fdatasync(ctx: &mut Ctx, a: &Args) -> SysResult {
    hostfs::fsync(ctx.io_file(a[0])?.fd(), true).map(|_| 0)
}

pub fn sys_ftruncate(ctx: &mut Ctx, a: &Args) -> SysResult {
    // Linux checks the length before the descriptor (do_sys_ftruncate).
    if (a[1] as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    let f = ctx.io_file(a[0])?;
    hostfs::ftruncate(f.fd(), a[1] as i64).map(|_| 0)
}

pub fn sys_getdents64(ctx: &mut Ctx, a: &Args) -> SysResult {
    let f = ctx.io_file(a[0])?;
    file_ops::of(&f).getdents(ctx, &f, a[1], count(a[2]))
}

const FIONBIO: u64 = 0x5421;
const FIONCLEX: u64 = 0x5450;
const FIOCLEX: u64 = 0x5451;

pub fn sys_ioctl(ctx: &mut Ctx, a: &Args) -> SysResult {
    let f = ctx.io_file(a[0])?;
    let (req, arg) = (a[1] & 0xffff_ffff, a[2]);
    let mem = ctx.mem();
    match req {
        FIOCLEX | FIONCLEX => {
            ctx.process().files.lock().unwrap().set_cloexec(int(a[0]), req == FIOCLEX)?;
            Ok(0)
        }
        FIONBIO => {
            let on: i32 = mem.read(arg)?;
            let fl = hostfs::getfl(f.fd())?;
            hostfs::setfl(f.fd(), if on != 0 { fl | libc::O_NONBLOCK } else { fl & !libc::O_NONBLOCK })?;
            Ok(0)
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
const F_DUPFD_CLOEXEC: i32 = 1030;
const F_SETPIPE_SZ: i32 = 1031;
const F_GETPIPE_SZ: i32 = 1032;

fn dup_from(ctx: &Ctx, fd: u64, min: u64, cloexec: bool) -> SysResult {
    let limit = ctx.process().nofile_limit();
    let mut files = ctx.process().files.lock().unwrap();
    let file = files.file(int(fd))?;
    // fcntl finds the descriptor before f_dupfd judges the lowest number.
    if min as usize >= limit {
        return Err(Errno::EINVAL);
    }
    files.install(file, cloexec, min as usize, limit).map(|fd| fd as u64)
}

pub fn sys_fcntl(ctx: &mut Ctx, a: &Args) -> SysResult {
    let (fd, cmd, arg) = (a[0], int(a[1]), a[2]);
    match cmd {
        F_DUPFD | F_DUPFD_CLOEXEC => dup_from(ctx, fd, arg as u32 as u64, cmd == F_DUPFD_CLOEXEC),
        F_GETFD => Ok(ctx.process().files.lock().unwrap().get(int(fd))?.cloexec as u64),
        F_SETFD => {
            ctx.process().files.lock().unwrap().set_cloexec(int(fd), arg & 1 != 0)?;
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
            let changeable = libc::O_APPEND | libc::O_NONBLOCK | libc::O_ASYNC | libc::O_DIRECT | libc::O_NOATIME;
            let old = hostfs::getfl(f.fd())?;
            hostfs::setfl(f.fd(), (old & !changeable) | (int(arg) & changeable)).map(|_| 0)
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

pub fn sys_dup(ctx: &mut Ctx, a: &Args) -> SysResult {
    let limit = ctx.process().nofile_limit();
    let mut files = ctx.process().files.lock().unwrap();
    let file = files.file(int(a[0]))?;
    files.install(file, false, 0, limit).map(|fd| fd as u64)
}

fn dup_to(ctx: &Ctx, old: u64, new: u64, cloexec: bool) -> SysResult {
    let limit = ctx.process().nofile_limit();
    if new as u32 as usize >= limit {
        return Err(Errno::EBADF);
    }
    let mut files = ctx.process().files.lock().unwrap();
    let file = files.file(int(old))?;
    // The old file at `new` (if any) is closed when its last reference goes,
    // after the lock is released.
    let _replaced = files.install_at(new as u32 as usize, file, cloexec);
    Ok(new as u32 as u64)
}

pub fn sys_dup2(ctx: &mut Ctx, a: &Args) -> SysResult {
    if int(a[0]) == int(a[1]) {
        ctx.file(a[0])?;
        return Ok(a[1] as u32 as u64);
    }
    dup_to(ctx, a[0], a[1], false)
}

pub fn sys_dup3(ctx: &mut Ctx, a: &Args) -> SysResult {
    let flags = int(a[2]);
    if flags & !libc::O_CLOEXEC != 0 || int(a[0]) == int(a[1]) {
        return Err(Errno::EINVAL);
    }
    dup_to(ctx, a[0], a[1], flags & libc::O_CLOEXEC != 0)
}

pub fn sys_pipe2(ctx: &mut Ctx, a: &Args) -> SysResult {
    let flags = int(a[1]);
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
    if let Err(e) = ctx.mem().write(a[0], &[r as i32, w as i32]) {
        let mut files = ctx.process().files.lock().unwrap();
        let _ = files.close(r as i32);
        let _ = files.close(w as i32);
        return Err(e);
    }
    Ok(0)
}

pub fn sys_pipe(ctx: &mut Ctx, a: &Args) -> SysResult {
    sys_pipe2(ctx, &[a[0], 0, 0, 0, 0, 0])
}
