//! Physical memory: nomu's memfd-backed direct map and the buddy allocator
//! that hands out its pages. Pages leave the allocator zeroed and writable
//! (or, for the loader, as they were: see `alloc_unzeroed`).
//!
//! The direct map is a window larger than `--mem` (mm::commit says how
//! much larger and why): the allocator hands out addresses from all of
//! it, and the commit account, not the allocator, says how much guests
//! may fill. Pages for a reservation (an anonymous PROT_NONE mapping) are
//! taken as holes ([`Fresh::Reserved`]): dirty ones go back to the host
//! rather than being zeroed in place, so a reservation holds no host
//! memory. The per-page records (protection, free-block heads, dirty bits)
//! are zero for a page never used, so the window's unused part costs the
//! host nothing.
//!
//! Freed pages are not zeroed at once: they are marked dirty, and zeroed
//! when allocated again, and only those the host really holds (it says
//! where through SEEK_DATA): punching holes at every free costs the host a
//! TLB shootdown and the next user a page fault per page. When more dirty
//! memory piles up than guests could still commit (nomu then would hold
//! more of the host's memory than `--mem`), it is given back to the host in
//! one sweep. A long run freed is dirty only where the host holds memory
//! (it says where, a lookup per run of data), so freeing a mapping costs
//! what was touched in it, not its size.
//!
//! Each page's host protection is recorded, and a page munmap frees keeps
//! it (a host mprotect of shared memory costs a TLB shootdown); a process's
//! teardown puts its pages' back to read-write in one host call per run of
//! pages that differ (mm::space's tear_down, in kernel::exit's order).
//! nomu itself writes through the writable alias, so no page has to be
//! made writable for nomu's sake.

use super::buddy::{BuddyAllocator, Conversion};
pub use super::buddy::{FreeType, NR_FREETYPES, PAGEBLOCK_PAGES};
use super::commit::Commit;
use super::PAGE_SIZE;
use crate::abi::errno::Errno;
use crate::host::physmem::{PhysMem, Prot};

/// What is told of a copy of frames: (destination, source, length).
pub type CopyHook = Box<dyn Fn(usize, usize, usize) + Send + Sync>;

/// The protection pages have while free (and when freshly allocated).
pub const RW: Prot = libc::PROT_READ | libc::PROT_WRITE;

pub struct PhysicalMemory {
    mem: &'static PhysMem,
    buddy: crate::sync::OrderedMutex<Pages, { crate::sync::PHYS }>,
    /// Told of every range freed or wiped (the entry path forgets what it
    /// knew of code there).
    on_free: std::sync::OnceLock<Box<dyn Fn(usize, usize) + Send + Sync>>,
    /// Told of every copy of pages a mapping showed (dst, src, len: the
    /// entry path's knowledge of the code goes with it).
    on_copy: std::sync::OnceLock<CopyHook>,
    /// What guests may fill: `--mem` (see mm::commit).
    commit: Commit,
    /// How secret (memfd_secret) pages leave the direct map.
    policy: std::sync::atomic::AtomicU8,
    /// Bytes of free UNMAPPED pageblocks kept (see UNMAPPED_POOL_MIN).
    pool: usize,
    /// Whether secret memory was ever taken: until then no guest access
    /// needs the look for secret VMAs (mm::uaccess).
    secret_seen: std::sync::atomic::AtomicBool,
}

/// How pages for secret memory leave the direct map (`nomu run
/// --unmapped`, for the populate benchmark).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum UnmappedPolicy {
    /// Seed 003's design: UNMAPPED pageblocks, converted whole (one host
    /// call per view per run of pageblocks) and pooled while free.
    Pooled = 0,
    /// The naive baseline: each page taken out of both views, and put
    /// back, with host calls of its own.
    PerPage = 1,
    /// Never unmapped (the skip-flush upper bound: no protection at all).
    Never = 2,
}

impl UnmappedPolicy {
    pub fn parse(s: &str) -> Option<UnmappedPolicy> {
        match s {
            "pooled" => Some(UnmappedPolicy::Pooled),
            "per-page" => Some(UnmappedPolicy::PerPage),
            "never" => Some(UnmappedPolicy::Never),
            _ => None,
        }
    }
}

/// What pages just allocated are for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Fresh {
    /// About to be used: dirty pages in short runs are zeroed in place.
    Used,
    /// A reservation nobody touches yet: every dirty page goes back to
    /// the host, so the range holds no host memory.
    Reserved,
    /// Mostly untouched, some pages soon written (a fork's copy made on
    /// access, whose stack chunk is copied at once): dirty pages in runs up
    /// to [`SPARSE_ZERO_MAX`] are zeroed in place, as they are about to be
    /// used; longer runs go back to the host. Punching a hole in the memfd
    /// costs a host call and a TLB shootdown on every CPU running nomu
    /// (~3 per fork + exit of a fork loop, where a memset does).
    Sparse,
}

/// Dirty runs up to this long are zeroed in place for [`Fresh::Sparse`].
const SPARSE_ZERO_MAX: usize = 256 << 10;

/// The allocator and the per-page bookkeeping, under one lock.
struct Pages {
    buddy: BuddyAllocator,
    /// One bit per page: freed since it was last zeroed.
    dirty: Vec<u64>,
    dirty_free: usize,
    /// The pages [lo, hi) outside which no dirty bit is set (the sweep's
    /// walk: the window is mostly never used).
    dirty_lo: usize,
    dirty_hi: usize,
    /// Each page's protection in the host's direct map, XOR [`RW`] (so a
    /// page never touched, zero, is RW as the memfd was mapped).
    prot: Vec<u8>,
    /// Conversions the host refused (it ran out of mappings): retried
    /// before the next UNMAPPED allocation, which fails while any is left,
    /// so no page of an UNMAPPED pageblock is handed out while the direct
    /// map still shows it.
    pending: Vec<Conversion>,
    /// Secret pages (memfd_secret) in use, and pages unmapped one by one
    /// (the per-page policy).
    secret: usize,
    /// Page ranges [start, end) held back for fixed-address programs
    /// ([`PhysicalMemory::keep_for_fixed_addresses`]): taken from the
    /// allocator, so nothing else lands there, and given up page by page
    /// to whoever asks for those very addresses (`alloc_at`).
    kept: Vec<(usize, usize)>,
}

impl Pages {
    /// Gives the kept pages of [pfn, pfn+n) back to the allocator, for an
    /// `alloc_at` of them. They were never handed out: nothing to zero.
    fn give_up_kept(&mut self, pfn: usize, n: usize) {
        let (lo, hi) = (pfn, pfn + n);
        let mut rest = Vec::with_capacity(self.kept.len() + 1);
        for &(s, e) in &self.kept {
            let (a, b) = (s.max(lo), e.min(hi));
            if a >= b {
                rest.push((s, e));
                continue;
            }
            self.buddy.free(a, b - a);
            if s < a {
                rest.push((s, a));
            }
            if b < e {
                rest.push((b, e));
            }
        }
        self.kept = rest;
    }

    /// Whether every page of [pfn, pfn+n) is free or kept (`kept` is in
    /// order: made so, and give_up_kept keeps it so).
    fn free_or_kept(&self, pfn: usize, n: usize) -> bool {
        let mut at = pfn;
        let end = pfn + n;
        for &(s, e) in self.kept.iter().filter(|&&(s, e)| s < end && e > pfn) {
            if s > at && !self.buddy.range_is_free(at, s - at) {
                return false;
            }
            at = at.max(e);
        }
        at >= end || self.buddy.range_is_free(at, end - at)
    }
}

/// How `Pages::prot` stores a protection.
fn prot_code(prot: Prot) -> u8 {
    (prot ^ RW) as u8
}

/// The index of the first byte of `v` that `pred` holds for: 64 bytes at
/// a time while none does (a whole chunk's test vectorizes; a 4 GiB
/// mapping's pages are a megabyte of these).
fn first_where(v: &[u8], pred: impl Fn(u8) -> bool) -> Option<usize> {
    let mut chunks = v.chunks_exact(64);
    let mut base = 0;
    for c in &mut chunks {
        if c.iter().fold(false, |any, &x| any | pred(x)) {
            return c.iter().position(|&x| pred(x)).map(|i| base + i);
        }
        base += 64;
    }
    chunks.remainder().iter().position(|&x| pred(x)).map(|i| base + i)
}

impl Pages {
    /// The bits of word `w` that lie in [pfn, pfn+count).
    fn word_mask(w: usize, pfn: usize, count: usize) -> u64 {
        let (lo, hi) = (pfn.max(w * 64) - w * 64, (pfn + count).min(w * 64 + 64) - w * 64);
        if hi - lo == 64 {
            u64::MAX
        } else {
            ((1u64 << (hi - lo)) - 1) << lo
        }
    }

    /// Marks [pfn, pfn+count) dirty; returns how many were clean.
    fn mark_dirty(&mut self, pfn: usize, count: usize) -> usize {
        if count > 0 {
            self.dirty_lo = self.dirty_lo.min(pfn);
            self.dirty_hi = self.dirty_hi.max(pfn + count);
        }
        let (first, end) = (pfn / 64, (pfn + count).div_ceil(64));
        if first + 2 >= end {
            let mut newly = 0;
            for w in first..end {
                let mask = Self::word_mask(w, pfn, count);
                newly += (mask & !self.dirty[w]).count_ones() as usize;
                self.dirty[w] |= mask;
            }
            return newly;
        }
        // The partial words at the ends, and the whole ones between as a
        // slice (a tight loop: a 256 MiB run is 1024 words).
        let mut newly = 0;
        for w in [first, end - 1] {
            let mask = Self::word_mask(w, pfn, count);
            newly += (mask & !self.dirty[w]).count_ones() as usize;
            self.dirty[w] |= mask;
        }
        for word in &mut self.dirty[first + 1..end - 1] {
            newly += (!*word).count_ones() as usize;
            *word = u64::MAX;
        }
        newly
    }

    /// Runs of dirty pages in [pfn, pfn+count), clearing their bits (a word
    /// of 64 pages at a time: stacks are megabytes).
    fn take_dirty(&mut self, pfn: usize, count: usize) -> Vec<(usize, usize)> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for w in pfn / 64..(pfn + count).div_ceil(64) {
            let mut bits = self.dirty[w] & Self::word_mask(w, pfn, count);
            self.dirty[w] &= !bits;
            while bits != 0 {
                let start = bits.trailing_zeros() as usize;
                let len = (bits >> start).trailing_ones() as usize;
                let p = w * 64 + start;
                match runs.last_mut() {
                    Some((s, n)) if *s + *n == p => *n += len,
                    _ => runs.push((p, len)),
                }
                bits = if start + len == 64 { 0 } else { bits & !(((1u64 << len) - 1) << start) };
            }
        }
        runs
    }
}

/// Runs of held pages up to this long are zeroed in place (they are about
/// to be used again); longer ones go back to the host.
const ZERO_MAX: usize = 16 << 20;

/// Dirty free memory beyond which it all goes back to the host: what
/// guests may still commit (so nomu holds no more of the host's memory
/// than `--mem`, as a VM given `mem=` does, and freed pages are the
/// allocator's to hand out again, zeroed in place, as Linux's free pages
/// are), and at least this much.
const MAX_DIRTY_FREE: usize = 64 << 20;

/// Free UNMAPPED memory kept as a pool (seed 003's pageblocks stay
/// unmapped while free, so the next secret allocation costs no host call,
/// and their pages stay the host's, zeroed through the mermap when taken
/// again): a quarter of `--mem`, between these bounds. Past it, whole free
/// pageblocks are wiped and mapped again.
const UNMAPPED_POOL_MIN: usize = 16 << 20;
const UNMAPPED_POOL_MAX: usize = 1 << 30;
/// Runs longer than this many pages (1 GiB) are freed dirty only where
/// the host holds memory (SEEK_DATA and SEEK_HOLE: a lookup per run of
/// data, the host's walk over the pages it holds); shorter ones are marked
/// whole (a bitmap word per 64 pages is cheaper than the host's walk over
/// the pages of a run fully touched).
const ASK_HOST_FROM: usize = 1 << 18;

impl PhysicalMemory {
    /// The allocator over all of `mem`'s window, with `limit` bytes
    /// (`--mem`) for guests to commit.
    pub fn new(mem: &'static PhysMem, limit: usize) -> PhysicalMemory {
        let npages = mem.size() / PAGE_SIZE;
        let pages = Pages {
            buddy: BuddyAllocator::new(npages),
            dirty: vec![0; npages.div_ceil(64)],
            dirty_free: 0,
            dirty_lo: npages,
            dirty_hi: 0,
            prot: vec![0; npages],
            pending: Vec::new(),
            secret: 0,
            kept: Vec::new(),
        };
        PhysicalMemory {
            mem,
            buddy: crate::sync::OrderedMutex::new(pages),
            on_free: std::sync::OnceLock::new(),
            on_copy: std::sync::OnceLock::new(),
            commit: Commit::new(limit.min(mem.size())),
            policy: std::sync::atomic::AtomicU8::new(UnmappedPolicy::Pooled as u8),
            pool: (limit / 4).clamp(UNMAPPED_POOL_MIN, UNMAPPED_POOL_MAX),
            secret_seen: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether any secret memory was ever taken (mm::uaccess skips looking
    /// for secret VMAs until then).
    pub fn secret_seen(&self) -> bool {
        self.secret_seen.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets how secret pages leave the direct map (before any is taken).
    pub fn set_unmapped_policy(&self, p: UnmappedPolicy) {
        self.policy.store(p as u8, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn unmapped_policy(&self) -> UnmappedPolicy {
        match self.policy.load(std::sync::atomic::Ordering::Relaxed) {
            0 => UnmappedPolicy::Pooled,
            1 => UnmappedPolicy::PerPage,
            _ => UnmappedPolicy::Never,
        }
    }

    /// Applies the allocator's conversions to the host's direct map: a run
    /// of pageblocks going UNMAPPED is made PROT_NONE in both views (one
    /// call each); one coming back is wiped first (a hole punched in the
    /// memfd: its old contents are gone before any view shows it) and made
    /// read-write again. Refused ones are kept to retry.
    fn apply_conversions(&self, pages: &mut Pages) {
        let mut todo = std::mem::take(&mut pages.pending);
        todo.extend(pages.buddy.take_conversions());
        for c in todo {
            let (addr, len) = (self.addr(c.pfn), c.npages * PAGE_SIZE);
            let done = match (c.from.unmapped(), c.to.unmapped()) {
                (false, true) => self
                    .mem
                    .protect(addr, len, libc::PROT_NONE)
                    .and_then(|_| self.mem.protect_alias(addr, len, libc::PROT_NONE))
                    .map(|_| pages.prot[c.pfn..c.pfn + c.npages].fill(prot_code(libc::PROT_NONE))),
                (true, false) => {
                    for (_, n) in pages.take_dirty(c.pfn, c.npages) {
                        pages.dirty_free -= n;
                    }
                    self.mem.discard(addr, len);
                    self.mem
                        .protect_alias(addr, len, RW)
                        .and_then(|_| self.mem.protect(addr, len, RW))
                        .map(|_| pages.prot[c.pfn..c.pfn + c.npages].fill(prot_code(RW)))
                }
                _ => Ok(()),
            };
            if done.is_err() {
                pages.pending.push(c);
            }
        }
    }

    /// Whether dirty free memory, besides what the UNMAPPED pool may hold
    /// (the sweep leaves the pool alone), is past MAX_DIRTY_FREE.
    fn too_dirty(&self, pages: &Pages) -> bool {
        let pool =
            pages.buddy.free_pages_of(FreeType::GUEST_UNMAPPED) + pages.buddy.free_pages_of(FreeType::SHARED_UNMAPPED);
        pages.dirty_free.saturating_sub(pool) * PAGE_SIZE > self.max_dirty_free()
    }

    /// Gives free UNMAPPED pageblocks past the pool back to the direct map.
    fn trim_unmapped(&self, pages: &mut Pages) {
        let keep = self.pool / PAGE_SIZE;
        for ft in [FreeType::GUEST_UNMAPPED, FreeType::SHARED_UNMAPPED] {
            if pages.buddy.free_pages_of(ft) > keep {
                pages.buddy.revert_free_pageblocks(ft, keep);
            }
        }
        if pages.buddy.has_conversions() {
            self.apply_conversions(pages);
        }
    }

    /// Allocates `len` bytes (a page multiple) of secret memory: zeroed
    /// pages no direct-map address reaches (the policy says how they leave
    /// it), for a memfd_secret file. Only the mermap reaches them then.
    pub fn alloc_secret(&self, len: usize) -> Result<usize, Errno> {
        let n = len / PAGE_SIZE;
        // Before any VMA can show the pages (they are mapped after this).
        self.secret_seen.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut pages = self.buddy.lock().unwrap();
        let policy = self.unmapped_policy();
        let ft = if policy == UnmappedPolicy::Pooled { FreeType::SHARED_UNMAPPED } else { FreeType::SHARED };
        if ft.unmapped() && !pages.pending.is_empty() {
            self.apply_conversions(&mut pages);
            if !pages.pending.is_empty() {
                return Err(Errno::ENOMEM);
            }
        }
        let pfn = pages.buddy.alloc_typed(n, 1, ft).ok_or(Errno::ENOMEM)?;
        self.apply_conversions(&mut pages);
        let placed = match policy {
            UnmappedPolicy::Pooled
                if pages.buddy.any_pageblock(pfn, n, |t| !t.unmapped()) || !pages.pending.is_empty() =>
            {
                Err(Errno::ENOMEM)
            }
            UnmappedPolicy::Pooled => self.clean_unmapped(&mut pages, pfn, n),
            UnmappedPolicy::Never => self.make_fresh(&mut pages, pfn, n, Fresh::Used, RW),
            UnmappedPolicy::PerPage => self.make_fresh(&mut pages, pfn, n, Fresh::Used, RW).and_then(|_| {
                // Page by page, as an allocator without pageblocks would.
                for p in pfn..pfn + n {
                    let a = self.addr(p);
                    self.mem.protect(a, PAGE_SIZE, libc::PROT_NONE)?;
                    self.mem.protect_alias(a, PAGE_SIZE, libc::PROT_NONE)?;
                    pages.prot[p] = prot_code(libc::PROT_NONE);
                }
                Ok(())
            }),
        };
        // Eager, as no-MMU has no faults to be lazy with: the host
        // allocates every page in one call, not a fault per page.
        if placed.is_ok() {
            self.mem.allocate(self.addr(pfn), len);
        }
        // Counted before a failure's free_secret, which uncounts them.
        pages.secret += n;
        if let Err(e) = placed {
            drop(pages);
            self.free_secret(self.addr(pfn), len);
            return Err(e);
        }
        Ok(self.addr(pfn))
    }

    /// Frees secret pages. Pooled: they stay unmapped, dirty (zeroed
    /// through the mermap when taken again), in their pageblocks' pool.
    /// Per-page: each is wiped and mapped again. Never: as any page.
    pub fn free_secret(&self, addr: usize, len: usize) {
        let (pfn, n) = (self.pfn(addr), len / PAGE_SIZE);
        let mut pages = self.buddy.lock().unwrap();
        // Wherever the direct map still shows them (mm::mapping), its own
        // pages go back first (secret sources never linger: none should).
        for (a, l) in self.mem.restore_frames_of(addr, len) {
            let p = self.pfn(a);
            pages.prot[p..p + l / PAGE_SIZE].fill(prot_code(RW));
        }
        pages.secret -= n;
        if self.unmapped_policy() == UnmappedPolicy::PerPage {
            for p in pfn..pfn + n {
                if pages.prot[p] == prot_code(libc::PROT_NONE) {
                    let a = self.addr(p);
                    self.mem.discard(a, PAGE_SIZE);
                    // Our own views back to read-write: cannot fail short
                    // of the host running out of mappings, and then the
                    // page stays unreadable, never readable with data.
                    let _ = self.mem.protect_alias(a, PAGE_SIZE, RW);
                    if self.mem.protect(a, PAGE_SIZE, RW).is_ok() {
                        pages.prot[p] = prot_code(RW);
                    }
                }
            }
        }
        pages.dirty_free += pages.mark_dirty(pfn, n);
        pages.buddy.free(pfn, n);
        self.trim_unmapped(&mut pages);
        if self.too_dirty(&pages) {
            self.sweep(&mut pages);
        }
    }

    /// Zeroes the dirty pages of an UNMAPPED allocation through the mermap
    /// (one map per run of up to a pageblock). On a failed map the caller
    /// frees the allocation, which marks every page dirty again.
    fn clean_unmapped(&self, pages: &mut Pages, pfn: usize, count: usize) -> Result<(), Errno> {
        let runs = pages.take_dirty(pfn, count);
        let mut result = Ok(());
        for &(start, n) in &runs {
            pages.dirty_free -= n;
            if result.is_ok() {
                for (a, l) in self.mem.populated(self.addr(start), n * PAGE_SIZE) {
                    result = result.and_then(|_| crate::host::mermap::zero(a, l));
                }
            }
        }
        result
    }

    /// Prefaults the host page tables of a secret mapping at [addr,
    /// addr+len) for writing (one host call, not a fault per page).
    pub fn populate_mapping(&self, addr: usize, len: usize) {
        self.mem.populate_write(addr, len);
    }

    /// Secret pages in use (/proc/meminfo's SecretMem), and free pages of
    /// UNMAPPED pageblocks (the pool).
    pub fn secret_stats(&self) -> (usize, usize) {
        let pages = self.buddy.lock().unwrap();
        let pool =
            pages.buddy.free_pages_of(FreeType::GUEST_UNMAPPED) + pages.buddy.free_pages_of(FreeType::SHARED_UNMAPPED);
        (pages.secret * PAGE_SIZE, pool * PAGE_SIZE)
    }

    /// Pages whose pageblock is UNMAPPED (free or not): /proc/meminfo.
    pub fn unmapped_bytes(&self) -> usize {
        let pages = self.buddy.lock().unwrap();
        let c = pages.buddy.pageblock_counts();
        (c[FreeType::GUEST_UNMAPPED.index()] + c[FreeType::SHARED_UNMAPPED.index()]) * PAGEBLOCK_PAGES * PAGE_SIZE
    }

    /// Free blocks per freetype and order, and pageblocks per freetype
    /// (/proc/buddyinfo and /proc/pagetypeinfo).
    pub fn free_block_counts(&self) -> (Vec<Vec<usize>>, [usize; NR_FREETYPES]) {
        let pages = self.buddy.lock().unwrap();
        let counts = FreeType::ALL
            .iter()
            .map(|&ft| (0..=super::buddy::MAX_ORDER).map(|o| pages.buddy.count(ft, o)).collect())
            .collect();
        (counts, pages.buddy.pageblock_counts())
    }

    /// The commit account (`--mem`).
    pub fn commit(&self) -> &Commit {
        &self.commit
    }

    /// Sets the function told of every range freed or wiped (once).
    pub fn set_free_hook(&self, hook: Box<dyn Fn(usize, usize) + Send + Sync>) {
        let _ = self.on_free.set(hook);
    }

    /// Sets the function told of every private copy of frames (once).
    pub fn set_copy_hook(&self, hook: CopyHook) {
        let _ = self.on_copy.set(hook);
    }

    /// Copies the frames [src, src+len) into the owned pages at `dst`,
    /// zeroed first (a frames VMA's private copy, see mm::mapping); the
    /// entry path's knowledge of the code goes with the bytes.
    pub fn copy_frames(&self, dst: usize, src: usize, len: usize) {
        self.zero(dst, len);
        self.copy_within(dst, src, len);
        if let Some(hook) = self.on_copy.get() {
            hook(dst, src, len);
        }
    }

    fn freed(&self, addr: usize, len: usize) {
        if let Some(hook) = self.on_free.get() {
            hook(addr, len);
        }
    }

    /// Zeroes the dirty pages of a range just allocated. Only pages the
    /// host holds need it (the rest read as zero), and the host says where
    /// they are for the cost of a lookup per run, however sparse the range
    /// (a stack of megabytes with a few pages used).
    fn clean(&self, pages: &mut Pages, pfn: usize, count: usize, fresh: Fresh) {
        let zero_max = match fresh {
            Fresh::Used => ZERO_MAX,
            Fresh::Sparse => SPARSE_ZERO_MAX,
            Fresh::Reserved => 0,
        };
        for (start, n) in pages.take_dirty(pfn, count) {
            pages.dirty_free -= n;
            if zero_max == 0 {
                // All of it goes back: one hole punched over the run costs
                // the host less than asking where its data is first (two
                // lseeks per run of data, then a punch each).
                self.mem.discard(self.addr(start), n * PAGE_SIZE);
                continue;
            }
            for (addr, len) in self.mem.populated(self.addr(start), n * PAGE_SIZE) {
                if len > zero_max {
                    self.mem.discard(addr, len);
                } else {
                    self.mem.zero(addr, len);
                }
            }
        }
    }

    /// Gives all dirty free memory back to the host (zeroing it). Free
    /// memory is walked a free block at a time, so a freed 4 GiB mapping
    /// costs one block and its dirty bitmap words, not a look per page.
    fn sweep(&self, pages: &mut Pages) {
        // Only [lo, hi) can hold dirty bits: a free block can be far larger
        // (the window is mostly one), and its bitmap is not walked past hi.
        let hi = pages.dirty_hi;
        let mut p = pages.dirty_lo & !63;
        (pages.dirty_lo, pages.dirty_hi) = (self.mem.size() / PAGE_SIZE, 0);
        let stop = hi.div_ceil(64);
        while p < hi {
            // The next dirty page: the rest of this word, then the next
            // word with a bit set (a slice search, not a page at a time).
            let w = p / 64;
            let bits = pages.dirty[w] >> (p % 64);
            if bits == 0 {
                match pages.dirty.get(w + 1..stop).and_then(|ws| ws.iter().position(|&x| x != 0)) {
                    Some(i) => p = (w + 1 + i) * 64,
                    None => break,
                }
                continue;
            }
            p += bits.trailing_zeros() as usize;
            if p >= hi {
                break;
            }
            let Some((head, order, ft)) = pages.buddy.free_block_typed(p) else {
                p += 1; // in use
                continue;
            };
            if ft.unmapped() {
                // The pool keeps its pages (bounded by trim_unmapped).
                p = (head + (1 << order)).min(hi);
                continue;
            }
            let end = (head + (1 << order)).min(hi);
            for (start, n) in pages.take_dirty(p, end - p) {
                pages.dirty_free -= n;
                self.mem.discard(self.addr(start), n * PAGE_SIZE);
            }
            p = end;
        }
    }

    fn pfn(&self, addr: usize) -> usize {
        (addr - self.mem.base()) / PAGE_SIZE
    }

    fn addr(&self, pfn: usize) -> usize {
        self.mem.base() + pfn * PAGE_SIZE
    }

    /// Allocates `len` bytes (a page multiple) aligned to `align` bytes.
    pub fn alloc(&self, len: usize, align: usize, fresh: Fresh) -> Result<usize, Errno> {
        self.alloc_with_prot(len, align, fresh, RW)
    }

    /// Like [`alloc`](Self::alloc), but the pages get host protection
    /// `prot` rather than read-write: a reservation's PROT_NONE is then one
    /// host call for the pages not already so. Made read-write first, the
    /// pages freed PROT_NONE (a thread stack's guard) cost another.
    pub fn alloc_with_prot(&self, len: usize, align: usize, fresh: Fresh, prot: Prot) -> Result<usize, Errno> {
        let align = align.max(PAGE_SIZE).next_power_of_two() / PAGE_SIZE;
        let mut pages = self.buddy.lock().unwrap();
        let pfn = pages.buddy.alloc(len / PAGE_SIZE, align).ok_or(Errno::ENOMEM)?;
        if pages.buddy.has_conversions() {
            self.apply_conversions(&mut pages);
        }
        self.make_fresh(&mut pages, pfn, len / PAGE_SIZE, fresh, prot)?;
        Ok(self.addr(pfn))
    }

    /// Allocates `len` bytes (a page multiple) with protection `prot` for
    /// a copy: the caller writes (through the alias) the whole pages
    /// `filled` names (offsets and lengths from the start), and every
    /// other byte is zero. A fork's copy of a small mapping: its pages are not zeroed
    /// only to be copied over, nor made read-write only to get the copy's
    /// protection next.
    pub fn alloc_for_copy(&self, len: usize, prot: Prot, filled: &[(usize, usize)]) -> Result<usize, Errno> {
        let mut pages = self.buddy.lock().unwrap();
        let pfn = pages.buddy.alloc(len / PAGE_SIZE, 1).ok_or(Errno::ENOMEM)?;
        if pages.buddy.has_conversions() {
            self.apply_conversions(&mut pages);
        }
        let start = self.addr(pfn);
        self.restore_locked(&mut pages, start, len);
        for (d, n) in pages.take_dirty(pfn, len / PAGE_SIZE) {
            pages.dirty_free -= n;
            let (ds, de) = (d * PAGE_SIZE - pfn * PAGE_SIZE, (d + n) * PAGE_SIZE - pfn * PAGE_SIZE);
            // Only what no copy covers: the gaps between `filled`'s runs.
            let mut gaps = Vec::new();
            let mut at = ds;
            for &(fs, fl) in filled.iter().filter(|&&(fs, fl)| fs < de && fs + fl > ds) {
                if fs > at {
                    gaps.push((at, fs - at));
                }
                at = at.max(fs + fl);
            }
            if at < de {
                gaps.push((at, de - at));
            }
            for (g, gl) in gaps {
                // What the copy leaves must read as zero. Data there (a
                // previous owner's) goes back to the host from its first
                // page on, in one call: zeroed in place it would stay held,
                // and every later copy given these frames would find and
                // zero it again (after the exit of a 32-thread child, each
                // fork zeroed ~19 one-page runs there, two lseeks each).
                if let Some(first) = self.mem.first_data(start + g, gl) {
                    self.mem.discard(first, start + g + gl - first);
                }
            }
        }
        self.set_prot_locked(&mut pages, pfn, len / PAGE_SIZE, prot)
            .inspect_err(|_| pages.buddy.free(pfn, len / PAGE_SIZE))?;
        Ok(start)
    }

    /// Pages just taken from the buddy allocator made as `alloc` promises:
    /// zeroed, with host protection `prot` (given back if that fails).
    fn make_fresh(&self, pages: &mut Pages, pfn: usize, count: usize, fresh: Fresh, prot: Prot) -> Result<(), Errno> {
        self.restore_locked(pages, self.addr(pfn), count * PAGE_SIZE);
        self.clean(pages, pfn, count, fresh);
        self.set_prot_locked(pages, pfn, count, prot).inspect_err(|_| pages.buddy.free(pfn, count))
    }

    /// Like `alloc`, but the pages keep whatever they held and their
    /// protection: the caller writes (through the alias) or
    /// [`zero`](Self::zero)es every byte and sets the protection before
    /// anyone else can see them (the loader, which overwrites most with the
    /// file and wants the protection a program there had last time). A
    /// stale frames mapping stays too: the caller maps the same frames
    /// there again or [`restore`](Self::restore)s the pages.
    pub fn alloc_unzeroed(&self, len: usize, align: usize) -> Result<usize, Errno> {
        let align = align.max(PAGE_SIZE).next_power_of_two() / PAGE_SIZE;
        let mut pages = self.buddy.lock().unwrap();
        let pfn = pages.buddy.alloc(len / PAGE_SIZE, align).ok_or(Errno::ENOMEM)?;
        if pages.buddy.has_conversions() {
            self.apply_conversions(&mut pages);
        }
        for (_, n) in pages.take_dirty(pfn, len / PAGE_SIZE) {
            pages.dirty_free -= n;
        }
        Ok(self.addr(pfn))
    }

    /// Zeroes [addr, addr+len) of pages the caller owns (through the alias,
    /// whatever their protection), asking the host which whole pages hold
    /// anything: runs of those longer than [`SPARSE_ZERO_MAX`] go back to
    /// the host instead (the loader's heap room: a program touches a few of
    /// its pages). Zeroed in place, they would stay held and be zeroed
    /// again at the next exec there (after a child that had filled 16 MiB
    /// exited, every later exec memset the 8 MiB stack it got there: fork,
    /// execve and wait 0.94x -> 1.51x native; 9x after 256 MiB). Where a
    /// run of data ends the host finds (SEEK_HOLE) a page at a time, past
    /// the range too, so it is asked only once a hole at or just past the
    /// range's end bounds the walk: an exec's stack next to 60 MiB of freed
    /// pages made fork + execve 67 -> 200 us (stacks now have
    /// [`zero_stack`](Self::zero_stack), which never asks).
    pub fn zero(&self, addr: usize, len: usize) {
        let end = addr + len;
        let (inner_s, inner_e) = (addr.next_multiple_of(PAGE_SIZE), end & !(PAGE_SIZE - 1));
        if inner_s >= inner_e {
            self.mem.zero(addr, len);
            return;
        }
        self.mem.zero(addr, inner_s - addr);
        self.mem.zero(inner_e, end - inner_e);
        let _pages = self.buddy.lock().unwrap(); // the host seeks the shared memfd
        let Some(first) = self.mem.first_data(inner_s, inner_e - inner_s) else { return };
        if inner_e - first <= SPARSE_ZERO_MAX {
            // Data only near the end: zeroed in place.
            return self.mem.zero(first, inner_e - first);
        }
        // A hole at or just past the end stops every walk; else one is
        // made at the last page (a data run past the end is someone else's
        // or freed pages, megabytes of them after a big child).
        let last = inner_e - PAGE_SIZE;
        let holds_data = |at: usize| self.mem.contains(at, PAGE_SIZE) && self.mem.first_data(at, PAGE_SIZE).is_some();
        if holds_data(last) && holds_data(inner_e) {
            self.mem.discard(last, PAGE_SIZE);
        }
        for (a, n) in self.mem.populated_from(first, inner_e) {
            if n > SPARSE_ZERO_MAX {
                self.mem.discard(a, n);
            } else {
                self.mem.zero(a, n);
            }
        }
    }

    /// Zeroes a new stack's pages (page-aligned, the caller's): what its
    /// last [`SPARSE_ZERO_MAX`] holds in place, as a program uses its top
    /// pages at once; anything below goes back to the host in one call, from
    /// its first page that holds data on. Zeroed in place, single pages
    /// there (a 32-thread child's stacks, a page of each per 64) stayed held
    /// and every later exec there found and zeroed them again, two lseeks
    /// each. Two or three lseeks in all, whatever the stack holds.
    pub fn zero_stack(&self, addr: usize, len: usize) {
        let end = addr + len;
        let top = end.saturating_sub(SPARSE_ZERO_MAX).max(addr);
        let _pages = self.buddy.lock().unwrap(); // the host seeks the shared memfd
        let Some(first) = self.mem.first_data(addr, len) else { return };
        let first_in_top = if first < top {
            self.mem.discard(first, top - first);
            self.mem.first_data(top, end - top)
        } else {
            Some(first)
        };
        if let Some(at) = first_in_top {
            self.mem.zero(at, end - at);
        }
    }

    /// The runs of whole pages in [addr, addr+len) that hold data (mincore's
    /// resident pages): the rest were never written or were given back.
    pub fn populated(&self, addr: usize, len: usize) -> Vec<(usize, usize)> {
        let _pages = self.buddy.lock().unwrap(); // populated() seeks the shared memfd
        self.mem.populated(addr, len)
    }

    /// How many bytes of [addr, addr+len) (owned pages) the host holds
    /// memory for: what a shared memory segment reports as resident.
    pub fn resident_bytes(&self, addr: usize, len: usize) -> usize {
        self.populated(addr, len).iter().map(|&(_, n)| n).sum()
    }

    /// Claims the pages of [addr, addr+len) if they all are free (or kept
    /// for fixed addresses: such a claim is what they were kept for).
    pub fn alloc_at(&self, addr: usize, len: usize, fresh: Fresh) -> Result<(), Errno> {
        if !self.mem.contains(addr, len) {
            return Err(Errno::ENOMEM);
        }
        let (pfn, n) = (self.pfn(addr), len / PAGE_SIZE);
        let mut pages = self.buddy.lock().unwrap();
        // Pages of UNMAPPED pageblocks are only ever secret memory's.
        if pages.buddy.any_pageblock(pfn, n, |t| t.unmapped()) || !pages.free_or_kept(pfn, n) {
            return Err(Errno::ENOMEM);
        }
        pages.give_up_kept(pfn, n);
        if !pages.buddy.alloc_at(pfn, n) {
            return Err(Errno::ENOMEM);
        }
        self.make_fresh(&mut pages, pfn, len / PAGE_SIZE, fresh, RW)
    }

    /// Whether [addr, addr+len) is free for anyone to claim (`alloc_at`):
    /// free pages of UNMAPPED pageblocks are secret memory's only.
    pub fn is_free(&self, addr: usize, len: usize) -> bool {
        if !self.mem.contains(addr, len) {
            return false;
        }
        let (pfn, n) = (self.pfn(addr), len / PAGE_SIZE);
        let pages = self.buddy.lock().unwrap();
        pages.free_or_kept(pfn, n) && !pages.buddy.any_pageblock(pfn, n, |t| t.unmapped())
    }

    /// Keeps [addr, addr+len) (the part inside physical memory) from
    /// everything but requests for those very addresses: where
    /// fixed-address (non-PIE) programs are linked, 0x400000 on, which
    /// position-independent images, libraries and mappings placed lowest
    /// first would otherwise take, leaving a non-PIE program started by
    /// another (python3.11 by a shell) only a host process of its own.
    /// Pages already taken are left out.
    pub fn keep_for_fixed_addresses(&self, addr: usize, len: usize) {
        let lo = addr.max(self.mem.base());
        let hi = (addr + len).min(self.mem.end());
        if lo >= hi {
            return;
        }
        let mut pages = self.buddy.lock().unwrap();
        let (first, last) = (self.pfn(lo), self.pfn(hi));
        let mut pfn = first;
        while pfn < last {
            // A pageblock at a time: what is free of it is kept.
            let end = ((pfn / PAGEBLOCK_PAGES + 1) * PAGEBLOCK_PAGES).min(last);
            if pages.buddy.range_is_free(pfn, end - pfn) && pages.buddy.alloc_at(pfn, end - pfn) {
                match pages.kept.last_mut() {
                    Some(k) if k.1 == pfn => k.1 = end,
                    _ => pages.kept.push((pfn, end)),
                }
            }
            pfn = end;
        }
    }

    /// Returns pages to the allocator (zeroed when next allocated; their
    /// protection stays until then, see the module comment).
    pub fn free(&self, addr: usize, len: usize) {
        self.freed(addr, len);
        self.free_forgotten(addr, len, true);
    }

    /// Tells the entry path that the code in [addr, addr+len) is going
    /// (what [`free`](Self::free) does first; a process's teardown does it
    /// as a step of its own, for its code only).
    pub fn forget_code(&self, addr: usize, len: usize) {
        if len > 0 {
            self.freed(addr, len);
        }
    }

    /// Returns pages whose code the entry path has forgotten already
    /// ([`forget_code`](Self::forget_code), or they never held any) to the
    /// allocator: as [`free`](Self::free) when they may hold data, as
    /// [`free_untouched`](Self::free_untouched) when they are a
    /// reservation's holes.
    pub fn free_forgotten(&self, addr: usize, len: usize, may_hold_data: bool) {
        if len == 0 {
            return;
        }
        let (pfn, n) = (self.pfn(addr), len / PAGE_SIZE);
        let mut pages = self.buddy.lock().unwrap();
        if may_hold_data {
            if n <= ASK_HOST_FROM {
                pages.dirty_free += pages.mark_dirty(pfn, n);
            } else {
                // A long run: only what the host holds is dirty (the rest
                // reads as zero), so a 4 GiB mapping with 7 pages touched
                // costs a lookup per run, and counts 7 pages towards a sweep.
                for (a, len) in self.mem.populated(addr, len) {
                    pages.dirty_free += pages.mark_dirty(self.pfn(a), len / PAGE_SIZE);
                }
            }
        }
        pages.buddy.free(pfn, n);
        if self.too_dirty(&pages) {
            self.sweep(&mut pages);
        }
    }

    /// How much dirty free memory nomu keeps (see [`MAX_DIRTY_FREE`]).
    fn max_dirty_free(&self) -> usize {
        MAX_DIRTY_FREE.max(self.commit.limit().saturating_sub(self.commit.committed()))
    }

    /// Returns pages that hold nothing to the allocator: a reservation's,
    /// taken as holes ([`Fresh::Reserved`]) and never accessible since, so
    /// they need no zeroing (and count for no sweep) when taken again.
    pub fn free_untouched(&self, addr: usize, len: usize) {
        if len == 0 {
            return;
        }
        self.freed(addr, len);
        self.buddy.lock().unwrap().buddy.free(self.pfn(addr), len / PAGE_SIZE);
    }

    /// Makes owned pages zeroed and writable, as if newly allocated.
    pub fn scrub(&self, addr: usize, len: usize) {
        self.wipe(addr, len);
        // Making our own direct map read-write cannot fail.
        let _ = self.set_prot(addr, len, RW);
    }

    /// Zeroes owned pages (their memory back to the host) and keeps their
    /// host protection, as MADV_DONTNEED keeps a mapping's: punching a
    /// hole needs no write access. (A stale frames mapping put back is
    /// read-write.) glibc's thread exit advises a whole stack, guard page
    /// included, which scrub made writable and the caller set back.
    pub fn wipe(&self, addr: usize, len: usize) {
        self.restore(addr, len);
        self.freed(addr, len);
        self.mem.discard(addr, len);
    }

    /// Sets the host protection of owned pages, asking the host only for
    /// the runs whose protection differs.
    pub fn set_prot(&self, addr: usize, len: usize, prot: Prot) -> Result<(), Errno> {
        if len == 0 {
            return Ok(());
        }
        let mut pages = self.buddy.lock().unwrap();
        self.set_prot_locked(&mut pages, self.pfn(addr), len / PAGE_SIZE, prot)
    }

    /// Gives the direct map's page at `addr` again the host protection
    /// nomu last gave it, and returns that: after it, an access the
    /// protection allows cannot fault there, whatever the host had.
    pub fn reapply_prot(&self, addr: usize) -> Prot {
        let pages = self.buddy.lock().unwrap();
        let prot = Prot::from(pages.prot[self.pfn(addr)]) ^ RW;
        let page = addr & !(PAGE_SIZE - 1);
        match self.mem.protect(page, PAGE_SIZE, prot) {
            Ok(()) => prot,
            Err(_) => libc::PROT_NONE,
        }
    }

    /// Puts the host protection of owned pages back to read-write (what
    /// free pages have) in one host call, whatever each page's was: the
    /// host skips its mappings there that need no change.
    pub fn reset_prot(&self, addr: usize, len: usize) {
        if len == 0 {
            return;
        }
        let mut pages = self.buddy.lock().unwrap();
        let p = self.pfn(addr);
        // Making our own direct map read-write cannot fail.
        let _ = self.mem.protect(addr, len, RW);
        pages.prot[p..p + len / PAGE_SIZE].fill(prot_code(RW));
    }

    fn set_prot_locked(&self, pages: &mut Pages, pfn: usize, count: usize, prot: Prot) -> Result<(), Errno> {
        let want = prot_code(prot);
        let mut p = pfn;
        let end = pfn + count;
        while p < end {
            let Some(s) = first_where(&pages.prot[p..end], |x| x != want) else { break };
            let s = p + s;
            let e = first_where(&pages.prot[s..end], |x| x == want).map_or(end, |n| s + n);
            self.mem.protect(self.addr(s), (e - s) * PAGE_SIZE, prot)?;
            pages.prot[s..e].fill(want);
            p = e;
        }
        Ok(())
    }

    /// Makes the direct map at [addr, addr+len) (owned pages) show the
    /// physical pages at `frame` with protection `prot` (see mm::mapping).
    /// A stale mapping of the same frames left there is taken up again
    /// without a host call (see [`release_frames`](Self::release_frames)).
    pub fn map_frames(&self, addr: usize, frame: usize, len: usize, prot: Prot) -> Result<(), Errno> {
        let mut pages = self.buddy.lock().unwrap();
        let pfn = self.pfn(addr);
        match self.mem.map_frames(addr, frame, len, prot)? {
            None => pages.prot[pfn..pfn + len / PAGE_SIZE].fill(prot_code(prot)),
            // Taken up again: the pages' record is that mapping's protection.
            Some(_) => self.set_prot_locked(&mut pages, pfn, len / PAGE_SIZE, prot)?,
        }
        Ok(())
    }

    /// Puts the direct map at [addr, addr+len) back to the range's own
    /// pages now, read-write (see mm::mapping).
    pub fn unmap_frames(&self, addr: usize, len: usize) {
        let mut pages = self.buddy.lock().unwrap();
        self.restore_locked(&mut pages, addr, len);
    }

    /// The frames mapping at [addr, addr+len) is no guest's any more: the
    /// direct map is put back to the range's own pages only when they are
    /// allocated or scrubbed again, or the frames freed (so a program
    /// exec'd again at the same place, which the allocator's
    /// lowest-address-first order makes the usual case, finds its text
    /// mapped already: no host call either way). The view left is not
    /// the releasing process's (a stale one translates nowhere and holds
    /// no page: the range's own pages are free, the frames the source's);
    /// it is state of free pages, as a dirty free page's contents are,
    /// that the allocator's hand-out makes fresh or the frames take away.
    pub fn release_frames(&self, addr: usize, len: usize) {
        self.mem.release_frames(addr, len);
    }

    /// A frames VMA at [addr, addr+len) went: its source's pages may stay
    /// shown there, stale ([`release_frames`](Self::release_frames)), if
    /// the source `lingers`; else the range's own pages are put back now.
    pub fn frames_gone(&self, addr: usize, len: usize, lingers: bool) {
        if lingers {
            self.release_frames(addr, len);
        } else {
            self.unmap_frames(addr, len);
        }
    }

    /// Puts back the direct map's own pages wherever frames are still
    /// mapped in [addr, addr+len), noting them read-write.
    fn restore_locked(&self, pages: &mut Pages, addr: usize, len: usize) {
        for (a, n) in self.mem.restore(addr, len) {
            let pfn = self.pfn(a);
            pages.prot[pfn..pfn + n / PAGE_SIZE].fill(prot_code(RW));
        }
    }

    /// Puts back the direct map's own pages in [addr, addr+len) (pages the
    /// caller took with [`alloc_unzeroed`](Self::alloc_unzeroed), which
    /// leaves stale frames mappings in place).
    pub fn restore(&self, addr: usize, len: usize) {
        let mut pages = self.buddy.lock().unwrap();
        self.restore_locked(&mut pages, addr, len);
    }

    /// Frees pages a frames source held (mm::mapping): wherever the direct
    /// map still shows them, its own pages are put back first.
    pub fn free_frames(&self, addr: usize, len: usize) {
        {
            let mut pages = self.buddy.lock().unwrap();
            for (a, n) in self.mem.restore_frames_of(addr, len) {
                let pfn = self.pfn(a);
                pages.prot[pfn..pfn + n / PAGE_SIZE].fill(prot_code(RW));
            }
        }
        self.free(addr, len);
    }

    /// The physical address whose page nomu's direct map shows at `addr`.
    #[allow(dead_code)] // users: memfd_secret, fork
    pub fn translate(&self, addr: usize) -> usize {
        self.mem.translate(addr)
    }

    /// Copies [src, src+len) to fresh (zeroed) pages at `dst`: only the
    /// runs the host holds, so a sparse mapping stays sparse (a copy
    /// through the alias would make the host fill every hole it reads).
    pub fn copy_within(&self, dst: usize, src: usize, len: usize) {
        let runs = {
            let _pages = self.buddy.lock().unwrap(); // populated() seeks the shared memfd
            self.mem.populated(src, len)
        };
        for (a, n) in runs {
            self.mem.copy_within(dst + (a - src), a, n);
        }
    }

    /// Guests' physical memory as they see it: `--mem` (sysinfo's and
    /// /proc/meminfo's total).
    pub fn total_bytes(&self) -> usize {
        self.commit.limit()
    }

    /// What guests may still commit (sysinfo's and /proc/meminfo's free).
    pub fn free_bytes(&self) -> usize {
        self.commit.limit().saturating_sub(self.commit.committed())
    }

    pub fn contains(&self, addr: usize, len: usize) -> bool {
        self.mem.contains(addr, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::safecopy::{copy_from_guest, copy_to_guest};

    fn fill(addr: usize, len: usize, byte: u8) {
        assert_eq!(copy_to_guest(addr, &vec![byte; len]), len);
    }

    fn all_zero(addr: usize, len: usize) -> bool {
        let mut buf = vec![1u8; len];
        assert_eq!(copy_from_guest(&mut buf, addr), len);
        buf.iter().all(|&b| b == 0)
    }

    /// The word-at-a-time dirty bookkeeping against a page-at-a-time model.
    #[test]
    fn dirty_runs_match_a_page_by_page_model() {
        let npages = 1000;
        let mut pages = Pages {
            buddy: BuddyAllocator::new(npages),
            dirty: vec![0; 16],
            dirty_free: 0,
            dirty_lo: npages,
            dirty_hi: 0,
            prot: vec![],
            pending: Vec::new(),
            secret: 0,
            kept: Vec::new(),
        };
        let mut model = vec![false; npages];
        let mut seed = 12345u64;
        let mut next = |n: usize| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        for _ in 0..2000 {
            let (pfn, count) = (next(npages), next(200));
            let count = count.min(npages - pfn);
            if next(2) == 0 {
                let clean = model[pfn..pfn + count].iter().filter(|&&d| !d).count();
                assert_eq!(pages.mark_dirty(pfn, count), clean);
                model[pfn..pfn + count].fill(true);
            } else {
                let mut want: Vec<(usize, usize)> = Vec::new();
                for (p, dirty) in model.iter_mut().enumerate().skip(pfn).take(count) {
                    if *dirty {
                        match want.last_mut() {
                            Some((s, n)) if *s + *n == p => *n += 1,
                            _ => want.push((p, 1)),
                        }
                        *dirty = false;
                    }
                }
                assert_eq!(pages.take_dirty(pfn, count), want);
            }
        }
    }

    /// A copy's frames read as zero where it writes nothing, and hold no
    /// memory there (regression: a previous owner's pages there were
    /// zeroed in place, stayed held, and every later copy into the same
    /// frames found them and zeroed them again, two lseeks each).
    fn copies_leave_no_data_in_their_gaps(phys: &PhysicalMemory) {
        let len = 64 * PAGE_SIZE;
        let a = phys.alloc(len, PAGE_SIZE, Fresh::Used).unwrap();
        for p in (0..64).step_by(5) {
            fill(a + p * PAGE_SIZE, PAGE_SIZE, 0x5a);
        }
        phys.free(a, len);
        let filled = [(0, 2 * PAGE_SIZE), (40 * PAGE_SIZE, PAGE_SIZE)];
        let b = phys.alloc_for_copy(len, RW, &filled).unwrap();
        assert_eq!(a, b, "the same frames come back, dirty");
        for &(off, n) in &filled {
            fill(b + off, n, 0x11);
        }
        // Before anything reads the gaps: a read of a hole makes the host
        // allocate a page there.
        assert_eq!(phys.populated(b, len), vec![(b, 2 * PAGE_SIZE), (b + 40 * PAGE_SIZE, PAGE_SIZE)]);
        assert!(all_zero(b + 2 * PAGE_SIZE, 38 * PAGE_SIZE) && all_zero(b + 41 * PAGE_SIZE, 23 * PAGE_SIZE));
        phys.free(b, len);
    }

    /// `zero` of a range whose data goes on past its end: the range reads
    /// as zero, its long run of data went back to the host, and the data
    /// past it is untouched (the host is never asked where that data ends:
    /// it walks a run a page at a time, so an exec's stack zeroed next to
    /// 60 MiB of freed pages cost 150 us).
    fn zeroing_stays_in_its_range(phys: &PhysicalMemory) {
        let len = 4 << 20;
        let a = phys.alloc(len, PAGE_SIZE, Fresh::Used).unwrap();
        fill(a, len, 0xa5);
        let half = len / 2;
        phys.zero(a + 100, half - 100);
        // Before anything reads the range: a read of a hole fills it.
        assert!(phys.populated(a + PAGE_SIZE, half - PAGE_SIZE).is_empty(), "a long run stays held");
        assert_eq!(phys.populated(a + half, half), vec![(a + half, half)]);
        assert!(all_zero(a + 100, half - 100));
        let mut rest = vec![0u8; half + 100];
        assert_eq!(copy_from_guest(&mut rest[..100], a), 100);
        assert_eq!(copy_from_guest(&mut rest[100..], a + half), half);
        assert!(rest.iter().all(|&b| b == 0xa5));
        phys.free(a, len);
    }

    /// A stack zeroed over a previous owner's pages: it reads as zero, its
    /// top is held (zeroed in place) and the pages below went back to the
    /// host.
    fn stacks_keep_only_their_top_pages(phys: &PhysicalMemory) {
        let len = 2 << 20;
        let a = phys.alloc(len, PAGE_SIZE, Fresh::Used).unwrap();
        for p in (0..len / PAGE_SIZE).step_by(64) {
            fill(a + p * PAGE_SIZE, PAGE_SIZE, 0x3c);
        }
        fill(a + len - 3 * PAGE_SIZE, 3 * PAGE_SIZE, 0x3c);
        phys.zero_stack(a, len);
        // The top is zeroed in place from its first page that held data
        // (page 448 of 512) on, holes and all.
        let top = len - SPARSE_ZERO_MAX;
        let held = vec![(a + top, SPARSE_ZERO_MAX)];
        assert_eq!(phys.populated(a, len), held);
        assert!(all_zero(a, len));
        phys.free(a, len);
    }

    /// The one test that owns the process-wide physical memory.
    #[test]
    fn pages_leave_the_allocator_zeroed() {
        let mem = PhysMem::init(256 << 20).expect("physical memory");
        let phys: &'static PhysicalMemory = Box::leak(Box::new(PhysicalMemory::new(mem, 128 << 20)));
        // Wholly used, and used here and there (zeroed in place, and in
        // runs long enough to go back to the host).
        for len in [PAGE_SIZE, 16 * PAGE_SIZE, 1 << 20, 32 << 20] {
            for stride in [1, 3, 100] {
                let a = phys.alloc(len, PAGE_SIZE, Fresh::Used).unwrap();
                assert!(all_zero(a, len));
                for p in (0..len / PAGE_SIZE).step_by(stride) {
                    fill(a + p * PAGE_SIZE, PAGE_SIZE, 0xa5);
                }
                phys.free(a, len);
                // Lowest-address-first: the same pages come back, dirty.
                let b = phys.alloc(len, PAGE_SIZE, Fresh::Used).unwrap();
                assert_eq!(a, b);
                assert!(all_zero(b, len), "reused pages not zeroed (len {len}, stride {stride})");
                phys.free(b, len);
            }
        }
        // Unzeroed pages: the caller zeroes what it does not write, to the
        // byte (a segment's file bytes end mid-page).
        let len = 64 * PAGE_SIZE;
        let a = phys.alloc(len, PAGE_SIZE, Fresh::Used).unwrap();
        fill(a, len, 0x77);
        phys.free(a, len);
        let b = phys.alloc_unzeroed(len, PAGE_SIZE).unwrap();
        assert_eq!(a, b);
        fill(b + 100, 5000, 0x11);
        phys.zero(b, 100);
        phys.zero(b + 5100, len - 5100);
        let mut got = vec![0u8; len];
        assert_eq!(copy_from_guest(&mut got, b), len);
        assert!(got[..100].iter().all(|&x| x == 0) && got[5100..].iter().all(|&x| x == 0));
        assert!(got[100..5100].iter().all(|&x| x == 0x11));
        phys.free(b, len);
        // Protection survives free; alloc makes pages writable again (the
        // fill below would fault otherwise), alloc_unzeroed leaves it, and
        // nomu's own zeroing does not need it.
        let a = phys.alloc(4 * PAGE_SIZE, PAGE_SIZE, Fresh::Used).unwrap();
        fill(a, 4 * PAGE_SIZE, 0x33);
        phys.set_prot(a, PAGE_SIZE, 0).unwrap();
        phys.set_prot(a + PAGE_SIZE, PAGE_SIZE, libc::PROT_READ).unwrap();
        phys.free(a, 4 * PAGE_SIZE);
        let b = phys.alloc_unzeroed(4 * PAGE_SIZE, PAGE_SIZE).unwrap();
        assert_eq!(a, b);
        assert_eq!(
            phys.buddy.lock().unwrap().prot[phys.pfn(b)..phys.pfn(b) + 2],
            [prot_code(0), prot_code(libc::PROT_READ)]
        );
        phys.zero(b, 4 * PAGE_SIZE);
        phys.free(b, 4 * PAGE_SIZE);
        let c = phys.alloc(4 * PAGE_SIZE, PAGE_SIZE, Fresh::Used).unwrap();
        assert_eq!(a, c);
        assert!(all_zero(c, 4 * PAGE_SIZE));
        fill(c, 4 * PAGE_SIZE, 0x44);
        phys.free(c, 4 * PAGE_SIZE);
        // Past the dirty limit every free page goes back to the host,
        // zeroed, a free block at a time; pages in use between free ones
        // keep what they hold.
        let kept = phys.alloc(3 * PAGE_SIZE, PAGE_SIZE, Fresh::Used).unwrap();
        fill(kept, 3 * PAGE_SIZE, 0x66);
        phys.free(kept + PAGE_SIZE, PAGE_SIZE);
        // (The limit is what guests may still commit, at least
        // MAX_DIRTY_FREE: with most of --mem committed, that.)
        let committed = phys.commit().limit() - MAX_DIRTY_FREE / 2;
        phys.commit().charge(committed, 0).unwrap();
        assert_eq!(phys.max_dirty_free(), MAX_DIRTY_FREE);
        let big = MAX_DIRTY_FREE + (4 << 20);
        let a = phys.alloc(big, PAGE_SIZE, Fresh::Used).unwrap();
        fill(a, big, 0x5a);
        phys.free(a, big);
        phys.commit().uncharge(committed);
        assert_eq!(phys.buddy.lock().unwrap().dirty_free, 0);
        let b = phys.alloc_at(a, PAGE_SIZE, Fresh::Used);
        assert!(b.is_ok() && all_zero(a, PAGE_SIZE));
        phys.free(a, PAGE_SIZE);
        let mut got = vec![0u8; PAGE_SIZE];
        for page in [kept, kept + 2 * PAGE_SIZE] {
            assert_eq!(copy_from_guest(&mut got, page), PAGE_SIZE);
            assert!(got.iter().all(|&x| x == 0x66), "a page in use was swept");
        }
        phys.free(kept, PAGE_SIZE);
        phys.free(kept + 2 * PAGE_SIZE, PAGE_SIZE);
        copies_leave_no_data_in_their_gaps(phys);
        zeroing_stays_in_its_range(phys);
        stacks_keep_only_their_top_pages(phys);
        pinned_pages_stay_owned(phys);
        reservations_hold_nothing(phys);
        secret_pages_leave_the_direct_map(phys);
        frames_mappings(phys);
        teardown_puts_everything_back(phys);
    }

    /// The last process to leave an address space tears it down (one that
    /// still has a user keeps it): every page free, the charge gone, every
    /// host protection read-write again, a frames VMA's direct map its own.
    fn teardown_puts_everything_back(phys: &'static PhysicalMemory) {
        use crate::mm::mapping::{Frames, OwnedFrames};
        use crate::mm::space::{AddressSpace, Placement, Vma, VmaKind, PROT_EXEC, PROT_READ, PROT_WRITE};
        let c0 = phys.commit().committed();
        let src = OwnedFrames::new(phys, 2 * PAGE_SIZE, false).unwrap();
        let mut space = AddressSpace::new(phys);
        space.enter();
        space.enter();
        let rw = Vma::new(0, PROT_READ | PROT_WRITE, VmaKind::Anon);
        let a = space.map(Placement::Anywhere { align: PAGE_SIZE }, 16 * PAGE_SIZE, rw, |_| Ok(())).unwrap();
        fill(a, 16 * PAGE_SIZE, 0x77);
        space.protect(a, PAGE_SIZE, 0).unwrap();
        space.protect(a + 4 * PAGE_SIZE, 2 * PAGE_SIZE, PROT_READ | PROT_EXEC).unwrap();
        // An inaccessible VMA longer than a guard page's.
        let rw = Vma::new(0, PROT_READ | PROT_WRITE, VmaKind::Anon);
        let big = 20 * PAGE_SIZE;
        let r = space.map(Placement::Anywhere { align: PAGE_SIZE }, big, rw, |_| Ok(())).unwrap();
        space.protect(r, big, 0).unwrap();
        let mut vma = Vma::new(0, PROT_READ, VmaKind::File);
        vma.frames = Some(Frames::new(src.clone(), 0));
        let f = space.map_frames(Placement::Anywhere { align: PAGE_SIZE }, 2 * PAGE_SIZE, vma).unwrap();
        space.leave();
        assert!(!phys.is_free(a, 16 * PAGE_SIZE), "torn down with a user left");
        space.leave();
        assert!(phys.is_free(a, 16 * PAGE_SIZE) && phys.is_free(f, 2 * PAGE_SIZE) && phys.is_free(r, big));
        assert_eq!(phys.commit().committed(), c0);
        assert_eq!(phys.translate(f), f, "the direct map still shows the frames");
        assert_eq!(std::sync::Arc::strong_count(&src), 1, "the frames' reference was kept");
        let pages = phys.buddy.lock().unwrap();
        let p = phys.pfn(a);
        // The guard page (one inaccessible page) keeps its protection, as
        // the host does; every other protection is put back.
        assert_eq!(pages.prot[p], prot_code(libc::PROT_NONE), "the guard page's protection was put back");
        assert_eq!(host_perms(a), "---");
        assert!(pages.prot[p + 1..p + 16].iter().all(|&c| c == prot_code(RW)), "a protection was left");
        let q = phys.pfn(r);
        assert!(pages.prot[q..q + 20].iter().all(|&c| c == prot_code(RW)), "a long PROT_NONE VMA was left");
        drop(pages);
        assert_eq!(host_perms(r), "rw-");
        drop(space);
        let b = phys.alloc(16 * PAGE_SIZE, PAGE_SIZE, Fresh::Used).unwrap();
        assert!(all_zero(b, 16 * PAGE_SIZE));
        phys.free(b, 16 * PAGE_SIZE);
    }

    /// The host's protection of the page at `addr`, from /proc/self/maps
    /// ("rw-", "---"...).
    fn host_perms(addr: usize) -> String {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        for l in maps.lines() {
            let (range, rest) = l.split_once(' ').unwrap();
            let (s, e) = range.split_once('-').unwrap();
            let (s, e) = (usize::from_str_radix(s, 16).unwrap(), usize::from_str_radix(e, 16).unwrap());
            if s <= addr && addr < e {
                return rest[..3].to_string();
            }
        }
        panic!("{addr:#x} not mapped")
    }

    /// No page of an UNMAPPED pageblock is accessible through either view
    /// of the direct map, as the host sees it; every other pageblock is.
    fn check_unmapped_against_host(phys: &PhysicalMemory) {
        let types: Vec<(usize, FreeType)> = {
            let pages = phys.buddy.lock().unwrap();
            let n = pages.buddy.pageblock_counts().iter().sum::<usize>();
            (0..n).map(|pb| (pb, pages.buddy.pageblock_type(pb * PAGEBLOCK_PAGES))).collect()
        };
        for (pb, ft) in types {
            for p in [0, PAGEBLOCK_PAGES - 1] {
                let a = phys.addr(pb * PAGEBLOCK_PAGES + p);
                let (direct, alias) = (host_perms(a), host_perms(phys.mem.alias_addr(a)));
                if ft.unmapped() {
                    assert!(direct == "---" && alias == "---", "UNMAPPED page {a:#x} is {direct}/{alias}");
                } else {
                    assert_eq!(alias, "rw-", "the alias of {a:#x} stayed unmapped");
                }
            }
        }
    }

    fn read_secret(a: usize) -> Vec<u8> {
        let m = crate::host::mermap::Mapping::new(a, PAGE_SIZE).unwrap();
        let mut buf = vec![0u8; PAGE_SIZE];
        m.read(0, &mut buf);
        buf
    }

    /// Secret pages: taken from UNMAPPED pageblocks converted whole, zeroed
    /// through the mermap, pooled while free, wiped when reverted.
    fn secret_pages_leave_the_direct_map(phys: &'static PhysicalMemory) {
        let pool = phys.pool / PAGE_SIZE;
        let a = phys.alloc_secret(3 * PAGE_SIZE).unwrap();
        assert!(phys.mem.populated(a, 3 * PAGE_SIZE).is_empty() || read_secret(a).iter().all(|&b| b == 0));
        check_unmapped_against_host(phys);
        assert_eq!(phys.secret_stats().0, 3 * PAGE_SIZE);
        crate::host::mermap::Mapping::new(a, 3 * PAGE_SIZE).unwrap().write(PAGE_SIZE, &[0xee; 100]);
        assert_eq!(crate::host::mermap::live(), 0, "a mermap mapping outlived its use");
        {
            // Several uses at once, each its own pages of the slot; one
            // that does not fit is refused, and the slot is whole again
            // when they go.
            use crate::host::mermap::{room, Mapping, SLOT_SIZE};
            assert_eq!(room(), SLOT_SIZE);
            let one = Mapping::of_runs(&[(a + PAGE_SIZE, PAGE_SIZE), (a, PAGE_SIZE)]).unwrap();
            let two = Mapping::new(a + PAGE_SIZE, PAGE_SIZE).unwrap();
            assert_eq!((crate::host::mermap::live(), room()), (2, SLOT_SIZE - 3 * PAGE_SIZE));
            let mut x = [0u8; 2];
            one.read(0, &mut x);
            assert_eq!(x, [0xee; 2]);
            two.write(0, &[0x11]);
            one.read(0, &mut x[..1]);
            assert_eq!(x[0], 0x11, "two mappings of one page show one page");
            drop(one);
            assert_eq!(Mapping::new(a, SLOT_SIZE - PAGE_SIZE).err(), Some(crate::abi::errno::Errno::ENOMEM));
            let three = Mapping::new(a, 3 * PAGE_SIZE).unwrap();
            drop((two, three));
            assert_eq!((crate::host::mermap::live(), room()), (0, SLOT_SIZE));
            crate::host::mermap::check_empty();
        }
        phys.free_secret(a, 3 * PAGE_SIZE);
        // Pooled: the same pages come back, still unmapped, zeroed.
        let b = phys.alloc_secret(3 * PAGE_SIZE).unwrap();
        assert_eq!(a, b);
        assert!(read_secret(b + PAGE_SIZE).iter().all(|&x| x == 0), "a secret page came back dirty");
        check_unmapped_against_host(phys);
        // A large allocation converts a run of pageblocks; freed past the
        // pool, the pageblocks are wiped and mapped again.
        let big = phys.alloc_secret(phys.pool + 8 * PAGEBLOCK_PAGES * PAGE_SIZE).unwrap();
        check_unmapped_against_host(phys);
        let last = big + phys.pool + 8 * PAGEBLOCK_PAGES * PAGE_SIZE - PAGE_SIZE;
        crate::host::mermap::Mapping::new(last, PAGE_SIZE).unwrap().write(0, &[0xcd; PAGE_SIZE]);
        phys.free_secret(big, phys.pool + 8 * PAGEBLOCK_PAGES * PAGE_SIZE);
        phys.free_secret(b, 3 * PAGE_SIZE);
        let (used, pooled) = phys.secret_stats();
        assert!(used == 0 && pooled > 0 && pooled <= phys.pool, "pool of {pooled}");
        assert!(phys.buddy.lock().unwrap().buddy.free_pages_of(FreeType::SHARED_UNMAPPED) <= pool);
        check_unmapped_against_host(phys);
        // What was secret reads as zero through the direct map once mapped.
        assert_eq!(host_perms(last), "rw-");
        assert!(all_zero(last, PAGE_SIZE), "secret data readable through the direct map");
        // Guest allocations never get pooled pages.
        let g = phys.alloc(PAGE_SIZE, PAGE_SIZE, Fresh::Used).unwrap();
        assert!(!phys.buddy.lock().unwrap().buddy.pageblock_type(phys.pfn(g)).unmapped());
        assert_eq!(phys.alloc_at(b, PAGE_SIZE, Fresh::Used), Err(Errno::ENOMEM), "MAP_FIXED into the pool");
        assert!(!phys.is_free(b, PAGE_SIZE), "a pooled page counts as free for anyone");
        phys.free(g, PAGE_SIZE);
        // The naive policies (bench baselines) work too.
        for policy in [UnmappedPolicy::PerPage, UnmappedPolicy::Never] {
            phys.set_unmapped_policy(policy);
            let s = phys.alloc_secret(4 * PAGE_SIZE).unwrap();
            let want = if policy == UnmappedPolicy::PerPage { "---" } else { "rw-" };
            assert_eq!(host_perms(s + PAGE_SIZE), want);
            assert_eq!(host_perms(phys.mem.alias_addr(s + PAGE_SIZE)), want);
            phys.free_secret(s, 4 * PAGE_SIZE);
            assert_eq!(host_perms(s + PAGE_SIZE), "rw-");
        }
        phys.set_unmapped_policy(UnmappedPolicy::Pooled);
    }

    /// A VMA showing frames held elsewhere (mm::mapping): the guest address
    /// reaches them through the host MMU and nomu through the translation;
    /// unmapping a part puts that part's own pages back; making a
    /// copy-on-write source's VMA writable copies it, charged; the handle
    /// goes with the address space.
    fn frames_mappings(phys: &'static PhysicalMemory) {
        use crate::mm::mapping::{Frames, OwnedFrames};
        use crate::mm::space::{AddressSpace, Placement, Vma, VmaKind, PROT_READ, PROT_WRITE};
        let len = 4 * PAGE_SIZE;
        let src = OwnedFrames::new(phys, len, true).unwrap();
        fill(src.start(), len, 0x5a);
        let c0 = phys.commit().committed();
        let mut space = AddressSpace::new(phys);
        let mut vma = Vma::new(0, PROT_READ, VmaKind::File);
        vma.frames = Some(Frames::new(src.clone(), 0));
        let a = space.map_frames(Placement::Anywhere { align: PAGE_SIZE }, len, vma).unwrap();
        assert_ne!(a, src.start());
        assert_eq!(phys.commit().committed(), c0, "a frames VMA was charged");
        let mut got = vec![0u8; len];
        assert_eq!(copy_from_guest(&mut got, a), len);
        assert!(got.iter().all(|&x| x == 0x5a), "the guest address does not show the frames");
        assert_eq!(space.frame_of(a + PAGE_SIZE + 5), Some(src.start() + PAGE_SIZE + 5));
        assert_eq!(phys.translate(a + PAGE_SIZE + 5), src.start() + PAGE_SIZE + 5);
        // nomu's alias writes reach the frame.
        phys.mem.poke(a + 3 * PAGE_SIZE - 1, &[1, 2]);
        let mut two = [0u8; 2];
        assert_eq!(copy_from_guest(&mut two, src.start() + 3 * PAGE_SIZE - 1), 2);
        assert_eq!(two, [1, 2]);
        assert!(phys.mem.populated(a, len).is_empty(), "the VMA's own pages hold memory");
        // Unmapping a page in the middle puts the direct map back there only.
        space.unmap(a + PAGE_SIZE, PAGE_SIZE);
        assert_eq!(phys.translate(a + PAGE_SIZE), a + PAGE_SIZE);
        assert_eq!(space.frame_of(a + 2 * PAGE_SIZE), Some(src.start() + 2 * PAGE_SIZE));
        assert_eq!(copy_from_guest(&mut got[..PAGE_SIZE], a + 2 * PAGE_SIZE), PAGE_SIZE);
        assert!(got[..PAGE_SIZE - 1].iter().all(|&x| x == 0x5a));
        // Writable: a private copy, charged; the frame keeps its bytes.
        space.protect(a, PAGE_SIZE, PROT_READ | PROT_WRITE).unwrap();
        assert_eq!(phys.commit().committed(), c0 + PAGE_SIZE);
        assert_eq!(space.frame_of(a), Some(a));
        fill(a, 16, 0x11);
        assert_eq!(copy_from_guest(&mut got[..32], a), 32);
        assert!(got[..16].iter().all(|&x| x == 0x11) && got[16..32].iter().all(|&x| x == 0x5a));
        assert_eq!(copy_from_guest(&mut got[..16], src.start()), 16);
        assert!(got[..16].iter().all(|&x| x == 0x5a), "a private write reached the source");
        // mremap growing a copy-on-write frames VMA copies it too.
        let moved = space.remap(a + 2 * PAGE_SIZE, 2 * PAGE_SIZE, 8 * PAGE_SIZE, true).unwrap();
        assert_eq!(space.frame_of(moved), Some(moved));
        assert_eq!(copy_from_guest(&mut got[..PAGE_SIZE], moved), PAGE_SIZE);
        assert!(got[..PAGE_SIZE - 1].iter().all(|&x| x == 0x5a));
        // MAP_FIXED over a frames VMA takes its own pages back.
        let mut vma = Vma::new(0, PROT_READ, VmaKind::File);
        vma.frames = Some(Frames::new(src.clone(), PAGE_SIZE));
        let b = space.map_frames(Placement::Anywhere { align: PAGE_SIZE }, 2 * PAGE_SIZE, vma).unwrap();
        let rw = Vma::new(0, PROT_READ | PROT_WRITE, VmaKind::Anon);
        space.map(Placement::Fixed(b), PAGE_SIZE, rw, |_| Ok(())).unwrap();
        assert!(all_zero(b, PAGE_SIZE) && phys.translate(b) == b);
        assert_eq!(space.frame_of(b + PAGE_SIZE), Some(src.start() + 2 * PAGE_SIZE));
        assert_eq!(std::sync::Arc::strong_count(&src), 2);
        drop(space);
        assert_eq!(std::sync::Arc::strong_count(&src), 1, "a frames handle outlived its address space");
        assert_eq!(phys.translate(b + PAGE_SIZE), b + PAGE_SIZE);
        assert_eq!(phys.commit().committed(), c0);
        assert!(phys.is_free(a, PAGE_SIZE) && phys.is_free(b, 2 * PAGE_SIZE));
        // The same frames mapped at the same place again take up the stale
        // host mapping; the pages allocated for anything else get their own.
        let mut space = AddressSpace::new(phys);
        let mut vma = Vma::new(0, PROT_READ, VmaKind::File);
        vma.frames = Some(Frames::new(src.clone(), PAGE_SIZE));
        let c = space.map_frames(Placement::Fixed(b + PAGE_SIZE), PAGE_SIZE, vma).unwrap();
        assert_eq!(space.frame_of(c), Some(src.start() + PAGE_SIZE));
        assert_eq!(copy_from_guest(&mut got[..PAGE_SIZE], c), PAGE_SIZE);
        assert!(got[..PAGE_SIZE].iter().all(|&x| x == 0x5a));
        drop(space);
        let d = b;
        phys.alloc_at(d, 2 * PAGE_SIZE, Fresh::Used).unwrap();
        assert!(all_zero(d, 2 * PAGE_SIZE), "a stale frames mapping survived allocation");
        fill(d, 2 * PAGE_SIZE, 0x22);
        assert_eq!(copy_from_guest(&mut got[..PAGE_SIZE], src.start() + PAGE_SIZE), PAGE_SIZE);
        assert!(got[..PAGE_SIZE].iter().all(|&x| x == 0x5a), "a write went to the frames");
        phys.free(d, 2 * PAGE_SIZE);
        // Frames freed: no stale mapping of them is left anywhere.
        let mut space = AddressSpace::new(phys);
        let mut vma = Vma::new(0, PROT_READ, VmaKind::File);
        vma.frames = Some(Frames::new(src.clone(), 0));
        let e = space.map_frames(Placement::Anywhere { align: PAGE_SIZE }, PAGE_SIZE, vma).unwrap();
        drop(space);
        drop(src);
        assert!(all_zero(e, PAGE_SIZE), "the direct map still shows freed frames");
    }

    /// A reservation's pages are holes, even where freed pages held data;
    /// it is charged nothing until made accessible, and its charge goes
    /// with the mapping (see mm::commit).
    fn reservations_hold_nothing(phys: &'static PhysicalMemory) {
        use crate::mm::space::{AddressSpace, Placement, Vma, VmaKind, PROT_READ, PROT_WRITE};
        let len = 64 * PAGE_SIZE;
        let a = phys.alloc(len, PAGE_SIZE, Fresh::Used).unwrap();
        fill(a, len, 0x99);
        phys.free(a, len);
        let b = phys.alloc(len, PAGE_SIZE, Fresh::Reserved).unwrap();
        assert_eq!(a, b);
        assert!(phys.mem.populated(b, len).is_empty(), "a reservation holds host memory");
        assert!(all_zero(b, len));
        let dirty = phys.buddy.lock().unwrap().dirty_free;
        phys.free_untouched(b, len);
        assert_eq!(phys.buddy.lock().unwrap().dirty_free, dirty, "untouched pages came back dirty");

        let c0 = phys.commit().committed();
        let mut space = AddressSpace::new(phys);
        let none = Vma::new(0, 0, VmaKind::Anon);
        // Larger than --mem (128M here), in a window of 256M.
        let r = space.map(Placement::Anywhere { align: PAGE_SIZE }, 192 << 20, none, |_| Ok(())).unwrap();
        assert_eq!(phys.commit().committed(), c0, "a reservation was charged");
        assert_eq!(space.protect(r, 160 << 20, PROT_READ), Err(Errno::ENOMEM), "past --mem");
        assert_eq!(space.accessible_prefix(r, 1, false), 0, "a failed mprotect changed the protection");
        space.protect(r, 16 * PAGE_SIZE, PROT_READ | PROT_WRITE).unwrap();
        assert_eq!(phys.commit().committed(), c0 + 16 * PAGE_SIZE);
        space.protect(r, 16 * PAGE_SIZE, 0).unwrap();
        space.protect(r + 8 * PAGE_SIZE, 16 * PAGE_SIZE, PROT_READ).unwrap();
        assert_eq!(phys.commit().committed(), c0 + 24 * PAGE_SIZE, "PROT_NONE kept the charge, once");
        space.unmap(r + 4 * PAGE_SIZE, 8 * PAGE_SIZE);
        assert_eq!(phys.commit().committed(), c0 + 16 * PAGE_SIZE);
        let rw = Vma::new(0, PROT_READ | PROT_WRITE, VmaKind::Anon);
        space.map(Placement::Fixed(r + 16 * PAGE_SIZE), 16 * PAGE_SIZE, rw, |_| Ok(())).unwrap();
        assert_eq!(phys.commit().committed(), c0 + 24 * PAGE_SIZE, "MAP_FIXED netted what it replaced");
        let moved = space.remap(r + 16 * PAGE_SIZE, 16 * PAGE_SIZE, 32 * PAGE_SIZE, true).unwrap();
        assert_eq!(phys.commit().committed(), c0 + 40 * PAGE_SIZE, "mremap charges the growth");
        assert!(space.find(moved).is_some_and(|(_, v)| v.charged));
        drop(space);
        assert_eq!(phys.commit().committed(), c0);
    }

    /// Pages a copy is using (pinned) stay off the allocator when the
    /// mapping goes, until the pin does; MAP_FIXED over them takes them back.
    fn pinned_pages_stay_owned(phys: &'static PhysicalMemory) {
        use crate::mm::space::{AddressSpace, Placement, Vma, VmaKind, PROT_READ, PROT_WRITE};
        let mut space = AddressSpace::new(phys);
        let rw = || Vma::new(0, PROT_READ | PROT_WRITE, VmaKind::Anon);
        let a = space.map(Placement::Anywhere { align: PAGE_SIZE }, 8 * PAGE_SIZE, rw(), |_| Ok(())).unwrap();
        space.pin(a + 2 * PAGE_SIZE, 10);
        space.pin(a + 2 * PAGE_SIZE, 10);
        space.unmap(a, 4 * PAGE_SIZE);
        assert!(!phys.is_free(a, 4 * PAGE_SIZE), "pinned pages went back to the allocator");
        assert_eq!(space.accessible_prefix(a + 2 * PAGE_SIZE, 10, false), 0, "the mapping is gone");
        space.unpin(a + 2 * PAGE_SIZE, 10);
        assert!(!phys.is_free(a, 4 * PAGE_SIZE), "a second pin still holds them");
        space.unpin(a + 2 * PAGE_SIZE, 10);
        assert!(phys.is_free(a, 4 * PAGE_SIZE));
        // Unpinned pages go at once; pinned ones a MAP_FIXED reclaims.
        space.pin(a + 5 * PAGE_SIZE, PAGE_SIZE);
        space.unmap(a + 4 * PAGE_SIZE, 4 * PAGE_SIZE);
        assert!(phys.is_free(a + 4 * PAGE_SIZE, PAGE_SIZE) && !phys.is_free(a + 5 * PAGE_SIZE, PAGE_SIZE));
        space.map(Placement::Fixed(a + 4 * PAGE_SIZE), 4 * PAGE_SIZE, rw(), |_| Ok(())).unwrap();
        space.unpin(a + 5 * PAGE_SIZE, PAGE_SIZE);
        assert!(!phys.is_free(a + 5 * PAGE_SIZE, PAGE_SIZE), "the new mapping owns it");
        drop(space);
        assert!(phys.is_free(a, 8 * PAGE_SIZE));
    }
}
