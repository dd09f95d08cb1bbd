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
//! so the next first mapping reads the file again. read(2) and write(2) of
//! the file are not coherent with them in between (README, Limitations).
//!
//! Files are told apart by the host's device and inode numbers.

use super::phys::{Fresh, PhysicalMemory};
use super::PAGE_SIZE;
use crate::abi::errno::Errno;
use crate::fs::file::OpenFile;
use crate::host::physmem::GuestRange;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};

/// A file's identity: host device and inode numbers.
type FileKey = (u64, u64);

/// Every file with a live shared mapping, and its pages.
pub struct SharedFiles {
    phys: &'static PhysicalMemory,
    files: Arc<Mutex<HashMap<FileKey, Weak<SharedFilePages>>>>,
}

impl SharedFiles {
    pub fn new(phys: &'static PhysicalMemory) -> SharedFiles {
        SharedFiles { phys, files: Arc::default() }
    }

    /// The pages of `file` that a shared mapping of [off, off+len) shows:
    /// the ones other mappings show already, the others read from the file
    /// now (zero past its end). ENOMEM when they do not fit in `--mem`.
    pub fn pages_for(&self, file: &OpenFile, off: u64, len: usize) -> Result<Arc<SharedFilePages>, Errno> {
        let st = crate::host::fs::fstat(file.fd())?;
        let key = (st.st_dev, st.st_ino);
        let pages = {
            let mut files = self.files.lock().unwrap();
            match files.get(&key).and_then(Weak::upgrade) {
                Some(p) => p,
                None => {
                    let p = Arc::new(SharedFilePages {
                        phys: self.phys,
                        key,
                        files: Arc::downgrade(&self.files),
                        pages: Mutex::default(),
                    });
                    files.insert(key, Arc::downgrade(&p));
                    p
                }
            }
        };
        pages.fill(file, off as usize, len)?;
        Ok(pages)
    }
}

/// One file's shared pages (see the module comment).
pub struct SharedFilePages {
    phys: &'static PhysicalMemory,
    key: FileKey,
    files: Weak<Mutex<HashMap<FileKey, Weak<SharedFilePages>>>>,
    /// The pages held, in runs: file offset -> (physical page, length).
    pages: Mutex<BTreeMap<usize, (usize, usize)>>,
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
}

impl Drop for SharedFilePages {
    fn drop(&mut self) {
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
