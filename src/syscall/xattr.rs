//! Extended attributes, passed to the host for files inside the root. As
//! Linux does, the name and value are read before the path is looked up,
//! and values go through a buffer of nomu's (at most XATTR_SIZE_MAX), so a
//! bad guest buffer is EFAULT only for the bytes the call returns. nomu's
//! /proc has none, as Linux's proc (procfs::xattr answers for it); device
//! nodes are refused a change (EPERM), as chmod is.

use super::args::{DirFd, Fd, InBuf, OutBuf, Path};
use super::fs::{proc_fd_path, refuse_device_node, stat_target, Target};
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::fs::procfs::{self, Node};
use crate::host::fs::{self as hostfs, XattrOn};
use std::ffi::CString;
use std::os::fd::AsFd;

/// Linux's XATTR_NAME_MAX, XATTR_SIZE_MAX and XATTR_LIST_MAX.
const XATTR_NAME_MAX: usize = 255;
const XATTR_SIZE_MAX: usize = 65536;
const XATTR_LIST_MAX: usize = 65536;
const XATTR_CREATE: i32 = 1;
const XATTR_REPLACE: i32 = 2;

/// import_xattr_name: empty or longer than XATTR_NAME_MAX is ERANGE.
fn read_name(ctx: &Ctx, name: Path) -> Result<CString, Errno> {
    match ctx.mem().read_cstring(name.0, XATTR_NAME_MAX) {
        Ok(n) if n.is_empty() => Err(Errno::ERANGE),
        Ok(n) => Ok(CString::new(n).unwrap()),
        Err(Errno::ENAMETOOLONG) => Err(Errno::ERANGE),
        Err(e) => Err(e),
    }
}

/// The host path of a resolved target (the xattr calls take no directory
/// descriptor), and whether its last component is followed.
fn host_path(t: &Target) -> Result<(CString, bool), Errno> {
    Ok(match t {
        Target::HostPath(p, follow) => (p.clone(), *follow),
        Target::Entry(dir, name) => {
            let mut p = proc_fd_path(dir.as_fd()).into_bytes();
            p.push(b'/');
            p.extend_from_slice(name.as_bytes());
            (CString::new(p).unwrap(), false)
        }
        // Through the magic link to the object itself.
        t => (t.at()?.1.into_owned(), true),
    })
}

/// What a call acts on, once its name (and value) are read.
enum On {
    Path(Path, bool),
    Fd(Fd),
}

/// Runs `host` on the host's file `on` names, for the attribute `name`
/// (None: a list); `changes` refuses device nodes. A /proc entry answers
/// as Linux's proc.
fn run(
    ctx: &Ctx,
    on: On,
    name: Option<&CString>,
    changes: bool,
    host: impl FnOnce(&XattrOn) -> Result<u64, Errno>,
) -> SysResult {
    let proc = |node: Node| {
        let name = name.map(|n| n.as_bytes());
        procfs::xattr(ctx.kernel(), node, name, changes, &ctx.cred()).map(|n| n as u64)
    };
    match on {
        On::Path(p, follow) => {
            let t = ctx.target(DirFd::CWD, p, follow, false)?;
            if let Target::Proc(node) = t {
                return proc(node);
            }
            if changes {
                refuse_device_node(&stat_target(ctx, &t)?)?;
            }
            let (path, follow) = host_path(&t)?;
            host(&XattrOn::Path(&path, follow))
        }
        On::Fd(fd) => {
            // An O_PATH descriptor is EBADF (fdget).
            let f = ctx.io_file(fd)?;
            if let Some(p) = &f.proc {
                return proc(p.node);
            }
            if changes {
                refuse_device_node(&hostfs::fstat(f.fd())?)?;
            }
            host(&XattrOn::Fd(f.fd()))
        }
    }
}

fn do_getxattr(ctx: &Ctx, on: On, name: Path, value: u64, size: usize) -> SysResult {
    let name = read_name(ctx, name)?;
    let mut buf = vec![0u8; size.min(XATTR_SIZE_MAX)];
    let n = run(ctx, on, Some(&name), false, |x| hostfs::getxattr(x, &name, &mut buf).map(|n| n as u64))?;
    if !buf.is_empty() {
        ctx.mem().write_bytes(value, &buf[..n as usize])?;
    }
    Ok(n)
}

fn do_setxattr(ctx: &Ctx, on: On, name: Path, value: u64, size: usize, flags: i32) -> SysResult {
    if flags & !(XATTR_CREATE | XATTR_REPLACE) != 0 {
        return Err(Errno::EINVAL);
    }
    let name = read_name(ctx, name)?;
    if size > XATTR_SIZE_MAX {
        return Err(Errno::E2BIG);
    }
    let value = ctx.mem().read_bytes(value, size)?;
    run(ctx, on, Some(&name), true, |x| hostfs::setxattr(x, &name, &value, flags).map(|()| 0))
}

fn do_listxattr(ctx: &Ctx, on: On, list: u64, size: usize) -> SysResult {
    let mut buf = vec![0u8; size.min(XATTR_LIST_MAX)];
    let n = run(ctx, on, None, false, |x| hostfs::listxattr(x, &mut buf).map(|n| n as u64))?;
    if !buf.is_empty() {
        ctx.mem().write_bytes(list, &buf[..n as usize])?;
    }
    Ok(n)
}

fn do_removexattr(ctx: &Ctx, on: On, name: Path) -> SysResult {
    let name = read_name(ctx, name)?;
    run(ctx, on, Some(&name), true, |x| hostfs::removexattr(x, &name).map(|()| 0))
}

pub fn sys_getxattr(ctx: &mut Ctx, path: Path, name: Path, OutBuf(value): OutBuf, size: usize) -> SysResult {
    do_getxattr(ctx, On::Path(path, true), name, value, size)
}

pub fn sys_lgetxattr(ctx: &mut Ctx, path: Path, name: Path, OutBuf(value): OutBuf, size: usize) -> SysResult {
    do_getxattr(ctx, On::Path(path, false), name, value, size)
}

pub fn sys_fgetxattr(ctx: &mut Ctx, fd: Fd, name: Path, OutBuf(value): OutBuf, size: usize) -> SysResult {
    do_getxattr(ctx, On::Fd(fd), name, value, size)
}

pub fn sys_setxattr(
    ctx: &mut Ctx,
    path: Path,
    name: Path,
    InBuf(value): InBuf<3>,
    size: usize,
    flags: i32,
) -> SysResult {
    do_setxattr(ctx, On::Path(path, true), name, value, size, flags)
}

pub fn sys_lsetxattr(
    ctx: &mut Ctx,
    path: Path,
    name: Path,
    InBuf(value): InBuf<3>,
    size: usize,
    flags: i32,
) -> SysResult {
    do_setxattr(ctx, On::Path(path, false), name, value, size, flags)
}

pub fn sys_fsetxattr(ctx: &mut Ctx, fd: Fd, name: Path, InBuf(value): InBuf<3>, size: usize, flags: i32) -> SysResult {
    do_setxattr(ctx, On::Fd(fd), name, value, size, flags)
}

pub fn sys_listxattr(ctx: &mut Ctx, path: Path, OutBuf(list): OutBuf, size: usize) -> SysResult {
    do_listxattr(ctx, On::Path(path, true), list, size)
}

pub fn sys_llistxattr(ctx: &mut Ctx, path: Path, OutBuf(list): OutBuf, size: usize) -> SysResult {
    do_listxattr(ctx, On::Path(path, false), list, size)
}

pub fn sys_flistxattr(ctx: &mut Ctx, fd: Fd, OutBuf(list): OutBuf, size: usize) -> SysResult {
    do_listxattr(ctx, On::Fd(fd), list, size)
}

pub fn sys_removexattr(ctx: &mut Ctx, path: Path, name: Path) -> SysResult {
    do_removexattr(ctx, On::Path(path, true), name)
}

pub fn sys_lremovexattr(ctx: &mut Ctx, path: Path, name: Path) -> SysResult {
    do_removexattr(ctx, On::Path(path, false), name)
}

pub fn sys_fremovexattr(ctx: &mut Ctx, fd: Fd, name: Path) -> SysResult {
    do_removexattr(ctx, On::Fd(fd), name)
}
