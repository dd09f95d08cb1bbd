//! Mappings whose pages are not the physical pages at their address.
//!
//! On no-MMU a guest address is a physical address: a VMA's range *is* its
//! pages (the identity map, src/mm/space.rs), and that stays the common,
//! fast case. A VMA may instead show *frames*: a run of physical pages
//! elsewhere in nomu's memfd, which somebody else holds: a page cache's
//! pages of a file (held by reference count, mm::cache), a memfd_secret
//! file's pages, a forked child's private copy, the pages every MAP_SHARED
//! mapping of a file shows (mm::shared_file). Such a VMA carries a
//! [`Frames`] handle: the [`PageSource`] that holds the pages and the
//! offset into it of the VMA's first page. Splitting a VMA splits the
//! offset; dropping the last handle is the source's business (the page
//! cache keeps its pages until reclaimed, a secret file frees them).
//!
//! The host view: the VMA's range of the direct map is host-mmapped over
//! with the memfd at the frames' offsets (MAP_FIXED|MAP_SHARED, one call per
//! contiguous run: host::physmem's `map_frames`), with the VMA's protection,
//! and put back to the identity mapping when the VMA (or that part of it)
//! goes: munmap, MAP_FIXED over it, exit, exec. Guest accesses in nomu's own
//! process then reach the frames through the host MMU with no help.
//!
//! The identity pages under such a VMA are address space only: the VMA
//! still owns them (nobody else is given its range), but they are never
//! touched, taken from the allocator as reservations (`Fresh::Reserved`,
//! holes in the sparse memfd), so they cost nothing. The VMA is not
//! charged to the commit account: the source accounts for its pages.
//!
//! Everything nomu itself does through the writable alias (the loader,
//! write-back, mremap's copies, the entry paths' code patching) goes
//! through one translation, address -> physical page: host::physmem's
//! `translate`/`physical_runs` (what nomu's process shows at an address, so
//! the entry paths, which know no address space, get it right), and
//! [`AddressSpace::frame_of`](super::space::AddressSpace::frame_of) (what
//! an address space's VMA holds there, whatever process shows it).
//!
//! What each memory call does to such a VMA:
//! - mprotect: the host protection of the mapped frames changes. Making a
//!   [copy-on-write](PageSource::copy_on_write) source's VMA writable
//!   first gives it private copies (no-MMU has no write faults, so the
//!   copy is made up front, as Linux's first write would): the identity
//!   pages get the frames' bytes, the VMA is charged as a private
//!   writable mapping is, and it is an ordinary VMA from then on.
//!   Likewise making a VMA of a non-[executable](PageSource::executable)
//!   source executable.
//! - MADV_DONTNEED: nothing to drop (the pages are the source's; a
//!   private file mapping's pages are the file's, as a re-read would give).
//! - mremap: shrinking unmaps the tail; growing or moving a copy-on-write
//!   source's VMA makes private copies first; a shared source's VMA moves
//!   (the same frames at the new address) but does not grow (EINVAL).
//! - msync and write-back: a shared file mapping's VMA shows its file's
//!   shared pages (mm::shared_file), written back from there.
//! - exit and exec: the handle dropped; the direct map's view of the
//!   frames at the VMA's range is released, not put back (for a source
//!   that [lingers](PageSource::lingers)): it belongs to nobody's address
//!   space from then on, shows the source's pages (which the source keeps
//!   anyway) and goes with them or when the allocator hands the range out
//!   for anything else; the next mapping of the same frames there (a
//!   program exec'd again) takes it up with no host call. A process's
//!   exit therefore leaves nothing of its own behind (src/kernel/exit.rs,
//!   README "Exit"), and saves an mmap per run at exit and an mprotect and
//!   an mmap per run at the next exec, with their page faults.
//!
//! System V shared memory (`SharedPages`) predates this and maps a
//! segment's pages at their own address (the segment owns its range); it
//! could become a [`PageSource`] whose frames are mapped where shmat likes.

use std::sync::Arc;

/// Whoever holds the physical pages a [`Frames`] VMA shows.
pub trait PageSource: Send + Sync {
    /// The physical address of the page `offset` bytes (page-aligned) into
    /// the source, and how many bytes from there are contiguous in
    /// physical memory (at least a page).
    fn frames(&self, offset: usize) -> (usize, usize);
    /// The source's length in bytes (a VMA never reaches past it).
    fn len(&self) -> usize;
    /// Whether a VMA's writes must not reach the source's pages (a page
    /// cache's under a private mapping): making it writable copies first.
    /// False for pages the VMA shares with whoever else maps them.
    fn copy_on_write(&self) -> bool;
    /// Whether its pages may be executed where they are (and patched by
    /// the entry path, for every mapping of them): a page cache's data
    /// pages may not, and a VMA of them made executable gets a private
    /// copy first, as one made writable does.
    fn executable(&self) -> bool {
        true
    }
    /// Whether the direct map may keep showing its pages where a VMA of
    /// them went (a stale mapping, taken up again for free by the next
    /// mapping of them there). A secret file's pages may not: no address
    /// that nobody maps may show them, so the VMA's own pages are put back
    /// at once.
    fn lingers(&self) -> bool {
        true
    }
    /// Whether its pages are absent from the direct map (secret memory's,
    /// in UNMAPPED pageblocks): nomu reaches them only through the mermap
    /// (mm::uaccess), never at their own address nor at the mapping's.
    fn unmapped(&self) -> bool {
        false
    }
    /// Whether these are a MAP_SHARED mapping's pages that a fork made
    /// shared between parent and child (src/mm/space/forked.rs): the VMAs
    /// are still that mapping (written back to its file, if any), and the
    /// last handle frees the pages.
    fn shared_at_fork(&self) -> bool {
        false
    }
    /// Whether these are a copy a fork made for one forked child alone
    /// (src/mm/space/forked.rs): nothing else shows its pages.
    fn copied_for_child(&self) -> bool {
        false
    }
    /// What a write-back of its pages to their file holds meanwhile (a
    /// shared file mapping's: see mm::shared_file).
    fn lock_io(&self) -> Option<std::sync::MutexGuard<'_, ()>> {
        None
    }
    /// Has the source hold [offset, offset+len) of `file` too (a shared
    /// file mapping growing, mremap); false if it cannot.
    fn hold_file(
        &self,
        _file: &crate::fs::file::OpenFile,
        _offset: usize,
        _len: usize,
    ) -> Result<bool, crate::abi::errno::Errno> {
        Ok(false)
    }
    /// Whether these are an entry path's trampolines beside shared code
    /// (mm::cache's `TrampolineArea`): a forked child, whose code is a
    /// copy with its original bytes, is shown them as they are.
    fn trampolines(&self) -> bool {
        false
    }
}

/// A VMA's pages, when they are not the identity pages at its address.
#[derive(Clone)]
pub struct Frames {
    pub source: Arc<dyn PageSource>,
    /// Where the VMA's first page is in the source (bytes, page-aligned).
    pub offset: usize,
}

impl Frames {
    pub fn new(source: Arc<dyn PageSource>, offset: usize) -> Frames {
        Frames { source, offset }
    }

    /// The physical runs behind `len` bytes starting `delta` bytes into
    /// the VMA: (physical address, length), in order.
    pub fn runs(&self, delta: usize, len: usize) -> Vec<(usize, usize)> {
        let mut runs = Vec::new();
        let mut at = 0;
        while at < len {
            let (frame, n) = self.source.frames(self.offset + delta + at);
            let n = n.min(len - at);
            runs.push((frame, n));
            at += n;
        }
        runs
    }

    /// The physical address of the byte `delta` bytes into the VMA.
    #[allow(dead_code)] // users: AddressSpace::frame_of's (fork)
    pub fn frame_of(&self, delta: usize) -> usize {
        let page = delta & !(super::PAGE_SIZE - 1);
        self.source.frames(self.offset + page).0 + (delta - page)
    }
}

/// A run of physical pages taken from the allocator and freed when the
/// last handle goes: the simplest source (a secret file's pages, a test's).
#[allow(dead_code)] // users: the tests, memfd_secret (issue 16)
pub struct OwnedFrames {
    phys: &'static super::phys::PhysicalMemory,
    start: usize,
    len: usize,
    copy_on_write: bool,
}

#[allow(dead_code)] // users: the tests, memfd_secret (issue 16)
impl OwnedFrames {
    /// `len` bytes of fresh, zeroed pages.
    pub fn new(
        phys: &'static super::phys::PhysicalMemory,
        len: usize,
        copy_on_write: bool,
    ) -> Result<Arc<OwnedFrames>, crate::abi::errno::Errno> {
        let start = phys.alloc(len, super::PAGE_SIZE, super::phys::Fresh::Used)?;
        Ok(Arc::new(OwnedFrames { phys, start, len, copy_on_write }))
    }

    /// The physical address of the first page.
    pub fn start(&self) -> usize {
        self.start
    }
}

impl PageSource for OwnedFrames {
    fn frames(&self, offset: usize) -> (usize, usize) {
        assert!(offset < self.len);
        (self.start + offset, self.len - offset)
    }

    fn len(&self) -> usize {
        self.len
    }

    fn copy_on_write(&self) -> bool {
        self.copy_on_write
    }
}

impl Drop for OwnedFrames {
    fn drop(&mut self) {
        self.phys.free_frames(self.start, self.len);
    }
}
