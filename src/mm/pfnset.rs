//! An ordered set of free blocks of one order: a three-level bitmap, one
//! bit per block-aligned page frame number, with a summary bit per word
//! of the level below. Insert and remove are O(1) (a bit, and a summary
//! bit when a word empties or fills); the lowest and highest members are
//! a scan of the top level (at most 128 words for 32 Mi pages) and two
//! word lookups.
//!
//! Linux keeps its free lists as linked lists, O(1) but unordered; nomu's
//! allocator hands out the lowest block first (memory packs towards the
//! bottom, and a program exec'd again gets the pages it had), which a
//! BTreeSet gave at the price of a tree walk and its cache misses per
//! insert and remove. A buddy merge is a remove per order climbed: a
//! 32-thread process's exit spent ~40 us of its ~300 in those trees.
//!
//! The bottom level is a bit per possible block of the order over the
//! whole window (4 MiB for 32 Mi pages at order 0), made of zeroed memory
//! the host gives lazily, so only the words of blocks ever freed cost
//! anything (as the allocator's per-page record).

pub struct PfnSet {
    /// The order: a member's bit is its pfn >> order.
    order: u32,
    len: usize,
    bits: Vec<u64>,
    /// Bit w: bits[w] is not zero.
    words: Vec<u64>,
    /// Bit w: words[w] is not zero.
    top: Vec<u64>,
}

fn tz(x: u64) -> usize {
    x.trailing_zeros() as usize
}

fn high(x: u64) -> usize {
    63 - x.leading_zeros() as usize
}

impl PfnSet {
    /// A set for blocks of `order` among `npages` pages.
    pub fn new(npages: usize, order: usize) -> PfnSet {
        let n0 = ((npages >> order) + 1).div_ceil(64);
        let n1 = n0.div_ceil(64);
        PfnSet { order: order as u32, len: 0, bits: vec![0; n0], words: vec![0; n1], top: vec![0; n1.div_ceil(64)] }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `pfn` (aligned to the order); false if it was there.
    pub fn insert(&mut self, pfn: usize) -> bool {
        let i = pfn >> self.order;
        let (w, bit) = (i / 64, 1u64 << (i % 64));
        if self.bits[w] & bit != 0 {
            return false;
        }
        if self.bits[w] == 0 {
            let w1 = w / 64;
            if self.words[w1] == 0 {
                self.top[w1 / 64] |= 1 << (w1 % 64);
            }
            self.words[w1] |= 1 << (w % 64);
        }
        self.bits[w] |= bit;
        self.len += 1;
        true
    }

    /// Takes `pfn` out; false if it was not there.
    pub fn remove(&mut self, pfn: usize) -> bool {
        let i = pfn >> self.order;
        let (w, bit) = (i / 64, 1u64 << (i % 64));
        if self.bits.get(w).is_none_or(|&b| b & bit == 0) {
            return false;
        }
        self.bits[w] &= !bit;
        if self.bits[w] == 0 {
            let w1 = w / 64;
            self.words[w1] &= !(1 << (w % 64));
            if self.words[w1] == 0 {
                self.top[w1 / 64] &= !(1 << (w1 % 64));
            }
        }
        self.len -= 1;
        true
    }

    pub fn first(&self) -> Option<usize> {
        self.next_bit(0).map(|i| i << self.order)
    }

    pub fn last(&self) -> Option<usize> {
        let t = self.top.iter().rposition(|&x| x != 0)?;
        let w1 = t * 64 + high(self.top[t]);
        let w = w1 * 64 + high(self.words[w1]);
        Some((w * 64 + high(self.bits[w])) << self.order)
    }

    /// The members, lowest first.
    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        let mut next = self.next_bit(0);
        std::iter::from_fn(move || {
            let i = next?;
            next = self.next_bit(i + 1);
            Some(i << self.order)
        })
    }

    /// The lowest set bit at or above bit `i`.
    fn next_bit(&self, i: usize) -> Option<usize> {
        let w = i / 64;
        let in_word = self.bits.get(w)? & (!0u64 << (i % 64));
        if in_word != 0 {
            return Some(w * 64 + tz(in_word));
        }
        // The next non-empty word after w: in w's summary word, else in
        // the top level.
        let j = w + 1;
        let w1 = j / 64;
        let mut found = self.words.get(w1).map_or(0, |&x| x & (!0u64 << (j % 64)));
        let mut w1 = w1;
        if found == 0 {
            let k = w1 + 1;
            let mut t = k / 64;
            let mut mask = !0u64 << (k % 64);
            loop {
                let x = self.top.get(t)? & mask;
                if x != 0 {
                    w1 = t * 64 + tz(x);
                    found = self.words[w1];
                    break;
                }
                t += 1;
                mask = !0;
            }
        }
        let w = w1 * 64 + tz(found);
        Some(w * 64 + tz(self.bits[w]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn agrees_with_an_ordered_set() {
        for order in [0usize, 3, 9] {
            let npages = 1 << 22;
            let mut s = PfnSet::new(npages, order);
            let mut model = BTreeSet::new();
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            for step in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Clustered and spread members, at the window's ends too.
                let i = match step % 4 {
                    0 => (x as usize) % 300,
                    1 => (npages >> order) - 1 - (x as usize) % 300,
                    _ => (x as usize) % (npages >> order),
                };
                let pfn = i << order;
                if x & 1 == 0 {
                    assert_eq!(s.insert(pfn), model.insert(pfn));
                } else {
                    assert_eq!(s.remove(pfn), model.remove(&pfn));
                }
                assert_eq!(s.len(), model.len());
                assert_eq!(s.first(), model.first().copied());
                assert_eq!(s.last(), model.last().copied());
            }
            assert!(s.iter().eq(model.iter().copied()));
            for pfn in model.clone() {
                assert!(s.remove(pfn));
            }
            assert!(s.is_empty() && s.first().is_none() && s.last().is_none());
        }
    }

    #[test]
    fn members_across_summary_words() {
        let mut s = PfnSet::new(1 << 20, 0);
        for pfn in [0, 63, 64, 4095, 4096, 4097, 262_143, 262_144, (1 << 20) - 1] {
            assert!(s.insert(pfn));
        }
        let all: Vec<usize> = s.iter().collect();
        assert_eq!(all, [0, 63, 64, 4095, 4096, 4097, 262_143, 262_144, (1 << 20) - 1]);
        assert!(!s.remove(5) && !s.remove(1 << 20));
    }
}
