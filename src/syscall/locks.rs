//! Record locks and flock(2): POSIX locks in nomu's table (fs::locks),
//! OFD locks and flock passed to the host description behind the guest's.

use super::args::Fd;
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::abi::Flock;
use crate::fs::file::OpenFile;
use crate::fs::locks::{self, Kind, Lock, Outcome, F_RDLCK, F_UNLCK, F_WRLCK};
use crate::host::fs as hostfs;
use crate::kernel::waiter::Wake;
use std::os::fd::OwnedFd;
use std::sync::Arc;

pub const F_GETLK: i32 = 5;
pub const F_SETLK: i32 = 6;
pub const F_SETLKW: i32 = 7;
pub const F_OFD_GETLK: i32 = 36;
pub const F_OFD_SETLK: i32 = 37;
pub const F_OFD_SETLKW: i32 = 38;

/// fcntl's lock commands (Linux's fcntl_getlk and fcntl_setlk).
pub fn record_lock(ctx: &mut Ctx, fd: Fd, cmd: i32, arg: u64) -> SysResult {
    let f = ctx.io_file(fd)?;
    let mut fl: Flock = ctx.mem().read(arg)?;
    let ofd = matches!(cmd, F_OFD_GETLK | F_OFD_SETLK | F_OFD_SETLKW);
    if matches!(cmd, F_GETLK | F_OFD_GETLK) {
        let kind = match fl.l_type {
            F_RDLCK => Kind::Read,
            F_WRLCK => Kind::Write,
            _ => return Err(Errno::EINVAL),
        };
        let (start, end) = locks::range_of(&f, &fl)?;
        if ofd && fl.l_pid != 0 {
            return Err(Errno::EINVAL);
        }
        // An OFD lock's owner is its description: every guest's POSIX lock
        // is another owner's (owner 0 is no process).
        let request = Lock { owner: if ofd { 0 } else { ctx.process().pid }, kind, start, end };
        if let Some(held) = locks::conflict(&f, &request)? {
            locks::report(&mut fl, &held);
        } else if ofd {
            hostfs::fcntl_lock(f.fd(), F_OFD_GETLK, &mut fl)?;
        } else {
            match locks::host_test(&f, &request)? {
                Some(held) => {
                    fl.l_type = held.l_type;
                    fl.l_whence = held.l_whence;
                    fl.l_start = held.l_start;
                    fl.l_len = held.l_len;
                    fl.l_pid = held.l_pid;
                }
                None => fl.l_type = F_UNLCK,
            }
        }
        ctx.mem().write(arg, &fl)?;
        return Ok(0);
    }
    let (start, end) = locks::range_of(&f, &fl)?;
    let kind = match fl.l_type {
        F_RDLCK => Some(Kind::Read),
        F_WRLCK => Some(Kind::Write),
        F_UNLCK => None,
        _ => return Err(Errno::EINVAL),
    };
    match kind {
        Some(Kind::Read) if !f.readable() => return Err(Errno::EBADF),
        Some(Kind::Write) if !f.writable() => return Err(Errno::EBADF),
        _ => {}
    }
    if ofd {
        if fl.l_pid != 0 {
            return Err(Errno::EINVAL);
        }
        return if cmd == F_OFD_SETLKW {
            ctx.t.block_in_host(|| hostfs::fcntl_lock_wait(f.fd(), F_OFD_SETLKW, &mut fl.clone())).map(|_| 0)
        } else {
            hostfs::fcntl_lock(f.fd(), F_OFD_SETLK, &mut fl).map(|_| 0)
        };
    }
    let owner = ctx.process().pid;
    let request = Lock { owner, kind: kind.unwrap_or(Kind::Read), start, end };
    posix_set(ctx, &f, request, kind.is_none(), cmd == F_SETLKW)
}

/// The process no longer waits for a lock once this goes.
struct Waiting(u32);

impl Drop for Waiting {
    fn drop(&mut self) {
        locks::stop_waiting(self.0);
    }
}

type HostBusy = (Arc<OwnedFd>, Kind, u64, u64);

/// F_SETLK and F_SETLKW: a wait for another guest's lock ends when the
/// table changes, one for a host lock in the host (both end on a signal:
/// ERESTARTSYS, which restarts under SA_RESTART as Linux's wait does).
fn posix_set(ctx: &mut Ctx, f: &OpenFile, request: Lock, unlock: bool, wait: bool) -> SysResult {
    let _waiting = wait.then(|| Waiting(request.owner));
    let try_once = || -> Result<Option<Option<HostBusy>>, Errno> {
        Ok(match locks::try_set(f, request, unlock, wait)? {
            Outcome::Done => Some(None),
            Outcome::Blocked => None,
            Outcome::HostBusy { mirror, kind, start, end } => Some(Some((mirror, kind, start, end))),
        })
    };
    loop {
        let busy = match try_once()? {
            Some(None) => return Ok(0),
            _ if !wait => return Err(Errno::EAGAIN),
            Some(Some(busy)) => busy,
            None => match ctx.t.wait_for(Some(&locks::CHANGED), None, Wake::OnSignal, try_once)? {
                Some(None) => return Ok(0),
                Some(Some(busy)) => busy,
                None => continue,
            },
        };
        let (mirror, kind, start, end) = busy;
        ctx.t.block_in_host(|| locks::wait_host(f, &mirror, kind, start, end))?;
    }
}

const LOCK_SH: u32 = 1;
const LOCK_EX: u32 = 2;

/// flock(2) on the host description behind the guest's: it belongs to that
/// description, as Linux's does to the guest's.
pub fn sys_flock(ctx: &mut Ctx, fd: Fd, op: u32) -> SysResult {
    let f = ctx.io_file(fd)?;
    let waits = matches!(op, LOCK_SH | LOCK_EX);
    if waits {
        ctx.t.block_in_host(|| hostfs::flock(f.fd(), op as i32)).map(|_| 0)
    } else {
        // LOCK_NB, LOCK_UN, and what the host refuses (EINVAL).
        hostfs::flock(f.fd(), op as i32).map(|_| 0)
    }
}
