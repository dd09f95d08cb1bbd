//! splice, tee, vmsplice and copy_file_range: the host's, between the host
//! descriptors behind the guest's (the same kinds of files, so the same
//! answers: EINVAL when neither end of a splice is a pipe, EXDEV and
//! EINVAL from copy_file_range...). Offsets come from and go back to guest
//! memory in Linux's order; a wait on a pipe is a host call a signal ends.
//! vmsplice copies: the host's would lend the pipe nomu's physical pages,
//! which nomu may give to another guest once this one unmaps them.

use super::args::{Fd, Hex, UserPtr};
use super::io::{iov_ranges, RWF_NOWAIT, UIO_MAXIOV};
use super::{coherent, Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::fs::file::{FileKind, OpenFile};
use crate::host::fs as hostfs;
use crate::host::sys as hostsys;
use std::os::fd::AsRawFd;

const SPLICE_F_NONBLOCK: u32 = 2;
const SPLICE_F_ALL: u32 = 0xf;

/// A pipe or FIFO (Linux's get_pipe_info).
fn is_pipe(f: &OpenFile) -> bool {
    f.kind() == FileKind::Fifo
}

/// A splice's or copy's `len` cut at RLIMIT_FSIZE where it writes a
/// regular file (io::fsize_allowed); a negative offset is the host's to
/// refuse.
fn fsize_limited(ctx: &Ctx, out: &OpenFile, pos: Option<i64>, len: usize) -> Result<usize, Errno> {
    if pos.is_some_and(|p| p < 0) {
        return Ok(len);
    }
    super::io::fsize_allowed(ctx, out, pos, false, len)
}

/// Reads a loff_t the call was given (None for a null pointer).
fn read_offset(ctx: &Ctx, ptr: u64) -> Result<Option<i64>, Errno> {
    if ptr == 0 {
        return Ok(None);
    }
    ctx.mem().read(ptr).map(Some)
}

pub fn sys_splice(
    ctx: &mut Ctx,
    fd_in: Fd,
    UserPtr(off_in): UserPtr,
    fd_out: Fd,
    UserPtr(off_out): UserPtr,
    len: usize,
    Hex(flags): Hex<u32>,
) -> SysResult {
    // Linux's order: the length, the flags, both descriptors, an offset
    // given for a pipe (ESPIPE), then the offsets read (out first).
    if len == 0 {
        return Ok(0);
    }
    if flags & !SPLICE_F_ALL != 0 {
        return Err(Errno::EINVAL);
    }
    let input = ctx.io_file(fd_in)?;
    let out = ctx.io_file(fd_out)?;
    if (is_pipe(&input) && off_in != 0) || (is_pipe(&out) && off_out != 0) {
        return Err(Errno::ESPIPE);
    }
    let mut pos_out = read_offset(ctx, off_out)?;
    let mut pos_in = read_offset(ctx, off_in)?;
    let len = fsize_limited(ctx, &out, pos_out, len)?;
    let (from, to) = (pos_in, pos_out);
    coherent::copy_from(ctx, &input, from, len)?;
    let n =
        ctx.t.block_in_host(|| hostfs::splice(input.fd(), pos_in.as_mut(), out.fd(), pos_out.as_mut(), len, flags))?;
    coherent::copied_into(ctx, &out, to, n)?;
    if let Some(p) = pos_out {
        ctx.mem().write(off_out, &p)?;
    }
    if let Some(p) = pos_in {
        ctx.mem().write(off_in, &p)?;
    }
    Ok(n as u64)
}

pub fn sys_tee(ctx: &mut Ctx, fd_in: Fd, fd_out: Fd, len: usize, Hex(flags): Hex<u32>) -> SysResult {
    if flags & !SPLICE_F_ALL != 0 {
        return Err(Errno::EINVAL);
    }
    if len == 0 {
        return Ok(0);
    }
    let input = ctx.io_file(fd_in)?;
    let out = ctx.io_file(fd_out)?;
    ctx.t.block_in_host(|| hostfs::tee(input.fd(), out.fd(), len, flags)).map(|n| n as u64)
}

/// vmsplice(2) as a copy into or out of the pipe: as much as there is room
/// (or data) for without waiting, and a wait only while there is none,
/// unless SPLICE_F_NONBLOCK (the descriptor's O_NONBLOCK does not count,
/// as on Linux).
pub fn sys_vmsplice(ctx: &mut Ctx, fd: Fd, UserPtr(iov): UserPtr, nr_segs: u64, Hex(flags): Hex<u32>) -> SysResult {
    if flags & !SPLICE_F_ALL != 0 {
        return Err(Errno::EINVAL);
    }
    let f = ctx.io_file(fd)?;
    // Written to if it is open for writing, else read from.
    let to_pipe = match (f.writable(), f.readable()) {
        (true, _) => true,
        (false, true) => false,
        _ => return Err(Errno::EBADF),
    };
    if nr_segs > UIO_MAXIOV as u64 {
        return Err(Errno::EINVAL);
    }
    let ranges = iov_ranges(ctx, iov, nr_segs as u32, !to_pipe)?;
    if ranges.iter().all(|r| r.len() == 0) {
        return Ok(0);
    }
    if !is_pipe(&f) {
        return Err(Errno::EBADF);
    }
    // Linux gives the pipe the pages themselves (get_user_pages), which
    // secret memory refuses: the buffers before the first secret one go,
    // or EFAULT.
    let secret = if to_pipe { ranges.iter().position(|r| r.in_mermap()) } else { None };
    let ranges = &ranges[..secret.unwrap_or(ranges.len())];
    if ranges.is_empty() {
        return Err(Errno::EFAULT);
    }
    let events = if to_pipe { libc::POLLOUT } else { libc::POLLIN };
    let mut pfd = [libc::pollfd { fd: f.fd().as_raw_fd(), events, revents: 0 }];
    let mut wait = |ctx: &mut Ctx| {
        ctx.t.block_in_host(|| {
            pfd[0].revents = 0;
            hostsys::poll(&mut pfd, None)
        })
    };
    loop {
        let moved = if to_pipe {
            hostfs::pwritev2(f.fd(), ranges, -1, RWF_NOWAIT)
        } else {
            hostfs::preadv2(f.fd(), ranges, -1, RWF_NOWAIT)
        };
        match moved {
            Err(Errno::EAGAIN) if flags & SPLICE_F_NONBLOCK == 0 => {
                wait(ctx)?;
            }
            // A pipe that splice has used takes no RWF_NOWAIT (Linux's
            // pipe_clear_nowait): wait until it is ready, then move what
            // the host's readv or writev moves.
            Err(Errno::EOPNOTSUPP) => {
                let mut now = [libc::pollfd { fd: f.fd().as_raw_fd(), events, revents: 0 }];
                if flags & SPLICE_F_NONBLOCK != 0 {
                    if hostsys::poll(&mut now, Some(std::time::Duration::ZERO))? == 0 {
                        return Err(Errno::EAGAIN);
                    }
                } else {
                    wait(ctx)?;
                }
                let moved = ctx.t.block_in_host(|| {
                    if to_pipe {
                        hostfs::writev_interruptible(f.fd(), ranges)
                    } else {
                        hostfs::readv_interruptible(f.fd(), ranges)
                    }
                })?;
                return Ok(moved as u64);
            }
            r => return r.map(|n| n as u64),
        }
    }
}

pub fn sys_copy_file_range(
    ctx: &mut Ctx,
    fd_in: Fd,
    UserPtr(off_in): UserPtr,
    fd_out: Fd,
    UserPtr(off_out): UserPtr,
    len: usize,
    Hex(flags): Hex<u32>,
) -> SysResult {
    // Linux's order: both descriptors, both offsets read, then the flags.
    let input = ctx.io_file(fd_in)?;
    let out = ctx.io_file(fd_out)?;
    let mut pos_in = read_offset(ctx, off_in)?;
    let mut pos_out = read_offset(ctx, off_out)?;
    if flags != 0 {
        return Err(Errno::EINVAL);
    }
    let len = if input.kind() == FileKind::Regular { fsize_limited(ctx, &out, pos_out, len)? } else { len };
    let (from, to) = (pos_in, pos_out);
    coherent::copy_from(ctx, &input, from, len)?;
    let n = hostfs::copy_file_range(input.fd(), pos_in.as_mut(), out.fd(), pos_out.as_mut(), len, flags)?;
    coherent::copied_into(ctx, &out, to, n)?;
    if n > 0 {
        if let Some(p) = pos_in {
            ctx.mem().write(off_in, &p)?;
        }
        if let Some(p) = pos_out {
            ctx.mem().write(off_out, &p)?;
        }
    }
    Ok(n as u64)
}
