//! Message queues (Linux's ipc/msg.c), with Linux's default limits.

use super::{now, Ids, IpcObject, Perm, IPC_NOWAIT, S_IRUGO, S_IWUGO};
use crate::abi::errno::Errno;
use crate::kernel::cred::Cred;
use crate::kernel::trap::ThreadCtx;
use crate::kernel::waiter::{Event, Wake};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// The largest message (MSGMAX).
pub const MSGMAX: usize = 8192;
/// A queue's default byte limit (MSGMNB).
pub const MSGMNB: u64 = 16384;
/// How many queues (MSGMNI).
pub const MSGMNI: usize = 32000;
const MSGSSZ: i32 = 16;
const MSGPOOL: i32 = (MSGMNI as i32) * (MSGMNB as i32) / 1024;

pub const MSG_NOERROR: i32 = 0o10000;
pub const MSG_EXCEPT: i32 = 0o20000;
pub const MSG_COPY: i32 = 0o40000;

pub struct Msg {
    pub mtype: i64,
    pub text: Vec<u8>,
}

pub struct Queue {
    perm: Perm,
    stime: i64,
    rtime: i64,
    ctime: i64,
    qbytes: u64,
    cbytes: u64,
    lspid: u32,
    lrpid: u32,
    msgs: VecDeque<Msg>,
    /// Notified at every change of the queue (and at its removal): its
    /// waiting senders and receivers look again.
    event: Arc<Event>,
}

impl IpcObject for Queue {
    fn perm(&self) -> &Perm {
        &self.perm
    }
    fn perm_mut(&mut self) -> &mut Perm {
        &mut self.perm
    }
}

impl Queue {
    /// struct msqid64_ds (120 bytes).
    fn stat(&self) -> [u8; 120] {
        let mut b = [0u8; 120];
        self.perm.store(&mut b, 0);
        super::put_u64(&mut b, 48, self.stime as u64);
        super::put_u64(&mut b, 56, self.rtime as u64);
        super::put_u64(&mut b, 64, self.ctime as u64);
        super::put_u64(&mut b, 72, self.cbytes);
        super::put_u64(&mut b, 80, self.msgs.len() as u64);
        super::put_u64(&mut b, 88, self.qbytes);
        super::put_u32(&mut b, 96, self.lspid);
        super::put_u32(&mut b, 100, self.lrpid);
        b
    }
}

/// How msgrcv picks its message (convert_mode).
#[derive(Clone, Copy)]
enum Search {
    Any,
    Equal(i64),
    NotEqual(i64),
    LessEqual(i64),
    Number(i64),
}

impl Search {
    fn of(msgtyp: i64, flags: i32) -> Search {
        if flags & MSG_COPY != 0 {
            Search::Number(msgtyp)
        } else if msgtyp == 0 {
            Search::Any
        } else if msgtyp < 0 {
            Search::LessEqual(if msgtyp == i64::MIN { i64::MAX } else { -msgtyp })
        } else if flags & MSG_EXCEPT != 0 {
            Search::NotEqual(msgtyp)
        } else {
            Search::Equal(msgtyp)
        }
    }

    /// find_msg: the index of the message to take.
    fn find(self, msgs: &VecDeque<Msg>) -> Option<usize> {
        match self {
            Search::Any => (!msgs.is_empty()).then_some(0),
            Search::Equal(t) => msgs.iter().position(|m| m.mtype == t),
            Search::NotEqual(t) => msgs.iter().position(|m| m.mtype != t),
            // The first message of the lowest type not above t.
            Search::LessEqual(t) => {
                let mut best: Option<usize> = None;
                for (i, m) in msgs.iter().enumerate() {
                    if m.mtype <= t && best.is_none_or(|b| m.mtype < msgs[b].mtype) {
                        best = Some(i);
                    }
                }
                best
            }
            Search::Number(n) => usize::try_from(n).ok().filter(|&n| n < msgs.len()),
        }
    }
}

#[derive(Default)]
pub struct Queues {
    ids: Mutex<Option<Ids<Queue>>>,
}

impl Queues {
    fn with<R>(&self, f: impl FnOnce(&mut Ids<Queue>) -> R) -> R {
        let mut ids = self.ids.lock().unwrap();
        f(ids.get_or_insert_with(|| Ids::new(MSGMNI)))
    }

    /// msgget.
    pub fn get(&self, key: i32, flags: i32, cred: &Cred) -> Result<i32, Errno> {
        self.with(|ids| {
            ids.get_or_create(
                key,
                flags,
                cred,
                |_| Ok(()),
                |perm| {
                    Ok(Queue {
                        perm,
                        stime: 0,
                        rtime: 0,
                        ctime: now(),
                        qbytes: MSGMNB,
                        cbytes: 0,
                        lspid: 0,
                        lrpid: 0,
                        msgs: VecDeque::new(),
                        event: Arc::default(),
                    })
                },
            )
        })
    }

    /// The event of queue `id` (EINVAL if there is none).
    fn event_of(&self, id: i32) -> Result<Arc<Event>, Errno> {
        self.with(|ids| ids.get(id).map(|q| q.event.clone()))
    }

    /// msgsnd of a message already read from the guest (its size checked):
    /// waits for room unless IPC_NOWAIT. A queue removed meanwhile is EIDRM.
    pub fn send(&self, t: &ThreadCtx, id: i32, msg: Msg, flags: i32, pid: u32) -> Result<(), Errno> {
        let cred = t.thread.cred();
        let event = self.event_of(id)?;
        let mut msg = Some(msg);
        let r = t.wait_for(Some(&event), None, Wake::OnSignal, || {
            let done = self.with(|ids| {
                let q = ids.get_mut(id).map_err(|_| Errno::EIDRM)?;
                q.perm.check(&cred, S_IWUGO)?;
                let len = msg.as_ref().unwrap().text.len() as u64;
                // msg_fits_inqueue: the bytes, and one more message than now.
                if len + q.cbytes <= q.qbytes && (q.msgs.len() as u64) < q.qbytes {
                    q.cbytes += len;
                    q.msgs.push_back(msg.take().unwrap());
                    q.lspid = pid;
                    q.stime = now();
                    return Ok(Some(()));
                }
                if flags & IPC_NOWAIT != 0 {
                    return Err(Errno::EAGAIN);
                }
                Ok(None)
            })?;
            if done.is_some() {
                event.notify();
            }
            Ok(done)
        });
        match r {
            Ok(_) => Ok(()),
            // Restarted only when no handler ran (ERESTARTNOHAND, as Linux).
            Err(Errno::ERESTARTSYS) => Err(Errno::ERESTARTNOHAND),
            Err(e) => Err(e),
        }
    }

    /// msgrcv: the message taken (or copied, MSG_COPY), waiting for one
    /// unless IPC_NOWAIT. `bufsz` is the guest's buffer size.
    pub fn receive(
        &self,
        t: &ThreadCtx,
        id: i32,
        bufsz: usize,
        msgtyp: i64,
        flags: i32,
        pid: u32,
    ) -> Result<Msg, Errno> {
        let cred = t.thread.cred();
        let search = Search::of(msgtyp, flags);
        let copy_max = bufsz.min(MSGMAX);
        let event = self.event_of(id)?;
        let r = t.wait_for(Some(&event), None, Wake::OnSignal, || {
            let got = self.with(|ids| {
                let q = ids.get_mut(id).map_err(|_| Errno::EIDRM)?;
                q.perm.check(&cred, S_IRUGO)?;
                match search.find(&q.msgs) {
                    Some(i) => {
                        let m = &q.msgs[i];
                        if bufsz < m.text.len() && flags & MSG_NOERROR == 0 {
                            return Err(Errno::E2BIG);
                        }
                        if flags & MSG_COPY != 0 {
                            if m.text.len() > copy_max {
                                return Err(Errno::EINVAL);
                            }
                            return Ok(Some((Msg { mtype: m.mtype, text: m.text.clone() }, false)));
                        }
                        let m = q.msgs.remove(i).unwrap();
                        q.cbytes -= m.text.len() as u64;
                        q.lrpid = pid;
                        q.rtime = now();
                        Ok(Some((m, true)))
                    }
                    None if flags & MSG_COPY != 0 => Err(Errno::ENOMSG),
                    None if flags & IPC_NOWAIT != 0 => Err(Errno::ENOMSG),
                    None => Ok(None),
                }
            })?;
            match got {
                Some((m, changed)) => {
                    if changed {
                        event.notify();
                    }
                    Ok(Some(m))
                }
                None => Ok(None),
            }
        });
        match r {
            Ok(Some(m)) => Ok(m),
            Ok(None) => Err(Errno::EAGAIN), // no deadline: not reached
            Err(Errno::ERESTARTSYS) => Err(Errno::ERESTARTNOHAND),
            Err(e) => Err(e),
        }
    }

    /// IPC_STAT, MSG_STAT and MSG_STAT_ANY: the id and a msqid64_ds.
    pub fn stat(&self, id: i32, by_index: bool, any: bool, cred: &Cred) -> Result<(i32, [u8; 120]), Errno> {
        self.with(|ids| {
            let (id, q) = if by_index { ids.at_index(id)? } else { (id, ids.get(id)?) };
            if !any {
                q.perm.check(cred, S_IRUGO)?;
            }
            Ok((id, q.stat()))
        })
    }

    /// IPC_SET from a msqid64_ds.
    pub fn set(&self, id: i32, buf: &[u8], cred: &Cred) -> Result<(), Errno> {
        let (uid, gid, mode) = super::load_perm(buf, 0);
        let qbytes = super::get_u64(buf, 88);
        self.with(|ids| {
            let q = ids.get_mut(id)?;
            q.perm.check_owner(cred)?;
            if qbytes > MSGMNB && !cred.capable(super::CAP_SYS_RESOURCE) {
                return Err(Errno::EPERM);
            }
            q.perm.update(uid, gid, mode)?;
            q.qbytes = qbytes;
            q.ctime = now();
            Ok(q.event.clone())
        })?
        .notify();
        Ok(())
    }

    /// IPC_RMID: waiters get EIDRM.
    pub fn remove(&self, id: i32, cred: &Cred) -> Result<(), Errno> {
        let removed = self.with(|ids| {
            ids.get(id)?.perm.check_owner(cred)?;
            Ok(ids.remove(id))
        })?;
        if let Some(q) = removed {
            q.event.notify();
        }
        Ok(())
    }

    /// IPC_INFO and MSG_INFO: a struct msginfo and the highest index.
    pub fn info(&self, totals: bool) -> ([u8; 32], u64) {
        self.with(|ids| {
            let (pool, map, tql) = if totals {
                let msgs: usize = ids.iter().map(|(_, q)| q.msgs.len()).sum();
                let bytes: u64 = ids.iter().map(|(_, q)| q.cbytes).sum();
                (ids.count() as i32, msgs as i32, bytes as i32)
            } else {
                (MSGPOOL, MSGMNB as i32, MSGMNB as i32)
            };
            let mut b = [0u8; 32];
            for (i, v) in [pool, map, MSGMAX as i32, MSGMNB as i32, MSGMNI as i32, MSGSSZ, tql].into_iter().enumerate()
            {
                super::put_u32(&mut b, i * 4, v as u32);
            }
            b[28..30].copy_from_slice(&0xffffu16.to_ne_bytes());
            (b, ids.max_idx())
        })
    }

    /// /proc/sysvipc/msg (sysvipc_msg_proc_show).
    pub fn proc_lines(&self) -> Vec<u8> {
        let mut out = b"       key      msqid perms      cbytes       qnum lspid lrpid   uid   gid  cuid  cgid      stime      rtime      ctime\n".to_vec();
        self.with(|ids| {
            for (id, q) in ids.iter() {
                let p = &q.perm;
                let line = format!(
                    "{:>10} {:>10}  {:>4o}  {:>10} {:>10} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>10} {:>10} {:>10}\n",
                    p.key,
                    id,
                    p.mode,
                    q.cbytes,
                    q.msgs.len(),
                    q.lspid,
                    q.lrpid,
                    p.uid,
                    p.gid,
                    p.cuid,
                    p.cgid,
                    q.stime,
                    q.rtime,
                    q.ctime
                );
                out.extend_from_slice(line.as_bytes());
            }
        });
        out
    }
}
