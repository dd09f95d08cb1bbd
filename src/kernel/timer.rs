//! Timers: ITIMER_REAL (alarm, setitimer), POSIX timers (timer_create),
//! and those on a process's CPU time: ITIMER_VIRTUAL, ITIMER_PROF and
//! RLIMIT_CPU. One kernel thread sleeps until the earliest deadline and
//! sends the timers' signals, re-arming interval timers.
//!
//! Linux checks CPU-time timers at each tick of a running thread. nomu has
//! no tick, so the timer thread looks at a process's CPU time (its
//! threads', [`Process::cpu_time`]) when its nearest CPU deadline could
//! have been reached at the earliest: the time left divided by the CPUs
//! that could be running it. So it fires late by at most
//! [`MIN_CPU_CHECK`] of wall time per CPU, and an idle process with a
//! timer armed costs a look now and then (about log2(left / 1 ms) looks
//! per expiry when it does run).

use super::process::Process;
use super::signal::SigInfo;
use super::Kernel;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// A process's real-time interval timer.
#[derive(Clone, Copy, Default)]
pub struct RealTimer {
    pub deadline: Option<Instant>,
    pub interval: Duration,
    /// Bumped on every change, so a superseded queue entry is ignored.
    generation: u64,
}

/// What a queue entry is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Key {
    Real {
        pid: u32,
    },
    Posix {
        pid: u32,
        id: i32,
    },
    /// A look at the process's CPU time ([`CpuTimers`]).
    Cpu {
        pid: u32,
    },
}

/// A process's CPU-time interval timer (ITIMER_VIRTUAL on its user time,
/// ITIMER_PROF on its user and system time): it fires when that time
/// reaches `expires` (zero: off), then every `interval` after.
#[derive(Clone, Copy, Default)]
pub struct CpuTimer {
    pub expires: Duration,
    pub interval: Duration,
}

impl CpuTimer {
    /// Whether it fires at CPU time `now`; if so it moves to its next
    /// expiry (once, as Linux's check_cpu_itimer: however far behind, one
    /// signal a look) or goes off.
    fn fire_at(&mut self, now: Duration) -> bool {
        if self.expires.is_zero() || now < self.expires {
            return false;
        }
        self.expires = if self.interval.is_zero() { Duration::ZERO } else { self.expires + self.interval };
        true
    }

    /// Its setting as getitimer shows it at CPU time `now`: (interval,
    /// time left). A timer due but not yet seen reads as 1 us left, as an
    /// ITIMER_REAL about to fire does.
    pub fn setting(&self, now: Duration) -> (Duration, Duration) {
        let left = match self.expires {
            e if e.is_zero() => Duration::ZERO,
            e if e <= now => Duration::from_micros(1),
            e => e - now,
        };
        (self.interval, left)
    }
}

/// What a process keeps on its CPU time: its two itimers (Linux's
/// signal->it[]); RLIMIT_CPU is in its rlimits. Not inherited by a
/// forked child; kept across execve.
#[derive(Default)]
pub struct CpuTimers {
    pub virt: CpuTimer,
    pub prof: CpuTimer,
    /// Bumped on every change, so a superseded look is dropped.
    generation: u64,
}

/// The least wall time between two looks at a process's CPU time (Linux
/// looks at each tick, 4 ms on Debian's kernels).
const MIN_CPU_CHECK: Duration = Duration::from_millis(1);

#[derive(Default)]
pub struct Timers {
    queue: Mutex<Vec<(Instant, Key, u64)>>,
    changed: Condvar,
    /// Generations of POSIX timers, unique across processes (a pid and a
    /// timer id may come back).
    generations: AtomicU64,
}

/// si_code of a POSIX timer's signal.
pub const SI_TIMER: i32 = -2;
/// Linux's DELAYTIMER_MAX: where an overrun count stops.
const DELAYTIMER_MAX: u32 = i32::MAX as u32;
/// An interval timer whose interval is shorter is looked at no more often
/// than this (its expirations are counted all the same); Linux too holds
/// such timers to a jiffy.
const MIN_REARM: Duration = Duration::from_micros(100);

/// How a POSIX timer tells of its expiry (struct sigevent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notify {
    /// SIGEV_NONE: nothing; timer_gettime shows it.
    None,
    /// SIGEV_SIGNAL (to the process) or SIGEV_THREAD_ID (to `thread`).
    Signal { signo: i32, value: u64, thread: Option<u32> },
}

/// A CPU-time clock (Linux's CPUCLOCK_PID, PERTHREAD and WHICH): of a
/// process, or of a thread of the process that uses it, named by its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuClock {
    pub id: u32,
    pub thread: bool,
    /// CPUCLOCK_VIRT: user time only (else user and system time).
    pub user_only: bool,
}

impl CpuClock {
    /// Its time now, `owner`'s clock (a thread clock names one of its
    /// threads); None once its thread or process is gone.
    pub fn now(&self, kernel: &Kernel, owner: &Process) -> Option<Duration> {
        let (user, system) = if self.thread {
            let t = owner.threads.lock().unwrap().iter().find(|t| t.tid() == self.id).cloned()?;
            t.cpu_time()
        } else if self.id == owner.pid {
            owner.cpu_time()
        } else {
            kernel.tasks.process(self.id)?.cpu_time()
        };
        Some(if self.user_only { user } else { user + system })
    }
}

/// Where a wall-clock timer's time line starts: its deadlines are
/// Durations since, as a CPU clock's are its CPU time.
fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Now on the wall clocks' time line ([`epoch`]).
pub fn wall_now() -> Duration {
    Instant::now() - epoch()
}

/// `at` on the wall clocks' time line.
pub fn wall_time(at: Instant) -> Duration {
    at.saturating_duration_since(epoch())
}

/// When to look at a timer due at `deadline` on its time line, where it
/// is `now`: then, on a wall clock; on a CPU clock (`cpu`), when it could
/// be reached at the earliest, every CPU running its threads.
fn look_at(cpu: bool, deadline: Duration, now: Duration) -> Instant {
    if cpu {
        Instant::now() + cpu_look_interval(deadline.saturating_sub(now))
    } else {
        epoch() + deadline
    }
}

/// A POSIX timer (timer_create).
pub struct PosixTimer {
    pub clock: i32,
    /// The CPU-time clock it runs on; None: a wall clock (`clock`).
    pub cpu: Option<CpuClock>,
    pub notify: Notify,
    /// When it expires next, on its time line: since [`epoch`] on a wall
    /// clock, its clock's CPU time on a CPU clock.
    pub deadline: Option<Duration>,
    pub interval: Duration,
    generation: u64,
    /// Its signal is queued and not yet taken: further expirations are
    /// overruns.
    pending: bool,
    overrun: u32,
    /// The overrun count of the last signal taken (timer_getoverrun).
    pub overrun_last: u32,
}

/// A process's POSIX timers, by id.
#[derive(Default)]
pub struct PosixTimers {
    timers: BTreeMap<i32, PosixTimer>,
    next_id: i32,
}

impl PosixTimers {
    /// A new disarmed timer; its id (ids count up from 0, as Linux's, and
    /// are not reused until they wrap).
    pub fn create(&mut self, clock: i32, cpu: Option<CpuClock>, notify: impl FnOnce(i32) -> Notify) -> i32 {
        let mut id = self.next_id;
        while self.timers.contains_key(&id) {
            id = id.checked_add(1).unwrap_or(0);
        }
        self.next_id = id.checked_add(1).unwrap_or(0);
        let timer = PosixTimer {
            clock,
            cpu,
            notify: notify(id),
            deadline: None,
            interval: Duration::ZERO,
            generation: 0,
            pending: false,
            overrun: 0,
            overrun_last: 0,
        };
        self.timers.insert(id, timer);
        id
    }

    pub fn len(&self) -> usize {
        self.timers.len()
    }

    pub fn get(&self, id: i32) -> Option<&PosixTimer> {
        self.timers.get(&id)
    }

    pub fn delete(&mut self, id: i32) -> bool {
        self.timers.remove(&id).is_some()
    }

    /// execve and exit: every timer goes.
    pub fn clear(&mut self) {
        self.timers.clear();
    }
}

impl Timers {
    fn push(&self, when: Instant, key: Key, generation: u64) {
        self.queue.lock().unwrap().push((when, key, generation));
        self.changed.notify_all();
    }

    /// Sets `pid`'s timer (None disarms it); returns the old setting.
    pub fn set(&self, timer: &Mutex<RealTimer>, pid: u32, deadline: Option<Instant>, interval: Duration) -> RealTimer {
        let mut t = timer.lock().unwrap();
        let old = *t;
        t.generation += 1;
        t.deadline = deadline;
        t.interval = interval;
        if let Some(d) = deadline {
            self.push(d, Key::Real { pid }, t.generation);
        }
        old
    }

    /// Arms (or with None disarms) POSIX timer `id` of `process` to expire
    /// at `deadline` on its time line, where it is `now`; the overrun
    /// count starts again. EINVAL: no such timer.
    pub fn set_posix(
        &self,
        process: &Process,
        id: i32,
        deadline: Option<Duration>,
        interval: Duration,
        now: Duration,
    ) -> Result<(Option<Duration>, Duration), crate::abi::errno::Errno> {
        let mut timers = process.posix_timers.lock().unwrap();
        let t = timers.timers.get_mut(&id).ok_or(crate::abi::errno::Errno::EINVAL)?;
        let old = (t.deadline, t.interval);
        // Never 0 in its low half, which a timer's siginfo carries.
        t.generation = loop {
            let g = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
            if g as u32 != 0 {
                break g;
            }
        };
        t.deadline = deadline;
        t.interval = if deadline.is_some() { interval } else { Duration::ZERO };
        t.overrun = 0;
        if let Some(d) = deadline {
            self.push(look_at(t.cpu.is_some(), d, now), Key::Posix { pid: process.pid, id }, t.generation);
        }
        Ok(old)
    }

    /// Sets `process`'s ITIMER_VIRTUAL (`virt`) or ITIMER_PROF to fire
    /// after `value` more of its CPU time (zero: off), then every
    /// `interval`; returns the old setting as getitimer shows it.
    pub fn set_cpu(&self, process: &Process, virt: bool, value: Duration, interval: Duration) -> (Duration, Duration) {
        let (user, system) = process.cpu_time();
        let now = if virt { user } else { user + system };
        let old = {
            let mut timers = process.cpu_timers.lock().unwrap();
            let t = if virt { &mut timers.virt } else { &mut timers.prof };
            let old = t.setting(now);
            *t = CpuTimer { expires: if value.is_zero() { value } else { now + value }, interval };
            old
        };
        self.watch_cpu(process);
        old
    }

    /// Starts looking at `process`'s CPU time afresh: after a change of its
    /// itimers or RLIMIT_CPU, and for a new process with RLIMIT_CPU set.
    pub fn watch_cpu(&self, process: &Process) {
        let generation = {
            let mut t = process.cpu_timers.lock().unwrap();
            t.generation += 1;
            t.generation
        };
        let (user, system) = process.cpu_time();
        self.look_at_cpu_later(process, generation, user, user + system);
    }

    /// Queues the next look at `process`'s CPU time (now `user` and
    /// `prof`): when its nearest deadline could be reached, every CPU
    /// running it. None armed: no look.
    fn look_at_cpu_later(&self, process: &Process, generation: u64, user: Duration, prof: Duration) {
        let limit = process.rlimit(libc::RLIMIT_CPU);
        let left = {
            let t = process.cpu_timers.lock().unwrap();
            let secs = |s: u64| (s != libc::RLIM_INFINITY).then(|| Duration::from_secs(s));
            [
                (!t.virt.expires.is_zero()).then(|| t.virt.expires.saturating_sub(user)),
                (!t.prof.expires.is_zero()).then(|| t.prof.expires.saturating_sub(prof)),
                secs(limit.rlim_cur).map(|d| d.saturating_sub(prof)),
                secs(limit.rlim_max).map(|d| d.saturating_sub(prof)),
            ]
            .into_iter()
            .flatten()
            .min()
        };
        let Some(left) = left else { return };
        self.push(Instant::now() + cpu_look_interval(left), Key::Cpu { pid: process.pid }, generation);
    }

    /// A look at process `pid`'s CPU time: its itimers' signals, and
    /// RLIMIT_CPU's (Linux's check_process_timers): SIGKILL at the hard
    /// limit; at the soft one SIGXCPU, the soft limit raised by a second
    /// for the next.
    fn look_at_cpu(&self, kernel: &Kernel, pid: u32, generation: u64) {
        let Some(p) = kernel.tasks.process(pid) else { return };
        let (user, system) = p.cpu_time();
        let prof = user + system;
        let mut signals = Vec::new();
        {
            let mut t = p.cpu_timers.lock().unwrap();
            if t.generation != generation {
                return;
            }
            if t.virt.fire_at(user) {
                signals.push(libc::SIGVTALRM);
            }
            if t.prof.fire_at(prof) {
                signals.push(libc::SIGPROF);
            }
        }
        {
            let mut limits = p.rlimits.lock().unwrap();
            let cpu = &mut limits[libc::RLIMIT_CPU as usize];
            let reached = |s: u64| s != libc::RLIM_INFINITY && prof >= Duration::from_secs(s);
            if reached(cpu.rlim_max) {
                signals = vec![libc::SIGKILL];
            } else if reached(cpu.rlim_cur) {
                cpu.rlim_cur += 1;
                signals.push(libc::SIGXCPU);
            }
        }
        for &sig in &signals {
            kernel.signal_process(&p, SigInfo::kernel(sig));
        }
        if signals != [libc::SIGKILL] {
            self.look_at_cpu_later(&p, generation, user, prof);
        }
    }

    /// Body of the timer thread.
    pub fn run(&self, kernel: &Kernel) {
        let mut queue = self.queue.lock().unwrap();
        loop {
            let now = Instant::now();
            let (due, later): (Vec<_>, Vec<_>) = queue.drain(..).partition(|&(d, _, _)| d <= now);
            *queue = later;
            drop(queue);
            for (when, key, generation) in due {
                match key {
                    Key::Real { pid } => self.fire_real(kernel, when, pid, generation),
                    Key::Posix { pid, id } => self.fire_posix(kernel, pid, id, generation),
                    Key::Cpu { pid } => self.look_at_cpu(kernel, pid, generation),
                }
            }
            queue = self.queue.lock().unwrap();
            let next = queue.iter().map(|&(d, _, _)| d).min();
            queue = match next {
                Some(d) => self.changed.wait_timeout(queue, d.saturating_duration_since(Instant::now())).unwrap().0,
                None => self.changed.wait(queue).unwrap(),
            };
        }
    }

    fn fire_real(&self, kernel: &Kernel, when: Instant, pid: u32, generation: u64) {
        let Some(p) = kernel.tasks.process(pid) else { return };
        let mut t = p.real_timer.lock().unwrap();
        if t.generation != generation {
            return;
        }
        if t.interval.is_zero() {
            t.deadline = None;
        } else {
            let next = when + t.interval;
            t.deadline = Some(next);
            self.queue.lock().unwrap().push((next, Key::Real { pid }, generation));
        }
        drop(t);
        kernel.signal_process(&p, SigInfo::kernel(libc::SIGALRM));
    }

    /// A POSIX timer's expiry: its signal, unless the last one is still
    /// pending (then an overrun), and the next expiry of an interval timer
    /// (expirations the thread was too late for are overruns too).
    fn fire_posix(&self, kernel: &Kernel, pid: u32, id: i32, generation: u64) {
        let Some(p) = kernel.tasks.process(pid) else { return };
        // Now on its time line (read with no lock of the timers held); a
        // CPU clock whose thread or process is gone stops it.
        let Some(cpu) = p.posix_timers.lock().unwrap().get(id).map(|t| t.cpu) else { return };
        let Some(now) = cpu.map_or(Some(wall_now()), |c| c.now(kernel, &p)) else { return };
        // A signal counted as pending that is no longer queued was dropped
        // (its action became SIG_IGN, or a SIGCONT cancelled a stop
        // signal): the timer may queue another.
        let queued = p.threads.lock().unwrap().iter().any(|t| t.state.lock().unwrap().pending.has_timer_signal(id))
            || p.shared_pending.with(|s| s.has_timer_signal(id));
        let send = {
            let mut timers = p.posix_timers.lock().unwrap();
            let Some(t) = timers.timers.get_mut(&id) else { return };
            let Some(base) = t.deadline.filter(|_| t.generation == generation) else { return };
            t.pending &= queued;
            if base > now {
                self.push(look_at(cpu.is_some(), base, now), Key::Posix { pid, id }, generation);
                return;
            }
            let mut missed = 0u128;
            if t.interval.is_zero() {
                t.deadline = None;
            } else {
                missed = (now - base).as_nanos() / t.interval.as_nanos();
                let next = u32::try_from(missed + 1).ok().and_then(|n| t.interval.checked_mul(n)).map(|d| base + d);
                t.deadline = next;
                if let Some(next) = next {
                    let at = look_at(cpu.is_some(), next.max(now + MIN_REARM), now);
                    self.push(at, Key::Posix { pid, id }, generation);
                }
            }
            let missed = u32::try_from(missed).unwrap_or(DELAYTIMER_MAX);
            match t.notify {
                Notify::None => None,
                Notify::Signal { .. } if t.pending => {
                    t.overrun = t.overrun.saturating_add(missed).saturating_add(1).min(DELAYTIMER_MAX);
                    None
                }
                Notify::Signal { signo, value, thread } => {
                    t.overrun = missed.min(DELAYTIMER_MAX);
                    t.pending = true;
                    Some((timer_siginfo(signo, id, value, generation), thread))
                }
            }
        };
        let Some((info, thread)) = send else { return };
        let queued = match thread {
            Some(tid) => {
                let target = p.threads.lock().unwrap().iter().find(|t| t.tid() == tid).cloned();
                target.is_some_and(|t| kernel.signal_thread(&t, info))
            }
            None => kernel.signal_process(&p, info),
        };
        if !queued {
            // Ignored (or its thread is gone): nothing waits to be taken.
            if let Some(t) = p.posix_timers.lock().unwrap().timers.get_mut(&id) {
                t.pending = false;
            }
        }
    }
}

/// The wall time before a CPU clock with `left` to go could reach it,
/// every CPU running its threads: when to look at it next.
pub fn cpu_look_interval(left: Duration) -> Duration {
    (left / online_cpus()).max(MIN_CPU_CHECK)
}

/// The CPUs that could run a process's threads at once.
fn online_cpus() -> u32 {
    static CPUS: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32))
}

/// A POSIX timer's siginfo (Linux's _timer: si_tid, si_overrun, si_value,
/// and in si_sys_private, which the guest sees as 0, the generation of
/// the setting that queued it).
fn timer_siginfo(signo: i32, id: i32, value: u64, generation: u64) -> SigInfo {
    let mut i = SigInfo([0; 128]);
    i.0[0..4].copy_from_slice(&signo.to_le_bytes());
    i.0[8..12].copy_from_slice(&SI_TIMER.to_le_bytes());
    i.0[16..20].copy_from_slice(&id.to_le_bytes());
    i.0[24..32].copy_from_slice(&value.to_le_bytes());
    i.0[32..36].copy_from_slice(&(generation as u32).to_le_bytes());
    i
}

/// Takes signals with `take` (delivery, sigtimedwait or a signalfd read)
/// until one to hand to the guest: a timer's signal gets si_overrun, the
/// expirations since it was queued, and lets the timer queue it again; one
/// of a timer deleted or set again since it was queued is dropped, as
/// Linux (6.13 on) drops it.
pub fn take_signal(process: &Process, mut take: impl FnMut() -> Option<SigInfo>) -> Option<SigInfo> {
    loop {
        let mut info = take()?;
        if info.code() != SI_TIMER {
            return Some(info);
        }
        let id = i32::from_le_bytes(info.0[16..20].try_into().unwrap());
        let generation = u32::from_le_bytes(info.0[32..36].try_into().unwrap());
        info.0[32..36].fill(0);
        let mut timers = process.posix_timers.lock().unwrap();
        let Some(t) = timers.timers.get_mut(&id) else {
            // Deleted (or a sigqueue'd SI_TIMER naming no timer): gone.
            if generation != 0 {
                continue;
            }
            return Some(info);
        };
        if generation == 0 || !t.pending {
            // Not queued by a timer of this process.
            return Some(info);
        }
        t.pending = false;
        t.overrun_last = std::mem::take(&mut t.overrun);
        if t.generation as u32 != generation {
            t.overrun_last = 0;
            continue;
        }
        info.0[20..24].copy_from_slice(&(t.overrun_last as i32).to_le_bytes());
        return Some(info);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_cpu_timer_fires_once_a_look_and_moves_one_interval() {
        let mut t = CpuTimer { expires: ms(100), interval: ms(10) };
        assert!(!t.fire_at(ms(99)));
        assert_eq!(t.setting(ms(60)), (ms(10), ms(40)));
        // Looked at late (three intervals past): one signal, and the next
        // expiry one interval on, already due, so the next look fires too.
        assert!(t.fire_at(ms(130)));
        assert_eq!(t.expires, ms(110));
        assert_eq!(t.setting(ms(130)), (ms(10), Duration::from_micros(1)));
        assert!(t.fire_at(ms(130)));
        let mut once = CpuTimer { expires: ms(5), interval: Duration::ZERO };
        assert!(once.fire_at(ms(5)));
        assert_eq!(once.setting(ms(6)), (Duration::ZERO, Duration::ZERO));
        assert!(!once.fire_at(ms(1000)), "off once fired");
    }
}
