//! A process's address space: the VMAs it owns in the shared direct map.
//!
//! On no-MMU every mapping is a run of physical pages, so a VMA's range *is*
//! the pages it owns: mapping allocates pages, unmapping frees them. (A VMA
//! may instead show frames held elsewhere, a page cache's or a secret
//! file's: see mm::mapping.) The
//! host MMU still enforces each VMA's protection (mprotect is real), which
//! no-MMU Linux cannot do.
//!
//! What a VMA may fill is charged to the commit account (`--mem`) as
//! mm::commit describes: a VMA is charged (`Vma::charged`, Linux's
//! VM_ACCOUNT) from the moment it may hold data until it goes; an
//! anonymous PROT_NONE VMA is a reservation, charged nothing, its pages
//! holes, until mprotect makes it accessible.

use super::mapping::Frames;
use super::phys::{Fresh, PhysicalMemory, RW};
use super::{is_page_aligned, page_up, PAGE_SIZE};
use crate::abi::errno::Errno;
use crate::fs::file::OpenFile;
use crate::host::physmem::GuestRange;
use std::collections::BTreeMap;
use std::sync::Arc;

mod cow;
mod forked;
pub use cow::Access;
pub use forked::{HostFrees, HostOp, Unmapped};

pub const PROT_READ: i32 = libc::PROT_READ;
pub const PROT_WRITE: i32 = libc::PROT_WRITE;
pub const PROT_EXEC: i32 = libc::PROT_EXEC;

/// Room kept after a program image for brk to grow into without moving.
pub const BRK_RESERVE: usize = 1 << 20;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum VmaKind {
    Anon,
    File,
    Image,
    Stack,
    Heap,
    /// A System V shared memory attachment: pages the segment owns.
    Shm,
}

/// Pages a VMA maps but does not own: a System V shared memory segment's
/// (src/kernel/ipc/shm.rs). The address space never frees, scrubs or
/// reuses them; each VMA holds one handle, and dropping it detaches (a
/// split VMA holds two, as Linux counts each VMA of an attachment).
pub trait SharedPages: Send + Sync {
    /// A handle for another VMA of the same attachment.
    fn duplicate(&self) -> Box<dyn SharedPages>;
    /// Which segment (equal for every handle of one segment).
    fn segment(&self) -> usize;
    /// The segment's pages: [start, start+len).
    fn pages(&self) -> (usize, usize);
    /// What /proc/PID/maps shows for it: an inode number and a name.
    fn shown(&self) -> (u64, Vec<u8>);
}

impl Clone for Box<dyn SharedPages> {
    fn clone(&self) -> Self {
        self.duplicate()
    }
}

/// A file a VMA was read from, kept so MADV_DONTNEED can re-read it.
#[derive(Clone)]
pub struct Backing {
    pub file: Arc<OpenFile>,
    pub offset: u64,
}

/// Where an executable image segment's bytes came from: the file, the
/// file offset of the VMA's first byte, and the file offsets the segment
/// really holds (a page it shares with another segment holds that one's
/// bytes too). Kept only while the segment has never been writable or
/// discarded, so its bytes are the file's.
#[derive(Clone, Debug)]
pub struct ImageOrigin {
    pub file: crate::fs::file::FileIdentity,
    pub offset: u64,
    pub segment: std::ops::Range<u64>,
}

impl ImageOrigin {
    /// The file offset of the byte `delta` bytes into the VMA, if it is one
    /// of the segment's own.
    pub fn file_offset(&self, delta: u64) -> Option<u64> {
        Some(self.offset + delta).filter(|o| self.segment.contains(o))
    }
}

#[derive(Clone)]
pub struct Vma {
    pub end: usize,
    pub prot: i32,
    pub kind: VmaKind,
    pub shared: bool,
    pub backing: Option<Backing>,
    /// Ever writable: a shared file mapping then needs writing back.
    pub was_writable: bool,
    /// Ever executable: the entry path may have marked syscall sites in its
    /// pages (what a teardown must clear, and only here).
    pub was_executable: bool,
    pub origin: Option<ImageOrigin>,
    /// The program file a piece of an executable image was read from, and
    /// the file offset of the piece's first byte (/proc/PID/maps names it,
    /// as Linux names the file it mapped).
    pub image_file: Option<Backing>,
    /// Charged to the commit account (set by the address space: a new
    /// VMA is charged when it may hold data, see [`Vma::holds_data`]).
    pub charged: bool,
    /// The shared memory segment whose pages these are (VmaKind::Shm).
    pub shm: Option<Box<dyn SharedPages>>,
    /// The pages the VMA shows when they are not the physical pages at its
    /// address (mm::mapping). In a forked child's address space (its own
    /// host process, see forked.rs) every VMA has them.
    pub frames: Option<Frames>,
    /// VM_LOCKED: mlock'd, or a secret mapping (locked from its mmap);
    /// counted in the address space's locked memory (VmLck). no-MMU pages
    /// are always resident, so it is accounting only.
    pub locked: bool,
    /// Copied on access between a forked parent and child (cow.rs): in the
    /// parent its pages may be write-protected for a child's sake, in the
    /// child its frames may still be holes shown with no access.
    pub cow: bool,
}

impl Vma {
    /// A data mapping, as Linux's is_data_mapping counts it against
    /// RLIMIT_DATA: private, writable, not a stack.
    pub fn is_data(&self) -> bool {
        self.prot & PROT_WRITE != 0 && !self.shared && self.kind != VmaKind::Stack
    }

    pub fn new(end: usize, prot: i32, kind: VmaKind) -> Vma {
        Vma {
            end,
            prot,
            kind,
            shared: false,
            backing: None,
            was_writable: prot & PROT_WRITE != 0,
            was_executable: prot & PROT_EXEC != 0,
            origin: None,
            image_file: None,
            charged: false,
            shm: None,
            frames: None,
            locked: false,
            cow: false,
        }
    }

    /// The physical page holding the byte at `addr` of this VMA (which
    /// starts at `start`).
    pub fn frame_of(&self, start: usize, addr: usize) -> usize {
        self.frames.as_ref().map_or(addr, |f| f.frame_of(addr - start))
    }

    /// Whether the VMA's pages may hold data: it is accessible, or its
    /// pages were filled (a file's copy, a program image, a stack). The
    /// one kind that does not is a reservation: anonymous and PROT_NONE.
    pub fn holds_data(&self) -> bool {
        self.prot != 0 || self.kind != VmaKind::Anon || self.backing.is_some()
    }

    /// Whether mapping this VMA charges the commit account.
    fn needs_charge(&self) -> bool {
        self.charged || (self.holds_data() && self.frames.is_none())
    }

    /// The file a mapping shows, and the file offset of its first byte.
    pub fn shown_file(&self) -> Option<&Backing> {
        self.backing.as_ref().or(self.image_file.as_ref())
    }
}

/// Where a new mapping goes.
#[derive(Clone, Copy)]
pub enum Placement {
    Anywhere {
        align: usize,
    },
    /// MAP_FIXED: replaces this process's own mappings in the range, or
    /// claims free physical pages.
    Fixed(usize),
    /// Pages the caller already took from physical memory (the loader).
    Allocated(usize),
}

/// An address space that threads and CLONE_VM processes share, locked at
/// its place in the lock order (src/sync.rs).
pub type SharedSpace = Arc<crate::sync::OrderedMutex<AddressSpace, { crate::sync::MM }>>;

/// A new, empty shared address space.
pub fn new_shared(phys: &'static PhysicalMemory) -> SharedSpace {
    Arc::new(crate::sync::OrderedMutex::new(AddressSpace::new(phys)))
}

pub struct AddressSpace {
    phys: &'static PhysicalMemory,
    vmas: BTreeMap<usize, Vma>,
    brk_start: usize,
    brk: usize,
    /// End of the pages owned for the heap (mapped or reserved).
    brk_owned_end: usize,
    /// The reservation's pages [start, end) above the break that may still
    /// hold an earlier owner's bytes: the loader leaves them (an exec's
    /// 1 MiB room cost ~4 host seeks to zero, and most programs never grow
    /// into most of it), and the break zeroes them as it grows over them.
    brk_stale: (usize, usize),
    /// Guest ranges a copy or a host call is using right now (see
    /// [`crate::mm::uaccess::Pinned`]), one entry per user.
    pins: Vec<(usize, usize)>,
    /// Pages unmapped while a pin overlapped them: still this address
    /// space's (no other process can be given them mid-copy), freed when
    /// the last pin over them goes.
    deferred: Vec<(usize, usize)>,
    /// Bytes this address space's VMAs have charged to the commit account.
    committed: usize,
    /// A forked child's address space, run in a host process of its own
    /// (see forked.rs): every VMA's pages are frames elsewhere, and each
    /// change is also queued for that host process's own memory map.
    own_host: bool,
    host_ops: Vec<HostOp>,
    /// Pages unmapped from such a space, freed only once its host process
    /// has unmapped them too (another thread of it may run guest code
    /// meanwhile): (start, length, charged).
    host_frees: Vec<(usize, usize, bool)>,
    /// Handles on pages others hold (a shared file's, a fork's shared
    /// copy) that such a space unmapped, kept until its host process has
    /// unmapped them too: the last one frees the pages.
    host_drops: Vec<Frames>,
    /// A fixed-address image was loaded elsewhere (move_image): the space
    /// becomes its own host process's when the loader is done.
    moved_image: bool,
    /// Free pages taken while loading so that nothing else of this space
    /// lands where the moved image will show (see hold_range).
    held: Vec<usize>,
    /// The processes using it (a CLONE_VM child shares its parent's): the
    /// last to leave tears it down ([`leave`](Self::leave)), whoever else
    /// still holds a reference (a /proc reader).
    users: usize,
    /// mlockall(MCL_FUTURE): new mappings are locked (Linux's def_flags
    /// VM_LOCKED); not inherited by a fork, gone at exec (a new space).
    pub lock_future: bool,
    /// The links to forked children still copying pages of this space on
    /// access (cow.rs).
    cow_children: Vec<Arc<cow::CowLink>>,
    /// In a forked child: the link to the parent it copies on access.
    cow_parent: Option<Arc<cow::CowLink>>,
    /// Some VMA may still be write-protected for a child's sake (`Vma::cow`).
    write_protected: bool,
}

fn host_prot(prot: i32) -> i32 {
    prot & (PROT_READ | PROT_WRITE | PROT_EXEC)
}

impl AddressSpace {
    pub fn new(phys: &'static PhysicalMemory) -> AddressSpace {
        AddressSpace {
            phys,
            vmas: BTreeMap::new(),
            brk_start: 0,
            brk: 0,
            brk_owned_end: 0,
            brk_stale: (0, 0),
            pins: Vec::new(),
            deferred: Vec::new(),
            committed: 0,
            own_host: false,
            host_ops: Vec::new(),
            host_frees: Vec::new(),
            host_drops: Vec::new(),
            moved_image: false,
            held: Vec::new(),
            users: 0,
            lock_future: false,
            cow_children: Vec::new(),
            cow_parent: None,
            write_protected: false,
        }
    }

    /// Locked bytes (mm->locked_vm, /proc/PID/status's VmLck).
    pub fn locked_bytes(&self) -> usize {
        self.vmas.iter().filter(|(_, v)| v.locked).map(|(s, v)| v.end - s).sum()
    }

    /// The bytes of [addr, end) in VMAs that `pick` picks.
    fn bytes_in(&self, addr: usize, end: usize, pick: impl Fn(&Vma) -> bool) -> usize {
        let first = self.find(addr).map_or(addr, |(s, _)| s);
        self.vmas
            .range(first..end)
            .filter(|(_, v)| pick(v))
            .map(|(&s, v)| v.end.min(end).saturating_sub(s.max(addr)))
            .sum()
    }

    /// Locked bytes in [addr, end) (Linux's count_mm_mlocked_page_nr).
    pub fn locked_in(&self, addr: usize, end: usize) -> usize {
        self.bytes_in(addr, end, |v| v.locked)
    }

    /// Mapped bytes (mm->total_vm).
    pub fn total_bytes(&self) -> usize {
        self.vmas.iter().map(|(s, v)| v.end - s).sum()
    }

    /// Bytes of data mappings (mm->data_vm, see [`Vma::is_data`]).
    pub fn data_bytes(&self) -> usize {
        self.vmas.iter().filter(|(_, v)| v.is_data()).map(|(s, v)| v.end - s).sum()
    }

    /// Mapped bytes in [addr, end) (Linux's count_vma_pages_range).
    pub fn mapped_in(&self, addr: usize, end: usize) -> usize {
        self.bytes_in(addr, end, |_| true)
    }

    /// Bytes of [addr, end) that are mapped private, not writable, and not
    /// a stack: data mappings once made writable.
    pub fn becoming_data(&self, addr: usize, end: usize) -> usize {
        self.bytes_in(addr, end, |v| !v.shared && v.prot & PROT_WRITE == 0 && v.kind != VmaKind::Stack)
    }

    /// The program break's start and where it is now.
    pub fn brk_span(&self) -> (usize, usize) {
        (self.brk_start, self.brk)
    }

    /// mlock (`on`) or munlock of [addr, end) (page-aligned): ENOMEM
    /// unless it is all mapped. A secret mapping stays locked (Linux's
    /// mlock_fixup leaves secretmem VMAs alone).
    pub fn set_locked(&mut self, addr: usize, end: usize, on: bool) -> Result<(), Errno> {
        let mut p = addr;
        while p < end {
            p = self.find(p).ok_or(Errno::ENOMEM)?.1.end;
        }
        self.set_locked_where(addr, end, on);
        Ok(())
    }

    /// Locks or unlocks what is mapped of [addr, end).
    pub fn set_locked_where(&mut self, addr: usize, end: usize, on: bool) {
        self.split_at(addr);
        self.split_at(end);
        for (_, v) in self.vmas.range_mut(addr..end) {
            if !v.frames.as_ref().is_some_and(|f| f.source.unmapped()) {
                v.locked = on;
            }
        }
    }

    /// A process starts using this address space.
    pub fn enter(&mut self) {
        self.users += 1;
    }

    /// A process stops using this address space; the last one tears it
    /// down, here, in its own context ([`tear_down`](Self::tear_down)).
    pub fn leave(&mut self) {
        self.users = self.users.saturating_sub(1);
        if self.users == 0 {
            self.tear_down();
        }
    }

    /// Charges `add` bytes to the commit account, counting `freeing`
    /// charged bytes the caller is about to give back as gone.
    fn charge(&mut self, add: usize, freeing: usize) -> Result<(), Errno> {
        self.phys.commit().charge(add, freeing)?;
        self.committed += add;
        Ok(())
    }

    fn uncharge(&mut self, n: usize) {
        self.phys.commit().uncharge(n);
        self.committed -= n;
    }

    /// Bytes the VMAs in [start, end) have charged.
    fn charged_in(&self, start: usize, end: usize) -> usize {
        self.vmas
            .range(..end)
            .filter(|(_, v)| v.charged && v.end > start)
            .map(|(&s, v)| v.end.min(end) - s.max(start))
            .sum()
    }

    pub fn vmas(&self) -> impl Iterator<Item = (usize, &Vma)> {
        self.vmas.iter().map(|(&s, v)| (s, v))
    }

    /// The VMA containing `addr`.
    pub fn find(&self, addr: usize) -> Option<(usize, &Vma)> {
        self.vmas.range(..=addr).next_back().filter(|(_, v)| addr < v.end).map(|(&s, v)| (s, v))
    }

    /// Notes that the executable, never-writable VMAs in [start, end) hold
    /// the bytes `origin` describes (its offset is that of `start`).
    pub fn set_origin(&mut self, start: usize, end: usize, origin: ImageOrigin) {
        for (&s, v) in self.vmas.range_mut(start..end) {
            if v.prot & PROT_EXEC != 0 && v.prot & PROT_WRITE == 0 && v.end <= end {
                v.origin = Some(ImageOrigin { offset: origin.offset + (s - start) as u64, ..origin.clone() });
            }
        }
    }

    /// Notes that the image pieces in [start, end) were read from `file`
    /// (its offset is that of `start`), splitting the VMAs at the edges.
    pub fn set_image_file(&mut self, start: usize, end: usize, file: Backing) {
        self.split_at(start);
        self.split_at(end);
        for (&s, v) in self.vmas.range_mut(start..end) {
            if v.kind == VmaKind::Image {
                v.image_file = Some(Backing { file: file.file.clone(), offset: file.offset + (s - start) as u64 });
            }
        }
    }

    /// Keeps the pages of [addr, addr+len) owned by this address space until
    /// [`unpin`](Self::unpin): a munmap meanwhile removes the mapping (later
    /// accesses fail) but gives the pages to no one else.
    pub fn pin(&mut self, addr: usize, len: usize) {
        self.pins.push((addr, addr + len));
    }

    /// Ends one [`pin`](Self::pin) of exactly that range; frees the
    /// deferred pages no pin overlaps any more.
    pub fn unpin(&mut self, addr: usize, len: usize) {
        if let Some(i) = self.pins.iter().position(|&r| r == (addr, addr + len)) {
            self.pins.swap_remove(i);
        }
        if self.deferred.is_empty() {
            return;
        }
        let (free, keep): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.deferred).into_iter().partition(|&(s, e)| !self.pinned(s, e));
        self.deferred = keep;
        for (s, e) in free {
            self.phys.free(s, e - s);
        }
    }

    fn pinned(&self, s: usize, e: usize) -> bool {
        self.pins.iter().any(|&(ps, pe)| ps < e && s < pe)
    }

    /// Frees the pages of [s, e) to the allocator, but defers those a pin
    /// covers.
    fn free_pages(&mut self, s: usize, e: usize) {
        let mut pinned: Vec<(usize, usize)> = self
            .pins
            .iter()
            .filter(|&&(ps, pe)| ps < e && s < pe)
            .map(|&(ps, pe)| ((ps & !(PAGE_SIZE - 1)).max(s), page_up(pe).unwrap_or(e).min(e)))
            .collect();
        pinned.sort_unstable();
        let mut at = s;
        for (ps, pe) in pinned {
            if ps > at {
                self.phys.free(at, ps - at);
            }
            if pe > at {
                self.deferred.push((ps.max(at), pe));
                at = pe;
            }
        }
        if e > at {
            self.phys.free(at, e - at);
        }
    }

    /// Takes the page at `p` back from the deferred frees, if it is there.
    fn reclaim_deferred(&mut self, p: usize) -> bool {
        let Some(i) = self.deferred.iter().position(|&(s, e)| s <= p && p < e) else { return false };
        let (s, e) = self.deferred.swap_remove(i);
        for part in [(s, p), (p + PAGE_SIZE, e)] {
            if part.0 < part.1 {
                self.deferred.push(part);
            }
        }
        true
    }

    /// How many bytes from `addr` (up to `len`) lie in mappings that allow
    /// the access: the part of a buffer the guest may really use.
    pub fn accessible_prefix(&self, addr: usize, len: usize, write: bool) -> usize {
        let need = if write { PROT_WRITE } else { PROT_READ };
        let end = addr.saturating_add(len);
        let mut at = addr;
        while at < end {
            match self.find(at) {
                Some((_, v)) if v.prot & need != 0 => at = v.end,
                _ => break,
            }
        }
        at.min(end).saturating_sub(addr)
    }

    /// Splits the VMA containing `addr` so a VMA starts exactly at `addr`.
    fn split_at(&mut self, addr: usize) {
        let Some((start, vma)) = self.find(addr) else { return };
        if start == addr {
            return;
        }
        let mut tail = vma.clone();
        if let Some(b) = tail.backing.as_mut() {
            b.offset += (addr - start) as u64;
        }
        if let Some(o) = tail.origin.as_mut() {
            o.offset += (addr - start) as u64;
        }
        if let Some(b) = tail.image_file.as_mut() {
            b.offset += (addr - start) as u64;
        }
        if let Some(f) = tail.frames.as_mut() {
            f.offset += addr - start;
        }
        self.vmas.get_mut(&start).unwrap().end = addr;
        self.vmas.insert(addr, tail);
    }

    /// Removes the VMAs covering [start, end) (splitting at the edges),
    /// gives back their charges and returns the ranges they covered, each
    /// with whether its pages may hold data (an uncharged one's are holes,
    /// but for a frames VMA's, which a host call may have read through
    /// since the direct map was put back). Shared file mappings are
    /// written back first, so nothing the guest wrote through them is lost;
    /// frames VMAs get the direct map's own pages back.
    fn take_range(&mut self, start: usize, end: usize) -> Vec<(usize, usize, bool)> {
        self.settle_copies(start, end);
        self.split_at(start);
        self.split_at(end);
        let keys: Vec<usize> = self.vmas.range(start..end).map(|(&s, _)| s).collect();
        keys.into_iter()
            .filter_map(|s| {
                let v = self.vmas.remove(&s).unwrap();
                Self::write_back_vma(s, &v);
                if v.charged {
                    self.uncharge(v.end - s);
                }
                if let Some(f) = &v.frames {
                    self.phys.frames_gone(s, v.end - s, f.source.lingers());
                }
                // A segment's pages stay the segment's: dropping the VMA
                // (its handle) detaches it.
                v.shm.is_none().then_some((s, v.end, v.charged || v.frames.is_some()))
            })
            .collect()
    }

    /// Copies a shared, writable file mapping's pages back to its file
    /// (never past the file's current end, which a mapping cannot extend).
    fn write_back_vma(start: usize, v: &Vma) {
        if v.frames.as_ref().is_none_or(|f| f.source.shared_at_fork()) {
            Self::write_back_pages(start, v);
        }
    }

    /// [`write_back_vma`](Self::write_back_vma) from whatever pages the VMA
    /// shows (a forked child's shared file mapping: its frames).
    fn write_back_pages(start: usize, v: &Vma) {
        let Some(b) = v.backing.as_ref().filter(|_| v.shared && v.was_writable) else { return };
        let _io = v.frames.as_ref().and_then(|f| f.source.lock_io());
        let Ok(size) = b.file.size() else { return };
        let len = (v.end - start).min(size.saturating_sub(b.offset) as usize);
        // Through the alias: pages the guest made PROT_NONE since it
        // wrote them are written back too, as Linux does.
        let runs = match &v.frames {
            Some(f) => f.runs(0, len),
            None => vec![(start, len)],
        };
        let mut done = 0;
        for (at, n) in runs {
            let _ = b.file.write_at_from(GuestRange::new(at, n).unwrap().through_alias(), b.offset + done as u64);
            done += n;
        }
    }

    /// msync: writes back shared file mappings in the range.
    pub fn write_back(&mut self, addr: usize, len: usize) -> Result<(), Errno> {
        let end = addr.saturating_add(len);
        for (&s, v) in self.vmas.range(..end) {
            if v.end > addr && self.own_host {
                Self::write_back_pages(s, v);
            } else if v.end > addr {
                Self::write_back_vma(s, v);
            }
        }
        // Linux's msync goes on past a hole and reports it at the end.
        if self.has_hole(addr, len) {
            return Err(Errno::ENOMEM);
        }
        Ok(())
    }

    /// Whether some page of [addr, addr+len) is in no mapping (msync and
    /// madvise then fail with ENOMEM, after doing the mapped parts).
    pub fn has_hole(&self, addr: usize, len: usize) -> bool {
        let end = addr.saturating_add(len);
        let mut p = addr;
        while p < end {
            match self.find(p) {
                Some((_, v)) => p = v.end,
                None => return true,
            }
        }
        false
    }

    fn owned_by_heap(&self, addr: usize) -> bool {
        addr >= self.brk_start && addr < self.brk_owned_end
    }

    /// Maps `len` bytes (page multiple, > 0). `fill` writes the initial
    /// contents while the pages are still writable; then `vma.prot` applies
    /// (pages the caller allocated itself it protects itself). A VMA that
    /// may hold data is charged (ENOMEM over `--mem`; a MAP_FIXED mapping
    /// counts the charged mappings it replaces as gone, as Linux does); a
    /// reservation's pages are holes.
    pub fn map(
        &mut self,
        place: Placement,
        len: usize,
        vma: Vma,
        fill: impl FnOnce(GuestRange) -> Result<(), Errno>,
    ) -> Result<usize, Errno> {
        let freeing = match place {
            Placement::Fixed(addr) => self.charged_in(addr, addr.saturating_add(len)),
            _ => 0,
        };
        self.map_charging(place, len, vma, fill, freeing)
    }

    /// [`map`](Self::map), counting `freeing` charged bytes the caller
    /// gives back right after as gone.
    fn map_charging(
        &mut self,
        place: Placement,
        len: usize,
        mut vma: Vma,
        fill: impl FnOnce(GuestRange) -> Result<(), Errno>,
        freeing: usize,
    ) -> Result<usize, Errno> {
        debug_assert!(len > 0 && is_page_aligned(len));
        if self.own_host {
            return self.forked_map(place, len, vma, fill, freeing);
        }
        vma.charged = vma.needs_charge();
        if vma.charged {
            if let Err(e) = self.charge(len, freeing) {
                if let Placement::Allocated(addr) = place {
                    self.phys.free(addr, len);
                }
                return Err(e);
            }
        }
        // A reservation (PROT_NONE, nothing to fill) gets its protection
        // as it is allocated; other pages are filled first, read-write.
        let fresh = if vma.charged { Fresh::Used } else { Fresh::Reserved };
        let prot = if vma.holds_data() { RW } else { host_prot(vma.prot) };
        let placed = match place {
            Placement::Anywhere { align } => self.phys.alloc_with_prot(len, align, fresh, prot).or_else(|e| {
                // Memory is full: the heap's reservation above the break is
                // address space Linux would map too (brk then cannot grow
                // over it). libc-test's malloc-brk-fail fills memory with
                // mappings and wants malloc, which tries brk first, to fail.
                if self.give_back_heap_reserve() {
                    self.phys.alloc_with_prot(len, align, fresh, prot)
                } else {
                    Err(e)
                }
            }),
            Placement::Fixed(addr) => self.claim_fixed(addr, len).map(|_| addr),
            Placement::Allocated(addr) => Ok(addr),
        };
        let start = match placed {
            Ok(start) => start,
            Err(e) => {
                if vma.charged {
                    self.uncharge(len);
                }
                return Err(e);
            }
        };
        let range = GuestRange::new(start, len).expect("allocated pages lie in physical memory");
        let mut done = fill(range);
        if done.is_ok() && !matches!(place, Placement::Allocated(_)) {
            done = self.phys.set_prot(start, len, host_prot(vma.prot));
        }
        if let Err(e) = done {
            self.phys.free(start, len);
            if vma.charged {
                self.uncharge(len);
            }
            return Err(e);
        }
        self.vmas.insert(start, Vma { end: start + len, ..vma });
        Ok(start)
    }

    /// Maps `len` bytes (page multiple, > 0) showing `vma.frames` (see
    /// mm::mapping): its own pages are taken as a reservation's (holes),
    /// the direct map shows the frames with `vma.prot`. Not charged (the
    /// source accounts for its pages). `Placement::Allocated` pages must
    /// be holes the caller took for it.
    pub fn map_frames(&mut self, place: Placement, len: usize, mut vma: Vma) -> Result<usize, Errno> {
        debug_assert!(len > 0 && is_page_aligned(len));
        let frames = vma.frames.clone().expect("a frames VMA");
        if frames.offset.checked_add(len).is_none_or(|e| e > frames.source.len()) {
            return Err(Errno::EINVAL);
        }
        if self.own_host {
            return self.forked_map_frames(place, len, vma);
        }
        let start = match place {
            Placement::Anywhere { align } => self.phys.alloc(len, align, Fresh::Reserved)?,
            Placement::Fixed(addr) => self.claim_fixed(addr, len).map(|_| addr)?,
            Placement::Allocated(addr) => addr,
        };
        if let Err(e) = self.show_frames(start, &frames, len, vma.prot) {
            self.phys.free(start, len);
            return Err(e);
        }
        vma.charged = false;
        self.vmas.insert(start, Vma { end: start + len, ..vma });
        Ok(start)
    }

    /// Has the direct map at [start, start+len) show `frames`' pages, with
    /// `prot` (undone if a run fails).
    fn show_frames(&self, start: usize, frames: &Frames, len: usize, prot: i32) -> Result<(), Errno> {
        let mut at = 0;
        for (frame, n) in frames.runs(0, len) {
            if let Err(e) = self.phys.map_frames(start + at, frame, n, host_prot(prot)) {
                self.phys.unmap_frames(start, at);
                return Err(e);
            }
            at += n;
        }
        Ok(())
    }

    /// Makes the VMAs of [addr, addr+len) (ordinary ones, this address
    /// space's own, wholly covering it, and not yet accessed: the loader's,
    /// for pages a page cache holds) show `frames` instead of their own
    /// pages.
    /// Their charges go: the source accounts for its pages.
    pub fn replace_with_frames(&mut self, addr: usize, len: usize, frames: Frames) -> Result<(), Errno> {
        let end = addr.checked_add(len).ok_or(Errno::EINVAL)?;
        if frames.offset.checked_add(len).is_none_or(|e| e > frames.source.len()) {
            return Err(Errno::EINVAL);
        }
        let mut p = addr;
        while p < end {
            match self.find(p) {
                Some((_, v)) if v.shm.is_none() && v.frames.is_none() => p = v.end,
                _ => return Err(Errno::EINVAL),
            }
        }
        self.split_at(addr);
        self.split_at(end);
        let keys: Vec<usize> = self.vmas.range(addr..end).map(|(&s, _)| s).collect();
        for s in keys {
            let v = self.vmas.get(&s).unwrap();
            let (e, prot, charged) = (v.end, v.prot, v.charged);
            let piece = Frames::new(frames.source.clone(), frames.offset + (s - addr));
            // The pages' own contents stay, unseen, until they are freed
            // (and zeroed when allocated again).
            self.show_frames(s, &piece, e - s, prot)?;
            if charged {
                self.uncharge(e - s);
            }
            let v = self.vmas.get_mut(&s).unwrap();
            v.charged = false;
            v.frames = Some(piece);
        }
        Ok(())
    }

    /// The physical address holding the byte at `addr` in this address
    /// space (its own page, or the frame its VMA shows there); None where
    /// nothing is mapped. Where nomu reaches this address space's memory
    /// other than at its guest addresses, it goes through this.
    #[allow(dead_code)] // users: the tests, fork (issue 18)
    pub fn frame_of(&self, addr: usize) -> Option<usize> {
        let (s, v) = self.find(addr)?;
        Some(match &v.frames {
            Some(f) => f.frame_of(addr - s),
            None => addr,
        })
    }

    /// The runs of whole pages of [addr, addr+len) (inside one VMA) that
    /// hold data, as guest addresses: its own pages', or the frames' it
    /// shows (mincore).
    pub fn populated(&self, addr: usize, len: usize) -> Vec<(usize, usize)> {
        if !self.phys.contains(addr, len) {
            return Vec::new();
        }
        let Some(frames) = self.find(addr).and_then(|(s, v)| v.frames.as_ref().map(|f| (s, f))) else {
            return self.phys.populated(addr, len);
        };
        let (s, f) = frames;
        let mut out = Vec::new();
        let mut at = addr;
        for (frame, n) in f.runs(addr - s, len) {
            out.extend(self.phys.populated(frame, n).into_iter().map(|(p, m)| (at + (p - frame), m)));
            at += n;
        }
        out
    }

    /// Makes [addr, addr+len) this process's, zeroed, writable and unmapped:
    /// pages it already maps are reused, free physical pages are claimed.
    fn claim_fixed(&mut self, addr: usize, len: usize) -> Result<(), Errno> {
        let end = addr.checked_add(len).ok_or(Errno::ENOMEM)?;
        if !self.phys.contains(addr, len) {
            return Err(Errno::ENOMEM);
        }
        // Check first: every page must be ours or free.
        let mut p = addr;
        while p < end {
            if let Some((_, v)) = self.find(p) {
                if v.shm.is_some() {
                    // A shared memory segment's pages are not this
                    // process's to reuse.
                    return Err(Errno::ENOMEM);
                }
                p = v.end.min(end);
            } else if self.owned_by_heap(p)
                || self.phys.is_free(p, PAGE_SIZE)
                || self.deferred.iter().any(|&(s, e)| s <= p && p < e)
            {
                p += PAGE_SIZE;
            } else {
                return Err(Errno::ENOMEM);
            }
        }
        // Then claim: our own VMAs' pages are reused as they are, free pages
        // are taken from the allocator, heap-reserved pages are ours already.
        let owned = self.take_range(addr, end);
        let mut p = addr;
        while p < end {
            if owned.iter().any(|&(s, e, _)| s <= p && p < e) || self.owned_by_heap(p) || self.reclaim_deferred(p) {
                p += PAGE_SIZE;
                continue;
            }
            self.phys.alloc_at(p, PAGE_SIZE, Fresh::Used)?;
            p += PAGE_SIZE;
        }
        self.phys.scrub(addr, len);
        Ok(())
    }

    /// munmap: frees the pages of every mapping in the range.
    pub fn unmap(&mut self, addr: usize, len: usize) {
        let end = addr.saturating_add(len);
        if self.own_host {
            return self.forked_unmap(addr, end);
        }
        for (s, e, charged) in self.take_range(addr, end) {
            self.release_pages(s, e, charged);
        }
    }

    /// Gives back the pages of a removed mapping: to the allocator, or, for
    /// pages inside the heap's reservation, back to that reservation. An
    /// uncharged mapping's pages are holes nobody could touch: they go
    /// back as they are (a pin is over accessible memory only).
    fn release_pages(&mut self, s: usize, e: usize, charged: bool) {
        let heap_s = self.brk_start.clamp(s, e);
        let heap_e = self.brk_owned_end.clamp(heap_s, e);
        self.release_run(s, heap_s, charged);
        self.phys.scrub(heap_s, heap_e - heap_s);
        self.release_run(heap_e, e, charged);
    }

    fn release_run(&mut self, s: usize, e: usize, charged: bool) {
        if charged {
            self.free_pages(s, e);
        } else {
            self.phys.free_untouched(s, e - s);
        }
    }

    /// mprotect: the whole range must be mapped. Making a reservation
    /// accessible charges it (ENOMEM over `--mem`, and nothing changes).
    pub fn protect(&mut self, addr: usize, len: usize, prot: i32) -> Result<(), Errno> {
        let end = addr.checked_add(len).ok_or(Errno::ENOMEM)?;
        self.try_settle_copies(addr, end)?;
        if self.own_host {
            self.privatize_cached(addr, end)?;
        }
        let mut p = addr;
        let mut uncharged = 0;
        while p < end {
            match self.find(p) {
                Some((s, v)) => {
                    // A shared mapping of a file opened without write
                    // access may never be writable (Linux clears its
                    // VM_MAYWRITE at mmap).
                    let file_read_only = v.backing.as_ref().is_some_and(|b| !b.file.writable());
                    if prot & PROT_WRITE != 0 && v.shared && file_read_only {
                        return Err(Errno::EACCES);
                    }
                    // A frames VMA is charged only when it gets private
                    // copies (made writable, see mm::mapping).
                    let privatized = v.frames.as_ref().is_some_and(|f| Self::copies_for(f, prot));
                    if !v.charged && v.shm.is_none() && (self.pages_own(v) || privatized) {
                        uncharged += v.end.min(end) - s.max(addr);
                    }
                    p = v.end
                }
                None => return Err(Errno::ENOMEM),
            }
        }
        let charge = host_prot(prot) != 0 && uncharged > 0;
        if charge {
            self.charge(uncharged, 0)?;
        }
        self.split_at(addr);
        self.split_at(end);
        let cow: Vec<usize> = self
            .vmas
            .range(addr..end)
            .filter(|(_, v)| v.frames.as_ref().is_some_and(|f| Self::copies_for(f, prot)))
            .map(|(&s, _)| s)
            .collect();
        for s in cow {
            self.privatize(s);
        }
        let mut shared = Vec::new();
        let own_host = self.own_host;
        for (&s, v) in self.vmas.range_mut(addr..end) {
            // A shared memory segment is charged when it is made, not by
            // its attachments.
            v.charged |= charge && v.shm.is_none() && Self::pages_own_in(own_host, v);
            v.prot = prot;
            v.was_writable |= prot & PROT_WRITE != 0;
            v.was_executable |= prot & PROT_EXEC != 0;
            if prot & PROT_WRITE != 0 {
                v.origin = None;
            }
            if v.shm.is_some() {
                shared.push((s, v.end));
            }
        }
        // A shared memory segment's pages keep the protection its
        // attachments, in every process, together allow: the VMA's binds
        // only what syscalls may do with them.
        if self.own_host {
            return self.forked_protect(addr, end, prot);
        }
        let mut at = addr;
        for (s, e) in shared {
            self.phys.set_prot(at, s - at, host_prot(prot))?;
            at = e;
        }
        self.phys.set_prot(at, end - at, host_prot(prot))
    }

    /// Whether `v`'s pages are its own to charge: no frames VMA
    /// (mm::mapping), or in a forked child's space the frames of its own
    /// copy (not those it shares with its parent). A reservation of a
    /// forked child made accessible is charged as anywhere else, and its
    /// pages scrubbed when freed (regression: left uncharged, they were
    /// freed as untouched, and another process's new mapping showed a
    /// dead thread's stack: tests/guest/fork_threads.c).
    fn pages_own(&self, v: &Vma) -> bool {
        Self::pages_own_in(self.own_host, v)
    }

    fn pages_own_in(own_host: bool, v: &Vma) -> bool {
        match &v.frames {
            None => true,
            Some(f) => own_host && !f.source.shared_at_fork() && !f.source.unmapped() && !f.source.copy_on_write(),
        }
    }

    /// Whether a VMA showing `f` needs private copies to take `prot`
    /// (mm::mapping).
    fn copies_for(f: &Frames, prot: i32) -> bool {
        (prot & PROT_WRITE != 0 && f.source.copy_on_write()) || (prot & PROT_EXEC != 0 && !f.source.executable())
    }

    /// Gives the frames VMA at `s` private copies of its pages, in its own
    /// identity pages (mm::mapping), and makes it an ordinary, charged VMA;
    /// the caller has charged it.
    fn privatize(&mut self, s: usize) {
        let v = self.vmas.get_mut(&s).unwrap();
        let Some(frames) = v.frames.take() else { return };
        v.charged = true;
        let end = v.end;
        self.phys.unmap_frames(s, end - s);
        let mut at = s;
        for (frame, n) in frames.runs(0, end - s) {
            // The pages' own contents (a loader's leftovers) go first.
            self.phys.copy_frames(at, frame, n);
            at += n;
        }
    }

    /// MADV_DONTNEED: private anonymous pages read as zero again, private
    /// file pages as the file's contents; shared mappings keep theirs
    /// (Linux zaps only the page tables: the data is the shared pages').
    /// MADV_REMOVE (`remove`) frees a shared anonymous mapping's too.
    pub fn discard(&mut self, addr: usize, len: usize, remove: bool) -> Result<(), Errno> {
        let end = addr.saturating_add(len);
        self.settle_copies(addr, end);
        let mut p = addr;
        while p < end {
            let Some((s, v)) = self.find(p) else { return Err(Errno::ENOMEM) };
            let run_end = v.end.min(end);
            let (prot, backing) = (v.prot, v.backing.clone());
            if v.shm.is_some() || (v.shared && !remove) || (v.frames.is_some() && !Self::pages_own_in(self.own_host, v))
            {
                // Shared memory keeps its contents (Linux zaps only the
                // page tables; the segment's pages hold the data); a frames
                // VMA's pages are its source's (a private file mapping's
                // are the file's, which a re-read gives back). A forked
                // child's frames are its own pages.
                p = run_end;
                continue;
            }
            let v = self.vmas.get_mut(&s).unwrap();
            v.origin = None;
            // The pages (a forked child's frames are elsewhere).
            let f = v.frame_of(s, p);
            self.phys.wipe(f, run_end - p);
            if let Some(b) = backing {
                // Through the alias: the pages keep the mapping's protection.
                let range = GuestRange::new(f, run_end - p).unwrap().through_alias();
                let _ = b.file.read_at_into(range, b.offset + (p - s) as u64);
            }
            self.phys.set_prot(f, run_end - p, host_prot(prot))?;
            p = run_end;
        }
        Ok(())
    }

    /// mremap for the page-aligned, validated arguments.
    pub fn remap(&mut self, old: usize, old_len: usize, new_len: usize, may_move: bool) -> Result<usize, Errno> {
        let (start, vma) = self.find(old).ok_or(Errno::EFAULT)?;
        if vma.shm.is_some() {
            // No-MMU Linux's do_mremap refuses shared mappings so.
            return Err(Errno::EPERM);
        }
        let mut vma = vma.clone();
        let old_end = old.checked_add(old_len).ok_or(Errno::EINVAL)?;
        if old_end > vma.end {
            return Err(Errno::EFAULT);
        }
        self.try_settle_copies(old, old_end)?;
        if new_len <= old_len {
            self.unmap(old + new_len, old_len - new_len);
            return Ok(old);
        }
        if vma.backing.is_some() && vma.frames.as_ref().is_some_and(|f| f.source.shared_at_fork()) {
            return self.grow_shared(old, old_len, new_len, vma, start, may_move);
        }
        if self.own_host {
            return self.forked_grow(old, old_len, new_len, vma, start, may_move);
        }
        if let Some(f) = &vma.frames {
            // Growing: a copy-on-write source's VMA gets private copies
            // first (mm::mapping); another shared source's cannot grow.
            if !f.source.copy_on_write() {
                return Err(Errno::EINVAL);
            }
            self.charge(vma.end - start, 0)?;
            self.privatize(start);
            vma = self.vmas[&start].clone();
        }
        let grow = new_len - old_len;
        // A charged mapping's growth is charged (a move only its growth:
        // the old range's charge goes with it, as Linux's VM_ACCOUNT does).
        if vma.charged {
            self.charge(grow, 0)?;
        }
        let fresh = if vma.charged { Fresh::Used } else { Fresh::Reserved };
        if old_end == vma.end && self.phys.alloc_at(old_end, grow, fresh).is_ok() {
            if let Err(e) = self.phys.set_prot(old_end, grow, host_prot(vma.prot)) {
                self.phys.free(old_end, grow);
                if vma.charged {
                    self.uncharge(grow);
                }
                return Err(e);
            }
            self.vmas.get_mut(&start).unwrap().end = old_end + grow;
            return Ok(old);
        }
        if vma.charged {
            self.uncharge(grow);
        }
        if !may_move {
            return Err(Errno::ENOMEM);
        }
        let mut moved = vma.clone();
        for b in [moved.backing.as_mut(), moved.image_file.as_mut()].into_iter().flatten() {
            b.offset += (old - start) as u64;
        }
        let phys = self.phys;
        let freeing = if vma.charged { old_len } else { 0 };
        let new = self.map_charging(
            Placement::Anywhere { align: PAGE_SIZE },
            new_len,
            moved,
            |dst| {
                // Through the alias: the old pages may be unreadable to the guest.
                phys.copy_within(dst.addr(), old, old_len);
                Ok(())
            },
            freeing,
        )?;
        self.unmap(old, old_len);
        Ok(new)
    }

    /// mremap growth of a shared file mapping's VMA (its file's shared
    /// pages, or a copy a fork made shared): a file's shared pages take
    /// the file's further pages and the VMA grows in place or moves, still
    /// showing the same pages; a fork's shared copy cannot grow (EINVAL).
    fn grow_shared(
        &mut self,
        old: usize,
        old_len: usize,
        new_len: usize,
        vma: Vma,
        start: usize,
        may_move: bool,
    ) -> Result<usize, Errno> {
        let f = vma.frames.as_ref().expect("a frames VMA");
        let at = f.offset + (old - start);
        let file = vma.backing.as_ref().map(|b| &b.file).ok_or(Errno::EINVAL)?;
        if !f.source.hold_file(file, at, new_len)? {
            return Err(Errno::EINVAL);
        }
        let grown = Frames::new(f.source.clone(), at);
        let (old_end, grow) = (old + old_len, new_len - old_len);
        if !self.own_host && old_end == vma.end && self.phys.alloc_at(old_end, grow, Fresh::Reserved).is_ok() {
            let tail = Frames::new(f.source.clone(), at + old_len);
            if let Err(e) = self.show_frames(old_end, &tail, grow, vma.prot) {
                self.phys.free(old_end, grow);
                return Err(e);
            }
            self.vmas.get_mut(&start).unwrap().end = old_end + grow;
            return Ok(old);
        }
        if !may_move {
            return Err(Errno::ENOMEM);
        }
        let mut moved = vma.clone();
        moved.frames = Some(grown);
        for b in [moved.backing.as_mut(), moved.image_file.as_mut()].into_iter().flatten() {
            b.offset += (old - start) as u64;
        }
        let new = self.map_frames(Placement::Anywhere { align: PAGE_SIZE }, new_len, moved)?;
        self.unmap(old, old_len);
        Ok(new)
    }

    /// shmat: maps a shared memory segment's pages, which must not overlap
    /// a mapping of this address space (EINVAL, as Linux's do_shmat).
    pub fn attach_shared(&mut self, vma: Vma) -> Result<usize, Errno> {
        let shm = vma.shm.as_ref().expect("an attachment");
        let (start, len) = shm.pages();
        let end = start + len;
        if self.vmas.range(..end).next_back().is_some_and(|(_, v)| v.end > start) {
            return Err(Errno::EINVAL);
        }
        if self.own_host {
            self.host_ops.push(HostOp::Map { addr: start, len, prot: host_prot(vma.prot), frame: start });
        }
        self.vmas.insert(start, Vma { end, ..vma });
        Ok(start)
    }

    /// shmdt: detaches the segment attached at `addr` (every VMA of it from
    /// there to its end); EINVAL when no attachment starts there.
    pub fn detach_shared(&mut self, addr: usize) -> Result<(), Errno> {
        let (seg, (start, len)) = match self.vmas.get(&addr).and_then(|v| v.shm.as_ref()) {
            Some(shm) => (shm.segment(), shm.pages()),
            None => return Err(Errno::EINVAL),
        };
        let keys: Vec<usize> = self
            .vmas
            .range(addr..start + len)
            .filter(|(_, v)| v.shm.as_ref().is_some_and(|h| h.segment() == seg))
            .map(|(&s, _)| s)
            .collect();
        for k in keys {
            if let Some(v) = self.vmas.remove(&k) {
                if self.own_host {
                    self.host_ops.push(HostOp::Unmap { addr: k, len: v.end - k });
                }
            }
        }
        Ok(())
    }

    /// Sets up the heap after a freshly loaded image: `owned_end` is the end
    /// of the pages the loader allocated for the heap reservation, which it
    /// zeroed unless `stale`.
    pub fn init_brk(&mut self, start: usize, owned_end: usize, stale: bool) {
        self.brk_start = start;
        self.brk = start;
        self.brk_owned_end = owned_end;
        self.brk_stale = if stale { (start, owned_end) } else { (0, 0) };
    }

    /// Frees the pages of the heap's reservation above the break (freed
    /// pages may hold data, as any: the allocator zeroes them for their
    /// next owner); the break grows again only where the next pages are free.
    /// Whether there were any.
    fn give_back_heap_reserve(&mut self) -> bool {
        let Some(end) = page_up(self.brk) else { return false };
        if self.brk_start == 0 || end >= self.brk_owned_end || self.vmas.range(end..self.brk_owned_end).next().is_some()
        {
            return false;
        }
        self.phys.free(end, self.brk_owned_end - end);
        self.brk_owned_end = end;
        self.brk_stale.1 = self.brk_stale.1.min(end);
        true
    }

    /// brk(2): returns the new break, or the old one when it cannot move.
    pub fn set_brk(&mut self, new: usize) -> usize {
        if self.brk_start == 0 || new < self.brk_start {
            return self.brk;
        }
        if self.own_host {
            return self.forked_set_brk(new);
        }
        let Some(new_end) = page_up(new) else { return self.brk };
        let old_end = page_up(self.brk).unwrap();
        if new_end > self.brk_owned_end && self.vmas.range(self.brk_owned_end..new_end).next().is_none() {
            // Grow the reservation in place if the next pages are free.
            let more = new_end - self.brk_owned_end;
            if self.phys.alloc_at(self.brk_owned_end, more, Fresh::Used).is_err() {
                return self.brk;
            }
            self.brk_owned_end = new_end;
        }
        if new_end > old_end {
            // Like Linux, the heap may not grow over another mapping.
            // Reserved heap pages are read-write already (the loader makes
            // them so, alloc_at does, and scrub keeps them so).
            if self.vmas.range(old_end..new_end).next().is_some() || self.charge(new_end - old_end, 0).is_err() {
                return self.brk;
            }
            let (stale_s, stale_e) = (self.brk_stale.0.max(old_end), self.brk_stale.1.min(new_end));
            if stale_s < stale_e {
                self.phys.zero(stale_s, stale_e - stale_s);
            }
            self.brk_stale.0 = self.brk_stale.0.max(new_end);
            let heap = Vma { charged: true, ..Vma::new(new_end, PROT_READ | PROT_WRITE, VmaKind::Heap) };
            self.vmas.insert(old_end, heap);
        } else if new_end < old_end {
            for (s, e, _) in self.take_range(new_end, old_end) {
                self.phys.scrub(s, e - s);
            }
        }
        self.brk = new;
        self.brk
    }

    /// Frees every page this address space owns: the memory half of a
    /// process's exit (src/kernel/exit.rs states the whole order and why),
    /// run by the last process that used the space, in its own context,
    /// once no thread of it can touch these pages any more:
    ///
    /// 1. (the caller's: every thread that used the space has left guest
    ///    code for good);
    /// 2. the host protections of its pages are put back to what free pages
    ///    have (read-write), one host call per run of pages that differ;
    /// 3. the entry path's per-page state (zpoline's and rewrite's syscall
    ///    site marks) is cleared, for the pages that were ever executable;
    /// 4. its mappings go and their pages back to the allocator (a shared
    ///    file mapping written back to its file first; a System V segment's
    ///    pages are the segment's: its attachment is dropped; a VMA showing
    ///    frames, a page cache's pages, gives its reference back; the
    ///    host's view of those pages left at its range in step 2 is the
    ///    cache's, not this space's: see there).
    ///
    /// Its cost follows the VMAs and the pages the process touched, not
    /// the size of what it mapped: every step works on runs of pages (a
    /// 4 GiB mapping is one run), and the allocator asks the host which
    /// pages of a long run hold anything (mm::phys).
    pub fn tear_down(&mut self) {
        if self.moved_image && !self.own_host {
            // A failed exec of a moved image: its pages are frames.
            self.become_own_host();
        }
        if self.own_host {
            // A forked child's: its frames and its host process's map.
            return self.forked_release_all();
        }
        // Children still copying pages on access get them now (cow.rs).
        self.settle_copies(0, usize::MAX);
        self.cow_children.clear();
        let vmas = std::mem::take(&mut self.vmas);
        // What it charged is free for guests again.
        self.uncharge(self.committed);
        let (heap_s, heap_e) = (self.brk_start, self.brk_owned_end);
        (self.brk_start, self.brk, self.brk_owned_end, self.brk_stale) = (0, 0, 0, (0, 0));
        // Nothing is pinned any more: a pin borrows the address space.
        let deferred = std::mem::take(&mut self.deferred);
        let own = |v: &Vma| v.shm.is_none();

        // Shared file mappings are written back while their pages are here.
        for (&s, v) in vmas.iter().filter(|(_, v)| own(v)) {
            Self::write_back_vma(s, v);
        }

        // 2. The host's view put back: the direct map under VMAs showing
        // frames (a page cache's pages, mm::mapping) is released, one call
        // per run, and is this space's no more: no VMA holds it, nothing
        // translates through it, its range's own pages go back to the
        // allocator in step 4. What the host still shows there is the
        // page cache's (its read-only file pages, which it keeps anyway)
        // and goes with them (`free_frames`: reclaim, drop_caches, a
        // changed file), or is made fresh by the allocator when it hands
        // the range out for anything else, as it zeroes a dirty free page
        // (a program exec'd again at the same place takes it up with no
        // host call: mm::mapping). So nothing of this space is left to
        // undo and nobody works on its behalf later (see "Exit" in the
        // README: putting the view back here, then mapping it again at the
        // next exec, cost a vfork + execve + wait 0.47x -> 0.91x native
        // on zpoline, AMD EPYC VM). Then one host call per run of this space's
        // pages whose VMAs were not all read-write (read-write VMAs between
        // them are bridged, the host skipping what needs no change: a
        // thread stack's guard page is not a call of its own), and the
        // deferred pages (their VMAs went, their protection left).
        // (A source whose pages may not linger, a secret file's, gets the
        // range's own pages back at once.) The one other thing left as it
        // is: a guard page, an inaccessible VMA of at most GUARD_MAX (a
        // stack's, a thread stack's): its host protection and the
        // allocator's record of it agree, so whoever takes the page next
        // gets it read-write, as every page the allocator hands out, and
        // the next stack made at the same place (most often the next
        // program's, or the next thread's) finds its guard there with no
        // host call. Otherwise an mprotect with its TLB shootdown at each
        // exit and each exec (~2.4 us of a vfork + execve + wait's ~40),
        // and for a process with threads one across all their stacks,
        // which the host must split and merge again at each guard. Likewise
        // a program image's own code (read and execute, not writable: the
        // pages the rewrite path patches, which it cannot share, see
        // mm::cache): the next exec at the same place, the usual case, sets
        // the same protection again, and it is an mprotect less at exit and
        // at exec (vfork + execve + wait on rewrite, AMD EPYC: 2 of ~3.4
        // host mprotects per round).
        let framed = |v: &Vma| v.frames.is_some();
        let lingers = |v: &Vma| v.frames.as_ref().is_some_and(|f| f.source.lingers());
        for (s, e) in runs(vmas.iter().filter(|(_, v)| lingers(v)).map(|(&s, v)| (s, v.end))) {
            self.phys.release_frames(s, e - s);
        }
        for (s, e) in runs(vmas.iter().filter(|(_, v)| framed(v) && !lingers(v)).map(|(&s, v)| (s, v.end))) {
            self.phys.unmap_frames(s, e - s);
        }
        let guard = |s: usize, v: &Vma| host_prot(v.prot) == libc::PROT_NONE && v.end - s <= GUARD_MAX;
        let code = |v: &Vma| v.kind == VmaKind::Image && host_prot(v.prot) == libc::PROT_READ | libc::PROT_EXEC;
        for (s, e) in protection_runs(vmas.iter().filter(|(&s, v)| own(v) && !framed(v) && !guard(s, v) && !code(v)))
            .chain(deferred.iter().copied())
        {
            self.phys.reset_prot(s, e - s);
        }

        // 3. The entry path forgets the syscall sites of code that was here.
        for (s, e) in runs(vmas.iter().filter(|(_, v)| own(v) && v.was_executable).map(|(&s, v)| (s, v.end)))
            .chain(deferred.iter().copied())
        {
            self.phys.forget_code(s, e - s);
        }

        // 4. The pages back to the allocator: the heap's reservation whole,
        // every other run by whether it may hold data (an uncharged one is
        // a reservation's holes; a frames VMA's own pages are counted as
        // holding some, as munmap counts them). The frames themselves go
        // back to their source by reference, as the VMAs' handles drop
        // below (a page cache keeps its pages for the next user).
        let outside_heap = |s: usize, e: usize| {
            let (hs, he) = (heap_s.clamp(s, e), heap_e.clamp(heap_s.clamp(s, e), e));
            [(s, hs), (he, e)].into_iter().filter(|(a, b)| a < b)
        };
        for charged in [true, false] {
            let pieces = vmas
                .iter()
                .filter(|(_, v)| own(v) && (v.charged || framed(v)) == charged)
                .flat_map(|(&s, v)| outside_heap(s, v.end));
            for (s, e) in runs(pieces) {
                self.phys.free_forgotten(s, e - s, charged);
            }
        }
        self.phys.free_forgotten(heap_s, heap_e - heap_s, true);
        for (s, e) in deferred {
            self.phys.free_forgotten(s, e - s, true);
        }
        // System V attachments detach, and frames go back to their
        // sources, as their VMAs go.
        drop(vmas);
    }
}

/// Inaccessible VMAs up to this long are guard pages, whose protection a
/// teardown leaves (see step 2 of `tear_down`): a stack's is one page,
/// glibc's thread stacks' one page, musl's one page or its guard size.
const GUARD_MAX: usize = 64 << 10;

/// Read-write VMAs up to this long between two that are not are put back
/// with them in one host call (longer ones would make the protection
/// records' fill follow a large mapping's size).
const BRIDGE: usize = 16 << 20;

/// The runs of pages whose protection a teardown puts back: from the
/// first VMA not read-write to the last, across adjacent VMAs (a gap in
/// the address space, or a long read-write VMA, ends a run).
fn protection_runs<'a>(vmas: impl Iterator<Item = (&'a usize, &'a Vma)>) -> impl Iterator<Item = (usize, usize)> {
    let mut out = Vec::new();
    let mut cur: Option<(usize, usize)> = None;
    let mut own_end = 0;
    for (&s, v) in vmas {
        if s != own_end {
            out.extend(cur.take());
        }
        own_end = v.end;
        // A forked parent's pages may be write-protected still (cow.rs).
        if host_prot(v.prot) == RW && !v.cow {
            continue;
        }
        cur = match cur {
            Some((cs, ce)) if s - ce <= BRIDGE => Some((cs, v.end)),
            done => {
                out.extend(done);
                Some((s, v.end))
            }
        };
    }
    out.extend(cur);
    out.into_iter()
}

/// Adjacent ranges (in address order) merged into runs.
fn runs(ranges: impl Iterator<Item = (usize, usize)>) -> impl Iterator<Item = (usize, usize)> {
    let mut ranges = ranges.peekable();
    std::iter::from_fn(move || {
        let (s, mut e) = ranges.next()?;
        while let Some(&(s2, e2)) = ranges.peek() {
            if s2 != e {
                break;
            }
            e = e2;
            ranges.next();
        }
        Some((s, e))
    })
}

impl Drop for AddressSpace {
    /// One no process ever used (an image whose exec failed), or one left
    /// empty by its last user.
    fn drop(&mut self) {
        self.tear_down();
    }
}
