//! Sockets. A guest socket is a host socket behind the guest descriptor:
//! the host kernel buffers, queues and wakes, and a call that waits is one
//! host call a kick ends (host::blocking), as a pipe's read is. nomu
//! translates what names files or processes: AF_UNIX addresses (paths
//! inside the root, abstract names under nomu's private prefix: see
//! fs::socket), descriptors in SCM_RIGHTS messages (the very description
//! sent arrives), and pids in credentials.

use super::args::*;
use super::io::iov_ranges;
use super::{Ctx, SysResult};
use crate::abi::errno::Errno;
use crate::fs::file::{FileKind, FileObject, FileType, OpenFile};
use crate::fs::socket::{self, PeerCred, Socket, SOCKADDR_UN_LEN, SUN_PATH_OFFSET};
use crate::host::net as hostnet;
use crate::host::physmem::GuestRange;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

const SOCK_TYPE_MASK: i32 = 0xf;
/// sizeof(struct sockaddr_storage).
const SOCKADDR_MAX: usize = 128;
const NETLINK_ROUTE: i32 = 0;
const NETLINK_SOCK_DIAG: i32 = 4;

/// A socket descriptor's open file, or ENOTSOCK.
fn socket_file(ctx: &Ctx, fd: Fd) -> Result<Arc<OpenFile>, Errno> {
    let f = ctx.io_file(fd)?;
    if f.kind() != FileKind::Socket {
        return Err(Errno::ENOTSOCK);
    }
    Ok(f)
}

pub(super) fn domain_of(f: &OpenFile) -> i32 {
    match f.socket() {
        Some(s) => s.domain,
        None => hostnet::getsockopt_int(f.fd(), libc::SOL_SOCKET, libc::SO_DOMAIN).unwrap_or(libc::AF_UNSPEC),
    }
}

/// SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET...
pub fn socket_type(f: &OpenFile) -> i32 {
    match f.socket() {
        Some(s) => s.ty,
        None => hostnet::getsockopt_int(f.fd(), libc::SOL_SOCKET, libc::SO_TYPE).unwrap_or(libc::SOCK_STREAM),
    }
}

fn new_socket_file(host: OwnedFd, domain: i32, ty: i32, protocol: i32) -> Arc<OpenFile> {
    let object = FileObject::Socket(Socket::new(domain, ty, protocol));
    Arc::new(OpenFile::new_special(host, "socket:", FileType::Socket, Some(object)))
}

/// Which families a guest may have: AF_UNIX (whose names nomu keeps
/// inside the root), AF_INET, AF_INET6 and AF_PACKET (passed through: the
/// host judges raw and packet sockets by nomu's own privileges),
/// NETLINK_ROUTE (read by getifaddrs and if_nameindex) and
/// NETLINK_SOCK_DIAG (read by ss; guests' sockets are host sockets). Other
/// families, and other netlink protocols (audit, uevents...), are refused
/// as a kernel without them refuses them.
fn check_family(domain: i32, protocol: i32) -> Result<(), Errno> {
    match domain {
        libc::AF_UNIX | libc::AF_INET | libc::AF_INET6 | libc::AF_PACKET => Ok(()),
        libc::AF_NETLINK if protocol == NETLINK_ROUTE || protocol == NETLINK_SOCK_DIAG => Ok(()),
        libc::AF_NETLINK => Err(Errno::EPROTONOSUPPORT),
        _ => Err(Errno::EAFNOSUPPORT),
    }
}

pub fn sys_socket(ctx: &mut Ctx, domain: i32, Hex(ty): Hex<i32>, protocol: i32) -> SysResult {
    let kind = ty & SOCK_TYPE_MASK;
    if ty & !(SOCK_TYPE_MASK | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) != 0 {
        return Err(Errno::EINVAL);
    }
    check_family(domain, protocol)?;
    let host = hostnet::socket(domain, ty & !libc::SOCK_CLOEXEC, protocol)?;
    ctx.install_fd(new_socket_file(host, domain, kind, protocol), ty & libc::SOCK_CLOEXEC != 0)
}

pub fn sys_socketpair(ctx: &mut Ctx, domain: i32, Hex(ty): Hex<i32>, protocol: i32, UserPtr(sv): UserPtr) -> SysResult {
    let kind = ty & SOCK_TYPE_MASK;
    if ty & !(SOCK_TYPE_MASK | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) != 0 {
        return Err(Errno::EINVAL);
    }
    check_family(domain, protocol)?;
    let (a, b) = hostnet::socketpair(domain, ty & !libc::SOCK_CLOEXEC, protocol)?;
    let (a, b) = (new_socket_file(a, domain, kind, protocol), new_socket_file(b, domain, kind, protocol));
    // Both ends' peer is their creator (Linux's init_peercred on each).
    let me = my_cred(ctx);
    for f in [&a, &b] {
        *f.socket().expect("a socket's state").peer.lock().unwrap() = Some(me);
    }
    let cloexec = ty & libc::SOCK_CLOEXEC != 0;
    let a = ctx.install_fd(a, cloexec)?;
    let b = match ctx.install_fd(b, cloexec) {
        Ok(b) => b,
        Err(e) => {
            let _ = ctx.process().files.lock().unwrap().close(a as i32);
            return Err(e);
        }
    };
    if let Err(e) = ctx.mem().write(sv, &[a as i32, b as i32]) {
        let mut files = ctx.process().files.lock().unwrap();
        let _ = files.close(a as i32);
        let _ = files.close(b as i32);
        return Err(e);
    }
    Ok(0)
}

fn my_cred(ctx: &Ctx) -> PeerCred {
    let c = ctx.t.thread.cred();
    PeerCred { pid: ctx.process().pid, uid: c.euid, gid: c.egid }
}

/// A guest address (`len` bytes at `addr`), as Linux's move_addr_to_kernel
/// reads it.
fn read_addr(ctx: &Ctx, addr: u64, len: u32) -> Result<Vec<u8>, Errno> {
    if len as usize > SOCKADDR_MAX {
        return Err(Errno::EINVAL);
    }
    if len == 0 {
        return Ok(Vec::new());
    }
    ctx.mem().read_bytes(addr, len as usize)
}

/// What an address names, for a guest AF_UNIX path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    /// bind: a new socket file in a directory inside the root.
    Bind,
    /// connect, sendto: an existing socket file inside the root.
    Reach,
}

/// A guest address as the host's. For an AF_UNIX path, also what keeps
/// the host name valid (the descriptor it names) and the guest's path.
struct HostAddr {
    addr: Vec<u8>,
    keep: Option<OwnedFd>,
    guest_path: Option<Vec<u8>>,
    /// For a bind to a path: the new name in `keep`, the directory.
    entry: Option<std::ffi::CString>,
}

fn host_addr(ctx: &Ctx, f: &OpenFile, guest: Vec<u8>, how: Use) -> Result<HostAddr, Errno> {
    let plain = |addr| Ok(HostAddr { addr, keep: None, guest_path: None, entry: None });
    let family = guest.get(..2).map(|b| u16::from_ne_bytes([b[0], b[1]]) as i32);
    // Only AF_UNIX names are the guest's own; anything else (an autobind,
    // AF_UNSPEC to disconnect, a bad length) the host judges as Linux.
    if domain_of(f) != libc::AF_UNIX
        || family != Some(libc::AF_UNIX)
        || guest.len() <= SUN_PATH_OFFSET
        || guest.len() > SOCKADDR_UN_LEN
    {
        return plain(guest);
    }
    let path = &guest[SUN_PATH_OFFSET..];
    if path[0] == 0 {
        return plain(socket::host_abstract(&path[1..]));
    }
    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
    let p = &path[..end];
    let abs = if p.starts_with(b"/") { p.to_vec() } else { crate::fs::path::join(&ctx.base_dir(DirFd::CWD)?, p) };
    let (keep, name, entry) = match how {
        Use::Bind => {
            let (dir, entry) = super::fs::entry_of(ctx, &abs)?;
            let name = format!("/proc/self/fd/{}/{}", dir.as_raw_fd(), String::from_utf8_lossy(entry.as_bytes()));
            if name.contains('\u{fffd}') && !p.is_ascii() {
                // Names are bytes; build them as bytes.
                let (_, last) = p.split_at(p.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1));
                let mut n = format!("/proc/self/fd/{}/", dir.as_raw_fd()).into_bytes();
                n.extend_from_slice(last);
                (dir, n, Some(entry))
            } else {
                (dir, name.into_bytes(), Some(entry))
            }
        }
        Use::Reach => {
            let fd = ctx.open_abs(&abs, libc::O_PATH, 0)?;
            let name = format!("/proc/self/fd/{}", fd.as_raw_fd()).into_bytes();
            (fd, name, None)
        }
    };
    if name.len() >= SOCKADDR_UN_LEN - SUN_PATH_OFFSET {
        return Err(Errno::EINVAL);
    }
    let mut addr = guest[..SUN_PATH_OFFSET].to_vec();
    addr.extend_from_slice(&name);
    addr.push(0);
    Ok(HostAddr { addr, keep: Some(keep), guest_path: Some(p.to_vec()), entry })
}

/// A host address as the guest's (only AF_UNIX names differ).
fn guest_addr(ctx: &Ctx, host: &[u8]) -> Vec<u8> {
    let family = host.get(..2).map(|b| u16::from_ne_bytes([b[0], b[1]]) as i32);
    if family == Some(libc::AF_UNIX) {
        socket::guest_unix_addr(host, &ctx.kernel().root)
    } else {
        host.to_vec()
    }
}

/// Linux's move_addr_to_user: as much of `addr` as fits in the guest's
/// buffer, and its whole length in `*ulen`.
fn put_addr(ctx: &Ctx, addr: &[u8], uaddr: u64, ulen: u64) -> Result<(), Errno> {
    let mem = ctx.mem();
    let room: i32 = mem.read(ulen)?;
    if room < 0 {
        return Err(Errno::EINVAL);
    }
    let n = (room as usize).min(addr.len());
    if n > 0 {
        mem.write_bytes(uaddr, &addr[..n])?;
    }
    mem.write(ulen, &(addr.len() as u32))
}

pub fn sys_bind(ctx: &mut Ctx, fd: Fd, UserPtr(addr): UserPtr, len: i32) -> SysResult {
    let f = socket_file(ctx, fd)?;
    if len < 0 {
        return Err(Errno::EINVAL);
    }
    let guest = read_addr(ctx, addr, len as u32)?;
    if domain_of(&f) == libc::AF_UNIX && guest.len() == SUN_PATH_OFFSET && guest == (libc::AF_UNIX as u16).to_ne_bytes()
    {
        autobind(&f)?;
        if let Some(s) = f.socket() {
            s.named.store(true, Relaxed);
        }
        return Ok(0);
    }
    let host = host_addr(ctx, &f, guest, Use::Bind)?;
    hostnet::bind(f.fd(), &host.addr).map_err(|e| if e == Errno::EEXIST { Errno::EADDRINUSE } else { e })?;
    // The socket file's mode is 0777 less the guest's umask, as Linux's
    // unix_bind makes it (nomu's own umask is 0: a moment's wider mode).
    if let (Some(dir), Some(entry)) = (&host.keep, &host.entry) {
        crate::host::fs::fchmodat(dir.as_fd(), entry, 0o777 & !ctx.umask())?;
    }
    if let Some(s) = f.socket() {
        s.named.store(true, Relaxed);
    }
    if let (Some(dir), Some(path), Some(s)) = (host.keep, host.guest_path, f.socket()) {
        s.bound_as(host.addr[SUN_PATH_OFFSET..host.addr.len() - 1].to_vec(), path, dir);
    }
    Ok(0)
}

/// Binds an AF_UNIX socket to a free abstract name of five hex digits, as
/// Linux's autobind does, under nomu's prefix (the host's own autobind
/// would pick a name outside it, which other guests could not reach).
fn autobind(f: &OpenFile) -> SysResult {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    for _ in 0..=0xfffff {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) & 0xfffff;
        let host = socket::host_abstract(format!("{n:05x}").as_bytes());
        match hostnet::bind(f.fd(), &host) {
            Err(Errno::EADDRINUSE) => continue,
            r => return r.map(|_| 0),
        }
    }
    Err(Errno::ENOSPC)
}

/// A socket call that was waiting ended by a signal: Linux restarts it
/// (ERESTARTSYS) unless the socket has a timeout for that direction, when
/// it is EINTR (sock_intr_errno).
pub fn interrupted(f: &OpenFile, sending: bool, e: Errno) -> Errno {
    if e != Errno::ERESTARTSYS {
        return e;
    }
    let opt = if sending { libc::SO_SNDTIMEO } else { libc::SO_RCVTIMEO };
    let mut tv = [0u8; 16];
    match hostnet::getsockopt(f.fd(), libc::SOL_SOCKET, opt, &mut tv) {
        Ok(_) if tv != [0u8; 16] => Errno::EINTR,
        _ => e,
    }
}

pub fn sys_connect(ctx: &mut Ctx, fd: Fd, UserPtr(addr): UserPtr, len: i32) -> SysResult {
    let f = socket_file(ctx, fd)?;
    if len < 0 {
        return Err(Errno::EINVAL);
    }
    let guest = read_addr(ctx, addr, len as u32)?;
    let host = host_addr(ctx, &f, guest, Use::Reach)?;
    let unix = f.socket().filter(|s| s.domain == libc::AF_UNIX && s.ty != libc::SOCK_DGRAM);
    if let Some(s) = unix {
        s.connecting(host_ino(&f), my_cred(ctx));
        autobind_for_passcred(&f);
    }
    ctx.t.block_in_host(|| hostnet::connect_interruptible(f.fd(), &host.addr)).map_err(|e| interrupted(&f, true, e))?;
    if let Some(s) = unix {
        // Its peer is the listener it reached (its credentials at listen).
        let mut buf = [0u8; SOCKADDR_MAX];
        if let Ok(n) = hostnet::getpeername(f.fd(), &mut buf) {
            *s.peer.lock().unwrap() = socket::listener_cred(&buf[..n.min(SOCKADDR_MAX)]);
        }
    }
    Ok(0)
}

fn host_ino(f: &OpenFile) -> u64 {
    crate::host::fs::fstat(f.fd()).map_or(0, |st| st.st_ino)
}

pub fn sys_listen(ctx: &mut Ctx, fd: Fd, backlog: i32) -> SysResult {
    let f = socket_file(ctx, fd)?;
    hostnet::listen(f.fd(), backlog)?;
    if let Some(s) = f.socket().filter(|s| s.domain == libc::AF_UNIX) {
        let mut buf = [0u8; SOCKADDR_MAX];
        if let Ok(n) = hostnet::getsockname(f.fd(), &mut buf) {
            s.listening(buf[..n.min(SOCKADDR_MAX)].to_vec(), my_cred(ctx));
        }
    }
    Ok(0)
}

pub fn sys_accept4(
    ctx: &mut Ctx,
    fd: Fd,
    UserPtr(addr): UserPtr,
    UserPtr(len): UserPtr,
    Hex(flags): Hex<i32>,
) -> SysResult {
    if flags & !(libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) != 0 {
        return Err(Errno::EINVAL);
    }
    let f = socket_file(ctx, fd)?;
    let mut buf = [0u8; SOCKADDR_MAX];
    let (host, n) = ctx
        .t
        .block_in_host(|| hostnet::accept_interruptible(f.fd(), &mut buf, flags & libc::SOCK_NONBLOCK))
        .map_err(|e| interrupted(&f, false, e))?;
    let (domain, ty, protocol) = match f.socket() {
        Some(s) => (s.domain, s.ty, s.protocol),
        None => (domain_of(&f), libc::SOCK_STREAM, 0),
    };
    let new = new_socket_file(host, domain, ty, protocol);
    if domain == libc::AF_UNIX {
        // Its peer is the connector, with its credentials at connect.
        let peer = hostnet::unix_peer_inode(host_ino(&new) as u32).and_then(|ino| socket::connector_cred(ino.into()));
        *new.socket().expect("a socket's state").peer.lock().unwrap() = peer;
    }
    if addr != 0 {
        let guest = guest_addr(ctx, &buf[..n.min(SOCKADDR_MAX)]);
        // Linux installs the descriptor only once the address is out.
        put_addr(ctx, &guest, addr, len)?;
    }
    ctx.install_fd(new, flags & libc::SOCK_CLOEXEC != 0)
}

pub fn sys_accept(ctx: &mut Ctx, fd: Fd, addr: UserPtr, len: UserPtr) -> SysResult {
    sys_accept4(ctx, fd, addr, len, Hex(0))
}

fn name_of(ctx: &mut Ctx, fd: Fd, addr: u64, len: u64, peer: bool) -> SysResult {
    let f = socket_file(ctx, fd)?;
    let mut buf = [0u8; SOCKADDR_MAX];
    let n = if peer { hostnet::getpeername(f.fd(), &mut buf)? } else { hostnet::getsockname(f.fd(), &mut buf)? };
    let guest = guest_addr(ctx, &buf[..n.min(SOCKADDR_MAX)]);
    put_addr(ctx, &guest, addr, len)?;
    Ok(0)
}

pub fn sys_getsockname(ctx: &mut Ctx, fd: Fd, UserPtr(addr): UserPtr, UserPtr(len): UserPtr) -> SysResult {
    name_of(ctx, fd, addr, len, false)
}

pub fn sys_getpeername(ctx: &mut Ctx, fd: Fd, UserPtr(addr): UserPtr, UserPtr(len): UserPtr) -> SysResult {
    name_of(ctx, fd, addr, len, true)
}

pub fn sys_shutdown(ctx: &mut Ctx, fd: Fd, how: i32) -> SysResult {
    let f = socket_file(ctx, fd)?;
    hostnet::shutdown(f.fd(), how).map(|_| 0)
}

/// The guest's struct msghdr.
#[derive(Clone, Copy, Default)]
struct MsgHdr {
    name: u64,
    namelen: u32,
    iov: u64,
    iovlen: u64,
    control: u64,
    controllen: u64,
}

const MSGHDR_LEN: u64 = 56;
const MMSGHDR_LEN: u64 = 64;

impl MsgHdr {
    fn read(ctx: &Ctx, at: u64) -> Result<MsgHdr, Errno> {
        let b = ctx.mem().read_bytes(at, MSGHDR_LEN as usize)?;
        let u64_at = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().unwrap());
        Ok(MsgHdr {
            name: u64_at(0),
            namelen: u32::from_ne_bytes(b[8..12].try_into().unwrap()),
            iov: u64_at(16),
            iovlen: u64_at(24),
            control: u64_at(32),
            controllen: u64_at(40),
        })
    }
}

const CMSG_HDR: usize = 16;

fn cmsg_align(n: usize) -> usize {
    n.next_multiple_of(8)
}

/// One control message: level, type, data.
struct Cmsg {
    level: i32,
    ty: i32,
    data: Vec<u8>,
}

fn parse_cmsgs(buf: &[u8]) -> Result<Vec<Cmsg>, Errno> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + CMSG_HDR <= buf.len() {
        let len = u64::from_ne_bytes(buf[at..at + 8].try_into().unwrap()) as usize;
        if len < CMSG_HDR || at + len > buf.len() {
            return Err(Errno::EINVAL);
        }
        let level = i32::from_ne_bytes(buf[at + 8..at + 12].try_into().unwrap());
        let ty = i32::from_ne_bytes(buf[at + 12..at + 16].try_into().unwrap());
        out.push(Cmsg { level, ty, data: buf[at + CMSG_HDR..at + len].to_vec() });
        at += cmsg_align(len);
    }
    Ok(out)
}

fn put_cmsg(out: &mut Vec<u8>, level: i32, ty: i32, data: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&((CMSG_HDR + data.len()) as u64).to_ne_bytes());
    out.extend_from_slice(&level.to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(data);
    out.resize(start + cmsg_align(CMSG_HDR + data.len()), 0);
}

/// A guest's control messages for the host: its descriptors (kept open,
/// and listed in flight) as the host's; a credential's pid and ids as the
/// host's, once Linux's rules for the guest allow them.
fn host_control(ctx: &Ctx, guest: &[u8], sent: &mut Vec<Arc<OpenFile>>) -> Result<Vec<u8>, Errno> {
    let mut out = Vec::new();
    for m in parse_cmsgs(guest)? {
        match (m.level, m.ty) {
            (libc::SOL_SOCKET, libc::SCM_RIGHTS) => {
                let mut data = Vec::new();
                for fd in m.data.chunks_exact(4) {
                    let f = ctx.file(Fd(i32::from_ne_bytes(fd.try_into().unwrap())))?;
                    data.extend_from_slice(&f.fd().as_raw_fd().to_ne_bytes());
                    sent.push(f);
                }
                put_cmsg(&mut out, m.level, m.ty, &data);
            }
            (libc::SOL_SOCKET, libc::SCM_CREDENTIALS) if m.data.len() >= 12 => {
                let word = |i: usize| u32::from_ne_bytes(m.data[i..i + 4].try_into().unwrap());
                let (pid, uid, gid) = (word(0), word(4), word(8));
                let c = ctx.t.thread.cred();
                // Linux's scm_check_creds, against the guest's ids.
                let root = c.euid == 0;
                let own = pid == ctx.process().pid
                    && [c.uid, c.euid, c.suid].contains(&uid)
                    && [c.gid, c.egid, c.sgid].contains(&gid);
                if !(own || root) {
                    return Err(Errno::EPERM);
                }
                let mut data = m.data.clone();
                data[0..4].copy_from_slice(&hostnet::host_pid().to_ne_bytes());
                // The host checks its own ids: nomu's are the ones it allows.
                let h = crate::host::sys::host_cred();
                let (huid, hgid) = (h.uids[0], h.gids[0]);
                data[4..8].copy_from_slice(&huid.to_ne_bytes());
                data[8..12].copy_from_slice(&hgid.to_ne_bytes());
                put_cmsg(&mut out, m.level, m.ty, &data);
            }
            _ => put_cmsg(&mut out, m.level, m.ty, &m.data),
        }
    }
    Ok(out)
}

/// The host's control messages for the guest: received descriptors
/// installed as guest descriptors (the very description a guest sent),
/// credentials in guest terms.
fn guest_control(ctx: &Ctx, f: &OpenFile, host: &[u8], cloexec: bool, flags: &mut i32) -> Result<Vec<u8>, Errno> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + CMSG_HDR <= host.len() {
        let len = u64::from_ne_bytes(host[at..at + 8].try_into().unwrap()) as usize;
        if len < CMSG_HDR || at + len > host.len() {
            break;
        }
        let level = i32::from_ne_bytes(host[at + 8..at + 12].try_into().unwrap());
        let ty = i32::from_ne_bytes(host[at + 12..at + 16].try_into().unwrap());
        let data = &host[at + CMSG_HDR..at + len];
        match (level, ty) {
            (libc::SOL_SOCKET, libc::SCM_RIGHTS) => {
                let mut fds = Vec::new();
                for raw in data.chunks_exact(4) {
                    let got = hostnet::adopt_received(i32::from_ne_bytes(raw.try_into().unwrap()));
                    let file = match socket::received(got.as_fd()) {
                        Some(file) => {
                            crate::host::fs::close(got);
                            file
                        }
                        None => Arc::new(OpenFile::new(got, b"socket:".to_vec(), false)),
                    };
                    match ctx.install_fd(file, cloexec) {
                        Ok(fd) => fds.extend_from_slice(&(fd as i32).to_ne_bytes()),
                        Err(_) => *flags |= libc::MSG_CTRUNC,
                    }
                }
                put_cmsg(&mut out, level, ty, &fds);
            }
            (libc::SOL_SOCKET, libc::SCM_CREDENTIALS) if data.len() >= 12 => {
                // The host's pid names a host process of nomu's (or none
                // once it has gone): the peer's guest pid, when known.
                let mut data = data.to_vec();
                let peer = f.socket().and_then(|s| *s.peer.lock().unwrap());
                if let Some(c) = peer {
                    data[0..4].copy_from_slice(&c.pid.to_ne_bytes());
                    data[4..8].copy_from_slice(&c.uid.to_ne_bytes());
                    data[8..12].copy_from_slice(&c.gid.to_ne_bytes());
                }
                put_cmsg(&mut out, level, ty, &data);
            }
            _ => put_cmsg(&mut out, level, ty, data),
        }
        at += cmsg_align(len);
    }
    // As long as the host's: Linux counts each message's padding
    // (CMSG_SPACE) as far as the buffer holds it.
    out.resize(host.len(), 0);
    Ok(out)
}

/// A send that found a stream's connection shut raises SIGPIPE, unless
/// MSG_NOSIGNAL (Linux's sk_stream_error, unix_stream_sendmsg; datagram
/// and seqpacket sockets raise none).
fn sigpipe(ctx: &mut Ctx, f: &OpenFile, flags: i32, r: SysResult) -> SysResult {
    if r == Err(Errno::EPIPE) && flags & libc::MSG_NOSIGNAL == 0 && socket_type(f) == libc::SOCK_STREAM {
        ctx.t.raise(crate::kernel::signal::SigInfo::kernel(libc::SIGPIPE));
    }
    r
}

/// sendmsg of one guest msghdr: the bytes sent.
fn send_one(ctx: &Ctx, f: &OpenFile, m: &MsgHdr, flags: i32) -> SysResult {
    if m.iovlen > 1024 {
        return Err(Errno::EMSGSIZE);
    }
    if socket_type(f) != libc::SOCK_STREAM {
        autobind_for_passcred(f);
    }
    let name = if m.name != 0 && m.namelen > 0 {
        Some(host_addr(ctx, f, read_addr(ctx, m.name, m.namelen)?, Use::Reach)?)
    } else {
        None
    };
    if m.controllen > i32::MAX as u64 {
        return Err(Errno::ENOBUFS);
    }
    let control = if m.controllen > 0 { ctx.mem().read_bytes(m.control, m.controllen as usize)? } else { Vec::new() };
    let mut sent = Vec::new();
    let control = host_control(ctx, &control, &mut sent)?;
    let ranges = iov_ranges(ctx, m.iov, m.iovlen as u32, false)?;
    let addr = name.as_ref().map_or(&[][..], |n| &n.addr[..]);
    let checked = if domain_of(f) == libc::AF_NETLINK { Some(netlink_request(ctx, f, &ranges)?) } else { None };
    socket::sending(&sent);
    let r = ctx
        .t
        .block_in_host(|| match &checked {
            Some(data) => hostnet::sendmsg_copy(f.fd(), addr, data, &control, flags),
            None => hostnet::sendmsg_interruptible(f.fd(), addr, &ranges, &control, flags),
        })
        .map_err(|e| interrupted(f, true, e));
    if r.is_err() {
        socket::not_sent(&sent);
    }
    r.map(|n| n as u64)
}

const MSG_CMSG_CLOEXEC: i32 = 0x4000_0000;

/// recvmsg into one guest msghdr at `at`: the bytes received.
fn recv_one(ctx: &Ctx, f: &OpenFile, at: u64, m: &MsgHdr, flags: i32) -> SysResult {
    if m.iovlen > 1024 {
        return Err(Errno::EMSGSIZE);
    }
    let ranges = iov_ranges(ctx, m.iov, m.iovlen as u32, true)?;
    let mut name = [0u8; SOCKADDR_MAX];
    let want_name = m.name != 0;
    let mut control = vec![0u8; (m.controllen as usize).min(1 << 20)];
    let r = ctx
        .t
        .block_in_host(|| {
            hostnet::recvmsg_interruptible(
                f.fd(),
                if want_name { &mut name } else { &mut [] },
                &ranges,
                &mut control,
                flags | MSG_CMSG_CLOEXEC,
            )
        })
        .map_err(|e| interrupted(f, false, e))?;
    let mut out_flags = (r.flags & !MSG_CMSG_CLOEXEC) | (flags & MSG_CMSG_CLOEXEC);
    let mem = ctx.mem();
    if want_name {
        let guest = guest_addr(ctx, &name[..r.namelen.min(SOCKADDR_MAX)]);
        let n = (m.namelen as usize).min(guest.len());
        mem.write_bytes(m.name, &guest[..n])?;
        mem.write(at + 8, &(guest.len() as u32))?;
    }
    let controllen = if m.control != 0 && r.controllen > 0 {
        let guest = guest_control(ctx, f, &control[..r.controllen], flags & MSG_CMSG_CLOEXEC != 0, &mut out_flags)?;
        mem.write_bytes(m.control, &guest)?;
        guest.len()
    } else {
        0
    };
    mem.write(at + 40, &(controllen as u64))?;
    mem.write(at + 48, &out_flags)?;
    Ok(r.len as u64)
}

/// netlink's own message types (NLMSG_NOOP...NLMSG_OVERRUN) lie below
/// this; rtnetlink's start here, in fours: NEW, DEL, GET, SET.
const NLMSG_MIN_TYPE: u16 = 16;
/// sock_diag's requests that read: TCPDIAG_GETSOCK, DCCPDIAG_GETSOCK and
/// SOCK_DIAG_BY_FAMILY (SOCK_DESTROY, 21, closes another's socket).
const SOCK_DIAG_READS: [u16; 3] = [18, 19, 20];

/// Whether a netlink message of type `ty` to `protocol` only reads.
fn netlink_reads(protocol: i32, ty: u16) -> bool {
    ty < NLMSG_MIN_TYPE
        || match protocol {
            NETLINK_SOCK_DIAG => SOCK_DIAG_READS.contains(&ty),
            _ => ty % 4 == 2,
        }
}

/// A guest's message to the host's rtnetlink or sock_diag, copied (so the
/// guest cannot change it after the check) and checked: it may only read
/// (RTM_GET*, which getifaddrs, if_nameindex and `ip addr` send; sock_diag
/// dumps, which ss sends; netlink's own control messages). One that would
/// change the host's links, addresses, routes, rules or queues, or close a
/// socket (SOCK_DESTROY), is EPERM, whatever nomu's own privileges, as for
/// a process without CAP_NET_ADMIN: a guest changes nothing outside its
/// root.
pub(super) fn netlink_request(ctx: &Ctx, f: &OpenFile, ranges: &[GuestRange]) -> Result<Vec<u8>, Errno> {
    let protocol = match f.socket() {
        Some(s) => s.protocol,
        None => hostnet::getsockopt_int(f.fd(), libc::SOL_SOCKET, libc::SO_PROTOCOL).unwrap_or(NETLINK_ROUTE),
    };
    let mut data = Vec::new();
    for r in ranges {
        data.extend_from_slice(&ctx.mem().read_bytes(r.addr() as u64, r.len())?);
    }
    let mut at = 0;
    while at + 16 <= data.len() {
        let len = u32::from_ne_bytes(data[at..at + 4].try_into().unwrap()) as usize;
        let ty = u16::from_ne_bytes(data[at + 4..at + 6].try_into().unwrap());
        if !netlink_reads(protocol, ty) {
            return Err(Errno::EPERM);
        }
        if len < 16 {
            break; // malformed: the host refuses it
        }
        at += len.next_multiple_of(4);
    }
    Ok(data)
}

pub fn sys_sendto(
    ctx: &mut Ctx,
    fd: Fd,
    InBuf(buf): InBuf<2>,
    len: usize,
    Hex(flags): Hex<i32>,
    UserPtr(addr): UserPtr,
    alen: i32,
) -> SysResult {
    let f = socket_file(ctx, fd)?;
    if socket_type(&f) != libc::SOCK_STREAM {
        autobind_for_passcred(&f);
    }
    let len = len.min(super::io::MAX_RW_COUNT);
    let pin = ctx.mem().range(buf, len, false);
    let name = if addr != 0 {
        if alen < 0 {
            return Err(Errno::EINVAL);
        }
        Some(host_addr(ctx, &f, read_addr(ctx, addr, alen as u32)?, Use::Reach)?)
    } else {
        None
    };
    let ranges = match (&pin, len) {
        (_, 0) => Vec::new(),
        (Ok(p), _) if p.len() == len => vec![**p],
        _ => return Err(Errno::EFAULT),
    };
    let a = name.as_ref().map_or(&[][..], |n| &n.addr[..]);
    let checked = if domain_of(&f) == libc::AF_NETLINK { Some(netlink_request(ctx, &f, &ranges)?) } else { None };
    let r = ctx
        .t
        .block_in_host(|| match &checked {
            Some(data) => hostnet::sendmsg_copy(f.fd(), a, data, &[], flags),
            None => hostnet::sendmsg_interruptible(f.fd(), a, &ranges, &[], flags),
        })
        .map_err(|e| interrupted(&f, true, e))
        .map(|n| n as u64);
    sigpipe(ctx, &f, flags, r)
}

pub fn sys_recvfrom(
    ctx: &mut Ctx,
    fd: Fd,
    OutBuf(buf): OutBuf,
    len: usize,
    Hex(flags): Hex<i32>,
    UserPtr(addr): UserPtr,
    UserPtr(alen): UserPtr,
) -> SysResult {
    let f = socket_file(ctx, fd)?;
    let len = len.min(super::io::MAX_RW_COUNT);
    let pin = if len > 0 { Some(ctx.mem().full_range(buf, len, true)?) } else { None };
    let ranges: Vec<_> = pin.iter().map(|p| **p).collect();
    let mut name = [0u8; SOCKADDR_MAX];
    let want_name = addr != 0;
    let r = ctx
        .t
        .block_in_host(|| {
            hostnet::recvmsg_interruptible(f.fd(), if want_name { &mut name } else { &mut [] }, &ranges, &mut [], flags)
        })
        .map_err(|e| interrupted(&f, false, e))?;
    if want_name && r.namelen > 0 {
        let guest = guest_addr(ctx, &name[..r.namelen.min(SOCKADDR_MAX)]);
        put_addr(ctx, &guest, addr, alen)?;
    } else if want_name {
        ctx.mem().write(alen, &0u32)?;
    }
    Ok(r.len as u64)
}

pub fn sys_sendmsg(ctx: &mut Ctx, fd: Fd, UserPtr(msg): UserPtr, Hex(flags): Hex<u32>) -> SysResult {
    let f = socket_file(ctx, fd)?;
    let m = MsgHdr::read(ctx, msg)?;
    let r = send_one(ctx, &f, &m, flags as i32);
    sigpipe(ctx, &f, flags as i32, r)
}

pub fn sys_recvmsg(ctx: &mut Ctx, fd: Fd, UserPtr(msg): UserPtr, Hex(flags): Hex<u32>) -> SysResult {
    let f = socket_file(ctx, fd)?;
    let m = MsgHdr::read(ctx, msg)?;
    recv_one(ctx, &f, msg, &m, flags as i32)
}

const UIO_MAXIOV: u32 = 1024;
const MSG_WAITFORONE: i32 = 0x10000;

pub fn sys_sendmmsg(ctx: &mut Ctx, fd: Fd, UserPtr(vec): UserPtr, vlen: u32, Hex(flags): Hex<u32>) -> SysResult {
    let f = socket_file(ctx, fd)?;
    let vlen = vlen.min(UIO_MAXIOV);
    let mut done = 0u32;
    while done < vlen {
        let at = vec + u64::from(done) * MMSGHDR_LEN;
        let r = MsgHdr::read(ctx, at).and_then(|m| send_one(ctx, &f, &m, flags as i32));
        let r = sigpipe(ctx, &f, flags as i32, r);
        match r {
            Ok(n) => ctx.mem().write(at + MSGHDR_LEN, &(n as u32))?,
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
        done += 1;
    }
    Ok(u64::from(done))
}

pub fn sys_recvmmsg(
    ctx: &mut Ctx,
    fd: Fd,
    UserPtr(vec): UserPtr,
    vlen: u32,
    Hex(flags): Hex<u32>,
    UserPtr(timeout): UserPtr,
) -> SysResult {
    let f = socket_file(ctx, fd)?;
    let deadline = if timeout != 0 {
        let ts: libc::timespec = ctx.mem().read(timeout)?;
        if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
            return Err(Errno::EINVAL);
        }
        Some(std::time::Instant::now() + std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    } else {
        None
    };
    let vlen = vlen.min(UIO_MAXIOV);
    let mut flags = flags as i32;
    let mut done = 0u32;
    while done < vlen {
        let at = vec + u64::from(done) * MMSGHDR_LEN;
        let r = MsgHdr::read(ctx, at).and_then(|m| recv_one(ctx, &f, at, &m, flags & !MSG_WAITFORONE));
        match r {
            Ok(n) => ctx.mem().write(at + MSGHDR_LEN, &(n as u32))?,
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
        done += 1;
        if flags & MSG_WAITFORONE != 0 {
            flags |= libc::MSG_DONTWAIT;
        }
        if let Some(d) = deadline {
            let now = std::time::Instant::now();
            let left = d.saturating_duration_since(now);
            let ts = libc::timespec { tv_sec: left.as_secs() as i64, tv_nsec: left.subsec_nanos() as i64 };
            ctx.mem().write(timeout, &ts)?;
            if left.is_zero() {
                break;
            }
        }
    }
    Ok(u64::from(done))
}

pub fn sys_setsockopt(ctx: &mut Ctx, fd: Fd, level: i32, name: i32, UserPtr(val): UserPtr, len: i32) -> SysResult {
    let f = socket_file(ctx, fd)?;
    if len < 0 {
        return Err(Errno::EINVAL);
    }
    if changes_host_network(level, name) {
        return Err(Errno::EPERM);
    }
    let value = ctx.mem().read_bytes(val, (len as usize).min(1 << 16))?;
    hostnet::setsockopt(f.fd(), level, name, &value)?;
    if let (libc::SOL_SOCKET, libc::SO_PASSCRED, Some(s)) = (level, name, f.socket()) {
        let on = value.get(..4).is_some_and(|v| v != [0; 4]);
        s.passcred.store(on, Relaxed);
    }
    Ok(0)
}

/// The socket options that change the host's network rather than the
/// socket (the host would allow them to a root nomu): the netfilter
/// tables of iptables, ip6tables, arptables and ebtables (their SET
/// commands), multicast routing (MRT_*, MRT6_*) and IPVS. EPERM, as
/// without CAP_NET_ADMIN: a guest changes nothing outside its root.
fn changes_host_network(level: i32, name: i32) -> bool {
    const IPT_SO_SET: std::ops::RangeInclusive<i32> = 64..=65;
    const ARPT_SO_SET: std::ops::RangeInclusive<i32> = 96..=97;
    const EBT_SO_SET: std::ops::RangeInclusive<i32> = 128..=129;
    const MRT: std::ops::RangeInclusive<i32> = 200..=215;
    const IP_VS_SO_SET: std::ops::RangeInclusive<i32> = 1152..=1167;
    matches!(level, libc::IPPROTO_IP | libc::IPPROTO_IPV6)
        && [IPT_SO_SET, ARPT_SO_SET, EBT_SO_SET, MRT, IP_VS_SO_SET].iter().any(|r| r.contains(&name))
}

/// Linux's autobind before a send or connect of an unnamed AF_UNIX socket
/// with SO_PASSCRED: done by nomu, so the name is under its prefix (the
/// host's would be one other guests cannot reach).
fn autobind_for_passcred(f: &OpenFile) {
    let Some(s) = f.socket().filter(|s| s.domain == libc::AF_UNIX) else { return };
    if s.passcred.load(Relaxed) && !s.named.load(Relaxed) {
        let mut buf = [0u8; SOCKADDR_MAX];
        let unnamed = hostnet::getsockname(f.fd(), &mut buf).is_ok_and(|n| n <= SUN_PATH_OFFSET);
        if !unnamed || autobind(f).is_ok() {
            s.named.store(true, Relaxed);
        }
    }
}

pub fn sys_getsockopt(
    ctx: &mut Ctx,
    fd: Fd,
    level: i32,
    name: i32,
    UserPtr(val): UserPtr,
    UserPtr(len): UserPtr,
) -> SysResult {
    let f = socket_file(ctx, fd)?;
    let room: i32 = ctx.mem().read(len)?;
    if room < 0 {
        return Err(Errno::EINVAL);
    }
    if level == libc::SOL_SOCKET && name == libc::SO_PEERCRED {
        // The host's would name nomu: the peer's guest pid and ids.
        let mut host = [0u8; 12];
        hostnet::getsockopt(f.fd(), level, name, &mut host)?;
        let peer = f.socket().and_then(|s| *s.peer.lock().unwrap());
        let mut out = host;
        if let Some(p) = peer {
            out[0..4].copy_from_slice(&p.pid.to_ne_bytes());
            out[4..8].copy_from_slice(&p.uid.to_ne_bytes());
            out[8..12].copy_from_slice(&p.gid.to_ne_bytes());
        }
        let n = (room as usize).min(12);
        ctx.mem().write_bytes(val, &out[..n])?;
        ctx.mem().write(len, &(n as u32))?;
        return Ok(0);
    }
    let mut value = vec![0u8; (room as usize).min(1 << 16)];
    let n = hostnet::getsockopt(f.fd(), level, name, &mut value)?;
    let n = n.min(value.len());
    ctx.mem().write_bytes(val, &value[..n])?;
    ctx.mem().write(len, &(n as u32))?;
    Ok(0)
}
