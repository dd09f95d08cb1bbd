//! System V IPC: message queues, semaphore sets and shared memory
//! segments, kept by nomu itself (Linux's ipc/): one IPC namespace shared
//! by every guest process of this nomu and by no one else. A guest never
//! reaches the host's IPC objects, nor the host its.
//!
//! What the three kinds share (ipc/util.c): keys, ids, the permission
//! record and its checks against the caller's credentials.

pub mod msg;
pub mod sem;
pub mod shm;

use super::cred::Cred;
use crate::abi::errno::Errno;
use crate::mm::phys::PhysicalMemory;
use std::collections::BTreeMap;

pub const IPC_PRIVATE: i32 = 0;
pub const IPC_CREAT: i32 = 0o1000;
pub const IPC_EXCL: i32 = 0o2000;
pub const IPC_NOWAIT: i32 = 0o4000;

pub const IPC_RMID: i32 = 0;
pub const IPC_SET: i32 = 1;
pub const IPC_STAT: i32 = 2;
pub const IPC_INFO: i32 = 3;

/// The permission bits an object keeps (S_IRWXUGO).
const S_IRWXUGO: u32 = 0o777;
pub const S_IRUGO: u32 = 0o444;
pub const S_IWUGO: u32 = 0o222;
pub const S_IXUGO: u32 = 0o111;

pub const CAP_IPC_LOCK: u32 = 14;
pub const CAP_IPC_OWNER: u32 = 15;
pub const CAP_SYS_RESOURCE: u32 = 24;

/// Linux's IPCMNI: ids are an index below it plus a sequence number times it.
const IPCMNI: usize = 32768;
const IPCMNI_SHIFT: u32 = 15;
/// The highest sequence number (IPCID_SEQ_MAX for the default IPCMNI).
const SEQ_MAX: u32 = (i32::MAX as u32) >> IPCMNI_SHIFT;

/// Seconds since the epoch, for the objects' times.
pub fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Linux's kern_ipc_perm.
#[derive(Clone, Debug)]
pub struct Perm {
    pub key: i32,
    pub uid: u32,
    pub gid: u32,
    pub cuid: u32,
    pub cgid: u32,
    pub mode: u32,
    pub seq: u32,
}

impl Perm {
    fn new(key: i32, flags: i32, cred: &Cred) -> Perm {
        Perm {
            key,
            uid: cred.euid,
            gid: cred.egid,
            cuid: cred.euid,
            cgid: cred.egid,
            mode: flags as u32 & S_IRWXUGO,
            seq: 0,
        }
    }

    /// ipcperms: whether `cred` may access with the S_I*UGO bits `flag`
    /// (EACCES if not).
    pub fn check(&self, cred: &Cred, flag: u32) -> Result<(), Errno> {
        let requested = (flag >> 6) | (flag >> 3) | flag;
        let mut granted = self.mode;
        if cred.euid == self.cuid || cred.euid == self.uid {
            granted >>= 6;
        } else if cred.in_group(self.cgid) || cred.in_group(self.gid) {
            granted >>= 3;
        }
        if requested & !granted & 0o7 != 0 && !cred.capable(CAP_IPC_OWNER) {
            return Err(Errno::EACCES);
        }
        Ok(())
    }

    /// The check of IPC_SET and IPC_RMID (ipcctl_obtain_check): the
    /// creator, the owner, or CAP_SYS_ADMIN; EPERM otherwise.
    pub fn check_owner(&self, cred: &Cred) -> Result<(), Errno> {
        if cred.euid == self.cuid || cred.euid == self.uid || cred.capable(super::cred::CAP_SYS_ADMIN) {
            Ok(())
        } else {
            Err(Errno::EPERM)
        }
    }

    /// IPC_SET's ipc_update_perm: owner and permission bits.
    pub fn update(&mut self, uid: u32, gid: u32, mode: u32) -> Result<(), Errno> {
        if uid == u32::MAX || gid == u32::MAX {
            return Err(Errno::EINVAL);
        }
        self.uid = uid;
        self.gid = gid;
        self.mode = (self.mode & !S_IRWXUGO) | (mode & S_IRWXUGO);
        Ok(())
    }

    /// struct ipc64_perm (48 bytes) into `out` at `at`.
    pub fn store(&self, out: &mut [u8], at: usize) {
        put_u32(out, at, self.key as u32);
        put_u32(out, at + 4, self.uid);
        put_u32(out, at + 8, self.gid);
        put_u32(out, at + 12, self.cuid);
        put_u32(out, at + 16, self.cgid);
        put_u32(out, at + 20, self.mode);
        out[at + 24..at + 26].copy_from_slice(&(self.seq as u16).to_ne_bytes());
    }
}

/// The fields IPC_SET reads from a struct ipc64_perm.
pub fn load_perm(buf: &[u8], at: usize) -> (u32, u32, u32) {
    (get_u32(buf, at + 4), get_u32(buf, at + 8), get_u32(buf, at + 20))
}

pub fn put_u32(out: &mut [u8], at: usize, v: u32) {
    out[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

pub fn put_u64(out: &mut [u8], at: usize, v: u64) {
    out[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

pub fn get_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(buf[at..at + 4].try_into().unwrap())
}

pub fn get_u64(buf: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(buf[at..at + 8].try_into().unwrap())
}

/// Something kept under an id, with its permission record.
pub trait IpcObject {
    fn perm(&self) -> &Perm;
    fn perm_mut(&mut self) -> &mut Perm;
}

/// One kind's objects by index (Linux's ipc_ids).
pub struct Ids<T> {
    objects: BTreeMap<usize, T>,
    seq: u32,
    /// Where the next index search starts (idr_alloc_cyclic).
    next: usize,
    max: usize,
}

impl<T: IpcObject> Ids<T> {
    pub const fn new(max: usize) -> Ids<T> {
        Ids { objects: BTreeMap::new(), seq: 0, next: 0, max }
    }

    pub fn id_of(idx: usize, perm: &Perm) -> i32 {
        ((perm.seq << IPCMNI_SHIFT) as usize + idx) as i32
    }

    /// The object with id `id` (EINVAL if none: wrong index or sequence).
    pub fn get(&self, id: i32) -> Result<&T, Errno> {
        let (idx, seq) = split_id(id)?;
        self.objects.get(&idx).filter(|o| o.perm().seq == seq).ok_or(Errno::EINVAL)
    }

    pub fn get_mut(&mut self, id: i32) -> Result<&mut T, Errno> {
        let (idx, seq) = split_id(id)?;
        self.objects.get_mut(&idx).filter(|o| o.perm().seq == seq).ok_or(Errno::EINVAL)
    }

    /// The object at index `idx` (the *_STAT commands), and its id.
    pub fn at_index(&self, idx: i32) -> Result<(i32, &T), Errno> {
        let idx = usize::try_from(idx).map_err(|_| Errno::EINVAL)?;
        let o = self.objects.get(&idx).ok_or(Errno::EINVAL)?;
        Ok((Self::id_of(idx, o.perm()), o))
    }

    pub fn remove(&mut self, id: i32) -> Option<T> {
        let (idx, _) = split_id(id).ok()?;
        self.objects.remove(&idx)
    }

    /// The id of the object with this (public) key.
    pub fn find_key(&self, key: i32) -> Option<i32> {
        self.objects.iter().find(|(_, o)| o.perm().key == key).map(|(&i, o)| Self::id_of(i, o.perm()))
    }

    /// Adds an object (ENOSPC when every index is taken); returns its id.
    pub fn insert(&mut self, mut obj: T) -> Result<i32, Errno> {
        if self.objects.len() >= self.max {
            return Err(Errno::ENOSPC);
        }
        let mut idx = self.next;
        while self.objects.contains_key(&idx) {
            idx = (idx + 1) % self.max;
        }
        self.next = (idx + 1) % self.max;
        obj.perm_mut().seq = self.seq;
        self.seq = if self.seq >= SEQ_MAX { 0 } else { self.seq + 1 };
        let id = Self::id_of(idx, obj.perm());
        self.objects.insert(idx, obj);
        Ok(id)
    }

    pub fn count(&self) -> usize {
        self.objects.len()
    }

    /// The highest index in use, or 0 (what the *_INFO commands return).
    pub fn max_idx(&self) -> u64 {
        self.objects.keys().next_back().map_or(0, |&i| i as u64)
    }

    pub fn iter(&self) -> impl Iterator<Item = (i32, &T)> {
        self.objects.iter().map(|(&i, o)| (Self::id_of(i, o.perm()), o))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.objects.values_mut()
    }

    /// ipcget: the id for `key` and `flags`, creating the object with
    /// `create` when asked to; `more` is the kind's own check of an
    /// existing object (a size, a count).
    pub fn get_or_create(
        &mut self,
        key: i32,
        flags: i32,
        cred: &Cred,
        more: impl FnOnce(&T) -> Result<(), Errno>,
        create: impl FnOnce(Perm) -> Result<T, Errno>,
    ) -> Result<i32, Errno> {
        if key != IPC_PRIVATE {
            if let Some(id) = self.find_key(key) {
                if flags & IPC_CREAT != 0 && flags & IPC_EXCL != 0 {
                    return Err(Errno::EEXIST);
                }
                let obj = self.get(id)?;
                more(obj)?;
                obj.perm().check(cred, flags as u32 & S_IRWXUGO)?;
                return Ok(id);
            }
            if flags & IPC_CREAT == 0 {
                return Err(Errno::ENOENT);
            }
        }
        if self.objects.len() >= self.max {
            return Err(Errno::ENOSPC);
        }
        let obj = create(Perm::new(key, flags, cred))?;
        self.insert(obj)
    }
}

fn split_id(id: i32) -> Result<(usize, u32), Errno> {
    if id < 0 {
        return Err(Errno::EINVAL);
    }
    Ok((id as usize % IPCMNI, id as u32 >> IPCMNI_SHIFT))
}

/// Every IPC object of this nomu.
pub struct Ipc {
    pub msg: msg::Queues,
    pub sem: sem::Sets,
    pub shm: shm::Segments,
}

impl Ipc {
    pub fn new(phys: &'static PhysicalMemory) -> Ipc {
        Ipc { msg: msg::Queues::default(), sem: sem::Sets::default(), shm: shm::Segments::new(phys) }
    }

    /// What a process leaves behind when it ends (Linux's exit_sem; its
    /// shared memory attachments went with its address space).
    pub fn exit_process(&self, pid: u32) {
        self.sem.exit(pid);
    }
}
