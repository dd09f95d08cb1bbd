//! The process table: parent links, process groups and sessions, zombies
//! and wait. One lock guards all relationships (Linux's tasklist_lock).

use super::process::{ExitStatus, Process};
use super::waiter::Event;
use crate::abi::errno::Errno;
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar};

/// What an exited, not yet reaped process leaves for its parent.
#[derive(Clone, Copy)]
pub struct Zombie {
    pub status: ExitStatus,
    pub rusage: libc::rusage,
    /// Its real uid when it ended (waitid's si_uid).
    pub uid: u32,
}

/// What the table needs of a process: its pid, and whether it ignores
/// SIGCHLD. Unit tests put stand-ins of their own in the table.
pub trait Member: Clone {
    fn pid(&self) -> u32;
    /// Its children are reaped as they end, never left as zombies
    /// (SIGCHLD ignored, or SA_NOCLDWAIT).
    fn reaps_children(&self) -> bool;
    /// It exited, or it is gone from the table (its pidfds' polls change).
    fn exited_or_reaped(&self) {}
    /// It is stopped by job control.
    fn stopped(&self) -> bool {
        false
    }
}

impl Member for Arc<Process> {
    fn pid(&self) -> u32 {
        self.pid
    }

    fn reaps_children(&self) -> bool {
        self.signals.lock().unwrap().reaps_children()
    }

    fn exited_or_reaped(&self) {
        self.pidfd_wait.notify();
    }

    fn stopped(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::Relaxed) != 0
    }
}

pub struct Task<P = Arc<Process>> {
    pub process: P,
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

pub struct Tasks<P = Arc<Process>> {
    table: crate::sync::OrderedMutex<BTreeMap<u32, Task<P>>, { crate::sync::TASKS }>,
    /// A task exited or stopped or continued (for waiting parents).
    pub changed: Event,
    /// The first program exited, or the last live process did: nomu's own
    /// waits. Apart from `changed` so nomu's main thread is not woken by
    /// every exit.
    root_exited: Condvar,
}

impl<P> Default for Tasks<P> {
    fn default() -> Self {
        Tasks {
            table: crate::sync::OrderedMutex::new(BTreeMap::new()),
            changed: Event::default(),
            root_exited: Condvar::new(),
        }
    }
}

impl<P: Member> Tasks<P> {
    pub fn insert(&self, task: Task<P>) {
        self.table.lock().unwrap().insert(task.process.pid(), task);
    }

    /// Inserts `task` unless `refuse`, shown every task already in the
    /// table, answers an error: under the table's lock, so no other insert
    /// comes between its look and this one (RLIMIT_NPROC's last place).
    pub fn insert_unless(
        &self,
        task: Task<P>,
        refuse: impl FnOnce(&mut dyn Iterator<Item = &Task<P>>) -> Result<(), Errno>,
    ) -> Result<(), Errno> {
        let mut table = self.table.lock().unwrap();
        refuse(&mut table.values())?;
        table.insert(task.process.pid(), task);
        Ok(())
    }

    /// `f` of every task, live or zombie, while none enters or leaves.
    pub fn with_all<R>(&self, f: impl FnOnce(&mut dyn Iterator<Item = &Task<P>>) -> R) -> R {
        f(&mut self.table.lock().unwrap().values())
    }

    pub fn ppid(&self, pid: u32) -> u32 {
        self.table.lock().unwrap().get(&pid).map_or(0, |t| t.ppid)
    }

    /// (pgid, sid) of a live or zombie process.
    pub fn ids(&self, pid: u32) -> Option<(u32, u32)> {
        self.table.lock().unwrap().get(&pid).map(|t| (t.pgid, t.sid))
    }

    pub fn process(&self, pid: u32) -> Option<P> {
        self.table.lock().unwrap().get(&pid).filter(|t| t.zombie.is_none()).map(|t| t.process.clone())
    }

    /// The process `pid` names while it is a zombie.
    pub fn zombie_process(&self, pid: u32) -> Option<P> {
        self.table.lock().unwrap().get(&pid).filter(|t| t.zombie.is_some()).map(|t| t.process.clone())
    }

    /// The process `pid` names, live or zombie, and whether it is a zombie
    /// (/proc lists zombies until they are reaped).
    pub fn process_or_zombie(&self, pid: u32) -> Option<(P, bool)> {
        self.table.lock().unwrap().get(&pid).map(|t| (t.process.clone(), t.zombie.is_some()))
    }

    /// Every pid in use by a process, live or zombie, in order.
    pub fn all_pids(&self) -> Vec<u32> {
        self.table.lock().unwrap().keys().copied().collect()
    }

    /// Whether `pid` exists, alive or as a zombie (kill(pid, 0) succeeds on both).
    pub fn exists(&self, pid: u32) -> bool {
        self.table.lock().unwrap().contains_key(&pid)
    }

    /// Whether a process (live or zombie), process group or session has
    /// this id.
    pub fn id_in_use(&self, id: u32) -> bool {
        let table = self.table.lock().unwrap();
        table.contains_key(&id) || table.values().any(|t| t.pgid == id || t.sid == id)
    }

    /// Live processes in a process group.
    pub fn group_members(&self, pgid: u32) -> Vec<P> {
        let table = self.table.lock().unwrap();
        table.values().filter(|t| t.pgid == pgid && t.zombie.is_none()).map(|t| t.process.clone()).collect()
    }

    /// Whether `f` holds for a live process (looked at under the table's
    /// lock, which comes before a process's own locks).
    pub fn any_live(&self, f: impl Fn(&P) -> bool) -> bool {
        self.table.lock().unwrap().values().any(|t| t.zombie.is_none() && f(&t.process))
    }

    /// Every live process (kill(-1, ...)).
    pub fn all_live(&self) -> Vec<P> {
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
    /// Returns the process groups the exit orphans that have a stopped
    /// member: POSIX has them sent SIGHUP, then SIGCONT (nothing would ever
    /// continue them: no process outside them in their session is a
    /// parent of theirs any more; Linux's kill_orphaned_pgrp). A shell
    /// that exits with stopped jobs so ends them.
    pub fn exit(&self, pid: u32, zombie: Zombie, notify_parent: impl FnOnce(&P)) -> Vec<u32> {
        let mut table = self.table.lock().unwrap();
        let first_alive = pid != FIRST_PID && table.get(&FIRST_PID).is_some_and(|t| t.zombie.is_none());
        let heir = if first_alive { FIRST_PID } else { NOMU };
        let mut children_groups = Vec::new();
        for t in table.values_mut() {
            if t.ppid == pid {
                t.ppid = heir;
                children_groups.push((t.pgid, t.sid));
            }
        }
        let orphaned = Self::orphaned_by_exit(&table, pid, children_groups);
        // nomu reaps what it inherited dead.
        let mut gone: Vec<P> = Vec::new();
        table.retain(|&p, t| {
            let keep = p == FIRST_PID || t.ppid != NOMU || t.zombie.is_none();
            if !keep {
                gone.push(t.process.clone());
            }
            keep
        });
        let ppid = table.get(&pid).map_or(NOMU, |t| t.ppid);
        if let Some(parent) = table.get(&ppid).filter(|p| p.zombie.is_none()) {
            notify_parent(&parent.process);
        }
        let parent_ignores = table.get(&ppid).is_some_and(|p| p.process.reaps_children());
        if pid != FIRST_PID && (parent_ignores || ppid == NOMU) {
            gone.extend(table.remove(&pid).map(|t| t.process));
        } else if let Some(t) = table.get_mut(&pid) {
            t.zombie = Some(zombie);
            gone.push(t.process.clone());
        }
        let none_alive = table.values().all(|t| t.zombie.is_some());
        // Woken waiters must not find the lock still held.
        drop(table);
        if pid == FIRST_PID || none_alive {
            self.root_exited.notify_all();
        }
        for p in gone {
            p.exited_or_reaped();
        }
        self.changed.notify();
        orphaned
    }

    /// The groups `pid`'s exit orphans (its children already reparented)
    /// that have a stopped member: its own, if its parent was its link
    /// outside it in its session, and each child's group that it was such
    /// a link for (`children_groups`: their (pgid, sid)).
    fn orphaned_by_exit(table: &BTreeMap<u32, Task<P>>, pid: u32, children_groups: Vec<(u32, u32)>) -> Vec<u32> {
        let Some(me) = table.get(&pid) else { return Vec::new() };
        let mut candidates = Vec::new();
        if table.get(&me.ppid).is_some_and(|p| p.pgid != me.pgid && p.sid == me.sid) {
            candidates.push(me.pgid);
        }
        for (pgid, sid) in children_groups {
            if pgid != me.pgid && sid == me.sid && !candidates.contains(&pgid) {
                candidates.push(pgid);
            }
        }
        // The members that are left: live, and not the one exiting.
        let members = |pgid: u32| table.iter().filter(move |&(&p, t)| t.pgid == pgid && p != pid && t.zombie.is_none());
        candidates.retain(|&pgid| {
            let linked = members(pgid).any(|(_, t)| {
                table.get(&t.ppid).is_some_and(|parent| {
                    parent.zombie.is_none() && t.ppid != pid && parent.pgid != pgid && parent.sid == t.sid
                })
            });
            !linked && members(pgid).any(|(_, t)| t.process.stopped())
        });
        candidates
    }

    /// Removes `pid`, a child whose first thread could not start: it never
    /// ran, so there is no exit to report and no SIGCHLD.
    pub fn forget_unborn(&self, pid: u32) {
        let gone = self.table.lock().unwrap().remove(&pid);
        if let Some(t) = gone {
            t.process.exited_or_reaped();
        }
        self.changed.notify();
    }

    /// Blocks until no guest process is alive: nomu's wait for what the
    /// first program left running in the background when it ended.
    pub fn wait_until_none_alive(&self) {
        let mut table = self.table.lock().unwrap();
        while table.values().any(|t| t.zombie.is_none()) {
            table = table.wait(&self.root_exited);
        }
    }

    /// The parent of `pid`, if alive.
    pub fn parent(&self, pid: u32) -> Option<P> {
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
                        let reaped = table.remove(&pid).map(|t| t.process);
                        drop(table);
                        if let Some(p) = reaped {
                            p.exited_or_reaped();
                        }
                        return Ok(ready);
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
                _ => table = table.wait(&self.root_exited),
            }
        }
    }
}

impl Tasks<Arc<Process>> {
    /// Where `process` is: alive, a zombie, or gone (asked of that very
    /// process, so a reused pid is not it).
    pub fn presence(&self, process: &Arc<Process>) -> crate::fs::pidfd::Presence {
        use crate::fs::pidfd::Presence;
        match self.table.lock().unwrap().get(&process.pid) {
            Some(t) if Arc::ptr_eq(&t.process, process) => {
                if t.zombie.is_some() {
                    Presence::Exited
                } else {
                    Presence::Alive
                }
            }
            _ => Presence::Reaped,
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process as the table sees it.
    #[derive(Clone)]
    struct Proc {
        pid: u32,
        ignores_sigchld: bool,
        stopped: bool,
    }

    impl Member for Proc {
        fn pid(&self) -> u32 {
            self.pid
        }
        fn reaps_children(&self) -> bool {
            self.ignores_sigchld
        }
        fn stopped(&self) -> bool {
            self.stopped
        }
    }

    /// (pid, ppid, pgid, sid) rows.
    fn table(rows: &[(u32, u32, u32, u32)]) -> Tasks<Proc> {
        let tasks = Tasks::default();
        for &(pid, ppid, pgid, sid) in rows {
            let process = Proc { pid, ignores_sigchld: false, stopped: false };
            tasks.insert(Task { process, ppid, pgid, sid, zombie: None, stop_event: None });
        }
        tasks
    }

    fn zombie(code: i32) -> Zombie {
        Zombie { status: ExitStatus::Code(code), rusage: crate::host::pod::zeroed(), uid: 0 }
    }

    fn make_zombie(tasks: &Tasks<Proc>, pid: u32, code: i32) {
        tasks.table.lock().unwrap().get_mut(&pid).unwrap().zombie = Some(zombie(code));
    }

    fn query(parent: u32, which: WaitFor) -> WaitQuery {
        WaitQuery { parent, which, reap: true, exited: true, stopped: false, continued: false }
    }

    fn found(r: Result<Option<(u32, WaitResult)>, Errno>) -> Option<(u32, &'static str)> {
        r.unwrap().map(|(pid, w)| {
            (
                pid,
                match w {
                    WaitResult::Exited(_) => "exited",
                    WaitResult::Stopped(_) => "stopped",
                    WaitResult::Continued => "continued",
                },
            )
        })
    }

    #[test]
    fn wait_selects_only_what_it_asks_for() {
        // 1 has children 2 (group 1), 3 and 4 (group 3); 5 is 2's child.
        let t = table(&[(1, 0, 1, 1), (2, 1, 1, 1), (3, 1, 3, 1), (4, 1, 3, 1), (5, 2, 1, 1)]);
        // Nothing ready yet; a pid that is not a child is ECHILD.
        assert_eq!(found(t.find_waitable(&query(1, WaitFor::Any))), None);
        assert_eq!(t.find_waitable(&query(1, WaitFor::Pid(5))).err(), Some(Errno::ECHILD));
        // A stop is seen only with WUNTRACED, and once.
        t.table.lock().unwrap().get_mut(&4).unwrap().stop_event = Some(StopEvent::Stopped(libc::SIGSTOP));
        assert_eq!(found(t.find_waitable(&query(1, WaitFor::Any))), None);
        let untraced = WaitQuery { stopped: true, ..query(1, WaitFor::Any) };
        assert_eq!(found(t.find_waitable(&untraced)), Some((4, "stopped")));
        assert_eq!(found(t.find_waitable(&untraced)), None);
        // A continue only with WCONTINUED; WNOWAIT leaves it.
        t.table.lock().unwrap().get_mut(&4).unwrap().stop_event = Some(StopEvent::Continued);
        let peek = WaitQuery { continued: true, reap: false, ..query(1, WaitFor::Any) };
        assert_eq!(found(t.find_waitable(&peek)), Some((4, "continued")));
        assert_eq!(found(t.find_waitable(&peek)), Some((4, "continued")));
        // Groups: 0 is the caller's own (1), others by number.
        make_zombie(&t, 3, 7);
        assert_eq!(found(t.find_waitable(&query(1, WaitFor::Group(0)))), None);
        assert_eq!(found(t.find_waitable(&query(1, WaitFor::Group(3)))), Some((3, "exited")));
        // Reaped: gone from the table.
        assert!(!t.exists(3));
        assert_eq!(t.find_waitable(&query(1, WaitFor::Pid(3))).err(), Some(Errno::ECHILD));
        // waitid without WEXITED does not count a zombie as a child at all.
        make_zombie(&t, 2, 0);
        let no_exits = WaitQuery { exited: false, stopped: true, ..query(1, WaitFor::Pid(2)) };
        assert_eq!(t.find_waitable(&no_exits).err(), Some(Errno::ECHILD));
        assert_eq!(found(t.find_waitable(&query(1, WaitFor::Pid(2)))), Some((2, "exited")));
    }

    #[test]
    fn orphans_go_to_the_first_program_then_to_nomu() {
        // 1 (the first program) -> 2 -> 3 and 4.
        let t = table(&[(1, 0, 1, 1), (2, 1, 1, 1), (3, 2, 1, 1), (4, 2, 1, 1)]);
        let mut told = Vec::new();
        t.exit(2, zombie(0), |p| told.push(p.pid));
        assert_eq!(told, [1], "the parent hears of it");
        assert_eq!((t.ppid(3), t.ppid(4)), (FIRST_PID, FIRST_PID));
        assert!(t.exists(2), "a zombie until its parent reaps it");
        // The first program ends: its children go to nomu, which reaps them
        // as they end (no zombie); it stays for nomu's own wait.
        t.exit(1, zombie(3), |_| panic!("no guest parent"));
        assert_eq!(t.ppid(3), NOMU);
        assert!(!t.exists(2), "nomu reaps what it inherited dead");
        t.exit(3, zombie(0), |_| panic!("no guest parent"));
        assert!(!t.exists(3));
        assert!(matches!(t.wait_for_exit(FIRST_PID), ExitStatus::Code(3)));
    }

    /// (pid, ppid, pgid, stopped) rows, all in session 10 but the first
    /// program's (session 1).
    fn stopped_table(rows: &[(u32, u32, u32, bool)]) -> Tasks<Proc> {
        let tasks = Tasks::default();
        for &(pid, ppid, pgid, stopped) in rows {
            let sid = if pid == FIRST_PID { 1 } else { 10 };
            let process = Proc { pid, ignores_sigchld: false, stopped };
            tasks.insert(Task { process, ppid, pgid, sid, zombie: None, stop_event: None });
        }
        tasks
    }

    #[test]
    fn an_exit_that_orphans_a_group_with_a_stopped_member_names_it() {
        // A shell (10, leading session 10) with a stopped job (11) and a
        // running one (12); the first program (1) is in another session.
        let rows = [(1, 0, 1, false), (10, 1, 10, false), (11, 10, 11, true), (12, 10, 12, false)];
        assert_eq!(stopped_table(&rows).exit(10, zombie(0), |_| {}), [11]);
        // Group 20: 20 (the shell's child, its link) and its stopped child
        // 21. 21's exit leaves the link; 20's leaves 21 with a parent (1)
        // in another session.
        let rows = [(1, 0, 1, false), (10, 1, 10, false), (20, 10, 20, false), (21, 20, 20, true)];
        assert!(stopped_table(&rows).exit(21, zombie(0), |_| {}).is_empty());
        assert_eq!(stopped_table(&rows).exit(20, zombie(0), |_| {}), [20]);
        // 20 in a group of its own (30) was the link of its child's group.
        let rows = [(1, 0, 1, false), (10, 1, 10, false), (20, 10, 30, false), (21, 20, 20, true)];
        assert_eq!(stopped_table(&rows).exit(20, zombie(0), |_| {}), [20]);
        // Nothing stopped: nothing to name.
        let rows = [(1, 0, 1, false), (10, 1, 10, false), (11, 10, 11, false)];
        assert!(stopped_table(&rows).exit(10, zombie(0), |_| {}).is_empty());
    }

    #[test]
    fn a_parent_that_ignores_sigchld_leaves_no_zombies() {
        let t = Tasks::default();
        for (pid, ppid, ignores_sigchld) in [(1, 0, true), (2, 1, false)] {
            let process = Proc { pid, ignores_sigchld, stopped: false };
            t.insert(Task { process, ppid, pgid: 1, sid: 1, zombie: None, stop_event: None });
        }
        t.exit(2, zombie(0), |_| {});
        assert!(!t.exists(2));
        assert_eq!(t.find_waitable(&query(1, WaitFor::Any)).err(), Some(Errno::ECHILD));
    }

    #[test]
    fn process_groups_and_sessions_follow_linux_rules() {
        // Session 1: 1 leads it; 2 and 3 are 1's children; 4 is 2's child.
        // Session 5: 5, a child of 1 that called setsid.
        let t = table(&[(1, 0, 1, 1), (2, 1, 1, 1), (3, 1, 1, 1), (4, 2, 1, 1), (5, 1, 5, 5)]);
        // A child into a group of its own, then a sibling into that group.
        assert_eq!(t.setpgid(1, 2, 0), Ok(()));
        assert_eq!(t.ids(2), Some((2, 1)));
        assert_eq!(t.setpgid(1, 3, 2), Ok(()));
        assert_eq!(t.ids(3), Some((2, 1)));
        // Into a group that does not exist in the session: EPERM.
        assert_eq!(t.setpgid(1, 3, 99), Err(Errno::EPERM));
        assert_eq!(t.setpgid(1, 3, 5), Err(Errno::EPERM), "group 5 is another session's");
        // Only oneself or one's own child: a grandchild is ESRCH, as is no one.
        assert_eq!(t.setpgid(1, 4, 0), Err(Errno::ESRCH));
        assert_eq!(t.setpgid(1, 42, 0), Err(Errno::ESRCH));
        // A child in another session: EPERM; a session leader cannot move.
        assert_eq!(t.setpgid(1, 5, 1), Err(Errno::EPERM));
        assert_eq!(t.setpgid(1, 1, 2), Err(Errno::EPERM));
        // setsid: not by a group leader; by anyone else, a session and a
        // group of its own.
        assert_eq!(t.setsid(2), Err(Errno::EPERM));
        assert_eq!(t.setsid(4), Ok(4));
        assert_eq!(t.ids(4), Some((4, 4)));
        let members: Vec<u32> = t.group_members(2).iter().map(|p| p.pid).collect();
        assert_eq!(members, [2, 3]);
    }
}
