//! Scheduling attributes of a guest thread: nice value, policy and
//! real-time priority, and CPU affinity, with Linux's rules for changing
//! them (kernel/sched/syscalls.c, kernel/sys.c's setpriority).
//!
//! Nice values, policies and priorities are recorded, never applied to the
//! host (nomu's threads keep nomu's own); the affinity mask is applied to
//! the host thread that runs the guest thread's kernel side (see
//! syscall/sched.rs).

use super::cred::{Cred, CAP_SYS_NICE};
use super::process::Thread;
use crate::abi::errno::Errno;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub const SCHED_NORMAL: i32 = 0;
pub const SCHED_FIFO: i32 = 1;
pub const SCHED_RR: i32 = 2;
pub const SCHED_BATCH: i32 = 3;
pub const SCHED_IDLE: i32 = 5;
pub const SCHED_DEADLINE: i32 = 6;
/// sched_ext's class: a fair policy when no BPF scheduler is loaded.
pub const SCHED_EXT: i32 = 7;
pub const SCHED_RESET_ON_FORK: i32 = 0x4000_0000;
/// Real-time priorities are 1..=MAX_RT_PRIO-1.
pub const MAX_RT_PRIO: i32 = 100;
pub const MIN_NICE: i32 = -20;
pub const MAX_NICE: i32 = 19;

pub fn rt_policy(policy: i32) -> bool {
    policy == SCHED_FIFO || policy == SCHED_RR
}

fn valid_policy(policy: i32) -> bool {
    matches!(policy, SCHED_NORMAL | SCHED_FIFO | SCHED_RR | SCHED_BATCH | SCHED_IDLE | SCHED_DEADLINE | SCHED_EXT)
}

/// sched_get_priority_max(2) and _min(2).
pub fn priority_range(policy: i32) -> Result<(i32, i32), Errno> {
    match policy {
        SCHED_FIFO | SCHED_RR => Ok((1, MAX_RT_PRIO - 1)),
        SCHED_NORMAL | SCHED_BATCH | SCHED_IDLE | SCHED_DEADLINE | SCHED_EXT => Ok((0, 0)),
        _ => Err(Errno::EINVAL),
    }
}

/// RLIMIT_NICE's scale: nice 19 is 1, nice -20 is 40.
pub fn nice_to_rlimit(nice: i32) -> u64 {
    (MAX_NICE - nice + 1) as u64
}

/// check_same_owner: `asker`'s effective uid is `target`'s real or
/// effective one.
pub fn owns(asker: &Cred, target: &Cred) -> bool {
    asker.euid == target.euid || asker.euid == target.uid
}

/// Set once any guest thread set a CPU affinity: from then on every host
/// thread is given the mask of the guest thread it starts to run (host
/// threads are reused, and a new one inherits its creator's mask).
static AFFINITY_SET: AtomicBool = AtomicBool::new(false);

/// Records `mask` (already inside nomu's CPUs) as `thread`'s affinity and
/// applies it to the host thread running it.
pub fn set_affinity(thread: &Thread, mask: Vec<u8>) -> Result<(), Errno> {
    AFFINITY_SET.store(true, Ordering::SeqCst);
    let host_tid = thread.host_tid.load(Ordering::Relaxed);
    if host_tid != 0 {
        crate::host::sys::sched_setaffinity(host_tid, &mask)?;
    }
    let mask = (mask != crate::host::sys::nomu_affinity()).then(|| Arc::from(mask));
    thread.sched.lock().unwrap().affinity = mask;
    Ok(())
}

/// Gives the calling host thread the affinity of `thread`, which it is
/// about to run (or to run again, after a vfork child ran on it).
pub fn apply_affinity(thread: &Thread) {
    if !AFFINITY_SET.load(Ordering::SeqCst) {
        return;
    }
    let mask = thread.sched.lock().unwrap().affinity.clone();
    let mask = mask.as_deref().unwrap_or(crate::host::sys::nomu_affinity());
    let _ = crate::host::sys::sched_setaffinity(0, mask);
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedAttr {
    pub nice: i32,
    pub policy: i32,
    pub rt_priority: i32,
    pub reset_on_fork: bool,
    /// The CPU mask set by sched_setaffinity, as the host applied it; None:
    /// nomu's own.
    pub affinity: Option<Arc<[u8]>>,
    /// Its I/O priority (ioprio_set): class << 13 | level; 0 until set
    /// (IOPRIO_CLASS_NONE: the host's default by nice). Kept by nomu only:
    /// guests' I/O is nomu's on the host.
    pub ioprio: u16,
}

impl Default for SchedAttr {
    /// The first guest thread's: nomu's nice value, a normal policy.
    fn default() -> SchedAttr {
        SchedAttr {
            nice: crate::host::sys::host_nice(),
            policy: SCHED_NORMAL,
            rt_priority: 0,
            reset_on_fork: false,
            affinity: None,
            ioprio: 0,
        }
    }
}

const IOPRIO_CLASS_SHIFT: u32 = 13;
const IOPRIO_CLASS_NONE: u32 = 0;
const IOPRIO_CLASS_RT: u32 = 1;
const IOPRIO_CLASS_BE: u32 = 2;
const IOPRIO_CLASS_IDLE: u32 = 3;

/// Whether `cred` may set I/O priority `ioprio` (Linux's
/// ioprio_check_cap): the class is bits 13-15 and the level bits 0-2 (the
/// bits between are hints, kept); the real-time class takes CAP_SYS_NICE or
/// CAP_SYS_ADMIN, "none" only level 0, classes above idle are EINVAL. The
/// value kept is its low 16 bits (Linux's unsigned short).
pub fn check_ioprio(ioprio: i32, cred: &Cred) -> Result<u16, Errno> {
    let (class, level) = ((ioprio as u32 >> IOPRIO_CLASS_SHIFT) & 0x7, ioprio as u32 & 0x7);
    match class {
        IOPRIO_CLASS_RT if !cred.capable(CAP_SYS_NICE) && !cred.capable(super::cred::CAP_SYS_ADMIN) => {
            Err(Errno::EPERM)
        }
        IOPRIO_CLASS_NONE if level != 0 => Err(Errno::EINVAL),
        IOPRIO_CLASS_RT | IOPRIO_CLASS_BE | IOPRIO_CLASS_IDLE | IOPRIO_CLASS_NONE => Ok(ioprio as u16),
        _ => Err(Errno::EINVAL),
    }
}

/// Whether `asker` may set the I/O priority of a thread with `target`'s
/// credentials (Linux's set_task_ioprio: its real uid is the asker's real
/// or effective uid, or CAP_SYS_NICE).
pub fn may_set_ioprio(asker: &Cred, target: &Cred) -> bool {
    target.uid == asker.euid || target.uid == asker.uid || asker.capable(CAP_SYS_NICE)
}

/// Who asks, and the limits of the thread asked about.
pub struct Asker<'a> {
    pub cred: &'a Cred,
    /// The target's RLIMIT_NICE and RLIMIT_RTPRIO (soft).
    pub rlimit_nice: u64,
    pub rlimit_rtprio: u64,
}

impl Asker<'_> {
    pub fn owns(&self, target: &Cred) -> bool {
        owns(self.cred, target)
    }

    fn nice_reduction(&self, nice: i32) -> bool {
        nice_to_rlimit(nice) <= self.rlimit_nice
    }
}

impl SchedAttr {
    /// What a new thread or process starts with (sched_fork).
    pub fn for_child(&self) -> SchedAttr {
        let mut c = self.clone();
        if c.reset_on_fork {
            if rt_policy(c.policy) || c.policy == SCHED_DEADLINE {
                c.policy = SCHED_NORMAL;
                c.nice = 0;
                c.rt_priority = 0;
            } else if c.nice < 0 {
                c.nice = 0;
            }
            c.reset_on_fork = false;
        }
        c
    }

    /// sched_getscheduler(2)'s answer.
    pub fn policy_word(&self) -> i32 {
        self.policy | if self.reset_on_fork { SCHED_RESET_ON_FORK } else { 0 }
    }

    /// sched_getparam(2)'s priority.
    pub fn param(&self) -> i32 {
        if rt_policy(self.policy) {
            self.rt_priority
        } else {
            0
        }
    }

    /// sched_setscheduler(2) (`policy` None: sched_setparam, which keeps
    /// the policy), for a thread with credentials `target`.
    pub fn set_scheduler(
        &mut self,
        policy: Option<i32>,
        priority: i32,
        asker: &Asker,
        target: &Cred,
    ) -> Result<(), Errno> {
        let (policy, reset_on_fork) = match policy {
            None => (self.policy, self.reset_on_fork),
            Some(p) => (p & !SCHED_RESET_ON_FORK, p & SCHED_RESET_ON_FORK != 0),
        };
        if !valid_policy(policy) {
            return Err(Errno::EINVAL);
        }
        // SCHED_DEADLINE needs sched_setattr's runtime and deadline.
        if !(0..MAX_RT_PRIO).contains(&priority) || policy == SCHED_DEADLINE || rt_policy(policy) != (priority != 0) {
            return Err(Errno::EINVAL);
        }
        if !asker.cred.capable(CAP_SYS_NICE) {
            let mut allowed = true;
            if rt_policy(policy) {
                let rlim = asker.rlimit_rtprio;
                if policy != self.policy && rlim == 0 {
                    allowed = false;
                }
                if priority > self.rt_priority && priority as u64 > rlim {
                    allowed = false;
                }
            }
            if self.policy == SCHED_IDLE && policy != SCHED_IDLE && !asker.nice_reduction(self.nice) {
                allowed = false;
            }
            if !asker.owns(target) || (self.reset_on_fork && !reset_on_fork) {
                allowed = false;
            }
            if !allowed {
                return Err(Errno::EPERM);
            }
        }
        self.policy = policy;
        self.rt_priority = priority;
        self.reset_on_fork = reset_on_fork;
        Ok(())
    }

    /// setpriority(2) on one thread (set_one_prio): `nice` already clamped.
    pub fn set_nice(&mut self, nice: i32, asker: &Asker, target: &Cred) -> Result<(), Errno> {
        let cred = asker.cred;
        if target.uid != cred.euid && target.euid != cred.euid && !cred.capable(CAP_SYS_NICE) {
            return Err(Errno::EPERM);
        }
        if nice < self.nice && !asker.nice_reduction(nice) && !cred.capable(CAP_SYS_NICE) {
            return Err(Errno::EACCES);
        }
        self.nice = nice;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(uid: u32) -> Cred {
        let mut c = Cred::of_host();
        c.uid = uid;
        c.euid = uid;
        c.suid = uid;
        c.cap_effective = 0;
        c.cap_permitted = 0;
        c
    }

    fn normal() -> SchedAttr {
        SchedAttr { nice: 0, policy: SCHED_NORMAL, rt_priority: 0, reset_on_fork: false, affinity: None, ioprio: 0 }
    }

    #[test]
    fn io_priorities_are_checked_as_linux_checks_them() {
        let (me, root) = (user(1000), Cred::of_host());
        assert_eq!(check_ioprio(3 << 13, &me), Ok(3 << 13), "idle: anyone's");
        assert_eq!(check_ioprio(2 << 13 | 1 << 3, &me), Ok(2 << 13 | 1 << 3), "a hint is kept");
        assert_eq!(check_ioprio(0x10000 | 2 << 13 | 3, &me), Ok(2 << 13 | 3), "16 bits kept");
        assert_eq!(check_ioprio(1, &me), Err(Errno::EINVAL), "none: level 0 only");
        assert_eq!(check_ioprio(4 << 13, &me), Err(Errno::EINVAL));
        assert_eq!(check_ioprio(-1, &me), Err(Errno::EINVAL));
        assert_eq!(check_ioprio(1 << 13 | 2, &me), Err(Errno::EPERM), "real time: CAP_SYS_NICE");
        if root.capable(CAP_SYS_NICE) {
            assert_eq!(check_ioprio(1 << 13 | 2, &root), Ok(1 << 13 | 2));
        }
        assert!(may_set_ioprio(&me, &me));
        assert!(!may_set_ioprio(&me, &user(1001)));
    }

    #[test]
    fn priorities_match_their_policy() {
        let me = user(1000);
        let asker = Asker { cred: &me, rlimit_nice: 0, rlimit_rtprio: 99 };
        let mut s = normal();
        assert_eq!(s.set_scheduler(Some(SCHED_FIFO), 0, &asker, &me), Err(Errno::EINVAL));
        assert_eq!(s.set_scheduler(Some(SCHED_NORMAL), 1, &asker, &me), Err(Errno::EINVAL));
        assert_eq!(s.set_scheduler(Some(4), 0, &asker, &me), Err(Errno::EINVAL));
        assert_eq!(s.set_scheduler(Some(SCHED_DEADLINE), 0, &asker, &me), Err(Errno::EINVAL));
        assert_eq!(s.set_scheduler(Some(SCHED_RR), 100, &asker, &me), Err(Errno::EINVAL));
        s.set_scheduler(Some(SCHED_RR | SCHED_RESET_ON_FORK), 5, &asker, &me).unwrap();
        assert_eq!((s.policy_word(), s.param()), (SCHED_RR | SCHED_RESET_ON_FORK, 5));
        let child = s.for_child();
        assert_eq!((child.policy_word(), child.param()), (SCHED_NORMAL, 0));
    }

    #[test]
    fn unprivileged_limits() {
        let me = user(1000);
        let no_rt = Asker { cred: &me, rlimit_nice: 0, rlimit_rtprio: 0 };
        let mut s = normal();
        assert_eq!(s.set_scheduler(Some(SCHED_FIFO), 1, &no_rt, &me), Err(Errno::EPERM));
        assert_eq!(s.set_nice(-1, &no_rt, &me), Err(Errno::EACCES));
        s.set_nice(5, &no_rt, &me).unwrap();
        assert_eq!(s.set_nice(4, &no_rt, &me), Err(Errno::EACCES));
        let other = user(1001);
        assert_eq!(s.set_nice(6, &no_rt, &other), Err(Errno::EPERM));
        assert_eq!(s.set_scheduler(Some(SCHED_BATCH), 0, &no_rt, &other), Err(Errno::EPERM));
        // RLIMIT_NICE 25 allows nice down to -5.
        let nice25 = Asker { cred: &me, rlimit_nice: 25, rlimit_rtprio: 0 };
        s.set_nice(-5, &nice25, &me).unwrap();
        assert_eq!(s.set_nice(-6, &nice25, &me), Err(Errno::EACCES));
    }
}
