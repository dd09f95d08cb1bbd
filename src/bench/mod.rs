//! `nomu bench`: the syscall benchmark (bench/syscall_bench.c), run natively
//! and under nomu in the same invocation, reported as ns per operation and
//! ratios. The raw cost of one SIGSYS round trip (measured natively by the
//! benchmark itself) is the floor any seccomp-trapped syscall pays.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Sample {
    min_ns: f64,
}

/// Syscalls each operation makes (open_close makes two).
fn calls_per_op(op: &str) -> f64 {
    if op == "open_close" {
        2.0
    } else {
        1.0
    }
}

fn default_bin() -> Option<PathBuf> {
    let rel = Path::new("build/bench/syscall_bench");
    if rel.exists() {
        return Some(rel.to_path_buf());
    }
    // target/release/nomu -> the repository root.
    let exe = std::env::current_exe().ok()?;
    let repo = exe.parent()?.parent()?.parent()?;
    let p = repo.join(rel);
    p.exists().then_some(p)
}

fn parse(output: &[u8]) -> BTreeMap<String, Result<Sample, String>> {
    let mut out = BTreeMap::new();
    for line in String::from_utf8_lossy(output).lines() {
        let mut op = None;
        let mut min = None;
        let mut problem = None;
        for field in line.split_whitespace() {
            match field.split_once('=') {
                Some(("op", v)) => op = Some(v.to_string()),
                Some(("min_ns", v)) => min = v.parse::<f64>().ok(),
                Some(("unavailable", v)) | Some(("error", v)) => problem = Some(v.trim_matches('"').to_string()),
                _ => {}
            }
        }
        if problem.is_some() && line.contains('"') {
            // The message may contain spaces: take everything inside the quotes.
            problem = line.split_once('"').and_then(|(_, r)| r.rsplit_once('"')).map(|(m, _)| m.to_string());
        }
        if let Some(op) = op {
            let r = match (min, problem) {
                (Some(m), _) => Ok(Sample { min_ns: m }),
                (None, p) => Err(p.unwrap_or_else(|| "no result".into())),
            };
            out.insert(op, r);
        }
    }
    out
}

fn keep_best(best: &mut BTreeMap<String, Result<Sample, String>>, new: BTreeMap<String, Result<Sample, String>>) {
    for (op, r) in new {
        match (best.get(&op), &r) {
            (Some(Ok(old)), Ok(n)) if old.min_ns <= n.min_ns => {}
            (Some(Ok(_)), Err(_)) => {}
            _ => {
                best.insert(op, r);
            }
        }
    }
}

fn run(cmd: &mut Command) -> Result<Vec<u8>, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() && out.stdout.is_empty() {
        return Err(format!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(out.stdout)
}

pub fn main(args: &[std::ffi::OsString]) -> i32 {
    let mut bin = None;
    let mut iters = None;
    let mut json = None;
    let mut rounds = 3;
    let mut cpu = None;
    let mut it = args.iter().map(|a| a.to_string_lossy().to_string());
    while let Some(a) = it.next() {
        match a.as_str() {
            "--bin" => bin = it.next().map(PathBuf::from),
            "--iters" => iters = it.next(),
            "--json" => json = it.next().map(PathBuf::from),
            "--rounds" => rounds = it.next().and_then(|v| v.parse().ok()).filter(|&r| r > 0).unwrap_or(3),
            "--cpu" => cpu = it.next().and_then(|v| v.parse::<usize>().ok()),
            _ => {
                eprintln!("usage: nomu bench [--bin PATH] [--iters N] [--rounds N] [--cpu N] [--json FILE]");
                return 2;
            }
        }
    }
    let Some(bin) = bin.or_else(default_bin) else {
        eprintln!("nomu bench: build/bench/syscall_bench not found (run `make bench-bins`, or pass --bin)");
        return 1;
    };
    let bin = std::fs::canonicalize(&bin).unwrap_or(bin);
    if let Some(c) = cpu {
        // Children inherit it: native and nomu runs share the one CPU, so
        // cross-CPU wake-ups do not hide everything else on small VMs.
        if let Err(e) = crate::host::sys::pin_to_cpu(c) {
            eprintln!("nomu bench: --cpu {c}: {e}");
            return 1;
        }
    }
    let mut bench_args: Vec<String> = Vec::new();
    // The shell for `sh -c :`: the bundled busybox (the same binary natively
    // and under nomu), when it has been built.
    if let Some(sh) = bin.parent().and_then(|b| b.parent()).map(|b| b.join("root/bin/busybox")).filter(|p| p.exists()) {
        bench_args.extend(["--sh".into(), sh.display().to_string()]);
    }
    if let Some(n) = &iters {
        bench_args.extend(["--iters".into(), n.clone()]);
    }
    // Alternate native and nomu runs and keep each operation's best time:
    // on a small, noisy VM that is what stays comparable between the two.
    let me = std::env::current_exe().expect("current_exe");
    let mut native = BTreeMap::new();
    let mut under = BTreeMap::new();
    for round in 1..=rounds {
        eprintln!("nomu bench: round {round}/{rounds}: native");
        let n = match run(Command::new(&bin).args(&bench_args)) {
            Ok(o) => parse(&o),
            Err(e) => {
                eprintln!("nomu bench: {e}");
                return 1;
            }
        };
        eprintln!("nomu bench: round {round}/{rounds}: nomu (seccomp entry)");
        let u = match run(Command::new(&me).arg("run").arg("--").arg(&bin).args(&bench_args)) {
            Ok(o) => parse(&o),
            Err(e) => {
                eprintln!("nomu bench: {e}");
                return 1;
            }
        };
        keep_best(&mut native, n);
        keep_best(&mut under, u);
    }
    let raw = native.get("sigsys_raw").and_then(|r| r.as_ref().ok()).map(|s| s.min_ns);
    println!("{:<12} {:>12} {:>12} {:>8}  goal", "operation", "native ns", "nomu ns", "ratio");
    let mut rows = Vec::new();
    for (op, n) in &native {
        if op == "sigsys_raw" {
            continue;
        }
        let (Ok(n), Some(Ok(u))) = (n, under.get(op)) else {
            println!("{op:<12} {:>12} {:>12}", "-", "-");
            continue;
        };
        let ratio = u.min_ns / n.min_ns;
        let goal: Option<(String, bool)> = match (op.as_str(), raw) {
            ("getpid", Some(raw)) => Some((format!("<= 1.2 x raw SIGSYS = {:.0}", 1.2 * raw), u.min_ns <= 1.2 * raw)),
            ("read_null" | "write_null" | "fstat" | "stat" | "open_close", Some(raw)) => {
                let budget = calls_per_op(op) * (raw + 500.0) + n.min_ns;
                Some((format!("<= raw + native + 0.5us = {budget:.0}"), u.min_ns <= budget))
            }
            ("vfork_exec", _) => Some(("<= 0.5 x native".into(), ratio <= 0.5)),
            ("signal", _) => Some(("<= 2 x native".into(), ratio <= 2.0)),
            _ => None,
        };
        let met = goal.as_ref().is_none_or(|g| g.1);
        let goal_text = goal.map_or(String::new(), |(g, m)| format!("{g} {}", if m { "met" } else { "MISSED" }));
        println!("{op:<12} {:>12.1} {:>12.1} {ratio:>7.2}x  {goal_text}", n.min_ns, u.min_ns);
        rows.push(format!(
            "{{\"op\":\"{op}\",\"native_ns\":{:.1},\"nomu_seccomp_ns\":{:.1},\"ratio\":{ratio:.3},\"goal_met\":{met}}}",
            n.min_ns, u.min_ns
        ));
    }
    match raw {
        Some(r) => println!("raw SIGSYS round trip (native, same run): {r:.1} ns"),
        None => println!("raw SIGSYS round trip: unavailable on this host"),
    }
    if let Some(path) = json {
        let body = format!(
            "{{\"raw_sigsys_ns\":{},\"results\":[{}]}}\n",
            raw.map_or("null".into(), |r| format!("{r:.1}")),
            rows.join(",")
        );
        if let Err(e) = std::fs::write(&path, body) {
            eprintln!("nomu bench: writing {}: {e}", path.display());
            return 1;
        }
    }
    0
}
