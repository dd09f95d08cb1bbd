//! Generates one #[test] per guest test case listed in tests/guest/CASES
//! (times each build of the guest), so adding a case is one line there.

use std::fmt::Write;

fn main() {
    println!("cargo:rerun-if-changed=tests/guest/CASES");
    let cases = std::fs::read_to_string("tests/guest/CASES").unwrap_or_default();
    let mut out = String::new();
    for line in cases.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let name = line.split_whitespace().next().unwrap();
        for build in ["static", "dynamic"] {
            let _ = writeln!(
                out,
                "#[test]\nfn {name}_{build}() {{\n    run_case({name:?}, Build::{});\n}}\n",
                if build == "static" { "Static" } else { "Dynamic" }
            );
        }
    }
    let path = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("guest_cases.rs");
    std::fs::write(path, out).unwrap();
}
