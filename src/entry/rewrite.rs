//! The rewrite entry path (zpoline's second mode, needing neither root nor
//! page 0): a guest `syscall` site is patched, on its first trap, into a
//! 5-byte `jmp rel32` to a trampoline of its own within rel32 reach, which
//! re-executes the instructions the jump displaced and enters zpoline's
//! stub (same register save, fs base, xstate and kick handling; see
//! zpoline.rs).
//!
//! What is displaced, best first: the instructions right before the
//! syscall (closest start first), or the syscall and the instructions after
//! it (decoded forward from the site, ending at the first that transfers
//! control). Every instruction boundary of the patched range other than
//! the first becomes `int3`: past the jump's five bytes the range is filled
//! with int3; a boundary that falls inside the jump's displacement is made
//! an int3 byte by choosing the trampoline's address so that byte of the
//! displacement is 0xcc (E9Patch's instruction punning; a boundary at the
//! displacement's top byte cannot be, and that plan is dropped). A jump to
//! any boundary (a loop back to the syscall) then traps, and the trap is
//! emulated: as the syscall, or by going on at that instruction's copy in
//! the trampoline.
//!
//! Finding the instructions before the syscall: x86 cannot be decoded
//! backwards, so one instruction is decoded (iced-x86) at every offset of
//! the 40 bytes before the site (same page) and chains are followed from
//! each; a start p is taken only if its chain lands exactly on the syscall
//! and every chain with 12 bytes of run-up before p that lands on the
//! syscall passes through p (x86 parses resynchronise within a few
//! instructions; shorter chains only vote). This is the one heuristic of the
//! path. Decisions are cached by site and surrounding bytes, so a program
//! exec'd again costs no decoding.
//!
//! Relocation: iced-x86's BlockEncoder re-encodes the displaced
//! instructions for the trampoline (rip-relative operands and branch targets
//! fixed up). Calls, interrupts, syscalls, a branch before the syscall, an
//! operand aimed into the patched bytes, or anything out of rel32 reach:
//! that plan is dropped, and with no plan left the site stays on the seccomp
//! trap path (always correct).
//!
//! The trampoline, position-independent (the same bytes work wherever
//! it is shown at the same distance from the code, see [`Area`]): the
//! copies of the instructions before the syscall, `lea rcx, [rip+x]` (the
//! guest's address after the syscall), `lea r11, [rip+y]` (where the
//! syscall returns to: the after-part, or that same address when there is
//! none), `jmp [rip+z]` through its region's header word (the stub), then
//! the after-part: the copies of the instructions after the syscall and
//! `jmp` back after the range. `syscall` clobbers rcx and r11 anyway. The
//! stub's rewrite entry never touches the guest's stack: the whole red
//! zone survives. The kernel sees rip = rcx = the guest's own address after
//! the syscall, as a `syscall` leaves them; when it resumes there
//! unchanged, the stub goes on at r11 (a restart, a signal or execve resume
//! elsewhere as usual: the range's head is the jump, its boundaries int3).
//!
//! Patching while other threads run the code, as Linux's text_poke_bp: the
//! trampoline and the site's records are complete first; then `int3` on
//! the first byte, the tail (displacement, int3 fill), and the head byte
//! `e9`, each store followed by membarrier(PRIVATE_EXPEDITED_SYNC_CORE),
//! which makes every other CPU running this process execute a serializing
//! instruction before it returns to user code (Linux's sync-core IPI; the
//! SDM's cross-modifying code rule). A thread that meets the int3 at the
//! head meanwhile is sent to the trampoline (the jump's emulation). Code
//! exec just loaded (sites known from an earlier run of the file) is
//! patched at once: nothing runs it yet (unless the page cache shares it).
//!
//! Where trampolines live: in 256 KiB right below the direct map, 64 MiB
//! right above it, and, for code farther than 2 GiB from both, in 64 KiB
//! chunks of free physical memory as high as rel32 reach allows (the
//! allocator hands out low pages first), claimed from the kernel's
//! allocator for good (read+execute in the direct map, written through the
//! alias). An exec'd position-independent image's code, which the page
//! cache shares between processes, has its own area of trampolines shown
//! before it in every process ([`Area`]). A fault or a kick inside a
//! trampoline is reported at the original instruction's address.
//!
//! Forked children (their own host processes, split.rs) are shown the
//! shared code as patched, and its areas of trampolines: their host
//! process has a page of its own at the stub's page ([`forked_stub_page`]),
//! where the jump through a header lands on split's stub (split's "The
//! stub"), which hands the call over as an int3 there would: it is taken
//! as the site's syscall ([`forked_stub_trap`]; the child's handler
//! answers a few itself, see split's "Local answers"). A site such a child
//! is the first to call is patched then ([`patch_shared`]). A patch's int3
//! boundaries are resolved through the child's own map ([`forked_int3`]).
//! Copies of their parent's own code keep the patches whose trampolines
//! lie in the regions beside physical memory, which their host process
//! shows too (shared with nomu); the marks of such a patch are noted at
//! the copy's frames ([`restore_copy`], and [`forked_copy`] for a copy of
//! a copy), where its int3s are looked up; other patches get their
//! original bytes back there and trap as any syscall does. A site a child
//! calls first in its own copy is patched there ([`patch_own_copy`]: a
//! trampoline in those regions, the marks at the copy). A forked child's
//! mprotect adding PROT_WRITE undoes the patches in its own frames
//! ([`forked_code_made_writable`]).
//!
//! Sites in writable mappings are never patched; mprotect adding PROT_WRITE
//! puts the original bytes back first (a JIT rewriting its code finds its
//! own bytes); freed memory forgets its patches.

use super::GuestRegs;
use crate::host::last_errno;
use crate::host::physmem::{PhysMem, PAGE_SIZE};
use crate::host::safecopy;
use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code, Decoder, DecoderOptions, FlowControl, Instruction, InstructionBlock,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Bytes reserved per trampoline (its code is at most this long).
const SLOT: u64 = 128;
/// A region's header: the stub's address.
const HEADER: usize = 64;
/// How far before the syscall displaced instructions may start.
const LOOK_BACK: usize = 40;
/// How far after it they may end.
const LOOK_AHEAD: usize = 24;
/// At most this many instructions are displaced besides the syscall.
const MAX_DISPLACED: usize = 4;
/// Bytes of decoding before a boundary after which a parse counts as
/// synchronised with the real instruction stream.
const RUN_UP: usize = 12;
const JMP_LEN: u64 = 5;
const INT3: u8 = 0xcc;
const SYSCALL: [u8; 2] = [0x0f, 0x05];
/// rel32 reach, with a margin for the instruction lengths.
const REACH: i64 = (1 << 31) - 4096;
/// A shared image's trampoline area (see [`Area`]) reaches this far before
/// its code: a displacement whose third byte must be int3 (a boundary at
/// the jump's fourth byte) is 0x..cc.... mod 2^24, about 3.2 MiB back.
pub const AREA_REACH: usize = 0x34_0000 + CHUNK;
/// Code ending farther than this from the start of its image would find
/// that displacement's window inside the image: such code is not shared.
pub const AREA_CODE_SPAN: usize = 0x33_0000;
/// Where in an area trampolines without int3 bytes in their displacement
/// go first: its last bytes, nearest the code (the int3 windows farther
/// back stay free for those that need them).
const NEAR_ZONE: u64 = 64 << 10;

struct Region {
    /// The read+execute view (where trampolines run).
    rx: usize,
    /// A writable view of the same pages (where nomu writes them).
    rw: usize,
    len: usize,
}

/// Regions in use, appended to (under STATE's lock) and never removed.
const MAX_REGIONS: usize = 256;
static REGIONS: [OnceLock<Region>; MAX_REGIONS] = [const { OnceLock::new() }; MAX_REGIONS];
static REGION_COUNT: AtomicUsize = AtomicUsize::new(0);
/// The stub every trampoline enters (its address is in each region's header).
static STUB: AtomicU64 = AtomicU64::new(0);
/// How pages of physical memory are claimed for regions near guest code.
type Claim = Box<dyn Fn(usize, usize) -> bool + Send + Sync>;
static PAGE_SOURCE: OnceLock<Claim> = OnceLock::new();
/// A region claimed in physical memory: 64 KiB holds one window of every
/// displacement whose second byte must be int3 (see `place`).
const CHUNK: usize = 64 << 10;

/// What nomu knows about a guest address.
#[derive(Clone, Copy, Debug)]
enum Mark {
    /// The first byte of a patched range (the jump), of trampoline `slot`.
    Head { slot: u64 },
    /// An instruction boundary inside a patched range (now int3): the
    /// `k`th instruction of the range.
    Interior { slot: u64, k: usize },
    /// A syscall site that cannot be patched (stays on the trap path).
    Refused,
}

/// One patched range.
/// Whether it is in guest memory now (else its trampoline waits for the
/// same bytes at the same place again: a re-exec) is whether the mark at
/// its start is its head (see [`active`]).
struct Patch {
    /// First byte of the patched range, its original bytes, the bytes
    /// written over them.
    start: u64,
    original: Vec<u8>,
    patched: Vec<u8>,
    /// Original address of each instruction of the range (the syscall
    /// among them, at `sk`).
    orig: Vec<u64>,
    /// Where each one's copy starts in the trampoline (for the syscall:
    /// the lea entering the stub); then where the trampoline's jump back is.
    tramp: Vec<u64>,
    sk: usize,
}

impl Patch {
    fn end(&self) -> u64 {
        self.start + self.original.len() as u64
    }
}

/// What a site's neighbourhood was found to allow, by its bytes.
#[derive(Clone)]
struct Plan {
    instrs: Vec<Instruction>,
    sk: usize,
}

/// The marks, grouped by guest page: a patched range lies in one page and
/// pages are freed whole, so forgetting a freed page's marks is dropping
/// one entry, not removing each mark and marking each patch inactive
/// (which took ~1.4 us of every exit of the benchmark's child, with its 34
/// marks: exit + wait was 1.2-1.3x zpoline's on the rewrite path). A
/// patch is active while its head's mark is there ([`active`]).
#[derive(Default)]
struct Marks {
    pages: BTreeMap<u64, BTreeMap<u64, Mark>>,
}

fn page_of(a: u64) -> u64 {
    a & !(PAGE_SIZE as u64 - 1)
}

impl Marks {
    const fn new() -> Marks {
        Marks { pages: BTreeMap::new() }
    }

    fn get(&self, a: &u64) -> Option<&Mark> {
        self.pages.get(&page_of(*a))?.get(a)
    }

    fn insert(&mut self, a: u64, m: Mark) {
        self.pages.entry(page_of(a)).or_default().insert(a, m);
    }

    fn extend(&mut self, marks: impl IntoIterator<Item = (u64, Mark)>) {
        for (a, m) in marks {
            self.insert(a, m);
        }
    }

    fn remove(&mut self, a: &u64) {
        let page = page_of(*a);
        if let Some(marks) = self.pages.get_mut(&page) {
            marks.remove(a);
            if marks.is_empty() {
                self.pages.remove(&page);
            }
        }
    }

    /// The marks in [range.start, range.end), in address order.
    fn range(&self, range: std::ops::Range<u64>) -> impl Iterator<Item = (&u64, &Mark)> + '_ {
        let (lo, hi) = (range.start, range.end);
        self.pages.range(page_of(lo)..hi.max(page_of(lo))).flat_map(move |(_, marks)| marks.range(lo..hi.max(lo)))
    }

    /// Takes the marks in [lo, hi): whole pages at once (a part of a
    /// page at either end, which freeing never leaves, mark by mark).
    fn take(&mut self, lo: u64, hi: u64) -> Vec<BTreeMap<u64, Mark>> {
        let page = PAGE_SIZE as u64;
        let (first, end) = (lo.next_multiple_of(page), page_of(hi));
        let mut taken = Vec::new();
        // The parts of pages at the ends: [lo, first) and [end, hi), or
        // all of it inside one page.
        let parts = if first > hi { [(lo, hi), (hi, hi)] } else { [(lo, first), (end, hi)] };
        if first < end {
            let pages: Vec<u64> = self.pages.range(first..end).map(|(&p, _)| p).collect();
            taken.extend(pages.iter().filter_map(|p| self.pages.remove(p)));
        }
        for (a, b) in parts {
            if a < b {
                let part: BTreeMap<u64, Mark> = self.range(a..b).map(|(&a, &m)| (a, m)).collect();
                for a in part.keys() {
                    self.remove(a);
                }
                taken.push(part);
            }
        }
        taken
    }
}

/// The trampoline area of an image whose code the page cache shares
/// between processes (mm::cache's `code_with_trampolines`): physical pages
/// [start, end) of the code's cached run, before its code [text, text_end)
/// in the same run, and shown by every process that runs the code at the
/// same distance before it (the loader leaves the room). A patch there is
/// a jump to a trampoline in the area, right at every address the page is
/// shown at, and the trampolines are position-independent (relative
/// operands only, the word before the after-part a distance). Such a site
/// is known by its physical address, as are its marks, patch and
/// trampoline; this path works with physical addresses throughout (the
/// same as the guest's for a process's own pages), and turns them back
/// into the guest's at the thread's own offset (the address it trapped or
/// stopped at, minus its physical address).
#[derive(Clone, Copy)]
struct Area {
    start: u64,
    end: u64,
    text: u64,
    text_end: u64,
}

#[derive(Default)]
struct State {
    marks: Marks,
    /// Areas of shared code, by the physical address of their run.
    areas: BTreeMap<u64, Area>,
    /// Patches by trampoline address (kept, emptied, once undone: a
    /// thread may still run the trampoline).
    patches: BTreeMap<u64, Patch>,
    /// Trampolines by their range's address and original bytes, for
    /// reuse (a program exec'd again at the same address).
    reuse: BTreeMap<(u64, Vec<u8>), u64>,
    /// Plans by site and the bytes around it (decoding costs).
    plans: BTreeMap<(u64, Vec<u8>), Option<Plan>>,
    /// Trampoline byte ranges in use: start -> end.
    used: BTreeMap<u64, u64>,
    /// Patches by site and the bytes around it: a program exec'd again
    /// gets its patches back without decoding or allocating.
    by_site: BTreeMap<(u64, Around), u64>,
    /// The marks of patches a forked child's copy of code keeps (see
    /// "Forked children"), at the copy's physical addresses; the patches'
    /// own addresses are the child's, as they were its parent's.
    forked_marks: Marks,
}

/// The bytes around a site (LOOK_BACK before to LOOK_AHEAD after, within
/// its page), zero-padded, and how many there are.
type Around = ([u8; LOOK_BACK + 2 + LOOK_AHEAD], usize);

static STATE: Mutex<State> = Mutex::new(State {
    marks: Marks::new(),
    areas: BTreeMap::new(),
    patches: BTreeMap::new(),
    reuse: BTreeMap::new(),
    plans: BTreeMap::new(),
    used: BTreeMap::new(),
    by_site: BTreeMap::new(),
    forked_marks: Marks::new(),
});

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

const MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE: i32 = 1 << 5;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE: i32 = 1 << 6;

fn membarrier(cmd: i32) -> i64 {
    // SAFETY: membarrier takes no pointers.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0, 0) }
}

/// Every other thread of this process executes a serializing instruction
/// before it runs user code again.
pub(super) fn sync_core() {
    if membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) < 0 {
        // Registered at install: cannot fail short of a kernel bug.
        crate::host::sys::write_all(2, b"nomu: membarrier(SYNC_CORE) failed\n");
        std::process::abort();
    }
}

/// Whether this host can patch code safely while threads run it.
pub fn available() -> Result<(), String> {
    static AVAILABLE: OnceLock<Result<(), String>> = OnceLock::new();
    AVAILABLE
        .get_or_init(|| {
            if membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE) < 0 {
                return Err(format!("needs membarrier(PRIVATE_EXPEDITED_SYNC_CORE): {}", last_errno()));
            }
            Ok(())
        })
        .clone()
}

/// Maps one region of `len` bytes at `at` (read+execute) and a writable
/// view of it; the stub's address goes in its header.
fn map_region(at: usize, len: usize, stub: u64) -> Option<Region> {
    // SAFETY: a new memfd of our own, two fresh shared mappings of it, the
    // first at a fixed address that MAP_FIXED_NOREPLACE never takes from
    // anything else.
    unsafe {
        let fd = libc::memfd_create(c"nomu-trampolines".as_ptr(), libc::MFD_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let ok = libc::ftruncate(fd, len as libc::off_t) == 0;
        let rx = if ok {
            libc::mmap(
                at as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE | libc::MAP_NORESERVE,
                fd,
                0,
            )
        } else {
            libc::MAP_FAILED
        };
        if rx == libc::MAP_FAILED || rx as usize != at {
            if rx != libc::MAP_FAILED {
                libc::munmap(rx, len);
            }
            libc::close(fd);
            return None;
        }
        let rw = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_NORESERVE,
            fd,
            0,
        );
        libc::close(fd);
        if rw == libc::MAP_FAILED {
            libc::munmap(rx, len);
            return None;
        }
        std::ptr::write_unaligned(rw as *mut u64, stub);
        Some(Region { rx: rx as usize, rw: rw as usize, len })
    }
}

/// Reserves the trampoline regions beside physical memory.
pub fn install(physmem: &PhysMem, stub: u64) -> Result<(), String> {
    available()?;
    let mut regions = Vec::new();
    // Below: 256 KiB right under the direct map (the rest below stays
    // unmapped, so a near-NULL access still faults).
    let min = std::fs::read_to_string("/proc/sys/vm/mmap_min_addr")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(65536)
        .max(PAGE_SIZE);
    let min = min.next_multiple_of(PAGE_SIZE) + PAGE_SIZE;
    let below_len = (256usize << 10).min(physmem.base().saturating_sub(min)) & !(PAGE_SIZE - 1);
    if below_len >= 16 * PAGE_SIZE {
        if let Some(r) = map_region(physmem.base() - below_len, below_len, stub) {
            regions.push(r);
        }
    }
    // Above: 64 MiB right after it (pages cost nothing until written).
    if let Some(r) = map_region(physmem.end(), 64 << 20, stub) {
        regions.push(r);
    }
    STUB.store(stub, Ordering::Relaxed);
    for r in regions {
        add_region(r);
    }
    Ok(())
}

/// Where the kernel lets this path claim physical pages.
pub fn set_page_source(claim: Claim) {
    let _ = PAGE_SOURCE.set(claim);
}

fn add_region(r: Region) -> bool {
    let n = REGION_COUNT.load(Ordering::Acquire);
    if n == MAX_REGIONS {
        return false;
    }
    let _ = REGIONS[n].set(r);
    REGION_COUNT.store(n + 1, Ordering::Release);
    true
}

fn regions() -> impl Iterator<Item = &'static Region> {
    REGIONS[..REGION_COUNT.load(Ordering::Acquire)].iter().filter_map(|r| r.get())
}

/// The regions beside physical memory (not chunks of it): forked
/// children's host processes show them too.
fn kept_regions_iter() -> impl Iterator<Item = &'static Region> {
    let pm = PhysMem::get();
    regions().filter(move |r| !pm.contains(r.rx, 1))
}

/// The marks of patch `slot`, whose instructions start at `orig` (the
/// first is its head), noted `delta` away from there.
fn patch_marks(slot: u64, orig: &[u64], delta: u64) -> Vec<(u64, Mark)> {
    let mark = |k| if k == 0 { Mark::Head { slot } } else { Mark::Interior { slot, k } };
    orig.iter().enumerate().map(|(k, &a)| (a.wrapping_add(delta), mark(k))).collect()
}

/// A patch's `len` bytes at `start`: the jump to trampoline `slot`, then int3.
fn jump_bytes(start: u64, slot: u64, len: usize) -> Vec<u8> {
    let rel = slot as i64 - (start + JMP_LEN) as i64;
    let mut patched = vec![INT3; len];
    patched[0] = 0xe9;
    patched[1..JMP_LEN as usize].copy_from_slice(&(rel as i32).to_le_bytes());
    patched
}

/// Claims CHUNK-aligned pages of physical memory holding [at, at+SLOT)
/// for a new region (read+execute in the direct map, written through the
/// alias). Whether it worked.
fn claim_region(at: u64) -> bool {
    let Some(claim) = PAGE_SOURCE.get() else { return false };
    let pm = PhysMem::get();
    let start = at as usize & !(CHUNK - 1);
    let len = (at as usize + SLOT as usize).next_multiple_of(CHUNK) - start;
    if !pm.contains(start, len) || !claim(start, len) {
        return false;
    }
    let rw = pm.alias_addr(start);
    // SAFETY: the first 8 bytes of pages just claimed, through the alias.
    unsafe { std::ptr::write_unaligned(rw as *mut u64, STUB.load(Ordering::Relaxed)) };
    add_region(Region { rx: start, rw, len })
}

fn in_regions(addr: u64) -> bool {
    let a = addr as usize;
    regions().any(|r| (r.rx + HEADER..r.rx + r.len).contains(&a))
}

/// Reads code at physical address `addr` (a site's or its page's: see
/// [`Area`] for why this path works with physical addresses).
fn read_guest(addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut v = vec![0u8; len];
    (safecopy::copy_from_physical(&mut v, addr as usize) == len).then_some(v)
}

/// Whether `i` can run from a trampoline with the same effect, as an
/// instruction before the syscall (`after`: after it) of the range
/// [start, end).
fn relocatable(i: &Instruction, start: u64, end: u64, after: bool) -> bool {
    let flow_ok = match i.flow_control() {
        FlowControl::Next => true,
        // After the syscall a branch or return may end the range; calls
        // would push a trampoline address.
        FlowControl::ConditionalBranch
        | FlowControl::UnconditionalBranch
        | FlowControl::IndirectBranch
        | FlowControl::Return => after,
        _ => false,
    };
    // A rip-relative operand aimed into the patched bytes would see the patch.
    flow_ok && !(i.is_ip_rel_memory_operand() && (start..end).contains(&i.ip_rel_memory_address()))
}

/// Decodes one instruction at every offset of `bytes` (which begin at `base`).
fn decode_each(bytes: &[u8], base: u64) -> Vec<Option<Instruction>> {
    (0..bytes.len())
        .map(|a| {
            let mut d = Decoder::with_ip(64, &bytes[a..], base + a as u64, DecoderOptions::NONE);
            let i = d.decode();
            (!i.is_invalid()).then_some(i)
        })
        .collect()
}

/// The chain of instructions from offset `a` that ends exactly at `end`.
fn chain(each: &[Option<Instruction>], mut a: usize, end: usize) -> Option<Vec<Instruction>> {
    let mut out = Vec::new();
    while a < end {
        let i = each[a]?;
        out.push(i);
        a += i.len();
    }
    (a == end).then_some(out)
}

/// The ways to patch the syscall at `site`, best first: instructions
/// before it (closest first), then the syscall with instructions after it.
fn plans(site: u64, delta: u64) -> Vec<Plan> {
    let page = site & !(PAGE_SIZE as u64 - 1);
    let base = site.saturating_sub(LOOK_BACK as u64).max(page);
    let n = (site - base) as usize;
    let mut out = Vec::new();
    if let Some(bytes) = read_guest(base.wrapping_add(delta), n) {
        let each = decode_each(&bytes, base);
        let runs: Vec<Option<Vec<Instruction>>> = (0..n).map(|a| chain(&each, a, n)).collect();
        for p in (0..(n + 1).saturating_sub(3)).rev() {
            let Some(run) = &runs[p] else { continue };
            if run.len() > MAX_DISPLACED {
                continue;
            }
            let boundary = base + p as u64;
            // Parses with RUN_UP bytes of run-up have resynchronised with
            // the real instruction stream: all must agree on p. Shorter
            // ones (garbage parses land on the syscall too) only vote.
            let (mut long_for, mut long_against, mut short_for, mut short_against) = (0, 0, 0, 0);
            for (a, earlier) in runs[..p].iter().enumerate() {
                let Some(earlier) = earlier else { continue };
                let through = earlier.iter().any(|i| i.ip() == boundary);
                match (a + RUN_UP <= p, through) {
                    (true, true) => long_for += 1,
                    (true, false) => long_against += 1,
                    (false, true) => short_for += 1,
                    (false, false) => short_against += 1,
                }
            }
            let agreed = if long_for + long_against > 0 {
                long_against == 0
            } else {
                short_for > 0 && short_for > short_against
            };
            if !agreed {
                continue;
            }
            // Each later boundary of an agreed parse is as sure as its
            // start: the range from there, when it holds the jump, goes
            // first, nearest the syscall first. Voting alone may refuse the
            // nearest start where an earlier parse agrees on it: glibc's
            // wrappers (`ret`, padding, then `mov $nr, %eax; syscall`) were
            // patched from the padding on, which left each function's
            // first byte an int3 that every call trapped at (~1.8 us).
            for k in (0..run.len()).rev() {
                let start = run[k].ip();
                if site + 2 - start < JMP_LEN || out.iter().any(|o: &Plan| o.instrs[0].ip() == start) {
                    continue;
                }
                if run[k..].iter().all(|i| relocatable(i, start, site + 2, false)) {
                    let mut instrs = run[k..].to_vec();
                    let sk = instrs.len();
                    instrs.push(syscall_at(site));
                    out.push(Plan { instrs, sk });
                }
            }
        }
    }
    // Nearest the syscall first: the fewer bytes displaced, the fewer
    // boundaries become int3.
    out.sort_by_key(|plan| std::cmp::Reverse(plan.instrs[0].ip()));
    // After: the syscall, then instructions up to 5 bytes (decoding from a
    // known boundary is exact), ending at the first that transfers control.
    let ahead = (LOOK_AHEAD as u64).min(page + PAGE_SIZE as u64 - (site + 2)) as usize;
    if let Some(bytes) = read_guest((site + 2).wrapping_add(delta), ahead) {
        let mut d = Decoder::with_ip(64, &bytes, site + 2, DecoderOptions::NONE);
        let mut instrs = vec![syscall_at(site)];
        let mut end = site + 2;
        while end < site + JMP_LEN && d.can_decode() {
            let i = d.decode();
            if i.is_invalid() || instrs.len() > MAX_DISPLACED {
                break;
            }
            end = i.next_ip();
            let stops = i.flow_control() != FlowControl::Next;
            instrs.push(i);
            if stops {
                break;
            }
        }
        if end >= site + JMP_LEN && instrs[1..].iter().all(|i| relocatable(i, site, end, true)) {
            out.push(Plan { instrs, sk: 0 });
        }
    }
    out
}

/// A stand-in for the syscall instruction in a plan (never encoded).
fn syscall_at(site: u64) -> Instruction {
    let mut d = Decoder::with_ip(64, &SYSCALL, site, DecoderOptions::NONE);
    d.decode()
}

/// The trampoline for `plan` at `at`, entering the stub through the word
/// at `header`: its bytes and where each instruction's copy (the
/// syscall's: the lea) and the jump back start. Position-independent: it
/// works wherever it is shown at the same distance from the code.
fn build(plan: &Plan, at: u64, header: u64) -> Option<(Vec<u8>, Vec<u64>)> {
    let (before, after) = (&plan.instrs[..plan.sk], &plan.instrs[plan.sk + 1..]);
    let site = plan.instrs[plan.sk].ip();
    let end = plan.instrs.last().unwrap().next_ip();
    let opts = BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS;
    let mut code = Vec::new();
    let mut tramp = Vec::new();
    if !before.is_empty() {
        let res = BlockEncoder::encode(64, InstructionBlock::new(before, at), opts).ok()?;
        tramp.extend(res.new_instruction_offsets.iter().map(|&o| at + o as u64));
        code = res.code_buffer;
    }
    // lea rcx, [rip + x]: the address after the syscall in the guest's
    // code (where `syscall` would leave rip and rcx);
    // lea r11, [rip + y]: where the syscall returns to, the after-part
    // (the same address when there is none to run); `syscall` clobbers
    // both registers. Then jmp [rip + (header - next)].
    let lea_at = at + code.len() as u64;
    tramp.push(lea_at);
    let after_at = lea_at + 7 + 7 + 6;
    let rel_to = |target: u64, next: u64| i32::try_from(target as i64 - next as i64).ok();
    let back = if after.is_empty() { site + 2 } else { after_at };
    code.extend_from_slice(&[0x48, 0x8d, 0x0d]);
    code.extend_from_slice(&rel_to(site + 2, lea_at + 7)?.to_le_bytes());
    code.extend_from_slice(&[0x4c, 0x8d, 0x1d]);
    code.extend_from_slice(&rel_to(back, lea_at + 14)?.to_le_bytes());
    code.extend_from_slice(&[0xff, 0x25]);
    code.extend_from_slice(&rel_to(header, after_at)?.to_le_bytes());
    // The after-part: the instructions after the syscall, the jump back.
    let mut block: Vec<Instruction> = after.to_vec();
    block.push(Instruction::with_branch(Code::Jmp_rel32_64, end).ok()?);
    let res = BlockEncoder::encode(64, InstructionBlock::new(&block, after_at), opts).ok()?;
    tramp.extend(res.new_instruction_offsets.iter().map(|&o| after_at + o as u64));
    code.extend_from_slice(&res.code_buffer);
    if tramp.len() != plan.instrs.len() + 1 || code.len() as u64 > SLOT {
        return None;
    }
    Some((code, tramp))
}

/// The smallest x' >= x whose bytes `fixed` (a bit per byte 0..3) are int3.
fn next_punned(mut x: i64, fixed: u8) -> i64 {
    'again: loop {
        for i in (0..3).rev() {
            if fixed & (1 << i) == 0 {
                continue;
            }
            let b = (x >> (8 * i)) & 0xff;
            if b != INT3 as i64 {
                let below = (1i64 << (8 * (i + 1))) - 1;
                x = (x & !below) + if b > INT3 as i64 { below + 1 } else { 0 } + ((INT3 as i64) << (8 * i));
                continue 'again;
            }
        }
        return x;
    }
}

/// Places a trampoline for `plan`'s range at `start`: an address within
/// reach whose jump displacement has int3 bytes wherever an instruction
/// boundary of the range falls inside the jump (instruction punning), so
/// a jump to any boundary traps. Writes it; its address and copies. A
/// site of shared code gets one in its own `area`, or none.
fn place(st: &mut State, plan: &Plan, area: Option<Area>) -> Option<(u64, Vec<u64>)> {
    let fixed = punned_bytes(plan)?;
    let from = (plan.instrs[0].ip() + JMP_LEN) as i64;
    if let Some(area) = area {
        let (lo, hi) = ((area.start as usize + HEADER) as i64, area.end as i64 - SLOT as i64);
        let near = (hi - NEAR_ZONE as i64).max(lo);
        let header = area.start;
        let rw = |at: u64| PhysMem::get().alias_addr(at as usize);
        return place_between(st, plan, from, fixed, (near, hi), header, &rw)
            .or_else(|| place_between(st, plan, from, fixed, (lo, hi), header, &rw));
    }
    if let Some(found) = place_in_regions(st, plan, from, fixed) {
        return Some(found);
    }
    // None in reach: claim free physical pages, as high as reach allows
    // (the allocator hands out low pages first, and large contiguous
    // blocks, a 4 GiB mapping's, stay whole), at a displacement with the
    // int3 bytes wanted.
    let pm = PhysMem::get();
    let period: i64 = if fixed & 4 != 0 { 1 << 24 } else { CHUNK as i64 };
    let top = (pm.end() as i64 - CHUNK as i64).min(from + REACH - SLOT as i64);
    for t in 0..64i64 {
        let target = top - t * period;
        if target < pm.base() as i64 || target < from - REACH {
            break;
        }
        let rel = next_punned(target - from, fixed);
        let at = from + rel;
        if rel > REACH || at + SLOT as i64 > pm.end() as i64 {
            continue;
        }
        if claim_region(at as u64) {
            return place_in_regions(st, plan, from, fixed);
        }
    }
    None
}

/// The bytes of the jump's displacement (a bit per byte 0..3) that must be
/// int3, being instruction boundaries of `plan`'s range; None when one is
/// its top byte (out of any reach).
fn punned_bytes(plan: &Plan) -> Option<u8> {
    let start = plan.instrs[0].ip();
    let mut fixed = 0u8;
    for i in &plan.instrs[1..] {
        let off = i.ip() - start;
        if off < JMP_LEN {
            if off == JMP_LEN - 1 {
                return None;
            }
            fixed |= 1 << (off - 1);
        }
    }
    Some(fixed)
}

fn place_in_regions(st: &mut State, plan: &Plan, from: i64, fixed: u8) -> Option<(u64, Vec<u64>)> {
    place_in(st, plan, from, fixed, regions())
}

fn place_in<'a>(
    st: &mut State,
    plan: &Plan,
    from: i64,
    fixed: u8,
    regions: impl Iterator<Item = &'a Region>,
) -> Option<(u64, Vec<u64>)> {
    for region in regions {
        let (lo, hi) = ((region.rx + HEADER) as i64, (region.rx + region.len) as i64 - SLOT as i64);
        let rw = |at: u64| region.rw + (at as usize - region.rx);
        if let Some(found) = place_between(st, plan, from, fixed, (lo, hi), region.rx as u64, &rw) {
            return Some(found);
        }
    }
    None
}

/// Places the trampoline in [lo, hi] (its start), the first free slot up
/// from lo within reach whose displacement has the int3 bytes `fixed`
/// wants; `rw` is where nomu writes the byte at an address there.
fn place_between(
    st: &mut State,
    plan: &Plan,
    from: i64,
    fixed: u8,
    (lo, hi): (i64, i64),
    header: u64,
    rw: &dyn Fn(u64) -> usize,
) -> Option<(u64, Vec<u64>)> {
    let mut rel = next_punned((lo - from).max(-REACH), fixed);
    while rel <= REACH && from + rel <= hi {
        let at = (from + rel) as u64;
        // Overlapping a trampoline in use: go on past it.
        if let Some((_, &end)) = st.used.range(..at + SLOT).next_back().filter(|(_, &e)| e > at) {
            rel = next_punned(end as i64 - from, fixed);
            continue;
        }
        // Out of reach of a rip-relative operand or branch target: the
        // next region may do.
        let (code, tramp) = build(plan, at, header)?;
        // SAFETY: the slot lies in our writable view of the region (or of
        // the physical pages of an area), and no thread runs it yet
        // (nothing jumps to it before the patch).
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), rw(at) as *mut u8, code.len()) };
        st.used.insert(at, at + SLOT);
        return Some((at, tramp));
    }
    None
}

/// Whether other threads may be running the code being patched.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Patching {
    /// Code just loaded by exec, which nothing runs yet: the bytes are
    /// written at once, like the rest of the image.
    Fresh,
    /// A site that trapped: text_poke_bp's order, serialized.
    Live,
}

/// Patches the syscall at `site` if it can be (idempotent; a site that
/// cannot is remembered as refused). Called from the kernel on a site's
/// first trap in a mapping that is not writable, or at exec for a site
/// known from an earlier run.
pub fn patch(site: u64, how: Patching) -> bool {
    let pm = PhysMem::get();
    if !pm.contains(site as usize, 2) || (site as usize) / PAGE_SIZE != (site as usize + 1) / PAGE_SIZE {
        return false;
    }
    // A page shown from elsewhere (mm::mapping) may be shown at other
    // addresses too: only an image's code with an area of trampolines at
    // the same distance everywhere is patched (the page cache's other code
    // pages hold no syscall, see mm::cache). Known by its physical address
    // from here on; patched as code others run.
    let phys = pm.translate(site as usize) as u64;
    if phys != site {
        return patch_shared(phys);
    }
    patch_in(pm, state(), site, None, how)
}

/// Patches the syscall at physical `phys` if it lies in an image's code
/// that has an area of trampolines (code every process showing it runs as
/// patched, forked children's host processes too): as a site that
/// trapped, for a process showing the page elsewhere, or for a forked
/// child (whose addresses are its own).
pub fn patch_shared(phys: u64) -> bool {
    let pm = PhysMem::get();
    if !pm.contains(phys as usize, 2) || (phys as usize) / PAGE_SIZE != (phys as usize + 1) / PAGE_SIZE {
        return false;
    }
    let st = state();
    match area_of(&st, phys) {
        Some(a) if (a.text..a.text_end).contains(&phys) => patch_in(pm, st, phys, Some(a), Patching::Live),
        _ => false,
    }
}

/// Patches the syscall a forked child called at its address `site`, in
/// its own copy of code at physical `phys` (see "Forked children"): with
/// a trampoline in the regions its host process shows (one made before
/// for the same bytes at the same address, or a new one), the marks noted
/// at the copy. A site that cannot be is remembered as refused there.
pub fn patch_own_copy(site: u64, phys: u64) -> bool {
    let pm = PhysMem::get();
    let page = site & !(PAGE_SIZE as u64 - 1);
    if forked_stub_page().is_none() || (site + 1) & !(PAGE_SIZE as u64 - 1) != page || !pm.contains(phys as usize, 2) {
        return false;
    }
    let delta = phys.wrapping_sub(site);
    let mut st = state();
    if st.forked_marks.get(&phys).is_some() || read_guest(phys, 2).as_deref() != Some(&SYSCALL[..]) {
        return false;
    }
    let mut found = None;
    for plan in plans(site, delta) {
        let (start, end) = (plan.instrs[0].ip(), plan.instrs.last().unwrap().next_ip());
        if st.forked_marks.range(start.wrapping_add(delta)..end.wrapping_add(delta)).next().is_some() {
            continue;
        }
        let Some(original) = read_guest(start.wrapping_add(delta), (end - start) as usize) else { continue };
        // The same bytes at the same address: the same trampoline.
        let made = st.reuse.get(&(start, original.clone())).copied().filter(|&slot| in_kept_region(slot));
        if let Some((slot, tramp)) = made.and_then(|slot| st.patches.get(&slot).map(|p| (slot, p.tramp.clone()))) {
            found = Some((plan, original, slot, tramp));
            break;
        }
        let Some(fixed) = punned_bytes(&plan) else { continue };
        if let Some((slot, tramp)) = place_in(&mut st, &plan, (start + JMP_LEN) as i64, fixed, kept_regions_iter()) {
            st.reuse.insert((start, original.clone()), slot);
            found = Some((plan, original, slot, tramp));
            break;
        }
    }
    let Some((plan, original, slot, tramp)) = found else {
        st.forked_marks.insert(phys, Mark::Refused);
        return false;
    };
    let start = plan.instrs[0].ip();
    let patched = jump_bytes(start, slot, original.len());
    let orig: Vec<u64> = plan.instrs.iter().map(|i| i.ip()).collect();
    st.forked_marks.extend(patch_marks(slot, &orig, delta));
    st.patches.insert(slot, Patch { start, original, patched: patched.clone(), orig, tramp, sk: plan.sk });
    // The child's other threads may run it: int3 first (the marks are
    // there), then the tail, then the head.
    write_patch(pm, start.wrapping_add(delta), &patched, Patching::Live);
    true
}

fn patch_in(
    pm: &PhysMem,
    mut st: std::sync::MutexGuard<'_, State>,
    site: u64,
    area: Option<Area>,
    how: Patching,
) -> bool {
    match st.marks.get(&site).copied() {
        Some(Mark::Refused) => return false,
        Some(Mark::Head { slot } | Mark::Interior { slot, .. }) => {
            if intact(&st, slot) {
                return true;
            }
            forget_patch(&mut st, slot);
        }
        None => {}
    }
    if read_guest(site, 2).as_deref() != Some(&SYSCALL[..]) {
        return false;
    }
    // The site's neighbourhood, as the key of what was decided before.
    let page = site & !(PAGE_SIZE as u64 - 1);
    let lo = site.saturating_sub(LOOK_BACK as u64).max(page);
    let hi = (site + 2 + LOOK_AHEAD as u64).min(page + PAGE_SIZE as u64);
    let mut around: Around = ([0; LOOK_BACK + 2 + LOOK_AHEAD], (hi - lo) as usize);
    if safecopy::copy_from_physical(&mut around.0[..around.1], lo as usize) != around.1 {
        return false;
    }
    // Patched before with these very bytes around (a re-exec): the same
    // trampoline again.
    if let Some(&slot) = st.by_site.get(&(site, around)) {
        let free = st.patches.get(&slot).filter(|p| !active(&st, slot, p)).map(|p| (p.start, p.end()));
        if let Some((start, end)) = free.filter(|&(start, end)| st.marks.range(start..end).next().is_none()) {
            let p = &st.patches[&slot];
            let marks = patch_marks(slot, &p.orig, 0);
            let bytes = p.patched.clone();
            st.marks.extend(marks);
            debug_assert_eq!(end - start, bytes.len() as u64);
            write_patch(pm, start, &bytes, how);
            return true;
        }
    }
    let key_again = (site, around);
    let key = (site, around.0[..around.1].to_vec());
    let cached = st.plans.get(&key).cloned();
    let found = match cached {
        Some(Some(plan)) => try_plan(&mut st, &plan, area).map(|placed| (plan, placed)),
        Some(None) => None,
        None => {
            let mut found = None;
            for plan in plans(site, 0) {
                if let Some(placed) = try_plan(&mut st, &plan, area) {
                    found = Some((plan, placed));
                    break;
                }
            }
            st.plans.insert(key, found.as_ref().map(|(plan, _)| plan.clone()));
            found
        }
    };
    let Some((plan, (slot, tramp))) = found else {
        st.marks.insert(site, Mark::Refused);
        return false;
    };
    let start = plan.instrs[0].ip();
    let end = plan.instrs.last().unwrap().next_ip();
    let Some(original) = read_guest(start, (end - start) as usize) else { return false };
    let patched = jump_bytes(start, slot, original.len());
    let orig: Vec<u64> = plan.instrs.iter().map(|i| i.ip()).collect();
    // Records first: a thread meeting an int3 must find what it stands for.
    st.marks.extend(patch_marks(slot, &orig, 0));
    st.patches.insert(slot, Patch { start, original, patched: patched.clone(), orig, tramp, sk: plan.sk });
    st.by_site.insert(key_again, slot);
    write_patch(pm, start, &patched, how);
    true
}

/// Writes a patch's bytes at `start`.
fn write_patch(pm: &PhysMem, start: u64, patched: &[u8], how: Patching) {
    if how == Patching::Fresh {
        pm.poke(start as usize, patched);
        return;
    }
    // text_poke_bp: int3, the tail, the head, serializing between.
    pm.poke(start as usize, &[INT3]);
    sync_core();
    pm.poke(start as usize + 1, &patched[1..]);
    sync_core();
    pm.poke(start as usize, &patched[..1]);
    sync_core();
}

/// The trampoline for `plan`: one made before for the same bytes at the
/// same place (and not in use), or a new one.
fn try_plan(st: &mut State, plan: &Plan, area: Option<Area>) -> Option<(u64, Vec<u64>)> {
    let start = plan.instrs[0].ip();
    let end = plan.instrs.last().unwrap().next_ip();
    // Every byte of the range must be free of other patches.
    if st.marks.range(start..end).next().is_some() {
        return None;
    }
    let original = read_guest(start, (end - start) as usize)?;
    if let Some(&slot) = st.reuse.get(&(start, original.clone())) {
        if let Some(p) = st.patches.get(&slot).filter(|p| !active(st, slot, p)) {
            return Some((slot, p.tramp.clone()));
        }
    }
    let (slot, tramp) = place(st, plan, area)?;
    st.reuse.insert((start, original), slot);
    // Not in use until patch() fills it in.
    st.patches.insert(
        slot,
        Patch { start, original: Vec::new(), patched: Vec::new(), orig: Vec::new(), tramp: tramp.clone(), sk: plan.sk },
    );
    Some((slot, tramp))
}

/// Whether patch `slot` (`p`) is in guest memory now: the mark at its
/// start is its head.
fn active(st: &State, slot: u64, p: &Patch) -> bool {
    matches!(st.marks.get(&p.start), Some(Mark::Head { slot: s }) if *s == slot)
}

/// Whether patch `slot`'s bytes are still in guest memory.
fn intact(st: &State, slot: u64) -> bool {
    st.patches
        .get(&slot)
        .is_some_and(|p| active(st, slot, p) && read_guest(p.start, p.patched.len()).as_deref() == Some(&p.patched[..]))
}

/// Drops the records of patch `slot` (its trampoline stays, for reuse).
fn forget_patch(st: &mut State, slot: u64) {
    if let Some(p) = st.patches.get_mut(&slot) {
        for &a in &p.orig {
            if matches!(st.marks.get(&a), Some(Mark::Head { slot: s } | Mark::Interior { slot: s, .. }) if *s == slot) {
                st.marks.remove(&a);
            }
        }
    }
}

/// Guest pages [addr, addr+len) were copied to `frame` (fork): the
/// copy keeps the patches of the process's own code whose trampolines lie
/// in the regions beside physical memory, which the child's host process
/// shows too (their marks noted at the copy); every other patch gets its
/// original bytes back there (its syscalls trap instead).
pub fn restore_copy(addr: usize, frame: usize, len: usize) {
    let pm = PhysMem::get();
    if !pm.contains(addr, len) {
        return;
    }
    let mut st = state();
    let keep = forked_stub_page().is_some();
    // Where the pages are (shared code's patches are at its physical address).
    let mut at = addr;
    for (phys, n) in pm.physical_runs(addr, len) {
        let own = keep && phys == at;
        restore_originals(&mut st, phys as u64, (phys + n) as u64, frame + (at - addr), own);
        at += n;
    }
}

/// Puts the original bytes of every patch wholly in [lo, hi) (physical)
/// into the copy of those pages at `copy`; but with `keep`, a patch whose
/// trampoline a forked child's host process shows stays, and its marks
/// are noted at the copy.
fn restore_originals(st: &mut State, lo: u64, hi: u64, copy: usize, keep: bool) {
    let pm = PhysMem::get();
    let heads: Vec<u64> = st
        .marks
        .range(lo..hi)
        .filter_map(|(_, m)| match m {
            Mark::Head { slot } => Some(*slot),
            _ => None,
        })
        .collect();
    for slot in heads {
        let Some(p) = st.patches.get(&slot).filter(|p| p.end() <= hi) else { continue };
        let at = (copy as u64) + (p.start - lo);
        if keep && in_kept_region(slot) && read_guest(at, p.patched.len()).as_deref() == Some(&p.patched[..]) {
            let marks = patch_marks(slot, &p.orig, at.wrapping_sub(p.start));
            st.forked_marks.extend(marks);
        } else {
            pm.poke(at as usize, &p.original);
        }
    }
}

/// A forked child's code at physical [src, src+len) was copied to `frame`
/// for a forked child of its own: the patches it kept stay kept there.
pub fn forked_copy(src: usize, frame: usize, len: usize) {
    let mut st = state();
    let (lo, hi) = (src as u64, (src + len) as u64);
    let marks: Vec<(u64, Mark)> = st.forked_marks.range(lo..hi).map(|(&a, &m)| (a - lo + frame as u64, m)).collect();
    st.forked_marks.extend(marks);
}

/// A forked child's frames [frame, frame+len) became writable (its
/// mprotect): the patches kept there get their original bytes back, as
/// [`code_made_writable`] does in nomu's process.
pub fn forked_code_made_writable(frame: usize, len: usize) {
    let (lo, hi) = ((frame as u64).saturating_sub(LOOK_BACK as u64), (frame + len) as u64);
    let mut st = state();
    let heads: Vec<(u64, u64)> = st
        .forked_marks
        .range(lo..hi)
        .filter_map(|(&a, m)| match m {
            Mark::Head { slot } => Some((a, *slot)),
            _ => None,
        })
        .collect();
    let pm = PhysMem::get();
    for (at, slot) in heads {
        let Some(p) = st.patches.get(&slot) else { continue };
        let marks = patch_marks(slot, &p.orig, at.wrapping_sub(p.start));
        // As in nomu's process (the child's threads may run it; its marks
        // stay until the original bytes are back).
        if read_guest(at, p.patched.len()).as_deref() == Some(&p.patched[..]) {
            write_patch(pm, at, &p.original, Patching::Live);
        }
        for (a, _) in marks {
            st.forked_marks.remove(&a);
        }
    }
}

/// Whether trampoline `slot` lies in a region beside physical memory (not
/// a chunk of it): a forked child's host process shows those regions.
fn in_kept_region(slot: u64) -> bool {
    kept_regions_iter().any(|r| (r.rx + HEADER..r.rx + r.len).contains(&(slot as usize)))
}

/// The trampoline regions beside physical memory, which a forked child's
/// host process keeps (shared with nomu: trampolines made later show
/// there too) when the rewrite path is in use.
pub fn kept_regions() -> [(usize, usize); 2] {
    let mut out = [(0, 0); 2];
    // (Not forked_stub_page(), which asks split what it keeps.)
    if STUB.load(Ordering::Relaxed) == 0 {
        return out;
    }
    for (slot, r) in out.iter_mut().zip(kept_regions_iter()) {
        *slot = (r.rx, r.rx + r.len);
    }
    out
}

/// Code at physical [src, src+len) was copied to [dst, dst+len) (shared
/// code made a process's own, mm::mapping): the copy gets the original
/// bytes of the patches in it (its syscalls trap, and are patched there).
pub fn code_copied(dst: usize, src: usize, len: usize) {
    restore_originals(&mut state(), src as u64, (src + len) as u64, dst, false);
}

/// Shared code's area of trampolines (see [`Area`]): physical pages
/// [start, start+len), before the code's physical pages [text,
/// text+text_len) in the same run of the page cache. Idempotent.
pub fn add_area(start: usize, len: usize, text: usize, text_len: usize) {
    let mut st = state();
    if st.areas.contains_key(&(start as u64)) {
        return;
    }
    // The header: the stub's address, which the trampolines jump through.
    PhysMem::get().poke(start, &STUB.load(Ordering::Relaxed).to_le_bytes());
    let area =
        Area { start: start as u64, end: (start + len) as u64, text: text as u64, text_end: (text + text_len) as u64 };
    st.areas.insert(start as u64, area);
}

/// The area of shared code whose run holds physical address `a`.
fn area_of(st: &State, a: u64) -> Option<Area> {
    st.areas.range(..=a).next_back().map(|(_, &area)| area).filter(|area| a < area.text_end)
}

/// A guest address's physical address, and the distance from it back to
/// the guest's (0 for a process's own pages).
fn physical(addr: u64) -> (u64, u64) {
    let pm = PhysMem::get();
    if !pm.contains(addr as usize, 1) {
        return (addr, 0);
    }
    let phys = pm.translate(addr as usize) as u64;
    (phys, addr.wrapping_sub(phys))
}

/// Guest pages [addr, addr+len) were freed: forget what was patched there.
pub fn memory_freed(addr: usize, len: usize) {
    let (lo, hi) = (addr as u64, (addr + len) as u64);
    let mut st = state();
    // A patched range lies in one page, and pages are freed whole: every
    // mark of a patch whose head is here is here too.
    // Their patches are inactive now: their heads' marks are gone.
    drop(st.marks.take(lo, hi));
    drop(st.forked_marks.take(lo, hi));
    // A run of shared code went, its area with it: its trampolines are
    // nobody's (the pages will be something else).
    if st.areas.range(..hi).next_back().is_some_and(|(_, a)| a.text_end > lo) {
        let gone = |slot: &u64| (lo..hi).contains(slot);
        st.areas.retain(|&start, _| !(lo..hi).contains(&start));
        st.used.retain(|slot, _| !gone(slot));
        st.patches.retain(|slot, _| !gone(slot));
        st.reuse.retain(|_, slot| !gone(slot));
        st.by_site.retain(|_, slot| !gone(slot));
    }
}

/// Guest pages [addr, addr+len) became writable: the original bytes of
/// the patches in them come back (the guest may rewrite its code), in the
/// reverse order of patching.
pub fn code_made_writable(addr: usize, len: usize) {
    let (lo, hi) = ((addr as u64).saturating_sub(LOOK_BACK as u64), (addr + len) as u64);
    let mut st = state();
    let slots: Vec<u64> = st
        .marks
        .range(lo..hi)
        .filter_map(|(_, m)| match m {
            Mark::Head { slot } | Mark::Interior { slot, .. } => Some(*slot),
            Mark::Refused => None,
        })
        .collect();
    let pm = PhysMem::get();
    for slot in slots {
        let Some(p) = st.patches.get(&slot) else { continue };
        if !active(&st, slot, p) || p.start + p.patched.len() as u64 <= addr as u64 {
            continue;
        }
        if intact(&st, slot) {
            let p = &st.patches[&slot];
            pm.poke(p.start as usize, &[INT3]);
            sync_core();
            pm.poke(p.start as usize + 1, &p.original[1..]);
            sync_core();
            pm.poke(p.start as usize, &p.original[..1]);
            sync_core();
        }
        forget_patch(&mut st, slot);
    }
    // Refused sites there may be different code later.
    let refused: Vec<u64> =
        st.marks.range(lo..hi).filter(|(_, m)| matches!(m, Mark::Refused)).map(|(&a, _)| a).collect();
    for a in refused {
        st.marks.remove(&a);
    }
}

/// Whether the syscall at `site` is worth a look by the kernel (not
/// refused): the SIGSYS handler's question.
pub fn may_patch(site: u64) -> bool {
    let (site, _) = physical(site);
    !matches!(state().marks.get(&site), Some(Mark::Refused))
}

/// What a trap at an int3 this path wrote stands for.
pub enum Int3 {
    /// The syscall: regs now as after it.
    Syscall,
    /// Go on at regs.rip (a displaced instruction's copy, or the original
    /// bytes again after the patch was undone).
    Resume,
}

/// An int3 trap of guest code (`regs.rip` right after it): handled when the
/// int3 is one of this path's.
pub fn int3(regs: &mut GuestRegs) -> Option<Int3> {
    int3_at(regs, physical, false)
}

/// The same for a forked child, whose code's physical addresses are its
/// own map's (`kernel` translates): a patched range's boundary in the
/// shared code it runs (a restarted syscall lands there), or its head
/// while nomu's process patches it.
pub fn forked_int3(regs: &mut GuestRegs, kernel: &mut dyn super::GuestKernel) -> Option<Int3> {
    forked_stub_page()?;
    int3_at(regs, |a| kernel.guest_physical(a).map_or((a, 0), |p| (p, a.wrapping_sub(p))), true)
}

fn int3_at(regs: &mut GuestRegs, physical: impl FnOnce(u64) -> (u64, u64), forked: bool) -> Option<Int3> {
    let guest_at = regs.rip.wrapping_sub(1);
    // Physical addresses, the guest's `off` away.
    let (at, mut off) = physical(guest_at);
    let st = state();
    let mut mark = st.marks.get(&at).copied();
    // A patch a forked child's copy kept: its addresses are the child's.
    if let Some(m) = st.forked_marks.get(&at).copied().filter(|m| forked && !matches!(m, Mark::Refused)) {
        mark = Some(m);
        off = 0;
    }
    let byte = read_guest(at, 1).map(|b| b[0]);
    match mark {
        Some(Mark::Head { slot }) if byte == Some(INT3) => {
            // Mid-patch: the jump's emulation.
            regs.rip = slot.wrapping_add(off);
            Some(Int3::Resume)
        }
        Some(Mark::Interior { slot, k }) if byte == Some(INT3) => {
            let p = st.patches.get(&slot)?;
            if k == p.sk {
                regs.rip = (p.orig[k] + 2).wrapping_add(off);
                regs.rcx = regs.rip;
                regs.r11 = regs.rflags;
                Some(Int3::Syscall)
            } else {
                regs.rip = p.tramp[k].wrapping_add(off);
                Some(Int3::Resume)
            }
        }
        Some(Mark::Head { .. } | Mark::Interior { .. }) => {
            // Undone meanwhile: run what is there now.
            regs.rip = guest_at;
            Some(Int3::Resume)
        }
        // No record: an int3 of a patch undone (records and all) while
        // this thread stood at it shows the original byte again; a guest's
        // own int3 is still there.
        None if byte.is_some_and(|b| b != INT3) => {
            regs.rip = guest_at;
            Some(Int3::Resume)
        }
        _ => None,
    }
}

/// The page a forked child's host process shows at the stub's page, int3
/// throughout but for a jump to split's stub at the stub's address (none
/// under NOMU_FORKED_TRAP=1), as (address, memfd), made once: a
/// trampoline's jump through its header then traps there, as it were
/// ([`forked_stub_trap`]), so forked children
/// run the shared code as patched (see "Forked children" in the module
/// doc). None when the rewrite path is not in use, or when the page holds
/// something the child keeps of nomu (`split::keeps_page`).
pub fn forked_stub_page() -> Option<(usize, i32)> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    static PAGE: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    let stub = STUB.load(Ordering::Relaxed) as usize;
    if stub == 0 {
        return None;
    }
    let page = stub & !(PAGE_SIZE - 1);
    let made = PAGE.get_or_init(|| {
        if super::split::keeps_page(page) {
            return None;
        }
        // SAFETY: memfd_create with a NUL-terminated name; the result, if
        // a descriptor, is ours alone.
        let fd = unsafe { libc::syscall(libc::SYS_memfd_create, c"nomu-forked-stub".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let mut bytes = [INT3; PAGE_SIZE];
        // The trampolines' jump lands on `jmp [rip+0]` to split's stub, or
        // on int3 (each syscall a host signal).
        let at = stub - page;
        if let Some(entry) = super::split::forked_stub().filter(|_| at + 14 <= PAGE_SIZE) {
            bytes[at..at + 6].copy_from_slice(&[0xff, 0x25, 0, 0, 0, 0]);
            bytes[at + 6..at + 14].copy_from_slice(&entry.to_le_bytes());
        }
        // SAFETY: pwrite from our own buffer into our own memfd.
        let n = unsafe { libc::pwrite(fd.as_raw_fd(), bytes.as_ptr().cast(), PAGE_SIZE, 0) };
        (n == PAGE_SIZE as isize).then_some(fd)
    });
    made.as_ref().map(|fd| (page, fd.as_raw_fd()))
}

/// The stub's address, in nomu (0 when the rewrite path is not in use).
pub fn stub() -> u64 {
    STUB.load(Ordering::Relaxed)
}

/// A forked child's trap at its stub page ([`forked_stub_page`]): a
/// trampoline's syscall. Makes `regs` those the site's `syscall` would
/// have left (rip = rcx, the address after the site; r11 the flags) and
/// returns where the child goes on if the kernel leaves rip there (r11 as
/// the trampoline set it: the after-part, or the same address).
pub fn forked_stub_trap(regs: &mut GuestRegs, signo: i32, trapno: u64) -> Option<u64> {
    let stub = STUB.load(Ordering::Relaxed);
    if signo != libc::SIGTRAP || trapno != 3 || stub == 0 || regs.rip != stub + 1 || forked_stub_page().is_none() {
        return None;
    }
    let go_on = regs.r11;
    regs.rip = regs.rcx;
    regs.r11 = regs.rflags;
    Some(go_on)
}

/// The trampoline holding `rip`, if any.
fn trampoline_of(st: &State, rip: u64) -> Option<u64> {
    st.used.range(..=rip).next_back().filter(|(_, &end)| end > rip).map(|(&start, _)| start)
}

/// A guest thread stopped (a fault, a kick) at `regs.rip` inside a
/// trampoline: its rip becomes the original instruction's address, which
/// resumes the same way (the jump, or an int3 emulated as above).
pub fn map_back(regs: &mut GuestRegs) {
    let (rip, off) = if in_regions(regs.rip) {
        (regs.rip, 0)
    } else {
        // Shown from an area of shared code?
        let (rip, off) = physical(regs.rip);
        if off == 0 {
            return;
        }
        (rip, off)
    };
    map_back_from(regs, rip, off, true);
}

/// The same for a forked child (`kernel` translates its addresses), whose
/// trampolines are those of the shared code's areas and those of the
/// patches its copies of code kept.
pub fn forked_map_back(regs: &mut GuestRegs, kernel: &mut dyn super::GuestKernel) {
    if forked_stub_page().is_none() {
        return;
    }
    // A trampoline of a patch its copy of code kept (their regions are
    // shown at nomu's addresses), whether or not nomu's process still has
    // the patch.
    if in_regions(regs.rip) && !PhysMem::get().contains(regs.rip as usize, 1) {
        map_back_from(regs, regs.rip, 0, false);
        return;
    }
    if let Some(phys) = kernel.guest_physical(regs.rip).filter(|&p| p != regs.rip) {
        map_back_from(regs, phys, regs.rip.wrapping_sub(phys), true);
    }
}

/// map_back of a rip at physical address `rip`, shown `off` away.
fn map_back_from(regs: &mut GuestRegs, rip: u64, off: u64, need_active: bool) {
    let st = state();
    if off != 0 && area_of(&st, rip).is_none_or(|a| rip >= a.end) {
        return;
    }
    let Some(t) = trampoline_of(&st, rip) else { return };
    let Some(p) = st.patches.get(&t).filter(|p| !need_active || active(&st, t, p)) else { return };
    let original = if let Some(k) = p.tramp.iter().position(|&t| t == rip) {
        if k < p.orig.len() {
            p.orig[k]
        } else {
            p.end()
        }
    } else if rip > p.tramp[p.sk] && rip < p.tramp[p.sk + 1] {
        // At the jump to the stub: the syscall is still to come (rcx, which
        // the lea set, is the syscall's to clobber).
        p.orig[p.sk]
    } else {
        return;
    };
    regs.rip = original.wrapping_add(off);
}

/// Where a thread starting at `rip` (a new thread or vfork child, which
/// starts after its parent's syscall) best starts: the copy in a trampoline
/// when rip is a boundary inside a patched range, saving the int3 trap.
pub fn start_at(rip: u64) -> u64 {
    let (at, off) = physical(rip);
    let st = state();
    if let Some(Mark::Interior { slot, k }) = st.marks.get(&at).copied() {
        if let Some(p) = st.patches.get(&slot).filter(|p| k != p.sk && active(&st, slot, p)) {
            return p.tramp[k].wrapping_add(off);
        }
    }
    rip
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The instructions `bytes` (at `ip`, a syscall among them) as a plan.
    fn plan_of(bytes: &[u8], ip: u64) -> Plan {
        let mut d = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
        let mut instrs = Vec::new();
        while d.can_decode() {
            instrs.push(d.decode());
        }
        let sk = instrs.iter().position(|i| i.code() == Code::Syscall).unwrap();
        Plan { instrs, sk }
    }

    /// A trampoline built for the same code at another address, at the
    /// same distance from it, is the same bytes (shared code's trampolines
    /// are shown at every address the code is: see `Area`).
    #[test]
    fn trampolines_are_position_independent() {
        // lea rdi, [rip+0x1000]; syscall (a rip-relative operand before);
        // syscall; mov rax, [rip+0x100]; ret (instructions after).
        let before = [0x48, 0x8d, 0x3d, 0x00, 0x10, 0x00, 0x00, 0x0f, 0x05];
        let after = [0x0f, 0x05, 0x48, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00, 0xc3];
        for bytes in [&before[..], &after[..]] {
            let (site, tramp, header) = (0x40_0000u64, 0x10_0000u64, 0x0f_0000u64);
            let (code, at) = build(&plan_of(bytes, site), tramp, header).unwrap();
            for d in [0x1000u64, 0x7654_3000] {
                let (moved, moved_at) = build(&plan_of(bytes, site + d), tramp + d, header + d).unwrap();
                assert_eq!(code, moved);
                assert_eq!(at.iter().map(|a| a + d).collect::<Vec<_>>(), moved_at);
            }
        }
    }

    #[test]
    fn marks_by_page() {
        let p = PAGE_SIZE as u64;
        let mut m = Marks::new();
        for a in [p + 10, p + 20, 2 * p + 5, 3 * p - 1, 3 * p, 5 * p + 7] {
            m.insert(a, Mark::Refused);
        }
        let all = |m: &Marks, lo, hi| m.range(lo..hi).map(|(&a, _)| a).collect::<Vec<_>>();
        assert_eq!(all(&m, p + 15, 3 * p + 1), [p + 20, 2 * p + 5, 3 * p - 1, 3 * p]);
        assert_eq!(all(&m, 3 * p, 3 * p), Vec::<u64>::new());
        assert!(m.get(&(2 * p + 5)).is_some() && m.get(&(2 * p + 6)).is_none());
        // Whole pages 1 and 2, nothing else.
        let taken: usize = m.take(p, 3 * p).iter().map(|t| t.len()).sum();
        assert_eq!(taken, 4);
        assert_eq!(all(&m, 0, 10 * p), [3 * p, 5 * p + 7]);
        // Parts of pages: inside one page, and across a boundary.
        m.insert(5 * p + 9, Mark::Refused);
        assert_eq!(m.take(5 * p + 8, 5 * p + 10).iter().map(|t| t.len()).sum::<usize>(), 1);
        assert_eq!(m.take(3 * p - 4, 5 * p + 8).iter().map(|t| t.len()).sum::<usize>(), 2);
        assert_eq!(all(&m, 0, 10 * p), Vec::<u64>::new());
        assert!(m.pages.is_empty());
    }
}
