//! /proc/PID/mountinfo and /proc/PID/mounts: the root's mount first (its
//! mount point "/", its root the root directory's place in that file
//! system), then the host's mounts that lie inside the root, seen from
//! it, then nomu's /proc in place of whatever the root has there.

use crate::host::fs as hostfs;
use crate::kernel::Kernel;
use std::os::fd::BorrowedFd;

/// One mountinfo line, its paths unescaped.
#[derive(Clone, Debug, PartialEq)]
struct Mount {
    id: u64,
    parent: u64,
    dev: String,
    root: Vec<u8>,
    point: Vec<u8>,
    opts: String,
    /// The optional fields and the separator ("shared:1 -").
    tagged: String,
    fstype: String,
    source: String,
    super_opts: String,
}

/// Undoes mountinfo's octal escapes (\040 for a space...).
fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') << 6 | (b[i + 2] - b'0') << 3 | (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// Linux's mangle: space, tab, newline and backslash as octal escapes.
fn escape(p: &[u8]) -> String {
    let mut out = String::with_capacity(p.len());
    for &c in p {
        if matches!(c, b' ' | b'\t' | b'\n' | b'\\') {
            out.push_str(&format!("\\{c:03o}"));
        } else {
            out.push(c as char);
        }
    }
    out
}

fn parse(text: &str) -> Vec<Mount> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let Some(sep) = f.iter().position(|&x| x == "-") else { continue };
        if sep < 6 || f.len() < sep + 4 {
            continue;
        }
        let (Ok(id), Ok(parent)) = (f[0].parse(), f[1].parse()) else { continue };
        out.push(Mount {
            id,
            parent,
            dev: f[2].to_string(),
            root: unescape(f[3]),
            point: unescape(f[4]),
            opts: f[5].to_string(),
            tagged: f[6..=sep].join(" "),
            fstype: f[sep + 1].to_string(),
            source: f[sep + 2].to_string(),
            super_opts: f[sep + 3].to_string(),
        });
    }
    out
}

/// The mount id of an open host file (statx's STATX_MNT_ID), as fdinfo
/// and mountinfo number mounts.
pub fn mount_id(fd: BorrowedFd) -> u64 {
    match hostfs::statx(fd, c"", libc::AT_EMPTY_PATH, libc::STATX_MNT_ID) {
        Ok(b) => u64::from_ne_bytes(b[144..152].try_into().unwrap()),
        Err(_) => 0,
    }
}

/// The id of nomu's /proc mount: the host's /proc's.
pub fn proc_mount_id() -> u64 {
    static ID: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *ID.get_or_init(|| match hostfs::open_host(c"/proc", libc::O_PATH | libc::O_DIRECTORY) {
        Ok(fd) => mount_id(std::os::fd::AsFd::as_fd(&fd)),
        Err(_) => 0,
    })
}

/// The guest's mounts, in mountinfo order.
fn guest_mounts(kernel: &Kernel) -> Vec<Mount> {
    let host = hostfs::read_file(c"/proc/self/mountinfo").unwrap_or_default();
    let host = parse(&String::from_utf8_lossy(&host));
    let root_id = mount_id(kernel.root.fd());
    let root_path = kernel.root.host_path();
    let proc_dev = format!("{}:{}", libc::major(super::device()), libc::minor(super::device()));
    let mut out = Vec::new();
    if let Some(m) = host.iter().rev().find(|m| m.id == root_id) {
        // The root directory's place in its file system.
        let inside = if m.point == b"/" { root_path } else { root_path.strip_prefix(&m.point[..]).unwrap_or(b"") };
        let mut root = m.root.clone();
        if root == b"/" && !inside.is_empty() {
            root.clear();
        }
        root.extend_from_slice(inside);
        out.push(Mount { root, point: b"/".to_vec(), ..m.clone() });
    }
    let root_mount = out.first().map_or(0, |m| m.id);
    let in_proc = |p: &[u8]| p == b"/proc" || p.starts_with(b"/proc/");
    for m in &host {
        let Some(point) = kernel.root.strip_host_prefix(&m.point) else { continue };
        if m.id == root_id || point == b"/" || in_proc(&point) {
            continue;
        }
        out.push(Mount { point, ..m.clone() });
    }
    let host_proc = host.iter().find(|m| m.fstype == "proc" && m.dev == proc_dev);
    let proc = Mount {
        id: proc_mount_id(),
        parent: root_mount,
        dev: proc_dev,
        root: b"/".to_vec(),
        point: b"/proc".to_vec(),
        opts: host_proc.map_or("rw,nosuid,nodev,noexec,relatime".to_string(), |m| m.opts.clone()),
        tagged: "-".to_string(),
        fstype: "proc".to_string(),
        source: "proc".to_string(),
        super_opts: "rw".to_string(),
    };
    out.insert(out.len().min(1), proc);
    out
}

pub fn mountinfo(kernel: &Kernel) -> String {
    guest_mounts(kernel)
        .iter()
        .map(|m| {
            format!(
                "{} {} {} {} {} {} {} {} {} {}\n",
                m.id,
                m.parent,
                m.dev,
                escape(&m.root),
                escape(&m.point),
                m.opts,
                m.tagged,
                m.fstype,
                m.source,
                m.super_opts
            )
        })
        .collect()
}

/// /proc/mounts: source, mount point, type, the mount's options and then
/// the file system's (without its rw/ro, which the mount's options have).
pub fn mounts(kernel: &Kernel) -> String {
    guest_mounts(kernel)
        .iter()
        .map(|m| {
            let fs_opts = m.super_opts.split(',').filter(|o| *o != "rw" && *o != "ro").collect::<Vec<_>>();
            let opts = if fs_opts.is_empty() { m.opts.clone() } else { format!("{},{}", m.opts, fs_opts.join(",")) };
            format!("{} {} {} {} 0 0\n", m.source, escape(&m.point), m.fstype, opts)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_parse() {
        let m = parse("27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard\n22 27 0:21 / /my\\040proc rw - proc proc rw\nbad line\n");
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].id, m[0].parent, m[0].dev.as_str()), (27, 1, "254:0"));
        assert_eq!(m[0].tagged, "shared:1 -");
        assert_eq!(
            (m[0].fstype.as_str(), m[0].source.as_str(), m[0].super_opts.as_str()),
            ("ext4", "/dev/vda", "rw,discard")
        );
        assert_eq!(m[1].point, b"/my proc");
        assert_eq!(escape(&m[1].point), "/my\\040proc");
    }
}
