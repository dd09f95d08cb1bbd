//! Generates one #[test] per guest test case listed in tests/guest/CASES,
//! times each build of the guest, times each entry path (a module per path,
//! so `cargo test zpoline::` runs one path), so adding a case is one line.

use std::fmt::Write;

fn main() {
    println!("cargo:rerun-if-changed=tests/guest/CASES");
    // No CASES (or none in it) is a broken checkout, never a green run of
    // zero guest tests.
    let cases = std::fs::read_to_string("tests/guest/CASES").expect("tests/guest/CASES: the guest test cases");
    let names = cases.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'));
    assert!(names.count() > 0, "tests/guest/CASES lists no test case");
    let mut out = String::new();
    for entry in ["seccomp", "zpoline", "rewrite", "sysemu", "split"] {
        let _ = writeln!(out, "mod {entry} {{\n    use super::*;\n");
        for line in cases.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
            let name = line.split_whitespace().next().unwrap();
            for build in ["static", "dynamic"] {
                let variant = if build == "static" { "Static" } else { "Dynamic" };
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
}
