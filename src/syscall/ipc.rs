//! System V IPC calls: message queues, semaphores and shared memory
//! (src/kernel/ipc keeps the objects). Arguments are checked, and guest
//! memory read and written, in Linux's order (ipc/msg.c, sem.c, shm.c).

use super::args::{Hex, UserPtr};
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::kernel::ipc::msg::{Msg, MSGMAX, MSG_COPY, MSG_EXCEPT};
use crate::kernel::ipc::sem::{GetOne, SemBuf, SEMOPM};
use crate::kernel::ipc::{IPC_INFO, IPC_NOWAIT, IPC_RMID, IPC_SET, IPC_STAT, S_IWUGO};
use crate::mm::space::{Vma, VmaKind};

const MSG_STAT: i32 = 11;
const MSG_INFO: i32 = 12;
const MSG_STAT_ANY: i32 = 13;

const GETPID: i32 = 11;
const GETVAL: i32 = 12;
const GETALL: i32 = 13;
const GETNCNT: i32 = 14;
const GETZCNT: i32 = 15;
const SETVAL: i32 = 16;
const SETALL: i32 = 17;
const SEM_STAT: i32 = 18;
const SEM_INFO: i32 = 19;
const SEM_STAT_ANY: i32 = 20;

const SHM_LOCK: i32 = 11;
const SHM_UNLOCK: i32 = 12;
const SHM_STAT: i32 = 13;
const SHM_INFO: i32 = 14;
const SHM_STAT_ANY: i32 = 15;

/// sizeof(struct msqid64_ds), semid64_ds, shmid64_ds.
const MSQID_DS: usize = 120;
const SEMID_DS: usize = 104;
const SHMID_DS: usize = 112;

fn pid(ctx: &Ctx) -> u32 {
    ctx.process().pid
}

pub fn sys_msgget(ctx: &mut Ctx, key: i32, Hex(msgflg): Hex<i32>) -> SysResult {
    let cred = ctx.t.thread.cred();
    ctx.kernel().ipc.msg.get(key, msgflg, &cred).map(|id| id as u64)
}

pub fn sys_msgsnd(ctx: &mut Ctx, msqid: i32, UserPtr(msgp): UserPtr, msgsz: usize, Hex(msgflg): Hex<i32>) -> SysResult {
    let mtype: i64 = ctx.mem().read(msgp)?;
    if msgsz > MSGMAX || msqid < 0 {
        return Err(Errno::EINVAL);
    }
    if mtype < 1 {
        return Err(Errno::EINVAL);
    }
    let text = ctx.mem().read_bytes(msgp.wrapping_add(8), msgsz)?;
    let pid = pid(ctx);
    ctx.kernel().ipc.msg.send(ctx.t, msqid, Msg { mtype, text }, msgflg, pid)?;
    Ok(0)
}

pub fn sys_msgrcv(
    ctx: &mut Ctx,
    msqid: i32,
    UserPtr(msgp): UserPtr,
    msgsz: usize,
    msgtyp: i64,
    Hex(msgflg): Hex<i32>,
) -> SysResult {
    if msqid < 0 || (msgsz as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    if msgflg & MSG_COPY != 0 && (msgflg & MSG_EXCEPT != 0 || msgflg & IPC_NOWAIT == 0) {
        return Err(Errno::EINVAL);
    }
    let pid = pid(ctx);
    let msg = ctx.kernel().ipc.msg.receive(ctx.t, msqid, msgsz, msgtyp, msgflg, pid)?;
    // Taken off the queue already: a bad buffer loses it, as on Linux.
    let n = msgsz.min(msg.text.len());
    ctx.mem().write(msgp, &msg.mtype)?;
    ctx.mem().write_bytes(msgp.wrapping_add(8), &msg.text[..n])?;
    Ok(n as u64)
}

pub fn sys_msgctl(ctx: &mut Ctx, msqid: i32, cmd: i32, UserPtr(buf): UserPtr) -> SysResult {
    if msqid < 0 || cmd < 0 {
        return Err(Errno::EINVAL);
    }
    let cred = ctx.t.thread.cred();
    let queues = &ctx.kernel().ipc.msg;
    match cmd {
        IPC_INFO | MSG_INFO => {
            let (info, max) = queues.info(cmd == MSG_INFO);
            ctx.mem().write_bytes(buf, &info)?;
            Ok(max)
        }
        IPC_STAT | MSG_STAT | MSG_STAT_ANY => {
            let (id, ds) = queues.stat(msqid, cmd != IPC_STAT, cmd == MSG_STAT_ANY, &cred)?;
            ctx.mem().write_bytes(buf, &ds)?;
            Ok(if cmd == IPC_STAT { 0 } else { id as u64 })
        }
        IPC_SET => {
            let ds = ctx.mem().read_bytes(buf, MSQID_DS)?;
            queues.set(msqid, &ds, &cred).map(|()| 0)
        }
        IPC_RMID => queues.remove(msqid, &cred).map(|()| 0),
        _ => Err(Errno::EINVAL),
    }
}

pub fn sys_semget(ctx: &mut Ctx, key: i32, nsems: i32, Hex(semflg): Hex<i32>) -> SysResult {
    let cred = ctx.t.thread.cred();
    ctx.kernel().ipc.sem.get(key, nsems, semflg, &cred).map(|id| id as u64)
}

pub fn sys_semop(ctx: &mut Ctx, semid: i32, sops: UserPtr, nsops: u32) -> SysResult {
    do_semtimedop(ctx, semid, sops, nsops, None)
}

pub fn sys_semtimedop(ctx: &mut Ctx, semid: i32, sops: UserPtr, nsops: u32, UserPtr(timeout): UserPtr) -> SysResult {
    let ts: Option<libc::timespec> = if timeout != 0 { Some(ctx.mem().read(timeout)?) } else { None };
    do_semtimedop(ctx, semid, sops, nsops, ts)
}

fn do_semtimedop(
    ctx: &mut Ctx,
    semid: i32,
    UserPtr(sops): UserPtr,
    nsops: u32,
    timeout: Option<libc::timespec>,
) -> SysResult {
    if nsops < 1 || semid < 0 {
        return Err(Errno::EINVAL);
    }
    if nsops as usize > SEMOPM {
        return Err(Errno::E2BIG);
    }
    let raw = ctx.mem().read_bytes(sops, nsops as usize * 6)?;
    let ops: Vec<SemBuf> = raw
        .chunks_exact(6)
        .map(|c| SemBuf {
            num: u16::from_ne_bytes([c[0], c[1]]),
            op: i16::from_ne_bytes([c[2], c[3]]),
            flg: i16::from_ne_bytes([c[4], c[5]]),
        })
        .collect();
    let deadline = match timeout {
        None => None,
        Some(ts) => {
            if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
                return Err(Errno::EINVAL);
            }
            Some(super::wait::deadline_in(std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)))
        }
    };
    let pid = pid(ctx);
    ctx.kernel().ipc.sem.semop(ctx.t, semid, &ops, deadline, pid)?;
    Ok(0)
}

pub fn sys_semctl(ctx: &mut Ctx, semid: i32, semnum: i32, cmd: i32, Hex(arg): Hex) -> SysResult {
    if semid < 0 {
        return Err(Errno::EINVAL);
    }
    let cred = ctx.t.thread.cred();
    let pid = pid(ctx);
    let sets = &ctx.kernel().ipc.sem;
    match cmd {
        IPC_INFO | SEM_INFO => {
            let (info, max) = sets.info(cmd == SEM_INFO);
            ctx.mem().write_bytes(arg, &info)?;
            Ok(max)
        }
        IPC_STAT | SEM_STAT | SEM_STAT_ANY => {
            let (id, ds) = sets.stat(semid, cmd != IPC_STAT, cmd == SEM_STAT_ANY, &cred)?;
            ctx.mem().write_bytes(arg, &ds)?;
            Ok(if cmd == IPC_STAT { 0 } else { id as u64 })
        }
        GETALL => {
            let vals = sets.get_all(semid, &cred)?;
            let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_ne_bytes()).collect();
            ctx.mem().write_bytes(arg, &bytes)?;
            Ok(0)
        }
        SETALL => {
            let n = sets.nsems(semid, S_IWUGO, &cred)?;
            let bytes = ctx.mem().read_bytes(arg, n * 2)?;
            let vals: Vec<u16> = bytes.chunks_exact(2).map(|c| u16::from_ne_bytes([c[0], c[1]])).collect();
            sets.set_all(semid, &vals, &cred, pid).map(|()| 0)
        }
        GETVAL | GETPID | GETNCNT | GETZCNT => {
            let what = match cmd {
                GETVAL => GetOne::Val,
                GETPID => GetOne::Pid,
                GETNCNT => GetOne::NCnt,
                _ => GetOne::ZCnt,
            };
            sets.get_one(semid, semnum, what, &cred)
        }
        // The value is the union's int: the low half of the register.
        SETVAL => sets.set_val(semid, semnum, arg as i32, &cred, pid).map(|()| 0),
        IPC_SET => {
            let ds = ctx.mem().read_bytes(arg, SEMID_DS)?;
            sets.set(semid, &ds, &cred).map(|()| 0)
        }
        IPC_RMID => sets.remove(semid, &cred).map(|()| 0),
        _ => Err(Errno::EINVAL),
    }
}

pub fn sys_shmget(ctx: &mut Ctx, key: i32, size: usize, Hex(shmflg): Hex<i32>) -> SysResult {
    let cred = ctx.t.thread.cred();
    let pid = pid(ctx);
    ctx.kernel().ipc.shm.get(key, size as u64, shmflg, &cred, pid).map(|id| id as u64)
}

pub fn sys_shmat(ctx: &mut Ctx, shmid: i32, UserPtr(shmaddr): UserPtr, Hex(shmflg): Hex<i32>) -> SysResult {
    let cred = ctx.t.thread.cred();
    let pid = pid(ctx);
    let (att, prot) = ctx.kernel().ipc.shm.attach(shmid, shmaddr, shmflg, &cred, pid)?;
    let mut vma = Vma::new(0, prot, VmaKind::Shm);
    vma.shared = true;
    let (_, len) = crate::mm::space::SharedPages::pages(&att);
    vma.shm = Some(Box::new(att));
    // A VMA dropped on failure detaches again.
    let mut space = ctx.space().lock().unwrap();
    if !super::memory::may_expand(ctx, &space, len, false) {
        return Err(Errno::ENOMEM);
    }
    let addr = space.attach_shared(vma)?;
    Ok(addr as u64)
}

pub fn sys_shmdt(ctx: &mut Ctx, UserPtr(shmaddr): UserPtr) -> SysResult {
    if !crate::mm::is_page_aligned(shmaddr as usize) {
        return Err(Errno::EINVAL);
    }
    ctx.space().lock().unwrap().detach_shared(shmaddr as usize)?;
    Ok(0)
}

pub fn sys_shmctl(ctx: &mut Ctx, shmid: i32, cmd: i32, UserPtr(buf): UserPtr) -> SysResult {
    if shmid < 0 || cmd < 0 {
        return Err(Errno::EINVAL);
    }
    let cred = ctx.t.thread.cred();
    let segs = &ctx.kernel().ipc.shm;
    match cmd {
        IPC_INFO => {
            let (info, max) = segs.info();
            ctx.mem().write_bytes(buf, &info)?;
            Ok(max)
        }
        SHM_INFO => {
            let (info, max) = segs.totals();
            ctx.mem().write_bytes(buf, &info)?;
            Ok(max)
        }
        IPC_STAT | SHM_STAT | SHM_STAT_ANY => {
            let (id, ds) = segs.stat(shmid, cmd != IPC_STAT, cmd == SHM_STAT_ANY, &cred)?;
            ctx.mem().write_bytes(buf, &ds)?;
            Ok(if cmd == IPC_STAT { 0 } else { id as u64 })
        }
        IPC_SET => {
            let ds = ctx.mem().read_bytes(buf, SHMID_DS)?;
            segs.set(shmid, &ds, &cred).map(|()| 0)
        }
        IPC_RMID => segs.remove(shmid, &cred).map(|()| 0),
        SHM_LOCK | SHM_UNLOCK => segs.lock(shmid, cmd == SHM_LOCK, &cred).map(|()| 0),
        _ => Err(Errno::EINVAL),
    }
}
