//! Robust futexes: what a dying thread does for the locks it held.

use crate::mm::uaccess::UserMem;

const FUTEX_WAITERS: u32 = 0x8000_0000;
const FUTEX_OWNER_DIED: u32 = 0x4000_0000;
const FUTEX_TID_MASK: u32 = 0x3fff_ffff;
/// Linux's ROBUST_LIST_LIMIT: a bound against cyclic lists.
const ROBUST_LIST_LIMIT: usize = 2048;

/// Marks a futex the dead thread `tid` owned as FUTEX_OWNER_DIED and wakes
/// a waiter (Linux's handle_futex_death).
fn futex_death(mem: &UserMem, addr: u64, tid: u32) {
    let Ok(val) = mem.read::<u32>(addr) else { return };
    if val & FUTEX_TID_MASK != tid {
        return;
    }
    let new = (val & FUTEX_WAITERS) | FUTEX_OWNER_DIED;
    if mem.write(addr, &new).is_err() {
        return;
    }
    if val & FUTEX_WAITERS != 0 {
        if let Ok(w) = mem.checked_range(addr, 4, true) {
            let _ = crate::host::sys::futex_wake(w, 1, u32::MAX);
        }
    }
}

/// Walks the robust list registered with set_robust_list (struct
/// robust_list_head: next, futex_offset, list_op_pending).
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
            futex_death(mem, (entry & !1).wrapping_add_signed(offset), tid);
        }
        entry = next;
    }
    if pending != 0 {
        futex_death(mem, (pending & !1).wrapping_add_signed(offset), tid);
    }
}
