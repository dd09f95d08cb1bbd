//! A binary buddy allocator over page frame numbers, with free lists
//! indexed by *freetype* (seed 003, `__GFP_UNMAPPED` v2).
//!
//! Free blocks of 2^order pages are kept per (order, freetype), lowest
//! address first, so allocations pack towards the bottom of physical
//! memory. Blocks that need not be a power of two are carved from one and
//! their tail returned, as Linux's `alloc_pages_exact` does; `alloc_at`
//! claims given pages (for fixed-address programs, MAP_FIXED and brk
//! growth).
//!
//! **Freetypes.** A freetype is a base type, which groups pages by who
//! owns them and so how long they live, plus flags (see [`FreeType`]).
//! Memory is cut into *pageblocks* of 512 pages (2 MiB, Linux's
//! `pageblock_order` 9), and each pageblock records its freetype: a free
//! block lies in the lists of its pageblock's freetype, buddies merge only
//! within one freetype, and freed pages go back to their pageblock's
//! freetype. An allocation takes from its own freetype's lists; when they
//! are empty it *claims* a whole free pageblock (or a run of them, for a
//! large allocation) from another freetype, in [`fallback`] order, and
//! converts it; only when no free pageblock is left does a mapped freetype
//! *steal* a smaller block, which stays its pageblock's (Linux's
//! `steal_suitable_fallback` without the claim). UNMAPPED freetypes never
//! steal: their pages must lie in pageblocks the host has already taken
//! out of the direct map, a whole pageblock at a time. Every conversion is
//! queued in [`BuddyAllocator::take_conversions`] for the caller
//! (mm::phys), which makes the host calls, one per run of pageblocks.
//!
//! Physical memory is a window far larger than what guests use (see
//! mm::commit), so the per-page record is zero for a page that heads no
//! free block: the vector is made of zeroed memory the host gives lazily,
//! and only the pages of blocks ever freed cost anything. The pageblock
//! record is one byte per 2 MiB (64 KiB for the 128 GiB window), also
//! zero (GUEST) until a pageblock is converted.

use super::pfnset::PfnSet;

/// The largest block: 2^30 pages (4 TiB), so one mapping can reserve far
/// more than the 4 GiB a smaller order would allow (a JVM's heap).
pub const MAX_ORDER: usize = 30;
/// Pageblocks are 2^9 pages (2 MiB), as Linux's pageblock_order on x86-64.
pub const PAGEBLOCK_ORDER: usize = 9;
pub const PAGEBLOCK_PAGES: usize = 1 << PAGEBLOCK_ORDER;
const NOT_FREE: u8 = 0;

/// A freetype: a base type in the low bits, flags above.
///
/// Base types (what is real in nomu):
/// - GUEST: a process's own memory (anonymous mappings, stacks, heaps,
///   program images, reservations): freed when its mapping goes.
/// - SHARED: pages an object owns beyond any one mapping (System V shared
///   memory segments, memfd_secret files): freed when the object goes.
///
/// nomu keeps nothing of its own in physical memory, so there is no
/// kernel-internal base type. Flags: UNMAPPED, pages absent from the
/// direct map (both of nomu's views of it: the guests' identity map and
/// nomu's writable alias).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, PartialOrd, Ord)]
pub struct FreeType(u8);

pub const NR_FREETYPES: usize = 4;
const FLAG_UNMAPPED: u8 = 2;

impl FreeType {
    pub const GUEST: FreeType = FreeType(0);
    pub const SHARED: FreeType = FreeType(1);
    pub const GUEST_UNMAPPED: FreeType = FreeType(FLAG_UNMAPPED);
    pub const SHARED_UNMAPPED: FreeType = FreeType(1 | FLAG_UNMAPPED);
    pub const ALL: [FreeType; NR_FREETYPES] =
        [FreeType::GUEST, FreeType::SHARED, FreeType::GUEST_UNMAPPED, FreeType::SHARED_UNMAPPED];

    pub fn index(self) -> usize {
        self.0 as usize
    }

    pub fn unmapped(self) -> bool {
        self.0 & FLAG_UNMAPPED != 0
    }

    /// The same base type without flags.
    pub fn base(self) -> FreeType {
        FreeType(self.0 & !FLAG_UNMAPPED)
    }

    /// The name /proc/pagetypeinfo shows.
    pub fn name(self) -> &'static str {
        ["Guest", "Shared", "Guest-Unmap", "Shared-Unmap"][self.index()]
    }
}

/// Where an allocation of `ft` looks when its own lists are empty, in
/// order (Linux's fallbacks[] table): first the other base type with the
/// same flags, then the other flags. Claiming from another flag means a
/// host conversion (unmapping, or wiping and mapping back), so it comes
/// last.
pub fn fallback(ft: FreeType) -> [FreeType; NR_FREETYPES - 1] {
    [FreeType(ft.0 ^ 1), FreeType(ft.0 ^ FLAG_UNMAPPED), FreeType(ft.0 ^ 1 ^ FLAG_UNMAPPED)]
}

/// Pageblocks [pfn, pfn+npages) changed freetype: the host must make the
/// direct map agree (mm::phys does, one call per run).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Conversion {
    pub pfn: usize,
    pub npages: usize,
    pub from: FreeType,
    pub to: FreeType,
}

pub struct BuddyAllocator {
    npages: usize,
    /// Indexed by freetype * (MAX_ORDER + 1) + order.
    free_lists: Vec<PfnSet>,
    /// Per freetype, bit `order` set while that list is not empty (the
    /// allocation's search is one bit scan, not a look at every order).
    nonempty: [u32; NR_FREETYPES],
    /// For each page: 0, or the free block it heads as 1 + order in the
    /// low 5 bits and its freetype above (so equal bytes mean buddies that
    /// may merge: same order, same freetype).
    head_order: Vec<u8>,
    /// Each pageblock's freetype (its index).
    pageblock: Vec<u8>,
    nr_free: [usize; NR_FREETYPES],
    conversions: Vec<Conversion>,
}

fn head(order: usize, ft: FreeType) -> u8 {
    (order as u8 + 1) | (ft.0 << 5)
}

fn head_order_of(h: u8) -> usize {
    (h & 31) as usize - 1
}

fn ceil_log2(n: usize) -> usize {
    n.next_power_of_two().trailing_zeros() as usize
}

fn list(ft: FreeType, order: usize) -> usize {
    ft.index() * (MAX_ORDER + 1) + order
}

impl BuddyAllocator {
    pub fn new(npages: usize) -> BuddyAllocator {
        let mut b = BuddyAllocator {
            npages,
            free_lists: (0..NR_FREETYPES * (MAX_ORDER + 1)).map(|l| PfnSet::new(npages, l % (MAX_ORDER + 1))).collect(),
            nonempty: [0; NR_FREETYPES],
            head_order: vec![NOT_FREE; npages],
            pageblock: vec![0; npages.div_ceil(PAGEBLOCK_PAGES)],
            nr_free: [0; NR_FREETYPES],
            conversions: Vec::new(),
        };
        b.free(0, npages);
        b
    }

    /// Free pages of every freetype.
    #[cfg(test)]
    pub fn free_pages(&self) -> usize {
        self.nr_free.iter().sum()
    }

    /// Free pages of one freetype.
    pub fn free_pages_of(&self, ft: FreeType) -> usize {
        self.nr_free[ft.index()]
    }

    /// How many free blocks of `order` the freetype's list holds.
    pub fn count(&self, ft: FreeType, order: usize) -> usize {
        self.free_lists[list(ft, order)].len()
    }

    /// The freetype of the pageblock holding `pfn`.
    pub fn pageblock_type(&self, pfn: usize) -> FreeType {
        FreeType(self.pageblock[pfn >> PAGEBLOCK_ORDER])
    }

    /// How many pageblocks have each freetype (/proc/pagetypeinfo).
    pub fn pageblock_counts(&self) -> [usize; NR_FREETYPES] {
        let mut n = [0; NR_FREETYPES];
        for &t in &self.pageblock {
            n[t as usize] += 1;
        }
        n
    }

    /// Whether any pageblock overlapping [pfn, pfn+count) has a freetype
    /// `pred` holds for.
    pub fn any_pageblock(&self, pfn: usize, count: usize, pred: impl Fn(FreeType) -> bool) -> bool {
        count > 0
            && self.pageblock[pfn >> PAGEBLOCK_ORDER..=(pfn + count - 1) >> PAGEBLOCK_ORDER]
                .iter()
                .any(|&t| pred(FreeType(t)))
    }

    /// The conversions made since the last call, for the host to apply.
    pub fn take_conversions(&mut self) -> Vec<Conversion> {
        std::mem::take(&mut self.conversions)
    }

    /// Whether conversions wait for the host.
    pub fn has_conversions(&self) -> bool {
        !self.conversions.is_empty()
    }

    fn insert(&mut self, pfn: usize, order: usize, ft: FreeType) {
        self.free_lists[list(ft, order)].insert(pfn);
        self.nonempty[ft.index()] |= 1 << order;
        self.head_order[pfn] = head(order, ft);
        self.nr_free[ft.index()] += 1 << order;
    }

    fn remove(&mut self, pfn: usize, order: usize, ft: FreeType) {
        let l = &mut self.free_lists[list(ft, order)];
        let was_free = l.remove(pfn);
        debug_assert!(was_free);
        if l.is_empty() {
            self.nonempty[ft.index()] &= !(1 << order);
        }
        self.head_order[pfn] = NOT_FREE;
        self.nr_free[ft.index()] -= 1 << order;
    }

    /// The free block containing `pfn`, as (head, order).
    pub fn free_block_of(&self, pfn: usize) -> Option<(usize, usize)> {
        self.free_block_typed(pfn).map(|(h, o, _)| (h, o))
    }

    /// The free block containing `pfn`, as (head, order, freetype).
    pub fn free_block_typed(&self, pfn: usize) -> Option<(usize, usize, FreeType)> {
        (0..=MAX_ORDER).find_map(|o| {
            let h = pfn & !((1 << o) - 1);
            let b = self.head_order[h];
            (b != NOT_FREE && head_order_of(b) == o).then_some((h, o, FreeType(b >> 5)))
        })
    }

    /// The lowest free block of `ft` of at least `order`, smallest first.
    fn find(&self, ft: FreeType, order: usize) -> Option<(usize, usize)> {
        let mask = self.nonempty[ft.index()] >> order;
        if mask == 0 {
            return None;
        }
        let o = order + mask.trailing_zeros() as usize;
        Some((self.free_lists[list(ft, o)].first().unwrap(), o))
    }

    /// Allocates `count` contiguous pages aligned to `align` pages (a power
    /// of two), of the GUEST freetype. Returns the first page frame number.
    pub fn alloc(&mut self, count: usize, align: usize) -> Option<usize> {
        self.alloc_typed(count, align, FreeType::GUEST)
    }

    /// Allocates `count` contiguous pages aligned to `align` pages (a power
    /// of two) of freetype `ft`: from its own lists, else by claiming free
    /// pageblocks, else (mapped freetypes only) by stealing a smaller block.
    pub fn alloc_typed(&mut self, count: usize, align: usize, ft: FreeType) -> Option<usize> {
        if count == 0 || !align.is_power_of_two() {
            return None;
        }
        let order = ceil_log2(count).max(ceil_log2(align));
        if order > MAX_ORDER {
            return None;
        }
        let (pfn, found, from) = match self.find(ft, order) {
            Some((pfn, o)) => (pfn, o, ft),
            None => self.claim(order, ft).or_else(|| self.steal(order, ft))?,
        };
        self.remove(pfn, found, from);
        // Split: give back the upper half at each level down to `order`.
        for o in (order..found).rev() {
            self.insert(pfn + (1 << o), o, from);
        }
        // Trim the tail the caller did not ask for.
        self.free(pfn + count, (1 << order) - count);
        Some(pfn)
    }

    /// Claims whole free pageblocks (at least `order`'s worth) of another
    /// freetype in fallback order, converts them to `ft` and returns the
    /// block, now in `ft`'s lists.
    fn claim(&mut self, order: usize, ft: FreeType) -> Option<(usize, usize, FreeType)> {
        let want = order.max(PAGEBLOCK_ORDER);
        let (from, pfn, found) =
            fallback(ft).into_iter().find_map(|f| self.find(f, want).map(|(pfn, o)| (f, pfn, o)))?;
        self.remove(pfn, found, from);
        for o in (want..found).rev() {
            self.insert(pfn + (1 << o), o, from);
        }
        let n = 1 << want;
        let end = (pfn + n).min(self.npages);
        self.set_pageblocks(pfn, end - pfn, from, ft);
        self.insert(pfn, want, ft);
        Some((pfn, want, ft))
    }

    /// Records that the pageblocks of [pfn, pfn+npages) are now `to`.
    fn set_pageblocks(&mut self, pfn: usize, npages: usize, from: FreeType, to: FreeType) {
        self.pageblock[pfn >> PAGEBLOCK_ORDER..(pfn + npages).div_ceil(PAGEBLOCK_PAGES)].fill(to.0);
        match self.conversions.last_mut() {
            Some(c) if c.pfn + c.npages == pfn && c.from == from && c.to == to => c.npages += npages,
            _ => self.conversions.push(Conversion { pfn, npages, from, to }),
        }
    }

    /// A smaller block of another mapped freetype, left in its pageblock
    /// (freed pages go back there). Linux steals the largest block first
    /// to fragment less; so does this.
    fn steal(&mut self, order: usize, ft: FreeType) -> Option<(usize, usize, FreeType)> {
        if ft.unmapped() {
            return None;
        }
        fallback(ft).into_iter().filter(|f| !f.unmapped()).find_map(|f| {
            let mask = self.nonempty[f.index()] >> order << order;
            (mask != 0).then(|| {
                let o = 31 - mask.leading_zeros() as usize;
                (self.free_lists[list(f, o)].first().unwrap(), o, f)
            })
        })
    }

    /// Gives free pageblocks of `ft` back to its base type until at most
    /// `keep` free pages are left (the largest blocks first, their upper
    /// halves, so the pool keeps low addresses), as conversions; returns
    /// how many pages went.
    pub fn revert_free_pageblocks(&mut self, ft: FreeType, keep: usize) -> usize {
        let mut reverted = 0;
        while self.nr_free[ft.index()] > keep {
            let mask = self.nonempty[ft.index()] >> PAGEBLOCK_ORDER << PAGEBLOCK_ORDER;
            if mask == 0 {
                break;
            }
            let mut o = 31 - mask.leading_zeros() as usize;
            let pfn = self.free_lists[list(ft, o)].last().unwrap();
            self.remove(pfn, o, ft);
            // Keep the lower halves that still fit under `keep`, revert
            // the rest.
            loop {
                let n = (1usize << o).min(self.npages - pfn);
                if self.nr_free[ft.index()] + n <= keep {
                    self.insert(pfn, o, ft);
                    break;
                }
                if o == PAGEBLOCK_ORDER {
                    reverted += self.revert_block(pfn, o, ft);
                    break;
                }
                o -= 1;
                reverted += self.revert_block(pfn + (1 << o), o, ft);
            }
        }
        reverted
    }

    fn revert_block(&mut self, pfn: usize, o: usize, ft: FreeType) -> usize {
        let n = (1usize << o).min(self.npages - pfn);
        self.set_pageblocks(pfn, n, ft, ft.base());
        self.free_block(pfn, o, ft.base());
        n
    }

    /// Whether every page in [pfn, pfn+count) is free.
    pub fn range_is_free(&self, pfn: usize, count: usize) -> bool {
        let end = match pfn.checked_add(count) {
            Some(e) if e <= self.npages => e,
            _ => return false,
        };
        let mut p = pfn;
        while p < end {
            match self.free_block_of(p) {
                Some((head, o)) => p = head + (1 << o),
                None => return false,
            }
        }
        true
    }

    /// Claims the given pages if all of them are free (whatever their
    /// freetype: the caller checks the pageblocks first).
    pub fn alloc_at(&mut self, pfn: usize, count: usize) -> bool {
        if !self.range_is_free(pfn, count) {
            return false;
        }
        let end = pfn + count;
        let mut p = pfn;
        while p < end {
            let (head, o, ft) = self.free_block_typed(p).expect("checked free");
            let block_end = head + (1 << o);
            self.remove(head, o, ft);
            // Return the parts of the block outside the claimed range.
            self.free(head, p - head);
            if block_end > end {
                self.free(end, block_end - end);
            }
            p = block_end.min(end);
        }
        true
    }

    /// Whether the pageblocks of the aligned block [pfn, pfn + 2^order)
    /// all have one freetype.
    fn uniform(&self, pfn: usize, order: usize) -> bool {
        if order <= PAGEBLOCK_ORDER {
            return true;
        }
        let first = pfn >> PAGEBLOCK_ORDER;
        let last = ((pfn + (1 << order)).min(self.npages) - 1) >> PAGEBLOCK_ORDER;
        let t = self.pageblock[first];
        self.pageblock[first..=last].iter().all(|&x| x == t)
    }

    /// Frees [pfn, pfn+count), each block to its pageblock's freetype,
    /// merging with free buddies of the same freetype.
    pub fn free(&mut self, mut pfn: usize, count: usize) {
        let end = pfn + count;
        assert!(end <= self.npages, "freeing pages past the end");
        while pfn < end {
            // The largest aligned block starting at pfn that fits and lies
            // in pageblocks of one freetype.
            let mut order = (pfn.trailing_zeros() as usize).min(MAX_ORDER);
            while pfn + (1 << order) > end || !self.uniform(pfn, order) {
                order -= 1;
            }
            let ft = self.pageblock_type(pfn);
            self.free_block(pfn, order, ft);
            pfn += 1 << order;
        }
    }

    fn free_block(&mut self, mut pfn: usize, mut order: usize, ft: FreeType) {
        debug_assert!(self.free_block_of(pfn).is_none(), "double free of page {pfn}");
        while order < MAX_ORDER {
            let buddy = pfn ^ (1 << order);
            if buddy + (1 << order) > self.npages || self.head_order[buddy] != head(order, ft) {
                break;
            }
            self.remove(buddy, order, ft);
            pfn = pfn.min(buddy);
            order += 1;
        }
        self.insert(pfn, order, ft);
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_and_free_restore_everything() {
        let mut b = BuddyAllocator::new(1000);
        assert_eq!(b.free_pages(), 1000);
        let a = b.alloc(3, 1).unwrap();
        let c = b.alloc(100, 1).unwrap();
        let d = b.alloc(1, 1).unwrap();
        assert_eq!(b.free_pages(), 1000 - 104);
        assert!(a + 3 <= c || c + 100 <= a);
        b.free(c, 100);
        b.free(a, 3);
        b.free(d, 1);
        assert_eq!(b.free_pages(), 1000);
        // Fully merged again: a 512-page block must be available.
        assert!(b.alloc(512, 512).is_some());
    }

    #[test]
    fn alignment_is_honoured() {
        let mut b = BuddyAllocator::new(4096);
        b.alloc(1, 1).unwrap();
        let p = b.alloc(10, 256).unwrap();
        assert_eq!(p % 256, 0);
    }

    #[test]
    fn alloc_at_claims_exactly_the_range() {
        let mut b = BuddyAllocator::new(1024);
        assert!(b.alloc_at(300, 50));
        assert_eq!(b.free_pages(), 1024 - 50);
        assert!(!b.alloc_at(340, 20));
        assert!(!b.range_is_free(349, 1));
        assert!(b.range_is_free(350, 10));
        assert!(b.alloc_at(350, 10));
        b.free(300, 60);
        assert_eq!(b.free_pages(), 1024);
        assert!(b.alloc(1024, 1).is_some());
    }

    #[test]
    fn exhaustion_returns_none() {
        let mut b = BuddyAllocator::new(64);
        assert!(b.alloc(65, 1).is_none());
        let all = b.alloc(64, 1).unwrap();
        assert!(b.alloc(1, 1).is_none());
        b.free(all, 64);
        assert!(b.alloc(1, 1).is_some());
    }

    #[test]
    fn out_of_range_alloc_at_fails() {
        let mut b = BuddyAllocator::new(16);
        assert!(!b.alloc_at(10, 10));
        assert!(!b.alloc_at(usize::MAX, 2));
    }

    /// Every free block lies in pageblocks of its list's freetype (a
    /// freetype's lists never hold another's pages), and the counters agree.
    fn check_lists(b: &BuddyAllocator) {
        for ft in FreeType::ALL {
            let mut pages = 0;
            for o in 0..=MAX_ORDER {
                for pfn in b.free_lists[list(ft, o)].iter() {
                    let end = (pfn + (1 << o)).min(b.npages);
                    for pb in pfn >> PAGEBLOCK_ORDER..=(end - 1) >> PAGEBLOCK_ORDER {
                        assert_eq!(FreeType(b.pageblock[pb]), ft, "block {pfn} order {o} in the wrong lists");
                    }
                    assert_eq!(b.head_order[pfn], head(o, ft));
                    pages += 1 << o;
                }
            }
            assert_eq!(pages, b.free_pages_of(ft));
        }
    }

    #[test]
    fn unmapped_allocations_claim_whole_pageblocks() {
        let mut b = BuddyAllocator::new(16 * PAGEBLOCK_PAGES);
        let s = b.alloc_typed(1, 1, FreeType::SHARED_UNMAPPED).unwrap();
        assert_eq!(s % PAGEBLOCK_PAGES, 0);
        assert_eq!(
            b.take_conversions(),
            [Conversion { pfn: s, npages: PAGEBLOCK_PAGES, from: FreeType::GUEST, to: FreeType::SHARED_UNMAPPED }]
        );
        // The rest of the pageblock is the pool: no conversion for the next.
        let t = b.alloc_typed(10, 1, FreeType::SHARED_UNMAPPED).unwrap();
        assert!(t / PAGEBLOCK_PAGES == s / PAGEBLOCK_PAGES && !b.has_conversions());
        assert_eq!(b.free_pages_of(FreeType::SHARED_UNMAPPED), PAGEBLOCK_PAGES - 11);
        // A guest allocation never gets those pages.
        let g = b.alloc(PAGEBLOCK_PAGES - 11, 1).unwrap();
        assert_ne!(g / PAGEBLOCK_PAGES, s / PAGEBLOCK_PAGES);
        check_lists(&b);
        // A large one converts a run of pageblocks in one conversion.
        let big = b.alloc_typed(3 * PAGEBLOCK_PAGES, 1, FreeType::SHARED_UNMAPPED).unwrap();
        let c = b.take_conversions();
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].pfn, c[0].npages), (big, 4 * PAGEBLOCK_PAGES));
        check_lists(&b);
        b.free(big, 3 * PAGEBLOCK_PAGES);
        b.free(s, 1);
        b.free(t, 10);
        check_lists(&b);
        assert_eq!(b.free_pages_of(FreeType::SHARED_UNMAPPED), 5 * PAGEBLOCK_PAGES);
        // Reverting keeps `keep` pages' worth and gives the rest back.
        assert_eq!(b.revert_free_pageblocks(FreeType::SHARED_UNMAPPED, PAGEBLOCK_PAGES), 4 * PAGEBLOCK_PAGES);
        assert_eq!(b.free_pages_of(FreeType::SHARED_UNMAPPED), PAGEBLOCK_PAGES);
        assert!(b.take_conversions().iter().all(|c| c.to == FreeType::SHARED && c.from == FreeType::SHARED_UNMAPPED));
        assert_eq!(b.revert_free_pageblocks(FreeType::SHARED_UNMAPPED, 0), PAGEBLOCK_PAGES);
        check_lists(&b);
        b.free(g, PAGEBLOCK_PAGES - 11);
        // Reverted pageblocks are SHARED now; GUEST allocations claim them
        // back, a pageblock at a time.
        assert_eq!(b.free_pages(), 16 * PAGEBLOCK_PAGES);
        for _ in 0..16 {
            b.alloc(PAGEBLOCK_PAGES, 1).unwrap();
        }
        assert_eq!(b.pageblock_counts()[FreeType::GUEST.index()], 16);
        check_lists(&b);
    }

    #[test]
    fn no_merging_across_freetypes() {
        let mut b = BuddyAllocator::new(4 * PAGEBLOCK_PAGES);
        let all = b.alloc(4 * PAGEBLOCK_PAGES, 1).unwrap();
        // Two buddy pageblocks of different freetypes, both wholly free.
        b.set_pageblocks(all, PAGEBLOCK_PAGES, FreeType::GUEST, FreeType::SHARED_UNMAPPED);
        b.free(all, 2 * PAGEBLOCK_PAGES);
        check_lists(&b);
        assert_eq!(b.count(FreeType::SHARED_UNMAPPED, PAGEBLOCK_ORDER), 1);
        assert_eq!(b.count(FreeType::GUEST, PAGEBLOCK_ORDER), 1);
        assert_eq!(b.count(FreeType::GUEST, PAGEBLOCK_ORDER + 1), 0);
        // Pages freed go to their pageblock's freetype, and merge there.
        b.free(all + 2 * PAGEBLOCK_PAGES, 2 * PAGEBLOCK_PAGES);
        assert_eq!(b.count(FreeType::GUEST, PAGEBLOCK_ORDER + 1), 1);
        check_lists(&b);
    }

    #[test]
    fn fallback_order() {
        assert_eq!(fallback(FreeType::GUEST), [FreeType::SHARED, FreeType::GUEST_UNMAPPED, FreeType::SHARED_UNMAPPED]);
        assert_eq!(fallback(FreeType::SHARED_UNMAPPED), [FreeType::GUEST_UNMAPPED, FreeType::SHARED, FreeType::GUEST]);
        let mut b = BuddyAllocator::new(4 * PAGEBLOCK_PAGES);
        let all = b.alloc(4 * PAGEBLOCK_PAGES, 1).unwrap();
        b.set_pageblocks(all, PAGEBLOCK_PAGES, FreeType::GUEST, FreeType::GUEST_UNMAPPED);
        b.set_pageblocks(all + PAGEBLOCK_PAGES, PAGEBLOCK_PAGES, FreeType::GUEST, FreeType::SHARED);
        b.take_conversions();
        b.free(all, 2 * PAGEBLOCK_PAGES);
        // SHARED_UNMAPPED claims the other unmapped type's pageblock first
        // (no host call needed beyond relabelling), then mapped ones.
        let a = b.alloc_typed(1, 1, FreeType::SHARED_UNMAPPED).unwrap();
        assert_eq!(a, all);
        assert_eq!(b.take_conversions()[0].from, FreeType::GUEST_UNMAPPED);
        let c = b.alloc_typed(PAGEBLOCK_PAGES, 1, FreeType::SHARED_UNMAPPED).unwrap();
        assert_eq!(c, all + PAGEBLOCK_PAGES);
        assert_eq!(b.take_conversions()[0].from, FreeType::SHARED);
        check_lists(&b);
        // No free pageblock left: a mapped type steals a smaller block
        // (which stays its pageblock's), an unmapped one fails.
        b.free(a, 1);
        let g = b.alloc(PAGEBLOCK_PAGES - 1, 1).unwrap();
        // A wholly free unmapped pageblock is claimed back (the host wipes
        // and maps it), a partly used one never.
        assert_eq!(g, all);
        assert_eq!(
            b.take_conversions(),
            [Conversion { pfn: all, npages: PAGEBLOCK_PAGES, from: FreeType::SHARED_UNMAPPED, to: FreeType::GUEST }]
        );
        assert!(b.alloc(2, 1).is_none(), "stole from the unmapped pool");
        b.free(g, PAGEBLOCK_PAGES - 1);
        let mut b = BuddyAllocator::new(2 * PAGEBLOCK_PAGES);
        let all = b.alloc(2 * PAGEBLOCK_PAGES, 1).unwrap();
        b.set_pageblocks(all, PAGEBLOCK_PAGES, FreeType::GUEST, FreeType::SHARED);
        b.free(all + 16, 32);
        let g = b.alloc(16, 1).unwrap();
        assert_eq!(b.pageblock_type(g), FreeType::SHARED, "stole a smaller block");
        assert!(b.alloc_typed(1, 1, FreeType::GUEST_UNMAPPED).is_none(), "unmapped types never steal");
        b.free(g, 16);
        check_lists(&b);
        assert_eq!(b.free_pages_of(FreeType::SHARED), 32, "freed pages went back to their pageblock's type");
    }
}
