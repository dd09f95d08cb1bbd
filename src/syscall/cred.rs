//! Identity: user and group ids, supplementary groups, capabilities. The
//! rules live in kernel/cred.rs; these read the arguments and keep the
//! calling thread's credentials.

use super::args::UserPtr;
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::kernel::cred::{Cred, NGROUPS_MAX};

impl Ctx<'_, '_> {
    /// The calling thread's credentials.
    pub fn cred(&self) -> Cred {
        self.t.thread.cred()
    }

    /// Replaces the calling thread's credentials (only a thread changes
    /// its own, as on Linux).
    fn commit_cred(&self, new: Cred) {
        *self.t.thread.cred.lock().unwrap() = new;
    }

    fn set_cred(&self, change: impl FnOnce(&Cred) -> Result<Cred, Errno>) -> SysResult {
        let old = self.cred();
        let new = change(&old)?;
        if new.uid != old.uid {
            // flag_nproc_exceeded: counted before the caller joins that user.
            let max = self.process().rlimit(libc::RLIMIT_NPROC).rlim_cur;
            let exceeded = crate::kernel::nproc::exceeded_after_setuid(&self.kernel().tasks, new.uid, max);
            self.t.thread.nproc_exceeded.store(exceeded, std::sync::atomic::Ordering::Relaxed);
        }
        self.commit_cred(new);
        Ok(0)
    }
}

pub fn sys_getuid(ctx: &mut Ctx) -> SysResult {
    Ok(ctx.t.thread.cred.lock().unwrap().uid as u64)
}

pub fn sys_geteuid(ctx: &mut Ctx) -> SysResult {
    Ok(ctx.t.thread.cred.lock().unwrap().euid as u64)
}

pub fn sys_getgid(ctx: &mut Ctx) -> SysResult {
    Ok(ctx.t.thread.cred.lock().unwrap().gid as u64)
}

pub fn sys_getegid(ctx: &mut Ctx) -> SysResult {
    Ok(ctx.t.thread.cred.lock().unwrap().egid as u64)
}

pub fn sys_setuid(ctx: &mut Ctx, uid: u32) -> SysResult {
    ctx.set_cred(|c| c.setuid(uid))
}

pub fn sys_setgid(ctx: &mut Ctx, gid: u32) -> SysResult {
    ctx.set_cred(|c| c.setgid(gid))
}

pub fn sys_setreuid(ctx: &mut Ctx, ruid: u32, euid: u32) -> SysResult {
    ctx.set_cred(|c| c.setreuid(ruid, euid))
}

pub fn sys_setregid(ctx: &mut Ctx, rgid: u32, egid: u32) -> SysResult {
    ctx.set_cred(|c| c.setregid(rgid, egid))
}

pub fn sys_setresuid(ctx: &mut Ctx, ruid: u32, euid: u32, suid: u32) -> SysResult {
    ctx.set_cred(|c| c.setresuid(ruid, euid, suid))
}

pub fn sys_setresgid(ctx: &mut Ctx, rgid: u32, egid: u32, sgid: u32) -> SysResult {
    ctx.set_cred(|c| c.setresgid(rgid, egid, sgid))
}

/// Three ids written one after the other: an EFAULT stops at that one.
fn put_three(ctx: &Ctx, ptrs: [u64; 3], ids: [u32; 3]) -> SysResult {
    for (p, id) in ptrs.into_iter().zip(ids) {
        ctx.mem().write(p, &id)?;
    }
    Ok(0)
}

pub fn sys_getresuid(ctx: &mut Ctx, UserPtr(r): UserPtr, UserPtr(e): UserPtr, UserPtr(s): UserPtr) -> SysResult {
    let c = ctx.cred();
    put_three(ctx, [r, e, s], [c.uid, c.euid, c.suid])
}

pub fn sys_getresgid(ctx: &mut Ctx, UserPtr(r): UserPtr, UserPtr(e): UserPtr, UserPtr(s): UserPtr) -> SysResult {
    let c = ctx.cred();
    put_three(ctx, [r, e, s], [c.gid, c.egid, c.sgid])
}

/// setfsuid(2) answers the old fs uid, whether it changed it or not.
pub fn sys_setfsuid(ctx: &mut Ctx, uid: u32) -> SysResult {
    let c = ctx.cred();
    if let Some(new) = c.setfsuid(uid) {
        ctx.commit_cred(new);
    }
    Ok(c.fsuid as u64)
}

pub fn sys_setfsgid(ctx: &mut Ctx, gid: u32) -> SysResult {
    let c = ctx.cred();
    if let Some(new) = c.setfsgid(gid) {
        ctx.commit_cred(new);
    }
    Ok(c.fsgid as u64)
}

pub fn sys_getgroups(ctx: &mut Ctx, size: i32, UserPtr(list): UserPtr) -> SysResult {
    if size < 0 {
        return Err(Errno::EINVAL);
    }
    let groups = ctx.cred().groups;
    if size != 0 {
        if groups.len() > size as usize {
            return Err(Errno::EINVAL);
        }
        let bytes: Vec<u8> = groups.iter().flat_map(|g| g.to_ne_bytes()).collect();
        ctx.mem().write_bytes(list, &bytes)?;
    }
    Ok(groups.len() as u64)
}

pub fn sys_setgroups(ctx: &mut Ctx, size: i32, UserPtr(list): UserPtr) -> SysResult {
    let c = ctx.cred();
    // Linux asks may_setgroups first, then looks at the size.
    c.setgroups(Vec::new())?;
    if size as u32 as usize > NGROUPS_MAX {
        return Err(Errno::EINVAL);
    }
    let bytes = ctx.mem().read_bytes(list, size as usize * 4)?;
    let groups = bytes.chunks_exact(4).map(|b| u32::from_ne_bytes(b.try_into().unwrap())).collect();
    ctx.commit_cred(c.setgroups(groups)?);
    Ok(0)
}

const LINUX_CAPABILITY_VERSION_1: u32 = 0x1998_0330;
const LINUX_CAPABILITY_VERSION_2: u32 = 0x2007_1026;
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// cap_validate_magic: how many 32-bit words of each set the caller's
/// version has; an unknown version is told the one Linux prefers.
fn cap_words(ctx: &Ctx, header: u64) -> Result<usize, Errno> {
    let version: u32 = ctx.mem().read(header)?;
    match version {
        LINUX_CAPABILITY_VERSION_1 => Ok(1),
        LINUX_CAPABILITY_VERSION_2 | LINUX_CAPABILITY_VERSION_3 => Ok(2),
        _ => {
            ctx.mem().write(header, &LINUX_CAPABILITY_VERSION_3)?;
            Err(Errno::EINVAL)
        }
    }
}

pub fn sys_capget(ctx: &mut Ctx, UserPtr(header): UserPtr, UserPtr(data): UserPtr) -> SysResult {
    let words = cap_words(ctx, header);
    if data == 0 {
        // A version query: no data wanted (an unknown version was told
        // the preferred one).
        return match words {
            Ok(_) | Err(Errno::EINVAL) => Ok(0),
            Err(e) => Err(e),
        };
    }
    let words = words?;
    let pid: i32 = ctx.mem().read(header + 4)?;
    if pid < 0 {
        return Err(Errno::EINVAL);
    }
    let c = if pid == 0 || pid as u32 == ctx.tid() {
        ctx.cred()
    } else {
        ctx.kernel().find_thread(pid as u32).ok_or(Errno::ESRCH)?.cred()
    };
    // struct __user_cap_data_struct: effective, permitted, inheritable,
    // as 32-bit halves, low half first.
    let mut out = Vec::with_capacity(words * 12);
    for w in 0..words {
        for set in [c.cap_effective, c.cap_permitted, c.cap_inheritable] {
            out.extend(((set >> (32 * w)) as u32).to_ne_bytes());
        }
    }
    ctx.mem().write_bytes(data, &out)?;
    Ok(0)
}

pub fn sys_capset(ctx: &mut Ctx, UserPtr(header): UserPtr, UserPtr(data): UserPtr) -> SysResult {
    let words = cap_words(ctx, header)?;
    let pid: i32 = ctx.mem().read(header + 4)?;
    // Only one's own.
    if pid != 0 && pid as u32 != ctx.tid() {
        return Err(Errno::EPERM);
    }
    let bytes = ctx.mem().read_bytes(data, words * 12)?;
    let word = |i: usize| u32::from_ne_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap()) as u64;
    let set = |k: usize| (0..words).fold(0u64, |acc, w| acc | word(w * 3 + k) << (32 * w));
    ctx.set_cred(|c| c.capset(set(0), set(1), set(2)))
}
