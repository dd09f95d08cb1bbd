//! nomu's /proc: what programs read about processes and the system, in
//! Linux's formats. Every path under /proc is nomu's (the host's own /proc
//! is never reached through it): directories are listed from the process
//! and descriptor tables, files are generated when opened and again when
//! read from their start (as Linux's seq files are), and every entry has an
//! inode number of its own on /proc's own device, so programs that walk
//! the tree (find, du, fts) see one file system with no loops in it.
//!
//! - /proc/PID (and self): cmdline, comm, cwd, environ, exe, fd/, fdinfo/,
//!   maps, mountinfo, mounts, root, stat, statm, status, task/ (a directory
//!   per thread, with the thread's comm, stat and status: Linux's has the
//!   process's other entries too);
//! - /proc: cpuinfo (the host's), loadavg, meminfo, mounts, self, stat
//!   (the host's CPU counters), uptime, sys/kernel/{hostname, osrelease,
//!   ostype, pid_max}, sysvipc/{msg, sem, shm} (nomu's IPC objects).

mod maps;
mod mounts;
mod system;

use crate::abi::errno::Errno;
use crate::fs::file::OpenFile;
use crate::host::fs as hostfs;
use crate::kernel::cred::{Cred, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_SYS_ADMIN};
use crate::kernel::process::Process;
use crate::kernel::waiter::Waiting;
use crate::kernel::Kernel;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

pub use mounts::{mount_id, proc_mount_id};

const DIR: u32 = libc::S_IFDIR;
const REG: u32 = libc::S_IFREG;
const LNK: u32 = libc::S_IFLNK;

/// A system-wide entry (a process's directory aside).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Top {
    Root,
    SelfLink,
    Mounts,
    BuddyInfo,
    CpuInfo,
    LoadAvg,
    MemInfo,
    PageTypeInfo,
    Stat,
    Uptime,
    Sys,
    SysKernel,
    Hostname,
    OsRelease,
    OsType,
    PidMax,
    SysVm,
    OvercommitMemory,
    DropCaches,
    SysvIpc,
    SysvIpcMsg,
    SysvIpcSem,
    SysvIpcShm,
}

struct TopEntry {
    name: &'static str,
    node: Top,
    parent: Top,
    mode: u32,
}

const fn top(name: &'static str, node: Top, parent: Top, mode: u32) -> TopEntry {
    TopEntry { name, node, parent, mode }
}

/// /proc's own entries, each under its parent directory.
const TOP: [TopEntry; 22] = [
    top("buddyinfo", Top::BuddyInfo, Top::Root, REG | 0o444),
    top("cpuinfo", Top::CpuInfo, Top::Root, REG | 0o444),
    top("loadavg", Top::LoadAvg, Top::Root, REG | 0o444),
    top("meminfo", Top::MemInfo, Top::Root, REG | 0o444),
    top("mounts", Top::Mounts, Top::Root, LNK | 0o777),
    top("pagetypeinfo", Top::PageTypeInfo, Top::Root, REG | 0o400),
    top("self", Top::SelfLink, Top::Root, LNK | 0o777),
    top("stat", Top::Stat, Top::Root, REG | 0o444),
    top("sys", Top::Sys, Top::Root, DIR | 0o555),
    top("uptime", Top::Uptime, Top::Root, REG | 0o444),
    top("kernel", Top::SysKernel, Top::Sys, DIR | 0o555),
    top("hostname", Top::Hostname, Top::SysKernel, REG | 0o644),
    top("osrelease", Top::OsRelease, Top::SysKernel, REG | 0o444),
    top("ostype", Top::OsType, Top::SysKernel, REG | 0o444),
    top("pid_max", Top::PidMax, Top::SysKernel, REG | 0o644),
    top("vm", Top::SysVm, Top::Sys, DIR | 0o555),
    top("overcommit_memory", Top::OvercommitMemory, Top::SysVm, REG | 0o644),
    top("drop_caches", Top::DropCaches, Top::SysVm, REG | 0o200),
    top("sysvipc", Top::SysvIpc, Top::Root, DIR | 0o555),
    top("msg", Top::SysvIpcMsg, Top::SysvIpc, REG | 0o444),
    top("sem", Top::SysvIpcSem, Top::SysvIpc, REG | 0o444),
    top("shm", Top::SysvIpcShm, Top::SysvIpc, REG | 0o444),
];

/// What /proc/mounts points to.
const MOUNTS_LINK: &[u8] = b"self/mounts";

/// An entry of a process's directory (Dir: the directory itself).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PidEntry {
    Dir,
    Cmdline,
    Comm,
    Cwd,
    Environ,
    Exe,
    Fd,
    FdInfo,
    Limits,
    Maps,
    MountInfo,
    Mounts,
    Root,
    Stat,
    Statm,
    Status,
    Task,
}

/// A process's directory, with Linux's modes.
const PID_ENTRIES: [(&str, PidEntry, u32); 16] = [
    ("cmdline", PidEntry::Cmdline, REG | 0o444),
    ("comm", PidEntry::Comm, REG | 0o644),
    ("cwd", PidEntry::Cwd, LNK | 0o777),
    ("environ", PidEntry::Environ, REG | 0o400),
    ("exe", PidEntry::Exe, LNK | 0o777),
    ("fd", PidEntry::Fd, DIR | 0o500),
    ("fdinfo", PidEntry::FdInfo, DIR | 0o555),
    ("limits", PidEntry::Limits, REG | 0o444),
    ("maps", PidEntry::Maps, REG | 0o444),
    ("mountinfo", PidEntry::MountInfo, REG | 0o444),
    ("mounts", PidEntry::Mounts, REG | 0o444),
    ("root", PidEntry::Root, LNK | 0o777),
    ("stat", PidEntry::Stat, REG | 0o444),
    ("statm", PidEntry::Statm, REG | 0o444),
    ("status", PidEntry::Status, REG | 0o444),
    ("task", PidEntry::Task, DIR | 0o555),
];

/// An entry of a thread's directory, /proc/PID/task/TID (Dir: the
/// directory itself).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ThreadEntry {
    Dir,
    Comm,
    Stat,
    Status,
}

const THREAD_ENTRIES: [(&str, ThreadEntry, u32); 3] = [
    ("comm", ThreadEntry::Comm, REG | 0o644),
    ("stat", ThreadEntry::Stat, REG | 0o444),
    ("status", ThreadEntry::Status, REG | 0o444),
];

/// One file, directory or link of nomu's /proc. A process's entries name
/// the process by pid (/proc/self is resolved when looked up, as on Linux).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Node {
    Top(Top),
    Pid(u32, PidEntry),
    /// /proc/PID/fd/N: a link to the open file.
    Fd(u32, i32),
    /// /proc/PID/fdinfo/N.
    FdInfo(u32, i32),
    /// /proc/PID/task/TID and its entries.
    Thread(u32, u32, ThreadEntry),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Dir,
    File,
    Link,
}

/// What a /proc path names.
pub enum Lookup {
    Node(Node),
    /// A path that goes on past a link out of /proc (/proc/self/cwd/x):
    /// the path to resolve instead.
    Through(Vec<u8>),
}

/// Where a /proc link leads.
pub enum Follow {
    Node(Node),
    /// A path outside /proc (exe, cwd, root).
    Path(Vec<u8>),
    /// The open file itself (fd/N, as Linux's magic links).
    File(Arc<OpenFile>),
}

impl Node {
    fn mode(self) -> u32 {
        match self {
            Node::Top(Top::Root) => DIR | 0o555,
            Node::Top(t) => TOP.iter().find(|e| e.node == t).map_or(REG | 0o444, |e| e.mode),
            Node::Pid(_, PidEntry::Dir) => DIR | 0o555,
            Node::Pid(_, e) => PID_ENTRIES.iter().find(|x| x.1 == e).map_or(REG | 0o444, |x| x.2),
            // The access bits are the description's (see stat).
            Node::Fd(..) => LNK,
            Node::FdInfo(..) => REG | 0o444,
            Node::Thread(_, _, ThreadEntry::Dir) => DIR | 0o555,
            Node::Thread(_, _, e) => THREAD_ENTRIES.iter().find(|x| x.1 == e).map_or(REG | 0o444, |x| x.2),
        }
    }

    pub fn kind(self) -> Kind {
        match self.mode() & libc::S_IFMT {
            DIR => Kind::Dir,
            LNK => Kind::Link,
            _ => Kind::File,
        }
    }

    /// Its inode number: fixed for /proc's own entries, made of the pid and
    /// the entry (or descriptor) for a process's.
    pub fn ino(self) -> u64 {
        match self {
            Node::Top(Top::Root) => 1,
            Node::Top(t) => 2 + TOP.iter().position(|e| e.node == t).unwrap_or(0) as u64,
            Node::Pid(pid, e) => u64::from(pid) << 32 | e as u64,
            Node::Fd(pid, fd) => u64::from(pid) << 32 | 1 << 30 | fd as u64,
            Node::FdInfo(pid, fd) => u64::from(pid) << 32 | 2 << 30 | fd as u64,
            // Thread ids fit in 22 bits (pid_max).
            Node::Thread(pid, tid, e) => u64::from(pid) << 32 | 3 << 30 | u64::from(tid) << 4 | e as u64,
        }
    }

    /// Its canonical path.
    pub fn path(self) -> Vec<u8> {
        let text = match self {
            Node::Top(Top::Root) => "/proc".to_string(),
            Node::Top(t) => {
                let mut names = Vec::new();
                let mut at = t;
                while let Some(e) = TOP.iter().find(|e| e.node == at) {
                    names.push(e.name);
                    at = e.parent;
                }
                names.reverse();
                format!("/proc/{}", names.join("/"))
            }
            Node::Pid(pid, PidEntry::Dir) => format!("/proc/{pid}"),
            Node::Pid(pid, e) => format!("/proc/{pid}/{}", PID_ENTRIES.iter().find(|x| x.1 == e).map_or("", |x| x.0)),
            Node::Fd(pid, fd) => format!("/proc/{pid}/fd/{fd}"),
            Node::FdInfo(pid, fd) => format!("/proc/{pid}/fdinfo/{fd}"),
            Node::Thread(pid, tid, ThreadEntry::Dir) => format!("/proc/{pid}/task/{tid}"),
            Node::Thread(pid, tid, e) => {
                format!("/proc/{pid}/task/{tid}/{}", THREAD_ENTRIES.iter().find(|x| x.1 == e).map_or("", |x| x.0))
            }
        };
        text.into_bytes()
    }

    /// The directory it is in (/proc's is itself, as a mount's root).
    fn parent(self) -> Node {
        match self {
            Node::Top(Top::Root) => self,
            Node::Top(t) => Node::Top(TOP.iter().find(|e| e.node == t).map_or(Top::Root, |e| e.parent)),
            Node::Pid(_, PidEntry::Dir) => Node::Top(Top::Root),
            Node::Pid(pid, _) => Node::Pid(pid, PidEntry::Dir),
            Node::Fd(pid, _) => Node::Pid(pid, PidEntry::Fd),
            Node::FdInfo(pid, _) => Node::Pid(pid, PidEntry::FdInfo),
            Node::Thread(pid, _, ThreadEntry::Dir) => Node::Pid(pid, PidEntry::Task),
            Node::Thread(pid, tid, _) => Node::Thread(pid, tid, ThreadEntry::Dir),
        }
    }

    fn pid(self) -> Option<u32> {
        match self {
            Node::Top(_) => None,
            Node::Pid(pid, _) | Node::Fd(pid, _) | Node::FdInfo(pid, _) | Node::Thread(pid, ..) => Some(pid),
        }
    }
}

/// An open file or directory of nomu's /proc (kept in its description).
pub struct ProcOpen {
    pub node: Node,
    /// Its contents were generated at open and nothing has been read yet.
    fresh: AtomicBool,
}

impl ProcOpen {
    pub fn new(node: Node) -> ProcOpen {
        ProcOpen { node, fresh: AtomicBool::new(true) }
    }

    /// Whether a read from the start must generate the contents again: every
    /// such read does but the first, whose contents open made.
    pub fn regenerate(&self) -> bool {
        !self.fresh.swap(false, Ordering::Relaxed)
    }
}

/// The device number of nomu's /proc: the host's own /proc's, an anonymous
/// device the host gave a proc superblock, so that no other file system
/// inside the root has it (the host's /proc itself is never visible there).
pub fn device() -> u64 {
    static DEV: OnceLock<u64> = OnceLock::new();
    *DEV.get_or_init(|| hostfs::fstatat(hostfs::cwd(), c"/proc", 0).map_or(libc::makedev(0, 0xffff), |st| st.st_dev))
}

/// nomu's start as wall-clock seconds (/proc's times, /proc/stat's btime).
fn boot_wall(kernel: &Kernel) -> i64 {
    static BOOT: OnceLock<i64> = OnceLock::new();
    *BOOT.get_or_init(|| {
        let now = crate::host::sys::clock_gettime(libc::CLOCK_REALTIME).map_or(0, |t| t.tv_sec);
        now - kernel.boot_time.elapsed().as_secs() as i64
    })
}

fn parse_number<T: std::str::FromStr>(part: &[u8]) -> Option<T> {
    // Linux's name_to_int: digits only, no leading zero.
    if part.is_empty() || part.len() > 10 || (part.len() > 1 && part[0] == b'0') || !part.iter().all(u8::is_ascii_digit)
    {
        return None;
    }
    std::str::from_utf8(part).ok()?.parse().ok()
}

fn join_rest(base: &[u8], rest: &[&[u8]]) -> Vec<u8> {
    let mut out = base.to_vec();
    for part in rest {
        if !out.ends_with(b"/") {
            out.push(b'/');
        }
        out.extend_from_slice(part);
    }
    out
}

/// Looks up a normalised absolute path under /proc for the process `me`.
pub fn lookup(kernel: &Kernel, me: u32, norm: &[u8]) -> Result<Lookup, Errno> {
    let rest = norm.strip_prefix(b"/proc").ok_or(Errno::ENOENT)?;
    let parts: Vec<&[u8]> = rest.split(|&b| b == b'/').filter(|p| !p.is_empty()).collect();
    let Some((&first, rest)) = parts.split_first() else { return Ok(Lookup::Node(Node::Top(Top::Root))) };
    let pid = match first {
        b"self" | b"thread-self" if rest.is_empty() => return Ok(Lookup::Node(Node::Top(Top::SelfLink))),
        b"self" | b"thread-self" => me,
        p => match parse_number::<u32>(p) {
            Some(pid) => pid,
            None => return lookup_top(&parts),
        },
    };
    let (process, _) = kernel.tasks.process_or_zombie(pid).ok_or(Errno::ENOENT)?;
    let Some((&name, beyond)) = rest.split_first() else { return Ok(Lookup::Node(Node::Pid(pid, PidEntry::Dir))) };
    let entry = PID_ENTRIES.iter().find(|x| x.0.as_bytes() == name).ok_or(Errno::ENOENT)?.1;
    let node = Node::Pid(pid, entry);
    match entry {
        PidEntry::Fd | PidEntry::FdInfo => {
            let Some((&n, beyond)) = beyond.split_first() else { return Ok(Lookup::Node(node)) };
            let fd = parse_number::<i32>(n).filter(|&fd| process.files.lock().unwrap().get(fd).is_ok());
            let fd = fd.ok_or(Errno::ENOENT)?;
            let node = if entry == PidEntry::Fd { Node::Fd(pid, fd) } else { Node::FdInfo(pid, fd) };
            if beyond.is_empty() {
                return Ok(Lookup::Node(node));
            }
            through(kernel, me, node, beyond)
        }
        PidEntry::Task => {
            let Some((&n, beyond)) = beyond.split_first() else { return Ok(Lookup::Node(node)) };
            let tid = parse_number::<u32>(n).filter(|&tid| thread_of(&process, tid).is_some());
            let tid = tid.ok_or(Errno::ENOENT)?;
            let Some((&name, beyond)) = beyond.split_first() else {
                return Ok(Lookup::Node(Node::Thread(pid, tid, ThreadEntry::Dir)));
            };
            let entry = THREAD_ENTRIES.iter().find(|x| x.0.as_bytes() == name).ok_or(Errno::ENOENT)?.1;
            if !beyond.is_empty() {
                return Err(Errno::ENOTDIR);
            }
            Ok(Lookup::Node(Node::Thread(pid, tid, entry)))
        }
        _ if beyond.is_empty() => Ok(Lookup::Node(node)),
        _ => through(kernel, me, node, beyond),
    }
}

/// A path that goes on past `node`: on through a link out of /proc, or
/// ENOTDIR.
fn through(kernel: &Kernel, me: u32, node: Node, beyond: &[&[u8]]) -> Result<Lookup, Errno> {
    if node.kind() != Kind::Link {
        return Err(Errno::ENOTDIR);
    }
    let target = link_target(kernel, me, node)?;
    if !target.starts_with(b"/") {
        return Err(Errno::ENOTDIR);
    }
    Ok(Lookup::Through(join_rest(&target, beyond)))
}

fn lookup_top(parts: &[&[u8]]) -> Result<Lookup, Errno> {
    let mut at = Top::Root;
    for (i, part) in parts.iter().enumerate() {
        if Node::Top(at).kind() != Kind::Dir {
            return Err(Errno::ENOTDIR);
        }
        at = TOP.iter().find(|e| e.parent == at && e.name.as_bytes() == *part).ok_or(Errno::ENOENT)?.node;
        if at == Top::Mounts && i + 1 < parts.len() {
            // Through self/mounts, a file.
            return Err(Errno::ENOTDIR);
        }
    }
    Ok(Lookup::Node(Node::Top(at)))
}

/// The open file behind /proc/PID/fd/N.
pub fn fd_file(kernel: &Kernel, pid: u32, fd: i32) -> Result<Arc<OpenFile>, Errno> {
    let p = kernel.tasks.process(pid).ok_or(Errno::ENOENT)?;
    let file = p.files.lock().unwrap().file(fd).map_err(|_| Errno::ENOENT)?;
    Ok(file)
}

/// What readlink of /proc/PID/fd/N says of an open file: its canonical
/// path inside the root (Linux's d_path; a file outside the root keeps
/// its host path, as Linux prints one outside a chroot), or the host's
/// name for a file without one (`pipe:[N]`, `socket:[N]`,
/// `anon_inode:[eventfd]`).
pub fn fd_link_text(kernel: &Kernel, f: &OpenFile) -> Vec<u8> {
    if let Some(p) = &f.proc {
        return p.node.path();
    }
    match hostfs::fd_path(f.fd()) {
        Ok(host) if host.starts_with(b"/") => kernel.root.strip_host_prefix(&host).unwrap_or(host),
        Ok(name) => name,
        Err(_) => f.path.clone(),
    }
}

/// What readlink of a /proc link says (EINVAL for anything else).
pub fn link_target(kernel: &Kernel, me: u32, node: Node) -> Result<Vec<u8>, Errno> {
    let process = |pid| kernel.tasks.process(pid).ok_or(Errno::ENOENT);
    Ok(match node {
        Node::Top(Top::SelfLink) => me.to_string().into_bytes(),
        Node::Top(Top::Mounts) => MOUNTS_LINK.to_vec(),
        Node::Pid(pid, PidEntry::Exe) => {
            let exe = process(pid)?.exe_file.lock().unwrap().clone();
            exe.guest_path(&kernel.root).ok_or(Errno::ENOENT)?
        }
        Node::Pid(pid, PidEntry::Cwd) => process(pid)?.cwd.lock().unwrap().clone(),
        Node::Pid(pid, PidEntry::Root) => {
            process(pid)?;
            b"/".to_vec()
        }
        Node::Fd(pid, fd) => fd_link_text(kernel, &*fd_file(kernel, pid, fd)?),
        _ => return Err(Errno::EINVAL),
    })
}

/// Where following a /proc link leads (a node that is no link: itself).
pub fn follow(kernel: &Kernel, me: u32, node: Node) -> Result<Follow, Errno> {
    Ok(match node {
        Node::Top(Top::SelfLink) => Follow::Node(Node::Pid(me, PidEntry::Dir)),
        Node::Top(Top::Mounts) => Follow::Node(Node::Pid(me, PidEntry::Mounts)),
        Node::Pid(_, PidEntry::Exe | PidEntry::Cwd | PidEntry::Root) => Follow::Path(link_target(kernel, me, node)?),
        Node::Fd(pid, fd) => Follow::File(fd_file(kernel, pid, fd)?),
        n => Follow::Node(n),
    })
}

/// Its attributes, as Linux's proc inodes have them: /proc's own device,
/// the entry's inode number, owned by root (a process's entries: by the
/// process's user), size 0 (a descriptor link: 64; the fd directory: the
/// number of open descriptors), times from nomu's start.
pub fn stat(kernel: &Kernel, node: Node) -> libc::stat {
    let mut st: libc::stat = crate::host::pod::zeroed();
    st.st_dev = device();
    st.st_ino = node.ino();
    st.st_mode = node.mode();
    st.st_nlink = match node {
        // sysctl directories say 1, as Linux's.
        Node::Top(Top::Sys | Top::SysKernel | Top::SysVm) => 1,
        Node::Top(Top::Root) => 3 + kernel.tasks.all_pids().len() as u64,
        Node::Pid(_, PidEntry::Dir) => 4,
        Node::Pid(pid, PidEntry::Task) => {
            2 + kernel.tasks.process(pid).map_or(0, |p| p.threads.lock().unwrap().len()) as u64
        }
        n if n.kind() == Kind::Dir => 2,
        _ => 1,
    };
    // A process's entries belong to its effective ids (task_dump_owner;
    // nomu's processes are always dumpable).
    if let Some((p, _)) = node.pid().and_then(|pid| kernel.tasks.process_or_zombie(pid)) {
        let c = p.cred();
        (st.st_uid, st.st_gid) = (c.euid, c.egid);
    }
    st.st_blksize = 1024;
    let t = boot_wall(kernel);
    (st.st_atime, st.st_mtime, st.st_ctime) = (t, t, t);
    match node {
        Node::Fd(pid, fd) => {
            st.st_size = 64;
            if let Ok(f) = fd_file(kernel, pid, fd) {
                if !f.path_only {
                    if f.readable() {
                        st.st_mode |= libc::S_IRUSR | libc::S_IXUSR;
                    }
                    if f.writable() {
                        st.st_mode |= libc::S_IWUSR | libc::S_IXUSR;
                    }
                }
            }
        }
        Node::Top(Top::Mounts) => st.st_size = MOUNTS_LINK.len() as i64,
        Node::Pid(pid, PidEntry::Fd) => {
            if let Some(p) = kernel.tasks.process(pid) {
                st.st_size = p.files.lock().unwrap().iter().count() as i64;
            }
        }
        _ => {}
    }
    st
}

/// Whether a caller with `cred` may access it with `mode` (R_OK, W_OK,
/// X_OK), as Linux's generic_permission: the owner's, the group's or the
/// others' bits by fs uid and group; then CAP_DAC_READ_SEARCH reads any
/// file and reads and searches any directory, and CAP_DAC_OVERRIDE does
/// anything but execute a file with no execute bit.
pub fn may_access(kernel: &Kernel, node: Node, mode: i32, cred: &Cred) -> Result<(), Errno> {
    let st = stat(kernel, node);
    let perm = st.st_mode & 0o777;
    let want = mode as u32 & 7;
    let bits = if st.st_uid == cred.fsuid {
        perm >> 6
    } else if cred.in_group(st.st_gid) {
        perm >> 3
    } else {
        perm
    } & 7;
    if want & !bits == 0 {
        return Ok(());
    }
    let (w, x) = (libc::W_OK as u32, libc::X_OK as u32);
    let dir = node.kind() == Kind::Dir;
    let read_search = if dir { want & w == 0 } else { want == libc::R_OK as u32 };
    if read_search && cred.capable(CAP_DAC_READ_SEARCH) {
        return Ok(());
    }
    if (dir || want & x == 0 || perm & 0o111 != 0) && cred.capable(CAP_DAC_OVERRIDE) {
        return Ok(());
    }
    Err(Errno::EACCES)
}

/// What an extended-attribute call on a /proc entry answers: Linux's proc
/// has no xattr handlers, so a list is empty and every other call is
/// EOPNOTSUPP, once the checks that come first have passed
/// (xattr_permission and proc's own permission checks). `name` is None
/// for a list; `cred` the caller's.
pub fn xattr(kernel: &Kernel, node: Node, name: Option<&[u8]>, write: bool, cred: &Cred) -> Result<usize, Errno> {
    let Some(name) = name else { return Ok(0) };
    // A process's directory takes no attribute change of any name.
    if write && node == Node::Pid(node.pid().unwrap_or(0), PidEntry::Dir) {
        return Err(Errno::EPERM);
    }
    let refused = if write { Errno::EPERM } else { Errno::ENODATA };
    if name.starts_with(b"security.") || name.starts_with(b"system.") {
        return Err(Errno::EOPNOTSUPP);
    }
    if name.starts_with(b"trusted.") {
        return Err(if cred.capable(CAP_SYS_ADMIN) { Errno::EOPNOTSUPP } else { refused });
    }
    // user.* is for regular files and directories only.
    if name.starts_with(b"user.") && node.kind() == Kind::Link {
        return Err(refused);
    }
    // inode_permission: sysctl entries that are not writable are not,
    // whoever asks (proc_sys_permission: only the owner's bits for root).
    let sysctl = matches!(
        node,
        Node::Top(
            Top::Sys
                | Top::SysKernel
                | Top::Hostname
                | Top::OsRelease
                | Top::OsType
                | Top::PidMax
                | Top::SysVm
                | Top::OvercommitMemory
                | Top::DropCaches
        )
    );
    if write && sysctl && (cred.euid != 0 || node.mode() & 0o200 == 0) {
        return Err(Errno::EACCES);
    }
    may_access(kernel, node, if write { libc::W_OK } else { libc::R_OK }, cred)?;
    Err(Errno::EOPNOTSUPP)
}

/// A directory's entries: (name, d_type, inode number), "." and ".." first.
pub fn list(kernel: &Kernel, dir: Node) -> Result<Vec<(Vec<u8>, u8, u64)>, Errno> {
    let entry = |name: &[u8], n: Node| {
        let dtype = match n.kind() {
            Kind::Dir => libc::DT_DIR,
            Kind::File => libc::DT_REG,
            Kind::Link => libc::DT_LNK,
        };
        (name.to_vec(), dtype, n.ino())
    };
    let mut out = vec![entry(b".", dir), entry(b"..", dir.parent())];
    match dir {
        Node::Top(t) if dir.kind() == Kind::Dir => {
            out.extend(TOP.iter().filter(|e| e.parent == t).map(|e| entry(e.name.as_bytes(), Node::Top(e.node))));
            if t == Top::Root {
                let pids = kernel.tasks.all_pids();
                out.extend(pids.into_iter().map(|p| entry(p.to_string().as_bytes(), Node::Pid(p, PidEntry::Dir))));
            }
        }
        Node::Pid(pid, PidEntry::Dir) => {
            out.extend(PID_ENTRIES.iter().map(|(name, e, _)| entry(name.as_bytes(), Node::Pid(pid, *e))));
        }
        Node::Pid(pid, e @ (PidEntry::Fd | PidEntry::FdInfo)) => {
            let p = kernel.tasks.process(pid).ok_or(Errno::ENOENT)?;
            let fds: Vec<i32> = p.files.lock().unwrap().iter().map(|(fd, _)| fd).collect();
            out.extend(fds.into_iter().map(|fd| {
                entry(
                    fd.to_string().as_bytes(),
                    if e == PidEntry::Fd { Node::Fd(pid, fd) } else { Node::FdInfo(pid, fd) },
                )
            }));
        }
        Node::Pid(pid, PidEntry::Task) => {
            let p = kernel.tasks.process(pid).ok_or(Errno::ENOENT)?;
            let mut tids: Vec<u32> = p.threads.lock().unwrap().iter().map(|t| t.tid()).collect();
            tids.sort_unstable();
            out.extend(
                tids.into_iter().map(|t| entry(t.to_string().as_bytes(), Node::Thread(pid, t, ThreadEntry::Dir))),
            );
        }
        Node::Thread(pid, tid, ThreadEntry::Dir) => {
            out.extend(THREAD_ENTRIES.iter().map(|(name, e, _)| entry(name.as_bytes(), Node::Thread(pid, tid, *e))));
        }
        _ => return Err(Errno::ENOTDIR),
    }
    Ok(out)
}

/// Thread `tid` of `p`, if it has one.
fn thread_of(p: &Process, tid: u32) -> Option<Arc<crate::kernel::process::Thread>> {
    p.threads.lock().unwrap().iter().find(|t| t.tid() == tid).cloned()
}

/// A file's contents, generated now for the thread `reader`.
pub fn contents(kernel: &Kernel, node: Node, reader: u32) -> Result<Vec<u8>, Errno> {
    let process = |pid| kernel.tasks.process(pid).ok_or(Errno::ESRCH);
    Ok(match node {
        Node::Top(t) => system::contents(kernel, t)?,
        Node::Pid(pid, e) => {
            let (p, zombie) = kernel.tasks.process_or_zombie(pid).ok_or(Errno::ESRCH)?;
            let state =
                if zombie { TaskState::Zombie } else { TaskState::of(&p, thread_of(&p, pid).as_deref(), reader) };
            match e {
                // A zombie's memory is gone: Linux reads nothing there.
                PidEntry::Cmdline | PidEntry::Environ | PidEntry::Maps if zombie => Vec::new(),
                PidEntry::Cmdline => p.cmdline.lock().unwrap().to_vec(),
                PidEntry::Environ => p.environ.lock().unwrap().to_vec(),
                PidEntry::Comm => {
                    let mut c = comm(&p);
                    c.push(b'\n');
                    c
                }
                PidEntry::Maps => maps::maps(kernel, &p),
                PidEntry::MountInfo => mounts::mountinfo(kernel).into_bytes(),
                PidEntry::Mounts => mounts::mounts(kernel).into_bytes(),
                PidEntry::Stat => stat_line(kernel, &p, None, state),
                PidEntry::Statm => statm(&p),
                PidEntry::Status => status(kernel, &p, None, state),
                PidEntry::Limits => limits(&p),
                _ => return Err(Errno::EINVAL),
            }
        }
        Node::Thread(pid, tid, e) => {
            let p = process(pid)?;
            let t = thread_of(&p, tid).ok_or(Errno::ESRCH)?;
            let state = TaskState::of(&p, Some(&t), reader);
            match e {
                ThreadEntry::Comm => {
                    let mut c = t.comm();
                    c.push(b'\n');
                    c
                }
                ThreadEntry::Stat => stat_line(kernel, &p, Some(&t), state),
                ThreadEntry::Status => status(kernel, &p, Some(&t), state),
                ThreadEntry::Dir => return Err(Errno::EINVAL),
            }
        }
        Node::FdInfo(pid, fd) => fdinfo(kernel, &*process(pid)?, fd)?,
        Node::Fd(..) => return Err(Errno::EINVAL),
    })
}

/// The process's name: its first thread's (as Linux's comm of the leader).
fn comm(p: &Process) -> Vec<u8> {
    let first = p.threads.lock().unwrap().first().cloned();
    match first {
        Some(t) => t.comm(),
        None => p.program_name(),
    }
}

/// Clock ticks (USER_HZ, 100 a second) since nomu started.
fn ticks_since_boot(kernel: &Kernel, at: std::time::Instant) -> u128 {
    at.saturating_duration_since(kernel.boot_time).as_millis() / 10
}

/// A task's state as /proc shows it (Linux's task_state_array).
#[derive(Clone, Copy)]
enum TaskState {
    Running,
    Sleeping,
    Stopped,
    Zombie,
}

impl TaskState {
    /// `thread` of the live process `p` (None: a leader that has left
    /// while other threads go on, a zombie to Linux), as the thread
    /// `reader` sees it: stopped with its process, asleep while it waits
    /// in a syscall, else running (in guest code, or in nomu as the reader
    /// is).
    fn of(p: &Process, thread: Option<&crate::kernel::process::Thread>, reader: u32) -> TaskState {
        match thread {
            None => TaskState::Zombie,
            _ if p.stopped.load(Ordering::Relaxed) != 0 => TaskState::Stopped,
            Some(t) if t.tid() == reader || Waiting::of(t) == Waiting::No => TaskState::Running,
            Some(_) => TaskState::Sleeping,
        }
    }

    fn letter(self) -> char {
        match self {
            TaskState::Running => 'R',
            TaskState::Sleeping => 'S',
            TaskState::Stopped => 'T',
            TaskState::Zombie => 'Z',
        }
    }

    fn name(self) -> &'static str {
        match self {
            TaskState::Running => "R (running)",
            TaskState::Sleeping => "S (sleeping)",
            TaskState::Stopped => "T (stopped)",
            TaskState::Zombie => "Z (zombie)",
        }
    }
}

/// /proc/PID/stat, or with `thread` its /proc/PID/task/TID/stat.
fn stat_line(
    kernel: &Kernel,
    p: &Process,
    thread: Option<&crate::kernel::process::Thread>,
    state: TaskState,
) -> Vec<u8> {
    let (pgid, sid) = kernel.tasks.ids(p.pid).unwrap_or((p.pid, p.pid));
    let state = state.letter();
    let threads = p.threads.lock().unwrap().len().max(1);
    let usage = maps::usage(p);
    let start = ticks_since_boot(kernel, p.started);
    // The session's terminal, as ps's TTY and its `+` for the foreground
    // group read them (none for the one nomu runs on: no guest session's).
    let (tty_nr, tpgid) = kernel
        .terminals
        .of_session(sid)
        .map_or((0, -1), |c| (crate::kernel::terminal::encode_tty_nr(c.rdev), c.foreground as i64));
    // The thread's scheduling (the process's: its leader's), as Linux's
    // task_prio: 20 + nice for normal policies, -1 - priority for real time.
    // A leader that left (or a zombie) shows nice 0, SCHED_OTHER.
    let of = |t: &crate::kernel::process::Thread| {
        let s = t.sched.lock().unwrap();
        (s.nice, s.rt_priority, s.policy)
    };
    let (nice, rt_priority, policy) = match thread {
        Some(t) => of(t),
        None => thread_of(p, p.pid).map_or((0, 0, libc::SCHED_OTHER), |t| of(&t)),
    };
    let realtime = matches!(policy, libc::SCHED_FIFO | libc::SCHED_RR);
    let prio = if realtime { -1 - rt_priority } else { 20 + nice };
    let mut line = format!("{} (", thread.map_or(p.pid, |t| t.tid())).into_bytes();
    line.extend(thread.map_or_else(|| comm(p), |t| t.comm()));
    line.extend(
        format!(
            ") {state} {} {pgid} {sid} {tty_nr} {tpgid} 0 0 0 0 0 0 0 0 0 {prio} {nice} {threads} 0 {start} {} {} 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 {rt_priority} {policy} 0 0 0 0 0 0 0 0 0 0 0\n",
            kernel.tasks.ppid(p.pid),
            usage.size,
            usage.size / 4096,
        )
        .into_bytes(),
    );
    line
}

fn statm(p: &Process) -> Vec<u8> {
    let u = maps::usage(p);
    let pages = |b: u64| b / 4096;
    format!("{} {} {} {} 0 {} 0\n", pages(u.size), pages(u.size), pages(u.file), pages(u.text), pages(u.data))
        .into_bytes()
}

/// /proc/PID/limits, as Linux's proc_pid_limits prints it.
fn limits(p: &Process) -> Vec<u8> {
    const NAMES: [(&str, &str); 16] = [
        ("Max cpu time", "seconds"),
        ("Max file size", "bytes"),
        ("Max data size", "bytes"),
        ("Max stack size", "bytes"),
        ("Max core file size", "bytes"),
        ("Max resident set", "bytes"),
        ("Max processes", "processes"),
        ("Max open files", "files"),
        ("Max locked memory", "bytes"),
        ("Max address space", "bytes"),
        ("Max file locks", "locks"),
        ("Max pending signals", "signals"),
        ("Max msgqueue size", "bytes"),
        ("Max nice priority", ""),
        ("Max realtime priority", ""),
        ("Max realtime timeout", "us"),
    ];
    let value = |v: u64| if v == libc::RLIM_INFINITY { "unlimited".to_string() } else { v.to_string() };
    let mut out = format!("{:<25} {:<20} {:<20} {:<10}\n", "Limit", "Soft Limit", "Hard Limit", "Units");
    for (r, (name, unit)) in NAMES.iter().enumerate() {
        let l = p.rlimit(r as u32);
        out += &format!("{name:<25} {:<20} {:<20} ", value(l.rlim_cur), value(l.rlim_max));
        out += &if unit.is_empty() { "\n".to_string() } else { format!("{unit:<10}\n") };
    }
    out.into_bytes()
}

/// /proc/PID/status, or with `thread` its /proc/PID/task/TID/status (the
/// thread's name, id and blocked signals).
fn status(kernel: &Kernel, p: &Process, thread: Option<&crate::kernel::process::Thread>, state: TaskState) -> Vec<u8> {
    let c = p.cred();
    let state = state.name();
    let usage = maps::usage(p);
    // Linux separates the groups with spaces and ends the list with one,
    // an empty list too (task_state).
    let groups: String = c.groups.iter().map(|g| format!("{g} ")).collect();
    let groups = if groups.is_empty() { " ".to_string() } else { groups };
    // The signals ignored and caught (the process's actions) and those the
    // first thread blocks, as Linux's task_sig renders them.
    let (ignored, caught) = {
        let actions = p.signals.lock().unwrap();
        (1..=64).fold((0u64, 0u64), |(ign, cgt), sig| match actions.get(sig).handler {
            crate::kernel::signal::SIG_IGN => (ign | crate::kernel::signal::bit(sig), cgt),
            crate::kernel::signal::SIG_DFL => (ign, cgt),
            _ => (ign, cgt | crate::kernel::signal::bit(sig)),
        })
    };
    let leader = {
        let threads = p.threads.lock().unwrap();
        threads.iter().find(|t| t.tid() == p.pid).or(threads.first()).cloned()
    };
    let shown = thread.map_or(leader.as_deref(), Some);
    let blocked = shown.map_or(0, |t| t.state.lock().unwrap().sigmask);
    let mut s = b"Name:\t".to_vec();
    s.extend(thread.map_or_else(|| comm(p), |t| t.comm()));
    s.extend(
        format!(
            "\nState:\t{state}\nTgid:\t{pid}\nPid:\t{tid}\nPPid:\t{}\nUid:\t{}\t{}\t{}\t{}\nGid:\t{}\t{}\t{}\t{}\nGroups:\t{groups}\nVmSize:\t{:8} kB\nVmLck:\t{:8} kB\nVmRSS:\t{:8} kB\nThreads:\t{}\nSigBlk:\t{blocked:016x}\nSigIgn:\t{ignored:016x}\nSigCgt:\t{caught:016x}\nCapInh:\t{:016x}\nCapPrm:\t{:016x}\nCapEff:\t{:016x}\nCapBnd:\t{:016x}\nCapAmb:\t{:016x}\n",
            kernel.tasks.ppid(p.pid),
            c.uid,
            c.euid,
            c.suid,
            c.fsuid,
            c.gid,
            c.egid,
            c.sgid,
            c.fsgid,
            usage.size / 1024,
            usage.locked / 1024,
            usage.size / 1024,
            p.threads.lock().unwrap().len().max(1),
            c.cap_inheritable,
            c.cap_permitted,
            c.cap_effective,
            c.cap_bset,
            c.cap_ambient,
            pid = p.pid,
            tid = thread.map_or(p.pid, |t| t.tid()),
        )
        .into_bytes(),
    );
    s
}

/// /proc/PID/fdinfo/N in Linux's format: position, status flags (with
/// O_CLOEXEC when the descriptor has it), mount id and inode number.
fn fdinfo(kernel: &Kernel, p: &Process, fd: i32) -> Result<Vec<u8>, Errno> {
    let (file, cloexec) = {
        let files = p.files.lock().unwrap();
        let e = files.get(fd).map_err(|_| Errno::ENOENT)?;
        (e.file.clone(), e.cloexec)
    };
    let host_pos = || hostfs::lseek(file.fd(), 0, libc::SEEK_CUR).unwrap_or(0);
    let (pos, mnt_id, ino) = match &file.proc {
        Some(po) if po.node.kind() == Kind::Dir => {
            (*file.dir_pos.lock().unwrap() as u64, proc_mount_id(), po.node.ino())
        }
        Some(po) => (host_pos(), proc_mount_id(), po.node.ino()),
        None => (host_pos(), mount_id(file.fd()), hostfs::fstat(file.fd()).map_or(0, |st| st.st_ino)),
    };
    // The host descriptor is always O_CLOEXEC; the guest's may not be.
    let flags = hostfs::getfl(file.fd()).unwrap_or(0) & !libc::O_CLOEXEC | if cloexec { libc::O_CLOEXEC } else { 0 };
    let mut info = format!("pos:\t{pos}\nflags:\t0{flags:o}\nmnt_id:\t{mnt_id}\nino:\t{ino}\n");
    if let Some(target) = file.pidfd() {
        // Linux's pidfd_show_fdinfo: -1 once reaped.
        let pid = match target.presence(kernel) {
            crate::fs::pidfd::Presence::Reaped => -1,
            _ => target.id() as i64,
        };
        info += &format!("Pid:\t{pid}\nNSpid:\t{pid}\n");
    }
    Ok(info.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_paths_and_inodes() {
        assert_eq!(Node::Top(Top::PidMax).path(), b"/proc/sys/kernel/pid_max");
        assert_eq!(Node::Top(Top::Root).path(), b"/proc");
        assert_eq!(Node::Pid(7, PidEntry::Maps).path(), b"/proc/7/maps");
        assert_eq!(Node::Fd(7, 3).path(), b"/proc/7/fd/3");
        let mut inos: Vec<u64> = TOP.iter().map(|e| Node::Top(e.node).ino()).collect();
        inos.push(Node::Top(Top::Root).ino());
        for pid in [1, 2] {
            inos.extend(PID_ENTRIES.iter().map(|e| Node::Pid(pid, e.1).ino()));
            inos.push(Node::Pid(pid, PidEntry::Dir).ino());
            inos.extend((0..3).flat_map(|fd| [Node::Fd(pid, fd).ino(), Node::FdInfo(pid, fd).ino()]));
        }
        let n = inos.len();
        inos.sort_unstable();
        inos.dedup();
        assert_eq!(inos.len(), n, "inode numbers are distinct");
    }

    #[test]
    fn top_lookup() {
        let node = |p: &[u8]| match lookup_top(&p.split(|&b| b == b'/').filter(|x| !x.is_empty()).collect::<Vec<_>>()) {
            Ok(Lookup::Node(n)) => Ok(n),
            Ok(Lookup::Through(_)) => Err(Errno::EINVAL),
            Err(e) => Err(e),
        };
        assert_eq!(node(b"sys/kernel/ostype"), Ok(Node::Top(Top::OsType)));
        assert_eq!(node(b"meminfo/x"), Err(Errno::ENOTDIR));
        assert_eq!(node(b"mounts/x"), Err(Errno::ENOTDIR));
        assert_eq!(node(b"nothing"), Err(Errno::ENOENT));
        assert_eq!(Node::Top(Top::OsType).parent(), Node::Top(Top::SysKernel));
    }

    #[test]
    fn numbers_parse_as_linux_names() {
        assert_eq!(parse_number::<u32>(b"12"), Some(12));
        assert_eq!(parse_number::<u32>(b"012"), None);
        assert_eq!(parse_number::<u32>(b"0"), Some(0));
        assert_eq!(parse_number::<u32>(b"1a"), None);
        assert_eq!(parse_number::<i32>(b"99999999999"), None);
    }
}
