//! Linux's ETXTBSY: while a process runs a program, the program's file
//! cannot be opened for writing or truncated. nomu copies programs into
//! guest memory, so the host never sees them run: nomu keeps the set of
//! running programs' files itself.

use crate::host::fs as hostfs;
use crate::kernel::errno::Errno;
use std::collections::BTreeMap;
use std::os::fd::BorrowedFd;
use std::sync::Mutex;

/// (device, inode) of each running program's file, with how many
/// processes run it.
static RUNNING: Mutex<BTreeMap<(u64, u64), usize>> = Mutex::new(BTreeMap::new());

/// One process running the program in a file: the file is busy for
/// writing until this is dropped (the process execs again, or exits).
#[derive(Debug)]
pub struct RunningProgram {
    key: (u64, u64),
}

impl RunningProgram {
    /// Marks the file open at `fd` as running.
    pub fn new(fd: BorrowedFd) -> Result<RunningProgram, Errno> {
        let st = hostfs::fstat(fd)?;
        let key = (st.st_dev, st.st_ino);
        *RUNNING.lock().unwrap().entry(key).or_insert(0) += 1;
        Ok(RunningProgram { key })
    }
}

impl Drop for RunningProgram {
    fn drop(&mut self) {
        let mut running = RUNNING.lock().unwrap();
        if let Some(n) = running.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                running.remove(&self.key);
            }
        }
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
    use std::os::fd::AsFd;

    #[test]
    fn busy_while_any_process_runs_it() {
        let file = std::fs::File::open("/proc/self/exe").unwrap();
        let st = hostfs::fstat(file.as_fd()).unwrap();
        assert_eq!(deny_write(&st), Ok(()));
        let a = RunningProgram::new(file.as_fd()).unwrap();
        let b = RunningProgram::new(file.as_fd()).unwrap();
        assert_eq!(deny_write(&st), Err(Errno::ETXTBSY));
        drop(a);
        assert_eq!(deny_write(&st), Err(Errno::ETXTBSY));
        drop(b);
        assert_eq!(deny_write(&st), Ok(()));
    }
}
