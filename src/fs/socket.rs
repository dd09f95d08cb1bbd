//! What nomu keeps beside a guest's host socket: the names it gave AF_UNIX
//! sockets on the host, and the descriptions in flight in SCM_RIGHTS
//! messages.
//!
//! AF_UNIX names are translated both ways, so a guest sees exactly its own:
//! - a path is resolved inside the root like any other (fs::path): bind
//!   creates the socket in its parent directory through that directory's
//!   host descriptor (`/proc/self/fd/N/NAME`, N kept open while the socket
//!   is bound, so the host's name is unique), connect and sendto reach the
//!   resolved socket file through an O_PATH descriptor of it. The guest's
//!   own path is what getsockname, getpeername, accept and recvfrom give.
//! - an abstract name gets this nomu's private prefix on the host, so it
//!   never meets the host's abstract names (nor another nomu's), and loses
//!   it on the way back. A name too long to take the prefix (Linux allows
//!   107 bytes) is a hash of it on the host, remembered for the way back.

use crate::host::net as hostnet;
use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex, OnceLock};

use super::file::OpenFile;

/// sizeof(sa_family_t): where sun_path starts.
pub const SUN_PATH_OFFSET: usize = 2;
/// sizeof(struct sockaddr_un).
pub const SOCKADDR_UN_LEN: usize = 110;

/// The guest credentials a socket's peer had when the connection was made
/// (SO_PEERCRED), when nomu knows them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PeerCred {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

/// nomu's state for a guest socket.
pub struct Socket {
    pub domain: i32,
    /// SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET, SOCK_RAW (no flags).
    pub ty: i32,
    pub protocol: i32,
    /// An AF_UNIX path bound on the host: the host name's key in the names
    /// table and the parent directory's descriptor that keeps it unique.
    bound: Mutex<Option<(Vec<u8>, OwnedFd)>>,
    /// Its peer's guest credentials, when nomu knows them.
    pub peer: Mutex<Option<PeerCred>>,
    /// Its host inode, while connecting credentials are kept under it.
    connecting: Mutex<Option<u64>>,
    /// Its host name, while a listener's credentials are kept under it.
    listening: Mutex<Option<Vec<u8>>>,
    /// SO_PASSCRED is on: Linux names it (autobind) before a datagram
    /// send or a stream connect, so the peer can tell who sent.
    pub passcred: std::sync::atomic::AtomicBool,
    /// It has a name (bound, or autobound by nomu).
    pub named: std::sync::atomic::AtomicBool,
}

impl Socket {
    pub fn new(domain: i32, ty: i32, protocol: i32) -> Socket {
        Socket {
            domain,
            ty,
            protocol,
            bound: Mutex::new(None),
            peer: Mutex::new(None),
            connecting: Mutex::new(None),
            listening: Mutex::new(None),
            passcred: std::sync::atomic::AtomicBool::new(false),
            named: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// It is about to connect with `cred` (Linux's peer credentials of a
    /// connection are the connector's at connect): kept under its host
    /// inode, where the accepting side finds them.
    pub fn connecting(&self, ino: u64, cred: PeerCred) {
        creds().lock().unwrap().connectors.insert(ino, cred);
        *self.connecting.lock().unwrap() = Some(ino);
    }

    /// It listens, with `cred`, under host address `name`: what its
    /// connections' other ends see as their peer's.
    pub fn listening(&self, name: Vec<u8>, cred: PeerCred) {
        creds().lock().unwrap().listeners.insert(name.clone(), cred);
        *self.listening.lock().unwrap() = Some(name);
    }

    /// The socket is now bound on the host as `host` (a sun_path), which
    /// the guest calls `guest`; `dir` is the directory descriptor in it.
    pub fn bound_as(&self, host: Vec<u8>, guest: Vec<u8>, dir: OwnedFd) {
        names().lock().unwrap().insert(host.clone(), guest);
        *self.bound.lock().unwrap() = Some((host, dir));
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        let mut c = creds().lock().unwrap();
        if let Some(ino) = self.connecting.get_mut().unwrap().take() {
            c.connectors.remove(&ino);
        }
        if let Some(name) = self.listening.get_mut().unwrap().take() {
            c.listeners.remove(&name);
        }
        drop(c);
        if let Some((host, dir)) = self.bound.get_mut().unwrap().take() {
            names().lock().unwrap().remove(&host);
            crate::host::fs::close(dir);
        }
    }
}

/// The guest credentials of connecting and listening AF_UNIX sockets.
#[derive(Default)]
pub struct Creds {
    connectors: HashMap<u64, PeerCred>,
    listeners: HashMap<Vec<u8>, PeerCred>,
}

fn creds() -> &'static Mutex<Creds> {
    static CREDS: OnceLock<Mutex<Creds>> = OnceLock::new();
    CREDS.get_or_init(|| Mutex::new(Creds::default()))
}

/// The credentials of the guest socket with host inode `ino` had when it
/// connected.
pub fn connector_cred(ino: u64) -> Option<PeerCred> {
    creds().lock().unwrap().connectors.get(&ino).copied()
}

/// The credentials of the guest listener at host address `name`.
pub fn listener_cred(name: &[u8]) -> Option<PeerCred> {
    creds().lock().unwrap().listeners.get(name).copied()
}

/// Host sun_path of a bound guest socket -> the guest's sun_path.
fn names() -> &'static Mutex<HashMap<Vec<u8>, Vec<u8>>> {
    static NAMES: OnceLock<Mutex<HashMap<Vec<u8>, Vec<u8>>>> = OnceLock::new();
    NAMES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The prefix this nomu gives abstract names on the host (after the NUL).
fn abstract_prefix() -> &'static [u8] {
    static PREFIX: OnceLock<Vec<u8>> = OnceLock::new();
    PREFIX.get_or_init(|| format!("nomu.{}/", hostnet::host_pid()).into_bytes())
}

/// The longest abstract name: sun_path's bytes after its leading NUL.
const ABSTRACT_MAX: usize = SOCKADDR_UN_LEN - SUN_PATH_OFFSET - 1;

/// Guest abstract names too long to take the prefix, by the name (after
/// the prefix) they have on the host instead: what the way back gives.
/// At most [`LONG_NAMES_MAX`] are remembered (a guest making names without
/// end would grow it); one past that reads back as its host form.
fn long_names() -> &'static Mutex<HashMap<Vec<u8>, Vec<u8>>> {
    static NAMES: OnceLock<Mutex<HashMap<Vec<u8>, Vec<u8>>>> = OnceLock::new();
    NAMES.get_or_init(|| Mutex::new(HashMap::new()))
}

const LONG_NAMES_MAX: usize = 4096;

/// A guest abstract name (the bytes after sun_path's NUL) as the host's:
/// the prefix and the name, or, where the two do not fit, the prefix and
/// `~` with a 64-bit hash of the name (the same name always the same in
/// one nomu).
pub fn host_abstract(name: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; SUN_PATH_OFFSET];
    out[..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
    out.push(0);
    let prefix = abstract_prefix();
    out.extend_from_slice(prefix);
    if prefix.len() + name.len() <= ABSTRACT_MAX {
        out.extend_from_slice(name);
        return out;
    }
    // Keyed at random once per nomu: a guest cannot make two names meet.
    static KEYS: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    let hash = std::hash::BuildHasher::hash_one(KEYS.get_or_init(Default::default), name);
    let short = format!("~{hash:016x}").into_bytes();
    let mut names = long_names().lock().unwrap();
    if names.len() < LONG_NAMES_MAX || names.contains_key(&short) {
        names.insert(short.clone(), name.to_vec());
    }
    out.extend_from_slice(&short);
    out
}

/// A host AF_UNIX address (sockaddr_un of `len` bytes) as the guest sees
/// it: nomu's abstract prefix dropped, a bound path's guest name back, a
/// path of the host inside the root made a guest path.
pub fn guest_unix_addr(host: &[u8], root: &super::path::Root) -> Vec<u8> {
    if host.len() <= SUN_PATH_OFFSET {
        return host.to_vec();
    }
    let (family, path) = host.split_at(SUN_PATH_OFFSET);
    let mut out = family.to_vec();
    if path[0] == 0 {
        match path[1..].strip_prefix(abstract_prefix()) {
            Some(name) => {
                out.push(0);
                // Only a hashed name (`~` and 16 digits) is looked up.
                let long = (name.len() == 17 && name[0] == b'~')
                    .then(|| long_names().lock().unwrap().get(name).cloned())
                    .flatten();
                out.extend_from_slice(long.as_deref().unwrap_or(name));
            }
            None => out.extend_from_slice(path),
        }
        return out;
    }
    // A path: up to its NUL, which Linux adds back when there is room.
    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
    let p = &path[..end];
    if let Some(guest) = names().lock().unwrap().get(p) {
        out.extend_from_slice(guest);
    } else if let Some(guest) = root.strip_host_prefix(p) {
        out.extend_from_slice(&guest);
    } else {
        out.extend_from_slice(p);
    }
    out.push(0);
    out
}

/// Descriptions sent in SCM_RIGHTS messages and not yet received: the
/// receiver finds the very description sent (an eventfd's counter, a /proc
/// file) by comparing the host descriptor it got with theirs (kcmp).
///
/// One nomu keeps state for (an eventfd, epoll, signalfd, socket, /proc
/// file) is held until it is received: its host descriptor alone would not
/// be it. Any other is the host's open file description and nothing more,
/// which the host keeps in flight itself: it is only watched (Weak), so a
/// message never received does not keep a pipe's end open for good; if
/// every guest descriptor of it closed before it arrived, the receiver
/// gets the host's description in a new OpenFile, which is the same file.
struct InFlight {
    file: std::sync::Weak<OpenFile>,
    /// The description itself, for one nomu keeps state for.
    _held: Option<Arc<OpenFile>>,
}

fn in_flight() -> &'static Mutex<Vec<InFlight>> {
    static IN_FLIGHT: OnceLock<Mutex<Vec<InFlight>>> = OnceLock::new();
    IN_FLIGHT.get_or_init(|| Mutex::new(Vec::new()))
}

/// Whether nomu keeps state for `f` that its host descriptor lacks.
fn has_nomu_state(f: &OpenFile) -> bool {
    f.object.is_some() || f.proc.is_some()
}

/// `files` are about to be sent.
pub fn sending(files: &[Arc<OpenFile>]) {
    let mut list = in_flight().lock().unwrap();
    list.retain(|e| e.file.strong_count() > 0);
    for f in files {
        let held = has_nomu_state(f).then(|| f.clone());
        list.push(InFlight { file: Arc::downgrade(f), _held: held });
    }
}

/// `files` were not sent after all (the send failed).
pub fn not_sent(files: &[Arc<OpenFile>]) {
    let mut list = in_flight().lock().unwrap();
    for f in files {
        if let Some(i) = list.iter().position(|e| std::ptr::eq(e.file.as_ptr(), Arc::as_ptr(f))) {
            list.swap_remove(i);
        }
    }
}

/// The description a received host descriptor is, if a guest sent it and
/// it is still open: taken out of the in-flight list.
pub fn received(fd: BorrowedFd) -> Option<Arc<OpenFile>> {
    let mut list = in_flight().lock().unwrap();
    list.retain(|e| e.file.strong_count() > 0);
    let i = list.iter().position(|e| e.file.upgrade().is_some_and(|f| hostnet::same_file(fd, f.fd().as_fd())))?;
    list.swap_remove(i).file.upgrade()
}
