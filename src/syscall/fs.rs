//! Path-based calls: open, stat, directories, links, permissions, cwd.

use super::args::{AtFlags, DirFd, Fd, Hex, Mode, OpenFlags, OutBuf, Path, UserPtr};
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::fs::file::{FileKind, OpenFile};
use crate::fs::path::{self, Special, PATH_MAX};
use crate::fs::procfs::{self, ProcNode};
use crate::host::fs as hostfs;
use std::ffi::CString;
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
}

impl Target {
    /// The (directory, name, AT_ flags) triple a host *at call takes.
    pub(super) fn at(&self) -> (std::os::fd::BorrowedFd<'_>, CString, i32) {
        match self {
            Target::Object(fd) => (hostfs::cwd(), proc_fd_path(fd.as_fd()), 0),
            Target::File(f) => (hostfs::cwd(), proc_fd_path(f.fd()), 0),
            Target::Entry(dir, name) => (dir.as_fd(), name.clone(), libc::AT_SYMLINK_NOFOLLOW),
            Target::HostPath(p, follow) => {
                (hostfs::cwd(), p.clone(), if *follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW })
            }
        }
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
    fn base_dir(&self, dirfd: DirFd) -> Result<Vec<u8>, Errno> {
        if dirfd == DirFd::CWD {
            return Ok(self.process().cwd.lock().unwrap().clone());
        }
        let f = self.file(dirfd.fd())?;
        if f.kind() != FileKind::Directory {
            return Err(Errno::ENOTDIR);
        }
        // nomu's /proc directories are not the host's: their own path.
        if f.proc_dir.is_some() {
            return Ok(path::normalize(&f.path));
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
    fn open_abs(&self, abs: &[u8], flags: i32, mode: u32) -> Result<OwnedFd, Errno> {
        match path::special(abs) {
            Some(Special::HostDevice(dev)) => hostfs::open_host(&CString::new(dev).unwrap(), flags & !libc::O_CREAT),
            Some(Special::GuestFd(n)) => {
                let f = self.file(Fd(n))?;
                let link = CString::new(format!("/proc/self/fd/{}", f.fd().as_raw_fd())).unwrap();
                hostfs::open_host(&link, flags & !(libc::O_CREAT | libc::O_EXCL))
            }
            Some(Special::Hidden) => Err(Errno::ENOENT),
            Some(Special::Proc(p)) => match procfs::resolve(self.kernel(), self.process(), &p)? {
                // A directory nomu lists itself: any host directory serves
                // as the descriptor underneath (for fstat).
                ProcNode::Dir(_) if flags & libc::O_ACCMODE != libc::O_RDONLY => Err(Errno::EISDIR),
                ProcNode::Dir(_) => hostfs::open_host(c"/", libc::O_RDONLY | libc::O_DIRECTORY),
                ProcNode::File(_) if flags & libc::O_ACCMODE != libc::O_RDONLY => Err(Errno::EACCES),
                ProcNode::File(content) => hostfs::memfd_with(&content),
                ProcNode::Link(target) if target.starts_with(b"/") => self.open_abs(&target, flags, mode),
                ProcNode::Link(target) => self.open_abs(&[b"/proc/".as_slice(), &target].concat(), flags, mode),
            },
            None => self.kernel().root.open_path(abs, flags, mode),
        }
    }

    /// Which of nomu's /proc directories `abs` names, if any.
    fn proc_dir(&self, abs: &[u8]) -> Option<Option<u32>> {
        let Some(Special::Proc(p)) = path::special(abs) else { return None };
        let p = match p {
            procfs::ProcPath::SelfLink => procfs::ProcPath::Pid(procfs::Who::Me),
            p => p,
        };
        match procfs::resolve(self.kernel(), self.process(), &p) {
            Ok(ProcNode::Dir(d)) => Some(d),
            _ => None,
        }
    }

    pub(super) fn target(&self, dirfd: DirFd, pathname: Path, follow: bool, empty_ok: bool) -> Result<Target, Errno> {
        let abs = self.abs_path(dirfd, pathname, empty_ok)?;
        if abs.is_empty() {
            if dirfd == DirFd::CWD {
                let cwd = self.process().cwd.lock().unwrap().clone();
                return Ok(Target::Object(self.kernel().root.open_path(&cwd, libc::O_PATH, 0)?));
            }
            return Ok(Target::File(self.file(dirfd.fd())?));
        }
        if path::special(&abs).is_none() && self.kernel().root.is_host_root() {
            return Ok(Target::HostPath(path::cstring(&abs)?, follow));
        }
        if follow || path::special(&abs).is_some() {
            return Ok(Target::Object(self.open_abs(&abs, libc::O_PATH, 0)?));
        }
        let (dir, name) = self.kernel().root.parent_of(&abs)?;
        Ok(Target::Entry(dir, name))
    }

    fn umask(&self) -> u32 {
        self.process().umask.load(std::sync::atomic::Ordering::Relaxed)
    }
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
    let abs = ctx.abs_path(dirfd, pathname, false)?;
    let mode = mode & 0o7777 & !ctx.umask();
    let writes = flags & libc::O_ACCMODE != libc::O_RDONLY && flags & libc::O_PATH == 0;
    let mut writing = None;
    let host = if writes {
        // A running program's file is busy (ETXTBSY): looked at before
        // O_TRUNC may empty it. A regular file open for writing cannot be
        // executed meanwhile.
        let host = ctx.open_abs(&abs, flags & !(libc::O_CLOEXEC | libc::O_TRUNC), mode)?;
        let st = hostfs::fstat(host.as_fd())?;
        if st.st_mode & libc::S_IFMT == libc::S_IFREG {
            writing = Some(crate::fs::text_busy::OpenForWriting::new(&st)?);
            if flags & libc::O_TRUNC != 0 {
                hostfs::ftruncate(host.as_fd(), 0)?;
            }
        }
        host
    } else {
        ctx.open_abs(&abs, flags & !libc::O_CLOEXEC, mode)?
    };
    let mut file = OpenFile::new(host, abs, flags & libc::O_PATH != 0);
    file.writing = writing;
    file.proc_dir = ctx.proc_dir(&file.path);
    ctx.install_fd(Arc::new(file), flags & libc::O_CLOEXEC != 0)
}

/// A stat call's answer, written by the host straight into the guest's
/// buffer. With a bad buffer the lookup still runs first, so its errors
/// win over EFAULT (as on Linux).
fn stat_into(ctx: &Ctx, t: &Target, buf: u64) -> SysResult {
    let r = match t {
        Target::File(f) => super::file_ops::of(f).fstat(ctx, f, buf).map(drop),
        Target::Object(fd) => ctx
            .mem()
            .with_full_range(buf, std::mem::size_of::<libc::stat>(), true, |out| hostfs::fstat_into(fd.as_fd(), out)),
        t => {
            let (dir, name, flags) = t.at();
            ctx.mem().with_full_range(buf, std::mem::size_of::<libc::stat>(), true, |out| {
                hostfs::fstatat_into(dir, &name, flags, out)
            })
        }
    };
    match r {
        Err(Errno::EFAULT) => {
            stat_target(t)?;
            Err(Errno::EFAULT)
        }
        r => r.map(|()| 0),
    }
}

pub(super) fn stat_target(t: &Target) -> Result<libc::stat, Errno> {
    match t.object_fd() {
        Some(fd) => hostfs::fstat(fd),
        None => {
            let (dir, name, flags) = t.at();
            hostfs::fstatat(dir, &name, flags)
        }
    }
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

pub fn sys_newfstatat(
    ctx: &mut Ctx,
    dirfd: DirFd,
    pathname: Path,
    UserPtr(buf): UserPtr,
    AtFlags(flags): AtFlags,
) -> SysResult {
    if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH | libc::AT_NO_AUTOMOUNT) != 0 {
        return Err(Errno::EINVAL);
    }
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    stat_into(ctx, &ctx.target(dirfd, pathname, follow, flags & libc::AT_EMPTY_PATH != 0)?, buf)
}

pub fn sys_statx(
    ctx: &mut Ctx,
    dirfd: DirFd,
    pathname: Path,
    AtFlags(flags): AtFlags,
    Hex(mask): Hex<u32>,
    UserPtr(buffer): UserPtr,
) -> SysResult {
    let allowed = libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH | libc::AT_NO_AUTOMOUNT | libc::AT_STATX_SYNC_TYPE;
    if flags & !allowed != 0 || flags & libc::AT_STATX_SYNC_TYPE == libc::AT_STATX_SYNC_TYPE {
        return Err(Errno::EINVAL);
    }
    if mask & 0x8000_0000 != 0 {
        return Err(Errno::EINVAL); // STATX__RESERVED
    }
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    let t = ctx.target(dirfd, pathname, follow, flags & libc::AT_EMPTY_PATH != 0)?;
    let sync = flags & libc::AT_STATX_SYNC_TYPE;
    let buf = match t.object_fd() {
        Some(fd) => hostfs::statx(fd, c"", libc::AT_EMPTY_PATH | sync, mask)?,
        None => {
            let (dir, name, flags) = t.at();
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
    let (dir, name, at_flags) = t.at();
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

pub fn sys_chdir(ctx: &mut Ctx, pathname: Path) -> SysResult {
    let abs = ctx.abs_path(DirFd::CWD, pathname, false)?;
    if ctx.proc_dir(&abs).is_some() {
        *ctx.process().cwd.lock().unwrap() = path::normalize(&abs);
        return Ok(0);
    }
    let host = ctx.open_abs(&abs, libc::O_PATH | libc::O_DIRECTORY, 0)?;
    set_cwd_to(ctx, &host)
}

pub fn sys_fchdir(ctx: &mut Ctx, fd: Fd) -> SysResult {
    let f = ctx.file(fd)?;
    if f.proc_dir.is_some() {
        *ctx.process().cwd.lock().unwrap() = path::normalize(&f.path);
        return Ok(0);
    }
    let host = hostfs::dup(f.fd())?;
    set_cwd_to(ctx, &host)
}

fn entry(ctx: &Ctx, dirfd: DirFd, pathname: Path) -> Result<(OwnedFd, CString), Errno> {
    entry_of(ctx, &ctx.abs_path(dirfd, pathname, false)?)
}

fn entry_of(ctx: &Ctx, abs: &[u8]) -> Result<(OwnedFd, CString), Errno> {
    if matches!(path::special(abs), Some(Special::Hidden)) {
        return Err(Errno::ENOENT);
    }
    ctx.kernel().root.parent_of(abs)
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
    if flags & !(libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE | libc::RENAME_WHITEOUT) != 0 {
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
    let target = if let Some(Special::Proc(p)) = path::special(&abs) {
        match procfs::resolve(ctx.kernel(), ctx.process(), &p)? {
            ProcNode::Link(t) => t,
            _ => return Err(Errno::EINVAL),
        }
    } else {
        let (dir, name) = entry(ctx, dirfd, pathname)?;
        hostfs::readlinkat(dir.as_fd(), &name)?
    };
    let n = target.len().min(bufsiz as usize);
    ctx.mem().write_bytes(buf, &target[..n])?;
    Ok(n as u64)
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
    let (nd, nn) = entry(ctx, newdirfd, newpath)?;
    refuse_device_node(&stat_target(&old)?)?;
    let (od, on, at_flags) = old.at();
    let link_flags = if at_flags & libc::AT_SYMLINK_NOFOLLOW != 0 { 0 } else { libc::AT_SYMLINK_FOLLOW };
    hostfs::linkat(od, &on, nd.as_fd(), &nn, link_flags).map(|_| 0)
}

pub fn sys_link(ctx: &mut Ctx, oldpath: Path, newpath: Path) -> SysResult {
    sys_linkat(ctx, DirFd::CWD, oldpath, DirFd::CWD, newpath, AtFlags(0))
}

pub fn sys_fchmodat(ctx: &mut Ctx, dirfd: DirFd, pathname: Path, Mode(mode): Mode) -> SysResult {
    let t = ctx.target(dirfd, pathname, true, false)?;
    refuse_device_node(&stat_target(&t)?)?;
    let (dir, name, _) = t.at();
    hostfs::fchmodat(dir, &name, mode & 0o7777).map(|_| 0)
}

pub fn sys_chmod(ctx: &mut Ctx, pathname: Path, mode: Mode) -> SysResult {
    sys_fchmodat(ctx, DirFd::CWD, pathname, mode)
}

pub fn sys_fchmod(ctx: &mut Ctx, fd: Fd, Mode(mode): Mode) -> SysResult {
    let f = ctx.file(fd)?;
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
    hostfs::ftruncate(fd.as_fd(), length).map(|_| 0)
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
    if flags & !(libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let ts = if times != 0 {
        let ts: [libc::timespec; 2] = ctx.mem().read(times)?;
        for t in &ts {
            if t.tv_nsec != UTIME_NOW && t.tv_nsec != UTIME_OMIT && !(0..1_000_000_000).contains(&t.tv_nsec) {
                return Err(Errno::EINVAL);
            }
        }
        Some(ts)
    } else {
        None
    };
    do_utimes(ctx, dirfd, pathname, ts, flags)
}

fn do_utimes(ctx: &Ctx, dirfd: DirFd, pathname: Path, ts: Option<[libc::timespec; 2]>, flags: i32) -> SysResult {
    // A NULL path means the descriptor itself (futimens).
    if pathname.is_null() {
        let f = ctx.file(dirfd.fd())?;
        refuse_device_node(&hostfs::fstat(f.fd())?)?;
        return hostfs::utimensat(f.fd(), None, ts.as_ref(), 0).map(|_| 0);
    }
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    let t = ctx.target(dirfd, pathname, follow, flags & libc::AT_EMPTY_PATH != 0)?;
    refuse_device_node(&stat_target(&t)?)?;
    let (dir, name, at_flags) = t.at();
    hostfs::utimensat(dir, Some(&name), ts.as_ref(), at_flags).map(|_| 0)
}

/// utimes(2) and futimesat(2): microseconds, 0..1000000 (the UTIME_
/// values are utimensat's only).
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
    if pathname.is_null() && dirfd == DirFd::CWD {
        return Err(Errno::EFAULT);
    }
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
    refuse_device_node(&stat_target(&t)?)?;
    let (dir, name, at_flags) = t.at();
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
    refuse_device_node(&hostfs::fstat(f.fd())?)?;
    hostfs::fchown(f.fd(), uid, gid).map(|_| 0)
}

const PROC_SUPER_MAGIC: i64 = 0x9fa0;
/// ST_VALID, ST_NOSUID, ST_NODEV, ST_NOEXEC, ST_RELATIME: /proc's usual mount.
const PROC_MOUNT_FLAGS: i64 = 0x20 | 0x2 | 0x4 | 0x8 | 0x1000;

impl Ctx<'_, '_> {
    /// Whether `abs` is a directory or file of nomu's own /proc (not a
    /// link out of it, such as /proc/self/exe).
    fn is_proc_node(&self, abs: &[u8]) -> bool {
        if self.proc_dir(abs).is_some() {
            return true;
        }
        match path::special(abs) {
            Some(Special::Proc(p)) => {
                matches!(procfs::resolve(self.kernel(), self.process(), &p), Ok(ProcNode::File(_)))
            }
            _ => false,
        }
    }
}

/// What statfs says of nomu's /proc: a proc file system, empty.
fn proc_statfs(ctx: &Ctx, buf: u64) -> SysResult {
    // struct statfs: type, bsize, blocks, bfree, bavail, files, ffree,
    // fsid, namelen, frsize, flags, spare[4].
    let mut st = [0i64; 15];
    st[0] = PROC_SUPER_MAGIC;
    st[1] = 4096;
    st[8] = 255;
    st[9] = 4096;
    st[10] = PROC_MOUNT_FLAGS;
    const _: () = assert!(std::mem::size_of::<[i64; 15]>() == std::mem::size_of::<libc::statfs>());
    ctx.mem().write(buf, &st)?;
    Ok(0)
}

/// statfs of what a path names: the host's answer for the file system it
/// lies on (nomu's /proc answers for itself).
pub fn sys_statfs(ctx: &mut Ctx, pathname: Path, UserPtr(buf): UserPtr) -> SysResult {
    let t = ctx.target(DirFd::CWD, pathname, true, false)?;
    if ctx.is_proc_node(&ctx.abs_path(DirFd::CWD, pathname, false)?) {
        return proc_statfs(ctx, buf);
    }
    let size = std::mem::size_of::<libc::statfs>();
    ctx.mem().with_full_range(buf, size, true, |out| match &t {
        Target::HostPath(p, _) => hostfs::statfs_into(p, out),
        t => match t.object_fd() {
            Some(fd) => hostfs::fstatfs_into(fd, out),
            // A final symlink is followed: never an unfollowed entry.
            None => Err(Errno::EINVAL),
        },
    })?;
    Ok(0)
}

pub fn sys_fstatfs(ctx: &mut Ctx, fd: Fd, UserPtr(buf): UserPtr) -> SysResult {
    let f = ctx.file(fd)?;
    if ctx.is_proc_node(&f.path) {
        return proc_statfs(ctx, buf);
    }
    let size = std::mem::size_of::<libc::statfs>();
    ctx.mem().with_full_range(buf, size, true, |out| hostfs::fstatfs_into(f.fd(), out))?;
    Ok(0)
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
