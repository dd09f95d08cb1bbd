//! A guest thread as the entry path sees it: traps in, resume decisions out.

use super::exit::{self, Ended, Exited};
use super::process::{timeval_add, timeval_sub, ExitStatus, Mm, Thread};
use super::sigframe::{self, FaultRegs};
use super::signal::{self, DefaultAction, SigInfo};
use super::waiter::Wake;
use super::Kernel;
use crate::abi::errno::Errno;
use crate::abi::KernelSigaction;
use crate::entry::{Fault, GuestKernel, Resume, StartState, Trap, TrapFrame};
use crate::mm::uaccess::UserMem;
use std::sync::Arc;

pub struct ThreadCtx {
    pub kernel: &'static Kernel,
    pub thread: Arc<Thread>,
    /// The process's address space (cached here; execve replaces it).
    pub mm: Mm,
    /// Set when the thread must leave guest mode for good.
    pub exit: Option<ExitStatus>,
    /// Trap number, error code and address of the fault being delivered.
    fault_regs: Option<FaultRegs>,
    /// The number of the syscall this trap is for (to restart it).
    pub syscall_nr: Option<u64>,
    /// The mask to restore after a handler run by rt_sigsuspend.
    pub saved_mask: Option<u64>,
    /// A vfork child running on its parent's host thread (see
    /// run_vfork_child): the parent, which waits in its vfork until this
    /// child execs or exits.
    pub vfork_parent: Option<Arc<Thread>>,
    /// Set by execve in such a child: it leaves its parent's host thread
    /// and goes on from this state on one of its own.
    pub hand_off: Option<StartState>,
    /// Set by a handler whose EPIPE raises no SIGPIPE, though its table
    /// entry says it may (a write to a datagram or seqpacket socket).
    pub quiet_epipe: std::cell::Cell<bool>,
}

/// How a guest thread's run on a host thread ended.
enum RunEnd {
    /// It must end, with this status.
    Exit(ExitStatus),
    /// A vfork child that ran on its parent's host thread exec'd: it goes
    /// on from this state, on a host thread of its own.
    HandedOff(StartState),
}

/// Body of a guest thread's host thread: run guest code; then end the
/// thread (see kernel::exit), and if it was the last, its process, in this
/// same context. A process that ended is returned: its vfork parent, if
/// any, is still waiting, for the caller to release.
pub fn run_thread(kernel: &'static Kernel, thread: Arc<Thread>, start: StartState) -> Option<Exited> {
    let status = match run_guest(kernel, thread.clone(), start, None) {
        RunEnd::Exit(status) => status,
        RunEnd::HandedOff(_) => unreachable!("only a vfork child on its parent's host thread is handed off"),
    };
    match exit::exit_thread(kernel, &thread, status) {
        Ended::Process(exited) => Some(exited),
        Ended::Thread => None,
    }
}

/// Runs a vfork child on its parent's host thread, from inside the
/// parent's vfork (the parent waits there anyway): no host thread to wake,
/// no host context switch, until the child execs (it then goes on on a host
/// thread of its own) or exits. If the parent must die meanwhile, it dies
/// at once (see ThreadCtx::release_dying_parent).
pub fn run_vfork_child(kernel: &'static Kernel, child: Arc<Thread>, start: StartState, parent: &Arc<Thread>) {
    let status = match run_guest(kernel, child.clone(), start, Some(parent.clone())) {
        RunEnd::HandedOff(s) => match kernel.continue_thread(child.clone(), s) {
            Ok(()) => None,
            Err(_) => {
                // No host thread for it: it dies as if killed.
                kernel.log(&format!("nomu: no host thread for process {} after its execve", child.process.pid));
                Some(SIGKILLED)
            }
        },
        RunEnd::Exit(status) => Some(status),
    };
    // Its parent is this host thread's caller and goes on when this
    // returns; the release is the same last step as anywhere.
    if let Some(status) = status {
        if let Ended::Process(exited) = exit::exit_thread(kernel, &child, status) {
            exited.release_vfork_parent();
        }
    }
    // The parent runs on here again, with its own CPU affinity.
    super::sched::apply_affinity(parent);
    // The child's CPU time on this host thread is not the parent's.
    let child_start = child.state.lock().unwrap().cpu_base;
    let now = crate::host::sys::thread_rusage();
    let mut st = parent.state.lock().unwrap();
    st.cpu_base.0 = timeval_add(st.cpu_base.0, timeval_sub(now.ru_utime, child_start.0));
    st.cpu_base.1 = timeval_add(st.cpu_base.1, timeval_sub(now.ru_stime, child_start.1));
}

fn run_guest(
    kernel: &'static Kernel,
    thread: Arc<Thread>,
    start: StartState,
    vfork_parent: Option<Arc<Thread>>,
) -> RunEnd {
    thread.host_tid.store(crate::host::sys::gettid(), std::sync::atomic::Ordering::Relaxed);
    super::sched::apply_affinity(&thread);
    let host = crate::host::sys::thread_rusage();
    thread.state.lock().unwrap().cpu_base = (host.ru_utime, host.ru_stime);
    let mut ctx = ThreadCtx {
        kernel,
        thread: thread.clone(),
        mm: thread.process.mm(),
        exit: None,
        fault_regs: None,
        syscall_nr: None,
        saved_mask: None,
        vfork_parent,
        hand_off: None,
        quiet_epipe: std::cell::Cell::new(false),
    };
    let mut start = start;
    loop {
        // A forked child's memory is its own: it runs in a host process of
        // its own, whatever the path the other guests use.
        let own_host = ctx.mm.lock().unwrap().own_host();
        if own_host {
            crate::entry::split::run_own_process(start, &mut ctx);
        } else {
            kernel.entry.run(start, &mut ctx);
        }
        match ctx.hand_off.take() {
            // execve from or into a host process of its own (a forked
            // child, a fixed-address program whose range is taken): the
            // other path, on this same host thread.
            Some(s) if ctx.vfork_parent.is_none() && ctx.exit.is_none() => start = s,
            Some(s) => return RunEnd::HandedOff(s),
            None => return RunEnd::Exit(ctx.exit.unwrap_or(ExitStatus::Code(0))),
        }
    }
}

impl ThreadCtx {
    /// Ends the whole process (exit_group, a fatal signal): the other
    /// threads are kicked and leave at their next trap.
    pub fn exit_group(&mut self, status: ExitStatus) {
        self.kernel.exit_group(&self.thread, status);
        self.exit = Some(status);
    }

    /// Whether this thread must leave (exit_group elsewhere, execve elsewhere).
    fn must_leave(&self) -> Option<ExitStatus> {
        // SeqCst (a plain load on x86) against Kernel::interrupt's look at
        // where the thread waits.
        if self.thread.kill_requested.load(std::sync::atomic::Ordering::SeqCst) {
            return Some(ExitStatus::Code(0));
        }
        self.thread.process.group_exit.get()
    }

    /// Remembers a syscall instruction used for the first time, if it lies
    /// in code loaded from a file, for the next exec of that file.
    #[cold]
    fn note_new_syscall_site(&self, site: u64) {
        let space = self.mm.lock().unwrap();
        if let Some((start, vma)) = space.find(site as usize) {
            if let Some(origin) = &vma.origin {
                self.kernel.syscall_sites.record(origin, site - start as u64);
            }
            // Code in a writable mapping may change under the path's patch.
            if vma.prot & libc::PROT_WRITE == 0 {
                self.kernel.entry.patch_syscall_site(site);
            }
        }
    }

    /// A stopped process's threads wait here until SIGCONT (sent, not
    /// delivered, resumes them) or until they must die (SIGKILL pending,
    /// exit_group).
    #[cold]
    fn park_while_stopped(&mut self) {
        let process = self.thread.process.clone();
        loop {
            let _ = self.wait_for(Some(&process.continued), None, Wake::OnCondition, || {
                let killed = self.thread.sigkill_pending();
                let resumed = process.stopped.load(std::sync::atomic::Ordering::Acquire) == 0;
                Ok((resumed || killed || self.must_leave().is_some() || self.vfork_parent_dying()).then_some(()))
            });
            if !self.vfork_parent_dying() {
                return;
            }
            self.release_dying_parent(); // and this child stays stopped
        }
    }

    /// Whether the thread must die now: SIGKILL pending, or the process is
    /// going away.
    pub fn fatal_signal_pending(&self) -> bool {
        death_of(&self.thread).is_some()
    }

    /// Whether a signal is waiting that a blocking call must stop for (or
    /// the thread must exit, or its vfork parent must die).
    pub fn signal_pending(&self) -> bool {
        if self.exit.is_some() || self.must_leave().is_some() {
            return true;
        }
        if self.vfork_parent_dying() {
            return true; // the trap lets it die (and restarts the call)
        }
        let st = self.thread.state.lock().unwrap();
        let mut pending = st.pending.set;
        // Its process's, once one picked it (Linux's TIF_SIGPENDING): a
        // thread a signal did not pick goes on, as on Linux.
        if self.thread.signal_hint.load(std::sync::atomic::Ordering::SeqCst) {
            pending |= self.thread.process.shared_pending.set();
        }
        pending & !(st.sigmask & !signal::UNBLOCKABLE) != 0
    }

    /// Sets this thread's signal mask (SIGKILL and SIGSTOP are never
    /// blocked); returns the old one. The process's pending signals it
    /// now blocks go to threads that take them (Linux's
    /// __set_task_blocked); those it does not block it takes itself, on
    /// its way back to guest code (recalc_sigpending).
    pub fn set_sigmask(&self, mask: u64) -> u64 {
        let mask = mask & !signal::UNBLOCKABLE;
        let old = {
            let mut st = self.thread.state.lock().unwrap();
            if self.thread.process.shared_pending.set() & !mask != 0 {
                self.thread.signal_hint.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            std::mem::replace(&mut st.sigmask, mask)
        };
        self.kernel.retarget_shared(&self.thread, mask & !old);
        old
    }

    /// A vfork child that runs on its parent's host thread: if the parent
    /// must die meanwhile (SIGKILL, its process's exit_group, execve in
    /// another of its threads), it dies now, as Linux's killable vfork wait
    /// lets it, and this child goes on (orphaned, if the parent's process
    /// ended). The parent's own frames wait under this child's until it
    /// execs or exits, and then only leave.
    #[cold]
    pub fn release_dying_parent(&mut self) {
        let Some(status) = self.vfork_parent.as_ref().and_then(|p| death_of(p)) else { return };
        let parent = self.vfork_parent.take().unwrap();
        if status == SIGKILLED && parent.process.group_exit.get().is_none() {
            // A pending SIGKILL ends its whole process, as its delivery would.
            self.kernel.exit_group(&parent, status);
        }
        // Its CPU time until this child started is its own.
        let child_start = self.thread.state.lock().unwrap().cpu_base;
        parent.state.lock().unwrap().cpu_end = Some(child_start);
        if let Ended::Process(exited) = exit::exit_thread(self.kernel, &parent, status) {
            exited.release_vfork_parent();
        }
    }

    /// Whether this is a vfork child on its parent's host thread whose
    /// parent must die (see release_dying_parent).
    pub fn vfork_parent_dying(&self) -> bool {
        self.vfork_parent.as_ref().is_some_and(|p| death_of(p).is_some())
    }

    /// After a vfork child ran on this thread's host thread: whether this
    /// thread died meanwhile (see release_dying_parent); it then leaves.
    pub fn leave_if_gone(&mut self) {
        if self.thread.left.load(std::sync::atomic::Ordering::Acquire) {
            self.exit = Some(self.must_leave().unwrap_or(ExitStatus::Code(0)));
        }
    }

    /// A signal the kernel raises against this thread itself (SIGPIPE on
    /// EPIPE, kill of itself); delivered before the guest runs again.
    pub fn raise(&mut self, info: SigInfo) {
        let mut st = self.thread.state.lock().unwrap();
        let _ = self.thread.queue_signal(&mut st, info);
    }

    /// Whether `f` is a page fault that copy on access between a forked
    /// parent and child explains (mm::space's cow.rs), or one another
    /// thread fixed since it was taken (that copy on access, or an
    /// mprotect allowing the access): resolved, the thread retries it.
    fn resolve_copy_fault(&mut self, f: &Fault) -> bool {
        const PAGE_FAULT: u64 = 14;
        const WRITE: u64 = 1 << 1;
        const FETCH: u64 = 1 << 4;
        const SEGV_ACCERR: i32 = 2;
        if f.signo != libc::SIGSEGV || f.code != SEGV_ACCERR || f.trapno != PAGE_FAULT {
            return false;
        }
        let access = if f.err & WRITE != 0 {
            crate::mm::space::Access::Write
        } else if f.err & FETCH != 0 {
            crate::mm::space::Access::Exec
        } else {
            crate::mm::space::Access::Read
        };
        let mut mm = self.mm.lock().unwrap();
        match mm.resolve_copy_fault(f.addr as usize, access) {
            Ok(resolved) => resolved || mm.fixed_since_fault(f.addr as usize, access),
            Err(_) => {
                drop(mm);
                self.out_of_memory_kill();
                true
            }
        }
    }

    /// A forked child whose copy of its parent's pages does not fit in
    /// `--mem` (mm::space's cow.rs): killed, as Linux's OOM killer would,
    /// with a line saying so, as the kernel's log has.
    #[cold]
    fn out_of_memory_kill(&mut self) {
        let pid = self.thread.process.pid;
        eprintln!(
            "nomu: out of memory (--mem): killed process {pid} ({})",
            String::from_utf8_lossy(&self.thread.comm())
        );
        let mut st = self.thread.state.lock().unwrap();
        let _ = self.thread.queue_signal(&mut st, SigInfo::kernel(libc::SIGKILL));
    }

    /// A synchronous fault: it cannot be blocked or ignored, so if it is,
    /// the default action comes back (Linux's force_sig).
    #[cold]
    fn force_fault(&mut self, f: &Fault) {
        let sig = f.signo;
        {
            let mut acts = self.thread.process.signals.lock().unwrap();
            let mut st = self.thread.state.lock().unwrap();
            let act = acts.get(sig);
            if act.handler == signal::SIG_IGN || st.sigmask & signal::bit(sig) != 0 {
                st.sigmask &= !signal::bit(sig);
                acts.set(sig, KernelSigaction::default());
            }
            let _ = self.thread.queue_signal(&mut st, SigInfo::fault(sig, f.code, f.addr));
        }
        self.fault_regs = Some(FaultRegs { trapno: f.trapno, err: f.err, cr2: f.addr });
    }

    fn trace_signal(&self, info: &SigInfo) {
        if self.kernel.trace {
            self.kernel.log(&format!(
                "[{}] --- {} {{si_signo={}, si_code={}}} ---",
                self.thread.tid(),
                signal::name(info.signo()),
                signal::name(info.signo()),
                info.code()
            ));
        }
    }

    /// Delivers pending, unblocked signals before the thread goes back to
    /// guest code: default actions are carried out, and at most one handler
    /// frame is pushed (its handler runs first; the rest wait for the next
    /// return to the kernel).
    fn deliver_signals(&mut self, frame: &mut TrapFrame) {
        // A syscall interrupted by a signal either restarts (re-executes
        // its `syscall` instruction) or fails with EINTR, as Linux decides
        // from its result code and the handler's SA_RESTART.
        let interrupted = self.syscall_nr.take().and_then(|nr| {
            let e = Errno(-(frame.regs.rax as i64) as i32);
            e.is_restart().then_some((nr, e))
        });
        let restart = |frame: &mut TrapFrame, handler: Option<&KernelSigaction>| {
            if let Some((nr, e)) = interrupted {
                match signal::after_signal(e, handler.map(|a| a.flags)) {
                    signal::AfterSignal::Restart => {
                        frame.regs.rip -= 2; // `syscall` and zpoline's `call *%rax` are both 2 bytes
                        frame.regs.rax = nr;
                    }
                    signal::AfterSignal::Eintr => frame.regs.rax = (-Errno::EINTR.0 as i64) as u64,
                }
            }
        };
        loop {
            // Nothing queued since the last look, for the thread or for its
            // process with this thread picked: no lock needed.
            let process = &self.thread.process;
            let next = if self.thread.signal_hint.load(std::sync::atomic::Ordering::Acquire) {
                let mut st = self.thread.state.lock().unwrap();
                let blocked = st.sigmask;
                // Its own signals first, then its process's (Linux's
                // dequeue_signal).
                let take = || st.pending.take(blocked).or_else(|| process.shared_pending.take(blocked));
                let next = super::timer::take_signal(process, take).map(|info| (info, blocked));
                if next.is_none() {
                    // Its own blocked signals stay pending and keep the
                    // hint; its process's wait for a thread they pick.
                    self.thread.signal_hint.store(st.pending.set != 0, std::sync::atomic::Ordering::Release);
                }
                next
            } else {
                None
            };
            let Some((info, blocked)) = next else {
                restart(frame, None);
                if let Some(m) = self.saved_mask.take() {
                    self.set_sigmask(m);
                }
                return;
            };
            let sig = info.signo();
            let act = self.thread.process.signals.lock().unwrap().get(sig);
            let fault = self.fault_regs.take().unwrap_or_default();
            match act.handler {
                signal::SIG_IGN if sig != libc::SIGKILL && sig != libc::SIGSTOP => continue,
                signal::SIG_DFL | signal::SIG_IGN => match signal::default_action(sig) {
                    DefaultAction::Ignore | DefaultAction::Continue => continue,
                    DefaultAction::Stop => {
                        self.trace_signal(&info);
                        self.kernel.stop_process(&self.thread.process, sig);
                        self.park_while_stopped();
                        continue;
                    }
                    DefaultAction::Terminate | DefaultAction::CoreDump => {
                        self.trace_signal(&info);
                        self.exit_group(ExitStatus::killed(sig));
                        return;
                    }
                },
                _ => {
                    self.trace_signal(&info);
                    restart(frame, Some(&act));
                    // After rt_sigsuspend the frame keeps the mask from before it.
                    let blocked = self.saved_mask.take().unwrap_or(blocked);
                    let mut alt = self.thread.state.lock().unwrap().altstack;
                    let mem = UserMem::new(&self.mm);
                    if sigframe::push(&mem, frame, &act, &info, blocked, &mut alt, fault).is_err() {
                        // No room for the frame: Linux kills with SIGSEGV.
                        self.exit_group(ExitStatus::killed(libc::SIGSEGV));
                        return;
                    }
                    self.thread.state.lock().unwrap().altstack = alt;
                    let mut mask = blocked | act.mask;
                    if act.flags & libc::SA_NODEFER as u64 == 0 {
                        mask |= signal::bit(sig);
                    }
                    self.set_sigmask(mask);
                    if act.flags & libc::SA_RESETHAND as u64 != 0 {
                        self.thread.process.signals.lock().unwrap().set(sig, KernelSigaction::default());
                    }
                    return;
                }
            }
        }
    }
}

const SIGKILLED: ExitStatus = ExitStatus::Signal { signo: libc::SIGKILL, core: false };

/// Whether `thread` must die now, and with what status: its process going
/// away, another thread's execve, or SIGKILL pending.
fn death_of(thread: &Thread) -> Option<ExitStatus> {
    if let Some(status) = thread.process.group_exit.get() {
        return Some(status);
    }
    if thread.kill_requested.load(std::sync::atomic::Ordering::SeqCst) {
        return Some(ExitStatus::Code(0));
    }
    thread.sigkill_pending().then_some(SIGKILLED)
}

impl GuestKernel for ThreadCtx {
    fn take_host_ops(&mut self) -> (Vec<crate::mm::space::HostOp>, crate::mm::space::HostFrees) {
        self.mm.lock().unwrap().take_host_ops()
    }

    fn free_after_host_ops(&mut self, frees: crate::mm::space::HostFrees) {
        if !frees.is_empty() {
            self.mm.lock().unwrap().free_after_host_ops(frees);
        }
    }

    fn read_guest_u64(&mut self, addr: u64) -> Option<u64> {
        crate::mm::uaccess::UserMem::new(&self.mm).read::<u64>(addr).ok()
    }

    fn guest_physical(&mut self, addr: u64) -> Option<u64> {
        let (phys, _) = self.mm.lock().unwrap().translate(addr as usize, 1)?;
        Some(phys as u64)
    }

    fn own_code_copy(&mut self, addr: u64) -> Option<u64> {
        self.mm.lock().unwrap().own_code_copy(addr as usize).map(|p| p as u64)
    }

    fn local_answers(&self) -> Option<(u32, u32)> {
        (!self.kernel.trace).then_some((self.thread.tid(), self.thread.process.pid))
    }

    fn local_sigmask(&self) -> Option<(u64, u64)> {
        if self.kernel.trace || self.thread.process.threads.lock().unwrap().len() != 1 {
            return None;
        }
        // Senders look at the flag after they queue, under the locks read
        // below: either a signal is in the snapshot, or its sender kicks.
        self.thread.sigmask_local.store(true, std::sync::atomic::Ordering::SeqCst);
        let st = self.thread.state.lock().unwrap();
        let (mask, pending) = (st.sigmask, st.pending.set);
        drop(st);
        Some((mask, pending | self.thread.process.shared_pending.set()))
    }

    fn take_local_answers(&mut self) {
        self.thread.take_local_answers();
        if self.thread.sigmask_local.load(std::sync::atomic::Ordering::SeqCst) {
            if let Some(mask) = crate::entry::split::take_local_sigmask() {
                self.set_sigmask(mask);
            }
            // Only once the kernel's mask is the guest's again.
            self.thread.sigmask_local.store(false, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn on_host_process_lost(&self) -> Option<Arc<dyn Fn() + Send + Sync>> {
        let (kernel, process) = (self.kernel, self.thread.process.clone());
        Some(Arc::new(move || {
            kernel.signal_process(&process, super::signal::SigInfo::kernel(libc::SIGKILL));
        }))
    }

    fn on_trap(&mut self, trap: Trap, frame: &mut TrapFrame) -> Resume {
        if let Some(status) = self.must_leave() {
            self.exit = Some(status);
            return Resume::Exit;
        }

        if let Some(site) = frame.new_site {
            self.note_new_syscall_site(site);
        }
        match trap {
            Trap::Syscall => crate::syscall::handle(self, frame),
            Trap::Fault(f) if self.resolve_copy_fault(&f) => {}
            Trap::Fault(f) => self.force_fault(&f),
            Trap::Interrupt => {}
        }
        if self.vfork_parent.is_some() {
            // Killed meanwhile (or by this very syscall): it dies now.
            self.release_dying_parent();
        }
        if self.hand_off.is_some() {
            // execve in a vfork child on its parent's host thread: it goes
            // on elsewhere (where signals are looked at before it runs).
            return Resume::Exit;
        }
        if self.exit.is_none() {
            // An exit_group or execve elsewhere that came during the call
            // (it ended a wait here): leave now, as Linux's pending
            // SIGKILL does on the way back to user mode, rather than
            // resume the guest only to trap again at once. On the rewrite
            // path that next trap was the restarted syscall's int3 (a host
            // SIGTRAP, ~1.1 us), on seccomp a SIGSYS: a 32-thread
            // exit_group cost 1.3x zpoline's on rewrite.
            if let Some(status) = self.must_leave() {
                self.exit = Some(status);
            }
        }
        if self.exit.is_none() {
            // Another thread stopped the process: park until it continues.
            if self.thread.process.stopped.load(std::sync::atomic::Ordering::Acquire) != 0 {
                self.park_while_stopped();
            }
            self.deliver_signals(frame);
        }
        // An exit_group or execve elsewhere after the check above kicks this
        // thread: its next trap (an Interrupt at the latest) leaves.
        if self.exit.is_some() {
            Resume::Exit
        } else {
            Resume::Guest
        }
    }
}
