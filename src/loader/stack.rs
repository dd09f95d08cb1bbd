//! The initial stack, laid out exactly as Linux's create_elf_tables does:
//! from the top, an 8-byte end marker, the AT_EXECFN string, the envp and
//! argv strings, the platform string, 16 random bytes, then (16-aligned)
//! argc, argv[], NULL, envp[], NULL and the auxiliary vector.

use super::elf::Image;
use super::{ArgStrings, ExecError};
use crate::abi::errno::Errno;
use crate::host::{cpu, safecopy, sys as hostsys};
use crate::kernel::Kernel;
use crate::mm::space::{AddressSpace, Placement, Vma, VmaKind, PROT_EXEC, PROT_READ, PROT_WRITE};
use crate::mm::PAGE_SIZE;

/// Guest stacks are fixed-size, as on no-MMU Linux (the RLIMIT_STACK soft
/// limit, within these bounds); a guard page below catches overflow.
const MIN_STACK: usize = 128 << 10;
const MAX_STACK: usize = 64 << 20;
/// Linux limits argv+envp to a quarter of the stack limit.
const PLATFORM: &[u8] = b"x86_64\0";

const AT_NULL: u64 = 0;
const AT_PHDR: u64 = 3;
const AT_PHENT: u64 = 4;
const AT_PHNUM: u64 = 5;
const AT_PAGESZ: u64 = 6;
const AT_BASE: u64 = 7;
const AT_FLAGS: u64 = 8;
const AT_ENTRY: u64 = 9;
const AT_UID: u64 = 11;
const AT_EUID: u64 = 12;
const AT_GID: u64 = 13;
const AT_EGID: u64 = 14;
const AT_PLATFORM: u64 = 15;
const AT_HWCAP: u64 = 16;
const AT_CLKTCK: u64 = 17;
const AT_SECURE: u64 = 23;
const AT_RANDOM: u64 = 25;
const AT_HWCAP2: u64 = 26;
const AT_EXECFN: u64 = 31;
const AT_MINSIGSTKSZ: u64 = 51;

/// The stack for a soft RLIMIT_STACK of `lim`: the exec'ing process's own
/// (as Linux sizes a new program's stack by it), not a host call's.
fn stack_size(lim: u64) -> usize {
    (lim.min(MAX_STACK as u64) as usize).clamp(MIN_STACK, MAX_STACK) & !(PAGE_SIZE - 1)
}

/// The ids the auxiliary vector tells a new program (AT_UID, AT_EUID,
/// AT_GID, AT_EGID): its thread's after execve.
#[derive(Clone, Copy, Debug)]
pub struct AuxIds {
    pub uid: u32,
    pub euid: u32,
    pub gid: u32,
    pub egid: u32,
    /// AT_SECURE.
    pub secure: bool,
}

/// Allocates the stack and writes the initial frame. Returns the initial
/// stack pointer (pointing at argc) and the stack's lowest address.
#[allow(clippy::too_many_arguments)] // what the frame holds, and where it goes
pub fn build(
    space: &mut AddressSpace,
    image: &Image,
    argv: &ArgStrings,
    envp: &ArgStrings,
    execfn: &[u8],
    ids: AuxIds,
    stack_limit: u64,
    kernel: &Kernel,
) -> Result<(usize, usize), ExecError> {
    let size = stack_size(stack_limit);
    let strings = argv.bytes().len() + envp.bytes().len() + execfn.len() + 1;
    if strings > size / 4 {
        return Err(Errno::E2BIG.into());
    }
    let prot = PROT_READ | PROT_WRITE | if image.exec_stack { PROT_EXEC } else { 0 };
    // The pages keep the protection they last had (see mm::phys), so a
    // stack made where the last one was costs the host no mprotect: the
    // guard page first, then the rest, each changed only if it differs.
    let phys = kernel.phys;
    let base = phys.alloc_unzeroed(size, PAGE_SIZE)?;
    // alloc_unzeroed leaves stale frames mappings (mm::phys): a stack is
    // never one, so the range gets its own pages back first. Left, the
    // program's stack showed those frames (a cached file's pages, once
    // mapped there): its writes went into the cached file, and every stack
    // placed over a view of the same frames was one memory.
    phys.restore(base, size);
    phys.zero_stack(base, size);
    let protected =
        phys.set_prot(base, PAGE_SIZE, 0).and_then(|_| phys.set_prot(base + PAGE_SIZE, size - PAGE_SIZE, prot));
    if let Err(e) = protected {
        phys.free(base, size);
        return Err(e.into());
    }
    let mut sp = 0;
    space.map(Placement::Allocated(base), size, Vma::new(0, prot, VmaKind::Stack), |range| {
        sp = write_frame(range.addr() + range.len(), image, argv, envp, execfn, ids)?;
        Ok(())
    })?;
    // The guard page: a stack overflow faults instead of running into
    // whatever lies below (no-MMU Linux cannot do this; nomu can).
    space.protect(base, PAGE_SIZE, 0)?;
    Ok((sp, base))
}

fn write_frame(
    top: usize,
    image: &Image,
    argv: &ArgStrings,
    envp: &ArgStrings,
    execfn: &[u8],
    ids: AuxIds,
) -> Result<usize, Errno> {
    // Laid out in a local copy of the stack's top, then copied in one go.
    let strings = argv.bytes().len() + envp.bytes().len() + execfn.len() + 1;
    let strings_start = top - 8 - strings;
    let platform = (strings_start & !15) - PLATFORM.len();
    let random = platform - 16;
    let rnd = hostsys::random16()?;
    // Strings, lowest first: argv, envp, execfn; then the 8-byte end marker.
    let mut ptrs = Vec::with_capacity(argv.count() + envp.count() + 1);
    let mut at = strings_start;
    for s in argv.iter().chain(envp.iter()).chain(std::iter::once(execfn)) {
        ptrs.push(at as u64);
        at += s.len() + 1;
    }
    let execfn_addr = ptrs.pop().unwrap();
    let auxv: [(u64, u64); 19] = [
        (AT_MINSIGSTKSZ, cpu::minsigstksz()),
        (AT_HWCAP, cpu::hwcap()),
        (AT_PAGESZ, PAGE_SIZE as u64),
        (AT_CLKTCK, 100),
        (AT_PHDR, image.phdr as u64),
        (AT_PHENT, 56),
        (AT_PHNUM, image.phnum as u64),
        (AT_BASE, image.interp_base as u64),
        (AT_FLAGS, 0),
        (AT_ENTRY, image.main_entry as u64),
        (AT_UID, ids.uid as u64),
        (AT_EUID, ids.euid as u64),
        (AT_GID, ids.gid as u64),
        (AT_EGID, ids.egid as u64),
        (AT_SECURE, ids.secure as u64),
        (AT_RANDOM, random as u64),
        (AT_HWCAP2, cpu::hwcap2()),
        (AT_EXECFN, execfn_addr),
        (AT_PLATFORM, platform as u64),
    ];
    let mut words: Vec<u64> = Vec::with_capacity(argv.count() + envp.count() + 3 + 2 * auxv.len() + 2);
    words.push(argv.count() as u64);
    words.extend(&ptrs[..argv.count()]);
    words.push(0);
    words.extend(&ptrs[argv.count()..]);
    words.push(0);
    for (k, v) in auxv {
        words.push(k);
        words.push(v);
    }
    words.extend([AT_NULL, 0]);
    let sp = ((random & !15) - words.len() * 8) & !15;

    let mut buf = vec![0u8; top - sp];
    let off = |addr: usize| addr - sp;
    for (i, w) in words.iter().enumerate() {
        buf[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
    }
    buf[off(random)..off(random) + 16].copy_from_slice(&rnd);
    buf[off(platform)..off(platform) + PLATFORM.len()].copy_from_slice(PLATFORM);
    let mut at = off(strings_start);
    for s in [argv.bytes(), envp.bytes(), execfn] {
        buf[at..at + s.len()].copy_from_slice(s);
        at += s.len();
    }
    // execfn's NUL is already there.
    if safecopy::copy_to_guest(sp, &buf) != buf.len() {
        return Err(Errno::EFAULT);
    }
    Ok(sp)
}
