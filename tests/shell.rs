//! Shell scripts run by the bundled busybox shell (hush), natively and
//! inside nomu over the bundled guest root: both must print exactly the
//! expected output in tests/shell/NAME.out (stdout and stderr together).
//! `make test` builds the guest root (scripts/build-busybox.sh) first.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, Stdio};

mod support;
use support::{entry_matrix, Entry};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn busybox() -> PathBuf {
    let p = repo().join("build/root/bin/busybox");
    assert!(p.exists(), "{} is missing: run `make guests` (it builds the guest root)", p.display());
    p
}

/// Runs `cmd` with the script on stdin; returns stdout+stderr and the status.
fn run(mut cmd: Command, script: &str, name: &str) -> (String, i32) {
    let out_path = std::env::temp_dir().join(format!("nomu-shell-{name}-{}", std::process::id()));
    let out = File::create(&out_path).unwrap();
    cmd.stdin(File::open(repo().join("tests/shell").join(script)).unwrap());
    cmd.stdout(Stdio::from(out.try_clone().unwrap())).stderr(Stdio::from(out));
    let status = cmd.status().expect("run the shell");
    let text = std::fs::read_to_string(&out_path).unwrap();
    let _ = std::fs::remove_file(out_path);
    (text, status.code().unwrap_or(-1))
}

fn check(name: &str, e: Entry) {
    let script = format!("{name}.sh");
    let expected = std::fs::read_to_string(repo().join("tests/shell").join(format!("{name}.out"))).unwrap();
    let mut native = Command::new(busybox());
    native.args(["sh", "-s"]);
    let (native_out, native_status) = run(native, &script, &format!("{name}-native-{}", e.0));
    assert_eq!(native_status, 0, "{name}: native run failed:\n{native_out}");
    assert_eq!(native_out, expected, "{name}: the native run disagrees with {name}.out");
    let mut nomu = e.command();
    nomu.arg("--root").arg(repo().join("build/root")).args(["--", "/bin/sh", "-s"]);
    let (nomu_out, nomu_status) = run(nomu, &script, &format!("{name}-nomu-{}", e.0));
    assert_eq!(nomu_status, 0, "{name}: failed under nomu ({}):\n{nomu_out}", e.0);
    assert_eq!(nomu_out, expected, "{name}: output under nomu ({}) differs", e.0);
}

fn pipelines_redirections_and_substitution(e: Entry) {
    check("pipelines", e);
}

fn background_jobs_wait_and_traps(e: Entry) {
    check("jobs", e);
}

fn everyday_applets(e: Entry) {
    check("applets", e);
}

entry_matrix!(pipelines_redirections_and_substitution, background_jobs_wait_and_traps, everyday_applets);
