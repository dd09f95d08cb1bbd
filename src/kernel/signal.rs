//! Signal numbers, names and dispositions. Delivery to guest handlers
//! comes with the process issue; today a signal whose action is the
//! default ends the process as Linux's default action would.

use super::abi::KernelSigaction;

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

/// Whether Linux's default action for `sig` is to ignore it.
pub fn default_ignores(sig: i32) -> bool {
    matches!(sig, libc::SIGCHLD | libc::SIGURG | libc::SIGWINCH | libc::SIGCONT)
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
