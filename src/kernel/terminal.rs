//! Guests' controlling terminals: which session each terminal a guest
//! opened controls, and its foreground process group (Linux's tty->session
//! and tty->pgrp), by device number.
//!
//! The terminal nomu runs on is none of them: its foreground group is
//! `Kernel::foreground`, and its Ctrl-C reaches nomu, which passes it on
//! (see `Kernel::forward_host_signals`). A terminal a guest makes (a pty
//! from /dev/ptmx: script, tmux, ssh, expect) becomes a session's when
//! the session's leader opens it without O_NOCTTY or asks with TIOCSCTTY;
//! from then on job control on it is that session's, and other sessions
//! reading it are not stopped. nomu opens every terminal with O_NOCTTY;
//! a taken terminal's keys reach the session through an agent, a host
//! process for which the terminal is the host's controlling terminal
//! (host::terminal_agent).

use crate::abi::errno::Errno;
use crate::host::terminal_agent::Agent;
use std::collections::HashMap;
use std::os::fd::BorrowedFd;
use std::sync::Mutex;

/// The major device number of the ptys' slaves (/dev/pts/N).
pub const UNIX98_PTY_SLAVE_MAJOR: u32 = 136;
/// /dev/tty's and /dev/ptmx's major, and their minors.
pub const TTYAUX_MAJOR: u32 = 5;
pub const DEV_TTY_MINOR: u32 = 0;
pub const PTMX_MINOR: u32 = 2;

/// A terminal that controls a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Controlling {
    /// The terminal's device number (a pty's slave side).
    pub rdev: u64,
    /// Its foreground process group.
    pub foreground: u32,
}

#[derive(Default)]
pub struct Terminals {
    /// The device number of the terminal nomu runs on, if any.
    host: Option<u64>,
    /// By session id, with the terminal's agent (if the host let one
    /// start).
    by_session: Mutex<HashMap<u32, (Controlling, Option<Agent>)>>,
}

/// What a terminal is to a caller in session `sid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The terminal nomu runs on.
    Host,
    /// The caller's session's controlling terminal.
    Own(Controlling),
    /// Another session's controlling terminal (its foreground group).
    Other(u32),
    /// No session's.
    Free,
}

impl Terminals {
    /// With nomu's own terminal, the first of its standard descriptors
    /// that is one.
    pub fn new(host: Option<u64>) -> Terminals {
        Terminals { host, by_session: Mutex::default() }
    }

    pub fn role(&self, rdev: u64, sid: u32) -> Role {
        if self.is_host(rdev) {
            return Role::Host;
        }
        let sessions = self.by_session.lock().unwrap();
        if let Some(&(c, _)) = sessions.get(&sid).filter(|(c, _)| c.rdev == rdev) {
            return Role::Own(c);
        }
        match sessions.values().find(|(c, _)| c.rdev == rdev) {
            Some((c, _)) => Role::Other(c.foreground),
            None => Role::Free,
        }
    }

    /// The terminal nomu runs on, by its own device number or as the host's
    /// /dev/tty (which a guest opens as that terminal when its session has
    /// none of its own, see Ctx::own_terminal).
    fn is_host(&self, rdev: u64) -> bool {
        self.host == Some(rdev) || rdev == libc::makedev(TTYAUX_MAJOR, DEV_TTY_MINOR)
    }

    /// Session `sid`'s controlling terminal.
    pub fn of_session(&self, sid: u32) -> Option<Controlling> {
        self.by_session.lock().unwrap().get(&sid).map(|&(c, _)| c)
    }

    /// The session whose terminal's agent has host pid `agent`, and that
    /// terminal.
    pub fn of_agent(&self, agent: i32) -> Option<(u32, Controlling)> {
        let sessions = self.by_session.lock().unwrap();
        sessions.iter().find(|(_, (_, a))| a.as_ref().is_some_and(|a| a.pid() == agent)).map(|(&s, &(c, _))| (s, c))
    }

    /// Terminal `rdev` becomes the controlling terminal of session `sid`
    /// (led by the caller), with the leader's group in the foreground:
    /// Linux's tiocsctty and the acquisition at open. A session that has
    /// one keeps it (EPERM, unless it is this one); a terminal that is
    /// another session's is taken from it only when `steal` (EPERM).
    /// `terminal` is an open descriptor of it, for its agent.
    pub fn acquire(&self, rdev: u64, sid: u32, steal: bool, terminal: BorrowedFd) -> Result<(), Errno> {
        if self.is_host(rdev) {
            return Err(Errno::EPERM);
        }
        let mut sessions = self.by_session.lock().unwrap();
        match sessions.get(&sid) {
            Some((c, _)) if c.rdev == rdev => return Ok(()),
            Some(_) => return Err(Errno::EPERM),
            None => {}
        }
        if let Some(owner) = sessions.iter().find(|(_, (c, _))| c.rdev == rdev).map(|(&s, _)| s) {
            if !steal {
                return Err(Errno::EPERM);
            }
            // Its agent is gone (killed and reaped) before the next one
            // takes the terminal on the host.
            sessions.remove(&owner);
        }
        sessions.insert(sid, (Controlling { rdev, foreground: sid }, Agent::start(terminal)));
        Ok(())
    }

    /// TIOCSPGRP on session `sid`'s terminal.
    pub fn set_foreground(&self, sid: u32, pgrp: u32) {
        if let Some((c, _)) = self.by_session.lock().unwrap().get_mut(&sid) {
            c.foreground = pgrp;
        }
    }

    /// The session led by `sid` ends (its leader exits): its terminal is
    /// free for another, and what its foreground group was is returned.
    pub fn release(&self, sid: u32) -> Option<Controlling> {
        let released = self.by_session.lock().unwrap().remove(&sid);
        released.map(|(c, _agent)| c)
    }
}

/// A device number as /proc/PID/stat's tty_nr shows it (Linux's
/// new_encode_dev: minor's low byte, major, then the minor's upper bits).
pub fn encode_tty_nr(rdev: u64) -> u64 {
    let (major, minor) = (libc::major(rdev) as u64, libc::minor(rdev) as u64);
    (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12)
}
