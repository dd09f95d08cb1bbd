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
//!
//! The child's copy is charged to the commit account as it is made, a
//! chunk at a time, not at fork: a hundred children of a 14 MiB Python
//! each touching a few MiB fit in the default `--mem` as they fit in
//! Linux's default (heuristic) overcommit, where charging every mapping's
//! length at fork (Linux's strict mode, `--strict-fork`) refused the 75th. Each byte of a child's
//! copy-on-access mapping is charged once it is no longer pending. A copy
//! the child asks for (its fault, its mprotect or mremap, its own fork)
//! fails when it does not fit: ENOMEM from the call, and for a fault the
//! child is killed (SIGKILL), as Linux's OOM killer would. A copy its
//! parent's change forces is charged even past the limit (nothing may
//! refuse the parent); later charges then fail until memory is given back.

use super::{host_prot, AddressSpace, Vma, PROT_EXEC, PROT_READ, PROT_WRITE};
use crate::abi::errno::Errno;
use crate::mm::commit::Commit;
use crate::mm::PAGE_SIZE;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Mappings at least this long are copied on access, smaller ones at fork.
const COW_MIN: usize = 256 << 10;

/// What one fault copies and unprotects: aligned, cut to the mapping.
const CHUNK: usize = 64 << 10;

/// The pages of a forked child's copy-on-access mappings it has not been
/// given yet: runs of addresses (the same in both: the child's mappings
/// sit where the parent's are), each with the child frame of its first
/// page, and whether it is to be copied from the parent's pages or is a
/// hole there (the child's zero pages, which only need charging: the
/// parent may write its own pages there freely). The parent holds one
/// per live child, the child its own.
pub struct CowLink {
    pending: Mutex<BTreeMap<usize, Pending>>,
    commit: &'static Commit,
}

/// A run of [`CowLink`]'s pending pages.
#[derive(Clone, Copy)]
struct Pending {
    end: usize,
    frame: usize,
    /// From the parent's pages (else zero: nothing to copy).
    copy: bool,
}

/// Who needs pending pages settled.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The child, to use them: their charge may be refused (ENOMEM), but
    /// for what nomu's own access (a host call's buffer) needs, which is
    /// charged past the limit.
    Child { may_refuse: bool },
    /// The parent, to change its pages: the copies are made and charged
    /// past the limit if need be (nothing may refuse the parent); the
    /// holes among them stay pending, to be charged when the child
    /// touches them.
    Parent,
}

impl CowLink {
    /// A link whose copies are charged as they are made, unless the
    /// child's mappings were charged whole at fork (`--strict-fork`).
    pub(super) fn new(commit: &'static Commit) -> CowLink {
        CowLink { pending: Mutex::default(), commit }
    }

    fn charges(&self) -> bool {
        !self.commit.strict_fork()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<usize, Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bytes of [start, end) still pending.
    fn pending_in(pending: &BTreeMap<usize, Pending>, start: usize, end: usize) -> usize {
        pending
            .range(Self::first_from(pending, start)..end)
            .map(|(&s, r)| r.end.min(end).saturating_sub(s.max(start)))
            .sum()
    }

    /// Charges `n` bytes the child was given at fork (ENOMEM if they do
    /// not fit).
    pub(super) fn charge_copied(&self, n: usize) -> Result<(), Errno> {
        if self.charges() {
            self.commit.charge(n, 0)?;
        }
        Ok(())
    }

    pub(super) fn add(&self, start: usize, end: usize, frame: usize, copy: bool) {
        self.lock().insert(start, Pending { end, frame, copy });
    }

    /// Where the pending runs overlapping [start, ...) begin: the run
    /// holding `start`, if any, else `start`.
    fn first_from(pending: &BTreeMap<usize, Pending>, start: usize) -> usize {
        pending.range(..=start).next_back().filter(|(_, r)| r.end > start).map_or(start, |(&s, _)| s)
    }

    /// Takes the pending runs overlapping [start, end) out of the map (cut
    /// at the edges), as (start, end, child frame of start, copy).
    fn take(pending: &mut BTreeMap<usize, Pending>, start: usize, end: usize) -> Vec<(usize, usize, usize, bool)> {
        let first = Self::first_from(pending, start);
        let keys: Vec<usize> = pending.range(first..end).map(|(&s, _)| s).collect();
        let mut out = Vec::new();
        for s in keys {
            let r = pending.remove(&s).unwrap();
            if s < start {
                pending.insert(s, Pending { end: start, ..r });
            }
            if r.end > end {
                pending.insert(end, Pending { frame: r.frame + (end - s), ..r });
            }
            let (a, b) = (s.max(start), r.end.min(end));
            out.push((a, b, r.frame + (a - s), r.copy));
        }
        out
    }

    /// Settles what is pending of [start, end) for `side`: copies the
    /// parent's data (only what holds data: the frames are zero) and
    /// charges it (see the module comment).
    fn fill(&self, start: usize, end: usize, side: Side) -> Result<(), Errno> {
        let mut pending = self.lock();
        if pending.is_empty() {
            return Ok(());
        }
        let pm = crate::host::physmem::PhysMem::get();
        if let Side::Child { may_refuse } = side {
            // All of it becomes the child's to touch: charged first.
            if self.charges() {
                let n = Self::pending_in(&pending, start, end);
                if may_refuse {
                    self.commit.charge(n, 0)?;
                } else {
                    self.commit.force_charge(n);
                }
            }
            for (a, b, frame, copy) in Self::take(&mut pending, start, end) {
                if copy {
                    for (at, n) in pm.populated(a, b - a) {
                        pm.copy_within(frame + (at - a), at, n);
                    }
                }
            }
            return Ok(());
        }
        for (a, b, frame, copy) in Self::take(&mut pending, start, end) {
            if !copy {
                pending.insert(a, Pending { end: b, frame, copy });
                continue;
            }
            let mut at = a;
            for (d, n) in pm.populated(a, b - a) {
                pm.copy_within(frame + (d - a), d, n);
                if self.charges() {
                    self.commit.force_charge(n);
                    if d > at {
                        pending.insert(at, Pending { end: d, frame: frame + (at - a), copy: false });
                    }
                }
                at = d + n;
            }
            if self.charges() && b > at {
                pending.insert(at, Pending { end: b, frame: frame + (at - a), copy: false });
            }
        }
        Ok(())
    }

    /// The child unmaps [start, end): what is pending there is dropped,
    /// and charged now, as the VMAs' whole length is about to be
    /// uncharged (see [`AddressSpace::charge_by_link`]).
    fn forget(&self, start: usize, end: usize) {
        let mut pending = self.lock();
        if self.charges() {
            self.commit.force_charge(Self::pending_in(&pending, start, end));
        }
        Self::take(&mut pending, start, end);
    }

    /// Whether some of [start, end) is still to be copied from the parent.
    fn is_pending(&self, start: usize, end: usize) -> bool {
        let pending = self.lock();
        pending.range(Self::first_from(&pending, start)..end).any(|(_, r)| r.copy)
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

    /// At fork: the child's VMA at `s` (linked, pending whole) is copied
    /// on access from this space's pages, which stop being writable.
    pub(super) fn share_on_access(&mut self, s: usize) {
        let v = self.vmas.get_mut(&s).expect("a VMA being forked");
        v.cow = true;
        self.write_protected = true;
        let v = &self.vmas[&s];
        let (len, prot) = (v.end - s, host_prot(v.prot) & !PROT_WRITE);
        // Failing, the parent could write pages the child has not copied.
        self.phys.set_prot(s, len, prot).expect("write-protecting a forked parent's pages");
    }

    /// Copies to the children (in a parent) or from the parent (in a
    /// child) what is still pending of [start, end): before anything
    /// changes the pages or their protection there. Charged whatever the
    /// limit (see the module comment).
    pub(super) fn settle_copies(&mut self, start: usize, end: usize) {
        if let Some(link) = &self.cow_parent {
            let _ = link.fill(start, end, Side::Child { may_refuse: false });
        }
        self.cow_children.retain(|l| Arc::strong_count(l) > 1);
        for link in &self.cow_children {
            let _ = link.fill(start, end, Side::Parent);
        }
    }

    /// [`settle_copies`](Self::settle_copies) for what the child itself
    /// asks: ENOMEM (and nothing copied) when its copies do not fit.
    pub(super) fn try_settle_copies(&mut self, start: usize, end: usize) -> Result<(), Errno> {
        if let Some(link) = &self.cow_parent {
            link.fill(start, end, Side::Child { may_refuse: true })?;
        }
        self.settle_copies(start, end);
        Ok(())
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

    /// A child's copy-on-access VMA of `len` bytes: charged (its flag set,
    /// this space's count of its charges) but for what its link still
    /// has pending, which the link charges as it settles or forgets it.
    /// So the VMA is uncharged whole when it goes, as any other.
    pub(super) fn charge_by_link(&mut self, len: usize) {
        self.committed += len;
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
    /// False when the access is not allowed: a real fault; ENOMEM when a
    /// child's copy does not fit in `--mem`.
    pub fn resolve_copy_fault(&mut self, addr: usize, access: Access) -> Result<bool, Errno> {
        let Some((s, v)) = self.find(addr) else { return Ok(false) };
        let need = access.prot();
        if !v.cow || v.prot & need == 0 {
            return Ok(false);
        }
        let (end, prot) = (v.end, host_prot(v.prot));
        let base = addr & !(CHUNK - 1);
        let (cs, ce) = (base.max(s), (base + CHUNK).min(end));
        if self.own_host {
            self.try_settle_copies(cs, ce)?;
            self.host_ops.push(super::HostOp::Protect { addr: cs, len: ce - cs, prot });
            return Ok(true);
        }
        if self.unprotect_when_alone(addr, addr + 1) {
            return Ok(true);
        }
        let (cs, ce) = if self.cow_children.iter().any(|l| l.is_pending(s, end)) {
            self.settle_copies(cs, ce);
            (cs, ce)
        } else {
            // No child needs any of it: the whole VMA, in one call.
            self.vmas.get_mut(&s).unwrap().cow = false;
            (s, end)
        };
        Ok(self.phys.set_prot(cs, ce - cs, prot).is_ok())
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
