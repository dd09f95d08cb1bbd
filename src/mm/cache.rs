//! The page cache: one physical copy of each file page that guests execute
//! or map read-only and private.
//!
//! exec's text segments (src/loader/elf.rs) and `mmap(PROT_READ[|PROT_EXEC],
//! MAP_PRIVATE)` of a regular file map pages of this cache (mm::mapping's
//! frames) instead of copying the file into the process's own pages;
//! writable segments and writable mappings still get private copies (and
//! mprotect making a cache-backed mapping writable copies it first).
//!
//! A cached run ([`CachedPages`]) is the file's bytes from a page-aligned
//! offset, zero past the file's end, in one contiguous run of physical
//! pages, so every mapping of it is one host mmap. Files are identified as
//! loader::sites identifies them: (device, inode, size, mtime, ctime), read
//! by fstat at each open/exec, so a file changed through nomu or on the
//! host has a new identity and is read again; the old identity's unused
//! runs are dropped then. Linux shares a private read-only mapping's pages
//! with the page cache, so a mapping may or may not see a later change of
//! the file; nomu's never does (a new identity is new pages).
//!
//! Executable runs and data runs are kept apart: zpoline rewrites a
//! `syscall` in place in the page it runs from, once per cached page, and
//! the rewrite is kept with the page (and its site marks with the page's
//! physical address, see entry/zpoline.rs), which a data mapping of the
//! same file must not see. A data run made executable (mprotect) gets a
//! private copy first ([`PageSource::executable`]). The rewrite entry path
//! patches code with jumps to trampolines at a fixed distance from the
//! code, which a page shown at several addresses holds only if its
//! trampolines are shown at that distance everywhere
//! (`EntryPath::shares_code`): an exec'd position-independent image's code
//! is cached in a run with an area for them before it
//! ([`PageCache::code_with_trampolines`], which the loader shows before
//! the image); elsewhere that path shares only the pages of code in which
//! no `syscall` instruction's bytes appear at all (busybox's 222 pages of
//! text hold syscalls in 23), and copies the rest, where its sites are
//! patched as before ([`PageCache::code_without_syscalls`]).
//!
//! Accounting: the cache's pages are charged to the commit account (they
//! are host memory guests caused), but to no process: a mapping of them is
//! not charged. A charge that would fail first reclaims the unused runs
//! (those no mapping holds: the cache's reference is the only one), so a
//! guest never gets ENOMEM while unused cache pages are kept;
//! `/proc/sys/vm/drop_caches` reclaims them too. `/proc/meminfo` shows the
//! cache's size as `Cached:`.

use super::mapping::{Frames, PageSource};
use super::phys::{Fresh, PhysicalMemory};
use super::PAGE_SIZE;
use crate::abi::errno::Errno;
use crate::fs::file::{FileIdentity, OpenFile};
use crate::host::physmem::GuestRange;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// A run of a file's pages in physical memory.
pub struct CachedPages {
    phys: &'static PhysicalMemory,
    /// Where the file's bytes start.
    start: usize,
    len: usize,
    /// Physical pages of the run before its file bytes: a code run's
    /// trampoline area on the rewrite path (see
    /// [`PageCache::code_with_trampolines`]); 0 for the others.
    prefix: usize,
    /// The file offset of the first byte.
    offset: u64,
    executable: bool,
    total: Arc<AtomicUsize>,
    /// Which pages hold a `syscall`'s bytes (an executable run's, worked
    /// out at the first question: see [`PageCache::code_without_syscalls`]).
    syscall_pages: OnceLock<Vec<bool>>,
}

impl PageSource for CachedPages {
    fn frames(&self, offset: usize) -> (usize, usize) {
        assert!(offset < self.prefix + self.len);
        (self.start - self.prefix + offset, self.prefix + self.len - offset)
    }

    fn len(&self) -> usize {
        self.prefix + self.len
    }

    fn copy_on_write(&self) -> bool {
        true
    }

    fn executable(&self) -> bool {
        self.executable
    }
}

/// The trampoline area of a code run (its prefix), as a mapping of its
/// own shows it: a forked child, whose code is a copy with the original
/// bytes, is shown it as it is (nothing there jumps to it).
pub struct TrampolineArea {
    run: Arc<CachedPages>,
    /// Bytes of the prefix the area is (the rest lies between it and the code).
    len: usize,
}

impl PageSource for TrampolineArea {
    fn frames(&self, offset: usize) -> (usize, usize) {
        assert!(offset < self.len);
        (self.run.start - self.run.prefix + offset, self.len - offset)
    }

    fn len(&self) -> usize {
        self.len
    }

    fn copy_on_write(&self) -> bool {
        true
    }

    fn trampolines(&self) -> bool {
        true
    }
}

impl Drop for CachedPages {
    fn drop(&mut self) {
        self.phys.free_frames(self.start - self.prefix, self.prefix + self.len);
        self.phys.commit().uncharge(self.len);
        self.total.fetch_sub(self.len, Ordering::Relaxed);
    }
}

/// The shortest piece of code worth showing from the cache on the rewrite
/// path (see [`PageCache::code_without_syscalls`]): shorter ones are
/// copied, which costs less than a VMA and a host mapping of their own.
const MIN_SHARED_CODE: usize = 4 * PAGE_SIZE;

/// What a run is for: data, code, or code with a trampoline area (the
/// rewrite path's, see [`PageCache::code_with_trampolines`]), which is
/// never shown without it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Kind {
    Data,
    Code,
    Trampolined,
}

impl Kind {
    fn of(executable: bool) -> Kind {
        if executable {
            Kind::Code
        } else {
            Kind::Data
        }
    }
}

/// Runs are looked up by file and kind.
type Key = (FileIdentity, Kind);

pub struct PageCache {
    phys: &'static PhysicalMemory,
    files: crate::sync::OrderedMutex<HashMap<Key, Vec<Arc<CachedPages>>>, { crate::sync::CACHE }>,
    /// Bytes of physical memory the cache holds (`Cached:`).
    total: Arc<AtomicUsize>,
    /// Code in which [`code_without_syscalls`](Self::code_without_syscalls)
    /// found nothing to share: not kept in the cache, nor read again.
    unshareable: std::sync::Mutex<std::collections::HashSet<(FileIdentity, u64, usize)>>,
}

impl PageCache {
    pub fn new(phys: &'static PhysicalMemory) -> PageCache {
        PageCache {
            phys,
            files: crate::sync::OrderedMutex::new(HashMap::new()),
            total: Arc::default(),
            unshareable: Default::default(),
        }
    }

    /// Bytes the cache holds.
    pub fn bytes(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// Bytes of runs no mapping holds (reclaimable).
    pub fn unused_bytes(&self) -> usize {
        let files = self.files.lock().unwrap();
        files.values().flatten().filter(|r| Arc::strong_count(r) == 1).map(|r| r.len).sum()
    }

    /// Frames showing `len` bytes (a page multiple) of `file` (whose
    /// identity is `id`) from file offset `offset` (page-aligned), for an
    /// executable mapping or a data one: a run already cached that holds
    /// them, or a new one read now.
    pub fn get(
        &self,
        file: &OpenFile,
        id: FileIdentity,
        executable: bool,
        offset: u64,
        len: usize,
    ) -> Result<Frames, Errno> {
        let (run, delta) = self.get_run(file, id, executable, offset, len)?;
        Ok(Frames::new(run, delta))
    }

    /// For the rewrite entry path, whose patches jump to trampolines at a
    /// fixed distance from the code: `len` bytes of `file`'s code from
    /// `offset` (page-aligned) in a run whose `prefix` bytes before them
    /// (physical pages of the same run) hold the trampolines of the sites
    /// patched in it. Every process shows the code and the first
    /// `area` bytes of the prefix at the same distance from each other as
    /// they are here (the loader leaves that room before the image), so a
    /// patch made in the shared page is right in all of them. Returns the
    /// code's frames, the area's, the run's physical address (where the
    /// prefix starts), and whether the run was cached before (its sites
    /// were patched where they were first used).
    pub fn code_with_trampolines(
        &self,
        file: &OpenFile,
        id: FileIdentity,
        offset: u64,
        len: usize,
        prefix: usize,
        area: usize,
    ) -> Result<(Frames, Frames, usize, bool), Errno> {
        debug_assert!(area <= prefix && prefix.is_multiple_of(PAGE_SIZE));
        let same = |r: &Arc<CachedPages>| r.offset == offset && r.len == len && r.prefix == prefix;
        let (run, cached_before) =
            self.find_or_read((id, Kind::Trampolined), same, || self.read_run(file, id, true, offset, len, prefix))?;
        let base = run.start - run.prefix;
        let area = Frames::new(Arc::new(TrampolineArea { run: run.clone(), len: area }), 0);
        Ok((Frames::new(run, prefix), area, base, cached_before))
    }

    /// For an entry path that cannot share patched code between addresses
    /// (the rewrite path: a patch is a jump to a trampoline at a fixed
    /// distance): the pieces of `len` bytes of `file`'s code from `offset`
    /// (page-aligned) that it can never patch, as (offset into the range,
    /// length, frames). Those are the pages in which no `syscall` (0f 05)
    /// appears at all, even inside another instruction, in runs of at least
    /// [`MIN_SHARED_CODE`] bytes; the pages between stay the process's own
    /// copies, where its syscall sites are patched as before.
    pub fn code_without_syscalls(
        &self,
        file: &OpenFile,
        id: FileIdentity,
        offset: u64,
        len: usize,
    ) -> Vec<(usize, usize, Frames)> {
        if self.unshareable.lock().unwrap().contains(&(id, offset, len)) {
            return Vec::new();
        }
        let Ok((run, delta)) = self.get_run(file, id, true, offset, len) else { return Vec::new() };
        let holds = run
            .syscall_pages
            .get_or_init(|| crate::host::physmem::PhysMem::get().pages_holding(run.start, run.len, [0x0f, 0x05]));
        let first = delta / PAGE_SIZE;
        let mut pieces = Vec::new();
        let mut page = 0;
        while page < len / PAGE_SIZE {
            let n = holds[first + page..first + len / PAGE_SIZE].iter().take_while(|&&h| !h).count();
            if n * PAGE_SIZE >= MIN_SHARED_CODE {
                let source: Arc<dyn PageSource> = run.clone();
                pieces.push((page * PAGE_SIZE, n * PAGE_SIZE, Frames::new(source, delta + page * PAGE_SIZE)));
            }
            page += n.max(1);
        }
        if pieces.is_empty() {
            // Nothing to share (a small program's code holds a syscall
            // every few pages): the run would only be an unused copy.
            self.unshareable.lock().unwrap().insert((id, offset, len));
            if let Some(runs) = self.files.lock().unwrap().get_mut(&(id, Kind::Code)) {
                // Unless somebody maps it: the map's reference and ours.
                runs.retain(|r| !(Arc::ptr_eq(r, &run) && Arc::strong_count(r) == 2));
            }
        }
        pieces
    }

    /// The cached run holding `len` bytes of the file from `offset`, and
    /// where they start in it.
    fn get_run(
        &self,
        file: &OpenFile,
        id: FileIdentity,
        executable: bool,
        offset: u64,
        len: usize,
    ) -> Result<(Arc<CachedPages>, usize), Errno> {
        debug_assert!(offset.is_multiple_of(PAGE_SIZE as u64) && len.is_multiple_of(PAGE_SIZE) && len > 0);
        let key = (id, Kind::of(executable));
        let end = offset.checked_add(len as u64).ok_or(Errno::EINVAL)?;
        let holding = |r: &Arc<CachedPages>| r.offset <= offset && end <= r.offset + r.len as u64;
        let (found, _) = self.find_or_read(key, holding, || self.read_run(file, id, executable, offset, len, 0))?;
        let delta = (offset - found.offset) as usize;
        Ok((found, delta))
    }

    /// The run of `key` that `fits`, else a new one `read` makes (outside
    /// the lock: a charge may reclaim, which takes it), and whether it was
    /// cached before. If another reads a fitting one meanwhile, theirs is
    /// the copy (ours goes once the lock is released).
    fn find_or_read(
        &self,
        key: Key,
        fits: impl Fn(&Arc<CachedPages>) -> bool,
        read: impl FnOnce() -> Result<Arc<CachedPages>, Errno>,
    ) -> Result<(Arc<CachedPages>, bool), Errno> {
        let cached = |files: &HashMap<Key, Vec<Arc<CachedPages>>>| {
            files.get(&key).and_then(|runs| runs.iter().find(|r| fits(r)).cloned())
        };
        if let Some(r) = cached(&self.files.lock().unwrap()) {
            return Ok((r, true));
        }
        let run = read()?;
        let mut files = self.files.lock().unwrap();
        if let Some(r) = cached(&files) {
            return Ok((r, true));
        }
        files.entry(key).or_default().push(run.clone());
        Ok((run, false))
    }

    /// A new run of `len` bytes of the file from `offset`, after `prefix`
    /// bytes of untouched pages (charged: the file's bytes). Unused runs of
    /// older versions of the file go.
    fn read_run(
        &self,
        file: &OpenFile,
        id: FileIdentity,
        executable: bool,
        offset: u64,
        len: usize,
        prefix: usize,
    ) -> Result<Arc<CachedPages>, Errno> {
        // Read outside the lock (a charge may reclaim, which takes it).
        self.phys.commit().charge(len, 0)?;
        // A prefix (trampolines) is mostly never touched: holes.
        let fresh = if prefix > 0 { Fresh::Reserved } else { Fresh::Used };
        let base = match self.phys.alloc(prefix + len, PAGE_SIZE, fresh) {
            Ok(s) => s,
            Err(e) => {
                self.phys.commit().uncharge(len);
                return Err(e);
            }
        };
        self.total.fetch_add(len, Ordering::Relaxed);
        let start = base + prefix;
        let run = Arc::new(CachedPages {
            phys: self.phys,
            start,
            len,
            prefix,
            offset,
            executable,
            total: self.total.clone(),
            syscall_pages: OnceLock::new(),
        });
        // The file's bytes up to its end; the rest stays zero.
        let range = GuestRange::new(start, len).expect("allocated pages lie in physical memory");
        file.read_at_into(range.through_alias(), offset)?;
        let mut stale = Vec::new();
        {
            let mut files = self.files.lock().unwrap();
            // Another identity of the same file is an older version: its
            // unused runs go now.
            let old: Vec<Key> =
                files.keys().filter(|(i, _)| i.dev == id.dev && i.ino == id.ino && *i != id).copied().collect();
            for k in old {
                let runs = files.get_mut(&k).unwrap();
                let (gone, kept): (Vec<_>, Vec<_>) =
                    std::mem::take(runs).into_iter().partition(|r| Arc::strong_count(r) == 1);
                stale.extend(gone);
                if kept.is_empty() {
                    files.remove(&k);
                } else {
                    *files.get_mut(&k).unwrap() = kept;
                }
            }
        }
        drop(stale);
        Ok(run)
    }

    /// Drops every run no mapping holds; returns the bytes freed.
    pub fn reclaim(&self) -> usize {
        let mut gone = Vec::new();
        {
            let mut files = self.files.lock().unwrap();
            files.retain(|_, runs| {
                let (free, kept): (Vec<_>, Vec<_>) =
                    std::mem::take(runs).into_iter().partition(|r| Arc::strong_count(r) == 1);
                gone.extend(free);
                *runs = kept;
                !runs.is_empty()
            });
        }
        let bytes = gone.iter().map(|r| r.len).sum();
        drop(gone);
        bytes
    }
}
