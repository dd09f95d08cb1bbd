//! The pages of MAP_SHARED file mappings: one set per file, shown by every
//! shared mapping of it, so that what one mapping writes the others see at
//! once, in one process or across guests (POSIX shared memory: shm_open +
//! mmap; sqlite's WAL index; a memfd mapped twice).
//!
//! A file's [`SharedFilePages`] hold one physical page per page of the file
//! that some shared mapping covers, read from the file when first mapped;
//! each mapping's VMA shows them (mm::mapping's frames, with the file
//! offset as the VMA's offset into the source). The pages are charged to
//! the commit account once, whoever maps them. They are written back to
//! the file as a shared mapping's own copy was: at munmap, msync, exit
//! (src/mm/space.rs `write_back_vma`), and they go with the last mapping,
//! so the next first mapping reads the file again.
//!
//! While they are held they are the file's contents, as Linux's page cache
//! is: a read of the file through a descriptor sees what the mappings show
//! ([`SharedFilePages::overlay`] over what the host read), a write or a
//! truncation reaches the pages ([`SharedFilePages::refresh`], from the
//! file just written), and a copy the host makes from the file itself
//! (sendfile, copy_file_range, splice) is given the pages' bytes first
//! ([`SharedFilePages::write_back`]). A write and its refresh hold the
//! pages' I/O lock, as write-back does, so neither lands between the
//! other's steps (src/syscall/coherent.rs).
//!
//! Files are told apart by the host's device and inode numbers.

use super::phys::{Fresh, PhysicalMemory};
use super::PAGE_SIZE;
use crate::abi::errno::Errno;
use crate::fs::file::OpenFile;
use crate::host::physmem::GuestRange;
use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

/// A file's identity: host device and inode numbers.
pub type FileKey = (u64, u64);

/// Every file with a live shared mapping, and its pages.
pub struct SharedFiles {
    phys: &'static PhysicalMemory,
    files: Arc<Mutex<HashMap<FileKey, Weak<SharedFilePages>>>>,
    live: Arc<Live>,
}

/// How many files have pages held, in all and per bucket of their keys:
/// a file's I/O looks its pages up (a lock and a hash lookup, 30-40 ns)
/// only when some file of its bucket has any.
struct Live {
    files: AtomicUsize,
    buckets: [AtomicUsize; LIVE_BUCKETS],
}

const LIVE_BUCKETS: usize = 64;

impl Default for Live {
    fn default() -> Live {
        Live { files: AtomicUsize::new(0), buckets: std::array::from_fn(|_| AtomicUsize::new(0)) }
    }
}

impl Live {
    fn bucket(&self, (dev, ino): FileKey) -> &AtomicUsize {
        let h = (ino ^ dev.rotate_left(32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        &self.buckets[(h >> 58) as usize % LIVE_BUCKETS]
    }

    fn add(&self, key: FileKey) {
        self.files.fetch_add(1, Ordering::AcqRel);
        self.bucket(key).fetch_add(1, Ordering::AcqRel);
    }

    fn remove(&self, key: FileKey) {
        self.bucket(key).fetch_sub(1, Ordering::AcqRel);
        self.files.fetch_sub(1, Ordering::AcqRel);
    }
}

impl SharedFiles {
    pub fn new(phys: &'static PhysicalMemory) -> SharedFiles {
        SharedFiles { phys, files: Arc::default(), live: Arc::default() }
    }

    /// Whether some file has pages held now.
    pub fn any(&self) -> bool {
        self.live.files.load(Ordering::Acquire) != 0
    }

    /// The pages shared mappings of the file `key` names hold now, if any.
    pub fn held(&self, key: FileKey) -> Option<Arc<SharedFilePages>> {
        if self.live.bucket(key).load(Ordering::Acquire) == 0 {
            return None;
        }
        self.files.lock().unwrap().get(&key).and_then(Weak::upgrade)
    }

    /// [`held`](Self::held) for an open regular file.
    pub fn held_for(&self, file: &OpenFile) -> Option<Arc<SharedFilePages>> {
        if !self.any() || file.kind() != crate::fs::file::FileKind::Regular {
            return None;
        }
        self.held(file.key())
    }

    /// The pages of `file` that a shared mapping of [off, off+len) shows:
    /// the ones other mappings show already, the others read from the file
    /// now (zero past its end). ENOMEM when they do not fit in `--mem`.
    pub fn pages_for(&self, file: &OpenFile, off: u64, len: usize) -> Result<Arc<SharedFilePages>, Errno> {
        let key = file.key();
        let pages = {
            let mut files = self.files.lock().unwrap();
            match files.get(&key).and_then(Weak::upgrade) {
                Some(p) => p,
                None => {
                    let p = Arc::new(SharedFilePages {
                        phys: self.phys,
                        key,
                        files: Arc::downgrade(&self.files),
                        live: self.live.clone(),
                        pages: Mutex::default(),
                        io: Mutex::default(),
                        reader: reopen(file, libc::O_RDONLY)?,
                        writer: OnceLock::new(),
                    });
                    self.live.add(key);
                    files.insert(key, Arc::downgrade(&p));
                    p
                }
            }
        };
        if file.writable() && pages.writer.get().is_none() {
            let _ = pages.writer.set(reopen(file, libc::O_WRONLY)?);
        }
        pages.fill(file, off as usize, len)?;
        Ok(pages)
    }
}

/// `file` opened again with `flags`: a host description of its own, which
/// holds none of the guest's flock or OFD locks on `file`'s (a dup where
/// the host will not open it so).
fn reopen(file: &OpenFile, flags: i32) -> Result<OwnedFd, Errno> {
    crate::host::fs::reopen(file.fd(), flags).or_else(|_| crate::host::fs::dup(file.fd()))
}

/// One file's shared pages (see the module comment).
pub struct SharedFilePages {
    phys: &'static PhysicalMemory,
    key: FileKey,
    files: Weak<Mutex<HashMap<FileKey, Weak<SharedFilePages>>>>,
    live: Arc<Live>,
    /// The pages held, in runs: file offset -> (physical page, length).
    pages: Mutex<BTreeMap<usize, (usize, usize)>>,
    /// Held by a write to the file through a descriptor until the pages
    /// have its bytes, and by a write-back of the pages to the file: one
    /// never lands between the other's two steps (else a write-back of the
    /// old bytes could undo the write, file and pages both).
    io: Mutex<()>,
    /// The file, for reading it again (every mapping's description is
    /// readable; the one a write went through may not be). Opened again,
    /// not a dup: a guest's flock on a mapping's description goes when the
    /// guest closes it and unmaps, as on Linux.
    reader: OwnedFd,
    /// The file open for writing, once a writable description has mapped
    /// it (only a mapping of such a one can make the pages differ from it).
    writer: OnceLock<OwnedFd>,
}

impl SharedFilePages {
    /// Takes and reads the pages of [off, off+len) that are not held yet,
    /// one allocation and one read per run of missing pages.
    fn fill(&self, file: &OpenFile, off: usize, len: usize) -> Result<(), Errno> {
        let end = off.checked_add(len).ok_or(Errno::EINVAL)?;
        let mut pages = self.pages.lock().unwrap();
        let mut at = off;
        while at < end {
            if let Some(run_end) = Self::run_holding(&pages, at).map(|(s, _, n)| s + n) {
                at = run_end;
                continue;
            }
            let gap_end = pages.range(at..end).next().map_or(end, |(&o, _)| o);
            let n = gap_end - at;
            self.phys.commit().charge(n, 0)?;
            let frame = match self.phys.alloc(n, PAGE_SIZE, Fresh::Used) {
                Ok(f) => f,
                Err(e) => {
                    self.phys.commit().uncharge(n);
                    return Err(e);
                }
            };
            let range = GuestRange::new(frame, n).expect("allocated pages lie in physical memory");
            if let Err(e) = file.read_at_into(range, at as u64) {
                self.phys.free(frame, n);
                self.phys.commit().uncharge(n);
                return Err(e);
            }
            pages.insert(at, (frame, n));
            at = gap_end;
        }
        Ok(())
    }

    /// Held across a write of the file and its [`refresh`](Self::refresh).
    pub fn lock_io(&self) -> MutexGuard<'_, ()> {
        self.io.lock().unwrap()
    }

    /// The held runs that overlap file bytes [off, end): (file offset,
    /// physical address, length) of each overlapping part, in order.
    fn held_parts(&self, off: u64, end: u64) -> Vec<(u64, usize, usize)> {
        let pages = self.pages.lock().unwrap();
        let (off, end) = (off.min(usize::MAX as u64) as usize, end.min(usize::MAX as u64) as usize);
        let first = Self::run_holding(&pages, off).map_or(off, |(s, _, _)| s);
        pages
            .range(first..end)
            .filter_map(|(&s, &(frame, n))| {
                let (a, b) = (s.max(off), (s + n).min(end));
                (a < b).then(|| (a as u64, frame + (a - s), b - a))
            })
            .collect()
    }

    /// The file's bytes [off, off+len) changed through a descriptor (a
    /// write, a truncation): the held pages there read them again, zero
    /// past the file's end. The caller holds [`lock_io`](Self::lock_io)
    /// across the change and this.
    pub fn refresh(&self, off: u64, len: u64) {
        for (at, frame, n) in self.held_parts(off, off.saturating_add(len)) {
            let range = GuestRange::new(frame, n).expect("held pages lie in physical memory");
            // A host error leaves the pages as they were.
            if let Ok(got) = crate::host::fs::pread_full(self.reader.as_fd(), range, at) {
                if got < n {
                    crate::host::physmem::PhysMem::get().zero(frame + got, n - got);
                }
            }
        }
    }

    /// Over `ranges`, which a read of the file from `off` has just filled
    /// (in order, as many bytes as it read), the bytes the held pages show
    /// there: what the mappings wrote and the file has not been given yet.
    pub fn overlay(&self, off: u64, ranges: &[GuestRange]) {
        let len: usize = ranges.iter().map(|r| r.len()).sum();
        let pm = crate::host::physmem::PhysMem::get();
        for (at, frame, n) in self.held_parts(off, off + len as u64) {
            // Where in the ranges the part's first byte went.
            let mut skip = (at - off) as usize;
            let mut done = 0;
            for r in ranges {
                if done == n {
                    break;
                }
                if skip >= r.len() {
                    skip -= r.len();
                    continue;
                }
                let dst = r.skip(skip).take(n - done);
                pm.copy_into(dst, frame + done);
                done += dst.len();
                skip = 0;
            }
        }
    }

    /// Gives the file the bytes the held pages show in [off, off+len), up
    /// to its end: for a copy the host makes from the file itself. Nothing
    /// to give while no writable description has mapped it.
    pub fn write_back(&self, off: u64, len: u64) {
        let Some(fd) = self.writer.get() else { return };
        let _io = self.lock_io();
        let Ok(st) = crate::host::fs::fstat(fd.as_fd()) else { return };
        for (at, frame, n) in self.held_parts(off, off.saturating_add(len).min(st.st_size as u64)) {
            let range = GuestRange::new(frame, n).expect("held pages lie in physical memory").through_alias();
            let _ = crate::host::fs::pwrite_full(fd.as_fd(), range, at);
        }
    }

    /// The run holding file offset `at`: (its offset, physical page, length).
    fn run_holding(pages: &BTreeMap<usize, (usize, usize)>, at: usize) -> Option<(usize, usize, usize)> {
        pages.range(..=at).next_back().filter(|(&s, &(_, n))| at < s + n).map(|(&s, &(f, n))| (s, f, n))
    }
}

impl super::mapping::PageSource for SharedFilePages {
    fn frames(&self, offset: usize) -> (usize, usize) {
        let pages = self.pages.lock().unwrap();
        let (s, frame, n) = Self::run_holding(&pages, offset).expect("a shared mapping shows only pages it filled");
        (frame + (offset - s), n - (offset - s))
    }

    /// Any file offset a mapping can name.
    fn len(&self) -> usize {
        isize::MAX as usize
    }

    /// Writes reach the pages every mapping of the file shows.
    fn copy_on_write(&self) -> bool {
        false
    }

    /// Never patched by an entry path (the patch would reach the file):
    /// an executable shared mapping is a copy of its own.
    fn executable(&self) -> bool {
        false
    }

    /// No address that nobody maps shows them.
    fn lingers(&self) -> bool {
        false
    }

    fn hold_file(&self, file: &OpenFile, offset: usize, len: usize) -> Result<bool, Errno> {
        self.fill(file, offset, len).map(|()| true)
    }

    /// A fork shows the child the same pages, and every VMA of them is
    /// written back to its file.
    fn shared_at_fork(&self) -> bool {
        true
    }

    fn lock_io(&self) -> Option<MutexGuard<'_, ()>> {
        Some(SharedFilePages::lock_io(self))
    }
}

impl Drop for SharedFilePages {
    fn drop(&mut self) {
        self.live.remove(self.key);
        if let Some(files) = self.files.upgrade() {
            let mut files = files.lock().unwrap();
            // A new set may have taken the key since the last handle went.
            if files.get(&self.key).is_some_and(|w| w.strong_count() == 0) {
                files.remove(&self.key);
            }
        }
        for (frame, n) in std::mem::take(self.pages.get_mut().unwrap()).into_values() {
            self.phys.free_frames(frame, n);
            self.phys.commit().uncharge(n);
        }
    }
}
