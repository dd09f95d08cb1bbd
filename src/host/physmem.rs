//! nomu's "physical memory": one memfd, mapped once as the kernel's direct map.
//!
//! Every guest address is a direct-map address, as on a no-MMU Linux. The
//! host allocates the memfd's pages lazily, and `discard` gives them back
//! (and makes them read as zero again), so a large `--mem` costs nothing
//! until the guest touches it. The memfd is a window larger than `--mem`
//! (mm::commit), so that reservations need no memory, only addresses.

use super::{check, last_errno};
use crate::abi::errno::Errno;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

pub const PAGE_SIZE: usize = 4096;

/// Where nomu asks the host to place the direct map. Low enough that the
/// usual ET_EXEC load address (0x400000) falls inside it, so a fixed-address
/// program can run when its pages are free; high enough to stay clear of
/// `vm.mmap_min_addr` and page 0 (which the zpoline entry path wants).
pub const PREFERRED_BASE: usize = 0x20_0000;

pub struct PhysMem {
    memfd: OwnedFd,
    base: usize,
    size: usize,
    /// A second, always-writable view of the same memory: nomu writes
    /// through it (loading programs, zeroing, patching code) whatever the
    /// guest's protection of the page is in the direct map.
    alias: usize,
    /// Direct-map ranges that show other pages of the memfd than their own
    /// (see [`map_frames`](Self::map_frames)), by start. Everything else is
    /// identity.
    remapped: std::sync::RwLock<std::collections::BTreeMap<usize, Remap>>,
}

static PHYSMEM: OnceLock<PhysMem> = OnceLock::new();

/// A run of the direct map that shows other pages than its own.
#[derive(Clone, Copy, Debug)]
struct Remap {
    end: usize,
    /// The physical address of the page shown at the run's start.
    frame: usize,
    /// A guest mapping shows them (else the run is stale: left in place
    /// for the next mapping of the same frames there, see
    /// [`PhysMem::release_frames`]).
    live: bool,
    /// Its host protection.
    prot: Prot,
}

/// Guest memory access rights, as mmap's PROT_* bits.
pub type Prot = i32;

impl PhysMem {
    /// Creates and maps physical memory of `size` bytes (a multiple of the
    /// page size). May be called once per host process.
    pub fn init(size: usize) -> Result<&'static PhysMem, String> {
        assert!(size.is_multiple_of(PAGE_SIZE) && size > 0);
        // SAFETY: memfd_create with a valid NUL-terminated name; the result is
        // a new descriptor we own.
        let fd = unsafe { libc::memfd_create(c"nomu-physmem".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(format!("memfd_create: {}", last_errno()));
        }
        // SAFETY: fd was just returned by memfd_create and is owned by nobody else.
        let memfd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: ftruncate on our own descriptor.
        if unsafe { libc::ftruncate(memfd.as_raw_fd(), size as libc::off_t) } < 0 {
            return Err(format!("sizing physical memory to {size} bytes: {}", last_errno()));
        }
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let flags = libc::MAP_SHARED | libc::MAP_NORESERVE;
        // SAFETY: a new shared mapping of our memfd; MAP_FIXED_NOREPLACE never
        // replaces an existing mapping, and the fallback lets the host choose.
        let mut addr = unsafe {
            libc::mmap(
                PREFERRED_BASE as *mut libc::c_void,
                size,
                prot,
                flags | libc::MAP_FIXED_NOREPLACE,
                memfd.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            // SAFETY: as above, at an address of the host's choice.
            addr = unsafe { libc::mmap(std::ptr::null_mut(), size, prot, flags, memfd.as_raw_fd(), 0) };
        }
        if addr == libc::MAP_FAILED {
            return Err(format!("mapping {size} bytes of physical memory: {}", last_errno()));
        }
        // SAFETY: a new shared mapping of our own memfd at an address of the
        // host's choice; it aliases the direct map and is never freed.
        let alias = unsafe { libc::mmap(std::ptr::null_mut(), size, prot, flags, memfd.as_raw_fd(), 0) };
        if alias == libc::MAP_FAILED {
            let err = last_errno();
            // SAFETY: the direct map made above, which nothing uses yet.
            unsafe { libc::munmap(addr, size) };
            return Err(format!("mapping {size} bytes of physical memory's writable alias: {err}"));
        }
        let pm = PhysMem {
            memfd,
            base: addr as usize,
            size,
            alias: alias as usize,
            remapped: std::sync::RwLock::new(std::collections::BTreeMap::new()),
        };
        PHYSMEM.set(pm).map_err(|_| "physical memory initialised twice".to_string())?;
        Ok(PHYSMEM.get().unwrap())
    }

    pub fn get() -> &'static PhysMem {
        PHYSMEM.get().expect("physical memory not initialised")
    }

    pub fn base(&self) -> usize {
        self.base
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn end(&self) -> usize {
        self.base + self.size
    }

    /// The memfd (a host process made with CLONE_FILES maps frames of it;
    /// the mermap maps its pages).
    pub fn memfd_raw(&self) -> i32 {
        self.memfd.as_raw_fd()
    }

    pub fn contains(&self, addr: usize, len: usize) -> bool {
        addr >= self.base && addr.checked_add(len).is_some_and(|end| end <= self.end())
    }

    fn assert_pages(&self, addr: usize, len: usize) {
        assert!(
            self.contains(addr, len) && addr.is_multiple_of(PAGE_SIZE) && len.is_multiple_of(PAGE_SIZE),
            "physmem range {addr:#x}+{len:#x} out of bounds"
        );
    }

    /// Sets the host protection of whole pages of physical memory.
    pub fn protect(&self, addr: usize, len: usize, prot: Prot) -> Result<(), Errno> {
        self.assert_pages(addr, len);
        if len == 0 {
            return Ok(());
        }
        // SAFETY: the range lies inside our own direct map (checked above), so
        // changing its protection cannot affect nomu's own memory.
        check(unsafe { libc::mprotect(addr as *mut libc::c_void, len, prot) } as libc::c_long)?;
        if !self.remapped.read().unwrap().is_empty() {
            self.note_prot(addr, len, prot);
        }
        Ok(())
    }

    /// Sets the host protection of whole pages in nomu's writable alias:
    /// PROT_NONE while they are UNMAPPED (mm::phys), else read-write.
    pub fn protect_alias(&self, addr: usize, len: usize, prot: Prot) -> Result<(), Errno> {
        self.assert_pages(addr, len);
        if len == 0 {
            return Ok(());
        }
        // SAFETY: the alias of a range inside physical memory lies inside our
        // alias mapping (checked above); nothing in nomu holds a reference
        // into it, and every access through it is by address, fault-safe or
        // to pages the caller knows to be mapped.
        check(unsafe { libc::mprotect(self.alias_of(addr) as *mut libc::c_void, len, prot) } as libc::c_long)?;
        Ok(())
    }

    /// Has the host allocate whole pages of physical memory now (a hole
    /// becomes a zeroed page; a page held keeps its bytes): one call
    /// instead of a host page fault per page at first touch.
    pub fn allocate(&self, addr: usize, len: usize) {
        self.assert_pages(addr, len);
        if len == 0 {
            return;
        }
        // SAFETY: fallocate (mode 0: allocate, keep contents) on our own
        // memfd, inside its size. A failure (the host is short of memory)
        // only leaves the pages to be allocated at first touch.
        unsafe { libc::fallocate(self.memfd.as_raw_fd(), 0, (addr - self.base) as libc::off_t, len as libc::off_t) };
    }

    /// Fills the host page tables of [addr, addr+len) of nomu's own
    /// address space (a mapping of physical memory) for writing now
    /// (MADV_POPULATE_WRITE), so the guest's first touch of each page takes
    /// no host fault. Best effort.
    pub fn populate_write(&self, addr: usize, len: usize) {
        self.assert_pages(addr, len);
        // SAFETY: madvise on a range inside our direct map (checked above):
        // it only prefaults pages the mapping already allows writing.
        unsafe {
            libc::madvise(addr as *mut libc::c_void, len, 23 /* MADV_POPULATE_WRITE */)
        };
    }

    /// Zeroes whole pages and returns their memory to the host.
    pub fn discard(&self, addr: usize, len: usize) {
        self.assert_pages(addr, len);
        if len == 0 {
            return;
        }
        let off = (addr - self.base) as libc::off_t;
        // SAFETY: fallocate on our own memfd, inside its size.
        let r = unsafe {
            libc::fallocate(
                self.memfd.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                off,
                len as libc::off_t,
            )
        };
        if r < 0 {
            // Punching holes in shmem cannot fail short of a kernel bug; fall
            // back to zeroing by hand so the contract (zero pages) still holds.
            self.zero(addr, len);
        }
    }

    /// How many bytes from `addr` (up to `len`) translate contiguously.
    fn run_len(&self, addr: usize, len: usize) -> usize {
        self.physical_runs(addr, len).first().map_or(len, |&(_, n)| n)
    }

    /// Where the writable alias shows the byte at direct-map address
    /// `addr` (inside physical memory), for code that keeps writing pages
    /// whose direct map is not writable (rewrite-path trampolines).
    pub fn alias_addr(&self, addr: usize) -> usize {
        assert!(self.contains(addr, 1));
        self.alias_of(addr)
    }

    /// Where the writable alias shows the byte at direct-map address
    /// `addr`: the alias of the physical page the direct map shows there
    /// (its own, or a frame [`map_frames`](Self::map_frames) put there).
    fn alias_of(&self, addr: usize) -> usize {
        self.alias + (self.translate(addr) - self.base)
    }

    /// The physical address whose memfd page nomu's direct map shows at
    /// `addr` for the guest mapping there (`addr` itself unless a live
    /// frames mapping is there; a stale one, see
    /// [`release_frames`](Self::release_frames), is nobody's).
    pub fn translate(&self, addr: usize) -> usize {
        let map = self.remapped.read().unwrap();
        match map.range(..=addr).next_back() {
            Some((&s, r)) if addr < r.end && r.live => r.frame + (addr - s),
            _ => addr,
        }
    }

    /// The bytes of [addr, addr+len) as runs of physical addresses
    /// (translated, see [`translate`](Self::translate)), in order.
    pub fn physical_runs(&self, addr: usize, len: usize) -> Vec<(usize, usize)> {
        let map = self.remapped.read().unwrap();
        let end = addr + len;
        let mut runs = Vec::new();
        let mut at = addr;
        let push = |runs: &mut Vec<(usize, usize)>, p: usize, n: usize| match runs.last_mut() {
            Some((s, l)) if *s + *l == p => *l += n,
            _ => runs.push((p, n)),
        };
        let first = map.range(..=addr).next_back().map_or(addr, |(&s, _)| s);
        for (&s, r) in map.range(first..end) {
            if r.end <= at || !r.live {
                continue;
            }
            if s > at {
                push(&mut runs, at, s - at);
                at = s;
            }
            let stop = r.end.min(end);
            push(&mut runs, r.frame + (at - s), stop - at);
            at = stop;
        }
        if at < end {
            push(&mut runs, at, end - at);
        }
        runs
    }

    /// Makes the direct map at [addr, addr+len) show the memfd's pages at
    /// physical address `frame` (another run of physical memory: a page
    /// cache's, a secret file's), in place of its own pages (whose
    /// contents stay, unseen). Whole pages. Returns the protection the
    /// range has now: `prot` when it was mapped now, or that of a stale
    /// mapping of the same frames found there and taken up again (no host
    /// call: a program exec'd again lands where it was).
    pub fn map_frames(&self, addr: usize, frame: usize, len: usize, prot: Prot) -> Result<Option<Prot>, Errno> {
        self.assert_pages(addr, len);
        self.assert_pages(frame, len);
        let mut map = self.remapped.write().unwrap();
        let end = addr + len;
        if let Some((&s, r)) = map.range(..=addr).next_back() {
            if !r.live && end <= r.end && r.frame + (addr - s) == frame {
                let old = r.prot;
                Self::carve(&mut map, addr, end);
                map.insert(addr, Remap { end, frame, live: true, prot: old });
                return Ok(Some(old));
            }
        }
        let flags = libc::MAP_SHARED | libc::MAP_FIXED | libc::MAP_NORESERVE;
        // SAFETY: [addr, addr+len) lies inside our own direct map (checked
        // above), which holds no Rust object, so replacing its pages there
        // with other pages of the same memfd (inside its size, checked
        // above) affects guest memory only.
        let r = unsafe {
            libc::mmap(
                addr as *mut libc::c_void,
                len,
                prot,
                flags,
                self.memfd.as_raw_fd(),
                (frame - self.base) as libc::off_t,
            )
        };
        if r == libc::MAP_FAILED {
            return Err(last_errno());
        }
        Self::carve(&mut map, addr, end);
        map.insert(addr, Remap { end, frame, live: true, prot });
        Ok(None)
    }

    /// Notes a protection set on a frames mapping (host::physmem::protect
    /// was called on it).
    fn note_prot(&self, addr: usize, len: usize, prot: Prot) {
        let mut map = self.remapped.write().unwrap();
        let first = map.range(..=addr).next_back().map_or(addr, |(&s, _)| s);
        let hits: Vec<usize> = map.range(first..addr + len).filter(|(_, r)| r.end > addr).map(|(&s, _)| s).collect();
        for s in hits {
            let r = map[&s];
            let (a, b) = (s.max(addr), r.end.min(addr + len));
            Self::carve(&mut map, a, b);
            map.insert(a, Remap { end: b, frame: r.frame + (a - s), prot, ..r });
        }
    }

    /// The guest mapping of frames at [addr, addr+len) is gone: the direct
    /// map may go on showing them until the range's own pages are wanted
    /// ([`restore`](Self::restore)) or the frames are freed
    /// ([`restore_frames_of`](Self::restore_frames_of)); nothing translates
    /// through it meanwhile.
    pub fn release_frames(&self, addr: usize, len: usize) {
        let mut map = self.remapped.write().unwrap();
        let first = map.range(..=addr).next_back().map_or(addr, |(&s, _)| s);
        let hits: Vec<usize> = map.range(first..addr + len).filter(|(_, r)| r.end > addr).map(|(&s, _)| s).collect();
        for s in hits {
            let r = map[&s];
            let (a, b) = (s.max(addr), r.end.min(addr + len));
            Self::carve(&mut map, a, b);
            map.insert(a, Remap { end: b, frame: r.frame + (a - s), live: false, ..r });
        }
    }

    /// Puts the direct map at [addr, addr+len) back to its own pages
    /// (read-write, as pages are when free) wherever frames are mapped
    /// there; returns the runs it changed.
    pub fn restore(&self, addr: usize, len: usize) -> Vec<(usize, usize)> {
        self.assert_pages(addr, len);
        {
            let map = self.remapped.read().unwrap();
            let hit = map.range(..addr + len).next_back().is_some_and(|(_, r)| r.end > addr);
            if !hit {
                return Vec::new();
            }
        }
        let mut map = self.remapped.write().unwrap();
        let first = map.range(..=addr).next_back().map_or(addr, |(&s, _)| s);
        let runs: Vec<(usize, usize)> = map
            .range(first..addr + len)
            .filter(|(_, r)| r.end > addr)
            .map(|(&s, r)| (s.max(addr), r.end.min(addr + len)))
            .collect();
        for &(a, b) in &runs {
            self.identity(a, b - a);
            Self::carve(&mut map, a, b);
        }
        runs.into_iter().map(|(a, b)| (a, b - a)).collect()
    }

    /// The frames [frame, frame+len) are being freed: every mapping of them
    /// still in the direct map (stale ones: a live one would be a bug) is
    /// put back to its own pages; returns those runs.
    pub fn restore_frames_of(&self, frame: usize, len: usize) -> Vec<(usize, usize)> {
        let mut map = self.remapped.write().unwrap();
        let hits: Vec<(usize, Remap)> = map
            .iter()
            .filter(|(&s, r)| r.frame < frame + len && frame < r.frame + (r.end - s))
            .map(|(&s, r)| (s, *r))
            .collect();
        let mut runs = Vec::new();
        for (s, r) in hits {
            debug_assert!(!r.live, "frames freed while a mapping shows them");
            self.identity(s, r.end - s);
            map.remove(&s);
            runs.push((s, r.end - s));
        }
        runs
    }

    /// Maps the direct map's own pages at [addr, addr+len), read-write.
    fn identity(&self, addr: usize, len: usize) {
        let flags = libc::MAP_SHARED | libc::MAP_FIXED | libc::MAP_NORESERVE;
        // SAFETY: inside our own direct map (the callers' ranges come from
        // the remap table, whose entries were checked), which holds no Rust
        // object; the pages mapped are the range's own, as PhysMem::init
        // mapped them.
        let r = unsafe {
            libc::mmap(
                addr as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                self.memfd.as_raw_fd(),
                (addr - self.base) as libc::off_t,
            )
        };
        // Replacing a shared file mapping by another of the same file, same
        // size, cannot fail but for lack of host memory for its records,
        // which leaves the old mapping in place: nothing safe remains.
        assert!(r != libc::MAP_FAILED, "physical memory: restoring the direct map failed: {}", last_errno());
    }

    /// Removes [s, e) from the remap table, keeping the parts of entries
    /// outside it.
    fn carve(map: &mut std::collections::BTreeMap<usize, Remap>, s: usize, e: usize) {
        let first = map.range(..=s).next_back().map_or(s, |(&k, _)| k);
        let hits: Vec<(usize, Remap)> = map.range(first..e).filter(|(_, r)| r.end > s).map(|(&k, r)| (k, *r)).collect();
        for (k, r) in hits {
            map.remove(&k);
            if k < s {
                map.insert(k, Remap { end: s, ..r });
            }
            if r.end > e {
                map.insert(e, Remap { frame: r.frame + (e - k), ..r });
            }
        }
    }

    /// Zeroes bytes of physical memory (through the writable alias, so the
    /// guest's protection of the pages does not matter).
    pub fn zero(&self, addr: usize, len: usize) {
        assert!(self.contains(addr, len));
        for (p, n) in self.physical_runs(addr, len) {
            // SAFETY: the run lies inside physical memory, so its alias lies
            // inside our alias mapping, which is always writable; nothing in
            // nomu holds a Rust reference into guest memory.
            unsafe { std::ptr::write_bytes((self.alias + (p - self.base)) as *mut u8, 0, n) };
        }
    }

    /// Which of the physical pages [frame, frame+len) (whole pages, not
    /// translated: a page source's own pages) hold the byte pair `pair`,
    /// a pair split across two pages counting for both. For pages nobody
    /// writes while this reads them (a page cache's run just filled).
    pub fn pages_holding(&self, frame: usize, len: usize, pair: [u8; 2]) -> Vec<bool> {
        assert!(self.contains(frame, len) && frame.is_multiple_of(PAGE_SIZE) && len.is_multiple_of(PAGE_SIZE));
        // SAFETY: the pages lie inside physical memory, so inside the
        // always-readable alias mapping; the caller's pages are not written
        // meanwhile (see above), so a shared slice of them is sound.
        let bytes = unsafe { std::slice::from_raw_parts((self.alias + (frame - self.base)) as *const u8, len) };
        let mut holds: Vec<bool> = bytes.chunks(PAGE_SIZE).map(|page| page.windows(2).any(|w| w == pair)).collect();
        for i in 1..holds.len() {
            if bytes[i * PAGE_SIZE - 1] == pair[0] && bytes[i * PAGE_SIZE] == pair[1] {
                holds[i - 1] = true;
                holds[i] = true;
            }
        }
        holds
    }

    /// Stores `bytes` at `addr` one byte at a time through the writable
    /// alias (code patching: the caller orders the stores and serializes
    /// the other threads between them, see entry/rewrite.rs).
    pub fn poke(&self, addr: usize, bytes: &[u8]) {
        assert!(self.contains(addr, bytes.len()));
        for (i, &b) in bytes.iter().enumerate() {
            // SAFETY: inside physical memory (checked above), so inside the
            // always-writable alias; a volatile byte store, as code may run there.
            unsafe { std::ptr::write_volatile(self.alias_of(addr + i) as *mut u8, b) };
        }
    }

    /// Atomically replaces the two bytes at `addr` with `new` if they still
    /// hold `old` (a compare-and-swap through the writable alias, so other
    /// threads executing them see the old or the new instruction, never a
    /// mix). Fails when the bytes straddle a cache line (no atomic store can
    /// cover them) or the alias cannot be made.
    pub fn patch_u16(&self, addr: usize, old: [u8; 2], new: [u8; 2]) -> bool {
        if !self.contains(addr, 2) || addr % 64 == 63 {
            return false;
        }
        let target = self.alias_of(addr) as *mut u16;
        let (old, new) = (u16::from_le_bytes(old), u16::from_le_bytes(new));
        let ok: u8;
        // SAFETY: target lies inside our alias mapping (checked above), within
        // one cache line; lock cmpxchg on it is an atomic 2-byte CAS (x86
        // allows an unaligned locked access that does not split a line).
        unsafe {
            std::arch::asm!(
                "lock cmpxchg word ptr [{t}], {n:x}",
                "sete {ok}",
                t = in(reg) target,
                n = in(reg) new,
                ok = out(reg_byte) ok,
                inout("ax") old => _,
                options(nostack),
            );
        }
        ok != 0
    }

    /// Atomically replaces the byte at `addr` with `new` if it still holds
    /// `old` (a compare-and-swap through the writable alias): one step of a
    /// multi-byte patch of code that other threads may be running.
    pub fn patch_u8(&self, addr: usize, old: u8, new: u8) -> bool {
        if !self.contains(addr, 1) {
            return false;
        }
        // SAFETY: inside our alias mapping (checked above), which lives for
        // the rest of the process; AtomicU8 has u8's layout and alignment.
        let byte = unsafe { &*(self.alias_of(addr) as *const std::sync::atomic::AtomicU8) };
        byte.compare_exchange(old, new, std::sync::atomic::Ordering::AcqRel, std::sync::atomic::Ordering::Relaxed)
            .is_ok()
    }

    /// Copies bytes inside physical memory (for mremap moves), through the
    /// writable alias: neither range needs to be accessible to the guest.
    pub fn copy_within(&self, dst: usize, src: usize, len: usize) {
        assert!(self.contains(dst, len) && self.contains(src, len));
        // A run at a time on each side (each may show frames).
        let mut done = 0;
        while done < len {
            let (s, d) = (self.alias_of(src + done), self.alias_of(dst + done));
            let n = self.run_len(src + done, len - done).min(self.run_len(dst + done, len - done));
            // SAFETY: both runs lie inside physical memory, so inside the
            // alias mapping (readable and writable); ptr::copy handles overlap.
            unsafe { std::ptr::copy(s as *const u8, d as *mut u8, n) };
            done += n;
        }
    }

    /// Copies physical memory at `src` (a page source's own pages: not
    /// translated) into `dst`, a checked range a guest call gave, as a host
    /// call would write it (through the mermap for secret memory) but
    /// through the writable alias otherwise: the range was checked
    /// writable, and the guest's protection may show it read-only to nomu
    /// (a shared file mapping's pages are mapped as its VMA's).
    pub fn copy_into(&self, dst: GuestRange, src: usize) {
        assert!(self.contains(src, dst.len));
        let from = self.alias + (src - self.base);
        if dst.mermap != 0 {
            // SAFETY: `from` lies in the alias mapping (src checked above);
            // the mermap mapping of dst's pages outlives the range's use.
            unsafe { std::ptr::copy(from as *const u8, dst.mermap as *mut u8, dst.len) };
            return;
        }
        let mut done = 0;
        for (p, n) in self.physical_runs(dst.addr, dst.len) {
            // SAFETY: both lie inside physical memory, so inside the alias
            // mapping (readable and writable); ptr::copy handles overlap
            // (a read into the mapping of the file being read).
            unsafe { std::ptr::copy((from + done) as *const u8, (self.alias + (p - self.base)) as *mut u8, n) };
            done += n;
        }
    }
}

/// A byte range of guest memory that has been checked to lie inside physical
/// memory. Only such ranges are handed to host syscalls that write to memory,
/// so a hostile guest pointer can never aim the host at nomu's own data.
#[derive(Clone, Copy, Debug)]
pub struct GuestRange {
    addr: usize,
    len: usize,
    /// Host calls write it through the writable alias (whatever the guest's
    /// protection): for nomu's own filling of fresh pages, never for a
    /// buffer a guest syscall named.
    through_alias: bool,
    /// Where host calls reach it instead of at `addr`, when not 0: its
    /// pages mapped in the mermap (secret memory, see host::mermap).
    mermap: usize,
}

impl GuestRange {
    pub fn new(addr: usize, len: usize) -> Option<GuestRange> {
        PhysMem::get().contains(addr, len).then_some(GuestRange { addr, len, through_alias: false, mermap: 0 })
    }

    /// Guest memory at `addr` whose pages host calls reach at `at`, a
    /// mermap mapping of them that outlives the range's use.
    pub(super) fn mermapped(addr: usize, len: usize, at: usize) -> Option<GuestRange> {
        GuestRange::new(addr, len).map(|r| GuestRange { mermap: at, ..r })
    }

    /// Whether host calls reach it through the mermap (secret memory).
    pub fn in_mermap(&self) -> bool {
        self.mermap != 0
    }

    /// The same bytes, written by host calls through the writable alias.
    pub fn through_alias(self) -> GuestRange {
        GuestRange { through_alias: true, ..self }
    }

    /// The range without its first `n` bytes.
    pub fn skip(self, n: usize) -> GuestRange {
        let n = n.min(self.len);
        let mermap = if self.mermap == 0 { 0 } else { self.mermap + n };
        GuestRange { addr: self.addr + n, len: self.len - n, mermap, ..self }
    }

    /// The first `n` bytes of the range.
    pub fn take(self, n: usize) -> GuestRange {
        GuestRange { len: n.min(self.len), ..self }
    }

    pub fn addr(&self) -> usize {
        self.addr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub(super) fn ptr(&self) -> *mut libc::c_void {
        let pm = PhysMem::get();
        let addr = if self.mermap != 0 {
            self.mermap
        } else if self.through_alias {
            // One host call, one pointer: the range must be one run of
            // physical memory (nomu's own filling is of fresh pages, and
            // write-back goes a run at a time).
            assert_eq!(pm.run_len(self.addr, self.len), self.len, "an alias range spans remapped pages");
            pm.alias_of(self.addr)
        } else {
            self.addr
        };
        addr as *mut libc::c_void
    }
}

/// Compares the 4-byte guest word `word` with `old` and stores `new` if
/// they are equal, atomically against guest code and every other thread
/// (what a PI futex's kernel side does to the lock word); returns the value
/// it found.
pub fn cmpxchg_u32(word: GuestRange, old: u32, new: u32) -> u32 {
    assert!(word.len() == 4 && word.addr().is_multiple_of(4));
    // SAFETY: the range lies inside physical memory (GuestRange::new), is
    // 4 bytes and aligned, and the caller checked the guest may write it
    // (so the direct map is writable there); the memory is shared with
    // guest code, which is why only an atomic access touches it.
    let a = unsafe { &*(word.ptr() as *const std::sync::atomic::AtomicU32) };
    match a.compare_exchange(old, new, std::sync::atomic::Ordering::SeqCst, std::sync::atomic::Ordering::SeqCst) {
        Ok(v) | Err(v) => v,
    }
}

impl PhysMem {
    /// The first whole page of [addr, addr+len) that holds data, if any
    /// (one SEEK_DATA; `addr` itself when the host cannot tell). Unlike
    /// [`populated`](Self::populated) it never asks where the data ends: the
    /// host finds that a page at a time, past `len` too, so a run of data
    /// that goes on beyond the range (a big child's freed pages) costs a
    /// walk of all of it. Callers serialize (the memfd's file offset is
    /// shared).
    pub fn first_data(&self, addr: usize, len: usize) -> Option<usize> {
        self.assert_pages(addr, len);
        let (start, end) = ((addr - self.base) as libc::off_t, (addr - self.base + len) as libc::off_t);
        // SAFETY: lseek on our own memfd.
        let data = unsafe { libc::lseek(self.memfd.as_raw_fd(), start, libc::SEEK_DATA) };
        if data < 0 {
            // ENXIO: no data after `addr`. Anything else: cannot tell, so
            // it counts as held.
            return (last_errno() != Errno::ENXIO).then_some(addr);
        }
        (data < end).then(|| self.base + (data & !(PAGE_SIZE as libc::off_t - 1)) as usize)
    }

    /// The runs of [addr, addr+len) that hold data, as (addr, len) in whole
    /// pages: the rest are holes and read as zero (SEEK_DATA/SEEK_HOLE on
    /// the memfd, which the host answers from its page index, not page by
    /// page). Callers serialize (the memfd's file offset is shared).
    pub fn populated(&self, addr: usize, len: usize) -> Vec<(usize, usize)> {
        match self.first_data(addr, len) {
            Some(data) => self.populated_from(data, addr + len),
            None => Vec::new(),
        }
    }

    /// [`populated`](Self::populated) of [data, end), given that the page
    /// at `data` holds data (what [`first_data`](Self::first_data) found):
    /// not asked again.
    pub fn populated_from(&self, mut data: usize, end: usize) -> Vec<(usize, usize)> {
        let mut runs = Vec::new();
        loop {
            if end - data == PAGE_SIZE {
                // Its last page: the run is that page, no need to ask
                // (a one-page mapping given a page freed by the last user
                // was two lseeks; it is one).
                runs.push((data, PAGE_SIZE));
                return runs;
            }
            // SAFETY: lseek on our own memfd.
            let hole =
                unsafe { libc::lseek(self.memfd.as_raw_fd(), (data - self.base) as libc::off_t, libc::SEEK_HOLE) };
            // A host that cannot tell: the rest counts as held.
            let hole = if hole < 0 { end } else { (self.base + hole as usize).min(end) };
            let next = hole.next_multiple_of(PAGE_SIZE).min(end);
            runs.push((data, next - data));
            if next == end {
                return runs;
            }
            match self.first_data(next, end - next) {
                Some(d) => data = d,
                None => return runs,
            }
        }
    }
}
