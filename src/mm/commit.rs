//! The commit account: what guests may fill of physical memory (`--mem`).
//!
//! nomu's physical memory is a *window* of addresses (one sparse memfd,
//! mapped once; see [`window_for`]) larger than `--mem`. The buddy
//! allocator hands out address ranges from the whole window; how much of
//! it guests may fill is this account's business. Its limit is `--mem`;
//! it is charged by VMAs, as Linux's strict overcommit accounting
//! (`vm.overcommit_memory=2`, `CommitLimit` = RAM, no swap) charges
//! `VM_ACCOUNT` ones:
//!
//! - A mapping that may hold data is charged its whole length when it is
//!   made (mmap, brk, mremap's growth, the loader's images and stacks),
//!   and the call fails with ENOMEM if the charge would pass the limit:
//!   every accessible mapping, and every private file mapping whatever
//!   its protection (its pages are a copy of the file). A shared file
//!   mapping's pages are its file's (mm::shared_file), charged once
//!   whoever maps them.
//! - An anonymous PROT_NONE mapping is a *reservation* (glibc's 64 MiB per
//!   malloc arena, thread stacks before their guard is cut, a JVM's heap)
//!   and is charged nothing: its pages are holes in the memfd (the host
//!   holds nothing for them) and nothing can touch them.
//! - mprotect that makes an uncharged mapping accessible charges it then,
//!   or fails with ENOMEM, as Linux's mprotect of a private mapping to
//!   writable does under strict accounting. Any access is charged, read
//!   too: a read of a memfd hole makes the host allocate a page, where
//!   Linux maps its shared zero page.
//! - MAP_NORESERVE exempts nothing: the host maps the whole window, so
//!   nomu cannot refuse a page when it is first touched, only when it is
//!   mapped. An accessible MAP_NORESERVE mapping is charged as under
//!   Linux's strict accounting; a PROT_NONE one, like any reservation, is
//!   not. (Linux's default heuristic mode charges neither.)
//! - A charge stays with its mapping until the mapping goes: munmap, a
//!   MAP_FIXED mapping over it (which nets the two, as Linux's
//!   mmap_region does), brk shrinking, mremap moving or shrinking it, exec
//!   and exit. mprotect back to PROT_NONE keeps it (the pages keep their
//!   contents, and Linux keeps VM_ACCOUNT too); so does MADV_DONTNEED (the
//!   mapping stays usable), which does give the pages themselves back to
//!   the host (a hole punched in the memfd).
//!
//! So the host memory guests hold is bounded by the charge (at most
//! `--mem`) plus the free memory the allocator keeps dirty for reuse (at
//! most 64 MiB, see mm::phys). (A guest writing outside its own mappings,
//! which nothing on the in-process entry paths prevents, is not bounded.)
//!
//! The account is of mappings, not of the window's pages, so a mapping
//! whose pages are not the physical pages at its address (a page cache's,
//! memfd_secret's) can charge what it holds rather than what it spans.

use crate::abi::errno::Errno;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Address room beyond `--mem` for reservations: at least this, and at
/// least `--mem` again.
const MIN_HEADROOM: usize = 64 << 30;

/// The largest window nomu asks for (it maps it twice, direct map and
/// alias, in a 128 TiB address space).
const MAX_WINDOW: usize = 32 << 40;

/// The size of the physical window for `--mem` = `mem` bytes: `mem` plus
/// room for reservations (`mem` again, at least 64 GiB), rounded up to a
/// power of two, within 32 TiB unless `mem` itself is larger. The memfd is
/// sparse and the allocator's per-page records are made lazily, so the
/// room costs address space only. A power of two is one free block to the
/// buddy allocator, which then hands out the lowest addresses first, as
/// it did when the window was `--mem` (a window of 65 GiB would be a 64
/// GiB block and a 1 GiB one, and small allocations would start at 64 GiB:
/// a MAP_32BIT caller, which nomu does not place specially, found its
/// memory below 2 GiB before and should still).
pub fn window_for(mem: usize) -> usize {
    let want = mem.saturating_add(mem.max(MIN_HEADROOM));
    want.checked_next_power_of_two().unwrap_or(want).min(MAX_WINDOW.max(mem))
}

pub struct Commit {
    limit: usize,
    committed: AtomicUsize,
    /// Gives back memory nobody uses (the page cache's unused pages),
    /// returning how much: tried before a charge fails.
    reclaim: std::sync::OnceLock<Box<dyn Fn() -> usize + Send + Sync>>,
    /// Whether a forked child's copy is charged whole at fork
    /// (`--strict-fork`) rather than as it is made (mm::space's cow.rs).
    strict_fork: std::sync::atomic::AtomicBool,
}

impl Commit {
    pub fn new(limit: usize) -> Commit {
        Commit {
            limit,
            committed: AtomicUsize::new(0),
            reclaim: std::sync::OnceLock::new(),
            strict_fork: Default::default(),
        }
    }

    pub fn set_strict_fork(&self, strict: bool) {
        self.strict_fork.store(strict, Ordering::Relaxed);
    }

    pub fn strict_fork(&self) -> bool {
        self.strict_fork.load(Ordering::Relaxed)
    }

    /// `--mem`, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes charged now (/proc/meminfo's Committed_AS).
    pub fn committed(&self) -> usize {
        self.committed.load(Ordering::Relaxed)
    }

    /// Charges `add` bytes, counting `freeing` bytes that the caller is
    /// about to uncharge (a MAP_FIXED mapping's predecessors, an mremap's
    /// old range) as already gone. ENOMEM if the limit would be passed.
    /// Unused cache pages are reclaimed first when the charge would fail.
    pub fn charge(&self, add: usize, freeing: usize) -> Result<(), Errno> {
        match self.try_charge(add, freeing) {
            Err(_) if self.reclaim.get().is_some_and(|r| r() > 0) => self.try_charge(add, freeing),
            r => r,
        }
    }

    /// Sets what [`charge`](Self::charge) reclaims with (once).
    pub fn set_reclaim(&self, reclaim: Box<dyn Fn() -> usize + Send + Sync>) {
        let _ = self.reclaim.set(reclaim);
    }

    fn try_charge(&self, add: usize, freeing: usize) -> Result<(), Errno> {
        self.committed
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                (c.saturating_add(add).saturating_sub(freeing) <= self.limit).then_some(c + add)
            })
            .map(drop)
            .map_err(|_| Errno::ENOMEM)
    }

    /// Charges `n` bytes whatever the limit: copies a forked child must
    /// get because its parent is about to change the pages (mm::space's
    /// cow.rs), which nothing can refuse. Charges fail until the account
    /// is back under the limit.
    pub fn force_charge(&self, n: usize) {
        self.committed.fetch_add(n, Ordering::Relaxed);
    }

    pub fn uncharge(&self, n: usize) {
        let old = self.committed.fetch_sub(n, Ordering::Relaxed);
        debug_assert!(old >= n, "commit account underflow: {old} - {n}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_stop_at_the_limit_and_net_what_goes() {
        let c = Commit::new(100);
        assert!(c.charge(60, 0).is_ok());
        assert_eq!(c.charge(41, 0), Err(Errno::ENOMEM));
        assert!(c.charge(40, 0).is_ok());
        // Replacing 30 charged bytes: with 31 it does not fit, with 30 it does.
        assert_eq!(c.charge(31, 30), Err(Errno::ENOMEM));
        assert!(c.charge(30, 30).is_ok());
        c.uncharge(30);
        assert_eq!(c.committed(), 100);
        assert_eq!(c.charge(1, 0), Err(Errno::ENOMEM));
        c.uncharge(100);
        assert_eq!(c.committed(), 0);
    }

    /// A charge that does not fit first has the reclaimer give back what
    /// nobody uses (the page cache's unused pages), then fails only if that
    /// was not enough.
    #[test]
    fn a_failing_charge_reclaims_first() {
        use std::sync::atomic::AtomicUsize;
        use std::sync::Arc;
        let c = Arc::new(Commit::new(100));
        let cache = Arc::new(AtomicUsize::new(60));
        c.charge(60, 0).unwrap(); // the cache's pages
        let (c2, cache2) = (c.clone(), cache.clone());
        c.set_reclaim(Box::new(move || {
            let n = cache2.swap(0, Ordering::Relaxed);
            c2.uncharge(n);
            n
        }));
        assert!(c.charge(30, 0).is_ok(), "fits without reclaiming");
        assert_eq!(cache.load(Ordering::Relaxed), 60);
        assert!(c.charge(50, 0).is_ok(), "reclaimed first");
        assert_eq!((cache.load(Ordering::Relaxed), c.committed()), (0, 80));
        assert_eq!(c.charge(21, 0), Err(Errno::ENOMEM));
    }

    #[test]
    fn the_window_leaves_room_for_reservations() {
        assert_eq!(window_for(1 << 30), 128 << 30);
        assert_eq!(window_for(64 << 20), 128 << 30);
        assert_eq!(window_for(6 << 30), 128 << 30);
        assert_eq!(window_for(100 << 30), 256 << 30);
        assert_eq!(window_for(256 << 30), 512 << 30);
        assert_eq!(window_for(30 << 40), 32 << 40);
        assert_eq!(window_for(40 << 40), 40 << 40);
    }
}
