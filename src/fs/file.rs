//! An open file description. Each guest open(2) gets its own host
//! descriptor, so offsets and status flags are shared exactly as Linux
//! shares them: between dup'ed descriptors, not between separate opens.

use crate::abi::errno::Errno;
use crate::host::fs as hostfs;
use crate::host::physmem::GuestRange;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex, OnceLock, Weak};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FileKind {
    Regular,
    Directory,
    CharDevice,
    BlockDevice,
    Fifo,
    Socket,
    Symlink,
}

impl FileKind {
    pub fn from_mode(mode: u32) -> FileKind {
        match mode & libc::S_IFMT {
            libc::S_IFDIR => FileKind::Directory,
            libc::S_IFCHR => FileKind::CharDevice,
            libc::S_IFBLK => FileKind::BlockDevice,
            libc::S_IFIFO => FileKind::Fifo,
            libc::S_IFSOCK => FileKind::Socket,
            libc::S_IFLNK => FileKind::Symlink,
            _ => FileKind::Regular,
        }
    }
}

/// What an open file description is: which implementation of the file
/// operations serves it (syscall::file_ops). Decided from the host file
/// the first time it matters, or by nomu when it opens one of its own.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FileType {
    /// A host file whose I/O never waits: regular files, directories,
    /// block devices.
    HostFile,
    /// A pipe, socket or character device of the host: I/O may wait for a
    /// peer, and a signal must end the wait.
    Stream,
    /// A terminal: a stream with job control and termios.
    Terminal,
    /// The null device (1, 3), served without a host call.
    NullDevice,
    /// The zero device (1, 5): reads zeroes, maps as anonymous memory.
    ZeroDevice,
    /// A directory of nomu's /proc, listed by nomu.
    ProcDir,
    /// A file of nomu's /proc: its contents in a memfd, made again when
    /// read from the start.
    ProcFile,
    /// An eventfd: nomu's counter (the host descriptor is an idle host
    /// eventfd, for fstat and the status flags).
    EventFd,
    /// An epoll instance: a host epoll plus nomu's ready list (fs::epoll).
    Epoll,
    /// A timerfd: the host's, behind its host descriptor.
    TimerFd,
    /// An inotify instance: the host's, for paths resolved inside the root;
    /// a read waits in one host call a kick ends, as a pipe's does.
    Inotify,
    /// A signalfd: reads the reader's and its process's pending signals (the host descriptor
    /// is a host signalfd that reads none).
    SignalFd,
    /// A socket: the host's, with nomu's translation of AF_UNIX names and
    /// of descriptors in control messages (fs::socket).
    Socket,
    /// A pidfd: the process or thread it names (fs::pidfd); the host
    /// descriptor is an idle host eventfd.
    PidFd,
    /// A memfd_secret file: nomu's UNMAPPED pages (fs::secretmem); the host
    /// descriptor is an idle host memfd_secret, never mapped.
    SecretMem,
}

/// The state of a file nomu serves itself, beside its host descriptor.
pub enum FileObject {
    EventFd(super::eventfd::EventFd),
    Epoll(Arc<super::epoll::Epoll>),
    SignalFd(super::eventfd::SignalFd),
    Socket(super::socket::Socket),
    PidFd(super::pidfd::PidFd),
    SecretMem(super::secretmem::SecretMem),
}

/// Which file, in which version: equal identities mean the same bytes
/// (as far as a host can tell without reading them).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct FileIdentity {
    pub dev: u64,
    pub ino: u64,
    pub size: i64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
}

impl FileIdentity {
    pub fn of(st: &libc::stat) -> FileIdentity {
        FileIdentity {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size,
            mtime: (st.st_mtime, st.st_mtime_nsec),
            ctime: (st.st_ctime, st.st_ctime_nsec),
        }
    }
}

/// What an open file's attributes say that cannot change.
#[derive(Clone, Copy)]
struct Meta {
    kind: FileKind,
    /// A device file's device.
    rdev: u64,
    /// Host device and inode numbers.
    key: (u64, u64),
}

impl Meta {
    fn of(st: &libc::stat) -> Meta {
        Meta { kind: FileKind::from_mode(st.st_mode), rdev: st.st_rdev, key: (st.st_dev, st.st_ino) }
    }
}

pub struct OpenFile {
    /// Always Some until the drop closes it.
    host: Option<OwnedFd>,
    /// File type, device (of a device file) and identity, read from the
    /// host on first use (most files never need it, and open is a hot path).
    meta: OnceLock<Meta>,
    /// Its type, worked out once (it cannot change).
    file_type: OnceLock<FileType>,
    /// O_RDONLY, O_WRONLY, O_RDWR (or 3: neither), asked once (F_SETFL
    /// cannot change it).
    access: OnceLock<i32>,
    /// Whether poll always finds it ready, worked out once (see
    /// [`OpenFile::always_ready`]).
    always_ready: OnceLock<bool>,
    /// The null device's attributes and the `inode_changes` count they
    /// were read at (see [`OpenFile::null_device_stat`]).
    null_stat: Mutex<Option<(u64, libc::stat)>>,
    /// The guest path it was opened by (for tracing and /dev/zero checks;
    /// a directory's current path is asked of the host when needed).
    pub path: Vec<u8>,
    /// Opened with O_PATH: only a handle, no I/O.
    pub path_only: bool,
    /// A file or directory of nomu's /proc (whose host descriptor is a
    /// memfd of its contents, or any host directory for a directory).
    pub proc: Option<super::procfs::ProcOpen>,
    /// A /proc directory's position: the next entry.
    pub dir_pos: Mutex<usize>,
    /// Set for a regular file opened for writing: it cannot be executed
    /// while this description is open (ETXTBSY).
    pub writing: Option<super::text_busy::OpenForWriting>,
    /// What nomu keeps for a file it serves itself.
    pub object: Option<FileObject>,
    /// The epoll items watching this description (epoll, item id): they go
    /// when it goes, as Linux's eventpoll_release does at a file's release.
    epoll_links: Mutex<Vec<(Weak<super::epoll::Epoll>, u64)>>,
    /// Signal-driven I/O: O_ASYNC's owner and signal (fs::sigio).
    pub async_io: Mutex<super::sigio::AsyncIo>,
}

impl OpenFile {
    pub fn new(host: OwnedFd, path: Vec<u8>, path_only: bool) -> OpenFile {
        OpenFile {
            host: Some(host),
            meta: OnceLock::new(),
            access: OnceLock::new(),
            always_ready: OnceLock::new(),
            null_stat: Mutex::new(None),
            file_type: OnceLock::new(),
            path,
            path_only,
            proc: None,
            dir_pos: Mutex::new(0),
            writing: None,
            object: None,
            epoll_links: Mutex::new(Vec::new()),
            async_io: Mutex::new(Default::default()),
        }
    }

    /// A file nomu serves itself: its type is `file_type`, its state
    /// `object`, and `host` the host descriptor behind it.
    pub fn new_special(host: OwnedFd, path: &str, file_type: FileType, object: Option<FileObject>) -> OpenFile {
        let mut f = OpenFile::new(host, path.as_bytes().to_vec(), false);
        f.object = object;
        let _ = f.file_type.set(file_type);
        f
    }

    pub fn eventfd(&self) -> Option<&super::eventfd::EventFd> {
        match &self.object {
            Some(FileObject::EventFd(e)) => Some(e),
            _ => None,
        }
    }

    pub fn epoll(&self) -> Option<&Arc<super::epoll::Epoll>> {
        match &self.object {
            Some(FileObject::Epoll(e)) => Some(e),
            _ => None,
        }
    }

    pub fn signalfd(&self) -> Option<&super::eventfd::SignalFd> {
        match &self.object {
            Some(FileObject::SignalFd(s)) => Some(s),
            _ => None,
        }
    }

    pub fn pidfd(&self) -> Option<&super::pidfd::PidFd> {
        match &self.object {
            Some(FileObject::PidFd(p)) => Some(p),
            _ => None,
        }
    }

    pub fn secretmem(&self) -> Option<&super::secretmem::SecretMem> {
        match &self.object {
            Some(FileObject::SecretMem(s)) => Some(s),
            _ => None,
        }
    }

    /// nomu's state of a socket it made (None for one received from the
    /// host or inherited).
    pub fn socket(&self) -> Option<&super::socket::Socket> {
        match &self.object {
            Some(FileObject::Socket(s)) => Some(s),
            _ => None,
        }
    }

    /// An epoll item now watches this description.
    pub fn epoll_added(&self, epoll: Weak<super::epoll::Epoll>, id: u64) {
        let mut links = self.epoll_links.lock().unwrap();
        links.retain(|(e, _)| e.strong_count() > 0);
        links.push((epoll, id));
    }

    /// An epoll item no longer does (EPOLL_CTL_DEL).
    pub fn epoll_removed(&self, epoll: &Weak<super::epoll::Epoll>, id: u64) {
        self.epoll_links.lock().unwrap().retain(|(e, i)| !(Weak::ptr_eq(e, epoll) && *i == id));
    }

    fn meta(&self) -> Meta {
        *self.meta.get_or_init(|| match hostfs::fstat(self.fd()) {
            Ok(st) => Meta::of(&st),
            // fstat on an open descriptor does not fail; if it ever does,
            // "regular file" is the most conservative guess.
            Err(_) => Meta { kind: FileKind::Regular, rdev: 0, key: (0, 0) },
        })
    }

    pub fn kind(&self) -> FileKind {
        self.meta().kind
    }

    /// A device file's device number (0 for other files).
    pub fn rdev(&self) -> u64 {
        self.meta().rdev
    }

    /// The host's device and inode numbers of the file.
    pub fn key(&self) -> (u64, u64) {
        self.meta().key
    }

    pub fn file_type(&self) -> FileType {
        if let Some(p) = &self.proc {
            return match p.node.kind() {
                super::procfs::Kind::Dir => FileType::ProcDir,
                _ => FileType::ProcFile,
            };
        }
        *self.file_type.get_or_init(|| match (self.meta().kind, self.meta().rdev) {
            (FileKind::CharDevice, dev) if dev == libc::makedev(1, 3) => FileType::NullDevice,
            (FileKind::CharDevice, dev) if dev == libc::makedev(1, 5) => FileType::ZeroDevice,
            (FileKind::CharDevice, _) if hostfs::isatty(self.fd()) => FileType::Terminal,
            (FileKind::Socket, _) => FileType::Socket,
            (FileKind::CharDevice | FileKind::Fifo, _) => FileType::Stream,
            _ => FileType::HostFile,
        })
    }

    pub fn access_mode(&self) -> i32 {
        // F_GETFL on an open descriptor does not fail; if it ever did,
        // O_RDWR is the guess that refuses nothing.
        *self.access.get_or_init(|| hostfs::getfl(self.fd()).map_or(libc::O_RDWR, |fl| fl & libc::O_ACCMODE))
    }

    pub fn readable(&self) -> bool {
        matches!(self.access_mode(), libc::O_RDONLY | libc::O_RDWR)
    }

    pub fn writable(&self) -> bool {
        matches!(self.access_mode(), libc::O_WRONLY | libc::O_RDWR)
    }

    /// Whether poll always finds it ready: `work_out` (its type's answer)
    /// runs the first time only, as select over many files is a hot path.
    pub fn always_ready(&self, work_out: impl FnOnce() -> bool) -> bool {
        *self.always_ready.get_or_init(work_out)
    }

    pub fn identity(&self) -> Option<FileIdentity> {
        hostfs::fstat(self.fd()).ok().map(|st| FileIdentity::of(&st))
    }

    /// Takes `st`, just read from this file's descriptor, as its type (no
    /// fstat of its own for [`kind`](Self::kind)): execve stats the file
    /// once for everything it checks.
    pub fn with_stat(self, st: &libc::stat) -> OpenFile {
        let _ = self.meta.set(Meta::of(st));
        self
    }

    /// The null device's attributes, without a host call when they cannot
    /// have changed: reads and writes leave even its times alone, so only
    /// a call that changes attributes (chmod, utimensat, link...) can, and
    /// each guest one bumps `changes` (the kernel's `inode_changes`). The
    /// attributes read at an older count are read again. A change made on
    /// the host, outside the guest, shows at the guest's next such call or
    /// next open. Linux serves this fstat from the inode in memory too;
    /// going to the host cost zpoline 1.6x native's time.
    pub fn null_device_stat(&self, changes: u64) -> Result<libc::stat, Errno> {
        let mut cached = self.null_stat.lock().unwrap();
        if let Some((at, st)) = *cached {
            if at == changes {
                return Ok(st);
            }
        }
        let st = hostfs::fstat(self.fd())?;
        *cached = Some((changes, st));
        Ok(st)
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.host.as_ref().expect("an open file's descriptor").as_fd()
    }

    /// The host descriptor's number, if it has one.
    pub fn fd_raw(&self) -> Option<i32> {
        self.host.as_ref().map(std::os::fd::AsRawFd::as_raw_fd)
    }

    /// Reads from `offset` until `range` is full or the file ends (for
    /// file-backed mappings). Returns the bytes read.
    pub fn read_at_into(&self, range: GuestRange, offset: u64) -> Result<usize, Errno> {
        hostfs::pread_full(self.fd(), range, offset)
    }

    /// Writes all of `range` at `offset` (shared mapping write-back).
    pub fn write_at_from(&self, range: GuestRange, offset: u64) -> Result<(), Errno> {
        hostfs::pwrite_full(self.fd(), range, offset)
    }

    pub fn size(&self) -> Result<u64, Errno> {
        Ok(hostfs::fstat(self.fd())?.st_size as u64)
    }
}

impl Drop for OpenFile {
    fn drop(&mut self) {
        // The guest's close lands here: close through host::syscall, as
        // every host call on a guest syscall's path (OwnedFd's own drop
        // would use libc's). The epoll items watching it go first, while
        // its host descriptor is still open (the host's registration is
        // keyed by it).
        for (epoll, id) in self.epoll_links.get_mut().unwrap().drain(..) {
            if let (Some(epoll), Some(fd)) = (epoll.upgrade(), self.host.as_ref()) {
                epoll.forget(id, fd.as_fd());
            }
        }
        if let Some(fd) = self.host.take() {
            hostfs::close(fd);
        }
    }
}
