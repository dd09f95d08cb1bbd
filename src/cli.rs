//! The command line: `nomu run`, `nomu syscalls`, `nomu bench`.

use crate::entry::EntryKind;
use crate::kernel::process::ExitStatus;
use crate::kernel::{self, signal, Config};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

const USAGE: &str = "\
usage: nomu run [--entry PATH] [--root DIR] [--mem SIZE] [--trace] [--env K=V]... [--] PROGRAM [ARGS...]
       nomu info
       nomu syscalls [--all]
       nomu bench [--cpu N] [--rounds N] [--iters N | --time-ms N] [--reps N] [--systems A,B] [--ops A,B]
                  [--json FILE] [--svg FILE] [--bin PATH] [--timeout SECS] [--list]
       nomu help

run       runs PROGRAM (a path inside the guest root) inside nomu, with the
          caller's environment, stdin, stdout and stderr; exits with its status
  --entry PATH  how guest syscalls reach nomu: zpoline, seccomp, split or
                sysemu (default: the fastest that works here; see nomu info)
  --root DIR    the guest's root directory (default: /)
  --mem SIZE    guest physical memory, as UML's mem= (e.g. 512M, 2G; default 1G)
  --trace       print one strace-like line per guest syscall on stderr
  --env K=V     set (or override) an environment variable for the guest
info      the entry paths this host can run, and why the others cannot
syscalls  lists every syscall nomu implements and how completely (--all: and
          the ones that return ENOSYS)
bench     runs the benchmark (lmbench's operations) natively, under each
          nomu entry path, in UML and in gVisor when installed
          (scripts/install-comparisons.sh), alternating (--rounds, default 3,
          best time kept); prints ns/op, ratios to native and the goals,
          writes build/bench/results.json and .svg (--json, --svg)
  --cpu N         pin every system's runs to CPU N
  --time-ms N     each timed loop lasts about N ms (default 2); --iters N
                  fixes the iteration count instead
  --reps N        timed loops per operation, the best kept (default 100)
  --systems A,B   run only these (native always runs): native, nomu,
                  seccomp, zpoline, split, sysemu, uml, gvisor, ptrace, kvm...
  --ops A,B       run only these operations (--list shows them all)
";

const DEFAULT_MEM: usize = 1 << 30;

/// Parses UML-style sizes: a number with an optional K, M or G suffix.
pub fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1usize << 10),
        'm' | 'M' => (&s[..s.len() - 1], 1 << 20),
        'g' | 'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().ok()?.checked_mul(mult)
}

pub fn main() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let Some(cmd) = args.first().and_then(|a| a.to_str()) else {
        eprint!("{USAGE}");
        return 2;
    };
    match cmd {
        "run" => run(&args[1..]),
        "info" => info(),
        "syscalls" => {
            crate::syscall::table::print_table(args.iter().any(|a| a == "--all"));
            0
        }
        "bench" => crate::bench::main(&args[1..]),
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            0
        }
        _ => {
            eprintln!("nomu: unknown command '{cmd}'");
            eprint!("{USAGE}");
            2
        }
    }
}

fn run(args: &[std::ffi::OsString]) -> i32 {
    let mut root = PathBuf::from("/");
    let mut mem = DEFAULT_MEM;
    let mut trace = false;
    let mut entry = None;
    let mut env_overrides: Vec<Vec<u8>> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].to_string_lossy();
        let value = |i: usize| args.get(i + 1).ok_or(format!("nomu: {a} needs a value"));
        match a.as_ref() {
            "--" => {
                i += 1;
                break;
            }
            "--root" => match value(i) {
                Ok(v) => {
                    root = PathBuf::from(v);
                    i += 2;
                }
                Err(e) => return usage_error(&e),
            },
            "--mem" => match value(i).map(|v| v.to_string_lossy().to_string()) {
                Ok(v) => match parse_size(&v).filter(|&m| m >= 1 << 20 && m % 4096 == 0) {
                    Some(m) => {
                        mem = m;
                        i += 2;
                    }
                    None => return usage_error(&format!("nomu: bad --mem '{v}' (at least 1M, e.g. 512M or 2G)")),
                },
                Err(e) => return usage_error(&e),
            },
            "--trace" => {
                trace = true;
                i += 1;
            }
            "--entry" => match value(i).map(|v| v.to_string_lossy().to_string()) {
                Ok(v) => match EntryKind::parse(&v) {
                    Some(k) => {
                        entry = Some(k);
                        i += 2;
                    }
                    None => {
                        return usage_error(&format!(
                            "nomu: unknown entry path '{v}' (zpoline, seccomp, split, sysemu)"
                        ))
                    }
                },
                Err(e) => return usage_error(&e),
            },
            "--env" => match value(i) {
                Ok(v) if v.as_bytes().contains(&b'=') => {
                    env_overrides.push(v.as_bytes().to_vec());
                    i += 2;
                }
                Ok(v) => return usage_error(&format!("nomu: --env wants K=V, got '{}'", v.to_string_lossy())),
                Err(e) => return usage_error(&e),
            },
            s if s.starts_with("--") => return usage_error(&format!("nomu: unknown option {s}")),
            _ => break,
        }
    }
    let Some(program) = args.get(i) else {
        return usage_error("nomu: no PROGRAM given");
    };
    let argv: Vec<Vec<u8>> = args[i..].iter().map(|a| a.as_bytes().to_vec()).collect();
    // The in-process paths run nomu's kernel on guest threads (see
    // reexec_with_glibc_off_avx).
    let in_process = |k: EntryKind| matches!(k, EntryKind::Zpoline | EntryKind::Seccomp);
    let uses_in_process_path = match entry {
        Some(k) => in_process(k),
        None => EntryKind::ALL.into_iter().find(|k| k.availability().is_ok()).is_some_and(in_process),
    };
    if uses_in_process_path && std::env::var_os(ORIGINAL_TUNABLES).is_none() {
        return reexec_with_glibc_off_avx();
    }
    let mut envp: Vec<Vec<u8>> = guest_environment();
    for kv in env_overrides {
        let key_len = kv.iter().position(|&b| b == b'=').unwrap() + 1;
        envp.retain(|e| !e.starts_with(&kv[..key_len]));
        envp.push(kv);
    }

    let kernel = match kernel::boot(Config { root, mem, trace, entry }) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("nomu: {e}");
            return 1;
        }
    };
    let status = match kernel.run_init(program.as_bytes(), argv, envp) {
        Ok(s) => s,
        Err(e) => {
            let prog = program.to_string_lossy();
            if e.message.is_empty() {
                eprintln!("nomu: {prog}: {}", e.errno.description());
            } else {
                eprintln!("nomu: {prog}: {} ({})", e.message, e.errno.description());
            }
            // What a shell answers: 127 not found, 126 found but not runnable.
            return if e.errno == crate::kernel::errno::Errno::ENOENT { 127 } else { 126 };
        }
    };
    match status {
        ExitStatus::Code(c) => c,
        ExitStatus::Signal { signo, core } => {
            eprintln!("{}{}", signal::description(signo), if core { " (core dumped)" } else { "" });
            128 + signo
        }
    }
}

/// Where a re-executed nomu keeps the caller's own GLIBC_TUNABLES ("-" for
/// none), to hand the guest the environment it was given.
const ORIGINAL_TUNABLES: &str = "NOMU_ORIGINAL_GLIBC_TUNABLES";

/// glibc picks AVX and AVX-512 versions of memcpy and friends on CPUs that
/// have them. On the in-process paths nomu's kernel runs on guest threads,
/// so nomu must not run those: the zpoline path saves only the vector
/// registers nomu's own code may touch (xmm0-15, MXCSR), and on the seccomp
/// path AVX-512 registers left in use by nomu make every later host signal
/// frame bigger (signal delivery went from 5.4 to 4.4 us with this). nomu
/// re-executes itself once with glibc told to use its SSE2 versions.
fn reexec_with_glibc_off_avx() -> i32 {
    use std::os::unix::process::CommandExt;
    const OFF_AVX: &str = "glibc.cpu.hwcaps=-AVX,-AVX2,-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-EVEX,\
                           -AVX_Fast_Unaligned_Load";
    let original = std::env::var("GLIBC_TUNABLES").ok();
    let tunables = match &original {
        Some(t) if !t.is_empty() => format!("{t}:{OFF_AVX}"),
        _ => OFF_AVX.to_string(),
    };
    let err = std::process::Command::new("/proc/self/exe")
        .arg0(std::env::args_os().next().unwrap_or_default())
        .args(std::env::args_os().skip(1))
        .env("GLIBC_TUNABLES", tunables)
        .env(ORIGINAL_TUNABLES, original.as_deref().unwrap_or("-"))
        .exec();
    eprintln!("nomu: re-executing itself with glibc off AVX: {err}");
    1
}

/// nomu's environment as the guest gets it: without what nomu added for
/// its own re-execution.
fn guest_environment() -> Vec<Vec<u8>> {
    let original = std::env::var(ORIGINAL_TUNABLES).ok();
    std::env::vars_os()
        .filter_map(|(k, v)| {
            if k == ORIGINAL_TUNABLES {
                return None;
            }
            if k == "GLIBC_TUNABLES" {
                match original.as_deref() {
                    Some("-") => return None,
                    Some(o) => return Some([b"GLIBC_TUNABLES=", o.as_bytes()].concat()),
                    None => {}
                }
            }
            Some([k.as_bytes(), b"=", v.as_bytes()].concat())
        })
        .collect()
}

/// `nomu info`: which entry paths work on this host, and the default.
fn info() -> i32 {
    println!("entry paths (fastest first):");
    let mut default = None;
    for kind in EntryKind::ALL {
        match kind.availability() {
            Ok(()) => {
                default.get_or_insert(kind);
                println!("  {:<8} available      {}", kind.name(), kind.summary());
            }
            Err(why) => println!("  {:<8} unavailable    {why}", kind.name()),
        }
    }
    match default {
        Some(k) => println!("default: {}", k.name()),
        None => println!("default: none (nomu cannot run guests here)"),
    }
    0
}

fn usage_error(msg: &str) -> i32 {
    eprintln!("{msg}");
    eprint!("{USAGE}");
    2
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_like_uml_mem() {
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("64k"), Some(64 << 10));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
    }
}
