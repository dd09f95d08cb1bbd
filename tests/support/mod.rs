//! The entry-path matrix every integration test runs in: the same test, once
//! per entry path (`nomu run --entry NAME`). A path this host cannot run is
//! skipped with the reason `nomu info` gives, written straight to the test
//! output (not captured), so a skip is never silent; as root or under CI a
//! skip fails the test instead. (Each test crate uses
//! a part of this module, hence the allows.)

#![allow(dead_code, unused_macros, unused_imports)]

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

pub const ENTRY_PATHS: [&str; 5] = ["seccomp", "zpoline", "rewrite", "sysemu", "split"];

/// One entry path, as a test sees it.
#[derive(Clone, Copy, Debug)]
pub struct Entry(pub &'static str);

impl Entry {
    /// `nomu run --entry NAME`, ready for more arguments.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nomu"));
        cmd.args(["run", "--entry", self.0]);
        cmd
    }

    /// Runs `nomu run --entry NAME ARGS...` with stdin from /dev/null.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).stdin(Stdio::null()).output().expect("run nomu")
    }

    /// The same, as a shell command line (for tests that go through `script`).
    pub fn shell_prefix(&self) -> String {
        format!("{} run --entry {}", env!("CARGO_BIN_EXE_nomu"), self.0)
    }
}

/// Why `nomu info` says this host cannot run `entry`, or None if it can.
pub fn unavailable(entry: &str) -> Option<String> {
    static INFO: OnceLock<String> = OnceLock::new();
    let info = INFO.get_or_init(|| {
        let out = Command::new(env!("CARGO_BIN_EXE_nomu")).arg("info").output().expect("run nomu info");
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
    for line in info.lines() {
        let mut words = line.split_whitespace();
        if words.next() == Some(entry) {
            return match words.next() {
                Some("available") => None,
                _ => Some(words.collect::<Vec<_>>().join(" ")),
            };
        }
    }
    Some(format!("nomu info does not list it:\n{info}"))
}

/// Whether every entry path must run: under CI (`CI` set) and as root, where
/// all five can (`make test` sets vm.mmap_min_addr for zpoline), a skipped
/// path is a failure. `NOMU_TEST_ALLOW_SKIP=1` lets a developer's run skip.
fn skip_is_failure() -> bool {
    if std::env::var_os("NOMU_TEST_ALLOW_SKIP").is_some_and(|v| v == "1") {
        return false;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    std::env::var_os("CI").is_some() || unsafe { libc::geteuid() } == 0
}

/// Runs `test` on `entry`, or reports the skip (a failure where every path
/// must run: see skip_is_failure).
pub fn on_entry(entry: &'static str, test_name: &str, test: impl FnOnce(Entry)) {
    if let Some(why) = unavailable(entry) {
        if skip_is_failure() {
            panic!(
                "{test_name} cannot run on entry path {entry}: {why}\n\
                 (as root or under CI every path must run: use `make test`, which sets \
                 vm.mmap_min_addr for zpoline, or NOMU_TEST_ALLOW_SKIP=1 to skip)"
            );
        }
        // Straight to fd 2: the test harness captures print! but not this.
        let _ = writeln!(std::io::stderr(), "skipped {test_name} on entry path {entry}: {why}");
        return;
    }
    test(Entry(entry));
}

/// `entry_matrix!(a, b, c)` makes, for each entry path P, a module P with
/// one #[test] per function (`fn a(e: Entry)`), so `cargo test P::` runs
/// the suite on one path.
macro_rules! entry_matrix {
    ($($test:ident),* $(,)?) => {
        entry_matrix!(@path seccomp, $($test),*);
        entry_matrix!(@path zpoline, $($test),*);
        entry_matrix!(@path rewrite, $($test),*);
        entry_matrix!(@path sysemu, $($test),*);
        entry_matrix!(@path split, $($test),*);
    };
    (@path $path:ident, $($test:ident),*) => {
        mod $path {
            $(
                #[test]
                fn $test() {
                    $crate::support::on_entry(stringify!($path), stringify!($test), super::$test);
                }
            )*
        }
    };
}
pub(crate) use entry_matrix;
