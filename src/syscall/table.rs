//! The one table of every syscall nomu implements, with how well.
//! `nomu syscalls` prints it; anything not here returns ENOSYS.

use super::names::{MAX_SYSCALL, SYSCALL_NAMES};
use super::{exec, fs, info, io, memory, process, signal, time, wait, Args, Ctx, SysResult};
use std::sync::OnceLock;

pub type Handler = fn(&mut Ctx, &Args) -> SysResult;

/// How an argument is shown by `--trace`.
#[derive(Clone, Copy)]
pub enum Arg {
    Int,
    Long,
    Uint,
    Hex,
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

const fn def(nr: u64, name: &'static str, handler: Handler, args: &'static [Arg]) -> SyscallDef {
    SyscallDef {
        nr,
        name,
        handler,
        args,
        support: Support::Full,
        ret_hex: false,
        raises_sigpipe: false,
        changes_inodes: false,
    }
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

use Arg::*;

pub static SYSCALLS: &[SyscallDef] = &[
    def(0, "read", io::sys_read, &[Fd, OutBuf, Uint]),
    def(1, "write", io::sys_write, &[Fd, InBuf(2), Uint]).sigpipe(),
    def(2, "open", fs::sys_open, &[Path, OpenFlags, Mode]),
    def(3, "close", io::sys_close, &[Fd]),
    def(4, "stat", fs::sys_stat, &[Path, Ptr]),
    def(5, "fstat", fs::sys_fstat, &[Fd, Ptr]),
    def(6, "lstat", fs::sys_lstat, &[Path, Ptr]),
    def(7, "poll", wait::sys_poll, &[Ptr, Uint, Int]),
    def(8, "lseek", io::sys_lseek, &[Fd, Long, Int]),
    def(9, "mmap", memory::sys_mmap, &[Ptr, Uint, Prot, MapFlags, Fd, Hex])
        .hex()
        .partial("MAP_SHARED file mappings are copies, written back at munmap, msync and exit"),
    def(10, "mprotect", memory::sys_mprotect, &[Ptr, Uint, Prot]),
    def(11, "munmap", memory::sys_munmap, &[Ptr, Uint]),
    def(12, "brk", memory::sys_brk, &[Ptr]).hex(),
    def(13, "rt_sigaction", signal::sys_rt_sigaction, &[Signal, Ptr, Ptr, Uint]),
    def(14, "rt_sigprocmask", signal::sys_rt_sigprocmask, &[Int, Ptr, Ptr, Uint]),
    def(15, "rt_sigreturn", signal::sys_rt_sigreturn, &[]).hex(),
    def(16, "ioctl", io::sys_ioctl, &[Fd, Hex, Ptr]).partial("terminal queries and FIO* only"),
    def(17, "pread64", io::sys_pread64, &[Fd, OutBuf, Uint, Long]),
    def(18, "pwrite64", io::sys_pwrite64, &[Fd, InBuf(2), Uint, Long]).sigpipe(),
    def(19, "readv", io::sys_readv, &[Fd, Ptr, Int]),
    def(20, "writev", io::sys_writev, &[Fd, Ptr, Int]).sigpipe(),
    def(21, "access", fs::sys_access, &[Path, Int]),
    def(22, "pipe", io::sys_pipe, &[Ptr]),
    def(23, "select", wait::sys_select, &[Int, Ptr, Ptr, Ptr, Ptr]),
    def(24, "sched_yield", process::sys_sched_yield, &[]),
    def(25, "mremap", memory::sys_mremap, &[Ptr, Uint, Uint, Hex, Ptr])
        .hex()
        .partial("MREMAP_FIXED and MREMAP_DONTUNMAP are EINVAL"),
    def(26, "msync", memory::sys_msync, &[Ptr, Uint, Hex]),
    def(28, "madvise", memory::sys_madvise, &[Ptr, Uint, Int]),
    def(32, "dup", io::sys_dup, &[Fd]),
    def(33, "dup2", io::sys_dup2, &[Fd, Fd]),
    def(34, "pause", wait::sys_pause, &[]),
    def(35, "nanosleep", time::sys_nanosleep, &[Ptr, Ptr]),
    def(36, "getitimer", time::sys_getitimer, &[Int, Ptr]).partial("ITIMER_REAL only"),
    def(37, "alarm", time::sys_alarm, &[Uint]),
    def(38, "setitimer", time::sys_setitimer, &[Int, Ptr, Ptr]).partial("ITIMER_REAL only"),
    def(39, "getpid", process::sys_getpid, &[]),
    def(40, "sendfile", io::sys_sendfile, &[Fd, Fd, Ptr, Uint]),
    def(56, "clone", exec::sys_clone, &[Hex, Ptr, Ptr, Ptr, Hex])
        .partial("threads (CLONE_THREAD) and CLONE_VM children; without CLONE_VM: EINVAL as on no-MMU; no CLONE_FILES/FS/PARENT sharing for processes"),
    def(57, "fork", exec::sys_fork, &[]).partial("EINVAL, as on no-MMU Linux"),
    def(58, "vfork", exec::sys_vfork, &[]),
    def(59, "execve", exec::sys_execve, &[Path, Ptr, Ptr]),
    def(60, "exit", process::sys_exit, &[Int]),
    def(61, "wait4", exec::sys_wait4, &[Int, Ptr, Hex, Ptr]).partial("exits only: no stopped/continued children yet"),
    def(62, "kill", signal::sys_kill, &[Int, Signal]).partial("a blocked syscall of the target is not interrupted yet"),
    def(63, "uname", info::sys_uname, &[Ptr]),
    def(72, "fcntl", io::sys_fcntl, &[Fd, Int, Hex]).partial("no record locks yet"),
    def(74, "fsync", io::sys_fsync, &[Fd]),
    def(75, "fdatasync", io::sys_fdatasync, &[Fd]),
    def(76, "truncate", fs::sys_truncate, &[Path, Long]).changes_inodes(),
    def(77, "ftruncate", io::sys_ftruncate, &[Fd, Long]).changes_inodes(),
    def(79, "getcwd", fs::sys_getcwd, &[Ptr, Uint]),
    def(80, "chdir", fs::sys_chdir, &[Path]),
    def(81, "fchdir", fs::sys_fchdir, &[Fd]),
    def(82, "rename", fs::sys_rename, &[Path, Path]).changes_inodes(),
    def(83, "mkdir", fs::sys_mkdir, &[Path, Mode]),
    def(84, "rmdir", fs::sys_rmdir, &[Path]),
    def(85, "creat", fs::sys_creat, &[Path, Mode]),
    def(86, "link", fs::sys_link, &[Path, Path]).changes_inodes(),
    def(87, "unlink", fs::sys_unlink, &[Path]).changes_inodes(),
    def(88, "symlink", fs::sys_symlink, &[Path, Path]),
    def(89, "readlink", fs::sys_readlink, &[Path, OutBuf, Uint]),
    def(90, "chmod", fs::sys_chmod, &[Path, Mode]).changes_inodes(),
    def(91, "fchmod", fs::sys_fchmod, &[Fd, Mode]).changes_inodes(),
    def(95, "umask", fs::sys_umask, &[Mode]),
    def(96, "gettimeofday", time::sys_gettimeofday, &[Ptr, Ptr]),
    def(97, "getrlimit", info::sys_getrlimit, &[Int, Ptr]),
    def(98, "getrusage", time::sys_getrusage, &[Int, Ptr]).partial("CPU times only for RUSAGE_CHILDREN"),
    def(99, "sysinfo", info::sys_sysinfo, &[Ptr]),
    def(100, "times", time::sys_times, &[Ptr]),
    def(102, "getuid", process::sys_getuid, &[]),
    def(104, "getgid", process::sys_getgid, &[]),
    def(107, "geteuid", process::sys_geteuid, &[]),
    def(108, "getegid", process::sys_getegid, &[]),
    def(110, "getppid", process::sys_getppid, &[]),
    def(109, "setpgid", exec::sys_setpgid, &[Int, Int]),
    def(111, "getpgrp", exec::sys_getpgrp, &[]),
    def(112, "setsid", exec::sys_setsid, &[]),
    def(121, "getpgid", exec::sys_getpgid, &[Int]),
    def(124, "getsid", exec::sys_getsid, &[Int]),
    def(157, "prctl", process::sys_prctl, &[Int, Hex, Hex, Hex, Hex])
        .partial("PR_SET/GET_NAME, PDEATHSIG (recorded), DUMPABLE, NO_NEW_PRIVS"),
    def(158, "arch_prctl", process::sys_arch_prctl, &[Hex, Hex]),
    def(160, "setrlimit", info::sys_setrlimit, &[Int, Ptr]).partial("limits are recorded; NOFILE is enforced"),
    def(186, "gettid", process::sys_gettid, &[]),
    def(127, "rt_sigpending", signal::sys_rt_sigpending, &[Ptr, Uint]),
    def(128, "rt_sigtimedwait", wait::sys_rt_sigtimedwait, &[Ptr, Ptr, Ptr, Uint]),
    def(129, "rt_sigqueueinfo", signal::sys_rt_sigqueueinfo, &[Int, Signal, Ptr]),
    def(130, "rt_sigsuspend", wait::sys_rt_sigsuspend, &[Ptr, Uint]),
    def(131, "sigaltstack", signal::sys_sigaltstack, &[Ptr, Ptr]),
    def(200, "tkill", signal::sys_tkill, &[Int, Signal]),
    def(201, "time", time::sys_time, &[Ptr]),
    def(202, "futex", process::sys_futex, &[Ptr, Int, Uint, Ptr, Ptr, Hex]).partial("no PI futexes"),
    def(217, "getdents64", io::sys_getdents64, &[Fd, Ptr, Uint]),
    def(218, "set_tid_address", process::sys_set_tid_address, &[Ptr]),
    def(228, "clock_gettime", time::sys_clock_gettime, &[Int, Ptr]),
    def(229, "clock_getres", time::sys_clock_getres, &[Int, Ptr]),
    def(230, "clock_nanosleep", time::sys_clock_nanosleep, &[Int, Int, Ptr, Ptr]),
    def(231, "exit_group", process::sys_exit_group, &[Int]),
    def(234, "tgkill", signal::sys_tgkill, &[Int, Int, Signal]),
    def(247, "waitid", exec::sys_waitid, &[Int, Int, Ptr, Hex, Ptr])
        .partial("exits only: no stopped/continued children yet"),
    def(257, "openat", fs::sys_openat, &[DirFd, Path, OpenFlags, Mode]),
    def(258, "mkdirat", fs::sys_mkdirat, &[DirFd, Path, Mode]),
    def(262, "newfstatat", fs::sys_newfstatat, &[DirFd, Path, Ptr, AtFlags]),
    def(263, "unlinkat", fs::sys_unlinkat, &[DirFd, Path, AtFlags]).changes_inodes(),
    def(264, "renameat", fs::sys_renameat, &[DirFd, Path, DirFd, Path]).changes_inodes(),
    def(265, "linkat", fs::sys_linkat, &[DirFd, Path, DirFd, Path, AtFlags]).changes_inodes(),
    def(266, "symlinkat", fs::sys_symlinkat, &[Path, DirFd, Path]),
    def(267, "readlinkat", fs::sys_readlinkat, &[DirFd, Path, OutBuf, Uint]),
    def(268, "fchmodat", fs::sys_fchmodat, &[DirFd, Path, Mode]).changes_inodes(),
    def(269, "faccessat", fs::sys_faccessat, &[DirFd, Path, Int]),
    def(270, "pselect6", wait::sys_pselect6, &[Int, Ptr, Ptr, Ptr, Ptr, Ptr]),
    def(271, "ppoll", wait::sys_ppoll, &[Ptr, Uint, Ptr, Ptr, Uint]),
    def(273, "set_robust_list", process::sys_set_robust_list, &[Ptr, Uint]),
    def(274, "get_robust_list", process::sys_get_robust_list, &[Int, Ptr, Ptr]),
    def(280, "utimensat", fs::sys_utimensat, &[DirFd, Path, Ptr, AtFlags]).changes_inodes(),
    def(292, "dup3", io::sys_dup3, &[Fd, Fd, OpenFlags]),
    def(293, "pipe2", io::sys_pipe2, &[Ptr, OpenFlags]),
    def(297, "rt_tgsigqueueinfo", signal::sys_rt_tgsigqueueinfo, &[Int, Int, Signal, Ptr]),
    def(302, "prlimit64", info::sys_prlimit64, &[Int, Int, Ptr, Ptr])
        .partial("limits are recorded; NOFILE is enforced"),
    def(316, "renameat2", fs::sys_renameat2, &[DirFd, Path, DirFd, Path, Hex]).changes_inodes(),
    def(318, "getrandom", info::sys_getrandom, &[Ptr, Uint, Hex]),
    def(332, "statx", fs::sys_statx, &[DirFd, Path, AtFlags, Hex, Ptr]),
    def(439, "faccessat2", fs::sys_faccessat2, &[DirFd, Path, Int, AtFlags]),
];

static INDEX: OnceLock<Vec<Option<&'static SyscallDef>>> = OnceLock::new();

fn index() -> &'static [Option<&'static SyscallDef>] {
    INDEX.get_or_init(|| {
        let mut v = vec![None; MAX_SYSCALL + 1];
        for d in SYSCALLS {
            debug_assert_eq!(SYSCALL_NAMES[d.nr as usize], d.name, "table name mismatch");
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
