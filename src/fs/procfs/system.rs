//! /proc's system-wide files: memory and load as nomu's, the CPUs as the
//! host's, and the kernel's names and limits as nomu's uname and pid
//! allocator have them.

use super::Top;
use crate::abi::errno::Errno;
use crate::host::fs as hostfs;
use crate::kernel::Kernel;

pub fn contents(kernel: &Kernel, file: Top) -> Result<Vec<u8>, Errno> {
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        [bytes, b"\n".to_vec()].concat()
    };
    Ok(match file {
        Top::CpuInfo => hostfs::read_file(c"/proc/cpuinfo")?,
        Top::Stat => stat(kernel, &hostfs::read_file(c"/proc/stat")?).into_bytes(),
        Top::MemInfo => {
            let kb = |b: usize| b / 1024;
            // --mem and its commit account (mm::commit): what is not
            // committed is free, and the limit is Linux's CommitLimit with
            // no swap and a ratio of 100%.
            let (total, free) = (kernel.phys.total_bytes(), kernel.phys.free_bytes());
            // The page cache's pages count against --mem (mm::cache) but
            // are nobody's commitment; those no mapping holds are available.
            let cached = kernel.page_cache.bytes();
            let available = free + kernel.page_cache.unused_bytes();
            let committed = kernel.phys.commit().committed().saturating_sub(cached);
            format!(
                "MemTotal:       {:8} kB\nMemFree:        {:8} kB\nMemAvailable:   {:8} kB\nBuffers:               0 kB\nCached:         {:8} kB\nSwapTotal:             0 kB\nSwapFree:              0 kB\nCommitLimit:    {:8} kB\nCommitted_AS:   {:8} kB\n",
                kb(total),
                kb(free),
                kb(available),
                kb(cached),
                kb(total),
                kb(committed)
            )
            .into_bytes()
        }
        Top::Uptime => {
            // Integer arithmetic, as Linux prints it (and nomu does no
            // floating point on guest threads).
            let up = kernel.boot_time.elapsed();
            let (s, cs) = (up.as_secs(), up.subsec_nanos() / 10_000_000);
            format!("{s}.{cs:02} {s}.{cs:02}\n").into_bytes()
        }
        Top::LoadAvg => {
            let n = kernel.tasks.all_live().len();
            format!("0.00 0.00 0.00 1/{n} {}\n", kernel.pids.last()).into_bytes()
        }
        Top::OsType => field(&kernel.uname().sysname),
        Top::OsRelease => field(&kernel.uname().release),
        Top::Hostname => field(&kernel.uname().nodename),
        Top::PidMax => format!("{}\n", crate::kernel::process::PID_MAX).into_bytes(),
        // nomu's --mem is strict accounting (mm::commit): mode 2, which
        // also tells glibc to shrink an arena with a PROT_NONE mapping
        // (whose charge goes) rather than MADV_DONTNEED (whose stays).
        Top::OvercommitMemory => b"2\n".to_vec(),
        Top::SysvIpcMsg => kernel.ipc.msg.proc_lines(),
        Top::SysvIpcSem => kernel.ipc.sem.proc_lines(),
        Top::SysvIpcShm => kernel.ipc.shm.proc_lines(),
        _ => return Err(Errno::EINVAL),
    })
}

/// The host's /proc/stat (its CPUs' time counters, interrupts, context
/// switches), with nomu's boot time and process counts.
fn stat(kernel: &Kernel, host: &[u8]) -> String {
    let host = String::from_utf8_lossy(host);
    let mut out = String::with_capacity(host.len());
    for line in host.lines() {
        let key = line.split(' ').next().unwrap_or("");
        let line = match key {
            "btime" => format!("btime {}", super::boot_wall(kernel)),
            "processes" => format!("processes {}", kernel.pids.allocated()),
            "procs_running" => "procs_running 1".to_string(),
            "procs_blocked" => "procs_blocked 0".to_string(),
            _ => line.to_string(),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}
