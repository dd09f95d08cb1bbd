//! The syscall instructions seen in each executable file, so a program
//! exec'd again starts with them prepared by the entry path (zpoline
//! rewrites them) instead of trapping once per site per exec.
//!
//! A site is recorded only from a trap in an image segment that has never
//! been writable since it was loaded, keyed by the file's identity (device,
//! inode, size, mtime, ctime): its offset is then an instruction boundary
//! of that exact file. Applying a site checks the bytes again.

use crate::fs::file::FileIdentity;
use crate::mm::space::ImageOrigin;
use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::sync::Mutex;

/// Bounds on what is remembered (beyond them, old knowledge is dropped).
const MAX_FILES: usize = 512;
const MAX_SITES_PER_FILE: usize = 8192;

#[derive(Default)]
pub struct SyscallSites {
    files: Mutex<HashMap<FileIdentity, BTreeSet<u64>>>,
}

impl SyscallSites {
    /// A syscall instruction `delta` bytes into the VMA `origin` describes
    /// was just used for the first time.
    pub fn record(&self, origin: &ImageOrigin, delta: u64) {
        let Some(offset) = origin.file_offset(delta) else { return };
        let mut files = self.files.lock().unwrap();
        if files.len() >= MAX_FILES && !files.contains_key(&origin.file) {
            files.clear();
        }
        let sites = files.entry(origin.file).or_default();
        if sites.len() < MAX_SITES_PER_FILE {
            sites.insert(offset);
        }
    }

    /// The known sites of `file` whose file offsets lie in `range`.
    pub fn known(&self, file: &FileIdentity, range: Range<u64>) -> Vec<u64> {
        let files = self.files.lock().unwrap();
        files.get(file).map(|s| s.range(range).copied().collect()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ino: u64) -> FileIdentity {
        FileIdentity { dev: 1, ino, size: 100, mtime: (1, 2), ctime: (3, 4) }
    }

    #[test]
    fn sites_are_kept_per_file_and_range() {
        let s = SyscallSites::default();
        let origin = |ino, offset| ImageOrigin { file: id(ino), offset, segment: 0x1008..0x3000 };
        s.record(&origin(1, 0x1000), 0x10);
        s.record(&origin(1, 0x2000), 0x20);
        s.record(&origin(2, 0x1000), 0x30);
        // Outside the segment's own bytes (a page shared with another).
        s.record(&origin(2, 0x1000), 0x4);
        s.record(&origin(2, 0x2000), 0x1000);
        assert_eq!(s.known(&id(1), 0..0x3000), vec![0x1010, 0x2020]);
        assert_eq!(s.known(&id(1), 0x1011..0x3000), vec![0x2020]);
        assert_eq!(s.known(&id(2), 0..0x3000), vec![0x1030]);
        assert!(s.known(&id(3), 0..0x3000).is_empty());
    }
}
