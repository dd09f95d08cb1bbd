//! A terminal a guest made (a pty: script, tmux, ssh) has no session on
//! the host, so the host's line discipline sends its signals (Ctrl-C's
//! SIGINT, Ctrl-\'s SIGQUIT, Ctrl-Z's SIGTSTP, a resize's SIGWINCH, a
//! hangup's SIGHUP and SIGCONT) to nobody. When a guest session takes such
//! a terminal (kernel::terminal), nomu makes it the controlling terminal
//! of a small host process of its own, an agent: forked, a session leader
//! holding no descriptor (so the pty's master still sees the slave's last
//! close), alone in the terminal's foreground group. The agent passes each
//! signal on to nomu as [`TERMINAL_PASSED_ON`], its number the value, and
//! nomu sends it to the guest session's foreground group (its leader too
//! for a hangup). The agent dies with nomu, or when the session lets the
//! terminal go.

use std::os::fd::{AsRawFd, BorrowedFd};

/// The signal an agent passes a terminal's signal on as.
pub const TERMINAL_PASSED_ON: i32 = 60;

/// What the host's line discipline and hangup send a terminal's session.
const TERMINAL_SIGNALS: [i32; 6] =
    [libc::SIGINT, libc::SIGQUIT, libc::SIGTSTP, libc::SIGWINCH, libc::SIGHUP, libc::SIGCONT];

/// An agent, killed and reaped when dropped.
#[derive(Debug)]
pub struct Agent {
    pid: i32,
}

impl Agent {
    /// The agent's host pid (the sender of what it passes on).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Starts an agent for the terminal open at `terminal`; None if the
    /// host refuses (the guest's terminal then works without its keys'
    /// signals, as before agents).
    pub fn start(terminal: BorrowedFd) -> Option<Agent> {
        let nomu = std::process::id() as i32;
        let set = super::sys::sigset(&TERMINAL_SIGNALS);
        // SAFETY: the child makes only async-signal-safe raw calls and
        // never returns (nomu is multithreaded); the parent only records
        // the pid.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return None;
        }
        if pid == 0 {
            // SAFETY: the agent's whole life, in the child: plain calls on
            // integers, the terminal's descriptor (still open here) and
            // sets built before the fork.
            unsafe { agent(terminal.as_raw_fd(), nomu, &set) }
        }
        Some(Agent { pid })
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // SAFETY: killing and reaping our own child, not reaped before (the
        // Agent is its only owner); ECHILD if the host reaped it already
        // (an ignored SIGCHLD).
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, libc::__WALL);
        }
    }
}

/// The agent: the terminal's session leader, passing its signals on.
///
/// # Safety
/// Only in the child of a fork, with `fd` open.
unsafe fn agent(fd: i32, nomu: i32, signals: &libc::sigset_t) -> ! {
    // SAFETY: the caller's contract; every call takes integers or the set.
    unsafe {
        libc::sigprocmask(libc::SIG_SETMASK, signals, std::ptr::null_mut());
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::getppid() != nomu || libc::setsid() < 0 || libc::ioctl(fd, libc::TIOCSCTTY, 0) < 0 {
            libc::_exit(1);
        }
        // Nothing of nomu's kept open: pipes and sockets end when the
        // guests close them, and the pty's slave with its last guest.
        libc::syscall(libc::SYS_close_range, 0, u32::MAX, 0);
        loop {
            let sig = libc::sigwaitinfo(signals, std::ptr::null_mut());
            if sig > 0 {
                let value = libc::sigval { sival_ptr: sig as usize as *mut libc::c_void };
                libc::sigqueue(nomu, TERMINAL_PASSED_ON, value);
            }
        }
    }
}
