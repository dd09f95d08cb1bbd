//! Path resolution inside the guest root.
//!
//! Every guest path becomes an absolute guest path (joined to the cwd or a
//! directory descriptor's path) and is then resolved by the host's
//! openat2(RESOLVE_IN_ROOT) from the root directory: `..` and symlinks,
//! absolute ones included, can never leave the root, and magic links
//! (/proc/self/fd/N of nomu itself) are refused by the host.

use crate::abi::errno::Errno;
use crate::host::fs as hostfs;
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

pub const PATH_MAX: usize = 4096;

pub struct Root {
    fd: OwnedFd,
    /// The root's canonical host path; empty when the root is the host's /.
    host_prefix: Vec<u8>,
}

pub fn cstring(bytes: &[u8]) -> Result<CString, Errno> {
    CString::new(bytes).map_err(|_| Errno::EINVAL)
}

impl Root {
    pub fn open(dir: &std::path::Path) -> Result<Root, String> {
        let canon = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let c = cstring(canon.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
        let fd = hostfs::open_host(&c, libc::O_PATH | libc::O_DIRECTORY)
            .map_err(|e| format!("{}: {}", dir.display(), e.description()))?;
        let mut host_prefix = canon.as_os_str().as_encoded_bytes().to_vec();
        if host_prefix == b"/" {
            host_prefix.clear();
        }
        Ok(Root { fd, host_prefix })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Whether the guest root is the host's own `/`: then guest paths are
    /// host paths and need no confinement (only nomu's /proc entries and
    /// magic links are kept from the guest), which saves host calls.
    pub fn is_host_root(&self) -> bool {
        self.host_prefix.is_empty()
    }

    /// The root's canonical host path ("" when it is the host's `/`).
    pub fn host_path(&self) -> &[u8] {
        &self.host_prefix
    }

    /// Opens an absolute guest path.
    pub fn open_path(&self, abs: &[u8], flags: i32, mode: u32) -> Result<OwnedFd, Errno> {
        let resolve = if self.is_host_root() { hostfs::RESOLVE_NO_MAGICLINKS } else { hostfs::RESOLVE_IN_ROOT };
        hostfs::openat2(self.fd(), &cstring(abs)?, flags, mode, resolve)
    }

    /// Resolves everything but the last component of an absolute guest
    /// path: returns the parent directory and the last component (with any
    /// trailing slashes, which the host then judges as Linux does).
    pub fn parent_of(&self, abs: &[u8]) -> Result<(OwnedFd, CString), Errno> {
        let trimmed_len = abs.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1);
        let slash = abs[..trimmed_len].iter().rposition(|&b| b == b'/').unwrap_or(0);
        let (dir, name) = (&abs[..slash.max(1)], &abs[slash + 1..]);
        if last_component(abs) == b".." {
            // The host would take a final `..` from the directory it is
            // handed, and the root's parent lies outside the root: resolve
            // the whole path inside the root and name that directory itself.
            let dirfd = self.open_path(abs, libc::O_PATH | libc::O_DIRECTORY, 0)?;
            return Ok((dirfd, c".".into()));
        }
        let name = if name.is_empty() { &b"."[..] } else { name };
        let dirfd = self.open_path(dir, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        Ok((dirfd, cstring(name)?))
    }

    /// The canonical guest path of an open host descriptor inside the root.
    pub fn guest_path_of(&self, fd: BorrowedFd) -> Result<Vec<u8>, Errno> {
        let host = hostfs::fd_path(fd)?;
        Ok(self.strip_host_prefix(&host).unwrap_or_else(|| b"/".to_vec()))
    }

    /// A canonical host path as a guest path, if it lies inside the root.
    pub fn strip_host_prefix(&self, host: &[u8]) -> Option<Vec<u8>> {
        match host.strip_prefix(self.host_prefix.as_slice()) {
            Some([]) => Some(b"/".to_vec()),
            Some(rest) if rest.starts_with(b"/") => Some(rest.to_vec()),
            _ => None,
        }
    }
}

/// Joins a guest path to the absolute guest path of its base directory.
pub fn join(base: &[u8], path: &[u8]) -> Vec<u8> {
    if path.starts_with(b"/") {
        return path.to_vec();
    }
    let mut out = base.to_vec();
    if !out.ends_with(b"/") {
        out.push(b'/');
    }
    out.extend_from_slice(path);
    out
}

/// The last component of a path, without trailing slashes ("" for "/").
pub fn last_component(path: &[u8]) -> &[u8] {
    let end = path.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1);
    let start = path[..end].iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
    &path[start..end]
}

/// Lexically normalises an absolute path ("." and ".." and repeated
/// slashes). Used only to recognise nomu's built-in device paths.
pub fn normalize(abs: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    for part in abs.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let mut out = Vec::with_capacity(abs.len());
    for p in &parts {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

/// Paths nomu answers itself rather than from the root.
pub enum Special {
    /// A host device every guest gets, whatever the root holds.
    HostDevice(&'static str),
    /// The guest's own descriptor N (/dev/fd/N, /dev/stdin...).
    GuestFd(i32),
    /// Paths that would show nomu's own host state.
    Hidden,
    /// nomu's own /proc: the path, normalised (see fs::procfs::lookup).
    Proc(Vec<u8>),
}

pub fn special(abs: &[u8]) -> Option<Special> {
    // Fast reject, in one pass: every special path names /dev or /proc.
    if !abs.windows(4).any(|w| w == b"/dev" || w == b"/pro") {
        return None;
    }
    let norm = normalize(abs);
    if norm == b"/proc" || norm.starts_with(b"/proc/") {
        return Some(Special::Proc(norm));
    }
    let s = std::str::from_utf8(&norm).ok()?;
    let dev = match s {
        "/dev/null" => Some("/dev/null"),
        "/dev/zero" => Some("/dev/zero"),
        "/dev/full" => Some("/dev/full"),
        "/dev/random" => Some("/dev/random"),
        "/dev/urandom" => Some("/dev/urandom"),
        "/dev/tty" => Some("/dev/tty"),
        _ => None,
    };
    if let Some(d) = dev {
        return Some(Special::HostDevice(d));
    }
    match s {
        "/dev/stdin" => return Some(Special::GuestFd(0)),
        "/dev/stdout" => return Some(Special::GuestFd(1)),
        "/dev/stderr" => return Some(Special::GuestFd(2)),
        _ => {}
    }
    if let Some(n) = s.strip_prefix("/dev/fd/") {
        return Some(n.parse().map(Special::GuestFd).unwrap_or(Special::Hidden));
    }
    if s == "/dev/fd" {
        return Some(Special::Hidden);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_and_normalize() {
        assert_eq!(join(b"/a/b", b"c"), b"/a/b/c");
        assert_eq!(join(b"/", b"c"), b"/c");
        assert_eq!(join(b"/a", b"/x"), b"/x");
        assert_eq!(normalize(b"/a/./b/../../../dev//null"), b"/dev/null");
        assert_eq!(normalize(b"/"), b"/");
        assert_eq!(last_component(b"/a/.."), b"..");
        assert_eq!(last_component(b"/a/..//"), b"..");
        assert_eq!(last_component(b"/"), b"");
        assert_eq!(last_component(b"x"), b"x");
    }

    #[test]
    fn specials() {
        assert!(matches!(special(b"/dev/../dev/null"), Some(Special::HostDevice("/dev/null"))));
        assert!(matches!(special(b"/dev/fd/7"), Some(Special::GuestFd(7))));
        assert!(matches!(special(b"/proc/self/../self/fd"), Some(Special::Proc(p)) if p == b"/proc/self/fd"));
        assert!(matches!(special(b"/proc"), Some(Special::Proc(_))));
        assert!(special(b"/procfs").is_none());
        assert!(special(b"/etc/hosts").is_none());
        // The one-pass reject lets "/pro..." through to the full check.
        assert!(special(b"/programs/x").is_none());
        assert!(special(b"/a/../proc/1").is_some());
    }
}
