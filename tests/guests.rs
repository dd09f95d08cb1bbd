//! Guest programs run natively and under nomu: both runs must give what
//! tests/guest/CASES expects, and the same stdout and exit status.
//!
//! The guests are built by `make guests` (the README's test command does
//! it first); each case runs for the musl static-PIE and dynamic-PIE builds
//! and for the glibc build (dynamic PIE whose loader and libc are the
//! host's: the tests run nomu with its default --root /), unless its
//! `builds=` key names fewer.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::Entry;

const TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Clone, Copy, Debug)]
enum Build {
    Static,
    Dynamic,
    Glibc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Exit(i32),
    Signal(i32),
}

#[derive(Default, Debug)]
struct Case {
    program: String,
    args: Vec<String>,
    native_args: Option<Vec<String>>,
    env: Vec<(String, String)>,
    stdin: Option<String>,
    expect: Option<String>,
    mem: Option<String>,
    nomu_flags: Vec<String>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Splits a CASES line into fields: spaces separate, "..." keeps spaces,
/// and inside quotes \" and \\ are escapes.
fn split_fields(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    let mut has = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' if in_quotes => {
                if let Some(n) = chars.next() {
                    // Keep escaped quotes visible to the second (args) split.
                    if n == '"' {
                        cur.push('\u{1}');
                    } else {
                        cur.push(n);
                    }
                }
            }
            '"' => {
                in_quotes = !in_quotes;
                has = true;
            }
            c if c.is_whitespace() && !in_quotes => {
                if has || !cur.is_empty() {
                    fields.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            c => cur.push(c),
        }
    }
    if has || !cur.is_empty() {
        fields.push(cur);
    }
    fields
}

/// Splits an args value shell-like (\u{1} stands for an escaped quote).
fn split_words(v: &str) -> Vec<String> {
    split_fields(&v.replace('\u{1}', "\"")).into_iter().collect()
}

fn load_case(name: &str) -> Case {
    let text = std::fs::read_to_string(root().join("tests/guest/CASES")).expect("read CASES");
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let fields = split_fields(line);
        if fields[0] != name {
            continue;
        }
        let mut case = Case { program: fields[1].clone(), ..Case::default() };
        for f in &fields[2..] {
            let (k, v) = f.split_once('=').unwrap_or_else(|| panic!("bad field {f} in case {name}"));
            match k {
                "args" => case.args = split_words(v),
                "native_args" => case.native_args = Some(split_words(v)),
                "env" => {
                    let (ek, ev) = v.split_once('=').expect("env=K=V");
                    case.env.push((ek.to_string(), ev.to_string()));
                }
                "stdin" => case.stdin = Some(v.to_string()),
                "expect" => case.expect = Some(v.to_string()),
                "mem" => case.mem = Some(v.to_string()),
                "nomu_flags" => case.nomu_flags = split_words(v),
                // Read by build.rs, which makes a test only for the builds
                // listed, and none for the entry paths not_on= names.
                "builds" | "not_on" => {}
                _ => panic!("unknown key {k} in case {name}"),
            }
        }
        return case;
    }
    panic!("no case {name} in CASES");
}

fn expected(case: &Case) -> Outcome {
    match case.expect.as_deref().unwrap_or("exit:0").split_once(':') {
        Some(("exit", n)) => Outcome::Exit(n.parse().unwrap()),
        Some(("signal", n)) => Outcome::Signal(n.parse().unwrap()),
        _ => panic!("bad expect {:?}", case.expect),
    }
}

fn guest_binary(program: &str, build: Build) -> PathBuf {
    let dir = match build {
        Build::Static => "static",
        Build::Dynamic => "dynamic",
        Build::Glibc => "glibc",
    };
    let p = root().join("build/guest").join(dir).join(program);
    assert!(p.exists(), "{} is missing: run `make guests` first", p.display());
    p
}

struct Run {
    outcome: Outcome,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Spawns `cmd`, again while its program is ETXTBSY: a script this
/// harness just wrote can be busy for a moment, when another test's thread
/// forked while the script was open for writing (the child holds the
/// descriptor until its exec closes it).
fn spawn_when_not_busy(cmd: &mut Command) -> std::process::Child {
    for _ in 0..100 {
        match cmd.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            r => return r.expect("spawn"),
        }
    }
    cmd.spawn().expect("spawn")
}

fn run(mut cmd: Command, stdin: Option<&Path>) -> Run {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    match stdin {
        Some(p) => cmd.stdin(std::fs::File::open(p).expect("stdin file")),
        None => cmd.stdin(Stdio::null()),
    };
    let mut child = spawn_when_not_busy(&mut cmd);
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            panic!("timed out after {TIMEOUT:?}: {cmd:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let outcome = match (status.code(), status.signal()) {
        (Some(c), _) => Outcome::Exit(c),
        (None, Some(s)) => Outcome::Signal(s),
        _ => unreachable!(),
    };
    Run { outcome, stdout: out_t.join().unwrap(), stderr: err_t.join().unwrap() }
}

/// Where the program (or, for script:P, the generated script) lives.
fn exec_path(case: &Case, build: Build, scratch: &Path) -> PathBuf {
    match case.program.strip_prefix("script:") {
        Some(interp) => {
            use std::os::unix::fs::PermissionsExt;
            let script = scratch.join("script.sh");
            let body = format!(
                "#!{} -x\necho this line is never run by the interpreter\n",
                guest_binary(interp, build).display()
            );
            std::fs::write(&script, body).unwrap();
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
            script
        }
        None => guest_binary(&case.program, build),
    }
}

/// A command running `program` with the case's variables set by env(1),
/// in their order: std's Command would sort the whole environment, and a
/// program (or nomu) must get it in the order it was given.
fn with_env(case: &Case, program: &Path) -> Command {
    if case.env.is_empty() {
        return Command::new(program);
    }
    let mut cmd = Command::new("/usr/bin/env");
    cmd.args(case.env.iter().map(|(k, v)| format!("{k}={v}"))).arg(program);
    cmd
}

fn run_case(name: &str, build: Build, e: Entry) {
    let case = load_case(name);
    let want = expected(&case);
    let scratch = std::env::temp_dir().join(format!("nomu-test-{name}-{build:?}-{}-{}", e.0, std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let exe = exec_path(&case, build, &scratch);
    let stdin = case.stdin.as_ref().map(|f| root().join("tests/guest/data").join(f));

    let mut native = with_env(&case, &exe);
    native.args(case.native_args.as_ref().unwrap_or(&case.args));
    let native = run(native, stdin.as_deref());
    assert_eq!(
        native.outcome,
        want,
        "case {name} ({build:?}) natively: the test itself disagrees with CASES\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&native.stdout),
        String::from_utf8_lossy(&native.stderr)
    );

    let probe = e.command();
    let mut nomu = with_env(&case, Path::new(probe.get_program()));
    nomu.args(probe.get_args());
    if let Some(m) = &case.mem {
        nomu.args(["--mem", m]);
    }
    nomu.args(&case.nomu_flags);
    nomu.arg("--").arg(&exe).args(&case.args);
    let under = run(nomu, stdin.as_deref());
    let _ = std::fs::remove_dir_all(&scratch);
    // nomu reports a guest killed by signal N as a shell does: exit 128+N.
    let under_outcome = match (want, under.outcome) {
        (Outcome::Signal(n), Outcome::Exit(c)) if c == 128 + n => Outcome::Signal(n),
        (_, o) => o,
    };
    let show = |r: &Run| {
        format!("stdout:\n{}\nstderr:\n{}", String::from_utf8_lossy(&r.stdout), String::from_utf8_lossy(&r.stderr))
    };
    assert_eq!(under_outcome, want, "case {name} ({build:?}) under nomu ({})\n{}", e.0, show(&under));
    assert!(
        native.stdout == under.stdout,
        "case {name} ({build:?}): stdout differs on {}\n--- native\n{}\n--- nomu\n{}",
        e.0,
        String::from_utf8_lossy(&native.stdout),
        String::from_utf8_lossy(&under.stdout)
    );
}

include!(concat!(env!("OUT_DIR"), "/guest_cases.rs"));
