//! Path-based calls: open, stat, directories, links, permissions, cwd.

use super::args::{AtFlags, DirFd, Fd, Hex, Mode, OpenFlags, OutBuf, Path, UserPtr};
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::fs::file::{FileKind, FileType, OpenFile};
use crate::fs::path::{self, Special, PATH_MAX};
use crate::fs::procfs::{self, Follow, Kind, Lookup, Node};
use crate::host::fs as hostfs;
use std::borrow::Cow;
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

/// What a path names, resolved inside the root.
pub(super) enum Target {
    /// The object itself, as a host O_PATH descriptor opened for the call.
    Object(OwnedFd),
    /// An open file of the guest's (an empty path with AT_EMPTY_PATH).
    File(Arc<OpenFile>),
    /// A directory entry that must not be followed: parent and name.
    Entry(OwnedFd, CString),
    /// A host path, when the root is the host's `/` (one host call instead
    /// of opening first); `follow` says whether a final symlink is followed.
    HostPath(CString, bool),
    /// A file, directory or link of nomu's /proc.
    Proc(Node),
}

impl Target {
    /// An open file as a target (a /proc one is its node).
    pub(super) fn file(f: Arc<OpenFile>) -> Target {
        match &f.proc {
            Some(p) => Target::Proc(p.node),
            None => Target::File(f),
        }
    }

    /// The (directory, name, AT_ flags) triple a host *at call takes; a
    /// /proc entry has none (its attributes are not the guest's to change:
    /// EPERM, as Linux's proc_setattr answers chmod).
    pub(super) fn at(&self) -> Result<(std::os::fd::BorrowedFd<'_>, Cow<'_, CStr>, i32), Errno> {
        Ok(match self {
            Target::Object(fd) => (hostfs::cwd(), Cow::Owned(proc_fd_path(fd.as_fd())), 0),
            Target::File(f) => (hostfs::cwd(), Cow::Owned(proc_fd_path(f.fd())), 0),
            Target::Entry(dir, name) => (dir.as_fd(), Cow::Borrowed(name.as_c_str()), libc::AT_SYMLINK_NOFOLLOW),
            Target::HostPath(p, follow) => {
                (hostfs::cwd(), Cow::Borrowed(p.as_c_str()), if *follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW })
            }
            Target::Proc(_) => return Err(Errno::EPERM),
        })
    }

    /// The host descriptor of the object itself, if the target is one.
    pub(super) fn object_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        match self {
            Target::Object(fd) => Some(fd.as_fd()),
            Target::File(f) => Some(f.fd()),
            _ => None,
        }
    }
}

impl Ctx<'_, '_> {
    /// Absolute guest path of a directory descriptor (or the cwd).
    pub(super) fn base_dir(&self, dirfd: DirFd) -> Result<Vec<u8>, Errno> {
        if dirfd == DirFd::CWD {
            return Ok(self.process().cwd.lock().unwrap().clone());
        }
        let f = self.file(dirfd.fd())?;
        if f.kind() != FileKind::Directory {
            return Err(Errno::ENOTDIR);
        }
        // nomu's /proc directories are not the host's: their own path.
        if let Some(p) = &f.proc {
            return Ok(p.node.path());
        }
        // Asked of the host each time, so a renamed directory still works.
        self.kernel().root.guest_path_of(f.fd())
    }

    fn read_path(&self, pathname: Path) -> Result<Vec<u8>, Errno> {
        self.mem().read_cstring(pathname.0, PATH_MAX - 1)
    }

    /// Reads a guest path argument and makes it absolute. Empty paths are
    /// ENOENT, unless `empty_ok` (AT_EMPTY_PATH), when they come back empty.
    fn abs_path(&self, dirfd: DirFd, pathname: Path, empty_ok: bool) -> Result<Vec<u8>, Errno> {
        let p = self.read_path(pathname)?;
        if p.is_empty() {
            return if empty_ok { Ok(p) } else { Err(Errno::ENOENT) };
        }
        if p.starts_with(b"/") {
            return Ok(p);
        }
        Ok(path::join(&self.base_dir(dirfd)?, &p))
    }

    /// Opens an absolute guest path, answering nomu's built-in paths itself.
    pub(super) fn open_abs(&self, abs: &[u8], flags: i32, mode: u32) -> Result<OwnedFd, Errno> {
        self.open_abs_node(abs, flags, mode).map(|(fd, _)| fd)
    }

    /// The same, with the node when it opened a /proc file or directory.
    fn open_abs_node(&self, abs: &[u8], flags: i32, mode: u32) -> Result<(OwnedFd, Option<Node>), Errno> {
        let special = path::special(abs);
        if matches!(special, Some(Special::HostDevice("/dev/tty"))) {
            if let Some(own) = self.own_terminal() {
                return hostfs::open_host(&own, flags & !libc::O_CREAT).map(|fd| (fd, None));
            }
        }
        match special {
            Some(Special::HostDevice(dev)) => {
                hostfs::open_host(&CString::new(dev).unwrap(), flags & !libc::O_CREAT).map(|fd| (fd, None))
            }
            Some(Special::GuestFd(n)) => self.open_again(&*self.file(Fd(n))?, flags),
            Some(Special::Hidden) => Err(Errno::ENOENT),
            Some(Special::Proc(norm)) if names_dir(abs) => self.open_proc(&norm, flags | libc::O_DIRECTORY, mode),
            Some(Special::Proc(norm)) => self.open_proc(&norm, flags, mode),
            None => self.kernel().root.open_path(abs, flags, mode).map(|fd| (fd, None)),
        }
    }

    /// The host path of the pty a guest made that is the caller's
    /// session's terminal, which /dev/tty names for it (else /dev/tty is
    /// the terminal nomu runs on).
    fn own_terminal(&self) -> Option<CString> {
        let (_, sid) = self.kernel().tasks.ids(self.process().pid)?;
        let tty = self.kernel().terminals.of_session(sid)?;
        (libc::major(tty.rdev) == crate::kernel::terminal::UNIX98_PTY_SLAVE_MAJOR)
            .then(|| CString::new(format!("/dev/pts/{}", libc::minor(tty.rdev))).unwrap())
    }

    /// Opens an open file again, as a new description (/proc/PID/fd/N,
    /// /dev/fd/N: Linux's magic links).
    fn open_again(&self, f: &OpenFile, flags: i32) -> Result<(OwnedFd, Option<Node>), Errno> {
        if let Some(p) = &f.proc {
            return self.open_abs_node(&p.node.path(), flags, 0);
        }
        let link = proc_fd_path(f.fd());
        hostfs::open_host(&link, flags & !(libc::O_CREAT | libc::O_EXCL)).map(|fd| (fd, None))
    }

    /// Opens a /proc path: a directory's descriptor underneath is the host's
    /// /proc directory (never read; nomu lists its own), a file's a memfd of
    /// its contents, read-only; links are followed (or, with O_PATH and
    /// O_NOFOLLOW, opened themselves).
    fn open_proc(&self, norm: &[u8], flags: i32, mode: u32) -> Result<(OwnedFd, Option<Node>), Errno> {
        let kernel = self.kernel();
        let me = self.process().pid;
        let node = match procfs::lookup(kernel, me, norm)? {
            Lookup::Through(p) => return self.open_abs_node(&p, flags, mode),
            Lookup::Node(n) => n,
        };
        if flags & (libc::O_CREAT | libc::O_EXCL) == libc::O_CREAT | libc::O_EXCL {
            return Err(Errno::EEXIST);
        }
        // A trailing slash (O_DIRECTORY here) follows a final link anyway.
        let nofollow = flags & (libc::O_NOFOLLOW | libc::O_DIRECTORY) == libc::O_NOFOLLOW;
        let node = match node.kind() {
            Kind::Link if nofollow && flags & libc::O_PATH == 0 => return Err(Errno::ELOOP),
            Kind::Link if nofollow => node,
            Kind::Link => match procfs::follow(kernel, me, node)? {
                Follow::Node(n) => n,
                Follow::Path(p) => return self.open_abs_node(&p, flags, mode),
                Follow::File(f) => return self.open_again(&f, flags),
            },
            _ => node,
        };
        let writes = flags & libc::O_ACCMODE != libc::O_RDONLY && flags & libc::O_PATH == 0;
        let kept = flags & (libc::O_NONBLOCK | libc::O_PATH);
        let fd = match node.kind() {
            Kind::Dir if writes || flags & libc::O_CREAT != 0 => return Err(Errno::EISDIR),
            Kind::Dir => hostfs::open_host(c"/proc", kept | flags & libc::O_DIRECTORY | libc::O_RDONLY)?,
            _ if flags & libc::O_DIRECTORY != 0 => return Err(Errno::ENOTDIR),
            // drop_caches (mode 0200): written by root only, read by none
            // (a sysctl's owner bits bind root too).
            _ if node == Node::Top(procfs::Top::DropCaches) => {
                if !writes || flags & libc::O_ACCMODE == libc::O_RDWR || self.cred().euid != 0 {
                    return Err(Errno::EACCES);
                }
                hostfs::memfd_with(b"", kept | libc::O_WRONLY)?
            }
            _ if writes => return Err(Errno::EACCES),
            _ if flags & libc::O_PATH != 0 => hostfs::memfd_with(b"", kept)?,
            _ => hostfs::memfd_with(&procfs::contents(kernel, node, self.tid())?, kept)?,
        };
        Ok((fd, Some(node)))
    }

    /// What an empty path (with AT_EMPTY_PATH) names: the directory
    /// descriptor's file, or the cwd.
    fn empty_target(&self, dirfd: DirFd) -> Result<Target, Errno> {
        if dirfd == DirFd::CWD {
            let cwd = self.process().cwd.lock().unwrap().clone();
            return self.target_abs(cwd, true);
        }
        Ok(Target::file(self.file(dirfd.fd())?))
    }

    pub(super) fn target(&self, dirfd: DirFd, pathname: Path, follow: bool, empty_ok: bool) -> Result<Target, Errno> {
        let abs = self.abs_path(dirfd, pathname, empty_ok)?;
        if abs.is_empty() {
            return self.empty_target(dirfd);
        }
        self.target_abs(abs, follow)
    }

    /// Whether an absolute guest path names a symbolic link (itself, not
    /// followed); false also when it names nothing.
    pub(super) fn names_symlink(&self, abs: &[u8]) -> bool {
        self.target_abs(abs.to_vec(), false)
            .and_then(|t| stat_target(self, &t))
            .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK)
    }

    fn target_abs(&self, abs: Vec<u8>, follow: bool) -> Result<Target, Errno> {
        match path::special(&abs) {
            // The guest's path is the host's: handed over as read.
            None if self.kernel().root.is_host_root() => {
                Ok(Target::HostPath(CString::new(abs).map_err(|_| Errno::EINVAL)?, follow))
            }
            None if !follow => {
                let (dir, name) = self.kernel().root.parent_of(&abs)?;
                Ok(Target::Entry(dir, name))
            }
            Some(Special::Proc(norm)) => self.proc_target(&norm, follow, names_dir(&abs)),
            _ => Ok(Target::Object(self.open_abs(&abs, libc::O_PATH, 0)?)),
        }
    }

    /// A /proc path's target; `dir` (a trailing slash) follows a final link
    /// and wants a directory.
    fn proc_target(&self, norm: &[u8], follow: bool, dir: bool) -> Result<Target, Errno> {
        let me = self.process().pid;
        let node = match procfs::lookup(self.kernel(), me, norm)? {
            Lookup::Through(mut p) => {
                if dir {
                    p.push(b'/');
                }
                return self.target_abs(p, follow);
            }
            Lookup::Node(n) => n,
        };
        let node = if (follow || dir) && node.kind() == Kind::Link {
            match procfs::follow(self.kernel(), me, node)? {
                Follow::Node(n) => n,
                Follow::Path(mut p) => {
                    if dir {
                        p.push(b'/');
                    }
                    return self.target_abs(p, true);
                }
                Follow::File(f) if dir && f.kind() != FileKind::Directory => return Err(Errno::ENOTDIR),
                Follow::File(f) => return Ok(Target::file(f)),
            }
        } else {
            node
        };
        if dir && node.kind() != Kind::Dir {
            return Err(Errno::ENOTDIR);
        }
        Ok(Target::Proc(node))
    }

    pub(super) fn umask(&self) -> u32 {
        self.process().umask.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Whether a path names a directory whatever its last component is (a
/// trailing slash, "." or ".."): a final link is followed and must lead
/// to one.
fn names_dir(abs: &[u8]) -> bool {
    abs.ends_with(b"/") || matches!(path::last_component(abs), b"." | b"..")
}

/// Device nodes are the host's own (`/dev/null` and its kin are the host's
/// nodes whatever the root holds, and with `--root /` all of /dev is the
/// host's): their attributes and names are not a guest's to change. EPERM,
/// as in an unprivileged container, whose /dev nodes belong to the host.
pub(super) fn refuse_device_node(st: &libc::stat) -> Result<(), Errno> {
    match FileKind::from_mode(st.st_mode) {
        FileKind::CharDevice | FileKind::BlockDevice => Err(Errno::EPERM),
        _ => Ok(()),
    }
}

/// The same for a directory entry, when it exists (a missing one is for
/// the call itself to report).
fn refuse_device_entry(dir: &OwnedFd, name: &CString) -> Result<(), Errno> {
    match hostfs::fstatat(dir.as_fd(), name, libc::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => refuse_device_node(&st),
        Err(_) => Ok(()),
    }
}

/// `/proc/self/fd/N` of a host descriptor: lets calls that cannot take an
/// O_PATH descriptor (chmod, access, link) act on a resolved object.
pub(super) fn proc_fd_path(fd: std::os::fd::BorrowedFd) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap()
}

pub fn sys_openat(
    ctx: &mut Ctx,
    dirfd: DirFd,
    pathname: Path,
    OpenFlags(flags): OpenFlags,
    Mode(mode): Mode,
) -> SysResult {
    do_open(ctx, dirfd, pathname, flags, mode)
}

pub fn sys_open(ctx: &mut Ctx, pathname: Path, OpenFlags(flags): OpenFlags, Mode(mode): Mode) -> SysResult {
    do_open(ctx, DirFd::CWD, pathname, flags, mode)
}

pub fn sys_creat(ctx: &mut Ctx, pathname: Path, Mode(mode): Mode) -> SysResult {
    do_open(ctx, DirFd::CWD, pathname, libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC, mode)
}

fn do_open(ctx: &mut Ctx, dirfd: DirFd, pathname: Path, flags: i32, mode: u32) -> SysResult {
    // Linux's order (do_sys_openat2): the flags (build_open_flags, O_PATH
    // dropping the others first), the path, a free descriptor (EMFILE),
    // then the directory descriptor and the lookup.
    let judged = if flags & libc::O_PATH != 0 { flags & (libc::O_DIRECTORY | libc::O_NOFOLLOW) } else { flags };
    let tmpfile = libc::O_TMPFILE & !libc::O_DIRECTORY;
    if judged & (libc::O_CREAT | libc::O_DIRECTORY) == libc::O_CREAT | libc::O_DIRECTORY
        || (judged & tmpfile != 0 && (judged & libc::O_DIRECTORY == 0 || judged & libc::O_ACCMODE == libc::O_RDONLY))
    {
        return Err(Errno::EINVAL);
    }
    let abs = ctx.abs_path(dirfd, pathname, false);
    if !matches!(abs, Err(Errno::EFAULT | Errno::ENAMETOOLONG | Errno::ENOENT)) && ctx.fd_table_full() {
        return Err(Errno::EMFILE);
    }
    let abs = abs?;
    let mode = mode & 0o7777 & !ctx.umask();
    let writes = flags & libc::O_ACCMODE != libc::O_RDONLY && flags & libc::O_PATH == 0;
    let mut writing = None;
    let (host, node) = if writes {
        // A running program's file is busy (ETXTBSY): looked at before
        // O_TRUNC may empty it. A regular file open for writing cannot be
        // executed meanwhile.
        let (host, node) = ctx.open_abs_node(&abs, flags & !(libc::O_CLOEXEC | libc::O_TRUNC), mode)?;
        let st = hostfs::fstat(host.as_fd())?;
        if st.st_mode & libc::S_IFMT == libc::S_IFREG {
            writing = Some(crate::fs::text_busy::OpenForWriting::new(&st)?);
            if flags & libc::O_TRUNC != 0 {
                super::coherent::resize(ctx, host.as_fd(), || hostfs::ftruncate(host.as_fd(), 0).map(drop))?;
            }
        }
        (host, node)
    } else {
        ctx.open_abs_node(&abs, flags & !libc::O_CLOEXEC, mode)?
    };
    // A terminal (a device: looked at only there, an open of any other file
    // pays no fstat for it) may become the session's.
    let may_take_terminal = flags & (libc::O_NOCTTY | libc::O_PATH) == 0 && abs.starts_with(b"/dev/");
    let mut file = OpenFile::new(host, abs, flags & libc::O_PATH != 0);
    file.writing = writing;
    file.proc = node.map(procfs::ProcOpen::new);
    if may_take_terminal {
        super::file_ops::acquire_at_open(ctx, &file);
    }
    ctx.install_fd(Arc::new(file), flags & libc::O_CLOEXEC != 0)
}

/// A stat call's answer, written by the host straight into the guest's
/// buffer. With a bad buffer the lookup still runs first, so its errors
/// win over EFAULT (as on Linux).
fn stat_into(ctx: &Ctx, t: &Target, buf: u64) -> SysResult {
    let r = match t {
        Target::File(f) => super::file_ops::of(f).fstat(ctx, f, buf).map(drop),
        Target::Proc(node) => ctx.mem().write(buf, &procfs::stat(ctx.kernel(), *node)),
        Target::Object(fd) => ctx
            .mem()
            .with_full_range(buf, std::mem::size_of::<libc::stat>(), true, |out| hostfs::fstat_into(fd.as_fd(), out)),
        t => {
            let (dir, name, flags) = t.at()?;
            ctx.mem().with_full_range(buf, std::mem::size_of::<libc::stat>(), true, |out| {
                hostfs::fstatat_into(dir, &name, flags, out)
            })
        }
    };
    match r {
        Err(Errno::EFAULT) => {
            stat_target(ctx, t)?;
            Err(Errno::EFAULT)
        }
        r => r.map(|()| 0),
    }
}

pub(super) fn stat_target(ctx: &Ctx, t: &Target) -> Result<libc::stat, Errno> {
    if let Target::Proc(node) = t {
        return Ok(procfs::stat(ctx.kernel(), *node));
    }
    match t.object_fd() {
        Some(fd) => hostfs::fstat(fd),
        None => {
            let (dir, name, flags) = t.at()?;
            hostfs::fstatat(dir, &name, flags)
        }
    }
}

/// A struct statx made from a struct stat (nomu's /proc entries), with the
/// fields Linux's proc fills: the basic ones and the mount id.
fn statx_of(st: &libc::stat, mnt_id: u64) -> [u8; 256] {
    const STATX_BASIC_STATS: u32 = 0x7ff;
    let mut b = [0u8; 256];
    let mut put = |at: usize, bytes: &[u8]| b[at..at + bytes.len()].copy_from_slice(bytes);
    put(0, &(STATX_BASIC_STATS | libc::STATX_MNT_ID).to_ne_bytes());
    put(4, &(st.st_blksize as u32).to_ne_bytes());
    put(16, &(st.st_nlink as u32).to_ne_bytes());
    put(20, &st.st_uid.to_ne_bytes());
    put(24, &st.st_gid.to_ne_bytes());
    put(28, &(st.st_mode as u16).to_ne_bytes());
    put(32, &st.st_ino.to_ne_bytes());
    put(40, &(st.st_size as u64).to_ne_bytes());
    put(48, &(st.st_blocks as u64).to_ne_bytes());
    for (at, sec, nsec) in
        [(64, st.st_atime, st.st_atime_nsec), (96, st.st_ctime, st.st_ctime_nsec), (112, st.st_mtime, st.st_mtime_nsec)]
    {
        put(at, &sec.to_ne_bytes());
        put(at + 8, &(nsec as u32).to_ne_bytes());
    }
    put(128, &libc::major(st.st_rdev).to_ne_bytes());
    put(132, &libc::minor(st.st_rdev).to_ne_bytes());
    put(136, &libc::major(st.st_dev).to_ne_bytes());
    put(140, &libc::minor(st.st_dev).to_ne_bytes());
    put(144, &mnt_id.to_ne_bytes());
    b
}

pub fn sys_stat(ctx: &mut Ctx, pathname: Path, UserPtr(buf): UserPtr) -> SysResult {
    stat_into(ctx, &ctx.target(DirFd::CWD, pathname, true, false)?, buf)
}

pub fn sys_lstat(ctx: &mut Ctx, pathname: Path, UserPtr(buf): UserPtr) -> SysResult {
    stat_into(ctx, &ctx.target(DirFd::CWD, pathname, false, false)?, buf)
}

pub fn sys_fstat(ctx: &mut Ctx, fd: Fd, UserPtr(buf): UserPtr) -> SysResult {
    let f = ctx.file(fd)?;
    super::file_ops::of(&f).fstat(ctx, &f, buf)
}

const STATX_RESERVED: u32 = 0x8000_0000;

/// Linux's fstat shortcut for newfstatat and statx: an empty or NULL path
/// with AT_EMPTY_PATH on a descriptor is that descriptor, whatever the
/// other flags (None: the call goes the usual way).
fn empty_path_fd(ctx: &Ctx, dirfd: DirFd, pathname: Path, flags: i32) -> Option<Result<Target, Errno>> {
    if flags & libc::AT_EMPTY_PATH == 0
        || dirfd.0 < 0
        || (!pathname.is_null() && !matches!(ctx.mem().read::<u8>(pathname.0), Ok(0)))
    {
        return None;
    }
    Some(ctx.file(dirfd.fd()).map(Target::file))
}

/// A stat call's target: a NULL path with AT_EMPTY_PATH is an empty one.
fn stat_target_of(ctx: &Ctx, dirfd: DirFd, pathname: Path, flags: i32) -> Result<Target, Errno> {
    let empty_ok = flags & libc::AT_EMPTY_PATH != 0;
    if pathname.is_null() && empty_ok {
        return ctx.empty_target(dirfd);
    }
    ctx.target(dirfd, pathname, flags & libc::AT_SYMLINK_NOFOLLOW == 0, empty_ok)
}

pub fn sys_newfstatat(
    ctx: &mut Ctx,
    dirfd: DirFd,
    pathname: Path,
    UserPtr(buf): UserPtr,
    AtFlags(flags): AtFlags,
) -> SysResult {
    if let Some(t) = empty_path_fd(ctx, dirfd, pathname, flags) {
        return stat_into(ctx, &t?, buf);
    }
    let allowed = libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH | libc::AT_NO_AUTOMOUNT | libc::AT_STATX_SYNC_TYPE;
    if flags & !allowed != 0 {
        return Err(Errno::EINVAL);
    }
    stat_into(ctx, &stat_target_of(ctx, dirfd, pathname, flags)?, buf)
}

pub fn sys_statx(
    ctx: &mut Ctx,
    dirfd: DirFd,
    pathname: Path,
    AtFlags(flags): AtFlags,
    Hex(mask): Hex<u32>,
    UserPtr(buffer): UserPtr,
) -> SysResult {
    let shortcut = empty_path_fd(ctx, dirfd, pathname, flags);
    let allowed = libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH | libc::AT_NO_AUTOMOUNT | libc::AT_STATX_SYNC_TYPE;
    if (shortcut.is_none() && flags & !allowed != 0)
        || flags & libc::AT_STATX_SYNC_TYPE == libc::AT_STATX_SYNC_TYPE
        || mask & STATX_RESERVED != 0
    {
        return Err(Errno::EINVAL);
    }
    let t = match shortcut {
        Some(t) => t?,
        None => stat_target_of(ctx, dirfd, pathname, flags)?,
    };
    let sync = flags & libc::AT_STATX_SYNC_TYPE;
    let buf = match (&t, t.object_fd()) {
        (Target::Proc(node), _) => statx_of(&procfs::stat(ctx.kernel(), *node), procfs::proc_mount_id()),
        (_, Some(fd)) => hostfs::statx(fd, c"", libc::AT_EMPTY_PATH | sync, mask)?,
        (_, None) => {
            let (dir, name, flags) = t.at()?;
            hostfs::statx(dir, &name, flags | sync, mask)?
        }
    };
    ctx.mem().write_bytes(buffer, &buf)?;
    Ok(0)
}

fn do_access(ctx: &mut Ctx, dirfd: DirFd, pathname: Path, mode: i32, flags: i32) -> SysResult {
    if mode & !(libc::R_OK | libc::W_OK | libc::X_OK) != 0
        || flags & !(libc::AT_EACCESS | libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0
    {
        return Err(Errno::EINVAL);
    }
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    let eaccess = flags & libc::AT_EACCESS;
    let t = ctx.target(dirfd, pathname, follow, flags & libc::AT_EMPTY_PATH != 0)?;
    if let Target::Proc(node) = t {
        // access(2) checks with the real ids, faccessat2's AT_EACCESS with
        // the effective ones.
        let cred = if eaccess != 0 { ctx.cred() } else { ctx.cred().for_access() };
        return procfs::may_access(ctx.kernel(), node, mode, &cred).map(|_| 0);
    }
    let (dir, name, at_flags) = t.at()?;
    hostfs::faccessat(dir, &name, mode, eaccess | at_flags).map(|_| 0)
}

pub fn sys_access(ctx: &mut Ctx, pathname: Path, mode: i32) -> SysResult {
    do_access(ctx, DirFd::CWD, pathname, mode, 0)
}

pub fn sys_faccessat(ctx: &mut Ctx, dirfd: DirFd, pathname: Path, mode: i32) -> SysResult {
    do_access(ctx, dirfd, pathname, mode, 0)
}

pub fn sys_faccessat2(ctx: &mut Ctx, dirfd: DirFd, pathname: Path, mode: i32, AtFlags(flags): AtFlags) -> SysResult {
    do_access(ctx, dirfd, pathname, mode, flags)
}

pub fn sys_getcwd(ctx: &mut Ctx, UserPtr(buf): UserPtr, size: usize) -> SysResult {
    let mut cwd = ctx.process().cwd.lock().unwrap().clone();
    cwd.push(0);
    if size < cwd.len() {
        return Err(Errno::ERANGE);
    }
    ctx.mem().write_bytes(buf, &cwd)?;
    Ok(cwd.len() as u64)
}

fn set_cwd_to(ctx: &Ctx, host: &OwnedFd) -> SysResult {
    let st = hostfs::fstat(host.as_fd())?;
    if FileKind::from_mode(st.st_mode) != FileKind::Directory {
        return Err(Errno::ENOTDIR);
    }
    hostfs::faccessat(hostfs::cwd(), &proc_fd_path(host.as_fd()), libc::X_OK, 0)?;
    let path = ctx.kernel().root.guest_path_of(host.as_fd())?;
    *ctx.process().cwd.lock().unwrap() = path;
    Ok(0)
}

/// chdir into one of nomu's /proc directories: the cwd is its path.
fn set_cwd_to_proc(ctx: &Ctx, node: Node) -> SysResult {
    if node.kind() != Kind::Dir {
        return Err(Errno::ENOTDIR);
    }
    procfs::may_access(ctx.kernel(), node, libc::X_OK, &ctx.cred())?;
    *ctx.process().cwd.lock().unwrap() = node.path();
    Ok(0)
}

pub fn sys_chdir(ctx: &mut Ctx, pathname: Path) -> SysResult {
    let abs = ctx.abs_path(DirFd::CWD, pathname, false)?;
    if let Some(Special::Proc(norm)) = path::special(&abs) {
        return match ctx.proc_target(&norm, true, true)? {
            Target::Proc(node) => set_cwd_to_proc(ctx, node),
            Target::Object(fd) => set_cwd_to(ctx, &fd),
            Target::File(f) => set_cwd_to(ctx, &hostfs::dup(f.fd())?),
            Target::HostPath(p, _) => set_cwd_to(ctx, &hostfs::open_host(&p, libc::O_PATH | libc::O_DIRECTORY)?),
            Target::Entry(..) => Err(Errno::ENOTDIR),
        };
    }
    let host = ctx.open_abs(&abs, libc::O_PATH | libc::O_DIRECTORY, 0)?;
    set_cwd_to(ctx, &host)
}

pub fn sys_fchdir(ctx: &mut Ctx, fd: Fd) -> SysResult {
    let f = ctx.file(fd)?;
    if let Some(p) = &f.proc {
        return set_cwd_to_proc(ctx, p.node);
    }
    let host = hostfs::dup(f.fd())?;
    set_cwd_to(ctx, &host)
}

fn entry(ctx: &Ctx, dirfd: DirFd, pathname: Path) -> Result<(OwnedFd, CString), Errno> {
    entry_of(ctx, &ctx.abs_path(dirfd, pathname, false)?)
}

pub(super) fn entry_of(ctx: &Ctx, abs: &[u8]) -> Result<(OwnedFd, CString), Errno> {
    match path::special(abs) {
        Some(Special::Hidden) => Err(Errno::ENOENT),
        // /proc's entries cannot be made, removed or renamed: EPERM for
        // one that exists, ENOENT for a new name (as Linux's proc answers).
        Some(Special::Proc(norm)) => match procfs::lookup(ctx.kernel(), ctx.process().pid, &norm)? {
            Lookup::Through(p) => entry_of(ctx, &p),
            Lookup::Node(_) => Err(Errno::EPERM),
        },
        _ => ctx.kernel().root.parent_of(abs),
    }
}

pub fn sys_mkdirat(ctx: &mut Ctx, dirfd: DirFd, pathname: Path, Mode(mode): Mode) -> SysResult {
    let (dir, name) = entry(ctx, dirfd, pathname)?;
    hostfs::mkdirat(dir.as_fd(), &name, mode & 0o7777 & !ctx.umask()).map(|_| 0)
}

pub fn sys_mkdir(ctx: &mut Ctx, pathname: Path, mode: Mode) -> SysResult {
    sys_mkdirat(ctx, DirFd::CWD, pathname, mode)
}

pub fn sys_unlinkat(ctx: &mut Ctx, dirfd: DirFd, pathname: Path, AtFlags(flags): AtFlags) -> SysResult {
    if flags & !libc::AT_REMOVEDIR != 0 {
        return Err(Errno::EINVAL);
    }
    let abs = ctx.abs_path(dirfd, pathname, false)?;
    let (dir, name) = entry_of(ctx, &abs)?;
    if flags & libc::AT_REMOVEDIR != 0 {
        // Linux's do_rmdir judges the last component once its parent is found.
        match path::last_component(&abs) {
            b"" => return Err(Errno::EBUSY),
            b"." => return Err(Errno::EINVAL),
            b".." => return Err(Errno::ENOTEMPTY),
            _ => {}
        }
    }
    refuse_device_entry(&dir, &name)?;
    hostfs::unlinkat(dir.as_fd(), &name, flags).map(|_| 0)
}

pub fn sys_unlink(ctx: &mut Ctx, pathname: Path) -> SysResult {
    sys_unlinkat(ctx, DirFd::CWD, pathname, AtFlags(0))
}

pub fn sys_rmdir(ctx: &mut Ctx, pathname: Path) -> SysResult {
    sys_unlinkat(ctx, DirFd::CWD, pathname, AtFlags(libc::AT_REMOVEDIR))
}

pub fn sys_renameat2(
    ctx: &mut Ctx,
    olddirfd: DirFd,
    oldpath: Path,
    newdirfd: DirFd,
    newpath: Path,
    Hex(flags): Hex<u32>,
) -> SysResult {
    if flags & !(libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE | libc::RENAME_WHITEOUT) != 0
        || (flags & (libc::RENAME_NOREPLACE | libc::RENAME_WHITEOUT) != 0 && flags & libc::RENAME_EXCHANGE != 0)
    {
        return Err(Errno::EINVAL);
    }
    let (od, on) = entry(ctx, olddirfd, oldpath)?;
    let (nd, nn) = entry(ctx, newdirfd, newpath)?;
    refuse_device_entry(&od, &on)?;
    refuse_device_entry(&nd, &nn)?;
    hostfs::renameat2(od.as_fd(), &on, nd.as_fd(), &nn, flags).map(|_| 0)
}

pub fn sys_renameat(ctx: &mut Ctx, olddirfd: DirFd, oldpath: Path, newdirfd: DirFd, newpath: Path) -> SysResult {
    sys_renameat2(ctx, olddirfd, oldpath, newdirfd, newpath, Hex(0))
}

pub fn sys_rename(ctx: &mut Ctx, oldpath: Path, newpath: Path) -> SysResult {
    sys_renameat2(ctx, DirFd::CWD, oldpath, DirFd::CWD, newpath, Hex(0))
}

pub fn sys_readlinkat(ctx: &mut Ctx, dirfd: DirFd, pathname: Path, OutBuf(buf): OutBuf, bufsiz: i32) -> SysResult {
    if bufsiz <= 0 {
        return Err(Errno::EINVAL);
    }
    let abs = ctx.abs_path(dirfd, pathname, false)?;
    let target = readlink_abs(ctx, &abs)?;
    let n = target.len().min(bufsiz as usize);
    ctx.mem().write_bytes(buf, &target[..n])?;
    Ok(n as u64)
}

fn readlink_abs(ctx: &Ctx, abs: &[u8]) -> Result<Vec<u8>, Errno> {
    let me = ctx.process().pid;
    match path::special(abs) {
        Some(Special::Proc(norm)) => match procfs::lookup(ctx.kernel(), me, &norm)? {
            Lookup::Node(node) => procfs::link_target(ctx.kernel(), me, node),
            Lookup::Through(p) => readlink_abs(ctx, &p),
        },
        // /dev/fd/N is /proc/self/fd/N; /dev/stdin... are links to them.
        Some(Special::GuestFd(n)) if path::normalize(abs).starts_with(b"/dev/fd/") => {
            Ok(procfs::fd_link_text(ctx.kernel(), &*ctx.file(Fd(n)).map_err(|_| Errno::ENOENT)?))
        }
        Some(Special::GuestFd(n)) => Ok(format!("/proc/self/fd/{n}").into_bytes()),
        _ => {
            let (dir, name) = entry_of(ctx, abs)?;
            hostfs::readlinkat(dir.as_fd(), &name)
        }
    }
}

pub fn sys_readlink(ctx: &mut Ctx, pathname: Path, buf: OutBuf, bufsiz: i32) -> SysResult {
    sys_readlinkat(ctx, DirFd::CWD, pathname, buf, bufsiz)
}

pub fn sys_symlinkat(ctx: &mut Ctx, target: Path, newdirfd: DirFd, linkpath: Path) -> SysResult {
    let target = ctx.read_path(target)?;
    if target.is_empty() {
        return Err(Errno::ENOENT);
    }
    let (dir, name) = entry(ctx, newdirfd, linkpath)?;
    hostfs::symlinkat(&CString::new(target).unwrap(), dir.as_fd(), &name).map(|_| 0)
}

pub fn sys_symlink(ctx: &mut Ctx, target: Path, linkpath: Path) -> SysResult {
    sys_symlinkat(ctx, target, DirFd::CWD, linkpath)
}

pub fn sys_linkat(
    ctx: &mut Ctx,
    olddirfd: DirFd,
    oldpath: Path,
    newdirfd: DirFd,
    newpath: Path,
    AtFlags(flags): AtFlags,
) -> SysResult {
    if flags & !(libc::AT_SYMLINK_FOLLOW | libc::AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let follow = flags & libc::AT_SYMLINK_FOLLOW != 0;
    let old = ctx.target(olddirfd, oldpath, follow, flags & libc::AT_EMPTY_PATH != 0)?;
    // Linux looks the old file up whole before it reads the new name.
    let old_st = stat_target(ctx, &old)?;
    let (nd, nn) = entry(ctx, newdirfd, newpath)?;
    if let Target::Proc(_) = old {
        // Another file system's (Linux checks the mounts first).
        return Err(Errno::EXDEV);
    }
    refuse_device_node(&old_st)?;
    let (od, on, at_flags) = old.at()?;
    let link_flags = if at_flags & libc::AT_SYMLINK_NOFOLLOW != 0 { 0 } else { libc::AT_SYMLINK_FOLLOW };
    hostfs::linkat(od, &on, nd.as_fd(), &nn, link_flags).map(|_| 0)
}

pub fn sys_link(ctx: &mut Ctx, oldpath: Path, newpath: Path) -> SysResult {
    sys_linkat(ctx, DirFd::CWD, oldpath, DirFd::CWD, newpath, AtFlags(0))
}

pub fn sys_fchmodat(ctx: &mut Ctx, dirfd: DirFd, pathname: Path, Mode(mode): Mode) -> SysResult {
    let t = ctx.target(dirfd, pathname, true, false)?;
    refuse_device_node(&stat_target(ctx, &t)?)?;
    let (dir, name, _) = t.at()?;
    hostfs::fchmodat(dir, &name, mode & 0o7777).map(|_| 0)
}

pub fn sys_chmod(ctx: &mut Ctx, pathname: Path, mode: Mode) -> SysResult {
    sys_fchmodat(ctx, DirFd::CWD, pathname, mode)
}

pub fn sys_fchmod(ctx: &mut Ctx, fd: Fd, Mode(mode): Mode) -> SysResult {
    let f = ctx.file(fd)?;
    if f.proc.is_some() {
        return Err(Errno::EPERM);
    }
    refuse_device_node(&hostfs::fstat(f.fd())?)?;
    hostfs::fchmod(f.fd(), mode & 0o7777).map(|_| 0)
}

pub fn sys_truncate(ctx: &mut Ctx, pathname: Path, length: i64) -> SysResult {
    if length < 0 {
        return Err(Errno::EINVAL);
    }
    let abs = ctx.abs_path(DirFd::CWD, pathname, false)?;
    let fd = ctx.open_abs(&abs, libc::O_WRONLY, 0)?;
    crate::fs::text_busy::deny_write(&hostfs::fstat(fd.as_fd())?)?;
    super::io::fsize_allows_size(ctx, fd.as_fd(), length as u64)?;
    super::coherent::resize(ctx, fd.as_fd(), || hostfs::ftruncate(fd.as_fd(), length).map(drop)).map(|()| 0)
}

const UTIME_NOW: i64 = (1 << 30) - 1;
const UTIME_OMIT: i64 = (1 << 30) - 2;

pub fn sys_utimensat(
    ctx: &mut Ctx,
    dirfd: DirFd,
    pathname: Path,
    UserPtr(times): UserPtr,
    AtFlags(flags): AtFlags,
) -> SysResult {
    // Linux's order (utimensat, do_utimes, vfs_utimes): the times are read,
    // and two UTIME_OMITs do nothing, checking nothing else; then the
    // flags, the file, and last the nanoseconds.
    let ts: Option<[libc::timespec; 2]> = if times != 0 { Some(ctx.mem().read(times)?) } else { None };
    if ts.is_some_and(|ts| ts.iter().all(|t| t.tv_nsec == UTIME_OMIT)) {
        return Ok(0);
    }
    do_utimes(ctx, dirfd, pathname, ts, flags)
}

/// Linux's do_utimes, for utimensat, utimes and futimesat: the flags, the
/// file, then the nanoseconds (vfs_utimes); /proc files and device nodes
/// are refused.
fn do_utimes(ctx: &Ctx, dirfd: DirFd, pathname: Path, ts: Option<[libc::timespec; 2]>, flags: i32) -> SysResult {
    let nsec_valid = || {
        ts.iter()
            .flatten()
            .all(|t| t.tv_nsec == UTIME_NOW || t.tv_nsec == UTIME_OMIT || (0..1_000_000_000).contains(&t.tv_nsec))
    };
    // A NULL path with a descriptor means the descriptor itself
    // (futimens), which takes no flags.
    if pathname.is_null() && dirfd != DirFd::CWD {
        if flags != 0 {
            return Err(Errno::EINVAL);
        }
        let f = ctx.io_file(dirfd.fd())?;
        if !nsec_valid() {
            return Err(Errno::EINVAL);
        }
        if f.proc.is_some() {
            return Err(Errno::EPERM);
        }
        refuse_device_node(&hostfs::fstat(f.fd())?)?;
        return hostfs::utimensat(f.fd(), None, ts.as_ref(), 0).map(|_| 0);
    }
    if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    let t = ctx.target(dirfd, pathname, follow, flags & libc::AT_EMPTY_PATH != 0)?;
    let st = stat_target(ctx, &t)?;
    if !nsec_valid() {
        return Err(Errno::EINVAL);
    }
    refuse_device_node(&st)?;
    let (dir, name, at_flags) = t.at()?;
    hostfs::utimensat(dir, Some(&name), ts.as_ref(), at_flags).map(|_| 0)
}

/// utimes(2) and futimesat(2) (do_futimesat): the times are read and their
/// microseconds judged (0..1000000: the UTIME_ values are utimensat's
/// only) before do_utimes.
fn do_futimesat(ctx: &Ctx, dirfd: DirFd, pathname: Path, times: u64) -> SysResult {
    let ts = if times != 0 {
        let tv: [libc::timeval; 2] = ctx.mem().read(times)?;
        if tv.iter().any(|t| !(0..1_000_000).contains(&t.tv_usec)) {
            return Err(Errno::EINVAL);
        }
        Some(tv.map(|t| libc::timespec { tv_sec: t.tv_sec, tv_nsec: t.tv_usec * 1000 }))
    } else {
        None
    };
    do_utimes(ctx, dirfd, pathname, ts, 0)
}

pub fn sys_utimes(ctx: &mut Ctx, pathname: Path, UserPtr(times): UserPtr) -> SysResult {
    do_futimesat(ctx, DirFd::CWD, pathname, times)
}

pub fn sys_futimesat(ctx: &mut Ctx, dirfd: DirFd, pathname: Path, UserPtr(times): UserPtr) -> SysResult {
    do_futimesat(ctx, dirfd, pathname, times)
}

pub fn sys_fchownat(
    ctx: &mut Ctx,
    dirfd: DirFd,
    pathname: Path,
    uid: u32,
    gid: u32,
    AtFlags(flags): AtFlags,
) -> SysResult {
    if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    let t = ctx.target(dirfd, pathname, follow, flags & libc::AT_EMPTY_PATH != 0)?;
    refuse_device_node(&stat_target(ctx, &t)?)?;
    let (dir, name, at_flags) = t.at()?;
    hostfs::fchownat(dir, &name, uid, gid, at_flags).map(|_| 0)
}

pub fn sys_chown(ctx: &mut Ctx, pathname: Path, uid: u32, gid: u32) -> SysResult {
    sys_fchownat(ctx, DirFd::CWD, pathname, uid, gid, AtFlags(0))
}

pub fn sys_lchown(ctx: &mut Ctx, pathname: Path, uid: u32, gid: u32) -> SysResult {
    sys_fchownat(ctx, DirFd::CWD, pathname, uid, gid, AtFlags(libc::AT_SYMLINK_NOFOLLOW))
}

pub fn sys_fchown(ctx: &mut Ctx, fd: Fd, uid: u32, gid: u32) -> SysResult {
    let f = ctx.io_file(fd)?;
    // A /proc directory's host descriptor is the host's /proc: its owner
    // is not a guest's to change (as chown of a /proc path, fchmod).
    if f.proc.is_some() {
        return Err(Errno::EPERM);
    }
    refuse_device_node(&hostfs::fstat(f.fd())?)?;
    hostfs::fchown(f.fd(), uid, gid).map(|_| 0)
}

/// mknod: FIFOs, sockets and regular files are made on the host; device
/// nodes are EPERM, as in an unprivileged container (a guest's device
/// node would reach the host's devices past its root).
pub fn sys_mknodat(ctx: &mut Ctx, dirfd: DirFd, pathname: Path, Mode(mode): Mode, dev: u32) -> SysResult {
    let kind = mode & libc::S_IFMT;
    match kind {
        0 | libc::S_IFREG | libc::S_IFCHR | libc::S_IFBLK | libc::S_IFIFO | libc::S_IFSOCK => {}
        libc::S_IFDIR => return Err(Errno::EPERM),
        _ => return Err(Errno::EINVAL),
    }
    let (dir, name) = entry(ctx, dirfd, pathname)?;
    if kind == libc::S_IFCHR || kind == libc::S_IFBLK {
        // What exists is EEXIST first, as the lookup comes before the
        // permission check.
        if hostfs::fstatat(dir.as_fd(), &name, libc::AT_SYMLINK_NOFOLLOW).is_ok() {
            return Err(Errno::EEXIST);
        }
        ctx.note("device nodes cannot be made (as in an unprivileged container)");
        return Err(Errno::EPERM);
    }
    let kind = if kind == 0 { libc::S_IFREG } else { kind };
    hostfs::mknodat(dir.as_fd(), &name, kind | (mode & 0o7777 & !ctx.umask()), dev).map(|_| 0)
}

pub fn sys_mknod(ctx: &mut Ctx, pathname: Path, mode: Mode, dev: u32) -> SysResult {
    sys_mknodat(ctx, DirFd::CWD, pathname, mode, dev)
}

pub fn sys_umask(ctx: &mut Ctx, Mode(mask): Mode) -> SysResult {
    let old = ctx.process().umask.swap(mask & 0o777, std::sync::atomic::Ordering::Relaxed);
    Ok(old as u64)
}

/// A file system's statistics for a target: nomu's /proc answers as the
/// host's /proc mount (whose device it has), anything else as the host's.
fn statfs_of(t: &Target) -> Result<libc::statfs, Errno> {
    match t {
        Target::Proc(_) => hostfs::statfs(c"/proc"),
        Target::File(f) => hostfs::fstatfs(f.fd()),
        Target::Object(fd) => hostfs::fstatfs(fd.as_fd()),
        Target::HostPath(p, _) => hostfs::statfs(p),
        Target::Entry(dir, name) => {
            // One component in a directory inside the root.
            let fd = hostfs::openat2(dir.as_fd(), name, libc::O_PATH | libc::O_NOFOLLOW, 0, 0)?;
            hostfs::fstatfs(fd.as_fd())
        }
    }
}

pub fn sys_statfs(ctx: &mut Ctx, pathname: Path, UserPtr(buf): UserPtr) -> SysResult {
    let t = ctx.target(DirFd::CWD, pathname, true, false)?;
    ctx.mem().write(buf, &statfs_of(&t)?)?;
    Ok(0)
}

pub fn sys_fstatfs(ctx: &mut Ctx, fd: Fd, UserPtr(buf): UserPtr) -> SysResult {
    let t = Target::file(ctx.file(fd)?);
    ctx.mem().write(buf, &statfs_of(&t)?)?;
    Ok(0)
}

/// inotify_init1(2): the host's inotify behind a guest descriptor.
pub fn sys_inotify_init1(ctx: &mut Ctx, Hex(flags): Hex<i32>) -> SysResult {
    if flags & !(libc::IN_CLOEXEC | libc::IN_NONBLOCK) != 0 {
        return Err(Errno::EINVAL);
    }
    let host = crate::host::events::inotify_init1(flags)?;
    let file = OpenFile::new_special(host, "anon_inode:inotify", FileType::Inotify, None);
    ctx.install_fd(Arc::new(file), flags & libc::IN_CLOEXEC != 0)
}

pub fn sys_inotify_init(ctx: &mut Ctx) -> SysResult {
    sys_inotify_init1(ctx, Hex(0))
}

/// Every bit inotify_add_watch knows (Linux's ALL_INOTIFY_BITS).
const ALL_INOTIFY_BITS: u32 = libc::IN_ALL_EVENTS
    | libc::IN_UNMOUNT
    | libc::IN_Q_OVERFLOW
    | libc::IN_IGNORED
    | libc::IN_ONLYDIR
    | libc::IN_DONT_FOLLOW
    | libc::IN_EXCL_UNLINK
    | libc::IN_MASK_CREATE
    | libc::IN_MASK_ADD
    | libc::IN_ISDIR
    | libc::IN_ONESHOT;

/// inotify_add_watch(2): the path is resolved inside the root as any
/// other (following a final symlink unless IN_DONT_FOLLOW), and the host
/// watches what it names, through /proc/self/fd when nomu opened it.
pub fn sys_inotify_add_watch(ctx: &mut Ctx, fd: Fd, pathname: Path, Hex(mask): Hex<u32>) -> SysResult {
    // Linux's order: the mask, the descriptor, then the path.
    if mask & libc::IN_MASK_ADD != 0 && mask & libc::IN_MASK_CREATE != 0 || mask & ALL_INOTIFY_BITS == 0 {
        return Err(Errno::EINVAL);
    }
    let f = ctx.io_file(fd)?;
    if f.file_type() != FileType::Inotify {
        return Err(Errno::EINVAL);
    }
    let follow = mask & libc::IN_DONT_FOLLOW == 0;
    // The target stays open until the host has looked the path up.
    let target = ctx.target(DirFd::CWD, pathname, follow, false)?;
    let (path, mask) = match &target {
        Target::HostPath(p, _) => (p.clone(), mask),
        // The magic link must be followed to reach what nomu opened.
        Target::Object(o) => (proc_fd_path(o.as_fd()), mask & !libc::IN_DONT_FOLLOW),
        Target::File(o) => (proc_fd_path(o.fd()), mask & !libc::IN_DONT_FOLLOW),
        Target::Entry(dir, name) => {
            let mut p = proc_fd_path(dir.as_fd()).into_bytes();
            p.push(b'/');
            p.extend_from_slice(name.as_bytes());
            (CString::new(p).expect("no NUL inside"), mask)
        }
        // nomu's /proc is nomu's own: the host has nothing to watch there.
        Target::Proc(_) => return Err(Errno::EACCES),
    };
    let wd = crate::host::events::inotify_add_watch(f.fd(), &path, mask)?;
    drop(target);
    Ok(wd as u64)
}

pub fn sys_inotify_rm_watch(ctx: &mut Ctx, fd: Fd, wd: i32) -> SysResult {
    let f = ctx.io_file(fd)?;
    if f.file_type() != FileType::Inotify {
        return Err(Errno::EINVAL);
    }
    crate::host::events::inotify_rm_watch(f.fd(), wd).map(|_| 0)
}
