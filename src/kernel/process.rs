//! Guest processes and threads: the home of the process lifecycle.

use super::cred::Cred;
use super::signal::{AltStack, Pending, SignalActions};
use super::waiter::Event;
use crate::fs::fdtable::FdTable;
use crate::mm::phys::PhysicalMemory;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How a process ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ExitStatus {
    Code(i32),
    /// Killed by `signo`; `core`: a core file was written (wait's
    /// WCOREDUMP, CLD_DUMPED).
    Signal {
        signo: i32,
        core: bool,
    },
}

impl ExitStatus {
    /// Killed by `signo`, a signal whose default action dumps core or not:
    /// nomu writes no core file, and Linux reports a core only when it
    /// wrote one (never with Debian's RLIMIT_CORE of 0), so none is
    /// reported. bash printed "Quit (core dumped)" where Linux says "Quit".
    pub fn killed(signo: i32) -> ExitStatus {
        ExitStatus::Signal { signo, core: false }
    }

    /// A non-zero word for [`GroupExit`]: code or signal, tagged.
    fn encode(self) -> u64 {
        match self {
            ExitStatus::Code(c) => 1 << 32 | c as u32 as u64,
            ExitStatus::Signal { signo, core } => 2 << 32 | (core as u64) << 8 | (signo as u32 & 0xff) as u64,
        }
    }

    fn decode(word: u64) -> Option<ExitStatus> {
        match word >> 32 {
            1 => Some(ExitStatus::Code(word as u32 as i32)),
            2 => Some(ExitStatus::Signal { signo: (word & 0xff) as i32, core: word & 0x100 != 0 }),
            _ => None,
        }
    }
}

/// A process's group-exit status, set once (the first exit_group or fatal
/// signal wins). Every guest syscall checks it, so reading takes no lock.
#[derive(Default)]
pub struct GroupExit(AtomicU64);

impl GroupExit {
    pub fn get(&self) -> Option<ExitStatus> {
        // SeqCst, as set_first (see Kernel::interrupt); a plain load on x86.
        ExitStatus::decode(self.0.load(Ordering::SeqCst))
    }

    /// Sets the status unless one is set already; returns the one in force.
    pub fn set_first(&self, status: ExitStatus) -> ExitStatus {
        match self.0.compare_exchange(0, status.encode(), Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => status,
            Err(old) => ExitStatus::decode(old).unwrap_or(status),
        }
    }
}

pub const RLIM_NLIMITS: usize = 16;

/// An address space as processes hold it: shared by a vfork child and its
/// parent until the child execs.
/// What /proc/PID/exe names: the running program's file, its canonical
/// guest path worked out when the link is read, as Linux's d_path of the
/// file is (a rename since shows; a file deleted since says so), and not
/// at every exec, where it was a readlink of /proc/self/fd (~1.5 us of
/// each vfork + execve); or a path given (the first process).
#[derive(Clone)]
pub enum ExeFile {
    Path(Arc<[u8]>),
    /// The file, and the path it was executed by (if its own cannot be
    /// read).
    Open(Arc<crate::fs::file::OpenFile>, Arc<[u8]>),
    /// Its memory is gone (it exited): a zombie has no exe link (ENOENT,
    /// as Linux's get_task_exe_file finds no mm), and holds no file open.
    Gone,
}

impl ExeFile {
    pub fn guest_path(&self, root: &crate::fs::path::Root) -> Option<Vec<u8>> {
        match self {
            ExeFile::Path(p) => Some(p.to_vec()),
            ExeFile::Open(f, by) => Some(root.guest_path_of(f.fd()).unwrap_or_else(|_| by.to_vec())),
            ExeFile::Gone => None,
        }
    }
}

/// A process's address space, shareable (CLONE_VM).
pub type Mm = crate::mm::space::SharedSpace;

pub struct Process {
    pub pid: u32,
    mm: Mutex<Mm>,
    pub files: crate::sync::OrderedMutex<FdTable, { crate::sync::FILES }>,
    /// Absolute guest path of the working directory.
    pub cwd: Mutex<Vec<u8>>,
    pub umask: AtomicU32,
    pub signals: crate::sync::OrderedMutex<SignalActions, { crate::sync::SIGNALS }>,
    pub rlimits: Mutex<[libc::rlimit; RLIM_NLIMITS]>,
    /// The absolute guest path the running program was started by (its
    /// name, comm, comes from it).
    pub exe: Mutex<Vec<u8>>,
    /// The running program's file, for /proc/PID/exe.
    pub exe_file: Mutex<ExeFile>,
    /// The running program's file, busy for writing while this lives.
    pub program: Mutex<Option<crate::fs::text_busy::RunningProgram>>,
    /// argv of the running program, each NUL-terminated (/proc/PID/cmdline).
    /// Shared, not copied, by a vfork child until it execs (the same for
    /// exe_file and environ, which can be large).
    pub cmdline: Mutex<Arc<[u8]>>,
    /// The environment the running program started with, each
    /// NUL-terminated (/proc/PID/environ).
    pub environ: Mutex<Arc<[u8]>>,
    /// When the process was created (/proc/PID/stat's start time).
    pub started: std::time::Instant,
    /// Set when a vfork child stops borrowing its parent's memory (it
    /// exec'd or exited), which lets the parent continue.
    vfork_released: AtomicBool,
    /// Notified when vfork_released is set.
    pub vfork_release: Event,
    /// The process's threads.
    pub threads: crate::sync::OrderedMutex<Vec<Arc<Thread>>, { crate::sync::THREADS }>,
    /// Set by exit_group or a fatal signal: every thread leaves, and this is
    /// the process's status.
    pub group_exit: GroupExit,
    /// The signal that stopped it (job control), until SIGCONT or SIGKILL;
    /// 0 while it runs. Checked on every guest syscall, hence atomic.
    pub stopped: AtomicI32,
    /// Notified when a stopped process continues.
    pub continued: Event,
    /// Notified when a thread leaves `threads` (execve's de_thread waits).
    pub thread_left: Event,
    /// Notified whenever a signal becomes pending for one of its threads
    /// or for the process: signalfd reads, polls and epoll items wait on it
    /// (Linux's sighand->signalfd_wqh).
    pub signal_queued: Arc<super::poll::PollHead>,
    /// Notified when one of its threads leaves, when it exits and when it
    /// is reaped: what its pidfds' polls wait on (Linux's wait_pidfd).
    pub pidfd_wait: Arc<super::poll::PollHead>,
    /// Signals sent to the process as a whole (Linux's
    /// signal->shared_pending): any thread that does not block one takes
    /// it (see Kernel::signal_process).
    pub shared_pending: SharedPending,
    /// The tid of the thread the last process-directed signal was given
    /// to: the next search for a thread starts there (Linux's
    /// signal->curr_target).
    pub curr_target: AtomicU32,
    /// ITIMER_REAL (alarm, setitimer); not inherited by children.
    pub real_timer: Mutex<super::timer::RealTimer>,
    /// ITIMER_VIRTUAL and ITIMER_PROF: not inherited, kept at execve.
    pub cpu_timers: Mutex<super::timer::CpuTimers>,
    /// Its POSIX timers (timer_create): not inherited, gone at execve.
    pub posix_timers: Mutex<super::timer::PosixTimers>,
    /// Resource usage of reaped children (RUSAGE_CHILDREN, times).
    pub children_usage: Mutex<(Duration, Duration)>,
    /// User and system time of its threads that have ended (Linux's
    /// signal->utime and stime): with its live threads', its CPU time.
    pub ended_threads_cpu: Mutex<(Duration, Duration)>,
}

impl Process {
    /// Its user and system time: its ended threads' and its live ones'
    /// (getrusage RUSAGE_SELF, times, CLOCK_PROCESS_CPUTIME_ID).
    pub fn cpu_time(&self) -> (Duration, Duration) {
        let (mut u, mut s) = *self.ended_threads_cpu.lock().unwrap();
        for t in self.threads.lock().unwrap().iter() {
            let (tu, ts) = t.cpu_time();
            u += tu;
            s += ts;
        }
        (u, s)
    }

    /// The first process: the limits and umask nomu was started with, an
    /// empty address space.
    pub fn new_init(pid: u32, phys: &'static PhysicalMemory) -> Process {
        let rlimits = std::array::from_fn(|r| crate::host::sys::guest_rlimit(r as u32));
        let mm = crate::mm::space::new_shared(phys);
        let umask = crate::host::sys::guest_umask();
        Process::with(pid, mm, FdTable::default(), b"/".to_vec(), umask, SignalActions::default(), rlimits, Vec::new())
    }

    /// The running program's file name, as execve gave it (comm before any
    /// PR_SET_NAME): at most 15 bytes.
    pub fn program_name(&self) -> Vec<u8> {
        let exe = self.exe.lock().unwrap();
        let base = exe.rsplit(|&b| b == b'/').next().unwrap_or(&exe);
        base.iter().copied().take(15).collect()
    }

    /// A child created by vfork (or clone with CLONE_VM): it borrows the
    /// parent's memory and inherits copies of everything else.
    pub fn new_child(parent: &Process, pid: u32) -> Process {
        // One lock at a time (arguments' guards would all live to the end
        // of the call, out of the order in src/sync.rs).
        let files = parent.files.lock().unwrap().clone();
        let signals = parent.signals.lock().unwrap().clone();
        let cwd = parent.cwd.lock().unwrap().clone();
        let rlimits = *parent.rlimits.lock().unwrap();
        let exe = parent.exe.lock().unwrap().clone();
        let child =
            Process::with(pid, parent.mm(), files, cwd, parent.umask.load(Ordering::Relaxed), signals, rlimits, exe);
        // Until it execs, it runs its parent's program in its parent's memory.
        *child.exe_file.lock().unwrap() = parent.exe_file.lock().unwrap().clone();
        *child.cmdline.lock().unwrap() = parent.cmdline.lock().unwrap().clone();
        *child.environ.lock().unwrap() = parent.environ.lock().unwrap().clone();
        child
    }

    /// What a process inherits is given; the rest starts fresh.
    #[allow(clippy::too_many_arguments)]
    fn with(
        pid: u32,
        mm: Mm,
        files: FdTable,
        cwd: Vec<u8>,
        umask: u32,
        signals: SignalActions,
        rlimits: [libc::rlimit; RLIM_NLIMITS],
        exe: Vec<u8>,
    ) -> Process {
        mm.lock().unwrap().enter();
        Process {
            pid,
            mm: Mutex::new(mm),
            files: crate::sync::OrderedMutex::new(files),
            cwd: Mutex::new(cwd),
            umask: AtomicU32::new(umask),
            signals: crate::sync::OrderedMutex::new(signals),
            rlimits: Mutex::new(rlimits),
            cmdline: Mutex::new([exe.as_slice(), &[0]].concat().into()),
            environ: Mutex::new(Arc::from(&[][..])),
            started: std::time::Instant::now(),
            exe_file: Mutex::new(ExeFile::Path(exe.as_slice().into())),
            exe: Mutex::new(exe),
            program: Mutex::new(None),
            vfork_released: AtomicBool::new(false),
            vfork_release: Event::new(),
            threads: crate::sync::OrderedMutex::new(Vec::new()),
            group_exit: GroupExit::default(),
            real_timer: Mutex::new(Default::default()),
            cpu_timers: Mutex::new(Default::default()),
            posix_timers: Mutex::new(Default::default()),
            children_usage: Mutex::new(Default::default()),
            ended_threads_cpu: Mutex::new(Default::default()),
            stopped: AtomicI32::new(0),
            continued: Event::new(),
            thread_left: Event::new(),
            signal_queued: super::poll::PollHead::new(),
            pidfd_wait: super::poll::PollHead::new(),
            shared_pending: SharedPending::default(),
            curr_target: AtomicU32::new(pid),
        }
    }

    pub fn mm(&self) -> Mm {
        self.mm.lock().unwrap().clone()
    }

    /// Installs a new address space (execve, exit) and leaves the old one:
    /// if no other process uses it (a CLONE_VM sharer), it is torn down
    /// here, in this process's context (mm::space's tear_down), whoever
    /// else still holds a reference to it.
    pub fn replace_mm(&self, mm: Mm) {
        mm.lock().unwrap().enter();
        let old = std::mem::replace(&mut *self.mm.lock().unwrap(), mm);
        old.lock().unwrap().leave();
    }

    pub fn rlimit(&self, resource: u32) -> libc::rlimit {
        self.rlimits.lock().unwrap()[resource as usize]
    }

    /// Whether RLIMIT_CPU limits it (then its CPU time is watched).
    pub fn cpu_limited(&self) -> bool {
        let r = self.rlimit(libc::RLIMIT_CPU);
        r.rlim_cur != libc::RLIM_INFINITY || r.rlim_max != libc::RLIM_INFINITY
    }

    pub fn nofile_limit(&self) -> usize {
        self.rlimit(libc::RLIMIT_NOFILE).rlim_cur.min(1 << 20) as usize
    }

    /// Its real uid: its first thread's (the one /proc shows).
    pub fn uid(&self) -> u32 {
        self.cred().uid
    }

    /// Its first thread's credentials (nomu's own before it has a thread).
    pub fn cred(&self) -> Cred {
        let first = self.threads.lock().unwrap().first().cloned();
        first.map_or_else(Cred::of_host, |t| t.cred())
    }

    /// The vfork parent may run again (the child exec'd or exited).
    pub fn release_vfork_parent(&self) {
        self.vfork_released.store(true, Ordering::SeqCst);
        self.vfork_release.notify();
    }

    /// Whether this vfork child let its parent go (see release_vfork_parent).
    pub fn vfork_parent_released(&self) -> bool {
        self.vfork_released.load(Ordering::SeqCst)
    }
}

/// A process's shared pending signals, with a copy of their set that is
/// read without the lock (every return to guest code and every wait looks
/// at it).
#[derive(Default)]
pub struct SharedPending {
    pending: crate::sync::OrderedMutex<Pending, { crate::sync::SHARED_PENDING }>,
    set: AtomicU64,
}

impl SharedPending {
    /// The signals pending (a snapshot).
    pub fn set(&self) -> u64 {
        self.set.load(Ordering::SeqCst)
    }

    /// Runs `f` on the pending signals, under their lock.
    pub fn with<R>(&self, f: impl FnOnce(&mut Pending) -> R) -> R {
        let mut p = self.pending.lock().unwrap();
        let r = f(&mut p);
        self.set.store(p.set, Ordering::SeqCst);
        r
    }

    /// Takes the signal a thread that blocks `blocked` takes next (see
    /// Pending::take); no lock when none is pending.
    pub fn take(&self, blocked: u64) -> Option<super::signal::SigInfo> {
        if self.set() & !(blocked & !super::signal::UNBLOCKABLE) == 0 {
            return None;
        }
        self.with(|p| p.take(blocked))
    }

    /// Takes the next signal in `set`, blocked or not (sigtimedwait, a
    /// signalfd's read).
    pub fn take_from(&self, set: u64) -> Option<super::signal::SigInfo> {
        if self.set() & set == 0 {
            return None;
        }
        self.with(|p| p.take_from(set))
    }
}

/// Per-thread state that other threads may need to see.
pub struct ThreadState {
    pub clear_child_tid: u64,
    pub robust_list: u64,
    pub sigmask: u64,
    /// The signals this thread waits for in rt_sigtimedwait: blocked, and
    /// yet a process-directed one may pick this thread for them (Linux
    /// unblocks them for the wait, keeping the mask in real_blocked).
    pub sigwait: u64,
    /// Signals sent to this thread (its process's are in
    /// Process::shared_pending).
    pub pending: Pending,
    pub altstack: AltStack,
    /// The thread's name (PR_SET_NAME / comm).
    pub comm: [u8; 16],
    /// The host thread's CPU times when this guest thread started on it
    /// (host threads are reused, so their own totals include others').
    /// A vfork child run on the same host thread moves it on by its own.
    pub cpu_base: (libc::timeval, libc::timeval),
    /// The host thread's CPU times when this thread stopped using it, if it
    /// ended while another guest thread ran there (a vfork parent that died
    /// under its child).
    pub cpu_end: Option<(libc::timeval, libc::timeval)>,
    pub pdeathsig: i32,
}

impl Default for ThreadState {
    fn default() -> Self {
        ThreadState {
            clear_child_tid: 0,
            robust_list: 0,
            sigmask: 0,
            sigwait: 0,
            pending: Pending::default(),
            altstack: AltStack::disabled(),
            comm: [0; 16],
            cpu_base: (libc::timeval { tv_sec: 0, tv_usec: 0 }, libc::timeval { tv_sec: 0, tv_usec: 0 }),
            cpu_end: None,
            pdeathsig: 0,
        }
    }
}

pub struct Thread {
    /// Its id: fixed but for one change, when it execs while another
    /// thread leads its process and takes the leader's (Linux's de_thread).
    tid: AtomicU32,
    pub process: Arc<Process>,
    pub state: crate::sync::OrderedMutex<ThreadState, { crate::sync::STATE }>,
    /// The host thread running this guest thread (0 until it starts), for
    /// kicking it out of guest code when a signal arrives.
    pub host_tid: AtomicI32,
    /// Another thread's execve wants this one gone.
    pub kill_requested: AtomicBool,
    /// Set whenever a signal is queued for this thread, or one queued for
    /// its process picks it (or it unblocks one pending there); cleared
    /// only by delivery, under the state lock, when nothing of its own is
    /// left pending (Linux's TIF_SIGPENDING). Lets the syscall return path
    /// skip the lock when no signal is waiting; a thread looks at its
    /// process's pending signals only while it is set.
    pub signal_hint: AtomicBool,
    /// While set, the thread's signal mask is its forked child's host
    /// process's to change (split's "Local answers"): `state.sigmask` may
    /// be behind, so a signal sent to it is neither dropped as ignored nor
    /// passed over as blocked, and it is kicked to look (the kernel takes
    /// the mask back at its trap).
    pub sigmask_local: AtomicBool,
    /// Where the thread waits, if it does (super::waiter::Waiting), so
    /// Kernel::interrupt knows how to end the wait.
    pub waiting: AtomicU8,
    /// A futex word of the thread's own that its waits on words also sleep
    /// on: a signal for it moves and wakes this word instead of kicking its
    /// host thread (see kernel/waiter.rs).
    pub wake_word: AtomicU32,
    /// The thread has left its thread group (see trap::finish_thread).
    pub left: AtomicBool,
    /// Its PI futexes were let go as it died: no waiter queues behind it.
    pub futex_dead: AtomicBool,
    /// Its credentials (a leaf lock: nothing is locked while it is held).
    pub cred: Mutex<Cred>,
    /// Linux's PF_NPROC_EXCEEDED: a set*uid made it a task of a user over
    /// RLIMIT_NPROC, so its next execve fails (kernel/nproc.rs).
    pub nproc_exceeded: AtomicBool,
    /// Its scheduling attributes (a leaf lock too).
    pub sched: Mutex<super::sched::SchedAttr>,
}

impl Thread {
    pub fn tid(&self) -> u32 {
        self.tid.load(Ordering::Relaxed)
    }

    /// An execve by a thread that does not lead its process, once every
    /// other thread is gone: it becomes the leader, with the pid as its id.
    pub fn become_leader(&self) {
        self.tid.store(self.process.pid, Ordering::Relaxed);
    }

    /// Its user and system time so far, as [`Thread::rusage`] counts them,
    /// asked from any host thread.
    pub fn cpu_time(&self) -> (Duration, Duration) {
        if self.on_own_host_thread() {
            let r = self.rusage();
            return (timeval_duration(r.ru_utime), timeval_duration(r.ru_stime));
        }
        self.cpu_time_elsewhere()
    }

    /// [`cpu_time`](Self::cpu_time), `usage` being what
    /// [`rusage`](Self::rusage) just returned: no second host call on its
    /// own host thread (an exit wants both).
    pub fn cpu_time_in(&self, usage: &libc::rusage) -> (Duration, Duration) {
        if self.on_own_host_thread() {
            return (timeval_duration(usage.ru_utime), timeval_duration(usage.ru_stime));
        }
        self.cpu_time_elsewhere()
    }

    fn on_own_host_thread(&self) -> bool {
        self.host_tid.load(Ordering::Relaxed) == crate::host::sys::gettid()
    }

    fn cpu_time_elsewhere(&self) -> (Duration, Duration) {
        let st = self.state.lock().unwrap();
        let (base_u, base_s) = (timeval_duration(st.cpu_base.0), timeval_duration(st.cpu_base.1));
        let (u, s) = match st.cpu_end {
            Some((u, s)) => (timeval_duration(u), timeval_duration(s)),
            None => crate::host::sys::thread_cpu_time_of(self.host_tid.load(Ordering::Relaxed)),
        };
        (u.saturating_sub(base_u), s.saturating_sub(base_s))
    }

    /// Resource usage of this guest thread: the host thread's, with the CPU
    /// times of earlier guest threads on the same host thread taken out.
    pub fn rusage(&self) -> libc::rusage {
        let mut r = crate::host::sys::thread_rusage();
        let st = self.state.lock().unwrap();
        let (u, s) = st.cpu_base;
        let (end_u, end_s) = st.cpu_end.unwrap_or((r.ru_utime, r.ru_stime));
        r.ru_utime = timeval_sub(end_u, u);
        r.ru_stime = timeval_sub(end_s, s);
        r
    }

    /// Takes in what the host process of the forked child this host
    /// thread runs answered itself (a set_robust_list, see split's "Local
    /// answers"): before the kernel handles the thread's next trap or its
    /// exit.
    pub fn take_local_answers(&self) {
        if let Some(head) = crate::entry::split::take_local_robust_list() {
            self.state.lock().unwrap().robust_list = head;
        }
    }

    /// The first guest thread: nomu's credentials and scheduling.
    pub fn first(tid: u32, process: Arc<Process>) -> Thread {
        Thread::with(tid, process, Cred::of_host(), super::sched::SchedAttr::default())
    }

    /// A thread or process `creator` makes: it inherits its credentials
    /// and scheduling attributes (as Linux's copy_creds and sched_fork).
    /// Its name (comm) too, as Linux's dup_task_struct copies it: a
    /// forked child or a new thread is called what its creator was.
    pub fn new(tid: u32, process: Arc<Process>, creator: &Thread) -> Thread {
        let cred = creator.cred();
        let sched = creator.sched.lock().unwrap().for_child();
        let comm = creator.state.lock().unwrap().comm;
        let thread = Thread::with(tid, process, cred, sched);
        thread.state.lock().unwrap().comm = comm;
        thread
    }

    /// Its name (comm, at most 15 bytes): what PR_SET_NAME set, else its
    /// program's file name as execve gave it (Linux sets comm at exec).
    pub fn comm(&self) -> Vec<u8> {
        let name = self.state.lock().unwrap().comm;
        let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        if len > 0 {
            return name[..len].to_vec();
        }
        self.process.program_name()
    }

    /// A copy of its credentials.
    pub fn cred(&self) -> Cred {
        self.cred.lock().unwrap().clone()
    }

    fn with(tid: u32, process: Arc<Process>, cred: Cred, sched: super::sched::SchedAttr) -> Thread {
        Thread {
            tid: AtomicU32::new(tid),
            process,
            state: crate::sync::OrderedMutex::new(ThreadState::default()),
            host_tid: AtomicI32::new(0),
            kill_requested: AtomicBool::new(false),
            signal_hint: AtomicBool::new(false),
            sigmask_local: AtomicBool::new(false),
            waiting: AtomicU8::new(super::waiter::Waiting::No as u8),
            wake_word: AtomicU32::new(0),
            left: AtomicBool::new(false),
            futex_dead: AtomicBool::new(false),
            cred: Mutex::new(cred),
            nproc_exceeded: AtomicBool::new(false),
            sched: Mutex::new(sched),
        }
    }

    /// Whether SIGKILL is pending for it or for its process.
    pub fn sigkill_pending(&self) -> bool {
        let kill = super::signal::bit(libc::SIGKILL);
        self.process.shared_pending.set() & kill != 0 || self.state.lock().unwrap().pending.set & kill != 0
    }

    /// Of the process's pending signals in `set`, those this thread takes:
    /// those it does not block, or waits for in rt_sigtimedwait (Linux's
    /// wants_signal, but a thread that is stopped or has signals pending
    /// already may be picked too). If it takes any, its hint is set, under
    /// its state's lock so that a delivery that found nothing cannot clear
    /// it after (Linux's signal_wake_up setting TIF_SIGPENDING); the
    /// caller then interrupts it.
    pub fn claim_process_signals(&self, set: u64) -> u64 {
        if self.left.load(Ordering::Acquire) {
            return 0;
        }
        let st = self.state.lock().unwrap();
        let blocked = if self.sigmask_local.load(Ordering::SeqCst) { 0 } else { st.sigmask & !st.sigwait };
        let takes = set & (!blocked | super::signal::UNBLOCKABLE);
        if takes != 0 {
            self.signal_hint.store(true, Ordering::SeqCst);
        }
        takes
    }

    /// Whether this thread blocks `sig`, or may (its mask is its host
    /// process's meanwhile, see `sigmask_local`); `st` is its state, locked.
    pub fn may_block(&self, st: &ThreadState, sig: i32) -> bool {
        st.sigmask & super::signal::bit(sig) != 0 || self.sigmask_local.load(Ordering::SeqCst)
    }

    /// Makes `info` pending for this thread; `st` is this thread's state,
    /// locked. The only way signals become pending for a thread (it keeps
    /// the hint true); a process's are queued by Kernel::signal_process.
    /// False when its siginfo was not queued: a standard signal pending
    /// already.
    pub fn queue_signal(&self, st: &mut ThreadState, info: super::signal::SigInfo) -> bool {
        let queued = st.pending.add(info);
        self.signal_hint.store(true, Ordering::Release);
        // Its watchers take no lock a holder of a thread's state waits for
        // (kernel::poll::Wakeup).
        self.process.signal_queued.notify();
        queued
    }
}

pub fn timeval_duration(t: libc::timeval) -> Duration {
    Duration::new(t.tv_sec.max(0) as u64, t.tv_usec.clamp(0, 999_999) as u32 * 1000)
}

pub fn duration_timeval(d: Duration) -> libc::timeval {
    libc::timeval { tv_sec: d.as_secs() as i64, tv_usec: d.subsec_micros() as i64 }
}

/// a - b, never below zero.
pub fn timeval_sub(a: libc::timeval, b: libc::timeval) -> libc::timeval {
    let us = ((a.tv_sec - b.tv_sec) * 1_000_000 + (a.tv_usec - b.tv_usec)).max(0);
    libc::timeval { tv_sec: us / 1_000_000, tv_usec: us % 1_000_000 }
}

pub fn timeval_add(a: libc::timeval, b: libc::timeval) -> libc::timeval {
    let us = (a.tv_sec + b.tv_sec) * 1_000_000 + a.tv_usec + b.tv_usec;
    libc::timeval { tv_sec: us / 1_000_000, tv_usec: us % 1_000_000 }
}

/// Linux's PID_MAX_DEFAULT: process and thread ids stay below it and wrap
/// around to RESERVED_PIDS when they reach it (/proc/sys/kernel/pid_max).
pub const PID_MAX: u32 = 32768;
/// Linux's RESERVED_PIDS: where ids start again after wrapping.
const RESERVED_PIDS: u32 = 300;

/// Process and thread ids, as Linux's alloc_pid hands them out: the next
/// after the last one given, below `max`, skipping those in use once the
/// ids have wrapped around.
pub struct PidAllocator {
    last: AtomicU32,
    wrapped: AtomicBool,
    allocated: AtomicU64,
    max: u32,
}

impl PidAllocator {
    pub const fn new() -> PidAllocator {
        PidAllocator::with_max(PID_MAX)
    }

    const fn with_max(max: u32) -> PidAllocator {
        PidAllocator { last: AtomicU32::new(0), wrapped: AtomicBool::new(false), allocated: AtomicU64::new(0), max }
    }

    /// A free id; `in_use` says which are taken (asked only once the ids
    /// have wrapped: before that every id is new). None when every id is
    /// in use (fork's EAGAIN).
    pub fn next(&self, in_use: impl Fn(u32) -> bool) -> Option<u32> {
        for _ in 0..self.max {
            let mut wrapped = false;
            let step = |p: u32| {
                wrapped = p + 1 >= self.max;
                Some(if wrapped { RESERVED_PIDS.min(self.max - 1) } else { p + 1 })
            };
            let prev = self.last.fetch_update(Ordering::Relaxed, Ordering::Relaxed, step).unwrap();
            let id = if prev + 1 >= self.max { RESERVED_PIDS.min(self.max - 1) } else { prev + 1 };
            if wrapped {
                self.wrapped.store(true, Ordering::Relaxed);
            }
            if !self.wrapped.load(Ordering::Relaxed) || !in_use(id) {
                self.allocated.fetch_add(1, Ordering::Relaxed);
                return Some(id);
            }
        }
        None
    }

    /// The last id given (/proc/loadavg).
    pub fn last(&self) -> u32 {
        self.last.load(Ordering::Relaxed)
    }

    /// How many ids were given (/proc/stat's "processes").
    pub fn allocated(&self) -> u64 {
        self.allocated.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::PidAllocator;

    #[test]
    fn pids_wrap_and_skip_those_in_use() {
        let pids = PidAllocator::with_max(310);
        let taken = |id: u32| id == 300 || id == 302;
        let first: Vec<u32> = (0..309).map(|_| pids.next(taken).unwrap()).collect();
        assert_eq!(first[0], 1);
        assert_eq!(first[308], 309);
        // Wrapped: 300 and 302 are taken.
        assert_eq!(pids.next(taken), Some(301));
        assert_eq!(pids.next(taken), Some(303));
        assert_eq!(pids.allocated(), 311);
        let pids = PidAllocator::with_max(310);
        for _ in 0..309 {
            pids.next(|_| true).unwrap();
        }
        assert_eq!(pids.next(|_| true), None, "every id in use");
    }
}
