//! Files: the guest's view of the file system, inside `--root`.

pub mod epoll;
pub mod eventfd;
pub mod fdtable;
pub mod file;
pub mod locks;
pub mod path;
pub mod pidfd;
pub mod procfs;
pub mod secretmem;
pub mod sigio;
pub mod socket;
pub mod text_busy;
