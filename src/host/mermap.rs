//! The mermap (seed 003's "epheMERal mapping"): nomu's short-lived access to
//! physical pages that are absent from the direct map (UNMAPPED pageblocks:
//! memfd_secret's pages).
//!
//! A nomu-local region of address space, reserved once (PROT_NONE, no
//! memory), is cut into slots of [`SLOT_SIZE`] bytes, one per host thread
//! that ever uses the mermap (taken at its first use, given back when the
//! thread ends). A use maps pages of the physical-memory memfd into the
//! thread's slot (one host mmap), accesses them, and unmaps them when its
//! [`Mapping`] drops (one host mmap of PROT_NONE over the slot): nothing
//! outlives a use, and the trap path checks, after every syscall, that the
//! thread holds no mapping ([`live`]); `NOMU_MERMAP_CHECK=1` also asks the
//! host (mincore of the slot: no page of the memfd may be mapped there).
//!
//! TLB costs: mapping into the empty slot flushes nothing (no entry can be
//! cached for a PROT_NONE page). Unmapping flushes the slot's range on
//! every CPU that runs a thread of nomu's host process (the host's
//! flush_tlb_mm_range: an IPI to each, a shootdown), since all guests and
//! nomu share one host mm. So uses are batched: one use covers up to a
//! whole slot (512 pages, a pageblock), so zeroing a freshly claimed
//! pageblock, or a copy of up to 2 MiB, costs one shootdown, not one per
//! page.
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

thread_local! {
    static SLOT: std::cell::RefCell<Slot> = const { std::cell::RefCell::new(Slot(None)) };
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
    let mut vec = vec![0u8; SLOT_SIZE / PAGE_SIZE];
    // SAFETY: mincore of our own slot (page-aligned, inside the region)
    // into a buffer of one byte per page.
    let rc = unsafe { libc::mincore((r.base + i * SLOT_SIZE) as *mut libc::c_void, SLOT_SIZE, vec.as_mut_ptr()) };
    assert!(rc == 0 && vec.iter().all(|&b| b & 1 == 0), "the mermap slot still maps physical memory");
}

/// Physical pages mapped into this thread's slot until dropped.
pub struct Mapping {
    slot: usize,
    len: usize,
}

impl Mapping {
    /// Maps the physical pages [addr, addr+len) (direct-map addresses,
    /// whole pages, at most a slot) read-write into this thread's slot.
    pub fn new(addr: usize, len: usize) -> Result<Mapping, Errno> {
        let pm = PhysMem::get();
        assert!(
            pm.contains(addr, len) && addr.is_multiple_of(PAGE_SIZE) && len.is_multiple_of(PAGE_SIZE),
            "mermap of {addr:#x}+{len:#x}"
        );
        assert!(len > 0 && len <= SLOT_SIZE && live() == 0, "one mermap use at a time, at most a slot");
        let r = region()?;
        let n = MAPS.fetch_add(1, Ordering::Relaxed) + 1;
        if r.fail_every > 0 && n.is_multiple_of(r.fail_every) {
            return Err(Errno::ENOMEM);
        }
        let slot = slot_addr()?;
        // SAFETY: replaces (MAP_FIXED) part of this thread's own slot, which
        // nothing else maps or refers to, with a shared mapping of our memfd
        // inside its size (checked above).
        let p = unsafe {
            libc::mmap(
                slot as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                // Populated: the use touches every page, and one call fills
                // the page tables instead of a host fault per page.
                libc::MAP_SHARED | libc::MAP_FIXED | libc::MAP_POPULATE,
                pm.memfd_raw(),
                (addr - pm.base()) as libc::off_t,
            )
        };
        check(if p == libc::MAP_FAILED { -1 } else { 0 })?;
        LIVE.with(|l| l.set(l.get() + 1));
        Ok(Mapping { slot, len })
    }

    /// Zeroes the mapped pages.
    pub fn zero(&self) {
        // SAFETY: the slot maps `len` bytes read-write (Mapping::new) until
        // this Mapping drops; nothing holds a Rust reference into it.
        unsafe { std::ptr::write_bytes(self.slot as *mut u8, 0, self.len) };
    }

    /// Copies `buf.len()` bytes from `off` into the mapping.
    #[cfg(test)]
    pub fn write(&self, off: usize, buf: &[u8]) {
        assert!(off + buf.len() <= self.len);
        // SAFETY: inside the mapped, writable slot (checked above).
        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), (self.slot + off) as *mut u8, buf.len()) };
    }

    /// Copies `buf.len()` bytes at `off` out of the mapping.
    #[cfg(test)]
    pub fn read(&self, off: usize, buf: &mut [u8]) {
        assert!(off + buf.len() <= self.len);
        // SAFETY: inside the mapped, readable slot (checked above).
        unsafe { std::ptr::copy_nonoverlapping((self.slot + off) as *const u8, buf.as_mut_ptr(), buf.len()) };
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: puts this thread's slot back to an empty PROT_NONE
        // reservation (MAP_FIXED over the mapping made in new).
        let p = unsafe {
            libc::mmap(
                self.slot as *mut libc::c_void,
                self.len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert!(p != libc::MAP_FAILED, "cannot unmap a mermap slot: {}", last_errno());
        LIVE.with(|l| l.set(l.get() - 1));
    }
}

/// Zeroes physical pages [addr, addr+len) through the mermap, a slot at a
/// time (one shootdown per 2 MiB).
pub fn zero(addr: usize, len: usize) -> Result<(), Errno> {
    let mut at = addr;
    while at < addr + len {
        let n = (addr + len - at).min(SLOT_SIZE);
        Mapping::new(at, n)?.zero();
        at += n;
    }
    Ok(())
}
