//! /proc/PID/maps and the memory counts of stat, statm and status, from
//! the process's address space (src/mm/space.rs).

use crate::fs::file::OpenFile;
use crate::kernel::process::Process;
use crate::kernel::Kernel;
use crate::mm::space::VmaKind;
use std::sync::Arc;

/// A mapping as maps shows it.
struct Piece {
    start: usize,
    end: usize,
    prot: i32,
    shared: bool,
    kind: VmaKind,
    locked: bool,
    file: Option<(Arc<OpenFile>, u64)>,
    /// A shared memory attachment: its offset in the segment, inode, name.
    shm: Option<(u64, u64, Vec<u8>)>,
    /// The rewrite path's trampolines beside a program's shared code.
    trampolines: bool,
}

fn pieces(p: &Process) -> Vec<Piece> {
    let mm = p.mm();
    let space = mm.lock().unwrap();
    space
        .vmas()
        .map(|(start, v)| Piece {
            start,
            end: v.end,
            prot: v.prot,
            shared: v.shared,
            kind: v.kind,
            locked: v.locked,
            file: v.shown_file().map(|b| (b.file.clone(), b.offset)),
            shm: v.shm.as_ref().map(|h| {
                let (ino, name) = h.shown();
                ((start - h.pages().0) as u64, ino, name)
            }),
            trampolines: v.frames.as_ref().is_some_and(|f| f.source.trampolines()),
        })
        .collect()
}

/// One line's fields.
#[derive(PartialEq)]
struct Line {
    start: usize,
    end: usize,
    perms: [u8; 4],
    offset: u64,
    dev: u64,
    ino: u64,
    name: Vec<u8>,
}

/// Linux's format: `start-end perms offset major:minor inode`, then the
/// name from column 73 ([heap], [stack], a file's path). Adjacent
/// mappings that Linux would have merged (same access and file, offsets
/// that follow on; anonymous memory) are one line.
pub fn maps(kernel: &Kernel, p: &Process) -> Vec<u8> {
    let mut lines: Vec<Line> = Vec::new();
    for piece in pieces(p) {
        let bit = |b: i32, c: u8| if piece.prot & b != 0 { c } else { b'-' };
        let perms = [
            bit(libc::PROT_READ, b'r'),
            bit(libc::PROT_WRITE, b'w'),
            bit(libc::PROT_EXEC, b'x'),
            if piece.shared { b's' } else { b'p' },
        ];
        let (offset, dev, ino, name) = match &piece.file {
            // The kernel's internal shm mount: device 00:01.
            None if piece.shm.is_some() => {
                let (offset, ino, name) = piece.shm.clone().unwrap();
                (offset, libc::makedev(0, 1), ino, name)
            }
            Some((f, offset)) => {
                let st = crate::host::fs::fstat(f.fd()).ok();
                let mut name = Vec::new();
                for &b in &super::fd_link_text(kernel, f) {
                    // seq_file_path escapes newlines.
                    if b == b'\n' {
                        name.extend_from_slice(b"\\012");
                    } else {
                        name.push(b);
                    }
                }
                (*offset, st.map_or(0, |s| s.st_dev), st.map_or(0, |s| s.st_ino), name)
            }
            None => {
                let name: &[u8] = match piece.kind {
                    VmaKind::Heap => b"[heap]",
                    // The guard page below the stack is no part of it.
                    VmaKind::Stack if piece.prot != 0 => b"[stack]",
                    // As Linux names its own code in a process ([vdso],
                    // [uprobes]).
                    _ if piece.trampolines => b"[trampolines]",
                    _ => b"",
                };
                (0, 0, 0, name.to_vec())
            }
        };
        let line = Line { start: piece.start, end: piece.end, perms, offset, dev, ino, name };
        if let Some(last) = lines.last_mut() {
            let follows = last.end == line.start
                && last.perms == line.perms
                && (last.dev, last.ino, &last.name) == (line.dev, line.ino, &line.name)
                && (line.ino == 0 || last.offset + (last.end - last.start) as u64 == line.offset);
            if follows {
                last.end = line.end;
                continue;
            }
        }
        lines.push(line);
    }
    let mut out = Vec::new();
    for l in lines {
        let mut text = format!(
            "{:08x}-{:08x} {} {:08x} {:02x}:{:02x} {} ",
            l.start,
            l.end,
            String::from_utf8_lossy(&l.perms),
            l.offset,
            libc::major(l.dev),
            libc::minor(l.dev),
            l.ino
        )
        .into_bytes();
        if !l.name.is_empty() {
            // seq_pad: up to column 72, then one space.
            text.resize(text.len().max(72), b' ');
            text.push(b' ');
            text.extend_from_slice(&l.name);
        }
        text.push(b'\n');
        out.extend(text);
    }
    out
}

/// A process's memory, in bytes: everything mapped (on no-MMU all of it
/// is resident), the file-backed part, program text, and data (private
/// writable memory and the stack).
pub struct Usage {
    pub size: u64,
    pub file: u64,
    pub text: u64,
    pub data: u64,
    /// Locked (VmLck).
    pub locked: u64,
}

pub fn usage(p: &Process) -> Usage {
    let mut u = Usage { size: 0, file: 0, text: 0, data: 0, locked: 0 };
    for piece in pieces(p) {
        let len = (piece.end - piece.start) as u64;
        u.size += len;
        if piece.locked {
            u.locked += len;
        }
        if piece.file.is_some() {
            u.file += len;
        }
        if piece.kind == VmaKind::Image && piece.prot & libc::PROT_EXEC != 0 {
            u.text += len;
        }
        if !piece.shared && piece.prot & libc::PROT_WRITE != 0 {
            u.data += len;
        }
    }
    u
}
