//! Robust futexes (what a dying thread does for the locks it held) and
//! priority-inheritance futexes (FUTEX_LOCK_PI and friends).
//!
//! A PI futex's word holds its owner's TID (a guest TID, which the host
//! kernel does not know, so these cannot be host PI futexes), FUTEX_WAITERS
//! and FUTEX_OWNER_DIED. Guest code takes a free lock and frees one with no
//! waiters by itself; nomu sees the rest: a waiter queues here, and an
//! unlock hands the lock to the first waiter by writing its TID into the
//! word, as Linux's pi_state does. Every guest thread is a host thread of
//! normal priority, so the owner's priority is never raised: the order of
//! the hand-off is first come, first served.

use super::waiter::Event;
use super::Kernel;
use crate::abi::errno::Errno;
use crate::mm::uaccess::UserMem;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

pub const FUTEX_WAITERS: u32 = 0x8000_0000;
pub const FUTEX_OWNER_DIED: u32 = 0x4000_0000;
pub const FUTEX_TID_MASK: u32 = 0x3fff_ffff;
/// Linux's ROBUST_LIST_LIMIT: a bound against cyclic lists.
const ROBUST_LIST_LIMIT: usize = 2048;

/// Marks a futex the dead thread `tid` owned as FUTEX_OWNER_DIED and wakes
/// a waiter of a non-PI one (Linux's handle_futex_death; a PI futex's
/// waiter is handed the lock by PiFutexes::owner_exited).
fn futex_death(mem: &UserMem, addr: u64, tid: u32, pi: bool, pending_op: bool) {
    let wake = || {
        if let Ok(w) = mem.checked_range(addr, 4, true) {
            let _ = crate::host::sys::futex_wake(w, 1, u32::MAX);
        }
    };
    if !addr.is_multiple_of(4) {
        return;
    }
    let Ok(mut val) = mem.read::<u32>(addr) else { return };
    // A lock the thread was about to take when it died, free now: its
    // waiters may sleep with nobody left to wake them.
    if pending_op && !pi && val == 0 {
        wake();
        return;
    }
    loop {
        if val & FUTEX_TID_MASK != tid {
            return;
        }
        let new = (val & FUTEX_WAITERS) | FUTEX_OWNER_DIED;
        match mem.cmpxchg_u32(addr, val, new) {
            Ok(found) if found == val => break,
            Ok(found) => val = found,
            Err(_) => return,
        }
    }
    if !pi && val & FUTEX_WAITERS != 0 {
        wake();
    }
}

/// Walks the robust list registered with set_robust_list (struct
/// robust_list_head: next, futex_offset, list_op_pending); an entry's low
/// bit says its futex is a PI one.
pub fn exit_robust_list(mem: &UserMem, head: u64, tid: u32) {
    let Ok([first, offset, pending]) = mem.read::<[u64; 3]>(head) else { return };
    let offset = offset as i64;
    let mut entry = first;
    for _ in 0..ROBUST_LIST_LIMIT {
        if entry == head || entry == 0 {
            break;
        }
        let next = mem.read::<u64>(entry & !1).unwrap_or(head);
        if entry != pending {
            futex_death(mem, (entry & !1).wrapping_add_signed(offset), tid, entry & 1 != 0, false);
        }
        entry = next;
    }
    if pending != 0 {
        futex_death(mem, (pending & !1).wrapping_add_signed(offset), tid, pending & 1 != 0, true);
    }
}

const WAITING: u8 = 0;
/// Handed the lock by its owner's unlock (or by a requeue that took it
/// for it): the word names it already.
const GRANTED: u8 = 1;
/// Handed the lock by its owner's death: it writes its TID into the word.
const GRANTED_OWNER_DIED: u8 = 2;

/// A thread waiting in FUTEX_LOCK_PI, or in FUTEX_WAIT_REQUEUE_PI (first
/// on its plain futex, then, once requeued, on the PI futex).
pub struct PiWaiter {
    tid: u32,
    state: AtomicU8,
    /// The PI futex a FUTEX_WAIT_REQUEUE_PI waiter may be requeued to.
    pi_addr: u64,
    /// It waits on the PI futex now (always, for FUTEX_LOCK_PI).
    requeued: AtomicBool,
    /// Notified when the lock is handed to it.
    pub event: Event,
}

impl PiWaiter {
    fn new(tid: u32, pi_addr: u64, requeued: bool) -> Arc<PiWaiter> {
        Arc::new(PiWaiter {
            tid,
            state: AtomicU8::new(WAITING),
            pi_addr,
            requeued: AtomicBool::new(requeued),
            event: Event::new(),
        })
    }

    pub fn granted(&self) -> bool {
        self.state.load(Ordering::SeqCst) != WAITING
    }

    fn grant(&self, how: u8) {
        self.state.store(how, Ordering::SeqCst);
        self.event.notify();
    }
}

/// The kernel side of a PI futex that has waiters (Linux's pi_state).
struct PiState {
    /// The TID the word names; None once it died and until a waiter takes
    /// the lock over.
    owner: Option<u32>,
    waiters: VecDeque<Arc<PiWaiter>>,
}

#[derive(Default)]
struct Tables {
    /// PI futexes with waiters, by address.
    pi: HashMap<u64, PiState>,
    /// FUTEX_WAIT_REQUEUE_PI waiters not yet requeued, by the address of
    /// the plain futex they wait on.
    requeue: HashMap<u64, VecDeque<Arc<PiWaiter>>>,
}

/// Every PI futex with waiters, by address: one address space holds every
/// guest, so an address names one word, shared or not. Its lock comes
/// before the address space's and the task table's.
#[derive(Default)]
pub struct PiFutexes {
    tables: Mutex<Tables>,
}

/// What FUTEX_LOCK_PI did.
pub enum Locked {
    /// The caller owns the lock.
    Now,
    /// The caller waits in this queue until it is handed the lock.
    Queued(Arc<PiWaiter>),
}

/// What futex_lock_pi_atomic found.
enum Atomic {
    /// The lock was free and is now `tid`'s.
    Acquired,
    /// Owned: `tid` must queue behind its waiters (a PiState exists).
    Contended,
}

/// How a wait on a PI futex ended.
pub enum WaitEnd {
    /// The waiter owns the lock.
    Owned,
    /// It left the PI futex's queue without the lock.
    Left,
    /// A FUTEX_WAIT_REQUEUE_PI waiter left before it was requeued.
    LeftUnrequeued,
}

/// Linux's futex_lock_pi_atomic for `tid`: takes a free lock (with
/// FUTEX_WAITERS too if `set_waiters`, and then a PiState for more waiters
/// to come), or sets FUTEX_WAITERS and makes sure a PiState names the
/// owner. The caller holds the tables' lock.
fn lock_pi_atomic(
    pi: &mut HashMap<u64, PiState>,
    kernel: &Kernel,
    mem: &UserMem,
    addr: u64,
    tid: u32,
    set_waiters: bool,
) -> Result<Atomic, Errno> {
    loop {
        let uval = mem.read::<u32>(addr)?;
        let owner = uval & FUTEX_TID_MASK;
        if owner == tid {
            return Err(Errno::EDEADLK);
        }
        if let Some(state) = pi.get(&addr) {
            // Waiters already: the word must agree with who owns it
            // (attach_to_pi_state); otherwise user space changed it.
            let consistent = match (uval & FUTEX_OWNER_DIED != 0, state.owner) {
                (true, None) => owner == 0,
                (true, Some(o)) => owner == 0 || owner == o,
                (false, None) => false,
                (false, Some(o)) => owner == o,
            };
            return if consistent { Ok(Atomic::Contended) } else { Err(Errno::EINVAL) };
        }
        if owner == 0 {
            // Free (with only the bits set): take it, keeping
            // FUTEX_OWNER_DIED for the new owner to see.
            let new = (uval & FUTEX_OWNER_DIED) | tid | if set_waiters { FUTEX_WAITERS } else { 0 };
            if mem.cmpxchg_u32(addr, uval, new)? != uval {
                continue;
            }
            if set_waiters {
                pi.insert(addr, PiState { owner: Some(tid), waiters: VecDeque::new() });
            }
            return Ok(Atomic::Acquired);
        }
        // The first waiter: FUTEX_WAITERS sends the owner's unlock here.
        let new = uval | FUTEX_WAITERS;
        if mem.cmpxchg_u32(addr, uval, new)? != uval {
            continue;
        }
        let alive = kernel.find_thread(owner).is_some_and(|t| !t.futex_dead.load(Ordering::SeqCst));
        if !alive {
            // No such thread (or one whose locks were already let go):
            // ESRCH, unless the word changed meanwhile.
            if mem.read::<u32>(addr)? != new {
                continue;
            }
            return Err(Errno::ESRCH);
        }
        pi.insert(addr, PiState { owner: Some(owner), waiters: VecDeque::new() });
        return Ok(Atomic::Contended);
    }
}

/// Drops the PiState of `addr` if no waiter is left in it.
fn drop_if_unwaited(pi: &mut HashMap<u64, PiState>, addr: u64) {
    if pi.get(&addr).is_some_and(|s| s.waiters.is_empty()) {
        pi.remove(&addr);
    }
}

impl PiFutexes {
    /// FUTEX_LOCK_PI's first step: takes a free lock, or sets
    /// FUTEX_WAITERS and queues the caller behind its owner; with
    /// `trylock`, EAGAIN instead of queueing.
    pub fn lock(&self, kernel: &Kernel, mem: &UserMem, addr: u64, tid: u32, trylock: bool) -> Result<Locked, Errno> {
        let mut t = self.tables.lock().unwrap();
        match lock_pi_atomic(&mut t.pi, kernel, mem, addr, tid, false)? {
            Atomic::Acquired => Ok(Locked::Now),
            Atomic::Contended if trylock => {
                drop_if_unwaited(&mut t.pi, addr);
                Err(Errno::EAGAIN)
            }
            Atomic::Contended => {
                let w = PiWaiter::new(tid, addr, true);
                t.pi.get_mut(&addr).unwrap().waiters.push_back(w.clone());
                Ok(Locked::Queued(w))
            }
        }
    }

    /// FUTEX_WAIT_REQUEUE_PI's first step: queues the caller on the plain
    /// futex `addr` if it holds `val` (else EAGAIN), to be requeued to the
    /// PI futex `pi_addr`.
    pub fn wait_requeue(
        &self,
        mem: &UserMem,
        addr: u64,
        val: u32,
        pi_addr: u64,
        tid: u32,
    ) -> Result<Arc<PiWaiter>, Errno> {
        let mut t = self.tables.lock().unwrap();
        if mem.read::<u32>(addr)? != val {
            return Err(Errno::EAGAIN);
        }
        let w = PiWaiter::new(tid, pi_addr, false);
        t.requeue.entry(addr).or_default().push_back(w.clone());
        Ok(w)
    }

    /// FUTEX_CMP_REQUEUE_PI (Linux's futex_requeue with requeue_pi): if
    /// `addr` holds `cmpval`, takes the PI futex `pi_addr` for the first
    /// waiter if it is free (waking it), and moves the others, up to
    /// `nr_requeue` more (or the first too if the lock is owned) to the PI
    /// futex's queue. How many were woken or moved.
    pub fn cmp_requeue(
        &self,
        kernel: &Kernel,
        mem: &UserMem,
        addr: u64,
        nr_requeue: u32,
        pi_addr: u64,
        cmpval: u32,
    ) -> Result<u64, Errno> {
        let mut guard = self.tables.lock().unwrap();
        let t = &mut *guard;
        if mem.read::<u32>(addr)? != cmpval {
            return Err(Errno::EAGAIN);
        }
        let Some(top) = t.requeue.get(&addr).and_then(|q| q.front()).cloned() else { return Ok(0) };
        if top.pi_addr != pi_addr {
            return Err(Errno::EINVAL);
        }
        let mut count: u64 = 0;
        let queue = t.requeue.get_mut(&addr).unwrap();
        if let Atomic::Acquired = lock_pi_atomic(&mut t.pi, kernel, mem, pi_addr, top.tid, nr_requeue > 0)? {
            queue.pop_front();
            top.grant(GRANTED);
            count = 1;
        }
        let mut result = Ok(());
        while count < u64::from(nr_requeue) + 1 {
            let Some(w) = queue.front() else { break };
            if w.pi_addr != pi_addr {
                result = Err(Errno::EINVAL);
                break;
            }
            let w = queue.pop_front().unwrap();
            w.requeued.store(true, Ordering::SeqCst);
            // A PiState exists: lock_pi_atomic made or found one (or the
            // first waiter took the lock with FUTEX_WAITERS and one).
            t.pi.get_mut(&pi_addr).expect("a PI futex's state").waiters.push_back(w);
            count += 1;
        }
        if queue.is_empty() {
            t.requeue.remove(&addr);
        }
        drop_if_unwaited(&mut t.pi, pi_addr);
        result.map(|()| count)
    }

    /// After the wait of `w` on `addr` (its plain futex, for a
    /// FUTEX_WAIT_REQUEUE_PI waiter): whether it owns the lock (it was
    /// handed it, even if a signal or the timeout came too), or left.
    pub fn finish_wait(&self, mem: &UserMem, addr: u64, w: &Arc<PiWaiter>) -> Result<WaitEnd, Errno> {
        let mut t = self.tables.lock().unwrap();
        match w.state.load(Ordering::SeqCst) {
            GRANTED => Ok(WaitEnd::Owned),
            GRANTED_OWNER_DIED => {
                // Linux's fixup_pi_state_owner: the word names the new
                // owner, with FUTEX_OWNER_DIED for it to see.
                let more = t.pi.contains_key(&w.pi_addr);
                let mut uval = mem.read::<u32>(w.pi_addr)?;
                loop {
                    let new = FUTEX_OWNER_DIED | w.tid | if more { FUTEX_WAITERS } else { 0 };
                    let found = mem.cmpxchg_u32(w.pi_addr, uval, new)?;
                    if found == uval {
                        return Ok(WaitEnd::Owned);
                    }
                    uval = found;
                }
            }
            _ if w.requeued.load(Ordering::SeqCst) => {
                if let Some(state) = t.pi.get_mut(&w.pi_addr) {
                    state.waiters.retain(|x| !Arc::ptr_eq(x, w));
                }
                drop_if_unwaited(&mut t.pi, w.pi_addr);
                Ok(WaitEnd::Left)
            }
            _ => {
                if let Some(q) = t.requeue.get_mut(&addr) {
                    q.retain(|x| !Arc::ptr_eq(x, w));
                    if q.is_empty() {
                        t.requeue.remove(&addr);
                    }
                }
                Ok(WaitEnd::LeftUnrequeued)
            }
        }
    }

    /// FUTEX_UNLOCK_PI: hands the lock to the first waiter, or frees it.
    pub fn unlock(&self, mem: &UserMem, addr: u64, tid: u32) -> Result<(), Errno> {
        let mut t = self.tables.lock().unwrap();
        loop {
            let uval = mem.read::<u32>(addr)?;
            if uval & FUTEX_TID_MASK != tid {
                return Err(Errno::EPERM);
            }
            let Some(state) = t.pi.get_mut(&addr) else {
                // No waiters: free, without FUTEX_WAITERS or
                // FUTEX_OWNER_DIED. A word changed meanwhile is user
                // space's to look at again.
                return if mem.cmpxchg_u32(addr, uval, 0)? == uval { Ok(()) } else { Err(Errno::EAGAIN) };
            };
            if state.owner != Some(tid) {
                return Err(Errno::EINVAL);
            }
            let Some(next) = state.waiters.front().cloned() else {
                // A state with no waiter left (the first waiter of a
                // requeue took the lock, none came after): free.
                t.pi.remove(&addr);
                continue;
            };
            if mem.cmpxchg_u32(addr, uval, FUTEX_WAITERS | next.tid)? != uval {
                continue;
            }
            state.waiters.pop_front();
            state.owner = Some(next.tid);
            drop_if_unwaited(&mut t.pi, addr);
            next.grant(GRANTED);
            return Ok(());
        }
    }

    /// A thread is dying or calls execve (after its robust list was
    /// walked): the PI locks it owns that have waiters go to their first
    /// waiters (Linux's exit_pi_state_list); once `dead`, no waiter queues
    /// behind it.
    pub fn owner_exited(&self, thread: &super::process::Thread, dead: bool) {
        let mut t = self.tables.lock().unwrap();
        if dead {
            thread.futex_dead.store(true, Ordering::SeqCst);
        }
        let mut emptied = Vec::new();
        for (addr, state) in t.pi.iter_mut() {
            if state.owner != Some(thread.tid()) {
                continue;
            }
            let Some(next) = state.waiters.pop_front() else {
                emptied.push(*addr);
                continue;
            };
            state.owner = Some(next.tid);
            if state.waiters.is_empty() {
                emptied.push(*addr);
            }
            next.grant(GRANTED_OWNER_DIED);
        }
        for addr in emptied {
            t.pi.remove(&addr);
        }
    }
}
