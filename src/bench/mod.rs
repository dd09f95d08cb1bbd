//! `nomu bench`: the operations of lmbench's table (bench/syscall_bench.c,
//! one static-PIE binary) run natively, under each nomu entry path, in UML
//! and in gVisor when they are installed, in alternating rounds with each
//! operation's best time kept. Prints ns per operation and ratios to native,
//! checks the goals, writes JSON and an SVG chart.
//!
//! - `ops`: the operations and the benchmark's output format;
//! - `systems`: how each system is probed and run;
//! - `report`: tables, goals, JSON;
//! - `svg`: the chart.

mod ops;
mod populate;
mod report;
mod svg;
mod systems;

use ops::{filter_op, floor_op, keep_best, OPS, SIGSYS_RAW};
use report::{Machine, Report, State, SystemReport};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;
use systems::{Ctx, System};

const USAGE: &str = "\
usage: nomu bench [--cpu N] [--rounds N] [--iters N | --time-ms N] [--reps N] [--systems A,B] [--ops A,B]
                  [--json FILE] [--svg FILE] [--bin PATH] [--timeout SECS] [--list]
       nomu bench --populate [--rounds N]    (memfd_secret's populate benchmark, seed 003)";

struct Options {
    bin: Option<PathBuf>,
    bench_args: Vec<String>,
    rounds: u32,
    cpu: Option<usize>,
    json: Option<PathBuf>,
    svg: Option<PathBuf>,
    systems: Option<Vec<String>>,
    ops: Option<Vec<String>>,
    timeout: Duration,
    list: bool,
    populate: bool,
}

fn parse_args(args: &[std::ffi::OsString]) -> Result<Options, String> {
    let mut o = Options {
        bin: None,
        bench_args: Vec::new(),
        rounds: 3,
        cpu: None,
        json: None,
        svg: None,
        systems: None,
        ops: None,
        timeout: Duration::from_secs(600),
        list: false,
        populate: false,
    };
    // Passed to the benchmark as they are.
    let (mut count, mut reps) = (None, None);
    let mut it = args.iter().map(|a| a.to_string_lossy().to_string());
    while let Some(a) = it.next() {
        if a == "--list" {
            o.list = true;
            continue;
        }
        if a == "--populate" {
            o.populate = true;
            continue;
        }
        let v = it.next().ok_or(format!("{a} needs a value"))?;
        let num = |v: &str| v.parse::<u64>().ok().filter(|&n| n > 0).ok_or(format!("bad {a} value '{v}'"));
        let list = |v: &str| v.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect::<Vec<_>>();
        match a.as_str() {
            "--bin" => o.bin = Some(PathBuf::from(v)),
            "--iters" | "--time-ms" => {
                num(&v)?;
                count = Some([a.clone(), v]);
            }
            "--reps" => {
                num(&v)?;
                reps = Some(["--reps".to_string(), v]);
            }
            "--rounds" => o.rounds = num(&v)? as u32,
            "--cpu" => o.cpu = Some(v.parse().map_err(|_| format!("bad --cpu value '{v}'"))?),
            "--json" => o.json = Some(PathBuf::from(v)),
            "--svg" => o.svg = Some(PathBuf::from(v)),
            "--systems" => o.systems = Some(list(&v)),
            "--ops" => {
                let l = list(&v);
                if let Some(bad) = l.iter().find(|n| ops::find(n).is_none()) {
                    let names: Vec<&str> = OPS.iter().map(|o| o.name).collect();
                    return Err(format!("unknown op '{bad}' (ops: {})", names.join(" ")));
                }
                o.ops = Some(l);
            }
            "--timeout" => o.timeout = Duration::from_secs(num(&v)?),
            _ => return Err(format!("unknown option {a}")),
        }
    }
    o.bench_args = count.into_iter().chain(reps).flatten().collect();
    Ok(o)
}

/// The repository's build directory: ./build when run from the repository,
/// else the one beside target/release/nomu.
fn build_dir() -> PathBuf {
    let rel = Path::new("build");
    if rel.join("bench").is_dir() {
        return rel.to_path_buf();
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.join("build")))
        .filter(|b| b.is_dir())
        .unwrap_or_else(|| rel.to_path_buf())
}

/// The progress line on stderr: rewritten in place on a terminal; elsewhere
/// one line per system run (not per op, to keep logs short).
struct Progress {
    tty: bool,
    shown: bool,
}

impl Progress {
    fn set(&mut self, msg: &str) {
        if self.tty {
            eprint!("\r\x1b[K{msg}");
            let _ = std::io::stderr().flush();
            self.shown = true;
        }
    }

    fn line(&mut self, msg: &str) {
        if self.tty {
            self.set(msg);
        } else {
            eprintln!("{msg}");
        }
    }

    fn clear(&mut self) {
        if self.shown {
            eprint!("\r\x1b[K");
            self.shown = false;
        }
    }
}

pub fn main(args: &[std::ffi::OsString]) -> i32 {
    let opts = match parse_args(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("nomu bench: {e}\n{USAGE}");
            return 2;
        }
    };
    let all = systems::all();
    if opts.list {
        let sys: Vec<&str> = all.iter().map(|s| s.id.as_str()).collect();
        println!("systems: {}", sys.join(" "));
        println!("ops:");
        for op in OPS {
            println!("  {:<12} {}", op.name, op.label);
        }
        return 0;
    }
    let build = build_dir();
    let out_dir = build.join("bench");
    if opts.populate {
        let prog = out_dir.join("secret_populate");
        if !prog.exists() {
            eprintln!("nomu bench: {} not found (run `make bench-bins`)", prog.display());
            return 1;
        }
        let prog = std::fs::canonicalize(&prog).unwrap_or(prog);
        let nomu = std::env::current_exe().unwrap_or_else(|_| "nomu".into());
        return populate::main(&nomu, &prog, opts.rounds);
    }
    let bin = opts.bin.clone().unwrap_or_else(|| out_dir.join("syscall_bench"));
    if !bin.exists() {
        eprintln!("nomu bench: {} not found (run `make bench-bins`, or pass --bin)", bin.display());
        return 1;
    }
    let bin = std::fs::canonicalize(&bin).unwrap_or(bin);
    let machine = Machine::probe();
    if let Some(c) = opts.cpu {
        // Every system's processes inherit it: they share the one CPU, so
        // cross-CPU wake-ups do not hide everything else on small VMs.
        if let Err(e) = crate::host::sys::pin_to_cpu(c) {
            eprintln!("nomu bench: --cpu {c}: {e}");
            return 1;
        }
    }
    let ctx = Ctx {
        bin,
        root: std::fs::canonicalize(build.join("root")).ok(),
        nomu: std::env::current_exe().expect("current_exe"),
        work: std::fs::canonicalize(&out_dir).unwrap_or(out_dir.clone()),
        bench_args: opts.bench_args.clone(),
        timeout: opts.timeout,
    };
    let selected_ops: Vec<&'static ops::Op> = match &opts.ops {
        Some(names) => OPS.iter().filter(|o| names.iter().any(|n| n == o.name)).collect(),
        None => OPS.iter().collect(),
    };
    let op_names: Vec<&str> = selected_ops.iter().map(|o| o.name).collect();

    // Native always runs: every ratio needs it.
    let chosen: Vec<System> = all
        .into_iter()
        .filter(|s| s.id == "native" || opts.systems.as_ref().is_none_or(|l| l.iter().any(|n| s.matches(n))))
        .collect();
    let mut progress = Progress { tty: std::io::stderr().is_terminal(), shown: false };
    let mut reports: Vec<SystemReport> = Vec::new();
    for s in &chosen {
        progress.set(&format!("nomu bench: probing {}", s.id));
        let state = match s.probe(&ctx) {
            Ok(()) => State::Ran { results: BTreeMap::new(), failures: Vec::new() },
            Err(why) => State::Skipped(why),
        };
        reports.push(SystemReport { id: s.id.clone(), how: s.how(&ctx), version: s.version(), state });
    }

    // Natively also the SIGSYS floors of the selected ops that have one.
    let floor_names: Vec<String> = op_names.iter().filter_map(|o| floor_op(o)).collect();
    // And the filter floors of the host-backed ones: the op under nomu's
    // own seccomp filter.
    let filter_names: Vec<String> = op_names.iter().filter_map(|o| filter_op(o)).collect();

    // Alternate the systems round by round and keep each op's best time:
    // on a small, noisy VM that is what stays comparable.
    for round in 1..=opts.rounds {
        for (s, rep) in chosen.iter().zip(reports.iter_mut()) {
            let State::Ran { results, failures } = &mut rep.state else { continue };
            let mut ops = op_names.clone();
            if s.id == "native" {
                ops.push(SIGSYS_RAW);
                ops.extend(floor_names.iter().map(String::as_str));
                ops.extend(filter_names.iter().map(String::as_str));
            }
            let head = format!("nomu bench: round {round}/{}: {}", opts.rounds, s.id);
            progress.line(&format!("{head}: starting"));
            match s.run(&ctx, &ops, &mut |op| progress.set(&format!("{head}: {op}"))) {
                Ok(parsed) => keep_best(results, parsed.results),
                Err(e) => failures.push(format!("round {round}: {e}")),
            }
        }
    }
    progress.clear();

    let report = Report {
        machine,
        cpu: opts.cpu,
        rounds: opts.rounds,
        bench_args: opts.bench_args.clone(),
        ops: selected_ops,
        systems: reports,
    };
    print!("{}", report.text());
    let json = opts.json.unwrap_or_else(|| out_dir.join("results.json"));
    let svg = opts.svg.unwrap_or_else(|| out_dir.join("results.svg"));
    for (path, body) in [(&json, report.json()), (&svg, svg::render(&report))] {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Err(e) = std::fs::write(path, body) {
            eprintln!("nomu bench: writing {}: {e}", path.display());
            return 1;
        }
    }
    println!("\nwrote {} and {}", json.display(), svg.display());
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<std::ffi::OsString> {
        v.iter().map(|s| s.into()).collect()
    }

    #[test]
    fn options_parse() {
        let o = parse_args(&args(&[
            "--cpu",
            "0",
            "--rounds",
            "2",
            "--iters",
            "9",
            "--reps",
            "7",
            "--time-ms",
            "20",
            "--ops",
            "getpid,stat",
        ]))
        .unwrap();
        assert_eq!(o.cpu, Some(0));
        assert_eq!(o.rounds, 2);
        assert_eq!(o.bench_args, ["--time-ms", "20", "--reps", "7"]);
        assert_eq!(o.ops.unwrap(), ["getpid", "stat"]);
        assert!(parse_args(&args(&["--ops", "nope"])).is_err());
        assert!(parse_args(&args(&["--rounds", "0"])).is_err());
        assert!(parse_args(&args(&["--cpu"])).is_err());
    }
}
