//! `nomu run`'s front: the host process its caller waits for. nomu forks
//! before its kernel starts; the parent (the front) only waits, and the
//! child (the back) is nomu. When the first program ends and nothing else
//! runs, the back exits and the front exits as it did. When the first
//! program leaves processes running in the background (a daemon: gpg's
//! agent, an ssh-agent, a server that detaches), the back tells the front
//! the first program's status and the front exits with it, while the back
//! goes on serving them until the last one ends: the caller sees what a
//! program run directly gives (it returns; what it started goes on),
//! where one nomu process could only wait for them all (`gpg
//! --quick-gen-key` never returned: its agent runs until killed).
//!
//! Until then the back dies with the front (PR_SET_PDEATHSIG: a `timeout`
//! that SIGKILLs nomu ends every guest, as before), and the front passes
//! on the signals nomu forwards to its guests when someone sends them to
//! it (kill, timeout's SIGTERM); a terminal's signals reach the back
//! itself (both are in the caller's process group). Both get a signal
//! sent to the group (timeout's, a shell's kill of a job) or to every
//! `nomu` (pkill): meanwhile the back takes such signals only as the front
//! passes them on ([`passes_on`]), so each comes once. The front passes a
//! signal on as [`PASSED_ON`], a real-time signal with its number as
//! value: queued, where a second SIGTERM pending in the back would merge
//! with the first (and timeout's SIGTERM to the group was lost half the
//! time).

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

/// The front's pid while it waits (0: none, or it has gone).
static FRONT_PID: AtomicI32 = AtomicI32::new(0);

/// The signal the front passes a signal on as (its number the value).
pub const PASSED_ON: i32 = 61;

/// Whether a signal `sender` sent the back (kill, sigqueue, tkill) also
/// reaches it through the front, which passes it on: one sent to the
/// caller's process group, or to every nomu, reaches both. The back's own
/// and the front's are its.
pub fn passes_on(sender: i32) -> bool {
    let front = FRONT_PID.load(Ordering::Relaxed);
    front != 0 && sender != front && sender != std::process::id() as i32
}

/// The back's end of the link to the front.
pub struct Front {
    link: std::fs::File,
}

impl Front {
    /// Tells the front that the first program ended with `code` (the front
    /// exits with it) and stops dying with the front: what the first
    /// program left running goes on here.
    pub fn release(mut self, code: i32) {
        FRONT_PID.store(0, Ordering::Relaxed);
        // SAFETY: prctl with integer arguments.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, 0, 0, 0, 0) };
        let _ = self.link.write_all(&code.to_le_bytes());
    }
}

/// Forks the front off (the calling process must have one thread): returns
/// in the back, never in the front. None (and no front) if the host refuses.
pub fn fork_front(forwarded: &[i32]) -> Option<Front> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 into a 2-int array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return None;
    }
    // SAFETY: both descriptors are new and ours.
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // Blocked across the fork, so the front misses none sent meanwhile.
    let set = super::sys::sigset(forwarded);
    // SAFETY: an all-zero sigset_t is valid; sigprocmask fills it.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid sets; one thread.
    unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, &mut old) };
    let front_pid = std::process::id() as i32;
    // The front must be able to wait for nomu: a SIGCHLD ignored by the
    // caller (and so by nomu, across exec) would have the host reap it.
    // SAFETY: setting a default disposition.
    let caller_sigchld = unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) };
    // SAFETY: the process has one thread; the child only returns to go on
    // as nomu, the parent never returns.
    let back = unsafe { libc::fork() };
    if back < 0 {
        // SAFETY: restoring the mask and disposition read above.
        unsafe {
            libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            libc::signal(libc::SIGCHLD, caller_sigchld);
        }
        return None;
    }
    if back == 0 {
        // SAFETY: prctl with integer arguments; the saved mask and
        // SIGCHLD disposition (nomu keeps what it had without a front).
        unsafe {
            libc::signal(libc::SIGCHLD, caller_sigchld);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            if libc::getppid() != front_pid {
                // The front is gone already: so is the caller's wait.
                libc::_exit(1);
            }
            // PASSED_ON stays blocked: nomu takes it from the start
            // (its default action would end nomu).
            let mut mask = old;
            libc::sigaddset(&mut mask, PASSED_ON);
            libc::sigprocmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
        }
        drop(read_end);
        FRONT_PID.store(front_pid, Ordering::Relaxed);
        return Some(Front { link: std::fs::File::from(write_end) });
    }
    drop(write_end);
    wait_for_back(back, read_end, &set)
}

/// The front's life: pass on what is sent to it, then exit as the first
/// program ended (the back's word) or as the back did.
fn wait_for_back(back: i32, link: OwnedFd, forwarded: &libc::sigset_t) -> ! {
    // SAFETY: a signalfd for the signals blocked above.
    let sfd = unsafe { libc::signalfd(-1, forwarded, libc::SFD_CLOEXEC) };
    // The back's end, seen directly: the link's write end may live on a
    // moment in host processes the back cloned (split's children).
    // SAFETY: pidfd_open of our own child, no pointers.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, back, 0) } as i32;
    let mut link = std::fs::File::from(link);
    loop {
        // A negative fd is skipped by poll.
        let mut fds = [
            libc::pollfd { fd: link.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: sfd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: pidfd, events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: valid pollfd array of 3 entries.
        if unsafe { libc::poll(fds.as_mut_ptr(), 3, -1) } < 0 {
            continue;
        }
        if fds[1].revents & libc::POLLIN != 0 {
            // SAFETY: signalfd_siginfo is plain integers.
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            // SAFETY: reading one siginfo into a buffer of its size.
            let n = unsafe { libc::read(sfd, (&mut info as *mut libc::signalfd_siginfo).cast(), size) };
            // Sent by someone (kill, sigqueue, tkill: codes <= 0), not a
            // terminal's, which the back got itself.
            if n == size as isize && info.ssi_code <= 0 {
                let value = libc::sigval { sival_ptr: info.ssi_signo as usize as *mut libc::c_void };
                // SAFETY: sigqueue to our own child, no pointers followed.
                unsafe { libc::sigqueue(back, PASSED_ON, value) };
            }
        }
        if fds[0].revents == 0 && fds[2].revents != 0 {
            // Gone without a word: the first program's end was its own.
            exit_as(back);
        }
        if fds[0].revents != 0 {
            // The status, or the end of the pipe: nomu ended first.
            let mut code = [0u8; 4];
            match link.read_exact(&mut code) {
                Ok(()) => std::process::exit(i32::from_le_bytes(code)),
                Err(_) => exit_as(back),
            }
        }
    }
}

/// Exits as the back did: its exit code, or death by its signal.
fn exit_as(back: i32) -> ! {
    let mut status = 0;
    // SAFETY: waitpid of our own child into an int.
    while unsafe { libc::waitpid(back, &mut status, 0) } < 0 {
        if super::last_errno() != crate::abi::errno::Errno::EINTR {
            std::process::exit(1);
        }
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: the default action of the back's signal, unblocked, on
        // ourselves.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
        }
    }
    std::process::exit(if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 1 })
}

/// Makes descriptor `fd` (nomu's own) /dev/null's, keeping its number:
/// what it held is let go (best effort).
pub fn point_at_null(fd: i32) {
    // SAFETY: open of a constant path; dup3 onto a descriptor of nomu's
    // own, which callers no longer use for anything else; close of ours.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 && null != fd {
            libc::dup3(null, fd, libc::O_CLOEXEC);
            libc::close(null);
        }
    }
}
