//! POSIX record locks (fcntl F_SETLK, F_SETLKW, F_GETLK) between guest
//! processes, and as host processes see them.
//!
//! Every guest lives in one host process, so the host's own POSIX locks,
//! which belong to a process, would never conflict between two guests, and
//! a guest closing any descriptor of a file would drop every other guest's
//! locks on it. So nomu keeps the table itself: locks by file (device and
//! inode), owned by guest processes, split and merged on ranges as Linux's
//! posix_lock_inode does, released when the owner closes any descriptor of
//! the file and when it exits, with Linux's deadlock detection for waits.
//!
//! Host processes see them through a mirror: one host open file
//! description of the file per locked file, nomu's own, that holds an OFD
//! lock over the union of the guests' locks (they never conflict with each
//! other, so their union is a set of locks one owner can hold). A host
//! process's lock, or a guest's OFD lock (on its own host description),
//! makes the mirror's lock fail, so it blocks guests; the mirror's locks
//! block host processes. OFD locks and flock(2) belong to an open file
//! description, and every guest open has its own host description, so
//! those go to the host as they are (syscall::io).

use super::file::{FileKind, OpenFile};
use crate::abi::errno::Errno;
use crate::abi::Flock;
use crate::host::fs as hostfs;
use crate::kernel::waiter::Event;
use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The last byte a lock can cover (Linux's OFFSET_MAX).
pub const OFFSET_MAX: u64 = i64::MAX as u64;

pub const F_RDLCK: i16 = 0;
pub const F_WRLCK: i16 = 1;
pub const F_UNLCK: i16 = 2;
const F_GETLK: i32 = 5;
const F_OFD_GETLK: i32 = 36;
const F_OFD_SETLK: i32 = 37;
const F_OFD_SETLKW: i32 = 38;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Kind {
    Read,
    Write,
}

impl Kind {
    fn l_type(self) -> i16 {
        match self {
            Kind::Read => F_RDLCK,
            Kind::Write => F_WRLCK,
        }
    }

    fn conflicts(self, other: Kind) -> bool {
        self == Kind::Write || other == Kind::Write
    }
}

/// A lock, or a request for one: bytes `start..=end`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Lock {
    /// The owning guest process (its pid, which F_GETLK reports).
    pub owner: u32,
    pub kind: Kind,
    pub start: u64,
    pub end: u64,
}

impl Lock {
    fn overlaps(&self, start: u64, end: u64) -> bool {
        self.start <= end && start <= self.end
    }
}

type FileId = (u64, u64);

struct FileLocks {
    /// Every guest's locks on the file, in the order Linux lists them
    /// closely enough: one owner's never overlap one another.
    locks: Vec<Lock>,
    /// The host description whose OFD locks show `locks` to the host; None
    /// for a file that is not a regular file, or that nomu could not open
    /// again.
    mirror: Option<Arc<OwnedFd>>,
}

/// What a guest process waits for (deadlock detection).
#[derive(Clone, Copy)]
struct Waiter {
    file: FileId,
    request: Lock,
}

struct Table {
    files: BTreeMap<FileId, FileLocks>,
    waiting: BTreeMap<u32, Waiter>,
}

static TABLE: Mutex<Table> = Mutex::new(Table { files: BTreeMap::new(), waiting: BTreeMap::new() });
/// The number of files with locks: a close looks at the table only when
/// some file has locks.
static LOCKED_FILES: AtomicUsize = AtomicUsize::new(0);
/// Notified whenever a lock goes or shrinks: guests waiting for another
/// guest's lock look again.
pub static CHANGED: Event = Event::new();

/// Linux's limit on the chain of waiters posix_locks_deadlock follows.
const MAX_DEADLK_ITERATIONS: usize = 10;

fn file_id(file: &OpenFile) -> Result<FileId, Errno> {
    let st = hostfs::fstat(file.fd())?;
    Ok((st.st_dev, st.st_ino))
}

/// Linux's flock64_to_posix_lock: the bytes a struct flock names, for a
/// description whose offset and size are asked only when needed.
pub fn range_of(file: &OpenFile, fl: &Flock) -> Result<(u64, u64), Errno> {
    let base: i64 = match fl.l_whence as i32 {
        libc::SEEK_SET => 0,
        // A pipe's position is 0, as its f_pos is.
        libc::SEEK_CUR => hostfs::lseek(file.fd(), 0, libc::SEEK_CUR).map_or(0, |p| p as i64),
        libc::SEEK_END => hostfs::fstat(file.fd())?.st_size,
        _ => return Err(Errno::EINVAL),
    };
    let max = OFFSET_MAX as i64;
    if fl.l_start > max - base {
        return Err(Errno::EOVERFLOW);
    }
    let mut start = base + fl.l_start;
    if start < 0 {
        return Err(Errno::EINVAL);
    }
    let end;
    if fl.l_len > 0 {
        if fl.l_len - 1 > max - start {
            return Err(Errno::EOVERFLOW);
        }
        end = start + fl.l_len - 1;
    } else if fl.l_len < 0 {
        if start + fl.l_len < 0 {
            return Err(Errno::EINVAL);
        }
        end = start - 1;
        start += fl.l_len;
    } else {
        end = max;
    }
    Ok((start as u64, end as u64))
}

/// Fills `fl` with `lock` as F_GETLK reports a conflict.
pub fn report(fl: &mut Flock, lock: &Lock) {
    fl.l_type = lock.kind.l_type();
    fl.l_whence = libc::SEEK_SET as i16;
    fl.l_start = lock.start as i64;
    fl.l_len = if lock.end == OFFSET_MAX { 0 } else { (lock.end - lock.start + 1) as i64 };
    fl.l_pid = lock.owner as i32;
}

/// The first guest lock of another owner than `request`'s that conflicts
/// with it (owner 0, which is no process, sees every guest's).
pub fn conflict(file: &OpenFile, request: &Lock) -> Result<Option<Lock>, Errno> {
    if LOCKED_FILES.load(Ordering::SeqCst) == 0 {
        return Ok(None);
    }
    let id = file_id(file)?;
    let table = TABLE.lock().unwrap();
    Ok(table.files.get(&id).and_then(|f| first_conflict(&f.locks, request)))
}

fn first_conflict(locks: &[Lock], request: &Lock) -> Option<Lock> {
    locks
        .iter()
        .find(|l| l.owner != request.owner && l.overlaps(request.start, request.end) && l.kind.conflicts(request.kind))
        .copied()
}

/// F_GETLK's question to the host, when no guest's lock conflicts: the
/// mirror (if the file has one) holds the guests' own locks, so it asks
/// there, with an OFD test that ignores them; a file without one has no
/// guest POSIX lock at all, and a POSIX test on the guest's description
/// finds host processes' locks and OFD locks, the guest's own included.
pub fn host_test(file: &OpenFile, request: &Lock) -> Result<Option<Flock>, Errno> {
    let mirror = {
        let table = TABLE.lock().unwrap();
        match file_id(file) {
            Ok(id) => table.files.get(&id).and_then(|f| f.mirror.clone()),
            Err(_) => None,
        }
    };
    let mut fl = Flock {
        l_type: request.kind.l_type(),
        l_whence: libc::SEEK_SET as i16,
        l_start: request.start as i64,
        l_len: if request.end == OFFSET_MAX { 0 } else { (request.end - request.start + 1) as i64 },
        ..Flock::default()
    };
    let r = match &mirror {
        Some(m) => hostfs::fcntl_lock(m.as_fd(), F_OFD_GETLK, &mut fl),
        None => hostfs::fcntl_lock(file.fd(), F_GETLK, &mut fl),
    };
    match r {
        Ok(()) if fl.l_type != F_UNLCK => Ok(Some(fl)),
        Ok(()) => Ok(None),
        // A mirror opened read-only cannot test for a write lock: no answer
        // from the host then.
        Err(Errno::EBADF) if mirror.is_some() => Ok(None),
        Err(e) => Err(e),
    }
}

/// How a try at setting a lock ended.
pub enum Outcome {
    Done,
    /// Another guest's lock is in the way (and the caller, if it may wait,
    /// is recorded as waiting for it).
    Blocked,
    /// A host process's lock (or an OFD lock) is in the way of bytes
    /// `start..=end`, taken as `kind`, on the mirror.
    HostBusy {
        mirror: Arc<OwnedFd>,
        kind: Kind,
        start: u64,
        end: u64,
    },
}

/// Tries to set `request` (kind None: unlock) for its owner. With `wait`,
/// a guest conflict records the owner as waiting (see [`stop_waiting`])
/// after checking that the wait would not deadlock (EDEADLK).
pub fn try_set(file: &OpenFile, request: Lock, unlock: bool, wait: bool) -> Result<Outcome, Errno> {
    let id = file_id(file)?;
    let mut table = TABLE.lock().unwrap();
    let table = &mut *table;
    if !unlock {
        let blocker = table.files.get(&id).and_then(|f| first_conflict(&f.locks, &request));
        if let Some(blocker) = blocker {
            if !wait {
                return Ok(Outcome::Blocked);
            }
            if deadlocks(table, request.owner, blocker.owner) {
                return Err(Errno::EDEADLK);
            }
            table.waiting.insert(request.owner, Waiter { file: id, request });
            return Ok(Outcome::Blocked);
        }
    }
    match table.files.get_mut(&id) {
        None if unlock => return Ok(Outcome::Done),
        None => {
            let mirror = open_mirror(file);
            table.files.insert(id, FileLocks { locks: Vec::new(), mirror });
            LOCKED_FILES.fetch_add(1, Ordering::SeqCst);
        }
        Some(entry) if entry.mirror.is_none() && !unlock => entry.mirror = open_mirror(file),
        Some(_) => {}
    }
    set_in(table, id, request, unlock)
}

fn set_in(table: &mut Table, id: FileId, request: Lock, unlock: bool) -> Result<Outcome, Errno> {
    let entry = table.files.get_mut(&id).expect("the file's entry");
    let new = apply(&entry.locks, &request, unlock);
    let (start, end) = (request.start, request.end);
    if let Some(mirror) = entry.mirror.clone() {
        if let Err(busy) = sync_host(&mirror, &entry.locks, &new, start, end) {
            if entry.locks.is_empty() {
                forget(table, id);
            }
            return busy;
        }
    }
    let shrank = unlock || entry.locks.iter().any(|l| l.owner == request.owner);
    entry.locks = new;
    if entry.locks.is_empty() {
        forget(table, id);
    }
    if shrank {
        CHANGED.notify();
    }
    Ok(Outcome::Done)
}

fn forget(table: &mut Table, id: FileId) {
    if table.files.remove(&id).is_some() {
        LOCKED_FILES.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A new host description of a regular file, read-write if the host
/// allows it, else with the guest's own access.
fn open_mirror(file: &OpenFile) -> Option<Arc<OwnedFd>> {
    if file.kind() != FileKind::Regular {
        return None;
    }
    let flags = libc::O_NOCTTY | libc::O_NONBLOCK;
    hostfs::reopen(file.fd(), libc::O_RDWR | flags)
        .or_else(|_| hostfs::reopen(file.fd(), file.access_mode() | flags))
        .ok()
        .map(Arc::new)
}

/// Whether `owner` waiting for `blocker` closes a circle of waiters
/// (Linux's posix_locks_deadlock).
fn deadlocks(table: &Table, owner: u32, mut blocker: u32) -> bool {
    for _ in 0..=MAX_DEADLK_ITERATIONS {
        let Some(w) = table.waiting.get(&blocker) else { return false };
        let Some(next) = table.files.get(&w.file).and_then(|f| first_conflict(&f.locks, &w.request)) else {
            return false;
        };
        if next.owner == owner {
            return true;
        }
        blocker = next.owner;
    }
    false
}

/// The owner no longer waits (its lock was set, or its wait ended).
pub fn stop_waiting(owner: u32) {
    TABLE.lock().unwrap().waiting.remove(&owner);
}

/// The locks after `request`: the owner's locks in its range go, the new
/// one comes, merged with the owner's locks of its kind that it overlaps
/// or touches (Linux's posix_lock_inode).
fn apply(locks: &[Lock], request: &Lock, unlock: bool) -> Vec<Lock> {
    let mut new = Vec::with_capacity(locks.len() + 2);
    let (mut start, mut end) = (request.start, request.end);
    if !unlock {
        for l in locks.iter().filter(|l| l.owner == request.owner && l.kind == request.kind) {
            let touches = l.end.saturating_add(1) >= start && l.start <= end.saturating_add(1);
            if touches {
                start = start.min(l.start);
                end = end.max(l.end);
            }
        }
    }
    let mut placed = unlock;
    for l in locks {
        if l.owner != request.owner || !l.overlaps(start, end) {
            // Adjacent locks of the same kind were merged into the range.
            let merged = !unlock
                && l.owner == request.owner
                && l.kind == request.kind
                && l.end.saturating_add(1) >= start
                && l.start <= end.saturating_add(1);
            if !merged {
                new.push(*l);
            }
            continue;
        }
        if l.start < start {
            new.push(Lock { end: start - 1, ..*l });
        }
        if !placed {
            new.push(Lock { start, end, ..*request });
            placed = true;
        }
        if l.end > end {
            new.push(Lock { start: end + 1, ..*l });
        }
    }
    if !placed {
        new.push(Lock { start, end, ..*request });
    }
    new
}

/// The strongest lock any guest holds at each stretch of `start..=end`:
/// (first, last, kind), consecutive stretches of different kinds.
fn union(locks: &[Lock], start: u64, end: u64) -> Vec<(u64, u64, Option<Kind>)> {
    let mut cuts = vec![start];
    for l in locks.iter().filter(|l| l.overlaps(start, end)) {
        if l.start > start {
            cuts.push(l.start);
        }
        if l.end < end {
            cuts.push(l.end + 1);
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    let mut out: Vec<(u64, u64, Option<Kind>)> = Vec::new();
    for (i, &s) in cuts.iter().enumerate() {
        let e = cuts.get(i + 1).map_or(end, |&n| n - 1);
        let kind = locks.iter().filter(|l| l.overlaps(s, e)).map(|l| l.kind).max();
        match out.last_mut() {
            Some(last) if last.2 == kind => last.1 = e,
            _ => out.push((s, e, kind)),
        }
    }
    out
}

fn set_host(mirror: &OwnedFd, kind: Option<Kind>, start: u64, end: u64) -> Result<(), Errno> {
    let mut fl = Flock {
        l_type: kind.map_or(F_UNLCK, Kind::l_type),
        l_whence: libc::SEEK_SET as i16,
        l_start: start as i64,
        l_len: if end == OFFSET_MAX { 0 } else { (end - start + 1) as i64 },
        ..Flock::default()
    };
    match hostfs::fcntl_lock(mirror.as_fd(), F_OFD_SETLK, &mut fl) {
        // A mirror opened read-only cannot hold a write lock: host processes
        // then do not see that one.
        Err(Errno::EBADF) => Ok(()),
        r => r,
    }
}

/// Moves the mirror's locks over `start..=end` from the union of `old` to
/// that of `new`: first what it gains (which a host lock may refuse), then
/// what it gives up (which nothing refuses). On a refusal it puts back what
/// it changed and reports where it was refused.
fn sync_host(mirror: &Arc<OwnedFd>, old: &[Lock], new: &[Lock], start: u64, end: u64) -> Result<(), SysOutcome> {
    let before = union(old, start, end);
    let after = union(new, start, end);
    let kind_at = |stretches: &[(u64, u64, Option<Kind>)], at: u64| {
        stretches.iter().find(|s| s.0 <= at && at <= s.1).and_then(|s| s.2)
    };
    // Stretches where the kind changes, cut at both sets' edges.
    let mut cuts: Vec<u64> = before.iter().chain(after.iter()).map(|s| s.0).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut changes = Vec::new();
    for (i, &s) in cuts.iter().enumerate() {
        let e = cuts.get(i + 1).map_or(end, |&n| n - 1);
        let (was, now) = (kind_at(&before, s), kind_at(&after, s));
        if was != now {
            changes.push((s, e, was, now));
        }
    }
    // Gains first, write locks before read locks; then the rest.
    changes.sort_by_key(|&(s, _, was, now)| {
        let gain = now > was;
        (!gain, std::cmp::Reverse(now), s)
    });
    for (i, &(s, e, _, now)) in changes.iter().enumerate() {
        if let Err(err) = set_host(mirror, now, s, e) {
            for &(s, e, was, _) in &changes[..i] {
                let _ = set_host(mirror, was, s, e);
            }
            return Err(match err {
                Errno::EAGAIN | Errno::EACCES => {
                    Ok(Outcome::HostBusy { mirror: mirror.clone(), kind: now.unwrap_or(Kind::Read), start: s, end: e })
                }
                other => Err(other),
            });
        }
    }
    Ok(())
}

type SysOutcome = Result<Outcome, Errno>;

/// Waits on the host until the mirror can take `kind` over `start..=end`
/// (a kick ends it with EINTR), then gives it back to what the table says:
/// the caller tries again from the start.
pub fn wait_host(file: &OpenFile, mirror: &Arc<OwnedFd>, kind: Kind, start: u64, end: u64) -> Result<(), Errno> {
    let mut fl = Flock {
        l_type: kind.l_type(),
        l_whence: libc::SEEK_SET as i16,
        l_start: start as i64,
        l_len: if end == OFFSET_MAX { 0 } else { (end - start + 1) as i64 },
        ..Flock::default()
    };
    hostfs::fcntl_lock_wait(mirror.as_fd(), F_OFD_SETLKW, &mut fl)?;
    resync(file, mirror, start, end);
    Ok(())
}

/// Sets the mirror's locks over `start..=end` back to the table's union
/// (only ever lowers them).
fn resync(file: &OpenFile, mirror: &Arc<OwnedFd>, start: u64, end: u64) {
    let table = TABLE.lock().unwrap();
    // A mirror the file no longer has (its locks all went meanwhile) just
    // gives up what it took.
    let locks = file_id(file)
        .ok()
        .and_then(|id| table.files.get(&id))
        .filter(|f| f.mirror.as_ref().is_some_and(|m| Arc::ptr_eq(m, mirror)))
        .map_or(&[][..], |f| &f.locks[..]);
    for (s, e, kind) in union(locks, start, end) {
        let _ = set_host(mirror, kind, s, e);
    }
}

/// `owner` closed a descriptor of each of `files`: its locks on them go
/// (Linux's locks_remove_posix, from filp_flush).
pub fn closed<'a>(owner: u32, files: impl IntoIterator<Item = &'a Arc<OpenFile>>) {
    if LOCKED_FILES.load(Ordering::SeqCst) == 0 {
        return;
    }
    for file in files {
        if let Ok(id) = file_id(file) {
            let mut table = TABLE.lock().unwrap();
            if table.files.get(&id).is_some_and(|f| f.locks.iter().any(|l| l.owner == owner)) {
                remove_owner(&mut table, id, owner);
            }
        }
    }
}

/// `owner` exited: all its locks go.
pub fn exited(owner: u32) {
    if LOCKED_FILES.load(Ordering::SeqCst) == 0 {
        return;
    }
    let mut table = TABLE.lock().unwrap();
    table.waiting.remove(&owner);
    let ids: Vec<FileId> =
        table.files.iter().filter(|(_, f)| f.locks.iter().any(|l| l.owner == owner)).map(|(id, _)| *id).collect();
    for id in ids {
        remove_owner(&mut table, id, owner);
    }
}

fn remove_owner(table: &mut Table, id: FileId, owner: u32) {
    let entry = table.files.get_mut(&id).expect("the file's entry");
    let new: Vec<Lock> = entry.locks.iter().filter(|l| l.owner != owner).copied().collect();
    if let Some(mirror) = entry.mirror.clone() {
        // Only lowers the mirror's locks: nothing refuses that.
        let _ = sync_host(&mirror, &entry.locks, &new, 0, OFFSET_MAX);
    }
    entry.locks = new;
    if entry.locks.is_empty() {
        forget(table, id);
    }
    CHANGED.notify();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(owner: u32, kind: Kind, start: u64, end: u64) -> Lock {
        Lock { owner, kind, start, end }
    }

    #[test]
    fn a_lock_in_the_middle_of_another_kind_splits_it() {
        let old = [lock(1, Kind::Write, 0, 99)];
        let new = apply(&old, &lock(1, Kind::Read, 10, 19), false);
        assert_eq!(new, vec![lock(1, Kind::Write, 0, 9), lock(1, Kind::Read, 10, 19), lock(1, Kind::Write, 20, 99)]);
    }

    #[test]
    fn touching_locks_of_one_kind_merge() {
        let old = [lock(1, Kind::Read, 0, 9), lock(2, Kind::Read, 10, 19)];
        let new = apply(&old, &lock(1, Kind::Read, 10, 14), false);
        assert_eq!(new, vec![lock(1, Kind::Read, 0, 14), lock(2, Kind::Read, 10, 19)]);
    }

    #[test]
    fn unlocking_the_middle_leaves_both_ends() {
        let old = [lock(1, Kind::Read, 0, OFFSET_MAX)];
        let new = apply(&old, &lock(1, Kind::Read, 5, 9), true);
        assert_eq!(new, vec![lock(1, Kind::Read, 0, 4), lock(1, Kind::Read, 10, OFFSET_MAX)]);
    }

    #[test]
    fn the_union_takes_the_strongest_kind() {
        let locks = [lock(1, Kind::Read, 0, 9), lock(2, Kind::Read, 5, 14), lock(3, Kind::Write, 20, 29)];
        assert_eq!(
            union(&locks, 0, 40),
            vec![(0, 14, Some(Kind::Read)), (15, 19, None), (20, 29, Some(Kind::Write)), (30, 40, None)]
        );
    }
}
