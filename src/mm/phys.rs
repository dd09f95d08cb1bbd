//! Physical memory: nomu's memfd-backed direct map and the buddy allocator
//! that hands out its pages. Pages leave the allocator zeroed and writable,
//! and `free` makes them so again before they return.

use super::buddy::BuddyAllocator;
use super::PAGE_SIZE;
use crate::host::physmem::{PhysMem, Prot};
use crate::kernel::errno::Errno;
use std::sync::Mutex;

/// The protection pages have while free (and when freshly allocated).
pub const RW: Prot = libc::PROT_READ | libc::PROT_WRITE;

pub struct PhysicalMemory {
    mem: &'static PhysMem,
    buddy: Mutex<BuddyAllocator>,
}

impl PhysicalMemory {
    pub fn new(mem: &'static PhysMem) -> PhysicalMemory {
        PhysicalMemory { mem, buddy: Mutex::new(BuddyAllocator::new(mem.size() / PAGE_SIZE)) }
    }

    fn pfn(&self, addr: usize) -> usize {
        (addr - self.mem.base()) / PAGE_SIZE
    }

    fn addr(&self, pfn: usize) -> usize {
        self.mem.base() + pfn * PAGE_SIZE
    }

    /// Allocates `len` bytes (a page multiple) aligned to `align` bytes.
    pub fn alloc(&self, len: usize, align: usize) -> Result<usize, Errno> {
        let align = align.max(PAGE_SIZE).next_power_of_two() / PAGE_SIZE;
        let pfn = self.buddy.lock().unwrap().alloc(len / PAGE_SIZE, align).ok_or(Errno::ENOMEM)?;
        Ok(self.addr(pfn))
    }

    /// Claims the pages of [addr, addr+len) if they all are free.
    pub fn alloc_at(&self, addr: usize, len: usize) -> Result<(), Errno> {
        if !self.mem.contains(addr, len) {
            return Err(Errno::ENOMEM);
        }
        let pfn = self.pfn(addr);
        if self.buddy.lock().unwrap().alloc_at(pfn, len / PAGE_SIZE) {
            Ok(())
        } else {
            Err(Errno::ENOMEM)
        }
    }

    pub fn is_free(&self, addr: usize, len: usize) -> bool {
        self.mem.contains(addr, len) && self.buddy.lock().unwrap().range_is_free(self.pfn(addr), len / PAGE_SIZE)
    }

    /// Returns pages to the allocator, zeroed and writable again.
    /// `prot` is their current protection (read-write needs no change: every
    /// host mprotect of shared memory costs a TLB shootdown on all CPUs).
    pub fn free(&self, addr: usize, len: usize, prot: Prot) {
        if len == 0 {
            return;
        }
        self.scrub(addr, len, prot);
        self.buddy.lock().unwrap().free(self.pfn(addr), len / PAGE_SIZE);
    }

    /// Makes owned pages zeroed and writable, as if newly allocated.
    pub fn scrub(&self, addr: usize, len: usize, prot: Prot) {
        if prot != RW {
            // Restoring read-write on our own direct map cannot fail.
            let _ = self.mem.protect(addr, len, RW);
        }
        self.mem.discard(addr, len);
    }

    /// Changes the protection of pages whose protection is now `from`.
    pub fn reprotect(&self, addr: usize, len: usize, from: Prot, to: Prot) -> Result<(), Errno> {
        if from == to || len == 0 {
            return Ok(());
        }
        self.mem.protect(addr, len, to)
    }

    pub fn protect(&self, addr: usize, len: usize, prot: Prot) -> Result<(), Errno> {
        self.mem.protect(addr, len, prot)
    }

    pub fn copy_within(&self, dst: usize, src: usize, len: usize) {
        self.mem.copy_within(dst, src, len)
    }

    pub fn total_bytes(&self) -> usize {
        self.mem.size()
    }

    pub fn free_bytes(&self) -> usize {
        self.buddy.lock().unwrap().free_pages() * PAGE_SIZE
    }

    pub fn contains(&self, addr: usize, len: usize) -> bool {
        self.mem.contains(addr, len)
    }
}
