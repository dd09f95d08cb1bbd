//! A small /proc: what programs read about processes (/proc/PID/stat,
//! cmdline, comm, status, exe; /proc/self) and the system (meminfo, uptime,
//! loadavg). Files are generated when opened, directories listed from the
//! process table; nothing here reaches the host's own /proc.

use crate::abi::errno::Errno;
use crate::kernel::process::Process;
use crate::kernel::Kernel;

/// Who a /proc/PID path names.
#[derive(Clone, Copy, Debug)]
pub enum Who {
    Me,
    Pid(u32),
}

#[derive(Clone, Debug)]
pub enum ProcPath {
    Root,
    SelfLink,
    Pid(Who),
    Entry(Who, String),
    Top(String),
}

/// What a /proc path resolves to.
pub enum ProcNode {
    /// A directory: the root (None) or a process's.
    Dir(Option<u32>),
    File(Vec<u8>),
    Link(Vec<u8>),
}

const PID_ENTRIES: [&str; 5] = ["cmdline", "comm", "exe", "stat", "status"];
const TOP_ENTRIES: [&str; 3] = ["loadavg", "meminfo", "uptime"];

/// Parses a normalised absolute path under /proc.
pub fn parse(norm: &str) -> Option<ProcPath> {
    let rest = norm.strip_prefix("/proc")?;
    if rest.is_empty() {
        return Some(ProcPath::Root);
    }
    let rest = rest.strip_prefix('/')?;
    let mut parts = rest.splitn(2, '/');
    let first = parts.next()?;
    let who = match first {
        "self" | "thread-self" => Who::Me,
        p => match p.parse::<u32>() {
            Ok(pid) => Who::Pid(pid),
            Err(_) => return Some(ProcPath::Top(rest.to_string())),
        },
    };
    match (parts.next(), who) {
        (None, Who::Me) => Some(ProcPath::SelfLink),
        (None, w) => Some(ProcPath::Pid(w)),
        (Some(entry), w) => Some(ProcPath::Entry(w, entry.to_string())),
    }
}

fn pid_of(me: &Process, who: Who) -> u32 {
    match who {
        Who::Me => me.pid,
        Who::Pid(p) => p,
    }
}

/// The process's name: what its first thread set with PR_SET_NAME, else
/// its program's file name (as Linux sets comm at exec).
fn comm(p: &Process) -> Vec<u8> {
    if let Some(t) = p.threads.lock().unwrap().first() {
        let name = t.state.lock().unwrap().comm;
        let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        if len > 0 {
            return name[..len].to_vec();
        }
    }
    let exe = p.exe.lock().unwrap().clone();
    let base = exe.rsplit(|&b| b == b'/').next().unwrap_or(&exe).to_vec();
    base.into_iter().take(15).collect()
}

fn stat_line(kernel: &Kernel, p: &Process) -> Vec<u8> {
    let (pgid, sid) = kernel.tasks.ids(p.pid).unwrap_or((p.pid, p.pid));
    let state = if p.stopped.load(std::sync::atomic::Ordering::Relaxed) != 0 { 'T' } else { 'S' };
    let threads = p.threads.lock().unwrap().len().max(1);
    let mut line = format!("{} (", p.pid).into_bytes();
    line.extend(comm(p));
    line.extend(
        format!(
            ") {state} {} {pgid} {sid} 0 -1 0 0 0 0 0 0 0 0 0 20 0 {threads} 0 0 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
            kernel.tasks.ppid(p.pid)
        )
        .into_bytes(),
    );
    line
}

fn status(kernel: &Kernel, p: &Process) -> Vec<u8> {
    let c = p.cred();
    let state = if p.stopped.load(std::sync::atomic::Ordering::Relaxed) != 0 { "T (stopped)" } else { "S (sleeping)" };
    let groups: String = c.groups.iter().map(|g| format!("{g} ")).collect();
    let mut s = b"Name:\t".to_vec();
    s.extend(comm(p));
    s.extend(
        format!(
            "\nState:\t{state}\nTgid:\t{pid}\nPid:\t{pid}\nPPid:\t{}\nUid:\t{}\t{}\t{}\t{}\nGid:\t{}\t{}\t{}\t{}\nGroups:\t{groups}\nThreads:\t{}\nCapInh:\t{:016x}\nCapPrm:\t{:016x}\nCapEff:\t{:016x}\nCapBnd:\t{:016x}\nCapAmb:\t{:016x}\n",
            kernel.tasks.ppid(p.pid),
            c.uid,
            c.euid,
            c.suid,
            c.fsuid,
            c.gid,
            c.egid,
            c.sgid,
            c.fsgid,
            p.threads.lock().unwrap().len().max(1),
            c.cap_inheritable,
            c.cap_permitted,
            c.cap_effective,
            c.cap_bset,
            c.cap_ambient,
            pid = p.pid,
        )
        .into_bytes(),
    );
    s
}

fn top_file(kernel: &Kernel, name: &str) -> Option<Vec<u8>> {
    let text = match name {
        "meminfo" => {
            let kb = |b: usize| b / 1024;
            let (total, free) = (kernel.phys.total_bytes(), kernel.phys.free_bytes());
            format!(
                "MemTotal:       {:8} kB\nMemFree:        {:8} kB\nMemAvailable:   {:8} kB\nBuffers:               0 kB\nCached:                0 kB\nSwapTotal:             0 kB\nSwapFree:              0 kB\n",
                kb(total),
                kb(free),
                kb(free)
            )
        }
        "uptime" => {
            // Integer arithmetic, as Linux prints it (and nomu does no
            // floating point on guest threads).
            let up = kernel.boot_time.elapsed();
            let (s, cs) = (up.as_secs(), up.subsec_nanos() / 10_000_000);
            format!("{s}.{cs:02} {s}.{cs:02}\n")
        }
        "loadavg" => {
            let n = kernel.tasks.all_live().len();
            format!("0.00 0.00 0.00 1/{n} {n}\n")
        }
        _ => return None,
    };
    Some(text.into_bytes())
}

/// Resolves a /proc path for the process `me`.
pub fn resolve(kernel: &Kernel, me: &Process, path: &ProcPath) -> Result<ProcNode, Errno> {
    Ok(match path {
        ProcPath::Root => ProcNode::Dir(None),
        ProcPath::SelfLink => ProcNode::Link(me.pid.to_string().into_bytes()),
        ProcPath::Pid(who) => {
            let pid = pid_of(me, *who);
            kernel.tasks.ids(pid).ok_or(Errno::ENOENT)?;
            ProcNode::Dir(Some(pid))
        }
        ProcPath::Entry(who, entry) => {
            let pid = pid_of(me, *who);
            let p = kernel.tasks.process(pid).ok_or(Errno::ENOENT)?;
            match entry.as_str() {
                "stat" => ProcNode::File(stat_line(kernel, &p)),
                "status" => ProcNode::File(status(kernel, &p)),
                "cmdline" => ProcNode::File(p.cmdline.lock().unwrap().clone()),
                "comm" => {
                    let mut c = comm(&p);
                    c.push(b'\n');
                    ProcNode::File(c)
                }
                "exe" => ProcNode::Link(p.exe.lock().unwrap().clone()),
                _ => return Err(Errno::ENOENT),
            }
        }
        ProcPath::Top(name) => ProcNode::File(top_file(kernel, name).ok_or(Errno::ENOENT)?),
    })
}

/// The entries of a /proc directory, as (name, d_type).
pub fn list(kernel: &Kernel, dir: Option<u32>) -> Vec<(Vec<u8>, u8)> {
    const DT_DIR: u8 = 4;
    const DT_REG: u8 = 8;
    const DT_LNK: u8 = 10;
    let mut out = vec![(b".".to_vec(), DT_DIR), (b"..".to_vec(), DT_DIR)];
    match dir {
        None => {
            out.push((b"self".to_vec(), DT_LNK));
            out.extend(TOP_ENTRIES.iter().map(|n| (n.as_bytes().to_vec(), DT_REG)));
            let mut pids: Vec<u32> = kernel.tasks.all_live().iter().map(|p| p.pid).collect();
            pids.sort_unstable();
            out.extend(pids.into_iter().map(|p| (p.to_string().into_bytes(), DT_DIR)));
        }
        Some(_) => {
            out.extend(PID_ENTRIES.iter().map(|n| (n.as_bytes().to_vec(), if *n == "exe" { DT_LNK } else { DT_REG })));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_paths_parse() {
        assert!(matches!(parse("/proc"), Some(ProcPath::Root)));
        assert!(matches!(parse("/proc/self"), Some(ProcPath::SelfLink)));
        assert!(matches!(parse("/proc/12"), Some(ProcPath::Pid(Who::Pid(12)))));
        assert!(matches!(parse("/proc/self/stat"), Some(ProcPath::Entry(Who::Me, ref e)) if e == "stat"));
        assert!(matches!(parse("/proc/meminfo"), Some(ProcPath::Top(ref t)) if t == "meminfo"));
        assert!(parse("/procfoo").is_none());
        assert!(parse("/etc").is_none());
    }
}
