//! Guest signal frames, laid out exactly as Linux x86-64 lays them out
//! (struct rt_sigframe: return address, ucontext with the sigcontext and a
//! pointer to the xsave image, siginfo), so handlers that read or edit the
//! ucontext work, and rt_sigreturn that undoes them.

use super::signal::{AltStack, SigInfo, SS_AUTODISARM, SS_DISABLE, SS_ONSTACK, UNBLOCKABLE};
use crate::abi::errno::Errno;
use crate::abi::KernelSigaction;
use crate::entry::{GuestRegs, TrapFrame};
use crate::mm::uaccess::UserMem;

const UC_FP_XSTATE: u64 = 1;
const UC_SIGCONTEXT_SS: u64 = 2;
const UC_STRICT_RESTORE_SS: u64 = 4;
const REDZONE: u64 = 128;

// Offsets inside struct rt_sigframe.
const UC: usize = 8;
const UC_STACK: usize = UC + 16;
const MCONTEXT: usize = UC + 40;
const SC_CSGSFS: usize = MCONTEXT + 144;
const SC_ERR: usize = MCONTEXT + 152;
const SC_TRAPNO: usize = MCONTEXT + 160;
const SC_OLDMASK: usize = MCONTEXT + 168;
const SC_CR2: usize = MCONTEXT + 176;
const SC_FPSTATE: usize = MCONTEXT + 184;
const UC_SIGMASK: usize = UC + 296;
const INFO: usize = UC + 304;
pub const FRAME_SIZE: usize = INFO + 128;

// The xsave image's layout and the RFLAGS bits: src/abi.
use crate::abi::rflags::{DF as RFLAGS_DF, RF as RFLAGS_RF, TF as RFLAGS_TF};
use crate::abi::xsave::{FP_XSTATE_MAGIC1, HEADER as XSAVE_HEADER, MXCSR, MXCSR_MASK, SW_RESERVED};

fn put(buf: &mut [u8], off: usize, v: u64) {
    buf[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

fn get(buf: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(buf[off..off + 8].try_into().unwrap())
}

fn regs_bytes(r: &GuestRegs) -> [u64; 18] {
    [
        r.r8, r.r9, r.r10, r.r11, r.r12, r.r13, r.r14, r.r15, r.rdi, r.rsi, r.rbp, r.rbx, r.rdx, r.rax, r.rcx, r.rsp,
        r.rip, r.rflags,
    ]
}

fn regs_from(w: &[u64; 18]) -> GuestRegs {
    GuestRegs {
        r8: w[0],
        r9: w[1],
        r10: w[2],
        r11: w[3],
        r12: w[4],
        r13: w[5],
        r14: w[6],
        r15: w[7],
        rdi: w[8],
        rsi: w[9],
        rbp: w[10],
        rbx: w[11],
        rdx: w[12],
        rax: w[13],
        rcx: w[14],
        rsp: w[15],
        rip: w[16],
        rflags: w[17],
    }
}

/// What a fault adds to the sigcontext.
#[derive(Clone, Copy, Default)]
pub struct FaultRegs {
    pub trapno: u64,
    pub err: u64,
    pub cr2: u64,
}

/// Writes a frame for `act`'s handler on the guest stack and points the
/// guest's registers at the handler. `blocked` is the mask to save (the one
/// in force before delivery). Err means the frame could not be written:
/// the caller kills the process with SIGSEGV, as Linux does.
pub fn push(
    mem: &UserMem,
    frame: &mut TrapFrame,
    act: &KernelSigaction,
    info: &SigInfo,
    blocked: u64,
    alt: &mut AltStack,
    fault: FaultRegs,
) -> Result<(), Errno> {
    let sig = info.signo() as u64;
    let on_alt = alt.contains(frame.regs.rsp);
    let mut sp = if act.flags & libc::SA_ONSTACK as u64 != 0 && alt.enabled() && !on_alt {
        alt.sp + alt.size
    } else {
        frame.regs.rsp.wrapping_sub(REDZONE)
    };
    // The saved extended state goes first, 64-byte aligned as xsave wants.
    let mut fpstate = 0;
    if let Some(xs) = frame.xstate.image() {
        sp = sp.wrapping_sub(xs.len() as u64) & !63;
        // Only the components in use are written (xstate_bv says which; the
        // rest read as their initial state), plus the trailing magic.
        let used = used_len(xs, xs.len());
        mem.write_bytes(sp, &xs[..used])?;
        if used < xs.len() {
            mem.write_bytes(sp + xs.len() as u64 - 4, &xs[xs.len() - 4..])?;
        }
        fpstate = sp;
    }
    // Then the frame, so that rsp+8 is 16-aligned at the handler's entry,
    // as after a call.
    sp = (sp.wrapping_sub(FRAME_SIZE as u64) & !15).wrapping_sub(8);
    let mut f = [0u8; FRAME_SIZE];
    put(&mut f, 0, act.restorer);
    let mut flags = UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS;
    if fpstate != 0 {
        flags |= UC_FP_XSTATE;
    }
    put(&mut f, UC, flags);
    put(&mut f, UC_STACK, alt.sp);
    let ss_flags = if !alt.enabled() {
        SS_DISABLE
    } else if on_alt {
        SS_ONSTACK
    } else {
        alt.flags & SS_AUTODISARM
    };
    f[UC_STACK + 8..UC_STACK + 12].copy_from_slice(&ss_flags.to_le_bytes());
    put(&mut f, UC_STACK + 16, alt.size);
    for (i, w) in regs_bytes(frame.regs).iter().enumerate() {
        put(&mut f, MCONTEXT + 8 * i, *w);
    }
    put(&mut f, SC_CSGSFS, 0x33 | (0x2b << 48));
    put(&mut f, SC_ERR, fault.err);
    put(&mut f, SC_TRAPNO, fault.trapno);
    put(&mut f, SC_OLDMASK, blocked);
    put(&mut f, SC_CR2, fault.cr2);
    put(&mut f, SC_FPSTATE, fpstate);
    put(&mut f, UC_SIGMASK, blocked);
    f[INFO..INFO + 128].copy_from_slice(&info.0);
    mem.write_bytes(sp, &f)?;

    let r = &mut *frame.regs;
    r.rip = act.handler;
    r.rsp = sp;
    r.rdi = sig;
    r.rsi = sp + INFO as u64;
    r.rdx = sp + UC as u64;
    r.rax = 0;
    r.rflags &= !(RFLAGS_DF | RFLAGS_TF | RFLAGS_RF);
    // The handler starts with a clean FPU, as on Linux.
    frame.reset_xstate = true;
    if alt.flags & SS_AUTODISARM != 0 && !on_alt && act.flags & libc::SA_ONSTACK as u64 != 0 {
        *alt = AltStack::disabled();
    }
    Ok(())
}

/// rt_sigreturn: restores what `push` saved. Returns the restored mask and
/// the signal stack to install. The guest's xsave image is copied back into
/// the host's only where it is well-formed; the host keeps its own header
/// bookkeeping, so a guest cannot make the host's sigreturn fail.
pub fn pop(mem: &UserMem, frame: &mut TrapFrame) -> Result<(u64, Option<AltStack>), Errno> {
    let at = frame.regs.rsp.wrapping_sub(8);
    // No heap buffers: every rt_sigreturn comes here (two allocations were
    // ~3% of a signal's delivery and return on the seccomp path).
    let mut f = [0u8; FRAME_SIZE];
    mem.read_into(at, &mut f)?;
    let mut words = [0u64; 18];
    for (i, w) in words.iter_mut().enumerate() {
        *w = get(&f, MCONTEXT + 8 * i);
    }
    let mask = get(&f, UC_SIGMASK) & !UNBLOCKABLE;
    let fpstate = get(&f, SC_FPSTATE);
    if fpstate == 0 {
        frame.reset_xstate = true;
    } else if let Some(host) = frame.xstate.image_to_overwrite() {
        // The guest's legacy area and header say how much of its image is
        // in use; its components beyond them are read into the host's image.
        let mut head = [0u8; XSAVE_HEADER + 64];
        let head = &mut head[..(XSAVE_HEADER + 64).min(host.len())];
        mem.read_into(fpstate, head)?;
        let used = used_len(head, host.len());
        restore_xstate(host, head, used, |off, to| mem.read_into(fpstate + off as u64, to))?;
    }
    let restored = regs_from(&words);
    // Only the flags a program may change come back (Linux's FIX_EFLAGS).
    let fix = 0x40dd5u64; // AC OF DF TF SF ZF AF PF CF RF
    let rflags = (frame.regs.rflags & !fix) | (restored.rflags & fix);
    *frame.regs = GuestRegs { rflags, ..restored };
    let ss_flags = i32::from_le_bytes(f[UC_STACK + 8..UC_STACK + 12].try_into().unwrap());
    let alt = AltStack { sp: get(&f, UC_STACK), size: get(&f, UC_STACK + 16), flags: ss_flags & !SS_ONSTACK };
    Ok((mask, Some(alt)))
}

/// Bytes of an xsave image of `len` bytes in use, by its first bytes
/// `head` (legacy area and header): those, and every component its
/// xstate_bv marks as not in its initial state.
fn used_len(head: &[u8], len: usize) -> usize {
    let magic = head.len() >= XSAVE_HEADER + 64
        && u32::from_le_bytes(head[SW_RESERVED..SW_RESERVED + 4].try_into().unwrap()) == FP_XSTATE_MAGIC1;
    if !magic {
        return len;
    }
    let bv = get(head, XSAVE_HEADER);
    let comps = crate::host::cpu::xstate_components();
    let end = (2..64).filter(|&i| bv & (1 << i) != 0).map(|i| comps[i].0 + comps[i].1).max().unwrap_or(0);
    end.max(XSAVE_HEADER + 64).min(len)
}

/// Puts the guest's image back into the host's: `guest` is its legacy area
/// and header, `read(offset, to)` reads its bytes at `offset` (the
/// components past the header, within `used`).
fn restore_xstate(
    host: &mut [u8],
    guest: &[u8],
    used: usize,
    mut read: impl FnMut(usize, &mut [u8]) -> Result<(), Errno>,
) -> Result<(), Errno> {
    // Legacy area (x87, MXCSR, XMM) with MXCSR's reserved bits cleared,
    // by the host's mask (not one the guest wrote).
    let mask = u32::from_le_bytes(host[MXCSR_MASK..MXCSR_MASK + 4].try_into().unwrap());
    let mask = if mask == 0 { 0xffbf } else { mask };
    host[..SW_RESERVED].copy_from_slice(&guest[..SW_RESERVED]);
    host[MXCSR_MASK..MXCSR_MASK + 4].copy_from_slice(&mask.to_le_bytes());
    let mxcsr = u32::from_le_bytes(host[MXCSR..MXCSR + 4].try_into().unwrap()) & mask;
    host[MXCSR..MXCSR + 4].copy_from_slice(&mxcsr.to_le_bytes());
    let magic = u32::from_le_bytes(host[SW_RESERVED..SW_RESERVED + 4].try_into().unwrap());
    if magic != FP_XSTATE_MAGIC1 || host.len() < XSAVE_HEADER + 64 {
        return Ok(());
    }
    // Only the register state a program owns comes back: x87, SSE, AVX and
    // AVX-512. Other components (PKRU, CET, AMX...) stay as the host saved
    // them: PKRU, say, would apply to nomu's own code on this host thread.
    let host_features = get(host, SW_RESERVED + 8);
    let host_bv = get(host, XSAVE_HEADER);
    let allowed = crate::entry::GUEST_XSTATE_COMPONENTS & host_features;
    let bv = (host_bv & !allowed) | (get(guest, XSAVE_HEADER) & allowed);
    put(host, XSAVE_HEADER, bv);
    let comps = crate::host::cpu::xstate_components();
    for i in (2..64).filter(|&i| allowed & (1 << i) != 0) {
        let (off, size) = comps[i];
        let end = (off + size).min(used).min(host.len() - 4); // FP_XSTATE_MAGIC2 stays the host's
        if size > 0 && off >= XSAVE_HEADER + 64 && end > off {
            read(off, &mut host[off..end])?;
        }
    }
    Ok(())
}
