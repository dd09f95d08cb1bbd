//! Program loading: ELF (static-PIE, dynamic PIE with PT_INTERP, ET_EXEC
//! when its fixed range is free) and `#!` scripts, plus the Linux initial
//! stack.

mod args;
mod elf;
pub mod sites;
mod stack;

use crate::abi::errno::Errno;
use crate::entry::{GuestRegs, StartState};
use crate::fs::file::{FileKind, OpenFile};
use crate::fs::path::{self, Special};
use crate::fs::text_busy::RunningProgram;
use crate::host::fs as hostfs;
use crate::kernel::process::Process;
use crate::kernel::Kernel;
use crate::mm::space::AddressSpace;
pub use args::ArgStrings;
pub use stack::AuxIds;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

/// Linux's BINPRM_BUF_SIZE: how much of a file decides its format.
const BINPRM_BUF_SIZE: usize = 256;

/// How much of a program's start one host read takes: its format's bytes
/// and, in most programs, its program header table after them (read
/// again otherwise).
const HEAD_READ: usize = 4096;
/// Nested `#!` interpreters allowed, as Linux.
const MAX_SCRIPT_DEPTH: usize = 4;
/// Linux's MAX_ARG_STRLEN.
const MAX_ARG_STRLEN: usize = 32 * 4096;

pub struct ExecError {
    pub errno: Errno,
    pub message: String,
}

impl ExecError {
    fn new(errno: Errno, message: impl Into<String>) -> ExecError {
        ExecError { errno, message: message.into() }
    }
}

impl From<Errno> for ExecError {
    fn from(errno: Errno) -> ExecError {
        ExecError { errno, message: String::new() }
    }
}

/// The host file an absolute guest path names for execve: /proc's links
/// lead to the files they name (/proc/self/exe; /proc/self/fd/N and
/// /dev/fd/N, which is how fexecve runs a descriptor); host devices and
/// /proc's own files are no programs.
fn open_program(kernel: &Kernel, me: u32, abs: &[u8]) -> Result<OwnedFd, Errno> {
    use crate::fs::procfs::{self, Follow, Lookup, Node};
    let mut abs = abs.to_vec();
    for _ in 0..MAX_PROC_LINKS {
        let node = match path::special(&abs) {
            None => return kernel.root.open_path(&abs, libc::O_RDONLY, 0),
            Some(Special::Proc(norm)) => match procfs::lookup(kernel, me, &norm)? {
                Lookup::Through(p) => {
                    abs = p;
                    continue;
                }
                Lookup::Node(n) => n,
            },
            Some(Special::GuestFd(fd)) => Node::Fd(me, fd),
            Some(Special::Hidden) => return Err(Errno::ENOENT),
            Some(Special::HostDevice(_)) => return Err(Errno::EACCES),
        };
        match procfs::follow(kernel, me, node)? {
            Follow::Path(p) => abs = p,
            Follow::File(f) if f.proc.is_none() => {
                let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&f.fd()));
                return hostfs::open_host(&std::ffi::CString::new(link).unwrap(), libc::O_RDONLY);
            }
            _ => return Err(Errno::EACCES),
        }
    }
    Err(Errno::ELOOP)
}

/// How many /proc links one execve path may pass through.
const MAX_PROC_LINKS: usize = 8;

/// An executable opened for execve: its absolute guest path, the open
/// file, and its attributes as of the open (one fstat serves every check
/// and the file's identity for the page cache and the syscall sites).
pub(crate) struct Opened {
    pub abs: Vec<u8>,
    pub file: Arc<OpenFile>,
    pub stat: libc::stat,
}

/// Opens an executable by guest path, with execve's permission checks.
pub(crate) fn open_exec(kernel: &Kernel, me: u32, cwd: &[u8], file: &[u8]) -> Result<Opened, ExecError> {
    if file.is_empty() {
        return Err(Errno::ENOENT.into());
    }
    let abs = path::join(cwd, file);
    let host = open_program(kernel, me, &abs)?;
    let stat = hostfs::fstat(host.as_fd())?;
    let f = OpenFile::new(host, abs.clone(), false).with_stat(&stat);
    if f.kind() != FileKind::Regular {
        return Err(Errno::EACCES.into());
    }
    // The descriptor itself (AT_EMPTY_PATH), not /proc/self/fd/N: the
    // same check of the same file, without a walk through /proc.
    hostfs::faccessat(f.fd(), c"", libc::X_OK, libc::AT_EMPTY_PATH)?;
    Ok(Opened { abs, file: Arc::new(f), stat })
}

/// A new image, loaded and ready to replace a process's: nothing of the
/// process has changed yet (execve can still fail, or first end the
/// caller's other threads, Linux's de_thread, before it installs it).
pub struct Prepared {
    space: AddressSpace,
    program: RunningProgram,
    exe: Vec<u8>,
    exe_file: crate::kernel::process::ExeFile,
    cmdline: Vec<u8>,
    environ: Vec<u8>,
    start: StartState,
}

impl Prepared {
    /// The point of no return: the old image (if any) goes away here.
    /// Returns the register state the first guest thread starts from.
    pub fn install(self, process: &Process) -> StartState {
        process.replace_mm(std::sync::Arc::new(crate::sync::OrderedMutex::new(self.space)));
        *process.program.lock().unwrap() = Some(self.program);
        *process.exe.lock().unwrap() = self.exe;
        *process.exe_file.lock().unwrap() = self.exe_file;
        *process.cmdline.lock().unwrap() = self.cmdline.into();
        *process.environ.lock().unwrap() = self.environ.into();
        self.start
    }
}

/// Loads the program at `file` (following `#!` lines) for `process`,
/// without touching the process.
pub fn prepare(
    kernel: &Kernel,
    process: &Process,
    file: &[u8],
    argv: ArgStrings,
    envp: ArgStrings,
    ids: AuxIds,
) -> Result<Prepared, ExecError> {
    prepare_named(kernel, process, file, file, argv, envp, ids)
}

/// The same, the program named `execfn` for itself (AT_EXECFN): execveat
/// names a file relative to a descriptor `/dev/fd/N/name`, as Linux does.
pub fn prepare_named(
    kernel: &Kernel,
    process: &Process,
    file: &[u8],
    execfn: &[u8],
    mut argv: ArgStrings,
    envp: ArgStrings,
    ids: AuxIds,
) -> Result<Prepared, ExecError> {
    if argv.longest().max(envp.longest()) > MAX_ARG_STRLEN {
        return Err(Errno::E2BIG.into());
    }
    let cwd = process.cwd.lock().unwrap().clone();
    let execfn = execfn.to_vec();
    let mut target = file.to_vec();
    for _ in 0..=MAX_SCRIPT_DEPTH {
        let Opened { abs, file: f, stat } = open_exec(kernel, process.pid, &cwd, &target)?;
        // Linux's deny_write_access at open: a file open for writing cannot
        // run, a `#!` script no more than an ELF program (the script's mark
        // goes when its interpreter takes its place).
        let program = RunningProgram::of(&stat)?;
        let mut head = vec![0u8; HEAD_READ];
        let n = hostfs::pread_local(f.fd(), &mut head, 0)?;
        head.truncate(n);
        if head.starts_with(b"#!") {
            let line = &head[..n.min(BINPRM_BUF_SIZE)];
            let (interp, arg) = parse_shebang(line).ok_or(ExecError::new(Errno::ENOEXEC, "bad #! line"))?;
            // argv becomes: interpreter [arg] script original-args...
            let mut new_argv = ArgStrings::with_capacity(argv.count() + 2);
            new_argv.push(&interp);
            if let Some(arg) = &arg {
                new_argv.push(arg);
            }
            new_argv.push(&target);
            argv.iter().skip(1).for_each(|a| new_argv.push(a));
            argv = new_argv;
            target = interp;
            drop(program);
            continue;
        }
        let mut space = AddressSpace::new(kernel.phys);
        let image = elf::load(kernel, process.pid, &mut space, &f, &stat, &head, &cwd)?;
        let stack_limit = process.rlimits.lock().unwrap()[libc::RLIMIT_STACK as usize].rlim_cur;
        let (rsp, _stack) = stack::build(&mut space, &image, &argv, &envp, &execfn, ids, stack_limit, kernel)?;
        space.become_own_host();
        let regs = GuestRegs { rip: image.entry as u64, rsp: rsp as u64, ..GuestRegs::default() };
        // /proc/PID/exe names the file itself, as Linux's d_path of it:
        // symlinks resolved, inside the root (worked out when read).
        let exe_file = crate::kernel::process::ExeFile::Open(f.clone(), abs.as_slice().into());
        return Ok(Prepared {
            space,
            program,
            exe: abs,
            exe_file,
            cmdline: argv.into_bytes(),
            environ: envp.into_bytes(),
            start: StartState { regs, fs_base: 0, gs_base: 0, xstate: None, host_thread: None },
        });
    }
    Err(ExecError::new(Errno::ELOOP, "too many levels of #! interpreters"))
}

/// Splits a `#!` line into the interpreter and its optional single argument.
fn parse_shebang(head: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let line = &head[2..];
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    let line = &line[..end];
    let is_space = |b: &u8| *b == b' ' || *b == b'\t';
    let start = line.iter().position(|b| !is_space(b))?;
    let line = &line[start..];
    let interp_end = line.iter().position(is_space).unwrap_or(line.len());
    let interp = line[..interp_end].to_vec();
    let rest = &line[interp_end..];
    let arg = rest.iter().position(|b| !is_space(b)).map(|s| {
        let a = &rest[s..];
        let e = a.iter().rposition(|b| !is_space(b)).map_or(0, |e| e + 1);
        a[..e].to_vec()
    });
    (!interp.is_empty()).then_some((interp, arg))
}

#[cfg(test)]
mod tests {
    use super::parse_shebang;

    #[test]
    fn shebang_lines() {
        assert_eq!(parse_shebang(b"#!/bin/sh\n"), Some((b"/bin/sh".to_vec(), None)));
        assert_eq!(parse_shebang(b"#! /bin/sh  -x -y \nrest"), Some((b"/bin/sh".to_vec(), Some(b"-x -y".to_vec()))));
        assert_eq!(parse_shebang(b"#!\n"), None);
    }
}
