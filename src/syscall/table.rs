//! The one table of every syscall nomu implements, with how well.
//! `nomu syscalls` prints it; anything not here returns ENOSYS.

use super::names::{MAX_SYSCALL, NAMES, SYSCALL_NAMES};
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

/// A syscall nomu implements; its name is Linux's for that number.
const fn def(nr: u64, handler: Handler, args: &'static [Arg]) -> SyscallDef {
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
    def(0, io::sys_read, &[Fd, OutBuf, Uint]),
    def(1, io::sys_write, &[Fd, InBuf(2), Uint]).sigpipe(),
    def(2, fs::sys_open, &[Path, OpenFlags, Mode]),
    def(3, io::sys_close, &[Fd]),
    def(4, fs::sys_stat, &[Path, Ptr]),
    def(5, fs::sys_fstat, &[Fd, Ptr]),
    def(6, fs::sys_lstat, &[Path, Ptr]),
    def(7, wait::sys_poll, &[Ptr, Uint, Int]),
    def(8, io::sys_lseek, &[Fd, Long, Int]),
    def(9, memory::sys_mmap, &[Ptr, Uint, Prot, MapFlags, Fd, Hex])
        .hex()
        .partial("MAP_SHARED file mappings are copies, written back at munmap, msync and exit"),
    def(10, memory::sys_mprotect, &[Ptr, Uint, Prot]),
    def(11, memory::sys_munmap, &[Ptr, Uint]),
    def(12, memory::sys_brk, &[Ptr]).hex(),
    def(13, signal::sys_rt_sigaction, &[Signal, Ptr, Ptr, Uint]),
    def(14, signal::sys_rt_sigprocmask, &[Int, Ptr, Ptr, Uint]),
    def(15, signal::sys_rt_sigreturn, &[]).hex(),
    def(16, io::sys_ioctl, &[Fd, Hex, Ptr]).partial("terminal queries and FIO* only"),
    def(17, io::sys_pread64, &[Fd, OutBuf, Uint, Long]),
    def(18, io::sys_pwrite64, &[Fd, InBuf(2), Uint, Long]).sigpipe(),
    def(19, io::sys_readv, &[Fd, Ptr, Int]),
    def(20, io::sys_writev, &[Fd, Ptr, Int]).sigpipe(),
    def(21, fs::sys_access, &[Path, Int]),
    def(22, io::sys_pipe, &[Ptr]),
    def(23, wait::sys_select, &[Int, Ptr, Ptr, Ptr, Ptr]),
    def(24, process::sys_sched_yield, &[]),
    def(25, memory::sys_mremap, &[Ptr, Uint, Uint, Hex, Ptr])
        .hex()
        .partial("MREMAP_FIXED and MREMAP_DONTUNMAP are EINVAL"),
    def(26, memory::sys_msync, &[Ptr, Uint, Hex]),
    def(28, memory::sys_madvise, &[Ptr, Uint, Int]),
    def(32, io::sys_dup, &[Fd]),
    def(33, io::sys_dup2, &[Fd, Fd]),
    def(34, wait::sys_pause, &[]),
    def(35, time::sys_nanosleep, &[Ptr, Ptr]),
    def(36, time::sys_getitimer, &[Int, Ptr]).partial("ITIMER_REAL only"),
    def(37, time::sys_alarm, &[Uint]),
    def(38, time::sys_setitimer, &[Int, Ptr, Ptr]).partial("ITIMER_REAL only"),
    def(39, process::sys_getpid, &[]),
    def(40, io::sys_sendfile, &[Fd, Fd, Ptr, Uint]),
    def(56, exec::sys_clone, &[Hex, Ptr, Ptr, Ptr, Hex])
        .partial(
            "threads (CLONE_THREAD) and CLONE_VM children; without CLONE_VM: EINVAL as on no-MMU; a process with CLONE_FILES, CLONE_FS, CLONE_SIGHAND or CLONE_PARENT: EINVAL",
        ),
    def(57, exec::sys_fork, &[]).partial("EINVAL, as on no-MMU Linux"),
    def(58, exec::sys_vfork, &[]),
    def(59, exec::sys_execve, &[Path, Ptr, Ptr]),
    def(60, process::sys_exit, &[Int]),
    def(61, exec::sys_wait4, &[Int, Ptr, Hex, Ptr]),
    def(62, signal::sys_kill, &[Int, Signal]),
    def(63, info::sys_uname, &[Ptr]),
    def(72, io::sys_fcntl, &[Fd, Int, Hex]).partial("no record locks yet"),
    def(74, io::sys_fsync, &[Fd]),
    def(75, io::sys_fdatasync, &[Fd]),
    def(76, fs::sys_truncate, &[Path, Long]).changes_inodes(),
    def(77, io::sys_ftruncate, &[Fd, Long]).changes_inodes(),
    def(79, fs::sys_getcwd, &[Ptr, Uint]),
    def(80, fs::sys_chdir, &[Path]),
    def(81, fs::sys_fchdir, &[Fd]),
    def(82, fs::sys_rename, &[Path, Path]).changes_inodes(),
    def(83, fs::sys_mkdir, &[Path, Mode]),
    def(84, fs::sys_rmdir, &[Path]),
    def(85, fs::sys_creat, &[Path, Mode]),
    def(86, fs::sys_link, &[Path, Path]).changes_inodes(),
    def(87, fs::sys_unlink, &[Path]).changes_inodes(),
    def(88, fs::sys_symlink, &[Path, Path]),
    def(89, fs::sys_readlink, &[Path, OutBuf, Uint]),
    def(90, fs::sys_chmod, &[Path, Mode]).changes_inodes(),
    def(91, fs::sys_fchmod, &[Fd, Mode]).changes_inodes(),
    def(95, fs::sys_umask, &[Mode]),
    def(96, time::sys_gettimeofday, &[Ptr, Ptr]),
    def(97, info::sys_getrlimit, &[Int, Ptr]),
    def(98, time::sys_getrusage, &[Int, Ptr]).partial("CPU times only for RUSAGE_CHILDREN"),
    def(99, info::sys_sysinfo, &[Ptr]),
    def(100, time::sys_times, &[Ptr]),
    def(102, process::sys_getuid, &[]),
    def(104, process::sys_getgid, &[]),
    def(107, process::sys_geteuid, &[]),
    def(108, process::sys_getegid, &[]),
    def(110, process::sys_getppid, &[]),
    def(109, exec::sys_setpgid, &[Int, Int]),
    def(111, exec::sys_getpgrp, &[]),
    def(112, exec::sys_setsid, &[]),
    def(121, exec::sys_getpgid, &[Int]),
    def(124, exec::sys_getsid, &[Int]),
    def(157, process::sys_prctl, &[Int, Hex, Hex, Hex, Hex])
        .partial("PR_SET/GET_NAME, PDEATHSIG (recorded), DUMPABLE, NO_NEW_PRIVS"),
    def(158, process::sys_arch_prctl, &[Hex, Hex]),
    def(160, info::sys_setrlimit, &[Int, Ptr]).partial("limits are recorded; NOFILE is enforced"),
    def(186, process::sys_gettid, &[]),
    def(127, signal::sys_rt_sigpending, &[Ptr, Uint]),
    def(128, wait::sys_rt_sigtimedwait, &[Ptr, Ptr, Ptr, Uint]),
    def(129, signal::sys_rt_sigqueueinfo, &[Int, Signal, Ptr]),
    def(130, wait::sys_rt_sigsuspend, &[Ptr, Uint]),
    def(131, signal::sys_sigaltstack, &[Ptr, Ptr]),
    def(200, signal::sys_tkill, &[Int, Signal]),
    def(201, time::sys_time, &[Ptr]),
    def(202, process::sys_futex, &[Ptr, Int, Uint, Ptr, Ptr, Hex]).partial("no PI futexes"),
    def(217, io::sys_getdents64, &[Fd, Ptr, Uint]),
    def(218, process::sys_set_tid_address, &[Ptr]),
    def(228, time::sys_clock_gettime, &[Int, Ptr]),
    def(229, time::sys_clock_getres, &[Int, Ptr]),
    def(230, time::sys_clock_nanosleep, &[Int, Int, Ptr, Ptr]),
    def(231, process::sys_exit_group, &[Int]),
    def(234, signal::sys_tgkill, &[Int, Int, Signal]),
    def(247, exec::sys_waitid, &[Int, Int, Ptr, Hex, Ptr]),
    def(257, fs::sys_openat, &[DirFd, Path, OpenFlags, Mode]),
    def(258, fs::sys_mkdirat, &[DirFd, Path, Mode]),
    def(262, fs::sys_newfstatat, &[DirFd, Path, Ptr, AtFlags]),
    def(263, fs::sys_unlinkat, &[DirFd, Path, AtFlags]).changes_inodes(),
    def(264, fs::sys_renameat, &[DirFd, Path, DirFd, Path]).changes_inodes(),
    def(265, fs::sys_linkat, &[DirFd, Path, DirFd, Path, AtFlags]).changes_inodes(),
    def(266, fs::sys_symlinkat, &[Path, DirFd, Path]),
    def(267, fs::sys_readlinkat, &[DirFd, Path, OutBuf, Uint]),
    def(268, fs::sys_fchmodat, &[DirFd, Path, Mode]).changes_inodes(),
    def(269, fs::sys_faccessat, &[DirFd, Path, Int]),
    def(270, wait::sys_pselect6, &[Int, Ptr, Ptr, Ptr, Ptr, Ptr]),
    def(271, wait::sys_ppoll, &[Ptr, Uint, Ptr, Ptr, Uint]),
    def(273, process::sys_set_robust_list, &[Ptr, Uint]),
    def(274, process::sys_get_robust_list, &[Int, Ptr, Ptr]),
    def(280, fs::sys_utimensat, &[DirFd, Path, Ptr, AtFlags]).changes_inodes(),
    def(292, io::sys_dup3, &[Fd, Fd, OpenFlags]),
    def(293, io::sys_pipe2, &[Ptr, OpenFlags]),
    def(297, signal::sys_rt_tgsigqueueinfo, &[Int, Int, Signal, Ptr]),
    def(302, info::sys_prlimit64, &[Int, Int, Ptr, Ptr])
        .partial("limits are recorded; NOFILE is enforced"),
    def(316, fs::sys_renameat2, &[DirFd, Path, DirFd, Path, Hex]).changes_inodes(),
    def(318, info::sys_getrandom, &[Ptr, Uint, Hex]),
    def(332, fs::sys_statx, &[DirFd, Path, AtFlags, Hex, Ptr]),
    def(439, fs::sys_faccessat2, &[DirFd, Path, Int, AtFlags]),
];

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
}
