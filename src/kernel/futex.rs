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
use std::sync::atomic::{AtomicU8, Ordering};
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
/// Handed the lock by its owner's unlock: the word names it already.
const GRANTED: u8 = 1;
/// Handed the lock by its owner's death: it writes its TID into the word.
const GRANTED_OWNER_DIED: u8 = 2;

/// A thread waiting in FUTEX_LOCK_PI.
pub struct PiWaiter {
    tid: u32,
    state: AtomicU8,
    /// Notified when the lock is handed to it.
    pub event: Event,
}

impl PiWaiter {
    pub fn granted(&self) -> bool {
        self.state.load(Ordering::SeqCst) != WAITING
    }
}

/// The kernel side of a PI futex that has waiters (Linux's pi_state).
struct PiState {
    /// The TID the word names; None once it died and until a waiter takes
    /// the lock over.
    owner: Option<u32>,
    waiters: VecDeque<Arc<PiWaiter>>,
}

/// Every PI futex with waiters, by address: one address space holds every
/// guest, so an address names one word, shared or not. Its lock comes
/// before the address space's and the task table's.
#[derive(Default)]
pub struct PiFutexes {
    table: Mutex<HashMap<u64, PiState>>,
}

/// What FUTEX_LOCK_PI did.
pub enum Locked {
    /// The caller owns the lock.
    Now,
    /// The caller waits in this queue until it is handed the lock.
    Queued(Arc<PiWaiter>),
}

impl PiFutexes {
    /// FUTEX_LOCK_PI's first step (Linux's futex_lock_pi_atomic): takes a
    /// free lock, or sets FUTEX_WAITERS and queues the caller behind its
    /// owner; with `trylock`, EAGAIN instead of queueing.
    pub fn lock(&self, kernel: &Kernel, mem: &UserMem, addr: u64, tid: u32, trylock: bool) -> Result<Locked, Errno> {
        let mut table = self.table.lock().unwrap();
        loop {
            let uval = mem.read::<u32>(addr)?;
            let owner = uval & FUTEX_TID_MASK;
            if owner == tid {
                return Err(Errno::EDEADLK);
            }
            if let Some(state) = table.get_mut(&addr) {
                // Waiters already: the word must agree with who owns it
                // (attach_to_pi_state); otherwise user space changed it.
                let consistent = match (uval & FUTEX_OWNER_DIED != 0, state.owner) {
                    (true, None) => owner == 0,
                    (true, Some(o)) => owner == 0 || owner == o,
                    (false, None) => false,
                    (false, Some(o)) => owner == o,
                };
                if !consistent {
                    return Err(Errno::EINVAL);
                }
                if trylock {
                    return Err(Errno::EAGAIN);
                }
                let w = Arc::new(PiWaiter { tid, state: AtomicU8::new(WAITING), event: Event::new() });
                state.waiters.push_back(w.clone());
                return Ok(Locked::Queued(w));
            }
            if owner == 0 {
                // Free (with only the bits set): take it, keeping
                // FUTEX_OWNER_DIED for the new owner to see.
                let new = (uval & FUTEX_OWNER_DIED) | tid;
                if mem.cmpxchg_u32(addr, uval, new)? == uval {
                    return Ok(Locked::Now);
                }
                continue;
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
            if trylock {
                return Err(Errno::EAGAIN);
            }
            let w = Arc::new(PiWaiter { tid, state: AtomicU8::new(WAITING), event: Event::new() });
            table.insert(addr, PiState { owner: Some(owner), waiters: VecDeque::from([w.clone()]) });
            return Ok(Locked::Queued(w));
        }
    }

    /// After the wait of `w`: true if it owns the lock (it was handed it,
    /// even if a signal or the timeout came too), false if it left the
    /// queue without it.
    pub fn finish_wait(&self, mem: &UserMem, addr: u64, w: &Arc<PiWaiter>) -> Result<bool, Errno> {
        let mut table = self.table.lock().unwrap();
        match w.state.load(Ordering::SeqCst) {
            GRANTED => Ok(true),
            GRANTED_OWNER_DIED => {
                // Linux's fixup_pi_state_owner: the word names the new
                // owner, with FUTEX_OWNER_DIED for it to see.
                let more = table.get(&addr).is_some();
                let mut uval = mem.read::<u32>(addr)?;
                loop {
                    let new = FUTEX_OWNER_DIED | w.tid | if more { FUTEX_WAITERS } else { 0 };
                    let found = mem.cmpxchg_u32(addr, uval, new)?;
                    if found == uval {
                        return Ok(true);
                    }
                    uval = found;
                }
            }
            _ => {
                if let Some(state) = table.get_mut(&addr) {
                    state.waiters.retain(|x| !Arc::ptr_eq(x, w));
                    if state.waiters.is_empty() {
                        table.remove(&addr);
                    }
                }
                Ok(false)
            }
        }
    }

    /// FUTEX_UNLOCK_PI: hands the lock to the first waiter, or frees it.
    pub fn unlock(&self, mem: &UserMem, addr: u64, tid: u32) -> Result<(), Errno> {
        let mut table = self.table.lock().unwrap();
        loop {
            let uval = mem.read::<u32>(addr)?;
            if uval & FUTEX_TID_MASK != tid {
                return Err(Errno::EPERM);
            }
            let Some(state) = table.get_mut(&addr) else {
                // No waiters: free, without FUTEX_WAITERS or
                // FUTEX_OWNER_DIED. A word changed meanwhile is user
                // space's to look at again.
                return if mem.cmpxchg_u32(addr, uval, 0)? == uval { Ok(()) } else { Err(Errno::EAGAIN) };
            };
            if state.owner != Some(tid) {
                return Err(Errno::EINVAL);
            }
            let next = state.waiters.front().unwrap().clone();
            if mem.cmpxchg_u32(addr, uval, FUTEX_WAITERS | next.tid)? != uval {
                continue;
            }
            state.waiters.pop_front();
            state.owner = Some(next.tid);
            if state.waiters.is_empty() {
                table.remove(&addr);
            }
            next.state.store(GRANTED, Ordering::SeqCst);
            next.event.notify();
            return Ok(());
        }
    }

    /// A thread is dying or calls execve (after its robust list was
    /// walked): the PI locks it owns that have waiters go to their first
    /// waiters (Linux's exit_pi_state_list); once `dead`, no waiter queues
    /// behind it.
    pub fn owner_exited(&self, thread: &super::process::Thread, dead: bool) {
        let mut table = self.table.lock().unwrap();
        if dead {
            thread.futex_dead.store(true, Ordering::SeqCst);
        }
        let mut emptied = Vec::new();
        for (addr, state) in table.iter_mut() {
            if state.owner != Some(thread.tid) {
                continue;
            }
            let next = state.waiters.pop_front().unwrap();
            state.owner = Some(next.tid);
            if state.waiters.is_empty() {
                emptied.push(*addr);
            }
            next.state.store(GRANTED_OWNER_DIED, Ordering::SeqCst);
            next.event.notify();
        }
        for addr in emptied {
            table.remove(&addr);
        }
    }
}
