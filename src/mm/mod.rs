//! Memory: the physical page allocator (one home for physical memory), the
//! commit account that bounds what guests fill of it (`--mem`), each
//! process's address space of VMAs, and checked access to guest memory.

pub mod buddy;
pub mod cache;
pub mod commit;
pub mod mapping;
pub mod pfnset;
pub mod phys;
pub mod shared_file;
pub mod space;
pub mod uaccess;

pub use crate::host::physmem::PAGE_SIZE;

pub fn page_down(addr: usize) -> usize {
    addr & !(PAGE_SIZE - 1)
}

/// Rounds up to a page boundary; None on overflow.
pub fn page_up(addr: usize) -> Option<usize> {
    addr.checked_add(PAGE_SIZE - 1).map(page_down)
}

pub fn is_page_aligned(addr: usize) -> bool {
    addr.is_multiple_of(PAGE_SIZE)
}
