//! Host socket calls, wrapped safe. A guest socket is a host socket behind
//! its guest descriptor: the host kernel buffers, queues and wakes; nomu
//! translates addresses (fs::socket) and descriptors in control messages.
//!
//! Calls that may wait for a peer (connect, accept, send, receive) go
//! through [`super::blocking`], so a kick ends them as it ends a pipe's.
//! Addresses and control messages are in nomu's own buffers; data moves
//! straight between the host and checked guest ranges.

use super::physmem::GuestRange;
use super::syscall::{args, syscall, syscall_retry};
use crate::abi::errno::Errno;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

type R<T> = Result<T, Errno>;

fn raw(fd: BorrowedFd) -> u64 {
    fd.as_raw_fd() as u64
}

fn owned(fd: usize) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful host call that creates a
    // new descriptor, which nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

/// Takes ownership of a descriptor the host just passed in a control
/// message (SCM_RIGHTS): nothing else in nomu knows its number.
pub fn adopt_received(fd: RawFd) -> OwnedFd {
    // SAFETY: the host installed `fd` in this process for the message just
    // received; it is this caller's alone.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// socket(2); the host descriptor is always close-on-exec.
pub fn socket(domain: i32, ty: i32, protocol: i32) -> R<OwnedFd> {
    let ty = (ty | libc::SOCK_CLOEXEC) as u64;
    // SAFETY: no pointers.
    let fd = unsafe { syscall(libc::SYS_socket, args([domain as u64, ty, protocol as u64])) }?;
    Ok(owned(fd))
}

/// socketpair(2); both close-on-exec on the host.
pub fn socketpair(domain: i32, ty: i32, protocol: i32) -> R<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    let ty = (ty | libc::SOCK_CLOEXEC) as u64;
    // SAFETY: `fds` is two writable ints.
    unsafe { syscall(libc::SYS_socketpair, args([domain as u64, ty, protocol as u64, fds.as_mut_ptr() as u64])) }?;
    Ok((owned(fds[0] as usize), owned(fds[1] as usize)))
}

/// bind(2) to an address in nomu's memory.
pub fn bind(fd: BorrowedFd, addr: &[u8]) -> R<()> {
    // SAFETY: `addr` is readable for its length.
    unsafe { syscall(libc::SYS_bind, args([raw(fd), addr.as_ptr() as u64, addr.len() as u64])) }.map(drop)
}

/// connect(2), which may wait for the peer: a kick ends it with EINTR.
pub fn connect_interruptible(fd: BorrowedFd, addr: &[u8]) -> R<()> {
    // SAFETY: `addr` is readable for its length.
    unsafe { super::blocking::syscall(libc::SYS_connect, args([raw(fd), addr.as_ptr() as u64, addr.len() as u64])) }
        .map(drop)
}

pub fn listen(fd: BorrowedFd, backlog: i32) -> R<()> {
    // SAFETY: no pointers.
    unsafe { syscall(libc::SYS_listen, args([raw(fd), backlog as u64])) }.map(drop)
}

/// accept4(2), which may wait: the peer's address into `addr` (its full
/// length returned), the new descriptor close-on-exec on the host.
pub fn accept_interruptible(fd: BorrowedFd, addr: &mut [u8], flags: i32) -> R<(OwnedFd, usize)> {
    let mut len = addr.len() as u32;
    let flags = (flags | libc::SOCK_CLOEXEC) as u64;
    let call = args([raw(fd), addr.as_mut_ptr() as u64, &mut len as *mut u32 as u64, flags]);
    // SAFETY: `addr` is writable for `len` bytes, `len` a writable u32.
    let new = unsafe { super::blocking::syscall(libc::SYS_accept4, call) }?;
    Ok((owned(new), len as usize))
}

fn name_call(nr: libc::c_long, fd: BorrowedFd, addr: &mut [u8]) -> R<usize> {
    let mut len = addr.len() as u32;
    // SAFETY: `addr` is writable for `len` bytes, `len` a writable u32.
    unsafe { syscall(nr, args([raw(fd), addr.as_mut_ptr() as u64, &mut len as *mut u32 as u64])) }?;
    Ok(len as usize)
}

/// getsockname(2): the address's full length.
pub fn getsockname(fd: BorrowedFd, addr: &mut [u8]) -> R<usize> {
    name_call(libc::SYS_getsockname, fd, addr)
}

/// getpeername(2): the address's full length.
pub fn getpeername(fd: BorrowedFd, addr: &mut [u8]) -> R<usize> {
    name_call(libc::SYS_getpeername, fd, addr)
}

pub fn shutdown(fd: BorrowedFd, how: i32) -> R<()> {
    // SAFETY: no pointers.
    unsafe { syscall(libc::SYS_shutdown, args([raw(fd), how as u64])) }.map(drop)
}

pub fn setsockopt(fd: BorrowedFd, level: i32, name: i32, value: &[u8]) -> R<()> {
    let call = args([raw(fd), level as u64, name as u64, value.as_ptr() as u64, value.len() as u64]);
    // SAFETY: `value` is readable for its length.
    unsafe { syscall(libc::SYS_setsockopt, call) }.map(drop)
}

/// getsockopt(2) into `value`: the length the host gives back.
pub fn getsockopt(fd: BorrowedFd, level: i32, name: i32, value: &mut [u8]) -> R<usize> {
    let mut len = value.len() as u32;
    let call = args([raw(fd), level as u64, name as u64, value.as_mut_ptr() as u64, &mut len as *mut u32 as u64]);
    // SAFETY: `value` is writable for `len` bytes, `len` a writable u32.
    unsafe { syscall(libc::SYS_getsockopt, call) }?;
    Ok(len as usize)
}

/// An int-valued socket option.
pub fn getsockopt_int(fd: BorrowedFd, level: i32, name: i32) -> R<i32> {
    let mut v = [0u8; 4];
    getsockopt(fd, level, name, &mut v)?;
    Ok(i32::from_ne_bytes(v))
}

fn iovecs(bufs: &[GuestRange]) -> Vec<libc::iovec> {
    bufs.iter().map(|b| libc::iovec { iov_base: b.ptr(), iov_len: b.len() }).collect()
}

/// sendmsg(2) of checked guest ranges to `name` (empty: none) with control
/// messages `control` (host descriptors already in place). MSG_NOSIGNAL is
/// always added: SIGPIPE is the guest's, raised by nomu on EPIPE.
pub fn sendmsg_interruptible(fd: BorrowedFd, name: &[u8], bufs: &[GuestRange], control: &[u8], flags: i32) -> R<usize> {
    let iov = iovecs(bufs);
    // SAFETY: an all-zero msghdr is valid (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    if !name.is_empty() {
        msg.msg_name = name.as_ptr() as *mut libc::c_void;
        msg.msg_namelen = name.len() as u32;
    }
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = iov.len();
    if !control.is_empty() {
        msg.msg_control = control.as_ptr() as *mut libc::c_void;
        msg.msg_controllen = control.len();
    }
    let flags = (flags | libc::MSG_NOSIGNAL) as u64;
    // SAFETY: every pointer in `msg` is to a live buffer of the length
    // given (guest ranges are checked and pinned by the caller); the host
    // only reads them.
    unsafe { super::blocking::syscall(libc::SYS_sendmsg, args([raw(fd), &msg as *const libc::msghdr as u64, flags])) }
}

/// sendmsg(2) of nomu's own copy of a message (`data`), to `name` (empty:
/// none), with control messages `control`: for what nomu checks before
/// the host sees it, which the guest must not change after the check.
pub fn sendmsg_copy(fd: BorrowedFd, name: &[u8], data: &[u8], control: &[u8], flags: i32) -> R<usize> {
    let iov = libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: data.len() };
    // SAFETY: an all-zero msghdr is valid (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    if !name.is_empty() {
        msg.msg_name = name.as_ptr() as *mut libc::c_void;
        msg.msg_namelen = name.len() as u32;
    }
    msg.msg_iov = &iov as *const libc::iovec as *mut libc::iovec;
    msg.msg_iovlen = 1;
    if !control.is_empty() {
        msg.msg_control = control.as_ptr() as *mut libc::c_void;
        msg.msg_controllen = control.len();
    }
    let flags = (flags | libc::MSG_NOSIGNAL) as u64;
    // SAFETY: every pointer in `msg` is to a live buffer of nomu's of the
    // length given; the host only reads them.
    unsafe { super::blocking::syscall(libc::SYS_sendmsg, args([raw(fd), &msg as *const libc::msghdr as u64, flags])) }
}

/// What recvmsg(2) gave besides the data.
pub struct Received {
    pub len: usize,
    pub namelen: usize,
    pub controllen: usize,
    pub flags: i32,
}

/// recvmsg(2) into checked guest ranges; the sender's address into `name`
/// and control messages into `control` (nomu's buffers).
pub fn recvmsg_interruptible(
    fd: BorrowedFd,
    name: &mut [u8],
    bufs: &[GuestRange],
    control: &mut [u8],
    flags: i32,
) -> R<Received> {
    let iov = iovecs(bufs);
    // SAFETY: an all-zero msghdr is valid (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    if !name.is_empty() {
        msg.msg_name = name.as_mut_ptr() as *mut libc::c_void;
        msg.msg_namelen = name.len() as u32;
    }
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = iov.len();
    if !control.is_empty() {
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = control.len();
    }
    // SAFETY: every pointer in `msg` is to a live writable buffer of the
    // length given (guest ranges are checked and pinned by the caller).
    let len = unsafe {
        super::blocking::syscall(libc::SYS_recvmsg, args([raw(fd), &mut msg as *mut libc::msghdr as u64, flags as u64]))
    }?;
    Ok(Received { len, namelen: msg.msg_namelen as usize, controllen: msg.msg_controllen, flags: msg.msg_flags })
}

/// Whether two descriptors of this process are the same open file
/// description (kcmp KCMP_FILE).
pub fn same_file(a: BorrowedFd, b: BorrowedFd) -> bool {
    const KCMP_FILE: u64 = 0;
    let pid = std::process::id() as u64;
    // SAFETY: no pointers.
    let r = unsafe { syscall_retry(libc::SYS_kcmp, args([pid, pid, KCMP_FILE, raw(a), raw(b)])) };
    r == Ok(0)
}

/// This process's host pid (what the host reports as any guest's).
pub fn host_pid() -> u32 {
    std::process::id()
}

/// The inode of the socket at the other end of a connected AF_UNIX socket
/// whose own inode is `ino`, asked of the host's sock_diag (UNIX_DIAG_PEER).
pub fn unix_peer_inode(ino: u32) -> Option<u32> {
    const NETLINK_SOCK_DIAG: i32 = 4;
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const NLM_F_REQUEST: u16 = 1;
    const UDIAG_SHOW_PEER: u32 = 4;
    const UNIX_DIAG_PEER: u16 = 2;
    let nl = socket(libc::AF_NETLINK, libc::SOCK_DGRAM, NETLINK_SOCK_DIAG).ok()?;
    // struct nlmsghdr (16 bytes), then struct unix_diag_req (24 bytes).
    let mut req = Vec::with_capacity(40);
    req.extend_from_slice(&40u32.to_ne_bytes());
    req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    req.extend_from_slice(&[0u8; 8]); // seq, pid
    req.extend_from_slice(&[libc::AF_UNIX as u8, 0, 0, 0]);
    req.extend_from_slice(&u32::MAX.to_ne_bytes()); // every state
    req.extend_from_slice(&ino.to_ne_bytes());
    req.extend_from_slice(&UDIAG_SHOW_PEER.to_ne_bytes());
    req.extend_from_slice(&[0xff; 8]); // no cookie
    let fd = std::os::fd::AsFd::as_fd(&nl);
    // SAFETY: `req` is readable for its length; no other pointers.
    unsafe { syscall(libc::SYS_sendto, args([raw(fd), req.as_ptr() as u64, req.len() as u64, 0, 0, 0])) }.ok()?;
    let mut buf = [0u8; 512];
    // SAFETY: `buf` is writable for its length.
    let n = unsafe { syscall_retry(libc::SYS_recvfrom, args([raw(fd), buf.as_mut_ptr() as u64, 512, 0, 0, 0])) };
    crate::host::fs::close(nl);
    let buf = &buf[..n.ok()?];
    // struct nlmsghdr, struct unix_diag_msg (16 bytes), then attributes.
    let msg_len = (u32::from_ne_bytes(buf.get(0..4)?.try_into().ok()?) as usize).min(buf.len());
    if u16::from_ne_bytes(buf.get(4..6)?.try_into().ok()?) != SOCK_DIAG_BY_FAMILY {
        return None;
    }
    let mut at = 32;
    while at + 4 <= msg_len {
        let len = u16::from_ne_bytes(buf[at..at + 2].try_into().ok()?) as usize;
        let ty = u16::from_ne_bytes(buf[at + 2..at + 4].try_into().ok()?);
        if len < 4 {
            return None;
        }
        if ty == UNIX_DIAG_PEER && len >= 8 {
            return Some(u32::from_ne_bytes(buf.get(at + 4..at + 8)?.try_into().ok()?));
        }
        at += len.next_multiple_of(4);
    }
    None
}
