//! File descriptions as types: one implementation of [`FileOps`] per
//! [`FileType`], so a handler asks the file what to do instead of testing
//! what kind it is. A new kind of file (socket, epoll, eventfd, signalfd,
//! timerfd, memfd_secret) is a new type here, not a branch in every
//! handler.
//!
//! The defaults are a host file's: one host call, which never waits.

use super::{coherent, Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::abi::Termios;
use crate::fs::file::{FileKind, FileType, OpenFile};
use crate::fs::procfs;
use crate::host::fs as hostfs;
use crate::host::physmem::GuestRange;
use crate::kernel::poll::PollHead;
use crate::kernel::terminal::{self, Role};
use crate::kernel::waiter::Wake;
use std::sync::Arc;

/// Where poll, select and epoll learn whether a file is ready.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Readiness {
    /// From the host, through its host descriptor (pipes, terminals,
    /// sockets, timerfds, epolls).
    Host,
    /// From nomu: [`FileOps::poll`], and [`FileOps::poll_head`] to wait
    /// for a change (eventfds, signalfds).
    Nomu,
    /// It has no poll method: poll finds it always ready (DEFAULT_POLLMASK)
    /// and epoll refuses it (EPERM).
    Never,
}

/// What a mapping of a file gets.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MapSource {
    /// The file's bytes (read in; written back when shared).
    File,
    /// Zeroed pages, as anonymous memory (/dev/zero).
    Anonymous,
    /// A memfd_secret file's pages (only MAP_SHARED).
    Secret,
}

pub trait FileOps: Sync {
    /// read(2) of up to `len` bytes into the guest's `buf`.
    fn read(&self, ctx: &Ctx, f: &OpenFile, buf: u64, len: usize) -> SysResult {
        let runs = ctx.mem().runs(buf, len, true)?;
        runs.with_ranges(|r| self.readv(ctx, f, r))
    }

    /// write(2) of `len` bytes from the guest's `buf`.
    fn write(&self, ctx: &Ctx, f: &OpenFile, buf: u64, len: usize) -> SysResult {
        let runs = ctx.mem().runs(buf, len, false)?;
        runs.with_ranges(|r| self.writev(ctx, f, r))
    }

    /// Reads into checked guest ranges, in order.
    fn readv(&self, _ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        host_readv(f, ranges).map(|n| n as u64)
    }

    /// Writes checked guest ranges, in order.
    fn writev(&self, _ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        hostfs::writev(f.fd(), ranges).map(|n| n as u64)
    }

    /// Whether writev may skip parsing the iovec's buffers: false, or
    /// EBADF for a description not open for writing (the null device).
    fn writev_ignores_buffers(&self, _f: &OpenFile) -> Result<bool, Errno> {
        Ok(false)
    }

    /// fstat into the guest's `buf`.
    fn fstat(&self, ctx: &Ctx, f: &OpenFile, buf: u64) -> SysResult {
        ctx.mem()
            .with_full_range(buf, std::mem::size_of::<libc::stat>(), true, |out| hostfs::fstat_into(f.fd(), out))?;
        Ok(0)
    }

    /// getdents64 into the guest's `buf`.
    fn getdents(&self, _ctx: &Ctx, _f: &OpenFile, _buf: u64, _len: usize) -> SysResult {
        Err(Errno::ENOTDIR)
    }

    /// Whether I/O may wait for a peer (then a signal must end the wait).
    fn may_block(&self) -> bool {
        false
    }

    /// Whether poll finds it readable and writable at once, always (Linux's
    /// DEFAULT_POLLMASK for a file without a poll method), so nomu answers
    /// without asking the host. Asked once per description (see
    /// [`ready_at_once`]).
    fn always_ready(&self, _f: &OpenFile) -> bool {
        false
    }

    /// Where its readiness comes from.
    fn readiness(&self, _f: &OpenFile) -> Readiness {
        Readiness::Host
    }

    /// Its readiness as EPOLL* (= POLL*) bits, for a file nomu serves
    /// (Readiness::Nomu), asked by `ctx`'s thread (a signalfd's depends on
    /// who asks).
    fn poll(&self, _ctx: &Ctx, _f: &OpenFile) -> u32 {
        0
    }

    /// The wait queue notified when `poll`'s answer may have changed
    /// (Readiness::Nomu).
    fn poll_head(&self, _ctx: &Ctx, _f: &OpenFile) -> Option<Arc<PollHead>> {
        None
    }

    /// Called before the host polls its host descriptor for poll, select
    /// or an outer epoll (an epoll settles its ready list there).
    fn before_host_poll(&self, _ctx: &Ctx, _f: &OpenFile) {}

    /// What mmap of it maps, or why it cannot be mapped.
    fn mmap(&self, f: &OpenFile) -> Result<MapSource, Errno> {
        match f.kind() {
            FileKind::Regular => Ok(MapSource::File),
            FileKind::Directory | FileKind::CharDevice | FileKind::Fifo | FileKind::Socket => Err(Errno::ENODEV),
            _ => Err(Errno::EACCES),
        }
    }

    /// lseek(2).
    fn lseek(&self, _ctx: &Ctx, f: &OpenFile, offset: i64, whence: u32) -> SysResult {
        hostfs::lseek(f.fd(), offset, whence as i32)
    }

    /// An ioctl that is not one every descriptor answers (FIOCLEX...).
    fn ioctl(&self, _ctx: &Ctx, _f: &OpenFile, _req: u64, _arg: u64) -> SysResult {
        Err(Errno::ENOTTY)
    }

    /// ftruncate(2) to `length` (not negative).
    fn ftruncate(&self, ctx: &Ctx, f: &OpenFile, length: i64) -> SysResult {
        if f.writable() {
            super::io::fsize_allows_size(ctx, f.fd(), length as u64)?;
        }
        hostfs::ftruncate(f.fd(), length).map(|_| 0)
    }
}

/// One host read into `ranges` (a readv only for several).
fn host_readv(f: &OpenFile, ranges: &[GuestRange]) -> Result<usize, Errno> {
    match ranges {
        [one] => hostfs::read(f.fd(), *one),
        _ => hostfs::readv(f.fd(), ranges),
    }
}

/// The operations of `f`'s type.
pub fn of(f: &OpenFile) -> &'static dyn FileOps {
    match f.file_type() {
        FileType::HostFile => &HostFile,
        FileType::Stream => &Stream,
        FileType::Terminal => &Terminal,
        FileType::NullDevice => &NullDevice,
        FileType::ZeroDevice => &ZeroDevice,
        FileType::ProcDir => &ProcDir,
        FileType::ProcFile => &ProcFile,
        FileType::EventFd => &EventFdOps,
        FileType::Epoll => &EpollOps,
        FileType::TimerFd => &TimerFdOps,
        FileType::Inotify => &InotifyOps,
        FileType::SignalFd => &SignalFdOps,
        FileType::Socket => &SocketOps,
        FileType::PidFd => &PidFdOps,
        FileType::SecretMem => &SecretMemOps,
    }
}

/// Whether poll finds `f` ready at once, its type's answer kept in the
/// description: select over many files is a hot path (lmbench's
/// lat_select), where one cached load per descriptor is all it may cost.
pub fn ready_at_once(f: &OpenFile) -> bool {
    f.always_ready(|| of(f).always_ready(f))
}

/// Regular files, directories, block devices, nomu's /proc files.
struct HostFile;

/// A regular file's reads, writes and truncations go through
/// syscall::coherent, which keeps them coherent with its shared mappings.
impl FileOps for HostFile {
    fn readv(&self, ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        coherent::read(ctx, f, None, ranges, || host_readv(f, ranges)).map(|n| n as u64)
    }

    fn writev(&self, ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        coherent::write(ctx, f, None, false, || hostfs::writev(f.fd(), ranges)).map(|n| n as u64)
    }

    fn ftruncate(&self, ctx: &Ctx, f: &OpenFile, length: i64) -> SysResult {
        if f.writable() {
            super::io::fsize_allows_size(ctx, f.fd(), length as u64)?;
        }
        coherent::resize(ctx, f.fd(), || hostfs::ftruncate(f.fd(), length).map(drop)).map(|()| 0)
    }

    fn getdents(&self, ctx: &Ctx, f: &OpenFile, buf: u64, len: usize) -> SysResult {
        if f.kind() != FileKind::Directory {
            return Err(Errno::ENOTDIR);
        }
        let buf = match ctx.mem().range(buf, len, true) {
            Ok(buf) => buf,
            Err(Errno::EFAULT) => return getdents_unwritable(f, len),
            Err(e) => return Err(e),
        };
        hostfs::getdents64(f.fd(), *buf).map(|n| n as u64)
    }

    /// Regular files and directories on a filesystem without a poll method.
    /// Files of other filesystems (procfs, sysfs, cgroup, FUSE... some of
    /// whose files do poll) go to the host.
    fn always_ready(&self, f: &OpenFile) -> bool {
        const DEFAULT_POLL_FILESYSTEMS: [i64; 5] = [
            0xef53,      // ext2/3/4
            0x0102_1994, // tmpfs
            0x5846_5342, // xfs
            0x9123_683e, // btrfs
            0x794c_7630, // overlayfs
        ];
        matches!(f.kind(), FileKind::Regular | FileKind::Directory)
            && hostfs::fs_type(f.fd()).is_ok_and(|t| DEFAULT_POLL_FILESYSTEMS.contains(&t))
    }

    fn readiness(&self, f: &OpenFile) -> Readiness {
        if ready_at_once(f) {
            Readiness::Never
        } else {
            Readiness::Host
        }
    }

    /// The inode flags (lsattr, chattr), the host file's: FS_IOC_GETFLAGS
    /// and FS_IOC_SETFLAGS move an int whatever their names say. Setting
    /// them takes the file's owner or CAP_FOWNER, and changing immutable
    /// or append-only CAP_LINUX_IMMUTABLE, the guest's (Linux's
    /// ioctl_setflags, fileattr_set_prepare).
    fn ioctl(&self, ctx: &Ctx, f: &OpenFile, req: u64, arg: u64) -> SysResult {
        const FS_IOC_GETFLAGS: u64 = 0x8008_6601;
        const FS_IOC_SETFLAGS: u64 = 0x4008_6602;
        const FS_APPEND_FL: i32 = 0x20;
        const FS_IMMUTABLE_FL: i32 = 0x10;
        let flags_of = |f: &OpenFile| {
            let mut v = [0u8; 4];
            hostfs::ioctl(f.fd(), FS_IOC_GETFLAGS, Some(&mut v), 0).map(|_| i32::from_ne_bytes(v))
        };
        match req {
            FS_IOC_GETFLAGS => {
                ctx.mem().write(arg, &flags_of(f)?)?;
                Ok(0)
            }
            FS_IOC_SETFLAGS => {
                let new: i32 = ctx.mem().read(arg)?;
                // A device node inside the root is the host's: its inode
                // is not the guest's to change (as for chmod).
                if f.kind() == FileKind::BlockDevice {
                    return Err(Errno::EPERM);
                }
                let cred = ctx.cred();
                if hostfs::fstat(f.fd())?.st_uid != cred.fsuid && !cred.capable(crate::kernel::cred::CAP_FOWNER) {
                    return Err(Errno::EPERM);
                }
                let changed = flags_of(f)? ^ new;
                if changed & (FS_APPEND_FL | FS_IMMUTABLE_FL) != 0
                    && !cred.capable(crate::kernel::cred::CAP_LINUX_IMMUTABLE)
                {
                    return Err(Errno::EPERM);
                }
                hostfs::ioctl(f.fd(), req, Some(&mut new.to_ne_bytes()), 0).map(|_| 0)
            }
            _ => Err(Errno::ENOTTY),
        }
    }
}

/// getdents64 into a buffer the guest cannot have written: Linux writes
/// nothing at the end of the directory (0), and judges that the first
/// entry fits (EINVAL) before it writes it (EFAULT). Asked of the host with
/// a buffer of nomu's (one entry fits in 4 KiB), the position put back.
fn getdents_unwritable(f: &OpenFile, len: usize) -> SysResult {
    let pos = hostfs::lseek(f.fd(), 0, libc::SEEK_CUR)?;
    let mut probe = vec![0u8; len.min(4096)];
    if hostfs::getdents64_local(f.fd(), &mut probe)? == 0 {
        return Ok(0);
    }
    hostfs::lseek(f.fd(), pos as i64, libc::SEEK_SET)?;
    Err(Errno::EFAULT)
}

/// Pipes, sockets and character devices: I/O waits for a peer.
struct Stream;

impl FileOps for Stream {
    fn read(&self, ctx: &Ctx, f: &OpenFile, buf: u64, len: usize) -> SysResult {
        let runs = ctx.mem().runs(buf, len, true)?;
        if runs.len() < len && matches!(f.kind(), FileKind::Fifo | FileKind::Socket) {
            // A pipe read that would fault part-way fails whole, consuming
            // nothing (Linux copies each pipe buffer in one piece).
            let mut avail = [0u8; 4];
            hostfs::ioctl(f.fd(), FIONREAD, Some(&mut avail), 0)?;
            if u32::from_ne_bytes(avail) as usize > runs.len() {
                return Err(Errno::EFAULT);
            }
        }
        runs.with_ranges(|r| blocking_io(ctx, f, false, r))
    }

    fn readv(&self, ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        blocking_io(ctx, f, false, ranges)
    }

    fn writev(&self, ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        blocking_io(ctx, f, true, ranges)
    }

    fn may_block(&self) -> bool {
        true
    }
}

/// A socket: the host's, read and written as a stream is (one host call a
/// kick ends); a wait a signal ends is EINTR, not restarted, when the
/// socket has a timeout for it (SO_RCVTIMEO, SO_SNDTIMEO), as on Linux.
/// The socket calls themselves are in syscall::net.
struct SocketOps;

impl FileOps for SocketOps {
    fn read(&self, ctx: &Ctx, f: &OpenFile, buf: u64, len: usize) -> SysResult {
        Stream.read(ctx, f, buf, len).map_err(|e| super::net::interrupted(f, false, e))
    }

    fn readv(&self, ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        Stream.readv(ctx, f, ranges).map_err(|e| super::net::interrupted(f, false, e))
    }

    /// A write that finds the peer gone raises SIGPIPE on a stream socket
    /// only (unix_dgram_sendmsg, which seqpacket shares, raises none).
    fn writev(&self, ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        if super::net::domain_of(f) == libc::AF_NETLINK {
            let data = super::net::netlink_request(ctx, f, ranges)?;
            return ctx
                .t
                .block_in_host(|| crate::host::net::sendmsg_copy(f.fd(), &[], &data, &[], 0))
                .map(|n| n as u64);
        }
        let r = Stream.writev(ctx, f, ranges).map_err(|e| super::net::interrupted(f, true, e));
        if r == Err(Errno::EPIPE) && super::net::socket_type(f) != libc::SOCK_STREAM {
            ctx.t.quiet_epipe.set(true);
        }
        r
    }

    fn may_block(&self) -> bool {
        true
    }

    /// FIONREAD is every descriptor's (syscall::io); the queue sizes and
    /// the urgent mark are the host's.
    fn ioctl(&self, ctx: &Ctx, f: &OpenFile, req: u64, arg: u64) -> SysResult {
        const SIOCOUTQ: u64 = 0x5411;
        const SIOCATMARK: u64 = 0x8905;
        const SIOCOUTQNSD: u64 = 0x894b;
        const SIOCGIFNAME: u64 = 0x8910;
        const SIOCGIFCONF: u64 = 0x8912;
        const SIOCSIFLINK: u64 = 0x8911;
        const SIOCGIFTXQLEN: u64 = 0x8942;
        /// struct ifreq.
        const IFREQ_LEN: usize = 40;
        match req {
            SIOCOUTQ | SIOCATMARK | SIOCOUTQNSD => {
                let mut n = [0u8; 4];
                hostfs::ioctl(f.fd(), req, Some(&mut n), 0)?;
                ctx.mem().write_bytes(arg, &n)?;
                Ok(0)
            }
            // An interface's name, index, flags, addresses, MTU, hardware
            // address, queue length: read from the host, in a struct ifreq.
            SIOCGIFNAME | 0x8913 | 0x8915 | 0x8917 | 0x8919 | 0x891b | 0x8921 | 0x8927 | 0x8933 | SIOCGIFTXQLEN => {
                let mut ifr = [0u8; IFREQ_LEN];
                ctx.mem().read_into(arg, &mut ifr)?;
                hostfs::ioctl(f.fd(), req, Some(&mut ifr), 0)?;
                ctx.mem().write_bytes(arg, &ifr)?;
                Ok(0)
            }
            // The list of interfaces with an IPv4 address (struct ifconf:
            // a length and a buffer, or a null buffer to ask the length).
            SIOCGIFCONF => {
                let len: i32 = ctx.mem().read(arg)?;
                let buf: u64 = ctx.mem().read(arg + 8)?;
                let mut out = vec![0u8; if buf == 0 { 0 } else { len.clamp(0, 1 << 16) as usize }];
                let got = hostfs::ifconf(f.fd(), &mut out)?;
                if buf != 0 {
                    ctx.mem().write_bytes(buf, &out[..got.min(out.len())])?;
                }
                ctx.mem().write(arg, &(got as i32))?;
                Ok(0)
            }
            // Changing interfaces is the host's administrator's business,
            // not a guest's: as for a process without CAP_NET_ADMIN.
            SIOCSIFLINK..=0x89ff => Err(Errno::EPERM),
            _ => Err(Errno::ENOTTY),
        }
    }
}

/// A terminal: a stream whose reads and settings obey job control.
struct Terminal;

impl FileOps for Terminal {
    fn read(&self, ctx: &Ctx, f: &OpenFile, buf: u64, len: usize) -> SysResult {
        tty_job_control(ctx, f, libc::SIGTTIN)?;
        Stream.read(ctx, f, buf, len)
    }

    fn readv(&self, ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        Stream.readv(ctx, f, ranges)
    }

    fn writev(&self, ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        Stream.writev(ctx, f, ranges)
    }

    fn may_block(&self) -> bool {
        true
    }

    fn ioctl(&self, ctx: &Ctx, f: &OpenFile, req: u64, arg: u64) -> SysResult {
        let mem = ctx.mem();
        match req {
            TCGETS => {
                let mut t = [0u8; std::mem::size_of::<Termios>()];
                hostfs::ioctl(f.fd(), req, Some(&mut t), 0)?;
                mem.write_bytes(arg, &t)?;
                Ok(0)
            }
            TCSETS | TCSETSW | TCSETSF => {
                tty_job_control(ctx, f, libc::SIGTTOU)?;
                let mut t = [0u8; std::mem::size_of::<Termios>()];
                mem.read_into(arg, &mut t)?;
                hostfs::ioctl(f.fd(), req, Some(&mut t), 0).map(|_| 0)
            }
            TIOCGWINSZ => {
                let mut w = [0u8; 8];
                hostfs::ioctl(f.fd(), req, Some(&mut w), 0)?;
                mem.write_bytes(arg, &w)?;
                Ok(0)
            }
            TIOCSWINSZ => {
                let mut w = [0u8; 8];
                mem.read_into(arg, &mut w)?;
                hostfs::ioctl(f.fd(), req, Some(&mut w), 0).map(|_| 0)
            }
            // Pseudo-terminal masters (openpty, ptsname, unlockpt) and the
            // queue and flow calls, the host terminal's.
            TIOCGPTN | TIOCGPTLCK | TIOCGEXCL | TIOCOUTQ | TIOCGETD => {
                let mut n = [0u8; 4];
                hostfs::ioctl(f.fd(), req, Some(&mut n), 0)?;
                mem.write_bytes(arg, &n)?;
                Ok(0)
            }
            TIOCSPTLCK => {
                let mut n = [0u8; 4];
                mem.read_into(arg, &mut n)?;
                hostfs::ioctl(f.fd(), req, Some(&mut n), 0).map(|_| 0)
            }
            TIOCGPTPEER => {
                // Linux's ptm_open_peer takes only these flags.
                let flags = arg as i32 & (libc::O_ACCMODE | libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_CLOEXEC);
                let peer = hostfs::open_pty_peer(f.fd(), flags & !libc::O_CLOEXEC)?;
                let mut n = [0u8; 4];
                hostfs::ioctl(f.fd(), TIOCGPTN, Some(&mut n), 0)?;
                let path = format!("/dev/pts/{}", u32::from_ne_bytes(n));
                let file = Arc::new(OpenFile::new(peer, path.into_bytes(), false));
                ctx.install_fd(file, flags & libc::O_CLOEXEC != 0)
            }
            TIOCEXCL | TIOCNXCL => hostfs::ioctl(f.fd(), req, None, 0).map(|_| 0),
            // Flow control, flushing and breaks change the terminal: job
            // control's SIGTTOU first (tty_check_change); a drain may wait.
            TCXONC | TCFLSH | TCSBRK | TCSBRKP | TIOCSBRK | TIOCCBRK => {
                tty_job_control(ctx, f, libc::SIGTTOU)?;
                ctx.t.block_in_host(|| hostfs::ioctl(f.fd(), req, None, arg)).map(|_| 0)
            }
            // The host terminal's foreground group is nomu's; the guest's is
            // kept here, and the terminal's signals go to it. A terminal a
            // guest made answers only its own session (a pty's master:
            // anyone), as Linux's tiocgpgrp.
            TIOCGPGRP => {
                let pgrp = match terminal_role(ctx, f, true)? {
                    Role::Host => ctx.kernel().foreground_pgrp(),
                    Role::Own(c) => c.foreground,
                    Role::Other(foreground) if is_pty_master(f) => foreground,
                    Role::Free if is_pty_master(f) => 0,
                    Role::Other(_) | Role::Free => return Err(Errno::ENOTTY),
                };
                mem.write(arg, &(pgrp as i32))?;
                Ok(0)
            }
            TIOCSPGRP => {
                let role = terminal_role(ctx, f, true)?;
                if !matches!(role, Role::Host | Role::Own(_)) {
                    return Err(Errno::ENOTTY);
                }
                tty_job_control(ctx, f, libc::SIGTTOU)?;
                let pgrp: i32 = mem.read(arg)?;
                if pgrp < 0 {
                    return Err(Errno::EINVAL);
                }
                let tasks = &ctx.kernel().tasks;
                let my_sid = tasks.ids(ctx.process().pid).map(|(_, s)| s);
                let members = tasks.group_members(pgrp as u32);
                if members.is_empty() {
                    return Err(Errno::ESRCH);
                }
                if !members.iter().any(|p| tasks.ids(p.pid).map(|(_, s)| s) == my_sid) {
                    return Err(Errno::EPERM);
                }
                match role {
                    Role::Own(_) => ctx.kernel().terminals.set_foreground(my_sid.unwrap_or(0), pgrp as u32),
                    _ => ctx.kernel().foreground.store(pgrp as u32, std::sync::atomic::Ordering::Relaxed),
                }
                Ok(0)
            }
            TIOCSCTTY => tiocsctty(ctx, f, arg),
            _ => Err(Errno::ENOTTY),
        }
    }
}

/// TIOCSCTTY: the terminal becomes the controlling terminal of the
/// caller's session, which it must lead and which must have none; a
/// terminal that is another session's is taken from it only by
/// CAP_SYS_ADMIN asking with 1 (Linux's tiocsctty). login_tty and so
/// forkpty, script and CPython's pty.fork depend on it. The terminal nomu
/// runs on stays nomu's (its job control is already the guests').
fn tiocsctty(ctx: &Ctx, f: &OpenFile, arg: u64) -> SysResult {
    let pid = ctx.process().pid;
    let (_, sid) = ctx.kernel().tasks.ids(pid).ok_or(Errno::ESRCH)?;
    let admin = ctx.t.thread.cred.lock().unwrap().capable(crate::kernel::cred::CAP_SYS_ADMIN);
    let terminals = &ctx.kernel().terminals;
    match terminal_role(ctx, f, true)? {
        Role::Host => return Ok(0),
        Role::Own(_) if sid == pid => return Ok(0),
        _ if sid != pid || terminals.of_session(sid).is_some() => return Err(Errno::EPERM),
        Role::Other(_) if arg != 1 || !admin => return Err(Errno::EPERM),
        _ => {}
    }
    if !f.readable() && !admin {
        return Err(Errno::EPERM);
    }
    terminals.acquire(terminal_rdev(f, true)?, sid, true, f.fd()).map(|()| 0)
}

/// At open without O_NOCTTY: a terminal no session has becomes the
/// caller's session's, if the caller leads a session that has none
/// (Linux's tty_open; not a pty's master).
pub fn acquire_at_open(ctx: &Ctx, f: &OpenFile) {
    let pid = ctx.process().pid;
    if f.file_type() != FileType::Terminal || is_pty_master(f) {
        return;
    }
    if ctx.kernel().tasks.ids(pid).is_some_and(|(_, sid)| sid == pid) {
        // A session with a terminal, or a terminal with a session, is left
        // as it is.
        let _ = ctx.kernel().terminals.acquire(f.rdev(), pid, false, f.fd());
    }
}

/// Whether `f` is a pseudo-terminal's master (/dev/ptmx).
fn is_pty_master(f: &OpenFile) -> bool {
    f.rdev() == libc::makedev(terminal::TTYAUX_MAJOR, terminal::PTMX_MINOR)
}

/// The terminal's device number; with `slave_of_master`, a pty master's is
/// its slave's (the terminal a session has: Linux's tty->link).
fn terminal_rdev(f: &OpenFile, slave_of_master: bool) -> Result<u64, Errno> {
    if !slave_of_master || !is_pty_master(f) {
        return Ok(f.rdev());
    }
    let mut n = [0u8; 4];
    hostfs::ioctl(f.fd(), TIOCGPTN, Some(&mut n), 0)?;
    Ok(libc::makedev(terminal::UNIX98_PTY_SLAVE_MAJOR, u32::from_ne_bytes(n)))
}

/// What the terminal `f` is to the caller's session.
fn terminal_role(ctx: &Ctx, f: &OpenFile, slave_of_master: bool) -> Result<Role, Errno> {
    let sid = ctx.kernel().tasks.ids(ctx.process().pid).map_or(0, |(_, sid)| sid);
    Ok(ctx.kernel().terminals.role(terminal_rdev(f, slave_of_master)?, sid))
}

/// /dev/null, served by nomu without a host call: Linux's read_null and
/// write_null never touch the buffer, but vfs_read/vfs_write check the
/// descriptor's mode and that the buffer lies in user space first.
struct NullDevice;

impl NullDevice {
    fn io(f: &OpenFile, write: bool, buf: u64, len: usize) -> SysResult {
        let allowed = if write { f.writable() } else { f.readable() };
        if !allowed {
            return Err(Errno::EBADF);
        }
        if !crate::mm::uaccess::access_ok(buf, len as u64) {
            return Err(Errno::EFAULT);
        }
        Ok(if write { len as u64 } else { 0 })
    }
}

impl FileOps for NullDevice {
    fn read(&self, _ctx: &Ctx, f: &OpenFile, buf: u64, len: usize) -> SysResult {
        Self::io(f, false, buf, len)
    }

    fn write(&self, _ctx: &Ctx, f: &OpenFile, buf: u64, len: usize) -> SysResult {
        Self::io(f, true, buf, len)
    }

    fn writev(&self, _ctx: &Ctx, _f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        Ok(ranges.iter().map(|r| r.len() as u64).sum())
    }

    fn writev_ignores_buffers(&self, f: &OpenFile) -> Result<bool, Errno> {
        if f.writable() {
            Ok(true)
        } else {
            Err(Errno::EBADF)
        }
    }

    /// Its attributes, kept by nomu (see [`OpenFile::null_device_stat`]).
    fn fstat(&self, ctx: &Ctx, f: &OpenFile, buf: u64) -> SysResult {
        let changes = ctx.kernel().inode_changes.load(std::sync::atomic::Ordering::SeqCst);
        ctx.mem().write(buf, &f.null_device_stat(changes)?)?;
        Ok(0)
    }

    fn always_ready(&self, _f: &OpenFile) -> bool {
        true
    }

    fn readiness(&self, _f: &OpenFile) -> Readiness {
        Readiness::Never
    }

    fn mmap(&self, _f: &OpenFile) -> Result<MapSource, Errno> {
        Err(Errno::ENODEV)
    }
}

/// /dev/zero: the host's reads (which never wait), nomu's mappings.
struct ZeroDevice;

impl FileOps for ZeroDevice {
    fn mmap(&self, _f: &OpenFile) -> Result<MapSource, Errno> {
        Ok(MapSource::Anonymous)
    }
}

/// The test-only ioctl of a memfd_secret file (see SecretMemOps::ioctl).
pub const SECRET_PHYS_IOCTL: u64 = 0x4e4d_5301;

/// A memfd_secret file (fs::secretmem): nomu's pages, mapped only
/// MAP_SHARED. Linux's secretmem has no read, write or poll methods:
/// read/write are EINVAL (before the buffer is looked at, as vfs_read
/// checks FMODE_CAN_READ first); lseek and pread are the host
/// descriptor's ESPIPE, fstat its attributes (mode 0600, the size).
struct SecretMemOps;

impl SecretMemOps {
    fn secret(f: &OpenFile) -> &crate::fs::secretmem::SecretMem {
        f.secretmem().expect("a secret file's state")
    }
}

impl FileOps for SecretMemOps {
    fn read(&self, _ctx: &Ctx, _f: &OpenFile, _buf: u64, _len: usize) -> SysResult {
        Err(Errno::EINVAL)
    }

    fn write(&self, _ctx: &Ctx, _f: &OpenFile, _buf: u64, _len: usize) -> SysResult {
        Err(Errno::EINVAL)
    }

    fn readv(&self, _ctx: &Ctx, _f: &OpenFile, _ranges: &[GuestRange]) -> SysResult {
        Err(Errno::EINVAL)
    }

    fn writev(&self, _ctx: &Ctx, _f: &OpenFile, _ranges: &[GuestRange]) -> SysResult {
        Err(Errno::EINVAL)
    }

    fn always_ready(&self, _f: &OpenFile) -> bool {
        true
    }

    fn readiness(&self, _f: &OpenFile) -> Readiness {
        Readiness::Never
    }

    fn mmap(&self, f: &OpenFile) -> Result<MapSource, Errno> {
        let _ = Self::secret(f);
        Ok(MapSource::Secret)
    }

    /// Linux's secretmem has no ioctls (ENOTTY). For tests only, with
    /// NOMU_TEST_SECRET_PHYS=1 in nomu's environment: [`SECRET_PHYS_IOCTL`]
    /// writes the direct-map address of the file's first page (what Linux's
    /// /proc/self/pagemap would give root), so a test can check that the
    /// address faults and never shows the data.
    fn ioctl(&self, ctx: &Ctx, f: &OpenFile, req: u64, arg: u64) -> SysResult {
        if req != SECRET_PHYS_IOCTL || std::env::var_os("NOMU_TEST_SECRET_PHYS").is_none_or(|v| v != "1") {
            return Err(Errno::ENOTTY);
        }
        let pages = Self::secret(f).pages().ok_or(Errno::ENXIO)?;
        ctx.mem().write(arg, &(pages.start() as u64))?;
        Ok(0)
    }

    /// The size can be set once (secretmem_setattr); the pages are taken
    /// then (fs::secretmem).
    fn ftruncate(&self, _ctx: &Ctx, f: &OpenFile, length: i64) -> SysResult {
        let size = hostfs::fstat(f.fd())?.st_size;
        if size != 0 {
            return Err(Errno::EINVAL);
        }
        Self::secret(f).set_size(length as u64, || hostfs::ftruncate(f.fd(), length).map(drop))?;
        Ok(0)
    }
}

/// Attributes of a /proc file or directory, as nomu makes them.
fn proc_fstat(ctx: &Ctx, f: &OpenFile, buf: u64) -> SysResult {
    let Some(p) = &f.proc else { return Err(Errno::EBADF) };
    ctx.mem().write(buf, &procfs::stat(ctx.kernel(), p.node))?;
    Ok(0)
}

/// A directory of nomu's /proc: nomu lists it; its descriptor underneath
/// is a host directory, never read.
struct ProcDir;

impl FileOps for ProcDir {
    fn getdents(&self, ctx: &Ctx, f: &OpenFile, buf: u64, len: usize) -> SysResult {
        let Some(p) = &f.proc else { return Err(Errno::ENOTDIR) };
        let entries = procfs::list(ctx.kernel(), p.node)?;
        let mut pos = f.dir_pos.lock().unwrap();
        let from = *pos as u64;
        let mut out = Vec::new();
        for (at, (name, kind, ino)) in positioned(&entries).filter(|&(at, _)| at >= from) {
            // struct linux_dirent64: ino, off, reclen, type, name, NUL, padded to 8.
            let reclen = (19 + name.len() + 1).next_multiple_of(8);
            if out.len() + reclen > len {
                if out.is_empty() {
                    return Err(Errno::EINVAL);
                }
                break;
            }
            let mut rec = vec![0u8; reclen];
            rec[0..8].copy_from_slice(&ino.to_le_bytes());
            rec[8..16].copy_from_slice(&(at + 1).to_le_bytes());
            rec[16..18].copy_from_slice(&(reclen as u16).to_le_bytes());
            rec[18] = *kind;
            rec[19..19 + name.len()].copy_from_slice(name);
            out.extend(rec);
            *pos = (at + 1) as usize;
        }
        ctx.mem().write_bytes(buf, &out)?;
        Ok(out.len() as u64)
    }

    fn fstat(&self, ctx: &Ctx, f: &OpenFile, buf: u64) -> SysResult {
        proc_fstat(ctx, f, buf)
    }

    /// The position is one of [`positioned`]'s (what getdents gives as
    /// d_off); reading goes on from the first entry at or after it.
    fn lseek(&self, _ctx: &Ctx, f: &OpenFile, offset: i64, whence: u32) -> SysResult {
        let mut pos = f.dir_pos.lock().unwrap();
        let new = match whence as i32 {
            libc::SEEK_SET => offset,
            libc::SEEK_CUR => (*pos as i64).checked_add(offset).ok_or(Errno::EINVAL)?,
            libc::SEEK_END => offset,
            _ => return Err(Errno::EINVAL),
        };
        if new < 0 {
            return Err(Errno::EINVAL);
        }
        *pos = new as usize;
        Ok(new as u64)
    }
}

/// A /proc directory's entries with their positions, in order: the
/// leading named ones ("." and "..", /proc's own files) at their index,
/// each pid, tid or descriptor after them at its number past those, as
/// Linux's proc places them (/proc/PID/fd: descriptor N at N + 2). So a
/// position stays an entry's however the others come and go: a program
/// that closes descriptors while it reads /proc/self/fd (CPython's
/// subprocess, closing all but pass_fds) sees every one it has not
/// closed yet, where positions as indices skipped one per close.
fn positioned(entries: &[(Vec<u8>, u8, u64)]) -> impl Iterator<Item = (u64, &(Vec<u8>, u8, u64))> {
    let number = |name: &[u8]| std::str::from_utf8(name).ok().and_then(|n| n.parse::<u64>().ok());
    let named = entries.iter().take_while(|(name, ..)| number(name).is_none()).count();
    let mut out: Vec<_> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (if i < named { i as u64 } else { number(&e.0).map_or(u64::MAX, |n| n + named as u64) }, e))
        .collect();
    out.sort_by_key(|&(at, _)| at);
    out.into_iter()
}

/// A file of nomu's /proc: reads come from a memfd of its contents,
/// generated at open and again whenever a read starts at the beginning
/// (as Linux's seq files are), so a program that keeps /proc/stat or
/// /proc/meminfo open and reads it again from the start (top, free -s)
/// sees new values.
struct ProcFile;

impl ProcFile {
    fn refresh(ctx: &Ctx, f: &OpenFile) -> Result<(), Errno> {
        let Some(p) = &f.proc else { return Ok(()) };
        let at_start = hostfs::lseek(f.fd(), 0, libc::SEEK_CUR)? == 0;
        if p.regenerate() && at_start {
            hostfs::memfd_refill(f.fd(), &procfs::contents(ctx.kernel(), p.node, ctx.tid())?)?;
        }
        Ok(())
    }
}

impl FileOps for ProcFile {
    fn read(&self, ctx: &Ctx, f: &OpenFile, buf: u64, len: usize) -> SysResult {
        Self::refresh(ctx, f)?;
        HostFile.read(ctx, f, buf, len)
    }

    fn readv(&self, ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        Self::refresh(ctx, f)?;
        HostFile.readv(ctx, f, ranges)
    }

    fn fstat(&self, ctx: &Ctx, f: &OpenFile, buf: u64) -> SysResult {
        proc_fstat(ctx, f, buf)
    }

    /// The one writable /proc file: /proc/sys/vm/drop_caches.
    fn write(&self, ctx: &Ctx, f: &OpenFile, buf: u64, len: usize) -> SysResult {
        let buf = ctx.mem().range(buf, len, false)?;
        self.writev(ctx, f, &[*buf])
    }

    fn writev(&self, ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        if !f.writable() {
            return Err(Errno::EBADF);
        }
        let mut text = Vec::new();
        for r in ranges {
            text.extend(ctx.mem().read_bytes(r.addr() as u64, r.len())?);
        }
        // Linux's sysctl_writes_strict: a write past position 0 is
        // ignored (and moves the position on).
        let pos = hostfs::lseek(f.fd(), 0, libc::SEEK_CUR)?;
        if pos == 0 {
            drop_caches(ctx, &text)?;
        }
        hostfs::lseek(f.fd(), text.len() as i64, libc::SEEK_CUR)?;
        Ok(text.len() as u64)
    }

    fn always_ready(&self, _f: &OpenFile) -> bool {
        true
    }

    /// Linux's proc files have no mmap.
    fn mmap(&self, _f: &OpenFile) -> Result<MapSource, Errno> {
        Err(Errno::ENODEV)
    }
}

/// A write to /proc/sys/vm/drop_caches: an integer 1..=4, as Linux's
/// proc_dointvec_minmax takes it (blanks around it); 1 and 3 drop the page
/// cache's unused pages (mm::cache), 2 (slab objects) and 4 (quiet) have
/// nothing to drop in nomu.
fn drop_caches(ctx: &Ctx, text: &[u8]) -> Result<(), Errno> {
    let s = std::str::from_utf8(text).map_err(|_| Errno::EINVAL)?.trim();
    let v: i64 = s.parse().map_err(|_| Errno::EINVAL)?;
    if !(1..=4).contains(&v) {
        return Err(Errno::EINVAL);
    }
    if v & 1 != 0 {
        ctx.kernel().page_cache.reclaim();
    }
    Ok(())
}

pub const TCGETS: u64 = 0x5401;
const TCSETS: u64 = 0x5402;
const TCSETSW: u64 = 0x5403;
const TCSETSF: u64 = 0x5404;
const TIOCGPGRP: u64 = 0x540f;
const TIOCSPGRP: u64 = 0x5410;
const TIOCGWINSZ: u64 = 0x5413;
const TIOCSWINSZ: u64 = 0x5414;
pub const FIONREAD: u64 = 0x541b;
const TCSBRK: u64 = 0x5409;
const TCXONC: u64 = 0x540a;
const TCFLSH: u64 = 0x540b;
const TIOCEXCL: u64 = 0x540c;
const TIOCNXCL: u64 = 0x540d;
const TIOCOUTQ: u64 = 0x5411;
const TIOCGETD: u64 = 0x5424;
const TCSBRKP: u64 = 0x5425;
const TIOCSBRK: u64 = 0x5427;
const TIOCCBRK: u64 = 0x5428;
const TIOCGPTN: u64 = 0x8004_5430;
const TIOCSPTLCK: u64 = 0x4004_5431;
const TIOCGPTLCK: u64 = 0x8004_5439;
const TIOCGEXCL: u64 = 0x8004_5440;
const TIOCGPTPEER: u64 = 0x5441;
const TIOCSCTTY: u64 = 0x540e;

/// Terminal job control: a process outside the terminal's foreground group
/// that reads it (SIGTTIN) or changes its settings (SIGTTOU) gets its group
/// stopped by that signal, and the call is restarted once it continues; if
/// the signal is blocked or ignored, reads fail with EIO and settings go
/// through (Linux's tty_check_change / job_control). Only on the terminal
/// nomu runs on and on the caller's session's own: another session's
/// terminal, or no session's, is read and set by anyone.
fn tty_job_control(ctx: &Ctx, f: &OpenFile, sig: i32) -> Result<(), Errno> {
    let kernel = ctx.kernel();
    let Some((pgid, _)) = kernel.tasks.ids(ctx.process().pid) else { return Ok(()) };
    let foreground = match terminal_role(ctx, f, false)? {
        Role::Host => kernel.foreground_pgrp(),
        Role::Own(c) => c.foreground,
        Role::Other(_) | Role::Free => return Ok(()),
    };
    if pgid == foreground {
        return Ok(());
    }
    let blocked = ctx.t.thread.state.lock().unwrap().sigmask & crate::kernel::signal::bit(sig) != 0;
    let ignored = ctx.process().signals.lock().unwrap().get(sig).handler == crate::kernel::signal::SIG_IGN;
    if blocked || ignored {
        return if sig == libc::SIGTTIN { Err(Errno::EIO) } else { Ok(()) };
    }
    for p in kernel.tasks.group_members(pgid) {
        kernel.signal_process(&p, crate::kernel::signal::SigInfo::kernel(sig));
    }
    Err(Errno::ERESTARTSYS)
}

/// The part of `ranges` after its first `skip` bytes.
fn ranges_after(ranges: &[GuestRange], mut skip: usize) -> Vec<GuestRange> {
    let mut out = Vec::with_capacity(ranges.len());
    for r in ranges {
        if skip >= r.len() {
            skip -= r.len();
            continue;
        }
        out.push(r.skip(skip));
        skip = 0;
    }
    out
}

/// I/O that may wait: one host call that blocks as long as the guest's
/// would, ended by a kick (see host::blocking), so a signal, exit_group or
/// execve never waits for it. A write goes on until all is written (writes
/// up to PIPE_BUF stay atomic: the host writes them whole); one cut short
/// by a signal gives the partial count, as on Linux.
fn blocking_io(ctx: &Ctx, f: &OpenFile, write: bool, ranges: &[GuestRange]) -> SysResult {
    let total: usize = ranges.iter().map(|r| r.len()).sum();
    if ctx.t.signal_pending() {
        return io_without_waiting(ctx, f, write, ranges);
    }
    let mut done = 0usize;
    loop {
        let rest = if done == 0 { None } else { Some(ranges_after(ranges, done)) };
        let rest = rest.as_deref().unwrap_or(ranges);
        let moved = ctx.t.block_in_host(|| {
            if write {
                hostfs::writev_interruptible(f.fd(), rest)
            } else {
                hostfs::readv_interruptible(f.fd(), rest)
            }
        });
        match moved {
            // A signal came before anything moved: what can move without
            // waiting still does, as on Linux.
            Err(Errno::ERESTARTSYS) if done == 0 => return io_without_waiting(ctx, f, write, ranges),
            Ok(n) => {
                done += n;
                // A write the host cut short (a kick, a non-blocking pipe
                // with some room) goes on unless a signal is what cut it.
                if !write || n == 0 || done >= total || ctx.t.signal_pending() {
                    return Ok(done as u64);
                }
            }
            // EAGAIN after some bytes went, or a signal: their count.
            Err(_) if done > 0 => return Ok(done as u64),
            Err(e) => return Err(e),
        }
    }
}

/// I/O with a signal pending: Linux looks for signals only where the call
/// would wait, so what can move now still moves (a read takes the bytes
/// there, a write at most PIPE_BUF, which a pipe that polls writable takes
/// whole); ERESTARTSYS only if nothing can. (Interactive ash lost its
/// "[1]+ Stopped" line: written as the SIGCHLD of the stop came in, it got
/// EINTR.)
fn io_without_waiting(ctx: &Ctx, f: &OpenFile, write: bool, ranges: &[GuestRange]) -> SysResult {
    const PIPE_BUF: usize = 4096;
    let want = if write { libc::POLLOUT } else { libc::POLLIN };
    let first = ranges_before(ranges, if write { PIPE_BUF } else { usize::MAX });
    loop {
        let ready = crate::host::events::poll_now(f.fd(), want)?;
        if ready & (want | libc::POLLHUP | libc::POLLERR) == 0 {
            return Err(Errno::ERESTARTSYS);
        }
        let moved = ctx.t.run_in_host_now(|| {
            if write {
                hostfs::writev_interruptible(f.fd(), &first)
            } else {
                hostfs::readv_interruptible(f.fd(), &first)
            }
        });
        match moved {
            // A kick (another signal, an exit) before the host call began:
            // each ends one try only, and what was ready still is.
            Err(Errno::EINTR) => continue,
            r => return r.map(|n| n as u64),
        }
    }
}

/// The first `len` bytes of `ranges`.
fn ranges_before(ranges: &[GuestRange], mut len: usize) -> Vec<GuestRange> {
    let mut out = Vec::with_capacity(ranges.len());
    for r in ranges {
        if len == 0 {
            break;
        }
        let n = r.len().min(len);
        out.push(GuestRange::new(r.addr(), n).unwrap());
        len -= n;
    }
    out
}

/// Whether I/O on `f` must not wait (O_NONBLOCK, kept in its host
/// descriptor's status flags like every description's).
fn nonblocking(f: &OpenFile) -> Result<bool, Errno> {
    Ok(hostfs::getfl(f.fd())? & libc::O_NONBLOCK != 0)
}

/// Writes `bytes` across checked guest ranges, in order (a readv of
/// nomu's own data).
fn write_ranges(ctx: &Ctx, ranges: &[GuestRange], mut bytes: &[u8]) -> Result<(), Errno> {
    for r in ranges {
        if bytes.is_empty() {
            break;
        }
        let n = r.len().min(bytes.len());
        ctx.mem().write_bytes(r.addr() as u64, &bytes[..n])?;
        bytes = &bytes[n..];
    }
    Ok(())
}

/// An eventfd: nomu's counter (fs::eventfd), Linux's eventfd_read and
/// eventfd_write. Waits are on the counter's wait queue, ended by a
/// change or a signal (ERESTARTSYS, as Linux).
struct EventFdOps;

impl EventFdOps {
    fn counter(f: &OpenFile) -> &crate::fs::eventfd::EventFd {
        f.eventfd().expect("an eventfd's state")
    }

    /// Takes the counter (or 1), waiting while it is zero.
    fn take(ctx: &Ctx, f: &OpenFile) -> Result<u64, Errno> {
        let ev = Self::counter(f);
        let v = match ev.try_read() {
            Some(v) => v,
            None if nonblocking(f)? => return Err(Errno::EAGAIN),
            None => ctx
                .t
                .wait_for(Some(&ev.head.event), None, Wake::OnSignal, || Ok(ev.try_read()))?
                .ok_or(Errno::EAGAIN)?,
        };
        ev.head.notify();
        Ok(v)
    }

    /// Adds `v`, waiting while the counter would overflow.
    fn add(ctx: &Ctx, f: &OpenFile, v: u64) -> SysResult {
        if v == u64::MAX {
            return Err(Errno::EINVAL);
        }
        let ev = Self::counter(f);
        if !ev.try_write(v) {
            if nonblocking(f)? {
                return Err(Errno::EAGAIN);
            }
            ctx.t
                .wait_for(Some(&ev.head.event), None, Wake::OnSignal, || Ok(ev.try_write(v).then_some(())))?
                .ok_or(Errno::EAGAIN)?;
        }
        ev.head.notify();
        Ok(8)
    }
}

impl FileOps for EventFdOps {
    fn read(&self, ctx: &Ctx, f: &OpenFile, buf: u64, len: usize) -> SysResult {
        if len < 8 {
            return Err(Errno::EINVAL);
        }
        // Taken before the copy, as on Linux: a bad buffer loses it.
        let v = Self::take(ctx, f)?;
        ctx.mem().write(buf, &v)?;
        Ok(8)
    }

    fn readv(&self, ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        if ranges.iter().map(|r| r.len()).sum::<usize>() < 8 {
            return Err(Errno::EINVAL);
        }
        let v = Self::take(ctx, f)?;
        write_ranges(ctx, ranges, &v.to_le_bytes())?;
        Ok(8)
    }

    fn write(&self, ctx: &Ctx, f: &OpenFile, buf: u64, len: usize) -> SysResult {
        if len < 8 {
            return Err(Errno::EINVAL);
        }
        let v: u64 = ctx.mem().read(buf)?;
        Self::add(ctx, f, v)
    }

    /// Linux's eventfd has write, not write_iter: each buffer is one write,
    /// and the first that fails or is short ends the call.
    fn writev(&self, ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        let mut done = 0;
        for r in ranges {
            match self.write(ctx, f, r.addr() as u64, r.len()) {
                Ok(n) => {
                    done += n;
                    if n as usize != r.len() {
                        break;
                    }
                }
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(done)
    }

    fn readiness(&self, _f: &OpenFile) -> Readiness {
        Readiness::Nomu
    }

    fn poll(&self, _ctx: &Ctx, f: &OpenFile) -> u32 {
        Self::counter(f).poll()
    }

    fn poll_head(&self, _ctx: &Ctx, f: &OpenFile) -> Option<Arc<PollHead>> {
        Some(Self::counter(f).head.clone())
    }

    fn mmap(&self, _f: &OpenFile) -> Result<MapSource, Errno> {
        Err(Errno::ENODEV)
    }
}

/// A pidfd (fs::pidfd): neither read nor written (pidfs has no read or
/// write: EINVAL), polled for the end of what it names, never mapped.
struct PidFdOps;

impl PidFdOps {
    fn target(f: &OpenFile) -> &crate::fs::pidfd::PidFd {
        f.pidfd().expect("a pidfd's target")
    }
}

impl FileOps for PidFdOps {
    fn read(&self, _ctx: &Ctx, _f: &OpenFile, _buf: u64, _len: usize) -> SysResult {
        Err(Errno::EINVAL)
    }

    fn write(&self, _ctx: &Ctx, _f: &OpenFile, _buf: u64, _len: usize) -> SysResult {
        Err(Errno::EINVAL)
    }

    fn readv(&self, _ctx: &Ctx, _f: &OpenFile, _ranges: &[GuestRange]) -> SysResult {
        Err(Errno::EINVAL)
    }

    fn writev(&self, _ctx: &Ctx, _f: &OpenFile, _ranges: &[GuestRange]) -> SysResult {
        Err(Errno::EINVAL)
    }

    fn lseek(&self, _ctx: &Ctx, _f: &OpenFile, _offset: i64, _whence: u32) -> SysResult {
        Err(Errno::ESPIPE)
    }

    fn readiness(&self, _f: &OpenFile) -> Readiness {
        Readiness::Nomu
    }

    fn poll(&self, ctx: &Ctx, f: &OpenFile) -> u32 {
        Self::target(f).poll(ctx.kernel())
    }

    fn poll_head(&self, _ctx: &Ctx, f: &OpenFile) -> Option<Arc<PollHead>> {
        Some(Self::target(f).process().pidfd_wait.clone())
    }

    fn mmap(&self, _f: &OpenFile) -> Result<MapSource, Errno> {
        Err(Errno::ENODEV)
    }
}

/// A signalfd: reads the pending signals in its mask, blocked or not, of
/// the calling thread and then of its process, as `struct
/// signalfd_siginfo`s (Linux's signalfd_read, by dequeue_signal).
struct SignalFdOps;

impl SignalFdOps {
    fn take(ctx: &Ctx, mask: u64) -> Option<crate::kernel::signal::SigInfo> {
        let process = &ctx.t.thread.process;
        let mut st = ctx.t.thread.state.lock().unwrap();
        let take = || st.pending.take_from(mask).or_else(|| process.shared_pending.take_from(mask));
        crate::kernel::timer::take_signal(process, take)
    }

    /// Fills `out` (a multiple of 128 bytes) with pending signals, waiting
    /// for the first unless non-blocking: how many bytes.
    fn dequeue(ctx: &Ctx, f: &OpenFile, len: usize, mut out: impl FnMut(usize, &[u8; 128]) -> bool) -> SysResult {
        let count = len / 128;
        if count == 0 {
            return Err(Errno::EINVAL);
        }
        let mask = f.signalfd().expect("a signalfd's state").mask();
        let mut done = 0;
        for i in 0..count {
            let info = match Self::take(ctx, mask) {
                Some(info) => info,
                None if i > 0 => break,
                None if nonblocking(f)? => return Err(Errno::EAGAIN),
                None => {
                    let head = &ctx.process().signal_queued;
                    let got = ctx.t.wait_for(Some(&head.event), None, Wake::OnSignal, || Ok(Self::take(ctx, mask)));
                    got?.ok_or(Errno::EAGAIN)?
                }
            };
            // A signal taken and not copied is lost, as on Linux.
            if !out(done, &crate::fs::eventfd::signalfd_siginfo(&info)) {
                return if done > 0 { Ok(done as u64) } else { Err(Errno::EFAULT) };
            }
            done += 128;
        }
        Ok(done as u64)
    }
}

impl FileOps for SignalFdOps {
    fn read(&self, ctx: &Ctx, f: &OpenFile, buf: u64, len: usize) -> SysResult {
        Self::dequeue(ctx, f, len, |at, info| ctx.mem().write_bytes(buf + at as u64, info).is_ok())
    }

    fn readv(&self, ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        let len = ranges.iter().map(|r| r.len()).sum();
        let mut all = Vec::new();
        let n = Self::dequeue(ctx, f, len, |_, info| {
            all.extend_from_slice(info);
            true
        })?;
        write_ranges(ctx, ranges, &all)?;
        Ok(n)
    }

    fn readiness(&self, _f: &OpenFile) -> Readiness {
        Readiness::Nomu
    }

    fn poll(&self, ctx: &Ctx, f: &OpenFile) -> u32 {
        let mask = f.signalfd().expect("a signalfd's state").mask();
        let shared = ctx.process().shared_pending.set() & mask != 0;
        if shared || ctx.t.thread.state.lock().unwrap().pending.has_any(mask) {
            crate::fs::epoll::EPOLLIN
        } else {
            0
        }
    }

    fn poll_head(&self, ctx: &Ctx, _f: &OpenFile) -> Option<Arc<PollHead>> {
        Some(ctx.process().signal_queued.clone())
    }

    fn mmap(&self, _f: &OpenFile) -> Result<MapSource, Errno> {
        Err(Errno::ENODEV)
    }
}

/// An epoll descriptor: its host epoll answers poll (see fs::epoll);
/// read and write are the host's EINVAL.
struct EpollOps;

impl FileOps for EpollOps {
    fn before_host_poll(&self, ctx: &Ctx, f: &OpenFile) {
        if let Some(ep) = f.epoll() {
            ep.settle(&mut |file| poll_own(ctx, file));
        }
    }

    fn mmap(&self, _f: &OpenFile) -> Result<MapSource, Errno> {
        Err(Errno::ENODEV)
    }
}

/// An inotify instance: the host's own (events, their order, queue
/// overflow and readiness are Linux's); a read waits as a pipe's does.
struct InotifyOps;

impl FileOps for InotifyOps {
    fn read(&self, ctx: &Ctx, f: &OpenFile, buf: u64, len: usize) -> SysResult {
        Stream.read(ctx, f, buf, len)
    }

    fn readv(&self, ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        Stream.readv(ctx, f, ranges)
    }

    fn may_block(&self) -> bool {
        true
    }

    fn mmap(&self, _f: &OpenFile) -> Result<MapSource, Errno> {
        Err(Errno::ENODEV)
    }
}

/// A timerfd: the host's own, so its clocks, expirations, TFD_TIMER_
/// CANCEL_ON_SET and readiness are exactly Linux's; a read waits in one
/// host call that a kick ends, as a pipe's does.
struct TimerFdOps;

/// TFD_IOC_SET_TICKS: _IOW('T', 0, __u64).
const TFD_IOC_SET_TICKS: u64 = 0x4008_5400;

impl FileOps for TimerFdOps {
    fn read(&self, ctx: &Ctx, f: &OpenFile, buf: u64, len: usize) -> SysResult {
        Stream.read(ctx, f, buf, len)
    }

    fn readv(&self, ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> SysResult {
        Stream.readv(ctx, f, ranges)
    }

    fn may_block(&self) -> bool {
        true
    }

    fn ioctl(&self, ctx: &Ctx, f: &OpenFile, req: u64, arg: u64) -> SysResult {
        if req != TFD_IOC_SET_TICKS {
            return Err(Errno::ENOTTY);
        }
        let mut ticks = [0u8; 8];
        ctx.mem().read_into(arg, &mut ticks)?;
        hostfs::ioctl(f.fd(), req, Some(&mut ticks), 0).map(|_| 0)
    }

    fn mmap(&self, _f: &OpenFile) -> Result<MapSource, Errno> {
        Err(Errno::ENODEV)
    }
}

/// `f`'s readiness as nomu knows it (0 for a file whose readiness is the
/// host's): for the ready lists of epolls.
pub fn poll_own(ctx: &Ctx, f: &OpenFile) -> u32 {
    of(f).poll(ctx, f)
}
