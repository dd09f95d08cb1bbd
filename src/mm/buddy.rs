//! A binary buddy allocator over page frame numbers.
//!
//! Free blocks of 2^order pages are kept per order, lowest address first,
//! so allocations pack towards the bottom of physical memory. Blocks that
//! need not be a power of two are carved from one and their tail returned,
//! as Linux's `alloc_pages_exact` does; `alloc_at` claims given pages (for
//! fixed-address programs, MAP_FIXED and brk growth). The free lists are
//! the place where seed 003's freetypes will index the allocator.
//!
//! Physical memory is a window far larger than what guests use (see
//! mm::commit), so the per-page record is zero for a page that heads no
//! free block: the vector is made of zeroed memory the host gives lazily,
//! and only the pages of blocks ever freed cost anything.

use std::collections::BTreeSet;

/// The largest block: 2^30 pages (4 TiB), so one mapping can reserve far
/// more than the 4 GiB a smaller order would allow (a JVM's heap).
pub const MAX_ORDER: usize = 30;
const NOT_FREE: u8 = 0;

pub struct BuddyAllocator {
    npages: usize,
    free_lists: Vec<BTreeSet<usize>>,
    /// For each page: 1 + the order of the free block it heads, or NOT_FREE.
    head_order: Vec<u8>,
    nr_free: usize,
}

fn head(order: usize) -> u8 {
    order as u8 + 1
}

fn ceil_log2(n: usize) -> usize {
    n.next_power_of_two().trailing_zeros() as usize
}

impl BuddyAllocator {
    pub fn new(npages: usize) -> BuddyAllocator {
        let mut b = BuddyAllocator {
            npages,
            free_lists: (0..=MAX_ORDER).map(|_| BTreeSet::new()).collect(),
            head_order: vec![NOT_FREE; npages],
            nr_free: 0,
        };
        b.free(0, npages);
        b
    }

    #[cfg(test)]
    pub fn free_pages(&self) -> usize {
        self.nr_free
    }

    fn insert(&mut self, pfn: usize, order: usize) {
        self.free_lists[order].insert(pfn);
        self.head_order[pfn] = head(order);
        self.nr_free += 1 << order;
    }

    fn remove(&mut self, pfn: usize, order: usize) {
        let was_free = self.free_lists[order].remove(&pfn);
        debug_assert!(was_free);
        self.head_order[pfn] = NOT_FREE;
        self.nr_free -= 1 << order;
    }

    /// The free block containing `pfn`, as (head, order).
    pub fn free_block_of(&self, pfn: usize) -> Option<(usize, usize)> {
        (0..=MAX_ORDER).map(|o| (pfn & !((1 << o) - 1), o)).find(|&(h, o)| self.head_order[h] == head(o))
    }

    /// Allocates `count` contiguous pages aligned to `align` pages (a power
    /// of two). Returns the first page frame number.
    pub fn alloc(&mut self, count: usize, align: usize) -> Option<usize> {
        if count == 0 || !align.is_power_of_two() {
            return None;
        }
        let order = ceil_log2(count).max(ceil_log2(align));
        if order > MAX_ORDER {
            return None;
        }
        let found = (order..=MAX_ORDER).find(|&o| !self.free_lists[o].is_empty())?;
        let pfn = *self.free_lists[found].first().unwrap();
        self.remove(pfn, found);
        // Split: give back the upper half at each level down to `order`.
        for o in (order..found).rev() {
            self.insert(pfn + (1 << o), o);
        }
        // Trim the tail the caller did not ask for.
        self.free(pfn + count, (1 << order) - count);
        Some(pfn)
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

    /// Claims the given pages if all of them are free.
    pub fn alloc_at(&mut self, pfn: usize, count: usize) -> bool {
        if !self.range_is_free(pfn, count) {
            return false;
        }
        let end = pfn + count;
        let mut p = pfn;
        while p < end {
            let (head, o) = self.free_block_of(p).expect("checked free");
            let block_end = head + (1 << o);
            self.remove(head, o);
            // Return the parts of the block outside the claimed range.
            self.free(head, p - head);
            if block_end > end {
                self.free(end, block_end - end);
            }
            p = block_end.min(end);
        }
        true
    }

    /// Frees [pfn, pfn+count), merging with free buddies.
    pub fn free(&mut self, mut pfn: usize, count: usize) {
        let end = pfn + count;
        assert!(end <= self.npages, "freeing pages past the end");
        while pfn < end {
            // The largest aligned block starting at pfn that fits.
            let mut order = (pfn.trailing_zeros() as usize).min(MAX_ORDER);
            while pfn + (1 << order) > end {
                order -= 1;
            }
            self.free_block(pfn, order);
            pfn += 1 << order;
        }
    }

    fn free_block(&mut self, mut pfn: usize, mut order: usize) {
        debug_assert!(self.free_block_of(pfn).is_none(), "double free of page {pfn}");
        while order < MAX_ORDER {
            let buddy = pfn ^ (1 << order);
            if buddy + (1 << order) > self.npages || self.head_order[buddy] != head(order) {
                break;
            }
            self.remove(buddy, order);
            pfn = pfn.min(buddy);
            order += 1;
        }
        self.insert(pfn, order);
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
}
