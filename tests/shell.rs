//! Shell scripts run by the bundled busybox shells, natively and inside
//! nomu over their guest root: both must print exactly the expected output
//! in tests/shell/NAME.out (stdout and stderr together). Two busybox builds
//! (scripts/build-busybox.sh, `make test` builds both first): the no-MMU one,
//! whose sh is hush and never forks (build/root), and the MMU one, whose sh
//! is ash and forks for subshells, `$(...)`, pipelines and `&`
//! (build/root-mmu). ash runs every script; the fork_*.sh ones are ash's
//! alone (they need fork: hush on no-MMU cannot run them).

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{entry_matrix, Entry};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A bundled busybox build, by the guest root it is installed in.
#[derive(Clone, Copy)]
enum Shell {
    /// No-MMU, hush as sh.
    Hush,
    /// With MMU, ash as sh.
    Ash,
}

impl Shell {
    fn root(self) -> PathBuf {
        repo().join(match self {
            Shell::Hush => "build/root",
            Shell::Ash => "build/root-mmu",
        })
    }

    fn busybox(self) -> PathBuf {
        let p = self.root().join("bin/busybox");
        assert!(p.exists(), "{} is missing: run `make guests` (it builds the guest roots)", p.display());
        p
    }
}

/// Runs `cmd` with the script on stdin; returns stdout+stderr and the status.
fn run(mut cmd: Command, script: &str, name: &str) -> (String, i32) {
    let out_path = std::env::temp_dir().join(format!("nomu-shell-{name}-{}", std::process::id()));
    let out = File::create(&out_path).unwrap();
    cmd.stdin(File::open(repo().join("tests/shell").join(script)).unwrap());
    cmd.stdout(Stdio::from(out.try_clone().unwrap())).stderr(Stdio::from(out));
    let status = cmd.status().expect("run the shell");
    let text = std::fs::read_to_string(&out_path).unwrap();
    let _ = std::fs::remove_file(out_path);
    (text, status.code().unwrap_or(-1))
}

fn check(name: &str, shell: Shell, e: Entry) {
    let script = format!("{name}.sh");
    let expected = std::fs::read_to_string(repo().join("tests/shell").join(format!("{name}.out"))).unwrap();
    let sh = match shell {
        Shell::Hush => "hush",
        Shell::Ash => "ash",
    };
    let mut native = Command::new(shell.busybox());
    native.args(["sh", "-s"]);
    let (native_out, native_status) = run(native, &script, &format!("{name}-{sh}-native-{}", e.0));
    assert_eq!(native_status, 0, "{name} ({sh}): native run failed:\n{native_out}");
    assert_eq!(native_out, expected, "{name} ({sh}): the native run disagrees with {name}.out");
    let mut nomu = e.command();
    nomu.arg("--root").arg(shell.root()).args(["--", "/bin/sh", "-s"]);
    let (nomu_out, nomu_status) = run(nomu, &script, &format!("{name}-{sh}-nomu-{}", e.0));
    assert_eq!(nomu_status, 0, "{name} ({sh}): failed under nomu ({}):\n{nomu_out}", e.0);
    assert_eq!(nomu_out, expected, "{name} ({sh}): output under nomu ({}) differs", e.0);
}

fn pipelines_redirections_and_substitution(e: Entry) {
    check("pipelines", Shell::Hush, e);
}

fn background_jobs_wait_and_traps(e: Entry) {
    check("jobs", Shell::Hush, e);
}

fn everyday_applets(e: Entry) {
    check("applets", Shell::Hush, e);
}

fn ash_pipelines_redirections_and_substitution(e: Entry) {
    check("pipelines", Shell::Ash, e);
}

fn ash_background_jobs_wait_and_traps(e: Entry) {
    check("jobs", Shell::Ash, e);
}

fn ash_everyday_applets(e: Entry) {
    check("applets", Shell::Ash, e);
}

fn ash_subshells_keep_their_state(e: Entry) {
    check("fork_subshells", Shell::Ash, e);
}

fn ash_pipelines_of_builtins_and_functions(e: Entry) {
    check("fork_pipelines", Shell::Ash, e);
}

fn ash_background_builtins_functions_and_subshells(e: Entry) {
    check("fork_jobs", Shell::Ash, e);
}

fn ash_traps_in_subshells(e: Entry) {
    check("fork_traps", Shell::Ash, e);
}

fn ash_exec_redirections_shared_by_children(e: Entry) {
    check("fork_exec", Shell::Ash, e);
}

/// A program on a pseudo-terminal: the terminal's slave side is its stdin,
/// stdout, stderr and controlling terminal, in a session of its own (so its
/// processes can be found afterwards); the test types on the master side.
struct Terminal {
    master: File,
    child: std::process::Child,
    /// Read from the terminal, not yet matched.
    pending: Vec<u8>,
    /// Everything read, for failure messages.
    transcript: String,
    what: String,
}

/// How long one step may take (a loaded machine, a slow entry path).
const STEP: Duration = Duration::from_secs(30);
const PROMPT: &str = "ash$ ";

impl Terminal {
    fn spawn(mut cmd: Command, what: &str) -> Terminal {
        // SAFETY: posix_openpt has no preconditions; the descriptor it
        // returns is owned by the File from here on.
        let master = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY) };
        assert!(master >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
        // SAFETY: master is a fresh descriptor nothing else owns.
        let master = unsafe { File::from_raw_fd(master) };
        let mut name = [0 as libc::c_char; 128];
        // SAFETY: master is a pseudo-terminal master; name is writable for its length.
        unsafe {
            assert_eq!(libc::grantpt(master.as_raw_fd()), 0);
            assert_eq!(libc::unlockpt(master.as_raw_fd()), 0);
            assert_eq!(libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()), 0);
        }
        // SAFETY: ptsname_r wrote a NUL-terminated path into name.
        let path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }.to_str().unwrap().to_owned();
        let slave =
            std::fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOCTTY).open(&path).unwrap();
        cmd.stdin(slave.try_clone().unwrap()).stdout(slave.try_clone().unwrap()).stderr(slave);
        // SAFETY: setsid and ioctl are async-signal-safe, as pre_exec needs.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start the shell on a terminal");
        // The Command holds the slave's descriptors: only the child's stay.
        drop(cmd);
        Terminal { master, child, pending: Vec::new(), transcript: String::new(), what: what.to_owned() }
    }

    fn send(&mut self, bytes: &str) {
        self.master.write_all(bytes.as_bytes()).unwrap();
    }

    /// The output up to and including `pat`, if it comes within `wait`.
    fn expect_within(&mut self, pat: &str, wait: Duration) -> Option<String> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(i) = self.pending.windows(pat.len()).position(|w| w == pat.as_bytes()) {
                let text: Vec<u8> = self.pending.drain(..i + pat.len()).collect();
                return Some(String::from_utf8_lossy(&text).into_owned());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let mut pfd = libc::pollfd { fd: self.master.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            let ready = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(i32::MAX as u128) as i32) };
            if ready <= 0 {
                continue;
            }
            let mut buf = [0u8; 4096];
            match self.master.read(&mut buf) {
                // EIO: every slave descriptor is closed.
                Ok(0) | Err(_) => return None,
                Ok(n) => {
                    // The terminal's \r\n as \n.
                    let text: Vec<u8> = buf[..n].iter().copied().filter(|&b| b != b'\r').collect();
                    self.transcript.push_str(&String::from_utf8_lossy(&text));
                    self.pending.extend_from_slice(&text);
                }
            }
        }
    }

    fn expect(&mut self, pat: &str) -> String {
        match self.expect_within(pat, STEP) {
            Some(text) => text,
            None => panic!("{}: no {pat:?} on the terminal; it showed:\n{}", self.what, self.transcript),
        }
    }

    /// Runs a command line at the prompt: its output, up to the next
    /// prompt (with the job notices the shell prints before it). A marker
    /// the shell computes ends it: the typed line echoed does not match.
    fn command(&mut self, n: u32, line: &str) -> String {
        self.send(&format!("{line}; echo \"== $(({n})) ==\"\n"));
        let mut out = self.expect(&format!("== {n} ==\n"));
        out.push_str(&self.expect(PROMPT));
        out
    }

    /// Types `key` (^Z, ^C) for the foreground job until the prompt is
    /// back: a key typed before the job's process took the terminal and
    /// reset the signal is lost (ignored by the interactive shell or the
    /// forked child that has not yet reset it), on Linux as here.
    fn key_until_prompt(&mut self, key: &str) -> String {
        let mut out = String::new();
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(200));
            self.send(key);
            if let Some(text) = self.expect_within(PROMPT, Duration::from_secs(3)) {
                out.push_str(&text);
                return out;
            }
        }
        panic!("{}: the prompt did not come back after {key:?}; the terminal showed:\n{}", self.what, self.transcript);
    }

    /// Waits for the program's exit status.
    fn exit_status(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + STEP;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("{}: did not exit; the terminal showed:\n{}", self.what, self.transcript);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Terminal {
    /// A test that failed half-way leaves no shell or job running.
    fn drop(&mut self) {
        for member in session_members(self.child.id()) {
            if let Some(pid) = member.split(' ').next().and_then(|p| p.parse::<i32>().ok()) {
                // SAFETY: kill has no memory arguments.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        let _ = self.child.wait();
    }
}

/// The processes of session `sid`, as "pid comm" (read from /proc/PID/stat).
fn session_members(sid: u32) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        // After the name: state, ppid, pgrp, session.
        let session = stat[close + 1..].split_whitespace().nth(3).and_then(|f| f.parse::<u32>().ok());
        if session == Some(sid) {
            found.push(format!("{} {}", &stat[..open].trim(), &stat[open + 1..close]));
        }
    }
    found
}

/// An interactive ash on a terminal: background jobs, jobs, kill %1,
/// Ctrl-Z of a foreground job, bg, fg, Ctrl-C; then ^Z, bg and kill %1 for a
/// subshell (a forked child that stays one); exit
/// gives the shell's status and leaves no process behind. (The keys are
/// typed again until the shell answers: one typed before the job's
/// process took the terminal is lost, on Linux as here.)
fn drive_job_control(cmd: Command, what: &str) {
    let mut t = Terminal::spawn(cmd, what);
    let sid = t.child.id();
    t.expect(PROMPT);

    // kill %1 only once the job runs sleep: until then it is a forked ash
    // that still ignores SIGTERM, as the interactive shell does.
    t.send("sleep 30 &\n");
    t.expect(PROMPT);
    t.command(1, "until read c < /proc/$!/comm && [ \"$c\" = sleep ]; do :; done");
    let jobs = t.command(2, "jobs");
    assert!(jobs.contains("[1]+  Running") && jobs.contains("sleep 30"), "{what}: jobs said:\n{jobs}");
    let killed = t.command(3, "kill %1; wait");
    assert!(killed.contains("Terminated"), "{what}: kill %1 and wait said:\n{killed}");
    let jobs = t.command(4, "jobs");
    assert!(!jobs.contains("sleep"), "{what}: jobs after kill %1:\n{jobs}");

    // A foreground sleep stopped by ^Z, continued by bg, brought back by
    // fg, ended by ^C.
    t.send("sleep 30\n");
    let stopped = t.key_until_prompt("\x1a");
    assert!(stopped.contains("Stopped") && stopped.contains("sleep 30"), "{what}: ^Z gave:\n{stopped}");
    let jobs = t.command(5, "jobs");
    assert!(jobs.contains("[1]+  Stopped") && jobs.contains("sleep 30"), "{what}: jobs said:\n{jobs}");
    let bg = t.command(6, "bg");
    assert!(bg.contains("[1] sleep 30"), "{what}: bg said:\n{bg}");
    let jobs = t.command(7, "jobs");
    assert!(jobs.contains("[1]+  Running") && jobs.contains("sleep 30"), "{what}: jobs after bg:\n{jobs}");
    t.send("fg\n");
    t.expect("sleep 30\n");
    t.key_until_prompt("\x03");
    let jobs = t.command(8, "jobs");
    assert!(!jobs.contains("sleep"), "{what}: jobs after fg and ^C:\n{jobs}");

    // A job that is a forked shell (it never execs): a subshell running
    // sleep, stopped, continued and killed with its child.
    t.send("(sleep 30; echo not reached)\n");
    let stopped = t.key_until_prompt("\x1a");
    assert!(stopped.contains("Stopped"), "{what}: ^Z of a subshell gave:\n{stopped}\nin all:\n{}", t.transcript);
    let bg = t.command(9, "bg");
    assert!(bg.contains("[1] (sleep 30; echo not reached)"), "{what}: bg said:\n{bg}");
    let killed = t.command(10, "kill %1; wait");
    assert!(killed.contains("Terminated") && !killed.contains("not reached\n"), "{what}: kill %1 said:\n{killed}");
    let jobs = t.command(11, "jobs");
    assert!(!jobs.contains("sleep"), "{what}: jobs at the end:\n{jobs}");

    t.send("exit 3\n");
    let status = t.exit_status();
    assert_eq!(status.code(), Some(3), "{what}: exit status {status:?}; the terminal showed:\n{}", t.transcript);
    // Every process of the session (the shell's jobs; under nomu also the
    // forked children's host processes) is gone with it.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = session_members(sid);
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "{what}: processes left after exit: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The shell's environment: no history file, a prompt to match.
fn terminal_env(cmd: &mut Command) {
    cmd.env_clear().env("PATH", "/bin:/sbin:/usr/bin:/usr/sbin").env("PS1", PROMPT);
    cmd.env("TERM", "dumb").env("HISTFILE", "/dev/null").env("HOME", "/");
}

/// Job control on a pseudo-terminal, natively first (the same ash binary
/// on the host), then under nomu.
fn ash_job_control_on_a_terminal(e: Entry) {
    let mut native = Command::new(Shell::Ash.busybox());
    native.args(["sh", "-i"]);
    terminal_env(&mut native);
    drive_job_control(native, &format!("native ash ({})", e.0));
    let mut nomu = e.command();
    nomu.arg("--root").arg(Shell::Ash.root()).args(["--", "/bin/sh", "-i"]);
    terminal_env(&mut nomu);
    drive_job_control(nomu, &format!("ash under nomu ({})", e.0));
}

entry_matrix!(
    pipelines_redirections_and_substitution,
    background_jobs_wait_and_traps,
    everyday_applets,
    ash_pipelines_redirections_and_substitution,
    ash_background_jobs_wait_and_traps,
    ash_everyday_applets,
    ash_subshells_keep_their_state,
    ash_pipelines_of_builtins_and_functions,
    ash_background_builtins_functions_and_subshells,
    ash_traps_in_subshells,
    ash_exec_redirections_shared_by_children,
    ash_job_control_on_a_terminal,
);
