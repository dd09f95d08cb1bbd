/*
 * syscall_bench: the cost of the operations of lmbench's table, one static
 * binary run natively, under nomu, in UML and in gVisor (`nomu bench`).
 *
 *   syscall_bench [--iters N | --time-ms N] [--reps N] [--dir DIR]
 *                 [--sh BUSYBOX] [--fork-sh BUSYBOX] [--filter HEX] [--dispatch-from HEX] [--progress] [OP...]
 *
 * Ops (default: all, in this order):
 *   getpid      raw getpid syscall (inline asm, no libc in the way)
 *   getppid     the same with getppid (lmbench's null syscall)
 *   read_null   read(fd, buf, 1) on an open /dev/null
 *   write_null  write(fd, buf, 1) on an open /dev/null
 *   fstat_null  fstat on the open /dev/null
 *   fstat       fstat on an open regular file in DIR
 *   stat        stat(path) on that file
 *   open_close  open(path, O_RDONLY) + close on that file
 *   select_10   select() for writing on 10 descriptors of that file, zero
 *   select_100  timeout (lmbench's lat_select on files), and on 100
 *   sig_install sigaction(SIGUSR1) (lmbench's "signal handler installation")
 *   signal      tkill(self, SIGUSR1) + handler + sigreturn
 *   pipe_rt     one byte there and back through pipes with a child process
 *   vfork_exit  vfork + _exit + wait
 *   vfork_exec  vfork + execve(this program, trivial) + wait
 *   spawn       posix_spawn(this program, trivial) + wait
 *   spawn_sh    posix_spawn(BUSYBOX sh -c :) + wait
 *   wake_futex, wake_sigsuspend, wake_sigtimedwait
 *               a wait another thread ends: FUTEX_WAKE each way, a signal
 *               ending sigsuspend, a signal ending sigwaitinfo
 *   wake_stop_cont
 *               a child stops itself, which ends the parent's wait4
 *               (WUNTRACED), and the parent's SIGCONT continues it
 *   thread      pthread_create of a thread that returns at once +
 *               pthread_join (musl maps each thread's stack and guard and
 *               unmaps them at the join)
 *   exit_0, exit_1m, exit_16m, exit_256m, exit_map4g, exit_threads
 *               a child's exit as its parent's wait sees it: the child
 *               touched 0, 1, 16 or 256 MiB, or mapped 4 GiB and touched 7
 *               pages, or runs 32 threads blocked in pause (exit_group);
 *               timed from the byte that tells it to exit to waitpid's
 *               return (spawning it and its setup are not timed)
 *   fork_exit_1m, fork_exit_64m
 *               fork + _exit + wait of a process that touched 1 or 64 MiB
 *               (touched once, untimed, before the loop)
 *   fork_exec   fork + execve(this program, trivial) + wait, 1 MiB touched
 *   forked_getppid, forked_fstat
 *               getppid, fstat of a regular file, in a forked child (timed
 *               there): what a forked process's syscalls cost
 *   subst_1000  posix_spawn(BUSYBOX sh -c 'a loop of 1000 $(echo $i)') + wait,
 *               BUSYBOX a build with an MMU (--fork-sh: its ash forks for each
 *               command substitution, as bash and dash do)
 *   sigsys_raw  one seccomp SECCOMP_RET_TRAP -> SIGSYS handler -> sigreturn
 *               round trip with no emulator at all; measured in a forked
 *               child because a seccomp filter cannot be removed
 *   sigsys_floor_getpid, _fstat, _stat, _open_close
 *               the op's syscalls trapped by seccomp and answered by the
 *               cheapest possible emulator: a SIGSYS handler that makes
 *               only the op's own host call (none for getpid) and returns
 *               to the trapped code as nomu's seccomp path does (xrstor of
 *               the frame's xsave image, return-stack refill on AMD, iretq; no
 *               sigreturn). What any SIGSYS-based emulator pays on this
 *               host; forked child too
 *   filter_read_null, _write_null, _fstat_null, _fstat, _stat, _open_close,
 *   _select_10, _select_100, _sig_install, _signal, _pipe_rt
 *               the op itself, natively, in a forked child that installed
 *               nomu's own seccomp filter (--filter HEX, which `nomu bench`
 *               passes): every host call pays the filter as each host call
 *               nomu makes does, so this is the floor of the op under
 *               nomu's in-process paths (zpoline, rewrite)
 *
 * Each op is warmed up while the iteration count is picked so that one loop
 * takes about --time-ms (default 2; --iters fixes the count instead), then
 * its loop is timed --reps times (default 100; the best is kept) with
 * CLOCK_MONOTONIC read only around whole loops. stdout carries one line per op and nothing else (with --progress,
 * also a begin=OP line as each op starts); `nomu bench` parses it:
 *
 *   op=getpid iters=200000 min_ns=123.4 median_ns=130.2
 *   op=sigsys_raw unavailable="fork: Function not implemented"
 *   op=stat error="stat /tmp/x: No such file or directory"
 *
 * Exit status: 0 ok, 1 some op failed (error=), 2 bad usage. An op that is
 * unavailable (e.g. sigsys_raw under nomu: no fork, no nested seccomp) is
 * not a failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define MAX_REPS 1000

/* ---- seccomp / classic BPF, spelled out: musl ships no linux/ headers ---- */

#ifndef PR_SET_NO_NEW_PRIVS
#define PR_SET_NO_NEW_PRIVS 38
#endif
#ifndef SYS_seccomp
#define SYS_seccomp 317
#endif
#define SECCOMP_SET_MODE_FILTER_ 1u
#define SECCOMP_RET_TRAP_ 0x00030000u
#define SECCOMP_RET_ALLOW_ 0x7fff0000u
#define AUDIT_ARCH_X86_64_ 0xc000003eu

#define BPF_LD_W_ABS 0x20   /* BPF_LD | BPF_W | BPF_ABS */
#define BPF_JEQ_K 0x15      /* BPF_JMP | BPF_JEQ | BPF_K */
#define BPF_RET_K 0x06      /* BPF_RET | BPF_K */

/* struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6]; */
#define SD_NR 0
#define SD_ARCH 4
#define SD_IP_LO 8
#define SD_IP_HI 12
#define SD_ARG0_LO 16
#define SD_ARG0_HI 20

struct bpf_insn {
    uint16_t code;
    uint8_t jt, jf;
    uint32_t k;
};
struct bpf_prog {
    unsigned short len;
    struct bpf_insn *filter;
};

/* The trapped syscall: uname with a pointer argument nothing real would pass
 * ("nomu" in ASCII), so libc's own uname calls, if any, go through. */
#define TRAP_NR SYS_uname
#define TRAP_MAGIC 0x6e6f6d75UL

/* ---- raw syscalls ---- */

#if defined(__x86_64__)
static inline long raw_syscall0(long n)
{
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(n) : "rcx", "r11", "memory");
    return ret;
}
static inline long raw_syscall1(long n, long a)
{
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a)
                     : "rcx", "r11", "memory");
    return ret;
}
static inline long raw_syscall6(long n, long a, long b, long c, long d, long e, long f)
{
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
#else
#error "syscall_bench is x86-64 only"
#endif

/* ---- output helpers ---- */

static int had_error;

/* Print a quoted value with double quotes and control characters replaced,
 * so the line stays machine-parseable whatever a path contains. */
static void print_quoted(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        putchar(c == '"' || c == '\\' ? '\'' : (c < 0x20 || c == 0x7f) ? '?' : c);
    }
    putchar('"');
}

static void print_msg(const char *op, const char *key, const char *msg)
{
    printf("op=%s %s=", op, key);
    print_quoted(msg);
    putchar('\n');
    fflush(stdout);
}

/* error="WHAT: strerror(err)" */
static void op_error(const char *op, const char *what, int err)
{
    char buf[4400];
    snprintf(buf, sizeof buf, "%s: %s", what, strerror(err));
    print_msg(op, "error", buf);
    had_error = 1;
}

/* ---- timing ---- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One benchmark body: runs `iters` iterations; returns 0 or an errno. */
typedef int (*loop_fn)(unsigned long iters);

/* Auto iterations: each timed loop lasts about this long (--time-ms). The
 * same code runs natively and in systems 100x slower (UML, gVisor), so a
 * fixed count would either say nothing natively or take minutes there.
 * Many short loops, the best kept (--reps): on a busy machine a loop of a
 * few ms often runs within one time slice, a loop of 50 ms never does. */
static double target_ns = 2e6;
static int reps = 100;

struct timing {
    unsigned long iters; /* per timed loop */
    unsigned long total; /* every iteration run, warm-up included */
    double min_ns, median_ns;
};

/* Time a loop spends on what it does not measure (setting up each
 * iteration); measure() takes it out. */
static uint64_t untimed_ns;

/* Warms up and picks the iteration count (unless `iters` is given), then
 * times `reps` loops. On failure returns the errno. */
static int measure(loop_fn fn, unsigned long iters, struct timing *t)
{
    double per_op[MAX_REPS];
    int err;
    t->total = 0;
    if (iters) {
        unsigned long w = iters / 10 ? iters / 10 : 1;
        if ((err = fn(w)))
            return err;
        t->total += w;
    } else {
        /* Grow the count until one loop takes a tenth of the target (the
         * warm-up), then scale it to the target. */
        unsigned long n = 1;
        for (;;) {
            untimed_ns = 0;
            uint64_t t0 = now_ns();
            if ((err = fn(n)))
                return err;
            double dt = (double)(now_ns() - t0 - untimed_ns);
            t->total += n;
            if (dt >= target_ns / 10 || n >= (1ul << 40)) {
                double want = (double)n * target_ns / (dt > 1 ? dt : 1);
                iters = want < 1 ? 1 : (unsigned long)want;
                break;
            }
            n *= dt * 100 < target_ns ? 8 : 2;
        }
    }
    t->iters = iters;
    /* Ops whose untimed setup dwarfs what they time (the exits of children
     * that touched hundreds of MiB) stop after a second of wall time, with
     * at least three loops. */
    uint64_t started = now_ns();
    int done = 0;
    for (int r = 0; r < reps; r++, done++) {
        if (r >= 3 && now_ns() - started > 1000000000ull)
            break;
        untimed_ns = 0;
        uint64_t t0 = now_ns();
        err = fn(iters);
        uint64_t t1 = now_ns();
        if (err)
            return err;
        t->total += iters;
        per_op[r] = (double)(t1 - t0 - untimed_ns) / (double)iters;
    }
    qsort(per_op, (size_t)done, sizeof per_op[0], cmp_double);
    t->min_ns = per_op[0];
    t->median_ns = per_op[done / 2];
    return 0;
}

static void print_result(const char *op, const struct timing *t)
{
    printf("op=%s iters=%lu min_ns=%.1f median_ns=%.1f\n", op, t->iters,
           t->min_ns, t->median_ns);
    fflush(stdout);
}

/* ---- the ops ---- */

static int null_fd = -1;     /* /dev/null, O_RDWR */
static int file_fd = -1;     /* the regular file in DIR, O_RDONLY */
static char file_path[4096]; /* its path */

/* One argument-less syscall, raw (inline asm, no libc in the way). */
static int loop_raw0(long nr, unsigned long iters)
{
    for (unsigned long i = 0; i < iters; i++) {
        long r = raw_syscall0(nr);
        if (r < 0)
            return (int)-r;
    }
    return 0;
}

static int loop_getpid(unsigned long iters)
{
    return loop_raw0(SYS_getpid, iters);
}

/* getppid: the null syscall lmbench measures, which no nomu path answers
 * before its kernel (getpid and gettid zpoline and rewrite answer in their
 * stubs), so it shows the whole way in and out. */
static int loop_getppid(unsigned long iters)
{
    return loop_raw0(SYS_getppid, iters);
}

static int loop_read_null(unsigned long iters)
{
    char buf[1];
    for (unsigned long i = 0; i < iters; i++)
        if (read(null_fd, buf, 1) < 0)
            return errno;
    return 0;
}

static int loop_write_null(unsigned long iters)
{
    static const char buf[1] = {'x'};
    for (unsigned long i = 0; i < iters; i++)
        if (write(null_fd, buf, 1) != 1)
            return errno ? errno : EIO;
    return 0;
}

static int fstat_loop(int fd, unsigned long iters)
{
    struct stat st;
    for (unsigned long i = 0; i < iters; i++)
        if (fstat(fd, &st) < 0)
            return errno;
    return 0;
}

static int loop_fstat_null(unsigned long iters)
{
    return fstat_loop(null_fd, iters);
}

static int loop_fstat(unsigned long iters)
{
    return fstat_loop(file_fd, iters);
}

static int loop_open_close(unsigned long iters)
{
    for (unsigned long i = 0; i < iters; i++) {
        int fd = open(file_path, O_RDONLY);
        if (fd < 0)
            return errno;
        if (close(fd) < 0)
            return errno;
    }
    return 0;
}

static int loop_stat(unsigned long iters)
{
    struct stat st;
    for (unsigned long i = 0; i < iters; i++)
        if (stat(file_path, &st) < 0)
            return errno;
    return 0;
}

/* select() on N descriptors of the regular file, as lmbench's lat_select
 * does with files: every one is ready for writing, the timeout is zero. */
static fd_set select_set;
static int select_nfds;

static int open_select_fds(int n)
{
    FD_ZERO(&select_set);
    select_nfds = 0;
    for (int i = 0; i < n; i++) {
        int fd = open(file_path, O_RDWR);
        if (fd < 0)
            return errno;
        if (fd >= FD_SETSIZE) {
            close(fd);
            return EMFILE;
        }
        FD_SET(fd, &select_set);
        if (fd + 1 > select_nfds)
            select_nfds = fd + 1;
    }
    return 0;
}

static void close_select_fds(void)
{
    for (int fd = 0; fd < select_nfds; fd++)
        if (FD_ISSET(fd, &select_set))
            close(fd);
    FD_ZERO(&select_set);
    select_nfds = 0;
}

static int loop_select(unsigned long iters)
{
    for (unsigned long i = 0; i < iters; i++) {
        fd_set w = select_set;
        struct timeval tv = {0, 0};
        if (select(select_nfds, NULL, &w, NULL, &tv) < 0)
            return errno;
    }
    return 0;
}

/* ---- processes and signals ---- */

static const char *self_path;  /* argv[0]: re-executed as a trivial child */
static const char *sh_path;    /* --sh: a busybox whose `sh -c :` is spawned */
static const char *fork_sh_path; /* --fork-sh: a busybox whose sh forks */
static int progress;           /* --progress: a begin=OP line before each op */
extern char **environ;

static int wait_ok(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return errno;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : ECHILD;
}

static int loop_vfork_exit(unsigned long iters)
{
    for (volatile unsigned long i = 0; i < iters; i++) {
        pid_t pid = vfork();
        if (pid == 0)
            _exit(0);
        if (pid < 0)
            return errno;
        int e = wait_ok(pid);
        if (e)
            return e;
    }
    return 0;
}

static int loop_vfork_exec(unsigned long iters)
{
    char *args[] = {(char *)self_path, "--child-exit", NULL};
    for (volatile unsigned long i = 0; i < iters; i++) {
        pid_t pid = vfork();
        if (pid == 0) {
            execve(self_path, args, environ);
            _exit(127);
        }
        if (pid < 0)
            return errno;
        int e = wait_ok(pid);
        if (e)
            return e;
    }
    return 0;
}

static int spawn_wait(const char *path, char **args)
{
    pid_t pid;
    int e = posix_spawn(&pid, path, NULL, NULL, args, environ);
    return e ? e : wait_ok(pid);
}

static int loop_spawn(unsigned long iters)
{
    char *args[] = {(char *)self_path, "--child-exit", NULL};
    for (unsigned long i = 0; i < iters; i++) {
        int e = spawn_wait(self_path, args);
        if (e)
            return e;
    }
    return 0;
}

static int loop_spawn_sh(unsigned long iters)
{
    char *args[] = {(char *)sh_path, "sh", "-c", ":", NULL};
    for (unsigned long i = 0; i < iters; i++) {
        int e = spawn_wait(sh_path, args);
        if (e)
            return e;
    }
    return 0;
}

static int loop_subst_1000(unsigned long iters)
{
    char *args[] = {(char *)fork_sh_path, "sh", "-c",
                    "i=0; while [ $i -lt 1000 ]; do x=$(echo $i); i=$((i + 1)); done; [ \"$x\" = 999 ]", NULL};
    for (unsigned long i = 0; i < iters; i++) {
        int e = spawn_wait(fork_sh_path, args);
        if (e)
            return e;
    }
    return 0;
}

/* fork: what the parent touched is the child's (nomu copies it into the
 * child's host process of its own at fork). Touched once per run of the
 * op, untimed. */
static int fork_touch(unsigned long mib)
{
    static unsigned long have;
    static char *touched;
    if (have == mib)
        return 0;
    if (touched)
        munmap(touched, have << 20); /* another op's: not copied here */
    touched = NULL;
    have = 0;
    size_t len = mib << 20;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return errno;
    for (size_t off = 0; off < len; off += 4096)
        p[off] = 1;
    touched = p;
    have = mib;
    return 0;
}

static int fork_loop(unsigned long iters, unsigned long mib, int exec)
{
    uint64_t t0 = now_ns();
    int e = fork_touch(mib);
    untimed_ns += now_ns() - t0;
    if (e)
        return e;
    char *args[] = {(char *)self_path, "--child-exit", NULL};
    for (unsigned long i = 0; i < iters; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            if (exec)
                execve(self_path, args, environ);
            _exit(exec ? 127 : 0);
        }
        if (pid < 0)
            return errno;
        e = wait_ok(pid);
        if (e)
            return e;
    }
    return 0;
}

static int loop_fork_exit_1m(unsigned long iters)
{
    return fork_loop(iters, 1, 0);
}

static int loop_fork_exit_64m(unsigned long iters)
{
    return fork_loop(iters, 64, 0);
}

static int loop_fork_exec(unsigned long iters)
{
    return fork_loop(iters, 1, 1);
}

static int echo_to = -1, echo_from = -1; /* pipes to and from the echo child */

static int loop_pipe_rt(unsigned long iters)
{
    char c = 'x';
    for (unsigned long i = 0; i < iters; i++) {
        if (write(echo_to, &c, 1) != 1 || read(echo_from, &c, 1) != 1)
            return errno ? errno : EIO;
    }
    return 0;
}

/* Where nomu's syscall user dispatch allows syscalls from (--dispatch-from,
 * hex: the end of guest memory; 0: nomu catches guest syscalls with the
 * filter alone). The floor child and its echo child turn it on as nomu's
 * host threads do; the selector is read-only and says "block". */
static unsigned long dispatch_from;
static const char dispatch_selector = 1;
static int in_floor;

static int dispatch_on(void)
{
    if (!dispatch_from)
        return 0;
    /* PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON */
    return prctl(59, 1L, dispatch_from, (1UL << 63) - dispatch_from, &dispatch_selector) < 0 ? -1 : 0;
}

static int start_echo_child(pid_t *pid)
{
    int down[2], up[2];
    if (pipe2(down, O_CLOEXEC) < 0 || pipe2(up, O_CLOEXEC) < 0)
        return errno;
    /* Only the child's two ends survive its exec, as fds 100 and 101. */
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, down[0], 100);
    posix_spawn_file_actions_adddup2(&fa, up[1], 101);
    /* A floor's echo child turns dispatch on too (exec drops it). */
    char from[32];
    snprintf(from, sizeof from, "%lx", dispatch_from);
    char *args[] = {(char *)self_path, "--child-echo", "100", "101", in_floor && dispatch_from ? from : NULL, NULL};
    int e = posix_spawn(pid, self_path, &fa, NULL, args, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(down[0]);
    close(up[1]);
    echo_to = down[1];
    echo_from = up[0];
    return e;
}

static volatile unsigned long signals_seen;
static void on_usr1(int sig) { (void)sig; signals_seen++; }

/* lmbench's "signal handler installation": the same sigaction, again. */
static int loop_sig_install(unsigned long iters)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    for (unsigned long i = 0; i < iters; i++)
        if (sigaction(SIGUSR1, &sa, &old) < 0)
            return errno;
    return 0;
}

static int loop_signal(unsigned long iters)
{
    long tid = syscall(SYS_gettid);
    for (unsigned long i = 0; i < iters; i++)
        if (syscall(SYS_tkill, tid, SIGUSR1) < 0)
            return errno;
    return 0;
}

/* ---- wake-ups: another thread ends a wait ----
 *
 * A waker thread sleeps in FUTEX_WAIT on `armed`; each iteration the main
 * thread bumps it, wakes the waker and waits in the call measured, which
 * the waker then ends (a signal, or a FUTEX_WAKE). So each iteration is a
 * futex wake of the waker plus the wake-up measured: wake_futex (the
 * futex wake each way) is the baseline to read the others against. */

#define WAKE_SIGNAL 1
#define WAKE_FUTEX 2
static uint32_t armed, answered;
static volatile int waker_mode, waker_stop;
static pthread_t main_thread, waker_thread;
static long main_tid;

/* In a SIGSYS floor's child (below), every syscall of the wake-ups goes
 * through floor_trap, so the emulator's handler answers each of them. */
static int wake_floor;
static long floor_pid;
long floor_trap(long nr, long a, long b, long c, long d);

static long bench_futex(uint32_t *w, int op, uint32_t v)
{
    op |= 128; /* FUTEX_PRIVATE_FLAG */
    if (wake_floor)
        return floor_trap(SYS_futex, (long)w, op, v, 0);
    return syscall(SYS_futex, w, op, v, NULL, NULL, 0);
}

static void *waker(void *arg)
{
    uint32_t seen = 0;
    for (;;) {
        while (__atomic_load_n(&armed, __ATOMIC_ACQUIRE) == seen)
            bench_futex(&armed, 0 /* FUTEX_WAIT */, seen);
        seen = __atomic_load_n(&armed, __ATOMIC_ACQUIRE);
        if (waker_stop)
            return arg;
        if (waker_mode == WAKE_SIGNAL) {
            if (wake_floor)
                floor_trap(SYS_tgkill, floor_pid, main_tid, SIGUSR1, 0);
            else
                pthread_kill(main_thread, SIGUSR1);
        } else {
            __atomic_store_n(&answered, seen, __ATOMIC_RELEASE);
            bench_futex(&answered, 1 /* FUTEX_WAKE */, 1);
        }
    }
}

static void arm_waker(void)
{
    __atomic_add_fetch(&armed, 1, __ATOMIC_RELEASE);
    bench_futex(&armed, 1 /* FUTEX_WAKE */, 1);
}

static int start_waker(int mode)
{
    main_thread = pthread_self();
    main_tid = syscall(SYS_gettid);
    waker_mode = mode;
    waker_stop = 0;
    armed = answered = 0;
    return pthread_create(&waker_thread, NULL, waker, NULL);
}

static void stop_waker(void)
{
    waker_stop = 1;
    arm_waker();
    pthread_join(waker_thread, NULL);
}

static int loop_wake_futex(unsigned long iters)
{
    for (unsigned long i = 0; i < iters; i++) {
        uint32_t want = armed + 1, now;
        arm_waker();
        while ((now = __atomic_load_n(&answered, __ATOMIC_ACQUIRE)) != want)
            bench_futex(&answered, 0 /* FUTEX_WAIT */, now);
    }
    return 0;
}

/* SIGUSR1 stays blocked outside the waits, so it can only land in them. */
static int loop_wake_sigsuspend(unsigned long iters)
{
    sigset_t open_mask;
    pthread_sigmask(SIG_SETMASK, NULL, &open_mask);
    sigdelset(&open_mask, SIGUSR1);
    for (unsigned long i = 0; i < iters; i++) {
        arm_waker();
        if (wake_floor) {
            long r = floor_trap(SYS_rt_sigsuspend, (long)&open_mask, 8, 0, 0);
            if (r != -EINTR)
                return r < 0 ? (int)-r : EIO;
        } else if (sigsuspend(&open_mask) != -1 || errno != EINTR) {
            return errno ? errno : EIO;
        }
    }
    return 0;
}

static int loop_wake_sigtimedwait(unsigned long iters)
{
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    for (unsigned long i = 0; i < iters; i++) {
        arm_waker();
        long r = wake_floor ? floor_trap(SYS_rt_sigtimedwait, (long)&usr1, 0, 0, 8) : sigwaitinfo(&usr1, NULL);
        if (r != SIGUSR1)
            return r < 0 && wake_floor ? (int)-r : errno ? errno : EIO;
    }
    return 0;
}

/* A child that stops itself again each time it is continued: each
 * iteration, its stop wakes the parent's wait4 (WUNTRACED) and the
 * parent's SIGCONT wakes it, another process's event each way. The
 * child's spawn, start-up (to its first stop) and end are not timed: with
 * them, the warm-up's short loops were mostly a spawn, and a 2 ms loop
 * ran 2 or 3 stops. */
static int loop_wake_stop_cont(unsigned long iters)
{
    char *args[] = {(char *)self_path, "--child-stopper", NULL};
    pid_t pid;
    uint64_t t0 = now_ns();
    int e = posix_spawn(&pid, self_path, NULL, NULL, args, environ);
    if (e)
        return e;
    int status;
    /* Round 0, untimed with the spawn: its first stop comes after its
     * start-up. */
    for (unsigned long i = 0; i <= iters && !e; i++) {
        if (i == 1)
            untimed_ns += now_ns() - t0;
        if (waitpid(pid, &status, WUNTRACED) != pid)
            e = errno;
        else if (!WIFSTOPPED(status))
            e = ECHILD;
        else if (kill(pid, SIGCONT) < 0)
            e = errno;
    }
    uint64_t t1 = now_ns();
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    untimed_ns += now_ns() - t1;
    return e;
}

/* ---- exit: a child's teardown as its parent's wait sees it ----
 *
 * Each iteration spawns this program as a child that sets itself up (its
 * memory touched, its threads started), says so on one pipe and waits for
 * a byte on another. Only the rest is timed: the byte, the child's exit
 * (everything it had freed, its threads ended) and the parent's waitpid
 * returning. The descriptors the child gets, at fixed numbers: */
#define EXIT_READY_FD 100
#define EXIT_GO_FD 101

static int exit_child(const char *what, const char *arg)
{
    char *args[] = {(char *)self_path, "--child-exit-after", (char *)what, (char *)arg, NULL};
    uint64_t t0 = now_ns();
    int ready[2], go[2];
    if (pipe2(ready, O_CLOEXEC) < 0)
        return errno;
    if (pipe2(go, O_CLOEXEC) < 0) {
        int e = errno;
        close(ready[0]);
        close(ready[1]);
        return e;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, ready[1], EXIT_READY_FD);
    posix_spawn_file_actions_adddup2(&fa, go[0], EXIT_GO_FD);
    pid_t pid;
    int e = posix_spawn(&pid, self_path, &fa, NULL, args, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(ready[1]);
    close(go[0]);
    char c;
    if (!e && read(ready[0], &c, 1) != 1)
        e = ECHILD; /* it could not set itself up */
    uint64_t t1 = now_ns();
    if (!e && write(go[1], "x", 1) != 1)
        e = errno;
    if (!e || e == ECHILD) {
        int w = wait_ok(pid);
        e = e ? e : w;
    }
    uint64_t t2 = now_ns();
    close(ready[0]);
    close(go[1]);
    untimed_ns += (t1 - t0) + (now_ns() - t2);
    return e;
}

static void *returns_at_once(void *arg)
{
    return arg;
}

static int loop_thread(unsigned long iters)
{
    for (unsigned long i = 0; i < iters; i++) {
        pthread_t t;
        int e = pthread_create(&t, NULL, returns_at_once, NULL);
        if (e)
            return e;
        e = pthread_join(t, NULL);
        if (e)
            return e;
    }
    return 0;
}

static void *paused(void *arg)
{
    for (;;)
        pause();
    return arg;
}

/* The child: sets itself up as `what` says, then exits when told. */
static int exit_after(const char *what, const char *arg)
{
    unsigned long n = strtoul(arg, NULL, 10);
    if (!strcmp(what, "touch") && n) {
        size_t len = n << 20;
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return 1;
        for (size_t off = 0; off < len; off += 4096)
            p[off] = 1;
    } else if (!strcmp(what, "map")) {
        /* n GiB mapped (as the heap reservations of glibc or a JVM), 7
         * pages of it touched. */
        size_t len = n << 30;
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return 1;
        for (int i = 0; i < 7; i++)
            p[len / 7 * i & ~4095ul] = 1;
    } else if (!strcmp(what, "threads")) {
        for (unsigned long i = 0; i < n; i++) {
            pthread_t t;
            if (pthread_create(&t, NULL, paused, NULL))
                return 1;
        }
    }
    char c;
    if (write(EXIT_READY_FD, "r", 1) != 1 || read(EXIT_GO_FD, &c, 1) != 1)
        return 1;
    _exit(0); /* exit_group: the threads too */
}

#define EXIT_LOOP(name, what, arg)                                 \
    static int name(unsigned long iters)                           \
    {                                                              \
        for (unsigned long i = 0; i < iters; i++) {                \
            int e = exit_child(what, arg);                         \
            if (e)                                                 \
                return e;                                          \
        }                                                          \
        return 0;                                                  \
    }
EXIT_LOOP(loop_exit_0, "touch", "0")
EXIT_LOOP(loop_exit_1m, "touch", "1")
EXIT_LOOP(loop_exit_16m, "touch", "16")
EXIT_LOOP(loop_exit_256m, "touch", "256")
EXIT_LOOP(loop_exit_map4g, "map", "4")
EXIT_LOOP(loop_exit_threads, "threads", "32")

/* ---- sigsys_raw and the SIGSYS emulator floors ---- */

static volatile unsigned long sigsys_count;

static void sigsys_handler(int sig, siginfo_t *si, void *ctx)
{
    ucontext_t *uc = ctx;
    uc->uc_mcontext.gregs[REG_RAX] = 0;
    sigsys_count++;
}

static int loop_sigsys(unsigned long iters)
{
    for (unsigned long i = 0; i < iters; i++)
        raw_syscall1(TRAP_NR, (long)TRAP_MAGIC);
    return 0;
}

/* The floors' trapped syscalls all come from one instruction, the filter
 * traps that one (by instruction pointer) and lets the handler's own host
 * calls through: as nomu's filter traps guest code and lets nomu's through.
 *
 * floor_trap(nr, a, b, c, d) makes syscall nr(a, b, c, d) there.
 * floor_resume(gregs, xsave) never returns: it loads the frame's xsave
 * image (fxrstor when it holds exactly x87 and SSE, else xrstor of what it
 * holds and SSE), refills the return-stack predictor, loads the frame's
 * registers and iretqs to the frame's rip, rsp and RFLAGS: nomu's seccomp
 * way back (src/entry/seccomp.rs) without its fs-base swap. The
 * signal mask needs no sigreturn: the handler is SA_NODEFER with an empty
 * sa_mask. The gregs offsets are musl's and glibc's REG_* order. */
void floor_resume(const greg_t *gregs, const void *xsave) __attribute__((noreturn));
/* Whether the way back refills the return-stack predictor: on AMD, as nomu
 * does (src/host/mod.rs, init_return_stack_fill). */
unsigned char floor_fill_rsb;
static int cpu_is_amd(void)
{
    unsigned a = 0, b, c, d;
    __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "=c"(c), "=d"(d));
    char v[13];
    memcpy(v, &b, 4);
    memcpy(v + 4, &d, 4);
    memcpy(v + 8, &c, 4);
    v[12] = 0;
    return !strcmp(v, "AuthenticAMD") || !strcmp(v, "HygonGenuine");
}
extern const char floor_trap_ret[];
__asm__(".text\n"
        ".intel_syntax noprefix\n"
        ".globl floor_trap\n"
        "floor_trap:\n"
        "    mov rax, rdi\n"
        "    mov rdi, rsi\n"
        "    mov rsi, rdx\n"
        "    mov rdx, rcx\n"
        "    mov r10, r8\n"
        "    syscall\n"
        ".globl floor_trap_ret\n"
        "floor_trap_ret:\n"
        "    ret\n"
        ".globl floor_resume\n"
        "floor_resume:\n"
        "    mov rbx, rdi\n"
        "    mov eax, [rsi + 512]\n" /* XSTATE_BV */
        "    cmp eax, 3\n"
        "    jne 1f\n"
        "    cmp dword ptr [rsi + 516], 0\n"
        "    jne 1f\n"
        "    fxrstor64 [rsi]\n"
        "    jmp 2f\n"
        "1:  or eax, 2\n"
        "    xor edx, edx\n"
        "    xrstor64 [rsi]\n"
        "2:  and rsp, -16\n"
        /* The return-stack refill of nomu's way back, where nomu makes it
         * (on AMD: floor_fill_rsb): without it the trapped code's next ret
         * is predicted from what the handler left, and that cost 0-450 ns
         * on the AMD VM depending on code layout alone. */
        "    cmp byte ptr [rip + floor_fill_rsb], 0\n"
        "    je 8f\n"
        "    mov r11d, 16\n"
        "3:  call 5f\n"
        "4:  pause\n"
        "    lfence\n"
        "    jmp 4b\n"
        "5:  call 7f\n"
        "6:  pause\n"
        "    lfence\n"
        "    jmp 6b\n"
        "7:  dec r11d\n"
        "    jnz 3b\n"
        "    add rsp, 256\n"
        "8:  sub rsp, 40\n"
        "    mov rax, [rbx + 16*8]\n" /* REG_RIP */
        "    mov [rsp], rax\n"
        "    mov qword ptr [rsp + 8], 0\n"
        "    mov word ptr [rsp + 8], cs\n"
        "    mov rax, [rbx + 17*8]\n" /* REG_EFL */
        "    mov [rsp + 16], rax\n"
        "    mov rax, [rbx + 15*8]\n" /* REG_RSP */
        "    mov [rsp + 24], rax\n"
        "    mov qword ptr [rsp + 32], 0\n"
        "    mov word ptr [rsp + 32], ss\n"
        "    mov r8, [rbx + 0*8]\n"
        "    mov r9, [rbx + 1*8]\n"
        "    mov r10, [rbx + 2*8]\n"
        "    mov r11, [rbx + 3*8]\n"
        "    mov r12, [rbx + 4*8]\n"
        "    mov r13, [rbx + 5*8]\n"
        "    mov r14, [rbx + 6*8]\n"
        "    mov r15, [rbx + 7*8]\n"
        "    mov rdi, [rbx + 8*8]\n"
        "    mov rsi, [rbx + 9*8]\n"
        "    mov rbp, [rbx + 10*8]\n"
        "    mov rdx, [rbx + 12*8]\n"
        "    mov rax, [rbx + 13*8]\n"
        "    mov rcx, [rbx + 14*8]\n"
        "    mov rbx, [rbx + 11*8]\n"
        "    iretq\n"
        ".att_syntax prefix\n");

/* The emulator: getpid answered from memory (as nomu does), anything else
 * passed to the host; the result goes back in rax. */
static void floor_handler(int sig, siginfo_t *si, void *ctx)
{
    ucontext_t *uc = ctx;
    greg_t *g = uc->uc_mcontext.gregs;
    long nr = g[REG_RAX];
    g[REG_RAX] = nr == SYS_getpid ? floor_pid
                                  : raw_syscall6(nr, g[REG_RDI], g[REG_RSI], g[REG_RDX],
                                                 g[REG_R10], g[REG_R8], g[REG_R9]);
    sigsys_count++;
    floor_resume(g, uc->uc_mcontext.fpregs);
}

static int loop_floor_getpid(unsigned long iters)
{
    for (unsigned long i = 0; i < iters; i++)
        if (floor_trap(SYS_getpid, 0, 0, 0, 0) != floor_pid)
            return EPROTO;
    return 0;
}

static int loop_floor_fstat(unsigned long iters)
{
    struct stat st;
    for (unsigned long i = 0; i < iters; i++) {
        long r = floor_trap(SYS_fstat, file_fd, (long)&st, 0, 0);
        if (r < 0)
            return (int)-r;
    }
    return 0;
}

static int loop_floor_stat(unsigned long iters)
{
    struct stat st;
    for (unsigned long i = 0; i < iters; i++) {
        long r = floor_trap(SYS_stat, (long)file_path, (long)&st, 0, 0);
        if (r < 0)
            return (int)-r;
    }
    return 0;
}

static int loop_floor_open_close(unsigned long iters)
{
    for (unsigned long i = 0; i < iters; i++) {
        long fd = floor_trap(SYS_open, (long)file_path, O_RDONLY, 0, 0);
        if (fd < 0)
            return (int)-fd;
        long r = floor_trap(SYS_close, fd, 0, 0, 0);
        if (r < 0)
            return (int)-r;
    }
    return 0;
}

/* Which handler and filter a forked SIGSYS child installs. */
enum sigsys_kind {
    NOT_SIGSYS,
    SIGSYS_RAW,   /* uname(TRAP_MAGIC) trapped, sigreturn way back */
    SIGSYS_FLOOR, /* floor_trap's syscall trapped, nomu's way back */
    NOMU_FILTER,  /* the plain op under nomu's own filter (--filter) */
    FORKED,       /* the plain op in a forked child (no exec) */
};

struct sigsys_result {
    int kind; /* 0 ok, 1 unavailable, 2 error */
    struct timing t;
    char msg[256];
};

static char altstack[64 * 1024] __attribute__((aligned(16)));

static void on_usr1(int sig);
static int start_waker(int mode);
static void stop_waker(void);

/* Runs in the forked child: install handler + filter, measure. A wake-up's
 * floor (`waker`: its mode) traps both threads' syscalls but the signal
 * handler's rt_sigreturn (libc's restorer), so it is a little low. */
static void sigsys_child(enum sigsys_kind kind, loop_fn fn, int waker, unsigned long iters,
                         struct sigsys_result *res)
{
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) < 0) {
        res->kind = 2;
        snprintf(res->msg, sizeof res->msg, "sigaltstack: %s", strerror(errno));
        return;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = kind == SIGSYS_RAW ? sigsys_handler : floor_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | (kind == SIGSYS_FLOOR ? SA_NODEFER : 0);
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSYS, &sa, NULL) < 0) {
        res->kind = 1;
        snprintf(res->msg, sizeof res->msg, "sigaction: %s", strerror(errno));
        return;
    }

    uint64_t site = (uint64_t)(uintptr_t)floor_trap_ret;
    struct bpf_insn raw_insns[] = {
        {BPF_LD_W_ABS, 0, 0, SD_ARCH},
        {BPF_JEQ_K, 0, 7, AUDIT_ARCH_X86_64_},
        {BPF_LD_W_ABS, 0, 0, SD_NR},
        {BPF_JEQ_K, 0, 5, (uint32_t)TRAP_NR},
        {BPF_LD_W_ABS, 0, 0, SD_ARG0_LO},
        {BPF_JEQ_K, 0, 3, (uint32_t)TRAP_MAGIC},
        {BPF_LD_W_ABS, 0, 0, SD_ARG0_HI},
        {BPF_JEQ_K, 0, 1, 0},
        {BPF_RET_K, 0, 0, SECCOMP_RET_TRAP_},
        {BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW_},
    };
    struct bpf_insn floor_insns[] = {
        {BPF_LD_W_ABS, 0, 0, SD_ARCH},
        {BPF_JEQ_K, 0, 5, AUDIT_ARCH_X86_64_},
        {BPF_LD_W_ABS, 0, 0, SD_IP_LO},
        {BPF_JEQ_K, 0, 3, (uint32_t)site},
        {BPF_LD_W_ABS, 0, 0, SD_IP_HI},
        {BPF_JEQ_K, 0, 1, (uint32_t)(site >> 32)},
        {BPF_RET_K, 0, 0, SECCOMP_RET_TRAP_},
        {BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW_},
    };
    struct bpf_prog prog = {
        .len = kind == SIGSYS_RAW ? sizeof raw_insns / sizeof raw_insns[0]
                                  : sizeof floor_insns / sizeof floor_insns[0],
        .filter = kind == SIGSYS_RAW ? raw_insns : floor_insns,
    };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) < 0) {
        res->kind = 1;
        snprintf(res->msg, sizeof res->msg, "prctl(PR_SET_NO_NEW_PRIVS): %s",
                 strerror(errno));
        return;
    }
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER_, 0u, &prog) < 0) {
        res->kind = 1;
        snprintf(res->msg, sizeof res->msg, "seccomp: %s", strerror(errno));
        return;
    }

    /* Check that the filter really traps and the handler really ran: an
     * untrapped uname(0x6e6f6d75) would fail with EFAULT; an untrapped
     * getpid would leave the count alone. */
    floor_pid = getpid();
    long r = kind == SIGSYS_RAW ? raw_syscall1(TRAP_NR, (long)TRAP_MAGIC)
                                : floor_trap(SYS_getpid, 0, 0, 0, 0) - floor_pid;
    if (r != 0 || sigsys_count != 1) {
        res->kind = 2;
        snprintf(res->msg, sizeof res->msg,
                 "filter did not trap (ret %ld, handler ran %lu times)", r,
                 sigsys_count);
        return;
    }

    if (waker) {
        sigset_t usr1;
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        signal(SIGUSR1, on_usr1);
        pthread_sigmask(SIG_BLOCK, &usr1, NULL);
        wake_floor = 1;
        int e = start_waker(waker);
        if (e) {
            res->kind = 2;
            snprintf(res->msg, sizeof res->msg, "start the waker thread: %s", strerror(e));
            return;
        }
    }
    unsigned long before = sigsys_count;
    int err = measure(fn, iters, &res->t);
    unsigned long ran = sigsys_count - before;
    if (waker)
        stop_waker();
    /* A wake-up's iteration traps at least twice (the arming wake and the
     * waker's answer), how often more depends on who runs first. */
    unsigned long expect = res->t.total * (fn == loop_floor_open_close || waker ? 2 : 1);
    if (err) {
        res->kind = 2;
        snprintf(res->msg, sizeof res->msg, "%s", strerror(err));
    } else if (waker ? ran < expect : ran != expect) {
        res->kind = 2;
        snprintf(res->msg, sizeof res->msg,
                 "handler ran %lu times, expected %s%lu", ran, waker ? "at least " : "",
                 expect);
    } else {
        res->kind = 0;
    }
}

static void run_sigsys(const char *op, enum sigsys_kind kind, loop_fn fn, int waker,
                       unsigned long iters)
{
    int p[2];
    if (pipe(p) < 0) {
        op_error(op, "pipe", errno);
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        char buf[256];
        snprintf(buf, sizeof buf, "fork: %s", strerror(e));
        print_msg(op, "unavailable", buf);
        close(p[0]);
        close(p[1]);
        return;
    }
    if (pid == 0) {
        struct sigsys_result res;
        memset(&res, 0, sizeof res);
        close(p[0]);
        sigsys_child(kind, fn, waker, iters, &res);
        ssize_t w = write(p[1], &res, sizeof res);
        _exit(w == (ssize_t)sizeof res ? 0 : 1);
    }
    close(p[1]);
    struct sigsys_result res;
    size_t got = 0;
    while (got < sizeof res) {
        ssize_t n = read(p[0], (char *)&res + got, sizeof res - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(p[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (got != sizeof res) {
        char buf[128];
        if (WIFSIGNALED(status))
            snprintf(buf, sizeof buf, "child killed by signal %d",
                     WTERMSIG(status));
        else
            snprintf(buf, sizeof buf, "child exited %d without a result",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        print_msg(op, "error", buf);
        had_error = 1;
        return;
    }
    res.msg[sizeof res.msg - 1] = '\0';
    if (res.kind == 0) {
        print_result(op, &res.t);
    } else if (res.kind == 1) {
        print_msg(op, "unavailable", res.msg);
    } else {
        print_msg(op, "error", res.msg);
        had_error = 1;
    }
}

/* ---- driver ---- */

enum {
    NEED_NULL = 1,
    NEED_FILE = 2,
    NEED_SH = 4,
    NEED_ECHO = 8,
    NEED_HANDLER = 16,
    NEED_SELECT = 32,
    NEED_WAKER = 64, /* arg: WAKE_SIGNAL or WAKE_FUTEX */
    NEED_FORK_SH = 128,
};

struct op {
    const char *name;
    loop_fn fn;
    int needs;
    int arg;    /* NEED_SELECT: how many descriptors */
    enum sigsys_kind sigsys; /* run in a forked child under that filter */
};

static const struct op ops[] = {
    {"getpid", loop_getpid, 0, 0, NOT_SIGSYS},
    {"getppid", loop_getppid, 0, 0, NOT_SIGSYS},
    {"read_null", loop_read_null, NEED_NULL, 0, NOT_SIGSYS},
    {"write_null", loop_write_null, NEED_NULL, 0, NOT_SIGSYS},
    {"fstat_null", loop_fstat_null, NEED_NULL, 0, NOT_SIGSYS},
    {"fstat", loop_fstat, NEED_FILE, 0, NOT_SIGSYS},
    {"stat", loop_stat, NEED_FILE, 0, NOT_SIGSYS},
    {"open_close", loop_open_close, NEED_FILE, 0, NOT_SIGSYS},
    {"select_10", loop_select, NEED_FILE | NEED_SELECT, 10, NOT_SIGSYS},
    {"select_100", loop_select, NEED_FILE | NEED_SELECT, 100, NOT_SIGSYS},
    {"sig_install", loop_sig_install, 0, 0, NOT_SIGSYS},
    {"signal", loop_signal, NEED_HANDLER, 0, NOT_SIGSYS},
    {"pipe_rt", loop_pipe_rt, NEED_ECHO, 0, NOT_SIGSYS},
    {"vfork_exit", loop_vfork_exit, 0, 0, NOT_SIGSYS},
    {"vfork_exec", loop_vfork_exec, 0, 0, NOT_SIGSYS},
    {"spawn", loop_spawn, 0, 0, NOT_SIGSYS},
    {"spawn_sh", loop_spawn_sh, NEED_SH, 0, NOT_SIGSYS},
    {"subst_1000", loop_subst_1000, NEED_FORK_SH, 0, NOT_SIGSYS},
    {"wake_futex", loop_wake_futex, NEED_WAKER, WAKE_FUTEX, NOT_SIGSYS},
    {"wake_sigsuspend", loop_wake_sigsuspend, NEED_WAKER | NEED_HANDLER, WAKE_SIGNAL, NOT_SIGSYS},
    {"wake_sigtimedwait", loop_wake_sigtimedwait, NEED_WAKER | NEED_HANDLER, WAKE_SIGNAL, NOT_SIGSYS},
    {"wake_stop_cont", loop_wake_stop_cont, 0, 0, NOT_SIGSYS},
    {"thread", loop_thread, 0, 0, NOT_SIGSYS},
    {"exit_0", loop_exit_0, 0, 0, NOT_SIGSYS},
    {"exit_1m", loop_exit_1m, 0, 0, NOT_SIGSYS},
    {"exit_16m", loop_exit_16m, 0, 0, NOT_SIGSYS},
    {"exit_256m", loop_exit_256m, 0, 0, NOT_SIGSYS},
    {"exit_map4g", loop_exit_map4g, 0, 0, NOT_SIGSYS},
    {"exit_threads", loop_exit_threads, 0, 0, NOT_SIGSYS},
    {"fork_exit_1m", loop_fork_exit_1m, 0, 0, NOT_SIGSYS},
    {"fork_exit_64m", loop_fork_exit_64m, 0, 0, NOT_SIGSYS},
    {"fork_exec", loop_fork_exec, 0, 0, NOT_SIGSYS},
    {"forked_getppid", loop_getppid, 0, 0, FORKED},
    {"forked_fstat", loop_fstat, NEED_FILE, 0, FORKED},
    {"sigsys_raw", loop_sigsys, 0, 0, SIGSYS_RAW},
    {"sigsys_floor_getpid", loop_floor_getpid, 0, 0, SIGSYS_FLOOR},
    {"sigsys_floor_fstat", loop_floor_fstat, NEED_FILE, 0, SIGSYS_FLOOR},
    {"sigsys_floor_stat", loop_floor_stat, NEED_FILE, 0, SIGSYS_FLOOR},
    {"sigsys_floor_open_close", loop_floor_open_close, NEED_FILE, 0, SIGSYS_FLOOR},
    {"sigsys_floor_wake_futex", loop_wake_futex, NEED_WAKER, WAKE_FUTEX, SIGSYS_FLOOR},
    {"sigsys_floor_wake_sigsuspend", loop_wake_sigsuspend, NEED_WAKER | NEED_HANDLER, WAKE_SIGNAL, SIGSYS_FLOOR},
    {"sigsys_floor_wake_sigtimedwait", loop_wake_sigtimedwait, NEED_WAKER | NEED_HANDLER, WAKE_SIGNAL, SIGSYS_FLOOR},
    {"filter_read_null", loop_read_null, NEED_NULL, 0, NOMU_FILTER},
    {"filter_write_null", loop_write_null, NEED_NULL, 0, NOMU_FILTER},
    {"filter_fstat_null", loop_fstat_null, NEED_NULL, 0, NOMU_FILTER},
    {"filter_fstat", loop_fstat, NEED_FILE, 0, NOMU_FILTER},
    {"filter_stat", loop_stat, NEED_FILE, 0, NOMU_FILTER},
    {"filter_open_close", loop_open_close, NEED_FILE, 0, NOMU_FILTER},
    {"filter_select_10", loop_select, NEED_FILE | NEED_SELECT, 10, NOMU_FILTER},
    {"filter_select_100", loop_select, NEED_FILE | NEED_SELECT, 100, NOMU_FILTER},
    {"filter_sig_install", loop_sig_install, 0, 0, NOMU_FILTER},
    {"filter_signal", loop_signal, NEED_HANDLER, 0, NOMU_FILTER},
    {"filter_pipe_rt", loop_pipe_rt, NEED_ECHO, 0, NOMU_FILTER},
};
#define NOPS (sizeof ops / sizeof ops[0])

/* One op in this process: its setup, the timed loops, its result line. */
static void run_plain(const struct op *op, unsigned long iters)
{
    if ((op->needs & NEED_FORK_SH) && !fork_sh_path) {
        print_msg(op->name, "unavailable", "no --fork-sh BUSYBOX given");
        return;
    }
    if ((op->needs & NEED_SH) && !sh_path) {
        print_msg(op->name, "unavailable", "no --sh BUSYBOX given");
        return;
    }
    pid_t echo_pid = -1;
    if (op->needs & NEED_ECHO) {
        int e = start_echo_child(&echo_pid);
        if (e) {
            op_error(op->name, "start the echo child", e);
            return;
        }
    }
    if (op->needs & NEED_HANDLER)
        signal(SIGUSR1, on_usr1);
    if (op->needs & NEED_SELECT) {
        int e = open_select_fds(op->arg);
        if (e) {
            close_select_fds();
            op_error(op->name, "open the descriptors", e);
            return;
        }
    }
    sigset_t usr1, old_mask;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    if (op->needs & NEED_WAKER) {
        /* Blocked before the waker exists, so it inherits the block
         * and the signal is for the main thread's waits only. */
        pthread_sigmask(SIG_BLOCK, &usr1, &old_mask);
        int e = start_waker(op->arg);
        if (e) {
            pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
            op_error(op->name, "start the waker thread", e);
            return;
        }
    }
    struct timing t;
    int err = measure(op->fn, iters, &t);
    if (op->needs & NEED_WAKER) {
        stop_waker();
        pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    }
    if (op->needs & NEED_SELECT)
        close_select_fds();
    if (echo_pid > 0) {
        close(echo_to);
        close(echo_from);
        wait_ok(echo_pid);
    }
    if (err) {
        const char *what = op->name;
        char buf[4200];
        if (op->needs & NEED_FILE) {
            snprintf(buf, sizeof buf, "%s %s", op->name, file_path);
            what = buf;
        }
        op_error(op->name, what, err);
        return;
    }
    print_result(op->name, &t);
}

/* nomu's seccomp filter (--filter: its instructions as hex, 16 digits each,
 * code jt jf k in struct sock_filter's byte order), as `nomu bench` gives
 * it: the range of guest memory nomu traps, everything else allowed. */
static struct bpf_insn nomu_filter[64];
static unsigned short nomu_filter_len;


static int parse_filter(const char *hex)
{
    size_t n = strlen(hex);
    if (n == 0 || n % 16 || n / 16 > sizeof nomu_filter / sizeof nomu_filter[0])
        return -1;
    unsigned char bytes[sizeof nomu_filter];
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -1;
        bytes[i] = (unsigned char)v;
    }
    memcpy(nomu_filter, bytes, n / 2);
    nomu_filter_len = (unsigned short)(n / 16);
    return 0;
}

/* A host-backed op's floor under nomu's in-process paths: the op run
 * natively in a forked child with nomu's own filter installed, so that
 * each of its host calls (and those of its echo child, which inherits the
 * filter) pays what every host call nomu makes pays. Its result line is
 * the child's, under the op's filter_ name. */
/* One op in a child of this process: under nomu's filter (NOMU_FILTER),
 * or as it is (FORKED: what a forked process's syscalls cost). */
static void run_in_child(const struct op *op, unsigned long iters)
{
    if (op->sigsys == NOMU_FILTER && !nomu_filter_len) {
        print_msg(op->name, "unavailable", "no --filter given");
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        char buf[256];
        snprintf(buf, sizeof buf, "fork: %s", strerror(errno));
        print_msg(op->name, "unavailable", buf);
        return;
    }
    if (pid == 0 && op->sigsys == FORKED) {
        run_plain(op, iters);
        fflush(stdout);
        _exit(had_error ? 1 : 0);
    }
    if (pid == 0) {
        struct bpf_prog prog = {.len = nomu_filter_len, .filter = nomu_filter};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) < 0) {
            op_error(op->name, "prctl(PR_SET_NO_NEW_PRIVS)", errno);
            _exit(1);
        }
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER_, 0u, &prog) < 0) {
            op_error(op->name, "seccomp", errno);
            _exit(1);
        }
        if (prctl(PR_GET_SECCOMP, 0L, 0L, 0L, 0L) != 2) {
            op_error(op->name, "the filter is not in force", EPROTO);
            _exit(1);
        }
        if (dispatch_on() < 0) {
            op_error(op->name, "prctl(PR_SET_SYSCALL_USER_DISPATCH)", errno);
            _exit(1);
        }
        in_floor = 1;
        run_plain(op, iters);
        fflush(stdout);
        _exit(had_error ? 1 : 0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status)) {
        char buf[64];
        snprintf(buf, sizeof buf, "child killed by signal %d", WTERMSIG(status));
        print_msg(op->name, "error", buf);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status))
        had_error = 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: syscall_bench [--iters N | --time-ms N] [--reps N] [--dir DIR] "
               "[--sh BUSYBOX] [--fork-sh BUSYBOX] [--filter HEX] [--dispatch-from HEX] [--progress] [OP...]\nops:");
    for (size_t i = 0; i < NOPS; i++)
        fprintf(f, " %s", ops[i].name);
    fprintf(f, "\n");
}

static int parse_iters(const char *s, unsigned long *out)
{
    char *end;
    if (!s || !*s || *s == '-')
        return -1;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v == 0)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    unsigned long iters = 0; /* 0: picked per op (--time-ms) */
    const char *dir = "/tmp";
    int selected[NOPS] = {0};
    int any_selected = 0;

    self_path = argv[0];
    /* The trivial children the process benchmarks start, first: the
     * cpuid below is a VM exit (6.6 us on the Intel Xeon VM of issue 15,
     * more than a tenth of a native vfork + execve + wait there), which
     * the exec benchmarks' child must not pay. */
    if (argc >= 2 && !strcmp(argv[1], "--child-exit"))
        return 0;
    if (argc == 4 && !strcmp(argv[1], "--child-exit-after"))
        return exit_after(argv[2], argv[3]);
    floor_fill_rsb = (unsigned char)cpu_is_amd();
    if (argc >= 2 && !strcmp(argv[1], "--child-stopper"))
        for (;;)
            raise(SIGSTOP);
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "--child-echo")) {
        int r = atoi(argv[2]), w = atoi(argv[3]);
        if (argc == 5) {
            dispatch_from = strtoul(argv[4], NULL, 16);
            if (dispatch_on() < 0)
                return 1;
        }
        char c;
        while (read(r, &c, 1) == 1 && write(w, &c, 1) == 1)
            ;
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--fork-sh") && i + 1 < argc) {
            fork_sh_path = argv[++i];
            continue;
        }
        if (!strcmp(a, "--sh") && i + 1 < argc) {
            sh_path = argv[++i];
            continue;
        }
        if (!strcmp(a, "--filter") && i + 1 < argc) {
            if (parse_filter(argv[++i]) < 0) {
                fprintf(stderr, "syscall_bench: bad --filter value\n");
                usage(stderr);
                return 2;
            }
            continue;
        }
        if (!strcmp(a, "--dispatch-from") && i + 1 < argc) {
            char *end;
            dispatch_from = strtoul(argv[++i], &end, 16);
            if (*end || !dispatch_from) {
                fprintf(stderr, "syscall_bench: bad --dispatch-from value\n");
                usage(stderr);
                return 2;
            }
            continue;
        }
        if (!strcmp(a, "--progress")) {
            progress = 1;
            continue;
        }
        if (!strcmp(a, "--reps") && i + 1 < argc) {
            unsigned long n;
            if (parse_iters(argv[++i], &n) < 0 || n > MAX_REPS) {
                fprintf(stderr, "syscall_bench: bad --reps value (1-%d)\n", MAX_REPS);
                usage(stderr);
                return 2;
            }
            reps = (int)n;
            continue;
        }
        if (!strcmp(a, "--time-ms") && i + 1 < argc) {
            unsigned long ms;
            if (parse_iters(argv[++i], &ms) < 0) {
                fprintf(stderr, "syscall_bench: bad --time-ms value\n");
                usage(stderr);
                return 2;
            }
            target_ns = (double)ms * 1e6;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stderr);
            return 0;
        } else if (!strcmp(a, "--iters") || !strncmp(a, "--iters=", 8)) {
            const char *v = a[7] == '=' ? a + 8 : (i + 1 < argc ? argv[++i] : NULL);
            if (parse_iters(v, &iters) < 0) {
                fprintf(stderr, "syscall_bench: bad --iters value\n");
                usage(stderr);
                return 2;
            }
        } else if (!strcmp(a, "--dir") || !strncmp(a, "--dir=", 6)) {
            const char *v = a[5] == '=' ? a + 6 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || !*v) {
                fprintf(stderr, "syscall_bench: --dir needs a value\n");
                usage(stderr);
                return 2;
            }
            dir = v;
        } else {
            size_t k;
            for (k = 0; k < NOPS; k++)
                if (!strcmp(a, ops[k].name))
                    break;
            if (k == NOPS) {
                fprintf(stderr, "syscall_bench: unknown op or option '%s'\n", a);
                usage(stderr);
                return 2;
            }
            selected[k] = 1;
            any_selected = 1;
        }
    }
    if (!any_selected)
        for (size_t k = 0; k < NOPS; k++)
            selected[k] = 1;

    int needs = 0;
    for (size_t k = 0; k < NOPS; k++)
        if (selected[k])
            needs |= ops[k].needs;

    int null_err = 0, file_err = 0;
    char file_msg[4200] = "";
    if (needs & NEED_NULL) {
        null_fd = open("/dev/null", O_RDWR);
        if (null_fd < 0)
            null_err = errno;
    }
    if (needs & NEED_FILE) {
        int n = snprintf(file_path, sizeof file_path, "%s/syscall_bench.XXXXXX", dir);
        if (n < 0 || (size_t)n >= sizeof file_path) {
            file_err = ENAMETOOLONG;
            snprintf(file_msg, sizeof file_msg, "create file in %s", dir);
        } else {
            int fd = mkstemp(file_path);
            if (fd < 0) {
                file_err = errno;
                snprintf(file_msg, sizeof file_msg, "create %s", file_path);
            } else {
                static const char data[] = "syscall_bench\n";
                if (write(fd, data, sizeof data - 1) != (ssize_t)(sizeof data - 1)) {
                    file_err = errno ? errno : EIO;
                    snprintf(file_msg, sizeof file_msg, "write %s", file_path);
                }
                close(fd);
                if (!file_err) {
                    file_fd = open(file_path, O_RDONLY);
                    if (file_fd < 0) {
                        file_err = errno;
                        snprintf(file_msg, sizeof file_msg, "open %s", file_path);
                    }
                }
                if (file_err) {
                    unlink(file_path);
                    file_path[0] = '\0';
                }
            }
        }
    }

    for (size_t k = 0; k < NOPS; k++) {
        if (!selected[k])
            continue;
        const struct op *op = &ops[k];
        if (progress) {
            printf("begin=%s\n", op->name);
            fflush(stdout);
        }
        if ((op->needs & NEED_NULL) && null_err) {
            op_error(op->name, "open /dev/null", null_err);
            continue;
        }
        if ((op->needs & NEED_FILE) && file_err) {
            op_error(op->name, file_msg, file_err);
            continue;
        }
        if (op->sigsys == SIGSYS_RAW || op->sigsys == SIGSYS_FLOOR) {
            run_sigsys(op->name, op->sigsys, op->fn, op->needs & NEED_WAKER ? op->arg : 0, iters);
            continue;
        }
        if (op->sigsys == NOMU_FILTER || op->sigsys == FORKED) {
            run_in_child(op, iters);
            continue;
        }
        run_plain(op, iters);
    }

    if (file_fd >= 0)
        close(file_fd);
    if (file_path[0])
        unlink(file_path);
    if (null_fd >= 0)
        close(null_fd);
    return had_error ? 1 : 0;
}
