//! mmap, munmap, mprotect, mremap, brk, madvise, msync.

use super::args::{Fd, Hex, MapFlags, Prot, UserPtr};
use super::file_ops::MapSource;
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::mm::space::{AddressSpace, Backing, Placement, Vma, VmaKind};
use crate::mm::{is_page_aligned, page_up, PAGE_SIZE};

const PROT_ALL: i32 = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
/// Accepted and ignored by mprotect (arch_validate_prot).
const PROT_SEM: i32 = 0x8;
const MAP_SHARED_VALIDATE: i32 = 3;
/// The mapping's type: four bits (Linux's MAP_TYPE).
const MAP_TYPE: i32 = 0x0f;
/// The flags MAP_SHARED_VALIDATE accepts (Linux's LEGACY_MAP_MASK).
const LEGACY_MAP_MASK: u64 = (libc::MAP_SHARED
    | libc::MAP_PRIVATE
    | libc::MAP_FIXED
    | libc::MAP_ANONYMOUS
    | libc::MAP_DENYWRITE
    | libc::MAP_EXECUTABLE
    | 0x400_0000 // MAP_UNINITIALIZED
    | libc::MAP_GROWSDOWN
    | libc::MAP_LOCKED
    | libc::MAP_NORESERVE
    | libc::MAP_POPULATE
    | libc::MAP_NONBLOCK
    | libc::MAP_STACK
    | libc::MAP_HUGETLB
    | libc::MAP_32BIT
    | 0x3f << 26) as u32 as u64; // MAP_HUGE_MASK (bit 31: not sign-extended)
/// The top of a 4-level x86-64 user address space.
const TASK_SIZE: usize = crate::mm::uaccess::TASK_SIZE_MAX as usize;

pub fn sys_mmap(
    ctx: &mut Ctx,
    UserPtr(addr): UserPtr,
    len: usize,
    Prot(prot): Prot,
    MapFlags(flags): MapFlags,
    fd: Fd,
    Hex(off): Hex,
) -> SysResult {
    // Both unsigned longs, but mmap ignores the PROT_ and MAP_ bits it does
    // not know (but under MAP_SHARED_VALIDATE), and every bit it knows is in
    // the low half.
    let full_flags = flags;
    let (addr, prot, flags) = (addr as usize, prot as i32, flags as i32);
    // Linux's order: the offset (x86's mmap), the descriptor
    // (ksys_mmap_pgoff), then do_mmap's length, placement and type checks.
    if !is_page_aligned(off as usize) {
        return Err(Errno::EINVAL);
    }
    let open_file = if flags & libc::MAP_ANONYMOUS == 0 { Some(ctx.io_file(fd)?) } else { None };
    if len == 0 {
        return Err(Errno::EINVAL);
    }
    let len = page_up(len).ok_or(Errno::ENOMEM)?;
    // Linux checks the end in pages: only a page offset that wraps overflows.
    if (off / PAGE_SIZE as u64).checked_add((len / PAGE_SIZE) as u64).is_none() {
        return Err(Errno::EOVERFLOW);
    }
    let fixed = flags & (libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE) != 0;
    // get_unmapped_area: the range must fit below TASK_SIZE, then be aligned.
    if len > TASK_SIZE || (fixed && addr > TASK_SIZE - len) {
        return Err(Errno::ENOMEM);
    }
    if fixed && !is_page_aligned(addr) {
        return Err(Errno::EINVAL);
    }
    let shared = match flags & MAP_TYPE {
        libc::MAP_PRIVATE => false,
        libc::MAP_SHARED => true,
        // Only a file takes it, and only the flags it knows (no MAP_SYNC:
        // nomu has no DAX file).
        MAP_SHARED_VALIDATE if open_file.is_some() => {
            if full_flags & !LEGACY_MAP_MASK != 0 {
                return Err(Errno::EOPNOTSUPP);
            }
            true
        }
        _ => return Err(Errno::EINVAL),
    };
    // Unknown protection bits are ignored, as Linux's calc_vm_prot_bits does.
    let prot = prot & PROT_ALL;
    let mut vma = Vma::new(0, prot, VmaKind::Anon);
    vma.shared = shared;
    let file = if let Some(f) = open_file {
        let source = super::file_ops::of(&f).mmap(&f)?;
        if !f.readable() || (shared && prot & libc::PROT_WRITE != 0 && !f.writable()) {
            return Err(Errno::EACCES);
        }
        // A memfd sealed against writing (Linux's memfd_check_seals_mmap).
        if shared && prot & libc::PROT_WRITE != 0 && super::io::write_sealed(&f) {
            return Err(Errno::EPERM);
        }
        match source {
            MapSource::File => {
                vma.kind = VmaKind::File;
                vma.backing = Some(Backing { file: f.clone(), offset: off });
                Some(f)
            }
            MapSource::Anonymous => None,
            MapSource::Secret => return map_secret(ctx, &f, addr, len, prot, flags, shared, off),
        }
    } else {
        None
    };
    let frames = match &file {
        Some(f) if !shared => cached_frames(ctx, f, prot, off, len),
        // Every shared mapping of a file shows the same pages (an
        // executable one is a copy: the entry path may patch it).
        Some(f) if prot & libc::PROT_EXEC == 0 => {
            let pages = ctx.kernel().shared_files.pages_for(f, off, len)?;
            Some(crate::mm::mapping::Frames::new(pages, off as usize))
        }
        _ => None,
    };
    // Code the entry path cannot share whole (the rewrite path): the pages
    // it can never patch, from the page cache; the rest is copied.
    let shared_code = match &file {
        Some(f) if !shared && frames.is_none() => shared_code_pieces(ctx, f, prot, off, len),
        _ => Vec::new(),
    };
    let mut space = ctx.space().lock().unwrap();
    if space.lock_future {
        // mlockall(MCL_FUTURE): locked from the start, within the limit.
        if !mlock_future_ok(ctx, &space, len) {
            return Err(Errno::EAGAIN);
        }
        vma.locked = true;
    }
    if flags & libc::MAP_FIXED_NOREPLACE != 0 && space.vmas().any(|(s, v)| s < addr + len && addr < v.end) {
        return Err(Errno::EEXIST);
    }
    // What MAP_FIXED maps over goes first (Linux's count_vma_pages_range).
    let replaced = if fixed { space.mapped_in(addr, addr + len) } else { 0 };
    let data = !shared && prot & libc::PROT_WRITE != 0 && flags & libc::MAP_GROWSDOWN == 0;
    if !may_expand(ctx, &space, len.saturating_sub(replaced), data) {
        return Err(Errno::ENOMEM);
    }
    let place = if fixed { Placement::Fixed(addr) } else { Placement::Anywhere { align: PAGE_SIZE } };
    if frames.is_some() {
        vma.frames = frames;
        return space.map_frames(place, len, vma).map(|s| s as u64);
    }
    let start = space.map(place, len, vma, |range| match &file {
        Some(f) => {
            // The file's bytes, but for the pieces the page cache shows.
            let mut at = 0;
            for (s, n) in shared_code.iter().map(|&(s, n, _)| (s, n)).chain([(len, 0)]) {
                if s > at {
                    f.read_at_into(range.skip(at).take(s - at), off + at as u64)?;
                }
                at = s + n;
            }
            Ok(())
        }
        None => Ok(()),
    })?;
    for (s, n, frames) in shared_code {
        if let Err(e) = space.replace_with_frames(start + s, n, frames) {
            space.unmap(start, len);
            return Err(e);
        }
    }
    Ok(start as u64)
}

/// Linux's may_expand_vm: whether the caller's address space may map
/// `len` bytes more under RLIMIT_AS (every mapping) and, for a data
/// mapping (private, writable, not a stack: [`Vma::is_data`]), RLIMIT_DATA.
pub(super) fn may_expand(ctx: &Ctx, space: &AddressSpace, len: usize, data: bool) -> bool {
    let (as_limit, data_limit) = (ctx.process().rlimit(libc::RLIMIT_AS), ctx.process().rlimit(libc::RLIMIT_DATA));
    let over = |now: usize, limit: u64| limit != libc::RLIM_INFINITY && now.saturating_add(len) as u64 > limit;
    if over(space.total_bytes(), as_limit.rlim_cur) {
        return false;
    }
    if data && over(space.data_bytes(), data_limit.rlim_cur) {
        // Linux lets a soft limit of 0 under a larger hard one through
        // (its workaround for Valgrind).
        return data_limit.rlim_cur == 0 && !over(space.data_bytes(), data_limit.rlim_max);
    }
    true
}

/// mmap of a memfd_secret file (Linux's secretmem_mmap): MAP_SHARED only
/// (EINVAL), never executable (its mount is noexec: EPERM), counted as
/// locked memory against RLIMIT_MEMLOCK (EAGAIN) unless CAP_IPC_LOCK. The
/// VMA shows the file's pages (mm::mapping), which no direct-map address
/// reaches (fs::secretmem). nomu took them when ftruncate sized the file,
/// so a mapping must lie within that size (ENXIO).
#[allow(clippy::too_many_arguments)]
fn map_secret(
    ctx: &Ctx,
    f: &std::sync::Arc<crate::fs::file::OpenFile>,
    addr: usize,
    len: usize,
    prot: i32,
    flags: i32,
    shared: bool,
    off: u64,
) -> SysResult {
    if prot & libc::PROT_EXEC != 0 {
        return Err(Errno::EPERM);
    }
    if !shared {
        return Err(Errno::EINVAL);
    }
    let secret = f.secretmem().expect("a secret file's state");
    let mut space = ctx.space().lock().unwrap();
    if !mlock_future_ok(ctx, &space, len) {
        return Err(Errno::EAGAIN);
    }
    let pages = secret.pages().ok_or(Errno::ENXIO)?;
    if off.checked_add(len as u64).is_none_or(|e| e > pages.len() as u64) {
        return Err(Errno::ENXIO);
    }
    if flags & libc::MAP_FIXED_NOREPLACE != 0 && space.vmas().any(|(s, v)| s < addr + len && addr < v.end) {
        return Err(Errno::EEXIST);
    }
    let fixed = flags & (libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE) != 0;
    let mut vma = Vma::new(0, prot, VmaKind::File);
    vma.shared = true;
    vma.image_file = Some(Backing { file: f.clone(), offset: off });
    vma.frames = Some(crate::mm::mapping::Frames::new(pages, off as usize));
    vma.locked = true;
    let place = if fixed { Placement::Fixed(addr) } else { Placement::Anywhere { align: PAGE_SIZE } };
    let start = space.map_frames(place, len, vma)?;
    if prot & libc::PROT_WRITE != 0 {
        ctx.kernel().phys.populate_mapping(start, len);
    }
    Ok(start as u64)
}

const CAP_IPC_LOCK: u32 = 14;

/// Linux's mlock_future_ok: `len` more bytes of locked memory fit in
/// RLIMIT_MEMLOCK, or the caller has CAP_IPC_LOCK.
fn mlock_future_ok(ctx: &Ctx, space: &crate::mm::space::AddressSpace, len: usize) -> bool {
    ctx.t.thread.cred().capable(CAP_IPC_LOCK)
        || ((space.locked_bytes() + len) as u64) <= ctx.process().rlimit(libc::RLIMIT_MEMLOCK).rlim_cur
}

/// Linux's can_do_mlock: a nonzero RLIMIT_MEMLOCK or CAP_IPC_LOCK.
fn can_do_mlock(ctx: &Ctx) -> bool {
    ctx.process().rlimit(libc::RLIMIT_MEMLOCK).rlim_cur != 0 || ctx.t.thread.cred().capable(CAP_IPC_LOCK)
}

const MLOCK_ONFAULT: u32 = 1;
const MCL_CURRENT: i32 = 1;
const MCL_FUTURE: i32 = 2;
const MCL_ONFAULT: i32 = 4;

/// The page-aligned [start, end) an mlock or munlock of (addr, len)
/// covers (Linux rounds out to pages): EINVAL when it wraps.
fn lock_range(addr: u64, len: usize) -> Result<(usize, usize), Errno> {
    let start = addr as usize & !(PAGE_SIZE - 1);
    let len =
        (len as u64).checked_add(addr % PAGE_SIZE as u64).and_then(|l| page_up(l as usize)).ok_or(Errno::EINVAL)?;
    let end = start.checked_add(len).ok_or(Errno::EINVAL)?;
    Ok((start, end))
}

/// mlock and mlock2 (Linux's do_mlock). no-MMU pages are always resident:
/// locking is accounting (VmLck, RLIMIT_MEMLOCK) and the VMAs' flag.
fn do_mlock(ctx: &Ctx, addr: u64, len: usize) -> SysResult {
    if !can_do_mlock(ctx) {
        return Err(Errno::EPERM);
    }
    let (start, end) = lock_range(addr, len)?;
    let mut space = ctx.space().lock().unwrap();
    let limit = ctx.process().rlimit(libc::RLIMIT_MEMLOCK).rlim_cur;
    let mut locked = space.locked_bytes() + (end - start);
    if locked as u64 > limit && !ctx.t.thread.cred().capable(CAP_IPC_LOCK) {
        // What is locked already in the range is not counted twice.
        locked -= space.locked_in(start, end);
        if locked as u64 > limit {
            return Err(Errno::ENOMEM);
        }
    }
    if start == end {
        return Ok(0);
    }
    space.set_locked(start, end, true).map(|_| 0)
}

pub fn sys_mlock(ctx: &mut Ctx, UserPtr(addr): UserPtr, len: usize) -> SysResult {
    do_mlock(ctx, addr, len)
}

pub fn sys_mlock2(ctx: &mut Ctx, UserPtr(addr): UserPtr, len: usize, Hex(flags): Hex<u32>) -> SysResult {
    if flags & !MLOCK_ONFAULT != 0 {
        return Err(Errno::EINVAL);
    }
    do_mlock(ctx, addr, len)
}

pub fn sys_munlock(ctx: &mut Ctx, UserPtr(addr): UserPtr, len: usize) -> SysResult {
    let (start, end) = lock_range(addr, len)?;
    if start == end {
        return Ok(0);
    }
    ctx.space().lock().unwrap().set_locked(start, end, false).map(|_| 0)
}

pub fn sys_mlockall(ctx: &mut Ctx, Hex(flags): Hex<i32>) -> SysResult {
    if flags == 0 || flags & !(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) != 0 || flags == MCL_ONFAULT {
        return Err(Errno::EINVAL);
    }
    if !can_do_mlock(ctx) {
        return Err(Errno::EPERM);
    }
    let mut space = ctx.space().lock().unwrap();
    let limit = ctx.process().rlimit(libc::RLIMIT_MEMLOCK).rlim_cur;
    // Linux compares everything mapped (total_vm) with the limit.
    if flags & MCL_CURRENT != 0 && space.total_bytes() as u64 > limit && !ctx.t.thread.cred().capable(CAP_IPC_LOCK) {
        return Err(Errno::ENOMEM);
    }
    space.lock_future = flags & MCL_FUTURE != 0;
    if flags & MCL_CURRENT != 0 {
        space.set_locked_where(0, usize::MAX & !(PAGE_SIZE - 1), true);
    }
    Ok(0)
}

pub fn sys_munlockall(ctx: &mut Ctx) -> SysResult {
    let mut space = ctx.space().lock().unwrap();
    space.lock_future = false;
    space.set_locked_where(0, usize::MAX & !(PAGE_SIZE - 1), false);
    Ok(0)
}

/// The page cache's pages for a private, read-only (readable or
/// executable, not writable) mapping of a regular file that lies within the
/// file (mm::cache); None to copy it instead (past the file's end, code
/// where the entry path cannot share it, no room in the cache).
fn cached_frames(
    ctx: &Ctx,
    f: &crate::fs::file::OpenFile,
    prot: i32,
    off: u64,
    len: usize,
) -> Option<crate::mm::mapping::Frames> {
    let exec = prot & libc::PROT_EXEC != 0;
    if exec && !ctx.kernel().entry.shares_code() {
        return None;
    }
    let id = cacheable(ctx, f, prot, off, len)?;
    ctx.kernel().page_cache.get(f, id, exec, off, len).ok()
}

/// For an executable private mapping where the entry path cannot share
/// code (the rewrite path): the pieces of it the page cache shows, as
/// (offset in the mapping, length, frames): the pages without a syscall
/// (mm::cache's `code_without_syscalls`). Empty to copy it all.
fn shared_code_pieces(
    ctx: &Ctx,
    f: &crate::fs::file::OpenFile,
    prot: i32,
    off: u64,
    len: usize,
) -> Vec<(usize, usize, crate::mm::mapping::Frames)> {
    if prot & libc::PROT_EXEC == 0 || ctx.kernel().entry.shares_code() {
        return Vec::new();
    }
    let Some(id) = cacheable(ctx, f, prot, off, len) else { return Vec::new() };
    ctx.kernel().page_cache.code_without_syscalls(f, id, off, len)
}

/// The file's identity if [off, off+len) of it may come from the page
/// cache under a mapping with `prot`: read-only, within the file, and in
/// nomu's own process.
fn cacheable(
    ctx: &Ctx,
    f: &crate::fs::file::OpenFile,
    prot: i32,
    off: u64,
    len: usize,
) -> Option<crate::fs::file::FileIdentity> {
    if prot & libc::PROT_WRITE != 0 || prot == 0 {
        return None;
    }
    // A process in a host process of its own (a forked child, a moved
    // fixed-address image) gets copies: cached code may hold sites the
    // entry path rewrote for nomu's own process, which must trap there.
    if ctx.t.mm.lock().unwrap().runs_own_host() {
        return None;
    }
    let id = f.identity()?;
    if off.checked_add(len as u64)? > (id.size.max(0) as u64).next_multiple_of(PAGE_SIZE as u64) {
        return None;
    }
    Some(id)
}

pub fn sys_munmap(ctx: &mut Ctx, UserPtr(addr): UserPtr, len: usize) -> SysResult {
    let addr = addr as usize;
    // Linux's do_vmi_munmap: the range must lie below TASK_SIZE.
    if !is_page_aligned(addr) || addr > TASK_SIZE || len > TASK_SIZE - addr || len == 0 {
        return Err(Errno::EINVAL);
    }
    let len = page_up(len).ok_or(Errno::EINVAL)?;
    ctx.space().lock().unwrap().unmap(addr, len);
    Ok(0)
}

pub fn sys_mprotect(ctx: &mut Ctx, UserPtr(addr): UserPtr, len: usize, Prot(prot): Prot) -> SysResult {
    let addr = addr as usize;
    // An unsigned long: a bit in its upper half is an unknown bit too,
    // judged with the others, last.
    let grows = (libc::PROT_GROWSDOWN | libc::PROT_GROWSUP) as u64;
    // Linux's order (do_mprotect_pkey): both growth bits, the alignment,
    // an empty range (done), the end, and only then the protection.
    if prot & grows == grows || !is_page_aligned(addr) {
        return Err(Errno::EINVAL);
    }
    if len == 0 {
        return Ok(0);
    }
    let len = page_up(len).filter(|&l| addr.checked_add(l).is_some()).ok_or(Errno::ENOMEM)?;
    if prot & !((PROT_ALL | PROT_SEM) as u64 | grows) != 0 {
        return Err(Errno::EINVAL);
    }
    let mut space = ctx.space().lock().unwrap();
    // Private mappings becoming writable are data (mprotect_fixup's
    // RLIMIT_DATA check; the address space does not grow).
    if prot as i32 & libc::PROT_WRITE != 0 {
        let more = space.becoming_data(addr, addr.saturating_add(len));
        if more > 0 && !may_expand(ctx, &space, more, true) && may_expand(ctx, &space, more, false) {
            return Err(Errno::ENOMEM);
        }
    }
    // A memfd_secret mapping may never execute (its mount is noexec: no
    // VM_MAYEXEC, so mprotect_fixup refuses with EACCES).
    if prot as i32 & libc::PROT_EXEC != 0
        && space.vmas().any(|(s, v)| {
            s < addr + len && addr < v.end && v.image_file.as_ref().is_some_and(|b| b.file.secretmem().is_some())
        })
    {
        return Err(Errno::EACCES);
    }
    space.protect(addr, len, prot as i32 & PROT_ALL)?;
    if prot as i32 & libc::PROT_WRITE != 0 {
        let entry = &ctx.kernel().entry;
        if space.own_host() {
            // A forked child's code is in frames of its own.
            let mut at = addr;
            while at < addr + len {
                let Some((frame, n)) = space.translate(at, addr + len - at) else { break };
                entry.forked_code_made_writable(frame, n);
                at += n;
            }
        } else {
            drop(space);
            entry.code_made_writable(addr, len);
        }
    }
    Ok(0)
}

pub fn sys_mremap(
    ctx: &mut Ctx,
    UserPtr(old): UserPtr,
    old_len: usize,
    new_len: usize,
    Hex(flags): Hex,
    _new_addr: UserPtr,
) -> SysResult {
    let old = old as usize;
    // An unsigned long: a bit in its upper half is an unknown flag too.
    let Ok(flags) = i32::try_from(flags) else { return Err(Errno::EINVAL) };
    let may_move = flags & libc::MREMAP_MAYMOVE != 0;
    if flags & !(libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED | 4) != 0
        || !is_page_aligned(old)
        || (flags & libc::MREMAP_FIXED != 0 && !may_move)
    {
        return Err(Errno::EINVAL);
    }
    if flags & (libc::MREMAP_FIXED | 4) != 0 {
        // MREMAP_FIXED and MREMAP_DONTUNMAP are not provided yet.
        return Err(Errno::EINVAL);
    }
    let old_len = page_up(old_len).ok_or(Errno::EINVAL)?;
    let new_len = page_up(new_len).ok_or(Errno::EINVAL)?;
    if new_len == 0 || new_len > TASK_SIZE {
        return Err(Errno::EINVAL);
    }
    if old_len == 0 {
        // Linux's zero old length duplicates a shared mapping, which nomu
        // cannot; the address is still looked up first (EFAULT).
        return Err(if ctx.space().lock().unwrap().find(old).is_some() { Errno::EINVAL } else { Errno::EFAULT });
    }
    let mut space = ctx.space().lock().unwrap();
    // Linux's vma_to_resize: the growth within the limits.
    if let Some((_, v)) = space.find(old).filter(|_| new_len > old_len) {
        if !may_expand(ctx, &space, new_len - old_len, v.is_data()) {
            return Err(Errno::ENOMEM);
        }
    }
    space.remap(old, old_len, new_len, may_move).map(|v| v as u64)
}

pub fn sys_brk(ctx: &mut Ctx, UserPtr(brk): UserPtr) -> SysResult {
    let mut space = ctx.space().lock().unwrap();
    let (start, now) = space.brk_span();
    let new = brk as usize;
    if start != 0 && new > now {
        // Linux's check_data_rlimit (the heap alone: nomu does not count
        // the program's data segment in), then do_brk_flags' may_expand_vm.
        let limit = ctx.process().rlimit(libc::RLIMIT_DATA).rlim_cur;
        let grows = page_up(new).unwrap_or(usize::MAX).saturating_sub(page_up(now).unwrap_or(now));
        if (limit != libc::RLIM_INFINITY && (new - start) as u64 > limit) || !may_expand(ctx, &space, grows, true) {
            return Ok(now as u64);
        }
    }
    Ok(space.set_brk(new) as u64)
}

pub fn sys_madvise(ctx: &mut Ctx, UserPtr(addr): UserPtr, len: usize, advice: i32) -> SysResult {
    let addr = addr as usize;
    if !is_page_aligned(addr) {
        return Err(Errno::EINVAL);
    }
    let len = page_up(len).filter(|&l| addr.checked_add(l).is_some()).ok_or(Errno::EINVAL)?;
    // A memfd_secret mapping is VM_LOCKED: Linux refuses to drop or age its
    // pages (can_madv_lru_vma).
    if matches!(advice, libc::MADV_DONTNEED | libc::MADV_FREE | 20 | 21)
        && ctx.space().lock().unwrap().vmas().any(|(s, v)| {
            s < addr + len && addr < v.end && v.image_file.as_ref().is_some_and(|b| b.file.secretmem().is_some())
        })
    {
        return Err(Errno::EINVAL);
    }
    match advice {
        libc::MADV_DONTNEED | libc::MADV_REMOVE => {
            if len > 0 {
                ctx.space().lock().unwrap().discard(addr, len, advice == libc::MADV_REMOVE)?;
            }
            Ok(0)
        }
        // Hints nomu may ignore (MADV_FREE lets the pages keep their data).
        libc::MADV_NORMAL
        | libc::MADV_RANDOM
        | libc::MADV_SEQUENTIAL
        | libc::MADV_WILLNEED
        | libc::MADV_FREE
        | libc::MADV_DONTFORK
        | libc::MADV_DOFORK
        | libc::MADV_MERGEABLE
        | libc::MADV_UNMERGEABLE
        | libc::MADV_HUGEPAGE
        | libc::MADV_NOHUGEPAGE
        | libc::MADV_DONTDUMP
        | libc::MADV_DODUMP
        | 20 // MADV_COLD
        | 21 // MADV_PAGEOUT
        => {
            // Nothing to do, but a range with a hole is ENOMEM, as for
            // the advice that does something (madvise_walk_vmas).
            if len > 0 && ctx.space().lock().unwrap().has_hole(addr, len) {
                return Err(Errno::ENOMEM);
            }
            Ok(0)
        }
        _ => Err(Errno::EINVAL),
    }
}

pub fn sys_msync(ctx: &mut Ctx, UserPtr(addr): UserPtr, len: usize, Hex(flags): Hex<i32>) -> SysResult {
    let addr = addr as usize;
    let known = libc::MS_ASYNC | libc::MS_SYNC | libc::MS_INVALIDATE;
    if !is_page_aligned(addr) || flags & !known != 0 || flags & libc::MS_ASYNC != 0 && flags & libc::MS_SYNC != 0 {
        return Err(Errno::EINVAL);
    }
    // Linux rounds the length up modulo 2^64: one that comes to 0 does
    // nothing, an end below the start is ENOMEM.
    let len = len.wrapping_add(PAGE_SIZE - 1) & !(PAGE_SIZE - 1);
    if addr.checked_add(len).is_none() {
        return Err(Errno::ENOMEM);
    }
    if len == 0 {
        return Ok(0);
    }
    ctx.space().lock().unwrap().write_back(addr, len)?;
    Ok(0)
}

/// mincore(2): a page of a mapping is resident when nomu's physical memory
/// holds data for it (the host's view of its memfd); a hole in the range
/// is ENOMEM, after the vector is filled for the mappings before it.
pub fn sys_mincore(ctx: &mut Ctx, UserPtr(start): UserPtr, len: usize, UserPtr(vec): UserPtr) -> SysResult {
    if !is_page_aligned(start as usize) {
        return Err(Errno::EINVAL);
    }
    if !crate::mm::uaccess::access_ok(start, len as u64) {
        return Err(Errno::ENOMEM);
    }
    let pages = len.div_ceil(PAGE_SIZE);
    if !crate::mm::uaccess::access_ok(vec, pages as u64) {
        return Err(Errno::EFAULT);
    }
    let (mut addr, end) = (start as usize, start as usize + pages * PAGE_SIZE);
    let mut out = vec;
    while addr < end {
        let (seg_end, held) = {
            let space = ctx.space().lock().unwrap();
            let seg_end = match space.find(addr) {
                Some((_, v)) => v.end.min(end),
                None => return Err(Errno::ENOMEM),
            };
            (seg_end, space.populated(addr, seg_end - addr))
        };
        let mut resident = vec![0u8; (seg_end - addr) / PAGE_SIZE];
        for (a, n) in held {
            let first = (a - addr) / PAGE_SIZE;
            resident[first..first + n / PAGE_SIZE].fill(1);
        }
        ctx.mem().write_bytes(out, &resident)?;
        out += resident.len() as u64;
        addr = seg_end;
    }
    Ok(0)
}
