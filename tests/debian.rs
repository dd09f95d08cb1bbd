//! Everyday Debian commands (the host's own glibc programs) run under
//! `nomu run` on the host root, scenario by scenario as tests/debian/COMMANDS
//! lists them, on every entry path.
//!
//! Each scenario runs twice in a scratch directory of its own: natively,
//! then every step under nomu. Both runs must give the output and exit
//! status the list expects (written by the project, not captured from
//! nomu), and the same stdout as each other unless a step says otherwise.
//! A program that is not installed skips its scenario with the reason
//! printed (a failure nowhere: see scripts/setup.sh for what the project
//! installs). A scenario marked `fails=` is expected to fail under nomu
//! today for the reason given: it must fail, so the day it passes this
//! test says so and the mark gets removed.

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::Entry;

/// Long enough for python3 on the slowest entry path of a loaded machine;
/// a step still running then is a failure (the xfail ones included).
const TIMEOUT: Duration = Duration::from_secs(60);

/// The guest's whole environment: fixed, so both runs see the same (the
/// test runner's own would bring in pyenv shims and the developer's git
/// configuration). PATH has Debian's directories only, not /usr/local.
const ENV: [(&str, &str); 6] = [
    ("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
    ("LANG", "C.UTF-8"),
    ("LC_ALL", "C.UTF-8"),
    ("TZ", "UTC"),
    ("TERM", "dumb"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
];

#[derive(Debug, Default)]
struct Step {
    line: usize,
    argv: Vec<String>,
    /// Expected stdout, line by line: (is a pattern, text).
    stdout: Vec<(bool, String)>,
    /// `...`: any stdout (then only the native run's is compared).
    any_stdout: bool,
    exit: i32,
    /// Compare stdout with the native run's (`$` steps; `$~` ones do not).
    same_as_native: bool,
    /// `< FILE` at the end of the step: stdin from FILE in the scratch
    /// directory (default /dev/null).
    stdin: Option<String>,
}

#[derive(Debug, Default)]
struct Scenario {
    name: String,
    needs: Vec<String>,
    /// Runs only as root (skipped with the reason otherwise).
    root: bool,
    fails: Option<String>,
    /// With fails=: what the failing run must say on stderr, so that it
    /// fails for that reason and not some other.
    says: Option<String>,
    env: Vec<(String, String)>,
    files: Vec<(String, String)>,
    steps: Vec<Step>,
}

fn list_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/debian/COMMANDS")
}

/// Splits shell-like: spaces separate words, '...' keeps everything,
/// "..." keeps spaces with \" and \\ as escapes (a backslash before any
/// other character stays, as in a shell).
fn split_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut has = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                has = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    cur.push(q);
                }
            }
            '"' => {
                has = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        // as in a shell: \" and \\ escape, other pairs stay
                        '\\' => match chars.next() {
                            Some(e @ ('"' | '\\')) => cur.push(e),
                            Some(e) => {
                                cur.push('\\');
                                cur.push(e);
                            }
                            None => cur.push('\\'),
                        },
                        q => cur.push(q),
                    }
                }
            }
            c if c.is_whitespace() => {
                if has || !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            c => cur.push(c),
        }
    }
    if has || !cur.is_empty() {
        words.push(cur);
    }
    words
}

fn parse(text: &str) -> Vec<Scenario> {
    let mut out: Vec<Scenario> = Vec::new();
    let mut in_file = false;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let bad = |why: &str| -> ! { panic!("tests/debian/COMMANDS:{n}: {why}: {raw:?}") };
        if raw.trim().is_empty() || raw.starts_with('#') {
            in_file = false;
            continue;
        }
        if let Some(head) = raw.strip_prefix("= ") {
            let mut words = split_words(head).into_iter();
            let mut sc = Scenario { name: words.next().unwrap_or_else(|| bad("no name")), ..Scenario::default() };
            for w in words {
                match w.split_once('=') {
                    Some(("needs", v)) => sc.needs = v.split(',').map(String::from).collect(),
                    Some(("fails", v)) => sc.fails = Some(v.to_string()),
                    Some(("says", v)) => sc.says = Some(v.to_string()),
                    None if w == "root" => sc.root = true,
                    _ => bad("unknown scenario key"),
                }
            }
            if sc.fails.is_some() != sc.says.is_some() {
                bad("fails= and says= go together");
            }
            if out.iter().any(|o| o.name == sc.name) {
                bad("scenario name used twice");
            }
            out.push(sc);
            in_file = false;
            continue;
        }
        let sc = out.last_mut().unwrap_or_else(|| bad("a line before the first scenario"));
        let (tag, rest) = raw.split_once(' ').unwrap_or((raw, ""));
        match tag {
            // a file's line ("|" alone: an empty one)
            "|" if in_file => {
                let f = &mut sc.files.last_mut().unwrap().1;
                f.push_str(rest);
                f.push('\n');
            }
            "env" => {
                let (k, v) = rest.split_once('=').unwrap_or_else(|| bad("env K=V"));
                sc.env.push((k.to_string(), v.to_string()));
            }
            "file" => {
                sc.files.push((rest.to_string(), String::new()));
                in_file = true;
            }
            "$" | "$~" => {
                let mut argv = split_words(rest);
                let mut stdin = None;
                if argv.len() >= 3 && argv[argv.len() - 2] == "<" {
                    stdin = argv.pop();
                    argv.pop();
                }
                if argv.is_empty() {
                    bad("a step with no command");
                }
                sc.steps.push(Step { line: n, argv, stdin, same_as_native: tag == "$", ..Step::default() });
                in_file = false;
            }
            ">" | "~" => {
                let step = sc.steps.last_mut().unwrap_or_else(|| bad("output before any step"));
                step.stdout.push((tag == "~", rest.to_string()));
            }
            "..." => sc.steps.last_mut().unwrap_or_else(|| bad("output before any step")).any_stdout = true,
            "?" => {
                let step = sc.steps.last_mut().unwrap_or_else(|| bad("exit status before any step"));
                step.exit = rest.trim().parse().unwrap_or_else(|_| bad("? N: an exit status"));
            }
            _ => bad("unknown line"),
        }
    }
    out
}

/// `*` matches any run of characters; everything else itself.
fn glob(pat: &str, s: &str) -> bool {
    match pat.split_once('*') {
        None => pat == s,
        Some((head, tail)) => {
            let Some(rest) = s.strip_prefix(head) else { return false };
            (0..=rest.len()).filter(|&i| rest.is_char_boundary(i)).any(|i| glob(tail, &rest[i..]))
        }
    }
}

/// Where PATH (the guest's, in ENV) finds `prog` on the host root.
fn which(prog: &str) -> Option<PathBuf> {
    if prog.starts_with('/') {
        return Path::new(prog).is_file().then(|| PathBuf::from(prog));
    }
    ENV[0].1.split(':').map(|d| Path::new(d).join(prog)).find(|p| p.is_file())
}

struct Ran {
    status: i32,
    stdout: String,
    stderr: String,
}

fn run(mut cmd: Command, cwd: &Path, sc: &Scenario, step: &Step) -> Ran {
    cmd.current_dir(cwd).env_clear().envs(ENV).env("HOME", cwd);
    cmd.envs(sc.env.iter().map(|(k, v)| (k, v)));
    match &step.stdin {
        Some(f) => cmd.stdin(std::fs::File::open(cwd.join(f)).unwrap_or_else(|e| panic!("stdin {f}: {e}"))),
        None => cmd.stdin(Stdio::null()),
    };
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
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
            let _ = child.wait();
            return Ran { status: -1, stdout: String::new(), stderr: format!("timed out after {TIMEOUT:?}") };
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // A signal as a shell (and nomu) reports it: 128+N.
    let status = status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    let text = |v: Vec<u8>| String::from_utf8_lossy(&v).into_owned();
    Ran { status, stdout: text(out_t.join().unwrap()), stderr: text(err_t.join().unwrap()) }
}

/// What is wrong with a run of `step` (None: it gave what the list expects).
fn mismatch(step: &Step, r: &Ran) -> Option<String> {
    let lines: Vec<&str> = r.stdout.lines().collect();
    let want = &step.stdout;
    let ok_out = step.any_stdout
        || lines.len() == want.len()
            && lines.iter().zip(want).all(|(l, (pat, w))| if *pat { glob(w, l) } else { l == w })
            && (r.stdout.is_empty() || r.stdout.ends_with('\n'));
    if r.status == step.exit && ok_out {
        return None;
    }
    let want_text: String = want.iter().map(|(p, w)| format!("{}{w}\n", if *p { "~ " } else { "> " })).collect();
    Some(format!(
        "exit status {} (expected {})\n--- stdout\n{}--- expected\n{}--- stderr\n{}",
        r.status, step.exit, r.stdout, want_text, r.stderr
    ))
}

fn scratch(name: &str, what: &str, sc: &Scenario) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nomu-debian-{name}-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (path, body) in &sc.files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, body).unwrap();
    }
    dir
}

fn run_scenario(name: &str, e: Entry) {
    let text = std::fs::read_to_string(list_path()).expect("tests/debian/COMMANDS");
    let all = parse(&text);
    let sc = all.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no scenario {name}"));
    let label = format!("{name} on {}", e.0);
    // Every program a step starts, and what the scenario says it needs.
    // A "./PROG" is made by an earlier step, in each run's scratch directory.
    let mut progs: Vec<PathBuf> = Vec::new();
    for p in sc.steps.iter().map(|s| s.argv[0].as_str()).chain(sc.needs.iter().map(String::as_str)) {
        match p.strip_prefix("./").map(PathBuf::from).or_else(|| which(p)) {
            Some(path) => progs.push(path),
            None => {
                let _ = writeln!(std::io::stderr(), "skipped debian scenario {label}: {p} is not installed");
                return;
            }
        }
    }

    // SAFETY: geteuid has no preconditions and cannot fail.
    if sc.root && unsafe { libc::geteuid() } != 0 {
        let _ = writeln!(std::io::stderr(), "skipped debian scenario {label}: it runs only as root");
        return;
    }
    // Per entry path: the paths' tests of a scenario run in parallel.
    let native_dir = scratch(name, &format!("native-{}", e.0), sc);
    let nomu_dir = scratch(name, e.0, sc);
    let mut failures = Vec::new();
    // What nomu's failing runs said on stderr (for says=).
    let mut said = String::new();
    for (i, step) in sc.steps.iter().enumerate() {
        // argv[0] is the absolute path in both runs (`nomu run` takes one).
        let prog = |dir: &Path| if progs[i].is_relative() { dir.join(&progs[i]) } else { progs[i].clone() };
        let mut native = Command::new(prog(&native_dir));
        native.args(&step.argv[1..]);
        let native = run(native, &native_dir, sc, step);
        if let Some(why) = mismatch(step, &native) {
            panic!(
                "tests/debian/COMMANDS:{} ({name}): natively the command disagrees with the list: {:?}\n{why}",
                step.line, step.argv
            );
        }
        let mut under = e.command();
        under.arg("--").arg(prog(&nomu_dir)).args(&step.argv[1..]);
        let under = run(under, &nomu_dir, sc, step);
        let failed = failures.len();
        if let Some(why) = mismatch(step, &under) {
            failures.push(format!("line {}: {:?} under nomu: {why}", step.line, step.argv));
        } else if step.same_as_native && under.stdout != native.stdout {
            failures.push(format!(
                "line {}: {:?}: stdout differs from the native run's\n--- native\n{}--- nomu\n{}",
                step.line, step.argv, native.stdout, under.stdout
            ));
        } else if step.same_as_native
            && under.stderr.replace(nomu_dir.to_str().unwrap(), "$SCRATCH")
                != native.stderr.replace(native_dir.to_str().unwrap(), "$SCRATCH")
        {
            // What a program says went wrong is part of what it does (git
            // reports a step it could not take only there).
            failures.push(format!(
                "line {}: {:?}: stderr differs from the native run's\n--- native\n{}--- nomu\n{}",
                step.line, step.argv, native.stderr, under.stderr
            ));
        }
        if failures.len() > failed {
            said.push_str(&under.stderr);
        }
    }
    let _ = std::fs::remove_dir_all(&native_dir);
    let _ = std::fs::remove_dir_all(&nomu_dir);
    match (&sc.fails, failures.first()) {
        (None, None) => {}
        (None, Some(_)) => panic!("debian scenario {label} fails under nomu:\n{}", failures.join("\n")),
        (Some(why), Some(first)) => {
            let says = sc.says.as_deref().unwrap_or_default();
            assert!(
                said.contains(says),
                "debian scenario {label} fails, but not saying {says:?} as tests/debian/COMMANDS \
                 expects ({why}):\n{}",
                failures.join("\n")
            );
            let first_line = first.lines().next().unwrap_or("");
            let _ = writeln!(std::io::stderr(), "expected failure: debian scenario {label} ({why}): {first_line}");
        }
        (Some(why), None) => panic!(
            "debian scenario {label} passes under nomu now, but tests/debian/COMMANDS says it fails \
             ({why}): remove its fails= mark"
        ),
    }
}

#[test]
fn the_list_parses_and_names_each_scenario_once() {
    let all = parse(&std::fs::read_to_string(list_path()).expect("tests/debian/COMMANDS"));
    assert!(all.len() > 10, "tests/debian/COMMANDS lists only {} scenarios", all.len());
    for sc in &all {
        assert!(!sc.steps.is_empty(), "scenario {} has no step", sc.name);
    }
    assert!(glob("a*c", "abbc") && glob("*", "") && !glob("a*c", "abd") && glob("x*y*z", "x1y2z"));
}

include!(concat!(env!("OUT_DIR"), "/debian_cases.rs"));
