//! Extended attributes, passed to the host for files inside the root. As
//! Linux does, the name and value are read before the path is looked up,
//! and values go through a buffer of nomu's (at most XATTR_SIZE_MAX), so a
//! bad guest buffer is EFAULT only for the bytes the call returns.

use super::args::{DirFd, Fd, Path, UserPtr};
use super::fs::{refuse_device_node, stat_target, Target};
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::host::fs::{self as hostfs, XattrOn};
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd};

const XATTR_NAME_MAX: usize = 255;
const XATTR_SIZE_MAX: usize = 65536;
const XATTR_LIST_MAX: usize = 65536;
const XATTR_CREATE: i32 = 1;
const XATTR_REPLACE: i32 = 2;

/// import_xattr_name: empty or longer than XATTR_NAME_MAX is ERANGE.
fn read_name(ctx: &Ctx, name: u64) -> Result<CString, Errno> {
    match ctx.mem().read_cstring(name, XATTR_NAME_MAX) {
        Ok(n) if n.is_empty() => Err(Errno::ERANGE),
        Ok(n) => Ok(CString::new(n).unwrap()),
        Err(Errno::ENAMETOOLONG) => Err(Errno::ERANGE),
        Err(e) => Err(e),
    }
}

/// The host path of a resolved target, and whether its last component is
/// followed.
fn host_path(t: &Target) -> (CString, bool) {
    match t {
        Target::HostPath(p, follow) => (p.clone(), *follow),
        Target::Entry(dir, name) => {
            let mut p = format!("/proc/self/fd/{}/", dir.as_raw_fd()).into_bytes();
            p.extend_from_slice(name.as_bytes());
            (CString::new(p).unwrap(), false)
        }
        // Through the magic link to the object itself.
        t => (t.at().1, true),
    }
}

/// Runs `call` on what `pathname` names (following a final symlink or
/// not); `changes` refuses device nodes.
fn on_path<T>(
    ctx: &Ctx,
    pathname: Path,
    follow: bool,
    changes: bool,
    call: impl FnOnce(&XattrOn) -> Result<T, Errno>,
) -> Result<T, Errno> {
    let t = ctx.target(DirFd::CWD, pathname, follow, false)?;
    if changes {
        refuse_device_node(&stat_target(&t)?)?;
    }
    let (p, follow) = host_path(&t);
    call(&XattrOn::Path(&p, follow))
}

fn on_fd<T>(ctx: &Ctx, fd: Fd, changes: bool, call: impl FnOnce(&XattrOn) -> Result<T, Errno>) -> Result<T, Errno> {
    let f = ctx.file(fd)?;
    if changes {
        refuse_device_node(&hostfs::fstat(f.fd())?)?;
    }
    call(&XattrOn::Fd(f.fd().as_fd()))
}

/// Where an xattr call acts: a path (followed or not) or a descriptor.
enum On {
    Path(Path, bool),
    Fd(Fd),
}

fn run<T>(ctx: &Ctx, on: On, changes: bool, call: impl FnOnce(&XattrOn) -> Result<T, Errno>) -> Result<T, Errno> {
    match on {
        On::Path(p, follow) => on_path(ctx, p, follow, changes, call),
        On::Fd(fd) => on_fd(ctx, fd, changes, call),
    }
}

fn do_getxattr(ctx: &Ctx, on: On, name: u64, value: u64, size: usize) -> SysResult {
    let name = read_name(ctx, name)?;
    let mut buf = vec![0u8; size.min(XATTR_SIZE_MAX)];
    let n = run(ctx, on, false, |x| hostfs::getxattr(x, &name, &mut buf))?;
    if !buf.is_empty() {
        ctx.mem().write_bytes(value, &buf[..n])?;
    }
    Ok(n as u64)
}

fn do_setxattr(ctx: &Ctx, on: On, name: u64, value: u64, size: usize, flags: i32) -> SysResult {
    if flags & !(XATTR_CREATE | XATTR_REPLACE) != 0 {
        return Err(Errno::EINVAL);
    }
    let name = read_name(ctx, name)?;
    if size > XATTR_SIZE_MAX {
        return Err(Errno::E2BIG);
    }
    let value = ctx.mem().read_bytes(value, size)?;
    run(ctx, on, true, |x| hostfs::setxattr(x, &name, &value, flags)).map(|()| 0)
}

fn do_listxattr(ctx: &Ctx, on: On, list: u64, size: usize) -> SysResult {
    let mut buf = vec![0u8; size.min(XATTR_LIST_MAX)];
    let n = run(ctx, on, false, |x| hostfs::listxattr(x, &mut buf))?;
    if !buf.is_empty() {
        ctx.mem().write_bytes(list, &buf[..n])?;
    }
    Ok(n as u64)
}

fn do_removexattr(ctx: &Ctx, on: On, name: u64) -> SysResult {
    let name = read_name(ctx, name)?;
    run(ctx, on, true, |x| hostfs::removexattr(x, &name)).map(|()| 0)
}

pub fn sys_getxattr(
    ctx: &mut Ctx,
    path: Path,
    UserPtr(name): UserPtr,
    UserPtr(value): UserPtr,
    size: usize,
) -> SysResult {
    do_getxattr(ctx, On::Path(path, true), name, value, size)
}

pub fn sys_lgetxattr(
    ctx: &mut Ctx,
    path: Path,
    UserPtr(name): UserPtr,
    UserPtr(value): UserPtr,
    size: usize,
) -> SysResult {
    do_getxattr(ctx, On::Path(path, false), name, value, size)
}

pub fn sys_fgetxattr(ctx: &mut Ctx, fd: Fd, UserPtr(name): UserPtr, UserPtr(value): UserPtr, size: usize) -> SysResult {
    do_getxattr(ctx, On::Fd(fd), name, value, size)
}

pub fn sys_setxattr(
    ctx: &mut Ctx,
    path: Path,
    UserPtr(name): UserPtr,
    UserPtr(value): UserPtr,
    size: usize,
    flags: i32,
) -> SysResult {
    do_setxattr(ctx, On::Path(path, true), name, value, size, flags)
}

pub fn sys_lsetxattr(
    ctx: &mut Ctx,
    path: Path,
    UserPtr(name): UserPtr,
    UserPtr(value): UserPtr,
    size: usize,
    flags: i32,
) -> SysResult {
    do_setxattr(ctx, On::Path(path, false), name, value, size, flags)
}

pub fn sys_fsetxattr(
    ctx: &mut Ctx,
    fd: Fd,
    UserPtr(name): UserPtr,
    UserPtr(value): UserPtr,
    size: usize,
    flags: i32,
) -> SysResult {
    do_setxattr(ctx, On::Fd(fd), name, value, size, flags)
}

pub fn sys_listxattr(ctx: &mut Ctx, path: Path, UserPtr(list): UserPtr, size: usize) -> SysResult {
    do_listxattr(ctx, On::Path(path, true), list, size)
}

pub fn sys_llistxattr(ctx: &mut Ctx, path: Path, UserPtr(list): UserPtr, size: usize) -> SysResult {
    do_listxattr(ctx, On::Path(path, false), list, size)
}

pub fn sys_flistxattr(ctx: &mut Ctx, fd: Fd, UserPtr(list): UserPtr, size: usize) -> SysResult {
    do_listxattr(ctx, On::Fd(fd), list, size)
}

pub fn sys_removexattr(ctx: &mut Ctx, path: Path, UserPtr(name): UserPtr) -> SysResult {
    do_removexattr(ctx, On::Path(path, true), name)
}

pub fn sys_lremovexattr(ctx: &mut Ctx, path: Path, UserPtr(name): UserPtr) -> SysResult {
    do_removexattr(ctx, On::Path(path, false), name)
}

pub fn sys_fremovexattr(ctx: &mut Ctx, fd: Fd, UserPtr(name): UserPtr) -> SysResult {
    do_removexattr(ctx, On::Fd(fd), name)
}
