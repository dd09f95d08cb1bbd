//! A process's file descriptor table. Guest descriptor numbers index this
//! table only; nomu's own host descriptors are never reachable from it.

use super::file::OpenFile;
use crate::abi::errno::Errno;
use std::sync::Arc;

#[derive(Clone)]
pub struct FdEntry {
    pub file: Arc<OpenFile>,
    pub cloexec: bool,
}

#[derive(Clone, Default)]
pub struct FdTable {
    entries: Vec<Option<FdEntry>>,
}

impl FdTable {
    pub fn get(&self, fd: i32) -> Result<&FdEntry, Errno> {
        usize::try_from(fd).ok().and_then(|i| self.entries.get(i)).and_then(|e| e.as_ref()).ok_or(Errno::EBADF)
    }

    pub fn file(&self, fd: i32) -> Result<Arc<OpenFile>, Errno> {
        self.get(fd).map(|e| e.file.clone())
    }

    /// The lowest free descriptor >= `min`, below `limit`.
    pub fn lowest_free(&self, min: usize, limit: usize) -> Option<usize> {
        (min..limit).find(|&i| self.entries.get(i).is_none_or(|e| e.is_none()))
    }

    /// The open descriptors, lowest first.
    pub fn iter(&self) -> impl Iterator<Item = (i32, &FdEntry)> {
        self.entries.iter().enumerate().filter_map(|(i, e)| e.as_ref().map(|e| (i as i32, e)))
    }

    /// Installs at the lowest free descriptor >= `min`, below `limit`.
    pub fn install(&mut self, file: Arc<OpenFile>, cloexec: bool, min: usize, limit: usize) -> Result<i32, Errno> {
        let slot = self.lowest_free(min, limit).ok_or(Errno::EMFILE)?;
        self.install_at(slot, file, cloexec);
        Ok(slot as i32)
    }

    /// Installs at `fd`, returning what was there (dup2 semantics).
    pub fn install_at(&mut self, fd: usize, file: Arc<OpenFile>, cloexec: bool) -> Option<FdEntry> {
        if self.entries.len() <= fd {
            self.entries.resize(fd + 1, None);
        }
        self.entries[fd].replace(FdEntry { file, cloexec })
    }

    pub fn close(&mut self, fd: i32) -> Result<FdEntry, Errno> {
        let slot = usize::try_from(fd).ok().and_then(|i| self.entries.get_mut(i)).ok_or(Errno::EBADF)?;
        slot.take().ok_or(Errno::EBADF)
    }

    pub fn set_cloexec(&mut self, fd: i32, cloexec: bool) -> Result<(), Errno> {
        self.get(fd)?;
        self.entries[fd as usize].as_mut().unwrap().cloexec = cloexec;
        Ok(())
    }

    /// close_range(2): the open descriptors in [first, last] are taken out
    /// (returned, for the caller to drop once the table is unlocked), or
    /// only marked close-on-exec.
    pub fn close_range(&mut self, first: usize, last: usize, cloexec_only: bool) -> Vec<FdEntry> {
        let end = self.entries.len().min(last.saturating_add(1));
        let mut closed = Vec::new();
        for e in self.entries.iter_mut().take(end).skip(first) {
            if cloexec_only {
                if let Some(e) = e {
                    e.cloexec = true;
                }
            } else if let Some(old) = e.take() {
                closed.push(old);
            }
        }
        closed
    }

    /// execve: descriptors marked close-on-exec go away (returned, for the
    /// caller to drop once the table is unlocked).
    pub fn close_on_exec(&mut self) -> Vec<FdEntry> {
        let mut closed = Vec::new();
        for e in self.entries.iter_mut() {
            if e.as_ref().is_some_and(|e| e.cloexec) {
                closed.extend(e.take());
            }
        }
        closed
    }
}
