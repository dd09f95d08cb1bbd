//! Checked access to guest memory.
//!
//! A guest pointer is only touched after the caller's address space says
//! the bytes are mapped with the needed access, and then only through the
//! fault-safe copy (or as a [`GuestRange`] handed to the host, which reports
//! its own EFAULT). So a bad pointer gives EFAULT, never a crash of nomu;
//! and a null pointer with length 0 is fine, as on Linux.
//!
//! The pages must also stay this process's until the access is done: on
//! no-MMU a page another thread munmaps goes back to the allocator, and the
//! next process's mmap may get it. A copy holds the address-space lock from
//! the check to its end; a range handed to the host (which may block in
//! the call) is [`Pinned`]: a munmap meanwhile defers freeing its pages
//! until the pin goes.

use super::space::SharedSpace;
use super::PAGE_SIZE;
use crate::abi::errno::Errno;
use crate::host::physmem::{GuestRange, PhysMem};
use crate::host::pod::{self, Pod};
use crate::host::safecopy;

/// The top of the x86-64 user address space (47-bit).
pub const TASK_SIZE_MAX: u64 = (1 << 47) - 4096;

/// Linux's access_ok: [addr, addr + len) lies in user space. Says nothing
/// of whether it is mapped; calls that never touch a buffer (/dev/null)
/// check only this.
pub fn access_ok(addr: u64, len: u64) -> bool {
    addr.checked_add(len).is_some_and(|end| end <= TASK_SIZE_MAX)
}

pub struct UserMem<'a> {
    space: &'a SharedSpace,
}

/// A checked guest range whose pages stay owned by its address space while
/// this lives (see the module comment); derefs to the range.
pub struct Pinned {
    space: SharedSpace,
    range: GuestRange,
}

impl std::ops::Deref for Pinned {
    type Target = GuestRange;
    fn deref(&self) -> &GuestRange {
        &self.range
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if self.range.len() > 0 {
            self.space.lock().unwrap().unpin(self.range.addr(), self.range.len());
        }
    }
}

impl<'a> UserMem<'a> {
    pub fn new(space: &'a SharedSpace) -> UserMem<'a> {
        UserMem { space }
    }

    /// The part of [addr, addr+len) the guest may access, pinned, for
    /// handing to a host call (which then returns a partial count, as
    /// Linux does). EFAULT when not even the first byte is accessible.
    pub fn range(&self, addr: u64, len: usize, write: bool) -> Result<Pinned, Errno> {
        let range = if len == 0 {
            GuestRange::new(PhysMem::get().base(), 0).unwrap()
        } else {
            let mut space = self.space.lock().unwrap();
            let ok = space.accessible_prefix(addr as usize, len, write);
            // A forked child's pages: the run behind the first byte (a
            // host call gets the part up to its VMA's end).
            let (at, ok) = space.translate(addr as usize, ok).unwrap_or((addr as usize, 0));
            let range = GuestRange::new(at, ok).filter(|_| ok > 0).ok_or(Errno::EFAULT)?;
            space.pin(range.addr(), range.len());
            range
        };
        Ok(Pinned { space: self.space.clone(), range })
    }

    /// Runs `call` (a copy, or a host call that never blocks: fstat into
    /// the guest's buffer) on the whole of [addr, addr+len)
    /// with the address space locked: cheaper than a pin. EFAULT
    /// without calling it when the range is not all accessible.
    pub fn with_full_range<T>(
        &self,
        addr: u64,
        len: usize,
        write: bool,
        call: impl FnOnce(GuestRange) -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        let space = self.space.lock().unwrap();
        if space.accessible_prefix(addr as usize, len, write) != len {
            return Err(Errno::EFAULT);
        }
        let at = match space.translate(addr as usize, len) {
            Some((at, run)) if run == len => at,
            // Over two VMAs of a forked child: not one run of pages.
            _ => return Err(Errno::EFAULT),
        };
        let range = GuestRange::new(at, len).ok_or(Errno::EFAULT)?;
        let r = call(range);
        drop(space);
        r
    }

    /// The whole of [addr, addr+len) if it is accessible now, or EFAULT;
    /// neither pinned nor locked. Only for host futex calls that never
    /// write guest memory (a wait compares the word once, a wake writes
    /// nothing): if a racing munmap gives the page to someone else, the
    /// worst is a spurious wake-up, which every futex user allows. Holding
    /// the lock across a wake made the woken thread, whose first step is
    /// often this same lock, preempt the waker only to sleep on it: a
    /// futex round trip on one CPU took 4x native instead of 1x.
    pub fn checked_range(&self, addr: u64, len: usize, write: bool) -> Result<GuestRange, Errno> {
        let space = self.space.lock().unwrap();
        if space.accessible_prefix(addr as usize, len, write) != len {
            return Err(Errno::EFAULT);
        }
        match space.translate(addr as usize, len) {
            Some((at, run)) if run == len => GuestRange::new(at, len).ok_or(Errno::EFAULT),
            _ => Err(Errno::EFAULT),
        }
    }

    /// Compares the guest word at `addr` with `old` and stores `new` if
    /// they are equal, atomically; returns the value found. EFAULT unless
    /// the guest may write the word.
    pub fn cmpxchg_u32(&self, addr: u64, old: u32, new: u32) -> Result<u32, Errno> {
        self.with_full_range(addr, 4, true, |w| Ok(crate::host::physmem::cmpxchg_u32(w, old, new)))
    }

    /// The whole of [addr, addr+len), pinned, or EFAULT.
    pub fn full_range(&self, addr: u64, len: usize, write: bool) -> Result<Pinned, Errno> {
        let r = self.range(addr, len, write)?;
        if r.len() == len {
            Ok(r)
        } else {
            Err(Errno::EFAULT)
        }
    }

    pub fn read_bytes(&self, addr: u64, len: usize) -> Result<Vec<u8>, Errno> {
        let mut buf = vec![0u8; len];
        self.read_into(addr, &mut buf)?;
        Ok(buf)
    }

    pub fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        if buf.is_empty() {
            return Ok(());
        }
        let len = buf.len();
        self.with_pieces(addr, len, false, |at, off, n| safecopy::copy_from_guest(&mut buf[off..off + n], at) == n)
    }

    /// Runs `copy(where, offset, len)` on each run of [addr, addr+len)
    /// with the address space locked, after checking the guest may access
    /// all of it: one run, at `addr`, but in a forked child (its pages are
    /// frames elsewhere), one per VMA. EFAULT if a copy comes up short.
    fn with_pieces(
        &self,
        addr: u64,
        len: usize,
        write: bool,
        mut copy: impl FnMut(usize, usize, usize) -> bool,
    ) -> Result<(), Errno> {
        let space = self.space.lock().unwrap();
        if space.accessible_prefix(addr as usize, len, write) != len {
            return Err(Errno::EFAULT);
        }
        let mut off = 0;
        while off < len {
            let (at, run) = space.translate(addr as usize + off, len - off).ok_or(Errno::EFAULT)?;
            if !copy(at, off, run) {
                return Err(Errno::EFAULT);
            }
            off += run;
        }
        Ok(())
    }

    pub fn read<T: Pod>(&self, addr: u64) -> Result<T, Errno> {
        let mut v = pod::zeroed::<T>();
        self.read_into(addr, pod::as_bytes_mut(&mut v))?;
        Ok(v)
    }

    pub fn write_bytes(&self, addr: u64, data: &[u8]) -> Result<(), Errno> {
        if data.is_empty() {
            return Ok(());
        }
        self.with_pieces(addr, data.len(), true, |at, off, n| safecopy::copy_to_guest(at, &data[off..off + n]) == n)
    }

    pub fn write<T: Pod>(&self, addr: u64, v: &T) -> Result<(), Errno> {
        self.write_bytes(addr, pod::as_bytes(v))
    }

    /// Reads a NUL-terminated string of at most `max` bytes (without the
    /// NUL). ENAMETOOLONG when no NUL comes within `max` bytes; EFAULT when
    /// the string runs into memory the guest cannot read.
    pub fn read_cstring(&self, addr: u64, max: usize) -> Result<Vec<u8>, Errno> {
        // Most strings are short: copy in small chunks (never across a page
        // boundary, where the next page may be unmapped) until the NUL.
        let mut out = Vec::new();
        let mut chunk = [0u8; 256];
        let mut at = addr;
        loop {
            let to_page_end = PAGE_SIZE - (at as usize % PAGE_SIZE);
            let want = to_page_end.min(chunk.len()).min(max + 1 - out.len());
            let buf = &mut chunk[..want];
            self.read_into(at, buf)?;
            if let Some(nul) = buf.iter().position(|&b| b == 0) {
                out.extend_from_slice(&buf[..nul]);
                return Ok(out);
            }
            out.extend_from_slice(buf);
            if out.len() > max {
                return Err(Errno::ENAMETOOLONG);
            }
            at += want as u64;
        }
    }
}
