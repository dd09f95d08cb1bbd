//! Signal-driven I/O: O_ASYNC (F_SETFL, FIOASYNC), F_SETOWN(_EX) and
//! F_SETSIG. When a description with O_ASYNC becomes readable or writable,
//! its owner (a thread, a process or a process group: Linux's f_owner) gets
//! SIGIO, or F_SETSIG's signal with si_fd and si_band.
//!
//! The files whose readiness matters here (sockets, pipes, terminals,
//! inotify) are the host's, so the host tells when: nomu sets O_ASYNC on
//! the host descriptor with itself as the owner and a real-time signal of
//! its own ([`crate::host::fs::HOST_SIGIO`]) that carries the host
//! descriptor and the band. nomu's signal forwarder thread takes it
//! (Kernel::forward_host_signals) and hands it here ([`AsyncFiles::notify`]),
//! which finds the description and sends the guest's signal to its owner.
//! Should the host's queue of those signals overflow, it sends a plain
//! SIGIO instead, naming no descriptor: then every description with
//! O_ASYNC and an owner is told (a spurious SIGIO is what any reader of
//! one must expect). nomu's own files (eventfd, epoll, signalfd) have no
//! such notification on Linux either. SIGURG (a socket's urgent data) is
//! not passed on.

use super::file::OpenFile;
use crate::kernel::signal::SigInfo;
use crate::kernel::Kernel;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// What a description's owner id names (F_SETOWN: a process, or a process
/// group given as its negation; F_SETOWN_EX: a thread too). Linux's
/// pid_type, PIDTYPE_PID (a thread) before any owner is set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OwnerKind {
    #[default]
    Thread,
    Process,
    Group,
}

/// Who gets a description's I/O signals: `id` 0 is nobody.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Owner {
    pub kind: OwnerKind,
    pub id: u32,
}

/// A description's signal-driven I/O settings (Linux's fown_struct and
/// its fasync entry).
#[derive(Clone, Copy, Debug, Default)]
pub struct AsyncIo {
    pub owner: Owner,
    /// The effective and real uid of whoever set the owner: Linux's
    /// sigio_perm lets them signal only processes they could kill.
    pub setter: (u32, u32),
    /// F_SETSIG's signal; 0: plain SIGIO.
    pub signal: i32,
    /// O_ASYNC is set (through F_SETFL or FIOASYNC; at open it does
    /// nothing, on Linux too).
    pub enabled: bool,
    /// The descriptor O_ASYNC was set through: si_fd (Linux's fa_fd).
    pub fd: i32,
}

/// The descriptions whose host descriptors nomu asked the host to signal
/// readiness for, by host descriptor number.
#[derive(Default)]
pub struct AsyncFiles {
    files: Mutex<HashMap<i32, Weak<OpenFile>>>,
}

/// si_code of a readiness signal: POLL_IN .. POLL_HUP (the host's).
const POLL_IN: i32 = 1;
const POLL_HUP: i32 = 6;

impl AsyncFiles {
    /// Remembers `file` (host descriptor `host_fd`) as signalling readiness.
    pub fn add(&self, host_fd: i32, file: &Arc<OpenFile>) {
        let mut files = self.files.lock().unwrap();
        files.retain(|_, f| f.strong_count() > 0);
        files.insert(host_fd, Arc::downgrade(file));
    }

    /// The host's readiness signal for `host_fd` (None: a plain SIGIO, for
    /// every description), with its si_code and si_band.
    pub fn notify(&self, kernel: &Kernel, host_fd: Option<i32>, code: i32, band: i64) {
        let targets: Vec<Arc<OpenFile>> = {
            let files = self.files.lock().unwrap();
            match host_fd {
                Some(fd) => {
                    files.get(&fd).and_then(Weak::upgrade).filter(|f| f.fd_raw() == Some(fd)).into_iter().collect()
                }
                None => files.values().filter_map(Weak::upgrade).collect(),
            }
        };
        for f in targets {
            let io = *f.async_io.lock().unwrap();
            if !io.enabled || io.owner.id == 0 {
                continue;
            }
            let info = match io.signal {
                0 => SigInfo::kernel(libc::SIGIO),
                _ if host_fd.is_none() || !(POLL_IN..=POLL_HUP).contains(&code) => SigInfo::kernel(libc::SIGIO),
                sig => SigInfo::poll(sig, code, band, io.fd),
            };
            send(kernel, io.owner, io.setter, info);
        }
    }
}

/// Sends `info` to `owner`, to each process its setter may signal (Linux's
/// send_sigio_to_task and sigio_perm: root, or the setter's effective or
/// real uid matching the target's real or saved uid).
fn send(kernel: &Kernel, owner: Owner, (euid, uid): (u32, u32), info: SigInfo) {
    let may = |p: &crate::kernel::process::Process| {
        let Some(t) = p.threads.lock().unwrap().first().cloned() else { return false };
        let c = t.cred();
        euid == 0 || euid == c.suid || euid == c.uid || uid == c.suid || uid == c.uid
    };
    match owner.kind {
        OwnerKind::Thread => {
            if let Some(t) = kernel.find_thread(owner.id).filter(|t| may(&t.process)) {
                kernel.signal_thread(&t, info);
            }
        }
        // A pid names its thread's process (PIDTYPE_TGID).
        OwnerKind::Process => {
            let p = kernel.tasks.process(owner.id).or_else(|| kernel.find_thread(owner.id).map(|t| t.process.clone()));
            if let Some(p) = p.filter(|p| may(p)) {
                kernel.signal_process(&p, info);
            }
        }
        OwnerKind::Group => {
            for p in kernel.tasks.group_members(owner.id).into_iter().filter(|p| may(p)) {
                kernel.signal_process(&p, info);
            }
        }
    }
}
