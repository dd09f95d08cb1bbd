//! What a forked child's host process shows of its guest's memory, so
//! that a host process kept for the next fork (zygote::keep) maps again
//! only what differs.
//!
//! A fork's child shows mostly what the last one showed: the page cache's
//! code and read-only data of the same program at the same addresses (on
//! the rewrite path also their area of trampolines), often the same
//! frames for its copies too (the allocator hands out the pages the last
//! child freed). Unmapping all of it when a child exits and mapping it
//! again at the next fork cost a munmap and an mmap per mapping and, worse,
//! a page fault per 64 KiB window the new child touches (each fills up to
//! 16 entries of the host's page tables: ~5 us in a KVM guest), where the
//! old entries were right. A mapping the next child makes exactly alike
//! (same address, length, protection and frame) is kept as it is: an
//! mmap(MAP_SHARED | MAP_FIXED) of the same memfd range with the same
//! protection would show the same pages. Whatever nomu did to a frame
//! since (freed it, zeroed or copied into it through its own view of the
//! memfd, punched it out, which unmaps it from every mapping) shows here
//! as it would in a new mapping.
//!
//! Only mappings made by one [`HostOp::Map`] and touched by no later
//! change are recorded (a change anywhere in one drops it), so what is
//! recorded is always exactly what the host process shows there.

use crate::mm::space::HostOp;
use std::collections::BTreeMap;

/// More mappings than this are not recorded (a process that mapped
/// thousands of pieces is not worth comparing).
const MAX_RECORDED: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mapping {
    len: usize,
    prot: i32,
    frame: usize,
}

#[derive(Default, Debug)]
pub(super) struct Shown {
    /// Mappings by address, each exactly as one HostOp::Map made it.
    maps: BTreeMap<usize, Mapping>,
    /// The maps are a guest's that is gone: the next batch of changes is
    /// the next guest's first, and what it does not map alike is unmapped
    /// before it ([`Shown::take_over`]).
    left_by_last_guest: bool,
}

impl Shown {
    /// Notes a change about to be made.
    pub(super) fn record(&mut self, op: &HostOp) {
        match *op {
            HostOp::Map { addr, len, prot, frame } => {
                self.forget(addr, len);
                if self.maps.len() < MAX_RECORDED {
                    self.maps.insert(addr, Mapping { len, prot, frame });
                }
            }
            HostOp::Unmap { addr, len } | HostOp::Protect { addr, len, .. } => self.forget(addr, len),
        }
    }

    /// Drops every mapping that overlaps [addr, addr+len).
    fn forget(&mut self, addr: usize, len: usize) {
        let end = addr.saturating_add(len);
        let hit: Vec<usize> = self
            .maps
            .range(..end)
            .rev()
            .take_while(|&(&a, m)| a + m.len > addr || a >= addr)
            .filter(|&(&a, m)| a + m.len > addr)
            .map(|(&a, _)| a)
            .collect();
        for a in hit {
            self.maps.remove(&a);
        }
    }

    /// The host process's guest is gone; it keeps showing its maps until
    /// the next guest's first changes ([`Shown::take_over`]). Nothing runs
    /// guest code there meanwhile (it is parked in its handler).
    pub(super) fn leave(&mut self) {
        self.left_by_last_guest = true;
    }

    /// For the first changes of a new guest in this host process: when the
    /// last guest's maps are still shown, the maps among `ops` that are
    /// already there exactly (and that no change before them in `ops`
    /// touches) are taken out of `ops`, and their ranges returned: the
    /// caller unmaps everything else of the last guest's first. None when
    /// the maps are not a last guest's.
    pub(super) fn take_over(&mut self, ops: &mut Vec<HostOp>) -> Option<Vec<(usize, usize)>> {
        if !std::mem::take(&mut self.left_by_last_guest) {
            return None;
        }
        let old = std::mem::take(&mut self.maps);
        let mut kept = Vec::new();
        let mut touched: Vec<(usize, usize)> = Vec::new();
        ops.retain(|op| {
            let (addr, len) = match *op {
                HostOp::Map { addr, len, .. } | HostOp::Unmap { addr, len } | HostOp::Protect { addr, len, .. } => {
                    (addr, len)
                }
            };
            // Only a map found alike is checked against the changes before
            // it (at most MAX_RECORDED are found): linear in `ops`.
            let alike = match *op {
                HostOp::Map { prot, frame, .. } => old.get(&addr) == Some(&Mapping { len, prot, frame }),
                _ => false,
            };
            let keep = alike && touched.iter().all(|&(s, e)| e <= addr || s >= addr + len);
            touched.push((addr, addr + len));
            if keep {
                kept.push((addr, addr + len));
                self.maps.insert(addr, old[&addr]);
            }
            !keep
        });
        Some(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(addr: usize, len: usize, frame: usize) -> HostOp {
        HostOp::Map { addr, len, prot: libc::PROT_READ, frame }
    }

    #[test]
    fn a_change_anywhere_in_a_mapping_drops_it() {
        let mut s = Shown::default();
        for op in [map(0x1000, 0x3000, 0x9000), map(0x4000, 0x1000, 0x20000), map(0x8000, 0x1000, 0x30000)] {
            s.record(&op);
        }
        s.record(&HostOp::Protect { addr: 0x3000, len: 0x2000, prot: 0 });
        assert_eq!(s.maps.keys().copied().collect::<Vec<_>>(), [0x8000]);
        s.record(&map(0x8000, 0x1000, 0x40000));
        assert_eq!(s.maps[&0x8000].frame, 0x40000);
        s.record(&HostOp::Unmap { addr: 0x7000, len: 0x1001 });
        assert!(s.maps.is_empty());
    }

    #[test]
    fn the_next_guest_keeps_only_what_it_maps_alike() {
        let mut s = Shown::default();
        let mut none = vec![map(0x1000, 0x1000, 0x9000)];
        assert_eq!(s.take_over(&mut none), None, "no guest left anything");
        for op in [map(0x1000, 0x1000, 0x9000), map(0x2000, 0x1000, 0xa000), map(0x5000, 0x1000, 0xb000)] {
            s.record(&op);
        }
        s.leave();
        let mut ops = vec![
            map(0x1000, 0x1000, 0x9000),                 // alike: kept
            map(0x2000, 0x1000, 0xc000),                 // another frame
            HostOp::Unmap { addr: 0x5000, len: 0x1000 }, // touches the next
            map(0x5000, 0x1000, 0xb000),                 // alike, but after a change there
        ];
        let kept = s.take_over(&mut ops).unwrap();
        assert_eq!(kept, [(0x1000, 0x2000)]);
        assert_eq!(ops.len(), 3);
        assert!(!ops.contains(&map(0x1000, 0x1000, 0x9000)));
        assert_eq!(s.take_over(&mut ops), None, "only the first batch");
    }
}
