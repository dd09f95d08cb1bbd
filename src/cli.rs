//! The command line (clap): `nomu run`, `info`, `syscalls`, `bench`,
//! `completions`, with `--help` for each and `--version`.

use crate::entry::EntryKind;
use crate::kernel::process::ExitStatus;
use crate::kernel::{self, signal, Config};
use clap::builder::PossibleValuesParser;
use clap::{value_parser, Arg, ArgAction, ArgMatches, Command};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

const BENCH_HELP: &str = "\
Runs the benchmark (lmbench's operations) natively, under each nomu entry
path, in UML and in gVisor when installed (scripts/install-comparisons.sh),
alternating (--rounds, default 3, best time kept); prints ns/op, ratios to
native and the goals, writes build/bench/results.json and .svg.

Options:
  --cpu N         pin every system's runs to CPU N
  --rounds N      rounds of every system (default 3)
  --time-ms N     each timed loop lasts about N ms (default 2); --iters N
                  fixes the iteration count instead
  --reps N        timed loops per operation, the best kept (default 100)
  --systems A,B   run only these (native always runs): native, nomu,
                  seccomp, zpoline, split, sysemu, uml, gvisor, ptrace, kvm...
  --ops A,B       run only these operations (--list shows them all)
  --json FILE, --svg FILE   where the results go
  --bin PATH      the benchmark program (default: build/bench/syscall_bench)
  --timeout SECS  how long one system's run may take
  --populate      instead: seed 003's populate benchmark of memfd_secret
                  memory (64 and 256 MiB, one thread and with a second one
                  spinning) under each `nomu run --unmapped` policy
";

const DEFAULT_MEM: usize = 1 << 30;

/// Parses UML-style sizes: a number with an optional K, M, G or T suffix.
pub fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1usize << 10),
        'm' | 'M' => (&s[..s.len() - 1], 1 << 20),
        'g' | 'G' => (&s[..s.len() - 1], 1 << 30),
        't' | 'T' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    num.parse::<usize>().ok()?.checked_mul(mult)
}

/// --mem's value: a size of at least 1M, whole pages, below the top of a
/// 47-bit address space.
fn parse_mem(v: &str) -> Result<usize, String> {
    let m = parse_size(v).ok_or("a size such as 512M, 2G or 1T")?;
    if m < 1 << 20 || m % 4096 != 0 {
        return Err("at least 1M, in whole 4K pages".into());
    }
    if m > 64 << 40 {
        return Err("at most 64T".into());
    }
    Ok(m)
}

fn parse_env(v: &str) -> Result<Vec<u8>, String> {
    if v.contains('=') {
        Ok(v.as_bytes().to_vec())
    } else {
        Err("wants K=V".into())
    }
}

/// The whole command line.
fn command() -> Command {
    Command::new("nomu")
        .version(env!("CARGO_PKG_VERSION"))
        .about("A no-MMU user-mode kernel: unmodified x86-64 Linux programs in one host process")
        .subcommand_required(true)
        .arg_required_else_help(true)
        .subcommand(
            Command::new("run")
                .about("Runs PROGRAM (a path inside the guest root, or a name looked up in PATH) inside nomu, with the caller's environment, stdin, stdout and stderr; exits with its status")
                .arg(
                    Arg::new("entry")
                        .long("entry")
                        .value_name("PATH")
                        .value_parser(PossibleValuesParser::new(EntryKind::ALL.map(|k| k.name())))
                        .help("How guest syscalls reach nomu (default: the first that works here of those `nomu info` lists)"),
                )
                .arg(
                    Arg::new("root")
                        .long("root")
                        .value_name("DIR")
                        .value_parser(value_parser!(PathBuf))
                        .default_value("/")
                        .help("The guest's root directory"),
                )
                .arg(
                    Arg::new("mem")
                        .long("mem")
                        .value_name("SIZE")
                        .value_parser(parse_mem)
                        .help("Guest physical memory, as UML's mem= (e.g. 512M, 2G, 1T; default 1G)"),
                )
                .arg(
                    Arg::new("unmapped")
                        .long("unmapped")
                        .value_name("POLICY")
                        .value_parser(PossibleValuesParser::new(["pooled", "per-page", "never"]))
                        .help("How memfd_secret's pages leave the direct map: pooled pageblocks (default), page by page, or never (the benchmark's baselines)"),
                )
                .arg(
                    Arg::new("no-fork")
                        .long("no-fork")
                        .action(ArgAction::SetTrue)
                        .help("Strict no-MMU: fork and clone without CLONE_VM fail with EINVAL"),
                )
                .arg(
                    Arg::new("strict-fork")
                        .long("strict-fork")
                        .action(ArgAction::SetTrue)
                        .help("Charge a forked child's whole copy of its parent's memory at fork, as Linux's vm.overcommit_memory=2 would: fork fails with ENOMEM past --mem, where by default the copy is charged as it is made and a child whose copy does not fit is killed"),
                )
                .arg(
                    Arg::new("trace")
                        .long("trace")
                        .action(ArgAction::SetTrue)
                        .help("Print one strace-like line per guest syscall on stderr"),
                )
                .arg(
                    Arg::new("env")
                        .long("env")
                        .value_name("K=V")
                        .action(ArgAction::Append)
                        .value_parser(parse_env)
                        .help("Set (or override) an environment variable for the guest"),
                )
                .arg(
                    Arg::new("program")
                        .value_name("PROGRAM")
                        .required(true)
                        .value_parser(value_parser!(OsString))
                        .help("The program to run: a path inside the root, or a name looked up in PATH there"),
                )
                .arg(
                    Arg::new("args")
                        .value_name("ARGS")
                        .num_args(0..)
                        .trailing_var_arg(true)
                        .allow_hyphen_values(true)
                        .value_parser(value_parser!(OsString))
                        .help("Its arguments"),
                ),
        )
        .subcommand(Command::new("info").about("The entry paths this host can run, and why the others cannot"))
        .subcommand(
            Command::new("syscalls")
                .about("Lists every syscall nomu implements and how completely")
                .arg(Arg::new("all").long("all").action(ArgAction::SetTrue).help("And the ones that return ENOSYS")),
        )
        .subcommand(
            Command::new("bench")
                .about("Runs the benchmark natively, under each entry path, in UML and gVisor")
                .after_help(BENCH_HELP)
                .arg(
                    Arg::new("options")
                        .value_name("OPTIONS")
                        .num_args(0..)
                        .trailing_var_arg(true)
                        .allow_hyphen_values(true)
                        .value_parser(value_parser!(OsString)),
                ),
        )
        .subcommand(
            Command::new("completions").about("Prints a shell completion script").arg(
                Arg::new("shell")
                    .value_name("SHELL")
                    .required(true)
                    .value_parser(value_parser!(clap_complete::Shell)),
            ),
        )
}

pub fn main() -> i32 {
    let matches = match command().try_get_matches() {
        Ok(m) => m,
        Err(e) => {
            // Help and version go to stdout with status 0; errors are one
            // line and a hint on stderr, status 2.
            let _ = e.print();
            return e.exit_code();
        }
    };
    match matches.subcommand() {
        Some(("run", m)) => run(m),
        Some(("info", _)) => info(),
        Some(("syscalls", m)) => {
            crate::syscall::table::print_table(m.get_flag("all"));
            0
        }
        Some(("bench", m)) => {
            let options: Vec<OsString> = m.get_many::<OsString>("options").into_iter().flatten().cloned().collect();
            crate::bench::main(&options)
        }
        Some(("completions", m)) => {
            let shell = *m.get_one::<clap_complete::Shell>("shell").unwrap();
            clap_complete::generate(shell, &mut command(), "nomu", &mut std::io::stdout());
            0
        }
        _ => unreachable!("clap requires a subcommand"),
    }
}

fn run(m: &ArgMatches) -> i32 {
    let root = m.get_one::<PathBuf>("root").unwrap().clone();
    let mem = m.get_one::<usize>("mem").copied().unwrap_or(DEFAULT_MEM);
    let trace = m.get_flag("trace");
    let unmapped = m
        .get_one::<String>("unmapped")
        .and_then(|p| crate::mm::phys::UnmappedPolicy::parse(p))
        .unwrap_or(crate::mm::phys::UnmappedPolicy::Pooled);
    let fork = !m.get_flag("no-fork");
    let strict_fork = m.get_flag("strict-fork");
    let entry = m.get_one::<String>("entry").map(|n| EntryKind::parse(n).unwrap());
    let env_overrides: Vec<Vec<u8>> = m.get_many::<Vec<u8>>("env").into_iter().flatten().cloned().collect();
    let program = m.get_one::<OsString>("program").unwrap();
    let argv: Vec<Vec<u8>> = std::iter::once(program)
        .chain(m.get_many::<OsString>("args").into_iter().flatten())
        .map(|a| a.as_bytes().to_vec())
        .collect();
    // The in-process paths run nomu's kernel on guest threads (see
    // reexec_with_glibc_off_avx).
    let in_process = |k: EntryKind| matches!(k, EntryKind::Zpoline | EntryKind::Rewrite | EntryKind::Seccomp);
    let uses_in_process_path = match entry {
        Some(k) => in_process(k),
        None => EntryKind::ALL.into_iter().find(|k| k.availability().is_ok()).is_some_and(in_process),
    };
    if uses_in_process_path && std::env::var_os(ORIGINAL_TUNABLES).is_none() {
        return reexec_with_glibc_off_avx();
    }
    let mut envp: Vec<Vec<u8>> = guest_environment();
    for kv in env_overrides {
        set_env(&mut envp, kv);
    }

    // The caller waits for the front, which exits as the first program
    // did, also when that leaves processes running (host::front).
    let front = crate::host::front::fork_front(&kernel::SIGNALS_FOR_GUESTS);
    let kernel = match kernel::boot(Config { root, mem, trace, entry, unmapped, fork, strict_fork }) {
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
            return if e.errno == crate::abi::errno::Errno::ENOENT { 127 } else { 126 };
        }
    };
    let code = match status {
        ExitStatus::Code(c) => c,
        ExitStatus::Signal { signo, core } => {
            // What bash prints for a job the signal ended: nothing for
            // SIGPIPE (the usual end of a writer whose reader went away).
            if signo != libc::SIGPIPE {
                eprintln!("{}{}", signal::description(signo), if core { " (core dumped)" } else { "" });
            }
            128 + signo
        }
    };
    // What the first program left running goes on; the caller does not
    // wait for it (the front exits now), unless there is no front.
    let detached = match front {
        Some(front) if kernel.any_guest_alive() => {
            front.release(code);
            true
        }
        _ => false,
    };
    kernel.wait_for_background(detached && !trace);
    code
}

/// Sets `kv` (K=V) in an environment as setenv does: in the place of the
/// variable it replaces (and of any duplicates, which go), else at the end.
fn set_env(envp: &mut Vec<Vec<u8>>, kv: Vec<u8>) {
    let key_len = kv.iter().position(|&b| b == b'=').unwrap() + 1;
    let same = |e: &Vec<u8>| e.starts_with(&kv[..key_len]);
    match envp.iter().position(same) {
        Some(i) => {
            let mut first = true;
            envp.retain(|e| !same(e) || std::mem::take(&mut first));
            envp[i] = kv;
        }
        None => envp.push(kv),
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
    const OFF_AVX: &str = "glibc.cpu.hwcaps=-AVX,-AVX2,-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-EVEX,\
                           -AVX_Fast_Unaligned_Load";
    let original = std::env::var("GLIBC_TUNABLES").ok();
    let tunables = match &original {
        Some(t) if !t.is_empty() => format!("{t}:{OFF_AVX}"),
        _ => OFF_AVX.to_string(),
    };
    // The caller's environment in its order (the guest gets it so), with
    // GLIBC_TUNABLES set in its place and the original kept at the end.
    let mut envp: Vec<Vec<u8>> =
        std::env::vars_os().map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat()).collect();
    set_env(&mut envp, format!("GLIBC_TUNABLES={tunables}").into_bytes());
    set_env(&mut envp, format!("{ORIGINAL_TUNABLES}={}", original.as_deref().unwrap_or("-")).into_bytes());
    let c = |b: &[u8]| std::ffi::CString::new(b).unwrap_or_default();
    let argv: Vec<std::ffi::CString> = std::env::args_os().map(|a| c(a.as_bytes())).collect();
    let envp: Vec<std::ffi::CString> = envp.iter().map(|e| c(e)).collect();
    let err = crate::host::sys::execve(c"/proc/self/exe", &argv, &envp);
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
    println!("entry paths (the first available is the default):");
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

#[cfg(test)]
mod tests {
    use super::{parse_size, set_env};

    #[test]
    fn env_overrides_keep_their_place() {
        let mut env: Vec<Vec<u8>> = [&b"B=1"[..], b"A=2", b"B=3", b"C=4"].iter().map(|e| e.to_vec()).collect();
        set_env(&mut env, b"B=9".to_vec());
        set_env(&mut env, b"Z=0".to_vec());
        assert_eq!(env, [&b"B=9"[..], b"A=2", b"C=4", b"Z=0"]);
    }

    #[test]
    fn sizes_parse_like_uml_mem() {
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("64k"), Some(64 << 10));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("1T"), Some(1 << 40));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
    }
}
