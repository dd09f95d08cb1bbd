//! Shared memory segments (Linux's ipc/shm.c), on a no-MMU kernel: a
//! segment is one run of physical pages, and attaching it maps those very
//! pages, at their own address, into the caller's address space (as no-MMU
//! Linux maps a shared mapping of a ramfs file: where its pages are). So a
//! segment has one address, the same in every process, and shmat at any
//! other address fails (no-MMU Linux refuses every address: MAP_FIXED).
//!
//! Each VMA of an attachment holds an [`Attachment`]; dropping it (shmdt,
//! munmap, execve or exit dropping the address space) detaches, and the
//! last detach of a removed segment frees its pages.

use super::{now, Ids, IpcObject, Perm, S_IRUGO, S_IWUGO, S_IXUGO};
use crate::abi::errno::Errno;
use crate::kernel::cred::Cred;
use crate::mm::phys::{Fresh, PhysicalMemory};
use crate::mm::space::SharedPages;
use crate::mm::{page_up, PAGE_SIZE};
use crate::sync::OrderedMutex;

pub const SHMMIN: u64 = 1;
pub const SHMMAX: u64 = u64::MAX - (1 << 24);
pub const SHMALL: u64 = u64::MAX - (1 << 24);
pub const SHMMNI: usize = 4096;

pub const SHM_RDONLY: i32 = 0o10000;
pub const SHM_RND: i32 = 0o20000;
pub const SHM_REMAP: i32 = 0o40000;
pub const SHM_EXEC: i32 = 0o100000;

/// Mode bits: removed, but still attached; locked in memory.
const SHM_DEST: u32 = 0o1000;
const SHM_LOCKED: u32 = 0o2000;

pub struct Segment {
    perm: Perm,
    segsz: u64,
    /// Its pages: [addr, addr+len).
    addr: usize,
    len: usize,
    atime: i64,
    dtime: i64,
    ctime: i64,
    cpid: u32,
    lpid: u32,
    nattch: u64,
    /// How many attachments are writable, executable: the pages' host
    /// protection is what the attachments together allow.
    writable: u64,
    executable: u64,
}

impl IpcObject for Segment {
    fn perm(&self) -> &Perm {
        &self.perm
    }
    fn perm_mut(&mut self) -> &mut Perm {
        &mut self.perm
    }
}

impl Segment {
    /// struct shmid64_ds (112 bytes).
    fn stat(&self) -> [u8; 112] {
        let mut b = [0u8; 112];
        self.perm.store(&mut b, 0);
        super::put_u64(&mut b, 48, self.segsz);
        super::put_u64(&mut b, 56, self.atime as u64);
        super::put_u64(&mut b, 64, self.dtime as u64);
        super::put_u64(&mut b, 72, self.ctime as u64);
        super::put_u32(&mut b, 80, self.cpid);
        super::put_u32(&mut b, 84, self.lpid);
        super::put_u64(&mut b, 88, self.nattch);
        b
    }

    fn host_prot(&self) -> i32 {
        let mut prot = libc::PROT_READ;
        if self.writable > 0 {
            prot |= libc::PROT_WRITE;
        }
        if self.executable > 0 {
            prot |= libc::PROT_EXEC;
        }
        prot
    }
}

pub struct Segments {
    phys: &'static PhysicalMemory,
    /// Taken under an address space's lock (a VMA dropped detaches) and
    /// taking physical memory's: its own level in src/sync.rs.
    ids: OrderedMutex<Option<Ids<Segment>>, { crate::sync::SHM }>,
}

/// One VMA's hold on an attached segment.
pub struct Attachment {
    segments: &'static Segments,
    id: i32,
    addr: usize,
    len: usize,
    writable: bool,
    executable: bool,
    pid: u32,
}

impl SharedPages for Attachment {
    fn duplicate(&self) -> Box<dyn SharedPages> {
        self.segments.with(|ids| {
            if let Ok(s) = ids.get_mut(self.id) {
                s.nattch += 1;
                s.writable += u64::from(self.writable);
                s.executable += u64::from(self.executable);
            }
        });
        Box::new(Attachment { ..*self })
    }

    fn segment(&self) -> usize {
        self.addr
    }

    fn pages(&self) -> (usize, usize) {
        (self.addr, self.len)
    }

    /// As Linux shows the segment's file: its id as the inode, and the
    /// unlinked "SYSV" file of its key (private once removed).
    fn shown(&self) -> (u64, Vec<u8>) {
        let key = self.segments.with(|ids| ids.get(self.id).map_or(0, |s| s.perm.key));
        (self.id as u64, format!("/SYSV{:08x} (deleted)", key as u32).into_bytes())
    }
}

impl Drop for Attachment {
    /// shm_close: the last detach of a removed segment destroys it.
    fn drop(&mut self) {
        let phys = self.segments.phys;
        self.segments.with(|ids| {
            let Ok(s) = ids.get_mut(self.id) else { return };
            s.nattch -= 1;
            s.writable -= u64::from(self.writable);
            s.executable -= u64::from(self.executable);
            s.lpid = self.pid;
            s.dtime = now();
            if s.nattch == 0 && s.perm.mode & SHM_DEST != 0 {
                let (addr, len) = (s.addr, s.len);
                ids.remove(self.id);
                free_segment(phys, addr, len);
            } else if s.nattch > 0 {
                let _ = phys.set_prot(s.addr, s.len, s.host_prot());
            }
        });
    }
}

impl Segments {
    pub fn new(phys: &'static PhysicalMemory) -> Segments {
        Segments { phys, ids: OrderedMutex::new(None) }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Ids<Segment>) -> R) -> R {
        let mut ids = self.ids.lock().unwrap();
        f(ids.get_or_insert_with(|| Ids::new(SHMMNI)))
    }

    /// shmget.
    pub fn get(&self, key: i32, size: u64, flags: i32, cred: &Cred, pid: u32) -> Result<i32, Errno> {
        let phys = self.phys;
        self.with(|ids| {
            ids.get_or_create(
                key,
                flags,
                cred,
                |s| if s.segsz < size { Err(Errno::EINVAL) } else { Ok(()) },
                |perm| {
                    if !(SHMMIN..=SHMMAX).contains(&size) {
                        return Err(Errno::EINVAL);
                    }
                    let len = page_up(size as usize).ok_or(Errno::ENOSPC)?;
                    // A segment is charged to the commit account (--mem)
                    // while it lives, as Linux's shmem_acct_size charges
                    // it; its attachments charge nothing more.
                    phys.commit().charge(len, 0)?;
                    let addr =
                        phys.alloc(len, PAGE_SIZE, Fresh::Reserved).inspect_err(|_| phys.commit().uncharge(len))?;
                    Ok(Segment {
                        perm,
                        segsz: size,
                        addr,
                        len,
                        atime: 0,
                        dtime: 0,
                        ctime: now(),
                        cpid: pid,
                        lpid: 0,
                        nattch: 0,
                        writable: 0,
                        executable: 0,
                    })
                },
            )
        })
    }

    /// shmat's checks and its count: the attachment to map (at its
    /// pages' own address) and the protection its VMA gets.
    pub fn attach(
        &'static self,
        id: i32,
        mut addr: u64,
        flags: i32,
        cred: &Cred,
        pid: u32,
    ) -> Result<(Attachment, i32), Errno> {
        if id < 0 {
            return Err(Errno::EINVAL);
        }
        let page = PAGE_SIZE as u64;
        let fixed = addr != 0;
        if fixed {
            if addr & (page - 1) != 0 {
                if flags & SHM_RND == 0 {
                    return Err(Errno::EINVAL);
                }
                addr &= !(page - 1);
                if addr == 0 && flags & SHM_REMAP != 0 {
                    return Err(Errno::EINVAL);
                }
            }
        } else if flags & SHM_REMAP != 0 {
            return Err(Errno::EINVAL);
        }
        let writable = flags & SHM_RDONLY == 0;
        let executable = flags & SHM_EXEC != 0;
        let mut prot = libc::PROT_READ;
        let mut acc = S_IRUGO;
        if writable {
            prot |= libc::PROT_WRITE;
            acc |= S_IWUGO;
        }
        if executable {
            prot |= libc::PROT_EXEC;
            acc |= S_IXUGO;
        }
        let phys = self.phys;
        self.with(|ids| {
            let s = ids.get_mut(id)?;
            s.perm.check(cred, acc)?;
            // A segment's pages lie where they lie: no other address.
            if fixed && addr != s.addr as u64 {
                return Err(Errno::EINVAL);
            }
            s.nattch += 1;
            s.writable += u64::from(writable);
            s.executable += u64::from(executable);
            s.atime = now();
            s.lpid = pid;
            phys.set_prot(s.addr, s.len, s.host_prot())?;
            Ok((Attachment { segments: self, id, addr: s.addr, len: s.len, writable, executable, pid }, prot))
        })
    }

    /// IPC_STAT, SHM_STAT and SHM_STAT_ANY: the id and a shmid64_ds.
    pub fn stat(&self, id: i32, by_index: bool, any: bool, cred: &Cred) -> Result<(i32, [u8; 112]), Errno> {
        self.with(|ids| {
            let (id, s) = if by_index { ids.at_index(id)? } else { (id, ids.get(id)?) };
            if !any {
                s.perm.check(cred, S_IRUGO)?;
            }
            Ok((id, s.stat()))
        })
    }

    /// IPC_SET from a shmid64_ds.
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

    /// IPC_RMID: destroyed now if nothing is attached, else at the last
    /// detach (its key is private from now on).
    pub fn remove(&self, id: i32, cred: &Cred) -> Result<(), Errno> {
        let phys = self.phys;
        self.with(|ids| {
            let s = ids.get_mut(id)?;
            s.perm.check_owner(cred)?;
            if s.nattch > 0 {
                s.perm.mode |= SHM_DEST;
                s.perm.key = super::IPC_PRIVATE;
            } else {
                let (addr, len) = (s.addr, s.len);
                ids.remove(id);
                free_segment(phys, addr, len);
            }
            Ok(())
        })
    }

    /// SHM_LOCK and SHM_UNLOCK: only the mode bit (nomu's memory is never
    /// swapped out).
    pub fn lock(&self, id: i32, lock: bool, cred: &Cred) -> Result<(), Errno> {
        self.with(|ids| {
            let s = ids.get_mut(id)?;
            if !cred.capable(super::CAP_IPC_LOCK) && cred.euid != s.perm.uid && cred.euid != s.perm.cuid {
                return Err(Errno::EPERM);
            }
            if lock {
                s.perm.mode |= SHM_LOCKED;
            } else {
                s.perm.mode &= !SHM_LOCKED;
            }
            Ok(())
        })
    }

    /// IPC_INFO: a struct shminfo64, and the highest index.
    pub fn info(&self) -> ([u8; 72], u64) {
        let mut b = [0u8; 72];
        for (i, v) in [SHMMAX, SHMMIN, SHMMNI as u64, SHMMNI as u64, SHMALL].into_iter().enumerate() {
            super::put_u64(&mut b, i * 8, v);
        }
        (b, self.with(|ids| ids.max_idx()))
    }

    /// SHM_INFO: a struct shm_info, and the highest index.
    pub fn totals(&self) -> ([u8; 48], u64) {
        self.with(|ids| {
            let pages: u64 = ids.iter().map(|(_, s)| (s.len / PAGE_SIZE) as u64).sum();
            let rss: usize = ids.iter().map(|(_, s)| self.phys.resident_bytes(s.addr, s.len) / PAGE_SIZE).sum();
            let mut b = [0u8; 48];
            super::put_u32(&mut b, 0, ids.count() as u32);
            super::put_u64(&mut b, 8, pages);
            super::put_u64(&mut b, 16, rss as u64);
            (b, ids.max_idx())
        })
    }

    /// /proc/sysvipc/shm (sysvipc_shm_proc_show); resident: the bytes the
    /// host holds memory for.
    pub fn proc_lines(&self) -> Vec<u8> {
        let mut out = b"       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n".to_vec();
        self.with(|ids| {
            for (id, s) in ids.iter() {
                let p = &s.perm;
                let line = format!(
                    "{:>10} {:>10}  {:>4o} {:>21} {:>5} {:>5}  {:>5} {:>5} {:>5} {:>5} {:>5} {:>10} {:>10} {:>10} {:>21} {:>21}\n",
                    p.key,
                    id,
                    p.mode,
                    s.segsz,
                    s.cpid,
                    s.lpid,
                    s.nattch,
                    p.uid,
                    p.gid,
                    p.cuid,
                    p.cgid,
                    s.atime,
                    s.dtime,
                    s.ctime,
                    self.phys.resident_bytes(s.addr, s.len),
                    0
                );
                out.extend_from_slice(line.as_bytes());
            }
        });
        out
    }
}

/// Gives a destroyed segment's pages and its charge back.
fn free_segment(phys: &PhysicalMemory, addr: usize, len: usize) {
    phys.free(addr, len);
    phys.commit().uncharge(len);
}
