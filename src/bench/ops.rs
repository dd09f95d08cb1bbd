//! The operations bench/syscall_bench.c measures, and parsing its output.

use std::collections::BTreeMap;

/// One operation of the benchmark, in the order of lmbench's table.
pub struct Op {
    /// The benchmark's name for it (`syscall_bench OP`).
    pub name: &'static str,
    /// What it is, for people.
    pub label: &'static str,
}

pub const OPS: &[Op] = &[
    Op { name: "getpid", label: "getpid (zpoline, rewrite: answered in the stub)" },
    Op { name: "getppid", label: "null syscall (getppid, through the kernel)" },
    Op { name: "read_null", label: "read /dev/null" },
    Op { name: "write_null", label: "write /dev/null" },
    Op { name: "fstat_null", label: "fstat /dev/null" },
    Op { name: "fstat", label: "fstat (regular file)" },
    Op { name: "stat", label: "stat" },
    Op { name: "open_close", label: "open + close" },
    Op { name: "select_10", label: "select, 10 fds" },
    Op { name: "select_100", label: "select, 100 fds" },
    Op { name: "sig_install", label: "signal install (sigaction)" },
    Op { name: "signal", label: "signal delivery (tkill self)" },
    Op { name: "pipe_rt", label: "pipe round trip, 2 processes" },
    Op { name: "vfork_exit", label: "vfork + _exit + wait" },
    Op { name: "vfork_exec", label: "vfork + execve + wait" },
    Op { name: "spawn", label: "posix_spawn + wait" },
    Op { name: "spawn_sh", label: "posix_spawn sh -c :" },
    Op { name: "wake_futex", label: "futex wake round trip, 2 threads" },
    Op { name: "wake_sigsuspend", label: "sigsuspend woken by a thread's signal" },
    Op { name: "wake_sigtimedwait", label: "sigwaitinfo woken by a thread's signal" },
    Op { name: "wake_stop_cont", label: "wait4 woken by a child's stop + its SIGCONT" },
    Op { name: "thread", label: "pthread_create + pthread_join" },
    Op { name: "exit_0", label: "exit + wait, child touched 0" },
    Op { name: "exit_1m", label: "exit + wait, child touched 1 MiB" },
    Op { name: "exit_16m", label: "exit + wait, child touched 16 MiB" },
    Op { name: "exit_256m", label: "exit + wait, child touched 256 MiB" },
    Op { name: "exit_map4g", label: "exit + wait, mapped 4 GiB, touched 7 pages" },
    Op { name: "exit_threads", label: "exit_group + wait, 32 threads" },
    Op { name: "fork_exit_1m", label: "fork + _exit + wait, 1 MiB touched" },
    Op { name: "fork_exit_64m", label: "fork + _exit + wait, 64 MiB touched" },
    Op { name: "fork_exec", label: "fork + execve + wait, 1 MiB touched" },
    Op { name: "forked_getppid", label: "null syscall (getppid) in a forked child" },
    Op { name: "forked_fstat", label: "fstat (regular file) in a forked child" },
    Op { name: "subst_1000", label: "ash loop of 1000 $(echo $i)" },
];

/// The raw SIGSYS round trip, measured natively only: the floor of any
/// seccomp-trapped syscall.
pub const SIGSYS_RAW: &str = "sigsys_raw";

/// Ops with a SIGSYS emulator floor, measured natively only (as
/// `sigsys_floor_OP`): the op's syscalls trapped by seccomp and answered by
/// a handler that makes only the op's own host calls and returns as nomu's
/// seccomp path does. What any SIGSYS-based emulator pays on the host. A
/// wake-up's floor traps every syscall of both threads but the signal
/// handler's rt_sigreturn, so it is a little low there.
pub const FLOOR_OPS: &[&str] =
    &["getpid", "fstat", "stat", "open_close", "wake_futex", "wake_sigsuspend", "wake_sigtimedwait"];

/// The benchmark's name for `op`'s floor, if it has one.
pub fn floor_op(op: &str) -> Option<String> {
    FLOOR_OPS.contains(&op).then(|| format!("sigsys_floor_{op}"))
}

/// Host-backed ops with a filter floor, measured natively only (as
/// `filter_OP`): the op itself in a child that installed nomu's own
/// seccomp filter, so each host call pays the filter as every host call
/// nomu makes does. What zpoline and rewrite cannot go below; their time
/// over it is nomu's own.
pub const FILTER_OPS: &[&str] = &[
    "read_null",
    "write_null",
    "fstat_null",
    "fstat",
    "stat",
    "open_close",
    "select_10",
    "select_100",
    "sig_install",
    "signal",
    "pipe_rt",
];

/// The benchmark's name for `op`'s filter floor, if it has one.
pub fn filter_op(op: &str) -> Option<String> {
    FILTER_OPS.contains(&op).then(|| format!("filter_{op}"))
}

pub fn find(name: &str) -> Option<&'static Op> {
    OPS.iter().find(|o| o.name == name)
}

/// An operation's best time in ns, or why there is none.
pub type Outcome = Result<f64, String>;

/// What one run of the benchmark printed: results, and the op it was on
/// when its output ended (the progress line's `begin=OP`).
#[derive(Default, Debug)]
pub struct Parsed {
    pub results: BTreeMap<String, Outcome>,
    pub last_begun: Option<String>,
}

/// One line of the benchmark's output. Lines may come from a console that
/// ends them with \r or puts a prefix before them (UML), so the fields are
/// looked for anywhere in the line.
#[derive(PartialEq, Debug)]
pub enum Line {
    Begin(String),
    Result(String, Outcome),
    Other,
}

pub fn parse_line(line: &str) -> Line {
    let line = line.trim_end_matches(['\r', '\n']);
    if let Some(i) = line.find("begin=") {
        let name = line[i + 6..].split_whitespace().next().unwrap_or("");
        return Line::Begin(name.to_string());
    }
    let Some(i) = line.find("op=") else {
        return Line::Other;
    };
    let line = &line[i..];
    let mut op = None;
    let mut min = None;
    for field in line.split_whitespace() {
        match field.split_once('=') {
            Some(("op", v)) => op = Some(v.to_string()),
            Some(("min_ns", v)) => min = v.parse::<f64>().ok(),
            _ => {}
        }
    }
    let Some(op) = op else {
        return Line::Other;
    };
    let outcome = match min {
        Some(m) => Ok(m),
        None => {
            // error="..." or unavailable="...": the message may hold spaces.
            let quoted = line.split_once('"').and_then(|(_, r)| r.rsplit_once('"')).map(|(m, _)| m.to_string());
            let kind = if line.contains("unavailable=") { "unavailable" } else { "error" };
            Err(match quoted {
                Some(m) => format!("{kind}: {m}"),
                None => "no result".to_string(),
            })
        }
    };
    Line::Result(op, outcome)
}

/// Keeps each op's best (smallest) time over rounds; an error replaces
/// nothing that was measured.
pub fn keep_best(best: &mut BTreeMap<String, Outcome>, new: BTreeMap<String, Outcome>) {
    for (op, r) in new {
        match (best.get(&op), &r) {
            (Some(Ok(old)), Ok(n)) if old <= n => {}
            (Some(Ok(_)), Err(_)) => {}
            _ => {
                best.insert(op, r);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse() {
        assert_eq!(
            parse_line("op=getpid iters=300298 min_ns=206.6 median_ns=233.3"),
            Line::Result("getpid".into(), Ok(206.6))
        );
        // UML's console: \r\n endings.
        assert_eq!(parse_line("op=stat iters=5 min_ns=1e3 median_ns=2\r"), Line::Result("stat".into(), Ok(1000.0)));
        assert_eq!(
            parse_line("op=sigsys_raw unavailable=\"fork: Invalid argument\""),
            Line::Result("sigsys_raw".into(), Err("unavailable: fork: Invalid argument".into()))
        );
        assert_eq!(
            parse_line("op=stat error=\"stat /tmp/x: No such file\""),
            Line::Result("stat".into(), Err("error: stat /tmp/x: No such file".into()))
        );
        assert_eq!(parse_line("begin=select_10\r"), Line::Begin("select_10".into()));
        assert_eq!(parse_line("reboot: System halted"), Line::Other);
    }

    #[test]
    fn best_is_kept() {
        let mut best = BTreeMap::new();
        keep_best(&mut best, BTreeMap::from([("a".to_string(), Ok(5.0)), ("b".to_string(), Err("x".into()))]));
        keep_best(&mut best, BTreeMap::from([("a".to_string(), Ok(7.0)), ("b".to_string(), Ok(3.0))]));
        keep_best(&mut best, BTreeMap::from([("a".to_string(), Err("y".into())), ("b".to_string(), Ok(4.0))]));
        assert_eq!(best["a"], Ok(5.0));
        assert_eq!(best["b"], Ok(3.0));
    }

    #[test]
    fn every_op_is_in_the_c_benchmark() {
        let src = include_str!("../../bench/syscall_bench.c");
        for op in OPS {
            assert!(src.contains(&format!("{{\"{}\", loop_", op.name)), "{} missing", op.name);
        }
        for op in FILTER_OPS {
            assert!(find(op).is_some(), "{op} is no op");
            assert!(src.contains(&format!("{{\"filter_{op}\", loop_")), "filter_{op} missing");
        }
    }
}
