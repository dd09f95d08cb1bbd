//! The mermap (seed 003's "epheMERal mapping"): nomu's short-lived access to
//! physical pages that are absent from the direct map (UNMAPPED pageblocks:
//! memfd_secret's pages).
//!
//! A nomu-local region of address space, reserved once (PROT_NONE, no
//! memory), is cut into slots of [`SLOT_SIZE`] bytes, one per host thread
//! that ever uses the mermap (taken at its first use, given back when the
//! thread ends). A use maps pages of the physical-memory memfd into free
//! pages of the thread's slot (one host mmap per physical run), accesses
//! them, and unmaps them when its [`Mapping`] drops (one host mmap of
//! PROT_NONE over its pages): nothing outlives a use. A thread may hold
//! several uses at once (a syscall's iovecs, a pinned range and a copy):
//! each takes its own run of the slot's pages (first fit in a bitmap of
//! 512), and what does not fit is the caller's to cut short or do in
//! pieces ([`room`]). The trap path checks, after every syscall, that the
//! thread holds no mapping ([`live`]); `NOMU_MERMAP_CHECK=1` also asks
//! the host (mincore of the slot: no page of the memfd may be mapped
//! there).
//!
//! Who uses it: zeroing reused secret pages on allocation (mm::phys), and
//! every access nomu makes to secret memory on a guest's behalf
//! (mm::uaccess): copies map the pages, copy and unmap; a range handed to
//! a host call (read(2) into a secret buffer, write from one, recv, ...)
//! is a mapping held while the call runs, so the host reads and writes the
//! pages at their mermap address.
//!
//! TLB costs: mapping into free pages of the slot flushes nothing (no
//! entry can be cached for a PROT_NONE page). Unmapping flushes the use's
//! range on every CPU that runs a thread of nomu's host process (the
//! host's flush_tlb_mm_range: an IPI to each, a shootdown), since all
//! guests and nomu share one host mm. So uses are batched by size: one
//! use covers every page it needs, up to a whole slot (512 pages, a
//! pageblock): zeroing a freshly claimed pageblock, a copy of up to 2 MiB,
//! a host call's buffer cost one shootdown each, not one per page; a
//! syscall costs one per secret buffer it touches (readv into two secret
//! iovecs: two), and a copy longer than the slot one per 2 MiB.
//!
//! Fault injection (as the seed added for mermap_get()):
//! `NOMU_MERMAP_FAIL=N` makes every Nth map fail (N=1: every one), so a
//! test can check that the guest then gets an error and nomu stays up.

use super::physmem::{PhysMem, PAGE_SIZE};
use super::{check, last_errno};
use crate::abi::errno::Errno;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// One slot: a pageblock (2 MiB).
pub const SLOT_SIZE: usize = 2 << 20;
/// Slots in the region (host threads that may hold one at once): 1 GiB
/// of address space, no memory.
const NSLOTS: usize = 512;

struct Region {
    base: usize,
    free: Mutex<Vec<usize>>,
    fail_every: usize,
    check: bool,
}

static REGION: OnceLock<Result<Region, Errno>> = OnceLock::new();
/// Maps asked for so far (fault injection counts them).
static MAPS: AtomicUsize = AtomicUsize::new(0);

fn region() -> Result<&'static Region, Errno> {
    REGION
        .get_or_init(|| {
            // SAFETY: a new private PROT_NONE reservation at an address of the
            // host's choice; nothing else refers to it.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    NSLOTS * SLOT_SIZE,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if base == libc::MAP_FAILED {
                return Err(last_errno());
            }
            let env = |k: &str| std::env::var(k).ok();
            Ok(Region {
                base: base as usize,
                free: Mutex::new((0..NSLOTS).rev().collect()),
                fail_every: env("NOMU_MERMAP_FAIL").and_then(|v| v.parse().ok()).unwrap_or(0),
                check: env("NOMU_MERMAP_CHECK").is_some_and(|v| v == "1"),
            })
        })
        .as_ref()
        .map_err(|&e| e)
}

/// A host thread's slot, given back when the thread ends.
struct Slot(Option<usize>);

impl Drop for Slot {
    fn drop(&mut self) {
        if let (Some(i), Ok(r)) = (self.0, region()) {
            r.free.lock().unwrap().push(i);
        }
    }
}

/// Pages in a slot.
const SLOT_PAGES: usize = SLOT_SIZE / PAGE_SIZE;

thread_local! {
    static SLOT: std::cell::RefCell<Slot> = const { std::cell::RefCell::new(Slot(None)) };
    /// The slot's pages that a live use maps, a bit each.
    static USED: std::cell::RefCell<[u64; SLOT_PAGES / 64]> = const { std::cell::RefCell::new([0; SLOT_PAGES / 64]) };
    static LIVE: Cell<usize> = const { Cell::new(0) };
}

fn slot_addr() -> Result<usize, Errno> {
    let r = region()?;
    SLOT.with(|s| {
        let mut s = s.borrow_mut();
        if s.0.is_none() {
            s.0 = Some(r.free.lock().unwrap().pop().ok_or(Errno::ENOMEM)?);
        }
        Ok(r.base + s.0.unwrap() * SLOT_SIZE)
    })
}

fn used(bits: &[u64; SLOT_PAGES / 64], i: usize) -> bool {
    bits[i / 64] & (1 << (i % 64)) != 0
}

/// The first run of `n` free pages of the slot (first fit), or the
/// longest free run's length when none is that long.
fn find_free(bits: &[u64; SLOT_PAGES / 64], n: usize) -> Result<usize, usize> {
    let (mut start, mut longest) = (0, 0);
    for i in 0..SLOT_PAGES {
        if used(bits, i) {
            start = i + 1;
        } else if i + 1 - start >= n {
            return Ok(start);
        } else {
            longest = longest.max(i + 1 - start);
        }
    }
    Err(longest)
}

fn mark(first: usize, n: usize, on: bool) {
    USED.with(|u| {
        let mut bits = u.borrow_mut();
        for i in first..first + n {
            if on {
                bits[i / 64] |= 1 << (i % 64);
            } else {
                bits[i / 64] &= !(1 << (i % 64));
            }
        }
    })
}

/// The longest use (bytes, whole pages) this thread could map now: what a
/// caller with more to map must cut short or do in pieces.
pub fn room() -> usize {
    USED.with(|u| match find_free(&u.borrow(), SLOT_PAGES) {
        Ok(_) => SLOT_SIZE,
        Err(longest) => longest * PAGE_SIZE,
    })
}

/// Mappings this thread holds now (0 between syscalls).
pub fn live() -> usize {
    LIVE.with(|l| l.get())
}

/// Checks that nothing is mapped in this thread's slot: the thread's
/// count, and with NOMU_MERMAP_CHECK=1 the host's view (mincore: a page of
/// the memfd mapped there would show as resident). Called after every
/// syscall; a mapping that outlived its use is a bug in nomu.
pub fn check_empty() {
    let n = live();
    assert_eq!(n, 0, "a mermap mapping outlived its use");
    let Some(Ok(r)) = REGION.get() else { return };
    if !r.check {
        return;
    }
    let Some(i) = SLOT.with(|s| s.borrow().0) else { return };
    let mut vec = vec![0u8; SLOT_PAGES];
    // SAFETY: mincore of our own slot (page-aligned, inside the region)
    // into a buffer of one byte per page.
    let rc = unsafe { libc::mincore((r.base + i * SLOT_SIZE) as *mut libc::c_void, SLOT_SIZE, vec.as_mut_ptr()) };
    assert!(rc == 0 && vec.iter().all(|&b| b & 1 == 0), "the mermap slot still maps physical memory");
}

/// Physical pages mapped into this thread's slot until dropped: one use.
/// Tied to the thread (its slot), so neither Send nor Sync.
pub struct Mapping {
    /// Where the pages are mapped (in this thread's slot).
    at: usize,
    len: usize,
    _thread: std::marker::PhantomData<*const ()>,
}

impl Mapping {
    /// Maps the physical pages [addr, addr+len) (direct-map addresses,
    /// whole pages, at most a slot) read-write into this thread's slot.
    pub fn new(addr: usize, len: usize) -> Result<Mapping, Errno> {
        Mapping::of_runs(&[(addr, len)])
    }

    /// Maps runs of physical pages (direct-map addresses, whole pages),
    /// one after the other, read-write into free pages of this thread's
    /// slot: ENOMEM when they do not fit ([`room`]) or the map fails.
    pub fn of_runs(runs: &[(usize, usize)]) -> Result<Mapping, Errno> {
        let pm = PhysMem::get();
        for &(addr, len) in runs {
            assert!(
                pm.contains(addr, len) && addr.is_multiple_of(PAGE_SIZE) && len.is_multiple_of(PAGE_SIZE),
                "mermap of {addr:#x}+{len:#x}"
            );
        }
        let len: usize = runs.iter().map(|r| r.1).sum();
        assert!(len > 0 && len <= SLOT_SIZE, "a mermap use is at most a slot");
        let r = region()?;
        let n = MAPS.fetch_add(1, Ordering::Relaxed) + 1;
        if r.fail_every > 0 && n.is_multiple_of(r.fail_every) {
            return Err(Errno::ENOMEM);
        }
        let slot = slot_addr()?;
        let first = USED.with(|u| find_free(&u.borrow(), len / PAGE_SIZE)).map_err(|_| Errno::ENOMEM)?;
        mark(first, len / PAGE_SIZE, true);
        LIVE.with(|l| l.set(l.get() + 1));
        // From here, dropping it unmaps whatever part got mapped.
        let m = Mapping { at: slot + first * PAGE_SIZE, len, _thread: std::marker::PhantomData };
        let mut at = m.at;
        for &(addr, len) in runs {
            // SAFETY: replaces (MAP_FIXED) free pages of this thread's own
            // slot, which nothing else maps or refers to (marked used above),
            // with a shared mapping of our memfd inside its size (checked
            // above).
            let p = unsafe {
                libc::mmap(
                    at as *mut libc::c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    // Populated: the use touches its pages, and one call
                    // fills the page tables instead of a host fault per page.
                    libc::MAP_SHARED | libc::MAP_FIXED | libc::MAP_POPULATE,
                    pm.memfd_raw(),
                    (addr - pm.base()) as libc::off_t,
                )
            };
            check(if p == libc::MAP_FAILED { -1 } else { 0 })?;
            at += len;
        }
        Ok(m)
    }

    /// A range of guest memory at `guest` (`len` bytes) whose host calls
    /// reach it at `off` bytes into this mapping, for as long as this
    /// lives (the caller keeps it alive while the range is in use).
    pub fn guest_range(&self, guest: usize, off: usize, len: usize) -> Option<super::physmem::GuestRange> {
        assert!(off + len <= self.len);
        super::physmem::GuestRange::mermapped(guest, len, self.at + off)
    }

    /// Zeroes the mapped pages.
    pub fn zero(&self) {
        // SAFETY: the slot maps `len` bytes read-write (Mapping::new) until
        // this Mapping drops; nothing holds a Rust reference into it.
        unsafe { std::ptr::write_bytes(self.at as *mut u8, 0, self.len) };
    }

    /// Copies `buf.len()` bytes from `off` into the mapping.
    pub fn write(&self, off: usize, buf: &[u8]) {
        assert!(off + buf.len() <= self.len);
        // SAFETY: inside the mapped, writable pages (checked above); the
        // memory is shared with guest code, which may race (a guest's own
        // business, as with any copy_to_user).
        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), (self.at + off) as *mut u8, buf.len()) };
    }

    /// Copies `buf.len()` bytes at `off` out of the mapping.
    pub fn read(&self, off: usize, buf: &mut [u8]) {
        assert!(off + buf.len() <= self.len);
        // SAFETY: inside the mapped, readable pages (checked above).
        unsafe { std::ptr::copy_nonoverlapping((self.at + off) as *const u8, buf.as_mut_ptr(), buf.len()) };
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: puts this use's pages of the thread's slot back to an
        // empty PROT_NONE reservation (MAP_FIXED over the mapping made in
        // of_runs).
        let p = unsafe {
            libc::mmap(
                self.at as *mut libc::c_void,
                self.len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert!(p != libc::MAP_FAILED, "cannot unmap a mermap slot: {}", last_errno());
        let slot = slot_addr().expect("a use has a slot");
        mark((self.at - slot) / PAGE_SIZE, self.len / PAGE_SIZE, false);
        LIVE.with(|l| l.set(l.get() - 1));
    }
}

/// Zeroes physical pages [addr, addr+len) through the mermap, a slot at a
/// time (one shootdown per 2 MiB), or what room the slot has.
pub fn zero(addr: usize, len: usize) -> Result<(), Errno> {
    let mut at = addr;
    while at < addr + len {
        let n = (addr + len - at).min(room().max(PAGE_SIZE));
        Mapping::new(at, n)?.zero();
        at += n;
    }
    Ok(())
}
