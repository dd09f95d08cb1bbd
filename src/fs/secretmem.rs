//! memfd_secret(2)'s files: memory no direct-map address reaches.
//!
//! A secret file's pages are taken when ftruncate sets its size (Linux
//! allows that once: a second ftruncate of a sized file is EINVAL, which
//! the host's idle memfd_secret descriptor answers): eagerly, as no-MMU
//! has no page faults to be lazy with, from UNMAPPED pageblocks
//! (mm::phys::alloc_secret), zeroed through the mermap, charged to the
//! commit account (`--mem`: ENOMEM past it) and counted as /proc/meminfo's
//! SecretMem. A MAP_SHARED mapping shows them at the mapping's own address
//! (mm::mapping: the direct map there is host-mapped to the pages), the
//! only address anyone reaches them at; their own direct-map addresses
//! are PROT_NONE in both of nomu's views. The pages go when the file and
//! every mapping of it are gone.

use crate::abi::errno::Errno;
use crate::mm::phys::PhysicalMemory;
use crate::mm::PAGE_SIZE;
use std::sync::{Arc, Mutex};

/// A secret file's pages: [start, start+len) of physical memory.
pub struct SecretPages {
    phys: &'static PhysicalMemory,
    start: usize,
    len: usize,
}

impl SecretPages {
    pub fn start(&self) -> usize {
        self.start
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

impl crate::mm::mapping::PageSource for SecretPages {
    fn frames(&self, offset: usize) -> (usize, usize) {
        assert!(offset < self.len);
        (self.start + offset, self.len - offset)
    }

    fn len(&self) -> usize {
        self.len
    }

    fn copy_on_write(&self) -> bool {
        false
    }

    /// Its mount is noexec (mmap and mprotect refuse PROT_EXEC first).
    fn executable(&self) -> bool {
        false
    }

    /// nomu reaches them through the mermap only.
    fn unmapped(&self) -> bool {
        true
    }

    /// No stale mapping may show secret pages where nobody maps them.
    fn lingers(&self) -> bool {
        false
    }
}

impl Drop for SecretPages {
    fn drop(&mut self) {
        self.phys.free_secret(self.start, self.len);
        self.phys.commit().uncharge(self.len);
    }
}

/// The state of a memfd_secret file (its size is the host descriptor's).
pub struct SecretMem {
    phys: &'static PhysicalMemory,
    pages: Mutex<Option<Arc<SecretPages>>>,
}

impl SecretMem {
    pub fn new(phys: &'static PhysicalMemory) -> SecretMem {
        SecretMem { phys, pages: Mutex::new(None) }
    }

    /// Takes `len` bytes (rounded up to pages) of secret memory for the
    /// file, then has `set_host_size` size the host descriptor (which
    /// refuses a file already sized); the pages go back if it fails.
    pub fn set_size(&self, len: u64, set_host_size: impl FnOnce() -> Result<(), Errno>) -> Result<(), Errno> {
        let mut pages = self.pages.lock().unwrap();
        if pages.is_some() {
            return Err(Errno::EINVAL);
        }
        if len == 0 {
            return set_host_size();
        }
        let bytes =
            usize::try_from(len).ok().and_then(|l| l.checked_next_multiple_of(PAGE_SIZE)).ok_or(Errno::ENOMEM)?;
        self.phys.commit().charge(bytes, 0)?;
        let start = match self.phys.alloc_secret(bytes) {
            Ok(s) => s,
            Err(e) => {
                self.phys.commit().uncharge(bytes);
                return Err(e);
            }
        };
        let taken = Arc::new(SecretPages { phys: self.phys, start, len: bytes });
        set_host_size()?;
        *pages = Some(taken);
        Ok(())
    }

    /// The pages, once the size is set.
    pub fn pages(&self) -> Option<Arc<SecretPages>> {
        self.pages.lock().unwrap().clone()
    }
}
