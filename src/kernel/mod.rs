//! The kernel proper: Linux semantics, with no `unsafe` of its own.

pub mod cred;
pub mod exit;
pub mod futex;
pub mod ipc;
pub mod nproc;
pub mod poll;
pub mod process;
pub mod sched;
pub mod sigframe;
pub mod signal;
pub mod task;
pub mod terminal;
pub mod timer;
pub mod trap;
pub mod waiter;

use crate::abi::errno::Errno;
use crate::entry::EntryPath;
use crate::fs::file::OpenFile;
use crate::fs::path::Root;
use crate::host::physmem::PhysMem;
use crate::mm::phys::PhysicalMemory;
use process::{ExitStatus, PidAllocator, Process, Thread};
use signal::SigInfo;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use task::{Task, Tasks};
use waiter::Waiting;

pub struct Config {
    pub root: std::path::PathBuf,
    pub mem: usize,
    pub trace: bool,
    /// The entry path asked for; None picks the fastest that works.
    pub entry: Option<crate::entry::EntryKind>,
    /// How memfd_secret's pages leave the direct map (`--unmapped`).
    pub unmapped: crate::mm::phys::UnmappedPolicy,
    /// fork and clone without CLONE_VM give the child a host process of
    /// its own (else EINVAL, as on no-MMU Linux: `--no-fork`).
    pub fork: bool,
    /// A forked child's copy is charged whole at fork (`--strict-fork`),
    /// not as it is made (mm::space's cow.rs).
    pub strict_fork: bool,
}

pub struct Kernel {
    pub phys: &'static PhysicalMemory,
    pub root: Root,
    pub trace: bool,
    /// Whether fork works (see Config::fork).
    pub fork: bool,
    pub entry: Box<dyn EntryPath>,
    pub boot_time: Instant,
    /// nomu's own stderr, for trace lines and messages; the guest's fd 2 is
    /// a separate descriptor it may close.
    log: std::os::fd::OwnedFd,
    pub pids: PidAllocator,
    pub tasks: Tasks,
    /// The terminal's foreground process group (TIOCSPGRP); 0: init's.
    pub foreground: std::sync::atomic::AtomicU32,
    /// The terminals guests made that control their sessions, with their
    /// foreground groups (the terminal nomu runs on is none of them: its
    /// job control is `foreground`'s).
    pub terminals: terminal::Terminals,
    pub timers: timer::Timers,
    /// Descriptions with O_ASYNC, by host descriptor (fs::sigio).
    pub async_files: crate::fs::sigio::AsyncFiles,
    /// PI futexes with waiters (kernel/futex.rs).
    pub pi_futexes: futex::PiFutexes,
    idle_workers: std::sync::Mutex<Vec<Arc<Worker>>>,
    /// Syscall instructions seen per executable file (see loader::sites).
    pub syscall_sites: crate::loader::sites::SyscallSites,
    /// File pages guests execute or map read-only (mm::cache).
    pub page_cache: crate::mm::cache::PageCache,
    /// The pages of MAP_SHARED file mappings, one set per file
    /// (mm::shared_file).
    pub shared_files: crate::mm::shared_file::SharedFiles,
    /// Guest calls made so far that may change some inode's attributes
    /// (the table's `changes_inodes`): attributes nomu keeps (the null
    /// device's) are good while this count stays where it was.
    pub inode_changes: std::sync::atomic::AtomicU64,
    /// System V IPC objects, every guest process's (not the host's).
    pub ipc: ipc::Ipc,
    /// The host and domain names set by sethostname/setdomainname (one UTS
    /// namespace for all guests; never the host's): None, the host's.
    uts_names: std::sync::Mutex<[Option<Vec<u8>>; 2]>,
}

/// Which of the names sethostname and setdomainname set.
#[derive(Clone, Copy)]
pub enum UtsName {
    Host = 0,
    Domain = 1,
}

/// An idle host thread waiting for a guest thread to run.
#[derive(Default)]
struct Worker {
    job: std::sync::Mutex<Option<(Arc<Thread>, crate::entry::StartState)>>,
    ready: std::sync::Condvar,
}

const MAX_IDLE_WORKERS: usize = 64;

/// Signals a terminal or a `kill` of nomu's sends it that it passes on to
/// its guests (`nomu run`'s front passes them on to nomu: host::front).
pub const SIGNALS_FOR_GUESTS: [i32; 7] =
    [libc::SIGINT, libc::SIGQUIT, libc::SIGTSTP, libc::SIGWINCH, libc::SIGTERM, libc::SIGHUP, libc::SIGCONT];

/// Host signals nomu passes on to its guests: those (also as the front
/// passes them on), and the host's word that a guest's O_ASYNC descriptor
/// is ready (fs::sigio: HOST_SIGIO, or a plain SIGIO when its queue
/// overflowed).
const FORWARDED_SIGNALS: [i32; 11] = {
    let mut all = [
        libc::SIGIO,
        crate::host::fs::HOST_SIGIO,
        crate::host::front::PASSED_ON,
        crate::host::terminal_agent::TERMINAL_PASSED_ON,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
    ];
    let mut i = 0;
    while i < SIGNALS_FOR_GUESTS.len() {
        all[4 + i] = SIGNALS_FOR_GUESTS[i];
        i += 1;
    }
    all
};

static KERNEL: OnceLock<Kernel> = OnceLock::new();

/// Where x86-64 non-PIE programs are linked (ld's default), and how much
/// after it is kept for them: their images and heaps (python3.11's image
/// ends at 11 MiB).
const FIXED_ADDRESS_BASE: usize = 0x40_0000;
const FIXED_ADDRESS_ROOM: usize = 60 << 20;

/// Sets up physical memory, the root and the entry path. Once per process.
pub fn boot(config: Config) -> Result<&'static Kernel, String> {
    let root = Root::open(&config.root).map_err(|e| format!("--root {e}"))?;
    crate::host::sys::raise_own_nofile();
    // A window larger than --mem, for reservations (mm::commit); where
    // the host will not map that much (an RLIMIT_AS, a small address
    // space), --mem alone, with no room for reservations beyond it.
    let mem = PhysMem::init(crate::mm::commit::window_for(config.mem)).or_else(|_| PhysMem::init(config.mem))?;
    let phys: &'static PhysicalMemory = Box::leak(Box::new(PhysicalMemory::new(mem, config.mem)));
    phys.set_unmapped_policy(config.unmapped);
    phys.commit().set_strict_fork(config.strict_fork);
    // Where fixed-address programs are linked is kept for them when the
    // window has room beyond --mem (it has but under a host limit): else
    // the first program's image and libraries, placed lowest first, take
    // it, and a non-PIE program it starts (python3.11, gawk, gcc's cc1)
    // runs in a host process of its own, every syscall handed over.
    if config.fork && mem.size() >= config.mem.saturating_add(FIXED_ADDRESS_ROOM) {
        phys.keep_for_fixed_addresses(FIXED_ADDRESS_BASE, FIXED_ADDRESS_ROOM);
    }
    // Signals the host sends nomu (a terminal's Ctrl-C, a `kill` of nomu)
    // are the guest's: a forwarder thread takes them; every other thread,
    // guest code included, keeps them blocked.
    crate::host::sys::block_signals(&FORWARDED_SIGNALS);
    let guest_mask = FORWARDED_SIGNALS.iter().fold(0, |m, &s| m | signal::bit(s));
    // The CPUs nomu may use, read now on the thread that started: the
    // split path later pins its threads to one CPU at a time, and a guest's
    // first sched_getaffinity then saw that one CPU.
    crate::host::sys::nomu_affinity();
    crate::host::init_return_stack_fill();
    let entry = crate::entry::install(config.entry, mem, guest_mask)?;
    // A dup of nomu's stderr, kept even if the guest closes its own fd 2.
    let log = crate::host::fs::dup_raw(2).map_err(|e| format!("dup(stderr): {e}"))?;
    let kernel = Kernel {
        phys,
        root,
        trace: config.trace,
        fork: config.fork,
        entry,
        boot_time: Instant::now(),
        log,
        pids: PidAllocator::new(),
        tasks: Tasks::default(),
        foreground: std::sync::atomic::AtomicU32::new(0),
        terminals: terminal::Terminals::new(crate::host::fs::stdio_terminal()),
        timers: timer::Timers::default(),
        async_files: Default::default(),
        pi_futexes: Default::default(),
        idle_workers: Default::default(),
        syscall_sites: Default::default(),
        page_cache: crate::mm::cache::PageCache::new(phys),
        shared_files: crate::mm::shared_file::SharedFiles::new(phys),
        inode_changes: Default::default(),
        ipc: ipc::Ipc::new(phys),
        uts_names: Default::default(),
    };
    if config.trace {
        kernel.log(&format!(
            "nomu: entry path {}, physical memory {:#x}-{:#x}, {} MiB to commit (--mem)",
            kernel.entry.name(),
            mem.base(),
            mem.end(),
            config.mem >> 20
        ));
    }
    KERNEL.set(kernel).map_err(|_| "kernel booted twice".to_string())?;
    let kernel = KERNEL.get().unwrap();
    kernel.phys.set_free_hook(Box::new(move |addr, len| kernel.entry.memory_freed(addr, len)));
    kernel.phys.set_copy_hook(Box::new(move |dst, src, len| kernel.entry.code_copied(dst, src, len)));
    kernel.phys.commit().set_reclaim(Box::new(move || kernel.page_cache.reclaim()));
    kernel.entry.set_page_source(Box::new(move |addr, len| {
        kernel.phys.alloc_at(addr, len, crate::mm::phys::Fresh::Used).is_ok()
            && kernel.phys.set_prot(addr, len, libc::PROT_READ | libc::PROT_EXEC).is_ok()
    }));
    std::thread::Builder::new()
        .name("nomu-signals".into())
        .spawn(move || kernel.forward_host_signals())
        .map_err(|e| format!("starting the signal forwarder: {e}"))?;
    std::thread::Builder::new()
        .name("nomu-timers".into())
        .spawn(move || kernel.timers.run(kernel))
        .map_err(|e| format!("starting the timer thread: {e}"))?;
    Ok(kernel)
}

/// Why the first program could not start.
pub struct StartError {
    pub errno: Errno,
    pub message: String,
}

/// Whether `process` drops `sig` when it is not blocked: its action
/// ignores it, or is the default and the default is to ignore it
/// (Linux's sig_task_ignored).
fn ignores(process: &Process, sig: i32) -> bool {
    let act = process.signals.lock().unwrap().get(sig);
    // SIGCONT's default is to continue the process, done when it is sent.
    let default_ignored = signal::default_action(sig) == signal::DefaultAction::Ignore || sig == libc::SIGCONT;
    act.handler == signal::SIG_IGN || (act.handler == signal::SIG_DFL && default_ignored)
}

fn set_uts_field(field: &mut [libc::c_char], value: &[u8]) {
    field.fill(0);
    for (d, s) in field.iter_mut().zip(value.iter().take(64)) {
        *d = *s as libc::c_char;
    }
}

impl Kernel {
    /// The system's name as guests see it (uname, /proc/sys/kernel): the
    /// host's, with Linux's sysname and machine, and the host and domain
    /// names a guest set.
    pub fn uname(&self) -> libc::utsname {
        let mut u = crate::host::sys::uname();
        set_uts_field(&mut u.sysname, b"Linux");
        set_uts_field(&mut u.machine, b"x86_64");
        let names = self.uts_names.lock().unwrap();
        if let Some(n) = &names[UtsName::Host as usize] {
            set_uts_field(&mut u.nodename, n);
        }
        if let Some(n) = &names[UtsName::Domain as usize] {
            set_uts_field(&mut u.domainname, n);
        }
        u
    }

    /// sethostname/setdomainname's change (at most 64 bytes, checked).
    pub fn set_uts_name(&self, which: UtsName, name: Vec<u8>) {
        self.uts_names.lock().unwrap()[which as usize] = Some(name);
    }

    /// Whether a process, thread, process group or session has this id
    /// (a new process or thread may not take it).
    pub fn id_in_use(&self, id: u32) -> bool {
        self.tasks.id_in_use(id) || self.tasks.any_live(|p| p.threads.lock().unwrap().iter().any(|t| t.tid() == id))
    }

    /// Writes one line to nomu's own stderr.
    pub fn log(&self, line: &str) {
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        crate::host::sys::write_all(self.log.as_raw_fd(), &buf);
    }

    /// Starts the first guest process and waits until it ends (what it
    /// leaves running goes on: see
    /// [`wait_for_background`](Self::wait_for_background)).
    pub fn run_init(
        &'static self,
        path: &[u8],
        argv: Vec<Vec<u8>>,
        envp: Vec<Vec<u8>>,
    ) -> Result<ExitStatus, StartError> {
        let pid = self.pids.next(|_| false).expect("the first process's id");
        let process = Arc::new(Process::new_init(pid, self.phys));
        self.inherit_stdio(&process);
        // Start where nomu was started, if that lies inside the root.
        if let Ok(here) = self.root.open_path(&self.host_cwd_in_root(), libc::O_PATH | libc::O_DIRECTORY, 0) {
            if let Ok(p) = self.root.guest_path_of(std::os::fd::AsFd::as_fd(&here)) {
                *process.cwd.lock().unwrap() = p;
            }
        }
        let ids = cred::Cred::of_host().aux_ids();
        let start = self
            .prepare_first_program(&process, path, argv, envp, ids)
            .map_err(|e| StartError { errno: e.errno, message: e.message })?
            .install(&process);
        self.tasks.insert(Task {
            process: process.clone(),
            ppid: 0,
            pgid: pid,
            sid: pid,
            zombie: None,
            stop_event: None,
        });
        if process.cpu_limited() {
            self.timers.watch_cpu(&process);
        }
        let thread = Arc::new(Thread::first(pid, process));
        self.spawn_thread(thread, start)
            .map_err(|errno| StartError { errno, message: "cannot start a host thread".into() })?;
        Ok(self.tasks.wait_for_exit(pid))
    }

    /// Whether any guest process is alive (once the first program has
    /// ended: what it left running in the background).
    pub fn any_guest_alive(&self) -> bool {
        self.tasks.any_live(|_| true)
    }

    /// Waits until what the first program left running in the background
    /// has ended: it goes on as when the program runs directly (not killed
    /// as a pid namespace is when its init ends). With `quiet`, nomu's own
    /// messages go nowhere meanwhile (its caller has gone: host::front).
    pub fn wait_for_background(&self, quiet: bool) {
        if quiet {
            // The caller's terminal or pipes stay open only as long as a
            // guest holds them (its own duplicates), as with no nomu between.
            for fd in [0, 1, 2, self.log.as_raw_fd()] {
                crate::host::front::point_at_null(fd);
            }
        }
        self.tasks.wait_until_none_alive();
    }

    /// Loads the first program: `path` as given if it has a '/', else
    /// looked up in the guest's PATH as execvp(3) does (as env(1) or a shell
    /// would run it): the first candidate that loads; EACCES if one was
    /// found but none could run, ENOENT if none was found.
    fn prepare_first_program(
        &self,
        process: &Process,
        path: &[u8],
        argv: Vec<Vec<u8>>,
        envp: Vec<Vec<u8>>,
        ids: crate::loader::AuxIds,
    ) -> Result<crate::loader::Prepared, crate::loader::ExecError> {
        use crate::loader::ArgStrings;
        let argv: ArgStrings = argv.iter().map(Vec::as_slice).collect();
        let envp: ArgStrings = envp.iter().map(Vec::as_slice).collect();
        if path.is_empty() || path.contains(&b'/') {
            return crate::loader::prepare(self, process, path, argv, envp, ids);
        }
        // glibc's default when PATH is unset (confstr _CS_PATH).
        let search = envp.iter().find_map(|e| e.strip_prefix(b"PATH=")).unwrap_or(b"/bin:/usr/bin").to_vec();
        let mut denied = None;
        for dir in search.split(|&b| b == b':') {
            let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
            let candidate = [dir, b"/", path].concat();
            match crate::loader::prepare(self, process, &candidate, argv.clone(), envp.clone(), ids) {
                Ok(p) => return Ok(p),
                Err(e) if e.errno == Errno::EACCES => denied = Some(e),
                Err(e) if matches!(e.errno, Errno::ENOENT | Errno::ENOTDIR | Errno::ESTALE | Errno::ENODEV) => {}
                Err(e) => return Err(e),
            }
        }
        Err(denied.unwrap_or_else(|| Errno::ENOENT.into()))
    }

    /// Runs a guest thread on a new host thread of its own.
    pub fn spawn_thread(&'static self, thread: Arc<Thread>, start: crate::entry::StartState) -> Result<(), Errno> {
        // Registered first, so a signal sent at once finds the thread.
        thread.process.threads.lock().unwrap().push(thread.clone());
        self.start_registered_thread(thread, start)
    }

    /// spawn_thread for a thread already in its process's list (counted
    /// for RLIMIT_NPROC as it went in); it leaves the list if it cannot start.
    pub fn start_registered_thread(
        &'static self,
        thread: Arc<Thread>,
        start: crate::entry::StartState,
    ) -> Result<(), Errno> {
        self.continue_thread(thread.clone(), start).inspect_err(|_| {
            thread.process.threads.lock().unwrap().retain(|x| !Arc::ptr_eq(x, &thread));
            thread.process.thread_left.notify();
        })
    }

    /// Runs a registered guest thread from `start` on a host thread of its
    /// own: an idle one, or a new one.
    pub fn continue_thread(&'static self, thread: Arc<Thread>, start: crate::entry::StartState) -> Result<(), Errno> {
        // A host thread that ran a guest thread before takes it, if one is
        // idle: creating host threads (stacks, TLS, kernel stack) dominates
        // the cost of vfork otherwise.
        // (The idle list's lock is dropped before the wake: on one CPU the
        // woken worker runs at once, and its guest may end and want the list
        // back before this thread runs again.)
        let idle = self.idle_workers.lock().unwrap().pop();
        if let Some(worker) = idle {
            *worker.job.lock().unwrap() = Some((thread, start));
            worker.ready.notify_one();
            return Ok(());
        }
        // Kernel work runs on the thread's kernel stack; the host thread's own
        // stack only holds the few frames around entering guest mode. It
        // starts with the kick blocked, whatever its creator's mask (inside
        // a guest's trap it is let through): until the thread has its kernel
        // stack, a kick's handler would look for a Tcb on Rust's small
        // signal stack (regression: a signal sent to a child right after
        // its exec, on a new host thread, crashed nomu).
        let kick = 1u64 << (crate::entry::host_signals::KICK_SIGNAL - 1);
        let creator_mask = crate::host::sys::block_mask(kick);
        let spawned = std::thread::Builder::new()
            .name("nomu-guest".into())
            .stack_size(256 << 10)
            .spawn(move || self.worker_loop(thread, start));
        crate::host::sys::swap_sigmask(creator_mask);
        spawned.map(drop).map_err(|_| Errno::EAGAIN)
    }

    /// A host thread's life: run guest threads, one after another.
    fn worker_loop(&'static self, mut thread: Arc<Thread>, mut start: crate::entry::StartState) {
        let me = Arc::new(Worker::default());
        loop {
            let ended = trap::run_thread(self, thread, start);
            let stay = {
                let mut idle = self.idle_workers.lock().unwrap();
                // A host thread that made host threads for a forked
                // child's guest threads is their parent: they die with it.
                let stay = idle.len() < MAX_IDLE_WORKERS || crate::entry::split::parent_of_forked_threads();
                if stay {
                    idle.push(me.clone());
                }
                stay
            };
            // Only now may a vfork parent go on: on one CPU it runs at once,
            // finds its child a zombie and, when it vforks again, this host
            // thread idle (not one still on its way back to the idle list).
            if let Some(exited) = ended {
                exited.release_vfork_parent();
            }
            if !stay {
                return;
            }
            let mut job = me.job.lock().unwrap();
            loop {
                if let Some((t, s)) = job.take() {
                    (thread, start) = (t, s);
                    break;
                }
                job = me.ready.wait(job).unwrap();
            }
        }
    }

    /// The real uid of process `pid` (its first thread's), for the si_uid
    /// of what its parent hears of it.
    pub fn process_uid(&self, pid: u32) -> u32 {
        self.tasks.process(pid).map_or(crate::host::sys::host_cred().uids[0], |p| p.uid())
    }

    /// The live thread with this tid, in any process.
    pub fn find_thread(&self, tid: u32) -> Option<Arc<Thread>> {
        self.tasks.all_live().iter().find_map(|p| p.threads.lock().unwrap().iter().find(|t| t.tid() == tid).cloned())
    }

    /// The end of a process, in its own context: release its memory and
    /// descriptors, then let its parent see the status (and SIGCHLD). A
    /// vfork parent is released by the caller, after this.
    /// The guest process group a terminal's signals go to.
    pub fn foreground_pgrp(&self) -> u32 {
        match self.foreground.load(std::sync::atomic::Ordering::Relaxed) {
            0 => self.tasks.ids(1).map_or(1, |(pgid, _)| pgid),
            g => g,
        }
    }

    /// Body of the forwarder thread: a terminal's signals go to the guest's
    /// foreground process group, SIGTERM and SIGHUP to the first program (as
    /// a container runtime does), or to every process once it has ended.
    fn forward_host_signals(&self) {
        loop {
            let taken = crate::host::sys::sigwaitinfo(&FORWARDED_SIGNALS);
            let (code, band) = (taken.code, taken.band);
            if taken.signo == crate::host::terminal_agent::TERMINAL_PASSED_ON {
                self.pass_on_terminal_signal(taken.sender, taken.value);
                continue;
            }
            let sig = match taken.signo {
                crate::host::front::PASSED_ON if SIGNALS_FOR_GUESTS.contains(&taken.value) => taken.value,
                crate::host::front::PASSED_ON => continue,
                // Also passed on by the front: that copy is the one taken.
                s if SIGNALS_FOR_GUESTS.contains(&s) && taken.sender.is_some_and(crate::host::front::passes_on) => {
                    continue
                }
                s => s,
            };
            let targets = match sig {
                crate::host::fs::HOST_SIGIO => {
                    self.async_files.notify(self, Some(taken.fd), code, band);
                    continue;
                }
                libc::SIGIO => {
                    self.async_files.notify(self, None, code, band);
                    continue;
                }
                libc::SIGINT | libc::SIGQUIT | libc::SIGTSTP | libc::SIGWINCH => {
                    self.tasks.group_members(self.foreground_pgrp())
                }
                // Once the first program has ended, to what it left running.
                libc::SIGTERM | libc::SIGHUP => match self.tasks.process(task::FIRST_PID) {
                    Some(first) => vec![first],
                    None => self.tasks.all_live(),
                },
                _ => Vec::new(),
            };
            for p in targets {
                self.signal_process(&p, SigInfo::kernel(sig));
            }
        }
    }

    /// A signal a guest's terminal sent its agent (`agent`: the host pid
    /// that passed it on): to the foreground group of the session the
    /// terminal controls, and for a hangup to the session's leader too
    /// (Linux's tty_signal_session_leader and __tty_hangup).
    fn pass_on_terminal_signal(&self, agent: Option<i32>, sig: i32) {
        let Some((sid, tty)) = agent.and_then(|a| self.terminals.of_agent(a)) else { return };
        if !(1..=64).contains(&sig) {
            return;
        }
        let mut targets = self.tasks.group_members(tty.foreground);
        if matches!(sig, libc::SIGHUP | libc::SIGCONT) {
            if let Some(leader) = self.tasks.process(sid).filter(|l| !targets.iter().any(|p| p.pid == l.pid)) {
                targets.push(leader);
            }
        }
        for p in targets {
            self.signal_process(&p, SigInfo::kernel(sig));
        }
    }

    /// Job control at send time, as Linux does it: SIGCONT resumes a stopped
    /// process (and cancels its pending stops); a stop cancels a pending
    /// SIGCONT.
    fn job_control_on_send(&self, process: &Process, sig: i32) {
        let stops = [libc::SIGSTOP, libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU];
        if sig != libc::SIGCONT && !stops.contains(&sig) {
            return;
        }
        let threads = process.threads.lock().unwrap().clone();
        // In every thread's pending set and the process's (Linux's
        // prepare_signal flushes both).
        let discard = |sigs: &[i32]| {
            for t in &threads {
                let mut st = t.state.lock().unwrap();
                for &s in sigs {
                    st.pending.discard(s);
                }
            }
            process.shared_pending.with(|p| sigs.iter().for_each(|&s| p.discard(s)));
        };
        if sig == libc::SIGCONT {
            discard(&stops);
            if self.tasks.stop_event(process, task::StopEvent::Continued) {
                // Only now may its threads run: one that stops the process
                // again records its stop after this continue, never before
                // (regression: a quick re-stop was overwritten by the
                // continue, and the parent's wait4 waited forever).
                process.continued.notify();
                self.notify_parent_stop(process, crate::abi::CLD_CONTINUED, libc::SIGCONT);
            }
        } else {
            discard(&[libc::SIGCONT]);
        }
    }

    /// SIGCHLD for a child that stopped or continued, unless the parent
    /// asked not to hear of it (SA_NOCLDSTOP).
    fn notify_parent_stop(&self, child: &Process, code: i32, status: i32) {
        if let Some(parent) = self.tasks.parent(child.pid) {
            let nocldstop = parent.signals.lock().unwrap().get(libc::SIGCHLD).flags & libc::SA_NOCLDSTOP as u64 != 0;
            if !nocldstop {
                let info = SigInfo::child(code, child.pid, child.uid(), status);
                self.signal_process(&parent, info);
            }
        }
    }

    /// The default action of a stop signal: every thread of the process
    /// parks at its next trap until SIGCONT or SIGKILL.
    pub fn stop_process(&self, process: &Process, sig: i32) {
        if !self.tasks.stop_event(process, task::StopEvent::Stopped(sig)) {
            return;
        }
        self.notify_parent_stop(process, crate::abi::CLD_STOPPED, sig);
        for t in process.threads.lock().unwrap().iter() {
            self.interrupt(t);
        }
    }

    /// Queues a signal for one thread (tkill, tgkill, a timer's
    /// SIGEV_THREAD_ID) and makes sure it notices. False when its siginfo
    /// was not queued (the signal is ignored, or a standard signal was
    /// pending already).
    pub fn signal_thread(&self, thread: &Thread, info: SigInfo) -> bool {
        let sig = info.signo();
        self.job_control_on_send(&thread.process, sig);
        let ignored = ignores(&thread.process, sig);
        let mut st = thread.state.lock().unwrap();
        // An ignored signal is dropped at once unless blocked (Linux too).
        if ignored && !thread.may_block(&st, sig) && sig != libc::SIGKILL {
            return false;
        }
        let queued = thread.queue_signal(&mut st, info);
        // Linux's complete_signal does not wake a thread that blocks the
        // signal. One that runs (guest code or nomu's, not a wait) looks at
        // its pending signals whenever its mask changes, which only the
        // kernel does, so it needs no kick (a host signal: microseconds on
        // the seccomp path). A wait still gets its wake-up.
        let blocked = st.sigmask & signal::bit(sig) != 0 && !thread.sigmask_local.load(Ordering::SeqCst);
        drop(st);
        self.wake(thread, !blocked);
        queued
    }

    /// Ends `thread`'s process with `status` (the first such status wins):
    /// its other threads are kicked and leave at their next trap.
    pub fn exit_group(&self, thread: &Arc<Thread>, status: ExitStatus) {
        let process = &thread.process;
        process.group_exit.set_first(status);
        // Kicked outside the threads' lock: each one woken leaves the group
        // at once (leave_group takes that lock), and on two CPUs it would
        // block on it, to be woken once more, while the rest are kicked.
        let others: Vec<Arc<Thread>> =
            process.threads.lock().unwrap().iter().filter(|t| !Arc::ptr_eq(t, thread)).cloned().collect();
        for t in &others {
            self.interrupt(t);
        }
    }

    /// Makes `thread` look at what was just queued or decided for it: it
    /// leaves guest code, or the host call it waits in, at once.
    pub fn interrupt(&self, thread: &Thread) {
        self.wake(thread, true);
    }

    /// [`Kernel::interrupt`], but a thread that is not in a wait is kicked
    /// out of guest code only with `kick_running`.
    fn wake(&self, thread: &Thread, kick_running: bool) {
        let host_tid = thread.host_tid.load(Ordering::Relaxed);
        if host_tid == crate::host::sys::gettid() {
            return; // the caller itself, which looks before it goes back
        }
        // Against the waiter's store of where it waits and its look at
        // what is queued: either it sees what was queued, or this sees it
        // waiting.
        std::sync::atomic::fence(Ordering::SeqCst);
        match Waiting::of(thread) {
            // Inside a syscall, in wait_for: moving its own word ends the
            // wait, and it delivers before it goes back to guest code, so
            // its host thread (or guest process) needs no kick.
            Waiting::OnWords => {
                thread.wake_word.fetch_add(1, Ordering::SeqCst);
                crate::host::sys::wake_word(&thread.wake_word);
            }
            // A forked child's guest code runs in its host process of its own.
            Waiting::InHostCall if crate::entry::split::interrupt_own_process(host_tid) => {
                crate::entry::host_signals::kick(host_tid);
            }
            Waiting::InHostCall => {
                self.entry.interrupt(host_tid);
                self.entry.interrupt_kernel_side(host_tid);
            }
            Waiting::No if !kick_running => {}
            Waiting::No => {
                if !crate::entry::split::interrupt_own_process(host_tid) {
                    self.entry.interrupt(host_tid)
                }
            }
        }
    }

    /// Queues a process-directed signal (kill, sigqueue, a timer's
    /// SIGEV_SIGNAL, SIGCHLD, a terminal's) in the process's shared pending
    /// set, and wakes one thread that takes it, as Linux's __send_signal
    /// and complete_signal: its first thread if that does not block it,
    /// else the one the last such signal went to, or the next after it
    /// that does not block it. If every thread blocks it, it
    /// stays pending for the process: a thread that unblocks it takes it,
    /// and sigwait, sigpending and signalfd see it from any thread. False
    /// when its siginfo was not queued (the signal is ignored, a standard
    /// signal was pending already, or the process has no thread left).
    pub fn signal_process(&self, process: &Process, info: SigInfo) -> bool {
        let sig = info.signo();
        self.job_control_on_send(process, sig);
        let ignored = ignores(process, sig);
        let threads = process.threads.lock().unwrap().clone();
        let Some(first) = threads.first() else { return false };
        // Ignored: dropped at once unless blocked, by its first thread's
        // mask (Linux's sig_ignored looks at the task the pid names).
        if ignored && !first.may_block(&first.state.lock().unwrap(), sig) && sig != libc::SIGKILL {
            return false;
        }
        let queued = process.shared_pending.with(|p| p.add(info));
        // Watchers take no lock a sender holds (kernel::poll::Wakeup).
        process.signal_queued.notify();
        // complete_signal: the first thread if it takes it, else the first
        // that does from the last target on; none if every thread blocks it.
        let bit = signal::bit(sig);
        if first.claim_process_signals(bit) != 0 {
            self.interrupt(first);
            return queued;
        }
        let from = process.curr_target.load(std::sync::atomic::Ordering::Relaxed);
        let start = threads.iter().position(|t| t.tid() == from).unwrap_or(0);
        let (before, after) = threads.split_at(start);
        if let Some(t) = after.iter().chain(before).find(|t| t.claim_process_signals(bit) != 0) {
            process.curr_target.store(t.tid(), std::sync::atomic::Ordering::Relaxed);
            self.interrupt(t);
        }
        queued
    }

    /// Linux's retarget_shared_pending: `from` will not take the process's
    /// pending signals in `which` (it just blocked them, or it is leaving),
    /// so each goes to another thread that takes it, if one does; one
    /// nobody takes stays pending for the process.
    pub fn retarget_shared(&self, from: &Thread, which: u64) {
        let process = &from.process;
        let mut retarget = process.shared_pending.set() & which;
        if retarget == 0 {
            return;
        }
        let threads = process.threads.lock().unwrap().clone();
        for t in threads.iter().filter(|t| !std::ptr::eq(Arc::as_ptr(t), from)) {
            let takes = t.claim_process_signals(retarget);
            if takes == 0 {
                continue;
            }
            retarget &= !takes;
            self.interrupt(t);
            if retarget == 0 {
                break;
            }
        }
    }

    /// nomu's own working directory as a guest path ("/" when it lies
    /// outside the root).
    fn host_cwd_in_root(&self) -> Vec<u8> {
        let cwd = std::env::current_dir().unwrap_or_default();
        let cwd = std::os::unix::ffi::OsStrExt::as_bytes(cwd.as_os_str()).to_vec();
        self.root.strip_host_prefix(&cwd).unwrap_or_else(|| b"/".to_vec())
    }

    fn inherit_stdio(&self, process: &Process) {
        let mut files = process.files.lock().unwrap();
        for fd in 0..3 {
            // A descriptor nomu was started without stays closed for the guest.
            let Ok(host) = crate::host::fs::dup_raw(fd) else { continue };
            let path = format!("/dev/fd/{fd}").into_bytes();
            files.install_at(fd as usize, Arc::new(OpenFile::new(host, path, false)), false);
        }
    }
}
