//! Reads and writes of a regular file through a descriptor, kept coherent
//! with the file's MAP_SHARED mappings. On Linux both reach the one page
//! cache; in nomu a shared mapping shows pages of its own
//! (mm::shared_file), held while some mapping of the file lives. Each call
//! that moves a file's bytes goes through here: a read sees what the
//! mappings wrote, a write or a truncation reaches what they show, and a
//! copy the host makes from the file gets the mappings' bytes first. While
//! no file has a shared mapping, this costs an atomic load per call; while
//! some has, two for a file whose bucket (mm::shared_file) has none.

use super::Ctx;
use crate::abi::errno::Errno;
use crate::fs::file::OpenFile;
use crate::host::fs as hostfs;
use crate::host::physmem::GuestRange;
use std::os::fd::BorrowedFd;

/// Where the `n` bytes a call just moved lie in the file: at `pos`, or
/// (None) ending at the description's offset now.
fn moved_from(f: &OpenFile, pos: Option<i64>, n: usize) -> Result<u64, Errno> {
    match pos {
        Some(p) => Ok(p as u64),
        None => Ok(hostfs::lseek(f.fd(), 0, libc::SEEK_CUR)?.saturating_sub(n as u64)),
    }
}

/// A read of `f` at `pos` (None: at its offset) into `ranges`, in order:
/// `read` makes it and returns the bytes read; then the bytes the file's
/// shared mappings show there replace the host's.
pub fn read(
    ctx: &Ctx,
    f: &OpenFile,
    pos: Option<i64>,
    ranges: &[GuestRange],
    read: impl FnOnce() -> Result<usize, Errno>,
) -> Result<usize, Errno> {
    let Some(pages) = ctx.kernel().shared_files.held_for(f) else { return read() };
    let n = read()?;
    if n > 0 {
        pages.overlay(moved_from(f, pos, n)?, &super::io::first_bytes(ranges, n));
    }
    Ok(n)
}

/// A write of `f` at `pos` (None: at its offset; `append`: at its end,
/// RWF_APPEND): `write` makes it and returns the bytes written, which then
/// reach the pages the file's shared mappings show. Called with the guest's
/// buffers pinned already (the pages' I/O lock comes after the address
/// space's lock, as in write-back).
pub fn write(
    ctx: &Ctx,
    f: &OpenFile,
    pos: Option<i64>,
    append: bool,
    write: impl FnOnce() -> Result<usize, Errno>,
) -> Result<usize, Errno> {
    let Some(pages) = ctx.kernel().shared_files.held_for(f) else { return write() };
    let _io = pages.lock_io();
    let n = write()?;
    if n > 0 {
        // O_APPEND appends even at a pwrite's offset (Linux's pwrite(2) BUGS).
        let at = if append || hostfs::getfl(f.fd())? & libc::O_APPEND != 0 {
            (hostfs::fstat(f.fd())?.st_size as u64).saturating_sub(n as u64)
        } else {
            moved_from(f, pos, n)?
        };
        pages.refresh(at, n as u64);
    }
    Ok(n)
}

/// A change of the size of the regular file open at `fd` (ftruncate,
/// truncate, O_TRUNC): made by `resize`, then the pages past the smaller
/// of the two sizes read again (zero past the end, as Linux drops or
/// zeroes them).
pub fn resize(ctx: &Ctx, fd: BorrowedFd, resize: impl FnOnce() -> Result<(), Errno>) -> Result<(), Errno> {
    if !ctx.kernel().shared_files.any() {
        return resize();
    }
    let st = hostfs::fstat(fd)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return resize();
    }
    let Some(pages) = ctx.kernel().shared_files.held((st.st_dev, st.st_ino)) else { return resize() };
    let _io = pages.lock_io();
    resize()?;
    let now = hostfs::fstat(fd)?.st_size;
    pages.refresh(st.st_size.min(now) as u64, u64::MAX);
    Ok(())
}

/// An fallocate of `f`: the pages of a range it zeroes (punch hole, zero
/// range) read again; one that moves the file's bytes (collapse, insert
/// range) gives the file the pages' bytes first and has them read again
/// from `off` on. Allocating changes no byte.
pub fn fallocate(
    ctx: &Ctx,
    f: &OpenFile,
    mode: i32,
    off: i64,
    len: i64,
    fallocate: impl FnOnce() -> Result<(), Errno>,
) -> Result<(), Errno> {
    let Some(pages) = ctx.kernel().shared_files.held_for(f) else { return fallocate() };
    let (off, len) = (off.max(0) as u64, len.max(0) as u64);
    let moves = mode & (libc::FALLOC_FL_COLLAPSE_RANGE | libc::FALLOC_FL_INSERT_RANGE) != 0;
    let zeroes = mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE) != 0;
    if moves {
        pages.write_back(off, u64::MAX);
    }
    let _io = pages.lock_io();
    fallocate()?;
    if moves {
        pages.refresh(off, u64::MAX);
    } else if zeroes {
        pages.refresh(off, len);
    }
    Ok(())
}

/// Before the host copies up to `len` bytes of `f` from `pos` (None: its
/// offset) itself (sendfile, copy_file_range, splice): the file gets the
/// bytes its shared mappings show there.
pub fn copy_from(ctx: &Ctx, f: &OpenFile, pos: Option<i64>, len: usize) -> Result<(), Errno> {
    let Some(pages) = ctx.kernel().shared_files.held_for(f) else { return Ok(()) };
    let at = match pos {
        Some(p) => p.max(0) as u64,
        None => hostfs::lseek(f.fd(), 0, libc::SEEK_CUR)?,
    };
    pages.write_back(at, len as u64);
    Ok(())
}

/// After the host copied `n` bytes into `f` at `pos` (None: ending at its
/// offset now) itself: the pages its shared mappings show there read
/// them. Unlike [`write`], the copy was made without the pages' I/O lock
/// (a splice may wait on its pipe meanwhile).
pub fn copied_into(ctx: &Ctx, f: &OpenFile, pos: Option<i64>, n: usize) -> Result<(), Errno> {
    if n == 0 {
        return Ok(());
    }
    let Some(pages) = ctx.kernel().shared_files.held_for(f) else { return Ok(()) };
    let at = moved_from(f, pos, n)?;
    let _io = pages.lock_io();
    pages.refresh(at, n as u64);
    Ok(())
}
