//! `nomu bench --populate`: seed 003's populate benchmark on nomu's
//! memfd_secret (bench/secret_populate.c): a guest creates a secret file of
//! N MiB, maps it, writes every page, unmaps and closes it, in a loop, with
//! one thread and with a second thread spinning in guest code (on the other
//! CPU: TLB shootdowns then cost most). Each of the allocator's policies
//! (`nomu run --unmapped`) runs in turn, round after round, the best median
//! kept: pooled UNMAPPED pageblocks (the design), unmapping page by page
//! (the naive baseline) and never unmapping (the skip-flush upper bound).
//! Prints ms per populate and the ratios the seed reports; the goal is
//! pooled <= 0.3x per-page and <= 1.1x never, in the same run.

use super::report::Machine;
use std::path::Path;
use std::process::{Command, Stdio};

const POLICIES: [&str; 3] = ["pooled", "per-page", "never"];
const SIZES_MIB: [u32; 2] = [64, 256];

/// One run: the median ns per populate, or why it failed.
fn run(nomu: &Path, prog: &Path, policy: &str, mib: u32, spin: bool, iters: u32) -> Result<u64, String> {
    let out = Command::new(nomu)
        .args(["run", "--entry", "seccomp", "--mem", "2G", "--unmapped", policy, "--"])
        .arg(prog)
        .args([mib.to_string(), (spin as u32).to_string(), iters.to_string()])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("populate_ns median ")?.split(' ').next()?.parse().ok())
        .ok_or_else(|| format!("{policy}: {}{}", text, String::from_utf8_lossy(&out.stderr)))
}

pub fn main(nomu: &Path, prog: &Path, rounds: u32) -> i32 {
    let m = Machine::probe();
    println!(
        "populate: memfd_secret create + ftruncate + mmap + write every page + munmap + close, ms per populate \
         (median of a run, best of {rounds} rounds), nomu --entry seccomp, on {} ({} CPUs, shared with whatever \
         else runs on it: compare numbers of one run only)",
        m.cpu_model, m.cores
    );
    println!(
        "{:>8} {:>8} {:>10} {:>10} {:>10} {:>16} {:>13}",
        "MiB", "threads", "pooled", "per-page", "never", "pooled/per-page", "pooled/never"
    );
    let mut ok = true;
    for mib in SIZES_MIB {
        let iters = if mib > 64 { 5 } else { 11 };
        for spin in [false, true] {
            let mut best = [u64::MAX; 3];
            for _ in 0..rounds {
                for (i, p) in POLICIES.iter().enumerate() {
                    match run(nomu, prog, p, mib, spin, iters) {
                        Ok(ns) => best[i] = best[i].min(ns),
                        Err(e) => {
                            eprintln!("nomu bench --populate: {e}");
                            return 1;
                        }
                    }
                }
            }
            let ms = |ns: u64| ns as f64 / 1e6;
            let (vs_page, vs_never) = (best[0] as f64 / best[1] as f64, best[0] as f64 / best[2] as f64);
            ok &= vs_page <= 0.3 && vs_never <= 1.1;
            println!(
                "{:>8} {:>8} {:>10.1} {:>10.1} {:>10.1} {:>15.2}x {:>12.2}x",
                mib,
                if spin { "2 (spin)" } else { "1" },
                ms(best[0]),
                ms(best[1]),
                ms(best[2]),
                vs_page,
                vs_never
            );
        }
    }
    println!("goal: pooled <= 0.3x per-page and <= 1.1x never on every row: {}", if ok { "met" } else { "MISSED" });
    0
}
