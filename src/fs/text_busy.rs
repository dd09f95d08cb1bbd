//! Linux's ETXTBSY: while a process runs a program, the program's file
//! cannot be opened for writing or truncated; while a file is open for
//! writing, it cannot be executed. nomu copies programs into guest memory,
//! so the host never sees them run: nomu counts running programs' files
//! and files open for writing itself.

use crate::abi::errno::Errno;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// (device, inode) of each running program's file, with how many
/// processes run it.
static RUNNING: Mutex<BTreeMap<(u64, u64), usize>> = Mutex::new(BTreeMap::new());
/// (device, inode) of each regular file a guest has open for writing, with
/// how many open file descriptions.
static WRITING: Mutex<BTreeMap<(u64, u64), usize>> = Mutex::new(BTreeMap::new());

fn take(map: &Mutex<BTreeMap<(u64, u64), usize>>, key: (u64, u64)) {
    *map.lock().unwrap().entry(key).or_insert(0) += 1;
}

fn give_back(map: &Mutex<BTreeMap<(u64, u64), usize>>, key: (u64, u64)) {
    let mut map = map.lock().unwrap();
    if let Some(n) = map.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            map.remove(&key);
        }
    }
}

/// One process running the program in a file: the file is busy for
/// writing until this is dropped (the process execs again, or exits).
#[derive(Debug)]
pub struct RunningProgram {
    key: (u64, u64),
}

impl RunningProgram {
    /// Marks the file whose attributes (just read) are `st` as running:
    /// ETXTBSY while a guest has it open for writing.
    pub fn of(st: &libc::stat) -> Result<RunningProgram, Errno> {
        let key = (st.st_dev, st.st_ino);
        if WRITING.lock().unwrap().contains_key(&key) {
            return Err(Errno::ETXTBSY);
        }
        take(&RUNNING, key);
        Ok(RunningProgram { key })
    }
}

impl Drop for RunningProgram {
    fn drop(&mut self) {
        give_back(&RUNNING, self.key);
    }
}

/// An open file description with write access to a regular file: the file
/// cannot be executed until this is dropped (the description is closed).
#[derive(Debug)]
pub struct OpenForWriting {
    key: (u64, u64),
}

impl OpenForWriting {
    /// ETXTBSY if the file with attributes `st` is a running program, else
    /// the mark that it is open for writing.
    pub fn new(st: &libc::stat) -> Result<OpenForWriting, Errno> {
        deny_write(st)?;
        let key = (st.st_dev, st.st_ino);
        take(&WRITING, key);
        Ok(OpenForWriting { key })
    }
}

impl Drop for OpenForWriting {
    fn drop(&mut self) {
        give_back(&WRITING, self.key);
    }
}

/// ETXTBSY if the file with attributes `st` is a running program.
pub fn deny_write(st: &libc::stat) -> Result<(), Errno> {
    if RUNNING.lock().unwrap().contains_key(&(st.st_dev, st.st_ino)) {
        return Err(Errno::ETXTBSY);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::fs as hostfs;
    use std::os::fd::AsFd;

    #[test]
    fn busy_while_running_and_not_runnable_while_open_for_writing() {
        let file = std::fs::File::open("/proc/self/exe").unwrap();
        let st = hostfs::fstat(file.as_fd()).unwrap();
        assert_eq!(deny_write(&st), Ok(()));
        let a = RunningProgram::of(&hostfs::fstat(file.as_fd()).unwrap()).unwrap();
        let b = RunningProgram::of(&hostfs::fstat(file.as_fd()).unwrap()).unwrap();
        assert_eq!(deny_write(&st), Err(Errno::ETXTBSY));
        drop(a);
        assert_eq!(deny_write(&st), Err(Errno::ETXTBSY));
        drop(b);
        assert_eq!(deny_write(&st), Ok(()));
        // (One test: the sets are global, and tests run in parallel.)
        // Open for writing, it cannot run; running, it cannot be opened so.
        let w = OpenForWriting::new(&st).unwrap();
        assert_eq!(RunningProgram::of(&hostfs::fstat(file.as_fd()).unwrap()).map(drop), Err(Errno::ETXTBSY));
        drop(w);
        let running = RunningProgram::of(&hostfs::fstat(file.as_fd()).unwrap()).unwrap();
        assert_eq!(OpenForWriting::new(&st).map(drop), Err(Errno::ETXTBSY));
        drop(running);
    }
}
