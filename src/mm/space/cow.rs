//! Copy on access for fork: a forked child's copy of its parent's larger
//! private writable mappings is made a chunk at a time, when either side
//! first needs it, not at fork.
//!
//! The parent runs in nomu's process, where an address *is* its page, so
//! its pages cannot move; the child's copy goes to frames of its own (its
//! host process shows them at the same addresses, forked.rs). At fork each
//! such mapping gets its child frames as zero pages (holes, or a few pages
//! zeroed in place: `Fresh::Sparse`), shown to the child with no
//! access, and the parent's pages are write-protected in nomu's direct
//! map. A [`CowLink`] remembers what is still to copy. Then:
//! - the child touching a chunk (a fault handed to nomu, or a checked copy
//!   of nomu's) copies it from the parent first, then the child's host
//!   process gives the chunk the mapping's protection;
//! - the parent writing a chunk (a fault, or a checked copy or host call
//!   that writes) first copies it to every child that has not got it, then
//!   makes it writable again;
//! - anything else that changes the parent's pages (munmap, mprotect,
//!   MADV_DONTNEED, mremap, exec, exit) first copies what the children
//!   still need of the range; the child forgets what it unmaps, and the
//!   whole link at its exit or exec.
//!
//! So the parent's pages never change while a child may still copy them,
//! and nothing is copied that nobody touches: a fork + exec, or a fork +
//! exit, copies what the two touch in between, in [`CHUNK`]s. Smaller
//! mappings (a program's data), and the forking thread's stack when it
//! holds little data (forked.rs's `EAGER_COPY_MAX`), are copied at fork: each chunk
//! copied on demand costs a fault handed to nomu, and write-protecting a
//! mapping costs host calls on both sides.
//!
//! The parent's write-protection goes when no child is left (one host
//! mprotect per mapping, at its next write fault or write of nomu's
//! there), else a chunk at a time.
//! Pages a host call of the parent is using (pinned) are copied at fork,
//! as Linux copies pinned pages eagerly: the call may write them.

use super::{host_prot, AddressSpace, Vma, PROT_EXEC, PROT_READ, PROT_WRITE};
use crate::mm::PAGE_SIZE;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Mappings at least this long are copied on access, smaller ones at fork.
const COW_MIN: usize = 256 << 10;

/// What one fault copies and unprotects: aligned, cut to the mapping.
const CHUNK: usize = 64 << 10;

/// The pages a forked child still has to copy from its parent: runs of
/// addresses (the same in both: the child's mappings sit where the
/// parent's are), each with the child frame of its first page. The parent
/// holds one per live child, the child its own.
#[derive(Default)]
pub struct CowLink {
    pending: Mutex<BTreeMap<usize, (usize, usize)>>,
}

impl CowLink {
    fn add(&self, start: usize, end: usize, frame: usize) {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).insert(start, (end, frame));
    }

    /// Where the pending runs overlapping [start, ...) begin: the run
    /// holding `start`, if any, else `start`.
    fn first_from(pending: &BTreeMap<usize, (usize, usize)>, start: usize) -> usize {
        pending.range(..=start).next_back().filter(|(_, &(e, _))| e > start).map_or(start, |(&s, _)| s)
    }

    /// Takes the pending runs overlapping [start, end) out of the map (cut
    /// at the edges), as (start, end, child frame of start).
    fn take(pending: &mut BTreeMap<usize, (usize, usize)>, start: usize, end: usize) -> Vec<(usize, usize, usize)> {
        let first = Self::first_from(pending, start);
        let keys: Vec<usize> = pending.range(first..end).map(|(&s, _)| s).collect();
        let mut out = Vec::new();
        for s in keys {
            let (e, f) = pending.remove(&s).unwrap();
            if s < start {
                pending.insert(s, (start, f));
            }
            if e > end {
                pending.insert(end, (e, f + (end - s)));
            }
            let (a, b) = (s.max(start), e.min(end));
            out.push((a, b, f + (a - s)));
        }
        out
    }

    /// Copies what is pending of [start, end) from the parent's pages to
    /// the child's frames (only what holds data: the frames are zero).
    fn fill(&self, start: usize, end: usize) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending.is_empty() {
            return;
        }
        let pm = crate::host::physmem::PhysMem::get();
        for (a, b, frame) in Self::take(&mut pending, start, end) {
            for (at, n) in pm.populated(a, b - a) {
                pm.copy_within(frame + (at - a), at, n);
            }
        }
    }

    /// Drops what is pending of [start, end): the child unmapped it.
    fn forget(&self, start: usize, end: usize) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        Self::take(&mut pending, start, end);
    }

    fn is_pending(&self, start: usize, end: usize) -> bool {
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.range(Self::first_from(&pending, start)..end).next().is_some()
    }
}

/// The access a fault was for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Access {
    Read,
    Write,
    Exec,
}

impl Access {
    /// The protection bit that allows it.
    fn prot(self) -> i32 {
        match self {
            Access::Read => PROT_READ,
            Access::Write => PROT_WRITE,
            Access::Exec => PROT_EXEC,
        }
    }
}

impl AddressSpace {
    /// Whether fork copies the VMA at `s` on access rather than at once.
    pub(super) fn copies_on_access(&self, s: usize, v: &Vma) -> bool {
        !self.own_host
            && v.frames.is_none()
            && v.shm.is_none()
            && !v.shared
            && v.charged
            && !v.was_executable
            && v.prot & PROT_WRITE != 0
            && v.end - s >= COW_MIN
            && !self.pinned(s, v.end)
    }

    /// At fork: the child's VMA at `s` (frames `frame`, zero) is copied
    /// on access from this space's pages, which stop being writable.
    pub(super) fn share_on_access(&mut self, link: &Arc<CowLink>, s: usize, frame: usize) {
        let v = self.vmas.get_mut(&s).expect("a VMA being forked");
        link.add(s, v.end, frame);
        v.cow = true;
        self.write_protected = true;
        let v = &self.vmas[&s];
        let (len, prot) = (v.end - s, host_prot(v.prot) & !PROT_WRITE);
        // Failing, the parent could write pages the child has not copied.
        self.phys.set_prot(s, len, prot).expect("write-protecting a forked parent's pages");
    }

    /// Copies to the children (in a parent) or from the parent (in a
    /// child) what is still pending of [start, end): before anything
    /// changes the pages or their protection there.
    pub(super) fn settle_copies(&mut self, start: usize, end: usize) {
        if let Some(link) = &self.cow_parent {
            link.fill(start, end);
        }
        self.cow_children.retain(|l| Arc::strong_count(l) > 1);
        for link in &self.cow_children {
            link.fill(start, end);
        }
    }

    /// In a parent whose children are all gone: the VMAs overlapping
    /// [start, end) still write-protected for their sake get their
    /// protection back, whole, one host call each. True if no child is
    /// left (nothing is pending any more). The others stay protected until
    /// they are written: a VMA the parent never writes again (a loop of
    /// forks) is not unprotected only to be protected at the next fork.
    fn unprotect_when_alone(&mut self, start: usize, end: usize) -> bool {
        if !self.write_protected {
            return true;
        }
        self.cow_children.retain(|l| Arc::strong_count(l) > 1);
        if !self.cow_children.is_empty() {
            return false;
        }
        let mut unprotected = false;
        for (&s, v) in self.vmas.range_mut(..end).rev().take_while(|(_, v)| v.end > start).filter(|(_, v)| v.cow) {
            v.cow = false;
            unprotected = true;
            let _ = self.phys.set_prot(s, v.end - s, host_prot(v.prot));
        }
        if unprotected {
            self.write_protected = self.vmas.values().any(|v| v.cow);
        }
        true
    }

    /// A child unmaps [start, end): nothing of it is copied any more.
    pub(super) fn forget_copies(&mut self, start: usize, end: usize) {
        if let Some(link) = &self.cow_parent {
            link.forget(start, end);
        }
    }

    /// Before nomu accesses [addr, addr+len) of this space (a checked copy,
    /// a host call): a child copies what it has not yet, a parent about to
    /// write gives its children their copies and makes the pages writable.
    pub fn prepare_access(&mut self, addr: usize, len: usize, write: bool) {
        let start = addr & !(PAGE_SIZE - 1);
        let end = addr.saturating_add(len).next_multiple_of(PAGE_SIZE);
        if len == 0 || (self.cow_parent.is_none() && (!write || self.unprotect_when_alone(start, end))) {
            return;
        }
        if self.cow_parent.is_some() {
            self.settle_copies(start, end);
            return;
        }
        let cow: Vec<(usize, usize)> = self
            .vmas
            .range(..end)
            .rev()
            .take_while(|(_, v)| v.end > start)
            .filter(|(_, v)| v.cow)
            .map(|(&s, v)| (s.max(start), v.end.min(end)))
            .collect();
        for (s, e) in cow {
            self.settle_copies(s, e);
            let prot = self.find(s).map_or(0, |(_, v)| host_prot(v.prot));
            let _ = self.phys.set_prot(s, e - s, prot);
        }
    }

    /// A fault at `addr` that copy on access explains: the chunk around it
    /// is copied (see the module comment) and given its mapping's
    /// protection (in a child, by its host process before it resumes).
    /// False when the access is not allowed: a real fault.
    pub fn resolve_copy_fault(&mut self, addr: usize, access: Access) -> bool {
        let Some((s, v)) = self.find(addr) else { return false };
        let need = access.prot();
        if !v.cow || v.prot & need == 0 {
            return false;
        }
        let (end, prot) = (v.end, host_prot(v.prot));
        let base = addr & !(CHUNK - 1);
        let (cs, ce) = (base.max(s), (base + CHUNK).min(end));
        if self.own_host {
            self.settle_copies(cs, ce);
            self.host_ops.push(super::HostOp::Protect { addr: cs, len: ce - cs, prot });
            return true;
        }
        if self.unprotect_when_alone(addr, addr + 1) {
            return true;
        }
        let (cs, ce) = if self.cow_children.iter().any(|l| l.is_pending(s, end)) {
            self.settle_copies(cs, ce);
            (cs, ce)
        } else {
            // No child needs any of it: the whole VMA, in one call.
            self.vmas.get_mut(&s).unwrap().cow = false;
            (s, end)
        };
        self.phys.set_prot(cs, ce - cs, prot).is_ok()
    }

    /// Whether a fault at `addr` that [`resolve_copy_fault`](Self::resolve_copy_fault)
    /// did not explain was fixed by another thread since it happened: its
    /// mapping allows the access and nomu's pages there do now. So it was,
    /// when two threads of a parent whose children are gone write the same
    /// write-protected VMA at once: the first fault handled unprotects the
    /// whole VMA, and the second then finds nothing copied on access there
    /// (or when another thread's mprotect allowed the access meanwhile).
    /// Linux retries such a fault too (its page table entry is already
    /// fixed when the fault handler looks). The page's host protection is
    /// given again first (one host call, on this rare path), so the retry
    /// cannot fault the same way again: a record of nomu's that disagreed
    /// with the host would otherwise make the thread fault forever.
    pub fn fixed_since_fault(&self, addr: usize, access: Access) -> bool {
        let Some((_, v)) = self.find(addr) else { return false };
        let need = access.prot();
        // A forked child's host process shows its pages, not the direct map.
        !self.own_host && v.prot & need != 0 && !v.cow && self.phys.reapply_prot(addr) & need != 0
    }

    /// In a parent at fork: the chunk around `addr`, if copied on access,
    /// is copied to every child now and made writable again here, as a
    /// write fault there would (the forking thread's stack, which both
    /// sides write at once). The chunk and the protection the child's
    /// host process is to give it.
    pub(super) fn resolve_copy_now(&mut self, addr: usize) -> Option<(usize, usize, i32)> {
        let (s, v) = self.find(addr)?;
        if !v.cow {
            return None;
        }
        let (end, prot) = (v.end, host_prot(v.prot));
        let base = addr & !(CHUNK - 1);
        let (cs, ce) = (base.max(s), (base + CHUNK).min(end));
        self.settle_copies(cs, ce);
        self.phys.set_prot(cs, ce - cs, prot).ok()?;
        Some((cs, ce, prot))
    }

    /// A child's space lets go of its parent's pages (its exit or exec).
    pub(super) fn drop_copies(&mut self) {
        if let Some(link) = self.cow_parent.take() {
            link.forget(0, usize::MAX);
        }
    }
}
