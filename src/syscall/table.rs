//! The one table of every syscall nomu implements, with how well.
//! `nomu syscalls` prints it; anything not here returns ENOSYS.
//!
//! One `sys!` entry per syscall names its handler and its parameters'
//! types (src/syscall/args.rs): those types both decode the handler's
//! arguments and say how `--trace` shows them.

use super::args::*;
use super::names::{MAX_SYSCALL, NAMES, SYSCALL_NAMES};
use super::{
    cred, events, exec, fs, info, io, ipc, locks, memory, net, pidfd, process, sched, signal, splice, time, wait,
    xattr, Args, Ctx, SysResult,
};
use std::sync::OnceLock;

/// What the dispatcher calls: `sys!` makes one per entry, which decodes the
/// raw registers and calls the typed handler.
pub type Handler = fn(&mut Ctx, &Args) -> SysResult;

/// How `--trace` shows an argument (each `SysArg` type names one).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Arg {
    /// `int`: the low 32 bits, signed.
    Int,
    /// `unsigned int`: the low 32 bits.
    Uint,
    /// `long`: all 64 bits, signed.
    Long,
    /// `unsigned long`, `size_t`: all 64 bits.
    Ulong,
    /// An `unsigned long` in hex.
    Hex,
    /// An `int` or `unsigned int` in hex.
    Hex32,
    Ptr,
    Fd,
    DirFd,
    Path,
    /// A buffer read by the call; the index of its length argument.
    InBuf(usize),
    /// A buffer filled by the call (shown with the returned length).
    OutBuf,
    OpenFlags,
    Mode,
    Prot,
    MapFlags,
    AtFlags,
    Signal,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Support {
    Full,
    /// Works, with the stated difference from Linux.
    Partial(&'static str),
}

pub struct SyscallDef {
    pub nr: u64,
    pub name: &'static str,
    pub handler: Handler,
    pub args: &'static [Arg],
    pub support: Support,
    pub ret_hex: bool,
    pub raises_sigpipe: bool,
    /// It may change an existing inode's attributes (mode, times, link
    /// count, size): every such call must say so, or the null device's
    /// fstat, which nomu answers itself, can go stale (see
    /// `OpenFile::null_device_stat`).
    pub changes_inodes: bool,
}

/// A syscall nomu implements; its name is Linux's for that number, and its
/// handler must be named after it (evaluated at compile time: an entry
/// that gives one syscall's number to another's handler does not build).
const fn def(nr: u64, handler_name: &str, handler: Handler, args: &'static [Arg]) -> SyscallDef {
    assert!(is_handler_for(handler_name, NAMES[nr as usize]), "a handler is not named sys_ + its syscall's name");
    SyscallDef {
        nr,
        name: NAMES[nr as usize],
        handler,
        args,
        support: Support::Full,
        ret_hex: false,
        raises_sigpipe: false,
        changes_inodes: false,
    }
}

/// Whether `handler` is `sys_` followed by `name`.
const fn is_handler_for(handler: &str, name: &str) -> bool {
    let (handler, name) = (handler.as_bytes(), name.as_bytes());
    if name.is_empty() || handler.len() != name.len() + 4 {
        return false;
    }
    let mut i = 0;
    while i < handler.len() {
        let expected = if i < 4 { b"sys_"[i] } else { name[i - 4] };
        if handler[i] != expected {
            return false;
        }
        i += 1;
    }
    true
}

impl SyscallDef {
    const fn partial(mut self, note: &'static str) -> Self {
        self.support = Support::Partial(note);
        self
    }
    const fn hex(mut self) -> Self {
        self.ret_hex = true;
        self
    }
    const fn sigpipe(mut self) -> Self {
        self.raises_sigpipe = true;
        self
    }
    const fn changes_inodes(mut self) -> Self {
        self.changes_inodes = true;
        self
    }
}

/// `sys!(0, io::sys_read(Fd, OutBuf, usize))`: syscall 0 is `io::sys_read`,
/// called as `sys_read(ctx, Fd::decode(a[0]), OutBuf::decode(a[1]),
/// usize::decode(a[2]))`, and traced as `[Arg::Fd, Arg::OutBuf, Arg::Ulong]`.
/// The handler's parameters must be those types (the compiler checks), and
/// a seventh type finds no register (no rule matches).
macro_rules! sys {
    // Every type has its register: the call.
    (@call $handler:path, $ctx:ident, $raw:ident, [$($reg:tt)*], [$($arg:expr),*], ) => {
        $handler($ctx, $($arg),*)
    };
    // The next type decodes the next register.
    (@call $handler:path, $ctx:ident, $raw:ident, [$reg:tt $($regs:tt)*], [$($arg:expr),*], $ty:ty $(, $tys:ty)*) => {
        sys!(@call $handler, $ctx, $raw, [$($regs)*], [$($arg,)* <$ty as SysArg>::decode($raw[$reg])], $($tys),*)
    };
    ($nr:expr, $module:ident :: $handler:ident ()) => {
        def($nr, stringify!($handler), |ctx, _| $module::$handler(ctx), &[])
    };
    ($nr:expr, $module:ident :: $handler:ident ( $($ty:ty),* )) => {
        def(
            $nr,
            stringify!($handler),
            |ctx, raw| sys!(@call $module::$handler, ctx, raw, [0 1 2 3 4 5], [], $($ty),*),
            &[$(<$ty as SysArg>::TRACE),*],
        )
    };
}

pub static SYSCALLS: &[SyscallDef] = &[
    sys!(0, io::sys_read(Fd, OutBuf, usize)),
    sys!(1, io::sys_write(Fd, InBuf<2>, usize)).sigpipe(),
    sys!(2, fs::sys_open(Path, OpenFlags, Mode)),
    sys!(3, io::sys_close(Fd)),
    sys!(4, fs::sys_stat(Path, UserPtr)),
    sys!(5, fs::sys_fstat(Fd, UserPtr)),
    sys!(6, fs::sys_lstat(Path, UserPtr)),
    sys!(7, wait::sys_poll(UserPtr, u32, i32)),
    sys!(8, io::sys_lseek(Fd, i64, u32)),
    sys!(9, memory::sys_mmap(UserPtr, usize, Prot, MapFlags, Fd, Hex))
        .hex()
        .partial(
            "a MAP_PRIVATE mapping of a file shows the file as it was at mmap: a later write of the file does not show in it (Linux's shows it in pages not yet written)",
        ),
    sys!(10, memory::sys_mprotect(UserPtr, usize, Prot)),
    sys!(11, memory::sys_munmap(UserPtr, usize)),
    sys!(12, memory::sys_brk(UserPtr)).hex(),
    sys!(13, signal::sys_rt_sigaction(Signal, UserPtr, UserPtr, usize)),
    sys!(14, signal::sys_rt_sigprocmask(i32, UserPtr, UserPtr, usize)),
    sys!(15, signal::sys_rt_sigreturn()).hex(),
    // The argument is a pointer for most requests, a number for some: the
    // request decides (file_ops).
    sys!(16, io::sys_ioctl(Fd, Hex<u32>, UserPtr)).partial("terminal queries, FIO* and socket queries only"),
    sys!(17, io::sys_pread64(Fd, OutBuf, usize, i64)),
    sys!(18, io::sys_pwrite64(Fd, InBuf<2>, usize, i64)).sigpipe(),
    // vlen is an unsigned long, but import_iovec takes an unsigned int.
    sys!(19, io::sys_readv(Fd, UserPtr, u32)),
    sys!(20, io::sys_writev(Fd, UserPtr, u32)).sigpipe(),
    sys!(21, fs::sys_access(Path, i32)),
    sys!(22, io::sys_pipe(UserPtr)),
    sys!(23, wait::sys_select(i32, UserPtr, UserPtr, UserPtr, UserPtr)),
    sys!(24, process::sys_sched_yield()),
    sys!(25, memory::sys_mremap(UserPtr, usize, usize, Hex, UserPtr))
        .hex()
        .partial("MREMAP_FIXED and MREMAP_DONTUNMAP are EINVAL"),
    sys!(26, memory::sys_msync(UserPtr, usize, Hex<i32>)),
    sys!(27, memory::sys_mincore(UserPtr, usize, UserPtr)).partial(
        "a page counts as resident when nomu's physical memory holds data for it: untouched pages another mapping used before count",
    ),
    sys!(28, memory::sys_madvise(UserPtr, usize, i32)),
    sys!(29, ipc::sys_shmget(i32, usize, Hex<i32>)),
    sys!(30, ipc::sys_shmat(i32, UserPtr, Hex<i32>)).hex().partial(SHMAT_NOTE),
    sys!(31, ipc::sys_shmctl(i32, i32, UserPtr)),
    sys!(32, io::sys_dup(Fd)),
    sys!(33, io::sys_dup2(Fd, Fd)),
    sys!(34, wait::sys_pause()),
    sys!(35, time::sys_nanosleep(UserPtr, UserPtr)),
    sys!(36, time::sys_getitimer(i32, UserPtr)),
    sys!(37, time::sys_alarm(u32)),
    sys!(38, time::sys_setitimer(i32, UserPtr, UserPtr)),
    sys!(39, process::sys_getpid()),
    sys!(40, io::sys_sendfile(Fd, Fd, UserPtr, usize)),
    // Sockets (net.rs): SIGPIPE is raised by the sending calls themselves,
    // which know MSG_NOSIGNAL.
    sys!(41, net::sys_socket(i32, Hex<i32>, i32)).partial(
        "AF_UNIX, AF_INET, AF_INET6, AF_PACKET, NETLINK_ROUTE and NETLINK_SOCK_DIAG only: other families are EAFNOSUPPORT, other netlink protocols EPROTONOSUPPORT",
    ),
    sys!(42, net::sys_connect(Fd, UserPtr, i32)),
    sys!(43, net::sys_accept(Fd, UserPtr, UserPtr)),
    sys!(44, net::sys_sendto(Fd, InBuf<2>, usize, Hex<i32>, UserPtr, i32)).partial(NETLINK_NOTE),
    sys!(45, net::sys_recvfrom(Fd, OutBuf, usize, Hex<i32>, UserPtr, UserPtr)),
    sys!(46, net::sys_sendmsg(Fd, UserPtr, Hex<u32>)).partial(NETLINK_NOTE),
    sys!(47, net::sys_recvmsg(Fd, UserPtr, Hex<u32>))
        .partial("SCM_CREDENTIALS from a datagram sender other than the socket's peer carry a host pid"),
    sys!(48, net::sys_shutdown(Fd, i32)),
    sys!(49, net::sys_bind(Fd, UserPtr, i32)),
    sys!(50, net::sys_listen(Fd, i32)),
    sys!(51, net::sys_getsockname(Fd, UserPtr, UserPtr)),
    sys!(52, net::sys_getpeername(Fd, UserPtr, UserPtr)),
    sys!(53, net::sys_socketpair(i32, Hex<i32>, i32, UserPtr)),
    sys!(54, net::sys_setsockopt(Fd, i32, i32, UserPtr, i32)).partial(SETSOCKOPT_NOTE),
    sys!(55, net::sys_getsockopt(Fd, i32, i32, UserPtr, UserPtr)),
    sys!(56, exec::sys_clone(Hex, UserPtr, UserPtr, UserPtr, Hex))
        .partial(
            "a process with CLONE_FILES, CLONE_FS, CLONE_SIGHAND or CLONE_PARENT: EINVAL; the exit signal is always SIGCHLD; in a forked child (a host process of its own) a CLONE_VM child gets a copy of its memory",
        ),
    sys!(57, exec::sys_fork()),
    sys!(58, exec::sys_vfork()),
    sys!(59, exec::sys_execve(Path, UserPtr, UserPtr)),
    sys!(60, process::sys_exit(i32)),
    sys!(61, exec::sys_wait4(i32, UserPtr, Hex<i32>, UserPtr)),
    sys!(62, signal::sys_kill(i32, Signal)),
    sys!(63, info::sys_uname(UserPtr)),
    sys!(64, ipc::sys_semget(i32, i32, Hex<i32>)),
    sys!(65, ipc::sys_semop(i32, UserPtr, u32)),
    sys!(66, ipc::sys_semctl(i32, i32, i32, Hex)),
    sys!(67, ipc::sys_shmdt(UserPtr)),
    sys!(68, ipc::sys_msgget(i32, Hex<i32>)),
    sys!(69, ipc::sys_msgsnd(i32, UserPtr, usize, Hex<i32>)),
    sys!(70, ipc::sys_msgrcv(i32, UserPtr, usize, i64, Hex<i32>)),
    sys!(71, ipc::sys_msgctl(i32, i32, UserPtr)),
    sys!(72, io::sys_fcntl(Fd, u32, Hex)),
    sys!(73, locks::sys_flock(Fd, u32)),
    sys!(74, io::sys_fsync(Fd)),
    sys!(75, io::sys_fdatasync(Fd)),
    sys!(76, fs::sys_truncate(Path, i64)).changes_inodes(),
    sys!(77, io::sys_ftruncate(Fd, i64)).changes_inodes(),
    sys!(79, fs::sys_getcwd(UserPtr, usize)),
    sys!(80, fs::sys_chdir(Path)),
    sys!(81, fs::sys_fchdir(Fd)),
    sys!(82, fs::sys_rename(Path, Path)).changes_inodes(),
    sys!(83, fs::sys_mkdir(Path, Mode)),
    sys!(84, fs::sys_rmdir(Path)),
    sys!(85, fs::sys_creat(Path, Mode)),
    sys!(86, fs::sys_link(Path, Path)).changes_inodes(),
    sys!(87, fs::sys_unlink(Path)).changes_inodes(),
    sys!(88, fs::sys_symlink(Path, Path)),
    sys!(89, fs::sys_readlink(Path, OutBuf, i32)),
    sys!(90, fs::sys_chmod(Path, Mode)).changes_inodes(),
    sys!(91, fs::sys_fchmod(Fd, Mode)).changes_inodes(),
    sys!(92, fs::sys_chown(Path, u32, u32)).changes_inodes(),
    sys!(93, fs::sys_fchown(Fd, u32, u32)).changes_inodes(),
    sys!(94, fs::sys_lchown(Path, u32, u32)).changes_inodes(),
    sys!(95, fs::sys_umask(Mode)),
    sys!(96, time::sys_gettimeofday(UserPtr, UserPtr)),
    sys!(97, info::sys_getrlimit(u32, UserPtr)),
    sys!(98, time::sys_getrusage(i32, UserPtr)).partial("CPU times only for RUSAGE_CHILDREN"),
    sys!(99, info::sys_sysinfo(UserPtr)),
    sys!(100, time::sys_times(UserPtr)),
    sys!(102, cred::sys_getuid()),
    sys!(104, cred::sys_getgid()),
    sys!(105, cred::sys_setuid(u32)),
    sys!(106, cred::sys_setgid(u32)),
    sys!(107, cred::sys_geteuid()),
    sys!(108, cred::sys_getegid()),
    sys!(110, process::sys_getppid()),
    sys!(109, exec::sys_setpgid(i32, i32)),
    sys!(111, exec::sys_getpgrp()),
    sys!(112, exec::sys_setsid()),
    sys!(113, cred::sys_setreuid(u32, u32)),
    sys!(114, cred::sys_setregid(u32, u32)),
    sys!(115, cred::sys_getgroups(i32, UserPtr)),
    sys!(116, cred::sys_setgroups(i32, UserPtr)),
    sys!(117, cred::sys_setresuid(u32, u32, u32)),
    sys!(118, cred::sys_getresuid(UserPtr, UserPtr, UserPtr)),
    sys!(119, cred::sys_setresgid(u32, u32, u32)),
    sys!(120, cred::sys_getresgid(UserPtr, UserPtr, UserPtr)),
    sys!(121, exec::sys_getpgid(i32)),
    sys!(122, cred::sys_setfsuid(u32)),
    sys!(123, cred::sys_setfsgid(u32)),
    sys!(124, exec::sys_getsid(i32)),
    sys!(125, cred::sys_capget(UserPtr, UserPtr)),
    sys!(126, cred::sys_capset(UserPtr, UserPtr)),
    sys!(140, sched::sys_getpriority(i32, i32)),
    sys!(141, sched::sys_setpriority(i32, i32, i32)),
    sys!(142, sched::sys_sched_setparam(i32, UserPtr)),
    sys!(143, sched::sys_sched_getparam(i32, UserPtr)),
    sys!(144, sched::sys_sched_setscheduler(i32, i32, UserPtr)),
    sys!(145, sched::sys_sched_getscheduler(i32)),
    sys!(146, sched::sys_sched_get_priority_max(i32)),
    sys!(147, sched::sys_sched_get_priority_min(i32)),
    sys!(148, sched::sys_sched_rr_get_interval(i32, UserPtr)),
    sys!(149, memory::sys_mlock(UserPtr, usize)),
    sys!(150, memory::sys_munlock(UserPtr, usize)),
    sys!(151, memory::sys_mlockall(Hex<i32>)),
    sys!(152, memory::sys_munlockall()),
    sys!(157, process::sys_prctl(i32, Hex, Hex, Hex, Hex))
        .partial("PR_SET/GET_NAME, PDEATHSIG (recorded), DUMPABLE, NO_NEW_PRIVS, KEEPCAPS, CAPBSET_READ/DROP, CAP_AMBIENT, GET_SECUREBITS"),
    sys!(158, process::sys_arch_prctl(Hex<i32>, Hex)),
    sys!(160, info::sys_setrlimit(u32, UserPtr)).partial("limits are recorded; NOFILE, NPROC, CPU, FSIZE, AS, DATA and MEMLOCK are enforced, STACK at exec only"),
    sys!(162, io::sys_sync()),
    sys!(164, time::sys_settimeofday(UserPtr, UserPtr)).partial("the host's clock: EPERM, even for root"),
    sys!(170, info::sys_sethostname(UserPtr, i32)),
    sys!(171, info::sys_setdomainname(UserPtr, i32)),
    sys!(186, process::sys_gettid()),
    sys!(187, io::sys_readahead(Fd, i64, usize)),
    sys!(188, xattr::sys_setxattr(Path, Path, InBuf<3>, usize, i32)).changes_inodes(),
    sys!(189, xattr::sys_lsetxattr(Path, Path, InBuf<3>, usize, i32)).changes_inodes(),
    sys!(190, xattr::sys_fsetxattr(Fd, Path, InBuf<3>, usize, i32)).changes_inodes(),
    sys!(191, xattr::sys_getxattr(Path, Path, OutBuf, usize)),
    sys!(192, xattr::sys_lgetxattr(Path, Path, OutBuf, usize)),
    sys!(193, xattr::sys_fgetxattr(Fd, Path, OutBuf, usize)),
    sys!(194, xattr::sys_listxattr(Path, OutBuf, usize)),
    sys!(195, xattr::sys_llistxattr(Path, OutBuf, usize)),
    sys!(196, xattr::sys_flistxattr(Fd, OutBuf, usize)),
    sys!(197, xattr::sys_removexattr(Path, Path)).changes_inodes(),
    sys!(198, xattr::sys_lremovexattr(Path, Path)).changes_inodes(),
    sys!(199, xattr::sys_fremovexattr(Fd, Path)).changes_inodes(),
    sys!(127, signal::sys_rt_sigpending(UserPtr, usize)),
    sys!(128, wait::sys_rt_sigtimedwait(UserPtr, UserPtr, UserPtr, usize)),
    sys!(129, signal::sys_rt_sigqueueinfo(i32, Signal, UserPtr)),
    sys!(130, wait::sys_rt_sigsuspend(UserPtr, usize)),
    sys!(131, signal::sys_sigaltstack(UserPtr, UserPtr)),
    sys!(133, fs::sys_mknod(Path, Mode, u32)),
    sys!(137, fs::sys_statfs(Path, UserPtr)),
    sys!(138, fs::sys_fstatfs(Fd, UserPtr)),
    sys!(200, signal::sys_tkill(i32, Signal)),
    sys!(201, time::sys_time(UserPtr)),
    sys!(203, sched::sys_sched_setaffinity(i32, u32, UserPtr)),
    sys!(204, sched::sys_sched_getaffinity(i32, u32, UserPtr)),
    // The 4th argument is a timeout pointer or, for the requeues, a count:
    // the operation decides.
    sys!(202, process::sys_futex(UserPtr, i32, u32, UserPtr, UserPtr, Hex<u32>)).partial(
        "PI futexes: no priority inheritance; waiters get the lock in the order they came, not by priority",
    ),
    sys!(213, events::sys_epoll_create(i32)),
    sys!(217, io::sys_getdents64(Fd, UserPtr, u32)),
    sys!(218, process::sys_set_tid_address(UserPtr)),
    sys!(220, ipc::sys_semtimedop(i32, UserPtr, u32, UserPtr)),
    sys!(221, io::sys_fadvise64(Fd, i64, i64, i32)),
    sys!(222, time::sys_timer_create(i32, UserPtr, UserPtr)),
    sys!(223, time::sys_timer_settime(i32, i32, UserPtr, UserPtr)),
    sys!(224, time::sys_timer_gettime(i32, UserPtr)),
    sys!(225, time::sys_timer_getoverrun(i32)),
    sys!(226, time::sys_timer_delete(i32)),
    sys!(227, time::sys_clock_settime(i32, UserPtr)).partial("the host's clock: EPERM, even for root"),
    sys!(228, time::sys_clock_gettime(i32, UserPtr)),
    sys!(229, time::sys_clock_getres(i32, UserPtr)),
    sys!(230, time::sys_clock_nanosleep(i32, i32, UserPtr, UserPtr)),
    sys!(231, process::sys_exit_group(i32)),
    sys!(232, events::sys_epoll_wait(Fd, UserPtr, i32, i32)),
    sys!(233, events::sys_epoll_ctl(Fd, i32, Fd, UserPtr)),
    sys!(234, signal::sys_tgkill(i32, i32, Signal)),
    sys!(235, fs::sys_utimes(Path, UserPtr)).changes_inodes(),
    sys!(247, exec::sys_waitid(i32, i32, UserPtr, Hex<i32>, UserPtr)),
    sys!(251, sched::sys_ioprio_set(i32, i32, i32)),
    sys!(252, sched::sys_ioprio_get(i32, i32)),
    sys!(253, fs::sys_inotify_init()),
    sys!(254, fs::sys_inotify_add_watch(Fd, Path, Hex<u32>)).partial("paths in nomu's /proc cannot be watched (EACCES)"),
    sys!(255, fs::sys_inotify_rm_watch(Fd, i32)),
    sys!(257, fs::sys_openat(DirFd, Path, OpenFlags, Mode)),
    sys!(258, fs::sys_mkdirat(DirFd, Path, Mode)),
    sys!(259, fs::sys_mknodat(DirFd, Path, Mode, u32)),
    sys!(260, fs::sys_fchownat(DirFd, Path, u32, u32, AtFlags)).changes_inodes(),
    sys!(261, fs::sys_futimesat(DirFd, Path, UserPtr)).changes_inodes(),
    sys!(262, fs::sys_newfstatat(DirFd, Path, UserPtr, AtFlags)),
    sys!(263, fs::sys_unlinkat(DirFd, Path, AtFlags)).changes_inodes(),
    sys!(264, fs::sys_renameat(DirFd, Path, DirFd, Path)).changes_inodes(),
    sys!(265, fs::sys_linkat(DirFd, Path, DirFd, Path, AtFlags)).changes_inodes(),
    sys!(266, fs::sys_symlinkat(Path, DirFd, Path)),
    sys!(267, fs::sys_readlinkat(DirFd, Path, OutBuf, i32)),
    sys!(268, fs::sys_fchmodat(DirFd, Path, Mode)).changes_inodes(),
    sys!(269, fs::sys_faccessat(DirFd, Path, i32)),
    sys!(270, wait::sys_pselect6(i32, UserPtr, UserPtr, UserPtr, UserPtr, UserPtr)),
    sys!(271, wait::sys_ppoll(UserPtr, u32, UserPtr, UserPtr, usize)),
    sys!(273, process::sys_set_robust_list(UserPtr, usize)),
    sys!(274, process::sys_get_robust_list(i32, UserPtr, UserPtr)),
    sys!(275, splice::sys_splice(Fd, UserPtr, Fd, UserPtr, usize, Hex<u32>)).sigpipe(),
    sys!(276, splice::sys_tee(Fd, Fd, usize, Hex<u32>)).sigpipe(),
    sys!(277, io::sys_sync_file_range(Fd, i64, i64, Hex<u32>)),
    sys!(278, splice::sys_vmsplice(Fd, UserPtr, u64, Hex<u32>))
        .sigpipe()
        .partial("copies the data into the pipe (Linux's pipe holds the pages: later stores to them show in what is read)"),
    sys!(280, fs::sys_utimensat(DirFd, Path, UserPtr, AtFlags)).changes_inodes(),
    sys!(281, events::sys_epoll_pwait(Fd, UserPtr, i32, i32, UserPtr, usize)),
    sys!(282, events::sys_signalfd(i32, UserPtr, usize)),
    sys!(283, events::sys_timerfd_create(i32, Hex<i32>)),
    sys!(284, events::sys_eventfd(u32)),
    sys!(285, io::sys_fallocate(Fd, i32, i64, i64)).changes_inodes(),
    sys!(286, events::sys_timerfd_settime(Fd, Hex<i32>, UserPtr, UserPtr)),
    sys!(287, events::sys_timerfd_gettime(Fd, UserPtr)),
    sys!(289, events::sys_signalfd4(i32, UserPtr, usize, Hex<i32>)),
    sys!(288, net::sys_accept4(Fd, UserPtr, UserPtr, Hex<i32>)),
    sys!(290, events::sys_eventfd2(u32, Hex<i32>)),
    sys!(291, events::sys_epoll_create1(Hex<i32>)),
    sys!(292, io::sys_dup3(Fd, Fd, OpenFlags)),
    sys!(293, io::sys_pipe2(UserPtr, OpenFlags)),
    sys!(294, fs::sys_inotify_init1(Hex<i32>)),
    sys!(295, io::sys_preadv(Fd, UserPtr, u32, i64, u64)),
    sys!(296, io::sys_pwritev(Fd, UserPtr, u32, i64, u64)).sigpipe(),
    sys!(297, signal::sys_rt_tgsigqueueinfo(i32, i32, Signal, UserPtr)),
    sys!(299, net::sys_recvmmsg(Fd, UserPtr, u32, Hex<u32>, UserPtr))
        .partial("SCM_CREDENTIALS from a datagram sender other than the socket's peer carry a host pid"),
    sys!(302, info::sys_prlimit64(i32, u32, UserPtr, UserPtr)).partial("limits are recorded; NOFILE, NPROC, CPU, FSIZE, AS, DATA and MEMLOCK are enforced, STACK at exec only"),
    sys!(306, io::sys_syncfs(Fd)),
    sys!(307, net::sys_sendmmsg(Fd, UserPtr, u32, Hex<u32>)),
    sys!(309, sched::sys_getcpu(UserPtr, UserPtr, UserPtr)),
    sys!(316, fs::sys_renameat2(DirFd, Path, DirFd, Path, Hex<u32>)).changes_inodes(),
    sys!(318, info::sys_getrandom(UserPtr, usize, Hex<u32>)),
    sys!(319, io::sys_memfd_create(UserPtr, Hex<u32>)),
    sys!(322, exec::sys_execveat(DirFd, Path, UserPtr, UserPtr, AtFlags)),
    sys!(325, memory::sys_mlock2(UserPtr, usize, Hex<u32>)),
    sys!(326, splice::sys_copy_file_range(Fd, UserPtr, Fd, UserPtr, usize, Hex<u32>)),
    sys!(327, io::sys_preadv2(Fd, UserPtr, u32, i64, u64, Hex<i32>)),
    sys!(328, io::sys_pwritev2(Fd, UserPtr, u32, i64, u64, Hex<i32>)).sigpipe(),
    sys!(332, fs::sys_statx(DirFd, Path, AtFlags, Hex<u32>, UserPtr)),
    sys!(424, signal::sys_pidfd_send_signal(i32, Signal, UserPtr, Hex<u32>)),
    sys!(434, pidfd::sys_pidfd_open(i32, Hex<u32>)),
    sys!(435, exec::sys_clone3(UserPtr, usize)).partial(
        "what clone provides, with clone's limits; the exit signal is always SIGCHLD; CLONE_CLEAR_SIGHAND, CLONE_INTO_CGROUP and set_tid: EINVAL",
    ),
    sys!(436, io::sys_close_range(u32, u32, Hex<u32>))
        .partial("CLOSE_RANGE_UNSHARE in a process with other threads: EINVAL (threads share one table)"),
    sys!(438, pidfd::sys_pidfd_getfd(Fd, i32, Hex<u32>)),
    sys!(439, fs::sys_faccessat2(DirFd, Path, i32, AtFlags)),
    sys!(441, events::sys_epoll_pwait2(Fd, UserPtr, i32, UserPtr, UserPtr, usize)),
    sys!(447, io::sys_memfd_secret(Hex<u32>)).partial(
        "pages are taken when ftruncate sets the size (charged to --mem: ENOMEM there); a mapping past that size is ENXIO (Linux maps it and an access there is SIGBUS)",
    ),
];

/// Options that change the host's network, not the socket
/// (syscall::net::changes_host_network).
const SETSOCKOPT_NOTE: &str = "netfilter table changes (iptables' IPT_SO_SET_*...), multicast routing (MRT_*) and IPVS settings are EPERM, even for root";

/// A guest never changes the host's network configuration, whatever
/// nomu's privileges (syscall::net::netlink_request).
const NETLINK_NOTE: &str = "an rtnetlink request that would change the host's network (anything but RTM_GET*), or a sock_diag SOCK_DESTROY, is EPERM, even for root; Linux answers it in an NLMSG_ERROR acknowledgement";

/// shmat's difference from Linux with an MMU (src/kernel/ipc/shm.rs).
const SHMAT_NOTE: &str = "a segment has one address, the same in every process (no MMU): shmat at another address, or \
     a second attach in one process, is EINVAL; the pages' protection is the segment's (writable while any \
     attachment is), so SHM_RDONLY and mprotect bind only syscalls then";

static INDEX: OnceLock<Vec<Option<&'static SyscallDef>>> = OnceLock::new();

fn index() -> &'static [Option<&'static SyscallDef>] {
    INDEX.get_or_init(|| {
        let mut v = vec![None; MAX_SYSCALL + 1];
        for d in SYSCALLS {
            v[d.nr as usize] = Some(d);
        }
        v
    })
}

pub fn lookup(nr: u64) -> Option<&'static SyscallDef> {
    index().get(nr as usize).copied().flatten()
}

/// `nomu syscalls`: what works, in one listing.
pub fn print_table(all: bool) {
    let mut full = 0;
    let mut partial = 0;
    for (nr, &name) in SYSCALL_NAMES.iter().enumerate() {
        match lookup(nr as u64) {
            Some(d) => match d.support {
                Support::Full => {
                    full += 1;
                    println!("{nr:4} {name:<24} supported");
                }
                Support::Partial(note) => {
                    partial += 1;
                    println!("{nr:4} {name:<24} partial: {note}");
                }
            },
            None if all && !name.is_empty() => println!("{nr:4} {name:<24} ENOSYS"),
            None => {}
        }
    }
    let known = SYSCALL_NAMES.iter().filter(|n| !n.is_empty()).count();
    println!("{full} supported, {partial} partial, {} return ENOSYS", known - full - partial);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_definition_has_a_linux_number_once() {
        let mut seen = std::collections::HashSet::new();
        for d in SYSCALLS {
            assert!(!d.name.is_empty(), "syscall {} has no Linux name", d.nr);
            assert!(seen.insert(d.nr), "{} defined twice", d.name);
            assert!(std::ptr::eq(lookup(d.nr).unwrap(), d));
        }
        assert_eq!(lookup(39).map(|d| d.name), Some("getpid"));
        assert!(lookup(MAX_SYSCALL as u64 + 1).is_none());
    }

    #[test]
    fn a_handler_is_named_after_its_syscall() {
        assert!(is_handler_for("sys_read", "read"));
        assert!(!is_handler_for("sys_write", "read"));
        assert!(!is_handler_for("sys_readv", "read"));
        assert!(!is_handler_for("read", "read"));
        assert!(!is_handler_for("sys_", ""));
    }

    /// `sys!` gives each handler one decoded argument per traced one; what
    /// the types cannot say is that an `InBuf<N>`'s N is a length argument.
    #[test]
    fn every_input_buffer_names_its_length_argument() {
        let mut buffers = 0;
        for d in SYSCALLS {
            assert!(d.args.len() <= 6, "{}: more arguments than registers", d.name);
            for (i, &a) in d.args.iter().enumerate() {
                if let Arg::InBuf(len) = a {
                    buffers += 1;
                    assert!(len != i && len < d.args.len(), "{}: InBuf<{len}> names no other argument", d.name);
                    assert!(
                        matches!(d.args[len], Arg::Ulong | Arg::Uint | Arg::Int | Arg::Long),
                        "{}: InBuf<{len}>'s length is a {:?}",
                        d.name,
                        d.args[len]
                    );
                }
            }
        }
        assert!(buffers >= 2, "write and pwrite64 trace their buffers");
    }

    #[test]
    fn the_table_traces_what_the_handlers_decode() {
        let read = lookup(0).unwrap();
        assert_eq!(read.args, [Arg::Fd, Arg::OutBuf, Arg::Ulong]);
        let openat = lookup(257).unwrap();
        assert_eq!(openat.args, [Arg::DirFd, Arg::Path, Arg::OpenFlags, Arg::Mode]);
        // poll's nfds is an unsigned int, its timeout an int.
        assert_eq!(lookup(7).unwrap().args, [Arg::Ptr, Arg::Uint, Arg::Int]);
    }
}
