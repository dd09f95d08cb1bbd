//! Guest processes and threads: the home of the process lifecycle.

use super::signal::SignalActions;
use crate::fs::fdtable::FdTable;
use crate::mm::phys::PhysicalMemory;
use crate::mm::space::AddressSpace;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// How a process ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ExitStatus {
    Code(i32),
    Signal { signo: i32, core: bool },
}

pub const RLIM_NLIMITS: usize = 16;

pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    pub mm: Mutex<AddressSpace>,
    pub files: Mutex<FdTable>,
    /// Absolute guest path of the working directory.
    pub cwd: Mutex<Vec<u8>>,
    pub umask: AtomicU32,
    pub signals: Mutex<SignalActions>,
    pub rlimits: Mutex<[libc::rlimit; RLIM_NLIMITS]>,
    /// The guest path of the running program (AT_EXECFN, /proc/self/exe).
    pub exe: Mutex<Vec<u8>>,
    exit: Mutex<Option<ExitStatus>>,
    exited: Condvar,
}

impl Process {
    pub fn new(pid: u32, ppid: u32, phys: &'static PhysicalMemory) -> Process {
        let rlimits = std::array::from_fn(|r| crate::host::sys::getrlimit(r as u32));
        Process {
            pid,
            ppid,
            mm: Mutex::new(AddressSpace::new(phys)),
            files: Mutex::new(FdTable::default()),
            cwd: Mutex::new(b"/".to_vec()),
            umask: AtomicU32::new(0o022),
            signals: Mutex::new(SignalActions::default()),
            rlimits: Mutex::new(rlimits),
            exe: Mutex::new(Vec::new()),
            exit: Mutex::new(None),
            exited: Condvar::new(),
        }
    }

    pub fn rlimit(&self, resource: u32) -> libc::rlimit {
        self.rlimits.lock().unwrap()[resource as usize]
    }

    pub fn nofile_limit(&self) -> usize {
        self.rlimit(libc::RLIMIT_NOFILE).rlim_cur.min(1 << 20) as usize
    }

    /// Ends the process, in its own context: its memory and descriptors are
    /// released before anyone waiting for it learns the status (the order
    /// of seed 004's exit: no reaper does the teardown later).
    pub fn exit(&self, status: ExitStatus) {
        self.mm.lock().unwrap().release_all();
        self.files.lock().unwrap().close_all();
        let mut exit = self.exit.lock().unwrap();
        if exit.is_none() {
            *exit = Some(status);
        }
        self.exited.notify_all();
    }

    pub fn wait_exit(&self) -> ExitStatus {
        let mut exit = self.exit.lock().unwrap();
        loop {
            if let Some(s) = *exit {
                return s;
            }
            exit = self.exited.wait(exit).unwrap();
        }
    }
}

/// Per-thread state that other threads may need to see.
#[derive(Default)]
pub struct ThreadState {
    pub clear_child_tid: u64,
    pub robust_list: u64,
    pub sigmask: u64,
}

pub struct Thread {
    pub tid: u32,
    pub process: Arc<Process>,
    pub state: Mutex<ThreadState>,
}

impl Thread {
    pub fn new(tid: u32, process: Arc<Process>) -> Thread {
        Thread { tid, process, state: Mutex::new(ThreadState::default()) }
    }
}

pub struct PidAllocator(AtomicU32);

impl PidAllocator {
    pub const fn new() -> PidAllocator {
        PidAllocator(AtomicU32::new(1))
    }

    pub fn next(&self) -> u32 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}
