//! Semaphore sets (Linux's ipc/sem.c), with SEM_UNDO adjustments kept per
//! process and applied when it ends (exit_sem).

use super::{now, Ids, IpcObject, Perm, IPC_NOWAIT, S_IRUGO, S_IWUGO};
use crate::abi::errno::Errno;
use crate::kernel::cred::Cred;
use crate::kernel::trap::ThreadCtx;
use crate::kernel::waiter::{Event, Wake};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Linux's defaults (include/uapi/linux/sem.h).
pub const SEMMSL: i32 = 32000;
pub const SEMMNI: usize = 32000;
pub const SEMMNS: i64 = SEMMNI as i64 * SEMMSL as i64;
pub const SEMOPM: usize = 500;
pub const SEMVMX: i32 = 32767;
const SEMAEM: i32 = SEMVMX;
const SEMUME: i32 = SEMOPM as i32;
const SEMUSZ: i32 = 20;

pub const SEM_UNDO: i16 = 0x1000;

/// One struct sembuf.
#[derive(Clone, Copy, Debug)]
pub struct SemBuf {
    pub num: u16,
    pub op: i16,
    pub flg: i16,
}

#[derive(Clone, Copy, Default)]
struct Sem {
    val: i32,
    pid: u32,
}

/// A thread waiting in semop, and the operation it waits on (what
/// GETNCNT and GETZCNT count).
struct Pending {
    token: u64,
    num: u16,
    zero: bool,
}

pub struct Set {
    perm: Perm,
    otime: i64,
    ctime: i64,
    sems: Vec<Sem>,
    /// SEM_UNDO adjustments, per process.
    undo: HashMap<u32, Vec<i32>>,
    pending: Vec<Pending>,
    /// Which operation the last try_ops blocked on.
    blocked_on: Option<usize>,
    /// Notified at every change of a value (and at the set's removal).
    event: Arc<Event>,
}

impl IpcObject for Set {
    fn perm(&self) -> &Perm {
        &self.perm
    }
    fn perm_mut(&mut self) -> &mut Perm {
        &mut self.perm
    }
}

impl Set {
    /// struct semid64_ds (104 bytes).
    fn stat(&self) -> [u8; 104] {
        let mut b = [0u8; 104];
        self.perm.store(&mut b, 0);
        super::put_u64(&mut b, 48, self.otime as u64);
        super::put_u64(&mut b, 64, self.ctime as u64);
        super::put_u64(&mut b, 80, self.sems.len() as u64);
        b
    }

    fn check_num(&self, num: i32) -> Result<usize, Errno> {
        usize::try_from(num).ok().filter(|&n| n < self.sems.len()).ok_or(Errno::EINVAL)
    }

    /// perform_atomic_semop: all of `ops` at once, in order, or none.
    /// Ok(None): it would block on this operation.
    fn try_ops(&mut self, ops: &[SemBuf], pid: u32) -> Result<Option<()>, Errno> {
        let mut vals: Vec<i32> = self.sems.iter().map(|s| s.val).collect();
        let undos = ops.iter().any(|o| o.flg & SEM_UNDO != 0);
        let mut adj = if undos { self.undo.get(&pid).cloned().unwrap_or_else(|| vec![0; vals.len()]) } else { vec![] };
        for (i, o) in ops.iter().enumerate() {
            let n = o.num as usize;
            let cur = vals[n];
            let op = i32::from(o.op);
            let blocks = if op == 0 { cur != 0 } else { cur + op < 0 };
            if blocks {
                if o.flg & IPC_NOWAIT as i16 != 0 {
                    return Err(Errno::EAGAIN);
                }
                self.blocked_on = Some(i);
                return Ok(None);
            }
            if cur + op > SEMVMX {
                return Err(Errno::ERANGE);
            }
            if o.flg & SEM_UNDO != 0 {
                let u = adj[n] - op;
                if !(-SEMAEM - 1..=SEMAEM).contains(&u) {
                    return Err(Errno::ERANGE);
                }
                adj[n] = u;
            }
            vals[n] = cur + op;
        }
        for (s, v) in self.sems.iter_mut().zip(vals) {
            s.val = v;
        }
        for o in ops {
            self.sems[o.num as usize].pid = pid;
        }
        if undos {
            self.undo.insert(pid, adj);
        }
        self.otime = now();
        Ok(Some(()))
    }
}

#[derive(Default)]
pub struct Sets {
    ids: Mutex<Option<Ids<Set>>>,
    tokens: AtomicU64,
}

impl Sets {
    fn with<R>(&self, f: impl FnOnce(&mut Ids<Set>) -> R) -> R {
        let mut ids = self.ids.lock().unwrap();
        f(ids.get_or_insert_with(|| Ids::new(SEMMNI)))
    }

    /// semget.
    pub fn get(&self, key: i32, nsems: i32, flags: i32, cred: &Cred) -> Result<i32, Errno> {
        if !(0..=SEMMSL).contains(&nsems) {
            return Err(Errno::EINVAL);
        }
        self.with(|ids| {
            let used: i64 = ids.iter().map(|(_, s)| s.sems.len() as i64).sum();
            ids.get_or_create(
                key,
                flags,
                cred,
                |s| if nsems as usize > s.sems.len() { Err(Errno::EINVAL) } else { Ok(()) },
                |perm| {
                    if nsems == 0 {
                        return Err(Errno::EINVAL);
                    }
                    if used + i64::from(nsems) > SEMMNS {
                        return Err(Errno::ENOSPC);
                    }
                    Ok(Set {
                        perm,
                        otime: 0,
                        ctime: now(),
                        sems: vec![Sem::default(); nsems as usize],
                        undo: HashMap::new(),
                        pending: Vec::new(),
                        blocked_on: None,
                        event: Arc::default(),
                    })
                },
            )
        })
    }

    /// semop and semtimedop (the operations read and counted already):
    /// waits until all can be done at once, `deadline` passes (EAGAIN), a
    /// signal comes (EINTR, never restarted) or the set goes (EIDRM).
    pub fn semop(
        &self,
        t: &ThreadCtx,
        id: i32,
        ops: &[SemBuf],
        deadline: Option<Instant>,
        pid: u32,
    ) -> Result<(), Errno> {
        let cred = t.thread.cred();
        let max = ops.iter().map(|o| o.num as usize).max().unwrap_or(0);
        let alter = ops.iter().any(|o| o.op != 0);
        let token = self.tokens.fetch_add(1, Ordering::Relaxed);
        let event = self.with(|ids| ids.get(id).map(|s| s.event.clone()))?;
        let r = t.wait_for(Some(&event), deadline, Wake::OnSignal, || {
            let r = self.with(|ids| {
                let set = ids.get_mut(id).map_err(|_| Errno::EIDRM)?;
                if max >= set.sems.len() {
                    return Err(Errno::EFBIG);
                }
                set.perm.check(&cred, if alter { S_IWUGO } else { S_IRUGO })?;
                set.pending.retain(|p| p.token != token);
                set.blocked_on = None;
                let r = set.try_ops(ops, pid)?;
                if let Some(i) = set.blocked_on.take() {
                    set.pending.push(Pending { token, num: ops[i].num, zero: ops[i].op == 0 });
                }
                Ok(r)
            })?;
            if r.is_some() && alter {
                event.notify();
            }
            Ok(r)
        });
        self.with(|ids| {
            if let Ok(set) = ids.get_mut(id) {
                set.pending.retain(|p| p.token != token);
            }
        });
        match r {
            Ok(Some(())) => Ok(()),
            Ok(None) => Err(Errno::EAGAIN),
            Err(Errno::ERESTARTSYS) => Err(Errno::EINTR),
            Err(e) => Err(e),
        }
    }

    /// exit_sem: the process's SEM_UNDO adjustments, applied (each value
    /// kept within 0..=SEMVMX).
    pub fn exit(&self, pid: u32) {
        let changed = self.with(|ids| {
            let mut changed = Vec::new();
            for set in ids.iter_mut() {
                let Some(adj) = set.undo.remove(&pid) else { continue };
                let mut any = false;
                for (s, a) in set.sems.iter_mut().zip(adj) {
                    if a != 0 {
                        s.val = (s.val + a).clamp(0, SEMVMX);
                        s.pid = pid;
                        any = true;
                    }
                }
                if any {
                    changed.push(set.event.clone());
                }
            }
            changed
        });
        for e in changed {
            e.notify();
        }
    }

    /// The number of semaphores, for GETALL and SETALL (their access
    /// checked: `flag` is S_IRUGO or S_IWUGO).
    pub fn nsems(&self, id: i32, flag: u32, cred: &Cred) -> Result<usize, Errno> {
        self.with(|ids| {
            let set = ids.get(id)?;
            set.perm.check(cred, flag)?;
            Ok(set.sems.len())
        })
    }

    pub fn get_all(&self, id: i32, cred: &Cred) -> Result<Vec<u16>, Errno> {
        self.with(|ids| {
            let set = ids.get(id)?;
            set.perm.check(cred, S_IRUGO)?;
            Ok(set.sems.iter().map(|s| s.val as u16).collect())
        })
    }

    /// SETALL with `vals` read from the guest (a set removed meanwhile is
    /// EIDRM): clears every process's adjustments.
    pub fn set_all(&self, id: i32, vals: &[u16], cred: &Cred, pid: u32) -> Result<(), Errno> {
        self.with(|ids| {
            let set = ids.get_mut(id).map_err(|_| Errno::EIDRM)?;
            set.perm.check(cred, S_IWUGO)?;
            if vals.len() != set.sems.len() {
                return Err(Errno::EIDRM);
            }
            if vals.iter().any(|&v| i32::from(v) > SEMVMX) {
                return Err(Errno::ERANGE);
            }
            for (s, &v) in set.sems.iter_mut().zip(vals) {
                s.val = i32::from(v);
                s.pid = pid;
            }
            for adj in set.undo.values_mut() {
                adj.fill(0);
            }
            set.ctime = now();
            Ok(set.event.clone())
        })?
        .notify();
        Ok(())
    }

    /// SETVAL: clears that semaphore's adjustments.
    pub fn set_val(&self, id: i32, num: i32, val: i32, cred: &Cred, pid: u32) -> Result<(), Errno> {
        if !(0..=SEMVMX).contains(&val) {
            return Err(Errno::ERANGE);
        }
        self.with(|ids| {
            let set = ids.get_mut(id)?;
            let n = set.check_num(num)?;
            set.perm.check(cred, S_IWUGO)?;
            for adj in set.undo.values_mut() {
                adj[n] = 0;
            }
            set.sems[n] = Sem { val, pid };
            set.ctime = now();
            Ok(set.event.clone())
        })?
        .notify();
        Ok(())
    }

    /// GETVAL, GETPID, GETNCNT and GETZCNT.
    pub fn get_one(&self, id: i32, num: i32, what: GetOne, cred: &Cred) -> Result<u64, Errno> {
        self.with(|ids| {
            let set = ids.get(id)?;
            set.perm.check(cred, S_IRUGO)?;
            let n = set.check_num(num)?;
            let count = |zero: bool| set.pending.iter().filter(|p| p.num as usize == n && p.zero == zero).count();
            Ok(match what {
                GetOne::Val => set.sems[n].val as u64,
                GetOne::Pid => u64::from(set.sems[n].pid),
                GetOne::NCnt => count(false) as u64,
                GetOne::ZCnt => count(true) as u64,
            })
        })
    }

    /// IPC_STAT, SEM_STAT and SEM_STAT_ANY: the id and a semid64_ds.
    pub fn stat(&self, id: i32, by_index: bool, any: bool, cred: &Cred) -> Result<(i32, [u8; 104]), Errno> {
        self.with(|ids| {
            let (id, s) = if by_index { ids.at_index(id)? } else { (id, ids.get(id)?) };
            if !any {
                s.perm.check(cred, S_IRUGO)?;
            }
            Ok((id, s.stat()))
        })
    }

    /// IPC_SET from a semid64_ds.
    pub fn set(&self, id: i32, buf: &[u8], cred: &Cred) -> Result<(), Errno> {
        let (uid, gid, mode) = super::load_perm(buf, 0);
        self.with(|ids| {
            let s = ids.get_mut(id)?;
            s.perm.check_owner(cred)?;
            s.perm.update(uid, gid, mode)?;
            s.ctime = now();
            Ok(())
        })
    }

    /// IPC_RMID: waiters get EIDRM, adjustments are forgotten.
    pub fn remove(&self, id: i32, cred: &Cred) -> Result<(), Errno> {
        let removed = self.with(|ids| {
            ids.get(id)?.perm.check_owner(cred)?;
            Ok(ids.remove(id))
        })?;
        if let Some(s) = removed {
            s.event.notify();
        }
        Ok(())
    }

    /// IPC_INFO and SEM_INFO: a struct seminfo and the highest index.
    pub fn info(&self, totals: bool) -> ([u8; 40], u64) {
        self.with(|ids| {
            let (usz, aem) = if totals {
                (ids.count() as i32, ids.iter().map(|(_, s)| s.sems.len() as i32).sum())
            } else {
                (SEMUSZ, SEMAEM)
            };
            let v = [
                SEMMNS as i32,
                SEMMNI as i32,
                SEMMNS as i32,
                SEMMNS as i32,
                SEMMSL,
                SEMOPM as i32,
                SEMUME,
                usz,
                SEMVMX,
                aem,
            ];
            let mut b = [0u8; 40];
            for (i, x) in v.into_iter().enumerate() {
                super::put_u32(&mut b, i * 4, x as u32);
            }
            (b, ids.max_idx())
        })
    }

    /// /proc/sysvipc/sem (sysvipc_sem_proc_show).
    pub fn proc_lines(&self) -> Vec<u8> {
        let mut out =
            b"       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime\n".to_vec();
        self.with(|ids| {
            for (id, s) in ids.iter() {
                let p = &s.perm;
                let line = format!(
                    "{:>10} {:>10}  {:>4o} {:>10} {:>5} {:>5} {:>5} {:>5} {:>10} {:>10}\n",
                    p.key,
                    id,
                    p.mode,
                    s.sems.len(),
                    p.uid,
                    p.gid,
                    p.cuid,
                    p.cgid,
                    s.otime,
                    s.ctime
                );
                out.extend_from_slice(line.as_bytes());
            }
        });
        out
    }
}

#[derive(Clone, Copy)]
pub enum GetOne {
    Val,
    Pid,
    NCnt,
    ZCnt,
}
