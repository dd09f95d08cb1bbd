//! RLIMIT_NPROC as Linux enforces it (kernel/fork.c copy_process,
//! kernel/sys.c flag_nproc_exceeded, fs/exec.c do_execveat_common): a user
//! (a real uid) may hold at most that many tasks, threads and processes
//! alike, zombies until they are reaped. A fork, vfork, clone or clone3
//! that would make one more is EAGAIN, unless the new task's real uid is
//! root's or its creator has CAP_SYS_RESOURCE or CAP_SYS_ADMIN. A setuid
//! into a user already over the limit succeeds (too many programs ignore
//! its errors), and the execve after it is EAGAIN instead.
//!
//! The count is made when asked, from the process table (under its lock,
//! so two forks cannot both take the last place), not kept as Linux's
//! ucounts are: nomu has far fewer tasks than places that would have to
//! keep it right.

use super::cred::{CAP_SYS_ADMIN, CAP_SYS_RESOURCE};
use super::process::Thread;
use super::task::{Task, Tasks};
use crate::abi::errno::Errno;
use std::sync::atomic::Ordering;

/// Linux's INIT_USER: root's tasks are never held by the limit.
const ROOT: u32 = 0;

/// The limit one more task of `uid` must stay within.
#[derive(Clone, Copy, Debug)]
pub struct NprocLimit {
    uid: u32,
    max: u64,
}

impl NprocLimit {
    /// What a task made by `creator` is held to (copy_process): none for
    /// root's tasks, a creator with CAP_SYS_RESOURCE or CAP_SYS_ADMIN, or
    /// an unlimited RLIMIT_NPROC.
    pub fn for_new_task(creator: &Thread) -> Option<NprocLimit> {
        let cred = creator.cred();
        if cred.uid == ROOT || cred.capable(CAP_SYS_RESOURCE) || cred.capable(CAP_SYS_ADMIN) {
            return None;
        }
        let max = creator.process.rlimit(libc::RLIMIT_NPROC).rlim_cur;
        (max != libc::RLIM_INFINITY).then_some(NprocLimit { uid: cred.uid, max })
    }

    /// EAGAIN when one more task of its user would be over the limit.
    pub fn check<'a>(&self, tasks: impl Iterator<Item = &'a Task>) -> Result<(), Errno> {
        if count(tasks, self.uid) >= self.max {
            return Err(Errno::EAGAIN);
        }
        Ok(())
    }
}

/// The tasks of real uid `uid` (Linux's UCOUNT_RLIMIT_NPROC): every
/// thread of a live process that has not left, and a zombie once.
pub fn count<'a>(tasks: impl Iterator<Item = &'a Task>, uid: u32) -> u64 {
    tasks
        .map(|t| match &t.zombie {
            Some(z) => u64::from(z.uid == uid),
            None => {
                let threads = t.process.threads.lock().unwrap();
                threads
                    .iter()
                    .filter(|th| !th.left.load(Ordering::Acquire) && th.cred.lock().unwrap().uid == uid)
                    .count() as u64
            }
        })
        .sum()
}

/// flag_nproc_exceeded, after a set*uid that changed the real uid to
/// `new_uid` (the caller not yet counted as its): whether that user holds
/// more tasks than `max` already, so that the caller's next execve fails.
pub fn exceeded_after_setuid(tasks: &Tasks, new_uid: u32, max: u64) -> bool {
    new_uid != ROOT && max != libc::RLIM_INFINITY && tasks.with_all(|all| count(all, new_uid)) > max
}

/// execve's check (fs/exec.c): a caller flagged at its set*uid whose user
/// still holds more tasks than its limit gets EAGAIN (and stays flagged);
/// otherwise the flag goes.
pub fn check_exec(thread: &Thread, tasks: &Tasks) -> Result<(), Errno> {
    if !thread.nproc_exceeded.load(Ordering::Relaxed) {
        return Ok(());
    }
    let uid = thread.cred.lock().unwrap().uid;
    let max = thread.process.rlimit(libc::RLIMIT_NPROC).rlim_cur;
    if max != libc::RLIM_INFINITY && tasks.with_all(|all| count(all, uid)) > max {
        return Err(Errno::EAGAIN);
    }
    thread.nproc_exceeded.store(false, Ordering::Relaxed);
    Ok(())
}
