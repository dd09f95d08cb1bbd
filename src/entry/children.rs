//! The host child processes that the split and sysemu paths run guest
//! threads in: one per nomu host thread, all in one table, so that a kick
//! reaches the right one and none outlives nomu. Each path keeps its own
//! table (`static CHILDREN: Children = Children::new()`), and both use this
//! code for it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Children are made with no exit signal: waits need __WALL.
const WALL: i32 = libc::__WALL;

pub struct Children {
    /// (nomu host thread, its child), for children not yet reaped.
    table: Mutex<Vec<(i32, i32)>>,
    /// Set when nomu exits: children dying then are no news.
    exiting: AtomicBool,
}

impl Children {
    pub const fn new() -> Children {
        Children { table: Mutex::new(Vec::new()), exiting: AtomicBool::new(false) }
    }

    fn table(&self) -> MutexGuard<'_, Vec<(i32, i32)>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `pid` as the child of the calling host thread, at once
    /// after it is made: from then on it is killed and reaped whatever
    /// happens.
    pub fn register(&self, pid: i32) {
        self.table().push((crate::host::sys::gettid(), pid));
    }

    /// Sends `sig` to the child of host thread `owner`, if it has one. The
    /// table's lock is held meanwhile, so the pid cannot have been reaped
    /// and reused by another process.
    pub fn signal(&self, owner: i32, sig: i32) -> bool {
        let table = self.table();
        if let Some(&(_, pid)) = table.iter().find(|&&(o, _)| o == owner) {
            // SAFETY: a signal to our own child, not yet reaped (it is in
            // the table, under the lock); the paths handle their kick.
            unsafe { libc::syscall(libc::SYS_tgkill, pid, pid, sig) };
            return true;
        }
        false
    }

    /// Makes the calling host thread the owner of `pid` (a child made for
    /// it by another nomu thread), in one step: a kick never misses it.
    pub fn reassign(&self, pid: i32) {
        let me = crate::host::sys::gettid();
        for entry in self.table().iter_mut().filter(|(_, p)| *p == pid) {
            entry.0 = me;
        }
    }

    /// Leaves `pid` with no owner (kept for later: nothing kicks it).
    pub fn disown(&self, pid: i32) {
        for entry in self.table().iter_mut().filter(|(_, p)| *p == pid) {
            entry.0 = 0;
        }
    }

    /// Forgets `pid`, which its owner has reaped (its own wait saw it go).
    pub fn forget(&self, pid: i32) {
        self.table().retain(|&(_, p)| p != pid);
    }

    /// Kills and reaps `pid`, unless it was reaped already (not in the
    /// table any more).
    pub fn kill_and_reap(&self, pid: i32) {
        let mut table = self.table();
        let n = table.len();
        table.retain(|&(_, p)| p != pid);
        if table.len() != n {
            kill_and_wait(pid);
        }
    }

    /// At nomu's exit (atexit, so no zombie is left for an init that may
    /// not reap it): kills and reaps every child.
    pub fn reap_all(&self) {
        self.exiting.store(true, Ordering::SeqCst);
        let mut table = self.table();
        for (_, pid) in table.drain(..) {
            kill_and_wait(pid);
        }
    }

    /// Whether nomu is exiting (and killing its children).
    pub fn exiting(&self) -> bool {
        self.exiting.load(Ordering::SeqCst)
    }
}

fn kill_and_wait(pid: i32) {
    // SAFETY: killing and reaping our own child, whose pid cannot be
    // reused before this waitpid (the caller holds the table's lock). A
    // traced child may report stops before its death; its tracer may reap
    // it first, and then waitpid fails at once with ECHILD.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        let mut status = 0;
        while libc::waitpid(pid, &mut status, WALL) == pid && libc::WIFSTOPPED(status) {}
    }
}
