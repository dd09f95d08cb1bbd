//! Shell scripts run by the bundled busybox shells, natively and inside
//! nomu over their guest root: both must print exactly the expected output
//! in tests/shell/NAME.out (stdout and stderr together). Two busybox builds
//! (scripts/build-busybox.sh, `make test` builds both first): the no-MMU one,
//! whose sh is hush and never forks (build/root), and the MMU one, whose sh
//! is ash and forks for subshells, `$(...)`, pipelines and `&`
//! (build/root-mmu). ash runs every script; the fork_*.sh ones are ash's
//! alone (they need fork: hush on no-MMU cannot run them).

use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, Stdio};

mod support;
use support::{entry_matrix, Entry};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A bundled busybox build, by the guest root it is installed in.
#[derive(Clone, Copy)]
enum Shell {
    /// No-MMU, hush as sh.
    Hush,
    /// With MMU, ash as sh.
    Ash,
}

impl Shell {
    fn root(self) -> PathBuf {
        repo().join(match self {
            Shell::Hush => "build/root",
            Shell::Ash => "build/root-mmu",
        })
    }

    fn busybox(self) -> PathBuf {
        let p = self.root().join("bin/busybox");
        assert!(p.exists(), "{} is missing: run `make guests` (it builds the guest roots)", p.display());
        p
    }
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

fn check(name: &str, shell: Shell, e: Entry) {
    let script = format!("{name}.sh");
    let expected = std::fs::read_to_string(repo().join("tests/shell").join(format!("{name}.out"))).unwrap();
    let sh = match shell {
        Shell::Hush => "hush",
        Shell::Ash => "ash",
    };
    let mut native = Command::new(shell.busybox());
    native.args(["sh", "-s"]);
    let (native_out, native_status) = run(native, &script, &format!("{name}-{sh}-native-{}", e.0));
    assert_eq!(native_status, 0, "{name} ({sh}): native run failed:\n{native_out}");
    assert_eq!(native_out, expected, "{name} ({sh}): the native run disagrees with {name}.out");
    let mut nomu = e.command();
    nomu.arg("--root").arg(shell.root()).args(["--", "/bin/sh", "-s"]);
    let (nomu_out, nomu_status) = run(nomu, &script, &format!("{name}-{sh}-nomu-{}", e.0));
    assert_eq!(nomu_status, 0, "{name} ({sh}): failed under nomu ({}):\n{nomu_out}", e.0);
    assert_eq!(nomu_out, expected, "{name} ({sh}): output under nomu ({}) differs", e.0);
}

fn pipelines_redirections_and_substitution(e: Entry) {
    check("pipelines", Shell::Hush, e);
}

fn background_jobs_wait_and_traps(e: Entry) {
    check("jobs", Shell::Hush, e);
}

fn everyday_applets(e: Entry) {
    check("applets", Shell::Hush, e);
}

fn ash_pipelines_redirections_and_substitution(e: Entry) {
    check("pipelines", Shell::Ash, e);
}

fn ash_background_jobs_wait_and_traps(e: Entry) {
    check("jobs", Shell::Ash, e);
}

fn ash_everyday_applets(e: Entry) {
    check("applets", Shell::Ash, e);
}

fn ash_subshells_keep_their_state(e: Entry) {
    check("fork_subshells", Shell::Ash, e);
}

fn ash_pipelines_of_builtins_and_functions(e: Entry) {
    check("fork_pipelines", Shell::Ash, e);
}

fn ash_background_builtins_functions_and_subshells(e: Entry) {
    check("fork_jobs", Shell::Ash, e);
}

fn ash_traps_in_subshells(e: Entry) {
    check("fork_traps", Shell::Ash, e);
}

fn ash_exec_redirections_shared_by_children(e: Entry) {
    check("fork_exec", Shell::Ash, e);
}

entry_matrix!(
    pipelines_redirections_and_substitution,
    background_jobs_wait_and_traps,
    everyday_applets,
    ash_pipelines_redirections_and_substitution,
    ash_background_jobs_wait_and_traps,
    ash_everyday_applets,
    ash_subshells_keep_their_state,
    ash_pipelines_of_builtins_and_functions,
    ash_background_builtins_functions_and_subshells,
    ash_traps_in_subshells,
    ash_exec_redirections_shared_by_children,
);
