//! The systems the benchmark runs on: natively, under each nomu entry path,
//! in UML (Debian's user-mode-linux, hostfs root) and in gVisor (Debian's
//! runsc, `runsc do`, one system per platform). Each is probed first; one
//! that cannot run here is reported as skipped with the reason.

use super::ops::{parse_line, Line, Parsed};
use crate::entry::EntryKind;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Debian's user-mode-linux kernel.
pub const UML_KERNEL: &str = "/usr/bin/linux";
/// nomu's guest memory (--mem) for the benchmark.
const NOMU_MEM: &str = "6G";

/// What a `nomu run --mem NOMU_MEM` installs to catch guest syscalls (its
/// guest memory where nomu asks the host to put it), as the benchmark's
/// options, for its filter_ ops: host-backed operations natively under
/// the same seccomp filter and, where nomu uses it, the same syscall user
/// dispatch.
fn nomu_interception() -> Vec<String> {
    let mem = crate::cli::parse_size(NOMU_MEM).expect("NOMU_MEM is a size");
    let lo = crate::host::physmem::PREFERRED_BASE as u64;
    let (filter, dispatch) =
        crate::entry::seccomp::interception_for_bench(lo, lo + crate::mm::commit::window_for(mem) as u64);
    let mut args = vec!["--filter".to_string(), filter];
    if let Some(from) = dispatch {
        args.extend(["--dispatch-from".to_string(), format!("{from:x}")]);
    }
    args
}

/// UML's memory (its mem=): plenty for the benchmark and busybox.
const UML_MEM: &str = "512M";
/// gVisor platforms to try, best first. Debian 12's runsc (2022) has only
/// ptrace and kvm; systrap came later.
const GVISOR_PLATFORMS: [&str; 3] = ["systrap", "kvm", "ptrace"];
/// How long `runsc do /bin/true` may take before a platform counts as broken
/// (the kvm platform hangs at boot on some nested-virtualization hosts).
const GVISOR_PROBE: Duration = Duration::from_secs(15);

/// What every run needs to know.
pub struct Ctx {
    /// The benchmark binary (absolute).
    pub bin: PathBuf,
    /// build/root: a busybox root (absolute), when built.
    pub root: Option<PathBuf>,
    /// This nomu.
    pub nomu: PathBuf,
    /// Where UML's root directory is made (build/bench).
    pub work: PathBuf,
    /// --iters / --time-ms, passed to the benchmark as they are.
    pub bench_args: Vec<String>,
    /// A run that takes longer is killed.
    pub timeout: Duration,
}

impl Ctx {
    fn busybox(&self) -> Option<PathBuf> {
        self.root.as_ref().map(|r| r.join("bin/busybox")).filter(|p| p.exists())
    }

    /// build/root-mmu's busybox, built with an MMU: its ash forks.
    fn forking_busybox(&self) -> Option<PathBuf> {
        let root = self.root.as_ref()?;
        Some(root.with_file_name("root-mmu").join("bin/busybox")).filter(|p| p.exists())
    }

    /// runsc do's TMPDIR, where it writes the sandbox's bundle: removed
    /// after each run, since a killed runsc leaves its bundle behind.
    fn runsc_tmp(&self) -> PathBuf {
        self.work.join("runsc-tmp")
    }

    fn uml_root(&self) -> PathBuf {
        self.work.join("uml-root")
    }

    /// The benchmark's arguments when it runs with the host's filesystem.
    fn host_args(&self, ops: &[&str]) -> Vec<String> {
        let mut a = vec!["--progress".to_string(), "--dir".into(), "/tmp".into()];
        if let Some(sh) = self.busybox() {
            a.extend(["--sh".into(), sh.display().to_string()]);
        }
        if let Some(sh) = self.forking_busybox() {
            a.extend(["--fork-sh".into(), sh.display().to_string()]);
        }
        a.extend(self.bench_args.iter().cloned());
        a.extend(ops.iter().map(|o| o.to_string()));
        a
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Native,
    Nomu(EntryKind),
    Uml,
    Gvisor(&'static str),
}

pub struct System {
    /// Short name: native, nomu-seccomp, uml, gvisor-ptrace...
    pub id: String,
    pub kind: Kind,
}

impl System {
    fn new(kind: Kind) -> System {
        let id = match kind {
            Kind::Native => "native".to_string(),
            Kind::Nomu(k) => format!("nomu-{}", k.name()),
            Kind::Uml => "uml".to_string(),
            Kind::Gvisor(p) => format!("gvisor-{p}"),
        };
        System { id, kind }
    }

    /// Whether `--systems` names this one: its id, its entry path or
    /// platform alone (seccomp, ptrace), or its family (nomu, gvisor).
    pub fn matches(&self, name: &str) -> bool {
        self.id == name || self.id.split_once('-').is_some_and(|(family, rest)| family == name || rest == name)
    }

    /// How the system runs the benchmark, for the report.
    pub fn how(&self, ctx: &Ctx) -> String {
        match self.kind {
            Kind::Native => format!("{} (static-PIE musl)", ctx.bin.display()),
            Kind::Nomu(k) => format!("nomu run --entry {} -- BENCH", k.name()),
            Kind::Uml => format!(
                "{UML_KERNEL} mem={UML_MEM} root=/dev/root rootfstype=hostfs rootflags={} rw init=/bench-init \
                 quiet con0=fd:0,fd:1 con=null (a copy of build/root plus BENCH; /tmp is UML's tmpfs)",
                ctx.uml_root().display()
            ),
            Kind::Gvisor(p) => format!(
                "TMPDIR={} runsc {} do -quiet BENCH (host / read-only under a tmpfs overlay)",
                ctx.runsc_tmp().display(),
                gvisor_flags(p).join(" ")
            ),
        }
    }

    /// What exactly ran: the host kernel, nomu's version, UML's kernel,
    /// runsc's version.
    pub fn version(&self) -> String {
        let first_line = |prog: &str, arg: &str| {
            Command::new(prog)
                .arg(arg)
                .stdin(Stdio::null())
                .output()
                .ok()
                .and_then(|o| String::from_utf8_lossy(&o.stdout).lines().next().map(|l| l.trim().to_string()))
                .unwrap_or_default()
        };
        match self.kind {
            Kind::Native => {
                format!("Linux {}", std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim())
            }
            Kind::Nomu(_) => format!("nomu {}", env!("CARGO_PKG_VERSION")),
            Kind::Uml if Path::new(UML_KERNEL).exists() => format!("UML {}", first_line(UML_KERNEL, "--version")),
            Kind::Gvisor(_) if which("runsc").is_some() => first_line("runsc", "--version"),
            _ => String::new(),
        }
    }

    /// Ok when the system can run here, else why not. Prepares what it
    /// needs (UML's root directory).
    pub fn probe(&self, ctx: &Ctx) -> Result<(), String> {
        match self.kind {
            Kind::Native => Ok(()),
            Kind::Nomu(k) => k.availability(),
            Kind::Uml => {
                if !Path::new(UML_KERNEL).exists() {
                    return Err(format!(
                        "{UML_KERNEL} not installed (Debian's user-mode-linux: scripts/install-comparisons.sh)"
                    ));
                }
                make_uml_root(ctx)
            }
            Kind::Gvisor(p) => {
                if which("runsc").is_none() {
                    return Err("runsc not installed (Debian's runsc: scripts/install-comparisons.sh)".into());
                }
                if p == "kvm" && !Path::new("/dev/kvm").exists() {
                    return Err("no /dev/kvm".into());
                }
                let mut cmd = runsc_do(ctx, p);
                cmd.arg("/bin/true");
                let out = run_streaming(&mut cmd, GVISOR_PROBE, |_| {}).map_err(|e| format!("runsc do: {e}"));
                let _ = std::fs::remove_dir_all(ctx.runsc_tmp());
                let out = out?;
                if out.timed_out {
                    return Err(format!(
                        "`runsc --platform={p} do /bin/true` did not finish in {} s",
                        GVISOR_PROBE.as_secs()
                    ));
                }
                if !out.success {
                    let why =
                        out.tail.iter().rev().find(|l| !l.starts_with('(')).cloned().unwrap_or_else(|| out.tail());
                    return Err(format!("`runsc --platform={p} do /bin/true` failed: {why}"));
                }
                Ok(())
            }
        }
    }

    /// Runs the benchmark's `ops` once; `on_begin` is told each op as it
    /// starts.
    pub fn run(&self, ctx: &Ctx, ops: &[&str], on_begin: &mut dyn FnMut(&str)) -> Result<Parsed, String> {
        let mut cmd = match self.kind {
            Kind::Native => {
                let mut c = Command::new(&ctx.bin);
                c.args(nomu_interception()).args(ctx.host_args(ops));
                c
            }
            Kind::Nomu(k) => {
                let mut c = Command::new(&ctx.nomu);
                // exit_map4g maps 4 GiB; guest memory is taken from the host lazily.
                c.args(["run", "--entry", k.name(), "--mem", NOMU_MEM, "--"]).arg(&ctx.bin).args(ctx.host_args(ops));
                c
            }
            Kind::Uml => {
                write_uml_init(ctx, ops)?;
                let mut c = Command::new(UML_KERNEL);
                c.args([
                    format!("mem={UML_MEM}"),
                    "root=/dev/root".into(),
                    "rootfstype=hostfs".into(),
                    format!("rootflags={}", ctx.uml_root().display()),
                    "rw".into(),
                    "init=/bench-init".into(),
                    "quiet".into(),
                    "con0=fd:0,fd:1".into(),
                    "con=null".into(),
                ]);
                c
            }
            Kind::Gvisor(p) => {
                let mut c = runsc_do(ctx, p);
                c.arg(&ctx.bin).args(ctx.host_args(ops));
                c
            }
        };
        let mut parsed = Parsed::default();
        let out = run_streaming(&mut cmd, ctx.timeout, |line| match parse_line(line) {
            Line::Begin(op) => {
                on_begin(&op);
                parsed.last_begun = Some(op);
            }
            Line::Result(op, r) => {
                parsed.results.insert(op, r);
            }
            Line::Other => {}
        });
        if let Kind::Gvisor(_) = self.kind {
            let _ = std::fs::remove_dir_all(ctx.runsc_tmp());
        }
        let out = out?;
        // An op that began and never reported was cut short.
        if let Some(op) = &parsed.last_begun {
            if !parsed.results.contains_key(op) {
                let why = if out.timed_out {
                    format!("killed after {} s", ctx.timeout.as_secs())
                } else {
                    format!("the run ended during this op: {}", out.tail())
                };
                parsed.results.insert(op.clone(), Err(why));
            }
        }
        if parsed.results.is_empty() {
            return Err(if out.timed_out {
                format!("no result in {} s", ctx.timeout.as_secs())
            } else {
                format!("no result: {}", out.tail())
            });
        }
        Ok(parsed)
    }
}

/// Every system, in the order they run and are reported.
pub fn all() -> Vec<System> {
    let mut v = vec![System::new(Kind::Native)];
    v.extend(EntryKind::ALL.into_iter().map(|k| System::new(Kind::Nomu(k))));
    v.push(System::new(Kind::Uml));
    v.extend(GVISOR_PLATFORMS.into_iter().map(|p| System::new(Kind::Gvisor(p))));
    v
}

/// `runsc FLAGS do -quiet`, the program to follow.
fn runsc_do(ctx: &Ctx, platform: &str) -> Command {
    let tmp = ctx.runsc_tmp();
    let _ = std::fs::create_dir_all(&tmp);
    let mut c = Command::new("runsc");
    c.env("TMPDIR", tmp).args(gvisor_flags(platform)).args(["do", "-quiet"]);
    c
}

/// runsc's global flags: no network (the benchmark needs none), the
/// platform, and --rootless when not run as root.
fn gvisor_flags(platform: &str) -> Vec<String> {
    let mut f = vec!["--network=none".to_string(), format!("--platform={platform}")];
    if crate::host::sys::host_cred().uids[1] != 0 {
        f.push("--rootless".into());
    }
    f
}

fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(prog)).find(|p| p.is_file())
}

/// UML's hostfs root: a fresh copy of build/root (busybox) with the
/// benchmark as /bin/syscall_bench.
fn make_uml_root(ctx: &Ctx) -> Result<(), String> {
    let Some(src) = ctx.root.as_ref().filter(|r| r.join("bin/busybox").exists()) else {
        return Err("build/root/bin/busybox not built (make guests): UML needs it as its root".into());
    };
    let dst = ctx.uml_root();
    if dst.exists() {
        std::fs::remove_dir_all(&dst).map_err(|e| format!("removing {}: {e}", dst.display()))?;
    }
    let status = Command::new("cp").arg("-a").arg(src).arg(&dst).status().map_err(|e| format!("cp: {e}"))?;
    if !status.success() {
        return Err(format!("cp -a {} {} failed", src.display(), dst.display()));
    }
    std::fs::copy(&ctx.bin, dst.join("bin/syscall_bench")).map_err(|e| format!("copying the benchmark: {e}"))?;
    Ok(())
}

/// The script UML boots as init: mounts what the benchmark needs, runs it
/// on the console, reports its status and powers the machine off.
fn write_uml_init(ctx: &Ctx, ops: &[&str]) -> Result<(), String> {
    let mut args = vec!["--progress", "--dir", "/tmp", "--sh", "/bin/busybox"];
    args.extend(ctx.bench_args.iter().map(String::as_str));
    args.extend(ops);
    let script = format!(
        "#!/bin/sh\n\
         # Written by nomu bench: UML's init.\n\
         mount -t proc proc /proc\n\
         mount -t devtmpfs dev /dev 2>/dev/null || mknod -m 666 /dev/null c 1 3\n\
         mount -t tmpfs tmp /tmp\n\
         /bin/syscall_bench {}\n\
         echo nomu-bench-exit=$?\n\
         poweroff -f\n",
        args.join(" ")
    );
    let path = ctx.uml_root().join("bench-init");
    std::fs::write(&path, script).map_err(|e| format!("writing {}: {e}", path.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).map_err(|e| format!("chmod: {e}"))
}

/// How a run ended.
struct Ended {
    success: bool,
    timed_out: bool,
    /// The last lines it printed that were not results (stderr, or console
    /// messages): what to show when it failed.
    tail: Vec<String>,
}

impl Ended {
    fn tail(&self) -> String {
        if self.tail.is_empty() {
            return if self.success { "no output".into() } else { "failed with no output".into() };
        }
        self.tail.join(" | ")
    }
}

/// Runs `cmd` in a process group of its own, handing each stdout line to
/// `on_line` as it comes; the whole group is killed after `timeout`.
fn run_streaming(cmd: &mut Command, timeout: Duration, mut on_line: impl FnMut(&str)) -> Result<Ended, String> {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = cmd.spawn().map_err(|e| format!("{:?}: {e}", cmd.get_program()))?;
    let pgid = child.id() as i32;
    let (done, wait) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if wait.recv_timeout(timeout) == Err(mpsc::RecvTimeoutError::Timeout) {
            let _ = crate::host::sys::kill_group(pgid, libc::SIGKILL);
            return true;
        }
        false
    });
    let mut stderr = child.stderr.take().expect("piped stderr");
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        s
    });
    let mut tail = Vec::new();
    for line in BufReader::new(child.stdout.take().expect("piped stdout")).split(b'\n') {
        let Ok(line) = line else { break };
        let line = String::from_utf8_lossy(&line);
        on_line(&line);
        if matches!(parse_line(&line), Line::Other) && !line.trim().is_empty() {
            tail.push(line.trim().to_string());
        }
    }
    let status = child.wait().map_err(|e| format!("wait: {e}"))?;
    drop(done);
    let timed_out = watchdog.join().unwrap_or(false);
    let err = err_reader.join().unwrap_or_default();
    tail.extend(String::from_utf8_lossy(&err).lines().filter(|l| !l.trim().is_empty()).map(|l| l.trim().to_string()));
    let keep = tail.len().saturating_sub(4);
    tail.drain(..keep);
    if !status.success() {
        tail.push(format!("({status})"));
    }
    Ok(Ended { success: status.success(), timed_out, tail })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_names_match_filters() {
        let s = System::new(Kind::Nomu(EntryKind::Seccomp));
        assert_eq!(s.id, "nomu-seccomp");
        assert!(s.matches("nomu-seccomp") && s.matches("seccomp") && s.matches("nomu"));
        assert!(!s.matches("zpoline") && !s.matches("gvisor"));
        let g = System::new(Kind::Gvisor("ptrace"));
        assert!(g.matches("gvisor") && g.matches("ptrace") && !g.matches("uml"));
        assert!(System::new(Kind::Native).matches("native"));
    }
}
