//! Generates one #[test] per guest test case listed in tests/guest/CASES,
//! times each build of the guest (musl static-PIE, musl dynamic PIE, glibc
//! dynamic PIE; `builds=` in CASES narrows a case to some of them), times
//! each entry path (a module per path, so `cargo test zpoline::` runs one
//! path; `not_on=` leaves out a path that cannot give Linux's behaviour by
//! design, with the reason beside the case), so adding a case is one line.

use std::fmt::Write;

/// Every entry path, as tests/support/mod.rs's ENTRY_PATHS lists them (a
/// test module per path; `on_entry` fails a path skipped as root).
const ENTRY_PATHS: [&str; 5] = ["seccomp", "zpoline", "rewrite", "sysemu", "split"];

fn main() {
    println!("cargo:rerun-if-changed=tests/guest/CASES");
    // No CASES (or none in it) is a broken checkout, never a green run of
    // zero guest tests.
    let cases = std::fs::read_to_string("tests/guest/CASES").expect("tests/guest/CASES: the guest test cases");
    let names = cases.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'));
    assert!(names.count() > 0, "tests/guest/CASES lists no test case");
    let mut out = String::new();
    for entry in ENTRY_PATHS {
        let _ = writeln!(out, "mod {entry} {{\n    use super::*;\n");
        for line in cases.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
            let name = line.split_whitespace().next().unwrap();
            if not_on(line).contains(&entry) {
                continue;
            }
            for build in builds(line) {
                let variant = match build {
                    "static" => "Static",
                    "dynamic" => "Dynamic",
                    _ => "Glibc",
                };
                let _ = writeln!(
                    out,
                    "    #[test]\n    fn {name}_{build}() {{\n        \
                     support::on_entry({entry:?}, \"{name}_{build}\", |e| run_case({name:?}, Build::{variant}, e));\n    }}\n"
                );
            }
        }
        let _ = writeln!(out, "}}\n");
    }
    let path = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("guest_cases.rs");
    std::fs::write(path, out).unwrap();
    debian_cases();
}

/// One #[test] per scenario of tests/debian/COMMANDS (a line "= NAME ...")
/// and entry path, for tests/debian.rs.
fn debian_cases() {
    println!("cargo:rerun-if-changed=tests/debian/COMMANDS");
    let list = std::fs::read_to_string("tests/debian/COMMANDS").expect("tests/debian/COMMANDS: the Debian commands");
    let names: Vec<&str> =
        list.lines().filter_map(|l| l.strip_prefix("= ")).filter_map(|l| l.split_whitespace().next()).collect();
    assert!(!names.is_empty(), "tests/debian/COMMANDS lists no scenario");
    let mut out = String::new();
    for entry in ENTRY_PATHS {
        let _ = writeln!(out, "mod {entry} {{\n    use super::*;\n");
        for name in &names {
            let _ = writeln!(
                out,
                "    #[test]\n    fn {name}() {{\n        \
                 support::on_entry({entry:?}, {name:?}, |e| run_scenario({name:?}, e));\n    }}\n"
            );
        }
        let _ = writeln!(out, "}}\n");
    }
    let path = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("debian_cases.rs");
    std::fs::write(path, out).unwrap();
}

/// The entry paths a CASES line's `not_on=` leaves out (comma-separated).
fn not_on(line: &str) -> Vec<&str> {
    let list = line.split_whitespace().find_map(|f| f.strip_prefix("not_on=")).unwrap_or_default();
    let paths: Vec<&str> = list.split(',').filter(|p| !p.is_empty()).collect();
    for p in &paths {
        assert!(ENTRY_PATHS.contains(p), "tests/guest/CASES: unknown entry path {p:?} in {line:?}");
    }
    assert!(paths.len() < ENTRY_PATHS.len(), "tests/guest/CASES: no entry path left in {line:?}");
    paths
}

/// The builds a CASES line runs: all three, or those its `builds=` lists
/// (comma-separated; `musl` is static and dynamic). tests/guests.rs reads
/// the same key and checks the names.
fn builds(line: &str) -> Vec<&'static str> {
    let Some(list) = line.split_whitespace().find_map(|f| f.strip_prefix("builds=")) else {
        return vec!["static", "dynamic", "glibc"];
    };
    let mut out = Vec::new();
    for b in list.split(',') {
        match b {
            "musl" => out.extend(["static", "dynamic"]),
            "static" => out.push("static"),
            "dynamic" => out.push("dynamic"),
            "glibc" => out.push("glibc"),
            _ => panic!("tests/guest/CASES: unknown build {b:?} in {line:?}"),
        }
    }
    assert!(!out.is_empty(), "tests/guest/CASES: no build left in {line:?}");
    out
}
