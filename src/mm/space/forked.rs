//! A forked child's address space: it runs in a host process of its own
//! (src/entry/fork.rs), so its addresses need not be the physical
//! addresses of its pages. Every VMA of such a space holds `frame`: the
//! physical page of its first page, its pages the run from there. nomu
//! reaches the pages there (uaccess translates every guest address, see
//! [`AddressSpace::translate`]); the child's host process maps them at the
//! VMA's address, from the changes queued here ([`HostOp`]) and carried out
//! by that process before it runs guest code again.
//!
//! fork copies: each of the parent's VMAs gets frames of its own, and the
//! parts of the parent's pages that hold data (holes are skipped: a page
//! never touched costs nothing) are copied into them through the writable
//! alias, at once for small VMAs, on access for larger ones (cow.rs). The
//! copy is charged to the commit account as it is made (cow.rs; whole at
//! fork under `--strict-fork`), so `--mem` refuses a fork whose copies
//! made at once do not fit (ENOMEM to the parent).

use super::cow::CowLink;
use super::{host_prot, AddressSpace, Placement, Vma, VmaKind, PROT_READ, PROT_WRITE};
use crate::abi::errno::Errno;
use crate::host::physmem::GuestRange;
use crate::mm::mapping::{Frames, OwnedFrames, PageSource};
use crate::mm::phys::Fresh;
use crate::mm::{page_up, PAGE_SIZE};
use std::sync::Arc;

/// The System V x86-64 ABI's red zone below the stack pointer.
const RED_ZONE: usize = 128;

/// The forking thread's stack, when it holds at most this much data, is
/// copied at fork rather than on access (cow.rs).
const EAGER_COPY_MAX: usize = 128 << 10;

/// A forked child's VMA's own run of physical pages (its copy, or new
/// pages it mapped). The address space frees them itself as the VMA goes
/// (deferred while a pin covers them, as for any page), so the handle
/// frees nothing. A System V segment's pages are shown the same way and
/// never freed by the address space.
struct ChildFrames {
    start: usize,
    len: usize,
}

impl PageSource for ChildFrames {
    fn frames(&self, offset: usize) -> (usize, usize) {
        (self.start + offset, self.len - offset)
    }

    fn len(&self) -> usize {
        self.len
    }

    fn copy_on_write(&self) -> bool {
        false
    }

    fn copied_for_child(&self) -> bool {
        true
    }
}

/// A MAP_SHARED mapping's pages after a fork: parent and child (and their
/// later forks) show the same pages, freed with the last handle.
struct ForkShared(Arc<OwnedFrames>);

impl PageSource for ForkShared {
    fn frames(&self, offset: usize) -> (usize, usize) {
        self.0.frames(offset)
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn copy_on_write(&self) -> bool {
        false
    }

    fn shared_at_fork(&self) -> bool {
        true
    }
}

fn child_frames(start: usize, len: usize) -> Option<Frames> {
    Some(Frames::new(Arc::new(ChildFrames { start, len }), 0))
}

/// Pages a forked child's space unmapped, to be freed (or their handles
/// dropped) once its host process has unmapped them as well.
#[derive(Default)]
#[must_use = "the pages are freed by AddressSpace::free_after_host_ops"]
pub struct HostFrees(Vec<(usize, usize, bool)>, Vec<Frames>);

impl HostFrees {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty() && self.1.is_empty()
    }
}

/// A change to a forked child's host memory map, queued by its address
/// space and carried out by its host process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostOp {
    /// Maps the physical pages from `frame` at `addr`.
    Map {
        addr: usize,
        len: usize,
        prot: i32,
        frame: usize,
    },
    Unmap {
        addr: usize,
        len: usize,
    },
    Protect {
        addr: usize,
        len: usize,
        prot: i32,
    },
}

/// A secret VMA's part of a guest range: see
/// [`AddressSpace::unmapped_at`].
pub struct Unmapped {
    pub source: Arc<dyn PageSource>,
    pub runs: Vec<(usize, usize)>,
    pub len: usize,
}

impl AddressSpace {
    /// Whether this is a forked child's address space (its own host process).
    pub fn own_host(&self) -> bool {
        self.own_host
    }

    /// Takes the changes to carry out in the host process, and the pages
    /// to free once they are made ([`free_after_host_ops`](Self::free_after_host_ops)).
    pub fn take_host_ops(&mut self) -> (Vec<HostOp>, HostFrees) {
        let frees = HostFrees(std::mem::take(&mut self.host_frees), std::mem::take(&mut self.host_drops));
        (std::mem::take(&mut self.host_ops), frees)
    }

    /// Frees pages whose unmapping the host process has made.
    pub fn free_after_host_ops(&mut self, frees: HostFrees) {
        for (f, len, charged) in frees.0 {
            if charged {
                self.free_pages(f, f + len);
            } else {
                self.phys.free_untouched(f, len);
            }
        }
    }

    /// Whether [addr, addr+len) (len > 0) lies in one VMA the guest may
    /// access that way and nomu may use at its own address with nothing to
    /// do first: no copy on access pending or write protection to lift,
    /// no translation (a forked child's, a MAP_SHARED mapping shared with
    /// one), no secret pages. The common case of every checked copy and
    /// host call, answered with one lookup instead of four (zpoline fstat
    /// 736 -> 673 ns, AMD EPYC VM).
    pub fn direct(&self, addr: usize, len: usize, write: bool) -> bool {
        if self.own_host || self.cow_parent.is_some() || (write && self.write_protected) {
            return false;
        }
        let need = if write { PROT_WRITE } else { PROT_READ };
        self.find(addr).is_some_and(|(_, v)| {
            v.prot & need != 0
                && addr.checked_add(len).is_some_and(|end| end <= v.end)
                && v.frames.as_ref().is_none_or(|f| !f.source.shared_at_fork() && !f.source.unmapped())
        })
    }

    /// The physical address of a forked child's byte of code at `addr`
    /// when it lies in a copy its fork made for it alone, executable and
    /// not writable (code an entry path may patch for this process only).
    pub fn own_code_copy(&self, addr: usize) -> Option<usize> {
        let (s, v) = self.find(addr)?;
        let f = v.frames.as_ref()?;
        let code = v.prot & libc::PROT_EXEC != 0 && v.prot & libc::PROT_WRITE == 0;
        let off = f.offset + (addr - s);
        let page = off & !(PAGE_SIZE - 1);
        (self.own_host && code && f.source.copied_for_child()).then(|| f.source.frames(page).0 + (off - page))
    }

    /// The physical run behind [addr, addr+len): the frame of `addr` and
    /// how many bytes from there are contiguous (at most `len`, at most to
    /// the end of the VMA), or None when `addr` is in no VMA.
    ///
    /// In a normal address space an address is its page, but for a VMA
    /// that shows frames (mm::mapping): nomu's direct map shows them at
    /// the address too, but a host futex must name the page one way for
    /// every process that shows it (a MAP_SHARED mapping shared with a
    /// forked child: private host futexes key on the address).
    pub fn translate(&self, addr: usize, len: usize) -> Option<(usize, usize)> {
        let found = self.find(addr);
        // In nomu's own process the guest address shows the right page
        // (page-cache and secret frames too: a secret frame's own address
        // is unmapped); only a MAP_SHARED mapping shared with a forked
        // child is named by its frames, so a futex there is one for both.
        let shared_with_child = |v: &Vma| v.frames.as_ref().is_some_and(|f| f.source.shared_at_fork());
        if len == 0 || (!self.own_host && found.is_none_or(|(_, v)| !shared_with_child(v))) {
            return Some((addr, len));
        }
        let (s, v) = found?;
        let f = v.frames.as_ref().expect("a frames VMA");
        let (frame, run) = f.runs(addr - s, len.min(v.end - addr))[0];
        Some((frame, run))
    }

    /// The secret VMA at `addr`, if any: its pages are in the mermap's
    /// reach only (mm::uaccess). The source, kept alive while a host call
    /// uses its pages; the physical runs behind the pages of [addr,
    /// addr+n), from `addr`'s page; and `n`: `len` cut at the VMA's end.
    pub fn unmapped_at(&self, addr: usize, len: usize) -> Option<Unmapped> {
        if !self.phys.secret_seen() {
            return None;
        }
        let (s, v) = self.find(addr)?;
        let f = v.frames.as_ref().filter(|f| f.source.unmapped())?;
        let n = len.min(v.end - addr);
        let first = (addr - s) & !(PAGE_SIZE - 1);
        let end = (addr - s + n).next_multiple_of(PAGE_SIZE);
        Some(Unmapped { source: f.source.clone(), runs: f.runs(first, end - first), len: n })
    }

    /// How much of [addr, addr+len) comes before a secret VMA (`len` when
    /// none is in it): a range handed to a host call at its own address
    /// stops there.
    pub fn before_unmapped(&self, addr: usize, len: usize) -> usize {
        if !self.phys.secret_seen() || len == 0 {
            return len;
        }
        let is_secret = |v: &Vma| v.frames.as_ref().is_some_and(|f| f.source.unmapped());
        if self.find(addr).is_some_and(|(_, v)| is_secret(v)) {
            return 0;
        }
        let end = addr.saturating_add(len);
        self.vmas.range(addr + 1..end).find(|(_, v)| is_secret(v)).map_or(len, |(&s, _)| s - addr)
    }

    /// A copy of this address space for a forked child: the same VMAs,
    /// each with frames of its own holding a copy of its data. `restore`
    /// is told each copy of code (guest address, frame, length, false) so
    /// that an entry path may put back the original bytes of syscall sites
    /// it rewrote; in a forked parent, (its frame, the copy's, length,
    /// true).
    /// ENOMEM when the copies do not fit in `--mem` or physical memory.
    /// `stack` is the forking thread's stack pointer: both sides write
    /// there at once, so the chunk holding it (and its red zone) is copied
    /// now even where the rest is copied on access. `share_code`: whether
    /// the page cache's code may be shown to the child as it is (not where
    /// the entry path patches it in place, see
    /// `EntryPath::patches_shared_code`).
    pub fn fork_copy(
        &mut self,
        stack: usize,
        share_code: bool,
        restore: &dyn Fn(usize, usize, usize, bool),
    ) -> Result<AddressSpace, Errno> {
        // MAP_SHARED mappings stay shared: their pages become one source
        // that this space and the child both show.
        let shared: Vec<usize> = self
            .vmas
            .iter()
            .filter(|(_, v)| {
                v.shared
                    && v.shm.is_none()
                    && !v.frames.as_ref().is_some_and(|f| f.source.shared_at_fork() || f.source.unmapped())
            })
            .map(|(&s, _)| s)
            .collect();
        for s in shared {
            self.share_for_fork(s)?;
        }
        // A child still copying from its own parent copies the rest first:
        // its frames are what its child copies.
        if self.cow_parent.is_some() {
            self.try_settle_copies(0, usize::MAX)?;
        }
        let mut child = AddressSpace::new(self.phys);
        child.own_host = true;
        let link = Arc::new(CowLink::new(self.phys.commit()));
        let mut on_access = Vec::new();
        let pm = crate::host::physmem::PhysMem::get();
        // Nothing of the parent's heap reservation beyond the break comes
        // along: the child grows its heap with frames of its own.
        child.brk_start = self.brk_start;
        child.brk = self.brk;
        child.brk_owned_end = if self.brk_start == 0 { 0 } else { page_up(self.brk).unwrap_or(self.brk) };
        for (&s, v) in &self.vmas {
            let len = v.end - s;
            let mut copy = v.clone();
            // A secret mapping is shared as it is: the same pages, which
            // never leave UNMAPPED pageblocks (a copy through the direct
            // map would fault, and put secret data where it reaches).
            if let Some(f) = v.frames.as_ref().filter(|f| f.source.shared_at_fork() || f.source.unmapped()) {
                copy.charged = false;
                let mut at = s;
                for (frame, n) in f.runs(0, len) {
                    child.host_ops.push(HostOp::Map { addr: at, len: n, prot: host_prot(v.prot), frame });
                    at += n;
                }
                child.vmas.insert(s, copy);
                continue;
            }
            if let Some(f) = v.frames.as_ref().filter(|f| Self::shares_cached(f, v, share_code)) {
                // The page cache's read-only pages are shown to the child
                // as they are: no copy (a program's text and read-only
                // data, a read-only file mapping). nomu's view of them
                // refuses writes, as the child's mapping does.
                copy.charged = false;
                let mut at = s;
                for (frame, n) in f.runs(0, len) {
                    let _ = child.phys.set_prot(frame, n, PROT_READ);
                    child.host_ops.push(HostOp::Map { addr: at, len: n, prot: host_prot(v.prot), frame });
                    at += n;
                }
                child.vmas.insert(s, copy);
                continue;
            }
            if v.shm.is_some() {
                // A System V segment stays shared: the same pages.
                copy.frames = child_frames(v.frame_of(s, s), len);
                child.host_ops.push(HostOp::Map { addr: s, len, prot: host_prot(v.prot), frame: v.frame_of(s, s) });
                child.vmas.insert(s, copy);
                continue;
            }
            // Where the source's data lies (a copy is made of that only).
            let through_map = v.frames.is_some() && !self.own_host;
            let src = if through_map { s } else { v.frame_of(s, s) };
            let mut data = None;
            // A mapping copied on access, but the forking thread's stack
            // when it holds little data: copied now, it costs no write
            // protection and no faults on either side. Only the stack is
            // asked: the host finds the end of a run of data a page at a
            // time (a 64 MiB mapping: most of a fork).
            let on_access_ok = self.copies_on_access(s, v);
            let copy_later = on_access_ok
                && (!(s..v.end).contains(&stack) || {
                    let runs = pm.populated(src, len);
                    let held: usize = runs.iter().map(|&(_, n)| n).sum();
                    data = Some(runs);
                    held > EAGER_COPY_MAX
                });
            if copy_later {
                // Copied on access (cow.rs): zero for now, shown to the
                // child with no access until it has copied them, and
                // charged as it does (whole, now, under `--strict-fork`).
                let frame = child.phys.alloc(len, PAGE_SIZE, Fresh::Sparse)?;
                if child.phys.commit().strict_fork() {
                    child.charge(len, 0).inspect_err(|_| child.phys.free(frame, len))?;
                } else {
                    child.charge_by_link(len);
                }
                // Linked at once: a failed fork's child settles its charge.
                link.add(s, v.end, frame, true);
                child.cow_parent = Some(link.clone());
                copy.frames = child_frames(frame, len);
                copy.cow = true;
                copy.charged = true;
                let _ = child.phys.set_prot(frame, len, host_prot(v.prot));
                child.host_ops.push(HostOp::Map { addr: s, len, prot: libc::PROT_NONE, frame });
                child.vmas.insert(s, copy);
                on_access.push(s);
                continue;
            }
            if on_access_ok && !child.phys.commit().strict_fork() {
                // The forking thread's stack, holding little: copied now,
                // whole (a fault for each page the child then touches
                // below what it holds cost more than the copy), and
                // charged for its extent, from its lowest page that holds
                // data up, as Linux's stack VMA would be. What lies below
                // stays pending for the charge (cow.rs): a child's call
                // or mprotect that reaches there charges it, but a stack
                // growing there is not seen (see the README).
                let runs = data.take().unwrap_or_else(|| pm.populated(src, len));
                let lowest = runs.first().map_or(len, |&(at, _)| at - src);
                let filled: Vec<(usize, usize)> = runs.iter().map(|&(at, n)| (at - src, n)).collect();
                let frame = child.phys.alloc_for_copy(len, host_prot(v.prot), &filled)?;
                link.charge_copied(len - lowest).inspect_err(|_| child.phys.free(frame, len))?;
                child.charge_by_link(len);
                child.cow_parent = Some(link.clone());
                for &(off, n) in &filled {
                    pm.copy_within(frame + off, src + off, n);
                }
                if lowest > 0 {
                    link.add(s, s + lowest, frame, false);
                }
                child.host_ops.push(HostOp::Map { addr: s, len, prot: host_prot(v.prot), frame });
                copy.frames = child_frames(frame, len);
                copy.cow = true;
                copy.charged = true;
                child.vmas.insert(s, copy);
                continue;
            }
            // What may hold data is copied and charged (a frames VMA of a
            // normal space, mm::mapping, is not charged there).
            let holds = v.charged || (v.frames.is_some() && !self.own_host);
            copy.charged = holds;
            if holds {
                child.charge(len, 0)?;
            }
            // nomu's own view of the frames keeps the guest's protection,
            // so its checked copies fault where the guest's would.
            let frame = if holds {
                // Frames the direct map shows (mm::mapping) are copied
                // through it, whole; else only what holds data: holes
                // stay holes. The copy's pages are zeroed only elsewhere.
                let runs = match data {
                    _ if through_map => vec![(src, len)],
                    Some(runs) => runs,
                    None => pm.populated(src, len),
                };
                let filled: Vec<(usize, usize)> = runs.iter().map(|&(at, n)| (at - src, n)).collect();
                let frame =
                    child.phys.alloc_for_copy(len, host_prot(v.prot), &filled).inspect_err(|_| child.uncharge(len))?;
                for (off, n) in filled {
                    pm.copy_within(frame + off, src + off, n);
                }
                // Only what was ever executable can hold sites. A forked
                // parent's code has its sites' bytes already: what the path
                // noted about them is carried over.
                if v.was_executable {
                    restore(if self.own_host { src } else { s }, frame, len, self.own_host);
                }
                frame
            } else {
                let frame = child.phys.alloc(len, PAGE_SIZE, Fresh::Reserved)?;
                let _ = child.phys.set_prot(frame, len, host_prot(v.prot));
                frame
            };
            copy.frames = child_frames(frame, len);
            child.host_ops.push(HostOp::Map { addr: s, len, prot: host_prot(v.prot), frame });
            child.vmas.insert(s, copy);
        }
        // Locks are not inherited (Linux's dup_mmap clears VM_LOCKED).
        for v in child.vmas.values_mut() {
            v.locked = false;
        }
        if !on_access.is_empty() {
            for s in on_access {
                self.share_on_access(s);
            }
            self.cow_children.push(link.clone());
            child.cow_parent = Some(link);
            for at in [stack.saturating_sub(RED_ZONE), stack] {
                if let Some((cs, ce, prot)) = self.resolve_copy_now(at) {
                    child.host_ops.push(HostOp::Protect { addr: cs, len: ce - cs, prot });
                }
            }
        }
        Ok(child)
    }

    /// Whether a fork shows the frames `f` of VMA `v` to the child as they
    /// are: the page cache's pages (a copy-on-write source: nobody writes
    /// them), readable and not writable, and code only if `share_code`.
    fn shares_cached(f: &Frames, v: &Vma, share_code: bool) -> bool {
        f.source.copy_on_write()
            && v.prot & PROT_READ != 0
            && v.prot & PROT_WRITE == 0
            && (share_code || f.source.trampolines() || (!v.was_executable && !f.source.executable()))
    }

    /// Before a forked child's mprotect of [start, end): every VMA there
    /// that shows the page cache's pages (see fork_copy) gets a private,
    /// charged copy of them in frames of its own, whole, as the first
    /// write to such a page would on Linux: nomu's view of the cache's
    /// pages, which its checked copies go through, is every child's and
    /// takes no change. ENOMEM when a copy does not fit (those made stay:
    /// they show the same bytes).
    pub(super) fn privatize_cached(&mut self, start: usize, end: usize) -> Result<(), Errno> {
        let cached: Vec<usize> = self
            .vmas
            .range(..end)
            .rev()
            .take_while(|(_, v)| v.end > start)
            .filter(|(_, v)| v.frames.as_ref().is_some_and(|f| f.source.copy_on_write()))
            .map(|(&s, _)| s)
            .collect();
        let pm = crate::host::physmem::PhysMem::get();
        for s in cached {
            let v = &self.vmas[&s];
            let (len, prot) = (v.end - s, host_prot(v.prot));
            let runs = v.frames.as_ref().map_or_else(Vec::new, |f| f.runs(0, len));
            self.charge(len, 0)?;
            let frame = self.phys.alloc_for_copy(len, prot, &[(0, len)]).inspect_err(|_| self.uncharge(len))?;
            let mut at = frame;
            for (src, n) in runs {
                pm.copy_within(at, src, n);
                at += n;
            }
            self.host_ops.push(HostOp::Map { addr: s, len, prot, frame });
            let v = self.vmas.get_mut(&s).unwrap();
            v.frames = child_frames(frame, len);
            v.charged = true;
        }
        Ok(())
    }

    /// Makes the MAP_SHARED VMA at `s` show a [`ForkShared`] copy of its
    /// pages (its own are freed), for a fork to share.
    fn share_for_fork(&mut self, s: usize) -> Result<(), Errno> {
        let v = &self.vmas[&s];
        let (len, prot, charged) = (v.end - s, v.prot, v.charged);
        let pages = OwnedFrames::new(self.phys, len, false)?;
        let pm = crate::host::physmem::PhysMem::get();
        let frames = Frames::new(Arc::new(ForkShared(pages.clone())), 0);
        if self.own_host {
            let old = v.frame_of(s, s);
            pm.copy_within(pages.start(), old, len);
            if charged {
                self.uncharge(len);
            }
            // The host process maps the new pages over them first.
            self.host_frees.push((old, len, charged));
            let _ = self.phys.set_prot(pages.start(), len, host_prot(prot));
            self.host_ops.push(HostOp::Map { addr: s, len, prot: host_prot(prot), frame: pages.start() });
            let v = self.vmas.get_mut(&s).unwrap();
            v.frames = Some(frames);
            v.charged = false;
            Ok(())
        } else {
            // Through the direct map (the VMA may show frames already).
            pm.copy_within(pages.start(), s, len);
            self.replace_with_frames(s, len, frames)
        }
    }

    /// Takes the free pages of [addr, addr+len) until
    /// [`become_own_host`](Self::become_own_host), so that nothing the
    /// loader maps next (the interpreter, the stack) lands in the range a
    /// moved image will show.
    pub fn hold_range(&mut self, addr: usize, len: usize) {
        for p in (addr..addr + len).step_by(PAGE_SIZE) {
            if self.phys.is_free(p, PAGE_SIZE) && self.phys.alloc_at(p, PAGE_SIZE, Fresh::Reserved).is_ok() {
                self.held.push(p);
            }
        }
    }

    /// The image just loaded at [from, from+len) is shown at `to` instead
    /// (a fixed-address program whose range is taken): its VMAs move there
    /// with their pages as frames, and so does the heap after it. The
    /// space is made its own host process's by
    /// [`become_own_host`](Self::become_own_host).
    pub fn move_image(&mut self, from: usize, len: usize, to: usize) {
        let keys: Vec<usize> = self.vmas.range(from..from + len).map(|(&s, _)| s).collect();
        for s in keys {
            let v = self.vmas.remove(&s).unwrap();
            let n = v.end - s;
            let at = to + (s - from);
            self.vmas.insert(at, Vma { end: at + n, frames: child_frames(s, n), ..v });
        }
        if self.brk_start == from + len {
            let brk = to + len;
            let owned = self.brk_owned_end - self.brk_start;
            // Any pages owned for the heap past the image are not moved.
            if owned > 0 {
                self.phys.free(self.brk_start, owned);
            }
            (self.brk_start, self.brk, self.brk_owned_end, self.brk_stale) = (brk, brk, brk, (0, 0));
        }
        self.moved_image = true;
    }

    /// Whether its memory is (or will be, once loaded) shown in a host
    /// process of its own: a forked child's, or a moved image's.
    pub fn runs_own_host(&self) -> bool {
        self.own_host || self.moved_image
    }

    /// Whether [`move_image`](Self::move_image) moved an image here.
    pub fn has_moved_image(&self) -> bool {
        self.moved_image
    }

    /// After loading: a space with a moved image becomes its own host
    /// process's (as a forked child's): every VMA shows its pages as
    /// frames, the held pages go back.
    pub fn become_own_host(&mut self) {
        if !self.moved_image || self.own_host {
            return;
        }
        for p in std::mem::take(&mut self.held) {
            self.phys.free_untouched(p, PAGE_SIZE);
        }
        for (&s, v) in self.vmas.iter_mut() {
            let len = v.end - s;
            if v.frames.is_none() {
                v.frames = child_frames(s, len);
            }
            let mut at = s;
            for (frame, n) in v.frames.as_ref().expect("given above").runs(0, len) {
                self.host_ops.push(HostOp::Map { addr: at, len: n, prot: host_prot(v.prot), frame });
                at += n;
            }
        }
        self.own_host = true;
    }

    /// The lowest free range of `len` bytes, aligned, inside physical
    /// memory's window (where the child's host process has nothing else).
    fn forked_gap(&self, len: usize, align: usize) -> Result<usize, Errno> {
        let align = align.max(PAGE_SIZE);
        let up = |a: usize| a.div_ceil(align) * align;
        let pm = crate::host::physmem::PhysMem::get();
        let (lo, hi) = (pm.base(), pm.end());
        let mut at = up(lo);
        // A moved image may lie above the window: not in the way.
        for (&s, v) in self.vmas.range(lo..hi) {
            if at + len <= s {
                break;
            }
            at = at.max(up(v.end));
        }
        if at.checked_add(len).is_some_and(|e| e <= hi) {
            Ok(at)
        } else {
            Err(Errno::ENOMEM)
        }
    }

    pub(super) fn forked_map(
        &mut self,
        place: Placement,
        len: usize,
        mut vma: Vma,
        fill: impl FnOnce(GuestRange) -> Result<(), Errno>,
        freeing: usize,
    ) -> Result<usize, Errno> {
        vma.charged = vma.needs_charge();
        let addr = match place {
            Placement::Fixed(a) => {
                if !self.phys.contains(a, len) {
                    return Err(Errno::ENOMEM);
                }
                a
            }
            Placement::Anywhere { align } => self.forked_gap(len, align)?,
            Placement::Allocated(_) => unreachable!("the loader maps only fresh address spaces"),
        };
        if vma.charged {
            self.charge(len, freeing)?;
        }
        let fresh = if vma.charged { Fresh::Used } else { Fresh::Reserved };
        let frame = match self.phys.alloc(len, PAGE_SIZE, fresh) {
            Ok(f) => f,
            Err(e) => {
                if vma.charged {
                    self.uncharge(len);
                }
                return Err(e);
            }
        };
        let range = GuestRange::new(frame, len).expect("allocated pages lie in physical memory");
        let done = fill(range).and_then(|()| self.phys.set_prot(frame, len, host_prot(vma.prot)));
        if let Err(e) = done {
            self.phys.free(frame, len);
            if vma.charged {
                self.uncharge(len);
            }
            return Err(e);
        }
        if let Placement::Fixed(a) = place {
            self.forked_unmap(a, a + len);
        }
        self.host_ops.push(HostOp::Map { addr, len, prot: host_prot(vma.prot), frame });
        self.vmas.insert(addr, Vma { end: addr + len, frames: child_frames(frame, len), ..vma });
        Ok(addr)
    }

    /// [`map_frames`](AddressSpace::map_frames) in a forked child: its
    /// host process shows the frames at the VMA's address.
    pub(super) fn forked_map_frames(&mut self, place: Placement, len: usize, vma: Vma) -> Result<usize, Errno> {
        let frames = vma.frames.clone().expect("a frames VMA");
        let addr = match place {
            Placement::Fixed(a) if self.phys.contains(a, len) => a,
            Placement::Fixed(_) => return Err(Errno::ENOMEM),
            Placement::Anywhere { align } => self.forked_gap(len, align)?,
            Placement::Allocated(_) => unreachable!("the loader maps only fresh address spaces"),
        };
        if let Placement::Fixed(a) = place {
            self.forked_unmap(a, a + len);
        }
        let mut at = addr;
        for (frame, n) in frames.runs(0, len) {
            self.host_ops.push(HostOp::Map { addr: at, len: n, prot: host_prot(vma.prot), frame });
            at += n;
        }
        self.vmas.insert(addr, Vma { end: addr + len, charged: false, ..vma });
        Ok(addr)
    }

    pub(super) fn forked_unmap(&mut self, start: usize, end: usize) {
        if start >= end {
            return;
        }
        self.forget_copies(start, end);
        self.split_at(start);
        self.split_at(end);
        let keys: Vec<usize> = self.vmas.range(start..end).map(|(&s, _)| s).collect();
        for s in keys {
            let v = self.vmas.remove(&s).unwrap();
            Self::write_back_pages(s, &v);
            let len = v.end - s;
            self.host_ops.push(HostOp::Unmap { addr: s, len });
            if v.charged {
                self.uncharge(len);
            }
            if v.shm.is_some() || !Self::pages_own_in(true, &v) {
                // Pages the segment, the last handle, or the page cache
                // frees: a handle is dropped once the host process no
                // longer shows them (another thread may run meanwhile).
                self.host_drops.extend(v.frames);
                continue;
            }
            // Freed once the host process has unmapped them.
            self.host_frees.push((v.frame_of(s, s), len, v.charged));
        }
    }

    /// The VMAs of [start, end) have their new protection: the frames and
    /// the host process follow.
    pub(super) fn forked_protect(&mut self, start: usize, end: usize, prot: i32) -> Result<(), Errno> {
        // A VMA's frames need not be one run (a shared file's pages).
        let runs: Vec<(usize, usize)> = self
            .vmas
            .range(start..end)
            .flat_map(|(&s, v)| match &v.frames {
                Some(f) => f.runs(0, v.end - s),
                None => vec![(s, v.end - s)],
            })
            .collect();
        for (f, n) in runs {
            self.phys.set_prot(f, n, host_prot(prot))?;
        }
        self.host_ops.push(HostOp::Protect { addr: start, len: end - start, prot: host_prot(prot) });
        Ok(())
    }

    /// mremap growth: always a move to new frames (the old ones are
    /// copied), which Linux allows whenever MREMAP_MAYMOVE is given.
    pub(super) fn forked_grow(
        &mut self,
        old: usize,
        old_len: usize,
        new_len: usize,
        vma: Vma,
        start: usize,
        may_move: bool,
    ) -> Result<usize, Errno> {
        if !may_move {
            return Err(Errno::ENOMEM);
        }
        let mut moved = vma.clone();
        for b in [moved.backing.as_mut(), moved.image_file.as_mut()].into_iter().flatten() {
            b.offset += (old - start) as u64;
        }
        moved.frames = None;
        // A copy of its own, settled (remap did): nothing left to copy.
        moved.cow = false;
        let src = vma.frame_of(start, old);
        let phys = self.phys;
        let freeing = if vma.charged { old_len } else { 0 };
        let new = self.forked_map(
            Placement::Anywhere { align: PAGE_SIZE },
            new_len,
            moved,
            |dst| {
                phys.copy_within(dst.addr(), src, old_len);
                Ok(())
            },
            freeing,
        )?;
        self.forked_unmap(old, old + old_len);
        Ok(new)
    }

    /// brk: the heap grows by a VMA with frames of its own, and shrinks
    /// as an unmap.
    pub(super) fn forked_set_brk(&mut self, new: usize) -> usize {
        let Some(new_end) = page_up(new) else { return self.brk };
        let old_end = page_up(self.brk).unwrap();
        if new_end > old_end {
            if self.vmas.range(old_end..new_end).next().is_some() {
                return self.brk;
            }
            let heap = Vma::new(new_end, PROT_READ | PROT_WRITE, VmaKind::Heap);
            if self.forked_map(Placement::Fixed(old_end), new_end - old_end, heap, |_| Ok(()), 0).is_err() {
                return self.brk;
            }
        } else if new_end < old_end {
            self.forked_unmap(new_end, old_end);
        }
        self.brk_owned_end = new_end;
        self.brk = new;
        self.brk
    }

    pub(super) fn forked_release_all(&mut self) {
        self.drop_copies();
        let end = self.vmas.iter().next_back().map_or(0, |(_, v)| v.end);
        self.forked_unmap(0, end);
        self.host_ops.clear();
        // Its host process is gone: nothing shows these pages any more.
        let frees = HostFrees(std::mem::take(&mut self.host_frees), std::mem::take(&mut self.host_drops));
        self.free_after_host_ops(frees);
        for (s, e) in std::mem::take(&mut self.deferred) {
            self.phys.free(s, e - s);
        }
        self.brk_start = 0;
        self.brk = 0;
        self.brk_owned_end = 0;
        self.brk_stale = (0, 0);
    }
}
