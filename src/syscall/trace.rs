//! `--trace`: one strace-like line per syscall on nomu's stderr.
//!   [1] openat(AT_FDCWD, "/etc/hosts", O_RDONLY) = 3

use super::table::{Arg, SyscallDef};
use super::{int, Args, Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::kernel::signal;
use std::fmt::Write;

const STR_MAX: usize = 32;

fn quote(bytes: &[u8], limit: usize) -> String {
    let mut s = String::from("\"");
    for &b in bytes.iter().take(limit) {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(b as char),
            _ => {
                let _ = write!(s, "\\x{b:02x}");
            }
        }
    }
    s.push('"');
    if bytes.len() > limit {
        s.push_str("...");
    }
    s
}

fn flags(value: u64, names: &[(u64, &str)], zero: &str) -> String {
    let mut parts = Vec::new();
    let mut rest = value;
    for &(bit, name) in names {
        if bit != 0 && rest & bit == bit {
            parts.push(name.to_string());
            rest &= !bit;
        }
    }
    if rest != 0 || parts.is_empty() && !zero.is_empty() && value != 0 {
        parts.push(format!("{rest:#x}"));
    }
    if parts.is_empty() {
        zero.to_string()
    } else {
        parts.join("|")
    }
}

fn open_flags(v: u64) -> String {
    let acc = match v & 3 {
        0 => "O_RDONLY",
        1 => "O_WRONLY",
        2 => "O_RDWR",
        _ => "O_ACCMODE",
    };
    let rest = flags(
        v & !3,
        &[
            (libc::O_CREAT as u64, "O_CREAT"),
            (libc::O_EXCL as u64, "O_EXCL"),
            (libc::O_NOCTTY as u64, "O_NOCTTY"),
            (libc::O_TRUNC as u64, "O_TRUNC"),
            (libc::O_APPEND as u64, "O_APPEND"),
            (libc::O_NONBLOCK as u64, "O_NONBLOCK"),
            (libc::O_TMPFILE as u64, "O_TMPFILE"),
            (libc::O_DIRECTORY as u64, "O_DIRECTORY"),
            (libc::O_NOFOLLOW as u64, "O_NOFOLLOW"),
            (libc::O_CLOEXEC as u64, "O_CLOEXEC"),
            (libc::O_PATH as u64, "O_PATH"),
            (libc::O_DSYNC as u64, "O_DSYNC"),
            (libc::O_LARGEFILE as u64, "O_LARGEFILE"),
            (libc::O_NOATIME as u64, "O_NOATIME"),
        ],
        "",
    );
    if rest.is_empty() {
        acc.to_string()
    } else {
        format!("{acc}|{rest}")
    }
}

fn prot(v: u64) -> String {
    flags(v, &[(1, "PROT_READ"), (2, "PROT_WRITE"), (4, "PROT_EXEC")], "PROT_NONE")
}

fn map_flags(v: u64) -> String {
    flags(
        v,
        &[
            (libc::MAP_SHARED as u64, "MAP_SHARED"),
            (libc::MAP_PRIVATE as u64, "MAP_PRIVATE"),
            (libc::MAP_FIXED as u64, "MAP_FIXED"),
            (libc::MAP_ANONYMOUS as u64, "MAP_ANONYMOUS"),
            (libc::MAP_GROWSDOWN as u64, "MAP_GROWSDOWN"),
            (libc::MAP_DENYWRITE as u64, "MAP_DENYWRITE"),
            (libc::MAP_NORESERVE as u64, "MAP_NORESERVE"),
            (libc::MAP_POPULATE as u64, "MAP_POPULATE"),
            (libc::MAP_STACK as u64, "MAP_STACK"),
            (libc::MAP_FIXED_NOREPLACE as u64, "MAP_FIXED_NOREPLACE"),
        ],
        "0",
    )
}

fn at_flags(v: u64) -> String {
    flags(
        v,
        &[
            (libc::AT_SYMLINK_NOFOLLOW as u64, "AT_SYMLINK_NOFOLLOW"),
            (libc::AT_REMOVEDIR as u64, "AT_REMOVEDIR"),
            (libc::AT_SYMLINK_FOLLOW as u64, "AT_SYMLINK_FOLLOW"),
            (libc::AT_EMPTY_PATH as u64, "AT_EMPTY_PATH"),
            (libc::AT_EACCESS as u64, "AT_EACCESS"),
        ],
        "0",
    )
}

fn dirfd(v: u64) -> String {
    if int(v) == libc::AT_FDCWD {
        "AT_FDCWD".into()
    } else {
        int(v).to_string()
    }
}

fn ptr(v: u64) -> String {
    if v == 0 {
        "NULL".into()
    } else {
        format!("{v:#x}")
    }
}

fn guest_string(ctx: &Ctx, addr: u64) -> String {
    if addr == 0 {
        return "NULL".into();
    }
    match ctx.mem().read_cstring(addr, 4096) {
        Ok(s) => quote(&s, 256),
        Err(_) => ptr(addr),
    }
}

fn guest_buf(ctx: &Ctx, addr: u64, len: u64) -> String {
    let n = (len as usize).min(STR_MAX);
    match ctx.mem().read_bytes(addr, n) {
        Ok(b) if (len as usize) > STR_MAX => format!("{}...", quote(&b, STR_MAX)),
        Ok(b) => quote(&b, STR_MAX),
        Err(_) => ptr(addr),
    }
}

/// Formats what can be known before the call (paths, input buffers).
pub fn before(ctx: &Ctx, def: Option<&SyscallDef>, args: &Args) -> Vec<Option<String>> {
    let Some(def) = def else {
        return Vec::new();
    };
    def.args
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let v = args[i];
            // Each shown at the width its handler reads (see args.rs).
            let low = v as u32;
            Some(match *a {
                Arg::Int => int(v).to_string(),
                Arg::Uint => low.to_string(),
                Arg::Long => (v as i64).to_string(),
                Arg::Ulong => v.to_string(),
                Arg::Hex => format!("{v:#x}"),
                Arg::Hex32 => format!("{low:#x}"),
                Arg::Ptr => ptr(v),
                Arg::Fd => int(v).to_string(),
                Arg::DirFd => dirfd(v),
                Arg::Path => guest_string(ctx, v),
                Arg::InBuf(len) => guest_buf(ctx, v, args[len]),
                Arg::OutBuf => return None,
                Arg::OpenFlags => open_flags(low.into()),
                Arg::Mode => format!("{:#o}", v as u16),
                Arg::Prot => prot(v),
                Arg::MapFlags => map_flags(v),
                Arg::AtFlags => at_flags(low.into()),
                Arg::Signal => signal::name(int(v)),
            })
        })
        .collect()
}

/// Completes and prints the line once the result is known.
pub fn after(ctx: &Ctx, nr: u64, def: Option<&SyscallDef>, args: &Args, pre: Vec<Option<String>>, result: &SysResult) {
    let mut line = format!("[{}] ", ctx.tid());
    match def {
        Some(def) => {
            let parts: Vec<String> = pre
                .into_iter()
                .enumerate()
                .map(|(i, s)| {
                    s.unwrap_or_else(|| match (def.args[i], result) {
                        (Arg::OutBuf, Ok(n)) => guest_buf(ctx, args[i], *n),
                        _ => ptr(args[i]),
                    })
                })
                .collect();
            let _ = write!(line, "{}({})", def.name, parts.join(", "));
        }
        None => {
            let name = super::names::SYSCALL_NAMES.get(nr as usize).copied().filter(|n| !n.is_empty());
            let hex: Vec<String> = args.iter().map(|a| format!("{a:#x}")).collect();
            let _ = write!(line, "{}({})", name.map_or(format!("syscall_{nr}"), String::from), hex.join(", "));
        }
    }
    match result {
        Ok(v) if def.is_some_and(|d| d.ret_hex) => {
            let _ = write!(line, " = {v:#x}");
        }
        Ok(v) => {
            let _ = write!(line, " = {}", *v as i64);
        }
        Err(e) => {
            let _ = write!(line, " = -1 {} ({})", e.name(), e.description());
            if def.is_none() {
                line.push_str(" [nomu: not implemented]");
            } else if *e == Errno::ENOSYS {
                line.push_str(" [nomu: unsupported here]");
            }
        }
    }
    ctx.kernel().log(&line);
}
