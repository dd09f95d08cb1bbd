//! ELF64 x86-64 loading into a fresh address space.

use super::ExecError;
use crate::abi::errno::Errno;
use crate::fs::file::{FileIdentity, OpenFile};
use crate::host::fs as hostfs;
use crate::host::physmem::GuestRange;
use crate::kernel::Kernel;
use crate::mm::mapping::Frames;
use crate::mm::phys::Fresh;
use crate::mm::space::{
    AddressSpace, Backing, ImageOrigin, Placement, Vma, VmaKind, BRK_RESERVE, PROT_EXEC, PROT_READ, PROT_WRITE,
};
use crate::mm::{page_down, page_up, PAGE_SIZE};
use std::sync::Arc;

use object::elf::{EM_X86_64, ET_DYN, ET_EXEC, PT_GNU_STACK, PT_INTERP, PT_LOAD, PT_PHDR};

/// The size of an ELF64 program header.
const PHDR_SIZE: usize = std::mem::size_of::<object::elf::ProgramHeader64<object::LittleEndian>>();
/// Largest segment alignment honoured (larger ones fall back to this).
const MAX_ALIGN: usize = 2 << 20;

#[derive(Clone, Copy)]
struct Phdr {
    p_type: u32,
    flags: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
    memsz: u64,
    align: u64,
}

/// What the initial stack and registers need to know about the image.
pub struct Image {
    pub entry: usize,
    pub main_entry: usize,
    pub phdr: usize,
    pub phnum: usize,
    pub interp_base: usize,
    pub exec_stack: bool,
}

struct Loaded {
    bias: usize,
    entry: usize,
    phdr: usize,
    phnum: usize,
    interp: Option<Vec<u8>>,
    exec_stack: bool,
}

fn noexec(msg: &str) -> ExecError {
    ExecError::new(Errno::ENOEXEC, msg)
}

/// The ELF header and program headers of an untrusted file, read with the
/// `object` crate's ELF definitions (bounds and layout checked there).
fn parse(file: &OpenFile, head: &[u8]) -> Result<(u16, u64, u64, Vec<Phdr>), ExecError> {
    use object::elf::{FileHeader64, ProgramHeader64, ELFCLASS64, ELFDATA2LSB};
    use object::read::elf::{FileHeader, ProgramHeader};
    use object::LittleEndian as LE;
    if !head.starts_with(b"\x7fELF") {
        return Err(noexec("not an ELF file or #! script"));
    }
    let header = FileHeader64::<LE>::parse(head).map_err(|_| noexec("not an ELF file or #! script"))?;
    let ident = header.e_ident();
    if ident.class != ELFCLASS64 || ident.data != ELFDATA2LSB {
        return Err(noexec("not a 64-bit little-endian ELF"));
    }
    let (etype, machine) = (header.e_type(LE), header.e_machine(LE));
    if machine != EM_X86_64 {
        return Err(noexec("not an x86-64 ELF"));
    }
    if etype != ET_EXEC && etype != ET_DYN {
        return Err(noexec("not an executable ELF (ET_EXEC or ET_DYN)"));
    }
    let (entry, phoff) = (header.e_entry(LE), header.e_phoff(LE));
    let (phentsize, phnum) = (header.e_phentsize(LE) as usize, header.e_phnum(LE) as usize);
    if phentsize != PHDR_SIZE || phnum == 0 || phnum * PHDR_SIZE > 65536 {
        return Err(noexec("bad program header table"));
    }
    let mut raw = vec![0u8; phnum * PHDR_SIZE];
    let in_head = usize::try_from(phoff).ok().and_then(|at| head.get(at..at.checked_add(raw.len())?));
    match in_head {
        Some(table) => raw.copy_from_slice(table),
        None if hostfs::pread_local(file.fd(), &mut raw, phoff)? != raw.len() => {
            return Err(noexec("truncated program header table"));
        }
        None => {}
    }
    let table: &[ProgramHeader64<LE>] =
        object::pod::slice_from_all_bytes(&raw).map_err(|_| noexec("bad program header table"))?;
    let phdrs = table
        .iter()
        .map(|p| Phdr {
            p_type: p.p_type(LE),
            flags: p.p_flags(LE),
            offset: p.p_offset(LE),
            vaddr: p.p_vaddr(LE),
            filesz: p.p_filesz(LE),
            memsz: p.p_memsz(LE),
            align: p.p_align(LE),
        })
        .collect();
    Ok((etype, entry, phoff, phdrs))
}

fn prot_of(flags: u32) -> i32 {
    let mut p = 0;
    if flags & 4 != 0 {
        p |= PROT_READ;
    }
    if flags & 2 != 0 {
        p |= PROT_WRITE;
    }
    if flags & 1 != 0 {
        p |= PROT_EXEC;
    }
    p
}

/// Maps one ELF file. `with_brk` reserves room for the heap after it.
fn load_one(
    kernel: &Kernel,
    space: &mut AddressSpace,
    file: &Arc<OpenFile>,
    stat: &libc::stat,
    head: &[u8],
    with_brk: bool,
) -> Result<Loaded, ExecError> {
    let id = FileIdentity::of(stat);
    let (etype, entry, phoff, phdrs) = parse(file, head)?;
    let loads: Vec<&Phdr> = phdrs.iter().filter(|p| p.p_type == PT_LOAD).collect();
    if loads.is_empty() {
        return Err(noexec("no PT_LOAD segment"));
    }
    for p in &loads {
        if p.filesz > p.memsz || (p.vaddr % PAGE_SIZE as u64) != (p.offset % PAGE_SIZE as u64) {
            return Err(ExecError::new(Errno::EINVAL, "misaligned or inconsistent PT_LOAD segment"));
        }
    }
    let lo = page_down(loads.iter().map(|p| p.vaddr).min().unwrap() as usize);
    let hi_raw = loads.iter().map(|p| p.vaddr.saturating_add(p.memsz)).max().unwrap();
    let hi = usize::try_from(hi_raw).ok().and_then(page_up).ok_or(Errno::ENOMEM)?;
    let span = hi.checked_sub(lo).filter(|&s| s > 0).ok_or(Errno::ENOEXEC)?;
    let align = loads.iter().map(|p| p.align as usize).max().unwrap().clamp(PAGE_SIZE, MAX_ALIGN);
    let align = if align.is_power_of_two() { align } else { PAGE_SIZE };
    let phys = kernel.phys;
    let reserve = if with_brk { BRK_RESERVE } else { 0 };

    // A position-independent image gets its pages unzeroed: the file's
    // bytes overwrite most of them, and only the rest is zeroed below.
    let unzeroed = etype == ET_DYN;
    // An entry path that patches code with jumps to trampolines (the
    // rewrite path) shares a position-independent image's code between
    // processes when an area of them comes at the same distance before it
    // everywhere: the loader leaves that room before the image (see
    // entry/rewrite.rs, `Area`), reaching far enough back from the code
    // for every displacement a patch may want (the code's own offset in the
    // image counts); code ending too far into its image is copied as before.
    let (reach, code_span) = kernel.entry.trampoline_reach().unwrap_or((0, 0));
    let mut shared_text = None;
    if unzeroed && reach > 0 && !space.runs_own_host() {
        shared_text = trampolined_text(&loads, lo).filter(|&(_, end, _)| end <= code_span);
    }
    let area_len = shared_text.map_or(0, |(s, _, _)| reach.saturating_sub(s).max(MIN_AREA).next_multiple_of(PAGE_SIZE));
    let (start, heap_reserve) = if unzeroed {
        let lead = area_len.next_multiple_of(align);
        let block = match phys.alloc_unzeroed(lead + span + reserve, align) {
            Ok(b) => Ok(b + lead),
            Err(_) if lead > 0 => {
                // No room for the area: a copy, as before.
                shared_text = None;
                phys.alloc_unzeroed(span + reserve, align)
            }
            Err(e) => Err(e),
        };
        let start =
            block.map_err(|_| ExecError::new(Errno::ENOMEM, "not enough memory for the program image (see --mem)"))?;
        if shared_text.is_some() && lead > area_len {
            // Alignment's room before the area.
            phys.restore(start - lead, lead - area_len);
            phys.free(start - lead, lead - area_len);
        }
        (start, reserve)
    } else if phys.alloc_at(lo, span, Fresh::Used).is_ok() {
        // The heap reservation is best effort for fixed-address programs.
        let heap = if reserve > 0 && phys.alloc_at(hi, reserve, Fresh::Used).is_ok() { reserve } else { 0 };
        (lo, heap)
    } else if kernel.fork
        && (phys.contains(lo, span)
            || (crate::entry::dispatch::in_use() && crate::host::sys::reserve_far_range(lo, span).is_ok()))
    {
        // Its range is taken, or lies outside physical memory (then kept
        // free of nomu's own mappings for good; its syscalls trap there
        // only by syscall user dispatch, which a forked child's host
        // process allows from split's code alone): it runs in a host
        // process of its own (as a forked child does), its image loaded at
        // free pages and shown at its own addresses there (see
        // AddressSpace::move_image).
        let start = phys
            .alloc(span, PAGE_SIZE, Fresh::Used)
            .map_err(|_| ExecError::new(Errno::ENOMEM, "not enough memory for the program image (see --mem)"))?;
        if phys.contains(lo, span) {
            space.hold_range(lo, span);
        }
        (start, 0)
    } else {
        return Err(ExecError::new(
            Errno::ENOMEM,
            format!(
                "fixed-address (ET_EXEC) program wants {lo:#x}-{hi:#x}, which is {}; rebuild it as PIE",
                if kernel.fork {
                    "outside nomu's physical memory (where only syscall user dispatch catches its syscalls), outside user space, or taken by nomu's own mappings"
                } else {
                    "outside nomu's physical memory or in use (--no-fork)"
                }
            ),
        ));
    };
    let moved = etype == ET_EXEC && start != lo;
    // A moved image lies below its own addresses when they are above
    // physical memory: the bias wraps.
    let bias = start.wrapping_sub(lo);
    // Page protections per segment; a page two segments share gets both.
    let ranges: Vec<(usize, usize, i32)> = loads
        .iter()
        .map(|p| {
            let s = page_down(bias.wrapping_add(p.vaddr as usize));
            let e = page_up(bias.wrapping_add((p.vaddr + p.memsz) as usize)).unwrap();
            (s, e, prot_of(p.flags))
        })
        .collect();
    // The image's mapping starts read-write when the segments cover its
    // span (the usual case: every piece gets its own protection below),
    // else inaccessible, as the holes Linux leaves between segments.
    let mut covered_to = start;
    for &(s, e, _) in &ranges {
        if s <= covered_to {
            covered_to = covered_to.max(e);
        }
    }
    let initial = if covered_to >= start + span { PROT_READ | PROT_WRITE } else { 0 };
    // A truncated file says so (Linux maps it and the program dies when
    // it touches the missing part; nomu copies, so it refuses up front).
    let size = stat.st_size as u64;
    if let Some(p) = loads.iter().find(|p| p.offset.checked_add(p.filesz).is_none_or(|end| end > size)) {
        return Err(noexec(&format!(
            "truncated ELF file: a segment needs bytes {}..{} and the file has {size}",
            p.offset,
            p.offset.saturating_add(p.filesz)
        )));
    }
    // The shared code and its area of trampolines, in the page cache's
    // run of the code: (the area's start here, its frames).
    let mut area = None;
    let mut code_prepared = false;
    let mut cached = Vec::new();
    if let Some((s, e, offset)) = shared_text {
        let area_at = start - area_len;
        match kernel.page_cache.code_with_trampolines(file, id, offset, e - s, area_len + s, area_len) {
            Ok((text, area_frames, run, cached_before)) => {
                kernel.entry.code_area(run, area_len, run + area_len + s, e - s);
                code_prepared = cached_before;
                cached.push((start + s, start + e, text));
                area = Some((area_at, area_frames));
            }
            Err(_) => {
                // No room in the cache: the code is copied, as before.
                phys.restore(area_at, area_len);
                phys.free(area_at, area_len);
            }
        }
    }
    // An image in a host process of its own gets copies (cached code may
    // hold sites rewritten for nomu's own process, which must trap there).
    if !moved && !space.runs_own_host() {
        cached.extend(cached_pieces(kernel, file, id, &loads, &ranges, bias, area.is_some()));
    }
    if unzeroed {
        // alloc_unzeroed leaves stale frames mappings (mm::phys): the
        // cached pieces take theirs up again if they are the same frames,
        // the rest gets its own pages back.
        let mut cuts: Vec<(usize, usize)> = cached.iter().map(|&(s, e, _)| (s, e)).collect();
        cuts.sort_unstable();
        let mut at = start;
        for (s, e) in cuts {
            if s > at {
                phys.restore(at, s - at);
            }
            at = at.max(e);
        }
        phys.restore(at, start + span + heap_reserve - at);
    }
    let filled = space.map(Placement::Allocated(start), span, Vma::new(0, initial, VmaKind::Image), |_| {
        for p in &loads {
            // Through the alias: the pages may still be protected as the
            // last program here wanted them. Not the cached pieces.
            let (a, b) = (bias.wrapping_add(p.vaddr as usize), bias.wrapping_add((p.vaddr + p.filesz) as usize));
            let mut parts = vec![(a, b)];
            for &(s, e, _) in &cached {
                parts = parts
                    .into_iter()
                    .flat_map(|(x, y)| [(x, y.min(s)), (x.max(e), y)])
                    .filter(|&(x, y)| x < y)
                    .collect();
            }
            for (x, y) in parts {
                let dst = GuestRange::new(x, y - x).ok_or(Errno::ENOEXEC)?;
                if file.read_at_into(dst.through_alias(), p.offset + (x - a) as u64)? != y - x {
                    return Err(Errno::EIO);
                }
            }
        }
        if unzeroed {
            let mut file_bytes: Vec<(usize, usize)> = loads
                .iter()
                .map(|p| (bias.wrapping_add(p.vaddr as usize), bias.wrapping_add((p.vaddr + p.filesz) as usize)))
                .collect();
            // The cached pieces' own pages are emptied as they are replaced.
            file_bytes.extend(cached.iter().map(|&(s, e, _)| (s, e)));
            file_bytes.sort_unstable();
            let mut at = start;
            for (s, e) in file_bytes {
                if s > at {
                    phys.zero(at, s - at);
                }
                at = at.max(e);
            }
            // The heap room is zeroed as the break grows over it (see
            // AddressSpace::init_brk).
            if start + span > at {
                phys.zero(at, start + span - at);
            }
        }
        Ok(())
    });
    if let Err(e) = filled {
        phys.free(start + span, heap_reserve);
        if let Some((at, _)) = &area {
            phys.restore(*at, area_len);
            phys.free(*at, area_len);
        }
        return Err(e.into());
    }
    if let Some((at, frames)) = area {
        let mut vma = Vma::new(0, PROT_READ | PROT_EXEC, VmaKind::Anon);
        vma.frames = Some(frames);
        space.map_frames(Placement::Allocated(at), area_len, vma)?;
    }
    // The pages kept their last protection (see mm::phys); the heap room
    // must be writable, holes between segments inaccessible.
    phys.set_prot(start + span, heap_reserve, PROT_READ | PROT_WRITE)?;
    if initial == 0 {
        phys.set_prot(start, span, 0)?;
    }
    if with_brk {
        space.init_brk(start + span, start + span + heap_reserve, unzeroed);
    }
    // Each piece between segment edges once, with the protections of every
    // segment covering it (a page two segments share gets both).
    let mut cuts: Vec<usize> = ranges.iter().flat_map(|&(s, e, _)| [s, e]).collect();
    cuts.sort_unstable();
    cuts.dedup();
    for w in cuts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let covering = ranges.iter().filter(|&&(s, e, _)| s < b && a < e);
        if let Some(prot) = covering.map(|&(_, _, p)| p).reduce(|x, y| x | y) {
            space.protect(a, b - a, prot)?;
        }
    }

    // Read-only segments show the page cache's pages (mm::cache).
    for (s, e, frames) in cached {
        space.replace_with_frames(s, e - s, frames)?;
    }

    // Each segment's file pages show the file in /proc/PID/maps (the
    // zeroed pages past them are anonymous, as Linux's bss).
    for p in &loads {
        let s = page_down(bias.wrapping_add(p.vaddr as usize));
        let e = page_up(bias.wrapping_add((p.vaddr + p.filesz) as usize)).unwrap();
        if e > s {
            let offset = page_down(p.offset as usize) as u64;
            space.set_image_file(s, e, Backing { file: file.clone(), offset });
        }
    }

    if moved {
        // Its code runs at its own addresses in a host process of its
        // own, whose syscalls trap: no site is prepared, here or in its
        // interpreter.
        space.move_image(start, span, lo);
        return finish(file, &phdrs, &loads, phoff, 0, entry);
    }
    if !space.has_moved_image() {
        prepare_known_sites(kernel, space, id, &loads, bias, code_prepared);
    }
    finish(file, &phdrs, &loads, phoff, bias, entry)
}

/// What load_one returns for an image whose addresses are `bias` + its own.
fn finish(
    file: &Arc<OpenFile>,
    phdrs: &[Phdr],
    loads: &[&Phdr],
    phoff: u64,
    bias: usize,
    entry: u64,
) -> Result<Loaded, ExecError> {
    let phdr = phdrs
        .iter()
        .find(|p| p.p_type == PT_PHDR)
        .map(|p| p.vaddr)
        .or_else(|| {
            loads
                .iter()
                .find(|p| p.offset <= phoff && phoff < p.offset + p.filesz)
                .map(|p| p.vaddr + (phoff - p.offset))
        })
        .ok_or(noexec("program headers are not loaded"))? as usize
        + bias;
    let interp = match phdrs.iter().find(|p| p.p_type == PT_INTERP) {
        Some(p) => {
            if p.filesz < 2 || p.filesz > 4096 {
                return Err(noexec("bad PT_INTERP"));
            }
            let mut buf = vec![0u8; p.filesz as usize];
            hostfs::pread_local(file.fd(), &mut buf, p.offset)?;
            if buf.pop() != Some(0) || buf.contains(&0) {
                return Err(noexec("bad PT_INTERP"));
            }
            Some(buf)
        }
        None => None,
    };
    let exec_stack = phdrs.iter().find(|p| p.p_type == PT_GNU_STACK).is_some_and(|p| p.flags & 1 != 0);
    Ok(Loaded { bias, entry: entry as usize + bias, phdr, phnum: phdrs.len(), interp, exec_stack })
}

/// The pieces of the image that show the page cache's pages instead of a
/// copy (mm::cache): each read-only segment's whole pages of file bytes
/// that no other segment shares (a page with bss is the process's own, as
/// is one another segment's bytes share), as (start, end, the frames).
/// Executable segments' pages are cached as code; where the entry path
/// cannot share code (the rewrite path), only the pages no syscall site can
/// be patched in are (mm::cache's `code_without_syscalls`). The others are
/// cached as data.
fn cached_pieces(
    kernel: &Kernel,
    file: &OpenFile,
    id: FileIdentity,
    loads: &[&Phdr],
    ranges: &[(usize, usize, i32)],
    bias: usize,
    code_shared: bool,
) -> Vec<(usize, usize, Frames)> {
    let mut pieces = Vec::new();
    for (i, p) in loads.iter().enumerate() {
        let code = p.flags & 1 != 0;
        if p.flags & 2 != 0 || p.filesz == 0 || (code && code_shared) {
            continue;
        }
        let seg_start = page_down(bias + p.vaddr as usize);
        let file_end = bias + (p.vaddr + p.filesz) as usize;
        let mut s = seg_start;
        let mut e = if p.memsz > p.filesz { page_down(file_end) } else { page_up(file_end).unwrap() };
        let shared = |page: usize| {
            ranges.iter().enumerate().any(|(j, &(rs, re, _))| j != i && rs < page + PAGE_SIZE && page < re)
        };
        while s < e && shared(s) {
            s += PAGE_SIZE;
        }
        while e > s && shared(e - PAGE_SIZE) {
            e -= PAGE_SIZE;
        }
        if s >= e {
            continue;
        }
        let offset = page_down(p.offset as usize) as u64 + (s - seg_start) as u64;
        if code && !kernel.entry.shares_code() {
            let shared = kernel.page_cache.code_without_syscalls(file, id, offset, e - s);
            pieces.extend(shared.into_iter().map(|(at, n, frames)| (s + at, s + at + n, frames)));
            continue;
        }
        // Without room in the cache the piece is copied, as before.
        if let Ok(frames) = kernel.page_cache.get(file, id, code, offset, e - s) {
            pieces.push((s, e, frames));
        }
    }
    pieces
}

/// The least room left for an area of trampolines before an image.
const MIN_AREA: usize = 256 << 10;

/// For an entry path that shares code with an area of trampolines before
/// the image (the rewrite path): the image's one executable segment's
/// whole pages of file bytes that no other segment shares, as (start,
/// end) from the image's first page, and their file offset. None when
/// the image has more than one executable segment or a writable one.
fn trampolined_text(loads: &[&Phdr], lo: usize) -> Option<(usize, usize, u64)> {
    let mut code = loads.iter().enumerate().filter(|(_, p)| p.flags & 1 != 0);
    let (i, p) = code.next()?;
    if code.next().is_some() || p.flags & 2 != 0 || p.filesz == 0 {
        return None;
    }
    let mut ranges = Vec::new();
    for q in loads {
        ranges.push((page_down(q.vaddr as usize) - lo, page_up((q.vaddr + q.memsz) as usize)? - lo));
    }
    let seg_start = ranges[i].0;
    let file_end = (p.vaddr + p.filesz) as usize - lo;
    let mut s = seg_start;
    let mut e = if p.memsz > p.filesz { page_down(file_end) } else { page_up(file_end)? };
    let shared =
        |page: usize| ranges.iter().enumerate().any(|(j, &(rs, re))| j != i && rs < page + PAGE_SIZE && page < re);
    while s < e && shared(s) {
        s += PAGE_SIZE;
    }
    while e > s && shared(e - PAGE_SIZE) {
        e -= PAGE_SIZE;
    }
    (s < e).then(|| (s, e, page_down(p.offset as usize) as u64 + (s - seg_start) as u64))
}

/// Notes where the executable segments' bytes came from, and has the entry
/// path prepare the syscall instructions earlier runs of this file used
/// (only inside each segment's own file bytes, which are the file's), but
/// for code shown from the page cache with its patches (`code_prepared`).
fn prepare_known_sites(
    kernel: &Kernel,
    space: &mut AddressSpace,
    id: FileIdentity,
    loads: &[&Phdr],
    bias: usize,
    code_prepared: bool,
) {
    for p in loads.iter().filter(|p| p.flags & 1 != 0 && p.flags & 2 == 0) {
        let (s, e) = (page_down(bias + p.vaddr as usize), page_up(bias + (p.vaddr + p.memsz) as usize).unwrap());
        let segment = p.offset..p.offset + p.filesz;
        space.set_origin(s, e, ImageOrigin { file: id, offset: page_down(p.offset as usize) as u64, segment });
        if code_prepared {
            continue;
        }
        let start = bias as u64 + p.vaddr;
        for off in kernel.syscall_sites.known(&id, p.offset..(p.offset + p.filesz).saturating_sub(1)) {
            kernel.entry.prepare_syscall_site(start + (off - p.offset));
        }
    }
}

/// Loads the program and, if it names one, its interpreter.
pub fn load(
    kernel: &Kernel,
    me: u32,
    space: &mut AddressSpace,
    file: &Arc<OpenFile>,
    stat: &libc::stat,
    head: &[u8],
    cwd: &[u8],
) -> Result<Image, ExecError> {
    let main = load_one(kernel, space, file, stat, head, true)?;
    let (entry, interp_base) = match &main.interp {
        Some(interp) => {
            let super::Opened { file: ifile, stat: istat, .. } =
                super::open_exec(kernel, me, cwd, interp).map_err(|e| {
                    ExecError::new(
                        e.errno,
                        format!("interpreter {}: {}", String::from_utf8_lossy(interp), e.errno.description()),
                    )
                })?;
            let mut ihead = vec![0u8; super::HEAD_READ];
            let n = hostfs::pread_local(ifile.fd(), &mut ihead, 0)?;
            ihead.truncate(n);
            let l = load_one(kernel, space, &ifile, &istat, &ihead, false)?;
            if l.interp.is_some() {
                return Err(noexec("the interpreter itself names an interpreter"));
            }
            (l.entry, l.bias)
        }
        None => (main.entry, 0),
    };
    Ok(Image {
        entry,
        main_entry: main.entry,
        phdr: main.phdr,
        phnum: main.phnum,
        interp_base,
        exec_stack: main.exec_stack,
    })
}
