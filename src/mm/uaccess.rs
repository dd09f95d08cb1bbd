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
//!
//! Secret memory (a memfd_secret mapping: its pages are in UNMAPPED
//! pageblocks, mm::mapping's `PageSource::unmapped`) is reached through
//! the mermap only (host::mermap), never at the owner's mapping nor at the
//! pages' own address: a copy maps the pages into the thread's mermap
//! slot, copies and unmaps; a range handed to a host call is a mermap
//! mapping of its pages, held (with the file's pages) while the
//! [`Pinned`] lives, and cut to what fits in the slot (the host call then
//! returns a partial count, as for a range that runs into unmapped
//! memory). A range that starts in ordinary memory stops where secret
//! memory starts. A failed mermap map is the guest's ENOMEM.

use super::space::{AddressSpace, SharedSpace, Unmapped};
use super::PAGE_SIZE;
use crate::abi::errno::Errno;
use crate::host::mermap;
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

/// Pages of the mermap slot a pinned secret range leaves free for the
/// copies its syscall makes meanwhile (a struct, a string, a page-cut
/// chunk of a larger copy).
const COPY_ROOM: usize = 4 * PAGE_SIZE;

/// Where a piece of a copy is reached.
enum Where<'m> {
    /// At this address of nomu's process (the guest's own, or a forked
    /// child's frame).
    Guest(usize),
    /// At this offset into a mermap mapping of secret pages.
    Mermap(&'m mermap::Mapping, usize),
}

/// Maps into the mermap the pages behind [addr+done, addr+u.len) of a
/// secret VMA (`u` from `AddressSpace::unmapped_at` at `addr`), at most
/// `room` bytes of pages: the mapping, the offset in it of `addr+done`,
/// and how many bytes from there it reaches. EFAULT when not even that
/// byte's page fits, the mermap's error when the map fails.
fn map_unmapped(addr: usize, u: &Unmapped, done: usize, room: usize) -> Result<(mermap::Mapping, usize, usize), Errno> {
    let lead = addr % PAGE_SIZE;
    let first = (lead + done) & !(PAGE_SIZE - 1);
    let end = (lead + u.len).next_multiple_of(PAGE_SIZE).min((first + room) & !(PAGE_SIZE - 1));
    if end <= lead + done {
        return Err(Errno::EFAULT);
    }
    // The runs (from addr's page on) cut to [first, end).
    let mut runs = Vec::new();
    let mut at = 0;
    for &(phys, n) in &u.runs {
        let (s, e) = (at.max(first), (at + n).min(end));
        if s < e {
            runs.push((phys + (s - at), e - s));
        }
        at += n;
    }
    let m = mermap::Mapping::of_runs(&runs)?;
    let off = lead + done - first;
    Ok((m, off, (end - first - off).min(u.len - done)))
}

pub struct UserMem<'a> {
    space: &'a SharedSpace,
}

/// A checked guest range whose pages stay owned by its address space while
/// this lives (see the module comment); derefs to the range.
pub struct Pinned {
    space: SharedSpace,
    range: GuestRange,
    /// For secret memory, instead of a pin: the mermap mapping the range
    /// is reached at, and the pages' owner (so a munmap and close
    /// meanwhile cannot free them).
    mermap: Option<(mermap::Mapping, std::sync::Arc<dyn crate::mm::mapping::PageSource>)>,
}

impl std::ops::Deref for Pinned {
    type Target = GuestRange;
    fn deref(&self) -> &GuestRange {
        &self.range
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if self.range.len() > 0 && self.mermap.is_none() {
            self.space.lock().unwrap().unpin(self.range.addr(), self.range.len());
        }
    }
}

/// [`UserMem::runs`]: a buffer's pinned runs of physical pages, in order.
pub struct Runs {
    first: Pinned,
    more: Vec<Pinned>,
}

impl Runs {
    /// The bytes they cover (the buffer's accessible prefix).
    pub fn len(&self) -> usize {
        self.first.len() + self.more.iter().map(|p| p.len()).sum::<usize>()
    }

    /// Calls `call` with the runs as ranges for one host call (a readv or
    /// writev when there are several).
    pub fn with_ranges<T>(&self, call: impl FnOnce(&[GuestRange]) -> T) -> T {
        if self.more.is_empty() {
            call(&[*self.first])
        } else {
            let all: Vec<GuestRange> = std::iter::once(*self.first).chain(self.more.iter().map(|p| **p)).collect();
            call(&all)
        }
    }

    /// The pins, for a caller that keeps them with other buffers' pins.
    pub fn into_pins(self) -> impl Iterator<Item = Pinned> {
        std::iter::once(self.first).chain(self.more)
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
        if len == 0 {
            let range = GuestRange::new(PhysMem::get().base(), 0).unwrap();
            return Ok(Pinned { space: self.space.clone(), range, mermap: None });
        }
        let mut space = self.space.lock().unwrap();
        if space.direct(addr as usize, len, write) {
            let range = GuestRange::new(addr as usize, len).ok_or(Errno::EFAULT)?;
            space.pin(range.addr(), range.len());
            return Ok(Pinned { space: self.space.clone(), range, mermap: None });
        }
        let ok = space.accessible_prefix(addr as usize, len, write);
        if ok > 0 {
            if let Some(u) = space.unmapped_at(addr as usize, ok) {
                drop(space);
                // Room for the copies the call may make meanwhile.
                let room = mermap::room().saturating_sub(COPY_ROOM);
                let (m, off, n) = map_unmapped(addr as usize, &u, 0, room)?;
                let range = m.guest_range(addr as usize, off, n).ok_or(Errno::EFAULT)?;
                return Ok(Pinned { space: self.space.clone(), range, mermap: Some((m, u.source)) });
            }
        }
        let ok = space.before_unmapped(addr as usize, ok);
        space.prepare_access(addr as usize, ok, write);
        // A forked child's pages: the run behind the first byte (a host
        // call gets the part up to its VMA's end).
        let (at, ok) = space.translate(addr as usize, ok).unwrap_or((addr as usize, 0));
        let range = GuestRange::new(at, ok).filter(|_| ok > 0).ok_or(Errno::EFAULT)?;
        space.pin(range.addr(), range.len());
        Ok(Pinned { space: self.space.clone(), range, mermap: None })
    }

    /// [`Self::range`] and the runs after it, as long as the buffer stays
    /// accessible: a forked child's buffer over two of its mappings is two
    /// runs of physical pages, and the host call gets both, as Linux's copy
    /// would reach both (one run cut a 2 MiB pipe read of CPython's
    /// multiprocessing short, which it took for EFAULT). EFAULT only when
    /// not even the first byte is accessible. Secret memory's one mermap
    /// mapping is not followed by another.
    pub fn runs(&self, addr: u64, len: usize, write: bool) -> Result<Runs, Errno> {
        let first = self.range(addr, len, write)?;
        let mut done = first.len();
        let mut more = Vec::new();
        if first.mermap.is_none() {
            while done < len {
                match self.range(addr + done as u64, len - done, write) {
                    Ok(r) if r.len() > 0 && r.mermap.is_none() => {
                        done += r.len();
                        more.push(r);
                    }
                    _ => break,
                }
            }
        }
        Ok(Runs { first, more })
    }

    /// Runs `call` (a copy, or a host call that never blocks: fstat into
    /// the guest's buffer) on the whole of [addr, addr+len)
    /// with the address space locked: cheaper than a pin. EFAULT
    /// without calling it when the range is not all accessible.
    ///
    /// The common case is inlined into the caller and the rest is not:
    /// every `ret` between a host call and guest code costs a return
    /// misprediction (the host's syscall path leaves the predictor none of
    /// nomu's entries), ~6 ns each on the Zen 5 VM.
    #[inline]
    pub fn with_full_range<T>(
        &self,
        addr: u64,
        len: usize,
        write: bool,
        call: impl FnOnce(GuestRange) -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        let space = self.space.lock().unwrap();
        if space.direct(addr as usize, len, write) {
            let r = call(GuestRange::new(addr as usize, len).ok_or(Errno::EFAULT)?);
            drop(space);
            return r;
        }
        Self::with_full_range_indirect(space, addr, len, write, call)
    }

    /// [`Self::with_full_range`] where the range is not simply the
    /// pages at its address.
    #[inline(never)]
    fn with_full_range_indirect<T>(
        mut space: crate::sync::OrderedGuard<'_, AddressSpace, { crate::sync::MM }>,
        addr: u64,
        len: usize,
        write: bool,
        call: impl FnOnce(GuestRange) -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        if space.accessible_prefix(addr as usize, len, write) != len {
            return Err(Errno::EFAULT);
        }
        if let Some(u) = space.unmapped_at(addr as usize, len) {
            // Secret memory: the call reaches it through the mermap, all
            // of it or EFAULT (one VMA, and a slot at most).
            if u.len != len {
                return Err(Errno::EFAULT);
            }
            let (m, off, n) = map_unmapped(addr as usize, &u, 0, mermap::room())?;
            if n != len {
                return Err(Errno::EFAULT);
            }
            let r = call(m.guest_range(addr as usize, off, n).ok_or(Errno::EFAULT)?);
            drop(m);
            drop(space);
            return r;
        }
        if space.before_unmapped(addr as usize, len) != len {
            return Err(Errno::EFAULT);
        }
        space.prepare_access(addr as usize, len, write);
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
        let mut space = self.space.lock().unwrap();
        if space.direct(addr as usize, len, write) {
            return GuestRange::new(addr as usize, len).ok_or(Errno::EFAULT);
        }
        if space.accessible_prefix(addr as usize, len, write) != len {
            return Err(Errno::EFAULT);
        }
        space.prepare_access(addr as usize, len, write);
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
        self.with_pieces(addr, len, false, |at, off, n| match at {
            Where::Guest(at) => safecopy::copy_from_guest(&mut buf[off..off + n], at) == n,
            Where::Mermap(m, at) => {
                m.read(at, &mut buf[off..off + n]);
                true
            }
        })
    }

    /// Runs `copy(where, offset, len)` on each run of [addr, addr+len)
    /// with the address space locked, after checking the guest may access
    /// all of it: one run, at `addr`, but in a forked child (its pages are
    /// frames elsewhere), one per VMA, and secret memory a mermap use at a
    /// time. EFAULT if a copy comes up short.
    fn with_pieces(
        &self,
        addr: u64,
        len: usize,
        write: bool,
        mut copy: impl FnMut(Where<'_>, usize, usize) -> bool,
    ) -> Result<(), Errno> {
        let mut space = self.space.lock().unwrap();
        if space.direct(addr as usize, len, write) {
            return if copy(Where::Guest(addr as usize), 0, len) { Ok(()) } else { Err(Errno::EFAULT) };
        }
        if space.accessible_prefix(addr as usize, len, write) != len {
            return Err(Errno::EFAULT);
        }
        space.prepare_access(addr as usize, len, write);
        let mut off = 0;
        while off < len {
            let at = addr as usize + off;
            if let Some(u) = space.unmapped_at(at, len - off) {
                let mut done = 0;
                while done < u.len {
                    let (m, moff, n) = map_unmapped(at, &u, done, mermap::room())?;
                    if !copy(Where::Mermap(&m, moff), off + done, n) {
                        return Err(Errno::EFAULT);
                    }
                    done += n;
                }
                off += u.len;
                continue;
            }
            let (host, run) = space.translate(at, len - off).ok_or(Errno::EFAULT)?;
            let run = space.before_unmapped(at, run);
            if !copy(Where::Guest(host), off, run) {
                return Err(Errno::EFAULT);
            }
            off += run;
        }
        Ok(())
    }

    /// Whether `addr` is in secret memory (a memfd_secret mapping): what
    /// Linux's get_user_pages refuses (a shared futex, vmsplice).
    pub fn is_secret(&self, addr: u64) -> bool {
        self.space.lock().unwrap().unmapped_at(addr as usize, 1).is_some()
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
        self.with_pieces(addr, data.len(), true, |at, off, n| match at {
            Where::Guest(at) => safecopy::copy_to_guest(at, &data[off..off + n]) == n,
            Where::Mermap(m, at) => {
                m.write(at, &data[off..off + n]);
                true
            }
        })
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
            if let Ok(nul) = std::ffi::CStr::from_bytes_until_nul(buf).map(|s| s.count_bytes()) {
                // Room for the NUL a CString made of it adds (no realloc).
                out.reserve_exact(nul + 1);
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
