//! The process table: parent links, process groups and sessions, zombies
//! and wait. One lock guards all relationships (Linux's tasklist_lock).

use super::errno::Errno;
use super::process::{ExitStatus, Process};
use super::waiter::Event;
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};

/// What an exited, not yet reaped process leaves for its parent.
#[derive(Clone, Copy)]
pub struct Zombie {
    pub status: ExitStatus,
    pub rusage: libc::rusage,
}

pub struct Task {
    pub process: Arc<Process>,
    pub ppid: u32,
    pub pgid: u32,
    pub sid: u32,
    pub zombie: Option<Zombie>,
    /// A job-control change not yet reported to a wait with WUNTRACED or
    /// WCONTINUED.
    pub stop_event: Option<StopEvent>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum StopEvent {
    Stopped(i32),
    Continued,
}

/// What a wait found.
#[derive(Clone, Copy)]
pub enum WaitResult {
    Exited(Zombie),
    Stopped(i32),
    Continued,
}

/// What a wait4/waitid looks for among `parent`'s children: exits with
/// `exited`, stops with `stopped` (WUNTRACED), continues with `continued`
/// (WCONTINUED); `reap` takes what it reports (all but WNOWAIT).
#[derive(Clone, Copy, Debug)]
pub struct WaitQuery {
    pub parent: u32,
    pub which: WaitFor,
    pub reap: bool,
    pub exited: bool,
    pub stopped: bool,
    pub continued: bool,
}

/// Which children a wait is for (wait4's pid argument, waitid's idtype).
#[derive(Clone, Copy, Debug)]
pub enum WaitFor {
    Any,
    Pid(u32),
    Group(u32),
}

/// The first program's pid: Linux's init, the parent of orphans while it lives.
pub const FIRST_PID: u32 = 1;
/// The parent nomu itself stands for (ppid 0): of the first program, and of
/// orphans once the first program has ended.
const NOMU: u32 = 0;

#[derive(Default)]
pub struct Tasks {
    table: Mutex<BTreeMap<u32, Task>>,
    /// A task exited or stopped or continued (for waiting parents).
    pub changed: Event,
    /// The first program exited, or the last live process did: nomu's own
    /// waits. Apart from `changed` so nomu's main thread is not woken by
    /// every exit.
    root_exited: Condvar,
}

impl Tasks {
    pub fn insert(&self, task: Task) {
        self.table.lock().unwrap().insert(task.process.pid, task);
    }

    pub fn ppid(&self, pid: u32) -> u32 {
        self.table.lock().unwrap().get(&pid).map_or(0, |t| t.ppid)
    }

    /// (pgid, sid) of a live or zombie process.
    pub fn ids(&self, pid: u32) -> Option<(u32, u32)> {
        self.table.lock().unwrap().get(&pid).map(|t| (t.pgid, t.sid))
    }

    pub fn process(&self, pid: u32) -> Option<Arc<Process>> {
        self.table.lock().unwrap().get(&pid).filter(|t| t.zombie.is_none()).map(|t| t.process.clone())
    }

    /// Whether `pid` exists, alive or as a zombie (kill(pid, 0) succeeds on both).
    pub fn exists(&self, pid: u32) -> bool {
        self.table.lock().unwrap().contains_key(&pid)
    }

    /// Live processes in a process group.
    pub fn group_members(&self, pgid: u32) -> Vec<Arc<Process>> {
        let table = self.table.lock().unwrap();
        table.values().filter(|t| t.pgid == pgid && t.zombie.is_none()).map(|t| t.process.clone()).collect()
    }

    /// Every live process (kill(-1, ...)).
    pub fn all_live(&self) -> Vec<Arc<Process>> {
        self.table.lock().unwrap().values().filter(|t| t.zombie.is_none()).map(|t| t.process.clone()).collect()
    }

    /// setpgid(2) by `caller` for `pid` (0: the caller) into `pgid` (0: its own pid).
    pub fn setpgid(&self, caller: u32, pid: u32, pgid: u32) -> Result<(), Errno> {
        let mut table = self.table.lock().unwrap();
        let pid = if pid == 0 { caller } else { pid };
        let pgid = if pgid == 0 { pid } else { pgid };
        let caller_sid = table.get(&caller).map(|t| t.sid).ok_or(Errno::ESRCH)?;
        let target = table.get(&pid).ok_or(Errno::ESRCH)?;
        if pid != caller && target.ppid != caller {
            return Err(Errno::ESRCH);
        }
        if target.sid != caller_sid {
            return Err(Errno::EPERM);
        }
        if target.sid == pid {
            return Err(Errno::EPERM); // a session leader cannot move
        }
        if pgid != pid && !table.values().any(|t| t.pgid == pgid && t.sid == caller_sid) {
            return Err(Errno::EPERM);
        }
        table.get_mut(&pid).unwrap().pgid = pgid;
        Ok(())
    }

    /// setsid(2): a new session and group led by `pid`.
    pub fn setsid(&self, pid: u32) -> Result<u32, Errno> {
        let mut table = self.table.lock().unwrap();
        if table.values().any(|t| t.pgid == pid) {
            return Err(Errno::EPERM);
        }
        let t = table.get_mut(&pid).ok_or(Errno::ESRCH)?;
        t.pgid = pid;
        t.sid = pid;
        Ok(pid)
    }

    /// Records that `pid` ended. Its children go to the first program
    /// (FIRST_PID) while it lives, else to nomu itself, which reaps them as
    /// they end. Unless its parent ignores SIGCHLD (or is nomu) it stays a
    /// zombie until reaped.
    /// `notify_parent` runs (under the table lock, as Linux sends SIGCHLD
    /// under tasklist_lock) before any waiter can see the zombie.
    pub fn exit(&self, pid: u32, status: ExitStatus, rusage: libc::rusage, notify_parent: impl FnOnce(&Process)) {
        let mut table = self.table.lock().unwrap();
        let first_alive = pid != FIRST_PID && table.get(&FIRST_PID).is_some_and(|t| t.zombie.is_none());
        let heir = if first_alive { FIRST_PID } else { NOMU };
        for t in table.values_mut() {
            if t.ppid == pid {
                t.ppid = heir;
            }
        }
        // nomu reaps what it inherited dead.
        table.retain(|&p, t| p == FIRST_PID || t.ppid != NOMU || t.zombie.is_none());
        let ppid = table.get(&pid).map_or(NOMU, |t| t.ppid);
        if let Some(parent) = table.get(&ppid).filter(|p| p.zombie.is_none()) {
            notify_parent(&parent.process);
        }
        let parent_ignores = table.get(&ppid).is_some_and(|p| p.process.signals.lock().unwrap().reaps_children());
        if pid != FIRST_PID && (parent_ignores || ppid == NOMU) {
            table.remove(&pid);
        } else if let Some(t) = table.get_mut(&pid) {
            t.zombie = Some(Zombie { status, rusage });
        }
        let none_alive = table.values().all(|t| t.zombie.is_some());
        // Woken waiters must not find the lock still held.
        drop(table);
        if pid == FIRST_PID || none_alive {
            self.root_exited.notify_all();
        }
        self.changed.notify();
    }

    /// Removes `pid`, a child whose first thread could not start: it never
    /// ran, so there is no exit to report and no SIGCHLD.
    pub fn forget_unborn(&self, pid: u32) {
        self.table.lock().unwrap().remove(&pid);
        self.changed.notify();
    }

    /// Blocks until no guest process is alive: nomu's wait for what the
    /// first program left running in the background when it ended.
    pub fn wait_until_none_alive(&self) {
        let mut table = self.table.lock().unwrap();
        while table.values().any(|t| t.zombie.is_none()) {
            table = self.root_exited.wait(table).unwrap();
        }
    }

    /// Stops or continues `process` and records that for its parent's
    /// wait, as one step under the table's lock (so a stop and a continue
    /// racing each other are recorded in the order they happened). False
    /// when there was nothing to do: already stopped, or not stopped.
    pub fn stop_event(&self, process: &Process, event: StopEvent) -> bool {
        use std::sync::atomic::Ordering;
        let mut table = self.table.lock().unwrap();
        let changed = match event {
            StopEvent::Stopped(sig) => {
                process.stopped.compare_exchange(0, sig, Ordering::AcqRel, Ordering::Acquire).is_ok()
            }
            StopEvent::Continued => process.stopped.swap(0, Ordering::AcqRel) != 0,
        };
        if !changed {
            return false;
        }
        if let Some(t) = table.get_mut(&process.pid) {
            t.stop_event = Some(event);
        }
        drop(table);
        self.changed.notify();
        true
    }

    /// The parent of `pid`, if alive.
    pub fn parent(&self, pid: u32) -> Option<Arc<Process>> {
        let table = self.table.lock().unwrap();
        let ppid = table.get(&pid)?.ppid;
        table.get(&ppid).filter(|t| t.zombie.is_none()).map(|t| t.process.clone())
    }

    /// One look for a child `q` can report: Ok(None) when none is ready
    /// yet, ECHILD when no child matches at all. The waiting (on `changed`)
    /// is the caller's.
    pub fn find_waitable(&self, q: &WaitQuery) -> Result<Option<(u32, WaitResult)>, Errno> {
        let mut table = self.table.lock().unwrap();
        let parent_pgid = table.get(&q.parent).map_or(0, |t| t.pgid);
        let mut any = false;
        let mut ready = None;
        for (&pid, t) in table.iter() {
            let matches = t.ppid == q.parent
                && match q.which {
                    WaitFor::Any => true,
                    WaitFor::Pid(p) => p == pid,
                    WaitFor::Group(0) => t.pgid == parent_pgid,
                    WaitFor::Group(g) => t.pgid == g,
                };
            // A zombie is no child at all for a wait without WEXITED
            // (Linux's wait_task_zombie leaves notask_error alone).
            if !matches || (t.zombie.is_some() && !q.exited) {
                continue;
            }
            any = true;
            match (t.zombie, t.stop_event) {
                (Some(z), _) => ready = Some((pid, WaitResult::Exited(z))),
                (None, Some(StopEvent::Stopped(sig))) if q.stopped => ready = Some((pid, WaitResult::Stopped(sig))),
                (None, Some(StopEvent::Continued)) if q.continued => ready = Some((pid, WaitResult::Continued)),
                _ => {}
            }
            if ready.is_some() {
                break;
            }
        }
        if !any {
            return Err(Errno::ECHILD);
        }
        if let Some((pid, r)) = ready {
            if q.reap {
                match r {
                    WaitResult::Exited(_) => {
                        table.remove(&pid);
                    }
                    _ => table.get_mut(&pid).unwrap().stop_event = None,
                }
            }
        }
        Ok(ready)
    }

    /// Blocks until `pid`, a task without a guest parent, has exited and
    /// returns how (nomu waits for init).
    pub fn wait_for_exit(&self, pid: u32) -> ExitStatus {
        let mut table = self.table.lock().unwrap();
        loop {
            match table.get(&pid) {
                Some(Task { zombie: Some(z), .. }) => return z.status,
                None => return ExitStatus::Code(0),
                _ => table = self.root_exited.wait(table).unwrap(),
            }
        }
    }
}
