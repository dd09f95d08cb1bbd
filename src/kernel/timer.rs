//! ITIMER_REAL timers (alarm, setitimer): one kernel thread sleeps until the
//! earliest deadline and sends SIGALRM, re-arming interval timers.

use super::signal::SigInfo;
use super::Kernel;
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

#[derive(Default)]
pub struct Timers {
    queue: Mutex<Vec<(Instant, u32, u64)>>,
    changed: Condvar,
}

impl Timers {
    /// Sets `pid`'s timer (None disarms it); returns the old setting.
    pub fn set(&self, timer: &Mutex<RealTimer>, pid: u32, deadline: Option<Instant>, interval: Duration) -> RealTimer {
        let mut t = timer.lock().unwrap();
        let old = *t;
        t.generation += 1;
        t.deadline = deadline;
        t.interval = interval;
        if let Some(d) = deadline {
            self.queue.lock().unwrap().push((d, pid, t.generation));
            self.changed.notify_all();
        }
        old
    }

    /// Body of the timer thread.
    pub fn run(&self, kernel: &Kernel) {
        let mut queue = self.queue.lock().unwrap();
        loop {
            let now = Instant::now();
            let (due, later): (Vec<_>, Vec<_>) = queue.drain(..).partition(|&(d, _, _)| d <= now);
            *queue = later;
            drop(queue);
            for (when, pid, generation) in due {
                let Some(p) = kernel.tasks.process(pid) else { continue };
                let mut t = p.real_timer.lock().unwrap();
                if t.generation != generation {
                    continue;
                }
                if t.interval.is_zero() {
                    t.deadline = None;
                } else {
                    let next = when + t.interval;
                    t.deadline = Some(next);
                    self.queue.lock().unwrap().push((next, pid, generation));
                }
                drop(t);
                kernel.signal_process(&p, SigInfo::kernel(libc::SIGALRM));
            }
            queue = self.queue.lock().unwrap();
            let next = queue.iter().map(|&(d, _, _)| d).min();
            queue = match next {
                Some(d) => self.changed.wait_timeout(queue, d.saturating_duration_since(Instant::now())).unwrap().0,
                None => self.changed.wait(queue).unwrap(),
            };
        }
    }
}
