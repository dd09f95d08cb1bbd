//! Signal numbers, names and dispositions. Delivery to guest handlers
//! comes with the process issue; today a signal whose action is the
//! default ends the process as Linux's default action would.

use crate::abi::KernelSigaction;

pub const NSIG: usize = 64;
pub const SIG_DFL: u64 = 0;
pub const SIG_IGN: u64 = 1;

const NAMES: [&str; 32] = [
    "0",
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGUSR1",
    "SIGSEGV",
    "SIGUSR2",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
    "SIGSTKFLT",
    "SIGCHLD",
    "SIGCONT",
    "SIGSTOP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGWINCH",
    "SIGIO",
    "SIGPWR",
    "SIGSYS",
];

pub fn name(sig: i32) -> String {
    match sig {
        1..=31 => NAMES[sig as usize].to_string(),
        34..=64 => format!("SIGRT_{}", sig - 34),
        _ => sig.to_string(),
    }
}

/// What a shell prints when a job dies of `sig` (bash's wording).
pub fn description(sig: i32) -> String {
    let d = match sig {
        libc::SIGHUP => "Hangup",
        libc::SIGINT => "Interrupt",
        libc::SIGQUIT => "Quit",
        libc::SIGILL => "Illegal instruction",
        libc::SIGTRAP => "Trace/breakpoint trap",
        libc::SIGABRT => "Aborted",
        libc::SIGBUS => "Bus error",
        libc::SIGFPE => "Floating point exception",
        libc::SIGKILL => "Killed",
        libc::SIGUSR1 => "User defined signal 1",
        libc::SIGSEGV => "Segmentation fault",
        libc::SIGUSR2 => "User defined signal 2",
        libc::SIGPIPE => "Broken pipe",
        libc::SIGALRM => "Alarm clock",
        libc::SIGTERM => "Terminated",
        libc::SIGXCPU => "CPU time limit exceeded",
        libc::SIGXFSZ => "File size limit exceeded",
        libc::SIGSYS => "Bad system call",
        _ => return format!("Signal {sig}"),
    };
    d.to_string()
}

/// Whether Linux's default action for `sig` dumps core.
pub fn default_dumps_core(sig: i32) -> bool {
    matches!(
        sig,
        libc::SIGQUIT
            | libc::SIGILL
            | libc::SIGTRAP
            | libc::SIGABRT
            | libc::SIGBUS
            | libc::SIGFPE
            | libc::SIGSEGV
            | libc::SIGXCPU
            | libc::SIGXFSZ
            | libc::SIGSYS
    )
}

pub fn bit(sig: i32) -> u64 {
    1u64 << (sig - 1)
}

/// SIGKILL and SIGSTOP can be neither caught, blocked nor ignored.
pub const UNBLOCKABLE: u64 = (1 << (libc::SIGKILL - 1)) | (1 << (libc::SIGSTOP - 1));

/// The per-process table of signal actions.
#[derive(Clone)]
pub struct SignalActions {
    actions: [KernelSigaction; NSIG],
}

impl Default for SignalActions {
    fn default() -> Self {
        SignalActions { actions: [KernelSigaction::default(); NSIG] }
    }
}

impl SignalActions {
    pub fn get(&self, sig: i32) -> KernelSigaction {
        self.actions[sig as usize - 1]
    }

    pub fn set(&mut self, sig: i32, act: KernelSigaction) {
        self.actions[sig as usize - 1] = act;
    }

    /// A parent that ignores SIGCHLD (or sets SA_NOCLDWAIT) has its
    /// children reaped automatically, as on Linux.
    pub fn reaps_children(&self) -> bool {
        let a = self.get(libc::SIGCHLD);
        a.handler == SIG_IGN || a.flags & libc::SA_NOCLDWAIT as u64 != 0
    }

    /// execve: caught signals go back to their default action; ignored
    /// ones stay ignored.
    pub fn reset_for_exec(&mut self) {
        for a in self.actions.iter_mut() {
            if a.handler != SIG_IGN {
                *a = KernelSigaction::default();
            }
        }
    }
}

/// A `siginfo_t` as Linux lays it out (128 bytes).
#[derive(Clone, Copy)]
pub struct SigInfo(pub [u8; 128]);

pub const SI_USER: i32 = 0;
pub use crate::abi::SI_KERNEL;
pub const SI_TKILL: i32 = -6;

impl SigInfo {
    fn put_i32(&mut self, off: usize, v: i32) {
        self.0[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn put_u64(&mut self, off: usize, v: u64) {
        self.0[off..off + 8].copy_from_slice(&v.to_le_bytes());
    }

    pub fn signo(&self) -> i32 {
        i32::from_le_bytes(self.0[0..4].try_into().unwrap())
    }

    pub fn code(&self) -> i32 {
        i32::from_le_bytes(self.0[8..12].try_into().unwrap())
    }

    fn base(signo: i32, code: i32) -> SigInfo {
        let mut i = SigInfo([0; 128]);
        i.put_i32(0, signo);
        i.put_i32(8, code);
        i
    }

    /// Sent by kill/tkill from process `pid`.
    pub fn from_process(signo: i32, code: i32, pid: u32, uid: u32) -> SigInfo {
        let mut i = Self::base(signo, code);
        i.put_i32(16, pid as i32);
        i.put_i32(20, uid as i32);
        i
    }

    /// A file's readiness (signal-driven I/O with F_SETSIG): si_code
    /// POLL_IN..POLL_HUP, si_band, si_fd.
    pub fn poll(signo: i32, code: i32, band: i64, fd: i32) -> SigInfo {
        let mut i = Self::base(signo, code);
        i.put_u64(16, band as u64);
        i.put_i32(24, fd);
        i
    }

    /// Raised by the kernel itself (SIGPIPE on EPIPE, timers).
    pub fn kernel(signo: i32) -> SigInfo {
        Self::base(signo, SI_KERNEL)
    }

    /// A fault at `addr` (si_addr), with the host's si_code.
    pub fn fault(signo: i32, code: i32, addr: u64) -> SigInfo {
        let mut i = Self::base(signo, code);
        i.put_u64(16, addr);
        i
    }

    /// SIGCHLD for a child that ended.
    pub fn child(code: i32, pid: u32, uid: u32, status: i32) -> SigInfo {
        let mut i = Self::base(libc::SIGCHLD, code);
        i.put_i32(16, pid as i32);
        i.put_i32(20, uid as i32);
        i.put_i32(24, status);
        i
    }
}

/// sigaltstack(2) state of a thread.
#[derive(Clone, Copy, Default, Debug)]
pub struct AltStack {
    pub sp: u64,
    pub size: u64,
    /// SS_AUTODISARM, or SS_DISABLE when none is set.
    pub flags: i32,
}

pub const SS_ONSTACK: i32 = 1;
pub const SS_DISABLE: i32 = 2;
pub const SS_AUTODISARM: i32 = 1 << 31;

impl AltStack {
    pub fn disabled() -> AltStack {
        AltStack { sp: 0, size: 0, flags: SS_DISABLE }
    }

    pub fn enabled(&self) -> bool {
        self.flags & SS_DISABLE == 0 && self.size > 0
    }

    pub fn contains(&self, sp: u64) -> bool {
        self.enabled() && sp > self.sp && sp - self.sp <= self.size
    }
}

/// Signals waiting for a thread: a set, and the siginfo of each pending
/// instance (standard signals do not queue on Linux either; real-time ones
/// do).
#[derive(Clone, Default)]
pub struct Pending {
    pub set: u64,
    /// Every pending instance, in the order sent: at most one per standard
    /// signal, up to RT_QUEUE_MAX per real-time one. Usually empty or
    /// nearly, and free to create (a thread is made per vfork).
    queue: Vec<SigInfo>,
}

/// The first real-time signal as the kernel numbers it (libc's SIGRTMIN is
/// higher: it keeps some for itself).
const KERNEL_SIGRTMIN: i32 = 32;
/// How many instances of one real-time signal may wait (Linux bounds them
/// all by RLIMIT_SIGPENDING; this keeps one guest from filling nomu).
const RT_QUEUE_MAX: usize = 1024;

impl Pending {
    /// Queues `info`: a standard signal already pending is not queued
    /// twice; real-time signals queue, each with its own siginfo. False
    /// when `info` was not queued.
    pub fn add(&mut self, info: SigInfo) -> bool {
        let sig = info.signo();
        let queued = || self.queue.iter().filter(|i| i.signo() == sig).count();
        let add = self.set & bit(sig) == 0 || (sig >= KERNEL_SIGRTMIN && queued() < RT_QUEUE_MAX);
        if add {
            self.queue.push(info);
        }
        self.set |= bit(sig);
        add
    }

    /// Drops a pending signal (SIGCONT cancels pending stops and back).
    pub fn discard(&mut self, sig: i32) {
        self.set &= !bit(sig);
        self.queue.retain(|i| i.signo() != sig);
    }

    /// Takes the lowest pending signal not in `blocked` (synchronous fault
    /// signals first, as Linux dequeues them); a real-time signal queued
    /// more than once stays pending with its next instance.
    pub fn take(&mut self, blocked: u64) -> Option<SigInfo> {
        self.take_of(self.set & !(blocked & !UNBLOCKABLE))
    }

    /// Takes the lowest pending signal in `set`, blocked or not (what a
    /// signalfd reads), in the same order.
    pub fn take_from(&mut self, set: u64) -> Option<SigInfo> {
        self.take_of(self.set & set)
    }

    /// Whether the signal of POSIX timer `id` (si_code SI_TIMER) is queued.
    pub fn has_timer_signal(&self, id: i32) -> bool {
        self.queue.iter().any(|i| i.code() == super::timer::SI_TIMER && i.0[16..20] == id.to_le_bytes())
    }

    /// Whether a signal in `set` is pending.
    pub fn has_any(&self, set: u64) -> bool {
        self.set & set != 0
    }

    fn take_of(&mut self, ready: u64) -> Option<SigInfo> {
        if ready == 0 {
            return None;
        }
        let sync = bit(libc::SIGSEGV) | bit(libc::SIGBUS) | bit(libc::SIGILL) | bit(libc::SIGTRAP) | bit(libc::SIGFPE);
        let pick = if ready & sync != 0 { ready & sync } else { ready };
        let sig = pick.trailing_zeros() as i32 + 1;
        let at = self.queue.iter().position(|i| i.signo() == sig);
        let info = at.map(|at| self.queue.remove(at));
        if !self.queue.iter().any(|i| i.signo() == sig) {
            self.set &= !bit(sig);
        }
        info
    }
}

/// What becomes of a syscall that a signal interrupted with one of the
/// kernel's restart codes, once signal delivery is done (Linux's
/// handle_signal, and its no-handler path in arch_do_signal_or_restart).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AfterSignal {
    /// Its `syscall` instruction runs again.
    Restart,
    /// It returns EINTR to the handler's caller.
    Eintr,
}

/// `handler_flags`: the sa_flags of the handler that is about to run, or
/// None when no handler runs (the signal was ignored, or stopped and
/// continued the process): then every restart code restarts.
pub fn after_signal(e: crate::abi::errno::Errno, handler_flags: Option<u64>) -> AfterSignal {
    use crate::abi::errno::Errno;
    let restart = match handler_flags {
        None => true,
        Some(flags) => e == Errno::ERESTARTNOINTR || (e == Errno::ERESTARTSYS && flags & libc::SA_RESTART as u64 != 0),
    };
    if restart {
        AfterSignal::Restart
    } else {
        AfterSignal::Eintr
    }
}

#[cfg(test)]
mod restart_tests {
    use super::*;
    use crate::abi::errno::Errno;

    #[test]
    fn restart_codes_as_linux_treats_them() {
        let sa_restart = Some(libc::SA_RESTART as u64);
        // No handler runs: every restart code restarts.
        for e in [Errno::ERESTARTSYS, Errno::ERESTARTNOINTR, Errno::ERESTARTNOHAND] {
            assert_eq!(after_signal(e, None), AfterSignal::Restart, "{e:?}");
        }
        // A handler without SA_RESTART: only ERESTARTNOINTR restarts.
        assert_eq!(after_signal(Errno::ERESTARTSYS, Some(0)), AfterSignal::Eintr);
        assert_eq!(after_signal(Errno::ERESTARTNOHAND, Some(0)), AfterSignal::Eintr);
        assert_eq!(after_signal(Errno::ERESTARTNOINTR, Some(0)), AfterSignal::Restart);
        // With SA_RESTART: ERESTARTSYS restarts, ERESTARTNOHAND (pause,
        // sigsuspend, nanosleep's kind) never does.
        assert_eq!(after_signal(Errno::ERESTARTSYS, sa_restart), AfterSignal::Restart);
        assert_eq!(after_signal(Errno::ERESTARTNOHAND, sa_restart), AfterSignal::Eintr);
        assert_eq!(after_signal(Errno::ERESTARTNOINTR, sa_restart), AfterSignal::Restart);
    }
}

#[cfg(test)]
mod pending_tests {
    use super::*;

    fn sent(sig: i32, value: u64) -> SigInfo {
        let mut i = SigInfo::base(sig, -1);
        i.put_u64(24, value);
        i
    }

    fn value(i: &SigInfo) -> u64 {
        u64::from_le_bytes(i.0[24..32].try_into().unwrap())
    }

    #[test]
    fn a_standard_signal_is_pending_once_with_its_first_siginfo() {
        let mut p = Pending::default();
        p.add(sent(libc::SIGUSR1, 1));
        p.add(sent(libc::SIGUSR1, 2));
        assert_eq!(value(&p.take(0).unwrap()), 1);
        assert!(p.take(0).is_none());
        assert_eq!(p.set, 0);
    }

    #[test]
    fn real_time_signals_queue_in_order_up_to_the_bound() {
        let mut p = Pending::default();
        let rt = KERNEL_SIGRTMIN + 2;
        for v in 0..RT_QUEUE_MAX as u64 + 5 {
            p.add(sent(rt, v));
        }
        for v in 0..RT_QUEUE_MAX as u64 {
            assert_eq!(p.set & bit(rt), bit(rt));
            assert_eq!(value(&p.take(0).unwrap()), v);
        }
        assert!(p.take(0).is_none());
        assert_eq!(p.set, 0);
    }

    #[test]
    fn lowest_unblocked_first_faults_before_all() {
        let mut p = Pending::default();
        for sig in [KERNEL_SIGRTMIN, libc::SIGTERM, libc::SIGUSR1, libc::SIGSEGV] {
            p.add(sent(sig, 0));
        }
        // Faults go first whatever their number.
        assert_eq!(p.take(0).unwrap().signo(), libc::SIGSEGV);
        assert_eq!(p.take(bit(libc::SIGUSR1)).unwrap().signo(), libc::SIGTERM);
        assert_eq!(p.take(bit(libc::SIGUSR1)).unwrap().signo(), KERNEL_SIGRTMIN);
        assert!(p.take(bit(libc::SIGUSR1)).is_none());
        assert_eq!(p.take(0).unwrap().signo(), libc::SIGUSR1);
        // SIGKILL and SIGSTOP cannot be blocked.
        p.add(sent(libc::SIGKILL, 0));
        assert_eq!(p.take(u64::MAX).unwrap().signo(), libc::SIGKILL);
    }

    #[test]
    fn discard_drops_every_queued_instance() {
        let mut p = Pending::default();
        let rt = KERNEL_SIGRTMIN + 1;
        p.add(sent(rt, 1));
        p.add(sent(rt, 2));
        p.discard(rt);
        assert!(p.take(0).is_none());
        p.add(sent(rt, 3));
        assert_eq!(value(&p.take(0).unwrap()), 3);
    }
}

/// Linux's default action for a signal.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DefaultAction {
    Terminate,
    CoreDump,
    Ignore,
    Stop,
    Continue,
}

pub fn default_action(sig: i32) -> DefaultAction {
    match sig {
        libc::SIGCHLD | libc::SIGURG | libc::SIGWINCH => DefaultAction::Ignore,
        libc::SIGCONT => DefaultAction::Continue,
        libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU => DefaultAction::Stop,
        s if default_dumps_core(s) => DefaultAction::CoreDump,
        _ => DefaultAction::Terminate,
    }
}
